// weft/task.hpp: layer L3, tasks: the scheduled unit of a weft runtime.
//
//   weft::runtime rt;                                   // weft/runtime.hpp
//   weft::join_handle<int> h = rt.spawn([] { return 6 * 7; }, {.name = "answer"});
//   int v = h.join();                                   // 42
//
// A task is a stackful coroutine owned by a runtime (weft/runtime.hpp spawns
// them). It has a 64-bit id unique for the life of the process (never
// reused), a name, and a state:
//
//   created --> ready --> running --> done | failed | canceled | timed_out
//                 ^          |
//                 |          v
//                 +------ waiting        (and running --> ready on yield)
//
// docs/runtime.md lists every transition. join_handle<T> is the move-only
// handle spawn() returns: join() gives the value or rethrows what the task
// threw; cancel() asks the task to stop at its next suspension point, where
// a forced unwind runs its destructors.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "weft/config.hpp"
#include "weft/fiber.hpp"

namespace weft {

// task_state is where a task is in its life (see the diagram above).
enum class task_state : std::uint8_t {
    created,    // spawned, not yet queued
    ready,      // queued, waiting for a worker
    running,    // a worker runs it now
    waiting,    // suspended until something wakes it (join, sleep, blocking(), ...)
    done,       // the body returned
    failed,     // the body threw; join() rethrows it
    canceled,   // cancel() took effect (or the runtime stopped)
    timed_out,  // its deadline passed and took effect
};

// to_string() names a state ("created", ..., "timed_out").
[[nodiscard]] WEFT_API const char* to_string(task_state s) noexcept;

// finished() says whether s is one of the four final states.
[[nodiscard]] constexpr bool finished(task_state s) noexcept { return s >= task_state::done; }

// task_errc lists the misuses of tasks and runtimes that weft reports.
enum class task_errc {
    empty_handle = 1,  // use of a moved-from, default-constructed or detached join_handle
    join_twice,        // join() of a handle that was already joined
    join_self,         // join() from inside the task itself
    runtime_stopping,  // spawn() on a runtime that is stopping or stopped
    not_in_task,       // an operation that needs to run inside a task was called outside one
    driver_busy,       // block_on / run_once while another thread drives the same runtime
    inside_task,       // block_on / run_once / stop from inside a task (it would block its worker)
    bad_option,        // an option out of range (message says which)
    needs_stack,       // a blocking call from a C++20 task's coroutine (co_await it instead)
};

// task_error is thrown on misuse; what() names the task when there is one,
// e.g. "weft: join of task 'fetch' (id 7) from inside itself".
class WEFT_API task_error : public std::logic_error {
public:
    task_error(task_errc code, const std::string& message);
    // code() says which misuse it was.
    [[nodiscard]] task_errc code() const noexcept { return code_; }

private:
    task_errc code_;
};

// task_canceled is what join() throws for a task that was canceled or timed
// out instead of returning a value.
class WEFT_API task_canceled : public std::runtime_error {
public:
    task_canceled(task_state why, const std::string& message);
    // state() is canceled or timed_out.
    [[nodiscard]] task_state state() const noexcept { return state_; }

private:
    task_state state_;
};

}  // namespace weft

#include "weft/detail/task_record.hpp"

namespace weft {
namespace detail {
[[noreturn]] WEFT_API void task_misuse(const task_record* t, task_errc code);
// not_in_task() throws task_error (not_in_task) naming the call that needs a
// task: "weft: <call> must be called from inside a weft task", followed by
// "; <instead>" when `instead` (what a plain thread does) is given.
[[noreturn]] WEFT_API void not_in_task(const char* call, const char* instead = nullptr);
// inside_task() throws task_error (inside_task) for `call` (block_on,
// run_once, stop, shutdown) made from inside t, naming t and what to do
// `instead`: "weft: <call> called from inside <t>: it would ...; <instead>".
[[noreturn]] WEFT_API void inside_task(const task_record* t, const char* call, const char* instead);
// need_stack() throws task_error (needs_stack) when t is a C++20 task running
// on its worker's stack (weft/async.hpp): a blocking call there would have
// nowhere to keep its frames. Called before anything is armed or linked.
inline void need_stack(const task_record* t) {
    if (t && t->stackless && !t->fiber) [[unlikely]]
        task_misuse(t, task_errc::needs_stack);
}
// canceled_outcome() is the final state of a task ended by a forced unwind
// (or canceled before it started): timed_out if its deadline did it.
[[nodiscard]] inline task_state canceled_outcome(const task_record* t) noexcept {
    return t->cancel_reason.load(std::memory_order_relaxed) == static_cast<std::uint8_t>(wait_status::timed_out)
               ? task_state::timed_out
               : task_state::canceled;
}
[[nodiscard]] WEFT_API void* local_get(const void* key, void* (*make)(), void (*destroy)(void*) noexcept);
}  // namespace detail

// join_handle<T> owns the right to a task's result. Move-only. Destroying
// or detaching a handle lets the task run on; a detached task that fails
// reports its exception to the runtime's unhandled-exception handler.
template <class T>
class join_handle {
    static_assert(!std::is_reference_v<T>, "a task returns a value or void, not a reference");

public:
    join_handle() noexcept = default;
    explicit join_handle(detail::task_record* t) noexcept : t_(t) {}
    join_handle(join_handle&& o) noexcept : t_(std::exchange(o.t_, nullptr)), joined_(std::exchange(o.joined_, false)) {}
    join_handle& operator=(join_handle&& o) noexcept {
        if (this != &o) {
            detach_if_owned();
            t_ = std::exchange(o.t_, nullptr);
            joined_ = std::exchange(o.joined_, false);
        }
        return *this;
    }
    join_handle(const join_handle&) = delete;
    join_handle& operator=(const join_handle&) = delete;
    // ~join_handle() detaches (the task runs on; see detach()).
    ~join_handle() { detach_if_owned(); }

    // join() waits until the task has finished and returns its value (or
    // rethrows its exception). From a task it suspends only that task; from
    // a plain thread it blocks the thread. Afterwards the handle is empty.
    // Throws: task_canceled if the task was canceled or timed out; what the
    // task threw; task_error (empty_handle, join_twice, join_self);
    // forced_unwind if the joining task is itself canceled (let it pass).
    T join() {
        check_join();
        (void)detail::wait_finished(t_, nullptr);
        return take();
    }
    // wait_for() / wait_until() wait until the task has finished or the
    // time has come; true if it has finished (then join() does not block).
    // Throws: as join() except task_canceled and the task's exception.
    template <class Rep, class Period>
    bool wait_for(std::chrono::duration<Rep, Period> d) {
        return wait_until(std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::nanoseconds>(d));
    }
    bool wait_until(std::chrono::steady_clock::time_point deadline) {
        check_join();
        return detail::wait_finished(t_, &deadline);
    }
    // is_ready() says whether the task has finished (join() would not block).
    [[nodiscard]] bool is_ready() const {
        check();
        return t_->finished.load(std::memory_order_acquire);
    }
    // try_join() is join() if the task has finished, and an empty optional
    // (false for void tasks) without waiting otherwise.
    auto try_join() {
        check_join();
        if constexpr (std::is_void_v<T>) {
            if (!is_ready()) return false;
            take();
            return true;
        } else {
            if (!is_ready()) return std::optional<T>{};
            return std::optional<T>(take());
        }
    }
    // detach() lets the task run on without a handle; the handle becomes
    // empty. Throws: task_error (empty_handle).
    void detach() {
        check();
        detail::detach(std::exchange(t_, nullptr));
    }
    // cancel() asks the task to stop: at its next suspension point (now, if
    // it is waiting) a forced unwind runs its destructors and it ends
    // canceled. A finished task is left as it is; a shielded one is canceled
    // when its shield ends. Never waits. Throws: task_error (empty_handle).
    void cancel() {
        check();
        detail::request_cancel(t_, detail::wait_status::canceled);
    }

    // id() is the task's process-unique id; name() its name; state() its state.
    [[nodiscard]] std::uint64_t id() const {
        check();
        return t_->id;
    }
    [[nodiscard]] std::string_view name() const {
        check();
        return t_->name;
    }
    [[nodiscard]] task_state state() const {
        check();
        return t_->state.load(std::memory_order_acquire);
    }
    // valid() says whether the handle refers to a task (not moved from,
    // joined or detached).
    [[nodiscard]] bool valid() const noexcept { return t_ != nullptr; }
    [[nodiscard]] explicit operator bool() const noexcept { return valid(); }
    // record() is the task's record, for the layers above.
    [[nodiscard]] detail::task_record* record() const noexcept { return t_; }

private:
    void check() const {
        if (!t_) [[unlikely]]
            detail::task_misuse(nullptr, joined_ ? task_errc::join_twice : task_errc::empty_handle);
    }
    void check_join() const {
        check();
        if (detail::current_task() == t_) [[unlikely]]
            detail::task_misuse(t_, task_errc::join_self);
    }
    void detach_if_owned() noexcept {
        if (t_) detail::detach(std::exchange(t_, nullptr));
    }
    // take() hands out the outcome of a finished task and releases it.
    T take() {
        detail::task_record* t = std::exchange(t_, nullptr);
        joined_ = true;
        struct releaser {
            detail::task_record* t;
            ~releaser() { detail::release(t); }
        } r{t};
        if (t->outcome != task_state::done) detail::rethrow_outcome(t);
        if constexpr (!std::is_void_v<T>) return std::move(*static_cast<detail::task_block<T>*>(t)->value);
    }

    detail::task_record* t_ = nullptr;
    bool joined_ = false;
};

// task_info is a snapshot of one live task (runtime::tasks()).
struct task_info {
    std::uint64_t id = 0;
    std::string name;
    task_state state = task_state::created;
    int worker = -1;  // the worker that ran it last, -1 if it has not run yet
    std::chrono::nanoseconds time_in_state{0};  // coarse (a few ms resolution)
    bool pinned = false;
};

namespace this_task {

// inside() says whether the caller runs inside a weft task.
[[nodiscard]] WEFT_API bool inside() noexcept;
// id() is the current task's id. Throws: task_error (not_in_task).
[[nodiscard]] WEFT_API std::uint64_t id();
// name() is the current task's name. Throws: task_error (not_in_task).
[[nodiscard]] WEFT_API std::string_view name();
// worker() is the index of the worker running the current task (0 for a
// runtime without worker threads). It may change at every suspension point
// unless the task is pinned. Throws: task_error (not_in_task).
[[nodiscard]] WEFT_API int worker();
// yield() lets the other ready tasks run; the task is queued again at once.
// A suspension point. Throws: task_error (not_in_task); forced_unwind if the
// task is being canceled.
WEFT_API void yield();
// cancellation_requested() says whether cancel() (or the deadline) has asked
// the current task to stop. Throws: task_error (not_in_task).
[[nodiscard]] WEFT_API bool cancellation_requested();

// shield defers the current task's cancellation while it exists: waits
// inside it are not interrupted, and a cancellation that arrives meanwhile
// takes effect at the first suspension point after the last shield ends.
// Throws: task_error (not_in_task).
class WEFT_API shield {
public:
    shield();
    ~shield();
    shield(const shield&) = delete;
    shield& operator=(const shield&) = delete;

private:
    detail::task_record* t_;
};

// move_on_until() runs f() in a deadline scope: every cancellable wait of
// the current task inside it (a channel operation, a lock, a join, a sleep,
// an io wait: each wait that ends canceled when the task is canceled) ends
// at `at` if it has not ended before, as if the task were canceled, and the
// unwind that follows stops here instead of ending the task. Returns true if
// the deadline cut f short, false if f returned. Scopes nest: a wait ends at
// the earliest open deadline, and only the scope whose deadline that was
// stops the unwind. A real cancellation (cancel(), the task's own deadline,
// a runtime stop) passes through. Waits under a shield are not limited.
// After the scope, waits are limited by nothing it set. f's result is
// dropped. Throws: task_error (not_in_task; needs_stack from a C++20 task's
// coroutine); whatever f throws; forced_unwind when the task is canceled.
template <class F>
bool move_on_until(std::chrono::steady_clock::time_point at, F&& f) {
    detail::deadline_scope s;
    detail::open_scope(s, at);
    struct closer {
        detail::deadline_scope& s;
        ~closer() { detail::close_scope(s); }
    } c{s};
    try {
        static_cast<void>(std::forward<F>(f)());
        return false;
    } catch (...) {
        if (!detail::scope_catch(s)) throw;
    }
    detail::scope_caught_end();  // FIBER-U2: the handler has ended, and with it the unwind
    return true;
}

// move_on_after() is move_on_until(now + d, f).
template <class Rep, class Period, class F>
bool move_on_after(std::chrono::duration<Rep, Period> d, F&& f) {
    return move_on_until(std::chrono::steady_clock::now() +
                             std::chrono::duration_cast<std::chrono::steady_clock::duration>(d),
                         std::forward<F>(f));
}

}  // namespace this_task

// task_local<T> is storage per task: each task sees its own T, created
// (value-initialised) on its first access and destroyed when the task ends.
// It follows the task from worker to worker. A task_local object must
// outlive every task that uses it (make it static or global).
template <class T>
class task_local {
public:
    task_local() = default;
    task_local(const task_local&) = delete;
    task_local& operator=(const task_local&) = delete;

    // get() is the current task's value. Throws: task_error (not_in_task);
    // what constructing a T throws.
    [[nodiscard]] T& get() const {
        return *static_cast<T*>(detail::local_get(this, &make, &destroy));
    }
    T& operator*() const { return get(); }
    T* operator->() const { return &get(); }

private:
    static void* make() { return new T(); }
    static void destroy(void* p) noexcept { delete static_cast<T*>(p); }
};

}  // namespace weft
