// harness.hpp: what every candidate of the peer report shares: the work a
// coroutine does between yields, the live bytes it keeps on its stack, the
// clock, /proc/self/status, and the JSON-lines output that
// bench/compare/report.py reads.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace bench {

// state is the 64-byte piece of state each coroutine owns (a local of its
// body, so it lives on the coroutine's own stack or frame) and touches
// between yields, so that with many coroutines every switch pays the cache
// misses a real program pays (bench/README.md, rule B3).
struct state {
    std::uint64_t w[8];
};
static_assert(sizeof(state) == 64);

// touch() reads and writes all 64 bytes; the barrier keeps the compiler from
// keeping them in registers across the switch.
inline void touch(state& s) noexcept {
    for (auto& w : s.w) w += 1;
    asm volatile("" : : "r"(&s) : "memory");
}

// live<N> is N bytes that stay live on the coroutine's stack across each
// yield: what a copy-stack coroutine has to save and restore.
template <std::size_t N>
struct live {
    alignas(16) unsigned char b[N];
    void fill() noexcept {
        std::memset(b, 0x5a, N);
        asm volatile("" : : "r"(b) : "memory");
    }
    void keep() noexcept { asm volatile("" : : "r"(b) : "memory"); }
};
template <>
struct live<0> {
    void fill() noexcept {}
    void keep() noexcept {}
};

// no_work as a candidate's Live parameter means a bare switch: no state
// touched, nothing kept live (the callgrind counts use it).
inline constexpr std::size_t no_work = ~std::size_t(0);
template <>
struct live<no_work> {
    void fill() noexcept {}
    void keep() noexcept {}
};

// step() is what a coroutine does between two yields.
template <std::size_t Live>
inline void step(state& s) noexcept {
    if constexpr (Live != no_work) touch(s);
    else (void)s;
}

// work_loop() is the body of every stackful candidate: its own state and
// Live bytes kept live across each switch, forever; switch_out() is the
// candidate's yield. It runs on the coroutine's stack, so its locals are
// the coroutine's. (The C++20 generator spells the loop out: co_yield must
// be in the coroutine itself.)
template <std::size_t Live, class SwitchOut>
[[noreturn]] inline void work_loop(SwitchOut&& switch_out) {
    state s{};
    live<Live> pad;
    pad.fill();
    for (;;) {
        step<Live>(s);
        pad.keep();
        switch_out();
    }
}

// run_once() is the body of the spawn-to-finish lifecycle (report_main.cpp):
// the same state and Live bytes as work_loop(), touched once, and then the
// body returns without yielding, so one resume is the first entry and the
// run to completion together. A short task that never blocks is what a
// runtime spawns most; a yield in between would add a round trip that the
// switch figures already measure. Every candidate's spawn body calls it
// (the C++20 generator spells it out: it must not be a coroutine itself).
template <std::size_t Live>
inline void run_once() noexcept {
    state s{};
    live<Live> pad;
    pad.fill();
    step<Live>(s);
    pad.keep();
}

// M1's coroutines keep ~100 bytes of locals live at their yield: the
// 64-byte state and this many bytes more.
inline constexpr std::size_t m1_extra_live = 40;

using clock_type = std::chrono::steady_clock;

inline std::int64_t now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch()).count();
}

// clock_overhead_ns() is the median cost of one back-to-back pair of clock
// reads; timings of single operations (S1's create, entry, destroy) have it
// subtracted.
inline double clock_overhead_ns() {
    std::vector<std::int64_t> d(2001);
    for (auto& x : d) {
        std::int64_t a = now_ns();
        std::int64_t b = now_ns();
        x = b - a;
    }
    std::nth_element(d.begin(), d.begin() + 1000, d.end());
    return static_cast<double>(d[1000]);
}

// status_kib() reads a "Name:   123 kB" line of /proc/self/status.
inline long status_kib(const char* key) {
    FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    const std::size_t n = std::strlen(key);
    while (std::fgets(line, sizeof line, f)) {
        if (!std::strncmp(line, key, n) && line[n] == ':') {
            v = std::strtol(line + n + 1, nullptr, 10);
            break;
        }
    }
    std::fclose(f);
    return v;
}

// emit() prints one sample as a JSON line on stdout.
inline void emit(const char* scenario, const char* candidate, const char* metric, double value, const char* unit) {
    std::printf("{\"scenario\":\"%s\",\"candidate\":\"%s\",\"metric\":\"%s\",\"value\":%.6g,\"unit\":\"%s\"}\n",
                scenario, candidate, metric, value, unit);
}

// config is what a scenario asks of a candidate.
struct config {
    std::size_t count = 1;        // coroutines alive at once
    std::size_t stack_size = 0;   // bytes of stack each (where the candidate has one)
};

}  // namespace bench
