// file_test.cpp: weft::io::file, read and written at offsets from many
// tasks at once through the blocking pool.

#include <unistd.h>

#include <array>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "io_test_support.hpp"
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

INSTANTIATE_TEST_SUITE_P(io, file_test, io_params(), io_param_name);

}  // namespace
}  // namespace weft::test
