// pooled_stack.cpp: stack_pool, its thread caches, reserve and decay.
//
// Entries. An idle stack is stored as its base address; bit 0 set means its
// pages were released with madvise ("cold"). Every pooled stack has the
// pool's size and guard, so the address is all there is to keep.
//
// Ownership of the thread caches. A cache is read and written by its own
// thread only, except (a) stats() reads its counters, which the owner writes
// with relaxed atomic stores (plain moves, no locked instruction), and (b)
// the pool's destructor empties it, which the pool's precondition (no thread
// is using it) makes safe. A cache record is freed only by its own thread:
// when the pool is destroyed first, the destructor marks the record orphaned
// and the thread frees it later (on its next slow path or at exit).
// registry_mutex orders a thread's exit against a pool's destruction, so the
// exiting thread never reaches a destroyed pool.

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "weft/detail/sanitizer.hpp"
#include "weft/detail/support.hpp"
#include "weft/pooled_stack.hpp"

namespace weft {

namespace detail {

// pool_thread_cache is one thread's LIFO of idle stacks for one pool.
//
// Capacity invariants (the owner keeps them; see "capacity" below):
//   1 <= floor <= capacity <= bound   (the pool's cache_floor_, cache_bound_)
//   count <= limit == min(capacity, slots_size)
//   low_water <= count <= high_water
// capacity rises only in allocate_slow(), when the cache was empty, by the
// stacks taken from outside it; it falls only at a decay step. slots_size
// rises only in deallocate_slow(), when a stack comes back to a cache whose
// array is full below its capacity; it falls only at a decay step.
struct pool_thread_cache {
    std::uint64_t pool_id = 0;  // the pool's unique id: never reused, unlike its address
    stack_pool* pool = nullptr;
    std::uintptr_t* slots = nullptr;  // slots_size entries, top at count - 1
    std::uint32_t limit = 0;          // min(capacity, slots_size): deallocate()'s fast-path bound
    std::atomic<std::uint32_t> count{0};  // written by the owner only
    std::uint32_t low_water = 0;          // untouched bottom of slots since the last decay step
    std::uint32_t high_water = 0;         // the most entries since the last decay step
    std::uint32_t countdown = stack_pool::ops_per_decay_check;
    std::uint32_t slots_size = 0;
    std::atomic<std::uint32_t> capacity{0};  // written by the owner only
    std::uint32_t obtained = 0;     // stacks taken from outside into the empty cache since the last step
    std::uint32_t prev_demand = 0;  // the demand measured at the last decay step
    std::uint64_t seen_epoch = 0;   // the pool's trim epoch at the last step
    std::int64_t last_pass = 0;     // clock of the last decay step, ns
    std::atomic<std::uint64_t> hits{0};  // written by the owner only
    pool_thread_cache* next_in_thread = nullptr;
    pool_thread_cache* prev_in_pool = nullptr;
    pool_thread_cache* next_in_pool = nullptr;
    std::atomic<bool> orphaned{false};  // the pool was destroyed; the owner frees the record
};

struct pool_cache_links
    : list_links<pool_thread_cache, &pool_thread_cache::prev_in_pool, &pool_thread_cache::next_in_pool> {};

// stack_pool_access lets the thread-exit hook reach the pool's internals.
struct stack_pool_access {
    static void retire(stack_pool& pool, pool_thread_cache& c) noexcept { pool.retire(c); }
};

}  // namespace detail

namespace {

using detail::pool_thread_cache;
using std::memory_order_acquire;
using std::memory_order_relaxed;
using std::memory_order_release;

constexpr std::uintptr_t cold_bit = 1;
constexpr std::size_t max_thread_capacity = 65536;
// max_refill bounds the stacks one refill takes from the reserve.
constexpr std::uint32_t max_refill = 64;

std::atomic<std::uint64_t> next_pool_id{1};

// registry_mutex is held while a thread retires its caches at exit and while
// a pool is destroyed. It is constant-initialised and trivially destructible,
// so threads that exit during static destruction can still take it.
static_assert(std::is_trivially_destructible_v<std::mutex>);
constinit std::mutex registry_mutex;

// bump() adds to a counter that only the calling thread writes: a relaxed
// load and store, which compile to plain moves, not a locked instruction.
inline void bump(std::atomic<std::uint64_t>& counter) noexcept {
    counter.store(counter.load(memory_order_relaxed) + 1, memory_order_relaxed);
}

// thread_state is this thread's list of caches (one per pool it used) and
// the one used last. It is trivially destructible, so it stays readable
// while other thread_local objects are destroyed after thread_exit_hook.
struct thread_state {
    pool_thread_cache* current;
    pool_thread_cache* head;
    bool exited;  // thread_exit_hook ran: no more caches on this thread
};
constinit thread_local thread_state t_state{nullptr, nullptr, false};

// thread_exit_hook's destructor hands this thread's caches back when the
// thread exits. It is odr-used when the thread's first cache is created,
// which registers the destructor.
struct thread_exit_hook {
    thread_exit_hook() noexcept = default;
    thread_exit_hook(const thread_exit_hook&) = delete;
    thread_exit_hook& operator=(const thread_exit_hook&) = delete;
    ~thread_exit_hook();
};
thread_local thread_exit_hook t_exit_hook;

void destroy_record(pool_thread_cache* r) noexcept {
    delete[] r->slots;
    delete r;
}

thread_exit_hook::~thread_exit_hook() {
    std::lock_guard<std::mutex> registry(registry_mutex);
    pool_thread_cache* r = t_state.head;
    t_state = {nullptr, nullptr, true};
    while (r) {
        pool_thread_cache* next = r->next_in_thread;
        if (!r->orphaned.load(memory_order_acquire)) detail::stack_pool_access::retire(*r->pool, *r);
        destroy_record(r);
        r = next;
    }
}

[[noreturn]] void invalid(const std::string& what) { throw std::invalid_argument("weft::stack_pool: " + what); }

// checked() validates options and returns them unchanged.
const stack_pool_options& checked(const stack_pool_options& o) {
    using std::to_string;
    const std::size_t page = page_size();
    const std::size_t max = std::numeric_limits<std::size_t>::max();
    if (o.stack_size == 0) invalid("stack_size must not be zero");
    if (o.guard_pages == 0) invalid("guard_pages must be at least 1");
    // Unpooled stacks carry guard_pages + 1 pages.
    if (o.guard_pages >= max / page) invalid("guard_pages (" + to_string(o.guard_pages) + ") is too large");
    std::size_t usable, bytes;
    if (!detail::round_up(o.stack_size, page, usable))
        invalid("stack_size (" + to_string(o.stack_size) + ") overflows when rounded up to pages");
    if (__builtin_add_overflow(usable, o.guard_pages * page, &bytes))
        invalid("stack_size (" + to_string(o.stack_size) + ") plus the guard overflows");
    if (o.max_stacks == 0) invalid("max_stacks must be at least 1");
    if (o.max_bytes < bytes)
        invalid("max_bytes (" + to_string(o.max_bytes) + ") is below one stack (" + to_string(bytes) +
                " bytes including the guard)");
    if (o.min_retained > o.max_stacks)
        invalid("min_retained (" + to_string(o.min_retained) + ") exceeds max_stacks (" + to_string(o.max_stacks) + ")");
    if (o.min_retained > o.max_bytes / bytes)
        invalid("min_retained (" + to_string(o.min_retained) + ") stacks of " + to_string(bytes) +
                " bytes exceed max_bytes (" + to_string(o.max_bytes) + ")");
    if (o.max_cached_per_thread > max_thread_capacity)
        invalid("max_cached_per_thread (" + to_string(o.max_cached_per_thread) + ") exceeds " +
                to_string(max_thread_capacity));
    if (o.min_cached_per_thread > max_thread_capacity)
        invalid("min_cached_per_thread (" + to_string(o.min_cached_per_thread) + ") exceeds " +
                to_string(max_thread_capacity));
    if (o.min_cached_per_thread == 0)
        invalid("min_cached_per_thread must be at least 1 (max_cached_per_thread = 0 turns thread caches off)");
    if (o.decay.count() < 0) invalid("decay must not be negative");
    if (o.on_limit != limit_policy::fail && o.on_limit != limit_policy::fresh_unpooled)
        invalid("on_limit is not a limit_policy");
    return o;
}

std::int64_t to_ns(std::chrono::milliseconds d) noexcept {
    constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
    return d.count() > max / 1000000 ? max : static_cast<std::int64_t>(d.count()) * 1000000;
}

// elapsed() is now - then without overflow (clocks may be injected).
std::int64_t elapsed(std::int64_t now, std::int64_t then) noexcept {
    std::int64_t d;
    if (__builtin_sub_overflow(now, then, &d)) return now > then ? std::numeric_limits<std::int64_t>::max() : 0;
    return d;
}

void* base_of(std::uintptr_t entry) noexcept { return reinterpret_cast<void*>(entry & ~cold_bit); }
bool is_cold(std::uintptr_t entry) noexcept { return (entry & cold_bit) != 0; }

std::string limit_message(stack_pool_error::limit_kind which, std::size_t value, std::size_t mapped,
                          std::size_t reserved) {
    const bool stacks = which == stack_pool_error::limit_kind::max_stacks;
    return std::string("stack_pool limit ") + (stacks ? "max_stacks" : "max_bytes") + " = " + std::to_string(value) +
           " reached: " + std::to_string(mapped) + " stacks mapped, " + std::to_string(reserved) +
           " idle in the reserve";
}

}  // namespace

// ---------------------------------------------------------------- errors

stack_pool_error::stack_pool_error(limit_kind which, std::size_t limit_value, std::size_t requested,
                                   std::size_t mapped, std::size_t reserved)
    : stack_error(ENOMEM, requested, limit_message(which, limit_value, mapped, reserved).c_str()),
      which_(which),
      value_(limit_value) {}

// ---------------------------------------------------------------- life

stack_pool::stack_pool(const options& opts)
    : opts_(checked(opts)),
      id_(next_pool_id.fetch_add(1, memory_order_relaxed)),
      stack_size_((opts.stack_size + page_size() - 1) & ~(page_size() - 1)),
      guard_size_(opts.guard_pages * page_size()),
      stack_bytes_(stack_size_ + guard_size_),
      cache_floor_(static_cast<std::uint32_t>(
          std::min({opts.min_cached_per_thread, opts.max_cached_per_thread, opts.max_stacks}))),
      cache_bound_(static_cast<std::uint32_t>(std::min(opts.max_cached_per_thread, opts.max_stacks))),
      decay_ns_(to_ns(opts.decay)),
      mmap_(opts.guard_pages),
      unpooled_mmap_(opts.guard_pages + 1),
      reserve_last_pass_(now_ns()) {
    // Reserving up front keeps deallocate() from allocating while a finite
    // pool fills up (a failed growth unmaps the stack instead).
    if (opts.max_stacks <= 4096) reserve_.reserve(opts.max_stacks);
}

stack_pool::~stack_pool() {
    std::lock_guard<std::mutex> registry(registry_mutex);
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t cached = reserve_.size();
    for (cache* r = caches_.front(); r; r = r->next_in_pool) cached += r->count.load(memory_order_relaxed);
    const std::int64_t unpooled = unpooled_live_.load(memory_order_relaxed);
    if (cached != mapped_ || unpooled != 0) {
        std::fprintf(stderr,
                     "weft: stack_pool destroyed while %zu pooled and %lld unpooled stacks it handed out are still in "
                     "use; every stack must be deallocated before its pool is destroyed\n",
                     mapped_ - std::min(cached, mapped_), static_cast<long long>(unpooled));
        std::abort();
    }
    while (cache* r = caches_.pop_front()) {  // unlinked before the owner may free r
        const std::uint32_t n = r->count.load(memory_order_relaxed);
        for (std::uint32_t i = 0; i < n; ++i) unmap_idle(r->slots[i]);
        r->count.store(0, memory_order_relaxed);
        r->orphaned.store(true, memory_order_release);
    }
    for (std::uintptr_t e : reserve_) unmap_idle(e);
    reserve_.clear();
}

stack_pool& stack_pool::global() {
    // Never destroyed: threads may return stacks to it during exit.
    static stack_pool* pool = new stack_pool();
    return *pool;
}

std::int64_t stack_pool::now_ns() const noexcept {
    const auto t = opts_.clock ? opts_.clock() : std::chrono::steady_clock::now();
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// ---------------------------------------------------------------- fast paths
//
// Both run out of line: the thread-local cache's address is computed inside,
// after any stack switch the caller made (docs/platform-facts.md: compilers
// cache thread-local addresses across calls that switch stacks).

WEFT_NOINLINE stack_view stack_pool::allocate(std::size_t size) {
    cache* c = t_state.current;
    if (size - 1 < stack_size_ && c && c->pool_id == id_) [[likely]] {
        std::uint32_t n = c->count.load(memory_order_relaxed);
        if (n != 0) [[likely]] {
            --n;
            const std::uintptr_t e = c->slots[n];
            c->count.store(n, memory_order_relaxed);
            if (n < c->low_water) c->low_water = n;
            bump(c->hits);
            if (--c->countdown == 0) [[unlikely]]
                maintain(*c);
            return hand_out(e);
        }
    }
    return allocate_slow(size);
}

WEFT_NOINLINE void stack_pool::deallocate(stack_view s) noexcept {
    if (s.guard == guard_size_ && s.size == stack_size_ && s.base) [[likely]] {
        cache* c = t_state.current;
        if (c && c->pool_id == id_) [[likely]] {
            const std::uint32_t n = c->count.load(memory_order_relaxed);
            if (n < c->limit) [[likely]] {
                c->slots[n] = reinterpret_cast<std::uintptr_t>(s.base);
                c->count.store(n + 1, memory_order_relaxed);
                if (n >= c->high_water) c->high_water = n + 1;
                detail::live_stacks.add(-1);
                if (--c->countdown == 0) [[unlikely]]
                    maintain(*c);
                return;
            }
        }
    }
    deallocate_slow(s);
}

stack_view stack_pool::hand_out(std::uintptr_t entry) noexcept {
    void* base = base_of(entry);
    // A stack abandoned mid-frame keeps ASan's poisoning; clear it so the
    // stack looks fresh.
    detail::sanitizer::release_stack(base, stack_size_);
    detail::live_stacks.add(1);
    return {base, stack_size_, guard_size_};
}

// ---------------------------------------------------------------- slow paths

stack_view stack_pool::allocate_slow(std::size_t size) {
    if (size == 0) throw std::invalid_argument("weft::stack_pool::allocate: size must not be zero");
    if (size > stack_size_) return allocate_unpooled(size);
    if (cache* c = local_cache(true)) {
        std::uint32_t n = c->count.load(memory_order_relaxed);
        if (n == 0) {
            // Refill from the reserve, newest first: half the capacity, at
            // most max_refill (the reserve is shared; growing the capacity by
            // what was taken already makes the next round refill-free).
            {
                std::lock_guard<std::mutex> lock(mutex_);
                const std::uint32_t want =
                    std::min({c->capacity.load(memory_order_relaxed) / 2, max_refill, c->slots_size});
                const std::size_t take = std::min<std::size_t>(reserve_.size(), std::max<std::uint32_t>(1, want));
                const std::size_t from = reserve_.size() - take;
                std::copy(reserve_.begin() + static_cast<std::ptrdiff_t>(from), reserve_.end(), c->slots);
                reserve_.resize(from);
                reserve_low_water_ = std::min(reserve_low_water_, from);
                n = static_cast<std::uint32_t>(take);
                if (n != 0) reserve_hits_.fetch_add(1, memory_order_relaxed);
            }
            if (n != 0) {
                c->high_water = std::max(c->high_water, n);
                grow_capacity(*c, n);
            }
        } else {
            bump(c->hits);  // the cache was there, only not the current one
        }
        if (n != 0) {
            --n;
            const std::uintptr_t e = c->slots[n];
            c->count.store(n, memory_order_relaxed);
            c->low_water = std::min(c->low_water, n);
            if (--c->countdown == 0) maintain(*c);
            return hand_out(e);
        }
        // A miss: the thread holds one stack more than its cache could give.
        stack_view s = allocate_new(size);
        if (s.guard == guard_size_) grow_capacity(*c, 1);  // not an unpooled one at a limit
        return s;
    } else {
        std::unique_lock<std::mutex> lock(mutex_);
        if (!reserve_.empty()) {
            const std::uintptr_t e = reserve_.back();
            reserve_.pop_back();
            reserve_low_water_ = std::min(reserve_low_water_, reserve_.size());
            reserve_hits_.fetch_add(1, memory_order_relaxed);
            lock.unlock();
            return hand_out(e);
        }
    }
    return allocate_new(size);
}

stack_view stack_pool::allocate_new(std::size_t size) {
    {
        std::unique_lock<std::mutex> lock(mutex_);
        const bool stacks_full = mapped_ >= opts_.max_stacks;
        // mapped_ * stack_bytes_ <= max_bytes holds, so this cannot overflow.
        const bool bytes_full = !stacks_full && opts_.max_bytes - mapped_ * stack_bytes_ < stack_bytes_;
        if (stacks_full || bytes_full) {
            if (opts_.on_limit == limit_policy::fresh_unpooled) {
                lock.unlock();
                return allocate_unpooled(size);
            }
            limit_failures_.fetch_add(1, memory_order_relaxed);
            const auto which = stacks_full ? stack_pool_error::limit_kind::max_stacks : stack_pool_error::limit_kind::max_bytes;
            throw stack_pool_error(which, stacks_full ? opts_.max_stacks : opts_.max_bytes, size, mapped_, reserve_.size());
        }
        // Claim the slot before mapping, so that concurrent misses respect
        // the limits; give it back if the mapping fails.
        ++mapped_;
        peak_mapped_ = std::max(peak_mapped_, mapped_);
    }
    try {
        stack_view s = mmap_.allocate(stack_size_);
        misses_.fetch_add(1, memory_order_relaxed);
        return s;
    } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        --mapped_;
        throw;
    }
}

stack_view stack_pool::allocate_unpooled(std::size_t size) {
    stack_view s = unpooled_mmap_.allocate(std::max(size, stack_size_));
    unpooled_.fetch_add(1, memory_order_relaxed);
    unpooled_live_.fetch_add(1, memory_order_relaxed);
    return s;
}

void stack_pool::deallocate_slow(stack_view s) noexcept {
    if (!s.base) return;
    if (s.guard != guard_size_ || s.size != stack_size_) {
        if (s.guard == unpooled_mmap_.guard_size()) {
            unpooled_mmap_.deallocate(s);
            unpooled_live_.fetch_sub(1, memory_order_relaxed);
            return;
        }
        std::fprintf(stderr,
                     "weft: stack_pool::deallocate of a stack it did not hand out (base %p, size %zu, guard %zu; "
                     "the pool's stacks have size %zu and guard %zu)\n",
                     s.base, s.size, s.guard, stack_size_, guard_size_);
        std::abort();
    }
    detail::live_stacks.add(-1);
    const auto e = reinterpret_cast<std::uintptr_t>(s.base);
    if (cache* c = local_cache(true)) {
        // Full below its capacity: a larger array. Full at its capacity (this
        // thread returns more stacks than it recently took): the reserve.
        if (c->count.load(memory_order_relaxed) >= c->limit && !grow_slots(*c)) flush_half(*c);
        const std::uint32_t n = c->count.load(memory_order_relaxed);
        c->slots[n] = e;
        c->count.store(n + 1, memory_order_relaxed);
        if (n >= c->high_water) c->high_water = n + 1;
        if (--c->countdown == 0) maintain(*c);
        return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    to_reserve(e);
}

// local_cache() is this thread's cache for this pool, created when `create`
// (nullptr when the thread is exiting, caches are off, or memory is short).
// On the way it frees the records of pools that were destroyed.
stack_pool::cache* stack_pool::local_cache(bool create) noexcept {
    thread_state& t = t_state;
    if (t.current && t.current->pool_id == id_) return t.current;
    for (cache** link = &t.head; cache* r = *link;) {
        if (r->orphaned.load(memory_order_acquire)) {
            *link = r->next_in_thread;
            if (t.current == r) t.current = nullptr;
            destroy_record(r);
            continue;
        }
        if (r->pool_id == id_) return t.current = r;
        link = &r->next_in_thread;
    }
    if (!create || t.exited || cache_bound_ == 0) return nullptr;
    // Plain new (not the nothrow form), so that a program that replaces
    // operator new and delete sees matching pairs.
    cache* r = nullptr;
    try {
        r = new cache;
        r->slots = new std::uintptr_t[cache_floor_];
    } catch (const std::bad_alloc&) {
        delete r;
        return nullptr;  // the caller falls back to the reserve
    }
    // Odr-use the exit hook: registers its destructor for this thread.
    thread_exit_hook* hook = &t_exit_hook;
    asm volatile("" : : "r"(hook) : "memory");
    r->pool_id = id_;
    r->pool = this;
    r->slots_size = cache_floor_;
    r->capacity.store(cache_floor_, memory_order_relaxed);
    r->limit = cache_floor_;
    r->seen_epoch = trim_epoch_.load(memory_order_relaxed);
    r->last_pass = now_ns();
    {
        std::lock_guard<std::mutex> lock(mutex_);
        caches_.push_front(r);
    }
    r->next_in_thread = t.head;
    t.head = r;
    return t.current = r;
}

// flush_half() moves the older half of a full cache to the reserve.
void stack_pool::flush_half(cache& c) noexcept {
    const std::uint32_t n = c.count.load(memory_order_relaxed);
    const std::uint32_t k = std::max<std::uint32_t>(1, n / 2);
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (std::uint32_t i = 0; i < k; ++i) to_reserve(c.slots[i]);
    }
    std::memmove(c.slots, c.slots + k, (n - k) * sizeof(std::uintptr_t));
    c.count.store(n - k, memory_order_relaxed);
    c.low_water = c.low_water > k ? c.low_water - k : 0;
    flushes_.fetch_add(1, memory_order_relaxed);
}

// ---------------------------------------------------------------- capacity
//
// Demand is the most stacks this thread has held out of its cache at once,
// measured per decay period as the larger of how far the cache was drawn
// down (high_water - low_water) and how many stacks the thread had to take
// from outside while its cache was empty (obtained). The capacity grows at
// once, in the slow path, by every stack taken from outside (so the first
// round of a loop that holds N stacks leaves room for N), and shrinks at a
// decay step to the larger demand of the last two periods: the same two
// periods after which an idle stack is unmapped, so capacity and memory fall
// together, and a step that lands in the middle of a round keeps the
// capacity of the previous whole round. A thread that only frees stacks
// other threads took (a consumer) never finds its cache empty when it
// allocates nothing, so it keeps the floor and flushes to the reserve,
// where the allocating threads find the stacks.

// grow_capacity() raises the capacity by `got` stacks taken from outside.
// Only the limit can change; the slot array grows when stacks come back.
void stack_pool::grow_capacity(cache& c, std::uint32_t got) noexcept {
    const std::uint32_t cap = c.capacity.load(memory_order_relaxed);
    const std::uint32_t grown = cap + std::min(got, cache_bound_ - cap);
    c.capacity.store(grown, memory_order_relaxed);
    c.obtained = c.obtained + std::min(got, std::numeric_limits<std::uint32_t>::max() - c.obtained);
    c.limit = std::min(grown, c.slots_size);
}

// grow_slots() doubles the slot array (up to the capacity) of a cache that is
// full below its capacity. False when it is at its capacity or memory is
// short: the caller flushes instead.
bool stack_pool::grow_slots(cache& c) noexcept {
    const std::uint32_t cap = c.capacity.load(memory_order_relaxed);
    if (c.slots_size >= cap) return false;
    const std::uint32_t before = c.slots_size;
    resize_slots(c, std::min(cap, std::max<std::uint32_t>(1, before) * 2));
    return c.slots_size != before;
}

// resize_slots() moves the entries to an array of `size` slots and updates
// the limit. Requires: size >= count. Keeps the old array if memory is short.
void stack_pool::resize_slots(cache& c, std::uint32_t size) noexcept {
    std::uintptr_t* fresh = nullptr;
    try {
        fresh = new std::uintptr_t[size];
    } catch (const std::bad_alloc&) {
        return;
    }
    std::copy(c.slots, c.slots + c.count.load(memory_order_relaxed), fresh);
    delete[] c.slots;
    c.slots = fresh;
    c.slots_size = size;
    c.limit = std::min(c.capacity.load(memory_order_relaxed), size);
}

// to_reserve() pushes an idle stack on the reserve. Requires: mutex_ held.
void stack_pool::to_reserve(std::uintptr_t entry) noexcept {
    try {
        reserve_.push_back(entry);
    } catch (...) {
        unmap_idle(entry);
        --mapped_;
        unmaps_.fetch_add(1, memory_order_relaxed);
    }
}

// retire() gives an exiting thread's cache to the reserve and unregisters
// it. Requires: registry_mutex held.
void stack_pool::retire(cache& c) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    caches_.remove(&c);
    retired_hits_ += c.hits.load(memory_order_relaxed);
    const std::uint32_t n = c.count.load(memory_order_relaxed);
    for (std::uint32_t i = 0; i < n; ++i) to_reserve(c.slots[i]);
    c.count.store(0, memory_order_relaxed);
}

void stack_pool::unmap_idle(std::uintptr_t entry) noexcept {
    // The range may be mapped again for something else: leave no poisoning.
    detail::sanitizer::release_stack(base_of(entry), stack_size_);
    ::munmap(static_cast<std::byte*>(base_of(entry)) - guard_size_, stack_bytes_);
}

// ---------------------------------------------------------------- decay
//
// A decay step looks at the idle stacks that nobody touched since the
// previous step: the bottom low_water entries of a LIFO (all of them when
// forced by trim()). Those whose pages are still there get madvise'd; those
// already madvise'd at an earlier step have now been idle for two periods:
// a thread cache hands them to the bottom of the reserve, and the reserve
// unmaps them down to min_retained.

void stack_pool::maintain(cache& c) noexcept {
    c.countdown = ops_per_decay_check;
    const std::int64_t now = now_ns();
    const std::uint64_t epoch = trim_epoch_.load(memory_order_relaxed);
    if (epoch != c.seen_epoch)
        pass_local(c, true, now, epoch);
    else if (elapsed(now, c.last_pass) >= decay_ns_)
        pass_local(c, false, now, epoch);
    if (elapsed(now, reserve_last_pass_.load(memory_order_relaxed)) >= decay_ns_) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (elapsed(now, reserve_last_pass_.load(memory_order_relaxed)) >= decay_ns_) pass_reserve(false, now);
    }
}

void stack_pool::pass_local(cache& c, bool forced, std::int64_t now, std::uint64_t epoch) noexcept {
    std::uint32_t n = c.count.load(memory_order_relaxed);
    const std::uint32_t idle = forced ? n : std::min(c.low_water, n);
    // Cold entries first: they leave for the reserve.
    std::uintptr_t* mid = std::partition(c.slots, c.slots + idle, is_cold);
    const auto cold = static_cast<std::uint32_t>(mid - c.slots);
    if (cold != 0) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            try {
                reserve_.insert(reserve_.begin(), c.slots, mid);
                reserve_low_water_ += cold;  // idle already: the reserve's next step may unmap them
            } catch (...) {
                for (std::uint32_t i = 0; i < cold; ++i) unmap_idle(c.slots[i]);
                mapped_ -= cold;
                unmaps_.fetch_add(cold, memory_order_relaxed);
            }
        }
        std::memmove(c.slots, mid, (n - cold) * sizeof(std::uintptr_t));
        n -= cold;
        c.count.store(n, memory_order_relaxed);
    }
    std::uint64_t released = 0;
    for (std::uint32_t i = 0; i < idle - cold; ++i) {
        if (::madvise(base_of(c.slots[i]), stack_size_, MADV_DONTNEED) == 0) {
            c.slots[i] |= cold_bit;
            ++released;
        }
    }
    if (released) trims_.fetch_add(released, memory_order_relaxed);
    // The capacity follows the demand of the last two periods (see
    // "capacity"); a forced step counts as a period without demand.
    const std::uint32_t demand = std::max(c.high_water - std::min(c.low_water, c.high_water), c.obtained);
    const std::uint32_t recent = forced ? 0 : std::max(demand, c.prev_demand);
    const std::uint32_t cap = std::min(std::max({recent, n, cache_floor_}), cache_bound_);
    c.capacity.store(cap, memory_order_relaxed);
    c.limit = std::min(cap, c.slots_size);
    // An array more than twice the capacity shrinks to it (count <= cap).
    if (c.slots_size / 2 > cap) resize_slots(c, cap);
    c.prev_demand = forced ? 0 : demand;
    c.obtained = 0;
    c.high_water = n;
    c.low_water = n;
    c.last_pass = now;
    c.seen_epoch = epoch;
}

// pass_reserve() is the reserve's decay step. Requires: mutex_ held. The
// system calls run under the lock: an entry must not be handed out while
// its pages are being released.
void stack_pool::pass_reserve(bool forced, std::int64_t now) noexcept {
    const std::size_t n = reserve_.size();
    const std::size_t idle = forced ? n : std::min(reserve_low_water_, n);
    const auto first = reserve_.begin();
    const auto mid = std::partition(first, first + static_cast<std::ptrdiff_t>(idle), is_cold);
    const auto cold = static_cast<std::size_t>(mid - first);
    std::uint64_t released = 0;
    for (auto it = mid; it != first + static_cast<std::ptrdiff_t>(idle); ++it) {
        if (::madvise(base_of(*it), stack_size_, MADV_DONTNEED) == 0) {
            *it |= cold_bit;
            ++released;
        }
    }
    if (released) trims_.fetch_add(released, memory_order_relaxed);
    const std::size_t surplus = n > opts_.min_retained ? n - opts_.min_retained : 0;
    const std::size_t victims = std::min(cold, surplus);
    for (std::size_t i = 0; i < victims; ++i) unmap_idle(reserve_[i]);
    reserve_.erase(first, first + static_cast<std::ptrdiff_t>(victims));
    mapped_ -= victims;
    if (victims) unmaps_.fetch_add(victims, memory_order_relaxed);
    reserve_low_water_ = reserve_.size();
    reserve_last_pass_.store(now, memory_order_relaxed);
}

void stack_pool::trim() noexcept {
    const std::uint64_t epoch = trim_epoch_.fetch_add(1, memory_order_relaxed) + 1;
    const std::int64_t now = now_ns();
    if (cache* c = local_cache(false)) pass_local(*c, true, now, epoch);
    std::lock_guard<std::mutex> lock(mutex_);
    pass_reserve(true, now);
}

// ---------------------------------------------------------------- statistics

stack_pool::statistics stack_pool::stats() const {
    statistics s;
    std::lock_guard<std::mutex> lock(mutex_);
    s.hits = retired_hits_;
    s.reserved = reserve_.size();
    s.cached = reserve_.size();
    for (const cache* r = caches_.front(); r; r = r->next_in_pool) {
        s.hits += r->hits.load(memory_order_relaxed);
        s.cached += r->count.load(memory_order_relaxed);
        ++s.thread_caches;
        s.cache_capacity += r->capacity.load(memory_order_relaxed);
    }
    s.reserve_hits = reserve_hits_.load(memory_order_relaxed);
    s.misses = misses_.load(memory_order_relaxed);
    s.unpooled = unpooled_.load(memory_order_relaxed);
    s.limit_failures = limit_failures_.load(memory_order_relaxed);
    s.trims = trims_.load(memory_order_relaxed);
    s.unmaps = unmaps_.load(memory_order_relaxed);
    s.flushes = flushes_.load(memory_order_relaxed);
    s.mapped = mapped_;
    s.mapped_bytes = mapped_ * stack_bytes_;
    s.peak_mapped = peak_mapped_;
    s.in_use = mapped_ > s.cached ? mapped_ - s.cached : 0;
    s.unpooled_in_use = static_cast<std::size_t>(std::max<std::int64_t>(0, unpooled_live_.load(memory_order_relaxed)));
    return s;
}

}  // namespace weft
