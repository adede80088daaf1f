// event_test.cpp: weft::event, latch, wait_group and barrier
// (weft/sync/event.hpp) from tasks and threads: contracts, timeouts,
// cancellation mid-wait, and the barrier's withdrawal of an arrival.
// Workers 0, 1, 2, 4; leak-checked.

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "sync_test_support.hpp"
#include "weft/sync/event.hpp"

namespace weft::test {
namespace {

class event_test : public sync_fixture {};

TEST_P(event_test, event_set_wakes_all_until_reset) {
    driven_runtime rt(options());
    weft::event e;
    EXPECT_FALSE(e.is_set());
    std::vector<join_handle<void>> hs;
    for (int i = 0; i < 4; ++i) hs.push_back(rt.spawn([&] { e.wait(); }));
    std::thread t([&] { e.wait(); });
    for (auto& h : hs) ASSERT_TRUE(parked(h));
    e.set();
    for (auto& h : hs) h.join();
    t.join();
    EXPECT_TRUE(e.wait_for(1ms));  // set: at once
    e.reset();
    const auto t0 = sync_clock::now();
    EXPECT_FALSE(e.wait_until(t0 + 20ms));
    EXPECT_GE(sync_clock::now() - t0, 20ms);
    auto h = rt.spawn([&] { return e.wait_for(20ms); });
    EXPECT_FALSE(h.join());
    auto c = rt.spawn([&] { e.wait(); });
    ASSERT_TRUE(parked(c));
    c.cancel();
    EXPECT_TRUE(canceled_by_join(c));
    auto later = rt.spawn([&] { return e.wait_for(10s); });
    e.set();
    EXPECT_TRUE(later.join());
}

TEST_P(event_test, latch_counts_down_once) {
    driven_runtime rt(options());
    EXPECT_THROW(weft::latch(-1), std::invalid_argument);
    weft::latch l(3);
    EXPECT_FALSE(l.try_wait());
    EXPECT_THROW(l.count_down(4), std::invalid_argument);
    auto w = rt.spawn([&] { l.wait(); });
    ASSERT_TRUE(parked(w));
    auto timed = rt.spawn([&] { return l.wait_for(10ms); });
    EXPECT_FALSE(timed.join());
    auto c = rt.spawn([&] { l.wait(); });
    ASSERT_TRUE(parked(c));
    c.cancel();
    EXPECT_TRUE(canceled_by_join(c));
    std::vector<join_handle<void>> hs;
    for (int i = 0; i < 2; ++i) hs.push_back(rt.spawn([&] { l.arrive_and_wait(); }));
    std::thread t([&] { l.arrive_and_wait(); });
    for (auto& h : hs) h.join();
    t.join();
    w.join();
    EXPECT_TRUE(l.try_wait());
    EXPECT_TRUE(l.wait_for(0ms));
}

TEST_P(event_test, wait_group_waits_for_the_work) {
    driven_runtime rt(options());
    weft::wait_group wg;
    EXPECT_THROW(wg.add(-1), std::invalid_argument);
    EXPECT_EQ(wg.count(), 0);
    wg.wait();  // zero: at once
    std::atomic<int> ran{0};
    const int n = 20;
    wg.add(n);
    for (int i = 0; i < n; ++i)
        rt.spawn([&] {
              ran.fetch_add(1);
              wg.done();
          }).detach();
    auto waiter_task = rt.spawn([&] { wg.wait(); });
    wg.wait();
    waiter_task.join();
    EXPECT_EQ(ran.load(), n);
    EXPECT_EQ(wg.count(), 0);
    // Reusable, negative add, timeouts and cancellation.
    wg.add(2);
    wg.add(-1);
    EXPECT_EQ(wg.count(), 1);
    EXPECT_THROW(wg.add(-2), std::invalid_argument);
    EXPECT_EQ(wg.count(), 1);
    const auto t0 = sync_clock::now();
    EXPECT_FALSE(wg.wait_for(20ms));
    EXPECT_GE(sync_clock::now() - t0, 20ms);
    auto c = rt.spawn([&] { wg.wait(); });
    ASSERT_TRUE(parked(c));
    c.cancel();
    EXPECT_TRUE(canceled_by_join(c));
    auto ok = rt.spawn([&] { return wg.wait_for(10s); });
    wg.done();
    EXPECT_TRUE(ok.join());
}

TEST_P(event_test, barrier_runs_phases) {
    driven_runtime rt(options());
    const int parties = 4, phases = 30;
    weft::barrier b(parties);
    std::atomic<int> at[phases] = {};
    std::atomic<bool> early{false};
    auto body = [&] {
        for (int p = 0; p < phases; ++p) {
            at[p].fetch_add(1);
            b.arrive_and_wait();
            if (at[p].load() != parties) early = true;  // nobody passes before all arrived
        }
    };
    std::vector<join_handle<void>> hs;
    for (int i = 0; i < parties - 1; ++i) hs.push_back(rt.spawn(body));
    std::thread t(body);
    for (auto& h : hs) h.join();
    t.join();
    EXPECT_FALSE(early);
}

TEST_P(event_test, barrier_timeout_and_cancel_withdraw_the_arrival) {
    driven_runtime rt(options());
    weft::barrier b(2);
    EXPECT_EQ(b.expected(), 2);
    // A timed-out party withdraws: the phase still needs two.
    const auto t0 = sync_clock::now();
    EXPECT_FALSE(b.arrive_and_wait_for(20ms));
    EXPECT_GE(sync_clock::now() - t0, 20ms);
    auto c = rt.spawn([&] { b.arrive_and_wait(); });
    ASSERT_TRUE(parked(c));
    c.cancel();
    EXPECT_TRUE(canceled_by_join(c));
    auto a = rt.spawn([&] { b.arrive_and_wait(); });
    ASSERT_TRUE(parked(a));
    std::thread t([&] { EXPECT_TRUE(b.arrive_and_wait_for(10s)); });
    a.join();
    t.join();
    // arrive_and_drop: the next phases need one party.
    auto x = rt.spawn([&] { b.arrive_and_wait(); });
    ASSERT_TRUE(parked(x));
    b.arrive_and_drop();
    x.join();
    EXPECT_EQ(b.expected(), 1);
    b.arrive_and_wait();  // alone
    b.arrive_and_drop();
    EXPECT_THROW(b.arrive_and_drop(), std::invalid_argument);
}

// A timed barrier wait racing the last arrival: it returns true exactly when
// its arrival counted (the phase completed), false when it was withdrawn.
TEST_P(event_test, barrier_timeout_racing_completion_adds_up) {
    driven_runtime rt(options());
    weft::barrier b(2);
    const int n = reps("WEFT_TEST_SYNC_RACES", 200, 30);
    for (int i = 0; i < n; ++i) {
        auto h = rt.spawn([&] { return b.arrive_and_wait_for(std::chrono::microseconds(50 + (i % 7) * 30)); });
        std::this_thread::sleep_for(std::chrono::microseconds((i % 11) * 20));
        // Arrive; if the task withdrew, its arrival is gone and this one
        // would wait for a partner: give it one only then.
        std::thread t([&] { (void)b.arrive_and_wait_for(10s); });
        const bool completed_with_task = h.join();
        if (!completed_with_task) b.arrive_and_wait();
        t.join();
    }
}

INSTANTIATE_TEST_SUITE_P(workers, event_test, worker_counts(), worker_param_name);

}  // namespace
}  // namespace weft::test
