// create_destroy: the cost of a coroutine's creation and destruction alone
// (never entered: no switch), and of a resume + yield round trip, on the
// default pool (stack_pool::global()), warm. For the registry of live
// coroutines (docs/debugging.md, Cost): it is paid at creation and
// destruction and never on a switch.
//
//   weft_bench_create_destroy create N   N creations + destructions
//   weft_bench_create_destroy switch N   N resume + yield round trips
//
// Prints ns per operation (wall clock, one thread). For instruction counts
// run it under callgrind with N and 2N and divide the difference of the
// totals by N (callgrind's per-function attribution breaks across stack
// switches; the totals do not):
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null weft_bench_create_destroy create 10000
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "weft/coroutine.hpp"

int main(int argc, char** argv) {
    if (argc != 3 || (std::strcmp(argv[1], "create") != 0 && std::strcmp(argv[1], "switch") != 0)) {
        std::fprintf(stderr, "usage: weft_bench_create_destroy create|switch N\n");
        return 2;
    }
    const long n = std::atol(argv[2]);
    // Warm the pool and the code paths.
    for (int w = 0; w < 100; ++w) {
        weft::coroutine<void> c([](weft::yielder<void>& y) { y.yield(); });
        c.resume();
        c.resume();
    }
    const auto t0 = std::chrono::steady_clock::now();
    if (!std::strcmp(argv[1], "create")) {
        for (long i = 0; i < n; ++i) {
            weft::coroutine<void> c([](weft::yielder<void>&) {});
        }
    } else {
        weft::coroutine<void> c([n](weft::yielder<void>& y) {
            for (long i = 0; i < n; ++i) y.yield();
        });
        for (long i = 0; i < n; ++i) c.resume();
    }
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: %.2f ns per %s\n", argv[1], ns / static_cast<double>(n),
                argv[1][0] == 'c' ? "create + destroy" : "resume + yield");
    return 0;
}
