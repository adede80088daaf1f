// 05_stacks_and_pools.cpp: where a coroutine's stack comes from, and how big
// to make it.
//
// Every weft coroutine runs on a stack of its own, taken from a stack
// allocator when the coroutine is created and given back when it is
// destroyed. coroutine_options::stack_size is the size asked for; what a
// stack of that size costs depends on the allocator:
//
//   pooled_stack{}      the default: the process-wide stack_pool (128 KiB
//                       stacks). A request up to the pool's stack size gets
//                       a pooled stack of exactly the pool's size; a larger
//                       one gets a stack of its own, outside the pool.
//   pooled_stack(pool)  a stack_pool of your own, with your size and limits.
//   mmap_stack{}        a fresh mapping per coroutine: stack_size rounded up
//                       to pages, a guard page below, pages backed lazily.
//   malloc_stack{}      heap memory, stack_size rounded up to 16 bytes, and
//                       no guard page: an overflow corrupts the heap.
//
// In every case weft's own bookkeeping (control block, name) lives at the
// top of that stack, so the body gets a little less than stack_size.
// (Copy-stack coroutines, which share stacks, are example 06.)

#include <weft/coroutine.hpp>
#include <weft/version.hpp>
#include <weft/pooled_stack.hpp>
#include <weft/stack.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace {

volatile unsigned char sink;

// dig() recurses `depth` times with a 1 KiB array in each frame: a stand-in
// for real work whose stack use we want to measure.
[[gnu::noinline]] void dig(int depth) {
    volatile unsigned char frame[1024];
    for (std::size_t i = 0; i < sizeof frame; ++i) frame[i] = static_cast<unsigned char>(i);
    if (depth > 1) dig(depth - 1);
    sink = frame[depth];
}

// A small body used throughout: yields 1, 2, 3.
void count_to_three(weft::yielder<int>& y) {
    for (int i = 1; i <= 3; ++i) y.yield(i);
}

// sum() drives a coroutine to its end and adds up what it yielded.
int sum(weft::coroutine<int>& co) {
    int total = 0;
    while (auto v = co.resume()) total += *v;
    return total;
}

}  // namespace

int main() {
    bool ok = true;

    // 1. The default: no allocator named, a 128 KiB stack from the global pool.
    {
        weft::coroutine<int> co(count_to_three);
        ok = ok && sum(co) == 6;
        std::printf("1. default: global pool, %zu KiB stacks\n", weft::stack_pool::global().stack_size() / 1024);
    }

    // 2. A pool of your own: 32 KiB stacks, at most 8 of them mapped at once.
    //    Declare it before the coroutines that use it: it must outlive them.
    //    Ask for at most the pool's stack size, or the coroutine gets an
    //    unpooled stack (the default request, 128 KiB, would be too large).
    weft::stack_pool pool({.stack_size = 32 * 1024, .max_stacks = 8});
    const weft::coroutine_options small{.stack_size = pool.stack_size(), .name = "small"};
    for (int round = 0; round < 2; ++round) {
        // The first coroutine maps a stack (a miss); when it is destroyed the
        // stack goes back to this thread's cache, and the second coroutine
        // gets the same, still warm, stack (a hit) without a system call.
        weft::coroutine<int> co(std::allocator_arg, weft::pooled_stack(pool), count_to_three, small);
        ok = ok && sum(co) == 6;
    }
    weft::stack_pool::statistics s = pool.stats();
    std::printf("2. own pool: %llu miss, %llu hit, %zu stack mapped, %zu in use\n",
                static_cast<unsigned long long>(s.misses), static_cast<unsigned long long>(s.hits), s.mapped,
                s.in_use);
    ok = ok && s.misses == 1 && s.hits == 1 && s.mapped == 1 && s.in_use == 0;

    //    A request larger than the pool's stacks still works, on a stack
    //    outside the pool that is unmapped when the coroutine goes.
    {
        weft::coroutine<int> big(std::allocator_arg, weft::pooled_stack(pool), count_to_three,
                                 {.stack_size = 256 * 1024, .name = "big"});
        ok = ok && sum(big) == 6;
    }
    s = pool.stats();
    std::printf("   a 256 KiB request: %llu unpooled stack\n", static_cast<unsigned long long>(s.unpooled));
    ok = ok && s.unpooled == 1 && s.mapped == 1;

    // 3. Unpooled allocators: each coroutine allocates and frees its own
    //    stack. weft::stats::live_stacks() counts the stacks weft hands out.
    const std::int64_t before = weft::stats::live_stacks();
    {
        weft::coroutine<int> mapped(std::allocator_arg, weft::mmap_stack{}, count_to_three, {.stack_size = 16 * 1024});
        weft::coroutine<int> heap(std::allocator_arg, weft::malloc_stack{}, count_to_three, {.stack_size = 16 * 1024});
        ok = ok && weft::stats::live_stacks() == before + 2;
        ok = ok && sum(mapped) + sum(heap) == 12;
    }
    std::printf("3. mmap_stack and malloc_stack: freed with their coroutines (%s)\n",
                weft::stats::live_stacks() == before ? "yes" : "NO");
    ok = ok && weft::stats::live_stacks() == before;

    // 4. Sizing a stack: paint_stack fills the stack with a pattern at
    //    creation (touching every page, so use it while tuning, not in
    //    production), and stack_high_water() then tells how deep the body
    //    went. Here dig(12) needs at least 12 KiB of a 64 KiB stack (unless
    //    AddressSanitizer moves its frames to a fake stack of its own, as
    //    with detect_stack_use_after_return: then only the bookkeeping shows).
    constexpr std::size_t size = 64 * 1024;
    weft::coroutine<int> probe(
        std::allocator_arg, weft::mmap_stack{},
        [](weft::yielder<int>& y) {
            dig(12);
            y.yield(0);
        },
        {.stack_size = size, .name = "probe", .paint_stack = true});
    (void)probe.resume();
    const std::size_t high = probe.stack_high_water();
    std::printf("4. probe used %zu of %zu bytes (%.0f%%)\n", high, size, 100.0 * static_cast<double>(high) / size);
    const std::size_t least = WEFT_ASAN ? 1024 : 12 * 1024;
    ok = ok && high >= least && high < size;
    //    Give a real workload its measured high water plus a generous margin
    //    (say twice), then make that the stack_size of its pool.

    std::printf(ok ? "all as expected\n" : "UNEXPECTED RESULT\n");
    return ok ? 0 : 1;
}
