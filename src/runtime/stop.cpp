// stop.cpp: layer L4, stopping a runtime: refuse spawns, cancel what is
// left, wait for it to end, join the workers and the blocking pool, write
// the trace.

#include "runtime_core.hpp"

#include <mutex>
#include <vector>

namespace weft::detail {

// ---- stopping ------------------------------------------------------------------------

void runtime_core::stop() {
    if (task_record* t = current_task(); t && t->sched == this) task_misuse(t, task_errc::inside_task);
    std::lock_guard sg(stop_mu);
    if (stopped) return;
    stopping.store(true, std::memory_order_seq_cst);
    // Policy: cancel whatever is left. Each task ends at its next
    // suspension point (one not yet started ends before its first
    // instruction).
    for (unsigned i = 0; i <= nworkers; ++i) {
        std::lock_guard g(shards[i].mu);
        for (task_record* t = shards[i].tasks.front(); t; t = t->reg_next) request_cancel(t, wait_status::canceled);
    }
    if (nthreads == 0) {
        driver_guard g(this);
        loop(ws[0].get(), nullptr, true);
    } else {
        while (live.load(std::memory_order_acquire) != 0) futex_wait(&stop_word, 0, 10'000'000);
    }
    // Every task has ended: nothing left to watch.
    if (dog) dog->halt();
    shutdown.store(true, std::memory_order_seq_cst);
    for (auto& w : ws) wake(w.get());
    for (auto& th : threads) th.join();
    threads.clear();
    {
        std::lock_guard g(bl_mu);
        bl_stop = true;
    }
    bl_cv.notify_all();
    for (auto& th : bl_pool) th.join();
    bl_pool.clear();
    drain_idle();
    if (!traces.empty()) {
        std::vector<trace_buffer*> bufs;
        for (auto& b : traces) bufs.push_back(b.get());
        (void)write_trace(trace_path, nworkers, bufs, trace_origin);
    }
    // Tasks still in queues now are finished ones' leftovers: none (every
    // task left the queues before it ended).
    stopped = true;
}

}  // namespace weft::detail
