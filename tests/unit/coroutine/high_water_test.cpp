// high_water_test.cpp: with coroutine_options::paint_stack, stack_high_water()
// reports how deep the coroutine's stack has been used, to within a page of
// a known use, and never less than before.
//
// The expectation is measured, not guessed: what weft itself puts on the
// stack (name, control block, first frames, the body's call) depends on the
// compiler and the build type. A body that touches nothing is not a sound
// baseline: after the body returns, weft's switch back to the resumer saves
// registers below the body's call site (32 bytes deeper than a frame
// called from the body, at -O2 with gcc 12). So the reference is the same
// body calling a function with a 1 KiB frame, deeper than anything weft does
// around the body: a body calling an N-byte frame must then report N - 1 KiB
// more than the reference, within one page.

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "support/leak_check.hpp"
#include "weft/coroutine.hpp"

namespace {

class high_water : public weft::test::leak_checked {};

constexpr std::size_t stack_size = 128 * 1024;

volatile std::size_t g_sink = 0;
volatile std::size_t g_zero = 0;

// use_stack() writes every byte of an N-byte local array (never with the
// paint pattern, 0xA5) and returns one of them.
template <std::size_t N>
[[gnu::noinline]] std::size_t use_stack() {
    volatile unsigned char buf[N];
    for (std::size_t i = 0; i < N; ++i) buf[i] = static_cast<unsigned char>(i & 0x3F);
    return buf[g_zero];
}

// high_water_of() runs body to its end in a painted coroutine and returns the
// mark.
template <class F>
std::size_t high_water_of(F body) {
    weft::coroutine<> co(body, {.stack_size = stack_size, .paint_stack = true});
    EXPECT_FALSE(co.resume());
    return co.stack_high_water();
}

std::size_t baseline() {
    return high_water_of([](weft::yielder<>&) {});
}

constexpr std::size_t reference_bytes = 1024;

template <std::size_t N>
void expect_within_a_page_of() {
    // The first run is thrown away: in a build against libweft.so, the first
    // call of each weft function from inside a coroutine goes through the
    // dynamic linker's lazy binding, whose resolver saves the whole register
    // file on the coroutine's stack (about 1.5 KiB deeper than the body's
    // 1 KiB frame), once per process: a test run alone by CTest saw it.
    (void)high_water_of([](weft::yielder<>&) { g_sink = use_stack<reference_bytes>(); });
    const std::size_t reference = high_water_of([](weft::yielder<>&) { g_sink = use_stack<reference_bytes>(); });
    const std::size_t mark = high_water_of([](weft::yielder<>&) { g_sink = use_stack<N>(); });
    ASSERT_GT(mark, reference);
    EXPECT_GE(mark - reference, N - reference_bytes) << "reference " << reference << ", mark " << mark;
    EXPECT_LE(mark - reference, N - reference_bytes + weft::page_size())
        << "reference " << reference << ", mark " << mark;
    // In absolute terms: the whole array, plus no more than what weft and the
    // body's call put above it, plus a page.
    EXPECT_GE(mark, N);
    EXPECT_LE(mark, N + baseline() + weft::page_size()) << "mark " << mark;
}

TEST_F(high_water, the_baseline_is_small_and_nonzero) {
    const std::size_t base = baseline();
    EXPECT_GT(base, 0u);
    EXPECT_LT(base, 8u * 1024) << "a body that does nothing should not use kilobytes";
}

TEST_F(high_water, an_8_kib_frame_is_measured_within_a_page) { expect_within_a_page_of<8 * 1024>(); }

TEST_F(high_water, a_20_kib_frame_is_measured_within_a_page) { expect_within_a_page_of<20 * 1024>(); }

TEST_F(high_water, a_100_kib_frame_is_measured_within_a_page) { expect_within_a_page_of<100 * 1024>(); }

TEST_F(high_water, is_zero_without_paint_stack) {
    weft::coroutine<> co([](weft::yielder<>& y) {
        g_sink = use_stack<8 * 1024>();
        y.yield();
    });
    EXPECT_EQ(co.stack_high_water(), 0u);
    EXPECT_TRUE(co.resume());
    EXPECT_EQ(co.stack_high_water(), 0u);
    EXPECT_FALSE(co.resume());
    EXPECT_EQ(co.stack_high_water(), 0u);
}

TEST_F(high_water, never_decreases_across_resumes) {
    weft::coroutine<> co(
        [](weft::yielder<>& y) {
            g_sink = use_stack<20 * 1024>();
            y.yield();
            g_sink = use_stack<4 * 1024>();  // shallower: the mark stays
            y.yield();
            y.yield();  // nothing
            g_sink = use_stack<40 * 1024>();  // deeper: the mark grows
        },
        {.stack_size = stack_size, .paint_stack = true});
    const std::size_t before = co.stack_high_water();
    std::vector<std::size_t> marks;
    while (co.resume()) marks.push_back(co.stack_high_water());
    marks.push_back(co.stack_high_water());
    ASSERT_EQ(marks.size(), 4u);

    // Creation's first frame lies below where the body's calls start, so
    // `before` is not added: the 20 KiB array is simply on the stack.
    EXPECT_GT(marks[0], before);
    EXPECT_GE(marks[0], 20u * 1024);
    EXPECT_EQ(marks[1], marks[0]);
    EXPECT_EQ(marks[2], marks[0]);
    EXPECT_GE(marks[3], marks[0] + 20 * 1024);
    for (std::size_t i = 1; i < marks.size(); ++i) EXPECT_GE(marks[i], marks[i - 1]) << "at resume " << i;
}

TEST_F(high_water, before_the_first_resume_counts_only_what_creation_placed) {
    // Before it runs, the mark covers what creation placed: the name, the
    // control block and the first context frame, written over the top of
    // the painted area.
    weft::coroutine<> co([](weft::yielder<>&) {}, {.stack_size = stack_size, .name = "fresh", .paint_stack = true});
    const std::size_t fresh = co.stack_high_water();
    EXPECT_GT(fresh, 0u);
    EXPECT_LT(fresh, 4u * 1024);
    EXPECT_FALSE(co.resume());
    EXPECT_GE(co.stack_high_water(), fresh);
}

}  // namespace
