// pan: -DSAFETY -DCOLLAPSE
// run: -m100000
// bug: BUG_NO_RECHECK sleep() sleeps without has_work()'s second look after registering as sleeping
// bug: BUG_NOTIFY_FIRST inject() calls notify_one() before it pushes the task
/* worker_sleep.pml: sleeping and waking of idle workers (SCHED-P1: no lost
 * wake-up) with two workers, the injection queue, a pinned task's inbox,
 * the LIFO slot, stealing and the searching count.
 *
 * Code (weft): src/runtime/worker.cpp: runtime_core::ready, push_inbox,
 * inject, pop_injection, local_next, find_work, steal, has_work, loop;
 * src/runtime/sleeping.cpp: wake, wake_sleeper_locked, stop_searching, sleep;
 * src/runtime/runtime_core.hpp: push_local, notify_one, hooks::requeue;
 * docs/runtime.md "Sleeping, and why no wake-up is lost".
 *
 * Abstractions:
 *   - tasks are identical, so each queue is a count; the Chase-Lev deque's
 *     push / pop / steal are single atomic steps (its own correctness is a
 *     separate matter, work_deque.hpp); steal_half moves ceil(n/2) tasks
 *     at once (the thief is running while they are in flight, so its own
 *     loop finds them);
 *   - a critical section under idle_mu, inj_mu or inbox_mu is one atomic
 *     step (idle_mu is never held across anything else; see notify_one
 *     and sleep for why the seq_cst counters in them may go with it);
 *     every seq_cst access outside a lock (n_searching, n_sleeping, the
 *     deque, inj_len, inbox_nonempty in has_work) is a step of its own;
 *   - no timers and no poller: the watcher (SCHED-T2) is chosen as in the code,
 *     but futex value 2, watch_wait_ns and SCHED-I1/I2 are left out; a sleeping
 *     worker blocks until its futex word is 1 (futex_wait(word, 0) and the
 *     loop around it);
 *   - the fairness tick (every 61st), the stash and hand-offs are left out.
 * Work: an outside thread wakes one task pinned to worker 0 (push_inbox +
 * wake(home)), then injects one task (inject); a running task may, twice
 * in all, make another task ready from inside (ready(): the LIFO slot,
 * displacing its task with push_local) or yield (hooks::requeue: the deque
 * and notify_one()).
 *
 * Properties:
 *   - SCHED-P1: in a state where nothing can move (every worker asleep, the
 *     outside thread done), no task is left in any queue (monitor);
 *   - the searching count stays within 0..N (n_searching never underflows
 *     or overflows). The code's "at most half of the workers search"
 *     (find_work) is a load followed by a separate fetch_add, so it is a
 *     soft bound: -DSTRICT_HALF asserts 2*n_searching <= N and Spin finds
 *     both workers searching at once (see models/README.md).
 */

#define N 2
#define NONE 255

byte dq[N];                  /* worker::deque (stealable) */
byte lifo[N];                /* worker::lifo (owner only) */
byte pinned[N];              /* worker::pinned (owner only) */
byte inbox[N];               /* worker::inbox (inbox_mu) */
bool inbox_nonempty[N];      /* worker::inbox_nonempty */
byte inj = 0;                /* the injection queue; its length inj_len */

byte n_searching = 0;        /* runtime_core::n_searching */
byte n_sleeping = 0;         /* runtime_core::n_sleeping */
bool sleeping[N];            /* worker::sleeping (idle_mu) */
byte futex[N];               /* worker::futex: 0 may sleep, 1 woken */
byte idle[N];                /* runtime_core::idle (idle_mu), a stack */
byte nidle = 0;
byte watcher = NONE;         /* runtime_core::watcher (idle_mu) */

byte budget = 2;             /* tasks that running tasks may still make ready */

/* wake_sleeper_locked(w), idle_mu held (timers left out: no `told`): not
 * sleeping, out of `idle`, n_sleeping decremented (seq_cst), a new watcher if
 * w was it. */
inline wake_sleeper_locked(w, j)
{
    sleeping[w] = false;
    j = 0;
    do
    :: j < nidle && idle[j] != w -> j++
    :: else -> break
    od;
    assert(j < nidle);
    do
    :: j + 1 < nidle -> idle[j] = idle[j + 1]; j++
    :: else -> break
    od;
    nidle--;
    idle[nidle] = 0;
    n_sleeping--;
    if
    :: watcher == w ->
        if
        :: nidle == 0 -> watcher = NONE
        :: else -> watcher = idle[nidle - 1]
        fi
    :: else
    fi;
    j = 0
}

/* notify_one(): n_searching, then n_sleeping (two seq_cst loads, two steps);
 * then, under idle_mu, pick a sleeping worker (not the watcher if another
 * one sleeps), wake_sleeper_locked() it and store 1 in its futex word; kick()
 * (futex_wake) after the lock.
 *
 * The critical section is one step. Its accesses to `sleeping`, `idle` and
 * `watcher` are guarded by idle_mu; n_sleeping and the futex word are also
 * read without the lock, but by different parties (notify_one's early
 * return and the sleeper's loop), and neither reader can tell "between the
 * decrement and the store" from "after both": the wake is then certain. */
inline notify_one(nw, j)
{
    if
    :: n_searching > 0 -> skip
    :: else ->
        if
        :: n_sleeping == 0 -> skip
        :: else ->
            atomic {
                /* lock_guard g(idle_mu) */
                if
                :: nidle == 0 -> skip
                :: else ->
                    nw = idle[nidle - 1];
                    if
                    :: nw == watcher && nidle > 1 -> nw = idle[nidle - 2]
                    :: else
                    fi;
                    wake_sleeper_locked(nw, j);
                    futex[nw] = 1;                /* store(1, release) */
                    nw = 0
                fi
            }
        fi
    fi
}

/* push_local(w, t) of a non-pinned task: deque push (seq_cst), notify_one. */
inline push_local(me, nw, j)
{
    dq[me]++;
    notify_one(nw, j)
}

/* pop_injection(w): inj_len (seq_cst load); then under inj_mu a batch of
 * min(32, size / nworkers + 1); the first runs, the rest go to push_local. */
inline pop_injection(me, got, t, nw, j)
{
    if
    :: !got && inj > 0 ->
        atomic {
            if
            :: inj > 0 ->
                t = inj / N + 1;
                if :: t > inj -> t = inj :: else fi;
                inj = inj - t;
                got = true
            :: else -> t = 0
            fi
        };
        do
        :: t > 1 -> t--; push_local(me, nw, j)
        :: else -> t = 0; break
        od
    :: else
    fi
}

/* An outside thread (not a worker): ready() of one task pinned to worker 0
 * (push_inbox + wake(home)), then of one other task (inject()). */
active proctype outside()
{
    byte nw, j;
    /* push_inbox(home = worker 0, t): under inbox_mu, seq_cst flag store */
    d_step { inbox[0]++; inbox_nonempty[0] = true };
    /* wake(home): under idle_mu: wake_sleeper_locked if sleeping, futex word 1; kick() */
    atomic {
        if
        :: sleeping[0] -> wake_sleeper_locked(0, j)
        :: else
        fi;
        futex[0] = 1
    }
    /* inject(t) */
#ifdef BUG_NOTIFY_FIRST
    notify_one(nw, j);
    inj++;                       /* under inj_mu; inj_len.store(seq_cst) */
#else
    inj++;                       /* under inj_mu; inj_len.store(seq_cst) */
    notify_one(nw, j);
#endif
}

proctype worker(byte me)
{
    bool searching = false, got;
    byte t, nw, j, old;

end_loop:
    do
    :: /* ---- find_work(w) ---- */
        /* local_next(w): the inbox (inbox_nonempty, then the move under
         * inbox_mu), the LIFO slot, the pinned FIFO (all owner-only) */
        d_step {
            got = false;
            if
            :: inbox_nonempty[me] ->
                pinned[me] = pinned[me] + inbox[me]; inbox[me] = 0; inbox_nonempty[me] = false
            :: else
            fi;
            if
            :: lifo[me] > 0 -> lifo[me]--; got = true
            :: else ->
                if
                :: pinned[me] > 0 -> pinned[me]--; got = true
                :: else
                fi
            fi
        };
        /* ... then the deque: pop() */
        if
        :: !got ->
            d_step {
                if
                :: dq[me] > 0 -> dq[me]--; got = true
                :: else
                fi
            }
        :: else
        fi;
        pop_injection(me, got, t, nw, j);
        /* searching: at most half of the workers (a load, then fetch_add:
         * two steps) */
        if
        :: !got && !searching ->
            if
            :: 2 * n_searching >= N -> goto to_sleep   /* return nullptr */
            :: else
            fi;
            d_step {
                n_searching++;
                searching = true;
#ifdef STRICT_HALF
                assert(2 * n_searching <= N);
#endif
                assert(n_searching <= N)
            }
        :: else
        fi;
        /* steal(w): half (rounded up) of the other worker's deque into its
         * own, then pop one */
        if
        :: !got ->
            d_step {
                if
                :: dq[1 - me] > 0 ->
                    t = (dq[1 - me] + 1) / 2;
                    dq[1 - me] = dq[1 - me] - t;
                    dq[me] = dq[me] + t - 1;
                    got = true
                :: else
                fi;
                t = 0
            }
        :: else
        fi;
        pop_injection(me, got, t, nw, j);

        if
        :: got ->
            /* loop(): stop_searching(w) if searching, then run_task() */
            if
            :: searching ->
                d_step { searching = false; old = n_searching; n_searching-- };
                assert(old > 0);
                if
                :: old == 1 -> notify_one(nw, j)
                :: else
                fi;
                old = 0
            :: else
            fi;
            /* run_task(): the task may make another task ready from inside
             * (ready(): w->current() is set, so the LIFO slot; the slot's
             * previous task goes to push_local), or yield
             * (hooks::requeue: deque push, notify_one), or end / park. */
            if
            :: budget > 0 ->
                d_step { budget--; old = lifo[me]; lifo[me] = 1 };
                if
                :: old > 0 -> push_local(me, nw, j)
                :: else
                fi;
                old = 0
            :: budget > 0 ->
                budget--;
                push_local(me, nw, j)
            :: true
            fi
        :: else ->
to_sleep:
            /* ---- sleep(w) ---- */
            if
            :: searching ->
                d_step { searching = false; assert(n_searching > 0); n_searching-- }
            :: else
            fi;
            /* under idle_mu: futex word 0, sleeping, into `idle`, the watcher
             * if there is none, n_sleeping incremented (seq_cst). One step:
             * the futex word is read outside the lock only by this worker,
             * n_sleeping is the one access others make without the lock. */
            atomic {
                        futex[me] = 0;
                sleeping[me] = true;
                idle[nidle] = me; nidle++;
                if :: watcher == NONE -> watcher = me :: else fi;
                n_sleeping++
            };
#ifndef BUG_NO_RECHECK
            /* has_work(w): its own queues, then (seq_cst loads, a step
             * each) its inbox flag, the injection queue's length, every
             * deque. Any work: no sleep. */
            if
            :: lifo[me] != 0 || pinned[me] != 0 -> goto awake
            :: else
            fi;
            if :: inbox_nonempty[me] -> goto awake :: else fi;
            if :: inj != 0 -> goto awake :: else fi;
            if :: dq[0] != 0 -> goto awake :: else fi;
            if :: dq[1] != 0 -> goto awake :: else fi;
#endif
end_sleep:
            futex[me] == 1;     /* futex_wait(&futex, 0) in a loop until it is 1 */
awake:
            /* under idle_mu: wake_sleeper_locked() if still sleeping */
            atomic {
                        if
                :: sleeping[me] -> wake_sleeper_locked(me, j)
                :: else
                fi
            }
        fi
    od
}

init {
    atomic {
        run worker(0);
        run worker(1)
    }
}

/* SCHED-P1: when nothing can move, every task has been run. */
active proctype monitor()
{
    timeout ->
    assert(inj == 0 && dq[0] == 0 && dq[1] == 0 &&
           lifo[0] == 0 && lifo[1] == 0 && pinned[0] == 0 && pinned[1] == 0 &&
           inbox[0] == 0 && inbox[1] == 0)
}
