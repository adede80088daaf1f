// stack.cpp: mmap_stack and malloc_stack.

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>

#include "weft/detail/sanitizer.hpp"
#include "weft/stack.hpp"

namespace weft {

namespace detail {
std::atomic<std::int64_t> live_stacks{0};
}

namespace stats {
std::int64_t live_stacks() noexcept { return detail::live_stacks.load(std::memory_order_relaxed); }
}  // namespace stats

namespace {

std::string stack_error_message(std::size_t requested, const char* operation) {
    return std::string("weft: cannot allocate a stack of ") + std::to_string(requested) + " bytes (" + operation + ")";
}

// round_up() rounds n up to a multiple of the power of two `to`, reporting
// overflow instead of wrapping.
bool round_up(std::size_t n, std::size_t to, std::size_t& out) noexcept {
    std::size_t sum;
    if (__builtin_add_overflow(n, to - 1, &sum)) return false;
    out = sum & ~(to - 1);
    return true;
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
    if (!round_up(size, page, usable) || __builtin_add_overflow(usable, guard_size(), &total))
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
    detail::live_stacks.fetch_add(1, std::memory_order_relaxed);
    return {base, usable, guard_size()};
}

void mmap_stack::deallocate(stack_view stack) noexcept {
    if (!stack.base) return;
    detail::sanitizer::release_stack(stack.base, stack.size);
    ::munmap(static_cast<std::byte*>(stack.base) - guard_size(), stack.size + guard_size());
    detail::live_stacks.fetch_sub(1, std::memory_order_relaxed);
}

stack_view malloc_stack::allocate(std::size_t size) {
    if (size == 0) throw std::invalid_argument("weft::malloc_stack::allocate: size must not be zero");
    std::size_t rounded;
    if (!round_up(size, 16, rounded)) throw stack_error(EOVERFLOW, size, "size overflows");
    void* p = std::aligned_alloc(16, rounded);
    if (!p) throw stack_error(ENOMEM, size, "aligned_alloc");
    detail::live_stacks.fetch_add(1, std::memory_order_relaxed);
    return {p, rounded};
}

void malloc_stack::deallocate(stack_view stack) noexcept {
    if (!stack.base) return;
    detail::sanitizer::release_stack(stack.base, stack.size);
    std::free(stack.base);
    detail::live_stacks.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace weft
