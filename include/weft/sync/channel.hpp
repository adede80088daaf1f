// weft/sync/channel.hpp: layer L5, channels (select is weft/sync/select.hpp).
//
//   channel<T>       a typed queue between tasks (and threads): capacity 0
//                    (rendezvous: a send waits for its receiver), N (a
//                    bounded ring) or channel<T>::unbounded; close() with
//                    drain; a range-for over it ends once closed and drained;
//   channel_status   what a try / timed operation reports;
//   channel_closed   thrown by send() (and a select's send case) on a closed
//                    channel.
//
// The protocol (docs/sync.md, "Channels"), on top of the waiter's WAITER-V1 - WAITER-V3
// (weft/waiter.hpp); CHAN-K5, a select's locking, is in weft/sync/select.hpp:
//   CHAN-K1  Everything below is guarded by the channel's lock: the buffer, the
//            queue of waiting senders, the queue of waiting receivers, `closed`.
//   CHAN-K2  Receivers wait only while the buffer is empty and no sender waits;
//            senders wait only while the buffer is full (capacity 0: always full)
//            and no receiver waits. So a sender that finds a waiting receiver
//            hands its value straight over, and a receiver that takes from a full
//            buffer refills it from the first waiting sender.
//   CHAN-K3  A value moves only after the claim of the waiter it moves to or from
//            (WAITER-V2): a sender's value stays in the sender's own object until a
//            receiver has claimed that sender, so a sender that times out, is
//            canceled or whose select chose another case still holds its value.
//   CHAN-K4  close() claims every waiter: receivers get `closed` (the buffer is
//            empty, by CHAN-K2), senders get `closed` and keep their values.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "weft/config.hpp"
#include "weft/waiter.hpp"

namespace weft {

// channel_status is the result of a try / timed channel operation.
enum class channel_status : std::uint8_t {
    ok,       // the value was sent / received
    closed,   // the channel is closed (receive: and drained)
    timeout,  // the deadline passed first
    full,     // try_send: no room and no waiting receiver
    empty,    // try_recv: no value and no waiting sender
};

// to_string() names a channel_status ("ok", "closed", ...).
[[nodiscard]] WEFT_API const char* to_string(channel_status s) noexcept;

// channel_closed is thrown by send() on a closed channel, and by select()
// when it chooses a send case whose channel is closed. The value that was
// to be sent is left with the caller.
class WEFT_API channel_closed : public std::logic_error {
public:
    channel_closed();
};

// recv_result<T> is what try_recv / recv_for / recv_until return: a status
// and, when it is ok, the value.
template <class T>
struct recv_result {
    channel_status status = channel_status::empty;
    std::optional<T> value;
    explicit operator bool() const noexcept { return status == channel_status::ok; }
};

namespace detail {

// give_back() returns a value held off a shared stack (WAITER-V4) to the caller's
// object it was moved from, when it was not delivered.
template <class T>
void give_back(T& to, T& held) {
    if constexpr (std::is_move_assignable_v<T>) {
        to = std::move(held);
    } else {
        std::destroy_at(&to);
        std::construct_at(&to, std::move(held));
    }
}

// Hand-over codes in waiter::code (a channel's and a select's).
inline constexpr int code_ok = 0;
inline constexpr int code_closed = 1;

// ring<T> is the channel's buffer: a ring of raw storage, fixed capacity, or
// doubling when `grows` (unbounded channels).
template <class T>
class ring {
public:
    ring(std::size_t cap, bool grows) : grows_(grows) {
        if (cap) reserve(cap);
    }
    ring(const ring&) = delete;
    ring& operator=(const ring&) = delete;
    ~ring() {
        while (size_) pop_front();
        if (data_) std::allocator<T>{}.deallocate(data_, cap_);
    }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] bool full() const noexcept { return size_ == cap_; }
    [[nodiscard]] T& front() noexcept { return data_[head_]; }
    void pop_front() noexcept {
        std::destroy_at(data_ + head_);
        head_ = head_ + 1 == cap_ ? 0 : head_ + 1;
        --size_;
    }
    // push_back() needs room (!full()) unless the ring grows.
    void push_back(T&& v) {
        if (size_ == cap_) reserve(cap_ ? cap_ * 2 : 16);
        std::size_t at = head_ + size_;
        if (at >= cap_) at -= cap_;
        std::construct_at(data_ + at, std::move(v));
        ++size_;
    }
    [[nodiscard]] bool grows() const noexcept { return grows_; }

private:
    void reserve(std::size_t cap) {
        T* fresh = std::allocator<T>{}.allocate(cap);
        for (std::size_t i = 0; i < size_; ++i) {
            std::size_t at = head_ + i;
            if (at >= cap_) at -= cap_;
            std::construct_at(fresh + i, std::move(data_[at]));
            std::destroy_at(data_ + at);
        }
        if (data_) std::allocator<T>{}.deallocate(data_, cap_);
        data_ = fresh;
        cap_ = cap;
        head_ = 0;
    }

    T* data_ = nullptr;
    std::size_t cap_ = 0;
    std::size_t head_ = 0;
    std::size_t size_ = 0;
    bool grows_;
};

}  // namespace detail

// The select cases (weft/sync/select.hpp) reach a channel's lock, queues
// and try operations as friends.
template <class T, class F>
struct recv_case;
template <class T, class F>
struct send_case;

// channel<T> carries values of T from senders to receivers, in order per
// sender, each value to exactly one receiver. T must be move-constructible
// (move-only types work). Every operation may be called from tasks and from
// plain threads; a waiting task is parked (its worker runs other tasks), a
// waiting thread sleeps. Cancellation of a waiting task unwinds it (forced
// unwind) and leaves the channel consistent: its value, if it was sending,
// stays with it (CHAN-K3). The channel must outlive every operation on it.
template <class T>
class channel {
    static_assert(std::is_move_constructible_v<T>, "weft::channel<T> needs a move-constructible T");

public:
    using value_type = T;
    // unbounded is the capacity of a channel whose send never waits.
    static constexpr std::size_t unbounded = ~std::size_t{0};

    // channel() makes an open channel of the given capacity: 0 rendezvous,
    // N a ring of N values, `unbounded` a growing buffer.
    explicit channel(std::size_t capacity = 0)
        : buf_(capacity == unbounded ? 0 : capacity, capacity == unbounded), cap_(capacity) {}
    channel(const channel&) = delete;
    channel& operator=(const channel&) = delete;

    // send() delivers v (to a waiting receiver, or into the buffer), waiting
    // while there is no room. v is moved from only when it was delivered.
    // Throws: channel_closed if the channel is (or becomes, while waiting)
    // closed; forced_unwind if the waiting task is canceled.
    void send(T&& v) {
        if (send_wait(v, nullptr) == channel_status::closed) throw channel_closed();
    }
    void send(const T& v) {
        T copy(v);
        send(std::move(copy));
    }
    // try_send() delivers v only if that needs no wait: ok, full or closed
    // (v is moved from only on ok).
    channel_status try_send(T&& v) {
        waiter* wake = nullptr;
        std::unique_lock g(mu_);
        const channel_status s = send_now(v, wake);
        g.unlock();
        if (wake) wake->wake();
        return s == channel_status::empty ? channel_status::full : s;
    }
    // send_for() / send_until() are send() with a deadline: ok, timeout or
    // closed (v is moved from only on ok). Throws: forced_unwind if canceled.
    template <class Rep, class Period>
    channel_status send_for(T&& v, const std::chrono::duration<Rep, Period>& d) {
        return send_until(std::move(v), std::chrono::steady_clock::now() +
                                            std::chrono::ceil<std::chrono::steady_clock::duration>(d));
    }
    channel_status send_until(T&& v, std::chrono::steady_clock::time_point deadline) {
        return send_wait(v, &deadline);
    }

    // recv() takes the next value, waiting while there is none; nullopt once
    // the channel is closed and drained. Throws: forced_unwind if canceled.
    std::optional<T> recv() {
        recv_result<T> r = recv_wait(nullptr);
        return std::move(r.value);
    }
    // try_recv() takes a value only if that needs no wait: ok, empty or
    // closed (closed and drained).
    recv_result<T> try_recv() {
        recv_result<T> r;
        waiter* wake = nullptr;
        std::unique_lock g(mu_);
        r.status = recv_now(r.value, wake);
        g.unlock();
        if (wake) wake->wake();
        return r;
    }
    // recv_for() / recv_until() are recv() with a deadline: ok (with the
    // value), timeout or closed. Throws: forced_unwind if canceled.
    template <class Rep, class Period>
    recv_result<T> recv_for(const std::chrono::duration<Rep, Period>& d) {
        return recv_until(std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::steady_clock::duration>(d));
    }
    recv_result<T> recv_until(std::chrono::steady_clock::time_point deadline) { return recv_wait(&deadline); }

    // close() closes the channel (CHAN-K4): waiting and later receivers drain the
    // buffer, then get nullopt / closed; waiting and later senders fail with
    // closed (send() throws channel_closed). Closing a closed channel does
    // nothing. Returns true if this call closed it.
    bool close() noexcept {
        wait_node* list = nullptr;
        {
            std::lock_guard g(mu_);
            if (closed_) return false;
            closed_ = true;
            // Chain the claimed waiters' nodes through `next` (they are
            // unlinked, and their owners wait for wake()) and wake them
            // after unlocking.
            for (wait_queue* q : {&receivers_, &senders_})
                while (wait_node* n = q->pop_claimed()) {
                    n->w->fired = n->index;
                    n->w->code = detail::code_closed;
                    n->next = list;
                    list = n;
                }
        }
        while (list) {
            wait_node* n = list;
            list = n->next;  // read before wake(): the node ends with its owner's wait
            n->w->wake();
        }
        return true;
    }

    // is_closed() says whether close() has been called.
    [[nodiscard]] bool is_closed() const noexcept {
        std::lock_guard g(mu_);
        return closed_;
    }
    // size() is the number of buffered values (a snapshot).
    [[nodiscard]] std::size_t size() const noexcept {
        std::lock_guard g(mu_);
        return buf_.size();
    }
    // capacity() is the capacity given at construction.
    [[nodiscard]] std::size_t capacity() const noexcept { return cap_; }

    // iterator makes `for (T& v : ch)` receive until closed and drained.
    class iterator {
    public:
        using iterator_category = std::input_iterator_tag;
        using value_type = T;
        using difference_type = std::ptrdiff_t;
        using pointer = T*;
        using reference = T&;
        iterator() = default;
        explicit iterator(channel* ch) : ch_(ch) { ++*this; }
        T& operator*() noexcept { return *cur_; }
        T* operator->() noexcept { return &*cur_; }
        iterator& operator++() {
            cur_ = ch_->recv();
            if (!cur_) ch_ = nullptr;
            return *this;
        }
        void operator++(int) { ++*this; }
        friend bool operator==(const iterator& a, std::default_sentinel_t) noexcept { return a.ch_ == nullptr; }

    private:
        channel* ch_ = nullptr;
        std::optional<T> cur_;
    };
    iterator begin() { return iterator(this); }
    std::default_sentinel_t end() noexcept { return {}; }

private:
    template <class U, class F>
    friend struct recv_case;
    template <class U, class F>
    friend struct send_case;

    // hand_to() delivers v to the claimed receiver node n.
    static void hand_to(wait_node* n, T&& v) {
        static_cast<std::optional<T>*>(n->slot)->emplace(std::move(v));
        n->w->fired = n->index;
        n->w->code = detail::code_ok;
    }
    // take_from() moves the value of the claimed sender node n out.
    static T&& take_from(wait_node* n) noexcept {
        n->w->fired = n->index;
        n->w->code = detail::code_ok;
        return std::move(*static_cast<T*>(n->slot));
    }

    // send_now() (lock held) delivers v if no wait is needed: ok, closed, or
    // empty meaning "would wait". `wake` gets the receiver to wake.
    channel_status send_now(T& v, waiter*& wake) {
        if (closed_) return channel_status::closed;
        if (wait_node* r = receivers_.pop_claimed()) {  // CHAN-K2: the buffer is empty
            hand_to(r, std::move(v));
            wake = r->w;
            return channel_status::ok;
        }
        if (buf_.grows() || buf_.size() < cap_) {
            buf_.push_back(std::move(v));
            return channel_status::ok;
        }
        return channel_status::empty;
    }
    // recv_now() (lock held) takes a value if no wait is needed: ok (into
    // out), closed, or empty meaning "would wait". `wake` gets the sender to
    // wake.
    channel_status recv_now(std::optional<T>& out, waiter*& wake) {
        if (buf_.size()) {
            out.emplace(std::move(buf_.front()));
            buf_.pop_front();
            if (wait_node* s = senders_.pop_claimed()) {  // CHAN-K2: refill
                buf_.push_back(take_from(s));
                wake = s->w;
            }
            return channel_status::ok;
        }
        if (wait_node* s = senders_.pop_claimed()) {
            out.emplace(take_from(s));
            wake = s->w;
            return channel_status::ok;
        }
        return closed_ ? channel_status::closed : channel_status::empty;
    }

    channel_status send_wait(T& v, const std::chrono::steady_clock::time_point* deadline) {
        waiter* wake = nullptr;
        std::unique_lock g(mu_);
        channel_status s = send_now(v, wake);
        if (s != channel_status::empty) {
            g.unlock();
            if (wake) wake->wake();
            return s;
        }
        // WAITER-V4: on a shared stack the receiver cannot reach v in this frame
        // while we are suspended: it takes the value from `held`, and a
        // value not taken goes back to v (CHAN-K3: nothing handed over is lost).
        struct sending : one_wait {
            std::optional<T> held;
        };
        detail::stable<sending> st;
        waiter& w = st->w;
        wait_node& n = st->n;
        n.slot = &v;
        if (st.off_frame()) {
            st->held.emplace(std::move(v));
            n.slot = &*st->held;
        }
        w.arm();
        senders_.push_back(&n);
        g.unlock();
        const waiter::outcome o = w.wait(deadline);
        const bool taken = o == waiter::outcome::notified && w.code == detail::code_ok;
        if (!taken && st->held) detail::give_back(v, *st->held);
        if (o == waiter::outcome::notified) return taken ? channel_status::ok : channel_status::closed;
        g.lock();
        senders_.remove(&n);  // WAITER-V3; v was not taken (CHAN-K3)
        g.unlock();
        if (o == waiter::outcome::canceled) throw_canceled();
        return channel_status::timeout;
    }

    recv_result<T> recv_wait(const std::chrono::steady_clock::time_point* deadline) {
        recv_result<T> r;
        waiter* wake = nullptr;
        std::unique_lock g(mu_);
        r.status = recv_now(r.value, wake);
        if (r.status != channel_status::empty) {
            g.unlock();
            if (wake) wake->wake();
            return r;
        }
        // WAITER-V4: the sender writes into `got`, off a shared stack.
        struct receiving : one_wait {
            std::optional<T> got;
        };
        detail::stable<receiving> st;
        waiter& w = st->w;
        wait_node& n = st->n;
        n.slot = st.off_frame() ? &st->got : &r.value;
        w.arm();
        receivers_.push_back(&n);
        g.unlock();
        const waiter::outcome o = w.wait(deadline);
        if (o == waiter::outcome::notified) {
            r.status = w.code == detail::code_ok ? channel_status::ok : channel_status::closed;
            if (st.off_frame() && st->got) r.value.emplace(std::move(*st->got));
            return r;
        }
        g.lock();
        receivers_.remove(&n);
        g.unlock();
        if (o == waiter::outcome::canceled) throw_canceled();
        r.status = channel_status::timeout;
        return r;
    }

    mutable spin_lock mu_;
    detail::ring<T> buf_;
    std::size_t cap_;
    wait_queue senders_;    // nodes' slot: the sender's T
    wait_queue receivers_;  // nodes' slot: the receiver's std::optional<T>
    bool closed_ = false;
};

}  // namespace weft
