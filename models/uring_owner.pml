// pan: -DSAFETY -O0
// run: -m100000
// config: -DPART_O4
// config: -DPART_R7
// config: -DPART_R7 -DADDR_REUSE
// config: -DPART_O7
// config: -DPART_O7 -DON_OWNER
// bug: BUG_CHECK_BEFORE_WAITING the owner exchanges kicked_ (and loads mbox_full_) before it stores waiting_ (the store-buffering reorder; URING-O4)
// bug: BUG_NO_REARM the owner does not queue the eventfd's read again after its completion (URING-O4)
// bug: BUG_INTERRUPT_BEFORE_PUSH submit() interrupts the owner before it pushes its request into the mailbox (URING-O2)
// bug: BUG_CLEAR_FLAG_UNLOCKED drain_mailbox() clears mbox_full_ after releasing mbox_mu_ (URING-O2)
// bug: BUG_LINK_AFTER_UNLOCK run_op() checks closed under r->mu, then submits and links the op in a later hold (check-then-act; REACTOR-R7)
// bug: BUG_NO_CLOSED_CHECK run_op() submits and links the op without looking at closed (REACTOR-R5, REACTOR-R7)
// bug: BUG_NO_DRAIN_BEFORE_PUT submit() on the owner puts its SQE without draining the mailbox first: a stale cancel handed over by another thread's close reaches the SQ after the task's next op at the same address and cancels it (URING-O2)
// bug: BUG_CANCEL_JUMPS_QUEUE retire()'s ASYNC_CANCEL reaches the kernel at once, ahead of the RECV still queued in the SQ (URING-O2, REACTOR-R7)
// bug: BUG_PUBLISH_AT_DRAIN drain_mailbox() says the removes it took settled at once, before the enter that submits their cancels and runs the poll's end (URING-O7)
// bug: BUG_OWNER_NO_SETTLE remove() on the owner puts the cancel and returns without settle(): close(2) runs while the poll still holds the file (URING-O7)
// bug: BUG_TICKET_OUTSIDE_LOCK remove() on another thread takes its ticket in one hold of mbox_mu_ and pushes its cancel in another: a drain between them settles the ticket without the cancel (URING-O7)
// bug: BUG_GIVE_BACK_NOTIFIED_ONLY ring_io() copies out and gives back the provided buffer only of a receive whose wait ended notified: one that completed with data after its deadline keeps its buffer (URING-P1)
/* uring_owner.pml: the io_uring owner ring's wait protocols (src/io/
 * uring.cpp, class owner_backend, URING-O1 - URING-O4, URING-O7), in three
 * parts, each with its configurations (the `config:` lines):
 *
 *   PART_O4  no lost interrupt (URING-O4) and the mailbox (URING-O2): the
 *            owner thread's poll (drain the mailbox, waiting_ / kicked_,
 *            block in the ring until a CQE) against an interrupt() from
 *            another thread and two submit()s from two more threads;
 *   PART_R7  close cancels an in-flight receive (REACTOR-R7, IO-R2): a
 *            task's ring_io() -> run_op() against handle::close() ->
 *            reactor::retire() from a task on the owner thread or from
 *            another thread, with the SQ in order, the FIFO mailbox and the
 *            kernel's RECV / ASYNC_CANCEL; the RECV takes a provided buffer
 *            of the ring's for its data, which the reader gives back
 *            (URING-P1);
 *   PART_O7  close closes the file at once (URING-O7): remove() of the fd's
 *            multishot poll, from another thread (the mailbox, a ticket,
 *            the owner's settle() and its futex wake) or (-DON_OWNER) from
 *            a task on the owner thread (put, then settle() at once),
 *            against the owner's polls; see its own header below.
 *
 * Code (weft): src/io/uring.cpp owner_backend::wait, interrupt, submit,
 * drain_mailbox, put, queue_read_wake, translate, start_op, cancel_op;
 * src/io/reactor.cpp run_op, reactor::retire; src/io/reactor.hpp
 * op_state::complete, REACTOR-R5 - REACTOR-R7; src/io/handle.cpp
 * handle::ring_io (IO-R2); the waiter (include/weft/waiter.hpp): arm,
 * claim, wake, wait.
 *
 * The searches are small (about 10^4 states), so pan.c is compiled with
 * -O0 (the `pan:` line; gcc takes the last -O): compiling it at -O2 takes
 * longer than all the searches together.
 *
 * How steps are cut (models/README.md, "How they model C++"): a critical
 * section under mbox_mu_, r->mu or op.mu is one step; every seq_cst access
 * that another party makes without a lock (waiting_, kicked_, mbox_full_)
 * is a step of its own; a syscall (the eventfd's write, the ring's wait)
 * is a step of its own. The owner's SQ is touched only by the owner thread
 * and then read by the kernel in order, so a put() is a send on an ordered
 * channel.
 *
 * ---- PART_O4 --------------------------------------------------------------
 *
 * Parties:
 *   Owner      the owner thread's poller::poll() -> owner_backend::wait(),
 *              for ever: drain_mailbox(); then, for a wait without limit
 *              with no CQE ready, waiting_ = true, kicked_.exchange(false)
 *              || mbox_full_, and if neither, io_uring_submit_and_wait_
 *              timeout(): the SQ is submitted (the eventfd's read, when
 *              queued) and the owner sleeps until a CQE is there;
 *              waiting_ = false. A poll with a zero timeout (poll_now) or
 *              with a CQE ready does not block: io_uring_submit_and_get_
 *              events(). Then it reaps: the read's CQE queues the read
 *              again (translate() -> queue_read_wake()), sent by the next
 *              poll's submit;
 *   Kernel     the eventfd read in the ring completes when the eventfd's
 *              counter is not zero, and zeroes it;
 *   Kicker     interrupt() from another thread (runtime_core::kick of the
 *              polling worker, for a task woken from outside);
 *   Submitter  x2, each on a thread of its own: submit(): under mbox_mu_
 *              push_back and mbox_full_ = true, then interrupt().
 * interrupt(): kicked_ = true, then if waiting_ is seen, write(efd_, 1).
 *
 * Abstractions: the eventfd is a flag (its counter is zero or not: the
 * ring's read takes it all); the ring's read is RD_QUEUED (its SQE in the
 * SQ), RD_PENDING (in the kernel) or RD_DONE (its CQE in the CQ); no other
 * CQE ends the owner's wait, and the wait has no time limit (a timeout
 * would hide a lost wake-up). The swap of the mailbox is one step with the
 * owner's puts of its entries: the SQ is the owner's alone until it
 * submits. The first wait's queue_read_wake() is the initial RD_QUEUED.
 *
 * Properties:
 *   - no lost interrupt (URING-O4): in a state where nothing can move, the
 *     owner is asleep in the ring (its one place to stop), no kick is
 *     pending (kicked_ false), the mailbox is empty and the ring has the
 *     eventfd's read pending;
 *   - every mailbox entry reaches the SQ, in the order of the pushes
 *     (URING-O2; asserted at each put).
 *
 * ---- PART_R7 --------------------------------------------------------------
 *
 * Parties:
 *   Reader  a task on the owner thread: handle::ring_io() -> run_op(b,
 *           op, deadline, r, seq): under r->mu, closed -> -ECANCELED with
 *           nothing submitted; else start_op() (submit() on the owner:
 *           put() of the RECV into the SQ) and the link into r->ops. Then,
 *           under op.mu, done already, or arm w1 as op.w; w1.wait(deadline)
 *           (a deadline or none, chosen at its start): notified, or timed
 *           out, then op.w = null, and if the op is not done: cancel_op()
 *           (the owner's put() of an ASYNC_CANCEL) and w2, which only the
 *           completion ends. Last, unlink() under r->mu;
 *   Closer  handle::close() -> retire(r) under r->mu: closed = true and a
 *           cancel_op() for each linked op: from a task on the owner thread
 *           a put() into the SQ, from another thread a push into the
 *           mailbox (submit(); its interrupt() is PART_O4's matter);
 *   Owner   the start of each poll: drain_mailbox() moves the mailbox to
 *           the SQ in order;
 *   Kernel  consumes the SQ in order: a RECV completes at once with the
 *           socket's data, if any, else is pending; an ASYNC_CANCEL
 *           completes the pending RECV with -ECANCELED, or finds nothing
 *           (-ENOENT: the RECV has completed, or is not consumed yet). A
 *           RECV that takes data takes a buffer from the buffer ring (one
 *           buffer here: the reader has one receive out at a time) and its
 *           completion owns it; with the ring empty it ends with -ENOBUFS
 *           and takes nothing (URING-P1);
 *   Data    data comes to the socket once, or never; it completes a
 *           pending RECV.
 * Abstractions: the kernel may take the SQ's head at any moment, not only
 * in the owner's io_uring_enter() (more runs than the code has, none with
 * another order); the reader and the owner's poll run as two processes
 * although they share the owner thread (again more runs, not fewer). A
 * RECV's completion is one step with the owner's reaping of its CQE and
 * op_state::complete() (res, done, the claim of op.w, under op.mu) and the
 * waiter's wake() after it: only the reader looks at these, and it looks
 * after its wake. Left out: the sequence number (retire() sets closed
 * before it bumps it), EINTR / EAGAIN / ENOTSOCK, the task's cancellation
 * (its wait ends like a deadline's), remove() of the poll (a RECV arms
 * none, URING-O5).
 *
 * Properties:
 *   - the reader always returns: with the data that never comes, the close
 *     must end its receive (a state where nothing can move with the reader
 *     waiting is an invalid end state);
 *   - it returns operation_canceled (-ECANCELED) only if the handle was
 *     closed; it returns the data if its RECV took the data (no byte
 *     lost, also after a deadline);
 *   - when it returns, its op is unlinked and the kernel has no RECV of it
 *     pending (IO-F1: nothing writes the buffer after run_op());
 *   - when it returns, the provided buffer its RECV took, if any, is back
 *     in the buffer ring (URING-P1: ring_io() copies the bytes out and
 *     gives it back whatever ended run_op()'s wait), so the next receive
 *     (ADDR_REUSE) finds one.
 *
 * -DADDR_REUSE (a configuration of its own): after its first receive the
 * reader makes a second one on another handle that is never closed; that
 * op_state has the same address as the first (ring_io()'s stable<ring_op>
 * in the task's wait arena, or on its stack, at the same depth), so the
 * same user_data. Property: the second receive never ends with
 * -ECANCELED. This found a real bug, fixed since: another thread's
 * retire() pushes the ASYNC_CANCEL for the first op into the mailbox while
 * the op, already completed with data, is still linked; the reader
 * unlinks it, returns, and put() its second RECV straight into the SQ,
 * ahead of the cancel still in the mailbox; the owner's next poll drained
 * the cancel after it, and the kernel canceled the second RECV. submit()
 * on the owner now drains the mailbox before its own put(), which is what
 * URING-O2's "a request made after another, on whatever thread, reaches
 * the SQ after it" needs; -DBUG_NO_DRAIN_BEFORE_PUT is the old code.
 */

/* ======================================================================== */
#ifdef PART_O4

#define NSUB 2
#define RD_NONE    0
#define RD_QUEUED  1
#define RD_PENDING 2
#define RD_DONE    3

bool waiting = false;            /* owner_backend::waiting_ */
bool kicked = false;             /* owner_backend::kicked_ */
bool mbox_full = false;          /* owner_backend::mbox_full_ */
chan mbox = [NSUB] of { byte };  /* owner_backend::mbox_ (mbox_mu_): entries by push order */
byte pushed = 0;                 /* entries pushed (mbox_mu_) */
byte moved = 0;                  /* entries put into the SQ by the owner */
bool efd = false;                /* the eventfd's counter is not zero */
byte rd = RD_QUEUED;             /* the ring's read of the eventfd (ud_read_wake) */
bool blocked = false;            /* the owner sleeps in io_uring_enter() */

/* drain_mailbox(): mbox_full_.load(seq_cst) (a step); if set, under
 * mbox_mu_ the swap and mbox_full_ = false; then put() of each entry, in
 * order (the owner's SQ: one step with the swap, see the header). */
inline drain_mailbox(e)
{
    if
    :: mbox_full ->
#ifdef BUG_CLEAR_FLAG_UNLOCKED
        atomic {
            do
            :: mbox?e -> assert(e == moved); moved++
            :: empty(mbox) -> break
            od
        };
        mbox_full = false;       /* after the lock: may clear a later push's flag */
#else
        atomic {
            do
            :: mbox?e -> assert(e == moved); moved++   /* URING-O2: FIFO */
            :: empty(mbox) -> break
            od;
            mbox_full = false
        }
#endif
    :: else
    fi;
    e = 0
}

/* interrupt() from a thread that is not the owner: kicked_.store(true,
 * seq_cst), then waiting_.load(seq_cst) and, if it is set, write(efd_, 1):
 * three steps (the guard below is the load, the assignment the write). */
inline interrupt()
{
    kicked = true;
    if
    :: waiting -> efd = true
    :: else
    fi
}

/* The owner thread: owner_backend::wait(), over and over. */
proctype Owner()
{
    bool block = false, k = false;
    byte e = 0;
end_loop:
    do
    :: drain_mailbox(e);
        /* block = timeout_ns != 0 && io_uring_cq_ready() == 0 */
        if
        :: rd != RD_DONE -> block = true    /* poll(-1): the worker has nothing to run */
        :: true -> block = false            /* poll(0) (poll_now), or a CQE is ready */
        fi;
        if
        :: block ->
#ifdef BUG_CHECK_BEFORE_WAITING
            atomic { k = kicked; kicked = false };
            if
            :: !k -> k = mbox_full
            :: else
            fi;
            waiting = true;
#else
            waiting = true;                        /* waiting_.store(true, seq_cst) */
            atomic { k = kicked; kicked = false }; /* kicked_.exchange(false, seq_cst) */
            if
            :: !k -> k = mbox_full                 /* || mbox_full_.load(seq_cst) */
            :: else
            fi;
#endif
            if
            :: k -> block = false;
                waiting = false;                  /* waiting_.store(false, relaxed) */
                drain_mailbox(e)
            :: else
            fi;
            k = false
        :: else
        fi;
        if
        :: block ->
            /* io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, no limit):
             * the SQ goes to the kernel (the read, if queued), then the
             * owner sleeps until a CQE is there. */
            atomic {
                if
                :: rd == RD_QUEUED -> rd = RD_PENDING
                :: else
                fi;
                blocked = true
            };
end_block:
            atomic { rd == RD_DONE -> blocked = false };
            waiting = false                       /* waiting_.store(false, relaxed) */
        :: else ->
            /* io_uring_submit_and_get_events() (URING-O3: an SQE is queued) */
            if
            :: rd == RD_QUEUED -> rd = RD_PENDING
            :: else
            fi
        fi;
        /* the CQEs: translate() of the read's CQE -> queue_read_wake() */
        if
        :: rd == RD_DONE ->
#ifdef BUG_NO_REARM
            rd = RD_NONE
#else
            rd = RD_QUEUED
#endif
        :: else
        fi
    od
}

/* The kernel: the ring's read of the eventfd completes once the counter is
 * not zero (it reads and zeroes it). */
proctype Kernel()
{
end_k:
    do
    :: atomic { rd == RD_PENDING && efd -> efd = false; rd = RD_DONE }
    od
}

/* Another thread's interrupt() (runtime_core::kick of the polling worker). */
proctype Kicker()
{
    interrupt()
}

/* Another thread's submit(c) (arm(), remove(), cancel_op(), start_op()). */
proctype Submitter()
{
#ifdef BUG_INTERRUPT_BEFORE_PUSH
    interrupt();
    atomic { mbox!pushed; pushed++; mbox_full = true };
#else
    atomic { mbox!pushed; pushed++; mbox_full = true };  /* under mbox_mu_ */
    interrupt()
#endif
}

/* In a state where nothing can move: no lost interrupt, the mailbox moved. */
proctype Quiet()
{
    timeout ->
    assert(blocked);                 /* the owner's only place to stop */
    assert(!kicked);                 /* a kick it slept through */
    assert(len(mbox) == 0 && moved == NSUB);  /* a request left in the mailbox */
    assert(rd == RD_PENDING && !efd) /* the ring has the eventfd's read pending */
}

init {
    atomic {
        run Owner();
        run Kernel();
        run Kicker();
        run Submitter();
        run Submitter();
        run Quiet()
    }
}

#endif /* PART_O4 */

/* ======================================================================== */
#ifdef PART_R7

#define NONE      0
#define DATA      1     /* a count > 0 */
#define ECANCELED 2     /* -ECANCELED: operation_canceled for ring_io() */
#define TIMEDOUT  3     /* -ETIMEDOUT */
#define NOBUFS    4     /* -ENOBUFS: the buffer ring was empty (URING-P1) */

#define RECV   1
#define CANCEL 2

/* SQEs: (kind, the handle of a RECV). All the ops here are at one address
 * (the reader's ring_op), so a cancel names no handle: it targets that
 * user_data. */
chan sq = [5] of { byte, byte };     /* the SQ: the owner's put()s, in order */
chan mbox = [2] of { byte, byte };   /* owner_backend::mbox_ (URING-O2) */

bool r_closed = false;   /* registration::closed (r->mu) */
bool linked = false;     /* the op is in r->ops (r->mu) */

/* The op_state at the ring_op's address (op.mu). */
bool op_done = false;
byte op_res = NONE;
byte op_w = 0;           /* op.w: 0 null, 1 w1, 2 w2 */
bool w_claimed = false;  /* the armed waiter's claim (w1, then w2) */
bool w_woken = false;    /* its wake() */

/* The kernel. */
byte pend = 0;           /* the handle whose RECV (at the op's address) is pending; 0 none */
bool arrived[3];         /* data came to handle h's socket (h = 1, 2) */
bool taken[3];           /* a RECV of handle h took that data */
byte bufs = 1;           /* provided buffers in the buffer ring (URING-P1) */

/* The RECV's CQE, reaped by the owner's wait(): op_state::complete(res):
 * under op.mu res, done, the claim of op.w (WAITER-V1) and op.w = null;
 * wake() after the lock (same step: only the reader reads w_woken). */
inline complete(r)
{
    op_res = r;
    op_done = true;
    if
    :: op_w != 0 && !w_claimed -> w_claimed = true; w_woken = true
    :: else
    fi;
    op_w = 0
}

/* The kernel consumes the SQ in order (io_uring_enter's submission). */
proctype Kernel()
{
    byte k = 0, h = 0;
end_k:
    do
    :: atomic {
        sq?k, h ->
        if
        :: k == RECV ->
            assert(pend == 0);
            if
            :: arrived[h] && !taken[h] && bufs > 0 -> bufs--; taken[h] = true; complete(DATA)
            :: arrived[h] && !taken[h] && bufs == 0 -> complete(NOBUFS)
            :: else -> pend = h     /* waits for data (an internal poll) */
            fi
        :: k == CANCEL ->
            if
            :: pend != 0 -> pend = 0; complete(ECANCELED)
            :: else                 /* -ENOENT: nothing (left) to cancel */
            fi
        fi;
        k = 0;
        h = 0
       }
    od
}

/* Data for handle h: once, or never. */
proctype Data(byte h)
{
    if
    :: atomic {
        arrived[h] = true;
        if
        :: pend == h && bufs > 0 -> pend = 0; bufs--; taken[h] = true; complete(DATA)
        :: pend == h && bufs == 0 -> pend = 0; complete(NOBUFS)
        :: else
        fi
       }
    :: true
    fi
}

/* The owner's poll: drain_mailbox() at its start (the interrupt that
 * brings it is PART_O4's). */
proctype Owner()
{
    byte k = 0, h = 0;
end_o:
    do
    :: atomic {
        nempty(mbox) ->
        do
        :: mbox?k, h -> sq!k, h
        :: empty(mbox) -> break
        od;
        k = 0;
        h = 0
       }
    od
}

/* handle::close() -> begin_close() -> detach() -> reactor::retire(r). */
proctype Closer()
{
    bool on_owner = false;
    if
    :: on_owner = true       /* a task on the owner thread */
    :: on_owner = false      /* another thread */
    fi;
    atomic {
        /* under r->mu: closed, and cancel_op() of every linked op (REACTOR-R7) */
        r_closed = true;
        if
        :: linked ->
#ifdef BUG_CANCEL_JUMPS_QUEUE
            /* the ASYNC_CANCEL reaches the kernel now, whatever the SQ holds */
            if
            :: pend != 0 -> pend = 0; complete(ECANCELED)
            :: else
            fi
#else
            if
            :: on_owner -> sq!CANCEL, 0     /* submit() on the owner: put() */
            :: else -> mbox!CANCEL, 0       /* submit(): push under mbox_mu_, then interrupt() */
            fi
#endif
        :: else
        fi
    }
    /* the rest of retire() (no poll to remove(), ++seq) is left out */
}

/* A task on the owner thread: handle::ring_io() -> run_op(). */
proctype Reader()
{
    bool has_deadline = false, timed = false, pending = false, wait2 = false;
    byte res = NONE;
#ifdef ADDR_REUSE
    byte k = 0, h = 0;
#endif
    if
    :: has_deadline = true
    :: has_deadline = false
    fi;
    /* run_op(b, op, deadline, r, seq): the op is linked and submitted under
     * one hold of r->mu, unless r is closed (REACTOR-R7). */
#if defined(BUG_LINK_AFTER_UNLOCK)
    atomic {
        if
        :: r_closed -> res = ECANCELED
        :: else
        fi
    };
    if
    :: res == NONE -> atomic { sq!RECV, 1; linked = true }
    :: else
    fi;
#elif defined(BUG_NO_CLOSED_CHECK)
    atomic { sq!RECV, 1; linked = true };
#else
    atomic {
        if
        :: r_closed -> res = ECANCELED      /* nothing submitted */
        :: else ->
            sq!RECV, 1;                     /* start_op(): submit() on the owner: put() */
            linked = true                   /* op.next_op = r->ops; r->ops = &op */
        fi
    };
#endif
    if
    :: res != NONE -> goto returned
    :: else
    fi;
    /* under op.mu: done already, or w1.arm(true) and op.w = &w1 */
    atomic {
        if
        :: op_done -> res = op_res
        :: else -> op_w = 1
        fi
    };
    if
    :: res != NONE -> goto unlink
    :: else
    fi;
    /* w1.wait(deadline): the completion claims and wakes w1, or the
     * deadline claims it (the waiter's own claim) */
    if
    :: w_woken
    :: atomic { has_deadline && !w_claimed -> w_claimed = true; timed = true }
    fi;
    if
    :: timed ->
        /* under op.mu: op.w = nullptr (WAITER-V3); pending = !op.done */
        atomic { op_w = 0; pending = !op_done };
        if
        :: pending ->
            sq!CANCEL, 0;                   /* b.cancel_op(&op): put() after the RECV */
            /* under op.mu: if not done, w2.arm(false) and op.w = &w2 */
            atomic {
                if
                :: !op_done -> w_claimed = false; w_woken = false; op_w = 2; wait2 = true
                :: else
                fi
            };
            if
            :: wait2 -> w_woken             /* w2.wait(nullptr): the completion only */
            :: else
            fi
        :: else
        fi;
        /* canceled in time: -ETIMEDOUT; completed anyway: its result */
        if
        :: op_res == ECANCELED -> res = TIMEDOUT
        :: else -> res = op_res
        fi
    :: else -> res = op_res                 /* notified: res was written before wake() */
    fi;
unlink:
    atomic { linked = false };              /* unlink() under r->mu */
    /* ring_io(): a count > 0 is copied out of the provided buffer, which
     * then goes back to the buffer ring (give_back(), URING-P1) */
#ifdef BUG_GIVE_BACK_NOTIFIED_ONLY
    if
    :: res == DATA && !timed -> bufs++
    :: else
    fi;
#else
    if
    :: res == DATA -> bufs++
    :: else
    fi;
#endif
returned:
    assert(res != NONE);
    assert(!linked);
    assert(pend == 0);                      /* IO-F1: no RECV into the buffer is left */
    assert(res != ECANCELED || r_closed);   /* operation_canceled only after close */
    assert(!taken[1] || res == DATA);       /* the bytes a RECV took are returned */
    assert(bufs == 1);                      /* URING-P1: no provided buffer is kept */
#ifdef ADDR_REUSE
    /* The same task's next read_some() on handle 2, which nobody closes:
     * a new ring_op at the same address, so the same user_data. */
    res = NONE;
    atomic {
        /* under r2->mu; prepare() and the waiter's arm reset the op */
        op_done = false; op_res = NONE; op_w = 0; w_claimed = false; w_woken = false;
#ifndef BUG_NO_DRAIN_BEFORE_PUT
        do
        :: mbox?k, h -> sq!k, h
        :: empty(mbox) -> break
        od;
        k = 0;
        h = 0;
#endif
        sq!RECV, 2
    };
    atomic {
        if
        :: op_done -> res = op_res
        :: else -> op_w = 1
        fi
    };
    if
    :: res == NONE ->
end_wait2:                                  /* no data may ever come: a valid end */
        w_woken;
        res = op_res
    :: else
    fi;
    assert(res != ECANCELED);               /* handle 2 was never closed */
    assert(res != NOBUFS)                   /* the first receive gave its buffer back */
#endif
}

init {
    atomic {
        run Reader();
        run Closer();
        run Owner();
        run Kernel();
        run Data(1);
#ifdef ADDR_REUSE
        run Data(2);
#endif
    }
}

#endif /* PART_R7 */

/* ======================================================================== */
#ifdef PART_O7

/* ---- PART_O7 ----------------------------------------------------------------
 *
 * remove() returns only once the fd's multishot poll is over (URING-O7),
 * so that close(2) right after retire() closes the file (issue 43).
 *
 * Parties:
 *   Owner   the owner thread, for ever: owner_backend::wait() (drain the
 *           mailbox, taking the tickets asked so far: seen = asked; the
 *           blocking check of PART_O4; the io_uring_enter(), which submits
 *           the SQ and runs the deferred task work (GETEVENTS), and, when
 *           blocking, sleeps until the eventfd's read completes; then
 *           settle() when tickets were taken or a poll is being settled:
 *           one more enter, then done = seen and the futex wake), or, between
 *           polls, a task's submit() (it drains the mailbox too), or (-DON_OWNER)
 *           the task that closes the handle: remove() on the owner puts the
 *           cancel after a drain and settle()s at once, then close(2);
 *   Closer  (not -DON_OWNER) handle::close() on another thread: remove()
 *           pushes the cancel and takes its ticket under mbox_mu_ (one
 *           step), interrupt()s the owner, waits until done reaches the
 *           ticket (the futex; the code's settle_limit and owner-exit checks
 *           are left out, so a missed wake-up is an invalid end state), then
 *           close(2);
 *   Kernel  inside the owner's enter only (DEFER_TASKRUN): an ARM in the SQ
 *           arms the poll; a CANCEL marks an armed poll canceled and queues
 *           its end as task work (found nothing: -ENOENT); the task work
 *           ends the poll: its last CQE, the request freed, the file
 *           released. The eventfd's read completes once efd is set.
 * The poll is armed before the close, or its ARM is still in the mailbox
 * (an arm() from another thread; URING-O2 puts it before the cancel).
 *
 * Properties:
 *   - when close(2) runs, the poll is over (it holds no file);
 *   - the closer always gets there (a state where it waits for ever is an
 *     invalid end state: no lost wake-up of await_settled()).
 */

#define ARM     1
#define CANCEL  2

#define P_QUEUED   1   /* the POLL_ADD in the mailbox or the SQ */
#define P_ARMED    2   /* in the kernel: holds the file */
#define P_CANCELED 3   /* canceled; its end is task work not yet run */
#define P_ENDED    4   /* last CQE posted, request freed: the file is free */

chan mbox = [2] of { byte };   /* owner_backend::mbox_ */
chan sq = [3] of { byte };     /* the SQ */
byte poll = P_ARMED;
bool tw = false;               /* the poll's end is queued as task work */
byte asked = 0;                /* settle_asked_ (mbox_mu_) */
byte seen = 0;                 /* settle_seen_ (owner) */
byte done = 0;                 /* settle_done_ (the futex word) */
bool settling = false;         /* settling_ not empty (owner) */
bool closed = false;           /* close(2) has run */
bool waiting = false, kicked = false, mbox_full = false, efd = false;

/* drain_mailbox(): the swap under mbox_mu_ with seen = asked, and the puts. */
inline drain()
{
    if
    :: mbox_full ->
        atomic {
            do
            :: mbox?c ->
                sq!c;
                if
                :: c == CANCEL -> settling = true   /* put() of cmd::remove */
                :: else
                fi
            :: empty(mbox) -> break
            od;
#ifndef BUG_PUBLISH_AT_DRAIN
            seen = asked;
#else
            seen = asked; done = asked;   /* the tickets said settled before any enter */
#endif
            mbox_full = false
        }
    :: else
    fi;
    c = 0
}

/* io_uring_enter() with GETEVENTS: the SQ in order, then the task work. */
inline enter()
{
    atomic {
        do
        :: sq?c ->
            if
            :: c == ARM -> poll = P_ARMED
            :: c == CANCEL ->
                if
                :: poll == P_ARMED -> poll = P_CANCELED; tw = true
                :: else                                  /* -ENOENT */
                fi
            fi
        :: empty(sq) -> break
        od;
        if
        :: tw -> poll = P_ENDED; tw = false
        :: else
        fi
    };
    c = 0
}

/* settle(): enter until the poll's last CQE is in the CQ (one round is
 * enough here), then publish what was taken. */
inline settle()
{
    enter();
    atomic {
        if
        :: settling -> assert(poll == P_ENDED); settling = false   /* the CQ scan finds it */
        :: else
        fi;
        done = seen     /* settle_done_.store, then the futex wake */
    }
}

inline interrupt()
{
    kicked = true;
    if
    :: waiting -> efd = true
    :: else
    fi
}

proctype Owner()
{
    bool block = false, k = false;
    byte c = 0;
end_loop:
    do
    :: true ->   /* wait() */
        drain();
        if
        :: block = true
        :: block = false
        fi;
        if
        :: block ->
            waiting = true;
            atomic { k = kicked; kicked = false };
            if
            :: !k -> k = mbox_full
            :: else
            fi;
            if
            :: k -> block = false; waiting = false; drain()
            :: else
            fi;
            k = false
        :: else
        fi;
        enter();
        if
        :: block ->
end_block:
            atomic { efd -> efd = false };
            waiting = false
        :: else
        fi;
        if
        :: settling || seen != done -> settle()
        :: else
        fi
    :: true ->   /* a task's submit(): drains the mailbox before its own SQE */
        drain()
#ifdef ON_OWNER
    :: !closed ->
        /* the closing task: retire() -> remove() on the owner */
        drain();
        sq!CANCEL;
        settling = true;
#ifndef BUG_OWNER_NO_SETTLE
        settle();
#endif
        assert(poll == P_ENDED);   /* close(2): the file goes with the fd */
        closed = true
#endif
    od
}

#ifndef ON_OWNER
proctype Closer()
{
    byte ticket = 0;
#ifndef BUG_TICKET_OUTSIDE_LOCK
    atomic { mbox!CANCEL; asked++; ticket = asked; mbox_full = true };   /* under mbox_mu_ */
#else
    atomic { asked++; ticket = asked };
    atomic { mbox!CANCEL; mbox_full = true };
#endif
    interrupt();
    done >= ticket;            /* await_settled(): the futex wait */
    assert(poll == P_ENDED);   /* close(2): the file goes with the fd */
    closed = true
}
#endif

init {
    atomic {
        if
        :: poll = P_ARMED                              /* armed by a wait on the owner */
        :: poll = P_QUEUED; mbox!ARM; mbox_full = true /* arm() from another thread, still handed over */
        fi;
        run Owner();
#ifndef ON_OWNER
        run Closer()
#endif
    }
}

#endif /* PART_O7 */
