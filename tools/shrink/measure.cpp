// measure.cpp: figures for issue 26 ("idle tasks give their stack back"),
// not a benchmark (bench/ has those):
//
//   measure rss N [on|off]      N tasks parked on one event: resident memory
//                               (smaps_rollup) per task parked, and after runtime::shrink_idle()
//   measure yield N on|off      N yields of one task (workers = 0)
//   measure pingpong N on|off   N round trips over two unbuffered channels
//   measure spawn N on|off      N spawns and joins
//   measure scatter N           N tasks on events of their own, all shrunk, woken in a
//                               shuffled order: mapping counts and SHRINK-P5
//
// The last three are for callgrind, whose instruction counts are
// deterministic here: run each with N and 2N and divide the difference by
// N (tools/shrink/README.md has the commands).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "weft/runtime.hpp"
#include "weft/sync.hpp"

namespace {

// rss_kib() is the exact resident size (smaps_rollup sums the page tables;
// VmRSS in /proc/self/status comes from per-CPU counters that lagged by tens
// of MB here).
long rss_kib() {
    std::ifstream f("/proc/self/smaps_rollup");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("Rss:", 0) == 0) return std::strtol(line.c_str() + 4, nullptr, 10);
    return -1;
}

weft::runtime_options opts(unsigned workers, bool on) {
    weft::runtime_options o;
    o.workers = workers;
    o.shrink_idle_after = on ? std::chrono::milliseconds(100) : std::chrono::milliseconds(0);
    return o;
}

int rss(long n, bool on) {
    // A threshold far longer than the run: only shrink_idle() shrinks, after
    // the parked figure is read (with 100 ms the workers' own sweeps shrink
    // the first tasks while the last are still being spawned).
    weft::runtime_options o = opts(2, true);
    o.shrink_idle_after = on ? std::chrono::milliseconds(std::chrono::hours(1)) : std::chrono::milliseconds(0);
    weft::runtime rt(o);
    weft::event ev;
    std::vector<weft::join_handle<void>> hs;
    hs.reserve(static_cast<std::size_t>(n));
    const long base = rss_kib();
    for (long i = 0; i < n; ++i) hs.push_back(rt.spawn([&] { ev.wait(); }));
    // Every task has run to its wait.
    for (;;) {
        long waiting = 0;
        for (const weft::task_info& t : rt.tasks()) waiting += t.state == weft::task_state::waiting;
        if (waiting == n) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const long parked = rss_kib();
    for (int round = 0; round < 20000 && rt.stats().total().shrinks < static_cast<std::uint64_t>(n); ++round) {
        rt.shrink_idle();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const weft::worker_stats t = rt.stats().total();
    const long shrunk = rss_kib();
    if (const char* dump = std::getenv("MEASURE_SMAPS")) {
        std::ifstream in("/proc/self/smaps");
        std::ofstream out(dump);
        out << in.rdbuf();
    }
    std::printf("tasks %ld: shrinks %llu, kept %llu B (%.0f B/task)\n", n, static_cast<unsigned long long>(t.shrinks),
                static_cast<unsigned long long>(t.shrunk_bytes), double(t.shrunk_bytes) / double(n));
    std::printf("RSS KiB: base %ld parked %ld shrunk %ld\n", base, parked, shrunk);
    std::printf("RSS per task: parked %.0f B, after shrinking %.0f B (base %ld KiB)\n",
                double(parked - base) * 1024 / double(n), double(shrunk - base) * 1024 / double(n), base);
    ev.set();
    for (auto& h : hs) h.join();
    std::printf("restores %llu\n", static_cast<unsigned long long>(rt.stats().total().restores));
    return 0;
}

// scatter(): N tasks each parked on an event of its own, all shrunk, then
// woken in a shuffled order: the restores split the merged protected
// ranges (SHRINK-P5), so the mapping count climbs; the figures say whether
// any restore needed the adjacent-run fallback and whether every task came
// back whole.
long map_count() {
    std::ifstream in("/proc/self/maps");
    long n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
}

int scatter(long n) {
    weft::runtime_options o = opts(2, true);
    o.shrink_idle_after = std::chrono::milliseconds(std::chrono::hours(1));
    weft::runtime rt(o);
    std::vector<std::unique_ptr<weft::event>> evs;
    for (long i = 0; i < n; ++i) evs.push_back(std::make_unique<weft::event>());
    std::atomic<long> whole{0};
    std::vector<weft::join_handle<void>> hs;
    hs.reserve(static_cast<std::size_t>(n));
    for (long i = 0; i < n; ++i)
        hs.push_back(rt.spawn([&, i] {
            volatile long mine[4] = {i, i + 1, i + 2, i + 3};
            evs[static_cast<std::size_t>(i)]->wait();
            if (mine[0] == i && mine[3] == i + 3) whole.fetch_add(1);
        }));
    for (int round = 0; round < 60000 && rt.stats().total().shrinks < static_cast<std::uint64_t>(n); ++round) {
        rt.shrink_idle();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::printf("shrinks %llu refused %llu, maps after shrinking %ld\n",
                static_cast<unsigned long long>(rt.stats().total().shrinks),
                static_cast<unsigned long long>(rt.stats().total().shrinks_refused), map_count());
    std::vector<long> order(static_cast<std::size_t>(n));
    for (long i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
    std::uint64_t x = 88172645463325252ull;
    for (long i = n - 1; i > 0; --i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(x % static_cast<std::uint64_t>(i + 1))]);
    }
    long peak = 0;
    for (long k = 0; k < n; ++k) {
        evs[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])]->set();
        if (k % (n / 16 + 1) == 0) peak = std::max(peak, map_count());
    }
    for (auto& h : hs) h.join();
    std::printf("tasks %ld whole %ld restores %llu, maps: peak seen %ld, at the end %ld\n", n, whole.load(),
                static_cast<unsigned long long>(rt.stats().total().restores), peak, map_count());
    return whole.load() == n ? 0 : 1;
}

int yields(long n, bool on) {
    weft::runtime rt(opts(0, on));
    rt.block_on([n] {
        for (long i = 0; i < n; ++i) weft::this_task::yield();
    });
    return 0;
}

int pingpong(long n, bool on) {
    weft::runtime rt(opts(0, on));
    rt.block_on([n] {
        weft::channel<int> a, b;
        auto peer = weft::spawn([&] {
            for (long i = 0; i < n; ++i) b.send(*a.recv());
        });
        for (long i = 0; i < n; ++i) {
            a.send(static_cast<int>(i));
            (void)b.recv();
        }
        peer.join();
    });
    return 0;
}

int spawns(long n, bool on) {
    weft::runtime rt(opts(0, on));
    rt.block_on([n] {
        for (long i = 0; i < n; ++i) weft::spawn([] {}).join();
    });
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: measure rss|scatter|yield|pingpong|spawn N [on|off]\n");
        return 2;
    }
    const std::string what = argv[1];
    const long n = std::strtol(argv[2], nullptr, 10);
    const bool on = argc < 4 || std::strcmp(argv[3], "off") != 0;
    if (what == "rss") return rss(n, on);
    if (what == "scatter") return scatter(n);
    if (what == "yield") return yields(n, on);
    if (what == "pingpong") return pingpong(n, on);
    if (what == "spawn") return spawns(n, on);
    return 2;
}
