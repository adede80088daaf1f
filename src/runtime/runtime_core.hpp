// runtime_core.hpp: layer L4, internal: the scheduler's shared
// definitions: runtime_core (workers, their queues, sleep, timers, the
// registry, the blocking pool, stopping), a worker, the after-switch hooks.
// The code is in this folder, one file a concern:
//   runtime.cpp    construction, the choice of a task's stack, the entry
//                  points the public headers call, weft::runtime
//   worker.cpp     the queues (SCHED-Q1, SCHED-Q2) and running tasks: a worker's loop,
//                  hand-off, a task's first run and its end, run_once()
//   stackless.cpp  running a task without a fiber of its own (TASK-SB1 - TASK-SB4)
//   sleeping.cpp   sleeping and waking workers, the watcher, IO polling
//                  (SCHED-P1, SCHED-T2, SCHED-I1, SCHED-I2)
//   timers.cpp     the timer wheels (SCHED-T1 - SCHED-T3)
//   callback_timer.cpp  weft::timer, a callback node in the wheels (TIMER-C1 - TIMER-C4)
//   spawn.cpp      spawning, the registry, statistics, unhandled exceptions
//   stop.cpp       stopping
//   blocking.cpp   the blocking pool
// The task stacks' allocators are in src/stack/task_stacks.hpp (L1).
//
// docs/runtime.md is the design; the invariants are repeated here, and the
// code that keeps them names them:
//   SCHED-Q1  a task is in at most one queue (LIFO slot, deque, pinned FIFO, inbox,
//             injection queue, a run_once batch) and only while it is ready;
//   SCHED-Q2  a pinned task is only ever in its home worker's LIFO slot, pinned
//             FIFO or inbox: never in a deque (thieves take from deques only);
//   SCHED-Q3  in a runtime with one worker (workers = 0 or 1) nothing steals
//             from the worker's deque (steal() needs two workers, run_once()
//             drains it on the driving thread) and no other worker can sleep
//             while it runs: its deque takes the solo forms (DEQUE-I6), and a
//             push wakes nobody (SCHED-P1 holds: the pusher is the one worker,
//             awake, and looks at its queues again before it sleeps);
//   SCHED-P1  no lost wake-up: after a task is published to a queue that other
//             workers may take from, either some worker looks at the queues later
//             than the publication, or a sleeping worker is woken (see notify_one()
//             and sleep());
//   SCHED-T1  a timer node is in a timer wheel only while its task is alive: the
//             task takes its nodes out before it can end (remove_timer() finds the
//             wheel through the node, whichever worker it runs on; finish_task()
//             takes out a wait's node left there, TIMER-L1); a firing wait timeout
//             ends the wait under the wheel's lock and queues the task after it
//             (the task cannot run before that), and a firing task deadline takes
//             a reference under the lock (fire_shard());
//   SCHED-T2  while any worker sleeps and a timer exists, one sleeping worker
//             (the watcher) sleeps no later than the earliest timer over all the
//             wheels: it publishes that time (watch_until) and reads the wheels
//             again, under idle_mu (INT64_MAX while the watcher has published
//             nothing: wake_sleeper_locked() resets it when the watcher changes);
//             add_timer() publishes its wheel's earliest time and then reads
//             watch_until, and wakes the watcher when it is earlier (see
//             watch_wait_ns() and add_timer()).
//   SCHED-T3  a timer fires at or after its deadline, never before: the wheel
//             rounds deadlines up to its tick and hands out only nodes with
//             when <= now (src/runtime/timer_wheel.hpp, TIMER-E1); a worker's loop fires
//             its own and the shared wheel, and any other wheel whose lock is free,
//             so a worker stuck in a long task does not hold up its timers while
//             another worker runs its loop or the watcher wakes (docs/timers.md).
//   SCHED-T4  a worker that hands off from task to task (switch_out()) stops
//             handing off for the loop to fire timers once a timer is due by the
//             coarse stamp of the running task's start, or by the precise clock,
//             read at every 8th tick of the worker (handoff_timers_due()): a due
//             timer waits at most 8 task runs of a hand-off chain (Tokio's
//             scheduler looks at its timers every 61), and a hand-off reads the
//             clock once in 8; the loop reads the precise clock at every pass and
//             fires with that reading (due_now(), fire_timers(w, now)).
//   SCHED-I1  once the runtime has a poller (L6, docs/io.md), the watcher of SCHED-T2
//             waits in poller::poll() instead of on its futex word, and
//             everything that wakes a sleeping worker (notify_one(), wake(), a new
//             watcher, add_timer()) also interrupts the poll when the worker is
//             polling: the worker sets `polling` under idle_mu after reading its
//             futex word there, and a waker stores the word and reads `polling`
//             under idle_mu, so either the worker sees the store and does not
//             wait, or the waker sees `polling` and interrupts (the interrupt
//             stays pending until a poll sees it);
//   SCHED-I2  one thread at a time polls (poll_mu), and nobody waits for the
//             lock: a running worker tries it every io_interval loop iterations
//             and before it sleeps, so readiness is seen while every worker is
//             busy (Go's findrunnable polls the same way); the watcher tries it
//             and, when it is taken, naps on its futex word for at most 1 ms and
//             looks again (the holder is a poll(0), or a replaced watcher being
//             interrupted: nobody else polls with a timeout).
//   SCHED-I3  when the poller is per_worker() (io_uring worker rings), every
//             sleeping worker waits in poller::poll_worker(own index) and never
//             on its futex word: it reads the word (1: leave) and then waits,
//             and kick() calls wake_worker(index) (and no futex wake) after the
//             waker's store of the word (under idle_mu); the ring's wait is URING-O4's Dekker pair, so either the
//             wait sees the kick and does not block or the kick sees the worker
//             waiting and writes its eventfd. The watcher that holds poll_mu
//             passes `watch`, and its ring also waits for the shared poller's fd;
//             one that does not naps in its ring for at most 1 ms. A worker
//             that read no poller yet sleeps on its futex word: it registered as
//             sleeping before that read, so runtime_poller(), which publishes the
//             poller and then wakes every sleeper (word 1 and a futex wake),
//             reaches it, and every later sleep of it finds the poller.
//             runtime_poller() also interrupts every ring: a worker that read
//             its word (0) before a waker stored 1, and the poller after it was
//             published, would otherwise block in its ring while that waker,
//             having read no poller, woke only the futex, and wake_sleeper()
//             found the worker no longer sleeping (models/worker_rings.pml
//             found this; BUG_NO_PUBLISH_RING there).

#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "weft/detail/intrusive_list.hpp"
#include "weft/detail/support.hpp"
#include "weft/runtime.hpp"
#include "weft/waiter.hpp"

#include "../stack/task_stacks.hpp"
#include "observe.hpp"
#include "poller.hpp"
#include "shrink.hpp"
#include "timer_wheel.hpp"
#include "work_deque.hpp"

namespace weft::detail {

void set_current_task(task_record* t) noexcept;  // task.cpp
struct timer_block;  // weft/timer.hpp

struct worker;
// this_worker() is the worker this thread is (or drives), or null;
// set_this_worker() sets it (worker.cpp).
worker* this_worker() noexcept;
void set_this_worker(worker* w) noexcept;

// task_fifo is an intrusive FIFO through task_record::next
// (detail::intrusive_fifo, LIST-IL1 - LIST-IL3) that counts its tasks.
struct task_fifo {
    intrusive_fifo<task_record, fifo_link<task_record, &task_record::next>> q;
    std::size_t size = 0;
    [[nodiscard]] bool empty() const noexcept { return q.empty(); }
    void push(task_record* t) noexcept {
        q.push_back(t);
        ++size;
    }
    task_record* pop() noexcept {
        task_record* t = q.pop_front();
        if (t) --size;
        return t;
    }
    void append(task_fifo& o) noexcept {
        q.append(o.q);
        size += o.size;
        o.size = 0;
    }
};

// worker is one worker's state: one per worker thread, or one for a
// runtime without threads (its driver's).
struct alignas(64) worker {
    runtime_core* rt = nullptr;
    unsigned index = 0;
    work_deque<task_record> deque;
    // Owner-only state.
    task_record* lifo = nullptr;
    unsigned lifo_streak = 0;
    bool fifo_next = false;    // after a yield: take the deque's oldest task
    bool solo = false;         // the runtime's only worker (SCHED-Q3), set once at start
    // oldest() / newest() take from the deque as its owner (SCHED-Q3).
    task_record* oldest() noexcept { return solo ? deque.steal_solo() : deque.steal(); }
    task_record* newest() noexcept { return solo ? deque.pop_solo() : deque.pop(); }
    bool searching = false;
    bool switched = false;     // set by the after-switch hooks: the task left by suspending
    bool batch = false;        // run_once() is running a batch: no hand-offs
    task_record* stash = nullptr;  // taken for a hand-off that could not be made: runs next
    task_fifo pinned;          // ready pinned tasks (SCHED-Q2)
    unsigned tick = 0;
    std::uint64_t rng = 0;
    std::int64_t now = 0;  // coarse clock, read once per task run (state stamps)
    // Pinned tasks made ready by other threads.
    std::mutex inbox_mu;
    task_fifo inbox;
    std::atomic<bool> inbox_nonempty{false};
    // Sleeping: 0 = may sleep, 1 = woken.
    std::atomic<std::uint32_t> futex{0};
    bool sleeping = false;  // guarded by runtime_core::idle_mu
    // polling: the worker is (about to be) inside poller::poll() with a
    // timeout, as the watcher (SCHED-I1); guarded by runtime_core::idle_mu.
    bool polling = false;
    unsigned io_tick = 0;  // loop iterations since the last IO poll
    // Idle-stack shrinking's part: candidates and fiber rooms (shrink.hpp).
    worker_shrink shrink;
    // Copy-stack tasks pinned here run on these stacks.
    std::once_flag shared_once;
    std::unique_ptr<shared_stack_pool> shared;
    // Counters, the running task, the trace (observe.hpp, OBSERVE-O1 - OBSERVE-O3).
    worker_view view;

    [[nodiscard]] task_record* current() const noexcept { return view.current.load(std::memory_order_relaxed); }
    void set_current(task_record* t) noexcept { view.current.store(t, std::memory_order_relaxed); }

    std::uint64_t next_random() noexcept {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return rng;
    }
};

class runtime_core final : public scheduler_base {
public:
    explicit runtime_core(const runtime_options& o);
    ~runtime_core();

    // scheduler_base
    void ready(task_record* t) noexcept override;
    void switch_out(task_record* t, bool yield) override;
    void add_timer(timer_node* n, std::chrono::steady_clock::time_point when, std::uint64_t word) override;
    void remove_timer(timer_node* n) noexcept override;
    // weft::timer (callback_timer.cpp, TIMER-C1 - TIMER-C4).
    bool arm_callback(timer_block* b, std::chrono::steady_clock::time_point when, std::int64_t period_ns);
    bool stop_callback(timer_block* b) noexcept;
    bool callback_pending(const timer_block* b) noexcept;
    void unhandled(task_record* t, std::exception_ptr e) noexcept override;
    // report_unhandled() hands e to runtime_options::unhandled, or without a
    // handler prints "weft: <who> failed: <what>" and "weft: <fix>; ..." and
    // ends the process with std::terminate() (spawn.cpp): a detached task's
    // failure, a weft::timer callback's.
    void report_unhandled(const task_info& info, std::exception_ptr e, const char* who, const char* fix) noexcept;
    void released() noexcept override {
        if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }

    bool submit(task_record* t, const spawn_options& o);
    fiber_record* make_fiber(worker* w, task_record* t);
    // take_room() / give_room(): a fiber room from / back to w's free list
    // (SCHED-R1). take_room() throws std::bad_alloc.
    static void* take_room(worker* w);
    static void give_room(worker* w, void* room) noexcept;
    // Idle tasks giving their stack back (shrink.cpp; docs/runtime.md).
    // shrink_after_ns: runtime_options::shrink_idle_after (0: off).
    std::int64_t shrink_after_ns = 0;
    void ask_sweep() noexcept;
    void maybe_sweep(worker* w, bool idle = false) noexcept;
    void sweep(worker* w, bool force, std::size_t batch) noexcept;
    // shrink_task()'s outcome: later: refused for the slab budget (SHRINK-P5), or
    // the task could not be held yet (still switching out): it stays listed.
    enum class shrink_result { no, yes, later };
    shrink_result shrink_task(worker* w, task_record* t) noexcept;
    static void restore_task(worker* w, task_record* t) noexcept;
    // release_stack_pages() gives back the pages of finished task f's stack
    // (SHRINK-R1, src/runtime/shrink.cpp).
    static void release_stack_pages(fiber_record* f) noexcept;
    std::int64_t shrink_wait_ns(worker* w) const noexcept;
    void drain_idle() noexcept;
    bool run_stackless(worker* w, task_record* t);
    void drive(task_record* root);
    std::size_t run_once();
    void stop();
    std::size_t drain_then_stop(std::chrono::steady_clock::time_point deadline);  // runtime::shutdown(), stop.cpp
    std::vector<task_info> tasks() const;
    void blocking(blocking_job& job);
    // earliest_timer() is the earliest next_due() over the wheels, in
    // steady_clock nanoseconds (INT64_MAX: no timer).
    std::int64_t earliest_timer(std::memory_order mo = std::memory_order_seq_cst) const noexcept;
    // earliest_deadline() is the earliest pending deadline over the wheels
    // rounded up to a tick (timer_wheel::earliest()), under each wheel's
    // lock; INT64_MAX: no timer. What next_timer_due() reports.
    std::int64_t earliest_deadline() const noexcept;

    runtime_options opts;
    unsigned nthreads;
    unsigned nworkers;
    std::vector<std::unique_ptr<worker>> ws;
    guarded_stacks guarded;
    std::atomic<std::int64_t> refs{1};  // the runtime object + one per task record
    std::atomic<std::int64_t> live{0};
    std::atomic<bool> stopping{false};
    // draining: shutdown() refuses spawns from outside the runtime's tasks
    // (check_spawn()) while the tasks that are left run to their end.
    std::atomic<bool> draining{false};
    std::atomic<bool> shutdown{false};
    std::atomic<std::uint32_t> stop_word{0};
    // stop_src: the runtime's stop token's source (runtime::get_stop_token()),
    // stopped as shutdown() or stop() begins, on that caller's thread and
    // under none of the runtime's locks: the callbacks it runs may be the
    // program's own.
    std::stop_source stop_src;
    bool stopped = false;
    std::mutex stop_mu;
    std::atomic<bool> driving{false};
    std::atomic<unsigned> round_robin{0};
    // Stacks: guarded ones from `guarded` up to guarded_budget at once, then
    // slab stacks (guarded_stack, slab_stack: src/stack/task_stacks.hpp).
    std::size_t guarded_budget = 0;
    slab_stacks slabs;

private:
    friend struct hooks;
    // Queues.
    void push_local(worker* w, task_record* t) noexcept;
    void push_inbox(worker* home, task_record* t) noexcept;
    void inject(task_record* t) noexcept;
    task_record* pop_injection(worker* w) noexcept;
    task_record* local_next(worker* w) noexcept;
    task_record* steal(worker* w) noexcept;
    task_record* find_work(worker* w) noexcept;
    bool has_work(worker* w) noexcept;
    // Sleeping.
    void notify_one() noexcept;
    void wake(worker* w) noexcept;
    worker* wake_sleeper_locked(worker* w) noexcept;
    void sleep(worker* w) noexcept;
    void stop_searching(worker* w) noexcept;
    // Running.
    void loop(worker* w, task_record* until, bool until_empty);
    void run_task(worker* w, task_record* t);
    // Always inlined: out of line (gcc made one copy for its three callers)
    // the call cost 12 instructions per switch, two thirds of what the
    // bookkeeping added (callgrind, r3).
    [[gnu::always_inline]] inline void begin_run(worker* w, task_record* t) noexcept;
    void finish_task(worker* w, task_record* t) noexcept;
    // Timers (SCHED-T1 - SCHED-T3).
    struct timer_shard;
    void fire_timers(worker* w, std::int64_t now) noexcept;
    std::size_t fire_shard(worker* w, timer_shard& s, std::int64_t now, bool wait) noexcept;
    // note_due() is add_timer()'s second half (SCHED-T2): a wheel's next_due()
    // moved earlier, to `due`; wake the watcher if it sleeps past it.
    void note_due(std::int64_t due) noexcept;
    // expired_callback() is fire_shard()'s step for a callback node taken out
    // of s under its lock: true if the firing worker is to run it (it then
    // holds a reference to b and its snapshot in `snap`).
    bool expired_callback(timer_shard& s, timer_block* b, std::chrono::steady_clock::time_point now,
                          std::uint64_t& snap) noexcept;
    void run_callback(timer_shard& s, timer_block* b, std::uint64_t snap) noexcept;
    // due_now() is the clock's reading when a timer is due, for
    // fire_timers(w, due_now()); 0 when none is (the clock is read only when
    // a timer exists).
    std::int64_t due_now() const noexcept {
        const std::int64_t next = earliest_timer(std::memory_order_relaxed);
        if (next == INT64_MAX) return 0;
        const std::int64_t now = steady_now_ns();
        return next <= now ? now : 0;
    }
    // handoff_timers_due() is switch_out()'s question before a hand-off
    // (SCHED-T4): whether the loop should run to fire timers. It compares the
    // earliest wheel time with the coarse stamp of this run's start first
    // (w->now, never later than the precise clock) and reads the precise
    // clock only at every handoff_clock_interval-th tick of the worker.
    static constexpr unsigned handoff_clock_interval = 8;
    bool handoff_timers_due(const worker* w) const noexcept {
        const std::int64_t next = earliest_timer(std::memory_order_relaxed);
        if (next == INT64_MAX) return false;
        if (next <= w->now) return true;
        if (w->tick % handoff_clock_interval != 0) return false;
        return next <= steady_now_ns();
    }
    std::int64_t watch_wait_ns() noexcept;
    void thread_main(worker* w);
    void blocking_main();
    // kick() ends w's sleep after its futex word was stored under idle_mu;
    // `polling` is w->polling read there (SCHED-I1).
    void kick(worker* w, bool polling) noexcept;

public:
    // wake_sleeper() wakes w if it sleeps (its loop looks again).
    void wake_sleeper(worker* w) noexcept {
        {
            std::lock_guard g(idle_mu);
            if (!w->sleeping) return;
        }
        wake(w);
    }

private:
    // poll_now() polls for IO without waiting if no other thread polls (SCHED-I2);
    // true if it woke a waiter.
    bool poll_now(worker* w) noexcept;

public:
    // The poller (SCHED-I1, SCHED-I2), made on first use by runtime_poller().
    std::atomic<poller*> io{nullptr};
    std::mutex io_make_mu;
    std::unique_ptr<poller> io_owned;
    std::mutex poll_mu;

private:

    // The injection queue: spawns and wakes from threads that are not
    // workers of this runtime.
    std::mutex inj_mu;
    task_fifo inj;
    std::atomic<std::size_t> inj_len{0};
    // Sleeping workers.
    std::mutex idle_mu;
    std::vector<worker*> idle;
    std::atomic<int> n_sleeping{0};
    std::atomic<int> n_searching{0};
    worker* watcher = nullptr;  // guarded by idle_mu (SCHED-T2)
    // Timers (SCHED-T1 - SCHED-T3): one wheel per worker, and one (the last) for nodes
    // added by threads that are not workers of this runtime. A node stays
    // in the wheel it was added to (timer_node::owner) until it fires or is
    // removed, also when its task migrates.
    // Each wheel's lock is a spin_lock: it is held for a few instructions
    // (an insert, an erase) or one batch of expiry, and taken without
    // contention on the owner's path (its own worker adds, fires and mostly
    // removes); a std::mutex cost twice the instructions there.
    struct alignas(64) timer_shard {
        mutable spin_lock mu;
        timer_wheel wheel;  // guarded by mu
        // wheel.next_due(), stored under mu after every change (seq_cst, SCHED-T2)
        std::atomic<std::int64_t> next{INT64_MAX};
        explicit timer_shard(std::chrono::steady_clock::time_point start) noexcept : wheel(start) {}
    };
    std::vector<std::unique_ptr<timer_shard>> timer_shards;
    // The time the watcher sleeps until (SCHED-T2); written under idle_mu.
    std::atomic<std::int64_t> watch_until{INT64_MAX};
    // The registry: one shard per worker and one for other threads. The
    // shards are guarded by weft::spin_lock (weft/waiter.hpp): a spawn on one
    // worker and the end of the same task on another take the same shard,
    // and std::mutex would put a contended thread to sleep in the kernel,
    // which costs far more than the few instructions held here.
    struct shard {
        mutable spin_lock mu;
        intrusive_list<task_record, list_links<task_record, &task_record::reg_prev, &task_record::reg_next>, false>
            tasks;
    };
    std::unique_ptr<shard[]> shards;
    // The blocking pool.
    std::mutex bl_mu;
    std::condition_variable bl_cv;
    intrusive_fifo<blocking_job, fifo_link<blocking_job, &blocking_job::next>> bl_jobs;
    unsigned bl_threads = 0;
    unsigned bl_idle = 0;
    bool bl_stop = false;
    std::vector<std::thread> bl_pool;
    std::vector<std::thread> threads;

public:
    // Observation (observe.hpp): spawns from other threads, the trace (one
    // buffer per worker and the shared one, last), the watchdog.
    std::atomic<std::uint64_t> spawned_outside{0};
    std::string trace_path;  // written at stop (empty: not)
    std::vector<std::unique_ptr<trace_buffer>> traces;
    // The trace signal (runtime_options::trace_signal, OBSERVE-O5): 0 or the
    // signal this runtime is registered for, and the file it writes.
    int trace_sig = 0;
    std::string trace_sig_path;
    // write_live_trace() writes the rings of the running runtime to path
    // (runtime::write_trace()); false if there is no trace or no file.
    bool write_live_trace(const std::string& path) const;
    trace_buffer* outside_trace = nullptr;
    std::int64_t trace_origin = 0;
    std::unique_ptr<watchdog> dog;
    runtime_stats stats() const;
    // trace_outside() records an event of a thread that is not a worker.
    void trace_outside(trace_event::kind k, const task_record* t) noexcept {
        std::lock_guard g(outside_trace->mu);
        if (k == trace_event::spawn) outside_trace->name(t);
        outside_trace->instant(k, t->id);
    }
};

// push_local() queues t on w, the worker running this (SCHED-Q2: a pinned task
// goes to its pinned FIFO). Inline: spawns (spawn.cpp) and wakes
// (worker.cpp) go through it.
inline void runtime_core::push_local(worker* w, task_record* t) noexcept {
    if (t->pinned) {
        w->pinned.push(t);  // SCHED-Q2
        return;
    }
    if (w->solo) {  // SCHED-Q3
        w->deque.push_solo(t);
        return;
    }
    w->deque.push(t);
    notify_one();
}

// notify_one() is the publishers' side of SCHED-P1 (sleeping.cpp): after a task
// is published, wake a sleeping worker unless one is searching. Here, inline,
// so that its quick exit costs every queue push two loads.
inline void runtime_core::notify_one() noexcept {
    if (n_searching.load(std::memory_order_seq_cst) > 0) return;
    if (n_sleeping.load(std::memory_order_seq_cst) == 0) return;
    worker* w = nullptr;
    worker* told = nullptr;
    bool wp = false, tp = false;
    {
        std::lock_guard g(idle_mu);
        if (idle.empty()) return;
        // Leave the watcher asleep when another worker can go.
        w = idle.back();
        if (w == watcher && idle.size() > 1) w = idle[idle.size() - 2];
        told = wake_sleeper_locked(w);
        w->futex.store(1, std::memory_order_release);
        wp = w->polling;
        tp = told && told->polling;
    }
    kick(w, wp);
    if (told) kick(told, tp);
}

// earliest_timer(): inline, since due_now() reads it at every pass of a
// worker's loop and every hand-off.
inline std::int64_t runtime_core::earliest_timer(std::memory_order mo) const noexcept {
    std::int64_t e = INT64_MAX;
    for (const auto& s : timer_shards) e = std::min(e, s->next.load(mo));
    return e;
}

// begin_run() is the bookkeeping of a switch into t on w: the running task,
// its worker, state and stamp, and (OBSERVE-O2) the one store of the statistics
// and the scheduling delay's test (recorded only when a clock tick passed).
inline void runtime_core::begin_run(worker* w, task_record* t) noexcept {
    w->set_current(t);
    set_current_task(t);
    t->worker.store(static_cast<int>(w->index), std::memory_order_relaxed);
    const std::int64_t ready_since = t->state_since.load(std::memory_order_relaxed);
    w->now = coarse_now_ns();
    if (w->now > ready_since) [[unlikely]] w->view.delay.record(w->now - ready_since);  // OBSERVE-O2
    t->state.store(task_state::running, std::memory_order_release);
    t->state_since.store(w->now, std::memory_order_relaxed);
    w->view.switches.bump();
    if (w->view.trace) [[unlikely]] w->view.trace->begin_run(t);
}

// guard_check() aborts, naming the task, when the guard word below an
// unguarded fallback stack was overwritten (the task overflowed its stack).
// The check is inline (the after-switch hooks make it at every switch); the
// report is task_guard_broken() (worker.cpp).
[[noreturn]] void task_guard_broken(task_record* t) noexcept;
inline void guard_check(task_record* t) noexcept {
    fiber_record* f = t->fiber;
    if (f->guard_word && *f->guard_word != f->guard_value) [[unlikely]]
        task_guard_broken(t);
}

// The after-switch hooks run on the worker's thread once the task's
// context is saved: only then may another thread resume it.
//
// The worker is found through the task (it ran it last) rather than the
// thread-local: cheaper, and the same worker, since the hook runs where the
// task was running.
struct hooks {
    static worker* worker_of(task_record* t) noexcept {
        return static_cast<runtime_core*>(t->sched)->ws[static_cast<unsigned>(t->worker.load(std::memory_order_relaxed))].get();
    }
    // list_idle() makes a parked task that may be shrunk a candidate of
    // w's sweep (docs/runtime.md, "Finding idle tasks"), once: before the
    // arrival, after which the task may run and end elsewhere. Listed
    // already (perhaps on another worker), it marks the park instead
    // (SHRINK-L1, shrink.cpp): a sweep dropping the entry meanwhile keeps
    // it. A task parking often pays one CAS per sweep visit, not per park.
    static void list_idle(worker* w, task_record* t) noexcept {
        if (!t->shrink.shrinkable) return;
        std::uint8_t v = t->shrink.listed.load(std::memory_order_relaxed);
        for (;;) {
            if (v == 2) return;
            if (t->shrink.listed.compare_exchange_weak(v, v == 0 ? 1 : 2, std::memory_order_acq_rel,
                                                       std::memory_order_relaxed)) {
                if (v != 0) return;  // marked: its entry stays
                break;
            }
        }
        t->refs.fetch_add(1, std::memory_order_relaxed);
        w->shrink.fifo.push_back(t);
        ++w->shrink.count;
    }
    // left() is the worker's side of a task that suspended back to it
    // (after_park, after_yield): run_task() learns it from `switched`, and
    // the running-task slot is cleared before the hook publishes the task,
    // which may then run, end and be freed elsewhere while a watchdog sample
    // lands on this worker before run_task() returns (WATCHDOG-D4).
    static worker* left(task_record* t) noexcept {
        worker* w = worker_of(t);
        w->switched = true;
        w->set_current(nullptr);
        return w;
    }
    static void after_park(void* p) noexcept {
        auto* t = static_cast<task_record*>(p);
        guard_check(t);
        worker* w = left(t);
        list_idle(w, t);
        arrive_switched(t);  // TASK-R1, SHRINK-S1
    }
    // after_handoff_park / after_handoff_yield run on the side of the task that was
    // handed the worker (switch_to), once the leaving task is saved. They do
    // not set `switched`: the worker's resume() is still running a task.
    static void after_handoff_park(void* p) noexcept {
        auto* t = static_cast<task_record*>(p);
        guard_check(t);
        list_idle(worker_of(t), t);
        arrive_switched(t);  // TASK-R1, SHRINK-S1
    }
    static void after_handoff_yield(void* p) noexcept {
        auto* t = static_cast<task_record*>(p);
        guard_check(t);
        requeue(worker_of(t), t);
    }
    // requeue() puts a task that yielded back in its worker's queue. The
    // stamp is this run's start: the coarse clock ticks every few
    // milliseconds, far longer than a run between two yields.
    static void requeue(worker* w, task_record* t) noexcept {
        set_state_at(t, task_state::ready, w->now);
        if (t->pinned) {
            w->pinned.push(t);
        } else if (w->solo) {  // SCHED-Q3
            w->deque.push_solo(t);
            w->fifo_next = true;
        } else {
            w->deque.push(t);
            w->fifo_next = true;
            w->rt->notify_one();
        }
    }
    static void after_yield(void* p) noexcept {
        auto* t = static_cast<task_record*>(p);
        guard_check(t);
        requeue(left(t), t);
    }
};

// driver_guard marks the calling thread as the driver of a runtime without
// worker threads (one at a time).
struct driver_guard {
    runtime_core* c;
    worker* saved;
    explicit driver_guard(runtime_core* core) : c(core) {
        if (task_record* t = current_task()) task_misuse(t, task_errc::inside_task);
        bool expected = false;
        if (!c->driving.compare_exchange_strong(expected, true, std::memory_order_acquire))
            task_misuse(nullptr, task_errc::driver_busy);
        saved = this_worker();
        set_this_worker(c->ws[0].get());
        c->ws[0]->view.set_thread(true);
    }
    ~driver_guard() {
        c->ws[0]->view.set_thread(false);
        set_this_worker(saved);
        c->driving.store(false, std::memory_order_release);
    }
};

}  // namespace weft::detail
