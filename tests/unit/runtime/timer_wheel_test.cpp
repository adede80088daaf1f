// timer_wheel_test.cpp: the hierarchical timing wheel
// (src/runtime/timer_wheel.hpp) on its own, with a simulated clock: insert,
// erase and expire; never early, and no later than the deadline rounded up
// to a tick; cascades through every level; far deadlines (the overflow
// list); next_due() as a game loop uses it; expiring in batches.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "timer_wheel.hpp"

namespace {

using weft::detail::timer_node;
using weft::detail::timer_wheel;
using tp = std::chrono::steady_clock::time_point;
using ns = std::chrono::nanoseconds;

constexpr std::int64_t tick = timer_wheel::tick_ns;
tp at(std::int64_t n) { return tp(ns(n)); }
std::int64_t ns_of(tp t) { return std::chrono::duration_cast<ns>(t.time_since_epoch()).count(); }
// rounded_up() is when, rounded up to the wheel's tick: the latest a node may
// be handed out (by an expire() at or after it).
std::int64_t rounded_up(std::int64_t when) { return (when + tick - 1) / tick * tick; }

// expire_all() drains what is due at `now`, in batches of 7; checks SCHED-T3 (never
// early) for every node.
std::vector<timer_node*> expire_all(timer_wheel& w, std::int64_t now) {
    std::vector<timer_node*> out;
    timer_node* batch[7];
    for (;;) {
        const std::size_t n = w.expire(at(now), batch, 7);
        for (std::size_t i = 0; i < n; ++i) {
            EXPECT_LE(ns_of(batch[i]->when), now) << "a node came out before its deadline";
            EXPECT_EQ(batch[i]->slot, timer_node::unlinked);
            out.push_back(batch[i]);
        }
        if (n < 7) return out;
    }
}

const std::int64_t start = std::int64_t{1000} * 1000 * 1000 * 1000;  // 1000 s after the clock's epoch

TEST(timer_wheel, an_empty_wheel_has_nothing_due) {
    timer_wheel w(at(start));
    EXPECT_TRUE(w.empty());
    EXPECT_EQ(w.next_due(), timer_wheel::never);
    EXPECT_TRUE(expire_all(w, start + 1'000'000'000).empty());
}

TEST(timer_wheel, insert_then_expire_at_the_deadline_not_before) {
    timer_wheel w(at(start));
    timer_node a, b, c;
    a.when = at(start + 100'000);     // 100 us
    b.when = at(start + 5'000'000);   // 5 ms
    c.when = at(start + 5'000'000);   // the same deadline
    w.insert(&a);
    w.insert(&b);
    w.insert(&c);
    EXPECT_EQ(w.size(), 3u);
    EXPECT_LE(w.next_due(), rounded_up(start + 100'000));
    EXPECT_TRUE(expire_all(w, start + 99'999).empty());
    auto first = expire_all(w, rounded_up(start + 100'000));
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0], &a);
    EXPECT_TRUE(expire_all(w, start + 4'999'999).empty());
    auto second = expire_all(w, rounded_up(start + 5'000'000));
    EXPECT_EQ(second.size(), 2u);
    EXPECT_TRUE(w.empty());
    EXPECT_EQ(w.next_due(), timer_wheel::never);
}

TEST(timer_wheel, erase_takes_a_node_out_once_and_it_never_fires) {
    timer_wheel w(at(start));
    timer_node a, b;
    a.when = at(start + 1'000'000);
    b.when = at(start + 2'000'000);
    w.insert(&a);
    w.insert(&b);
    EXPECT_TRUE(w.erase(&a));
    EXPECT_FALSE(w.erase(&a)) << "a second erase finds nothing";
    EXPECT_EQ(w.size(), 1u);
    auto out = expire_all(w, start + 10'000'000);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0], &b);
    EXPECT_FALSE(w.erase(&b)) << "an expired node is in no wheel";
    // A node is reusable after it expired or was erased; one whose deadline
    // has passed is due at once.
    w.insert(&a);
    EXPECT_LE(w.next_due(), start + 10'000'000);
    EXPECT_EQ(expire_all(w, start + 10'000'000).size(), 1u);
}

TEST(timer_wheel, erasing_the_earliest_moves_next_due_on) {
    timer_wheel w(at(start));
    timer_node a, b;
    a.when = at(start + 1'000'000);
    b.when = at(start + 900'000'000);
    w.insert(&a);
    w.insert(&b);
    const std::int64_t with_a = w.next_due();
    EXPECT_LE(with_a, rounded_up(start + 1'000'000));
    w.erase(&a);
    EXPECT_GT(w.next_due(), with_a);
    EXPECT_LE(w.next_due(), rounded_up(start + 900'000'000));
    w.erase(&b);
    EXPECT_EQ(w.next_due(), timer_wheel::never);
}

// The CI failure of 2026-11-23: on a machine up for about 9.3 hours, a
// deadline one hour away crossed the 2^31-tick (2^45 ns) boundary, sat in a
// level-5 slot that starts at that boundary, and next_due() (the slot start,
// 38 s away) was what next_timer_due() reported. earliest() is the deadline
// itself, also after the earliest node leaves and after nodes move down.
TEST(timer_wheel, earliest_is_the_deadline_across_a_coarse_boundary) {
    const std::int64_t boundary = std::int64_t{1} << 45;
    const std::int64_t now = boundary - 38'000'000'000;
    const std::int64_t hour = std::int64_t{3600} * 1'000'000'000;
    timer_wheel w(at(now));
    EXPECT_EQ(w.earliest(), timer_wheel::never);
    timer_node a, b, c;
    a.when = at(now + hour);
    b.when = at(now + hour + 5'000'000'000);
    c.when = at(now + 2 * hour);
    for (timer_node* n : {&c, &b, &a}) w.insert(n);
    EXPECT_EQ(w.next_due(), boundary) << "the earliest slot is a coarse one that starts at the boundary";
    EXPECT_EQ(w.earliest(), rounded_up(now + hour));
    w.erase(&a);
    EXPECT_EQ(w.earliest(), rounded_up(now + hour + 5'000'000'000)) << "found again after the earliest left";
    // Past the boundary the wheel moves b and c down; the earliest stays b.
    EXPECT_TRUE(expire_all(w, boundary + 1'000'000).empty());
    EXPECT_GT(w.next_due(), boundary);
    EXPECT_EQ(w.earliest(), rounded_up(now + hour + 5'000'000'000));
    w.insert(&a);
    EXPECT_EQ(w.earliest(), rounded_up(now + hour)) << "an insert lowers it";
    const auto out = expire_all(w, rounded_up(now + hour + 5'000'000'000));
    EXPECT_EQ(out.size(), 2u);
    EXPECT_EQ(w.earliest(), rounded_up(now + 2 * hour));
    w.erase(&c);
    EXPECT_EQ(w.earliest(), timer_wheel::never);
}

// earliest() against a brute-force minimum, over random inserts, erases and
// expiries.
TEST(timer_wheel, earliest_matches_the_least_deadline) {
    std::mt19937_64 rng(7);
    timer_wheel w(at(start));
    std::vector<timer_node> nodes(400);
    std::vector<bool> in(nodes.size(), false);
    std::int64_t now = start;
    for (int step = 0; step < 10000; ++step) {
        const std::size_t i = rng() % nodes.size();
        if (!in[i]) {
            // Spans from a tick to about ten hours: every level.
            const std::int64_t span = std::int64_t{1} << (14 + rng() % 32);
            nodes[i].when = at(now + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(span)));
            w.insert(&nodes[i]);
            in[i] = true;
        } else if (rng() % 2) {
            EXPECT_TRUE(w.erase(&nodes[i]));
            in[i] = false;
        } else {
            now += static_cast<std::int64_t>(rng() % 100'000'000);
            for (timer_node* n : expire_all(w, now)) in[static_cast<std::size_t>(n - nodes.data())] = false;
        }
        std::int64_t least = timer_wheel::never;
        for (std::size_t k = 0; k < nodes.size(); ++k)
            if (in[k]) least = std::min(least, rounded_up(ns_of(nodes[k].when)));
        const std::int64_t e = w.earliest();
        if (least == timer_wheel::never) {
            ASSERT_EQ(e, timer_wheel::never) << "step " << step;
        } else {
            // Every node whose deadline passed has been handed out, so the
            // least deadline left is after `now` rounded down to a tick.
            ASSERT_EQ(e, least) << "step " << step;
        }
    }
}

TEST(timer_wheel, a_deadline_in_the_past_is_due_at_once) {
    timer_wheel w(at(start));
    (void)expire_all(w, start + 50'000'000);  // the wheel's clock moves on
    timer_node a, b;
    a.when = at(start);  // before the wheel's position
    b.when = at(0);      // the clock's epoch
    w.insert(&a);
    w.insert(&b);
    EXPECT_LE(w.next_due(), start + 50'000'000 + tick);
    EXPECT_EQ(expire_all(w, start + 50'000'000 + tick).size(), 2u);
}

// Deadlines 64^L ticks away sit at level L and move down level by level.
TEST(timer_wheel, cascades_through_every_level) {
    timer_wheel w(at(start));
    std::vector<timer_node> nodes(timer_wheel::levels * 3);
    std::int64_t span = tick;
    std::size_t k = 0;
    for (unsigned level = 0; level < timer_wheel::levels; ++level, span *= 64) {
        for (std::int64_t off : {span, span + tick / 3, 2 * span - 1}) {
            nodes[k].when = at(start + off);
            w.insert(&nodes[k]);
            ++k;
        }
    }
    std::vector<timer_node*> order;
    // Drive the wheel the way a game loop does: expire at next_due() until
    // empty; every node comes out at or after its deadline and by its
    // deadline rounded up.
    std::size_t steps = 0;
    while (!w.empty()) {
        const std::int64_t now = w.next_due();
        ASSERT_NE(now, timer_wheel::never);
        for (timer_node* n : expire_all(w, now)) {
            EXPECT_LE(now, rounded_up(ns_of(n->when))) << "later than the deadline rounded up";
            order.push_back(n);
        }
        ASSERT_LT(++steps, nodes.size() * (timer_wheel::levels + 1)) << "next_due() makes no progress";
    }
    ASSERT_EQ(order.size(), nodes.size());
    // Earliest tick first (nodes of one tick come out in any order).
    EXPECT_TRUE(std::is_sorted(order.begin(), order.end(), [](timer_node* a, timer_node* b) {
        return timer_wheel::tick_of(a->when) < timer_wheel::tick_of(b->when);
    }));
}

TEST(timer_wheel, far_deadlines_wait_in_the_overflow_list_and_still_fire) {
    timer_wheel w(at(start));
    const std::int64_t day = std::int64_t{86'400} * 1000 * 1000 * 1000;
    timer_node month, year, never;
    month.when = at(start + 30 * day);   // beyond 64^6 ticks (about 13 days)
    year.when = at(start + 365 * day);
    never.when = tp::max();
    w.insert(&month);
    w.insert(&year);
    w.insert(&never);
    EXPECT_TRUE(expire_all(w, start + 30 * day - 1).empty());
    auto out = expire_all(w, rounded_up(start + 30 * day));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0], &month);
    EXPECT_TRUE(expire_all(w, start + 365 * day - 1).empty());
    out = expire_all(w, rounded_up(start + 365 * day));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0], &year);
    EXPECT_TRUE(w.erase(&never));
    EXPECT_TRUE(w.empty());
}

TEST(timer_wheel, expire_hands_out_at_most_max_and_keeps_the_rest_due) {
    timer_wheel w(at(start));
    std::vector<timer_node> nodes(10);
    for (auto& n : nodes) {
        n.when = at(start + 1'000'000);
        w.insert(&n);
    }
    timer_node* out[4];
    const std::int64_t now = rounded_up(start + 1'000'000);
    EXPECT_EQ(w.expire(at(now), out, 4), 4u);
    EXPECT_LE(w.next_due(), now) << "the rest is still due";
    EXPECT_EQ(w.expire(at(now), out, 4), 4u);
    EXPECT_EQ(w.expire(at(now), out, 4), 2u);
    EXPECT_TRUE(w.empty());
}

// Random deadlines over seven orders of magnitude, random erases, a clock
// moving in random steps: every node comes out exactly once, never early,
// and none is left behind that was due at the previous step rounded up.
TEST(timer_wheel, random_deadlines_never_early_never_lost) {
    std::mt19937_64 rng(12345);
    timer_wheel w(at(start));
    std::vector<timer_node> nodes(20'000);
    std::vector<int> fired(nodes.size(), 0);
    std::vector<bool> erased(nodes.size(), false);
    std::int64_t now = start;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        const int digits = static_cast<int>(rng() % 7);  // 1 us .. 10 s
        std::int64_t scale = 1000;
        for (int d = 0; d < digits; ++d) scale *= 10;
        nodes[i].when = at(now + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(scale)));
        w.insert(&nodes[i]);
        if (i % 64 == 0) {  // the clock moves while nodes are added
            now += static_cast<std::int64_t>(rng() % 200'000);
            for (timer_node* n : expire_all(w, now)) ++fired[static_cast<std::size_t>(n - nodes.data())];
        }
    }
    for (std::size_t i = 0; i < nodes.size(); i += 3) erased[i] = w.erase(&nodes[i]);
    while (!w.empty()) {
        now += static_cast<std::int64_t>(rng() % 50'000'000);
        for (timer_node* n : expire_all(w, now)) ++fired[static_cast<std::size_t>(n - nodes.data())];
        // Nothing left whose rounded-up deadline has passed.
        for (std::size_t i = 0; i < nodes.size(); ++i)
            if (nodes[i].slot != timer_node::unlinked) {
                ASSERT_GT(rounded_up(ns_of(nodes[i].when)), now) << "node " << i << " is overdue";
            }
    }
    for (std::size_t i = 0; i < nodes.size(); ++i)
        EXPECT_EQ(fired[i] + (erased[i] ? 1 : 0), 1) << "node " << i;
}

}  // namespace
