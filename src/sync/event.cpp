// event.cpp: layer L5, event, latch, wait_group and barrier
// (weft/sync/event.hpp). Each releases all its waiters at once: it claims
// them under its lock (WAITER-V1) and wakes them after (WAITER-V2), and nothing but the
// wake is handed over, so a waiter that left early loses nothing and takes
// nothing from the others.

#include "weft/sync/event.hpp"

#include <stdexcept>

namespace weft {

namespace {

using clock = std::chrono::steady_clock;

// wait_in_queue() waits in q with n's waiter; called with `spin` held, returns with
// it released. A waiter that was not notified is unlinked again (WAITER-V3).
waiter::outcome wait_in_queue(spin_lock& spin, wait_queue& q, wait_node& n, const clock::time_point* deadline) {
    n.w->arm();
    q.push_back(&n);
    spin.unlock();
    const waiter::outcome o = n.w->wait(deadline);
    if (o != waiter::outcome::notified) {
        spin.lock();
        q.remove(&n);
        spin.unlock();
    }
    return o;
}

// finish() is what a wait returns for outcome o. Throws: forced_unwind if
// it was canceled.
bool finish(waiter::outcome o) {
    if (o == waiter::outcome::canceled) throw_canceled();
    return o == waiter::outcome::notified;
}

}  // namespace

// ---- event -------------------------------------------------------------------

void event::set() noexcept {
    spin_.lock();
    set_.store(true, std::memory_order_release);
    wait_node* woken = claim_all(queue_);  // SYNC-E1
    spin_.unlock();
    wake_all(woken);
}

void event::reset() noexcept {
    spin_.lock();
    set_.store(false, std::memory_order_relaxed);
    spin_.unlock();
}

bool event::wait_slow(const clock::time_point* deadline) {
    detail::stable<one_wait> s;  // WAITER-V4
    spin_.lock();
    if (set_.load(std::memory_order_acquire)) {  // SYNC-E1
        spin_.unlock();
        return true;
    }
    return finish(wait_in_queue(spin_, queue_, s->n, deadline));
}

// ---- latch ---------------------------------------------------------------------

latch::latch(std::ptrdiff_t expected) : count_(expected) {
    if (expected < 0) throw std::invalid_argument("weft::latch: negative count");
}

void latch::count_down(std::ptrdiff_t n) {
    spin_.lock();
    const std::ptrdiff_t c = count_.load(std::memory_order_relaxed);
    if (n < 0 || n > c) {
        spin_.unlock();
        throw std::invalid_argument("weft::latch::count_down: negative, or more than the count left");
    }
    count_.store(c - n, std::memory_order_release);
    wait_node* woken = c - n == 0 && n != 0 ? claim_all(queue_) : nullptr;  // SYNC-L1
    spin_.unlock();
    wake_all(woken);
}

bool latch::wait_slow(const clock::time_point* deadline) {
    detail::stable<one_wait> s;  // WAITER-V4
    spin_.lock();
    if (count_.load(std::memory_order_acquire) == 0) {  // SYNC-L1
        spin_.unlock();
        return true;
    }
    return finish(wait_in_queue(spin_, queue_, s->n, deadline));
}

// ---- wait_group ----------------------------------------------------------------

void wait_group::add(std::ptrdiff_t n) {
    spin_.lock();
    const std::ptrdiff_t c = count_.load(std::memory_order_relaxed);
    if (c + n < 0) {
        spin_.unlock();
        throw std::invalid_argument("weft::wait_group::add: the count would go below zero");
    }
    count_.store(c + n, std::memory_order_release);
    wait_node* woken = c + n == 0 && n != 0 ? claim_all(queue_) : nullptr;  // SYNC-G1
    spin_.unlock();
    wake_all(woken);
}

bool wait_group::wait_slow(const clock::time_point* deadline) {
    detail::stable<one_wait> s;  // WAITER-V4
    spin_.lock();
    if (count_.load(std::memory_order_acquire) == 0) {  // SYNC-G1
        spin_.unlock();
        return true;
    }
    return finish(wait_in_queue(spin_, queue_, s->n, deadline));
}

// ---- barrier -------------------------------------------------------------------

barrier::barrier(std::ptrdiff_t expected) : expected_(expected) {
    if (expected < 0) throw std::invalid_argument("weft::barrier: negative count");
}

std::ptrdiff_t barrier::expected() const noexcept {
    spin_.lock();
    const std::ptrdiff_t e = expected_;
    spin_.unlock();
    return e;
}

wait_node* barrier::complete_phase() noexcept {
    arrived_ = 0;  // SYNC-B1
    ++phase_;
    return claim_all(queue_);
}

bool barrier::arrive_wait(const clock::time_point* deadline) {
    detail::stable<one_wait> s;  // WAITER-V4
    spin_.lock();
    if (++arrived_ >= expected_) {
        wait_node* woken = complete_phase();
        spin_.unlock();
        wake_all(woken);
        return true;
    }
    const std::uint64_t phase = phase_;
    s->w.arm();
    queue_.push_back(&s->n);
    spin_.unlock();
    const waiter::outcome o = s->w.wait(deadline);
    if (o == waiter::outcome::notified) return true;
    spin_.lock();
    queue_.remove(&s->n);  // WAITER-V3
    // SYNC-B2: the phase may have completed after we timed out or were canceled
    // (complete_phase() then dropped our node); our arrival counted there.
    const bool withdrawn = phase_ == phase;
    if (withdrawn) --arrived_;
    spin_.unlock();
    if (o == waiter::outcome::canceled) throw_canceled();
    return !withdrawn;
}

void barrier::arrive_and_drop() {
    spin_.lock();
    if (expected_ == 0) {
        spin_.unlock();
        throw std::invalid_argument("weft::barrier::arrive_and_drop: no party left to drop");
    }
    --expected_;
    wait_node* woken = arrived_ >= expected_ ? complete_phase() : nullptr;  // SYNC-B1
    spin_.unlock();
    wake_all(woken);
}

}  // namespace weft
