// uring_test.cpp: what the io_uring backend (src/io/uring.cpp) adds to the
// handle tests: the fallback reason of a failed setup, the backend really
// being io_uring where the kernel allows it, registrations added and removed
// by many tasks while the watcher polls, stale completions for a closed and
// reused fd, a handle closed while its event is delivered (it must really
// close), and readiness reported on edges only. The behavioural tests run
// over both backends (the contract is the same). uring_idle: a task idle in
// a socket read on the owner ring or the worker rings is not pinned and is
// shrunk (IO-R2, URING-P1), in each mode of the read (provided buffers, the
// poll), with its deadline, close and cancel semantics, and the provided
// buffers running out.

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "support/stack_canary.hpp"
#include "io_test_support.hpp"
#include "reactor.hpp"
#include "weft/io/buffered.hpp"

namespace weft::test {
namespace {

using namespace std::chrono_literals;

// uring_available() is whether this kernel (and this build) gives io_uring.
bool uring_available(std::string& why) { return io::detail::make_uring_backend_with(256, why) != nullptr; }

TEST(uring_setup, a_failed_setup_says_why_in_io_uring_setup_terms) {
    std::string why;
    EXPECT_EQ(io::detail::make_uring_backend_with(1u << 30, why), nullptr);
    if (why.find("without liburing") != std::string::npos) GTEST_SKIP() << why;
    EXPECT_EQ(why, std::string("io_uring_setup: ") + std::strerror(EINVAL));
}

TEST(uring_setup, a_runtime_asking_for_io_uring_gets_it_when_the_kernel_allows) {
    std::string why;
    if (!uring_available(why)) GTEST_SKIP() << "no io_uring here: " << why;
    runtime_options o;
    o.io = io_backend::io_uring;
    runtime rt(o);
    const io::backend_info b = rt.block_on([] { return io::current_backend(); });
    EXPECT_STREQ(b.name, "io_uring");
    EXPECT_STREQ(b.fallback_reason, "");
    // automatic picks the owner ring for one worker and epoll otherwise
    // (docs/io.md, "Backends"); neither is a fallback.
    for (const unsigned workers : {0u, 1u, 2u}) {
        runtime rt2({.workers = workers});
        const io::backend_info a = rt2.block_on([] { return io::current_backend(); });
        EXPECT_STREQ(a.name, workers == 1 ? "io_uring" : "epoll") << workers << " workers";
        EXPECT_STREQ(a.fallback_reason, "") << workers << " workers";
        if (workers == 1) {
            EXPECT_TRUE(std::string(a.features).find("owner ring") != std::string::npos) << a.features;
        }
    }
}

TEST(uring_setup, a_regular_file_is_always_ready_not_a_busy_poll) {
    // io_uring would complete a poll on a file without poll support at once,
    // forever; the backend refuses it as epoll does and the reactor treats
    // the file as always ready.
    runtime_options o;
    o.io = io_backend::io_uring;
    runtime rt(o);
    rt.block_on([] {
        const int fd = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
        ASSERT_GE(fd, 0);
        io::handle h(fd);
        EXPECT_FALSE(h.wait(io::interest::readable, io::after(1s)));
        std::array<std::byte, 4> buf{};
        EXPECT_EQ(h.read_some(buf, io::after(1s)), 4u);
        const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
        ASSERT_GE(null, 0);
        io::handle n(null);
        EXPECT_FALSE(n.wait(io::interest::writable, io::after(1s)));
        EXPECT_EQ(n.write_some(bytes("x"), io::after(1s)), 1u);
    });
}

TEST(uring_setup, a_handle_first_used_by_a_thread_that_has_exited_keeps_working) {
    // Plain threads wait with poll(2), not through a reactor: a handle
    // whose first wait was on a thread that has gone works on the next.
    watchdog dog;
    pipe_pair p;
    std::thread([&] {
        std::array<std::byte, 4> buf{};
        std::error_code ec;
        EXPECT_EQ(p.r.read_some(buf, ec, io::after(10ms)), 0u);  // registers p.r from this thread
        EXPECT_EQ(ec, std::errc::timed_out);
    }).join();
    for (int i = 0; i < 3; ++i) {
        std::thread writer([&] {
            std::this_thread::sleep_for(10ms);
            (void)p.w.write_some(bytes("ab"));
        });
        std::array<std::byte, 4> buf{};
        EXPECT_EQ(p.r.read_some(buf, io::after(10s)), 2u) << "round " << i;
        writer.join();
    }
}

// ---- the owner ring (uring.cpp URING-O1 - URING-O6) -------------------------

// scoped_uring_off sets WEFT_IO_URING_OFF for one scope (the reactor reads it
// when it is made, on a runtime's first IO wait).
struct scoped_uring_off {
    explicit scoped_uring_off(const char* v) { ::setenv("WEFT_IO_URING_OFF", v, 1); }
    ~scoped_uring_off() { ::unsetenv("WEFT_IO_URING_OFF"); }
    scoped_uring_off(const scoped_uring_off&) = delete;
    scoped_uring_off& operator=(const scoped_uring_off&) = delete;
};

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// echo_round_trips() runs n round trips over a socket pair between two
// tasks of the calling task's runtime, and one file read through the ring;
// returns the backend's features and how many ring operations completed.
std::pair<std::string, std::uint64_t> echo_round_trips(int n) {
    socket_pair p;
    auto echo = spawn([&p, n] {
        std::array<std::byte, 8> buf{};
        for (int i = 0; i < n; ++i) {
            const std::size_t got = p.r.read_some(buf, io::after(30s));
            EXPECT_EQ(got, 1u);
            (void)p.r.write_some(std::span<const std::byte>(buf.data(), got), io::after(30s));
        }
    });
    for (int i = 0; i < n; ++i) {
        const char c = static_cast<char>('a' + i % 26);
        (void)p.w.write_some(bytes(std::string_view(&c, 1)), io::after(30s));
        std::array<std::byte, 8> buf{};
        EXPECT_EQ(p.w.read_some(buf, io::after(30s)), 1u);
        EXPECT_EQ(static_cast<char>(buf[0]), c) << "round " << i;
    }
    echo.join();
    const io::backend_info b = io::current_backend();
    return {b.features, io::detail::ops_completed(weft::detail::current_core("uring_test"))};
}

// forced_fallback is one WEFT_IO_URING_OFF setting, the part of
// backend_info::features it must produce, and whether sockets are then read
// by ring operations.
struct forced_fallback {
    const char* off;
    const char* expect;
    bool recv_ops;
};

// run_forced() runs an echo of `rounds` round trips on each forced setting
// with `workers` workers and checks what the backend says and does.
void run_forced(std::span<const forced_fallback> cases, unsigned workers, int rounds) {
    for (const auto& c : cases) {
        scoped_uring_off off(c.off);
        runtime rt({.workers = workers, .io = io_backend::io_uring});
        const auto [features, ops] = rt.block_on([rounds] { return echo_round_trips(rounds); });
        EXPECT_TRUE(has(features, c.expect)) << workers << " workers, " << c.off << ": " << features;
        if (c.recv_ops)
            EXPECT_GE(ops, static_cast<std::uint64_t>(2 * rounds)) << c.off << ": " << features;
        else
            EXPECT_EQ(ops, 0u) << c.off << ": " << features;
    }
}

TEST(uring_owner, one_worker_gets_the_owner_ring_and_says_what_it_uses) {
    watchdog dog;
    std::string why;
    if (!uring_available(why)) GTEST_SKIP() << "no io_uring here: " << why;
    runtime rt({.workers = 1, .io = io_backend::io_uring});
    const auto [features, ops] = rt.block_on([] { return echo_round_trips(200); });
    EXPECT_TRUE(has(features, "owner ring")) << features;
    // The kernel's answer to each setup level is named: in use, or refused.
    EXPECT_TRUE(has(features, "; SINGLE_ISSUER+DEFER_TASKRUN;") || has(features, "DEFER_TASKRUN refused: "))
        << features;
    EXPECT_TRUE(has(features, "sockets: IORING_OP_RECV")) << features;
    // Both ends' reads were ring receives (200 each, less any that found the
    // kernel handing the wait back).
    EXPECT_GE(ops, 400u) << features;
    // A runtime driven by its caller's thread (workers = 0): the shared ring.
    runtime rt0({.workers = 0, .io = io_backend::io_uring});
    const auto [f0, ops0] = rt0.block_on([] { return echo_round_trips(50); });
    EXPECT_TRUE(has(f0, "shared ring")) << f0;
    EXPECT_EQ(ops0, 0u) << "the shared ring reads sockets by readiness";
}

// ---- the worker rings (uring.cpp URING-W1 - URING-W4) -----------------------

TEST(uring_owner, two_or_more_workers_get_a_ring_each_and_say_so) {
    watchdog dog;
    std::string why;
    if (!uring_available(why)) GTEST_SKIP() << "no io_uring here: " << why;
    for (const unsigned workers : {2u, 4u}) {
        runtime rt({.workers = workers, .io = io_backend::io_uring});
        const auto [features, ops] = rt.block_on([] { return echo_round_trips(100); });
        EXPECT_TRUE(has(features, "worker rings (one per worker)")) << features;
        EXPECT_TRUE(has(features, "readiness by epoll")) << features;
        EXPECT_TRUE(has(features, "sockets: IORING_OP_RECV")) << features;
        EXPECT_GE(ops, 200u) << workers << " workers: " << features;
    }
}

TEST(uring_owner, the_worker_rings_fallbacks_can_be_forced_and_still_work) {
    watchdog dog;
    std::string why;
    if (!uring_available(why)) GTEST_SKIP() << "no io_uring here: " << why;
    const forced_fallback cases[] = {
        {"defer_taskrun", "worker rings (one per worker); SINGLE_ISSUER+DEFER_TASKRUN turned off", true},
        {"defer_taskrun,coop_taskrun", "COOP_TASKRUN turned off (WEFT_IO_URING_OFF); no task-run flags;", true},
        {"recv_op", "sockets by readiness (recv_op turned off)", false},
        {"worker_rings", "shared ring; worker_rings turned off (WEFT_IO_URING_OFF)", false},
    };
    for (const unsigned workers : {2u, 4u}) run_forced(cases, workers, 60);
}

TEST(uring_owner, tasks_that_move_between_workers_keep_their_rings_straight) {
    // Many echo pairs on four workers: a task's receive goes to the ring of
    // the worker it runs on (URING-W2), its completion wakes it there, and it
    // may be stolen and run its next receive on another worker's ring. Every
    // byte arrives, in order, and the rings carried the receives.
    watchdog dog;
    std::string why;
    if (!uring_available(why)) GTEST_SKIP() << "no io_uring here: " << why;
    runtime rt({.workers = 4, .io = io_backend::io_uring});
    int pairs = sanitized || under_user_mode_emulator() ? 8 : 32;
    int rounds = sanitized || under_user_mode_emulator() ? 50 : 300;
    const std::uint64_t ops = rt.block_on([pairs, rounds] {
        std::vector<join_handle<int>> hs;
        for (int k = 0; k < pairs; ++k) {
            hs.push_back(spawn([rounds] {
                socket_pair p;
                auto echo = spawn([&p, rounds] {
                    std::array<std::byte, 8> buf{};
                    for (int i = 0; i < rounds; ++i) {
                        const std::size_t got = p.r.read_some(buf, io::after(30s));
                        if (got != 1) return;
                        (void)p.r.write_some(std::span<const std::byte>(buf.data(), got), io::after(30s));
                        if (i % 16 == 0) this_task::yield();  // a chance to be stolen
                    }
                });
                int good = 0;
                for (int i = 0; i < rounds; ++i) {
                    const char c = static_cast<char>('a' + i % 26);
                    (void)p.w.write_some(bytes(std::string_view(&c, 1)), io::after(30s));
                    std::array<std::byte, 8> buf{};
                    if (p.w.read_some(buf, io::after(30s)) == 1 && static_cast<char>(buf[0]) == c) ++good;
                }
                echo.join();
                return good;
            }));
        }
        for (auto& h : hs) EXPECT_EQ(h.join(), rounds);
        return io::detail::ops_completed(weft::detail::current_core("uring_test"));
    });
    EXPECT_GE(ops, static_cast<std::uint64_t>(pairs) * rounds) << "the receives went through the rings";
}

TEST(uring_owner, each_fallback_can_be_forced_and_still_works) {
    watchdog dog;
    std::string why;
    if (!uring_available(why)) GTEST_SKIP() << "no io_uring here: " << why;
    const forced_fallback cases[] = {
        {"defer_taskrun", "DEFER_TASKRUN turned off (WEFT_IO_URING_OFF); COOP_TASKRUN;", true},
        {"defer_taskrun,coop_taskrun", "COOP_TASKRUN turned off (WEFT_IO_URING_OFF); no task-run flags;", true},
        {"recv_op", "sockets by readiness (recv_op turned off)", false},
        {"owner_ring", "shared ring; owner_ring turned off", false},
        {"no_such_part", "owner ring", true},  // unknown names are ignored
    };
    run_forced(cases, 1, 100);
}

TEST(uring_owner, copy_stack_tasks_go_by_readiness_and_lose_nothing) {
    // A copy-stack task's frames are copied out while it waits, so the
    // kernel must not write into them: its socket calls go by readiness
    // (IO-R2), whatever the owner ring does for the default task beside it.
    watchdog dog;
    std::string why;
    if (!uring_available(why)) GTEST_SKIP() << "no io_uring here: " << why;
    runtime rt({.workers = 1, .io = io_backend::io_uring});
    rt.block_on([] {
        socket_pair p;
        const std::uint64_t before = io::detail::ops_completed(weft::detail::current_core("uring_test"));
        auto echo = spawn(
            [&p] {
                std::array<std::byte, 8> buf{};
                for (int i = 0; i < 200; ++i) {
                    const std::size_t got = p.r.read_some(buf, io::after(30s));
                    EXPECT_EQ(got, 1u);
                    (void)p.r.write_some(std::span<const std::byte>(buf.data(), got), io::after(30s));
                }
            },
            spawn_options{.copy_stack = true});
        int ok = 0;
        for (int i = 0; i < 200; ++i) {
            const char c = static_cast<char>('a' + i % 26);
            (void)p.w.write_some(bytes(std::string_view(&c, 1)), io::after(30s));
            std::array<std::byte, 8> buf{};
            if (p.w.read_some(buf, io::after(30s)) == 1 && static_cast<char>(buf[0]) == c) ++ok;
        }
        echo.join();
        EXPECT_EQ(ok, 200);
        // The default task's 200 reads were ring receives; the copy-stack
        // task's were not.
        const std::uint64_t ops = io::detail::ops_completed(weft::detail::current_core("uring_test")) - before;
        EXPECT_GE(ops, 200u);
        EXPECT_LT(ops, 400u);
    });
}

TEST(uring_owner, a_reader_is_canceled_by_a_close_from_a_plain_thread) {
    // The close comes from a thread that is not the ring's owner: its cancel
    // of the in-flight receive goes through the mailbox (URING-O2) and wakes
    // the owner asleep in the ring (URING-O4).
    // With two or more workers the receive is in the ring of the reader's
    // worker (URING-W2), and the cancel goes to that ring.
    watchdog dog;
    for (const unsigned workers : {1u, 2u, 4u}) {
        runtime rt({.workers = workers, .io = io_backend::io_uring});
        rt.block_on([workers] {
            for (int i = 0; i < 20; ++i) {
                socket_pair p;
                auto reader = blocked_read(p.r);
                std::thread([&p] { EXPECT_FALSE(p.r.close()); }).join();
                const auto [n, ec] = reader.join();
                EXPECT_EQ(n, 0u);
                EXPECT_EQ(ec, std::errc::operation_canceled) << workers << " workers, round " << i;
            }
        });
    }
}

TEST(uring_owner, spawns_from_outside_wake_a_worker_asleep_in_the_ring) {
    // Each spawn from this (outside) thread must interrupt the worker, which
    // sleeps in io_uring_enter() with nothing else to wake it (URING-O4): a
    // lost interrupt hangs a join, and the watchdog fails the test.
    // With two or more workers every worker sleeps in its own ring and a
    // spawn's wake is that ring's interrupt (SCHED-I3, URING-W4).
    watchdog dog;
    for (const unsigned workers : {1u, 2u, 4u}) {
        runtime rt({.workers = workers, .io = io_backend::io_uring});
        socket_pair p;
        auto idle_reader = rt.spawn([&p] {
            std::array<std::byte, 4> buf{};
            std::error_code ec;
            return p.r.read_some(buf, ec, io::after(60s));  // makes the ring; stays in it
        });
        const int n = sanitized || under_user_mode_emulator() ? 200 : 2000;
        int sum = 0;
        for (int i = 0; i < n; ++i) sum += rt.spawn([i] { return i % 7; }).join();
        int want = 0;
        for (int i = 0; i < n; ++i) want += i % 7;
        EXPECT_EQ(sum, want) << workers << " workers";
        (void)p.w.write_some(bytes("z"));
        EXPECT_EQ(idle_reader.join(), 1u) << workers << " workers";
    }
}

// ---- an idle read does not pin its task (IO-R2, URING-P1) ------------------

// canary fills a few KiB of a task's frames with a pattern that depends on
// its own address: a stack restored wrongly, or not at all, shows.
using canary = stack_canary<600>;

// shrunk_while_reading() spawns `read` (a task that parks in a read of an idle
// socket, its buffer in its frames, and returns whether it read what came,
// its frames intact) on rt, has it shrunk by runtime::shrink_idle(), then
// runs `send` (the data comes) and joins it. Returns what went wrong, or "".
template <class Read, class Send>
std::string shrunk_while_reading(runtime& rt, Read read, Send send) {
    const std::uint64_t shrinks = rt.stats().total().shrinks;
    const std::uint64_t restores = rt.stats().total().restores;
    const std::uint64_t ops = rt.block_on([] { return io::detail::ops_completed(weft::detail::current_core("t")); });
    std::atomic<bool> reading{false};
    auto reader = rt.spawn([&] {
        canary c;
        reading = true;
        const bool ok = read();
        return ok && c.intact();
    });
    while (!reading || reader.state() != task_state::waiting) std::this_thread::sleep_for(1ms);
    bool shrunk = false;
    for (int i = 0; i < 3000 && !shrunk; ++i) {  // about 3 s
        rt.shrink_idle();
        shrunk = rt.stats().total().shrinks > shrinks;
        if (!shrunk) std::this_thread::sleep_for(1ms);
    }
    std::string what;
    if (!shrunk) what += "the task idle in its read was not shrunk (pinned?); ";
    send();
    if (!reader.join()) what += "the read did not return what came, or the frames did not survive; ";
    if (shrunk && rt.stats().total().restores <= restores) what += "no restore counted; ";
    const std::uint64_t ops_after =
        rt.block_on([] { return io::detail::ops_completed(weft::detail::current_core("t")); });
    if (ops_after == ops) what += "the read made no ring operation (it went by readiness); ";
    return what;
}

// idle_read_is_shrunk() is shrunk_while_reading() over a socket pair's
// read_some() on a runtime of `workers` workers and backend `io`, whose
// features must contain `expect`.
void idle_read_is_shrunk(unsigned workers, io_backend io, const char* expect, const char* off = nullptr) {
    std::unique_ptr<scoped_uring_off> env;
    if (off) env = std::make_unique<scoped_uring_off>(off);
    runtime rt({.workers = workers, .io = io});  // shrink_idle() shrinks whatever the age
    const std::string features = rt.block_on([] { return std::string(io::current_backend().features); });
    ASSERT_TRUE(has(features, expect)) << features;
    socket_pair p;
    const std::string what = shrunk_while_reading(
        rt,
        [&p] {
            std::array<std::byte, 64> buf{};  // in the frames that are shrunk
            std::error_code ec;
            const std::size_t n = p.r.read_some(buf, ec, io::after(30s));
            return !ec && n == 5 && std::memcmp(buf.data(), "hello", 5) == 0;
        },
        [&p] { EXPECT_EQ(p.w.write_some(bytes("hello")), 5u); });
    EXPECT_EQ(what, "") << workers << " workers, " << (off ? off : "defaults") << ": " << features;
}

TEST(uring_idle, a_task_idle_in_a_read_on_the_owner_ring_is_shrunk) {
    watchdog dog;
    std::string why;
    if (!uring_available(why)) GTEST_SKIP() << "no io_uring here: " << why;
    idle_read_is_shrunk(1, io_backend::io_uring, "owner ring");
    idle_read_is_shrunk(1, io_backend::automatic, "IORING_OP_RECV into provided buffers");
}

TEST(uring_idle, a_task_idle_in_a_read_on_the_worker_rings_is_shrunk) {
    watchdog dog;
    std::string why;
    if (!uring_available(why)) GTEST_SKIP() << "no io_uring here: " << why;
    idle_read_is_shrunk(2, io_backend::io_uring, "worker rings (one per worker)");
    idle_read_is_shrunk(4, io_backend::io_uring, "IORING_OP_RECV into provided buffers");
}

TEST(uring_idle, without_provided_buffers_an_idle_read_waits_by_a_poll_and_is_shrunk) {
    watchdog dog;
    std::string why;
    if (!uring_available(why)) GTEST_SKIP() << "no io_uring here: " << why;
    for (const unsigned workers : {1u, 2u})
        idle_read_is_shrunk(workers, io_backend::io_uring, "IORING_OP_POLL_ADD then recv(2) (provided_buffers turned off",
                            "provided_buffers");
}

TEST(uring_idle, a_connection_idle_in_a_buffered_read_line_is_shrunk) {
    // The shape of a server's idle connection: a task per connection, in
    // read_line() of a buffered_reader over a TCP stream.
    watchdog dog;
    std::string why;
    if (!uring_available(why)) GTEST_SKIP() << "no io_uring here: " << why;
    for (const unsigned workers : {1u, 2u}) {
        runtime rt({.workers = workers, .io = workers == 1 ? io_backend::automatic : io_backend::io_uring});
        auto conn = rt.block_on([] {
            auto l = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
            auto c = io::tcp_stream::connect(l.local_endpoint(), io::after(30s));
            return std::pair(std::move(c), l.accept(io::after(30s)));
        });
        io::stream& client = conn.first;
        io::stream& server = conn.second;
        const std::string what = shrunk_while_reading(
            rt,
            [&server] {
                io::buffered_reader<io::stream> r(server);
                std::string line;
                std::error_code ec;
                (void)r.read_line(line, ec, io::after(30s));
                return !ec && line == "GET / HTTP/1.1";
            },
            [&client] { EXPECT_EQ(client.write_some(bytes("GET / HTTP/1.1\r\n")), 16u); });
        EXPECT_EQ(what, "") << workers << " workers";
    }
}

TEST(uring_idle, a_read_larger_than_a_provided_buffer_gets_a_whole_datagram_and_is_shrunk) {
    // A provided buffer holds 16 KiB: a larger read waits by the poll and
    // reads with recv(2) into the caller's buffer, so a 20,000-byte message
    // of a SOCK_SEQPACKET socket comes whole (a receive into a provided
    // buffer would have cut it, and the rest of a message is dropped), and
    // the idle reader is not pinned either.
    watchdog dog;
    std::string why;
    if (!uring_available(why)) GTEST_SKIP() << "no io_uring here: " << why;
    for (const unsigned workers : {1u, 2u}) {
        runtime rt({.workers = workers, .io = io_backend::io_uring});
        int fds[2];
        ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds), 0);
        io::handle r(fds[0]), w(fds[1]);
        const std::string message(20000, 'm');
        const std::string what = shrunk_while_reading(
            rt,
            [&r, &message] {
                std::vector<std::byte> buf(32 * 1024);
                std::error_code ec;
                const std::size_t n = r.read_some(buf, ec, io::after(30s));
                return !ec && n == message.size() && std::memcmp(buf.data(), message.data(), n) == 0;
            },
            [&w, &message] { EXPECT_EQ(w.write_some(bytes(message)), message.size()); });
        EXPECT_EQ(what, "") << workers << " workers";
        // The same once data is there at once (no wait at all).
        rt.block_on([&] {
            EXPECT_EQ(w.write_some(bytes(message)), message.size());
            std::vector<std::byte> buf(32 * 1024);
            EXPECT_EQ(r.read_some(buf, io::after(10s)), message.size());
        });
    }
}

TEST(uring_idle, reads_beyond_the_provided_buffers_fall_back_and_lose_nothing) {
    // More readers than the ring has provided buffers (four, by
    // WEFT_IO_URING_BUFFERS), all of whose data comes while the worker is
    // busy: its next polls complete the receives, the buffers run out, and
    // the rest get -ENOBUFS and read with recv(2) (URING-P1). Every reader
    // gets its own message.
    watchdog dog;
    std::string why;
    if (!uring_available(why)) GTEST_SKIP() << "no io_uring here: " << why;
    struct scoped_buffers {
        scoped_buffers() { ::setenv("WEFT_IO_URING_BUFFERS", "4", 1); }
        ~scoped_buffers() { ::unsetenv("WEFT_IO_URING_BUFFERS"); }
    } four;
    const int n = 64;
    runtime rt({.workers = 1, .io = io_backend::io_uring});
    EXPECT_TRUE(has(rt.block_on([] { return std::string(io::current_backend().features); }),
                    "IORING_OP_RECV into provided buffers (4 x 16 KiB)"));
    std::vector<std::unique_ptr<socket_pair>> pairs;
    for (int i = 0; i < n; ++i) pairs.push_back(std::make_unique<socket_pair>());
    std::atomic<int> parked{0};
    std::vector<join_handle<bool>> readers;
    for (int i = 0; i < n; ++i) {
        readers.push_back(rt.spawn([&, i] {
            std::array<std::byte, 32> buf{};
            std::error_code ec;
            parked.fetch_add(1);
            const std::size_t got = pairs[i]->r.read_some(buf, ec, io::after(30s));
            const std::string want = "message " + std::to_string(i);
            return !ec && got == want.size() && std::memcmp(buf.data(), want.data(), got) == 0;
        }));
    }
    while (parked.load() < n) std::this_thread::sleep_for(1ms);
    for (const auto& r : readers)
        while (r.state() != task_state::waiting) std::this_thread::sleep_for(1ms);
    // The worker runs a task that does not yield while every message is sent.
    std::atomic<bool> busy_runs{false}, sent{false};
    auto busy = rt.spawn([&] {
        busy_runs = true;
        while (!sent.load()) {
        }
    });
    while (!busy_runs.load()) std::this_thread::sleep_for(1ms);
    for (int i = 0; i < n; ++i) {
        const std::string m = "message " + std::to_string(i);
        ASSERT_EQ(pairs[i]->w.write_some(bytes(m)), m.size());
    }
    sent = true;
    busy.join();
    int good = 0;
    for (auto& r : readers) good += r.join() ? 1 : 0;
    EXPECT_EQ(good, n);
    const std::uint64_t nobufs =
        rt.block_on([] { return io::detail::recv_nobufs(weft::detail::current_core("uring_test")); });
    EXPECT_GT(nobufs, 0u) << "the provided buffers never ran out: the fallback was not tested";
}

TEST(uring_idle, a_read_keeps_its_deadline_close_and_cancel_semantics_in_each_mode) {
    // IO-R2 with provided buffers and with the poll: a deadline gives
    // timed_out and loses nothing (the data that comes later goes to the
    // next read), a close from another task gives operation_canceled, a
    // cancellation unwinds, the end of the stream is 0.
    watchdog dog;
    std::string why;
    if (!uring_available(why)) GTEST_SKIP() << "no io_uring here: " << why;
    for (const char* off : {"", "provided_buffers"}) {
        scoped_uring_off env(off);
        for (const unsigned workers : {1u, 2u}) {
            runtime rt({.workers = workers, .io = io_backend::io_uring});
            rt.block_on([&] {
                socket_pair p;
                std::array<std::byte, 16> buf{};
                std::error_code ec;
                const auto start = io::clock::now();
                EXPECT_EQ(p.r.read_some(buf, ec, start + 20ms), 0u);
                EXPECT_EQ(ec, std::errc::timed_out) << off << ", " << workers << " workers";
                EXPECT_GE(io::clock::now(), start + 20ms);
                (void)p.w.write_some(bytes("later"));
                EXPECT_EQ(p.r.read_some(buf, ec, io::after(10s)), 5u);
                EXPECT_FALSE(ec);
                EXPECT_EQ(std::memcmp(buf.data(), "later", 5), 0);

                auto reader = blocked_read(p.r);
                EXPECT_FALSE(p.r.close());
                const auto [n, rec] = reader.join();
                EXPECT_EQ(n, 0u);
                EXPECT_EQ(rec, std::errc::operation_canceled) << off << ", " << workers << " workers";

                socket_pair q;
                EXPECT_TRUE(cancel_unwinds([&] {
                    std::array<std::byte, 16> b{};
                    (void)q.r.read_some(b, io::after(30s));
                }));
                (void)q.w.write_some(bytes("kept"));  // the canceled read took nothing
                EXPECT_EQ(q.r.read_some(buf, io::after(10s)), 4u);
                EXPECT_EQ(std::memcmp(buf.data(), "kept", 4), 0);
                EXPECT_FALSE(q.w.close());
                EXPECT_EQ(q.r.read_some(buf, ec, io::after(10s)), 0u);
                EXPECT_FALSE(ec) << "the end of the stream";
            });
        }
    }
}

class uring_test : public io_fixture {};

TEST_P(uring_test, registrations_come_and_go_from_many_tasks_while_the_watcher_polls) {
    runtime rt(options());
    dog_.show(&rt);
    constexpr int tasks = 8;
    constexpr int rounds = 400;
    std::atomic<int> done{0};
    rt.block_on([&] {
        std::vector<weft::join_handle<void>> hs;
        for (int t = 0; t < tasks; ++t) {
            hs.push_back(spawn([&] {
                for (int i = 0; i < rounds; ++i) {
                    pipe_pair p;
                    // Half the rounds wait for a write from another task, half
                    // find the data already there; some close with data
                    // pending (a completion in flight for a dead token).
                    auto writer = spawn([&] {
                        if (i % 2) this_task::yield();
                        (void)p.w.write_some(bytes("ab"));
                    });
                    std::array<std::byte, 2> buf{};
                    std::size_t got = 0;
                    while (got < 2) got += p.r.read_some(std::span(buf).subspan(got), io::after(10s));
                    writer.join();
                    if (i % 3 == 0) (void)p.w.write_some(bytes("pending"));
                    done.fetch_add(1, std::memory_order_relaxed);
                }
            }));
        }
        for (auto& h : hs) h.join();
    });
    EXPECT_EQ(done.load(), tasks * rounds);
}

TEST_P(uring_test, a_stale_completion_for_a_closed_and_reused_fd_does_not_wake_the_new_waiter) {
    runtime rt(options());
    dog_.show(&rt);
    rt.block_on([] {
        int reused = 0;
        for (int i = 0; i < 20; ++i) {
            int old_fd;
            {
                pipe_pair p;
                old_fd = p.r.native_handle();
                // Readiness for p.r is reported (or in flight) but nobody
                // reads it: the handle closes with data pending.
                (void)p.w.write_some(bytes("stale"));
                if (i % 2) this_task::yield();
            }
            pipe_pair q;
            if (q.r.native_handle() == old_fd) ++reused;
            const auto start = io::clock::now();
            EXPECT_EQ(q.r.wait(io::interest::readable, start + 20ms), std::errc::timed_out) << "round " << i;
            EXPECT_GE(io::clock::now(), start + 20ms);
        }
        EXPECT_GT(reused, 0) << "the fd number was never reused: the test did not test anything";
    });
}

TEST_P(uring_test, readiness_is_reported_on_edges_not_while_it_lasts) {
    runtime rt(options());
    dog_.show(&rt);
    rt.block_on([] {
        pipe_pair p;
        (void)p.w.write_some(bytes("x"));
        EXPECT_FALSE(p.r.wait(io::interest::readable, io::after(1s)));
        // The byte is still there, but no new edge: a level-triggered
        // backend would wake this wait at once.
        EXPECT_EQ(p.r.wait(io::interest::readable, io::after(30ms)), std::errc::timed_out);
        // A new write is a new edge.
        auto writer = spawn([&] {
            this_task::sleep_for(5ms);
            (void)p.w.write_some(bytes("y"));
        });
        EXPECT_FALSE(p.r.wait(io::interest::readable, io::after(10s)));
        writer.join();
        std::array<std::byte, 4> buf{};
        EXPECT_EQ(p.r.read_some(buf, io::after(1s)), 2u);
    });
}

// A handle closed right after an event for it arrived: on io_uring the
// event's poll is still being delivered (the kernel's task work holds it)
// when close() asks the ring to drop it. IORING_OP_POLL_REMOVE answers
// EALREADY then and leaves the multishot poll, and its reference to the
// file, in place: the socket stayed open after close() and its peer never
// saw EOF (1 round in ~120 on 4 workers). Each round is a connection whose
// server reads until EOF and closes; the client must see that EOF.
TEST_P(uring_test, a_handle_closed_while_its_event_is_delivered_really_closes) {
    runtime rt(options());
    dog_.show(&rt);
    const int rounds = sanitized ? 100 : 600;
    int eofs = 0;
    rt.block_on([&] {
        for (int i = 0; i < rounds; ++i) {
            int sv[2];
            ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
            io::handle client(sv[0]);
            auto server = spawn([h = io::handle(sv[1])]() mutable {
                std::array<std::byte, 16> buf{};
                while (h.read_some(buf, io::after(10s)) != 0) {
                }
                (void)h.close();  // right after the hang-up's event
            });
            if (i % 2) this_task::yield();  // the server waits first, or not
            EXPECT_EQ(client.write_some(bytes("x")), 1u);
            ASSERT_EQ(::shutdown(client.native_handle(), SHUT_WR), 0);
            std::array<std::byte, 1> one{};
            std::error_code ec;
            const std::size_t n = client.read_some(one, ec, io::after(10s));
            ASSERT_FALSE(ec) << "round " << i << ": the server closed its end, but no EOF came: " << ec.message();
            EXPECT_EQ(n, 0u);
            server.join();
            ++eofs;
        }
    });
    EXPECT_EQ(eofs, rounds);
}

INSTANTIATE_TEST_SUITE_P(io, uring_test, io_params(), io_param_name);

}  // namespace
}  // namespace weft::test
