// copy_stack_wait_test.cpp: every way a task can wait, from copy-stack
// tasks, more of them than a worker's shared-stack pool has stacks, so that
// each waiting task's bytes are saved while another runs where its frames
// were (WAITER-V4 in weft/waiter.hpp). Before WAITER-V4 a waiter and its nodes lived in
// the waiting frame and the next task of that stack overwrote them: set()
// spun forever on a node that looked unlinked, values went into other
// tasks' frames. Each task also keeps a frame-local pattern across its wait,
// so a wait that lets anybody write into a suspended task's frame fails
// here too. Workers 0, 1, 2, 4; leak-checked.

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "sync_test_support.hpp"
#include "weft/async.hpp"
#include "weft/io/handle.hpp"
#include "weft/io/select.hpp"
#include "weft/sync/channel.hpp"
#include "weft/sync/condition_variable.hpp"
#include "weft/sync/event.hpp"
#include "weft/sync/mutex.hpp"
#include "weft/sync/select.hpp"
#include "weft/sync/semaphore.hpp"

namespace weft::test {
namespace {

// More tasks than the 4 shared stacks of a worker's pool (the default).
constexpr int tasks = 13;
const spawn_options on_copy_stack{.copy_stack = true};

// frame is a pattern a task keeps on its stack across a wait: intact()
// says whether nobody wrote into the frame meanwhile.
struct frame {
    std::array<unsigned char, 200> bytes;
    explicit frame(int i) { bytes.fill(static_cast<unsigned char>(i * 7 + 1)); }
    [[nodiscard]] bool intact(int i) const {
        for (unsigned char b : bytes)
            if (b != static_cast<unsigned char>(i * 7 + 1)) return false;
        return true;
    }
};

// spawn_all() spawns `tasks` copy-stack tasks running wait(i), each
// returning wait(i)'s result, or -1000 if its frame was written meanwhile.
template <class Wait>
std::vector<join_handle<int>> spawn_all(weft::runtime& rt, Wait& wait) {
    std::vector<join_handle<int>> hs;
    for (int i = 0; i < tasks; ++i)
        hs.push_back(rt.spawn(
            [i, &wait] {
                frame f(i);
                const int r = wait(i);
                return f.intact(i) ? r : -1000;
            },
            on_copy_stack));
    return hs;
}

void all_parked(const std::vector<join_handle<int>>& hs) {
    for (const auto& h : hs) ASSERT_TRUE(parked(h));
}

// joined() joins every handle and returns the results, in order.
std::vector<int> joined(std::vector<join_handle<int>>& hs) {
    std::vector<int> rs;
    for (auto& h : hs) rs.push_back(h.join());
    return rs;
}

std::vector<int> indices(int offset = 0) {
    std::vector<int> v;
    for (int i = 0; i < tasks; ++i) v.push_back(i + offset);
    return v;
}

class copy_stack_wait_test : public sync_fixture {};

TEST_P(copy_stack_wait_test, event_set_wakes_every_copy_stack_waiter) {
    driven_runtime rt(options());
    weft::event e;
    auto wait = [&](int i) {
        e.wait();
        return i;
    };
    auto hs = spawn_all(rt, wait);
    all_parked(hs);
    e.set();
    EXPECT_EQ(joined(hs), indices());
}

TEST_P(copy_stack_wait_test, latch_wait_group_and_barrier_release_copy_stack_waiters) {
    driven_runtime rt(options());
    weft::latch l(1);
    weft::wait_group wg;
    wg.add(1);
    weft::barrier b(tasks);
    auto wait = [&](int i) {
        l.wait();
        wg.wait();
        b.arrive_and_wait();
        return i;
    };
    auto hs = spawn_all(rt, wait);
    all_parked(hs);
    l.count_down();
    all_parked(hs);
    wg.done();
    EXPECT_EQ(joined(hs), indices());
}

TEST_P(copy_stack_wait_test, mutex_and_shared_mutex_hand_over_to_copy_stack_lockers) {
    driven_runtime rt(options());
    weft::mutex m;
    weft::shared_mutex sm;
    int counter = 0;
    m.lock();
    sm.lock();
    auto wait = [&](int i) {
        {
            std::lock_guard g(m);
            ++counter;
        }
        if (i % 2) {
            std::shared_lock g(sm);
        } else {
            std::lock_guard g(sm);
        }
        return i;
    };
    auto hs = spawn_all(rt, wait);
    all_parked(hs);
    m.unlock();
    sm.unlock();
    EXPECT_EQ(joined(hs), indices());
    EXPECT_EQ(counter, tasks);
}

TEST_P(copy_stack_wait_test, condition_variable_and_semaphore_wake_copy_stack_waiters) {
    driven_runtime rt(options());
    weft::mutex m;
    weft::condition_variable cv;
    bool go = false;
    weft::counting_semaphore sem(0);
    auto wait = [&](int i) {
        {
            std::unique_lock lk(m);
            cv.wait(lk, [&] { return go; });
        }
        sem.acquire();
        return i;
    };
    auto hs = spawn_all(rt, wait);
    all_parked(hs);
    {
        std::lock_guard g(m);
        go = true;
    }
    cv.notify_all();
    all_parked(hs);
    sem.release(tasks);
    EXPECT_EQ(joined(hs), indices());
}

// A value big enough to live on the heap, so a torn or misplaced hand-over
// shows as a wrong or corrupted string.
std::string payload(int i) { return "value " + std::to_string(i) + std::string(40, static_cast<char>('a' + i % 26)); }

TEST_P(copy_stack_wait_test, rendezvous_channel_delivers_to_and_from_copy_stack_tasks) {
    driven_runtime rt(options());
    weft::channel<std::string> to_tasks(0), from_tasks(0);
    auto wait = [&](int) {
        std::optional<std::string> got = to_tasks.recv();
        if (!got) return -1;
        const int k = std::stoi(got->substr(6));
        if (*got != payload(k)) return -2;
        from_tasks.send(payload(k + 100));
        return k;
    };
    auto hs = spawn_all(rt, wait);
    all_parked(hs);
    for (int i = 0; i < tasks; ++i) to_tasks.send(payload(i));
    std::vector<int> back;
    for (int i = 0; i < tasks; ++i) {
        std::optional<std::string> v = from_tasks.recv();
        ASSERT_TRUE(v);
        const int k = std::stoi(v->substr(6));
        EXPECT_EQ(*v, payload(k));
        back.push_back(k - 100);
    }
    std::vector<int> rs = joined(hs);
    std::sort(rs.begin(), rs.end());
    std::sort(back.begin(), back.end());
    EXPECT_EQ(rs, indices());
    EXPECT_EQ(back, indices());
}

TEST_P(copy_stack_wait_test, a_send_that_times_out_on_a_copy_stack_keeps_its_value) {
    driven_runtime rt(options());
    weft::channel<std::string> ch(0);
    auto wait = [&](int i) {
        std::string v = payload(i);
        const channel_status s = ch.send_until(std::move(v), sync_clock::now() + 20ms);
        return s == channel_status::timeout && v == payload(i) ? i : -1;
    };
    auto hs = spawn_all(rt, wait);
    EXPECT_EQ(joined(hs), indices());
}

TEST_P(copy_stack_wait_test, select_on_copy_stack_tasks_completes_one_case_each) {
    driven_runtime rt(options());
    weft::channel<std::string> in(0), out(0);
    auto wait = [&](int i) {
        bool sent = false, received = false;
        std::string mine = payload(i);
        for (int round = 0; round < 2; ++round) {
            const std::size_t k = weft::select(weft::on_recv(in,
                                                             [&](std::optional<std::string> v) {
                                                                 received = v && *v == payload(std::stoi(v->substr(6)));
                                                             }),
                                               weft::on_send(out, mine));
            if (k == 1) sent = true;                              // `mine` was moved from
            if (k == 0 && !sent && mine != payload(i)) return -4;  // not sent: kept whole
        }
        return sent && received ? i : -1;
    };
    auto hs = spawn_all(rt, wait);
    all_parked(hs);
    // Every task sends first (nobody sends to `in` yet), then receives.
    std::vector<int> got;
    for (int i = 0; i < tasks; ++i) {
        std::optional<std::string> v = out.recv();
        ASSERT_TRUE(v);
        const int k = std::stoi(v->substr(6));
        EXPECT_EQ(*v, payload(k));
        got.push_back(k);
    }
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, indices());
    for (int i = 0; i < tasks; ++i) in.send(payload(i + 50));
    EXPECT_EQ(joined(hs), indices());
}

TEST_P(copy_stack_wait_test, copy_stack_tasks_join_sleep_and_wait_for_blocking_calls) {
    driven_runtime rt(options());
    weft::event gate;
    auto target = rt.spawn([&] { gate.wait(); return 7; });
    std::atomic<int> joined_ok{0};
    auto wait = [&](int i) {
        this_task::sleep_for(1ms);
        const int b = weft::blocking([i] {
            std::this_thread::sleep_for(1ms);
            return i * 3;
        });
        if (b != i * 3) return -1;
        return i;
    };
    auto hs = spawn_all(rt, wait);
    std::vector<join_handle<int>> joiners;
    for (int i = 0; i < tasks; ++i)
        joiners.push_back(rt.spawn(
            [&, i] {
                frame f(i);
                auto h = rt.spawn([&] { return 1; });
                const int v = h.join();
                if (!f.intact(i) || v != 1) return -1;
                joined_ok.fetch_add(1);
                return i;
            },
            on_copy_stack));
    EXPECT_EQ(joined(hs), indices());
    EXPECT_EQ(joined(joiners), indices());
    EXPECT_EQ(joined_ok.load(), tasks);
    gate.set();
    EXPECT_EQ(target.join(), 7);
}

TEST_P(copy_stack_wait_test, copy_stack_tasks_wait_for_io_and_for_an_awaiter) {
    driven_runtime rt(options());
    std::vector<std::array<int, 2>> pipes(tasks);
    for (auto& p : pipes) ASSERT_EQ(::pipe(p.data()), 0);
    std::vector<io::handle> readers;
    for (auto& p : pipes) readers.emplace_back(p[0]);
    weft::event e;
    auto wait = [&](int i) {
        std::byte b[1];
        const std::size_t n = readers[static_cast<std::size_t>(i)].read_some(b);
        if (n != 1 || static_cast<int>(b[0]) != i) return -1;
        // An awaiter that weft knows nothing of, completed from a thread.
        struct later {
            weft::event* e;
            std::thread* th = nullptr;
            bool await_ready() const noexcept { return false; }
            void await_suspend(std::coroutine_handle<> h) {
                th = new std::thread([h, ev = e] {
                    ev->wait();
                    h.resume();
                });
            }
            int await_resume() {
                th->join();
                delete th;
                return 5;
            }
        };
        if (weft::await(later{&e}) != 5) return -2;
        return i;
    };
    auto hs = spawn_all(rt, wait);
    all_parked(hs);
    for (int i = 0; i < tasks; ++i) {
        const auto b = static_cast<unsigned char>(i);
        ASSERT_EQ(::write(pipes[static_cast<std::size_t>(i)][1], &b, 1), 1);
    }
    all_parked(hs);
    e.set();
    EXPECT_EQ(joined(hs), indices());
    for (auto& p : pipes) ::close(p[1]);
}

// select over io readiness and a channel from copy-stack tasks: the case
// (its op on the handle, IO-Q2) and the select's nodes live off the shared
// stack while the task waits; half the tasks are woken by data, half by a
// value, and each reports the one case it was woken by.
TEST_P(copy_stack_wait_test, select_over_io_readiness_on_copy_stack_tasks) {
    driven_runtime rt(options());
    std::vector<std::array<int, 2>> pipes(tasks);
    for (auto& p : pipes) ASSERT_EQ(::pipe(p.data()), 0);
    std::vector<io::handle> readers;
    for (auto& p : pipes) readers.emplace_back(p[0]);
    weft::channel<int> values(0);
    auto wait = [&](int i) {
        io::handle& r = readers[static_cast<std::size_t>(i)];
        int got = -1;
        std::error_code ready = std::make_error_code(std::errc::io_error);
        const std::size_t k = weft::select(weft::on_recv(values, [&](std::optional<int> v) { got = v.value_or(-2); }),
                                           io::on_readable(r, [&](std::error_code ec) { ready = ec; }));
        if (k == 1) {
            std::byte b[1];
            if (ready || r.read_some(b) != 1) return -3;
            return static_cast<int>(b[0]);
        }
        return got >= 100 ? got - 100 : -4;
    };
    auto hs = spawn_all(rt, wait);
    all_parked(hs);
    for (int i = 0; i < tasks; i += 2) {
        const auto b = static_cast<unsigned char>(i);
        ASSERT_EQ(::write(pipes[static_cast<std::size_t>(i)][1], &b, 1), 1);
    }
    // The even tasks end by their data (before any value is sent: a value
    // could otherwise go to an even task whose event is not dispatched yet).
    for (int i = 0; i < tasks; i += 2) EXPECT_EQ(hs[static_cast<std::size_t>(i)].join(), i);
    // The odd tasks each take one value; which odd task takes which is the
    // channel's choice: compare the sets.
    for (int i = 1; i < tasks; i += 2) values.send(100 + i);
    std::vector<int> odd_got;
    for (int i = 1; i < tasks; i += 2) odd_got.push_back(hs[static_cast<std::size_t>(i)].join());
    std::sort(odd_got.begin(), odd_got.end());
    std::vector<int> odd;
    for (int i = 1; i < tasks; i += 2) odd.push_back(i);
    EXPECT_EQ(odd_got, odd);
    for (auto& p : pipes) ::close(p[1]);
}

// Wake, timeout and cancellation racing on copy-stack waiters: each leaves
// its wait exactly once, through whichever came first, and the queue stays
// sound for the rest (a waiter that left early unlinks itself from a node
// that is off the shared stack).
TEST_P(copy_stack_wait_test, wake_timeout_and_cancel_race_on_copy_stack_waiters) {
    driven_runtime rt(options());
    const int rounds = sanitized ? 5 : 30;
    for (int round = 0; round < rounds; ++round) {
        weft::event e;
        weft::channel<int> ch(0);
        auto wait = [&](int i) {
            if (i % 2) {
                const bool set = e.wait_for(std::chrono::microseconds(50 * (i + round % 5)));
                return set ? 1 : 2;
            }
            const recv_result<int> r = ch.recv_for(std::chrono::microseconds(40 * (i + round % 7)));
            return r.status == channel_status::ok ? 3 : 4;
        };
        auto hs = spawn_all(rt, wait);
        for (int i = 0; i < tasks; i += 3) hs[static_cast<std::size_t>(i)].cancel();
        std::this_thread::sleep_for(std::chrono::microseconds(100 * (round % 4)));
        e.set();
        int sent = 0;
        while (ch.try_send(7) == channel_status::ok) ++sent;
        int got = 0;
        for (int i = 0; i < tasks; ++i) {
            auto& h = hs[static_cast<std::size_t>(i)];
            try {
                const int r = h.join();
                ASSERT_GT(r, 0) << "task " << i << " round " << round << ": frame written while it waited";
                EXPECT_TRUE(i % 2 ? r == 1 || r == 2 : r == 3 || r == 4) << i << ": " << r;
                if (r == 3) ++got;
            } catch (const task_canceled&) {
                EXPECT_EQ(i % 3, 0) << "only the canceled tasks end canceled";
            }
        }
        EXPECT_EQ(got, sent) << "a value handed to a waiter was lost or duplicated";
    }
}

INSTANTIATE_TEST_SUITE_P(workers, copy_stack_wait_test, worker_counts(), worker_param_name);

}  // namespace
}  // namespace weft::test
