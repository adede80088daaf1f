// runtime.cpp: layer L4, the scheduler: workers, their queues, parking,
// timers, the registry, the blocking pool, stopping.
//
// docs/runtime.md is the design; the invariants are repeated here where the
// code keeps them:
//   Q1  a task is in at most one queue (LIFO slot, deque, pinned FIFO, inbox,
//       injection queue, a run_once batch) and only while it is ready;
//   Q2  a pinned task is only ever in its home worker's LIFO slot, pinned
//       FIFO or inbox: never in a deque (thieves take from deques only);
//   P1  no lost wake-up: after a task is published to a queue that other
//       workers may take from, either some worker looks at the queues later
//       than the publication, or a parked worker is woken (see notify_one()
//       and park());
//   T1  a timer node is in a timer wheel only while its task is alive: the
//       task takes its nodes out before it can end (remove_timer() finds the
//       wheel through the node, whichever worker it runs on), and a firing
//       timer takes a reference under the wheel's lock;
//   T2  while any worker is parked and a timer exists, one parked worker
//       (the watcher) sleeps no later than the earliest timer over all the
//       wheels: it publishes that time (watch_until) and reads the wheels
//       again, under idle_mu (INT64_MAX while the watcher has published
//       nothing: unpark_locked() resets it when the watcher changes);
//       add_timer() publishes its wheel's earliest time and then reads
//       watch_until, and wakes the watcher when it is earlier (see
//       watch_wait_ns() and add_timer()).
//   T3  a timer fires at or after its deadline, never before: the wheel
//       rounds deadlines up to its tick and hands out only nodes with
//       when <= now (src/runtime/timer_wheel.hpp, E1); a worker's loop fires
//       its own and the shared wheel, and any other wheel whose lock is free,
//       so a worker stuck in a long task does not hold up its timers while
//       another worker runs its loop or the watcher wakes (docs/timers.md).
//   I1  once the runtime has a poller (L6, docs/io.md), the watcher of T2
//       waits in poller::poll() instead of on its futex word, and
//       everything that wakes a parked worker (notify_one(), wake(), a new
//       watcher, add_timer()) also interrupts the poll when the worker is
//       polling: the worker sets `polling` under idle_mu after reading its
//       futex word there, and a waker stores the word and reads `polling`
//       under idle_mu, so either the worker sees the store and does not
//       wait, or the waker sees `polling` and interrupts (the interrupt
//       stays pending until a poll sees it);
//   I2  one thread at a time polls (poll_mu), and nobody waits for the
//       lock: a running worker tries it every io_interval loop iterations
//       and before it parks, so readiness is seen while every worker is
//       busy (Go's findrunnable polls the same way); the watcher tries it
//       and, when it is taken, naps on its futex word for at most 1 ms and
//       looks again (the holder is a poll(0), or a replaced watcher being
//       interrupted: nobody else polls with a timeout).

#include "weft/runtime.hpp"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <coroutine>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <system_error>
#include <thread>

#include <sys/mman.h>

#include "weft/detail/support.hpp"
#include "timer_wheel.hpp"
#include "work_deque.hpp"
#include "weft/waiter.hpp"

#include "debug.hpp"
#include "observe.hpp"
#include "poller.hpp"
#include "../stack/task_stacks.hpp"

namespace weft::detail {

void set_current_task(task_record* t) noexcept;  // task.cpp

namespace {

std::atomic<std::uint64_t> next_task_id{1};

struct worker;
thread_local worker* this_thread_worker = nullptr;

// this_worker() is the worker this thread is (or drives), or null. Never
// inlined and hidden from the optimiser, like current_task().
[[gnu::noinline]] worker* this_worker() noexcept {
    worker** slot = &this_thread_worker;
    asm volatile("" : "+r"(slot));
    return *slot;
}
[[gnu::noinline]] void set_this_worker(worker* w) noexcept {
    worker** slot = &this_thread_worker;
    asm volatile("" : "+r"(slot));
    *slot = w;
}

// The registry's shards are guarded by weft::spin_lock (weft/waiter.hpp): a
// spawn on one worker and the end of the same task on another take the same
// shard, and std::mutex would put a contended thread to sleep in the kernel,
// which costs far more than the few instructions held here.

// task_fifo is an intrusive FIFO through task_record::next.
struct task_fifo {
    task_record* head = nullptr;
    task_record* tail = nullptr;
    std::size_t size = 0;
    void push(task_record* t) noexcept {
        t->next = nullptr;
        if (tail)
            tail->next = t;
        else
            head = t;
        tail = t;
        ++size;
    }
    task_record* pop() noexcept {
        task_record* t = head;
        if (!t) return nullptr;
        head = t->next;
        if (!head) tail = nullptr;
        t->next = nullptr;
        --size;
        return t;
    }
    void append(task_fifo& o) noexcept {
        if (!o.head) return;
        if (tail)
            tail->next = o.head;
        else
            head = o.head;
        tail = o.tail;
        size += o.size;
        o = task_fifo{};
    }
};

// Fairness constants (docs/runtime.md, "Queues"): every injection_interval
// ticks a worker looks at the injection queue first and takes its deque's
// oldest task; a task woken into the LIFO slot runs at most lifo_bound times
// in a row before the queue gets its turn.
constexpr unsigned injection_interval = 61;
constexpr unsigned lifo_bound = 3;
constexpr std::size_t injection_batch = 32;
// A worker whose queues never run dry polls for IO every io_interval
// iterations of its loop (I2).
constexpr unsigned io_interval = 61;

}  // namespace

class runtime_core;

namespace {

struct alignas(64) worker {
    runtime_core* rt = nullptr;
    unsigned index = 0;
    work_deque<task_record> deque;
    // Owner-only state.
    task_record* lifo = nullptr;
    unsigned lifo_streak = 0;
    bool fifo_next = false;    // after a yield: take the deque's oldest task
    bool searching = false;
    bool switched = false;     // set by the after-switch hooks: the task left by suspending
    bool batch = false;        // run_once() is running a batch: no hand-offs
    task_record* stash = nullptr;  // taken for a hand-off that could not be made: runs next
    task_fifo pinned;          // ready pinned tasks (Q2)
    unsigned tick = 0;
    std::uint64_t rng = 0;
    std::int64_t now = 0;  // coarse clock, read once per task run (state stamps)
    // Pinned tasks made ready by other threads.
    std::mutex inbox_mu;
    task_fifo inbox;
    std::atomic<bool> inbox_nonempty{false};
    // Parking: 0 = may sleep, 1 = woken.
    std::atomic<std::uint32_t> futex{0};
    bool parked = false;  // guarded by runtime_core::idle_mu
    // polling: the worker is (about to be) inside poller::poll() with a
    // timeout, as the watcher (I1); guarded by runtime_core::idle_mu.
    bool polling = false;
    unsigned io_tick = 0;  // loop iterations since the last IO poll
    // Copy-stack tasks pinned here run on these stacks.
    std::once_flag shared_once;
    std::unique_ptr<shared_stack_pool> shared;
    // Counters, the running task, the trace (observe.hpp, O1-O3).
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

}  // namespace

// task_body is every task's fiber body: the typed part is behind t->run.
struct task_body {
    task_record* t;
    void operator()() const { t->run(t); }
};

class runtime_core final : public scheduler_base {
public:
    explicit runtime_core(const runtime_options& o);
    ~runtime_core();

    // scheduler_base
    void ready(task_record* t) noexcept override;
    void switch_out(task_record* t, bool yield) override;
    void add_timer(timer_node* n) override;
    void remove_timer(timer_node* n) noexcept override;
    void unhandled(task_record* t, std::exception_ptr e) noexcept override;
    void released() noexcept override {
        if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }

    bool submit(task_record* t, const spawn_options& o);
    fiber_record* make_fiber(task_record* t);
    bool run_stackless(worker* w, task_record* t);
    void drive(task_record* root);
    std::size_t run_once();
    void stop();
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
    std::atomic<bool> shutdown{false};
    std::atomic<std::uint32_t> stop_word{0};
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
    // Parking.
    void notify_one() noexcept;
    void wake(worker* w) noexcept;
    worker* unpark_locked(worker* w) noexcept;
    void park(worker* w) noexcept;
    void stop_searching(worker* w) noexcept;
    // Running.
    void loop(worker* w, task_record* until, bool until_empty);
    void run_task(worker* w, task_record* t);
    // Always inlined: out of line (gcc made one copy for its three callers)
    // the call cost 12 instructions per switch, two thirds of what the
    // bookkeeping added (callgrind, r3).
    [[gnu::always_inline]] inline void begin_run(worker* w, task_record* t) noexcept;
    void finish_task(worker* w, task_record* t) noexcept;
    // Timers (T1-T3).
    struct timer_shard;
    void fire_timers(worker* w) noexcept;
    std::size_t fire_shard(worker* w, timer_shard& s, bool wait) noexcept;
    bool timers_due() const noexcept {
        const std::int64_t next = earliest_timer(std::memory_order_relaxed);
        return next != INT64_MAX && next <= steady_now_ns();
    }
    std::int64_t watch_wait_ns() noexcept;
    void thread_main(worker* w);
    void blocking_main();
    // kick() ends w's sleep after its futex word was stored under idle_mu;
    // `polling` is w->polling read there (I1).
    void kick(worker* w, bool polling) noexcept;

public:
    // wake_parked() wakes w if it is parked (its loop looks again).
    void wake_parked(worker* w) noexcept {
        {
            std::lock_guard g(idle_mu);
            if (!w->parked) return;
        }
        wake(w);
    }

private:
    // poll_now() polls for IO without waiting if no other thread polls (I2);
    // true if it woke a waiter.
    bool poll_now(worker* w) noexcept;

public:
    // The poller (I1, I2), made on first use by runtime_poller().
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
    // Parked workers.
    std::mutex idle_mu;
    std::vector<worker*> idle;
    std::atomic<int> n_parked{0};
    std::atomic<int> n_searching{0};
    worker* watcher = nullptr;  // guarded by idle_mu (T2)
    // Timers (T1-T3): one wheel per worker, and one (the last) for nodes
    // added by threads that are not workers of this runtime. A node stays
    // in the wheel it was added to (timer_node::owner) until it fires or is
    // removed, also when its task migrates.
    struct alignas(64) timer_shard {
        std::mutex mu;
        timer_wheel wheel;  // guarded by mu
        // wheel.next_due(), stored under mu after every change (seq_cst, T2)
        std::atomic<std::int64_t> next{INT64_MAX};
        explicit timer_shard(std::chrono::steady_clock::time_point start) noexcept : wheel(start) {}
    };
    std::vector<std::unique_ptr<timer_shard>> timer_shards;
    // The time the watcher sleeps until (T2); written under idle_mu.
    std::atomic<std::int64_t> watch_until{INT64_MAX};
    // The registry: one shard per worker and one for other threads.
    struct shard {
        mutable spin_lock mu;
        task_record* head = nullptr;
    };
    std::unique_ptr<shard[]> shards;
    // The blocking pool.
    std::mutex bl_mu;
    std::condition_variable bl_cv;
    blocking_job* bl_head = nullptr;
    blocking_job* bl_tail = nullptr;
    unsigned bl_threads = 0;
    unsigned bl_idle = 0;
    bool bl_stop = false;
    std::vector<std::thread> bl_pool;
    std::vector<std::thread> threads;

public:
    // Observation (observe.hpp): spawns from other threads, the trace (one
    // buffer per worker and the shared one, last), the watchdog.
    std::atomic<std::uint64_t> spawned_outside{0};
    std::string trace_path;
    std::vector<std::unique_ptr<trace_buffer>> traces;
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

namespace {

// guarded_stack_budget() is how many guarded stacks one runtime keeps at
// once: a quarter of vm.max_map_count (each costs two mappings), so that
// half the process's mappings stay free for everything else.
std::size_t guarded_stack_budget() noexcept {
    static const std::size_t budget = [] {
        std::size_t maps = 65530;
        if (std::FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
            unsigned long v = 0;
            if (std::fscanf(f, "%lu", &v) == 1 && v > 0) maps = v;
            std::fclose(f);
        }
        return std::max<std::size_t>(maps / 4, 256);
    }();
    return budget;
}

// The runtime's pool holds at most the budget of guarded stacks mapped,
// idle ones included: a stack a task freed on one worker waits in that
// worker's cache while another worker maps new ones, so counting only the
// stacks in use (guarded.live) let the mappings outgrow the budget and use
// up vm.max_map_count, and then the slab fallback could not map either
// (R7, a million sleeping tasks on two workers). At the limit the pool
// throws stack_pool_error (ENOMEM) and make_fiber() takes a slab stack.
// Without stack_fallback there is nothing to fall back to: the pool maps
// guarded stacks until the system refuses, as the option documents.
stack_pool_options pool_options(const runtime_options& o) {
    stack_pool_options p;
    p.stack_size = o.stack_size;
    if (o.stack_fallback) p.max_stacks = guarded_stack_budget();
    return p;
}

runtime_core* core_of(task_record* t) noexcept { return static_cast<runtime_core*>(t->sched); }

[[noreturn]] void bad_option(const std::string& what) {
    throw task_error(task_errc::bad_option, "weft: bad runtime option: " + what);
}

// guard_check() aborts, naming the task, when the guard word below an
// unguarded fallback stack was overwritten (the task overflowed its stack).
void guard_check(task_record* t) noexcept {
    fiber_record* f = t->fiber;
    if (f->guard_word && *f->guard_word != f->guard_value) [[unlikely]] {
        char buf[256];
        text_writer w(buf, sizeof buf);
        char name[160];
        format_named(name, sizeof name, "task", t->name, t);
        w.text("weft: ").text(name).text(" (id ").dec(t->id).text(
            ") overflowed its unguarded stack: the guard word below it was overwritten");
        fatal_message(w.c_str());
    }
}

}  // namespace

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
    static void park(void* p) noexcept {
        auto* t = static_cast<task_record*>(p);
        guard_check(t);
        worker_of(t)->switched = true;
        arrive(t);
    }
    // handoff_park / handoff_yield run on the side of the task that was
    // handed the worker (switch_to), once the leaving task is saved. They do
    // not set `switched`: the worker's resume() is still running a task.
    static void handoff_park(void* p) noexcept {
        auto* t = static_cast<task_record*>(p);
        guard_check(t);
        arrive(t);
    }
    static void handoff_yield(void* p) noexcept {
        auto* t = static_cast<task_record*>(p);
        guard_check(t);
        requeue(worker_of(t), t);
    }
    // requeue() puts a task that yielded back in its worker's queue. The
    // stamp is this run's start: the coarse clock ticks every few
    // milliseconds, far longer than a run between two yields.
    static void requeue(worker* w, task_record* t) noexcept {
        t->state.store(task_state::ready, std::memory_order_release);
        t->state_since.store(w->now, std::memory_order_relaxed);
        if (t->pinned) {
            w->pinned.push(t);
        } else {
            w->deque.push(t);
            w->fifo_next = true;
            w->rt->notify_one();
        }
    }
    static void yield(void* p) noexcept {
        auto* t = static_cast<task_record*>(p);
        guard_check(t);
        worker* w = worker_of(t);
        w->switched = true;
        requeue(w, t);
    }
};

runtime_core::runtime_core(const runtime_options& o)
    : opts(o), nthreads(o.workers), nworkers(o.workers ? o.workers : 1), guarded(pool_options(o)) {
    if (o.workers > 1024) bad_option("workers must be at most 1024");
    if (o.blocking_threads == 0) bad_option("blocking_threads must be at least 1");
    shards = std::make_unique<shard[]>(nworkers + 1);
    guarded_budget = guarded_stack_budget();
    // A slab slot is the stack plus its guard word, in whole pages.
    if (o.stack_size < 2 * page_size() || !round_up(o.stack_size + slab_stack::guard_bytes, page_size(), slabs.slot))
        bad_option("stack_size must be at least two pages");
    std::random_device rd;
    for (unsigned i = 0; i < nworkers; ++i) {
        auto w = std::make_unique<worker>();
        w->rt = this;
        w->index = i;
        w->rng = (std::uint64_t(rd()) << 32 | rd()) | 1;
        ws.push_back(std::move(w));
    }
    idle.reserve(nworkers);
    // O3: the trace buffers exist before any worker thread does.
    trace_path = o.trace_path;
    if (trace_path.empty())
        if (const char* env = std::getenv("WEFT_TRACE"); env && *env) trace_path = env;
    if (!trace_path.empty()) {
        if (o.trace_events == 0) bad_option("trace_events must be at least 1");
        trace_origin = steady_now_ns();
        for (unsigned i = 0; i <= nworkers; ++i) traces.push_back(std::make_unique<trace_buffer>(o.trace_events));
        for (unsigned i = 0; i < nworkers; ++i) ws[i]->view.trace = traces[i].get();
        outside_trace = traces.back().get();
    }
    watchdog_options wd = o.watchdog;
    watchdog_from_env(wd);
    if (wd.enabled) {
        if (wd.threshold.count() <= 0) bad_option("watchdog.threshold must be positive");
        if (wd.burst == 0) bad_option("watchdog.burst must be at least 1");
        if (wd.sample_signal < 0 || wd.sample_signal >= NSIG) bad_option("watchdog.sample_signal is not a signal number");
        std::vector<worker_view*> views;
        for (auto& w : ws) views.push_back(&w->view);
        dog = std::make_unique<watchdog>(wd, std::move(views));
    }
    const auto start = std::chrono::steady_clock::now();
    for (unsigned i = 0; i <= nworkers; ++i) timer_shards.push_back(std::make_unique<timer_shard>(start));
    try {
        for (unsigned i = 0; i < nthreads; ++i) threads.emplace_back([this, i] { thread_main(ws[i].get()); });
    } catch (...) {
        shutdown.store(true);
        for (auto& w : ws) {
            w->futex.store(1);
            futex_wake(&w->futex, 1);
        }
        for (auto& th : threads) th.join();
        throw;
    }
}

runtime_core::~runtime_core() = default;

// ---- queues ----------------------------------------------------------------

void runtime_core::push_local(worker* w, task_record* t) noexcept {
    if (t->pinned) {
        w->pinned.push(t);  // Q2
        return;
    }
    w->deque.push(t);
    notify_one();
}

void runtime_core::push_inbox(worker* home, task_record* t) noexcept {
    {
        std::lock_guard g(home->inbox_mu);
        home->inbox.push(t);
        home->inbox_nonempty.store(true, std::memory_order_seq_cst);
    }
    wake(home);
}

void runtime_core::inject(task_record* t) noexcept {
    {
        std::lock_guard g(inj_mu);
        inj.push(t);
        inj_len.store(inj.size, std::memory_order_seq_cst);
    }
    notify_one();
}

task_record* runtime_core::pop_injection(worker* w) noexcept {
    if (inj_len.load(std::memory_order_seq_cst) == 0) return nullptr;
    task_fifo batch;
    {
        std::lock_guard g(inj_mu);
        const std::size_t take = std::min(injection_batch, inj.size / nworkers + 1);
        for (std::size_t i = 0; i < take && inj.head; ++i) batch.push(inj.pop());
        inj_len.store(inj.size, std::memory_order_seq_cst);
    }
    w->view.injected.bump(batch.size);
    task_record* first = batch.pop();
    while (task_record* t = batch.pop()) push_local(w, t);
    return first;
}

void runtime_core::ready(task_record* t) noexcept {
    set_state(t, task_state::ready);
    worker* w = this_worker();
    if (w && w->rt == this) {
        if (w->view.trace) [[unlikely]] w->view.trace->instant(trace_event::wake, t->id);
        if (t->pinned && t->home != w->index) {
            push_inbox(ws[t->home].get(), t);
        } else if (w->current()) {
            // Woken by the running task: it runs next on this worker, where
            // what the waker just wrote is still in cache (Go's runnext).
            if (task_record* prev = std::exchange(w->lifo, t)) push_local(w, prev);
        } else {
            push_local(w, t);
        }
        return;
    }
    if (outside_trace) [[unlikely]] trace_outside(trace_event::wake, t);
    if (t->pinned)
        push_inbox(ws[t->home].get(), t);
    else
        inject(t);
}

task_record* runtime_core::local_next(worker* w) noexcept {
    ++w->tick;
    if (w->tick % injection_interval == 0) {
        if (task_record* t = pop_injection(w)) return t;
        if (task_record* t = w->deque.steal()) return t;
    }
    if (w->inbox_nonempty.load(std::memory_order_acquire)) {
        std::lock_guard g(w->inbox_mu);
        w->pinned.append(w->inbox);
        w->inbox_nonempty.store(false, std::memory_order_relaxed);
    }
    if (w->lifo) {
        if (w->lifo_streak < lifo_bound) {
            ++w->lifo_streak;
            return std::exchange(w->lifo, nullptr);
        }
        // Two tasks waking each other would starve the queue: the slot's
        // task goes to the back and the oldest task runs.
        push_local(w, std::exchange(w->lifo, nullptr));
        w->fifo_next = true;
    }
    w->lifo_streak = 0;
    // Alternate between pinned and stealable tasks so neither starves.
    if ((w->tick & 1) && w->pinned.head) return w->pinned.pop();
    task_record* t = nullptr;
    if (w->fifo_next) {
        w->fifo_next = false;
        t = w->deque.steal();  // the owner may take the oldest (work_deque)
    }
    if (!t) t = w->deque.pop();
    if (!t) t = w->pinned.pop();
    return t;
}

task_record* runtime_core::steal(worker* w) noexcept {
    if (nworkers < 2) return nullptr;
    const unsigned start = static_cast<unsigned>(w->next_random() % nworkers);
    for (unsigned i = 0; i < nworkers; ++i) {
        worker* v = ws[(start + i) % nworkers].get();
        if (v == w) continue;
        if (const std::size_t n = v->deque.steal_half(w->deque); n > 0) {
            w->view.steals.bump();
            w->view.stolen.bump(n);
            if (w->view.trace) [[unlikely]] w->view.trace->instant(trace_event::steal, v->index, static_cast<std::uint32_t>(n));
            return w->deque.pop();
        }
    }
    return nullptr;
}

task_record* runtime_core::find_work(worker* w) noexcept {
    if (w->stash) return std::exchange(w->stash, nullptr);
    if (task_record* t = local_next(w)) return t;
    if (task_record* t = pop_injection(w)) return t;
    if (nworkers < 2) return nullptr;
    if (!w->searching) {
        // About half of the workers search at once: a soft bound, as in Go's
        // scheduler (the check and the increment are two steps, so two
        // workers can pass the check together; models/worker_parking.pml
        // shows it with -DSTRICT_HALF). No wake-up depends on the bound.
        if (2 * n_searching.load(std::memory_order_seq_cst) >= int(nworkers)) return nullptr;
        n_searching.fetch_add(1, std::memory_order_seq_cst);
        w->searching = true;
    }
    if (task_record* t = steal(w)) return t;
    return pop_injection(w);
}

bool runtime_core::has_work(worker* w) noexcept {
    if (shutdown.load(std::memory_order_seq_cst)) return true;
    if (w->stash || w->lifo || w->pinned.head || w->inbox_nonempty.load(std::memory_order_seq_cst)) return true;
    if (inj_len.load(std::memory_order_seq_cst) != 0) return true;
    for (auto& v : ws)
        if (!v->deque.empty_estimate()) return true;
    return earliest_timer() <= steady_now_ns();
}

// ---- parking (P1) ------------------------------------------------------------
//
// A publisher stores the task (seq_cst: the deque's push, the injection and
// inbox locks), then notify_one() reads n_searching and n_parked (seq_cst).
// A worker going to sleep first stops searching (seq_cst decrement), then
// registers as parked (seq_cst increment, under idle_mu), then looks at
// every queue again (seq_cst loads), and only then sleeps. In the single
// total order of these operations either the publisher sees the worker
// parked (and wakes one) or searching (and that searcher's later look finds
// the task), or the worker's look comes after the publication and finds it.
// A searcher that finds work and was the last searcher wakes another worker,
// so work it did not take is not left to a searcher that has stopped.

// Timers and parked workers (T2): one parked worker, the watcher, sleeps
// until the earliest timer over all the wheels; the others sleep without a
// timeout. When the watcher leaves (woken for work, or its timeout came),
// another parked worker becomes the watcher, and is told to look at the
// timers again if there are any; add_timer() tells the watcher when its
// wheel's earliest time is earlier than the one the watcher sleeps until.
// So while any worker is parked, one of them wakes for the next timer, and
// the others stay asleep.
//
// Futex word values: 0 sleep, 1 leave parking (work), 2 the timers changed:
// recompute the timeout and sleep again.

worker* runtime_core::unpark_locked(worker* w) noexcept {
    w->parked = false;
    idle.erase(std::find(idle.begin(), idle.end(), w));
    n_parked.fetch_sub(1, std::memory_order_seq_cst);
    if (watcher != w) return nullptr;
    // T2: the new watcher has published nothing yet (it may be asleep
    // without a timeout): until it does, every add_timer() tells it.
    watch_until.store(INT64_MAX, std::memory_order_seq_cst);
    watcher = idle.empty() ? nullptr : idle.back();
    // It must start watching if there is something to watch: a timer, or
    // IO (I1).
    if (!watcher || (earliest_timer() == INT64_MAX && !io.load(std::memory_order_acquire))) return nullptr;
    std::uint32_t sleeping = 0;
    return watcher->futex.compare_exchange_strong(sleeping, 2, std::memory_order_acq_rel) ? watcher : nullptr;
}

void runtime_core::notify_one() noexcept {
    if (n_searching.load(std::memory_order_seq_cst) > 0) return;
    if (n_parked.load(std::memory_order_seq_cst) == 0) return;
    worker* w = nullptr;
    worker* told = nullptr;
    bool wp = false, tp = false;
    {
        std::lock_guard g(idle_mu);
        if (idle.empty()) return;
        // Leave the watcher asleep when another worker can go.
        w = idle.back();
        if (w == watcher && idle.size() > 1) w = idle[idle.size() - 2];
        told = unpark_locked(w);
        w->futex.store(1, std::memory_order_release);
        wp = w->polling;
        tp = told && told->polling;
    }
    kick(w, wp);
    if (told) kick(told, tp);
}

void runtime_core::wake(worker* w) noexcept {
    worker* told = nullptr;
    bool wp = false, tp = false;
    {
        std::lock_guard g(idle_mu);
        if (w->parked) told = unpark_locked(w);
        w->futex.store(1, std::memory_order_release);
        wp = w->polling;
        tp = told && told->polling;
    }
    kick(w, wp);
    if (told) kick(told, tp);
}

void runtime_core::kick(worker* w, bool polling) noexcept {
    futex_wake(&w->futex, 1);
    // The poller itself, waking tasks from inside poll(), need not be
    // interrupted.
    if (polling && w != this_worker()) io.load(std::memory_order_acquire)->interrupt();
}

bool runtime_core::poll_now(worker* w) noexcept {
    poller* p = io.load(std::memory_order_acquire);
    if (!p) return false;
    std::unique_lock l(poll_mu, std::try_to_lock);
    if (!l.owns_lock()) return false;  // the watcher, or another worker, polls (I2)
    w->view.io_polls.bump();
    return p->poll(0) > 0;
}

void runtime_core::stop_searching(worker* w) noexcept {
    w->searching = false;
    if (n_searching.fetch_sub(1, std::memory_order_seq_cst) == 1) notify_one();
}

// watch_wait_ns() is how long the watcher sleeps (-1: no timer), called
// under idle_mu by the watcher only. T2: it publishes the earliest time and
// reads the wheels again; an add_timer() whose store to its wheel came
// before that second read is seen by it, and one whose store came after
// reads watch_until later than this publication (all seq_cst), and wakes
// the watcher if its time is earlier. Only the current watcher publishes
// (under idle_mu), so a worker that has stopped watching cannot overwrite
// its successor's time.
std::int64_t runtime_core::watch_wait_ns() noexcept {
    std::int64_t e = earliest_timer();
    for (;;) {
        // Exchange: a store then loads of other words (C2 in
        // src/task/task.cpp: qemu-user drops the barrier between them).
        (void)watch_until.exchange(e, std::memory_order_seq_cst);
        const std::int64_t again = earliest_timer();
        if (again >= e) break;  // later: a timer went; waking early is harmless
        e = again;
    }
    if (e == INT64_MAX) return -1;
    const std::int64_t d = e - steady_now_ns();
    return d < 0 ? 0 : d;
}

std::int64_t runtime_core::earliest_timer(std::memory_order mo) const noexcept {
    std::int64_t e = INT64_MAX;
    for (const auto& s : timer_shards) e = std::min(e, s->next.load(mo));
    return e;
}

// Not the wheels' next slot start, which earliest_timer() gives the workers:
// cheaper to keep up to date, and it costs at most one early wake-up per
// level over a timer's life; a game loop asking when to wake needs the
// deadline itself.
std::int64_t runtime_core::earliest_deadline() const noexcept {
    std::int64_t e = INT64_MAX;
    for (const auto& s : timer_shards) {
        std::lock_guard g(s->mu);
        e = std::min(e, s->wheel.earliest());
    }
    return e;
}

void runtime_core::park(worker* w) noexcept {
    if (w->searching) {
        w->searching = false;
        n_searching.fetch_sub(1, std::memory_order_seq_cst);
    }
    {
        std::lock_guard g(idle_mu);
        w->futex.store(0, std::memory_order_relaxed);
        w->parked = true;
        idle.push_back(w);
        if (!watcher) watcher = w;
        n_parked.fetch_add(1, std::memory_order_seq_cst);
    }
    const bool sleeps = !has_work(w);
    if (sleeps) {
        w->view.parks.bump();
        if (w->view.trace) [[unlikely]] w->view.trace->begin_park();
    }
    if (sleeps) {
        for (;;) {
            std::uint32_t f = w->futex.load(std::memory_order_acquire);
            if (f == 1) break;
            if (f == 2) {
                (void)w->futex.compare_exchange_strong(f, 0, std::memory_order_acq_rel);
                continue;
            }
            bool watching;
            std::int64_t wait = -1;
            {
                std::lock_guard g(idle_mu);
                watching = watcher == w;
                if (watching) wait = watch_wait_ns();  // T2
            }
            if (poller* p = io.load(std::memory_order_acquire); watching && p) {
                // I1, I2: the watcher waits in the poller. Only tried: the
                // lock may be held by a running worker's poll(0) (for
                // microseconds) or by the watcher this one replaced, which
                // is being interrupted and may find its futex word still 0 for
                // a while; and this worker may itself have been replaced and
                // given work meanwhile (blocking here once hung a pinned
                // task's home worker behind a new watcher's endless poll).
                std::unique_lock pl(poll_mu, std::try_to_lock);
                if (!pl.owns_lock()) {
                    if (wait == 0) break;
                    futex_wait(&w->futex, 0, wait < 0 || wait > 1'000'000 ? 1'000'000 : wait);
                    continue;
                }
                {
                    std::lock_guard g(idle_mu);
                    if (w->futex.load(std::memory_order_acquire) != 0 || watcher != w) continue;
                    w->polling = true;
                }
                w->view.io_polls.bump();
                const std::size_t woke = p->poll(wait);
                {
                    std::lock_guard g(idle_mu);
                    w->polling = false;
                }
                pl.unlock();
                if (woke > 0 || earliest_timer() <= steady_now_ns()) break;
                continue;
            }
            if (wait == 0) break;
            futex_wait(&w->futex, 0, wait);
            if (watching && earliest_timer() <= steady_now_ns()) break;
        }
    }
    if (sleeps && w->view.trace) [[unlikely]] w->view.trace->end_park();
    worker* told = nullptr;
    bool tp = false;
    {
        std::lock_guard g(idle_mu);
        if (w->parked) told = unpark_locked(w);
        tp = told && told->polling;
    }
    if (told) kick(told, tp);
}

// ---- running -------------------------------------------------------------------

void runtime_core::switch_out(task_record* t, bool yield) {
    fiber_ref f(t->fiber);
    const bool outermost = this_fiber::current() == f;
    // Hand-off: when this worker has another task ready that already has a
    // fiber, switch to it directly (one switch instead of two, and no pass
    // through the scheduler loop), as Boost.Fiber's dispatcher does. Not
    // from inside a generator, not with copy-stacks (their stacks are
    // claimed on resume), not in a run_once() batch, and not when timers
    // are due (the loop fires them).
    if (outermost && !t->copy_stack) {
        worker* w = hooks::worker_of(t);
        if (!w->batch && !w->stash && !timers_due()) {
            if (task_record* next = local_next(w)) {
                if (next->fiber && !next->copy_stack) {
                    begin_run(w, next);
                    this_fiber::switch_to(fiber_ref(next->fiber), yield ? &hooks::handoff_yield : &hooks::handoff_park,
                                          t);
                    return;
                }
                w->stash = next;  // its first run (or a copy-stack) goes through the loop
            }
        }
    }
    const after_switch_fn hook = yield ? &hooks::yield : &hooks::park;
    // A task driving a generator may wait from inside it: suspend the task's
    // fiber with the generator inside (suspend_outer).
    if (outermost)
        this_fiber::suspend(hook, t);
    else
        this_fiber::suspend_outer(f, hook, t);
}

// begin_run() is the bookkeeping of a switch into t on w: the running task,
// its worker, state and stamp, and (O2) the one store of the statistics.
inline void runtime_core::begin_run(worker* w, task_record* t) noexcept {
    w->set_current(t);
    set_current_task(t);
    t->worker.store(static_cast<int>(w->index), std::memory_order_relaxed);
    w->now = coarse_now_ns();
    t->state.store(task_state::running, std::memory_order_release);
    t->state_since.store(w->now, std::memory_order_relaxed);
    w->view.switches.bump();
    if (w->view.trace) [[unlikely]] w->view.trace->begin_run(t);
}

void runtime_core::run_task(worker* w, task_record* t) {
  for (;;) {
    if (t->stackless && !t->fiber) {
        // A C++20 task (A1-A4 in run_stackless()); it comes back here only
        // to run a blocking call on a borrowed fiber.
        if (!run_stackless(w, t)) return;
    }
    if (!t->fiber) [[unlikely]] {
        // First run: a task canceled before it started ends without a
        // stack; one whose stack cannot be had ends failed with the error.
        // Either way the callable goes before the joiners are woken, as it
        // does when the body runs: join() returns after its captures are
        // destroyed.
        if (t->cancel_reason.load(std::memory_order_acquire) != 0) {
            t->discard(t);
            t->outcome = canceled_outcome(t);
            finish_task(w, t);
            return;
        }
        std::exception_ptr failure;
        try {
            t->fiber = make_fiber(t);
            note_task_fiber(t);
        } catch (...) {
            failure = std::current_exception();
        }
        // Finished outside the handler: the handler's own reference to the
        // exception is gone before a joiner can take it (TSan cannot see
        // libsupc++'s reference count, and flagged the joiner's what()
        // against this thread's end of the handler).
        if (failure) {
            t->discard(t);
            t->exception = std::move(failure);
            t->outcome = task_state::failed;
            finish_task(w, t);
            return;
        }
    }
    begin_run(w, t);
    w->switched = false;
    fiber_ref back;
    try {
        back = fiber_ref(t->fiber).try_resume();
        if (w->view.trace) [[unlikely]] w->view.trace->end_run();
    } catch (const std::exception& e) {
        if (w->view.trace) [[unlikely]] w->view.trace->end_run();
        // Only std::bad_alloc (a copy-stack save) can come here; the task
        // is unchanged: try it again later.
        set_current_task(nullptr);
        w->set_current(nullptr);
        set_state(t, task_state::ready);
        w->pinned.push(t);
        return;
    }
    set_current_task(nullptr);
    if (!back) {  // its shared stack is busy: try again later
        w->set_current(nullptr);
        set_state(t, task_state::ready);
        w->pinned.push(t);
        return;
    }
    if (w->switched) {  // a hook has handed it on: hands off (it may run elsewhere now)
        w->set_current(nullptr);
        return;
    }
    // After hand-offs the fiber that came back is the last task switched
    // to, not t.
    t = w->current();
    if (t->fiber->state.load(std::memory_order_acquire) == fiber_state::done) {
        if (t->stackless) {
            // A3: the blocking call on the borrowed fiber has returned (or
            // was unwound by the task's cancellation): the stack goes back
            // at once, and the coroutine goes on on this worker's stack.
            co_job* j = std::exchange(t->co_pending, nullptr);
            destroy(std::exchange(t->fiber, nullptr));
            t->co_event = j->canceled ? co_canceled : co_none;
            w->set_current(nullptr);
            continue;
        }
        // w->current() stays set: the joiner it wakes runs next, here (LIFO).
        finish_task(w, t);
        w->set_current(nullptr);
    } else {
        w->set_current(nullptr);
        // Suspended with this_fiber::suspend() directly: nobody else knows
        // it, so treat it as a yield.
        set_state(t, task_state::ready);
        push_local(w, t);
    }
    return;
  }
}

// stackless_lost() ends the process when a C++20 task's coroutine suspended
// without telling its scheduler (A1): an await that bypassed weft (inside a
// coroutine type that resumes its awaiters itself). Nobody would ever
// resume the task, and its frames may be resumed from outside the runtime.
[[noreturn]] void stackless_lost(const task_record* t) noexcept {
    const std::string who = describe_named("C++20 task", t->name, t);
    std::fprintf(stderr,
                 "weft: %s (id %llu) suspended without a weft awaiter; a coroutine inside a weft task "
                 "may suspend only on weft awaitables, on weft::async, or on awaitables that weft::async's "
                 "co_await bridges (docs/async.md)\n",
                 who.c_str(), static_cast<unsigned long long>(t->id));
    std::abort();
}

// run_stackless() runs a C++20 task (weft/async.hpp): its coroutine is
// resumed on this worker's own stack and says through co_event why it
// suspended. The protocol (docs/async.md):
//   A1  The coroutine writes co_event (and co_resume, the handle to resume
//       next) before it suspends; the scheduler reads them after resume()
//       has returned, on the same thread, when the coroutine is suspended.
//   A2  co_park: the coroutine armed its wait (W1) before it suspended; the
//       scheduler's arrival (R1) comes only now that it is suspended, so a
//       waker on another thread can never resume a frame still running.
//   A3  co_blocking: a call that may block (a mutex, a channel, a join ...)
//       runs on a fiber borrowed for it alone; the task is then an ordinary
//       stackful task until the call returns, and the fiber goes back at
//       once. L5 and L6 are therefore written once, for stackful waits.
//   A4  co_canceled: the frames are destroyed (their destructors run, on
//       this stack, with the task current), never resumed: cancellation of
//       a C++20 task cannot be swallowed, as the forced unwind of a
//       stackful task cannot.
// Returns true when the task needs its borrowed fiber run (t->fiber set),
// false when it has suspended or ended.
bool runtime_core::run_stackless(worker* w, task_record* t) {
    for (;;) {
        std::uint8_t ev = std::exchange(t->co_event, co_none);
        begin_run(w, t);
        if (!t->co_started) {
            t->co_started = true;
            // Canceled before it started: its frame goes without running.
            if (t->cancel_reason.load(std::memory_order_acquire) != 0) ev = co_canceled;
        }
        if (ev != co_canceled) {
            std::coroutine_handle<>::from_address(t->co_resume).resume();
            ev = std::exchange(t->co_event, co_none);
        }
        if (w->view.trace) [[unlikely]] w->view.trace->end_run();
        switch (ev) {
        case co_blocking:
            try {
                t->fiber = make_fiber(t);
                note_task_fiber(t);  // weft list shows the borrowed fiber as the task's
            } catch (...) {
                // No stack for the call: it fails with the error.
                t->co_pending->error = std::current_exception();
                t->co_pending = nullptr;
                continue;
            }
            return true;
        case co_requeue:
            set_current_task(nullptr);
            w->set_current(nullptr);
            hooks::requeue(w, t);
            return false;
        case co_park:
            set_current_task(nullptr);
            w->set_current(nullptr);
            set_state(t, task_state::waiting);
            arrive(t);
            return false;
        case co_finished:
        case co_canceled:
            t->co_end(t, ev == co_finished);
            task_end(t);
            set_current_task(nullptr);
            finish_task(w, t);
            w->set_current(nullptr);
            return false;
        default:
            stackless_lost(t);
        }
    }
}

// finish_task() ends t on w (the worker running this).
void runtime_core::finish_task(worker* w, task_record* t) noexcept {
    if (t->has_deadline) remove_timer(&t->deadline_timer);
    // The stack goes back at once (warm, to this thread's cache), before
    // the joiners run: a finished task holds no stack.
    if (fiber_record* f = std::exchange(t->fiber, nullptr)) destroy(f);
    // Out of the registry and the count before the joiners are woken: a
    // join() that has returned never sees its task listed or counted.
    {
        shard& s = shards[t->shard];
        std::lock_guard g(s.mu);
        if (t->reg_prev)
            t->reg_prev->reg_next = t->reg_next;
        else
            s.head = t->reg_next;
        if (t->reg_next) t->reg_next->reg_prev = t->reg_prev;
    }
    w->view.finished.bump();
    const bool last = live.fetch_sub(1, std::memory_order_acq_rel) == 1;
    complete(t);
    if (last && stopping.load(std::memory_order_acquire)) {
        stop_word.store(1, std::memory_order_release);
        futex_wake(&stop_word, INT32_MAX);
        // A driver or worker waiting for the end looks again.
        for (auto& v : ws) wake(v.get());
    }
    release(t);
}

void runtime_core::loop(worker* w, task_record* until, bool until_empty) {
    for (;;) {
        if (until && until->finished.load(std::memory_order_acquire)) return;
        if (until_empty && live.load(std::memory_order_acquire) == 0) return;
        if (!until && !until_empty && shutdown.load(std::memory_order_acquire)) return;
        if (timers_due()) fire_timers(w);
        if (++w->io_tick >= io_interval) {  // I2
            w->io_tick = 0;
            (void)poll_now(w);
        }
        if (task_record* t = find_work(w)) {
            if (w->searching) stop_searching(w);
            run_task(w, t);
            continue;
        }
        w->io_tick = 0;
        if (poll_now(w)) continue;
        park(w);
    }
}

void runtime_core::thread_main(worker* w) {
    set_this_worker(w);
    w->view.set_thread(true);
    loop(w, nullptr, false);
    w->view.set_thread(false);
    set_this_worker(nullptr);
}

namespace {
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
}  // namespace

void runtime_core::drive(task_record* root) {
    if (task_record* t = current_task()) task_misuse(t, task_errc::inside_task);
    if (nthreads != 0) return;
    driver_guard g(this);
    loop(ws[0].get(), root, false);
}

std::size_t runtime_core::run_once() {
    if (task_record* t = current_task()) task_misuse(t, task_errc::inside_task);
    if (nthreads != 0) return 0;
    driver_guard g(this);
    worker* w = ws[0].get();
    if (timers_due()) fire_timers(w);
    (void)poll_now(w);
    // The batch is what is ready now; what becomes ready while it runs
    // waits for the next call.
    task_fifo batch;
    if (w->stash) batch.push(std::exchange(w->stash, nullptr));
    if (w->lifo) batch.push(std::exchange(w->lifo, nullptr));
    w->lifo_streak = 0;
    while (task_record* t = w->deque.steal()) batch.push(t);
    {
        std::lock_guard gi(w->inbox_mu);
        w->pinned.append(w->inbox);
        w->inbox_nonempty.store(false, std::memory_order_relaxed);
    }
    batch.append(w->pinned);
    {
        std::lock_guard gi(inj_mu);
        batch.append(inj);
        inj_len.store(0, std::memory_order_seq_cst);
    }
    std::size_t n = 0;
    w->batch = true;
    while (task_record* t = batch.pop()) {
        run_task(w, t);
        ++n;
    }
    w->batch = false;
    return n;
}

// ---- timers (T1-T3) ---------------------------------------------------------------

// A node goes into the wheel of the worker that adds it (the adding task's
// worker), or into the shared wheel from any other thread, and records it
// in `owner`: the remove, perhaps on another worker after the task moved,
// locks that wheel.
void runtime_core::add_timer(timer_node* n) {
    worker* w = this_worker();
    timer_shard& s = *timer_shards[w && w->rt == this ? w->index : nworkers];
    std::int64_t due;
    {
        std::lock_guard g(s.mu);
        n->owner = &s;
        s.wheel.insert(n);
        due = s.wheel.next_due();
        s.next.store(due, std::memory_order_seq_cst);
    }
    // T2: the watcher sleeps until watch_until; tell it when this wheel is
    // due earlier.
    if (due < watch_until.load(std::memory_order_seq_cst) && n_parked.load(std::memory_order_seq_cst) > 0) {
        worker* v = nullptr;
        bool vp = false;
        {
            std::lock_guard g(idle_mu);
            std::uint32_t sleeping = 0;
            if (watcher && watcher->futex.compare_exchange_strong(sleeping, 2, std::memory_order_acq_rel)) {
                v = watcher;
                vp = v->polling;
            }
        }
        if (v) kick(v, vp);
    }
}

void runtime_core::remove_timer(timer_node* n) noexcept {
    auto* s = static_cast<timer_shard*>(n->owner);
    if (!s) return;  // never added
    std::lock_guard g(s->mu);
    if (s->wheel.erase(n)) s->next.store(s->wheel.next_due(), std::memory_order_seq_cst);
}

// fire_timers() fires what is due on w's own wheel and on the shared one,
// waiting for their locks, and on every other due wheel whose lock is free
// (T3): the other worker is then adding or removing a node, or firing that
// wheel itself.
void runtime_core::fire_timers(worker* w) noexcept {
    const std::int64_t now = steady_now_ns();
    for (unsigned i = 0; i <= nworkers; ++i) {
        timer_shard& s = *timer_shards[i];
        if (s.next.load(std::memory_order_relaxed) > now) continue;
        const std::size_t n = fire_shard(w, s, i == w->index || i == nworkers);
        if (n && w->view.trace) [[unlikely]] w->view.trace->instant(trace_event::timers, n);
    }
}

// fire_shard() returns how many timers it fired; w counts them before it
// wakes anyone, so a joiner of a woken task sees them counted.
std::size_t runtime_core::fire_shard(worker* w, timer_shard& s, bool wait) noexcept {
    struct due {
        task_record* task;
        std::uint64_t word;
        timer_node::kind what;
    };
    constexpr std::size_t batch_size = 64;
    timer_node* nodes[batch_size];
    due batch[batch_size];
    std::size_t fired = 0;
    for (;;) {
        std::size_t n = 0;
        {
            std::unique_lock g(s.mu, std::defer_lock);
            if (wait)
                g.lock();
            else if (!g.try_lock())
                return fired;
            n = s.wheel.expire(std::chrono::steady_clock::now(), nodes, batch_size);
            for (std::size_t i = 0; i < n; ++i) {
                timer_node* t = nodes[i];
                batch[i] = {t->task, t->word, t->what};
                t->task->refs.fetch_add(1, std::memory_order_relaxed);  // T1
            }
            s.next.store(s.wheel.next_due(), std::memory_order_seq_cst);
        }
        w->view.timers.bump(n);
        // Outside the lock: ending a wait queues the task (and may wake a
        // worker); the node may be reused at once by its task's next wait,
        // so only the copies are read here.
        for (std::size_t i = 0; i < n; ++i) {
            if (batch[i].what == timer_node::kind::task_deadline)
                request_cancel(batch[i].task, wait_status::timed_out);
            else if (try_end(batch[i].task, batch[i].word, wait_status::timed_out))
                arrive(batch[i].task);
            release(batch[i].task);
        }
        fired += n;
        if (n < batch_size) return fired;
    }
}

// ---- spawning, the registry ------------------------------------------------------------

bool runtime_core::submit(task_record* t, const spawn_options& o) {
    t->sched = this;
    t->pinned = o.pinned || o.copy_stack;
    worker* w = this_worker();
    const bool local = w && w->rt == this;
    t->home = local ? w->index : round_robin.fetch_add(1, std::memory_order_relaxed) % nworkers;
    t->shard = local ? w->index : nworkers;
    {
        shard& s = shards[t->shard];
        std::lock_guard g(s.mu);
        // Checked under the shard lock: stop() sets `stopping` and then
        // visits every shard under its lock, so a task listed here after
        // that visit cannot exist.
        if (stopping.load(std::memory_order_acquire)) return false;
        t->id = next_task_id.fetch_add(1, std::memory_order_relaxed);
        t->reg_prev = nullptr;
        t->reg_next = s.head;
        if (s.head) s.head->reg_prev = t;
        s.head = t;
        live.fetch_add(1, std::memory_order_relaxed);
    }
    refs.fetch_add(1, std::memory_order_relaxed);
    auto deadline = o.deadline;
    if (o.timeout.count() > 0) deadline = std::min(deadline, std::chrono::steady_clock::now() + o.timeout);
    if (deadline != std::chrono::steady_clock::time_point::max()) {
        t->deadline_timer.when = deadline;
        t->deadline_timer.task = t;
        t->deadline_timer.what = timer_node::kind::task_deadline;
        t->has_deadline = true;
        add_timer(&t->deadline_timer);
    }
    set_state(t, task_state::ready);
    if (local) {
        w->view.spawned.bump();
        if (w->view.trace) [[unlikely]] {
            w->view.trace->name(t);
            w->view.trace->instant(trace_event::spawn, t->id);
        }
    } else {
        spawned_outside.fetch_add(1, std::memory_order_relaxed);
        if (outside_trace) [[unlikely]] trace_outside(trace_event::spawn, t);
    }
    if (local)
        push_local(w, t);
    else if (t->pinned)
        push_inbox(ws[t->home].get(), t);
    else
        inject(t);
    return true;
}

std::vector<task_info> runtime_core::tasks() const {
    std::vector<task_info> out;
    const std::int64_t now = coarse_now_ns();
    for (unsigned i = 0; i <= nworkers; ++i) {
        std::lock_guard g(shards[i].mu);
        for (task_record* t = shards[i].head; t; t = t->reg_next) {
            task_info info;
            info.id = t->id;
            info.name = std::string(t->name);
            info.state = t->state.load(std::memory_order_acquire);
            info.worker = t->worker.load(std::memory_order_relaxed);
            const std::int64_t since = t->state_since.load(std::memory_order_relaxed);
            info.time_in_state = std::chrono::nanoseconds(now > since ? now - since : 0);
            info.pinned = t->pinned;
            out.push_back(std::move(info));
        }
    }
    return out;
}

runtime_stats runtime_core::stats() const {
    runtime_stats out;
    out.workers.reserve(nworkers);
    for (const auto& w : ws) {
        const worker_view& v = w->view;
        worker_stats s;
        s.worker = w->index;
        s.spawned = v.spawned.get();
        s.finished = v.finished.get();
        s.switches = v.switches.get();
        s.steals = v.steals.get();
        s.stolen = v.stolen.get();
        s.parks = v.parks.get();
        s.injected = v.injected.get();
        s.timers = v.timers.get();
        s.io_waits = v.io_waits.get();
        s.io_polls = v.io_polls.get();
        s.deque = static_cast<std::size_t>(w->deque.size_estimate());
        {
            std::lock_guard g(w->inbox_mu);
            s.inbox = w->inbox.size;
        }
        s.running = v.current.load(std::memory_order_relaxed) != nullptr;
        out.workers.push_back(s);
    }
    out.spawned_outside = spawned_outside.load(std::memory_order_relaxed);
    out.injection_queue = inj_len.load(std::memory_order_relaxed);
    out.live_tasks = static_cast<std::size_t>(live.load(std::memory_order_relaxed));
    if (dog) {
        out.stalls = dog->stalls();
        out.stalls_suppressed = dog->suppressed();
    }
    return out;
}

void runtime_core::unhandled(task_record* t, std::exception_ptr e) noexcept {
    task_info info;
    try {
        info.id = t->id;
        info.name = std::string(t->name);
        info.state = t->outcome;
        info.worker = t->worker.load(std::memory_order_relaxed);
    } catch (...) {
    }
    if (opts.unhandled) {
        opts.unhandled(info, e);
        return;
    }
    std::string what = "unknown exception";
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& x) {
        what = x.what();
    } catch (...) {
    }
    std::fprintf(stderr, "weft: detached %s (id %llu) failed: %s\n",
                 describe_named("task", info.name, t).c_str(), static_cast<unsigned long long>(info.id),
                 what.c_str());
    std::terminate();
}

// ---- stopping ------------------------------------------------------------------------

void runtime_core::stop() {
    if (task_record* t = current_task(); t && t->sched == this) task_misuse(t, task_errc::inside_task);
    std::lock_guard sg(stop_mu);
    if (stopped) return;
    stopping.store(true, std::memory_order_seq_cst);
    // Policy: cancel whatever is left. Each task ends at its next
    // suspension point (one not yet started ends before its first
    // instruction).
    for (unsigned i = 0; i <= nworkers; ++i) {
        std::lock_guard g(shards[i].mu);
        for (task_record* t = shards[i].head; t; t = t->reg_next) request_cancel(t, wait_status::canceled);
    }
    if (nthreads == 0) {
        driver_guard g(this);
        loop(ws[0].get(), nullptr, true);
    } else {
        while (live.load(std::memory_order_acquire) != 0) futex_wait(&stop_word, 0, 10'000'000);
    }
    // Every task has ended: nothing left to watch.
    if (dog) dog->halt();
    shutdown.store(true, std::memory_order_seq_cst);
    for (auto& w : ws) wake(w.get());
    for (auto& th : threads) th.join();
    threads.clear();
    {
        std::lock_guard g(bl_mu);
        bl_stop = true;
    }
    bl_cv.notify_all();
    for (auto& th : bl_pool) th.join();
    bl_pool.clear();
    if (!traces.empty()) {
        std::vector<trace_buffer*> bufs;
        for (auto& b : traces) bufs.push_back(b.get());
        (void)write_trace(trace_path, nworkers, bufs, trace_origin);
    }
    // Tasks still in queues now are finished ones' leftovers: none (every
    // task left the queues before it ended).
    stopped = true;
}

// ---- blocking() ----------------------------------------------------------------------

void runtime_core::blocking(blocking_job& job) {
    {
        std::lock_guard g(bl_mu);
        job.next = nullptr;
        if (bl_tail)
            bl_tail->next = &job;
        else
            bl_head = &job;
        bl_tail = &job;
        if (bl_idle == 0 && bl_threads < opts.blocking_threads) {
            bl_pool.emplace_back([this] { blocking_main(); });
            ++bl_threads;
        }
    }
    bl_cv.notify_one();
}

void runtime_core::blocking_main() {
    std::unique_lock lk(bl_mu);
    for (;;) {
        ++bl_idle;
        bl_cv.wait(lk, [this] { return bl_head != nullptr || bl_stop; });
        --bl_idle;
        if (!bl_head) return;  // stopping, nothing left
        blocking_job* job = bl_head;
        bl_head = job->next;
        if (!bl_head) bl_tail = nullptr;
        lk.unlock();
        // The job lives on the waiting task's stack: read it before the
        // task can go on.
        task_record* t = job->task;
        const std::uint64_t word = job->word;
        job->run(job->ctx);
        if (try_end(t, word, wait_status::notified)) arrive(t);
        lk.lock();
    }
}

// ---- stacks ------------------------------------------------------------------------

// make_fiber() gives a task that runs for the first time its fiber: a
// guarded pooled stack while the budget lasts, then a slab stack; a
// copy-stack task runs on its home worker's shared stacks.
fiber_record* runtime_core::make_fiber(task_record* t) {
    fiber_options fo;
    fo.name = t->name;
    const task_body body{t};
    if (t->copy_stack) {
        worker* home = ws[t->home].get();
        std::call_once(home->shared_once, [&] {
            shared_stack_pool_options so;
            so.stack_size = opts.copy_stack_size;
            home->shared = std::make_unique<shared_stack_pool>(so);
        });
        fo.stack_size = t->stack_size;
        return make_block<plain_fiber>(shared_stack(*home->shared), body, fo);
    }
    fo.stack_size = t->stack_size ? t->stack_size : opts.stack_size;
    const bool slab_fits = opts.stack_fallback && fo.stack_size <= opts.stack_size;
    if (slab_fits && guarded.live.load(std::memory_order_relaxed) >= guarded_budget)
        return make_block<plain_fiber>(slab_stack(&slabs), body, fo);
    try {
        return make_block<plain_fiber>(guarded_stack(&guarded), body, fo);
    } catch (const stack_error& e) {
        // Out of mappings (or memory): a slab stack may still be had.
        if (!slab_fits || e.code() != std::errc::not_enough_memory) throw;
        return make_block<plain_fiber>(slab_stack(&slabs), body, fo);
    }
}

// ---- entry points for the headers ------------------------------------------------------

void check_spawn(runtime_core* c, std::string_view name) {
    if (c->stopping.load(std::memory_order_acquire)) spawn_refused(c, name);
}

bool submit(runtime_core* c, task_record* t, const spawn_options& o) { return c->submit(t, o); }

void spawn_refused(runtime_core*, std::string_view name) {
    throw task_error(task_errc::runtime_stopping,
                     "weft: spawn of " + describe_named("task", name, nullptr) + " on a runtime that is stopping");
}

runtime_core* current_core() {
    task_record* t = current_task();
    if (!t) task_misuse(nullptr, task_errc::not_in_task);
    return core_of(t);
}

void drive_until(runtime_core* c, task_record* root) { c->drive(root); }

poller* runtime_poller(runtime_core* c, make_poller_fn make) {
    if (poller* p = c->io.load(std::memory_order_acquire)) return p;
    std::lock_guard g(c->io_make_mu);
    if (poller* p = c->io.load(std::memory_order_relaxed)) return p;
    c->io_owned = make(c, c->opts);
    poller* p = c->io_owned.get();
    c->io.store(p, std::memory_order_release);
    // A worker parked before there was a poller sleeps on its futex word:
    // wake them all, so that the watcher starts polling (I1).
    for (auto& w : c->ws) c->wake_parked(w.get());
    return p;
}

void note_io_wait() noexcept {
    if (worker* w = this_worker()) w->view.io_waits.bump();
}

void retain_core(runtime_core* c) noexcept { c->refs.fetch_add(1, std::memory_order_relaxed); }
void release_core(runtime_core* c) noexcept { c->released(); }

void run_blocking(blocking_job& job) {
    task_record* t = current_task();
    if (!t) task_misuse(nullptr, task_errc::not_in_task);
    need_stack(t);
    job.task = t;
    // Not cancellable: the call cannot be interrupted; a cancellation takes
    // effect at the next suspension point after it.
    job.word = arm(t, false);
    core_of(t)->blocking(job);
    (void)park(t);
}

void blocking_on_shared_stack() {
    throw task_error(task_errc::bad_option,
                     "weft::blocking() from a copy-stack task with a callable that can be neither copied nor "
                     "moved: it would run on another thread while the task's frames are saved elsewhere "
                     "(docs/runtime.md, \"What a copy-stack task may point at\")");
}

}  // namespace weft::detail

namespace weft {

runtime::runtime(const runtime_options& options) : core_(new detail::runtime_core(options)) {}

runtime::~runtime() {
    if (detail::task_record* t = detail::current_task(); t && t->sched == core_) {
        char buf[256];
        detail::text_writer w(buf, sizeof buf);
        w.text("weft: a runtime was destroyed from inside its own task (id ").dec(t->id).text(
            "); it would wait for itself");
        detail::fatal_message(w.c_str());
    }
    try {
        core_->stop();
    } catch (const std::exception& e) {
        // stop() refuses only to drive a caller-driven runtime from inside a
        // task (of another runtime): a destructor cannot report that.
        char buf[512];
        detail::text_writer w(buf, sizeof buf);
        w.text("weft: a runtime could not stop in its destructor: ").text(e.what());
        detail::fatal_message(w.c_str());
    }
    core_->released();
}

std::size_t runtime::run_once() { return core_->run_once(); }

std::optional<std::chrono::steady_clock::time_point> runtime::next_timer_due() const noexcept {
    const std::int64_t e = core_->earliest_deadline();
    if (e == INT64_MAX) return std::nullopt;
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(e));
}

std::size_t runtime::run_for(std::chrono::nanoseconds budget) {
    const auto end = std::chrono::steady_clock::now() + budget;
    std::size_t total = 0;
    for (;;) {
        const std::size_t n = run_once();
        total += n;
        if (n == 0 || std::chrono::steady_clock::now() >= end) return total;
    }
}

void runtime::stop() { core_->stop(); }

unsigned runtime::workers() const noexcept { return core_->nthreads; }

std::size_t runtime::live_tasks() const noexcept {
    return static_cast<std::size_t>(core_->live.load(std::memory_order_acquire));
}

std::vector<task_info> runtime::tasks() const { return core_->tasks(); }

runtime_stats runtime::stats() const { return core_->stats(); }

namespace this_task {

void sleep_until(std::chrono::steady_clock::time_point when) {
    detail::task_record* t = detail::current_task();
    if (!t) detail::task_misuse(nullptr, task_errc::not_in_task);
    detail::need_stack(t);
    const std::uint64_t word = detail::arm(t, true);
    if (detail::park_until(t, word, &when) == detail::wait_status::canceled) detail::raise_forced_unwind();
}

}  // namespace this_task

}  // namespace weft
