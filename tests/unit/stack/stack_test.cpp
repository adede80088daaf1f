// stack_test.cpp: mmap_stack and malloc_stack, checked against what the
// kernel reports in /proc/self/maps.

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include <algorithm>
#include <cerrno>
#include <concepts>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include "support/guard_page.hpp"
#include "support/leak_check.hpp"
#include "support/proc_maps.hpp"
#include "weft/detail/support.hpp"
#include "weft/stack.hpp"

namespace {

// ---------------------------------------------------------------- helpers

using weft::test::any_page_mapped;
using weft::test::mapping;
using weft::test::find_ending_at;
using weft::test::overlaps;
using weft::test::read_maps;

// maps_summary is /proc/self/maps in brief: how many mappings there are and
// how many bytes they cover. Comparing the bytes too catches a leaked range
// that the kernel merged into a neighbouring mapping of the same kind.
struct maps_summary {
    long lines = -1;  // -1: could not be read
    unsigned long long bytes = 0;
    friend bool operator==(const maps_summary&, const maps_summary&) = default;
};

std::ostream& operator<<(std::ostream& os, const maps_summary& m) {
    return os << m.lines << " mappings, " << m.bytes << " bytes";
}

// summarize_maps() reads /proc/self/maps without allocating, so that it can
// run while the process is out of mappings.
maps_summary summarize_maps() noexcept {
    const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    maps_summary m{0, 0};
    char buf[16384];
    // Each line starts "start-end ", both in hex.
    unsigned long long start = 0, end = 0;
    int field = 0;  // 0: start, 1: end, 2: the rest of the line
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            m.lines = -1;
            break;
        }
        if (n == 0) break;
        for (ssize_t i = 0; i < n; ++i) {
            const char c = buf[i];
            if (c == '\n') {
                ++m.lines;
                m.bytes += end - start;
                start = end = 0;
                field = 0;
            } else if (field < 2) {
                if (c == (field == 0 ? '-' : ' ')) {
                    ++field;
                } else {
                    const unsigned digit = c <= '9' ? unsigned(c - '0') : unsigned((c | 0x20) - 'a' + 10);
                    (field == 0 ? start : end) = (field == 0 ? start : end) * 16 + digit;
                }
            }
        }
    }
    ::close(fd);
    return m;
}

// maps_served_by_procfs() says whether /proc/self/maps comes from the
// kernel. A user-mode emulator such as qemu-user synthesises it instead (in
// a memfd), and its own allocations share the process's mapping limit.
bool maps_served_by_procfs() noexcept {
    const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct statfs fs {};
    const bool procfs = ::fstatfs(fd, &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
    ::close(fd);
    return procfs;
}

// read_max_map_count() is vm.max_map_count, or -1.
long read_max_map_count() {
    std::ifstream in("/proc/sys/vm/max_map_count");
    long v = -1;
    if (!(in >> v)) return -1;
    return v;
}

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// maps_witness checks that code which must map nothing (a refused stack
// allocation) left no mapping behind. What it can check depends on who else
// maps memory meanwhile:
//   * natively (and under qemu-user, which lists only the guest's mappings),
//     nothing else does: the number of mappings and the mapped bytes must be
//     exactly as before;
//   * under valgrind, ASan or TSan the tool maps memory of its own while the
//     stack_error is thrown (valgrind's allocator grew the client heap by a
//     40 KiB mapping, for one): exact counts would measure the tool, so only
//     what a weft stack leaves is looked for: address space reserved
//     PROT_NONE that was unmapped before (a stack is a PROT_NONE reservation
//     with its guard page(s) kept PROT_NONE; see new_inaccessible()).
// Both snapshots are read without allocating.
class maps_witness {
public:
    maps_witness() : exact_(!weft::test::address_space_shared_with_a_tool()) {
        before_summary_ = summarize_maps();
        before_ok_ = before_.take();
    }
    // expect_nothing_new() adds a failure, with `what`, if something was left.
    void expect_nothing_new(const char* what) {
        const maps_summary now = summarize_maps();
        const bool now_ok = after_.take();
        if (exact_) {
            EXPECT_EQ(now, before_summary_) << what;
            return;
        }
        ASSERT_TRUE(before_ok_ && now_ok) << "cannot read /proc/self/maps";
        const auto added = weft::test::new_inaccessible(before_, after_);
        std::uintptr_t bytes = 0;
        for (const auto& r : added) bytes += r.end - r.start;
        EXPECT_TRUE(added.empty()) << what << ": " << added.size() << " new PROT_NONE range(s), " << bytes
                                   << " bytes, the first at 0x" << std::hex << added.front().start << "-0x"
                                   << added.front().end << std::dec << " (a tool shares the address space, so only "
                                   << "PROT_NONE reservations are attributed to weft; exact counts: " << before_summary_
                                   << " before, " << now << " after)";
    }

private:
    bool exact_;
    maps_summary before_summary_;
    weft::test::maps_snapshot before_, after_;
    bool before_ok_ = false;
};


class mmap_stack_test : public weft::test::leak_checked {};
class malloc_stack_test : public weft::test::leak_checked {};
class stack_concept_test : public weft::test::leak_checked {};
using mmap_stack_DeathTest = mmap_stack_test;

// ---------------------------------------------------------------- mmap_stack

TEST_F(mmap_stack_test, page_size_matches_the_system) {
    EXPECT_EQ(weft::page_size(), static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)));
    EXPECT_EQ(weft::page_size() & (weft::page_size() - 1), 0u) << "a power of two";
}

TEST_F(mmap_stack_test, sizes_are_rounded_up_to_whole_pages) {
    const std::size_t page = weft::page_size();
    weft::mmap_stack alloc;
    struct cas {
        std::size_t request, expected;
    };
    for (cas c : {cas{1, page}, cas{page - 1, page}, cas{page, page}, cas{page + 1, 2 * page}, cas{3 * page, 3 * page},
                  cas{weft::default_stack_size, weft::default_stack_size}, cas{100000, (100000 + page - 1) / page * page}}) {
        SCOPED_TRACE(testing::Message() << "request " << c.request);
        weft::stack_view s = alloc.allocate(c.request);
        EXPECT_EQ(s.size, c.expected);
        EXPECT_EQ(addr(s.base) % page, 0u);
        EXPECT_EQ(addr(s.top()) % page, 0u);
        alloc.deallocate(s);
    }
}

TEST_F(mmap_stack_test, whole_range_is_writable) {
    weft::mmap_stack alloc;
    weft::stack_view s = alloc.allocate(64 * 1024 + 5);
    auto* p = static_cast<unsigned char*>(s.base);
    std::memset(p, 0x5A, s.size);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < s.size; ++i) bad += p[i] != 0x5A;
    EXPECT_EQ(bad, 0u);
    EXPECT_TRUE(s.contains(p));
    EXPECT_TRUE(s.contains(p + s.size - 1));
    EXPECT_FALSE(s.contains(p + s.size));
    EXPECT_FALSE(s.contains(p - 1));
    alloc.deallocate(s);
}

TEST_F(mmap_stack_test, guard_below_base_is_prot_none_and_the_stack_read_write) {
    for (std::size_t guard_pages : {std::size_t{1}, std::size_t{3}}) {
        SCOPED_TRACE(testing::Message() << "guard pages " << guard_pages);
        weft::mmap_stack alloc(guard_pages);
        EXPECT_EQ(alloc.guard_size(), guard_pages * weft::page_size());
        weft::stack_view s = alloc.allocate(32 * 1024);
        const std::vector<mapping> maps = read_maps();
        const mapping* guard = find_ending_at(maps, addr(s.base));
        ASSERT_NE(guard, nullptr) << "no mapping ends at the stack's base";
        EXPECT_EQ(guard->perms, "---p");
        EXPECT_LE(guard->start, addr(s.base) - alloc.guard_size());
        const mapping* usable = find_ending_at(maps, addr(s.top()));
        ASSERT_NE(usable, nullptr) << "no mapping ends at the stack's top";
        EXPECT_EQ(usable->perms.substr(0, 3), "rw-");
        EXPECT_LE(usable->start, addr(s.base));
        alloc.deallocate(s);
    }
}

TEST_F(mmap_stack_test, deallocate_unmaps_stack_and_guard) {
    weft::mmap_stack alloc(2);
    weft::stack_view s = alloc.allocate(16 * 1024);
    const std::uintptr_t lo = addr(s.base) - alloc.guard_size();
    const std::uintptr_t hi = addr(s.top());
    ASSERT_TRUE(overlaps(read_maps(), lo, hi));
    ASSERT_TRUE(any_page_mapped(lo, hi));
    alloc.deallocate(s);
    EXPECT_FALSE(any_page_mapped(lo, hi));
}

TEST_F(mmap_stack_DeathTest, touching_the_guard_page_kills_the_process) {
    auto statement = [] {
        weft::mmap_stack alloc;
        weft::test::write_below(alloc.allocate(16 * 1024));
    };
    EXPECT_DEATH(statement(), "");
}

TEST_F(mmap_stack_test, zero_size_is_invalid) {
    weft::mmap_stack alloc;
    EXPECT_THROW((void)alloc.allocate(0), std::invalid_argument);
}

TEST_F(mmap_stack_test, zero_guard_pages_is_invalid) { EXPECT_THROW(weft::mmap_stack(0), std::invalid_argument); }

TEST_F(mmap_stack_test, stack_error_is_a_system_error) {
    static_assert(std::is_base_of_v<std::system_error, weft::stack_error>);
    weft::stack_error e(ENOMEM, 12345, "test");
    EXPECT_EQ(e.code(), std::error_code(ENOMEM, std::generic_category()));
    EXPECT_EQ(e.requested_size(), 12345u);
    EXPECT_NE(std::string(e.what()).find("12345"), std::string::npos) << e.what();
}

TEST_F(mmap_stack_test, overflowing_sizes_throw_eoverflow_and_map_nothing) {
    const std::size_t page = weft::page_size();
    const std::size_t max = std::numeric_limits<std::size_t>::max();
    struct cas {
        std::size_t guard_pages, request;
    };
    // Each overflows: rounding up to a page, or adding the guard.
    for (cas c : {cas{1, max}, cas{1, max - 1}, cas{1, max - page + 2}, cas{1, max - page + 1}, cas{4, max - 3 * page + 1},
                  cas{max / page, 1}}) {
        SCOPED_TRACE(testing::Message() << "guard pages " << c.guard_pages << ", request " << c.request);
        weft::mmap_stack alloc(c.guard_pages);
        const std::int64_t stacks = weft::stats::live_stacks();
        maps_witness maps;
        try {
            weft::stack_view s = alloc.allocate(c.request);
            alloc.deallocate(s);
            ADD_FAILURE() << "allocate() did not throw";
        } catch (const weft::stack_error& e) {
            maps.expect_nothing_new("a failed allocation left a mapping");
            EXPECT_EQ(e.code(), std::error_code(EOVERFLOW, std::generic_category())) << e.what();
            EXPECT_EQ(e.requested_size(), c.request);
            const std::system_error& base = e;  // catchable as its base
            EXPECT_EQ(base.code().value(), EOVERFLOW);
        }
        EXPECT_EQ(weft::stats::live_stacks(), stacks);
    }
}

TEST_F(mmap_stack_test, huge_sizes_that_do_not_overflow_fail_cleanly) {
    // Two pages short of the address space: no arithmetic overflow, but the
    // kernel cannot map it.
    const std::size_t page = weft::page_size();
    const std::size_t request = std::numeric_limits<std::size_t>::max() - 2 * page + 1;
    weft::mmap_stack alloc;
    maps_witness maps;
    try {
        weft::stack_view s = alloc.allocate(request);
        alloc.deallocate(s);
        ADD_FAILURE() << "a stack of nearly 2^64 bytes was mapped";
    } catch (const weft::stack_error& e) {
        maps.expect_nothing_new("a refused allocation left a mapping");
        EXPECT_EQ(e.requested_size(), request);
        EXPECT_NE(e.code().value(), 0);
    }
}

TEST_F(mmap_stack_test, guard_size_does_not_wrap_around) {
    // guard_pages * page_size() overflows size_t: the allocator must refuse
    // the guard (at construction or allocation), not silently use a wrapped,
    // much smaller guard.
    const std::size_t guard_pages = std::numeric_limits<std::size_t>::max() / weft::page_size() + 2;
    try {
        weft::mmap_stack alloc(guard_pages);
        try {
            weft::stack_view s = alloc.allocate(1);
            ADD_FAILURE() << "allocate() succeeded with guard_size() == " << alloc.guard_size() << " for " << guard_pages
                          << " guard pages";
            alloc.deallocate(s);
        } catch (const weft::stack_error& e) {
            EXPECT_EQ(e.code().value(), EOVERFLOW) << e.what();
        }
    } catch (const std::invalid_argument&) {
        SUCCEED();
    }
}

TEST_F(mmap_stack_test, live_stacks_counts_allocations) {
    weft::mmap_stack alloc;
    const std::int64_t base = weft::stats::live_stacks();
    weft::stack_view a = alloc.allocate(4096);
    EXPECT_EQ(weft::stats::live_stacks(), base + 1);
    weft::stack_view b = alloc.allocate(8192);
    EXPECT_EQ(weft::stats::live_stacks(), base + 2);
    alloc.deallocate(a);
    EXPECT_EQ(weft::stats::live_stacks(), base + 1);
    alloc.deallocate(b);
    EXPECT_EQ(weft::stats::live_stacks(), base);
    alloc.deallocate(weft::stack_view{});  // an empty view is ignored
    EXPECT_EQ(weft::stats::live_stacks(), base);
}

TEST_F(mmap_stack_test, distinct_stacks_do_not_overlap) {
    weft::mmap_stack alloc;
    std::vector<weft::stack_view> v;
    for (int i = 0; i < 16; ++i) v.push_back(alloc.allocate(8192));
    for (std::size_t i = 0; i < v.size(); ++i)
        for (std::size_t j = i + 1; j < v.size(); ++j) {
            const std::uintptr_t a0 = addr(v[i].base) - alloc.guard_size(), a1 = addr(v[i].top());
            const std::uintptr_t b0 = addr(v[j].base) - alloc.guard_size(), b1 = addr(v[j].top());
            EXPECT_TRUE(a1 <= b0 || b1 <= a0) << i << " and " << j << " overlap";
        }
    for (weft::stack_view s : v) alloc.deallocate(s);
}

// exhaust_map_count() runs in a death-test child: it allocates 16 KiB stacks
// until vm.max_map_count is exhausted and checks that each failure is a clean
// stack_error(ENOMEM) that leaves no mapping behind (neither a new mapping
// nor a range merged into a neighbour). It then shifts the number of
// mappings by one and fails again, so that the failure is checked at both
// parities of the mapping count. Exits 0 on success.
[[noreturn]] void exhaust_map_count(long max_map_count) {
    auto fail = [](const char* what, long a = 0, long b = 0) {
        std::fprintf(stderr, "FAILED: %s (%ld, %ld)\n", what, a, b);
        std::exit(1);
    };
    constexpr std::size_t limit = 200000;
    constexpr std::size_t size = 16 * 1024;
    // Reading /proc/self/maps costs time proportional to the number of
    // mappings, so it is read around every allocation only near the limit.
    constexpr long margin = 64;
    std::unique_ptr<weft::stack_view[]> stacks(new weft::stack_view[limit]);
    weft::mmap_stack alloc;
    const std::int64_t live_before = weft::stats::live_stacks();
    std::size_t n = 0;
    char first_error[256] = "", second_error[256] = "";

    // attempt() allocates one stack. On stack_error it checks the error and,
    // when `exact`, that /proc/self/maps did not change; it returns
    // false and keeps the error's text.
    auto attempt = [&](bool exact, char* error_text) -> bool {
        const maps_summary before = exact ? summarize_maps() : maps_summary{};
        if (exact && before.lines <= 0) fail("cannot read /proc/self/maps");
        try {
            stacks[n] = alloc.allocate(size);
            ++n;
            return true;
        } catch (const weft::stack_error& e) {
            const maps_summary after = summarize_maps();
            if (e.code() != std::error_code(ENOMEM, std::generic_category()))
                fail("stack_error code is not ENOMEM", e.code().value(), ENOMEM);
            if (e.requested_size() != size) fail("wrong requested_size", static_cast<long>(e.requested_size()), size);
            if (exact && after.lines != before.lines)
                fail("a failed allocation changed the number of mappings", after.lines, before.lines);
            if (exact && after.bytes != before.bytes)
                fail("a failed allocation changed the mapped bytes", static_cast<long>(after.bytes - before.bytes));
            std::snprintf(error_text, 256, "%s", e.what());
            return false;
        }
    };

    long predicted = summarize_maps().lines;
    if (predicted <= 0) fail("cannot read /proc/self/maps");
    for (;;) {
        if (n >= limit) fail("no stack_error before the iteration limit", static_cast<long>(n), max_map_count);
        if (n % 1024 == 0) predicted = summarize_maps().lines;
        const bool exact = predicted + margin >= max_map_count;
        if (!attempt(exact, first_error)) {
            // A failure earlier than predicted (some other limit?) is
            // checked again, this time exactly.
            if (!exact && attempt(true, first_error)) fail("allocation succeeded right after a failure", static_cast<long>(n));
            break;
        }
        predicted += 2;  // a reservation and its read-write part
    }
    if (n < 1000) fail("exhausted suspiciously early", static_cast<long>(n), max_map_count);
    const std::size_t exhausted_at = n;

    // Free one stack (two mappings) and map one page (one mapping): the
    // next failure happens with the count shifted by one.
    alloc.deallocate(stacks[--n]);
    void* extra = ::mmap(nullptr, weft::page_size(), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (extra == MAP_FAILED) fail("cannot map the extra page", errno);
    for (int i = 0;; ++i) {
        if (i > 8) fail("no second failure after freeing one stack");
        if (!attempt(true, second_error)) break;
    }
    ::munmap(extra, weft::page_size());

    const long full = summarize_maps().lines;
    if (weft::stats::live_stacks() != live_before + static_cast<std::int64_t>(n)) fail("live_stacks is off");
    for (std::size_t i = 0; i < n; ++i) alloc.deallocate(stacks[i]);
    if (weft::stats::live_stacks() != live_before) fail("live_stacks after freeing", static_cast<long>(weft::stats::live_stacks()));
    const long freed = summarize_maps().lines;
    if (freed > full - static_cast<long>(n)) fail("freeing did not remove the mappings", freed, full);
    try {
        weft::stack_view s = alloc.allocate(size);
        static_cast<volatile unsigned char*>(s.base)[0] = 1;
        alloc.deallocate(s);
    } catch (const weft::stack_error& e) {
        fail("allocation after freeing everything failed", e.code().value());
    }
    std::fprintf(stderr, "exhausted after %zu stacks; first failure: %s; second failure: %s\n", exhausted_at, first_error,
                 second_error);
    std::exit(0);
}

TEST_F(mmap_stack_DeathTest, exhausting_vm_max_map_count_throws_enomem_and_leaks_nothing) {
    const long max_map_count = read_max_map_count();
    if (max_map_count <= 0) GTEST_SKIP() << "cannot read /proc/sys/vm/max_map_count";
    // Each stack takes two mappings; past 200,000 stacks the test would take
    // too long (and too much address space) to be worth running.
    if (max_map_count > 2L * 190000) GTEST_SKIP() << "vm.max_map_count is " << max_map_count << ", too high to exhaust";
    // Under qemu-user the emulator's own allocations fail along with the
    // test's once the limit is reached (qemu 7.2 then spins forever while
    // synthesising /proc/self/maps), so the test cannot run there.
    if (!maps_served_by_procfs()) GTEST_SKIP() << "/proc/self/maps is not served by procfs (user-mode emulator?)";
    EXPECT_EXIT(exhaust_map_count(max_map_count), ::testing::ExitedWithCode(0), "exhausted after [0-9]+ stacks");
}

// ---------------------------------------------------------------- malloc_stack

TEST_F(malloc_stack_test, sixteen_byte_aligned_and_rounded_up_to_sixteen) {
    weft::malloc_stack alloc;
    struct cas {
        std::size_t request, expected;
    };
    for (cas c : {cas{1, 16}, cas{15, 16}, cas{16, 16}, cas{17, 32}, cas{100, 112}, cas{4097, 4112}, cas{65536, 65536}}) {
        SCOPED_TRACE(testing::Message() << "request " << c.request);
        weft::stack_view s = alloc.allocate(c.request);
        ASSERT_TRUE(s);
        EXPECT_EQ(s.size, c.expected);
        EXPECT_EQ(addr(s.base) % 16, 0u);
        EXPECT_EQ(addr(s.top()) % 16, 0u);
        std::memset(s.base, 0x33, s.size);  // writable (and checked by sanitizers)
        alloc.deallocate(s);
    }
}

TEST_F(malloc_stack_test, zero_size_is_invalid) {
    weft::malloc_stack alloc;
    EXPECT_THROW((void)alloc.allocate(0), std::invalid_argument);
}

TEST_F(malloc_stack_test, overflowing_size_throws_eoverflow) {
    weft::malloc_stack alloc;
    const std::size_t max = std::numeric_limits<std::size_t>::max();
    // max - 15 rounds to max - 15 without overflow; adding the guard overflows.
    for (std::size_t request : {max, max - 14, max - 15}) {
        try {
            weft::stack_view s = alloc.allocate(request);
            alloc.deallocate(s);
            ADD_FAILURE() << "allocate() did not throw";
        } catch (const weft::stack_error& e) {
            EXPECT_EQ(e.code(), std::error_code(EOVERFLOW, std::generic_category()));
            EXPECT_EQ(e.requested_size(), request);
        }
    }
}

TEST_F(malloc_stack_test, live_stacks_counts_allocations) {
    weft::malloc_stack alloc;
    const std::int64_t base = weft::stats::live_stacks();
    weft::stack_view s = alloc.allocate(1000);
    EXPECT_EQ(weft::stats::live_stacks(), base + 1);
    alloc.deallocate(s);
    EXPECT_EQ(weft::stats::live_stacks(), base);
    alloc.deallocate(weft::stack_view{});
    EXPECT_EQ(weft::stats::live_stacks(), base);
}

// The guard word: guard_bytes of guard_value just below base, checked at
// release (tests/death/malloc_guard_test.cpp has the abort).

// The coroutine layer detects a guard word with a requires-expression on
// the allocator type; only malloc_stack has one.
template <class A>
concept has_guard_word = requires(weft::stack_view v) {
    { A::guard_word(v) } -> std::same_as<const std::uint64_t*>;
    { A::guard_value } -> std::convertible_to<std::uint64_t>;
};
static_assert(has_guard_word<weft::malloc_stack>);
static_assert(!has_guard_word<weft::mmap_stack>);
static_assert(weft::malloc_stack::guard_bytes % 16 == 0, "base stays 16-byte aligned");

TEST_F(malloc_stack_test, guard_is_intact_after_allocate_and_just_below_base) {
    weft::malloc_stack alloc;
    for (std::size_t request : {1u, 16u, 100u, 4097u, 65536u}) {
        SCOPED_TRACE(testing::Message() << "request " << request);
        weft::stack_view s = alloc.allocate(request);
        ASSERT_TRUE(s);
        EXPECT_EQ(s.guard, 0u) << "the guard word is not an inaccessible region";
        EXPECT_TRUE(weft::malloc_stack::guard_intact(s));
        const std::uint64_t* word = weft::malloc_stack::guard_word(s);
        EXPECT_EQ(addr(word), addr(s.base) - sizeof(std::uint64_t)) << "the word nearest the stack";
        EXPECT_EQ(*word, weft::malloc_stack::guard_value);
        // Using the whole stack leaves the guard alone.
        std::memset(s.base, 0xA5, s.size);
        EXPECT_TRUE(weft::malloc_stack::guard_intact(s));
        alloc.deallocate(s);
    }
}

TEST_F(malloc_stack_test, writing_one_byte_below_base_breaks_the_guard) {
    weft::malloc_stack alloc;
    weft::stack_view s = alloc.allocate(1024);
    auto* below = static_cast<volatile unsigned char*>(s.base) - 1;
    const unsigned char saved = *below;
    *below = static_cast<unsigned char>(saved ^ 0xFF);
    EXPECT_FALSE(weft::malloc_stack::guard_intact(s));
    EXPECT_NE(*weft::malloc_stack::guard_word(s), weft::malloc_stack::guard_value);
    // Repaired, the stack can be released without the abort.
    *below = saved;
    EXPECT_TRUE(weft::malloc_stack::guard_intact(s));
    alloc.deallocate(s);
}

TEST_F(malloc_stack_test, guard_intact_sees_the_lowest_guard_byte_that_guard_word_does_not) {
    weft::malloc_stack alloc;
    weft::stack_view s = alloc.allocate(1024);
    auto* lowest = static_cast<volatile unsigned char*>(s.base) - weft::malloc_stack::guard_bytes;
    const unsigned char saved = *lowest;
    *lowest = static_cast<unsigned char>(saved ^ 0xFF);
    EXPECT_FALSE(weft::malloc_stack::guard_intact(s));
    EXPECT_EQ(*weft::malloc_stack::guard_word(s), weft::malloc_stack::guard_value);
    *lowest = saved;
    EXPECT_TRUE(weft::malloc_stack::guard_intact(s));
    alloc.deallocate(s);
}

// ---------------------------------------------------------------- the concept

struct good_allocator {
    weft::stack_view allocate(std::size_t);
    void deallocate(weft::stack_view) noexcept;
};
struct throwing_deallocate {
    weft::stack_view allocate(std::size_t);
    void deallocate(weft::stack_view);  // not noexcept
};
struct wrong_allocate_result {
    void* allocate(std::size_t);
    void deallocate(weft::stack_view) noexcept;
};
struct no_deallocate {
    weft::stack_view allocate(std::size_t);
};
struct throwing_move {
    throwing_move() = default;
    throwing_move(throwing_move&&) noexcept(false);
    weft::stack_view allocate(std::size_t);
    void deallocate(weft::stack_view) noexcept;
};
struct move_only_allocator {
    move_only_allocator() = default;
    move_only_allocator(move_only_allocator&&) noexcept = default;
    move_only_allocator(const move_only_allocator&) = delete;
    weft::stack_view allocate(std::size_t);
    void deallocate(weft::stack_view) noexcept;
};

static_assert(weft::stack_allocator<good_allocator>);
static_assert(weft::stack_allocator<move_only_allocator>);
static_assert(weft::stack_allocator<weft::mmap_stack>);
static_assert(weft::stack_allocator<weft::malloc_stack>);
static_assert(!weft::stack_allocator<throwing_deallocate>);
static_assert(!weft::stack_allocator<wrong_allocate_result>);
static_assert(!weft::stack_allocator<no_deallocate>);
static_assert(!weft::stack_allocator<throwing_move>);
static_assert(!weft::stack_allocator<int>);

TEST_F(stack_concept_test, stack_view_describes_its_range) {
    alignas(16) std::byte buffer[64];
    weft::stack_view v{buffer, sizeof buffer};
    EXPECT_TRUE(v);
    EXPECT_EQ(v.top(), buffer + sizeof buffer);
    EXPECT_TRUE(v.contains(buffer));
    EXPECT_TRUE(v.contains(buffer + 63));
    EXPECT_FALSE(v.contains(buffer + 64));
    EXPECT_FALSE(weft::stack_view{});
    EXPECT_FALSE(weft::stack_view{}.contains(buffer));
}

}  // namespace

// detail::thread_counter: per-thread slots, summed on read.
namespace {

static_assert(static_cast<unsigned>(weft::detail::counter_id::first_free) < 7,
              "the test below takes id 7, which weft must not use");

TEST(thread_counter, sums_across_threads_including_exited_ones) {
    // Id 7 is unused by weft itself.
    static weft::detail::thread_counter c{7};
    const std::int64_t base = c.read();
    c.add(5);
    EXPECT_EQ(c.read(), base + 5);
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
        ts.emplace_back([] {
            for (int i = 0; i < 1000; ++i) c.add(1);
            c.add(-3);  // a decrement on another thread than the increments below
        });
    for (auto& t : ts) t.join();
    // The four threads have exited: their slots were folded into the totals.
    EXPECT_EQ(c.read(), base + 5 + 4 * 997);
    std::thread([] { c.add(-4 * 997); }).join();  // goes negative in that thread's slot
    c.add(-5);
    EXPECT_EQ(c.read(), base);
}

TEST(thread_counter, live_stacks_follow_a_stack_freed_on_another_thread) {
    const std::int64_t base = weft::stats::live_stacks();
    weft::mmap_stack alloc;
    weft::stack_view s = alloc.allocate(16 * 1024);
    EXPECT_EQ(weft::stats::live_stacks(), base + 1);
    std::thread([&] { alloc.deallocate(s); }).join();
    EXPECT_EQ(weft::stats::live_stacks(), base);
}

}  // namespace

// weft/detail/support.hpp: the cross-layer helpers.
namespace {

using namespace std::string_view_literals;

TEST(support, round_up_rounds_to_powers_of_two_and_reports_overflow) {
    using weft::detail::round_up;
    const std::size_t max = std::numeric_limits<std::size_t>::max();
    std::size_t out = 12345;
    EXPECT_TRUE(round_up(0, 16, out));
    EXPECT_EQ(out, 0u);
    EXPECT_TRUE(round_up(1, 16, out));
    EXPECT_EQ(out, 16u);
    EXPECT_TRUE(round_up(4096, 4096, out));
    EXPECT_EQ(out, 4096u);
    EXPECT_TRUE(round_up(4097, 4096, out));
    EXPECT_EQ(out, 8192u);
    EXPECT_TRUE(round_up(7, 1, out));
    EXPECT_EQ(out, 7u);
    EXPECT_TRUE(round_up(max - 15, 16, out));
    EXPECT_EQ(out, max - 15);
    out = 12345;
    EXPECT_FALSE(round_up(max - 14, 16, out));
    EXPECT_EQ(out, 12345u) << "out is unchanged on overflow";
    EXPECT_FALSE(round_up(max, 4096, out));
    static_assert([] {
        std::size_t r = 0;
        return weft::detail::round_up(100, 64, r) && r == 128;
    }());
}

TEST(support, describe_named_quotes_a_name_or_shows_the_address) {
    const void* p = reinterpret_cast<const void*>(std::uintptr_t{0xabc0});
    EXPECT_EQ(weft::detail::describe_named("coroutine", "worker", p), "coroutine 'worker'");
    EXPECT_EQ(weft::detail::describe_named("coroutine", "", p), "coroutine <anonymous 0xabc0>");
    EXPECT_EQ(weft::detail::describe_named("task", "", nullptr), "task <anonymous 0x0>");
    const std::string long_name(1000, 'n');
    EXPECT_EQ(weft::detail::describe_named("coroutine", long_name, p), "coroutine '" + long_name + "'")
        << "describe_named never cuts";
}

TEST(support, format_named_matches_describe_named_and_allocates_nothing) {
    const void* p = reinterpret_cast<const void*>(std::uintptr_t{0xdeadbeef0});
    char buf[128];
    const std::uint64_t before = weft::test::new_calls();
    std::size_t n = weft::detail::format_named(buf, sizeof buf, "coroutine", "worker", p);
    EXPECT_EQ(std::string_view(buf, n), "coroutine 'worker'");
    EXPECT_EQ(buf[n], '\0');
    n = weft::detail::format_named(buf, sizeof buf, "coroutine", "", p);
    EXPECT_EQ(std::string_view(buf, n), "coroutine <anonymous 0xdeadbeef0>");
    EXPECT_EQ(weft::test::new_calls(), before);
    EXPECT_EQ(std::string_view(buf, n), weft::detail::describe_named("coroutine", "", p));
}

TEST(support, format_named_cuts_a_long_name_inside_the_quotes) {
    char buf[20];
    std::memset(buf, '#', sizeof buf);
    // "coroutine '" is 11 characters; 8 are left before the NUL.
    std::size_t n = weft::detail::format_named(buf, sizeof buf, "coroutine", "abcdefghijklmnop", nullptr);
    EXPECT_EQ(std::string_view(buf, n), "coroutine 'abcd...'");
    EXPECT_EQ(n, sizeof buf - 1);
    EXPECT_EQ(buf[n], '\0');
    // A name that fits exactly keeps its closing quote.
    n = weft::detail::format_named(buf, sizeof buf, "coroutine", "abcdefg", nullptr);
    EXPECT_EQ(std::string_view(buf, n), "coroutine 'abcdefg'");
    // Too little room for "...'": the text is just cut, still terminated.
    char tiny[14];
    n = weft::detail::format_named(tiny, sizeof tiny, "coroutine", "abcdefg", nullptr);
    EXPECT_EQ(std::string_view(tiny, n), "coroutine 'ab");
    EXPECT_EQ(tiny[n], '\0');
    // An empty buffer is never written.
    char none = '#';
    EXPECT_EQ(weft::detail::format_named(&none, 0, "coroutine", "x", nullptr), 0u);
    EXPECT_EQ(none, '#');
}

TEST(support, text_writer_never_writes_past_its_buffer) {
    char buf[16];
    std::memset(buf, '#', sizeof buf);
    weft::detail::text_writer w(buf, 12);
    w.text("n=").dec(0).text(" ").dec(18446744073709551615u);
    EXPECT_STREQ(w.c_str(), "n=0 1844674");
    EXPECT_EQ(w.size(), 11u);
    EXPECT_EQ(w.room(), 0u);
    EXPECT_TRUE(w.truncated());
    EXPECT_EQ(buf[12], '#') << "nothing past the buffer";
    weft::detail::text_writer h(buf, sizeof buf);
    h.hex(0).text(" ").address(reinterpret_cast<const void*>(std::uintptr_t{0x7f00ff}));
    EXPECT_STREQ(h.c_str(), "0x0 0x7f00ff");
    EXPECT_FALSE(h.truncated());
}

using support_DeathTest = ::testing::Test;

TEST_F(support_DeathTest, fatal_message_writes_the_text_and_aborts) {
    // Not anchored at the end: qemu-user adds a line of its own when the
    // emulated process aborts.
    EXPECT_DEATH(weft::detail::fatal_message("weft: test failure 42"), "weft: test failure 42\n");
    EXPECT_EXIT(weft::detail::fatal_message("weft: ends in a newline\n"), ::testing::KilledBySignal(SIGABRT),
                "weft: ends in a newline\n([^\n]|$)");
}

}  // namespace
