// weft/io/handle.hpp: layer L6, waiting for file descriptors. A handle owns
// one file descriptor (a socket, pipe, eventfd, timerfd, signalfd...) in
// non-blocking mode; a task that waits on it parks until the fd is ready,
// its deadline passes or it is canceled, while its worker runs other tasks.
// A plain thread (not inside a task) waits with poll(2) instead.
//
//   weft::io::handle h(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
//   if (auto ec = h.wait(weft::io::interest::readable, weft::io::after(1s)))
//       ...  // std::errc::timed_out, or operation_canceled if closed meanwhile
//
// docs/io.md has the design: the reactor where the runtime's workers sleep, the
// backends, the registration sequence numbers, what each error means.
//
// Errors are std::error_code in std::system_category() (errno values):
//   std::errc::timed_out            the deadline passed first;
//   std::errc::operation_canceled   another task closed the handle meanwhile;
//   std::errc::bad_file_descriptor  the handle is closed (or was never open);
//   std::errc::invalid_argument     a task of another runtime waited on it.
// The first and the last are weft's own verdicts: their codes are in
// category "weft.io", with the errno value and a message that says what to
// do, and compare equal to their std::errc all the same (IO-E1,
// src/io/reactor.hpp).
// A task's cancellation is not an error code: the waiting task unwinds
// (weft::forced_unwind), as at any other suspension point.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <system_error>

#include "weft/config.hpp"
#include "weft/waiter.hpp"

namespace weft::detail {
class runtime_core;
}

namespace weft::io {

namespace detail {
struct registration;
struct ready_core;
}

// clock is the clock of every deadline (std::chrono::steady_clock).
using clock = std::chrono::steady_clock;
// no_deadline is the deadline that never passes.
inline constexpr clock::time_point no_deadline = clock::time_point::max();

// after(d) is the deadline d from now (no_deadline if that overflows).
template <class Rep, class Period>
[[nodiscard]] clock::time_point after(std::chrono::duration<Rep, Period> d) noexcept {
    const auto now = clock::now();
    const auto ns = std::chrono::ceil<std::chrono::nanoseconds>(d);
    if (ns.count() <= 0) return now;
    if (ns > no_deadline - now) return no_deadline;
    return now + ns;
}

// interest is what a wait waits for.
enum class interest : unsigned char { readable = 1, writable = 2 };

// read_target is where a read that has no buffer yet puts its bytes
// (handle::read_some(read_target&, ...), stream's the same): the read asks
// for the buffer only when it is about to receive, and gives it up when it
// found nothing and is about to wait, so a task waiting long for its next
// bytes holds no buffer meanwhile (io::buffered_reader's, docs/io.md
// "Buffers while idle"). The read calls, on the reading task:
//   get()   just before each receive: the buffer to receive into (non-empty),
//           or an empty span when none can be had (the read then fails with
//           not_enough_memory, having received nothing);
//   idle()  before the read waits (after a receive that found nothing, or
//           before a first wait that no receive preceded): the buffer may
//           go (get() is called again before the next receive).
// Bytes are only ever received into a buffer get() just returned, so
// nothing is received while the target has none. A read that completes
// calls neither again after its receive.
class read_target {
public:
    virtual std::span<std::byte> get() noexcept = 0;
    virtual void idle() noexcept = 0;

protected:
    read_target() = default;
    read_target(const read_target&) = default;
    read_target& operator=(const read_target&) = default;
    ~read_target() = default;
};

// handle owns one file descriptor and closes it exactly once (close() or the
// destructor). Move-only. Several tasks may use one handle at once (one
// reading, one writing, or several of each), and any of them may close()
// it: the others' waits end with operation_canceled, and the fd itself is
// closed when the last operation in flight has left (IO-H1 in handle.cpp), so
// no operation ever reaches a reused fd number. Moving or destroying a
// handle while other tasks use it is a race of the caller's.
class WEFT_API handle {
public:
    handle() noexcept = default;
    // handle(fd) takes ownership of fd and puts it in non-blocking mode.
    // Throws std::system_error (bad_file_descriptor) for fd < 0, or what
    // fcntl() reports.
    explicit handle(int fd);
    handle(handle&& o) noexcept;
    handle& operator=(handle&& o) noexcept;
    handle(const handle&) = delete;
    handle& operator=(const handle&) = delete;
    // ~handle() closes the fd if still open.
    ~handle();

    // native_handle() is the fd (-1 once closed or released).
    [[nodiscard]] int native_handle() const noexcept { return is_open() ? fd_.load(std::memory_order_relaxed) : -1; }
    [[nodiscard]] bool is_open() const noexcept { return !(state_.load(std::memory_order_acquire) & closing); }
    explicit operator bool() const noexcept { return is_open(); }

    // close() wakes every task waiting on this handle (their waits return
    // operation_canceled), stops watching the fd and closes it, at once or,
    // if other tasks are inside an operation on it, when the last of them
    // leaves. The file is closed with the fd, on every backend: no watch of
    // the reactor's holds it afterwards (a pipe's writer gets EPIPE, a
    // socket's peer the end of the stream, right after close() returns when
    // no operation was in flight). Returns what close(2) reported if it
    // closed the fd itself (EINTR is not retried: on Linux the fd is closed
    // anyway);
    // bad_file_descriptor if already closed.
    std::error_code close() noexcept;
    // release() stops watching the fd and gives it back to the caller,
    // open, without closing it; -1 if closed. Waiting tasks wake as for
    // close(); the fd is the caller's from here on even while they leave.
    int release() noexcept;

    // wait() returns when the fd is ready for `what` (empty error code),
    // or with an error (above). Readiness is a hint: the next read or
    // write may still report EAGAIN, and the caller then waits again.
    // Edge-triggered underneath: call it only after an operation reported
    // EAGAIN, or the wait may sleep although data is there.
    // Requires: the handle is open.
    std::error_code wait(interest what, clock::time_point deadline = no_deadline);

    // read_some() reads up to buf.size() bytes (read(2)), waiting while
    // none are available. Returns the count; 0 means end of file (or an
    // empty buf). On error returns 0 and sets ec. EINTR is retried.
    std::size_t read_some(std::span<std::byte> buf, std::error_code& ec, clock::time_point deadline = no_deadline);
    // write_some() writes up to buf.size() bytes (write(2), or send(2) with
    // MSG_NOSIGNAL for a socket), waiting while none can be written.
    std::size_t write_some(std::span<const std::byte> buf, std::error_code& ec,
                           clock::time_point deadline = no_deadline);
    // read_some(target, ...) is read_some() into the buffer `target` hands
    // out when bytes are there, none held while it waits (read_target above).
    // On the io_uring backends it waits by a one-shot poll and receives with
    // recv(2) (a provided-buffer receive would take the bytes before the
    // target had a buffer for them).
    std::size_t read_some(read_target& target, std::error_code& ec, clock::time_point deadline = no_deadline);
    // Throwing forms: std::system_error with the code above.
    std::size_t read_some(std::span<std::byte> buf, clock::time_point deadline = no_deadline);
    std::size_t write_some(std::span<const std::byte> buf, clock::time_point deadline = no_deadline);

    // op is an operation in flight (IO-H1): constructed at the start of every
    // operation, it keeps the fd open until it goes; false if the handle is
    // closed.
    class op {
    public:
        explicit op(handle& h) noexcept;
        ~op();
        op(const op&) = delete;
        op& operator=(const op&) = delete;
        explicit operator bool() const noexcept { return in_; }

    private:
        handle& h_;
        bool in_;
    };
    // wait_in() is wait() inside an operation; raw() the fd there (valid
    // until the op goes, also when another task closes the handle).
    std::error_code wait_in(interest what, clock::time_point deadline);
    [[nodiscard]] int raw() const noexcept { return fd_.load(std::memory_order_relaxed); }

    // retry_io() is the readiness loop of every operation on the handle
    // (read_some, write_some, accept, send_to, recv_from), after Tokio's
    // Registration::async_io but trying first and waiting second:
    //
    //   IO-R1  Inside one op (IO-H1) it calls attempt(fd), fd = raw(), which
    //          makes ONE non-blocking syscall and returns its result: >= 0
    //          success, < 0 failure with errno set. Then:
    //            >= 0                   returned at once, ec clear;
    //            EINTR                  attempt called again at once;
    //            EAGAIN / EWOULDBLOCK   wait_in(what, deadline), then again;
    //            any other errno        returned as -1, ec = that errno.
    //          The first attempt comes before any wait (the fd is edge-
    //          triggered: wait only after an EAGAIN), and every wait comes
    //          right after an EAGAIN of the same op.
    //
    // It ends with -1 and ec set to bad_file_descriptor if the handle is
    // closed before it starts, to wait_in()'s error if a wait fails
    // (timed_out once the deadline has passed; operation_canceled when
    // another task closes the handle; invalid_argument from another
    // runtime's task); a cancellation of the task unwinds out of the wait
    // (weft::forced_unwind), leaving the op. Partial transfers are the
    // attempt's result: retry_io never calls it again after a success.
    // attempt must not touch the fd after returning (the op ends here).
    template <class Attempt>
    auto retry_io(interest what, clock::time_point deadline, std::error_code& ec, Attempt&& attempt)
        -> decltype(attempt(0));

private:
    friend struct detail::ready_core;  // select's readiness cases (weft/io/select.hpp)
    friend class stream;               // marks its handle a stream socket (IO-Q3)
    static constexpr std::uint32_t closing = 1, released = 2, one_op = 4;
    // enter() and leave() are an op's two ends (IO-H1); enter() is false if
    // the handle is closing.
    bool enter() noexcept;
    void leave() noexcept;
    // registration_in() is the handle's registration with the reactor of
    // runtime `core`, made by the first wait (inside an op); an error if the
    // handle is closing meanwhile or belongs to another runtime's reactor.
    std::error_code registration_in(weft::detail::runtime_core* core, detail::registration*& r);
    // ring_io() is read_some() / write_some() (send) by the owner ring's
    // (or the worker rings') IORING_OP_RECV into a provided buffer (or a
    // one-shot poll, then recv(2)) / IORING_OP_SEND (IO-R2 in
    // src/io/handle.cpp); false when that does not apply and the call goes
    // on by readiness.
    // lazy: a read into a read_target (buf is then unused).
    bool ring_io(bool send, std::span<std::byte> buf, std::error_code& ec, clock::time_point deadline,
                 std::size_t& n, read_target* lazy = nullptr);
    [[nodiscard]] bool ring_eligible(std::size_t len) const noexcept;
    // receive(): one non-blocking recv(2), or read(2) once the fd is known
    // not to be a socket (handle.cpp); read_some()'s attempt.
    ssize_t receive(int fd, std::span<std::byte> buf) noexcept;
    // stream_socket(): an io::stream's handle (kind_ 3): a short read or
    // write means the fd is empty or full (IO-Q3).
    [[nodiscard]] bool stream_socket() const noexcept { return kind_.load(std::memory_order_relaxed) == 3; }
    void detach() noexcept;
    std::error_code final_close() noexcept;
    bool begin_close(std::uint32_t extra) noexcept;
    // fd_ is constant from construction until the last operation has left
    // a closed handle (IO-H1); atomic only because native_handle() may read it
    // while another task closes.
    std::atomic<int> fd_{-1};
    // state_: bit 0 closing (an empty handle is closed), bit 1 released (do
    // not close the fd), the rest the number of operations in flight (IO-H1).
    std::atomic<std::uint32_t> state_{closing};
    // kind_: 0 not yet known, 1 a socket (recv(), send() with MSG_NOSIGNAL), 2 not (read(), write()),
    // 3 a stream socket (io::stream's: a short read or write means the fd is empty or full, IO-Q3).
    std::atomic<unsigned char> kind_{0};
    weft::spin_lock reg_mu_;                           // the first registration
    std::atomic<detail::registration*> reg_{nullptr};  // made by the first wait inside a task
    std::uint32_t seq_ = 0;                            // reg_'s sequence number, written before reg_
};

template <class Attempt>
auto handle::retry_io(interest what, clock::time_point deadline, std::error_code& ec, Attempt&& attempt)
    -> decltype(attempt(0)) {
    ec.clear();
    op g(*this);
    if (!g) {
        ec = std::make_error_code(std::errc::bad_file_descriptor);
        return -1;
    }
    for (;;) {
        const auto r = attempt(raw());
        if (r >= 0) return r;
        const int e = errno;
        if (e == EINTR) continue;
        if (e != EAGAIN && e != EWOULDBLOCK) {
            ec = std::error_code(e, std::system_category());
            return -1;
        }
        if ((ec = wait_in(what, deadline))) return -1;
    }
}

// backend_info describes the IO backend of the calling task's runtime.
struct backend_info {
    // name: "epoll" or "io_uring"; "none" outside a task or before the
    // runtime's first IO wait.
    const char* name = "none";
    // fallback_reason: why io_uring was asked for but epoll
    // runs instead, e.g. "io_uring_setup: Operation not permitted"; empty
    // when no fallback happened.
    const char* fallback_reason = "";
    // features: what the backend uses and what the kernel refused, e.g.
    // "io_uring owner ring (one worker); SINGLE_ISSUER+DEFER_TASKRUN;
    // sockets: IORING_OP_RECV into provided buffers (256 x 16 KiB), send(2)
    // then IORING_OP_SEND; batched submission" (docs/io.md, "Backends");
    // "none" like name when there is no reactor.
    const char* features = "none";
};
// current_backend() makes the calling task's runtime's reactor if needed
// and describes it. Outside a task: {"none", ""}.
[[nodiscard]] WEFT_API backend_info current_backend();

// check() throws std::system_error(ec, what) if ec is set.
WEFT_API void check(std::error_code ec, const char* what);

}  // namespace weft::io
