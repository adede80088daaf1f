// guard_page.hpp: the death-test body that checks a stack's guard page.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "weft/stack.hpp"

namespace weft::test {

// write_below() writes the first byte of s, which must work, then the byte
// below it, in s's guard page, which must kill the process. If it lives,
// write_below() says so and exits with status 0, which fails the death test
// that runs it.
[[noreturn]] inline void write_below(const weft::stack_view& s) {
    static_cast<volatile unsigned char*>(s.base)[0] = 1;   // fine
    static_cast<volatile unsigned char*>(s.base)[-1] = 1;  // the guard
    std::fprintf(stderr, "guard page was writable\n");
    std::exit(0);
}

}  // namespace weft::test
