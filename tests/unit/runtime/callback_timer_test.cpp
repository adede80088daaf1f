// callback_timer_test.cpp: weft::timer (weft/timer.hpp; docs/timers.md,
// "Timers without a task"): a callback runs once at or after its deadline;
// reset() moves a pending timer and says so; stop() keeps the callback from
// running and says whether it did; periodic timers; re-arming and stopping
// allocate nothing; stop racing the firing (each timer's callback runs
// exactly when stop() said it would); the destructor waits for a callback
// running elsewhere, and may run inside the callback itself; a callback
// re-arming its own timer; pending timers do not hold shutdown, and arming
// a stopped runtime's timer throws; a throwing callback reaches the
// unhandled handler; misuse errors. Every test runs with 0, 1, 2 and 4
// workers under a watchdog, leak-checked.

#include <gtest/gtest.h>

#include <malloc.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "unit/runtime/runtime_fixture.hpp"
#include "weft/runtime.hpp"
#include "weft/timer.hpp"

namespace {

using namespace std::chrono_literals;
using weft::test::eventually;
using clk = std::chrono::steady_clock;

class callback_timer_test : public weft::test::runtime_fixture {};

TEST_P(callback_timer_test, runs_once_at_or_after_its_deadline) {
    weft::test::driven_runtime rt(options());
    std::atomic<int> runs{0};
    std::atomic<clk::rep> at{0};
    weft::timer t(rt, [&] {
        at = clk::now().time_since_epoch().count();
        ++runs;
    });
    EXPECT_FALSE(t.pending());
    const auto deadline = clk::now() + 20ms;
    EXPECT_FALSE(t.reset(deadline));  // was not pending
    EXPECT_TRUE(t.pending());
    ASSERT_TRUE(eventually([&] { return runs.load() == 1; }));
    EXPECT_GE(at.load(), deadline.time_since_epoch().count());
    EXPECT_FALSE(t.pending());
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(runs.load(), 1);
    EXPECT_FALSE(t.stop());  // it ran
}

TEST_P(callback_timer_test, reset_moves_a_pending_timer_and_says_so) {
    weft::test::driven_runtime rt(options());
    std::atomic<int> runs{0};
    weft::timer t(rt, [&] { ++runs; });
    EXPECT_FALSE(t.reset(1h));
    EXPECT_TRUE(t.reset(10ms));  // moved from an hour to 10 ms
    ASSERT_TRUE(eventually([&] { return runs.load() == 1; }));
    EXPECT_FALSE(t.reset(1h));  // it had run: not pending
    EXPECT_TRUE(t.stop());
    EXPECT_FALSE(t.stop());
    EXPECT_FALSE(t.pending());
}

TEST_P(callback_timer_test, stop_keeps_the_callback_from_running) {
    weft::test::driven_runtime rt(options());
    std::atomic<int> runs{0};
    weft::timer t(rt, [&] { ++runs; });
    t.reset(30ms);
    EXPECT_TRUE(t.stop());
    EXPECT_FALSE(t.pending());
    // A second timer due later than the first shows that the wheel has
    // passed the stopped one's deadline.
    std::atomic<bool> later{false};
    weft::timer u(rt, [&] { later = true; });
    u.reset(60ms);
    ASSERT_TRUE(eventually([&] { return later.load(); }));
    EXPECT_EQ(runs.load(), 0);
}

TEST_P(callback_timer_test, a_periodic_timer_runs_until_stopped) {
    weft::test::driven_runtime rt(options());
    std::atomic<int> runs{0};
    weft::timer t(rt, [&] { ++runs; });
    t.reset_every(5ms);
    ASSERT_TRUE(eventually([&] { return runs.load() >= 5; }));
    EXPECT_TRUE(t.pending());  // re-armed after each run
    t.stop();
    const int seen = runs.load();
    std::this_thread::sleep_for(40ms);
    EXPECT_EQ(runs.load(), seen);
    EXPECT_FALSE(t.pending());
}

// Re-arming and stopping allocate nothing: a timer costs its block, made
// once. (glibc's count of bytes in use; the sanitizers and valgrind keep
// their own.)
TEST_P(callback_timer_test, rearming_and_stopping_allocate_nothing) {
    weft::test::driven_runtime rt(options());
    std::atomic<int> runs{0};
    std::vector<std::unique_ptr<weft::timer>> ts;
    for (int i = 0; i < 1000; ++i) ts.push_back(std::make_unique<weft::timer>(rt, [&] { ++runs; }));
    for (auto& t : ts) t->reset(1h);
    const auto before = ::mallinfo2().uordblks;
    for (int round = 0; round < 100; ++round)
        for (auto& t : ts) {
            // pending, except right after a round that stopped it
            EXPECT_EQ(t->reset(1h + std::chrono::milliseconds(round)), round == 0 || round % 10 != 0);
            if (round % 10 == 9) {
                EXPECT_TRUE(t->stop());
            }
        }
    const auto after = ::mallinfo2().uordblks;
    if constexpr (!weft::test::sanitized) {
        EXPECT_EQ(after, before);
    }
    EXPECT_EQ(runs.load(), 0);
}

// stop() racing the firing: whatever stop() says is what happens. A timer
// whose stop() returned true never runs; one whose stop() returned false
// ran (or was running) exactly once.
TEST_P(callback_timer_test, stop_racing_the_firing_is_told_the_truth) {
    weft::test::driven_runtime rt(options());
    const int n = weft::test::sanitized ? 300 : 3000;
    std::vector<std::atomic<int>> runs(static_cast<std::size_t>(n));
    std::vector<std::unique_ptr<weft::timer>> ts;
    for (int i = 0; i < n; ++i)
        ts.push_back(std::make_unique<weft::timer>(rt, [&runs, i] { ++runs[static_cast<std::size_t>(i)]; }));
    const auto base = clk::now() + 2ms;
    for (int i = 0; i < n; ++i) ts[static_cast<std::size_t>(i)]->reset(base + std::chrono::microseconds(i % 500));
    std::vector<bool> stopped(static_cast<std::size_t>(n));
    while (clk::now() < base) {
    }
    for (int i = 0; i < n; ++i) stopped[static_cast<std::size_t>(i)] = ts[static_cast<std::size_t>(i)]->stop();
    // Once every timer object is gone, no callback runs any more (TIMER-C3).
    ts.clear();
    int ran = 0, kept = 0;
    for (int i = 0; i < n; ++i) {
        const int r = runs[static_cast<std::size_t>(i)].load();
        EXPECT_EQ(r, stopped[static_cast<std::size_t>(i)] ? 0 : 1) << "timer " << i;
        ran += r;
        kept += stopped[static_cast<std::size_t>(i)] ? 1 : 0;
    }
    EXPECT_EQ(ran + kept, n);
}

// The destructor waits for a callback that is running on another thread,
// so what the callback uses may go right after the timer.
TEST_P(callback_timer_test, the_destructor_waits_for_a_running_callback) {
    weft::test::driven_runtime rt(options());
    std::atomic<bool> started{false}, finished{false};
    auto t = std::make_unique<weft::timer>(rt, [&] {
        started = true;
        std::this_thread::sleep_for(30ms);  // a slow callback (holds its worker)
        finished = true;
    });
    t->reset(clk::now());
    ASSERT_TRUE(eventually([&] { return started.load(); }));
    EXPECT_FALSE(t->stop());  // it is running
    t.reset();
    EXPECT_TRUE(finished.load());
}

// A callback may destroy its own timer, and may re-arm it (Go's pattern of
// Reset inside the func).
TEST_P(callback_timer_test, a_callback_destroys_or_rearms_its_own_timer) {
    weft::test::driven_runtime rt(options());
    std::atomic<int> runs{0};
    std::atomic<bool> gone{false};
    std::unique_ptr<weft::timer> self;
    self = std::make_unique<weft::timer>(rt, [&] {
        if (++runs < 5) {
            self->reset(1ms);
        } else {
            self.reset();  // its own end, from inside: no wait for itself
            gone = true;
        }
    });
    self->reset(1ms);
    ASSERT_TRUE(eventually([&] { return gone.load(); }));
    EXPECT_EQ(self, nullptr);
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(runs.load(), 5);
}

// Pending timers do not hold shutdown, never fire after the workers stop,
// and arming a stopped runtime's timer throws; the timers outlive the
// runtime object safely.
TEST_P(callback_timer_test, pending_timers_do_not_hold_shutdown) {
    std::atomic<int> runs{0};
    std::vector<std::unique_ptr<weft::timer>> ts;
    {
        weft::test::driven_runtime rt(options());
        const int n = weft::test::sanitized ? 10000 : 100000;
        ts.reserve(static_cast<std::size_t>(n));
        for (int i = 0; i < n; ++i) {
            ts.push_back(std::make_unique<weft::timer>(rt, [&] { ++runs; }));
            ts.back()->reset(1h);
        }
        auto h = rt.spawn([] { return 7; });
        EXPECT_EQ(h.join(), 7);
    }  // the runtime stops here, with every timer pending
    EXPECT_EQ(runs.load(), 0);
    EXPECT_EQ(weft::test::errc_of([&] { ts.front()->reset(1ms); }), weft::task_errc::runtime_stopping);
    EXPECT_TRUE(ts.back()->stop());  // still takes it out
    ts.clear();
    EXPECT_EQ(runs.load(), 0);
}

struct seen_failure {
    static inline std::atomic<int> calls{0};
    static inline std::atomic<bool> named{false};
    static void handler(const weft::task_info& info, std::exception_ptr) noexcept {
        named = info.name == "weft::timer";
        ++calls;
    }
};

TEST_P(callback_timer_test, a_throwing_callback_reaches_the_unhandled_handler) {
    seen_failure::calls = 0;
    auto o = options();
    o.unhandled = &seen_failure::handler;
    weft::test::driven_runtime rt(o);
    weft::timer t(rt, [] { throw std::runtime_error("boom"); });
    t.reset(1ms);
    ASSERT_TRUE(eventually([&] { return seen_failure::calls.load() == 1; }));
    EXPECT_TRUE(seen_failure::named.load());
    // The runtime goes on: the timer may be armed again.
    t.reset(1ms);
    ASSERT_TRUE(eventually([&] { return seen_failure::calls.load() == 2; }));
}

TEST_P(callback_timer_test, misuse_is_reported) {
    weft::test::driven_runtime rt(options());
    EXPECT_EQ(weft::test::errc_of([] { weft::timer t([] {}); }), weft::task_errc::not_in_task);
    weft::timer empty;
    EXPECT_FALSE(empty);
    EXPECT_EQ(weft::test::errc_of([&] { empty.reset(1ms); }), weft::task_errc::empty_handle);
    EXPECT_FALSE(empty.stop());
    EXPECT_FALSE(empty.pending());
    weft::timer t(rt, [] {});
    EXPECT_EQ(weft::test::errc_of([&] { t.reset_every(0ms); }), weft::task_errc::bad_option);
    // From inside a task, timer(f) binds to the task's runtime.
    std::atomic<int> runs{0};
    auto h = rt.spawn([&] {
        weft::timer inner([&] { ++runs; });
        inner.reset(1ms);
        weft::this_task::sleep_for(30ms);
        return inner.pending();
    });
    EXPECT_FALSE(h.join());
    EXPECT_EQ(runs.load(), 1);
}

INSTANTIATE_TEST_SUITE_P(workers, callback_timer_test, weft::test::worker_counts(), weft::test::worker_param_name);

}  // namespace
