// weft/sync.hpp: layer L5, every synchronisation primitive: mutex and
// shared_mutex, condition_variable, counting_semaphore, event, latch,
// wait_group, barrier, channels and select. Each suspends a waiting task and
// blocks a waiting plain thread (docs/sync.md).
#pragma once

#include "weft/sync/channel.hpp"
#include "weft/sync/condition_variable.hpp"
#include "weft/sync/event.hpp"
#include "weft/sync/mutex.hpp"
#include "weft/sync/select.hpp"
#include "weft/sync/semaphore.hpp"
#include "weft/sync/stop.hpp"
