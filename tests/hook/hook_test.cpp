// hook_test.cpp: libweft_hook (hook/) linked into this binary. An
// unmodified C program (legacy_echo.c: plain blocking sockets, no weft)
// runs as 200 concurrent clients and their servers on 1 and 2 workers;
// sleeps inside tasks overlap; calls outside tasks behave as before; errno,
// SO_RCVTIMEO, poll, fcntl's view and cancellation during a hooked call.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "legacy_echo.h"
#include "runtime_fixture.hpp"
#include "weft/runtime.hpp"

namespace weft::test {
namespace {

using namespace std::chrono_literals;

class hook_test : public runtime_fixture {};

struct pipe_fds {
    int r = -1, w = -1;
    pipe_fds() {
        int f[2];
        if (::pipe(f) != 0) throw std::system_error(errno, std::system_category(), "pipe");
        r = f[0];
        w = f[1];
    }
    ~pipe_fds() {
        if (r >= 0) ::close(r);
        if (w >= 0) ::close(w);
    }
};

// Every echo of 200 concurrent clients of a blocking-socket C program comes
// back, on 1 and 2 workers: the program's accept/read/write/connect/usleep
// park tasks (if they blocked a worker, the first client's read would
// deadlock a 1-worker runtime). Many clients are in flight at once.
TEST_P(hook_test, an_unmodified_blocking_echo_program_serves_200_concurrent_clients) {
    constexpr int clients = 200;
    const int rounds = sanitized ? 3 : 5;
    runtime rt(options());
    dog_.show(&rt);
    int port = 0;
    const int lfd = legacy_listen(&port);
    ASSERT_GE(lfd, 0) << std::strerror(errno);
    std::atomic<int> in_flight{0}, max_in_flight{0}, echoed{0};
    rt.block_on([&] {
        auto acceptor = spawn([&] {
            std::vector<join_handle<long>> conns;
            for (int i = 0; i < clients; ++i) {
                const int c = legacy_accept_one(lfd);
                if (c < 0) {
                    ADD_FAILURE() << "accept: " << std::strerror(errno);
                    break;
                }
                conns.push_back(spawn([c] { return legacy_echo_conn(c); }));
            }
            for (auto& h : conns)
                if (h.join() > 0) echoed.fetch_add(1);
        });
        std::vector<join_handle<int>> cs;
        for (int i = 0; i < clients; ++i)
            cs.push_back(spawn([&, i] {
                const int now = in_flight.fetch_add(1) + 1;
                int m = max_in_flight.load();
                while (now > m && !max_in_flight.compare_exchange_weak(m, now)) {
                }
                const int r = legacy_client(port, i, rounds);
                in_flight.fetch_sub(1);
                return r;
            }));
        for (int i = 0; i < clients; ++i) EXPECT_EQ(cs[i].join(), 0) << "client " << i;
        acceptor.join();
    });
    dog_.show(nullptr);
    EXPECT_EQ(::close(lfd), 0);
    EXPECT_EQ(echoed.load(), clients);
    // Far more clients than workers were inside their blocking calls at once.
    EXPECT_GE(max_in_flight.load(), 50) << "the clients ran one after another";
}

// One task writes 1 MiB into a socket while another reads the echo from it
// (both first-wait the same fd at once; writes fill the buffer and wait
// for room; a blocking write returns only when all is written).
TEST_P(hook_test, one_task_writes_while_another_reads_the_same_socket) {
    const int pairs = sanitized ? 4 : 16;
    static constexpr std::size_t total = 1u << 20;
    runtime rt(options());
    rt.block_on([&] {
        std::vector<join_handle<bool>> hs;
        for (int k = 0; k < pairs; ++k)
            hs.push_back(spawn([] {
                int sv[2];
                if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return false;
                auto echo = spawn([&] { return legacy_echo_conn(sv[1]); });  // closes sv[1]
                auto writer = spawn([&] {
                    std::vector<char> buf(total);
                    for (std::size_t i = 0; i < total; ++i) buf[i] = static_cast<char>(i * 7);
                    const ssize_t w = ::write(sv[0], buf.data(), total);
                    if (w != static_cast<ssize_t>(total)) ADD_FAILURE() << "write: " << w << " errno " << errno;
                    ::shutdown(sv[0], SHUT_WR);
                    return w == static_cast<ssize_t>(total);
                });
                std::size_t got = 0;
                bool same = true;
                std::vector<char> buf(4096);
                for (;;) {
                    const ssize_t n = ::read(sv[0], buf.data(), buf.size());
                    if (n < 0) ADD_FAILURE() << "read: errno " << errno << " after " << got;
                    if (n <= 0) break;
                    for (ssize_t j = 0; j < n; ++j)
                        same = same && buf[static_cast<std::size_t>(j)] == static_cast<char>((got + j) * 7);
                    got += static_cast<std::size_t>(n);
                }
                const bool wrote = writer.join();
                const long echoed = echo.join();
                ::close(sv[0]);
                EXPECT_EQ(echoed, static_cast<long>(total));
                EXPECT_EQ(got, total);
                EXPECT_TRUE(same);
                return wrote && same && got == total && echoed == static_cast<long>(total);
            }));
        for (auto& h : hs) EXPECT_TRUE(h.join());
    });
}

// writev of 1 MiB in three segments (more than the socket buffer holds, so
// the writer parks, and on workers = 0 only the reader can make room) and
// readv into two buffers: every byte arrives, in order.
TEST_P(hook_test, writev_writes_everything_and_readv_reads_it_in_tasks) {
    static constexpr std::size_t total = 1u << 20;
    runtime rt(options());
    rt.block_on([&] {
        int sv[2];
        ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        std::vector<char> data(total);
        for (std::size_t i = 0; i < total; ++i) data[i] = static_cast<char>(i * 13 + 1);
        auto writer = spawn([&] {
            const std::size_t a = 1000, b = total / 2;
            iovec iov[3] = {{data.data(), a}, {data.data() + a, b - a}, {data.data() + b, total - b}};
            const ssize_t w = ::writev(sv[0], iov, 3);
            ::shutdown(sv[0], SHUT_WR);
            return w;
        });
        std::vector<char> got;
        char x[700], y[3000];
        for (int guard = 0; guard < 100000; ++guard) {
            iovec iov[2] = {{x, sizeof x}, {y, sizeof y}};
            const ssize_t n = ::readv(sv[1], iov, 2);
            ASSERT_GE(n, 0) << "readv: errno " << errno;
            if (n == 0) break;
            const std::size_t in_x = std::min<std::size_t>(static_cast<std::size_t>(n), sizeof x);
            got.insert(got.end(), x, x + in_x);
            got.insert(got.end(), y, y + (static_cast<std::size_t>(n) - in_x));
        }
        EXPECT_EQ(writer.join(), static_cast<ssize_t>(total));
        EXPECT_EQ(got.size(), total);
        EXPECT_TRUE(got == data) << "the bytes differ";
        ::close(sv[0]);
        ::close(sv[1]);
    });
}

// recvfrom on a blocking UDP socket parks the task: on workers = 0 the
// sender, spawned after it, runs only if it does. sendto with an address
// sends one datagram whole.
TEST_P(hook_test, recvfrom_parks_until_sendto_delivers_a_datagram) {
    runtime rt(options());
    rt.block_on([&] {
        const int rx = ::socket(AF_INET, SOCK_DGRAM, 0), tx = ::socket(AF_INET, SOCK_DGRAM, 0);
        ASSERT_GE(rx, 0);
        ASSERT_GE(tx, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ASSERT_EQ(::bind(rx, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
        socklen_t alen = sizeof a;
        ASSERT_EQ(::getsockname(rx, reinterpret_cast<sockaddr*>(&a), &alen), 0);
        std::atomic<bool> receiving{false};
        auto receiver = spawn([&] {
            char buf[64] = {};
            sockaddr_in from{};
            socklen_t flen = sizeof from;
            receiving = true;
            const ssize_t n = ::recvfrom(rx, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &flen);
            return n == 5 && std::string(buf, 5) == "hello" && from.sin_addr.s_addr == htonl(INADDR_LOOPBACK);
        });
        auto sender = spawn([&] {
            while (!receiving) this_task::sleep_for(1ms);
            this_task::sleep_for(5ms);  // the receiver is parked in recvfrom by now
            return ::sendto(tx, "hello", 5, 0, reinterpret_cast<const sockaddr*>(&a), sizeof a);
        });
        EXPECT_EQ(sender.join(), 5);
        EXPECT_TRUE(receiver.join());
        ::close(rx);
        ::close(tx);
    });
}

// usleep inside 100 tasks on one worker: all of them are asleep at the same
// time (each sleeps until it has seen all 100 started, bounded by 10 s; had
// usleep blocked the worker, the first would sleep out the bound alone).
TEST_P(hook_test, sleeps_inside_tasks_overlap) {
    constexpr int n = 100;
    runtime rt(options());
    std::atomic<int> started{0}, saw_all{0};
    rt.block_on([&] {
        const auto limit = std::chrono::steady_clock::now() + 10s;
        std::vector<join_handle<void>> hs;
        for (int i = 0; i < n; ++i)
            hs.push_back(spawn([&, i] {
                started.fetch_add(1);
                do {
                    if (i % 3 == 0) {
                        EXPECT_EQ(legacy_usleep(20000), 0);
                    } else if (i % 3 == 1) {
                        const timespec d{0, 20'000'000};
                        EXPECT_EQ(::nanosleep(&d, nullptr), 0);
                    } else {
                        EXPECT_EQ(::poll(nullptr, 0, 20), 0);  // the poll idiom for sleeping
                    }
                } while (started.load() < n && std::chrono::steady_clock::now() < limit);
                if (started.load() == n) saw_all.fetch_add(1);
            }));
        for (auto& h : hs) h.join();
    });
    EXPECT_EQ(saw_all.load(), n);
}

TEST_P(hook_test, nanosleep_and_sleep_keep_their_contract_inside_tasks) {
    runtime rt(options());
    rt.block_on([] {
        timespec bad{0, 1'000'000'000L};
        errno = 0;
        EXPECT_EQ(::nanosleep(&bad, nullptr), -1);
        EXPECT_EQ(errno, EINVAL);
        errno = 0;
        EXPECT_EQ(::nanosleep(nullptr, nullptr), -1);
        EXPECT_EQ(errno, EFAULT);
        EXPECT_EQ(::sleep(0), 0u);
        const auto t0 = std::chrono::steady_clock::now();
        const timespec d{0, 5'000'000};
        EXPECT_EQ(::nanosleep(&d, nullptr), 0);
        EXPECT_GE(std::chrono::steady_clock::now() - t0, 5ms);
    });
}

// Outside tasks nothing changes: a plain thread's blocking read on a pipe
// blocks until another thread writes.
TEST_P(hook_test, outside_tasks_a_blocking_read_blocks_as_before) {
    pipe_fds p;
    std::thread writer([&] {
        std::this_thread::sleep_for(20ms);  // nanosleep, hooked, outside a task
        EXPECT_EQ(::write(p.w, "hello", 5), 5);
    });
    char buf[8] = {};
    EXPECT_EQ(legacy_read(p.r, buf, sizeof buf), 5);
    EXPECT_EQ(std::memcmp(buf, "hello", 5), 0);
    writer.join();
    EXPECT_EQ(::fcntl(p.r, F_GETFL) & O_NONBLOCK, 0);
}

// A pipe first used by a task (O_NONBLOCK underneath) still looks and
// behaves blocking: fcntl reports the user's flags, and a plain thread's
// read waits instead of failing with EAGAIN.
TEST_P(hook_test, an_fd_used_by_a_task_stays_blocking_for_its_user) {
    runtime rt(options());
    pipe_fds p;
    rt.block_on([&] {
        auto reader = spawn([&] {
            char c = 0;
            return legacy_read(p.r, &c, 1) == 1 && c == 'a';
        });
        this_task::sleep_for(5ms);
        EXPECT_EQ(::write(p.w, "a", 1), 1);
        EXPECT_TRUE(reader.join());
    });
    EXPECT_EQ(::fcntl(p.r, F_GETFL) & O_NONBLOCK, 0) << "the user's view";
    std::thread writer([&] {
        std::this_thread::sleep_for(20ms);
        EXPECT_EQ(::write(p.w, "b", 1), 1);
    });
    char c = 0;
    errno = 0;
    EXPECT_EQ(legacy_read(p.r, &c, 1), 1) << std::strerror(errno);
    EXPECT_EQ(c, 'b');
    writer.join();
    // The user making it non-blocking is honoured: EAGAIN reaches them.
    ASSERT_EQ(::fcntl(p.r, F_SETFL, ::fcntl(p.r, F_GETFL) | O_NONBLOCK), 0);
    EXPECT_NE(::fcntl(p.r, F_GETFL) & O_NONBLOCK, 0);
    rt.block_on([&] {
        char d = 0;
        errno = 0;
        EXPECT_EQ(legacy_read(p.r, &d, 1), -1);
        EXPECT_EQ(errno, EAGAIN);
    });
}

// errno is read after a hooked call that may have suspended the task: the
// test's own code would break the rule of docs/runtime.md (gcc may reuse
// errno's address across the call, and the task may have moved to another
// worker) unless the task is pinned, as hooked legacy code should be on a
// runtime with several workers (hook/README.md).
spawn_options pinned() {
    spawn_options o;
    o.pinned = true;
    return o;
}

TEST_P(hook_test, errors_keep_errno_semantics) {
    runtime rt(options());
    rt.block_on([] {
        char c;
        errno = 0;
        EXPECT_EQ(::read(-1, &c, 1), -1);
        EXPECT_EQ(errno, EBADF);
        // A refused connect on a blocking socket: -1 / ECONNREFUSED.
        int port = 0;
        const int l = legacy_listen(&port);
        ASSERT_GE(l, 0);
        ASSERT_EQ(::close(l), 0);
        const int s = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(static_cast<unsigned short>(port));
        errno = 0;
        EXPECT_EQ(::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a), -1);
        EXPECT_EQ(errno, ECONNREFUSED);
        ::close(s);
        // Success leaves errno alone (the EAGAIN seen underneath is hidden).
        int sv[2];
        ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        auto w = spawn([&] {
            this_task::sleep_for(5ms);
            return ::send(sv[1], "z", 1, 0);
        });
        errno = 1234;
        EXPECT_EQ(::recv(sv[0], &c, 1, 0), 1);
        EXPECT_EQ(errno, 1234);
        EXPECT_EQ(w.join(), 1);
        // MSG_WAITALL waits for every byte, as on a blocking socket.
        auto w2 = spawn([&] {
            for (const char* part : {"ab", "cd", "ef"}) {
                this_task::sleep_for(2ms);
                EXPECT_EQ(::send(sv[1], part, 2, 0), 2);
            }
        });
        char six[6] = {};
        EXPECT_EQ(::recv(sv[0], six, sizeof six, MSG_WAITALL), 6);
        EXPECT_EQ(std::memcmp(six, "abcdef", 6), 0);
        w2.join();
        ::close(sv[0]);
        ::close(sv[1]);
    }, pinned());
}

// SO_RCVTIMEO bounds a hooked read, which then fails with EAGAIN as the
// kernel's blocking read does.
TEST_P(hook_test, so_rcvtimeo_is_the_deadline_of_a_hooked_read) {
    runtime rt(options());
    rt.block_on([] {
        int sv[2];
        ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        const timeval tv{0, 30'000};
        ASSERT_EQ(::setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
        const auto t0 = std::chrono::steady_clock::now();
        char c;
        errno = 0;
        EXPECT_EQ(::read(sv[0], &c, 1), -1);
        EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << errno;
        EXPECT_GE(std::chrono::steady_clock::now() - t0, 30ms);
        ::close(sv[0]);
        ::close(sv[1]);
    }, pinned());
}

TEST_P(hook_test, poll_parks_on_one_fd_and_falls_back_for_several) {
    runtime rt(options());
    rt.block_on([] {
        pipe_fds a, b;
        // One fd: parks until another task writes.
        auto w = spawn([&] {
            this_task::sleep_for(10ms);
            EXPECT_EQ(::write(a.w, "x", 1), 1);
        });
        pollfd p{a.r, POLLIN, 0};
        EXPECT_EQ(::poll(&p, 1, 10'000), 1);
        EXPECT_NE(p.revents & POLLIN, 0);
        w.join();
        // One fd, timing out.
        pollfd q{b.r, POLLIN, 0};
        const auto t0 = std::chrono::steady_clock::now();
        EXPECT_EQ(::poll(&q, 1, 20), 0);
        EXPECT_GE(std::chrono::steady_clock::now() - t0, 20ms);
        // Several fds: the 1 ms polling fallback.
        auto w2 = spawn([&] {
            this_task::sleep_for(10ms);
            EXPECT_EQ(::write(b.w, "y", 1), 1);
        });
        char c;
        EXPECT_EQ(::read(a.r, &c, 1), 1);
        pollfd two[2] = {{a.r, POLLIN, 0}, {b.r, POLLIN, 0}};
        EXPECT_EQ(::poll(two, 2, 10'000), 1);
        EXPECT_EQ(two[0].revents, 0);
        EXPECT_NE(two[1].revents & POLLIN, 0);
        w2.join();
        pollfd none[2] = {{a.r, POLLIN, 0}, {a.w, 0, 0}};
        EXPECT_EQ(::poll(none, 2, 15), 0);
    });
}

// select(2) inside a task is the hooked poll(): one fd in one direction
// parks the task (with 0 workers a blocking select would stop the writer
// from ever running), the sets come back holding only what is ready, the
// timeout is kept and what is left of it written back, and a closed fd is
// EBADF, as with the real select.
TEST_P(hook_test, select_parks_and_keeps_its_contract_inside_tasks) {
    runtime rt(options());
    rt.block_on([] {
        pipe_fds a, b;
        auto w = spawn([&] {
            this_task::sleep_for(10ms);
            EXPECT_EQ(::write(a.w, "x", 1), 1);
        });
        fd_set rd;
        FD_ZERO(&rd);
        FD_SET(a.r, &rd);
        FD_SET(b.r, &rd);
        timeval tv{10, 0};
        // Two fds: the polling fallback; only a.r comes back.
        EXPECT_EQ(::select(std::max(a.r, b.r) + 1, &rd, nullptr, nullptr, &tv), 1);
        EXPECT_TRUE(FD_ISSET(a.r, &rd));
        EXPECT_FALSE(FD_ISSET(b.r, &rd));
        EXPECT_LE(tv.tv_sec, 10);
        EXPECT_GT(tv.tv_sec + tv.tv_usec, 0);  // time was left, and written back
        w.join();
        char c;
        EXPECT_EQ(::read(a.r, &c, 1), 1);
        // One fd: parks until another task writes.
        auto w2 = spawn([&] {
            this_task::sleep_for(10ms);
            EXPECT_EQ(::write(b.w, "y", 1), 1);
        });
        FD_ZERO(&rd);
        FD_SET(b.r, &rd);
        EXPECT_EQ(::select(b.r + 1, &rd, nullptr, nullptr, nullptr), 1);
        EXPECT_TRUE(FD_ISSET(b.r, &rd));
        w2.join();
        EXPECT_EQ(::read(b.r, &c, 1), 1);
        // A writable pipe and a timeout that passes.
        fd_set wr;
        FD_ZERO(&rd);
        FD_ZERO(&wr);
        FD_SET(a.r, &rd);
        FD_SET(a.w, &wr);
        EXPECT_EQ(::select(std::max(a.r, a.w) + 1, &rd, &wr, nullptr, nullptr), 1);
        EXPECT_FALSE(FD_ISSET(a.r, &rd));
        EXPECT_TRUE(FD_ISSET(a.w, &wr));
        FD_ZERO(&rd);
        FD_SET(a.r, &rd);
        timeval short_tv{0, 20'000};
        const auto t0 = std::chrono::steady_clock::now();
        EXPECT_EQ(::select(a.r + 1, &rd, nullptr, nullptr, &short_tv), 0);
        EXPECT_GE(std::chrono::steady_clock::now() - t0, 20ms);
        EXPECT_FALSE(FD_ISSET(a.r, &rd));
        EXPECT_EQ(short_tv.tv_sec, 0);
        EXPECT_EQ(short_tv.tv_usec, 0);
        // A closed fd is EBADF; a bad nfds is EINVAL.
        const int gone = ::dup(a.r);
        ASSERT_GE(gone, 0);
        ASSERT_EQ(::close(gone), 0);
        FD_ZERO(&rd);
        FD_SET(gone, &rd);
        timeval tv2{1, 0};
        errno = 0;
        EXPECT_EQ(::select(gone + 1, &rd, nullptr, nullptr, &tv2), -1);
        EXPECT_EQ(errno, EBADF);
        errno = 0;
        EXPECT_EQ(::select(-1, nullptr, nullptr, nullptr, &tv2), -1);
        EXPECT_EQ(errno, EINVAL);
    });
}

// A task canceled while parked in a hooked read unwinds: its destructors
// run and join() reports the cancellation; the fd stays usable.
TEST_P(hook_test, cancellation_during_a_hooked_read_unwinds_the_task) {
    runtime rt(options());
    counted::reset();
    pipe_fds p;
    std::atomic<bool> reading{false};
    rt.block_on([&] {
        auto h = spawn([&] {
            counted guard;
            reading = true;
            char c;
            (void)legacy_read(p.r, &c, 1);
            ADD_FAILURE() << "the read returned";
        });
        while (!reading) this_task::sleep_for(1ms);
        this_task::sleep_for(5ms);
        h.cancel();
        EXPECT_THROW(h.join(), task_canceled);
    });
    EXPECT_EQ(counted::made.load(), counted::gone.load());
    EXPECT_EQ(counted::made.load(), 1);
}

INSTANTIATE_TEST_SUITE_P(workers, hook_test, ::testing::Values(0u, 1u, 2u, 4u), worker_param_name);

}  // namespace
}  // namespace weft::test
