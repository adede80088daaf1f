// condition_variable.cpp: layer L5, the non-template half of
// weft::condition_variable (weft/sync/condition_variable.hpp).

#include "weft/sync/condition_variable.hpp"

namespace weft {

void condition_variable::enqueue(wait_node* n) noexcept {
    spin_.lock();
    n->w->arm();
    queue_.push_back(n);
    spin_.unlock();
}

void condition_variable::dequeue(wait_node* n) noexcept {
    spin_.lock();
    queue_.remove(n);
    spin_.unlock();
}

void condition_variable::abandon(wait_node* n) noexcept {
    if (!n->w->claim_self()) {
        // A waker (or a cancellation) ended the wait first; its wake() may
        // still be coming, and the frame must outlive it (WAITER-V1). A notify
        // meant for us goes on to the next waiter (SYNC-CV2).
        if (n->w->wait() == waiter::outcome::notified) notify_one();
    }
    dequeue(n);
}

void condition_variable::notify_one() noexcept {
    spin_.lock();
    wait_node* n = queue_.pop_claimed();  // SYNC-CV2
    waiter* w = n ? n->w : nullptr;
    spin_.unlock();
    if (w) w->wake();
}

void condition_variable::notify_all() noexcept {
    // Claim under the lock, wake after it (wakers never hold a primitive's
    // lock across a wake). A claimed node is unlinked, so its `next` is ours
    // to chain with until its waiter is woken.
    wait_node* claimed = nullptr;
    spin_.lock();
    while (wait_node* n = queue_.pop_claimed()) {
        n->next = claimed;
        claimed = n;
    }
    spin_.unlock();
    while (claimed) {
        wait_node* next = claimed->next;
        claimed->w->wake();
        claimed = next;
    }
}

}  // namespace weft
