// channel.cpp: layer L5, the non-template part of channels
// (weft/sync/channel.hpp, invariants CHAN-K1 - CHAN-K4): status names and the exception.

#include "weft/sync/channel.hpp"

namespace weft {

const char* to_string(channel_status s) noexcept {
    switch (s) {
    case channel_status::ok: return "ok";
    case channel_status::closed: return "closed";
    case channel_status::timeout: return "timeout";
    case channel_status::full: return "full";
    case channel_status::empty: return "empty";
    }
    return "unknown";
}

channel_closed::channel_closed() : std::logic_error("weft: send on a closed channel") {}

}  // namespace weft
