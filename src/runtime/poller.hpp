// poller.hpp: layer L4, internal: the runtime's side of IO. The IO layer
// (L6, src/io/reactor.hpp) implements poller and calls the functions below;
// the runtime's sleeping watcher waits in the poller (SCHED-I1, SCHED-I2 in
// runtime_core.hpp). Not installed: no public header needs it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "weft/runtime.hpp"

namespace weft::detail {

// poller is the IO layer's (L6) part of a runtime: what an idle worker
// waits in. The runtime makes it on first use (runtime_poller()) and owns it.
//   - poll(timeout_ns) waits up to timeout_ns (-1: no limit, 0: not at all)
//     for IO, wakes the waiters whose IO is ready, and returns how many it
//     woke. The runtime calls it from one thread at a time.
//   - interrupt() makes a poll() in progress, or the next one, return soon;
//     callable from any thread, also a signal-free one inside poll().
class poller {
public:
    virtual ~poller() = default;
    virtual std::size_t poll(std::int64_t timeout_ns) noexcept = 0;
    virtual void interrupt() noexcept = 0;
};
using make_poller_fn = std::unique_ptr<poller> (*)(runtime_core* c, const runtime_options& o);
// runtime_poller() is c's poller, made by `make` on the first call (once per
// runtime; later calls return the same one whatever `make` is). Throws what
// `make` throws.
poller* runtime_poller(runtime_core* c, make_poller_fn make);
// note_io_wait() counts an IO wait begun by the calling task (worker_stats::
// io_waits); nothing outside a worker.
void note_io_wait() noexcept;
// retain_core() / release_core() keep c's memory (and its poller) alive
// while an IO registration refers to it, also after the runtime object is
// gone.
void retain_core(runtime_core* c) noexcept;
void release_core(runtime_core* c) noexcept;

}  // namespace weft::detail
