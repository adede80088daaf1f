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
//   - per_worker() says that each worker has IO of its own to wait for (the
//     io_uring worker rings): a sleeping worker then waits in
//     poll_worker(i, ...) instead of on its futex word, and wake_worker(i)
//     is how it is woken (SCHED-I3 in runtime_core.hpp). poll_worker(i,
//     timeout_ns, watch) is called by worker i's thread only; with `watch`
//     it also waits for what poll() waits for (the caller holds the right
//     to poll, SCHED-I2) and polls it. wake_worker(i) makes a
//     poll_worker(i, ...) in progress, or the next one, return soon;
//     callable from any thread.
class poller {
public:
    virtual ~poller() = default;
    virtual std::size_t poll(std::int64_t timeout_ns) noexcept = 0;
    virtual void interrupt() noexcept = 0;
    [[nodiscard]] virtual bool per_worker() const noexcept { return false; }
    virtual std::size_t poll_worker(unsigned i, std::int64_t timeout_ns, bool watch) noexcept {
        (void)i;
        (void)watch;
        return poll(timeout_ns);
    }
    virtual void wake_worker(unsigned i) noexcept { (void)i; }
};
using make_poller_fn = std::unique_ptr<poller> (*)(runtime_core* c, const runtime_options& o);
// runtime_poller() is c's poller, made by `make` on the first call (once per
// runtime; later calls return the same one whatever `make` is). Throws what
// `make` throws.
poller* runtime_poller(runtime_core* c, make_poller_fn make);
// worker_index() is the index of the worker the calling thread is in
// runtime c (0 .. workers - 1), or -1 on any other thread.
int worker_index(runtime_core* c) noexcept;
// note_io_wait() counts an IO wait begun by the calling task (worker_stats::
// io_waits); nothing outside a worker.
void note_io_wait() noexcept;
// retain_core() / release_core() keep c's memory (and its poller) alive
// while an IO registration refers to it, also after the runtime object is
// gone.
void retain_core(runtime_core* c) noexcept;
void release_core(runtime_core* c) noexcept;

}  // namespace weft::detail
