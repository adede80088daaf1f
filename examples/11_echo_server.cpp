// 11_echo_server.cpp: a TCP echo server, one task per connection.
//
// A task that reads from a socket parks until data arrives; its worker runs
// other tasks meanwhile. So the server is written the plain blocking way,
// one task per connection, and thousands of connections cost thousands of
// small task stacks, not threads.
//
// The parts:
//   1. serve(): accept in a loop, spawn a task per connection that echoes
//      until the client shuts down its side;
//   2. the self-check (no arguments): a server on 127.0.0.1 port 0 (the
//      kernel picks a free port) and 32 client tasks that each send 20
//      messages and check the echoes, then the server is stopped by closing
//      its listener;
//   3. --serve: the same server forever, for benchmarks:
//        weft_example_11_echo_server --serve --port 7000 --workers 4
//      prints "listening on 7000" once, then echoes until killed.

#include <weft/io/socket.hpp>
#include <weft/runtime.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "example_support.hpp"  // check() and failures

using namespace std::chrono_literals;

namespace {

// 1. echo() serves one connection. read_some() returns what has arrived
//    (0 once the client has shut down its side); write_all() loops over
//    partial writes. The stream closes when `s` goes out of scope.
void echo(weft::io::tcp_stream s) {
    std::array<std::byte, 16 * 1024> buf;
    std::error_code ec;
    for (;;) {
        const std::size_t n = s.read_some(buf, ec);
        if (ec || n == 0) return;  // an error (e.g. a reset) or the end
        s.write_all(std::span(buf.data(), n), ec);
        if (ec) return;
    }
}

// serve() accepts until the listener is closed (accept then reports
// operation_canceled) and returns how many connections it served. Running
// out of fds (EMFILE) is not fatal: pause and accept again.
long serve(weft::io::tcp_listener& l) {
    long served = 0;
    for (;;) {
        std::error_code ec;
        weft::io::tcp_stream s = l.accept(ec);
        if (ec == std::errc::too_many_files_open || ec == std::errc::too_many_files_open_in_system) {
            weft::this_task::sleep_for(10ms);
            continue;
        }
        if (ec) return served;  // closed: the server stops
        (void)s.set_no_delay(true);
        weft::spawn([s = std::move(s)]() mutable { echo(std::move(s)); }).detach();
        ++served;
    }
}

struct options {
    std::uint16_t port = 0;
    unsigned workers = 2;
    bool serve = false;
};

bool parse(int argc, char** argv, options& o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--serve") {
            o.serve = true;
        } else if ((a == "--port" || a == "--workers") && i + 1 < argc) {
            const long v = std::strtol(argv[++i], nullptr, 10);
            if (v < 0 || v > 65535) return false;
            if (a == "--port")
                o.port = static_cast<std::uint16_t>(v);
            else
                o.workers = static_cast<unsigned>(v);
        } else {
            return false;
        }
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    options opt;
    if (!parse(argc, argv, opt)) {
        std::fprintf(stderr, "usage: %s [--port P] [--workers W] [--serve]\n", argv[0]);
        return 2;
    }
    weft::runtime rt({.workers = opt.workers});

    // 3. Benchmark mode: serve forever.
    if (opt.serve) {
        rt.block_on([&] {
            auto l = weft::io::tcp_listener::bind(weft::io::endpoint::loopback_v4(opt.port));
            std::printf("listening on %u\n", static_cast<unsigned>(l.local_endpoint().port()));
            std::fflush(stdout);
            (void)serve(l);
        });
        return 0;
    }

    // 2. The self-check.
    constexpr int clients = 32, messages = 20;
    const auto [served, echoed] = rt.block_on([&] {
        auto l = weft::io::tcp_listener::bind(weft::io::endpoint::loopback_v4(opt.port));
        const weft::io::endpoint at = l.local_endpoint();
        std::printf("1. echo server listening on %s\n", at.to_string().c_str());
        auto server = weft::spawn([&] { return serve(l); });

        std::atomic<long> ok{0};
        std::vector<weft::join_handle<void>> cs;
        for (int c = 0; c < clients; ++c)
            cs.push_back(weft::spawn([&, c] {
                // Every step has a deadline, so a lost echo fails the
                // example instead of hanging it.
                auto s = weft::io::tcp_stream::connect(at, weft::io::after(10s));
                for (int m = 0; m < messages; ++m) {
                    const std::string msg = "client " + std::to_string(c) + " message " + std::to_string(m);
                    s.write_all(std::as_bytes(std::span(msg)), weft::io::after(10s));
                    std::string back(msg.size(), '\0');
                    s.read_exact(std::as_writable_bytes(std::span(back)), weft::io::after(10s));
                    if (back == msg) ++ok;
                }
                (void)s.shutdown();  // the server's read_some returns 0: its task ends
            }));
        for (auto& c : cs) c.join();
        std::printf("2. %d clients exchanged %ld messages\n", clients, ok.load());

        // Closing the listener wakes the accepting task with
        // operation_canceled: that is how the server stops.
        (void)l.close();
        return std::pair(server.join(), ok.load());
    });
    std::printf("3. the server served %ld connections and stopped\n", served);
    check(served == clients, "one connection per client");
    check(echoed == long(clients) * messages, "every message came back unchanged");

    std::printf("%s\n", failures ? "11_echo_server: FAILED" : "11_echo_server: all checks passed");
    return failures ? 1 : 0;
}
