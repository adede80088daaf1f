// sleeping.cpp: layer L4, idle workers: putting them to sleep and waking
// them without a lost wake-up (SCHED-P1), the watcher that sleeps until the
// earliest timer (SCHED-T2), and polling for IO, asleep and while running (SCHED-I1,
// SCHED-I2). The invariants are listed in runtime_core.hpp.

#include "runtime_core.hpp"

#include <algorithm>
#include <mutex>

namespace weft::detail {

// ---- sleeping (SCHED-P1) ------------------------------------------------------------
//
// A publisher stores the task (seq_cst: the deque's push, the injection and
// inbox locks), then notify_one() (inline, in runtime_core.hpp) reads
// n_searching and n_sleeping (seq_cst). A worker going to sleep first stops
// searching (seq_cst decrement), then registers as sleeping (seq_cst
// increment, under idle_mu), then looks at every queue again (seq_cst
// loads), and only then sleeps. In the single total order of these
// operations either the publisher sees the worker sleeping (and wakes one) or
// searching (and that searcher's later look finds the task), or the
// worker's look comes after the publication and finds it.
// A searcher that finds work and was the last searcher wakes another worker,
// so work it did not take is not left to a searcher that has stopped.

// Timers and sleeping workers (SCHED-T2): one sleeping worker, the watcher, sleeps
// until the earliest timer over all the wheels; the others sleep without a
// timeout. When the watcher leaves (woken for work, or its timeout came),
// another sleeping worker becomes the watcher, and is told to look at the
// timers again if there are any; add_timer() tells the watcher when its
// wheel's earliest time is earlier than the one the watcher sleeps until.
// So while any worker sleeps, one of them wakes for the next timer, and
// the others stay asleep.
//
// Futex word values: 0 sleep, 1 stop sleeping (work), 2 the timers changed:
// recompute the timeout and sleep again.

worker* runtime_core::wake_sleeper_locked(worker* w) noexcept {
    w->sleeping = false;
    idle.erase(std::find(idle.begin(), idle.end(), w));
    n_sleeping.fetch_sub(1, std::memory_order_seq_cst);
    if (watcher != w) return nullptr;
    // SCHED-T2: the new watcher has published nothing yet (it may be asleep
    // without a timeout): until it does, every add_timer() tells it.
    watch_until.store(INT64_MAX, std::memory_order_seq_cst);
    watcher = idle.empty() ? nullptr : idle.back();
    // It must start watching if there is something to watch: a timer, or
    // IO (SCHED-I1).
    if (!watcher || (earliest_timer() == INT64_MAX && !io.load(std::memory_order_acquire))) return nullptr;
    std::uint32_t sleeping = 0;
    return watcher->futex.compare_exchange_strong(sleeping, 2, std::memory_order_acq_rel) ? watcher : nullptr;
}

void runtime_core::wake(worker* w) noexcept {
    worker* told = nullptr;
    bool wp = false, tp = false;
    {
        std::lock_guard g(idle_mu);
        if (w->sleeping) told = wake_sleeper_locked(w);
        w->futex.store(1, std::memory_order_release);
        wp = w->polling;
        tp = told && told->polling;
    }
    kick(w, wp);
    if (told) kick(told, tp);
}

void runtime_core::kick(worker* w, bool polling) noexcept {
    poller* p = io.load(std::memory_order_acquire);
    if (p && nthreads != 0 && p->per_worker()) {
        // SCHED-I3: w sleeps in its ring, not on its futex word (a worker
        // that went to sleep before there was a poller was woken by
        // runtime_poller(), and sleeps in its ring from then on).
        p->wake_worker(w->index);
        return;
    }
    futex_wake(&w->futex, 1);
    // The poller itself, waking tasks from inside poll(), need not be
    // interrupted.
    if (polling && w != this_worker()) p->interrupt();
}

bool runtime_core::poll_now(worker* w) noexcept {
    poller* p = io.load(std::memory_order_acquire);
    if (!p) return false;
    bool woke = false;
    // SCHED-I3: the worker's own ring, without a system call unless it has
    // something to submit or reap (URING-O3).
    if (nthreads != 0 && p->per_worker()) woke = p->poll_worker(w->index, 0, false) > 0;
    std::unique_lock l(poll_mu, std::try_to_lock);
    if (!l.owns_lock()) return woke;  // the watcher, or another worker, polls (SCHED-I2)
    w->view.io_polls.bump();
    return (p->poll(0) > 0) || woke;
}

void runtime_core::stop_searching(worker* w) noexcept {
    w->searching = false;
    if (n_searching.fetch_sub(1, std::memory_order_seq_cst) == 1) notify_one();
}

// watch_wait_ns() is how long the watcher sleeps (-1: no timer), called
// under idle_mu by the watcher only. SCHED-T2: it publishes the earliest time and
// reads the wheels again; an add_timer() whose store to its wheel came
// before that second read is seen by it, and one whose store came after
// reads watch_until later than this publication (all seq_cst), and wakes
// the watcher if its time is earlier. Only the current watcher publishes
// (under idle_mu), so a worker that has stopped watching cannot overwrite
// its successor's time.
std::int64_t runtime_core::watch_wait_ns() noexcept {
    std::int64_t e = earliest_timer();
    for (;;) {
        // Exchange: a store then loads of other words (TASK-C2 in
        // src/task/task.cpp: qemu-user drops the barrier between them).
        (void)watch_until.exchange(e, std::memory_order_seq_cst);
        const std::int64_t again = earliest_timer();
        if (again >= e) break;  // later: a timer went; waking early is harmless
        e = again;
    }
    if (e == INT64_MAX) return -1;
    const std::int64_t d = e - steady_now_ns();
    return d < 0 ? 0 : d;
}

void runtime_core::sleep(worker* w) noexcept {
    if (w->searching) {
        w->searching = false;
        n_searching.fetch_sub(1, std::memory_order_seq_cst);
    }
    {
        std::lock_guard g(idle_mu);
        w->futex.store(0, std::memory_order_relaxed);
        w->sleeping = true;
        idle.push_back(w);
        if (!watcher) watcher = w;
        n_sleeping.fetch_add(1, std::memory_order_seq_cst);
    }
    const bool sleeps = !has_work(w);
    if (sleeps) {
        w->view.sleeps.bump();
        if (w->view.trace) [[unlikely]] w->view.trace->begin_sleep();
    }
    if (sleeps) {
        for (;;) {
            std::uint32_t f = w->futex.load(std::memory_order_acquire);
            if (f == 1) break;
            if (f == 2) {
                (void)w->futex.compare_exchange_strong(f, 0, std::memory_order_acq_rel);
                continue;
            }
            bool watching;
            std::int64_t wait = -1;
            {
                std::lock_guard g(idle_mu);
                watching = watcher == w;
                if (watching) wait = watch_wait_ns();  // SCHED-T2
            }
            // A worker with shrink candidates wakes when the oldest may be
            // due, and its loop sweeps (shrink.cpp).
            const std::int64_t sw = shrink_wait_ns(w);
            const bool for_sweep = sw >= 0 && (wait < 0 || sw < wait);
            if (for_sweep) wait = sw;
            if (poller* p = io.load(std::memory_order_acquire); p && nthreads != 0 && p->per_worker()) {
                // SCHED-I3: every worker sleeps in its own ring; the watcher
                // that gets poll_mu also watches the shared poller there.
                std::unique_lock pl(poll_mu, std::defer_lock);
                bool watch = false;
                if (watching && pl.try_lock()) {
                    {
                        std::lock_guard g(idle_mu);
                        if (w->futex.load(std::memory_order_acquire) != 0 || watcher != w) continue;
                        w->polling = true;
                    }
                    watch = true;
                    w->view.io_polls.bump();
                } else if (watching && (wait < 0 || wait > 1'000'000)) {
                    wait = 1'000'000;  // SCHED-I2: the lock's holder is brief
                }
                const std::size_t woke = p->poll_worker(w->index, wait, watch);
                if (watch) {
                    {
                        std::lock_guard g(idle_mu);
                        w->polling = false;
                    }
                    pl.unlock();
                }
                if (woke > 0 || for_sweep || (watching && earliest_timer() <= steady_now_ns())) break;
                continue;
            }
            if (poller* p = io.load(std::memory_order_acquire); watching && p) {
                // SCHED-I1, SCHED-I2: the watcher waits in the poller. Only tried: the
                // lock may be held by a running worker's poll(0) (for
                // microseconds) or by the watcher this one replaced, which
                // is being interrupted and may find its futex word still 0 for
                // a while; and this worker may itself have been replaced and
                // given work meanwhile (blocking here once hung a pinned
                // task's home worker behind a new watcher's endless poll).
                std::unique_lock pl(poll_mu, std::try_to_lock);
                if (!pl.owns_lock()) {
                    if (wait == 0) break;
                    futex_wait(&w->futex, 0, wait < 0 || wait > 1'000'000 ? 1'000'000 : wait);
                    continue;
                }
                {
                    std::lock_guard g(idle_mu);
                    if (w->futex.load(std::memory_order_acquire) != 0 || watcher != w) continue;
                    w->polling = true;
                }
                w->view.io_polls.bump();
                const std::size_t woke = p->poll(wait);
                {
                    std::lock_guard g(idle_mu);
                    w->polling = false;
                }
                pl.unlock();
                if (woke > 0 || for_sweep || earliest_timer() <= steady_now_ns()) break;
                continue;
            }
            if (wait == 0) break;
            futex_wait(&w->futex, 0, wait);
            if (for_sweep || (watching && earliest_timer() <= steady_now_ns())) break;
        }
    }
    if (sleeps && w->view.trace) [[unlikely]] w->view.trace->end_sleep();
    worker* told = nullptr;
    bool tp = false;
    {
        std::lock_guard g(idle_mu);
        if (w->sleeping) told = wake_sleeper_locked(w);
        tp = told && told->polling;
    }
    if (told) kick(told, tp);
}

}  // namespace weft::detail
