// context_x86_64_sysv.hpp: the suspended-context frame for x86-64 System V.
// Shared by context_x86_64_sysv_elf_gas.S (as plain #defines) and by
// context_x86_64_sysv.cpp, which lays out a first frame and checks these
// offsets against a struct with static_assert.
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
//                +0x40  caller's frame
#pragma once

#define WEFT_X64_MXCSR     0x00
#define WEFT_X64_FCW       0x04
#define WEFT_X64_FP_UNUSED 0x06
#define WEFT_X64_R12       0x08
#define WEFT_X64_R13       0x10
#define WEFT_X64_R14       0x18
#define WEFT_X64_R15       0x20
#define WEFT_X64_RBX       0x28
#define WEFT_X64_RBP       0x30
#define WEFT_X64_RET       0x38
#define WEFT_X64_SAVE_SIZE 0x38  /* bytes below the return address */
#define WEFT_X64_FRAME     0x40  /* whole frame, return address included */

