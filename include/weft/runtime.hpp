// weft/runtime.hpp: layer L4, the runtime that runs tasks: one type for a
// loop on the caller's thread (workers = 0) and for N work-stealing worker
// threads (workers = N).
//
//   weft::runtime rt({.workers = 4});
//   int sum = rt.block_on([] {
//       auto a = weft::spawn([] { return 1; });
//       auto b = weft::spawn([] { return 2; });
//       return a.join() + b.join();         // suspends this task only
//   });
//
//   weft::runtime loop;                      // workers = 0: a game loop
//   loop.spawn([] { for (;;) { tick_ai(); weft::this_task::yield(); } });
//   while (playing) { loop.run_once(); render(); }
//
// docs/runtime.md has the design: the queues, the wake-up protocol and its
// invariant, what migrates between workers, the stacks, stopping.
//
// In this file: the options (runtime_options, spawn_options), the runtime,
// its statistics, then spawn(), blocking(), this_task::sleep_*, then(),
// when_all() and when_any(); the implementation (namespace detail) last.
#pragma once

#include <array>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/config.hpp"
#include "weft/fiber.hpp"
#include "weft/pooled_stack.hpp"
#include "weft/shared_stack.hpp"
#include "weft/stack.hpp"
#include "weft/task.hpp"
#include "weft/waiter.hpp"

namespace weft {

// unhandled_handler is called with a detached task's escaping exception, on
// the thread that finished (or detached) it.
using unhandled_handler = void (*)(const task_info& task, std::exception_ptr e) noexcept;

// io_backend chooses how a runtime waits for IO (weft/io/, docs/io.md).
//   automatic  io_uring's owner ring for one worker (workers = 1), epoll
//              otherwise (docs/io.md, "Backends", gives the measurements);
//   epoll      epoll, edge-triggered;
//   io_uring   io_uring (liburing): for one worker a ring only that worker
//              enters, for two or more a ring per worker (readiness on
//              epoll), for workers = 0 one shared ring; when
//              io_uring_setup() fails (EPERM in containers, ENOSYS on old
//              kernels) the runtime falls back to epoll and
//              io::backend_info() says why.
enum class io_backend : unsigned char { automatic, epoll, io_uring };

// stall_report is what the starvation watchdog (runtime_options::watchdog)
// says about one task that has run on a worker longer than the threshold
// without reaching a suspension point. Valid only during the handler call.
struct stall_report {
    std::uint64_t task_id = 0;
    std::string_view task_name;  // empty when the task has none
    unsigned worker = 0;
    // ran_for is how long the task had been running when it was sampled
    // (at least the threshold; the watchdog looks every threshold / 4).
    std::chrono::nanoseconds ran_for{0};
    // cpu_time is the CPU time the worker's thread used while the watchdog
    // watched the stall (a part of ran_for): close to ran_for for a task
    // that computes, far below it for one blocked in a system call or a
    // thread the OS did not run. Zero if it could not be read.
    std::chrono::nanoseconds cpu_time{0};
    // backtrace is where the task was when it was sampled, innermost frame
    // first (empty when the worker could not be sampled: no signal, or it
    // did not answer within 100 ms).
    std::span<void* const> backtrace;
    // suppressed is how many stalls were left unreported since the last
    // report (rate limit: watchdog_options::burst, refill_every).
    std::uint64_t suppressed = 0;
    // text is the whole report as the default handler prints it (task,
    // worker, duration, the symbolised backtrace), one line each.
    std::string_view text;
};

// stall_handler receives the watchdog's reports, on the watchdog's own
// thread (never on the stalled worker). It may log, count or abort.
using stall_handler = void (*)(const stall_report& report, void* user) noexcept;

// watchdog_options configure a runtime's starvation watchdog (docs/
// debugging.md). Off unless enabled (or WEFT_WATCHDOG=milliseconds is set
// in the environment when the runtime is made).
struct watchdog_options {
    bool enabled = false;
    // threshold: a task that runs this long without suspending is a stall.
    std::chrono::milliseconds threshold{100};
    // on_stall receives each report; null: print report.text to stderr.
    stall_handler on_stall = nullptr;
    void* user = nullptr;
    // sample_signal is sent to a stalled worker's thread to take the
    // backtrace there (its handler chains to one installed before); 0: no
    // signal, reports come without a backtrace.
    int sample_signal = SIGURG;  // as Go's preemption: ignored by default
    // Rate limit: at most `burst` reports at once, one more each
    // refill_every; stalls beyond it are counted (stall_report::suppressed,
    // runtime_stats::stalls_suppressed). One stall is reported once however
    // long it lasts.
    unsigned burst = 10;
    std::chrono::milliseconds refill_every{1000};
};

// available_parallelism() is how many threads this process can run at once:
// the CPUs in the calling thread's affinity mask (taskset, cpusets), lowered
// to the cgroup v2 CPU quota (cpu.max, rounded up) when one is set; at least
// 1. What Go's GOMAXPROCS and Tokio's worker_threads default to; a server
// passes it as runtime_options::workers (whose default stays 0: see there).
[[nodiscard]] WEFT_API unsigned available_parallelism() noexcept;
namespace detail {
// parallelism_from() is available_parallelism()'s arithmetic: cpus (0 counts
// as 1) lowered to a cgroup v2 cpu.max text ("max 100000", "150000 100000":
// quota / period rounded up); null or malformed text leaves cpus.
[[nodiscard]] WEFT_API unsigned parallelism_from(unsigned cpus, const char* cpu_max) noexcept;
// shrink_test_hook() forces rare paths, process-wide, for tests: 1 every
// shrink finds its protection refused, 2 every restore finds its range
// cannot be made accessible alone (SHRINK-P5), 3 every sweep pauses before
// it drops an entry (SHRINK-L1); 0 none.
WEFT_API void shrink_test_hook(int mode) noexcept;
}  // namespace detail

// runtime_options configure a runtime.
struct runtime_options {
    // workers is the number of worker threads. 0: tasks run on the thread
    // that calls block_on(), run_once() or run_for().
    // The default is 0, not the CPU count as in Go and Tokio: a program
    // written for one thread (a game loop, an N:1 server) must not become
    // multi-threaded because it did not say so. A server that wants every
    // CPU says {.workers = weft::available_parallelism()}.
    unsigned workers = 0;
    // stack_size is the stack of a task that does not ask for one: a guarded
    // stack from the runtime's own pool (stacks are reused, LIFO).
    std::size_t stack_size = 64 * 1024;
    // stack_fallback: when guarded stacks cannot be had because the process
    // is out of memory mappings (vm.max_map_count; each guarded stack costs
    // two), give the task an unguarded stack (one of many in a larger
    // mapping) with guard words below it instead, checked whenever the task
    // is switched out and when it ends (docs/runtime.md, "Stacks"). false:
    // the task fails with stack_error.
    bool stack_fallback = true;
    // copy_stack_size is the size of the shared stacks copy-stack tasks run
    // on (one pool per worker).
    std::size_t copy_stack_size = 64 * 1024;
    // shrink_idle_after: a stackful task that has stayed parked this long
    // keeps only its live stack bytes, in a heap block, and gives its stack's
    // pages back; they come back, at the same addresses and with the same
    // contents, when it next runs or as soon as any other code touches them
    // (docs/runtime.md, "Idle tasks give their stack back"). 0: never. The
    // default, one minute, keeps shrinking away from the doors of idleness:
    // a task that wakes more often than that is never shrunk (Go shrinks
    // stacks at a collection, forced every two minutes when idle).
    std::chrono::milliseconds shrink_idle_after{60'000};
    // blocking_threads bounds the thread pool of blocking().
    unsigned blocking_threads = 16;
    // unhandled receives the exceptions of detached tasks; null: print the
    // task's name, id and what() and what to do about it to stderr and
    // std::terminate() with the exception active, as an exception escaping
    // a std::thread does.
    unhandled_handler unhandled = nullptr;
    // io is the IO backend, made when the runtime's first IO wait needs it.
    io_backend io = io_backend::automatic;
    // trace_path: when not empty, the runtime records a task trace (per
    // worker: the spans in which each task ran, spawns, steals, sleeps,
    // wakes) and writes it there as Chrome / Perfetto trace-event JSON when
    // it stops. Empty: the path in the environment variable WEFT_TRACE, if
    // set (docs/debugging.md). Costs one predictable branch per event site
    // when off.
    std::string trace_path = {};
    // trace_events bounds the events kept per worker (40 bytes each): a
    // ring of the last trace_events, older ones overwritten and counted as
    // dropped (in the file's "otherData").
    std::size_t trace_events = std::size_t{1} << 20;
    // watchdog reports tasks that hog their worker (see watchdog_options).
    watchdog_options watchdog = {};

    // ---- live tracing (docs/debugging.md, "Live tracing and metrics") ----
    // trace_live: record the task trace (the rings of trace_events) for
    // runtime::write_trace() to take from the running runtime, also without
    // trace_path (then nothing is written at stop). Costs what trace_path
    // costs while recording. Implied by trace_signal.
    bool trace_live = false;
    // trace_signal: a signal number (SIGUSR2, say) on which the running
    // process writes this runtime's live trace to trace_signal_path, as
    // `kill -USR2 <pid>` asks. The runtime installs a handler (process-wide,
    // kept after the runtime goes; the signal then does nothing) that only
    // wakes a small thread, which writes the file. 0: no signal. Not the
    // watchdog's sample_signal.
    int trace_signal = 0;
    // trace_signal_path: where trace_signal writes; empty:
    // "weft-trace-<pid>.json" in the working directory. Each signal
    // replaces the file (written beside it, then renamed).
    std::string trace_signal_path = {};
    // ---- end of live tracing ----
};

// spawn_options configure one task.
struct spawn_options {
    // name appears in errors, diagnostics and runtime::tasks(); copied.
    std::string_view name = {};
    // stack_size: 0 is the runtime's stack_size; larger stacks are mapped
    // for the task alone.
    std::size_t stack_size = 0;
    // pinned: the task always runs on the worker it was spawned on (from
    // outside a worker: one chosen round-robin), never stolen.
    bool pinned = false;
    // copy_stack: the task runs on its worker's shared stacks and keeps only
    // its live bytes while suspended (implies pinned).
    bool copy_stack = false;
    // deadline / timeout: when the deadline (or now + timeout, whichever is
    // earlier) passes, the task is canceled and ends timed_out.
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
    std::chrono::nanoseconds timeout{0};
};

// What the runtime and the templates below need of the implementation; the
// rest of it is at the end of this file, and runtime_core is in src/runtime/.
namespace detail {
class runtime_core;
// spawn_on() makes a task's block and queues it (defined below).
template <class F, class R = std::invoke_result_t<std::decay_t<F>&>>
join_handle<R> spawn_on(runtime_core* c, F&& f, const spawn_options& o);
// current_core() is the calling task's runtime; outside a task it throws
// task_error (not_in_task) naming `call` and, if given, what a plain thread
// does `instead` (not_in_task(), weft/task.hpp).
[[nodiscard]] WEFT_API runtime_core* current_core(const char* call, const char* instead = nullptr);
WEFT_API void drive_until(runtime_core* c, task_record* root);

// blocking_job is one call for the blocking() pool.
struct blocking_job {
    void (*run)(void* ctx) noexcept;
    void* ctx;
    task_record* task;
    std::uint64_t word;
    blocking_job* next;
};
WEFT_API void run_blocking(blocking_job& job);
// blocking_on_shared_stack() throws task_error (bad_option) for a
// blocking() call from a shared stack whose callable can be neither copied
// nor moved off the task's frame.
[[noreturn]] WEFT_API void blocking_on_shared_stack();
}  // namespace detail

struct runtime_stats;  // what runtime::stats() returns (below)

// runtime runs tasks; see the top of this file. Not copyable or movable.
// Several runtimes may exist in one process.
class WEFT_API runtime {
public:
    // runtime() starts `workers` threads (none for 0). Throws: task_error
    // (bad_option); std::system_error if a thread cannot be started.
    explicit runtime(const runtime_options& options = {});
    // ~runtime() is stop(). Destroying a runtime from inside one of its own
    // tasks aborts with a message (it would wait for itself).
    ~runtime();
    runtime(const runtime&) = delete;
    runtime& operator=(const runtime&) = delete;

    // spawn() creates a task running f() and queues it; returns its handle.
    // From any thread, also from inside tasks of other runtimes. The task
    // takes a stack only when it first runs: if none can be had then, the
    // task ends failed with stack_error (join() rethrows it) and the runtime
    // keeps working. Throws: task_error (runtime_stopping); std::bad_alloc;
    // what moving f throws.
    template <class F, class R = std::invoke_result_t<std::decay_t<F>&>>
    join_handle<R> spawn(F&& f, const spawn_options& options = {}) {
        return detail::spawn_on(core_, std::forward<F>(f), options);
    }
    // spawn(a) spawns a C++20 coroutine (weft::async<T>, weft/async.hpp) as
    // a task: the same ids, states, cancellation, deadlines and join_handle,
    // but no stack of its own. Throws: as spawn(f); std::invalid_argument
    // for an empty async (which is left as it was).
    template <class A>
        requires requires { typename std::remove_cvref_t<A>::weft_coroutine_task; }
    auto spawn(A&& a, const spawn_options& options = {}) {
        static_assert(!std::is_lvalue_reference_v<A>, "weft: spawn(std::move(a)): a spawned weft::async is moved in");
        return spawn_coroutine(core_, std::move(a), options);
    }

    // block_on() runs f() as a root task and returns its result (or rethrows
    // its exception). With workers = 0 this thread drives the runtime (all
    // ready tasks run here) until the root task has finished; with workers
    // it waits for the root task. Throws: as spawn() and join_handle::join();
    // task_error (inside_task: called from inside a task; driver_busy).
    template <class F, class R = std::invoke_result_t<std::decay_t<F>&>>
    R block_on(F&& f, const spawn_options& options = {}) {
        join_handle<R> h = spawn(std::forward<F>(f), options);
        detail::drive_until(core_, h.record());
        return h.join();
    }
    // block_on(a) is block_on for a C++20 coroutine (weft::async<T>).
    template <class A>
        requires requires { typename std::remove_cvref_t<A>::weft_coroutine_task; }
    auto block_on(A&& a, const spawn_options& options = {}) {
        auto h = spawn(std::forward<A>(a), options);
        detail::drive_until(core_, h.record());
        return h.join();
    }

    // run_once() runs every task that is ready when it is called once (each
    // until its next suspension point), fires due timers, and returns how
    // many tasks it ran; tasks made ready meanwhile run at the next call.
    // Never blocks. For workers = 0 (a game loop calls it once per tick);
    // with workers it returns 0. Throws: task_error (inside_task, driver_busy).
    std::size_t run_once();
    // run_for() calls run_once() until nothing is ready or `budget` has
    // passed; returns how many tasks ran. Never blocks waiting for work.
    std::size_t run_for(std::chrono::nanoseconds budget);
    // next_timer_due() is when run_once() next has timer work, or nullopt
    // when no timer is pending (a sleep, a wait with a deadline, a spawn
    // deadline): a game loop may sleep until then when nothing is ready.
    // It is the earliest pending deadline rounded up to the timer tick
    // (16.384 us), or a time already passed when a deadline has passed.
    // A timer never fires before its deadline. Safe from any thread (it
    // takes each timer wheel's lock); with workers it is informative only
    // (the workers fire the timers).
    [[nodiscard]] std::optional<std::chrono::steady_clock::time_point> next_timer_due() const noexcept;

    // stop() refuses new spawns, cancels every task that is left (each ends
    // canceled at its next suspension point: destructors run), waits until
    // all have ended (with workers = 0, by running them on this thread), then
    // joins the workers. Stacks of tasks whose handles are still held are
    // freed when the handles go. Idempotent. Throws: task_error (inside_task).
    void stop();
    // shutdown() stops gracefully: it refuses spawns from outside the
    // runtime's own tasks (other threads, other runtimes' tasks: task_error
    // runtime_stopping), lets the tasks that are left run, and spawn
    // children of their own, until all have ended or `deadline` has passed;
    // then it is stop(): what is still live is canceled (each ends canceled
    // at its next suspension point, destructors run) and waited for, and
    // the workers are joined. With workers = 0 this thread runs the tasks
    // meanwhile. Returns how many tasks were still live when the deadline
    // passed (0: all ended on their own). After it returns the runtime is
    // stopped, as after stop(); on a runtime already stopped it returns 0.
    // Nothing here stops a task that waits for more work (an accept loop, an
    // idle connection): the program tells those to finish (docs/runtime.md,
    // "Graceful shutdown"). Throws: task_error (inside_task; driver_busy).
    std::size_t shutdown(std::chrono::steady_clock::time_point deadline);
    // shutdown(grace) is shutdown(now + grace).
    template <class Rep, class Period>
    std::size_t shutdown(const std::chrono::duration<Rep, Period>& grace) {
        return shutdown(std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::nanoseconds>(grace));
    }

    // shrink_idle() asks every worker to shrink, at its next pass, every
    // parked task it has listed as a candidate, however briefly it has been
    // parked (docs/runtime.md, "Idle tasks give their stack back"): for a
    // program about to go idle, and for tests. Returns at once; with
    // workers = 0 the next run_once() / run_for() / block_on() pass does it.
    // Does nothing when shrink_idle_after is 0. Safe from any thread.
    void shrink_idle() noexcept;

    // get_stop_token() is the runtime's stop token: stop is requested on it
    // when shutdown() or stop() begins (the runtime's destructor too), on the
    // calling thread, before any task is canceled. A task that waits for more
    // work selects on it (weft::on_stop, weft/sync/stop.hpp) or waits on it
    // (weft::wait) and so learns that it should finish (docs/runtime.md,
    // "Graceful shutdown"). A std::stop_callback registered on it runs on the
    // thread that calls shutdown() or stop(), under none of the runtime's
    // locks. Safe from any thread; the token stays valid after the runtime is
    // gone.
    [[nodiscard]] std::stop_token get_stop_token() const noexcept;

    // workers() is the number of worker threads (0: caller-driven).
    [[nodiscard]] unsigned workers() const noexcept;
    // live_tasks() is the number of tasks spawned and not yet finished.
    [[nodiscard]] std::size_t live_tasks() const noexcept;
    // tasks() lists the live tasks (id, name, state, worker, time in state);
    // safe to call from any thread while the runtime runs.
    [[nodiscard]] std::vector<task_info> tasks() const;
    // stats() reads the runtime's counters; safe from any thread while it
    // runs, also from inside its tasks.
    [[nodiscard]] runtime_stats stats() const;

    // ---- live tracing and metrics (docs/debugging.md, "Live tracing and metrics") ----
    // write_trace() writes the trace of the running runtime to `path`, in
    // the format of the trace written at stop (trace_path): each worker's
    // last trace_events events, and the span of each task running now, up
    // to now. The runtime must record a trace (trace_path, trace_live or
    // trace_signal; else it returns false). Safe from any thread while the
    // runtime runs; the workers go on meanwhile (a slot they rewrite as it
    // is read is left out and counted as dropped). It writes the file on the
    // calling thread: from a task, that worker waits for it. Returns false,
    // with a message on stderr, if the file cannot be written.
    bool write_trace(const std::string& path) const;
    // metrics_text() is stats() in the Prometheus text exposition format
    // (version 0.0.4): weft::metrics_text(stats()).
    [[nodiscard]] std::string metrics_text() const;
    // ---- end of live tracing and metrics ----

    // core() is the runtime's implementation, for the layers above.
    [[nodiscard]] detail::runtime_core* core() const noexcept { return core_; }

private:
    detail::runtime_core* core_;
};

// runtime_delay_buckets is the number of buckets of the scheduling-delay
// histogram (worker_stats::sched_delay); sched_delay_bound_ns(i) is bucket
// i's upper bound, 2^(20+i) ns (about 1 ms, 2 ms, ... 4.3 s), and the last
// bucket's is unbounded (UINT64_MAX).
inline constexpr unsigned runtime_delay_buckets = 14;
[[nodiscard]] constexpr std::uint64_t sched_delay_bound_ns(unsigned i) noexcept {
    return i + 1 >= runtime_delay_buckets ? UINT64_MAX : std::uint64_t{1} << (20 + i);
}

// worker_stats are one worker's counters since the runtime started, read
// while it runs (each is exact for its worker; the set is not a snapshot
// taken at one instant).
struct worker_stats {
    unsigned worker = 0;
    std::uint64_t spawned = 0;   // tasks spawned by tasks running on this worker
    std::uint64_t finished = 0;  // tasks that ended here
    std::uint64_t switches = 0;  // switches into a task here (first runs, resumes and hand-offs)
    std::uint64_t steals = 0;    // steals that took tasks from another worker's deque
    std::uint64_t stolen = 0;    // tasks those steals moved here
    std::uint64_t sleeps = 0;    // times it slept for want of work
    std::uint64_t injected = 0;  // tasks it took from the injection queue
    std::uint64_t timers = 0;    // timers it fired (task sleeps, wait timeouts, task deadlines)
    std::uint64_t io_waits = 0;  // IO waits begun by tasks running here
    std::uint64_t io_polls = 0;  // polls for IO readiness it made
    // Idle tasks giving their stack back (runtime_options::shrink_idle_after):
    // shrinks it made, restores of shrunk tasks it resumed, and the live bytes
    // its shrinks kept on the heap (in all; what is kept now is that less
    // what the restores gave back, which the workers do not count).
    std::uint64_t shrinks = 0;
    std::uint64_t restores = 0;
    std::uint64_t shrunk_bytes = 0;
    // shrinks_refused: shrinks it did not make because the stack's pages
    // could not be protected (mprotect refused: out of memory mappings); the
    // task stays whole.
    std::uint64_t shrinks_refused = 0;
    std::size_t deque = 0;       // tasks in its deque now (an estimate)
    std::size_t inbox = 0;       // pinned tasks of its made ready by other threads, not yet taken
    bool running = false;        // running a task now
    // Scheduling delay (docs/debugging.md, "Live tracing and metrics"): for
    // each start of a task here, the time since it was made ready (spawned,
    // woken, or yielded), on the coarse clock of task_info's stamps (a few
    // milliseconds' resolution: a delay within one tick reads 0).
    // sched_delay[i] counts those up to sched_delay_bound_ns(i) and above
    // the bucket before; sched_delay_sum_ns adds them all.
    std::array<std::uint64_t, runtime_delay_buckets> sched_delay{};
    std::uint64_t sched_delay_sum_ns = 0;
};

// runtime_stats are a runtime's counters (runtime::stats()).
struct runtime_stats {
    std::vector<worker_stats> workers;  // one per worker (one for workers = 0)
    std::uint64_t spawned_outside = 0;  // spawns from threads that are not its workers
    std::size_t injection_queue = 0;    // tasks waiting in the injection queue now
    std::size_t live_tasks = 0;         // spawned and not finished
    std::uint64_t stalls = 0;             // stalls the watchdog saw
    std::uint64_t stalls_suppressed = 0;  // of those, left unreported by the rate limit
    // shrink_faults: process-wide, the shrunk stacks that other code touched
    // (a read or write through a pointer into a parked task's frames), which
    // were restored there and then (docs/runtime.md).
    std::uint64_t shrink_faults = 0;
    // shrinking: this runtime shrinks idle tasks (shrink_idle_after is not 0
    // and the process can protect and restore a shrunk stack: docs/runtime.md).
    bool shrinking = false;
    // total() sums the workers' counters (worker = number of workers).
    [[nodiscard]] worker_stats total() const noexcept {
        worker_stats t;
        t.worker = static_cast<unsigned>(workers.size());
        for (const auto& w : workers) {
            t.spawned += w.spawned;
            t.finished += w.finished;
            t.switches += w.switches;
            t.steals += w.steals;
            t.stolen += w.stolen;
            t.sleeps += w.sleeps;
            t.injected += w.injected;
            t.timers += w.timers;
            t.io_waits += w.io_waits;
            t.io_polls += w.io_polls;
            t.shrinks += w.shrinks;
            t.restores += w.restores;
            t.shrunk_bytes += w.shrunk_bytes;
            t.shrinks_refused += w.shrinks_refused;
            t.deque += w.deque;
            t.inbox += w.inbox;
            t.running = t.running || w.running;
            for (unsigned i = 0; i < runtime_delay_buckets; ++i) t.sched_delay[i] += w.sched_delay[i];
            t.sched_delay_sum_ns += w.sched_delay_sum_ns;
        }
        return t;
    }
};

// metrics_text() renders s in the Prometheus text exposition format
// (version 0.0.4; docs/debugging.md): HELP and TYPE lines, counters named
// *_total, one sample per worker (label worker="i"), and the scheduling
// delay as the histogram weft_schedule_delay_seconds. Serve it with the
// content type "text/plain; version=0.0.4".
[[nodiscard]] WEFT_API std::string metrics_text(const runtime_stats& s);

// spawn() spawns into the runtime of the calling task. Throws: task_error
// (not_in_task), and as runtime::spawn().
template <class F, class R = std::invoke_result_t<std::decay_t<F>&>>
join_handle<R> spawn(F&& f, const spawn_options& options = {}) {
    return detail::spawn_on(detail::current_core("weft::spawn()", "from a plain thread, use runtime::spawn()"),
                            std::forward<F>(f), options);
}

// blocking() runs f() on the runtime's blocking thread pool and suspends
// only the calling task until it returns (for getaddrinfo, file IO, legacy
// libraries); returns its result or rethrows its exception. Outside a task
// it calls f() directly. A cancellation arriving meanwhile takes effect
// after f() returns (f cannot be interrupted).
template <class F, class R = std::invoke_result_t<std::decay_t<F>&>>
R blocking(F&& f) {
    if (!this_task::inside()) return std::invoke(std::forward<F>(f));
    // SHRINK-A2: the pool thread runs f, whose captures may point into this
    // task's frames, while the task is parked: its stack is not shrunk.
    detail::stack_pin pin;
    // WAITER-V4 (weft/waiter.hpp): the pool thread writes the job and the result
    // while this task is suspended; on a shared stack they and a copy of f
    // (moved from an rvalue) live in a heap block, and f must not point
    // into the task's frames (docs/runtime.md, "What a copy-stack task may
    // point at"; checked in debug builds).
    using G = std::remove_cvref_t<F>;
    constexpr bool holdable =
        std::is_object_v<G> && (std::is_lvalue_reference_v<F> ? std::is_copy_constructible_v<G>
                                                               : std::is_move_constructible_v<G>);
    struct context {
        std::remove_reference_t<F>* fn = nullptr;
        std::conditional_t<std::is_void_v<R>, bool, std::optional<R>> value{};
        std::exception_ptr error;
        std::conditional_t<holdable, std::optional<G>, char> own{};
        detail::blocking_job job{};
    };
    detail::stable<context> held;
    context& ctx = *held;
    ctx.fn = &f;
    if (held.off_frame()) {
        if constexpr (holdable) {
            ctx.fn = &ctx.own.emplace(std::forward<F>(f));
#ifndef NDEBUG
            detail::check_no_pointer_into_shared_stack(&*ctx.own, sizeof(G), "the weft::blocking() callable");
#endif
        } else {
            detail::blocking_on_shared_stack();
        }
    }
    detail::blocking_job& job = ctx.job;
    job.ctx = &ctx;
    job.run = [](void* p) noexcept {
        auto* c = static_cast<context*>(p);
        try {
            if constexpr (std::is_void_v<R>)
                std::invoke(std::forward<F>(*c->fn));
            else
                c->value.emplace(std::invoke(std::forward<F>(*c->fn)));
        } catch (...) {
            c->error = std::current_exception();
        }
    };
    detail::run_blocking(job);
    if (ctx.error) std::rethrow_exception(ctx.error);
    if constexpr (!std::is_void_v<R>) return std::move(*ctx.value);
}

namespace this_task {
// sleep_until() / sleep_for() suspend the current task until the time has
// come (never earlier). A suspension point. Throws: forced_unwind if the task
// is canceled meanwhile. Outside a task they block the calling thread
// (std::this_thread::sleep_until), as io calls and blocking() work from
// plain threads too.
WEFT_API void sleep_until(std::chrono::steady_clock::time_point t);
template <class Rep, class Period>
void sleep_for(std::chrono::duration<Rep, Period> d) {
    sleep_until(std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::nanoseconds>(d));
}
// runtime_stop_token() is the stop token of the calling task's runtime
// (runtime::get_stop_token()). Throws: task_error (not_in_task).
[[nodiscard]] WEFT_API std::stop_token runtime_stop_token();
}  // namespace this_task

// then() spawns (into the current task's runtime, or into rt) a
// continuation task that waits for h's task and calls f with its value
// (f() for a void task); returns the continuation's handle. An exception or
// cancellation of h's task passes to the continuation's join().
namespace detail {
// continuation() is then()'s task body: join h, pass the value on.
template <class T, class F>
auto continuation(join_handle<T>&& h, F&& f) {
    return [h = std::move(h), f = std::forward<F>(f)]() mutable {
        if constexpr (std::is_void_v<T>) {
            h.join();
            return std::invoke(f);
        } else {
            return std::invoke(f, h.join());
        }
    };
}
}  // namespace detail

template <class T, class F>
auto then(runtime& rt, join_handle<T>&& h, F&& f, const spawn_options& options = {}) {
    return rt.spawn(detail::continuation(std::move(h), std::forward<F>(f)), options);
}
template <class T, class F>
auto then(join_handle<T>&& h, F&& f, const spawn_options& options = {}) {
    return spawn(detail::continuation(std::move(h), std::forward<F>(f)), options);
}

// when_all() waits for every task of hs and returns their values in order
// (nothing for void tasks). If some failed, it still waits for all, then
// rethrows the first failure (in the order of hs). The handles are joined.
template <class T>
auto when_all(std::span<join_handle<T>> hs) {
    std::exception_ptr first;
    if constexpr (std::is_void_v<T>) {
        for (auto& h : hs) {
            try {
                h.join();
            } catch (...) {
                if (detail::forced_unwind_in_flight()) throw;
                if (!first) first = std::current_exception();
            }
        }
        if (first) std::rethrow_exception(first);
    } else {
        std::vector<std::optional<T>> out(hs.size());
        for (std::size_t i = 0; i < hs.size(); ++i) {
            try {
                out[i].emplace(hs[i].join());
            } catch (...) {
                if (detail::forced_unwind_in_flight()) throw;
                if (!first) first = std::current_exception();
            }
        }
        if (first) std::rethrow_exception(first);
        std::vector<T> values;
        values.reserve(out.size());
        for (auto& v : out) values.push_back(std::move(*v));
        return values;
    }
}
template <class T>
auto when_all(std::vector<join_handle<T>>& hs) {
    return when_all(std::span<join_handle<T>>(hs));
}

// when_any() waits until one task of hs has finished (hs not empty, all
// valid) and returns its index; join that handle for its value. With
// cancel_losers, every other task is then canceled (their handles stay
// valid: join or drop them). Throws: task_error (empty_handle);
// std::invalid_argument if hs is empty; forced_unwind if the waiting task
// is canceled.
template <class T>
std::size_t when_any(std::span<join_handle<T>> hs, bool cancel_losers = false) {
    std::vector<detail::task_record*> ts;
    ts.reserve(hs.size());
    for (auto& h : hs) {
        if (!h.valid()) detail::task_misuse(nullptr, task_errc::empty_handle);
        ts.push_back(h.record());
    }
    const std::size_t won = detail::wait_any(ts);
    if (cancel_losers)
        for (std::size_t i = 0; i < hs.size(); ++i)
            if (i != won) hs[i].cancel();
    return won;
}
template <class T>
std::size_t when_any(std::vector<join_handle<T>>& hs, bool cancel_losers = false) {
    return when_any(std::span<join_handle<T>>(hs), cancel_losers);
}

namespace detail {

// check_spawn() throws task_error (runtime_stopping) if c refuses spawns.
WEFT_API void check_spawn(runtime_core* c, std::string_view name);
// submit() registers and queues a new task; false (nothing queued) if the
// runtime began stopping meanwhile.
[[nodiscard]] WEFT_API bool submit(runtime_core* c, task_record* t, const spawn_options& o);
[[noreturn]] WEFT_API void spawn_refused(runtime_core* c, std::string_view name);

// task_closure<R, F> is a task's heap block: record, result, callable; the
// name follows it in the same allocation.
template <class R, class F>
struct task_closure final : task_block<R> {
    std::optional<F> fn;  // destroyed as soon as the body has run
    template <class G>
    explicit task_closure(G&& g) : fn(std::in_place, std::forward<G>(g)) {}

    // body() runs on the task's own stack: the callable between
    // task_begin() and task_end(), the outcome recorded.
    static void body(task_record* t) {
        auto* self = static_cast<task_closure*>(t);
        try {
            task_begin(t);
            if constexpr (std::is_void_v<R>)
                std::invoke(*self->fn);
            else
                self->value.emplace(std::invoke(*self->fn));
            t->outcome = task_state::done;
        } catch (...) {
            // Not catch (const forced_unwind&): see forced_unwind_in_flight().
            if (forced_unwind_in_flight()) {
                t->outcome = canceled_outcome(t);
                discard_callable(t);  // self->fn.reset(), with discarded_task() == t
                task_end(t);
                throw;
            }
            t->exception = std::current_exception();
            t->outcome = task_state::failed;
        }
        // The callable goes now, on the task's stack (what it captured may
        // be large or hold resources), not when the handle goes.
        self->fn.reset();
        task_end(t);
    }
    static void drop_callable(task_record* t) noexcept { static_cast<task_closure*>(t)->fn.reset(); }
    static void free_block(task_record* t) noexcept {
        auto* self = static_cast<task_closure*>(t);
        self->~task_closure();
        deallocate(self);
    }
    // allocate() / deallocate(): the aligned operator new only when the
    // block needs more than the default alignment.
    static void* allocate(std::size_t bytes) {
        if constexpr (alignof(task_closure) > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
            return ::operator new(bytes, std::align_val_t(alignof(task_closure)));
        else
            return ::operator new(bytes);
    }
    static void deallocate(void* p) noexcept {
        if constexpr (alignof(task_closure) > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
            ::operator delete(p, std::align_val_t(alignof(task_closure)));
        else
            ::operator delete(p);
    }
    static constexpr task_ops table{&body, &free_block, &drop_callable};
};

// spawn_on() makes a task's block and queues it. No stack is taken here:
// the task gets one when it first runs.
template <class F, class R>
join_handle<R> spawn_on(runtime_core* c, F&& f, const spawn_options& o) {
    static_assert(!requires { typename R::weft_coroutine_task; },
                  "weft: spawn(f) where f returns a weft::async would make a stackful task that returns an "
                  "unstarted coroutine; spawn the coroutine itself: spawn(f())");
    using block = task_closure<R, std::decay_t<F>>;
    check_spawn(c, o.name);
    // The block: record and callable, then the name (with its NUL; nothing
    // for an unnamed task). The fiber's room is taken at its first run
    // (SCHED-R1).
    const std::size_t name_bytes = o.name.empty() ? 0 : o.name.size() + 1;
    void* mem = block::allocate(sizeof(block) + name_bytes);
    block* t;
    try {
        t = ::new (mem) block(std::forward<F>(f));
    } catch (...) {
        block::deallocate(mem);
        throw;
    }
    if (name_bytes) {
        char* name = static_cast<char*>(mem) + sizeof(block);
        std::memcpy(name, o.name.data(), o.name.size());
        name[o.name.size()] = '\0';
        t->name = std::string_view(name, o.name.size());
    } else {
        t->name = std::string_view("", 0);  // never a null data(): it reaches memcpy (the watchdog's sample)
    }
    t->ops = &block::table;
    t->stack_size = o.stack_size;
    t->copy_stack = o.copy_stack;
    if (!submit(c, t, o)) {
        block::free_block(t);
        spawn_refused(c, o.name);
    }
    return join_handle<R>(t);
}

}  // namespace detail

}  // namespace weft
