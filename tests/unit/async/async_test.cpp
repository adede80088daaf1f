// async_test.cpp: C++20 coroutines on the runtime (weft/async.hpp, L7), both
// ways. C++20 tasks: values, nesting, a million synchronous completions on a
// small stack (ASYNC-S1), every weft::co awaitable, join both ways, when_all /
// when_any over mixed tasks, exceptions across the boundary both ways,
// cancellation and deadlines of a C++20 task awaiting a stackful one and the
// reverse, foreign awaitables resumed from another thread (both ways),
// migration across workers, the registry and misuse. Every test runs with 0,
// 1, 2 and 4 workers under a watchdog and the leak check (coroutines, stacks).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime_fixture.hpp"
#include "weft/async.hpp"
#include "weft/sync.hpp"

namespace {

using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;
using weft::async;
using weft::channel;
using namespace weft::test;  // counted, driver, eventually

class async_test : public weft::test::runtime_fixture {};

async<int> leaf(int x) { co_return x + 1; }
async<int> twice(int x) {
    const int a = co_await leaf(x);
    co_return co_await leaf(a);
}
async<void> nothing() { co_return; }

// A foreign awaitable: a one-shot event resumed from a plain thread of its
// own after `delay` (what a third-party library's awaitable does).
struct thread_timer {
    std::chrono::milliseconds delay;
    int value;
    std::thread th;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) {
        th = std::thread([h, d = delay] {
            std::this_thread::sleep_for(d);
            h.resume();
        });
    }
    int await_resume() {
        th.join();
        return value;
    }
};

// An awaitable whose await_suspend says "done already" (returns false).
struct ready_late {
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<>) const noexcept { return false; }
    int await_resume() const noexcept { return 7; }
};

// ------------------------------------------------------------ values, nesting

TEST_P(async_test, a_spawned_coroutine_is_a_task_with_a_value) {
    weft::runtime rt(options());
    EXPECT_EQ(rt.block_on(twice(40)), 42);
    rt.block_on(nothing());
    auto h = rt.spawn(twice(1), {.name = "c20"});
    driver d(rt);
    EXPECT_GT(h.id(), 0u);
    EXPECT_EQ(h.join(), 3);
}

TEST_P(async_test, ids_names_and_this_task_work_inside_a_coroutine) {
    weft::runtime rt(options());
    auto body = []() -> async<std::string> {
        co_await weft::co::yield();
        co_return std::string(weft::this_task::name()) + "/" + std::to_string(weft::this_task::id());
    };
    auto h = rt.spawn(body(), {.name = "named"});
    const std::uint64_t id = h.id();
    driver d(rt);
    EXPECT_EQ(h.join(), "named/" + std::to_string(id));
}

// ASYNC-S1: a million co_awaits of coroutines that complete at once, in a task
// with a 64 KiB stack and in a C++20 task, in every preset (gcc -O0 too).
async<long> many_sync(int n) {
    long s = 0;
    for (int i = 0; i < n; ++i) s += co_await leaf(i);
    co_return s;
}

TEST_P(async_test, a_million_synchronous_completions_do_not_grow_the_stack) {
    weft::runtime rt(options());
    const int n = weft::test::sanitized ? 200'000 : 1'000'000;
    const long expect = static_cast<long>(n) * (n + 1) / 2;
    EXPECT_EQ(rt.block_on(many_sync(n)), expect);
    EXPECT_EQ(rt.block_on([&] { return weft::await(many_sync(n)); }, {.stack_size = 64 * 1024}), expect);
}

// ------------------------------------------------------------ every awaitable

TEST_P(async_test, a_coroutine_receives_from_a_stackful_sender_and_back) {
    weft::runtime rt(options());
    const int n = 2000;
    const long sum = rt.block_on([&] {
        channel<int> to_c20, from_c20;  // rendezvous: every hop waits
        auto c20 = weft::spawn([](channel<int>& in, channel<int>& out) -> async<void> {
            while (auto v = co_await weft::co::recv(in)) co_await weft::co::send(out, *v * 2);
            out.close();
        }(to_c20, from_c20));
        auto sender = weft::spawn([&] {
            for (int i = 1; i <= n; ++i) to_c20.send(i);
            to_c20.close();
        });
        long s = 0;
        while (auto v = from_c20.recv()) s += *v;
        sender.join();
        c20.join();
        return s;
    });
    EXPECT_EQ(sum, static_cast<long>(n) * (n + 1));
}

TEST_P(async_test, mutex_semaphore_event_and_sleep_are_awaitable) {
    weft::runtime rt(options());
    weft::mutex m;
    weft::counting_semaphore sem(2);
    weft::event go;
    long counter = 0;
    std::atomic<int> inside{0}, most{0};
    auto worker = [&](int rounds) -> async<void> {
        co_await weft::co::wait(go);
        for (int i = 0; i < rounds; ++i) {
            co_await weft::co::lock(m);
            ++counter;
            if (i % 16 == 0) co_await weft::co::yield();  // hold it across a suspension
            m.unlock();
            co_await weft::co::acquire(sem);
            const int now = inside.fetch_add(1) + 1;
            int seen = most.load();
            while (now > seen && !most.compare_exchange_weak(seen, now)) {
            }
            co_await weft::co::yield();
            inside.fetch_sub(1);
            sem.release();
        }
    };
    std::vector<weft::join_handle<void>> hs;
    for (int i = 0; i < 8; ++i) hs.push_back(rt.spawn(worker(300)));
    // Stackful tasks contend for the same mutex.
    for (int i = 0; i < 2; ++i)
        hs.push_back(rt.spawn([&] {
            go.wait();
            for (int k = 0; k < 300; ++k) {
                std::lock_guard g(m);
                ++counter;
            }
        }));
    const auto t0 = clk::now();
    rt.block_on([&]() -> async<void> {
        co_await weft::co::sleep_for(5ms);
        go.set();
    }());
    EXPECT_GE(clk::now() - t0, 5ms);
    driver d(rt);
    for (auto& h : hs) h.join();
    EXPECT_EQ(counter, 10 * 300);
    EXPECT_LE(most.load(), 2);
    EXPECT_GE(most.load(), 1);
}

TEST_P(async_test, select_and_any_other_wait_go_through_co_call) {
    weft::runtime rt(options());
    channel<int> a, b;
    auto h = rt.spawn([](channel<int>& a, channel<int>& b) -> async<int> {
        int got = 0;
        co_await weft::co::call([&] {
            weft::select(weft::on_recv(a, [&](std::optional<int> v) { got = *v; }),
                         weft::on_recv(b, [&](std::optional<int> v) { got = -*v; }));
        });
        co_return got;
    }(a, b));
    rt.block_on([&] {
        weft::this_task::sleep_for(2ms);
        b.send(5);
    });
    driver d(rt);
    EXPECT_EQ(h.join(), -5);
}

// Each of these waits runs in a C++20 task through co::call (on a borrowed
// fiber, ASYNC-A3) and ends only when a stackful task releases it: `stage` is set
// before each release, so a wait that did not wait reads an earlier stage.
TEST_P(async_test, condition_variable_latch_wait_group_barrier_and_shared_mutex_through_co_call) {
    weft::runtime rt(options());
    weft::mutex m;
    weft::condition_variable cv;
    bool ready = false;  // under m
    weft::latch l(1);
    weft::wait_group wg;
    wg.add(1);
    weft::barrier b(2);
    weft::shared_mutex sm;
    std::atomic<int> stage{0};
    std::atomic<bool> writer_holds{false};
    auto releaser = rt.spawn([&] {
        sm.lock();
        writer_holds.store(true);
        auto next = [&](int s) {
            weft::this_task::sleep_for(2ms);
            stage.store(s);
        };
        next(1);
        {
            std::lock_guard g(m);
            ready = true;
        }
        cv.notify_one();
        next(2);
        l.count_down();
        next(3);
        wg.done();
        next(4);
        b.arrive_and_wait();
        next(5);
        sm.unlock();
    });
    auto h = rt.spawn([](weft::mutex& m, weft::condition_variable& cv, bool& ready, weft::latch& l,
                         weft::wait_group& wg, weft::barrier& b, weft::shared_mutex& sm, std::atomic<int>& stage,
                         std::atomic<bool>& writer_holds) -> async<std::vector<int>> {
        std::vector<int> seen;
        while (!writer_holds.load()) co_await weft::co::yield();
        co_await weft::co::call([&] {
            std::unique_lock lk(m);
            cv.wait(lk, [&] { return ready; });
        });
        seen.push_back(stage.load());
        co_await weft::co::call([&] { l.wait(); });
        seen.push_back(stage.load());
        co_await weft::co::call([&] { wg.wait(); });
        seen.push_back(stage.load());
        co_await weft::co::call([&] { b.arrive_and_wait(); });
        seen.push_back(stage.load());
        co_await weft::co::call([&] {
            sm.lock_shared();
            sm.unlock_shared();
        });
        seen.push_back(stage.load());
        co_return seen;
    }(m, cv, ready, l, wg, b, sm, stage, writer_holds));
    driver d(rt);
    releaser.join();
    const std::vector<int> seen = h.join();
    ASSERT_EQ(seen.size(), 5u);
    for (int k = 0; k < 5; ++k) EXPECT_GE(seen[k], k + 1) << "wait " << k << " ended before its release";
}

// ------------------------------------------------------------ join both ways

TEST_P(async_test, a_coroutine_joins_stackful_tasks_and_a_stackful_task_joins_coroutines) {
    weft::runtime rt(options());
    const int r = rt.block_on([&] {
        auto stackful = weft::spawn([] {
            weft::this_task::sleep_for(1ms);
            return 20;
        });
        auto c20 = weft::spawn([](weft::join_handle<int> h) -> async<int> {
            const int v = co_await h;           // waits: the task sleeps first
            co_return v + co_await twice(0);   // 20 + 2
        }(std::move(stackful)));
        return c20.join();
    });
    EXPECT_EQ(r, 22);
}

TEST_P(async_test, when_all_and_when_any_take_mixed_tasks_from_a_coroutine) {
    weft::runtime rt(options());
    auto body = []() -> async<int> {
        std::vector<weft::join_handle<int>> hs;
        hs.push_back(weft::spawn([] { return 1; }));
        hs.push_back(weft::spawn(twice(0)));  // 2
        hs.push_back(weft::spawn([]() -> async<int> {
            co_await weft::co::sleep_for(1ms);
            co_return 3;
        }()));
        std::vector<int> all = co_await weft::co::when_all(hs);
        std::vector<weft::join_handle<int>> race;
        race.push_back(weft::spawn([] {
            weft::this_task::sleep_for(10s);
            return 0;
        }));
        race.push_back(weft::spawn(leaf(8)));
        const std::size_t won = co_await weft::co::when_any(race, true);
        const int fast = co_await race[won];
        bool loser_canceled = false;
        try {
            (void)co_await race[1 - won];
        } catch (const weft::task_canceled&) {
            loser_canceled = true;
        }
        EXPECT_TRUE(loser_canceled);
        co_return all[0] + all[1] + all[2] + fast * 10 + static_cast<int>(won) * 100;
    };
    EXPECT_EQ(rt.block_on(body()), 1 + 2 + 3 + 90 + 100);
}

// ------------------------------------------------------------ exceptions

TEST_P(async_test, exceptions_cross_the_boundary_both_ways) {
    weft::runtime rt(options());
    // A C++20 task's exception reaches a stackful joiner.
    auto thrower = []() -> async<int> {
        co_await weft::co::yield();
        throw std::runtime_error("from c++20");
    };
    auto h = rt.spawn(thrower());
    {
        driver d(rt);
        EXPECT_THROW(
            {
                try {
                    h.join();
                } catch (const std::runtime_error& e) {
                    EXPECT_STREQ(e.what(), "from c++20");
                    throw;
                }
            },
            std::runtime_error);
    }
    // A stackful task's exception reaches a coroutine, which catches it.
    const std::string got = rt.block_on([]() -> async<std::string> {
        auto s = weft::spawn([]() -> int { throw std::logic_error("from stackful"); });
        try {
            (void)co_await s;
        } catch (const std::logic_error& e) {
            co_return e.what();
        }
        co_return "nothing";
    }());
    EXPECT_EQ(got, "from stackful");
    // weft::await rethrows what the coroutine threw, on the stackful side.
    EXPECT_THROW(rt.block_on([&] { return weft::await(thrower()); }), std::runtime_error);
    // A nested coroutine's exception reaches its parent.
    EXPECT_EQ(rt.block_on([&]() -> async<int> {
        try {
            co_return co_await thrower();
        } catch (const std::runtime_error&) {
            co_return -1;
        }
    }()),
              -1);
}

// ------------------------------------------------------------ cancellation

TEST_P(async_test, canceling_a_coroutine_blocked_in_recv_destroys_its_frames) {
    weft::runtime rt(options());
    channel<int> never;
    const long before = counted::gone.load();
    auto inner = [](channel<int>& ch) -> async<int> {
        counted c;
        auto v = co_await weft::co::recv(ch);
        co_return v.value_or(0);
    };
    auto outer = [&](channel<int>& ch) -> async<int> {
        counted c;
        co_return co_await inner(ch);
    };
    auto h = rt.spawn(outer(never), {.name = "blocked"});
    driver d(rt);
    ASSERT_TRUE(eventually([&] {
        for (const auto& t : rt.tasks())
            if (t.name == "blocked" && t.state == weft::task_state::waiting) return true;
        return false;
    }));
    h.cancel();
    EXPECT_THROW(h.join(), weft::task_canceled);
    EXPECT_EQ(counted::gone.load() - before, 2);  // both frames' locals
    EXPECT_TRUE(never.try_send(1) == weft::channel_status::full);  // nobody left receiving
}

TEST_P(async_test, a_coroutine_canceled_before_it_starts_never_runs) {
    weft::runtime rt(options());
    std::atomic<bool> ran{false};
    const long made = counted::made.load(), gone = counted::gone.load();
    weft::event hold;
    // The body, if it started at all before the cancel (a thief on w2, w4),
    // waits for `hold`, which is set only after the join: either way it
    // never gets past its first await. (Set before the join, a body that
    // started late could find it set and run on: a wait that needs no
    // waiting is not a cancellation point.)
    auto body = [](std::atomic<bool>& r, weft::event& e, counted) -> async<void> {
        co_await weft::co::wait(e);
        r = true;
    };
    auto h = rt.block_on([&] {
        auto x = weft::spawn(body(ran, hold, counted{}));
        x.cancel();
        return x;
    });
    driver d(rt);
    EXPECT_THROW(h.join(), weft::task_canceled);
    hold.set();
    EXPECT_FALSE(ran.load());
    // The parameter in the frame was destroyed with it.
    EXPECT_GE(counted::made.load() - made, 2);
    EXPECT_EQ(counted::made.load() - made, counted::gone.load() - gone);
}

TEST_P(async_test, canceling_a_coroutine_that_awaits_a_stackful_task_leaves_that_task_alone) {
    weft::runtime rt(options());
    weft::event release;
    auto stackful = rt.spawn([&] {
        release.wait();
        return 5;
    });
    weft::join_handle<int>* sp = &stackful;
    auto c20 = rt.spawn([](weft::join_handle<int>* h) -> async<int> { co_return co_await *h; }(sp), {.name = "joiner"});
    driver d(rt);
    ASSERT_TRUE(eventually([&] {
        for (const auto& t : rt.tasks())
            if (t.name == "joiner" && t.state == weft::task_state::waiting) return true;
        return false;
    }));
    c20.cancel();
    EXPECT_THROW(c20.join(), weft::task_canceled);
    release.set();
    EXPECT_EQ(stackful.join(), 5);
}

TEST_P(async_test, canceling_a_stackful_task_that_awaits_a_coroutine_unwinds_both) {
    weft::runtime rt(options());
    channel<int> never;
    const long before = counted::gone.load();
    auto blocked = [](channel<int>& ch) -> async<int> {
        counted c;
        auto v = co_await weft::co::recv(ch);
        co_return v.value_or(0);
    };
    auto h = rt.spawn(
        [&] {
            counted c;
            return weft::await(blocked(never));
        },
        {.name = "stackful-awaits"});
    driver d(rt);
    ASSERT_TRUE(eventually([&] {
        for (const auto& t : rt.tasks())
            if (t.name == "stackful-awaits" && t.state == weft::task_state::waiting) return true;
        return false;
    }));
    h.cancel();
    EXPECT_THROW(h.join(), weft::task_canceled);
    EXPECT_EQ(counted::gone.load() - before, 2);
}

TEST_P(async_test, a_deadline_ends_a_coroutine_as_timed_out) {
    weft::runtime rt(options());
    channel<int> never;
    auto h = rt.spawn([](channel<int>& ch) -> async<void> { (void)co_await weft::co::recv(ch); }(never),
                      {.timeout = 20ms});
    driver d(rt);
    try {
        h.join();
        ADD_FAILURE() << "join returned";
    } catch (const weft::task_canceled& e) {
        EXPECT_EQ(e.state(), weft::task_state::timed_out);
    }
}

TEST_P(async_test, a_canceled_coroutine_stops_at_its_next_yield) {
    weft::runtime rt(options());
    std::atomic<long> spins{0};
    auto h = rt.spawn([](std::atomic<long>& n) -> async<void> {
        for (;;) {
            ++n;
            co_await weft::co::yield();
        }
    }(spins));
    driver d(rt);
    ASSERT_TRUE(eventually([&] { return spins.load() > 10; }));
    h.cancel();
    EXPECT_THROW(h.join(), weft::task_canceled);
}

// ------------------------------------------------------------ foreign awaitables

TEST_P(async_test, a_coroutine_awaits_an_awaitable_resumed_from_another_thread) {
    weft::runtime rt(options());
    auto body = []() -> async<int> {
        const std::uint64_t id = weft::this_task::id();
        const int v = co_await thread_timer{3ms, 11, {}};
        // Back inside the same task, on a worker (never on the timer thread).
        EXPECT_EQ(weft::this_task::id(), id);
        const int w = co_await ready_late{};
        co_return v + w;
    };
    std::atomic<int> others{0};
    auto bystander = rt.spawn([&] {
        for (int i = 0; i < 50; ++i) {
            ++others;
            weft::this_task::yield();
        }
    });
    EXPECT_EQ(rt.block_on(body()), 18);
    driver d(rt);
    bystander.join();
    EXPECT_EQ(others.load(), 50);
}

TEST_P(async_test, a_stackful_task_awaits_any_awaitable_and_only_it_waits) {
    weft::runtime rt(options());
    std::atomic<int> ran_meanwhile{0};
    std::atomic<bool> waiting{false};
    const int v = rt.block_on([&] {
        auto other = weft::spawn([&] {
            while (!waiting.load()) weft::this_task::yield();
            ++ran_meanwhile;  // runs while the awaiter is suspended
        });
        waiting = true;
        const int a = weft::await(thread_timer{5ms, 30, {}});
        const int b = weft::await(ready_late{});
        const int c = weft::await(twice(1));
        other.join();
        return a + b + c;
    });
    EXPECT_EQ(v, 30 + 7 + 3);
    EXPECT_EQ(ran_meanwhile.load(), 1);
}

TEST_P(async_test, a_plain_thread_awaits_coroutines_and_awaitables) {
    EXPECT_EQ(weft::await(twice(5)), 7);
    EXPECT_EQ(weft::await(thread_timer{1ms, 4, {}}), 4);
    // A coroutine run by a thread waits on L5 by blocking the thread.
    weft::runtime rt(options());
    channel<int> ch(1);
    auto h = rt.spawn([&] { ch.send(9); });
    driver d(rt);
    auto take = [](channel<int>& c) -> async<int> { co_return *co_await weft::co::recv(c); };
    EXPECT_EQ(weft::await(take(ch)), 9);
    h.join();
}

// ------------------------------------------------------------ migration

TEST_P(async_test, coroutines_migrate_across_workers_and_keep_their_identity) {
    weft::runtime rt(options());
    const int tasks = 16, rounds = 200;
    std::atomic<int> bad{0};
    std::set<int> seen_workers;
    std::mutex seen_mu;
    auto body = [&]() -> async<void> {
        const std::uint64_t id = weft::this_task::id();
        for (int i = 0; i < rounds; ++i) {
            co_await weft::co::yield();
            if (i % 8 == 0) co_await weft::co::sleep_for(50us);
            if (weft::this_task::id() != id) ++bad;
            std::lock_guard g(seen_mu);
            seen_workers.insert(weft::this_task::worker());
        }
    };
    std::vector<weft::join_handle<void>> hs;
    for (int i = 0; i < tasks; ++i) hs.push_back(rt.spawn(body()));
    driver d(rt);
    for (auto& h : hs) h.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_GE(seen_workers.size(), 1u);
    EXPECT_LE(seen_workers.size(), std::max(1u, rt.workers()));
}

// ------------------------------------------------------------ misuse

TEST_P(async_test, a_blocking_call_inside_a_coroutine_is_refused_before_it_touches_anything) {
    weft::runtime rt(options());
    weft::mutex m, held;
    held.lock();  // by this thread: a lock() of it must wait
    weft::event later;
    channel<int> ch(1);
    auto body = [&]() -> async<int> {
        int refused = 0;
        auto expect_refused = [&](auto&& f) {
            const auto code = weft::test::errc_of(f);
            if (code == weft::task_errc::needs_stack) ++refused;
        };
        expect_refused([&] { held.lock(); });
        expect_refused([&] { (void)ch.recv(); });
        expect_refused([&] { weft::this_task::yield(); });
        expect_refused([&] { weft::this_task::sleep_for(1ms); });
        expect_refused([&] { (void)weft::await(twice(1)); });
        auto s = weft::spawn([&] {
            later.wait();
            return 1;
        });
        expect_refused([&] { (void)s.join(); });
        later.set();
        // Nothing was left behind: the mutex and the channel still work.
        co_await weft::co::lock(m);
        m.unlock();
        co_await weft::co::send(ch, 3);
        refused += *co_await weft::co::recv(ch) == 3 ? 100 : 0;
        co_await s;
        co_return refused;
    };
    EXPECT_EQ(rt.block_on(body()), 106);
    held.unlock();
}

TEST_P(async_test, empty_coroutines_are_refused_with_a_clear_error) {
    weft::runtime rt(options());
    async<int> a = leaf(1);
    async<int> b = std::move(a);
    EXPECT_FALSE(a.valid());
    EXPECT_THROW(rt.spawn(std::move(a)), std::invalid_argument);
    EXPECT_THROW((void)weft::await(a), std::invalid_argument);
    EXPECT_EQ(rt.block_on(std::move(b)), 2);
    EXPECT_FALSE(b.valid());
    EXPECT_EQ(rt.block_on([]() -> async<int> {
        async<int> e;
        try {
            co_return co_await e;
        } catch (const std::invalid_argument&) {
            co_return -1;
        }
    }()),
              -1);
}

TEST_P(async_test, a_stopping_runtime_cancels_coroutines_and_refuses_new_ones) {
    const long made = counted::made.load(), gone = counted::gone.load();
    channel<int> never;
    {
        weft::runtime rt(options());
        for (int i = 0; i < 10; ++i)
            rt.spawn([](channel<int>& ch, counted) -> async<void> {
                counted c;
                (void)co_await weft::co::recv(ch);
            }(never, counted{}))
                .detach();
        rt.stop();
        EXPECT_GE(counted::made.load() - made, 20);
        EXPECT_EQ(counted::made.load() - made, counted::gone.load() - gone);
        async<int> c = leaf(1);
        EXPECT_THROW(rt.spawn(std::move(c)), weft::task_error);
        EXPECT_TRUE(c.valid());  // what the user handed over is not lost
    }
}

// ------------------------------------------------------------ races, shield

// Stackless and stackful tasks share two channels and a mutex; some of each
// are canceled while they wait. Every value sent is received exactly once
// or is still in the channel when it closes; the counter under the mutex
// matches the increments made.
TEST_P(async_test, mixed_tasks_race_on_channels_and_a_mutex_while_some_are_canceled) {
    weft::runtime rt(options());
    const int per = weft::test::under_tsan ? 300 : 2000;
    const int senders = 8, receivers = 8;
    channel<long> ch(4);
    weft::mutex m;
    long counter = 0;
    std::atomic<long> increments{0}, received_sum{0}, received_n{0};
    auto c20_sender = [&](int k) -> async<void> {
        for (int i = 0; i < per; ++i) co_await weft::co::send(ch, static_cast<long>(k) * per + i + 1);
    };
    auto c20_receiver = [&]() -> async<void> {
        while (auto v = co_await weft::co::recv(ch)) {
            received_sum += *v;
            ++received_n;
            co_await weft::co::lock(m);
            ++counter;
            m.unlock();
            ++increments;
        }
    };
    std::vector<weft::join_handle<void>> send_hs, recv_hs, victims;
    for (int k = 0; k < senders; ++k) {
        if (k % 2)
            send_hs.push_back(rt.spawn(c20_sender(k)));
        else
            send_hs.push_back(rt.spawn([&, k] {
                for (int i = 0; i < per; ++i) ch.send(static_cast<long>(k) * per + i + 1);
            }));
    }
    for (int k = 0; k < receivers; ++k) {
        if (k % 2)
            recv_hs.push_back(rt.spawn(c20_receiver()));
        else
            recv_hs.push_back(rt.spawn([&] {
                while (auto v = ch.recv()) {
                    received_sum += *v;
                    ++received_n;
                    std::lock_guard g(m);
                    ++counter;
                    ++increments;
                }
            }));
    }
    // Victims wait on a channel nobody sends on, then are canceled.
    channel<long> quiet;
    for (int k = 0; k < 8; ++k) {
        if (k % 2)
            victims.push_back(rt.spawn([](channel<long>& q) -> async<void> { (void)co_await weft::co::recv(q); }(quiet)));
        else
            victims.push_back(rt.spawn([&] { (void)quiet.recv(); }));
    }
    driver d(rt);
    for (auto& v : victims) v.cancel();
    for (auto& h : send_hs) h.join();
    ch.close();
    for (auto& h : recv_hs) h.join();
    for (auto& v : victims) EXPECT_THROW(v.join(), weft::task_canceled);
    const long n = static_cast<long>(senders) * per;
    EXPECT_EQ(received_n.load(), n);
    EXPECT_EQ(received_sum.load(), n * (n + 1) / 2);
    EXPECT_EQ(counter, increments.load());
    EXPECT_EQ(counter, n);
}

TEST_P(async_test, a_shield_defers_cancellation_inside_a_coroutine) {
    weft::runtime rt(options());
    weft::event go;
    std::atomic<bool> past_wait{false}, waiting{false};
    auto h = rt.spawn([](weft::event& e, std::atomic<bool>& past, std::atomic<bool>& w) -> async<void> {
        {
            weft::this_task::shield s;
            w = true;
            co_await weft::co::wait(e);  // not interrupted by the cancel
            past = true;
        }
        co_await weft::co::yield();  // the first await after the shield: canceled here
        past = false;
    }(go, past_wait, waiting));
    driver d(rt);
    ASSERT_TRUE(eventually([&] { return waiting.load(); }));
    h.cancel();
    std::this_thread::sleep_for(2ms);
    go.set();
    EXPECT_THROW(h.join(), weft::task_canceled);
    EXPECT_TRUE(past_wait.load());
}

INSTANTIATE_TEST_SUITE_P(workers, async_test, weft::test::worker_counts(), weft::test::worker_param_name);

}  // namespace
