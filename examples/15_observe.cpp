// 15_observe.cpp: looking inside a running runtime (docs/debugging.md).
//
// Three things a runtime shows of itself:
//   1. runtime::stats(): counters per worker (tasks spawned and finished,
//      switches, steals, sleeps, timers, IO waits, queue lengths), readable
//      from any thread while tasks run;
//   2. the task trace: with WEFT_TRACE=file.json in the environment (or
//      runtime_options::trace_path) the runtime writes, when it stops, a
//      Chrome / Perfetto trace of which task ran when on which worker, with
//      spawns, steals, sleeps and wakes. Open it in ui.perfetto.dev, in
//      chrome://tracing or speedscope, or draw it with
//      tools/trace/weft_trace_plot.py;
//   3. the starvation watchdog: a task that runs longer than a threshold
//      without reaching a suspension point is reported, once, with where it
//      was (WEFT_WATCHDOG=milliseconds, or runtime_options::watchdog).
//
// Run it as `WEFT_TRACE=/tmp/weft.json ./weft_example_15_observe` and look
// at the trace.

#include <weft/runtime.hpp>
#include <weft/sync.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "example_support.hpp"  // check() and failures

using namespace std::chrono_literals;

namespace {

// The watchdog's handler: here it counts and prints the first line of the
// report (the default prints the whole report, backtrace included, to
// stderr).
std::atomic<int> cruncher_reports{0};
void on_stall(const weft::stall_report& r, void*) noexcept {
    if (r.task_name == "cruncher" || r.task_id == 0) cruncher_reports.fetch_add(1);
    const std::string_view first = r.text.substr(0, r.text.find('\n'));
    std::printf("  watchdog: %.*s\n  (%zu frames in its backtrace)\n", int(first.size()), first.data(),
                r.backtrace.size());
}

// A task that computes for a while without suspending: it starves every
// other task waiting for its worker.
[[gnu::noinline]] std::uint64_t crunch(std::chrono::milliseconds how_long) {
    std::uint64_t x = 1;
    const auto end = std::chrono::steady_clock::now() + how_long;
    while (std::chrono::steady_clock::now() < end) x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x;
}

}  // namespace

int main() {
    weft::runtime_options o;
    o.workers = 2;
    o.watchdog.enabled = true;
    o.watchdog.threshold = 50ms;
    o.watchdog.on_stall = &on_stall;
    weft::runtime rt(o);

    // 1. Some work: producers and consumers on a channel, sleepers, and
    //    a pipeline of tasks spawning tasks.
    std::printf("1. work on 2 workers\n");
    const int total = rt.block_on(
        [] {
            weft::channel<int> ch(8);
            std::vector<weft::join_handle<void>> producers;
            for (int p = 0; p < 4; ++p)
                producers.push_back(weft::spawn(
                    [&ch, p] {
                        for (int i = 0; i < 100; ++i) ch.send(p * 100 + i);
                    },
                    {.name = "producer " + std::to_string(p)}));
            auto consumer = weft::spawn(
                [&ch] {
                    int sum = 0;
                    for (int i = 0; i < 400; ++i) sum += *ch.recv();
                    return sum;
                },
                {.name = "consumer"});
            std::vector<weft::join_handle<void>> sleepers;
            for (int s = 0; s < 3; ++s)
                sleepers.push_back(weft::spawn([s] { weft::this_task::sleep_for(std::chrono::milliseconds(2 + s)); },
                                               {.name = "sleeper"}));
            weft::when_all(producers);
            weft::when_all(sleepers);
            return consumer.join();
        },
        {.name = "main"});
    check(total == 79800, "the consumer received every value");

    // 2. The counters, per worker. Each is exact for its worker; the set is
    //    read while the runtime runs, not at one instant.
    std::printf("2. runtime::stats()\n");
    const weft::runtime_stats s = rt.stats();
    std::printf("  %-7s %8s %8s %9s %7s %6s %6s %7s %7s %6s\n", "worker", "spawned", "finished", "switches", "steals",
                "stolen", "sleeps", "timers", "injected", "deque");
    for (const weft::worker_stats& w : s.workers)
        std::printf("  %-7u %8llu %8llu %9llu %7llu %6llu %6llu %7llu %7llu %6zu\n", w.worker,
                    (unsigned long long)w.spawned, (unsigned long long)w.finished, (unsigned long long)w.switches,
                    (unsigned long long)w.steals, (unsigned long long)w.stolen, (unsigned long long)w.sleeps,
                    (unsigned long long)w.timers, (unsigned long long)w.injected, w.deque);
    const weft::worker_stats t = s.total();
    std::printf("  spawned from outside: %llu, live tasks: %zu\n", (unsigned long long)s.spawned_outside, s.live_tasks);
    check(t.spawned == 8, "eight tasks were spawned from inside the root");
    check(t.finished == 9, "nine tasks finished (the root too)");
    check(t.switches >= 9, "every task was switched into at least once");
    check(t.timers >= 3, "the three sleepers' timers fired");

    // 3. A task that hogs its worker for 150 ms: the watchdog reports it
    //    once, while it still runs, with its name, id, worker and
    //    backtrace.
    std::printf("3. the watchdog (threshold 50 ms)\n");
    rt.block_on([] { (void)crunch(150ms); }, {.name = "cruncher"});
    // (Under a sanitizer or valgrind, a thread the OS or valgrind does not
    // run for 50 ms looks stalled too: so these checks ask for "at least".)
    check(cruncher_reports.load() >= 1, "the cruncher was reported");
    check(rt.stats().stalls >= 1, "stats() counts the stall");

    rt.stop();  // the trace, if asked for, is written now
    std::printf("%s\n", failures ? "FAILED" : "OK");
    return failures ? 1 : 0;
}
