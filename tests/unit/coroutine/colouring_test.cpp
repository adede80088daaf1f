// colouring_test.cpp: cache colouring. Coroutines on equally aligned stacks
// get their control blocks at different offsets within a page, so that they
// do not all compete for the same cache sets; with cache_colouring off they
// all sit at the same offset. (Not built in copy-stack mode: there the
// control block is on the heap.)

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "support/leak_check.hpp"
#include "weft/coroutine.hpp"
#include "weft/stack.hpp"

namespace {

class colouring_test : public weft::test::leak_checked {};

// page_offsets() creates `count` coroutines on fresh page-aligned mmap
// stacks and returns the offsets within a page of their private data areas,
// which lie right below their control blocks.
template <class Alloc>
std::vector<std::uintptr_t> page_offsets(int count, bool colouring, Alloc alloc) {
    std::vector<weft::coroutine<>> all;
    for (int i = 0; i < count; ++i)
        all.emplace_back(std::allocator_arg, alloc, [](weft::yielder<>&) {},
                         weft::coroutine_options{.stack_size = 64 * 1024, .private_data_size = 16, .cache_colouring = colouring});
    std::vector<std::uintptr_t> offsets;
    for (auto& co : all) offsets.push_back(reinterpret_cast<std::uintptr_t>(co.private_data().data()) % weft::page_size());
    return offsets;
}

TEST_F(colouring_test, control_blocks_spread_over_the_cache_lines_of_a_page) {
    const std::vector<std::uintptr_t> offsets = page_offsets(2 * weft::cache_colours, true, weft::mmap_stack{});
    std::set<std::uintptr_t> lines;
    for (std::uintptr_t o : offsets) lines.insert(o / 64);
    EXPECT_EQ(lines.size(), std::size_t{weft::cache_colours}) << "consecutive coroutines take every colour";
    // Consecutive coroutines differ; the colours repeat after a full cycle.
    for (std::size_t i = 1; i < offsets.size(); ++i) EXPECT_NE(offsets[i], offsets[i - 1]) << "at " << i;
    for (std::size_t i = weft::cache_colours; i < offsets.size(); ++i)
        EXPECT_EQ(offsets[i], offsets[i - weft::cache_colours]) << "at " << i;
}

TEST_F(colouring_test, the_offset_stays_within_the_colour_range) {
    // Colouring moves the control block down by at most cache_colours - 1
    // lines from where it sits without colouring, so that a small coroutine
    // does not reach into another page of its stack because of it.
    const std::vector<std::uintptr_t> plain = page_offsets(1, false, weft::mmap_stack{});
    const std::vector<std::uintptr_t> coloured = page_offsets(3 * weft::cache_colours, true, weft::mmap_stack{});
    std::uintptr_t deepest = 0;
    for (std::uintptr_t o : coloured) {
        ASSERT_LE(o, plain[0]);
        deepest = std::max(deepest, plain[0] - o);
    }
    EXPECT_EQ(deepest, (weft::cache_colours - 1) * 64u);
}

TEST_F(colouring_test, without_colouring_every_control_block_sits_at_the_same_offset) {
    const std::vector<std::uintptr_t> offsets = page_offsets(64, false, weft::mmap_stack{});
    const std::set<std::uintptr_t> distinct(offsets.begin(), offsets.end());
    EXPECT_EQ(distinct.size(), 1u);
}

TEST_F(colouring_test, pooled_stacks_are_coloured_too) {
    const std::vector<std::uintptr_t> offsets = page_offsets(weft::cache_colours, true, weft::pooled_stack{});
    const std::set<std::uintptr_t> distinct(offsets.begin(), offsets.end());
    EXPECT_EQ(distinct.size(), std::size_t{weft::cache_colours});
}

TEST_F(colouring_test, a_small_stack_gives_at_most_a_sixteenth_to_colouring) {
    // A small stack that runs fine without colouring must keep running with
    // it: the offset is capped at 1/16 of the stack. 16 KiB is about the
    // least that is safe here: destroying the suspended coroutine unwinds it
    // with an exception, and libgcc's unwinder on AArch64 (dynamically
    // linked, under qemu) needs more than 7 KiB of stack for that; a gcc -O0
    // yield also no longer fits 4 KiB, because the inline switch's frame
    // sits below the 128-byte red zone (docs/context-abi.md).
    constexpr std::size_t size = 16 * 1024;
    for (int i = 0; i < 64; ++i) {
        weft::coroutine<int> co(std::allocator_arg, weft::malloc_stack{}, [](weft::yielder<int>& y) { y.yield(3); },
                                {.stack_size = size, .private_data_size = 16});
        const auto* top = static_cast<const std::byte*>(co.ref().stack().top());
        EXPECT_LE(top - co.private_data().data(), static_cast<std::ptrdiff_t>(size / 16 + 1024))
            << "private data too far below the top";
        EXPECT_EQ(co.resume(), std::optional<int>(3));
    }
}

}  // namespace
