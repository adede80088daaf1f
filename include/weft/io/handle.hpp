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
// docs/io.md has the design: the reactor inside the runtime's parking, the
// backends, the registration sequence numbers, what each error means.
//
// Errors are std::error_code in std::system_category() (errno values):
//   std::errc::timed_out            the deadline passed first;
//   std::errc::operation_canceled   another task closed the handle meanwhile;
//   std::errc::bad_file_descriptor  the handle is closed (or was never open).
// A task's cancellation is not an error code: the waiting task unwinds
// (weft::forced_unwind), as at any other suspension point.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <system_error>

#include "weft/config.hpp"

namespace weft::io {

namespace detail {
struct registration;
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

// handle owns one file descriptor and closes it exactly once (close() or the
// destructor). Move-only. Not safe to close or move while other tasks use
// it from other threads, except through close(), which wakes them.
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
    [[nodiscard]] int native_handle() const noexcept { return fd_.load(std::memory_order_relaxed); }
    [[nodiscard]] bool is_open() const noexcept { return native_handle() >= 0; }
    explicit operator bool() const noexcept { return is_open(); }

    // close() wakes every task waiting on this handle (their waits return
    // operation_canceled), stops watching the fd and closes it. Returns
    // what close(2) reported (EINTR is not retried: on Linux the fd is
    // closed anyway); bad_file_descriptor if already closed.
    std::error_code close() noexcept;
    // release() stops watching the fd and gives it back to the caller,
    // open, without closing it; -1 if closed. Waiting tasks wake as for
    // close().
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
    // Throwing forms: std::system_error with the code above.
    std::size_t read_some(std::span<std::byte> buf, clock::time_point deadline = no_deadline);
    std::size_t write_some(std::span<const std::byte> buf, clock::time_point deadline = no_deadline);

private:
    void detach() noexcept;
    // fd_ and reg_ are atomic (relaxed) because close() from another task
    // writes them while a waiting task may have just read them; the
    // registration's lock and sequence number order everything else.
    std::atomic<int> fd_{-1};
    bool socket_ = false;   // known to be a socket: send() with MSG_NOSIGNAL
    bool checked_ = false;  // socket_ has been found out
    std::atomic<detail::registration*> reg_{nullptr};  // made by the first wait inside a task
    std::uint32_t seq_ = 0;                            // reg_'s sequence number when made
};

// backend_info describes the IO backend of the calling task's runtime.
struct backend_info {
    // name: "epoll" or "io_uring"; "none" outside a task or before the
    // runtime's first IO wait.
    const char* name = "none";
    // fallback_reason: why io_uring was asked for (or automatic) but epoll
    // runs instead, e.g. "io_uring_setup: Operation not permitted"; empty
    // when no fallback happened.
    const char* fallback_reason = "";
};
// current_backend() makes the calling task's runtime's reactor if needed
// and describes it. Outside a task: {"none", ""}.
[[nodiscard]] WEFT_API backend_info current_backend();

// check() throws std::system_error(ec, what) if ec is set.
WEFT_API void check(std::error_code ec, const char* what);

}  // namespace weft::io
