// weft_hook.cpp: libweft_hook.so, the opt-in interposers (hook/README.md).
// Linked or preloaded, it defines read, write, recv, send, recvfrom, sendto,
// readv, writev, connect, accept,
// accept4, poll, select, sleep, usleep, nanosleep, close and fcntl (plus socket,
// socketpair, pipe and pipe2, which only forget stale table entries), and
// calls the real ones found with dlsym(RTLD_NEXT). Without a registered
// bridge (weft_hook.h) every one of them calls straight through.
//
// The approach is libco's: a socket or pipe that the user opened blocking
// is switched to O_NONBLOCK underneath the first time a task uses it, the
// table remembers that the user wanted it blocking, and a call that reports
// EAGAIN parks the task (the bridge's io::handle wait, deadline from
// SO_RCVTIMEO / SO_SNDTIMEO) and is retried. Outside tasks such an fd is
// still blocking as far as its user can tell: EAGAIN there waits in poll(2).
//
// Nothing here catches exceptions: a task canceled while parked in a hooked
// call unwinds (weft::forced_unwind) through these frames.

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <vector>
#include <climits>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "weft_hook.h"

#define WEFT_HOOK_EXPORT __attribute__((visibility("default")))

namespace {

// ---- the real functions ----------------------------------------------------

template <class F>
F next(const char* name) noexcept {
    return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

struct real_fns {
    ssize_t (*read)(int, void*, size_t);
    ssize_t (*write)(int, const void*, size_t);
    ssize_t (*recv)(int, void*, size_t, int);
    ssize_t (*send)(int, const void*, size_t, int);
    ssize_t (*recvfrom)(int, void*, size_t, int, sockaddr*, socklen_t*);
    ssize_t (*sendto)(int, const void*, size_t, int, const sockaddr*, socklen_t);
    ssize_t (*readv)(int, const iovec*, int);
    ssize_t (*writev)(int, const iovec*, int);
    int (*connect)(int, const sockaddr*, socklen_t);
    int (*accept)(int, sockaddr*, socklen_t*);
    int (*accept4)(int, sockaddr*, socklen_t*, int);
    int (*poll)(pollfd*, nfds_t, int);
    int (*select)(int, fd_set*, fd_set*, fd_set*, timeval*);
    unsigned (*sleep)(unsigned);
    int (*usleep)(useconds_t);
    int (*nanosleep)(const timespec*, timespec*);
    int (*close)(int);
    int (*fcntl)(int, int, ...);
    int (*fcntl64)(int, int, ...);
    int (*socket)(int, int, int);
    int (*socketpair)(int, int, int, int*);
    int (*pipe)(int*);
    int (*pipe2)(int*, int);
};

real_fns load() noexcept {
    real_fns r{};
    r.read = next<decltype(r.read)>("read");
    r.write = next<decltype(r.write)>("write");
    r.recv = next<decltype(r.recv)>("recv");
    r.send = next<decltype(r.send)>("send");
    r.recvfrom = next<decltype(r.recvfrom)>("recvfrom");
    r.sendto = next<decltype(r.sendto)>("sendto");
    r.readv = next<decltype(r.readv)>("readv");
    r.writev = next<decltype(r.writev)>("writev");
    r.connect = next<decltype(r.connect)>("connect");
    r.accept = next<decltype(r.accept)>("accept");
    r.accept4 = next<decltype(r.accept4)>("accept4");
    r.poll = next<decltype(r.poll)>("poll");
    r.select = next<decltype(r.select)>("select");
    r.sleep = next<decltype(r.sleep)>("sleep");
    r.usleep = next<decltype(r.usleep)>("usleep");
    r.nanosleep = next<decltype(r.nanosleep)>("nanosleep");
    r.close = next<decltype(r.close)>("close");
    r.fcntl = next<decltype(r.fcntl)>("fcntl");
    r.fcntl64 = next<decltype(r.fcntl64)>("fcntl64");
    if (!r.fcntl64) r.fcntl64 = r.fcntl;
    r.socket = next<decltype(r.socket)>("socket");
    r.socketpair = next<decltype(r.socketpair)>("socketpair");
    r.pipe = next<decltype(r.pipe)>("pipe");
    r.pipe2 = next<decltype(r.pipe2)>("pipe2");
    return r;
}

// real() is resolved on first use (a hook may run before constructors do);
// dlsym is idempotent, so two threads racing here store the same values.
const real_fns& real() noexcept {
    static const real_fns r = load();
    return r;
}

// ---- errno ---------------------------------------------------------------

// err() is errno of the thread running now. glibc declares
// __errno_location() const, so the compiler may compute errno's address
// once and reuse it after a hooked call has suspended the task, which may
// then run on another worker (docs/runtime.md, "thread-locals"). A call
// through a volatile pointer is made afresh every time.
int* (*volatile errno_location)() noexcept = &::__errno_location;
int& err() noexcept { return *errno_location(); }

// ---- the bridge ------------------------------------------------------------

std::atomic<const weft_hook_ops*> bridge{nullptr};
thread_local int internal_depth = 0;

void internal(int delta) { internal_depth += delta; }
const weft_hook_host host = {internal};

// ---- the fd table ----------------------------------------------------------

// kind is what the table knows of an fd used from a task:
//   passthrough  not a socket or pipe (regular files never wait for
//                readiness; ttys and others are left alone);
//   blocking     a socket/pipe its user opened blocking: O_NONBLOCK is set
//                underneath and hooked calls wait for it;
//   nonblocking  a socket/pipe its user made non-blocking: calls pass
//                through (EAGAIN reaches the user), poll() may still park.
enum class kind : unsigned char { unknown, passthrough, blocking, nonblocking };

// One mutex for the table: every hooked call from a task on an fd takes it
// once for a hash lookup (tens of ns uncontended; it is a point of
// contention between workers under heavy IO, the price of a per-process
// table; libco's per-thread array avoids it but weft tasks migrate).
std::mutex table_mu;
std::unordered_map<int, kind>& table() {
    static auto* t = new std::unordered_map<int, kind>;  // never destroyed: hooks run during exit
    return *t;
}

kind lookup(int fd) {
    std::lock_guard g(table_mu);
    auto it = table().find(fd);
    return it == table().end() ? kind::unknown : it->second;
}

void erase(int fd) {
    std::lock_guard g(table_mu);
    table().erase(fd);
}

// classify() finds out (once) what fd is, under the table's lock so that
// two tasks meeting a new fd at once agree. Keeps errno.
kind classify(int fd) {
    std::lock_guard g(table_mu);
    auto it = table().find(fd);
    if (it != table().end()) return it->second;
    const int saved = err();
    struct stat st {};
    if (::fstat(fd, &st) != 0) {  // a bad fd: let the real call report it
        err() = saved;
        return kind::passthrough;
    }
    kind k = kind::passthrough;
    if (S_ISSOCK(st.st_mode) || S_ISFIFO(st.st_mode)) {
        const int fl = real().fcntl(fd, F_GETFL);
        if (fl >= 0 && (fl & O_NONBLOCK))
            k = kind::nonblocking;
        else if (fl >= 0 && real().fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0)
            k = kind::blocking;
    }
    table()[fd] = k;
    err() = saved;
    return k;
}

// ---- waiting ---------------------------------------------------------------

long long now_ns() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

// timeout_deadline() is now + SO_RCVTIMEO / SO_SNDTIMEO (opt), or -1 when
// unset or fd is not a socket.
long long timeout_deadline(int fd, int opt) noexcept {
    const int saved = err();
    timeval tv{};
    socklen_t len = sizeof tv;
    long long d = -1;
    if (::getsockopt(fd, SOL_SOCKET, opt, &tv, &len) == 0 && (tv.tv_sec > 0 || tv.tv_usec > 0))
        d = now_ns() + static_cast<long long>(tv.tv_sec) * 1'000'000'000LL + static_cast<long long>(tv.tv_usec) * 1000;
    err() = saved;
    return d;
}

// task_wait() parks the task; 0 or an errno value (ETIMEDOUT, EBADF).
int task_wait(const weft_hook_ops* ops, int fd, short ev, long long deadline) {
    const int e = ops->wait(fd, ev, deadline);
    if (e != EINVAL) return e;
    // The fd is watched by another runtime's reactor: poll it every 1 ms.
    if (deadline >= 0 && now_ns() >= deadline) return ETIMEDOUT;
    ops->sleep_ns(1'000'000);
    return 0;
}

// thread_wait() is the same outside tasks, in poll(2); EINTR is returned
// (a blocking call interrupted by a signal reports it too).
int thread_wait(int fd, short ev, long long deadline) {
    pollfd p{fd, ev, 0};
    int ms = -1;
    if (deadline >= 0) {
        const long long left = deadline - now_ns();
        if (left <= 0) return ETIMEDOUT;
        ms = static_cast<int>((left + 999'999) / 1'000'000);
    }
    const int r = real().poll(&p, 1, ms);
    if (r > 0) return 0;
    if (r == 0) return ETIMEDOUT;
    return err();
}

// active() is the bridge unless the caller is the bridge itself.
const weft_hook_ops* active() noexcept {
    if (internal_depth != 0) return nullptr;
    return bridge.load(std::memory_order_acquire);
}

// blocking_io() runs op() (one read/recv/accept...) with blocking
// semantics on an fd its user opened blocking: on EAGAIN wait and retry.
// timeo_opt: SO_RCVTIMEO or SO_SNDTIMEO; its expiry reports EAGAIN, as the
// kernel does.
template <class Op>
auto blocking_io(int fd, short ev, int timeo_opt, Op op) -> decltype(op()) {
    const weft_hook_ops* ops = active();
    if (!ops) return op();
    const bool in_task = ops->inside() != 0;
    if (in_task && classify(fd) != kind::blocking) return op();
    const int saved = err();
    long long deadline = -2;
    for (;;) {
        const auto n = op();
        if (n >= 0) {
            err() = saved;
            return n;
        }
        if (err() != EAGAIN && err() != EWOULDBLOCK) return n;
        // Outside tasks the fast path above took no lock; only an EAGAIN
        // that the user cannot have asked for looks the fd up.
        if (!in_task && lookup(fd) != kind::blocking) return n;
        if (deadline == -2) deadline = timeout_deadline(fd, timeo_opt);
        const int e = in_task ? task_wait(ops, fd, ev, deadline) : thread_wait(fd, ev, deadline);
        if (e == ETIMEDOUT) {
            err() = EAGAIN;
            return -1;
        }
        if (e != 0) {
            err() = e;
            return -1;
        }
    }
}

// blocking_write() is blocking_io() for output: a blocking write returns
// only when everything is written, or with the partial count when an error
// or the timeout stops it after some progress.
template <class Op>
ssize_t blocking_write(int fd, size_t n, Op op) {
    const weft_hook_ops* ops = active();
    if (!ops) return op(0, n);
    const bool in_task = ops->inside() != 0;
    if (in_task && classify(fd) != kind::blocking) return op(0, n);
    const int saved = err();
    long long deadline = -2;
    size_t done = 0;
    for (;;) {
        const ssize_t r = op(done, n - done);
        if (r >= 0) {
            done += static_cast<size_t>(r);
            if (done >= n) {
                err() = saved;
                return static_cast<ssize_t>(done);
            }
            continue;
        }
        int e = err();
        if (e == EAGAIN || e == EWOULDBLOCK) {
            if (!in_task && lookup(fd) != kind::blocking) return done ? static_cast<ssize_t>(done) : -1;
            if (deadline == -2) deadline = timeout_deadline(fd, SO_SNDTIMEO);
            e = in_task ? task_wait(ops, fd, POLLOUT, deadline) : thread_wait(fd, POLLOUT, deadline);
            if (e == 0) continue;
            if (e == ETIMEDOUT) e = EAGAIN;
        }
        if (done) {
            err() = saved;
            return static_cast<ssize_t>(done);
        }
        err() = e;
        return -1;
    }
}

int hooked_fcntl(int (*real_fn)(int, int, ...), int fd, int cmd, void* arg) {
    const weft_hook_ops* ops = active();
    if (!ops || (cmd != F_GETFL && cmd != F_SETFL)) return real_fn(fd, cmd, arg);
    if (cmd == F_GETFL) {
        const int r = real_fn(fd, cmd);
        if (r >= 0 && lookup(fd) == kind::blocking) return r & ~O_NONBLOCK;
        return r;
    }
    // F_SETFL: record the user's wish; a socket/pipe the table manages stays
    // non-blocking underneath.
    const int fl = static_cast<int>(reinterpret_cast<intptr_t>(arg));
    std::lock_guard g(table_mu);
    auto it = table().find(fd);
    if (it == table().end() || it->second == kind::passthrough) return real_fn(fd, cmd, fl);
    const int r = real_fn(fd, cmd, fl | O_NONBLOCK);
    if (r == 0) it->second = (fl & O_NONBLOCK) ? kind::nonblocking : kind::blocking;
    return r;
}

// forget_new() drops what the table and the bridge remember of a number
// that a new fd now has (its old fd was closed behind the hook's back, by
// fclose() for instance, whose close is internal to libc).
void forget_new(int fd) {
    if (fd < 0) return;
    if (const weft_hook_ops* ops = bridge.load(std::memory_order_acquire)) {
        erase(fd);
        ops->forget(fd);
    }
}

}  // namespace

extern "C" {

WEFT_HOOK_EXPORT int weft_hook_bridged(void) { return bridge.load(std::memory_order_acquire) != nullptr ? 1 : 0; }

WEFT_HOOK_EXPORT const weft_hook_host* weft_hook_register(const weft_hook_ops* ops) {
    if (ops && ops->version == WEFT_HOOK_ABI_VERSION) {
        const weft_hook_ops* expected = nullptr;
        bridge.compare_exchange_strong(expected, ops, std::memory_order_acq_rel);
    }
    return &host;
}

WEFT_HOOK_EXPORT ssize_t read(int fd, void* buf, size_t n) {
    return blocking_io(fd, POLLIN, SO_RCVTIMEO, [&] { return real().read(fd, buf, n); });
}

WEFT_HOOK_EXPORT ssize_t recv(int fd, void* buf, size_t n, int flags) {
    if (flags & MSG_DONTWAIT) return real().recv(fd, buf, n, flags);
    if (!(flags & MSG_WAITALL))
        return blocking_io(fd, POLLIN, SO_RCVTIMEO, [&] { return real().recv(fd, buf, n, flags); });
    // MSG_WAITALL on a socket that is non-blocking underneath returns what
    // is there; the blocking call waits for all n bytes (or end of file, an
    // error, the timeout: then the count so far, if any).
    char* p = static_cast<char*>(buf);
    size_t got = 0;
    while (got < n) {
        const ssize_t r = blocking_io(fd, POLLIN, SO_RCVTIMEO, [&] { return real().recv(fd, p + got, n - got, flags); });
        if (r == 0) break;
        if (r < 0) {
            if (got == 0) return -1;
            break;
        }
        got += static_cast<size_t>(r);
    }
    return static_cast<ssize_t>(got);
}

WEFT_HOOK_EXPORT ssize_t write(int fd, const void* buf, size_t n) {
    const char* p = static_cast<const char*>(buf);
    return blocking_write(fd, n, [&](size_t off, size_t len) { return real().write(fd, p + off, len); });
}

WEFT_HOOK_EXPORT ssize_t send(int fd, const void* buf, size_t n, int flags) {
    if (flags & MSG_DONTWAIT) return real().send(fd, buf, n, flags);
    const char* p = static_cast<const char*>(buf);
    return blocking_write(fd, n, [&](size_t off, size_t len) { return real().send(fd, p + off, len, flags); });
}

WEFT_HOOK_EXPORT ssize_t recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* from, socklen_t* len) {
    if (flags & MSG_DONTWAIT) return real().recvfrom(fd, buf, n, flags, from, len);
    return blocking_io(fd, POLLIN, SO_RCVTIMEO, [&] { return real().recvfrom(fd, buf, n, flags, from, len); });
}

WEFT_HOOK_EXPORT ssize_t sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* to, socklen_t len) {
    if (flags & MSG_DONTWAIT) return real().sendto(fd, buf, n, flags, to, len);
    // A datagram goes whole or not at all: wait for room, send once. On a
    // connected stream socket (no address) it is send(): all of it.
    if (to) return blocking_io(fd, POLLOUT, SO_SNDTIMEO, [&] { return real().sendto(fd, buf, n, flags, to, len); });
    const char* p = static_cast<const char*>(buf);
    return blocking_write(fd, n, [&](size_t off, size_t k) { return real().sendto(fd, p + off, k, flags, nullptr, 0); });
}

WEFT_HOOK_EXPORT ssize_t readv(int fd, const iovec* iov, int count) {
    return blocking_io(fd, POLLIN, SO_RCVTIMEO, [&] { return real().readv(fd, iov, count); });
}

WEFT_HOOK_EXPORT ssize_t writev(int fd, const iovec* iov, int count) {
    if (count <= 0 || count > IOV_MAX) return real().writev(fd, iov, count);  // the kernel's EINVAL
    size_t total = 0;
    for (int i = 0; i < count; ++i) total += iov[i].iov_len;
    // A blocking writev writes everything, as write() does. After a partial
    // write the rest goes on from `off`: the rest of a segment cut in the
    // middle with write(), whole segments with writev() of the tail of the
    // caller's own vector (no copy).
    return blocking_write(fd, total, [&](size_t off, size_t) -> ssize_t {
        int i = 0;
        while (i < count && off >= iov[i].iov_len) off -= iov[i++].iov_len;
        if (off == 0) return real().writev(fd, iov + i, count - i);
        return real().write(fd, static_cast<const char*>(iov[i].iov_base) + off, iov[i].iov_len - off);
    });
}

WEFT_HOOK_EXPORT int accept(int fd, sockaddr* addr, socklen_t* len) {
    const int r = blocking_io(fd, POLLIN, SO_RCVTIMEO, [&] { return real().accept(fd, addr, len); });
    forget_new(r);
    return r;
}

WEFT_HOOK_EXPORT int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
    const int r = blocking_io(fd, POLLIN, SO_RCVTIMEO, [&] { return real().accept4(fd, addr, len, flags); });
    forget_new(r);
    return r;
}

WEFT_HOOK_EXPORT int connect(int fd, const sockaddr* addr, socklen_t len) {
    const weft_hook_ops* ops = active();
    if (!ops || !ops->inside() || classify(fd) != kind::blocking) {
        const int r = real().connect(fd, addr, len);
        // Outside tasks a managed fd is non-blocking underneath: finish the
        // connect in poll(2) as the blocking call would have.
        if (r == 0 || err() != EINPROGRESS || !ops || lookup(fd) != kind::blocking) return r;
    } else {
        const int r = real().connect(fd, addr, len);
        if (r == 0 || err() != EINPROGRESS) return r;
    }
    const int saved = err();
    const long long deadline = timeout_deadline(fd, SO_SNDTIMEO);
    for (;;) {
        const int e = ops->inside() ? task_wait(ops, fd, POLLOUT, deadline) : thread_wait(fd, POLLOUT, deadline);
        if (e == ETIMEDOUT) {
            err() = EINPROGRESS;  // what a blocking connect reports when SO_SNDTIMEO expires
            return -1;
        }
        if (e != 0) {
            err() = e;
            return -1;
        }
        pollfd p{fd, POLLOUT, 0};
        if (real().poll(&p, 1, 0) == 0) continue;  // not finished yet
        int so_error = 0;
        socklen_t el = sizeof so_error;
        if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &el) != 0) return -1;
        if (so_error != 0) {
            err() = so_error;
            return -1;
        }
        err() = saved;
        return 0;
    }
}

// poll(): one fd waiting for input or for output parks on it; anything else
// (several fds, both directions) polls every millisecond, the task asleep
// between polls, until the timeout. poll(NULL, 0, ms) is a task sleep.
WEFT_HOOK_EXPORT int poll(pollfd* fds, nfds_t nfds, int timeout) {
    const weft_hook_ops* ops = active();
    if (!ops || timeout == 0 || !ops->inside()) return real().poll(fds, nfds, timeout);
    const long long deadline = timeout < 0 ? -1 : now_ns() + static_cast<long long>(timeout) * 1'000'000LL;
    if (nfds == 0) {
        if (deadline < 0)
            for (;;) ops->sleep_ns(3600LL * 1'000'000'000LL);
        ops->sleep_ns(deadline - now_ns());
        return 0;
    }
    const int r = real().poll(fds, nfds, 0);
    if (r != 0) return r;
    const short in = POLLIN | POLLPRI | POLLRDNORM | POLLRDBAND;
    const short out = POLLOUT | POLLWRNORM | POLLWRBAND;
    const short ev = fds[0].events;
    const bool one_way = nfds == 1 && fds[0].fd >= 0 && ((ev & in) != 0) != ((ev & out) != 0);
    if (one_way && classify(fds[0].fd) != kind::passthrough) {
        for (;;) {
            const int e = task_wait(ops, fds[0].fd, (ev & in) ? POLLIN : POLLOUT, deadline);
            const int n = real().poll(fds, nfds, 0);
            if (n != 0) return n;
            if (e == ETIMEDOUT) return 0;
            if (e != 0) ops->sleep_ns(1'000'000);  // e.g. closed meanwhile: poll(2) above will say so
        }
    }
    for (;;) {
        long long step = 1'000'000;
        if (deadline >= 0) {
            const long long left = deadline - now_ns();
            if (left <= 0) return 0;
            if (left < step) step = left;
        }
        ops->sleep_ns(step);
        const int n = real().poll(fds, nfds, 0);
        if (n != 0) return n;
    }
}

// select(): the same wait as poll() above (one fd in one direction parks
// on it; more poll every millisecond), over the fd_sets turned into a
// pollfd array: readfds POLLIN, writefds POLLOUT, exceptfds POLLPRI. As
// Linux's select(2) does, it returns the number of bits left set, counts
// POLLHUP and POLLERR as readable (and POLLERR as writable), fails with
// EBADF for an fd that is not open, and leaves the time not slept in
// *timeout. A zero timeout, and any call outside a task, goes straight to
// select(2).
WEFT_HOOK_EXPORT int select(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, timeval* timeout) {
    const weft_hook_ops* ops = active();
    if (!ops || !ops->inside() || (timeout && timeout->tv_sec == 0 && timeout->tv_usec == 0))
        return real().select(nfds, rd, wr, ex, timeout);
    if (nfds < 0 || nfds > FD_SETSIZE || (timeout && (timeout->tv_sec < 0 || timeout->tv_usec < 0))) {
        errno = EINVAL;
        return -1;
    }
    long long deadline = -1;
    int ms = -1;
    if (timeout) {
        const long long ns = static_cast<long long>(timeout->tv_sec) * 1'000'000'000LL + timeout->tv_usec * 1000LL;
        deadline = now_ns() + ns;
        const long long m = (ns + 999'999) / 1'000'000;
        ms = m > INT_MAX ? INT_MAX : static_cast<int>(m);
    }
    std::vector<pollfd> fds;
    for (int fd = 0; fd < nfds; ++fd) {
        short ev = 0;
        if (rd && FD_ISSET(fd, rd)) ev |= POLLIN;
        if (wr && FD_ISSET(fd, wr)) ev |= POLLOUT;
        if (ex && FD_ISSET(fd, ex)) ev |= POLLPRI;
        if (ev) fds.push_back(pollfd{fd, ev, 0});
    }
    const int r = poll(fds.data(), fds.size(), ms);  // the hook's poll(), above
    if (r < 0) return -1;
    for (const pollfd& p : fds)
        if (p.revents & POLLNVAL) {
            errno = EBADF;
            return -1;
        }
    if (rd) FD_ZERO(rd);
    if (wr) FD_ZERO(wr);
    if (ex) FD_ZERO(ex);
    int bits = 0;
    for (const pollfd& p : fds) {
        if ((p.events & POLLIN) && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
            FD_SET(p.fd, rd);
            ++bits;
        }
        if ((p.events & POLLOUT) && (p.revents & (POLLOUT | POLLERR))) {
            FD_SET(p.fd, wr);
            ++bits;
        }
        if ((p.events & POLLPRI) && (p.revents & POLLPRI)) {
            FD_SET(p.fd, ex);
            ++bits;
        }
    }
    if (timeout) {
        const long long left = deadline - now_ns();
        timeout->tv_sec = left > 0 ? static_cast<time_t>(left / 1'000'000'000LL) : 0;
        timeout->tv_usec = left > 0 ? static_cast<suseconds_t>(left % 1'000'000'000LL / 1000) : 0;
    }
    return bits;
}

WEFT_HOOK_EXPORT unsigned sleep(unsigned s) {
    const weft_hook_ops* ops = active();
    if (!ops || !ops->inside()) return real().sleep(s);
    ops->sleep_ns(static_cast<long long>(s) * 1'000'000'000LL);
    return 0;
}

WEFT_HOOK_EXPORT int usleep(useconds_t us) {
    const weft_hook_ops* ops = active();
    if (!ops || !ops->inside()) return real().usleep(us);
    ops->sleep_ns(static_cast<long long>(us) * 1000LL);
    return 0;
}

WEFT_HOOK_EXPORT int nanosleep(const timespec* req, timespec* rem) {
    const weft_hook_ops* ops = active();
    if (!ops || !ops->inside()) return real().nanosleep(req, rem);
    if (!req) {
        err() = EFAULT;
        return -1;
    }
    if (req->tv_sec < 0 || req->tv_nsec < 0 || req->tv_nsec >= 1'000'000'000L) {
        err() = EINVAL;
        return -1;
    }
    ops->sleep_ns(static_cast<long long>(req->tv_sec) * 1'000'000'000LL + req->tv_nsec);
    return 0;
}

// close() tells the table and the bridge (which release()s its handle, so
// the reactor stops watching) before the real close.
WEFT_HOOK_EXPORT int close(int fd) {
    if (fd >= 0 && internal_depth == 0) {
        if (const weft_hook_ops* ops = bridge.load(std::memory_order_acquire)) {
            erase(fd);
            ops->forget(fd);
        }
    }
    return real().close(fd);
}

WEFT_HOOK_EXPORT int fcntl(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void* arg = va_arg(ap, void*);
    va_end(ap);
    return hooked_fcntl(real().fcntl, fd, cmd, arg);
}

WEFT_HOOK_EXPORT int fcntl64(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void* arg = va_arg(ap, void*);
    va_end(ap);
    return hooked_fcntl(real().fcntl64, fd, cmd, arg);
}

WEFT_HOOK_EXPORT int socket(int domain, int type, int protocol) {
    const int r = real().socket(domain, type, protocol);
    forget_new(r);
    return r;
}

WEFT_HOOK_EXPORT int socketpair(int domain, int type, int protocol, int sv[2]) {
    const int r = real().socketpair(domain, type, protocol, sv);
    if (r == 0) {
        forget_new(sv[0]);
        forget_new(sv[1]);
    }
    return r;
}

WEFT_HOOK_EXPORT int pipe(int fds[2]) {
    const int r = real().pipe(fds);
    if (r == 0) {
        forget_new(fds[0]);
        forget_new(fds[1]);
    }
    return r;
}

WEFT_HOOK_EXPORT int pipe2(int fds[2], int flags) {
    const int r = real().pipe2(fds, flags);
    if (r == 0) {
        forget_new(fds[0]);
        forget_new(fds[1]);
    }
    return r;
}

}  // extern "C"
