// stop.cpp: layer L5, waiting for a std::stop_token (weft/sync/stop.hpp,
// STOP-S1 - STOP-S3, over the waiter's WAITER-V1 - WAITER-V4).

#include "weft/sync/stop.hpp"

namespace weft {

namespace detail {

void stop_core::fire::operator()() const noexcept {
    // Runs on the thread that requested stop (or in start(), STOP-S1).
    stop_core& c = *self;
    c.mu.lock();
    c.stopped = true;                     // STOP-S2
    wait_node* n = c.q.pop_claimed();     // WAITER-V1
    waiter* w = n ? n->w : nullptr;       // STOP-S3: read while claimed
    if (w) {
        w->fired = n->index;              // WAITER-V2: a select's case index
        w->code = code_ok;
    }
    c.mu.unlock();
    if (w) w->wake();
}

void stop_core::start() noexcept {
    // STOP-S1: not under mu; a token already stopped runs fire() here.
    if (token.stop_possible()) cb.emplace(token, fire{this});
}

namespace {

// The select case's hooks, each run under mu (CHAN-K5, STOP-S2).
bool stop_poll(void* c, waiter*& /*wake*/) { return static_cast<stop_core*>(c)->stop_seen(); }
void stop_link(void* c, wait_node* n) { static_cast<stop_core*>(c)->q.push_back(n); }
void stop_unlink(void* c, wait_node* n) noexcept { static_cast<stop_core*>(c)->q.remove(n); }  // WAITER-V3
constexpr select_hooks stop_hooks{&stop_poll, &stop_link, &stop_unlink};

// stop_wait is a plain wait's core and its one waiter, held together where
// WAITER-V4 puts them (the callback reaches both while the party waits).
struct stop_wait {
    stop_core core;
    one_wait ow;
    explicit stop_wait(const std::stop_token& t) : core(t) {}
};

}  // namespace

void stop_core::fill(select_entry& e) noexcept {
    start();  // STOP-S1: before the select takes mu
    e.ch = &mu;
    e.c = this;
    e.hooks = &stop_hooks;
}

bool wait_stop(const std::stop_token& token, const std::chrono::steady_clock::time_point* deadline) {
    stable<stop_wait> s(token);  // WAITER-V4, STOP-S3
    stop_core& c = s->core;
    c.start();  // STOP-S1
    c.mu.lock();
    if (c.stop_seen()) {  // STOP-S2
        c.mu.unlock();
        return true;
    }
    s->ow.w.arm();
    c.q.push_back(&s->ow.n);
    c.mu.unlock();
    const waiter::outcome o = s->ow.w.wait(deadline);
    if (o != waiter::outcome::notified) {
        c.mu.lock();
        c.q.remove(&s->ow.n);  // WAITER-V3
        c.mu.unlock();
    }
    if (o == waiter::outcome::canceled) throw_canceled();
    return o == waiter::outcome::notified;
}

}  // namespace detail

}  // namespace weft
