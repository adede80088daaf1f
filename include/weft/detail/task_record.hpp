// weft/detail/task_record.hpp: layer L3's task record and the waiting
// protocol every suspension of a task goes through (included by
// weft/task.hpp). Only what inline code in the public headers needs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <type_traits>

#include "weft/config.hpp"
#include "weft/detail/intrusive_list.hpp"
#include "weft/fiber.hpp"

namespace weft {
enum class task_state : std::uint8_t;

// The lock and the queue of layer L3's one waiter (weft/waiter.hpp, WAITER-V1 - WAITER-V4)
// are defined here rather than in weft/waiter.hpp: a task record holds a
// queue (the waiters that join the task, TASK-J1 below), so the queue must be
// complete before the record is, and weft/waiter.hpp includes weft/task.hpp,
// hence this header. Use them through weft/waiter.hpp, which also defines
// waiter and wait_queue::pop_claimed().
class waiter;

namespace detail {
// pin_frame_of() adds d to the wait arena's pins (SHRINK-A2) of the calling
// task when p lies on that task's own stack: a primitive (its wait_queue)
// that lives in a task's frame is reached by other tasks and threads while
// the task waits, so a shrink would be undone at the first touch (SHRINK-P2;
// docs/runtime.md, "When other code touches a shrunk stack"): the task is
// not shrunk meanwhile. Does nothing elsewhere: on a thread, on a copy
// stack, in a nested fiber, on the heap.
inline void pin_frame_of(const void* p, int d) noexcept {
    fiber_record* f = this_thread_state()->current;
    if (!f || !f->arena) return;
    const auto* b = static_cast<const std::byte*>(f->stack.base);
    const auto* q = static_cast<const std::byte*>(p);
    if (q >= b && q < b + f->stack.size) f->arena->pins += static_cast<std::uint32_t>(d);
}
// check_off_shared_stack() aborts, naming the running task or coroutine, if
// `p` lies on the shared stack the caller runs on: `what` (a wait node, a
// waiter) would be overwritten while the caller is suspended (WAITER-V4). Used by
// debug builds where nodes are linked.
WEFT_API void check_off_shared_stack(const void* p, const char* what) noexcept;
}  // namespace detail

// spin_lock is a test-and-test-and-set lock for critical sections of a few
// instructions (linking a node, moving one value). A contended locker yields
// its thread; it never suspends a task (a primitive's lock is never held
// across a suspension).
class spin_lock {
public:
    void lock() noexcept {
        while (flag_.exchange(true, std::memory_order_acquire))
            while (flag_.load(std::memory_order_relaxed)) std::this_thread::yield();
    }
    bool try_lock() noexcept {
        return !flag_.load(std::memory_order_relaxed) && !flag_.exchange(true, std::memory_order_acquire);
    }
    void unlock() noexcept { flag_.store(false, std::memory_order_release); }

private:
    std::atomic<bool> flag_{false};
};

// wait_node links one waiter into one primitive's queue. `slot` and `index`
// are the primitive's: where a value comes from or goes to, and which select
// case the node is.
struct wait_node {
    wait_node* prev = nullptr;
    wait_node* next = nullptr;
    waiter* w = nullptr;
    void* slot = nullptr;
    int index = 0;
    bool linked = false;
};

// wait_queue is an intrusive FIFO of wait nodes (detail::intrusive_list
// through prev / next, LIST-IL1 - LIST-IL3), guarded by its primitive's lock. `linked`
// says whether a node is in a queue.
class wait_queue {
public:
    // A queue in a task's frame pins the task while it lives (pin_frame_of(),
    // SHRINK-A2). off_stack: a queue known to be on the heap (a task record's).
    struct off_stack_t {};
    static constexpr off_stack_t off_stack{};
    constexpr wait_queue() noexcept {
        if (!std::is_constant_evaluated()) detail::pin_frame_of(this, 1);
    }
    constexpr explicit wait_queue(off_stack_t) noexcept {}
    // The same test as the constructor's (a queue on the heap is on no
    // task's stack; a queue ends on the fiber it was made on).
    constexpr ~wait_queue() {
        if (!std::is_constant_evaluated()) detail::pin_frame_of(this, -1);
    }
    wait_queue(const wait_queue&) = delete;
    wait_queue& operator=(const wait_queue&) = delete;
    [[nodiscard]] bool empty() const noexcept { return list_.empty(); }
    [[nodiscard]] wait_node* front() const noexcept { return list_.front(); }
    void push_back(wait_node* n) noexcept {
#ifndef NDEBUG
        detail::check_off_shared_stack(n, "a wait node");  // WAITER-V4
#endif
        list_.push_back(n);
        n->linked = true;
    }
    // remove() takes n out if it is linked (WAITER-V3).
    void remove(wait_node* n) noexcept {
        if (!n->linked) return;
        list_.remove(n);
        n->linked = false;
    }
    // pop_claimed() takes nodes off the front until one whose waiter it
    // could claim; returns that node (unlinked, claimed: the caller hands
    // over and calls wake()) or null. Nodes whose waiter was claimed by
    // someone else are dropped: that waiter has left or is leaving (WAITER-V3).
    // Defined in weft/waiter.hpp, where waiter is complete.
    inline wait_node* pop_claimed() noexcept;

private:
    detail::intrusive_list<wait_node, detail::list_links<wait_node, &wait_node::prev, &wait_node::next>> list_;
};

}  // namespace weft

namespace weft::detail {

struct task_record;
class scheduler_base;

// wait_status is the low bits of a task's wait word: why its current wait
// ended (or that it is still armed).
enum class wait_status : std::uint64_t {
    idle = 0,       // not waiting
    armed = 1,      // waiting; the first of notify / cancel / timeout wins
    notified = 2,   // the awaited thing happened
    canceled = 3,   // the task was canceled (its wait was cancellable)
    timed_out = 4,  // the wait's own timeout passed
};

// The wait word, one per task: [ sequence : 60 | cancellable : 1 | status : 3 ].
//
// TASK-W1. Every wait of the task gets a fresh sequence number (arm()). A waker
//     that read the word for one wait can therefore never end a later one:
//     its compare-and-swap compares the whole word.
// TASK-W2. Exactly one party ends a wait: the one whose compare-and-swap moves
//     the status from armed to notified / canceled / timed_out (try_end()).
// TASK-W3. A wait is ended before the task is resumed; the task reads the status
//     after it is resumed to learn why.
inline constexpr std::uint64_t wait_status_mask = 7;
inline constexpr std::uint64_t wait_cancellable_bit = 8;
inline constexpr int wait_sequence_shift = 4;

[[nodiscard]] inline wait_status status_of(std::uint64_t word) noexcept {
    return static_cast<wait_status>(word & wait_status_mask);
}

// timer_node is a deadline in one of a scheduler's timer wheels
// (src/runtime/timer_wheel.hpp); it lives in the task record (a task has at
// most two: its own deadline and its current wait's). `owner` is the timer
// structure add_timer() put it in, written only by add_timer(), on the
// task's own thread: the thread that removes it (perhaps another worker,
// after the task migrated) finds the right wheel, and its lock, through it.
// `what` is set with the record and never changes; it also says which of
// the record's two nodes this is, so the node needs no pointer to its task
// (task_of()). when, word, prev, next and slot are guarded by the lock of
// the wheel that holds the node (add_timer() writes when and word there).
struct timer_node {
    static constexpr std::uint16_t unlinked = 0xffff;
    // callback: a weft::timer's (weft/timer.hpp), in its timer_block, not in a task record.
    enum class kind : std::uint8_t { task_deadline, wait_timeout, callback };
    std::chrono::steady_clock::time_point when{};
    timer_node* prev = nullptr;
    timer_node* next = nullptr;
    void* owner = nullptr;   // the scheduler's: the structure it was last added to
    std::uint64_t word = 0;  // wait_timeout: the wait word it ends (TASK-W1)
    std::uint16_t slot = unlinked;  // the wheel's slot, or unlinked
    kind what = kind::wait_timeout;
};

// Joining a task has no wait of its own: a joiner, task or plain thread,
// waits through the one waiter (weft/waiter.hpp, WAITER-V1 - WAITER-V4), as event::wait()
// does. It holds a one_wait in a detail::stable (WAITER-V4) and links its node into
// the awaited task's `joiners` under that task's `join_lock`
// (src/task/task.cpp: wait_finished, wait_any, complete):
//
// TASK-J1  `finished` is stored under join_lock (complete()), and a joiner
//          loads it and, only if it is false, arms its waiter and links its
//          node in the same hold of the lock. So either the joiner sees the
//          task finished and does not wait, or its node is in `joiners`
//          when complete() takes the lock: no joiner misses the end.
// TASK-J2  complete() claims every waiter still linked, under join_lock
//          (pop_claimed, WAITER-V1), and wakes them after releasing it. Nothing is
//          handed over but the wake: outcome, result and exception are final
//          before complete() runs and reach the joiner through the claim and
//          the wake (WAITER-V2). So a joiner's wait ends `notified` only when the
//          task has finished. A waiter whose claim was won first by its
//          timeout, its cancellation or (when_any) another task's end is
//          dropped from the queue; its owner unlinks its node under
//          join_lock before the node's life ends (WAITER-V3). complete() touches a
//          node and its waiter only under the lock while linked, or after
//          claiming it (its owner then waits for the wake).
// TASK-J3  wait_any() (when_any) has one waiter and one node per task: it
//          arms the waiter once, then links node i under task i's
//          join_lock, one task at a time (TASK-J1 for each); a task found
//          finished there ends the wait with claim_self(). The first claim
//          ends the wait, so the waiter is woken at most once however many
//          of the tasks end. Afterwards it unlinks every node it linked,
//          each under its task's lock (WAITER-V3).

// local_slot is one task_local<T> value of a task (a short list per task).
struct local_slot {
    local_slot* next;
    const void* key;
    void* value;
    void (*destroy)(void*) noexcept;
};

// scheduler_base is what a task needs from the scheduler that runs it
// (implemented by the runtime, layer L4). All functions may be called from
// any thread unless noted.
class scheduler_base {
public:
    // ready() queues a suspended task whose wait has ended (or that yielded).
    virtual void ready(task_record* t) noexcept = 0;
    // switch_out() suspends the calling task (called from inside it):
    // yield=true puts it back in the queue at once, false parks it until
    // its wait ends. Returns when it is resumed.
    virtual void switch_out(task_record* t, bool yield) = 0;
    // add_timer() / remove_timer() put a node into / take it out of the
    // scheduler's timers (remove of a node not in them does nothing; it
    // may run on another thread than the add). add_timer() sets the node's
    // deadline and word; the node may still be in the timers from an
    // earlier add (a wait that ended without its timer: park_until(),
    // TIMER-L1), and is then moved. A node fires at or after its deadline,
    // never before.
    virtual void add_timer(timer_node* n, std::chrono::steady_clock::time_point when, std::uint64_t word) = 0;
    virtual void remove_timer(timer_node* n) noexcept = 0;
    // unhandled() reports the exception of a detached task that failed.
    virtual void unhandled(task_record* t, std::exception_ptr e) noexcept = 0;
    // released() is called when a task record is gone (its stack freed).
    virtual void released() noexcept = 0;

protected:
    ~scheduler_base() = default;
};

// finish flags (task_record::finish_flags): who comes second of the task's
// end and its handle's detach reports a failure to the unhandled handler.
inline constexpr std::uint8_t finish_finished = 1;
inline constexpr std::uint8_t finish_detached = 2;

// stackless_body is the body of a task that has no fiber of its own
// (implemented by layer L7 for C++20 tasks; the record points to it,
// `stackless`). The worker runs it on the worker's own stack, one step at a
// time, with the task current and running, and each step says why it
// stopped (a body that ended says in `outcome` whether it finished, failed
// or was canceled, so the scheduler has one answer for all three):
//
// TASK-SB1  step() returns only once the body is suspended (or gone): the
//           scheduler acts on the answer after step() has returned, on the same
//           thread, so nothing it does for the task (an arrival, a requeue) can
//           let another thread run the body while step() is still on the stack.
// TASK-SB2  parked: the body armed its wait (TASK-W1) before it suspended; the
//           scheduler sets the task waiting and arrives (TASK-R1). requeued: it is
//           runnable; the scheduler queues it again.
// TASK-SB3  borrow: the body needs a stack for one call. The scheduler makes the
//           task a fiber and runs `run` on it as an ordinary stackful task; when
//           that fiber's body has returned (or was unwound by the task's
//           cancellation) the fiber goes at once and step() is called again, and
//           the body learns from its own state how the call ended. If no fiber
//           can be had, no_fiber() gets the error and step() is called again.
// TASK-SB4  ended: the body is gone (its destructors ran, with the task current);
//           outcome, and the result or the exception, are set. The scheduler runs
//           task_end() and finishes the task.
class WEFT_API stackless_body {
public:
    enum class stop : std::uint8_t { parked, requeued, borrow, ended };
    virtual stop step(task_record* t) = 0;
    virtual void no_fiber(task_record* t, std::exception_ptr e) noexcept = 0;

protected:
    ~stackless_body() = default;
};

// task_record is a task's bookkeeping, at the start of one small heap block
// that also holds the callable, the result (task_block<T>) and the name.
// The task's fiber, and with it its stack, exists only while the task runs:
// it is made when the task first runs and released as soon as it ends, so
// a task that waits in a queue, or has finished and waits to be joined,
// holds no stack (docs/runtime.md, "Stacks").
//
// task_ops is what a kind of task block does, one static table per block
// type (a task keeps a pointer to it, not the three pointers):
//   run            the body, on the task's stack
//   destroy_block  destroys and frees the block
//   discard        destroys the callable of a task that never ran
struct task_ops {
    void (*run)(task_record*);
    void (*destroy_block)(task_record*) noexcept;
    void (*discard)(task_record*) noexcept;
};

// task_shrink is a task record's part that belongs to idle-stack shrinking
// (src/runtime/shrink.hpp, the component; docs/runtime.md, "Idle tasks give
// their stack back"). Only the shrink component and the scheduler's hooks
// that call it read or write these fields:
//   room      the fiber room that holds the task's fiber record and wait arena
//             (create_split()): taken from its worker's free list at its first
//             run when the runtime shrinks idle tasks, given back at its end
//             (SCHED-R1); else null.
//   next      its link in a worker's FIFO of idle candidates, which holds a
//             reference while `listed` ("Finding idle tasks").
//   listed    0: in no FIFO; 1: in exactly one (its entry holds a
//             reference); 2: in one, and it parked again since the sweep
//             last kept it (SHRINK-L1, src/runtime/shrink.cpp).
//   shrinkable  its fiber has a wait arena: its stack may be shrunk (set once).
//   shrunk    its stack pages are released, its live bytes in its arena's
//             block (written only under the hold, SHRINK-S3).
//   was_shrunk  restored at least once: its stack's pages go back at its end
//             (SHRINK-R1).
struct task_record;
struct task_shrink {
    void* room = nullptr;
    task_record* next = nullptr;
    std::atomic<std::uint8_t> listed{0};
    bool shrinkable = false;
    bool shrunk = false;
    bool was_shrunk = false;
};

// Ownership: `refs` counts the join handle (until joined or detached), the
// scheduler (until the task has finished) and short-lived holders (a firing
// timer). The last release destroys the block.
struct task_record {
    // --- set at spawn, then read-only ---
    fiber_record* fiber = nullptr;   // while it runs (set and cleared by the scheduler)
    scheduler_base* sched = nullptr;
    std::uint64_t id = 0;
    std::string_view name;
    const task_ops* ops = nullptr;   // what its kind of block does (one table per type: 16 bytes less per task)
    stackless_body* stackless = nullptr;  // non-null: no fiber of its own, only borrowed ones (TASK-SB1 - TASK-SB4)
    std::size_t stack_size = 0;      // 0: the runtime's
    // Idle-stack shrinking's part (task_shrink above; not read-only).
    // no_unique_address lets the next members sit in its tail padding (it
    // is not trivially copyable), so the record is no bigger than with the
    // fields loose (296 bytes on x86-64).
    [[no_unique_address]] task_shrink shrink;
    bool copy_stack = false;
    bool pinned = false;     // never runs on another worker than `home`
    unsigned home = 0;       // pinned: its worker
    unsigned shard = 0;      // registry shard it is listed in

    // --- the state machine (docs/runtime.md) ---
    std::atomic<task_state> state;
    bool has_deadline = false;  // deadline_timer is in a timer wheel (set at spawn)
    std::atomic<int> worker{-1};               // the worker that ran it last (-1: none yet)
    std::atomic<std::int64_t> state_since{0};  // coarse monotonic ns of the last change

    // --- waiting (TASK-W1 - TASK-W3) and becoming runnable ---
    std::atomic<std::uint64_t> wait_word{0};
    // arrivals: a parked task becomes runnable when two things have both
    // happened: it is switched out (the scheduler arrives) and its wait has
    // ended (the waker arrives). Whoever arrives second queues it (TASK-R1).
    // Bits: arrived_switched, arrived_woken, arrived_held (SHRINK-S1 - SHRINK-S4).
    std::atomic<std::uint8_t> arrivals{0};

    // --- cancellation ---
    std::atomic<std::uint8_t> cancel_reason{0};  // 0, or a wait_status (canceled / timed_out)
    // Open deadline scopes (this_task::move_on_until(), SCOPE-D1 - SCOPE-D4 in
    // src/task/task.cpp): read and written by the task only. In the padding
    // before shield_depth: the record is no bigger.
    std::uint8_t scopes = 0;
    std::atomic<std::uint32_t> shield_depth{0};  // written by the task only
    std::atomic<std::uint32_t> refs{2};

    // --- the end, and joining (TASK-J1 - TASK-J3 above) ---
    std::atomic<std::uint8_t> finish_flags{0};
    std::atomic<bool> finished{false};   // outcome, result and exception are final (release); set under join_lock
    spin_lock join_lock;                 // guards joiners and the store of finished (TASK-J1)
    // outcome sits here, in a byte that would otherwise be padding, so that
    // the queue's second pointer (its tail) does not make the record any
    // bigger than the one-pointer list of joiners it replaced.
    task_state outcome;
    wait_queue joiners{wait_queue::off_stack};  // the nodes of the waiters that join this task
    std::exception_ptr exception;

    // --- timers, locals, queues, registry (owned by the scheduler) ---
    timer_node deadline_timer;    // in a timer wheel only if has_deadline
    timer_node wait_timer;
    local_slot* locals = nullptr;
    task_record* next = nullptr;  // intrusive queue link
    task_record* reg_prev = nullptr;
    task_record* reg_next = nullptr;
    void* sched_data = nullptr;   // the scheduler's own use

    task_record() noexcept : state(task_state{}), outcome(task_state{}) {  // created
        deadline_timer.what = timer_node::kind::task_deadline;
    }
};

// task_of() is the task whose record holds timer node n (its deadline_timer
// or its wait_timer, told apart by n->what).
inline task_record* task_of(timer_node* n) noexcept {
    static_assert(std::is_standard_layout_v<task_record>, "task_of() uses offsetof(task_record, ...)");
    const std::size_t at = n->what == timer_node::kind::task_deadline ? offsetof(task_record, deadline_timer)
                                                                        : offsetof(task_record, wait_timer);
    return reinterpret_cast<task_record*>(reinterpret_cast<char*>(n) - at);
}

// task_block<T> is a task record with room for its result.
template <class T>
struct task_block : task_record {
    std::optional<T> value;
};
template <>
struct task_block<void> : task_record {};

// current_task() is the task this thread runs now (also from inside a
// coroutine or generator that the task drives), or null. Safe across
// migration: it is read afresh on every call.
[[nodiscard]] WEFT_API task_record* current_task() noexcept;

// discard_callable() destroys t's callable once t's outcome (and exception)
// is set, for a task that ends canceled, timed out or without a stack:
// before its first run (the scheduler), or on the forced unwind out of its
// body (task_closure::body(), also when the unwind began in task_begin(),
// before the callable was called). discarded_task() is t meanwhile, and
// null everywhere else: a callable's destructor can so tell "never called,
// because the task ended so" from "destroyed after a refused spawn" or "moved
// from" (task_group's children, GROUP-I4).
WEFT_API void discard_callable(task_record* t) noexcept;
[[nodiscard]] WEFT_API task_record* discarded_task() noexcept;

// The arrival word (task_record::arrivals). TASK-R1 with a shrinker:
//
//   SHRINK-S1  The scheduler's arrival (arrive_switched(), after the task's context
//              is saved) sets arrived_switched; the waker's (arrive()) sets
//              arrived_woken. Whichever sets the second bit while arrived_held is
//              clear queues the task and resets the word to 0.
//   SHRINK-S2  A shrinker takes the hold (try_hold()) by compare-and-swap only from
//              exactly arrived_switched: switched out, wait not ended, not held.
//              So it only touches a task that is really switched out, whose wait
//              has not ended, and two shrinkers never hold one task. Its acquire
//              pairs with arrive_switched()'s release: the copy sees every byte
//              the task wrote to its stack.
//   SHRINK-S3  While the hold is set nobody queues the task: a waker that arrives
//              sets arrived_woken and leaves. So nobody resumes a task in the
//              middle of its shrink, and `shrunk` and the saved bytes are written
//              only under the hold.
//   SHRINK-S4  drop_hold() clears the hold (release) and, if the waker arrived
//              meanwhile, queues the task itself. The resumer, which gets the task
//              through its queue, sees the saved bytes and `shrunk` (restored
//              before the switch in).
// models/shrink.pml checks SHRINK-S1 - SHRINK-S4 with TASK-R1.
inline constexpr std::uint8_t arrived_switched = 1;
inline constexpr std::uint8_t arrived_woken = 2;
inline constexpr std::uint8_t arrived_held = 4;

// Arrival and waiting (src/task/task.cpp).
//   arm() starts a new wait of the calling task t and returns its word.
//   try_end() ends the wait `word` with `why`; true if this call ended it (TASK-W2).
//   arrive() is the waker's arrival (TASK-R1, SHRINK-S1).
//   park() suspends t until its armed wait has ended; returns why it ended.
//     A cancellable wait of a task whose cancellation is pending ends at once.
[[nodiscard]] WEFT_API std::uint64_t arm(task_record* t, bool cancellable) noexcept;
WEFT_API bool try_end(task_record* t, std::uint64_t word, wait_status why) noexcept;
WEFT_API void arrive(task_record* t) noexcept;
// arrive_switched() is the scheduler's arrival (TASK-R1, SHRINK-S1); try_hold()
// and drop_hold() are a shrinker's (SHRINK-S2 - SHRINK-S4).
WEFT_API void arrive_switched(task_record* t) noexcept;
[[nodiscard]] WEFT_API bool try_hold(task_record* t) noexcept;
WEFT_API void drop_hold(task_record* t) noexcept;
WEFT_API wait_status park(task_record* t);
// park_until() is park() with a deadline for the armed wait `word` (null:
// none): t's wait timer ends the wait with timed_out when it passes. The one
// place a wait's timer is put in and taken out (join, sleep, the waiter).
// Inside a deadline scope a cancellable wait also ends at the scope's
// deadline, as canceled (SCOPE-D1, SCOPE-D2).
WEFT_API wait_status park_until(task_record* t, std::uint64_t word,
                                const std::chrono::steady_clock::time_point* deadline);

// deadline_scope is one open this_task::move_on_until() (weft/task.hpp), on
// the task's stack. It is linked into the task's locals under a key of its
// own (innermost first) while open; t->scopes counts the open ones.
struct deadline_scope {
    local_slot slot{};
    std::chrono::steady_clock::time_point at{};     // its own deadline
    std::chrono::steady_clock::time_point limit{};  // the earliest of its own and its open outer scopes'
    deadline_scope* owner = nullptr;  // the scope whose own deadline `limit` is
    task_record* t = nullptr;
    bool fired = false;  // its deadline ended a wait of this task (SCOPE-D2)
};
// open_scope() links s (throws task_error: not_in_task, needs_stack);
// close_scope() unlinks it. scope_catch() is called in a catch (...): true
// when the exception being handled is the forced unwind of s's own expiry
// (SCOPE-D3), which it then marks as caught (FIBER-U2); the caller calls
// scope_caught_end() once the handler has ended.
WEFT_API void open_scope(deadline_scope& s, std::chrono::steady_clock::time_point at);
WEFT_API void close_scope(deadline_scope& s) noexcept;
[[nodiscard]] WEFT_API bool scope_catch(deadline_scope& s) noexcept;
WEFT_API void scope_caught_end() noexcept;
// check_cancel() throws forced_unwind if t has a pending cancellation and is
// not shielded (a suspension point without a wait: yield, task start).
WEFT_API void check_cancel(task_record* t);
// request_cancel() records why t is to be canceled (the first reason stays)
// and ends its current wait if that wait is cancellable.
WEFT_API void request_cancel(task_record* t, wait_status why) noexcept;

// wait_any() waits until one of ts has finished and returns its index
// (when_any() in weft/runtime.hpp). Throws: std::invalid_argument if ts is
// empty; forced_unwind if the waiting task is canceled.
[[nodiscard]] WEFT_API std::size_t wait_any(std::span<task_record* const> ts);

// Joining (src/task/task.cpp). wait_finished() waits until t has finished:
// from a task it parks that task, from a thread it blocks the thread; until
// `deadline` if given. Returns true once t has finished. Throws: forced_unwind
// if the waiting task is canceled.
[[nodiscard]] WEFT_API bool wait_finished(task_record* t, const std::chrono::steady_clock::time_point* deadline);
// complete() is called by the scheduler once t's fiber is done and outcome,
// result and exception are set: publishes the end and wakes the joiners.
WEFT_API void complete(task_record* t) noexcept;
// release() drops one reference; the last one destroys the task.
WEFT_API void release(task_record* t) noexcept;
// detach() gives up the handle's reference (see finish flags).
WEFT_API void detach(task_record* t) noexcept;
// task_begin() / task_end() run on the task's stack around the body:
// cancellation before the first instruction, task_local destruction.
WEFT_API void task_begin(task_record* t);
WEFT_API void task_end(task_record* t) noexcept;
// rethrow_outcome() rethrows a failed task's exception or throws
// task_canceled for a canceled / timed-out one.
WEFT_API void rethrow_outcome(task_record* t);
// coarse_now_ns() is CLOCK_MONOTONIC_COARSE in nanoseconds (state stamps).
[[nodiscard]] WEFT_API std::int64_t coarse_now_ns() noexcept;
// set_state() changes a task's state and stamps the time.
WEFT_API void set_state(task_record* t, task_state s) noexcept;
// set_state_at() is set_state() with a stamp the caller already has (the
// scheduler's: the start of the running task's slice), without a clock read.
inline void set_state_at(task_record* t, task_state s, std::int64_t now_ns) noexcept {
    t->state.store(s, std::memory_order_release);
    t->state_since.store(now_ns, std::memory_order_relaxed);
}

}  // namespace weft::detail
