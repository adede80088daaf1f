// 07_tasks.cpp: tasks, the scheduled unit of a weft runtime.
//
// A task is a stackful coroutine that a runtime schedules for you: you spawn
// it, it runs whenever a worker is free, and when it waits (join, sleep,
// blocking call) only the task is suspended, never the thread. spawn()
// returns a join_handle, std::thread-like but move-only and cheaper:
//   join()       the value, or the task's exception rethrown;
//   cancel()     stop at the next suspension point (destructors run);
//   detach()     let it run on (also what dropping the handle does).
// Every task has a process-unique id, a name and a state (created, ready,
// running, waiting, done, failed, canceled, timed_out).
//
// This example runs on one thread (workers = 0: block_on() drives the
// runtime on the caller's thread); the next one uses worker threads. The
// code inside the tasks is the same either way.

#include <weft/runtime.hpp>
#include <weft/task.hpp>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "example_support.hpp"  // check() and failures

using namespace std::chrono_literals;

namespace {

// A task's locals are destroyed when it is canceled: the cancellation is a
// forced unwind at the point where the task waits.
struct noisy {
    bool* destroyed;
    ~noisy() { *destroyed = true; }
};

weft::task_local<std::string> request_id;  // one value per task

}  // namespace

int main() {
    weft::runtime rt;  // workers = 0

    // 1. Spawn and join. Inside a task, weft::spawn() spawns into the same
    //    runtime, and join() suspends only the joining task.
    int sum = rt.block_on([] {
        std::vector<weft::join_handle<int>> parts;
        for (int i = 1; i <= 10; ++i) parts.push_back(weft::spawn([i] { return i * i; }));
        int s = 0;
        for (auto& h : parts) s += h.join();
        return s;
    });
    std::printf("1. sum of squares 1..10 from 10 tasks: %d\n", sum);
    check(sum == 385, "sum of squares");

    // 2. An exception leaving a task comes out of join().
    try {
        rt.block_on([] {
            auto h = weft::spawn([]() -> int { throw std::runtime_error("no route to host"); }, {.name = "fetch"});
            return h.join();
        });
        check(false, "join rethrows");
    } catch (const std::runtime_error& e) {
        std::printf("2. join() rethrew: %s\n", e.what());
    }

    // 3. Cancellation: the sleeping task is unwound at its sleep; its
    //    destructors run and it ends canceled. join() then throws
    //    task_canceled.
    bool destroyed = false;
    rt.block_on([&] {
        auto h = weft::spawn([&] {
            noisy n{&destroyed};
            weft::this_task::sleep_for(1h);
        }, {.name = "sleeper"});
        weft::this_task::yield();  // let it start and fall asleep
        std::printf("3. %s (id %llu) is %s; cancel()\n", std::string(h.name()).c_str(),
                    static_cast<unsigned long long>(h.id()), weft::to_string(h.state()));
        h.cancel();
        try {
            h.join();
        } catch (const weft::task_canceled& e) {
            std::printf("   join(): %s\n", e.what());
        }
    });
    check(destroyed, "a canceled task's destructors ran");

    // 4. Deadlines: a task spawned with a timeout is canceled when it passes
    //    and ends timed_out.
    auto slow = rt.spawn([] { weft::this_task::sleep_for(10s); }, {.name = "slow", .timeout = 20ms});
    auto t0 = std::chrono::steady_clock::now();
    rt.block_on([&] { return slow.wait_for(5s); });
    std::printf("4. 'slow' ended %s after %lld ms\n", weft::to_string(slow.state()),
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - t0).count()));
    check(slow.state() == weft::task_state::timed_out, "deadline");
    slow.detach();

    // 5. A game loop: workers = 0 and run_once() per frame runs every ready
    //    task once. Three "entities" each advance one step per frame.
    weft::runtime loop;
    int steps[3] = {0, 0, 0};
    for (int e = 0; e < 3; ++e)
        loop.spawn([&steps, e] {
            for (;;) {
                ++steps[e];
                weft::this_task::yield();  // wait for the next frame
            }
        });
    for (int frame = 0; frame < 5; ++frame) loop.run_once();
    std::printf("5. after 5 frames the entities took %d, %d, %d steps\n", steps[0], steps[1], steps[2]);
    check(steps[0] == 5 && steps[1] == 5 && steps[2] == 5, "run_once runs each ready task once");
    loop.stop();  // cancels the three endless tasks

    // 6. task_local: each task sees its own value.
    auto a = rt.spawn([] { *request_id = "a"; weft::this_task::yield(); return *request_id; });
    auto b = rt.spawn([] { *request_id = "b"; weft::this_task::yield(); return *request_id; });
    std::string ra = rt.block_on([&] { return a.join(); });
    std::string rb = rt.block_on([&] { return b.join(); });
    std::printf("6. task_local values: %s %s\n", ra.c_str(), rb.c_str());
    check(ra == "a" && rb == "b", "task_local");

    std::printf("%s\n", failures ? "07_tasks: FAILED" : "07_tasks: all checks passed");
    return failures ? 1 : 0;
}
