// handle.cpp: weft/io/handle.hpp. A handle registers its fd with the
// reactor of the runtime of the first task that waits on it, and retires
// the registration (reactor.hpp, REACTOR-R5) before the fd is closed or released,
// so that no event for a later fd with the same number reaches its waiters.

#include "weft/io/handle.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "reactor.hpp"
#include "weft/io/select.hpp"
#include "weft/task.hpp"

namespace weft::io {

namespace {

using detail::errno_code;

// thread_wait() is a plain thread's wait: poll(2), EINTR retried, the
// deadline rounded up to a millisecond.
std::error_code thread_wait(int fd, interest what, clock::time_point deadline) {
    pollfd p{fd, static_cast<short>(what == interest::readable ? POLLIN : POLLOUT), 0};
    for (;;) {
        int ms = -1;
        if (deadline != no_deadline) {
            const auto left = deadline - clock::now();
            if (left <= clock::duration::zero()) return detail::deadline_passed();
            const auto m = std::chrono::ceil<std::chrono::milliseconds>(left).count();
            ms = m > INT32_MAX ? INT32_MAX : static_cast<int>(m);
        }
        const int n = ::poll(&p, 1, ms);
        if (n > 0) return {};
        if (n < 0 && errno != EINTR) return errno_code();
    }
}

// ---- the readiness cache (IO-Q3) ----------------------------------------------
//
//   IO-Q3  A read (d = 0) or write (d = 1) that finds the fd empty (full)
//          records it in the registration: empty_at[d] = 1 + the count of
//          events of direction d that dispatch() had taken (events[d]) when
//          the attempt began. While that count has not moved, every byte in
//          the fd arrived after the attempt, and its arrival is an event
//          the reactor has yet to dispatch, or the backend's watch is not
//          armed yet (arming reports the fd's state as it is, REACTOR-R6).
//          So a readiness case made then is not ready by level: it skips
//          IO-Q1's poll(2), and its ready_poll(), under the registration's
//          lock, takes any event counted since as readiness. Empty (full)
//          means EAGAIN, or, for a stream socket (kind_ 3), a short read
//          (write): recv(2) of a stream copies all there is up to the
//          length asked for (a datagram socket's next message, a tty's next
//          line are still there: only EAGAIN counts for them). Any other
//          outcome (a count that filled the buffer, the end of the stream,
//          an error) records 0, unknown. A registration given to a new fd
//          moves the count on (reactor.cpp), so that a late record of a
//          read of the closed fd it watched before is not valid for the new one.
std::uint32_t level_tick(detail::registration* r, int d) noexcept {
    return r ? r->events[d].load(std::memory_order_acquire) : 0;
}
void note_level(detail::registration* r, int d, std::uint32_t tick, ssize_t got, int err, std::size_t len,
                bool stream) noexcept {
    if (!r) return;
    const bool empty =
        got < 0 ? (err == EAGAIN || err == EWOULDBLOCK) : (stream && got > 0 && static_cast<std::size_t>(got) < len);
    const std::uint32_t v = empty ? tick + 1 : 0;
    if (r->empty_at[d].load(std::memory_order_relaxed) != v) r->empty_at[d].store(v, std::memory_order_release);
}
// noted() makes one attempt (a system call's result, errno set when it is
// below 0) and records what it found (IO-Q3); errno is left as it was.
template <class Attempt>
ssize_t noted(detail::registration* r, int d, std::size_t len, bool stream, Attempt&& attempt) noexcept {
    const std::uint32_t tick = level_tick(r, d);
    const ssize_t got = attempt();
    note_level(r, d, tick, got, errno, len, stream);
    return got;
}

}  // namespace

// IO-H1: the fd is closed exactly once, and only when no operation is inside
// it. Every operation enters (state_ += one_op) unless the handle is
// closing, and leaves; close() sets `closing`, wakes the waiters (retires
// the registration) and closes the fd itself only if no operation is in
// flight; otherwise the last operation to leave closes it. So a task that
// read fd_ can never make a syscall on a number that close() has freed and
// somebody else reused. A first wait registers under reg_mu_, then looks at
// `closing` again (seq_cst, against close()'s store of `closing` and its
// exchange of reg_): either close() retires the new registration or the
// waiter sees `closing` and does not wait. The fd is closed only after
// detach() has retired the registration, and retire() returns only once no
// watch of the backend holds the fd's file (backend::remove(), URING-U8,
// URING-O7): so when close(), ~handle() or the last operation out closes the
// fd, the file is closed then and there on every backend (a pipe's writer
// gets EPIPE, a socket's peer the end of the stream), unless something else
// holds it (a dup, a fork); after release() the caller's close(2) does the
// same. A ring operation of the handle's (IO-R2) holds the file too, but it
// holds an operation on the handle as well, so the fd is not closed before
// its completion has arrived (IO-F1).

handle::handle(int fd) {
    if (fd < 0) throw std::system_error(std::make_error_code(std::errc::bad_file_descriptor), "weft::io::handle");
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0 || (!(fl & O_NONBLOCK) && ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0))
        throw std::system_error(errno_code(), "weft::io::handle: fcntl");
    fd_.store(fd, std::memory_order_relaxed);
    state_.store(0, std::memory_order_relaxed);
}

handle::handle(handle&& o) noexcept
    : fd_(o.fd_.exchange(-1, std::memory_order_relaxed)),
      state_(o.state_.exchange(closing, std::memory_order_relaxed)),
      kind_(o.kind_.load(std::memory_order_relaxed)),
      reg_(o.reg_.exchange(nullptr, std::memory_order_relaxed)),
      seq_(o.seq_) {}

handle& handle::operator=(handle&& o) noexcept {
    if (this != &o) {
        (void)close();
        fd_.store(o.fd_.exchange(-1, std::memory_order_relaxed), std::memory_order_relaxed);
        state_.store(o.state_.exchange(closing, std::memory_order_relaxed), std::memory_order_relaxed);
        kind_.store(o.kind_.load(std::memory_order_relaxed), std::memory_order_relaxed);
        reg_.store(o.reg_.exchange(nullptr, std::memory_order_relaxed), std::memory_order_relaxed);
        seq_ = o.seq_;
    }
    return *this;
}

handle::~handle() { (void)close(); }

bool handle::enter() noexcept {
    std::uint32_t s = state_.load(std::memory_order_relaxed);
    do {
        if (s & closing) return false;
    } while (!state_.compare_exchange_weak(s, s + one_op, std::memory_order_seq_cst));
    return true;
}

void handle::leave() noexcept {
    const std::uint32_t s = state_.fetch_sub(one_op, std::memory_order_seq_cst) - one_op;
    if ((s & closing) && s / one_op == 0) (void)final_close();  // the last one out (IO-H1)
}

handle::op::op(handle& h) noexcept : h_(h), in_(h.enter()) {}

handle::op::~op() {
    if (in_) h_.leave();
}

void handle::detach() noexcept {
    if (detail::registration* r = reg_.exchange(nullptr, std::memory_order_seq_cst)) r->owner->retire(r);
}

std::error_code handle::final_close() noexcept {
    detach();
    const int fd = fd_.exchange(-1, std::memory_order_relaxed);
    if (fd < 0 || (state_.load(std::memory_order_relaxed) & released)) return {};
    // EINTR: on Linux the fd is closed anyway; retrying could close another.
    if (::close(fd) != 0 && errno != EINTR) return errno_code();
    return {};
}

// begin_close() sets `closing` (and `extra`) and enters as an operation in
// the same step, so that the retire below finishes before any operation
// leaving meanwhile can close the fd (IO-H1). False if already closing.
bool handle::begin_close(std::uint32_t extra) noexcept {
    std::uint32_t s = state_.load(std::memory_order_relaxed);
    do {
        if (s & closing) return false;
    } while (!state_.compare_exchange_weak(s, (s + one_op) | closing | extra, std::memory_order_seq_cst));
    detach();  // wakes the waiters (REACTOR-R5)
    return true;
}

std::error_code handle::close() noexcept {
    if (!begin_close(0)) return std::make_error_code(std::errc::bad_file_descriptor);
    const std::uint32_t s = state_.fetch_sub(one_op, std::memory_order_seq_cst) - one_op;
    if (s / one_op != 0) return {};  // the last operation closes the fd
    return final_close();
}

int handle::release() noexcept {
    if (!begin_close(released)) return -1;
    const int fd = fd_.load(std::memory_order_relaxed);
    const std::uint32_t s = state_.fetch_sub(one_op, std::memory_order_seq_cst) - one_op;
    if (s / one_op == 0) (void)final_close();  // `released`: clears fd_, closes nothing
    return fd;
}

std::error_code handle::wait(interest what, clock::time_point deadline) {
    op g(*this);
    if (!g) return std::make_error_code(std::errc::bad_file_descriptor);
    return wait_in(what, deadline);
}

std::error_code handle::wait_in(interest what, clock::time_point deadline) {
    weft::detail::task_record* t = weft::detail::current_task();
    if (!t) return thread_wait(raw(), what, deadline);
    detail::registration* r = nullptr;
    if (auto ec = registration_in(weft::detail::current_core("weft::io::handle::wait()"), r)) return ec;
    return detail::wait(r, seq_, what == interest::readable ? 0 : 1, deadline);
}

std::error_code handle::registration_in(weft::detail::runtime_core* core, detail::registration*& r) {
    r = reg_.load(std::memory_order_acquire);
    if (!r) {
        {
            std::lock_guard g(reg_mu_);
            r = reg_.load(std::memory_order_acquire);
            if (!r) {
                // A handle that is closing gets no new registration: close()'s
                // detach() may still be retiring the last one, whose fd epoll
                // still watches (EEXIST), and nobody would retire this one
                // before the fd is closed. detach() empties reg_ only after
                // `closing` is set, so a reader that finds reg_ emptied by
                // it sees `closing` here (IO-H1).
                if (state_.load(std::memory_order_seq_cst) & closing)
                    return std::make_error_code(std::errc::operation_canceled);
                r = detail::reactor_of(core)->acquire(raw(), seq_);
                reg_.store(r, std::memory_order_seq_cst);
            }
        }
        if (state_.load(std::memory_order_seq_cst) & closing)
            return std::make_error_code(std::errc::operation_canceled);
    }
    if (r->owner->core() != core) {
        // The registration's reactor belongs to another runtime, whose
        // workers may not be polling.
        return detail::foreign_runtime();  // IO-E1
    }
    return {};
}

// IO-R2  On a runtime whose reactor is the owner ring (one worker, io_uring,
//        src/io/uring.cpp URING-O1) or the worker rings (URING-W1: the ring of
//        the worker the task runs on, URING-W2), a task with a stack of its own
//        reads a socket (or a handle not yet known not to be one) through the
//        ring, waiting with detail::run_op() (IO-F1 and REACTOR-R7), and never
//        lets the kernel write its frames while it waits: its stack is not
//        pinned (SHRINK-A2), so a task idle in a read can be shrunk like any
//        parked task. A read of up to 16 KiB (a provided buffer's size) is
//        one IORING_OP_RECV into a buffer of the ring's own (IOSQE_BUFFER_
//        SELECT, URING-P1), whose bytes the task copies into the caller's
//        buffer when it runs again and then gives the buffer back; a larger
//        read (a datagram must not be cut at 16 KiB), and any read without
//        provided buffers (turned off, or refused by the kernel), is a
//        one-shot IORING_OP_POLL_ADD for POLLIN and recv(2) once that
//        completes. No recv(2) that finds nothing, no readiness event, and
//        the submission rides on the worker's next poll. (A receive that
//        filled its buffer, or that the kernel says left more behind, makes
//        the next one try recv(2) first, as a readiness loop reads on while
//        data lasts. A receive that finds the provided buffers all taken,
//        -ENOBUFS, reads with recv(2) and, if that finds nothing, waits by
//        the one-shot poll.)
//        It writes with send(2) first (a reply usually fits the socket's
//        buffer) and, on EAGAIN, with IORING_OP_SEND from the caller's buffer,
//        which waits for room in the kernel: the stack stays pinned for that
//        wait. Neither direction arms the registration's multishot poll, which
//        would post a completion for every segment that arrives as well.
//        Results are read_some()'s and write_some()'s: a count (a read's 0: the
//        end of the stream), timed_out when the deadline passed first (an op
//        that completed anyway gives its count), operation_canceled when the
//        handle is closed meanwhile, the errno otherwise. ENOTSOCK marks the
//        handle not a socket and EAGAIN (a kernel that hands the wait back)
//        goes on by readiness (IO-R1), or gives operation_canceled if the
//        handle was closed meanwhile. A task canceled while its receive or
//        send was out gets the count, if any (those bytes left or entered the
//        socket), and unwinds at its next wait (run_op()); one canceled in the
//        poll unwinds at once, its data left in the socket.
//        A read into a read_target (lazy) never uses the provided buffers:
//        it waits by the one-shot poll with no buffer held, and receives with
//        recv(2) into the buffer the target hands out then.
bool handle::ring_io(bool send, std::span<std::byte> buf, std::error_code& ec, clock::time_point deadline,
                     std::size_t& n, read_target* lazy) {
    weft::detail::runtime_core* core =
        weft::detail::current_core(send ? "weft::io::handle::write_some()" : "weft::io::handle::read_some()");
    detail::backend& b = detail::reactor_of(core)->get_backend();
    if (!b.supports_recv()) return false;
    op g(*this);
    n = 0;
    if (!g) {
        ec = std::make_error_code(std::errc::bad_file_descriptor);
        return true;
    }
    if (send) {
        for (;;) {
            const ssize_t r = noted(reg_.load(std::memory_order_acquire), 1, buf.size(), stream_socket(),
                                    [&] { return ::send(raw(), buf.data(), buf.size(), MSG_NOSIGNAL); });
            if (r >= 0) {
                n = static_cast<std::size_t>(r);
                return true;
            }
            if (errno == EINTR) continue;
            if (errno == ENOTSOCK) {
                kind_.store(2, std::memory_order_relaxed);
                return false;  // write(2) by readiness
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                ec = errno_code();
                return true;
            }
            break;  // full: the ring's send waits for room
        }
    }
    detail::registration* r = nullptr;
    if (registration_in(core, r)) return false;  // readiness gives the error, after its attempt (IO-R1)
    // failed() is the outcome of an op's error: true with ec set, or false
    // to go on by readiness.
    auto failed = [&](int res) {
        if (res == -ENOTSOCK || res == -EAGAIN) {
            if (res == -ENOTSOCK) kind_.store(2, std::memory_order_relaxed);
            // On by readiness (IO-R1), unless the handle was closed while the
            // op was out: that is REACTOR-R5's outcome.
            std::lock_guard l(r->mu);
            if (!r->closed && r->seq == seq_) return false;
            ec = std::make_error_code(std::errc::operation_canceled);
            return true;
        }
        switch (res) {
        case -ECANCELED: ec = std::make_error_code(std::errc::operation_canceled); break;
        default: ec = detail::op_error(res, deadline); break;  // IO-E1
        }
        return true;
    };
    if (send) {
        weft::detail::stack_pin pin;  // SHRINK-A2: the kernel reads the caller's buffer
        weft::detail::stable<detail::ring_op> o;
        const auto len = static_cast<std::uint32_t>(std::min<std::size_t>(buf.size(), std::size_t{1} << 30));
        for (;;) {
            o->prepare(detail::op_state::send, raw(), buf.data(), len, 0);
            const int res = detail::run_op(b, *o, deadline, r, seq_);
            note_level(r, 1, 0, 0, 0, 1, false);  // IO-Q3: room came and went; unknown
            if (res >= 0) {
                n = static_cast<std::size_t>(res);
                return true;
            }
            if (res != -EINTR) return failed(res);
        }
    }
    // The read. try_recv: recv(2) first (the last receive filled its buffer,
    // a poll said readable, or the provided buffers ran out). A buffer
    // larger than a provided one waits by the poll and reads with recv(2):
    // a datagram socket's message must not be cut at the provided buffer's
    // size.
    bool try_recv = r->full_read.load(std::memory_order_relaxed);
    std::uint32_t select_max = b.recv_select_max();  // 0: by the one-shot poll
    if (lazy || buf.size() > select_max) select_max = 0;
    std::optional<weft::detail::stable<detail::ring_op>> o;
    for (;;) {
        if (try_recv) {
            if (lazy) {
                buf = lazy->get();
                if (buf.empty()) {
                    ec = std::make_error_code(std::errc::not_enough_memory);
                    return true;
                }
            }
            const ssize_t got =
                noted(r, 0, buf.size(), stream_socket(), [&] { return ::recv(raw(), buf.data(), buf.size(), 0); });
            if (got >= 0) {
                n = static_cast<std::size_t>(got);
                r->full_read.store(n == buf.size(), std::memory_order_relaxed);
                return true;
            }
            if (errno == EINTR) continue;
            if (errno == ENOTSOCK) {
                kind_.store(2, std::memory_order_relaxed);
                return false;  // read(2) by readiness
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                ec = errno_code();
                return true;
            }
            r->full_read.store(false, std::memory_order_relaxed);
            try_recv = false;
        }
        if (lazy) lazy->idle();  // no buffer held while it waits
        if (!o) o.emplace();  // WAITER-V4: off the frame when the task may be shrunk
        detail::ring_op& op = **o;
        int res;
        if (select_max != 0) {
            const auto len = static_cast<std::uint32_t>(buf.size());
            op.prepare(detail::op_state::recv_select, raw(), nullptr, len, 0);
            const std::uint32_t tick = level_tick(r, 0);
            res = detail::run_op(b, op, deadline, r, seq_);
            // IO-Q3: a stream's short receive with no "more" flag emptied it.
            note_level(r, 0, tick, res > 0 && (op.op.cflags & detail::cqe_f_sock_nonempty) ? len : res, 0, len,
                       res > 0 && stream_socket());
            if (res > 0) {
                // URING-P1: the kernel filled one of the ring's buffers;
                // copy it out, then give it back (once).
                if (!(op.op.cflags & detail::cqe_f_buffer)) {
                    ec = std::make_error_code(std::errc::io_error);  // never seen: no buffer named
                    return true;
                }
                std::memcpy(buf.data(), b.selected(op.op), static_cast<std::size_t>(res));
                b.give_back(op.op);
                n = static_cast<std::size_t>(res);
                r->full_read.store(n == len || (op.op.cflags & detail::cqe_f_sock_nonempty) != 0,
                                   std::memory_order_relaxed);
                return true;
            }
            if (res == 0) {  // the end of the stream (its buffer, if any, went back: URING-P1)
                r->full_read.store(false, std::memory_order_relaxed);
                return true;
            }
            if (res == -ENOBUFS) {
                // Every buffer is taken: read what came directly, and wait
                // by the poll for the rest of this call.
                select_max = 0;
                try_recv = true;
                continue;
            }
        } else {
            op.prepare(detail::op_state::poll_in, raw(), nullptr, 0, 0);
            res = detail::run_op(b, op, deadline, r, seq_);
            if (res >= 0) {  // readable, hung up or failed: recv(2) says which
                try_recv = true;
                continue;
            }
        }
        if (res != -EINTR) return failed(res);
    }
}

// ring_eligible() is IO-R2's condition on the call: a non-empty buffer, a
// handle that may be a socket, inside a task with a stack of its own.
bool handle::ring_eligible(std::size_t len) const noexcept {
    return len != 0 && kind_.load(std::memory_order_relaxed) != 2 && weft::detail::current_task() &&
           !weft::detail::on_shared_stack();
}

std::size_t handle::read_some(std::span<std::byte> buf, std::error_code& ec, clock::time_point deadline) {
    if (ring_eligible(buf.size())) {
        ec.clear();
        std::size_t n = 0;
        if (ring_io(false, buf, ec, deadline, n)) return n;  // IO-R2
    }
    const ssize_t n =
        retry_io(interest::readable, deadline, ec, [this, buf](int fd) { return receive(fd, buf); });
    return n < 0 ? 0 : static_cast<std::size_t>(n);
}

// receive() is one non-blocking read of fd into buf. A socket is read with
// recv(2), not read(2): the same bytes, and a shorter path through the
// kernel (read(2) goes through the VFS layer and its access notification
// first; about 40 ns per call here, which is what SC6 of the scale report
// measures against Tokio's recvfrom). The first ENOTSOCK (a pipe, a tty, a
// file) switches the handle to read(2), as write_some() does with send().
// What it found goes into the readiness cache (IO-Q3).
ssize_t handle::receive(int fd, std::span<std::byte> buf) noexcept {
    return noted(reg_.load(std::memory_order_acquire), 0, buf.size(), stream_socket(), [&]() -> ssize_t {
        if (kind_.load(std::memory_order_relaxed) != 2) {
            const ssize_t r = ::recv(fd, buf.data(), buf.size(), 0);
            if (r >= 0 || errno != ENOTSOCK) return r;
            kind_.store(2, std::memory_order_relaxed);  // not a socket: read(2) from now on
        }
        return ::read(fd, buf.data(), buf.size());
    });
}

std::size_t handle::read_some(read_target& target, std::error_code& ec, clock::time_point deadline) {
    if (ring_eligible(1)) {
        ec.clear();
        std::size_t n = 0;
        if (ring_io(false, {}, ec, deadline, n, &target)) return n;  // IO-R2
    }
    // As read_some(span) above; the buffer is the target's, asked for before
    // each attempt and given up after one that found nothing (read_target).
    const ssize_t n = retry_io(interest::readable, deadline, ec, [this, &target](int fd) -> ssize_t {
        const std::span<std::byte> buf = target.get();
        if (buf.empty()) {
            errno = ENOMEM;
            return -1;
        }
        const ssize_t r = receive(fd, buf);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            const int e = errno;
            target.idle();
            errno = e;
        }
        return r;
    });
    return n < 0 ? 0 : static_cast<std::size_t>(n);
}

std::size_t handle::write_some(std::span<const std::byte> buf, std::error_code& ec, clock::time_point deadline) {
    if (ring_eligible(buf.size())) {
        ec.clear();
        std::size_t n = 0;
        // IO-R2: the kernel only reads the buffer (IORING_OP_SEND).
        if (ring_io(true, std::span<std::byte>(const_cast<std::byte*>(buf.data()), buf.size()), ec, deadline, n))
            return n;
    }
    const ssize_t n = retry_io(interest::writable, deadline, ec, [this, buf](int fd) {
        return noted(reg_.load(std::memory_order_acquire), 1, buf.size(), stream_socket(), [&]() -> ssize_t {
            if (kind_.load(std::memory_order_relaxed) != 2) {
                const ssize_t r = ::send(fd, buf.data(), buf.size(), MSG_NOSIGNAL);
                if (r >= 0 || errno != ENOTSOCK) return r;
                kind_.store(2, std::memory_order_relaxed);  // not a socket: write(2) from now on
            }
            return ::write(fd, buf.data(), buf.size());
        });
    });
    return n < 0 ? 0 : static_cast<std::size_t>(n);
}

std::size_t handle::read_some(std::span<std::byte> buf, clock::time_point deadline) {
    return detail::or_throw("weft::io::handle::read_some",
                            [&](std::error_code& ec) { return read_some(buf, ec, deadline); });
}

std::size_t handle::write_some(std::span<const std::byte> buf, clock::time_point deadline) {
    return detail::or_throw("weft::io::handle::write_some",
                            [&](std::error_code& ec) { return write_some(buf, ec, deadline); });
}

// The readiness case of select (weft/io/select.hpp, IO-Q1, IO-Q2). Its hooks
// run under the registration's lock (CHAN-K5), as detail::wait() does its
// checks; dispatch() and retire() claim its node like any waiter's.
namespace detail {
namespace {
bool ready_poll(void* c, weft::waiter*& /*wake*/) {
    auto* k = static_cast<ready_core*>(c);
    if (k->ec) return true;
    registration* r = k->r;
    if (r->closed || r->seq != k->seq) {  // REACTOR-R5
        k->ec = std::make_error_code(std::errc::operation_canceled);
        return true;
    }
    if (r->always_ready) return true;
    if (r->ready[k->dir]) {  // REACTOR-R3: the kept edge is consumed
        r->ready[k->dir] = false;
        return true;
    }
    if (k->level) return true;  // IO-Q1
    if (k->cached && r->events[k->dir].load(std::memory_order_relaxed) != k->tick) return true;  // IO-Q3: an event since
    // REACTOR-R6: armed here, under r->mu like the push in ready_link(), so
    // that an fd the backend refuses ends the select with its error.
    if (const std::error_code ec = r->owner->arm_locked(r)) {
        k->ec = ec;
        return true;
    }
    return false;
}
void ready_link(void* c, weft::wait_node* n) {
    auto* k = static_cast<ready_core*>(c);
    k->r->q[k->dir].push_back(n);
    weft::detail::note_io_wait();
}
void ready_unlink(void* c, weft::wait_node* n) noexcept {
    auto* k = static_cast<ready_core*>(c);
    if (k->r) k->r->q[k->dir].remove(n);
}
constexpr weft::detail::select_hooks ready_hooks{&ready_poll, &ready_link, &ready_unlink};
thread_local std::uint64_t level_polls = 0;  // readiness_polls()
}  // namespace

ready_core::ready_core(handle& hh, interest what, const char* who)
    : h(&hh), dir(what == interest::readable ? 0 : 1) {
    if (!weft::detail::current_task())
        throw std::system_error(std::make_error_code(std::errc::operation_not_permitted),
                                std::string(who) + ": a readiness case needs a task (a plain thread has no reactor)");
    if (!(in_op = h->enter())) {  // IO-Q2
        ec = std::make_error_code(std::errc::bad_file_descriptor);
        return;
    }
    try {
        ec = h->registration_in(weft::detail::current_core(who), r);
    } catch (...) {
        h->leave();
        throw;
    }
    if (ec) {
        r = nullptr;
        return;
    }
    seq = h->seq_;
    // IO-Q3: a read (write) found the fd empty (full) and no event came
    // since: not ready by level, no poll(2); ready_poll() looks at the
    // count again under the lock.
    const std::uint32_t at = r->empty_at[dir].load(std::memory_order_acquire);
    tick = r->events[dir].load(std::memory_order_acquire);
    if (at != 0 && at == tick + 1) {
        cached = true;
        return;
    }
    pollfd p{h->raw(), static_cast<short>(dir == 0 ? POLLIN : POLLOUT), 0};
    ++level_polls;
    level = ::poll(&p, 1, 0) > 0;  // IO-Q1 (POLLERR and POLLHUP count: the read or write reports them)
}

std::uint64_t readiness_polls() noexcept { return level_polls; }

ready_core::ready_core(ready_core&& o) noexcept
    : h(o.h),
      r(o.r),
      seq(o.seq),
      tick(o.tick),
      dir(o.dir),
      in_op(std::exchange(o.in_op, false)),
      level(o.level),
      cached(o.cached),
      ec(o.ec) {}

ready_core::~ready_core() {
    if (in_op) h->leave();  // IO-Q2
}

void ready_core::fill(weft::detail::select_entry& e) noexcept {
    e.ch = r ? &r->mu : &own;
    e.c = this;
    e.hooks = &ready_hooks;
}

void ready_core::finish(int code) noexcept {
    if (!ec && code) ec = std::error_code(code, std::system_category());  // ECANCELED from retire()
}
}  // namespace detail

backend_info current_backend() {
    weft::detail::task_record* t = weft::detail::current_task();
    if (!t) return {};
    detail::reactor* re = detail::reactor_of(weft::detail::current_core("weft::io::current_backend()"));
    return {re->backend_name(), re->fallback_reason().c_str(), re->features().c_str()};
}

void check(std::error_code ec, const char* what) {
    if (ec) throw std::system_error(ec, what);
}

}  // namespace weft::io
