// pan: -DSAFETY
// run: -m100000
// bug: BUG_HOLD_ANY the shrinker takes its hold whenever the task is switched out, also when the waker has arrived (and the task is queued)
// bug: BUG_WAKER_IGNORES_HOLD arrive() queues the task when it is switched out, whether or not a shrinker holds it
// bug: BUG_DROP_NO_QUEUE drop_hold() clears the hold but does not queue a task whose waker arrived meanwhile
/* shrink.pml: a shrinker's hold of a parked task against the two arrivals
 * (SHRINK-S1 - SHRINK-S4 with TASK-R1).
 *
 * Code (weft): include/weft/detail/task_record.hpp (arrived_switched,
 * arrived_woken, arrived_held; SHRINK-S1 - SHRINK-S4), src/task/task.cpp (arrive,
 * arrive_switched, try_hold, drop_hold), src/runtime/runtime_core.hpp
 * (hooks::after_park), src/runtime/shrink.cpp (sweep, shrink_task,
 * restore_task), src/runtime/worker.cpp (run_task: the restore before the
 * switch in).
 *
 * One task makes NWAITS waits in a row. For each, a waker ends the wait
 * (try_end, which the task_wait.pml model checks; here one step) and
 * arrives. The task parks: its state is waiting, it is switched out, and
 * the scheduler's hook arrives. A shrinker, at any moment, tries to take
 * the hold, and if it gets it copies the task's frames away and releases
 * the stack (shrunk = true), then drops the hold. The worker that resumes
 * the task restores it first.
 *
 * Properties:
 *   - SHRINK-S2: the shrinker holds only a task that is switched out;
 *   - SHRINK-S3: the task is never resumed while held, nor while its frames are
 *     being copied, and never runs on a released stack;
 *   - TASK-R1: the task is queued exactly once per wait, and only after both
 *     arrivals;
 *   - no lost wake-up: in a state where nothing can move, the task is not
 *     parked with its wait ended (monitor, at `timeout`).
 */

#define NWAITS 2
#define NSHRINKS 3

#define SWITCHED 1
#define WOKEN    2
#define HELD     4

byte arrivals = 0;       /* task_record::arrivals */
bool shrunk = false;     /* task_record::shrunk (the saved bytes with it) */

/* ghosts */
byte cur = 0;            /* the current wait */
bool armed = false;      /* the current wait is armed and not ended */
bool ended = false;      /* the current wait has ended */
bool switched_out = false;
bool parked = false;     /* in park(): from the state change to the resume */
bool copying = false;    /* the shrinker is copying / releasing */
byte queued = 0;
byte queued_n[NWAITS + 1];
bool woke_n[NWAITS + 1];

inline ready()
{
    d_step {
        assert(switched_out && ended);  /* TASK-R1: only after both arrivals */
        queued++;
        queued_n[cur]++;
        assert(queued_n[cur] == 1)      /* TASK-R1: once per wait */
    }
}

active proctype task()
{
    byte k, a;
    for (k : 1 .. NWAITS) {
        /* arm(): a fresh wait the waker may end */
        d_step { cur = k; ended = false; armed = true };
        /* park(): set_state(waiting), switch_out() */
        parked = true;
        /* the context is saved; hooks::after_park: arrive_switched() */
        switched_out = true;
        d_step { a = arrivals; arrivals = arrivals | SWITCHED };
        if
        :: (a & WOKEN) -> arrivals = 0; ready()
        :: else
        fi;
        /* a worker takes it from its queue: run_task() restores a shrunk
         * task, then switches in */
        atomic {
            queued > 0 ->
            queued--;
            assert((arrivals & HELD) == 0 && !copying);   /* SHRINK-S3 */
            if
            :: shrunk -> shrunk = false   /* restore_task() */
            :: else
            fi;
            switched_out = false
        };
        /* the task runs on its stack */
        assert(!shrunk && !copying);   /* SHRINK-S3: never on a released stack */
        assert(ended);                  /* TASK-W3 */
        parked = false
    }
}

/* The waker of each wait: try_end() then arrive(). */
active proctype waker()
{
    byte k, a;
    for (k : 1 .. NWAITS) {
        atomic { armed && cur == k -> armed = false; ended = true };
        woke_n[k] = true;
        d_step { a = arrivals; arrivals = arrivals | WOKEN };
#ifdef BUG_WAKER_IGNORES_HOLD
        if
        :: (a & SWITCHED) -> arrivals = 0; ready()
        :: else
        fi
#else
        if
        :: a == SWITCHED -> arrivals = 0; ready()   /* SHRINK-S1, SHRINK-S3 */
        :: else
        fi
#endif
    }
}

/* A worker's sweep: shrink_task() on the task, NSHRINKS times at any moment. */
active proctype shrinker()
{
    byte n, a;
    bool held;
    for (n : 1 .. NSHRINKS) {
        /* try_hold(): CAS from exactly SWITCHED (SHRINK-S2) */
        d_step {
#ifdef BUG_HOLD_ANY
            if
            :: (arrivals & SWITCHED) && !(arrivals & HELD) -> arrivals = arrivals | HELD; held = true
            :: else -> held = false
            fi
#else
            if
            :: arrivals == SWITCHED -> arrivals = SWITCHED | HELD; held = true
            :: else -> held = false
            fi
#endif
        };
        if
        :: held ->
            assert(switched_out);        /* SHRINK-S2 */
            copying = true;
            /* the copy, the release; then, under the hold, `shrunk` */
            assert(switched_out);        /* SHRINK-S3: still not resumed */
            if
            :: !shrunk -> shrunk = true
            :: else
            fi;
            copying = false;
            /* drop_hold(): fetch_and(~HELD), queue if the waker came (SHRINK-S4) */
            d_step { a = arrivals; arrivals = arrivals & ~HELD };
#ifndef BUG_DROP_NO_QUEUE
            if
            :: (a & WOKEN) -> arrivals = 0; ready()
            :: else
            fi
#endif
        :: else
        fi
    }
}

/* No lost wake-up: when nothing can move, the task is not parked with its
 * wait ended (and nothing is queued but not run). */
active proctype monitor()
{
    timeout ->
        assert(!(parked && ended));
        assert(queued == 0)
}
