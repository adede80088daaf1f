// task_state_test.cpp: a task's life as its handle and the registry show
// it: every state (ready before it runs, running, waiting in join / sleep /
// blocking(), done / failed / canceled / timed_out), ids and names;
// cancellation in every state (before it runs, sleeping, joining, in
// blocking(), running, finished), shields; deadlines and timeouts; sleep
// never returning early; wait_for / wait_until / try_join / is_ready on
// running and finished tasks from tasks and plain threads; pinned and
// copy-stack tasks. Workers 0, 1, 2, 4.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "unit/runtime/runtime_fixture.hpp"
#include "weft/runtime.hpp"

namespace {

using namespace std::chrono_literals;
using weft::task_state;
using namespace weft::test;  // counted, driver, eventually
using clk = std::chrono::steady_clock;

class task_state_test : public weft::test::runtime_fixture {};
class cancel_test : public weft::test::runtime_fixture {};
class deadline_test : public weft::test::runtime_fixture {};
class wait_test : public weft::test::runtime_fixture {};
class placement_test : public weft::test::runtime_fixture {};

// state_is() waits (bounded) until h's state is s.
template <class T>
bool state_is(const weft::join_handle<T>& h, task_state s) {
    return eventually([&] { return h.state() == s; });
}

// canceled_state() joins h and returns the state of the task_canceled it
// throws (done if it returned, failed if it threw something else).
template <class T>
task_state canceled_state(weft::join_handle<T>& h) {
    try {
        (void)h.join();
        return task_state::done;
    } catch (const weft::task_canceled& e) {
        return e.state();
    } catch (...) {
        return task_state::failed;
    }
}

// spin_until() busy-waits (no suspension point) until flag, at most 20 s.
void spin_until(const std::atomic<bool>& flag) {
    const auto end = clk::now() + 20s;
    while (!flag.load() && clk::now() < end) std::this_thread::yield();
}

// ------------------------------------------------------------ states

TEST_P(task_state_test, a_spawned_task_is_ready_before_it_runs) {
    weft::runtime rt(options());
    // From inside a task, a pinned child cannot run before its parent suspends.
    rt.block_on([] {
        std::atomic<bool> ran{false};
        auto h = weft::spawn([&] { ran = true; }, {.pinned = true});
        const task_state s = h.state();
        EXPECT_TRUE(s == task_state::ready || s == task_state::created) << weft::to_string(s);
        EXPECT_FALSE(ran.load());
        EXPECT_FALSE(h.is_ready());
        h.join();
        EXPECT_TRUE(ran.load());
    });
    if (workers() == 0) {
        // Nobody drives the runtime: a task spawned from here stays ready.
        auto h = rt.spawn([] { return 1; });
        EXPECT_EQ(h.state(), task_state::ready);
        auto ts = rt.tasks();
        ASSERT_EQ(ts.size(), 1u);
        EXPECT_EQ(ts[0].state, task_state::ready);
        EXPECT_EQ(ts[0].worker, -1) << "a task that has not run has no worker";
        EXPECT_EQ(rt.run_once(), 1u);
        EXPECT_EQ(h.state(), task_state::done);
        EXPECT_EQ(h.join(), 1);
    }
}

TEST_P(task_state_test, a_task_is_running_while_it_runs) {
    weft::runtime rt(options());
    driver d(rt);
    std::atomic<bool> started{false}, go{false};
    auto h = rt.spawn(
        [&] {
            started = true;
            spin_until(go);
            return weft::this_task::worker();
        },
        {.name = "runner"});
    ASSERT_TRUE(eventually([&] { return started.load(); }));
    EXPECT_EQ(h.state(), task_state::running) << "seen from a plain thread";
    auto ts = rt.tasks();
    ASSERT_EQ(ts.size(), 1u);
    EXPECT_EQ(ts[0].state, task_state::running);
    EXPECT_EQ(ts[0].name, "runner");
    if (workers() >= 2) {
        // Seen from another task, running on another worker at the same time.
        auto observer = rt.spawn([&] { return h.state(); });
        EXPECT_EQ(observer.join(), task_state::running) << "seen from another task";
    }
    go = true;
    const int w = h.join();
    EXPECT_GE(w, 0);
    EXPECT_LT(w, static_cast<int>(std::max(1u, workers())));
}

TEST_P(task_state_test, a_task_is_waiting_while_it_sleeps_joins_or_blocks) {
    weft::runtime rt(options());
    driver d(rt);
    std::atomic<bool> gate{false}, in_blocking{false};
    auto sleeper = rt.spawn([] { weft::this_task::sleep_for(1h); }, {.name = "sleeper"});
    auto target = rt.spawn([&] {
        while (!gate.load()) weft::this_task::sleep_for(200us);
        return 5;
    });
    auto joiner = rt.spawn([&] { return target.join(); }, {.name = "joiner"});
    auto blocker = rt.spawn([&] {
        return weft::blocking([&] {
            in_blocking = true;
            spin_until(gate);
            return 6;
        });
    });
    EXPECT_TRUE(state_is(sleeper, task_state::waiting));
    EXPECT_TRUE(state_is(joiner, task_state::waiting));
    ASSERT_TRUE(eventually([&] { return in_blocking.load(); }));
    EXPECT_TRUE(state_is(blocker, task_state::waiting));
    gate = true;
    EXPECT_EQ(joiner.join(), 5);
    EXPECT_EQ(blocker.join(), 6);
    sleeper.cancel();
    EXPECT_EQ(canceled_state(sleeper), task_state::canceled);
}

TEST_P(task_state_test, final_states_done_failed_canceled_timed_out) {
    weft::runtime rt(options());
    driver d(rt);
    auto ok = rt.spawn([] { return 1; });
    auto bad = rt.spawn([]() -> int { throw std::runtime_error("x"); });
    auto gone = rt.spawn([] {
        weft::this_task::sleep_for(1h);
        return 3;
    });
    auto late = rt.spawn(
        [] {
            weft::this_task::sleep_for(1h);
            return 4;
        },
        {.timeout = 5ms});
    gone.cancel();
    for (auto* h : {&ok, &bad, &gone, &late}) ASSERT_TRUE(h->wait_for(20s));
    EXPECT_EQ(ok.state(), task_state::done);
    EXPECT_EQ(bad.state(), task_state::failed);
    EXPECT_EQ(gone.state(), task_state::canceled);
    EXPECT_EQ(late.state(), task_state::timed_out);
    for (task_state s : {task_state::done, task_state::failed, task_state::canceled, task_state::timed_out})
        EXPECT_TRUE(weft::finished(s));
    for (task_state s : {task_state::created, task_state::ready, task_state::running, task_state::waiting})
        EXPECT_FALSE(weft::finished(s));
    EXPECT_STREQ(weft::to_string(task_state::timed_out), "timed_out");
    EXPECT_STREQ(weft::to_string(task_state::waiting), "waiting");
    EXPECT_EQ(ok.join(), 1);
    EXPECT_THROW((void)bad.join(), std::runtime_error);
    EXPECT_EQ(canceled_state(gone), task_state::canceled);
    EXPECT_EQ(canceled_state(late), task_state::timed_out);
}

TEST_P(task_state_test, ids_are_unique_and_increasing_and_names_are_kept) {
    weft::runtime rt(options());
    weft::runtime other(options());
    driver d(rt);
    driver d2(other);
    std::vector<weft::join_handle<std::uint64_t>> hs;
    std::uint64_t last = 0;
    for (int i = 0; i < 100; ++i) {
        auto& r = i % 3 == 0 ? other : rt;
        std::string name = "task-" + std::to_string(i);
        hs.push_back(r.spawn([] { return weft::this_task::id(); }, {.name = name}));
        name.assign("clobbered");  // the name was copied
        EXPECT_GT(hs.back().id(), last) << "ids increase (over runtimes too)";
        last = hs.back().id();
        EXPECT_EQ(hs.back().name(), "task-" + std::to_string(i));
    }
    std::set<std::uint64_t> seen;
    for (auto& h : hs) {
        const std::uint64_t id = h.id();
        EXPECT_EQ(h.join(), id) << "this_task::id() is the handle's id";
        EXPECT_TRUE(seen.insert(id).second);
    }
    // Ids from several threads spawning at once are unique too.
    std::vector<std::uint64_t> ids[4];
    std::vector<std::thread> spawners;
    for (auto& v : ids)
        spawners.emplace_back([&rt, &v] {
            for (int i = 0; i < 200; ++i) {
                auto h = rt.spawn([] {});
                v.push_back(h.id());
                h.join();
            }
        });
    for (auto& t : spawners) t.join();
    for (auto& v : ids) {
        EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
        for (auto id : v) EXPECT_TRUE(seen.insert(id).second) << "id " << id << " given twice";
    }
    auto named = rt.spawn([] { return std::string(weft::this_task::name()); }, {.name = "named"});
    EXPECT_EQ(named.join(), "named");
    auto anonymous = rt.spawn([] { return std::string(weft::this_task::name()); });
    EXPECT_EQ(anonymous.name(), "");
    EXPECT_EQ(anonymous.join(), "");
}

// ------------------------------------------------------------ cancel

TEST_P(cancel_test, before_it_runs_the_body_never_runs) {
    weft::runtime rt(options());
    counted::reset();
    rt.block_on([] {
        std::atomic<bool> ran{false};
        auto h = weft::spawn([&, c = counted{}] { ran = true; }, {.name = "never", .pinned = true});
        h.cancel();
        EXPECT_EQ(canceled_state(h), task_state::canceled);
        EXPECT_FALSE(ran.load()) << "a task canceled before it ran ran its body";
    });
    EXPECT_EQ(counted::made.load(), counted::gone.load()) << "its captures were not destroyed";
    if (workers() == 0) {
        std::atomic<bool> ran{false};
        auto h = rt.spawn([&] { ran = true; });
        h.cancel();
        EXPECT_EQ(rt.run_once(), 1u);
        EXPECT_EQ(h.state(), task_state::canceled);
        EXPECT_FALSE(ran.load());
        EXPECT_EQ(canceled_state(h), task_state::canceled);
    }
}

TEST_P(cancel_test, while_sleeping_destructors_run) {
    weft::runtime rt(options());
    driver d(rt);
    counted::reset();
    std::atomic<bool> woke{false};
    auto h = rt.spawn(
        [&] {
            counted a;
            {
                counted b;
                weft::this_task::sleep_for(1h);
            }
            woke = true;
        },
        {.name = "sleepy"});
    ASSERT_TRUE(state_is(h, task_state::waiting));
    EXPECT_EQ(counted::made.load() - counted::gone.load(), 2);
    const auto t0 = clk::now();
    h.cancel();
    try {
        h.join();
        ADD_FAILURE() << "join of a canceled task returned";
    } catch (const weft::task_canceled& e) {
        EXPECT_EQ(e.state(), task_state::canceled);
        EXPECT_NE(std::string(e.what()).find("sleepy"), std::string::npos) << e.what();
    }
    EXPECT_LT(clk::now() - t0, 10s);
    EXPECT_FALSE(woke.load());
    EXPECT_EQ(counted::made.load(), counted::gone.load()) << "locals of the canceled task were not destroyed";
}

TEST_P(cancel_test, while_joining) {
    weft::runtime rt(options());
    driver d(rt);
    counted::reset();
    auto target = rt.spawn([] {
        weft::this_task::sleep_for(1h);
        return 1;
    });
    std::atomic<bool> returned{false};
    auto joiner = rt.spawn([&] {
        counted c;
        (void)target.join();
        returned = true;
    });
    ASSERT_TRUE(state_is(joiner, task_state::waiting));
    joiner.cancel();
    EXPECT_EQ(canceled_state(joiner), task_state::canceled);
    EXPECT_FALSE(returned.load());
    EXPECT_EQ(counted::made.load(), counted::gone.load());
    // The awaited task is untouched and its handle still usable. (It may not
    // have reached its sleep yet when the joiner parked: with workers the
    // two run at once, so wait for it.)
    ASSERT_TRUE(target.valid());
    EXPECT_TRUE(state_is(target, task_state::waiting));
    target.cancel();
    EXPECT_EQ(canceled_state(target), task_state::canceled);
}

TEST_P(cancel_test, while_in_blocking_takes_effect_at_the_next_suspension_point) {
    weft::runtime rt(options());
    driver d(rt);
    counted::reset();
    std::atomic<bool> in_call{false}, release{false}, past_yield{false};
    std::atomic<int> got{0};
    std::atomic<int> requested{-1};
    auto h = rt.spawn([&] {
        counted c;
        got = weft::blocking([&] {
            in_call = true;
            spin_until(release);
            return 5;
        });
        requested = weft::this_task::cancellation_requested() ? 1 : 0;
        weft::this_task::yield();
        past_yield = true;
    });
    ASSERT_TRUE(eventually([&] { return in_call.load(); }));
    EXPECT_TRUE(state_is(h, task_state::waiting));
    h.cancel();
    std::this_thread::sleep_for(2ms);
    EXPECT_EQ(h.state(), task_state::waiting) << "cancel interrupted blocking()";
    release = true;
    EXPECT_EQ(canceled_state(h), task_state::canceled);
    EXPECT_EQ(got.load(), 5) << "blocking() did not return its value";
    EXPECT_EQ(requested.load(), 1);
    EXPECT_FALSE(past_yield.load());
    EXPECT_EQ(counted::made.load(), counted::gone.load());
}

TEST_P(cancel_test, while_running_takes_effect_at_the_next_yield) {
    weft::runtime rt(options());
    driver d(rt);
    counted::reset();
    std::atomic<bool> started{false}, canceled{false}, past_yield{false};
    std::atomic<int> requested{-1};
    auto h = rt.spawn([&] {
        counted c;
        started = true;
        spin_until(canceled);
        requested = weft::this_task::cancellation_requested() ? 1 : 0;
        weft::this_task::yield();
        past_yield = true;
    });
    ASSERT_TRUE(eventually([&] { return started.load(); }));
    EXPECT_EQ(h.state(), task_state::running);
    h.cancel();
    EXPECT_EQ(h.state(), task_state::running) << "cancel() does not stop a running task at once";
    canceled = true;
    EXPECT_EQ(canceled_state(h), task_state::canceled);
    EXPECT_EQ(requested.load(), 1);
    EXPECT_FALSE(past_yield.load());
    EXPECT_EQ(counted::made.load(), counted::gone.load());
}

TEST_P(cancel_test, after_finish_is_a_no_op) {
    weft::runtime rt(options());
    driver d(rt);
    auto h = rt.spawn([] { return 11; });
    ASSERT_TRUE(h.wait_for(20s));
    h.cancel();
    h.cancel();
    EXPECT_EQ(h.state(), task_state::done);
    EXPECT_EQ(h.join(), 11);
    auto f = rt.spawn([]() -> int { throw std::logic_error("kept"); });
    ASSERT_TRUE(f.wait_for(20s));
    f.cancel();
    EXPECT_EQ(f.state(), task_state::failed);
    EXPECT_THROW((void)f.join(), std::logic_error);
}

TEST_P(cancel_test, a_shield_defers_cancellation_until_it_ends) {
    weft::runtime rt(options());
    driver d(rt);
    counted::reset();
    std::atomic<bool> in_shield{false}, slept_through{false}, past_shield{false};
    std::atomic<int> requested{-1};
    std::atomic<long long> slept_ns{0};
    auto h = rt.spawn([&] {
        counted c;
        {
            weft::this_task::shield s;
            in_shield = true;
            const auto t0 = clk::now();
            weft::this_task::sleep_for(30ms);  // not interrupted
            weft::this_task::yield();          // not a cancellation point while shielded
            slept_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(clk::now() - t0).count();
            requested = weft::this_task::cancellation_requested() ? 1 : 0;
            slept_through = true;
        }
        weft::this_task::sleep_for(1h);  // the first suspension point after the shield
        past_shield = true;
    });
    ASSERT_TRUE(eventually([&] { return in_shield.load(); }));
    h.cancel();
    EXPECT_EQ(canceled_state(h), task_state::canceled);
    EXPECT_TRUE(slept_through.load()) << "the shielded sleep was interrupted";
    EXPECT_GE(slept_ns.load(), 30'000'000);
    EXPECT_EQ(requested.load(), 1);
    EXPECT_FALSE(past_shield.load());
    EXPECT_EQ(counted::made.load(), counted::gone.load());
    // Nested shields: canceled only after the outer one ends.
    std::atomic<int> stage{0};
    auto n = rt.spawn([&] {
        weft::this_task::shield outer;
        {
            weft::this_task::shield inner;
            stage = 1;
            weft::this_task::sleep_for(5ms);
        }
        weft::this_task::yield();
        stage = 2;  // still shielded by outer
        weft::this_task::sleep_for(5ms);
        stage = 3;
    });
    ASSERT_TRUE(eventually([&] { return stage.load() >= 1; }));
    n.cancel();
    EXPECT_EQ(canceled_state(n), task_state::done) << "a fully shielded task runs to its end";
    EXPECT_EQ(stage.load(), 3);
}

TEST_P(cancel_test, cancel_from_another_task) {
    weft::runtime rt(options());
    rt.block_on([] {
        counted::reset();
        auto victim = weft::spawn([] {
            counted c;
            weft::this_task::sleep_for(1h);
        });
        while (victim.state() != task_state::waiting) weft::this_task::sleep_for(100us);
        victim.cancel();
        EXPECT_EQ(canceled_state(victim), task_state::canceled);
        EXPECT_EQ(counted::made.load(), counted::gone.load());
    });
}

// ------------------------------------------------------------ deadlines

TEST_P(deadline_test, timeout_and_deadline_end_a_sleeping_task_timed_out) {
    weft::runtime rt(options());
    driver d(rt);
    counted::reset();
    const auto t0 = clk::now();
    auto by_timeout = rt.spawn(
        [] {
            counted c;
            weft::this_task::sleep_for(1h);
        },
        {.name = "by-timeout", .timeout = 20ms});
    auto by_deadline = rt.spawn(
        [] {
            counted c;
            weft::this_task::sleep_for(1h);
        },
        {.deadline = t0 + 20ms});
    // The earlier of the two wins.
    auto both = rt.spawn([] { weft::this_task::sleep_for(1h); }, {.deadline = t0 + 20ms, .timeout = 1h});
    for (auto* h : {&by_timeout, &by_deadline, &both}) {
        try {
            h->join();
            ADD_FAILURE() << "a task past its deadline returned";
        } catch (const weft::task_canceled& e) {
            EXPECT_EQ(e.state(), task_state::timed_out);
            EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
        }
    }
    const auto took = clk::now() - t0;
    EXPECT_GE(took, 20ms) << "a deadline fired early";
    EXPECT_LT(took, 20s);
    EXPECT_EQ(counted::made.load(), counted::gone.load());
}

TEST_P(deadline_test, a_task_that_finishes_before_its_deadline_stays_done) {
    weft::runtime rt(options());
    driver d(rt);
    auto h = rt.spawn(
        [] {
            weft::this_task::sleep_for(1ms);
            return 8;
        },
        {.timeout = 10s});
    ASSERT_TRUE(h.wait_for(20s));
    EXPECT_EQ(h.state(), task_state::done);
    EXPECT_EQ(h.join(), 8);
    // A deadline that passed while the task ran (never suspending) takes
    // effect at its next suspension point.
    std::atomic<bool> past{false};
    auto busy = rt.spawn(
        [&] {
            const auto end = clk::now() + 30ms;
            while (clk::now() < end) {
            }
            weft::this_task::yield();
            past = true;
        },
        {.timeout = 5ms});
    EXPECT_EQ(canceled_state(busy), task_state::timed_out);
    EXPECT_FALSE(past.load());
}

// Timers are fired by workers; while some workers run tasks that do not
// suspend, an idle one must still wake for a timer that falls due.
TEST_P(deadline_test, a_sleeper_wakes_on_time_while_other_workers_are_busy) {
    if (workers() < 3) GTEST_SKIP() << "needs a worker besides the sleeper's and the busy ones";
    if (WEFT_VALGRIND)
        GTEST_SKIP() << "valgrind runs one thread at a time: the spinners hold the only CPU for whole time slices, "
                        "so the idle worker's wake-up time says nothing about the runtime (a 5 ms sleep took 120 ms)";
    weft::runtime rt(options());
    const unsigned busy = workers() - 2;
    int late = 0;
    double worst_ms = 0;
    for (int round = 0; round < 5; ++round) {
        std::this_thread::sleep_for(10ms);  // every worker sleeps
        const auto t0 = clk::now();
        auto sleeper = rt.spawn([] { weft::this_task::sleep_for(5ms); });
        std::this_thread::sleep_for(1ms);  // it runs and sleeps; the workers sleep again
        std::vector<weft::join_handle<void>> spinners;
        for (unsigned k = 0; k < busy; ++k)
            spinners.push_back(rt.spawn([] {
                const auto end = clk::now() + 150ms;
                while (clk::now() < end) {
                }
            }));
        sleeper.join();
        const double ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
        late += ms > 75;
        worst_ms = std::max(worst_ms, ms);
        for (auto& s : spinners) s.join();
    }
    EXPECT_EQ(late, 0) << "a 5 ms sleep took up to " << worst_ms << " ms while " << workers() - busy - 1
                       << " worker(s) were idle";
}

TEST_P(deadline_test, a_deadline_already_passed_cancels_before_the_body) {
    weft::runtime rt(options());
    driver d(rt);
    std::atomic<bool> ran{false};
    auto h = rt.spawn([&] { ran = true; }, {.deadline = clk::now() - 1s});
    const task_state s = canceled_state(h);
    // The body may have run before the timer fired (then the task is done);
    // if the timer came first, the body never runs.
    EXPECT_TRUE(s == task_state::timed_out || s == task_state::done) << weft::to_string(s);
    if (s == task_state::timed_out) {
        EXPECT_FALSE(ran.load());
    } else {
        EXPECT_TRUE(ran.load());
    }
}

TEST_P(deadline_test, sleep_never_returns_early) {
    weft::runtime rt(options());
    rt.block_on([] {
        for (auto d : {0us, 1us, 100us, 1000us, 3000us, 7000us}) {
            const auto t0 = clk::now();
            weft::this_task::sleep_for(d);
            EXPECT_GE(clk::now() - t0, d) << "sleep_for(" << d.count() << "us) returned early";
        }
        for (int i = 0; i < 5; ++i) {
            const auto when = clk::now() + std::chrono::microseconds(500 * i);
            weft::this_task::sleep_until(when);
            EXPECT_GE(clk::now(), when) << "sleep_until returned early";
        }
        weft::this_task::sleep_until(clk::now() - 1s);  // in the past: returns
    });
    // Many sleepers at once, each checked.
    std::atomic<int> early{0};
    rt.block_on([&] {
        std::vector<weft::join_handle<void>> hs;
        for (int i = 0; i < 40; ++i)
            hs.push_back(weft::spawn([&, i] {
                const auto d = std::chrono::microseconds(100 * (i % 8 + 1));
                const auto t0 = clk::now();
                weft::this_task::sleep_for(d);
                if (clk::now() - t0 < d) early.fetch_add(1);
            }));
        for (auto& h : hs) h.join();
    });
    EXPECT_EQ(early.load(), 0);
}

// ------------------------------------------------------------ wait_for & co

TEST_P(wait_test, on_a_running_and_a_finished_task_from_a_task) {
    weft::runtime rt(options());
    rt.block_on([] {
        std::atomic<bool> gate{false};
        auto h = weft::spawn([&] {
            while (!gate.load()) weft::this_task::sleep_for(200us);
            return 42;
        });
        auto v = weft::spawn([&] {
            while (!gate.load()) weft::this_task::sleep_for(200us);
        });
        EXPECT_FALSE(h.is_ready());
        auto t0 = clk::now();
        EXPECT_FALSE(h.wait_for(5ms));
        EXPECT_GE(clk::now() - t0, 5ms) << "wait_for returned early";
        t0 = clk::now();
        EXPECT_FALSE(h.wait_until(t0 + 3ms));
        EXPECT_GE(clk::now() - t0, 3ms);
        EXPECT_FALSE(h.wait_for(0ms));
        EXPECT_FALSE(h.try_join().has_value());
        EXPECT_FALSE(v.try_join());
        EXPECT_TRUE(h.valid()) << "a failed try_join leaves the handle";
        gate = true;
        EXPECT_TRUE(h.wait_for(20s));
        EXPECT_TRUE(h.is_ready());
        EXPECT_TRUE(h.wait_for(0ms));
        EXPECT_TRUE(h.wait_until(clk::now() - 1s));
        auto r = h.try_join();
        ASSERT_TRUE(r.has_value());
        EXPECT_EQ(*r, 42);
        EXPECT_FALSE(h.valid());
        EXPECT_TRUE(v.wait_for(20s));
        EXPECT_TRUE(v.try_join());
        EXPECT_FALSE(v.valid());
    });
}

TEST_P(wait_test, on_a_running_and_a_finished_task_from_a_plain_thread) {
    weft::runtime rt(options());
    driver d(rt);
    std::atomic<bool> gate{false};
    auto h = rt.spawn([&] {
        while (!gate.load()) weft::this_task::sleep_for(200us);
        return 42;
    });
    auto e = rt.spawn([&]() -> int {
        while (!gate.load()) weft::this_task::sleep_for(200us);
        throw std::runtime_error("e");
    });
    EXPECT_FALSE(h.is_ready());
    auto t0 = clk::now();
    EXPECT_FALSE(h.wait_for(5ms));
    EXPECT_GE(clk::now() - t0, 5ms);
    t0 = clk::now();
    EXPECT_FALSE(h.wait_until(t0 + 3ms));
    EXPECT_GE(clk::now() - t0, 3ms);
    EXPECT_FALSE(h.try_join().has_value());
    gate = true;
    EXPECT_TRUE(h.wait_for(20s));
    EXPECT_TRUE(h.is_ready());
    EXPECT_TRUE(h.wait_for(0ms));
    EXPECT_EQ(h.try_join().value_or(-1), 42);
    // wait_for does not rethrow; try_join does.
    EXPECT_TRUE(e.wait_until(clk::now() + 20s));
    EXPECT_THROW((void)e.try_join(), std::runtime_error);
}

TEST_P(wait_test, wait_for_of_a_canceled_waiter_throws_nothing_but_unwinds) {
    weft::runtime rt(options());
    driver d(rt);
    counted::reset();
    auto target = rt.spawn([] { weft::this_task::sleep_for(1h); });
    std::atomic<int> result{-1};
    auto waiter = rt.spawn([&] {
        counted c;
        result = target.wait_for(1h) ? 1 : 0;
    });
    ASSERT_TRUE(state_is(waiter, task_state::waiting));
    waiter.cancel();
    EXPECT_EQ(canceled_state(waiter), task_state::canceled);
    EXPECT_EQ(result.load(), -1);
    EXPECT_EQ(counted::made.load(), counted::gone.load());
    EXPECT_FALSE(target.is_ready());
    target.cancel();
    EXPECT_TRUE(target.wait_for(20s));
    EXPECT_EQ(canceled_state(target), task_state::canceled);
}

// ------------------------------------------------------------ pinned and copy-stack tasks

TEST_P(placement_test, copy_stack_tasks_run_yield_join_and_cancel_on_one_worker) {
    weft::runtime rt(options());
    counted::reset();
    std::atomic<int> moved{0};
    const long total = rt.block_on([&] {
        std::vector<weft::join_handle<long>> hs;
        for (int i = 0; i < 8; ++i)
            hs.push_back(weft::spawn(
                [&, i] {
                    char big[2048];  // live bytes that must survive the saves
                    for (std::size_t k = 0; k < sizeof big; ++k) big[k] = static_cast<char>(k * 7 + i);
                    const int home = weft::this_task::worker();
                    long sum = 0;
                    for (int k = 0; k < 200; ++k) {
                        if (k % 50 == 0)
                            weft::this_task::sleep_for(100us);
                        else
                            weft::this_task::yield();
                        if (weft::this_task::worker() != home) moved.fetch_add(1);
                        sum += big[k % sizeof big];
                    }
                    for (std::size_t k = 0; k < sizeof big; ++k)
                        if (big[k] != static_cast<char>(k * 7 + i)) return -1L;
                    return sum;
                },
                {.copy_stack = true}));
        long s = 0;
        for (auto& h : hs) {
            const long v = h.join();
            EXPECT_NE(v, -1) << "a copy-stack task's stack was not restored";
            s += v;
        }
        return s;
    });
    EXPECT_NE(total, 0);
    EXPECT_EQ(moved.load(), 0) << "a copy-stack task changed workers";
    // Cancel a sleeping copy-stack task.
    driver d(rt);
    auto h = rt.spawn(
        [] {
            counted c;
            weft::this_task::sleep_for(1h);
        },
        {.name = "copy-sleeper", .copy_stack = true});
    ASSERT_TRUE(state_is(h, task_state::waiting));
    auto ts = rt.tasks();
    ASSERT_EQ(ts.size(), 1u);
    EXPECT_TRUE(ts[0].pinned) << "copy_stack implies pinned";
    h.cancel();
    EXPECT_EQ(canceled_state(h), task_state::canceled);
    EXPECT_EQ(counted::made.load(), counted::gone.load());
}

TEST_P(placement_test, pinned_tasks_never_change_workers) {
    weft::runtime rt(options());
    std::atomic<int> moved{0};
    rt.block_on([&] {
        std::vector<weft::join_handle<void>> hs;
        // Unpinned busy tasks around them, to give thieves something to do.
        for (int i = 0; i < 8; ++i)
            hs.push_back(weft::spawn([] {
                for (int k = 0; k < 300; ++k) weft::this_task::yield();
            }));
        for (int i = 0; i < 8; ++i)
            hs.push_back(weft::spawn(
                [&] {
                    const int home = weft::this_task::worker();
                    for (int k = 0; k < 300; ++k) {
                        if (k % 100 == 0)
                            weft::this_task::sleep_for(100us);
                        else
                            weft::this_task::yield();
                        if (weft::this_task::worker() != home) moved.fetch_add(1);
                    }
                },
                {.pinned = true}));
        for (auto& h : hs) h.join();
    });
    EXPECT_EQ(moved.load(), 0) << "a pinned task changed workers";
    // Pinned tasks spawned from a plain thread are spread over the workers.
    driver d(rt);
    std::vector<weft::join_handle<int>> hs;
    std::atomic<int> moved_outside{0};
    for (int i = 0; i < 8; ++i)
        hs.push_back(rt.spawn(
            [&] {
                const int home = weft::this_task::worker();
                for (int k = 0; k < 50; ++k) {
                    weft::this_task::yield();
                    if (weft::this_task::worker() != home) moved_outside.fetch_add(1);
                }
                return home;
            },
            {.pinned = true}));
    std::set<int> outside;
    for (auto& h : hs) outside.insert(h.join());
    EXPECT_EQ(moved_outside.load(), 0);
    EXPECT_EQ(outside.size(), std::size_t(std::max(1u, workers())))
        << "pinned tasks spawned from outside are placed round-robin";
}

INSTANTIATE_TEST_SUITE_P(workers, task_state_test, weft::test::worker_counts(), weft::test::worker_param_name);
INSTANTIATE_TEST_SUITE_P(workers, cancel_test, weft::test::worker_counts(), weft::test::worker_param_name);
INSTANTIATE_TEST_SUITE_P(workers, deadline_test, weft::test::worker_counts(), weft::test::worker_param_name);
INSTANTIATE_TEST_SUITE_P(workers, wait_test, weft::test::worker_counts(), weft::test::worker_param_name);
INSTANTIATE_TEST_SUITE_P(workers, placement_test, weft::test::worker_counts(), weft::test::worker_param_name);

}  // namespace
