// metrics.cpp: runtime_stats in the Prometheus text exposition format
// (weft::metrics_text(), runtime::metrics_text(); docs/debugging.md, "Live
// tracing and metrics"). Pure formatting: it reads a runtime_stats value,
// nothing of a runtime.

#include <cinttypes>
#include <cstdio>
#include <string>

#include "weft/runtime.hpp"

namespace weft {

namespace {

// out is the text being built, with the small formatting steps each
// metric family needs.
struct out {
    std::string s;

    void family(const char* name, const char* type, const char* help) {
        s += "# HELP ";
        s += name;
        s += ' ';
        s += help;
        s += "\n# TYPE ";
        s += name;
        s += ' ';
        s += type;
        s += '\n';
    }
    void sample(const char* name, const char* labels, std::uint64_t v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, " %" PRIu64 "\n", v);
        s += name;
        s += labels;
        s += buf;
    }
    // One value for the runtime.
    void single(const char* name, const char* type, const char* help, std::uint64_t v) {
        family(name, type, help);
        sample(name, "", v);
    }
    // One value per worker, labelled worker="i".
    template <class Get>
    void per_worker(const runtime_stats& st, const char* name, const char* type, const char* help, Get get) {
        family(name, type, help);
        for (const worker_stats& w : st.workers) {
            char labels[32];
            std::snprintf(labels, sizeof labels, "{worker=\"%u\"}", w.worker);
            sample(name, labels, static_cast<std::uint64_t>(get(w)));
        }
    }
};

// seconds() writes ns as seconds, exactly (9 decimals).
std::string seconds(std::uint64_t ns) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%" PRIu64 ".%09" PRIu64, ns / 1'000'000'000u, ns % 1'000'000'000u);
    return buf;
}

}  // namespace

std::string metrics_text(const runtime_stats& st) {
    out o;
    o.s.reserve(4096 + st.workers.size() * 3072);
    o.single("weft_workers", "gauge", "Workers of the runtime (1 for a runtime driven by its caller).",
             st.workers.size());
    o.single("weft_live_tasks", "gauge", "Tasks spawned and not yet finished.", st.live_tasks);
    o.single("weft_injection_queue_tasks", "gauge", "Tasks waiting in the injection queue.", st.injection_queue);
    o.single("weft_spawned_outside_total", "counter", "Tasks spawned by threads that are not workers of the runtime.",
             st.spawned_outside);
    o.single("weft_stalls_total", "counter", "Stalls the starvation watchdog saw.", st.stalls);
    o.single("weft_stalls_suppressed_total", "counter", "Stalls the watchdog left unreported by its rate limit.",
             st.stalls_suppressed);
    o.single("weft_shrink_faults_total", "counter",
             "Shrunk task stacks that other code touched (process-wide).", st.shrink_faults);
    o.single("weft_shrinking", "gauge", "1 if the runtime shrinks idle tasks' stacks.", st.shrinking ? 1 : 0);

    o.per_worker(st, "weft_worker_spawned_total", "counter", "Tasks spawned by tasks running on the worker.",
                 [](const worker_stats& w) { return w.spawned; });
    o.per_worker(st, "weft_worker_finished_total", "counter", "Tasks that ended on the worker.",
                 [](const worker_stats& w) { return w.finished; });
    o.per_worker(st, "weft_worker_switches_total", "counter", "Switches into a task on the worker.",
                 [](const worker_stats& w) { return w.switches; });
    o.per_worker(st, "weft_worker_steals_total", "counter", "Steals that took tasks from another worker.",
                 [](const worker_stats& w) { return w.steals; });
    o.per_worker(st, "weft_worker_stolen_tasks_total", "counter", "Tasks the worker's steals moved to it.",
                 [](const worker_stats& w) { return w.stolen; });
    o.per_worker(st, "weft_worker_sleeps_total", "counter", "Times the worker slept for want of work.",
                 [](const worker_stats& w) { return w.sleeps; });
    o.per_worker(st, "weft_worker_injected_total", "counter", "Tasks the worker took from the injection queue.",
                 [](const worker_stats& w) { return w.injected; });
    o.per_worker(st, "weft_worker_timers_fired_total", "counter", "Timers the worker fired.",
                 [](const worker_stats& w) { return w.timers; });
    o.per_worker(st, "weft_worker_io_waits_total", "counter", "IO waits begun by tasks running on the worker.",
                 [](const worker_stats& w) { return w.io_waits; });
    o.per_worker(st, "weft_worker_io_polls_total", "counter", "Polls for IO readiness the worker made.",
                 [](const worker_stats& w) { return w.io_polls; });
    o.per_worker(st, "weft_worker_stack_shrinks_total", "counter", "Idle task stacks the worker shrank.",
                 [](const worker_stats& w) { return w.shrinks; });
    o.per_worker(st, "weft_worker_stack_restores_total", "counter", "Shrunk task stacks the worker restored.",
                 [](const worker_stats& w) { return w.restores; });
    o.per_worker(st, "weft_worker_shrunk_bytes_total", "counter", "Live stack bytes the worker's shrinks kept on the heap.",
                 [](const worker_stats& w) { return w.shrunk_bytes; });
    o.per_worker(st, "weft_worker_stack_shrinks_refused_total", "counter",
                 "Shrinks the worker did not make because the stack could not be protected.",
                 [](const worker_stats& w) { return w.shrinks_refused; });
    o.per_worker(st, "weft_worker_deque_tasks", "gauge", "Tasks in the worker's deque (an estimate).",
                 [](const worker_stats& w) { return w.deque; });
    o.per_worker(st, "weft_worker_inbox_tasks", "gauge", "Pinned tasks made ready for the worker, not yet taken.",
                 [](const worker_stats& w) { return w.inbox; });
    o.per_worker(st, "weft_worker_running", "gauge", "1 while the worker runs a task.",
                 [](const worker_stats& w) { return w.running ? 1 : 0; });

    // The scheduling delay: cumulative buckets, then the sum and the count.
    const char* h = "weft_schedule_delay_seconds";
    o.family(h, "histogram",
             "Time from a task being made ready (spawned, woken, yielded) to its start on the worker, "
             "on the coarse clock.");
    for (const worker_stats& w : st.workers) {
        std::uint64_t cumulative = 0;
        char labels[80];
        for (unsigned i = 0; i < runtime_delay_buckets; ++i) {
            cumulative += w.sched_delay[i];
            const std::uint64_t bound = sched_delay_bound_ns(i);
            const std::string le = bound == UINT64_MAX ? "+Inf" : seconds(bound);
            std::snprintf(labels, sizeof labels, "{worker=\"%u\",le=\"%s\"}", w.worker, le.c_str());
            o.sample("weft_schedule_delay_seconds_bucket", labels, cumulative);
        }
        std::snprintf(labels, sizeof labels, "{worker=\"%u\"}", w.worker);
        o.s += "weft_schedule_delay_seconds_sum";
        o.s += labels;
        o.s += ' ';
        o.s += seconds(w.sched_delay_sum_ns);
        o.s += '\n';
        o.sample("weft_schedule_delay_seconds_count", labels, cumulative);
    }
    return o.s;
}

}  // namespace weft
