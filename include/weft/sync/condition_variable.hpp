// weft/sync/condition_variable.hpp: layer L5, a task-aware condition
// variable.
//
//   weft::mutex m;  weft::condition_variable cv;  bool ready = false;
//   std::unique_lock lk(m);
//   cv.wait(lk, [&] { return ready; });              // from a task or a thread
//
// Like std::condition_variable_any it works with any lock (wait() is a
// template over the lock type): std::unique_lock<weft::mutex> suspends a
// waiting task, std::unique_lock<std::mutex> also works (re-locking a
// std::mutex blocks the worker thread, though). A waiting task suspends, a
// waiting plain thread blocks; they may wait on the same variable.
#pragma once

#include <chrono>
#include <condition_variable>
#include <type_traits>
#include <utility>

#include "weft/config.hpp"
#include "weft/waiter.hpp"

namespace weft {

// condition_variable is a queue of waiters woken by notify_one() (the
// longest-waiting one still waiting) and notify_all() (all waiting now).
//
// Invariants:
//   SYNC-CV1  a waiter is linked before it releases the user's lock, so a notify
//             issued after that release (and any made under the lock after the
//             waiter's predicate check) finds it: no lost notify.
//   SYNC-CV2  notify_one() claims a waiter before waking it (WAITER-V1); a waiter that
//             timed out or was canceled cannot be claimed, so the notify goes to
//             the next waiter that is still waiting, never to one that left.
//   SYNC-CV3  every wait() returns, or unwinds, with the user's lock held again
//             (std semantics), even when the task is canceled: the re-lock runs
//             under a shield, so it cannot itself be interrupted.
class condition_variable {
public:
    condition_variable() noexcept = default;
    // ~condition_variable() requires that nobody waits.
    ~condition_variable() = default;
    condition_variable(const condition_variable&) = delete;
    condition_variable& operator=(const condition_variable&) = delete;

    // notify_one() wakes the longest-waiting waiter that still waits, if any.
    WEFT_API void notify_one() noexcept;
    // notify_all() wakes every waiter that waits now.
    WEFT_API void notify_all() noexcept;

    // wait() releases lk, waits for a notify and re-locks lk. Spurious
    // wake-ups are possible (use the predicate form). Requires: lk is locked
    // by the caller. Throws: forced_unwind if the task is canceled while it
    // waits (lk is locked again first, SYNC-CV3); what lk.unlock() throws (then
    // lk is as it was).
    template <class Lock>
    void wait(Lock& lk) {
        (void)wait_impl(lk, nullptr);
    }
    // wait(lk, pred) is `while (!pred()) wait(lk);`.
    template <class Lock, class Predicate>
    void wait(Lock& lk, Predicate pred) {
        while (!pred()) wait(lk);
    }
    // wait_until() / wait_for() are wait() with a deadline: timeout once the
    // deadline has passed (never earlier), no_timeout on a notify (or a
    // spurious wake-up). lk is locked again either way. A waiter that times
    // out consumes no notify (SYNC-CV2). Throws: as wait().
    template <class Lock>
    std::cv_status wait_until(Lock& lk, std::chrono::steady_clock::time_point deadline) {
        return wait_impl(lk, &deadline);
    }
    template <class Lock, class Clock, class Duration>
    std::cv_status wait_until(Lock& lk, const std::chrono::time_point<Clock, Duration>& t) {
        if constexpr (std::is_same_v<Clock, std::chrono::steady_clock>)
            return wait_until(lk, std::chrono::time_point_cast<std::chrono::steady_clock::duration>(t));
        else
            return wait_for(lk, t - Clock::now());
    }
    template <class Lock, class Rep, class Period>
    std::cv_status wait_for(Lock& lk, const std::chrono::duration<Rep, Period>& d) {
        return wait_until(lk, std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::nanoseconds>(d));
    }
    // The predicate forms return pred() as it is when they return: false
    // only if the deadline passed with the predicate still false.
    template <class Lock, class Clock, class Duration, class Predicate>
    bool wait_until(Lock& lk, const std::chrono::time_point<Clock, Duration>& t, Predicate pred) {
        while (!pred())
            if (wait_until(lk, t) == std::cv_status::timeout) return pred();
        return true;
    }
    template <class Lock, class Rep, class Period, class Predicate>
    bool wait_for(Lock& lk, const std::chrono::duration<Rep, Period>& d, Predicate pred) {
        return wait_until(lk, std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::nanoseconds>(d),
                          std::move(pred));
    }

private:
    template <class Lock>
    std::cv_status wait_impl(Lock& lk, const std::chrono::steady_clock::time_point* deadline) {
        detail::stable<one_wait> s;  // WAITER-V4
        waiter& w = s->w;
        wait_node& n = s->n;
        enqueue(&n);  // SYNC-CV1: before lk is released
        try {
            lk.unlock();
        } catch (...) {
            abandon(&n);
            throw;
        }
        const waiter::outcome o = w.wait(deadline);
        if (o != waiter::outcome::notified) dequeue(&n);  // WAITER-V3
        relock(lk);                                        // SYNC-CV3
        if (o == waiter::outcome::canceled) throw_canceled();
        return o == waiter::outcome::timed_out ? std::cv_status::timeout : std::cv_status::no_timeout;
    }
    template <class Lock>
    static void relock(Lock& lk) {
        if (this_task::inside()) {
            this_task::shield s;
            lk.lock();
        } else {
            lk.lock();
        }
    }

    // enqueue() arms n's waiter and links n (WAITER-V1); dequeue() unlinks it (WAITER-V3);
    // abandon() ends a wait that never started waiting (the user's unlock()
    // threw), passing on a notify it may have been claimed by.
    WEFT_API void enqueue(wait_node* n) noexcept;
    WEFT_API void dequeue(wait_node* n) noexcept;
    WEFT_API void abandon(wait_node* n) noexcept;

    spin_lock spin_;
    wait_queue queue_;
};

}  // namespace weft
