// channel.cpp: layer L5, the non-template parts of channels and select
// (weft/sync/channel.hpp).

#include "weft/sync/channel.hpp"

namespace weft {

channel_closed::channel_closed() : std::logic_error("weft: send on a closed channel") {}

}  // namespace weft
