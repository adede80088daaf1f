// condition_variable_test.cpp: weft::condition_variable
// (weft/sync/condition_variable.hpp) with weft::mutex and std::mutex, from
// tasks and threads: notify_one / notify_all, predicate forms, timeouts that
// consume no notify, cancellation that re-locks before unwinding, and the
// notify-vs-timeout race. Workers 0, 1, 2, 4; leak-checked.

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "sync_test_support.hpp"
#include "weft/sync/condition_variable.hpp"
#include "weft/sync/mutex.hpp"

namespace weft::test {
namespace {

class condition_variable_test : public sync_fixture {};

TEST_P(condition_variable_test, producer_consumer_between_tasks_and_threads) {
    driven_runtime rt(options());
    weft::mutex m;
    weft::condition_variable cv;
    long queued = 0, consumed = 0;
    bool closed = false;
    const int per = 200, producers = 2;
    auto consume = [&] {
        std::unique_lock lk(m);
        for (;;) {
            cv.wait(lk, [&] { return queued > 0 || closed; });
            if (queued == 0) return;
            --queued;
            ++consumed;
        }
    };
    auto produce = [&] {
        for (int i = 0; i < per; ++i) {
            {
                std::lock_guard g(m);
                ++queued;
            }
            cv.notify_one();
        }
    };
    std::vector<join_handle<void>> hs;
    for (int i = 0; i < 4; ++i) hs.push_back(rt.spawn(consume));
    std::thread tc(consume);
    std::vector<join_handle<void>> ps;
    for (int i = 0; i < producers; ++i) ps.push_back(rt.spawn(produce));
    std::thread tp(produce);
    for (auto& p : ps) p.join();
    tp.join();
    {
        std::lock_guard g(m);
        closed = true;
    }
    cv.notify_all();
    for (auto& h : hs) h.join();
    tc.join();
    EXPECT_EQ(consumed, static_cast<long>(producers + 1) * per);
}

TEST_P(condition_variable_test, works_with_std_mutex_and_notify_all_wakes_everyone) {
    driven_runtime rt(options());
    std::mutex m;
    weft::condition_variable cv;
    bool go = false;
    std::atomic<int> woke{0};
    std::vector<join_handle<void>> hs;
    for (int i = 0; i < 5; ++i)
        hs.push_back(rt.spawn([&] {
            std::unique_lock lk(m);
            cv.wait(lk, [&] { return go; });
            woke.fetch_add(1);
        }));
    std::thread t([&] {
        std::unique_lock lk(m);
        cv.wait(lk, [&] { return go; });
        woke.fetch_add(1);
    });
    for (auto& h : hs) ASSERT_TRUE(parked(h));
    {
        std::lock_guard g(m);
        go = true;
    }
    cv.notify_all();
    for (auto& h : hs) h.join();
    t.join();
    EXPECT_EQ(woke.load(), 6);
}

TEST_P(condition_variable_test, wait_for_times_out_with_the_lock_held) {
    driven_runtime rt(options());
    weft::mutex m;
    weft::condition_variable cv;
    auto h = rt.spawn([&] {
        std::unique_lock lk(m);
        const auto t0 = sync_clock::now();
        EXPECT_EQ(cv.wait_for(lk, 20ms), std::cv_status::timeout);
        EXPECT_GE(sync_clock::now() - t0, 20ms);
        EXPECT_TRUE(lk.owns_lock());
        EXPECT_FALSE(m.try_lock());
        EXPECT_FALSE(cv.wait_for(lk, 5ms, [] { return false; }));
        EXPECT_TRUE(cv.wait_until(lk, sync_clock::now() + 5ms, [] { return true; }));
    });
    h.join();
    std::unique_lock lk(m);
    const auto t0 = sync_clock::now();
    EXPECT_EQ(cv.wait_until(lk, t0 + 20ms), std::cv_status::timeout);
    EXPECT_GE(sync_clock::now() - t0, 20ms);
    EXPECT_TRUE(lk.owns_lock());
}

// A notify_one after a waiter timed out goes to the next one still waiting.
TEST_P(condition_variable_test, a_timed_out_waiter_consumes_no_notify) {
    driven_runtime rt(options());
    weft::mutex m;
    weft::condition_variable cv;
    bool flag = false;
    auto early = rt.spawn([&] {
        std::unique_lock lk(m);
        return cv.wait_for(lk, 10ms) == std::cv_status::timeout;
    });
    ASSERT_TRUE(parked(early));
    auto late = rt.spawn([&] {
        std::unique_lock lk(m);
        cv.wait(lk, [&] { return flag; });
    });
    ASSERT_TRUE(parked(late));
    EXPECT_TRUE(early.join());
    {
        std::lock_guard g(m);
        flag = true;
    }
    cv.notify_one();  // must reach `late` (else the watchdog fires)
    late.join();
}

TEST_P(condition_variable_test, a_canceled_waiter_relocks_before_unwinding) {
    driven_runtime rt(options());
    weft::mutex m;
    weft::condition_variable cv;
    std::atomic<int> held_at_unwind{-1};
    bool flag = false;
    auto h = rt.spawn([&] {
        std::unique_lock lk(m);
        try {
            cv.wait(lk);
        } catch (...) {
            held_at_unwind = lk.owns_lock() ? 1 : 0;
            throw;
        }
    });
    ASSERT_TRUE(parked(h));
    auto other = rt.spawn([&] {
        std::unique_lock lk(m);
        cv.wait(lk, [&] { return flag; });
    });
    ASSERT_TRUE(parked(other));
    // Cancel while the mutex is held elsewhere: the re-lock waits, shielded.
    m.lock();
    h.cancel();
    std::this_thread::sleep_for(2ms);
    EXPECT_EQ(held_at_unwind.load(), -1);
    flag = true;
    m.unlock();
    EXPECT_TRUE(canceled_by_join(h));
    EXPECT_EQ(held_at_unwind.load(), 1);
    cv.notify_one();  // the canceled waiter took none: this reaches `other`
    other.join();
    EXPECT_TRUE(unlocked(m));
}

// notify_one racing waiters' timeouts: waiters that time out absorb no
// notify, so `forever` waiters (no timeout) are all woken by as many
// notifies as there were waiters; each timed waiter is notified or timed out.
TEST_P(condition_variable_test, notify_racing_timeouts_adds_up) {
    driven_runtime rt(options());
    const int rounds = reps("WEFT_TEST_SYNC_RACES", 40, 6);
    for (int r = 0; r < rounds; ++r) {
        weft::mutex m;
        weft::condition_variable cv;
        int queued = 0;
        std::atomic<int> notified{0}, timed_out{0};
        const int timed = 6, forever = 3;
        std::vector<join_handle<void>> hs;
        for (int i = 0; i < timed + forever; ++i)
            hs.push_back(rt.spawn([&, i] {
                std::unique_lock lk(m);
                ++queued;
                if (i < forever) {
                    cv.wait(lk);
                    notified.fetch_add(1);
                } else if (cv.wait_for(lk, std::chrono::microseconds(100 + 50 * i + 37 * r % 200)) ==
                           std::cv_status::timeout) {
                    timed_out.fetch_add(1);
                } else {
                    notified.fetch_add(1);
                }
            }));
        ASSERT_TRUE(eventually([&] {
            std::lock_guard g(m);
            return queued == timed + forever;  // all linked: each released m after linking
        }));
        for (int i = 0; i < timed + forever; ++i) {
            cv.notify_one();
            if (i % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
        for (auto& h : hs) h.join();
        EXPECT_EQ(notified.load() + timed_out.load(), timed + forever);
        EXPECT_GE(notified.load(), forever);
    }
}

INSTANTIATE_TEST_SUITE_P(workers, condition_variable_test, worker_counts(), worker_param_name);

}  // namespace
}  // namespace weft::test
