// pan: -DSAFETY
// run: -m100000
// bug: BUG_TAKE_BEFORE_CLAIM recv_now() takes a waiting sender's value before claiming it (hand-over before the claim)
// bug: BUG_NO_UNLINK a timed-out sender returns without unlinking its node (WAITER-V3)
/* channel_rendezvous.pml: an unbuffered channel<T> (capacity 0) between
 * threads: send / recv with timeouts, close(), and a select over two
 * channels that claims exactly one case. The waiter's protocol WAITER-V1 - WAITER-V3 and
 * the channel's CHAN-K1 - CHAN-K5.
 *
 * Code (weft): include/weft/waiter.hpp (WAITER-V1 - WAITER-V3, wait_queue::push_back,
 * remove, pop_claimed), src/task/waiter.cpp (the thread waiter's state_:
 * arm, claim, wake, wait with a deadline), include/weft/sync/channel.hpp
 * (CHAN-K1 - CHAN-K4; channel::send_now, recv_now, send_wait, recv_wait, hand_to,
 * take_from, close), include/weft/sync/select.hpp (CHAN-K5; recv_case::poll /
 * link / unlink), src/sync/select.cpp (select_engine, lock_set).
 *
 * Parties (every one a plain thread; a task's claim is its wait word's
 * try_end and its wake the second arrival, task_wait.pml):
 *   sendA    send_until(A, 1): waiter 0, node 0
 *   sendB    send_until(B, 2): waiter 1, node 1
 *   sel      select(on_recv(A), on_recv(B), on_timeout(..)): waiter 2,
 *            node 2 (case 0, A) and node 3 (case 1, B)
 *   recvA    recv_until(A): waiter 3, node 4
 *   closer   B.close()
 * Every wait has a deadline, which may pass at any moment (or never: a run
 * in which it does not pass before the wait is ended is the run of a wait
 * without one). A wait that nobody ends therefore always ends by timing
 * out, so in a state where nothing can move every party has returned,
 * except one that is claimed and never woken (the monitor's first check).
 *
 * Abstractions: a channel's spin_lock is a flag taken by an atomic test;
 * what the lock guards (the queues, `closed`, a node's links) changes in
 * the same step as the claim CAS that goes with it; the waiter's state_ is
 * the only thing touched without a lock. futex_wait / futex_wake are the
 * blocking of `wait` until its state is woken (or its own deadline CAS).
 *
 * Properties:
 *   - exactly once: a value is received at most once; when every party is
 *     done or blocked, a send that returned ok was received exactly once,
 *     and a send that returned timeout / closed (or still waits) was not
 *     received and still holds its value (CHAN-K3);
 *   - a receive that returned timeout / closed has nothing in its slot;
 *   - select: the one case it reports is the one that completed; the other
 *     case's slot is empty;
 *   - WAITER-V1: a waiter is claimed at most once; no waiter is left claimed and
 *     never woken;
 *   - WAITER-V3: no waker touches a node whose waiter has returned (the node is
 *     on the returned frame);
 *   - CHAN-K2: whenever a channel's lock is released, no armed sender and armed
 *     receiver are both linked in it.
 */

#define A 0
#define B 1
#define NONE 255

/* the thread waiter's state_ (waiter.cpp) */
#define ARMED   0
#define CLAIMED 1
#define WOKEN   2
#define TIMED   3

/* results */
#define R_NONE    0
#define R_OK      1
#define R_CLOSED  2
#define R_TIMEOUT 3

/* hand-over codes (detail::code_ok / code_closed) */
#define CODE_OK     0
#define CODE_CLOSED 1

#define QN 3
typedef queue { byte e[QN]; byte cnt };

/* CHAN-K1: guarded by the channel's lock */
bool mu[2];
bool closed[2];
queue rq[2];                 /* receivers_ */
queue sq[2];                 /* senders_ */

/* waiters (on their owners' stacks) */
byte ws[4];                  /* waiter::state_ */
byte fired[4];               /* waiter::fired */
byte code[4];                /* waiter::code */
bool alive[4];               /* the waiter's frame exists */
byte claims[4];              /* ghost: successful claims of the current wait */

/* nodes: owner, case index, channel and direction are fixed */
byte node_w[5];
byte node_idx[5];
bool node_linked[5];
byte rslot[5];               /* a receiver node's slot (optional<T>; 0: empty) */

byte sval[2];                /* the senders' values (0: moved from) */
byte sres[2];                /* the senders' results */
byte rres[4];                /* the receivers' results (waiters 2, 3) */
byte rgot[4];                /* what they received */
byte delivered[3];           /* ghost: receipts per value */
byte sel_case = NONE;        /* what select returned: 0, 1, or NONE (timeout) */

/* CHAN-K2 over channel c: an armed sender and an armed receiver both waiting */
#define armed_in(q, k) (q.cnt > k && ws[node_w[q.e[k]]] == ARMED)
#define K2_broken(c) ((armed_in(sq[c], 0) || armed_in(sq[c], 1) || armed_in(sq[c], 2)) && \
                      (armed_in(rq[c], 0) || armed_in(rq[c], 1) || armed_in(rq[c], 2)))

#define LOCK(c)   atomic { !mu[c] -> mu[c] = true }
#define UNLOCK(c) d_step { assert(!K2_broken(c)); mu[c] = false }

/* wait_queue::push_back */
inline push_back(q, nd)
{
    assert(!node_linked[nd]);
    q.e[q.cnt] = nd; q.cnt++;
    node_linked[nd] = true
}

/* wait_queue::remove: a no-op for a node not linked (WAITER-V3) */
inline remove(q, nd, k)
{
    if
    :: node_linked[nd] ->
        k = 0;
        do
        :: q.e[k] != nd -> k++
        :: else -> break
        od;
        do
        :: k + 1 < q.cnt -> q.e[k] = q.e[k + 1]; k++
        :: else -> break
        od;
        q.cnt--; q.e[q.cnt] = 0;
        node_linked[nd] = false;
        k = 0
    :: else
    fi
}

/* waiter::claim(): CAS armed -> claimed (WAITER-V1) */
inline claim(w, ok)
{
    assert(alive[w]);                     /* WAITER-V3: the node's frame still exists */
    if
    :: ws[w] == ARMED -> ws[w] = CLAIMED; claims[w]++; assert(claims[w] == 1); ok = true
    :: else -> ok = false
    fi
}

/* wait_queue::pop_claimed(): take nodes off the front until one whose
 * waiter it can claim; nodes of waiters claimed elsewhere are dropped. One
 * step per node (the lock is held; the claim is the one access to
 * something outside it). n = NONE: none. */
inline pop_claimed(q, n, t, k, ok)
{
    n = NONE;
    do
    :: d_step {
           if
           :: q.cnt == 0 -> ok = true
           :: else ->
               t = q.e[0];
               remove(q, t, k);
               claim(node_w[t], ok);
               if :: ok -> n = t :: else fi;
               t = 0
           fi
       };
       if :: ok -> ok = false; break :: else fi
    od
}

/* waiter::arm() (under the lock) */
inline arm(w)
{
    ws[w] = ARMED; fired[w] = NONE; code[w] = CODE_OK; claims[w] = 0
}

/* waiter::wake(): store(woken, release), then futex_wake (harmless after) */
inline wake(w)
{
    assert(alive[w] && ws[w] == CLAIMED);
    ws[w] = WOKEN
}

/* waiter::wait(deadline) of a thread: returns when woken; with a deadline
 * that has passed, CAS armed -> timed_out (fails if a waker claimed it:
 * then wait for woken). o: 1 notified, 0 timed out. Callers label it
 * end_wait: a wait nobody ends may block for ever (the monitor checks that
 * nothing was lost). */
inline wait(w, dl, o)
{
    do
    :: ws[w] == WOKEN -> o = 1; break
    :: dl && ws[w] == ARMED ->            /* the deadline passed */
        d_step {
            if
            :: ws[w] == ARMED -> ws[w] = TIMED; o = 0
            :: else -> o = 2
            fi
        };
        if :: o == 0 -> break :: else fi
    od
}

/* channel::hand_to(n, v) by sender s: into the receiver's slot, fired, code */
inline hand_to(nd, s)
{
    d_step {
        assert(alive[node_w[nd]] && ws[node_w[nd]] == CLAIMED);   /* WAITER-V2: after the claim */
        rslot[nd] = sval[s]; sval[s] = 0;
        fired[node_w[nd]] = node_idx[nd]; code[node_w[nd]] = CODE_OK
    }
}

/* recv_now(out) on channel c, lock held, capacity 0: take from the first
 * sender it can claim (take_from: fired, code, move the value), else
 * closed, else empty. res: R_OK, R_CLOSED or R_NONE (empty). wk: the
 * sender to wake after unlocking. */
inline recv_now(c, out, res, wk, n, t, k, ok)
{
#ifdef BUG_TAKE_BEFORE_CLAIM
    /* the seeded bug: the value leaves the front sender, then the claim */
    n = NONE;
    do
    :: d_step {
           if
           :: sq[c].cnt == 0 -> ok = true
           :: else ->
               t = sq[c].e[0];
               remove(sq[c], t, k);
               out = sval[node_w[t]]; sval[node_w[t]] = 0;    /* take_from() first */
               ok = false
           fi
       };
       if
       :: ok -> ok = false; break
       :: else
       fi;
       d_step {
           claim(node_w[t], ok);
           if
           :: ok -> n = t; fired[node_w[t]] = node_idx[t]; code[node_w[t]] = CODE_OK
           :: else -> out = 0                                  /* dropped */
           fi;
           t = 0
       };
       if :: ok -> ok = false; break :: else fi
    od;
#else
    pop_claimed(sq[c], n, t, k, ok);
    if
    :: n != NONE ->
        d_step {                          /* take_from(n): after the claim (CHAN-K3) */
            assert(ws[node_w[n]] == CLAIMED);
            fired[node_w[n]] = node_idx[n]; code[node_w[n]] = CODE_OK;
            out = sval[node_w[n]]; sval[node_w[n]] = 0
        }
    :: else
    fi;
#endif
    if
    :: n != NONE -> res = R_OK; wk = node_w[n]; n = NONE
    :: else ->
        if
        :: closed[c] -> res = R_CLOSED
        :: else -> res = R_NONE
        fi
    fi
}

/* channel::send_wait(v, deadline) of waiter s (node s) on channel c. */
proctype sender(byte s; byte c; byte v)
{
    byte n, t, k, o, res;
    bool ok, dl;

    dl = true;                /* a deadline (see the header) */
    d_step { sval[s] = v; alive[s] = true };
    LOCK(c);
    /* send_now() */
    if
    :: closed[c] -> res = R_CLOSED; UNLOCK(c)
    :: else ->
        pop_claimed(rq[c], n, t, k, ok);  /* CHAN-K2: a waiting receiver */
        if
        :: n != NONE ->
            hand_to(n, s);
            res = R_OK;
            t = node_w[n];
            UNLOCK(c);
            wake(t);
            t = 0
        :: else ->
            /* capacity 0: empty, so wait: arm, link, unlock, wait */
            d_step { arm(s); push_back(sq[c], s) };
            UNLOCK(c);
end_wait:
            wait(s, dl, o);
            if
            :: o == 1 ->
                if
                :: code[s] == CODE_OK -> res = R_OK
                :: else -> res = R_CLOSED
                fi
            :: else ->
#ifndef BUG_NO_UNLINK
                LOCK(c);
                d_step { remove(sq[c], s, k) };   /* WAITER-V3; v was not taken (CHAN-K3) */
                UNLOCK(c);
#endif
                res = R_TIMEOUT
            fi
        fi
    fi;
    d_step {
        sres[s] = res;
        alive[s] = false;                 /* the frame (waiter, node) ends */
        /* CHAN-K3: the value left only if it was delivered */
        assert(res == R_OK && sval[s] == 0 || res != R_OK && sval[s] == v)
    }
}

/* channel::recv_wait(deadline) of waiter 3 (node 4) on A */
proctype receiver(byte w; byte nd; byte c)
{
    byte n, t, k, o, res, wk, out;
    bool ok, dl;

    dl = true;                /* a deadline (see the header) */
    alive[w] = true;
    LOCK(c);
    recv_now(c, out, res, wk, n, t, k, ok);
    if
    :: res != R_NONE ->
        UNLOCK(c);
        if :: res == R_OK -> wake(wk) :: else fi
    :: else ->
        d_step { arm(w); push_back(rq[c], nd) };
        UNLOCK(c);
end_wait:
        wait(w, dl, o);
        if
        :: o == 1 ->
            if
            :: code[w] == CODE_OK -> res = R_OK; d_step { out = rslot[nd]; rslot[nd] = 0 }
            :: else -> res = R_CLOSED
            fi
        :: else ->
            LOCK(c);
            d_step { remove(rq[c], nd, k) };
            UNLOCK(c);
            res = R_TIMEOUT
        fi
    fi;
    d_step {
        assert(rslot[nd] == 0);                       /* nothing left behind */
        assert(res == R_OK && out != 0 || res != R_OK && out == 0);
        if :: out != 0 -> delivered[out]++; assert(delivered[out] == 1) :: else fi;
        rres[w] = res; rgot[w] = out;
        alive[w] = false
    }
}

/* select(on_recv(A), on_recv(B) [, on_timeout]): select_engine() with
 * waiter 2; case 0 is node 2 on A, case 1 node 3 on B. */
proctype sel()
{
    byte n, t, k, o, res, wk, out0, out1, first, i, r;
    bool ok, dl;

    dl = true;                              /* with a timeout case */
    if :: first = 0 :: first = 1 fi;        /* the random poll order */
    alive[2] = true;
    /* lock_set: A's lock, then B's (address order, CHAN-K5) */
    LOCK(A);
    LOCK(B);
    r = NONE;
    i = first;
    do
    :: r == NONE ->
        if
        :: i == 0 -> recv_now(A, out0, res, wk, n, t, k, ok)
        :: else -> recv_now(B, out1, res, wk, n, t, k, ok)
        fi;
        if
        :: res != R_NONE -> r = i
        :: else ->
            i = 1 - i;
            if :: i == first -> break :: else fi
        fi
    :: else -> break
    od;
    if
    :: r != NONE ->
        /* a case completed during the poll */
        UNLOCK(B);
        UNLOCK(A);
        if :: res == R_OK -> wake(wk) :: else fi
    :: else ->
        /* nothing ready: arm, link every case (poll order), unlock, wait */
        d_step {
            arm(2);
            if
            :: first == 0 -> push_back(rq[A], 2); push_back(rq[B], 3)
            :: else -> push_back(rq[B], 3); push_back(rq[A], 2)
            fi
        };
        UNLOCK(B);
        UNLOCK(A);
end_wait:
        wait(2, dl, o);
        /* WAITER-V3: take out every node still linked */
        LOCK(A);
        LOCK(B);
        d_step { remove(rq[A], 2, k); remove(rq[B], 3, k) };
        UNLOCK(B);
        UNLOCK(A);
        if
        :: o == 1 ->
            r = fired[2];
            if :: code[2] == CODE_OK -> res = R_OK :: else -> res = R_CLOSED fi;
            d_step { out0 = rslot[2]; rslot[2] = 0; out1 = rslot[3]; rslot[3] = 0 }
        :: else -> r = NONE; res = R_TIMEOUT
        fi
    fi;
    d_step {
        /* exactly one case: the reported case holds the value (if any), the
         * other case's slot is empty */
        if
        :: r == 0 -> assert(out1 == 0); assert(res == R_OK && out0 == 1 || res == R_CLOSED && out0 == 0)
        :: r == 1 -> assert(out0 == 0); assert(res == R_OK && out1 == 2 || res == R_CLOSED && out1 == 0)
        :: r == NONE -> assert(out0 == 0 && out1 == 0)
        fi;
        if :: out0 != 0 -> delivered[out0]++; assert(delivered[out0] == 1) :: else fi;
        if :: out1 != 0 -> delivered[out1]++; assert(delivered[out1] == 1) :: else fi;
        sel_case = r; rres[2] = res; rgot[2] = out0 + out1;
        alive[2] = false
    }
}

/* channel::close() of B: claim every waiter (receivers: closed; senders:
 * closed, they keep their values), chain them, wake after unlocking. */
proctype closer()
{
    byte n, t, k, list[4], nl, i;
    bool ok;

    LOCK(B);
    if
    :: closed[B] -> UNLOCK(B)
    :: else ->
        closed[B] = true;
        do
        :: pop_claimed(rq[B], n, t, k, ok);
           if
           :: n == NONE -> break
           :: else -> d_step { fired[node_w[n]] = node_idx[n]; code[node_w[n]] = CODE_CLOSED; list[nl] = node_w[n]; nl++ }; n = NONE
           fi
        od;
        do
        :: pop_claimed(sq[B], n, t, k, ok);
           if
           :: n == NONE -> break
           :: else -> d_step { fired[node_w[n]] = node_idx[n]; code[node_w[n]] = CODE_CLOSED; list[nl] = node_w[n]; nl++ }; n = NONE
           fi
        od;
        skip;                /* (a break may not jump into a d_step) */
        UNLOCK(B);
        i = 0;
        do
        :: i < nl -> wake(list[i]); i++
        :: else -> break
        od
    fi
}

init {
    d_step {
        node_w[0] = 0; node_idx[0] = 0;
        node_w[1] = 1; node_idx[1] = 0;
        node_w[2] = 2; node_idx[2] = 0;
        node_w[3] = 2; node_idx[3] = 1;
        node_w[4] = 3; node_idx[4] = 0
    };
    atomic {
        run sel();
        run closer();
        run sender(0, A, 1);
        run sender(1, B, 2);
        run receiver(3, 4, A)
    }
}

/* When nothing can move: nothing lost, nothing duplicated, nobody left
 * claimed and never woken. */
active proctype monitor()
{
    timeout ->
    d_step {
        assert(ws[0] != CLAIMED && ws[1] != CLAIMED && ws[2] != CLAIMED && ws[3] != CLAIMED);
        /* sendA's value 1: received once iff its send returned ok */
        assert(sres[0] == R_OK && delivered[1] == 1 || sres[0] != R_OK && delivered[1] == 0 && sval[0] == 1);
        assert(sres[1] == R_OK && delivered[2] == 1 || sres[1] != R_OK && delivered[2] == 0 && sval[1] == 2)
    }
}
