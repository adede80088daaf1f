// weft_bench_echo_asio: the R8 echo server in Boost.Asio (Debian's Boost
// 1.74), written as its C++20 coroutine examples are: co_spawn of an
// awaitable<void> session per connection, use_awaitable everywhere, one
// io_context run by --threads threads (1 for the one-core row). Each
// session reads what is there into a 16 KiB buffer and writes it back whole
// (async_read_some, async_write), as the Go and weft servers do; TCP_NODELAY
// on every connection (Go's default).
//
//   weft_bench_echo_asio [--port P] [--threads N] [--max-seconds S]
//
// Prints "listening on <port>" when ready; exits after --max-seconds.
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;

namespace {

awaitable<void> session(tcp::socket s) {
    std::array<char, 16 * 1024> buf;
    try {
        for (;;) {
            std::size_t n = co_await s.async_read_some(asio::buffer(buf), use_awaitable);
            co_await asio::async_write(s, asio::buffer(buf.data(), n), use_awaitable);
        }
    } catch (const std::exception&) {
        // eof or reset: the session ends
    }
}

awaitable<void> listen(tcp::acceptor& acceptor) {
    for (;;) {
        boost::system::error_code ec;
        tcp::socket s = co_await acceptor.async_accept(asio::redirect_error(use_awaitable, ec));
        if (ec) {
            // EMFILE and the like: wait a little and go on
            asio::steady_timer t(acceptor.get_executor(), std::chrono::milliseconds(10));
            co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
            continue;
        }
        s.set_option(tcp::no_delay(true), ec);
        asio::co_spawn(acceptor.get_executor(), session(std::move(s)), asio::detached);
    }
}

}  // namespace

int main(int argc, char** argv) {
    unsigned short port = 0;
    int threads = 1;
    int max_seconds = 3600;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--port" && i + 1 < argc) {
            port = static_cast<unsigned short>(std::atoi(argv[++i]));
        } else if ((a == "--threads" || a == "--workers") && i + 1 < argc) {
            threads = std::atoi(argv[++i]);
        } else if (a == "--max-seconds" && i + 1 < argc) {
            max_seconds = std::atoi(argv[++i]);
        } else {
            std::fprintf(stderr, "usage: %s [--port P] [--threads N] [--max-seconds S]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1 || threads > 64) threads = 1;

    asio::io_context ctx(threads);
    tcp::acceptor acceptor(ctx, tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    std::printf("listening on %u\n", static_cast<unsigned>(acceptor.local_endpoint().port()));
    std::fflush(stdout);

    std::thread([max_seconds] {
        std::this_thread::sleep_for(std::chrono::seconds(max_seconds));
        std::_Exit(0);
    }).detach();

    asio::co_spawn(ctx, listen(acceptor), asio::detached);
    std::vector<std::thread> more;
    for (int i = 1; i < threads; ++i) more.emplace_back([&ctx] { ctx.run(); });
    ctx.run();
    for (auto& t : more) t.join();
}
