// weft/io/socket.hpp: layer L6, sockets on the runtime's reactor: TCP and
// Unix-domain streams and listeners, UDP, endpoints, name resolution.
//
//   weft::runtime rt({.workers = 2});
//   rt.block_on([] {
//       auto l = weft::io::tcp_listener::bind(weft::io::endpoint::loopback_v4(0));
//       weft::spawn([port = l.local_endpoint().port()] {
//           auto s = weft::io::tcp_stream::connect(weft::io::endpoint::loopback_v4(port));
//           s.write_all(std::as_bytes(std::span("ping", 4)));
//       }).detach();
//       auto c = l.accept();
//       std::array<std::byte, 4> buf;
//       c.read_exact(buf, weft::io::after(std::chrono::seconds(5)));
//   });
//
// Every operation that can wait takes a deadline (io::no_deadline by
// default) and is a suspension point: the task parks, its worker runs
// others, and a cancellation unwinds the task there. Each comes in two
// forms, as in Boost.Asio: one sets a std::error_code, one throws
// std::system_error with it. EINTR, EAGAIN and short reads / writes are
// handled inside; a write to a socket whose peer has gone reports EPIPE and
// never raises SIGPIPE. Errors are errno values in std::system_category(),
// plus io::eof() from read_exact().
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "weft/io/handle.hpp"

namespace weft::io {

// eof() is the error read_exact() reports when the stream ends first
// (category "weft.io", message "end of file").
[[nodiscard]] WEFT_API std::error_code eof() noexcept;

namespace detail {
// read_exact_with() is read_exact()'s loop over any read_some(span, ec):
// fills buf, or stops at the first error, or with eof() at the end of the
// stream; returns the bytes stored.
template <class ReadSome>
std::size_t read_exact_with(std::span<std::byte> buf, std::error_code& ec, ReadSome&& read_some) {
    ec.clear();
    std::size_t got = 0;
    while (got < buf.size()) {
        const std::size_t n = read_some(buf.subspan(got), ec);
        if (ec) return got;
        if (n == 0) {
            ec = eof();
            return got;
        }
        got += n;
    }
    return got;
}
}  // namespace detail

// endpoint is an IPv4, IPv6 or Unix-domain socket address (a copy of a
// sockaddr). The empty endpoint has family AF_UNSPEC.
class WEFT_API endpoint {
public:
    endpoint() noexcept;
    // endpoint(sa, len) copies a sockaddr; throws std::system_error
    // (invalid_argument) if len is larger than sockaddr_storage.
    endpoint(const sockaddr* sa, socklen_t len);

    // ipv4("127.0.0.1", 80) / ipv6("::1", 80): numeric addresses only
    // (resolve() for names); throw std::system_error (invalid_argument).
    static endpoint ipv4(std::string_view address, std::uint16_t port);
    static endpoint ipv6(std::string_view address, std::uint16_t port);
    static endpoint loopback_v4(std::uint16_t port = 0);
    static endpoint loopback_v6(std::uint16_t port = 0);
    // unix_path("/tmp/x.sock"): a Unix-domain address; a path that starts
    // with '@' is in the abstract namespace. Throws std::system_error
    // (filename_too_long) if it does not fit.
    static endpoint unix_path(std::string_view path);
    // parse("1.2.3.4:80"), parse("[::1]:80"), parse("unix:/path"): the
    // numeric forms to_string() prints; nullopt if malformed.
    static std::optional<endpoint> parse(std::string_view text);

    [[nodiscard]] int family() const noexcept;
    // port() is 0 for a Unix-domain or empty endpoint.
    [[nodiscard]] std::uint16_t port() const noexcept;
    [[nodiscard]] std::string to_string() const;
    [[nodiscard]] const sockaddr* data() const noexcept { return reinterpret_cast<const sockaddr*>(&storage_); }
    [[nodiscard]] socklen_t size() const noexcept { return len_; }
    friend WEFT_API bool operator==(const endpoint& a, const endpoint& b) noexcept;

private:
    sockaddr_storage storage_;
    socklen_t len_;
};

// resolve() runs getaddrinfo(host, service) on the runtime's blocking pool
// (weft::blocking; directly outside a task) and returns its addresses, for
// stream sockets. Errors: getaddrinfo's, in category "weft.resolve" (value:
// the EAI_ code, message: gai_strerror()); EAI_SYSTEM is reported as its
// errno in std::system_category(). An empty host or service is passed as
// null (getaddrinfo's meaning).
WEFT_API std::vector<endpoint> resolve(std::string_view host, std::string_view service, std::error_code& ec);
WEFT_API std::vector<endpoint> resolve(std::string_view host, std::string_view service);

// shutdown_kind says which direction shutdown() ends.
enum class shutdown_kind { read = SHUT_RD, write = SHUT_WR, both = SHUT_RDWR };

// socket_base is what stream, listener and udp_socket share: the handle
// and the calls that need nothing else. Not made on its own.
class WEFT_API socket_base {
public:
    // local_endpoint(): getsockname. Throws std::system_error
    // (bad_file_descriptor when closed). Requires: not being closed by
    // another task meanwhile.
    [[nodiscard]] endpoint local_endpoint() const;
    // close(): see handle::close(); tasks blocked on this socket wake with
    // operation_canceled.
    std::error_code close() noexcept { return h_.close(); }
    [[nodiscard]] bool is_open() const noexcept { return h_.is_open(); }
    [[nodiscard]] handle& native() noexcept { return h_; }

protected:
    socket_base() noexcept = default;
    explicit socket_base(handle h) noexcept : h_(std::move(h)) {}
    ~socket_base() = default;
    socket_base(socket_base&&) noexcept = default;
    socket_base& operator=(socket_base&&) noexcept = default;

    handle h_;
};

// stream is a connected stream socket: TCP (IPv4, IPv6) or Unix-domain.
// tcp_stream and unix_stream name it.
class WEFT_API stream : public socket_base {
public:
    stream() noexcept = default;
    // stream(h) adopts a connected stream socket.
    explicit stream(handle h) noexcept : socket_base(std::move(h)) {
        if (h_.is_open()) h_.kind_.store(3, std::memory_order_relaxed);  // IO-Q3
    }

    // connect() opens a socket of to's family and connects it; the
    // deadline bounds the whole connect (timed_out; a deadline already
    // passed times out without trying); a refused connect reports
    // connection_refused; an empty endpoint address_family_not_supported.
    // A Unix-domain listener whose queue is full is retried with short
    // pauses until the deadline (the kernel gives nothing to wait on).
    static stream connect(const endpoint& to, std::error_code& ec, clock::time_point deadline = no_deadline);
    static stream connect(const endpoint& to, clock::time_point deadline = no_deadline);

    // read_some() reads what is there, up to buf.size() bytes, waiting
    // until something is; 0: the peer shut down its side (or empty buf).
    std::size_t read_some(std::span<std::byte> buf, std::error_code& ec, clock::time_point deadline = no_deadline);
    std::size_t read_some(std::span<std::byte> buf, clock::time_point deadline = no_deadline);
    // read_some(target, ...): the same into the buffer a read_target hands
    // out when bytes are there (handle::read_some(read_target&, ...)).
    std::size_t read_some(read_target& target, std::error_code& ec, clock::time_point deadline = no_deadline) {
        return h_.read_some(target, ec, deadline);
    }
    // write_some() writes what fits, at least one byte unless buf is empty.
    std::size_t write_some(std::span<const std::byte> buf, std::error_code& ec,
                           clock::time_point deadline = no_deadline);
    std::size_t write_some(std::span<const std::byte> buf, clock::time_point deadline = no_deadline);
    // read_exact() reads exactly buf.size() bytes; io::eof() if the stream
    // ends first. Returns how many bytes it read (all of them, or fewer
    // with ec set).
    std::size_t read_exact(std::span<std::byte> buf, std::error_code& ec, clock::time_point deadline = no_deadline);
    std::size_t read_exact(std::span<std::byte> buf, clock::time_point deadline = no_deadline);
    // write_all() writes all of buf; returns how many bytes it wrote.
    std::size_t write_all(std::span<const std::byte> buf, std::error_code& ec,
                          clock::time_point deadline = no_deadline);
    std::size_t write_all(std::span<const std::byte> buf, clock::time_point deadline = no_deadline);

    std::error_code shutdown(shutdown_kind how = shutdown_kind::write) noexcept;
    // set_no_delay() sets TCP_NODELAY (an error on a Unix-domain stream);
    // set_keep_alive() sets SO_KEEPALIVE.
    std::error_code set_no_delay(bool on) noexcept;
    std::error_code set_keep_alive(bool on) noexcept;
    // remote_endpoint(): getpeername. Throws std::system_error
    // (bad_file_descriptor when closed, not_connected when the peer has
    // gone). Requires: not being closed by another task meanwhile.
    [[nodiscard]] endpoint remote_endpoint() const;
    // local_endpoint(), close(), is_open(), native(): socket_base.

    // char forms of the reads and writes above, for text without casts:
    // the same calls over the same bytes.
    std::size_t read_some(std::span<char> buf, std::error_code& ec, clock::time_point deadline = no_deadline) {
        return read_some(std::as_writable_bytes(buf), ec, deadline);
    }
    std::size_t read_some(std::span<char> buf, clock::time_point deadline = no_deadline) {
        return read_some(std::as_writable_bytes(buf), deadline);
    }
    std::size_t write_some(std::string_view buf, std::error_code& ec, clock::time_point deadline = no_deadline) {
        return write_some(std::as_bytes(std::span(buf.data(), buf.size())), ec, deadline);
    }
    std::size_t write_some(std::string_view buf, clock::time_point deadline = no_deadline) {
        return write_some(std::as_bytes(std::span(buf.data(), buf.size())), deadline);
    }
    std::size_t read_exact(std::span<char> buf, std::error_code& ec, clock::time_point deadline = no_deadline) {
        return read_exact(std::as_writable_bytes(buf), ec, deadline);
    }
    std::size_t read_exact(std::span<char> buf, clock::time_point deadline = no_deadline) {
        return read_exact(std::as_writable_bytes(buf), deadline);
    }
    std::size_t write_all(std::string_view buf, std::error_code& ec, clock::time_point deadline = no_deadline) {
        return write_all(std::as_bytes(std::span(buf.data(), buf.size())), ec, deadline);
    }
    std::size_t write_all(std::string_view buf, clock::time_point deadline = no_deadline) {
        return write_all(std::as_bytes(std::span(buf.data(), buf.size())), deadline);
    }
};
using tcp_stream = stream;
using unix_stream = stream;

// listener is a listening stream socket (TCP or Unix-domain); tcp_listener
// and unix_listener name it.
class WEFT_API listener : public socket_base {
public:
    listener() noexcept = default;
    // bind() opens a socket of at's family, sets SO_REUSEADDR (TCP), binds
    // and listens with `backlog`. Port 0 picks a free port
    // (local_endpoint() says which). A Unix-domain path is not removed
    // first, nor when the listener closes: an existing file reports
    // address_in_use (the abstract namespace, "@name", needs no cleanup).
    static listener bind(const endpoint& at, std::error_code& ec, int backlog = SOMAXCONN);
    static listener bind(const endpoint& at, int backlog = SOMAXCONN);

    // accept() waits for the next connection. When the process is out of
    // fds (EMFILE, ENFILE) it reports that and the listener stays usable:
    // accept again once fds are free (the connection stays queued). A
    // connection reset while queued (ECONNABORTED) is skipped. `peer`, if
    // given, receives the peer's address. close() from another task wakes
    // it with operation_canceled.
    stream accept(std::error_code& ec, clock::time_point deadline = no_deadline, endpoint* peer = nullptr);
    stream accept(clock::time_point deadline = no_deadline, endpoint* peer = nullptr);

    // local_endpoint(), close(), is_open(), native(): socket_base.
};
using tcp_listener = listener;
using unix_listener = listener;

// udp_socket is a datagram socket (IPv4 or IPv6).
class WEFT_API udp_socket : public socket_base {
public:
    udp_socket() noexcept = default;
    // bind() opens a UDP socket of at's family bound to `at` (port 0: any);
    // address_family_not_supported for other than IPv4 / IPv6.
    static udp_socket bind(const endpoint& at, std::error_code& ec);
    static udp_socket bind(const endpoint& at);

    // send_to() sends one datagram; returns its size.
    std::size_t send_to(std::span<const std::byte> buf, const endpoint& to, std::error_code& ec,
                        clock::time_point deadline = no_deadline);
    std::size_t send_to(std::span<const std::byte> buf, const endpoint& to, clock::time_point deadline = no_deadline);
    // recv_from() receives one datagram (truncated to buf.size()); returns
    // the bytes stored; `from` receives the sender.
    std::size_t recv_from(std::span<std::byte> buf, endpoint& from, std::error_code& ec,
                          clock::time_point deadline = no_deadline);
    std::size_t recv_from(std::span<std::byte> buf, endpoint& from, clock::time_point deadline = no_deadline);

    // local_endpoint(), close(), is_open(), native(): socket_base.
};

}  // namespace weft::io
