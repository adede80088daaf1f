// fiber.cpp: the out-of-line parts of weft::fiber: per-thread state, the end
// of a fiber, unwinding, destruction, misuse reporting.

#include "weft/fiber.hpp"

#include <unistd.h>

#include <unwind.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <type_traits>

#include "weft/detail/support.hpp"

#include "internal.hpp"

// The C++ runtime's per-thread exception state (Itanium C++ ABI 2.2.2);
// libstdc++ and libc++abi both export it. Declared here rather than through
// <cxxabi.h> so that only its documented prefix is relied on.
namespace __cxxabiv1 {
struct __cxa_eh_globals;
extern "C" __cxa_eh_globals* __cxa_get_globals() noexcept;
}  // namespace __cxxabiv1

namespace weft {

namespace detail {

thread_counter live_coroutines{counter_id::live_coroutines};

namespace {
thread_local thread_state state_of_thread;
thread_local unsigned colour = 0;
}  // namespace

namespace {
const char* kind_of(const fiber_record* f) noexcept {
    return f && f->flavour == fiber_flavour::fiber ? "fiber" : "coroutine";
}
}  // namespace

void fatal_named(const char* kind, std::string_view name, const void* address, const char* what) noexcept {
    char buf[512];
    text_writer w(buf, sizeof buf);
    w.text("weft: ");
    char named[300];
    format_named(named, sizeof named, kind, name, address);
    w.text(named).text(" ").text(what);
    fatal_message(w.c_str());
}

void fatal(const fiber_record* f, const char* what) noexcept {
    fatal_named(kind_of(f), f ? f->name : std::string_view{}, f, what);
}

unsigned next_colour() noexcept {
    // No switch happens between computing this address and using it.
    const unsigned c = colour;
    colour = c + 1 == cache_colours ? 0 : c + 1;
    return c;
}

[[gnu::noinline]] thread_state* this_thread_state() noexcept {
    thread_state* ts = &state_of_thread;
    // Every path into a fiber comes through here first, so this is where a
    // thread gets its overflow diagnosis set up, once.
    if (!ts->eh) [[unlikely]] {
        ts->eh = reinterpret_cast<eh_state*>(__cxxabiv1::__cxa_get_globals());
        ts->token = thread_token();
        prepare_thread();
    }
    // Hide the address from the optimiser so each call recomputes it on the
    // thread that runs it.
    asm volatile("" : "+r"(ts));
    return ts;
}

fiber_record* current_for_signal() noexcept {
    // Called from the fault handler on the interrupted thread: a plain read,
    // no preparation (this_thread_state() may mmap and install handlers).
    return state_of_thread.current;
}

// ---- the forced unwind (weft/fiber.hpp, forced_unwind) --------------------------
//
// The exception object lives in the record of the fiber whose stack is
// unwound (the code running on this thread when it was raised): it must
// outlive every frame the unwinder pops (the landing pads it runs call
// destructors, which reuse the stack below them), a fiber may be unwound on
// one thread, suspend in a destructor and go on on another (so no
// thread-local will do), and a cancellation must not need memory (the
// out-of-mappings death test cancels tasks with none left). Only that
// fiber's entry catches it.
//   FIBER-U1  the object is "deleted" (unwind_cleanup runs) exactly once, by
//             __cxa_end_catch when a handler ends without rethrowing; a rethrow
//             (`throw;`) resumes the same forced unwind (_Unwind_Resume_or_Rethrow)
//             with the same object;
//   FIBER-U2  the handler that may end it is entry_for()'s, which sets
//             f->unwind_caught first; any other handler that ends it swallowed it,
//             and unwind_cleanup aborts naming f;
//   FIBER-U3  unwind_stop lets every frame unwind (the personality routines run
//             the cleanups and enter catch (...) and catch (abi::__forced_unwind&)
//             clauses); reaching the end of the stack means no entry was there:
//             raised outside any fiber, or the entry's frame was lost. It aborts.
namespace {

static_assert(sizeof(_Unwind_Exception) <= sizeof(fiber_record::unwind_object) &&
                  alignof(_Unwind_Exception) <= alignof(fiber_record),
              "fiber_record::unwind_object must hold an _Unwind_Exception");
static_assert(std::is_standard_layout_v<fiber_record>, "offsetof(fiber_record, unwind_object) is used");
// The fields of a round trip fit the record's first two cache lines (the
// comment at fiber_record).
static_assert(offsetof(fiber_record, stack) + sizeof(stack_view) <= 128, "the hot fields outgrew two cache lines");

// "WEFTFUNW": not a C++ exception class, so libsupc++ treats the object as
// foreign (never looks for a __cxa_exception around it).
constexpr _Unwind_Exception_Class unwind_class = 0x5745465446554e57ull;

// Raised outside any fiber there is no record: this thread's own object
// (that unwind ends in an abort, FIBER-U3).
thread_local _Unwind_Exception outside_object;

fiber_record* owner_of(_Unwind_Exception* e) noexcept {
    if (e == &outside_object) return nullptr;
    return reinterpret_cast<fiber_record*>(reinterpret_cast<unsigned char*>(e) - offsetof(fiber_record, unwind_object));
}

void unwind_cleanup(_Unwind_Reason_Code, _Unwind_Exception* e) {
    fiber_record* f = owner_of(e);
    if (f && f->unwind_caught) return;
    if (f) fatal(f, "swallowed weft::forced_unwind while being destroyed, unwound or canceled (a catch (...) must rethrow it)");
    fatal_message("weft: weft::forced_unwind raised outside any coroutine was swallowed");
}

_Unwind_Reason_Code unwind_stop(int, _Unwind_Action actions, _Unwind_Exception_Class, _Unwind_Exception* e,
                                struct _Unwind_Context*, void*) {
    if (actions & _UA_END_OF_STACK) [[unlikely]] {
        fiber_record* f = owner_of(e);
        if (f) fatal(f, "was unwound past its entry (weft::forced_unwind found no entry to stop at)");
        fatal_message("weft: weft::forced_unwind raised outside any coroutine reached the end of the thread's stack");
    }
    return _URC_NO_REASON;
}

}  // namespace

void forced_unwind_from(void* storage, _Unwind_Exception_Class exception_class, _Unwind_Exception_Cleanup_Fn cleanup,
                        _Unwind_Stop_Fn stop, char* failure, std::size_t n) {
    _Unwind_Exception* e = ::new (storage) _Unwind_Exception{};
    e->exception_class = exception_class;
    e->exception_cleanup = cleanup;
#if WEFT_ASAN
    // What ASan's __cxa_throw interceptor does for a C++ throw: the frames
    // about to be popped may hold poisoned redzones.
    __asan_handle_no_return();
#endif
    const _Unwind_Reason_Code rc = _Unwind_ForcedUnwind(e, stop, nullptr);
    // Only returns when it could not start (no unwind information).
    std::snprintf(failure, n, "could not be unwound (_Unwind_ForcedUnwind returned %d)", static_cast<int>(rc));
}

void raise_forced_unwind() {
    fiber_record* f = this_thread_state()->current;
    void* where = f ? static_cast<void*>(f->unwind_object) : static_cast<void*>(&outside_object);
    if (f) {
        f->unwind_raised = true;
        f->unwind_caught = false;
    }
    char buf[96];
    forced_unwind_from(where, unwind_class, unwind_cleanup, unwind_stop, buf, sizeof buf);
    if (f) fatal(f, buf);
    fatal_message("weft: _Unwind_ForcedUnwind failed outside any coroutine");
}

bool forced_unwind_in_flight() noexcept {
    const fiber_record* f = this_thread_state()->current;
    return f && f->unwind_raised;
}

void entry_caught(fiber_record* f) noexcept {
    if (!f->unwinding) f->exception = std::current_exception();
}

void finish(fiber_record* f, bool unwound) noexcept {
    if (f->unwinding && !unwound)
        fatal(f, "swallowed weft::forced_unwind while being destroyed or unwound (a catch (...) must rethrow it)");
    if (f->guard_word && *f->guard_word != f->guard_value) guard_broken(f);
    leave_to_resumer<false>(f, f->ts);
    sanitizer::leave(f->tools(), f->tools(), true);
    jump(f->resumer, tag(f, switch_kind::finish));
    fatal(f, "was resumed after it finished");
}

bool unwind(fiber_record* f) {
    fiber_state seen = f->state.load(std::memory_order_acquire);
    for (;;) {
        if (seen == fiber_state::done) return true;
        if (seen == fiber_state::running) misuse(f, coroutine_errc::unwind_running);
        // A fiber that never ran has nothing to unwind: it is done at once.
        const fiber_state to = seen == fiber_state::created ? fiber_state::done : fiber_state::running;
        if (f->state.compare_exchange_weak(seen, to, std::memory_order_acquire, std::memory_order_relaxed)) break;
    }
    if (seen == fiber_state::created) return true;
    if (f->copy && !try_enter_copy(f, seen)) return false;  // f is back in `seen`
    // Its pending suspend() throws forced_unwind (see suspend()), and the
    // entry lets the fiber end there.
    f->unwinding = true;
    enter(f);
    return true;
}

void destroy(fiber_record* f) noexcept {
    switch (f->state.load(std::memory_order_acquire)) {
    case fiber_state::running: fatal(f, "was destroyed while running");
    case fiber_state::suspended:
        if (f->copy) {
            enter_shared_to_destroy(f);
            f->state.store(fiber_state::running, std::memory_order_relaxed);
            f->unwinding = true;
            enter(f);
        } else {
            try {
                (void)unwind(f);
            } catch (...) {
                fatal(f, "could not be unwound");
            }
        }
        break;
    case fiber_state::created:
    case fiber_state::done: break;
    }
    if (f->guard_word && *f->guard_word != f->guard_value) guard_broken(f);
    if (!f->copy) sanitizer::on_destroy(f->tools(), f->stack.base, f->stack.size);
    unregister_fiber(f);
    f->release(f);
    live_coroutines.add(-1);
}

std::string describe(const fiber_record* f) {
    if (!f) return "<empty handle>";
    return describe_named(kind_of(f), f->name, f);
}

void misuse(const fiber_record* f, coroutine_errc code) {
    std::string who = describe(f);
    std::string state = f ? std::string(" (state: ") + to_string(f->state.load(std::memory_order_relaxed)) + ")" : "";
    std::string msg;
    switch (code) {
    case coroutine_errc::empty_handle: msg = "weft: operation on an empty coroutine handle (moved-from or default-constructed)"; break;
    case coroutine_errc::resume_done: msg = "weft: resume of " + who + " which is done" + state; break;
    case coroutine_errc::resume_running: msg = "weft: resume of " + who + " which is already running" + state; break;
    case coroutine_errc::resume_self: msg = "weft: resume of " + who + " from inside itself" + state; break;
    case coroutine_errc::yield_outside: msg = "weft: yield of " + who + " from outside that " + kind_of(f) + state; break;
    case coroutine_errc::yield_type:
        msg = "weft: this_coroutine::yield() in " + who + ", which yields or receives values; use its yielder" + state;
        break;
    case coroutine_errc::no_result: msg = "weft: result() of " + who + ", which has not returned a value" + state; break;
    case coroutine_errc::stack_too_small: msg = "weft: stack too small for " + who; break;
    case coroutine_errc::shared_stack_busy: msg = "weft: shared stack of " + who + " is busy" + state; break;
    case coroutine_errc::shared_stack_pointer: msg = "weft: pointer into a shared stack that is not live for " + who; break;
    case coroutine_errc::unwind_running: msg = "weft: unwind of " + who + " which is running" + state; break;
    }
    throw coroutine_error(code, msg);
}

void resume_misuse(const fiber_record* f, fiber_state seen) {
    switch (seen) {
    case fiber_state::done: misuse(f, coroutine_errc::resume_done);
    case fiber_state::running:
        misuse(f, this_thread_state()->current == f ? coroutine_errc::resume_self : coroutine_errc::resume_running);
    default: misuse(f, coroutine_errc::resume_running);
    }
}

void suspend_misuse(const fiber_record* f) {
    if (!f) throw coroutine_error(coroutine_errc::yield_outside, "weft: this_fiber::suspend() outside any fiber");
    if (f->unwinding && this_thread_state()->current == f)
        fatal(f, "tried to yield while being destroyed or unwound (weft::forced_unwind must not be swallowed)");
    misuse(f, coroutine_errc::yield_outside);
}

void suspend_chain(fiber_record* f, after_switch_fn hook, void* arg) {
    thread_state* ts = this_thread_state();
    fiber_record* cur = ts->current;
    if (cur == f) return suspend(f, hook, arg);
    // f must be an ancestor of the running fiber on this thread, and every
    // fiber from there up to f must keep its frames where they are: a
    // copy-stack fiber's shared stack cannot stay held while f is away (it
    // may come back on another thread).
    bool found = false;
    for (fiber_record* p = cur; p; p = p->parent) {
        if (p->copy || p->unwinding) {
            if (p->unwinding) suspend_misuse(p);
            throw coroutine_error(coroutine_errc::yield_outside,
                                  "weft: suspend_outer of " + describe(f) + " from inside " + describe(p) +
                                      ", which runs on a shared stack (copy-stack fibers cannot stay suspended "
                                      "inside another fiber)");
        }
        if (p == f) {
            found = true;
            break;
        }
    }
    if (!found) misuse(f, coroutine_errc::yield_outside);
    switch_back(f, cur, ts, hook, arg);
}

void switch_misuse(const fiber_record* self, const fiber_record* next, fiber_state seen) {
    if (!next) misuse(nullptr, coroutine_errc::empty_handle);
    if (next == self) misuse(next, coroutine_errc::resume_self);
    resume_misuse(next, seen);
}

void guard_broken(const fiber_record* f) noexcept {
    fatal(f, "overflowed its malloc_stack: the guard word below the stack was overwritten (use a larger stack, or "
             "mmap/pooled stacks, whose guard page stops an overflow where it happens)");
}

void stack_too_small(std::string_view name, std::size_t requested, std::size_t needed, bool shared, bool fiber) {
    const std::string kind = fiber ? "fiber" : "coroutine";
    std::string who = name.empty() ? "a " + kind : kind + " '" + std::string(name) + "'";
    if (shared)
        throw coroutine_error(coroutine_errc::stack_too_small,
                              "weft: " + who + " asked for a stack of " + std::to_string(requested) +
                                  " bytes, but the stacks of its shared_stack_pool have " + std::to_string(needed) +
                                  " (copy-stack mode: the pool sets the size; use a pool with larger stacks)");
    throw coroutine_error(coroutine_errc::stack_too_small, "weft: stack of " + std::to_string(requested) +
                                                               " bytes too small for " + who + " (needs at least " +
                                                               std::to_string(needed) + ")");
}

void rethrow(fiber_record* f) {
    std::exception_ptr e = std::move(f->exception);
    f->exception = nullptr;
    std::rethrow_exception(std::move(e));
}

}  // namespace detail

const char* to_string(fiber_state s) noexcept {
    switch (s) {
    case fiber_state::created: return "created";
    case fiber_state::running: return "running";
    case fiber_state::suspended: return "suspended";
    case fiber_state::done: return "done";
    }
    return "invalid";
}

coroutine_error::coroutine_error(coroutine_errc code, const std::string& message)
    : std::logic_error(message), code_(code) {}

namespace this_fiber {

fiber_ref current() noexcept { return fiber_ref(detail::this_thread_state()->current); }

void suspend_outer(fiber_ref f, after_switch_fn hook, void* arg) {
    if (!f) detail::misuse(nullptr, coroutine_errc::empty_handle);
    detail::suspend_chain(f.record(), hook, arg);
}

void switch_to(fiber_ref next, after_switch_fn hook, void* arg) {
    detail::fiber_record* f = detail::this_thread_state()->current;
    if (!f) throw coroutine_error(coroutine_errc::yield_outside, "weft: this_fiber::switch_to() outside any fiber");
    if (!next) detail::misuse(nullptr, coroutine_errc::empty_handle);
    detail::switch_to(f, next.record(), hook, arg);
}

}  // namespace this_fiber

namespace stats {
std::int64_t live_coroutines() noexcept { return detail::live_coroutines.read(); }
}  // namespace stats

}  // namespace weft
