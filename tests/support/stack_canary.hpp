// stack_canary.hpp: a block of a task's frames whose every word depends on
// its own address, for the tests of idle tasks giving their stack back
// (docs/runtime.md): a stack restored at other addresses, only in part, or
// not at all (released pages read as zeros) no longer checks out.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace weft::test {

// stack_canary<Words> fills Words 8-byte words (700: more than a page) on
// construction; intact() says whether they still hold what was written.
template <std::size_t Words>
struct stack_canary {
    std::array<std::uint64_t, Words> v;
    [[nodiscard]] std::uint64_t at(std::size_t i) const noexcept {
        return (reinterpret_cast<std::uintptr_t>(this) ^ 0x9e3779b97f4a7c15ull) * (i + 1);
    }
    stack_canary() noexcept {
        for (std::size_t i = 0; i < Words; ++i) v[i] = at(i);
        asm volatile("" : : "r"(this) : "memory");
    }
    [[nodiscard]] bool intact() const noexcept {
        asm volatile("" : : "r"(this) : "memory");
        for (std::size_t i = 0; i < Words; ++i)
            if (v[i] != at(i)) return false;
        return true;
    }
};

}  // namespace weft::test
