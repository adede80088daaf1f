// semaphore_test.cpp: weft::counting_semaphore (weft/sync/semaphore.hpp):
// permits, hand-over to waiters, timeouts and cancellation that lose no
// permit, and the release-vs-timeout race. Workers 0, 1, 2, 4; leak-checked.

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "sync_test_support.hpp"
#include "weft/sync/semaphore.hpp"

namespace weft::test {
namespace {

class semaphore_test : public sync_fixture {};

TEST_P(semaphore_test, counts_permits) {
    EXPECT_THROW(weft::counting_semaphore(-1), std::invalid_argument);
    weft::counting_semaphore s(2);
    EXPECT_EQ(s.available(), 2);
    EXPECT_TRUE(s.try_acquire());
    s.acquire();
    EXPECT_FALSE(s.try_acquire());
    EXPECT_EQ(s.available(), 0);
    s.release(3);
    EXPECT_EQ(s.available(), 3);
    EXPECT_THROW(s.release(-1), std::invalid_argument);
    EXPECT_EQ(s.available(), 3);
}

TEST_P(semaphore_test, release_hands_permits_to_waiting_tasks_and_threads) {
    driven_runtime rt(options());
    weft::counting_semaphore s(0);
    std::vector<join_handle<void>> hs;
    for (int i = 0; i < 3; ++i) hs.push_back(rt.spawn([&] { s.acquire(); }));
    for (auto& h : hs) ASSERT_TRUE(parked(h));
    std::thread t([&] { s.acquire(); });
    s.release(4);
    for (auto& h : hs) h.join();
    t.join();
    EXPECT_EQ(s.available(), 0);
}

TEST_P(semaphore_test, bounds_concurrency) {
    driven_runtime rt(options());
    weft::counting_semaphore s(3);
    std::atomic<int> in{0}, most{0};
    auto body = [&] {
        for (int i = 0; i < 50; ++i) {
            s.acquire();
            const int now = in.fetch_add(1) + 1;
            int m = most.load();
            while (now > m && !most.compare_exchange_weak(m, now)) {
            }
            if (this_task::inside()) this_task::yield();
            in.fetch_sub(1);
            s.release();
        }
    };
    in_tasks_and_threads(rt, 12, 2, body);
    EXPECT_LE(most.load(), 3);
    EXPECT_EQ(s.available(), 3);
}

TEST_P(semaphore_test, a_timed_out_waiter_takes_no_permit) {
    driven_runtime rt(options());
    weft::counting_semaphore s(0);
    auto h = rt.spawn([&] {
        const auto t0 = sync_clock::now();
        const bool ok = s.try_acquire_for(20ms);
        EXPECT_GE(sync_clock::now() - t0, 20ms);
        return ok;
    });
    EXPECT_FALSE(h.join());
    const auto t0 = sync_clock::now();
    EXPECT_FALSE(s.try_acquire_until(t0 + 20ms));
    EXPECT_GE(sync_clock::now() - t0, 20ms);
    s.release();
    EXPECT_EQ(s.available(), 1);  // not handed to a waiter that left
    auto h2 = rt.spawn([&] { return s.try_acquire_for(10s); });
    EXPECT_TRUE(h2.join());
    EXPECT_EQ(s.available(), 0);
}

TEST_P(semaphore_test, a_task_canceled_in_acquire_takes_no_permit) {
    driven_runtime rt(options());
    weft::counting_semaphore s(0);
    auto a = rt.spawn([&] { s.acquire(); });
    auto b = rt.spawn([&] { s.acquire(); });
    ASSERT_TRUE(parked(a));
    ASSERT_TRUE(parked(b));
    a.cancel();
    EXPECT_TRUE(canceled_by_join(a));
    s.release(2);  // one for b, one stays
    b.join();
    EXPECT_EQ(s.available(), 1);
}

// Release racing a waiter's timeout or cancellation: the permit ends either
// with the waiter or in the count, exactly once.
TEST_P(semaphore_test, release_racing_timeout_and_cancel_loses_no_permit) {
    driven_runtime rt(options());
    weft::counting_semaphore s(0);
    const int n = reps("WEFT_TEST_SYNC_RACES", 300, 40);
    int got = 0, missed = 0, canceled = 0;
    for (int i = 0; i < n; ++i) {
        const bool cancel = i % 3 == 0;
        auto h = rt.spawn([&] { return cancel ? (s.acquire(), true) : s.try_acquire_for(std::chrono::microseconds(40 + (i % 7) * 30)); });
        std::this_thread::sleep_for(std::chrono::microseconds((i % 11) * 20));
        if (cancel) h.cancel();
        s.release();
        bool took = false;
        try {
            took = h.join();
            (took ? got : missed) += 1;
        } catch (const task_canceled&) {
            ++canceled;
        }
        ASSERT_EQ(s.available() + (took ? 1 : 0), 1) << "repetition " << i;
        if (!took) {
            ASSERT_TRUE(s.try_acquire());
        }
    }
    EXPECT_EQ(got + missed + canceled, n);
}

INSTANTIATE_TEST_SUITE_P(workers, semaphore_test, worker_counts(), worker_param_name);

}  // namespace
}  // namespace weft::test
