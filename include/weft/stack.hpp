// weft/stack.hpp: layer L1, stacks for coroutines.
//
// A stack allocator is anything that satisfies weft::stack_allocator:
//   allocate(size) -> stack_view      usable memory of at least `size` bytes
//   deallocate(view) noexcept         gives back exactly what allocate returned
// weft ships mmap_stack (guard page, lazily backed) and malloc_stack.
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <system_error>

#include "weft/config.hpp"

namespace weft {

// stack_view describes usable stack memory: [base, base + size). Stacks grow
// down, so a context starts at top().
struct stack_view {
    void* base = nullptr;
    std::size_t size = 0;
    // guard is the size of the inaccessible region just below base (0 when
    // the allocator has none). Overflow diagnosis uses it.
    std::size_t guard = 0;

    // top() is one past the highest usable byte.
    [[nodiscard]] void* top() const noexcept { return static_cast<std::byte*>(base) + size; }
    // contains() says whether p lies in [base, top()).
    [[nodiscard]] bool contains(const void* p) const noexcept {
        auto a = reinterpret_cast<std::uintptr_t>(p);
        auto b = reinterpret_cast<std::uintptr_t>(base);
        return a >= b && a - b < size;
    }
    [[nodiscard]] explicit operator bool() const noexcept { return base != nullptr; }
};

// stack_allocator is the concept user allocators satisfy. allocate() throws
// on failure (weft::stack_error is preferred); deallocate() must not throw.
// The allocator is moved onto the coroutine's stack and moved off it before
// the stack is deallocated, so it must be nothrow move-constructible.
template <class A>
concept stack_allocator = std::is_nothrow_move_constructible_v<A> && requires(A& a, std::size_t n, stack_view v) {
    { a.allocate(n) } -> std::same_as<stack_view>;
    { a.deallocate(v) } noexcept;
};

// stack_error reports a stack that could not be allocated: code() carries
// the errno (ENOMEM when memory or vm.max_map_count is exhausted, EOVERFLOW
// when the requested size overflows), requested_size() the size asked for.
class WEFT_API stack_error : public std::system_error {
public:
    stack_error(int err, std::size_t requested, const char* operation);
    // requested_size() is the size passed to allocate().
    [[nodiscard]] std::size_t requested_size() const noexcept { return requested_; }

private:
    std::size_t requested_;
};

// default_stack_size is the stack size of a coroutine when none is given
// (the same as Boost.Context's default; lazily backed by mmap_stack).
inline constexpr std::size_t default_stack_size = 128 * 1024;

// page_size() is the system page size.
[[nodiscard]] WEFT_API std::size_t page_size() noexcept;

// mmap_stack allocates stacks with mmap: the whole range is reserved
// PROT_NONE, then all but the lowest guard_pages pages are made read-write.
// Pages are backed lazily by the kernel. Sizes are rounded up to whole pages
// with overflow checks. Each stack costs two memory mappings, so the default
// vm.max_map_count (65530) allows about 32,700 of them; past that allocate()
// throws stack_error(ENOMEM) and leaks nothing.
class WEFT_API mmap_stack {
public:
    // mmap_stack() puts guard_pages inaccessible pages below each stack.
    // Throws: std::invalid_argument if guard_pages is 0 or its size overflows.
    explicit mmap_stack(std::size_t guard_pages = 1);

    // allocate() returns at least `size` usable bytes (page-rounded) above
    // the guard. Throws: stack_error; std::invalid_argument if size == 0.
    [[nodiscard]] stack_view allocate(std::size_t size);
    // deallocate() unmaps a stack returned by allocate() of this allocator.
    void deallocate(stack_view stack) noexcept;

    // guard_size() is the size of the inaccessible region below base.
    [[nodiscard]] std::size_t guard_size() const noexcept { return guard_pages_ * page_size(); }

private:
    std::size_t guard_pages_;
};

// malloc_stack allocates stacks from the heap, 16-byte aligned, without a
// guard page: an overflow corrupts the heap silently. For tests, debugging
// under tools that dislike mappings, and very small stacks.
class WEFT_API malloc_stack {
public:
    // allocate() returns exactly `size` bytes rounded up to 16. Throws:
    // stack_error(ENOMEM); std::invalid_argument if size == 0.
    [[nodiscard]] stack_view allocate(std::size_t size);
    // deallocate() frees a stack returned by allocate().
    void deallocate(stack_view stack) noexcept;
};

static_assert(stack_allocator<mmap_stack>);
static_assert(stack_allocator<malloc_stack>);

namespace stats {
// live_stacks() is the number of stacks allocated by weft's allocators and
// not yet deallocated, over all threads. Tests use it to find leaks.
[[nodiscard]] WEFT_API std::int64_t live_stacks() noexcept;
}  // namespace stats

namespace detail {

// thread_counter is a statistic that many threads update on hot paths and
// few read. add() touches only the calling thread's slot: a relaxed load and
// store, no read-modify-write and no shared cache line. read() sums every
// thread's slot (and the totals of exited threads) under a lock, so it is
// exact once the updates it should see have happened-before it. A counter
// decremented on another thread than the one that incremented it is fine:
// slots may go negative, the sum stays right. Ids are fixed (constant
// initialisation: usable from any static initialiser).
class thread_counter {
public:
    static constexpr unsigned max_counters = 8;
    explicit constexpr thread_counter(unsigned id) noexcept : id_(id) {}
    WEFT_API void add(std::int64_t delta) noexcept;
    [[nodiscard]] WEFT_API std::int64_t read() const noexcept;

private:
    unsigned id_;
};

// The counters weft keeps (ids 0 and 1).
WEFT_API extern thread_counter live_stacks;
}  // namespace detail

}  // namespace weft
