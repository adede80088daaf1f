// switch_compare.cpp: a preliminary side-by-side measurement of the hot
// resume+yield round trip (two switches) of weft against Boost.Context's
// jump_fcontext, interleaved in one run (bench/README.md, rules B1 and B2).
// The full peer report is the benchmark issue's; this is its seed.
//
// Usage: weft_bench_switch [--quick] [--reps N] [--iters N]

#include <boost/context/detail/fcontext.hpp>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "weft/context.hpp"
#include "weft/coroutine.hpp"
#include "weft/stack.hpp"

namespace bctx = boost::context::detail;

namespace {

using clock_type = std::chrono::steady_clock;

// Every candidate runs `iters` round trips and returns ns per round trip.
struct candidate {
    const char* name;
    std::function<double(std::uint64_t)> run;
    std::vector<double> samples;
};

template <class F>
double time_ns(std::uint64_t iters, F&& body) {
    auto t0 = clock_type::now();
    body();
    auto t1 = clock_type::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(iters);
}

// weft coroutine: resume() + yield(), 64 KiB mmap stack.
double weft_coroutine_rt(std::uint64_t iters) {
    std::uint64_t sink = 0;
    weft::coroutine<> co([&sink](weft::yielder<>& y) {
        for (;;) {
            ++sink;
            y.yield();
        }
    }, {.stack_size = 64 * 1024});
    (void)co.resume();
    double ns = time_ns(iters, [&] {
        for (std::uint64_t i = 0; i < iters; ++i) (void)co.resume();
    });
    if (sink != iters + 1) std::abort();
    return ns;
}

// weft context: raw jump ping-pong, the same level as jump_fcontext.
void weft_ctx_entry(weft::context::transfer t) noexcept {
    for (;;) t = weft::context::jump(t.from, t.data);
}
double weft_context_rt(std::uint64_t iters) {
    weft::mmap_stack alloc;
    weft::stack_view s = alloc.allocate(64 * 1024);
    void* ctx = weft::context::make(s.top(), s.size, &weft_ctx_entry);
    double ns = time_ns(iters, [&] {
        for (std::uint64_t i = 0; i < iters; ++i) ctx = weft::context::jump(ctx, nullptr).from;
    });
    alloc.deallocate(s);
    return ns;
}

// Boost.Context fcontext: jump_fcontext ping-pong on a 64 KiB mmap stack.
void boost_entry(bctx::transfer_t t) {
    for (;;) t = bctx::jump_fcontext(t.fctx, t.data);
}
double boost_fcontext_rt(std::uint64_t iters) {
    weft::mmap_stack alloc;
    weft::stack_view s = alloc.allocate(64 * 1024);
    bctx::fcontext_t ctx = bctx::make_fcontext(s.top(), s.size, &boost_entry);
    double ns = time_ns(iters, [&] {
        for (std::uint64_t i = 0; i < iters; ++i) ctx = bctx::jump_fcontext(ctx, nullptr).fctx;
    });
    alloc.deallocate(s);
    return ns;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
    int reps = 15;
    std::uint64_t iters = 2'000'000;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--quick")) {
            reps = 5;
            iters = 100'000;
        } else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = std::atoi(argv[++i]);
        } else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) {
            iters = std::strtoull(argv[++i], nullptr, 10);
        } else {
            std::fprintf(stderr, "usage: %s [--quick] [--reps N] [--iters N]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1 || iters < 1) return 2;

    std::vector<candidate> cs = {
        {"weft coroutine resume+yield", &weft_coroutine_rt, {}},
        {"weft context::jump x2", &weft_context_rt, {}},
        {"Boost.Context jump_fcontext x2", &boost_fcontext_rt, {}},
    };
    for (auto& c : cs) (void)c.run(iters / 10 + 1);  // warm-up
    for (int r = 0; r < reps; ++r) {  // interleaved: A B C A B C ...
        std::fprintf(stderr, "\rrepetition %d/%d", r + 1, reps);
        for (auto& c : cs) c.samples.push_back(c.run(iters));
    }
    std::fprintf(stderr, "\n");

    int cpu = sched_getcpu();
    std::printf("hot round trip (one resume + one yield = two switches), %d repetitions x %llu round trips, cpu %d\n\n",
                reps, static_cast<unsigned long long>(iters), cpu);
    std::printf("| candidate | ns per round trip, median [min, max] | ratio to jump_fcontext |\n|---|---|---|\n");
    const double base = median(cs.back().samples);
    for (auto& c : cs) {
        const double m = median(c.samples);
        const auto [lo, hi] = std::minmax_element(c.samples.begin(), c.samples.end());
        std::printf("| %s | %.2f [%.2f, %.2f] | %.2f |\n", c.name, m, *lo, *hi, m / base);
    }
    return 0;
}
