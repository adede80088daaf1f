// pan: -DSAFETY
// run: -m100000
// ltl: joiners_return
// config: -DWITH_J1 -DWITH_J3
// config: -DWITH_J2 -DWITH_J3
// bug: BUG_CHECK_UNLOCKED wait_finished() checks finished outside the join lock, then links (check-then-act)
// bug: BUG_UNLINK_ON_TIMEOUT_ONLY a joiner unlinks its node when it timed out but not when it was canceled
/* join.pml: joining a task (wait_finished) from a task, with a deadline or
 * not and with cancellation, and from a plain thread with a deadline or
 * not; when_any (wait_any) from a task over two tasks; complete() waking
 * the joiners under the target's join lock.
 *
 * Code (weft): src/task/task.cpp: wait_finished, wait_any, complete,
 * join_guard, link, unlink, arm, try_end, arrive, park, park_until,
 * request_cancel; include/weft/detail/task_record.hpp (join_waiter,
 * join_lock, joiners, finished); src/runtime/timers.cpp fire_shard (the
 * wait timer), src/runtime/worker.cpp finish_task (which calls complete).
 *
 * Parties:
 *   X, Y     two tasks that each end at some moment: complete(t): under
 *            t's join_lock, finished = true, then every joiner node is
 *            unlinked and woken (a task: try_end(notified) + arrive; a
 *            thread: futex word 1 + futex_wake);
 *   J1       a task: wait_finished(X, deadline or none); node 0;
 *   J2       a task: wait_any({X, Y}); nodes 1 (on X) and 2 (on Y);
 *   J3       a plain thread: wait_finished(X, deadline or none); node 3;
 *   timer    J1's wait_timer (fire_shard: the word is copied under the
 *            wheel lock, try_end(timed_out) + arrive after it);
 *   canceler request_cancel(J1), at any moment or never.
 * The task machinery (wait word, arrivals, C1) is task_wait.pml's, one
 * wait per joiner task. All of them at once make 10^8 states, so the model
 * is checked in two configurations (the `config:` lines): J1 with J3 (two
 * joiners of X: a task with its timer and canceler, and a thread), and J2
 * with J3 (when_any over X and Y while a thread joins X). A joiner left
 * out counts as returned.
 *
 * Properties:
 *   - a joiner that returns "finished" has a finished target (when_any: the
 *     index it returns is of a finished task);
 *   - a joiner task is queued exactly once for its wait (R1), and its wait
 *     was ended by exactly one party (W2);
 *   - a joiner that leaves (timed out, canceled, or when_any's other task)
 *     has unlinked its nodes: complete() never touches a node whose frame
 *     has ended, and no node is linked after its owner returned;
 *   - no lost wake-up: when nothing can move, every joiner has returned
 *     (both targets end, so nobody may wait for ever): an invalid end state
 *     otherwise;
 *   - ltl joiners_return: every run reaches the state where all three
 *     joiners have returned (the same, as liveness, checked with -a).
 */

#define X 0
#define Y 1
#define NONE 255

/* wait_status and the wait word (as in task_wait.pml) */
#define ARMED     1
#define NOTIFIED  2
#define CANCELED  3
#define TIMED_OUT 4
#define STATUS(w) ((w) & 7)
#define CBIT      8
#define SEQ(w)    ((w) >> 4)

/* results */
#define R_FINISHED 1
#define R_TIMEOUT  2
#define R_CANCELED 3

typedef jlist { byte e[3]; byte cnt };

/* the targets X, Y */
bool jlock[2];           /* task_record::join_lock */
bool fin[2];             /* task_record::finished */
jlist joiners[2];        /* task_record::joiners (join_lock) */

/* join_waiter nodes 0..3 */
byte nd_task[4];         /* the joiner task (0: J1, 1: J2), NONE: a thread */
byte nd_word[4];         /* the wait word it ends */
bool nd_linked[4];       /* join_waiter::linked */
bool nd_alive[4];        /* the node's frame exists */

/* the joiner tasks J1 (0) and J2 (1) */
byte ww[2];              /* wait_word */
byte arrivals[2];
byte reason[2];          /* cancel_reason */
byte queued[2];          /* in a run queue */
byte queued_n[2];        /* ghost: ready() calls */
byte ended_n[2];         /* ghost: successful try_end */
bool j1_finished = false;

/* J1's wait_timer */
bool tim_in = false;
byte tim_word = 0;

/* J3's futex word */
byte futex3 = 0;

bool done[3];            /* J1, J2, J3 have returned */
byte result[3];

#define LOCK(x)   atomic { !jlock[x] -> jlock[x] = true }
#define UNLOCK(x) jlock[x] = false

/* link(x, n): push at the front (join lock held) */
inline link(x, n)
{
    assert(!nd_linked[n] && nd_alive[n]);
    joiners[x].e[2] = joiners[x].e[1];
    joiners[x].e[1] = joiners[x].e[0];
    joiners[x].e[0] = n;
    joiners[x].cnt++;
    nd_linked[n] = true
}

/* unlink(x, n): a no-op if not linked (join lock held) */
inline unlink(x, n, k)
{
    if
    :: nd_linked[n] ->
        k = 0;
        do
        :: joiners[x].e[k] != n -> k++
        :: else -> break
        od;
        do
        :: k + 1 < joiners[x].cnt -> joiners[x].e[k] = joiners[x].e[k + 1]; k++
        :: else -> break
        od;
        joiners[x].cnt--;
        joiners[x].e[joiners[x].cnt] = 0;
        nd_linked[n] = false;
        k = 0
    :: else
    fi
}

inline try_end(j, word, why, ok)
{
    d_step {
        if
        :: STATUS(word) == ARMED && ww[j] == word ->
            ww[j] = (word & ~15) | why; ok = true;
            ended_n[j]++; assert(ended_n[j] == 1)
        :: else -> ok = false
        fi
    }
}

inline arrive(j, a)
{
    d_step { a = arrivals[j]; arrivals[j]++ };
    if
    :: a == 1 ->
        arrivals[j] = 0;
        d_step { queued[j]++; queued_n[j]++; assert(queued_n[j] == 1) }   /* ready() */
    :: else
    fi;
    a = 0
}

/* arm(t, cancellable = true) with C1 */
inline arm(j, w, r, ok, a)
{
    w = ((SEQ(ww[j]) + 1) << 4) | CBIT | ARMED;
    ww[j] = w;                          /* seq_cst store */
    r = reason[j];                      /* seq_cst load (C1) */
    if
    :: r != 0 ->
        try_end(j, w, CANCELED, ok);
        if :: ok -> arrive(j, a) :: else fi
    :: else
    fi;
    r = 0
}

/* park(t): the scheduler's arrival after the switch, then suspended until
 * a worker takes the task from the run queue; returns the status. Not an
 * end state: both targets end, so a joiner parked for ever lost its wake. */
inline park(j, why, a)
{
    arrive(j, a);
    d_step { queued[j] > 0 -> queued[j]--; why = STATUS(ww[j]) };
    assert(why != ARMED)               /* W3 */
}

/* complete(t) */
proctype target(byte x)
{
    byte n, ok, a, j;

    LOCK(x);
    fin[x] = true;                      /* finished.store(true, release) */
    do
    :: joiners[x].cnt > 0 ->
        d_step {
            n = joiners[x].e[0];
            assert(nd_alive[n]);        /* never a node whose owner returned */
            /* next read, then n->linked = false (the node leaves the list) */
            joiners[x].e[0] = joiners[x].e[1];
            joiners[x].e[1] = joiners[x].e[2];
            joiners[x].e[2] = 0;
            joiners[x].cnt--;
            nd_linked[n] = false
        };
        if
        :: nd_task[n] != NONE ->
            j = nd_task[n];
            try_end(j, nd_word[n], NOTIFIED, ok);
            if :: ok -> arrive(j, a) :: else fi
        :: else ->
            futex3 = 1                  /* f->store(1, release); futex_wake(f, 1) */
        fi;
        d_step { n = 0; j = 0; ok = 0 }
    :: else -> break
    od;
    UNLOCK(x)                           /* joiners = nullptr; then finish_flags */
}

/* J1: wait_finished(X, deadline) from a task */
proctype j1()
{
    byte w, r, why, k, a;
    bool ok, dl;

    if :: dl = true :: dl = false fi;
    if
    :: fin[X] -> result[0] = R_FINISHED; goto out    /* finished.load(acquire) */
    :: else
    fi;
    nd_alive[0] = true;
    nd_task[0] = 0;
    arm(0, w, r, ok, a);
    nd_word[0] = w;
#ifdef BUG_CHECK_UNLOCKED
    /* the seeded bug: the check outside the lock, the link after it */
    if
    :: fin[X] ->
        try_end(0, w, NOTIFIED, ok);
        if :: ok -> arrive(0, a) :: else fi
    :: else ->
        LOCK(X);
        d_step { link(X, 0) };
        UNLOCK(X)
    fi;
#else
    LOCK(X);
    if
    :: fin[X] ->
        /* finished meanwhile: end our own wait, park anyway (R1 pairs) */
        try_end(0, w, NOTIFIED, ok);
        if :: ok -> arrive(0, a) :: else fi
    :: else ->
        d_step { link(X, 0) }
    fi;
    UNLOCK(X);
#endif
    /* park_until(me, word, deadline) */
    if
    :: dl -> d_step { tim_word = w; tim_in = true }     /* add_timer */
    :: else
    fi;
    park(0, why, a);
    tim_in = false;                                     /* remove_timer */
    /* not notified: unlink under the join lock */
#ifdef BUG_UNLINK_ON_TIMEOUT_ONLY
    if
    :: why == TIMED_OUT ->
#else
    if
    :: why != NOTIFIED ->
#endif
        LOCK(X);
        d_step { unlink(X, 0, k) };
        UNLOCK(X)
    :: else
    fi;
    if
    :: why == NOTIFIED -> result[0] = R_FINISHED
    :: why == TIMED_OUT -> result[0] = R_TIMEOUT
    :: why == CANCELED -> result[0] = R_CANCELED     /* forced_unwind */
    fi;
    d_step {
        assert(queued_n[0] == 1 && ended_n[0] == 1);
        nd_alive[0] = false                            /* the frame ends */
    };
out:
    skip;                /* (a goto may not jump into a d_step) */
    d_step {
        assert(result[0] != R_FINISHED || fin[X]);
        done[0] = true;
        j1_finished = true                             /* the task goes on / ends */
    }
}

/* J2: wait_any({X, Y}) from a task (not canceled in this model) */
proctype j2()
{
    byte w, r, why, k, a, i;
    bool ok, d;

    /* first_finished() */
    if
    :: fin[X] -> result[1] = X; goto out
    :: else
    fi;
    if
    :: fin[Y] -> result[1] = Y; goto out
    :: else
    fi;
    d_step { nd_alive[1] = true; nd_alive[2] = true; nd_task[1] = 1; nd_task[2] = 1 };
    arm(1, w, r, ok, a);
    d_step { nd_word[1] = w; nd_word[2] = w };
    /* link on every task until one is found finished */
    d = false;
    LOCK(X);
    if
    :: fin[X] -> d = true
    :: else -> d_step { link(X, 1) }
    fi;
    UNLOCK(X);
    if
    :: !d ->
        LOCK(Y);
        if
        :: fin[Y] -> d = true
        :: else -> d_step { link(Y, 2) }
        fi;
        UNLOCK(Y)
    :: else
    fi;
    if
    :: d ->
        try_end(1, w, NOTIFIED, ok);
        if :: ok -> arrive(1, a) :: else fi
    :: else
    fi;
    park(1, why, a);
    /* unlink from every task */
    LOCK(X);
    d_step { unlink(X, 1, k) };
    UNLOCK(X);
    LOCK(Y);
    d_step { unlink(Y, 2, k) };
    UNLOCK(Y);
    assert(why == NOTIFIED);
    /* first_finished() */
    if
    :: fin[X] -> result[1] = X
    :: else ->
        if
        :: fin[Y] -> result[1] = Y
        :: else -> assert(false)    /* woken, but no task has finished */
        fi
    fi;
    d_step {
        assert(queued_n[1] == 1 && ended_n[1] == 1);
        nd_alive[1] = false; nd_alive[2] = false
    };
out:
    done[1] = true
}

/* J3: wait_finished(X, deadline) from a plain thread */
proctype j3()
{
    byte k;
    bool dl;

    if :: dl = true :: dl = false fi;
    if
    :: fin[X] -> result[2] = R_FINISHED; goto out
    :: else
    fi;
    d_step { nd_alive[3] = true; nd_task[3] = NONE; futex3 = 0 };
    LOCK(X);
    if
    :: fin[X] -> UNLOCK(X); result[2] = R_FINISHED; goto gone
    :: else -> d_step { link(X, 3) }; UNLOCK(X)
    fi;
    /* while word == 0: futex_wait (until the deadline, if any) */
    if
    :: futex3 != 0 -> skip
    :: dl -> skip                        /* the deadline passed */
    fi;
    if
    :: futex3 != 0 -> result[2] = R_FINISHED
    :: else ->
        LOCK(X);
        d_step {
            /* complete() unlinks every waiter it wakes, under this lock */
            if
            :: !nd_linked[3] -> result[2] = R_FINISHED
            :: else -> result[2] = R_TIMEOUT
            fi;
            unlink(X, 3, k)
        };
        UNLOCK(X)
    fi;
gone:
    nd_alive[3] = false;
out:
    skip;                /* (a goto may not jump into a d_step) */
    d_step {
        assert(result[2] != R_FINISHED || fin[X]);
        done[2] = true
    }
}

/* J1's wait_timer: fire_shard() */
proctype timer()
{
    byte w, a;
    bool ok;
end_idle:
    do
    :: d_step { tim_in -> w = tim_word; tim_in = false };
       try_end(0, w, TIMED_OUT, ok);
       if :: ok -> arrive(0, a) :: else fi;
       w = 0
    :: j1_finished -> break
    od
}

/* request_cancel(J1, canceled) */
proctype canceler()
{
    byte w, a;
    bool ok;
    if
    :: true
    :: goto out                         /* never */
    fi;
    if
    :: j1_finished -> goto out
    :: else
    fi;
    d_step { if :: reason[0] == 0 -> reason[0] = CANCELED :: else fi };
    w = ww[0];                          /* C1 */
    if
    :: STATUS(w) == ARMED && (w & CBIT) ->
        try_end(0, w, CANCELED, ok);
        if :: ok -> arrive(0, a) :: else fi
    :: else
    fi;
out:
    skip
}

init {
    atomic {
        run target(X);
        run target(Y);
#ifdef WITH_J1
        run j1();
        run timer();
        run canceler();
#else
        done[0] = true;
        j1_finished = true;
#endif
#ifdef WITH_J2
        run j2();
#else
        done[1] = true;
#endif
#ifdef WITH_J3
        run j3()
#else
        done[2] = true
#endif
    }
}

ltl joiners_return { <> (done[0] && done[1] && done[2]) }
