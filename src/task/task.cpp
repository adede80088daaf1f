// task.cpp: layer L3: the task state machine, the waiting protocol (wait
// word, arrivals), cancellation, joining, task_local, this_task.
//
// The invariants are written next to the declarations in
// weft/detail/task_record.hpp (TASK-W1 - TASK-W3, TASK-R1; joining: TASK-J1 - TASK-J3) and
// in docs/runtime.md.

#include "weft/task.hpp"

#include <time.h>

#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "weft/detail/support.hpp"
#include "weft/waiter.hpp"

namespace weft {

const char* to_string(task_state s) noexcept {
    switch (s) {
    case task_state::created: return "created";
    case task_state::ready: return "ready";
    case task_state::running: return "running";
    case task_state::waiting: return "waiting";
    case task_state::done: return "done";
    case task_state::failed: return "failed";
    case task_state::canceled: return "canceled";
    case task_state::timed_out: return "timed_out";
    }
    return "unknown";
}

task_error::task_error(task_errc code, const std::string& message) : std::logic_error(message), code_(code) {}

task_canceled::task_canceled(task_state why, const std::string& message)
    : std::runtime_error(message), state_(why) {}

namespace detail {

namespace {

// The task the worker on this thread runs now (set by the scheduler around
// every resume). Read only through current_task(), which is never inlined
// and hides its result from the optimiser: a task that moved to another
// worker must read the new thread's slot (docs/platform-facts.md: compilers
// cache thread-local addresses across calls that switch stacks).
thread_local task_record* running_task = nullptr;

std::string describe(const task_record* t) {
    if (!t) return "task";
    std::string s = describe_named("task", t->name, t);
    s += " (id " + std::to_string(t->id) + ")";
    return s;
}

// wake_joiners() is complete()'s part for a task that has joiners, called
// with t's join_lock held; returns with it released. Out of line: the
// finish of a task nobody joins stays as short as it was before joiners
// waited through the waiter (callgrind, spawn and join of 100,000 tasks).
[[gnu::noinline]] void wake_joiners(task_record* t) noexcept {
    wait_node* woken = claim_all(t->joiners);  // TASK-J2
    t->join_lock.unlock();
    wake_all(woken);
}

task_record* need_task(const char* call) {
    task_record* t = current_task();
    if (!t) not_in_task(call);
    return t;
}

}  // namespace

task_record* current_task() noexcept {
    task_record** slot = &running_task;
    asm volatile("" : "+r"(slot));
    return *slot;
}

// The scheduler's side of discarded_task() (run_task() in src/runtime/worker.cpp).
namespace {
thread_local task_record* discarding = nullptr;
}  // namespace
// A callable's destructor that suspends (on the task's stack) may go on on
// another thread, leaving this thread's `discarding` stale: it counts only
// where it is still the running task, or where no task runs (the scheduler's
// discard before a first run).
task_record* discarded_task() noexcept {
    task_record* d = discarding;
    if (!d) return nullptr;
    task_record* running = current_task();
    return running == d || running == nullptr ? d : nullptr;
}
void discard_callable(task_record* t) noexcept {
    discarding = t;
    t->ops->discard(t);
    discarding = nullptr;
}

// set_current_task() is the scheduler's side of current_task().
WEFT_API void set_current_task(task_record* t) noexcept;
void set_current_task(task_record* t) noexcept {
    task_record** slot = &running_task;
    asm volatile("" : "+r"(slot));
    *slot = t;
}

void task_misuse(const task_record* t, task_errc code) {
    std::string what;
    switch (code) {
    case task_errc::empty_handle:
        what = "use of an empty join_handle (moved from, default-constructed or detached)";
        break;
    case task_errc::join_twice: what = "join of a join_handle that was already joined"; break;
    case task_errc::join_self: what = "join of " + describe(t) + " from inside itself"; break;
    case task_errc::runtime_stopping: what = "spawn on a runtime that is stopping"; break;
    case task_errc::not_in_task: what = "this operation must be called from inside a weft task"; break;
    case task_errc::driver_busy: what = "the runtime is already driven by another thread"; break;
    case task_errc::inside_task:
        what = "block_on / run_once / run_for / stop called from inside a task (" + describe(t) +
               "): it would block its own worker";
        break;
    case task_errc::bad_option: what = "bad option"; break;
    case task_errc::needs_stack:
        what = "a blocking call from " + describe(t) +
               ", a C++20 task, would block its worker: co_await it instead (weft::co::call, weft/async.hpp)";
        break;
    }
    throw task_error(code, "weft: " + what);
}

void not_in_task(const char* call, const char* instead) {
    std::string what = std::string("weft: ") + call + " must be called from inside a weft task";
    if (instead) what += std::string("; ") + instead;
    throw task_error(task_errc::not_in_task, what);
}

void inside_task(const task_record* t, const char* call, const char* instead) {
    throw task_error(task_errc::inside_task, std::string("weft: ") + call + " called from inside " + describe(t) +
                                                 ": it would block that task's worker and wait for itself; " +
                                                 instead);
}

std::int64_t coarse_now_ns() noexcept {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return std::int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void set_state(task_record* t, task_state s) noexcept {
    t->state.store(s, std::memory_order_release);
    t->state_since.store(coarse_now_ns(), std::memory_order_relaxed);
}

// ---- waiting ---------------------------------------------------------------

std::uint64_t arm(task_record* t, bool cancellable) noexcept {
    const std::uint64_t seq = (t->wait_word.load(std::memory_order_relaxed) >> wait_sequence_shift) + 1;
    const bool c = cancellable && t->shield_depth.load(std::memory_order_relaxed) == 0;
    const std::uint64_t w = (seq << wait_sequence_shift) | (c ? wait_cancellable_bit : 0) |
                            static_cast<std::uint64_t>(wait_status::armed);
    // TASK-C1 (with request_cancel): the store of the armed word and the load of
    // cancel_reason are both seq_cst, as are request_cancel's store of the
    // reason and load of the word. So at least one side sees the other: a
    // cancellation is never missed by a wait that starts as it arrives.
    // TASK-C2: each side's write is a read-modify-write (here an exchange, there
    // the reason's compare-and-swap), never a plain store: the pair is a
    // store to one word followed by a load of another (store buffering),
    // which needs a StoreLoad barrier between the two. A seq_cst store then
    // load is STLR; LDAR on AArch64, ordered by the architecture, but
    // qemu-user (7.2, x86 host) translates STLR as barrier-then-store and
    // LDAR as load-then-barrier, nothing between them: the host's store
    // buffer let this load of cancel_reason pass the store of the armed
    // word while request_cancel read the word from before it, and the
    // cancellation was lost (the task waited for ever; c_api_sync's
    // a_cancellation_racing_a_send..., about 2% of runs under qemu). An
    // exchange is a full barrier everywhere: xchg on x86 (what a seq_cst
    // store compiles to anyway), SWPAL or LDAXR/STLXR on AArch64, a host
    // atomic under qemu.
    (void)t->wait_word.exchange(w, std::memory_order_seq_cst);
    if (c && t->cancel_reason.load(std::memory_order_seq_cst) != 0)
        if (try_end(t, w, wait_status::canceled)) arrive(t);
    return w;
}

bool try_end(task_record* t, std::uint64_t word, wait_status why) noexcept {
    if (status_of(word) != wait_status::armed) return false;
    const std::uint64_t ended = (word & ~(wait_status_mask | wait_cancellable_bit)) | static_cast<std::uint64_t>(why);
    return t->wait_word.compare_exchange_strong(word, ended, std::memory_order_acq_rel, std::memory_order_relaxed);
}

void arrive(task_record* t) noexcept {
    // TASK-R1, SHRINK-S1: the second arrival queues the task and resets the word
    // for the next wait. Nobody else touches it until the task has run
    // again, which happens after ready() (a release) below. SHRINK-S3: not while
    // a shrinker holds it; drop_hold() queues it then.
    if (t->arrivals.fetch_or(arrived_woken, std::memory_order_acq_rel) == arrived_switched) {
        t->arrivals.store(0, std::memory_order_relaxed);
        t->sched->ready(t);
    }
}

void arrive_switched(task_record* t) noexcept {
    // SHRINK-S1: no hold can be set before this bit is (SHRINK-S2).
    if (t->arrivals.fetch_or(arrived_switched, std::memory_order_acq_rel) & arrived_woken) {
        t->arrivals.store(0, std::memory_order_relaxed);
        t->sched->ready(t);
    }
}

bool try_hold(task_record* t) noexcept {
    std::uint8_t expected = arrived_switched;  // SHRINK-S2
    return t->arrivals.compare_exchange_strong(expected, arrived_switched | arrived_held, std::memory_order_acquire,
                                               std::memory_order_relaxed);
}

void drop_hold(task_record* t) noexcept {
    // SHRINK-S4: the release orders the shrink's writes before the resumer's
    // reads (through ready(), or through the waker's acq_rel arrival).
    if (t->arrivals.fetch_and(static_cast<std::uint8_t>(~arrived_held), std::memory_order_acq_rel) & arrived_woken) {
        t->arrivals.store(0, std::memory_order_relaxed);
        t->sched->ready(t);
    }
}

wait_status park(task_record* t) {
    set_state(t, task_state::waiting);
    t->sched->switch_out(t, false);
    return status_of(t->wait_word.load(std::memory_order_acquire));
}

// park_until() disarms lazily:
//
//   TIMER-L1  a wait's timer node is taken out of its wheel after the wait only
//             when the wait was canceled. Timed out: the firing took the node
//             out under the wheel's lock before it ended the wait (SCHED-T1), and
//             the task learnt the outcome after that. Notified: the node is left
//             in its wheel: the task's next wait with a deadline moves it
//             (add_timer(), one wheel lock instead of a remove and an add), and
//             if it fires first it ends nothing, since its word names a wait
//             that has ended (TASK-W1); the scheduler takes it out when the task
//             ends (SCHED-T1).
//
// So the common server read, whose deadline is armed at every wait and
// rarely fires, costs one wheel lock per wait, and a sleep (which times
// out) one lock for the add and its share of the firing's.
// Deadline scopes (this_task::move_on_until(), weft/task.hpp): a scope is
// a deadline_scope on the task's stack, linked into its locals (innermost
// first) while it is open; only the task itself reads or writes them.
//
//   SCOPE-D1  a cancellable wait (one request_cancel() may end) of a task with
//             an open scope ends no later than the innermost scope's `limit`
//             (the earliest open deadline): park_until() arms the wait's own
//             timer at that limit when it is earlier than the wait's own
//             deadline, and a wait begun at or after the limit is ended by
//             the task itself (try_end(), canceled) without parking. A
//             shielded wait is armed not cancellable and is not limited;
//   SCOPE-D2  only the task marks a scope fired, and only after its own
//             try_end() won the word or the timer it armed at that scope's
//             limit ended the wait (timed_out, which park_until() reports as
//             canceled); a wake or a cancellation that won the word first
//             is reported as what it is, so a value handed to the wait is
//             never dropped (the waker won, the wait is notified) and a
//             real cancellation is never mistaken for the scope's;
//   SCOPE-D3  the forced unwind that follows stops at the scope that fired
//             (the owner of the limit), and only when no cancellation is
//             pending and the fiber is not being unwound by its destroyer:
//             otherwise every scope rethrows and the task ends as before.
//             The scope stops it as the C API boundary does (FIBER-U2:
//             marks it caught, clears the flags after the handler ended);
//   SCOPE-D4  a scope is unlinked when it ends (normally or by any unwind),
//             so waits after it are limited only by the scopes still open.
namespace {

const char scope_key = 0;

deadline_scope* innermost_scope(task_record* t) noexcept {
    for (local_slot* s = t->locals; s; s = s->next)
        if (s->key == &scope_key) return static_cast<deadline_scope*>(s->value);
    return nullptr;
}

wait_status park_scoped(task_record* t, std::uint64_t word, deadline_scope* s) {
    // SCOPE-D1: the scope's limit is earlier than the wait's own deadline.
    if (s->owner->fired || std::chrono::steady_clock::now() >= s->limit) {
        if (try_end(t, word, wait_status::canceled)) {  // TASK-W1: as claim_self(), no arrival
            s->owner->fired = true;                      // SCOPE-D2
            return wait_status::canceled;
        }
        return park(t);  // a waker or a cancellation ended it first: collect its arrival
    }
    timer_node& n = t->wait_timer;
    t->sched->add_timer(&n, s->limit, word);
    const wait_status why = park(t);
    if (why == wait_status::timed_out) {  // the firing took the node out (TIMER-L1)
        s->owner->fired = true;           // SCOPE-D2
        return wait_status::canceled;
    }
    if (why == wait_status::canceled) t->sched->remove_timer(&n);  // TIMER-L1
    return why;
}

}  // namespace

void open_scope(deadline_scope& s, std::chrono::steady_clock::time_point at) {
    task_record* t = current_task();
    if (!t) not_in_task("weft::this_task::move_on_until()");
    need_stack(t);
    if (t->scopes == 0xff) throw std::length_error("weft: more than 255 nested deadline scopes");
    deadline_scope* outer = t->scopes ? innermost_scope(t) : nullptr;
    s.t = t;
    s.at = at;
    if (outer && outer->limit <= at) {
        s.limit = outer->limit;
        s.owner = outer->owner;
    } else {
        s.limit = at;
        s.owner = &s;
    }
    s.slot = local_slot{t->locals, &scope_key, &s, nullptr};
    t->locals = &s.slot;
    ++t->scopes;
}

void close_scope(deadline_scope& s) noexcept {
    task_record* t = s.t;  // SCOPE-D4
    for (local_slot** p = &t->locals; *p; p = &(*p)->next)
        if (*p == &s.slot) {
            *p = s.slot.next;
            break;
        }
    --t->scopes;
}

bool scope_catch(deadline_scope& s) noexcept {
    // SCOPE-D3
    if (!s.fired || !forced_unwind_in_flight()) return false;
    fiber_record* f = this_thread_state()->current;
    if (f->unwinding || s.t->cancel_reason.load(std::memory_order_acquire) != 0) return false;
    f->unwind_caught = true;  // FIBER-U2: ending this handler ends the forced unwind
    return true;
}

void scope_caught_end() noexcept {
    // The handler has ended and deleted the unwind's object (FIBER-U1).
    fiber_record* f = this_thread_state()->current;
    f->unwind_raised = false;
    f->unwind_caught = false;
}

wait_status park_until(task_record* t, std::uint64_t word, const std::chrono::steady_clock::time_point* deadline) {
    if (t->scopes && (word & wait_cancellable_bit)) [[unlikely]] {
        deadline_scope* s = innermost_scope(t);
        if (!deadline || s->limit < *deadline) return park_scoped(t, word, s);
    }
    if (!deadline) return park(t);
    timer_node& n = t->wait_timer;
    t->sched->add_timer(&n, *deadline, word);
    const wait_status why = park(t);
    if (why == wait_status::canceled) t->sched->remove_timer(&n);  // TIMER-L1
    return why;
}

void check_cancel(task_record* t) {
    if (t->cancel_reason.load(std::memory_order_acquire) != 0 && t->shield_depth.load(std::memory_order_relaxed) == 0)
        detail::raise_forced_unwind();
}

void request_cancel(task_record* t, wait_status why) noexcept {
    if (t->finished.load(std::memory_order_acquire)) return;
    std::uint8_t none = 0;
    (void)t->cancel_reason.compare_exchange_strong(none, static_cast<std::uint8_t>(why), std::memory_order_seq_cst);
    // TASK-C1; TASK-C2: the compare-and-swap above is this side's read-modify-write
    // (one that fails found the reason set by an earlier request, which did
    // its own load after its own CAS).
    const std::uint64_t w = t->wait_word.load(std::memory_order_seq_cst);
    if (status_of(w) == wait_status::armed && (w & wait_cancellable_bit))
        if (try_end(t, w, wait_status::canceled)) arrive(t);
}

// ---- joining -----------------------------------------------------------------

bool wait_finished(task_record* x, const std::chrono::steady_clock::time_point* deadline) {
    if (x->finished.load(std::memory_order_acquire)) return true;
    // WAITER-V4: complete() reaches the waiter and its node while we wait. The
    // waiter binds to the calling task, or to the thread outside a task
    // (needs_stack from a C++20 task's coroutine, before anything is linked).
    // SHRINK-A2: the joined task may use the joiner's locals by reference (the
    // structured-concurrency idiom): the joiner's stack stays while it waits.
    stack_pin pin;
    stable<one_wait> held;
    one_wait& j = *held;
    x->join_lock.lock();
    if (x->finished.load(std::memory_order_relaxed)) {  // TASK-J1
        x->join_lock.unlock();
        return true;
    }
    j.w.arm();
    x->joiners.push_back(&j.n);  // TASK-J1
    x->join_lock.unlock();
    const waiter::outcome o = j.w.wait(deadline);
    if (o != waiter::outcome::notified) {
        // Timed out or canceled: complete() may still meet the node (TASK-J2).
        x->join_lock.lock();
        x->joiners.remove(&j.n);  // WAITER-V3
        x->join_lock.unlock();
    }
    if (o == waiter::outcome::canceled) throw_canceled();
    return o == waiter::outcome::notified;
}

std::size_t wait_any(std::span<task_record* const> ts) {
    if (ts.empty()) throw std::invalid_argument("weft: when_any over no tasks");
    auto first_finished = [&]() -> std::size_t {
        for (std::size_t i = 0; i < ts.size(); ++i)
            if (ts[i]->finished.load(std::memory_order_acquire)) return i;
        return ts.size();
    };
    if (std::size_t i = first_finished(); i < ts.size()) return i;
    // TASK-J3: one waiter (needs_stack as in wait_finished), one node per
    // task; both off a shared stack (WAITER-V4): the nodes are on the heap.
    stack_pin pin;  // SHRINK-A2, as in wait_finished()
    stable<waiter> held;
    waiter& w = *held;
    std::vector<wait_node> ns(ts.size());
    w.arm();
    std::size_t linked = 0;
    bool done = false;
    for (; linked < ts.size(); ++linked) {
        task_record* x = ts[linked];
        wait_node& n = ns[linked];
        n.w = &w;
        n.index = static_cast<int>(linked);
        x->join_lock.lock();
        done = x->finished.load(std::memory_order_relaxed);  // TASK-J1
        if (!done) x->joiners.push_back(&n);
        x->join_lock.unlock();
        if (done) break;
    }
    // A task found finished: end the wait ourselves, unless a complete() (or
    // a cancellation) claimed it first; then wait() returns at once.
    const waiter::outcome o = done && w.claim_self() ? waiter::outcome::notified : w.wait();
    for (std::size_t i = 0; i < linked; ++i) {
        ts[i]->join_lock.lock();
        ts[i]->joiners.remove(&ns[i]);  // WAITER-V3
        ts[i]->join_lock.unlock();
    }
    if (o == waiter::outcome::canceled) throw_canceled();
    return first_finished();
}

void complete(task_record* t) noexcept {
    set_state(t, t->outcome);
    t->join_lock.lock();
    t->finished.store(true, std::memory_order_release);  // TASK-J1
    if (t->joiners.empty())
        t->join_lock.unlock();
    else
        wake_joiners(t);  // TASK-J2; releases the lock
    const std::uint8_t before = t->finish_flags.fetch_or(finish_finished, std::memory_order_acq_rel);
    if ((before & finish_detached) && t->outcome == task_state::failed) t->sched->unhandled(t, t->exception);
}

void release(task_record* t) noexcept {
    if (t->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    scheduler_base* s = t->sched;
    t->ops->destroy_block(t);
    s->released();
}

void detach(task_record* t) noexcept {
    const std::uint8_t before = t->finish_flags.fetch_or(finish_detached, std::memory_order_acq_rel);
    if ((before & finish_finished) && t->outcome == task_state::failed) t->sched->unhandled(t, t->exception);
    release(t);
}

void task_begin(task_record* t) { check_cancel(t); }

void task_end(task_record* t) noexcept {
    while (local_slot* s = t->locals) {
        t->locals = s->next;
        s->destroy(s->value);
        delete s;
    }
}

void rethrow_outcome(task_record* t) {
    // Moved out: the joiner owns the exception alone from here on. Left in
    // the record, the worker's last release of the record could drop the
    // exception's last reference while the joiner still handles it, ordered
    // only by libsupc++'s reference count, which TSan cannot see.
    if (t->outcome == task_state::failed) std::rethrow_exception(std::exchange(t->exception, nullptr));
    throw task_canceled(t->outcome, "weft: " + describe(t) + " was " +
                                        (t->outcome == task_state::timed_out ? "timed out" : "canceled"));
}

void* local_get(const void* key, void* (*make)(), void (*destroy)(void*) noexcept) {
    task_record* t = need_task("weft::task_local");
    for (local_slot* s = t->locals; s; s = s->next)
        if (s->key == key) return s->value;
    void* v = make();
    t->locals = new local_slot{t->locals, key, v, destroy};
    return v;
}

}  // namespace detail

namespace this_task {

bool inside() noexcept { return detail::current_task() != nullptr; }

std::uint64_t id() { return detail::need_task("weft::this_task::id()")->id; }

std::string_view name() { return detail::need_task("weft::this_task::name()")->name; }

int worker() { return detail::need_task("weft::this_task::worker()")->worker.load(std::memory_order_relaxed); }

void yield() {
    detail::task_record* t = detail::need_task("weft::this_task::yield()");
    detail::need_stack(t);
    detail::check_cancel(t);
    t->sched->switch_out(t, true);
    detail::check_cancel(t);
}

bool cancellation_requested() {
    return detail::need_task("weft::this_task::cancellation_requested()")
               ->cancel_reason.load(std::memory_order_acquire) != 0;
}

shield::shield() : t_(detail::need_task("weft::this_task::shield")) { t_->shield_depth.fetch_add(1, std::memory_order_relaxed); }

shield::~shield() { t_->shield_depth.fetch_sub(1, std::memory_order_relaxed); }

}  // namespace this_task

}  // namespace weft
