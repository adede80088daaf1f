// weft/config.hpp: version, export and feature macros shared by every layer.
#pragma once

#include "weft/version.hpp"

// WEFT_API marks declarations exported from a shared build of weft.
#if defined(WEFT_SHARED_BUILD)
#define WEFT_API __attribute__((visibility("default")))
#else
#define WEFT_API
#endif

// WEFT_NOINLINE keeps a function out of line; used with an asm barrier where a
// thread-local address must be recomputed after a stack switch.
#define WEFT_NOINLINE __attribute__((noinline))

// WEFT_HOT_INLINE forces the entry points of a switch (resume, yield,
// suspend) inline in optimised builds, where an out-of-line copy switches
// markedly slower (docs/measurements.md, "Switch entry points inline").
// Unoptimised builds keep them out of line, so that a caller's frame does
// not grow by a whole switch.
#if defined(__OPTIMIZE__)
#define WEFT_HOT_INLINE [[gnu::always_inline]]
#else
#define WEFT_HOT_INLINE
#endif

// WEFT_ARCH_X86_64 / WEFT_ARCH_AARCH64 name the context-switch target.
#if defined(__x86_64__)
#define WEFT_ARCH_X86_64 1
#elif defined(__aarch64__)
#define WEFT_ARCH_AARCH64 1
#else
#error "weft supports x86-64 System V and AArch64 AAPCS64 only"
#endif
