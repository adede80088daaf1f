// 08_runtime.cpp: the runtime with worker threads (M:N).
//
// runtime({.workers = N}) starts N worker threads. Each keeps its own queue
// of ready tasks; an idle worker steals half of another's queue, and a
// worker with nothing to do sleeps (an idle runtime uses no CPU). Tasks move
// between workers only where they wait (a suspension point): code between
// two waits runs on one thread. A task spawned pinned (or on a copy-stack)
// never moves.
//
// The parts:
//   1. skynet: a 10-ary tree of 100,000 leaf tasks, each parent summing its
//      children (the peer report runs the 1,000,000-leaf version);
//   2. block_on and join from a plain thread;
//   3. blocking(): a call that would block the worker runs on a separate
//      thread pool while only the task waits;
//   4. the registry: runtime::tasks() lists the live tasks;
//   5. stopping: the destructor cancels what is left and joins the workers.

#include <weft/runtime.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <thread>
#include <vector>

#include "example_support.hpp"  // check() and failures

using namespace std::chrono_literals;

namespace {

long skynet(long first, long size) {
    if (size == 1) return first;
    std::vector<weft::join_handle<long>> children;
    children.reserve(10);
    const long part = size / 10;
    for (long i = 0; i < 10; ++i) children.push_back(weft::spawn([=] { return skynet(first + i * part, part); }));
    long sum = 0;
    for (auto& c : children) sum += c.join();
    return sum;
}

}  // namespace

int main() {
    weft::runtime rt({.workers = 2});

    // 1. skynet.
    auto t0 = std::chrono::steady_clock::now();
    const long sum = rt.block_on([] { return skynet(0, 100'000); });
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("1. skynet over 111,111 tasks on %u workers: sum %ld in %.1f ms\n", rt.workers(), sum, ms);
    check(sum == 4'999'950'000L, "skynet sum");

    // 2. Spawn from this (plain) thread and join it: the thread blocks.
    std::set<int> workers_seen;
    std::vector<weft::join_handle<int>> hs;
    for (int i = 0; i < 64; ++i)
        hs.push_back(rt.spawn([] {
            for (int k = 0; k < 100; ++k) weft::this_task::yield();
            return weft::this_task::worker();
        }));
    for (auto& h : hs) workers_seen.insert(h.join());
    std::printf("2. 64 tasks finished on %zu different worker(s)\n", workers_seen.size());
    check(!workers_seen.empty(), "tasks ran");

    // 3. blocking(): the sleep runs on the blocking pool; the worker goes on
    //    running other tasks meanwhile.
    int r = rt.block_on([] {
        auto slow = weft::spawn([] { return weft::blocking([] { ::usleep(20'000); return 7; }); });
        int ticks = 0;
        while (!slow.is_ready()) {
            weft::this_task::sleep_for(1ms);
            ++ticks;
        }
        std::printf("3. blocking() returned while this task ticked %d times\n", ticks);
        return slow.join();
    });
    check(r == 7, "blocking result");

    // 4. The registry.
    std::vector<weft::join_handle<void>> sleepers;
    for (int i = 0; i < 3; ++i)
        sleepers.push_back(rt.spawn([] { weft::this_task::sleep_for(1h); }, {.name = "sleeper"}));
    std::this_thread::sleep_for(20ms);
    std::printf("4. live tasks:\n");
    int waiting = 0;
    for (const weft::task_info& t : rt.tasks()) {
        std::printf("   id %llu  %-8s %-8s worker %d\n", static_cast<unsigned long long>(t.id), t.name.c_str(),
                    weft::to_string(t.state), t.worker);
        waiting += t.state == weft::task_state::waiting;
    }
    check(waiting == 3, "three sleepers are waiting");

    // 5. Stopping cancels the sleepers (their handles are still held: the
    //    tasks end canceled, their stacks go when the handles do).
    rt.stop();
    std::printf("5. after stop(): %zu live tasks; the sleepers are %s\n", rt.live_tasks(),
                weft::to_string(sleepers[0].state()));
    check(rt.live_tasks() == 0 && sleepers[0].state() == weft::task_state::canceled, "stop cancels");

    std::printf("%s\n", failures ? "08_runtime: FAILED" : "08_runtime: all checks passed");
    return failures ? 1 : 0;
}
