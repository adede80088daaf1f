// copy_stack.cpp: copy-stack mode, the coroutine layer's half of shared
// stacks (the stacks themselves are src/stack/shared_stack.cpp). Everything
// here runs on the resumer's stack, never on the shared stack it copies.

#include <malloc.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>

#include "internal.hpp"
#include "weft/compact_coroutine.hpp"
#include "weft/coroutine.hpp"

namespace weft::detail {

namespace {

std::byte* top_of(const shared_stack_slot& s) noexcept { return static_cast<std::byte*>(s.stack.top()); }

std::uint32_t clamp32(std::size_t n) noexcept { return n > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(n); }

// grow() gives a save area a buffer of at least n bytes: a heap block of
// its own, exactly as large as malloc makes it. The old contents are not
// kept (the caller is about to overwrite them). Throws: bad_alloc, with the
// area unchanged.
void grow(save_area a, std::size_t n) {
    void* fresh = std::malloc(n);
    if (!fresh) throw std::bad_alloc();
    if (a.external) std::free(a.buffer);
    a.buffer = static_cast<std::byte*>(fresh);
    a.capacity = clamp32(::malloc_usable_size(fresh));
    a.external = true;
}

// Every copy-stack coroutine that is not running was suspended by jump()
// (in switch_back(), switch_to(), finish()'s or compact_yield()'s switch), so its
// stack holds, from the context up: the switch frame, the unused gap below
// the suspended function's stack pointer
// (context::frame::gap, the x86-64 red zone: free here, because the
// functions that switch make calls and so are not leaves), then live frames.
// save_bytes() and restore_bytes() skip the gap.
constexpr std::size_t frame_bytes = context::frame::size;
constexpr std::size_t gap_bytes = switch_gap;  // 0 in TSan builds (see jump())
static_assert(WEFT_TSAN || gap_bytes == context::frame::gap);

// A switch frame's slots that hold data (weft/detail/context_frame.hpp):
// fast_jump() stores only the FP control state, the frame pointer and the
// resume address; it loads the other slots (callee-saved registers, real
// values only in frames of the .S jump) into registers it declares
// clobbered, so their bytes need not survive a save. Both kinds of
// copy-stack coroutine switch with fiber_jump(), which does not even store
// the FP control state (fiber_record.hpp's FIBER-F2; a compact coroutine shares
// its thread's): only the frame pointer and the resume address are kept.
// TSan builds switch with the .S jump, whose frames are all data.
using frame_part = context::frame::data_part;
#if WEFT_TSAN
constexpr frame_part frame_parts[] = {{0, frame_bytes}};
#else
constexpr frame_part frame_parts[] = {
    {context::frame::frame_pointer, context::frame::resume_address + 8 - context::frame::frame_pointer}};
#endif
constexpr std::size_t frame_kept = [] {
    std::size_t n = 0;
    for (const frame_part& p : frame_parts) n += p.size;
    return n;
}();

// save_bytes() copies the live bytes of a coroutine suspended at ctx on s
// into its save area: the frame's data slots, then everything above the
// frame and the gap. Returns false when ctx is not where a suspended
// coroutine's context can be. Throws: bad_alloc (nothing changed).
// Always inlined into its two callers: out of line, with the save area
// passed in memory, a copy-stack switch took 7-10 ns longer in S2 and the
// live-bytes series (measured; the instruction count grew by only 60 per
// save, so it is a stall, not the work).
[[gnu::always_inline]] inline bool save_bytes(const void* ctx, save_area a, shared_stack_slot& s) {
    auto* sp = static_cast<std::byte*>(const_cast<void*>(ctx));
    const auto span = static_cast<std::size_t>(top_of(s) - sp);
    if (span < frame_bytes + gap_bytes) [[unlikely]]
        return false;
    const std::size_t above = span - frame_bytes - gap_bytes;
    const std::size_t n = frame_kept + above;
    if (n > a.capacity) grow(a, n);
    // Frames keep their red zones poisoned while suspended; the copy reads
    // them on purpose.
    sanitizer::reading_suspended_frames(sp, span);
    std::byte* out = a.buffer;
    for (const frame_part& p : frame_parts) {
        std::memcpy(out, sp + p.offset, p.size);
        out += p.size;
    }
    std::memcpy(out, sp + frame_bytes + gap_bytes, above);
    a.saved = static_cast<std::uint32_t>(n);
    if (a.saved > a.max_saved) a.max_saved = a.saved;
    return true;
}

// save() saves the bytes of `owner`, a fiber suspended on s.
void save(fiber_record* owner, shared_stack_slot& s) {
    copy_state& cs = *owner->copy;
    if (!save_bytes(owner->ctx, {cs.buffer, cs.saved, cs.capacity, cs.max_saved, cs.external}, s)) [[unlikely]]
        fatal(owner, "is suspended below a switch frame (cannot happen: see switch_to())");
    if (cs.saves++ == 0) s.pool->note_first_save(cs.saved);
}

// save_owner() saves the bytes of the coroutine whose frames are on s, of
// either kind (a compact one's owner word is tagged: compact_owner()).
void save_owner(shared_stack_slot& s) {
    if (!s.owner) return;
    if (compact_record* c = compact_owner_of(s.owner)) {
        const bool first = c->max_saved == 0;
        if (!save_bytes(c->ctx, {c->buffer, c->saved, c->capacity, c->max_saved, c->external}, s)) [[unlikely]]
            compact_fatal(c, "is suspended below a switch frame (cannot happen)");
        if (first) s.pool->note_first_save(c->saved);
    } else {
        save(static_cast<fiber_record*>(s.owner), s);
    }
}

}  // namespace

// restore_bytes() copies saved bytes back to where they were: the context
// they were saved at is the stack's top less what was saved and the gap.
// Returns that context.
void* restore_bytes(const std::byte* buffer, std::uint32_t saved, shared_stack_slot& s) noexcept {
    // Whatever other coroutines left on the stack is dead now: clear ASan's
    // poisoning of their frames, and tell memcheck the memory is writable
    // (it still counts it as below some earlier stack pointer).
    sanitizer::release_stack(s.stack.base, s.stack.size);
    const std::size_t above = saved - frame_kept;
    std::byte* sp = top_of(s) - above - gap_bytes - frame_bytes;
    const std::byte* in = buffer;
    for (const frame_part& p : frame_parts) {
        std::memcpy(sp + p.offset, in, p.size);
        in += p.size;
    }
    std::memcpy(sp + frame_bytes + gap_bytes, in, above);
    return sp;
}

// first_frame() clears the stack for a coroutine that never ran and lays out
// its first frame; returns its context.
void* first_frame(shared_stack_slot& s, context::entry_fn entry) noexcept {
    sanitizer::release_stack(s.stack.base, s.stack.size);
    return context::make(top_of(s), s.stack.size, entry);
}

void save_any_owner(shared_stack_slot& s) { save_owner(s); }

namespace {

// restore() puts cb's saved bytes back, or lays out the first frame of a
// fiber that never ran.
void restore(fiber_record* cb, shared_stack_slot& s) noexcept {
    copy_state& cs = *cb->copy;
    if (!cb->ctx) {
        // (Its FP control state is the fiber layer's business, FIBER-F1 - FIBER-F3 in
        // weft/detail/fiber_record.hpp, not the first frame's.)
        cb->ctx = first_frame(s, cb->start);
        return;
    }
    (void)restore_bytes(cs.buffer, cs.saved, s);
    ++cs.restores;
}

std::string who(const fiber_record* f) { return f ? describe(f) : std::string("code outside any coroutine"); }

// who_owns() names the coroutine whose frames are on a stack (its owner word).
std::string who_owns(const void* owner) {
    if (const compact_record* c = compact_owner_of(owner)) return describe_compact(c);
    return who(static_cast<const fiber_record*>(owner));
}

// take() makes the calling thread the holder of s, or returns false when a
// fiber of this or another thread holds it. It never waits: a scheduler
// must not block on a stack, and two threads waiting for each other's
// stacks would wait forever.
bool take(shared_stack_slot& s) noexcept {
    const void* expected = nullptr;
    return s.holder.compare_exchange_strong(expected, thread_token(), std::memory_order_acquire,
                                            std::memory_order_relaxed);
}

void give_back(shared_stack_slot& s) noexcept { s.holder.store(nullptr, std::memory_order_release); }

// evict_and_restore() puts f's bytes on s, which the caller holds.
void evict_and_restore(fiber_record* f, shared_stack_slot& s) {
    if (s.owner == f) return;
    save_owner(s);
    restore(f, s);
    s.owner = f;
}

}  // namespace

bool enter_shared(fiber_record* f) {
    shared_stack_slot& s = *f->copy->slot;
    if (!take(s)) return false;
    try {
        evict_and_restore(f, s);
    } catch (...) {
        give_back(s);
        throw;
    }
    return true;
}

bool try_enter_copy(fiber_record* f, fiber_state seen) {
    bool entered = false;
    try {
        entered = enter_shared(f);
    } catch (...) {
        f->state.store(seen, std::memory_order_release);
        throw;
    }
    if (!entered) f->state.store(seen, std::memory_order_release);
    return entered;
}

void enter_copy(fiber_record* f, fiber_state seen) {
    if (!try_enter_copy(f, seen)) shared_busy(f);
}

void shared_busy(const fiber_record* f) {
    const shared_stack_slot& s = *f->copy->slot;
    const void* holder = s.holder.load(std::memory_order_relaxed);
    std::string msg = "weft: resume of " + describe(f) + " needs shared stack " + std::to_string(s.index) + " of its pool, ";
    if (holder == thread_token()) {
        // The holder is this thread, so the owner is a fiber running on it.
        msg += "where " + who_owns(s.owner) +
               " is running on this thread (it would overwrite that fiber's frames); fibers that run nested need "
               "distinct stacks: use a shared_stack_pool with more stacks";
    } else {
        msg += "which a fiber running on another thread uses right now; try again once it has switched out (weft "
               "never makes a thread wait for a shared stack)";
    }
    throw coroutine_error(coroutine_errc::shared_stack_busy, msg);
}

void enter_shared_to_destroy(fiber_record* f) noexcept {
    shared_stack_slot& s = *f->copy->slot;
    // Destruction cannot report "busy", so it is the one place that waits
    // for a stack another thread uses (docs/safety.md, Copy stacks).
    unsigned spins = 0;
    while (!take(s)) {
        if (s.holder.load(std::memory_order_relaxed) == thread_token())
            fatal(f, "was destroyed while suspended by a fiber running on the same shared stack (its frames cannot "
                     "be restored to unwind them); use a shared_stack_pool with more stacks");
        if (++spins > 64) std::this_thread::yield();
    }
    try {
        evict_and_restore(f, s);
    } catch (...) {
        fatal(f, "could not be destroyed: no memory to save the fiber whose frames were on its shared stack");
    }
}

void leave_shared(fiber_record* f, bool finished) noexcept {
    shared_stack_slot& s = *f->copy->slot;
    // A finished fiber leaves nothing worth saving.
    if (finished) s.owner = nullptr;
    give_back(s);
}

void* copy_allocate(std::size_t bytes, std::size_t align, std::size_t* usable) {
    void* p = align <= alignof(std::max_align_t) ? std::malloc(bytes)
                                                 : std::aligned_alloc(align, (bytes + align - 1) & ~(align - 1));
    if (!p) throw std::bad_alloc();
    *usable = ::malloc_usable_size(p);
    return p;
}

void copy_created(fiber_record* cb, copy_state* cs, shared_stack_pool& pool, std::byte* buffer,
                  std::size_t capacity) noexcept {
    cb->copy = cs;
    cb->copy_mode = true;
    cs->slot = &pool.assign();
    cs->buffer = buffer;
    cs->capacity = clamp32(capacity);
    cb->stack = cs->slot->stack;
    cb->requested_stack = pool.stack_size();
    // The stack is registered with LeakSanitizer and valgrind once, by its
    // pool; only TSan needs a fiber per coroutine.
    sanitizer::on_create_copy(cb->tools());
    live_coroutines.add(1);
    register_fiber(cb);
}

void copy_released(fiber_record* cb) noexcept {
    copy_state& cs = *cb->copy;
    sanitizer::on_destroy_copy(cb->tools());
    if (cs.external) std::free(cs.buffer);
    cs.slot->pool->unassign();
}

// ---------------------------------------------------------------- debug check

void check_pointer_for(const void* p, const fiber_record* target, const char* direction) {
    if (!p) return;
    shared_stack_slot* s = find_shared_slot(p);
    if (!s) return;
    const void* me = thread_token();
    const void* expected = nullptr;
    const bool took = s->holder.compare_exchange_strong(expected, me, std::memory_order_acquire, std::memory_order_relaxed);
    // In use on another thread: its owner and frames are changing, so
    // nothing can be said.
    if (!took && expected != me) return;
    // The owner's suspended context (either kind of copy-stack coroutine).
    const void* owner = s->owner;
    const compact_record* compact = compact_owner_of(owner);
    const void* owner_ctx = !owner ? nullptr : compact ? compact->ctx : static_cast<const fiber_record*>(owner)->ctx;
    const auto* a = static_cast<const std::byte*>(p);
    const bool on_target = target && target->copy && target->copy->slot == s;
    bool live = true;
    if (took) {
        if (on_target) {
            // Once target runs, its bytes are what lies on the stack.
            live = target->ctx && a >= static_cast<const std::byte*>(target->ctx);
        } else {
            // The stack stays as it is while target runs.
            live = owner_ctx && a >= static_cast<const std::byte*>(owner_ctx);
        }
        give_back(*s);
    } else if (on_target && target == owner) {
        // target runs on this thread, on this stack, right now (a value
        // yielded to a resumer that is a copy-stack coroutine): everything
        // below the caller's frames is dead.
        live = a >= static_cast<const std::byte*>(__builtin_frame_address(0));
    }
    // Otherwise the stack runs a coroutine further up this thread's chain of
    // resumers, whose frames are live (or resume() reports busy).
    if (live) return;
    char addr[32];
    std::snprintf(addr, sizeof addr, "%p", p);
    std::string where;
    if (owner && owner != target && owner_ctx && a >= static_cast<const std::byte*>(owner_ctx))
        where = "the saved stack of " + who_owns(owner);
    else
        where = "unused memory of shared stack " + std::to_string(s->index) + " of a pool";
    throw coroutine_error(coroutine_errc::shared_stack_pointer, "weft: pointer " + std::string(addr) + " into " + where +
                                                                     " " + direction + " " + who(target) +
                                                                     " (a copy-stack coroutine's frames are only "
                                                                     "valid while its bytes are on its shared stack)");
}

}  // namespace weft::detail

namespace weft {

void check_shared_stack_pointer(const void* p) {
    if (detail::shared_pools_exist()) detail::check_pointer_for(p, detail::this_thread_state()->current, "used by");
}

}  // namespace weft
