// io_test_support.hpp: what the IO tests (tests/unit/io) share.
//
//   io_fixture    the leak-checked runtime fixture parameterised over the
//                 worker count {0, 1, 2, 4} and the backend {epoll,
//                 io_uring}; it also fails a test that leaves more fds open
//                 than it found (counted in /proc/self/fd), and skips
//                 nothing: on a kernel without io_uring the io_uring
//                 instances run on the epoll fallback and check that the
//                 fallback says why;
//   open_fds()    the number of open fds of this process;
//   settled_open_fds()  the same once it stops moving (the sanitizers'
//                 own short-lived pipes);
//   bytes()       a string's bytes as a span;
//   pipe_pair     a pipe as two handles (read end r, write end w);
//   socket_pair   the same over a Unix-domain socket pair;
//   blocked_read()    a task suspended in a read_some() of a handle or
//                 stream, whose join() is what the read gave;
//   cancel_unwinds()  cancels a task blocked in a call and says whether its
//                 stack was unwound.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>
#include <system_error>

#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "runtime_fixture.hpp"
#include "weft/io/handle.hpp"
#include "weft/io/socket.hpp"
#include "weft/runtime.hpp"

namespace weft::test {

// open_fds() counts the entries of /proc/self/fd (less the one it opens).
inline int open_fds() {
    DIR* d = ::opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    while (::readdir(d)) ++n;
    ::closedir(d);
    return n - 3;  // ".", ".." and the directory's own fd
}

// settled_open_fds(expected) is open_fds() once it stops moving: the
// sanitizer runtimes open short-lived pipes of their own on any thread
// (sanitizer_common probes memory by writing it to a pipe), so a single
// count can include one or two fds that are gone a moment later (seen once
// in CI: asan-clang counted 7 at a test's start and 6 at its end). It
// returns as soon as the count equals `expected` (-1: none) or the same
// count was read 5 times in a row, 2 ms apart; after 2 s, the last count.
// A real leak or a wrong close stays and still fails the comparison.
inline int settled_open_fds(int expected = -1) {
    int last = open_fds();
    int same = 1;
    for (int i = 0; i < 1000 && last != expected && same < 5; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        const int now = open_fds();
        same = now == last ? same + 1 : 1;
        last = now;
    }
    return last;
}

inline std::span<const std::byte> bytes(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }

struct pipe_pair {
    io::handle r, w;
    pipe_pair() {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::system_category(), "pipe2");
        r = io::handle(fds[0]);
        w = io::handle(fds[1]);
    }
};

// socket_pair is a connected Unix-domain stream socket pair as two handles
// (r, w: both ends are sockets, so reads on the io_uring owner ring are
// IORING_OP_RECV, src/io/handle.cpp IO-R2, where a pipe's go by readiness).
struct socket_pair {
    io::handle r, w;
    socket_pair() {
        int fds[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
            throw std::system_error(errno, std::system_category(), "socketpair");
        r = io::handle(fds[0]);
        w = io::handle(fds[1]);
    }
};

// read_result is what a read_some() with an error_code gave: the bytes read
// and the error.
using read_result = std::pair<std::size_t, std::error_code>;

// blocked_read() spawns a task that reads once from `from` (an io::handle or
// an io::stream; up to 16 bytes, a 30 s deadline) and returns once that task
// is suspended in the read. Call it from a task; the task's join() is the
// read's read_result.
template <class Readable>
join_handle<read_result> blocked_read(Readable& from) {
    std::atomic<bool> reading{false};  // the task touches it before its read only
    auto reader = spawn([&from, &reading] {
        std::array<std::byte, 16> buf{};
        std::error_code ec;
        reading = true;
        const std::size_t n = from.read_some(buf, ec, io::after(std::chrono::seconds(30)));
        return read_result(n, ec);
    });
    while (!reading || reader.state() != task_state::waiting) this_task::yield();
    return reader;
}

// cancel_unwinds() spawns a task that calls wait() (a call that blocks),
// cancels the task once it is suspended and joins it, which must throw
// task_canceled. It returns whether the task's stack was unwound: a local
// of the task was destroyed. Call it from a task.
template <class F>
bool cancel_unwinds(F wait) {
    std::atomic<bool> unwound{false};
    auto waiter = spawn([&] {
        struct on_unwind {
            std::atomic<bool>& f;
            ~on_unwind() { f = true; }
        } guard{unwound};
        wait();
    });
    while (waiter.state() != task_state::waiting) this_task::yield();
    waiter.cancel();
    EXPECT_THROW(waiter.join(), task_canceled);
    return unwound;
}

using io_param = std::tuple<unsigned, weft::io_backend>;

class io_fixture : public leak_checked, public ::testing::WithParamInterface<io_param> {
protected:
    void SetUp() override {
        leak_checked::SetUp();
        fds_ = settled_open_fds();
    }
    void TearDown() override {
        leak_checked::TearDown();
        EXPECT_EQ(settled_open_fds(fds_), fds_) << "the test leaked (or closed) file descriptors";
    }
    [[nodiscard]] unsigned workers() const { return std::get<0>(GetParam()); }
    [[nodiscard]] weft::io_backend backend() const { return std::get<1>(GetParam()); }
    [[nodiscard]] weft::runtime_options options() const {
        weft::runtime_options o;
        o.workers = workers();
        o.io = backend();
        return o;
    }
    // on_connection() runs f(listener, client end, accepted end) over one
    // loopback TCP connection, in a task of a runtime of this instance.
    template <class F>
    void on_connection(F f) {
        weft::runtime rt(options());
        rt.block_on([&] {
            auto l = weft::io::tcp_listener::bind(weft::io::endpoint::loopback_v4(0));
            auto c = weft::io::tcp_stream::connect(l.local_endpoint(), weft::io::after(std::chrono::seconds(30)));
            auto s = l.accept(weft::io::after(std::chrono::seconds(30)));
            f(l, c, s);
        });
    }

    watchdog dog_;

private:
    int fds_ = 0;
};

inline auto io_params() {
    return ::testing::Combine(::testing::Values(0u, 1u, 2u, 4u),
                              ::testing::Values(weft::io_backend::epoll, weft::io_backend::io_uring));
}

inline std::string io_param_name(const ::testing::TestParamInfo<io_param>& info) {
    return "w" + std::to_string(std::get<0>(info.param)) +
           (std::get<1>(info.param) == weft::io_backend::epoll ? "_epoll" : "_uring");
}

}  // namespace weft::test
