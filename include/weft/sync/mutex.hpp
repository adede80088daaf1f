// weft/sync/mutex.hpp: layer L5, task-aware mutexes.
//
//   weft::mutex m;
//   { std::lock_guard g(m); ++shared_counter; }       // from a task or a thread
//
// mutex and shared_mutex suspend a waiting task (its worker runs other
// tasks) and block a waiting plain thread, so tasks and threads can share
// them. Both meet the standard Lockable and TimedLockable requirements
// (shared_mutex also SharedTimedLockable): std::lock_guard, std::unique_lock,
// std::scoped_lock and std::shared_lock work with them. Every wait is built on
// weft::waiter (weft/waiter.hpp, protocol WAITER-V1 - WAITER-V3) and is a suspension point:
// a task canceled while it waits unwinds (forced_unwind) without the lock,
// and leaves the mutex consistent. docs/sync.md describes the design.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "weft/config.hpp"
#include "weft/waiter.hpp"

namespace weft {

// mutex is a non-recursive mutual-exclusion lock for tasks and threads,
// after Go's sync.Mutex.
//
// Fairness. Normal mode: unlock() releases the lock and wakes the first
// waiter, which then competes with newcomers ("barging": a running locker
// usually wins, which keeps the lock hot on one worker). A woken waiter that
// loses queues again at the back. A waiter that has waited more than 1 ms and
// loses switches the mutex to starvation mode: then unlock() hands the lock
// directly to the first waiter (FIFO) and newcomers queue behind the
// waiters. The mutex leaves starvation mode when the queue is empty or the
// waiter it hands the lock to has waited less than 1 ms. So no waiter
// starves: once one has waited 1 ms, every waiter ahead of it and then it is
// served before any newcomer.
//
// Cost. An uncontended lock() and unlock() are one atomic each. A contended
// locker spins briefly (a few hundred nanoseconds, only on a machine with
// more than one CPU, where the holder may be running) before it parks.
class mutex {
public:
    mutex() noexcept = default;
    // ~mutex() requires that the mutex is not locked and nobody waits.
    ~mutex() = default;
    mutex(const mutex&) = delete;
    mutex& operator=(const mutex&) = delete;

    // lock() takes the lock, suspending the calling task (or blocking the
    // calling thread) while another holds it. Requires: the caller does not
    // hold it. Throws: forced_unwind if the task is canceled while it waits
    // (then it does not hold the lock).
    void lock() {
        std::uint32_t expect = 0;
        if (state_.compare_exchange_strong(expect, locked_bit, std::memory_order_acquire,
                                           std::memory_order_relaxed)) [[likely]]
            return;
        (void)lock_slow(nullptr);
    }
    // try_lock() takes the lock if nobody holds it, without waiting; true if
    // it did. In starvation mode the lock is always held (it is handed from
    // owner to waiter), so a newcomer never jumps the queue.
    [[nodiscard]] bool try_lock() noexcept {
        std::uint32_t s = state_.load(std::memory_order_relaxed);
        while (!(s & locked_bit))
            if (state_.compare_exchange_weak(s, s | locked_bit, std::memory_order_acquire,
                                             std::memory_order_relaxed))
                return true;
        return false;
    }
    // try_lock_for() / try_lock_until() are lock() with a deadline: true if
    // the lock was taken; false once the deadline has passed (never
    // earlier). A waiter that times out holds nothing and leaves the mutex
    // consistent. Throws: forced_unwind, as lock().
    template <class Rep, class Period>
    [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
        return try_lock_until(std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::nanoseconds>(d));
    }
    template <class Clock, class Duration>
    [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
        if constexpr (std::is_same_v<Clock, std::chrono::steady_clock>) {
            if (try_lock()) return true;
            const std::chrono::steady_clock::time_point deadline =
                std::chrono::time_point_cast<std::chrono::steady_clock::duration>(t);
            return lock_slow(&deadline);
        } else {
            return try_lock_for(t - Clock::now());
        }
    }
    // unlock() releases the lock (normal mode) or hands it to the first
    // waiter (starvation mode). Requires: the lock is held (by the caller;
    // not checked). Throws: std::system_error (operation_not_permitted) if
    // the mutex is not locked.
    void unlock() {
        std::uint32_t expect = locked_bit;
        if (state_.compare_exchange_strong(expect, 0, std::memory_order_release, std::memory_order_relaxed))
            [[likely]]
            return;
        unlock_slow();
    }

private:
    // state_ bits. Invariants (kept by lock_slow() and unlock_slow()):
    //   SYNC-M1  locked_bit: someone owns the lock. Set by a locker's CAS, or kept
    //            set by unlock() when it hands the lock to a waiter.
    //   SYNC-M2  waiters_bit: the queue may be non-empty. Set under spin_ by a
    //            waiter before it links itself, cleared under spin_ only when the
    //            queue is empty; so an unlock() that sees it clear (the fast
    //            path) has nobody to wake.
    //   SYNC-M3  starving_bit implies locked_bit outside spin_: it is set by a
    //            waiter that fails to take a held lock and cleared whenever the
    //            lock is released; so in starvation mode nobody can barge.
    //   SYNC-M4  woken_bit: a waiter claimed and woken in normal mode has not yet
    //            run its next attempt; unlock() wakes no other meanwhile. The
    //            woken waiter clears it in the same CAS that takes the lock or
    //            queues it again.
    //   SYNC-M5  a woken waiter that cannot run (its worker runs a task that
    //            keeps re-locking without ever parking) would keep woken_bit set
    //            and so stop all wakes; so every 64th unlock that sees woken_bit
    //            checks the queue's front, and if it has waited more than 1 ms,
    //            switches to starvation mode and hands the lock to it.
    static constexpr std::uint32_t locked_bit = 1, waiters_bit = 2, starving_bit = 4, woken_bit = 8;

    // lock_slow() is lock() / try_lock_until() once the fast path failed;
    // false if the deadline (null: none) passed.
    WEFT_API bool lock_slow(const std::chrono::steady_clock::time_point* deadline);
    WEFT_API void unlock_slow();

    std::atomic<std::uint32_t> state_{0};
    std::uint32_t skips_ = 0;  // unlocks that skipped a wake (SYNC-M5); written by the owner only
    spin_lock spin_;     // guards queue_ and every change of waiters_bit and starving_bit
    wait_queue queue_;   // parked lockers, FIFO
};

// shared_mutex is a reader-writer lock for tasks and threads: many readers
// (lock_shared) or one writer (lock).
//
// Fairness (writer preference, without starving readers): a reader does not
// take the lock while a writer holds it or waits for it, so a stream of
// readers cannot starve a writer. When a writer unlocks, every reader that
// waits at that moment is admitted before the next writer; when the last
// reader unlocks, the first waiting writer gets the lock. Hand-over is
// direct (the waker marks the lock taken for the woken party), FIFO among
// writers and among readers.
class shared_mutex {
public:
    shared_mutex() noexcept = default;
    // ~shared_mutex() requires that it is not locked and nobody waits.
    ~shared_mutex() = default;
    shared_mutex(const shared_mutex&) = delete;
    shared_mutex& operator=(const shared_mutex&) = delete;

    // lock() takes the lock exclusively, waiting while readers or a writer
    // hold it. Throws: forced_unwind if the task is canceled while it waits
    // (then it holds nothing).
    WEFT_API void lock();
    // try_lock() takes the lock exclusively if it is free; never waits.
    [[nodiscard]] WEFT_API bool try_lock() noexcept;
    // try_lock_for() / try_lock_until() are lock() with a deadline: true if
    // taken, false once the deadline passed (never earlier). A writer that
    // gives up lets in the readers that queued behind it.
    template <class Rep, class Period>
    [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
        return try_lock_until(std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::nanoseconds>(d));
    }
    [[nodiscard]] WEFT_API bool try_lock_until(std::chrono::steady_clock::time_point deadline);
    // unlock() releases the exclusive lock. Throws: std::system_error
    // (operation_not_permitted) if it is not held exclusively.
    WEFT_API void unlock();

    // lock_shared() takes the lock shared, waiting while a writer holds it
    // or waits for it. Throws: forced_unwind, as lock().
    WEFT_API void lock_shared();
    // try_lock_shared() takes the lock shared if no writer holds or waits;
    // never waits.
    [[nodiscard]] WEFT_API bool try_lock_shared() noexcept;
    // try_lock_shared_for() / try_lock_shared_until() are lock_shared() with
    // a deadline: true if taken, false once the deadline passed.
    template <class Rep, class Period>
    [[nodiscard]] bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& d) {
        return try_lock_shared_until(std::chrono::steady_clock::now() +
                                     std::chrono::ceil<std::chrono::nanoseconds>(d));
    }
    [[nodiscard]] WEFT_API bool try_lock_shared_until(std::chrono::steady_clock::time_point deadline);
    // unlock_shared() releases one shared hold. Throws: std::system_error
    // (operation_not_permitted) if no reader holds it.
    WEFT_API void unlock_shared();

private:
    bool lock_wait(bool exclusive, const std::chrono::steady_clock::time_point* deadline);
    void admit_readers(wait_node*& woken) noexcept;

    // All guarded by spin_. Invariants:
    //   SYNC-S1  writer_ and readers_ > 0 never hold together.
    //   SYNC-S2  a reader is queued only while a writer holds the lock or waits;
    //            whoever ends the last of those (unlock(), or a writer that gives
    //            up) admits the queued readers.
    //   SYNC-S3  a writer is queued only while the lock is held; each unlock()
    //            and last unlock_shared() hands the lock to a queued writer or
    //            to the queued readers, so a free lock has nobody queued.
    spin_lock spin_;
    bool writer_ = false;
    std::ptrdiff_t readers_ = 0;
    wait_queue writers_q_;
    wait_queue readers_q_;
};

}  // namespace weft
