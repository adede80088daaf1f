/*
 * abi_probe_aarch64.S: weft_abi_probe_call for AArch64 AAPCS64, ELF, GNU as.
 * See abi_probe.hpp for the contract.
 *
 * void weft_abi_probe_call(void (*fn)(void*) = x0, void* arg = x1,
 *                          const abi_regs* in = x2, abi_regs* out = x3)
 *
 * The probe's own frame (sp 16-aligned throughout):
 *
 *   +0x00 x29    +0x08 x30
 *   +0x10 x19 .. +0x58 x28      the caller's callee-saved integer registers
 *   +0x60 d8  .. +0x98 d15      the caller's d8-d15
 *   +0xa0 FPCR                  the caller's FPCR
 *   +0xa8 out                   kept here: every callee-saved register is
 *                               under test while fn runs, so none may hold it
 *   +0xb0 caller's frame
 *
 * Loaded from *in and read back into *out: x19-x29, d8-d15 (raw 64-bit
 * patterns), FPCR. x30 is not probed: it is the probe's own return address
 * into the caller, saved and restored like any prologue does. The unused
 * fpctl[1] of *out is left untouched.
 */

#include "elf_gas.h"

/* abi_regs offsets (abi_probe.hpp) */
#define IN_GPR       0x00   /* gpr[0..10] = x19..x29 */
#define IN_FPR       0x58   /* fpr[0..7]  = d8..d15 */
#define IN_FPCTL0    0x98   /* fpctl[0]   = FPCR */
#define OUT_SP_BEFORE 0xa8
#define OUT_SP_AFTER  0xb0

/* the probe's frame */
#define P_FP    0x00
#define P_X19   0x10
#define P_X21   0x20
#define P_X23   0x30
#define P_X25   0x40
#define P_X27   0x50
#define P_D8    0x60
#define P_D10   0x70
#define P_D12   0x80
#define P_D14   0x90
#define P_FPCR  0xa0
#define P_OUT   0xa8
#define P_FRAME 0xb0

/* op (stp or ldp) x19-x28 as five pairs at [base, #at], [base, #at+0x10], ... */
.macro pairs_x19_x28 op, base, at
    \op     x19, x20, [\base, #\at+0x00]
    \op     x21, x22, [\base, #\at+0x10]
    \op     x23, x24, [\base, #\at+0x20]
    \op     x25, x26, [\base, #\at+0x30]
    \op     x27, x28, [\base, #\at+0x40]
.endm

/* op (stp or ldp) d8-d15 as four pairs at [base, #at], [base, #at+0x10], ... */
.macro pairs_d8_d15 op, base, at
    \op     d8,  d9,  [\base, #\at+0x00]
    \op     d10, d11, [\base, #\at+0x10]
    \op     d12, d13, [\base, #\at+0x20]
    \op     d14, d15, [\base, #\at+0x30]
.endm

    .text
weft_function_begin weft_abi_probe_call, .hidden
    sub     sp, sp, #P_FRAME                        /* room first: nothing below sp */
    .cfi_def_cfa_offset P_FRAME
    stp     x29, x30, [sp, #P_FP]                   /* the caller's state */
    pairs_x19_x28 stp, sp, P_X19
    pairs_d8_d15  stp, sp, P_D8
    .cfi_rel_offset x29, P_FP
    .cfi_rel_offset x30, P_FP+8
    .cfi_rel_offset x19, P_X19
    .cfi_rel_offset x20, P_X19+8
    .cfi_rel_offset x21, P_X21
    .cfi_rel_offset x22, P_X21+8
    .cfi_rel_offset x23, P_X23
    .cfi_rel_offset x24, P_X23+8
    .cfi_rel_offset x25, P_X25
    .cfi_rel_offset x26, P_X25+8
    .cfi_rel_offset x27, P_X27
    .cfi_rel_offset x28, P_X27+8
    .cfi_rel_offset d8,  P_D8
    .cfi_rel_offset d9,  P_D8+8
    .cfi_rel_offset d10, P_D10
    .cfi_rel_offset d11, P_D10+8
    .cfi_rel_offset d12, P_D12
    .cfi_rel_offset d13, P_D12+8
    .cfi_rel_offset d14, P_D14
    .cfi_rel_offset d15, P_D14+8
    mrs     x9, fpcr                                /* the caller's FPCR */
    str     x9, [sp, #P_FPCR]
    str     x3, [sp, #P_OUT]                        /* out survives fn on our stack */

    ldr     x9, [x2, #IN_FPCTL0]                    /* FPCR = in->fpctl[0] */
    msr     fpcr, x9
    pairs_d8_d15  ldp, x2, IN_FPR                   /* d8..d15 = in->fpr[0..7], raw bits */
    pairs_x19_x28 ldp, x2, IN_GPR                   /* x19..x29 = in->gpr[0..10] */
    ldr     x29, [x2, #IN_GPR+0x50]

    mov     x9, sp                                  /* out->sp_before */
    str     x9, [x3, #OUT_SP_BEFORE]
    mov     x9, x0                                  /* fn(arg) */
    mov     x0, x1
    blr     x9
    mov     x10, sp                                 /* sp after fn returned ... */
    ldr     x9, [sp, #P_OUT]                        /* ... and out, reloaded into a caller-saved register */
    str     x10, [x9, #OUT_SP_AFTER]                /* out->sp_after */

    pairs_x19_x28 stp, x9, IN_GPR                   /* out->gpr[0..10] = x19..x29 */
    str     x29, [x9, #IN_GPR+0x50]
    pairs_d8_d15  stp, x9, IN_FPR                   /* out->fpr[0..7] = d8..d15, raw bits */
    mrs     x10, fpcr                               /* out->fpctl[0] = FPCR */
    str     x10, [x9, #IN_FPCTL0]

    ldr     x10, [sp, #P_FPCR]                      /* the caller's FPCR back */
    msr     fpcr, x10
    pairs_x19_x28 ldp, sp, P_X19                    /* the caller's registers back */
    pairs_d8_d15  ldp, sp, P_D8
    ldp     x29, x30, [sp, #P_FP]
    add     sp, sp, #P_FRAME                        /* pop only after the last load */
    .cfi_def_cfa_offset 0
    ret
weft_function_end weft_abi_probe_call

/* The notes (elf_gas.h): no executable stack, and BTI-compatible (bti c at
   the entry; fn is called with blr). */
    weft_elf_notes
