// pan: -DSAFETY
// run: -m200000
// config: -DWITH_CLOSE
// config: -DWITH_W
// config: -DWITH_CACHE
// bug: BUG_PUMP_LOOKS_FIRST the signal thread looks at the sets before it drains the eventfd (IO-S2)
// bug: BUG_HANDLER_WAKES_FIRST the handler writes the eventfd before it counts the delivery (IO-S1)
// bug: BUG_CHECK_UNLOCKED a waiter of the set checks for a pending signal outside the set's lock, then links (IO-S2)
// bug: BUG_NO_KEPT_EDGE dispatch() drops an edge that finds no waiter instead of keeping it (REACTOR-R3)
// bug: BUG_NO_FIRED a waker claims the select without writing which case fired (WAITER-V2)
// bug: BUG_CACHE_NO_COUNT the readiness cache is trusted whatever the event count says (IO-Q3)
// bug: BUG_CACHE_COUNT_AFTER the read takes its count after its attempt, not before (IO-Q3)
/* select_io.pml: select over an io readiness case and a signal case
 * (weft/io/select.hpp, IO-Q1; src/io/signal.cpp, IO-S1 - IO-S2), with the
 * reactor's dispatch and retire (src/io/reactor.hpp, REACTOR-R3, REACTOR-R5)
 * and the one waiter (WAITER-V1 - WAITER-V3, CHAN-K5).
 *
 * Code (weft): src/sync/select.cpp select_engine and lock_set; src/io/
 * handle.cpp ready_core (the level pre-check), ready_poll, ready_link,
 * ready_unlink; src/io/reactor.cpp reactor::dispatch, reactor::retire;
 * src/io/signal.cpp on_signal (the handler), pump, deliver,
 * signal_set::state::take / pending, signal_set::wait, signal_poll,
 * signal_link, signal_unlink; the waiter (include/weft/waiter.hpp,
 * src/task/waiter.cpp): arm, claim, wake, wait; wait_queue::push_back,
 * remove, pop_claimed.
 *
 * Parties:
 *   S        a select over (readable(R), on_signal(Q), timeout): the level
 *            pre-check (poll(2) of the fd, no lock), then, holding R's and
 *            Q's locks (taken together: nobody else ever holds both), the
 *            polls in any order and, if none is ready, arm and link a node
 *            in R's queue and one in Q's; then it waits until woken, or its
 *            deadline claims the waiter itself; then it unlinks both nodes
 *            under the locks (WAITER-V3);
 *   writer   data arrives on the fd: `data` becomes true and the kernel
 *            queues one edge event;
 *   D        the reactor: dispatches each queued event under R's lock
 *            (REACTOR-R3: pops and claims the waiters, keeps the edge in
 *            `ready` if it woke nobody), wakes after the lock;
 *   C        (WITH_CLOSE) another task closes the handle: retire() under R's
 *            lock marks it closed and claims its waiters (ECANCELED);
 *   H        the signal handler, twice: counts[s]++ then writes the eventfd;
 *   P        the signal thread: waits for the eventfd, drains it, then
 *            under Q's lock hands each pending signal to one waiter it can
 *            claim (take() for it, the hand-over in the waiter's code);
 *   W        (WITH_W) a second waiter of Q: signal_set::wait() with a
 *            deadline.
 * WITH_CACHE (IO-Q3, the readiness cache): no signals; S first reads the
 *            fd (its count of dispatched events taken, then a read that
 *            takes all there is: a stream's short read or EAGAIN, which
 *            records the count + 1), then lets another task's
 *            handle::wait() (V, with a deadline) run to its end, which may
 *            take the edge of data written after the read without reading
 *            it; then the select, whose pre-check trusts the record while
 *            the count is unchanged (no poll) and whose poll of R looks at
 *            the count again under R's lock. D counts each event it
 *            dispatches under R's lock and wakes V too (REACTOR-R4). The
 *            select's wait is a valid end (nothing may come); a select
 *            linked while the fd had data and no event was left to come is
 *            the lost wake-up (asserted at the link, and by Quiet). V ends
 *            before the select begins: a second waiter of the same
 *            direction during the select can take an edge the select needed
 *            with or without the cache (handle::wait() is edge-triggered,
 *            docs/io.md), and the recheck under the lock, which narrows that
 *            window for the cache, is not needed here (no seeded bug for it).
 *
 * Abstractions: a lock is a flag taken by an atomic test; what it guards
 * changes in steps of its own under it. Each claim is a step of its own:
 * other parties reach a waiter's claim word without the lock. The eventfd
 * is a counter (a write adds one, a drain reads it to zero); a queued edge
 * event is a counter of events; the fd's readiness is `data` (nobody reads
 * the data here: readiness is all the select reports). One signal number:
 * `count` is the handler's counter, `seen` the set's (IO-S1).
 *
 * Properties:
 *   - each waiter is claimed at most once (WAITER-V1);
 *   - the select always returns: the writer's data and the handler's
 *     signals are always there to end it, so a run where it waits for ever
 *     (with or without a deadline, chosen at its start) is an invalid end
 *     state: a claimed waiter that is never woken, or a lost wake-up;
 *   - the select's result is the case that completed: it reports the
 *     signal case exactly when a take() was made for it, the readiness case
 *     only when the fd had data or was closed (closed: ECANCELED);
 *   - no delivery is taken twice (a take always advances `seen`), and the
 *     takes of S and W never exceed the deliveries;
 *   - no waker touches a node of a waiter that has returned (WAITER-V3);
 *   - no lost wake-up: in a state where nothing can move, no waiter is
 *     linked and unclaimed while its set has a pending signal, and the
 *     select is not linked and unclaimed while R kept an edge, is closed,
 *     or had data before it linked.
 */

#define NONE   0
#define CASE_R 1
#define CASE_Q 2
#define TIMED  3

// S's waiter and nodes
byte s_claims = 0;     // how many parties won S's claim (WAITER-V1: at most 1)
bool s_claimed = false;
bool s_woken = false;
byte s_fired = NONE;   // the hand-over (WAITER-V2)
bool s_code_canceled = false;
bool s_in_r = false, s_in_q = false;  // S's nodes linked
bool s_waiting = false;  // S is between its link and its return
bool s_done = false;
byte s_result = NONE;
bool s_r_canceled = false;
byte s_takes = 0;

// W's waiter and node
bool w_claimed = false;
byte w_claims = 0;
bool w_woken = false;
bool w_in_q = false;
bool w_waiting = false;
bool w_done = false;
byte w_takes = 0;

// the registration R and the fd
bool rmu = false;
bool r_ready = false;
bool r_closed = false;
bool data = false;
byte events = 0;
bool dispatching = false;  // D has taken an event and not yet finished it
bool data_before_link = false;  // the fd had data when S linked

// IO-Q3 (WITH_CACHE): the registration's event count and the read's record
byte ev_count = 0;
byte empty_at = 0;
// V, the other task's handle::wait() (WITH_CACHE)
bool v_in_r = false, v_claimed = false, v_woken = false, v_done = false;

// the signal set Q and the handler's state
bool qmu = false;
byte count = 0;
byte seen = 0;
byte efd = 0;

inline lock_r() { atomic { !rmu -> rmu = true } }
inline unlock_r() { rmu = false }
inline lock_q() { atomic { !qmu -> qmu = true } }
inline unlock_q() { qmu = false }

// take(): a pending signal, taken (IO-S1). Under Q's lock.
inline take(got) {
    if
    :: count > seen -> seen = count; got = true
    :: else -> got = false
    fi
}

proctype Select() {
    bool level = false, got = false, has_deadline = false;
    if
    :: has_deadline = true
    :: has_deadline = false
    fi;
#ifdef WITH_CACHE
    byte t = 0, tick = 0;
    bool cached = false;
    // The task's read before its select: the count, then a read that takes
    // all there is (IO-Q3).
#ifndef BUG_CACHE_COUNT_AFTER
    t = ev_count;
#endif
    data = false;
#ifdef BUG_CACHE_COUNT_AFTER
    t = ev_count;
#endif
    empty_at = t + 1;
    run IoWait();
    v_done;
    // ready_core(): the record while the count is unchanged, else the
    // level pre-check (IO-Q3, IO-Q1).
    tick = ev_count;
#ifdef BUG_CACHE_NO_COUNT
    if
    :: empty_at != 0 -> cached = true
    :: else -> level = data
    fi;
#else
    if
    :: empty_at != 0 && empty_at == tick + 1 -> cached = true
    :: else -> level = data
    fi;
#endif
#else
    // ready_core(): the level pre-check, no lock (IO-Q1).
    level = data;
#endif
    // select_engine(): both locks, the polls in any order, then link.
    atomic { !rmu && !qmu -> rmu = true; qmu = true }
    if
    :: r_closed -> s_result = CASE_R; s_r_canceled = true
    :: !r_closed && r_ready -> r_ready = false; s_result = CASE_R
    :: !r_closed && level -> s_result = CASE_R
#ifdef WITH_CACHE
    :: !r_closed && cached && ev_count != tick -> s_result = CASE_R  // an event since (IO-Q3)
#endif
    :: count > seen -> take(got); assert(got); s_takes++; s_result = CASE_Q
    :: else ->
#ifdef WITH_CACHE
        // Data there and no event left to come: nothing will wake it.
        assert(!data || events > 0 || dispatching);
#endif
        s_in_r = true;
        s_in_q = true;
        s_waiting = true;
        data_before_link = data
    fi;
    rmu = false;
    qmu = false;
    if
    :: s_result != NONE -> goto done
    :: else
    fi;
    // w.wait(deadline): woken, or the deadline claims the waiter itself.
#ifdef WITH_CACHE
end_s:  // no signals: nothing may come (Quiet tells a lost wake-up)
#endif
    if
    :: atomic { has_deadline && !s_claimed -> s_claimed = true; s_claims++ }; s_result = TIMED
    :: s_woken -> s_result = s_fired;
        if
        :: s_result == CASE_Q -> s_takes++
        :: else
        fi;
        s_r_canceled = s_code_canceled
    fi;
    // WAITER-V3: unlink what is still linked, under the locks.
    atomic { !rmu && !qmu -> rmu = true; qmu = true }
    s_in_r = false;
    s_in_q = false;
    s_waiting = false;
    rmu = false;
    qmu = false;
done:
    assert(s_result != NONE);
#ifndef WITH_CACHE
    // The readiness case only when there was something to report (with
    // WITH_CACHE's read, a kept edge of data the read took is a spurious
    // readiness, which IO-Q1 allows).
    assert(s_result != CASE_R || data || r_closed);
#endif
    assert(s_result != CASE_R || !s_r_canceled || r_closed);
    // The signal case exactly when a take was made for the select.
    assert((s_result == CASE_Q) == (s_takes == 1));
    s_done = true
}

proctype Writer() {
    atomic { data = true; events++ }  // the kernel queues the edge with the data
}

// reactor::dispatch(): one queued event at a time.
proctype Dispatch() {
    bool any = false, wake_s = false;
end_d:
    do
    :: atomic { events > 0 -> events--; dispatching = true };
        lock_r();
        if
        :: r_closed -> unlock_r(); dispatching = false  // REACTOR-R2 / R5: stale, dropped
        :: else ->
            any = false;
            wake_s = false;
#ifdef WITH_CACHE
            ev_count++;  // IO-Q3
            if
            :: v_in_r ->  // REACTOR-R4: every waiter of the direction
                v_in_r = false;
                if
                :: atomic { !v_claimed -> v_claimed = true; v_woken = true }; any = true
                :: else
                fi
            :: else
            fi;
#endif
            if
            :: s_in_r ->
                assert(s_waiting);  // WAITER-V3: the node's waiter has not returned
                s_in_r = false;     // pop
                if
                :: atomic { !s_claimed -> s_claimed = true; s_claims++; wake_s = true }
                   ;
#ifndef BUG_NO_FIRED
                   s_fired = CASE_R;
#endif
                   any = true
                :: else
                fi
            :: else
            fi;
#ifndef BUG_NO_KEPT_EDGE
            r_ready = !any;
#endif
            unlock_r();
            if
            :: wake_s -> s_woken = true
            :: else
            fi;
            dispatching = false
        fi
    od
}

#ifdef WITH_CLOSE
// handle::close() -> reactor::retire(), once, at any moment.
proctype Close() {
    bool wake_s = false;
    lock_r();
    r_closed = true;
    if
    :: s_in_r ->
        assert(s_waiting);
        s_in_r = false;
        if
        :: atomic { !s_claimed -> s_claimed = true; s_claims++; wake_s = true };
           s_code_canceled = true;
#ifndef BUG_NO_FIRED
           s_fired = CASE_R
#endif
        :: else
        fi
    :: else
    fi;
    unlock_r();
    if
    :: wake_s -> s_woken = true
    :: else
    fi
}
#endif

// on_signal(), the handler: twice.
proctype Handler() {
    byte i = 0;
    do
    :: i < 2 ->
#ifdef BUG_HANDLER_WAKES_FIRST
        efd++;
        count++;
#else
        count++;  // IO-S1: before the eventfd
        efd++;
#endif
        i++
    :: else -> break
    od
}

// The signal thread: pump() and deliver().
proctype Pump() {
    bool got = false, wake_s = false, wake_w = false;
end_p:
    do
    :: efd > 0 ->
#ifdef BUG_PUMP_LOOKS_FIRST
        lock_q();
        wake_s = false;
        wake_w = false;
        do
        :: count > seen && s_in_q ->
            assert(s_waiting);
            s_in_q = false;
            if
            :: atomic { !s_claimed -> s_claimed = true; s_claims++; wake_s = true };
               take(got); assert(got); s_fired = CASE_Q
            :: else
            fi
        :: count > seen && w_in_q ->
            assert(w_waiting);
            w_in_q = false;
            if
            :: atomic { !w_claimed -> w_claimed = true; w_claims++; wake_w = true };
               take(got); assert(got); w_takes++
            :: else
            fi
        :: else -> break
        od;
        unlock_q();
        efd = 0;
#else
        efd = 0;  // drain, then look (IO-S2)
        lock_q();
        wake_s = false;
        wake_w = false;
        do
        :: count > seen && s_in_q ->
            assert(s_waiting);
            s_in_q = false;
            if
            :: atomic { !s_claimed -> s_claimed = true; s_claims++; wake_s = true };
#ifndef BUG_NO_FIRED
               s_fired = CASE_Q;
#endif
               take(got); assert(got)
            :: else
            fi
        :: count > seen && w_in_q ->
            assert(w_waiting);
            w_in_q = false;
            if
            :: atomic { !w_claimed -> w_claimed = true; w_claims++; wake_w = true };
               take(got); assert(got); w_takes++
            :: else
            fi
        :: else -> break
        od;
        unlock_q();
#endif
        if
        :: wake_s -> s_woken = true
        :: else
        fi;
        if
        :: wake_w -> w_woken = true
        :: else
        fi
    od
}

#ifdef WITH_CACHE
// handle::wait(readable, deadline) of another task: takes a kept edge, or
// waits for an event (or its deadline); reads nothing.
proctype IoWait() {
    lock_r();
    if
    :: r_ready -> r_ready = false; unlock_r()
    :: r_closed -> unlock_r()
    :: else ->
        v_in_r = true;
        unlock_r();
        if
        :: atomic { !v_claimed -> v_claimed = true }  // its deadline
        :: v_woken
        fi;
        lock_r();
        v_in_r = false;
        unlock_r()
    fi;
    v_done = true
}
#endif

#ifdef WITH_W
// signal_set::wait(ec, deadline) of a second waiter.
proctype W() {
    bool got = false, has_deadline = false;
    if
    :: has_deadline = true
    :: has_deadline = false
    fi;
#ifdef BUG_CHECK_UNLOCKED
    if
    :: count > seen -> lock_q(); take(got); unlock_q()
    :: else
    fi;
    if
    :: got -> w_takes++; goto wdone
    :: else
    fi;
    lock_q();
#else
    lock_q();
    take(got);
    if
    :: got -> w_takes++; unlock_q(); goto wdone
    :: else
    fi;
#endif
    w_in_q = true;
    w_waiting = true;
    unlock_q();
    // Without a deadline W may wait for ever when S took every delivery:
    // Quiet's assertions tell that from a lost wake-up.
end_w:
    if
    :: atomic { has_deadline && !w_claimed -> w_claimed = true; w_claims++ }
    :: w_woken
    fi;
    lock_q();
    w_in_q = false;
    w_waiting = false;
    unlock_q();
wdone:
    w_done = true
}
#endif

// In a state where nothing else can move: no lost wake-up.
proctype Quiet() {
    timeout ->
    assert(s_claims <= 1 && w_claims <= 1);
    // a linked, unclaimed select with something to report
    assert(!(s_waiting && !s_claimed && s_in_q && count > seen));
    assert(!(s_waiting && !s_claimed && (r_ready || r_closed || data_before_link)));
    // a linked, unclaimed waiter of the set with a pending signal
    assert(!(w_waiting && !w_claimed && w_in_q && count > seen));
    // deliveries are taken at most once in all
    assert(s_takes + w_takes <= count)
}

init {
    atomic {
        run Select();
        run Writer();
        run Dispatch();
#ifdef WITH_CLOSE
        run Close();
#endif
#ifndef WITH_CACHE
        run Handler();
#endif
        run Pump();
#ifdef WITH_W
        run W();
#endif
        run Quiet()
    }
}
