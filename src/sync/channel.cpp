// channel.cpp: layer L5, the non-template part of channels: the select
// engine (weft/sync/channel.hpp, invariants K1-K5).

#include "weft/sync/channel.hpp"

#include <algorithm>
#include <vector>

namespace weft {

const char* to_string(channel_status s) noexcept {
    switch (s) {
    case channel_status::ok: return "ok";
    case channel_status::closed: return "closed";
    case channel_status::timeout: return "timeout";
    case channel_status::full: return "full";
    case channel_status::empty: return "empty";
    }
    return "unknown";
}

channel_closed::channel_closed() : std::logic_error("weft: send on a closed channel") {}

namespace detail {

namespace {

// The poll order's random numbers: a xorshift per thread, seeded from the
// thread's address. Read through a non-inlined accessor: a task may move to
// another thread between two selects (FACTS.md, thread-locals across
// switches); within one select nothing switches.
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

// The locks of a select, each taken once, in address order (K5).
class lock_set {
public:
    lock_set(select_entry* es, std::size_t n) {
        locks_.reserve(n);
        for (std::size_t i = 0; i < n; ++i)
            if (es[i].ch) locks_.push_back(es[i].ch);
        std::sort(locks_.begin(), locks_.end());
        locks_.erase(std::unique(locks_.begin(), locks_.end()), locks_.end());
    }
    [[nodiscard]] bool empty() const noexcept { return locks_.empty(); }
    void lock() noexcept {
        for (spin_lock* l : locks_) l->lock();
    }
    void unlock() noexcept {
        for (auto it = locks_.rbegin(); it != locks_.rend(); ++it) (*it)->unlock();
    }

private:
    std::vector<spin_lock*> locks_;
};

}  // namespace

int select_engine(select_entry* es, std::size_t n, const std::chrono::steady_clock::time_point* deadline,
                  bool has_default, int& code) {
    code = code_ok;
    lock_set locks(es, n);
    // A random poll order makes the choice among ready cases uniform.
    std::vector<std::uint32_t> order;
    order.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
        if (es[i].ch) order.push_back(static_cast<std::uint32_t>(i));
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[next_random() % i]);

    locks.lock();
    for (std::uint32_t i : order) {
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
    // case can complete between the poll above and the links below (K5).
    waiter w;
    w.arm();
    for (std::uint32_t i : order) {
        es[i].node.w = &w;
        es[i].node.index = static_cast<int>(i);
        es[i].hooks->link(es[i].c, &es[i].node);
    }
    locks.unlock();
    const waiter::outcome o = w.wait(deadline);
    // V3: take out every node still linked (the winning one is out already).
    locks.lock();
    for (std::uint32_t i : order) es[i].hooks->unlink(es[i].c, &es[i].node);
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
