// runtime.cpp: layer L4, a runtime's construction, the choice of a task's
// stack, the entry points the public headers (weft/runtime.hpp and the
// layers above) call, and weft::runtime itself. The scheduler is in the
// other files of this folder; runtime_core.hpp lists them.

#include "runtime_core.hpp"

#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "debug.hpp"

namespace weft::detail {

namespace {

// guarded_stack_budget() is how many guarded stacks one runtime keeps at
// once: a quarter of vm.max_map_count (each costs two mappings), so that
// half the process's mappings stay free for everything else.
std::size_t guarded_stack_budget() noexcept {
    static const std::size_t budget = [] {
        std::size_t maps = 65530;
        if (std::FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
            unsigned long v = 0;
            if (std::fscanf(f, "%lu", &v) == 1 && v > 0) maps = v;
            std::fclose(f);
        }
        return std::max<std::size_t>(maps / 4, 256);
    }();
    return budget;
}

// The runtime's pool holds at most the budget of guarded stacks mapped,
// idle ones included: a stack a task freed on one worker waits in that
// worker's cache while another worker maps new ones, so counting only the
// stacks in use (guarded.live) let the mappings outgrow the budget and use
// up vm.max_map_count, and then the slab fallback could not map either
// (R7, a million sleeping tasks on two workers). At the limit the pool
// throws stack_pool_error (ENOMEM) and make_fiber() takes a slab stack.
// Without stack_fallback there is nothing to fall back to: the pool maps
// guarded stacks until the system refuses, as the option documents.
stack_pool_options pool_options(const runtime_options& o) {
    stack_pool_options p;
    p.stack_size = o.stack_size;
    if (o.stack_fallback) p.max_stacks = guarded_stack_budget();
    return p;
}

runtime_core* core_of(task_record* t) noexcept { return static_cast<runtime_core*>(t->sched); }

[[noreturn]] void bad_option(const std::string& what) {
    throw task_error(task_errc::bad_option, "weft: bad runtime option: " + what);
}

}  // namespace


// task_body is every task's fiber body: the typed part is behind t->run.
struct task_body {
    task_record* t;
    void operator()() const { t->ops->run(t); }
};

// fiber_room_bytes is the size of a fiber room: the heap block that holds a
// shrinkable task's fiber record and wait arena (a split_block, create_split()),
// the larger of the two stack kinds'.
constexpr std::size_t fiber_room_bytes = std::max(sizeof(split_block<plain_fiber, task_body, guarded_stack>),
                                                  sizeof(split_block<plain_fiber, task_body, slab_stack>));

// SCHED-R1  A task's block reserves no fiber room at spawn. A task that may
//           be shrunk takes a room from its worker's free list when it first
//           runs (make_fiber()) and gives it back to the list of the worker it
//           ends on, once its fiber is destroyed (finish_task()); a parked or
//           shrunk task keeps its room, which holds its record and wait arena.
//           A room is in exactly one place: a task (t->shrink.room) or one free
//           list, which only its worker's thread touches; a list keeps at most
//           max_free_rooms and frees the rest. So spawning N tasks that run one
//           after another touches a few rooms, not N (when the room was part of
//           the task's block, 100,000 tasks spawned at once each touched 480
//           more bytes, and R2 took about twice as long as with shrinking off).
constexpr std::size_t max_free_rooms = 1024;

void* runtime_core::take_room(worker* w) {
    if (void* r = w->shrink.rooms) {
        w->shrink.rooms = *static_cast<void**>(r);
        --w->shrink.room_count;
        return r;
    }
    if (void* r = std::malloc(fiber_room_bytes)) return r;
    throw std::bad_alloc();
}

void runtime_core::give_room(worker* w, void* room) noexcept {
    if (w->shrink.room_count >= max_free_rooms) {
        std::free(room);
        return;
    }
    *static_cast<void**>(room) = w->shrink.rooms;
    w->shrink.rooms = room;
    ++w->shrink.room_count;
}

runtime_core::runtime_core(const runtime_options& o)
    : opts(o), nthreads(o.workers), nworkers(o.workers ? o.workers : 1), guarded(pool_options(o)) {
    if (o.workers > 1024) bad_option("workers must be at most 1024");
    if (o.blocking_threads == 0) bad_option("blocking_threads must be at least 1");
    shards = std::make_unique<shard[]>(nworkers + 1);
    if (o.shrink_idle_after.count() < 0) bad_option("shrink_idle_after must not be negative");
    shrink_after_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(o.shrink_idle_after).count();
    // SHRINK-P2; where it cannot work, shrinking is off (runtime_stats::shrinking).
    if (shrink_after_ns > 0 && !install_shrink_fault()) shrink_after_ns = 0;
    guarded_budget = guarded_stack_budget();
    // A slab slot is the stack plus its guard word, in whole pages.
    if (o.stack_size < 2 * page_size() || !round_up(o.stack_size + slab_stack::guard_bytes, page_size(), slabs.slot))
        bad_option("stack_size must be at least two pages");
    std::random_device rd;
    for (unsigned i = 0; i < nworkers; ++i) {
        auto w = std::make_unique<worker>();
        w->rt = this;
        w->index = i;
        w->solo = nworkers == 1;  // SCHED-Q3
        w->rng = (std::uint64_t(rd()) << 32 | rd()) | 1;
        ws.push_back(std::move(w));
    }
    idle.reserve(nworkers);
    // OBSERVE-O3: the trace buffers exist before any worker thread does.
    trace_path = o.trace_path;
    if (trace_path.empty())
        if (const char* env = std::getenv("WEFT_TRACE"); env && *env) trace_path = env;
    if (o.trace_signal < 0 || o.trace_signal >= NSIG || o.trace_signal == SIGKILL || o.trace_signal == SIGSTOP)
        bad_option("trace_signal is not a signal number that can be caught");
    if (!trace_path.empty() || o.trace_live || o.trace_signal != 0) {
        if (o.trace_events == 0) bad_option("trace_events must be at least 1");
        trace_origin = steady_now_ns();
        for (unsigned i = 0; i <= nworkers; ++i) traces.push_back(std::make_unique<trace_buffer>(o.trace_events));
        for (unsigned i = 0; i < nworkers; ++i) ws[i]->view.trace = traces[i].get();
        outside_trace = traces.back().get();
    }
    watchdog_options wd = o.watchdog;
    watchdog_from_env(wd);
    if (wd.enabled) {
        if (wd.threshold.count() <= 0) bad_option("watchdog.threshold must be positive");
        if (wd.burst == 0) bad_option("watchdog.burst must be at least 1");
        if (wd.sample_signal < 0 || wd.sample_signal >= NSIG) bad_option("watchdog.sample_signal is not a signal number");
        if (o.trace_signal != 0 && wd.sample_signal == o.trace_signal)
            bad_option("trace_signal must differ from watchdog.sample_signal");
        std::vector<worker_view*> views;
        for (auto& w : ws) views.push_back(&w->view);
        dog = std::make_unique<watchdog>(wd, std::move(views));
    }
    const auto start = std::chrono::steady_clock::now();
    for (unsigned i = 0; i <= nworkers; ++i) timer_shards.push_back(std::make_unique<timer_shard>(start));
    // abandon() ends the threads started so far, for a constructor that throws.
    auto abandon = [this] {
        shutdown.store(true);
        for (auto& w : ws) {
            w->futex.store(1);
            futex_wake(&w->futex, 1);
        }
        for (auto& th : threads) th.join();
    };
    try {
        for (unsigned i = 0; i < nthreads; ++i) threads.emplace_back([this, i] { thread_main(ws[i].get()); });
    } catch (...) {
        abandon();
        throw;
    }
    if (o.trace_signal != 0) {
        // OBSERVE-O5: last, so that a runtime that failed to start is never
        // registered; stop() leaves the registry.
        trace_sig_path = o.trace_signal_path.empty() ? "weft-trace-" + std::to_string(::getpid()) + ".json"
                                                     : o.trace_signal_path;
        try {
            trace_signal_register(o.trace_signal, this, [](void* c) {
                auto* core = static_cast<runtime_core*>(c);
                (void)core->write_live_trace(core->trace_sig_path);
            });
        } catch (...) {
            abandon();
            throw;
        }
        trace_sig = o.trace_signal;
    }
}

bool runtime_core::write_live_trace(const std::string& path) const {
    if (traces.empty()) {
        std::fprintf(stderr, "weft: write_trace(%s): this runtime records no trace (runtime_options::trace_live)\n",
                     path.c_str());
        return false;
    }
    // The live tasks' names from the registry: a long-lived task's name may
    // have left the names' ring.
    std::vector<std::pair<std::uint64_t, std::string>> names;
    try {
        for (unsigned i = 0; i <= nworkers; ++i) {
            std::lock_guard g(shards[i].mu);
            for (task_record* t = shards[i].tasks.front(); t; t = t->reg_next)
                if (!t->name.empty()) names.emplace_back(t->id, std::string(t->name));
        }
    } catch (...) {
        names.clear();
    }
    std::vector<const trace_buffer*> bufs;
    for (const auto& b : traces) bufs.push_back(b.get());
    return write_trace(path, nworkers, bufs, trace_origin, true, std::move(names));
}

runtime_core::~runtime_core() {
    if (trace_sig) trace_signal_unregister(this);
    for (auto& w : ws)
        while (void* r = w->shrink.rooms) {
            w->shrink.rooms = *static_cast<void**>(r);
            std::free(r);
        }
}

// ---- stacks ------------------------------------------------------------------------

// make_fiber() gives a task that runs for the first time its fiber: a
// guarded pooled stack while the budget lasts, then a slab stack; a
// copy-stack task runs on its home worker's shared stacks.
fiber_record* runtime_core::make_fiber(worker* w, task_record* t) {
    fiber_options fo;
    fo.name = t->name;
    const task_body body{t};
    if (t->copy_stack) {
        worker* home = ws[t->home].get();
        std::call_once(home->shared_once, [&] {
            shared_stack_pool_options so;
            so.stack_size = opts.copy_stack_size;
            home->shared = std::make_unique<shared_stack_pool>(so);
        });
        fo.stack_size = t->stack_size;
        return make_block<plain_fiber>(shared_stack(*home->shared), body, fo);
    }
    fo.stack_size = t->stack_size ? t->stack_size : opts.stack_size;
    const bool slab_fits = opts.stack_fallback && fo.stack_size <= opts.stack_size;
    // A task whose stack may be shrunk keeps its fiber record off the stack
    // (create_split(): docs/runtime.md, "Idle tasks give their stack back").
    const bool split = shrink_after_ns > 0 && !t->stackless;
    auto make = [&](auto alloc) -> fiber_record* {
        if (split) {
            using A = decltype(alloc);
            using B = split_block<plain_fiber, task_body, A>;
            static_assert(sizeof(B) <= fiber_room_bytes && alignof(B) <= alignof(std::max_align_t));  // rooms come from malloc
            void* room = take_room(w);  // SCHED-R1
            fiber_record* f;
            try {
                f = create_split<B>(std::move(alloc), body, fo, room);
            } catch (...) {
                give_room(w, room);
                throw;
            }
            t->shrink.room = room;
            t->shrink.shrinkable = true;
            return f;
        }
        return make_block<plain_fiber>(std::move(alloc), body, fo);
    };
    if (slab_fits && guarded.live.load(std::memory_order_relaxed) >= guarded_budget) return make(slab_stack(&slabs));
    try {
        return make(guarded_stack(&guarded));
    } catch (const stack_error& e) {
        // Out of mappings (or memory): a slab stack may still be had.
        if (!slab_fits || e.code() != std::errc::not_enough_memory) throw;
        return make(slab_stack(&slabs));
    }
}

// ---- entry points for the headers ------------------------------------------------------

void check_spawn(runtime_core* c, std::string_view name) {
    if (c->stopping.load(std::memory_order_acquire)) spawn_refused(c, name);
    if (c->draining.load(std::memory_order_acquire)) [[unlikely]] {
        // shutdown(): the runtime's own tasks may still spawn (their work
        // goes on until the deadline); nobody else may.
        const task_record* t = current_task();
        if (!t || t->sched != c) spawn_refused(c, name);
    }
}

bool submit(runtime_core* c, task_record* t, const spawn_options& o) { return c->submit(t, o); }

void spawn_refused(runtime_core*, std::string_view name) {
    throw task_error(task_errc::runtime_stopping,
                     "weft: spawn of " + describe_named("task", name, nullptr) + " on a runtime that is stopping");
}

unsigned parallelism_from(unsigned cpus, const char* cpu_max) noexcept {
    if (cpus == 0) cpus = 1;
    // cgroup v2's cpu.max: "max PERIOD" (no quota) or "QUOTA PERIOD" in us.
    if (!cpu_max) return cpus;
    char* end = nullptr;
    const long long quota = std::strtoll(cpu_max, &end, 10);
    if (end == cpu_max || quota <= 0 || *end != ' ') return cpus;
    const char* p = end + 1;
    const long long period = std::strtoll(p, &end, 10);
    if (end == p || period <= 0) return cpus;
    const long long limit = (quota + period - 1) / period;
    return limit < static_cast<long long>(cpus) ? static_cast<unsigned>(limit) : cpus;
}

runtime_core* current_core(const char* call, const char* instead) {
    task_record* t = current_task();
    if (!t) not_in_task(call, instead);
    return core_of(t);
}

void drive_until(runtime_core* c, task_record* root) { c->drive(root); }

poller* runtime_poller(runtime_core* c, make_poller_fn make) {
    if (poller* p = c->io.load(std::memory_order_acquire)) return p;
    std::lock_guard g(c->io_make_mu);
    if (poller* p = c->io.load(std::memory_order_relaxed)) return p;
    c->io_owned = make(c, c->opts);
    poller* p = c->io_owned.get();
    c->io.store(p, std::memory_order_release);
    // A worker that went to sleep before there was a poller waits on its futex word:
    // wake them all, so that the watcher starts polling (SCHED-I1).
    // SCHED-I3: with a per-worker poller kick() wakes a worker through its
    // ring only, so the futex is woken here too, for a worker still asleep
    // on its word; and every ring is interrupted, for a worker that read its
    // word before a waker stored it and this poller after it was published:
    // that waker may have read no poller (and woken only the futex), and
    // wake_sleeper() finds the worker no longer sleeping
    // (models/worker_rings.pml, BUG_NO_PUBLISH_RING).
    const bool rings = c->nthreads != 0 && p->per_worker();
    for (auto& w : c->ws) {
        c->wake_sleeper(w.get());
        futex_wake(&w->futex, 1);
        if (rings) p->wake_worker(w->index);
    }
    return p;
}

int worker_index(runtime_core* c) noexcept {
    worker* w = this_worker();
    if (!w || w->index >= c->ws.size() || c->ws[w->index].get() != w) return -1;
    return static_cast<int>(w->index);
}

void note_io_wait() noexcept {
    if (worker* w = this_worker()) w->view.io_waits.bump();
}

void retain_core(runtime_core* c) noexcept { c->refs.fetch_add(1, std::memory_order_relaxed); }
void release_core(runtime_core* c) noexcept { c->released(); }

void run_blocking(blocking_job& job) {
    task_record* t = current_task();
    if (!t) not_in_task("weft::blocking()");
    need_stack(t);
    job.task = t;
    // Not cancellable: the call cannot be interrupted; a cancellation takes
    // effect at the next suspension point after it.
    job.word = arm(t, false);
    core_of(t)->blocking(job);
    (void)park(t);
}

void blocking_on_shared_stack() {
    throw task_error(task_errc::bad_option,
                     "weft::blocking() from a copy-stack task with a callable that can be neither copied nor "
                     "moved: it would run on another thread while the task's frames are saved elsewhere "
                     "(docs/runtime.md, \"What a copy-stack task may point at\")");
}

}  // namespace weft::detail

namespace weft {

namespace {
// warn_hook_without_bridge() says once per process that libweft_hook.so is
// loaded (LD_PRELOAD, usually) but no bridge registered with it: the hook
// then calls the plain function, and a blocking call blocks its worker,
// which is what the user preloaded it to avoid (hook/README.md). The core
// does not link the hook: it asks the dynamic linker.
void warn_hook_without_bridge() noexcept {
    static std::atomic<bool> looked{false};
    if (looked.exchange(true, std::memory_order_relaxed)) return;
    using bridged_fn = int (*)();
    const auto bridged = reinterpret_cast<bridged_fn>(::dlsym(RTLD_DEFAULT, "weft_hook_bridged"));
    if (bridged && bridged() == 0)
        std::fputs("weft: libweft_hook.so is loaded, but this program was built without its bridge "
                   "(link weft::hook, or compile hook/bridge.cpp into it): every hooked call runs the "
                   "plain blocking function and blocks its worker\n",
                   stderr);
}
}  // namespace

runtime::runtime(const runtime_options& options) : core_(new detail::runtime_core(options)) { warn_hook_without_bridge(); }

runtime::~runtime() {
    if (detail::task_record* t = detail::current_task(); t && t->sched == core_) {
        char buf[256];
        detail::text_writer w(buf, sizeof buf);
        w.text("weft: a runtime was destroyed from inside its own task (id ").dec(t->id).text(
            "); it would wait for itself");
        detail::fatal_message(w.c_str());
    }
    try {
        core_->stop();
    } catch (const std::exception& e) {
        // stop() refuses only to drive a caller-driven runtime from inside a
        // task (of another runtime): a destructor cannot report that.
        char buf[512];
        detail::text_writer w(buf, sizeof buf);
        w.text("weft: a runtime could not stop in its destructor: ").text(e.what());
        detail::fatal_message(w.c_str());
    }
    core_->released();
}

std::size_t runtime::run_once() { return core_->run_once(); }

std::optional<std::chrono::steady_clock::time_point> runtime::next_timer_due() const noexcept {
    const std::int64_t e = core_->earliest_deadline();
    if (e == INT64_MAX) return std::nullopt;
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(e));
}

std::size_t runtime::run_for(std::chrono::nanoseconds budget) {
    const auto end = std::chrono::steady_clock::now() + budget;
    std::size_t total = 0;
    for (;;) {
        const std::size_t n = run_once();
        total += n;
        if (n == 0 || std::chrono::steady_clock::now() >= end) return total;
    }
}

void runtime::stop() { core_->stop(); }

std::size_t runtime::shutdown(std::chrono::steady_clock::time_point deadline) { return core_->drain_then_stop(deadline); }

void runtime::shrink_idle() noexcept { core_->ask_sweep(); }

std::stop_token runtime::get_stop_token() const noexcept { return core_->stop_src.get_token(); }

unsigned runtime::workers() const noexcept { return core_->nthreads; }

std::size_t runtime::live_tasks() const noexcept {
    return static_cast<std::size_t>(core_->live.load(std::memory_order_acquire));
}

std::vector<task_info> runtime::tasks() const { return core_->tasks(); }

runtime_stats runtime::stats() const { return core_->stats(); }

bool runtime::write_trace(const std::string& path) const { return core_->write_live_trace(path); }

std::string runtime::metrics_text() const { return weft::metrics_text(core_->stats()); }

unsigned available_parallelism() noexcept {
    unsigned cpus = 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = static_cast<unsigned>(CPU_COUNT(&set));
    if (cpus == 0) cpus = std::thread::hardware_concurrency();
    // The process's own cgroup (v2): /proc/self/cgroup is "0::/PATH".
    char text[64] = {};
    if (FILE* cg = std::fopen("/proc/self/cgroup", "re")) {
        char line[512];
        std::string path;
        while (std::fgets(line, sizeof line, cg))
            if (std::strncmp(line, "0::", 3) == 0) {
                path.assign(line + 3);
                while (!path.empty() && (path.back() == '\n' || path.back() == '/')) path.pop_back();
            }
        std::fclose(cg);
        const std::string file = "/sys/fs/cgroup" + path + "/cpu.max";
        if (FILE* f = std::fopen(file.c_str(), "re")) {
            if (!std::fgets(text, sizeof text, f)) text[0] = '\0';
            std::fclose(f);
        }
    }
    return detail::parallelism_from(cpus, text[0] ? text : nullptr);
}

namespace this_task {

void sleep_until(std::chrono::steady_clock::time_point when) {
    detail::task_record* t = detail::current_task();
    if (!t) {
        // A plain thread sleeps, as io calls block one (weft/io/handle.hpp).
        std::this_thread::sleep_until(when);
        return;
    }
    detail::need_stack(t);
    const std::uint64_t word = detail::arm(t, true);
    if (detail::park_until(t, word, &when) == detail::wait_status::canceled) detail::raise_forced_unwind();
}

std::stop_token runtime_stop_token() {
    return detail::current_core("weft::this_task::runtime_stop_token()")->stop_src.get_token();
}

}  // namespace this_task

}  // namespace weft
