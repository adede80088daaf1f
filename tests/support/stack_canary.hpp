// stack_canary.hpp: for the tests of idle tasks giving their stack back:
// the runtime options that shrink at once, and a block of a task's frames whose every word depends on
// its own address, for the tests of idle tasks giving their stack back
// (docs/runtime.md): a stack restored at other addresses, only in part, or
// not at all (released pages read as zeros) no longer checks out.
#pragma once

#include <array>
#include <cstddef>
#include <chrono>
#include <cstdint>

#include "weft/runtime.hpp"

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

// shrinking() is runtime options that shrink a task parked 1 ms (tests
// then ask for shrinks with runtime::shrink_idle()); shrinks() counts them.
inline weft::runtime_options shrinking(unsigned workers) {
    weft::runtime_options o;
    o.workers = workers;
    o.shrink_idle_after = std::chrono::milliseconds(1);
    return o;
}
inline std::uint64_t shrinks(const weft::runtime& rt) { return rt.stats().total().shrinks; }

}  // namespace weft::test
