// weft/sync/channel.hpp: layer L5, channels and select.
#pragma once

#include <stdexcept>

#include "weft/config.hpp"
#include "weft/waiter.hpp"

namespace weft {

// channel_closed is thrown by send() on a closed channel.
class WEFT_API channel_closed : public std::logic_error {
public:
    channel_closed();
};

}  // namespace weft
