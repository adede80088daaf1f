/*
 * elf_gas.h: what weft's assembly files for ELF and GNU as share: the
 * context switch (src/context/context_<target>_elf_gas.S) and the ABI probe
 * (tests/abi/abi_probe_<family>.S). Included through the C preprocessor
 * (.S files are preprocessed), for x86-64 System V and AArch64 AAPCS64;
 * GNU as and clang's integrated assembler both accept it.
 *
 *   weft_function_begin name, visibility
 *   weft_function_end   name
 *       open and close a function that may be reached by an indirect call
 *       (blr, call *, a PLT stub or a veneer): a global STT_FUNC symbol with
 *       the given visibility (.hidden or .protected), 16-byte aligned, its
 *       CFI started, and its first instruction the landing pad that the
 *       property note below promises (endbr64 for CET indirect-branch
 *       tracking, bti c for AArch64 Branch Target Identification).
 *       A symbol reached otherwise (the context trampoline) is written out
 *       by hand.
 *
 *   weft_elf_notes
 *       the object's notes, written once at the end of each file:
 *       .note.GNU-stack (the object needs no executable stack) and a GNU
 *       property note claiming landing pads only. x86-64: IBT
 *       (GNU_PROPERTY_X86_FEATURE_1_IBT); shadow stacks (SHSTK) are not
 *       claimed. AArch64: BTI (GNU_PROPERTY_AARCH64_FEATURE_1_BTI);
 *       return-address signing (PAC) and guarded control stacks (GCS) are
 *       not claimed. The linker keeps a feature in the output only when every
 *       input object claims it, so an object without the note would drop IBT
 *       or BTI from any binary that links it.
 */
#ifndef WEFT_ARCH_ELF_GAS_H
#define WEFT_ARCH_ELF_GAS_H

#ifndef __ASSEMBLER__
#error "elf_gas.h is for assembly (.S) files only"
#endif

#if defined(__x86_64__)
#define WEFT_LANDING_PAD endbr64
#define WEFT_GNU_PROPERTY_FEATURE_1_AND 0xc0000002  /* GNU_PROPERTY_X86_FEATURE_1_AND */
#define WEFT_GNU_PROPERTY_FEATURE_1_PADS 1          /* GNU_PROPERTY_X86_FEATURE_1_IBT */
#elif defined(__aarch64__)
#define WEFT_LANDING_PAD bti c
#define WEFT_GNU_PROPERTY_FEATURE_1_AND 0xc0000000  /* GNU_PROPERTY_AARCH64_FEATURE_1_AND */
#define WEFT_GNU_PROPERTY_FEATURE_1_PADS 1          /* GNU_PROPERTY_AARCH64_FEATURE_1_BTI */
#else
#error "weft supports x86-64 System V and AArch64 AAPCS64 only"
#endif

.macro weft_function_begin name, visibility
    .globl  \name
    \visibility \name
    .type   \name, %function
    .p2align 4
\name:
    .cfi_startproc
    WEFT_LANDING_PAD                                /* landing pad for indirect callers */
.endm

.macro weft_function_end name
    .cfi_endproc
    .size   \name, .-\name
.endm

.macro weft_elf_notes
    .pushsection .note.GNU-stack,"",%progbits      /* no executable stack */
    .popsection

    .pushsection .note.gnu.property,"a"
    .p2align 3
    .long   4                                       /* name size ("GNU\0") */
    .long   16                                      /* descriptor size */
    .long   5                                       /* NT_GNU_PROPERTY_TYPE_0 */
    .asciz  "GNU"
    .long   WEFT_GNU_PROPERTY_FEATURE_1_AND
    .long   4                                       /* data size */
    .long   WEFT_GNU_PROPERTY_FEATURE_1_PADS
    .long   0                                       /* pad the descriptor to 8 bytes */
    .popsection
.endm

#endif /* WEFT_ARCH_ELF_GAS_H */
