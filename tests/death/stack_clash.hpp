// stack_clash.hpp: one function with a 96 KiB frame, compiled twice: with
// stack-clash probing (stack_clash_probe.cpp) and without it
// (stack_clash_noprobe.cpp). tests/CMakeLists.txt sets the flags per file.
#pragma once

#include <cstddef>

namespace weft_test {

// big_frame_bytes is the size of the array in each function's frame: larger
// than the 64 KiB stacks the tests run it on.
inline constexpr std::size_t big_frame_bytes = 96 * 1024;

// big_frame_probed() writes x at the lowest byte of a 96 KiB local array and
// returns it. Built with -fstack-clash-protection: the prologue touches every
// page (every 4 KiB) on its way down, so the first page below the stack
// faults and nothing beneath it is touched.
int big_frame_probed(int x);

// big_frame_unprobed() is the same function built with
// -fno-stack-clash-protection: the prologue moves the stack pointer down
// 96 KiB in one step and the first write lands wherever that is.
int big_frame_unprobed(int x);

}  // namespace weft_test
