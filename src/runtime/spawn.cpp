// spawn.cpp: layer L4, spawning (registering and queueing a new task), the
// registry of live tasks (runtime::tasks()), the statistics
// (runtime::stats()) and a detached task's unhandled exception.

#include "runtime_core.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

namespace weft::detail {

namespace {

std::atomic<std::uint64_t> next_task_id{1};

}  // namespace

// ---- spawning, the registry ------------------------------------------------------------

bool runtime_core::submit(task_record* t, const spawn_options& o) {
    t->sched = this;
    t->pinned = o.pinned || o.copy_stack;
    worker* w = this_worker();
    const bool local = w && w->rt == this;
    t->home = local ? w->index : round_robin.fetch_add(1, std::memory_order_relaxed) % nworkers;
    t->shard = local ? w->index : nworkers;
    {
        shard& s = shards[t->shard];
        std::lock_guard g(s.mu);
        // Checked under the shard lock: stop() sets `stopping` and then
        // visits every shard under its lock, so a task listed here after
        // that visit cannot exist.
        if (stopping.load(std::memory_order_acquire)) return false;
        t->id = next_task_id.fetch_add(1, std::memory_order_relaxed);
        s.tasks.push_front(t);
        live.fetch_add(1, std::memory_order_relaxed);
    }
    refs.fetch_add(1, std::memory_order_relaxed);
    auto deadline = o.deadline;
    if (o.timeout.count() > 0) deadline = std::min(deadline, std::chrono::steady_clock::now() + o.timeout);
    if (deadline != std::chrono::steady_clock::time_point::max()) {
        t->has_deadline = true;
        add_timer(&t->deadline_timer, deadline, 0);
    }
    set_state(t, task_state::ready);
    if (local) {
        w->view.spawned.bump();
        if (w->view.trace) [[unlikely]] {
            w->view.trace->name(t);
            w->view.trace->instant(trace_event::spawn, t->id);
        }
    } else {
        spawned_outside.fetch_add(1, std::memory_order_relaxed);
        if (outside_trace) [[unlikely]] trace_outside(trace_event::spawn, t);
    }
    if (local)
        push_local(w, t);
    else if (t->pinned)
        push_inbox(ws[t->home].get(), t);
    else
        inject(t);
    return true;
}

std::vector<task_info> runtime_core::tasks() const {
    std::vector<task_info> out;
    const std::int64_t now = coarse_now_ns();
    for (unsigned i = 0; i <= nworkers; ++i) {
        std::lock_guard g(shards[i].mu);
        for (task_record* t = shards[i].tasks.front(); t; t = t->reg_next) {
            task_info info;
            info.id = t->id;
            info.name = std::string(t->name);
            info.state = t->state.load(std::memory_order_acquire);
            info.worker = t->worker.load(std::memory_order_relaxed);
            const std::int64_t since = t->state_since.load(std::memory_order_relaxed);
            info.time_in_state = std::chrono::nanoseconds(now > since ? now - since : 0);
            info.pinned = t->pinned;
            out.push_back(std::move(info));
        }
    }
    return out;
}

runtime_stats runtime_core::stats() const {
    runtime_stats out;
    out.workers.reserve(nworkers);
    for (const auto& w : ws) {
        const worker_view& v = w->view;
        worker_stats s;
        s.worker = w->index;
        s.spawned = v.spawned.get();
        s.finished = v.finished.get();
        // The delays before `switches` (delay_histogram::read()).
        v.delay.read(s.sched_delay, s.sched_delay_sum_ns, v.switches);
        s.switches = v.switches.get();
        s.steals = v.steals.get();
        s.stolen = v.stolen.get();
        s.sleeps = v.sleeps.get();
        s.injected = v.injected.get();
        s.timers = v.timers.get();
        s.io_waits = v.io_waits.get();
        s.io_polls = v.io_polls.get();
        s.shrinks = v.shrinks.get();
        s.restores = v.restores.get();
        s.shrunk_bytes = v.shrunk_bytes.get();
        s.shrinks_refused = v.shrinks_refused.get();
        s.deque = static_cast<std::size_t>(w->deque.size_estimate());
        {
            std::lock_guard g(w->inbox_mu);
            s.inbox = w->inbox.size;
        }
        s.running = v.current.load(std::memory_order_relaxed) != nullptr;
        out.workers.push_back(s);
    }
    out.spawned_outside = spawned_outside.load(std::memory_order_relaxed);
    out.injection_queue = inj_len.load(std::memory_order_relaxed);
    out.live_tasks = static_cast<std::size_t>(live.load(std::memory_order_relaxed));
    out.shrink_faults = shrink_faults();
    out.shrinking = shrink_after_ns > 0;
    if (dog) {
        out.stalls = dog->stalls();
        out.stalls_suppressed = dog->suppressed();
    }
    return out;
}

void runtime_core::unhandled(task_record* t, std::exception_ptr e) noexcept {
    task_info info;
    try {
        info.id = t->id;
        info.name = std::string(t->name);
        info.state = t->outcome;
        info.worker = t->worker.load(std::memory_order_relaxed);
    } catch (...) {
    }
    std::string who;
    try {
        who = "detached " + describe_named("task", info.name, t) + " (id " + std::to_string(info.id) + ")";
    } catch (...) {
    }
    report_unhandled(info, e, who.empty() ? "a detached task" : who.c_str(),
                     "nobody joins a detached task, so its exception has nowhere to go: join() the task (its "
                     "exception is rethrown there) instead of detaching it, catch the exception in the task's body, "
                     "or set runtime_options::unhandled to receive such exceptions");
}

void runtime_core::report_unhandled(const task_info& info, std::exception_ptr e, const char* who,
                                    const char* fix) noexcept {
    if (opts.unhandled) {
        opts.unhandled(info, e);
        return;
    }
    // The default: say who failed, with what, and what to do, then end the
    // process (runtime_options::unhandled). std::terminate() is called
    // inside the handler, with the exception active, so that the terminate
    // handler (libstdc++'s names the type and what()) and a debugger's
    // backtrace see it, rather than "terminate called without an active
    // exception".
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& x) {
        std::fprintf(stderr, "weft: %s failed: %s\nweft: %s; the default ends the program here.\n", who, x.what(),
                     fix);
        std::terminate();
    } catch (...) {
        std::fprintf(stderr,
                     "weft: %s failed with an exception that is not a std::exception\nweft: %s; the default ends the "
                     "program here.\n",
                     who, fix);
        std::terminate();
    }
}

}  // namespace weft::detail
