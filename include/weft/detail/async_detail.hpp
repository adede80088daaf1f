// weft/detail/async_detail.hpp: the inside of weft::async<T>
// (weft/async.hpp), which its templates need: the promise and its start
// without stack growth (ASYNC-S1), a C++20 task's stackless body (ASYNC-A1 - ASYNC-A4) and heap
// block, the awaiter behind every weft::co awaitable (ASYNC-A3), the bridge for
// foreign awaitables (ASYNC-A2), weft::await()'s wait, and spawn. Nothing here is
// API. Only weft/async.hpp includes it, before it defines async<T>, which is
// declared here.
#pragma once

#include <chrono>
#include <coroutine>
#include <exception>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "weft/runtime.hpp"
#include "weft/sync/channel.hpp"
#include "weft/sync/event.hpp"
#include "weft/sync/mutex.hpp"
#include "weft/sync/semaphore.hpp"
#include "weft/task.hpp"
#include "weft/waiter.hpp"

namespace weft {

template <class T>
class async;

namespace detail {

// async_access reaches an async<T>'s frame handle (spawn, weft::await).
struct async_access {
    template <class T>
    static auto& handle(async<T>& a) noexcept {
        return a.h_;
    }
};

// co_job is a blocking call that a C++20 task makes on a borrowed fiber
// (ASYNC-A3): run() makes the call and keeps its result, or its exception in
// `error`; a forced unwind (the task's cancellation) passes through run()
// after it has set `canceled`.
struct co_job {
    void (*run)(co_job*) = nullptr;
    std::exception_ptr error;
    bool canceled = false;
};

// co_event is what a C++20 task's coroutine asks of its task when it
// suspends (co_body::event, ASYNC-A1 - ASYNC-A4). co_park and co_requeue are one more than
// the stackless_body::stop they become.
inline constexpr std::uint8_t co_none = 0;      // resumed, nothing asked yet
inline constexpr std::uint8_t co_park = 1;      // its wait is armed: park the task (ASYNC-A2)
inline constexpr std::uint8_t co_requeue = 2;   // queue it again
inline constexpr std::uint8_t co_blocking = 3;  // run `pending` on a borrowed fiber, then resume (ASYNC-A3)
inline constexpr std::uint8_t co_finished = 4;  // the root coroutine has ended: collect the result
inline constexpr std::uint8_t co_canceled = 5;  // cancellation took effect: destroy the frames (ASYNC-A4)
inline constexpr std::uint8_t co_start = 6;     // not run yet: the first step looks for an early cancel

// co_body is a C++20 task's stackless body (L3's stackless_body, TASK-SB1 - TASK-SB4):
// the scheduler calls step() on the worker's stack, and step() resumes the
// coroutine `resume_next` and turns the event it left into a stop
// (src/async/async.cpp, ASYNC-A1 - ASYNC-A4). It lives in the task's heap block
// (co_task_block<T>, below), so the awaiters reach it from the running
// task, and the coroutine frames, which every nested async<T> has too,
// carry none of it. Only the task's current thread touches it.
// Between steps `event` is co_none, except before the first step
// (co_start) and after a borrow (co_blocking, until the step after the
// call): the one value a step tests before it resumes.
struct WEFT_API co_body : stackless_body {
    void* resume_next = nullptr;     // the coroutine to resume at the next step (its address)
    co_job* pending = nullptr;       // ASYNC-A3: the call on the borrowed fiber, until the step after it
    std::uint8_t event = co_start;   // ASYNC-A1: why the coroutine suspended

    stop step(task_record* t) override;
    void no_fiber(task_record* t, std::exception_ptr e) noexcept override;
    // collect() ends the root coroutine: takes its result into the task
    // (finished) or destroys its frames (canceled, ASYNC-A4), and sets outcome.
    virtual void collect(task_record* t, bool finished) noexcept = 0;

protected:
    ~co_body() = default;

private:
    // may_resume() is the cold start of a step whose event is co_start or
    // co_blocking: false when the frames are to be destroyed instead (ASYNC-A4).
    bool may_resume(task_record* t) noexcept;
};

// stackless_task() is the calling C++20 task when its coroutine runs on its
// worker's stack (no borrowed fiber), else null.
[[nodiscard]] inline task_record* stackless_task() noexcept {
    task_record* t = current_task();
    return t && t->stackless && !t->fiber ? t : nullptr;
}

// body_of() is the stackless body of the running C++20 task t (a co_body:
// weft has no other stackless bodies).
[[nodiscard]] inline co_body* body_of(task_record* t) noexcept { return static_cast<co_body*>(t->stackless); }

// cancel_due() says whether t's cancellation takes effect at this await.
[[nodiscard]] inline bool cancel_due(const task_record* t) noexcept {
    return t->cancel_reason.load(std::memory_order_acquire) != 0 &&
           t->shield_depth.load(std::memory_order_relaxed) == 0;
}

// make_bridge() returns a new coroutine whose resume() ends w's wait (claim,
// then wake: WAITER-V1, WAITER-V2) and leaves the frame suspended at its end; the waiting
// party destroys it with destroy_bridge() after its wait has returned (the
// resumer touches nothing of it after the wake). Throws: std::bad_alloc.
[[nodiscard]] WEFT_API std::coroutine_handle<> make_bridge(waiter* w);
WEFT_API void destroy_bridge(std::coroutine_handle<> h) noexcept;
// run_co_pending() is a C++20 task's borrowed fiber's body (ASYNC-A3): the task
// record's `run`.
WEFT_API void run_co_pending(task_record* t);
// await_misuse() throws std::invalid_argument naming what was awaited.
[[noreturn]] WEFT_API void await_misuse(const char* what);
// inline_unfinished() aborts: an async<T> run by weft::await() suspended
// without a weft awaiter (it would never be resumed).
[[noreturn]] WEFT_API void inline_unfinished() noexcept;

// get_awaiter() applies operator co_await (member or free) if there is one.
template <class A>
decltype(auto) get_awaiter(A&& a) {
    if constexpr (requires { std::forward<A>(a).operator co_await(); })
        return std::forward<A>(a).operator co_await();
    else if constexpr (requires { operator co_await(std::forward<A>(a)); })
        return operator co_await(std::forward<A>(a));
    else
        return std::forward<A>(a);
}

// bridge_guard owns a bridge frame (make_bridge()).
struct bridge_guard {
    std::coroutine_handle<> h;
    ~bridge_guard() {
        if (h) destroy_bridge(h);
    }
};

// wait_on() waits, blocking the calling stackful task or thread, until the
// awaiter aw (not ready) resumes the handle it is given. The wait is not
// cancellable: once aw holds the handle it cannot be abandoned.
template <class Aw>
void wait_on(Aw& aw) {
    stable<waiter> held;  // WAITER-V4: the bridge wakes it while we are suspended
    waiter& w = *held;
    w.arm(false);
    bridge_guard b;
    try {
        b.h = make_bridge(&w);
        using S = decltype(aw.await_suspend(b.h));
        if constexpr (std::is_void_v<S>) {
            aw.await_suspend(b.h);
        } else if constexpr (std::is_same_v<S, bool>) {
            if (!aw.await_suspend(b.h)) {  // completed at once
                if (!w.claim_self()) (void)w.wait();
                return;
            }
        } else {
            std::coroutine_handle<> next = aw.await_suspend(b.h);
            next.resume();
        }
    } catch (...) {
        // aw did not take the handle (it threw): end our own wait.
        if (!w.claim_self()) (void)w.wait();
        throw;
    }
    (void)w.wait();
}

// await_on() is weft::await() of the awaiter aw: waits unless it is ready,
// then its result (an rvalue reference result as a value).
template <class Aw>
decltype(auto) await_on(Aw& aw) {
    if (!aw.await_ready()) wait_on(aw);
    using R = decltype(aw.await_resume());
    if constexpr (std::is_rvalue_reference_v<R>)
        return std::remove_cvref_t<R>(aw.await_resume());
    else
        return aw.await_resume();
}

// foreign_awaiter is how async<T>'s co_await takes an awaitable that weft
// knows nothing of. Inside a C++20 task it hands the awaitable a bridge and
// parks the task (ASYNC-A2); anywhere else (an async<T> run by weft::await() on a
// stackful task or thread) it waits right there.
template <class Aw>
struct foreign_awaiter {
    Aw inner;
    waiter w{stackless_tag{}};
    std::coroutine_handle<> bridge{};

    bool await_ready() {
        if (inner.await_ready()) return true;
        if (!stackless_task()) {
            wait_on(inner);
            return true;
        }
        return false;
    }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
        co_body* b = body_of(current_task());
        w.arm(false);
        try {
            bridge = make_bridge(&w);
        } catch (...) {
            (void)w.claim_self();
            throw;
        }
        b->resume_next = h.address();
        b->event = co_park;
        using S = decltype(inner.await_suspend(bridge));
        try {
            if constexpr (std::is_void_v<S>) {
                inner.await_suspend(bridge);
                return std::noop_coroutine();
            } else if constexpr (std::is_same_v<S, bool>) {
                if (inner.await_suspend(bridge)) return std::noop_coroutine();
                if (w.claim_self()) {  // completed at once: go on now
                    b->event = co_none;
                    return h;
                }
                return std::noop_coroutine();  // the bridge was resumed too: it woke us
            } else {
                return inner.await_suspend(bridge);
            }
        } catch (...) {
            b->event = co_none;
            if (w.claim_self()) {
                destroy_bridge(std::exchange(bridge, {}));
                throw;
            }
            throw;  // the bridge ran: await_resume() destroys it
        }
    }
    decltype(auto) await_resume() {
        if (bridge) destroy_bridge(std::exchange(bridge, {}));
        return inner.await_resume();
    }
};

// is_weft_awaitable<A>: awaited by async<T>'s co_await as it is (its
// awaiter knows the C++20 task protocol, ASYNC-A1 - ASYNC-A4).
template <class A>
struct is_weft_awaitable : std::bool_constant<requires { typename std::remove_cvref_t<A>::weft_awaitable; }> {};
template <class T>
struct is_weft_awaitable<join_handle<T>> : std::true_type {};
template <class T>
struct is_weft_awaitable<join_handle<T>&> : std::true_type {};

// async_promise_base is what every async<T> promise shares.
//
// ASYNC-S1  A coroutine awaited with co_await is started by its parent's
//           await_suspend() with a plain resume(). If it ends before that resume()
//           returns (a synchronous completion), its final awaiter leaves the
//           parent alone and the parent's await_suspend() returns false: the parent
//           goes on at once, the nested resume() already returned, so no number of
//           synchronous completions grows the stack, at any optimisation level
//           (gcc 12 below -O2 does not make symmetric transfer a tail call:
//           docs/platform-facts.md). If it suspended first, it ends later, resumed from elsewhere,
//           and its final awaiter hands control to the parent by symmetric
//           transfer. `stage` decides which, with one exchange on each side.
struct async_promise_base {
    static constexpr std::uint8_t not_started = 0, running_inside = 1, suspended = 2, ended = 3;
    std::coroutine_handle<> continuation{};  // the awaiting coroutine, if any
    std::exception_ptr error;
    co_body* root = nullptr;  // the body of the task whose root this coroutine is, if any
    std::uint8_t stage = not_started;  // ASYNC-S1; only the task's current thread touches it

    struct final_awaiter {
        bool await_ready() noexcept { return false; }
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
            async_promise_base& p = h.promise();
            if (std::exchange(p.stage, ended) == running_inside) return std::noop_coroutine();  // ASYNC-S1: parent goes on
            if (p.continuation) return p.continuation;  // symmetric transfer back
            if (p.root) p.root->event = co_finished;
            return std::noop_coroutine();
        }
        void await_resume() noexcept {}
    };

    std::suspend_always initial_suspend() noexcept { return {}; }
    final_awaiter final_suspend() noexcept { return {}; }
    void unhandled_exception() {
        // A stackful task's cancellation unwinding through an async<T> that
        // weft::await() runs on its stack passes on (it must not be kept).
        if (forced_unwind_in_flight()) throw;
        error = std::current_exception();
    }
    template <class A>
    decltype(auto) await_transform(A&& a) {
        if constexpr (is_weft_awaitable<A>::value)
            return std::forward<A>(a);
        else
            return foreign_awaiter<decltype(get_awaiter(std::forward<A>(a)))>{get_awaiter(std::forward<A>(a))};
    }
};

template <class T>
struct async_promise : async_promise_base {
    std::optional<T> value;
    async<T> get_return_object() noexcept;
    template <class U = T>
    void return_value(U&& v) {
        value.emplace(std::forward<U>(v));
    }
    T take() {
        if (error) std::rethrow_exception(std::exchange(error, nullptr));
        return std::move(*value);
    }
};
template <>
struct async_promise<void> : async_promise_base {
    async<void> get_return_object() noexcept;
    void return_void() noexcept {}
    void take() {
        if (error) std::rethrow_exception(std::exchange(error, nullptr));
    }
};

// co_task_block<T> is a C++20 task's heap block: record, result slot, the
// task's stackless body, root coroutine; the name follows it in the same
// allocation.
template <class T>
struct co_task_block final : task_block<T>, co_body {
    std::coroutine_handle<async_promise<T>> root{};

    // collect() takes the result of a root that finished, or destroys the
    // frames of one canceled (ASYNC-A4), then drops the frame.
    void collect(task_record* t, bool finished) noexcept override {
        auto* self = static_cast<co_task_block*>(t);
        if (finished) {
            auto& p = self->root.promise();
            try {
                if constexpr (std::is_void_v<T>)
                    p.take();
                else
                    self->value.emplace(p.take());
                t->outcome = task_state::done;
            } catch (...) {
                t->exception = std::current_exception();
                t->outcome = task_state::failed;
            }
        } else {
            t->outcome = canceled_outcome(t);
        }
        std::exchange(self->root, {}).destroy();
    }
    static void drop_root(task_record* t) noexcept {
        auto* self = static_cast<co_task_block*>(t);
        if (self->root) std::exchange(self->root, {}).destroy();
    }
    static void free_block(task_record* t) noexcept {
        auto* self = static_cast<co_task_block*>(t);
        drop_root(t);
        self->~co_task_block();
        ::operator delete(self);
    }
    static constexpr task_ops table{&run_co_pending, &free_block, &drop_root};
};

// co_storage<R> holds a blocking call's result (std::monostate for void).
template <class R>
using co_storage = std::optional<std::conditional_t<std::is_void_v<R>, std::monostate, R>>;

// blocking_awaiter<R, S, Ops> is every weft::co awaitable: Ops::attempt(s,
// out) tries the operation without waiting (true: done, result in out);
// Ops::call(s, out) does it, waiting as needed. In a C++20 task the call
// runs on a borrowed fiber (ASYNC-A3); on a stackful task or a thread, right here.
template <class R, class S, class Ops>
struct blocking_awaiter {
    using weft_awaitable = void;
    S state;
    co_storage<R> out;
    // job is made only when the call must wait (ASYNC-A3): the try's path builds
    // and destroys nothing more than `state` and `out` (no exception_ptr,
    // whose destructor is an out-of-line call).
    struct fiber_job : co_job {
        blocking_awaiter* self;
    };
    std::optional<fiber_job> job;
    bool cancel = false;

    explicit blocking_awaiter(S s) : state(std::forward<S>(s)) {}

    bool await_ready() {
        if (Ops::attempt(state, out)) return true;
        task_record* t = stackless_task();
        if (!t) {
            Ops::call(state, out);
            return true;
        }
        cancel = cancel_due(t);
        return false;
    }
    void await_suspend(std::coroutine_handle<> h) noexcept {
        co_body* b = body_of(current_task());
        b->resume_next = h.address();
        if (cancel) {
            b->event = co_canceled;
            return;
        }
        fiber_job& j = job.emplace();
        j.run = &on_fiber;
        j.self = this;
        b->pending = &j;
        b->event = co_blocking;
    }
    R await_resume() {
        if (job && job->error) std::rethrow_exception(std::exchange(job->error, nullptr));
        if constexpr (!std::is_void_v<R>) return std::move(*out);
    }
    static void on_fiber(co_job* j) {
        auto* self = static_cast<fiber_job*>(j)->self;
        try {
            Ops::call(self->state, self->out);
        } catch (...) {
            if (forced_unwind_in_flight()) {
                j->canceled = true;
                throw;
            }
            j->error = std::current_exception();
        }
    }
};

template <class F>
struct call_ops {
    using R = std::invoke_result_t<F&>;
    static bool attempt(F&, co_storage<R>&) noexcept { return false; }
    static void call(F& f, co_storage<R>& out) {
        if constexpr (std::is_void_v<R>) {
            std::invoke(f);
            out.emplace();
        } else {
            out.emplace(std::invoke(f));
        }
    }
};

template <class T>
struct join_ops {
    static bool attempt(join_handle<T>& h, co_storage<T>& out) {
        if (!h.valid() || !h.record()->finished.load(std::memory_order_acquire)) return false;
        call(h, out);  // finished: join() does not wait
        return true;
    }
    static void call(join_handle<T>& h, co_storage<T>& out) {
        if constexpr (std::is_void_v<T>) {
            h.join();
            out.emplace();
        } else {
            out.emplace(h.join());
        }
    }
};

// yield_awaiter is co::yield().
struct yield_awaiter {
    using weft_awaitable = void;
    bool await_ready() {
        if (stackless_task()) return false;
        if (this_task::inside()) this_task::yield();
        return true;
    }
    void await_suspend(std::coroutine_handle<> h) noexcept {
        task_record* t = current_task();
        co_body* b = body_of(t);
        b->resume_next = h.address();
        b->event = cancel_due(t) ? co_canceled : co_requeue;
    }
    void await_resume() noexcept {}
};

// spawn_co() makes a C++20 task's block and queues it (runtime::spawn).
template <class T>
join_handle<T> spawn_co(runtime_core* c, async<T>&& a, const spawn_options& o) {
    using block = co_task_block<T>;
    check_spawn(c, o.name);
    if (!a.valid()) await_misuse("spawn of an empty weft::async (moved from, or already started)");
    void* mem = ::operator new(sizeof(block) + o.name.size() + 1);
    block* t = ::new (mem) block();
    char* name = static_cast<char*>(mem) + sizeof(block);
    if (!o.name.empty()) std::memcpy(name, o.name.data(), o.name.size());
    name[o.name.size()] = '\0';
    t->name = std::string_view(name, o.name.size());
    t->stackless = t;
    t->ops = &block::table;
    t->stack_size = o.stack_size;
    t->copy_stack = o.copy_stack;
    auto& h = async_access::handle(a);
    t->root = h;
    t->resume_next = h.address();
    h.promise().root = t;
    if (!submit(c, t, o)) {
        h.promise().root = nullptr;
        t->root = {};
        block::free_block(t);
        spawn_refused(c, o.name);
    }
    h = {};  // the task owns the frame now
    return join_handle<T>(t);
}

}  // namespace detail

// co::detail_ops: what each weft::co awaitable tries without waiting
// (attempt) and does when it must wait (call); blocking_awaiter's Ops.
namespace co {

namespace detail_ops {
struct lock_ops {
    static bool attempt(mutex* m, weft::detail::co_storage<void>& out) {
        if (!m->try_lock()) return false;
        out.emplace();
        return true;
    }
    static void call(mutex* m, weft::detail::co_storage<void>& out) {
        m->lock();
        out.emplace();
    }
};
template <class Sem>
struct acquire_ops {
    static bool attempt(Sem* s, weft::detail::co_storage<void>& out) {
        if (!s->try_acquire()) return false;
        out.emplace();
        return true;
    }
    static void call(Sem* s, weft::detail::co_storage<void>& out) {
        s->acquire();
        out.emplace();
    }
};
struct event_ops {
    static bool attempt(event* e, weft::detail::co_storage<void>& out) {
        if (!e->is_set()) return false;
        out.emplace();
        return true;
    }
    static void call(event* e, weft::detail::co_storage<void>& out) {
        e->wait();
        out.emplace();
    }
};
template <class T>
struct recv_ops {
    static bool attempt(channel<T>* c, weft::detail::co_storage<std::optional<T>>& out) {
        recv_result<T> r = c->try_recv();
        if (r.status == channel_status::ok) {
            out.emplace(std::move(r.value));
            return true;
        }
        if (r.status == channel_status::closed) {
            out.emplace(std::nullopt);
            return true;
        }
        return false;
    }
    static void call(channel<T>* c, weft::detail::co_storage<std::optional<T>>& out) { out.emplace(c->recv()); }
};
template <class T>
struct send_state {
    channel<T>* c;
    T v;
};
template <class T>
struct send_ops {
    static bool attempt(send_state<T>& s, weft::detail::co_storage<void>& out) {
        // try_send moves v only when it delivered it.
        const channel_status st = s.c->try_send(std::move(s.v));
        if (st != channel_status::ok) return false;  // full (or closed: send() throws below)
        out.emplace();
        return true;
    }
    static void call(send_state<T>& s, weft::detail::co_storage<void>& out) {
        s.c->send(std::move(s.v));
        out.emplace();
    }
};
}  // namespace detail_ops

}  // namespace co

}  // namespace weft
