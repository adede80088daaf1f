// signal_test.cpp: weft::io::signal_set. Each delivery wakes a waiting task
// exactly once; every set with the signal sees it; a delivery before the
// wait stays pending; deadlines; a canceled waiter unwinds and its node
// leaves the set's queue; plain threads wait too, also while another
// waiter is a task that does not run; the previous disposition (the
// program's own handler) keeps being called and comes back; bad signal
// numbers are refused; a set is a select case (io::on_signal), whose
// signal goes to the select exactly once.
//
// Only SIGUSR1 and SIGUSR2 are raised, and only while a signal_set has them
// (their default disposition ends the process).

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "io_test_support.hpp"
#include "weft/io/select.hpp"
#include "weft/io/signal.hpp"
#include "weft/sync.hpp"

namespace weft::test {
namespace {

using namespace std::chrono_literals;

constexpr int rounds = sanitized ? 20 : 50;

// send_to_process() is kill(getpid(), sig): the kernel picks the thread.
// Under TSan it is raise(sig) instead, a signal to the sending thread:
// TSan's own handler runs a program's handler for an asynchronous signal
// only when the receiving thread next enters an intercepted call, and a
// worker asleep on its futex word (a raw system call TSan does not
// intercept) would hold the delivery until something wakes it. Natively
// the kernel runs the handler on whichever thread it picks at once, which
// the other builds test.
void send_to_process(int sig) {
    if constexpr (under_tsan)
        ASSERT_EQ(::raise(sig), 0);
    else
        ASSERT_EQ(::kill(::getpid(), sig), 0);
}

class signal_test : public io_fixture {
public:
    // The first signal_set makes weft's eventfd, which stays open for the
    // process: make it before any test counts the open fds.
    static void SetUpTestSuite() { io::signal_set warm({SIGUSR2}); }
};

TEST_P(signal_test, each_delivery_wakes_a_waiting_task_exactly_once) {
    runtime rt(options());
    io::signal_set s({SIGUSR1});
    std::atomic<int> got{0};
    std::atomic<bool> wrong{false};
    std::thread raiser([&] {
        for (int i = 0; i < rounds; ++i) {
            // Send the next one only after the last was reported (two
            // pending deliveries would be reported once).
            for (int spin = 0; got.load() != i && spin < 20'000; ++spin) std::this_thread::sleep_for(100us);
            if (got.load() != i) return;
            send_to_process(SIGUSR1);
        }
    });
    rt.block_on([&] {
        auto waiter = spawn([&] {
            for (int i = 0; i < rounds; ++i) {
                std::error_code ec;
                const int sig = s.wait(ec, io::after(10s));
                if (sig != SIGUSR1 || ec) wrong = true;
                if (ec) return;
                ++got;
            }
        });
        waiter.join();
    });
    raiser.join();
    EXPECT_FALSE(wrong.load());
    EXPECT_EQ(got.load(), rounds);
    // No extra wake: nothing is pending after the last one.
    EXPECT_EQ(s.try_wait(), 0);
    std::error_code ec;
    EXPECT_EQ(s.wait(ec, io::after(20ms)), 0);
    EXPECT_EQ(ec, std::errc::timed_out);
}

TEST_P(signal_test, every_set_with_the_signal_sees_each_delivery_and_others_do_not) {
    runtime rt(options());
    io::signal_set a({SIGUSR1});
    io::signal_set b({SIGUSR1, SIGUSR2});
    io::signal_set other({SIGUSR2});
    constexpr int n = rounds / 5;
    std::atomic<int> got_a{0}, got_b{0};
    std::thread raiser([&] {
        for (int i = 0; i < n; ++i) {
            for (int spin = 0; (got_a.load() != i || got_b.load() != i) && spin < 20'000; ++spin)
                std::this_thread::sleep_for(100us);
            if (got_a.load() != i || got_b.load() != i) return;
            send_to_process(SIGUSR1);
        }
    });
    rt.block_on([&] {
        auto wa = spawn([&] {
            for (int i = 0; i < n; ++i)
                if (a.wait(io::after(10s)) == SIGUSR1) ++got_a;
        });
        auto wb = spawn([&] {
            for (int i = 0; i < n; ++i)
                if (b.wait(io::after(10s)) == SIGUSR1) ++got_b;
        });
        wa.join();
        wb.join();
    });
    raiser.join();
    EXPECT_EQ(got_a.load(), n);
    EXPECT_EQ(got_b.load(), n);
    EXPECT_EQ(a.try_wait(), 0);
    EXPECT_EQ(b.try_wait(), 0);
    EXPECT_EQ(other.try_wait(), 0) << "a set without SIGUSR1 saw it";
}

TEST_P(signal_test, a_delivery_before_the_wait_is_returned_at_once_and_coalesced) {
    runtime rt(options());
    io::signal_set s({SIGUSR1, SIGUSR2});
    ASSERT_EQ(::raise(SIGUSR2), 0);
    ASSERT_EQ(::raise(SIGUSR2), 0);  // pending together with the first: one report
    io::signal_set later({SIGUSR2});  // made after those deliveries: does not see them
    rt.block_on([&] {
        std::error_code ec;
        const auto t0 = io::clock::now();
        EXPECT_EQ(s.wait(ec, io::after(10s)), SIGUSR2);
        EXPECT_FALSE(ec);
        EXPECT_LT(io::clock::now() - t0, 5s);
        EXPECT_EQ(s.wait(ec, io::after(20ms)), 0);
        EXPECT_EQ(ec, std::errc::timed_out);
        EXPECT_EQ(later.wait(ec, io::after(20ms)), 0);
        EXPECT_EQ(ec, std::errc::timed_out);
        // Both pending: the lowest number first, then the other.
        ASSERT_EQ(::raise(SIGUSR2), 0);
        ASSERT_EQ(::raise(SIGUSR1), 0);
        EXPECT_EQ(s.wait(ec, io::clock::now()), SIGUSR1);  // pending beats a passed deadline
        EXPECT_EQ(s.wait(ec, io::clock::now()), SIGUSR2);
        EXPECT_EQ(s.try_wait(), 0);
        EXPECT_EQ(later.try_wait(), SIGUSR2);
    });
}

TEST_P(signal_test, a_wait_times_out_at_its_deadline_and_not_before) {
    runtime rt(options());
    io::signal_set s({SIGUSR1});
    rt.block_on([&] {
        // Two waiters in the set's queue; each times out at its own deadline.
        auto other = spawn([&] {
            std::error_code ec;
            const auto t0 = io::clock::now();
            const int sig = s.wait(ec, io::after(40ms));
            return sig == 0 && ec == std::errc::timed_out && io::clock::now() - t0 >= 40ms;
        });
        std::error_code ec;
        const auto t0 = io::clock::now();
        EXPECT_EQ(s.wait(ec, io::after(20ms)), 0);
        EXPECT_EQ(ec, std::errc::timed_out);
        EXPECT_GE(io::clock::now() - t0, 20ms);
        EXPECT_TRUE(other.join());
        try {
            (void)s.wait(io::after(5ms));
            ADD_FAILURE() << "no exception";
        } catch (const std::system_error& e) {
            EXPECT_EQ(e.code(), std::errc::timed_out);
        }
    });
}

TEST_P(signal_test, canceling_a_blocked_waiter_unwinds_it_and_the_others_still_get_the_signal) {
    runtime rt(options());
    io::signal_set s({SIGUSR1});
    rt.block_on([&] {
        // One waiter alone ...
        EXPECT_TRUE(cancel_unwinds([&] { (void)s.wait(); }));
        // ... and one beside a waiter that stays.
        auto stays = spawn([&] { return s.wait(io::after(10s)); });
        while (stays.state() != task_state::waiting) this_task::yield();
        EXPECT_TRUE(cancel_unwinds([&] { (void)s.wait(); }));
        std::thread([] { send_to_process(SIGUSR1); }).join();
        EXPECT_EQ(stays.join(), SIGUSR1);
        // The canceled waiters left the queue: a new wait works.
        auto again = spawn([&] { return s.wait(io::after(10s)); });
        while (again.state() != task_state::waiting) this_task::yield();
        ASSERT_EQ(::raise(SIGUSR1), 0);
        EXPECT_EQ(again.join(), SIGUSR1);
    });
}

TEST_P(signal_test, plain_threads_and_tasks_wait_for_the_same_signal) {
    runtime rt(options());
    io::signal_set for_task({SIGUSR1});
    constexpr int threads = 2;
    std::vector<io::signal_set> for_threads;
    for (int i = 0; i < threads; ++i) for_threads.emplace_back(std::initializer_list<int>{SIGUSR1});
    std::atomic<int> waiting{0}, got{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < threads; ++i)
        ts.emplace_back([&, i] {
            ++waiting;
            std::error_code ec;
            if (for_threads[static_cast<std::size_t>(i)].wait(ec, io::after(10s)) == SIGUSR1) ++got;
        });
    const int sig = rt.block_on([&] {
        auto t = spawn([&] { return for_task.wait(io::after(10s)); });
        while (waiting.load() != threads || t.state() != task_state::waiting) this_task::yield();
        this_task::sleep_for(5ms);  // let the threads reach their wait (a delivery before it is pending anyway)
        std::thread([] { send_to_process(SIGUSR1); }).join();
        return t.join();
    });
    for (auto& t : ts) t.join();
    EXPECT_EQ(sig, SIGUSR1);
    EXPECT_EQ(got.load(), threads);
}

TEST_P(signal_test, a_signal_goes_to_a_waiting_select_exactly_once) {
    runtime rt(options());
    io::signal_set sigs({SIGUSR1});
    rt.block_on([&] {
        weft::channel<int> ch(0);
        for (int round = 0; round < 5; ++round) {
            std::atomic<bool> selecting{false};
            auto sel = spawn([&] {
                int sig = 0;
                selecting = true;
                const std::size_t k = weft::select(weft::on_recv(ch), io::on_signal(sigs, [&](int s) { sig = s; }),
                                                   weft::on_timeout(30s));
                return k == 1 ? sig : -1;
            });
            while (!selecting || sel.state() != task_state::waiting) this_task::yield();
            std::thread([] { send_to_process(SIGUSR1); }).join();
            EXPECT_EQ(sel.join(), SIGUSR1) << "round " << round;
            EXPECT_EQ(sigs.try_wait(), 0) << "round " << round;  // taken once, by the select
        }
        // A signal pending before the select is chosen at once; one that
        // arrives while a channel case wins stays pending for the next wait.
        ASSERT_EQ(::raise(SIGUSR1), 0);
        int sig = 0;
        EXPECT_EQ(weft::select(weft::on_recv(ch), io::on_signal(sigs, [&](int s) { sig = s; }), weft::on_timeout(5s)),
                  1u);
        EXPECT_EQ(sig, SIGUSR1);
        EXPECT_EQ(weft::select(io::on_signal(sigs), weft::on_default()), 1u);
    });
}

TEST_P(signal_test, a_canceled_select_on_a_set_unwinds_and_leaves_its_queue) {
    runtime rt(options());
    io::signal_set sigs({SIGUSR1});
    rt.block_on([&] {
        weft::channel<int> ch(0);
        EXPECT_TRUE(cancel_unwinds([&] { (void)weft::select(io::on_signal(sigs), weft::on_recv(ch)); }));
        ASSERT_EQ(::raise(SIGUSR1), 0);
        EXPECT_EQ(sigs.wait(io::after(10s)), SIGUSR1);  // nobody else was handed it
    });
}

INSTANTIATE_TEST_SUITE_P(io, signal_test, io_params(), io_param_name);

// Outside a runtime: plain threads only.
std::atomic<int> own_handler_calls{0};
extern "C" void own_handler(int) { own_handler_calls.fetch_add(1); }

TEST(signal_set, the_last_set_gone_restores_the_programs_own_handler_which_was_called_meanwhile) {
    struct sigaction mine {}, before {};
    mine.sa_handler = &own_handler;
    sigemptyset(&mine.sa_mask);
    ASSERT_EQ(::sigaction(SIGUSR1, &mine, &before), 0);
    own_handler_calls = 0;
    {
        io::signal_set a({SIGUSR1});
        {
            io::signal_set b({SIGUSR1});
            ASSERT_EQ(::raise(SIGUSR1), 0);
            EXPECT_EQ(b.wait(io::after(10s)), SIGUSR1);
        }
        // a still has it: weft's handler stays.
        struct sigaction now {};
        ASSERT_EQ(::sigaction(SIGUSR1, nullptr, &now), 0);
        EXPECT_NE(now.sa_handler, &own_handler);
        ASSERT_EQ(::raise(SIGUSR1), 0);
        EXPECT_EQ(a.wait(io::after(10s)), SIGUSR1);  // coalesced with the first
        EXPECT_EQ(own_handler_calls.load(), 2) << "the program's handler is chained";
    }
    struct sigaction now {};
    ASSERT_EQ(::sigaction(SIGUSR1, nullptr, &now), 0);
    EXPECT_EQ(now.sa_handler, &own_handler);
    EXPECT_FALSE(now.sa_flags & SA_SIGINFO);
    ASSERT_EQ(::raise(SIGUSR1), 0);
    EXPECT_EQ(own_handler_calls.load(), 3);
    ASSERT_EQ(::sigaction(SIGUSR1, &before, nullptr), 0);
}

TEST(signal_set, the_default_disposition_comes_back_too) {
    io::signal_set s({SIGUSR2});
    struct sigaction now {};
    ASSERT_EQ(::sigaction(SIGUSR2, nullptr, &now), 0);
    EXPECT_TRUE(now.sa_flags & SA_SIGINFO) << "weft's handler is installed";
    s = io::signal_set({SIGUSR1});  // the assignment gives SIGUSR2's use up
    ASSERT_EQ(::sigaction(SIGUSR2, nullptr, &now), 0);
    EXPECT_EQ(now.sa_handler, SIG_DFL);
    EXPECT_FALSE(s.contains(SIGUSR2));
    EXPECT_TRUE(s.contains(SIGUSR1));
}

TEST(signal_set, bad_signals_are_refused_with_invalid_argument) {
    const std::vector<std::vector<int>> bad = {{0}, {-1}, {SIGKILL}, {SIGSTOP}, {NSIG}, {NSIG + 5},
                                               {SIGSEGV}, {SIGUSR1, SIGKILL}, {}};
    for (const auto& list : bad) {
        try {
            io::signal_set s{std::span<const int>(list)};
            ADD_FAILURE() << "accepted " << (list.empty() ? -1 : list.back());
        } catch (const std::system_error& e) {
            EXPECT_EQ(e.code(), std::errc::invalid_argument);
            const std::string what = e.what();
            EXPECT_NE(what.find("weft::io::signal_set"), std::string::npos) << what;
            if (!list.empty()) {
                EXPECT_NE(what.find("signal " + std::to_string(list.back())), std::string::npos) << what;
            }
        }
    }
    // {SIGUSR1, SIGKILL} installed nothing.
    struct sigaction now {};
    ASSERT_EQ(::sigaction(SIGUSR1, nullptr, &now), 0);
    EXPECT_EQ(now.sa_handler, SIG_DFL);
}

// IO-S2: a waiter that does not run (a task of a runtime without workers
// that nobody drives now) delays no other waiter: the signal thread hands
// the delivery to each set's waiter, the task's included (it gets it once
// its runtime runs it again, here in rt's destructor, unless rt is gone
// first).
TEST(signal_set, a_waiter_that_does_not_run_delays_no_other_waiter) {
    io::signal_set for_task({SIGUSR1});
    io::signal_set for_thread({SIGUSR1});
    std::atomic<int> task_got{0};
    {
        runtime rt({.workers = 0});
        rt.block_on([&] {
            auto t = spawn([&] { task_got = for_task.wait(); });
            while (t.state() != task_state::waiting) this_task::yield();
            t.detach();  // stays suspended; rt's destructor runs it to its end
        });
        std::thread raiser([] {
            std::this_thread::sleep_for(10ms);
            send_to_process(SIGUSR1);
        });
        std::error_code ec;
        const auto t0 = io::clock::now();
        EXPECT_EQ(for_thread.wait(ec, io::after(3s)), SIGUSR1);
        EXPECT_FALSE(ec);
        EXPECT_LT(io::clock::now() - t0, 2s);
        raiser.join();
        EXPECT_EQ(task_got.load(), 0);  // handed over, but the task has not run since
    }
    // Exactly once: handed to the task (which then ran to its end in rt's
    // destructor), or, when rt was destroyed before the signal thread came to
    // this set (the task was canceled first), still pending in the set.
    const int pending = for_task.try_wait();
    EXPECT_TRUE((task_got.load() == SIGUSR1 && pending == 0) || (task_got.load() == 0 && pending == SIGUSR1))
        << "task got " << task_got.load() << ", pending " << pending;
}

TEST(signal_set, a_plain_thread_waits_and_a_moved_from_set_is_empty) {
    io::signal_set s({SIGUSR1});
    std::thread raiser([] {
        std::this_thread::sleep_for(10ms);
        send_to_process(SIGUSR1);
    });
    std::error_code ec;
    EXPECT_EQ(s.wait(ec, io::after(10s)), SIGUSR1);
    EXPECT_FALSE(ec);
    raiser.join();
    io::signal_set moved(std::move(s));
    EXPECT_EQ(s.wait(ec, io::after(10s)), 0);  // NOLINT(bugprone-use-after-move): the point
    EXPECT_EQ(ec, std::errc::bad_file_descriptor);
    EXPECT_EQ(moved.try_wait(), 0);
}

TEST(signal_set, a_plain_thread_selects_on_a_signal) {
    io::signal_set sigs({SIGUSR1});
    std::thread raiser([] {
        std::this_thread::sleep_for(10ms);
        send_to_process(SIGUSR1);
    });
    int sig = 0;
    EXPECT_EQ(weft::select(io::on_signal(sigs, [&](int s) { sig = s; }), weft::on_timeout(10s)), 0u);
    EXPECT_EQ(sig, SIGUSR1);
    raiser.join();
    io::signal_set moved(std::move(sigs));
    try {
        (void)weft::select(io::on_signal(sigs), weft::on_default());  // NOLINT(bugprone-use-after-move): the point
        ADD_FAILURE() << "no exception";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code(), std::errc::bad_file_descriptor);
    }
}

}  // namespace
}  // namespace weft::test
