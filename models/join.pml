// pan: -DSAFETY
// run: -m100000
// ltl: joiners_return
// config: -DWITH_J1 -DWITH_J3
// config: -DWITH_J2 -DWITH_J3
// bug: BUG_CHECK_UNLOCKED wait_finished() checks finished outside the join lock, then links (check-then-act; TASK-J1)
// bug: BUG_UNLINK_ON_TIMEOUT_ONLY a joiner unlinks its node when it timed out but not when it was canceled (WAITER-V3)
// bug: BUG_NO_CLAIM complete() wakes every linked joiner without claiming its waiter first (WAITER-V1; TASK-J2)
/* join.pml: joining a task through the one waiter (weft/waiter.hpp):
 * wait_finished from a task, with a deadline or not and with cancellation,
 * and from a plain thread with a deadline or not; when_any (wait_any) from
 * a task over two tasks; complete() claiming the joiners under the
 * target's join lock and waking them after it. TASK-J1 - TASK-J3 in
 * include/weft/detail/task_record.hpp.
 *
 * Code (weft): src/task/task.cpp: wait_finished, wait_any, complete,
 * wake_joiners, claim_all, wake_all; the waiter (include/weft/waiter.hpp,
 * src/task/waiter.cpp): waiter::arm, claim, claim_self, wake, wait;
 * wait_queue::push_back, remove, pop_claimed and spin_lock
 * (include/weft/detail/task_record.hpp); task_record::join_lock, joiners,
 * finished; for a task the waiter's claim is arm / try_end / arrive / park
 * / park_until (src/task/task.cpp, as in task_wait.pml), for a thread it
 * is the waiter's state_ (as in channel_rendezvous.pml);
 * src/runtime/timers.cpp fire_shard (the wait timer), src/runtime/worker.cpp
 * finish_task (which calls complete).
 *
 * Parties:
 *   X, Y     two tasks that each end at some moment: complete(t): under
 *            t's join_lock, finished = true; if joiners is not empty,
 *            wake_joiners(): claim_all() pops every node and claims its
 *            waiter (a task: try_end(notified); a thread: state_ armed ->
 *            claimed), dropping those claimed elsewhere; then the lock is
 *            released and wake_all() wakes the claimed ones (a task:
 *            arrive; a thread: state_ = woken + futex_wake);
 *   J1       a task: wait_finished(X, deadline or none); waiter 0, node 0;
 *   J2       a task: wait_any({X, Y}); waiter 1, nodes 1 (on X) and 2 (on Y);
 *   J3       a plain thread: wait_finished(X, deadline or none); waiter 2,
 *            node 3;
 *   timer    J1's wait_timer (fire_shard: the word is copied under the
 *            wheel lock, try_end(timed_out) + arrive after it);
 *   canceler request_cancel(J1), at any moment or never.
 * The task machinery (wait word, arrivals, TASK-C1) is task_wait.pml's, one
 * wait per joiner task. All of them at once make 10^8 states, so the model
 * is checked in two configurations (the `config:` lines): J1 with J3 (two
 * joiners of X: a task with its timer and canceler, and a thread), and J2
 * with J3 (when_any over X and Y while a thread joins X). A joiner left
 * out counts as returned.
 *
 * Abstractions: a join_lock is a flag taken by an atomic test; what it
 * guards (the queue, a node's links, `finished` as the joiners read it
 * under the lock) changes in steps of their own under it. Each claim is a
 * step of its own (other parties reach the word or state_ without the
 * lock). futex_wait is the blocking of the thread's wait() until state_ is
 * woken (or its own deadline CAS).
 *
 * Properties:
 *   - a joiner that returns "finished" has a finished target (when_any: the
 *     index it returns is of a finished task);
 *   - a joiner task's armed wait is ended by exactly one party (TASK-W2, WAITER-V1),
 *     and the task is queued exactly once if it parked (TASK-R1), never if it
 *     ended its own wait (claim_self); a thread's waiter is claimed at most
 *     once, and woken only after it was claimed;
 *   - a joiner that leaves (timed out, canceled, or when_any's other task)
 *     has unlinked its nodes: complete() never touches a node or a waiter
 *     whose owner has returned, neither under the lock nor in the wakes
 *     after it (WAITER-V3, WAITER-V4);
 *   - no lost wake-up: when nothing can move, every joiner has returned
 *     (both targets end, so nobody may wait for ever), and no waiter is
 *     claimed but not woken: an invalid end state otherwise;
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

/* the thread waiter's state_ (waiter.cpp; 0 before arm() here) */
#define TS_ARMED   1
#define TS_CLAIMED 2
#define TS_WOKEN   3
#define TS_TIMED   4

/* results */
#define R_FINISHED 1
#define R_TIMEOUT  2
#define R_CANCELED 3

typedef jlist { byte e[3]; byte cnt };

/* the targets X, Y */
bool jlock[2];           /* task_record::join_lock (spin_lock) */
bool fin[2];             /* task_record::finished */
jlist joiners[2];        /* task_record::joiners (wait_queue, FIFO; join_lock) */

/* wait_node 0..3 */
byte nd_w[4];            /* wait_node::w: waiter 0 (J1), 1 (J2), 2 (J3) */
bool nd_linked[4];       /* wait_node::linked */
bool nd_alive[4];        /* the node exists (its stable<> / vector) */

/* waiters 0..2 */
bool w_alive[3];         /* the waiter exists */
byte w_word[2];          /* waiter::word_ of the task waiters J1, J2 */
byte tstate = 0;         /* J3's waiter::state_ */
byte tclaims = 0;        /* ghost: J3's waiter claimed */

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

bool done[3];            /* J1, J2, J3 have returned */
byte result[3];

#define LOCK(x)   atomic { !jlock[x] -> jlock[x] = true }
#define UNLOCK(x) jlock[x] = false

/* wait_queue::push_back(n) (join lock held) */
inline push_back(x, n)
{
    assert(!nd_linked[n] && nd_alive[n]);
    joiners[x].e[joiners[x].cnt] = n;
    joiners[x].cnt++;
    nd_linked[n] = true
}

/* wait_queue::remove(n): a no-op if not linked (join lock held) */
inline remove(x, n, k)
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

/* detail::arm(t, cancellable = true) with TASK-C1 (waiter::arm for a task) */
inline arm(j, w, r, ok, a)
{
    w = ((SEQ(ww[j]) + 1) << 4) | CBIT | ARMED;
    ww[j] = w;                          /* seq_cst exchange */
    r = reason[j];                      /* seq_cst load (TASK-C1) */
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
    assert(why != ARMED)               /* TASK-W3 */
}

/* waiter::claim() of waiter wi (a waker, under the join lock) */
inline claim(wi, ok)
{
    if
    :: wi < 2 -> try_end(wi, w_word[wi], NOTIFIED, ok)
    :: else ->
        d_step {
            if
            :: tstate == TS_ARMED -> tstate = TS_CLAIMED; tclaims++; assert(tclaims == 1); ok = true
            :: else -> ok = false
            fi
        }
    fi
}

/* waiter::wake() of waiter wi, after the join lock is released: a task's
 * wake reads task_ and arrives; a thread's stores woken (its futex_wake
 * after it touches no memory of the waiter's) */
inline wake(wi, a)
{
    if
    :: wi < 2 ->
        assert(w_alive[wi]);
        arrive(wi, a)
    :: else ->
        d_step { assert(w_alive[2] && tstate == TS_CLAIMED); tstate = TS_WOKEN }
    fi
}

/* complete(t) */
proctype target(byte x)
{
    byte n, wi, ok, a, i, cn;
    byte chain[3];

    LOCK(x);
    fin[x] = true;                      /* finished.store(true, release) */
    if
    :: joiners[x].cnt == 0 ->
        UNLOCK(x)
    :: else ->
        /* wake_joiners(): claim_all() under the lock */
        do
        :: joiners[x].cnt > 0 ->
            d_step {
                /* pop_claimed(): the front node, unlinked */
                n = joiners[x].e[0];
                assert(nd_alive[n]);        /* never a node whose owner returned */
                joiners[x].e[0] = joiners[x].e[1];
                joiners[x].e[1] = joiners[x].e[2];
                joiners[x].e[2] = 0;
                joiners[x].cnt--;
                nd_linked[n] = false;
                wi = nd_w[n];
                assert(w_alive[wi])
            };
#ifdef BUG_NO_CLAIM
            ok = true;
#else
            claim(wi, ok);                  /* n->w->claim() */
#endif
            if
            :: ok -> chain[cn] = n; cn++    /* on the chain (n->next) */
            :: else                         /* claimed elsewhere: dropped */
            fi;
            ok = 0
        :: else -> break
        od;
        UNLOCK(x);
        /* wake_all(): each node read before its waiter is woken */
        i = 0;
        do
        :: i < cn ->
            n = chain[i];
            assert(nd_alive[n]);
            wake(nd_w[n], a);
            i++
        :: else -> break
        od
    fi                                  /* then finish_flags */
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
    /* stable<one_wait> held: waiter 0 bound to J1, node 0 */
    d_step { nd_alive[0] = true; w_alive[0] = true; nd_w[0] = 0 };
#ifdef BUG_CHECK_UNLOCKED
    /* the seeded bug: the check outside the lock, the link after it */
    if
    :: fin[X] -> result[0] = R_FINISHED; goto gone
    :: else
    fi;
    arm(0, w, r, ok, a);
    w_word[0] = w;
    LOCK(X);
    d_step { push_back(X, 0) };
    UNLOCK(X);
#else
    LOCK(X);
    if
    :: fin[X] -> UNLOCK(X); result[0] = R_FINISHED; goto gone     /* TASK-J1 */
    :: else
    fi;
    arm(0, w, r, ok, a);                 /* j.w.arm() */
    w_word[0] = w;
    d_step { push_back(X, 0) };          /* TASK-J1 */
    UNLOCK(X);
#endif
    /* j.w.wait(deadline): park_until(me, word, deadline) */
    if
    :: dl -> d_step { tim_word = w; tim_in = true }     /* add_timer */
    :: else
    fi;
    park(0, why, a);
    tim_in = false;                                     /* remove_timer */
    /* not notified: unlink under the join lock (WAITER-V3) */
#ifdef BUG_UNLINK_ON_TIMEOUT_ONLY
    if
    :: why == TIMED_OUT ->
#else
    if
    :: why != NOTIFIED ->
#endif
        LOCK(X);
        d_step { remove(X, 0, k) };
        UNLOCK(X)
    :: else
    fi;
    if
    :: why == NOTIFIED -> result[0] = R_FINISHED
    :: why == TIMED_OUT -> result[0] = R_TIMEOUT
    :: why == CANCELED -> result[0] = R_CANCELED     /* throw_canceled() */
    fi;
    assert(queued_n[0] == 1 && ended_n[0] == 1);
gone:
    skip;                /* (a goto may not jump into a d_step) */
    d_step { nd_alive[0] = false; w_alive[0] = false };  /* the stable<> ends */
out:
    skip;
    d_step {
        assert(result[0] != R_FINISHED || fin[X]);
        done[0] = true;
        j1_finished = true                             /* the task goes on / ends */
    }
}

/* J2: wait_any({X, Y}) from a task (not canceled in this model) */
proctype j2()
{
    byte w, r, why, k, a, linked;
    bool ok, d, self;

    /* first_finished() */
    if
    :: fin[X] -> result[1] = X; goto out
    :: else
    fi;
    if
    :: fin[Y] -> result[1] = Y; goto out
    :: else
    fi;
    /* stable<waiter> held, vector<wait_node> ns: waiter 1, nodes 1 and 2 */
    d_step { w_alive[1] = true; nd_alive[1] = true; nd_alive[2] = true; nd_w[1] = 1; nd_w[2] = 1 };
    arm(1, w, r, ok, a);                 /* w.arm(): before the first link (TASK-J3) */
    w_word[1] = w;
    /* link on every task until one is found finished */
    d = false;
    LOCK(X);
    if
    :: fin[X] -> d = true
    :: else -> d_step { push_back(X, 1); linked = 1 }
    fi;
    UNLOCK(X);
    if
    :: !d ->
        LOCK(Y);
        if
        :: fin[Y] -> d = true
        :: else -> d_step { push_back(Y, 2); linked = 2 }
        fi;
        UNLOCK(Y)
    :: else
    fi;
    /* done && w.claim_self() ? notified : w.wait() */
    self = false;
    if
    :: d -> try_end(1, w, NOTIFIED, self)
    :: else
    fi;
    if
    :: self -> why = NOTIFIED
    :: else -> park(1, why, a)
    fi;
    /* unlink every node it linked (WAITER-V3) */
    if
    :: linked >= 1 ->
        LOCK(X);
        d_step { remove(X, 1, k) };
        UNLOCK(X)
    :: else
    fi;
    if
    :: linked >= 2 ->
        LOCK(Y);
        d_step { remove(Y, 2, k) };
        UNLOCK(Y)
    :: else
    fi;
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
        assert(ended_n[1] == 1 && queued_n[1] == (self -> 0 : 1));
        nd_alive[1] = false; nd_alive[2] = false; w_alive[1] = false
    };
out:
    done[1] = true
}

/* J3: wait_finished(X, deadline) from a plain thread */
proctype j3()
{
    byte k, why;
    bool dl;

    if :: dl = true :: dl = false fi;
    if
    :: fin[X] -> result[2] = R_FINISHED; goto out
    :: else
    fi;
    /* stable<one_wait> held: waiter 2 bound to the thread, node 3 */
    d_step { nd_alive[3] = true; w_alive[2] = true; nd_w[3] = 2 };
    LOCK(X);
    if
    :: fin[X] -> UNLOCK(X); result[2] = R_FINISHED; goto gone     /* TASK-J1 */
    :: else ->
        d_step { tstate = TS_ARMED; push_back(X, 3) };            /* arm(); push_back */
        UNLOCK(X)
    fi;
    /* j.w.wait(deadline): futex_wait until woken; at the deadline (any
     * moment, if it has one) the CAS armed -> timed_out, which fails if a
     * waker claimed it meanwhile (then it waits for woken) */
    do
    :: tstate == TS_WOKEN -> why = NOTIFIED; break
    :: dl && tstate == TS_ARMED ->
        d_step {
            if
            :: tstate == TS_ARMED -> tstate = TS_TIMED; why = TIMED_OUT
            :: else -> why = 0
            fi
        };
        if :: why == TIMED_OUT -> break :: else fi
    od;
    if
    :: why != NOTIFIED ->
        LOCK(X);
        d_step { remove(X, 3, k) };   /* WAITER-V3 */
        UNLOCK(X);
        result[2] = R_TIMEOUT
    :: else -> result[2] = R_FINISHED
    fi;
gone:
    skip;                /* (a goto may not jump into a d_step) */
    d_step { nd_alive[3] = false; w_alive[2] = false };
out:
    skip;
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
    w = ww[0];                          /* TASK-C1 */
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
