// cancel_send_race_test.cpp: the three-party race of the C API test
// a_cancellation_racing_a_send_loses_or_delivers_the_value_whole
// (tests/c/sync_test.c), in C++ and many more times: a task waits in recv()
// on a rendezvous channel (capacity 0), a std::thread cancels it through its
// join handle, and a plain thread (the test's) sends with a 2 ms deadline.
// Every round must end one of two ways, the value delivered whole or lost
// whole:
//   send ok        <=> the task received exactly that value (and its join
//                      returns it);
//   send timed out <=> the task received nothing and ended canceled.
// A lost wake-up anywhere in the three (the task's wait word, the sending
// thread's futex, the worker that should run the woken task, the joiner's
// futex) hangs a round; a progress watchdog then aborts, naming the round
// and the step it hung in, instead of hanging the run.
//
// Rounds are counted, not timed: WEFT_STRESS_CANCEL_SEND sets how many per
// worker count (default 1,000; 200 under sanitizers and valgrind; 500 under
// qemu-user; scripts/soak: 10,000). WEFT_STRESS_CANCEL_SEND_STALL_S sets how long a round may
// make no progress before the watchdog fires (default 30 s, five times that
// under qemu-user and valgrind).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "support/leak_check.hpp"
#include "unit/runtime/runtime_fixture.hpp"
#include "weft/runtime.hpp"
#include "weft/sync/channel.hpp"

namespace {

using namespace std::chrono_literals;

// The steps of one round, for the watchdog's message.
enum step : int { spawning, waiting_start, racing, sending, joining_canceler, joining_task, checking };
const char* step_name(int s) {
    switch (s) {
    case spawning: return "spawning the receiver";
    case waiting_start: return "waiting for the receiver to start";
    case racing: return "canceling before the send (joining the canceled task)";
    case sending: return "sending (timed, 2 ms)";
    case joining_canceler: return "joining the canceling thread";
    case joining_task: return "joining the receiver";
    case checking: return "checking";
    }
    return "?";
}

// progress_watchdog aborts the process, naming the round and its step, when
// the round counter has not moved for `stall` (a hang, not slowness: every
// round is bounded by its 2 ms deadline plus scheduling).
class progress_watchdog {
public:
    explicit progress_watchdog(std::chrono::seconds stall) : name_(weft::test::current_test_name()) {
        thread_ = std::thread([this, stall] {
            std::unique_lock lk(mu_);
            std::uint64_t seen = progress_.load();
            auto last = std::chrono::steady_clock::now();
            while (!cv_.wait_for(lk, 100ms, [this] { return done_; })) {
                const std::uint64_t now_seen = progress_.load();
                const auto now = std::chrono::steady_clock::now();
                if (now_seen != seen) {
                    seen = now_seen;
                    last = now;
                    continue;
                }
                if (now - last < stall) continue;
                if (const weft::detail::task_record* r = rec_.load()) {
                    // The receiver's wait (TASK-W1 - TASK-W3, TASK-R1, TASK-C1 in src/task/task.cpp).
                    const std::uint64_t w = r->wait_word.load();
                    std::fprintf(stderr,
                                 "\ncancel_send_race watchdog: receiver id %llu: wait status %u%s (1 armed, 2 notified, "
                                 "3 canceled), cancel_reason %u, arrivals %u, state %s",
                                 static_cast<unsigned long long>(r->id), static_cast<unsigned>(w & 7),
                                 (w & weft::detail::wait_cancellable_bit) ? " cancellable" : "",
                                 static_cast<unsigned>(r->cancel_reason.load()),
                                 static_cast<unsigned>(r->arrivals.load()), weft::to_string(r->state.load()));
                }
                std::fprintf(stderr,
                             "\ncancel_send_race watchdog: %s made no progress for %lld s in round %llu, step '%s' "
                             "(a lost wake-up); aborting instead of hanging\n",
                             name_.c_str(), static_cast<long long>(stall.count()),
                             static_cast<unsigned long long>(round_.load()), step_name(step_.load()));
                if (const weft::runtime* rt = rt_.load())
                    for (const weft::task_info& t : rt->tasks())
                        std::fprintf(stderr, "  live task id %llu '%s' %s worker %d\n",
                                     static_cast<unsigned long long>(t.id), t.name.c_str(), weft::to_string(t.state),
                                     t.worker);
                std::fflush(stderr);
                std::abort();
            }
        });
    }
    ~progress_watchdog() {
        {
            std::lock_guard g(mu_);
            done_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }
    progress_watchdog(const progress_watchdog&) = delete;
    progress_watchdog& operator=(const progress_watchdog&) = delete;

    void at(std::uint64_t round, step s) noexcept {
        round_.store(round);
        step_.store(s);
        progress_.fetch_add(1);
    }
    void show(const weft::runtime* rt) noexcept { rt_.store(rt); }
    // watch() names the round's receiver (the caller holds a reference).
    void watch(const weft::detail::task_record* r) noexcept { rec_.store(r); }

private:
    std::string name_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool done_ = false;
    std::atomic<std::uint64_t> progress_{0};
    std::atomic<std::uint64_t> round_{0};
    std::atomic<int> step_{spawning};
    std::atomic<const weft::runtime*> rt_{nullptr};
    std::atomic<const weft::detail::task_record*> rec_{nullptr};
    std::thread thread_;
};

std::chrono::seconds stall_limit() {
    std::chrono::seconds s(static_cast<long>(weft::test::env_count("WEFT_STRESS_CANCEL_SEND_STALL_S", 30, 30)));
    if (weft::test::under_user_mode_emulator() || WEFT_VALGRIND) s *= 5;
    return s;
}

std::size_t rounds() {
    return weft::test::env_count("WEFT_STRESS_CANCEL_SEND", weft::test::under_user_mode_emulator() ? 500 : 1000, 200);
}

class cancel_send_race : public weft::test::leak_checked, public ::testing::WithParamInterface<unsigned> {};

TEST_P(cancel_send_race, a_value_is_delivered_whole_or_lost_whole) {
    progress_watchdog dog(stall_limit());
    weft::runtime rt({.workers = GetParam()});
    weft::test::driver drv(rt);  // 0 workers: a thread drives the runtime
    dog.show(&rt);
    struct unshow {
        progress_watchdog& d;
        ~unshow() { d.show(nullptr); }
    } unshow_rt{dog};  // before rt goes, however the test ends
    const std::size_t n = rounds();
    std::size_t delivered = 0, lost = 0;
    for (std::size_t i = 0; i < n; ++i) {
        dog.at(i, spawning);
        weft::channel<int> ch(0);
        std::atomic<bool> started{false};
        std::optional<int> got;  // written by the task, read after its join
        weft::join_handle<int> h = rt.spawn([&] {
            started.store(true, std::memory_order_release);
            got = ch.recv();
            return got.value_or(-1);
        });
        // A reference of the test's own, so that the watchdog may read the
        // record until the round ends (join() releases the handle's).
        weft::detail::task_record* rec = h.record();
        rec->refs.fetch_add(1, std::memory_order_relaxed);
        dog.watch(rec);
        struct unwatch {
            progress_watchdog& d;
            weft::detail::task_record* r;
            ~unwatch() {
                d.watch(nullptr);
                weft::detail::release(r);
            }
        } unwatch_rec{dog, rec};
        dog.at(i, waiting_start);
        while (!started.load(std::memory_order_acquire)) std::this_thread::yield();
        // Every third round cancels first and lets the task end before the
        // send (surely lost); the others cancel from a thread while this one
        // sends, and vary which of the two starts first.
        std::thread canceler;
        bool joined = false, task_canceled = false;
        int result = -1;
        auto join_task = [&] {
            try {
                result = h.join();
            } catch (const weft::task_canceled&) {
                task_canceled = true;
            }
            joined = true;
        };
        if (i % 3 == 0) {
            dog.at(i, racing);
            h.cancel();
            join_task();
        } else {
            canceler = std::thread([&h] { h.cancel(); });
            if (i % 3 == 2) std::this_thread::yield();
        }
        dog.at(i, sending);
        const int v = 1000 + static_cast<int>(i);
        const weft::channel_status sent = ch.send_for(int(v), 2ms);
        if (canceler.joinable()) {
            dog.at(i, joining_canceler);
            canceler.join();
        }
        if (!joined) {
            dog.at(i, joining_task);
            join_task();
        }
        dog.at(i, checking);
        if (sent == weft::channel_status::ok) {
            ++delivered;
            ASSERT_TRUE(got.has_value()) << "round " << i << ": sent ok but the task received nothing";
            ASSERT_EQ(*got, v) << "round " << i;
            ASSERT_FALSE(task_canceled) << "round " << i << ": received, then canceled without another wait";
            ASSERT_EQ(result, v) << "round " << i;
        } else {
            ++lost;
            ASSERT_EQ(sent, weft::channel_status::timeout) << "round " << i << ": " << weft::to_string(sent);
            ASSERT_FALSE(got.has_value()) << "round " << i << ": the send timed out but the task received " << *got;
            ASSERT_TRUE(task_canceled) << "round " << i << ": the send timed out but the task was not canceled";
        }
    }
    std::printf("  %zu rounds: delivered %zu, lost %zu\n", n, delivered, lost);
    EXPECT_EQ(delivered + lost, n);
    EXPECT_GE(lost, n / 3);  // the rounds that cancel first
}

INSTANTIATE_TEST_SUITE_P(workers, cancel_send_race, weft::test::worker_counts(), weft::test::worker_param_name);

}  // namespace
