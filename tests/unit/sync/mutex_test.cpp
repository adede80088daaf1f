// mutex_test.cpp: weft::mutex (weft/sync/mutex.hpp) from tasks and plain
// threads: exclusion under contention, try_lock, timed locks, cancellation
// mid-wait, misuse, starvation mode, and the timeout-vs-unlock race. Every
// test runs with 0, 1, 2 and 4 workers, leak-checked.

#include <atomic>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "sync_test_support.hpp"
#include "weft/sync/mutex.hpp"

namespace weft::test {
namespace {

class mutex_test : public sync_fixture {};

TEST_P(mutex_test, try_lock_and_unlock_from_a_thread) {
    weft::mutex m;
    EXPECT_TRUE(m.try_lock());
    EXPECT_FALSE(m.try_lock());
    m.unlock();
    EXPECT_TRUE(m.try_lock());
    m.unlock();
    EXPECT_THROW(m.unlock(), std::system_error);
    {
        std::lock_guard g(m);
        EXPECT_FALSE(m.try_lock());
    }
    std::unique_lock lk(m, std::defer_lock);
    EXPECT_TRUE(lk.try_lock_for(1ms));
}

TEST_P(mutex_test, unlock_of_an_unlocked_mutex_names_the_task) {
    weft::runtime rt(options());
    weft::mutex m;
    const std::string what = rt.block_on(
        [&] {
            try {
                m.unlock();
            } catch (const std::system_error& e) {
                return std::string(e.what());
            }
            return std::string();
        },
        {.name = "unlocker"});
    EXPECT_NE(what.find("not locked"), std::string::npos) << what;
    EXPECT_NE(what.find("unlocker"), std::string::npos) << what;
}

// A non-atomic counter incremented under the lock by tasks on the workers
// and by plain threads at once reaches exactly the expected total.
TEST_P(mutex_test, excludes_tasks_and_threads_together) {
    driven_runtime rt(options());
    weft::mutex m;
    long counter = 0;
    std::atomic<int> inside{0};
    std::atomic<bool> overlap{false};
    const int tasks = 16, threads = 3, per = sanitized ? 300 : 2000;
    auto body = [&] {
        for (int i = 0; i < per; ++i) {
            std::lock_guard g(m);
            if (inside.fetch_add(1) != 0) overlap = true;
            ++counter;
            if (i % 64 == 0 && this_task::inside()) this_task::yield();  // a holder that parks
            inside.fetch_sub(1);
        }
    };
    in_tasks_and_threads(rt, tasks, threads, body);
    EXPECT_FALSE(overlap);
    EXPECT_EQ(counter, static_cast<long>(tasks + threads) * per);
}

TEST_P(mutex_test, a_waiting_task_gets_the_lock_when_a_thread_unlocks) {
    driven_runtime rt(options());
    weft::mutex m;
    m.lock();
    std::atomic<bool> got{false};
    auto h = rt.spawn([&] {
        std::lock_guard g(m);
        got = true;
    });
    ASSERT_TRUE(parked(h));
    EXPECT_FALSE(got);
    m.unlock();
    h.join();
    EXPECT_TRUE(got);
    EXPECT_TRUE(unlocked(m));
}

TEST_P(mutex_test, timed_lock_times_out_and_leaves_the_mutex_usable) {
    driven_runtime rt(options());
    weft::mutex m;
    m.lock();
    // From a task ...
    auto h = rt.spawn([&] {
        const auto t0 = sync_clock::now();
        const bool ok = m.try_lock_for(20ms);
        EXPECT_GE(sync_clock::now() - t0, 20ms);  // never early
        return ok;
    });
    EXPECT_FALSE(h.join());
    // ... and from a thread.
    std::thread([&] {
        const auto t0 = sync_clock::now();
        EXPECT_FALSE(m.try_lock_until(t0 + 20ms));
        EXPECT_GE(sync_clock::now() - t0, 20ms);
    }).join();
    m.unlock();
    // Nothing was left behind: the next lockers get it at once or by hand-over.
    auto h2 = rt.spawn([&] { return m.try_lock_for(10s); });
    EXPECT_TRUE(h2.join());
    m.unlock();
    EXPECT_TRUE(unlocked(m));
}

TEST_P(mutex_test, a_task_canceled_in_lock_holds_nothing) {
    driven_runtime rt(options());
    weft::mutex m;
    m.lock();
    std::atomic<bool> got{false};
    auto h = rt.spawn([&] {
        m.lock();
        got = true;
        m.unlock();
    });
    ASSERT_TRUE(parked(h));
    h.cancel();
    EXPECT_TRUE(canceled_by_join(h));
    EXPECT_FALSE(got);
    m.unlock();
    EXPECT_TRUE(unlocked(m));  // not held by the dead waiter
    // Still usable from tasks, with a waiter queued and canceled again.
    m.lock();
    auto a = rt.spawn([&] { std::lock_guard g(m); });
    auto b = rt.spawn([&] { std::lock_guard g(m); });
    ASSERT_TRUE(parked(a));
    ASSERT_TRUE(parked(b));
    a.cancel();
    EXPECT_TRUE(canceled_by_join(a));
    m.unlock();
    b.join();
    EXPECT_TRUE(unlocked(m));
}

// Starvation mode: one waiter must be served while others keep re-locking
// (with a holder that works a while under the lock, a woken waiter would
// keep losing to the running re-lockers in normal mode).
TEST_P(mutex_test, starvation_mode_serves_a_waiter_among_relockers) {
    driven_runtime rt(options());
    weft::mutex m;
    std::atomic<bool> stop{false};
    std::atomic<long> relocks{0};
    auto hog = [&] {
        while (!stop.load()) {
            std::lock_guard g(m);
            relocks.fetch_add(1);
            const auto until = sync_clock::now() + 50us;
            while (sync_clock::now() < until) {
            }
        }
    };
    std::vector<std::thread> hogs;
    for (int i = 0; i < 2; ++i) hogs.emplace_back(hog);
    std::vector<join_handle<void>> hs;
    for (int i = 0; i < 2; ++i) hs.push_back(rt.spawn(hog));
    ASSERT_TRUE(eventually([&] { return relocks.load() > 100; }));
    // The victims: a task and a thread, each locking a few times. They finish
    // (the watchdog fails the test otherwise) while the hogs keep going.
    auto victim = rt.spawn([&] {
        for (int i = 0; i < 20; ++i) std::lock_guard g(m);
    });
    std::thread tv([&] {
        for (int i = 0; i < 20; ++i) std::lock_guard g(m);
    });
    victim.join();
    tv.join();
    stop = true;
    for (auto& t : hogs) t.join();
    for (auto& h : hs) h.join();
    EXPECT_TRUE(unlocked(m));
}

// The race of a timed-out waiter against the unlock that would hand it the
// lock: whatever wins, afterwards the mutex is free (no lock held by a
// waiter that left, none lost).
TEST_P(mutex_test, timeout_racing_unlock_loses_nothing) {
    driven_runtime rt(options());
    weft::mutex m;
    const int n = reps("WEFT_TEST_SYNC_RACES", 300, 40);
    int got = 0, timed_out = 0;
    for (int i = 0; i < n; ++i) {
        m.lock();
        auto h = rt.spawn([&] {
            const bool ok = m.try_lock_for(std::chrono::microseconds(50 + (i % 7) * 30));
            if (ok) m.unlock();
            return ok;
        });
        std::this_thread::sleep_for(std::chrono::microseconds((i % 11) * 20));
        m.unlock();
        (h.join() ? got : timed_out) += 1;
        ASSERT_TRUE(m.try_lock()) << "repetition " << i;
        m.unlock();
    }
    EXPECT_EQ(got + timed_out, n);
}

// Cancel racing an unlock: the task either got the lock (and released it
// while unwinding or normally) or not; the mutex ends free either way.
TEST_P(mutex_test, cancel_racing_unlock_loses_nothing) {
    driven_runtime rt(options());
    weft::mutex m;
    const int n = reps("WEFT_TEST_SYNC_RACES", 200, 30);
    for (int i = 0; i < n; ++i) {
        m.lock();
        auto h = rt.spawn([&] {
            std::lock_guard g(m);
            this_task::yield();
        });
        std::this_thread::sleep_for(std::chrono::microseconds((i % 5) * 20));
        std::thread t([&] { m.unlock(); });
        h.cancel();
        t.join();
        try {
            h.join();
        } catch (const task_canceled&) {
        }
        ASSERT_TRUE(m.try_lock()) << "repetition " << i;
        m.unlock();
    }
}

INSTANTIATE_TEST_SUITE_P(workers, mutex_test, worker_counts(), worker_param_name);

}  // namespace
}  // namespace weft::test
