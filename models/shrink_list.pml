// pan: -DSAFETY
// run: -m100000
// bug: BUG_DROP_BY_STORE the sweep drops an entry by storing 0, not by a compare-and-swap from 1 (SHRINK-L1)
// bug: BUG_MARK_SKIPS a park that finds its task listed leaves the word as it is (SHRINK-L1)
// bug: BUG_KEEP_NOT_RESET a sweep that keeps a marked entry leaves the word at 2 (every later drop then keeps it: an ended task stays listed for ever)
/* shrink_list.pml: the candidate lists of idle-stack shrinking (SHRINK-L1,
 * src/runtime/shrink.cpp; docs/runtime.md, "Finding idle tasks"): a task
 * that parks is listed in the FIFO of the worker it parked on, once; a
 * worker's sweep pops an entry, looks at the task's state and shrinks it,
 * keeps it, or drops it, while the task runs and parks again on either
 * worker.
 *
 * Code (weft): hooks::list_idle (src/runtime/runtime_core.hpp), which the
 * after-park hook calls on the worker's thread before the arrival;
 * runtime_core::sweep (src/runtime/shrink.cpp); the word is
 * task_shrink::listed (include/weft/detail/task_record.hpp).
 *
 * Parties:
 *   T       one task: ROUNDS times it runs on worker 0 or 1 and parks there
 *           (state waiting, then list_idle on that worker's thread), stays
 *           parked a while, and is woken;
 *   S0, S1  the workers' sweeps: at any moment a worker with an entry pops
 *           it and reads the task's state: parked (held: switched out) it
 *           may be shrunk or kept for later (too recent); waiting but still
 *           switching out it is kept ("later", not holdable yet); running
 *           it is dropped. A drop takes the word from 1 to 0, or, finding
 *           2, sets 1 and keeps the entry.
 * A worker's sweep and the park of a task on that worker are on one thread:
 * they never interleave (`busy`). The shrink itself (the hold, the arrival
 * word) is shrink.pml's; here it is one step.
 *
 * Properties (asserts):
 *   - a task is in at most one FIFO at a time, and listed (word not 0)
 *     exactly while an entry exists or is being pushed;
 *   - no lost candidate: whenever the task is parked in a wait it was not
 *     shrunk in, and no sweep holds its popped entry, it is in a FIFO
 *     (the bug this model was written for: with a plain store of 0 in the
 *     drop, a park that found 1 just before left the task in no FIFO for
 *     its whole wait);
 *   - an ended task's entry is dropped by the second visit at the latest
 *     (the first may find a park's mark and keep it once);
 *   - every party ends.
 */

#define ROUNDS 3

byte listed = 0;       /* task_shrink::listed: 0, 1, 2 */
bool fifo[2];          /* the entry is in worker w's FIFO */
bool holding[2];       /* worker w's sweep popped the entry and decides */
bool pushing = false;  /* list_idle won 0 -> 1 and has not pushed yet */
bool busy[2];          /* worker w's thread runs the task or a sweep */
bool waiting = false;  /* the task's state says waiting */
bool parked = false;   /* switched out: the hook has run */
bool shrunk = false;   /* shrunk in its current wait */
bool done = false;

inline entries_ok() {
    assert(fifo[0] + fifo[1] + holding[0] + holding[1] + pushing <= 1);
    assert((listed != 0) == (fifo[0] || fifo[1] || holding[0] || holding[1] || pushing))
}

inline take(w) { atomic { !busy[w] -> busy[w] = true } }

proctype Task() {
    byte r = 0;
    byte w;
    byte v;
    do
    :: r < ROUNDS ->
        if
        :: w = 0
        :: w = 1
        fi;
        take(w);
        /* it runs on w, then parks: its state first, then the hook */
        waiting = true;
        shrunk = false;
        /* list_idle(w, t) */
        v = listed;
retry:
        if
        :: v == 2 -> skip
        :: else ->
#ifdef BUG_MARK_SKIPS
            if
            :: v == 1 -> goto hooked
            :: else -> skip
            fi;
#endif
            atomic {
                if
                :: listed == v ->
                    if
                    :: v == 0 -> listed = 1; pushing = true
                    :: else -> listed = 2
                    fi;
                    v = 3  /* won */
                :: else -> v = listed
                fi
            }
            if
            :: v == 3 -> skip
            :: else -> goto retry
            fi;
            if
            :: pushing ->
                atomic { pushing = false; fifo[w] = true; entries_ok() }
            :: else -> skip
            fi
        fi;
hooked:
        parked = true;
        busy[w] = false;
        /* parked a while: sweeps may come; then a waker ends the wait (a
         * shrunk task is restored where it runs next) */
        atomic { parked = false; waiting = false };
        r++
    :: else -> break
    od;
    done = true
}

proctype Sweep(byte k) {
    byte after = 0;  /* drop visits after the task's end */
    do
    :: atomic { fifo[k] && !busy[k] -> busy[k] = true; fifo[k] = false; holding[k] = true };
        if
        :: waiting && parked ->
            if
            :: shrunk = true; goto drop  /* shrink_task(): held, shrunk */
            :: goto keep                 /* parked too recently */
            fi
        :: waiting && !parked -> goto keep  /* not holdable yet: later */
        :: !waiting -> goto drop            /* it ran (or runs) */
        fi;
drop:
        if
        :: done -> after++; assert(after <= 2)  /* an ended task's entry goes within two visits */
        :: else -> skip
        fi;
#ifdef BUG_DROP_BY_STORE
        atomic { listed = 0; holding[k] = false; entries_ok() };
        goto next;
#endif
        atomic {
            if
            :: listed == 1 -> listed = 0; holding[k] = false; entries_ok()
            :: else ->
                assert(listed == 2);
#ifndef BUG_KEEP_NOT_RESET
                listed = 1;
#endif
                holding[k] = false; fifo[k] = true; entries_ok()
            fi
        };
        goto next;
keep:
        atomic { holding[k] = false; fifo[k] = true; entries_ok() };
next:
        busy[k] = false
    :: atomic { done && !fifo[k] -> break }
    od
}

/* No lost candidate: checked in every state where it applies. */
proctype Monitor() {
    do
    :: atomic { parked && !shrunk && !holding[0] && !holding[1] -> assert(fifo[0] || fifo[1]) }
    :: done -> break
    od
}

init {
    atomic {
        run Task();
        run Sweep(0);
        run Sweep(1);
        run Monitor()
    }
}
