// report_main.cpp: weft_bench_report, the C++ side of the peer report.
//
// It runs ONE candidate in ONE scenario and prints its samples as JSON lines
// on stdout; bench/compare/report.py runs it again and again, alternating
// candidates (A B C A B C ...), each run a fresh process, and aggregates.
//
//   weft_bench_report --list
//       JSON: the candidates built into this binary, compiler, Boost and
//       weft configuration (WEFT_SHARE_FP_ENV, copy-stack support).
//   weft_bench_report --scenario NAME --candidate C --count N --stack BYTES
//                     [--live BYTES] [--rounds R] [--target-ms T] [--no-lifecycle]
//                     [--no-switch]
//       Lifecycle rounds, spawn-to-finish rounds, then a switch round.
//       Lifecycle round r creates N coroutines (timed: "create"), resumes
//       each once so it runs to its first yield (timed: "entry"), then
//       destroys them all while suspended (timed: "destroy"). Round 0 is
//       "cold" (fresh process, empty pools); rounds 1..R-1 are "warm" and
//       averaged. Spawn-to-finish (candidates with spawn(i)/finish(i)): R
//       more rounds, each creating N coroutines whose body touches its state
//       once and returns without yielding (harness.hpp run_once), then
//       running each to completion and releasing it (its stack back to the
//       pool); round 0 warms the pools and code paths up and is not
//       reported, rounds 1..R-1 are averaged: "spawn_warm" is create +
//       first entry + run to completion + release, "spawn_run_warm" its
//       second part. N are alive at once, as in the other rounds, so S2 and
//       S3 pay their cache misses here too. Then the switch round: create N,
//       enter, one untimed warm-up pass, then passes of round-robin resumes
//       (resume coroutine 0, 1, ..., N-1, again) for about T ms; "switch" is
//       the time per transfer of control = per round trip / 2.
//       All figures are ns per coroutine (per switch for "switch").
//       --no-lifecycle skips the lifecycle and spawn rounds, --no-switch
//       the switch round.
//   weft_bench_report --m1 --candidate C --count N --stack BYTES
//       Creates N coroutines and runs each to its first yield, ~100 bytes of
//       locals live; prints the peak RSS (VmHWM) minus the RSS before the
//       first was created, and that per coroutine. Exits without tearing down.
//   weft_bench_report --callgrind --candidate C --iters N
//       One coroutine, N bare resume+yield round trips (no state touched):
//       run it under callgrind with N and 2N, the difference is N round trips.
//       The switch_to ring (weft-fiber-switch) makes 2N transfers between
//       two fibers instead: two switch_to()s stand for one round trip.
//
// A ring candidate (one with ring(k), see candidates_weft.hpp) has at least
// C::min_count coroutines (2 in S1); its switch passes are ring(N x passes)
// instead of round-robin resumes, so "switch" is still per transfer.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <boost/version.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "candidates_peers.hpp"
#include "candidates_weft.hpp"
#include "harness.hpp"
#include "weft/version.hpp"

namespace {

using namespace bench;

enum class mode { none, list, scenario, m1, callgrind };

struct args {
    mode m = mode::none;
    std::string scenario;
    std::string candidate;
    std::size_t count = 1;
    std::size_t stack = 64 * 1024;
    std::size_t live = 0;
    int rounds = 2;
    double target_ms = 50;
    std::uint64_t iters = 1000;
    bool lifecycle = true;
    bool switches = true;
};

// --- scenario ---------------------------------------------------------------

// is_ring: C hands control around a ring (ring(k)) instead of being
// resumed round-robin by the driver.
template <class C>
constexpr bool is_ring = requires(C& c) { c.ring(std::uint64_t{1}); };

// count_for() is how many coroutines C runs when asked for `asked`.
template <class C>
std::size_t count_for(std::size_t asked) {
    if constexpr (requires { C::min_count; })
        return std::max<std::size_t>(asked, C::min_count);
    else
        return asked;
}

// has_spawn: C has the spawn-to-finish pair (spawn(i), finish(i)).
template <class C>
constexpr bool has_spawn = requires(C& c) {
    c.spawn(std::size_t{0});
    c.finish(std::size_t{0});
};

// pass_ns() times `passes` passes over the n coroutines: each resumed once
// in turn (two switches each), or, for a ring, n transfers per pass.
template <class C>
double pass_ns(C& c, std::size_t n, std::uint64_t passes) {
    const std::int64_t t0 = now_ns();
    if constexpr (is_ring<C>) {
        c.ring(passes * n);
    } else {
        for (std::uint64_t p = 0; p < passes; ++p)
            for (std::size_t i = 0; i < n; ++i) c.resume(i);
    }
    return static_cast<double>(now_ns() - t0);
}

// switches_per_pass is how many switches one pass over n coroutines makes.
template <class C>
constexpr double switches_per_pass(std::size_t n) {
    return static_cast<double>(n) * (is_ring<C> ? 1.0 : 2.0);
}

template <class C>
int run_scenario(const args& a) {
    const std::size_t n = count_for<C>(a.count);
    const config cfg{n, a.stack};
    const double overhead = clock_overhead_ns();
    const double dn = static_cast<double>(n);
    C c(cfg);
    const char* s = a.scenario.c_str();
    const char* k = a.candidate.c_str();
    if (a.lifecycle) {
        double warm[3] = {0, 0, 0};
        for (int r = 0; r < a.rounds; ++r) {
            const std::int64_t t0 = now_ns();
            for (std::size_t i = 0; i < n; ++i) c.create(i);
            const std::int64_t t1 = now_ns();
            for (std::size_t i = 0; i < n; ++i) c.enter(i);
            const std::int64_t t2 = now_ns();
            for (std::size_t i = 0; i < n; ++i) c.destroy(i);
            const std::int64_t t3 = now_ns();
            c.end_round();
            const double v[3] = {std::max(0.0, static_cast<double>(t1 - t0) - overhead) / dn,
                                 std::max(0.0, static_cast<double>(t2 - t1) - overhead) / dn,
                                 std::max(0.0, static_cast<double>(t3 - t2) - overhead) / dn};
            if (r == 0) {
                emit(s, k, "create_cold", v[0], "ns");
                emit(s, k, "entry_cold", v[1], "ns");
                emit(s, k, "destroy_cold", v[2], "ns");
            } else {
                for (int j = 0; j < 3; ++j) warm[j] += v[j];
            }
        }
        if (a.rounds > 1) {
            const double w = a.rounds - 1;
            emit(s, k, "create_warm", warm[0] / w, "ns");
            emit(s, k, "entry_warm", warm[1] / w, "ns");
            emit(s, k, "destroy_warm", warm[2] / w, "ns");
        }
        if constexpr (has_spawn<C>) {
            // Timed in two parts, each over all N, so that one clock pair
            // covers many coroutines (S1's single one subtracts the pair).
            double spawn = 0, run = 0;
            for (int r = 0; r < a.rounds; ++r) {
                const std::int64_t t0 = now_ns();
                for (std::size_t i = 0; i < n; ++i) c.spawn(i);
                const std::int64_t t1 = now_ns();
                for (std::size_t i = 0; i < n; ++i) c.finish(i);
                const std::int64_t t2 = now_ns();
                c.end_round();
                if (r == 0) continue;  // warm-up
                const double cr = std::max(0.0, static_cast<double>(t1 - t0) - overhead) / dn;
                const double fr = std::max(0.0, static_cast<double>(t2 - t1) - overhead) / dn;
                spawn += cr + fr;
                run += fr;
            }
            if (a.rounds > 1) {
                const double w = a.rounds - 1;
                emit(s, k, "spawn_warm", spawn / w, "ns");
                emit(s, k, "spawn_run_warm", run / w, "ns");
            }
        }
    }
    if (!a.switches) return 0;

    // The switch round.
    for (std::size_t i = 0; i < n; ++i) c.create(i);
    for (std::size_t i = 0; i < n; ++i) c.enter(i);
    (void)pass_ns(c, n, 1);  // warm-up
    // Calibrate: double the passes until they take a tenth of the target.
    std::uint64_t passes = 1;
    double t = pass_ns(c, n, passes);
    while (t < a.target_ms * 1e5 && passes < (1ull << 40)) {
        passes *= 2;
        t = pass_ns(c, n, passes);
    }
    passes = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(static_cast<double>(passes) * a.target_ms * 1e6 / t));
    t = pass_ns(c, n, passes);
    emit(s, k, "switch", t / (static_cast<double>(passes) * switches_per_pass<C>(n)), "ns");
    std::fprintf(stderr, "  %s %s: %llu passes x %zu coroutines, cpu %d\n", s, k,
                 static_cast<unsigned long long>(passes), n, sched_getcpu());
#if WEFT_BENCH_HAVE_COPY_STACK
    if constexpr (requires { c.max_saved(); })
        emit(s, k, "copy_max_saved", static_cast<double>(c.max_saved()), "bytes");
#endif
    for (std::size_t i = 0; i < n; ++i) c.destroy(i);
    c.end_round();
    return 0;
}

// --- M1 ---------------------------------------------------------------------

template <class C>
int run_m1(const args& a) {
    const long base_kib = status_kib("VmRSS");
    auto* c = new C(config{a.count, a.stack});  // never deleted: the process exits
    for (std::size_t i = 0; i < a.count; ++i) c->create(i);
    for (std::size_t i = 0; i < a.count; ++i) c->enter(i);
    const long hwm_kib = status_kib("VmHWM");
    const double bytes = static_cast<double>(hwm_kib - base_kib) * 1024.0;
    const char* k = a.candidate.c_str();
    emit("M1", k, "m1_peak_rss", bytes, "bytes");
    emit("M1", k, "m1_bytes_per_coroutine", bytes / static_cast<double>(a.count), "bytes");
    emit("M1", k, "m1_baseline_rss", static_cast<double>(base_kib) * 1024.0, "bytes");
#if WEFT_BENCH_HAVE_COPY_STACK
    if constexpr (requires { c->max_saved(); })
        emit("M1", k, "copy_max_saved", static_cast<double>(c->max_saved()), "bytes");
#endif
    std::fflush(stdout);
    std::_Exit(0);  // tearing down millions of coroutines is not what M1 measures
}

// --- callgrind --------------------------------------------------------------

template <class C>
int run_callgrind(const args& a) {
    const std::size_t n = count_for<C>(1);
    C c(config{n, a.stack});
    for (std::size_t i = 0; i < n; ++i) c.create(i);
    for (std::size_t i = 0; i < n; ++i) c.enter(i);
    if constexpr (is_ring<C>)
        c.ring(2 * a.iters);  // two transfers for each round trip of the others
    else
        for (std::uint64_t i = 0; i < a.iters; ++i) c.resume(0);
    for (std::size_t i = 0; i < n; ++i) c.destroy(i);
    c.end_round();
    return 0;
}

// --- dispatch ---------------------------------------------------------------

template <template <std::size_t> class C, std::size_t Live>
int run(const args& a) {
    switch (a.m) {
        case mode::scenario: return run_scenario<C<Live>>(a);
        case mode::m1: return run_m1<C<Live>>(a);
        case mode::callgrind: return run_callgrind<C<Live>>(a);
        default: return 2;
    }
}

int bad_live(const args& a) {
    std::fprintf(stderr, "weft_bench_report: --live %zu is not built for %s\n", a.live, a.candidate.c_str());
    return 2;
}

// Every candidate: no live bytes, M1's, or the bare switch.
template <template <std::size_t> class C>
int with_live(const args& a) {
    if (a.m == mode::m1) return run<C, m1_extra_live>(a);
    if (a.m == mode::callgrind) return run<C, no_work>(a);
    switch (a.live) {
        case 0: return run<C, 0>(a);
        default: return bad_live(a);
    }
}

// weft's stack modes also run the live-bytes series.
template <template <std::size_t> class C>
int with_series(const args& a) {
    if (a.m != mode::scenario) return with_live<C>(a);
    switch (a.live) {
        case 0: return run<C, 0>(a);
        case 8: return run<C, 8>(a);
        case 64: return run<C, 64>(a);
        case 256: return run<C, 256>(a);
        case 1024: return run<C, 1024>(a);
        case 4096: return run<C, 4096>(a);
        case 8192: return run<C, 8192>(a);
        default: return bad_live(a);
    }
}

struct entry {
    const char* name;
    int (*fn)(const args&);
    const char* what;
};

const entry candidates[] = {
    {"weft-mmap", &with_series<weft_side::mmap>, "weft::coroutine, fresh weft::mmap_stack each"},
    {"weft-pooled", &with_series<weft_side::pooled>, "weft::coroutine, weft::pooled_stack (stack_pool)"},
    {"weft-mmap-ownfp", &with_series<weft_side::mmap_ownfp>, "weft-mmap with fp_env_mode::own"},
    {"weft-pooled-ownfp", &with_series<weft_side::pooled_ownfp>, "weft-pooled with fp_env_mode::own"},
    {"weft-default", &with_live<weft_side::pooled_default>,
     "weft::coroutine(body, options): stack_pool::global(), default options"},
    {"weft-pooled-nocolour", &with_live<weft_side::pooled_nocolour>,
     "weft::coroutine, weft::pooled_stack, cache_colouring off"},
    {"weft-fiber", &with_live<weft_side::fiber_resume>,
     "weft::fiber, weft::pooled_stack: resume() + this_fiber::suspend()"},
    {"weft-fiber-switch", &with_live<weft_side::fiber_ring>,
     "weft::fibers in a ring (at least 2), weft::pooled_stack: this_fiber::switch_to()"},
#if WEFT_BENCH_HAVE_COPY_STACK
    {"weft-copy", &with_series<weft_side::copy>, "weft::coroutine, weft::shared_stack (copy-stack)"},
    {"weft-copy-ownfp", &with_series<weft_side::copy_ownfp>, "weft-copy with fp_env_mode::own"},
#endif
#if WEFT_BENCH_HAVE_COMPACT
    {"weft-compact", &with_series<weft_side::compact>, "weft::compact_coroutine, weft::shared_stack (copy-stack)"},
#endif
    {"weft-context", &with_live<weft_side::context>, "weft::context::make/jump on weft::mmap_stack"},
    {"weft-fast", &with_live<weft_side::fast_context>, "weft::context::make/fast_jump (inline) on weft::mmap_stack"},
    {"fcontext", &with_live<peers::fcontext>, "Boost.Context make_fcontext/jump_fcontext, protected_fixedsize_stack"},
    {"fiber-protected", &with_live<peers::fiber_protected>, "boost::context::fiber, protected_fixedsize_stack"},
    {"fiber-pooled", &with_live<peers::fiber_pooled>, "boost::context::fiber, pooled_fixedsize_stack"},
    {"ucontext", &with_live<peers::ucontext>, "glibc makecontext/swapcontext, protected_fixedsize_stack"},
    {"cpp20", &with_live<peers::cpp20>, "C++20 stackless generator, one heap frame each"},
};

void list() {
    std::printf("{\"share_fp_env\":%d,\"copy_stack\":%d,\"compiler\":\"%s %s\",\"boost\":\"%d.%d.%d\",\"weft\":\"%s\",",
                WEFT_SHARE_FP_ENV, WEFT_BENCH_HAVE_COPY_STACK,
#if defined(__clang__)
                "clang",
#else
                "gcc",
#endif
                __VERSION__, BOOST_VERSION / 100000, BOOST_VERSION / 100 % 1000, BOOST_VERSION % 100,
                WEFT_VERSION_STRING);
    std::printf("\"candidates\":[");
    bool first = true;
    for (const auto& e : candidates) {
        std::printf("%s{\"name\":\"%s\",\"what\":\"%s\"}", first ? "" : ",", e.name, e.what);
        first = false;
    }
    std::printf("]}\n");
}

int usage() {
    std::fprintf(stderr,
                 "usage: weft_bench_report --list\n"
                 "       weft_bench_report --scenario NAME --candidate C --count N --stack BYTES [--live BYTES]\n"
                 "                         [--rounds R] [--target-ms T] [--no-lifecycle] [--no-switch]\n"
                 "       weft_bench_report --m1 --candidate C --count N --stack BYTES\n"
                 "       weft_bench_report --callgrind --candidate C --iters N\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    args a;
    for (int i = 1; i < argc; ++i) {
        std::string_view o = argv[i];
        auto value = [&]() -> const char* {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "weft_bench_report: %s needs a value\n", argv[i]);
                std::exit(2);
            }
            return argv[++i];
        };
        if (o == "--list") a.m = mode::list;
        else if (o == "--scenario") { a.m = mode::scenario; a.scenario = value(); }
        else if (o == "--m1") a.m = mode::m1;
        else if (o == "--callgrind") a.m = mode::callgrind;
        else if (o == "--candidate") a.candidate = value();
        else if (o == "--count") a.count = std::strtoull(value(), nullptr, 10);
        else if (o == "--stack") a.stack = std::strtoull(value(), nullptr, 10);
        else if (o == "--live") a.live = std::strtoull(value(), nullptr, 10);
        else if (o == "--rounds") a.rounds = std::atoi(value());
        else if (o == "--target-ms") a.target_ms = std::strtod(value(), nullptr);
        else if (o == "--iters") a.iters = std::strtoull(value(), nullptr, 10);
        else if (o == "--no-lifecycle") a.lifecycle = false;
        else if (o == "--no-switch") a.switches = false;
        else return usage();
    }
    if (a.m == mode::none) return usage();
    if (a.m == mode::list) {
        list();
        return 0;
    }
    if (a.count < 1 || a.rounds < 1 || !(a.target_ms > 0)) return usage();
    for (const auto& e : candidates)
        if (a.candidate == e.name) return e.fn(a);
    std::fprintf(stderr, "weft_bench_report: unknown candidate '%s' (--list shows them)\n", a.candidate.c_str());
    return 2;
}
