// weft/sync/semaphore.hpp: layer L5, a task-aware counting semaphore.
//
//   weft::counting_semaphore slots(4);
//   slots.acquire();  use_one_of_four();  slots.release();
//
// A waiting task suspends, a waiting plain thread blocks; both may use the
// same semaphore. Waiting is built on weft::waiter (weft/waiter.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <type_traits>

#include "weft/config.hpp"
#include "weft/waiter.hpp"

namespace weft {

// counting_semaphore holds a count of permits. acquire() takes one, waiting
// while there is none; release(n) gives n back.
//
// Fairness: release() hands its permits directly to the waiters, first come
// first served, and adds to the count only what no waiter takes; so a
// newcomer takes a permit ahead of a waiter only if it arrives before that
// waiter has queued.
//
// Invariants:
//   SYNC-P1  available() + permits held by callers == initial + released - acquired.
//            A permit is either in count_ or handed to exactly one claimed waiter
//            (WAITER-V1, WAITER-V2): release() claims a waiter before it hands it a permit, so
//            a waiter that timed out or was canceled (whose claim the releaser
//            loses) is never handed one: no permit is lost.
//   SYNC-P2  a waiter is queued only while count_ is 0; count_ grows only under
//            spin_, after the queue has been served.
class counting_semaphore {
public:
    // counting_semaphore() starts with `initial` permits. Throws:
    // std::invalid_argument if initial < 0.
    WEFT_API explicit counting_semaphore(std::ptrdiff_t initial);
    // ~counting_semaphore() requires that nobody waits.
    ~counting_semaphore() = default;
    counting_semaphore(const counting_semaphore&) = delete;
    counting_semaphore& operator=(const counting_semaphore&) = delete;

    // acquire() takes a permit, suspending the calling task (or blocking the
    // calling thread) while there is none. Throws: forced_unwind if the task
    // is canceled while it waits (it then holds no permit).
    void acquire() {
        if (!try_acquire()) (void)acquire_slow(nullptr);
    }
    // try_acquire() takes a permit if one is available now; never waits.
    [[nodiscard]] bool try_acquire() noexcept {
        std::ptrdiff_t c = count_.load(std::memory_order_relaxed);
        while (c > 0)
            if (count_.compare_exchange_weak(c, c - 1, std::memory_order_acquire, std::memory_order_relaxed))
                return true;
        return false;
    }
    // try_acquire_for() / try_acquire_until() are acquire() with a deadline:
    // true if a permit was taken, false once the deadline passed (never
    // earlier); a waiter that times out takes no permit (SYNC-P1). Throws: as
    // acquire().
    template <class Rep, class Period>
    [[nodiscard]] bool try_acquire_for(const std::chrono::duration<Rep, Period>& d) {
        return try_acquire_until(std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::nanoseconds>(d));
    }
    template <class Clock, class Duration>
    [[nodiscard]] bool try_acquire_until(const std::chrono::time_point<Clock, Duration>& t) {
        if constexpr (std::is_same_v<Clock, std::chrono::steady_clock>) {
            if (try_acquire()) return true;
            const std::chrono::steady_clock::time_point deadline =
                std::chrono::time_point_cast<std::chrono::steady_clock::duration>(t);
            return acquire_slow(&deadline);
        } else {
            return try_acquire_for(t - Clock::now());
        }
    }
    // release() gives back n permits: to the waiters first (FIFO), the rest
    // to the count. Throws: std::invalid_argument if n < 0.
    WEFT_API void release(std::ptrdiff_t n = 1);
    // available() is the number of permits available now (a snapshot).
    [[nodiscard]] std::ptrdiff_t available() const noexcept { return count_.load(std::memory_order_relaxed); }

private:
    WEFT_API bool acquire_slow(const std::chrono::steady_clock::time_point* deadline);

    std::atomic<std::ptrdiff_t> count_;
    spin_lock spin_;    // guards queue_ and every increase of count_ (SYNC-P2)
    wait_queue queue_;
};

}  // namespace weft
