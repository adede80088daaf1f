// observe.hpp: what the runtime shows of itself while it runs (docs/
// debugging.md): per-worker counters (runtime::stats()), the task trace
// (trace.cpp) and the starvation watchdog's view of a worker
// (watchdog.cpp). Internal to the runtime layer.
//
//   OBSERVE-O1  Every counter has one writer, its worker's thread (or the thread
//               driving a runtime without workers, one at a time): bump() is a
//               relaxed load and a relaxed store, no read-modify-write; readers on
//               other threads get some recent value.
//   OBSERVE-O2  The switch path pays one relaxed store for all of this: `switches`,
//               bumped where a task starts to run. `current` was stored there
//               before it was atomic (relaxed stores compile to the same move).
//   OBSERVE-O3  The trace pointer is set before the worker threads start and never
//               changes: when it is null, an event site costs one predictable
//               branch. A trace buffer is written only by its worker's thread.
#pragma once

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "weft/runtime.hpp"

namespace weft::detail {

struct task_record;

// counter is one statistic of one worker (OBSERVE-O1).
class counter {
public:
    void bump(std::uint64_t n = 1) noexcept { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
    [[nodiscard]] std::uint64_t get() const noexcept { return v_.load(std::memory_order_relaxed); }

private:
    std::atomic<std::uint64_t> v_{0};
};

// trace_event is one recorded event (32 bytes). For spans, `t0` is the
// start and `t1` the end; for instants t1 is unused.
struct trace_event {
    enum kind : std::uint8_t { run, sleep, spawn, steal, wake, timers };
    std::int64_t t0;
    std::int64_t t1;
    std::uint64_t id;   // run/spawn/wake: the task id; steal: the victim; timers: how many fired
    std::uint32_t arg;  // steal: tasks moved
    kind what;
};

// trace_buffer is one worker's events (OBSERVE-O3), or the shared one for events
// from other threads (then guarded by `mu`). Task names are recorded once
// per task, where it is spawned.
class trace_buffer {
public:
    explicit trace_buffer(std::size_t cap) : cap_(cap) {}
    // begin_run() opens a run span of task t now (closing an open one).
    void begin_run(const task_record* t) noexcept;
    // end_run() closes the open run span, if any.
    void end_run() noexcept;
    void begin_sleep() noexcept;
    void end_sleep() noexcept;
    void instant(trace_event::kind k, std::uint64_t id, std::uint32_t arg = 0) noexcept;
    // name() records t's name for the writer (at its spawn).
    void name(const task_record* t) noexcept;

    std::mutex mu;  // the shared buffer's lock (unused for a worker's)
    std::vector<trace_event> events;
    std::vector<std::pair<std::uint64_t, std::string>> names;
    std::uint64_t dropped = 0;

private:
    void push(const trace_event& e) noexcept;
    std::size_t cap_;
    std::int64_t run_start_ = -1;
    std::uint64_t run_id_ = 0;
    std::int64_t sleep_start_ = -1;
};

// steady_now_ns() is steady_clock's now in nanoseconds: the clock of the
// runtime's timers, of the trace and of the watchdog.
[[nodiscard]] inline std::int64_t steady_now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// write_trace() writes the buffers (one per worker, then the shared one) as
// trace-event JSON to `path`; false, with a message on stderr, if it cannot.
bool write_trace(const std::string& path, unsigned workers, const std::vector<trace_buffer*>& buffers,
                 std::int64_t origin_ns) noexcept;

// worker_view is the part of a worker that stats(), the trace and the
// watchdog read: counters (OBSERVE-O1), the running task (OBSERVE-O2), the thread.
struct worker_view {
    counter spawned, finished, switches, steals, stolen, sleeps, injected, timers, io_waits, io_polls;
    counter shrinks, restores, shrunk_bytes, shrinks_refused;  // idle tasks' stacks (docs/runtime.md)
    // current is the task running on the worker (null between tasks);
    // other threads only compare it with null.
    std::atomic<task_record*> current{nullptr};
    // thread is the worker's thread (or the current driver's), while
    // has_thread; guarded by thread_mu, which the watchdog holds while it
    // uses the thread (so a driver cannot leave and its thread end then).
    std::mutex thread_mu;
    pthread_t thread{};
    bool has_thread = false;
    void set_thread(bool on) noexcept {
        std::lock_guard g(thread_mu);
        has_thread = on;
        thread = on ? pthread_self() : pthread_t{};
    }
    trace_buffer* trace = nullptr;  // OBSERVE-O3
};

// watchdog is a runtime's starvation monitor: a thread that looks at every
// worker each threshold / 4 and reports a task whose worker's `switches`
// has not moved for the threshold while `current` is set (watchdog.cpp).
class watchdog {
public:
    watchdog(const watchdog_options& o, std::vector<worker_view*> workers);
    ~watchdog();  // halt()
    // halt() stops and joins the monitor thread; the counts stay readable.
    void halt() noexcept;
    watchdog(const watchdog&) = delete;
    watchdog& operator=(const watchdog&) = delete;
    [[nodiscard]] std::uint64_t stalls() const noexcept;
    [[nodiscard]] std::uint64_t suppressed() const noexcept;

    struct state;

private:
    std::unique_ptr<state> s_;
};

// watchdog_from_env() applies WEFT_WATCHDOG (milliseconds; 0 or unset: no
// change) to o.
void watchdog_from_env(watchdog_options& o);

}  // namespace weft::detail
