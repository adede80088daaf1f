// socket.cpp: weft/io/socket.hpp. Every socket is made non-blocking and
// close-on-exec in the same call that creates it (socket(2), accept4(2)),
// so no fork() in another thread can inherit it half set up. Waiting is the
// handle's (edge-triggered: each wait comes after an EAGAIN): accept,
// send_to and recv_from run their syscall in handle::retry_io() (IO-R1 in
// weft/io/handle.hpp). Every syscall on the fd happens inside a
// handle::op, so a close() from another task never lets it reach a reused
// fd number (IO-H1 in handle.cpp).

#include "weft/io/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstring>
#include <thread>
#include <utility>

#include "weft/runtime.hpp"
#include "weft/task.hpp"
#include "reactor.hpp"

namespace weft::io {

namespace {

using detail::errno_code;
using detail::expired;
std::error_code errno_code(int e) noexcept { return {e, std::system_category()}; }

class io_category_impl final : public std::error_category {
public:
    const char* name() const noexcept override { return "weft.io"; }
    std::string message(int v) const override {
        switch (v) {
        case 1: return "end of file";
        case ETIMEDOUT:
            return "the deadline passed before the call could finish (ETIMEDOUT); pass a later deadline, or handle "
                   "std::errc::timed_out";
        case EINVAL:
            return "this socket belongs to another runtime (a task of that runtime waited on it first); use it from "
                   "a task of the runtime that made it (EINVAL)";
        default: return "unknown weft.io error";
        }
    }
    // IO-E1: the codes weft decides compare equal to the errno they stand for.
    std::error_condition default_error_condition(int v) const noexcept override {
        if (v == ETIMEDOUT) return std::errc::timed_out;
        if (v == EINVAL) return std::errc::invalid_argument;
        return {v, *this};
    }
};

class resolve_category final : public std::error_category {
public:
    const char* name() const noexcept override { return "weft.resolve"; }
    std::string message(int v) const override { return ::gai_strerror(v); }
};

const std::error_category& resolve_cat() noexcept {
    static const resolve_category c;
    return c;
}

// adopt() wraps a fresh socket; the handle constructor can only fail in
// fcntl(), which a just-created socket does not, but the error_code forms
// promise not to throw for OS errors, so the fd is closed and ec set.
handle adopt(int fd, std::error_code& ec) noexcept {
    try {
        return handle(fd);
    } catch (const std::system_error& e) {
        ::close(fd);
        ec = e.code();
        return {};
    }
}

// open_socket() is socket(2) with the flags every socket here gets.
handle open_socket(int family, int type, std::error_code& ec) noexcept {
    if (family != AF_INET && family != AF_INET6 && family != AF_UNIX) {
        ec = std::make_error_code(std::errc::address_family_not_supported);
        return {};
    }
    const int fd = ::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ec = errno_code();
        return {};
    }
    return adopt(fd, ec);
}

std::error_code set_int_option(handle& h, int level, int name, int value) noexcept {
    handle::op g(h);
    if (!g) return std::make_error_code(std::errc::bad_file_descriptor);
    if (::setsockopt(h.raw(), level, name, &value, sizeof value) != 0) return errno_code();
    return {};
}

endpoint name_of(int fd, bool peer) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    const int r = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len)
                       : ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    if (r != 0) throw std::system_error(errno_code(), peer ? "weft::io getpeername" : "weft::io getsockname");
    return endpoint(reinterpret_cast<const sockaddr*>(&ss), len);
}

bool parse_port(std::string_view s, std::uint16_t& port) noexcept {
    if (s.empty()) return false;
    unsigned v = 0;
    const auto [p, e] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (e != std::errc() || p != s.data() + s.size() || v > 65535) return false;
    port = static_cast<std::uint16_t>(v);
    return true;
}

// A Unix-domain connect to a listener whose queue is full fails with
// EAGAIN at once instead of going on in the background, and an
// unconnected Unix socket polls as writable, so there is nothing to wait
// for: retry with a growing pause until the deadline.
void backoff(std::chrono::milliseconds d) {
    if (weft::this_task::inside())
        weft::this_task::sleep_for(d);
    else
        std::this_thread::sleep_for(d);
}

}  // namespace

namespace detail {
const std::error_category& io_category() noexcept {
    static const io_category_impl c;
    return c;
}
}  // namespace detail

std::error_code eof() noexcept { return {1, detail::io_category()}; }

// ---- endpoint ----

endpoint::endpoint() noexcept : storage_{}, len_(0) { storage_.ss_family = AF_UNSPEC; }

endpoint::endpoint(const sockaddr* sa, socklen_t len) : endpoint() {
    if (len > sizeof storage_)
        throw std::system_error(std::make_error_code(std::errc::invalid_argument), "weft::io::endpoint");
    std::memcpy(&storage_, sa, len);
    len_ = len;
}

namespace {

// numeric() is the sockaddr of a numeric address of family AF (inet_pton).
template <int AF, class Sockaddr>
endpoint numeric(std::string_view address, std::uint16_t port, const char* what) {
    Sockaddr a{};
    void* addr;
    if constexpr (AF == AF_INET) {
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        addr = &a.sin_addr;
    } else {
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(port);
        addr = &a.sin6_addr;
    }
    char buf[INET6_ADDRSTRLEN];
    if (address.size() >= sizeof buf) throw std::system_error(std::make_error_code(std::errc::invalid_argument), what);
    std::memcpy(buf, address.data(), address.size());
    buf[address.size()] = '\0';
    if (::inet_pton(AF, buf, addr) != 1) throw std::system_error(std::make_error_code(std::errc::invalid_argument), what);
    return endpoint(reinterpret_cast<const sockaddr*>(&a), sizeof a);
}

}  // namespace

endpoint endpoint::ipv4(std::string_view address, std::uint16_t port) {
    return numeric<AF_INET, sockaddr_in>(address, port, "weft::io::endpoint::ipv4");
}

endpoint endpoint::ipv6(std::string_view address, std::uint16_t port) {
    return numeric<AF_INET6, sockaddr_in6>(address, port, "weft::io::endpoint::ipv6");
}

endpoint endpoint::loopback_v4(std::uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return endpoint(reinterpret_cast<const sockaddr*>(&a), sizeof a);
}

endpoint endpoint::loopback_v6(std::uint16_t port) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    a.sin6_addr = in6addr_loopback;
    return endpoint(reinterpret_cast<const sockaddr*>(&a), sizeof a);
}

endpoint endpoint::unix_path(std::string_view path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    const bool abstract = !path.empty() && path.front() == '@';
    // A filesystem path needs its terminating NUL inside sun_path; an
    // abstract name is counted by the length alone.
    if (path.size() + (abstract ? 0 : 1) > sizeof a.sun_path)
        throw std::system_error(std::make_error_code(std::errc::filename_too_long), "weft::io::endpoint::unix_path");
    std::memcpy(a.sun_path, path.data(), path.size());
    if (abstract) a.sun_path[0] = '\0';
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + (abstract ? 0 : 1));
    return endpoint(reinterpret_cast<const sockaddr*>(&a), len);
}

std::optional<endpoint> endpoint::parse(std::string_view text) {
    try {
        if (text.starts_with("unix:")) {
            text.remove_prefix(5);
            if (text.empty()) return std::nullopt;
            return unix_path(text);
        }
        std::uint16_t port = 0;
        if (text.starts_with('[')) {
            const auto close = text.find("]:");
            if (close == std::string_view::npos || !parse_port(text.substr(close + 2), port)) return std::nullopt;
            return ipv6(text.substr(1, close - 1), port);
        }
        const auto colon = text.rfind(':');
        if (colon == std::string_view::npos || !parse_port(text.substr(colon + 1), port)) return std::nullopt;
        return ipv4(text.substr(0, colon), port);
    } catch (const std::system_error&) {
        return std::nullopt;
    }
}

int endpoint::family() const noexcept { return len_ == 0 ? AF_UNSPEC : storage_.ss_family; }

std::uint16_t endpoint::port() const noexcept {
    switch (family()) {
    case AF_INET: return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
    case AF_INET6: return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
    default: return 0;
    }
}

std::string endpoint::to_string() const {
    char buf[INET6_ADDRSTRLEN] = {};
    switch (family()) {
    case AF_INET:
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, buf, sizeof buf);
        return std::string(buf) + ":" + std::to_string(port());
    case AF_INET6:
        ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr, buf, sizeof buf);
        return "[" + std::string(buf) + "]:" + std::to_string(port());
    case AF_UNIX: {
        const auto* u = reinterpret_cast<const sockaddr_un*>(&storage_);
        const std::size_t n = len_ - offsetof(sockaddr_un, sun_path);
        if (n == 0) return "unix:";  // unnamed (an unbound or client socket)
        if (u->sun_path[0] == '\0') return "unix:@" + std::string(u->sun_path + 1, n - 1);
        return "unix:" + std::string(u->sun_path, ::strnlen(u->sun_path, n));
    }
    default: return "unspecified";
    }
}

bool operator==(const endpoint& a, const endpoint& b) noexcept {
    if (a.family() != b.family()) return false;
    switch (a.family()) {
    case AF_INET: {
        const auto* x = reinterpret_cast<const sockaddr_in*>(a.data());
        const auto* y = reinterpret_cast<const sockaddr_in*>(b.data());
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    case AF_INET6: {
        // sin6_flowinfo is per-packet traffic information, not part of
        // the address.
        const auto* x = reinterpret_cast<const sockaddr_in6*>(a.data());
        const auto* y = reinterpret_cast<const sockaddr_in6*>(b.data());
        return x->sin6_port == y->sin6_port && x->sin6_scope_id == y->sin6_scope_id &&
               std::memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
    }
    case AF_UNSPEC: return true;
    default: return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
    }
}

// ---- resolve ----

std::vector<endpoint> resolve(std::string_view host, std::string_view service, std::error_code& ec) {
    ec.clear();
    // getaddrinfo wants NUL-terminated strings; the copies also keep the
    // views' targets out of the blocking thread's hands.
    // The callable holds its own copies (WAITER-V4: never the caller's frame) and
    // hands the error back with the result.
    using found = std::pair<std::vector<endpoint>, std::error_code>;
    found f = weft::blocking([h = std::string(host), s = std::string(service)]() -> found {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        // No AI_ADDRCONFIG: on a host with only a loopback interface it
        // would make "localhost" unresolvable.
        addrinfo* res = nullptr;
        const int r = ::getaddrinfo(h.empty() ? nullptr : h.c_str(), s.empty() ? nullptr : s.c_str(), &hints, &res);
        if (r != 0) return {{}, r == EAI_SYSTEM ? errno_code() : std::error_code(r, resolve_cat())};
        std::vector<endpoint> out;
        try {
            for (const addrinfo* p = res; p; p = p->ai_next)
                if (p->ai_addr && p->ai_addrlen <= sizeof(sockaddr_storage)) out.emplace_back(p->ai_addr, p->ai_addrlen);
        } catch (...) {
            ::freeaddrinfo(res);
            throw;
        }
        ::freeaddrinfo(res);
        return {std::move(out), {}};
    });
    ec = f.second;
    return std::move(f.first);
}

std::vector<endpoint> resolve(std::string_view host, std::string_view service) {
    return detail::or_throw("weft::io::resolve", [&](std::error_code& ec) { return resolve(host, service, ec); });
}

// ---- socket_base ----

endpoint socket_base::local_endpoint() const { return name_of(h_.native_handle(), false); }

// ---- stream ----

stream stream::connect(const endpoint& to, std::error_code& ec, clock::time_point deadline) {
    ec.clear();
    // Checked first so that a deadline already passed times out the same
    // way whether or not the kernel would have connected at once.
    if (expired(deadline)) {
        ec = detail::deadline_passed();
        return {};
    }
    handle h = open_socket(to.family(), SOCK_STREAM, ec);
    if (ec) return {};
    // Not retry_io(): a connect is started once and completed by one wait
    // for writability, then SO_ERROR (a second connect() would only say
    // EALREADY), and its Unix-domain EAGAIN has nothing to wait on.
    {
        handle::op g(h);
        auto pause = std::chrono::milliseconds(1);
        for (;;) {
            if (::connect(h.raw(), to.data(), to.size()) == 0) break;
            const int e = errno;
            if (e == EAGAIN && to.family() == AF_UNIX) {
                if (expired(deadline)) {
                    ec = detail::deadline_passed();
                    return {};
                }
                backoff(pause);
                if (pause < std::chrono::milliseconds(32)) pause *= 2;
                continue;
            }
            // EINTR: the connect goes on in the background, as after
            // EINPROGRESS; calling connect() again would say EALREADY.
            if (e != EINPROGRESS && e != EINTR) {
                ec = errno_code(e);
                return {};
            }
            if ((ec = h.wait_in(interest::writable, deadline))) return {};
            int err = 0;
            socklen_t len = sizeof err;
            if (::getsockopt(h.raw(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
            if (err != 0) {
                ec = errno_code(err);
                return {};
            }
            break;
        }
    }
    return stream(std::move(h));
}

stream stream::connect(const endpoint& to, clock::time_point deadline) {
    return detail::or_throw("weft::io::stream::connect",
                            [&](std::error_code& ec) { return connect(to, ec, deadline); });
}

std::size_t stream::read_some(std::span<std::byte> buf, std::error_code& ec, clock::time_point deadline) {
    return h_.read_some(buf, ec, deadline);
}

std::size_t stream::read_some(std::span<std::byte> buf, clock::time_point deadline) {
    return detail::or_throw("weft::io::stream::read_some",
                            [&](std::error_code& ec) { return h_.read_some(buf, ec, deadline); });
}

std::size_t stream::write_some(std::span<const std::byte> buf, std::error_code& ec, clock::time_point deadline) {
    return h_.write_some(buf, ec, deadline);
}

std::size_t stream::write_some(std::span<const std::byte> buf, clock::time_point deadline) {
    return detail::or_throw("weft::io::stream::write_some",
                            [&](std::error_code& ec) { return h_.write_some(buf, ec, deadline); });
}

std::size_t stream::read_exact(std::span<std::byte> buf, std::error_code& ec, clock::time_point deadline) {
    return detail::read_exact_with(
        buf, ec, [&](std::span<std::byte> b, std::error_code& e) { return h_.read_some(b, e, deadline); });
}

std::size_t stream::read_exact(std::span<std::byte> buf, clock::time_point deadline) {
    return detail::or_throw("weft::io::stream::read_exact",
                            [&](std::error_code& ec) { return read_exact(buf, ec, deadline); });
}

std::size_t stream::write_all(std::span<const std::byte> buf, std::error_code& ec, clock::time_point deadline) {
    ec.clear();
    std::size_t put = 0;
    while (put < buf.size()) {
        const std::size_t n = h_.write_some(buf.subspan(put), ec, deadline);
        if (ec) return put;
        put += n;
    }
    return put;
}

std::size_t stream::write_all(std::span<const std::byte> buf, clock::time_point deadline) {
    return detail::or_throw("weft::io::stream::write_all",
                            [&](std::error_code& ec) { return write_all(buf, ec, deadline); });
}

std::error_code stream::shutdown(shutdown_kind how) noexcept {
    handle::op g(h_);
    if (!g) return std::make_error_code(std::errc::bad_file_descriptor);
    if (::shutdown(h_.raw(), static_cast<int>(how)) != 0) return errno_code();
    return {};
}

std::error_code stream::set_no_delay(bool on) noexcept { return set_int_option(h_, IPPROTO_TCP, TCP_NODELAY, on); }

std::error_code stream::set_keep_alive(bool on) noexcept { return set_int_option(h_, SOL_SOCKET, SO_KEEPALIVE, on); }

endpoint stream::remote_endpoint() const { return name_of(h_.native_handle(), true); }

// ---- listener ----

listener listener::bind(const endpoint& at, std::error_code& ec, int backlog) {
    ec.clear();
    listener l;
    l.h_ = open_socket(at.family(), SOCK_STREAM, ec);
    if (ec) return {};
    // SO_REUSEADDR lets a restarted server bind its port while connections
    // of the previous one are still in TIME_WAIT.
    if (at.family() != AF_UNIX && (ec = set_int_option(l.h_, SOL_SOCKET, SO_REUSEADDR, 1))) return {};
    if (::bind(l.h_.native_handle(), at.data(), at.size()) != 0 || ::listen(l.h_.native_handle(), backlog) != 0) {
        ec = errno_code();
        return {};
    }
    return l;
}

listener listener::bind(const endpoint& at, int backlog) {
    return detail::or_throw("weft::io::listener::bind", [&](std::error_code& ec) { return bind(at, ec, backlog); });
}

stream listener::accept(std::error_code& ec, clock::time_point deadline, endpoint* peer) {
    sockaddr_storage ss{};
    socklen_t len = 0;
    const int fd = h_.retry_io(interest::readable, deadline, ec, [&ss, &len](int l) {
        // ECONNABORTED: that connection was reset while queued; the next
        // one may be fine. EMFILE / ENFILE leave the connection queued, and
        // the next accept() tries accept4() before waiting, so the listener
        // stays usable once fds are free.
        int conn;
        do {
            ss = {};
            len = sizeof ss;
            conn = ::accept4(l, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        } while (conn < 0 && errno == ECONNABORTED);
        return conn;
    });
    if (fd < 0) return {};
    handle c = adopt(fd, ec);
    if (ec) return {};
    if (peer) *peer = endpoint(reinterpret_cast<const sockaddr*>(&ss), len);
    return stream(std::move(c));
}

stream listener::accept(clock::time_point deadline, endpoint* peer) {
    return detail::or_throw("weft::io::listener::accept",
                            [&](std::error_code& ec) { return accept(ec, deadline, peer); });
}

// ---- limited_listener ----
//
// A limited_listener counts the connections it has accepted and not yet
// seen closed, and turns away what it will not serve:
//
//   IO-L1  live counts the connection_slots held: accept() adds one before
//          it returns a limited_stream carrying the slot, and the slot's
//          release() (limited_stream::close(), its destructor, a move-assign
//          over it) takes it off, once, after the stream's close() (which
//          closes the fd then, or when the last operation in flight on it
//          leaves: IO-H1). So live is never below the accepted connections
//          whose stream is open.
//   IO-L2  A connection accepted while live >= max_connections is never
//          returned nor counted: it gets reject_message by one send(2) with
//          MSG_DONTWAIT (never waits on a slow peer: the accept loop goes on
//          at once) and is closed; the accept goes on with the next one.
//   IO-L3  The reserve is one fd of /dev/null that the listener holds only
//          to spend it. On EMFILE / ENFILE with the reserve held, accept()
//          closes it, makes one accept4(2) that does not wait
//          (into the fd that just freed), turns that connection away as in
//          IO-L2 and opens the reserve again, all before it looks at the
//          listener again; each round takes one connection off the backlog,
//          so it ends. accept4(2) reports EMFILE before it looks at the
//          queue, so out of fds every accept fails, queued connection or
//          not: when the freed fd's accept finds none (EAGAIN), accept()
//          waits for the listener's readiness (after that EAGAIN, IO-R1's
//          order) before the next round, instead of going round. The
//          reserve is taken and put back by atomic exchange, so two tasks
//          accepting at once never close one fd twice.
//   IO-L4  An EMFILE / ENFILE that the reserve could not answer (none held,
//          or the freed fd was taken by another thread first) pauses the
//          accept: min_backoff, doubled after each further pause of that
//          call up to max_backoff, cut at the deadline (then timed_out).
//          The pause is a task's sleep (a thread's outside a task), so the
//          worker runs other tasks meanwhile, and an accept out of fds makes
//          at most one accept4(2) per pause.

namespace detail {

struct listen_state {
    std::atomic<std::size_t> live{0};  // IO-L1
    std::atomic<std::uint64_t> accepted{0}, turned_away{0}, out_of_fds{0}, backoffs{0};
};

void connection_slot::release() noexcept {
    if (s_) {
        s_->live.fetch_sub(1, std::memory_order_acq_rel);  // IO-L1
        s_.reset();
    }
}

}  // namespace detail

namespace {

// open_reserve(): the reserve fd (IO-L3), -1 if none can be had.
int open_reserve() noexcept { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

// turn_away(fd, msg): IO-L2's send without waiting, then the close. Bytes
// the peer already sent are read off first (without waiting, bounded), so
// that the close does not reset the connection over them and drop the
// message; what arrives later is the peer's risk.
void turn_away(int fd, const std::string& msg) noexcept {
    if (fd < 0) return;
    if (!msg.empty()) (void)::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)::shutdown(fd, SHUT_WR);
    char sink[1024];
    for (int i = 0; i < 64 && ::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
    }
    ::close(fd);
}

// accept_now(h): one accept4(2) on the listener that does not wait (IO-L3);
// the fd, or -1 with errno.
int accept_now(handle& h) noexcept {
    handle::op g(h);
    if (!g) {
        errno = EBADF;
        return -1;
    }
    int fd;
    do {
        fd = ::accept4(h.raw(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    } while (fd < 0 && (errno == ECONNABORTED || errno == EINTR));
    return fd;
}

// take_place(st, max): one more live connection (IO-L1), unless max
// (not 0) are live already (IO-L2). One compare-exchange: tasks accepting
// at once never take more than max places between them.
bool take_place(detail::listen_state& st, std::size_t max) noexcept {
    std::size_t n = st.live.load(std::memory_order_acquire);
    do {
        if (max != 0 && n >= max) return false;
    } while (!st.live.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel, std::memory_order_acquire));
    return true;
}

// out_of_fds(ec): accept's EMFILE or ENFILE. Compared by category address
// and value, not through the category's virtual equivalent(): this runs
// while the process is out of fds, where UBSan's vptr check (its memory
// probe needs a pipe) reported every virtual call on a category as one on
// an invalid object.
bool out_of_fds(const std::error_code& ec) noexcept {
    return &ec.category() == &std::system_category() && (ec.value() == EMFILE || ec.value() == ENFILE);
}

}  // namespace

limited_listener::limited_listener(listener l, listen_limits limits)
    : l_(std::move(l)), lim_(std::move(limits)), st_(std::make_shared<detail::listen_state>()) {
    if (lim_.reserve_fd) reserve_.store(open_reserve(), std::memory_order_relaxed);
}

limited_listener::limited_listener(limited_listener&& o) noexcept
    : l_(std::move(o.l_)),
      lim_(std::move(o.lim_)),
      st_(std::move(o.st_)),
      reserve_(o.reserve_.exchange(-1, std::memory_order_relaxed)) {}

limited_listener& limited_listener::operator=(limited_listener&& o) noexcept {
    if (this != &o) {
        (void)close();
        l_ = std::move(o.l_);
        lim_ = std::move(o.lim_);
        st_ = std::move(o.st_);
        reserve_.store(o.reserve_.exchange(-1, std::memory_order_relaxed), std::memory_order_relaxed);
    }
    return *this;
}

limited_listener::~limited_listener() { (void)close(); }

std::error_code limited_listener::close() noexcept {
    if (const int r = reserve_.exchange(-1, std::memory_order_acq_rel); r >= 0) ::close(r);
    return l_.close();
}

limited_listener limited_listener::bind(const endpoint& at, listen_limits limits, std::error_code& ec, int backlog) {
    listener l = listener::bind(at, ec, backlog);
    if (ec) return {};
    return limited_listener(std::move(l), std::move(limits));
}

limited_listener limited_listener::bind(const endpoint& at, listen_limits limits, int backlog) {
    return detail::or_throw("weft::io::limited_listener::bind",
                            [&](std::error_code& ec) { return bind(at, std::move(limits), ec, backlog); });
}

limited_stream limited_listener::accept(std::error_code& ec, clock::time_point deadline, endpoint* peer) {
    ec.clear();
    if (!st_) {
        ec = std::make_error_code(std::errc::bad_file_descriptor);
        return {};
    }
    detail::listen_state& st = *st_;
    auto pause = std::max(lim_.min_backoff, std::chrono::milliseconds(1));
    for (;;) {
        if (lim_.reserve_fd && reserve_.load(std::memory_order_relaxed) < 0) {  // IO-L3: a missing one comes back
            const int r = open_reserve();
            int none = -1;
            if (r >= 0 && !reserve_.compare_exchange_strong(none, r, std::memory_order_acq_rel)) ::close(r);
        }
        stream c = l_.accept(ec, deadline, peer);
        if (!ec) {
            if (!take_place(st, lim_.max_connections)) {
                // Counted first: a peer that sees its end sees it counted.
                st.turned_away.fetch_add(1, std::memory_order_relaxed);
                turn_away(c.native().release(), lim_.reject_message);  // IO-L2
                continue;
            }
            st.accepted.fetch_add(1, std::memory_order_relaxed);
            return limited_stream(std::move(c), detail::connection_slot(st_));
        }
        if (!out_of_fds(ec)) return {};
        st.out_of_fds.fetch_add(1, std::memory_order_relaxed);
        if (const int r = reserve_.exchange(-1, std::memory_order_acq_rel); r >= 0) {  // IO-L3
            ::close(r);
            const int fd = accept_now(l_.native());
            const int e = errno;
            if (fd >= 0) st.turned_away.fetch_add(1, std::memory_order_relaxed);
            turn_away(fd, lim_.reject_message);
            const int again = open_reserve();
            int none = -1;
            if (again >= 0 && !reserve_.compare_exchange_strong(none, again, std::memory_order_acq_rel))
                ::close(again);
            if (fd >= 0) {
                ec.clear();
                continue;
            }
            if (e == EAGAIN || e == EWOULDBLOCK) {
                // Nothing queued (accept4 reports EMFILE before it looks at
                // the queue): wait for the next connection, after this EAGAIN.
                if ((ec = l_.native().wait(interest::readable, deadline))) return {};
                continue;
            }
        }
        // IO-L4: nothing to turn it away with; pause, within the deadline.
        if (expired(deadline)) {
            ec = std::make_error_code(std::errc::timed_out);
            return {};
        }
        auto d = pause;
        if (deadline != no_deadline)
            d = std::min(d, std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now()));
        st.backoffs.fetch_add(1, std::memory_order_relaxed);
        if (d.count() > 0) backoff(d);
        pause = std::min(pause * 2, std::max(lim_.max_backoff, pause));
        ec.clear();
    }
}

limited_stream limited_listener::accept(clock::time_point deadline, endpoint* peer) {
    return detail::or_throw("weft::io::limited_listener::accept",
                            [&](std::error_code& ec) { return accept(ec, deadline, peer); });
}

limited_listener::counts limited_listener::stats() const noexcept {
    if (!st_) return {};
    return {st_->live.load(std::memory_order_acquire), st_->accepted.load(std::memory_order_relaxed),
            st_->turned_away.load(std::memory_order_relaxed), st_->out_of_fds.load(std::memory_order_relaxed),
            st_->backoffs.load(std::memory_order_relaxed)};
}

// ---- udp_socket ----

udp_socket udp_socket::bind(const endpoint& at, std::error_code& ec) {
    ec.clear();
    if (at.family() != AF_INET && at.family() != AF_INET6) {
        ec = std::make_error_code(std::errc::address_family_not_supported);
        return {};
    }
    udp_socket u;
    u.h_ = open_socket(at.family(), SOCK_DGRAM, ec);
    if (ec) return {};
    if (::bind(u.h_.native_handle(), at.data(), at.size()) != 0) {
        ec = errno_code();
        return {};
    }
    return u;
}

udp_socket udp_socket::bind(const endpoint& at) {
    return detail::or_throw("weft::io::udp_socket::bind", [&](std::error_code& ec) { return bind(at, ec); });
}

std::size_t udp_socket::send_to(std::span<const std::byte> buf, const endpoint& to, std::error_code& ec,
                                clock::time_point deadline) {
    const ssize_t n = h_.retry_io(interest::writable, deadline, ec, [buf, &to](int fd) {
        return ::sendto(fd, buf.data(), buf.size(), MSG_NOSIGNAL, to.data(), to.size());
    });
    return n < 0 ? 0 : static_cast<std::size_t>(n);
}

std::size_t udp_socket::send_to(std::span<const std::byte> buf, const endpoint& to, clock::time_point deadline) {
    return detail::or_throw("weft::io::udp_socket::send_to",
                            [&](std::error_code& ec) { return send_to(buf, to, ec, deadline); });
}

std::size_t udp_socket::recv_from(std::span<std::byte> buf, endpoint& from, std::error_code& ec,
                                  clock::time_point deadline) {
    sockaddr_storage ss{};
    socklen_t len = 0;
    const ssize_t n = h_.retry_io(interest::readable, deadline, ec, [buf, &ss, &len](int fd) {
        ss = {};
        len = sizeof ss;
        return ::recvfrom(fd, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&ss), &len);
    });
    if (n < 0) return 0;
    from = endpoint(reinterpret_cast<const sockaddr*>(&ss), len);
    return static_cast<std::size_t>(n);
}

std::size_t udp_socket::recv_from(std::span<std::byte> buf, endpoint& from, clock::time_point deadline) {
    return detail::or_throw("weft::io::udp_socket::recv_from",
                            [&](std::error_code& ec) { return recv_from(buf, from, ec, deadline); });
}

}  // namespace weft::io
