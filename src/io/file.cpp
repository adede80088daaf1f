// file.cpp: weft/io/file.hpp. Inside a task whose runtime's reactor is
// io_uring, read_at / write_at are IORING_OP_READ / WRITE (src/io/uring.cpp,
// URING-U7, through detail::run_op() in reactor.cpp); on epoll each call runs whole on the blocking pool (one pool round
// trip per call, not per retry); outside a task pread / pwrite are called
// directly. Either way a task never blocks its worker on a disk.
//
//   IO-F1  An operation submitted to the ring (an op_state on this frame) is
//          over only when its completion has arrived (op.done, set under
//          op.mu by op_state::complete()); run_op() (reactor.cpp) never returns or unwinds
//          before that, whatever ends its wait: the kernel may write the buffer
//          (and reads op) until then, also after a cancel. It waits twice at
//          most. The first wait (w1: cancellable, with the deadline) is linked
//          as op.w under op.mu after the submission, unless op.done is already
//          set. If it ends `notified`, the completion claimed it and wrote
//          res before wake() (WAITER-V2). Otherwise w1 ended itself (its timeout or
//          the task's cancellation, WAITER-V1), so the completion's claim of w1 fails
//          and hands nothing over: the task unlinks w1 under op.mu (WAITER-V3) and, if
//          op.done is still unset, submits ASYNC_CANCEL and links a second
//          waiter w2, armed NOT cancellable and waited without deadline, which
//          only the completion can end (exactly one completion per submitted
//          op, URING-U7). Then it reports timed_out (when the op was canceled; an op
//          that completed anyway reports its result: no data is lost) or
//          unwinds (weft::throw_canceled()).

#include "weft/io/file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <utility>
#include <vector>

#include "reactor.hpp"
#include "weft/runtime.hpp"
#include "weft/waiter.hpp"

namespace weft::io {

namespace {

using detail::errno_code;
using detail::expired;

// One ring operation moves at most this much (a read returns short, a write
// repeats): the SQE's length is 32 bits and the kernel caps a read or write
// at MAX_RW_COUNT (2 GiB less a page) anyway.
constexpr std::size_t op_max = std::size_t{1} << 30;

// ring_backend() is the calling task's runtime's backend if it carries out
// operations (io_uring), else null (epoll, or not in a task).
detail::backend* ring_backend() {
    if (!weft::this_task::inside()) return nullptr;
    detail::backend& b = detail::reactor_of(weft::detail::current_core("weft::io (file)"))->get_backend();
    return b.supports_ops() ? &b : nullptr;
}

// prepare() sets r up for one read or write of at most op_max bytes.
void prepare(detail::ring_op& r, detail::op_state::kind k, int fd, void* buf, std::size_t len,
             std::uint64_t offset) noexcept {
    r.prepare(k, fd, buf, static_cast<std::uint32_t>(std::min(len, op_max)), offset);
}

// cannot_start() is what read_at() / write_at() check before starting: the file
// is open (else bad_file_descriptor) and the deadline has not passed (else
// timed_out, also on the blocking pool, where nothing can interrupt a call).
std::error_code cannot_start(int fd, clock::time_point deadline) noexcept {
    if (fd < 0) return std::make_error_code(std::errc::bad_file_descriptor);
    if (expired(deadline)) return detail::deadline_passed();
    return {};
}

// counted is what a call on the blocking pool hands back: a count and an
// error. The pool's callables capture values only, never the calling frame
// (WAITER-V4: on a shared stack that frame belongs to another task meanwhile).
struct counted {
    std::size_t n = 0;
    std::error_code ec;
};

// read_into() / write_from() are read_at() / write_at() into / from memory
// that stays put while the task waits (the caller's buffer on a stack of
// its own, a heap bounce buffer on a shared stack).
std::size_t read_into(int fd, std::span<std::byte> buf, std::uint64_t offset, std::error_code& ec,
                      clock::time_point deadline) {
    if (detail::backend* b = ring_backend()) {
        // SHRINK-A2: the kernel writes or reads the caller's buffer, which may be
        // in the task's frames, while the task is parked.
        weft::detail::stack_pin pin;
        weft::detail::stable<detail::ring_op> r;
        for (;;) {
            prepare(*r, detail::op_state::read, fd, buf.data(), buf.size(), offset);
            const int res = detail::run_op(*b, *r, deadline);
            if (res >= 0) return static_cast<std::size_t>(res);
            if (res == -EINTR) continue;
            ec = detail::op_error(res, deadline);  // IO-E1
            return 0;
        }
    }
    const counted c = weft::blocking([fd, p = buf.data(), len = buf.size(), offset] {
        counted r;
        for (;;) {
            const ssize_t n = ::pread(fd, p, len, static_cast<off_t>(offset));
            if (n >= 0) {
                r.n = static_cast<std::size_t>(n);
                return r;
            }
            if (errno == EINTR) continue;
            r.ec = errno_code();
            return r;
        }
    });
    ec = c.ec;
    return c.n;
}

std::size_t write_from(int fd, std::span<const std::byte> buf, std::uint64_t offset, std::error_code& ec,
                       clock::time_point deadline) {
    if (detail::backend* b = ring_backend()) {
        // SHRINK-A2: the kernel writes or reads the caller's buffer, which may be
        // in the task's frames, while the task is parked.
        weft::detail::stack_pin pin;
        weft::detail::stable<detail::ring_op> r;
        std::size_t done = 0;
        while (done < buf.size()) {
            prepare(*r, detail::op_state::write, fd, const_cast<std::byte*>(buf.data() + done), buf.size() - done,
                    offset + done);
            const int res = detail::run_op(*b, *r, deadline);
            if (res > 0) {
                done += static_cast<std::size_t>(res);
                continue;
            }
            if (res == -EINTR) continue;
            ec = res < 0 ? detail::op_error(res, deadline) : std::make_error_code(std::errc::io_error);
            break;
        }
        return done;
    }
    const counted c = weft::blocking([fd, p = buf.data(), len = buf.size(), offset] {
        counted r;
        while (r.n < len) {
            const ssize_t n = ::pwrite(fd, p + r.n, len - r.n, static_cast<off_t>(offset + r.n));
            if (n > 0) {
                r.n += static_cast<std::size_t>(n);
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            r.ec = n < 0 ? errno_code() : std::make_error_code(std::errc::io_error);
            break;
        }
        return r;
    });
    ec = c.ec;
    return c.n;
}

}  // namespace

file file::open(const std::string& path, int flags, std::error_code& ec, mode_t mode) {
    ec.clear();
    // The callable holds a copy of the path (WAITER-V4: not the caller's frame).
    const auto [fd, err] = weft::blocking([p = path, flags, mode] {
        int r;
        do r = ::open(p.c_str(), flags | O_CLOEXEC, mode);
        while (r < 0 && errno == EINTR);
        return std::pair<int, std::error_code>(r, r < 0 ? errno_code() : std::error_code());
    });
    ec = err;
    return file(fd);
}

file file::open(const std::string& path, int flags, mode_t mode) {
    return detail::or_throw("weft::io::file::open", [&](std::error_code& ec) { return open(path, flags, ec, mode); });
}

file& file::operator=(file&& o) noexcept {
    if (this != &o) {
        (void)close();
        fd_ = o.fd_;
        o.fd_ = -1;
    }
    return *this;
}

std::size_t file::read_at(std::span<std::byte> buf, std::uint64_t offset, std::error_code& ec,
                          clock::time_point deadline) {
    if ((ec = cannot_start(fd_, deadline))) return 0;
    if (weft::detail::on_shared_stack()) [[unlikely]] {
        // WAITER-V4: the kernel or the pool thread fills a heap buffer, copied out
        // once this task runs again (buf may lie in its saved frame).
        std::vector<std::byte> bounce(std::min(buf.size(), op_max));
        const std::size_t n = read_into(fd_, bounce, offset, ec, deadline);
        std::copy_n(bounce.begin(), n, buf.begin());
        return n;
    }
    return read_into(fd_, buf, offset, ec, deadline);
}

std::size_t file::read_at(std::span<std::byte> buf, std::uint64_t offset, clock::time_point deadline) {
    return detail::or_throw("weft::io::file::read_at",
                            [&](std::error_code& ec) { return read_at(buf, offset, ec, deadline); });
}

std::size_t file::write_at(std::span<const std::byte> buf, std::uint64_t offset, std::error_code& ec,
                           clock::time_point deadline) {
    if ((ec = cannot_start(fd_, deadline))) return 0;
    if (weft::detail::on_shared_stack()) [[unlikely]] {
        // WAITER-V4: the data goes out of a heap copy (buf may lie in the saved
        // frame of this task while it waits).
        const std::vector<std::byte> bounce(buf.begin(), buf.end());
        return write_from(fd_, bounce, offset, ec, deadline);
    }
    return write_from(fd_, buf, offset, ec, deadline);
}

std::size_t file::write_at(std::span<const std::byte> buf, std::uint64_t offset, clock::time_point deadline) {
    return detail::or_throw("weft::io::file::write_at",
                            [&](std::error_code& ec) { return write_at(buf, offset, ec, deadline); });
}

std::uint64_t file::size(std::error_code& ec) const noexcept {
    ec.clear();
    struct stat st {};
    if (fd_ < 0 || ::fstat(fd_, &st) != 0) {
        ec = fd_ < 0 ? std::make_error_code(std::errc::bad_file_descriptor) : errno_code();
        return 0;
    }
    return static_cast<std::uint64_t>(st.st_size);
}

std::error_code file::close() noexcept {
    if (fd_ < 0) return std::make_error_code(std::errc::bad_file_descriptor);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0 && errno != EINTR) return errno_code();
    return {};
}

}  // namespace weft::io
