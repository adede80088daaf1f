// 12_tcp_client.cpp: a TCP client with deadlines on every step.
//
// Each socket operation that can wait takes a deadline (io::after(d), or an
// absolute io::clock::time_point); when it passes, the operation returns
// std::errc::timed_out (or throws it, in the forms without an error_code).
// A deadline covers the whole call: read_exact() with after(1s) gets one
// second for all its bytes, however many reads that takes.
//
// The example starts a small server of its own (a task on 127.0.0.1) that
// speaks a length-prefixed protocol: a 4-byte length, then that many bytes;
// the reply is the same text in upper case. The request "hang" gets no
// reply.
//
// The parts:
//   1. resolve "localhost" and connect to the first address that answers,
//      each attempt bounded by a connect timeout;
//   2. requests and replies with write_all / read_exact and deadlines;
//   3. a reply that never comes: read_exact times out, the client gives up;
//   4. connect errors: a closed port is refused, a listener whose queue is
//      full (nobody accepts) makes the connect time out.

#include <weft/io/socket.hpp>
#include <weft/runtime.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "example_support.hpp"  // check() and failures

using namespace std::chrono_literals;
namespace io = weft::io;

namespace {

// send_frame() / recv_frame(): the protocol, with one deadline per frame.
void send_frame(io::tcp_stream& s, const std::string& text, io::clock::time_point deadline) {
    const auto len = static_cast<std::uint32_t>(text.size());
    s.write_all(std::as_bytes(std::span(&len, 1)), deadline);
    s.write_all(std::as_bytes(std::span(text)), deadline);
}

std::string recv_frame(io::tcp_stream& s, std::error_code& ec, io::clock::time_point deadline) {
    std::uint32_t len = 0;
    s.read_exact(std::as_writable_bytes(std::span(&len, 1)), ec, deadline);
    if (ec || len > 1 << 20) return {};
    std::string text(len, '\0');
    s.read_exact(std::as_writable_bytes(std::span(text)), ec, deadline);
    return text;
}

// server() answers each frame of one connection until the client hangs up.
void server(io::tcp_stream s) {
    for (;;) {
        std::error_code ec;
        std::string req = recv_frame(s, ec, io::no_deadline);
        if (ec) return;  // io::eof(): the client closed
        if (req == "hang") continue;
        std::transform(req.begin(), req.end(), req.begin(), [](unsigned char c) { return std::toupper(c); });
        send_frame(s, req, io::after(5s));
    }
}

// connect_any() tries each address in turn, 500 ms each. "localhost" may
// resolve to ::1 first, where nobody listens here: that attempt is refused
// at once and the next address is tried.
io::tcp_stream connect_any(const std::vector<io::endpoint>& addrs, io::endpoint& used) {
    for (const io::endpoint& a : addrs) {
        std::error_code ec;
        io::tcp_stream s = io::tcp_stream::connect(a, ec, io::after(500ms));
        std::printf("   connect %-22s %s\n", a.to_string().c_str(), ec ? ec.message().c_str() : "ok");
        if (!ec) {
            used = a;
            return s;
        }
    }
    return {};
}

}  // namespace

int main() {
    weft::runtime rt({.workers = 2});
    rt.block_on([] {
        auto l = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
        const std::uint16_t port = l.local_endpoint().port();
        auto acceptor = weft::spawn([&] {
            for (;;) {
                std::error_code ec;
                io::tcp_stream s = l.accept(ec);
                if (ec) return;  // the listener was closed
                weft::spawn([s = std::move(s)]() mutable { server(std::move(s)); }).detach();
            }
        });

        // 1. Resolve and connect. resolve() runs getaddrinfo on the blocking
        //    pool, so this task waits but its worker does not.
        const auto addrs = io::resolve("localhost", std::to_string(port));
        std::printf("1. localhost:%u resolves to %zu address(es)\n", static_cast<unsigned>(port), addrs.size());
        io::endpoint used;
        io::tcp_stream s = connect_any(addrs, used);
        check(s.is_open() && used.family() == AF_INET, "connected to 127.0.0.1 in the end");
        if (!s.is_open()) return;

        // 2. Requests with deadlines: the whole exchange gets two seconds.
        const auto deadline = io::after(2s);
        int good = 0;
        for (const char* word : {"hello", "weft", "sockets"}) {
            send_frame(s, word, deadline);
            std::error_code ec;
            const std::string reply = recv_frame(s, ec, deadline);
            std::printf("2. sent %-8s got %s\n", word, ec ? ec.message().c_str() : reply.c_str());
            std::string upper = word;
            std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
            good += !ec && reply == upper;
        }
        check(good == 3, "three replies in upper case");

        // 3. No reply comes: the read gives up at its deadline. The stream is
        //    still usable afterwards (nothing was half read here).
        send_frame(s, "hang", io::after(1s));
        std::error_code ec;
        const auto start = io::clock::now();
        (void)recv_frame(s, ec, io::after(100ms));
        const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(io::clock::now() - start);
        std::printf("3. waiting for a reply to \"hang\": %s after %lld ms\n", ec.message().c_str(),
                    static_cast<long long>(waited.count()));
        check(ec == std::errc::timed_out && waited >= 100ms, "the read timed out at its deadline");
        send_frame(s, "again", io::after(1s));
        check(recv_frame(s, ec, io::after(2s)) == "AGAIN" && !ec, "the stream works after a timeout");
        s.close();

        // 4. Connect errors. A port nobody listens on refuses at once.
        io::endpoint closed;
        {
            auto tmp = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
            closed = tmp.local_endpoint();
        }
        (void)io::tcp_stream::connect(closed, ec, io::after(2s));
        std::printf("4. connect to a closed port: %s\n", ec.message().c_str());
        check(ec == std::errc::connection_refused, "refused");

        //    A listener with backlog 0 that never accepts: once its queue is
        //    full the kernel drops new connection requests, and connect()
        //    waits until its deadline.
        auto full = io::tcp_listener::bind(io::endpoint::loopback_v4(0), 0);
        std::vector<io::tcp_stream> queued;
        bool timed_out = false;
        for (int i = 0; i < 16 && !timed_out; ++i) {
            io::tcp_stream c = io::tcp_stream::connect(full.local_endpoint(), ec, io::after(200ms));
            if (ec == std::errc::timed_out)
                timed_out = true;
            else if (!ec)
                queued.push_back(std::move(c));
            else
                break;
        }
        std::printf("   connect to a full queue (after %zu queued): %s\n", queued.size(),
                    timed_out ? "timed out" : ec.message().c_str());
        check(timed_out, "the connect timed out");

        (void)l.close();  // the acceptor wakes with operation_canceled
        acceptor.join();
    });
    std::printf("%s\n", failures ? "12_tcp_client: FAILED" : "12_tcp_client: all checks passed");
    return failures ? 1 : 0;
}
