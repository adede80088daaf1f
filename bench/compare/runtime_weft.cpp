// runtime_weft.cpp: weft's candidate in the runtime section of the peer
// report (bench/compare/runtime_report.py has the protocol and the
// scenarios; the Go and Boost.Fiber peers are go-runtime/main.go and
// runtime_boost_fiber.cpp).
//
//   weft_runtime_weft r1|r2|r3|r3b|idle --workers W [--quick]
//
// Every scenario runs in a weft::runtime with W worker threads (the main
// thread only waits in block_on), with default options: pooled guarded
// 64 KiB stacks, slab stacks past the guarded budget.
//   r1   skynet: every inner task spawns 10 children with weft::spawn and
//        sums their join()s.
//   r2   one task spawns n trivial tasks (task i returns i), then joins
//        them all in order.
//   r3   1,000 tasks x 1,000 this_task::yield().
//   r3b  ping-pong with a hog: weft has no channels yet (they come with the
//        sync layer), so the two tasks hand a value over with two binary
//        semaphores written here on the task layer's wait word (arm / park
//        / try_end / arrive, the protocol the sync layer will use): each
//        exchange is two wake-ups, as with two unbuffered channels.
//   idle the root task sleeps with this_task::sleep_for.
#include <weft/runtime.hpp>

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

using clk = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "weft_runtime_weft: %s\n", msg.c_str());
    std::exit(1);
}

// status_kib(field) is a "kB" field of /proc/self/status ("VmHWM:", "VmRSS:"), or -1.
long long status_kib(const char* field) {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long long v = -1;
    const std::size_t n = std::strlen(field);
    while (std::fgets(line, sizeof line, f))
        if (std::strncmp(line, field, n) == 0) v = std::atoll(line + n);
    std::fclose(f);
    return v;
}
long long vm_hwm_kib() { return status_kib("VmHWM:"); }

void emit(const char* scenario, int workers, double seconds, std::uint64_t ops, const std::string& extra0) {
    std::string extra = "\"runtime\":\"weft " + std::string(WEFT_BENCH_VERSION) + "\"" + (extra0.empty() ? "" : ",") + extra0;
    char per[64];
    if (ops > 0)
        std::snprintf(per, sizeof per, "%.6g", seconds * 1e9 / static_cast<double>(ops));
    else
        std::snprintf(per, sizeof per, "null");
    std::printf("{\"scenario\":\"%s\",\"workers\":%d,\"seconds\":%.6g,\"ops\":%" PRIu64
                ",\"per_op_ns\":%s,\"peak_rss_kib\":%lld,\"extra\":{%s}}\n",
                scenario, workers, seconds, ops, per, vm_hwm_kib(), extra.c_str());
    std::fflush(stdout);
}

double since(clk::time_point t0) { return std::chrono::duration<double>(clk::now() - t0).count(); }

// ---- r1 ----

long skynet(long first, long size) {
    if (size == 1) return first;
    weft::join_handle<long> children[10];
    const long part = size / 10;
    for (long i = 0; i < 10; ++i) children[i] = weft::spawn([=] { return skynet(first + i * part, part); });
    long sum = 0;
    for (auto& c : children) sum += c.join();
    return sum;
}

void r1(weft::runtime& rt, int workers, bool quick) {
    const long leaves = quick ? 10'000 : 1'000'000;
    long tasks = 0;
    for (long n = leaves; n >= 1; n /= 10) tasks += n;
    const auto t0 = clk::now();
    const long sum = rt.block_on([=] { return skynet(0, leaves); });
    const double s = since(t0);
    if (sum != leaves * (leaves - 1) / 2) die("r1: wrong sum " + std::to_string(sum));
    emit("r1", workers, s, static_cast<std::uint64_t>(tasks), "\"sum\":" + std::to_string(sum));
}

// ---- r2 ----

void r2(weft::runtime& rt, int workers, bool quick) {
    const long n = quick ? 10'000 : 1'000'000;
    const auto t0 = clk::now();
    const long sum = rt.block_on([=] {
        std::vector<weft::join_handle<long>> hs;
        hs.reserve(static_cast<std::size_t>(n));
        for (long i = 0; i < n; ++i) hs.push_back(weft::spawn([i] { return i; }));
        long s = 0;
        for (auto& h : hs) s += h.join();
        return s;
    });
    const double s = since(t0);
    if (sum != n * (n - 1) / 2) die("r2: wrong sum");
    emit("r2", workers, s, static_cast<std::uint64_t>(n), "\"sum\":" + std::to_string(sum));
}

// ---- r3 ----

void r3(weft::runtime& rt, int workers, bool quick) {
    const int tasks = quick ? 100 : 1000, yields = quick ? 100 : 1000;
    std::atomic<long> count{0};
    const auto t0 = clk::now();
    rt.block_on([&] {
        std::vector<weft::join_handle<void>> hs;
        hs.reserve(static_cast<std::size_t>(tasks));
        for (int i = 0; i < tasks; ++i)
            hs.push_back(weft::spawn([&] {
                for (int k = 0; k < yields; ++k) weft::this_task::yield();
                count.fetch_add(yields, std::memory_order_relaxed);
            }));
        for (auto& h : hs) h.join();
    });
    const double s = since(t0);
    if (count.load() != long{tasks} * yields) die("r3: wrong count");
    emit("r3", workers, s, static_cast<std::uint64_t>(tasks) * yields, "");
}

// ---- r3b ----

// baton is a binary semaphore for tasks on the L3 wait word: signal() wakes
// the waiting task or leaves the baton set for the next wait().
class baton {
public:
    void signal() {
        weft::detail::task_record* t = nullptr;
        std::uint64_t w = 0;
        {
            std::lock_guard g(m_);
            if (waiter_)
                t = std::exchange(waiter_, nullptr), w = word_;
            else
                set_ = true;
        }
        if (t && weft::detail::try_end(t, w, weft::detail::wait_status::notified)) weft::detail::arrive(t);
    }
    void wait() {
        weft::detail::task_record* t = weft::detail::current_task();
        {
            std::lock_guard g(m_);
            if (set_) {
                set_ = false;
                return;
            }
            word_ = weft::detail::arm(t, true);
            waiter_ = t;
        }
        if (weft::detail::park(t) != weft::detail::wait_status::notified) {
            std::lock_guard g(m_);
            if (waiter_ == t) waiter_ = nullptr;
            throw weft::forced_unwind{};
        }
    }

private:
    std::mutex m_;
    bool set_ = false;
    weft::detail::task_record* waiter_ = nullptr;
    std::uint64_t word_ = 0;
};

std::atomic<std::uint64_t> hog_sink{0};

void r3b(weft::runtime& rt, int workers, bool quick) {
    const long n = quick ? 10'000 : 1'000'000;
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> hog_iters{0};
    baton ping, pong;
    long value = 0;
    double s = 0;
    std::uint64_t h = 0;
    long sum = 0;
    rt.block_on([&] {
        auto hog = weft::spawn([&] {
            std::uint64_t x = 88172645463325252ULL, it = 0;
            while (!stop.load(std::memory_order_relaxed)) {
                for (int k = 0; k < 64; ++k) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                }
                hog_iters.store(++it, std::memory_order_relaxed);
                weft::this_task::yield();
            }
            hog_sink.store(x, std::memory_order_relaxed);
        });
        auto partner = weft::spawn([&] {
            for (;;) {
                ping.wait();
                if (value < 0) return;
                value += 1;
                pong.signal();
            }
        });
        const std::uint64_t h0 = hog_iters.load(std::memory_order_relaxed);
        const auto t0 = clk::now();
        for (long i = 0; i < n; ++i) {
            value = i;
            ping.signal();
            pong.wait();
            sum += value;
        }
        s = since(t0);
        h = hog_iters.load(std::memory_order_relaxed) - h0;
        stop.store(true, std::memory_order_relaxed);
        value = -1;
        ping.signal();
        partner.join();
        hog.join();
    });
    if (sum != n * (n + 1) / 2) die("r3b: wrong sum");
    char extra[128];
    std::snprintf(extra, sizeof extra, "\"hog_iters\":%" PRIu64 ",\"hog_per_exchange\":%.6g", h,
                  static_cast<double>(h) / static_cast<double>(n));
    emit("r3b", workers, s, static_cast<std::uint64_t>(n), extra);
}

// ---- idle ----

double cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    auto tv = [](timeval t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
    return tv(ru.ru_utime) + tv(ru.ru_stime);
}

void idle(weft::runtime& rt, int workers, bool quick) {
    const auto d = quick ? std::chrono::milliseconds(200) : std::chrono::milliseconds(2000);
    double cpu = 0, s = 0;
    rt.block_on([&] {
        const double c0 = cpu_seconds();
        const auto t0 = clk::now();
        weft::this_task::sleep_for(d);
        s = since(t0);
        cpu = cpu_seconds() - c0;
    });
    char extra[64];
    std::snprintf(extra, sizeof extra, "\"cpu_percent\":%.4g", cpu / s * 100.0);
    emit("idle", workers, s, 0, extra);
}

// ---- live (not part of the report) ----
//
// weft_runtime_weft live --workers W [--count N] [--copy]: N tasks (default
// 1,000,000) that are all waiting at once (each sleeps for an hour), on
// default stacks or copy-stacks; prints the resident memory per task, then
// cancels them all. Shows that a million live tasks work at the system's
// default vm.max_map_count (docs/runtime.md, "Stacks").
void live(weft::runtime& rt, int workers, long n, bool copy) {
    const long long before = status_kib("VmRSS:");
    std::atomic<long> started{0};
    const auto t0 = clk::now();
    long long during = 0;
    double spawn_s = 0;
    rt.block_on([&] {
        std::vector<weft::join_handle<void>> hs;
        hs.reserve(static_cast<std::size_t>(n));
        for (long i = 0; i < n; ++i)
            hs.push_back(weft::spawn(
                [&] {
                    started.fetch_add(1, std::memory_order_relaxed);
                    weft::this_task::sleep_for(std::chrono::hours(1));
                },
                {.copy_stack = copy}));
        while (started.load(std::memory_order_relaxed) < n) weft::this_task::sleep_for(std::chrono::milliseconds(10));
        spawn_s = since(t0);
        during = status_kib("VmRSS:");
        for (auto& h : hs) h.cancel();
        for (auto& h : hs)
            if (h.wait_for(std::chrono::seconds(60)) && h.state() != weft::task_state::canceled) die("live: not canceled");
    });
    char extra[160];
    std::snprintf(extra, sizeof extra, "\"live_tasks\":%ld,\"copy_stack\":%s,\"rss_bytes_per_task\":%.0f", n,
                  copy ? "true" : "false", static_cast<double>(during - before) * 1024.0 / static_cast<double>(n));
    emit("live", workers, spawn_s, static_cast<std::uint64_t>(n), extra);
}

}  // namespace

int main(int argc, char** argv) {
    std::string scenario;
    int workers = 1;
    bool quick = false;
    long count = 1'000'000;
    bool copy = false;
    const char* usage = "usage: weft_runtime_weft r1|r2|r3|r3b|idle --workers W [--quick]\n"
                        "       weft_runtime_weft live --workers W [--count N] [--copy]";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--workers" && i + 1 < argc)
            workers = std::atoi(argv[++i]);
        else if (a == "--count" && i + 1 < argc)
            count = std::atol(argv[++i]);
        else if (a == "--quick")
            quick = true;
        else if (a == "--copy")
            copy = true;
        else if (a == "r1" || a == "r2" || a == "r3" || a == "r3b" || a == "idle" || a == "live")
            scenario = a;
        else
            die(usage);
    }
    if (scenario.empty() || workers < 1 || count < 1) die(usage);
    weft::runtime rt({.workers = static_cast<unsigned>(workers)});
    if (scenario == "r1") r1(rt, workers, quick);
    if (scenario == "r2") r2(rt, workers, quick);
    if (scenario == "r3") r3(rt, workers, quick);
    if (scenario == "r3b") r3b(rt, workers, quick);
    if (scenario == "idle") idle(rt, workers, quick);
    if (scenario == "live") live(rt, workers, count, copy);
    return 0;
}
