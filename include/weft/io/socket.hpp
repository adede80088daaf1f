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
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
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

// listen_limits: what a limited_listener enforces (below).
struct listen_limits {
    // max_connections: how many of its accepted connections may be open at
    // once; one more is turned away. 0: no limit.
    std::size_t max_connections = 0;
    // reject_message: what a connection turned away is sent before it is
    // closed, e.g. "-ERR max number of clients reached\r\n" (empty: closed
    // without a word). One send that does not wait: a peer whose receive
    // window is shut gets what fits, or nothing.
    std::string reject_message{};
    // reserve_fd: keep one fd open in reserve (/dev/null), to accept and turn
    // away a connection when the process is out of fds (EMFILE, ENFILE).
    bool reserve_fd = true;
    // min_backoff, max_backoff: the pauses of an accept out of fds that
    // cannot turn the connection away (no reserve, or it could not be had):
    // the first pause, doubled after each further one up to the second.
    std::chrono::milliseconds min_backoff{1};
    std::chrono::milliseconds max_backoff{250};
};

namespace detail {
struct listen_state;
// connection_slot is one accepted connection counted against its
// limited_listener's max_connections: release() (or the destructor) gives
// the place back, once. Move-only.
class WEFT_API connection_slot {
public:
    connection_slot() noexcept = default;
    explicit connection_slot(std::shared_ptr<listen_state> s) noexcept : s_(std::move(s)) {}
    connection_slot(connection_slot&& o) noexcept = default;
    connection_slot& operator=(connection_slot&& o) noexcept {
        if (this != &o) {
            release();
            s_ = std::move(o.s_);
        }
        return *this;
    }
    ~connection_slot() { release(); }
    void release() noexcept;
    [[nodiscard]] bool held() const noexcept { return s_ != nullptr; }

private:
    std::shared_ptr<listen_state> s_;
};
}  // namespace detail

// limited_stream is a stream accepted by a limited_listener, holding its
// place in the listener's count until it is closed (its own close()) or
// destroyed. Its calls are io::stream's. as_stream() is the stream for code
// that takes an io::stream&; closing or moving the stream out through it
// keeps the place until the limited_stream itself is closed or destroyed.
class WEFT_API limited_stream : private stream {
public:
    limited_stream() noexcept = default;
    limited_stream(stream s, detail::connection_slot slot) noexcept : stream(std::move(s)), slot_(std::move(slot)) {}
    limited_stream(limited_stream&&) noexcept = default;
    limited_stream& operator=(limited_stream&& o) noexcept {
        if (this != &o) {
            (void)close();
            stream::operator=(std::move(o));
            slot_ = std::move(o.slot_);
        }
        return *this;
    }
    // ~limited_stream() closes the stream first, then gives the place back
    // (IO-L1).
    ~limited_stream() { (void)close(); }

    using stream::local_endpoint;
    using stream::native;
    using stream::is_open;
    using stream::read_some;
    using stream::write_some;
    using stream::read_exact;
    using stream::write_all;
    using stream::shutdown;
    using stream::set_no_delay;
    using stream::set_keep_alive;
    using stream::remote_endpoint;
    // close() closes the stream and gives its place back.
    std::error_code close() noexcept {
        const std::error_code ec = stream::close();
        slot_.release();
        return ec;
    }
    [[nodiscard]] stream& as_stream() noexcept { return *this; }
    // counted(): it holds a place (false once closed, or default-made).
    [[nodiscard]] bool counted() const noexcept { return slot_.held(); }

private:
    detail::connection_slot slot_;
};

// limited_listener is a listener that protects the process from more
// connections than it means to serve, as redis-server does at its client
// limit, instead of leaving them in the backlog:
//   - at max_connections live accepted connections, accept() turns each new
//     connection away: accepts it, sends reject_message without waiting,
//     closes it, and waits for the next;
//   - out of fds (EMFILE, ENFILE), it turns the connection away with the
//     fd kept in reserve: closes the reserve, accepts into the fd that
//     frees, sends, closes, opens the reserve again (the technique libev's
//     documentation describes and libuv uses);
//   - out of fds with no reserve to spend, it pauses (min_backoff, doubling
//     to max_backoff, never past the deadline) and tries again, instead of
//     failing at once or spinning; once fds are free it serves as before.
// The invariants are IO-L1 - IO-L4 in src/io/socket.cpp. accept() returns
// only connections it keeps (or an error: the deadline's timed_out, the
// listener's others); stats() counts what it did. Several tasks may accept
// at once, as on a listener. Closing a turned-away connection whose peer
// already sent bytes makes the kernel reset it, and the peer may then lose
// the message: a client that reads first (as redis clients do) gets it.
class WEFT_API limited_listener {
public:
    limited_listener() noexcept = default;
    // limited_listener(l, limits) takes over the listener and opens the
    // reserve fd (if asked; without one where it cannot be had: accept()
    // tries again each time it is missing).
    limited_listener(listener l, listen_limits limits);
    limited_listener(limited_listener&& o) noexcept;
    limited_listener& operator=(limited_listener&& o) noexcept;
    limited_listener(const limited_listener&) = delete;
    limited_listener& operator=(const limited_listener&) = delete;
    // ~limited_listener() closes the listener and the reserve; the streams
    // it accepted stay open (and counted, against nothing).
    ~limited_listener();

    // bind(): listener::bind(), then the limits.
    static limited_listener bind(const endpoint& at, listen_limits limits, std::error_code& ec,
                                 int backlog = SOMAXCONN);
    static limited_listener bind(const endpoint& at, listen_limits limits, int backlog = SOMAXCONN);

    // accept(): above. `peer`, if given, receives the peer's address of the
    // connection returned.
    limited_stream accept(std::error_code& ec, clock::time_point deadline = no_deadline, endpoint* peer = nullptr);
    limited_stream accept(clock::time_point deadline = no_deadline, endpoint* peer = nullptr);

    struct counts {
        std::size_t live = 0;               // accepted connections still counted
        std::uint64_t accepted = 0;         // returned by accept()
        std::uint64_t turned_away = 0;      // over the limit, or out of fds by the reserve
        std::uint64_t out_of_fds = 0;       // accepts that reported EMFILE / ENFILE
        std::uint64_t backoffs = 0;         // pauses after those (IO-L4)
    };
    [[nodiscard]] counts stats() const noexcept;
    // holds_reserve(): the reserve fd is open now.
    [[nodiscard]] bool holds_reserve() const noexcept { return reserve_.load(std::memory_order_relaxed) >= 0; }
    [[nodiscard]] const listen_limits& limits() const noexcept { return lim_; }
    [[nodiscard]] listener& base() noexcept { return l_; }
    [[nodiscard]] endpoint local_endpoint() const { return l_.local_endpoint(); }
    [[nodiscard]] bool is_open() const noexcept { return l_.is_open(); }
    // close() closes the listener (an accept() waiting wakes with
    // operation_canceled; one in a pause out of fds ends at the pause's end,
    // with bad_file_descriptor) and the reserve.
    std::error_code close() noexcept;

private:
    listener l_;
    listen_limits lim_;
    std::shared_ptr<detail::listen_state> st_;
    std::atomic<int> reserve_{-1};
};

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
