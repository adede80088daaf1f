// pan: -DSAFETY -O0
// run: -m100000
// config: -DNF=1
// config: -DNF=2 -DNSHRINKS=2
// bug: BUG_HOLD_ANY the shrinker takes its hold whenever the task is switched out, also when the waker has arrived (and the task is queued)
// bug: BUG_WAKER_IGNORES_HOLD arrive() queues the task when it is switched out, whether or not a shrinker holds it
// bug: BUG_DROP_NO_QUEUE drop_hold() clears the hold but does not queue a task whose waker arrived meanwhile
// bug: BUG_SAVE_BEFORE_PROTECT shrink_task() saves the words before it makes the range read-only: a write between the save and the release is lost (SHRINK-P1)
// bug: BUG_RELEASE_BEFORE_NONE shrink_task() releases the pages before it makes the range PROT_NONE: a read in between sees 0, and a refused PROT_NONE leaves the task a zero page (SHRINK-P1)
// bug: BUG_HANDLER_NO_LOCK the fault handler restores a shrunk range without taking its bucket's lock: it races with restore_task(), which frees the block the handler reads (SHRINK-P1, SHRINK-P3)
// bug: BUG_HANDLER_NOT_RESTORED the fault handler's put_back() leaves the state shrunk: restore_task() writes the saved words again, over a write made after the fault (SHRINK-P2)
// bug: BUG_HANDLER_IGNORES_STATE the fault handler writes the saved words back whenever it finds the range, also in state restored: over a write made after another thread's fault restored it (caught with two foreign threads; SHRINK-P2)
// bug: BUG_REFUSED_UNLINK_UNCOUNTED when PROT_NONE is refused, shrink_task() takes the block out of the chain and frees it without counting an unlink: a write that faulted in the read-only window, its handler finding no range twice in one generation, is taken for a fault that is not weft's (SHRINK-P3)
// bug: BUG_FREE_BEFORE_UNLINK restore_task() frees the block after its unlock and unlinks it in a later hold: a handler finds the freed block (SHRINK-P3)
// bug: BUG_NO_RETRY a fault whose range is not linked is not weft's at once (no retry per unlink generation): a handler that looks after restore_task() unlinked the range takes the task's own stack for a foreign address (SHRINK-P3)
// bug: BUG_FILL_AFTER_UNPROTECT put_back() makes the range accessible (protect RW) before it writes the saved words, not after (the order before the words went through /proc/self/mem): a read in between sees 0, a write in between is overwritten (SHRINK-P2)
// bug: BUG_SPAN_AFTER_PROTECT shrink_task() raises max_span after protect(PROT_READ) and the link, as src/runtime/shrink.cpp did before the model found it: a write that faults in the read-only window of the first shrink finds max_span 0 and is not weft's (SHRINK-P2; see the Findings)
/* shrink.pml: a shrinker's hold of a parked task against the two arrivals
 * (SHRINK-S1 - SHRINK-S4 with TASK-R1), and the shrunk stack that other
 * threads may still read and write (SHRINK-P1 - SHRINK-P5).
 *
 * Code (weft): include/weft/detail/task_record.hpp (arrived_switched,
 * arrived_woken, arrived_held; SHRINK-S1 - SHRINK-S4), src/task/task.cpp (arrive,
 * arrive_switched, try_hold, drop_hold), src/runtime/runtime_core.hpp
 * (hooks::after_park), src/runtime/shrink.cpp (sweep, shrink_task,
 * restore_task; the shrink table: max_span, bucket, lock_bucket,
 * unlock_bucket, link, unlink, find, put_back, shrink_fault; SHRINK-P1 -
 * SHRINK-P5), src/fiber/safety.cpp (on_fault, which asks shrink_fault()),
 * src/runtime/worker.cpp (run_task: the restore before the switch in).
 *
 * One task makes NWAITS waits in a row. For each, a waker ends the wait
 * (try_end, which the task_wait.pml model checks; here one step) and
 * arrives. The task parks: its state is waiting, it is switched out, and
 * the scheduler's hook arrives. A shrinker, at any moment, tries NSHRINKS
 * times to take the hold, and if it gets it shrinks the task (unless it
 * is shrunk already), then drops the hold. The worker that resumes the
 * task restores it first; the task then reads its stack.
 *
 * The stack is one word (`mem`) of one range [lo, hi): its protection
 * (`prot`: read-write, read-only, none), its contents (released pages read
 * as 0; every value written is non-zero), and the range's saved block in
 * the shrink table: its block_head (linked in its bucket's chain or not;
 * state idle, shrunk or restored) and the saved word. One bucket, whose
 * lock `lk` holds its holder's thread id (SHRINK-P4). Threads: the
 * shrinker (TID_S), the resuming worker (TID_O, which the task then runs
 * on), and NF foreign threads (any thread that holds a pointer to one of
 * the task's locals): F1 reads the word, then writes 2; F2 writes 3. Each
 * access comes at any moment: the task parked, being shrunk, shrunk,
 * being restored, or running. Two configurations: F1 alone with three
 * shrinks; F1 and F2 (two handlers at once) with two.
 *
 * A foreign access checks the protection and is made in one step (the
 * hardware): allowed (read-write; read-only for a read), it reads or
 * writes memory; otherwise it faults, and on_fault() runs shrink_fault()
 * on the same thread. shrink_fault(): max_span (0 or too small: not
 * weft's); the fast path, two loads (an unlocked bucket with an empty
 * chain holds no range); else lock_bucket(), find(): state shrunk,
 * put_back() (the saved word back, read-write, state restored); idle or
 * restored, nothing; unlock_bucket(); the access is made again.
 * No range found: SHRINK-P3's retry, once per unlink generation
 * (`unlinks`, and the thread-local last fault: `seen`, `seen_gen`); a
 * second fault with no unlink in between is not weft's.
 *
 * shrink_task(), under the hold, if the task is not shrunk: max_span
 * raised to cover the range (before any protection: see
 * BUG_SPAN_AFTER_PROTECT); lock_bucket(); protect(PROT_READ) (may be
 * refused: nothing changed, SHRINK-P5); save_chunks() (may find no
 * memory: protect RW again and count an unlink, so that a write that
 * faulted meanwhile is made again) and link() in state idle;
 * protect(PROT_NONE), then madvise() and state shrunk; or PROT_NONE
 * refused: protect RW, the block stays linked in state idle (a write that
 * faulted in the read-only window finds it); either way t->shrunk
 * (a->saved), so that the restore unlinks it; unlock_bucket().
 * restore_task() (TID_O, before the switch in, if t->shrunk):
 * lock_bucket(); state shrunk: put_back(); unlink() (which counts);
 * unlock_bucket(); free the block.
 *
 * put_back() writes the saved word while the range is still PROT_NONE
 * (through /proc/self/mem), then makes it read-write: no other thread
 * sees the range accessible and still zero (BUG_FILL_AFTER_UNPROTECT is
 * the other order).
 *
 * What other parties touch only under the bucket's lock (the chain, a
 * block_head's state, `unlinks`' increments) shares a step with a
 * neighbouring access of the holder. The protection and the word are
 * touched without the lock (foreign accesses, the task), a block is freed
 * without it, and a handler reads `unlinks`, `lk` and the chain's head
 * without it (its fast path): steps of their own. max_span's load shares
 * a step with the fast path's load of `lk`: it only grows, and a handler
 * runs only after a fault, which comes after the protection, which (in
 * this model) comes after max_span was raised.
 *
 * pan.c is compiled with -O0 (the `pan:` line, after the script's -O2):
 * thirteen seeded bugs make sixteen compilations, which take longer than
 * the searches at -O2, and -O0 compiles in a fifth of the time.
 *
 * Properties:
 *   - SHRINK-S2: the shrinker holds only a task that is switched out;
 *   - SHRINK-S3: the task is never resumed while held, nor while it is
 *     being shrunk, and never runs on a released or protected stack;
 *   - TASK-R1: the task is queued exactly once per wait, and only after both
 *     arrivals;
 *   - no lost wake-up: in a state where nothing can move, the task is not
 *     parked with its wait ended (monitor, at `timeout`);
 *   - no lost write (SHRINK-P1, SHRINK-P2): the task reads the last value
 *     written (`val`, a ghost: the original 1 or a foreign thread's);
 *   - no wrong read (SHRINK-P1): a foreign read returns `val`, never the 0
 *     of a released page;
 *   - SHRINK-P2, SHRINK-P3: a fault in the range never ends as "not
 *     weft's" (the task is alive all along), and a handler that finds the
 *     range not shrunk returns to an access that now succeeds (no fault
 *     loop);
 *   - SHRINK-P3: a block is read (find() reads its head, put_back() its
 *     words) only while it is allocated, it is freed exactly once, and
 *     none is left at the end;
 *   - SHRINK-P4: a handler never waits for the lock held by its own
 *     thread (unreachable here: no signal interrupts the shrinker's or the
 *     restorer's thread, so the assertion stays unproved by a seeded bug);
 *     no deadlock (Spin's invalid end states), and at the end the lock is
 *     free, nothing is linked, the range is read-write and holds `val`.
 * Left out: SHRINK-P5's restore_run() (the owner's protect RW refused),
 * the kernel's own accesses (a system call handed a pointer into the range
 * fails with EFAULT), signals on the shrinker's or restorer's thread, more
 * ranges in a bucket.
 */

#ifndef NWAITS
#define NWAITS 2
#endif
#ifndef NSHRINKS
#define NSHRINKS 3
#endif
#ifndef NF
#define NF 1
#endif

#define SWITCHED 1
#define WOKEN    2
#define HELD     4

/* thread ids, as bucket::lock holds them (SHRINK-P4) */
#define TID_S  1
#define TID_O  2
#define TID_F1 3
#define TID_F2 4

/* the range's protection */
#define P_RW   0
#define P_R    1
#define P_NONE 2

/* a block_head's state (st_idle, st_shrunk, st_restored) */
#define ST_IDLE     0
#define ST_SHRUNK   1
#define ST_RESTORED 2

/* a block's life (ghost) */
#define B_NONE  0
#define B_VALID 1
#define B_FREED 2

byte arrivals = 0;       /* task_record::arrivals */
bool shrunk = false;     /* task_record::shrunk: a block saved and linked (a->saved) */

/* the stack's range */
byte mem = 1;            /* the word, as memory holds it (0: a released page) */
byte prot = P_RW;        /* its protection */
/* the shrink table: one bucket, one block at a time */
bool spanned = false;    /* max_span covers the range */
byte lk = 0;             /* bucket::lock: 0, or the holder's thread id */
bool linked = false;     /* the block is in the bucket's chain */
byte est = ST_IDLE;      /* its block_head's state */
byte blk = 0;            /* which block: the shrink attempt that saved it */
byte bval = 0;           /* the word saved in it */
byte unlinks = 0;        /* SHRINK-P3's generation */

/* ghosts */
byte val = 1;            /* the word's logical value: the last one written */
byte bst[NSHRINKS + 1];  /* each block's life (B_NONE, B_VALID, B_FREED) */
byte cur = 0;            /* the current wait */
bool armed = false;      /* the current wait is armed and not ended */
bool ended = false;      /* the current wait has ended */
bool switched_out = false;
bool parked = false;     /* in park(): from the state change to the resume */
bool copying = false;    /* the shrinker is shrinking (under the bucket's lock) */
byte queued = 0;
byte queued_n[NWAITS + 1];
bool woke_n[NWAITS + 1];

inline ready()
{
    d_step {
        assert(switched_out && ended);  /* TASK-R1: only after both arrivals */
        queued++;
        queued_n[cur]++;
        assert(queued_n[cur] == 1)      /* TASK-R1: once per wait */
    }
}

/* put_back(): the saved word v goes into the range while it is still
 * inaccessible (write_words(), through /proc/self/mem), then the range is
 * made read-write (protect RW) and, if rs, the state restored. Under the
 * bucket's lock. */
inline put_back(v, rs)
{
#ifdef BUG_FILL_AFTER_UNPROTECT
    prot = P_RW;
    d_step { mem = v; if :: rs -> est = ST_RESTORED :: else fi }
#else
    mem = v;
    d_step { prot = P_RW; if :: rs -> est = ST_RESTORED :: else fi }
#endif
}

/* unlock_bucket() in the handler; its locals back to 0. */
inline unlock_h()
{
    d_step {
#ifndef BUG_HANDLER_NO_LOCK
        lk = 0;
#endif
        found = false; st = 0; v = 0
    }
}

/* SHRINK-P3: no linked range. The access is made again once per unlink
 * generation; a second fault with no unlink in between is not weft's (the
 * process dies). */
inline not_found()
{
#ifdef BUG_NO_RETRY
    assert(false)
#else
    d_step {
        assert(!(seen && seen_gen == unlinks));   /* SHRINK-P2, SHRINK-P3 */
        seen = true;
        seen_gen = unlinks
    }
#endif
}

/* shrink_fault(): on_fault()'s hook, on the faulting thread `me`; the
 * access is then made again. */
inline shrink_fault(me)
{
    d_step {
        assert(spanned);                  /* max_span 0 or too small: not weft's */
        fast = (lk == 0)
    };
    if
    :: d_step { fast && !linked -> fast = false }   /* unlocked, empty chain: no range */
        ; not_found()
    :: else ->
#ifndef BUG_HANDLER_NO_LOCK
        assert(lk != me);                 /* SHRINK-P4 */
        atomic {                          /* lock_bucket(), find() */
            lk == 0 -> lk = me;
#else
        d_step {                          /* find() */
#endif
            fast = false;
            found = linked;
            if
            :: found -> assert(bst[blk] == B_VALID); st = est   /* SHRINK-P3 */
            :: else
            fi
        };
        if
#ifdef BUG_HANDLER_IGNORES_STATE
        :: found && st != ST_IDLE ->
#else
        :: found && st == ST_SHRUNK ->
#endif
            d_step { assert(bst[blk] == B_VALID); v = bval };   /* SHRINK-P3 */
#ifdef BUG_HANDLER_NOT_RESTORED
            put_back(v, false);
#else
            put_back(v, true);
#endif
            unlock_h()
#ifdef BUG_HANDLER_IGNORES_STATE
        :: found && st == ST_IDLE ->
#else
        :: found && st != ST_SHRUNK ->
#endif
            assert(prot == P_RW);         /* SHRINK-P2: the access made again succeeds */
            unlock_h()
        :: else ->
            unlock_h();
            not_found()
        fi
    fi
}

/* A foreign thread's access to the word: a read (wr false) or a write of
 * wv, made again after each fault until it succeeds. */
inline foreign_access(me, wr, wv)
{
    do
    :: d_step { wr && prot == P_RW -> mem = wv; val = wv }; break
    :: d_step { !wr && prot != P_NONE -> assert(mem == val) }; break   /* no wrong read */
    :: d_step { (wr && prot != P_RW) || (!wr && prot == P_NONE) -> skip };   /* SIGSEGV */
        shrink_fault(me)
    od
}

active proctype foreign1()
{
    bool found, fast, seen;
    byte st, v, seen_gen;
    foreign_access(TID_F1, false, 0);
    foreign_access(TID_F1, true, 2)
}

#if NF >= 2
active proctype foreign2()
{
    bool found, fast, seen;
    byte st, v, seen_gen;
    foreign_access(TID_F2, true, 3)
}
#endif

/* restore_task(), on the resuming worker (TID_O), before the switch in. */
inline restore_task()
{
    atomic {                              /* lock_bucket() */
        lk == 0 -> lk = TID_O;
        assert(linked && bst[blk] == B_VALID);
        os = est
    };
    if
    :: os == ST_SHRUNK ->
        d_step { assert(bst[blk] == B_VALID); ov = bval };
        put_back(ov, true)
    :: else
    fi;
#ifdef BUG_FREE_BEFORE_UNLINK
    lk = 0;
    d_step { assert(bst[blk] == B_VALID); bst[blk] = B_FREED };
    atomic { lk == 0 -> lk = TID_O };
    d_step { linked = false; unlinks++; lk = 0 };
    d_step { shrunk = false; os = 0; ov = 0 }
#else
    d_step { linked = false; unlinks++; lk = 0 };   /* unlink(), unlock_bucket() */
    d_step {                                        /* free the block */
        assert(bst[blk] == B_VALID);
        bst[blk] = B_FREED;
        shrunk = false;
        os = 0;
        ov = 0
    }
#endif
}

active proctype task()
{
    byte k, a, os, ov;
    for (k : 1 .. NWAITS) {
        /* arm(): a fresh wait the waker may end */
        d_step { cur = k; ended = false; armed = true };
        /* park(): set_state(waiting), switch_out() */
        parked = true;
        /* the context is saved; hooks::after_park: arrive_switched() */
        switched_out = true;
        d_step { a = arrivals; arrivals = arrivals | SWITCHED };
        if
        :: (a & WOKEN) -> arrivals = 0; ready()
        :: else
        fi;
        /* a worker takes it from its queue: run_task() restores a shrunk
         * task, then switches in */
        atomic {
            queued > 0 ->
            queued--;
            assert((arrivals & HELD) == 0 && !copying)    /* SHRINK-S3 */
        };
        if
        :: shrunk -> restore_task()
        :: else
        fi;
        /* the switch in; the task runs on its stack and reads the word */
        d_step {
            switched_out = false;
            assert(!shrunk && !copying && prot == P_RW);  /* SHRINK-S3 */
            assert(mem == val);                           /* no lost write */
            assert(ended);                                /* TASK-W3 */
            parked = false
        }
    }
}

/* The waker of each wait: try_end() then arrive(). */
active proctype waker()
{
    byte k, a;
    for (k : 1 .. NWAITS) {
        atomic { armed && cur == k -> armed = false; ended = true };
        woke_n[k] = true;
        d_step { a = arrivals; arrivals = arrivals | WOKEN };
#ifdef BUG_WAKER_IGNORES_HOLD
        if
        :: (a & SWITCHED) -> arrivals = 0; ready()
        :: else
        fi
#else
        if
        :: a == SWITCHED -> arrivals = 0; ready()   /* SHRINK-S1, SHRINK-S3 */
        :: else
        fi
#endif
    }
}

/* A worker's sweep: shrink_task() on the task, NSHRINKS times at any moment. */
active proctype shrinker()
{
    byte n, a;
    bool held, saved;
    for (n : 1 .. NSHRINKS) {
        /* try_hold(): CAS from exactly SWITCHED (SHRINK-S2) */
        d_step {
#ifdef BUG_HOLD_ANY
            if
            :: (arrivals & SWITCHED) && !(arrivals & HELD) -> arrivals = arrivals | HELD; held = true
            :: else -> held = false
            fi
#else
            if
            :: arrivals == SWITCHED -> arrivals = SWITCHED | HELD; held = true
            :: else -> held = false
            fi
#endif
        };
        if
        :: held ->
            assert(switched_out);        /* SHRINK-S2 */
            if
            :: !shrunk ->
                atomic {                 /* max_span raised; lock_bucket() */
                    lk == 0 -> lk = TID_S;
#ifndef BUG_SPAN_AFTER_PROTECT
                    spanned = true;
#endif
                    assert(!linked);
                    copying = true
                };
#ifdef BUG_SAVE_BEFORE_PROTECT
                d_step { bval = mem; bst[n] = B_VALID; blk = n };
#endif
                if
                :: prot = P_R;           /* protect(PROT_READ) */
                    if
                    :: d_step {          /* save_chunks(), link(): state idle */
#ifndef BUG_SAVE_BEFORE_PROTECT
                           bval = mem; bst[n] = B_VALID; blk = n;
#endif
                           linked = true; est = ST_IDLE; saved = true
                       }
                    :: d_step {          /* save_chunks() found no memory: protect RW, count an unlink */
                           prot = P_RW;
                           unlinks++;
#ifdef BUG_SAVE_BEFORE_PROTECT
                           bst[n] = B_FREED;
#endif
                           saved = false
                       }
                    fi;
                    if
                    :: saved ->
#ifdef BUG_SPAN_AFTER_PROTECT
                        spanned = true;  /* max_span raised after the link */
#endif
#ifdef BUG_RELEASE_BEFORE_NONE
                        mem = 0;         /* madvise() first */
#endif
                        if
                        :: prot = P_NONE;   /* protect(PROT_NONE) */
#ifdef BUG_RELEASE_BEFORE_NONE
                            d_step { est = ST_SHRUNK; shrunk = true }
#else
                            d_step { mem = 0; est = ST_SHRUNK; shrunk = true }   /* madvise(), state shrunk */
#endif
                        :: prot = P_RW;     /* refused: protect RW; the block stays linked, idle */
#ifdef BUG_REFUSED_UNLINK_UNCOUNTED
                            d_step { linked = false; bst[n] = B_FREED }
#else
                            shrunk = true
#endif
                        fi
                    :: else
                    fi
                :: skip                  /* protect(PROT_READ) refused: nothing changed (SHRINK-P5) */
#ifdef BUG_SAVE_BEFORE_PROTECT
                    ; d_step { bst[n] = B_FREED }
#endif
                fi;
                d_step { lk = 0; copying = false; saved = false };   /* unlock_bucket() */
                assert(switched_out)     /* SHRINK-S3: still not resumed */
            :: else
            fi;
            /* drop_hold(): fetch_and(~HELD), queue if the waker came (SHRINK-S4) */
            d_step { a = arrivals; arrivals = arrivals & ~HELD };
#ifndef BUG_DROP_NO_QUEUE
            if
            :: (a & WOKEN) -> arrivals = 0; ready()
            :: else
            fi
#endif
        :: else
        fi
    }
}

/* No lost wake-up: when nothing can move, the task is not parked with its
 * wait ended (and nothing is queued but not run). Every block was freed,
 * and the range is whole. */
active proctype monitor()
{
    byte i;
    timeout ->
        assert(!(parked && ended));
        assert(queued == 0);
        d_step {
            for (i : 1 .. NSHRINKS) { assert(bst[i] != B_VALID) };
            assert(lk == 0 && !linked && !shrunk && prot == P_RW && mem == val)
        }
}
