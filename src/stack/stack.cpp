// stack.cpp: mmap_stack and malloc_stack.

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>

#include "weft/detail/sanitizer.hpp"
#include "weft/detail/support.hpp"
#include "weft/stack.hpp"

namespace weft {

namespace detail {

thread_counter live_stacks{counter_id::live_stacks};

}  // namespace detail

namespace stats {
std::int64_t live_stacks() noexcept { return detail::live_stacks.read(); }
}  // namespace stats

namespace {

std::string stack_error_message(std::size_t requested, const char* operation) {
    return std::string("weft: cannot allocate a stack of ") + std::to_string(requested) + " bytes (" + operation + ")";
}

}  // namespace

stack_error::stack_error(int err, std::size_t requested, const char* operation)
    : std::system_error(err, std::generic_category(), stack_error_message(requested, operation)),
      requested_(requested) {}

std::size_t page_size() noexcept {
    static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    return size;
}

mmap_stack::mmap_stack(std::size_t guard_pages) : guard_pages_(guard_pages) {
    if (guard_pages == 0) throw std::invalid_argument("weft::mmap_stack: guard_pages must be at least 1");
    if (guard_pages > std::numeric_limits<std::size_t>::max() / page_size())
        throw std::invalid_argument("weft::mmap_stack: guard_pages * page size overflows");
}

stack_view mmap_stack::allocate(std::size_t size) {
    if (size == 0) throw std::invalid_argument("weft::mmap_stack::allocate: size must not be zero");
    const std::size_t page = page_size();
    std::size_t usable, total;
    if (!detail::round_up(size, page, usable) || __builtin_add_overflow(usable, guard_size(), &total))
        throw stack_error(EOVERFLOW, size, "size overflows");
    // Reserve the whole range inaccessible, then open everything above the
    // guard: the guard is never backed, the rest is backed on first touch.
    void* p = ::mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw stack_error(errno, size, "mmap");
    auto* base = static_cast<std::byte*>(p) + guard_size();
    if (::mprotect(base, usable, PROT_READ | PROT_WRITE) != 0) {
        // Typically ENOMEM from vm.max_map_count: the split into two
        // mappings is refused. Give the reservation back so nothing leaks.
        const int err = errno;
        ::munmap(p, total);
        throw stack_error(err, size, "mprotect");
    }
    detail::live_stacks.add(1);
    return {base, usable, guard_size()};
}

void mmap_stack::deallocate(stack_view stack) noexcept {
    if (!stack.base) return;
    detail::sanitizer::release_stack(stack.base, stack.size);
    ::munmap(static_cast<std::byte*>(stack.base) - guard_size(), stack.size + guard_size());
    detail::live_stacks.add(-1);
}

stack_view malloc_stack::allocate(std::size_t size) {
    if (size == 0) throw std::invalid_argument("weft::malloc_stack::allocate: size must not be zero");
    std::size_t rounded, total;
    if (!detail::round_up(size, 16, rounded) || __builtin_add_overflow(rounded, guard_bytes, &total))
        throw stack_error(EOVERFLOW, size, "size overflows");
    void* p = std::aligned_alloc(16, total);
    if (!p) throw stack_error(ENOMEM, size, "aligned_alloc");
    // The guard sits in the same block as the stack, below it: an overflow
    // runs into it before it leaves the block, and the heap's own metadata
    // (below the block) is only reached through it.
    auto* guard = static_cast<std::uint64_t*>(p);
    for (std::size_t i = 0; i < guard_bytes / sizeof *guard; ++i) guard[i] = guard_value;
    detail::live_stacks.add(1);
    return {static_cast<std::byte*>(p) + guard_bytes, rounded};
}

bool malloc_stack::guard_intact(stack_view v) noexcept {
    const auto* guard = reinterpret_cast<const std::uint64_t*>(static_cast<const std::byte*>(v.base) - guard_bytes);
    for (std::size_t i = 0; i < guard_bytes / sizeof *guard; ++i)
        if (guard[i] != guard_value) return false;
    return true;
}

void malloc_stack::deallocate(stack_view stack) noexcept {
    if (!stack.base) return;
    if (!guard_intact(stack)) [[unlikely]] {
        // Whatever overwrote the guard may have gone on into the heap's
        // metadata: report without allocating, and do not hand the block to
        // free(), which could crash with a less useful message first.
        char buf[256];
        detail::text_writer w(buf, sizeof buf);
        w.text("weft: malloc_stack overflow detected at release: the guard word below stack [")
            .address(stack.base)
            .text(", ")
            .address(stack.top())
            .text(") was overwritten (the stack's owner wrote past its low end)\n");
        detail::fatal_message(w.c_str());
    }
    detail::sanitizer::release_stack(stack.base, stack.size);
    std::free(static_cast<std::byte*>(stack.base) - guard_bytes);
    detail::live_stacks.add(-1);
}

}  // namespace weft
