// sync_stress_test.cpp: the L5 primitives under many tasks, threads and
// repetitions (counts, never durations, decide): mutex and semaphore
// exclusion from tasks on 4 workers and plain threads at once, and a
// condition-variable ping-pong. WEFT_STRESS_SYNC scales the repetitions
// (smaller under sanitizers and qemu-user).

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "support/leak_check.hpp"
#include "unit/runtime/runtime_fixture.hpp"
#include "weft/sync.hpp"

namespace weft::test {
namespace {

class sync_stress_test : public leak_checked {
protected:
    static std::size_t count(std::size_t normal, std::size_t slow) {
        return under_user_mode_emulator() ? slow : env_count("WEFT_STRESS_SYNC", normal, slow);
    }
    watchdog dog_{std::chrono::seconds(120)};
};

TEST_F(sync_stress_test, mutex_counter_from_tasks_and_threads) {
    weft::runtime rt({.workers = 4});
    weft::mutex m;
    long counter = 0;
    const long per = static_cast<long>(count(5000, 300));
    const int tasks = 200, threads = 4;
    auto body = [&] {
        for (long i = 0; i < per; ++i) {
            std::lock_guard g(m);
            ++counter;
        }
    };
    in_tasks_and_threads(rt, tasks, threads, body);
    EXPECT_EQ(counter, (tasks + threads) * per);
}

TEST_F(sync_stress_test, semaphore_and_timed_waits_lose_no_permit) {
    weft::runtime rt({.workers = 4});
    weft::counting_semaphore s(2);
    std::atomic<int> in{0};
    std::atomic<bool> over{false};
    const long per = static_cast<long>(count(2000, 100));
    auto body = [&] {
        for (long i = 0; i < per; ++i) {
            if (!s.try_acquire_for(std::chrono::microseconds(i % 50))) continue;
            if (in.fetch_add(1) >= 2) over = true;
            in.fetch_sub(1);
            s.release();
        }
    };
    in_tasks_and_threads(rt, 50, 2, body);
    EXPECT_FALSE(over);
    EXPECT_EQ(s.available(), 2);
}

TEST_F(sync_stress_test, condition_variable_ping_pong) {
    weft::runtime rt({.workers = 4});
    weft::mutex m;
    weft::condition_variable cv;
    long turn = 0;
    const long rounds = static_cast<long>(count(20000, 500));
    auto player = [&](long me) {
        std::unique_lock lk(m);
        for (long i = 0; i < rounds; ++i) {
            cv.wait(lk, [&] { return turn % 2 == me; });
            ++turn;
            cv.notify_all();
        }
    };
    auto a = rt.spawn([&] { player(0); });
    std::thread b([&] { player(1); });
    a.join();
    b.join();
    EXPECT_EQ(turn, 2 * rounds);
}

// The shape of the reported copy-stack hang, at scale: many tasks wait on
// one event, the spawning task sets it, on a runtime driven by the calling
// thread and on one with workers; default stacks (guarded, then slab past
// the mapping budget) and copy stacks (13x more tasks than shared stacks).
// Each round checks every task woke. WEFT_STRESS_EVENT_ROUNDS sets the
// rounds (default 3, 1 under sanitizers and qemu-user); scripts/soak raises
// it.
long event_rounds() {
    return static_cast<long>(under_user_mode_emulator() ? 1 : env_count("WEFT_STRESS_EVENT_ROUNDS", 3, 1));
}

void many_waiters_on_one_event(unsigned workers, bool copy_stack, int tasks, long rounds) {
    weft::runtime rt({.workers = workers});
    for (long r = 0; r < rounds; ++r) {
        const int woke = rt.block_on([&] {
            weft::event e;
            std::atomic<int> n{0};
            std::vector<join_handle<void>> hs;
            hs.reserve(static_cast<std::size_t>(tasks));
            for (int i = 0; i < tasks; ++i)
                hs.push_back(weft::spawn(
                    [&] {
                        e.wait();
                        n.fetch_add(1, std::memory_order_relaxed);
                    },
                    {.copy_stack = copy_stack}));
            this_task::yield();
            e.set();
            for (auto& h : hs) h.join();
            return n.load();
        });
        ASSERT_EQ(woke, tasks) << "round " << r;
    }
}

TEST_F(sync_stress_test, many_default_stack_tasks_wait_on_one_event) {
    const long rounds = event_rounds();
    const int tasks = under_user_mode_emulator() || sanitized ? 5000 : 100000;
    for (unsigned w : {0u, 2u}) many_waiters_on_one_event(w, false, tasks, rounds);
}

TEST_F(sync_stress_test, many_copy_stack_tasks_wait_on_one_event) {
    const long rounds = event_rounds();
    const int tasks = under_user_mode_emulator() || sanitized ? 2000 : 20000;
    for (unsigned w : {0u, 2u}) many_waiters_on_one_event(w, true, tasks, rounds);
}

}  // namespace
}  // namespace weft::test
