// weft/context.hpp: layer L0, the raw context switch.
//
// A context is the stack pointer of a suspended execution; every register the
// ABI requires a callee to preserve is saved on that stack, below the saved
// stack pointer's caller frame and never below the stack pointer itself. The
// three operations mirror Boost.Context's fcontext interface:
//
//   make(top, size, entry)   lay out a first frame so that the first jump
//                            into it calls entry(transfer).
//   jump(to, data)           suspend the caller, resume `to`; returns when
//                            somebody jumps back, with {their context, data}.
//   ontop(to, data, fn)      like jump, but run fn(transfer) on the target's
//                            stack first; fn's result is what the target's
//                            suspended jump returns. fn may throw: the
//                            exception leaves the target's suspended jump.
//
// Preserved (x86-64 System V): rbx rbp r12-r15 rsp, x87 control word, MXCSR
// control bits. Preserved (AArch64 AAPCS64): x19-x29, lr, sp, d8-d15, FPCR.
// With WEFT_SHARE_FP_ENV the FP control state is shared instead of saved.
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft/config.hpp"
#include "weft/detail/context_frame.hpp"

namespace weft::context {

// transfer is what a jump returns: `from` is the context that jumped here
// (resume it to go back), `data` the pointer it passed.
struct transfer {
    void* from;
    void* data;
};

// entry_fn is a context's first function. It must never return; it ends by
// jumping away for the last time.
using entry_fn = void (*)(transfer) noexcept;

// ontop_fn runs on the target's stack before the target resumes.
using ontop_fn = transfer (*)(transfer);

}  // namespace weft::context

extern "C" {
// Implemented per target in src/context; see weft::context for the contracts.
WEFT_API void* weft_context_make(void* stack_top, std::size_t size, weft::context::entry_fn fn) noexcept;
WEFT_API weft::context::transfer weft_context_jump(void* to, void* data);
WEFT_API weft::context::transfer weft_context_ontop(void* to, void* data, weft::context::ontop_fn fn);
}

namespace weft::context {

// make() returns a context that, on its first resumption, calls fn with the
// resumer's context and data. Requires: [stack_top - size, stack_top) is
// writable; size >= min_frame_size. The returned context lies 16-byte aligned
// just below stack_top. Never fails.
[[nodiscard]] inline void* make(void* stack_top, std::size_t size, entry_fn fn) noexcept {
    return weft_context_make(stack_top, size, fn);
}

// jump() suspends the caller and resumes `to`, passing data. Returns when
// some context jumps back: {that context, its data}. Requires: `to` came from
// make() or from a transfer's `from`, and is not running. Throws: only what an
// ontop fn run on this context throws.
inline transfer jump(void* to, void* data) { return weft_context_jump(to, data); }

// ontop() resumes `to` and calls fn({caller, data}) on top of its stack before
// it continues; the target's suspended jump returns fn's result, or propagates
// fn's exception. Requires: as for jump.
inline transfer ontop(void* to, void* data, ontop_fn fn) { return weft_context_ontop(to, data, fn); }

// fast_jump() is jump() compiled inline: the hot path of the coroutine
// layer. It is the same switch, frame for frame (a context suspended in
// fast_jump() may be resumed by jump(), fast_jump() or a non-throwing
// ontop(), and the other way round), but instead of saving every
// callee-saved register it tells the compiler they are all clobbered, so the
// compiler keeps live values wherever is cheapest and usually saves the
// callee-saved registers once in the enclosing function's prologue rather
// than at every switch (the technique of corosensei and PhotonLibOS). It
// saves only the frame pointer, the resume address and the FP control state,
// and restores the whole frame, so a context suspended by the out-of-line
// jump() gets every register back.
//
// One restriction: an ontop() fn that throws must not target a context
// suspended in fast_jump(). The unwinder would meet the resume point inside
// the caller's function with a stack pointer that the compiler's unwind
// tables do not describe (x86-64: the switch skips the 128-byte red zone).
// The coroutine layer never does it: it unwinds a coroutine by resuming it
// with a flag, and the coroutine throws forced_unwind itself after the
// switch returns.
[[gnu::always_inline]] inline transfer fast_jump(void* to, void* data) noexcept;

// fiber_jump() is fast_jump() for a closed world of contexts: it requires
// `to` to be fresh from make() or suspended by fiber_jump() (a context it
// suspends may be resumed by fiber_jump() only: its FP slot is left
// unwritten), never by the out-of-line jump() or ontop(), and then restores only
// what such a context needs (the frame pointer, the resume address and a
// fresh context's entry function), not the callee-saved registers that it
// declares clobbered anyway. It leaves the FP control state alone (neither
// saved nor restored): the coroutine layer, which switches with it, keeps
// that state per coroutine when asked to (fp_env_mode, weft/fiber.hpp) with
// fp_control_save() / fp_control_load().
[[gnu::always_inline]] inline transfer fiber_jump(void* to, void* data) noexcept;

// fp_control is the FP control state: on x86-64 MXCSR and the x87 control
// word, on AArch64 FPCR.
struct fp_control;
// fp_control_save() stores the calling thread's FP control state in `to`
// (x86-64: stmxcsr + fnstcw straight into `to`: MXCSR can only be read
// through memory, and loading back what stmxcsr just stored stalls on this
// machine, docs/context-abi.md; AArch64: mrs).
[[gnu::always_inline]] inline void fp_control_save(fp_control& to) noexcept;
// fp_control_load() makes `from` the calling thread's FP control state
// (x86-64: ldmxcsr + fldcw, the MXCSR status flags in `from` included;
// AArch64: msr, skipped when FPCR already holds it).
[[gnu::always_inline]] inline void fp_control_load(const fp_control& from) noexcept;

// fast_jump_frame is the size of the frame fast_jump() leaves at a suspended
// context, and fast_jump_gap the bytes between that frame and the
// suspended function's own stack pointer (x86-64: the red zone it skips; 0
// on AArch64). The suspended function's data starts at
// context + fast_jump_frame + fast_jump_gap; the gap holds data only if that
// function is a leaf (only a leaf may keep data in the red zone). weft's
// copy-stack coroutines skip the gap when they save a stack, because the
// coroutine layer's suspend() always contains calls. Both are other names
// for frame::size and frame::gap (weft/detail/context_frame.hpp, where the
// whole frame layout is).
inline constexpr std::size_t fast_jump_frame = frame::size;
inline constexpr std::size_t fast_jump_gap = frame::gap;
static_assert(fast_jump_frame == frame::size && fast_jump_frame == WEFT_FRAME_SIZE);
static_assert(fast_jump_gap == frame::gap && fast_jump_gap == WEFT_FRAME_GAP);

// min_frame_size is the smallest size make() accepts: the first frame plus
// room for the entry function's own frame.
inline constexpr std::size_t min_frame_size = 256;

// WEFT_CONTEXT_OFF(slot) is the frame offset WEFT_FRAME_<slot> as a string
// literal, pasted into fast_jump()'s asm text (offsets as "i" operands would
// make clang's inliner count each one as an argument of the asm call, and
// stop inlining some callers). Private to this header: #undef'd at its end.
#define WEFT_CONTEXT_STR_(x) #x
#define WEFT_CONTEXT_STR(x) WEFT_CONTEXT_STR_(x)
#define WEFT_CONTEXT_OFF(slot) WEFT_CONTEXT_STR(WEFT_FRAME_##slot)

#if defined(__x86_64__)
// x86-64 System V. Frame layout: weft/detail/context_frame.hpp (MXCSR at
// +0, x87 CW at +4, r12 r13 r14 r15 rbx rbp at +8..+0x30, resume address at
// +0x38); every offset in the asm is pasted from its WEFT_FRAME_* macro.
// The frame goes below the caller's red zone (System V lets leaf code keep
// data in the 128 bytes below rsp, and a function containing this asm may be
// a leaf), so the context is rsp - (frame::size + frame::gap) = rsp - 0xc0
// and the resume point climbs back by frame::gap = 0x80. Both resume paths
// (this one and the .S) leave rsp = context + frame::size at the resume
// point with {from, data} in rax:rdx.
#if WEFT_SHARE_FP_ENV
#define WEFT_CONTEXT_SAVE_FP ""
#define WEFT_CONTEXT_LOAD_FP ""
#else
#define WEFT_CONTEXT_SAVE_FP                                                      \
    "stmxcsr " WEFT_CONTEXT_OFF(MXCSR) "(%%rsp)\n\t" /* our FP control state */ \
    "fnstcw " WEFT_CONTEXT_OFF(FCW) "(%%rsp)\n\t"
#define WEFT_CONTEXT_LOAD_FP                                                            \
    "ldmxcsr " WEFT_CONTEXT_OFF(MXCSR) "(%%rsp)\n\t" /* the target's FP control state */ \
    "fldcw " WEFT_CONTEXT_OFF(FCW) "(%%rsp)\n\t"
#endif
// The target's callee-saved registers: real values if it was suspended by
// the .S jump, don't-cares if by fast_jump(). A fresh context needs only r12
// (the entry function, for the trampoline).
#define WEFT_CONTEXT_LOAD_ALL                         \
    "movq " WEFT_CONTEXT_OFF(R12) "(%%rsp), %%r12\n\t" \
    "movq " WEFT_CONTEXT_OFF(R13) "(%%rsp), %%r13\n\t" \
    "movq " WEFT_CONTEXT_OFF(R14) "(%%rsp), %%r14\n\t" \
    "movq " WEFT_CONTEXT_OFF(R15) "(%%rsp), %%r15\n\t" \
    "movq " WEFT_CONTEXT_OFF(RBX) "(%%rsp), %%rbx\n\t"
#define WEFT_CONTEXT_LOAD_ENTRY "movq " WEFT_CONTEXT_OFF(R12) "(%%rsp), %%r12\n\t"
// WEFT_CONTEXT_JUMP(SAVE_FP, LOAD_FP, LOAD) is the whole switch, with LOAD
// for the target's callee-saved registers other than rbp.
#define WEFT_CONTEXT_JUMP(SAVE_FP, LOAD_FP, LOAD)                                                                              \
    asm volatile(/* below the red zone, room for the frame: rsp - (size + gap) */                              \
                 "leaq -" WEFT_CONTEXT_OFF(SIZE) "-" WEFT_CONTEXT_OFF(GAP) "(%%rsp), %%rsp\n\t"                 \
                 SAVE_FP                                                                          \
                 "movq %%rbp, " WEFT_CONTEXT_OFF(RBP) "(%%rsp)\n\t" /* rbp may be the frame pointer */          \
                 "leaq 1f(%%rip), %%rcx\n\t"                        /* our resume address */                  \
                 "movq %%rcx, " WEFT_CONTEXT_OFF(RET) "(%%rsp)\n\t"                                              \
                 "movq %%rsp, %%rax\n\t" /* from = our context */                                              \
                 "movq %%rdi, %%rsp\n\t" /* the switch */                                                      \
                 "movq " WEFT_CONTEXT_OFF(RET) "(%%rsp), %%rcx\n\t"                                              \
                 LOAD_FP                                                                          \
                 LOAD                                                                                          \
                 "movq " WEFT_CONTEXT_OFF(RBP) "(%%rsp), %%rbp\n\t"                                              \
                 "leaq " WEFT_CONTEXT_OFF(SIZE) "(%%rsp), %%rsp\n\t"                                             \
                 "movq %%rsi, %%rdx\n\t" /* {rax = from, rdx = data}; rdi, rsi too, for a */                   \
                 "movq %%rax, %%rdi\n\t" /* fresh context's trampoline (as the .S does) */                     \
                 "notrack jmp *%%rcx\n"                                                                        \
                 "1:\n\t"                                                                                      \
                 "leaq " WEFT_CONTEXT_OFF(GAP) "(%%rsp), %%rsp" /* resumed: back above the red zone */          \
                 : "+D"(to), "+S"(data), "=a"(from), "=d"(d)                                                   \
                 :                                                                                             \
                 : "rbx", "rcx", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "xmm0", "xmm1", "xmm2",   \
                   "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",   \
                   "xmm14", "xmm15", WEFT_CONTEXT_AVX512_CLOBBERS "st", "st(1)", "st(2)", "st(3)", "st(4)",      \
                   "st(5)", "st(6)", "st(7)", "mm0", "mm1", "mm2", "mm3", "mm4", "mm5", "mm6", "mm7", "memory",  \
                   "cc", "fpsr")
#if defined(__AVX512F__)
#define WEFT_CONTEXT_AVX512_CLOBBERS                                                                         \
    "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", \
        "xmm28", "xmm29", "xmm30", "xmm31", "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7",
#else
#define WEFT_CONTEXT_AVX512_CLOBBERS
#endif

inline transfer fast_jump(void* to, void* data) noexcept {
    void* from;
    void* d;
    WEFT_CONTEXT_JUMP(WEFT_CONTEXT_SAVE_FP, WEFT_CONTEXT_LOAD_FP, WEFT_CONTEXT_LOAD_ALL);
    return {from, d};
}

inline transfer fiber_jump(void* to, void* data) noexcept {
    void* from;
    void* d;
    WEFT_CONTEXT_JUMP("", "", WEFT_CONTEXT_LOAD_ENTRY);
    return {from, d};
}

struct fp_control {
    std::uint32_t mxcsr = 0x1f80;    // the power-on value: round to nearest, all exceptions masked
    std::uint16_t x87_cw = 0x037f;   // likewise, 64-bit precision
    std::uint16_t unused = 0;
};

inline void fp_control_save(fp_control& to) noexcept {
    asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(to.mxcsr), "=m"(to.x87_cw));
}

inline void fp_control_load(const fp_control& from) noexcept {
    asm volatile("ldmxcsr %0\n\tfldcw %1" : : "m"(from.mxcsr), "m"(from.x87_cw) : "memory");
}
#elif defined(__aarch64__)
// AArch64 AAPCS64. Frame layout: weft/detail/context_frame.hpp (x29 x30 at
// +0, x19-x28 at +0x10, d8-d15 at +0x60, FPCR at +0xa0, 0xb0 in all); every
// offset in the asm is pasted from its WEFT_FRAME_* macro, and the ldp/stp
// pairs rely on each pair's second slot following its first (checked by the
// struct in src/context/context_aarch64_aapcs.cpp). AAPCS64 on Linux has no red
// zone (frame::gap is 0). Both resume paths return to the resume point with
// sp = context + frame::size and {from, data} in x0, x1. x18 is a temporary
// on Linux (GCC allocates it), so it is clobbered like x0-x17.
#if WEFT_SHARE_FP_ENV
#define WEFT_CONTEXT_SAVE_FP ""
#define WEFT_CONTEXT_LOAD_FP ""
#else
#define WEFT_CONTEXT_SAVE_FP \
    "mrs x9, fpcr\n\t"      \
    "str x9, [sp, #" WEFT_CONTEXT_OFF(FPCR) "]\n\t"
#define WEFT_CONTEXT_LOAD_FP                                                                  \
    "ldr x10, [sp, #" WEFT_CONTEXT_OFF(FPCR) "]\n\t" /* the target's FPCR, written if it differs */ \
    "cmp x9, x10\n\t"                                                                         \
    "b.eq 2f\n\t"                                                                             \
    "msr fpcr, x10\n"                                                                         \
    "2:\n\t"
#endif
// The target's callee-saved registers: real values if it was suspended by
// the .S jump, don't-cares if by fast_jump(). A fresh context needs only x19
// (the entry function, for the trampoline).
#define WEFT_CONTEXT_LOAD_ALL                             \
    "ldp x19, x20, [sp, #" WEFT_CONTEXT_OFF(X19) "]\n\t" \
    "ldp x21, x22, [sp, #" WEFT_CONTEXT_OFF(X21) "]\n\t" \
    "ldp x23, x24, [sp, #" WEFT_CONTEXT_OFF(X23) "]\n\t" \
    "ldp x25, x26, [sp, #" WEFT_CONTEXT_OFF(X25) "]\n\t" \
    "ldp x27, x28, [sp, #" WEFT_CONTEXT_OFF(X27) "]\n\t" \
    "ldp d8, d9, [sp, #" WEFT_CONTEXT_OFF(D8) "]\n\t"    \
    "ldp d10, d11, [sp, #" WEFT_CONTEXT_OFF(D10) "]\n\t" \
    "ldp d12, d13, [sp, #" WEFT_CONTEXT_OFF(D12) "]\n\t" \
    "ldp d14, d15, [sp, #" WEFT_CONTEXT_OFF(D14) "]\n\t"
#define WEFT_CONTEXT_LOAD_ENTRY "ldr x19, [sp, #" WEFT_CONTEXT_OFF(X19) "]\n\t"
// WEFT_CONTEXT_JUMP(SAVE_FP, LOAD_FP, LOAD) is the whole switch, with LOAD
// for the target's callee-saved registers other than x29 and x30.
#define WEFT_CONTEXT_JUMP(SAVE_FP, LOAD_FP, LOAD)                                                                                \
    asm volatile("sub sp, sp, #" WEFT_CONTEXT_OFF(SIZE) "\n\t"                                                  \
                 "adr x30, 1f\n\t" /* our resume address */                                                   \
                 "stp x29, x30, [sp, #" WEFT_CONTEXT_OFF(X29) "]\n\t" /* x29 may be the frame pointer */       \
                 SAVE_FP                                                                                        \
                 "mov x2, sp\n\t" /* from = our context */                                                    \
                 "mov sp, x0\n\t" /* the switch */                                                            \
                 LOAD_FP                                                                                        \
                 LOAD                                                                                           \
                 "ldp x29, x30, [sp, #" WEFT_CONTEXT_OFF(X29) "]\n\t"                                           \
                 "add sp, sp, #" WEFT_CONTEXT_OFF(SIZE) "\n\t"                                                  \
                 "mov x0, x2\n\t" /* {x0 = from, x1 = data} */                                                \
                 "ret\n"                                                                                        \
                 "1:"                                                                                          \
                 : "+r"(x0), "+r"(x1)                                                                          \
                 :                                                                                             \
                 : "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13", "x14", "x15",     \
                   "x16", "x17", "x18", "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28",    \
                   "x30", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", \
                   "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26",    \
                   "v27", "v28", "v29", "v30", "v31", "memory", "cc")

inline transfer fast_jump(void* to, void* data) noexcept {
    register void* x0 asm("x0") = to;
    register void* x1 asm("x1") = data;
    WEFT_CONTEXT_JUMP(WEFT_CONTEXT_SAVE_FP, WEFT_CONTEXT_LOAD_FP, WEFT_CONTEXT_LOAD_ALL);
    return {x0, x1};
}

inline transfer fiber_jump(void* to, void* data) noexcept {
    register void* x0 asm("x0") = to;
    register void* x1 asm("x1") = data;
    WEFT_CONTEXT_JUMP("", "", WEFT_CONTEXT_LOAD_ENTRY);
    return {x0, x1};
}

struct fp_control {
    std::uint64_t fpcr = 0;  // the reset value: round to nearest, no flush-to-zero, no traps
};

inline void fp_control_save(fp_control& to) noexcept {
    std::uint64_t w;
    asm volatile("mrs %0, fpcr" : "=r"(w));
    to.fpcr = w;
}

inline void fp_control_load(const fp_control& from) noexcept {
    std::uint64_t cur;
    asm volatile("mrs %0, fpcr\n\t"
                 "cmp %0, %1\n\t"
                 "b.eq 1f\n\t"
                 "msr fpcr, %1\n"
                 "1:"
                 : "=&r"(cur)
                 : "r"(from.fpcr)
                 : "cc", "memory");
}
#endif

#undef WEFT_CONTEXT_JUMP
#undef WEFT_CONTEXT_LOAD_ALL
#undef WEFT_CONTEXT_LOAD_ENTRY
#undef WEFT_CONTEXT_SAVE_FP
#undef WEFT_CONTEXT_LOAD_FP
#ifdef WEFT_CONTEXT_AVX512_CLOBBERS
#undef WEFT_CONTEXT_AVX512_CLOBBERS
#endif
#undef WEFT_CONTEXT_OFF
#undef WEFT_CONTEXT_STR
#undef WEFT_CONTEXT_STR_

}  // namespace weft::context
