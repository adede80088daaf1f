// stop.cpp: layer L4, stopping a runtime: refuse spawns, cancel what is
// left, wait for it to end, join the workers and the blocking pool, write
// the trace.

#include "runtime_core.hpp"

#include <mutex>
#include <vector>

namespace weft::detail {

// ---- stopping ------------------------------------------------------------------------

// The text of stop()'s and shutdown()'s inside_task error: what a task does instead.
constexpr const char* stop_instead =
    "call it from the thread that owns the runtime (after block_on() returns, or from main); from a task, end "
    "the work instead (close the listener, cancel() or join() the tasks, close a channel the owner waits on) "
    "and let the owner's shutdown() drain the rest";

void runtime_core::stop() {
    if (task_record* t = current_task(); t && t->sched == this) inside_task(t, "weft::runtime::stop()", stop_instead);
    // The runtime's stop token, before any task is canceled: a task waiting
    // on it ends its wait (and may see the stop) rather than only unwind.
    // Not under stop_mu: the token's callbacks may be the program's.
    stop_src.request_stop();
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
    if (trace_sig) {
        trace_signal_unregister(this);  // OBSERVE-O5: no live trace of a stopped runtime
        trace_sig = 0;
    }
    if (!trace_path.empty()) {
        std::vector<const trace_buffer*> bufs;
        for (auto& b : traces) bufs.push_back(b.get());
        (void)write_trace(trace_path, nworkers, bufs, trace_origin);
    }
    // Tasks still in queues now are finished ones' leftovers: none (every
    // task left the queues before it ended).
    stopped = true;
}

// ---- graceful shutdown ---------------------------------------------------------------
//
//   SCHED-D1  While `draining`, check_spawn() refuses every spawn that does
//             not come from one of this runtime's tasks, so once `live` is 0
//             it stays 0: nothing of this runtime can spawn any more. The
//             finish that brings `live` to 0 then sets and wakes stop_word
//             (finish_task()), and drain_then_stop() (with workers) sleeps on that
//             word until then or the deadline; a spawn that passed
//             check_spawn() just before `draining` was set is a task like
//             the others, waited for or canceled by stop().

std::size_t runtime_core::drain_then_stop(std::chrono::steady_clock::time_point deadline) {
    using clock = std::chrono::steady_clock;
    if (task_record* t = current_task(); t && t->sched == this)
        inside_task(t, "weft::runtime::shutdown()", stop_instead);
    {
        std::lock_guard sg(stop_mu);
        if (stopped) return 0;
    }
    if (nthreads == 0) {
        // This thread runs the tasks: a root task that ends once it is the
        // last live task, or at the deadline (it looks every millisecond,
        // and the driver sleeps in between like any driver).
        join_handle<void> watch = spawn_on(
            this,
            [this, deadline] {
                while (live.load(std::memory_order_acquire) > 1 && clock::now() < deadline)
                    this_task::sleep_until(std::min(deadline, clock::now() + std::chrono::milliseconds(1)));
            },
            spawn_options{.name = "weft::runtime::shutdown"});
        draining.store(true, std::memory_order_seq_cst);  // SCHED-D1
        stop_src.request_stop();  // the runtime's stop token, as shutdown begins (not under a lock)
        drive(watch.record());
        watch.join();
    } else {
        draining.store(true, std::memory_order_seq_cst);  // SCHED-D1
        stop_src.request_stop();  // the runtime's stop token, as shutdown begins (not under a lock)
        while (live.load(std::memory_order_acquire) != 0) {
            const auto now = clock::now();
            if (now >= deadline) break;
            const std::int64_t left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now).count();
            if (stop_word.load(std::memory_order_acquire) == 0)
                futex_wait(&stop_word, 0, std::min<std::int64_t>(left, 10'000'000));
            else  // a late spawn after live reached 0 (SCHED-D1): look again soon
                std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<std::int64_t>(left, 1'000'000)));
        }
    }
    const auto left = static_cast<std::size_t>(std::max<std::int64_t>(0, live.load(std::memory_order_acquire)));
    stop();
    return left;
}

}  // namespace weft::detail
