// task_stacks.cpp: the allocators of a runtime's task stacks
// (task_stacks.hpp): guarded stacks from the runtime's pool, and slab
// stacks.

#include "task_stacks.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>

namespace weft::detail {

stack_view guarded_stack::allocate(std::size_t size) {
    stack_view v = s_->pool.allocate(size);
    s_->live.fetch_add(1, std::memory_order_relaxed);
    return v;
}

void guarded_stack::deallocate(stack_view v) noexcept {
    s_->pool.deallocate(v);
    s_->live.fetch_sub(1, std::memory_order_relaxed);
}

slab_stacks::~slab_stacks() {
    for (auto& r : regions) ::munmap(r.first, r.second);
}

// Slab layout: a region is one guard page and `per` slots of `slot`
// bytes. The stack of slot k starts at the slot's bottom and ends
// guard_bytes below its top; those top guard_bytes hold the guard words of
// slot k + 1's stack. So a stack's guard words lie in the page its
// neighbour below keeps its own record in (touched anyway when that slot is
// in use): a slab stack costs about one resident page, not two. Slot 0
// only holds slot 1's guard words (its bottom borders the guard page).
stack_view slab_stack::allocate(std::size_t size) {
    slab_stacks* s = s_;
    const std::size_t slot = s->slot;
    if (size > slot - guard_bytes) throw stack_error(ENOMEM, size, "slab stack (larger than the runtime's stack_size)");
    std::byte* p = nullptr;
    {
        std::lock_guard g(s->mu);
        if (s->free.empty()) {
            // A region holds at least 16 stacks and about 64 MiB.
            const std::size_t per = std::max<std::size_t>(17, (std::size_t{64} << 20) / slot);
            const std::size_t bytes = per * slot + page_size();
            void* r = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (r == MAP_FAILED) throw stack_error(errno, size, "mmap (slab stacks)");
            if (::mprotect(r, page_size(), PROT_NONE) != 0) {
                const int err = errno;
                ::munmap(r, bytes);
                throw stack_error(err, size, "mprotect (slab stacks)");
            }
            s->regions.emplace_back(r, bytes);
            s->free.reserve(s->free.size() + per - 1);
            auto* first = static_cast<std::byte*>(r) + page_size();
            for (std::size_t k = per; k-- > 1;) s->free.push_back(first + k * slot);
        }
        p = s->free.back();
        s->free.pop_back();
    }
    auto* guard = reinterpret_cast<std::uint64_t*>(p - guard_bytes);
    guard[0] = guard_value;
    guard[1] = guard_value;
    stack_view v;
    v.base = p;
    v.size = slot - guard_bytes;
    return v;
}

void slab_stack::deallocate(stack_view v) noexcept {
    std::lock_guard g(s_->mu);
    s_->free.push_back(static_cast<std::byte*>(v.base));
}

}  // namespace weft::detail
