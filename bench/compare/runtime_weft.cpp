// runtime_weft.cpp: weft's candidate in the runtime section of the peer
// report (bench/compare/runtime_report.py has the protocol and the
// scenarios; the Go and Boost.Fiber peers are go-runtime/main.go and
// runtime_boost_fiber.cpp).
//
//   weft_runtime_weft r1|r2|r2s|r3|r3b|r4|r5|r5b|r6|r6s|r7|idle --workers W [--quick]
//
// Every scenario runs in a weft::runtime with W worker threads (the main
// thread only waits in block_on), with default options: pooled guarded
// 64 KiB stacks, slab stacks past the guarded budget.
//   r1   skynet: every inner task spawns 10 children with weft::spawn and
//        sums their join()s.
//   r2   one task spawns n = 100,000 trivial tasks (task i returns i), then
//        joins them all in order.
//   r2s  one task, n = 1,000,000 times: spawn a trivial task returning i,
//        join() it at once, add the result (spawn + join, sequential).
//   r3   1,000 tasks x 1,000 this_task::yield().
//   r3b  ping-pong with a hog: weft has no channels yet (they come with the
//        sync layer), so the two tasks hand a value over with two binary
//        semaphores written here on the task layer's wait word (arm / park
//        / try_end / arrive, the protocol the sync layer will use): each
//        exchange is two wake-ups, as with two unbuffered channels.
//   r4   two tasks exchange a value over two weft::channel<long>(0)
//        (rendezvous), one each way; ops = messages (send+recv each).
//   r5   one producer task, one consumer task, weft::channel<long>(1024).
//   r5b  four producers, four consumers on one such channel; the root task
//        closes it after joining the producers.
//   r6   1,000 tasks x 1,000 std::lock_guard<weft::mutex> + increment.
//   r6s  the same with 4 tasks x 250,000 (few tasks, one mutex).
//   r7   1,000,000 tasks each this_task::sleep_for a fixed-seed random
//        10-100 ms and compare steady_clock::now() with its deadline on
//        waking; an early wake exits 1 after the line is printed.
//   idle the root task sleeps with this_task::sleep_for.
//
// weft-only scenarios (the interop rows, L7: C++20 tasks, weft::async<T>,
// next to stackful tasks; peers do not run them). Each of a1-a3 measures
// its variants in the same process, in rounds (full: 3, --quick: 1), the
// order of the variants rotated by one every round; extra.variants holds
// each variant's median ns per op over the rounds (extra.rounds every
// round's figure); per_op_ns is the stackful-only variant's.
//   a1   pipeline over weft::channel<long>(0) (unbuffered: every hop a
//        hand-off): a producer task sends 0..n-1 and closes the channel, a
//        consumer task sums what it receives; the root (stackful) task
//        spawns both and joins both. Variants ff (stackful -> stackful), lf
//        (C++20 producer, co_await co::send), fl (C++20 consumer, co_await
//        co::recv), ll (both C++20). ns per hop (value). A C++20 task whose
//        send/recv must wait runs the blocking call on a borrowed fiber (A3).
//   a2   the same over weft::channel<long>(1024) (mostly the try fast path).
//   a3   spawn + join in batches of 1,000: sf (the stackful root spawns
//        stackful tasks, weft::spawn([i]{return i;}), joins with join()), sc
//        (the stackful root spawns C++20 tasks, weft::spawn(coro(i)), joins
//        with join()), cc (a C++20 root spawns C++20 tasks and joins with
//        co_await). ns per task.
//   a4f / a4c  live blocked tasks: n tasks each waiting on one weft::event
//        (a4f stackful: ev.wait(); a4c C++20: co_await co::wait(ev)), each
//        scenario in its own process (stacks are pooled: one process per
//        variant keeps the RSS honest); extra.rss_bytes_per_task = VmRSS
//        growth while all wait / n. Then the event is set and all are joined.
//        A C++20 task blocked in a weft::co wait holds a borrowed fiber (a
//        pooled stack) for the wait (A3), so a4c is expected near a4f. The
//        timed region includes the root's 1 ms polls and a 20 ms settle
//        sleep: its time is not a spawn cost (a3 is).
//   a4p  the same with C++20 tasks parked on a foreign awaitable (a gate
//        written here, opened by the root): parked through a bridge (A2),
//        no borrowed fiber: what a blocked C++20 task costs without one.
//
// The scale section's scenarios (bench/compare/scale_report.py has them and
// their peers): sc1, sc3-sc6 (issue 26) and sh1-sh4 (issue 42, idle tasks
// shrink without a trace), which are sc1's, sc4's and sc5's code with
// parameters: --count N, --idle-ms MS (sc1, sc3, sc4, sh1-sh3),
// --period-ms MS and --run-ms MS (sh4). The runtime runs with its default
// options unless --shrink-idle-after-ms is given (the report's
// weft-noshrink passes 0); the JSON of sc1, sc3-sc5 and sh1-sh4 says which
// threshold the runtime ran with and how many shrinks and restores its
// workers made (runtime::stats(), read outside the timed parts).
//   sh1  --count tasks (1,000,000; quick 20,000) blocked on one weft::event,
//        timed from the first spawn until the last has started (it sets an
//        event the root waits on): extra.parked_ms; then (after --idle-ms,
//        default 0) the event is set and all joined: extra.wake_join_ms.
//   sh2  the same with --idle-ms (default 2,000; quick 200) between.
//   sh3  sc4 (ping each of 10,000 idle tasks in turn) after --idle-ms.
//   sh4  sc5 (CPU per timer wake) with --count tasks (1,000) each sleeping
//        --period-ms (1,000) in a loop for --run-ms (10,000; quick 1,000);
//        extra.cpu_fraction = CPU / wall (SH5).
//
// Issue 43's rows (timers without a task, weft::timer; the Go and Tokio
// peers have the same shapes: go-runtime/scale.go, tokio-runtime/src/main.rs):
//   sc10 --count timers (100,000; quick 10,000), each a weft::timer made and
//        armed by the root task with reset(1 h) (its callback adds one to a
//        counter; it never runs); VmRSS and VmPTE before the first is made,
//        after all are armed, and after 10 rounds of reset() of every timer
//        to another far deadline (1 h + round s); then all are stopped
//        (every stop() must say it was pending) and none must have fired.
//        extra.rss_bytes_per_timer = (armed - before) / n,
//        extra.rss_growth_bytes_per_timer = (re-armed - armed) / n.
//   sc11 --count timers (100,000; quick 10,000) made by the root task, each
//        reset_every(10 ms), its callback adding one to an atomic counter,
//        for 2 s (quick 0.5 s), then all stopped. CPU (getrusage user+sys)
//        from before the first is made until all are stopped, per fire
//        (extra.cpu_ns_per_fire); fires per s between the end of arming and
//        the start of stopping (extra.fires_per_s; the ideal is timers x 100).
#include <weft/runtime.hpp>
#include <weft/timer.hpp>
#if __has_include(<weft/async.hpp>)
#include <weft/async.hpp>
#define WEFT_BENCH_ASYNC 1
#endif
#if __has_include(<weft/sync.hpp>)
#include <weft/sync.hpp>
#else
#include <weft/sync/channel.hpp>
#include <weft/sync/mutex.hpp>
#endif

#include <weft/io/socket.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
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
    const long n = quick ? 10'000 : 100'000;
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

// ---- r2s: spawn + join, sequential ----

void r2s(weft::runtime& rt, int workers, bool quick) {
    const long n = quick ? 10'000 : 1'000'000;
    const auto t0 = clk::now();
    const long sum = rt.block_on([=] {
        long s = 0;
        for (long i = 0; i < n; ++i) s += weft::spawn([i] { return i; }).join();
        return s;
    });
    const double s = since(t0);
    if (sum != n * (n - 1) / 2) die("r2s: wrong sum " + std::to_string(sum));
    emit("r2s", workers, s, static_cast<std::uint64_t>(n), "\"sum\":" + std::to_string(sum));
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
            weft::detail::raise_forced_unwind();
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

// ---- r4: channel ping-pong ----

void r4(weft::runtime& rt, int workers, bool quick) {
    const long msgs = quick ? 10'000 : 1'000'000, trips = msgs / 2;
    weft::channel<long> ping(0), pong(0);
    long sum = 0;
    const auto t0 = clk::now();
    rt.block_on([&] {
        auto pinger = weft::spawn([&] {
            for (long i = 0; i < trips; ++i) {
                ping.send(i);
                const std::optional<long> v = pong.recv();
                if (!v) die("r4: pong closed");
                sum += *v;
            }
            ping.close();
        });
        auto ponger = weft::spawn([&] {
            while (const std::optional<long> v = ping.recv()) pong.send(*v + 1);
        });
        pinger.join();
        ponger.join();
    });
    const double s = since(t0);
    if (sum != trips * (trips + 1) / 2) die("r4: wrong sum");
    emit("r4", workers, s, static_cast<std::uint64_t>(msgs),
         "\"sum\":" + std::to_string(sum) + ",\"round_trips\":" + std::to_string(trips));
}

// ---- r5 / r5b: buffered channel throughput ----

// p producers and c consumers over one channel of capacity 1,024: producer
// k sends k, k+p, k+2p, ... below n; each consumer sums what it receives
// until the channel is closed and drained; the root task closes it once it
// has joined every producer.
void throughput(weft::runtime& rt, const char* scenario, int workers, int p, int c, bool quick) {
    const long n = quick ? 40'000 : 4'000'000;
    weft::channel<long> ch(1024);
    std::vector<long> sums(static_cast<std::size_t>(c), 0);
    const auto t0 = clk::now();
    rt.block_on([&] {
        std::vector<weft::join_handle<void>> consumers, producers;
        for (int k = 0; k < c; ++k)
            consumers.push_back(weft::spawn([&ch, &sums, k] {
                long s = 0;
                while (const std::optional<long> v = ch.recv()) s += *v;
                sums[static_cast<std::size_t>(k)] = s;
            }));
        for (int k = 0; k < p; ++k)
            producers.push_back(weft::spawn([&ch, k, p, n] {
                for (long v = k; v < n; v += p) ch.send(v);
            }));
        for (auto& h : producers) h.join();
        ch.close();
        for (auto& h : consumers) h.join();
    });
    const double s = since(t0);
    long sum = 0;
    for (long v : sums) sum += v;
    if (sum != n * (n - 1) / 2) die(std::string(scenario) + ": wrong sum");
    emit(scenario, workers, s, static_cast<std::uint64_t>(n),
         "\"sum\":" + std::to_string(sum) + ",\"producers\":" + std::to_string(p) +
             ",\"consumers\":" + std::to_string(c) + ",\"capacity\":1024");
}

// ---- r6, r6s: mutex contention ----

void mutex_bench(weft::runtime& rt, const char* scenario, int tasks, int each, int workers) {
    weft::mutex m;
    long counter = 0;
    const auto t0 = clk::now();
    rt.block_on([&] {
        std::vector<weft::join_handle<void>> hs;
        hs.reserve(static_cast<std::size_t>(tasks));
        for (int i = 0; i < tasks; ++i)
            hs.push_back(weft::spawn([&] {
                for (int k = 0; k < each; ++k) {
                    std::lock_guard<weft::mutex> g(m);
                    ++counter;
                }
            }));
        for (auto& h : hs) h.join();
    });
    const double s = since(t0);
    if (counter != long{tasks} * each) die(std::string(scenario) + ": wrong counter " + std::to_string(counter));
    emit(scenario, workers, s, static_cast<std::uint64_t>(tasks) * static_cast<std::uint64_t>(each),
         "\"counter\":" + std::to_string(counter) + ",\"tasks\":" + std::to_string(tasks) +
             ",\"locks_each\":" + std::to_string(each));
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

// ---- r7: timers ----

// Task i's sleep in microseconds, 10,000..100,000: splitmix64 of a fixed
// seed plus i (the same sequence in every candidate).
long sleep_us(std::uint64_t i) {
    std::uint64_t z = 0x5eed000000000007ULL + i * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return 10'000 + static_cast<long>(z % 90'001);
}

void r7(weft::runtime& rt, int workers, bool quick) {
    const std::size_t n = quick ? 10'000 : 1'000'000;
    std::vector<std::int64_t> late(n, 0);  // ns woken after the deadline (negative: early)
    long max_us = 0;
    for (std::size_t i = 0; i < n; ++i) max_us = std::max(max_us, sleep_us(i));
    const double c0 = cpu_seconds();
    rusage r0{};
    getrusage(RUSAGE_SELF, &r0);
    const auto t0 = clk::now();
    rt.block_on([&] {
        std::vector<weft::join_handle<void>> hs;
        hs.reserve(n);
        for (std::size_t i = 0; i < n; ++i)
            hs.push_back(weft::spawn([i, &late] {
                const auto d = std::chrono::microseconds(sleep_us(i));
                const auto deadline = clk::now() + d;
                weft::this_task::sleep_for(d);
                late[i] = std::chrono::duration_cast<std::chrono::nanoseconds>(clk::now() - deadline).count();
            }));
        for (auto& h : hs) h.join();
    });
    const double s = since(t0);
    const double cpu = cpu_seconds() - c0;
    rusage r1{};
    getrusage(RUSAGE_SELF, &r1);
    auto tv = [](timeval t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
    std::uint64_t early = 0;
    std::int64_t max_late = 0, first_early = 0;
    double sum_late = 0;
    for (const std::int64_t l : late) {
        if (l < 0 && early++ == 0) first_early = l;
        max_late = std::max(max_late, l);
        sum_late += static_cast<double>(l);
    }
    char extra[512];
    std::snprintf(extra, sizeof extra,
                  "\"early\":%" PRIu64 ",\"max_sleep_ms\":%.6g,\"over_ms\":%.6g,\"cpu_us_per_task\":%.6g,"
                  "\"user_s\":%.6g,\"sys_s\":%.6g,\"late_ms_max\":%.6g,\"late_ms_mean\":%.6g",
                  early, static_cast<double>(max_us) / 1e3, s * 1e3 - static_cast<double>(max_us) / 1e3,
                  cpu * 1e6 / static_cast<double>(n), tv(r1.ru_utime) - tv(r0.ru_utime),
                  tv(r1.ru_stime) - tv(r0.ru_stime), static_cast<double>(max_late) / 1e6,
                  sum_late / static_cast<double>(n) / 1e6);
    emit("r7", workers, s, n, extra);
    if (early > 0)
        die("r7: " + std::to_string(early) + " timers fired early (the first " + std::to_string(-first_early) +
            " ns before its deadline)");
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


// ---- a1-a4: interop (L7), weft-only ----

// --variant NAME (diagnosis, not the report's protocol: e.g. one variant
// under callgrind): a1-a3 run only that variant.
std::string only_variant;

#ifdef WEFT_BENCH_ASYNC

// rounds() runs every variant `rounds` times, rotating the order each round;
// fn(v) returns ns per op of one run of variant v. Returns the extra fields.
template <class F>
std::string rounds(const std::vector<const char*>& names, int nrounds, F fn, double& main_ns) {
    std::vector<std::vector<double>> r(names.size());
    for (int k = 0; k < nrounds; ++k)
        for (std::size_t j = 0; j < names.size(); ++j) {
            const std::size_t v = (j + static_cast<std::size_t>(k)) % names.size();
            if (only_variant.empty() || only_variant == names[v]) r[v].push_back(fn(v));
        }
    std::string med = "\"variants\":{", all = "\"rounds\":{";
    bool first = true;
    for (std::size_t v = 0; v < names.size(); ++v) {
        if (r[v].empty()) continue;
        std::vector<double> x = r[v];
        std::sort(x.begin(), x.end());
        const double m = x.size() % 2 ? x[x.size() / 2] : (x[x.size() / 2 - 1] + x[x.size() / 2]) / 2;
        if (first) main_ns = m;
        char b[64];
        std::snprintf(b, sizeof b, "%s\"%s\":%.6g", first ? "" : ",", names[v], m);
        med += b;
        all += std::string(first ? "" : ",") + "\"" + names[v] + "\":[";
        first = false;
        for (std::size_t i = 0; i < r[v].size(); ++i) {
            std::snprintf(b, sizeof b, "%s%.6g", i ? "," : "", r[v][i]);
            all += b;
        }
        all += "]";
    }
    return med + "}," + all + "}";
}

weft::async<void> co_producer(weft::channel<long>& ch, long n) {
    for (long v = 0; v < n; ++v) co_await weft::co::send(ch, v);
    ch.close();
}
weft::async<long> co_consumer(weft::channel<long>& ch) {
    long s = 0;
    while (const std::optional<long> v = co_await weft::co::recv(ch)) s += *v;
    co_return s;
}

// pipeline() is one run of a1/a2: variant 0 ff, 1 lf, 2 fl, 3 ll (first
// letter the producer, second the consumer; f stackful, l C++20).
double pipeline(weft::runtime& rt, std::size_t capacity, long n, std::size_t variant, const char* scenario) {
    const bool lp = variant == 1 || variant == 3, lc = variant == 2 || variant == 3;
    weft::channel<long> ch(capacity);
    const auto t0 = clk::now();
    const long sum = rt.block_on([&] {
        weft::join_handle<long> c = lc ? weft::spawn(co_consumer(ch)) : weft::spawn([&ch] {
            long s = 0;
            while (const std::optional<long> v = ch.recv()) s += *v;
            return s;
        });
        weft::join_handle<void> p = lp ? weft::spawn(co_producer(ch, n)) : weft::spawn([&ch, n] {
            for (long v = 0; v < n; ++v) ch.send(v);
            ch.close();
        });
        p.join();
        return c.join();
    });
    const double s = since(t0);
    if (sum != n * (n - 1) / 2)
        die(std::string(scenario) + ": wrong sum " + std::to_string(sum) + " in variant " + std::to_string(variant));
    return s * 1e9 / static_cast<double>(n);
}

void a_pipeline(weft::runtime& rt, const char* scenario, std::size_t capacity, int workers, bool quick) {
    const long n = capacity == 0 ? (quick ? 10'000 : 200'000) : (quick ? 40'000 : 1'000'000);
    const int nr = quick ? 1 : 3;
    double main_ns = 0;
    const std::string extra =
        rounds({"ff", "lf", "fl", "ll"}, nr, [&](std::size_t v) { return pipeline(rt, capacity, n, v, scenario); },
               main_ns);
    emit(scenario, workers, main_ns * static_cast<double>(n) / 1e9, static_cast<std::uint64_t>(n),
         "\"sum\":" + std::to_string(n * (n - 1) / 2) + ",\"capacity\":" + std::to_string(capacity) +
             ",\"rounds_per_variant\":" + std::to_string(nr) + "," + extra);
}

weft::async<long> co_value(long i) { co_return i; }

weft::async<long> co_spawn_join(long n, long batch) {
    long s = 0;
    std::vector<weft::join_handle<long>> hs;
    hs.reserve(static_cast<std::size_t>(batch));
    for (long b = 0; b < n; b += batch) {
        for (long i = b; i < b + batch; ++i) hs.push_back(weft::spawn(co_value(i)));
        for (auto& h : hs) s += co_await h;
        hs.clear();
    }
    co_return s;
}

void a3(weft::runtime& rt, int workers, bool quick) {
    const long n = quick ? 10'000 : 200'000, batch = 1000;
    const int nr = quick ? 1 : 3;
    double main_ns = 0;
    const std::string extra = rounds(
        {"sf", "sc", "cc"}, nr,
        [&](std::size_t v) {
            const auto t0 = clk::now();
            long sum = 0;
            if (v == 2) {
                sum = rt.block_on(co_spawn_join(n, batch));
            } else {
                sum = rt.block_on([&] {
                    long s = 0;
                    std::vector<weft::join_handle<long>> hs;
                    hs.reserve(static_cast<std::size_t>(batch));
                    for (long b = 0; b < n; b += batch) {
                        for (long i = b; i < b + batch; ++i)
                            hs.push_back(v == 0 ? weft::spawn([i] { return i; }) : weft::spawn(co_value(i)));
                        for (auto& h : hs) s += h.join();
                        hs.clear();
                    }
                    return s;
                });
            }
            const double s = since(t0);
            if (sum != n * (n - 1) / 2) die("a3: wrong sum in variant " + std::to_string(v));
            return s * 1e9 / static_cast<double>(n);
        },
        main_ns);
    emit("a3", workers, main_ns * static_cast<double>(n) / 1e9, static_cast<std::uint64_t>(n),
         "\"sum\":" + std::to_string(n * (n - 1) / 2) + ",\"batch\":" + std::to_string(batch) +
             ",\"rounds_per_variant\":" + std::to_string(nr) + "," + extra);
}

weft::async<void> co_blocked(weft::event& ev, std::atomic<long>& started) {
    started.fetch_add(1, std::memory_order_relaxed);
    co_await weft::co::wait(ev);
}

// gate is a foreign awaitable (one weft knows nothing of): a C++20 task
// that awaits it parks through a bridge (A2) and holds no fiber while it
// waits. open() resumes every handle it was given.
struct gate {
    std::mutex m;
    bool is_open = false;
    std::vector<std::coroutine_handle<>> waiting;
    struct awaiter {
        gate* g;
        bool await_ready() const noexcept { return false; }
        bool await_suspend(std::coroutine_handle<> h) {
            std::lock_guard l(g->m);
            if (g->is_open) return false;
            g->waiting.push_back(h);
            return true;
        }
        void await_resume() const noexcept {}
    };
    awaiter operator co_await() noexcept { return {this}; }
    void open() {
        std::vector<std::coroutine_handle<>> hs;
        {
            std::lock_guard l(m);
            is_open = true;
            hs.swap(waiting);
        }
        for (auto h : hs) h.resume();
    }
};

weft::async<void> co_parked(gate& g, std::atomic<long>& started) {
    started.fetch_add(1, std::memory_order_relaxed);
    co_await g;
}

// a4f / a4c / a4p: n tasks all blocked at once (on one event; a4p on a
// gate); RSS per task.
void a4(weft::runtime& rt, const char* scenario, int kind, int workers, bool quick) {
    const bool stackless = kind != 0;
    const long n = quick ? 10'000 : 100'000;
    weft::event ev;
    gate g;
    std::atomic<long> started{0};
    const long long before = status_kib("VmRSS:");
    long long during = 0;
    double spawn_s = 0;
    const auto t0 = clk::now();
    rt.block_on([&] {
        std::vector<weft::join_handle<void>> hs;
        hs.reserve(static_cast<std::size_t>(n));
        for (long i = 0; i < n; ++i)
            hs.push_back(kind == 2   ? weft::spawn(co_parked(g, started))
                         : kind == 1 ? weft::spawn(co_blocked(ev, started))
                                     : weft::spawn([&] {
                started.fetch_add(1, std::memory_order_relaxed);
                ev.wait();
            }));
        while (started.load(std::memory_order_relaxed) < n) weft::this_task::sleep_for(std::chrono::milliseconds(1));
        // Every task has started; give the last ones time to reach the wait.
        weft::this_task::sleep_for(std::chrono::milliseconds(20));
        spawn_s = since(t0);
        during = status_kib("VmRSS:");
        ev.set();
        g.open();
        for (auto& h : hs) h.join();
    });
    const double total_s = since(t0);
    char extra[256];
    std::snprintf(extra, sizeof extra,
                  "\"live_tasks\":%ld,\"stackless\":%s,\"rss_bytes_per_task\":%.0f,\"spawn_ms_with_settle\":%.6g,"
                  "\"total_ns_per_task\":%.6g",
                  n, stackless ? "true" : "false",
                  static_cast<double>(during - before) * 1024.0 / static_cast<double>(n),
                  spawn_s * 1e3, total_s * 1e9 / static_cast<double>(n));
    emit(scenario, workers, total_s, static_cast<std::uint64_t>(n), extra);
}

#endif  // WEFT_BENCH_ASYNC


// ---- sc1-sc6: the scale scenarios of issue 26, sh1-sh4: issue 42's
// (bench/compare/scale_report.py documents them and the protocol; the Go,
// Tokio and Boost.Fiber peers have the same shapes). sh1/sh2 are sc1's code
// path, sh3 is sc4's and sh4 sc5's, with the idle time, sleep period, count
// and run time as parameters. ----

long long vm_rss_kib() { return status_kib("VmRSS:"); }

// --count N overrides a scale scenario's task count (0: the scenario's own).
long scale_count = 0;
// --idle-ms, --period-ms, --run-ms (-1: the scenario's own).
long idle_ms_arg = -1, period_ms_arg = -1, run_ms_arg = -1;
// The shrink_idle_after the runtime was made with (the default unless
// --shrink-idle-after-ms), for the JSON.
long long shrink_ms_used = -1;
// sc3's guard: a sample whose RSS passes this is abandoned (exit 3).
long long rss_guard_kib = 16LL * 1024 * 1024;

std::chrono::milliseconds ms_or(long arg, long fallback) { return std::chrono::milliseconds(arg >= 0 ? arg : fallback); }

// shrink_extra(rt) is ,"shrink_idle_after_ms":..,"shrinks":..,"restores":..
// for the JSON: the threshold the runtime runs with and the shrinks and
// restores its workers made so far (runtime::stats()).
std::string shrink_extra(const weft::runtime& rt) {
    const weft::worker_stats t = rt.stats().total();
    return ",\"shrink_idle_after_ms\":" + std::to_string(shrink_ms_used) + ",\"shrinks\":" + std::to_string(t.shrinks) +
           ",\"restores\":" + std::to_string(t.restores);
}

// rss_guard_exit() ends a sample whose RSS passed the guard: exit 3 at once
// (the blocked tasks cannot be unwound cheaply; the driver reports it).
[[noreturn]] void rss_guard_exit(const char* scenario) {
    std::fprintf(stderr, "weft_runtime_weft: %s: VmRSS %lld KiB passed the guard (%lld KiB, --rss-guard-gib): sample abandoned\n",
                 scenario, vm_rss_kib(), rss_guard_kib);
    std::fflush(stderr);
    std::_Exit(3);
}

// sc1 / sc3 / sh1 / sh2: n tasks each blocked on one weft::event
// (ev.wait()), no join handles kept (a weft::wait_group counts the ends, as
// Go's WaitGroup). The root waits until all have started, then idles `idle`
// (--idle-ms) and reads VmRSS and VmPTE; then sets the event and waits for
// all. RSS and page tables per task are (after - before) / n, "before" read
// in the root task before the first spawn.
//
// timed (sh1, sh2): the task whose start makes the count n sets an event
// the root waits on (no polling, no RSS guard reads in the spawn loop);
// extra.parked_ms is first spawn -> that event (issue 42's SH1: every task
// has counted itself just before its wait), extra.wake_join_ms is ev.set()
// -> the wait_group's wait returning (SH2). No RSS settle wait.
void sc_idle(weft::runtime& rt, const char* scenario, long n, int workers, std::chrono::milliseconds idle, bool timed) {
    weft::event ev, all_started;
    weft::wait_group done;
    std::atomic<long> started{0}, woke{0};
    long long rss0 = 0, pte0 = 0, rss1 = 0, pte1 = 0;
    double spawn_s = 0, parked_s = 0, wake_s = 0;
    long long settle_ms = 0;
    std::uint64_t shrinks_at_wake = 0;
    bool guard = false;
    const auto t0 = clk::now();
    rt.block_on([&] {
        rss0 = vm_rss_kib();
        pte0 = status_kib("VmPTE:");
        done.add(n);
        for (long i = 0; i < n; ++i) {
            weft::spawn([&] {
                if (started.fetch_add(1, std::memory_order_relaxed) + 1 == n) all_started.set();
                ev.wait();
                woke.fetch_add(1, std::memory_order_relaxed);
                done.done();
            }).detach();
            if ((i & 0xffff) == 0xffff) {
                if (!timed && vm_rss_kib() > rss_guard_kib) {
                    guard = true;
                    break;
                }
                weft::this_task::yield();
            }
        }
        if (guard) rss_guard_exit(scenario);
        spawn_s = since(t0);
        if (timed)
            all_started.wait();
        else
            for (int k = 0; k < 600'000 && started.load(std::memory_order_relaxed) < n; ++k) {
                if (vm_rss_kib() > rss_guard_kib) rss_guard_exit(scenario);
                weft::this_task::sleep_for(std::chrono::milliseconds(1));
            }
        parked_s = since(t0);
        if (idle.count() > 0) weft::this_task::sleep_for(idle);
        rss1 = vm_rss_kib();
        // sc1 / sc3: shrinking a million tasks takes the workers seconds (a
        // madvise each): past the idle time, wait until RSS stops falling
        // (less than 8 B per task freed in 200 ms), at most 30 s; the JSON
        // says how long (settle_ms). Go's and Tokio's figures do not move
        // after their idle time, so they do not wait.
        for (int k = 0; !timed && k < 150; ++k) {
            weft::this_task::sleep_for(std::chrono::milliseconds(200));
            const long long r = vm_rss_kib();
            const bool settled = (rss1 - r) * 1024 < 8LL * n;
            rss1 = r;
            if (settled) break;
        }
        settle_ms = static_cast<long long>(since(t0) * 1000.0);
        pte1 = status_kib("VmPTE:");
        shrinks_at_wake = rt.stats().total().shrinks;
        const auto t1 = clk::now();
        ev.set();
        done.wait();
        wake_s = since(t1);
    });
    const double s = since(t0);
    if (woke.load() != n) die(std::string(scenario) + ": " + std::to_string(woke.load()) + " of " + std::to_string(n) + " woke");
    char extra[1024];
    std::snprintf(extra, sizeof extra,
                  "\"tasks\":%ld,\"woke\":%ld,\"idle_ms\":%lld,\"rss_bytes_per_task\":%.1f,\"pte_bytes_per_task\":%.2f,"
                  "\"rss_before_kib\":%lld,\"rss_idle_kib\":%lld,\"pte_before_kib\":%lld,\"pte_idle_kib\":%lld,"
                  "\"spawn_ms\":%.6g,\"parked_ms\":%.6g,\"wake_join_ms\":%.6g,\"settle_ms_from_start\":%lld,"
                  "\"shrinks_at_wake\":%" PRIu64,
                  n, woke.load(), static_cast<long long>(idle.count()),
                  static_cast<double>(rss1 - rss0) * 1024.0 / static_cast<double>(n),
                  static_cast<double>(pte1 - pte0) * 1024.0 / static_cast<double>(n), rss0, rss1, pte0, pte1,
                  spawn_s * 1e3, parked_s * 1e3, wake_s * 1e3, settle_ms, shrinks_at_wake);
    emit(scenario, workers, s, static_cast<std::uint64_t>(n), extra + shrink_extra(rt));
}

// sc4 / sh3: n tasks each waiting on a weft::channel<long>(1) of its own;
// after all have started and idled `idle` (--idle-ms), the root pings them
// one at a time (send i, then receive the reply i+1 on one shared
// weft::channel<long>(1)). Timed: the n round trips alone.
void sc4(weft::runtime& rt, const char* scenario, int workers, long n, std::chrono::milliseconds idle) {
    std::deque<weft::channel<long>> in;
    for (long i = 0; i < n; ++i) in.emplace_back(1);
    weft::channel<long> reply(1);
    weft::wait_group done;
    std::atomic<long> started{0};
    double s = 0;
    long bad = 0;
    std::uint64_t shrinks_at_ping = 0;
    rt.block_on([&] {
        done.add(n);
        for (long i = 0; i < n; ++i)
            weft::spawn([&, i] {
                started.fetch_add(1, std::memory_order_relaxed);
                const std::optional<long> v = in[static_cast<std::size_t>(i)].recv();
                reply.send(v ? *v + 1 : -1);
                done.done();
            }).detach();
        for (int k = 0; k < 60'000 && started.load(std::memory_order_relaxed) < n; ++k)
            weft::this_task::sleep_for(std::chrono::milliseconds(1));
        weft::this_task::sleep_for(idle);
        shrinks_at_ping = rt.stats().total().shrinks;
        const auto t0 = clk::now();
        for (long i = 0; i < n; ++i) {
            in[static_cast<std::size_t>(i)].send(i);
            const std::optional<long> r = reply.recv();
            if (!r || *r != i + 1) ++bad;
        }
        s = since(t0);
        done.wait();
    });
    if (bad) die(std::string(scenario) + ": " + std::to_string(bad) + " wrong replies");
    emit(scenario, workers, s, static_cast<std::uint64_t>(n),
         "\"tasks\":" + std::to_string(n) + ",\"idle_ms\":" + std::to_string(idle.count()) +
             ",\"replies_ok\":" + std::to_string(n) + ",\"shrinks_at_ping\":" + std::to_string(shrinks_at_ping) +
             shrink_extra(rt));
}

// sc5 / sh4: n tasks each loop { this_task::sleep_for(period); count }
// until the root, after `run`, raises a stop flag; CPU (getrusage user+sys
// of the process) from before the first spawn to the last task's end, per
// wake, and as a fraction of one core over that time (cpu_fraction: SH5).
void sc5(weft::runtime& rt, const char* scenario, int workers, long n, std::chrono::milliseconds period,
         std::chrono::milliseconds run) {
    std::atomic<bool> stop{false};
    std::atomic<long> wakes{0};
    weft::wait_group done;
    double cpu = 0, s = 0;
    rt.block_on([&] {
        const double c0 = cpu_seconds();
        const auto t0 = clk::now();
        done.add(n);
        for (long i = 0; i < n; ++i)
            weft::spawn([&] {
                long w = 0;
                for (int k = 0; k < 100'000 && !stop.load(std::memory_order_relaxed); ++k) {
                    weft::this_task::sleep_for(period);
                    ++w;
                }
                wakes.fetch_add(w, std::memory_order_relaxed);
                done.done();
            }).detach();
        weft::this_task::sleep_for(run);
        stop.store(true);
        done.wait();
        s = since(t0);
        cpu = cpu_seconds() - c0;
    });
    const long w = wakes.load();
    if (w <= 0) die(std::string(scenario) + ": no wakes");
    char extra[512];
    std::snprintf(extra, sizeof extra,
                  "\"tasks\":%ld,\"wakes\":%ld,\"cpu_s\":%.6g,\"cpu_ns_per_wake\":%.6g,\"wakes_per_s\":%.6g,"
                  "\"ideal_wakes_per_s\":%.6g,\"run_ms\":%lld,\"period_ms\":%lld,\"cpu_fraction\":%.6g",
                  n, w, cpu, cpu * 1e9 / static_cast<double>(w), static_cast<double>(w) / s,
                  static_cast<double>(n) * 1000.0 / static_cast<double>(period.count()),
                  static_cast<long long>(run.count()), static_cast<long long>(period.count()), cpu / s);
    emit(scenario, workers, s, static_cast<std::uint64_t>(n), extra + shrink_extra(rt));
}

// sc6: one task reads 1 byte at a time, each read_some() with a deadline 30 s
// ahead (io::after(30s): the deadline argument every weft socket call
// takes), from a loopback TCP socket that holds data: rounds of { the other
// end writes 65,536 bytes (write_all); 65,536 timed reads }. Only the reads
// are timed.
void sc6(weft::runtime& rt, int workers, bool quick) {
    const long chunk = 65'536;
    const long rounds = quick ? 2 : 16;
    double s = 0;
    long got = 0;
    rt.block_on([&] {
        auto l = weft::io::tcp_listener::bind(weft::io::endpoint::loopback_v4(0));
        auto w = weft::io::tcp_stream::connect(weft::io::endpoint::loopback_v4(l.local_endpoint().port()));
        auto r = l.accept();
        std::vector<std::byte> data(static_cast<std::size_t>(chunk), std::byte{0x5a});
        std::byte b[1];
        for (long k = 0; k < rounds; ++k) {
            w.write_all(data);
            const auto t0 = clk::now();
            for (long i = 0; i < chunk; ++i) {
                std::error_code ec;
                const std::size_t m = r.read_some(b, ec, weft::io::after(std::chrono::seconds(30)));
                if (ec || m != 1 || b[0] != std::byte{0x5a}) die("sc6: read failed: " + ec.message());
                ++got;
            }
            s += since(t0);
        }
    });
    emit("sc6", workers, s, static_cast<std::uint64_t>(got),
         "\"reads\":" + std::to_string(got) + ",\"deadline_s\":30,\"transport\":\"tcp loopback\","
         "\"api\":\"io::stream::read_some(buf, ec, io::after(30s))\"");
}

// ---- sc10 / sc11: issue 43, timers without a task (weft::timer) ----

// sc10: n pending callback timers, their memory, and its growth after
// re-arming every timer `rounds` times.
void sc10(weft::runtime& rt, int workers, long n, int rounds) {
    std::atomic<long> fired{0};
    long long rss0 = 0, pte0 = 0, rss1 = 0, pte1 = 0, rss2 = 0, pte2 = 0;
    long stopped = 0, was_pending = 0;
    double arm_s = 0, rearm_s = 0;
    rt.block_on([&] {
        rss0 = vm_rss_kib();
        pte0 = status_kib("VmPTE:");
        const auto t0 = clk::now();
        std::vector<weft::timer> ts;
        ts.reserve(static_cast<std::size_t>(n));
        for (long i = 0; i < n; ++i) {
            ts.emplace_back([&fired] { fired.fetch_add(1, std::memory_order_relaxed); });
            ts.back().reset(std::chrono::hours(1));
        }
        arm_s = since(t0);
        rss1 = vm_rss_kib();
        pte1 = status_kib("VmPTE:");
        const auto t1 = clk::now();
        for (int r = 1; r <= rounds; ++r)
            for (auto& t : ts)
                if (t.reset(std::chrono::hours(1) + std::chrono::seconds(r))) ++was_pending;
        rearm_s = since(t1);
        rss2 = vm_rss_kib();
        pte2 = status_kib("VmPTE:");
        for (auto& t : ts)
            if (t.stop()) ++stopped;
    });
    const long f = fired.load();
    if (f != 0 || stopped != n || was_pending != n * rounds)
        die("sc10: " + std::to_string(f) + " fired, " + std::to_string(stopped) + " of " + std::to_string(n) +
            " stopped while pending, " + std::to_string(was_pending) + " re-arms of a pending timer");
    const double dn = static_cast<double>(n);
    char extra[1024];
    std::snprintf(extra, sizeof extra,
                  "\"timers\":%ld,\"rounds\":%d,\"fired\":%ld,\"stopped\":%ld,\"rss_bytes_per_timer\":%.1f,"
                  "\"pte_bytes_per_timer\":%.2f,\"rss_growth_bytes_per_timer\":%.1f,\"pte_growth_bytes_per_timer\":%.2f,"
                  "\"rss_before_kib\":%lld,\"rss_armed_kib\":%lld,\"rss_rearmed_kib\":%lld,\"pte_before_kib\":%lld,"
                  "\"pte_armed_kib\":%lld,\"pte_rearmed_kib\":%lld,\"rearm_ns_per_reset\":%.6g,"
                  "\"api\":\"weft::timer t(f); t.reset(1h); t.reset(1h + k s); t.stop()\"",
                  n, rounds, f, stopped, static_cast<double>(rss1 - rss0) * 1024.0 / dn,
                  static_cast<double>(pte1 - pte0) * 1024.0 / dn, static_cast<double>(rss2 - rss1) * 1024.0 / dn,
                  static_cast<double>(pte2 - pte1) * 1024.0 / dn, rss0, rss1, rss2, pte0, pte1, pte2,
                  rearm_s * 1e9 / (dn * rounds));
    emit("sc10", workers, arm_s, static_cast<std::uint64_t>(n), extra);
}

// sc11: n periodic callback timers (reset_every(period)) for `run`.
void sc11(weft::runtime& rt, int workers, long n, std::chrono::milliseconds period, std::chrono::milliseconds run) {
    std::atomic<long> fires{0};
    double cpu = 0, s = 0, window = 0;
    long fires_armed = 0, fires_window = 0;
    rt.block_on([&] {
        const double c0 = cpu_seconds();
        const auto t0 = clk::now();
        std::vector<weft::timer> ts;
        ts.reserve(static_cast<std::size_t>(n));
        for (long i = 0; i < n; ++i) {
            ts.emplace_back([&fires] { fires.fetch_add(1, std::memory_order_relaxed); });
            ts.back().reset_every(period);
        }
        const auto t1 = clk::now();
        fires_armed = fires.load(std::memory_order_relaxed);
        weft::this_task::sleep_for(run);
        fires_window = fires.load(std::memory_order_relaxed) - fires_armed;
        window = since(t1);
        for (auto& t : ts) t.stop();
        ts.clear();  // the destructors wait for a callback still running on a worker
        s = since(t0);
        cpu = cpu_seconds() - c0;
    });
    const long f = fires.load();
    if (f <= 0) die("sc11: no timer fired");
    char extra[768];
    std::snprintf(extra, sizeof extra,
                  "\"timers\":%ld,\"fires\":%ld,\"cpu_s\":%.6g,\"cpu_ns_per_fire\":%.6g,\"fires_per_s\":%.6g,"
                  "\"ideal_fires_per_s\":%.6g,\"run_ms\":%lld,\"period_ms\":%lld,\"cpu_fraction\":%.6g,"
                  "\"api\":\"weft::timer t(rt, f); t.reset_every(10ms)\"",
                  n, f, cpu, cpu * 1e9 / static_cast<double>(f), static_cast<double>(fires_window) / window,
                  static_cast<double>(n) * 1000.0 / static_cast<double>(period.count()),
                  static_cast<long long>(run.count()), static_cast<long long>(period.count()), cpu / s);
    emit("sc11", workers, s, static_cast<std::uint64_t>(n), extra);
}

}  // namespace

int main(int argc, char** argv) {
    std::string scenario;
    int workers = 1;
    bool quick = false;
    long count = 1'000'000;
    bool copy = false;
    long shrink_ms = -1;  // -1: the default (runtime_options{}.shrink_idle_after)
    const char* usage = "usage: weft_runtime_weft r1|r2|r2s|r3|r3b|r4|r5|r5b|r6|r6s|r7|idle|a1|a2|a3|a4f|a4c|a4p|sc1|sc3|sc4|sc5|sc6|sc10|sc11|sh1|sh2|sh3|sh4\n"
                        "           --workers W [--quick] [--shrink-idle-after-ms MS] [--count N (sc*, sh*)]\n"
                        "           [--idle-ms MS (sc1, sc3, sc4, sh1-sh3)] [--period-ms MS] [--run-ms MS (sh4)] [--rss-guard-gib G (sc1, sc3)]\n"
                        "       weft_runtime_weft live --workers W [--count N] [--copy]\n"
                        "       weft_runtime_weft a1|a2|a3 --workers W [--quick] --variant V (one variant only)";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--workers" && i + 1 < argc)
            workers = std::atoi(argv[++i]);
        else if (a == "--count" && i + 1 < argc)
            count = scale_count = std::atol(argv[++i]);
        else if (a == "--quick")
            quick = true;
        else if (a == "--variant" && i + 1 < argc)
            only_variant = argv[++i];
        else if (a == "--copy")
            copy = true;
        else if (a == "--idle-ms" && i + 1 < argc)
            idle_ms_arg = std::atol(argv[++i]);
        else if (a == "--period-ms" && i + 1 < argc)
            period_ms_arg = std::atol(argv[++i]);
        else if (a == "--run-ms" && i + 1 < argc)
            run_ms_arg = std::atol(argv[++i]);
        else if (a == "--shrink-idle-after-ms" && i + 1 < argc)
            shrink_ms = std::atol(argv[++i]);
        else if (a == "--rss-guard-gib" && i + 1 < argc)
            rss_guard_kib = static_cast<long long>(std::atof(argv[++i]) * 1024 * 1024);
        else if (a == "r1" || a == "r2" || a == "r2s" || a == "r3" || a == "r3b" || a == "r4" || a == "r5" ||
                 a == "r5b" || a == "r6" || a == "r6s" || a == "r7" || a == "idle" || a == "live" || a == "a1" ||
                 a == "a2" || a == "a3" || a == "a4f" || a == "a4c" || a == "a4p" || a == "sc1" || a == "sc3" ||
                 a == "sc4" || a == "sc5" || a == "sc6" || a == "sc10" || a == "sc11" || a == "sh1" || a == "sh2" || a == "sh3" || a == "sh4")
            scenario = a;
        else
            die(usage);
    }
    if (scenario.empty() || workers < 1 || count < 1 || period_ms_arg == 0) die(usage);
    weft::runtime_options opts{.workers = static_cast<unsigned>(workers)};
    if (shrink_ms >= 0) opts.shrink_idle_after = std::chrono::milliseconds(shrink_ms);
    shrink_ms_used = static_cast<long long>(opts.shrink_idle_after.count());
    weft::runtime rt(opts);
    if (scenario == "r1") r1(rt, workers, quick);
    if (scenario == "r2") r2(rt, workers, quick);
    if (scenario == "r3") r3(rt, workers, quick);
    if (scenario == "r3b") r3b(rt, workers, quick);
    if (scenario == "r4") r4(rt, workers, quick);
    if (scenario == "r5") throughput(rt, "r5", workers, 1, 1, quick);
    if (scenario == "r5b") throughput(rt, "r5b", workers, 4, 4, quick);
    if (scenario == "r2s") r2s(rt, workers, quick);
    if (scenario == "r6") mutex_bench(rt, "r6", quick ? 100 : 1000, quick ? 100 : 1000, workers);
    if (scenario == "r6s") mutex_bench(rt, "r6s", 4, quick ? 2'500 : 250'000, workers);
    if (scenario == "r7") r7(rt, workers, quick);
    if (scenario == "idle") idle(rt, workers, quick);
    if (scenario == "live") live(rt, workers, count, copy);
    // The scale scenarios' own sizes (scale_report.py always passes them).
    using ms = std::chrono::milliseconds;
    if (scenario == "sc1")
        sc_idle(rt, "sc1", scale_count ? scale_count : (quick ? 100'000 : 1'000'000), workers, ms_or(idle_ms_arg, 300), false);
    if (scenario == "sc3")
        sc_idle(rt, "sc3", scale_count ? scale_count : (quick ? 200'000 : 10'000'000), workers, ms_or(idle_ms_arg, 300), false);
    if (scenario == "sc4") sc4(rt, "sc4", workers, scale_count ? scale_count : 10'000, ms_or(idle_ms_arg, 300));
    if (scenario == "sc5")
        sc5(rt, "sc5", workers, scale_count ? scale_count : (quick ? 10'000 : 100'000), ms(10), ms(quick ? 500 : 2000));
    if (scenario == "sh1")
        sc_idle(rt, "sh1", scale_count ? scale_count : (quick ? 20'000 : 1'000'000), workers, ms_or(idle_ms_arg, 0), true);
    if (scenario == "sh2")
        sc_idle(rt, "sh2", scale_count ? scale_count : (quick ? 20'000 : 1'000'000), workers,
                ms_or(idle_ms_arg, quick ? 200 : 2000), true);
    if (scenario == "sh3") sc4(rt, "sh3", workers, scale_count ? scale_count : 10'000, ms_or(idle_ms_arg, 300));
    if (scenario == "sh4")
        sc5(rt, "sh4", workers, scale_count ? scale_count : 1'000, ms_or(period_ms_arg, 1000),
            ms_or(run_ms_arg, quick ? 1000 : 10'000));
    if (scenario == "sc6") sc6(rt, workers, quick);
    if (scenario == "sc10") sc10(rt, workers, scale_count ? scale_count : (quick ? 10'000 : 100'000), 10);
    if (scenario == "sc11")
        sc11(rt, workers, scale_count ? scale_count : (quick ? 10'000 : 100'000), ms(10), ms(quick ? 500 : 2000));
#ifdef WEFT_BENCH_ASYNC
    if (scenario == "a1") a_pipeline(rt, "a1", 0, workers, quick);
    if (scenario == "a2") a_pipeline(rt, "a2", 1024, workers, quick);
    if (scenario == "a3") a3(rt, workers, quick);
    if (scenario == "a4f") a4(rt, "a4f", 0, workers, quick);
    if (scenario == "a4c") a4(rt, "a4c", 1, workers, quick);
    if (scenario == "a4p") a4(rt, "a4p", 2, workers, quick);
#else
    if (scenario[0] == 'a') die("this weft has no weft/async.hpp (L7): no interop scenarios");
#endif
    return 0;
}
