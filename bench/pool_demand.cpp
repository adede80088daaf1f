// pool_demand: the S2 / S3 allocation pattern on a stack_pool with default
// options (only the stack size set: 64 KiB): one thread takes N stacks,
// returns them all, and repeats. Prints, per round, where the allocations
// came from (stack_pool_statistics deltas): after the first round a cache
// that follows demand serves every allocation, with no reserve refill and no
// flush. Counts, not times: deterministic on any machine.
//
//   build/bench/bench/weft_bench_pool_demand [N = 30000] [rounds = 7]
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "weft/pooled_stack.hpp"

int main(int argc, char** argv) {
    const std::size_t n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 30000;
    const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
    constexpr std::size_t size = 64 * 1024;
    weft::stack_pool pool(weft::stack_pool_options{.stack_size = size});
    std::vector<weft::stack_view> v(n);
    weft::stack_pool::statistics prev{};
    std::uint64_t reserve = 0;
    std::printf("N = %zu stacks of %zu bytes per round\n", n, size);
    std::printf("round  hits  reserve_hits  misses  flushes  cache_capacity\n");
    for (int r = 1; r <= rounds; ++r) {
        for (auto& s : v) s = pool.allocate(size);
        for (auto& s : v) pool.deallocate(s);
        const weft::stack_pool::statistics st = pool.stats();
        reserve += st.reserve_hits - prev.reserve_hits;
        std::printf("%5d  %llu  %llu  %llu  %llu  %zu\n", r, static_cast<unsigned long long>(st.hits - prev.hits),
                    static_cast<unsigned long long>(st.reserve_hits - prev.reserve_hits),
                    static_cast<unsigned long long>(st.misses - prev.misses),
                    static_cast<unsigned long long>(st.flushes - prev.flushes), st.cache_capacity);
        prev = st;
    }
    std::printf("reserve_hits over %d rounds: %llu (%zu allocations)\n", rounds, static_cast<unsigned long long>(reserve),
                n * static_cast<std::size_t>(rounds));
}
