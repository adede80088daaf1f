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
//               bumped where a task starts to run; and for the scheduling delay a
//               load, a compare and a branch: the delay is the coarse stamp read
//               there anyway less the ready stamp the task carries (state_since),
//               so no clock is read for it, and only a delay of a clock tick or
//               more (rare: the coarse clock ticks every few ms) is recorded
//               (delay_histogram: bucket 0 is derived). `current` was stored
//               there before it was atomic (relaxed stores compile to the same move).
//   OBSERVE-O3  The trace pointer is set before the worker threads start and never
//               changes: when it is null, an event site costs one predictable
//               branch. A trace buffer is written only by its worker's thread
//               (the shared one under its `mu`).
//   OBSERVE-O4  A trace buffer is a ring of the last `cap` events that other
//               threads read while its writer goes on (runtime::write_trace()):
//               each slot is a seqlock. The writer of event k stores the slot's
//               word 2k+1 (relaxed), the fields (release: each ordered after
//               the odd word), then 2k+2 (release), then head = k+1 (release).
//               A reader takes head (acquire), and for each k in [head - cap,
//               head) reads the word (acquire), the fields (acquire: the next
//               read is ordered after them) and the word again (relaxed): it
//               keeps the event only when both reads are 2k+2. A field it read
//               from a later writer makes its second read see that writer's odd
//               word or later, so a slot being rewritten (or already reused for
//               k + cap) is counted as lost, never returned torn. No fences:
//               TSan does not model them (work_deque.hpp says the same), and on
//               x86 release stores and acquire loads are plain moves. The open
//               run span (the task running now) is published the same way
//               through its own word. Names are the exception: a rare event (a
//               named spawn), kept under names_mu. Every field is accessed
//               through atomic_ref, so there is no data race for the language
//               or for TSan.
//   OBSERVE-O5  The trace signal's handler (runtime_options::trace_signal)
//               only write()s its signal number to a pipe, saving errno: no
//               lock, no allocation, no file (two lock-free atomic counts
//               around the write tell the closer when no handler holds the
//               pipe's descriptor). A process-wide thread reads the pipe and
//               writes the traces of the runtimes registered for that signal,
//               under the registry's lock, which a runtime also takes to leave
//               the registry (in stop(), before its rings go away); the last
//               to leave closes the pipe and joins the thread (trace.cpp).
#pragma once

#include <pthread.h>

#include <atomic>
#include <bit>
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
    std::uint32_t arg;  // steal: tasks moved; run: 1 for a span still open when the trace was read
    kind what;
};

// trace_slot is one event in a ring (OBSERVE-O4): its seqlock word, then
// the event's fields as words (arg and kind packed in `ak`).
struct trace_slot {
    std::uint64_t seq;
    std::uint64_t t0, t1, id, ak;
};

// trace_buffer is one worker's ring of its last events (OBSERVE-O3,
// OBSERVE-O4), or the shared one for events from other threads (its writers
// then hold `mu`). Task names are recorded once per task, where it is
// spawned, in a ring of their own under names_mu.
class trace_buffer {
public:
    explicit trace_buffer(std::size_t cap);
    ~trace_buffer();
    trace_buffer(const trace_buffer&) = delete;
    trace_buffer& operator=(const trace_buffer&) = delete;
    // begin_run() opens a run span of task t now (closing an open one).
    void begin_run(const task_record* t) noexcept;
    // end_run() closes the open run span, if any.
    void end_run() noexcept;
    void begin_sleep() noexcept;
    void end_sleep() noexcept;
    void instant(trace_event::kind k, std::uint64_t id, std::uint32_t arg = 0) noexcept;
    // name() records t's name for the writer (at its spawn).
    void name(const task_record* t) noexcept;

    // read() appends the events in the ring now, oldest first, to `out`,
    // and the open run span, if any, ending at `now_ns` (arg 1); returns
    // how many of the events written so far it could not return
    // (overwritten, or being rewritten as it read: OBSERVE-O4). From any
    // thread, while the writer goes on.
    std::uint64_t read(std::vector<trace_event>& out, std::int64_t now_ns) const;
    // read_names() appends the recorded names to `out`.
    void read_names(std::vector<std::pair<std::uint64_t, std::string>>& out) const;
    [[nodiscard]] std::size_t capacity() const noexcept { return cap_; }

    std::mutex mu;  // the shared buffer's writers' lock (unused for a worker's)

private:
    void push(const trace_event& e) noexcept;
    void publish_open(std::int64_t start, std::uint64_t id) noexcept;
    std::size_t cap_;
    trace_slot* ring_;          // cap_ slots, zeroed (calloc: untouched pages cost nothing)
    std::size_t at_ = 0;        // the writer's: head_ % cap_
    std::uint64_t written_ = 0;  // the writer's: head_
    std::atomic<std::uint64_t> head_{0};  // events written (OBSERVE-O4)
    // The open run span: the writer's copy, and the published one (OBSERVE-O4).
    std::int64_t run_start_ = -1;
    std::uint64_t run_id_ = 0;
    std::uint64_t open_seq_ = 0;  // through atomic_ref
    std::int64_t open_start_ = -1;
    std::uint64_t open_id_ = 0;
    std::int64_t sleep_start_ = -1;
    mutable std::mutex names_mu;
    std::vector<std::pair<std::uint64_t, std::string>> names_;  // a ring of at most cap_
    std::size_t names_at_ = 0;
};

// steady_now_ns() is steady_clock's now in nanoseconds: the clock of the
// runtime's timers, of the trace and of the watchdog.
[[nodiscard]] inline std::int64_t steady_now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// write_trace() writes the buffers (one per worker, then the shared one) as
// trace-event JSON to `path`, with `names` added to those the buffers
// recorded; false, with a message on stderr, if it cannot. `live`: the
// runtime runs (its open spans end now), and the file is written beside
// `path` and renamed onto it, so a reader never sees half of one.
bool write_trace(const std::string& path, unsigned workers, const std::vector<const trace_buffer*>& buffers,
                 std::int64_t origin_ns, bool live = false,
                 std::vector<std::pair<std::uint64_t, std::string>> names = {}) noexcept;

// trace_signal_register() makes signal sig call fn(ctx) on the trace
// signal thread (OBSERVE-O5), installing sig's handler once and starting
// the pipe and the thread when none runs; trace_signal_unregister(ctx)
// removes ctx's entries and returns once no call of fn(ctx) is under way
// (the last entry's removal also ends the thread and closes the pipe). register throws
// std::system_error when the pipe, the handler or the thread cannot be had.
void trace_signal_register(int sig, void* ctx, void (*fn)(void*));
void trace_signal_unregister(void* ctx) noexcept;

// delay_histogram is one worker's scheduling delays: the time from a task
// being made ready (its state stamp: spawn, wake, yield) to its start on the
// worker, on the coarse clock of the state stamps (OBSERVE-O1 counters).
// Bucket i counts delays up to 2^(20+i) ns (about 1 ms, 2 ms, ...); the
// last counts the rest. Bucket 0 is never bumped: it is `switches` less the
// others (stats()), so that the common start, within the clock's tick
// (delay 0), costs a compare and a branch (OBSERVE-O2).
struct delay_histogram {
    static constexpr unsigned buckets = runtime_delay_buckets;
    counter bucket[buckets];
    counter sum_ns;
    // record() takes a delay d > 0.
    void record(std::int64_t d) noexcept {
        const std::uint64_t u = static_cast<std::uint64_t>(d);
        sum_ns.bump(u);
        if (u <= (std::uint64_t{1} << 20)) return;  // bucket 0's
        unsigned i = static_cast<unsigned>(std::bit_width((u - 1) >> 20));
        if (i >= buckets) i = buckets - 1;
        bucket[i].bump();
    }
    // read() fills out[] given the worker's `switches`, read after the
    // buckets (so it is at least their sum, but for reordering: clamped).
    template <class Array>
    void read(Array& out, std::uint64_t& sum, const counter& switches) const noexcept {
        std::uint64_t others = 0;
        for (unsigned i = 1; i < buckets; ++i) others += out[i] = bucket[i].get();
        sum = sum_ns.get();
        const std::uint64_t all = switches.get();
        out[0] = all > others ? all - others : 0;
    }
};

// worker_view is the part of a worker that stats(), the trace and the
// watchdog read: counters (OBSERVE-O1), the running task (OBSERVE-O2), the thread.
struct worker_view {
    counter spawned, finished, switches, steals, stolen, sleeps, injected, timers, io_waits, io_polls;
    counter shrinks, restores, shrunk_bytes, shrinks_refused;  // idle tasks' stacks (docs/runtime.md)
    delay_histogram delay;  // scheduling delays (begin_run())
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
