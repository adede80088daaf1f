// weft/sync/stop.hpp: layer L5, waiting for a std::stop_token: a select
// case and a plain wait, from tasks and plain threads alike.
//
//   on_stop(token, action)     a select case (weft/sync/select.hpp, and so
//                              also beside weft/io/select.hpp's cases),
//                              chosen once stop is requested on the token;
//   wait(token)                returns once stop is requested;
//   wait_for(token, d), wait_until(token, t)
//                              the same, false if the time passed first.
//
//   std::stop_source quit;
//   weft::select(weft::on_recv(jobs, [&](std::optional<job> j) { ... }),
//                weft::on_stop(quit.get_token(), [&] { done = true; }));
//
// The stop may be requested from any thread or task: std::stop_source runs
// the callbacks on the requesting thread, and the one registered here only
// claims the waiter and wakes it (WAITER-V1, WAITER-V2), which is legal from
// anywhere. A token without a stop state (default-constructed, or of a
// source made with std::nostopstate) is never stopped: its wait ends only by
// its deadline or the task's cancellation. runtime::get_stop_token()
// (weft/runtime.hpp) is a token stopped when the runtime's shutdown() or
// stop() begins.
//
// The protocol, between the stop callback and the waiting party (one waiter,
// at most one node: the wait's or the select case's):
//   STOP-S1  The waiting party registers the callback before it looks at the
//            token: registering runs the callback there and then if stop was
//            already requested, and the callback takes `mu`, so it is never
//            registered under `mu`.
//   STOP-S2  The callback sets `stopped` and claims the linked node's waiter
//            under `mu`; the waiting party reads `stopped` (and the token) and,
//            only if neither says stop, arms its waiter and links its node in
//            the same hold of `mu` (for a select, under all its locks, CHAN-K5).
//            So either the waiting party sees the stop, or its node is linked
//            when the callback takes `mu`: no stop is missed, and the waiter is
//            claimed once (WAITER-V1) whoever else races for it.
//   STOP-S3  The callback hands over only the wake (and, for a select, its case
//            index: WAITER-V2); it reads the waiter under `mu` while the node is
//            linked, or after claiming it (the waiter then waits for its wake).
//            The callback is deregistered (std::stop_callback's destructor,
//            which waits for a callback running on another thread to return)
//            before the core's bytes end, and the core lives where WAITER-V4
//            puts a waiter's nodes: the callback never touches a core that is
//            gone.
#pragma once

#include <chrono>
#include <optional>
#include <stop_token>
#include <utility>

#include "weft/config.hpp"
#include "weft/sync/select.hpp"
#include "weft/waiter.hpp"

namespace weft {

namespace detail {

// stop_core is the non-template part of a stop wait (src/sync/stop.cpp):
// the token, the registered callback and the queue of (at most) one node.
struct WEFT_API stop_core {
    struct WEFT_API fire {
        stop_core* self;
        void operator()() const noexcept;
    };

    std::stop_token token;
    spin_lock mu;
    bool stopped = false;  // STOP-S2: set by the callback, under mu
    wait_queue q;          // the waiting party's node, under mu
    std::optional<std::stop_callback<fire>> cb;

    explicit stop_core(std::stop_token t) noexcept : token(std::move(t)) {}
    // A core moves (into a select held off the frame) only before it is
    // registered: the token moves, nothing else.
    stop_core(stop_core&& o) noexcept : token(std::move(o.token)), stopped(o.stopped) {}
    stop_core(const stop_core&) = delete;
    stop_core& operator=(const stop_core&) = delete;
    stop_core& operator=(stop_core&&) = delete;
    ~stop_core() = default;

    // start() registers the callback (STOP-S1). Not under mu.
    void start() noexcept;
    // stop_seen() says, under mu, whether stop was requested (STOP-S2).
    [[nodiscard]] bool stop_seen() const noexcept { return stopped || token.stop_requested(); }

    // The select case's part (weft/sync/select.hpp's fill()/finish()).
    void fill(select_entry& e) noexcept;
};

// wait_stop() waits for stop on `token` (with a deadline, or none): true if
// stop was requested, false if the deadline passed first. Throws:
// forced_unwind if the task is canceled while it waits.
[[nodiscard]] WEFT_API bool wait_stop(const std::stop_token& token,
                                      const std::chrono::steady_clock::time_point* deadline);

}  // namespace detail

// stop_case is a select case chosen once stop is requested on its token
// (made by on_stop()). Its action runs with no arguments.
template <class F>
struct stop_case {
    detail::stop_core core;
    F action;

    void fill(detail::select_entry& e) noexcept { core.fill(e); }
    void finish(int /*code*/) { action(); }
};

// on_stop() makes a stop case of `token`. A token already stopped makes the
// case ready at once (a select still chooses uniformly among ready cases).
template <class F = detail::no_action>
stop_case<F> on_stop(std::stop_token token, F action = {}) {
    return stop_case<F>{detail::stop_core(std::move(token)), std::move(action)};
}

// wait() returns once stop is requested on `token` (at once if it was).
// A suspension point for a task; a plain thread blocks. Throws:
// forced_unwind if the task is canceled while it waits.
inline void wait(const std::stop_token& token) {
    if (!token.stop_requested()) (void)detail::wait_stop(token, nullptr);
}
// wait_until() / wait_for(): true if stop was requested, false if the time
// passed first (never earlier). Throws: as wait().
[[nodiscard]] inline bool wait_until(const std::stop_token& token, std::chrono::steady_clock::time_point deadline) {
    return token.stop_requested() || detail::wait_stop(token, &deadline);
}
template <class Rep, class Period>
[[nodiscard]] bool wait_for(const std::stop_token& token, const std::chrono::duration<Rep, Period>& d) {
    return wait_until(token, std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::nanoseconds>(d));
}

}  // namespace weft
