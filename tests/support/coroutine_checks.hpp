// coroutine_checks.hpp: what the tests of weft::coroutine on shared stacks
// (tests/unit/coroutine/shared_stack_test.cpp) and of weft::compact_coroutine
// (compact_coroutine_test.cpp) check alike.
//
//   what_thrown<E>()   the what() of the E a call throws;
//   big_frame_survives()   1 MiB live across a yield, checked afterwards;
//   takeover_without_memory_loses_nothing()   a shared stack taken over
//                      while no memory is to be had for the saved bytes.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <new>
#include <string>

#include "support/address_space_cap.hpp"
#include "weft/config.hpp"
#include "weft/fiber.hpp"

namespace weft::test {

// what_thrown<E>() runs f and returns what() of the E it throws; a test
// failure and "" if it throws none.
template <class E, class F>
std::string what_thrown(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    }
    ADD_FAILURE() << "no exception";
    return {};
}

// big_frame_survives() keeps 1 MiB of a pattern live across one yield of y
// and says whether it came back intact.
template <class Yielder>
[[gnu::noinline]] bool big_frame_survives(Yielder& y) {
    std::array<unsigned char, std::size_t{1} << 20> buf;
    for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(i * 7 + 3);
    y.yield();
    for (std::size_t i = 0; i < buf.size(); ++i)
        if (buf[i] != static_cast<unsigned char>(i * 7 + 3)) return false;
    asm volatile("" ::"r"(buf.data()) : "memory");
    return true;
}

// takeover_without_memory_loses_nothing() resumes `big`, whose body keeps
// big_frame_survives() (setting `intact`), then `other`, which counts its
// runs in `other_ran`, both created on one shared stack: taking the stack
// over needs a 1 MiB buffer for big's bytes, so under an address-space cap
// other's resume throws bad_alloc before anything moves; with memory back
// the same takeover saves big, and big comes back whole. counts_saves: the
// coroutine type counts its saves (compact coroutines keep no counters).
// Skips the test under the sanitizers and where RLIMIT_AS is not enforced.
template <class Coroutine>
void takeover_without_memory_loses_nothing(Coroutine& big, Coroutine& other, const int& other_ran,
                                           const bool& intact, bool counts_saves) {
    if (WEFT_ASAN || WEFT_TSAN)
        GTEST_SKIP() << "the sanitizers' allocators abort instead of failing when the address space runs out";
    ASSERT_TRUE(big.resume());  // 1 MiB live on the shared stack, nothing saved yet
    {
        address_space_cap cap;
        if (!cap.effective())
            GTEST_SKIP() << "RLIMIT_AS is not enforced here (qemu-user and valgrind ignore it), so no allocation "
                            "can be made to fail";
        // Taking the stack over needs a 1 MiB buffer for big's bytes: the
        // resume fails before anything moves.
        EXPECT_THROW((void)other.resume(), std::bad_alloc);
    }
    EXPECT_EQ(other_ran, 0);
    EXPECT_EQ(other.state(), weft::fiber_state::created);
    EXPECT_EQ(big.state(), weft::fiber_state::suspended);
    EXPECT_EQ(big.copy_stats().max_saved, 0u);
    if (counts_saves) {
        EXPECT_EQ(big.copy_stats().saves, 0u);
    }
    // With memory back, the same takeover saves big, and big comes back whole.
    EXPECT_TRUE(other.resume());
    EXPECT_EQ(other_ran, 1);
    if (counts_saves) {
        EXPECT_EQ(big.copy_stats().saves, 1u);
    }
    EXPECT_GE(big.copy_stats().last_saved, std::size_t{1} << 20);
    EXPECT_FALSE(big.resume());
    EXPECT_TRUE(intact);
}

}  // namespace weft::test
