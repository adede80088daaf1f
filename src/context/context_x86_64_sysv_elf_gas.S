/*
 * context_x86_64_sysv_elf_gas.S: weft's context switch for x86-64 System V,
 * ELF, GNU as. Only switching lives here; context_x86_64_sysv.cpp lays out
 * the first frame.
 *
 * Frame at a suspended context's stack pointer (the offsets, WEFT_FRAME_*,
 * are in include/weft/detail/context_frame.hpp, shared with the C++):
 *
 *   +0x00 MXCSR  +0x04 x87 CW  +0x06 unused
 *   +0x08 r12    +0x10 r13     +0x18 r14     +0x20 r15
 *   +0x28 rbx    +0x30 rbp     +0x38 return address
 *
 * Saved: the callee-saved registers of the System V ABI (rbx rbp r12-r15,
 * rsp implicitly as the context handle), the x87 control word and MXCSR.
 * Not saved, deliberately: caller-saved registers (the call to jump already
 * makes the compiler spill what it needs), x87/MXCSR status flags, the
 * direction flag (clear at every call by ABI rule), vector registers (all
 * caller-saved on System V).
 *
 * The FP control state is saved and restored on every switch, as
 * Boost.Context does. Restoring it only when it differs was measured slower
 * on this machine (AMD Zen 4): comparing needs the value stmxcsr/fnstcw just
 * stored, and that load waits for the store instead of being forwarded,
 * which costs more than ldmxcsr/fldcw (21.1 vs 16.9 ns per round trip of
 * two switches; 10.5 ns without FP state; bench/compare/switch_compare.cpp).
 * Building with WEFT_SHARE_FP_ENV=1 drops the FP state altogether: all
 * contexts share it.
 *
 * Stack discipline: rsp is lowered before anything is stored and raised only
 * after everything is loaded, so a signal arriving mid-switch never finds
 * live data below rsp (the red zone is not used).
 *
 * The return path is an indirect jump rather than ret, so the branch
 * predictor learns the ping-pong between contexts instead of mispredicting
 * every return-stack entry (Boost.Context does the same). The jump carries
 * notrack, so it is legal under CET indirect-branch tracking; landing pads
 * (endbr64) start every symbol that is reached indirectly. The object is
 * marked IBT-compatible only: shadow stacks are not switched.
 */

#include "weft/detail/context_frame.hpp"
#include "elf_gas.h"

/* Symbol visibility: hidden in a static library; in a shared libweft the
   switch is part of the public L0 API, so it is exported but protected
   (not interposable). */
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

/* Push a frame of WEFT_FRAME_SAVE_SIZE bytes below the return address and
   save the running context's state into it: the FP control state and the
   callee-saved integer registers. */
.macro weft_save_frame
    leaq    -WEFT_FRAME_SAVE_SIZE(%rsp), %rsp      /* make room first: nothing below rsp */
    .cfi_adjust_cfa_offset WEFT_FRAME_SAVE_SIZE
#if WEFT_SAVE_FP
    stmxcsr WEFT_FRAME_MXCSR(%rsp)                  /* FP control state: MXCSR ... */
    fnstcw  WEFT_FRAME_FCW(%rsp)                    /* ... and the x87 control word */
#endif
    movq    %r12, WEFT_FRAME_R12(%rsp)              /* callee-saved integer registers */
    movq    %r13, WEFT_FRAME_R13(%rsp)
    movq    %r14, WEFT_FRAME_R14(%rsp)
    movq    %r15, WEFT_FRAME_R15(%rsp)
    movq    %rbx, WEFT_FRAME_RBX(%rsp)
    movq    %rbp, WEFT_FRAME_RBP(%rsp)
    .cfi_rel_offset r12, WEFT_FRAME_R12
    .cfi_rel_offset r13, WEFT_FRAME_R13
    .cfi_rel_offset r14, WEFT_FRAME_R14
    .cfi_rel_offset r15, WEFT_FRAME_R15
    .cfi_rel_offset rbx, WEFT_FRAME_RBX
    .cfi_rel_offset rbp, WEFT_FRAME_RBP
.endm

/* Load the target's state from its frame at rsp, then raise rsp by `pop`
   bytes, only after the last load. */
.macro weft_load_frame pop
#if WEFT_SAVE_FP
    ldmxcsr WEFT_FRAME_MXCSR(%rsp)                  /* target's MXCSR ... */
    fldcw   WEFT_FRAME_FCW(%rsp)                    /* ... and x87 control word */
#endif
    movq    WEFT_FRAME_R12(%rsp), %r12              /* target's callee-saved registers */
    movq    WEFT_FRAME_R13(%rsp), %r13
    movq    WEFT_FRAME_R14(%rsp), %r14
    movq    WEFT_FRAME_R15(%rsp), %r15
    movq    WEFT_FRAME_RBX(%rsp), %rbx
    movq    WEFT_FRAME_RBP(%rsp), %rbp
    leaq    \pop(%rsp), %rsp
    .cfi_adjust_cfa_offset -\pop
.endm

    .text

/* transfer weft_context_jump(void* to = rdi, void* data = rsi)
   returns {from = rax, data = rdx}; also leaves rdi = from, rsi = data for a
   first entry into a fresh context's trampoline. */
weft_function_begin weft_context_jump, WEFT_VISIBILITY
    weft_save_frame                                 /* FP control state, rbx rbp r12-r15 */
    movq    %rsp, %rax                              /* rax = our context, the transfer's `from` */
    movq    %rdi, %rsp                              /* the switch: rsp = target context */
                                                    /* (the target's frame has the same layout, so the CFI above still holds) */
    movq    WEFT_FRAME_RET(%rsp), %rcx              /* fetch the resume address early for the predictor */
    weft_load_frame WEFT_FRAME_SIZE                 /* then drop the whole frame, return address included */

    movq    %rsi, %rdx                              /* transfer.data (return pair rax:rdx) */
    movq    %rax, %rdi                              /* first entry: trampoline arguments rdi, rsi */
    notrack jmp *%rcx                               /* predicted like an indirect jump, not a return */
weft_function_end weft_context_jump

/* transfer weft_context_ontop(void* to = rdi, void* data = rsi, ontop_fn fn = rdx)
   switches like jump, then tail-calls fn({from, data}) on the target stack;
   the target's resume address is fn's return address, so fn's result (or
   exception) is what the target's suspended jump produces. */
weft_function_begin weft_context_ontop, WEFT_VISIBILITY
    weft_save_frame                                 /* as in jump */
    movq    %rdx, %r10                              /* keep fn: rdx becomes transfer.data */
    movq    %rsp, %rax                              /* rax = our context */
    movq    %rdi, %rsp                              /* the switch */
    weft_load_frame WEFT_FRAME_SAVE_SIZE            /* rsp -> target's resume address, */
                                                    /* which stays as fn's return address */
    movq    %rsi, %rdx                              /* transfer {rax, rdx} for a fresh trampoline */
    movq    %rax, %rdi                              /* fn's argument: transfer {rdi = from, */
                                                    /*                          rsi = data} */
    notrack jmp *%r10                               /* tail-call fn; it returns to the target */
weft_function_end weft_context_ontop

/* weft_context_trampoline: the resume address of a fresh context. Entered by
   jump's indirect jump (rdi = from, rsi = data, rax:rdx the same) or by the
   return of an ontop fn (rax:rdx = its result), so the transfer is taken
   from rax:rdx. r12 holds the entry function (put there by make). It is the
   outermost frame: the return address is undefined and rbp is zero. */
    .globl  weft_context_trampoline
    .hidden weft_context_trampoline
    .type   weft_context_trampoline, @function
    .p2align 4
    .cfi_startproc
    .cfi_undefined rip                              /* unwinders and debuggers stop here */
    nop                                             /* an ontop fn run on a fresh context returns to the */
                                                    /* trampoline; unwinders look up return address - 1, */
                                                    /* which must fall inside this FDE */
weft_context_trampoline:
    endbr64
    movq    %rax, %rdi                              /* entry(transfer{from, data}) */
    movq    %rdx, %rsi
    callq   *%r12                                   /* rsp is 16-aligned here, as at any call */
    ud2                                             /* an entry function must never return */
    .cfi_endproc
    .size   weft_context_trampoline, .-weft_context_trampoline

/* The notes (elf_gas.h): no executable stack, and compatible with CET
   indirect-branch tracking (IBT): every symbol reached indirectly starts with
   endbr64. Shadow stacks (SHSTK) are not claimed. */
    weft_elf_notes
