// timer_wheel.hpp: layer L4, internal: one hierarchical timing wheel of
// timer nodes (the runtime keeps one per worker; docs/timers.md).
//
// Not synchronised: the owner guards each wheel with a lock of its own.
#pragma once

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "weft/detail/intrusive_list.hpp"
#include "weft/detail/task_record.hpp"

namespace weft::detail {

// timer_wheel holds timer nodes by deadline in `levels` wheels of 64 slots,
// each level 64 times coarser than the one below, plus an overflow list for
// deadlines beyond the top level. Each slot is an intrusive doubly-linked
// list (detail::intrusive_list without a tail, LIST-IL1 - LIST-IL3), so insert() and
// erase() are O(1); one occupancy bitmap per level
// finds the next non-empty slot in O(levels).
//
// Time is counted in ticks of tick_ns. `elapsed` is the wheel's position:
// every node due before it has been handed out. A node whose deadline rounds up to tick e sits at the level of
// the highest bit in which e and `elapsed` differ (6 bits per level), in the
// slot named by e's digit at that level (a node due before `elapsed` is put
// at `elapsed`):
//
//   TIMER-E1  a node's tick e is its deadline rounded *up* to a tick, so e * tick_ns
//             >= when: a node reached through level 0 is due (never early), and
//             expire() still checks when <= now before it hands a node out;
//   TIMER-E2  every node at level L > 0 has e's digit at L greater than elapsed's
//             and the same digits above L (at level 0: e >= elapsed, same digits
//             above); so no slot start lies before `elapsed`, and moving elapsed
//             forward to any tick up to the earliest slot start keeps TIMER-E2: the
//             earliest slot is reached before any node's level would be wrong;
//   TIMER-E3  a slot of level L > 0 is emptied when elapsed reaches its start: its
//             nodes move to lower levels (cascade), at most `levels` times per node
//             over its life; the overflow list is moved down when elapsed reaches the
//             next multiple of 64^levels ticks.
//   TIMER-E4  the least tick over the nodes is cached for earliest(): an insert
//             lowers it, a node leaving with that tick forgets it.
//   TIMER-E5  every occupied slot of level L starts before every occupied slot of
//             a level above L (and the overflow list starts after all of them): by
//             TIMER-E2 a level-L slot lies within the current 64^(L+1)-tick block,
//             and a slot of level L+1 or higher starts after that block ends. So
//             the earliest slot is the first occupied one on the lowest occupied
//             level, and recompute() stops there.
//
// Precision: a node is handed out at or after its deadline, and no later than
// the first expire() at or after its deadline rounded up to the next tick.
class timer_wheel {
public:
    static constexpr int tick_shift = 14;
    static constexpr std::int64_t tick_ns = std::int64_t{1} << tick_shift;  // 16.384 us
    static constexpr int slot_bits = 6;
    static constexpr unsigned slots = 1u << slot_bits;
    static constexpr unsigned levels = 6;  // 64^6 ticks = 2^50 ns, about 13 days, before the overflow list
    static constexpr std::uint16_t overflow = levels * slots;
    static constexpr std::int64_t never = INT64_MAX;

    // timer_wheel() starts the wheel's clock at `start` (a node due earlier
    // is due at once).
    explicit timer_wheel(std::chrono::steady_clock::time_point start = {}) noexcept {
        const std::int64_t ns = ns_of(start);
        elapsed_ = ns > 0 ? static_cast<std::uint64_t>(ns) >> tick_shift : 0;
    }
    timer_wheel(const timer_wheel&) = delete;
    timer_wheel& operator=(const timer_wheel&) = delete;

    // insert() adds n, due at n->when. Requires: n is in no wheel
    // (n->slot == timer_node::unlinked).
    void insert(timer_node* n) noexcept {
        const std::uint64_t e = tick_of(n->when);
        link(n, e);
        ++size_;
        if (earliest_known_ && e < earliest_) earliest_ = e;  // TIMER-E4
    }

    // erase() takes n out of this wheel: true if it was in it, false if it
    // was not (never added, expired, or erased already). O(1). Requires: n is
    // in this wheel or in none.
    bool erase(timer_node* n) noexcept {
        if (n->slot == timer_node::unlinked) return false;
        const std::uint16_t s = n->slot;
        unlink(n);
        --size_;
        forget_earliest(n);
        if (lists_[s].empty()) recompute();
        return true;
    }

    // expire() takes out up to `max` nodes that are due at `now` (when <= now),
    // earliest ticks first, and stores them in out[0..returned). Nodes whose
    // slot comes due move to lower levels on the way (TIMER-E3). Call it again
    // while it returns `max`.
    std::size_t expire(std::chrono::steady_clock::time_point now, timer_node** out, std::size_t max) noexcept {
        const std::int64_t now_ns = ns_of(now);
        if (now_ns < 0) return 0;
        const std::uint64_t now_tick = static_cast<std::uint64_t>(now_ns) >> tick_shift;
        std::size_t count = 0;
        while (count < max) {
            if (next_ > now_tick) {
                // Nothing comes due before next_ > now_tick: TIMER-E2 holds. Not
                // now_tick + 1: a node added later with a deadline already
                // passed then lands in slot now_tick, due at this `now`
                // (every node of tick now_tick is due at any now in it, TIMER-E1).
                if (now_tick > elapsed_) elapsed_ = now_tick;
                break;
            }
            elapsed_ = next_;  // <= every slot start: TIMER-E2 holds
            const std::uint16_t s = next_slot_;
            if (s < slots) {
                // Level 0: every node here has tick elapsed_ <= now_tick, so
                // when <= now (TIMER-E1); checked all the same.
                while (count < max && !lists_[s].empty()) {
                    timer_node* n = lists_[s].front();
                    unlink(n);
                    if (n->when <= now) {
                        --size_;
                        forget_earliest(n);
                        out[count++] = n;
                    } else {
                        link(n, tick_of(n->when));  // after now_tick: not this slot again
                    }
                }
            } else {
                // A coarser slot (or the overflow list) reached its start:
                // move its nodes down (TIMER-E3).
                slot_list moving = lists_[s].take();
                clear_bit(s);
                while (timer_node* n = moving.pop_front()) {
                    n->slot = timer_node::unlinked;
                    link(n, tick_of(n->when));
                }
            }
            recompute();
        }
        return count;
    }

    // next_due() is the earliest time at which expire() has work: a time no
    // later than the earliest deadline rounded up to a tick, and earlier than
    // it when the earliest slot is a coarse one (expire() then only moves
    // nodes down). never when the wheel is empty. In nanoseconds of
    // steady_clock.
    [[nodiscard]] std::int64_t next_due() const noexcept {
        return next_ == no_tick ? never : static_cast<std::int64_t>(next_ << tick_shift);
    }
    // earliest() is the earliest deadline in the wheel rounded up to a tick
    // (a deadline already passed counts as the wheel's position), in
    // nanoseconds of steady_clock; never when the wheel is empty. Unlike
    // next_due() it is never a coarse slot's start. O(1) when the earliest
    // node is known (TIMER-E4); otherwise it scans the earliest slot once, which
    // holds the earliest node (TIMER-E2: every node of a lower level, and of an
    // earlier slot of the same level, is due before any node of a later
    // one).
    [[nodiscard]] std::int64_t earliest() const noexcept {
        if (next_ == no_tick) return never;
        if (!earliest_known_) {
            std::uint64_t e = next_;  // a level-0 slot holds the nodes of one tick: its start
            if (next_slot_ >= slots) {
                e = no_tick;
                for (timer_node* n = lists_[next_slot_].front(); n; n = slot_list::next(n)) e = std::min(e, tick_of(n->when));
            }
            earliest_ = e;
            earliest_known_ = true;
        }
        return static_cast<std::int64_t>(std::max(earliest_, elapsed_) << tick_shift);
    }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] bool empty() const noexcept { return size_ == 0; }

    // tick_of() is `when` rounded up to a tick (TIMER-E1); times before the
    // clock's epoch are tick 0.
    [[nodiscard]] static std::uint64_t tick_of(std::chrono::steady_clock::time_point when) noexcept {
        const std::int64_t ns = ns_of(when);
        if (ns <= 0) return 0;
        return (static_cast<std::uint64_t>(ns) + static_cast<std::uint64_t>(tick_ns) - 1) >> tick_shift;
    }

private:
    static constexpr std::uint64_t no_tick = ~std::uint64_t{0};
    static constexpr int top_shift = slot_bits * static_cast<int>(levels);  // overflow boundary: 2^36 ticks

    static std::int64_t ns_of(std::chrono::steady_clock::time_point t) noexcept {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    }

    // link() puts n at tick e (clamped to elapsed_: a node already due is
    // due at the first tick not processed yet), at the level TIMER-E2 gives.
    void link(timer_node* n, std::uint64_t e) noexcept {
        if (e < elapsed_) e = elapsed_;
        const int high = 63 - std::countl_zero((e ^ elapsed_) | (slots - 1));
        const unsigned level = static_cast<unsigned>(high / slot_bits);
        std::uint16_t s;
        std::uint64_t start;
        if (level >= levels) {
            s = overflow;
            start = ((elapsed_ >> top_shift) + 1) << top_shift;
        } else {
            const int shift = slot_bits * static_cast<int>(level);
            s = static_cast<std::uint16_t>(level * slots + ((e >> shift) & (slots - 1)));
            start = (e >> shift) << shift;
            occupied_[level] |= std::uint64_t{1} << (s % slots);
        }
        n->slot = s;
        lists_[s].push_front(n);
        if (start < next_) {
            next_ = start;
            next_slot_ = s;
        }
    }

    // unlink() takes n out of its slot's list (the slot's bit is cleared
    // when the list empties; next_ is the caller's to recompute).
    void unlink(timer_node* n) noexcept {
        const std::uint16_t s = n->slot;
        lists_[s].remove(n);
        n->slot = timer_node::unlinked;
        if (lists_[s].empty()) clear_bit(s);
    }

    // forget_earliest() is called when n leaves the wheel: if n may have been
    // the earliest node, earliest() finds the next one again (TIMER-E4).
    void forget_earliest(const timer_node* n) noexcept {
        if (size_ == 0) {
            earliest_ = no_tick;
            earliest_known_ = true;
        } else if (earliest_known_ && tick_of(n->when) <= earliest_) {
            earliest_known_ = false;
        }
    }

    void clear_bit(std::uint16_t s) noexcept {
        if (s < overflow) occupied_[s / slots] &= ~(std::uint64_t{1} << (s % slots));
    }

    // recompute() finds the earliest slot start: the first occupied slot at
    // or after elapsed's digit on the lowest level that has one (TIMER-E5).
    void recompute() noexcept {
        for (unsigned level = 0; level < levels; ++level) {
            const int shift = slot_bits * static_cast<int>(level);
            const unsigned cur = static_cast<unsigned>((elapsed_ >> shift) & (slots - 1));
            const std::uint64_t bits = occupied_[level] & (~std::uint64_t{0} << cur);
            if (!bits) continue;
            const unsigned slot = static_cast<unsigned>(std::countr_zero(bits));
            next_ = ((elapsed_ >> (shift + slot_bits)) << (shift + slot_bits)) + (std::uint64_t{slot} << shift);
            next_slot_ = static_cast<std::uint16_t>(level * slots + slot);
            return;  // TIMER-E5: no slot of a higher level starts earlier
        }
        if (!lists_[overflow].empty()) {
            next_ = ((elapsed_ >> top_shift) + 1) << top_shift;
            next_slot_ = overflow;
            return;
        }
        next_ = no_tick;
        next_slot_ = 0;
    }

    std::uint64_t elapsed_ = 0;
    std::uint64_t next_ = no_tick;  // the earliest slot start, or no_tick
    std::uint16_t next_slot_ = 0;   // the slot it belongs to
    std::size_t size_ = 0;
    // TIMER-E4: while earliest_known_, earliest_ is the least tick_of(when) over
    // the wheel's nodes (no_tick when empty); moving nodes down a level
    // changes no node's tick.
    mutable std::uint64_t earliest_ = no_tick;
    mutable bool earliest_known_ = true;
    std::uint64_t occupied_[levels] = {};
    using slot_list =
        intrusive_list<timer_node, list_links<timer_node, &timer_node::prev, &timer_node::next>, /*WithTail=*/false>;
    static_assert(sizeof(slot_list) == sizeof(timer_node*), "a slot is its head pointer");
    slot_list lists_[levels * slots + 1];
};

}  // namespace weft::detail
