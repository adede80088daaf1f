// pan: -DSAFETY
// run: -m100000
// config: -DNIO=0 -DNPUB=2
// config: -DNIO=1 -DNPUB=2
// config: -DWATCH -DNIO=0 -DNPUB=1 -DNEV=2
// bug: BUG_NO_PUBLISH_RING runtime_poller() does not interrupt every worker's ring after publishing io: a non-watcher that read its word 0 before a waker stored 1, and io after it was published, sleeps in its ring without a timeout while that waker read io as null (futex wake only) and runtime_poller() found it no longer sleeping (a lost wake-up, caught with NIO=0: an op's interrupt() hides it; SCHED-I3, see the Findings)
// bug: BUG_KICK_NO_RING kick() wakes the futex instead of calling wake_worker(index) in ring mode (SCHED-I3, URING-W4)
// bug: BUG_KICK_BEFORE_STORE wake() kicks the worker before it stores the word 1 (SCHED-I3)
// bug: BUG_NO_KICKED_CHECK the ring's wait stores waiting_ and blocks without exchanging kicked_ (URING-O4)
// bug: BUG_KICKED_NOT_CLEARED the ring's wait loads kicked_ instead of exchanging it with false: a kick is seen for ever and the worker spins in its sleep loop (the bound on ring waits; URING-O4)
// bug: BUG_NO_PUBLISH_WAKE runtime_poller() neither wakes the sleepers nor wakes their futex after publishing io: a worker asleep in a plain futex_wait (it read no poller) stays there while kick() interrupts only its ring (SCHED-I1, SCHED-I3)
// bug: BUG_NO_REARM the eventfd's read is not queued again after its completion: the next kick that writes the eventfd ends no wait (URING-O4)
// bug: BUG_WATCH_NOT_CLEARED reaping the watch poll's CQE does not clear watch_armed_: no poll on the epoll fd is armed again and a later epoll event is missed (caught in the WATCH configuration; URING-W3)
/* worker_rings.pml: a worker that sleeps in its own io_uring ring (the
 * io_uring "worker rings" backend, SCHED-I3, URING-W1 - URING-W4): the
 * ring is an owner ring (URING-O1 - O4) whose waits end for a CQE: an IO
 * completion, the completion of the ring's pending read of its eventfd
 * (which interrupt() writes), or, for the watcher, a one-shot poll on the
 * shared epoll fd. There is no futex op in the ring: the futex word is
 * read by the sleep loop and the wake-up reaches the ring through kicked_
 * and the eventfd (URING-O4's Dekker pair).
 *
 * Code (weft): src/runtime/sleeping.cpp runtime_core::sleep (the branch
 * `p && nthreads != 0 && p->per_worker()`, and the plain futex_wait when
 * no poller exists yet), kick, poll_now, wake, wake_sleeper_locked;
 * src/runtime/runtime_core.hpp SCHED-I3, wake_sleeper;
 * src/runtime/runtime.cpp runtime_poller() (publishes io, then wakes every
 * sleeper); src/io/uring.cpp URING-O1 - O6, URING-W1 - W4, class
 * owner_backend: wait, interrupt, watch, own, drain_mailbox, submit,
 * queue_read_wake, translate (ud_read_wake re-queued after each
 * completion, ud_watch clears watch_armed_); class worker_rings:
 * poll_worker, wake_worker, start_op, cancel_op.
 *
 * Parties:
 *   Worker     worker w, the owner of ring w. It runs the tasks ready on it
 *              (each a step), may poll between tasks and before it sleeps
 *              (poll_now(): poll_worker(i, 0, false), then the shared
 *              poller's poll(0), i.e. epoll), and sleeps when it has
 *              nothing to run, over and over:
 *                1. under idle_mu: futex = 0, sleeping (on the idle list);
 *                2. has_work(): any work, no sleep;
 *                3. loop: f = futex (acquire); f == 1: leave; p = io
 *                   (acquire) [-DIO_FIRST reads io first]. With a
 *                   poller: the watcher (WATCH) rechecks the word under
 *                   idle_mu (!= 0: again) and passes watch; then
 *                   poll_worker(i, -1, watch): with watch, watch(epfd)
 *                   first (own(); if !watch_armed_: watch_armed_ = true,
 *                   drain the mailbox, put a one-shot POLL_ADD of the epoll
 *                   fd); then owner_backend::wait(-1): own() (the first
 *                   time: queue the eventfd's read), drain the mailbox;
 *                   if the CQ is empty: waiting_ = true (seq_cst), then
 *                   kicked_.exchange(false) || mbox_full_: if so, no block
 *                   (waiting_ = false, drain); block: submit the SQ and
 *                   wait for a CQE; else submit. Reap every CQE: an IO CQE
 *                   readies its task, the eventfd read's CQE queues the
 *                   read again, the watch CQE clears watch_armed_. With
 *                   watch, epoll is polled with timeout 0 (its events
 *                   ready their tasks). Woke any: leave; else again.
 *                   Without a poller: futex_wait(word, 0), no timeout, and
 *                   again;
 *                4. under idle_mu: if still sleeping, deregister.
 *   Waker      another thread that publishes NPUB tasks for w, one after
 *              the other: the store of the task (seq_cst: the inbox),
 *              then wake(w): under idle_mu, deregister w if it sleeps and
 *              futex = 1; then kick(w): p = io (acquire); if p
 *              (per_worker), only wake_worker(w) = ring w's interrupt():
 *              kicked_ = true (seq_cst), then if waiting_ (seq_cst) write
 *              the eventfd; else futex_wake(&futex, 1).
 *   Publisher  runtime_poller(), at any moment: io = p (release), then
 *              wake_sleeper(w): under idle_mu, w sleeping? then wake(w);
 *              then futex_wake(&futex, 1) and wake_worker(w).
 *   IOThread   a thread that is no worker and starts NIO operations once
 *              the poller exists: start_op() sends them to ring 0 = w
 *              (URING-W2): submit(): under mbox_mu_ the push and
 *              mbox_full_ = true, then interrupt().
 *   Kernel     the eventfd read, when submitted, completes once the
 *              eventfd's counter is not zero (and zeroes it); a submitted
 *              IO op completes at any moment; the watch poll, when
 *              submitted, completes once the epoll fd is readable (checked
 *              at arming and at every new event: a level, ev > 0). Each
 *              completion posts a CQE to w's CQ.
 *   Epoll      (WATCH) NEV readiness events on the shared epoll instance,
 *              at any moment once the poller exists; the watcher's ring
 *              waits for them (URING-W3), and any epoll_wait(0) takes them
 *              (each readies a task on w: one worker).
 *
 * Abstractions and steps (models/README.md, "How they model C++"): a
 * critical section under idle_mu or mbox_mu_ is one step; every seq_cst
 * or acquire/release access that another party makes without the lock
 * (the futex word, io, waiting_, kicked_, mbox_full_) is a step of its
 * own, as is each syscall (futex_wait, futex_wake, the eventfd's write,
 * the ring's wait), except where the worker's ring wait merges two
 * neighbours whose order against every other party's step can be swapped
 * without a change (Lipton's reduction; ring_wait() names them): e.g. the
 * CQ's read and waiting_'s store (a kernel post between them can go before
 * the read, an interrupt()'s load of waiting_ before both), the exchange
 * of kicked_ and the load of mbox_full_ (a push between them can go before
 * the exchange). The waker's store of the word and its loads of io and
 * waiting_ stay steps of their own, as do the worker's loads of io and the
 * word: the orders the protocol rests on. The CQ is read only by the
 * worker, so reaping all of it is one step (a CQE posted meanwhile is in
 * this reap or the next, both orders are explored); so is a drain of the
 * mailbox into the SQ (the SQ is the worker's alone). poll_now() is one
 * step: it never blocks, and what others do during it can go before or
 * after it. Writing an SQE is local to the worker and goes with its put();
 * io_uring_enter's submit is one step with its wait's start. The eventfd
 * is a flag (the read takes the whole counter). The ring's batch limit
 * (128 CQEs a wait) is left out.
 * One worker, so it is the watcher whenever the WATCH configuration says
 * it watches (its sleep() makes it the watcher, and the lock poll_mu is
 * always free for it); without WATCH another worker (not modelled) is the
 * watcher and w sleeps with watch = false. Left out (worker_sleep.pml
 * checks the first ones): the idle list, n_sleeping, the hand-off of the
 * watcher (wake_sleeper_locked's `told`, futex value 2), timers and shrink
 * sweeps (no wait has a timeout: a timeout would hide a lost wake-up; the
 * watcher that fails to take poll_mu naps 1 ms and is left out for the
 * same reason), epoll's own interrupt(), the ops that w's tasks start on
 * w itself (put() straight into the SQ, submitted by the next wait), the
 * -EBUSY backlog. Tasks that run start no new IO.
 *
 * Properties:
 *   - no lost wake-up (SCHED-I3, URING-O4, URING-W3): in a state where
 *     nothing can move (the worker blocked in its ring or in futex_wait,
 *     the others done), the worker is blocked, no task is ready and not
 *     run, its word is not 1 (no wake slept through), no op waits in the
 *     mailbox or the SQ, no CQE is left unreaped, no epoll event is
 *     pending (WATCH); a worker blocked in futex_wait exists only while
 *     there is no poller; one blocked in its ring has no kick pending
 *     (kicked_ false), has its eventfd read in the kernel, and (WATCH)
 *     its poll on the epoll fd too, so that a later kick or event reaches
 *     it (monitor);
 *   - no spin: the worker makes at most MAX_WAITS ring waits in one sleep
 *     (asserted at each one; see MAX_WAITS). A sleep loop that never
 *     blocks and never leaves is a livelock, not a deadlock: only this
 *     bound catches it (BUG_KICKED_NOT_CLEARED).
 *
 * Configurations: NIO=0 NPUB=2 (no op: nothing but the wakes reaches the
 * ring); NIO=1 NPUB=2 (an op sent by another thread through the mailbox);
 * WATCH NIO=0 NPUB=1 NEV=2 (the watcher, epoll events). An op's
 * interrupt() sets kicked_ in the ring, which hides a lost wake-up in the
 * sleep loop (BUG_NO_PUBLISH_RING), hence a configuration without ops.
 *
 * Findings (models/README.md):
 *   - a lost wake-up when the poller is published during a non-watcher's
 *     sleep, in the code as first written (BUG_NO_PUBLISH_RING). The
 *     worker reads its word (0), the waker stores 1 and kicks: io read as
 *     null, so futex_wake only (nobody in futex_wait); runtime_poller()
 *     stores io and finds w no longer sleeping (the waker took it off);
 *     the worker reads io (now set) and waits in its ring without a
 *     timeout: waiting_ = true, no kick, no eventfd write. The task
 *     published for w waits until something else wakes w (for a pinned
 *     task nothing else runs it). The watcher holding poll_mu is safe (it
 *     rechecks its word under idle_mu), the watcher without poll_mu naps
 *     1 ms. Fixed: runtime_poller() interrupts every ring after its store
 *     (kicked_ stays set until the ring's next wait). -DIO_FIRST (io read
 *     before the word) verifies too, but on hardware it needs the waker's
 *     store of the word ordered before its load of io (a full fence or
 *     seq_cst), which the ring interrupt does not.
 */

#ifndef NIO
#define NIO 1
#endif
#ifndef NPUB
#define NPUB 2
#endif
#ifndef NEV
#define NEV 0
#endif
/* A sleep's ring waits: each but the last returns for a kick (one per
 * interrupt(): NPUB wakes, the publisher's, one per op; a kick can cost
 * two, seen in kicked_ and then as the eventfd read's CQE, or the other
 * way round, when it lands in an earlier sleep or turn), for the mailbox
 * (an op pushed after the drain), for the op's CQE or for the watch poll's
 * CQE (one per event). An upper bound: the searches pass with it, and
 * fail at once with a loop that never blocks. */
#ifndef MAX_WAITS
#ifndef BUG_NO_PUBLISH_RING
#define MAX_WAITS (2 * (NPUB + 2) + 4 * NIO + NEV + 1)
#else
#define MAX_WAITS (2 * (NPUB + 1) + 4 * NIO + NEV + 1)
#endif
#endif

#define RD_NONE    0   /* not queued (before own(), or BUG_NO_REARM) */
#define RD_QUEUED  1   /* its SQE in the SQ */
#define RD_PENDING 2   /* in the kernel */
#define RD_DONE    3   /* its CQE in the CQ */

byte futex = 0;          /* worker::futex: 0 may sleep, 1 woken (work) */
bool sleeping = false;   /* worker::sleeping (idle_mu), with the idle list */
byte ready = 0;          /* tasks ready on w and not run */
bool pub = false;        /* runtime_core::io != nullptr */
bool plain = false;      /* w's thread blocked in futex_wait(word, 0) */
bool inring = false;     /* w's thread blocked in its ring's io_uring_enter */
bool waiting = false;    /* owner_backend::waiting_ */
bool kicked = false;     /* owner_backend::kicked_ */
bool efd = false;        /* the eventfd's counter is not zero */
byte rd = RD_NONE;       /* the ring's read of its eventfd (ud_read_wake) */
bool owned = false;      /* owner_backend::owned_ (own()) */
byte mbox = 0;           /* ops in the mailbox (mbox_mu_) */
bool mbox_full = false;  /* owner_backend::mbox_full_ */
byte sq = 0;             /* IO ops' SQEs in the SQ, not submitted */
byte inflight = 0;       /* IO ops submitted, in the kernel */
byte ioc = 0;            /* their CQEs in the CQ, not reaped */
byte wd = RD_NONE;       /* the watch poll on the epoll fd (ud_watch), as rd */
bool armed = false;      /* owner_backend::watch_armed_ */
byte ev = 0;             /* epoll events pending (the epoll fd is readable) */
byte waits = 0;          /* ring waits in the current sleep */

#define CQ_READY (ioc > 0 || rd == RD_DONE || wd == RD_DONE)

/* interrupt() from a thread that is not the ring's owner (URING-O4):
 * kicked_ = true (seq_cst), then waiting_.load(seq_cst) and, if set, the
 * eventfd's write: two steps (the guard is the load, with the write). */
inline interrupt()
{
    kicked = true;
    if
    :: waiting -> efd = true
    :: else
    fi
}

/* kick(w): p = io.load(acquire); per_worker: wake_worker(w.index) only
 * (SCHED-I3); no poller: futex_wake(&futex, 1). */
inline kick()
{
    if
#ifndef BUG_KICK_NO_RING
    :: pub -> interrupt()
#endif
    :: else -> atomic { if :: plain -> plain = false :: else fi }
    fi
}

/* wake(w) under idle_mu (the part there), with the kick after it. */
inline wake()
{
#ifdef BUG_KICK_BEFORE_STORE
    kick();
    atomic { if :: sleeping -> sleeping = false :: else fi; futex = 1 };
#else
    atomic { if :: sleeping -> sleeping = false :: else fi; futex = 1 };
    kick()
#endif
}

/* drain_mailbox(): mbox_full_.load(seq_cst), then under mbox_mu_ the
 * swap and mbox_full_ = false, with the puts into the SQ (the worker's
 * own): one step (a push between the load and the lock is the same as a
 * push before the load: the swap takes it either way; one after the swap
 * is one after the step). Called inside an atomic. */
inline drain_mailbox()
{
    if
    :: mbox_full -> sq = sq + mbox; mbox = 0; mbox_full = false
    :: else
    fi
}

/* own(): the first poll queues the eventfd's read (URING-O1, URING-O4). */
inline own()
{
    if
    :: !owned -> owned = true; rd = RD_QUEUED
    :: else
    fi
}

/* The submit of the SQ, part of io_uring_enter. */
inline submit()
{
    inflight = inflight + sq;
    sq = 0;
    if :: rd == RD_QUEUED -> rd = RD_PENDING :: else fi;
    if :: wd == RD_QUEUED -> wd = RD_PENDING :: else fi
}

/* Reap every CQE (translate()): an IO CQE readies its task; the eventfd
 * read's queues the read again (queue_read_wake()); the watch poll's
 * clears watch_armed_. */
inline reap(woke)
{
    woke = woke + ioc;
    ready = ready + ioc;
    ioc = 0;
    if
    :: rd == RD_DONE ->
#ifdef BUG_NO_REARM
        rd = RD_NONE
#else
        rd = RD_QUEUED
#endif
    :: else
    fi;
    if
    :: wd == RD_DONE ->
        wd = RD_NONE;
#ifndef BUG_WATCH_NOT_CLEARED
        armed = false
#endif
    :: else
    fi
}

/* owner_backend::wait(0) (poll_now): no block; io_uring_submit_and_get_
 * events() when something is queued (URING-O3), then the reap. */
inline ring_wait_now(woke)
{
    own();
    drain_mailbox();
    submit();
    reap(woke)
}

/* owner_backend::wait(-1), in the sleep loop (URING-O4). Steps are merged
 * where the accesses in between commute (see the header): own() and the
 * drain with the CQ's read and the store of waiting_; the exchange of
 * kicked_ with the load of mbox_full_; the wait's return with the store
 * of waiting_ = false and the reap. */
inline ring_wait(woke)
{
    atomic {
        own();
        drain_mailbox();
        block = !CQ_READY;                  /* io_uring_cq_ready() == 0 */
        if
        :: block -> waiting = true          /* waiting_.store(true, seq_cst) */
        :: else
        fi
    };
    if
    :: block ->
        atomic {
#if defined(BUG_NO_KICKED_CHECK)
            k = false;
#elif defined(BUG_KICKED_NOT_CLEARED)
            k = kicked;                     /* kicked_.load(): never cleared */
#else
            k = kicked; kicked = false;     /* kicked_.exchange(false, seq_cst) */
#endif
            if
            :: !k -> k = mbox_full          /* || mbox_full_.load(seq_cst) */
            :: else
            fi
        };
        if
        :: k ->
            atomic {
                block = false;
                waiting = false;            /* relaxed */
                drain_mailbox();
                k = false
            }
        :: else
        fi
    :: else
    fi;
    if
    :: block ->
        /* io_uring_submit_and_wait_timeout(1, no limit) */
        atomic { submit(); inring = true; block = false };
end_ring:
        atomic {
            CQ_READY -> inring = false;
            waiting = false;                /* relaxed */
            reap(woke)
        }
    :: else ->
        atomic { submit(); reap(woke) }     /* io_uring_submit_and_get_events() */
    fi
}

/* The shared poller's epoll_wait(0) (poll(0), or ready_->wait(0) after a
 * watching ring wait): its events ready their tasks on w. */
inline epoll_poll(woke)
{
    atomic { woke = woke + ev; ready = ready + ev; ev = 0 }
}

proctype Worker()
{
    byte woke = 0;
    bool p = false, block = false, k = false, watch = false;
    do
    :: ready > 0 ->
        ready--                             /* run_task(): the task runs, ends or parks */
#ifndef NO_POLL_NOW
    :: pub && (CQ_READY || mbox_full || sq > 0 || rd == RD_QUEUED || wd == RD_QUEUED || ev > 0) ->
        /* poll_now(w): poll_worker(i, 0, false), then try poll_mu (free)
         * and poll(0); only when it has something to do (else a no-op) */
        atomic {
            ring_wait_now(woke);
            epoll_poll(woke);
            woke = 0
        }
#endif
    :: ready == 0 ->
        /* ---- runtime_core::sleep(w) ---- */
        atomic { futex = 0; sleeping = true };   /* under idle_mu */
        if
        :: ready > 0 -> goto leave          /* has_work(w) */
        :: else
        fi;
look:
#ifdef IO_FIRST
        p = pub;                            /* io.load(acquire), before the word (-DIO_FIRST) */
#endif
        if
        :: futex == 1 -> goto leave         /* futex.load(acquire) */
        :: else
        fi;
#ifndef IO_FIRST
        p = pub;                            /* io.load(acquire), after the word (the code) */
#endif
        if
        :: p ->
            p = false;
            /* the ring branch (SCHED-I3) */
#ifdef WATCH
            /* the watcher got poll_mu: under idle_mu, the word again */
            atomic {
                if
                :: futex != 0 -> goto look
                :: else -> watch = true     /* w->polling = true */
                fi
            };
#endif
            waits++;
            assert(waits <= MAX_WAITS);     /* no spin */
            /* poll_worker(i, -1, watch): watch(epfd) first */
            if
            :: watch ->
                atomic {
                    own();
                    if
                    :: !armed ->
                        armed = true;
                        drain_mailbox();
                        wd = RD_QUEUED      /* io_uring_prep_poll_add(epfd, POLLIN) */
                    :: else
                    fi
                }
            :: else
            fi;
            ring_wait(woke);
            if
            :: watch -> epoll_poll(woke); watch = false   /* ready_->wait(0); polling = false */
            :: else
            fi;
            if
            :: woke > 0 -> goto leave
            :: else -> goto look
            fi
        :: else ->
            p = false;
            /* no poller yet: futex_wait(&futex, 0), no timeout */
            atomic {
                if
                :: futex != 0 -> skip       /* -EAGAIN */
                :: else -> plain = true
                fi
            };
end_plain:
            !plain;
            goto look
        fi;
leave:
        atomic { if :: sleeping -> sleeping = false :: else fi };   /* under idle_mu */
        waits = 0;
        p = false;
        woke = 0
    od
}

/* runtime_core::wake(w) after publishing a task for w, NPUB times. */
proctype Waker()
{
    byte i = 0;
    do
    :: i < NPUB ->
        ready++;                            /* push_inbox: the task's store */
        wake();
        i++
    :: else -> break
    od
}

/* runtime_poller(): io.store(p, release), then per worker:
 * wake_sleeper(w), futex_wake(&w->futex, 1), wake_worker(i). */
proctype Publisher()
{
    bool s = false;
    pub = true;
#ifndef BUG_NO_PUBLISH_WAKE
    s = sleeping;                           /* under idle_mu */
    if
    :: s -> wake()
    :: else
    fi;
    atomic { if :: plain -> plain = false :: else fi };   /* futex_wake */
#endif
#ifndef BUG_NO_PUBLISH_RING
    interrupt()                             /* wake_worker(i) (SCHED-I3) */
#endif
}

/* A thread that is no worker starts NIO ops: ring 0 = w, by its mailbox
 * (start_op() -> submit() on a thread that is not the owner). */
proctype IOThread()
{
    byte i = 0;
    pub;
    do
    :: i < NIO ->
        atomic { mbox++; mbox_full = true };   /* under mbox_mu_ */
        interrupt();
        i++
    :: else -> break
    od
}

/* The kernel's side of w's ring. */
proctype Kernel()
{
end_k:
    do
    :: atomic { rd == RD_PENDING && efd -> efd = false; rd = RD_DONE }
    :: atomic { inflight > 0 -> inflight--; ioc++ }
    :: atomic { wd == RD_PENDING && ev > 0 -> wd = RD_DONE }
    od
}

/* NEV readiness events on the shared epoll instance. */
proctype Epoll()
{
    byte i = 0;
    pub;
    do
    :: i < NEV -> ev++; i++
    :: else -> break
    od
}

init {
    atomic {
        run Worker();
        run Waker();
        run Publisher();
        run IOThread();
        run Kernel();
#if NEV > 0
        run Epoll();
#endif
    }
}

/* SCHED-I3: when nothing can move, the worker is blocked where any later
 * wake reaches it, with nothing left for it. */
active proctype Quiet()
{
    timeout ->
    assert(plain || inring);                /* the worker's only places to stop */
    assert(ready == 0);                     /* a published or woken task not run */
    assert(futex != 1);                     /* a wake slept through */
    assert(mbox == 0 && sq == 0 && ioc == 0);   /* an op not taken, a CQE not reaped */
    assert(!plain || !pub);                 /* asleep off the ring with a poller */
#ifdef WATCH
    assert(ev == 0);                        /* an epoll event the watcher missed */
#endif
    assert(!inring || (!kicked && rd == RD_PENDING && !efd));   /* a kick would reach it */
#ifdef WATCH
    assert(!inring || wd == RD_PENDING)     /* an epoll event would reach it */
#endif
}
