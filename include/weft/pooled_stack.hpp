// weft/pooled_stack.hpp: layer L1, pooled stacks.
//
//   weft::stack_pool pool({.stack_size = 64 * 1024, .max_stacks = 1000});
//   weft::coroutine<int> co(std::allocator_arg, weft::pooled_stack(pool), body);
//
// A stack_pool keeps the stacks of finished coroutines and hands them to new
// ones, last freed first (the warmest stack). pooled_stack is the cheap
// handle (one pointer) that satisfies weft::stack_allocator; the pool is
// shared by every handle that refers to it.
//
// Where idle stacks live:
//   - a per-thread cache, a LIFO touched only by its own thread: allocate()
//     and deallocate() on it take no lock and execute no read-modify-write
//     instruction (the live-stack statistic is a per-thread counter too);
//   - the shared reserve, a mutex-protected LIFO that receives the older half
//     of a full thread cache, refills an empty one, takes a cache when its
//     thread exits, and serves threads without a cache.
// A stack allocated on one thread and freed on another goes into the freeing
// thread's cache (or the reserve) and is reused from there.
//
// The capacity of a thread cache follows that thread's demand. A cache
// starts with room for min_cached_per_thread stacks. Every stack the thread
// has to take from outside its cache because the cache is empty (a refill
// from the reserve or a new mapping) raises the capacity by one, up to
// max_cached_per_thread: a thread that repeatedly creates N coroutines and
// frees them ends its first round with room for all N, and from then on
// serves every allocation from its own cache, with no reserve traffic. A
// thread that only frees stacks other threads allocated gains no capacity
// and passes the surplus to the reserve, where the allocating threads find
// it. At each decay step the capacity shrinks to the most the cache was
// drawn down (or had to take from outside) during the last two decay
// periods, but not below min_cached_per_thread nor below the stacks it
// still holds; the idle stacks themselves leave through decay (below).
// The cache's slot array grows geometrically as stacks come back to it and
// shrinks with the capacity, so a steady loop allocates no memory.
//
// Following demand: the pool maps a new stack only when the calling thread's
// cache and the reserve are both empty, so it grows to the peak demand. When
// demand falls, decay returns the memory in two steps. A stack that stayed
// idle through a whole decay period has its pages released with
// madvise(MADV_DONTNEED) (the mapping stays, so reusing it costs page faults,
// not system calls); one that stays idle through a further period is surplus
// to the recent demand and is unmapped, except that the reserve keeps
// min_retained stacks mapped. A thread cache hands such stacks to the
// reserve, where they are unmapped. Decay runs as a side effect of
// allocate() and deallocate(): every ops_per_decay_check operations a thread
// reads the clock and trims its own cache and, when due, the reserve. A
// thread that stops using the pool keeps its cache (not trimmed, at most its
// current capacity) until it uses the pool again or exits. trim() forces a
// step now.
//
// A stack from the pool is indistinguishable from a fresh mmap_stack stack
// to a well-behaved coroutine: same usable size, the guard page below it
// intact, AddressSanitizer's poisoning cleared. Its contents are unspecified
// (a fresh stack reads as zeros, a trimmed one too, a reused one holds old
// frames); weft's coroutine writes everything it later reads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <vector>

#include "weft/config.hpp"
#include "weft/detail/intrusive_list.hpp"
#include "weft/stack.hpp"

namespace weft {

class stack_pool;

namespace detail {
struct pool_thread_cache;
struct pool_cache_links;  // a cache's links in its pool's list (src/stack/pooled_stack.cpp)
struct stack_pool_access;
}  // namespace detail

// limit_policy says what a stack_pool does when a new stack would exceed
// max_stacks or max_bytes.
enum class limit_policy : std::uint8_t {
    // fail: allocate() throws stack_pool_error naming the limit.
    fail,
    // fresh_unpooled: allocate() maps a stack outside the pool (not counted
    // against the limits), which deallocate() unmaps.
    fresh_unpooled,
};

// stack_pool_options configure a stack_pool; they are checked at
// construction.
struct stack_pool_options {
    // stack_size is the usable size of every pooled stack, rounded up to
    // whole pages. Requests up to it get a pooled stack of exactly this size;
    // larger requests get a stack outside the pool, unmapped on release.
    std::size_t stack_size = default_stack_size;
    // guard_pages inaccessible pages lie below each stack (>= 1).
    std::size_t guard_pages = 1;
    // max_cached_per_thread bounds the capacity of each thread's cache, which
    // grows with the thread's demand (see the top of this file; 0: no thread
    // caches, every operation goes through the reserve). At most 65536; the
    // pool uses at most max_stacks of it.
    std::size_t max_cached_per_thread = 65536;
    // min_cached_per_thread is the capacity a thread cache starts with and
    // never shrinks below (>= 1; clamped to max_cached_per_thread). Setting
    // both to the same value gives caches of a fixed capacity.
    std::size_t min_cached_per_thread = 16;
    // max_stacks and max_bytes are hard limits on the pooled stacks mapped at
    // once, in use or idle; bytes count whole mappings, guards included.
    std::size_t max_stacks = std::numeric_limits<std::size_t>::max();
    std::size_t max_bytes = std::numeric_limits<std::size_t>::max();
    // min_retained idle stacks stay mapped in the reserve (their pages
    // released) however long demand stays low.
    std::size_t min_retained = 0;
    // on_limit says what allocate() does at a limit.
    limit_policy on_limit = limit_policy::fail;
    // decay is the idle period after which a stack's pages are released (and
    // after a second one, the stack unmapped). 0: at every check.
    std::chrono::milliseconds decay{10000};
    // clock, when set, replaces std::chrono::steady_clock::now for decay
    // (tests drive decay with it). It is called from any thread.
    std::chrono::steady_clock::time_point (*clock)() noexcept = nullptr;
};

// stack_pool_statistics is a snapshot of a pool. Counters only grow.
// The gauges are exact when no thread is using the pool, approximate
// while threads are (each thread cache is read without stopping it).
struct stack_pool_statistics {
    std::uint64_t hits = 0;            // allocations served by the calling thread's cache
    std::uint64_t reserve_hits = 0;    // allocations served by the shared reserve
    std::uint64_t misses = 0;          // allocations that mapped a new pooled stack
    std::uint64_t unpooled = 0;        // stacks handed out outside the pool (too large, or at a limit)
    std::uint64_t limit_failures = 0;  // allocate() calls that threw stack_pool_error
    std::uint64_t trims = 0;           // idle stacks whose pages were released (madvise)
    std::uint64_t unmaps = 0;          // idle pooled stacks unmapped
    std::uint64_t flushes = 0;         // deallocations that found their thread's cache full at its
                                       // capacity and moved its older half to the reserve
    std::size_t in_use = 0;            // pooled stacks handed out and not returned
    std::size_t cached = 0;            // idle pooled stacks, in thread caches and the reserve
    std::size_t reserved = 0;          // of which in the reserve
    std::size_t mapped = 0;            // pooled stacks mapped: in_use + cached
    std::size_t mapped_bytes = 0;      // their mappings, guards included
    std::size_t peak_mapped = 0;       // the most pooled stacks mapped at once
    std::size_t unpooled_in_use = 0;   // unpooled stacks handed out and not returned
    std::size_t thread_caches = 0;     // live threads that have a cache for this pool
    std::size_t cache_capacity = 0;    // the current capacities of their caches, summed
};

// stack_pool_error is thrown by allocate() at a hard limit under
// limit_policy::fail. code() is ENOMEM; what() names the limit, e.g.
// "weft: cannot allocate a stack of 65536 bytes (stack_pool limit
// max_stacks = 4 reached: 4 stacks mapped, 0 idle in the reserve): ...".
class WEFT_API stack_pool_error : public stack_error {
public:
    enum class limit_kind : std::uint8_t { max_stacks, max_bytes };
    stack_pool_error(limit_kind which, std::size_t limit_value, std::size_t requested, std::size_t mapped,
                     std::size_t reserved);
    // limit() is the limit that was reached.
    [[nodiscard]] limit_kind limit() const noexcept { return which_; }
    // limit_value() is its configured value.
    [[nodiscard]] std::size_t limit_value() const noexcept { return value_; }

private:
    limit_kind which_;
    std::size_t value_;
};

// stack_pool owns pooled stacks; see the top of this file. Every member is
// thread-safe. Destroying a pool unmaps every idle stack, including those in
// the caches of threads still running. Requires: every stack it handed out
// has been returned and no thread is using it (a pool destroyed with stacks
// still out prints their number and aborts: they would come back to freed
// memory).
class WEFT_API stack_pool {
public:
    using options = stack_pool_options;
    using statistics = stack_pool_statistics;

    // A thread reads the clock for decay once every ops_per_decay_check
    // allocate()/deallocate() calls on its cache.
    static constexpr std::uint32_t ops_per_decay_check = 64;

    // stack_pool() checks the options. Maps nothing. Throws:
    // std::invalid_argument naming the option (zero stack_size or
    // guard_pages, max_stacks 0, max_bytes below one stack, min_retained
    // above max_stacks or max_bytes, a negative decay, an oversized
    // max_cached_per_thread or min_cached_per_thread, a zero
    // min_cached_per_thread, sizes that overflow).
    stack_pool() : stack_pool(options{}) {}
    explicit stack_pool(const options& opts);
    ~stack_pool();
    stack_pool(const stack_pool&) = delete;
    stack_pool& operator=(const stack_pool&) = delete;

    // global() is the process-wide pool with default options, used by a
    // default-constructed pooled_stack. Created on first use; never destroyed.
    [[nodiscard]] static stack_pool& global();

    // allocate() returns a stack of stack_size() usable bytes (a pooled one
    // when size <= stack_size(), else an unpooled one of size rounded up to
    // pages, with one more guard page than pooled stacks: that is how
    // deallocate() tells them apart). Throws: std::invalid_argument if size
    // is 0; stack_pool_error at a limit under limit_policy::fail;
    // stack_error when the system refuses a mapping.
    [[nodiscard]] stack_view allocate(std::size_t size);
    // deallocate() returns a stack that allocate() of this pool handed out,
    // on any thread. An empty view is ignored.
    void deallocate(stack_view stack) noexcept;

    // trim() runs a decay step now, as if a decay period had passed with no
    // demand: idle stacks in the calling thread's cache and in the reserve
    // have their pages released, those already released are unmapped (the
    // reserve keeps min_retained), and the calling thread's cache capacity
    // falls to the stacks it still holds (at least min_cached_per_thread).
    // Other threads trim their caches at their next decay check.
    void trim() noexcept;

    // stats() is a snapshot of the counters and gauges.
    [[nodiscard]] statistics stats() const;
    // config() is the options the pool was built with.
    [[nodiscard]] const options& config() const noexcept { return opts_; }
    // stack_size() is the usable size of a pooled stack (page-rounded).
    [[nodiscard]] std::size_t stack_size() const noexcept { return stack_size_; }
    // guard_size() is the size of the guard below a pooled stack.
    [[nodiscard]] std::size_t guard_size() const noexcept { return guard_size_; }

private:
    friend struct detail::stack_pool_access;
    using cache = detail::pool_thread_cache;

    stack_view allocate_slow(std::size_t size);
    stack_view allocate_new(std::size_t size);
    stack_view allocate_unpooled(std::size_t size);
    stack_view hand_out(std::uintptr_t entry) noexcept;
    void deallocate_slow(stack_view stack) noexcept;
    cache* local_cache(bool create) noexcept;
    void flush_half(cache& c) noexcept;
    void grow_capacity(cache& c, std::uint32_t got) noexcept;
    bool grow_slots(cache& c) noexcept;
    void resize_slots(cache& c, std::uint32_t size) noexcept;
    void to_reserve(std::uintptr_t entry) noexcept;
    void maintain(cache& c) noexcept;
    void pass_local(cache& c, bool forced, std::int64_t now, std::uint64_t epoch) noexcept;
    void pass_reserve(bool forced, std::int64_t now) noexcept;
    void retire(cache& c) noexcept;
    void unmap_idle(std::uintptr_t entry) noexcept;
    std::int64_t now_ns() const noexcept;

    // Fixed at construction; the fast path reads these.
    options opts_;
    std::uint64_t id_;
    std::size_t stack_size_;
    std::size_t guard_size_;
    std::size_t stack_bytes_;  // one mapping: stack_size_ + guard_size_
    std::uint32_t cache_floor_;  // min_cached_per_thread, clamped to cache_bound_
    std::uint32_t cache_bound_;  // min(max_cached_per_thread, max_stacks)
    std::int64_t decay_ns_;
    mmap_stack mmap_;           // pooled stacks
    mmap_stack unpooled_mmap_;  // unpooled stacks: one more guard page

    std::atomic<std::uint64_t> trim_epoch_{0};  // bumped by trim(): thread caches trim at their next check
    std::atomic<std::int64_t> reserve_last_pass_;
    std::atomic<std::uint64_t> misses_{0};
    std::atomic<std::uint64_t> reserve_hits_{0};
    std::atomic<std::uint64_t> trims_{0};
    std::atomic<std::uint64_t> unmaps_{0};
    std::atomic<std::uint64_t> flushes_{0};
    std::atomic<std::uint64_t> unpooled_{0};
    std::atomic<std::uint64_t> limit_failures_{0};
    std::atomic<std::int64_t> unpooled_live_{0};

    mutable std::mutex mutex_;
    // Guarded by mutex_.
    std::vector<std::uintptr_t> reserve_;  // LIFO, top at the back; bit 0: pages released
    std::size_t reserve_low_water_ = 0;    // untouched bottom of reserve_ since the last step
    std::size_t mapped_ = 0;
    std::size_t peak_mapped_ = 0;
    std::uint64_t retired_hits_ = 0;  // hits of thread caches whose threads exited
    detail::intrusive_list<cache, detail::pool_cache_links, false> caches_;  // the registered thread caches
};

// pooled_stack is a stack allocator that takes stacks from a stack_pool: a
// pointer to the pool, copied and moved freely. The pool must outlive every
// stack allocated through it.
class pooled_stack {
public:
    // pooled_stack() uses stack_pool::global().
    pooled_stack() : pool_(&stack_pool::global()) {}
    explicit pooled_stack(stack_pool& pool) noexcept : pool_(&pool) {}

    // allocate() see stack_pool::allocate().
    [[nodiscard]] stack_view allocate(std::size_t size) { return pool_->allocate(size); }
    // deallocate() see stack_pool::deallocate().
    void deallocate(stack_view stack) noexcept { pool_->deallocate(stack); }
    // pool() is the pool this handle draws from.
    [[nodiscard]] stack_pool& pool() const noexcept { return *pool_; }

private:
    stack_pool* pool_;
};

static_assert(stack_allocator<pooled_stack>);

}  // namespace weft
