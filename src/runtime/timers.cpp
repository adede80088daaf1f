// timers.cpp: layer L4, timers: one wheel per worker and a shared one,
// adding, removing and firing timer nodes (SCHED-T1 - SCHED-T3; docs/timers.md). The
// invariants are listed in runtime_core.hpp; the wheel is timer_wheel.hpp.

#include "runtime_core.hpp"

#include <algorithm>
#include <chrono>
#include <mutex>

namespace weft::detail {

// ---- timers (SCHED-T1 - SCHED-T3) ---------------------------------------------------------------

// A node goes into the wheel of the worker that adds it (the adding task's
// worker), or into the shared wheel from any other thread, and records it
// in `owner`: the remove, perhaps on another worker after the task moved,
// locks that wheel. A wait's node may still be in a wheel, left there by a
// wait that ended without it (TIMER-L1): it is taken out first, under the lock
// of the wheel that holds it, and its deadline and word are written only
// under a wheel's lock, since a firing worker reads them there.
void runtime_core::add_timer(timer_node* n, std::chrono::steady_clock::time_point when, std::uint64_t word) {
    worker* w = this_worker();
    timer_shard& s = *timer_shards[w && w->rt == this ? w->index : nworkers];
    auto* held = static_cast<timer_shard*>(n->owner);
    if (held && held != &s) remove_timer(n);  // TIMER-L1: left in another wheel
    std::int64_t due;
    bool earlier;
    {
        std::lock_guard g(s.mu);
        if (held == &s) (void)s.wheel.erase(n);  // TIMER-L1: left in this wheel
        n->when = when;
        n->word = word;
        n->owner = &s;
        s.wheel.insert(n);
        due = s.wheel.next_due();
        // SCHED-T2: an insert only moves next_due() earlier; when it did not, the
        // add that published this value (or the watcher, which read it) has
        // already done what follows.
        earlier = due < s.next.load(std::memory_order_relaxed);
        if (earlier) s.next.store(due, std::memory_order_seq_cst);
    }
    if (earlier) note_due(due);
}

void runtime_core::note_due(std::int64_t due) noexcept {
    // SCHED-T2: the watcher sleeps until watch_until; tell it when this wheel is
    // due earlier.
    if (due < watch_until.load(std::memory_order_seq_cst) && n_sleeping.load(std::memory_order_seq_cst) > 0) {
        worker* v = nullptr;
        bool vp = false;
        {
            std::lock_guard g(idle_mu);
            std::uint32_t sleeping = 0;
            if (watcher && watcher->futex.compare_exchange_strong(sleeping, 2, std::memory_order_acq_rel)) {
                v = watcher;
                vp = v->polling;
            }
        }
        if (v) kick(v, vp);
    }
}

void runtime_core::remove_timer(timer_node* n) noexcept {
    auto* s = static_cast<timer_shard*>(n->owner);
    if (!s) return;  // never added
    std::lock_guard g(s->mu);
    // A later next_due() need not be published at once: a wheel's `next` may
    // be early (a worker or the watcher then finds nothing due and looks
    // again), never late.
    if (s->wheel.erase(n)) {
        const std::int64_t due = s->wheel.next_due();
        if (due != s->next.load(std::memory_order_relaxed)) s->next.store(due, std::memory_order_seq_cst);
    }
}

// fire_timers() fires what is due at `now` (the caller's one clock reading
// for the pass) on w's own wheel and on the shared one, waiting for their
// locks, and on every other due wheel whose lock is free (SCHED-T3): the other
// worker is then adding or removing a node, or firing that wheel itself.
void runtime_core::fire_timers(worker* w, std::int64_t now) noexcept {
    for (unsigned i = 0; i <= nworkers; ++i) {
        timer_shard& s = *timer_shards[i];
        if (s.next.load(std::memory_order_relaxed) > now) continue;
        const std::size_t n = fire_shard(w, s, now, i == w->index || i == nworkers);
        if (n && w->view.trace) [[unlikely]] w->view.trace->instant(trace_event::timers, n);
    }
}

// fire_shard() returns how many timers it fired; w counts them before it
// wakes anyone, so a joiner of a woken task sees them counted.
//
// SCHED-T1: a wait's timeout ends the wait under the wheel's lock (try_end);
// the tasks whose waits it ended are queued (arrive) after the lock is
// released: such a task cannot run, let alone end, before that arrival
// (TASK-R1), and the firing touches no other task after the lock. A task that
// won its wait otherwise (notified, canceled) removes its node under the same
// lock before it can end, so it is alive while its node is looked at here. A
// task deadline cancels a task that may be running: it takes a reference
// under the lock and cancels after it.
std::size_t runtime_core::fire_shard(worker* w, timer_shard& s, std::int64_t now_ns, bool wait) noexcept {
    constexpr std::size_t batch_size = 64;
    timer_node* nodes[batch_size];
    task_record* woken[batch_size];
    task_record* deadlines[batch_size];
    timer_block* callbacks[batch_size];
    std::uint64_t snaps[batch_size];
    const std::chrono::steady_clock::time_point now{std::chrono::nanoseconds(now_ns)};
    std::size_t fired = 0;
    for (;;) {
        std::size_t n = 0, nw = 0, nd = 0, nc = 0;
        {
            std::unique_lock g(s.mu, std::defer_lock);
            if (wait)
                g.lock();
            else if (!g.try_lock())
                return fired;
            n = s.wheel.expire(now, nodes, batch_size);
            for (std::size_t i = 0; i < n; ++i) {
                timer_node* t = nodes[i];
                if (t->what == timer_node::kind::callback) {
                    auto* b = reinterpret_cast<timer_block*>(t);  // the node is the block's first member
                    if (expired_callback(s, b, now, snaps[nc])) callbacks[nc++] = b;  // TIMER-C2
                } else if (t->what == timer_node::kind::task_deadline) {
                    task_record* owner = task_of(t);
                    owner->refs.fetch_add(1, std::memory_order_relaxed);  // SCHED-T1
                    deadlines[nd++] = owner;
                } else if (try_end(task_of(t), t->word, wait_status::timed_out)) {  // SCHED-T1
                    woken[nw++] = task_of(t);
                }  // else a stale node (TIMER-L1) or a wait ended first: nothing to do
            }
            s.next.store(s.wheel.next_due(), std::memory_order_seq_cst);
        }
        w->view.timers.bump(n);
        // Outside the lock: queueing a task may wake a worker.
        for (std::size_t i = 0; i < nw; ++i) arrive(woken[i]);
        for (std::size_t i = 0; i < nd; ++i) {
            request_cancel(deadlines[i], wait_status::timed_out);
            release(deadlines[i]);
        }
        for (std::size_t i = 0; i < nc; ++i) run_callback(s, callbacks[i], snaps[i]);
        fired += n;
        if (n < batch_size) return fired;
    }
}

// Not the wheels' next slot start, which earliest_timer() gives the workers:
// cheaper to keep up to date, and it costs at most one early wake-up per
// level over a timer's life; a game loop asking when to wake needs the
// deadline itself.
std::int64_t runtime_core::earliest_deadline() const noexcept {
    std::int64_t e = INT64_MAX;
    for (const auto& s : timer_shards) {
        std::lock_guard g(s->mu);
        e = std::min(e, s->wheel.earliest());
    }
    return e;
}

}  // namespace weft::detail
