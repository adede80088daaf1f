// shrink.cpp: layer L4, idle tasks giving their stack back (docs/runtime.md,
// "Idle tasks give their stack back"): the workers' candidate FIFOs and
// their sweep, the shrink of a parked task under its hold (SHRINK-S1 -
// SHRINK-S4, include/weft/detail/task_record.hpp) and the restore before it
// runs again. Its interface and the map of its parts: shrink.hpp.

#include "shrink.hpp"

#include "runtime_core.hpp"
#include "weft/detail/sanitizer.hpp"

#include <sys/mman.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

namespace weft::detail {

// task_shrink costs a task record nothing: the record's members after it sit
// in its tail padding (task_record.hpp); this catches a layout that loses that.
#if defined(__x86_64__)
static_assert(sizeof(task_record) <= 296, "task_record grew: check where task_shrink sits");
#endif

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

// shrink_test_hook()'s mode: 1 refuse the protection, 2 fail the restore's,
// 3 a sweep waits 200 us between its look at a task's state and its drop
// (SHRINK-L1's window, wide enough for a park on another worker).
std::atomic<int> test_fail{0};

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
//              zeros until written (and nothing else can write them: they are
//              PROT_NONE until the restore, SHRINK-P1); a half word is written
//              back with its base. So a restored stack equals the saved one byte for
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

// save_chunks() returns a heap block with `head` bytes for the caller, then
// the kept words of [sp, sp + n) (n a multiple of 8), or null when malloc
// fails; *kept is the block's size. Reads the frames without ASan's checks: their red zones are
// poisoned, and stay so (the shadow of the stack is not touched by the
// release or the restore, so a restored task keeps its red zones).
// Nor TSan's: the save and the restore are memory management, as the
// kernel's paging is; the protection (SHRINK-P1) orders them with every
// other access, which TSan cannot see.
#if defined(__clang__)
[[gnu::no_sanitize_address, clang::no_sanitize("thread")]]
#elif defined(__GNUC__)
[[gnu::no_sanitize_address, gnu::no_sanitize_thread]]
#endif
std::byte* save_chunks(const std::byte* sp, std::size_t n, std::size_t head, std::size_t* kept) noexcept {
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
    const std::size_t size = head + sizeof h + tags + data;
    auto* start = static_cast<std::byte*>(std::malloc(size));
    if (!start) return nullptr;
    std::byte* block = start + head;
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
    return start;
}

// for_each_kept() calls emit(i, word) for every kept word of a block from
// save_chunks() (SHRINK-Z1) covering n bytes, in increasing i (the word's
// index from sp). The tags are read 32 words (8 bytes) at a time and only
// the set ones visited.
template <class Emit>
void for_each_kept(std::size_t n, const std::byte* block, Emit&& emit) noexcept {
    const std::size_t words = n / 8;
    saved_header h;
    std::memcpy(&h, block, sizeof h);
    const auto* tag = reinterpret_cast<const unsigned char*>(block + sizeof h);
    const std::size_t tags = tag_bytes(words);
    const std::byte* in = block + sizeof h + tags;
    const std::uint64_t a = std::uint64_t{h.base_a} << 32, b = std::uint64_t{h.base_b} << 32;
    for (std::size_t k = 0; k < tags; k += 8) {
        std::uint64_t m = 0;
        for (std::size_t j = 0; j < 8 && k + j < tags; ++j) m |= std::uint64_t{tag[k + j]} << (8 * j);
        while (m != 0) {
            const unsigned at = static_cast<unsigned>(__builtin_ctzll(m)) & ~1u;
            const unsigned t = static_cast<unsigned>(m >> at) & 3;
            m &= ~(std::uint64_t{3} << at);
            const std::size_t i = k * 4 + at / 2;
            if (t == 3) {
                std::uint64_t whole;
                std::memcpy(&whole, in, 8);
                in += 8;
                emit(i, whole);
            } else {
                std::uint32_t low;
                std::memcpy(&low, in, 4);
                in += 4;
                emit(i, (t == 1 ? a : b) | low);
            }
        }
    }
}

// ---- writing into a range that stays inaccessible (SHRINK-P2) ---------------
//
// A restore must put the words back before anyone else can reach the
// pages: unprotected first, a thread that touched the range in between
// would read a zero page, or write into it and see its write overwritten.
// So the words go in through /proc/self/mem, whose writes reach pages
// whatever their protection (as a debugger's do), while the range is still
// PROT_NONE; only then is it made accessible. The file is opened for each
// restore and closed after (open, pwrite and close are async-signal-safe):
// a descriptor kept open would be one the program did not open, and in a
// forked child it would still be the parent's memory.
bool put_bytes(int fd, const std::byte* src, std::size_t len, std::uintptr_t at) noexcept {
    while (len != 0) {
        const ssize_t r = ::pwrite(fd, src, len, static_cast<off_t>(at));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        src += r;
        at += static_cast<std::size_t>(r);
        len -= static_cast<std::size_t>(r);
    }
    return true;
}

// write_words() writes the kept words of `block` for [sp, sp + n) into the
// (inaccessible, released) range, a 4 KiB piece at a time; pieces with no
// kept word stay released (they read as zeros, as saved). False if a write
// failed. Reads the block only; the piece buffer is on the caller's stack
// (a signal handler's included: 4 KiB).
#if defined(__clang__)
[[clang::no_sanitize("thread")]]
#elif defined(__GNUC__)
[[gnu::no_sanitize_thread]]
#endif
bool write_words(std::byte* sp, std::size_t n, const std::byte* block) noexcept {
    const int fd = ::open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    if (fd < 0) return false;
    constexpr std::uintptr_t piece = 4096;
    alignas(16) std::byte buf[piece];
    const auto base = reinterpret_cast<std::uintptr_t>(sp);
    std::uintptr_t cur = 0;  // the piece in buf (0: none yet)
    bool ok = true;
    auto flush = [&] {
        // Under memcheck a kept word may be undefined (valgrind builds keep
        // every word, SHRINK-Z1); the pwrite() only moves it back, and the
        // stack's own definedness bits never changed.
        sanitizer::reading_dead_stack(buf, piece);
        if (cur != 0 && ok) ok = put_bytes(fd, buf, piece, cur);
    };
    for_each_kept(n, block, [&](std::size_t i, std::uint64_t w) {
        const std::uintptr_t addr = base + i * 8;
        const std::uintptr_t p = addr & ~(piece - 1);
        if (p != cur) {
            flush();
            cur = p;
            std::memset(buf, 0, piece);
        }
        std::memcpy(buf + (addr - p), &w, 8);
    });
    flush();
    ::close(fd);
    return ok;
}

// mem_writes_work() probes, once, that /proc/self/mem can write into an
// inaccessible private page here (a kernel built or booted with
// proc_mem.force_override=never, or a sandbox, refuses it).
bool mem_writes_work() noexcept {
    static const bool works = [] {
        const std::size_t page = page_size();
        void* m = ::mmap(nullptr, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return false;
        const std::uint64_t probe = 0x5eedf00dcafe1234ull;
        const int fd = ::open("/proc/self/mem", O_RDWR | O_CLOEXEC);
        bool ok = fd >= 0 && put_bytes(fd, reinterpret_cast<const std::byte*>(&probe), sizeof probe, reinterpret_cast<std::uintptr_t>(m));
        if (fd >= 0) ::close(fd);
        if (ok && ::mprotect(m, page, PROT_READ) == 0) ok = *static_cast<const std::uint64_t*>(m) == probe;
        ::munmap(m, page);
        return ok;
    }();
    return works;
}

}  // namespace

void runtime_core::ask_sweep() noexcept {
    if (shrink_after_ns <= 0) return;
    for (auto& w : ws) {
        w->shrink.sweep_asked.store(true, std::memory_order_release);
        if (nthreads != 0) wake_sleeper(w.get());
    }
}

// maybe_sweep() sweeps w's candidates when asked to, or when the oldest
// may be due: a bounded batch, a larger one when w is idle. Owner only.
void runtime_core::maybe_sweep(worker* w, bool idle) noexcept {
    if (shrink_after_ns <= 0) return;
    if (w->shrink.sweep_asked.load(std::memory_order_relaxed) && w->shrink.sweep_asked.exchange(false, std::memory_order_acquire)) {
        sweep(w, true, 0);
        return;
    }
    // The FIFO is in the order tasks were listed, not the order they last
    // parked: a front entry that ran since (not waiting, or waiting with a
    // fresh stamp: it parked again, as a task sleeping in a loop does) says
    // nothing about the entries behind it. Such an entry goes to the back
    // (a few per call), so that it cannot hold up the sweep for ever.
    const std::int64_t now = coarse_now_ns();
    for (int k = 0; k < 4 && w->shrink.count != 0; ++k) {
        task_record* front = w->shrink.fifo.front();
        const bool waiting = front->state.load(std::memory_order_relaxed) == task_state::waiting;
        if (!waiting || now - front->state_since.load(std::memory_order_relaxed) >= shrink_after_ns) {
            sweep(w, false, idle ? idle_sweep_batch : sweep_batch);
            return;
        }
        if (w->shrink.count == 1) return;
        w->shrink.fifo.push_back(w->shrink.fifo.pop_front());
    }
}

// shrink_wait_ns() is how long w may sleep before its oldest candidate may
// be due (-1: no candidate). The stamps are the coarse clock, which lags
// by up to a tick: the wait is rounded up by one, and is at least 1 ms.
std::int64_t runtime_core::shrink_wait_ns(worker* w) const noexcept {
    if (shrink_after_ns <= 0) return -1;
    if (w->shrink.sweep_asked.load(std::memory_order_acquire)) return 0;
    if (w->shrink.count == 0) return -1;
    const std::int64_t since = w->shrink.fifo.front()->state_since.load(std::memory_order_relaxed);
    const std::int64_t d = since + shrink_after_ns - coarse_now_ns() + 4'000'000;
    return std::max<std::int64_t>(d, 1'000'000);
}

// sweep() looks at up to `batch` candidates from the front (force: all of
// them, whatever their age). One parked too recently goes to the back; the
// eighth such ends a sweep that is not forced (the FIFO is in listing
// order, so what lies behind them is mostly as recent).
//
//   SHRINK-L1  A task parked in a wait it may be shrunk in is in exactly one
//              worker's FIFO, or will be before that worker's next sweep:
//              `listed` (task_shrink) goes 0 -> 1 only by the park that
//              pushes the entry, 1 -> 2 by a park that finds it listed, and
//              back to 0 only by the sweep that pops the entry and then owns
//              it, by a CAS from 1; a sweep whose CAS finds 2 (the task
//              parked again after the sweep read its state, perhaps on
//              another worker) sets 1 and keeps the entry. One atomic word
//              orders the drop and the park: with a plain store of 0, a park
//              that found 1 just before it left the task parked and in no
//              FIFO for its whole wait (shrink_foreign_test's "round N: the
//              task was not shrunk" at two and four workers).
//              models/shrink_list.pml.
void runtime_core::sweep(worker* w, bool force, std::size_t batch) noexcept {
    const std::int64_t now = coarse_now_ns();
    std::size_t n = force ? w->shrink.count : std::min(w->shrink.count, batch);
    int recent = 0;
    while (n-- > 0) {
        task_record* t = w->shrink.fifo.pop_front();
        --w->shrink.count;
        const bool waiting = t->state.load(std::memory_order_acquire) == task_state::waiting;
        if (waiting && !force && now - t->state_since.load(std::memory_order_relaxed) < shrink_after_ns) {
            // Parked, but not for long enough yet (perhaps parked again
            // since it was listed): look again later.
            w->shrink.fifo.push_back(t);
            ++w->shrink.count;
            if (++recent == 8) break;
            continue;
        }
        if (waiting && shrink_task(w, t) == shrink_result::later) {
            // Refused for the slab budget (SHRINK-P5: the slots beside it
            // may be shrunk meanwhile and join its run), or not holdable yet
            // (shrink_task()): it stays listed, and counts as a recent one.
            w->shrink.fifo.push_back(t);
            ++w->shrink.count;
            if (++recent == 8 && !force) break;
            continue;
        }
        // Off the list (it is listed again when it next parks), unless it
        // parked again since this sweep last kept it (SHRINK-L1).
        if (test_fail.load(std::memory_order_relaxed) == 3) ::usleep(200);
        std::uint8_t v = 1;
        if (!t->shrink.listed.compare_exchange_strong(v, 0, std::memory_order_acq_rel, std::memory_order_relaxed)) {
            t->shrink.listed.store(1, std::memory_order_relaxed);
            w->shrink.fifo.push_back(t);
            ++w->shrink.count;
            continue;
        }
        release(t);
    }
}

// ---- the shrink table: a shrunk stack stays readable and writable -------------
//
// A shrunk task's range [lo, hi) (lo: the page that holds its stack's base;
// hi: its stack's top, a page boundary) is PROT_NONE while its pages are
// released. Any access to it from user code, on any thread (another task,
// a plain thread, a signal handler), faults; weft's fault handler
// (src/fiber/safety.cpp) finds the range here, writes the saved words back
// and makes it accessible again, and the access is made again: it sees the
// task's values, and its writes stay, because the owner's restore then
// writes nothing over them. A system call handed a pointer into the range
// fails with EFAULT (the kernel does not raise signals for its own
// accesses); it never writes into a page that is later overwritten.
//
// The saved block starts with a block_head, its link in the table: the
// bucket of hi, a chain guarded by the bucket's lock.
//
//   SHRINK-P1  A range's protection, pages and state change only under its
//              bucket's lock (the shrink, a fault's restore, the owner's
//              restore). The shrink makes the range read-only before it
//              saves the words, PROT_NONE before it releases the pages, and
//              links the block before it unlocks: no write lands between the
//              save and the release, and no read sees a released page.
//   SHRINK-P2  A fault in a linked range never falls through to the crash
//              path: state shrunk, the handler restores it (PROT_READ|WRITE,
//              the saved words back, state restored); state idle or restored,
//              the access is made again. The owner's restore writes the words
//              only in state shrunk, so a write made after a fault's restore
//              survives.
//   SHRINK-P3  A block is read by a handler only under its bucket's lock
//              while it is linked; the owner unlinks it under that lock and
//              frees it after. A fault whose range was unlinked between the
//              fault and the handler's look-up (the owner restored it) is
//              made again once per unlink generation (`unlinks`): a second
//              fault at that address with no unlink in between is not ours.
//   SHRINK-P4  A bucket's lock holds the thread id of its holder; a handler
//              that finds its own thread holding it (a signal handler that
//              touched a stack its interrupted thread was shrinking) stops
//              the process with a message rather than spinning for ever.
//   SHRINK-P5  If the range cannot be protected (mprotect refuses: out of
//              memory mappings), the task is not shrunk. If the owner's
//              restore cannot make the range accessible, it restores every
//              shrunk range adjacent to it and makes their union accessible
//              (one mapping, no split); failing that, it stops the process
//              with a message: it never runs a task on a stack it could not
//              restore.
//
// models/shrink.pml checks SHRINK-P1 - SHRINK-P3 with SHRINK-S1 - SHRINK-S4.
namespace {

enum : std::uintptr_t { st_idle = 0, st_shrunk = 1, st_restored = 2, st_mask = 3 };

struct block_head {
    block_head* next = nullptr;  // the bucket's chain
    std::uintptr_t owner = 0;    // the fiber_record (16-byte aligned) | state
    [[nodiscard]] fiber_record* fiber() const noexcept { return reinterpret_cast<fiber_record*>(owner & ~st_mask); }
    [[nodiscard]] std::uintptr_t state() const noexcept { return owner & st_mask; }
    void set(std::uintptr_t st) noexcept { owner = (owner & ~st_mask) | st; }
};
static_assert(alignof(fiber_record) >= 4);
static_assert(sizeof(block_head) == 16, "tools/gdb/weft_gdb.py skips 16 bytes and reads the state at 8");

struct bucket {
    std::atomic<int> lock{0};  // 0, or the holder's thread id (SHRINK-P4)
    std::atomic<block_head*> head{nullptr};
};
constexpr std::size_t bucket_bits = 15;
bucket table[std::size_t{1} << bucket_bits];
std::atomic<std::size_t> max_span{0};        // the largest range ever linked, bytes
std::atomic<std::uint64_t> unlinks{0};       // SHRINK-P3's generation
std::atomic<std::uint64_t> faults_restored{0};

bucket& bucket_of(std::uintptr_t hi) noexcept {
    return table[static_cast<std::size_t>((hi >> 12) * 0x9e3779b97f4a7c15ull >> (64 - bucket_bits))];
}

int self_tid() noexcept {
    static thread_local int tid = 0;
    if (tid == 0) tid = static_cast<int>(::syscall(SYS_gettid));
    return tid;
}

void lock_bucket(bucket& b, int tid, bool in_handler) noexcept {
    for (;;) {
        int expected = 0;
        if (b.lock.compare_exchange_weak(expected, tid, std::memory_order_acquire, std::memory_order_relaxed)) return;
        if (in_handler && expected == tid)  // SHRINK-P4
            fatal_message("weft: a signal handler touched the stack of a task that its own thread was shrinking or restoring");
        ::sched_yield();  // async-signal-safe
    }
}
void unlock_bucket(bucket& b) noexcept { b.lock.store(0, std::memory_order_release); }

std::byte* range_lo(const fiber_record* f) noexcept { return page_floor(static_cast<std::byte*>(f->stack.base)); }

void link(bucket& b, block_head* h) noexcept {
    h->next = b.head.load(std::memory_order_relaxed);
    b.head.store(h, std::memory_order_relaxed);
}
void unlink(bucket& b, block_head* h) noexcept {
    block_head* p = b.head.load(std::memory_order_relaxed);
    if (p == h) {
        b.head.store(h->next, std::memory_order_relaxed);
    } else {
        while (p->next != h) p = p->next;
        p->next = h->next;
    }
    unlinks.fetch_add(1, std::memory_order_release);
}

// find() is the linked block of the range whose top is hi; null if none.
// Under b's lock.
block_head* find(bucket& b, std::uintptr_t hi) noexcept {
    for (block_head* h = b.head.load(std::memory_order_relaxed); h; h = h->next)
        if (reinterpret_cast<std::uintptr_t>(stack_end(h->fiber())) == hi) return h;
    return nullptr;
}

// ---- the mapping budget of protected slab runs (SHRINK-P5) ------------------
//
// Protecting a range changes at most two mapping boundaries. A guarded
// stack is a mapping of its own between PROT_NONE guard pages: its shrink
// merges it with them and its restore splits it off again, back to where
// it was before any shrink, so it never needs a mapping that was not there.
// Slab stacks are slots of one mapping: a run of adjacent shrunk slots is one
// PROT_NONE mapping inside it (two mappings more than none), so the count
// grows with the number of runs, and a restore in the middle of a run splits
// it (two more). slab_extra estimates the mappings that slab runs add (2 per
// run); a shrink that would start a new run, or a restore that would split
// one, past extra_cap() is refused, or restores the whole run instead
// (restore_run(), which merges), so that the process stays clear of
// vm.max_map_count (a quarter of it is the guarded stacks' budget, twice
// that their mappings, src/runtime/runtime.cpp). An estimate: neighbours
// change under their own locks meanwhile, and the cap leaves room for that.
std::atomic<long> slab_extra{0};

long extra_cap() noexcept {
    static const long cap = [] {
        long maps = 65530;
        if (std::FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
            long v = 0;
            if (std::fscanf(f, "%ld", &v) == 1 && v > 0) maps = v;
            std::fclose(f);
        }
        return std::max<long>(maps / 8, 64);
    }();
    return cap;
}

bool is_slab(const fiber_record* f) noexcept { return f->stack.guard == 0; }

int protect(std::byte* lo, std::byte* hi, int prot) noexcept {
    return ::mprotect(lo, static_cast<std::size_t>(hi - lo), prot);
}

// put_back() makes a shrunk range whole again (SHRINK-P2): its words go
// into its pages while it is still inaccessible, then it is made
// accessible; state restored. False (nothing made accessible) if either
// step failed. Under its bucket's lock.
bool put_back(block_head* h) noexcept {
    fiber_record* f = h->fiber();
    auto* sp = static_cast<std::byte*>(f->ctx);
    std::byte* hi = stack_end(f);
    if (!write_words(sp, static_cast<std::size_t>(hi - sp), reinterpret_cast<const std::byte*>(h + 1))) return false;
    if (test_fail.load(std::memory_order_relaxed) == 2 || protect(range_lo(f), hi, PROT_READ | PROT_WRITE) != 0) return false;
    h->set(st_restored);
    return true;
}

int shrunk_neighbours(const fiber_record* f, int tid) noexcept;

// shrink_fault() is the fault hook (SHRINK-P2, SHRINK-P3): true when addr
// is (or was, a moment ago) in a shrunk range, which is accessible now.
// Async-signal-safe: atomics, mprotect and plain memory only.
bool shrink_fault(const void* addr) noexcept {
    const std::size_t span = max_span.load(std::memory_order_acquire);
    if (span == 0) return false;
    const auto a = reinterpret_cast<std::uintptr_t>(addr);
    const std::uintptr_t page = page_size();
    const std::uintptr_t first = (a & ~(page - 1)) + page;
    const int tid = static_cast<int>(::syscall(SYS_gettid));
    for (std::uintptr_t hi = first; hi - first <= span; hi += page) {
        bucket& b = bucket_of(hi);
        // A range being shrunk is under its bucket's lock until it is
        // linked (SHRINK-P1): an unlocked empty bucket holds none.
        if (b.lock.load(std::memory_order_acquire) == 0 && b.head.load(std::memory_order_acquire) == nullptr) continue;
        lock_bucket(b, tid, true);
        block_head* h = find(b, hi);
        if (h && a >= reinterpret_cast<std::uintptr_t>(range_lo(h->fiber()))) {
            const fiber_record* restored = nullptr;
            if (h->state() == st_shrunk) {
                if (!put_back(h))
                    fatal_message("weft: another thread touched the stack of a shrunk task, and it could not be restored there (mprotect or /proc/self/mem failed: out of memory mappings?)");
                faults_restored.fetch_add(1, std::memory_order_relaxed);
                if (is_slab(h->fiber())) restored = h->fiber();
            }
            unlock_bucket(b);
            // The slab budget: a restore splits a run (+2), trims it (0) or
            // ends it (-2). The fiber stays alive: its owner has not run.
            if (restored) slab_extra.fetch_add(2 * shrunk_neighbours(restored, tid) - 2, std::memory_order_relaxed);
            return true;
        }
        unlock_bucket(b);
    }
    // SHRINK-P3: not linked now; once per unlink generation, try again.
    struct last_fault {
        std::uintptr_t addr;
        std::uint64_t gen;
    };
    [[gnu::tls_model("initial-exec")]] static thread_local last_fault last{0, 0};
    const std::uint64_t gen = unlinks.load(std::memory_order_acquire);
    if (last.addr == a && last.gen == gen) {
        last.addr = 0;
        return false;
    }
    last.addr = a;
    last.gen = gen;
    return true;
}

// shrunk_neighbours() counts the shrunk ranges adjacent to f's (0 - 2):
// the one whose top is f's lo, and the one whose lo is f's top. Takes their
// buckets one at a time; the caller holds none.
int shrunk_neighbours(const fiber_record* f, int tid) noexcept {
    const auto lo = reinterpret_cast<std::uintptr_t>(range_lo(f));
    const auto hi = reinterpret_cast<std::uintptr_t>(stack_end(f));
    const std::uintptr_t page = page_size();
    const std::size_t span = max_span.load(std::memory_order_acquire);
    int n = 0;
    auto look = [&](std::uintptr_t top, std::uintptr_t want_lo) {
        bucket& b = bucket_of(top);
        if (b.lock.load(std::memory_order_acquire) == 0 && b.head.load(std::memory_order_acquire) == nullptr) return false;
        lock_bucket(b, tid, false);
        block_head* h = find(b, top);
        const bool yes = h && h->state() == st_shrunk &&
                         (want_lo == 0 || reinterpret_cast<std::uintptr_t>(range_lo(h->fiber())) == want_lo);
        unlock_bucket(b);
        return h != nullptr ? (n += yes, true) : false;
    };
    (void)look(lo, 0);
    for (std::uintptr_t top = hi + page; top - hi <= span; top += page)
        if (look(top, hi)) break;
    return n;
}

// restore_run() is SHRINK-P5's fallback, when making f's range accessible
// alone failed (it would split a mapping past vm.max_map_count): every
// shrunk range adjacent to f's, below and above, is restored with it and
// their union made accessible at once, which merges mappings rather than
// splitting one. False if even that failed. Called without any bucket
// lock; one run at a time (run_mu), and the buckets are then locked in
// address order, so two runs, or a run and a handler (which holds one lock
// at a time), never wait for each other in a circle.
std::mutex run_mu;
bool restore_run(fiber_record* f, int tid) {
    std::lock_guard g(run_mu);
    const std::uintptr_t page = page_size();
    const std::size_t span = max_span.load(std::memory_order_acquire);
    std::vector<std::uintptr_t> tops{reinterpret_cast<std::uintptr_t>(stack_end(f))};
    std::byte* lo = range_lo(f);
    std::byte* hi = stack_end(f);
    // shrunk_at() is the range whose top is `top`, if it is linked and
    // shrunk (its lo, else null).
    auto shrunk_at = [&](std::uintptr_t top) -> std::byte* {
        bucket& b = bucket_of(top);
        lock_bucket(b, tid, false);
        block_head* n = find(b, top);
        std::byte* l = n && n->state() == st_shrunk ? range_lo(n->fiber()) : nullptr;
        unlock_bucket(b);
        return l;
    };
    while (std::byte* l = shrunk_at(reinterpret_cast<std::uintptr_t>(lo))) {
        tops.push_back(reinterpret_cast<std::uintptr_t>(lo));
        lo = l;
    }
    for (bool more = true; more;) {
        more = false;
        for (std::uintptr_t top = reinterpret_cast<std::uintptr_t>(hi) + page; top - reinterpret_cast<std::uintptr_t>(hi) <= span; top += page) {
            if (std::byte* l = shrunk_at(top); l == hi) {
                tops.push_back(top);
                hi = reinterpret_cast<std::byte*>(top);
                more = true;
                break;
            }
        }
    }
    std::vector<bucket*> bs;
    for (std::uintptr_t t : tops) bs.push_back(&bucket_of(t));
    std::sort(bs.begin(), bs.end());
    bs.erase(std::unique(bs.begin(), bs.end()), bs.end());
    for (bucket* b : bs) lock_bucket(*b, tid, false);
    // Every range's words first, while the union is still inaccessible
    // (SHRINK-P2), then the union at once.
    bool ok = true;
    for (std::uintptr_t t : tops) {
        block_head* n = find(bucket_of(t), t);
        if (!n || n->state() != st_shrunk) continue;
        auto* sp = static_cast<std::byte*>(n->fiber()->ctx);
        ok = ok && write_words(sp, static_cast<std::size_t>(reinterpret_cast<std::byte*>(t) - sp), reinterpret_cast<const std::byte*>(n + 1));
    }
    ok = ok && protect(lo, hi, PROT_READ | PROT_WRITE) == 0;
    if (ok) {
        for (std::uintptr_t t : tops)
            if (block_head* n = find(bucket_of(t), t); n && n->state() == st_shrunk) n->set(st_restored);
        if (is_slab(f)) slab_extra.fetch_sub(2, std::memory_order_relaxed);  // the run is gone
    }
    for (bucket* b : bs) unlock_bucket(*b);
    return ok;
}

}  // namespace

bool install_shrink_fault() noexcept {
    if (!mem_writes_work()) return false;
    set_fault_hook(&shrink_fault);
    return true;
}

WEFT_API void shrink_test_hook(int mode) noexcept { test_fail.store(mode, std::memory_order_relaxed); }

std::uint64_t shrink_faults() noexcept { return faults_restored.load(std::memory_order_relaxed); }

// shrink_task() shrinks t if it is switched out in a wait that has not
// ended (SHRINK-S2) and nothing pins its stack (SHRINK-A2): its live bytes,
// from the saved context up to its stack's top, go to a heap block
// (SHRINK-Z1), the whole range is made PROT_NONE and its pages are released
// (SHRINK-P1). Every task stack's top is on a page boundary (guarded and slab
// stacks alike: a slab stack's guard words are in its own slot, zero, src/
// stack/task_stacks.cpp), so all of its pages go. Later: refused for the slab
// budget (SHRINK-P5), to be tried again.
runtime_core::shrink_result runtime_core::shrink_task(worker* w, task_record* t) noexcept {
    // SHRINK-S2. No hold now: the task is still switching out (its state says
    // waiting before its scheduler's arrival, perhaps on another worker
    // than the one whose list holds it) or is being woken. It stays listed
    // ("later"): dropped here, a task that parked on another worker while
    // listed on this one would not be listed again until its next park, and
    // a forced sweep (runtime::shrink_idle()) would miss it for the whole
    // wait (seen as a shrink_foreign_test round that was never shrunk at
    // two and four workers).
    if (!try_hold(t)) return shrink_result::later;
    shrink_result shrank = shrink_result::no;
    fiber_record* f = t->fiber;
    wait_arena* a = f ? f->arena : nullptr;
    if (a && a->pins == 0 && !t->shrink.shrunk) {  // SHRINK-A2, SHRINK-S3
        auto* sp = static_cast<std::byte*>(f->ctx);
        auto* base = static_cast<std::byte*>(f->stack.base);
        std::byte* lo = range_lo(f);
        std::byte* hi = stack_end(f);
        // The slab budget (SHRINK-P5): a shrink starts a run (+2), extends
        // one (0) or joins two (-2).
        const long delta = is_slab(f) ? 2 - 2 * shrunk_neighbours(f, self_tid()) : 0;
        if (delta > 0 && slab_extra.load(std::memory_order_relaxed) + delta > extra_cap()) {
            shrank = shrink_result::later;  // the neighbours' shrinks may make room
        } else if (sp > base && hi > sp) {
            bucket& b = bucket_of(reinterpret_cast<std::uintptr_t>(hi));
            lock_bucket(b, self_tid(), false);
            // max_span covers this range before any access to it can fault:
            // a handler looks no further (found by models/shrink.pml: raised
            // after the protect, a write that faulted in the read-only
            // window was taken for a crash).
            const auto span = static_cast<std::size_t>(hi - lo);
            std::size_t m = max_span.load(std::memory_order_relaxed);
            while (m < span && !max_span.compare_exchange_weak(m, span, std::memory_order_seq_cst)) {
            }
            if (test_fail.load(std::memory_order_relaxed) != 1 && protect(lo, hi, PROT_READ) == 0) {  // SHRINK-P1
                std::size_t kept = 0;
                if (std::byte* block = save_chunks(sp, static_cast<std::size_t>(hi - sp), sizeof(block_head), &kept)) {
                    auto* h = new (block) block_head;
                    h->owner = reinterpret_cast<std::uintptr_t>(f) | st_idle;
                    link(b, h);
                    const auto width = static_cast<std::size_t>(hi - lo);
                    if (protect(lo, hi, PROT_NONE) == 0) {
                        (void)::madvise(lo, width, MADV_DONTNEED);
                        h->set(st_shrunk);
                        slab_extra.fetch_add(delta, std::memory_order_relaxed);
                        shrank = shrink_result::yes;
                        w->view.shrinks.bump();
                        w->view.shrunk_bytes.bump(kept);
                    } else if (protect(lo, hi, PROT_READ | PROT_WRITE) != 0) {
                        fatal_message("weft: a task's stack could not be made writable again after a refused shrink");
                    } else {
                        w->view.shrinks_refused.bump();
                    }
                    // Linked either way (state idle when refused): a write
                    // that faulted on the read-only range finds it (SHRINK-P2),
                    // and the restore unlinks it.
                    a->saved = block;
                    t->shrink.shrunk = true;  // SHRINK-S3: under the hold
                } else {
                    if (protect(lo, hi, PROT_READ | PROT_WRITE) != 0)
                        fatal_message("weft: a task's stack could not be made writable again after a failed shrink");
                    unlinks.fetch_add(1, std::memory_order_release);  // SHRINK-P3: a faulted write tries again
                }
            } else {
                w->view.shrinks_refused.bump();  // SHRINK-P5
            }
            unlock_bucket(b);
        }
    }
    drop_hold(t);  // SHRINK-S4
    return shrank;
}

// restore_task() makes a shrunk task's stack whole again, on the worker
// that is about to resume it (SHRINK-S4): unless a fault restored it
// already (SHRINK-P2), the range is made accessible and the saved words go
// back; the block is unlinked and freed (SHRINK-P3). The pages fault in.
void runtime_core::restore_task(worker* w, task_record* t) noexcept {
    fiber_record* f = t->fiber;
    wait_arena* a = f->arena;
    auto* h = reinterpret_cast<block_head*>(a->saved);
    std::byte* hi = stack_end(f);
    bucket& b = bucket_of(reinterpret_cast<std::uintptr_t>(hi));
    const int tid = self_tid();
    // The slab budget (SHRINK-P5): a restore that would split a run past
    // the cap restores the whole run instead. Counted before the lock (the
    // neighbours' buckets are taken one at a time); h's state is read again
    // under it.
    long delta = 0;
    bool whole_run = false;
    if (is_slab(f) && h->state() == st_shrunk) {
        delta = 2 * shrunk_neighbours(f, tid) - 2;
        whole_run = delta > 0 && slab_extra.load(std::memory_order_relaxed) + delta > extra_cap();
    }
    lock_bucket(b, tid, false);
    if (h->state() == st_shrunk) {
        if (!whole_run && put_back(h)) {
            slab_extra.fetch_add(delta, std::memory_order_relaxed);
        } else {
            unlock_bucket(b);
            if (!restore_run(f, tid))  // SHRINK-P5
                fatal_message("weft: a shrunk task's stack could not be made accessible again (mprotect failed: out of memory mappings, vm.max_map_count)");
            lock_bucket(b, tid, false);
        }
    }
    unlink(b, h);
    unlock_bucket(b);
    h->~block_head();
    std::free(h);
    a->saved = nullptr;
    t->shrink.was_shrunk = true;  // SHRINK-R1
    t->shrink.shrunk = false;
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
        while (task_record* t = w->shrink.fifo.pop_front()) {
            t->shrink.listed.store(0, std::memory_order_release);
            release(t);
        }
        w->shrink.count = 0;
    }
}

}  // namespace weft::detail
