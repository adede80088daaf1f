// mutex.cpp: layer L5, mutex and shared_mutex (weft/sync/mutex.hpp).
//
// Both wait through weft::waiter (WAITER-V1 - WAITER-V3). Whatever a waker hands over (the
// lock, or the right to compete for it) it writes after its claim, so a
// waiter that timed out or was canceled, whose claim the waker lost, is
// handed nothing: no lock is ever held by a waiter that has left.

#include "weft/sync/mutex.hpp"

#include <string>
#include <system_error>
#include <thread>

namespace weft {

namespace {

using clock = std::chrono::steady_clock;

// waiter::code of a woken locker.
constexpr int compete = 0;      // normal mode: the lock was released; try again
constexpr int handed_over = 1;  // the lock is yours (starvation mode, shared_mutex)

// Go's starvationThresholdNs.
constexpr auto starvation_threshold = std::chrono::milliseconds(1);

// A spin is worth it only while the holder may be running on another CPU;
// 64 rounds of pause are a few hundred nanoseconds, less than a park and wake.
constexpr int spin_rounds = 64;

// While a woken waiter has not run yet (SYNC-M4), every check_every-th unlock
// looks at the queue's front instead of skipping the wake (SYNC-M5).
constexpr std::uint32_t check_every = 64;

bool may_spin() noexcept {
    static const bool multi = std::thread::hardware_concurrency() > 1;
    return multi;
}

inline void cpu_relax() noexcept {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

[[noreturn]] void not_locked(const char* what) {
    std::string m = "weft: ";
    m += what;
    if (this_task::inside()) {
        m += " (from task '";
        m += this_task::name();
        m += "' id ";
        m += std::to_string(this_task::id());
        m += ")";
    }
    throw std::system_error(std::make_error_code(std::errc::operation_not_permitted), m);
}

// wake_list() wakes the claimed nodes chained through `next` (see
// shared_mutex::admit_readers); each node is read before its waiter runs on.
void wake_list(wait_node* n) noexcept {
    while (n) {
        wait_node* next = n->next;
        waiter* w = n->w;
        w->wake();
        n = next;
    }
}

}  // namespace

// ---- mutex -------------------------------------------------------------------

bool mutex::lock_slow(const clock::time_point* deadline) {
    // `since`: when this locker first queued; unlock_slow() reads it
    // through the node's slot (starvation mode). Off a shared stack (WAITER-V4).
    struct locker : one_wait {
        clock::time_point since{};
    };
    detail::stable<locker> l;
    waiter& w = l->w;
    wait_node& n = l->n;
    clock::time_point& since = l->since;
    n.slot = &since;
    bool woken = false;     // SYNC-M4: woken_bit is ours to clear
    bool starving = false;  // waited more than the threshold
    for (;;) {
        if (may_spin()) {
            for (int i = 0; i < spin_rounds; ++i) {
                std::uint32_t s = state_.load(std::memory_order_relaxed);
                if (s & starving_bit) break;  // SYNC-M3: the lock goes to the queue, spinning cannot win
                if (!(s & locked_bit)) {
                    if (state_.compare_exchange_weak(s, (s | locked_bit) & ~(woken ? woken_bit : 0u),
                                                     std::memory_order_acquire, std::memory_order_relaxed))
                        return true;
                    continue;
                }
                cpu_relax();
            }
        }
        if (since == clock::time_point{}) since = clock::now();
        spin_.lock();
        std::uint32_t s = state_.load(std::memory_order_relaxed);
        for (;;) {
            const std::uint32_t mine = woken ? woken_bit : 0u;
            if (!(s & locked_bit)) {
                // Free, hence not starving (SYNC-M3): take it.
                if (state_.compare_exchange_weak(s, (s | locked_bit) & ~mine, std::memory_order_acquire,
                                                 std::memory_order_relaxed)) {
                    spin_.unlock();
                    return true;
                }
                continue;
            }
            // SYNC-M2: waiters_bit is set before the node is linked, in the same
            // CAS that saw the lock held, so the holder's unlock() cannot
            // take the fast path past us. SYNC-M3: starving_bit only on a held lock.
            const std::uint32_t next = (s | waiters_bit | (starving ? starving_bit : 0u)) & ~mine;
            if (state_.compare_exchange_weak(s, next, std::memory_order_relaxed, std::memory_order_relaxed)) break;
        }
        woken = false;
        w.arm();
        queue_.push_back(&n);
        spin_.unlock();
        const waiter::outcome o = w.wait(deadline);
        if (o == waiter::outcome::notified) {
            if (w.code == handed_over) return true;  // SYNC-M1: unlock_slow() kept locked_bit set for us
            woken = true;
            if (!starving) starving = clock::now() - since > starvation_threshold;
            continue;
        }
        // Timed out or canceled: nobody claimed us, so nothing was handed
        // over (WAITER-V2); unlink (WAITER-V3) and leave the state as if we never came.
        spin_.lock();
        queue_.remove(&n);
        if (queue_.empty()) state_.fetch_and(~(waiters_bit | starving_bit), std::memory_order_relaxed);
        spin_.unlock();
        if (o == waiter::outcome::canceled) throw_canceled();
        return false;
    }
}

void mutex::unlock_slow() {
    std::uint32_t s = state_.load(std::memory_order_relaxed);
    for (;;) {
        if (!(s & locked_bit)) [[unlikely]]
            not_locked("unlock of a weft::mutex that is not locked");
        if (s & starving_bit) break;
        if (!(s & waiters_bit) || ((s & woken_bit) && ++skips_ % check_every != 0)) {
            // Nobody to wake, or a woken waiter is about to try (SYNC-M4).
            if (state_.compare_exchange_weak(s, s & ~locked_bit, std::memory_order_release,
                                             std::memory_order_relaxed))
                return;
            continue;
        }
        break;
    }
    spin_.lock();
    s = state_.load(std::memory_order_relaxed);
    if ((s & woken_bit) && !(s & starving_bit)) {
        // SYNC-M5: the woken waiter has not run for check_every unlocks (on a
        // worker that a re-locking task never leaves, it cannot): the
        // queue's front decides instead whether the mutex starves.
        if (const wait_node* f = queue_.front();
            f && clock::now() - *static_cast<const clock::time_point*>(f->slot) > starvation_threshold) {
            state_.fetch_or(starving_bit, std::memory_order_relaxed);  // SYNC-M3: we hold the lock
            s |= starving_bit;
        }
    }
    wait_node* n = queue_.pop_claimed();
    const bool empty = queue_.empty();
    waiter* w = n ? n->w : nullptr;
    if (s & starving_bit) {
        // starving_bit cannot change while we hold spin_ (SYNC-M3).
        if (!n) {
            state_.fetch_and(~(locked_bit | waiters_bit | starving_bit), std::memory_order_release);
        } else {
            // Hand-over: locked_bit stays set, now for the waiter (SYNC-M1).
            // Leave starvation mode as Go does: queue empty, or the new
            // owner has not waited long.
            const clock::time_point since = *static_cast<const clock::time_point*>(n->slot);
            if (empty || clock::now() - since < starvation_threshold)
                state_.fetch_and(~(starving_bit | (empty ? waiters_bit : 0u)), std::memory_order_relaxed);
            w->code = handed_over;
        }
    } else {
        const std::uint32_t clear = locked_bit | (empty ? waiters_bit : 0u);
        const std::uint32_t set = n ? woken_bit : 0u;
        while (!state_.compare_exchange_weak(s, (s & ~clear) | set, std::memory_order_release,
                                             std::memory_order_relaxed)) {
        }
        if (w) w->code = compete;
    }
    spin_.unlock();
    if (w) w->wake();
}

// ---- shared_mutex --------------------------------------------------------------

void shared_mutex::admit_readers(wait_node*& woken) noexcept {
    while (wait_node* n = readers_q_.pop_claimed()) {
        ++readers_;
        n->w->code = handed_over;
        n->next = woken;  // unlinked: the link is ours until wake()
        woken = n;
    }
}

bool shared_mutex::lock_wait(bool exclusive, const clock::time_point* deadline) {
    detail::stable<one_wait> s;  // WAITER-V4
    waiter& w = s->w;
    wait_node& n = s->n;
    wait_queue& q = exclusive ? writers_q_ : readers_q_;
    spin_.lock();
    if (exclusive ? (!writer_ && readers_ == 0) : (!writer_ && writers_q_.empty())) {
        if (exclusive)
            writer_ = true;
        else
            ++readers_;
        spin_.unlock();
        return true;
    }
    w.arm();
    q.push_back(&n);
    spin_.unlock();
    const waiter::outcome o = w.wait(deadline);
    if (o == waiter::outcome::notified) return true;  // the waker took the lock for us (SYNC-S2, SYNC-S3)
    wait_node* woken = nullptr;
    spin_.lock();
    q.remove(&n);
    // SYNC-S2: readers may be queued only because of this writer.
    if (exclusive && !writer_ && writers_q_.empty()) admit_readers(woken);
    spin_.unlock();
    wake_list(woken);
    if (o == waiter::outcome::canceled) throw_canceled();
    return false;
}

void shared_mutex::lock() { (void)lock_wait(true, nullptr); }

bool shared_mutex::try_lock() noexcept {
    spin_.lock();
    const bool ok = !writer_ && readers_ == 0;
    if (ok) writer_ = true;
    spin_.unlock();
    return ok;
}

bool shared_mutex::try_lock_until(clock::time_point deadline) { return lock_wait(true, &deadline); }

void shared_mutex::unlock() {
    wait_node* woken = nullptr;
    waiter* writer = nullptr;
    spin_.lock();
    if (!writer_) {
        spin_.unlock();
        not_locked("unlock of a weft::shared_mutex that is not locked exclusively");
    }
    writer_ = false;
    // Readers first (they queued behind this writer), then the next writer.
    admit_readers(woken);
    if (!woken)
        if (wait_node* n = writers_q_.pop_claimed()) {
            writer_ = true;
            writer = n->w;
            writer->code = handed_over;
        }
    spin_.unlock();
    wake_list(woken);
    if (writer) writer->wake();
}

void shared_mutex::lock_shared() { (void)lock_wait(false, nullptr); }

bool shared_mutex::try_lock_shared() noexcept {
    spin_.lock();
    const bool ok = !writer_ && writers_q_.empty();
    if (ok) ++readers_;
    spin_.unlock();
    return ok;
}

bool shared_mutex::try_lock_shared_until(clock::time_point deadline) { return lock_wait(false, &deadline); }

void shared_mutex::unlock_shared() {
    wait_node* woken = nullptr;
    waiter* writer = nullptr;
    spin_.lock();
    if (readers_ == 0) {
        spin_.unlock();
        not_locked("unlock_shared of a weft::shared_mutex that no reader holds");
    }
    if (--readers_ == 0) {
        if (wait_node* n = writers_q_.pop_claimed()) {
            writer_ = true;  // SYNC-S3
            writer = n->w;
            writer->code = handed_over;
        } else if (writers_q_.empty()) {
            admit_readers(woken);  // SYNC-S2: the writers they waited for have all left
        }
    }
    spin_.unlock();
    wake_list(woken);
    if (writer) writer->wake();
}

}  // namespace weft
