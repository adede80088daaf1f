// 17_redis_server.cpp: a small Redis-compatible server (a RESP2 subset),
// written the way docs/io.md and docs/runtime.md recommend: one task per
// connection, buffered streams that hold no buffer while idle, a select that
// ends idle connections at shutdown, a task group for the connections.
//
// What it shows:
//   1. a keyspace shared by every connection on every worker: 16 shards,
//      each a std::unordered_map under its own weft::mutex; expiry is lazy
//      (an expired key is erased when a command finds it, as Redis does)
//      plus one sweeper task that wakes every 100 ms and looks at a bounded
//      number of hash buckets per shard, so expired keys nobody reads give
//      their memory back (no timer and no task per key);
//   2. the RESP2 protocol over io::buffered_reader / buffered_writer
//      (16 KiB): arrays of bulk strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")
//      and inline commands ("PING\r\n"); replies +simple, -error, :integer,
//      $bulk, $-1 (nil), *array;
//   3. pipelining for free: every command already buffered is answered
//      into the writer, and the writer is flushed only before the reader
//      would have to wait for the socket, so `redis-benchmark -P 16` costs
//      one write per batch;
//   4. limits: a line (inline command or header) of at most 64 KiB, at most
//      1M arguments, a command's arguments at most --max-bulk bytes in all
//      (64 MiB by default; Redis allows 512 MB per argument). A malformed or
//      oversized frame gets "-ERR Protocol error: ..." and the connection is
//      closed. A command, once begun, has 30 s to arrive, a reply 30 s to
//      be written; an idle connection is closed after --idle-timeout
//      seconds (0, the default, as Redis's `timeout 0`: never); past
//      --maxclients connections (10000 by default, as Redis's `maxclients`)
//      a new client is sent "-ERR max number of clients reached" and closed
//      (io::limited_listener, which also keeps a spare fd to say so when the
//      process is out of fds, and backs off instead of spinning);
//   5. graceful shutdown on SIGINT or SIGTERM (as in 16_http_server):
//      stop accepting, answer what is buffered, close every connection,
//      exit 0.
//
// Commands: PING [msg], ECHO msg, GET k, SET k v [EX s | PX ms], DEL k...,
// INCR k, EXPIRE k s, TTL k, DBSIZE, COMMAND (an empty array), CONFIG GET p,
// QUIT. Inline commands are split at spaces (no quoting).
//
// Modes:
//   no arguments   the self-check: pipelined and malformed requests from
//                  client tasks, exact replies compared, then SIGTERM;
//   --serve        serve until SIGINT or SIGTERM:
//                    weft_example_17_redis_server --serve --port 6380 --workers 2
//                    redis-cli -p 6380 set greeting hello
//                    redis-benchmark -p 6380 -t ping,set,get,incr -c 50 -n 100000 -P 16 -q
//                  prints "listening on PORT" once (PORT 0: the kernel's
//                  choice). More options: --io epoll|io_uring|automatic,
//                  --max-bulk BYTES, --idle-timeout SECONDS, --maxclients N.

#include <weft/io/buffered.hpp>
#include <weft/io/select.hpp>
#include <weft/io/signal.hpp>
#include <weft/io/socket.hpp>
#include <weft/runtime.hpp>
#include <weft/sync/channel.hpp>
#include <weft/sync/event.hpp>
#include <weft/sync/mutex.hpp>
#include <weft/sync/select.hpp>
#include <weft/task_group.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "example_support.hpp"  // check() and failures

using namespace std::chrono_literals;
namespace io = weft::io;
using steady = std::chrono::steady_clock;

namespace {

struct options {
    bool serve = false;
    std::uint16_t port = 0;
    unsigned workers = 2;
    weft::io_backend io = weft::io_backend::automatic;
    long long max_bulk = 64LL << 20;
    long long idle_timeout = 0;  // seconds; 0: none
    long long max_clients = 10000;
};

bool parse_int(std::string_view s, long long& v) {  // all of s, decimal, no '+'
    if (s.empty() || s.size() > 20) return false;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && end == s.data() + s.size();
}

std::string upper(std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

// 1. The keyspace. A shard's lock is held only for a few map operations
//    and never across a wait (no IO, no sleep, no channel inside), so it is
//    never held long. weft::mutex is what docs/sync.md gives tasks: an
//    uncontended lock() is one CAS, and a contended one parks the task, not
//    its worker thread, which serves other connections meanwhile. (A
//    std::mutex would also do for sections this short, but would block
//    the worker thread while it waits.) Values are copied out under the
//    lock; the reply is written after it is released.
struct entry {
    std::string value;
    steady::time_point expires{};  // the epoch: no expiry
};
using map = std::unordered_map<std::string, entry>;

bool expired(const entry& e, steady::time_point now) { return e.expires != steady::time_point{} && e.expires <= now; }

// live() is the key's entry, or null if it is absent or expired (then it
// is erased now: the lazy half of expiry).
entry* live(map& m, const std::string& key, steady::time_point now) {
    const auto it = m.find(key);
    if (it == m.end()) return nullptr;
    if (expired(it->second, now)) {
        m.erase(it);
        return nullptr;
    }
    return &it->second;
}

class keyspace {
public:
    // with(key, f) runs f(shard's map, now) under the lock of key's shard.
    template <class F>
    auto with(const std::string& key, F f) {
        shard& s = shards_[std::hash<std::string>{}(key) % shards_.size()];
        std::lock_guard lock(s.m);
        return f(s.keys, steady::now());
    }
    // sweep() is the active half of expiry: per shard it looks at the next
    // `buckets` hash buckets (a cursor goes round) and erases the expired
    // keys there. Bounded work per call, however many keys there are.
    std::size_t sweep(std::size_t buckets) {
        std::size_t erased = 0;
        std::vector<std::string> dead;
        for (shard& s : shards_) {
            std::lock_guard lock(s.m);
            const auto now = steady::now();
            const std::size_t n = s.keys.bucket_count();
            for (std::size_t i = 0; i < std::min(n, buckets); ++i) {
                const std::size_t b = s.cursor++ % n;
                for (auto it = s.keys.begin(b); it != s.keys.end(b); ++it)
                    if (expired(it->second, now)) dead.push_back(it->first);
            }
            for (const std::string& k : dead) s.keys.erase(k);
            erased += dead.size();
            dead.clear();
        }
        return erased;
    }
    std::size_t size() {  // DBSIZE: keys not yet erased, expired or not (as Redis)
        std::size_t n = 0;
        for (shard& s : shards_) {
            std::lock_guard lock(s.m);
            n += s.keys.size();
        }
        return n;
    }

private:
    struct shard {
        weft::mutex m;
        map keys;
        std::size_t cursor = 0;
    };
    std::array<shard, 16> shards_;
};

struct server {
    explicit server(const options& o)
        : opt(o),
          listener(io::limited_listener::bind(io::endpoint::loopback_v4(o.port),
                                              {.max_connections = static_cast<std::size_t>(o.max_clients),
                                               .reject_message = "-ERR max number of clients reached\r\n"})) {}
    options opt;
    io::limited_listener listener;
    keyspace keys;
    weft::event stopping;
    weft::channel<int> closing{0};  // never sent to; closed at shutdown
    std::atomic<long> commands{0};
};

// 2. One connection: the stream, its reader and writer, and the reply
//    helpers. `ec` is the first IO error (the connection then ends);
//    `protocol` the reason of a protocol error (answered, then closed).
struct connection {
    connection(server& v, io::tcp_stream& st) : sv(v), s(st) {}
    server& sv;
    io::tcp_stream& s;
    io::buffered_reader<io::tcp_stream> in{s, {.capacity = 16 * 1024}};
    io::buffered_writer<io::tcp_stream> out{s, {.capacity = 16 * 1024}};
    std::error_code ec;
    std::string protocol;
    io::clock::time_point deadline = io::no_deadline;  // of the command being read

    void raw(std::string_view b) {
        if (!ec) out.write(b, ec, io::after(30s));
    }
    void simple(std::string_view t) { raw("+"), raw(t), raw("\r\n"); }
    void error(std::string_view t) { raw("-"), raw(t), raw("\r\n"); }
    void integer(long long v) { raw(":" + std::to_string(v) + "\r\n"); }
    void bulk(std::string_view b) { raw("$" + std::to_string(b.size()) + "\r\n"), raw(b), raw("\r\n"); }
    void nil() { raw("$-1\r\n"); }
    bool flush() {
        if (!ec && out.pending() > 0) out.flush(ec, io::after(30s));
        return !ec;
    }
    bool bad(std::string why) {
        protocol = std::move(why);
        return false;
    }

    // idle() waits, with nothing buffered, for the next command: false if
    // the server is stopping or the idle timeout passed first.
    bool idle() {
        bool stop = false;
        auto on_stop = [&](std::optional<int>) { stop = true; };
        if (sv.stopping.is_set()) return false;
        if (sv.opt.idle_timeout > 0)
            weft::select(io::on_readable(s.native()), weft::on_recv(sv.closing, on_stop),
                         weft::on_timeout(std::chrono::seconds(sv.opt.idle_timeout), [&] { stop = true; }));
        else
            weft::select(io::on_readable(s.native()), weft::on_recv(sv.closing, on_stop));
        return !stop;
    }
    // line() reads one line, "\r\n" or "\n" stripped. Whatever waits for
    // the socket flushes the replies first: that is the pipelining rule.
    bool line(std::string& l) {
        const auto b = in.buffered();
        if ((b.empty() || !std::memchr(b.data(), '\n', b.size())) && !flush()) return false;
        l.clear();
        in.read_until('\n', l, ec, deadline);
        if (ec == std::errc::message_size) return ec.clear(), bad("too big inline request");
        if (ec || l.empty() || l.back() != '\n') return false;  // closed, broken, or cut off
        l.pop_back();
        if (!l.empty() && l.back() == '\r') l.pop_back();
        return true;
    }
    // argument() reads a bulk string of n bytes and its "\r\n", in steps
    // of at most 1 MiB, so that a client announcing 64 MiB and sending
    // nothing has not made the server allocate 64 MiB.
    bool argument(std::string& a, std::size_t n) {
        if (in.buffered().size() < n + 2 && !flush()) return false;
        for (std::size_t got = 0; got < n;) {
            const std::size_t step = std::min<std::size_t>(n - got, 1 << 20);
            a.resize(got + step);
            in.read_exact(std::span<char>(a.data() + got, step), ec, deadline);
            if (ec) return false;
            got += step;
        }
        char crlf[2];
        in.read_exact(std::span<char>(crlf), ec, deadline);
        return !ec && (crlf[0] == '\r' && crlf[1] == '\n' ? true : bad("expected CRLF after a bulk string"));
    }
    // command() reads the next command into args (empty: nothing to do,
    // an empty line or "*0"). false: the connection ends.
    bool command(std::vector<std::string>& args) {
        args.clear();
        std::string l;
        if (!line(l)) return false;
        if (l.empty() || l[0] != '*') {  // inline: words separated by spaces
            for (std::size_t i = 0; i < l.size();) {
                const std::size_t j = std::min(l.find_first_of(" \t", i), l.size());
                if (j > i) args.push_back(l.substr(i, j - i));
                i = j + 1;
            }
            return true;
        }
        long long n = 0, len = 0, total = 0;
        if (!parse_int(std::string_view(l).substr(1), n) || n > (1 << 20)) return bad("invalid multibulk length");
        for (long long i = 0; i < n; ++i) {
            if (!line(l)) return false;
            if (l.empty() || l[0] != '$') return bad("expected '$', got '" + l.substr(0, 1) + "'");
            if (!parse_int(std::string_view(l).substr(1), len) || len < 0 || len > (512LL << 20))
                return bad("invalid bulk length");
            if ((total += len) > sv.opt.max_bulk)
                return bad("request larger than --max-bulk " + std::to_string(sv.opt.max_bulk) + " bytes");
            if (!argument(args.emplace_back(), static_cast<std::size_t>(len))) return false;
        }
        return true;
    }
};

// 3. The commands. Each writes exactly one reply.
bool expire_at(long long amount, bool millis, steady::time_point now, steady::time_point& at) {
    if (amount > 1'000'000'000'000LL / (millis ? 1 : 1000)) return false;  // about 31 years
    at = now + (millis ? std::chrono::milliseconds(amount) : std::chrono::seconds(amount));
    return true;
}

void execute(connection& c, std::vector<std::string>& a, bool& quit) {
    const std::string name = upper(a[0]);
    const std::size_t n = a.size();
    const auto arity = [&](bool ok) {
        if (!ok) c.error("ERR wrong number of arguments for '" + a[0] + "' command");
        return ok;
    };
    keyspace& keys = c.sv.keys;
    long long v = 0;
    if (name == "PING") {
        if (arity(n <= 2)) n == 1 ? c.simple("PONG") : c.bulk(a[1]);
    } else if (name == "ECHO") {
        if (arity(n == 2)) c.bulk(a[1]);
    } else if (name == "GET") {
        if (!arity(n == 2)) return;
        const auto value = keys.with(a[1], [&](map& m, steady::time_point now) -> std::optional<std::string> {
            const entry* e = live(m, a[1], now);
            return e ? std::optional(e->value) : std::nullopt;
        });
        value ? c.bulk(*value) : c.nil();
    } else if (name == "SET") {
        if (!arity(n >= 3)) return;
        steady::time_point at{};
        if (n == 5 && (upper(a[3]) == "EX" || upper(a[3]) == "PX")) {
            if (!parse_int(a[4], v) || v <= 0 || !expire_at(v, upper(a[3]) == "PX", steady::now(), at))
                return c.error("ERR invalid expire time in 'set' command");
        } else if (n != 3) {
            return c.error("ERR syntax error");
        }
        keys.with(a[1], [&](map& m, steady::time_point) { m.insert_or_assign(std::move(a[1]), entry{std::move(a[2]), at}); });
        c.simple("OK");
    } else if (name == "DEL") {
        if (!arity(n >= 2)) return;
        for (std::size_t i = 1; i < n; ++i)  // each key atomically; not all of them at once
            v += keys.with(a[i], [&](map& m, steady::time_point now) { return live(m, a[i], now) ? m.erase(a[i]) : 0; });
        c.integer(v);
    } else if (name == "INCR") {
        if (!arity(n == 2)) return;
        const char* err = keys.with(a[1], [&](map& m, steady::time_point now) -> const char* {
            entry* e = live(m, a[1], now);
            if (e && !parse_int(e->value, v)) return "ERR value is not an integer or out of range";
            if (v == LLONG_MAX) return "ERR increment or decrement would overflow";
            (e ? e : &m[a[1]])->value = std::to_string(++v);  // the expiry stays, as in Redis
            return nullptr;
        });
        err ? c.error(err) : c.integer(v);
    } else if (name == "EXPIRE") {
        if (!arity(n == 3)) return;
        if (!parse_int(a[2], v)) return c.error("ERR value is not an integer or out of range");
        steady::time_point at{};
        if (v > 0 && !expire_at(v, false, steady::now(), at)) return c.error("ERR invalid expire time in 'expire' command");
        c.integer(keys.with(a[1], [&](map& m, steady::time_point now) {
            entry* e = live(m, a[1], now);
            if (e && v <= 0) m.erase(a[1]);  // an expiry in the past deletes the key
            else if (e) e->expires = at;
            return e ? 1 : 0;
        }));
    } else if (name == "TTL") {
        if (!arity(n == 2)) return;
        c.integer(keys.with(a[1], [&](map& m, steady::time_point now) -> long long {
            const entry* e = live(m, a[1], now);
            if (!e) return -2;
            if (e->expires == steady::time_point{}) return -1;
            return std::chrono::duration_cast<std::chrono::milliseconds>(e->expires - now + 500ms).count() / 1000;
        }));
    } else if (name == "DBSIZE") {
        if (arity(n == 1)) c.integer(static_cast<long long>(keys.size()));
    } else if (name == "COMMAND") {
        c.raw("*0\r\n");  // no command table; clients cope
    } else if (name == "CONFIG") {
        // redis-benchmark asks for "save" and "appendonly": answer as a
        // server without persistence; other parameters are unknown (empty).
        if (n != 3 || upper(a[1]) != "GET") return c.error("ERR only CONFIG GET parameter is supported");
        if (a[2] == "save") c.raw("*2\r\n"), c.bulk("save"), c.bulk("");
        else if (a[2] == "appendonly") c.raw("*2\r\n"), c.bulk("appendonly"), c.bulk("no");
        else c.raw("*0\r\n");
    } else if (name == "QUIT") {
        c.simple("OK");
        quit = true;
    } else {
        c.error("ERR unknown command '" + a[0] + "'");
    }
}

// serve_connection(): read a command, answer it, until the client leaves,
// a protocol error, QUIT, an idle timeout or the shutdown. The replies
// are flushed whenever the reader runs dry (3.).
void serve_connection(server& sv, io::tcp_stream s) {
    (void)s.set_no_delay(true);
    connection c{sv, s};
    std::vector<std::string> args;
    bool quit = false;
    while (!quit && !c.ec) {  // ec: a reply could not be written
        if (c.in.buffered().empty() && !(c.flush() && c.idle())) return;
        c.deadline = io::after(30s);
        if (!c.command(args)) break;
        if (args.empty()) continue;
        execute(c, args, quit);
        sv.commands.fetch_add(1, std::memory_order_relaxed);
    }
    if (!c.protocol.empty()) c.error("ERR Protocol error: " + c.protocol);
    c.flush();  // then the stream closes: after a protocol error, QUIT or an IO error
}

// accept_loop() serves until the listener is closed; the connections are
// children of the supervisor `conns`, so one connection's failure (a bug in
// a command, std::bad_alloc) ends that connection only, with a line on
// stderr naming it, and leaving waits for them (the idle ones end at once,
// in their select, when `closing` is closed).
void accept_loop(server& sv) {
    weft::supervisor conns;
    for (;;) {
        std::error_code ec;
        // Over --maxclients, or out of fds, the listener turns the client
        // away itself; out of fds without its spare it pauses (IO-L4).
        io::limited_stream s = sv.listener.accept(ec);
        if (ec) break;  // closed: we are stopping
        // The connection's place is given back when `s` (the lambda's) goes.
        conns.spawn([&sv, s = std::move(s)]() mutable { serve_connection(sv, std::move(s.as_stream())); },
                    {.name = "conn"});
    }
    conns.wait();
}

// sweeper(): the active expiry, every 100 ms, until the shutdown.
void sweeper(server& sv) {
    for (bool stop = false; !stop;) {
        weft::select(weft::on_recv(sv.closing, [&](std::optional<int>) { stop = true; }), weft::on_timeout(100ms));
        if (!stop) sv.keys.sweep(64);
    }
}

// 4. The self-check's client: one pipelined batch, written at once, and
//    the exact bytes expected back; then a malformed frame.
std::string exchange(server& sv, std::string_view request, std::size_t reply_size) {
    io::tcp_stream s = io::tcp_stream::connect(sv.listener.local_endpoint(), io::after(10s));
    s.write_all(request, io::after(10s));
    std::string reply(reply_size + 1, '\0');  // one byte more: the close must follow
    io::buffered_reader in(s);
    std::error_code ec;
    reply.resize(in.read_exact(std::span<char>(reply), ec, io::after(10s)));
    return reply;
}

void client(server& sv, int id, std::atomic<int>& good) {
    const std::string k = "key" + std::to_string(id);
    const std::string kk = "$" + std::to_string(k.size()) + "\r\n" + k + "\r\n";
    const std::string batch = "*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n" + kk + "$2\r\n41\r\n*2\r\n$4\r\nINCR\r\n" +
                              kk + "GET " + k + "\r\nTTL " + k + "\r\n*2\r\n$3\r\nDEL\r\n" + kk + "*2\r\n$3\r\nGET\r\n" +
                              kk + "nope\r\nQUIT\r\n";
    const std::string want = "+PONG\r\n+OK\r\n:42\r\n$2\r\n42\r\n:-1\r\n:1\r\n$-1\r\n-ERR unknown command 'nope'\r\n+OK\r\n";
    const std::string bad = "*1\r\nPING\r\n";
    const std::string bad_want = "-ERR Protocol error: expected '$', got 'P'\r\n";
    if (exchange(sv, batch, want.size()) == want && exchange(sv, bad, bad_want.size()) == bad_want) good.fetch_add(1);
}

bool parse(int argc, char** argv, options& o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has_value = i + 1 < argc;
        long long v = 0;
        if (a == "--serve") {
            o.serve = true;
        } else if (a == "--io" && has_value) {
            const std::string b = argv[++i];
            if (b != "epoll" && b != "io_uring" && b != "automatic") return false;
            o.io = b == "epoll" ? weft::io_backend::epoll : b == "io_uring" ? weft::io_backend::io_uring
                                                                             : weft::io_backend::automatic;
        } else if (has_value && parse_int(argv[i + 1], v) && v >= 0) {
            ++i;
            if (a == "--port" && v <= 65535) o.port = static_cast<std::uint16_t>(v);
            else if (a == "--workers" && v <= 1024) o.workers = static_cast<unsigned>(v);
            else if (a == "--max-bulk" && v > 0) o.max_bulk = v;
            else if (a == "--idle-timeout" && v <= 1'000'000'000) o.idle_timeout = v;
            else if (a == "--maxclients" && v > 0) o.max_clients = v;
            else return false;
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
        std::fprintf(stderr,
                     "usage: %s [--serve [--port P] [--workers W] [--io epoll|io_uring|automatic]\n"
                     "          [--max-bulk BYTES] [--idle-timeout SECONDS] [--maxclients N]]\n",
                     argv[0]);
        return 2;
    }
    weft::runtime rt({.workers = opt.workers, .io = opt.io});
    server sv(opt);
    rt.spawn([&] { accept_loop(sv); }, {.name = "accept"}).detach();
    rt.spawn([&] { sweeper(sv); }, {.name = "sweeper"}).detach();

    constexpr int clients = 16;
    std::atomic<int> good{0};
    const int sig = rt.block_on([&] {
        io::signal_set stop_signals({SIGINT, SIGTERM});  // before anything can send one
        if (opt.serve) {
            std::printf("io backend: %s\nlistening on %u\n", io::current_backend().name,
                        static_cast<unsigned>(sv.listener.local_endpoint().port()));
            std::fflush(stdout);
        } else {
            weft::spawn([&] {
                weft::task_group g;
                for (int i = 0; i < clients; ++i) g.spawn([&, i] { client(sv, i, good); });
                g.wait();
                std::raise(SIGTERM);
            }).detach();
        }
        const int s = stop_signals.wait();
        sv.stopping.set();
        sv.closing.close();  // wakes every idle connection and the sweeper
        (void)sv.listener.close();
        return s;
    });
    std::printf("signal %d: stopping\n", sig);
    const std::size_t cut = rt.shutdown(5s);  // a connection mid-command is canceled at 5 s
    std::printf("shutdown: %zu tasks canceled, %ld commands served\n", cut, sv.commands.load());
    if (opt.serve) return 0;

    check(good.load() == clients, "every client got the exact replies");
    check(sv.commands.load() == 9L * clients, "the server counted every command");
    check(sv.keys.size() == 0, "every key was deleted");
    check(cut == 0, "the graceful shutdown canceled nothing");
    std::printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
