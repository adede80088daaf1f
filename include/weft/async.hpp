// weft/async.hpp: layer L7, C++20 coroutines on the weft runtime, both ways.
//
//   weft::async<int> answer(weft::channel<int>& ch) {
//       int a = *co_await weft::co::recv(ch);          // a C++20 coroutine waits on L5
//       co_await weft::co::sleep_for(1ms);
//       co_return a * 2;
//   }
//   weft::join_handle<int> h = rt.spawn(answer(ch));   // a task: id, state, cancel, join
//   int v = weft::await(answer(ch));                   // a stackful task (or thread) awaits C++20
//
// async<T> is a lazy C++20 coroutine type (it starts when awaited or
// spawned). Spawned (runtime::spawn, block_on), its coroutine is the body of
// a task of that runtime: the same workers, queues, ids, states,
// cancellation, deadlines, registry and join_handle as a stackful task, but
// no stack of its own: the scheduler resumes it on the worker's stack, as a
// stackless body (co_body::step() in src/async/async.cpp, ASYNC-A1 - ASYNC-A4). Awaited with
// co_await from another coroutine, it runs in the awaiting coroutine's task,
// by symmetric transfer (no stack growth however many awaits complete at
// once: ASYNC-S1 in weft/detail/async_detail.hpp).
//
// Waiting, from a C++20 task's coroutine: every weft wait is one awaitable
// in weft::co (lock, send, recv, sleep, join with co_await on a join_handle,
// when_all, ... and co::call(f) for any other blocking weft call: select, a
// socket, a condition variable). Each first tries the operation without
// waiting; if it must wait, the call runs on a fiber borrowed for that call
// alone (ASYNC-A3), so L5 and L6 exist once, written for stackful waits. A blocking
// call made directly (mutex::lock() without co_await) throws task_error
// (needs_stack) before it touches anything.
//
// Waiting, from a stackful task or a plain thread: weft::await(x) takes any
// C++20 awaitable. An async<T> runs right there, on the caller's stack (its
// waits block the calling task, or thread); any other awaitable gets a
// coroutine_handle (a bridge) whose resume() wakes the caller's waiter, so
// only the calling task is suspended, never polled.
//
// Cancellation: a C++20 task is canceled at its next weft await (and while
// it waits in one): its coroutine frames are destroyed, never resumed, so
// every local's destructor runs and nothing can swallow it (ASYNC-A4). A foreign
// awaitable (one weft knows nothing of) is not a cancellation point: it
// cannot be abandoned once it holds the coroutine's handle. docs/async.md
// has the rest.
//
// This file holds the API: async<T>, spawn(), await(), co_await on a
// join_handle, and weft::co. The machinery behind it is in
// weft/detail/async_detail.hpp.
#pragma once

#include <chrono>
#include <coroutine>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/detail/async_detail.hpp"
#include "weft/runtime.hpp"
#include "weft/sync/channel.hpp"
#include "weft/sync/event.hpp"
#include "weft/sync/mutex.hpp"
#include "weft/sync/semaphore.hpp"
#include "weft/task.hpp"
#include "weft/waiter.hpp"

namespace weft {

// async<T> is a lazy C++20 coroutine returning T (see the top of this
// file). Move-only; destroying an async<T> that has not run destroys its
// frame. co_await it from another coroutine (once), spawn it
// (runtime::spawn, weft::spawn, runtime::block_on), or run it from a
// stackful task or thread with weft::await().
template <class T = void>
class [[nodiscard]] async {
public:
    using promise_type = detail::async_promise<T>;
    using handle_type = std::coroutine_handle<promise_type>;
    using value_type = T;
    using weft_coroutine_task = T;  // runtime::spawn / block_on take it
    using weft_awaitable = void;

    async() noexcept = default;
    async(async&& o) noexcept : h_(std::exchange(o.h_, {})) {}
    async& operator=(async&& o) noexcept {
        if (this != &o) {
            if (h_) h_.destroy();
            h_ = std::exchange(o.h_, {});
        }
        return *this;
    }
    ~async() {
        if (h_) h_.destroy();
    }

    // valid() says whether it holds a coroutine not yet handed on.
    [[nodiscard]] bool valid() const noexcept { return static_cast<bool>(h_); }

    // awaiter: co_await transfers to the coroutine and back (symmetric).
    struct awaiter {
        using weft_awaitable = void;
        handle_type h;
        bool await_ready() const noexcept { return h.done(); }
        bool await_suspend(std::coroutine_handle<> parent) {
            auto& p = h.promise();
            p.continuation = parent;
            p.stage = promise_type::running_inside;
            h.resume();
            // ASYNC-S1: ended inside resume() (false: go on now), or suspended.
            return std::exchange(p.stage, promise_type::suspended) != promise_type::ended;
        }
        T await_resume() { return h.promise().take(); }
    };
    // operator co_await runs the coroutine in the awaiting coroutine's task
    // and returns its value (or rethrows). Throws: std::invalid_argument
    // for an empty async.
    awaiter operator co_await() & { return make_awaiter(); }
    awaiter operator co_await() && { return make_awaiter(); }

private:
    explicit async(handle_type h) noexcept : h_(h) {}
    awaiter make_awaiter() {
        if (!h_) detail::await_misuse("co_await of an empty weft::async (moved from, or already spawned)");
        return awaiter{h_};
    }
    friend promise_type;
    friend struct detail::async_access;

    handle_type h_{};
};

// spawn_coroutine() is what runtime::spawn / block_on call for an async<T>
// (found by argument-dependent lookup).
template <class T>
join_handle<T> spawn_coroutine(detail::runtime_core* c, async<T>&& a, const spawn_options& o) {
    return detail::spawn_co(c, std::move(a), o);
}

// spawn() spawns an async<T> into the runtime of the calling task.
template <class T>
join_handle<T> spawn(async<T>&& a, const spawn_options& options = {}) {
    return detail::spawn_co(detail::current_core("weft::spawn()"), std::move(a), options);
}

// await() waits for any C++20 awaitable from a stackful task or a plain
// thread and returns what it produces (see the top of this file). An
// async<T> runs on the caller's stack; a stackful task's cancellation
// unwinds through it (destructors run). Any other awaitable suspends only
// the calling task (or blocks the thread) until it resumes the handle it
// was given; that wait is not cancellable. Throws: what the awaitable
// throws; task_error (needs_stack) from a C++20 task's coroutine (use
// co_await there); std::invalid_argument for an empty async.
template <class A>
decltype(auto) await(A&& a) {
    detail::need_stack(detail::current_task());
    if constexpr (requires { typename std::remove_cvref_t<A>::weft_coroutine_task; }) {
        using T = typename std::remove_cvref_t<A>::value_type;
        auto h = detail::async_access::handle(a);
        if (!h) detail::await_misuse("weft::await of an empty weft::async (moved from, or already started)");
        if (!h.done()) {
            h.promise().continuation = {};
            h.resume();
            if (!h.done()) detail::inline_unfinished();
        }
        if constexpr (std::is_void_v<T>)
            h.promise().take();
        else
            return T(h.promise().take());
    } else {
        using G = decltype(detail::get_awaiter(std::forward<A>(a)));
        if constexpr (!std::is_reference_v<G> && std::is_move_constructible_v<G>) {
            // WAITER-V4 (weft/waiter.hpp): whoever completes the awaiter writes it
            // while this task is suspended: off a shared stack.
            detail::stable<G> aw(detail::get_awaiter(std::forward<A>(a)));
            return detail::await_on(*aw);
        } else {
            auto&& aw = detail::get_awaiter(std::forward<A>(a));
            return detail::await_on(aw);
        }
    }
}

// operator co_await(join_handle) joins the task from a coroutine: its value,
// or what join() throws. Waits on a borrowed fiber only if the task has not
// finished yet.
template <class T>
auto operator co_await(join_handle<T>& h) {
    return detail::blocking_awaiter<T, join_handle<T>&, detail::join_ops<T>>(h);
}
template <class T>
auto operator co_await(join_handle<T>&& h) {
    return detail::blocking_awaiter<T, join_handle<T>, detail::join_ops<T>>(std::move(h));
}

// co holds the awaitable forms of weft's waits, for C++20 coroutines. On a
// stackful task or a plain thread each simply does the wait.
namespace co {

// call() runs f(), a call that may block the way stackful code blocks (any
// weft wait: select, a condition variable, a socket, a join with a
// deadline), and returns its result (R must not be a reference).
template <class F>
auto call(F&& f) {
    using G = std::decay_t<F>;
    using R = std::invoke_result_t<G&>;
    static_assert(!std::is_reference_v<R>, "weft::co::call(f): f must return a value, not a reference");
    return detail::blocking_awaiter<R, G, detail::call_ops<G>>(G(std::forward<F>(f)));
}

// yield() lets the other ready tasks run (a suspension point).
inline detail::yield_awaiter yield() noexcept { return {}; }

// sleep_until() / sleep_for() suspend until the time has come.
inline auto sleep_until(std::chrono::steady_clock::time_point t) {
    return call([t] { this_task::sleep_until(t); });
}
template <class Rep, class Period>
auto sleep_for(std::chrono::duration<Rep, Period> d) {
    return sleep_until(std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::nanoseconds>(d));
}

// lock() locks m (unlock it with m.unlock() as usual).
inline auto lock(mutex& m) {
    return weft::detail::blocking_awaiter<void, mutex*, detail_ops::lock_ops>(&m);
}
// acquire() takes one unit of s.
inline auto acquire(counting_semaphore& s) {
    return weft::detail::blocking_awaiter<void, counting_semaphore*, detail_ops::acquire_ops<counting_semaphore>>(&s);
}
// wait() waits until e is set.
inline auto wait(event& e) {
    return weft::detail::blocking_awaiter<void, event*, detail_ops::event_ops>(&e);
}
// recv() takes the next value of c: nullopt once it is closed and drained.
template <class T>
auto recv(channel<T>& c) {
    return weft::detail::blocking_awaiter<std::optional<T>, channel<T>*, detail_ops::recv_ops<T>>(&c);
}
// send() delivers v into c. Throws: channel_closed.
template <class T, class U>
auto send(channel<T>& c, U&& v) {
    return weft::detail::blocking_awaiter<void, detail_ops::send_state<T>, detail_ops::send_ops<T>>(
        detail_ops::send_state<T>{&c, T(std::forward<U>(v))});
}
// when_all() / when_any(): weft::when_all / when_any (weft/runtime.hpp) for
// the handles of any tasks, stackful or C++20.
template <class T>
auto when_all(std::vector<join_handle<T>>& hs) {
    return call([&hs] { return weft::when_all(hs); });
}
template <class T>
auto when_any(std::vector<join_handle<T>>& hs, bool cancel_losers = false) {
    return call([&hs, cancel_losers] { return weft::when_any(hs, cancel_losers); });
}

}  // namespace co

// get_return_object() is defined here, where async<T> is complete.
namespace detail {
template <class T>
async<T> async_promise<T>::get_return_object() noexcept {
    return async<T>(std::coroutine_handle<async_promise<T>>::from_promise(*this));
}
inline async<void> async_promise<void>::get_return_object() noexcept {
    return async<void>(std::coroutine_handle<async_promise<void>>::from_promise(*this));
}
}  // namespace detail

}  // namespace weft
