/*
 * abi_probe_x86_64.S: weft_abi_probe_call for x86-64 System V, ELF, GNU as.
 * See abi_probe.hpp for the contract.
 *
 * void weft_abi_probe_call(void (*fn)(void*) = rdi, void* arg = rsi,
 *                          const abi_regs* in = rdx, abi_regs* out = rcx)
 *
 * The probe's own frame (offsets from rsp while fn runs):
 *
 *   +0x00 out                   kept here: every callee-saved register is
 *                               under test while fn runs, so none may hold it
 *   +0x08 MXCSR  +0x0c x87 CW   the caller's FP control state
 *   +0x10 unused (alignment)
 *   +0x18 r15  +0x20 r14  +0x28 r13  +0x30 r12  +0x38 rbx  +0x40 rbp
 *                               the caller's registers (pushed)
 *   +0x48 return address
 *
 * Loaded from *in and read back into *out: rbx rbp r12-r15, MXCSR
 * (fpctl[0], 32 bits, zero-extended on the way out) and the x87 control word
 * (fpctl[1], 16 bits, zero-extended). MXCSR comes back whole: its status
 * flags (bits 0-5) are not preserved state, so compare it under a mask.
 * rsp is 16-aligned at the call to fn. The unused fpr[] of *out is left
 * untouched.
 */

#include "elf_gas.h"

/* abi_regs offsets (abi_probe.hpp) */
#define R_RBX   0x00   /* gpr[0] */
#define R_RBP   0x08   /* gpr[1] */
#define R_R12   0x10   /* gpr[2] */
#define R_R13   0x18   /* gpr[3] */
#define R_R14   0x20   /* gpr[4] */
#define R_R15   0x28   /* gpr[5] */
#define R_MXCSR 0x98   /* fpctl[0] */
#define R_FCW   0xa0   /* fpctl[1] */
#define R_SP_BEFORE 0xa8
#define R_SP_AFTER  0xb0

/* the probe's frame below the six pushes */
#define P_OUT   0x00
#define P_MXCSR 0x08
#define P_FCW   0x0c
#define P_SIZE  0x18   /* 8 (return address) + 48 (pushes) + 24 = 80: rsp 16-aligned */

/* push / pop one of the caller's registers, with its CFI */
.macro push_cfi reg
    pushq   %\reg
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset \reg, 0
.endm

.macro pop_cfi reg
    popq    %\reg
    .cfi_adjust_cfa_offset -8
    .cfi_restore \reg
.endm

    .text
weft_function_begin weft_abi_probe_call, .hidden
    push_cfi rbp                                    /* the caller's callee-saved registers */
    push_cfi rbx
    push_cfi r12
    push_cfi r13
    push_cfi r14
    push_cfi r15
    subq    $P_SIZE, %rsp                           /* room first: nothing below rsp */
    .cfi_adjust_cfa_offset P_SIZE
    movq    %rcx, P_OUT(%rsp)                       /* out survives fn on our stack */
    stmxcsr P_MXCSR(%rsp)                           /* the caller's FP control state */
    fnstcw  P_FCW(%rsp)

    ldmxcsr R_MXCSR(%rdx)                           /* MXCSR = in->fpctl[0] (low 32 bits) */
    fldcw   R_FCW(%rdx)                             /* x87 CW = in->fpctl[1] (low 16 bits) */
    movq    R_RBX(%rdx), %rbx                       /* rbx rbp r12-r15 = in->gpr[0..5] */
    movq    R_RBP(%rdx), %rbp
    movq    R_R12(%rdx), %r12
    movq    R_R13(%rdx), %r13
    movq    R_R14(%rdx), %r14
    movq    R_R15(%rdx), %r15

    movq    %rsp, R_SP_BEFORE(%rcx)                 /* out->sp_before */
    movq    %rdi, %rax                              /* fn(arg) */
    movq    %rsi, %rdi
    callq   *%rax                                   /* rsp % 16 == 0 here */
    movq    P_OUT(%rsp), %rcx                       /* out, reloaded into a caller-saved register */
    movq    %rsp, R_SP_AFTER(%rcx)                  /* out->sp_after */

    movq    %rbx, R_RBX(%rcx)                       /* out->gpr[0..5] */
    movq    %rbp, R_RBP(%rcx)
    movq    %r12, R_R12(%rcx)
    movq    %r13, R_R13(%rcx)
    movq    %r14, R_R14(%rcx)
    movq    %r15, R_R15(%rcx)
    movq    $0, R_MXCSR(%rcx)                       /* out->fpctl[0] = MXCSR, zero-extended */
    stmxcsr R_MXCSR(%rcx)
    movq    $0, R_FCW(%rcx)                         /* out->fpctl[1] = x87 CW, zero-extended */
    fnstcw  R_FCW(%rcx)

    ldmxcsr P_MXCSR(%rsp)                           /* the caller's FP control state back */
    fldcw   P_FCW(%rsp)
    addq    $P_SIZE, %rsp                           /* the caller's registers back */
    .cfi_adjust_cfa_offset -P_SIZE
    pop_cfi r15
    pop_cfi r14
    pop_cfi r13
    pop_cfi r12
    pop_cfi rbx
    pop_cfi rbp
    ret
weft_function_end weft_abi_probe_call

/* The notes (elf_gas.h): no executable stack, and IBT-compatible (endbr64
   at the entry), like the context code, so linking the probe does not drop
   IBT from a test binary. */
    weft_elf_notes
