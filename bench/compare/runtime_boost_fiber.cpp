// weft_runtime_boost_fiber: the Boost.Fiber peer of the runtime section of
// the peer report (bench/compare/runtime_report.py documents the protocol).
//
//   weft_runtime_boost_fiber r1|r2|r2s|r3|r3b|r4|r5|r5b|r6|r6s|r7|idle|sc1|sc5 --workers 1|2 [--quick]
//                            [--stack BYTES] [--suspend] [--count N] [--idle-ms MS (sc1)]
//
// sc1 and sc5 are the scale section's (bench/compare/scale_report.py): sc1
// fibers blocked on one condition_variable_any (RSS and VmPTE per fiber after
// --idle-ms, default 300 ms, idle), sc5 fibers looping this_fiber::sleep_for(10 ms) (CPU per wake).
//
// Prints exactly one line of JSON on stdout:
//   {"scenario":"r1","workers":1,"seconds":...,"ops":...,"per_op_ns":...,"peak_rss_kib":...,"extra":{...}}
// (peak_rss_kib: VmHWM of /proc/self/status after the scenario) and exits
// non-zero (message on stderr) if a result does not verify (1), on a usage
// error (2), or when a stack cannot be allocated (3).
//
// Runtime: --workers 1 is Boost.Fiber's default scheduler, round_robin, on the
// main thread. --workers 2 is boost::fibers::algo::work_stealing over two
// threads: the main thread and one helper thread; both install
// work_stealing(2) (its constructor waits until both have), and the helper's
// main fiber then waits on a fiber condition variable until the scenario is
// over, so its dispatcher runs the fibers it steals. work_stealing's
// `suspend` argument is left at its default (false: an idle thread spins
// looking for work); --suspend passes true (idle threads sleep on a condition
// variable), for comparison only.
//
// Stacks: without --stack, Boost.Fiber's default allocator
// (boost::fibers::default_stack = boost::context::fixedsize_stack:
// std::malloc of stack_traits::default_size(), 128 KiB in Boost 1.74, no
// guard page). --stack BYTES uses a fixedsize_stack of that size instead.
// The report runs this program with --stack 8192 (two pages, the size
// Boost.Fiber's own performance/fiber/skynet_*.cpp use), because the default
// cannot run R1 and R2 within the report's memory limit: with launch::post
// every fiber of the tree (R1) or of the batch (R2) exists before the first
// one finishes, and at 128 KiB each is a separate mmap (above malloc's mmap
// threshold) of which 3-4 pages get touched: ~16 KiB (R1) and ~12 KiB (R2)
// resident per fiber, i.e. ~17 GiB and ~11 GiB at W=1 (measured at 10,000
// leaves / tasks; the full runs were stopped at 8 GiB, R2 at W=2 too; R1
// at W=2 fits, ~3 GiB, as work_stealing's LIFO local queue runs the tree
// more depth-first).
// Smaller stacks come from the heap and cost about their size. A fiber
// here touches 5.8-6.6 KB of its stack whatever it does (pattern-filled
// stacks, every scenario, both worker counts), so 8 KiB is the smallest that
// works, with ~1.5 KB to spare; with it R1 at W=1 peaks at ~8.0 GiB.
// Not for the channels and the mutex, though: at one worker r4, r5 and r5b
// crash on 8 KiB stacks (fine on 16 KiB), so r4-r6 and r6s, which start at
// most 1,000 fibers, run on at least 64 KiB stacks whatever --stack says.
//
// Tasks and results: every task is a boost::fibers::fiber, launched with the
// default policy (launch::post: queued, the spawner runs on), and joined with
// fiber::join(); a task's result travels back through a variable of its
// spawner (the spawner reads it after join()). No futures anywhere.
//
//   r1   skynet: a 10-ary tree of fibers, 1,000,000 leaves (quick: 10,000);
//        an inner fiber starts 10 children, joins them and sums their results;
//        leaf i returns i; the root is a fiber too. ops = all fibers
//        (1,111,111); extra.sum is checked.
//   r2   spawn+join: the main fiber starts 100,000 fibers (quick: 10,000),
//        each storing its index in its result slot, then joins them in order
//        and sums the slots. ops = fibers.
//   r2s  spawn+join, sequential: the main fiber, 1,000,000 times (quick:
//        10,000), starts a fiber that stores i in the main fiber's result
//        variable, joins it at once and adds the variable. ops = fibers.
//        Only one such fiber lives at a time, so its stack (a
//        fixedsize_stack: a malloc and a free per fiber) is --stack's size.
//   r3   yield ring: 1,000 fibers (quick: 100) each calling
//        boost::this_fiber::yield() 1,000 times (quick: 100); the main fiber
//        joins them. ops = total yields; the time includes starting and
//        joining the fibers.
//   r3b  ping-pong hog: a hog fiber loops {64 xorshift steps; count;
//        yield()} until stopped, while the main fiber and a partner fiber
//        exchange a value over two boost::fibers::unbuffered_channel<int>
//        1,000,000 times (quick: 10,000). ops = exchanges (round trips);
//        extra.hog_per_exchange = hog iterations during the exchanges /
//        exchanges.
//   r4   channel ping-pong: two fibers exchange a value over two
//        boost::fibers::unbuffered_channel<uint64_t> (one each way), 500,000
//        round trips (quick: 5,000). ops = messages (a push+pop each).
//   r5   buffered channel throughput: one producer fiber, one consumer
//        fiber, a buffered_channel of capacity 1,024 (a power of 2, as
//        Boost requires; its ring keeps a slot free, so 1,023 items fit),
//        4,000,000 items (quick: 40,000). ops = items; the sum is checked.
//   r5b  the same with four producers and four consumers.
//   r6   mutex contention: 1,000 fibers (quick: 100) each lock a
//        boost::fibers::mutex, increment a counter, unlock, 1,000 times
//        (quick: 100). ops = lock/unlock pairs.
//   r6s  the same with 4 fibers x 250,000 (quick: 2,500).
//   r7   timers: 1,000,000 fibers (quick: 10,000) each
//        boost::this_fiber::sleep_for a fixed-seed random 10-100 ms and
//        compare steady_clock::now() on waking with its deadline; extra
//        early / over_ms / cpu_us_per_task (an early wake exits 1 after the
//        line is printed).
//   Boost 1.74's channels have hang bugs fixed later (Boost.Fiber issues
//   254, 256, 258); the driver's per-run timeout reports a hang as such.
//   idle nothing to do: the main fiber calls boost::this_fiber::sleep_for(2 s)
//        (quick: 0.2 s) with the scheduler(s) installed; extra.cpu_percent =
//        (user+sys CPU of the process over the sleep) / wall time * 100.
//
// Build: g++ -std=c++20 -O2 -g -DNDEBUG runtime_boost_fiber.cpp
//            -lboost_fiber -lboost_context -pthread
#include <boost/context/stack_traits.hpp>
#include <boost/version.hpp>
#include <boost/fiber/algo/round_robin.hpp>
#include <boost/fiber/algo/work_stealing.hpp>
#include <boost/fiber/all.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

namespace bf = boost::fibers;
using clk = std::chrono::steady_clock;

std::size_t g_stack = 0;  // 0: Boost.Fiber's default allocator
constexpr std::size_t kFewFibersStack = 64 * 1024;  // the least r4-r6 run with (see main)
constexpr std::size_t kSc1Stack = 12 * 1024;        // the least sc1 runs with (see main)

[[noreturn]] void die(int code, const std::string& msg) {
    std::fprintf(stderr, "weft_runtime_boost_fiber: %s\n", msg.c_str());
    std::fflush(stderr);
    std::_Exit(code);
}

// Starts a fiber (launch::post). A failed stack allocation ends the process
// with a message (exit 3) instead of std::terminate from inside a fiber.
template <class Fn>
bf::fiber spawn(Fn&& fn) {
    try {
        if (g_stack != 0) {
            return bf::fiber(std::allocator_arg, bf::fixedsize_stack(g_stack), std::forward<Fn>(fn));
        }
        return bf::fiber(std::forward<Fn>(fn));
    } catch (const std::bad_alloc&) {
        die(3, "stack allocation failed (std::bad_alloc)");
    } catch (const std::exception& e) {
        die(3, std::string("cannot start a fiber: ") + e.what());
    }
}

// The peak resident set size of this process image (VmHWM, KiB), or -1.
// Unlike getrusage's ru_maxrss it does not include what the parent had
// resident when it forked this process.
long long vm_hwm_kib() {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    if (f == nullptr) {
        return -1;
    }
    char line[256];
    long long v = -1;
    while (std::fgets(line, sizeof line, f) != nullptr) {
        if (std::strncmp(line, "VmHWM:", 6) == 0) {
            v = std::strtoll(line + 6, nullptr, 10);
            break;
        }
    }
    std::fclose(f);
    return v;
}

std::string g_runtime;  // extra.runtime: Boost version, algorithm, stack

void emit(const char* scenario, int workers, double seconds, std::uint64_t ops, const std::string& extra0) {
    std::string extra = "\"runtime\":\"" + g_runtime + "\"" + (extra0.empty() ? "" : ",") + extra0;
    char per[64];
    if (ops > 0) {
        std::snprintf(per, sizeof per, "%.6g", seconds * 1e9 / static_cast<double>(ops));
    } else {
        std::snprintf(per, sizeof per, "null");
    }
    std::printf("{\"scenario\":\"%s\",\"workers\":%d,\"seconds\":%.6g,\"ops\":%" PRIu64
                ",\"per_op_ns\":%s,\"peak_rss_kib\":%lld,\"extra\":{%s}}\n",
                scenario, workers, seconds, ops, per, vm_hwm_kib(), extra.c_str());
    std::fflush(stdout);
}

double since(clk::time_point t0) { return std::chrono::duration<double>(clk::now() - t0).count(); }

// ---- the runtime: 1 worker (round_robin) or 2 (work_stealing) ------------------

class Runtime {
public:
    Runtime(int workers, bool suspend) : workers_(workers) {
        if (workers == 1) {
            bf::use_scheduling_algorithm<bf::algo::round_robin>();  // the default, made explicit
            return;
        }
        helper_ = std::thread([this, workers, suspend] {
            bf::use_scheduling_algorithm<bf::algo::work_stealing>(workers, suspend);
            std::unique_lock<bf::mutex> lk(mtx_);
            cnd_.wait(lk, [this] { return done_; });
        });
        bf::use_scheduling_algorithm<bf::algo::work_stealing>(workers, suspend);
    }
    ~Runtime() {
        if (workers_ == 1) {
            return;
        }
        {
            std::unique_lock<bf::mutex> lk(mtx_);
            done_ = true;
        }
        cnd_.notify_all();
        helper_.join();
    }
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;

private:
    int workers_;
    std::thread helper_;
    bf::mutex mtx_;
    bf::condition_variable_any cnd_;
    bool done_ = false;
};

// ---- r1: skynet -------------------------------------------------------------------

void skynet(std::uint64_t num, std::uint64_t size, std::uint64_t& out) {
    if (size == 1) {
        out = num;
        return;
    }
    size /= 10;
    std::uint64_t res[10];
    bf::fiber kids[10];
    for (std::uint64_t i = 0; i < 10; ++i) {
        kids[i] = spawn([num, i, size, &res] { skynet(num + i * size, size, res[i]); });
    }
    std::uint64_t sum = 0;
    for (std::uint64_t i = 0; i < 10; ++i) {
        kids[i].join();
        sum += res[i];
    }
    out = sum;
}

void r1(int workers, bool quick) {
    const std::uint64_t leaves = quick ? 10'000 : 1'000'000;
    std::uint64_t tasks = 0;
    for (std::uint64_t n = leaves; n >= 1; n /= 10) {
        tasks += n;
    }
    std::uint64_t sum = 0;
    auto t0 = clk::now();
    bf::fiber root = spawn([leaves, &sum] { skynet(0, leaves, sum); });
    root.join();
    double s = since(t0);
    if (sum != leaves * (leaves - 1) / 2) {
        die(1, "r1: skynet sum is wrong");
    }
    emit("r1", workers, s, tasks,
         "\"sum\":" + std::to_string(sum) + ",\"leaves\":" + std::to_string(leaves));
}

// ---- r2: spawn + join ---------------------------------------------------------------

void r2(int workers, bool quick) {
    const std::size_t n = quick ? 10'000 : 100'000;
    std::vector<std::uint64_t> slot(n, ~std::uint64_t{0});
    std::vector<bf::fiber> fibers(n);
    auto t0 = clk::now();
    for (std::size_t i = 0; i < n; ++i) {
        fibers[i] = spawn([i, &slot] { slot[i] = i; });
    }
    for (auto& f : fibers) {
        f.join();
    }
    double s = since(t0);
    std::uint64_t sum = 0;
    for (auto v : slot) {
        sum += v;
    }
    if (sum != std::uint64_t{n} * (n - 1) / 2) {
        die(1, "r2: sum is wrong");
    }
    emit("r2", workers, s, n, "\"sum\":" + std::to_string(sum));
}

// ---- r2s: spawn + join, sequential --------------------------------------------------

void r2s(int workers, bool quick) {
    const std::uint64_t n = quick ? 10'000 : 1'000'000;
    std::uint64_t sum = 0;
    std::uint64_t result = 0;
    auto t0 = clk::now();
    for (std::uint64_t i = 0; i < n; ++i) {
        bf::fiber f = spawn([i, &result] { result = i; });
        f.join();
        sum += result;
    }
    double s = since(t0);
    if (sum != n * (n - 1) / 2) {
        die(1, "r2s: sum is wrong");
    }
    emit("r2s", workers, s, n, "\"sum\":" + std::to_string(sum));
}

// ---- r3: yield ring ------------------------------------------------------------------

void r3(int workers, bool quick) {
    const int tasks = quick ? 100 : 1000;
    const int yields = quick ? 100 : 1000;
    std::vector<std::uint64_t> done(tasks, 0);
    std::vector<bf::fiber> fibers(tasks);
    auto t0 = clk::now();
    for (int i = 0; i < tasks; ++i) {
        fibers[i] = spawn([i, yields, &done] {
            int k = 0;
            for (; k < yields; ++k) {
                boost::this_fiber::yield();
            }
            done[i] = k;
        });
    }
    for (auto& f : fibers) {
        f.join();
    }
    double s = since(t0);
    std::uint64_t total = 0;
    for (auto v : done) {
        total += v;
    }
    if (total != std::uint64_t(tasks) * yields) {
        die(1, "r3: wrong number of yields");
    }
    emit("r3", workers, s, total,
         "\"tasks\":" + std::to_string(tasks) + ",\"yields_each\":" + std::to_string(yields));
}

// ---- r3b: ping-pong with a hog ----------------------------------------------------------

std::atomic<std::uint64_t> g_hog_sink{0};

void r3b(int workers, bool quick) {
    const int n = quick ? 10'000 : 1'000'000;
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> hog_iters{0};
    bf::fiber hog = spawn([&] {
        std::uint64_t x = 88172645463325252ULL, it = 0;
        while (!stop.load(std::memory_order_relaxed)) {
            for (int k = 0; k < 64; ++k) {  // the little work: 64 xorshift64 steps
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
            }
            hog_iters.store(++it, std::memory_order_relaxed);
            boost::this_fiber::yield();
        }
        g_hog_sink.store(x, std::memory_order_relaxed);
    });
    bf::unbuffered_channel<int> ping, pong;
    bf::fiber partner = spawn([&] {
        for (int v; ping.pop(v) == bf::channel_op_status::success;) {
            pong.push(v + 1);
        }
    });
    std::uint64_t h0 = hog_iters.load(std::memory_order_relaxed);
    std::int64_t sum = 0;
    auto t0 = clk::now();
    for (int i = 0; i < n; ++i) {
        ping.push(i);
        int v = 0;
        if (pong.pop(v) != bf::channel_op_status::success) {
            die(1, "r3b: pong channel closed");
        }
        sum += v;
    }
    double s = since(t0);
    std::uint64_t h = hog_iters.load(std::memory_order_relaxed) - h0;
    stop.store(true, std::memory_order_relaxed);
    ping.close();
    partner.join();
    hog.join();
    if (sum != std::int64_t{n} * (n + 1) / 2) {
        die(1, "r3b: sum is wrong");
    }
    char extra[128];
    std::snprintf(extra, sizeof extra, "\"hog_iters\":%" PRIu64 ",\"hog_per_exchange\":%.6g", h,
                  static_cast<double>(h) / n);
    emit("r3b", workers, s, n, extra);
}

// ---- r4: channel ping-pong --------------------------------------------------------------

void r4(int workers, bool quick) {
    const std::uint64_t msgs = quick ? 10'000 : 1'000'000;
    const std::uint64_t trips = msgs / 2;
    bf::unbuffered_channel<std::uint64_t> ping, pong;
    std::uint64_t sum = 0;
    auto t0 = clk::now();
    bf::fiber pinger = spawn([&] {
        for (std::uint64_t i = 0; i < trips; ++i) {
            if (ping.push(i) != bf::channel_op_status::success) {
                die(1, "r4: ping channel closed");
            }
            std::uint64_t v = 0;
            if (pong.pop(v) != bf::channel_op_status::success) {
                die(1, "r4: pong channel closed");
            }
            sum += v;
        }
        ping.close();
    });
    bf::fiber ponger = spawn([&] {
        for (std::uint64_t v; ping.pop(v) == bf::channel_op_status::success;) {
            if (pong.push(v + 1) != bf::channel_op_status::success) {
                die(1, "r4: pong channel closed");
            }
        }
    });
    pinger.join();
    ponger.join();
    double s = since(t0);
    if (sum != trips * (trips + 1) / 2) {
        die(1, "r4: sum is wrong");
    }
    emit("r4", workers, s, msgs, "\"sum\":" + std::to_string(sum) + ",\"round_trips\":" + std::to_string(trips));
}

// ---- r5 / r5b: buffered channel throughput ----------------------------------------------

// p producers and c consumers over one buffered_channel of capacity 1,024
// (Boost's ring keeps one slot free: 1,023 items fit). Producer k sends k,
// k+p, k+2p, ... below n; each consumer sums what it pops until the channel
// is closed, which the main fiber does after joining every producer.
void throughput(const char* scenario, int workers, int p, int c, bool quick) {
    const std::uint64_t n = quick ? 40'000 : 4'000'000;
    bf::buffered_channel<std::uint64_t> ch(1024);
    std::vector<std::uint64_t> sums(static_cast<std::size_t>(c), 0);
    std::vector<bf::fiber> producers, consumers;
    auto t0 = clk::now();
    for (int k = 0; k < c; ++k) {
        consumers.push_back(spawn([&ch, &sums, k] {
            std::uint64_t s = 0;
            for (std::uint64_t v; ch.pop(v) == bf::channel_op_status::success;) {
                s += v;
            }
            sums[static_cast<std::size_t>(k)] = s;
        }));
    }
    for (int k = 0; k < p; ++k) {
        producers.push_back(spawn([&ch, k, p, n] {
            for (std::uint64_t v = static_cast<std::uint64_t>(k); v < n; v += static_cast<std::uint64_t>(p)) {
                if (ch.push(v) != bf::channel_op_status::success) {
                    die(1, "throughput: channel closed early");
                }
            }
        }));
    }
    for (auto& f : producers) {
        f.join();
    }
    ch.close();
    for (auto& f : consumers) {
        f.join();
    }
    double s = since(t0);
    std::uint64_t sum = 0;
    for (auto v : sums) {
        sum += v;
    }
    if (sum != n * (n - 1) / 2) {
        die(1, std::string(scenario) + ": sum is wrong");
    }
    emit(scenario, workers, s, n,
         "\"sum\":" + std::to_string(sum) + ",\"producers\":" + std::to_string(p) + ",\"consumers\":" +
             std::to_string(c) + ",\"capacity\":1024");
}

// ---- r6, r6s: mutex contention ---------------------------------------------------------

void mutex_bench(const char* scenario, int workers, int tasks, int each) {
    bf::mutex mtx;
    std::uint64_t counter = 0;
    std::vector<bf::fiber> fibers(static_cast<std::size_t>(tasks));
    auto t0 = clk::now();
    for (auto& f : fibers) {
        f = spawn([&mtx, &counter, each] {
            for (int k = 0; k < each; ++k) {
                std::lock_guard<bf::mutex> g(mtx);
                ++counter;
            }
        });
    }
    for (auto& f : fibers) {
        f.join();
    }
    double s = since(t0);
    const std::uint64_t want = static_cast<std::uint64_t>(tasks) * static_cast<std::uint64_t>(each);
    if (counter != want) {
        die(1, std::string(scenario) + ": counter is wrong");
    }
    emit(scenario, workers, s, want,
         "\"counter\":" + std::to_string(counter) + ",\"tasks\":" + std::to_string(tasks) + ",\"locks_each\":" +
             std::to_string(each));
}

// ---- r7: timers -----------------------------------------------------------------------------

std::pair<double, double> cpu_seconds();

// Task i's sleep in microseconds, 10,000..100,000: splitmix64 of a fixed
// seed plus i (the same sequence in every candidate).
std::int64_t sleep_us(std::uint64_t i) {
    std::uint64_t z = 0x5eed000000000007ULL + i * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return 10'000 + static_cast<std::int64_t>(z % 90'001);
}

void r7(int workers, bool quick) {
    const std::size_t n = quick ? 10'000 : 1'000'000;
    std::vector<std::int64_t> late(n, 0);  // ns woken after the deadline (negative: early)
    std::int64_t max_us = 0;
    for (std::size_t i = 0; i < n; ++i) {
        max_us = std::max(max_us, sleep_us(i));
    }
    std::vector<bf::fiber> fibers(n);
    auto [u0, s0] = cpu_seconds();
    auto t0 = clk::now();
    for (std::size_t i = 0; i < n; ++i) {
        fibers[i] = spawn([i, &late] {
            const auto d = std::chrono::microseconds(sleep_us(i));
            const auto deadline = clk::now() + d;
            boost::this_fiber::sleep_for(d);
            late[i] = std::chrono::duration_cast<std::chrono::nanoseconds>(clk::now() - deadline).count();
        });
    }
    for (auto& f : fibers) {
        f.join();
    }
    double s = since(t0);
    auto [u1, s1] = cpu_seconds();
    std::uint64_t early = 0;
    std::int64_t max_late = 0, first_early = 0;
    double sum_late = 0;
    for (auto l : late) {
        if (l < 0 && early++ == 0) {
            first_early = l;
        }
        max_late = std::max(max_late, l);
        sum_late += static_cast<double>(l);
    }
    const double cpu = (u1 - u0) + (s1 - s0);
    char extra[512];
    std::snprintf(extra, sizeof extra,
                  "\"early\":%" PRIu64 ",\"max_sleep_ms\":%.6g,\"over_ms\":%.6g,\"cpu_us_per_task\":%.6g,"
                  "\"user_s\":%.6g,\"sys_s\":%.6g,\"late_ms_max\":%.6g,\"late_ms_mean\":%.6g",
                  early, static_cast<double>(max_us) / 1e3, s * 1e3 - static_cast<double>(max_us) / 1e3,
                  cpu * 1e6 / static_cast<double>(n), u1 - u0, s1 - s0, static_cast<double>(max_late) / 1e6,
                  sum_late / static_cast<double>(n) / 1e6);
    emit("r7", workers, s, n, extra);
    if (early > 0) {
        die(1, "r7: " + std::to_string(early) + " timers fired early (the first " + std::to_string(-first_early) +
                   " ns before its deadline)");
    }
}

// ---- idle ------------------------------------------------------------------------------------

std::pair<double, double> cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    auto tv = [](timeval t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
    return {tv(ru.ru_utime), tv(ru.ru_stime)};
}

void idle(int workers, bool quick) {
    auto d = std::chrono::milliseconds(quick ? 200 : 2000);
    auto [u0, s0] = cpu_seconds();
    auto t0 = clk::now();
    boost::this_fiber::sleep_for(d);
    double s = since(t0);
    auto [u1, s1] = cpu_seconds();
    double cpu = (u1 - u0) + (s1 - s0);
    char extra[160];
    std::snprintf(extra, sizeof extra, "\"cpu_percent\":%.6g,\"user_s\":%.6g,\"sys_s\":%.6g", cpu / s * 100,
                  u1 - u0, s1 - s0);
    emit("idle", workers, s, 0, extra);
}


// ---- sc1 / sc5: the scale scenarios of issue 26 (bench/compare/scale_report.py) ----

long long status_kib(const char* field) {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    if (f == nullptr) {
        return -1;
    }
    char line[256];
    long long v = -1;
    const std::size_t n = std::strlen(field);
    while (std::fgets(line, sizeof line, f) != nullptr) {
        if (std::strncmp(line, field, n) == 0) {
            v = std::strtoll(line + n, nullptr, 10);
        }
    }
    std::fclose(f);
    return v;
}

long g_count = 0;  // --count (0: the scenario's own)
long g_idle_ms = 300;  // --idle-ms (sc1)

// sc1: n detached fibers each waiting on one condition_variable_any (a
// flag under a fiber mutex); after all have started and --idle-ms (300) idle, VmRSS and
// VmPTE growth per fiber; then notify_all and a counter + condition wait for
// their ends.
void sc1(int workers, bool quick) {
    const long n = g_count > 0 ? g_count : (quick ? 100'000 : 1'000'000);
    const auto idle = std::chrono::milliseconds(g_idle_ms);
    bf::mutex m;
    bf::condition_variable_any cv, done_cv;
    bool go = false;
    long started = 0, woke = 0;
    const long long rss0 = status_kib("VmRSS:"), pte0 = status_kib("VmPTE:");
    const auto t0 = clk::now();
    for (long i = 0; i < n; ++i) {
        spawn([&] {
            std::unique_lock<bf::mutex> lk(m);
            ++started;
            cv.wait(lk, [&] { return go; });
            if (++woke == n) {
                done_cv.notify_all();
            }
        }).detach();
        if ((i & 0xffff) == 0xffff) {
            boost::this_fiber::yield();
        }
    }
    const double spawn_s = since(t0);
    for (int k = 0; k < 600'000; ++k) {
        {
            std::unique_lock<bf::mutex> lk(m);
            if (started == n) {
                break;
            }
        }
        boost::this_fiber::sleep_for(std::chrono::milliseconds(1));
    }
    boost::this_fiber::sleep_for(idle);
    const long long rss1 = status_kib("VmRSS:"), pte1 = status_kib("VmPTE:");
    {
        std::unique_lock<bf::mutex> lk(m);
        go = true;
    }
    cv.notify_all();
    {
        std::unique_lock<bf::mutex> lk(m);
        done_cv.wait(lk, [&] { return woke == n; });
    }
    const double s = since(t0);
    char extra[512];
    std::snprintf(extra, sizeof extra,
                  "\"tasks\":%ld,\"woke\":%ld,\"idle_ms\":%d,\"rss_bytes_per_task\":%.1f,\"pte_bytes_per_task\":%.2f,"
                  "\"rss_before_kib\":%lld,\"rss_idle_kib\":%lld,\"pte_before_kib\":%lld,\"pte_idle_kib\":%lld,"
                  "\"spawn_ms\":%.6g",
                  n, woke, static_cast<int>(idle.count()), static_cast<double>(rss1 - rss0) * 1024.0 / static_cast<double>(n),
                  static_cast<double>(pte1 - pte0) * 1024.0 / static_cast<double>(n), rss0, rss1, pte0, pte1, spawn_s * 1e3);
    emit("sc1", workers, s, static_cast<std::uint64_t>(n), extra);
}

// sc5: n fibers loop { this_fiber::sleep_for(10 ms) } until a stop flag
// raised after `run`; CPU (getrusage user+sys) per wake and wakes/s.
void sc5(int workers, bool quick) {
    const long n = g_count > 0 ? g_count : (quick ? 10'000 : 100'000);
    const auto run = std::chrono::milliseconds(quick ? 500 : 2000);
    std::atomic<bool> stop{false};
    std::atomic<long> wakes{0};
    std::vector<bf::fiber> fibers(static_cast<std::size_t>(n));
    auto [u0, s0] = cpu_seconds();
    const auto t0 = clk::now();
    for (auto& f : fibers) {
        f = spawn([&] {
            long w = 0;
            for (int k = 0; k < 100'000 && !stop.load(std::memory_order_relaxed); ++k) {
                boost::this_fiber::sleep_for(std::chrono::milliseconds(10));
                ++w;
            }
            wakes.fetch_add(w, std::memory_order_relaxed);
        });
    }
    boost::this_fiber::sleep_for(run);
    stop.store(true);
    for (auto& f : fibers) {
        f.join();
    }
    const double s = since(t0);
    auto [u1, s1] = cpu_seconds();
    const double cpu = (u1 - u0) + (s1 - s0);
    const long w = wakes.load();
    if (w <= 0) {
        die(1, "sc5: no wakes");
    }
    char extra[256];
    std::snprintf(extra, sizeof extra,
                  "\"tasks\":%ld,\"wakes\":%ld,\"cpu_s\":%.6g,\"cpu_ns_per_wake\":%.6g,\"wakes_per_s\":%.6g,"
                  "\"ideal_wakes_per_s\":%.6g,\"run_ms\":%d",
                  n, w, cpu, cpu * 1e9 / static_cast<double>(w), static_cast<double>(w) / s, static_cast<double>(n) * 100.0,
                  static_cast<int>(run.count()));
    emit("sc5", workers, s, static_cast<std::uint64_t>(n), extra);
}

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr,
                 "weft_runtime_boost_fiber: %s\nusage: weft_runtime_boost_fiber r1|r2|r2s|r3|r3b|r4|r5|r5b|r6|r6s|r7|idle|sc1|sc5 --workers 1|2 "
                 "[--quick] [--stack BYTES] [--suspend] [--count N (sc1, sc5)] [--idle-ms MS (sc1)]\n",
                 why);
    std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
    std::string scenario;
    int workers = 0;
    bool quick = false, suspend = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--quick") {
            quick = true;
        } else if (a == "--suspend") {
            suspend = true;
        } else if (a == "--workers" && i + 1 < argc) {
            workers = std::atoi(argv[++i]);
        } else if (a == "--stack" && i + 1 < argc) {
            g_stack = std::strtoull(argv[++i], nullptr, 0);
        } else if (a == "--count" && i + 1 < argc) {
            g_count = std::atol(argv[++i]);
        } else if (a == "--idle-ms" && i + 1 < argc) {
            g_idle_ms = std::atol(argv[++i]);
        } else if (a == "r1" || a == "r2" || a == "r2s" || a == "r3" || a == "r3b" || a == "r4" || a == "r5" ||
                   a == "r5b" || a == "r6" || a == "r6s" || a == "r7" || a == "idle" || a == "sc1" || a == "sc5") {
            scenario = a;
        } else {
            usage(("unknown argument '" + a + "'").c_str());
        }
    }
    if (scenario.empty()) {
        usage("no scenario");
    }
    if (workers != 1 && workers != 2) {
        usage("--workers must be 1 or 2");
    }
    // 8 KiB is too small for the channel and mutex scenarios at one worker
    // (r4, r5 and r5b crashed with it: SIGSEGV / "free(): invalid pointer",
    // fine at 16 KiB); they start at most 1,000 fibers, so they get at least
    // 64 KiB whatever --stack says (extra.runtime shows the size used).
    if ((scenario == "r4" || scenario == "r5" || scenario == "r5b" || scenario == "r6" || scenario == "r6s") &&
        g_stack != 0 &&
        g_stack < kFewFibersStack) {
        g_stack = kFewFibersStack;
    }
    // sc1 (fibers blocked on a condition variable) crashed on 8 KiB stacks
    // ("free(): invalid size", 100,000 fibers, one worker); 12 KiB is the
    // smallest tried that works, so sc1 gets at least that.
    if (scenario == "sc1" && g_stack != 0 && g_stack < kSc1Stack) {
        g_stack = kSc1Stack;
    }
    g_runtime = "Boost " + std::to_string(BOOST_VERSION / 100000) + "." + std::to_string(BOOST_VERSION / 100 % 1000) +
                (workers == 1 ? " round_robin" : suspend ? " work_stealing(2, suspend)" : " work_stealing(2)") +
                ", " + std::to_string((g_stack != 0 ? g_stack : boost::context::stack_traits::default_size()) / 1024) +
                " KiB fixedsize_stack" + (g_stack != 0 ? "" : " (default)");
    try {
        Runtime rt(workers, suspend);
        if (scenario == "r1") {
            r1(workers, quick);
        } else if (scenario == "r2") {
            r2(workers, quick);
        } else if (scenario == "r3") {
            r3(workers, quick);
        } else if (scenario == "r3b") {
            r3b(workers, quick);
        } else if (scenario == "r4") {
            r4(workers, quick);
        } else if (scenario == "r5") {
            throughput("r5", workers, 1, 1, quick);
        } else if (scenario == "r5b") {
            throughput("r5b", workers, 4, 4, quick);
        } else if (scenario == "r2s") {
            r2s(workers, quick);
        } else if (scenario == "r6") {
            mutex_bench("r6", workers, quick ? 100 : 1000, quick ? 100 : 1000);
        } else if (scenario == "r6s") {
            mutex_bench("r6s", workers, 4, quick ? 2'500 : 250'000);
        } else if (scenario == "r7") {
            r7(workers, quick);
        } else if (scenario == "sc1") {
            sc1(workers, quick);
        } else if (scenario == "sc5") {
            sc5(workers, quick);
        } else {
            idle(workers, quick);
        }
    } catch (const std::exception& e) {
        die(1, e.what());
    }
    return 0;
}
