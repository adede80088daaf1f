// weft/io/select.hpp: layer L6, select() cases over io (weft/sync/select.hpp),
// beside its channel, timeout and default cases:
//
//   io::on_readable(h, action)   chosen when handle h is readable;
//   io::on_writable(h, action)   chosen when handle h is writable;
//                                action(std::error_code) runs if chosen: clear
//                                when ready, else why the case ended (below);
//   io::on_signal(set, action)   chosen when a signal of `set` arrives (one
//                                delivery, taken as set.wait() takes it);
//                                action(int sig) runs if chosen.
//
//   weft::select(weft::io::on_readable(sock), weft::on_recv(stop),
//                weft::on_timeout(30s, [&] { idle = true; }));
//
// One waiter is linked in every case's queue (a channel's, a handle's
// registration in the reactor, a signal set's), under every case's lock, and
// exactly one party claims it (WAITER-V1, CHAN-K5): a reactor event, a
// closing handle, the signal thread, a channel's other side, the timeout or
// a cancellation.
//
//   IO-Q1  A readiness case is level-triggered: it is ready when the fd is
//          ready when the case is made (a poll(2) with no timeout, in
//          on_readable() / on_writable()), or when the reactor kept a readiness
//          edge for it (REACTOR-R3, consumed as a wait consumes it), or when an
//          event arrives while the select waits. So, unlike handle::wait(), it
//          may be used without a preceding EAGAIN: data already there is not
//          slept on. Readiness is a hint all the same: the read or write after
//          it may report EAGAIN and then waits (or selects) again. The
//          poll(2) is left out when the registration knows the fd empty
//          (IO-Q3, src/io/handle.cpp: the last read found it so and no
//          event came since): then no system call at all.
//   IO-Q2  A readiness case holds an operation on its handle (IO-H1) from
//          on_readable() until the case is destroyed, so the fd stays open
//          (and its number unused by anybody else) while the select looks at
//          it, also if another task closes the handle meanwhile: the case
//          then ends with operation_canceled (REACTOR-R5).
//
// A readiness case's error codes: bad_file_descriptor (the handle was closed
// before the case was made), operation_canceled (closed meanwhile),
// invalid_argument (the handle is registered with another runtime's
// reactor), and what registering it reported. A readiness case needs a task
// (a plain thread has no reactor to wait in): outside one, on_readable() and
// on_writable() throw std::system_error (operation_not_permitted). A signal
// case works from tasks and plain threads alike; on an empty (moved-from)
// set on_signal() throws std::system_error (bad_file_descriptor).
#pragma once

#include <cstdint>
#include <system_error>
#include <utility>

#include "weft/config.hpp"
#include "weft/io/handle.hpp"
#include "weft/io/signal.hpp"
#include "weft/sync/select.hpp"

namespace weft::io {

namespace detail {

// ready_core is the non-template part of a readiness case (src/io/handle.cpp).
struct WEFT_API ready_core {
    handle* h = nullptr;
    registration* r = nullptr;
    std::uint32_t seq = 0;
    std::uint32_t tick = 0;  // IO-Q3: the registration's event count when the case was made
    int dir = 0;         // 0 readable, 1 writable (a registration's queue)
    bool in_op = false;  // IO-Q2: holds an op on *h
    bool level = false;  // IO-Q1: the fd was ready when the case was made
    bool cached = false;  // IO-Q3: known empty (full) instead: no poll(2) made
    std::error_code ec;  // why the case ended, if not ready
    weft::spin_lock own;  // the case's lock when it has no registration (an error case)

    ready_core(handle& hh, interest what, const char* who);
    ready_core(ready_core&& o) noexcept;
    ready_core(const ready_core&) = delete;
    ready_core& operator=(const ready_core&) = delete;
    ready_core& operator=(ready_core&&) = delete;
    ~ready_core();

    void fill(weft::detail::select_entry& e) noexcept;
    void finish(int code) noexcept;
};

// readiness_polls() counts the IO-Q1 poll(2)s that readiness cases made on
// the calling thread (tests see IO-Q3 leave them out).
WEFT_API std::uint64_t readiness_polls() noexcept;

// signal_core is the non-template part of a signal case (src/io/signal.cpp).
struct WEFT_API signal_core {
    void* set = nullptr;  // the signal_set's state
    int sig = 0;          // the signal taken, once the case completed

    explicit signal_core(signal_set& s);
    void fill(weft::detail::select_entry& e) noexcept;
    void finish(int code) noexcept;
};

}  // namespace detail

// ready_case is a select case waiting for a handle's readiness (made by
// on_readable() / on_writable()).
template <class F>
struct ready_case {
    detail::ready_core core;
    F action;

    void fill(weft::detail::select_entry& e) noexcept { core.fill(e); }
    void finish(int code) {
        core.finish(code);
        action(core.ec);
    }
};

// signal_case is a select case waiting for a signal of a set (made by
// on_signal()).
template <class F>
struct signal_case {
    detail::signal_core core;
    F action;

    void fill(weft::detail::select_entry& e) noexcept { core.fill(e); }
    void finish(int code) {
        core.finish(code);
        action(core.sig);
    }
};

// on_readable() / on_writable() make a readiness case of h (IO-Q1, IO-Q2).
// Throws std::system_error: operation_not_permitted outside a task, or what
// registering the fd with the reactor reported.
template <class F = weft::detail::no_action>
ready_case<F> on_readable(handle& h, F action = {}) {
    return ready_case<F>{detail::ready_core(h, interest::readable, "weft::io::on_readable"), std::move(action)};
}
template <class F = weft::detail::no_action>
ready_case<F> on_writable(handle& h, F action = {}) {
    return ready_case<F>{detail::ready_core(h, interest::writable, "weft::io::on_writable"), std::move(action)};
}

// on_signal() makes a signal case of `set`. Throws std::system_error
// (bad_file_descriptor) if the set is empty (moved from).
template <class F = weft::detail::no_action>
signal_case<F> on_signal(signal_set& set, F action = {}) {
    return signal_case<F>{detail::signal_core(set), std::move(action)};
}

}  // namespace weft::io
