// pan: -DSAFETY
// run: -m100000
// bug: BUG_C1 TASK-C1's store/load pair in the wrong order: arm() loads cancel_reason before it stores the armed word
// bug: BUG_W1 try_end() compares only the status, not the sequence: a stale timer can end a later wait
// bug: BUG_R1 arrive() does not reset the arrival word to 0 when it sets the second bit: the next wait starts with both bits set, and the scheduler's arrival queues the task before that wait has ended
// bug: BUG_SWITCHED_AS_WOKEN arrive_switched() sets arrived_woken instead of arrived_switched: a waker that arrives after it never sees the switched bit, and the wake-up is lost
/* task_wait.pml: the task wait word (TASK-W1 - TASK-W3), the two arrivals (TASK-R1) and
 * cancellation's store/load pair (TASK-C1).
 *
 * Code (weft): include/weft/detail/task_record.hpp (wait word layout,
 * TASK-W1 - TASK-W3, TASK-R1, the arrival bits arrived_switched and
 * arrived_woken of SHRINK-S1, timer_node), src/task/task.cpp (arm, try_end,
 * arrive, arrive_switched, park, park_until, request_cancel),
 * src/runtime/runtime_core.hpp (hooks::after_park), src/runtime/timers.cpp
 * (fire_shard, remove_timer).
 *
 * The two arrivals (TASK-R1, SHRINK-S1) are bits of task_record::arrivals.
 * The scheduler's arrival, arrive_switched() from hooks::after_park once the
 * task's context is saved, is fetch_or(arrived_switched); it queues the task
 * if the old word had arrived_woken. The waker's arrival, arrive() after a
 * successful try_end(), is fetch_or(arrived_woken); it queues the task if the
 * old word was exactly arrived_switched. Whoever sets the second bit stores
 * 0 (a separate relaxed store, a step of its own here) and calls ready().
 * Each fetch_or is one atomic instruction, one d_step here.
 * Left out: the third bit, arrived_held, a shrinker's hold (try_hold(),
 * drop_hold(); SHRINK-S2 - SHRINK-S4). No shrinker runs in this model, so
 * the hold is never set and arrive()'s test "old word == arrived_switched"
 * is "the switched bit is set". models/shrink.pml checks the three bits
 * with a shrinker (and with the wait's end as one step).
 *
 * One task makes NWAITS waits in a row. Each wait is armed (fresh sequence,
 * cancellable or not), its word is handed to a notifier (the node a
 * primitive links, a wait_node) and, if it has a
 * deadline, to the task's wait_timer. Three parties race to end it:
 *   notifier  try_end(word, notified) + arrive(); may also never come (a
 *             join of a task that never ends), so a wait may legally stay
 *             armed forever;
 *   timer     fire_shard(): copies the node's word under the wheel lock,
 *             then try_end(copy, timed_out) + arrive() outside it; the copy
 *             may be from an earlier wait (the stale waker of TASK-W1);
 *   canceler  request_cancel(t, canceled): CAS of cancel_reason, then load
 *             of the word (TASK-C1), try_end + arrive if armed and cancellable.
 *
 * The C++ accesses of TASK-C1 are seq_cst, so their interleavings are exactly
 * Promela's sequentially consistent ones. What a weaker ordering would
 * allow (a store buffered past the following load: the store-buffering
 * litmus test) is the same as performing the load before the store, which
 * is how BUG_C1 models it.
 *
 * Properties:
 *   - TASK-W2: exactly one party ends each wait (ended_n[k] == 1 when the task
 *     resumes from wait k, never 2);
 *   - TASK-W3: the wait has ended when the task resumes (status != armed);
 *   - TASK-R1: the task is queued exactly once per wait (queued_n[k] == 1),
 *     and only after both arrivals: when it is switched out (parked) and
 *     its current wait has ended;
 *   - TASK-W1: a stale waker never ends a later wait: every successful try_end
 *     names the current wait, and the task never sees timed_out from a wait
 *     without a deadline or canceled from a wait that was not cancellable;
 *   - no lost wake-up, no missed cancellation: in a state where nothing
 *     can move, the task is not parked with its wait ended, nor parked in a
 *     cancellable armed wait while a cancellation is pending, and nothing
 *     is left in a run queue (monitor, at `timeout`).
 */

#define NWAITS 2

/* wait_status (task_record.hpp) */
#define IDLE      0
#define ARMED     1
#define NOTIFIED  2
#define CANCELED  3
#define TIMED_OUT 4

/* wait word: [ sequence | cancellable : 1 | status : 3 ] (4-bit shift) */
#define STATUS(w) ((w) & 7)
#define CBIT      8
#define SEQ(w)    ((w) >> 4)

/* the arrival bits (task_record.hpp); arrived_held = 4 is never set here */
#define SWITCHED  1     /* arrived_switched */
#define WOKEN     2     /* arrived_woken */

byte ww = 0;            /* task_record::wait_word */
byte arrivals = 0;      /* task_record::arrivals (TASK-R1, SHRINK-S1): bits */
byte reason = 0;        /* task_record::cancel_reason */
bool finished = false;  /* task_record::finished */

/* task_record::wait_timer: in the wheel or not, and its `word` */
bool timer_in_wheel = false;
byte timer_word = 0;

/* the primitive's node (a wait_node): linked, and the word */
bool node_linked = false;
byte node_word = 0;

/* the scheduler: ready() puts the task in a run queue; a worker runs it */
byte queued = 0;
bool parked = false;    /* switched out in park(), not yet resumed */

/* ghosts */
byte cur = 0;                      /* sequence of the current wait */
byte ended_n[NWAITS + 1];          /* successful try_end per wait */
byte queued_n[NWAITS + 1];         /* ready() per wait */
bool had_deadline[NWAITS + 1];
bool was_cancellable[NWAITS + 1];

/* try_end(t, word, why): status must be armed, then CAS of the whole word
 * from `word` to word-with-status-why (cancellable bit cleared). */
inline try_end(word, why, ok)
{
    d_step {
        if
        :: STATUS(word) != ARMED -> ok = false
#ifdef BUG_W1
        /* the seeded bug: only the status is compared */
        :: else ->
            if
            :: STATUS(ww) == ARMED ->
                assert(SEQ(word) == SEQ(ww));  /* TASK-W1: stale waker ends a later wait */
                ww = (ww & ~15) | why; ok = true
            :: else -> ok = false
            fi
#else
        :: else ->
            if
            :: ww == word ->
                assert(SEQ(word) == cur);      /* TASK-W1: only the current wait is ended */
                ww = (word & ~15) | why; ok = true
            :: else -> ok = false
            fi
#endif
        fi;
        if
        :: ok -> ended_n[SEQ(ww)]++; assert(ended_n[SEQ(ww)] == 1)  /* TASK-W2 */
        :: else
        fi
    }
}

/* runtime_core::ready(): queue the task (its worker will resume it). */
inline ready()
{
    d_step {
        /* TASK-R1: only after both arrivals, the switch-out and the end of
         * the current wait */
        assert(parked && STATUS(ww) != ARMED && SEQ(ww) == cur);
        queued++;
        queued_n[cur]++;
        assert(queued_n[cur] == 1)   /* TASK-R1: queued once per wait */
    }
}

/* arrive(t), the waker's arrival: fetch_or(arrived_woken, acq_rel) ==
 * arrived_switched -> store(0, relaxed), ready(t). */
inline arrive(a)
{
    d_step { a = arrivals; arrivals = arrivals | WOKEN };
    if
    :: a == SWITCHED ->
#ifndef BUG_R1
        arrivals = 0;
#endif
        ready()
    :: else
    fi
}

/* arrive_switched(t), the scheduler's arrival: fetch_or(arrived_switched,
 * acq_rel) & arrived_woken -> store(0, relaxed), ready(t). */
inline arrive_switched(a)
{
#ifdef BUG_SWITCHED_AS_WOKEN
    /* the seeded bug: the wrong bit */
    d_step { a = arrivals; arrivals = arrivals | WOKEN };
#else
    d_step { a = arrivals; arrivals = arrivals | SWITCHED };
#endif
    if
    :: (a & WOKEN) -> arrivals = 0; ready()
    :: else
    fi
}

active proctype task()
{
    byte k, w, r, a;
    bool c, dl, ok;

    for (k : 1 .. NWAITS) {
        /* ---- arm(t, cancellable) ----
         * cancellable && shield_depth == 0: either (a shield or arm(false)
         * makes a wait non-cancellable). */
        if
        :: c = true
        :: c = false
        fi;
        d_step {
            cur = SEQ(ww) + 1;   /* wait_word.load(relaxed) >> shift, + 1 */
            w = (cur << 4) | ARMED;
            if :: c -> w = w | CBIT :: else fi;
            was_cancellable[cur] = c
        };
#ifdef BUG_C1
        r = reason;              /* load cancel_reason ... */
        ww = w;                  /* ... before the store of the word */
#else
        ww = w;                  /* TASK-C1: wait_word.store(w, seq_cst) */
        r = reason;              /* TASK-C1: cancel_reason.load(seq_cst) */
#endif
        if
        :: c && r != 0 ->
            try_end(w, CANCELED, ok);
            if :: ok -> arrive(a) :: else fi
        :: else
        fi;

        /* the primitive links its node with the word (under its lock) */
        d_step { node_word = w; node_linked = true };

        /* ---- park_until(t, word, deadline) ---- */
        if
        :: dl = true;
           d_step { timer_word = w; timer_in_wheel = true }  /* add_timer() */
        :: dl = false
        fi;
        had_deadline[cur] = dl;

        /* park(): set_state(waiting); switch_out(); the after-switch hook
         * hooks::after_park makes the scheduler's arrival, arrive_switched(),
         * once the task's context is saved. */
        parked = true;
        arrive_switched(a);
end_parked:
        /* suspended until a worker takes it from the run queue */
        d_step { queued > 0 -> queued--; parked = false };

        /* resumed: status_of(wait_word.load(acquire)) (TASK-W3) */
        r = STATUS(ww);
        assert(r != ARMED);              /* TASK-W3 */
        assert(ended_n[cur] == 1);       /* TASK-W2 */
        assert(queued_n[cur] == 1);      /* TASK-R1 */
        assert(r != TIMED_OUT || dl);    /* TASK-W1: no stale timer */
        assert(r != CANCELED || c);      /* only a cancellable wait is canceled */

        /* park_until(): remove_timer(); the primitive unlinks its node
         * (WAITER-V3; a no-op if the notifier took it). */
        if :: dl -> timer_in_wheel = false :: else fi;
        node_linked = false;

        /* a canceled wait unwinds the task (forced_unwind) */
        if
        :: r == CANCELED -> break
        :: else
        fi
    };
    finished = true
}

/* A primitive's waker: takes the node under its lock (reading the word),
 * then try_end(word, notified) and arrive(). It may stop at any time. */
active proctype notifier()
{
    byte w, a;
    bool ok;
end_idle:
    do
    :: d_step { node_linked -> w = node_word; node_linked = false };
       try_end(w, NOTIFIED, ok);
       if :: ok -> arrive(a) :: else fi
    :: break
    od
}

/* runtime_core::fire_shard(): the wheel hands out the node and the word is
 * copied under the wheel's lock; try_end() and arrive() come after the lock,
 * when the node may already belong to the task's next wait. */
active proctype timer()
{
    byte w, a;
    bool ok;
end_idle:
    do
    :: d_step { timer_in_wheel -> w = timer_word; timer_in_wheel = false };
       try_end(w, TIMED_OUT, ok);
       if :: ok -> arrive(a) :: else fi
    :: finished -> break
    od
}

/* request_cancel(t, canceled), from another thread at any moment. */
active proctype canceler()
{
    byte w, a;
    bool ok;
    if
    :: finished -> goto done          /* finished.load(acquire) */
    :: else
    fi;
    d_step { if :: reason == 0 -> reason = CANCELED :: else fi };  /* CAS, seq_cst */
    w = ww;                                                        /* TASK-C1: load, seq_cst */
    if
    :: STATUS(w) == ARMED && (w & CBIT) ->
        try_end(w, CANCELED, ok);
        if :: ok -> arrive(a) :: else fi
    :: else
    fi;
done:
    skip
}

/* In a state where nothing can move (all parties done or blocked): no lost
 * wake-up, no missed cancellation, nothing left queued. */
active proctype monitor()
{
    timeout ->
    assert(!(parked && STATUS(ww) != ARMED));            /* wait ended, task never queued */
    assert(!(parked && STATUS(ww) == ARMED && (ww & CBIT) && reason != 0)); /* missed cancellation */
    assert(queued == 0)
}
