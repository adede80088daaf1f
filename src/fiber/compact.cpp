// compact.cpp: the out-of-line half of weft::compact_coroutine
// (weft/compact_coroutine.hpp): creation, placing a coroutine's bytes on
// its shared stack, refusals and misuse, the end of its body, its forced
// unwind and its destruction. The bytes are copied by copy_stack.cpp, which
// both kinds of copy-stack coroutine share.

#include "weft/compact_coroutine.hpp"

#include <unwind.h>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>

#include "weft/detail/support.hpp"

#include "internal.hpp"

namespace weft::detail {

static_assert(sizeof(compact_record) <= 80 || with_tools, "the compact record grew past 80 bytes");
static_assert(sizeof(_Unwind_Exception) <= sizeof(compact_frame::unwind_object) &&
                  alignof(_Unwind_Exception) <= alignof(compact_frame),
              "compact_frame::unwind_object must hold an _Unwind_Exception");

std::string describe_compact(const compact_record* r) { return describe_named("compact coroutine", {}, r); }

void compact_fatal(const compact_record* r, const char* what) noexcept {
    fatal_named("compact coroutine", {}, r, what);
}

namespace {

void give_back(shared_stack_slot& s) noexcept { s.holder.store(nullptr, std::memory_order_release); }

[[noreturn]] void refuse(const compact_record* r, coroutine_errc code, const std::string& what) {
    throw coroutine_error(code, "weft: resume of " + describe_compact(r) + " " + what);
}

}  // namespace

void compact_created(compact_record* r, shared_stack_pool& pool, std::byte* buffer, std::size_t capacity) noexcept {
    r->slot = &pool.assign();
    r->buffer = buffer;
    r->capacity = capacity > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(capacity);
    sanitizer::on_create_copy(r->tools());
}

void compact_refused(compact_record* r, const void* holder, bool took) {
    if (!r)
        throw coroutine_error(coroutine_errc::empty_handle,
                              "weft: operation on an empty compact_coroutine handle (moved-from or default-constructed)");
    shared_stack_slot& s = *r->slot;
    const fiber_state st = r->state.load(std::memory_order_relaxed);
    if (took) {
        // It holds the stack, so r is not running (COMPACT-C1): it is done.
        give_back(s);
        refuse(r, coroutine_errc::resume_done, "which is done");
    }
    const bool here = holder == thread_token();
    if (st == fiber_state::running) {
        // Running here means the caller is r's own code or code it resumed.
        if (here) refuse(r, coroutine_errc::resume_self, "from inside itself (state: running)");
        refuse(r, coroutine_errc::resume_running, "which is already running on another thread (state: running)");
    }
    std::string msg = "needs shared stack " + std::to_string(s.index) + " of its pool, ";
    if (here)
        msg += "where a coroutine running on this thread has its frames (it would overwrite them); coroutines that "
               "run nested need distinct stacks: use a shared_stack_pool with more stacks";
    else
        msg += "which a coroutine running on another thread uses right now; try again once it has switched out (weft "
               "never makes a thread wait for a shared stack)";
    refuse(r, coroutine_errc::shared_stack_busy, msg);
}

void compact_place(compact_record* r) {
    shared_stack_slot& s = *r->slot;
    try {
        save_any_owner(s);
    } catch (...) {
        give_back(s);
        throw;
    }
    if (r->ctx)
        (void)restore_bytes(r->buffer, r->saved, s);
    else
        r->ctx = first_frame(s, r->ops->entry);
    s.owner = compact_owner(r);
}

void compact_yield_misuse(compact_record* r) {
    if (r->state.load(std::memory_order_relaxed) == fiber_state::running && r->slot->stack.contains(stack_pointer()) &&
        r->frame->unwind)
        compact_fatal(r, "yielded while being destroyed (a catch (...) must rethrow weft::forced_unwind; a destructor "
                         "must not yield)");
    throw coroutine_error(coroutine_errc::yield_outside,
                          "weft: yield of " + describe_compact(r) + " from outside that coroutine (state: " +
                              to_string(r->state.load(std::memory_order_relaxed)) + ")");
}

void compact_caught(compact_record* r) noexcept {
    compact_frame& fr = *r->frame;
    if (fr.unwind) {
        fr.unwind_caught = true;  // FIBER-U2: ending this handler ends the forced unwind
    } else {
        ::new (static_cast<void*>(fr.error)) std::exception_ptr(std::current_exception());
        fr.failed = true;
    }
}

void compact_finish(compact_record* r) noexcept {
    if (r->frame->unwind && !r->frame->unwind_caught)
        compact_fatal(r, "swallowed weft::forced_unwind while being destroyed (a catch (...) must rethrow it)");
    sanitizer::leave(r->tools(), r->tools(), true);
    jump<compact_record>(r->resumer, tag(r, switch_kind::finish));
    compact_fatal(r, "was resumed after it finished");
}

void compact_rethrow(compact_frame& fr) {
    auto* held = std::launder(reinterpret_cast<std::exception_ptr*>(fr.error));
    std::exception_ptr e = std::move(*held);
    held->~exception_ptr();
    fr.failed = false;
    std::rethrow_exception(std::move(e));
}

// ---- the forced unwind: fiber.cpp's FIBER-U1 - FIBER-U3, with the object in the
// destroyer's compact_frame.
namespace {

// "WEFTCUNW": a foreign exception class (libsupc++ never looks for a
// __cxa_exception around it).
constexpr _Unwind_Exception_Class compact_unwind_class = 0x5745465443554e57ull;

compact_frame* frame_of(_Unwind_Exception* e) noexcept {
    return reinterpret_cast<compact_frame*>(reinterpret_cast<unsigned char*>(e) - offsetof(compact_frame, unwind_object));
}

void compact_unwind_cleanup(_Unwind_Reason_Code, _Unwind_Exception* e) {
    compact_frame* fr = frame_of(e);
    if (fr->unwind_caught) return;
    compact_fatal(fr->record, "swallowed weft::forced_unwind while being destroyed (a catch (...) must rethrow it)");
}

_Unwind_Reason_Code compact_unwind_stop(int, _Unwind_Action actions, _Unwind_Exception_Class, _Unwind_Exception* e,
                                        struct _Unwind_Context*, void*) {
    if (actions & _UA_END_OF_STACK) [[unlikely]]
        compact_fatal(frame_of(e)->record, "was unwound past its entry (weft::forced_unwind found no entry to stop at)");
    return _URC_NO_REASON;
}

}  // namespace

void compact_raise_unwind(compact_record* r) {
    compact_frame& fr = *r->frame;
    fr.record = r;
    fr.unwind_caught = false;
    char buf[96];
    forced_unwind_from(fr.unwind_object, compact_unwind_class, compact_unwind_cleanup, compact_unwind_stop, buf,
                       sizeof buf);
    compact_fatal(r, buf);
}

void compact_destroy(compact_record* r) noexcept {
    shared_stack_slot& s = *r->slot;
    fiber_state st = r->state.load(std::memory_order_acquire);
    if (st == fiber_state::running) compact_fatal(r, "was destroyed while running");
    if (st == fiber_state::suspended) {
        // Destruction cannot report "busy", so it waits for a stack another
        // thread uses (as fiber destruction does, docs/safety.md).
        const void* me = thread_token();
        unsigned spins = 0;
        for (;;) {
            const void* holder = nullptr;
            if (s.holder.compare_exchange_strong(holder, me, std::memory_order_acquire, std::memory_order_relaxed)) break;
            if (holder == me)
                compact_fatal(r, "was destroyed while suspended by a coroutine running on the same shared stack (its "
                                 "frames cannot be restored to unwind them); use a shared_stack_pool with more stacks");
            if (++spins > 64) std::this_thread::yield();
        }
        // Holding the stack, r cannot be running (COMPACT-C1); another thread may
        // have finished it meanwhile.
        st = r->state.load(std::memory_order_relaxed);
        if (st == fiber_state::suspended) {
            if (s.owner != compact_owner(r)) {
                try {
                    compact_place(r);
                } catch (...) {
                    compact_fatal(r, "could not be destroyed: no memory to save the coroutine whose frames were on "
                                     "its shared stack");
                }
            }
            compact_frame fr;
            fr.unwind = true;
            fr.unwind_caught = false;
            bool yielded = true;
            try {
                yielded = compact_enter(r, fr, this_thread_state());
            } catch (...) {
                compact_fatal(r, "let an exception escape while being destroyed");
            }
            if (yielded) compact_fatal(r, "yielded while being destroyed");
        } else {
            give_back(s);
        }
    }
    // created or done: nothing of it is on the stack that matters (a
    // created one never touched it; a done one gave up ownership).
    sanitizer::on_destroy_copy(r->tools());
    if (r->external) std::free(r->buffer);
    shared_stack_pool* pool = s.pool;
    r->ops->destroy_body(r);  // the block's destructor: the body, then the record
    std::free(static_cast<void*>(r));
    pool->unassign();
}

copy_stack_stats compact_stats(const compact_record* r) noexcept {
    return {r->saved, r->max_saved, 0, 0};
}

}  // namespace weft::detail
