// weft/context.hpp: layer L0, the raw context switch.
//
// A context is the stack pointer of a suspended execution; every register the
// ABI requires a callee to preserve is saved on that stack, below the saved
// stack pointer's caller frame and never below the stack pointer itself. The
// three operations mirror Boost.Context's fcontext interface:
//
//   make(top, size, entry)   lay out a first frame so that the first jump
//                            into it calls entry(transfer).
//   jump(to, data)           suspend the caller, resume `to`; returns when
//                            somebody jumps back, with {their context, data}.
//   ontop(to, data, fn)      like jump, but run fn(transfer) on the target's
//                            stack first; fn's result is what the target's
//                            suspended jump returns. fn may throw: the
//                            exception leaves the target's suspended jump.
//
// Preserved (x86-64 System V): rbx rbp r12-r15 rsp, x87 control word, MXCSR
// control bits. Preserved (AArch64 AAPCS64): x19-x29, lr, sp, d8-d15, FPCR.
// With WEFT_SHARE_FP_ENV the FP control state is shared instead of saved.
#pragma once

#include <cstddef>

#include "weft/config.hpp"

namespace weft::context {

// transfer is what a jump returns: `from` is the context that jumped here
// (resume it to go back), `data` the pointer it passed.
struct transfer {
    void* from;
    void* data;
};

// entry_fn is a context's first function. It must never return; it ends by
// jumping away for the last time.
using entry_fn = void (*)(transfer) noexcept;

// ontop_fn runs on the target's stack before the target resumes.
using ontop_fn = transfer (*)(transfer);

}  // namespace weft::context

extern "C" {
// Implemented per target in src/arch; see weft::context for the contracts.
WEFT_API void* weft_context_make(void* stack_top, std::size_t size, weft::context::entry_fn fn) noexcept;
WEFT_API weft::context::transfer weft_context_jump(void* to, void* data);
WEFT_API weft::context::transfer weft_context_ontop(void* to, void* data, weft::context::ontop_fn fn);
}

namespace weft::context {

// make() returns a context that, on its first resumption, calls fn with the
// resumer's context and data. Requires: [stack_top - size, stack_top) is
// writable; size >= min_frame_size. The returned context lies 16-byte aligned
// just below stack_top. Never fails.
[[nodiscard]] inline void* make(void* stack_top, std::size_t size, entry_fn fn) noexcept {
    return weft_context_make(stack_top, size, fn);
}

// jump() suspends the caller and resumes `to`, passing data. Returns when
// some context jumps back: {that context, its data}. Requires: `to` came from
// make() or from a transfer's `from`, and is not running. Throws: only what an
// ontop fn run on this context throws.
inline transfer jump(void* to, void* data) { return weft_context_jump(to, data); }

// ontop() resumes `to` and calls fn({caller, data}) on top of its stack before
// it continues; the target's suspended jump returns fn's result, or propagates
// fn's exception. Requires: as for jump.
inline transfer ontop(void* to, void* data, ontop_fn fn) { return weft_context_ontop(to, data, fn); }

// min_frame_size is the smallest size make() accepts: the first frame plus
// room for the entry function's own frame.
inline constexpr std::size_t min_frame_size = 256;

}  // namespace weft::context
