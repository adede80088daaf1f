// pooled_stack_test.cpp: stack_pool and pooled_stack. Reuse order,
// statistics, thread caches and the reserve, decay (driven by trim() and by
// an injected clock, never by real time), hard limits, option checks, and
// that a reused stack is as good as a fresh one: guard page (checked against
// /proc/self/maps and by touching it), sanitizer state, coroutines on it.

#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/guard_page.hpp"
#include "support/leak_check.hpp"
#include "support/proc_maps.hpp"
#include "weft/config.hpp"
#include "weft/coroutine.hpp"
#include "weft/detail/sanitizer.hpp"
#include "weft/pooled_stack.hpp"
#include "weft/stack.hpp"

#if WEFT_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace {

// ---------------------------------------------------------------- helpers

using weft::test::any_page_mapped;
using weft::test::mapping;
using weft::test::find_ending_at;
using weft::test::read_maps;

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }


// is_mapped() says whether any part of a stack or its guard is mapped; it
// allocates nothing (see any_page_mapped).
bool is_mapped(const weft::stack_view& s) { return any_page_mapped(addr(s.base) - s.guard, addr(s.top())); }

// madvise_dontneed_zeroes() probes whether MADV_DONTNEED on a private
// anonymous page makes it read back as zero here, as Linux guarantees; a
// user-mode emulator may treat the advice as a no-op.
bool madvise_dontneed_zeroes() {
    const std::size_t page = weft::page_size();
    void* p = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    static_cast<volatile unsigned char*>(p)[100] = 0xA5;
    const bool zero = ::madvise(p, page, MADV_DONTNEED) == 0 && static_cast<volatile unsigned char*>(p)[100] == 0;
    ::munmap(p, page);
    return zero;
}

// one_stack_bytes() is the mapping size of one pooled stack.
std::size_t one_stack_bytes(std::size_t stack_size, std::size_t guard_pages = 1) {
    const std::size_t page = weft::page_size();
    return (stack_size + page - 1) / page * page + guard_pages * page;
}

// in_thread() runs fn on a new thread and joins it.
void in_thread(const std::function<void()>& fn) {
    std::thread t(fn);
    t.join();
}

constexpr std::size_t small = 64 * 1024;

weft::stack_pool::options small_pool() {
    weft::stack_pool::options o;
    o.stack_size = small;
    return o;
}

// expected_stats names the statistics a check expects; a field left unset
// is not checked.
struct expected_stats {
    std::optional<std::uint64_t> hits{}, reserve_hits{}, misses{}, unpooled{}, limit_failures{}, trims{}, unmaps{},
        flushes{};
    std::optional<std::size_t> in_use{}, cached{}, reserved{}, mapped{}, mapped_bytes{}, peak_mapped{},
        unpooled_in_use{}, thread_caches{}, cache_capacity{};
};

// stats_are() checks every statistic that `want` names, and names each one
// that differs.
::testing::AssertionResult stats_are(const weft::stack_pool::statistics& st, const expected_stats& want) {
    std::ostringstream wrong;
    auto check = [&](const char* name, auto have, const auto& expected) {
        if (expected && have != *expected) wrong << " " << name << " is " << have << ", expected " << *expected << ";";
    };
    check("hits", st.hits, want.hits);
    check("reserve_hits", st.reserve_hits, want.reserve_hits);
    check("misses", st.misses, want.misses);
    check("unpooled", st.unpooled, want.unpooled);
    check("limit_failures", st.limit_failures, want.limit_failures);
    check("trims", st.trims, want.trims);
    check("unmaps", st.unmaps, want.unmaps);
    check("flushes", st.flushes, want.flushes);
    check("in_use", st.in_use, want.in_use);
    check("cached", st.cached, want.cached);
    check("reserved", st.reserved, want.reserved);
    check("mapped", st.mapped, want.mapped);
    check("mapped_bytes", st.mapped_bytes, want.mapped_bytes);
    check("peak_mapped", st.peak_mapped, want.peak_mapped);
    check("unpooled_in_use", st.unpooled_in_use, want.unpooled_in_use);
    check("thread_caches", st.thread_caches, want.thread_caches);
    check("cache_capacity", st.cache_capacity, want.cache_capacity);
    if (wrong.str().empty()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "statistics:" << wrong.str();
}

// takes_back_newest_first() checks that the next two allocations from
// `from`, to which a and then b were freed, take back b and then a; it frees
// them again in that order.
template <class Allocator>
::testing::AssertionResult takes_back_newest_first(Allocator& from, weft::stack_view a, weft::stack_view b) {
    const weft::stack_view first = from.allocate(small);
    const weft::stack_view second = from.allocate(small);
    from.deallocate(a);
    from.deallocate(b);
    if (first.base == b.base && second.base == a.base) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "took back " << first.base << " then " << second.base << ", not "
                                         << b.base << " then " << a.base;
}

// paused_thread runs before() on a thread of its own, then waits there
// until resume() and runs after(); the constructor returns once before()
// has returned, join() once after() has.
class paused_thread {
public:
    template <class Before, class After>
    paused_thread(Before before, After after)
        : t_([this, before = std::move(before), after = std::move(after)]() mutable {
              before();
              set(1);
              wait_for(2);
              after();
          }) {
        wait_for(1);
    }
    ~paused_thread() {
        if (t_.joinable()) join();
    }
    paused_thread(const paused_thread&) = delete;
    paused_thread& operator=(const paused_thread&) = delete;

    void resume() { set(2); }
    void join() {
        resume();
        t_.join();
    }

private:
    void set(int p) {
        {
            std::lock_guard<std::mutex> lk(m_);
            phase_ = p;
        }
        cv_.notify_all();
    }
    void wait_for(int p) {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&] { return phase_ == p; });
    }
    std::mutex m_;
    std::condition_variable cv_;
    int phase_ = 0;
    std::thread t_;  // last: started once the rest is constructed
};

// cache_two() takes two stacks from pool and frees them, into the calling
// thread's cache.
void cache_two(weft::stack_pool& pool) {
    weft::stack_view a = pool.allocate(small), b = pool.allocate(small);
    pool.deallocate(a);
    pool.deallocate(b);
}

class pooled_stack_test : public weft::test::leak_checked {};
class pooled_stack_reuse : public weft::test::leak_checked {};
class pooled_stack_threads : public weft::test::leak_checked {};
class pooled_stack_decay : public weft::test::leak_checked {};
class pooled_stack_limits : public weft::test::leak_checked {};
class pooled_stack_coroutine : public weft::test::leak_checked {};
using pooled_stack_DeathTest = pooled_stack_test;

// ---------------------------------------------------------------- the handle

static_assert(weft::stack_allocator<weft::pooled_stack>);
static_assert(std::is_nothrow_move_constructible_v<weft::pooled_stack>);
static_assert(std::is_nothrow_copy_constructible_v<weft::pooled_stack>);
static_assert(sizeof(weft::pooled_stack) == sizeof(void*), "a pooled_stack is one pointer");

TEST_F(pooled_stack_test, handle_refers_to_its_pool_or_the_global_one) {
    weft::stack_pool pool(small_pool());
    EXPECT_EQ(&weft::pooled_stack(pool).pool(), &pool);
    EXPECT_EQ(&weft::pooled_stack().pool(), &weft::stack_pool::global());
    EXPECT_EQ(&weft::stack_pool::global(), &weft::stack_pool::global());
    EXPECT_EQ(weft::stack_pool::global().stack_size(), weft::default_stack_size);
}

TEST_F(pooled_stack_test, stack_geometry_matches_mmap_stack) {
    weft::stack_pool pool({.stack_size = small + 1,  // rounded up to a page
                           .guard_pages = 2});
    const std::size_t page = weft::page_size();
    EXPECT_EQ(pool.stack_size(), small + page);
    EXPECT_EQ(pool.guard_size(), 2 * page);
    weft::stack_view s = pool.allocate(small + 1);
    EXPECT_EQ(s.size, small + page);
    EXPECT_EQ(s.guard, 2 * page);
    EXPECT_EQ(addr(s.base) % page, 0u);
    std::memset(s.base, 0x5A, s.size);  // the whole range is writable
    pool.deallocate(s);
}

TEST_F(pooled_stack_test, zero_size_is_invalid) {
    weft::stack_pool pool(small_pool());
    EXPECT_THROW((void)pool.allocate(0), std::invalid_argument);
    EXPECT_THROW((void)weft::pooled_stack(pool).allocate(0), std::invalid_argument);
    pool.deallocate(weft::stack_view{});  // an empty view is ignored
    EXPECT_EQ(pool.stats().mapped, 0u);
}

TEST_F(pooled_stack_test, global_pool_serves_default_handles) {
    weft::pooled_stack alloc;
    const std::int64_t live = weft::stats::live_stacks();
    weft::stack_view s = alloc.allocate(1000);
    EXPECT_EQ(s.size, weft::default_stack_size);
    EXPECT_EQ(weft::stats::live_stacks(), live + 1);
    alloc.deallocate(s);
    EXPECT_EQ(weft::stats::live_stacks(), live) << "a cached stack is not live";
    weft::stack_view t = alloc.allocate(weft::default_stack_size);
    EXPECT_EQ(t.base, s.base);
    alloc.deallocate(t);
}

// ---------------------------------------------------------------- reuse

TEST_F(pooled_stack_reuse, last_freed_is_first_reused) {
    weft::stack_pool pool(small_pool());
    weft::pooled_stack alloc(pool);
    weft::stack_view a = alloc.allocate(small);
    weft::stack_view b = alloc.allocate(small);
    ASSERT_NE(a.base, b.base);
    alloc.deallocate(a);
    alloc.deallocate(b);
    EXPECT_TRUE(takes_back_newest_first(alloc, a, b));
    const weft::stack_pool::statistics st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.hits = 2u, .reserve_hits = 0u, .misses = 2u}));
}

TEST_F(pooled_stack_reuse, statistics_count_hits_misses_and_gauges) {
    weft::stack_pool pool(small_pool());
    const std::int64_t live = weft::stats::live_stacks();
    std::vector<weft::stack_view> v;
    for (int i = 0; i < 5; ++i) v.push_back(pool.allocate(small));
    EXPECT_EQ(weft::stats::live_stacks(), live + 5);
    weft::stack_pool::statistics st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.hits = 0u, .misses = 5u, .in_use = 5u, .cached = 0u, .mapped = 5u,
                            .mapped_bytes = 5 * one_stack_bytes(small), .peak_mapped = 5u, .thread_caches = 1u}));
    for (int i = 0; i < 3; ++i) pool.deallocate(v[i]);
    EXPECT_EQ(weft::stats::live_stacks(), live + 2);
    st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.in_use = 2u, .cached = 3u, .mapped = 5u}));
    for (int i = 0; i < 3; ++i) v[i] = pool.allocate(small);
    st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.hits = 3u, .misses = 5u}));
    for (auto& s : v) pool.deallocate(s);
    st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.trims = 0u, .unmaps = 0u, .in_use = 0u, .cached = 5u, .peak_mapped = 5u}));
    EXPECT_EQ(weft::stats::live_stacks(), live);
}

TEST_F(pooled_stack_reuse, smaller_requests_get_a_whole_pooled_stack) {
    weft::stack_pool pool(small_pool());
    weft::stack_view s = pool.allocate(1);
    EXPECT_EQ(s.size, small);
    pool.deallocate(s);
    weft::stack_view t = pool.allocate(small / 2);
    EXPECT_EQ(t.base, s.base);
    EXPECT_EQ(t.size, small);
    pool.deallocate(t);
    EXPECT_EQ(pool.stats().unpooled, 0u);
}

TEST_F(pooled_stack_reuse, larger_requests_are_unpooled_and_unmapped_on_release) {
    weft::stack_pool pool(small_pool());
    const std::size_t page = weft::page_size();
    weft::stack_view big = pool.allocate(small + 1);
    EXPECT_EQ(big.size, small + page);
    EXPECT_EQ(big.guard, pool.guard_size() + page) << "unpooled stacks carry one more guard page";
    std::memset(big.base, 1, big.size);
    weft::stack_pool::statistics st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.unpooled = 1u, .mapped = 0u, .unpooled_in_use = 1u}));
    EXPECT_TRUE(is_mapped(big));
    pool.deallocate(big);
    EXPECT_FALSE(is_mapped(big));
    st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.cached = 0u, .unpooled_in_use = 0u}));
}

TEST_F(pooled_stack_reuse, many_coroutine_lifetimes_reuse_one_stack) {
    weft::stack_pool pool(small_pool());
    weft::coroutine_options opts{.stack_size = small};
    int sum = 0;
    for (int i = 0; i < 1000; ++i) {
        weft::coroutine<int> co(std::allocator_arg, weft::pooled_stack(pool), [i](weft::yielder<int>& y) { y.yield(i); },
                                opts);
        sum += *co.resume();
    }
    EXPECT_EQ(sum, 999 * 1000 / 2);
    const weft::stack_pool::statistics st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.hits = 999u, .misses = 1u, .mapped = 1u}));
}

TEST_F(pooled_stack_reuse, warm_path_allocates_nothing_on_the_heap) {
    weft::stack_pool pool(small_pool());
    weft::pooled_stack alloc(pool);
    alloc.deallocate(alloc.allocate(small));  // creates this thread's cache
    weft::coroutine_options opts{.stack_size = small};
    const std::uint64_t before = weft::test::new_calls();
    for (int i = 0; i < 1000; ++i) alloc.deallocate(alloc.allocate(small));
    // Creating and destroying coroutines on pooled stacks (not resuming
    // them: under TSan a fiber's first switch allocates in the runtime).
    for (int i = 0; i < 10; ++i) {
        weft::coroutine<> co(std::allocator_arg, alloc, [](weft::yielder<>& y) { y.yield(); }, opts);
        EXPECT_EQ(co.state(), weft::coroutine_state::created);
    }
    EXPECT_EQ(weft::test::new_calls(), before);
}

TEST_F(pooled_stack_reuse, two_pools_on_one_thread_keep_their_own_stacks) {
    weft::stack_pool p1(small_pool()), p2(small_pool());
    weft::stack_view a = p1.allocate(small);
    weft::stack_view b = p2.allocate(small);
    p1.deallocate(a);
    p2.deallocate(b);
    for (int i = 0; i < 10; ++i) {
        weft::stack_view x = p1.allocate(small);
        weft::stack_view y = p2.allocate(small);
        EXPECT_EQ(x.base, a.base);
        EXPECT_EQ(y.base, b.base);
        p2.deallocate(y);
        p1.deallocate(x);
    }
    EXPECT_EQ(p1.stats().misses, 1u);
    EXPECT_EQ(p2.stats().misses, 1u);
}

TEST_F(pooled_stack_reuse, full_thread_cache_spills_to_the_reserve) {
    weft::stack_pool pool({.stack_size = small, .max_cached_per_thread = 4});
    std::vector<weft::stack_view> v;
    for (int i = 0; i < 10; ++i) v.push_back(pool.allocate(small));
    for (auto& s : v) pool.deallocate(s);
    weft::stack_pool::statistics st = pool.stats();
    EXPECT_EQ(st.cached, 10u);
    EXPECT_GE(st.reserved, 6u);
    EXPECT_LE(st.cached - st.reserved, 4u);
    EXPECT_GE(st.flushes, 1u);
    EXPECT_EQ(st.cache_capacity, 4u) << "max_cached_per_thread caps the capacity (and the floor)";
    // Taking them all back maps nothing new.
    std::set<void*> bases;
    for (auto& s : v) {
        s = pool.allocate(small);
        bases.insert(s.base);
    }
    EXPECT_EQ(bases.size(), 10u);
    st = pool.stats();
    EXPECT_EQ(st.misses, 10u);
    EXPECT_GE(st.reserve_hits, 1u);
    EXPECT_EQ(st.hits + st.reserve_hits + st.misses, 20u) << "each allocation counted once";
    for (auto& s : v) pool.deallocate(s);
}

// steady_loop() runs `rounds` rounds of: take n stacks on this thread, give
// them back; it returns the statistics after each round.
std::vector<weft::stack_pool::statistics> steady_loop(weft::stack_pool& pool, std::size_t n, int rounds) {
    std::vector<weft::stack_pool::statistics> after;
    std::vector<weft::stack_view> v(n);
    for (int r = 0; r < rounds; ++r) {
        for (auto& s : v) s = pool.allocate(small);
        for (auto& s : v) pool.deallocate(s);
        after.push_back(pool.stats());
    }
    return after;
}

// The S2 / S3 pattern: after a warm-up round the thread's cache holds every
// stack the loop needs, so the reserve sees no traffic at all.
TEST_F(pooled_stack_reuse, steady_loop_stays_in_the_thread_cache) {
    for (const std::size_t n : {std::size_t{1000}, std::size_t{5000}}) {
        SCOPED_TRACE(n);
        weft::stack_pool pool(small_pool());  // default capacity options
        const auto after = steady_loop(pool, n, 5);
        EXPECT_EQ(after[0].misses, n) << "the first round maps every stack";
        EXPECT_GE(after[0].cache_capacity, n) << "and leaves room for all of them";
        for (std::size_t r = 1; r < after.size(); ++r) {
            SCOPED_TRACE(r + 1);
            EXPECT_EQ(after[r].misses, after[0].misses);
            EXPECT_EQ(after[r].reserve_hits, 0u);
            EXPECT_EQ(after[r].flushes, 0u);
            EXPECT_EQ(after[r].hits, r * n) << "every later allocation is a hit";
            EXPECT_EQ(after[r].reserved, 0u);
            EXPECT_EQ(after[r].cached, n);
            EXPECT_EQ(after[r].cache_capacity, after[0].cache_capacity);
        }
    }
}

// A cache that already holds some stacks still grows by what the thread
// takes from outside: a second, larger loop settles after one round too.
TEST_F(pooled_stack_reuse, capacity_grows_again_when_demand_rises) {
    weft::stack_pool pool(small_pool());
    (void)steady_loop(pool, 100, 2);
    const auto after = steady_loop(pool, 700, 4);
    EXPECT_EQ(after[0].misses, 700u);
    EXPECT_GE(after[0].cache_capacity, 700u);
    for (std::size_t r = 1; r < after.size(); ++r) {
        EXPECT_EQ(after[r].misses, 700u);
        EXPECT_EQ(after[r].reserve_hits, 0u);
        EXPECT_EQ(after[r].flushes, 0u);
    }
}

// The capacity is bounded by max_cached_per_thread: above it the cache
// flushes to the reserve as before and refills from it.
TEST_F(pooled_stack_reuse, capacity_stops_at_max_cached_per_thread) {
    weft::stack_pool pool({.stack_size = small, .max_cached_per_thread = 100});
    const auto after = steady_loop(pool, 300, 3);
    EXPECT_EQ(after[0].cache_capacity, 100u);
    EXPECT_GE(after[0].flushes, 1u);
    EXPECT_GT(after[2].reserve_hits, after[1].reserve_hits) << "each round goes through the reserve";
    EXPECT_EQ(after[2].misses, 300u) << "but maps nothing new";
}

TEST_F(pooled_stack_reuse, without_thread_caches_the_reserve_is_lifo) {
    weft::stack_pool pool({.stack_size = small, .max_cached_per_thread = 0});
    weft::stack_view a = pool.allocate(small);
    weft::stack_view b = pool.allocate(small);
    pool.deallocate(a);
    pool.deallocate(b);
    EXPECT_EQ(pool.stats().reserved, 2u);
    EXPECT_TRUE(takes_back_newest_first(pool, a, b));
    const weft::stack_pool::statistics st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.hits = 0u, .reserve_hits = 2u, .thread_caches = 0u}));
}

// ---------------------------------------------------------------- fresh as new

TEST_F(pooled_stack_reuse, reused_stack_keeps_its_guard_page) {
    weft::stack_pool pool(small_pool());
    weft::stack_view s = pool.allocate(small);
    std::memset(s.base, 0x77, s.size);
    pool.deallocate(s);
    pool.trim();  // the pages go too; the guard must stay
    weft::stack_view t = pool.allocate(small);
    ASSERT_EQ(t.base, s.base);
    EXPECT_EQ(t.guard, weft::page_size());
    const std::vector<mapping> maps = read_maps();
    const mapping* guard = find_ending_at(maps, addr(t.base));
    ASSERT_NE(guard, nullptr) << "no mapping ends at the reused stack's base";
    EXPECT_EQ(guard->perms, "---p");
    EXPECT_LE(guard->start, addr(t.base) - t.guard);
    const mapping* usable = find_ending_at(maps, addr(t.top()));
    ASSERT_NE(usable, nullptr) << "no mapping ends at the reused stack's top";
    EXPECT_EQ(usable->perms.substr(0, 3), "rw-");
    EXPECT_LE(usable->start, addr(t.base));
    std::memset(t.base, 0x11, t.size);  // still writable throughout
    pool.deallocate(t);
}

TEST_F(pooled_stack_DeathTest, touching_the_guard_of_a_reused_stack_kills_the_process) {
    // This does not rely on /proc/self/maps, so it also holds under qemu.
    auto statement = [] {
        weft::stack_pool pool(small_pool());
        weft::stack_view s = pool.allocate(small);
        pool.deallocate(s);
        pool.trim();
        weft::stack_view t = pool.allocate(small);
        if (t.base != s.base) {
            std::fprintf(stderr, "not reused\n");
            std::exit(0);
        }
        weft::test::write_below(t);
    };
    EXPECT_DEATH(statement(), "");
}

TEST_F(pooled_stack_reuse, reused_stack_has_clean_sanitizer_state) {
    weft::stack_pool pool(small_pool());
    weft::stack_view s = pool.allocate(small);
#if WEFT_ASAN
    // As a coroutine abandoned mid-frame would leave it.
    __asan_poison_memory_region(static_cast<std::byte*>(s.base) + 4096, 8192);
    ASSERT_TRUE(__asan_address_is_poisoned(static_cast<std::byte*>(s.base) + 5000));
#endif
    pool.deallocate(s);
    weft::stack_view t = pool.allocate(small);
    ASSERT_EQ(t.base, s.base);
#if WEFT_ASAN
    EXPECT_EQ(__asan_region_is_poisoned(t.base, t.size), nullptr);
#endif
    std::memset(t.base, 0, t.size);  // ASan would report a poisoned write
    pool.deallocate(t);
}

// ---------------------------------------------------------------- coroutines

struct counted {
    int* destroyed;
    ~counted() { ++*destroyed; }
};

// dirty_frame() runs in a frame of N bytes that it fills with junk, which
// stays on the stack after it returns.
template <std::size_t N>
WEFT_NOINLINE void dirty_frame() {
    volatile unsigned char frame[N];
    for (std::size_t i = 0; i < N; ++i) frame[i] = 0x6B;
    (void)frame[0];
}

TEST_F(pooled_stack_coroutine, reused_stack_runs_a_coroutine_like_a_fresh_one) {
    weft::stack_pool pool(small_pool());
    weft::coroutine_options opts{.stack_size = small};
    int destroyed = 0;
    void* first_base = nullptr;
    {
        // Destroyed while suspended: unwound, then its stack goes to the pool.
        weft::coroutine<int> co(
            std::allocator_arg, weft::pooled_stack(pool),
            [&destroyed](weft::yielder<int>& y) {
                counted c{&destroyed};
                dirty_frame<4096>();  // leave junk behind
                y.yield(1);
                y.yield(2);
            },
            opts);
        first_base = co.ref().stack().base;
        EXPECT_EQ(co.resume(), std::optional<int>(1));
    }
    EXPECT_EQ(destroyed, 1) << "destroying the suspended coroutine unwound it";

    opts.name = "second";
    opts.private_data_size = 256;
    weft::coroutine<int, int, int> acc(
        std::allocator_arg, weft::pooled_stack(pool),
        [&destroyed](weft::yielder<int, int>& y, int first) {
            counted c{&destroyed};
            int sum = first;
            for (;;) {
                const int next = y.yield(sum);
                if (next < 0) break;
                sum += next;
            }
            return sum;
        },
        opts);
    EXPECT_EQ(acc.ref().stack().base, first_base) << "the second coroutine got the first one's stack";
    EXPECT_EQ(acc.name(), "second");
    const auto pd = acc.private_data();
    EXPECT_EQ(pd.size(), 256u);
    EXPECT_TRUE(std::all_of(pd.begin(), pd.end(), [](std::byte b) { return b == std::byte{0}; }));
    EXPECT_EQ(acc.resume(5), std::optional<int>(5));
    EXPECT_EQ(acc.resume(3), std::optional<int>(8));
    EXPECT_EQ(acc.resume(-1), std::nullopt);
    EXPECT_EQ(acc.result(), 8);
    EXPECT_EQ(destroyed, 2);
    EXPECT_EQ(pool.stats().hits, 1u);
}

TEST_F(pooled_stack_coroutine, exceptions_and_unwinding_on_reused_stacks) {
    weft::stack_pool pool(small_pool());
    weft::coroutine_options opts{.stack_size = small};
    int destroyed = 0;
    for (int round = 0; round < 3; ++round) {
        weft::coroutine<> thrower(
            std::allocator_arg, weft::pooled_stack(pool),
            [&destroyed](weft::yielder<>& y) {
                counted c{&destroyed};
                y.yield();
                throw std::runtime_error("from the body");
            },
            opts);
        EXPECT_TRUE(thrower.resume());
        EXPECT_THROW(thrower.resume(), std::runtime_error);
        EXPECT_TRUE(thrower.done());

        weft::coroutine<> suspended(
            std::allocator_arg, weft::pooled_stack(pool),
            [&destroyed](weft::yielder<>& y) {
                counted c{&destroyed};
                for (;;) y.yield();
            },
            opts);
        EXPECT_TRUE(suspended.resume());
    }
    EXPECT_EQ(destroyed, 6);
    const weft::stack_pool::statistics st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.hits = 4u, .misses = 2u}));
}

TEST_F(pooled_stack_coroutine, painted_high_water_on_a_reused_stack) {
    weft::stack_pool pool(small_pool());
    weft::coroutine_options opts{.stack_size = small};
    opts.paint_stack = true;
    std::size_t first = 0;
    for (int round = 0; round < 2; ++round) {
        weft::coroutine<> co(
            std::allocator_arg, weft::pooled_stack(pool),
            [round](weft::yielder<>& y) {
                // The first round leaves a deep frame's junk behind.
                if (round == 0) dirty_frame<16384>();
                y.yield();
            },
            opts);
        co.resume();
        if (round == 0)
            first = co.stack_high_water();
        else
            EXPECT_LT(co.stack_high_water(), first) << "painting hides the old frames";
    }
}

// ---------------------------------------------------------------- threads

TEST_F(pooled_stack_threads, stack_freed_on_another_thread_is_reused_there) {
    weft::stack_pool pool(small_pool());
    weft::stack_view s = pool.allocate(small);
    void* again = nullptr;
    in_thread([&] {
        pool.deallocate(s);  // into this thread's cache
        weft::stack_view t = pool.allocate(small);
        again = t.base;
        pool.deallocate(t);
    });  // exit: this thread's cache goes to the reserve
    EXPECT_EQ(again, s.base);
    weft::stack_pool::statistics st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.hits = 1u, .reserved = 1u}));
    EXPECT_EQ(st.thread_caches, 1u) << "only this thread's cache is still registered";
    weft::stack_view u = pool.allocate(small);  // from the reserve
    EXPECT_EQ(u.base, s.base);
    pool.deallocate(u);
    st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.reserve_hits = 1u, .misses = 1u}));
}

TEST_F(pooled_stack_threads, thread_exit_returns_its_cache_for_other_threads) {
    weft::stack_pool pool(small_pool());
    std::set<void*> made;
    in_thread([&] {
        std::vector<weft::stack_view> v;
        for (int i = 0; i < 3; ++i) v.push_back(pool.allocate(small));
        for (auto& s : v) {
            made.insert(s.base);
            pool.deallocate(s);
        }
        EXPECT_EQ(pool.stats().reserved, 0u) << "still in the thread's cache";
    });
    weft::stack_pool::statistics st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.misses = 3u, .cached = 3u, .reserved = 3u, .thread_caches = 0u}));
    std::set<void*> got;
    in_thread([&] {
        std::vector<weft::stack_view> v;
        for (int i = 0; i < 3; ++i) {
            v.push_back(pool.allocate(small));
            got.insert(v.back().base);
        }
        for (auto& s : v) pool.deallocate(s);
    });
    EXPECT_EQ(got, made);
    st = pool.stats();
    EXPECT_EQ(st.misses, 3u) << "nothing new was mapped";
    EXPECT_GE(st.reserve_hits, 1u);
    EXPECT_EQ(st.reserved, 3u);
}

// A thread that only frees stacks another thread allocated gains no
// capacity: it passes them to the reserve, where the allocating thread finds
// them, so a producer / consumer loop stops mapping after a few rounds.
TEST_F(pooled_stack_threads, consumer_thread_passes_freed_stacks_back_to_the_producer) {
    weft::stack_pool pool(small_pool());
    constexpr std::size_t n = 200;
    constexpr std::uint32_t floor = 16;  // min_cached_per_thread's default
    std::mutex m;
    std::condition_variable cv;
    std::vector<weft::stack_view> batch;  // handed to the consumer
    bool quit = false;
    std::thread consumer([&] {
        std::unique_lock<std::mutex> lk(m);
        for (;;) {
            cv.wait(lk, [&] { return quit || !batch.empty(); });
            if (batch.empty()) return;
            for (auto& s : batch) pool.deallocate(s);
            batch.clear();
            cv.notify_all();
        }
    });
    std::set<void*> seen;
    std::vector<weft::stack_pool::statistics> after;
    for (int r = 0; r < 8; ++r) {
        std::vector<weft::stack_view> v(n);
        for (auto& s : v) {
            s = pool.allocate(small);
            seen.insert(s.base);
        }
        std::unique_lock<std::mutex> lk(m);
        batch = v;
        cv.notify_all();
        cv.wait(lk, [&] { return batch.empty(); });
        after.push_back(pool.stats());
        const weft::stack_pool::statistics& st = after.back();
        EXPECT_LE(st.cached - st.reserved, floor) << "the consumer's cache keeps at most its floor";
        EXPECT_LE(st.mapped, n + floor);
    }
    {
        std::lock_guard<std::mutex> lk(m);
        quit = true;
    }
    cv.notify_all();
    consumer.join();
    EXPECT_EQ(after[7].misses, after[3].misses) << "the freed stacks are reused";
    EXPECT_EQ(seen.size(), after[7].misses);
    EXPECT_GT(after[7].flushes, after[3].flushes) << "the consumer flushes every round";
    EXPECT_GT(after[7].reserve_hits, after[3].reserve_hits) << "the producer refills every round";
}

TEST_F(pooled_stack_threads, limits_count_idle_stacks_and_exit_releases_them) {
    weft::stack_pool pool({.stack_size = small, .max_stacks = 2});
    paused_thread t([&] { cache_two(pool); }, [] {});
    // Both stacks sit idle in the other thread's cache, which only that
    // thread touches: this thread is at the limit.
    EXPECT_THROW((void)pool.allocate(small), weft::stack_pool_error);
    t.join();
    weft::stack_view s = pool.allocate(small);  // from the reserve now
    pool.deallocate(s);
    EXPECT_EQ(pool.stats().reserve_hits, 1u);
}

TEST_F(pooled_stack_threads, concurrent_use_with_cross_thread_frees) {
    // decay: steps at every check, racing with everything
    weft::stack_pool pool({.stack_size = small, .max_cached_per_thread = 4, .decay = std::chrono::milliseconds(0)});
    constexpr int threads = 4;
    constexpr int ops = 4000;
    std::mutex m;
    std::vector<weft::stack_view> handoff;  // freed by whichever thread takes it
    std::vector<std::thread> ts;
    for (int id = 0; id < threads; ++id) {
        ts.emplace_back([&, id] {
            std::mt19937 rng(static_cast<unsigned>(id) + 1);
            std::vector<weft::stack_view> mine;
            for (int i = 0; i < ops; ++i) {
                switch (rng() % 4) {
                    case 0:
                    case 1: {
                        weft::stack_view s = pool.allocate(small);
                        static_cast<volatile unsigned char*>(s.top())[-1] = static_cast<unsigned char>(i);
                        static_cast<volatile unsigned char*>(s.base)[0] = 1;
                        mine.push_back(s);
                        break;
                    }
                    case 2:
                        if (!mine.empty()) {
                            pool.deallocate(mine.back());
                            mine.pop_back();
                        }
                        break;
                    case 3:
                        if (!mine.empty()) {
                            std::lock_guard<std::mutex> lk(m);
                            handoff.push_back(mine.back());
                            mine.pop_back();
                        } else {
                            std::unique_lock<std::mutex> lk(m);
                            if (!handoff.empty()) {
                                weft::stack_view s = handoff.back();
                                handoff.pop_back();
                                lk.unlock();
                                pool.deallocate(s);
                            }
                        }
                        break;
                }
                if (mine.size() > 16) {
                    pool.deallocate(mine.front());
                    mine.erase(mine.begin());
                }
                if (i % 1000 == 999) pool.trim();
            }
            for (auto& s : mine) pool.deallocate(s);
        });
    }
    for (auto& t : ts) t.join();
    for (auto& s : handoff) pool.deallocate(s);
    const weft::stack_pool::statistics st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.in_use = 0u, .cached = st.mapped, .unpooled_in_use = 0u}));
    EXPECT_LE(st.thread_caches, 1u) << "the workers' caches were retired; this thread may have one";
}

// ---------------------------------------------------------------- decay

TEST_F(pooled_stack_decay, trim_releases_the_pages_of_idle_stacks) {
    weft::stack_pool pool(small_pool());
    weft::stack_view s = pool.allocate(small);
    auto* near_top = static_cast<unsigned char*>(s.top()) - 64;
    *near_top = 0xA5;
    static_cast<unsigned char*>(s.base)[0] = 0x5A;
    pool.deallocate(s);
    pool.trim();
    weft::stack_pool::statistics st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.trims = 1u, .unmaps = 0u, .cached = 1u, .mapped = 1u}));
    weft::stack_view t = pool.allocate(small);
    ASSERT_EQ(t.base, s.base);
    // Reading memory nobody wrote since it was handed out, on purpose: tell
    // memcheck (a no-op unless weft is built with WEFT_VALGRIND).
    weft::detail::sanitizer::reading_dead_stack(near_top, 1);
    weft::detail::sanitizer::reading_dead_stack(t.base, 1);
    const unsigned char top_byte = *near_top, base_byte = static_cast<unsigned char*>(t.base)[0];
    pool.deallocate(t);
    if (!madvise_dontneed_zeroes()) {
        GTEST_SKIP() << "MADV_DONTNEED does not zero pages here (user-mode emulator?); trims counted "
                     << st.trims << ", contents not checked (they read " << int(top_byte) << ", " << int(base_byte) << ")";
    }
    EXPECT_EQ(top_byte, 0) << "the page near the top was released";
    EXPECT_EQ(base_byte, 0) << "the page at the base was released";
}

TEST_F(pooled_stack_decay, second_trim_unmaps_surplus_down_to_min_retained) {
    weft::stack_pool pool({.stack_size = small, .min_retained = 2});
    std::vector<weft::stack_view> v;
    for (int i = 0; i < 5; ++i) v.push_back(pool.allocate(small));
    for (auto& s : v) {
        std::memset(s.base, 1, 3 * weft::page_size());
        pool.deallocate(s);
    }
    pool.trim();  // step 1: pages released, nothing unmapped
    weft::stack_pool::statistics st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.trims = 5u, .unmaps = 0u, .mapped = 5u}));
    for (auto& s : v) EXPECT_TRUE(is_mapped(s));
    pool.trim();  // step 2: idle through a second period: unmapped, 2 retained
    st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.trims = 5u, .unmaps = 3u, .cached = 2u, .reserved = 2u, .mapped = 2u,
                            .mapped_bytes = 2 * one_stack_bytes(small), .peak_mapped = 5u}));
    const auto still = std::count_if(v.begin(), v.end(), [](const weft::stack_view& s) { return is_mapped(s); });
    EXPECT_EQ(still, 2) << "exactly the retained stacks are still mapped";
    pool.trim();  // min_retained holds
    EXPECT_EQ(pool.stats().mapped, 2u);
    // The retained two come back from the reserve; a third is mapped anew.
    weft::stack_view a = pool.allocate(small), b = pool.allocate(small), c = pool.allocate(small);
    st = pool.stats();
    EXPECT_EQ(st.misses, 6u);
    EXPECT_EQ(st.reserve_hits, 1u) << "one refill brought both";
    pool.deallocate(a);
    pool.deallocate(b);
    pool.deallocate(c);
}

// A clock that only moves when the test says so.
std::atomic<std::int64_t> fake_now_ns{0};
std::chrono::steady_clock::time_point fake_clock() noexcept {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(fake_now_ns.load()));
}

TEST_F(pooled_stack_decay, decay_follows_the_clock_and_keeps_what_is_used) {
    fake_now_ns = 1'000'000'000;
    weft::stack_pool pool({.stack_size = small, .decay = std::chrono::milliseconds(100), .clock = &fake_clock});
    std::vector<weft::stack_view> v;
    for (int i = 0; i < 3; ++i) v.push_back(pool.allocate(small));
    for (auto& s : v) pool.deallocate(s);
    // step() advances the clock and runs enough operations for two decay
    // checks; only the top stack of the cache is in use.
    void* busy = v.back().base;
    auto step = [&](std::int64_t ms) {
        fake_now_ns += ms * 1'000'000;
        for (std::uint32_t i = 0; i < weft::stack_pool::ops_per_decay_check; ++i) {
            weft::stack_view s = pool.allocate(small);
            EXPECT_EQ(s.base, busy);
            pool.deallocate(s);
        }
    };
    step(0);
    EXPECT_EQ(pool.stats().trims, 0u) << "no time has passed";
    step(50);
    EXPECT_EQ(pool.stats().trims, 0u) << "less than one decay period";
    step(100);  // the first period ends: idleness is measured from here
    EXPECT_EQ(pool.stats().trims, 0u);
    step(150);  // two stacks stayed idle for a whole period
    weft::stack_pool::statistics st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.trims = 2u, .unmaps = 0u, .mapped = 3u}));
    step(150);  // idle for another period: surplus, unmapped
    st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.trims = 2u, .unmaps = 2u, .cached = 1u, .mapped = 1u}));
    EXPECT_FALSE(is_mapped(v[0]));
    EXPECT_FALSE(is_mapped(v[1]));
    EXPECT_TRUE(is_mapped(v[2]));
    step(1000);  // the busy stack is never trimmed
    st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.misses = 3u, .trims = 2u, .mapped = 1u}));
}

// When demand falls, decay returns the stacks and the capacity follows: one
// period measures the old demand, the next releases the pages, the third
// unmaps them and shrinks the capacity to the floor; demand rising again
// grows it back.
TEST_F(pooled_stack_decay, capacity_shrinks_when_demand_falls) {
    fake_now_ns = 1'000'000'000;
    weft::stack_pool pool({.stack_size = small, .decay = std::chrono::milliseconds(100), .clock = &fake_clock});
    constexpr std::size_t n = 1000;
    auto after = steady_loop(pool, n, 2);
    ASSERT_EQ(after[1].flushes, 0u);
    ASSERT_EQ(after[1].reserve_hits, 0u);
    ASSERT_GE(after[1].cache_capacity, n);
    // step() advances the clock by one decay period and runs enough
    // operations for two decay checks, with one stack in use.
    auto step = [&] {
        fake_now_ns += 100'000'000;
        for (std::uint32_t i = 0; i < weft::stack_pool::ops_per_decay_check; ++i) pool.deallocate(pool.allocate(small));
        return pool.stats();
    };
    weft::stack_pool::statistics st = step();  // the period of the loop ends
    EXPECT_EQ(st.trims, 0u);
    EXPECT_GE(st.cache_capacity, n) << "the loop's demand is measured";
    st = step();  // a period with a demand of one: the idle stacks' pages go
    EXPECT_TRUE(stats_are(st, {.trims = n - 1, .unmaps = 0u}));
    EXPECT_GE(st.cache_capacity, n) << "the previous period's demand still counts";
    st = step();  // a second such period: the surplus is unmapped
    EXPECT_TRUE(stats_are(st, {.unmaps = n - 1, .cached = 1u, .mapped = 1u}));
    EXPECT_EQ(st.cache_capacity, 16u) << "back to min_cached_per_thread";
    EXPECT_EQ(st.flushes, 0u);
    // Demand rises again: one round to map and grow, then steady.
    after = steady_loop(pool, n, 3);
    EXPECT_EQ(after[0].misses, 2 * n - 1);
    EXPECT_GE(after[0].cache_capacity, n);
    EXPECT_EQ(after[2].misses, after[0].misses);
    EXPECT_EQ(after[2].reserve_hits, 0u);
    EXPECT_EQ(after[2].flushes, 0u);
}

// trim() counts as a period without demand: two of them return the stacks
// and the capacity.
TEST_F(pooled_stack_decay, trim_shrinks_the_capacity_with_the_stacks) {
    weft::stack_pool pool(small_pool());
    (void)steady_loop(pool, 300, 2);
    pool.trim();
    EXPECT_GE(pool.stats().cache_capacity, 300u) << "the stacks are still in the cache";
    pool.trim();
    const weft::stack_pool::statistics st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.mapped = 0u, .cache_capacity = 16u}));
}

TEST_F(pooled_stack_decay, trim_reaches_other_threads_caches_at_their_next_check) {
    weft::stack_pool pool(small_pool());  // default decay: 10 s, never reached here
    paused_thread t([&] { cache_two(pool); },
                    [&] {
                        for (std::uint32_t i = 0; i < weft::stack_pool::ops_per_decay_check; ++i)
                            pool.deallocate(pool.allocate(small));
                    });
    pool.trim();
    EXPECT_EQ(pool.stats().trims, 0u) << "another thread's cache is not touched from here";
    t.join();
    EXPECT_GE(pool.stats().trims, 1u) << "the thread trimmed its own cache at its next check";
}

// ---------------------------------------------------------------- limits

TEST_F(pooled_stack_limits, fresh_unpooled_at_max_stacks) {
    weft::stack_pool pool({.stack_size = small, .max_stacks = 2, .on_limit = weft::limit_policy::fresh_unpooled});
    const std::int64_t live = weft::stats::live_stacks();
    weft::stack_view a = pool.allocate(small), b = pool.allocate(small);
    weft::stack_view c = pool.allocate(small);
    EXPECT_EQ(c.size, small) << "same usable size as a pooled stack";
    EXPECT_EQ(c.guard, pool.guard_size() + weft::page_size());
    std::memset(c.base, 3, c.size);
    EXPECT_EQ(weft::stats::live_stacks(), live + 3);
    weft::stack_pool::statistics st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.unpooled = 1u, .limit_failures = 0u, .mapped = 2u, .unpooled_in_use = 1u}));
    pool.deallocate(c);
    EXPECT_FALSE(is_mapped(c)) << "an unpooled stack is unmapped on release";
    st = pool.stats();
    EXPECT_TRUE(stats_are(st, {.cached = 0u, .unpooled_in_use = 0u}));
    pool.deallocate(a);
    pool.deallocate(b);
    EXPECT_EQ(pool.allocate(small).base, b.base) << "pooled ones are still pooled";
    pool.deallocate(b);
    EXPECT_EQ(weft::stats::live_stacks(), live);
}

TEST_F(pooled_stack_limits, fresh_unpooled_at_max_bytes) {
    weft::stack_pool pool({.stack_size = small,
                           .max_bytes = 2 * one_stack_bytes(small) + 1,  // room for two
                           .on_limit = weft::limit_policy::fresh_unpooled});
    weft::stack_view a = pool.allocate(small), b = pool.allocate(small), c = pool.allocate(small);
    EXPECT_TRUE(stats_are(pool.stats(), {.unpooled = 1u, .mapped = 2u}));
    for (auto s : {a, b, c}) pool.deallocate(s);
    EXPECT_EQ(pool.stats().cached, 2u);
}

TEST_F(pooled_stack_limits, fail_throws_an_error_naming_max_stacks) {
    weft::stack_pool pool({.stack_size = small, .max_stacks = 2});
    weft::stack_view a = pool.allocate(small), b = pool.allocate(small);
    const std::int64_t live = weft::stats::live_stacks();
    try {
        weft::stack_view c = pool.allocate(100);
        pool.deallocate(c);
        ADD_FAILURE() << "a third stack was handed out";
    } catch (const weft::stack_pool_error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("max_stacks = 2"), std::string::npos) << what;
        EXPECT_EQ(e.limit(), weft::stack_pool_error::limit_kind::max_stacks);
        EXPECT_EQ(e.limit_value(), 2u);
        EXPECT_EQ(e.requested_size(), 100u);
        EXPECT_EQ(e.code(), std::error_code(ENOMEM, std::generic_category()));
        const weft::stack_error& base = e;  // catchable as a stack_error
        EXPECT_EQ(base.code().value(), ENOMEM);
    }
    EXPECT_EQ(weft::stats::live_stacks(), live);
    EXPECT_TRUE(stats_are(pool.stats(), {.limit_failures = 1u, .mapped = 2u}));
    pool.deallocate(a);
    weft::stack_view again = pool.allocate(small);  // an idle one is fine
    EXPECT_EQ(again.base, a.base);
    pool.deallocate(again);
    pool.deallocate(b);
}

TEST_F(pooled_stack_limits, fail_throws_an_error_naming_max_bytes) {
    weft::stack_pool::options o = small_pool();
    o.max_bytes = 3 * one_stack_bytes(small) - 1;  // room for two
    weft::stack_pool pool(o);
    weft::stack_view a = pool.allocate(small), b = pool.allocate(small);
    try {
        weft::stack_view c = pool.allocate(small);
        pool.deallocate(c);
        ADD_FAILURE() << "a third stack was handed out";
    } catch (const weft::stack_error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("max_bytes = " + std::to_string(o.max_bytes)), std::string::npos) << what;
        EXPECT_NE(dynamic_cast<const weft::stack_pool_error*>(&e), nullptr);
    }
    pool.deallocate(a);
    pool.deallocate(b);
}

TEST_F(pooled_stack_limits, coroutine_creation_at_the_limit_fails_cleanly) {
    weft::stack_pool pool({.stack_size = small, .max_stacks = 1});
    weft::coroutine_options opts{.stack_size = small};
    weft::coroutine<> first(std::allocator_arg, weft::pooled_stack(pool), [](weft::yielder<>&) {}, opts);
    EXPECT_THROW(weft::coroutine<>(std::allocator_arg, weft::pooled_stack(pool), [](weft::yielder<>&) {}, opts),
                 weft::stack_pool_error);
}

// ---------------------------------------------------------------- options

TEST_F(pooled_stack_limits, invalid_options_are_rejected_with_a_message) {
    const std::size_t one = one_stack_bytes(small);
    struct cas {
        const char* what;
        std::function<void(weft::stack_pool::options&)> change;
        const char* message;
    };
    const cas cases[] = {
        {"zero stack size", [](auto& o) { o.stack_size = 0; }, "stack_size must not be zero"},
        {"zero guard", [](auto& o) { o.guard_pages = 0; }, "guard_pages must be at least 1"},
        {"max_stacks 0", [](auto& o) { o.max_stacks = 0; }, "max_stacks must be at least 1"},
        {"max_bytes below one stack", [one](auto& o) { o.max_bytes = one - 1; }, "max_bytes"},
        {"max_bytes 0", [](auto& o) { o.max_bytes = 0; }, "is below one stack"},
        {"min above max_stacks",
         [](auto& o) {
             o.max_stacks = 3;
             o.min_retained = 4;
         },
         "min_retained (4) exceeds max_stacks (3)"},
        {"min above max_bytes",
         [one](auto& o) {
             o.max_bytes = 3 * one;
             o.min_retained = 4;
         },
         "exceed max_bytes"},
        {"negative decay", [](auto& o) { o.decay = std::chrono::milliseconds(-1); }, "decay must not be negative"},
        {"huge cache", [](auto& o) { o.max_cached_per_thread = 1u << 20; }, "max_cached_per_thread"},
        {"huge cache floor", [](auto& o) { o.min_cached_per_thread = 1u << 20; }, "min_cached_per_thread (1048576)"},
        {"zero cache floor", [](auto& o) { o.min_cached_per_thread = 0; }, "min_cached_per_thread must be at least 1"},
        {"overflowing size", [](auto& o) { o.stack_size = std::numeric_limits<std::size_t>::max() - 10; }, "overflows"},
        {"overflowing guard", [](auto& o) { o.guard_pages = std::numeric_limits<std::size_t>::max() / 2; }, "guard_pages"},
        {"bad policy", [](auto& o) { o.on_limit = static_cast<weft::limit_policy>(7); }, "on_limit"},
    };
    for (const cas& c : cases) {
        SCOPED_TRACE(c.what);
        weft::stack_pool::options o = small_pool();
        c.change(o);
        try {
            weft::stack_pool pool(o);
            ADD_FAILURE() << "accepted";
        } catch (const std::invalid_argument& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find("weft::stack_pool"), std::string::npos) << what;
            EXPECT_NE(what.find(c.message), std::string::npos) << what;
        }
    }
    // The edges are fine.
    weft::stack_pool::options o = small_pool();
    o.max_stacks = 1;
    o.max_bytes = one;
    o.min_retained = 1;
    o.max_cached_per_thread = 0;
    o.decay = std::chrono::milliseconds(0);
    EXPECT_NO_THROW(weft::stack_pool{o});
}

// ---------------------------------------------------------------- destruction

TEST_F(pooled_stack_threads, destruction_unmaps_idle_stacks_of_running_threads) {
    auto pool = std::make_unique<weft::stack_pool>(small_pool());
    std::vector<weft::stack_view> theirs;
    paused_thread t(
        [&] {
            for (int i = 0; i < 2; ++i) theirs.push_back(pool->allocate(small));
            for (auto& s : theirs) pool->deallocate(s);
        },
        [] {
            // The old pool's record is orphaned; a new pool works on this thread.
            weft::stack_pool other(small_pool());
            other.deallocate(other.allocate(small));
            EXPECT_EQ(other.stats().thread_caches, 1u);
        });
    weft::stack_view mine = pool->allocate(small);
    pool->deallocate(mine);
    pool->deallocate(pool->allocate(small * 2));  // unpooled, gone already
    {
        for (auto& s : theirs) EXPECT_TRUE(is_mapped(s));
        EXPECT_TRUE(is_mapped(mine));
    }
    pool.reset();
    {
        for (auto& s : theirs) EXPECT_FALSE(is_mapped(s)) << "another thread's idle stack outlived the pool";
        EXPECT_FALSE(is_mapped(mine));
    }
    t.join();
    // This thread's record of the destroyed pool is freed on its next slow path.
    weft::stack_pool again(small_pool());
    again.deallocate(again.allocate(small));
}

TEST_F(pooled_stack_DeathTest, destroying_a_pool_with_stacks_in_use_aborts) {
    auto statement = [] {
        auto pool = std::make_unique<weft::stack_pool>(small_pool());
        (void)pool->allocate(small);
        pool.reset();
    };
    EXPECT_DEATH(statement(), "stack_pool destroyed while 1 pooled and 0 unpooled stacks");
}

TEST_F(pooled_stack_DeathTest, deallocating_a_foreign_stack_aborts) {
    auto statement = [] {
        weft::stack_pool pool(small_pool());
        weft::mmap_stack other(3);
        pool.deallocate(other.allocate(small));
    };
    EXPECT_DEATH(statement(), "did not hand out");
}

}  // namespace
