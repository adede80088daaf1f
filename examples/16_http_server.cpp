// 16_http_server.cpp: a small HTTP/1.1 server, the way a server author
// writes one on weft: one task per connection, straight-line code.
//
// What it shows:
//   1. buffered reading of a request (read_line, peek) and buffered writing
//      of the response (weft/io/buffered.hpp), keep-alive;
//   2. routes: "/" answers at once; "/sleep" sleeps 50 ms (the task parks,
//      its worker serves others); "/fanout" splits work over 10 subtasks in
//      a task_group (weft/task_group.hpp); "/backend" calls a second TCP
//      service over loopback and answers with what it said; "/crash" throws,
//      as a handler with a bug would: the connections are children of a
//      weft::supervisor, so that costs that one connection (closed without
//      an answer) and one line on stderr naming it, and every other
//      connection goes on being served;
//   3. graceful shutdown on SIGINT or SIGTERM (weft/io/signal.hpp): stop
//      accepting (close the listener), let requests in flight finish, wake
//      idle keep-alive connections at once (each waits in a select over its
//      socket's readiness and a channel closed at shutdown,
//      weft/io/select.hpp), then runtime::shutdown(deadline) cancels
//      whatever is still there.
//
// Modes:
//   no arguments    the self-check: the server on 127.0.0.1 port 0, client
//                   tasks that call every route (keep-alive and parallel
//                   connections) and check the answers, then SIGTERM to
//                   itself and a check that nothing had to be canceled;
//   --serve         serve until SIGINT or SIGTERM, for curl, wrk and ab:
//                     weft_example_16_http_server --serve --port 8080 --workers 2
//                   prints "listening on PORT" once (PORT 0: the kernel's
//                   choice), and "shutdown: N tasks canceled" at the end.
//
// The HTTP is deliberately minimal: GET/HEAD/POST with Content-Length
// bodies (read and ignored), no chunked bodies, no pipelining beyond what
// the buffering gives for free. It is the runtime that is being shown.

#include <weft/io/buffered.hpp>
#include <weft/io/select.hpp>
#include <weft/io/signal.hpp>
#include <weft/io/socket.hpp>
#include <weft/runtime.hpp>
#include <weft/sync/channel.hpp>
#include <weft/sync/event.hpp>
#include <weft/sync/select.hpp>
#include <weft/task_group.hpp>

#include <array>
#include <stdexcept>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "example_support.hpp"  // check() and failures

using namespace std::chrono_literals;
namespace io = weft::io;

namespace {

// The server's shared state: two listeners, the "stopping" flag that
// answers look at, and `closing`, which idle connections select on.
struct server {
    io::tcp_listener web = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
    io::tcp_listener backend = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
    weft::event stopping;
    weft::channel<int> closing{0};  // never sent to; closed at shutdown
    std::atomic<long> requests{0};
    // The connections' supervisor: a failing handler's line names the task
    // ("conn 127.0.0.1:PORT") and the failure is counted.
    weft::supervisor conns{[](const weft::task_failure& f) {
        std::fprintf(stderr, "server: %s\n", f.describe().c_str());
    }};
};

struct request {
    std::string method, path;
    bool keep_alive = true;
};

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// 1. read_request() reads the next request. Between requests a connection
//    is idle: unless the client's next request is already buffered, it
//    waits until the socket is readable (data, or the client closed) or
//    the server is stopping, whichever comes first: a select over the
//    socket's readiness and `closing`, a channel closed at shutdown (a
//    closed channel is always ready, as Go's `done` channels are). A
//    request, once begun, has 10 s. false: the connection is over (closed,
//    broken, bad, or stopping).
bool read_request(io::buffered_reader<io::tcp_stream>& in, request& r, weft::channel<int>& closing) {
    std::error_code ec;
    if (in.buffered().empty()) {
        bool stop = false;
        weft::select(io::on_readable(in.stream().native()),
                     weft::on_recv(closing, [&](std::optional<int>) { stop = true; }));
        if (stop) return false;
    }
    const auto deadline = io::after(10s);
    const auto first = in.peek(ec, deadline);
    if (ec || first.empty()) return false;  // broken, or the client closed
    std::string line;
    in.read_line(line, ec, deadline);
    if (ec) return false;
    // "GET /path HTTP/1.1"
    const std::size_t a = line.find(' '), b = line.rfind(' ');
    if (a == std::string::npos || b == a) return false;
    r.method = line.substr(0, a);
    r.path = line.substr(a + 1, b - a - 1);
    r.keep_alive = std::string_view(line).substr(b + 1) == "HTTP/1.1";
    std::size_t body = 0;
    for (;;) {
        line.clear();
        in.read_line(line, ec, deadline);  // a header longer than max_delimited fails: message_size
        if (ec) return false;
        if (line.empty()) break;  // the end of the headers
        const std::size_t colon = line.find(':');
        if (colon == std::string::npos) return false;
        const std::string_view name = trim(std::string_view(line).substr(0, colon));
        const std::string_view value = trim(std::string_view(line).substr(colon + 1));
        if (iequals(name, "connection")) {
            if (iequals(value, "close")) r.keep_alive = false;
            if (iequals(value, "keep-alive")) r.keep_alive = true;
        } else if (iequals(name, "content-length")) {
            body = std::strtoul(std::string(value).c_str(), nullptr, 10);
            if (body > (1u << 20)) return false;  // 1 MiB is plenty here
        }
    }
    std::vector<char> skip(body);
    if (body) in.read_exact(std::span<char>(skip), ec, deadline);
    return !ec;
}

// 2. The routes.
long fan_out() {
    // Ten subtasks each add up a tenth of 0 .. 99,999; the group waits for
    // all of them (and would cancel the rest if one threw).
    std::array<long, 10> part{};
    weft::task_group g;
    for (int i = 0; i < 10; ++i)
        g.spawn([&part, i] {
            long sum = 0;
            for (long v = i * 10'000L; v < (i + 1) * 10'000L; ++v) sum += v;
            weft::this_task::yield();  // let the others interleave
            part[static_cast<std::size_t>(i)] = sum;
        });
    g.wait();
    long total = 0;
    for (long p : part) total += p;
    return total;
}

std::string ask_backend(server& sv) {
    io::tcp_stream s = io::tcp_stream::connect(sv.backend.local_endpoint(), io::after(5s));
    s.write_all(std::string_view("ping\n"), io::after(5s));
    io::buffered_reader in(s);
    std::string answer;
    in.read_line(answer, io::after(5s));
    return answer;
}

// route() returns the status line's code and the body.
std::pair<int, std::string> route(server& sv, const request& r) {
    if (r.path == "/") return {200, "hello from weft\n"};
    if (r.path == "/sleep") {
        weft::this_task::sleep_for(50ms);
        return {200, "slept 50 ms\n"};
    }
    if (r.path == "/fanout") return {200, "fanout sum " + std::to_string(fan_out()) + "\n"};
    if (r.path == "/crash") throw std::runtime_error("the /crash route always throws");
    if (r.path == "/backend") {
        try {
            return {200, "backend said " + ask_backend(sv) + "\n"};
        } catch (const std::system_error& e) {
            return {502, std::string("backend failed: ") + e.what() + "\n"};
        }
    }
    return {404, "no route for " + r.path + "\n"};
}

void serve_connection(server& sv, io::tcp_stream s) {
    (void)s.set_no_delay(true);
    io::buffered_reader in(s);
    io::buffered_writer out(s);
    request r;
    std::error_code ec;
    while (read_request(in, r, sv.closing)) {
        const auto [code, body] = route(sv, r);
        sv.requests.fetch_add(1, std::memory_order_relaxed);
        const bool keep = r.keep_alive && !sv.stopping.is_set();
        const char* reason = code == 200 ? "OK" : code == 404 ? "Not Found" : "Bad Gateway";
        std::string head = "HTTP/1.1 " + std::to_string(code) + " " + reason +
                           "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
                           (keep ? "\r\n\r\n" : "\r\nConnection: close\r\n\r\n");
        out.write(head, ec, io::after(10s));
        if (!ec && r.method != "HEAD") out.write(body, ec, io::after(10s));
        if (!ec) out.flush(ec, io::after(10s));
        if (ec || !keep) return;
    }
}

// accept_loop() serves until the listener is closed. Each connection is a
// child of the supervisor `sv.conns` (its failure is its own), so leaving
// the loop waits for the requests in flight: the connections end by
// themselves (idle ones at once). Then the backend, which they may still
// have been calling, is closed too.
void accept_loop(server& sv) {
    for (;;) {
        std::error_code ec;
        io::tcp_stream s = sv.web.accept(ec);
        if (ec == std::errc::too_many_files_open || ec == std::errc::too_many_files_open_in_system) {
            weft::this_task::sleep_for(10ms);
            continue;
        }
        if (ec) break;  // operation_canceled: closed, we are stopping
        std::string name = "conn";
        try {
            name += " " + s.remote_endpoint().to_string();
        } catch (const std::system_error&) {  // the client is gone already: its reads will say so
        }
        sv.conns.spawn([&sv, s = std::move(s)]() mutable { serve_connection(sv, std::move(s)); },
                       {.name = std::move(name)});
    }
    sv.conns.wait();
    (void)sv.backend.close();
}

// The backend: answers each line with the line in capitals.
void backend_loop(server& sv) {
    weft::supervisor conns;  // a failure: one line on stderr, the others go on
    for (;;) {
        std::error_code ec;
        io::tcp_stream s = sv.backend.accept(ec);
        if (ec) break;
        conns.spawn([s = std::move(s)]() mutable {
            io::buffered_reader in(s);
            std::string line;
            std::error_code e;
            while (in.read_line(line, e, io::after(5s)) > 0 && !e) {
                for (char& c : line) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
                line += '\n';
                s.write_all(std::string_view(line), e, io::after(5s));
                if (e) return;
                line.clear();
            }
        });
    }
    conns.wait();
}

// 3. The self-check's clients: `n` requests on one keep-alive connection.
std::string get(io::tcp_stream& s, io::buffered_reader<io::tcp_stream>& in, std::string_view path, int& code) {
    s.write_all(std::string_view("GET " + std::string(path) + " HTTP/1.1\r\nHost: localhost\r\n\r\n"), io::after(10s));
    std::string line;
    in.read_line(line, io::after(10s));
    code = std::atoi(line.c_str() + 9);  // "HTTP/1.1 200 OK"
    std::size_t length = 0;
    for (;;) {
        line.clear();
        in.read_line(line, io::after(10s));
        if (line.empty()) break;
        if (line.rfind("Content-Length: ", 0) == 0) length = std::strtoul(line.c_str() + 16, nullptr, 10);
    }
    std::string body(length, '\0');
    in.read_exact(std::span<char>(body), io::after(10s));
    return body;
}

void client(server& sv, int rounds, std::atomic<int>& good) {
    io::tcp_stream s = io::tcp_stream::connect(sv.web.local_endpoint(), io::after(10s));
    io::buffered_reader in(s);
    for (int i = 0; i < rounds; ++i) {
        int code = 0;
        bool ok = get(s, in, "/", code) == "hello from weft\n" && code == 200;
        ok = ok && get(s, in, "/sleep", code) == "slept 50 ms\n" && code == 200;
        ok = ok && get(s, in, "/fanout", code) == "fanout sum 4999950000\n" && code == 200;
        ok = ok && get(s, in, "/backend", code) == "backend said PING\n" && code == 200;
        (void)get(s, in, "/nope", code);
        ok = ok && code == 404;
        if (ok) good.fetch_add(1);
    }
}

// crash_client() calls "/crash" on a connection of its own: the handler
// throws, so the server closes this connection without an answer. True if
// it did.
bool crash_client(server& sv) {
    io::tcp_stream s = io::tcp_stream::connect(sv.web.local_endpoint(), io::after(10s));
    s.write_all(std::string_view("GET /crash HTTP/1.1\r\nHost: localhost\r\n\r\n"), io::after(10s));
    std::array<std::byte, 64> any{};
    std::error_code ec;
    return s.read_some(any, ec, io::after(10s)) == 0 || ec == std::errc::connection_reset;
}

}  // namespace

int main(int argc, char** argv) {
    bool serve = false;
    unsigned workers = 2;
    std::uint16_t port = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--serve") {
            serve = true;
        } else if ((a == "--port" || a == "--workers") && i + 1 < argc) {
            const long v = std::strtol(argv[++i], nullptr, 10);
            if (v < 0 || v > 65535) return 2;
            if (a == "--port") port = static_cast<std::uint16_t>(v);
            else workers = static_cast<unsigned>(v);
        } else {
            std::fprintf(stderr, "usage: %s [--serve [--port P] [--workers W]]\n", argv[0]);
            return 2;
        }
    }
    weft::runtime rt({.workers = workers});
    server sv;
    if (port != 0) sv.web = io::tcp_listener::bind(io::endpoint::loopback_v4(port));
    auto web = rt.spawn([&] { accept_loop(sv); }, {.name = "accept"});
    auto backend = rt.spawn([&] { backend_loop(sv); }, {.name = "backend"});

    constexpr int clients = 16, rounds = 5;
    std::atomic<int> good{0};
    std::atomic<bool> crashed{false};
    const int sig = rt.block_on([&] {
        // Made before anything can send the signal: from here on a SIGTERM
        // is this set's to report, not the default action's.
        io::signal_set stop_signals({SIGINT, SIGTERM});
        if (serve) {
            std::printf("listening on %u\n", static_cast<unsigned>(sv.web.local_endpoint().port()));
            std::fflush(stdout);
        } else {
            weft::spawn([&] {
                weft::task_group g;
                for (int c = 0; c < clients; ++c) g.spawn([&] { client(sv, rounds, good); });
                g.spawn([&] { crashed = crash_client(sv); });  // while the others are served
                g.wait();
                std::raise(SIGTERM);  // as a supervisor would
            }).detach();
        }
        const int s = stop_signals.wait();
        // Stop accepting; the accept loop waits for its connections.
        sv.stopping.set();
        sv.closing.close();  // wakes every idle connection's select
        (void)sv.web.close();
        return s;
    });
    std::printf("signal %d: stopping\n", sig);
    // Everything should end by itself well within the grace period.
    const std::size_t cut = rt.shutdown(5s);
    std::printf("shutdown: %zu tasks canceled, %ld requests served, %llu connections failed\n", cut,
                sv.requests.load(), static_cast<unsigned long long>(sv.conns.failures()));
    if (serve) return cut == 0 ? 0 : 1;

    check(good.load() == clients * rounds, "every client got every route's answer");
    check(crashed.load(), "the /crash connection was closed without an answer");
    check(sv.conns.failures() == 1, "the supervisor saw exactly one failed connection");
    check(sv.requests.load() == 5L * clients * rounds, "the server counted every request");
    check(cut == 0, "the graceful shutdown canceled nothing");
    check(web.state() == weft::task_state::done && backend.state() == weft::task_state::done,
          "the accept loops ended by themselves");
    std::printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
