// handle.cpp: weft/io/handle.hpp. A handle registers its fd with the
// reactor of the runtime of the first task that waits on it, and retires
// the registration (reactor.hpp, R5) before the fd is closed or released,
// so that no event for a later fd with the same number reaches its waiters.

#include "weft/io/handle.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "reactor.hpp"
#include "weft/task.hpp"

namespace weft::io {

namespace {

std::error_code errno_code() noexcept { return {errno, std::system_category()}; }

bool would_block(int e) noexcept { return e == EAGAIN || e == EWOULDBLOCK; }

// thread_wait() is a plain thread's wait: poll(2), EINTR retried, the
// deadline rounded up to a millisecond.
std::error_code thread_wait(int fd, interest what, clock::time_point deadline) {
    pollfd p{fd, static_cast<short>(what == interest::readable ? POLLIN : POLLOUT), 0};
    for (;;) {
        int ms = -1;
        if (deadline != no_deadline) {
            const auto left = deadline - clock::now();
            if (left <= clock::duration::zero()) return std::make_error_code(std::errc::timed_out);
            const auto m = std::chrono::ceil<std::chrono::milliseconds>(left).count();
            ms = m > INT32_MAX ? INT32_MAX : static_cast<int>(m);
        }
        const int n = ::poll(&p, 1, ms);
        if (n > 0) return {};
        if (n < 0 && errno != EINTR) return errno_code();
    }
}

}  // namespace

handle::handle(int fd) {
    if (fd < 0) throw std::system_error(std::make_error_code(std::errc::bad_file_descriptor), "weft::io::handle");
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0 || (!(fl & O_NONBLOCK) && ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0))
        throw std::system_error(errno_code(), "weft::io::handle: fcntl");
    fd_ = fd;
}

handle::handle(handle&& o) noexcept
    : fd_(o.fd_.exchange(-1, std::memory_order_relaxed)),
      socket_(o.socket_),
      checked_(o.checked_),
      reg_(o.reg_.exchange(nullptr, std::memory_order_relaxed)),
      seq_(o.seq_) {}

handle& handle::operator=(handle&& o) noexcept {
    if (this != &o) {
        (void)close();
        fd_.store(o.fd_.exchange(-1, std::memory_order_relaxed), std::memory_order_relaxed);
        socket_ = o.socket_;
        checked_ = o.checked_;
        reg_.store(o.reg_.exchange(nullptr, std::memory_order_relaxed), std::memory_order_relaxed);
        seq_ = o.seq_;
    }
    return *this;
}

handle::~handle() { (void)close(); }

void handle::detach() noexcept {
    if (detail::registration* r = reg_.exchange(nullptr, std::memory_order_relaxed)) r->owner->retire(r);
}

std::error_code handle::close() noexcept {
    if (native_handle() < 0) return std::make_error_code(std::errc::bad_file_descriptor);
    detach();
    const int fd = fd_.exchange(-1, std::memory_order_relaxed);
    if (fd < 0) return std::make_error_code(std::errc::bad_file_descriptor);
    // EINTR: on Linux the fd is closed anyway; retrying could close another.
    if (::close(fd) != 0 && errno != EINTR) return errno_code();
    return {};
}

int handle::release() noexcept {
    if (native_handle() < 0) return -1;
    detach();
    return fd_.exchange(-1, std::memory_order_relaxed);
}

std::error_code handle::wait(interest what, clock::time_point deadline) {
    const int fd = native_handle();
    if (fd < 0) return std::make_error_code(std::errc::bad_file_descriptor);
    weft::detail::task_record* t = weft::detail::current_task();
    if (!t) return thread_wait(fd, what, deadline);
    auto* core = weft::detail::current_core();
    detail::registration* r = reg_.load(std::memory_order_relaxed);
    if (!r) {
        // The first wait registers (one task at a time per handle does:
        // concurrent first waits from two tasks are a race of the caller's).
        detail::reactor* re = detail::reactor_of(core);
        r = re->acquire(fd, seq_);
        reg_.store(r, std::memory_order_relaxed);
    } else if (r->owner->core() != core) {
        // The registration's reactor belongs to another runtime, whose
        // workers may not be polling.
        return std::make_error_code(std::errc::invalid_argument);
    }
    return detail::wait(r, seq_, what == interest::readable ? 0 : 1, deadline);
}

std::size_t handle::read_some(std::span<std::byte> buf, std::error_code& ec, clock::time_point deadline) {
    ec.clear();
    for (;;) {
        const int fd = native_handle();
        if (fd < 0) {
            ec = std::make_error_code(std::errc::bad_file_descriptor);
            return 0;
        }
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n >= 0) return static_cast<std::size_t>(n);
        if (errno == EINTR) continue;
        if (!would_block(errno)) {
            ec = errno_code();
            return 0;
        }
        if ((ec = wait(interest::readable, deadline))) return 0;
    }
}

std::size_t handle::write_some(std::span<const std::byte> buf, std::error_code& ec, clock::time_point deadline) {
    ec.clear();
    for (;;) {
        const int fd = native_handle();
        if (fd < 0) {
            ec = std::make_error_code(std::errc::bad_file_descriptor);
            return 0;
        }
        ssize_t n;
        if (!checked_ || socket_) {
            n = ::send(fd, buf.data(), buf.size(), MSG_NOSIGNAL);
            if (!checked_) {
                checked_ = true;
                socket_ = !(n < 0 && errno == ENOTSOCK);
                if (!socket_) continue;
            }
        } else {
            n = ::write(fd, buf.data(), buf.size());
        }
        if (n >= 0) return static_cast<std::size_t>(n);
        if (errno == EINTR) continue;
        if (!would_block(errno)) {
            ec = errno_code();
            return 0;
        }
        if ((ec = wait(interest::writable, deadline))) return 0;
    }
}

std::size_t handle::read_some(std::span<std::byte> buf, clock::time_point deadline) {
    std::error_code ec;
    const std::size_t n = read_some(buf, ec, deadline);
    check(ec, "weft::io::handle::read_some");
    return n;
}

std::size_t handle::write_some(std::span<const std::byte> buf, clock::time_point deadline) {
    std::error_code ec;
    const std::size_t n = write_some(buf, ec, deadline);
    check(ec, "weft::io::handle::write_some");
    return n;
}

backend_info current_backend() {
    weft::detail::task_record* t = weft::detail::current_task();
    if (!t) return {};
    detail::reactor* re = detail::reactor_of(weft::detail::current_core());
    return {re->backend_name(), re->fallback_reason().c_str()};
}

void check(std::error_code ec, const char* what) {
    if (ec) throw std::system_error(ec, what);
}

}  // namespace weft::io
