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
// locks that wheel.
void runtime_core::add_timer(timer_node* n) {
    worker* w = this_worker();
    timer_shard& s = *timer_shards[w && w->rt == this ? w->index : nworkers];
    std::int64_t due;
    {
        std::lock_guard g(s.mu);
        n->owner = &s;
        s.wheel.insert(n);
        due = s.wheel.next_due();
        s.next.store(due, std::memory_order_seq_cst);
    }
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
    if (s->wheel.erase(n)) s->next.store(s->wheel.next_due(), std::memory_order_seq_cst);
}

// fire_timers() fires what is due on w's own wheel and on the shared one,
// waiting for their locks, and on every other due wheel whose lock is free
// (SCHED-T3): the other worker is then adding or removing a node, or firing that
// wheel itself.
void runtime_core::fire_timers(worker* w) noexcept {
    const std::int64_t now = steady_now_ns();
    for (unsigned i = 0; i <= nworkers; ++i) {
        timer_shard& s = *timer_shards[i];
        if (s.next.load(std::memory_order_relaxed) > now) continue;
        const std::size_t n = fire_shard(w, s, i == w->index || i == nworkers);
        if (n && w->view.trace) [[unlikely]] w->view.trace->instant(trace_event::timers, n);
    }
}

// fire_shard() returns how many timers it fired; w counts them before it
// wakes anyone, so a joiner of a woken task sees them counted.
std::size_t runtime_core::fire_shard(worker* w, timer_shard& s, bool wait) noexcept {
    struct due {
        task_record* task;
        std::uint64_t word;
        timer_node::kind what;
    };
    constexpr std::size_t batch_size = 64;
    timer_node* nodes[batch_size];
    due batch[batch_size];
    std::size_t fired = 0;
    for (;;) {
        std::size_t n = 0;
        {
            std::unique_lock g(s.mu, std::defer_lock);
            if (wait)
                g.lock();
            else if (!g.try_lock())
                return fired;
            n = s.wheel.expire(std::chrono::steady_clock::now(), nodes, batch_size);
            for (std::size_t i = 0; i < n; ++i) {
                timer_node* t = nodes[i];
                batch[i] = {t->task, t->word, t->what};
                t->task->refs.fetch_add(1, std::memory_order_relaxed);  // SCHED-T1
            }
            s.next.store(s.wheel.next_due(), std::memory_order_seq_cst);
        }
        w->view.timers.bump(n);
        // Outside the lock: ending a wait queues the task (and may wake a
        // worker); the node may be reused at once by its task's next wait,
        // so only the copies are read here.
        for (std::size_t i = 0; i < n; ++i) {
            if (batch[i].what == timer_node::kind::task_deadline)
                request_cancel(batch[i].task, wait_status::timed_out);
            else if (try_end(batch[i].task, batch[i].word, wait_status::timed_out))
                arrive(batch[i].task);
            release(batch[i].task);
        }
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
