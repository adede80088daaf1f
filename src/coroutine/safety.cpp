// safety.cpp: stack painting and high-water marks, and per-thread set-up
// for diagnosing stack overflows.

#include <cstring>

#include "weft/coroutine.hpp"

namespace weft::detail {

namespace {
constexpr unsigned char paint_byte = 0xA5;
}

void paint(control_block* cb, std::byte* limit) noexcept {
    auto* base = static_cast<std::byte*>(cb->stack.base);
    std::memset(base, paint_byte, static_cast<std::size_t>(limit - base));
    cb->painted = true;
}

std::size_t high_water(const control_block* cb) noexcept {
    if (!cb->painted) return 0;
    auto* p = static_cast<const unsigned char*>(cb->stack.base);
    auto* top = static_cast<const unsigned char*>(cb->stack.top());
    while (p < top && *p == paint_byte) ++p;
    return static_cast<std::size_t>(top - p);
}

void prepare_thread() noexcept {}

}  // namespace weft::detail
