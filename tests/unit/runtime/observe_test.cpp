// observe_test.cpp: what a runtime shows of itself (docs/debugging.md):
// runtime::stats() counters, the task trace file (WEFT_TRACE /
// runtime_options::trace_path) and the starvation watchdog. Over workers
// {0, 1, 2, 4}; the trace's structure is checked again by
// tests/trace/check_trace.py on an example's trace.

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime_fixture.hpp"
#include "trace_files.hpp"
#include "weft/io/handle.hpp"
#include "weft/sync.hpp"

// weft_test_hog_spin() busy-loops until *until reaches target or `limit`
// passes (false then): exported (ENABLE_EXPORTS), outside any unnamed
// namespace, and never inlined, so the watchdog's backtrace can name it.
// It reads the clock only every 2^20 rounds, so that the sample lands in
// this function, not in the clock's code: on AArch64 a sample taken in a
// PLT stub (which has no unwind information there) gave a backtrace of one
// frame (seen under qemu, where clock_gettime is not in a vDSO).
extern "C" [[gnu::noinline]] [[gnu::visibility("default")]] bool weft_test_hog_spin(
    const std::atomic<int>* until, int target, std::chrono::steady_clock::time_point limit) {
    for (std::uint64_t round = 1; until->load(std::memory_order_relaxed) < target; ++round) {
        if ((round & ((std::uint64_t{1} << 20) - 1)) == 0 && std::chrono::steady_clock::now() > limit) return false;
        asm volatile("" ::: "memory");
    }
    return true;
}

namespace weft::test {
namespace {

using namespace std::chrono_literals;

class observe_test : public runtime_fixture {};

// ---- stats ------------------------------------------------------------------

TEST_P(observe_test, counters_count_what_happened) {
    constexpr int tasks = 40;
    constexpr int yields = 5;
    constexpr int sleepers = 4;
    weft::runtime rt(options());
    const weft::runtime_stats before = rt.stats();
    ASSERT_EQ(before.workers.size(), std::max(1u, workers()));
    EXPECT_EQ(before.total().switches, 0u);

    rt.block_on([&] {
        std::vector<weft::join_handle<void>> hs;
        for (int i = 0; i < tasks; ++i)
            hs.push_back(weft::spawn([] {
                for (int k = 0; k < yields; ++k) weft::this_task::yield();
            }));
        for (int i = 0; i < sleepers; ++i) hs.push_back(weft::spawn([] { weft::this_task::sleep_for(2ms); }));
        weft::when_all(hs);
    });
    const weft::runtime_stats s = rt.stats();
    const weft::worker_stats t = s.total();
    // The root came from this thread; every other task from inside a task.
    EXPECT_EQ(s.spawned_outside, 1u);
    EXPECT_EQ(t.spawned, unsigned(tasks + sleepers));
    EXPECT_EQ(t.finished, unsigned(tasks + sleepers + 1));
    // Every yield is a switch back into its task, as is each first run; the
    // root and the sleepers run at least twice.
    EXPECT_GE(t.switches, unsigned(tasks * (yields + 1) + 2 * sleepers + 2));
    // Each sleeper's timer fired (the root's when_all waits without one).
    EXPECT_GE(t.timers, unsigned(sleepers));
    EXPECT_EQ(s.live_tasks, 0u);
    EXPECT_EQ(s.injection_queue, 0u);
    // The worker may still be ending the root when its join returns.
    EXPECT_TRUE(eventually([&] { return !rt.stats().total().running; }));
    EXPECT_GE(t.stolen, t.steals);
    if (workers() > 0) {
        EXPECT_GE(t.injected, 1u);  // the root went through the injection queue
    }
    for (std::size_t i = 0; i < s.workers.size(); ++i) EXPECT_EQ(s.workers[i].worker, i);
}

TEST_P(observe_test, a_second_worker_steals_what_the_first_spawned) {
    if (workers() < 2) GTEST_SKIP() << "stealing needs two workers";
    weft::runtime rt(options());
    std::atomic<bool> elsewhere{false};
    std::atomic<bool> timed_out{false};
    rt.block_on([&] {
        const int home = weft::this_task::worker();
        std::vector<weft::join_handle<void>> hs;
        // All spawned here go to this worker's deque: another worker can
        // only get one by stealing. Each spins (not suspending, so this
        // worker stays busy) until one has run elsewhere.
        for (int i = 0; i < 16; ++i)
            hs.push_back(weft::spawn([&, home] {
                if (weft::this_task::worker() != home) elsewhere.store(true);
                const auto end = std::chrono::steady_clock::now() + 10s;
                while (!elsewhere.load()) {
                    if (std::chrono::steady_clock::now() > end) {
                        timed_out.store(true);
                        return;
                    }
                }
            }));
        weft::when_all(hs);
    });
    EXPECT_FALSE(timed_out.load());
    const weft::worker_stats t = rt.stats().total();
    EXPECT_GE(t.steals, 1u);
    EXPECT_GE(t.stolen, t.steals);
}

TEST_P(observe_test, io_waits_are_counted) {
    weft::runtime rt(options());
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    weft::io::handle r(fds[0]);
    weft::io::handle w(fds[1]);
    rt.block_on([&] {
        auto reader = weft::spawn([&] {
            std::array<std::byte, 4> buf{};
            return r.read_some(buf);
        });
        // Write only once the reader has counted its wait: a fixed sleep was
        // not enough under qemu with 4 workers on 2 cores (the reader had not
        // run yet, found the byte at once and never waited). If the counter
        // never moves, the loop ends at its limit and the check below fails.
        const auto limit = std::chrono::steady_clock::now() + 20s;
        while (rt.stats().total().io_waits == 0 && std::chrono::steady_clock::now() < limit)
            weft::this_task::sleep_for(1ms);
        const std::byte b[1] = {std::byte{7}};
        EXPECT_EQ(w.write_some(b), 1u);
        EXPECT_EQ(reader.join(), 1u);
    });
    EXPECT_GE(rt.stats().total().io_waits, 1u);
}

TEST_P(observe_test, stats_can_be_read_while_tasks_run) {
    weft::runtime rt(options());
    driver d(rt);
    std::atomic<bool> done{false};
    const std::size_t n = env_count("WEFT_OBSERVE_TASKS", 2000, 200);
    std::thread reader([&] {
        std::uint64_t last = 0;
        while (!done.load()) {
            const weft::runtime_stats s = rt.stats();
            const std::uint64_t now = s.total().switches;
            EXPECT_GE(now, last);  // each worker's counter only grows
            last = now;
            std::this_thread::yield();
        }
    });
    std::vector<weft::join_handle<void>> hs;
    for (std::size_t i = 0; i < n; ++i) hs.push_back(rt.spawn([] { weft::this_task::yield(); }));
    for (auto& h : hs) h.join();
    done.store(true);
    reader.join();
    d.stop();
    EXPECT_GE(rt.stats().total().switches, 2 * n);
    EXPECT_EQ(rt.stats().spawned_outside, n);
}

// ---- the trace ----------------------------------------------------------------


TEST_P(observe_test, the_trace_is_written_when_the_runtime_stops) {
    const std::string path = temp_path("weft-trace-" + std::to_string(workers()));
    std::remove(path.c_str());
    {
        weft::runtime_options o = options();
        o.trace_path = path;
        weft::runtime rt(o);
        rt.block_on(
            [] {
                weft::spawn([] { weft::this_task::sleep_for(3ms); }, {.name = "sleeper"}).join();
                auto y = weft::spawn(
                    [] {
                        for (int i = 0; i < 3; ++i) weft::this_task::yield();
                    },
                    {.name = "yielder \"quoted\""});
                y.join();
            },
            {.name = "root"});
        // Nothing is written before the runtime stops.
        EXPECT_FALSE(std::ifstream(path).good());
    }
    const std::string j = slurp(path);
    std::remove(path.c_str());
    ASSERT_FALSE(j.empty()) << path;
    EXPECT_EQ(j.rfind("{\"traceEvents\":[", 0), 0u);
    EXPECT_NE(j.find("\"displayTimeUnit\":\"ns\""), std::string::npos);
    EXPECT_NE(j.find("\"name\":\"worker 0\""), std::string::npos);
    EXPECT_NE(j.find("\"name\":\"other threads\""), std::string::npos);
    // Run spans for each named task; the yielder ran four times.
    EXPECT_GE(count_of(j, "\"cat\":\"task\",\"name\":\"root\""), 2u);
    EXPECT_GE(count_of(j, "\"cat\":\"task\",\"name\":\"sleeper\""), 2u);
    EXPECT_GE(count_of(j, "\"cat\":\"task\",\"name\":\"yielder \\\"quoted\\\"\""), 4u);
    // Spawns: the root from this thread, two from inside it; the joins woke
    // the root; the sleeper's timer fired.
    EXPECT_EQ(count_of(j, "\"cat\":\"spawn\""), 3u);
    EXPECT_GE(count_of(j, "\"cat\":\"wake\""), 2u);
    EXPECT_GE(count_of(j, "\"cat\":\"timers\""), 1u);
    if (workers() > 0) {
        EXPECT_GE(count_of(j, "\"cat\":\"sleep\""), 1u);
    }
    EXPECT_NE(j.find("\"otherData\":{\"workers\":" + std::to_string(std::max(1u, workers())) + ",\"dropped\":0}"),
              std::string::npos);
}

TEST_P(observe_test, a_full_trace_buffer_counts_what_it_dropped) {
    const std::string path = temp_path("weft-trace-small-" + std::to_string(workers()));
    {
        weft::runtime_options o = options();
        o.trace_path = path;
        o.trace_events = 4;
        weft::runtime rt(o);
        rt.block_on([] {
            for (int i = 0; i < 50; ++i) weft::this_task::yield();
        });
    }
    const std::string j = slurp(path);
    std::remove(path.c_str());
    EXPECT_EQ(j.find("\"dropped\":0}"), std::string::npos) << j;
    EXPECT_NE(j.find("\"dropped\":"), std::string::npos);
}

TEST_P(observe_test, an_unwritable_trace_path_is_reported_not_fatal) {
    weft::runtime_options o = options();
    o.trace_path = "/nonexistent-dir/weft/trace.json";
    testing::internal::CaptureStderr();
    {
        weft::runtime rt(o);
        EXPECT_EQ(rt.block_on([] { return 5; }), 5);
    }
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("cannot write the task trace to /nonexistent-dir/weft/trace.json"), std::string::npos) << err;
}

TEST_P(observe_test, zero_trace_events_is_a_bad_option) {
    weft::runtime_options o = options();
    o.trace_path = temp_path("weft-trace-zero");
    o.trace_events = 0;
    EXPECT_EQ(errc_of([&] { weft::runtime rt(o); }), weft::task_errc::bad_option);
}

// ---- the watchdog -----------------------------------------------------------------

struct stall_log {
    std::mutex mu;
    std::vector<std::uint64_t> ids;
    std::vector<std::string> names;
    std::vector<unsigned> workers;
    std::vector<std::chrono::nanoseconds> durations;
    std::vector<std::chrono::nanoseconds> cpu;
    std::vector<std::size_t> frames;
    std::vector<std::uint64_t> suppressed;
    std::vector<std::string> texts;
    std::atomic<int> count{0};

    static void record(const weft::stall_report& r, void* user) noexcept {
        auto* self = static_cast<stall_log*>(user);
        std::lock_guard g(self->mu);
        self->ids.push_back(r.task_id);
        self->names.emplace_back(r.task_name);
        self->workers.push_back(r.worker);
        self->durations.push_back(r.ran_for);
        self->cpu.push_back(r.cpu_time);
        self->frames.push_back(r.backtrace.size());
        self->suppressed.push_back(r.suppressed);
        self->texts.emplace_back(r.text);
        self->count.fetch_add(1);
    }
};

weft::runtime_options with_watchdog(weft::runtime_options o, stall_log& log, std::chrono::milliseconds threshold) {
    o.watchdog.enabled = true;
    o.watchdog.threshold = threshold;
    o.watchdog.on_stall = &stall_log::record;
    o.watchdog.user = &log;
    return o;
}

// Under TSan a signal is delivered only when the thread next enters the
// runtime library, which a pure busy loop never does: there the report may
// come without a sample.
constexpr bool samples_reliably = !under_tsan;

// The watchdog goes by the wall clock, and sanitizers (valgrind runs one
// thread at a time) and qemu-user can keep a thread off the CPU, or make a
// short run long, for tens of milliseconds: thresholds are longer there,
// and each watchdog test runs its stalling task as the only task (block_on
// from this thread), so that no other task can be caught descheduled.
std::chrono::milliseconds scaled(std::chrono::milliseconds ms) {
    return sanitized || under_user_mode_emulator() ? 4 * ms : ms;
}

TEST_P(observe_test, the_watchdog_reports_a_task_that_hogs_its_worker_once) {
    stall_log log;
    const auto threshold = scaled(50ms);
    weft::runtime rt(with_watchdog(options(), log, threshold));
    std::uint64_t hog_id = 0;
    int hog_worker = -1;
    bool saw = false;
    rt.block_on(
        [&] {
            hog_id = weft::this_task::id();
            hog_worker = weft::this_task::worker();
            // Until reported, then three more thresholds: still one report.
            saw = weft_test_hog_spin(&log.count, 1, std::chrono::steady_clock::now() + 20s);
            const auto more = std::chrono::steady_clock::now() + 3 * threshold;
            while (std::chrono::steady_clock::now() < more) asm volatile("" ::: "memory");
        },
        {.name = "hog"});
    ASSERT_TRUE(saw) << "no stall report within 20 s";
    rt.stop();
    std::lock_guard g(log.mu);
    ASSERT_EQ(log.count.load(), 1);
    EXPECT_EQ(log.workers[0], unsigned(hog_worker));
    EXPECT_GE(log.durations[0], threshold);
    EXPECT_GT(log.cpu[0], 0ns);
    EXPECT_LE(log.cpu[0], log.durations[0] + 10ms);
    EXPECT_EQ(rt.stats().stalls, 1u);
    EXPECT_EQ(log.suppressed[0], 0u);
    if (samples_reliably) {
        EXPECT_EQ(log.ids[0], hog_id);
        EXPECT_EQ(log.names[0], "hog");
        EXPECT_GT(log.frames[0], 0u);
        EXPECT_NE(log.texts[0].find("task " + std::to_string(hog_id) + " 'hog' has run on worker"), std::string::npos)
            << log.texts[0];
        EXPECT_NE(log.texts[0].find("weft_test_hog_spin"), std::string::npos) << log.texts[0];
    }
}

// The watchdog goes by the wall clock (a task blocked in a system call
// starves its worker too), so a loaded machine that does not run a worker's
// thread for the threshold gets a report; its cpu_time shows that the task
// did not compute that long. So: no report of a task that used a
// threshold's worth of CPU without suspending.
TEST_P(observe_test, tasks_that_suspend_often_are_never_reported) {
    stall_log log;
    const auto threshold = scaled(50ms);
    weft::runtime rt(with_watchdog(options(), log, threshold));
    rt.block_on([&] {
        std::vector<weft::join_handle<void>> hs;
        for (int i = 0; i < 4; ++i)
            hs.push_back(weft::spawn([] {
                const auto end = std::chrono::steady_clock::now() + 300ms;
                while (std::chrono::steady_clock::now() < end) {
                    const auto slice = std::chrono::steady_clock::now() + 2ms;
                    while (std::chrono::steady_clock::now() < slice) asm volatile("" ::: "memory");
                    weft::this_task::yield();
                }
            }));
        weft::when_all(hs);
    });
    rt.stop();
    std::lock_guard g(log.mu);
    for (int i = 0; i < log.count.load(); ++i) EXPECT_LT(log.cpu[i], threshold) << log.texts[i];
}

// Without a sample signal the monitor's own look decides alone (with one,
// the handler would also drop a report of a worker with no task, WATCHDOG-D4).
TEST_P(observe_test, an_idle_worker_is_not_a_stall) {
    stall_log log;
    const auto threshold = scaled(50ms);
    weft::runtime_options o = with_watchdog(options(), log, threshold);
    o.watchdog.sample_signal = 0;
    weft::runtime rt(o);
    rt.block_on([&] { weft::this_task::sleep_for(4 * threshold); });  // a task waiting: not running
    std::this_thread::sleep_for(2 * threshold);  // workers asleep, driver gone
    rt.stop();
    EXPECT_EQ(log.count.load(), 0);
}

TEST_P(observe_test, the_rate_limit_counts_what_it_suppressed) {
    stall_log log;
    weft::runtime_options o = with_watchdog(options(), log, scaled(30ms));
    o.watchdog.burst = 1;
    o.watchdog.refill_every = std::chrono::hours(1);
    weft::runtime rt(o);
    bool both = false;
    // Two stalls one after the other: the first is reported, the second
    // only counted.
    rt.block_on([&] { (void)weft_test_hog_spin(&log.count, 1, std::chrono::steady_clock::now() + 20s); },
                {.name = "first"});
    // The second spins like weft_test_hog_spin, with no call in its loop but
    // every 2^20 rounds: under valgrind each call (the clock, stats()'s
    // allocation) is a system call or a trip into the tool, where the spinning
    // thread took valgrind's lock back before the watchdog's thread nearly
    // every time, and the watchdog's look came seconds late (past 20 s in a
    // CI run of 2026-12-07).
    rt.block_on(
        [&] {
            const auto limit = std::chrono::steady_clock::now() + 20s;
            for (std::uint64_t round = 1;; ++round) {
                if ((round & ((std::uint64_t{1} << 20) - 1)) == 0 &&
                    (rt.stats().stalls >= 2 || std::chrono::steady_clock::now() > limit))
                    break;
                asm volatile("" ::: "memory");
            }
            both = rt.stats().stalls >= 2;
        },
        {.name = "second"});
    rt.stop();
    EXPECT_TRUE(both);
    EXPECT_EQ(log.count.load(), 1);
    const weft::runtime_stats s = rt.stats();
    EXPECT_EQ(s.stalls, 2u);
    EXPECT_EQ(s.stalls_suppressed, 1u);
}

TEST_P(observe_test, without_a_signal_the_report_has_no_backtrace) {
    stall_log log;
    weft::runtime_options o = with_watchdog(options(), log, scaled(30ms));
    o.watchdog.sample_signal = 0;
    weft::runtime rt(o);
    rt.block_on([&] { (void)weft_test_hog_spin(&log.count, 1, std::chrono::steady_clock::now() + 20s); });
    rt.stop();
    std::lock_guard g(log.mu);
    ASSERT_EQ(log.count.load(), 1);
    EXPECT_EQ(log.frames[0], 0u);
    EXPECT_EQ(log.ids[0], 0u);
    EXPECT_NE(log.texts[0].find("no backtrace"), std::string::npos) << log.texts[0];
}

// Stalls that end around the moment they are sampled (the race of WATCHDOG-D3 and
// WATCHDOG-D4 in watchdog.cpp): every report names the task that ran, none comes
// from a task that has suspended, nothing crashes.
TEST_P(observe_test, stalls_ending_while_sampled_are_reported_right_or_not_at_all) {
    stall_log log;
    const auto threshold = 10ms;
    weft::runtime rt(with_watchdog(options(), log, threshold));
    const int rounds = int(env_count("WEFT_OBSERVE_ROUNDS", 60, 20));
    std::uint64_t id = 0;
    rt.block_on(
        [&] {
            id = weft::this_task::id();
            for (int i = 0; i < rounds; ++i) {
                // 8 to 16 ms: around the threshold and its 2.5 ms look.
                const auto end = std::chrono::steady_clock::now() + 8ms + std::chrono::microseconds((i * 137) % 8000);
                while (std::chrono::steady_clock::now() < end) asm volatile("" ::: "memory");
                weft::this_task::yield();
            }
        },
        {.name = "jitter"});
    rt.stop();
    std::lock_guard g(log.mu);
    for (int i = 0; i < log.count.load(); ++i) {
        EXPECT_GE(log.durations[i], threshold);
        if (log.frames[i] > 0) {
            EXPECT_EQ(log.ids[i], id);
            EXPECT_EQ(log.names[i], "jitter");
        }
    }
    EXPECT_LE(log.count.load(), rounds + 1);  // at most once per run of the task
}

// A handler the program installed for the sample signal before the runtime
// still gets the signals that are not the watchdog's.
std::atomic<int> user_handler_calls{0};
void user_handler(int) { user_handler_calls.fetch_add(1); }

TEST_P(observe_test, the_sample_signal_chains_to_the_handler_installed_before) {
    // SIGURG's handler is installed once per process, on the first watchdog:
    // chaining is to what was there then, so this uses a signal of its own.
    const int sig = SIGRTMIN + 3 + int(workers() % 4);
    struct sigaction sa {}, old {};
    sa.sa_handler = &user_handler;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(::sigaction(sig, &sa, &old), 0);
    stall_log log;
    weft::runtime_options o = with_watchdog(options(), log, scaled(30ms));
    o.watchdog.sample_signal = sig;
    {
        weft::runtime rt(o);
        user_handler_calls = 0;
        ASSERT_EQ(::raise(sig), 0);
        EXPECT_EQ(user_handler_calls.load(), 1);
        rt.block_on([&] { (void)weft_test_hog_spin(&log.count, 1, std::chrono::steady_clock::now() + 20s); });
    }
    EXPECT_EQ(log.count.load(), 1);
    EXPECT_EQ(user_handler_calls.load(), 1);  // the sample was the watchdog's own
}

TEST_P(observe_test, bad_watchdog_options_are_refused) {
    weft::runtime_options o = options();
    o.watchdog.enabled = true;
    o.watchdog.threshold = 0ms;
    EXPECT_EQ(errc_of([&] { weft::runtime rt(o); }), weft::task_errc::bad_option);
    o.watchdog.threshold = 10ms;
    o.watchdog.burst = 0;
    EXPECT_EQ(errc_of([&] { weft::runtime rt(o); }), weft::task_errc::bad_option);
}

INSTANTIATE_TEST_SUITE_P(w, observe_test, worker_counts(), worker_param_name);

}  // namespace
}  // namespace weft::test
