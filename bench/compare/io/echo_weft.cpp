// weft_bench_echo: the R8 echo server on weft (weft/io/socket.hpp), the
// benchmark's own copy of what examples/11_echo_server.cpp does with
// --serve: a listener on 127.0.0.1, one weft::spawn per connection, each
// task reading what is there into a 16 KiB buffer and writing it back whole
// (read_some, write_all), as the Go and Boost.Asio servers do; TCP_NODELAY
// on every connection (Go's default).
//
//   weft_bench_echo [--port P] [--workers W] [--max-seconds S]
//
// --workers 1 (default) for the one-core row, 2 for the two-worker row; 0
// runs the tasks on the main thread (block_on drives the runtime).
// Prints "listening on <port>" when ready; exits after --max-seconds.
#include <weft/io/socket.hpp>
#include <weft/runtime.hpp>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <system_error>
#include <thread>

namespace {

void session(weft::io::stream s) {
    std::array<std::byte, 16 * 1024> buf;
    std::error_code ec;
    s.set_no_delay(true);
    for (;;) {
        const std::size_t n = s.read_some(buf, ec);
        if (ec || n == 0) break;
        s.write_all(std::span<const std::byte>(buf.data(), n), ec);
        if (ec) break;
    }
    s.close();
}

}  // namespace

int main(int argc, char** argv) {
    unsigned port = 0;
    unsigned workers = 1;
    int max_seconds = 3600;
    weft::io_backend io = weft::io_backend::automatic;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--port" && i + 1 < argc) {
            port = static_cast<unsigned>(std::atoi(argv[++i]));
        } else if ((a == "--workers" || a == "--threads") && i + 1 < argc) {
            workers = static_cast<unsigned>(std::atoi(argv[++i]));
        } else if (a == "--max-seconds" && i + 1 < argc) {
            max_seconds = std::atoi(argv[++i]);
        } else if (a == "--io" && i + 1 < argc) {
            const std::string b = argv[++i];
            io = b == "epoll" ? weft::io_backend::epoll
                 : b == "io_uring" ? weft::io_backend::io_uring
                                   : weft::io_backend::automatic;
        } else if (a == "--serve") {
            // accepted for the example's command line
        } else {
            std::fprintf(stderr, "usage: %s [--port P] [--workers W] [--io auto|epoll|io_uring] [--max-seconds S]\n", argv[0]);
            return 2;
        }
    }
    if (port > 65535 || workers > 64) {
        std::fprintf(stderr, "weft_bench_echo: bad --port or --workers\n");
        return 2;
    }

    std::thread([max_seconds] {
        std::this_thread::sleep_for(std::chrono::seconds(max_seconds));
        std::_Exit(0);
    }).detach();

    weft::runtime rt({.workers = workers, .io = io});
    rt.block_on([port] {
        auto l = weft::io::tcp_listener::bind(weft::io::endpoint::loopback_v4(static_cast<std::uint16_t>(port)));
        std::printf("listening on %u\n", static_cast<unsigned>(l.local_endpoint().port()));
        std::fflush(stdout);
        for (;;) {
            std::error_code ec;
            weft::io::stream s = l.accept(ec);
            if (ec) {
                // EMFILE and the like: the listener stays usable.
                weft::this_task::sleep_for(std::chrono::milliseconds(10));
                continue;
            }
            weft::spawn([s = std::move(s)]() mutable { session(std::move(s)); }).detach();
        }
    });
}
