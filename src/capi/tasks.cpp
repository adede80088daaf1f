// The C API's runtimes and tasks: weft::runtime (L4) and join_handle (L3)
// behind handles, C task bodies behind a wrapper that turns what escapes
// them into results.
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "capi.hpp"
#include "weft/runtime.hpp"
#include "weft/task.hpp"

namespace weft::capi {
namespace {

struct rt final : object {
    static constexpr kind kind_of = kind::runtime;
    explicit rt(const runtime_options& o) : object(kind::runtime), r(o) {}
    runtime r;
};

struct task final : object {
    static constexpr kind kind_of = kind::task;
    task() noexcept : object(kind::task) {}
    ~task() override {
        if (rec) detail::release(rec);
    }
    join_handle<weft_result> h;
    // rec is the task's record, kept alive by a reference of this object's
    // own: cancel, id and is_done use it, never h, which a join or detach
    // on another thread may be emptying.
    detail::task_record* rec = nullptr;
    // joining: a join or detach of this handle is under way.
    std::atomic<bool> joining{false};
};

// run_c_task() is every C task's body. A C++ exception escaping fn is its
// result WEFT_CALLBACK_FAILED; a cancellation never unwinds fn's frames (the
// C API's blocking calls stop it and return WEFT_CANCELED), so once fn has
// returned, a task whose cancellation was requested is unwound from here,
// in C++, and ends canceled (or timed out) as any weft task.
weft_result run_c_task(void (*fn)(void*), void* arg) {
    weft_result r = WEFT_OK;
    try {
        fn(arg);
    } catch (...) {
        if (detail::forced_unwind_in_flight()) throw;
        r = WEFT_CALLBACK_FAILED;
    }
    detail::task_record* t = detail::current_task();
    if (t->cancel_reason.load(std::memory_order_acquire) != 0) detail::raise_forced_unwind();
    return r;
}

// A detached C task cannot fail with an exception except when it gets no
// stack; say so instead of terminating (weft's default for C++ tasks).
void report_unhandled(const task_info& t, std::exception_ptr) noexcept {
    std::fprintf(stderr, "weft: detached C task '%s' (id %llu) failed (no stack)\n", t.name.c_str(),
                 static_cast<unsigned long long>(t.id));
}

// make_spawn_options() reads a weft_spawn_options for `call`; false (the
// cause recorded, CAPI-E1) for `fn` NULL or a bad option.
bool make_spawn_options(const char* call, void (*fn)(void*), const weft_spawn_options* in, spawn_options& o) noexcept {
    if (!fn) {
        (void)invalid(call, "`fn` is NULL; pass the task's body, a function void fn(void* arg)");
        return false;
    }
    if (!in) return true;
    if (in->name) o.name = in->name;
    o.stack_size = in->stack_size;
    o.pinned = in->pinned != 0;
    const c_deadline d(in->deadline_ns);
    if (!d.valid) {
        (void)invalid(call, "`options->deadline_ns`", bad_deadline);
        return false;
    }
    if (!d.none) o.deadline = d.at;
    return true;
}

weft_result spawn_into(const char* call, runtime* r, void (*fn)(void*), void* arg, const weft_spawn_options* options,
                       weft_task* out) noexcept {
    spawn_options o;
    if (!make_spawn_options(call, fn, options, o)) return WEFT_INVALID_ARGUMENT;
    return guarded([&] {
        auto body = [fn, arg] { return run_c_task(fn, arg); };
        if (!out) {
            if (r)
                r->spawn(body, o).detach();
            else
                weft::spawn(body, o).detach();
            return WEFT_OK;
        }
        // The handle first, so that a spawned task never lacks one.
        std::unique_ptr<task> t(new task);
        const std::uint64_t h = insert(t.get());
        task* raw = t.release();
        try {
            raw->h = r ? r->spawn(body, o) : weft::spawn(body, o);
            raw->rec = raw->h.record();
            raw->rec->refs.fetch_add(1, std::memory_order_relaxed);
        } catch (...) {
            (void)forget<task>(h);
            throw;
        }
        out->id = h;
        return WEFT_OK;
    });
}

// outcome_of() is the result of a finished task whose handle is h.
weft_result outcome_of(join_handle<weft_result>& h) noexcept {
    try {
        return h.join();
    } catch (...) {
        return current_exception_result();
    }
}

}  // namespace
}  // namespace weft::capi

using namespace weft;
using namespace weft::capi;

extern "C" {

weft_runtime_options weft_runtime_options_init(void) noexcept {
    weft_runtime_options o;
    o.workers = 0;
    o.stack_size = runtime_options{}.stack_size;
    return o;
}

weft_spawn_options weft_spawn_options_init(void) noexcept {
    weft_spawn_options o;
    o.name = nullptr;
    o.stack_size = 0;
    o.pinned = 0;
    o.deadline_ns = WEFT_NO_DEADLINE;
    return o;
}

weft_result weft_runtime_create(const weft_runtime_options* options, weft_runtime* out) noexcept {
    if (!out) return invalid("weft_runtime_create", "`out` is NULL; pass the address of a weft_runtime to store it in");
    runtime_options o;
    if (options) {
        o.workers = options->workers;
        o.stack_size = options->stack_size;
    }
    o.unhandled = &report_unhandled;
    return make<rt>(&out->id, o);
}

weft_result weft_runtime_destroy(weft_runtime h) noexcept {
    return with<rt>(h.id, [&](rt& r) {
        if (this_task::inside()) {
            set_error_text("weft_runtime_destroy",
                           "called from inside a task, where it would wait for its own task to end; call it from "
                           "the thread that made the runtime, after weft_runtime_block_on() returns");
            return WEFT_WRONG_THREAD;
        }
        const weft_result res = guarded([&] {
            r.r.stop();
            return WEFT_OK;
        });
        return res != WEFT_OK ? res : forget<rt>(h.id);
    });
}

weft_result weft_runtime_shutdown(weft_runtime h, int64_t deadline_ns, size_t* left) noexcept {
    constexpr const char* call = "weft_runtime_shutdown";
    const c_deadline d(deadline_ns);
    if (!d.valid) return invalid(call, "`deadline_ns`", bad_deadline);
    return with<rt>(h.id, [&](rt& r) {
        if (this_task::inside()) {
            set_error_text(call,
                           "called from inside a task, where it would wait for its own task to end; call it from "
                           "the thread that made the runtime (after weft_runtime_block_on() returns, or from "
                           "main), and from a task end the work instead (close the listener, weft_task_cancel())");
            return WEFT_WRONG_THREAD;
        }
        return guarded([&] {
            const std::size_t n = r.r.shutdown(d.none ? std::chrono::steady_clock::time_point::max() : d.at);
            if (left) *left = n;
            return WEFT_OK;
        });
    });
}

weft_result weft_runtime_spawn(weft_runtime h, void (*fn)(void* arg), void* arg, const weft_spawn_options* options,
                               weft_task* out) noexcept {
    return with<rt>(h.id, [&](rt& r) { return spawn_into("weft_runtime_spawn", &r.r, fn, arg, options, out); });
}

weft_result weft_spawn(void (*fn)(void* arg), void* arg, const weft_spawn_options* options, weft_task* out) noexcept {
    spawn_options o;
    if (!make_spawn_options("weft_spawn", fn, options, o)) return WEFT_INVALID_ARGUMENT;
    if (!this_task::inside()) return not_in_task("weft_spawn", "from a plain thread, use weft_runtime_spawn(rt, ...)");
    return spawn_into("weft_spawn", nullptr, fn, arg, options, out);
}

weft_result weft_runtime_block_on(weft_runtime h, void (*fn)(void* arg), void* arg,
                                  const weft_spawn_options* options) noexcept {
    return with<rt>(h.id, [&](rt& r) {
        spawn_options o;
        if (!make_spawn_options("weft_runtime_block_on", fn, options, o)) return WEFT_INVALID_ARGUMENT;
        if (this_task::inside()) {
            set_error_text("weft_runtime_block_on",
                           "called from inside a task, where it would block its own worker; from a task, use "
                           "weft_spawn() and weft_task_join()");
            return WEFT_WRONG_THREAD;
        }
        return guarded([&] { return r.r.block_on([fn, arg] { return run_c_task(fn, arg); }, o); });
    });
}

weft_result weft_runtime_run_once(weft_runtime h, size_t* ran) noexcept {
    return with<rt>(h.id, [&](rt& r) {
        return guarded([&] {
            const std::size_t n = r.r.run_once();
            if (ran) *ran = n;
            return WEFT_OK;
        });
    });
}

weft_result weft_task_join(weft_task h, int64_t deadline_ns) noexcept {
    const c_deadline d(deadline_ns);
    if (!d.valid) return invalid("weft_task_join", "`deadline_ns`", bad_deadline);
    return with<task>(h.id, [&](task& t) {
        if (t.joining.exchange(true, std::memory_order_acquire)) return WEFT_WRONG_STATE;
        if (detail::current_task() == t.rec) {
            t.joining.store(false, std::memory_order_release);
            return WEFT_WRONG_STATE;
        }
        const weft_result waited = guarded([&] {
            return detail::wait_finished(t.rec, d.none ? nullptr : &d.at) ? WEFT_OK : WEFT_TIMED_OUT;
        });
        if (waited != WEFT_OK) {
            t.joining.store(false, std::memory_order_release);
            return waited;
        }
        // Finished: the handle goes, the outcome is the result.
        if (const weft_result r = forget<task>(h.id); r != WEFT_OK) return r;
        return outcome_of(t.h);
    });
}

weft_result weft_task_is_done(weft_task h, int* out) noexcept {
    return fetch<task>("weft_task_is_done", h.id, out,
                       [](task& t) { return t.rec->finished.load(std::memory_order_acquire) ? 1 : 0; });
}

weft_result weft_task_detach(weft_task h) noexcept {
    return with<task>(h.id, [&](task& t) {
        if (t.joining.exchange(true, std::memory_order_acquire)) return WEFT_WRONG_STATE;
        if (const weft_result r = forget<task>(h.id); r != WEFT_OK) return r;
        t.h.detach();
        return WEFT_OK;
    });
}

weft_result weft_task_cancel(weft_task h) noexcept {
    return with<task>(h.id, [](task& t) {
        detail::request_cancel(t.rec, detail::wait_status::canceled);
        return WEFT_OK;
    });
}

weft_result weft_task_id(weft_task h, uint64_t* out) noexcept {
    return fetch<task>("weft_task_id", h.id, out, [](task& t) { return t.rec->id; });
}

weft_result weft_current_task_id(uint64_t* out) noexcept {
    if (!out) return invalid("weft_current_task_id", "`out` is NULL; pass the address of a uint64_t");
    if (!this_task::inside()) return not_in_task("weft_current_task_id", "outside a task there is no current task");
    return guarded([&] {
        *out = this_task::id();
        return WEFT_OK;
    });
}

weft_result weft_yield(void) noexcept {
    if (!this_task::inside()) return not_in_task("weft_yield", "a plain thread may call sched_yield() instead");
    return guarded([] {
        this_task::yield();
        return WEFT_OK;
    });
}

weft_result weft_sleep_until(int64_t deadline_ns) noexcept {
    if (deadline_ns < 0)
        return invalid_with("weft_sleep_until", [&] {
            return "`deadline_ns` " + std::to_string(deadline_ns) +
                   " is negative; pass an absolute CLOCK_MONOTONIC time in ns (weft_now() + a duration)";
        });
    const c_deadline d(deadline_ns);
    return guarded([&] {
        this_task::sleep_until(d.at);
        return WEFT_OK;
    });
}

weft_result weft_sleep(int64_t ns) noexcept {
    if (ns < 0)
        return invalid_with("weft_sleep", [&] {
            return "`ns` " + std::to_string(ns) + " is negative; pass a duration of 0 or more";
        });
    return guarded([&] {
        this_task::sleep_for(std::chrono::nanoseconds(ns));
        return WEFT_OK;
    });
}

}  // extern "C"
