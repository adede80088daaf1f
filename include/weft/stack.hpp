// weft/stack.hpp: layer L1, stacks for coroutines.
//
// A stack allocator is anything that satisfies weft::stack_allocator:
//   allocate(size) -> stack_view      usable memory of at least `size` bytes
//   deallocate(view) noexcept         gives back exactly what allocate returned
// weft ships mmap_stack (guard page, lazily backed) and malloc_stack (heap,
// guard word).
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <system_error>
#include <type_traits>

#include "weft/config.hpp"
#include "weft/detail/support.hpp"

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
        // One unsigned compare: below base, a - b wraps to a huge value.
        return reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(base) < size;
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

// malloc_stack allocates stacks from the heap, 16-byte aligned, with no
// guard page but a guard word: the guard_bytes just below each stack's base
// hold guard_value, and deallocate() aborts with a message if they were
// overwritten. An overflow that reaches them is thus reported when the stack
// is released (and wherever else its owner checks guard_intact() or
// guard_word()); one that skips over them, or does not reach them, is not
// caught and corrupts the heap (docs/safety.md, malloc_stack overflow). For
// tests, debugging under tools that dislike mappings, and very small stacks.
class WEFT_API malloc_stack {
public:
    // guard_bytes is the size of the guard just below base: two words of
    // guard_value. It keeps base 16-byte aligned.
    static constexpr std::size_t guard_bytes = 16;
    // guard_value is the pattern of every guard word: not a canonical
    // address nor a small integer, so a stray pointer or count written there
    // does not pass for it.
    static constexpr std::uint64_t guard_value = 0x5745'4654'4755'4152;  // "WEFTGUAR"

    // allocate() returns exactly `size` bytes rounded up to 16, with base
    // 16-byte aligned and the guard (guard_bytes, filled with guard_value)
    // just below base, in the same heap block. The view's guard member stays
    // 0: the guard word is readable and writable, so no fault ever lands in
    // it. Throws: stack_error(EOVERFLOW) when size plus the guard overflows,
    // stack_error(ENOMEM); std::invalid_argument if size == 0.
    [[nodiscard]] stack_view allocate(std::size_t size);
    // deallocate() checks the guard and frees a stack returned by
    // allocate(). An empty view is ignored. If the guard was overwritten it
    // writes "weft: malloc_stack overflow detected at release: ..." with the
    // stack's range to stderr and aborts, freeing nothing.
    void deallocate(stack_view stack) noexcept;

    // guard_word() is the address of the guard word nearest the stack (the
    // 8 bytes just below base), the first one a downward overflow reaches.
    // It holds guard_value until something overwrites it; comparing the two
    // is one load, cheap enough for every switch. guard_intact() checks the
    // whole guard. Requires: v came from allocate() of a malloc_stack and
    // was not deallocated.
    [[nodiscard]] static const std::uint64_t* guard_word(stack_view v) noexcept {
        return reinterpret_cast<const std::uint64_t*>(static_cast<const std::byte*>(v.base) - sizeof(std::uint64_t));
    }
    // guard_intact() says whether every word of v's guard still holds
    // guard_value. Requires: as for guard_word().
    [[nodiscard]] static bool guard_intact(stack_view v) noexcept;
};

static_assert(stack_allocator<mmap_stack>);
static_assert(stack_allocator<malloc_stack>);

namespace stats {
// live_stacks() is the number of stacks allocated by weft's allocators and
// not yet deallocated, over all threads. Tests use it to find leaks.
[[nodiscard]] WEFT_API std::int64_t live_stacks() noexcept;
}  // namespace stats

namespace detail {

// thread_counter (weft/detail/support.hpp) is included from here for the
// users that know it through this header.

// live_stacks counts the stacks of stats::live_stacks() (counter_id::live_stacks).
WEFT_API extern thread_counter live_stacks;
}  // namespace detail

}  // namespace weft
