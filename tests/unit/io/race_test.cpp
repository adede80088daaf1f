// race_test.cpp: the races of an IO wait (reactor.hpp REACTOR-R3 - REACTOR-R7): readiness
// against the deadline, against close() from another task, and against
// cancellation, each many times, over a pipe (a readiness wait on every
// backend) and over a socket pair (on the io_uring owner ring, one worker,
// an IORING_OP_RECV in flight: handle.cpp IO-R2). Whatever wins, nothing is
// lost: data that arrived stays readable, and every wait ends exactly once
// with one outcome.

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>

#include "io_test_support.hpp"

namespace weft::test {
namespace {

using namespace std::chrono_literals;

class io_race_test : public io_fixture {};

int rounds() { return sanitized || under_user_mode_emulator() ? 100 : 1000; }

template <class Pair>
void readiness_against_the_deadline(const runtime_options& o) {
    runtime rt(o);
    const auto [got, timed_out] = rt.block_on([] {
        int got = 0, timed = 0;
        for (int i = 0; i < rounds(); ++i) {
            Pair p;
            const auto deadline = io::clock::now() + std::chrono::microseconds(50 + i % 100);
            auto writer = spawn([&p, i] {
                if (i % 3) this_task::sleep_for(std::chrono::microseconds(i % 150));
                (void)p.w.write_some(bytes("d"));
            });
            std::array<std::byte, 4> buf{};
            std::error_code ec;
            std::size_t n = p.r.read_some(buf, ec, deadline);
            writer.join();
            if (ec) {
                EXPECT_EQ(ec, std::errc::timed_out);
                ++timed;
                // The byte that came too late is still there.
                n = p.r.read_some(buf, io::after(10s));
            } else {
                ++got;
            }
            EXPECT_EQ(n, 1u);
        }
        return std::make_pair(got, timed);
    });
    EXPECT_EQ(got + timed_out, rounds());
}

TEST_P(io_race_test, readiness_against_the_deadline_loses_no_data) {
    readiness_against_the_deadline<pipe_pair>(options());
    readiness_against_the_deadline<socket_pair>(options());
}

template <class Pair>
void close_against_readiness(const runtime_options& o) {
    runtime rt(o);
    const int done = rt.block_on([] {
        int ended = 0;
        for (int i = 0; i < rounds(); ++i) {
            Pair p;
            std::atomic<bool> started{false};
            auto reader = spawn([&] {
                std::array<std::byte, 4> buf{};
                std::error_code ec;
                started = true;
                const std::size_t n = p.r.read_some(buf, ec, io::after(30s));
                // Either the byte, or the close, or (closed before the read
                // began) a closed handle.
                if (!ec) return n == 1;
                return ec == std::errc::operation_canceled || ec == std::errc::bad_file_descriptor;
            });
            while (!started) this_task::yield();
            if (i % 2) (void)p.w.write_some(bytes("c"));
            if (i % 4 < 2) this_task::yield();
            EXPECT_FALSE(p.r.close());
            if (reader.join()) ++ended;
        }
        return ended;
    });
    EXPECT_EQ(done, rounds());
}

TEST_P(io_race_test, close_against_readiness_ends_every_wait_once) {
    close_against_readiness<pipe_pair>(options());
    close_against_readiness<socket_pair>(options());
}

template <class Pair>
void cancellation_against_readiness(const runtime_options& o) {
    runtime rt(o);
    const int rest = rt.block_on([] {
        int ok = 0;
        for (int i = 0; i < rounds(); ++i) {
            Pair p;
            std::atomic<bool> started{false};
            auto reader = spawn([&] {
                std::array<std::byte, 1> buf{};
                started = true;
                return p.r.read_some(buf, io::after(30s));
            });
            while (!started) this_task::yield();
            if (i % 3 == 0) this_task::yield();
            (void)p.w.write_some(bytes("k"));
            reader.cancel();
            std::size_t read_by_task = 0;
            try {
                read_by_task = reader.join();
            } catch (const task_canceled&) {
            }
            // The byte was read by the task or is still in the pipe: once.
            std::array<std::byte, 4> buf{};
            std::error_code ec;
            const std::size_t left = p.r.read_some(buf, ec, io::clock::now() + 2ms);
            if (read_by_task + left == 1) ++ok;
        }
        return ok;
    });
    EXPECT_EQ(rest, rounds());
}

TEST_P(io_race_test, cancellation_against_readiness_keeps_the_data) {
    cancellation_against_readiness<pipe_pair>(options());
    cancellation_against_readiness<socket_pair>(options());
}

INSTANTIATE_TEST_SUITE_P(io, io_race_test, io_params(), io_param_name);

}  // namespace
}  // namespace weft::test
