// stackless.cpp: layer L4, running a C++20 task (weft/async.hpp) on its
// worker's stack (A1-A4, below; docs/async.md).

#include "runtime_core.hpp"

#include <coroutine>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>

#include "debug.hpp"

namespace weft::detail {

// stackless_lost() ends the process when a C++20 task's coroutine suspended
// without telling its scheduler (A1): an await that bypassed weft (inside a
// coroutine type that resumes its awaiters itself). Nobody would ever
// resume the task, and its frames may be resumed from outside the runtime.
[[noreturn]] void stackless_lost(const task_record* t) noexcept {
    const std::string who = describe_named("C++20 task", t->name, t);
    std::fprintf(stderr,
                 "weft: %s (id %llu) suspended without a weft awaiter; a coroutine inside a weft task "
                 "may suspend only on weft awaitables, on weft::async, or on awaitables that weft::async's "
                 "co_await bridges (docs/async.md)\n",
                 who.c_str(), static_cast<unsigned long long>(t->id));
    std::abort();
}

// run_stackless() runs a C++20 task (weft/async.hpp): its coroutine is
// resumed on this worker's own stack and says through co_event why it
// suspended. The protocol (docs/async.md):
//   A1  The coroutine writes co_event (and co_resume, the handle to resume
//       next) before it suspends; the scheduler reads them after resume()
//       has returned, on the same thread, when the coroutine is suspended.
//   A2  co_park: the coroutine armed its wait (W1) before it suspended; the
//       scheduler's arrival (R1) comes only now that it is suspended, so a
//       waker on another thread can never resume a frame still running.
//   A3  co_blocking: a call that may block (a mutex, a channel, a join ...)
//       runs on a fiber borrowed for it alone; the task is then an ordinary
//       stackful task until the call returns, and the fiber goes back at
//       once. L5 and L6 are therefore written once, for stackful waits.
//   A4  co_canceled: the frames are destroyed (their destructors run, on
//       this stack, with the task current), never resumed: cancellation of
//       a C++20 task cannot be swallowed, as the forced unwind of a
//       stackful task cannot.
// Returns true when the task needs its borrowed fiber run (t->fiber set),
// false when it has suspended or ended.
bool runtime_core::run_stackless(worker* w, task_record* t) {
    for (;;) {
        std::uint8_t ev = std::exchange(t->co_event, co_none);
        begin_run(w, t);
        if (!t->co_started) {
            t->co_started = true;
            // Canceled before it started: its frame goes without running.
            if (t->cancel_reason.load(std::memory_order_acquire) != 0) ev = co_canceled;
        }
        if (ev != co_canceled) {
            std::coroutine_handle<>::from_address(t->co_resume).resume();
            ev = std::exchange(t->co_event, co_none);
        }
        if (w->view.trace) [[unlikely]] w->view.trace->end_run();
        switch (ev) {
        case co_blocking:
            try {
                t->fiber = make_fiber(t);
                note_task_fiber(t);  // weft list shows the borrowed fiber as the task's
            } catch (...) {
                // No stack for the call: it fails with the error.
                t->co_pending->error = std::current_exception();
                t->co_pending = nullptr;
                continue;
            }
            return true;
        case co_requeue:
            set_current_task(nullptr);
            w->set_current(nullptr);
            hooks::requeue(w, t);
            return false;
        case co_park:
            set_current_task(nullptr);
            w->set_current(nullptr);
            set_state(t, task_state::waiting);
            arrive(t);
            return false;
        case co_finished:
        case co_canceled:
            t->co_end(t, ev == co_finished);
            task_end(t);
            set_current_task(nullptr);
            finish_task(w, t);
            w->set_current(nullptr);
            return false;
        default:
            stackless_lost(t);
        }
    }
}

}  // namespace weft::detail
