// single_owner_test.cpp: SCHED-O1 (src/runtime/worker.cpp). The runtime
// resumes a task without a claim of its own: a release build's fiber claim
// is a load and a plain store (FIBER-I2), so nothing but the scheduler's
// single owner keeps two workers from running one task at once. These tests
// make wakes, timeouts, yields and cancellations race on every worker count
// and check that each task ran as one thread of control: a per-task counter
// that is a plain int (TSan reports two workers writing it; without TSan a
// lost or doubled increment shows in the count), and a per-task "inside"
// flag that must be clear whenever the task starts a slice.

#include <weft/runtime.hpp>
#include <weft/sync/event.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "runtime_fixture.hpp"

namespace {

using namespace std::chrono_literals;

class single_owner_test : public weft::test::runtime_fixture {};

struct slot {
    weft::event ev;
    int runs = 0;  // written only by the task: plain on purpose (TSan)
    std::atomic<bool> inside{false};
    std::atomic<int> overlaps{0};
    std::atomic<int> slices{0};  // read by the test thread
};

// enter()/leave() bracket one slice of a task (from one wake to its next
// wait): two workers running the task at once would find `inside` set.
void enter(slot& s) {
    if (s.inside.exchange(true, std::memory_order_acq_rel)) s.overlaps.fetch_add(1);
}
void leave(slot& s) { s.inside.store(false, std::memory_order_release); }

std::uint64_t next(std::uint64_t& x) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
}

// Every task waits on its own event with a deadline of 0 to 30 us, again and
// again, while two plain threads set random events: each wait ends by a wake
// or by its timeout, whichever comes first, and the two race all the time.
// woken_and_timed_out() is that test, with default or copy-stack tasks.
void woken_and_timed_out(const weft::runtime_options& opts, bool copy_stack) {
    const std::size_t tasks = 32;
    const int rounds = static_cast<int>(weft::test::env_count("WEFT_SINGLE_OWNER_ROUNDS", 400, 100));
    std::vector<std::unique_ptr<slot>> slots;
    for (std::size_t i = 0; i < tasks; ++i) slots.push_back(std::make_unique<slot>());
    std::atomic<std::size_t> finished{0};
    {
        weft::test::driven_runtime rt(opts);
        std::vector<weft::join_handle<void>> hs;
        for (std::size_t i = 0; i < tasks; ++i)
            hs.push_back(rt.spawn([&, i] {
                slot& s = *slots[i];
                std::uint64_t x = 0x9e3779b97f4a7c15ull ^ (i + 1);
                enter(s);
                for (int r = 0; r < rounds; ++r) {
                    leave(s);
                    (void)s.ev.wait_for(std::chrono::microseconds(next(x) % 31));
                    enter(s);
                    s.ev.reset();
                    ++s.runs;
                    if (next(x) % 8 == 0) {
                        leave(s);
                        weft::this_task::yield();
                        enter(s);
                    }
                }
                leave(s);
                finished.fetch_add(1);
            }, {.copy_stack = copy_stack}));
        std::atomic<bool> stop{false};
        auto waker = [&](std::uint64_t seed) {
            std::uint64_t x = seed;
            for (std::size_t n = 0; n < 50'000'000 && !stop.load(std::memory_order_relaxed); ++n)
                slots[next(x) % tasks]->ev.set();
        };
        std::thread w1(waker, 0x1234567ull), w2(waker, 0x7654321ull);
        for (auto& h : hs) ASSERT_TRUE(h.wait_for(50s));
        stop = true;
        w1.join();
        w2.join();
        for (auto& h : hs) h.join();
    }
    EXPECT_EQ(finished.load(), tasks);
    for (std::size_t i = 0; i < tasks; ++i) {
        EXPECT_EQ(slots[i]->runs, rounds) << "task " << i;
        EXPECT_EQ(slots[i]->overlaps.load(), 0) << "task " << i << " ran on two workers at once";
    }
}

TEST_P(single_owner_test, a_task_woken_and_timed_out_at_once_runs_on_one_worker_at_a_time) {
    woken_and_timed_out(options(), false);
}

// The same for copy-stack tasks: their resume claims the fiber and then its
// shared stack (the stack's holder word, docs/safety.md), on their home worker.
TEST_P(single_owner_test, a_copy_stack_task_woken_and_timed_out_at_once_runs_on_one_worker_at_a_time) {
    woken_and_timed_out(options(), true);
}

// Tasks park on events that plain threads keep setting while the test
// cancels them: cancel races wake and timeout on a parked task, and each
// task must still run as one thread of control and end canceled (or done).
TEST_P(single_owner_test, a_task_canceled_while_being_woken_runs_on_one_worker_at_a_time) {
    const std::size_t tasks = 32;
    const int repeats = static_cast<int>(weft::test::env_count("WEFT_SINGLE_OWNER_ROUNDS", 40, 10));
    for (int rep = 0; rep < repeats; ++rep) {
        std::vector<std::unique_ptr<slot>> slots;
        for (std::size_t i = 0; i < tasks; ++i) slots.push_back(std::make_unique<slot>());
        weft::test::driven_runtime rt(options());
        std::vector<weft::join_handle<void>> hs;
        for (std::size_t i = 0; i < tasks; ++i)
            hs.push_back(rt.spawn([&, i] {
                slot& s = *slots[i];
                enter(s);
                for (int r = 0; r < 1'000'000; ++r) {  // until canceled; bounded
                    leave(s);
                    (void)s.ev.wait_for(std::chrono::microseconds(r % 17));
                    enter(s);
                    s.ev.reset();
                    ++s.runs;
                    s.slices.fetch_add(1, std::memory_order_relaxed);
                }
                leave(s);
            }));
        std::atomic<bool> stop{false};
        std::thread waker([&] {
            std::uint64_t x = 0xabcdefull + static_cast<std::uint64_t>(rep);
            for (std::size_t n = 0; n < 50'000'000 && !stop.load(std::memory_order_relaxed); ++n)
                slots[next(x) % tasks]->ev.set();
        });
        // Let every task park and wake a few times, then cancel them all.
        ASSERT_TRUE(weft::test::eventually([&] {
            for (auto& s : slots)
                if (s->slices.load(std::memory_order_relaxed) < 3) return false;
            return true;
        }));
        for (auto& h : hs) h.cancel();
        for (auto& h : hs) ASSERT_TRUE(h.wait_for(50s)) << "repeat " << rep;
        stop = true;
        waker.join();
        for (auto& h : hs) {
            const weft::task_state st = h.state();
            EXPECT_TRUE(st == weft::task_state::canceled || st == weft::task_state::done)
                << "repeat " << rep << ": state " << static_cast<int>(st);
        }
        for (std::size_t i = 0; i < tasks; ++i)
            EXPECT_EQ(slots[i]->overlaps.load(), 0) << "repeat " << rep << ", task " << i << " ran on two workers at once";
    }
}

INSTANTIATE_TEST_SUITE_P(workers, single_owner_test, weft::test::worker_counts(), weft::test::worker_param_name);

}  // namespace
