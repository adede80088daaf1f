// malloc_guard_test.cpp: a malloc_stack whose guard word was overwritten
// aborts at release with a message naming the stack's range. Writing the
// guard stays inside the heap block, so AddressSanitizer does not object and
// the abort is weft's own.

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "support/leak_check.hpp"
#include "weft/fiber.hpp"
#include "weft/stack.hpp"

namespace {

class malloc_guard_DeathTest : public weft::test::leak_checked {};

std::string hex(const void* p) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(p)));
    return buf;
}

// The stack is allocated by the parent, so the message's range is known;
// only the child (the death statement runs in a fork) damages and frees it.
// The parent's copy of the guard is untouched and released normally.
TEST_F(malloc_guard_DeathTest, an_overwritten_guard_aborts_at_release_naming_the_stack) {
    weft::malloc_stack alloc;
    weft::stack_view s = alloc.allocate(4096);
    const std::string expected = "weft: malloc_stack overflow detected at release: the guard word below stack \\[" +
                                 hex(s.base) + ", " + hex(s.top()) +
                                 "\\) was overwritten \\(the stack's owner wrote past its low end\\)";
    auto overflow_and_release = [&] {
        static_cast<volatile unsigned char*>(s.base)[-1] = 0;
        alloc.deallocate(s);
    };
    EXPECT_DEATH(overflow_and_release(), expected);
    EXPECT_TRUE(weft::malloc_stack::guard_intact(s));
    alloc.deallocate(s);
}

TEST_F(malloc_guard_DeathTest, a_write_into_the_lowest_guard_byte_is_caught_too) {
    auto statement = [] {
        weft::malloc_stack alloc;
        weft::stack_view s = alloc.allocate(64);
        auto* lowest = static_cast<volatile unsigned char*>(s.base) - weft::malloc_stack::guard_bytes;
        *lowest = static_cast<unsigned char>(*lowest ^ 1);
        alloc.deallocate(s);
    };
    EXPECT_DEATH(statement(), "weft: malloc_stack overflow detected at release");
}

// A fiber on a malloc_stack that overwrote its guard word is caught, naming
// the fiber: at its next switch in builds without NDEBUG, at its destruction
// otherwise (before the stack is freed).
TEST_F(malloc_guard_DeathTest, a_fiber_that_overwrote_its_guard_word_is_named) {
    auto statement = [] {
        weft::fiber f(
            std::allocator_arg, weft::malloc_stack{},
            [] {
                auto* below = static_cast<volatile unsigned char*>(weft::this_fiber::current().stack().base) - 1;
                *below = static_cast<unsigned char>(*below ^ 0xff);
                weft::this_fiber::suspend();
            },
            {.stack_size = 16 * 1024, .name = "spiller"});
        f.resume();
        f.reset();
    };
    EXPECT_DEATH(statement(), "weft: fiber 'spiller' overflowed its malloc_stack: the guard word below the stack was overwritten");
}

}  // namespace
