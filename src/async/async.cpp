// async.cpp: layer L7 (weft/async.hpp): a C++20 task's stackless body,
// the protocol ASYNC-A1 - ASYNC-A4 by which its coroutine tells the task why it suspended,
// the borrowed fiber's body (ASYNC-A3), and the bridge coroutine that lets any
// C++20 awaitable wake a weft waiter.

#include "weft/async.hpp"

#include <coroutine>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <utility>

#include "weft/detail/support.hpp"

namespace weft::detail {

// stackless_lost() ends the process when a C++20 task's coroutine suspended
// without telling its task (ASYNC-A1): an await that bypassed weft (inside a
// coroutine type that resumes its awaiters itself). Nobody would ever
// resume the task, and its frames may be resumed from outside the runtime.
[[noreturn, gnu::cold, gnu::noinline]] static void stackless_lost(const task_record* t) noexcept {
    const std::string who = describe_named("C++20 task", t->name, t);
    std::fprintf(stderr,
                 "weft: %s (id %llu) suspended without a weft awaiter; a coroutine inside a weft task "
                 "may suspend only on weft awaitables, on weft::async, or on awaitables that weft::async's "
                 "co_await bridges (docs/async.md)\n",
                 who.c_str(), static_cast<unsigned long long>(t->id));
    std::abort();
}

// co_body::step() is one step of a C++20 task (L3's stackless_body,
// TASK-SB1 - TASK-SB4): its coroutine is resumed on the worker's stack and says through
// `event` why it suspended. The protocol (docs/async.md):
//   ASYNC-A1  The coroutine writes `event` (and `resume_next`, the handle to
//             resume next) before it suspends; step() reads them after resume()
//             has returned, on the same thread, when the coroutine is suspended,
//             and only then answers the scheduler (TASK-SB1).
//   ASYNC-A2  co_park: the coroutine armed its wait (TASK-W1) before it suspended; the
//             scheduler's arrival (TASK-R1) comes only after step() has returned
//             (parked, TASK-SB2), so a waker on another thread can never resume a
//             frame still running.
//   ASYNC-A3  co_blocking: a call that may block (a mutex, a channel, a join ...)
//             runs on a fiber borrowed for it alone (borrow, TASK-SB3); the task is
//             then an ordinary stackful task until the call returns, and the
//             fiber goes back at once. L5 and L6 are therefore written once, for
//             stackful waits. The next step finds the call in `pending` and
//             resumes the coroutine, or destroys its frames if the call was
//             unwound by the task's cancellation.
//   ASYNC-A4  co_canceled: the frames are destroyed (their destructors run, on
//             this stack, with the task current), never resumed: cancellation of
//             a C++20 task cannot be swallowed, as the forced unwind of a
//             stackful task cannot.
stackless_body::stop co_body::step(task_record* t) {
    static_assert(co_park == 1 + int(stop::parked) && co_requeue == 1 + int(stop::requeued));
    if (event != co_none && !may_resume(t)) [[unlikely]] {
        collect(t, false);
        return stop::ended;
    }
    std::coroutine_handle<>::from_address(resume_next).resume();
    const std::uint8_t ev = event;
    if (ev == co_park || ev == co_requeue) [[likely]] {
        event = co_none;
        return static_cast<stop>(ev - 1);
    }
    if (ev == co_blocking) return stop::borrow;  // `event` stays: the step after the call takes it (ASYNC-A3)
    if (ev != co_finished && ev != co_canceled) [[unlikely]]
        stackless_lost(t);
    event = co_none;
    collect(t, ev == co_finished);
    return stop::ended;
}

bool co_body::may_resume(task_record* t) noexcept {
    if (std::exchange(event, co_none) == co_start)  // canceled before it started: its frame goes unrun
        return t->cancel_reason.load(std::memory_order_acquire) == 0;
    // co_blocking: the call on the borrowed fiber has returned, or was
    // unwound by the task's cancellation.
    return !std::exchange(pending, nullptr)->canceled;
}

// no_fiber(): no stack for the call (ASYNC-A3): it fails with the error, which
// await_resume() rethrows in the coroutine at the next step.
void co_body::no_fiber(task_record*, std::exception_ptr e) noexcept { pending->error = std::move(e); }

namespace {

// bridge is a coroutine that does nothing until resumed; then its final
// awaiter claims and wakes the waiter it was made for, and it stays
// suspended at its end for the waiting party to destroy. The claim and the
// wake run in await_suspend, after the frame counts as suspended, and touch
// only the waiter: the waiting party may destroy the frame as soon as it
// has been woken, even while resume() is still returning on this thread.
struct bridge {
    struct promise_type {
        waiter* w = nullptr;

        struct final_awaiter {
            bool await_ready() noexcept { return false; }
            void await_suspend(std::coroutine_handle<promise_type> h) noexcept {
                waiter* w = h.promise().w;
                if (w->claim()) w->wake();
            }
            void await_resume() noexcept {}
        };

        bridge get_return_object() noexcept { return bridge{std::coroutine_handle<promise_type>::from_promise(*this)}; }
        std::suspend_always initial_suspend() noexcept { return {}; }
        final_awaiter final_suspend() noexcept { return {}; }
        void return_void() noexcept {}
        void unhandled_exception() noexcept { std::terminate(); }  // the body is empty
    };
    std::coroutine_handle<promise_type> h;
};

bridge bridge_body() { co_return; }

}  // namespace

std::coroutine_handle<> make_bridge(waiter* w) {
    bridge b = bridge_body();
    b.h.promise().w = w;
    return b.h;
}

void destroy_bridge(std::coroutine_handle<> h) noexcept { h.destroy(); }

void run_co_pending(task_record* t) {
    co_job* j = body_of(t)->pending;
    j->run(j);
}

void await_misuse(const char* what) { throw std::invalid_argument(std::string("weft: ") + what); }

void inline_unfinished() noexcept {
    std::fputs(
        "weft: a weft::async run by weft::await() suspended without a weft awaiter and would never be "
        "resumed (a coroutine type inside it that resumes its awaiters itself? docs/async.md)\n",
        stderr);
    std::abort();
}

}  // namespace weft::detail
