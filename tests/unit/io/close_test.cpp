// close_test.cpp: handle::close() (and ~handle(), release()) closes the fd
// at once on every backend and worker count: right after it returns, the
// other end of a pipe gets EPIPE on a write and the peer of a TCP connection
// sees the end of the stream, also after a read that timed out, was
// canceled, or was ended by a close from another task or a plain thread.
// (Issue 43, item 3: on the io_uring owner ring the fd's multishot poll,
// whose cancel waited in the SQ for the ring's next poll, kept the file
// open; URING-O7 in src/io/uring.cpp.)

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <thread>

#include "io_test_support.hpp"

namespace weft::test {
namespace {

using namespace std::chrono_literals;

class close_test : public io_fixture {
protected:
    void SetUp() override {
        io_fixture::SetUp();
        // A write to a pipe without a reader must report EPIPE, not kill the
        // test (the reactor does the same when it is made).
        struct sigaction old {};
        if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
    }
};

// raw_pipe is a pipe whose read end is a handle and whose write end a plain
// fd, so that the write after the close goes straight to the kernel.
struct raw_pipe {
    io::handle r;
    int w = -1;
    raw_pipe() {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw std::system_error(errno, std::system_category(), "pipe2");
        r = io::handle(fds[0]);
        w = fds[1];
    }
    raw_pipe(const raw_pipe&) = delete;
    raw_pipe& operator=(const raw_pipe&) = delete;
    ~raw_pipe() {
        if (w >= 0) ::close(w);
    }
};

// write_errno() writes one byte to fd and returns the errno of the write (0
// if the byte went in).
int write_errno(int fd) {
    const char x = 'x';
    ssize_t n;
    do n = ::write(fd, &x, 1);
    while (n < 0 && errno == EINTR);
    return n == 1 ? 0 : errno;
}

// peer_sees_end() is whether the peer end `fd` of a connection finds the
// end of the stream (recv() 0, or ECONNRESET) within one second: a poll(2)
// with a timeout, never an unbounded wait. It blocks the calling thread (a
// worker, in a task) meanwhile, so a backend that finished a close only at
// its next poll fails it.
bool peer_sees_end(int fd) {
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    int rc;
    do rc = ::poll(&p, 1, 1000);
    while (rc < 0 && errno == EINTR);
    if (rc <= 0) return false;
    char c;
    const ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

// timed_out_read() reads from h with a 200 us deadline and expects it to
// time out.
template <class Readable>
void timed_out_read(Readable& h) {
    std::array<std::byte, 16> buf{};
    std::error_code ec;
    EXPECT_EQ(h.read_some(buf, ec, io::after(200us)), 0u);
    EXPECT_EQ(ec, std::errc::timed_out);
}

TEST_P(close_test, a_pipe_closed_after_a_timed_out_read_is_closed_at_once) {
    runtime rt(options());
    dog_.show(&rt);
    rt.block_on([] {
        for (int round = 0; round < 6; ++round) {
            raw_pipe p;
            timed_out_read(p.r);
            if (round % 3 == 0) {
                EXPECT_FALSE(p.r.close());
            } else if (round % 3 == 1) {
                p.r = io::handle();  // the move assignment closes the old fd (as ~handle() does)
            } else {
                const int fd = p.r.release();  // release(): the fd is the caller's, no ring holds it
                ASSERT_GE(fd, 0);
                ASSERT_EQ(::close(fd), 0);
            }
            EXPECT_EQ(write_errno(p.w), EPIPE) << "round " << round << ": the read end is still open after close()";
        }
    });
}

TEST_P(close_test, a_pipe_closed_after_a_canceled_read_is_closed_at_once) {
    runtime rt(options());
    dog_.show(&rt);
    rt.block_on([] {
        raw_pipe p;
        EXPECT_TRUE(cancel_unwinds([&] {
            std::array<std::byte, 4> buf{};
            (void)p.r.read_some(buf, io::after(30s));
        }));
        EXPECT_FALSE(p.r.close());
        EXPECT_EQ(write_errno(p.w), EPIPE);
    });
}

TEST_P(close_test, a_pipe_closed_by_another_task_during_a_read_is_closed_once_the_reader_left) {
    runtime rt(options());
    dog_.show(&rt);
    rt.block_on([] {
        raw_pipe p;
        auto reader = blocked_read(p.r);
        EXPECT_FALSE(p.r.close());
        auto [n, ec] = reader.join();
        EXPECT_EQ(ec, std::errc::operation_canceled);
        // IO-H1: the reader, the last operation inside, closed the fd as it
        // left; join() returned after that.
        EXPECT_EQ(write_errno(p.w), EPIPE);
    });
}

TEST_P(close_test, a_pipe_closed_by_a_plain_thread_after_a_timed_out_read_is_closed_at_once) {
    runtime rt(options());
    dog_.show(&rt);
    rt.block_on([] {
        raw_pipe p;
        timed_out_read(p.r);
        std::atomic<int> after{-1};  // the write's errno, right after the thread's close()
        std::thread closer([&] {
            const std::error_code ec = p.r.close();
            EXPECT_FALSE(ec);
            after = write_errno(p.w);
        });
        // The task yields meanwhile (bounded): on the owner ring the close
        // needs the ring's owner, this worker, to poll.
        for (int i = 0; i < 20000 && after.load() < 0; ++i) this_task::sleep_for(100us);
        closer.join();
        EXPECT_EQ(after.load(), EPIPE);
    });
}

TEST_P(close_test, a_socket_closed_after_a_timed_out_read_is_closed_at_once) {
    // Both ends: the client's handle waited for its connect (a readiness
    // wait), the accepted one did not.
    for (int which = 0; which < 2; ++which) {
        on_connection([which](auto&, auto& c, auto& s) {
            auto& mine = which == 0 ? c : s;
            auto& peer = which == 0 ? s : c;
            timed_out_read(mine);
            EXPECT_FALSE(mine.close());
            EXPECT_TRUE(peer_sees_end(peer.native().native_handle()))
                << (which == 0 ? "client" : "server") << " end: the peer saw no end of the stream";
        });
    }
}

TEST_P(close_test, a_socket_closed_after_a_canceled_read_is_closed_at_once) {
    on_connection([](auto&, auto& c, auto& s) {
        EXPECT_TRUE(cancel_unwinds([&] {
            std::array<std::byte, 4> buf{};
            (void)c.read_some(buf, io::after(30s));
        }));
        EXPECT_FALSE(c.close());
        EXPECT_TRUE(peer_sees_end(s.native().native_handle()));
    });
}

TEST_P(close_test, a_socket_closed_by_another_task_during_a_read_is_closed_once_the_reader_left) {
    on_connection([](auto&, auto& c, auto& s) {
        auto reader = blocked_read(c);
        EXPECT_FALSE(c.close());
        auto [n, ec] = reader.join();
        EXPECT_EQ(ec, std::errc::operation_canceled);
        EXPECT_TRUE(peer_sees_end(s.native().native_handle()));
    });
}

INSTANTIATE_TEST_SUITE_P(io, close_test, io_params(), io_param_name);

}  // namespace
}  // namespace weft::test
