// handle_test.cpp: weft::io::handle on pipes and eventfds: waits that
// complete, time out, are canceled, or end because another task closed the
// handle; readiness seen while every worker is busy; the backend in use.

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>

#include "io_test_support.hpp"
#include "weft/sync.hpp"

namespace weft::test {
namespace {

using namespace std::chrono_literals;

class handle_test : public io_fixture {};

TEST_P(handle_test, a_read_waits_for_a_write_from_another_task) {
    runtime rt(options());
    const std::string got = rt.block_on([] {
        pipe_pair p;
        auto writer = spawn([&] {
            this_task::sleep_for(5ms);
            (void)p.w.write_some(bytes("hello"));
        });
        std::array<std::byte, 16> buf{};
        const std::size_t n = p.r.read_some(buf, io::after(10s));
        writer.join();
        return std::string(reinterpret_cast<const char*>(buf.data()), n);
    });
    EXPECT_EQ(got, "hello");
}

TEST_P(handle_test, a_wait_times_out_at_its_deadline_and_not_before) {
    runtime rt(options());
    rt.block_on([] {
        pipe_pair p;
        const auto start = io::clock::now();
        const auto deadline = start + 20ms;
        std::array<std::byte, 4> buf{};
        std::error_code ec;
        EXPECT_EQ(p.r.read_some(buf, ec, deadline), 0u);
        EXPECT_EQ(ec, std::errc::timed_out);
        EXPECT_GE(io::clock::now(), deadline);
        // The handle is still usable afterwards.
        (void)p.w.write_some(bytes("x"));
        EXPECT_EQ(p.r.read_some(buf, io::after(10s)), 1u);
    });
}

TEST_P(handle_test, closing_from_another_task_wakes_the_reader_with_an_error) {
    runtime rt(options());
    rt.block_on([] {
        pipe_pair p;
        auto reader = blocked_read(p.r);
        EXPECT_FALSE(p.r.close());
        auto [n, ec] = reader.join();
        EXPECT_EQ(n, 0u);
        EXPECT_EQ(ec, std::errc::operation_canceled);
        EXPECT_FALSE(p.r.is_open());
    });
}

TEST_P(handle_test, canceling_a_blocked_read_unwinds_the_task) {
    runtime rt(options());
    rt.block_on([] {
        pipe_pair p;
        EXPECT_TRUE(cancel_unwinds([&] {
            std::array<std::byte, 4> buf{};
            (void)p.r.read_some(buf);
        }));
        // The registration is intact: a read still works.
        (void)p.w.write_some(bytes("y"));
        std::array<std::byte, 4> buf{};
        EXPECT_EQ(p.r.read_some(buf, io::after(10s)), 1u);
    });
}

TEST_P(handle_test, many_pipes_ping_pong_in_both_directions) {
    runtime rt(options());
    constexpr int pairs = 32;
    int rounds = sanitized ? 50 : 300;  // not const: clang would not need the capture
    const long total = rt.block_on([&] {
        std::vector<join_handle<long>> hs;
        for (int i = 0; i < pairs; ++i) {
            hs.push_back(spawn([rounds] {
                pipe_pair a, b;
                auto echo = spawn([&] {
                    std::array<std::byte, 8> buf{};
                    for (int r = 0; r < rounds; ++r) {
                        const std::size_t n = a.r.read_some(buf, io::after(30s));
                        (void)b.w.write_some(std::span(buf.data(), n), io::after(30s));
                    }
                });
                long sum = 0;
                for (int r = 0; r < rounds; ++r) {
                    std::uint32_t v = static_cast<std::uint32_t>(r), back = 0;
                    (void)a.w.write_some(std::as_bytes(std::span(&v, 1)), io::after(30s));
                    std::array<std::byte, 4> buf{};
                    std::size_t got = 0;
                    while (got < 4) got += b.r.read_some(std::span(buf).subspan(got), io::after(30s));
                    std::memcpy(&back, buf.data(), 4);
                    sum += back;
                }
                echo.join();
                return sum;
            }));
        }
        long s = 0;
        for (auto& h : hs) s += h.join();
        return s;
    });
    EXPECT_EQ(total, long(pairs) * rounds * (rounds - 1) / 2);
}

TEST_P(handle_test, readiness_is_seen_while_every_worker_is_busy) {
    runtime rt(options());
    rt.block_on([&] {
        pipe_pair p;
        std::atomic<bool> stop{false};
        std::vector<join_handle<void>> spinners;
        // As many yielding spinners as workers (at least one): no worker sleeps.
        for (unsigned i = 0; i < std::max(1u, workers()); ++i)
            spinners.push_back(spawn([&] {
                while (!stop.load()) this_task::yield();
            }));
        auto reader = spawn([&] {
            std::array<std::byte, 4> buf{};
            return p.r.read_some(buf, io::after(30s));
        });
        while (reader.state() != task_state::waiting) this_task::yield();
        (void)p.w.write_some(bytes("z"));
        EXPECT_EQ(reader.join(), 1u);
        stop = true;
        for (auto& s : spinners) s.join();
    });
}

TEST_P(handle_test, an_eventfd_written_by_a_plain_thread_wakes_a_task) {
    runtime rt(options());
    rt.block_on([] {
        io::handle ev(::eventfd(0, EFD_CLOEXEC));
        const int fd = ev.native_handle();
        std::thread t([fd] {
            std::this_thread::sleep_for(10ms);
            const std::uint64_t one = 1;
            (void)!::write(fd, &one, sizeof one);
        });
        std::uint64_t v = 0;
        const std::size_t n = ev.read_some(std::as_writable_bytes(std::span(&v, 1)), io::after(30s));
        t.join();
        EXPECT_EQ(n, 8u);
        EXPECT_EQ(v, 1u);
    });
}

TEST_P(handle_test, a_plain_thread_can_wait_on_a_handle) {
    pipe_pair p;
    std::array<std::byte, 4> buf{};
    std::error_code ec;
    EXPECT_EQ(p.r.read_some(buf, ec, io::after(10ms)), 0u);
    EXPECT_EQ(ec, std::errc::timed_out);
    (void)p.w.write_some(bytes("ab"));
    EXPECT_EQ(p.r.read_some(buf, io::after(10s)), 2u);
}

TEST_P(handle_test, the_backend_is_the_one_asked_for_or_says_why_not) {
    runtime rt(options());
    const io::backend_info b = rt.block_on([] { return io::current_backend(); });
    if (backend() == io_backend::epoll) {
        EXPECT_STREQ(b.name, "epoll");
        EXPECT_STREQ(b.fallback_reason, "");
    } else if (std::string_view(b.name) == "epoll") {
        EXPECT_STRNE(b.fallback_reason, "") << "fell back to epoll without a reason";
    } else {
        EXPECT_STREQ(b.name, "io_uring");
    }
}

TEST_P(handle_test, misuse_reports_bad_file_descriptor) {
    EXPECT_THROW(io::handle(-1), std::system_error);
    io::handle h;
    EXPECT_EQ(h.close(), std::errc::bad_file_descriptor);
    EXPECT_EQ(h.wait(io::interest::readable), std::errc::bad_file_descriptor);
    EXPECT_EQ(h.release(), -1);
}

INSTANTIATE_TEST_SUITE_P(io, handle_test, io_params(), io_param_name);

// A game loop: a runtime without workers, driven only by run_once(), sees
// IO readiness on its ticks (run_once() polls without waiting).
class game_loop_io_test : public leak_checked, public ::testing::WithParamInterface<io_backend> {
protected:
    watchdog dog_;
};

TEST_P(game_loop_io_test, run_once_ticks_complete_a_read) {
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    io::handle w(fds[1]);
    runtime loop({.workers = 0, .io = GetParam()});
    std::atomic<int> got{-1};
    auto reader = loop.spawn([&got, fd = fds[0]] {
        io::handle r(fd);
        std::array<std::byte, 8> buf{};
        got = static_cast<int>(r.read_some(buf, io::after(30s)));
    });
    // Ticks before the write: the reader waits, the loop returns at once.
    for (int i = 0; i < 5; ++i) (void)loop.run_once();
    EXPECT_EQ(got.load(), -1);
    EXPECT_EQ(reader.state(), task_state::waiting);
    (void)w.write_some(bytes("tick"));
    for (int i = 0; i < 100000 && got.load() < 0; ++i) {
        if (loop.run_once() == 0) std::this_thread::sleep_for(100us);
    }
    EXPECT_EQ(got.load(), 4);
    reader.join();
}

INSTANTIATE_TEST_SUITE_P(io, game_loop_io_test, ::testing::Values(io_backend::epoll, io_backend::io_uring),
                         [](const ::testing::TestParamInfo<io_backend>& i) {
                             return std::string(i.param == io_backend::epoll ? "epoll" : "uring");
                         });

}  // namespace
}  // namespace weft::test
