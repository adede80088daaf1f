// weft/task_group.hpp: layer L5, structured concurrency: groups of tasks
// that end as a whole. Two kinds, one machinery:
//
//   task_group: fan-out (Trio's nursery, Go's errgroup). The first child that
//   throws cancels every other child; wait() rethrows that exception once all
//   of them have ended, and spawn() into a failed group rethrows it at once.
//
//     weft::task_group g;
//     for (auto& url : urls) g.spawn([&, url] { fetch(url, out); });
//     g.wait();  // all ended; the first exception, if any, is rethrown here
//
//   supervisor: long-lived children whose failures stay their own (a server's
//   connections; Tokio's JoinSet, which does not cancel siblings either). A
//   child that throws ends alone; the failure goes to the supervisor's handler
//   (by default a line on stderr naming the task) and is counted.
//
//     weft::supervisor conns;  // or supervisor([](const weft::task_failure& f) {...})
//     for (;;) conns.spawn([c = l.accept()]() mutable { serve(c); }, {.name = "conn"});
//
// Canceling the task blocked in wait() cancels the group and waits for every
// child (shielded) before the cancellation goes on. The destructor cancels
// and waits for what is left: no child outlives its group, and none is
// detached. docs/runtime.md, "Task groups" and "Supervising connections",
// has the contract; the invariants GROUP-I1 - GROUP-I8 are below, next to
// the state they are about.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <iterator>
#include <list>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "weft/config.hpp"
#include "weft/detail/support.hpp"
#include "weft/runtime.hpp"
#include "weft/sync/event.hpp"
#include "weft/task.hpp"
#include "weft/waiter.hpp"

namespace weft {

// task_failure is one failed child of a supervisor, as its handler sees it.
struct task_failure {
    std::uint64_t id = 0;      // the task's id (weft::this_task::id())
    std::string name;          // the task's name (spawn_options::name), maybe empty
    std::exception_ptr error;  // what it threw; task_canceled (timed_out) for its own deadline;
                               // stack_error when it could not start
    // describe() is "task 'NAME' (id N) failed: WHAT", the default log line.
    [[nodiscard]] std::string describe() const {
        std::string out = "task ";
        if (!name.empty()) out.append("'").append(name).append("' ");
        out.append("(id ").append(std::to_string(id)).append(") failed: ");
        try {
            if (error) std::rethrow_exception(error);
            out.append("no exception");
        } catch (const std::exception& x) {
            out.append(x.what());
        } catch (...) {
            out.append("an exception that is not a std::exception");
        }
        return out;
    }
};

namespace detail {

// group_state is a task_group's shared state. It lives on the heap, owned
// by the group and by every unit (below): children never point into the
// frame of the task that owns the group, so the owner may be a copy-stack
// task, and the state outlives the group object until the last unit goes.
//
// `units` counts three kinds of unit (group_unit), each a reference that
// keeps wait() from returning:
//   - one per child whose callable still exists (taken before the task is
//     spawned, released after the callable and its captures are destroyed);
//   - one per spawn() between its start and the listing of its handle;
//   - one per drain (wait(), the destructor) while it reaps the handles it
//     took out of `children`.
//
//   GROUP-I1  A child's callable, and with it all of the child's own code,
//             exists only while its unit is held: the unit is the first
//             member of the callable's wrapper (group_child), so it is
//             destroyed last, after the user's callable and its captures,
//             on whichever path the callable goes (the body ran, threw, was
//             unwound, or never ran: canceled before its first instruction,
//             no stack, a refused spawn). So units == 0 means no child code
//             runs and none can start.
//   GROUP-I2  `units` rises only while a unit of the same group is held or
//             under `lock` (a drain takes its unit there), and a spawn lists
//             its handle (under `lock`) before it releases its own unit. So
//             a drain that sees units == 0 under `lock` sees every handle
//             that will ever be listed for the code that has run, and a
//             drain returns only when, in one hold of `lock`, units == 0
//             and `children` is empty: no spawn is halfway, no child code
//             runs, no other drain is still reaping.
//   GROUP-I3  `canceled` goes from false to true once, under `lock`, and in
//             the same hold every handle in `children` is canceled; a spawn
//             lists its handle under `lock` and cancels it there if
//             `canceled` is set. So once the group is canceled every child,
//             spawned before, during or after, is canceled: none escapes,
//             whichever of a failure, cancel(), the owner's cancellation or
//             a spawn comes first. And a child loads `canceled` before it
//             calls the user's callable, and if it is set cancels itself
//             there: a child spawned after the cancellation (which happened
//             before the spawn) never runs its code, even if a worker starts
//             it before its spawn has listed it.
//   GROUP-I4  `failure` is written only while it is null, under `lock`: the
//             first failure stays, later ones are dropped. A failure is an
//             exception other than the forced unwind leaving a child's
//             callable, a child that ends timed_out (its own deadline), or a
//             child that could not start (stack_error). A child unwound
//             because it was canceled (by the group, or by its runtime's
//             stop) is not a failure. Each failure is recorded, and the
//             group canceled, by the child's wrapper while it still holds
//             the child's unit, whether the body ran or not (a child timed
//             out or without a stack before it started: ~group_child(),
//             through discarded_task()). So a failure cancels the siblings
//             before wait() can see units == 0, and no sibling that waits
//             forever can keep the failure from being seen.
//   GROUP-I5  A handle leaves `children` only once its task's code has
//             ended: a sweep takes finished tasks only, a drain takes all
//             of them only at units == 0 (GROUP-I1). So a cancel that walks
//             `children` (GROUP-I3) reaches every child whose code may still
//             run. A handle taken out is dropped only after its task has
//             finished (the drain waits for that, shielded); one whose task
//             failed is joined, never detached, so no failure reaches the
//             runtime's unhandled-exception handler.
//   GROUP-I6  wait() returns, or unwinds, only after a drain has returned
//             (GROUP-I2, GROUP-I5): when the owner is canceled in wait(), or
//             anything else leaves it early, the group is canceled and
//             drained under a shield first. The destructor does the same when
//             anything is left. So no child outlives the group.
//   GROUP-I7  (errgroup) Once `failure` is set, spawn() rethrows it before it
//             takes a unit or makes a task: the owner learns of the failure
//             at its next spawn at the latest, and at once through the
//             group's stop token (GROUP-I8). A spawn that read no failure may
//             still race one: its child is then canceled by GROUP-I3.
//   GROUP-I8  `stop` is requested by the one call that set `canceled`, right
//             after the hold of `lock` in which it did (never under `lock`:
//             a stop callback may call back into the group). So a stop token
//             of the group says stop only once the group is canceled and
//             every listed child was, and its callbacks run once.
//   GROUP-S1  (supervisor, `isolate`) A failure cancels nothing and is never
//             stored: the child's wrapper counts it and hands it to
//             `on_failure`, once, on the failing child's task (outside it for
//             a child that never ran), while the child's unit is held, so
//             wait() returns only after every handler call has returned.
//             dispose() reports nothing for a supervisor: by GROUP-I4 the
//             wrapper has reported every failure already.
struct group_state {
    spin_lock lock;                          // guards what follows, up to `units`
    std::list<join_handle<void>> children;   // listed and not yet reaped (GROUP-I5)
    std::exception_ptr failure;              // the first failure (GROUP-I4); never set if `isolate`
    std::atomic<bool> canceled{false};       // GROUP-I3: written under `lock`
    std::size_t spawning = 0;                // spawn() calls between their start and their listing
    std::size_t sweep_at = 64;               // spawn() sweeps finished handles at this many
    wait_group units;                        // GROUP-I1, GROUP-I2; has its own lock
    std::stop_source stop;                   // GROUP-I8
    const bool isolate;                      // a supervisor (GROUP-S1)
    const std::function<void(const task_failure&)> on_failure;  // GROUP-S1; empty: the default line
    std::atomic<std::uint64_t> failures{0};  // GROUP-S1: failures reported so far

    group_state() : isolate(false) {}
    explicit group_state(std::function<void(const task_failure&)> handler)
        : isolate(true), on_failure(std::move(handler)) {}

    // fail() is the failure e of the child t (the running task, or one that
    // never ran). A task group records e if it is the first failure and
    // cancels the group (but not the calling task: a failing child is
    // ending anyway); a supervisor reports it (GROUP-S1).
    void fail(std::exception_ptr e, const task_record* t) noexcept {
        if (isolate) {
            failures.fetch_add(1, std::memory_order_relaxed);
            report(e, t);
            return;
        }
        bool first;
        {
            std::lock_guard g(lock);
            if (!failure) failure = std::move(e);  // GROUP-I4
            first = cancel_locked(current_task());
        }
        if (first) stop.request_stop();  // GROUP-I8
    }
    // report() hands a supervised child's failure to the handler, or writes
    // the default line; a handler that throws is reported, never propagated.
    void report(const std::exception_ptr& e, const task_record* t) noexcept {
        task_failure f;
        f.error = e;
        try {
            if (t) {
                f.id = t->id;
                f.name = std::string(t->name);
            }
            std::optional<this_task::shield> quiet;  // a handler's waits are not cut short by a deadline's unwind
            if (this_task::inside()) quiet.emplace();
            if (on_failure) {
                on_failure(f);
                return;
            }
            const std::string line = "weft: supervised " + f.describe() + "\n";
            std::fputs(line.c_str(), stderr);
        } catch (...) {
            std::fprintf(stderr, "weft: %s threw (%s) while reporting the failure of supervised task %llu\n",
                         on_failure ? "a supervisor's failure handler" : "the default failure report",
                         describe_current_exception().c_str(), static_cast<unsigned long long>(f.id));
        }
    }
    static std::string describe_current_exception() noexcept {
        try {
            throw;
        } catch (const std::exception& x) {
            try {
                return x.what();
            } catch (...) {
            }
        } catch (...) {
        }
        return "an exception that is not a std::exception";
    }
    // cancel() cancels the group: every child, now and later (GROUP-I3).
    void cancel() noexcept {
        bool first;
        {
            std::lock_guard g(lock);
            first = cancel_locked(nullptr);
        }
        if (first) stop.request_stop();  // GROUP-I8
    }
    // cancel_locked() cancels the group and says whether this call did; the
    // caller requests `stop` after unlocking if so (GROUP-I8).
    [[nodiscard]] bool cancel_locked(const task_record* except) noexcept {
        if (canceled.load(std::memory_order_relaxed)) return false;  // every listed child was canceled then (GROUP-I3)
        canceled.store(true, std::memory_order_seq_cst);
        for (auto& h : children)
            if (h.record() != except) h.cancel();
        return true;
    }
    // owns() says whether t is a child of the group whose code runs (wait()
    // or the destructor from inside a child would wait for itself). A child
    // is listed before its spawn() ends, and stays listed while its code
    // runs (GROUP-I5); so while no spawn() is halfway, a task not listed is
    // no running child. A halfway spawn() ends without waiting for anything:
    // the thread just yields until it has.
    [[nodiscard]] bool owns(const task_record* t) noexcept {
        if (!t) return false;
        for (;;) {
            {
                std::lock_guard g(lock);
                for (auto& h : children)
                    if (h.record() == t) return true;
                if (spawning == 0) return false;
            }
            std::this_thread::yield();
        }
    }
    // idle() says whether nothing is left to wait for or to reap.
    [[nodiscard]] bool idle() noexcept {
        std::lock_guard g(lock);
        return units.count() == 0 && children.empty();
    }
};

// group_unit is one unit of a group's `units` (see group_state): taken when
// made, released when destroyed; moving hands it over.
class group_unit {
public:
    explicit group_unit(std::shared_ptr<group_state> s) : s_(std::move(s)) { s_->units.add(1); }
    group_unit(group_unit&&) noexcept = default;
    group_unit& operator=(group_unit&&) = delete;
    group_unit(const group_unit&) = delete;
    group_unit& operator=(const group_unit&) = delete;
    ~group_unit() {
        if (s_) s_->units.done();  // then the reference goes: the state may go with it
    }
    [[nodiscard]] group_state& state() const noexcept { return *s_; }
    [[nodiscard]] bool held() const noexcept { return s_ != nullptr; }  // false once moved from

private:
    std::shared_ptr<group_state> s_;
};

// group_child<F> is the callable a group spawns for f: it runs f, reports a
// failure, and holds the child's unit. `unit` is declared first so that it
// is destroyed last (GROUP-I1).
template <class F>
struct group_child {
    group_unit unit;
    F fn;

    bool invoked = false;

    template <class G>
    group_child(group_unit&& u, G&& g) : unit(std::move(u)), fn(std::forward<G>(g)) {}
    group_child(group_child&&) = default;
    // A child that ends without having run (its deadline passed, or no
    // stack could be had, before it started) is reported here, while its
    // unit is still held: the group is canceled before wait() can see
    // units == 0 (GROUP-I4). Destroyed otherwise without running (a refused
    // spawn, a copy moved from, a cancellation), it reports nothing.
    ~group_child() {
        if (invoked || !unit.held()) return;
        task_record* t = discarded_task();
        if (!t) return;
        if (t->outcome == task_state::timed_out)
            unit.state().fail(timeout_failure(t), t);
        else if (t->outcome == task_state::failed)
            unit.state().fail(t->exception, t);
    }

    void operator()() {
        invoked = true;
        if (unit.state().canceled.load(std::memory_order_seq_cst)) {
            // GROUP-I3: spawned into a canceled group; end canceled, the
            // user's callable never called.
            task_record* self = current_task();
            request_cancel(self, wait_status::canceled);
            check_cancel(self);  // throws forced_unwind
        }
        // A forced unwind leaves through the handler below (`throw;`) and
        // then through this probe's destructor, outside any handler: there a
        // deadline's unwind is reported as a failure (GROUP-I4) without a
        // throw inside the handler of a foreign exception.
        struct unwind_probe {
            group_state& s;
            bool passed = false;
            ~unwind_probe() {
                if (!passed) report_timeout(s);
            }
        } probe{unit.state()};
        try {
            std::invoke(fn);
        } catch (...) {
            if (forced_unwind_in_flight()) throw;  // canceled: not a failure (GROUP-I4)
            probe.s.fail(std::current_exception(), current_task());
        }
        probe.passed = true;
    }

    // report_timeout() records a failure if the running task is being unwound
    // by its own deadline (its cancellation reason is timed_out).
    static void report_timeout(group_state& s) noexcept {
        task_record* t = current_task();
        if (!t || canceled_outcome(t) != task_state::timed_out) return;
        s.fail(timeout_failure(t), t);
    }
    // timeout_failure() is the failure of t, timed out: what join() throws.
    static std::exception_ptr timeout_failure(const task_record* t) noexcept {
        try {
            std::string what = "weft: task ";
            if (!t->name.empty()) what.append("'").append(t->name).append("' ");
            what.append("(id ").append(std::to_string(t->id)).append(") was timed out");
            return std::make_exception_ptr(task_canceled(task_state::timed_out, what));
        } catch (...) {  // no memory for the message: the group is canceled all the same
            return std::make_exception_ptr(std::bad_alloc());
        }
    }
};

// dispose() drops handles whose tasks have all finished, reporting the
// failures the children's wrappers could not see (GROUP-I4, GROUP-I5).
inline void dispose(group_state& s, std::list<join_handle<void>>& hs) noexcept {
    for (auto& h : hs) {
        const task_state st = h.state();
        if (st == task_state::failed || st == task_state::timed_out) {
            try {
                h.join();  // rethrows: the task's exception, or task_canceled (timed_out)
            } catch (...) {
                // GROUP-S1: a supervisor's wrapper has reported every failure;
                // the join only keeps it from the unhandled handler (GROUP-I5).
                if (!s.isolate) s.fail(std::current_exception(), h.record());
            }
        }
    }
    hs.clear();  // done or canceled: dropping the handle reports nothing
}

// drain() waits until every child has finished and every handle is reaped
// (GROUP-I2, GROUP-I5). shielded: its waits cannot be canceled (for the
// destructor and the unwinding path); otherwise the first wait throws
// forced_unwind if the calling task is canceled, before anything is taken.
inline void drain(group_state& s, bool shielded) {
    const bool in_task = this_task::inside();
    std::optional<this_task::shield> shield;
    if (shielded && in_task) shield.emplace();
    for (;;) {
        s.units.wait();
        std::list<join_handle<void>> ended;
        {
            std::lock_guard g(s.lock);
            if (s.units.count() != 0) continue;  // a spawn came in meanwhile
            if (s.children.empty()) return;      // GROUP-I2
            ended.splice(ended.end(), s.children);
            // Taken under the lock, in the hold that saw units == 0: no other
            // drain can now see zero until this one has reaped (GROUP-I2).
            s.units.add(1);
        }
        // Nothing below throws; the unit is released by RAII all the same.
        struct release_unit {
            group_state& s;
            ~release_unit() { s.units.done(); }
        } release{s};
        {
            // The children's code has ended (GROUP-I1); what is left of each
            // task is its end (task_local destructors, complete()): wait for
            // it without being interruptible, so that no handle is dropped
            // before its task has finished (GROUP-I5).
            std::optional<this_task::shield> brief;
            if (in_task && !shield) brief.emplace();
            for (auto& h : ended) (void)wait_finished(h.record(), nullptr);
        }
        dispose(s, ended);
    }
}

// group_core is what task_group and supervisor share: the state and the
// spawn, wait, cancel and destroy paths.
class group_core {
public:
    explicit group_core(std::shared_ptr<group_state> s) : s_(std::move(s)) { need_stack(current_task()); }
    ~group_core() {
        group_state& s = *s_;
        if (s.idle()) return;
        if (s.owns(current_task()))
            fatal_message("weft: task_group or supervisor destroyed from inside one of its own tasks; "
                          "it would wait for itself");
        s.cancel();
        stack_pin pin;  // SHRINK-A2: the children may use this task's locals by reference
        drain(s, true);
    }
    group_core(const group_core&) = delete;
    group_core& operator=(const group_core&) = delete;

    [[nodiscard]] std::exception_ptr wait_exception() {
        group_state& s = *s_;
        task_record* self = current_task();
        need_stack(self);
        if (s.owns(self)) [[unlikely]]
            task_misuse(self, task_errc::join_self);
        stack_pin pin;  // SHRINK-A2: the children may use this task's locals by reference
        // GROUP-I6: leaving early (forced_unwind) cancels and drains first.
        struct on_unwind {
            group_state& s;
            bool armed = true;
            ~on_unwind() {
                if (!armed) return;
                s.cancel();
                drain(s, true);
            }
        } guard{s};
        drain(s, false);
        guard.armed = false;
        std::lock_guard g(s.lock);
        return s.failure;
    }

    template <class F>
    void add(runtime* rt, F&& f, const spawn_options& options) {
        using child = group_child<std::decay_t<F>>;
        static_assert(std::is_void_v<std::invoke_result_t<std::decay_t<F>&>>,
                      "weft::task_group::spawn(f) / weft::supervisor::spawn(f): f must return void "
                      "(the group keeps no results)");
        group_state& s = *s_;
        // The list node is made before the task: listing it cannot fail, so
        // a task that was spawned is always listed (GROUP-I5).
        std::list<join_handle<void>> one;
        one.emplace_back();
        std::list<join_handle<void>> ended;
        std::exception_ptr failed;
        {
            std::lock_guard g(s.lock);
            failed = s.failure;  // GROUP-I7
            if (!failed) {
                ++s.spawning;
                sweep_locked(s, ended);
            }
        }
        if (failed) std::rethrow_exception(failed);  // GROUP-I7: no unit taken, no task made
        group_unit spawning(s_);  // GROUP-I2: held until the handle is listed
        // Destroyed before `spawning`: lists the handle, if a task was
        // spawned, and then lets the unit go (GROUP-I2, GROUP-I3).
        struct listing {
            group_state& s;
            std::list<join_handle<void>>& one;
            ~listing() {
                std::lock_guard g(s.lock);
                --s.spawning;
                if (!one.front().valid()) return;  // spawn() threw: no child
                if (s.canceled.load(std::memory_order_relaxed)) one.front().cancel();  // GROUP-I3
                s.children.splice(s.children.end(), one);
            }
        } list_it{s, one};
        dispose(s, ended);
        child c(group_unit(s_), std::forward<F>(f));
        one.front() = rt ? rt->spawn(std::move(c), options)
                         : spawn_on(current_core(isolate_name(s), "from a plain thread, spawn into a runtime: spawn(rt, f)"),
                                    std::move(c), options);
    }

    [[nodiscard]] group_state& state() const noexcept { return *s_; }

    // What task_group and supervisor both offer as they are (each documents
    // them for its own kind).
    template <class F>
        requires std::is_invocable_v<std::decay_t<F>&>
    void spawn(F&& f, const spawn_options& options = {}) {
        add(nullptr, std::forward<F>(f), options);
    }
    template <class F>
        requires std::is_invocable_v<std::decay_t<F>&>
    void spawn(runtime& rt, F&& f, const spawn_options& options = {}) {
        add(&rt, std::forward<F>(f), options);
    }
    void cancel() noexcept { s_->cancel(); }
    [[nodiscard]] bool canceled() const noexcept { return s_->canceled.load(std::memory_order_seq_cst); }
    [[nodiscard]] std::stop_token get_stop_token() const noexcept { return s_->stop.get_token(); }

private:
    static const char* isolate_name(const group_state& s) noexcept {
        return s.isolate ? "weft::supervisor::spawn()" : "weft::task_group::spawn()";
    }
    // sweep_locked() takes out the finished children once the handles have
    // doubled since the last sweep, so that a long-lived group (a server's
    // connections) does not keep a handle per ended task; the caller disposes
    // of them after unlocking.
    static void sweep_locked(group_state& s, std::list<join_handle<void>>& ended) noexcept {
        if (s.children.size() < s.sweep_at) return;
        for (auto it = s.children.begin(); it != s.children.end();) {
            auto next = std::next(it);
            if (it->is_ready()) ended.splice(ended.end(), s.children, it);  // GROUP-I5
            it = next;
        }
        s.sweep_at = std::max<std::size_t>(64, 2 * s.children.size());
    }

    std::shared_ptr<group_state> s_;
};

}  // namespace detail

// task_group is a scope of tasks that ends as a whole, for fan-out: the
// first failure cancels the rest (for long-lived children whose failures
// must stay their own, such as a server's connections, use supervisor).
// Use it from inside a stackful weft task, or from a plain thread
// (spawn(rt, f); waits block the thread, as join_handle::join() does: with
// workers = 0 another thread must drive the runtime meanwhile). Not from a
// C++20 coroutine task (weft::async): its waits need a stack (task_error
// needs_stack). Not copyable or movable.
//
// Its methods may be called from any task or thread at once, including from
// the children (a child may spawn siblings into the group). The group object
// must outlive those calls; a child on a copy-stack owner may not reach a
// group in its owner's frame (docs/runtime.md, "What a copy-stack task may
// point at").
class task_group : private detail::group_core {
public:
    // task_group() makes an empty group. Throws: std::bad_alloc;
    // task_error (needs_stack) inside a C++20 coroutine task.
    task_group() : group_core(std::make_shared<detail::group_state>()) {}
    // ~task_group() does nothing if every child has ended and been waited
    // for. Otherwise it cancels the group and waits, shielded, until every
    // child has ended (GROUP-I6); failures found then are dropped (call
    // wait() to see them). Destroying a group from inside one of its own
    // children, which would wait for itself, aborts with a message.
    ~task_group() = default;
    task_group(const task_group&) = delete;
    task_group& operator=(const task_group&) = delete;

    // spawn() spawns f (a callable returning void) as a child of the group,
    // into the runtime of the calling task (weft::spawn) or into rt, with
    // the options weft::spawn takes (name, stack, pinned, copy_stack,
    // deadline, timeout: a child that ends timed_out is a failure).
    // Once a child has failed, spawn() rethrows that failure and spawns
    // nothing (GROUP-I7): the owner cannot go on spawning into a group that
    // is winding down. After the group was canceled without a failure
    // (cancel(), its owner's cancellation) the child is still spawned, and
    // canceled at once: it ends canceled without the callable being called
    // (GROUP-I3; f and its captures are destroyed), and spawn() does not
    // throw for it. Throws: the group's first failure; task_error
    // (not_in_task for the first form outside a task; runtime_stopping);
    // std::bad_alloc; what moving or copying f throws. When it throws, no
    // child was added.
    using detail::group_core::spawn;

    // wait() returns once every child has ended (also the children they
    // spawned into the group meanwhile) and has been reaped; then it rethrows
    // the group's first failure if there was one (GROUP-I4: later failures
    // are dropped). A failure stays: a later wait() rethrows it again.
    // If the calling task is canceled while it waits, the group is canceled,
    // the task waits (shielded) for every child to end, and then the
    // forced_unwind goes on (GROUP-I6). After a wait() that returned, the
    // group is empty and may be used again (a group that failed refuses
    // spawns for good: GROUP-I7). Throws: the first failure; forced_unwind;
    // task_error (join_self from inside one of its children; needs_stack).
    void wait() {
        if (std::exception_ptr e = wait_exception()) std::rethrow_exception(e);
    }
    // wait_exception() is wait() that returns the first failure (null if
    // none) instead of throwing it. Throws: forced_unwind; task_error
    // (join_self, needs_stack).
    using detail::group_core::wait_exception;

    // cancel() cancels every child (each ends canceled at its next
    // suspension point, or before its first instruction) and every child
    // spawned later. It does not wait, and it is not a failure: wait() then
    // returns normally unless a child failed. Idempotent; for good.
    using detail::group_core::cancel;
    // canceled() says whether the group has been canceled (by cancel(), a
    // failure, or the cancellation of a task waiting in wait()).
    using detail::group_core::canceled;
    // failed() says whether a child has failed (wait() would rethrow).
    [[nodiscard]] bool failed() const noexcept {
        std::lock_guard g(state().lock);
        return state().failure != nullptr;
    }
    // get_stop_token() is a std::stop_token whose stop is requested when the
    // group is canceled: by a failure, cancel(), or its owner's cancellation
    // (GROUP-I8). The owner can select on it next to its own waits
    // (weft::on_stop) to learn of a failure while it waits on something else.
    using detail::group_core::get_stop_token;
};

// supervisor is a scope of long-lived tasks whose failures stay their own:
// a child that throws (or ends by its own deadline, or cannot start) ends
// alone, its siblings and later spawns go on, and the failure is counted
// and handed to the handler given at construction, or, without one,
// written to stderr as "weft: supervised task 'NAME' (id N) failed: WHAT".
// It is what a server keeps its connections in: one failing handler costs
// one connection, never the server, and nothing is caught by hand.
//
// The handler is called on the failing child's task, after the child's code
// has ended and before wait() can return (GROUP-S1), possibly on several
// workers at once: it must be safe to call concurrently; its waits are
// shielded from the child's cancellation, and for a child that never ran it
// is called outside any task, so keep it short. If it throws, a line saying
// so is written to stderr and the exception is dropped.
//
// Otherwise it is a task_group: the same spawn() forms and options, cancel(),
// the same wait() (it never throws a child's failure) and the same
// destructor (cancel, then wait for every child). Shutting a server down:
// stop accepting, then cancel() and wait(), or wait() alone to drain.
class supervisor : private detail::group_core {
public:
    supervisor() : group_core(std::make_shared<detail::group_state>(std::function<void(const task_failure&)>{})) {}
    explicit supervisor(std::function<void(const task_failure&)> on_failure)
        : group_core(std::make_shared<detail::group_state>(std::move(on_failure))) {}
    ~supervisor() = default;
    supervisor(const supervisor&) = delete;
    supervisor& operator=(const supervisor&) = delete;

    // spawn() spawns f as a supervised child (the forms and options of
    // task_group::spawn). After cancel() the child is spawned and canceled
    // at once, as in a task_group. Throws: task_error (not_in_task,
    // runtime_stopping); std::bad_alloc; what moving or copying f throws.
    using detail::group_core::spawn;
    // wait() returns once every child has ended and every failure has been
    // reported. It throws no child's failure. Canceled while it waits, it
    // cancels the children and waits for them first (GROUP-I6). Throws:
    // forced_unwind; task_error (join_self, needs_stack).
    void wait() { (void)wait_exception(); }
    // cancel() cancels every child and every child spawned later; it does
    // not wait. Idempotent; for good.
    using detail::group_core::cancel;
    using detail::group_core::canceled;
    // failures() is the number of children whose failure has been reported.
    [[nodiscard]] std::uint64_t failures() const noexcept {
        return state().failures.load(std::memory_order_relaxed);
    }
    // get_stop_token() is requested by cancel() or the owner's cancellation
    // in wait(), never by a child's failure.
    using detail::group_core::get_stop_token;
};

}  // namespace weft
