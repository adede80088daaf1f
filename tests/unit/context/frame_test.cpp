// frame_test.cpp: the switch frame that weft/detail/context_frame.hpp
// describes is the one make(), jump() and fast_jump() really leave: the
// first frame sits where the header says, a fast_jump() frame holds its
// frame pointer, resume address and FP control state in the named slots, and
// only frame::data_parts of it (and nothing in the gap) must survive for the
// context to resume correctly, which is what the copy-stack save relies on.

#include <gtest/gtest.h>

#include <cfenv>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "support/context_fixture.hpp"
#include "weft/context.hpp"
#include "weft/detail/context_frame.hpp"
#include "weft/stack.hpp"

namespace {

using weft::context::transfer;
namespace frame = weft::context::frame;

template <class T>
T load(const std::byte* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// The FP control state as the switches store it in the frame.
#if defined(__x86_64__)
constexpr std::size_t fpctl_words = 2;
void fp_control_now(std::uint64_t (&w)[2]) {
    std::uint32_t mxcsr;
    std::uint16_t fcw;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fcw));
    w[0] = mxcsr & ~std::uint32_t{0x3f};  // the status flags are not preserved state
    w[1] = fcw;
}
void fp_control_in(const std::byte* ctx, std::uint64_t (&w)[2]) {
    w[0] = load<std::uint32_t>(ctx + WEFT_FRAME_MXCSR) & ~std::uint32_t{0x3f};
    w[1] = load<std::uint16_t>(ctx + WEFT_FRAME_FCW);
}
#elif defined(__aarch64__)
constexpr std::size_t fpctl_words = 1;
void fp_control_now(std::uint64_t (&w)[2]) {
    asm volatile("mrs %0, fpcr" : "=r"(w[0]));
    w[1] = 0;
}
void fp_control_in(const std::byte* ctx, std::uint64_t (&w)[2]) {
    w[0] = load<std::uint64_t>(ctx + WEFT_FRAME_FPCR);
    w[1] = 0;
}
#endif

class frame_test : public weft::test::context_fixture {};

void never_entered(transfer) noexcept { __builtin_trap(); }

TEST_F(frame_test, make_leaves_the_first_frame_where_the_header_says) {
    std::uint64_t creator[2];
    fp_control_now(creator);
    for (std::size_t off = 0; off < 64; off += 8) {
        auto* top = static_cast<std::byte*>(stack_.top()) - off;
        std::memset(top - 512, 0xa5, 512);
        auto* ctx = static_cast<std::byte*>(weft::context::make(top, stack_.size - off, &never_entered));
        auto* aligned = reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(top) & ~std::uintptr_t{15});
        // The frame, then 16 zero bytes (a null return address / frame
        // record for stack walkers), then the aligned top.
        ASSERT_EQ(ctx, aligned - 16 - frame::size) << "offset " << off;
        for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(ctx[frame::size + i], std::byte{0}) << "offset " << off;
        EXPECT_EQ(load<std::uint64_t>(ctx + frame::frame_pointer), 0u) << "offset " << off;
        EXPECT_NE(load<std::uint64_t>(ctx + frame::resume_address), 0u) << "offset " << off;
        // A fresh context starts with its creator's FP control state.
        std::uint64_t in_frame[2];
        fp_control_in(ctx, in_frame);
        for (std::size_t i = 0; i < fpctl_words; ++i) EXPECT_EQ(in_frame[i], creator[i]) << "offset " << off;
    }
}

// What the worker reports each time before it suspends.
struct report {
    const void* frame_address = nullptr;
    const void* local = nullptr;
    std::uint64_t fpctl[2] = {};
    std::uint64_t sum = 0;
};

// escape() is a real call, so that the worker is not a leaf and keeps no data
// in the red zone (the gap), and `local` lives in memory.
[[gnu::noinline]] void escape(void* p) { asm volatile("" : : "r"(p) : "memory"); }

// The worker suspends in fast_jump() with values live across the switch: a
// and b wherever the compiler keeps them (not in the registers fast_jump()
// declares clobbered), `local` in its own frame.
void worker(transfer t) noexcept {
    std::fesetround(FE_TOWARDZERO);  // FP control state that differs from main's
    std::uint64_t a = 1, b = 2, local = 0x5eed;
    escape(&local);
    for (;;) {
        auto* r = static_cast<report*>(t.data);
        r->frame_address = __builtin_frame_address(0);
        r->local = &local;
        r->sum = a ^ b ^ local;
        fp_control_now(r->fpctl);
        t = weft::context::fast_jump(t.from, nullptr);
        a += b;
        b += a;
        ++local;
        escape(&local);
    }
}

TEST_F(frame_test, a_fast_jump_frame_needs_only_its_data_parts_and_no_gap) {
    const int saved_rounding = std::fegetround();
    report r;
    void* ctx = weft::context::make(stack_.top(), stack_.size, &worker);
    ctx = weft::context::jump(ctx, &r).from;  // the worker is now suspended in fast_jump()
    std::uint64_t a = 1, b = 2, local = 0x5eed;
    for (int round = 0; round < 100; ++round) {
        auto* c = static_cast<std::byte*>(ctx);
        ASSERT_TRUE(stack_.contains(c));
        ASSERT_EQ(r.sum, a ^ b ^ local) << "round " << round;
        // The slots fast_jump() stores are where the header says.
        EXPECT_EQ(load<const void*>(c + frame::frame_pointer), r.frame_address) << "round " << round;
        EXPECT_NE(load<std::uint64_t>(c + frame::resume_address), 0u) << "round " << round;
        if (!WEFT_SHARE_FP_ENV) {
            std::uint64_t in_frame[2];
            fp_control_in(c, in_frame);
            for (std::size_t i = 0; i < fpctl_words; ++i) EXPECT_EQ(in_frame[i], r.fpctl[i]) << "round " << round;
        }
        // The suspended function's own data starts above the frame and the
        // gap. (ASan may keep locals on a fake stack elsewhere.)
        if (!WEFT_ASAN) {
            EXPECT_GE(static_cast<const std::byte*>(r.local), c + frame::size + frame::gap) << "round " << round;
        }
        // Overwrite everything of the frame outside data_parts, and the gap.
        for (std::size_t i = 0; i < frame::size + frame::gap; ++i) {
            bool data = false;
            for (const frame::data_part& p : frame::data_parts) data |= i >= p.offset && i < p.offset + p.size;
            if (!data) c[i] = static_cast<std::byte>(0xa5 ^ i);
        }
        // Resume it with either switch: both load the whole frame.
        transfer t = (round % 2 == 0) ? weft::context::fast_jump(ctx, &r) : weft::context::jump(ctx, &r);
        ctx = t.from;
        a += b;
        b += a;
        ++local;
    }
    ASSERT_EQ(r.sum, a ^ b ^ local);
    std::fesetround(saved_rounding);  // with WEFT_SHARE_FP_ENV the worker's mode is ours
}

}  // namespace
