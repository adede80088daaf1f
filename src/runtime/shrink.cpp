// shrink.cpp: layer L4, idle tasks giving their stack back (docs/runtime.md,
// "Idle tasks give their stack back"): the workers' candidate FIFOs and
// their sweep, the shrink of a parked task under its hold (SHRINK-S1 -
// SHRINK-S4, include/weft/detail/task_record.hpp) and the restore before it
// runs again.

#include "runtime_core.hpp"
#include "weft/detail/sanitizer.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace weft::detail {

namespace {

// A sweep looks at no more than this many candidates per call, so that a
// busy worker's sweep costs a bounded time (runtime::shrink_idle() asks for
// a full one).
constexpr std::size_t sweep_batch = 64;
// An idle worker (about to sleep) sweeps up to this many per call: enough
// that a million tasks parked at once are shrunk within seconds (at 64 per
// wake-up, with a sleep of at least 1 ms between, it took minutes), few
// enough that new work waits at most a few milliseconds behind a sweep.
constexpr std::size_t idle_sweep_batch = 4096;

std::byte* page_floor(std::byte* p) noexcept {
    return reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(p) & ~(std::uintptr_t(page_size()) - 1));
}

// stack_end() is where the range a shrink saves and releases ends: the top
// of f's stack, a page boundary for every task stack (page_floor() only
// guards that). The shrink, the restore and SHRINK-R1 all derive it here.
std::byte* stack_end(const fiber_record* f) noexcept { return page_floor(static_cast<std::byte*>(f->stack.top())); }

// The saved block of a shrunk task (SHRINK-Z1): the live range [sp, top)
// of its stack (sp: its fiber's saved context, 16-byte aligned; top: a page
// boundary), as 8-byte words from sp, each with a 2-bit tag:
//
//   0  zero: not kept
//   1  its high 32 bits are base A: only the low 32 bits are kept
//   2  its high 32 bits are base B: the same
//   3  kept whole
//
// A and B are the two most common high halves among the range's non-zero
// words (0 is a candidate too: small integers). A parked task's frames are
// mostly zeros (padding, dead locals, a stable<T>'s unused room on the
// stack), return addresses and pointers into a few regions (the program's
// code, its heap, the stacks), so most words are kept in 4 bytes. The
// block: A and B (4 bytes each), the tags (4 words per byte, word i in
// bits 2(i%4) of byte i/4), then the kept words in stack order, each in 8
// bytes (tag 3) or 4 (tags 1, 2), unaligned: the tags say where each one
// starts, so no count is stored. For weft's own wait path (624 live bytes)
// that is about 210 bytes; with 64-byte chunks it was 560, with whole
// non-zero words 305 plus a bitmap (docs/runtime.md).
//
//   SHRINK-Z1  A word of zeros is not kept: the restore writes only the kept
//              words, into pages that MADV_DONTNEED released, which read as
//              zeros until written (and nothing writes a parked task's stack,
//              the rule of docs/runtime.md); a half word is written back with
//              its base. So a restored stack equals the saved one byte for
//              byte. This keeps an idle task's untouched buffers (a read
//              buffer on the stack that no data reached yet) out of its heap
//              block, and out of the restore's page faults.
struct saved_header {
    std::uint32_t base_a;
    std::uint32_t base_b;
};
std::size_t tag_bytes(std::size_t words) noexcept { return (words + 3) / 4; }

// tag_of() is w's tag for bases a and b. Under memcheck a suspended
// frame's padding and dead locals are undefined, and testing them would be
// reported: a valgrind build keeps every word whole (copying is no use of
// the bytes); only the saving is lost.
unsigned tag_of(std::uint64_t w, std::uint32_t a, std::uint32_t b) noexcept {
#if WEFT_VALGRIND
    (void)w;
    (void)a;
    (void)b;
    return 3;
#else
    if (w == 0) return 0;
    const auto high = static_cast<std::uint32_t>(w >> 32);
    return high == a ? 1 : high == b ? 2 : 3;
#endif
}

// save_chunks() returns a heap block with the kept words of [sp, sp + n)
// (n a multiple of 8), or null when malloc fails; *kept is the block's
// size. Reads the frames without ASan's checks: their red zones are
// poisoned, and stay so (the shadow of the stack is not touched by the
// release or the restore, so a restored task keeps its red zones).
#if defined(__clang__) || defined(__GNUC__)
[[gnu::no_sanitize_address]]
#endif
std::byte* save_chunks(const std::byte* sp, std::size_t n, std::size_t* kept) noexcept {
    const std::size_t words = n / 8;
    const auto* src = reinterpret_cast<const std::uint64_t*>(sp);
    // The bases: the two most frequent high halves among (at most) the
    // first eight distinct ones met; a rarer one is kept whole.
    std::uint32_t cand[8];
    std::size_t count[8] = {};
    std::size_t ncand = 0;
#if !WEFT_VALGRIND
    for (std::size_t i = 0; i < words; ++i) {
        if (src[i] == 0) continue;
        const auto high = static_cast<std::uint32_t>(src[i] >> 32);
        std::size_t k = 0;
        while (k < ncand && cand[k] != high) ++k;
        if (k < ncand)
            ++count[k];
        else if (ncand < 8)
            cand[ncand] = high, count[ncand++] = 1;
    }
#endif
    saved_header h{0, 0};
    std::size_t best = 0, second = 0;
    for (std::size_t k = 0; k < ncand; ++k) {
        if (count[k] > best) {
            second = best, h.base_b = h.base_a;
            best = count[k], h.base_a = cand[k];
        } else if (count[k] > second) {
            second = count[k], h.base_b = cand[k];
        }
    }
    if (ncand < 2) h.base_b = h.base_a;  // (1 and 2 then mean the same)
    std::size_t data = 0;
    for (std::size_t i = 0; i < words; ++i) {
        const unsigned t = tag_of(src[i], h.base_a, h.base_b);
        data += t == 3 ? 8 : t != 0 ? 4 : 0;
    }
    const std::size_t tags = tag_bytes(words);
    const std::size_t size = sizeof h + tags + data;
    auto* block = static_cast<std::byte*>(std::malloc(size));
    if (!block) return nullptr;
    std::memcpy(block, &h, sizeof h);
    auto* tag = reinterpret_cast<unsigned char*>(block + sizeof h);
    std::byte* out = block + sizeof h + tags;
    std::fill(tag, tag + tags, static_cast<unsigned char>(0));
    for (std::size_t i = 0; i < words; ++i) {
        const std::uint64_t w = src[i];
        const unsigned t = tag_of(w, h.base_a, h.base_b);
        if (t == 0) continue;
        tag[i / 4] = static_cast<unsigned char>(tag[i / 4] | t << (i % 4 * 2));
        if (t == 3) {
            std::memcpy(out, &w, 8);
            out += 8;
        } else {
            const auto low = static_cast<std::uint32_t>(w);
            std::memcpy(out, &low, 4);
            out += 4;
        }
    }
    *kept = size;
    return block;
}

// restore_chunks() writes the kept words of a block from save_chunks()
// back to [sp, sp + n) (SHRINK-Z1), without ASan's checks (as the save).
// The tags are read 32 words (8 bytes) at a time and only the set ones
// visited.
#if defined(__clang__) || defined(__GNUC__)
[[gnu::no_sanitize_address]]
#endif
void restore_chunks(std::byte* sp, std::size_t n, const std::byte* block) noexcept {
    const std::size_t words = n / 8;
    saved_header h;
    std::memcpy(&h, block, sizeof h);
    const auto* tag = reinterpret_cast<const unsigned char*>(block + sizeof h);
    const std::size_t tags = tag_bytes(words);
    const std::byte* in = block + sizeof h + tags;
    const std::uint64_t a = std::uint64_t{h.base_a} << 32, b = std::uint64_t{h.base_b} << 32;
    auto* dst = reinterpret_cast<std::uint64_t*>(sp);
    for (std::size_t k = 0; k < tags; k += 8) {
        std::uint64_t m = 0;
        for (std::size_t j = 0; j < 8 && k + j < tags; ++j) m |= std::uint64_t{tag[k + j]} << (8 * j);
        while (m != 0) {
            const unsigned at = static_cast<unsigned>(__builtin_ctzll(m)) & ~1u;
            const unsigned t = static_cast<unsigned>(m >> at) & 3;
            m &= ~(std::uint64_t{3} << at);
            const std::size_t i = k * 4 + at / 2;
            // memcpy reads the block only: a stack word is written by a
            // plain store, which ASan does not check here (a call to an
            // intercepted memcpy would check the frames' red zones).
            if (t == 3) {
                std::uint64_t whole;
                std::memcpy(&whole, in, 8);
                in += 8;
                dst[i] = whole;
            } else {
                std::uint32_t low;
                std::memcpy(&low, in, 4);
                in += 4;
                dst[i] = (t == 1 ? a : b) | low;
            }
        }
    }
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
// may be due: a bounded batch, a larger one when w is idle. Owner only.
void runtime_core::maybe_sweep(worker* w, bool idle) noexcept {
    if (shrink_after_ns <= 0) return;
    if (w->sweep_asked.load(std::memory_order_relaxed) && w->sweep_asked.exchange(false, std::memory_order_acquire)) {
        sweep(w, true, 0);
        return;
    }
    // The FIFO is in the order tasks were listed, not the order they last
    // parked: a front entry that ran since (not waiting, or waiting with a
    // fresh stamp: it parked again, as a task sleeping in a loop does) says
    // nothing about the entries behind it. Such an entry goes to the back
    // (a few per call), so that it cannot hold up the sweep for ever.
    const std::int64_t now = coarse_now_ns();
    for (int k = 0; k < 4 && w->idle_count != 0; ++k) {
        task_record* front = w->idle_fifo.front();
        const bool waiting = front->state.load(std::memory_order_relaxed) == task_state::waiting;
        if (!waiting || now - front->state_since.load(std::memory_order_relaxed) >= shrink_after_ns) {
            sweep(w, false, idle ? idle_sweep_batch : sweep_batch);
            return;
        }
        if (w->idle_count == 1) return;
        w->idle_fifo.push_back(w->idle_fifo.pop_front());
    }
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

// sweep() looks at up to `batch` candidates from the front (force: all of
// them, whatever their age). One parked too recently goes to the back; the
// eighth such ends a sweep that is not forced (the FIFO is in listing
// order, so what lies behind them is mostly as recent).
void runtime_core::sweep(worker* w, bool force, std::size_t batch) noexcept {
    const std::int64_t now = coarse_now_ns();
    std::size_t n = force ? w->idle_count : std::min(w->idle_count, batch);
    int recent = 0;
    while (n-- > 0) {
        task_record* t = w->idle_fifo.pop_front();
        --w->idle_count;
        const bool waiting = t->state.load(std::memory_order_acquire) == task_state::waiting;
        if (waiting && !force && now - t->state_since.load(std::memory_order_relaxed) < shrink_after_ns) {
            // Parked, but not for long enough yet (perhaps parked again
            // since it was listed): look again later.
            w->idle_fifo.push_back(t);
            ++w->idle_count;
            if (++recent == 8) break;
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
// go to a heap block (SHRINK-Z1) and those pages are released. Every task
// stack's top is on a page boundary (guarded and slab stacks alike: a slab
// stack's guard words are in its own slot, src/stack/task_stacks.cpp), so
// all of its pages go. True if it shrank.
// ---- the shrink guard (runtime_options::shrink_guard) -----------------------
//
//   SHRINK-G1  While a guarded task is shrunk, its released range [page_floor(sp),
//              page_floor(top)) is PROT_NONE and listed in `guards`; its restore
//              makes it readable and writable again, and unlists it, before it
//              writes the saved words back. So any other access to that range
//              while the task is parked faults, and the fault handler
//              (src/fiber/safety.cpp) finds the range here and names the task.
//              A task that finds no free slot (shrink_guard_budget) or whose
//              mprotect fails is shrunk unguarded.
//
// The slots are process-wide (several runtimes share them). A slot's lo is
// claimed by compare-and-swap from 0, then hi and task are stored; it is
// freed in the opposite order. The handler reads them without locks: on
// its dying path a slot being claimed or freed meanwhile only means a
// missed match, and the fault is then reported as a plain one.
namespace {
struct guard_slot {
    std::atomic<std::uintptr_t> lo{0};
    std::atomic<std::uintptr_t> hi{0};
    std::atomic<task_record*> task{nullptr};
};
guard_slot guards[shrink_guard_budget];
std::atomic<std::size_t> guards_used{0};

std::size_t guard_home(std::uintptr_t lo) noexcept {
    return static_cast<std::size_t>((lo >> 12) * 0x9e3779b97f4a7c15ull >> 40) % shrink_guard_budget;
}

// guard_range() makes [lo, hi) inaccessible and lists it for t; false if
// there is no slot or mprotect failed (nothing changed then).
bool guard_range(std::byte* lo, std::byte* hi, task_record* t) noexcept {
    if (guards_used.load(std::memory_order_relaxed) >= shrink_guard_budget) return false;
    const auto l = reinterpret_cast<std::uintptr_t>(lo);
    const std::size_t home = guard_home(l);
    for (std::size_t k = 0; k < shrink_guard_budget; ++k) {
        guard_slot& g = guards[(home + k) % shrink_guard_budget];
        std::uintptr_t expected = 0;
        if (!g.lo.compare_exchange_strong(expected, l, std::memory_order_acq_rel)) continue;
        if (::mprotect(lo, static_cast<std::size_t>(hi - lo), PROT_NONE) != 0) {
            g.lo.store(0, std::memory_order_release);
            return false;
        }
        g.task.store(t, std::memory_order_relaxed);
        g.hi.store(reinterpret_cast<std::uintptr_t>(hi), std::memory_order_release);
        guards_used.fetch_add(1, std::memory_order_relaxed);
        return true;
    }
    return false;
}

// unguard_range() undoes guard_range() for the range that starts at lo, if
// it is listed (SHRINK-G1).
void unguard_range(std::byte* lo) noexcept {
    if (guards_used.load(std::memory_order_relaxed) == 0) return;
    const auto l = reinterpret_cast<std::uintptr_t>(lo);
    const std::size_t home = guard_home(l);
    for (std::size_t k = 0; k < shrink_guard_budget; ++k) {
        guard_slot& g = guards[(home + k) % shrink_guard_budget];
        if (g.lo.load(std::memory_order_acquire) != l) continue;
        const std::uintptr_t h = g.hi.load(std::memory_order_acquire);
        if (::mprotect(lo, h - l, PROT_READ | PROT_WRITE) != 0) fatal_message("weft: the shrink guard could not unprotect a task's stack");
        g.hi.store(0, std::memory_order_relaxed);
        g.task.store(nullptr, std::memory_order_relaxed);
        g.lo.store(0, std::memory_order_release);
        guards_used.fetch_sub(1, std::memory_order_relaxed);
        return;
    }
}

// guard_fault() is the fault hook: a fault in a guarded range is reported,
// naming the task (async-signal-safe: loads and write(2)).
bool guard_fault(const void* addr) noexcept {
    const auto a = reinterpret_cast<std::uintptr_t>(addr);
    for (guard_slot& g : guards) {
        const std::uintptr_t l = g.lo.load(std::memory_order_acquire);
        const std::uintptr_t h = g.hi.load(std::memory_order_acquire);
        if (l == 0 || a < l || a >= h) continue;
        const task_record* t = g.task.load(std::memory_order_relaxed);
        char buf[512];
        text_writer m(buf, sizeof buf);
        m.text("weft: access to the released stack of shrunk task ");
        if (t && !t->name.empty()) {
            m.text("'");
            m.text(t->name.substr(0, 200));
            m.text("'");
        } else {
            m.text("<anonymous>");
        }
        m.text(" (id ");
        m.dec(t ? t->id : 0);
        m.text(") at ");
        m.hex(a);
        m.text(": a pointer into a parked task's stack was used while the task was parked (docs/runtime.md, "
               "\"What a task's neighbours may not do while it is parked\")\n");
        write_stderr(m.c_str(), m.size());
        return true;
    }
    return false;
}
}  // namespace

void install_shrink_guard() noexcept { set_fault_hook(&guard_fault); }

bool runtime_core::shrink_task(worker* w, task_record* t) noexcept {
    if (!try_hold(t)) return false;  // SHRINK-S2
    bool shrank = false;
    fiber_record* f = t->fiber;
    wait_arena* a = f ? f->arena : nullptr;
    if (a && a->pins == 0 && !t->shrunk) {  // SHRINK-A2, SHRINK-S3
        auto* sp = static_cast<std::byte*>(f->ctx);
        auto* base = static_cast<std::byte*>(f->stack.base);
        std::byte* lo = page_floor(sp);
        std::byte* hi = stack_end(f);
        if (sp > base && lo >= base && hi > sp) {
            const std::size_t n = static_cast<std::size_t>(hi - sp);
            std::size_t kept = 0;
            if (std::byte* block = save_chunks(sp, n, &kept)) {  // SHRINK-Z1
                if (::madvise(lo, static_cast<std::size_t>(hi - lo), MADV_DONTNEED) == 0) {
                    a->saved = block;  // the range is [f->ctx, hi): derived again by the restore
                    if (shrink_guard) (void)guard_range(lo, hi, t);  // SHRINK-G1
                    t->shrunk = true;  // SHRINK-S3: under the hold
                    shrank = true;
                    w->view.shrinks.bump();
                    w->view.shrunk_bytes.bump(kept);
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
    fiber_record* f = t->fiber;
    wait_arena* a = f->arena;
    auto* sp = static_cast<std::byte*>(f->ctx);  // as shrink_task() found it: the task has not run since
    std::byte* hi = stack_end(f);
    unguard_range(page_floor(sp));  // SHRINK-G1 (nothing when no task is guarded)
    restore_chunks(sp, static_cast<std::size_t>(hi - sp), a->saved);  // SHRINK-Z1
    std::free(a->saved);
    a->saved = nullptr;
    t->was_shrunk = true;  // SHRINK-R1
    t->shrunk = false;
    w->view.restores.bump();
}

// release_stack_pages() gives back the pages of a finished task's stack, one
// that was shrunk and restored, before the stack goes back to its pool.
//
//   SHRINK-R1  A task that was restored gives its stack's pages back when it
//              ends. Such a task had been idle, and tasks idle together tend
//              to wake together (a broadcast, a shutdown): each restore
//              faults its stack's top page back in, and without this every
//              page would stay resident in the pool's free stacks after its
//              task ended, so that a million tasks woken at once would hold
//              a page each at the peak (4 GiB for 10^6: the SC3 peak of
//              docs/runtime.md) although none of them is alive. The cost is
//              one madvise per restored task; tasks never shrunk (all of a
//              short-lived workload's) pay nothing, and their stacks stay
//              warm in the pool.
void runtime_core::release_stack_pages(fiber_record* f) noexcept {
    auto* lo = page_floor(static_cast<std::byte*>(f->stack.base));
    std::byte* hi = stack_end(f);
    if (hi > lo) (void)::madvise(lo, static_cast<std::size_t>(hi - lo), MADV_DONTNEED);
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
