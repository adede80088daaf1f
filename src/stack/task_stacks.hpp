// task_stacks.hpp: layer L1, internal: the allocators of a runtime's task
// stacks. A task that runs for the first time gets a guarded stack from the
// runtime's pool while the runtime's budget of guarded stacks lasts, then a
// slab stack (runtime_core::make_fiber() in src/runtime/ chooses; docs/
// runtime.md, "Stacks"). The runtime owns one guarded_stacks and one
// slab_stacks; the allocator handles point to them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "weft/pooled_stack.hpp"
#include "weft/stack.hpp"

namespace weft::detail {

// guarded_stacks are a runtime's guarded stacks: its stack_pool, and how
// many of them are in use now (what make_fiber() compares with the budget).
struct guarded_stacks {
    explicit guarded_stacks(const stack_pool_options& o) : pool(o) {}
    stack_pool pool;
    std::atomic<std::size_t> live{0};
};

// guarded_stack is the allocator of a task's own guarded stack: the
// runtime's stack_pool, counted against the runtime's budget of guarded
// stacks.
class guarded_stack {
public:
    explicit guarded_stack(guarded_stacks* s) noexcept : s_(s) {}
    stack_view allocate(std::size_t size);
    void deallocate(stack_view v) noexcept;

private:
    guarded_stacks* s_;
};

// slab_stacks are a runtime's slab stacks: the regions they are carved
// from (unmapped when it goes) and the free slots. `slot` is a slot's size:
// a stack of the runtime's stack_size and its guard words, in whole pages;
// set before the first allocation.
struct slab_stacks {
    slab_stacks() = default;
    slab_stacks(const slab_stacks&) = delete;
    slab_stacks& operator=(const slab_stacks&) = delete;
    ~slab_stacks();
    std::size_t slot = 0;
    std::mutex mu;
    std::vector<std::byte*> free;                        // guarded by mu
    std::vector<std::pair<void*, std::size_t>> regions;  // guarded by mu
};

// slab_stack is the allocator of the fallback stacks
// (runtime_options::stack_fallback): stacks of the runtime's stack_size
// carved from large regions (one mapping and one guard page per region, not
// per stack), each with guard words just below its base, in its own slot,
// checked whenever its task is switched out and when it ends. Memory comes
// from mmap, not the heap, so it can still be had when malloc cannot map
// any more.
class slab_stack {
public:
    static constexpr std::size_t guard_bytes = 16;
    // guard_value is zero: the guard words are never written, so the page
    // that holds them stays the shared zero page (src/stack/task_stacks.cpp).
    static constexpr std::uint64_t guard_value = 0;
    explicit slab_stack(slab_stacks* s) noexcept : s_(s) {}
    stack_view allocate(std::size_t size);
    void deallocate(stack_view v) noexcept;
    [[nodiscard]] static const std::uint64_t* guard_word(stack_view v) noexcept {
        return reinterpret_cast<const std::uint64_t*>(static_cast<const std::byte*>(v.base) - guard_bytes);
    }

private:
    slab_stacks* s_;
};

}  // namespace weft::detail
