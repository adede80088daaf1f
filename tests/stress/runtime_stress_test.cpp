// runtime_stress_test.cpp: the runtime's wake-up protocol (SCHED-P1, TASK-R1, TASK-W1 - TASK-W3)
// under load, on 1, 2 and 4 workers. A lost wake-up would hang these tests;
// every one runs under a watchdog that aborts with the test's name instead.
// Every loop has a fixed amount of work, never a duration.
//
//   ping_pong            chains of pinned tasks on alternating workers,
//                        each joining the one before: every wake-up crosses
//                        from one worker to another that was asleep;
//   outside_spawns       4 plain threads spawn 10,000 tasks each (and wake
//                        sleepers by cancel()) into a runtime whose workers
//                        keep going to sleep, with small random pauses;
//   one_cpu_*            the same two with the whole process pinned to one
//                        CPU (sched_setaffinity, restored afterwards);
//   idle_cpu             an idle runtime with 2 workers burns under 5% of one
//                        core over a second (getrusage);
//   cancel_storm         tasks sleeping, joining, yielding and in blocking()
//                        canceled at random moments by another thread: each
//                        ends canceled or done, nothing leaks;
//   wake_timeout_cancel  wait_for racing the awaited task's end, its own
//                        timeout and a cancel: each trial ends in exactly
//                        one of the legal outcomes.
//
// WEFT_STRESS_WAKEUPS sets the number of ping-pong wake-ups per run
// (default 200,000; 20,000 under qemu-user; 50,000 under sanitizers and
// valgrind; scripts/soak runs millions).

#include <dirent.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "unit/runtime/runtime_fixture.hpp"
#include "weft/runtime.hpp"

namespace {

using namespace std::chrono_literals;
using weft::task_state;
using weft::test::counted;
using weft::test::sanitized;
using weft::test::under_tsan;
using clk = std::chrono::steady_clock;

class runtime_stress : public weft::test::runtime_fixture {};
class runtime_idle : public weft::test::leak_checked {
protected:
    weft::test::watchdog dog_;
};

// Under qemu-user (AArch64 runs) a wake-up costs 30 to 100 times more than
// natively (the Debug build at 4 workers): 20,000 there keeps the test at
// about ten seconds.
std::uint64_t ping_pong_wakeups() {
    return weft::test::env_count("WEFT_STRESS_WAKEUPS", weft::test::under_user_mode_emulator() ? 20'000 : 200'000,
                                 50'000);
}

// ------------------------------------------------------------ (a) ping-pong

// run_ping_pong() makes `wakeups` wake-ups, each from one worker to another
// that is parked. The wake-ups come as chains of pinned tasks spawned from
// this thread: pinned tasks spawned from outside are placed round-robin, so
// each task of a chain has another home worker than the one before it. Task
// k joins task k-1 (its handle moved into task k), so every task but the
// head parks, and the head waits for a gate; once the whole chain is
// parked the gate opens, and each task's end wakes the next one on the
// next worker, which was asleep since nothing else was runnable there.
// (With one worker the chain stays on it: the wake-ups then come from the
// same worker, and it sleeps between them.)
void run_ping_pong(weft::runtime& rt, std::uint64_t wakeups) {
    // Several chains at once keep both cores busy (a lone chain waits for
    // one thread wake-up after another) and make wake-ups meet workers that
    // are just about to sleep, the window a lost wake-up needs.
    constexpr int chains = 4;
    const std::uint64_t length = under_tsan ? 250 : 2000;
    std::atomic<std::uint64_t> wrong{0};
    std::uint64_t done = 0;
    const auto t0 = clk::now();
    while (done < wakeups) {
        const std::uint64_t n = std::min(length, (wakeups - done + chains - 1) / chains);
        std::atomic<bool> gate{false};
        std::vector<weft::join_handle<std::uint64_t>> ends;
        for (int c = 0; c < chains; ++c) {
            weft::join_handle<std::uint64_t> last = rt.spawn(
                [&gate] {
                    while (!gate.load(std::memory_order_acquire)) weft::this_task::sleep_for(50us);
                    return std::uint64_t{0};
                },
                {.name = "head", .pinned = true});
            for (std::uint64_t k = 1; k <= n; ++k)
                last = rt.spawn(
                    [prev = std::move(last), k, &wrong]() mutable {
                        const std::uint64_t v = prev.join();  // parks; woken by the previous link's end
                        if (v != k - 1) wrong.fetch_add(1, std::memory_order_relaxed);
                        return k;
                    },
                    {.name = "link", .pinned = true});
            ends.push_back(std::move(last));
        }
        // Every link parks in its join before the gate opens (bounded: a
        // link still running when it opens only means fewer sleeping workers).
        (void)weft::test::eventually(
            [&] {
                std::size_t waiting = 0;
                for (const auto& t : rt.tasks()) waiting += t.state == task_state::waiting;
                return waiting >= chains * (n + 1);
            },
            5s);
        gate.store(true, std::memory_order_release);
        for (auto& e : ends)
            if (e.join() != n) wrong.fetch_add(1);
        done += chains * n;
    }
    const double s = std::chrono::duration<double>(clk::now() - t0).count();
    EXPECT_EQ(wrong.load(), 0u);
    std::printf("[ info     ] %u workers: %llu chained wake-ups (%s) in %.2f s (%.1f us each)\n", rt.workers(),
                static_cast<unsigned long long>(done),
                rt.workers() >= 2 ? "each to another worker" : "all on one worker", s,
                s * 1e6 / static_cast<double>(done));
}

// The placement the chains rely on: consecutive pinned spawns from a plain
// thread land on different workers.
void expect_round_robin(weft::runtime& rt) {
    if (rt.workers() < 2) return;
    std::vector<weft::join_handle<int>> hs;
    for (unsigned i = 0; i < 2 * rt.workers(); ++i)
        hs.push_back(rt.spawn([] { return weft::this_task::worker(); }, {.pinned = true}));
    int prev = -1;
    for (auto& h : hs) {
        const int w = h.join();
        EXPECT_NE(w, prev) << "two consecutive pinned spawns share a worker: the chain would not cross";
        prev = w;
    }
}

TEST_P(runtime_stress, ping_pong_wakeups_cross_workers_and_none_is_lost) {
    weft::runtime rt(options());
    dog_.show(&rt);
    expect_round_robin(rt);
    run_ping_pong(rt, ping_pong_wakeups());
    dog_.show(nullptr);
}

// ------------------------------------------------------------ (b) outside spawns

// run_outside_spawns() has `threads` plain threads spawn `per_thread` tasks
// each into rt, pausing now and then so that the workers sleep; one spawn in
// 50 is a sleeper that the thread wakes later by cancel() (a wake from
// outside). Then every thread joins its tasks.
void run_outside_spawns(weft::runtime& rt, int threads, int per_thread) {
    std::atomic<long> ran{0}, wrong{0};
    std::vector<std::thread> ts;
    const auto t0 = clk::now();
    for (int t = 0; t < threads; ++t)
        ts.emplace_back([&, t] {
            std::mt19937 rng(static_cast<unsigned>(t) * 7919u + 1);
            std::vector<weft::join_handle<int>> hs;
            std::vector<weft::join_handle<int>> sleepers;
            hs.reserve(static_cast<std::size_t>(per_thread));
            int next_pause = 100 + static_cast<int>(rng() % 400);
            for (int i = 0; i < per_thread; ++i) {
                if (i % 50 == 49) {
                    sleepers.push_back(rt.spawn([] {
                        weft::this_task::sleep_for(1h);
                        return -1;
                    }));
                } else {
                    hs.push_back(rt.spawn([&, i] {
                        ran.fetch_add(1, std::memory_order_relaxed);
                        return i;
                    }));
                }
                if (--next_pause == 0) {
                    next_pause = 100 + static_cast<int>(rng() % 400);
                    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
                    // Wake a sleeper from this (outside) thread.
                    if (!sleepers.empty()) sleepers[rng() % sleepers.size()].cancel();
                }
            }
            for (auto& s : sleepers) s.cancel();
            int k = 0;
            for (int i = 0; i < per_thread; ++i) {
                if (i % 50 == 49) continue;
                if (hs[static_cast<std::size_t>(k++)].join() != i) wrong.fetch_add(1);
            }
            for (auto& s : sleepers) {
                try {
                    (void)s.join();
                    wrong.fetch_add(1);
                } catch (const weft::task_canceled&) {
                }
            }
        });
    for (auto& t : ts) t.join();
    const long expected = static_cast<long>(threads) * (per_thread - per_thread / 50);
    EXPECT_EQ(ran.load(), expected);
    EXPECT_EQ(wrong.load(), 0);
    std::printf("[ info     ] %u workers: %d threads spawned %d tasks each in %.2f s\n", rt.workers(), threads,
                per_thread, std::chrono::duration<double>(clk::now() - t0).count());
}

int outside_per_thread() { return under_tsan ? 2'000 : 10'000; }

TEST_P(runtime_stress, spawns_and_wakes_from_outside_threads_while_workers_sleep) {
    weft::runtime rt(options());
    dog_.show(&rt);
    run_outside_spawns(rt, 4, outside_per_thread());
    dog_.show(nullptr);
}

// ------------------------------------------------------------ (c) one CPU

// one_cpu pins every thread of the process to the first CPU it may run on
// (threads started later inherit it), and restores each thread's mask when
// it goes.
class one_cpu {
public:
    one_cpu() {
        ok_ = ::sched_getaffinity(0, sizeof saved_, &saved_) == 0;
        if (!ok_) return;
        cpu_set_t one;
        CPU_ZERO(&one);
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &saved_)) {
                CPU_SET(c, &one);
                cpu_ = c;
                break;
            }
        for (pid_t tid : threads()) ::sched_setaffinity(tid, sizeof one, &one);
    }
    ~one_cpu() {
        if (!ok_) return;
        for (pid_t tid : threads()) ::sched_setaffinity(tid, sizeof saved_, &saved_);
    }
    one_cpu(const one_cpu&) = delete;
    one_cpu& operator=(const one_cpu&) = delete;
    [[nodiscard]] bool ok() const noexcept { return ok_; }
    [[nodiscard]] int cpu() const noexcept { return cpu_; }

private:
    static std::vector<pid_t> threads() {
        std::vector<pid_t> out;
        if (DIR* d = ::opendir("/proc/self/task")) {
            while (dirent* e = ::readdir(d))
                if (e->d_name[0] != '.') out.push_back(static_cast<pid_t>(std::stol(e->d_name)));
            ::closedir(d);
        }
        return out;
    }
    cpu_set_t saved_{};
    bool ok_ = false;
    int cpu_ = -1;
};

TEST_P(runtime_stress, one_cpu_ping_pong) {
    one_cpu pin;
    ASSERT_TRUE(pin.ok());
    {
        weft::runtime rt(options());
        dog_.show(&rt);
        run_ping_pong(rt, ping_pong_wakeups() / 4);
        dog_.show(nullptr);
    }
}

TEST_P(runtime_stress, one_cpu_spawns_and_wakes_from_outside_threads) {
    one_cpu pin;
    ASSERT_TRUE(pin.ok());
    {
        weft::runtime rt(options());
        dog_.show(&rt);
        run_outside_spawns(rt, 4, outside_per_thread() / 2);
        dog_.show(nullptr);
    }
}

// ------------------------------------------------------------ (d) idle CPU

double cpu_seconds() {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// cpu_over() is the CPU time the process uses while this thread sleeps for d.
double cpu_over(std::chrono::milliseconds d) {
    const double before = cpu_seconds();
    std::this_thread::sleep_for(d);
    return cpu_seconds() - before;
}

TEST_F(runtime_idle, an_idle_runtime_uses_no_cpu) {
    // Sanitizer runtimes have background threads of their own: measure
    // what the process uses without a runtime first and allow for it.
    const double baseline = sanitized ? cpu_over(1000ms) : 0.0;
    weft::runtime rt({.workers = 2});
    // Some work first, so the workers have been busy and must sleep again;
    // then a sleeper, so there is a timer (an hour away) to wait for.
    const long sum = rt.block_on([] {
        std::vector<weft::join_handle<long>> hs;
        for (long i = 0; i < 1000; ++i) hs.push_back(weft::spawn([i] { return i; }));
        long s = 0;
        for (auto& h : hs) s += h.join();
        return s;
    });
    EXPECT_EQ(sum, 999L * 1000 / 2);
    auto sleeper = rt.spawn([] { weft::this_task::sleep_for(1h); });
    std::this_thread::sleep_for(50ms);
    const double used = cpu_over(1000ms);
    std::printf("[ info     ] idle runtime, 2 workers: %.1f ms CPU over 1 s (baseline %.1f ms)\n", used * 1e3,
                baseline * 1e3);
    EXPECT_LT(used - baseline, 0.05) << "an idle runtime burned " << used * 1e3 << " ms of CPU in a second";
    sleeper.cancel();
}

// ------------------------------------------------------------ (e) cancel storms

TEST_P(runtime_stress, cancel_storms_end_every_task_canceled_or_done) {
    counted::reset();
    const int n = sanitized ? 3000 : 10000;
    std::vector<weft::join_handle<int>> hs;
    hs.reserve(static_cast<std::size_t>(n));
    std::vector<std::atomic<bool>> canceled(static_cast<std::size_t>(n));
    std::atomic<int> children_done{0};
    {
        auto o = options();
        o.blocking_threads = 4;
        weft::runtime rt(o);
        dog_.show(&rt);
        weft::test::driver d(rt);
        for (int i = 0; i < n; ++i) {
            switch (i % 5) {
            case 0:  // sleeps in short steps
                hs.push_back(rt.spawn([i] {
                    counted c;
                    for (int k = 0; k < 20; ++k) weft::this_task::sleep_for(std::chrono::microseconds(50 + i % 200));
                    return i;
                }));
                break;
            case 1:  // joins a child of its own
                hs.push_back(rt.spawn([i, &children_done] {
                    counted c;
                    auto child = weft::spawn([&children_done] {
                        counted cc;
                        weft::this_task::sleep_for(300us);
                        children_done.fetch_add(1);
                    });
                    child.join();
                    return i;
                }));
                break;
            case 2:  // yields
                hs.push_back(rt.spawn([i] {
                    counted c;
                    for (int k = 0; k < 200; ++k) weft::this_task::yield();
                    return i;
                }));
                break;
            case 3:  // waits in blocking(), then yields
                hs.push_back(rt.spawn([i] {
                    counted c;
                    const int v = weft::blocking([i] {
                        std::this_thread::sleep_for(20us);
                        return i;
                    });
                    weft::this_task::yield();
                    return v;
                }));
                break;
            default:  // sleeps long: only a cancel ends it early
                hs.push_back(rt.spawn([i] {
                    counted c;
                    weft::this_task::sleep_for(i % 2 ? 1h : 2ms);
                    return i;
                }));
                break;
            }
        }
        std::thread canceller([&] {
            std::mt19937 rng(12345);
            std::vector<int> order(static_cast<std::size_t>(n));
            for (int i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
            std::shuffle(order.begin(), order.end(), rng);
            int k = 0;
            for (int i : order) {
                // Every task that would sleep an hour, and half of the rest.
                const bool must = i % 5 == 4 && i % 2;
                if (!must && rng() % 2) continue;
                canceled[static_cast<std::size_t>(i)] = true;
                hs[static_cast<std::size_t>(i)].cancel();
                if (++k % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
            }
        });
        canceller.join();
        int done = 0, was_canceled = 0;
        for (int i = 0; i < n; ++i) {
            auto& h = hs[static_cast<std::size_t>(i)];
            try {
                EXPECT_EQ(h.join(), i);
                ++done;
            } catch (const weft::task_canceled& e) {
                ++was_canceled;
                EXPECT_EQ(e.state(), task_state::canceled);
                EXPECT_TRUE(canceled[static_cast<std::size_t>(i)].load()) << "task " << i << " canceled by nobody";
            }
        }
        EXPECT_EQ(done + was_canceled, n);
        std::printf("[ info     ] %u workers: %d tasks, %d canceled, %d done; %d children of joiners ended\n",
                    rt.workers(), n, was_canceled, done, children_done.load());
        dog_.show(nullptr);
    }  // children of canceled joiners finish before the runtime stops
    EXPECT_EQ(counted::made.load(), counted::gone.load()) << "destructors did not run";
}

// ------------------------------------------------------------ (f) wake vs timeout vs cancel

TEST_P(runtime_stress, wait_for_racing_the_end_its_timeout_and_a_cancel_has_one_outcome) {
    counted::reset();
    const int batches = sanitized ? 60 : 200, per_batch = 64;
    std::mt19937 rng(777);
    long finished = 0, timed_out = 0, canceled_waiters = 0, canceled_targets = 0;
    {
        weft::runtime rt(options());
        dog_.show(&rt);
        weft::test::driver d(rt);
        for (int b = 0; b < batches; ++b) {
            struct trial {
                weft::join_handle<int> target, waiter;
                std::atomic<int> outcome{-1};  // 1: wait_for true, 0: false
                std::atomic<int> outcomes{0};  // how many times the waiter got past its wait
                std::atomic<int> ready_when_true{1};
                std::chrono::microseconds cancel_at{};
                bool cancel_waiter = false, cancel_target = false;
            };
            std::vector<std::unique_ptr<trial>> ts;
            for (int i = 0; i < per_batch; ++i) {
                auto t = std::make_unique<trial>();
                const auto end_at = std::chrono::microseconds(rng() % 400);
                const auto wait_for = std::chrono::microseconds(rng() % 400);
                t->cancel_at = std::chrono::microseconds(rng() % 400);
                t->cancel_waiter = rng() % 2;
                t->cancel_target = rng() % 4 == 0;
                t->target = rt.spawn([end_at] {
                    weft::this_task::sleep_for(end_at);
                    return 1;
                });
                trial* tp = t.get();
                t->waiter = rt.spawn([tp, wait_for] {
                    counted c;
                    const bool r = tp->target.wait_for(wait_for);
                    tp->outcomes.fetch_add(1);
                    if (r && !tp->target.is_ready()) tp->ready_when_true = 0;
                    tp->outcome = r ? 1 : 0;
                    return r ? 1 : 0;
                });
                ts.push_back(std::move(t));
            }
            // Cancel at the chosen moments, in order.
            std::vector<trial*> by_time;
            for (auto& t : ts) by_time.push_back(t.get());
            std::sort(by_time.begin(), by_time.end(), [](trial* x, trial* y) { return x->cancel_at < y->cancel_at; });
            const auto t0 = clk::now();
            for (trial* t : by_time) {
                while (clk::now() - t0 < t->cancel_at) {
                }
                if (t->cancel_waiter) t->waiter.cancel();
                if (t->cancel_target) t->target.cancel();
            }
            for (auto& t : ts) {
                int r = -1;
                try {
                    r = t->waiter.join();
                } catch (const weft::task_canceled& e) {
                    EXPECT_EQ(e.state(), task_state::canceled);
                    EXPECT_TRUE(t->cancel_waiter) << "a waiter nobody canceled ended canceled";
                    ++canceled_waiters;
                }
                if (r >= 0) {
                    EXPECT_EQ(t->outcomes.load(), 1);
                    EXPECT_EQ(t->outcome.load(), r);
                    (r == 1 ? finished : timed_out) += 1;
                } else {
                    EXPECT_EQ(t->outcomes.load(), 0) << "a canceled waiter went on past its wait";
                }
                EXPECT_EQ(t->ready_when_true.load(), 1) << "wait_for said finished but is_ready() did not";
                try {
                    EXPECT_EQ(t->target.join(), 1);
                } catch (const weft::task_canceled& e) {
                    EXPECT_TRUE(t->cancel_target);
                    EXPECT_EQ(e.state(), task_state::canceled);
                    ++canceled_targets;
                }
            }
        }
        // From plain threads: wait_for racing the end.
        int plain_true = 0, plain_false = 0;
        for (int i = 0; i < (sanitized ? 100 : 300); ++i) {
            const auto end_at = std::chrono::microseconds(rng() % 300);
            auto h = rt.spawn([end_at] {
                weft::this_task::sleep_for(end_at);
                return 2;
            });
            if (h.wait_for(std::chrono::microseconds(rng() % 300))) {
                EXPECT_TRUE(h.is_ready());
                ++plain_true;
            } else {
                ++plain_false;
            }
            EXPECT_EQ(h.join(), 2);
        }
        std::printf("[ info     ] %u workers: waiters: %ld saw the end, %ld timed out, %ld canceled; %ld targets "
                    "canceled; plain threads: %d / %d\n",
                    rt.workers(), finished, timed_out, canceled_waiters, canceled_targets, plain_true, plain_false);
        EXPECT_EQ(finished + timed_out + canceled_waiters, long(batches) * per_batch);
        dog_.show(nullptr);
    }
    EXPECT_EQ(counted::made.load(), counted::gone.load());
}

INSTANTIATE_TEST_SUITE_P(workers, runtime_stress, ::testing::Values(1u, 2u, 4u), weft::test::worker_param_name);

}  // namespace
