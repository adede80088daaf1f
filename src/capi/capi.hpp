// src/capi/capi.hpp: what the C API's sources share: the handle table, the
// exception-to-result mapping, and the boundary that stops a cancellation
// before it reaches C frames. Internal to layer L8.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <utility>

#include "weft/fiber.hpp"
#include "weft/weft.h"

namespace weft::capi {

// kind tells the objects in the handle table apart, so that a handle of one
// kind passed where another is expected is WEFT_INVALID_HANDLE.
enum class kind : std::uint8_t { coroutine = 1, runtime, task, channel, mutex, cond };

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

// current_exception_result() maps the exception being handled (never a
// forced unwind) to a result. Call it inside a catch (...) only.
weft_result current_exception_result() noexcept;

// stop_cancellation() is called in a catch (...) that caught a forced unwind
// (forced_unwind_in_flight()): it marks the unwind as caught by its proper
// stopping place, which the C API boundary is, so that leaving the handler
// ends it without the abort that guards against swallowing (the rules in
// weft/fiber.hpp, U2 in src/coroutine/fiber.cpp). Returns the fiber whose
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

// deadline() converts an absolute CLOCK_MONOTONIC deadline in ns
// (WEFT_NO_DEADLINE: none) to steady_clock; false for a negative one other
// than WEFT_NO_DEADLINE.
inline bool deadline(std::int64_t ns, std::chrono::steady_clock::time_point& tp, bool& none) noexcept {
    none = ns == WEFT_NO_DEADLINE;
    if (none) return true;
    if (ns < 0) return false;
    tp = std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::nanoseconds(ns)));
    return true;
}

}  // namespace weft::capi
