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

    .text
    .globl  weft_abi_probe_call
    .hidden weft_abi_probe_call
    .type   weft_abi_probe_call, %function
    .p2align 4
weft_abi_probe_call:
    .cfi_startproc
    bti     c                                       /* landing pad for blr callers */
    sub     sp, sp, #P_FRAME                        /* room first: nothing below sp */
    .cfi_def_cfa_offset P_FRAME
    stp     x29, x30, [sp, #P_FP]                   /* the caller's state */
    stp     x19, x20, [sp, #P_X19]
    stp     x21, x22, [sp, #P_X21]
    stp     x23, x24, [sp, #P_X23]
    stp     x25, x26, [sp, #P_X25]
    stp     x27, x28, [sp, #P_X27]
    stp     d8,  d9,  [sp, #P_D8]
    stp     d10, d11, [sp, #P_D10]
    stp     d12, d13, [sp, #P_D12]
    stp     d14, d15, [sp, #P_D14]
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
    ldp     d8,  d9,  [x2, #IN_FPR+0x00]            /* d8..d15 = in->fpr[0..7], raw bits */
    ldp     d10, d11, [x2, #IN_FPR+0x10]
    ldp     d12, d13, [x2, #IN_FPR+0x20]
    ldp     d14, d15, [x2, #IN_FPR+0x30]
    ldp     x19, x20, [x2, #IN_GPR+0x00]            /* x19..x29 = in->gpr[0..10] */
    ldp     x21, x22, [x2, #IN_GPR+0x10]
    ldp     x23, x24, [x2, #IN_GPR+0x20]
    ldp     x25, x26, [x2, #IN_GPR+0x30]
    ldp     x27, x28, [x2, #IN_GPR+0x40]
    ldr     x29, [x2, #IN_GPR+0x50]

    mov     x9, sp                                  /* out->sp_before */
    str     x9, [x3, #OUT_SP_BEFORE]
    mov     x9, x0                                  /* fn(arg) */
    mov     x0, x1
    blr     x9
    mov     x10, sp                                 /* sp after fn returned ... */
    ldr     x9, [sp, #P_OUT]                        /* ... and out, reloaded into a caller-saved register */
    str     x10, [x9, #OUT_SP_AFTER]                /* out->sp_after */

    stp     x19, x20, [x9, #IN_GPR+0x00]            /* out->gpr[0..10] = x19..x29 */
    stp     x21, x22, [x9, #IN_GPR+0x10]
    stp     x23, x24, [x9, #IN_GPR+0x20]
    stp     x25, x26, [x9, #IN_GPR+0x30]
    stp     x27, x28, [x9, #IN_GPR+0x40]
    str     x29, [x9, #IN_GPR+0x50]
    stp     d8,  d9,  [x9, #IN_FPR+0x00]            /* out->fpr[0..7] = d8..d15, raw bits */
    stp     d10, d11, [x9, #IN_FPR+0x10]
    stp     d12, d13, [x9, #IN_FPR+0x20]
    stp     d14, d15, [x9, #IN_FPR+0x30]
    mrs     x10, fpcr                               /* out->fpctl[0] = FPCR */
    str     x10, [x9, #IN_FPCTL0]

    ldr     x10, [sp, #P_FPCR]                      /* the caller's FPCR back */
    msr     fpcr, x10
    ldp     x19, x20, [sp, #P_X19]                  /* the caller's registers back */
    ldp     x21, x22, [sp, #P_X21]
    ldp     x23, x24, [sp, #P_X23]
    ldp     x25, x26, [sp, #P_X25]
    ldp     x27, x28, [sp, #P_X27]
    ldp     d8,  d9,  [sp, #P_D8]
    ldp     d10, d11, [sp, #P_D10]
    ldp     d12, d13, [sp, #P_D12]
    ldp     d14, d15, [sp, #P_D14]
    ldp     x29, x30, [sp, #P_FP]
    add     sp, sp, #P_FRAME                        /* pop only after the last load */
    .cfi_def_cfa_offset 0
    ret
    .cfi_endproc
    .size   weft_abi_probe_call, .-weft_abi_probe_call

    .section .note.GNU-stack,"",%progbits          /* no executable stack */

/* GNU property note: BTI-compatible (bti c above; fn is called with blr). */
    .section .note.gnu.property,"a"
    .p2align 3
    .long   4                                       /* name size ("GNU\0") */
    .long   16                                      /* descriptor size */
    .long   5                                       /* NT_GNU_PROPERTY_TYPE_0 */
    .asciz  "GNU"
    .long   0xc0000000                              /* GNU_PROPERTY_AARCH64_FEATURE_1_AND */
    .long   4                                       /* data size */
    .long   1                                       /* GNU_PROPERTY_AARCH64_FEATURE_1_BTI */
    .long   0                                       /* pad the descriptor to 8 bytes */
