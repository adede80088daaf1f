// context_aarch64_aapcs.cpp: the first frame of a fresh AArch64 context.
// The frame is laid out here in C++, so that the assembly only switches.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "weft/context.hpp"
#include "weft/detail/context_frame.hpp"

extern "C" void weft_context_trampoline();

namespace {

// frame mirrors the AArch64 section of weft/detail/context_frame.hpp; the
// asserts keep the two in step, the C++ names of the layout included.
struct frame {
    std::uint64_t x29, x30;
    std::uint64_t x19, x20, x21, x22, x23, x24, x25, x26, x27, x28;
    std::uint64_t d8, d9, d10, d11, d12, d13, d14, d15;
    std::uint64_t fpcr;
    std::uint64_t pad;
};
static_assert(offsetof(frame, x29) == WEFT_FRAME_X29);
static_assert(offsetof(frame, x30) == WEFT_FRAME_X30);
static_assert(offsetof(frame, x19) == WEFT_FRAME_X19);
static_assert(offsetof(frame, x20) == WEFT_FRAME_X20);
static_assert(offsetof(frame, x21) == WEFT_FRAME_X21);
static_assert(offsetof(frame, x22) == WEFT_FRAME_X22);
static_assert(offsetof(frame, x23) == WEFT_FRAME_X23);
static_assert(offsetof(frame, x24) == WEFT_FRAME_X24);
static_assert(offsetof(frame, x25) == WEFT_FRAME_X25);
static_assert(offsetof(frame, x26) == WEFT_FRAME_X26);
static_assert(offsetof(frame, x27) == WEFT_FRAME_X27);
static_assert(offsetof(frame, x28) == WEFT_FRAME_X28);
static_assert(offsetof(frame, d8) == WEFT_FRAME_D8);
static_assert(offsetof(frame, d9) == WEFT_FRAME_D9);
static_assert(offsetof(frame, d10) == WEFT_FRAME_D10);
static_assert(offsetof(frame, d11) == WEFT_FRAME_D11);
static_assert(offsetof(frame, d12) == WEFT_FRAME_D12);
static_assert(offsetof(frame, d13) == WEFT_FRAME_D13);
static_assert(offsetof(frame, d14) == WEFT_FRAME_D14);
static_assert(offsetof(frame, d15) == WEFT_FRAME_D15);
static_assert(offsetof(frame, fpcr) == WEFT_FRAME_FPCR);
static_assert(offsetof(frame, pad) == WEFT_FRAME_PAD);
static_assert(sizeof(frame) == WEFT_FRAME_SIZE);
namespace layout = weft::context::frame;
static_assert(layout::size == sizeof(frame));
static_assert(layout::gap == 0);
static_assert(layout::fp_control == offsetof(frame, fpcr));
static_assert(layout::fp_control_size == sizeof(frame::fpcr));
static_assert(layout::frame_pointer == offsetof(frame, x29));
static_assert(layout::resume_address == offsetof(frame, x30));
static_assert(std::size(layout::data_parts) == 2);
static_assert(layout::data_parts[0].offset == offsetof(frame, x29));
static_assert(layout::data_parts[0].size == sizeof(frame::x29) + sizeof(frame::x30));
static_assert(layout::data_parts[1].offset == offsetof(frame, fpcr));
static_assert(layout::data_parts[1].size == sizeof(frame::fpcr));
// The context handle is the frame's address and the trampoline runs at its
// end, so both are 16-aligned only if the frame size is.
static_assert(sizeof(frame) % 16 == 0);

}  // namespace

extern "C" void* weft_context_make(void* stack_top, std::size_t size, weft::context::entry_fn fn) noexcept {
    (void)size;  // the frame is fixed-size; callers guarantee size >= min_frame_size
    // The trampoline starts with sp = frame + sizeof(frame) and calls the
    // entry from there, and AArch64 needs sp 16-aligned at every access, so
    // the frame hangs from a 16-aligned address. The 16 bytes above it stay
    // zero: a null frame record {fp, lr} for anything that walks past the
    // outermost frame.
    auto top = reinterpret_cast<std::uintptr_t>(stack_top) & ~std::uintptr_t{15};
    auto* f = reinterpret_cast<frame*>(top - 16 - sizeof(frame));
    std::memset(f, 0, sizeof(frame) + 16);
    // A fresh context starts with the FP control state of its creator, as a
    // new thread inherits it. Harmless when the FP state is shared: the
    // switch then never reads the slot.
    std::uint64_t fpcr;
    asm volatile("mrs %0, fpcr" : "=r"(fpcr));
    f->fpcr = fpcr;
    f->x19 = reinterpret_cast<std::uint64_t>(fn);
    f->x29 = 0;  // outermost frame for frame-pointer walkers
    f->x30 = reinterpret_cast<std::uint64_t>(&weft_context_trampoline);
    return f;
}
