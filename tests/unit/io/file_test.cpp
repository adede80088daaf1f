// file_test.cpp: weft::io::file, read and written at offsets from many
// tasks at once, through the ring on io_uring and through the blocking pool
// on epoll; and, on io_uring, a read still pending in the kernel (a FIFO
// with no data) that a deadline or a cancellation ends: the call returns or
// unwinds only after the operation's completion (IO-F1 in src/io/file.cpp), so
// the buffer is never written afterwards.

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "io_test_support.hpp"
#include "reactor.hpp"
#include "weft/io/file.hpp"

namespace weft::test {
namespace {

using namespace std::chrono_literals;

constexpr int tasks = 16;
constexpr std::size_t block = 64 * 1024;

class file_test : public io_fixture {
protected:
    void SetUp() override {
        io_fixture::SetUp();
        char tmpl[] = "/tmp/weft_file_test_XXXXXX";
        const int fd = ::mkstemp(tmpl);
        ASSERT_GE(fd, 0);
        ::close(fd);
        path_ = tmpl;
    }
    void TearDown() override {
        ::unlink(path_.c_str());
        io_fixture::TearDown();
    }
    std::string path_;
};

TEST_P(file_test, blocks_written_by_many_tasks_read_back_the_same) {
    runtime rt(options());
    const bool ok = rt.block_on([&] {
        io::file f = io::file::open(path_, O_RDWR);
        std::vector<join_handle<void>> hs;
        for (int i = 0; i < tasks; ++i)
            hs.push_back(spawn([&f, i] {
                std::vector<std::byte> b(block, std::byte(i + 1));
                EXPECT_EQ(f.write_at(b, std::uint64_t(i) * block), block);
            }));
        for (auto& h : hs) h.join();
        std::error_code ec;
        EXPECT_EQ(f.size(ec), tasks * block);
        bool all = true;
        std::vector<std::byte> b(block);
        for (int i = 0; i < tasks; ++i) {
            EXPECT_EQ(f.read_at(b, std::uint64_t(i) * block), block);
            for (std::byte x : b) all = all && x == std::byte(i + 1);
        }
        // At the end: 0 bytes, not an error.
        EXPECT_EQ(f.read_at(b, std::uint64_t(tasks) * block, ec), 0u);
        EXPECT_FALSE(ec);
        return all;
    });
    EXPECT_TRUE(ok);
}

TEST_P(file_test, a_deadline_already_passed_reports_timed_out_and_misuse_is_an_error) {
    runtime rt(options());
    rt.block_on([&] {
        io::file f = io::file::open(path_, O_RDWR);
        std::array<std::byte, 8> b{};
        std::error_code ec;
        EXPECT_EQ(f.read_at(b, 0, ec, io::clock::now() - 1ms), 0u);
        EXPECT_EQ(ec, std::errc::timed_out);
        EXPECT_FALSE(f.close());
        EXPECT_EQ(f.read_at(b, 0, ec), 0u);
        EXPECT_EQ(ec, std::errc::bad_file_descriptor);
        EXPECT_EQ(f.close(), std::errc::bad_file_descriptor);
        (void)io::file::open("/nonexistent/weft", O_RDONLY, ec);
        EXPECT_EQ(ec, std::errc::no_such_file_or_directory);
        EXPECT_THROW((void)io::file::open("/nonexistent/weft", O_RDONLY), std::system_error);
    });
}

// ops() is how many ring operations the calling task's runtime completed.
std::uint64_t ops() { return io::detail::ops_completed(weft::detail::current_core("file_test ops()")); }

TEST_P(file_test, reads_and_writes_go_through_the_ring_on_io_uring_and_through_the_pool_on_epoll) {
    runtime rt(options());
    rt.block_on([&] {
        io::file f = io::file::open(path_, O_RDWR);
        // io_uring is available where weft is tested (and built with
        // liburing): the io_uring instances must really get it.
        const bool ring = backend() == io_backend::io_uring && WEFT_TEST_HAVE_LIBURING;
        EXPECT_STREQ(io::current_backend().name, ring ? "io_uring" : "epoll");
        const std::uint64_t before = ops();
        EXPECT_EQ(f.write_at(bytes("weft ring"), 3), 9u);
        std::array<std::byte, 16> b{};
        EXPECT_EQ(f.read_at(b, 3), 9u);
        EXPECT_EQ(std::memcmp(b.data(), "weft ring", 9), 0);
        // One completion per call on the ring; none on epoll (the pool did it).
        EXPECT_EQ(ops() - before, ring ? 2u : 0u);
    });
}

// fifo_test: a named pipe in /tmp, opened O_RDWR (so open does not block
// and a read with no data stays pending). Only for the io_uring instances:
// on epoll the pool's pread would block forever.
class fifo_test : public file_test {
protected:
    void SetUp() override {
        file_test::SetUp();
        fifo_ = path_ + ".fifo";
        ASSERT_EQ(::mkfifo(fifo_.c_str(), 0600), 0) << std::strerror(errno);
    }
    void TearDown() override {
        ::unlink(fifo_.c_str());
        file_test::TearDown();
    }
    // ring_selected() fails the test unless io_uring was really selected
    // (it is available on the machines weft is tested on).
    bool ring_selected() {
        EXPECT_STREQ(io::current_backend().name, "io_uring") << io::current_backend().fallback_reason;
        return std::strcmp(io::current_backend().name, "io_uring") == 0;
    }
    // data_written_later_goes_to_the_next_read() writes to the FIFO behind the call's back, gives
    // a late completion time to write `b`, checks `b` is unchanged, then
    // reads the data back through the ring.
    static void data_written_later_goes_to_the_next_read(io::file& f, std::array<std::byte, 8>& b) {
        ASSERT_EQ(::write(f.native_handle(), "abcdefgh", 8), 8);
        this_task::sleep_for(30ms);
        for (std::byte x : b) EXPECT_EQ(x, std::byte{0x55}) << "the buffer was written after the call ended";
        std::array<std::byte, 8> c{};
        std::error_code ec;
        EXPECT_EQ(f.read_at(c, 0, ec, io::after(5s)), 8u);
        EXPECT_FALSE(ec) << ec.message();
        EXPECT_EQ(std::memcmp(c.data(), "abcdefgh", 8), 0);
    }
    // on_fifo() runs f(file, b) in a task of a runtime of this instance once
    // io_uring is known to be selected: the FIFO opened, and `b` 8 bytes of
    // 0x55 for a read that stays pending.
    template <class F>
    void on_fifo(F f) {
        runtime rt(options());
        rt.block_on([&] {
            if (!ring_selected()) return;
            io::file file = io::file::open(fifo_, O_RDWR);
            std::array<std::byte, 8> b;
            b.fill(std::byte{0x55});
            f(file, b);
        });
    }
    std::string fifo_;
};

TEST_P(fifo_test, a_deadline_passing_while_a_read_is_pending_returns_timed_out_after_its_completion) {
    on_fifo([](io::file& f, std::array<std::byte, 8>& b) {
        const std::uint64_t before = ops();
        std::error_code ec;
        const auto t0 = io::clock::now();
        EXPECT_EQ(f.read_at(b, 0, ec, io::after(50ms)), 0u);
        EXPECT_EQ(ec, std::errc::timed_out) << ec.message();
        EXPECT_GE(io::clock::now() - t0, 50ms);
        // IO-F1: the read's own completion (canceled) arrived before the return.
        EXPECT_EQ(ops() - before, 1u);
        data_written_later_goes_to_the_next_read(f, b);
    });
}

TEST_P(fifo_test, a_task_canceled_in_a_pending_read_unwinds_after_its_completion) {
    on_fifo([](io::file& f, std::array<std::byte, 8>& b) {
        std::atomic<bool> started{false};
        std::atomic<std::uint64_t> at_unwind{0};
        const std::uint64_t before = ops();
        auto h = spawn([&] {
            struct on_unwind {
                std::atomic<std::uint64_t>& out;
                ~on_unwind() { out = ops(); }
            } g{at_unwind};
            started = true;
            (void)f.read_at(b, 0);
            ADD_FAILURE() << "the read returned without data";
        });
        while (!started) this_task::sleep_for(1ms);
        this_task::sleep_for(30ms);  // the read is submitted and pending
        EXPECT_EQ(ops() - before, 0u);
        h.cancel();
        EXPECT_THROW(h.join(), task_canceled);
        // IO-F1: the read's completion had arrived when the task unwound.
        EXPECT_EQ(at_unwind.load() - before, 1u);
        data_written_later_goes_to_the_next_read(f, b);
    });
}

TEST_P(fifo_test, a_runtime_stopped_while_a_read_is_pending_ends_it_after_its_completion) {
    io::file f;
    std::array<std::byte, 8> b;
    b.fill(std::byte{0x55});
    std::atomic<bool> started{false};
    {
        runtime rt(options());
        f = rt.block_on([&] {
            EXPECT_TRUE(ring_selected());
            return io::file::open(fifo_, O_RDWR);
        });
        auto h = rt.spawn([&] {
            started = true;
            (void)f.read_at(b, 0);
        });
        // Without workers the task runs only when driven: run_once() runs it
        // up to its wait in the read.
        while (!started) workers() == 0 ? (void)rt.run_once() : std::this_thread::sleep_for(1ms);
        std::this_thread::sleep_for(30ms);  // the read is submitted and pending
        rt.stop();  // cancels the task: IO-F1 waits for the read's completion
        EXPECT_THROW(h.join(), task_canceled);
    }
    // Outside a task now: a plain write and read of the FIFO.
    ASSERT_EQ(::write(f.native_handle(), "abcdefgh", 8), 8);
    std::this_thread::sleep_for(30ms);
    for (std::byte x : b) EXPECT_EQ(x, std::byte{0x55}) << "the buffer was written after the task ended";
    std::array<std::byte, 8> c{};
    EXPECT_EQ(::read(f.native_handle(), c.data(), c.size()), 8);
    EXPECT_EQ(std::memcmp(c.data(), "abcdefgh", 8), 0);
}

// The io_uring instances only (see fifo_test), in builds with liburing (the
// AArch64 cross build has none: there io_uring falls back to epoll, and the
// pool's pread of an empty FIFO would never return).
#if WEFT_TEST_HAVE_LIBURING
INSTANTIATE_TEST_SUITE_P(io, fifo_test,
                         ::testing::Combine(::testing::Values(0u, 1u, 2u, 4u), ::testing::Values(io_backend::io_uring)),
                         io_param_name);
#else
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(fifo_test);
#endif

INSTANTIATE_TEST_SUITE_P(io, file_test, io_params(), io_param_name);

}  // namespace
}  // namespace weft::test
