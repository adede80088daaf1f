// stack_clash_noprobe.cpp: big_frame_unprobed(), built with
// -fno-stack-clash-protection (tests/CMakeLists.txt) to show what a frame
// larger than the guard does without probing.

#include "death/stack_clash.hpp"

namespace weft_test {

volatile std::size_t g_big_frame_index = 0;

int big_frame_unprobed(int x) {
    volatile char big[big_frame_bytes];
    big[g_big_frame_index] = static_cast<char>(x);  // index 0: the lowest byte
    return big[g_big_frame_index];
}

}  // namespace weft_test
