// waiter.cpp: layer L3's one waiter (weft/waiter.hpp, protocol WAITER-V1 - WAITER-V3).
//
// For a task the claim is the task's wait word (TASK-W2 in
// weft/detail/task_record.hpp) and the wake is its second arrival (TASK-R1). For
// a plain thread the claim is `state_`: 0 armed -> 1 claimed by a waker, who
// writes its hand-over and stores 2 (woken); or 0 -> 3 by the thread itself
// when its deadline passes. The thread sleeps on the word until it leaves 0
// and 1.

#include "weft/waiter.hpp"

#include <cstring>
#include <string>

#include "weft/detail/support.hpp"

namespace weft {

namespace detail {

namespace {

// shared_range() is the shared stack the calling code runs on, if any.
bool shared_range(const std::byte*& lo, const std::byte*& hi) noexcept {
    const fiber_record* f = this_thread_state()->current;
    if (!f || !f->copy_mode || !f->copy || !f->copy->slot) return false;
    const stack_view& v = f->copy->slot->stack;
    lo = static_cast<const std::byte*>(v.base);
    hi = lo + v.size;
    return true;
}

[[noreturn]] void off_stack_failure(const char* what, const char* detail) noexcept {
    const task_record* t = current_task();
    const std::string who =
        t ? describe_named("task", t->name, t) : describe(this_thread_state()->current);
    const std::string msg = "weft: " + std::string(what) + " of " + who + " " + detail + "\n";
    fatal_message(msg.c_str());
}

}  // namespace

void check_off_shared_stack(const void* p, const char* what) noexcept {
    const std::byte *lo, *hi;
    if (!shared_range(lo, hi)) return;
    const auto* a = static_cast<const std::byte*>(p);
    if (a < lo || a >= hi) return;
    off_stack_failure(what,
                      "lies on the shared stack it runs on; it would be overwritten while the task is suspended "
                      "(WAITER-V4 in weft/waiter.hpp: hold it in a detail::stable)");
}

void check_no_pointer_into_shared_stack(const void* obj, std::size_t n, const char* what) noexcept {
    const std::byte *lo, *hi;
    if (!shared_range(lo, hi)) return;
    // Every aligned word of the object that holds an address in the stack:
    // a reference or pointer capture of a local of the suspended task.
    const auto* b = static_cast<const unsigned char*>(obj);
    for (std::size_t i = 0; i + sizeof(std::uintptr_t) <= n; i += alignof(std::uintptr_t)) {
        std::uintptr_t v;
        std::memcpy(&v, b + i, sizeof v);
        if (v >= reinterpret_cast<std::uintptr_t>(lo) && v < reinterpret_cast<std::uintptr_t>(hi))
            off_stack_failure(what,
                              "holds a pointer into the shared stack the task runs on; another thread would use it "
                              "while the task's frames are saved elsewhere (capture by value: docs/runtime.md, "
                              "\"What a copy-stack task may point at\")");
    }
}

}  // namespace detail

namespace {

constexpr std::uint32_t armed = 0, claimed = 1, woken = 2, timed_out = 3;

}  // namespace

waiter::waiter() : task_(detail::current_task()) { detail::need_stack(task_); }

waiter::waiter(detail::stackless_tag) noexcept : task_(detail::current_task()) {}

void waiter::arm(bool cancellable) noexcept {
#ifndef NDEBUG
    detail::check_off_shared_stack(this, "a waiter");  // WAITER-V4
#endif
    fired = -1;
    code = 0;
    if (task_)
        word_ = detail::arm(task_, cancellable);
    else
        state_.store(armed, std::memory_order_relaxed);
}

bool waiter::claim() noexcept {
    if (task_) return detail::try_end(task_, word_, detail::wait_status::notified);
    std::uint32_t expect = armed;
    return state_.compare_exchange_strong(expect, claimed, std::memory_order_acquire, std::memory_order_relaxed);
}

void waiter::wake() noexcept {
    if (task_) {
        detail::arrive(task_);
        return;
    }
    // The thread may return (ending this object) as soon as it sees `woken`;
    // futex_wake() on the address afterwards is harmless (at worst a
    // spurious wake of whatever sleeps there next, which re-checks its word).
    state_.store(woken, std::memory_order_release);
    detail::futex_wake(&state_, 1);
}

bool waiter::claim_self() noexcept {
    // A task that wins its own wait word never arrives and never parks: the
    // two arrivals of TASK-R1 stay at zero for the next wait.
    if (task_) return detail::try_end(task_, word_, detail::wait_status::notified);
    std::uint32_t expect = armed;
    return state_.compare_exchange_strong(expect, woken, std::memory_order_acquire, std::memory_order_relaxed);
}

waiter::outcome waiter::wait(const std::chrono::steady_clock::time_point* deadline) {
    if (task_) {
        switch (detail::park_until(task_, word_, deadline)) {
        case detail::wait_status::notified: return outcome::notified;
        case detail::wait_status::timed_out: return outcome::timed_out;
        default: return outcome::canceled;
        }
    }
    for (;;) {
        const std::uint32_t s = state_.load(std::memory_order_acquire);
        if (s == woken) return outcome::notified;
        if (s == timed_out) return outcome::timed_out;
        if (s == armed && deadline) {
            const auto left = *deadline - std::chrono::steady_clock::now();
            const std::int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
            if (ns <= 0) {
                std::uint32_t expect = armed;
                if (state_.compare_exchange_strong(expect, timed_out, std::memory_order_acquire))
                    return outcome::timed_out;
                continue;  // claimed meanwhile: the waker is writing; wait for `woken`
            }
            detail::futex_wait(&state_, armed, ns);
        } else {
            detail::futex_wait(&state_, s, -1);
        }
    }
}

void throw_canceled() { detail::raise_forced_unwind(); }

}  // namespace weft
