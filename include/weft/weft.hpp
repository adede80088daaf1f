// weft/weft.hpp: the umbrella header.
#pragma once

#include "weft/config.hpp"
#include "weft/context.hpp"
#include "weft/fiber.hpp"
#include "weft/coroutine.hpp"
#include "weft/compact_coroutine.hpp"
#include "weft/generator.hpp"
#include "weft/pooled_stack.hpp"
#include "weft/shared_stack.hpp"
#include "weft/stack.hpp"
#include "weft/task.hpp"
#include "weft/runtime.hpp"
#include "weft/sync.hpp"
#include "weft/io/handle.hpp"
#include "weft/io/socket.hpp"
#include "weft/io/file.hpp"
#include "weft/async.hpp"
