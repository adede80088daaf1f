// weft/io/file.hpp: layer L6, regular files read and written at an offset
// without blocking the worker: only the calling task waits. On io_uring the
// call is a ring operation (IORING_OP_READ / WRITE); on epoll it runs on the
// runtime's blocking pool (weft::blocking). Outside a task the call is made
// directly (pread / pwrite).
//
//   auto f = weft::io::file::open("/var/log/game.log", O_RDONLY);
//   std::array<std::byte, 4096> buf;
//   std::size_t n = f.read_at(buf, 0);
//
// The buffer is in use until the operation completes, and the call never
// returns or unwinds before that. On io_uring a deadline or a cancellation
// that comes while the operation is pending cancels it (ASYNC_CANCEL) and
// waits for its completion, then reports timed_out (or the result, if the
// operation completed anyway) or unwinds. On the blocking pool an operation
// cannot be interrupted: a deadline that has passed before the call starts
// reports timed_out; a cancellation takes effect when the call has
// returned. Errors are errno values.
#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <system_error>

#include "weft/io/handle.hpp"

namespace weft::io {

// file owns one open regular file (closed exactly once). Move-only.
class WEFT_API file {
public:
    file() noexcept = default;
    // open() opens `path` with open(2)'s flags and mode (O_CLOEXEC is
    // added). Throws std::system_error / sets ec.
    static file open(const std::string& path, int flags, std::error_code& ec, mode_t mode = 0644);
    static file open(const std::string& path, int flags, mode_t mode = 0644);
    file(file&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    file& operator=(file&& o) noexcept;
    file(const file&) = delete;
    file& operator=(const file&) = delete;
    ~file() { (void)close(); }

    // read_at() reads up to buf.size() bytes at `offset` (pread(2));
    // returns the count, 0 at end of file. EINTR is retried.
    std::size_t read_at(std::span<std::byte> buf, std::uint64_t offset, std::error_code& ec,
                        clock::time_point deadline = no_deadline);
    std::size_t read_at(std::span<std::byte> buf, std::uint64_t offset, clock::time_point deadline = no_deadline);
    // write_at() writes all of buf at `offset` (pwrite(2), repeated on
    // short writes); returns the count written (all, or fewer with ec).
    std::size_t write_at(std::span<const std::byte> buf, std::uint64_t offset, std::error_code& ec,
                         clock::time_point deadline = no_deadline);
    std::size_t write_at(std::span<const std::byte> buf, std::uint64_t offset,
                         clock::time_point deadline = no_deadline);
    // size() is the file's size (fstat).
    std::uint64_t size(std::error_code& ec) const noexcept;

    std::error_code close() noexcept;
    [[nodiscard]] int native_handle() const noexcept { return fd_; }
    [[nodiscard]] bool is_open() const noexcept { return fd_ >= 0; }

private:
    explicit file(int fd) noexcept : fd_(fd) {}
    int fd_ = -1;
};

}  // namespace weft::io
