// abi_test.cpp: every callee-saved register and the FP control state survive
// a context switch, on both sides of it. Each side loads its own known values
// through weft_abi_probe_call(), switches, and compares what it reads back.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "abi/abi_probe.hpp"
#include "support/leak_check.hpp"
#include "weft/context.hpp"
#include "weft/coroutine.hpp"
#include "weft/stack.hpp"

namespace {

using weft::context::transfer;

#if defined(__x86_64__)
constexpr int gpr_count = 6;  // rbx rbp r12 r13 r14 r15
constexpr int fpr_count = 0;
constexpr int fpctl_count = 2;  // MXCSR, x87 control word
// All exceptions masked; A rounds down with 53-bit x87 precision, B rounds
// toward zero with flush-to-zero and a 24-bit x87 precision.
constexpr std::uint64_t fpctl_a[2] = {0x3F80, 0x027F};
constexpr std::uint64_t fpctl_b[2] = {0xFF80, 0x0C7F};
#elif defined(__aarch64__)
constexpr int gpr_count = 11;  // x19..x29
constexpr int fpr_count = 8;   // d8..d15
constexpr int fpctl_count = 1;  // FPCR
// A: round toward +inf. B: round toward zero, flush-to-zero, default NaN.
constexpr std::uint64_t fpctl_a[2] = {1u << 22, 0};
constexpr std::uint64_t fpctl_b[2] = {(3u << 22) | (1u << 24) | (1u << 25), 0};
#endif

abi_regs pattern(std::uint64_t seed, const std::uint64_t (&fpctl)[2]) {
    abi_regs r{};
    for (int i = 0; i < 11; ++i) r.gpr[i] = seed ^ (0x0101010101010101ull * static_cast<std::uint64_t>(i + 1));
    for (int i = 0; i < 8; ++i) r.fpr[i] = ~seed ^ (0x1000000000000001ull * static_cast<std::uint64_t>(i + 3));
    r.fpctl[0] = fpctl[0];
    r.fpctl[1] = fpctl[1];
    return r;
}

// expect_preserved() compares what a probe read back with what it loaded.
// fp_expected is the FP control state the side should see after the switch:
// its own (saved per context) or the other side's (WEFT_SHARE_FP_ENV).
void expect_preserved(const char* side, const abi_regs& in, const abi_regs& out, const std::uint64_t* fp_expected) {
    for (int i = 0; i < gpr_count; ++i) EXPECT_EQ(out.gpr[i], in.gpr[i]) << side << ": gpr[" << i << "]";
    for (int i = 0; i < fpr_count; ++i) EXPECT_EQ(out.fpr[i], in.fpr[i]) << side << ": fpr[" << i << "]";
    for (int i = 0; i < fpctl_count; ++i) {
        std::uint64_t got = out.fpctl[i];
#if defined(__x86_64__)
        if (i == 0) got &= ~std::uint64_t{0x3F};  // MXCSR status flags are not preserved state
#endif
        EXPECT_EQ(got, fp_expected[i]) << side << ": fpctl[" << i << "]";
    }
    EXPECT_EQ(out.sp_after, out.sp_before) << side << ": stack pointer";
}

const std::uint64_t* expected_fp(const abi_regs& own, const abi_regs& other) {
    return WEFT_SHARE_FP_ENV ? other.fpctl : own.fpctl;
}

// Raw-context ping-pong: main and one context, each inside a probe.
struct raw_state {
    void* other = nullptr;
    bool fast_main = false;  // main switches with context::fast_jump (else the .S jump)
    bool fast_co = false;    // the context does
    abi_regs main_in, main_out, co_in, co_out;
    int co_rounds = 0;
};

// raw_switch() keeps nothing in a callee-saved register across the jump
// (the state is reached through a global), so a switch that loses one is
// reported by the probes instead of crashing this function.
raw_state* g_raw = nullptr;
// main passes a non-null argument, the context a null one.
void raw_switch(void* on_main) {
    const bool fast = on_main ? g_raw->fast_main : g_raw->fast_co;
    transfer t = fast ? weft::context::fast_jump(g_raw->other, nullptr) : weft::context::jump(g_raw->other, nullptr);
    g_raw->other = t.from;
}

void raw_entry(transfer t) noexcept {
    g_raw->other = t.from;
    for (;;) {
        weft_abi_probe_call(&raw_switch, nullptr, &g_raw->co_in, &g_raw->co_out);
        ++g_raw->co_rounds;
    }
}

class abi_test : public weft::test::leak_checked {};

// run_raw() ping-pongs 100 rounds with the given switch on each side and
// checks both sides' state after every round.
void run_raw(bool fast_main, bool fast_co) {
    weft::mmap_stack alloc;
    weft::stack_view stack = alloc.allocate(64 * 1024);
    raw_state st;
    g_raw = &st;
    st.fast_main = fast_main;
    st.fast_co = fast_co;
    st.main_in = pattern(0xA5A5A5A55A5A5A5Aull, fpctl_a);
    st.co_in = pattern(0x0123456789ABCDEFull, fpctl_b);
    st.other = weft::context::make(stack.top(), stack.size, &raw_entry);
    for (int round = 0; round < 100; ++round) {
        std::memset(&st.main_out, 0, sizeof st.main_out);
        weft_abi_probe_call(&raw_switch, &st, &st.main_in, &st.main_out);
        expect_preserved("main", st.main_in, st.main_out, expected_fp(st.main_in, st.co_in));
        if (round > 0) expect_preserved("context", st.co_in, st.co_out, expected_fp(st.co_in, st.main_in));
        if (::testing::Test::HasFailure()) break;
    }
    EXPECT_EQ(st.co_rounds, 99);
    alloc.deallocate(stack);  // the context is abandoned mid-loop: it owns nothing
}

TEST_F(abi_test, raw_context_preserves_callee_saved_state_on_both_sides) { run_raw(false, false); }

// fast_jump() saves only what the compiler does not; the rest is the
// enclosing function's business. Mixed with the .S jump on the other side,
// every register must still come back on both sides.
TEST_F(abi_test, fast_jump_preserves_callee_saved_state_on_both_sides) { run_raw(true, true); }
TEST_F(abi_test, fast_jump_main_with_assembly_jump_context) { run_raw(true, false); }
TEST_F(abi_test, assembly_jump_main_with_fast_jump_context) { run_raw(false, true); }

TEST_F(abi_test, equal_fp_control_state_still_preserves_registers) {
    // Both sides use the same FP control state: the switch skips restoring it.
    weft::mmap_stack alloc;
    weft::stack_view stack = alloc.allocate(64 * 1024);
    raw_state st;
    g_raw = &st;
    st.main_in = pattern(0x1111111111111111ull, fpctl_a);
    st.co_in = pattern(0x2222222222222222ull, fpctl_a);
    st.other = weft::context::make(stack.top(), stack.size, &raw_entry);
    for (int round = 0; round < 10; ++round) {
        weft_abi_probe_call(&raw_switch, &st, &st.main_in, &st.main_out);
        expect_preserved("main", st.main_in, st.main_out, st.main_in.fpctl);
        if (round > 0) expect_preserved("context", st.co_in, st.co_out, st.co_in.fpctl);
    }
    alloc.deallocate(stack);
}

// The same through weft::coroutine: resume and yield are the switches.
struct co_state {
    weft::coroutine<>* co = nullptr;
    weft::yielder<>* y = nullptr;
    abi_regs main_in, main_out, co_in, co_out;
    bool stop = false;
};

// shared (the default): each side sees the FP control state the other left;
// own: each keeps its own (fp_env_mode, weft/fiber.hpp). The callee-saved
// registers survive either way.
void coroutine_round_trips(weft::fp_env_mode mode) {
    co_state st;
    st.main_in = pattern(0x5A5A5A5AA5A5A5A5ull, fpctl_a);
    st.co_in = pattern(0xFEDCBA9876543210ull, fpctl_b);
    weft::coroutine<> co(
        [&st](weft::yielder<>& y) {
            st.y = &y;
            // The probe frames have no unwind tables, so the body ends by
            // returning rather than being unwound.
            while (!st.stop)
                weft_abi_probe_call([](void* p) { static_cast<co_state*>(p)->y->yield(); }, &st, &st.co_in,
                                    &st.co_out);
        },
        {.fp_env = mode});
    st.co = &co;
    const bool own = mode == weft::fp_env_mode::own;
    for (int round = 0; round < 100; ++round) {
        weft_abi_probe_call([](void* p) { (void)static_cast<co_state*>(p)->co->resume(); }, &st, &st.main_in,
                            &st.main_out);
        expect_preserved("resumer", st.main_in, st.main_out, own ? st.main_in.fpctl : st.co_in.fpctl);
        if (round > 0) expect_preserved("coroutine", st.co_in, st.co_out, own ? st.co_in.fpctl : st.main_in.fpctl);
        if (::testing::Test::HasFailure()) break;
    }
    st.stop = true;
    EXPECT_FALSE(co.resume());
    EXPECT_TRUE(co.done());
}

TEST_F(abi_test, coroutine_resume_and_yield_preserve_callee_saved_state_sharing_fp_state) {
    coroutine_round_trips(weft::fp_env_mode::shared);
}

TEST_F(abi_test, coroutine_resume_and_yield_preserve_callee_saved_state_and_own_fp_state) {
    coroutine_round_trips(weft::fp_env_mode::own);
}

}  // namespace
