// shrink.cpp: layer L4, idle tasks giving their stack back (docs/runtime.md,
// "Idle tasks give their stack back"): the workers' candidate FIFOs and
// their sweep, the shrink of a parked task under its hold (SHRINK-S1 -
// SHRINK-S4, include/weft/detail/task_record.hpp) and the restore before it
// runs again.

#include "runtime_core.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>

namespace weft::detail {

namespace {

// A sweep looks at no more than this many candidates per call, so that a
// busy worker's sweep costs a bounded time (runtime::shrink_idle() asks for
// a full one).
constexpr std::size_t sweep_batch = 64;

// raw_copy() copies a suspended task's frames to or from its saved block
// without ASan's checks: the frames' red zones are poisoned, and stay so
// (the shadow of the stack is not touched by the release or the restore,
// so a restored task keeps its red zones). Word by word, with a compiler
// barrier, so that it does not become a call to the (checked) memcpy. The
// range is 8-byte aligned at both ends (a saved context and a page).
#if defined(__clang__) || defined(__GNUC__)
[[gnu::no_sanitize_address]]
#endif
void raw_copy(std::byte* to, const std::byte* from, std::size_t n) noexcept {
    auto* d = reinterpret_cast<std::uint64_t*>(to);
    const auto* s = reinterpret_cast<const std::uint64_t*>(from);
    for (std::size_t i = 0; i < n / 8; ++i) {
        d[i] = s[i];
        asm volatile("" ::: "memory");
    }
}

std::byte* page_floor(std::byte* p) noexcept {
    return reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(p) & ~(std::uintptr_t(page_size()) - 1));
}

}  // namespace

void runtime_core::ask_sweep() noexcept {
    if (shrink_after_ns <= 0) return;
    for (auto& w : ws) {
        w->sweep_asked.store(true, std::memory_order_release);
        if (nthreads != 0) wake_sleeper(w.get());
    }
}

// maybe_sweep() sweeps w's candidates when asked to, or when the oldest
// may be due. Owner only.
void runtime_core::maybe_sweep(worker* w) noexcept {
    if (shrink_after_ns <= 0) return;
    if (w->sweep_asked.load(std::memory_order_relaxed) && w->sweep_asked.exchange(false, std::memory_order_acquire)) {
        sweep(w, true);
        return;
    }
    if (w->idle_count == 0) return;
    const std::int64_t since = w->idle_fifo.front()->state_since.load(std::memory_order_relaxed);
    if (coarse_now_ns() - since >= shrink_after_ns) sweep(w, false);
}

// shrink_wait_ns() is how long w may sleep before its oldest candidate may
// be due (-1: no candidate). The stamps are the coarse clock, which lags
// by up to a tick: the wait is rounded up by one, and is at least 1 ms.
std::int64_t runtime_core::shrink_wait_ns(worker* w) const noexcept {
    if (shrink_after_ns <= 0) return -1;
    if (w->sweep_asked.load(std::memory_order_acquire)) return 0;
    if (w->idle_count == 0) return -1;
    const std::int64_t since = w->idle_fifo.front()->state_since.load(std::memory_order_relaxed);
    const std::int64_t d = since + shrink_after_ns - coarse_now_ns() + 4'000'000;
    return std::max<std::int64_t>(d, 1'000'000);
}

void runtime_core::sweep(worker* w, bool force) noexcept {
    const std::int64_t now = coarse_now_ns();
    std::size_t n = force ? w->idle_count : std::min(w->idle_count, sweep_batch);
    while (n-- > 0) {
        task_record* t = w->idle_fifo.pop_front();
        --w->idle_count;
        const bool waiting = t->state.load(std::memory_order_acquire) == task_state::waiting;
        if (waiting && !force && now - t->state_since.load(std::memory_order_relaxed) < shrink_after_ns) {
            // Parked, but not for long enough yet (perhaps parked again
            // since it was listed): look again later.
            w->idle_fifo.push_back(t);
            ++w->idle_count;
            continue;
        }
        if (waiting) (void)shrink_task(w, t);
        // Off the list: it is listed again when it next parks.
        t->idle_listed.store(false, std::memory_order_release);
        release(t);
    }
}

// shrink_task() shrinks t if it is switched out in a wait that has not
// ended (SHRINK-S2) and nothing pins its stack (SHRINK-A2): its live bytes,
// from the saved context up to the last whole page below its stack's top,
// go to a heap block and those pages are released. The top page stays
// when the stack's top is not on a page boundary (a slab stack: that page
// holds the guard words of the slab stack above). True if it shrank.
bool runtime_core::shrink_task(worker* w, task_record* t) noexcept {
    if (!try_hold(t)) return false;  // SHRINK-S2
    bool shrank = false;
    fiber_record* f = t->fiber;
    wait_arena* a = f ? f->arena : nullptr;
    if (a && a->pins == 0 && !t->shrunk) {  // SHRINK-A2, SHRINK-S3
        auto* sp = static_cast<std::byte*>(f->ctx);
        auto* base = static_cast<std::byte*>(f->stack.base);
        auto* top = static_cast<std::byte*>(f->stack.top());
        std::byte* lo = page_floor(sp);
        std::byte* hi = page_floor(top);
        if (sp > base && lo >= base && hi > sp) {
            const std::size_t n = static_cast<std::size_t>(hi - sp);
            if (auto* block = static_cast<std::byte*>(std::malloc(n))) {
                raw_copy(block, sp, n);
                if (::madvise(lo, static_cast<std::size_t>(hi - lo), MADV_DONTNEED) == 0) {
                    a->saved = block;
                    a->saved_at = sp;
                    a->saved_size = n;
                    t->shrunk = true;  // SHRINK-S3: under the hold
                    shrank = true;
                    w->view.shrinks.bump();
                    w->view.shrunk_bytes.bump(n);
                } else {
                    std::free(block);
                }
            }
        }
    }
    drop_hold(t);  // SHRINK-S4
    return shrank;
}

// restore_task() puts a shrunk task's live bytes back, on the worker that
// is about to resume it (SHRINK-S4), and frees the block. The pages fault in.
void runtime_core::restore_task(worker* w, task_record* t) noexcept {
    wait_arena* a = t->fiber->arena;
    raw_copy(a->saved_at, a->saved, a->saved_size);
    std::free(a->saved);
    a->saved = nullptr;
    a->saved_at = nullptr;
    a->saved_size = 0;
    t->shrunk = false;
    w->view.restores.bump();
}

// drain_idle() empties the candidate FIFOs after the workers are gone
// (stop()): every task has ended, so each entry only drops its reference.
void runtime_core::drain_idle() noexcept {
    for (auto& w : ws) {
        while (task_record* t = w->idle_fifo.pop_front()) {
            t->idle_listed.store(false, std::memory_order_release);
            release(t);
        }
        w->idle_count = 0;
    }
}

}  // namespace weft::detail
