// deadline_scope_test.cpp: this_task::move_on_after() / move_on_until()
// (weft/task.hpp, SCOPE-D1 - SCOPE-D4 in src/task/task.cpp): a channel
// receive and a sleep cut at the scope's deadline while the task goes on, a
// scope whose body returns leaving later waits unlimited, nested scopes
// (only the scope whose deadline fired stops the unwind), a real cancel and
// a spawn deadline passing through, a shielded wait not cut, a scope used
// outside a task, and a send racing the deadline (one outcome, no value
// lost). Every test runs with 0, 1, 2 and 4 workers under a watchdog and the
// leak check.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "sync_test_support.hpp"
#include "weft/runtime.hpp"
#include "weft/sync/channel.hpp"

namespace {

using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;
using weft::channel;
using weft::channel_status;
using weft::test::canceled_by_join;
using weft::test::driven_runtime;
using weft::test::parked;

class deadline_scope_test : public weft::test::sync_fixture {};

TEST_P(deadline_scope_test, a_receive_ends_at_the_deadline_and_the_task_goes_on) {
    weft::runtime rt(options());
    const bool ok = rt.block_on([] {
        channel<int> ch(1);
        std::optional<int> got;
        const auto start = clk::now();
        const bool cut = weft::this_task::move_on_after(30ms, [&] { got = ch.recv(); });
        const auto took = clk::now() - start;
        EXPECT_TRUE(cut);
        EXPECT_FALSE(got.has_value());
        EXPECT_GE(took, 30ms);
        EXPECT_LT(took, 5s);
        // Waits after the scope are not limited by it.
        auto h = weft::spawn([&] {
            weft::this_task::sleep_for(60ms);
            ch.send(7);
        });
        got = ch.recv();
        h.join();
        return got == 7;
    });
    EXPECT_TRUE(ok);
}

TEST_P(deadline_scope_test, a_sleep_longer_than_the_scope_ends_early) {
    weft::runtime rt(options());
    const bool ok = rt.block_on([] {
        const auto start = clk::now();
        const bool cut = weft::this_task::move_on_after(20ms, [] { weft::this_task::sleep_for(10s); });
        return cut && clk::now() - start < 5s;
    });
    EXPECT_TRUE(ok);
}

TEST_P(deadline_scope_test, a_scope_whose_body_returns_returns_false_and_arms_nothing) {
    weft::runtime rt(options());
    const bool ok = rt.block_on([] {
        int runs = 0;
        const bool cut = weft::this_task::move_on_after(30ms, [&] {
            weft::this_task::sleep_for(1ms);
            ++runs;
        });
        // A later wait longer than the scope's deadline is not cut.
        const auto start = clk::now();
        weft::this_task::sleep_for(80ms);
        return !cut && runs == 1 && clk::now() - start >= 80ms;
    });
    EXPECT_TRUE(ok);
}

TEST_P(deadline_scope_test, an_inner_earlier_deadline_ends_only_the_inner_scope) {
    weft::runtime rt(options());
    const bool ok = rt.block_on([] {
        bool inner = false;
        bool after_inner = false;
        const bool outer = weft::this_task::move_on_after(10s, [&] {
            inner = weft::this_task::move_on_after(20ms, [] { weft::this_task::sleep_for(10s); });
            weft::this_task::sleep_for(1ms);  // the outer scope still open, not fired
            after_inner = true;
        });
        return !outer && inner && after_inner;
    });
    EXPECT_TRUE(ok);
}

TEST_P(deadline_scope_test, an_outer_earlier_deadline_passes_through_the_inner_scope) {
    weft::runtime rt(options());
    const bool ok = rt.block_on([] {
        bool inner_returned = false;
        const bool outer = weft::this_task::move_on_after(20ms, [&] {
            (void)weft::this_task::move_on_after(10s, [] { weft::this_task::sleep_for(10s); });
            inner_returned = true;
        });
        return outer && !inner_returned;
    });
    EXPECT_TRUE(ok);
}

TEST_P(deadline_scope_test, a_cancel_during_a_scope_still_cancels_the_task) {
    driven_runtime rt(options());
    channel<int> ch;
    std::atomic<bool> returned{false};
    auto h = rt.spawn([&] {
        (void)weft::this_task::move_on_after(10s, [&] { (void)ch.recv(); });
        returned = true;
    });
    ASSERT_TRUE(parked(h));
    h.cancel();
    EXPECT_TRUE(canceled_by_join(h));
    EXPECT_FALSE(returned.load());
}

TEST_P(deadline_scope_test, a_spawn_deadline_shorter_than_the_scope_ends_the_task_timed_out) {
    driven_runtime rt(options());
    weft::spawn_options o;
    o.timeout = 20ms;
    auto h = rt.spawn([] { (void)weft::this_task::move_on_after(10s, [] { weft::this_task::sleep_for(10s); }); }, o);
    try {
        h.join();
        ADD_FAILURE() << "the task was not ended by its deadline";
    } catch (const weft::task_canceled& e) {
        EXPECT_EQ(e.state(), weft::task_state::timed_out);
    }
}

TEST_P(deadline_scope_test, a_shielded_wait_is_not_cut) {
    weft::runtime rt(options());
    const bool ok = rt.block_on([] {
        const auto start = clk::now();
        bool slept = false;
        const bool cut = weft::this_task::move_on_after(10ms, [&] {
            {
                weft::this_task::shield s;
                weft::this_task::sleep_for(60ms);
                slept = true;
            }
            weft::this_task::sleep_for(10s);  // unshielded: cut at once
        });
        return cut && slept && clk::now() - start >= 60ms && clk::now() - start < 5s;
    });
    EXPECT_TRUE(ok);
}

TEST_P(deadline_scope_test, outside_a_task_it_throws_not_in_task) {
    EXPECT_EQ(weft::test::errc_of([] { (void)weft::this_task::move_on_after(1ms, [] {}); }),
              weft::task_errc::not_in_task);
}

TEST_P(deadline_scope_test, a_send_racing_the_deadline_loses_no_value) {
    // SCOPE-D2: either the receive got the value, or the scope expired and
    // the value is still in the channel for the next receive.
    weft::runtime rt(options());
    for (int round = 0; round < 200; ++round) {
        const bool ok = rt.block_on([round] {
            channel<int> ch(1);
            const auto at = clk::now() + 1ms;
            auto h = weft::spawn([&] {
                while (clk::now() < at) weft::this_task::yield();
                ch.send(round);
            });
            std::optional<int> got;
            const bool cut = weft::this_task::move_on_until(at, [&] { got = ch.recv(); });
            h.join();
            if (!cut) return got == round;
            return !got && ch.recv() == round;
        });
        ASSERT_TRUE(ok) << "round " << round;
    }
}

INSTANTIATE_TEST_SUITE_P(workers, deadline_scope_test, weft::test::worker_counts(), weft::test::worker_param_name);

}  // namespace
