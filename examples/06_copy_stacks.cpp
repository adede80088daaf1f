// 06_copy_stacks.cpp: copy-stack coroutines, many coroutines on few stacks.
//
// A coroutine created with weft::shared_stack(pool) does not get a stack of
// its own. It runs on one of the few stacks of a shared_stack_pool, at full
// speed; when another coroutine of the same stack is resumed, weft copies
// the live part of its stack (from its stack pointer to the top: usually a
// few hundred bytes) into a heap buffer, and copies it back when it is
// resumed. A suspended coroutine thus costs its live bytes plus a small
// control block, instead of at least a page of stack. The pool fixes the
// stack size: coroutine_options::stack_size and paint_stack are ignored.
//
// The price is two rules, shown in parts 3 and 4:
// - a pointer into a suspended copy-stack coroutine's stack is valid only
//   until another coroutine of that stack runs (values passed through
//   resume() and yield() are moved out in time, so they are always safe);
// - a coroutine must not resume another one on the same shared stack: that
//   would overwrite its own frames, so resume() throws shared_stack_busy.
//
// Part 5 shows weft::compact_coroutine, the same model with the smallest
// control block (no name, private data or debugger listing).

#include <weft/compact_coroutine.hpp>
#include <weft/coroutine.hpp>
#include <weft/pooled_stack.hpp>
#include <weft/shared_stack.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <vector>

namespace {

constexpr int count = 10'000;

// resident_bytes() is the process's resident memory, from /proc/self/statm.
std::size_t resident_bytes() {
    unsigned long size = 0, resident = 0;
    std::FILE* f = std::fopen("/proc/self/statm", "r");
    if (f == nullptr) return 0;
    if (std::fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
    std::fclose(f);
    return resident * weft::page_size();
}

// suspend_all() creates `count` coroutines on stacks from `alloc`, each with a
// little state that lives across its two yields, and runs each one to its
// first yield. It returns the resident memory that costs.
template <class Alloc>
std::size_t suspend_all(std::vector<weft::coroutine<int>>& cos, Alloc alloc, long long& sum) {
    cos.reserve(count);
    const std::size_t before = resident_bytes();
    for (int id = 0; id < count; ++id) {
        cos.emplace_back(std::allocator_arg, alloc, [id](weft::yielder<int>& y) {
            std::array<int, 8> state{id, id + 1};
            y.yield(state[0]);
            y.yield(state[1]);
        });
        sum += *cos.back().resume();
    }
    const std::size_t after = resident_bytes();
    return after > before ? after - before : 0;
}

// publisher() makes a coroutine that stores the address of one of its locals
// in `where`, then yields twice: 0, then the local's value.
weft::coroutine<int> publisher(weft::shared_stack_pool& pool, int value, int*& where) {
    return weft::coroutine<int>(std::allocator_arg, weft::shared_stack(pool), [value, &where](weft::yielder<int>& y) {
        int local = value;
        where = &local;  // escapes: valid only while these bytes are on the stack
        y.yield(0);
        y.yield(local);  // a value, copied out: always safe
    });
}

}  // namespace

int main() {
    bool ok = true;

    // 1. Ten thousand suspended coroutines on four shared 64 KiB stacks.
    //    The pool must outlive its coroutines: declare it first.
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 4});
    std::vector<weft::coroutine<int>> shared;
    long long sum = 0;
    const std::size_t shared_rss = suspend_all(shared, weft::shared_stack(pool), sum);
    ok = ok && sum == static_cast<long long>(count) * (count - 1) / 2;

    // copy_stats(): all but the last coroutine of each stack had their live
    // bytes saved once, to make room for the next one.
    std::size_t saved_total = 0, saved_max = 0, saved_count = 0;
    for (const auto& co : shared) {
        const weft::copy_stack_stats cs = co.copy_stats();
        saved_total += cs.last_saved;
        saved_max = std::max(saved_max, cs.max_saved);
        saved_count += cs.saves > 0 ? 1 : 0;
    }
    std::printf("1. %d copy-stack coroutines on %zu stacks: %zu saved, %zu bytes each on average (max %zu)\n",
                count, pool.stacks(), saved_count, saved_count > 0 ? saved_total / saved_count : 0, saved_max);
    ok = ok && saved_count >= count - pool.stacks() && saved_max > 0 && saved_max < pool.stack_size();

    shared.clear();  // each is restored to its stack and unwound, then freed

    // 2. The same on stacks of their own, from a stack_pool with the default
    //    128 KiB stacks: each suspended coroutine keeps at least the pages it
    //    touched resident. (Figures only: they depend on machine and build.)
    std::size_t own_rss = 0;
    {
        weft::stack_pool own_pool;
        std::vector<weft::coroutine<int>> own;
        sum = 0;
        own_rss = suspend_all(own, weft::pooled_stack(own_pool), sum);
        ok = ok && sum == static_cast<long long>(count) * (count - 1) / 2;
    }  // the coroutines go first (declared after the pool), then the pool
    std::printf("2. resident memory per suspended coroutine: copy stack %zu bytes, own stack %zu bytes\n",
                shared_rss / count, own_rss / count);

    // 3. The pointer rule, on a pool with a single stack. Two coroutines of
    //    the same body publish the address of a local; both frames lie at the
    //    same addresses, one coroutine's bytes at a time.
    weft::shared_stack_pool solo({.stack_size = 64 * 1024, .stacks = 1});
    {
        int *pa = nullptr, *pb = nullptr;
        weft::coroutine<int> a = publisher(solo, 111, pa);
        weft::coroutine<int> b = publisher(solo, 222, pb);
        (void)a.resume();
        ok = ok && *pa == 111;  // fine: a's bytes are on the stack
        (void)b.resume();       // a's bytes are copied away, b's frames take their place
        if (pa == pb) {
            std::printf("3. after b ran, a's pointer reads %d: b's local at the same address\n", *pa);
            ok = ok && *pa == 222;
        }
        const int from_a = *a.resume();  // a's bytes come back; so does its local
        std::printf("   a resumed: it yields %d, and its pointer reads %d again\n", from_a, *pa);
        ok = ok && from_a == 111 && *pa == 111;
    }

    // 4. A coroutine that resumes another one of its own shared stack gets
    //    coroutine_error(shared_stack_busy). More stacks avoid it: a coroutine
    //    created inside another gets a stack other than its creator's.
    weft::coroutine<int> inner(std::allocator_arg, weft::shared_stack(solo), [](weft::yielder<int>& y) { y.yield(7); },
                               {.name = "inner"});
    bool busy = false;
    weft::coroutine<> outer(
        std::allocator_arg, weft::shared_stack(solo),
        [&](weft::yielder<>&) {
            try {
                (void)inner.resume();
            } catch (const weft::coroutine_error& e) {
                std::printf("4. %s\n", e.what());
                busy = e.code() == weft::coroutine_errc::shared_stack_busy;
            }
        },
        {.name = "outer"});
    (void)outer.resume();
    ok = ok && busy && outer.done();
    ok = ok && inner.resume() == 7;  // from outside any coroutine it runs

    // 5. weft::compact_coroutine: the same ten thousand on the same pool, each
    //    one heap block (an 80-byte control block, the body and its saved
    //    bytes). The body gets a yielder; values are copied or moved out.
    {
        std::vector<weft::compact_coroutine<int>> compact;
        compact.reserve(count);
        sum = 0;
        for (int id = 0; id < count; ++id) {
            compact.emplace_back(weft::shared_stack(pool), [id](auto& y) {
                std::array<int, 8> state{id, id + 1};
                y.yield(state[0]);
                y.yield(state[1]);
            });
            sum += *compact.back().resume();
        }
        // (Resident memory says little here: the blocks part 1 freed are
        // reused. What each keeps is its control block and its saved bytes.)
        std::size_t saved = 0;
        for (const auto& co : compact) saved += co.copy_stats().last_saved;
        std::printf("5. %d compact_coroutines: a control block of %zu bytes and %zu saved bytes each on average\n", count,
                    weft::compact_coroutine<int>::control_size, saved / count);
        ok = ok && sum == static_cast<long long>(count) * (count - 1) / 2;
        ok = ok && *compact[0].resume() == 1 && !compact[0].resume().has_value() && compact[0].done();
    }  // the rest are unwound and freed

    std::printf(ok ? "all as expected\n" : "UNEXPECTED RESULT\n");
    return ok ? 0 : 1;
}
