// weft/sync/select.hpp: layer L5, select over channels (weft/sync/channel.hpp),
// and, through weft/io/select.hpp (L6), over io readiness and signals.
//
//   select(...)      waits on several send and receive cases, a timeout case
//                    and a default case; one ready case is chosen uniformly
//                    at random; a waiting select is woken exactly once;
//   on_recv, on_send, on_timeout, on_deadline, on_default
//                    make its cases (on_stop, a std::stop_token's case, is
//                    in weft/sync/stop.hpp);
//   when(enabled, case)
//                    a case chosen at run time: a disabled case is left out
//                    of the select (Go's nil channel), so a select whose
//                    cases vary is written once.
//
// The protocol (docs/sync.md, "Channels"): a channel's CHAN-K1 - CHAN-K4
// (weft/sync/channel.hpp) and
//   CHAN-K5  A select holds the locks of all its channels (taken in address
//            order, as Go's sellock) while it polls its cases and while it links
//            its nodes, so no case can become ready unseen between the poll and
//            the link, and the select never meets its own nodes.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>

#include "weft/config.hpp"
#include "weft/sync/channel.hpp"
#include "weft/waiter.hpp"

namespace weft {

namespace detail {

// select_hooks is how the non-template select engine (src/sync/select.cpp)
// calls one case of a select; all three run with the case's channel locked.
struct select_hooks {
    // poll() completes the case now if it can (a value moved, or the channel
    // is closed); sets `wake` to a claimed waiter to wake after unlocking.
    bool (*poll)(void* c, waiter*& wake);
    void (*link)(void* c, wait_node* n);
    void (*unlink)(void* c, wait_node* n) noexcept;
};

// select_entry is one case handed to select_engine(): ch is the channel's
// lock (null for the timeout and default cases).
struct select_entry {
    spin_lock* ch = nullptr;
    void* c = nullptr;
    const select_hooks* hooks = nullptr;
    wait_node node;
};

// select_engine() runs a select over es[0, n) (CHAN-K5): returns the index of the
// case that completed, select_default if `has_default` and none was ready,
// or select_timed_out if `deadline` passed first; `code` receives the hand-
// over code of a case completed by another party. Throws: forced_unwind if
// the task is canceled.
// `scratch` is room for n entries of each kind (on the caller's stack).
inline constexpr int select_default = -1;
inline constexpr int select_timed_out = -2;
struct select_scratch {
    std::uint32_t* order;  // the random poll order
    spin_lock** locks;     // the distinct locks, sorted
};
WEFT_API int select_engine(select_entry* es, std::size_t n, const std::chrono::steady_clock::time_point* deadline,
                           bool has_default, int& code, select_scratch scratch);

struct no_action {
    template <class... A>
    void operator()(A&&...) const noexcept {}
};
}  // namespace detail

// recv_case is a select case receiving from a channel (made by on_recv()).
// Its action is called with the received value, or with nullopt if the
// channel is closed and drained (a closed channel is always ready, as in Go).
template <class T, class F>
struct recv_case {
    channel<T>* ch;
    F action;
    std::optional<T> slot;

    static bool poll(void* c, waiter*& wake) {
        auto* self = static_cast<recv_case*>(c);
        return self->ch->recv_now(self->slot, wake) != channel_status::empty;
    }
    static void link(void* c, wait_node* n) {
        auto* self = static_cast<recv_case*>(c);
        n->slot = &self->slot;
        self->ch->receivers_.push_back(n);
    }
    static void unlink(void* c, wait_node* n) noexcept { static_cast<recv_case*>(c)->ch->receivers_.remove(n); }
    static constexpr detail::select_hooks hooks{&poll, &link, &unlink};

    spin_lock* lock() noexcept { return &ch->mu_; }
    void finish(int /*code*/) { action(std::move(slot)); }
};

// send_case is a select case sending to a channel (made by on_send()). The
// value is moved only if this case is chosen (CHAN-K3). If it is chosen because
// the channel is closed, select() throws channel_closed.
template <class T, class F>
struct send_case {
    channel<T>* ch;
    T* src;                // the caller's object, or null: `own` holds the value
    std::optional<T> own;  // a temporary handed to on_send()
    F action;
    bool closed = false;
    T* lent = nullptr;     // held off a shared stack (WAITER-V4): the caller's object `own` came from

    T& value() noexcept { return src ? *src : *own; }
    // hold() moves the caller's object into the case (WAITER-V4: a select on a
    // shared stack); settle() gives it back unless it was sent (CHAN-K3).
    void hold() {
        if (!src) return;
        own.emplace(std::move(*src));
        lent = std::exchange(src, nullptr);
    }
    void settle(bool sent) {
        if (lent && !sent) detail::give_back(*lent, *own);
    }
    static bool poll(void* c, waiter*& wake) {
        auto* self = static_cast<send_case*>(c);
        const channel_status s = self->ch->send_now(self->value(), wake);
        self->closed = s == channel_status::closed;
        return s != channel_status::empty;
    }
    static void link(void* c, wait_node* n) {
        auto* self = static_cast<send_case*>(c);
        n->slot = &self->value();
        self->ch->senders_.push_back(n);
    }
    static void unlink(void* c, wait_node* n) noexcept { static_cast<send_case*>(c)->ch->senders_.remove(n); }
    static constexpr detail::select_hooks hooks{&poll, &link, &unlink};

    spin_lock* lock() noexcept { return &ch->mu_; }
    void finish(int code) {
        if (closed || code == detail::code_closed) throw channel_closed();
        action();
    }
};

// timeout_case is a select's timeout (made by on_timeout() / on_deadline()):
// chosen when its deadline passes before any other case is ready.
template <class F>
struct timeout_case {
    std::chrono::steady_clock::time_point deadline;
    F action;
};

// default_case is a select's default (made by on_default()): chosen at once
// when no other case is ready; the select then never waits.
template <class F>
struct default_case {
    F action;
};

// on_recv() makes a receive case: action(std::optional<T>) runs if chosen.
template <class T, class F = detail::no_action>
recv_case<T, F> on_recv(channel<T>& ch, F action = {}) {
    return recv_case<T, F>{&ch, std::move(action), std::nullopt};
}
// on_send() makes a send case of v: action() runs if chosen. An lvalue v is
// moved from only if the case is chosen; an rvalue is held by the case.
template <class T, class F = detail::no_action>
send_case<T, F> on_send(channel<T>& ch, std::type_identity_t<T>& v, F action = {}) {
    return send_case<T, F>{&ch, &v, std::nullopt, std::move(action)};
}
template <class T, class F = detail::no_action>
send_case<T, F> on_send(channel<T>& ch, std::type_identity_t<T>&& v, F action = {}) {
    return send_case<T, F>{&ch, nullptr, std::optional<T>(std::move(v)), std::move(action)};
}
// on_timeout() / on_deadline() make the timeout case.
template <class Rep, class Period, class F = detail::no_action>
timeout_case<F> on_timeout(const std::chrono::duration<Rep, Period>& d, F action = {}) {
    return timeout_case<F>{
        std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::steady_clock::duration>(d),
        std::move(action)};
}
template <class F = detail::no_action>
timeout_case<F> on_deadline(std::chrono::steady_clock::time_point when, F action = {}) {
    return timeout_case<F>{when, std::move(action)};
}
// on_default() makes the default case.
template <class F = detail::no_action>
default_case<F> on_default(F action = {}) {
    return default_case<F>{std::move(action)};
}

// when_case is a case that takes part in its select only if `enabled` (made
// by when()). A disabled case is never polled, linked or chosen, and its
// action never runs; a disabled send case never moves its value. A select
// whose cases are all disabled and that has no default would wait for
// nothing: select() throws std::invalid_argument instead.
template <class C>
struct when_case {
    C inner;
    bool enabled;
};

// when() makes a case that is in its select only if `enabled`:
//   weft::select(weft::when(queue.size() < limit, weft::on_recv(in, ...)), weft::on_recv(done, ...));
// The case is still made, so what it is made of must be valid either way:
// on_timeout() and on_deadline() below take an optional for that reason.
template <class C>
when_case<std::remove_cvref_t<C>> when(bool enabled, C&& c) {
    return when_case<std::remove_cvref_t<C>>{std::forward<C>(c), enabled};
}
// on_timeout() / on_deadline() of an optional: no timeout case when it is
// empty (when() above).
template <class Rep, class Period, class F = detail::no_action>
when_case<timeout_case<F>> on_timeout(const std::optional<std::chrono::duration<Rep, Period>>& d, F action = {}) {
    if (!d) return when(false, timeout_case<F>{std::chrono::steady_clock::time_point::max(), std::move(action)});
    return when(true, on_timeout(*d, std::move(action)));
}
template <class F = detail::no_action>
when_case<timeout_case<F>> on_deadline(const std::optional<std::chrono::steady_clock::time_point>& t,
                                       F action = {}) {
    return when(t.has_value(),
                timeout_case<F>{t.value_or(std::chrono::steady_clock::time_point::max()), std::move(action)});
}

namespace detail {
template <class C>
struct case_kind {
    static constexpr int value = 0;  // a channel case
};
template <class F>
struct case_kind<timeout_case<F>> {
    static constexpr int value = 1;
};
template <class F>
struct case_kind<default_case<F>> {
    static constexpr int value = 2;
};
template <class C>
struct case_kind<when_case<C>> : case_kind<C> {};

// unwrap() is the case inside a when_case (or the case itself).
template <class C>
C& unwrap(C& c) noexcept {
    return c;
}
template <class C>
C& unwrap(when_case<C>& c) noexcept {
    return c.inner;
}

// A case of another layer (weft/io/select.hpp) fills its entry itself:
// fill(e) sets e.ch (its lock), e.c and e.hooks, as a channel case's are set
// here, and finish(code) completes it.
template <class C>
void fill_entry(C& c, select_entry& e, const std::chrono::steady_clock::time_point*& deadline, bool& has_default);
template <class C>
void fill_entry(when_case<C>& c, select_entry& e, const std::chrono::steady_clock::time_point*& deadline,
                bool& has_default) {
    if (c.enabled) fill_entry(c.inner, e, deadline, has_default);  // else: e stays empty, as if absent
}
template <class C>
void fill_entry(C& c, select_entry& e, const std::chrono::steady_clock::time_point*& deadline, bool& has_default) {
    if constexpr (requires { c.fill(e); }) {
        c.fill(e);
    } else if constexpr (case_kind<C>::value == 0) {
        e.ch = c.lock();
        e.c = &c;
        e.hooks = &C::hooks;
    } else if constexpr (case_kind<C>::value == 1) {
        deadline = &c.deadline;
    } else {
        has_default = true;
    }
}

template <class C>
void finish_case(C& c, int result, int code);
template <class C>
void finish_case(when_case<C>& c, int result, int code) {
    finish_case(c.inner, result, code);
}
template <class C>
void finish_case(C& c, int result, int code) {
    if constexpr (case_kind<C>::value == 0) {
        (void)result;
        c.finish(code);
    } else {
        (void)code;
        c.action();
    }
}
}  // namespace detail

// select() waits until one of its cases can complete, completes it, runs
// its action and returns its index (in argument order). Cases: on_recv,
// on_send, io::on_readable, io::on_writable, io::on_signal (weft/io/select.hpp),
// at most one on_timeout / on_deadline and at most one on_default.
// When several cases are ready, one is chosen uniformly at random; when none
// is, the calling task (or thread) waits on all of them and is woken exactly
// once (CHAN-K5, WAITER-V1). Throws: channel_closed if a chosen send case's channel is
// closed; forced_unwind if the waiting task is canceled. (A select without
// cases does not compile.)
namespace detail {
template <class C>
inline constexpr bool is_send_case = false;
template <class T, class F>
inline constexpr bool is_send_case<send_case<T, F>> = true;
template <class C>
inline constexpr bool is_send_case<when_case<C>> = is_send_case<C>;

// no_case_enabled() is the error of a select with nothing to wait for: every
// case disabled (when()), no timeout and no default.
[[noreturn]] inline void no_case_enabled() {
    throw std::invalid_argument(
        "weft::select: every case is disabled (weft::when) and there is no default case: it would never end");
}

// select_over() is select() over the cases in `all` (a tuple of cases or of
// references to them) with its entries in `es`.
template <class Tuple, std::size_t N>
std::size_t select_over(Tuple& all, std::array<select_entry, N>& es) {
    constexpr std::size_t n = N;
    const std::chrono::steady_clock::time_point* deadline = nullptr;
    bool has_default = false;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        (fill_entry(std::get<I>(all), es[I], deadline, has_default), ...);
    }(std::make_index_sequence<n>{});
    // A select whose cases are all disabled, without a timeout or a default,
    // has nothing that could end it: an error, after a send case's value held
    // off a shared stack has gone back to the caller.
    bool none = deadline == nullptr && !has_default;
    for (const select_entry& e : es) none = none && e.ch == nullptr;
    if (none) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (([&] {
                 if constexpr (is_send_case<std::remove_cvref_t<std::tuple_element_t<I, Tuple>>>)
                     unwrap(std::get<I>(all)).settle(false);
             }()),
             ...);
        }(std::make_index_sequence<n>{});
        no_case_enabled();
    }
    int code = code_ok;
    std::array<std::uint32_t, n> order;
    std::array<spin_lock*, n> locks;
    int r = select_engine(es.data(), n, deadline, has_default, code, {order.data(), locks.data()});
    std::size_t chosen = 0;
    if (r >= 0) {
        chosen = static_cast<std::size_t>(r);
    } else {
        const int want = r == select_default ? 2 : 1;
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            ((case_kind<std::remove_cvref_t<std::tuple_element_t<I, Tuple>>>::value == want ? (chosen = I, 0) : 0),
             ...);
        }(std::make_index_sequence<n>{});
    }
    // A send case's value held off a shared stack goes back to the caller
    // unless it was sent (before finish(), which may throw channel_closed).
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        (([&] {
             using K = std::remove_cvref_t<std::tuple_element_t<I, Tuple>>;
             if constexpr (is_send_case<K>) {
                 auto& c = unwrap(std::get<I>(all));
                 c.settle(r >= 0 && I == chosen && !c.closed && code != code_closed);
             }
         }()),
         ...);
    }(std::make_index_sequence<n>{});
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((I == chosen ? (finish_case(std::get<I>(all), r, code), 0) : 0), ...);
    }(std::make_index_sequence<n>{});
    return chosen;
}

// held_select is a select's cases and entries in a heap block, for a select
// on a shared stack (WAITER-V4): wakers write the cases' slots and read their
// values while the caller is suspended.
template <class... C>
struct held_select {
    std::tuple<C...> cases;
    std::array<select_entry, sizeof...(C)> es{};
    template <class... A>
    explicit held_select(A&&... a) : cases(std::forward<A>(a)...) {}
};
}  // namespace detail

template <class... C>
std::size_t select(C&&... cases) {
    constexpr std::size_t n = sizeof...(C);
    static_assert(n > 0, "weft::select needs at least one case");
    static_assert((0 + ... + (detail::case_kind<std::remove_cvref_t<C>>::value == 1)) <= 1,
                  "weft::select takes at most one timeout case");
    static_assert((0 + ... + (detail::case_kind<std::remove_cvref_t<C>>::value == 2)) <= 1,
                  "weft::select takes at most one default case");
    if (detail::on_shared_stack()) [[unlikely]] {
        // WAITER-V4: the cases (moved in; a send case's lvalue is lent and given
        // back unless sent) and the entries' nodes live off the frame.
        auto held = std::make_unique<detail::held_select<std::remove_cvref_t<C>...>>(std::move(cases)...);
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (([&] {
                 if constexpr (detail::is_send_case<std::remove_cvref_t<C>>)
                     detail::unwrap(std::get<I>(held->cases)).hold();
             }()),
             ...);
        }(std::make_index_sequence<n>{});
        return detail::select_over(held->cases, held->es);
    }
    if (detail::in_arena_task()) {
        // A task whose stack may be shrunk: the cases and the entries' nodes
        // go to its wait arena, or to a heap block when they do not fit
        // (detail::stable): off the frame either way, as above.
        detail::stable<detail::held_select<std::remove_cvref_t<C>...>> held(std::move(cases)...);
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (([&] {
                 if constexpr (detail::is_send_case<std::remove_cvref_t<C>>)
                     detail::unwrap(std::get<I>(held->cases)).hold();
             }()),
             ...);
        }(std::make_index_sequence<n>{});
        return detail::select_over(held->cases, held->es);
    }
    std::array<detail::select_entry, n> es{};
    auto all = std::forward_as_tuple(cases...);
    return detail::select_over(all, es);
}

}  // namespace weft
