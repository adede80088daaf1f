// context_test.cpp: layer L0 on its own: make, jump, ontop, alignment, FP
// control state inheritance and preservation.

#include <gtest/gtest.h>

#include <cfenv>
#include <cstdint>
#include <stdexcept>

#include "support/context_fixture.hpp"
#include "weft/context.hpp"
#include "weft/stack.hpp"

namespace {

using weft::context::transfer;

class context_test : public weft::test::context_fixture {};

// Ping-pong: the context adds one to each value and jumps back.
void adder(transfer t) noexcept {
    for (;;) {
        auto v = reinterpret_cast<std::uintptr_t>(t.data);
        t = weft::context::jump(t.from, reinterpret_cast<void*>(v + 1));
    }
}

TEST_F(context_test, jump_passes_data_both_ways) {
    void* ctx = make(&adder);
    std::uintptr_t v = 0;
    for (int i = 0; i < 100000; ++i) {
        transfer t = weft::context::jump(ctx, reinterpret_cast<void*>(v));
        ctx = t.from;
        ASSERT_EQ(reinterpret_cast<std::uintptr_t>(t.data), v + 1);
        v += 2;
    }
}

TEST_F(context_test, make_places_the_context_near_the_top_of_the_stack) {
    void* ctx = make(&adder);
    EXPECT_TRUE(stack_.contains(ctx));
    EXPECT_LT(static_cast<std::byte*>(stack_.top()) - static_cast<std::byte*>(ctx), 256);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(ctx) % 16, 0u);
}

// The entry reports its frame address; with frame pointers, a 16-byte
// aligned stack at the call gives a 16-byte aligned frame address.
void report_frame(transfer t) noexcept {
    auto* fa = __builtin_frame_address(0);
    weft::context::jump(t.from, fa);
    __builtin_trap();
}

TEST_F(context_test, entry_runs_on_a_16_byte_aligned_stack) {
    // Try several stack tops, aligned and not, to exercise make's rounding.
    for (std::size_t off = 0; off < 64; off += 8) {
        void* ctx = weft::context::make(static_cast<std::byte*>(stack_.top()) - off, stack_.size - off, &report_frame);
        transfer t = weft::context::jump(ctx, nullptr);
        auto fa = reinterpret_cast<std::uintptr_t>(t.data);
        EXPECT_TRUE(stack_.contains(t.data)) << "offset " << off;
        EXPECT_EQ(fa % 16, 0u) << "offset " << off;
    }
}

// ontop runs a function on the target's stack; its result is what the
// target's suspended jump returns.
void echo(transfer t) noexcept {
    for (;;) t = weft::context::jump(t.from, t.data);
}

transfer add_hundred(transfer t) {
    auto v = reinterpret_cast<std::uintptr_t>(t.data);
    return {t.from, reinterpret_cast<void*>(v + 100)};
}

TEST_F(context_test, ontop_result_becomes_the_targets_jump_result) {
    void* ctx = make(&echo);
    transfer t = weft::context::jump(ctx, reinterpret_cast<void*>(1));  // echo is now suspended in its jump
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data), 1u);
    t = weft::context::ontop(t.from, reinterpret_cast<void*>(5), &add_hundred);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data), 105u);
}

std::uintptr_t g_ontop_stack_probe = 0;
transfer record_stack(transfer t) {
    g_ontop_stack_probe = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
    return t;
}

TEST_F(context_test, ontop_function_runs_on_the_target_stack) {
    void* ctx = make(&echo);
    transfer t = weft::context::jump(ctx, nullptr);
    t = weft::context::ontop(t.from, nullptr, &record_stack);
    EXPECT_TRUE(stack_.contains(reinterpret_cast<void*>(g_ontop_stack_probe)));
}

// An exception thrown by an ontop function leaves the target's suspended jump.
struct injected : std::runtime_error {
    using std::runtime_error::runtime_error;
};

void* g_resumer = nullptr;

void catcher(transfer t) noexcept {
    for (;;) {
        try {
            t = weft::context::jump(t.from, nullptr);
        } catch (const injected& e) {
            // t.from is stale here: the ontop function recorded the resumer.
            t = weft::context::jump(g_resumer, const_cast<char*>(e.what()));
        }
    }
}
transfer throw_after_recording(transfer t) {
    g_resumer = t.from;
    throw injected("thrown on top");
}

TEST_F(context_test, ontop_exception_propagates_out_of_the_targets_jump) {
    void* ctx = make(&catcher);
    transfer t = weft::context::jump(ctx, nullptr);
    t = weft::context::ontop(t.from, nullptr, &throw_after_recording);
    ASSERT_NE(t.data, nullptr);
    EXPECT_STREQ(static_cast<const char*>(t.data), "thrown on top");
    // The context is still usable after catching.
    t = weft::context::jump(t.from, nullptr);
    EXPECT_EQ(t.data, nullptr);
}

// ontop into a context that never ran: the function's result is the
// transfer the entry receives.
void first_entry_reports(transfer t) noexcept {
    weft::context::jump(t.from, t.data);
    __builtin_trap();
}

TEST_F(context_test, ontop_into_a_fresh_context_feeds_its_entry) {
    void* ctx = make(&first_entry_reports);
    transfer t = weft::context::ontop(ctx, reinterpret_cast<void*>(7), &add_hundred);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data), 107u);
}

// FP control state: inherited by a fresh context from its creator, then kept
// per context (or shared with WEFT_SHARE_FP_ENV). Jump is the switch both
// sides use: the .S jump or the inline fast_jump.
using jump_fn = transfer (*)(void*, void*);

template <jump_fn Jump>
void rounding_worker(transfer t) noexcept {
    auto inherited = static_cast<std::uintptr_t>(std::fegetround());
    std::fesetround(FE_TOWARDZERO);
    t = Jump(t.from, reinterpret_cast<void*>(inherited));
    auto after = static_cast<std::uintptr_t>(std::fegetround());
    Jump(t.from, reinterpret_cast<void*>(after));
    __builtin_trap();
}

// make_worker() makes the context once the creator's rounding mode is set.
template <jump_fn Jump, class MakeWorker>
void check_rounding_per_context(MakeWorker make_worker) {
    const int saved = std::fegetround();
    ASSERT_EQ(std::fesetround(FE_DOWNWARD), 0);
    transfer t = Jump(make_worker(), nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data), static_cast<std::uintptr_t>(FE_DOWNWARD));
    EXPECT_EQ(std::fegetround(), WEFT_SHARE_FP_ENV ? FE_TOWARDZERO : FE_DOWNWARD);
    std::fesetround(FE_UPWARD);
    t = Jump(t.from, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data),
              static_cast<std::uintptr_t>(WEFT_SHARE_FP_ENV ? FE_UPWARD : FE_TOWARDZERO));
    EXPECT_EQ(std::fegetround(), FE_UPWARD);  // the worker changed nothing since
    std::fesetround(saved);
}

TEST_F(context_test, rounding_mode_is_inherited_and_preserved_per_context) {
    check_rounding_per_context<&weft::context::jump>([this] { return make(&rounding_worker<&weft::context::jump>); });
}

}  // namespace

// fast_jump: the inline switch of the coroutine layer.
namespace {

void fast_adder(transfer t) noexcept {
    for (;;) {
        auto v = reinterpret_cast<std::uintptr_t>(t.data);
        t = weft::context::fast_jump(t.from, reinterpret_cast<void*>(v + 1));
    }
}

TEST_F(context_test, fast_jump_passes_data_both_ways_and_mixes_with_jump) {
    // The context always answers with fast_jump; main alternates between the
    // two switches, so each resumes contexts the other suspended.
    void* ctx = make(&fast_adder);
    std::uintptr_t v = 0;
    for (int i = 0; i < 100000; ++i) {
        transfer t = (i % 3 == 0) ? weft::context::jump(ctx, reinterpret_cast<void*>(v))
                                  : weft::context::fast_jump(ctx, reinterpret_cast<void*>(v));
        ctx = t.from;
        ASSERT_EQ(reinterpret_cast<std::uintptr_t>(t.data), v + 1);
        v += 2;
    }
}

// Many values live across the switch, integer and floating point: the
// compiler has to keep them somewhere fast_jump does not clobber.
void scrambler(transfer t) noexcept {
    for (;;) {
        // Touch every register class on the context's side.
        volatile double d = 1.0;
        volatile std::uint64_t x = 0xdeadbeef;
        d = d * 3.5 + static_cast<double>(x);
        x = x * 7 + static_cast<std::uint64_t>(d);
        t = weft::context::fast_jump(t.from, reinterpret_cast<void*>(static_cast<std::uintptr_t>(x)));
    }
}

TEST_F(context_test, fast_jump_keeps_the_callers_live_values) {
    void* ctx = make(&scrambler);
    std::uint64_t a[12];
    double f[12];
    for (int i = 0; i < 12; ++i) {
        a[i] = 0x1000 + static_cast<std::uint64_t>(i) * 0x1111;
        f[i] = 0.5 + i;
    }
    std::uint64_t ia = 0;
    double fa = 0;
    for (int round = 0; round < 1000; ++round) {
        std::uint64_t s0 = a[0] + a[1], s1 = a[2] ^ a[3], s2 = a[4] * 3, s3 = a[5] - a[6], s4 = a[7] + a[8],
                      s5 = a[9] | a[10], s6 = a[11] + static_cast<std::uint64_t>(round);
        double g0 = f[0] * f[1], g1 = f[2] + f[3], g2 = f[4] - f[5], g3 = f[6] * 2, g4 = f[7] + f[8], g5 = f[9] / 2,
               g6 = f[10] + f[11] + round;
        ctx = weft::context::fast_jump(ctx, nullptr).from;
        ia += s0 + s1 + s2 + s3 + s4 + s5 + s6;
        fa += g0 + g1 + g2 + g3 + g4 + g5 + g6;
    }
    std::uint64_t ea = 0;
    double efa = 0;
    for (int round = 0; round < 1000; ++round) {
        ea += (a[0] + a[1]) + (a[2] ^ a[3]) + a[4] * 3 + (a[5] - a[6]) + (a[7] + a[8]) + (a[9] | a[10]) +
              (a[11] + static_cast<std::uint64_t>(round));
        efa += f[0] * f[1] + (f[2] + f[3]) + (f[4] - f[5]) + f[6] * 2 + (f[7] + f[8]) + f[9] / 2 + (f[10] + f[11] + round);
    }
    EXPECT_EQ(ia, ea);
    EXPECT_EQ(fa, efa);
}

TEST_F(context_test, fast_jump_preserves_the_rounding_mode_per_context) {
    check_rounding_per_context<&weft::context::fast_jump>(
        [this] { return make(&rounding_worker<&weft::context::fast_jump>); });
}

// A non-throwing ontop fn may run on top of a context suspended in fast_jump.
void fast_echo(transfer t) noexcept {
    for (;;) t = weft::context::fast_jump(t.from, t.data);
}

TEST_F(context_test, ontop_onto_a_fast_jump_suspended_context) {
    void* ctx = make(&fast_echo);
    ctx = weft::context::jump(ctx, nullptr).from;  // now suspended inside fast_jump
    transfer t = weft::context::ontop(ctx, reinterpret_cast<void*>(std::uintptr_t{5}), &add_hundred);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data), 105u);
    t = weft::context::fast_jump(t.from, reinterpret_cast<void*>(std::uintptr_t{7}));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data), 7u);
}

}  // namespace
