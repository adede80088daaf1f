// stackless.cpp: layer L4, running a task that has no fiber of its own
// (task_record::stackless, TASK-SB1 - TASK-SB4 in weft/detail/task_record.hpp) on its
// worker's stack.

#include "runtime_core.hpp"

#include <exception>

#include "debug.hpp"

namespace weft::detail {

// run_stackless() runs steps of t's body (TASK-SB1) until it parks, is requeued
// or ends, or needs a borrowed fiber (TASK-SB3). Returns true when t's borrowed
// fiber is to be run (t->fiber set), false when t has left this worker's
// hands (parked, queued or finished).
bool runtime_core::run_stackless(worker* w, task_record* t) {
    for (;;) {
        begin_run(w, t);
        const stackless_body::stop why = t->stackless->step(t);
        if (w->view.trace) [[unlikely]] w->view.trace->end_run();
        switch (why) {
        case stackless_body::stop::borrow:  // TASK-SB3
            try {
                t->fiber = make_fiber(w, t);
                note_task_fiber(t);  // weft list shows the borrowed fiber as the task's
            } catch (...) {
                t->stackless->no_fiber(t, std::current_exception());
                continue;
            }
            return true;
        case stackless_body::stop::requeued:  // TASK-SB2
            set_current_task(nullptr);
            w->set_current(nullptr);
            hooks::requeue(w, t);
            return false;
        case stackless_body::stop::parked:  // TASK-SB2
            set_current_task(nullptr);
            w->set_current(nullptr);
            set_state(t, task_state::waiting);
            arrive_switched(t);  // SHRINK-S1
            return false;
        case stackless_body::stop::ended:  // TASK-SB4
            break;
        }
        task_end(t);
        set_current_task(nullptr);
        finish_task(w, t);  // clears w->current() (WATCHDOG-D4)
        return false;
    }
}

}  // namespace weft::detail
