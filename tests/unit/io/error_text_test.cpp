// error_text_test.cpp: the errors weft decides itself say what happened and
// what to do (IO-E1, src/io/reactor.hpp): a wait that reached its deadline
// names the call and the deadline, not only ETIMEDOUT's "Connection timed
// out"; a socket used from a task of another runtime says so, not only
// "Invalid argument". Both still compare equal to their std::errc and keep
// the errno value, so older comparisons hold.

#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <system_error>

#include "io_test_support.hpp"
#include "weft/io/socket.hpp"
#include "weft/runtime.hpp"

namespace weft::test {
namespace {

using namespace std::chrono_literals;

// thrown_what() runs f and returns the what() of the std::system_error it
// throws (its code in *code), or "" if it throws none.
template <class F>
std::string thrown_what(F&& f, std::error_code* code) {
    try {
        f();
    } catch (const std::system_error& e) {
        *code = e.code();
        return e.what();
    }
    return "";
}

bool holds(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

TEST(io_error_text, a_read_that_reaches_its_deadline_names_the_call_and_the_deadline) {
    weft::runtime rt({.workers = 1});
    rt.block_on([] {
        auto l = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
        auto c = io::tcp_stream::connect(l.local_endpoint(), io::after(10s));
        auto s = l.accept(io::after(10s));
        std::array<std::byte, 8> buf;
        std::error_code code;
        const std::string what = thrown_what([&] { (void)c.read_some(buf, io::after(20ms)); }, &code);
        EXPECT_TRUE(holds(what, "weft::io::stream::read_some")) << what;
        EXPECT_TRUE(holds(what, "the deadline passed")) << what;
        EXPECT_FALSE(holds(what, "Connection timed out")) << what;
        EXPECT_EQ(code, std::errc::timed_out);
        EXPECT_EQ(code.value(), ETIMEDOUT);
        // The error_code form: the same code, and its message says the same.
        std::error_code ec;
        (void)c.read_some(buf, ec, io::after(20ms));
        EXPECT_EQ(ec, std::errc::timed_out);
        EXPECT_TRUE(holds(ec.message(), "the deadline passed")) << ec.message();
        // An accept too.
        const std::string accept_what = thrown_what([&] { (void)l.accept(io::after(20ms)); }, &code);
        EXPECT_TRUE(holds(accept_what, "weft::io::listener::accept: the deadline passed")) << accept_what;
        EXPECT_EQ(code, std::errc::timed_out);
    });
}

TEST(io_error_text, a_plain_threads_wait_reports_its_deadline_the_same_way) {
    auto l = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
    std::error_code code;
    const std::string what = thrown_what([&] { (void)l.accept(io::after(20ms)); }, &code);
    EXPECT_TRUE(holds(what, "weft::io::listener::accept: the deadline passed")) << what;
    EXPECT_EQ(code, std::errc::timed_out);
}

TEST(io_error_text, a_socket_of_another_runtime_says_so) {
    weft::runtime a({.workers = 1});
    weft::runtime b({.workers = 1});
    socket_pair p;
    // A wait in a task of `a` registers the socket with a's reactor.
    a.block_on([&] {
        std::array<std::byte, 8> buf;
        std::error_code ec;
        (void)p.r.read_some(buf, ec, io::after(1ms));
        EXPECT_EQ(ec, std::errc::timed_out);
    });
    b.block_on([&] {
        std::array<std::byte, 8> buf;
        std::error_code ec;
        (void)p.r.read_some(buf, ec, io::after(1s));
        EXPECT_EQ(ec, std::errc::invalid_argument);
        EXPECT_EQ(ec.value(), EINVAL);
        EXPECT_TRUE(holds(ec.message(), "belongs to another runtime")) << ec.message();
        EXPECT_TRUE(holds(ec.message(), "use it from a task of the runtime that made it")) << ec.message();
        std::error_code code;
        const std::string what = thrown_what([&] { (void)p.r.read_some(buf, io::after(1s)); }, &code);
        EXPECT_TRUE(holds(what, "weft::io::handle::read_some: this socket belongs to another runtime")) << what;
    });
}

}  // namespace
}  // namespace weft::test
