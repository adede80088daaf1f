// weft/detail/context_frame.hpp: layer L0, the switch frame that a suspended
// context leaves at its stack pointer, written once per target.
//
// Every user of the layout includes this header and nothing else states an
// offset: the switch assembly (src/context/context_<target>_elf_gas.S, through
// the WEFT_FRAME_* macros), the C++ that builds a first frame
// (src/context/context_<target>.cpp, which checks a struct against the macros
// with static_assert(offsetof(...))), the inline switch fast_jump() in
// weft/context.hpp (the macros stringified into its asm text), and the
// copy-stack save of the coroutine layer (weft::context::frame::data_parts).
//
// It is included from assembly as well as from C++: the macros are plain
// integer literals (they must stay so: assemblers and fast_jump()'s asm text
// take them as they are written), and everything else is behind
// #ifndef __ASSEMBLER__.
// Only the section of the target being compiled is defined, so the macro
// names are the same on every target where they mean the same thing
// (WEFT_FRAME_SIZE, WEFT_FRAME_GAP).
//
// The layout is the same with and without WEFT_SHARE_FP_ENV: the FP control
// slots stay, unused by the switch, so there is one version of this header.
#pragma once

#if defined(__x86_64__)

// x86-64 System V. The frame at a suspended context's stack pointer:
//
//   saved sp ->  +0x00  MXCSR (4 bytes)
//                +0x04  x87 control word (2 bytes)
//                +0x06  unused (2 bytes)
//                +0x08  r12
//                +0x10  r13
//                +0x18  r14
//                +0x20  r15
//                +0x28  rbx
//                +0x30  rbp
//                +0x38  return address (resume point)
//                +0x40  caller's frame (suspended by jump or ontop), or
//                       the gap, the caller's red zone (fast_jump())
//                +0xc0  caller's frame (suspended by fast_jump())
//
// The out-of-line jump is called, so the call pushed the return address and
// the jump stores the 0x38 bytes below it; fast_jump() is inline asm and
// stores its resume address itself, below the 128-byte red zone.

#define WEFT_FRAME_MXCSR 0x00
#define WEFT_FRAME_FCW 0x04
#define WEFT_FRAME_FPCTL_PAD 0x06
#define WEFT_FRAME_R12 0x08
#define WEFT_FRAME_R13 0x10
#define WEFT_FRAME_R14 0x18
#define WEFT_FRAME_R15 0x20
#define WEFT_FRAME_RBX 0x28
#define WEFT_FRAME_RBP 0x30
#define WEFT_FRAME_RET 0x38
#define WEFT_FRAME_SAVE_SIZE 0x38 /* bytes below the return address */
#define WEFT_FRAME_SIZE 0x40      /* whole frame, return address included */
#define WEFT_FRAME_GAP 0x80       /* fast_jump(): the red zone between frame and caller */

#elif defined(__aarch64__)

// AArch64 AAPCS64. The frame at a suspended context's stack pointer:
//
//   saved sp ->  +0x00  x29 (frame pointer)
//                +0x08  x30 (lr: the resume address)
//                +0x10  x19      +0x18  x20
//                +0x20  x21      +0x28  x22
//                +0x30  x23      +0x38  x24
//                +0x40  x25      +0x48  x26
//                +0x50  x27      +0x58  x28
//                +0x60  d8       +0x68  d9
//                +0x70  d10      +0x78  d11
//                +0x80  d12      +0x88  d13
//                +0x90  d14      +0x98  d15
//                +0xa0  FPCR (unused with WEFT_SHARE_FP_ENV)
//                +0xa8  zero, so the frame stays a multiple of 16 bytes
//                +0xb0  caller's frame (no gap: AAPCS64 on Linux has no
//                       red zone)
//
// The saved sp is 16-aligned and every stp/ldp pair starts at a multiple of
// 16 from it, so no pair access is split across cache lines.

#define WEFT_FRAME_X29 0x00
#define WEFT_FRAME_X30 0x08
#define WEFT_FRAME_X19 0x10
#define WEFT_FRAME_X20 0x18
#define WEFT_FRAME_X21 0x20
#define WEFT_FRAME_X22 0x28
#define WEFT_FRAME_X23 0x30
#define WEFT_FRAME_X24 0x38
#define WEFT_FRAME_X25 0x40
#define WEFT_FRAME_X26 0x48
#define WEFT_FRAME_X27 0x50
#define WEFT_FRAME_X28 0x58
#define WEFT_FRAME_D8 0x60
#define WEFT_FRAME_D9 0x68
#define WEFT_FRAME_D10 0x70
#define WEFT_FRAME_D11 0x78
#define WEFT_FRAME_D12 0x80
#define WEFT_FRAME_D13 0x88
#define WEFT_FRAME_D14 0x90
#define WEFT_FRAME_D15 0x98
#define WEFT_FRAME_FPCR 0xa0
#define WEFT_FRAME_PAD 0xa8
#define WEFT_FRAME_SIZE 0xb0 /* whole frame; the saved sp plus this is the caller's sp */
#define WEFT_FRAME_GAP 0     /* no red zone */

#else
#error "weft supports x86-64 System V and AArch64 AAPCS64 only"
#endif

#ifndef __ASSEMBLER__

#include <cstddef>

namespace weft::context::frame {

// size is the bytes of the switch frame at a suspended context (return
// address included on x86-64): context + size is the suspended switch's
// stack pointer once the frame is popped.
inline constexpr std::size_t size = WEFT_FRAME_SIZE;

// gap is the bytes between a fast_jump() frame and the suspended function's
// own stack pointer (x86-64: the red zone the switch skips; 0 on AArch64).
// That function's data starts at context + size + gap. The gap holds data
// only if the function is a leaf.
inline constexpr std::size_t gap = WEFT_FRAME_GAP;

#if defined(__x86_64__)
// fp_control is the offset of the FP control state (MXCSR, then the x87
// control word and 2 unused bytes), fp_control_size its bytes.
inline constexpr std::size_t fp_control = WEFT_FRAME_MXCSR;
inline constexpr std::size_t fp_control_size = WEFT_FRAME_R12 - WEFT_FRAME_MXCSR;
// frame_pointer is the offset of the saved frame pointer (rbp).
inline constexpr std::size_t frame_pointer = WEFT_FRAME_RBP;
// resume_address is the offset of the address the context resumes at.
inline constexpr std::size_t resume_address = WEFT_FRAME_RET;
#else
// fp_control is the offset of the FP control state (FPCR), fp_control_size
// its bytes.
inline constexpr std::size_t fp_control = WEFT_FRAME_FPCR;
inline constexpr std::size_t fp_control_size = WEFT_FRAME_PAD - WEFT_FRAME_FPCR;
// frame_pointer is the offset of the saved frame pointer (x29).
inline constexpr std::size_t frame_pointer = WEFT_FRAME_X29;
// resume_address is the offset of the address the context resumes at (x30).
inline constexpr std::size_t resume_address = WEFT_FRAME_X30;
#endif

// data_part is one run of bytes in the frame: [offset, offset + size).
struct data_part {
    std::size_t offset, size;
};

// data_parts are the runs of the frame that fast_jump() stores when it
// suspends, in ascending order: the FP control state, the frame pointer and
// the resume address. The other slots (the callee-saved registers) hold real
// values only in a frame of the out-of-line jump/ontop; fast_jump() loads
// them into registers it declares clobbered, so for a context suspended by
// fast_jump() only these bytes need to survive (a copy-stack save keeps just
// these). The FP control slot is listed with WEFT_SHARE_FP_ENV too, where no
// switch reads it: copying it is harmless and keeps one layout.
#if defined(__x86_64__)
inline constexpr data_part data_parts[] = {{fp_control, fp_control_size},
                                          {frame_pointer, resume_address + 8 - frame_pointer}};
#else
inline constexpr data_part data_parts[] = {{frame_pointer, resume_address + 8 - frame_pointer},
                                          {fp_control, fp_control_size}};
#endif

// The layout's own invariants. Frame and gap are multiples of 16 bytes, so
// pushing or popping them keeps the stack pointer's alignment (AArch64
// faults on a misaligned sp; make() relies on it for the entry's alignment).
// The frame pointer and resume address are adjacent 8-byte slots (one run in
// data_parts), and the runs are ascending, disjoint and inside the frame.
static_assert(size % 16 == 0 && gap % 16 == 0);
static_assert(resume_address == frame_pointer + 8 && resume_address + 8 <= size);
static_assert(fp_control + fp_control_size <= size);
static_assert([] {
    std::size_t end = 0;
    for (const data_part& p : data_parts) {
        if (p.size == 0 || p.offset < end) return false;
        end = p.offset + p.size;
    }
    return end <= size;
}());

}  // namespace weft::context::frame

#endif  // __ASSEMBLER__
