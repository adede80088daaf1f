// callback_timer.cpp: layer L4, weft::timer (weft/timer.hpp; docs/timers.md,
// "Timers without a task"): a callback node in the workers' timer wheels
// (timers.cpp, SCHED-T1 - SCHED-T3), armed, moved and stopped in O(1) with no
// allocation, fired by whichever worker fires its wheel.
//
// A timer's block holds its node (kind callback), a reference to the runtime,
// its generation `gen`, its period and its firing `state`. Its node is in at
// most one wheel, that of its `owner` shard, and only the timer's user (one
// thread at a time) arms, moves or stops it; a firing worker takes it out
// (expire) and, for a periodic timer, puts it back into the same shard.
//
//   TIMER-C1  Every arm and every stop adds one to gen under the lock of the
//             shard that holds the node (or last held it): a firing worker
//             that took the node out of shard s reads gen under s's lock when
//             it takes it out (the snapshot) and again under s's lock before
//             it puts a periodic node back, and puts it back only if gen did
//             not move: an arm or stop meanwhile always wins over the re-arm
//             (an arm that moves the node to another shard adds one under the
//             old shard's lock first).
//   TIMER-C2  state is 0, or snap << 2 | fired (taken out by a firing worker at
//             generation snap, callback not started), or that | started (the
//             callback runs). The firing worker sets fired under the shard's
//             lock and starts the callback only by a compare-and-swap from
//             exactly snap << 2 | fired to that | started; a stop or an arm
//             that finds `fired` without `started` takes it back to 0 by a
//             compare-and-swap (the arming it ends never runs its callback,
//             and stop() reports true). Exactly one of the two succeeds, so a
//             callback starts at most once per firing, and never after the
//             stop or arm that ended its arming returned. A node that comes
//             due while its callback still runs (re-armed from inside it) is
//             put back one tick later: one timer's callback never runs twice
//             at once.
//   TIMER-C3  The block lives while the timer object or a firing worker holds
//             a reference (refs: the object's 1, plus 1 from the moment a
//             worker takes the node out to the end of its firing); the
//             runtime's internals (the shards) live while the block does
//             (retain_core()). The object's end (timer_drop) stops the timer,
//             waits until `started` is clear unless the callback is running on
//             the calling thread, and drops its reference.
//   TIMER-C4  Arming needs a running runtime: once it is stopping, arm throws
//             (runtime_stopping), and a node left in a wheel after the workers
//             stopped never fires (stop() still takes it out).

#include "runtime_core.hpp"
#include "weft/timer.hpp"

#include <cstddef>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace weft::detail {

static_assert(offsetof(timer_block, node) == 0, "fire_shard() finds the block from its node");

namespace {

constexpr std::uint64_t fired = 1;
constexpr std::uint64_t started = 2;
constexpr std::uint64_t flags = 3;

// The block whose callback this thread runs now (TIMER-C3: its own end,
// from inside the callback, does not wait for itself).
thread_local timer_block* running_here = nullptr;

// take_back() is TIMER-C2's stop side: true if it ended a firing whose
// callback had not started.
bool take_back(timer_block* b) noexcept {
    std::uint64_t st = b->state.load(std::memory_order_acquire);
    return (st & flags) == fired && b->state.compare_exchange_strong(st, 0, std::memory_order_acq_rel);
}

// drop_ref() drops one reference to b; the last destroys it (TIMER-C3).
void drop_ref(timer_block* b) noexcept {
    if (b->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    runtime_core* c = b->core;
    b->destroy(b);
    release_core(c);
}

}  // namespace

bool runtime_core::arm_callback(timer_block* b, std::chrono::steady_clock::time_point when, std::int64_t period_ns) {
    if (stopping.load(std::memory_order_acquire))  // TIMER-C4
        throw task_error(task_errc::runtime_stopping,
                         "weft: reset() of a weft::timer whose runtime is stopping or stopped");
    if (period_ns < 0) throw task_error(task_errc::bad_option, "weft: weft::timer::reset_every() needs a period above zero");
    worker* w = this_worker();
    timer_shard& s = *timer_shards[w && w->rt == this ? w->index : nworkers];
    timer_node* n = &b->node;
    auto* held = static_cast<timer_shard*>(n->owner);
    bool was = false;
    if (held && held != &s) {
        std::lock_guard g(held->mu);
        was = held->wheel.erase(n);
        if (!was) was = take_back(b);
        b->gen.fetch_add(1, std::memory_order_relaxed);  // TIMER-C1: under the old shard's lock
    }
    std::int64_t due;
    bool earlier;
    {
        std::lock_guard g(s.mu);
        if (held == &s) {
            was = s.wheel.erase(n);
            if (!was) was = take_back(b);
        }
        b->gen.fetch_add(1, std::memory_order_relaxed);  // TIMER-C1
        b->period_ns.store(period_ns, std::memory_order_relaxed);
        n->when = when;
        n->owner = &s;
        s.wheel.insert(n);
        due = s.wheel.next_due();
        earlier = due < s.next.load(std::memory_order_relaxed);  // SCHED-T2, as add_timer()
        if (earlier) s.next.store(due, std::memory_order_seq_cst);
    }
    if (earlier) note_due(due);
    return was;
}

bool runtime_core::stop_callback(timer_block* b) noexcept {
    auto* s = static_cast<timer_shard*>(b->node.owner);
    if (!s) return false;  // never armed
    std::lock_guard g(s->mu);
    bool was = s->wheel.erase(&b->node);
    if (was) {
        const std::int64_t due = s->wheel.next_due();
        if (due != s->next.load(std::memory_order_relaxed)) s->next.store(due, std::memory_order_seq_cst);
    } else {
        was = take_back(b);  // TIMER-C2
    }
    b->gen.fetch_add(1, std::memory_order_relaxed);  // TIMER-C1
    return was;
}

bool runtime_core::callback_pending(const timer_block* b) noexcept {
    auto* s = static_cast<timer_shard*>(b->node.owner);
    if (!s) return false;
    std::lock_guard g(s->mu);
    return b->node.slot != timer_node::unlinked || (b->state.load(std::memory_order_acquire) & flags) == fired;
}

// Under s.mu, b's node just taken out of s.wheel (fire_shard()).
bool runtime_core::expired_callback(timer_shard& s, timer_block* b, std::chrono::steady_clock::time_point now,
                                    std::uint64_t& snap) noexcept {
    if (b->state.load(std::memory_order_acquire) & started) {
        // TIMER-C2: its callback still runs (it re-armed the timer): a tick later.
        b->node.when = now + std::chrono::nanoseconds(timer_wheel::tick_ns);
        s.wheel.insert(&b->node);
        return false;
    }
    snap = b->gen.load(std::memory_order_relaxed);
    b->state.store(snap << 2 | fired, std::memory_order_release);
    b->refs.fetch_add(1, std::memory_order_relaxed);  // TIMER-C3
    return true;
}

// Outside s.mu, on the firing worker's thread.
void runtime_core::run_callback(timer_shard& s, timer_block* b, std::uint64_t snap) noexcept {
    std::uint64_t expect = snap << 2 | fired;
    if (b->state.compare_exchange_strong(expect, expect | started, std::memory_order_acq_rel)) {  // TIMER-C2
        timer_block* outer = std::exchange(running_here, b);
        try {
            b->call(b);
        } catch (...) {
            task_info info;
            info.name = "weft::timer";
            report_unhandled(info, std::current_exception(), "a weft::timer callback",
                             "catch the exception inside the callback, or set runtime_options::unhandled to "
                             "receive such exceptions");
        }
        running_here = outer;
        std::int64_t due = INT64_MAX;
        {
            std::lock_guard g(s.mu);
            // Clear `started` before a stop or arm can look (they take this
            // lock, or another shard's after moving gen under this one).
            b->state.store(0, std::memory_order_release);
            const std::int64_t period = b->period_ns.load(std::memory_order_relaxed);
            if (period > 0 && b->gen.load(std::memory_order_relaxed) == snap &&
                b->node.slot == timer_node::unlinked) {  // TIMER-C1: no arm or stop since
                const auto now = std::chrono::steady_clock::now();
                auto next = b->node.when + std::chrono::nanoseconds(period);
                if (next <= now) {  // late by a period or more: skip the missed deadlines
                    const auto late = (now - b->node.when).count() / period;
                    next = b->node.when + std::chrono::nanoseconds(period * (late + 1));
                }
                b->node.when = next;
                s.wheel.insert(&b->node);
                due = s.wheel.next_due();
                if (due < s.next.load(std::memory_order_relaxed))
                    s.next.store(due, std::memory_order_seq_cst);
                else
                    due = INT64_MAX;
            }
        }
        if (due != INT64_MAX) note_due(due);
    }
    drop_ref(b);
}

// ---- the public functions (weft/timer.hpp) ----------------------------------

void timer_bind(timer_block* b, runtime_core* c) noexcept {
    b->node.what = timer_node::kind::callback;
    b->core = c;
    retain_core(c);  // TIMER-C3
}

bool timer_arm(timer_block* b, std::chrono::steady_clock::time_point when, std::int64_t period_ns) {
    return b->core->arm_callback(b, when, period_ns);
}

bool timer_stop(timer_block* b) noexcept { return b->core->stop_callback(b); }

bool timer_pending(const timer_block* b) noexcept { return b->core->callback_pending(b); }

void timer_drop(timer_block* b) noexcept {
    (void)b->core->stop_callback(b);
    // TIMER-C3: a callback running elsewhere finishes first (bounded by the
    // callback itself, which must not wait).
    for (unsigned spins = 0; (b->state.load(std::memory_order_acquire) & started) && running_here != b; ++spins) {
        if (spins < 64)
            std::this_thread::yield();
        else
            std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    drop_ref(b);
}

}  // namespace weft::detail
