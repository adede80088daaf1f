// example_support.hpp: the one helper the numbered examples share, so that
// each example shows only the weft API it teaches.
//
// check(ok, what) prints "  FAILED: what" when ok is false and counts it in
// `failures`; each example's main() ends by printing its verdict and
// returning non-zero if anything failed, since CTest runs every example as a
// test (examples/CMakeLists.txt).
#pragma once

#include <cstdio>

inline int failures = 0;

inline void check(bool ok, const char* what) {
    if (!ok) {
        std::printf("  FAILED: %s\n", what);
        ++failures;
    }
}
