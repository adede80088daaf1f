// stack_clash_probe.cpp: big_frame_probed(), built with
// -fstack-clash-protection (tests/CMakeLists.txt; with GCC on AArch64 also
// --param=stack-clash-protection-guard-size=12, see docs/safety.md).

#include "death/stack_clash.hpp"

namespace weft_test {

// The index is opaque so that the compiler keeps the whole array (clang
// shrinks a volatile array that is only accessed at constant indices).
extern volatile std::size_t g_big_frame_index;

int big_frame_probed(int x) {
    volatile char big[big_frame_bytes];
    big[g_big_frame_index] = static_cast<char>(x);  // index 0: the lowest byte
    return big[g_big_frame_index];
}

}  // namespace weft_test
