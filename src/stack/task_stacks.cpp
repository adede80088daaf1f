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
// bytes. The stack of slot k fills the slot but for its lowest guard_bytes,
// which hold its guard words. Their value is zero (guard_value), and
// allocate() never writes them unless something did: so the page under a
// stack is only ever read (the guard check at every switch-out), which maps
// the kernel's shared zero page and costs no resident memory. A slab stack
// costs its touched pages only, and its pages are its own: when its task is
// shrunk (docs/runtime.md, "Idle tasks give their stack back") nothing of
// another stack's lies in the pages it releases. The price: an overflow
// that writes only zeros over the guard words is not caught (one that
// writes a return address, a pointer or any other non-zero word is).
stack_view slab_stack::allocate(std::size_t size) {
    slab_stacks* s = s_;
    const std::size_t slot = s->slot;
    if (size > slot - guard_bytes) throw stack_error(ENOMEM, size, "slab stack (larger than the runtime's stack_size)");
    std::byte* p = nullptr;
    {
        std::lock_guard g(s->mu);
        if (s->free.empty()) {
            // A region holds at least 16 stacks and about 64 MiB.
            const std::size_t per = std::max<std::size_t>(16, (std::size_t{64} << 20) / slot);
            const std::size_t bytes = per * slot + page_size();
            void* r = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (r == MAP_FAILED) throw stack_error(errno, size, "mmap (slab stacks)");
            if (::mprotect(r, page_size(), PROT_NONE) != 0) {
                const int err = errno;
                ::munmap(r, bytes);
                throw stack_error(err, size, "mprotect (slab stacks)");
            }
            // Where transparent huge pages are on for every mapping
            // ("always", Debian's default), the first write to a slot
            // could fault in 2 MiB for 32 stacks' top pages. Advice only:
            // a kernel without THP refuses it, which changes nothing.
            (void)::madvise(r, bytes, MADV_NOHUGEPAGE);
            s->regions.emplace_back(r, bytes);
            s->free.reserve(s->free.size() + per);
            auto* first = static_cast<std::byte*>(r) + page_size();
            for (std::size_t k = per; k-- > 0;) s->free.push_back(first + k * slot);
        }
        p = s->free.back();
        s->free.pop_back();
    }
    // A slot comes back only after its task's end checked the guard (it
    // aborts when the guard was overwritten), so this normally reads zeros
    // and writes nothing.
    auto* guard = reinterpret_cast<std::uint64_t*>(p);
    if (guard[0] != guard_value || guard[1] != guard_value) {
        guard[0] = guard_value;
        guard[1] = guard_value;
    }
    stack_view v;
    v.base = p + guard_bytes;
    v.size = slot - guard_bytes;
    return v;
}

void slab_stack::deallocate(stack_view v) noexcept {
    std::lock_guard g(s_->mu);
    s_->free.push_back(static_cast<std::byte*>(v.base) - guard_bytes);
}

}  // namespace weft::detail
