// work_deque.hpp: layer L4, internal: the scheduler's work-stealing deque.
//
//   work_deque<T>    a Chase-Lev deque of T*: one owner pushes and pops at
//                    the bottom (LIFO), any thread steals at the top (FIFO)
//
// The algorithm and its memory orderings follow Lê, Pop, Cohen and Zappa
// Nardelli, "Correct and Efficient Work-Stealing for Weak Memory Models"
// (PPoPP 2013), with one deliberate change: every seq_cst fence of the paper
// is replaced by seq_cst atomic operations, because ThreadSanitizer does not
// model std::atomic_thread_fence and would report (or, worse, hide) races
// that the fences exclude. seq_cst accesses are at least as strong here: the
// accesses the fences order are themselves made seq_cst, so they take part
// in the single total order S directly (see pop() and steal()).
//
// Invariants (t = top_, b = bottom_, both logical indices: slot positions
// before reduction modulo the ring's capacity):
//   DEQUE-I1  the items are the logical indices [t, b); index i lives in slot
//             i & mask of the current ring. t only grows, and only by a successful
//             CAS t -> t + 1 (a steal, or pop() taking the last item).
//   DEQUE-I2  only the owner writes bottom_, array_ and the slots; thieves write
//             nothing but top_ (by CAS). The ring of the current array_ always
//             holds the items [t, b) as of the owner's last store.
//   DEQUE-I3  a slot is overwritten only by push(), and only in the current ring
//             (a replaced ring is never written again): either with index
//             i + k * capacity, which push() does only after it saw top_ past i
//             (when b - t == capacity it grows instead), so a thief still aiming
//             at i fails its CAS; or with index i again after pop() took i, and
//             then a thief whose loads of top_ and bottom_ admit i is ordered after
//             that pop() (see pop()) and reads the new item. So a thief that read
//             slot i of any ring, current or retired, and then wins CAS top_ i ->
//             i + 1 read the item at index i: the CAS is the re-check that makes a
//             stale ring or slot harmless, and no item is taken twice.
//   DEQUE-I4  retired rings live until the deque is destroyed, so a thief that
//             loaded an old array_ can always read from it.
//   DEQUE-I5  bottom_ may be t - 1 for a moment inside pop() on an empty deque
//             (b - 1 < t); indices are signed 64-bit, so this cannot wrap.
//   DEQUE-I6  the solo forms (push_solo(), pop_solo(), steal_solo()) are for a
//             deque that no other thread takes from: with no thief there is
//             nothing to race, so they move top_ and bottom_ with plain
//             (relaxed and release) stores instead of the exchange and the
//             compare-and-swap, and t may also grow by steal_solo()'s store.
//             Other threads may still read the estimates. The caller says
//             which forms a deque gets, for its whole life (the scheduler: a
//             runtime with one worker, SCHED-Q3).
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace weft::detail {

// work_deque<T> is a Chase-Lev work-stealing deque of non-null T*. It does
// not own the items. One thread, the owner, may call push() and pop(); any
// thread, the owner included, may call steal(), steal_half() (from this
// deque into its own), size_estimate(), empty_estimate() and capacity().
// No operation blocks or takes a lock, except that push() allocates (with
// operator new) when it grows the ring.
// Neither copyable nor movable: thieves hold its address.
template <class T>
class work_deque {
public:
    // work_deque(initial_capacity) makes an empty deque whose ring holds
    // initial_capacity items, rounded up to a power of two (at least 1).
    // Requires: initial_capacity <= 2^62. Throws: std::bad_alloc.
    explicit work_deque(std::size_t initial_capacity = 256)
        : top_(0), bottom_(0) {
        rings_.push_back(std::make_unique<ring>(std::bit_ceil(std::max<std::size_t>(initial_capacity, 1))));
        array_.store(rings_.back().get(), std::memory_order_relaxed);
    }

    // push_solo(), pop_solo() and steal_solo() are push(), pop() and an
    // owner's steal() for a deque that no other thread steals from
    // (DEQUE-I6). Mixing them with steal() or steal_half() from another
    // thread is a race.
    void push_solo(T* item) {
        assert(item != nullptr);
        const std::int64_t b = bottom_.load(std::memory_order_relaxed);
        const std::int64_t t = top_.load(std::memory_order_relaxed);
        ring* a = array_.load(std::memory_order_relaxed);
        if (b - t >= static_cast<std::int64_t>(a->capacity())) a = grow(a, t, b);
        a->store(b, item);
        bottom_.store(b + 1, std::memory_order_release);
    }
    [[nodiscard]] T* pop_solo() noexcept {
        const std::int64_t b = bottom_.load(std::memory_order_relaxed);
        if (top_.load(std::memory_order_relaxed) >= b) return nullptr;
        T* item = array_.load(std::memory_order_relaxed)->load(b - 1);
        bottom_.store(b - 1, std::memory_order_release);
        return item;
    }
    [[nodiscard]] T* steal_solo() noexcept {
        const std::int64_t t = top_.load(std::memory_order_relaxed);
        if (t >= bottom_.load(std::memory_order_relaxed)) return nullptr;
        T* item = array_.load(std::memory_order_relaxed)->load(t);
        top_.store(t + 1, std::memory_order_release);
        return item;
    }

    // ~work_deque() frees the current ring and every retired one; the items
    // are not touched. Requires: no thread is using the deque any more.
    ~work_deque() = default;

    work_deque(const work_deque&) = delete;
    work_deque& operator=(const work_deque&) = delete;

    // push(item) adds item at the bottom (the LIFO end). Owner only.
    // Requires: item != nullptr. When the ring is full it is replaced by one
    // twice as large; the old ring is kept until destruction (DEQUE-I4).
    // Throws: std::bad_alloc when growing; the deque is then unchanged.
    void push(T* item) {
        assert(item != nullptr);
        // Relaxed: only the owner writes bottom_ (DEQUE-I2), so it reads its own
        // latest value.
        const std::int64_t b = bottom_.load(std::memory_order_relaxed);
        // Acquire: pairs with the thieves' CAS on top_ (a release). A thief
        // reads slot t before its CAS t -> t + 1; seeing that CAS here makes
        // the read happen-before our store into the same slot (index
        // t + capacity below), so the thief cannot have read our new item.
        const std::int64_t t = top_.load(std::memory_order_acquire);
        ring* a = array_.load(std::memory_order_relaxed);  // owner's own store
        if (b - t >= static_cast<std::int64_t>(a->capacity())) a = grow(a, t, b);
        // Relaxed: published by the release store of bottom_ below.
        a->store(b, item);
        // Release (the paper's release fence + relaxed store): a thief that
        // acquires bottom_ >= b + 1 sees the slot, the item's contents and,
        // after a grow, the new ring. seq_cst on top of that: the runtime's
        // wake-up protocol (SCHED-P1 in src/runtime/sleeping.cpp) orders this store
        // before the pusher's seq_cst loads of the sleeping/searching counts,
        // against a sleeping worker's seq_cst increment and its seq_cst
        // empty_estimate(); a release store could pass those loads (x86
        // reorders a store with a later load) and lose a wake-up. An
        // exchange, not a seq_cst store: a store followed by a load of
        // another word needs a full barrier between them, which qemu-user
        // drops for STLR then LDAR on an x86 host (TASK-C2 in src/task/task.cpp);
        // an exchange is one everywhere, and on x86 it is the xchg a seq_cst
        // store costs anyway.
        (void)bottom_.exchange(b + 1, std::memory_order_seq_cst);
    }

    // pop() removes and returns the bottom item (the most recently pushed
    // one still present), or nullptr if the deque is empty. Owner only.
    // Never fails spuriously: nullptr means that, at its linearisation
    // point, the deque was empty (a thief may have taken the last item).
    [[nodiscard]] T* pop() noexcept {
        const std::int64_t b = bottom_.load(std::memory_order_relaxed) - 1;
        ring* a = array_.load(std::memory_order_relaxed);  // owner's own store
        // seq_cst store then seq_cst load (the paper: relaxed store, seq_cst
        // fence, relaxed load). This is the owner's half of a Dekker pattern
        // with steal(), which loads top_ then bottom_, both seq_cst. In the
        // total order S, a thief's load of bottom_ either follows this store
        // (it reads bottom_ <= b, or a later value stored only after index b
        // was settled, and does not take our index b) or precedes it; then
        // its load of top_ precedes our load of top_ too, so our t is at
        // least the thief's. The thief aims at index b only if its t == b,
        // so then our t == b as well and both CAS top_ from b: exactly one
        // wins. With release/acquire instead, the store could be reordered
        // after the load: we could read a stale top_ < b and take index b
        // without a CAS while a thief reads the old bottom_ and a newer
        // top_ == b (another thief stole b - 1) and takes index b too.
        // Exchange: a store then a load of another word (TASK-C2 in
        // src/task/task.cpp; see push()).
        (void)bottom_.exchange(b, std::memory_order_seq_cst);
        std::int64_t t = top_.load(std::memory_order_seq_cst);
        if (t > b) {
            // Empty: b == t - 1 (DEQUE-I5). Restore bottom_ == top_. Release so
            // that every value of bottom_ a thief can read comes from a
            // release store by the owner (it then also sees every slot
            // below it).
            bottom_.store(b + 1, std::memory_order_release);
            return nullptr;
        }
        // Relaxed: our own store; thieves never write slots (DEQUE-I2).
        T* item = a->load(b);
        if (t == b) {
            // The last item: thieves may be racing for index t as well. The
            // seq_cst CAS decides; whoever moves top_ from t owns the item.
            if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                              std::memory_order_relaxed)) {
                item = nullptr;  // a thief won; the deque is now empty
            }
            // top_ is now b + 1 either way: make the deque empty again.
            bottom_.store(b + 1, std::memory_order_release);
        }
        // t < b: thieves that saw our store of bottom_ stop below b; those
        // that did not still need to win index t < b. Index b is ours.
        return item;
    }

    // steal() removes and returns the top item (the oldest one), or nullptr.
    // nullptr means the deque looked empty OR this thread lost a race for
    // the top item to another thief or to the owner's pop(): a caller that
    // wants an item should retry while !empty_estimate(). Any thread,
    // including the owner: steal() writes only top_ and only by CAS, so it
    // composes with the owner's own push()/pop() exactly as a thief's does
    // (the owner taking its oldest item is a thief that happens to run on
    // the owner thread; it is never interleaved with its own pop()).
    [[nodiscard]] T* steal() noexcept {
        // seq_cst load of top_, then seq_cst load of bottom_ (the paper:
        // acquire load, seq_cst fence, acquire load). The thief's half of
        // the Dekker pattern with pop() (see there): top_ must come before
        // bottom_ in S. seq_cst includes acquire: reading bottom_
        // synchronises with the owner's release (or seq_cst) store of it,
        // which makes the slots below it, the items' contents and the ring
        // that holds them visible.
        std::int64_t t = top_.load(std::memory_order_seq_cst);
        const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
        if (t >= b) return nullptr;
        // Acquire (the paper: consume): pairs with grow()'s release store,
        // so the ring's copied slots are visible if we see a newer ring than
        // the one published with the bottom_ we read.
        ring* a = array_.load(std::memory_order_acquire);
        // Relaxed: the value may belong to a ring that was replaced since,
        // or be read before a competing thief or pop() took index t; the CAS
        // below is the re-check (DEQUE-I3, DEQUE-I4).
        T* item = a->load(t);
        // seq_cst CAS (the paper's choice): it is the write side of the
        // Dekker pattern with pop(), and its release half publishes our slot
        // read to push()'s acquire load of top_. Failure: someone else took
        // index t; report a lost race.
        if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                          std::memory_order_relaxed)) {
            return nullptr;
        }
        return item;
    }

    // steal_half(into) moves up to half (rounded up) of this deque's items,
    // oldest first, into `into`, by repeated steal() and into.push(); returns
    // how many it moved. The half is of size_estimate() at the call. Stops
    // early when this deque looks empty, and gives up after as many lost
    // races as it wanted items (each lost race means another thread took
    // one). Requires: the calling thread owns `into`; &into != this.
    // Throws: std::bad_alloc from into.push(); the item being moved is then
    // lost to both deques, so callers that cannot afford that reserve
    // capacity in `into` first.
    std::size_t steal_half(work_deque& into) {
        assert(&into != this);
        const std::int64_t n = size_estimate();
        const std::int64_t want = n - n / 2;
        std::int64_t moved = 0;
        std::int64_t lost = 0;
        while (moved < want) {
            if (T* item = steal()) {
                into.push(item);
                ++moved;
            } else if (empty_estimate() || ++lost > want) {
                break;
            }
        }
        return static_cast<std::size_t>(moved);
    }

    // size_estimate() is the number of items, as seen by a relaxed read of
    // both ends: possibly stale by the time it returns, never negative. Any
    // thread. Exact for the owner when no thief is active.
    [[nodiscard]] std::int64_t size_estimate() const noexcept {
        // A hint only, but seq_cst: a worker going to sleep relies on
        // it to see a push that its seq_cst registration did not precede
        // (SCHED-P1). top_ first: it only grows, so reading it before bottom_ errs
        // towards "more items" rather than a negative size; the max() covers
        // pop()'s transient b == t - 1 (DEQUE-I5).
        const std::int64_t t = top_.load(std::memory_order_seq_cst);
        const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
        return std::max<std::int64_t>(b - t, 0);
    }

    // empty_estimate() is size_estimate() == 0. Any thread.
    [[nodiscard]] bool empty_estimate() const noexcept { return size_estimate() == 0; }

    // capacity() is the size of the current ring (a power of two): how many
    // items fit before the next push() grows it. Any thread; may be stale.
    [[nodiscard]] std::size_t capacity() const noexcept {
        return array_.load(std::memory_order_acquire)->capacity();
    }

private:
    // ring is a power-of-two array of slots, indexed by logical index modulo
    // its capacity. Slots are atomic because a thief may read a slot while
    // the owner writes it (the thief's CAS then fails, DEQUE-I3).
    class ring {
    public:
        explicit ring(std::size_t capacity)
            : mask_(capacity - 1), slots_(std::make_unique<std::atomic<T*>[]>(capacity)) {}

        std::size_t capacity() const noexcept { return mask_ + 1; }
        // load(i)/store(i) are relaxed: ordering comes from bottom_, top_
        // and array_ (see the callers). Requires: i >= 0.
        T* load(std::int64_t i) const noexcept {
            return slots_[static_cast<std::size_t>(i) & mask_].load(std::memory_order_relaxed);
        }
        void store(std::int64_t i, T* item) noexcept {
            slots_[static_cast<std::size_t>(i) & mask_].store(item, std::memory_order_relaxed);
        }

    private:
        std::size_t mask_;
        std::unique_ptr<std::atomic<T*>[]> slots_;
    };

    // grow(a, t, b) replaces the full ring a by one twice as large holding
    // the indices [t, b), and returns it. Owner only, called by push().
    ring* grow(ring* a, std::int64_t t, std::int64_t b) {
        // Reserve first, so that a bad_alloc leaves the deque unchanged.
        rings_.reserve(rings_.size() + 1);
        auto bigger = std::make_unique<ring>(a->capacity() * 2);
        // Indices below t may already be taken; indices >= t that a thief
        // takes meanwhile are copied needlessly but harmlessly (the thief's
        // CAS moved top_, so the copy is never handed out again).
        for (std::int64_t i = t; i < b; ++i) bigger->store(i, a->load(i));
        ring* fresh = bigger.get();
        rings_.push_back(std::move(bigger));  // a stays in rings_: retired (DEQUE-I4)
        // Release: pairs with steal()'s acquire load of array_, so a thief
        // that sees the new ring sees the copies.
        array_.store(fresh, std::memory_order_release);
        return fresh;
    }

    // The two ends on separate cache lines: thieves hammer top_, the owner
    // bottom_.
    static constexpr std::size_t cache_line = 64;

    alignas(cache_line) std::atomic<std::int64_t> top_;     // next index to steal
    alignas(cache_line) std::atomic<std::int64_t> bottom_;  // next index to push
    alignas(cache_line) std::atomic<ring*> array_;          // the current ring, in rings_
    // rings_ owns every ring ever used, the current one last. Owner only.
    std::vector<std::unique_ptr<ring>> rings_;
};

}  // namespace weft::detail
