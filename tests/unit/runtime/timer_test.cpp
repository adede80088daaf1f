// timer_test.cpp: the runtime's timers (docs/timers.md) from the outside:
// sleepers wake in deadline order, never before their deadline (sleep_until,
// sleep_for, wait_for on a handle, a spawn deadline); cancelled waits leave
// no timer behind (next_timer_due()); a task whose timers were added on one
// worker and removed on another (it moved) still sleeps and times out
// correctly; the timer a notified wait leaves behind (TIMER-L1) ends no later
// wait, is moved by the next deadline, and goes with its task; timeouts
// racing wakes and cancellations end each wait once; and many tasks sleep
// at once (env WEFT_TIMER_SLEEPERS;
// 20,000 under sanitizers, valgrind and qemu). Every test runs with 0, 1, 2
// and 4 workers under a watchdog, leak-checked.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "unit/runtime/runtime_fixture.hpp"
#include "timer_wheel.hpp"
#include "weft/runtime.hpp"
#include "weft/sync/event.hpp"

namespace {

using namespace std::chrono_literals;
using weft::test::eventually;
using clk = std::chrono::steady_clock;

class timer_test : public weft::test::runtime_fixture {};

// tick is the timer wheel's tick: next_timer_due() is at most one tick after
// the earliest deadline.
constexpr auto tick = std::chrono::nanoseconds(weft::detail::timer_wheel::tick_ns);

// A 0-worker runtime driven by run_once(): timers that come due together
// fire earliest first, and the tasks they wake run in that order at the next
// call; next_timer_due() says when, and run_once() there fires them.
TEST_P(timer_test, sleepers_wake_in_deadline_order) {
    weft::runtime rt(options());
    constexpr int n = 16;
    std::vector<int> spawn_order(n);
    for (int i = 0; i < n; ++i) spawn_order[static_cast<std::size_t>(i)] = i;
    std::shuffle(spawn_order.begin(), spawn_order.end(), std::mt19937(7));
    std::mutex mu;
    std::vector<int> woke;
    std::vector<clk::time_point> deadline(n), at(n);
    // Deadlines one millisecond apart with workers; with workers = 0 all of
    // them pass before the run_once() that fires them (count, not speed).
    const auto base = clk::now() + 20ms;
    const auto gap = workers() == 0 ? 1ms : 30ms;
    std::vector<weft::join_handle<void>> hs;
    for (int i : spawn_order) {
        deadline[static_cast<std::size_t>(i)] = base + i * gap;
        hs.push_back(rt.spawn([&, i] {
            weft::this_task::sleep_until(deadline[static_cast<std::size_t>(i)]);
            const auto now = clk::now();
            std::lock_guard g(mu);
            at[static_cast<std::size_t>(i)] = now;
            woke.push_back(i);
        }));
    }
    if (workers() == 0) {
        EXPECT_FALSE(rt.next_timer_due().has_value());
        EXPECT_EQ(rt.run_once(), std::size_t(n));  // all are asleep now
        const auto due = rt.next_timer_due();
        ASSERT_TRUE(due.has_value());
        EXPECT_LE(*due, base + tick);
        std::this_thread::sleep_until(base + n * gap);
        while (woke.size() < std::size_t(n)) rt.run_once();
        EXPECT_FALSE(rt.next_timer_due().has_value());
    }
    for (auto& h : hs) h.join();
    ASSERT_EQ(woke.size(), std::size_t(n));
    for (int i = 0; i < n; ++i) EXPECT_GE(at[static_cast<std::size_t>(i)], deadline[static_cast<std::size_t>(i)]) << i;
    if (workers() == 0) {
        EXPECT_TRUE(std::is_sorted(woke.begin(), woke.end()));
    } else {
        // With workers, two wakes only have an order when the first came
        // before the second's deadline (a stalled machine may fire both in
        // one batch): check those pairs.
        for (std::size_t k = 0; k + 1 < woke.size(); ++k) {
            const int a = woke[k], b = woke[k + 1];
            if (at[static_cast<std::size_t>(std::min(a, b))] < deadline[static_cast<std::size_t>(std::max(a, b))]) {
                EXPECT_LT(a, b) << "woke out of deadline order";
            }
        }
    }
}

// Every kind of timer ends its wait at or after its deadline, never before:
// deadlines spread over a few milliseconds, many in the same wheel tick.
TEST_P(timer_test, no_timer_fires_before_its_deadline) {
    weft::runtime rt(options());
    weft::test::driver d(rt);
    const int n = static_cast<int>(weft::test::env_count("WEFT_TIMER_NEVER_EARLY", 400, 100));
    std::atomic<int> early{0}, done{0};
    std::vector<weft::join_handle<void>> hs;
    std::mt19937 rng(11);
    for (int i = 0; i < n; ++i) {
        const auto delay = std::chrono::nanoseconds(rng() % 5'000'000);
        hs.push_back(rt.spawn([&, i, delay] {
            const auto deadline = clk::now() + delay;
            switch (i % 3) {
            case 0:
                weft::this_task::sleep_until(deadline);
                break;
            case 1:
                weft::this_task::sleep_for(delay);
                break;
            default: {
                // A join with a deadline on a task that outlives it.
                auto never = weft::spawn([] { weft::this_task::sleep_for(1h); });
                EXPECT_FALSE(never.wait_until(deadline));
                never.cancel();
                EXPECT_THROW(never.join(), weft::task_canceled);
                break;
            }
            }
            if (clk::now() < deadline) early.fetch_add(1);
            done.fetch_add(1);
        }));
    }
    for (auto& h : hs) h.join();
    EXPECT_EQ(done.load(), n);
    EXPECT_EQ(early.load(), 0) << "timers fired before their deadline";

    // A spawn deadline cancels its task at or after the deadline.
    struct stamp {
        std::atomic<clk::time_point>* out;
        ~stamp() { out->store(clk::now()); }
    };
    std::atomic<clk::time_point> unwound{};
    std::atomic<bool> started{false};
    const auto deadline = clk::now() + 3ms;
    auto h = rt.spawn(
        [&] {
            started = true;
            stamp s{&unwound};
            weft::this_task::sleep_for(1h);
        },
        {.deadline = deadline});
    try {
        h.join();
        ADD_FAILURE() << "the task ended without its deadline";
    } catch (const weft::task_canceled& e) {
        EXPECT_EQ(e.state(), weft::task_state::timed_out);
    }
    // A task whose deadline passed before its first run never runs its body
    // (with a driven 0-worker runtime that can happen): then only the end
    // is checked.
    if (started.load()) {
        EXPECT_GE(unwound.load(), deadline);
    }
    EXPECT_GE(clk::now(), deadline);
}

// Cancelled waits take their timers out: the runtime has no timer pending
// afterwards (O(1) erase from whichever wheel holds the node).
TEST_P(timer_test, cancelled_and_finished_waits_leave_no_timer_behind) {
    weft::runtime rt(options());
    weft::test::driver d(rt);
    EXPECT_FALSE(rt.next_timer_due().has_value());
    constexpr int n = 200;
    std::atomic<int> asleep{0};
    std::vector<weft::join_handle<void>> hs;
    for (int i = 0; i < n; ++i)
        hs.push_back(rt.spawn([&] {
            asleep.fetch_add(1);
            weft::this_task::sleep_for(1h);
        }));
    ASSERT_TRUE(eventually([&] {
        return asleep.load() == n && std::count_if(hs.begin(), hs.end(), [](auto& h) {
                                         return h.state() == weft::task_state::waiting;
                                     }) == n;
    }));
    const auto due = rt.next_timer_due();
    ASSERT_TRUE(due.has_value());
    EXPECT_GT(*due, clk::now() + 30min) << "nothing is due before an hour from now";
    EXPECT_LE(*due, clk::now() + 1h + tick);
    for (auto& h : hs) h.cancel();
    for (auto& h : hs) EXPECT_THROW(h.join(), weft::task_canceled);
    EXPECT_FALSE(rt.next_timer_due().has_value()) << "a cancelled sleep left its timer";

    // A join that ends before its timeout takes its timer out too; so does
    // a task with a spawn deadline that returns before it.
    auto quick = rt.spawn([] { return 7; }, {.timeout = 1h});
    auto waiter = rt.spawn([&] { return quick.wait_for(1h); });
    EXPECT_TRUE(waiter.join());
    EXPECT_EQ(quick.join(), 7);
    EXPECT_FALSE(rt.next_timer_due().has_value()) << "a finished wait or deadline left its timer";
}

// A task adds a timer on one worker and, after it moved, removes it on
// another (the remove locks the wheel it was added to) and sleeps there:
// with two or more workers every round moves (a pinned helper on another
// worker ends the wait and wakes it into that worker's LIFO slot). A spawn
// deadline added from this thread still fires while its task moves.
TEST_P(timer_test, sleep_across_migration) {
    weft::runtime rt(options());
    weft::test::driver d(rt);
    const unsigned nw = std::max(1u, workers());
    const int rounds = 6;
    int moved = 0;
    for (int r = 0; r < rounds; ++r) {
        std::atomic<weft::detail::task_record*> target{nullptr};
        std::atomic<int> chosen{-1};
        std::atomic<bool> over{false};
        // One pinned helper per worker (round-robin homes from this thread).
        std::vector<weft::join_handle<void>> helpers;
        for (unsigned k = 0; k < nw; ++k)
            helpers.push_back(rt.spawn(
                [&, k] {
                    for (;;) {
                        if (over.load()) return;
                        weft::detail::task_record* t = target.load();
                        if (chosen.load() == int(k) && t && t->state.load() == weft::task_state::waiting) return;
                        weft::this_task::sleep_for(100us);
                    }
                },
                {.pinned = true}));
        struct result {
            int before, after;
            bool finished;
            clk::time_point deadline, woke;
        };
        auto t = rt.spawn([&] {
            result res{};
            res.before = weft::this_task::worker();
            std::size_t pick = 0;
            for (std::size_t k = 0; k < helpers.size(); ++k)
                if (int(helpers[k].record()->home) != res.before) pick = k;
            chosen.store(int(pick));
            target.store(weft::detail::current_task());
            // Its timer goes into this worker's wheel; the helper ends the
            // wait, and the remove runs wherever the task resumes.
            res.finished = helpers[pick].wait_for(1h);
            res.after = weft::this_task::worker();
            over.store(true);
            res.deadline = clk::now() + 2ms;
            weft::this_task::sleep_until(res.deadline);
            res.woke = clk::now();
            return res;
        });
        const result res = t.join();
        for (auto& h : helpers) h.join();
        EXPECT_TRUE(res.finished);
        EXPECT_GE(res.woke, res.deadline);
        moved += res.before != res.after;
    }
    // The woken task usually resumes on the waker's worker, but an idle
    // worker may take it first (once in about 300 rounds under TSan with 4
    // workers, it was its old one): what matters is that the moves happen.
    if (workers() >= 2)
        EXPECT_GT(moved, 0) << "the wait never moved the task";
    else
        EXPECT_EQ(moved, 0);
    EXPECT_FALSE(rt.next_timer_due().has_value());

    // A deadline set from this thread (the shared wheel) fires while its
    // task sleeps and yields, moving between workers.
    std::atomic<clk::time_point> unwound{};
    struct stamp {
        std::atomic<clk::time_point>* out;
        ~stamp() { out->store(clk::now()); }
    };
    const auto deadline = clk::now() + 20ms;
    auto mover = rt.spawn(
        [&] {
            stamp s{&unwound};
            for (;;) {
                weft::this_task::sleep_for(200us);
                weft::this_task::yield();
            }
        },
        {.deadline = deadline});
    try {
        mover.join();
        ADD_FAILURE() << "the task ended without its deadline";
    } catch (const weft::task_canceled& e) {
        EXPECT_EQ(e.state(), weft::task_state::timed_out);
    }
    EXPECT_GE(unwound.load(), deadline);
    EXPECT_FALSE(rt.next_timer_due().has_value());
}

// fired() is how many timers the runtime's workers have fired so far.
std::uint64_t fired(const weft::runtime& rt) {
    std::uint64_t n = 0;
    for (const auto& w : rt.stats().workers) n += w.timers;
    return n;
}

// TIMER-L1: a wait ended by its notification leaves its timer in the wheel.
// When that timer fires, during a later wait of the same task, it ends
// nothing: its word names the earlier wait (TASK-W1). The firing is counted,
// so the test knows the left timer did fire inside the second wait.
TEST_P(timer_test, a_timer_left_by_a_notified_wait_ends_no_later_wait) {
    weft::runtime rt(options());
    weft::test::driver d(rt);
    weft::event first, second;
    struct result {
        bool first_set, second_set;
        std::uint64_t fired_during;
        clk::duration second_took;
    };
    auto t = rt.spawn([&] {
        result r{};
        auto setter = weft::spawn([&] {
            weft::this_task::sleep_for(1ms);
            first.set();
        });
        r.first_set = first.wait_for(100ms);  // its timer stays, due 100 ms from the start
        setter.join();
        auto late = weft::spawn([&] {
            weft::this_task::sleep_for(300ms);
            second.set();
        });
        const std::uint64_t before = fired(rt);
        const auto start = clk::now();
        second.wait();  // no deadline: only the set ends it
        r.second_took = clk::now() - start;
        r.second_set = second.is_set();
        r.fired_during = fired(rt) - before;
        late.join();
        return r;
    });
    const result r = t.join();
    EXPECT_TRUE(r.first_set);
    EXPECT_TRUE(r.second_set) << "the left timer ended the later wait";
    EXPECT_GE(r.second_took, 200ms);
    // The left timer (due at 100 ms) and the setter's sleep (300 ms).
    EXPECT_GE(r.fired_during, 2u) << "the left timer did not fire during the second wait";
    EXPECT_FALSE(rt.next_timer_due().has_value()) << "the task's end left its timer";
}

// TIMER-L1: a deadline armed at every wait and never reached (a server's read
// deadline) is moved by each wait, not added again: after many waits one
// timer is pending, at the last deadline; a shorter deadline moves it earlier
// and fires at its time; the task's end takes a left timer out.
TEST_P(timer_test, a_deadline_set_at_every_wait_is_moved_and_fires_when_shortened) {
    weft::runtime rt(options());
    weft::test::driver d(rt);
    constexpr int rounds = 2000;
    struct result {
        int notified;
        bool pending_ok, short_timed_out;
        clk::duration short_took;
    };
    auto t = rt.spawn([&] {
        result r{};
        for (int i = 0; i < rounds; ++i) {
            auto quick = weft::spawn([] {});
            r.notified += quick.wait_for(1h);
        }
        const auto due = rt.next_timer_due();
        r.pending_ok = due && *due > clk::now() + 50min && *due <= clk::now() + 1h + tick;
        weft::event never;
        auto stuck = weft::spawn([&] { never.wait(); });
        const auto start = clk::now();
        r.short_timed_out = !stuck.wait_for(20ms);
        r.short_took = clk::now() - start;
        never.set();
        stuck.join();
        auto quick = weft::spawn([] {});
        (void)quick.wait_for(1h);  // may leave a timer: the end takes it out
        return r;
    });
    const result r = t.join();
    EXPECT_EQ(r.notified, rounds);
    EXPECT_TRUE(r.pending_ok) << "after the waits, the pending timer is not the last wait's deadline";
    EXPECT_TRUE(r.short_timed_out) << "the shorter deadline did not fire";
    EXPECT_GE(r.short_took, 20ms);
    EXPECT_LT(r.short_took, 30s) << "the shorter deadline fired at the old one";
    EXPECT_FALSE(rt.next_timer_due().has_value()) << "the task's end left its timer";
}

// A wait's timeout racing its notification, and a sleep's timer racing a
// cancellation from another thread: each wait ends exactly once, by one of
// the two (counted), never before its deadline when by the timer, and no
// timer is left. Deadlines of 0 to 120 us, so that both sides win often
// (under TSan: the firing's try_end under the wheel's lock, SCHED-T1, against
// the waker's and the cancel's on other threads).
TEST_P(timer_test, timeouts_racing_wakes_and_cancels_end_each_wait_once) {
    weft::runtime rt(options());
    weft::test::driver d(rt);
    constexpr int n = 300;
    std::atomic<int> notified{0}, timed_out{0}, early{0}, unset{0};
    std::vector<std::unique_ptr<weft::event>> evs;
    for (int i = 0; i < n; ++i) evs.push_back(std::make_unique<weft::event>());
    std::vector<weft::join_handle<void>> hs;
    for (int i = 0; i < n; ++i) {
        weft::event* ev = evs[static_cast<std::size_t>(i)].get();
        const auto wait = std::chrono::microseconds((i % 7) * 20);
        hs.push_back(rt.spawn([&notified, &timed_out, &early, &unset, ev, wait] {
            const auto deadline = clk::now() + wait;
            if (ev->wait_until(deadline)) {
                notified.fetch_add(1);
                if (!ev->is_set()) unset.fetch_add(1);
            } else {
                timed_out.fetch_add(1);
                if (clk::now() < deadline) early.fetch_add(1);
            }
        }));
        hs.push_back(rt.spawn([ev, i] {
            for (int k = 0; k < i % 5; ++k) weft::this_task::yield();
            ev->set();
        }));
    }
    for (auto& h : hs) h.join();
    EXPECT_EQ(notified.load() + timed_out.load(), n);
    EXPECT_EQ(unset.load(), 0) << "a wait ended notified without its event set";
    EXPECT_EQ(early.load(), 0) << "a wait timed out before its deadline";

    std::atomic<int> completed{0}, canceled{0};
    std::vector<weft::join_handle<void>> sleepers;
    for (int i = 0; i < n; ++i)
        sleepers.push_back(rt.spawn([&completed, i] {
            weft::this_task::sleep_for(std::chrono::microseconds((i % 7) * 20));
            completed.fetch_add(1);
        }));
    for (int i = 0; i < n; ++i) {
        const auto until = clk::now() + std::chrono::microseconds((i % 3) * 30);
        while (clk::now() < until) {
        }
        sleepers[static_cast<std::size_t>(i)].cancel();
    }
    for (auto& h : sleepers) {
        try {
            h.join();
        } catch (const weft::task_canceled&) {
            canceled.fetch_add(1);
        }
    }
    EXPECT_EQ(completed.load() + canceled.load(), n);
    EXPECT_FALSE(rt.next_timer_due().has_value());
}

// Many tasks sleep at once (copy-stacks: about 1 KB each), each until it is
// released: every one wakes by its timer, never early. Counts only: the
// sleepers are released once all of them have gone to sleep, however long
// spawning took. 100,000 by default (scripts/soak: a million); 5,000 under
// TSan, whose state for each fiber takes two memory mappings that stay
// while the task lives, on top of the shadow mappings that earlier tests of
// the same shard process left (TSan keeps them): 20,000 took one shard of a
// CI run past vm.max_map_count (65,530 mappings; 63,363 at the peak in a
// run that passed), and TSan died failing to map a new thread's shadow stack.
TEST_P(timer_test, many_sleepers_all_wake_by_their_timers_and_none_early) {
    const std::size_t n = weft::test::under_user_mode_emulator()
                              ? 20'000
                              : weft::test::env_count("WEFT_TIMER_SLEEPERS", 100'000,
                                                      weft::test::under_tsan ? 5'000 : 20'000);
    weft::runtime rt(options());
    std::atomic<std::size_t> first{0}, woke{0}, early{0};
    std::atomic<bool> released{false};
    const auto period = std::chrono::milliseconds(n > 100'000 ? 1000 : 200);
    const std::size_t slept = rt.block_on([&] {
        std::vector<weft::join_handle<void>> hs;
        hs.reserve(n);
        for (std::size_t i = 0; i < n; ++i) {
            // Sleeps of the same length from different times: spread over
            // the wheels' slots and levels.
            const auto length = period + std::chrono::microseconds(i % 1000);
            hs.push_back(weft::spawn(
                [&, length] {
                    bool counted = false;
                    for (;;) {
                        const auto deadline = clk::now() + length;
                        if (!counted) {
                            first.fetch_add(1, std::memory_order_relaxed);
                            counted = true;
                        }
                        weft::this_task::sleep_until(deadline);
                        if (clk::now() < deadline) early.fetch_add(1, std::memory_order_relaxed);
                        if (released.load(std::memory_order_acquire)) break;
                    }
                    woke.fetch_add(1, std::memory_order_relaxed);
                },
                {.copy_stack = true}));
        }
        while (first.load(std::memory_order_relaxed) < n) weft::this_task::sleep_for(1ms);
        // All n have started and none has ended: n sleepers at once.
        const std::size_t live = rt.live_tasks();
        released.store(true, std::memory_order_release);
        for (auto& h : hs) h.join();
        return live;
    });
    EXPECT_EQ(slept, n + 1) << "live tasks when released (the sleepers and the root)";
    EXPECT_EQ(woke.load(), n);
    EXPECT_EQ(early.load(), 0u) << "sleepers woke before their deadline";
    EXPECT_FALSE(rt.next_timer_due().has_value());
}

INSTANTIATE_TEST_SUITE_P(workers, timer_test, weft::test::worker_counts(), weft::test::worker_param_name);

}  // namespace
