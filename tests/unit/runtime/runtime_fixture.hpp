// runtime_fixture.hpp: what the runtime's tests share (tests/unit/runtime
// and tests/stress/runtime_stress_test.cpp).
//
//   runtime_fixture  the leak-checked fixture parameterised over the number
//                    of workers {0, 1, 2, 4} (INSTANTIATE_TEST_SUITE_P with
//                    worker_counts() and worker_param_name: instances are
//                    named w0, w1, w2, w4); every test creates its runtime in
//                    its body, so the runtime is gone before TearDown counts
//                    coroutines and stacks;
//   watchdog         aborts with the test's name if the test has not finished
//                    after a limit (60 s by default): a hang fails the test
//                    instead of hanging CI; every fixture here owns one;
//   driver           drives a runtime without workers from a thread of its own
//                    (run_for in a loop), so that plain threads may join its
//                    tasks; does nothing for a runtime with workers;
//   driven_runtime   a runtime with its driver;
//   eventually()     polls a condition, bounded (10 s by default);
//   counted          an RAII object counting constructions and destructions;
//   errc_of()        the task_errc that a call throws, if any;
//   in_tasks_and_threads()  runs one body in many tasks and plain threads
//                    at once.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/leak_check.hpp"
#include "weft/runtime.hpp"

namespace weft::test {

// under_user_mode_emulator() says whether the tests run under qemu-user:
// there /proc/self/maps is synthesised (not served by procfs), RLIMIT_AS is
// not applied to the guest's mappings, and a forked child of a process that
// has had threads cannot start threads of its own (qemu 7.2 asserts in
// qemu_plugin_vcpu_init_hook), so death tests that start runtimes with
// workers cannot run.
inline bool under_user_mode_emulator() noexcept {
    const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return true;
    struct statfs fs {};
    const bool procfs = ::fstatfs(fd, &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
    ::close(fd);
    return !procfs;
}

// sanitized is true in ASan, TSan and valgrind builds (counts are scaled
// down there; valgrind runs every thread on one CPU, one at a time).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || WEFT_ASAN || WEFT_TSAN || WEFT_VALGRIND
inline constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif
#else
inline constexpr bool sanitized = false;
#endif

// under_tsan is true in ThreadSanitizer builds (the slowest ones).
#if defined(__SANITIZE_THREAD__) || WEFT_TSAN
inline constexpr bool under_tsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool under_tsan = true;
#else
inline constexpr bool under_tsan = false;
#endif
#else
inline constexpr bool under_tsan = false;
#endif

// env_count() is the positive integer in environment variable `name`, or
// `normal` (`in_sanitizer` in sanitizer builds) when it is unset or bad.
inline std::size_t env_count(const char* name, std::size_t normal, std::size_t in_sanitizer) {
    if (const char* s = std::getenv(name)) {
        char* end = nullptr;
        const unsigned long long v = std::strtoull(s, &end, 10);
        if (end != s && *end == '\0' && v > 0) return static_cast<std::size_t>(v);
    }
    return sanitized ? in_sanitizer : normal;
}

// current_test_name() is "Suite.Test/param" of the running test.
inline std::string current_test_name() {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    if (!info) return "(outside a test)";
    return std::string(info->test_suite_name()) + "." + info->name();
}

// watchdog aborts the process, naming the test, unless it is disarmed (or
// destroyed) within `limit`. Under CTest each test runs in a process of its
// own, so the abort fails just the test that hung.
class watchdog {
public:
    // The limit is five times longer under qemu-user, where everything runs
    // 30 to 100 times slower than natively, and under valgrind, which runs
    // one thread at a time: a cross-worker wake-up there costs about 0.5 ms,
    // and runtime_stress.ping_pong_wakeups.../w4 (50,000 of them) took 35 s
    // alone and more than 60 s in CI beside another valgrind process.
    explicit watchdog(std::chrono::seconds limit = std::chrono::seconds(60)) : name_(current_test_name()) {
        if (under_user_mode_emulator() || WEFT_VALGRIND) limit *= 5;
        thread_ = std::thread([this, limit] {
            std::unique_lock lk(mu_);
            if (cv_.wait_for(lk, limit, [this] { return done_; })) return;
            std::fprintf(stderr,
                         "\nweft test watchdog: %s has not finished after %lld s (a lost wake-up or a hang); "
                         "aborting so that the test fails instead of hanging\n",
                         name_.c_str(), static_cast<long long>(limit.count()));
            if (const weft::runtime* rt = dump_.load()) {
                // Best effort: names what is still alive.
                for (const weft::task_info& t : rt->tasks())
                    std::fprintf(stderr, "  live task id %llu '%s' %s worker %d for %lld ms\n",
                                 static_cast<unsigned long long>(t.id), t.name.c_str(), weft::to_string(t.state),
                                 t.worker,
                                 static_cast<long long>(
                                     std::chrono::duration_cast<std::chrono::milliseconds>(t.time_in_state).count()));
            }
            std::fflush(stderr);
            std::abort();
        });
    }
    ~watchdog() { disarm(); }
    watchdog(const watchdog&) = delete;
    watchdog& operator=(const watchdog&) = delete;

    // disarm() stops the watchdog; idempotent.
    void disarm() {
        {
            std::lock_guard g(mu_);
            done_ = true;
        }
        cv_.notify_all();
        if (thread_.joinable()) thread_.join();
    }
    // show() makes an expiring watchdog list rt's live tasks first (null:
    // none). rt must outlive the watchdog or be withdrawn with show(nullptr).
    void show(const weft::runtime* rt) noexcept { dump_.store(rt); }

private:
    std::string name_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool done_ = false;
    std::atomic<const weft::runtime*> dump_{nullptr};
    std::thread thread_;
};

// runtime_fixture is the leak-checked fixture of the runtime's tests,
// parameterised over the number of workers.
class runtime_fixture : public leak_checked, public ::testing::WithParamInterface<unsigned> {
protected:
    // workers() is this instance's worker count.
    [[nodiscard]] unsigned workers() const { return GetParam(); }
    // options() are runtime options with this instance's worker count.
    [[nodiscard]] weft::runtime_options options() const {
        weft::runtime_options o;
        o.workers = GetParam();
        return o;
    }

    watchdog dog_;
};

// worker_counts() are the worker counts every runtime test runs with.
inline auto worker_counts() { return ::testing::Values(0u, 1u, 2u, 4u); }

// worker_param_name() names a worker count "w0", "w1", ... in test names.
inline std::string worker_param_name(const ::testing::TestParamInfo<unsigned>& info) {
    return "w" + std::to_string(info.param);
}

// driver runs a runtime without workers on a thread of its own until it is
// stopped (or destroyed); for a runtime with workers it does nothing. While
// it runs, nothing else may drive the runtime (block_on, run_once and stop
// would throw driver_busy): stop the driver before the runtime is destroyed
// (declare it after the runtime).
class driver {
public:
    explicit driver(weft::runtime& rt) : rt_(rt) {
        if (rt.workers() != 0) return;
        thread_ = std::thread([this] {
            while (!stop_.load(std::memory_order_acquire))
                if (rt_.run_for(std::chrono::milliseconds(5)) == 0)
                    std::this_thread::sleep_for(std::chrono::microseconds(100));
        });
    }
    ~driver() { stop(); }
    driver(const driver&) = delete;
    driver& operator=(const driver&) = delete;

    void stop() {
        stop_.store(true, std::memory_order_release);
        if (thread_.joinable()) thread_.join();
    }

private:
    weft::runtime& rt_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

// driven_runtime is a runtime with its driver: plain threads may join its
// tasks whatever its worker count. The driver stops before the runtime goes
// (a class's members are destroyed before its base).
class driven_runtime : public weft::runtime {
public:
    explicit driven_runtime(const weft::runtime_options& o) : weft::runtime(o), driver_(*this) {}

private:
    driver driver_;
};

// eventually() polls pred until it holds (true) or `limit` has passed (false).
template <class P>
bool eventually(P&& pred, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return true;
}

// yield_until() is eventually() for a task: it yields the calling task until
// pred holds (true) or `limit` has passed (false). A task that waits for
// another task cannot sleep its thread, which may be the only one (workers
// 0 or 1).
template <class P>
bool yield_until(P&& pred, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > end) return false;
        weft::this_task::yield();
    }
    return true;
}

// counted counts its constructions and destructions (for "destructors ran").
struct counted {
    static inline std::atomic<long> made{0};
    static inline std::atomic<long> gone{0};
    static void reset() noexcept {
        made = 0;
        gone = 0;
    }
    counted() noexcept { made.fetch_add(1); }
    counted(const counted&) noexcept { made.fetch_add(1); }
    counted(counted&&) noexcept { made.fetch_add(1); }
    counted& operator=(const counted&) = default;
    ~counted() { gone.fetch_add(1); }
};

// errc_of() runs f and returns the code of the task_error it throws, or an
// empty optional if it throws none.
template <class F>
std::optional<weft::task_errc> errc_of(F&& f) {
    try {
        std::forward<F>(f)();
    } catch (const weft::task_error& e) {
        return e.code();
    }
    return std::nullopt;
}

// in_tasks_and_threads() runs body at once in `tasks` tasks of rt and in
// `threads` plain threads, and returns when all of them have finished.
template <class F>
void in_tasks_and_threads(weft::runtime& rt, int tasks, int threads, const F& body) {
    std::vector<weft::join_handle<void>> hs;
    for (int i = 0; i < tasks; ++i) hs.push_back(rt.spawn(body));
    std::vector<std::thread> ts;
    for (int i = 0; i < threads; ++i) ts.emplace_back(body);
    for (auto& h : hs) h.join();
    for (auto& t : ts) t.join();
}

}  // namespace weft::test
