// context_aarch64_aapcs.hpp: the suspended-context frame for AArch64 AAPCS64.
// Shared by context_aarch64_aapcs_elf_gas.S (as plain #defines) and by
// context_aarch64_aapcs.cpp, which lays out a first frame and checks these
// offsets against a struct with static_assert.
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
//                +0xb0  caller's frame
//
// The saved sp is 16-aligned and every stp/ldp pair starts at a multiple of
// 16 from it, so no pair access is split across cache lines.
#pragma once

#define WEFT_A64_FP    0x00
#define WEFT_A64_LR    0x08
#define WEFT_A64_X19   0x10
#define WEFT_A64_X20   0x18
#define WEFT_A64_X21   0x20
#define WEFT_A64_X22   0x28
#define WEFT_A64_X23   0x30
#define WEFT_A64_X24   0x38
#define WEFT_A64_X25   0x40
#define WEFT_A64_X26   0x48
#define WEFT_A64_X27   0x50
#define WEFT_A64_X28   0x58
#define WEFT_A64_D8    0x60
#define WEFT_A64_D9    0x68
#define WEFT_A64_D10   0x70
#define WEFT_A64_D11   0x78
#define WEFT_A64_D12   0x80
#define WEFT_A64_D13   0x88
#define WEFT_A64_D14   0x90
#define WEFT_A64_D15   0x98
#define WEFT_A64_FPCR  0xa0
#define WEFT_A64_PAD   0xa8
#define WEFT_A64_FRAME 0xb0  /* whole frame; the saved sp plus this is the caller's sp */
