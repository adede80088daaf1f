// 00_quick_look_server.cpp: the README's server snippet, compiled and run by the tests.
#include <weft/io/socket.hpp>
#include <weft/runtime.hpp>

#include <array>
#include <cstdio>
#include <string>

using namespace std::chrono_literals;
namespace io = weft::io;

// One task per connection, written as blocking code: a read parks this task
// only, and its worker runs other tasks meanwhile.
void echo(io::tcp_stream s) {
    std::array<std::byte, 4096> buf;
    std::error_code ec;
    for (std::size_t n; (n = s.read_some(buf, ec)) > 0 && !ec;)
        if (s.write_all(std::span(buf.data(), n), ec); ec) return;
}

int main() {
    weft::runtime rt({.workers = 2});
    const std::string reply = rt.block_on([] {
        auto listener = io::tcp_listener::bind(io::endpoint::loopback_v4(0));  // port 0: any free port
        auto server = weft::spawn([&] {
            std::error_code ec;
            for (;;) {
                io::tcp_stream s = listener.accept(ec);
                if (ec) return;  // the listener was closed
                weft::spawn([s = std::move(s)]() mutable { echo(std::move(s)); }).detach();
            }
        });
        // A client in this task; every step has a deadline.
        auto c = io::tcp_stream::connect(listener.local_endpoint(), io::after(10s));
        const std::string hello = "hello";
        c.write_all(std::as_bytes(std::span(hello)), io::after(10s));
        std::string back(hello.size(), '\0');
        c.read_exact(std::as_writable_bytes(std::span(back)), io::after(10s));
        (void)listener.close();  // wakes the accepting task: the server ends
        server.join();
        return back;
    });
    std::printf("the server echoed \"%s\"\n", reply.c_str());
    return reply == "hello" ? 0 : 1;
}
