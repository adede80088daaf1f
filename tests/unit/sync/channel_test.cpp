// channel_test.cpp: channels and select (weft/sync/channel.hpp): rendezvous,
// bounded and unbounded capacity, move-only values, close with drain and a
// range-for, send on a closed channel, timeouts, cancellation mid-wait (no
// value lost or duplicated), tasks and plain threads sharing a channel;
// select: ready cases, uniform choice (fairness), waiting on several cases
// and being woken exactly once, timeout and default cases, cases chosen at
// run time (when(), an optional timeout, every case disabled). Every test runs
// with 0, 1, 2 and 4 workers under a watchdog and the leak check.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <numeric>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime_fixture.hpp"
#include "weft/runtime.hpp"
#include "weft/sync/channel.hpp"
#include "weft/sync/select.hpp"

namespace {

using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;
using weft::channel;
using weft::channel_status;
using weft::test::driven_runtime;
using weft::test::eventually;

class channel_test : public weft::test::runtime_fixture {};

// ------------------------------------------------------------ basic transfer

TEST_P(channel_test, rendezvous_delivers_every_value_in_order) {
    weft::runtime rt(options());
    const long n = 2000;
    const bool ok = rt.block_on([&] {
        channel<long> ch;  // capacity 0
        auto producer = weft::spawn([&] {
            for (long i = 0; i < n; ++i) ch.send(i);
            ch.close();
        });
        long expect = 0;
        bool in_order = true;
        while (auto v = ch.recv()) in_order &= *v == expect++;
        producer.join();
        return in_order && expect == n;
    });
    EXPECT_TRUE(ok);
}

TEST_P(channel_test, a_rendezvous_send_waits_for_its_receiver) {
    weft::runtime rt(options());
    rt.block_on([] {
        channel<int> ch;
        std::atomic<bool> sent{false};
        auto s = weft::spawn([&] {
            ch.send(7);
            sent = true;
        });
        for (int i = 0; i < 50; ++i) weft::this_task::yield();
        EXPECT_FALSE(sent.load());  // nobody received yet
        EXPECT_EQ(ch.try_send(8), channel_status::full);
        EXPECT_EQ(ch.recv(), 7);
        s.join();
        EXPECT_TRUE(sent.load());
    });
}

TEST_P(channel_test, bounded_try_send_and_try_recv_report_full_and_empty) {
    weft::runtime rt(options());
    rt.block_on([] {
        channel<int> ch(3);
        EXPECT_EQ(ch.capacity(), 3u);
        EXPECT_EQ(ch.try_recv().status, channel_status::empty);
        for (int i = 0; i < 3; ++i) EXPECT_EQ(ch.try_send(int(i)), channel_status::ok);
        EXPECT_EQ(ch.try_send(99), channel_status::full);
        EXPECT_EQ(ch.size(), 3u);
        for (int i = 0; i < 3; ++i) {
            auto r = ch.try_recv();
            ASSERT_TRUE(r);
            EXPECT_EQ(*r.value, i);
        }
        EXPECT_EQ(ch.try_recv().status, channel_status::empty);
        ch.close();
        EXPECT_EQ(ch.try_recv().status, channel_status::closed);
        EXPECT_EQ(ch.try_send(1), channel_status::closed);
    });
}

TEST_P(channel_test, a_full_buffer_is_refilled_from_a_waiting_sender) {
    weft::runtime rt(options());
    rt.block_on([] {
        channel<int> ch(2);
        auto s = weft::spawn([&] {
            for (int i = 0; i < 5; ++i) ch.send(i);
        });
        std::vector<int> got;
        for (int i = 0; i < 5; ++i) got.push_back(*ch.recv());
        s.join();
        EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 4}));
    });
}

TEST_P(channel_test, an_unbounded_send_never_waits) {
    weft::runtime rt(options());
    rt.block_on([] {
        channel<int> ch(channel<int>::unbounded);
        for (int i = 0; i < 100'000; ++i) ch.send(i);  // no receiver: would hang if it waited
        EXPECT_EQ(ch.size(), 100'000u);
        long sum = 0;
        for (int i = 0; i < 100'000; ++i) sum += *ch.recv();
        EXPECT_EQ(sum, 100'000L * 99'999 / 2);
    });
}

TEST_P(channel_test, move_only_values_travel_and_are_kept_when_the_send_fails) {
    weft::runtime rt(options());
    rt.block_on([] {
        channel<std::unique_ptr<int>> ch(1);
        ch.send(std::make_unique<int>(5));
        auto p = std::make_unique<int>(6);
        EXPECT_EQ(ch.try_send(std::move(p)), channel_status::full);
        ASSERT_TRUE(p);  // not taken
        EXPECT_EQ(*p, 6);
        EXPECT_EQ(ch.send_for(std::move(p), 5ms), channel_status::timeout);
        ASSERT_TRUE(p);
        auto got = ch.recv();
        ASSERT_TRUE(got && *got);
        EXPECT_EQ(**got, 5);
        ch.close();
        EXPECT_THROW(ch.send(std::move(p)), weft::channel_closed);
        ASSERT_TRUE(p);  // still ours
        EXPECT_EQ(*p, 6);
    });
}

// ------------------------------------------------------------ close

TEST_P(channel_test, close_lets_receivers_drain_then_reports_closed) {
    weft::runtime rt(options());
    rt.block_on([] {
        channel<int> ch(8);
        for (int i = 0; i < 5; ++i) ch.send(i);
        EXPECT_TRUE(ch.close());
        EXPECT_FALSE(ch.close());  // idempotent
        EXPECT_TRUE(ch.is_closed());
        int sum = 0, count = 0;
        for (int& v : ch) {
            sum += v;
            ++count;
        }
        EXPECT_EQ(count, 5);
        EXPECT_EQ(sum, 10);
        EXPECT_EQ(ch.recv(), std::nullopt);
        EXPECT_EQ(ch.recv_for(1ms).status, channel_status::closed);
        EXPECT_THROW(ch.send(1), weft::channel_closed);
    });
}

TEST_P(channel_test, close_wakes_blocked_receivers_and_senders) {
    weft::runtime rt(options());
    rt.block_on([] {
        channel<int> rx;     // receivers block on it
        channel<int> tx(1);  // senders block on it once it is full
        tx.send(100);
        std::atomic<int> receivers_done{0}, senders_refused{0}, kept{0};
        std::vector<weft::join_handle<void>> hs;
        for (int i = 0; i < 4; ++i) {
            hs.push_back(weft::spawn([&] {
                if (!rx.recv()) receivers_done++;
            }));
            hs.push_back(weft::spawn([&, i] {
                int v = i + 1;
                try {
                    tx.send(std::move(v));
                } catch (const weft::channel_closed&) {
                    senders_refused++;
                    if (v == i + 1) kept++;
                }
            }));
        }
        // Wait until all eight are blocked (waiting), then close both.
        for (int spin = 0; spin < 100'000; ++spin) {
            int waiting = 0;
            for (auto& h : hs) waiting += h.state() == weft::task_state::waiting;
            if (waiting == 8) break;
            weft::this_task::sleep_for(100us);
        }
        rx.close();
        tx.close();
        for (auto& h : hs) h.join();
        EXPECT_EQ(receivers_done.load(), 4);
        EXPECT_EQ(senders_refused.load(), 4);
        EXPECT_EQ(kept.load(), 4);
        EXPECT_EQ(tx.recv(), 100);  // the buffered value is still delivered
        EXPECT_EQ(tx.recv(), std::nullopt);
    });
}

// ------------------------------------------------------------ timeouts

TEST_P(channel_test, timed_operations_time_out_never_early) {
    weft::runtime rt(options());
    rt.block_on([] {
        channel<int> ch;
        const auto t0 = clk::now();
        auto r = ch.recv_for(20ms);
        EXPECT_EQ(r.status, channel_status::timeout);
        EXPECT_FALSE(r.value);
        EXPECT_GE(clk::now() - t0, 20ms);
        const auto t1 = clk::now();
        EXPECT_EQ(ch.send_until(1, t1 + 15ms), channel_status::timeout);
        EXPECT_GE(clk::now(), t1 + 15ms);
        // After the timeouts the channel works.
        auto s = weft::spawn([&] { ch.send(3); });
        EXPECT_EQ(ch.recv_for(10s).value, 3);
        s.join();
    });
}

TEST_P(channel_test, a_plain_thread_and_tasks_share_a_channel) {
    driven_runtime rt(options());
    channel<int> to_thread, to_tasks(4);
    auto h = rt.spawn([&] {
        int sum = 0;
        for (int i = 0; i < 100; ++i) to_thread.send(int(i));
        for (int i = 0; i < 100; ++i) sum += *to_tasks.recv();
        return sum;
    });
    long got = 0;
    for (int i = 0; i < 100; ++i) got += *to_thread.recv();  // blocks this thread
    EXPECT_EQ(to_thread.recv_for(5ms).status, channel_status::timeout);
    for (int i = 0; i < 100; ++i) to_tasks.send(i * 2);
    EXPECT_EQ(got, 4950);
    EXPECT_EQ(h.join(), 9900);
}

// ------------------------------------------------------------ cancellation

TEST_P(channel_test, a_canceled_receiver_leaves_the_channel_usable) {
    driven_runtime rt(options());
    channel<int> ch;
    auto r = rt.spawn([&] { return ch.recv(); });
    ASSERT_TRUE(eventually([&] { return r.state() == weft::task_state::waiting; }));
    r.cancel();
    EXPECT_THROW(r.join(), weft::task_canceled);
    // The canceled receiver's node is gone: a send now waits for a new one.
    EXPECT_EQ(ch.try_send(1), channel_status::full);
    auto r2 = rt.spawn([&] { return ch.recv(); });
    ch.send(2);
    EXPECT_EQ(r2.join(), 2);
}

TEST_P(channel_test, a_canceled_sender_keeps_its_value) {
    driven_runtime rt(options());
    channel<std::unique_ptr<int>> ch;
    std::atomic<bool> kept{false};
    auto s = rt.spawn([&] {
        auto p = std::make_unique<int>(41);
        struct check {
            std::unique_ptr<int>& p;
            std::atomic<bool>& kept;
            ~check() { kept = p && *p == 41; }  // runs during the unwind
        } c{p, kept};
        ch.send(std::move(p));
    });
    ASSERT_TRUE(eventually([&] { return s.state() == weft::task_state::waiting; }));
    s.cancel();
    EXPECT_THROW(s.join(), weft::task_canceled);
    EXPECT_TRUE(kept.load());
    EXPECT_EQ(ch.try_recv().status, channel_status::empty);  // nothing was delivered
}

// ------------------------------------------------------------ select

TEST_P(channel_test, select_takes_a_ready_case_and_runs_its_action) {
    weft::runtime rt(options());
    rt.block_on([] {
        channel<int> a(1), b(1);
        b.send(9);
        int got = 0;
        const std::size_t i = weft::select(weft::on_recv(a, [&](std::optional<int> v) { got = *v; }),
                                           weft::on_recv(b, [&](std::optional<int> v) { got = *v * 10; }));
        EXPECT_EQ(i, 1u);
        EXPECT_EQ(got, 90);
        // A send case: an lvalue is moved from only when chosen.
        auto keep = std::make_unique<int>(1);
        auto give = std::make_unique<int>(2);
        channel<std::unique_ptr<int>> full(1), room(1);
        full.send(std::make_unique<int>(0));
        const std::size_t j = weft::select(weft::on_send(full, keep), weft::on_send(room, give));
        EXPECT_EQ(j, 1u);
        EXPECT_TRUE(keep);
        EXPECT_FALSE(give);
        EXPECT_EQ(**room.recv(), 2);
    });
}

TEST_P(channel_test, select_chooses_uniformly_among_ready_cases) {
    weft::runtime rt(options());
    rt.block_on([] {
        channel<int> a(1), b(1);
        int hits[2] = {0, 0};
        const int rounds = 10'000;
        for (int i = 0; i < rounds; ++i) {
            if (a.size() == 0) a.send(1);
            if (b.size() == 0) b.send(2);
            hits[weft::select(weft::on_recv(a), weft::on_recv(b))]++;
        }
        EXPECT_EQ(hits[0] + hits[1], rounds);
        EXPECT_GE(hits[0], rounds * 40 / 100) << hits[0] << " / " << hits[1];
        EXPECT_LE(hits[0], rounds * 60 / 100) << hits[0] << " / " << hits[1];
    });
}

TEST_P(channel_test, select_default_runs_when_nothing_is_ready) {
    weft::runtime rt(options());
    rt.block_on([] {
        channel<int> a;
        bool dflt = false;
        const std::size_t i = weft::select(weft::on_recv(a), weft::on_default([&] { dflt = true; }));
        EXPECT_EQ(i, 1u);
        EXPECT_TRUE(dflt);
        EXPECT_EQ(a.try_send(1), channel_status::full);  // select left no receiver behind
    });
}

TEST_P(channel_test, select_timeout_fires_never_early_and_leaves_no_node) {
    weft::runtime rt(options());
    rt.block_on([] {
        channel<int> a, b;
        bool timed_out = false;
        const auto t0 = clk::now();
        const std::size_t i =
            weft::select(weft::on_recv(a), weft::on_timeout(20ms, [&] { timed_out = true; }), weft::on_recv(b));
        EXPECT_EQ(i, 1u);
        EXPECT_TRUE(timed_out);
        EXPECT_GE(clk::now() - t0, 20ms);
        EXPECT_EQ(a.try_send(1), channel_status::full);
        EXPECT_EQ(b.try_send(1), channel_status::full);
    });
}

TEST_P(channel_test, a_waiting_select_is_woken_exactly_once) {
    weft::runtime rt(options());
    rt.block_on([] {
        for (int round = 0; round < 300; ++round) {
            // Two senders race to complete one select: it takes exactly one
            // value; the other stays with its sender, which is still blocked
            // and delivers it to the plain recv() below.
            channel<int> a, b;
            auto sa = weft::spawn([&] { a.send(1); });
            auto sb = weft::spawn([&] { b.send(2); });
            if (round % 2) weft::this_task::yield();  // vary who arrives first
            int got = 0;
            const std::size_t i = weft::select(weft::on_recv(a, [&](std::optional<int> v) { got = *v; }),
                                               weft::on_recv(b, [&](std::optional<int> v) { got = *v; }));
            ASSERT_EQ(got, int(i) + 1);
            const std::optional<int> other = i == 0 ? b.recv() : a.recv();
            ASSERT_EQ(other, i == 0 ? 2 : 1) << "round " << round;
            sa.join();
            sb.join();
            EXPECT_EQ(a.try_recv().status, channel_status::empty);
            EXPECT_EQ(b.try_recv().status, channel_status::empty);
        }
    });
}

TEST_P(channel_test, select_on_a_closed_channel) {
    weft::runtime rt(options());
    rt.block_on([] {
        channel<int> a, b;
        a.close();
        bool was_closed = false;
        EXPECT_EQ(weft::select(weft::on_recv(a, [&](std::optional<int> v) { was_closed = !v; }), weft::on_recv(b)),
                  0u);
        EXPECT_TRUE(was_closed);
        int v = 5;
        EXPECT_THROW(weft::select(weft::on_send(a, v)), weft::channel_closed);
        EXPECT_EQ(v, 5);
        // A select waiting on a channel that is then closed wakes with nullopt.
        auto closer = weft::spawn([&] {
            weft::this_task::sleep_for(5ms);
            b.close();
        });
        std::optional<int> got = 1;
        EXPECT_EQ(weft::select(weft::on_recv(b, [&](std::optional<int> x) { got = x; })), 0u);
        EXPECT_FALSE(got);
        closer.join();
    });
}

TEST_P(channel_test, a_canceled_select_leaves_its_channels_clean) {
    driven_runtime rt(options());
    channel<int> a, b;
    auto s = rt.spawn([&] { return weft::select(weft::on_recv(a), weft::on_send(b, 3)); });
    ASSERT_TRUE(eventually([&] { return s.state() == weft::task_state::waiting; }));
    s.cancel();
    EXPECT_THROW(s.join(), weft::task_canceled);
    EXPECT_EQ(a.try_send(1), channel_status::full);
    EXPECT_EQ(b.try_recv().status, channel_status::empty);
}

TEST_P(channel_test, select_from_a_plain_thread) {
    driven_runtime rt(options());
    channel<int> a, b;
    auto s = rt.spawn([&] { b.send(4); });
    int got = 0;
    const std::size_t i = weft::select(weft::on_recv(a), weft::on_recv(b, [&](std::optional<int> v) { got = *v; }),
                                       weft::on_timeout(30s));
    EXPECT_EQ(i, 1u);
    EXPECT_EQ(got, 4);
    s.join();
    EXPECT_EQ(weft::select(weft::on_recv(a), weft::on_timeout(1ms)), 1u);
}

TEST(channel_select_test, a_select_of_only_a_default_or_only_a_timeout) {
    bool ran = false;
    EXPECT_EQ(weft::select(weft::on_default([&] { ran = true; })), 0u);
    EXPECT_TRUE(ran);
    const auto t0 = clk::now();
    EXPECT_EQ(weft::select(weft::on_timeout(5ms)), 0u);  // a plain sleep, from a thread
    EXPECT_GE(clk::now() - t0, 5ms);
}

// ------------------------------------------------------------ cases chosen at run time

TEST_P(channel_test, a_disabled_case_is_never_chosen) {
    weft::runtime rt(options());
    rt.block_on([] {
        channel<int> ready(1), room(1);
        ready.send(5);
        bool ran = false;
        // A ready receive that is disabled: the default runs, the value stays.
        EXPECT_EQ(weft::select(weft::when(false, weft::on_recv(ready, [&](std::optional<int>) { ran = true; })),
                               weft::on_default()),
                  1u);
        EXPECT_FALSE(ran);
        // A send with room that is disabled never moves its value.
        auto keep = std::make_unique<int>(7);
        channel<std::unique_ptr<int>> box(1);
        EXPECT_EQ(weft::select(weft::when(false, weft::on_send(box, keep)), weft::on_default()), 1u);
        EXPECT_TRUE(keep);
        EXPECT_EQ(box.try_recv().status, channel_status::empty);
        // Enabled, the same cases are ordinary cases.
        EXPECT_EQ(weft::select(weft::when(true, weft::on_send(box, keep)), weft::on_default()), 0u);
        EXPECT_FALSE(keep);
        EXPECT_EQ(weft::select(weft::when(true, weft::on_recv(ready, [&](std::optional<int> v) { ran = *v == 5; })),
                               weft::on_default()),
                  0u);
        EXPECT_TRUE(ran);
        // A disabled default: the select waits for the timeout instead.
        EXPECT_EQ(weft::select(weft::on_recv(room), weft::when(false, weft::on_default()), weft::on_timeout(2ms)), 2u);
    });
}

TEST_P(channel_test, an_optional_timeout_is_written_once) {
    weft::runtime rt(options());
    rt.block_on([] {
        // An idle limit that may be absent: the same select with and without.
        auto wait = [](channel<int>& ch, std::optional<std::chrono::milliseconds> idle) {
            return weft::select(weft::on_recv(ch), weft::on_timeout(idle));
        };
        channel<int> quiet;
        const auto t0 = clk::now();
        EXPECT_EQ(wait(quiet, 3ms), 1u);  // the limit passes
        EXPECT_GE(clk::now() - t0, 3ms);
        channel<int> late;
        auto s = weft::spawn([&] {
            weft::this_task::sleep_for(20ms);
            late.send(1);
        });
        EXPECT_EQ(wait(late, std::nullopt), 0u);  // no limit: waits for the value
        s.join();
        // The same with a deadline.
        EXPECT_EQ(weft::select(weft::on_recv(quiet), weft::on_deadline(std::optional<clk::time_point>(clk::now()))),
                  1u);
    });
}

TEST_P(channel_test, a_select_with_every_case_disabled_throws) {
    weft::runtime rt(options());
    rt.block_on([] {
        channel<int> a(1);
        a.send(1);
        auto keep = std::make_unique<int>(3);
        channel<std::unique_ptr<int>> box(1);
        EXPECT_THROW(weft::select(weft::when(false, weft::on_recv(a)), weft::when(false, weft::on_send(box, keep)),
                                  weft::on_timeout(std::optional<std::chrono::milliseconds>{})),
                     std::invalid_argument);
        EXPECT_TRUE(keep);  // the value stays with its owner
        EXPECT_EQ(a.try_recv().status, channel_status::ok);
    });
    // From a plain thread too.
    channel<int> b;
    EXPECT_THROW(weft::select(weft::when(false, weft::on_recv(b))), std::invalid_argument);
}

// ------------------------------------------------------------ no value lost or duplicated

// Producers send distinct values with random timeouts; consumers receive
// with random timeouts; some producers and consumers are canceled. Every
// value whose send reported ok is received exactly once; no other value is.
TEST_P(channel_test, no_value_is_lost_or_duplicated_under_timeouts_and_cancels) {
    weft::runtime rt(options());
    const int producers = 4, consumers = 4;
    const int per = weft::test::sanitized ? 500 : 5000;
    for (std::size_t cap : {std::size_t{0}, std::size_t{8}}) {
        channel<std::uint32_t> ch(cap);
        std::atomic<std::uint64_t> sent_sum{0}, recv_sum{0};
        std::atomic<long> sent_n{0}, recv_n{0};
        std::vector<std::vector<std::uint32_t>> got(consumers);
        rt.block_on([&] {
            std::vector<weft::join_handle<void>> ps, cs;
            for (int p = 0; p < producers; ++p)
                ps.push_back(weft::spawn([&, p] {
                    std::uint32_t x = 12345u + p;
                    for (int i = 0; i < per; ++i) {
                        x = x * 1664525u + 1013904223u;
                        const std::uint32_t v = std::uint32_t(p * per + i);
                        std::uint32_t send = v;
                        const auto s = (x >> 28) < 3 ? ch.send_for(std::move(send), std::chrono::microseconds(x % 50))
                                                     : ch.send_for(std::move(send), 1s);
                        if (s == channel_status::ok) {
                            sent_sum += v;
                            sent_n++;
                        }
                    }
                }));
            for (int c = 0; c < consumers; ++c)
                cs.push_back(weft::spawn([&, c] {
                    std::uint32_t x = 777u + c;
                    for (;;) {
                        x = x * 1664525u + 1013904223u;
                        auto r = ch.recv_for(std::chrono::microseconds(20 + x % 100));
                        if (r.status == channel_status::closed) return;
                        if (r.status == channel_status::ok) {
                            got[c].push_back(*r.value);
                            recv_sum += *r.value;
                            recv_n++;
                        }
                    }
                }));
            for (auto& h : ps) h.join();
            ch.close();
            for (auto& h : cs) h.join();
        });
        EXPECT_EQ(sent_n.load(), recv_n.load()) << "capacity " << cap;
        EXPECT_EQ(sent_sum.load(), recv_sum.load()) << "capacity " << cap;
        std::set<std::uint32_t> unique;
        for (auto& g : got) unique.insert(g.begin(), g.end());
        EXPECT_EQ(long(unique.size()), recv_n.load()) << "a value was received twice";
    }
}

INSTANTIATE_TEST_SUITE_P(workers, channel_test, weft::test::worker_counts(), weft::test::worker_param_name);

}  // namespace
