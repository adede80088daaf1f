// abi_probe.hpp: per-architecture probes that prove the context switch
// preserves every callee-saved register and the FP control state.
#pragma once

#include <cstdint>

extern "C" {

// abi_regs holds the callee-saved state one probe loads and reads back.
//   x86-64: gpr[0..5] = rbx rbp r12 r13 r14 r15; fpctl[0] = MXCSR,
//           fpctl[1] = x87 control word; fpr unused.
//   AArch64: gpr[0..10] = x19..x29; fpr[0..7] = d8..d15 (bit patterns);
//           fpctl[0] = FPCR; fpctl[1] unused.
struct abi_regs {
    std::uint64_t gpr[11];
    std::uint64_t fpr[8];
    std::uint64_t fpctl[2];
    std::uint64_t sp_before;  // out only: the probe's sp just before calling fn
    std::uint64_t sp_after;   // out only: the probe's sp just after fn returned
};

// weft_abi_probe_call() saves its caller's callee-saved state, loads every
// callee-saved register and the FP control state from *in, calls fn(arg),
// stores the same registers (and sp before/after the call) into *out, restores
// the caller's state and returns. fn is an ordinary function that switches
// contexts (a resume or a yield); the probe on the other side of the switch
// loads different values.
void weft_abi_probe_call(void (*fn)(void*), void* arg, const abi_regs* in, abi_regs* out);
}
