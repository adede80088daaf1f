// weft/sync/event.hpp: layer L5, task-aware one-to-many signals: event,
// latch, wait_group and barrier.
//
//   weft::wait_group wg;
//   for (auto& job : jobs) { wg.add(1); weft::spawn([&] { run(job); wg.done(); }).detach(); }
//   wg.wait();
//
// A waiting task suspends, a waiting plain thread blocks; both may wait on
// the same object. Each waits through weft::waiter (weft/waiter.hpp). Each
// releases all its waiters at once, and every timed wait returns false once
// its deadline has passed (never earlier). A waiter that times out or is
// canceled unlinks itself and changes nothing else (barrier: see there).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "weft/config.hpp"
#include "weft/waiter.hpp"

namespace weft {

// event is a manual-reset event: set() wakes every waiter, and waits return
// at once until reset().
//
// Invariant SYNC-E1: a waiter is queued only while the event is not set (checked
// under spin_); set() stores the flag and takes the whole queue under spin_,
// so no waiter misses a set().
class event {
public:
    // event() starts set or not.
    explicit event(bool initially_set = false) noexcept : set_(initially_set) {}
    // ~event() requires that nobody waits.
    ~event() = default;
    event(const event&) = delete;
    event& operator=(const event&) = delete;

    // set() sets the event and wakes every waiter.
    WEFT_API void set() noexcept;
    // reset() clears it; later waits wait for the next set().
    WEFT_API void reset() noexcept;
    // is_set() says whether it is set now.
    [[nodiscard]] bool is_set() const noexcept { return set_.load(std::memory_order_acquire); }
    // wait() returns once the event is set (at once if it is). Throws:
    // forced_unwind if the task is canceled while it waits.
    void wait() {
        if (!is_set()) (void)wait_slow(nullptr);
    }
    // wait_for() / wait_until(): true if the event was set, false if the
    // deadline passed first. Throws: as wait().
    template <class Rep, class Period>
    [[nodiscard]] bool wait_for(const std::chrono::duration<Rep, Period>& d) {
        return wait_until(std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::nanoseconds>(d));
    }
    [[nodiscard]] bool wait_until(std::chrono::steady_clock::time_point deadline) {
        return is_set() || wait_slow(&deadline);
    }

private:
    WEFT_API bool wait_slow(const std::chrono::steady_clock::time_point* deadline);

    std::atomic<bool> set_;
    spin_lock spin_;
    wait_queue queue_;
};

// latch is a single-use countdown: wait() returns once count_down() has
// brought the count to zero (std::latch, with timed waits).
//
// Invariant SYNC-L1: a waiter is queued only while the count is above zero
// (checked under spin_); the count_down() that reaches zero takes the whole
// queue under spin_.
class latch {
public:
    // latch() starts at `expected`. Throws: std::invalid_argument if negative.
    WEFT_API explicit latch(std::ptrdiff_t expected);
    // ~latch() requires that nobody waits.
    ~latch() = default;
    latch(const latch&) = delete;
    latch& operator=(const latch&) = delete;

    // count_down() lowers the count by n; reaching zero wakes every waiter.
    // Throws: std::invalid_argument if n < 0 or n > the count (the count is
    // left as it was).
    WEFT_API void count_down(std::ptrdiff_t n = 1);
    // try_wait() says whether the count has reached zero.
    [[nodiscard]] bool try_wait() const noexcept { return count_.load(std::memory_order_acquire) == 0; }
    // wait() returns once the count is zero. Throws: forced_unwind if the
    // task is canceled while it waits.
    void wait() {
        if (!try_wait()) (void)wait_slow(nullptr);
    }
    // wait_for() / wait_until(): true if the count reached zero, false if
    // the deadline passed first. Throws: as wait().
    template <class Rep, class Period>
    [[nodiscard]] bool wait_for(const std::chrono::duration<Rep, Period>& d) {
        return wait_until(std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::nanoseconds>(d));
    }
    [[nodiscard]] bool wait_until(std::chrono::steady_clock::time_point deadline) {
        return try_wait() || wait_slow(&deadline);
    }
    // arrive_and_wait() is count_down(n) then wait(). Throws: as both.
    void arrive_and_wait(std::ptrdiff_t n = 1) {
        count_down(n);
        wait();
    }

private:
    WEFT_API bool wait_slow(const std::chrono::steady_clock::time_point* deadline);

    std::atomic<std::ptrdiff_t> count_;
    spin_lock spin_;
    wait_queue queue_;
};

// wait_group is Go's sync.WaitGroup: add() work, done() it, wait() until
// none is left. Reusable: once the count is zero, add() starts over.
//
// Invariant SYNC-G1: a waiter is queued only while the count is above zero
// (checked under spin_); the add() that brings it to zero takes the whole
// queue under spin_.
class wait_group {
public:
    wait_group() noexcept = default;
    // ~wait_group() requires that nobody waits.
    ~wait_group() = default;
    wait_group(const wait_group&) = delete;
    wait_group& operator=(const wait_group&) = delete;

    // add() changes the count by n (n may be negative); reaching zero wakes
    // every waiter. Throws: std::invalid_argument if the count would go
    // below zero (it is left as it was).
    WEFT_API void add(std::ptrdiff_t n);
    // done() is add(-1).
    void done() { add(-1); }
    // count() is the count now (a snapshot).
    [[nodiscard]] std::ptrdiff_t count() const noexcept { return count_.load(std::memory_order_acquire); }
    // wait() returns once the count is zero (at once if it is). Throws:
    // forced_unwind if the task is canceled while it waits.
    void wait() {
        if (count() != 0) (void)wait_slow(nullptr);
    }
    // wait_for() / wait_until(): true if the count reached zero, false if
    // the deadline passed first. Throws: as wait().
    template <class Rep, class Period>
    [[nodiscard]] bool wait_for(const std::chrono::duration<Rep, Period>& d) {
        return wait_until(std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::nanoseconds>(d));
    }
    [[nodiscard]] bool wait_until(std::chrono::steady_clock::time_point deadline) {
        return count() == 0 || wait_slow(&deadline);
    }

private:
    WEFT_API bool wait_slow(const std::chrono::steady_clock::time_point* deadline);

    std::atomic<std::ptrdiff_t> count_{0};
    spin_lock spin_;
    wait_queue queue_;
};

// barrier is a reusable rendezvous of `expected` parties (std::barrier
// without a completion function): each phase completes when that many have
// arrived, which wakes them all and starts the next phase.
//
// Invariants (all under spin_):
//   SYNC-B1  arrived_ < expected_ between calls: the arrival that reaches
//            expected_ completes the phase (arrived_ = 0, ++phase_) and takes
//            the whole queue.
//   SYNC-B2  a waiter that leaves early (timeout, cancellation) withdraws its
//            arrival (--arrived_) if and only if its phase has not completed;
//            if it has, its arrival counted and the phase stays completed.
class barrier {
public:
    // barrier() expects `expected` parties per phase. Throws:
    // std::invalid_argument if negative.
    WEFT_API explicit barrier(std::ptrdiff_t expected);
    // ~barrier() requires that nobody waits.
    ~barrier() = default;
    barrier(const barrier&) = delete;
    barrier& operator=(const barrier&) = delete;

    // arrive_and_wait() arrives at the current phase and waits until it
    // completes. Throws: forced_unwind if the task is canceled while it
    // waits: it withdraws its arrival first if the phase has not completed
    // (SYNC-B2), so the others then wait for one more party.
    void arrive_and_wait() { (void)arrive_wait(nullptr); }
    // arrive_and_wait_for() / arrive_and_wait_until(): arrive_and_wait()
    // with a deadline: true if the phase completed; false if the deadline
    // passed first, and then the arrival is withdrawn (SYNC-B2). Throws: as
    // arrive_and_wait().
    template <class Rep, class Period>
    [[nodiscard]] bool arrive_and_wait_for(const std::chrono::duration<Rep, Period>& d) {
        return arrive_and_wait_until(std::chrono::steady_clock::now() +
                                     std::chrono::ceil<std::chrono::nanoseconds>(d));
    }
    [[nodiscard]] bool arrive_and_wait_until(std::chrono::steady_clock::time_point deadline) {
        return arrive_wait(&deadline);
    }
    // arrive_and_drop() arrives at the current phase without waiting and
    // lowers the expected count of this and every later phase by one.
    // Throws: std::invalid_argument if the expected count is already zero.
    WEFT_API void arrive_and_drop();
    // expected() is the number of parties a phase waits for now.
    [[nodiscard]] WEFT_API std::ptrdiff_t expected() const noexcept;

private:
    WEFT_API bool arrive_wait(const std::chrono::steady_clock::time_point* deadline);
    wait_node* complete_phase() noexcept;

    mutable spin_lock spin_;
    wait_queue queue_;
    std::ptrdiff_t expected_;
    std::ptrdiff_t arrived_ = 0;
    std::uint64_t phase_ = 0;
};

}  // namespace weft
