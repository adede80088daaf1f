// async.cpp: layer L7 (weft/async.hpp): the bridge coroutine that lets any
// C++20 awaitable wake a weft waiter, and the borrowed fiber's body of a
// C++20 task (A3 in src/runtime/stackless.cpp).

#include "weft/async.hpp"

#include <cstdio>
#include <cstdlib>
#include <new>

namespace weft::detail {

namespace {

// bridge is a coroutine that does nothing until resumed; then its final
// awaiter claims and wakes the waiter it was made for, and it stays
// suspended at its end for the waiting party to destroy. The claim and the
// wake run in await_suspend, after the frame counts as suspended, and touch
// only the waiter: the waiting party may destroy the frame as soon as it
// has been woken, even while resume() is still returning on this thread.
struct bridge {
    struct promise_type {
        waiter* w = nullptr;

        struct final_awaiter {
            bool await_ready() noexcept { return false; }
            void await_suspend(std::coroutine_handle<promise_type> h) noexcept {
                waiter* w = h.promise().w;
                if (w->claim()) w->wake();
            }
            void await_resume() noexcept {}
        };

        bridge get_return_object() noexcept { return bridge{std::coroutine_handle<promise_type>::from_promise(*this)}; }
        std::suspend_always initial_suspend() noexcept { return {}; }
        final_awaiter final_suspend() noexcept { return {}; }
        void return_void() noexcept {}
        void unhandled_exception() noexcept { std::terminate(); }  // the body is empty
    };
    std::coroutine_handle<promise_type> h;
};

bridge bridge_body() { co_return; }

}  // namespace

std::coroutine_handle<> make_bridge(waiter* w) {
    bridge b = bridge_body();
    b.h.promise().w = w;
    return b.h;
}

void destroy_bridge(std::coroutine_handle<> h) noexcept { h.destroy(); }

void run_co_pending(task_record* t) { t->co_pending->run(t->co_pending); }

void await_misuse(const char* what) { throw std::invalid_argument(std::string("weft: ") + what); }

void inline_unfinished() noexcept {
    std::fputs(
        "weft: a weft::async run by weft::await() suspended without a weft awaiter and would never be "
        "resumed (a coroutine type inside it that resumes its awaiters itself? docs/async.md)\n",
        stderr);
    std::abort();
}

}  // namespace weft::detail
