// deadline_scope_io_test.cpp: a socket read inside this_task::move_on_after()
// (weft/task.hpp, SCOPE-D1 in src/task/task.cpp) ends at the scope's
// deadline on both backends (on io_uring the read is a ring operation,
// waited out before the wait returns, IO-R2), and the handle stays usable:
// the bytes written afterwards are read in full by a read outside the scope.

#include <array>
#include <chrono>
#include <cstring>

#include "io_test_support.hpp"

namespace weft::test {
namespace {

using namespace std::chrono_literals;

class deadline_scope_io_test : public io_fixture {};

TEST_P(deadline_scope_io_test, a_socket_read_ends_at_the_deadline_and_the_handle_stays_usable) {
    weft::runtime rt(options());
    const bool ok = rt.block_on([] {
        socket_pair p;
        std::array<std::byte, 16> buf{};
        std::size_t n = 99;
        const auto start = std::chrono::steady_clock::now();
        const bool cut = this_task::move_on_after(30ms, [&] {
            std::error_code ec;
            n = p.r.read_some(buf, ec);
        });
        const auto took = std::chrono::steady_clock::now() - start;
        EXPECT_TRUE(cut);
        EXPECT_EQ(n, 99u);
        EXPECT_GE(took, 30ms);
        EXPECT_LT(took, 10s);
        const char msg[] = "hello";
        std::error_code ec;
        EXPECT_EQ(p.w.write_some(std::as_bytes(std::span(msg, 5)), ec), 5u);
        n = p.r.read_some(buf, ec, io::after(10s));
        return !ec && n == 5 && std::memcmp(buf.data(), "hello", 5) == 0;
    });
    EXPECT_TRUE(ok);
}

INSTANTIATE_TEST_SUITE_P(io, deadline_scope_io_test, io_params(), io_param_name);

}  // namespace
}  // namespace weft::test
