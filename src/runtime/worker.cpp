// worker.cpp: layer L4, a worker: its queues (SCHED-Q1, SCHED-Q2), where it finds work
// (its own queues, the injection queue, stealing), and the loop that runs
// tasks: hand-off in switch_out(), a task's first run and its end, a
// runtime without worker threads (drive(), run_once()). The invariants are
// listed in runtime_core.hpp.

#include "runtime_core.hpp"

#include <algorithm>
#include <exception>
#include <mutex>
#include <utility>

#include "debug.hpp"

namespace weft::detail {

namespace {

thread_local worker* this_thread_worker = nullptr;

// Fairness constants (docs/runtime.md, "Queues"): every injection_interval
// ticks a worker looks at the injection queue first and takes its deque's
// oldest task; a task woken into the LIFO slot runs at most lifo_bound times
// in a row before the queue gets its turn.
constexpr unsigned injection_interval = 61;
constexpr unsigned lifo_bound = 3;
constexpr std::size_t injection_batch = 32;
// A worker whose queues never run dry polls for IO every io_interval
// iterations of its loop (SCHED-I2).
constexpr unsigned io_interval = 61;

}  // namespace

// this_worker() and set_this_worker() are never inlined and hidden from
// the optimiser, like current_task().
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

// task_guard_broken() is guard_check()'s report (runtime_core.hpp).
void task_guard_broken(task_record* t) noexcept {
    char buf[256];
    text_writer w(buf, sizeof buf);
    char name[160];
    format_named(name, sizeof name, "task", t->name, t);
    w.text("weft: ").text(name).text(" (id ").dec(t->id).text(
        ") overflowed its unguarded stack: the guard word below it was overwritten");
    fatal_message(w.c_str());
}

// task_owner_broken() reports a resume that SCHED-O1 rules out: the task's
// fiber was running, done or claimed by another thread. It is never seen
// unless the scheduler has a bug (only builds without NDEBUG can see a race).
[[noreturn]] static void task_owner_broken(task_record* t, const coroutine_error& e) noexcept {
    char buf[512];
    text_writer w(buf, sizeof buf);
    char name[160];
    format_named(name, sizeof name, "task", t->name, t);
    w.text("weft: scheduler bug (SCHED-O1): ").text(name).text(" (id ").dec(t->id).text(
        ") was resumed by a worker that did not own it: ").text(e.what());
    fatal_message(w.c_str());
}

// ---- queues ----------------------------------------------------------------

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
        for (std::size_t i = 0; i < take && !inj.empty(); ++i) batch.push(inj.pop());
        inj_len.store(inj.size, std::memory_order_seq_cst);
    }
    w->view.injected.bump(batch.size);
    task_record* first = batch.pop();
    while (task_record* t = batch.pop()) push_local(w, t);
    return first;
}

void runtime_core::ready(task_record* t) noexcept {
    worker* w = this_worker();
    if (w && w->rt == this) {
        if (w->current()) {
            // Woken by a running task: the stamp is that run's start, as
            // requeue()'s is (no clock read per wake-up).
            set_state_at(t, task_state::ready, w->now);
        } else {
            set_state(t, task_state::ready);
        }
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
    // SCHED-W1: a waker outside the runtime's workers (a plain thread, weft's
    // signal thread, another runtime's worker) holds a reference on this
    // core from before the push until after the notify: once pushed, the
    // task may run, end and drop its reference, and the runtime's owner may
    // destroy the runtime, before notify_one() (or wake(home)) returns.
    refs.fetch_add(1, std::memory_order_relaxed);
    set_state(t, task_state::ready);
    if (outside_trace) [[unlikely]] trace_outside(trace_event::wake, t);
    if (t->pinned)
        push_inbox(ws[t->home].get(), t);
    else
        inject(t);
    released();  // may delete *this: nothing of it is touched after
}

task_record* runtime_core::local_next(worker* w) noexcept {
    ++w->tick;
    if (w->tick % injection_interval == 0) {
        if (task_record* t = pop_injection(w)) return t;
        if (task_record* t = w->oldest()) return t;
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
    if ((w->tick & 1) && !w->pinned.empty()) return w->pinned.pop();
    task_record* t = nullptr;
    if (w->fifo_next) {
        w->fifo_next = false;
        t = w->oldest();  // the owner may take the oldest (work_deque)
    }
    if (!t) t = w->newest();
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
        // workers can pass the check together; models/worker_sleep.pml
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
    if (w->stash || w->lifo || !w->pinned.empty() || w->inbox_nonempty.load(std::memory_order_seq_cst)) return true;
    if (inj_len.load(std::memory_order_seq_cst) != 0) return true;
    for (auto& v : ws)
        if (!v->deque.empty_estimate()) return true;
    return earliest_timer() <= steady_now_ns();
}

// ---- running -------------------------------------------------------------------

void runtime_core::switch_out(task_record* t, bool yield) {
    fiber_record* const f = t->fiber;
    // The task's own code runs on its own stack; code in a generator it
    // resumed runs on the generator's (a copy-stack task's shared stack is
    // its own while it runs). The same test as check_leaving(), without a
    // read of the thread-local state.
    const bool outermost = f->stack.contains(stack_pointer());
    // Hand-off: when this worker has another task ready that already has a
    // fiber, switch to it directly (one switch instead of two, and no pass
    // through the scheduler loop), as Boost.Fiber's dispatcher does. Not
    // from inside a generator, not with copy-stacks (their stacks are
    // claimed on resume), not in a run_once() batch, and not when timers
    // are due (the loop fires them).
    if (outermost && !t->copy_stack) {
        worker* w = hooks::worker_of(t);
        if (!w->batch && !w->stash && !handoff_timers_due(w)) {  // SCHED-T4
            if (task_record* next = local_next(w)) {
                if (next->fiber && !next->copy_stack) {
                    if (next->shrink.shrunk) [[unlikely]] restore_task(w, next);
                    begin_run(w, next);
                    // Straight into the funnel: f and next's fiber are known
                    // (this_fiber::switch_to() would look f up again).
                    detail::switch_to(f, next->fiber, yield ? &hooks::after_handoff_yield : &hooks::after_handoff_park, t);
                    return;
                }
                w->stash = next;  // its first run (or a copy-stack) goes through the loop
            }
        }
    }
    const after_switch_fn hook = yield ? &hooks::after_yield : &hooks::after_park;
    // A task driving a generator may wait from inside it: suspend the task's
    // fiber with the generator inside (suspend_outer).
    if (outermost) {
        detail::suspend(f, hook, t);
    } else {
        // Its live frames are on two stacks: not shrunk (SHRINK-A2).
        wait_arena* a = f->arena;
        if (a) ++a->pins;
        this_fiber::suspend_outer(fiber_ref(f), hook, t);
        if (a) --a->pins;
    }
}

void runtime_core::run_task(worker* w, task_record* t) {
  for (;;) {
    if (t->stackless && !t->fiber) {
        // A task without a fiber of its own (TASK-SB1 - TASK-SB4, run_stackless()); it
        // comes back here only to run a call on a borrowed fiber.
        if (!run_stackless(w, t)) return;
    }
    if (!t->fiber) [[unlikely]] {
        // First run: a task canceled before it started ends without a
        // stack; one whose stack cannot be had ends failed with the error.
        // Either way the callable goes before the joiners are woken, as it
        // does when the body runs: join() returns after its captures are
        // destroyed.
        // The outcome is set before the callable goes, for discarded_task().
        if (t->cancel_reason.load(std::memory_order_acquire) != 0) {
            t->outcome = canceled_outcome(t);
            discard_callable(t);
            finish_task(w, t);
            return;
        }
        std::exception_ptr failure;
        try {
            t->fiber = make_fiber(w, t);
            note_task_fiber(t);
        } catch (...) {
            failure = std::current_exception();
        }
        // Finished outside the handler: the handler's own reference to the
        // exception is gone before a joiner can take it (TSan cannot see
        // libsupc++'s reference count, and flagged the joiner's what()
        // against this thread's end of the handler).
        if (failure) {
            t->exception = std::move(failure);
            t->outcome = task_state::failed;
            discard_callable(t);
            finish_task(w, t);
            return;
        }
    }
    if (t->shrink.shrunk) [[unlikely]] restore_task(w, t);  // SHRINK-S4
    begin_run(w, t);
    w->switched = false;
    fiber_ref back;
    // SCHED-O1  A task's fiber is resumed only by the worker that took the
    //           task off a queue or slot, and a runnable task is in exactly one
    //           queue or slot: it is queued once per park, by whoever arrives
    //           second of its switch-out and its wake (TASK-R1, SHRINK-S1), and
    //           the wait word lets exactly one of wake, timeout and cancel end
    //           the wait (TASK-W2). So this resume needs no claim of its own:
    //           the fiber's claim is a load and a store (FIBER-I2), and the
    //           queue hand-off (release push, acquire pop) orders the last
    //           switch-out before it. Builds without NDEBUG still claim by
    //           compare-and-swap; a failure there is a scheduler bug, reported
    //           below with the task's name.
    try {
        back = fiber_ref(t->fiber).try_resume();
        if (w->view.trace) [[unlikely]] w->view.trace->end_run();
    } catch (const coroutine_error& e) {
        task_owner_broken(t, e);
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
    if (w->switched) return;  // a hook has handed it on (and cleared w->current(): hooks::left())
    // After hand-offs the fiber that came back is the last task switched
    // to, not t.
    t = w->current();
    if (t->fiber->state.load(std::memory_order_acquire) == fiber_state::done) {
        if (t->stackless) {
            // TASK-SB3: the call on the borrowed fiber has returned (or was
            // unwound by the task's cancellation): the stack goes back at
            // once, and the body goes on on this worker's stack.
            destroy(std::exchange(t->fiber, nullptr));
            w->set_current(nullptr);
            continue;
        }
        // w->current() stays set: the joiner it wakes runs next, here (LIFO).
        finish_task(w, t);  // clears w->current() (WATCHDOG-D4)
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

// finish_task() ends t on w (the worker running this).
void runtime_core::finish_task(worker* w, task_record* t) noexcept {
    if (t->has_deadline) remove_timer(&t->deadline_timer);
    remove_timer(&t->wait_timer);  // SCHED-T1: a wait may have left it (TIMER-L1)
    // The stack goes back at once (warm, to this thread's cache), before
    // the joiners run: a finished task holds no stack.
    if (fiber_record* f = std::exchange(t->fiber, nullptr)) {
        if (t->shrink.was_shrunk) release_stack_pages(f);  // SHRINK-R1
        destroy(f);
        if (void* room = std::exchange(t->shrink.room, nullptr)) give_room(w, room);  // SCHED-R1
    }
    // Out of the registry and the count before the joiners are woken: a
    // join() that has returned never sees its task listed or counted.
    {
        shard& s = shards[t->shard];
        std::lock_guard g(s.mu);
        s.tasks.remove(t);
    }
    w->view.finished.bump();
    const bool last = live.fetch_sub(1, std::memory_order_acq_rel) == 1;
    complete(t);
    if (last && (stopping.load(std::memory_order_acquire) || draining.load(std::memory_order_acquire))) {
        stop_word.store(1, std::memory_order_release);
        futex_wake(&stop_word, INT32_MAX);
        // A driver or worker waiting for the end looks again.
        for (auto& v : ws) wake(v.get());
    }
    // WATCHDOG-D4: the running-task slot is cleared before this worker's
    // reference goes (the joiner may already have dropped its own): a
    // watchdog sample landing here must not find a task that may be freed.
    w->set_current(nullptr);
    release(t);
}

void runtime_core::loop(worker* w, task_record* until, bool until_empty) {
    for (;;) {
        if (until && until->finished.load(std::memory_order_acquire)) return;
        if (until_empty && live.load(std::memory_order_acquire) == 0) return;
        if (!until && !until_empty && shutdown.load(std::memory_order_acquire)) return;
        if (const std::int64_t now = due_now()) fire_timers(w, now);
        if (++w->io_tick >= io_interval) {  // SCHED-I2
            w->io_tick = 0;
            (void)poll_now(w);
        }
        if (task_record* t = find_work(w)) {
            if (w->searching) stop_searching(w);
            // A busy worker sweeps its candidates now and then too.
            if (w->shrink.count != 0 && (++w->shrink.tick & 63) == 0) maybe_sweep(w);
            run_task(w, t);
            continue;
        }
        w->io_tick = 0;
        if (poll_now(w)) continue;
        maybe_sweep(w, true);
        sleep(w);
    }
}

void runtime_core::thread_main(worker* w) {
    set_this_worker(w);
    w->view.set_thread(true);
    loop(w, nullptr, false);
    w->view.set_thread(false);
    set_this_worker(nullptr);
}

void runtime_core::drive(task_record* root) {
    if (task_record* t = current_task())
        inside_task(t, "weft::runtime::block_on()",
                    "from a task, use weft::spawn() and join() the handle (it suspends only this task)");
    if (nthreads != 0) return;
    driver_guard g(this);
    loop(ws[0].get(), root, false);
}

std::size_t runtime_core::run_once() {
    if (task_record* t = current_task())
        inside_task(t, "weft::runtime::run_once() / run_for()",
                    "a task lets the others run with weft::this_task::yield()");
    if (nthreads != 0) return 0;
    driver_guard g(this);
    worker* w = ws[0].get();
    if (const std::int64_t now = due_now()) fire_timers(w, now);
    (void)poll_now(w);
    // The batch is what is ready now; what becomes ready while it runs
    // waits for the next call.
    task_fifo batch;
    if (w->stash) batch.push(std::exchange(w->stash, nullptr));
    if (w->lifo) batch.push(std::exchange(w->lifo, nullptr));
    w->lifo_streak = 0;
    while (task_record* t = w->oldest()) batch.push(t);
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
    maybe_sweep(w);
    std::size_t n = 0;
    w->batch = true;
    while (task_record* t = batch.pop()) {
        run_task(w, t);
        ++n;
    }
    w->batch = false;
    return n;
}

}  // namespace weft::detail
