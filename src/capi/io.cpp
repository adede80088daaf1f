// The C API's sockets: weft's L6 io::listener and io::stream (TCP and
// Unix-domain) behind handles, their error codes mapped to results, and the
// errno of the last WEFT_IO_ERROR kept per thread.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "capi.hpp"
#include "weft/io/signal.hpp"
#include "weft/io/socket.hpp"

namespace weft::capi {
namespace {

// The objects behind weft_stream and weft_listener.
//
//   CAPI-IO1  An io::stream or io::listener held by a C object is destroyed
//             only by the object's last release(), after every call that
//             acquired it has returned. *_destroy() takes the handle out of
//             the table and closes the socket, which ends the waits of the
//             calls in progress in tasks (operation_canceled, WEFT_CLOSED),
//             but never runs the destructor under them. So weft/io/handle.hpp's
//             rule (a socket is not moved or destroyed while another task
//             uses it) holds for every C caller, and a call in progress
//             never touches freed memory, whatever another thread destroys.
struct strm final : object {
    static constexpr kind kind_of = kind::stream;
    explicit strm(io::stream st) noexcept : object(kind::stream), s(std::move(st)) {}
    io::socket_base& socket() noexcept { return s; }
    io::stream s;
};

struct lstn final : object {
    static constexpr kind kind_of = kind::listener;
    lstn(io::listener li, std::uint16_t p) noexcept : object(kind::listener), l(std::move(li)), port(p) {}
    io::socket_base& socket() noexcept { return l; }
    io::listener l;
    // port is read at creation: weft_listener_port() never touches the
    // socket, which another task may be closing.
    const std::uint16_t port;
};

// The object behind weft_signal_set. Its signal_set is destroyed by the
// last release(), after every wait in progress has returned (as CAPI-IO1):
// io::signal_set requires that nobody waits on a set being destroyed.
struct sigs final : object {
    static constexpr kind kind_of = kind::signals;
    explicit sigs(std::span<const int> list) : object(kind::signals), set(list) {}
    io::signal_set set;
};

// The errno of the calling thread's last IO call (0 unless it returned
// WEFT_IO_ERROR).
//
//   CAPI-IO2  The slot is written once per IO call, by the thread that
//             returns from it, after the call's last suspension point, and
//             always through last_errno_slot(), which the optimiser cannot
//             see through (noinline and an asm barrier on the address): a
//             task that moved to another worker while it waited writes the
//             slot of the thread it returns on, never that of the thread it
//             left (docs/safety.md, thread-local state across a yield).
//             weft_last_errno() reads it without waiting, so a task that
//             reads it before its next wait reads its own call's value.
thread_local int last_errno_of_thread = 0;

[[gnu::noinline]] int* last_errno_slot() noexcept {
    int* p = &last_errno_of_thread;
    asm volatile("" : "+r"(p));
    return p;
}

io::clock::time_point deadline_of(const c_deadline& d) noexcept { return d.none ? io::no_deadline : d.at; }

// io_result() maps an io error code to a result; for WEFT_IO_ERROR, err
// gets the errno.
//
//   CAPI-IO3  bad_file_descriptor and operation_canceled come only from the
//             io::handle itself (closed before the call, closed during its
//             wait): IO-H1 keeps the fd open while an operation is inside
//             it, so the kernel never reports EBADF on it. Both are
//             WEFT_CLOSED. timed_out is WEFT_TIMED_OUT only once the call's
//             own deadline has passed (a wait never ends before it); a
//             kernel's ETIMEDOUT before then (a TCP connect or keep-alive
//             that gave up) is WEFT_IO_ERROR with ETIMEDOUT.
weft_result io_result(const std::error_code& ec, const c_deadline& d, int& err) noexcept {
    if (!ec) return WEFT_OK;
    if (ec == io::eof()) return WEFT_EOF;
    if (ec == std::errc::bad_file_descriptor || ec == std::errc::operation_canceled) return WEFT_CLOSED;
    if (ec == std::errc::timed_out && !d.none && io::clock::now() >= d.at) return WEFT_TIMED_OUT;
    // io::eof()'s category also holds IO-E1's codes, whose values are errno values.
    if (ec.category() == std::system_category() || ec.category() == std::generic_category() ||
        ec.category() == io::eof().category()) {
        err = ec.value();
        return WEFT_IO_ERROR;
    }
    return WEFT_UNKNOWN_ERROR;
}

// io_call() runs an IO entry point's body f(err) at the C boundary
// (guarded(): exceptions become codes, a cancellation WEFT_CANCELED) and
// then records the errno for weft_last_errno() (CAPI-IO2).
template <class F>
weft_result io_call(F&& f) noexcept {
    int err = 0;
    const weft_result r = guarded([&] { return f(err); });
    *last_errno_slot() = r == WEFT_IO_ERROR ? err : 0;
    return r;
}

// too_long() is a byte count no C object can have (above PTRDIFF_MAX: in
// practice a negative number converted to size_t). Such a len is
// WEFT_INVALID_ARGUMENT rather than a span the kernel would read or write
// past the caller's buffer.
constexpr bool too_long(std::size_t len) noexcept { return len > static_cast<std::size_t>(PTRDIFF_MAX); }

// quoted() is a C string argument for an error text: in quotes, cut at 64
// bytes.
std::string quoted(std::string_view a) {
    std::string q = "'";
    q.append(a.substr(0, 64));
    if (a.size() > 64) q.append("...");
    q.append("'");
    return q;
}

// tcp_endpoint() / unix_endpoint() read a C address; false if malformed,
// with the cause recorded for weft_last_error() (invalid(), CAPI-E1).
bool tcp_endpoint(const char* call, const char* address, std::uint16_t port, io::endpoint& out) {
    const std::string_view a(address);
    try {
        out = a.find(':') != std::string_view::npos ? io::endpoint::ipv6(a, port) : io::endpoint::ipv4(a, port);
        return true;
    } catch (const std::system_error&) {
    }
    std::string why = "`address` " + quoted(a);
    if (a.empty())
        why += " is empty; pass a numeric IPv4 (\"127.0.0.1\", \"0.0.0.0\") or IPv6 (\"::1\", \"::\") address";
    else if (a.front() == '[')
        why += " has brackets; pass the IPv6 address without them (\"::1\")";
    else if (const auto colon = a.rfind(':');
             colon != std::string_view::npos && a.find(':') == colon && a.find('.') != std::string_view::npos)
        why += " holds a port; pass the address alone and the port as the `port` argument";
    else if (a.find_first_not_of("0123456789.:abcdefABCDEF") != std::string_view::npos)
        why += " is not a numeric IP address (weft does not look names up here); resolve the name first "
               "with weft_resolve() and pass one of its addresses";
    else
        why += " is not a numeric IPv4 (\"127.0.0.1\") or IPv6 (\"::1\", no brackets) address";
    (void)invalid(call, why);
    return false;
}

bool unix_endpoint(const char* call, const char* path, io::endpoint& out) {
    const std::string_view p(path);
    if (p.empty()) {
        (void)invalid(call, "`path` is empty; pass a file path, or \"@name\" for the abstract namespace");
        return false;
    }
    try {
        out = io::endpoint::unix_path(p);
        return true;
    } catch (const std::system_error&) {
        (void)invalid(call, "`path` " + quoted(p) + " is " + std::to_string(p.size()) +
                                " bytes, longer than a Unix-domain address holds (107); pass a shorter path");
        return false;
    }
}

// backlog_ok() / deadline_ok() check those arguments, recording why not.
bool backlog_ok(const char* call, int backlog) {
    if (backlog >= 0) return true;
    (void)invalid(call, "`backlog` " + std::to_string(backlog) +
                            " is negative; pass the queue length you want, or 0 for the system's (SOMAXCONN)");
    return false;
}

bool deadline_ok(const char* call, const c_deadline& d) {
    if (d.valid) return true;
    (void)invalid(call, "`deadline_ns`", bad_deadline);
    return false;
}

// buffer_ok() checks a (buf, len) pair.
bool buffer_ok(const char* call, const void* buf, std::size_t len) {
    if (!buf && len) {
        (void)invalid(call, "`buf` is NULL but `len` is " + std::to_string(len) +
                                "; pass a buffer of len bytes (or len 0)");
        return false;
    }
    if (too_long(len)) {
        (void)invalid(call, "`len` " + std::to_string(len) +
                                " is above PTRDIFF_MAX (a negative count converted to size_t?); pass the buffer's "
                                "size");
        return false;
    }
    return true;
}

// null_out() records an out-parameter (`name`, in backquotes) passed as
// NULL; it allocates nothing, as weft_last_errno() checks outside io_call().
weft_result null_out(const char* call, std::string_view name) noexcept {
    return invalid(call, name, " is NULL; pass the address of a variable to store the result in");
}

weft_result store(io::stream s, weft_stream* out) {
    std::unique_ptr<strm> o(new strm(std::move(s)));
    out->id = insert(o.get());
    o.release();
    return WEFT_OK;
}

weft_result listen_at(const io::endpoint& at, int backlog, weft_listener* out, int& err) {
    std::error_code ec;
    io::listener l = io::listener::bind(at, ec, backlog == 0 ? SOMAXCONN : backlog);
    if (ec) return io_result(ec, c_deadline(WEFT_NO_DEADLINE), err);
    const std::uint16_t port = l.local_endpoint().port();
    std::unique_ptr<lstn> o(new lstn(std::move(l), port));
    out->id = insert(o.get());
    o.release();
    return WEFT_OK;
}

weft_result connect_to(const io::endpoint& to, const c_deadline& d, weft_stream* out, int& err) {
    std::error_code ec;
    io::stream s = io::stream::connect(to, ec, deadline_of(d));
    if (ec) return io_result(ec, d, err);
    return store(std::move(s), out);
}

// close_result() is close()'s code as a result: a second close is WEFT_OK,
// as for channels.
weft_result close_result(const std::error_code& ec, int& err) noexcept {
    if (ec == std::errc::bad_file_descriptor) return WEFT_OK;
    return io_result(ec, c_deadline(WEFT_NO_DEADLINE), err);
}

// transfer() is weft_stream_read_exact()'s and weft_stream_write_all()'s
// loop: step (a read_some or write_some) until len bytes have moved; a step
// that moves nothing without an error ends it with on_zero (WEFT_EOF for a
// read). The loop is here rather than io::stream's read_exact() /
// write_all() so that `count` survives a cancellation in the middle (the
// unwind stops in io_call()); it is stored in *count_out on every result
// but WEFT_INVALID_ARGUMENT.
template <class Byte, class Step>
weft_result transfer(const char* call, std::uint64_t h, Byte* buf, std::size_t len, std::int64_t deadline_ns,
                     std::size_t* count_out, weft_result on_zero, Step step) noexcept {
    std::size_t count = 0;
    const weft_result r = io_call([&](int& err) {
        const c_deadline d(deadline_ns);
        if (!buffer_ok(call, buf, len) || !deadline_ok(call, d)) return WEFT_INVALID_ARGUMENT;
        return with<strm>(h, [&](strm& s) {
            if (!s.s.is_open()) return WEFT_CLOSED;
            const std::span<Byte> all(buf, len);
            while (count < len) {
                std::error_code ec;
                const std::size_t n = step(s.s, all.subspan(count), ec, deadline_of(d));
                if (ec) return io_result(ec, d, err);
                if (n == 0) return on_zero;
                count += n;
            }
            return WEFT_OK;
        });
    });
    if (count_out && r != WEFT_INVALID_ARGUMENT) *count_out = count;
    return r;
}

// close_handle<T>() / destroy_handle<T>() are weft_stream_close() /
// weft_listener_close() and the two destroys. A destroy closes the socket,
// which ends the waits of the calls under way; their references keep the
// object alive until they return (CAPI-IO1).
template <class T>
weft_result close_handle(std::uint64_t h) noexcept {
    return io_call([&](int& err) { return with<T>(h, [&](T& o) { return close_result(o.socket().close(), err); }); });
}

template <class T>
weft_result destroy_handle(std::uint64_t h) noexcept {
    return io_call([&](int&) {
        return removing<T>(h, [](T& o) {
            (void)o.socket().close();
            return WEFT_OK;
        });
    });
}

// uncatchable() says why signal `sig` cannot be in a weft_signal_set, or null
// if it can (io::signal_set's rules, weft/io/signal.hpp).
const char* uncatchable(int sig) noexcept {
    if (sig < 1 || sig >= NSIG) return "is not a signal number (1 .. NSIG - 1)";
    if (sig == SIGKILL || sig == SIGSTOP) return "cannot be caught";
    if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE)
        return "is a fault, which returns to the faulting instruction: it must not be caught";
    if (sig == 32 || sig == 33) return "is reserved by glibc for its threads";
    return nullptr;
}

}  // namespace
}  // namespace weft::capi

using namespace weft;
using namespace weft::capi;

extern "C" {

weft_result weft_last_errno(int* out) noexcept {
    if (!out) return null_out("weft_last_errno", "`out`");
    *out = *last_errno_slot();
    return WEFT_OK;
}

// ---- listeners ---------------------------------------------------------------

weft_result weft_tcp_listen(const char* address, uint16_t port, int backlog, weft_listener* out) noexcept {
    return io_call([&](int& err) {
        io::endpoint at;
        constexpr const char* call = "weft_tcp_listen";
        if (!address)
            return invalid(call, "`address` is NULL; pass a numeric IP address (\"0.0.0.0\": every IPv4 one)");
        if (!out) return null_out(call, "`out`");
        if (!backlog_ok(call, backlog) || !tcp_endpoint(call, address, port, at)) return WEFT_INVALID_ARGUMENT;
        return listen_at(at, backlog, out, err);
    });
}

weft_result weft_unix_listen(const char* path, int backlog, weft_listener* out) noexcept {
    return io_call([&](int& err) {
        io::endpoint at;
        constexpr const char* call = "weft_unix_listen";
        if (!path) return invalid(call, "`path` is NULL; pass a file path, or \"@name\" for the abstract namespace");
        if (!out) return null_out(call, "`out`");
        if (!backlog_ok(call, backlog) || !unix_endpoint(call, path, at)) return WEFT_INVALID_ARGUMENT;
        return listen_at(at, backlog, out, err);
    });
}

weft_result weft_listener_port(weft_listener h, uint16_t* out) noexcept {
    return io_call([&](int&) { return fetch<lstn>("weft_listener_port", h.id, out, [](lstn& l) { return l.port; }); });
}

weft_result weft_listener_accept(weft_listener h, int64_t deadline_ns, weft_stream* out) noexcept {
    return io_call([&](int& err) {
        const c_deadline d(deadline_ns);
        if (!out) return null_out("weft_listener_accept", "`out`");
        if (!deadline_ok("weft_listener_accept", d)) return WEFT_INVALID_ARGUMENT;
        return with<lstn>(h.id, [&](lstn& l) {
            std::error_code ec;
            io::stream s = l.l.accept(ec, deadline_of(d));
            if (ec) return io_result(ec, d, err);
            return store(std::move(s), out);
        });
    });
}

weft_result weft_listener_close(weft_listener h) noexcept { return close_handle<lstn>(h.id); }

weft_result weft_listener_destroy(weft_listener h) noexcept { return destroy_handle<lstn>(h.id); }

// ---- streams -----------------------------------------------------------------

weft_result weft_tcp_connect(const char* address, uint16_t port, int64_t deadline_ns, weft_stream* out) noexcept {
    return io_call([&](int& err) {
        const c_deadline d(deadline_ns);
        io::endpoint to;
        // Port 0 names no peer (it is "any port" only to a listener).
        constexpr const char* call = "weft_tcp_connect";
        if (!address) return invalid(call, "`address` is NULL; pass the peer's numeric IP address");
        if (!out) return null_out(call, "`out`");
        if (port == 0) return invalid(call, "`port` is 0, which names no peer; pass the port the peer listens on");
        if (!deadline_ok(call, d) || !tcp_endpoint(call, address, port, to)) return WEFT_INVALID_ARGUMENT;
        return connect_to(to, d, out, err);
    });
}

weft_result weft_unix_connect(const char* path, int64_t deadline_ns, weft_stream* out) noexcept {
    return io_call([&](int& err) {
        const c_deadline d(deadline_ns);
        io::endpoint to;
        constexpr const char* call = "weft_unix_connect";
        if (!path) return invalid(call, "`path` is NULL; pass the listener's path (\"@name\": abstract)");
        if (!out) return null_out(call, "`out`");
        if (!deadline_ok(call, d) || !unix_endpoint(call, path, to)) return WEFT_INVALID_ARGUMENT;
        return connect_to(to, d, out, err);
    });
}

weft_result weft_stream_read(weft_stream h, void* buf, size_t len, int64_t deadline_ns, size_t* got) noexcept {
    return io_call([&](int& err) {
        const c_deadline d(deadline_ns);
        constexpr const char* call = "weft_stream_read";
        if (!got) return null_out(call, "`got`");
        if (!buffer_ok(call, buf, len) || !deadline_ok(call, d)) return WEFT_INVALID_ARGUMENT;
        return with<strm>(h.id, [&](strm& s) {
            if (!s.s.is_open()) return WEFT_CLOSED;
            if (len == 0) {
                *got = 0;
                return WEFT_OK;
            }
            std::error_code ec;
            const std::size_t n = s.s.read_some(std::span(static_cast<std::byte*>(buf), len), ec, deadline_of(d));
            if (ec) return io_result(ec, d, err);
            if (n == 0) return WEFT_EOF;
            *got = n;
            return WEFT_OK;
        });
    });
}

weft_result weft_stream_read_exact(weft_stream h, void* buf, size_t len, int64_t deadline_ns, size_t* got) noexcept {
    return transfer(
        "weft_stream_read_exact", h.id, static_cast<std::byte*>(buf), len, deadline_ns, got, WEFT_EOF,
        [](io::stream& s, std::span<std::byte> b, std::error_code& ec, io::clock::time_point d) {
            return s.read_some(b, ec, d);
        });
}

weft_result weft_stream_write_all(weft_stream h, const void* buf, size_t len, int64_t deadline_ns,
                                  size_t* written) noexcept {
    // write_some() moves at least one byte or fails: on_zero is never used.
    return transfer(
        "weft_stream_write_all", h.id, static_cast<const std::byte*>(buf), len, deadline_ns, written,
        WEFT_UNKNOWN_ERROR,
        [](io::stream& s, std::span<const std::byte> b, std::error_code& ec, io::clock::time_point d) {
            return s.write_some(b, ec, d);
        });
}

weft_result weft_stream_shutdown_write(weft_stream h) noexcept {
    return io_call([&](int& err) {
        return with<strm>(h.id, [&](strm& s) {
            return io_result(s.s.shutdown(io::shutdown_kind::write), c_deadline(WEFT_NO_DEADLINE), err);
        });
    });
}

weft_result weft_stream_close(weft_stream h) noexcept { return close_handle<strm>(h.id); }

weft_result weft_stream_destroy(weft_stream h) noexcept { return destroy_handle<strm>(h.id); }

// ---- signals, names -----------------------------------------------------------

weft_result weft_signal_set_create(const int* signals, size_t count, weft_signal_set* out) noexcept {
    constexpr const char* call = "weft_signal_set_create";
    if (!signals) return invalid(call, "`signals` is NULL; pass an array of signal numbers (SIGTERM, SIGINT)");
    if (count == 0) return invalid(call, "`count` is 0; pass how many signals `signals` holds (at least 1)");
    if (!out) return invalid(call, "`out` is NULL; pass the address of a weft_signal_set to store it in");
    for (std::size_t i = 0; i < count; ++i)
        if (const char* why = uncatchable(signals[i]))
            return invalid_with(call, [&] {
                return "`signals[" + std::to_string(i) + "]` " + std::to_string(signals[i]) + " " + why +
                       "; pass signals a program handles, such as SIGTERM, SIGINT or SIGHUP";
            });
    return guarded([&] {
        try {
            std::unique_ptr<sigs> o(new sigs(std::span<const int>(signals, count)));
            out->id = insert(o.get());
            o.release();
            return WEFT_OK;
        } catch (const std::system_error& e) {
            if (e.code() != std::errc::invalid_argument) throw;
            return invalid(call, e.what());  // sigaction() refused one
        }
    });
}

weft_result weft_signal_set_wait(weft_signal_set h, int64_t deadline_ns, int* signo) noexcept {
    constexpr const char* call = "weft_signal_set_wait";
    const c_deadline d(deadline_ns);
    if (!signo) return invalid(call, "`signo` is NULL; pass the address of an int to store the signal in");
    if (!d.valid) return invalid(call, "`deadline_ns`", bad_deadline);
    return with<sigs>(h.id, [&](sigs& s) {
        return guarded([&] {
            std::error_code ec;
            const int sig = s.set.wait(ec, deadline_of(d));
            if (ec == std::errc::timed_out) return WEFT_TIMED_OUT;
            if (ec) return WEFT_SYSTEM_ERROR;
            *signo = sig;
            return WEFT_OK;
        });
    });
}

weft_result weft_signal_set_destroy(weft_signal_set h) noexcept { return forget<sigs>(h.id); }

weft_result weft_resolve(const char* host, const char* service, weft_address* out, size_t capacity,
                         size_t* count) noexcept {
    constexpr const char* call = "weft_resolve";
    return io_call([&](int& err) {
        if (!host || !*host)
            return invalid(call, std::string("`host` is ") + (host ? "empty" : "NULL") +
                                     "; pass the name to look up (\"localhost\", \"example.com\")");
        if (!out && capacity)
            return invalid(call, "`out` is NULL but `capacity` is not 0; pass an array of `capacity` weft_address");
        if (!count) return null_out(call, "`count`");
        std::error_code ec;
        const std::vector<io::endpoint> found = io::resolve(host, service ? service : "", ec);
        if (ec && (ec.category() == std::system_category() || ec.category() == std::generic_category())) {
            err = ec.value();  // getaddrinfo's EAI_SYSTEM
            return WEFT_IO_ERROR;
        }
        if (ec) {
            set_error_text(call, "`host` " + quoted(host) + (service ? " `service` " + quoted(service) : "") + ": " +
                                     ec.message() + "; check the name, or pass a numeric address");
            return WEFT_NOT_FOUND;
        }
        std::size_t n = 0;
        for (const io::endpoint& e : found) {
            if (n == capacity) break;
            weft_address a{};
            const auto* v6 = reinterpret_cast<const sockaddr_in6*>(e.data());
            const auto* v4 = reinterpret_cast<const sockaddr_in*>(e.data());
            const void* addr = e.family() == AF_INET6 ? static_cast<const void*>(&v6->sin6_addr)
                                                      : static_cast<const void*>(&v4->sin_addr);
            if ((e.family() != AF_INET && e.family() != AF_INET6) || !::inet_ntop(e.family(), addr, a.ip, sizeof a.ip))
                continue;
            a.port = e.port();
            out[n++] = a;
        }
        *count = n;
        return WEFT_OK;
    });
}

weft_result weft_stream_fd(weft_stream h, int* out) noexcept {
    return io_call([&](int&) {
        if (!out) return null_out("weft_stream_fd", "`out`");
        return with<strm>(h.id, [&](strm& s) {
            const int fd = s.s.native().native_handle();
            if (fd < 0) return WEFT_CLOSED;
            *out = fd;
            return WEFT_OK;
        });
    });
}

}  // extern "C"
