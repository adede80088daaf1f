// select.cpp: layer L5, the select engine (weft/sync/select.hpp, invariant
// CHAN-K5, over the channels' CHAN-K1 - CHAN-K4).

#include "weft/sync/select.hpp"

#include <algorithm>
#include <span>

namespace weft {

namespace detail {

namespace {

// The poll order's random numbers: a xorshift per thread, seeded from the
// thread's address. Read through a non-inlined accessor: a task may move to
// another thread between two selects (docs/platform-facts.md, thread-local
// addresses across a switch); within one select nothing switches.
thread_local std::uint64_t rng_state = 0;

[[gnu::noinline]] std::uint64_t next_random() noexcept {
    std::uint64_t* s = &rng_state;
    asm volatile("" : "+r"(s));
    std::uint64_t x = *s;
    if (x == 0) x = reinterpret_cast<std::uintptr_t>(s) * 0x9E3779B97F4A7C15ull | 1;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x;
}

// The locks of a select, each taken once, in address order (CHAN-K5), kept in
// the caller's scratch array (the select allocates nothing).
class lock_set {
public:
    lock_set(select_entry* es, std::size_t n, spin_lock** room) : locks_(room) {
        for (std::size_t i = 0; i < n; ++i)
            if (es[i].ch) locks_[size_++] = es[i].ch;
        std::sort(locks_, locks_ + size_);
        size_ = static_cast<std::size_t>(std::unique(locks_, locks_ + size_) - locks_);
    }
    void lock() noexcept {
        for (std::size_t i = 0; i < size_; ++i) locks_[i]->lock();
    }
    void unlock() noexcept {
        for (std::size_t i = size_; i > 0; --i) locks_[i - 1]->unlock();
    }

private:
    spin_lock** locks_;
    std::size_t size_ = 0;
};

}  // namespace

int select_engine(select_entry* es, std::size_t n, const std::chrono::steady_clock::time_point* deadline,
                  bool has_default, int& code, select_scratch scratch) {
    code = code_ok;
    lock_set locks(es, n, scratch.locks);
    // A random poll order makes the choice among ready cases uniform.
    std::uint32_t* const order = scratch.order;
    std::size_t cases = 0;
    for (std::size_t i = 0; i < n; ++i)
        if (es[i].ch) order[cases++] = static_cast<std::uint32_t>(i);
    for (std::size_t i = cases; i > 1; --i) std::swap(order[i - 1], order[next_random() % i]);
    const std::span<const std::uint32_t> poll_order(order, cases);

    locks.lock();
    for (std::uint32_t i : poll_order) {
        waiter* wake = nullptr;
        if (es[i].hooks->poll(es[i].c, wake)) {
            locks.unlock();
            if (wake) wake->wake();
            return static_cast<int>(i);
        }
    }
    if (has_default) {
        locks.unlock();
        return select_default;
    }
    // Nothing is ready: wait on every case. All the locks are held, so no
    // case can complete between the poll above and the links below (CHAN-K5).
    // WAITER-V4: the waiter, like the entries' nodes (select() places them), is
    // off a shared stack.
    stable<waiter> held;
    waiter& w = *held;
    w.arm();
    for (std::uint32_t i : poll_order) {
        es[i].node.w = &w;
        es[i].node.index = static_cast<int>(i);
        es[i].hooks->link(es[i].c, &es[i].node);
    }
    locks.unlock();
    const waiter::outcome o = w.wait(deadline);
    // WAITER-V3: take out every node still linked (the winning one is out already).
    locks.lock();
    for (std::uint32_t i : poll_order) es[i].hooks->unlink(es[i].c, &es[i].node);
    locks.unlock();
    switch (o) {
    case waiter::outcome::notified: code = w.code; return w.fired;
    case waiter::outcome::timed_out: return select_timed_out;
    case waiter::outcome::canceled: break;
    }
    throw_canceled();
}

}  // namespace detail

}  // namespace weft
