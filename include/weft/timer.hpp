// weft/timer.hpp: layer L4, a timer without a task: a deadline in the
// runtime's timer wheel that runs a callback (docs/timers.md, "Timers without
// a task"). Go's time.AfterFunc with Reset and Stop; a periodic form too.
//
//   weft::timer expire([&] { cache.erase(key); });  // the calling task's runtime
//   expire.reset(std::chrono::seconds(30));         // armed: runs once, in 30 s
//   expire.reset(std::chrono::seconds(60));         // moved (true: it was pending)
//   expire.stop();                                  // true: it will not run
//
//   weft::timer tick(rt, [&] { flush(); });
//   tick.reset_every(std::chrono::milliseconds(100));
//
// A timer costs its block (its node in the wheel, a few words and the
// callable), allocated once at construction: reset() and stop() allocate
// nothing and are O(1), however often they are called.
//
// The callback runs on one of the runtime's worker threads, between tasks,
// at or after the deadline: not in a task, so it must not wait (no join,
// no blocking receive, no sleep). It may wake tasks (event::set(),
// channel::try_send(), a semaphore's release()), spawn one through a runtime
// reference (rt.spawn(...)), and reset() or stop() its own timer. One
// timer's callback never runs twice at once. An exception from it goes to
// runtime_options::unhandled (with a task_info named "weft::timer"), or,
// without a handler, is printed and ends the process, as a detached task's.
//
// One thread (or task) at a time uses a timer object; its callback may run
// meanwhile on a worker. stop() (and the destructor, and a reset() or a
// move-assignment over it) guarantees the callback of the arming it ends
// does not start afterwards; the destructor also waits for a callback
// already running on another thread to return, so that what the callback
// uses may be destroyed right after the timer (not when it is destroyed from
// inside its own callback).
//
// Pending timers do not keep a runtime alive or delay runtime::shutdown():
// once the runtime's workers have stopped, a pending timer never fires, and
// reset() throws task_error (runtime_stopping). A timer object may outlive
// its runtime object; it keeps the runtime's internals it needs.
#pragma once

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "weft/config.hpp"
#include "weft/runtime.hpp"

namespace weft {

namespace detail {

// timer_block is a timer's heap part (src/runtime/callback_timer.cpp,
// TIMER-C1 - TIMER-C4): its node in a wheel, the runtime it is bound to
// (retained), and the callable (timer_block_of<F>).
struct WEFT_API timer_block {
    timer_node node;                     // what == timer_node::kind::callback
    runtime_core* core = nullptr;        // retained until the block goes
    std::atomic<std::uint32_t> refs{1};  // the timer object + a firing in progress
    // state: 0 idle, fired (taken out by a firing worker, not started yet),
    // fired | started (the callback runs). TIMER-C2.
    std::atomic<std::uint64_t> state{0};
    std::atomic<std::uint64_t> gen{0};         // every arm and stop adds one (TIMER-C3)
    std::atomic<std::int64_t> period_ns{0};    // 0: once
    void (*call)(timer_block*) = nullptr;
    void (*destroy)(timer_block*) noexcept = nullptr;
};

template <class F>
struct timer_block_of final : timer_block {
    F f;
    explicit timer_block_of(F&& fn) : f(std::move(fn)) {
        call = [](timer_block* b) { static_cast<timer_block_of*>(b)->f(); };
        destroy = [](timer_block* b) noexcept { delete static_cast<timer_block_of*>(b); };
    }
};

// The timer's operations (src/runtime/callback_timer.cpp).
WEFT_API void timer_bind(timer_block* b, runtime_core* c) noexcept;
WEFT_API bool timer_arm(timer_block* b, std::chrono::steady_clock::time_point when, std::int64_t period_ns);
WEFT_API bool timer_stop(timer_block* b) noexcept;
[[nodiscard]] WEFT_API bool timer_pending(const timer_block* b) noexcept;
WEFT_API void timer_drop(timer_block* b) noexcept;
}  // namespace detail

class timer {
public:
    // timer() is empty: no callback; reset() throws, stop() returns false.
    timer() noexcept = default;
    // timer(f) binds f to the calling task's runtime (outside a task:
    // task_error, not_in_task); timer(rt, f) to rt, from any thread. Not
    // armed. Throws std::bad_alloc.
    template <class F>
        requires std::invocable<std::decay_t<F>&>
    explicit timer(F&& f) : timer(detail::current_core("weft::timer"), std::forward<F>(f)) {}
    template <class F>
        requires std::invocable<std::decay_t<F>&>
    timer(runtime& rt, F&& f) : timer(rt.core(), std::forward<F>(f)) {}
    timer(const timer&) = delete;
    timer& operator=(const timer&) = delete;
    timer(timer&& o) noexcept : b_(std::exchange(o.b_, nullptr)) {}
    timer& operator=(timer&& o) noexcept {
        if (this != &o) {
            if (b_) detail::timer_drop(b_);
            b_ = std::exchange(o.b_, nullptr);
        }
        return *this;
    }
    // ~timer() stops it and waits for a callback running on another thread.
    ~timer() {
        if (b_) detail::timer_drop(b_);
    }

    // reset(when) arms the timer to run its callback once at `when` (at once
    // if that has passed), ending any earlier arming; true if it was pending.
    // Throws task_error: runtime_stopping once the runtime's workers stop;
    // empty_handle on an empty timer.
    bool reset(std::chrono::steady_clock::time_point when) { return detail::timer_arm(block(), when, 0); }
    template <class Rep, class Period>
    bool reset(std::chrono::duration<Rep, Period> after) {
        return reset(std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::nanoseconds>(after));
    }
    // reset_every(period) arms it to run every `period` (> 0), the first time
    // one period from now; the deadlines do not drift, and a callback that
    // returns more than a period late skips the deadlines already missed.
    template <class Rep, class Period>
    bool reset_every(std::chrono::duration<Rep, Period> period) {
        const auto ns = std::chrono::ceil<std::chrono::nanoseconds>(period).count();
        return detail::timer_arm(block(), std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns),
                                 ns > 0 ? ns : -1);
    }
    // stop() disarms it: true if it was pending, or fired but its callback
    // had not started (it then does not start); false otherwise (not armed,
    // the callback ran or is running, or an empty timer).
    bool stop() noexcept { return b_ && detail::timer_stop(b_); }
    // pending(): armed and its callback not started yet.
    [[nodiscard]] bool pending() const noexcept { return b_ && detail::timer_pending(b_); }
    explicit operator bool() const noexcept { return b_ != nullptr; }

private:
    template <class F>
    timer(detail::runtime_core* c, F&& f) {
        auto b = std::make_unique<detail::timer_block_of<std::decay_t<F>>>(std::decay_t<F>(std::forward<F>(f)));
        detail::timer_bind(b.get(), c);
        b_ = b.release();
    }
    detail::timer_block* block() const {
        if (!b_) throw task_error(task_errc::empty_handle, "weft: reset() of an empty weft::timer");
        return b_;
    }

    detail::timer_block* b_ = nullptr;
};

}  // namespace weft
