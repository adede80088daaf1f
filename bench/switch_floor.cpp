// switch_floor.cpp: what the instructions a coroutine switch cannot avoid
// cost on this machine, each alone in a loop, and the pairs that matter:
//   - the locked compare-and-swap by which a weft resume claims a coroutine
//     (fiber_record.hpp FIBER-I2; a compact coroutine's take of its shared stack);
//   - stmxcsr / fnstcw and ldmxcsr / fldcw, by which a switch that keeps
//     each side's FP control state saves and restores it (jump_fcontext
//     does both on every switch; a weft coroutine with fp_env_mode::own
//     does them too);
//   - the compare-and-swap followed by the save: whether they overlap.
// Issue 10's switch targets divide a weft round trip (one CAS, two switches)
// by jump_fcontext's (two switches, two saves and two loads of the FP
// state); these figures say how far apart the two can be at best.
//
//   build/bench/bench/weft_bench_switch_floor [iterations]
//
// x86-64 only (AArch64 has no stmxcsr; its FPCR read is a plain mrs).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

std::atomic<int> word{0};

template <class F>
double ns_per(long n, F f) {
    // Best of five passes: the machine is shared.
    double best = 1e30;
    for (int pass = 0; pass < 5; ++pass) {
        const auto t0 = std::chrono::steady_clock::now();
        for (long i = 0; i < n; ++i) f();
        const auto t1 = std::chrono::steady_clock::now();
        const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n);
        if (ns < best) best = ns;
    }
    return best;
}

}  // namespace

int main(int argc, char** argv) {
#if defined(__x86_64__)
    const long n = argc > 1 ? std::atol(argv[1]) : 10'000'000;
    alignas(64) std::uint32_t mxcsr = 0, cur = 0;
    std::uint16_t cw = 0, curcw = 0;
    asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(cur), "=m"(curcw));
    auto cas = [] {
        int e = 0;
        word.compare_exchange_strong(e, 0, std::memory_order_acquire, std::memory_order_relaxed);
    };
    auto save = [&] { asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(mxcsr), "=m"(cw)); };
    auto load = [&] { asm volatile("ldmxcsr %0\n\tfldcw %1" : : "m"(cur), "m"(curcw) : "memory"); };
    const double t_cas = ns_per(n, cas);
    const double t_save = ns_per(n, save);
    const double t_load = ns_per(n, load);
    const double t_cas_save = ns_per(n, [&] {
        cas();
        save();
    });
    const double t_save_load = ns_per(n, [&] {
        save();
        load();
    });
    std::printf("ns each, best of 5 passes of %ld:\n", n);
    std::printf("  lock cmpxchg (a resume's claim)             %6.2f\n", t_cas);
    std::printf("  stmxcsr + fnstcw (save the FP control)      %6.2f\n", t_save);
    std::printf("  ldmxcsr + fldcw (load it)                   %6.2f\n", t_load);
    std::printf("  claim, then save                            %6.2f  (sum of the two: %.2f)\n", t_cas_save,
                t_cas + t_save);
    std::printf("  save, then load                             %6.2f\n", t_save_load);
    return 0;
#else
    (void)argc;
    (void)argv;
    std::printf("switch_floor: x86-64 only\n");
    return 0;
#endif
}
