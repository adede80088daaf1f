// weft_bench_idle_conns: SC7's server on weft (bench/compare/io/idle_conns/
// sc7.py runs it): a listener on 127.0.0.1, one weft::spawn per connection;
// each task reads with a 60 s deadline on every read (read_some's own
// deadline argument, io::after(60 s): weft's per-read deadline), writes
// back what it read (write_all) and reads again; it ends on end of stream,
// an error or the deadline. TCP_NODELAY on every connection (Go's default).
// The read buffer is on the task's stack (what a stackful task does);
// --buf picks its size (512, 4096 or 16384 bytes; the Go server
// allocates the same size per connection). Runtime options are the
// defaults but for `workers` (1 by default, as Go's GOMAXPROCS=1 in the
// driver): stack size, shrink_idle_after and the IO backend are left alone.
//
//   weft_bench_idle_conns [--port P] [--workers W] [--buf B]
//                         [--read-timeout S] [--max-seconds S]
//
// --shape real (SC9, issue 43) serves each connection the way a real server
// does instead: an io::buffered_reader and an io::buffered_writer of 16 KiB
// each over the stream, the read deadline on every fill, and one pending
// weft::timer (an idle timer of 300 s, re-armed on every request, that would
// close the connection): what arrives is written back through the writer
// and flushed.
//
// It raises its RLIMIT_NOFILE soft limit to the hard limit first. Prints
// "runtime weft <options>" (the options in force) and "listening on
// <port>" when ready; exits after --max-seconds. The driver
// reads its memory (VmRSS, VmPTE) from /proc/<pid>/status and counts its
// connections in /proc/<pid>/fd: the server has no control channel.
#include <weft/io/buffered.hpp>
#include <weft/io/socket.hpp>
#include <weft/runtime.hpp>
#include <weft/timer.hpp>

#include <sys/resource.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <system_error>
#include <thread>

namespace {

std::chrono::seconds read_timeout{60};

template <std::size_t Buf>
void session(weft::io::stream s) {
    std::array<std::byte, Buf> buf;
    std::error_code ec;
    s.set_no_delay(true);
    for (;;) {
        const std::size_t n = s.read_some(buf, ec, weft::io::after(read_timeout));
        if (ec || n == 0) break;  // timed_out, a reset, or the peer's close
        s.write_all(std::span<const std::byte>(buf.data(), n), ec);
        if (ec) break;
    }
    s.close();
}

// real_session(): SC9's shape (above). The timer's callback closes the
// stream, which ends a read in progress with operation_canceled.
void real_session(weft::io::stream s) {
    using namespace std::chrono_literals;
    s.set_no_delay(true);
    weft::io::buffered_reader<weft::io::stream> in{s, {.capacity = 16 * 1024}};
    weft::io::buffered_writer<weft::io::stream> out{s, {.capacity = 16 * 1024}};
    weft::timer idle([&s] { (void)s.close(); });
    idle.reset(300s);
    for (;;) {
        std::error_code ec;
        const auto b = in.peek(ec, weft::io::after(read_timeout));
        if (ec || b.empty()) break;  // timed_out, a reset, the peer's close, or the idle timer's
        idle.reset(300s);
        out.write(b, ec);
        in.consume(b.size());
        if (!ec) out.flush(ec);
        if (ec) break;
    }
    idle.stop();
    s.close();
}

}  // namespace

int main(int argc, char** argv) {
    unsigned port = 0;
    unsigned workers = 1;
    unsigned buf = 4096;
    int max_seconds = 3600;
    bool real = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--port" && i + 1 < argc) {
            port = static_cast<unsigned>(std::atoi(argv[++i]));
        } else if (a == "--workers" && i + 1 < argc) {
            workers = static_cast<unsigned>(std::atoi(argv[++i]));
        } else if (a == "--buf" && i + 1 < argc) {
            buf = static_cast<unsigned>(std::atoi(argv[++i]));
        } else if (a == "--read-timeout" && i + 1 < argc) {
            read_timeout = std::chrono::seconds(std::atoi(argv[++i]));
        } else if (a == "--max-seconds" && i + 1 < argc) {
            max_seconds = std::atoi(argv[++i]);
        } else if (a == "--shape" && i + 1 < argc && (std::string(argv[i + 1]) == "bare" || std::string(argv[i + 1]) == "real")) {
            real = std::string(argv[++i]) == "real";
        } else {
            std::fprintf(stderr,
                         "usage: %s [--port P] [--workers W] [--buf 512|4096|16384] [--read-timeout S] "
                         "[--max-seconds S] [--shape bare|real]\n",
                         argv[0]);
            return 2;
        }
    }
    if (port > 65535 || workers > 64 || (buf != 512 && buf != 4096 && buf != 16384) ||
        read_timeout.count() <= 0 || max_seconds <= 0) {
        std::fprintf(stderr, "weft_bench_idle_conns: bad --port, --workers, --buf, --read-timeout or --max-seconds\n");
        return 2;
    }

    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) std::perror("weft_bench_idle_conns: setrlimit");
    }

    std::thread([max_seconds] {
        std::this_thread::sleep_for(std::chrono::seconds(max_seconds));
        std::_Exit(0);
    }).detach();

    weft::runtime_options opts;  // the defaults but for workers
    opts.workers = workers;
    weft::runtime rt(opts);
    rt.block_on([port, buf, real, &opts] {
        auto l = weft::io::tcp_listener::bind(weft::io::endpoint::loopback_v4(static_cast<std::uint16_t>(port)));
        std::printf("runtime weft workers=%u stack_size=%zu shrink_idle_after=%lldms buf=%u read-timeout=%llds shape=%s\n",
                    opts.workers, opts.stack_size, static_cast<long long>(opts.shrink_idle_after.count()), buf,
                    static_cast<long long>(read_timeout.count()), real ? "real" : "bare");
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
            if (real) {
                weft::spawn([s = std::move(s)]() mutable { real_session(std::move(s)); }).detach();
            } else if (buf == 512) {
                weft::spawn([s = std::move(s)]() mutable { session<512>(std::move(s)); }).detach();
            } else if (buf == 4096) {
                weft::spawn([s = std::move(s)]() mutable { session<4096>(std::move(s)); }).detach();
            } else {
                weft::spawn([s = std::move(s)]() mutable { session<16384>(std::move(s)); }).detach();
            }
        }
    });
}
