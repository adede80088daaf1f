// coroutine.cpp: the out-of-line parts of weft::coroutine: entry, misuse
// reporting, destruction by forced unwinding, the current-coroutine slot.

#include "weft/coroutine.hpp"

#include <unistd.h>

#include "internal.hpp"

#include <cstdio>
#include <cstdlib>

namespace weft {

namespace detail {

thread_counter live_coroutines{1};

namespace {
thread_local control_block* current = nullptr;
thread_local bool thread_ready = false;
thread_local unsigned colour = 0;
}  // namespace

void fatal(const control_block* cb, const char* what) noexcept {
    char buf[512];
    int n;
    if (cb && !cb->name.empty())
        n = std::snprintf(buf, sizeof buf, "weft: coroutine '%.*s' %s\n", static_cast<int>(cb->name.size()),
                          cb->name.data(), what);
    else
        n = std::snprintf(buf, sizeof buf, "weft: coroutine <anonymous %p> %s\n", static_cast<const void*>(cb), what);
    if (n > 0) {
        ssize_t ignored = ::write(STDERR_FILENO, buf, static_cast<std::size_t>(n) < sizeof buf ? n : sizeof buf - 1);
        (void)ignored;
    }
    std::abort();
}

unsigned next_colour() noexcept {
    // No stack switch happens between computing this address and using it.
    const unsigned c = colour;
    colour = c + 1 == cache_colours ? 0 : c + 1;
    return c;
}

control_block** current_slot() noexcept {
    // Every path into a coroutine comes through here first, so this is where
    // a thread gets its overflow diagnosis set up, once.
    if (!thread_ready) [[unlikely]] {
        thread_ready = true;
        prepare_thread();
    }
    control_block** slot = &current;
    // Hide the address from the optimiser so each call recomputes it on the
    // thread that runs it.
    asm volatile("" : "+r"(slot));
    return slot;
}

control_block* current_for_signal() noexcept {
    // Called from the fault handler on the interrupted thread: a plain read,
    // no preparation (current_slot() may mmap and install handlers).
    return current;
}

control_block* entry_begin(context::transfer t) noexcept {
    auto* cb = static_cast<control_block*>(t.data);
    sanitizer::arrived(cb->fiber(), true);
    cb->caller = t.from;
    return cb;
}

void entry_caught(control_block* cb) noexcept {
    if (!cb->unwinding) cb->exception = std::current_exception();
}

void entry_end(control_block* cb, bool unwound) noexcept {
    if (cb->unwinding && !unwound)
        fatal(cb, "swallowed weft::forced_unwind while being destroyed (a catch (...) must rethrow it)");
    cb->state.store(coroutine_state::done, std::memory_order_relaxed);
    sanitizer::leave(cb->fiber(), true);
    switch_to(cb->caller, nullptr);
    fatal(cb, "was resumed after it finished");
}

std::string describe(const control_block* cb) {
    if (!cb) return "<empty handle>";
    if (!cb->name.empty()) return "coroutine '" + std::string(cb->name) + "'";
    char buf[64];
    std::snprintf(buf, sizeof buf, "coroutine <anonymous %p>", static_cast<const void*>(cb));
    return buf;
}

void misuse(const control_block* cb, coroutine_errc code) {
    std::string who = describe(cb);
    std::string state = cb ? std::string(" (state: ") + to_string(cb->state.load(std::memory_order_relaxed)) + ")" : "";
    std::string msg;
    switch (code) {
    case coroutine_errc::empty_handle: msg = "weft: operation on an empty coroutine handle (moved-from or default-constructed)"; break;
    case coroutine_errc::resume_done: msg = "weft: resume of " + who + " which is done" + state; break;
    case coroutine_errc::resume_running: msg = "weft: resume of " + who + " which is already running" + state; break;
    case coroutine_errc::resume_self: msg = "weft: resume of " + who + " from inside itself" + state; break;
    case coroutine_errc::yield_outside: msg = "weft: yield of " + who + " from outside that coroutine" + state; break;
    case coroutine_errc::yield_type:
        msg = "weft: this_coroutine::yield() in " + who + ", which yields or receives values; use its yielder" + state;
        break;
    case coroutine_errc::no_result: msg = "weft: result() of " + who + ", which has not returned a value" + state; break;
    case coroutine_errc::stack_too_small: msg = "weft: stack too small for " + who; break;
    case coroutine_errc::shared_stack_busy: msg = "weft: shared stack of " + who + " is busy" + state; break;
    case coroutine_errc::shared_stack_pointer: msg = "weft: pointer into a shared stack that is not live for " + who; break;
    }
    throw coroutine_error(code, msg);
}

void resume_misuse(const control_block* cb) {
    switch (cb->state.load(std::memory_order_relaxed)) {
    case coroutine_state::done: misuse(cb, coroutine_errc::resume_done);
    case coroutine_state::running:
        misuse(cb, *current_slot() == cb ? coroutine_errc::resume_self : coroutine_errc::resume_running);
    default: misuse(cb, coroutine_errc::resume_running);
    }
}

void suspend_misuse(const control_block* cb) {
    if (cb->unwinding && cb->stack.contains(__builtin_frame_address(0)))
        fatal(cb, "tried to yield while being destroyed (weft::forced_unwind must not be swallowed)");
    misuse(cb, coroutine_errc::yield_outside);
}

void stack_too_small(std::string_view name, std::size_t requested, std::size_t needed) {
    std::string who = name.empty() ? std::string("a coroutine") : "coroutine '" + std::string(name) + "'";
    throw coroutine_error(coroutine_errc::stack_too_small, "weft: stack of " + std::to_string(requested) +
                                                               " bytes too small for " + who + " (needs at least " +
                                                               std::to_string(needed) + ")");
}

void rethrow(control_block* cb) {
    std::exception_ptr e = std::move(cb->exception);
    cb->exception = nullptr;
    std::rethrow_exception(std::move(e));
}

void destroy(control_block* cb) noexcept {
    switch (cb->state.load(std::memory_order_relaxed)) {
    case coroutine_state::running: fatal(cb, "was destroyed while running");
    case coroutine_state::suspended: {
        // Resume it with unwinding set: its pending yield throws
        // forced_unwind (see suspend()), and entry_for() lets it end there.
        cb->unwinding = true;
        if (cb->copy) enter_shared_to_destroy(cb);
        switch_in(cb);
        if (cb->copy) leave_shared(cb);
        break;
    }
    case coroutine_state::created:
    case coroutine_state::done: break;
    }
    if (!cb->copy) sanitizer::on_destroy(cb->fiber(), cb->stack.base, cb->stack.size);
    cb->release(cb);
    live_coroutines.add(-1);
}

}  // namespace detail

const char* to_string(coroutine_state s) noexcept {
    switch (s) {
    case coroutine_state::created: return "created";
    case coroutine_state::running: return "running";
    case coroutine_state::suspended: return "suspended";
    case coroutine_state::done: return "done";
    }
    return "invalid";
}

coroutine_error::coroutine_error(coroutine_errc code, const std::string& message)
    : std::logic_error(message), code_(code) {}

namespace this_coroutine {

coroutine_ref get() noexcept { return coroutine_ref(*detail::current_slot()); }

void yield() {
    detail::control_block* cb = *detail::current_slot();
    if (!cb) throw coroutine_error(coroutine_errc::yield_outside, "weft: this_coroutine::yield() outside any coroutine");
    if (!cb->plain) detail::misuse(cb, coroutine_errc::yield_type);
    detail::suspend(cb);
}

}  // namespace this_coroutine

namespace stats {
std::int64_t live_coroutines() noexcept { return detail::live_coroutines.read(); }
}  // namespace stats

}  // namespace weft
