// file.cpp: weft/io/file.hpp. Every call runs whole on the blocking pool
// (one pool round trip per call, not per retry), so a task never blocks its
// worker on a disk.

#include "weft/io/file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "weft/runtime.hpp"

namespace weft::io {

namespace {

std::error_code errno_code() noexcept { return {errno, std::system_category()}; }

bool expired(clock::time_point deadline) noexcept { return deadline != no_deadline && clock::now() >= deadline; }

}  // namespace

file file::open(const std::string& path, int flags, std::error_code& ec, mode_t mode) {
    ec.clear();
    const int fd = weft::blocking([&] {
        int r;
        do r = ::open(path.c_str(), flags | O_CLOEXEC, mode);
        while (r < 0 && errno == EINTR);
        if (r < 0) ec = errno_code();
        return r;
    });
    return file(fd);
}

file file::open(const std::string& path, int flags, mode_t mode) {
    std::error_code ec;
    file f = open(path, flags, ec, mode);
    check(ec, "weft::io::file::open");
    return f;
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
    ec.clear();
    if (fd_ < 0) {
        ec = std::make_error_code(std::errc::bad_file_descriptor);
        return 0;
    }
    if (expired(deadline)) {
        ec = std::make_error_code(std::errc::timed_out);
        return 0;
    }
    const int fd = fd_;
    return weft::blocking([&]() -> std::size_t {
        for (;;) {
            const ssize_t n = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(offset));
            if (n >= 0) return static_cast<std::size_t>(n);
            if (errno == EINTR) continue;
            ec = errno_code();
            return 0;
        }
    });
}

std::size_t file::read_at(std::span<std::byte> buf, std::uint64_t offset, clock::time_point deadline) {
    std::error_code ec;
    const std::size_t n = read_at(buf, offset, ec, deadline);
    check(ec, "weft::io::file::read_at");
    return n;
}

std::size_t file::write_at(std::span<const std::byte> buf, std::uint64_t offset, std::error_code& ec,
                           clock::time_point deadline) {
    ec.clear();
    if (fd_ < 0) {
        ec = std::make_error_code(std::errc::bad_file_descriptor);
        return 0;
    }
    if (expired(deadline)) {
        ec = std::make_error_code(std::errc::timed_out);
        return 0;
    }
    const int fd = fd_;
    return weft::blocking([&]() -> std::size_t {
        std::size_t done = 0;
        while (done < buf.size()) {
            const ssize_t n = ::pwrite(fd, buf.data() + done, buf.size() - done, static_cast<off_t>(offset + done));
            if (n > 0) {
                done += static_cast<std::size_t>(n);
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            ec = n < 0 ? errno_code() : std::make_error_code(std::errc::io_error);
            break;
        }
        return done;
    });
}

std::size_t file::write_at(std::span<const std::byte> buf, std::uint64_t offset, clock::time_point deadline) {
    std::error_code ec;
    const std::size_t n = write_at(buf, offset, ec, deadline);
    check(ec, "weft::io::file::write_at");
    return n;
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
