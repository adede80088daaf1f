// 18_metrics.cpp: a running server shows itself (docs/debugging.md, "Live
// tracing and metrics"), without a restart:
//   1. GET /metrics answers runtime::metrics_text(): the runtime's counters
//      and its scheduling-delay histogram in the Prometheus text format, for
//      a Prometheus server (or curl) to scrape;
//   2. GET /trace writes a trace of the running runtime (runtime::
//      write_trace(): each worker's last events and the tasks running now);
//   3. `kill -USR2 <pid>` does the same from outside: runtime_options::
//      trace_signal names the signal and trace_signal_path the file.
//
// Run without arguments it checks itself: a client task scrapes /metrics,
// asks for /trace and raises SIGUSR2 while "ticker" tasks keep running.
// `18_metrics --serve SECONDS` serves for that long on a port of
// 127.0.0.1 it prints ("listening on PORT", "trace signal writes PATH"),
// for curl and kill (18_metrics_curl.sh).

#include <weft/io/socket.hpp>
#include <weft/runtime.hpp>
#include <weft/sync.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "example_support.hpp"  // check() and failures

using namespace std::chrono_literals;
namespace io = weft::io;

namespace {

std::string temp_file(const char* what) {
    return (std::filesystem::temp_directory_path() /
            ("weft-18-" + std::string(what) + "-" + std::to_string(::getpid()) + ".json"))
        .string();
}

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// serve_one() answers one HTTP request on c, then closes it (HTTP/1.0
// style: no keep-alive keeps this short). Bounded: 5 s, 8 KiB of headers.
void serve_one(weft::runtime& rt, io::tcp_stream c, const std::string& trace_path) {
    std::string req;
    char buf[1024];
    std::error_code ec;
    const auto deadline = io::after(5s);
    while (req.find("\r\n\r\n") == std::string::npos && req.size() < 8192) {
        const std::size_t n = c.read_some(std::span<char>(buf), ec, deadline);
        if (ec || n == 0) return;
        req.append(buf, n);
    }
    std::string status = "200 OK", type = "text/plain; charset=utf-8", body;
    if (req.rfind("GET /metrics ", 0) == 0) {
        // The content type Prometheus expects of its text format.
        type = "text/plain; version=0.0.4; charset=utf-8";
        body = rt.metrics_text();
    } else if (req.rfind("GET /trace ", 0) == 0) {
        // Written on this task's worker (a few milliseconds for a small
        // trace); a large one could go to weft::blocking().
        body = rt.write_trace(trace_path) ? "wrote " + trace_path + "\n" : "no trace\n";
    } else {
        status = "404 Not Found";
        body = "try /metrics or /trace\n";
    }
    const std::string head = "HTTP/1.0 " + status + "\r\nContent-Type: " + type +
                             "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
    c.write_all(head + body, ec, deadline);
}

// get() is the self-test's client: one request, the whole answer.
std::string get(std::uint16_t port, const std::string& path) {
    auto s = io::tcp_stream::connect(io::endpoint::loopback_v4(port));
    s.write_all("GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    std::string out;
    char buf[4096];
    std::error_code ec;
    for (;;) {
        const std::size_t n = s.read_some(std::span<char>(buf), ec, io::after(5s));
        if (ec || n == 0) break;
        out.append(buf, n);
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    const bool serve = argc == 3 && std::string(argv[1]) == "--serve";
    const auto serve_for = serve ? std::chrono::seconds(std::atoi(argv[2])) : 0s;
    const std::string trace_path = temp_file("request");
    weft::runtime_options o;
    o.workers = 2;
    o.trace_live = true;           // record the trace rings, for write_trace()
    o.trace_events = 1 << 14;      // the last 16384 events of each worker (640 KiB)
    o.trace_signal = SIGUSR2;      // kill -USR2 <pid> writes...
    o.trace_signal_path = temp_file("signal");  // ...here
    std::remove(o.trace_signal_path.c_str());
    weft::runtime rt(o);

    rt.block_on(
        [&] {
            auto listener = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
            const std::uint16_t port = listener.local_endpoint().port();
            // Some work that goes on the whole time: tasks that tick.
            std::atomic<bool> done{false};
            std::vector<weft::join_handle<void>> tickers;
            for (int i = 0; i < 3; ++i)
                tickers.push_back(weft::spawn(
                    [&done] {
                        while (!done.load()) weft::this_task::sleep_for(1ms);
                    },
                    {.name = "ticker"}));
            // The server: a task per connection.
            auto server = weft::spawn(
                [&] {
                    for (;;) {
                        std::error_code ec;
                        io::tcp_stream c = listener.accept(ec);
                        if (ec) return;  // closed: the end
                        weft::spawn([&rt, &trace_path, c = std::move(c)]() mutable {
                            serve_one(rt, std::move(c), trace_path);
                        }, {.name = "connection"});
                    }
                },
                {.name = "server"});

            if (serve) {
                std::printf("listening on %u\ntrace signal writes %s\n", port, o.trace_signal_path.c_str());
                std::fflush(stdout);
                weft::this_task::sleep_for(serve_for);
            } else {
                std::printf("1. GET /metrics\n");
                const std::string m = get(port, "/metrics");
                check(m.rfind("HTTP/1.0 200 OK\r\n", 0) == 0, "/metrics answers 200");
                check(m.find("Content-Type: text/plain; version=0.0.4") != std::string::npos, "the Prometheus type");
                check(m.find("# TYPE weft_worker_switches_total counter") != std::string::npos, "a counter");
                check(m.find("weft_schedule_delay_seconds_bucket{worker=\"1\",le=\"+Inf\"}") != std::string::npos,
                      "the delay histogram");
                const std::size_t at = m.find("\nweft_live_tasks ") + 1;
                std::printf("  %s", m.substr(at, m.find('\n', at) - at + 1).c_str());

                std::printf("2. GET /trace\n");
                check(get(port, "/trace").find("wrote " + trace_path) != std::string::npos, "/trace wrote the file");
                const std::string t = slurp(trace_path);
                check(t.find("\"cat\":\"task\",\"name\":\"ticker\"") != std::string::npos,
                      "the live trace shows the tickers, which still run");
                check(t.find("\"name\":\"connection\",\"args\":{\"id\":") != std::string::npos,
                      "and the connection that asked for it");
                std::printf("  %zu bytes in %s\n", t.size(), trace_path.c_str());

                std::printf("3. SIGUSR2\n");
                ::raise(SIGUSR2);  // as `kill -USR2 <pid>` would
                bool there = false;
                for (int i = 0; i < 5000 && !(there = std::filesystem::exists(o.trace_signal_path)); ++i)
                    weft::this_task::sleep_for(1ms);
                check(there && slurp(o.trace_signal_path).find("\"name\":\"ticker\"") != std::string::npos,
                      "the signal wrote a live trace");
                std::printf("  %s\n", o.trace_signal_path.c_str());
            }
            (void)listener.close();  // the server's accept() ends
            server.join();
            done = true;
            weft::when_all(tickers);
        },
        {.name = "main"});
    rt.stop();
    if (!serve) {
        std::remove(trace_path.c_str());
        std::remove(o.trace_signal_path.c_str());
    }
    std::printf("%s\n", failures ? "FAILED" : "OK");
    return failures ? 1 : 0;
}
