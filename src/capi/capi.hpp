// src/capi/capi.hpp: what the C API's sources share: the handle table, the
// exception-to-result mapping, and the boundary that stops a cancellation
// before it reaches C frames. Internal to layer L8.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "weft/fiber.hpp"
#include "weft/weft.h"

namespace weft::capi {

// kind tells the objects in the handle table apart, so that a handle of one
// kind passed where another is expected is WEFT_INVALID_HANDLE.
enum class kind : std::uint8_t { coroutine = 1, runtime, task, channel, mutex, cond, stream, listener, signals };

// object is the base of everything a handle names. refs counts the table's
// reference (dropped by remove()) and one per call in progress (acquire()),
// so a handle destroyed by one thread while another thread's call uses the
// object leaves that call a live object; the last release() deletes it.
struct object {
    explicit object(kind k) noexcept : what(k) {}
    virtual ~object() = default;
    object(const object&) = delete;
    object& operator=(const object&) = delete;
    std::atomic<std::uint32_t> refs{1};
    const kind what;
    std::uint64_t handle = 0;  // set by insert()
};

// insert() puts o in the table (taking over its one reference) and returns
// its handle (never 0). Throws: std::bad_alloc (o is then still the caller's).
std::uint64_t insert(object* o);
// acquire() is the live object of kind k named by h, with a reference for
// the caller, or null with *why set (WEFT_INVALID_ARGUMENT for 0,
// WEFT_INVALID_HANDLE for a stale or foreign handle).
object* acquire(std::uint64_t h, kind k, weft_result* why) noexcept;
// remove() takes h out of the table (it is stale from then on) and hands the
// table's reference to the caller; null and *why as acquire().
object* remove(std::uint64_t h, kind k, weft_result* why) noexcept;
// release() drops one reference; the last deletes the object.
void release(object* o) noexcept;

// ref<T> holds one reference to a T from acquire() or remove().
template <class T>
class ref {
public:
    ref() noexcept = default;
    explicit ref(object* o) noexcept : p_(static_cast<T*>(o)) {}
    ref(ref&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
    ref& operator=(ref&&) = delete;
    ~ref() {
        if (p_) release(p_);
    }
    T* operator->() const noexcept { return p_; }
    T* get() const noexcept { return p_; }
    explicit operator bool() const noexcept { return p_ != nullptr; }

private:
    T* p_ = nullptr;
};

// get() acquires the T named by h; on failure the ref is empty and *why says
// why.
template <class T>
ref<T> get(std::uint64_t h, weft_result* why) noexcept {
    return ref<T>(acquire(h, T::kind_of, why));
}
template <class T>
ref<T> take(std::uint64_t h, weft_result* why) noexcept {
    return ref<T>(remove(h, T::kind_of, why));
}

// forget<T>() takes h out of the table and drops the table's reference (a
// caller holding one of its own keeps the object alive): WEFT_OK, or why
// not as remove().
template <class T>
weft_result forget(std::uint64_t h) noexcept {
    weft_result why;
    const ref<T> table_ref = take<T>(h, &why);
    return table_ref ? WEFT_OK : why;
}

// current_exception_result() maps the exception being handled (never a
// forced unwind) to a result, and records its what() for weft_last_error()
// (CAPI-E1). Call it inside a catch (...) only.
weft_result current_exception_result() noexcept;

// The text of weft_last_error(): why the calling thread's last failing call
// failed, named by the call, the argument and the fix.
//
//   CAPI-E1  The text is kept per thread and written only by the thread that
//            returns the result it explains, after the call's last
//            suspension point: invalid(), not_in_task() and the
//            WEFT_WRONG_THREAD refusals before the call has waited at all
//            (every argument is checked before the first wait), the
//            WEFT_NOT_FOUND of weft_resolve() once its lookup has returned,
//            and current_exception_result() in the catch at the C boundary,
//            on the thread the task returns on. Like weft_last_errno()
//            (CAPI-IO2) it is reached through a slot the optimiser cannot
//            cache across a wait, so a task that moved to another worker
//            writes and reads that worker's text, never the one it left.
//            Other results do not write it: the text explains the thread's
//            last failure that has one, read right after it.
//
// set_error_text() stores "call: why" + more (call may be null); it never
// throws (a failed allocation leaves the text empty).
void set_error_text(const char* call, std::string_view why, std::string_view more = {}) noexcept;

// invalid() is `return WEFT_INVALID_ARGUMENT` with its cause recorded:
// `call` is the C function's name, why + more name the argument, what was
// wrong with it and what to pass instead.
inline weft_result invalid(const char* call, std::string_view why, std::string_view more = {}) noexcept {
    set_error_text(call, why, more);
    return WEFT_INVALID_ARGUMENT;
}

// invalid_with() is invalid() with a text that make() builds (it may
// allocate: a number in it), for the calls that check their arguments
// outside guarded(): a failed allocation records a shorter fixed text, and
// nothing throws out of the noexcept C entry point.
template <class Make>
weft_result invalid_with(const char* call, Make&& make) noexcept {
    try {
        return invalid(call, make());
    } catch (...) {
        return invalid(call, "an argument is out of range (no memory to say which)");
    }
}

// not_in_task() is `return WEFT_NOT_IN_TASK` with its cause recorded: `call`
// needs a task; `instead` says what a plain thread does.
inline weft_result not_in_task(const char* call, std::string_view instead) noexcept {
    std::string why;
    try {
        why = "must be called from inside a weft task (a body run by weft_runtime_block_on() or "
              "weft_runtime_spawn()); ";
        why.append(instead);
    } catch (...) {
    }
    set_error_text(call, why);
    return WEFT_NOT_IN_TASK;
}

// bad_deadline is the text of a deadline argument below -1, after its name.
inline constexpr std::string_view bad_deadline =
    " is negative and not WEFT_NO_DEADLINE; pass an absolute CLOCK_MONOTONIC time in ns (weft_now() + a duration) or "
    "WEFT_NO_DEADLINE (-1)";

// stop_cancellation() is called in a catch (...) that caught a forced unwind
// (forced_unwind_in_flight()): it marks the unwind as caught by its proper
// stopping place, which the C API boundary is, so that leaving the handler
// ends it without the abort that guards against swallowing (the rules in
// weft/fiber.hpp, FIBER-U2 in src/fiber/fiber.cpp). Returns the fiber whose
// flags finish_cancellation() must clear once the handler has ended.
detail::fiber_record* stop_cancellation() noexcept;
void finish_cancellation(detail::fiber_record* f) noexcept;

// guarded() runs f (which returns a weft_result) at the C boundary: a C++
// exception becomes its result code, and a forced unwind (the calling task
// canceled, or the calling coroutine being destroyed) stops here and
// becomes WEFT_CANCELED instead of unwinding the C frames above. The task
// stays canceled: its next blocking call returns WEFT_CANCELED at once, and
// the body wrapper ends it canceled when the C body returns.
template <class F>
weft_result guarded(F&& f) noexcept {
    detail::fiber_record* stopped = nullptr;
    try {
        return f();
    } catch (...) {
        if (!detail::forced_unwind_in_flight()) return current_exception_result();
        stopped = stop_cancellation();
    }
    finish_cancellation(stopped);
    return WEFT_CANCELED;
}

// c_deadline reads a C deadline argument: an absolute CLOCK_MONOTONIC time
// in ns as steady_clock's `at`, or WEFT_NO_DEADLINE (`none`: no limit). Not
// `valid`: a negative one other than WEFT_NO_DEADLINE.
struct c_deadline {
    explicit c_deadline(std::int64_t ns) noexcept : none(ns == WEFT_NO_DEADLINE), valid(none || ns >= 0) {
        if (valid && !none)
            at = std::chrono::steady_clock::time_point(
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::nanoseconds(ns)));
    }
    bool none;
    bool valid;
    std::chrono::steady_clock::time_point at{};
};

// with<T>() is the handle lookup of the calls that take one: it runs f on
// the live T named by h (the call holds a reference meanwhile) and returns
// f's result, or, for a bad handle, acquire()'s.
template <class T, class F>
weft_result with(std::uint64_t h, F&& f) {
    weft_result why;
    const ref<T> o = get<T>(h, &why);
    return o ? f(*o.get()) : why;
}

// removing<T>() is with<T>() for a destroy: h leaves the table first (it is
// stale from then on), then f runs on the object, which the calls still
// under way keep alive.
template <class T, class F>
weft_result removing(std::uint64_t h, F&& f) {
    weft_result why;
    const ref<T> o = take<T>(h, &why);
    return o ? f(*o.get()) : why;
}

// fetch<T>() is a getter, `call`: *out = f(the T named by h).
// WEFT_INVALID_ARGUMENT for a null out (before the handle is looked at), or
// with()'s result.
template <class T, class Out, class F>
weft_result fetch(const char* call, std::uint64_t h, Out* out, F&& f) {
    if (!out) return invalid(call, "`out` is NULL; pass the address of a variable to store the result in");
    return with<T>(h, [&](T& o) {
        *out = f(o);
        return WEFT_OK;
    });
}

// make<T>() puts a new T(args...) in the table and stores its handle in
// *out (never null); a failure (of new, of T's constructor or of the table)
// is its result, guarded().
template <class T, class... Args>
weft_result make(std::uint64_t* out, Args&&... args) noexcept {
    return guarded([&] {
        std::unique_ptr<T> o(new T(std::forward<Args>(args)...));
        *out = insert(o.get());
        o.release();
        return WEFT_OK;
    });
}

}  // namespace weft::capi
