// semaphore.cpp: layer L5, counting_semaphore (weft/sync/semaphore.hpp).

#include "weft/sync/semaphore.hpp"

#include <stdexcept>

namespace weft {

counting_semaphore::counting_semaphore(std::ptrdiff_t initial) : count_(initial) {
    if (initial < 0) throw std::invalid_argument("weft::counting_semaphore: negative initial count");
}

bool counting_semaphore::acquire_slow(const std::chrono::steady_clock::time_point* deadline) {
    detail::stable<one_wait> s;  // WAITER-V4
    waiter& w = s->w;
    wait_node& n = s->n;
    spin_.lock();
    // SYNC-P2: count_ cannot grow while we hold spin_, so a 0 seen here stays 0
    // until release() has seen our node.
    if (try_acquire()) {
        spin_.unlock();
        return true;
    }
    w.arm();
    queue_.push_back(&n);
    spin_.unlock();
    const waiter::outcome o = w.wait(deadline);
    if (o == waiter::outcome::notified) return true;  // SYNC-P1: release() handed us a permit
    spin_.lock();
    queue_.remove(&n);  // WAITER-V3; unclaimed, so no permit was handed to us (SYNC-P1)
    spin_.unlock();
    if (o == waiter::outcome::canceled) throw_canceled();
    return false;
}

void counting_semaphore::release(std::ptrdiff_t n) {
    if (n < 0) throw std::invalid_argument("weft::counting_semaphore::release: negative count");
    if (n == 0) return;
    wait_node* woken = nullptr;
    spin_.lock();
    while (n > 0) {
        wait_node* q = queue_.pop_claimed();  // SYNC-P1: claim first, then hand over
        if (!q) break;
        --n;
        q->next = woken;  // unlinked: the link is ours until wake()
        woken = q;
    }
    if (n > 0) count_.fetch_add(n, std::memory_order_release);
    spin_.unlock();
    while (woken) {
        wait_node* next = woken->next;
        woken->w->wake();
        woken = next;
    }
}

}  // namespace weft
