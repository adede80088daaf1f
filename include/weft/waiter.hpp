// weft/waiter.hpp: layer L3's one waiter. Everything in weft that suspends
// (the sync primitives and channels of L5, and later sockets and C++20
// co_await) waits through it, so each primitive is written once and works
// from a task and from a plain thread alike:
//
//   waiter       one wait of the calling task (which parks: its worker runs
//                other tasks) or of the calling plain thread (which sleeps
//                on a futex);
//   wait_node    an intrusive link of a waiter in a primitive's queue (a
//                select has one node per case, all for the same waiter);
//   wait_queue   a primitive's FIFO of nodes;
//   spin_lock    the lock a primitive guards its queues with.
// (wait_node, wait_queue and spin_lock are defined in
// weft/detail/task_record.hpp, which this header includes through
// weft/task.hpp: a task record holds the wait_queue of the waiters that join
// it, TASK-J1 there.)
//
// The protocol (docs/sync.md):
//   WAITER-V1  A waiter is armed under the primitive's lock, before its node is
//              linked; from then on exactly one party claims it (claim() or
//              claim_self() returns true once, or the waiter's own timeout or
//              cancellation ends it): the one atomic claim per waiter of Go's
//              selectDone. For a task this is the wait word's TASK-W2.
//   WAITER-V2  A waker writes what it hands over (a value, a lock, a case index)
//              after its claim and before wake(); the waiter reads it after wait()
//              returns `notified`. A waker that loses the claim hands nothing over,
//              so nothing is lost or duplicated.
//   WAITER-V3  A waiter that leaves for any other reason (timeout, cancellation, a
//              select case won elsewhere) unlinks its nodes under the primitive's
//              lock before its frame ends; wait_queue::remove() of a node already
//              taken out does nothing.
//   WAITER-V4  Everything another party reads or writes while the waiting party is
//              suspended (the waiter, its nodes, the hand-over slots a node points
//              at) lives at an address whose bytes stay the waiter's until the wait
//              has ended: in the waiting frame when that frame is on a stack of its
//              own, in a heap block when it is on a shared (copy) stack, whose bytes
//              belong to the next coroutine of that stack while this one is
//              suspended (detail::stable below; docs/runtime.md, "What a copy-stack
//              task may point at"). Debug builds check it where nodes are linked.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <new>
#include <thread>
#include <utility>

#include "weft/config.hpp"
#include "weft/task.hpp"

namespace weft {

namespace detail {
struct stackless_tag {};

// on_shared_stack() says whether the calling code runs on a shared (copy)
// stack: a copy-stack task, or a copy-stack coroutine. Its frames are then
// overwritten while it is suspended (WAITER-V4).
[[nodiscard]] inline bool on_shared_stack() noexcept {
    const fiber_record* f = this_thread_state()->current;
    return f && f->copy_mode;
}

// in_arena_task() says whether the calling code runs on a runtime task's
// fiber that has a wait arena (its stack may be shrunk while it waits:
// SHRINK-A1, SHRINK-A2).
[[nodiscard]] inline bool in_arena_task() noexcept {
    const fiber_record* f = this_thread_state()->current;
    return f && f->arena;
}

// check_no_pointer_into_shared_stack() aborts, naming the running task, if
// any aligned word of the n bytes at obj holds an address on the shared
// stack the caller runs on (a callable that another thread will run while
// the caller is suspended, capturing the caller's locals by reference).
// Debug builds only; a heuristic that has no false negatives for plain
// pointer and reference captures.
WEFT_API void check_no_pointer_into_shared_stack(const void* obj, std::size_t n, const char* what) noexcept;

// stable<T> holds one T that other parties reach while its owner is
// suspended (WAITER-V4): in the owner's frame; in a heap block of its own when
// the owner runs on a shared stack (one allocation per wait there); in the
// task fiber's wait arena when the owner is a runtime task whose stack may
// be shrunk (a bump, no allocation: SHRINK-A1), or, when T does not fit
// there, in a heap block of its own (as on a shared stack: the task may
// still be shrunk).
// Throws: std::bad_alloc, and what T's constructor throws.
template <class T>
class stable {
public:
    template <class... A>
    explicit stable(A&&... a) {
        fiber_record* f = this_thread_state()->current;
        if (!f) {
            p_ = ::new (static_cast<void*>(here_)) T(std::forward<A>(a)...);
        } else if (f->copy_mode) [[unlikely]] {
            p_ = new T(std::forward<A>(a)...);
        } else if (wait_arena* w = f->arena) {
            if constexpr (alignof(T) <= 16 && sizeof(T) <= wait_arena::capacity) {
                constexpr std::uint32_t al = alignof(T);
                const std::uint32_t at = (w->used + al - 1) & ~(al - 1);
                if (at + sizeof(T) <= wait_arena::capacity) {
                    const std::uint32_t mark = w->used;
                    w->used = at + static_cast<std::uint32_t>(sizeof(T));  // SHRINK-A1
                    try {
                        p_ = ::new (static_cast<void*>(w->bytes + at)) T(std::forward<A>(a)...);
                    } catch (...) {
                        w->used = mark;
                        throw;
                    }
                    arena_ = w;
                    mark_ = mark;
                    return;
                }
            }
            p_ = new T(std::forward<A>(a)...);
        } else {
            p_ = ::new (static_cast<void*>(here_)) T(std::forward<A>(a)...);
        }
    }
    ~stable() {
        if (static_cast<void*>(p_) == static_cast<void*>(here_)) {
            p_->~T();
        } else if (arena_) {
            p_->~T();
            arena_->used = mark_;  // SHRINK-A1
        } else {
            delete p_;
        }
    }
    stable(const stable&) = delete;
    stable& operator=(const stable&) = delete;

    T& operator*() const noexcept { return *p_; }
    T* operator->() const noexcept { return p_; }
    T* get() const noexcept { return p_; }
    // off_frame() says whether the T is off the owner's frame (a heap block,
    // or a wait arena): what the owner hands over must then be copied in
    // too.
    [[nodiscard]] bool off_frame() const noexcept {
        return static_cast<const void*>(p_) != static_cast<const void*>(here_);
    }

private:
    alignas(T) std::byte here_[sizeof(T)];
    T* p_;
    wait_arena* arena_ = nullptr;
    std::uint32_t mark_ = 0;
};

// stack_pin keeps the calling task's stack from being shrunk while it lives
// (SHRINK-A2): around a wait during which another party may touch the task's
// frames (a blocking() callable's references, the buffer of an io_uring
// operation). Does nothing outside a task fiber that has a wait arena.
class stack_pin {
public:
    stack_pin() noexcept {
        if (fiber_record* f = this_thread_state()->current)
            if ((a_ = f->arena)) ++a_->pins;
    }
    ~stack_pin() {
        if (a_) --a_->pins;
    }
    stack_pin(const stack_pin&) = delete;
    stack_pin& operator=(const stack_pin&) = delete;

private:
    wait_arena* a_ = nullptr;
};
}  // namespace detail

// spin_lock, wait_node, wait_queue: see the top (weft/detail/task_record.hpp).

// waiter is one wait of the calling task or thread (see WAITER-V1 - WAITER-V3 above). It
// lives on the waiting party's stack. Construct it where the wait begins (it
// binds to the calling task, or to the thread when not inside a task), arm()
// it under the primitive's lock, link its node(s), unlock, then wait().
class waiter {
public:
    // outcome is why wait() returned.
    enum class outcome : std::uint8_t { notified, timed_out, canceled };

    // waiter() binds to the calling task or thread. Throws: task_error
    // (needs_stack) from a C++20 task's coroutine, which waits with
    // co_await instead (weft/async.hpp).
    WEFT_API waiter();
    // waiter(stackless_tag) binds to the calling task even when it is a C++20
    // task: weft/async.hpp's own awaiters, which never call wait().
    WEFT_API explicit waiter(detail::stackless_tag) noexcept;
    waiter(const waiter&) = delete;
    waiter& operator=(const waiter&) = delete;

    // arm() starts the wait (WAITER-V1). Called by the waiting party, under the
    // primitive's lock, before any node of it is linked. A task whose
    // cancellation is pending ends the wait at once (wait() returns
    // canceled) unless `cancellable` is false.
    WEFT_API void arm(bool cancellable = true) noexcept;
    // claim() is a waker's attempt to end the wait; true for exactly one
    // party (WAITER-V1). Call with the primitive's lock held, while the node is
    // still linked (or just unlinked by the caller).
    WEFT_API bool claim() noexcept;
    // wake() lets the waiter run again after claim() returned true and the
    // hand-over is written (WAITER-V2). May be called after the primitive's lock is
    // released; the waiter's frame stays alive until it has been called.
    WEFT_API void wake() noexcept;
    // claim_self() ends the waiter's own armed wait before it waits (a
    // select that found a ready case while linking). True if it won; then
    // wait() must not be called. False: a waker (or the timeout or a
    // cancellation) won, and wait() returns at once with its outcome.
    WEFT_API bool claim_self() noexcept;
    // wait() suspends the calling task (or blocks the calling thread) until
    // the wait is ended: by a waker (notified), by `deadline` passing
    // (timed_out; null: no deadline) or by the task's cancellation
    // (canceled). Never returns before a waker's wake() has been called.
    WEFT_API outcome wait(const std::chrono::steady_clock::time_point* deadline = nullptr);

    // in_task() says whether the waiting party is a task.
    [[nodiscard]] bool in_task() const noexcept { return task_ != nullptr; }

    // What a waker hands over with its claim (WAITER-V2): which node fired (a
    // select case index) and a primitive-specific code.
    int fired = -1;
    int code = 0;

private:
    detail::task_record* task_;
    std::uint64_t word_ = 0;
    // A thread's wait: 0 armed, 1 claimed (hand-over being written),
    // 2 woken, 3 timed out. Unused for a task (its wait word is the claim).
    std::atomic<std::uint32_t> state_{0};
};

// throw_canceled() unwinds a task whose wait ended with `canceled`
// (docs/design.md, "Cancellation is an unwind").
[[noreturn]] WEFT_API void throw_canceled();

// wait_queue::pop_claimed() (declared with wait_queue in
// weft/detail/task_record.hpp).
inline wait_node* wait_queue::pop_claimed() noexcept {
    while (wait_node* n = list_.pop_front()) {
        n->linked = false;
        if (n->w->claim()) return n;
    }
    return nullptr;
}

// claim_all() takes every waiter of q that is still waiting, in FIFO order,
// chained through `next` (a claimed node is unlinked: its link is ours until
// its waiter is woken). Call under the lock that guards q. wake_all() then
// wakes the chain after that lock is released, reading each node before its
// waiter runs on and ends it. Together they are "wake everybody": event::set()
// and the end of a joined task.
inline wait_node* claim_all(wait_queue& q) noexcept {
    detail::intrusive_fifo<wait_node, detail::fifo_link<wait_node, &wait_node::next>> claimed;
    while (wait_node* n = q.pop_claimed()) claimed.push_back(n);
    return claimed.front();
}

inline void wake_all(wait_node* n) noexcept {
    while (n) {
        wait_node* next = n->next;
        n->w->wake();
        n = next;
    }
}

// one_wait is the common wait: one waiter, one node (and the primitive's
// slot, if any, set by the caller). Held in a detail::stable (WAITER-V4).
struct one_wait {
    waiter w;
    wait_node n{.w = &w};
    one_wait() = default;
    one_wait(const one_wait&) = delete;
    one_wait& operator=(const one_wait&) = delete;
};

}  // namespace weft
