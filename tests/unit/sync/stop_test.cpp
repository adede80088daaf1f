// stop_test.cpp: waiting for a std::stop_token (weft/sync/stop.hpp): the
// select case on_stop() ended by a stop requested from a plain thread and
// from another task, a token already stopped, the plain waits wait() /
// wait_for(), a stop racing a channel's other side (one case completes, no
// value lost), and the runtime's own token (runtime::get_stop_token(),
// stopped by shutdown() and stop()). Every test runs with 0, 1, 2 and 4
// workers under a watchdog and the leak check.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <stop_token>
#include <thread>

#include "sync_test_support.hpp"
#include "weft/runtime.hpp"
#include "weft/sync/channel.hpp"
#include "weft/sync/select.hpp"
#include "weft/sync/stop.hpp"

namespace {

using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;
using weft::channel;
using weft::channel_status;
using weft::test::driven_runtime;
using weft::test::eventually;
using weft::test::parked;

class stop_test : public weft::test::sync_fixture {};

using weft::test::yield_until;

TEST_P(stop_test, a_stop_from_another_thread_ends_a_select_on_a_channel_and_the_token) {
    driven_runtime rt(options());
    channel<int> ch;
    std::stop_source src;
    auto h = rt.spawn([&] {
        bool stopped = false;
        const std::size_t i = weft::select(weft::on_recv(ch), weft::on_stop(src.get_token(), [&] { stopped = true; }));
        return i == 1 && stopped;
    });
    ASSERT_TRUE(parked(h));
    std::thread([&] { src.request_stop(); }).join();  // the callback runs on that thread
    EXPECT_TRUE(h.join());
    // The select left nothing in the channel: a value sent now waits for a receiver.
    EXPECT_EQ(ch.try_send(1), channel_status::full);
}

TEST_P(stop_test, a_stop_from_another_task_ends_a_select) {
    weft::runtime rt(options());
    const bool ok = rt.block_on([] {
        channel<int> ch;
        std::stop_source src;
        auto h = weft::spawn([&] { return weft::select(weft::on_recv(ch), weft::on_stop(src.get_token())); });
        EXPECT_TRUE(yield_until([&] { return h.state() == weft::task_state::waiting; }));
        src.request_stop();
        return h.join() == 1u;
    });
    EXPECT_TRUE(ok);
}

TEST_P(stop_test, a_copy_stack_task_waits_for_a_stop_off_its_shared_stack) {
    // WAITER-V4, STOP-S3: the case (with its registered callback) and the
    // plain wait's core live off the shared stack, which the next task on
    // it overwrites while this one waits (debug builds check the nodes).
    driven_runtime rt(options());
    channel<int> ch;
    std::stop_source src;
    const weft::spawn_options copy{.copy_stack = true};
    auto a = rt.spawn([&] { return weft::select(weft::on_recv(ch), weft::on_stop(src.get_token())); }, copy);
    auto b = rt.spawn([&] { return weft::wait_until(src.get_token(), clk::now() + 1h); }, copy);
    auto c = rt.spawn([&] { return weft::select(weft::on_stop(src.get_token()), weft::on_recv(ch)); }, copy);
    ASSERT_TRUE(parked(a));
    ASSERT_TRUE(parked(b));
    ASSERT_TRUE(parked(c));
    std::thread([&] { src.request_stop(); }).join();
    EXPECT_EQ(a.join(), 1u);
    EXPECT_TRUE(b.join());
    EXPECT_EQ(c.join(), 0u);
}

TEST_P(stop_test, a_token_already_stopped_selects_at_once) {
    weft::runtime rt(options());
    rt.block_on([] {
        channel<int> ch;
        std::stop_source src;
        src.request_stop();
        bool ran = false;
        const auto t0 = clk::now();
        EXPECT_EQ(weft::select(weft::on_recv(ch), weft::on_stop(src.get_token(), [&] { ran = true; })), 1u);
        EXPECT_TRUE(ran);
        // A ready stop case is a ready case: it is taken before the default.
        EXPECT_EQ(weft::select(weft::on_stop(src.get_token()), weft::on_default()), 0u);
        EXPECT_LT(clk::now() - t0, 5s);
        // A token that can never be stopped is never ready.
        EXPECT_EQ(weft::select(weft::on_stop(std::stop_token{}), weft::on_default()), 1u);
        EXPECT_EQ(weft::select(weft::on_stop(std::stop_token{}), weft::on_timeout(2ms)), 1u);
    });
}

TEST_P(stop_test, a_plain_wait_ends_when_stop_is_requested) {
    driven_runtime rt(options());
    std::stop_source src;
    std::atomic<bool> in_wait{false};
    auto h = rt.spawn([&] {
        // A deadline first: it passes (never early) while nobody stops.
        const auto t0 = clk::now();
        const bool early = weft::wait_for(src.get_token(), 5ms);
        const bool waited = clk::now() - t0 >= 5ms;
        in_wait.store(true);
        weft::wait(src.get_token());
        return !early && waited && weft::wait_until(src.get_token(), clk::now() + 1h);
    });
    ASSERT_TRUE(eventually([&] { return in_wait.load(); }));
    ASSERT_TRUE(parked(h));  // in wait()
    src.request_stop();
    EXPECT_TRUE(h.join());

    // A plain thread waits too, stopped by a task.
    std::stop_source other;
    std::atomic<bool> thread_waits{false};
    auto stopper = rt.spawn([&] {
        while (!thread_waits.load()) weft::this_task::sleep_for(1ms);
        weft::this_task::sleep_for(2ms);
        other.request_stop();
    });
    std::thread th([&] {
        thread_waits.store(true);
        weft::wait(other.get_token());
    });
    th.join();
    stopper.join();
    EXPECT_TRUE(other.stop_requested());
}

TEST_P(stop_test, a_canceled_wait_leaves_the_token_clean) {
    driven_runtime rt(options());
    std::stop_source src;
    auto a = rt.spawn([&] { weft::wait(src.get_token()); });
    auto b = rt.spawn([&] { (void)weft::select(weft::on_stop(src.get_token()), weft::on_timeout(1h)); });
    ASSERT_TRUE(parked(a));
    ASSERT_TRUE(parked(b));
    a.cancel();
    b.cancel();
    EXPECT_TRUE(weft::test::canceled_by_join(a));
    EXPECT_TRUE(weft::test::canceled_by_join(b));
    // Their callbacks are gone: a stop now touches nothing of theirs.
    src.request_stop();
}

// A select receiving from a channel and waiting for a stop races a sender
// (itself a select of the send and the same stop) and the stop, requested
// by a third task or a plain thread. Exactly one case of each select
// completes, and the value is received if and only if it was sent (or is
// still in the buffer).
TEST_P(stop_test, a_stop_racing_a_send_completes_exactly_one_case_and_loses_no_value) {
    driven_runtime rt(options());
    const int rounds = weft::test::reps("WEFT_TEST_STOP_ROUNDS", 400, 60);
    int received = 0, by_stop = 0;
    for (int round = 0; round < rounds; ++round) {
        channel<int> ch(static_cast<std::size_t>(round % 2));  // rendezvous, then a buffer of one
        std::stop_source src;
        auto recv = rt.spawn([&] {
            int got = 0, fired = 0;
            const std::size_t i =
                weft::select(weft::on_recv(ch, [&](std::optional<int> v) { got = v.value_or(-1), ++fired; }),
                             weft::on_stop(src.get_token(), [&] { ++fired; }));
            return std::pair<std::size_t, int>(i, fired == 1 ? got : -100);
        });
        auto send = rt.spawn([&] {
            int fired = 0;
            const std::size_t i = weft::select(weft::on_send(ch, round + 1, [&] { ++fired; }),
                                               weft::on_stop(src.get_token(), [&] { ++fired; }));
            return fired == 1 ? i : std::size_t{99};
        });
        if (round % 3 == 0) {
            std::thread([&] { src.request_stop(); }).join();
        } else {
            rt.spawn([&] {
                  if (round % 3 == 2) weft::this_task::yield();
                  src.request_stop();
              })
                .join();
        }
        const auto [ri, got] = recv.join();
        const std::size_t si = send.join();
        ASSERT_NE(got, -100) << "round " << round << ": the receiving select completed no case or two";
        ASSERT_NE(si, 99u) << "round " << round << ": the sending select completed no case or two";
        const bool sent = si == 0;
        int in_buffer = 0;
        if (auto r = ch.try_recv(); r.status == channel_status::ok) in_buffer = *r.value;
        if (ri == 0) {
            ++received;
            ASSERT_EQ(got, round + 1) << "round " << round;
            ASSERT_TRUE(sent) << "round " << round << ": received a value nobody sent";
            ASSERT_EQ(in_buffer, 0) << "round " << round;
        } else {
            ++by_stop;
            // Stopped: a value sent went to the buffer and is still there.
            ASSERT_EQ(in_buffer, sent ? round + 1 : 0) << "round " << round << ": a sent value was lost";
        }
    }
    EXPECT_EQ(received + by_stop, rounds);
}

// A stop, the select's own timeout and the task's cancellation race for
// one waiter: whichever wins, the task ends once, with the stop case's
// action run at most once and only when its index is returned, and no
// callback is left behind (TSan and the leak check watch the rest).
TEST_P(stop_test, a_stop_racing_a_timeout_and_a_cancellation_ends_the_wait_once) {
    driven_runtime rt(options());
    const int rounds = weft::test::reps("WEFT_TEST_STOP_ROUNDS", 400, 60);
    int by[3] = {0, 0, 0};
    for (int round = 0; round < rounds; ++round) {
        std::stop_source src;
        std::atomic<int> actions{0};
        auto h = rt.spawn([&] {
            const std::size_t i = weft::select(weft::on_stop(src.get_token(), [&] { ++actions; }),
                                               weft::on_timeout(std::chrono::microseconds(round % 50)));
            return i == 0 ? (actions.load() == 1 ? 0 : 99) : (actions.load() == 0 ? 1 : 99);
        });
        std::thread stopper([&] {
            std::this_thread::sleep_for(std::chrono::microseconds(round * 7 % 60));  // vary who comes first
            src.request_stop();
        });
        if (round % 4 == 1) h.cancel();
        stopper.join();
        int r = 2;
        try {
            r = h.join();
        } catch (const weft::task_canceled&) {
            ASSERT_LE(actions.load(), 1) << "round " << round;
        }
        ASSERT_NE(r, 99) << "round " << round << ": the action ran for a case not chosen, or twice";
        ++by[r];
    }
    EXPECT_EQ(by[0] + by[1] + by[2], rounds);
}

TEST_P(stop_test, runtime_shutdown_requests_the_runtimes_token) {
    std::optional<weft::runtime> rt(std::in_place, options());
    const std::stop_token tok = rt->get_stop_token();
    EXPECT_TRUE(tok.stop_possible());
    EXPECT_FALSE(tok.stop_requested());
    std::atomic<bool> callback_ran{false};
    std::stop_callback cb(tok, [&] { callback_ran.store(true); });
    channel<int> work;
    // Two tasks that wait for more work: shutdown() ends them through the token.
    auto waiter = rt->spawn([] {
        weft::wait(weft::this_task::runtime_stop_token());
        return 1;
    });
    auto server = rt->spawn([&] {
        int served = 0;
        for (bool more = true; more;)
            weft::select(weft::on_recv(work, [&](std::optional<int>) { ++served; }),
                         weft::on_stop(weft::this_task::runtime_stop_token(), [&] { more = false; }));
        return served + 2;
    });
    if (rt->workers() == 0) {
        (void)rt->run_for(5ms);  // both park
    } else {
        ASSERT_TRUE(parked(waiter));
        ASSERT_TRUE(parked(server));
    }
    EXPECT_FALSE(callback_ran.load());
    EXPECT_EQ(rt->shutdown(30s), 0u);  // all ended on their own, none canceled
    EXPECT_TRUE(tok.stop_requested());
    EXPECT_TRUE(callback_ran.load());
    EXPECT_EQ(waiter.join(), 1);
    EXPECT_EQ(server.join(), 2);
    rt.reset();
    EXPECT_TRUE(tok.stop_requested());  // the token outlives its runtime

    // stop() requests it too (and the destructor, which is stop()).
    weft::runtime other(options());
    const std::stop_token t2 = other.get_stop_token();
    other.stop();
    EXPECT_TRUE(t2.stop_requested());
    std::stop_token t3;
    {
        weft::runtime third(options());
        t3 = third.get_stop_token();
    }
    EXPECT_TRUE(t3.stop_requested());
}

INSTANTIATE_TEST_SUITE_P(workers, stop_test, weft::test::worker_counts(), weft::test::worker_param_name);

}  // namespace
