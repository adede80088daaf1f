/*
 * context_aarch64_aapcs_elf_gas.S: weft's context switch for AArch64
 * AAPCS64, ELF, GNU as. Only switching lives here; context_aarch64_aapcs.cpp
 * lays out the first frame.
 *
 * Frame at a suspended context's stack pointer (the offsets, WEFT_FRAME_*,
 * are in include/weft/detail/context_frame.hpp, shared with the C++):
 *
 *   +0x00 x29    +0x08 x30 (resume address)
 *   +0x10 x19    +0x18 x20    +0x20 x21    +0x28 x22
 *   +0x30 x23    +0x38 x24    +0x40 x25    +0x48 x26
 *   +0x50 x27    +0x58 x28
 *   +0x60 d8     +0x68 d9     +0x70 d10    +0x78 d11
 *   +0x80 d12    +0x88 d13    +0x90 d14    +0x98 d15
 *   +0xa0 FPCR   +0xa8 zero   +0xb0 caller's frame
 *
 * Saved: the callee-saved state of AAPCS64: x19-x28, the frame pointer x29,
 * the link register x30 (the address the suspended jump returns to), sp
 * (implicitly, as the context handle), the low 64 bits of v8-v15 (d8-d15)
 * and FPCR (rounding mode, flush-to-zero, default NaN, trap enables).
 * Not saved, deliberately: x0-x17 and v0-v7/v16-v31 (caller-saved; the call
 * to jump already makes the compiler spill what it needs), x18 (the platform
 * register: a temporary on Linux; platforms that reserve it, e.g. for a
 * shadow call stack, are not supported), the upper 64 bits of v8-v15
 * (caller-saved by AAPCS64), NZCV, FPSR (its cumulative exception flags are
 * not preserved across calls), SVE and SME state (jump is an ordinary
 * base-PCS function: its callers already treat every z/p register bit beyond
 * d8-d15 as clobbered, and call it with streaming mode off and ZA not live),
 * and TPIDR_EL0 (the thread pointer belongs to the thread, and a context may
 * be resumed on another thread).
 *
 * FPCR is restored only when the target's saved value differs from the
 * current one: msr fpcr may synchronise the FP pipeline, while mrs fpcr is
 * cheap. FPCR has no status bits, so the whole register is compared.
 * Building with WEFT_SHARE_FP_ENV_ASM=1 drops FPCR altogether: all contexts
 * share it (the frame keeps its slot, unused, so the layout never changes).
 *
 * Stack discipline: sp is lowered before anything is stored and raised only
 * after everything is loaded, so a signal arriving mid-switch never finds
 * live data below sp. sp is 16-aligned at every instruction (AArch64 faults
 * on an sp-based access through a misaligned sp).
 *
 * Return and branch protection (BTI). jump returns to the target with a
 * register-form `ret` (ret x30, x30 = the target's saved lr): RET leaves
 * PSTATE.BTYPE at 0, so resume addresses (the instruction after a bl/blr to
 * jump, or the trampoline) need no landing pad; a `br` would need a `bti j`
 * at every call site of jump. ontop tail-calls fn with `br x17`: a BR
 * through x16/x17 has BTYPE 01, which a `bti c` pad accepts, so fn may be any
 * function compiled with -mbranch-protection=bti (this is how PLT stubs and
 * veneers branch). jump and ontop themselves may be reached by blr (BTYPE
 * 10) or through a PLT stub or veneer (BTYPE 01), so each starts with
 * `bti c`.
 * The trampoline is reached only by RET (jump's return into a fresh context,
 * or an ontop fn returning into one), never by br/blr, so it deliberately has
 * no landing pad: a pad would only make it a valid target for a stray
 * indirect call. Return addresses are not signed (no PAC): the object claims
 * BTI only in its GNU property note, not PAC and not GCS.
 */

#include "weft/detail/context_frame.hpp"
#include "elf_gas.h"

/* Symbol visibility, as for x86-64: hidden in a static library; in a shared
   libweft the switch is part of the public L0 API, so it is exported but
   protected (not interposable). The trampoline is always hidden. */
#if defined(WEFT_SHARED_BUILD)
#define WEFT_VISIBILITY .protected
#else
#define WEFT_VISIBILITY .hidden
#endif

#if WEFT_SHARE_FP_ENV_ASM
#define WEFT_SAVE_FP 0
#else
#define WEFT_SAVE_FP 1
#endif

/* Push a frame of WEFT_FRAME_SIZE bytes and save the callee-saved state of
   the running context into it. Leaves our FPCR in x9 for weft_load_frame. */
.macro weft_save_frame
    sub     sp, sp, #WEFT_FRAME_SIZE                /* make room first: nothing below sp */
    .cfi_def_cfa_offset WEFT_FRAME_SIZE
#if WEFT_SAVE_FP
    mrs     x9, fpcr                                /* our FPCR, early: stored and compared below */
#endif
    stp     x29, x30, [sp, #WEFT_FRAME_X29]         /* frame pointer and resume address */
    stp     x19, x20, [sp, #WEFT_FRAME_X19]         /* callee-saved integer registers */
    stp     x21, x22, [sp, #WEFT_FRAME_X21]
    stp     x23, x24, [sp, #WEFT_FRAME_X23]
    stp     x25, x26, [sp, #WEFT_FRAME_X25]
    stp     x27, x28, [sp, #WEFT_FRAME_X27]
    stp     d8,  d9,  [sp, #WEFT_FRAME_D8]          /* callee-saved low halves of v8-v15 */
    stp     d10, d11, [sp, #WEFT_FRAME_D10]
    stp     d12, d13, [sp, #WEFT_FRAME_D12]
    stp     d14, d15, [sp, #WEFT_FRAME_D14]
    .cfi_rel_offset x29, WEFT_FRAME_X29
    .cfi_rel_offset x30, WEFT_FRAME_X30
    .cfi_rel_offset x19, WEFT_FRAME_X19
    .cfi_rel_offset x20, WEFT_FRAME_X20
    .cfi_rel_offset x21, WEFT_FRAME_X21
    .cfi_rel_offset x22, WEFT_FRAME_X22
    .cfi_rel_offset x23, WEFT_FRAME_X23
    .cfi_rel_offset x24, WEFT_FRAME_X24
    .cfi_rel_offset x25, WEFT_FRAME_X25
    .cfi_rel_offset x26, WEFT_FRAME_X26
    .cfi_rel_offset x27, WEFT_FRAME_X27
    .cfi_rel_offset x28, WEFT_FRAME_X28
    .cfi_rel_offset d8,  WEFT_FRAME_D8
    .cfi_rel_offset d9,  WEFT_FRAME_D9
    .cfi_rel_offset d10, WEFT_FRAME_D10
    .cfi_rel_offset d11, WEFT_FRAME_D11
    .cfi_rel_offset d12, WEFT_FRAME_D12
    .cfi_rel_offset d13, WEFT_FRAME_D13
    .cfi_rel_offset d14, WEFT_FRAME_D14
    .cfi_rel_offset d15, WEFT_FRAME_D15
#if WEFT_SAVE_FP
    str     x9, [sp, #WEFT_FRAME_FPCR]              /* and FPCR */
#endif
.endm

/* Load the target's callee-saved state from its frame at sp and pop the
   frame. x30 becomes the target's resume address. FPCR is written only when
   the target's differs from ours (x9, from weft_save_frame). */
.macro weft_load_frame
#if WEFT_SAVE_FP
    ldr     x10, [sp, #WEFT_FRAME_FPCR]             /* target's FPCR ... */
    cmp     x9, x10                                 /* ... equal to ours in the common case: */
    b.eq    1f                                      /* skip the expensive write */
    msr     fpcr, x10                               /* rare path: control state differs */
1:
#endif
    ldp     x19, x20, [sp, #WEFT_FRAME_X19]         /* target's callee-saved integer registers */
    ldp     x21, x22, [sp, #WEFT_FRAME_X21]
    ldp     x23, x24, [sp, #WEFT_FRAME_X23]
    ldp     x25, x26, [sp, #WEFT_FRAME_X25]
    ldp     x27, x28, [sp, #WEFT_FRAME_X27]
    ldp     d8,  d9,  [sp, #WEFT_FRAME_D8]          /* target's d8-d15 */
    ldp     d10, d11, [sp, #WEFT_FRAME_D10]
    ldp     d12, d13, [sp, #WEFT_FRAME_D12]
    ldp     d14, d15, [sp, #WEFT_FRAME_D14]
    ldp     x29, x30, [sp, #WEFT_FRAME_X29]         /* target's frame pointer and resume address */
    add     sp, sp, #WEFT_FRAME_SIZE                /* pop the frame only after the last load */
    .cfi_def_cfa_offset 0
    .cfi_restore x29
    .cfi_restore x30
    .cfi_restore x19
    .cfi_restore x20
    .cfi_restore x21
    .cfi_restore x22
    .cfi_restore x23
    .cfi_restore x24
    .cfi_restore x25
    .cfi_restore x26
    .cfi_restore x27
    .cfi_restore x28
    .cfi_restore d8
    .cfi_restore d9
    .cfi_restore d10
    .cfi_restore d11
    .cfi_restore d12
    .cfi_restore d13
    .cfi_restore d14
    .cfi_restore d15
.endm

    .text

/* transfer weft_context_jump(void* to = x0, void* data = x1)
   returns {from = x0, data = x1}: the same registers a fresh context's
   trampoline passes on to its entry function. */
weft_function_begin weft_context_jump, WEFT_VISIBILITY
    weft_save_frame                                 /* x19-x30, d8-d15 and FPCR into our frame */
    mov     x2, sp                                  /* x2 = our context, the transfer's `from` */
    mov     sp, x0                                  /* the switch: sp = target context */
                                                    /* (same frame layout, so the CFI above still holds) */
    weft_load_frame                                 /* target's registers; sp = target's caller sp */
    mov     x0, x2                                  /* transfer {x0 = from, x1 = data (untouched)} */
    ret                                             /* ret x30: to the target's resume address */
weft_function_end weft_context_jump

/* transfer weft_context_ontop(void* to = x0, void* data = x1, ontop_fn fn = x2)
   switches like jump, then tail-calls fn({from, data}) on the target stack;
   x30 = the target's resume address is fn's return address, so fn's result
   (or exception) is what the target's suspended jump produces. */
weft_function_begin weft_context_ontop, WEFT_VISIBILITY
    weft_save_frame                                 /* as in jump */
    mov     x3, sp                                  /* x3 = our context */
    mov     sp, x0                                  /* the switch */
    weft_load_frame                                 /* target's registers; x30 = its resume address */
    mov     x0, x3                                  /* fn's argument: transfer {x0 = from, x1 = data} */
    mov     x17, x2                                 /* x17: a br through it lands on fn's `bti c` */
    br      x17                                     /* tail-call fn; it returns to the target */
weft_function_end weft_context_ontop

/* weft_context_trampoline: the resume address of a fresh context. Entered by
   jump's ret (x0:x1 = transfer) or by the return of an ontop fn (x0:x1 = its
   result): on AArch64 a transfer is passed and returned in the same
   registers, so both arrive as entry's argument. x19 holds the entry
   function and x29 is zero (both put there by make). It is the outermost
   frame: the return address is undefined. The FDE starts one instruction
   before the symbol, so that an unwinder looking up (return address - 1) for
   an ontop fn returning here still finds this FDE. */
    .p2align 4
    .cfi_startproc
    .cfi_undefined x30                              /* unwinders and debuggers stop here */
    nop                                             /* never executed: FDE cover for the address before */
    .globl  weft_context_trampoline
    .hidden weft_context_trampoline
    .type   weft_context_trampoline, %function
weft_context_trampoline:                            /* no BTI pad: reached by RET only (see above) */
    blr     x19                                     /* entry(transfer{from, data}); sp is 16-aligned */
    brk     #0x3e8                                  /* an entry function must never return */
    .cfi_endproc
    .size   weft_context_trampoline, .-weft_context_trampoline

/* The notes (elf_gas.h): no executable stack, and compatible with Branch
   Target Identification (BTI). Return-address signing (PAC) is not claimed:
   this code signs nothing. Guarded control stacks (GCS) are not claimed
   either. */
    weft_elf_notes
