// context_x86_64_sysv.cpp: the first frame of a fresh x86-64 context.
// The frame is laid out here in C++, so that the assembly only switches.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "weft/context.hpp"
#include "weft/detail/context_frame.hpp"

extern "C" void weft_context_trampoline();

namespace {

// frame mirrors the x86-64 section of weft/detail/context_frame.hpp; the
// asserts keep the two in step, the C++ names of the layout included.
struct frame {
    std::uint32_t mxcsr;
    std::uint16_t fcw;
    std::uint16_t pad;
    std::uint64_t r12, r13, r14, r15, rbx, rbp;
    std::uint64_t ret;
};
static_assert(offsetof(frame, mxcsr) == WEFT_FRAME_MXCSR);
static_assert(offsetof(frame, fcw) == WEFT_FRAME_FCW);
static_assert(offsetof(frame, pad) == WEFT_FRAME_FPCTL_PAD);
static_assert(offsetof(frame, r12) == WEFT_FRAME_R12);
static_assert(offsetof(frame, r13) == WEFT_FRAME_R13);
static_assert(offsetof(frame, r14) == WEFT_FRAME_R14);
static_assert(offsetof(frame, r15) == WEFT_FRAME_R15);
static_assert(offsetof(frame, rbx) == WEFT_FRAME_RBX);
static_assert(offsetof(frame, rbp) == WEFT_FRAME_RBP);
static_assert(offsetof(frame, ret) == WEFT_FRAME_RET);
static_assert(sizeof(frame) == WEFT_FRAME_SIZE);
static_assert(sizeof(frame) == WEFT_FRAME_SAVE_SIZE + sizeof(frame::ret));
namespace layout = weft::context::frame;
static_assert(layout::size == sizeof(frame));
static_assert(layout::gap == 128);  // the System V red zone, which fast_jump() skips
static_assert(layout::fp_control == offsetof(frame, mxcsr));
static_assert(layout::fp_control_size == offsetof(frame, r12) - offsetof(frame, mxcsr));
static_assert(layout::frame_pointer == offsetof(frame, rbp));
static_assert(layout::resume_address == offsetof(frame, ret));
static_assert(std::size(layout::data_parts) == 2);
static_assert(layout::data_parts[0].offset == offsetof(frame, mxcsr));
static_assert(layout::data_parts[0].size == sizeof(frame::mxcsr) + sizeof(frame::fcw) + sizeof(frame::pad));
static_assert(layout::data_parts[1].offset == offsetof(frame, rbp));
static_assert(layout::data_parts[1].size == sizeof(frame::rbp) + sizeof(frame::ret));

}  // namespace

extern "C" void* weft_context_make(void* stack_top, std::size_t size, weft::context::entry_fn fn) noexcept {
    (void)size;  // the frame is fixed-size; callers guarantee size >= min_frame_size
    // The trampoline starts with rsp = frame + 0x40 and calls the entry, so
    // frame + 0x40 must be 16-aligned for the entry to see the ABI's
    // rsp % 16 == 8. 16 bytes above it stay zero: a null return address for
    // anything that walks past the outermost frame.
    auto top = reinterpret_cast<std::uintptr_t>(stack_top) & ~std::uintptr_t{15};
    auto* f = reinterpret_cast<frame*>(top - 16 - sizeof(frame));
    std::memset(f, 0, sizeof(frame) + 16);
    // A fresh context starts with the FP control state of its creator, as a
    // new thread inherits it.
    std::uint32_t mxcsr;
    std::uint16_t fcw;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fcw));
    f->mxcsr = mxcsr;
    f->fcw = fcw;
    f->r12 = reinterpret_cast<std::uint64_t>(fn);
    f->rbp = 0;  // outermost frame for frame-pointer walkers
    f->ret = reinterpret_cast<std::uint64_t>(&weft_context_trampoline);
    return f;
}
