// 14_async.cpp: C++20 coroutines and stackful tasks on one runtime.
//
// weft::async<T> is a C++20 coroutine type. Spawned on a runtime it is a
// task like any other (an id, a state, cancel, deadlines, a join_handle),
// but it has no stack of its own: the worker resumes it on its own stack.
// It waits with co_await:
//   co_await weft::co::recv(ch) / co::send(ch, v) / co::lock(m) / co::sleep_for(d)
//   co_await handle                 join any task, stackful or C++20
//   co_await other_coroutine()      run another async<T> in the same task
//   co_await weft::co::call(f)      any other blocking weft call (select, sockets)
// A stackful task (or a plain thread) waits for any C++20 awaitable with
// weft::await(x).
//
// The parts:
//   1. a C++20 producer feeding a stackful consumer through a channel;
//   2. a stackful task awaiting a C++20 coroutine, and a C++20 task joining
//      stackful ones;
//   3. exceptions crossing the boundary;
//   4. cancellation: the coroutine's frames are destroyed, destructors run;
//   5. a misuse: a blocking call inside a coroutine is refused.

#include <weft/async.hpp>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "example_support.hpp"  // check() and failures

using namespace std::chrono_literals;

namespace {

// 1. A C++20 producer: co_await on each send (the channel is unbuffered, so
// every send waits for the consumer).
weft::async<void> produce(weft::channel<int>& out, int n) {
    for (int i = 1; i <= n; ++i) co_await weft::co::send(out, i);
    out.close();
}

// 2. Coroutines calling coroutines: each co_await runs the callee in the
// caller's task.
weft::async<int> square(int x) { co_return x * x; }
weft::async<int> sum_of_squares(int n) {
    int s = 0;
    for (int i = 1; i <= n; ++i) s += co_await square(i);
    co_return s;
}

// 4. A guard whose destructor says it ran.
struct noisy {
    bool* flag;
    ~noisy() { *flag = true; }
};

weft::async<int> wait_forever(weft::channel<int>& ch, bool* cleaned) {
    noisy n{cleaned};
    auto v = co_await weft::co::recv(ch);
    co_return v.value_or(-1);
}

}  // namespace

int main() {
    weft::runtime rt({.workers = 2});

    std::printf("1. a C++20 producer, a stackful consumer\n");
    {
        weft::channel<int> ch;
        auto producer = rt.spawn(produce(ch, 100), {.name = "producer"});
        const long total = rt.block_on([&] {
            long s = 0;
            while (auto v = ch.recv()) s += *v;  // a stackful task blocks as usual
            return s;
        });
        producer.join();
        std::printf("   received 1..100, sum %ld\n", total);
        check(total == 5050, "sum of 1..100");
    }

    std::printf("2. awaiting both ways\n");
    {
        // A stackful task runs a coroutine with weft::await().
        const int a = rt.block_on([] { return weft::await(sum_of_squares(10)); });
        // A C++20 task joins stackful tasks with co_await on their handles.
        const int b = rt.block_on([]() -> weft::async<int> {
            auto x = weft::spawn([] {
                weft::this_task::sleep_for(1ms);
                return 20;
            });
            auto y = weft::spawn([] { return 22; });
            co_return co_await x + co_await y;
        }());
        std::printf("   weft::await(sum_of_squares(10)) = %d, co_await of two stackful tasks = %d\n", a, b);
        check(a == 385, "sum of squares");
        check(b == 42, "joined values");
    }

    std::printf("3. exceptions cross in both directions\n");
    {
        const std::string got = rt.block_on([]() -> weft::async<std::string> {
            auto h = weft::spawn([]() -> int { throw std::runtime_error("thrown by a stackful task"); });
            try {
                (void)co_await h;
            } catch (const std::runtime_error& e) {
                co_return e.what();
            }
            co_return "nothing";
        }());
        std::printf("   a coroutine caught: %s\n", got.c_str());
        check(got == "thrown by a stackful task", "exception to the coroutine");
        auto failing = []() -> weft::async<int> { throw std::logic_error("thrown by a coroutine"); co_return 0; };
        try {
            rt.block_on([&] { return weft::await(failing()); });
            check(false, "exception to the stackful task");
        } catch (const std::logic_error& e) {
            std::printf("   a stackful task caught: %s\n", e.what());
        }
    }

    std::printf("4. cancellation destroys the coroutine's frames\n");
    {
        weft::channel<int> never;
        bool cleaned = false;
        auto h = rt.spawn(wait_forever(never, &cleaned), {.name = "waits-forever"});
        std::this_thread::sleep_for(10ms);
        h.cancel();
        try {
            (void)h.join();
            check(false, "join of a canceled task throws");
        } catch (const weft::task_canceled& e) {
            std::printf("   join: %s; the guard's destructor ran: %s\n", e.what(), cleaned ? "yes" : "no");
        }
        check(cleaned, "destructor of the canceled coroutine's local");
    }

    std::printf("5. a blocking call inside a coroutine is refused\n");
    {
        weft::channel<int> empty(1);
        const bool refused = rt.block_on([](weft::channel<int>& ch) -> weft::async<bool> {
            try {
                (void)ch.recv();  // would block the worker: use co_await weft::co::recv(ch)
            } catch (const weft::task_error& e) {
                std::printf("   %s\n", e.what());
                co_return e.code() == weft::task_errc::needs_stack;
            }
            co_return false;
        }(empty));
        check(refused, "needs_stack");
    }

    std::printf(failures ? "FAILED\n" : "ok\n");
    return failures ? 1 : 0;
}
