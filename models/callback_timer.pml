// pan: -DSAFETY
// run: -m200000
// bug: BUG_NO_TAKE_BACK stop() and reset() do not take a fired, unstarted firing back (TIMER-C2)
// bug: BUG_START_BY_STORE the firing worker starts the callback by a check and a store, not one compare-and-swap (TIMER-C2)
// bug: BUG_READD_ANYWAY a periodic timer is put back after its callback without checking the generation (TIMER-C1)
// bug: BUG_DROP_NO_WAIT the timer's end does not wait for a callback running on another thread (TIMER-C3)
// bug: BUG_FIRE_NO_REF the firing worker runs the callback without a reference to the block (TIMER-C3)
// bug: BUG_MOVE_GEN_LATE an arm that moves the node to another shard adds to gen only under the new shard's lock (TIMER-C1)
/* callback_timer.pml: weft::timer (weft/timer.hpp,
 * src/runtime/callback_timer.cpp, TIMER-C1 - TIMER-C4): arming, moving,
 * stopping and ending a timer from its user while two workers fire their
 * shards' wheels, with periodic re-arming.
 *
 * Code (weft): runtime_core::arm_callback, stop_callback, expired_callback,
 * run_callback, timer_drop and drop_ref in src/runtime/callback_timer.cpp;
 * fire_shard in src/runtime/timers.cpp (which takes a due node out under
 * the shard's lock and runs the callbacks after it).
 *
 * Parties:
 *   U      the timer's user: up to OPS operations, each an arm (once or
 *          periodic, into shard 0 or 1: the shard of the thread that arms)
 *          or a stop, then the timer's end (drop): stop, wait until no
 *          callback runs, drop its reference;
 *   W0, W1 the workers firing shard 0 and shard 1: at any moment, under the
 *          shard's lock, a node linked in that shard may come due and is
 *          taken out (expired_callback), then the callback is started by a
 *          compare-and-swap, runs, and a periodic timer is put back;
 *          at most FIRES firings each.
 *
 * Abstractions: a shard's lock is a flag taken by an atomic test. The
 * firing state is (snap, fired, started) as one word. The block's memory is
 * `freed`; every step that touches the block asserts it is not. A deadline
 * is "any time": a linked node may come due at any step.
 *
 * Properties (asserts):
 *   - one callback at a time (TIMER-C2);
 *   - a callback starts only for an arming the user made and did not end
 *     since (no stop, reset or end returned in between): the generation at
 *     the start is the one taken when the node came due, and the user's
 *     `armed` is set (TIMER-C1, TIMER-C2);
 *   - no callback runs, and nothing touches the block, once the timer's end
 *     has returned or the block is freed (TIMER-C3);
 *   - stop() returns true only when the callback of that arming does not
 *     run (follows from the second);
 *   - every party ends (no invalid end state): the end's wait terminates.
 */

#define OPS 3
#define FIRES 2
#define NONE 2

byte lk[2];            /* the shards' locks */
byte linked = NONE;    /* the shard whose wheel holds the node, or NONE */
byte owner = NONE;     /* the shard that holds or last held it */
byte gen = 0;          /* TIMER-C1 */
bool periodic = false;
/* the firing state (TIMER-C2) */
byte snap = 0;
bool fired = false;
bool started = false;
byte refs = 1;         /* the user's + one per firing in progress */
bool freed = false;
/* observers */
bool armed = false;    /* the user armed it and has not stopped it since */
bool ended = false;    /* the user's end returned */
byte running = 0;      /* callbacks running */

inline lock(s) { atomic { lk[s] == 0 -> lk[s] = 1 } }
inline unlock(s) { lk[s] = 0 }

/* take_back(): TIMER-C2's stop side (one compare-and-swap). */
inline take_back(was) {
#ifndef BUG_NO_TAKE_BACK
    atomic { if :: (fired && !started) -> fired = false; was = true :: else -> skip fi }
#else
    skip
#endif
}

inline drop_ref() {
    atomic {
        assert(!freed);
        refs--;
        if :: refs == 0 -> freed = true :: else -> skip fi
    }
}

proctype User() {
    byte op = 0;
    byte s, held;
    bool was;
    do
    :: op < OPS ->
        op++;
        if
        :: s = 0
        :: s = 1
        fi;
        if
        :: /* arm (reset / reset_every) into shard s */
            was = false;
            held = owner;
            if
            :: held != NONE && held != s ->
                lock(held);
                assert(!freed);
                if :: linked == held -> linked = NONE; was = true :: else -> take_back(was) fi;
#ifndef BUG_MOVE_GEN_LATE
                gen = (gen + 1) % 8;
#endif
                unlock(held)
            :: else -> skip
            fi;
            lock(s);
            assert(!freed);
            if
            :: held == s -> if :: linked == s -> linked = NONE; was = true :: else -> take_back(was) fi
            :: else -> skip
            fi;
            gen = (gen + 1) % 8;
            if :: periodic = true :: periodic = false fi;
            armed = true;
            owner = s;
            assert(linked == NONE);  /* a node is in at most one wheel (LIST-IL1) */
            linked = s;
            unlock(s)
        :: /* stop */
            if
            :: owner != NONE ->
                held = owner;
                was = false;
                lock(held);
                assert(!freed);
                if :: linked == held -> linked = NONE; was = true :: else -> take_back(was) fi;
                gen = (gen + 1) % 8;
                armed = false;
                unlock(held)
            :: else -> skip
            fi
        fi
    :: op == OPS -> break
    od;
    /* the timer's end: stop, wait for a callback running elsewhere, drop */
    if
    :: owner != NONE ->
        held = owner;
        was = false;
        lock(held);
        assert(!freed);
        if :: linked == held -> linked = NONE; was = true :: else -> take_back(was) fi;
        gen = (gen + 1) % 8;
        armed = false;
        unlock(held)
    :: else -> armed = false
    fi;
#ifndef BUG_DROP_NO_WAIT
    (!started);
#endif
    ended = true;
    drop_ref()
}

proctype Worker(byte me) {
    byte fires = 0;
    byte my_snap;
    bool take, go;
    do
    :: fires < FIRES ->
        fires++;
        take = false;
        lock(me);
        if
        :: linked == me ->
            assert(!freed);
            linked = NONE;  /* expire() takes it out */
            if
            :: started -> linked = me  /* its callback still runs: a tick later */
            :: else ->
                my_snap = gen;
                snap = gen;
                fired = true;
#ifndef BUG_FIRE_NO_REF
                refs++;
#endif
                take = true
            fi
        :: else -> skip
        fi;
        unlock(me);
        if
        :: take ->
            go = false;
#ifndef BUG_START_BY_STORE
            atomic {
                assert(!freed);
                if
                :: (fired && !started && snap == my_snap) ->
                    started = true;
                    go = true;
                    /* the callback starts: for a live arming, alone */
                    assert(armed && gen == my_snap && !ended);
                    running++;
                    assert(running == 1)
                :: else -> skip
                fi
            }
#else
            if :: (fired && !started && snap == my_snap) -> go = true :: else -> skip fi;
            atomic {
                if
                :: go ->
                    started = true;
                    assert(armed && gen == my_snap && !ended);
                    running++;
                    assert(running == 1)
                :: else -> skip
                fi
            };
#endif
            if
            :: go ->
                /* the callback runs, then returns */
                atomic { assert(!freed && !ended); running-- };
                lock(me);
                assert(!freed);
                fired = false;
                started = false;
#ifndef BUG_READD_ANYWAY
                if :: (periodic && gen == my_snap && linked == NONE) -> linked = me :: else -> skip fi;
                assert(linked == NONE || owner == linked);
#else
                if :: (periodic && linked == NONE) -> linked = me :: else -> skip fi;
#endif
                unlock(me)
            :: else -> skip
            fi;
#ifndef BUG_FIRE_NO_REF
            drop_ref()
#else
            skip
#endif
        :: else -> skip
        fi
    :: fires == FIRES -> break
    od
}

init {
    atomic {
        run User();
        run Worker(0);
        run Worker(1)
    }
}
