// socket_test.cpp: weft/io/socket.hpp over loopback only: echo round trips
// over many connections, partial writes, a large checksummed transfer,
// connect timeouts and refusals, accept under load and out of fds, peer
// resets, close / deadline / cancellation of a blocked read, IPv6, Unix
// streams, UDP, name resolution and endpoints; limited_listener at its
// connection limit and out of fds (with its reserve fd, and backing off).

#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <netdb.h>
#include <set>
#include <string>
#include <vector>

#include "io_test_support.hpp"

namespace weft::test {
namespace {

using namespace std::chrono_literals;

// on_connection() is io_fixture's (io_test_support.hpp).
class socket_test : public io_fixture {};

std::string text(std::span<const std::byte> b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }

// echo_connection() echoes until the peer shuts down its side.
void echo_connection(io::stream s) {
    std::array<std::byte, 4096> buf{};
    for (;;) {
        const std::size_t n = s.read_some(buf, io::after(30s));
        if (n == 0) return;
        s.write_all(std::span(buf.data(), n), io::after(30s));
    }
}

// unique_name() is a per-process, per-call name for Unix sockets.
std::string unique_name(const char* what) {
    static std::atomic<int> n{0};
    return std::string("weft-test-") + what + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

// echo_round_trip() connects to `at`, sends `msg` and checks the echo.
void echo_round_trip(io::listener& l, const io::endpoint& at, std::string_view msg) {
    auto server = spawn([&] { echo_connection(l.accept(io::after(30s))); });
    io::stream c = io::stream::connect(at, io::after(30s));
    EXPECT_EQ(c.write_all(bytes(msg), io::after(30s)), msg.size());
    std::vector<std::byte> back(msg.size());
    EXPECT_EQ(c.read_exact(back, io::after(30s)), msg.size());
    EXPECT_EQ(text(back), msg);
    EXPECT_FALSE(c.shutdown());
    std::array<std::byte, 1> one{};
    EXPECT_EQ(c.read_some(one, io::after(30s)), 0u);  // the server saw eof and closed
    server.join();
}

TEST_P(socket_test, many_connections_echo_many_messages) {
    runtime rt(options());
    constexpr int conns = 64;
    const int msgs = sanitized ? 10 : 40;
    const long total = rt.block_on([&] {
        auto l = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
        const auto at = l.local_endpoint();
        auto server = spawn([&] {
            std::vector<join_handle<void>> conn;
            for (int i = 0; i < conns; ++i) conn.push_back(spawn([s = l.accept(io::after(30s))]() mutable {
                echo_connection(std::move(s));
            }));
            for (auto& h : conn) h.join();
        });
        std::vector<join_handle<long>> clients;
        for (int i = 0; i < conns; ++i)
            clients.push_back(spawn([&, i] {
                auto s = io::tcp_stream::connect(at, io::after(30s));
                EXPECT_FALSE(s.set_no_delay(true));
                long sum = 0;
                std::vector<std::byte> out, in;
                for (int m = 0; m < msgs; ++m) {
                    // Sizes from 1 byte to ~3 KB, contents that depend on
                    // the connection and the message.
                    const std::size_t size = 1 + static_cast<std::size_t>((i * 131 + m * 977) % 3000);
                    out.resize(size);
                    in.assign(size, std::byte{0});
                    for (std::size_t k = 0; k < size; ++k) out[k] = std::byte(static_cast<unsigned char>(i + m + k));
                    s.write_all(out, io::after(30s));
                    s.read_exact(in, io::after(30s));
                    if (in != out) ADD_FAILURE() << "connection " << i << " message " << m << " came back changed";
                    sum += static_cast<long>(size);
                }
                s.shutdown();
                return sum;
            }));
        long sum = 0;
        for (auto& c : clients) sum += c.join();
        server.join();
        return sum;
    });
    long expect = 0;
    for (int i = 0; i < conns; ++i)
        for (int m = 0; m < msgs; ++m) expect += 1 + (i * 131 + m * 977) % 3000;
    EXPECT_EQ(total, expect);
}

TEST_P(socket_test, small_buffers_give_partial_writes_and_write_all_finishes) {
    on_connection([](io::listener&, io::stream& c, io::stream& s) {
        // A small send buffer: few bytes in flight, so the message goes in
        // many pieces (each waiting for ACKs; keep it modest, loopback TCP
        // with a 4 KB send buffer moves ~2 MB/s).
        const int small = 4096;
        ASSERT_EQ(::setsockopt(c.native().native_handle(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
        std::vector<std::byte> big(256 << 10);
        for (std::size_t i = 0; i < big.size(); ++i) big[i] = std::byte(static_cast<unsigned char>(i * 7 + (i >> 12)));
        // Nobody reads yet: a single write cannot take it all.
        const std::size_t first = c.write_some(big, io::after(30s));
        EXPECT_GT(first, 0u);
        EXPECT_LT(first, big.size());
        auto reader = spawn([&] {
            std::vector<std::byte> got(big.size());
            std::size_t n = s.read_exact(got, io::after(30s));
            return n == big.size() && got == big;
        });
        EXPECT_EQ(c.write_all(std::span(big).subspan(first), io::after(30s)), big.size() - first);
        EXPECT_TRUE(reader.join());
    });
}

TEST_P(socket_test, a_large_transfer_arrives_whole_and_in_order) {
    runtime rt(options());
    const std::size_t total = (sanitized ? 8u : 64u) << 20;
    constexpr std::size_t chunk = 64 << 10;
    // hash() depends on every 64-bit word and its position.
    auto hash = [](std::uint64_t h, std::span<const std::byte> b, std::uint64_t base) {
        for (std::size_t i = 0; i + 8 <= b.size(); i += 8) {
            std::uint64_t w;
            std::memcpy(&w, b.data() + i, 8);
            h = (h ^ (w + base + i)) * 0x100000001b3ull;
        }
        return h;
    };
    const auto [sent, received, count] = rt.block_on([&] {
        auto l = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
        auto writer = spawn([&, at = l.local_endpoint()] {
            auto c = io::tcp_stream::connect(at, io::after(30s));
            std::vector<std::byte> buf(chunk);
            std::uint64_t h = 14695981039346656037ull, x = 88172645463325252ull;
            for (std::size_t off = 0; off < total; off += chunk) {
                for (std::size_t i = 0; i < chunk; i += 8) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    std::memcpy(buf.data() + i, &x, 8);
                }
                h = hash(h, buf, off);
                c.write_all(buf, io::after(30s));
            }
            c.shutdown();
            return h;
        });
        auto s = l.accept(io::after(30s));
        std::vector<std::byte> buf(chunk);
        std::uint64_t h = 14695981039346656037ull;
        std::size_t n = 0;
        for (;;) {
            std::error_code ec;
            const std::size_t got = s.read_exact(buf, ec, io::after(30s));
            if (ec == io::eof()) {
                EXPECT_EQ(got, 0u);
                break;
            }
            EXPECT_FALSE(ec) << ec.message();
            if (ec) break;
            h = hash(h, buf, n);
            n += got;
        }
        return std::tuple(writer.join(), h, n);
    });
    EXPECT_EQ(count, total);
    EXPECT_EQ(sent, received);
}

TEST_P(socket_test, connect_times_out_at_its_deadline_when_the_listen_queue_is_full) {
    runtime rt(options());
    rt.block_on([] {
        // Backlog 0 and nobody accepting: once the queue is full the kernel
        // drops further SYNs, so a connect stays pending until its deadline.
        auto l = io::tcp_listener::bind(io::endpoint::loopback_v4(0), 0);
        std::vector<io::stream> queued;
        bool timed_out = false;
        for (int i = 0; i < 16 && !timed_out; ++i) {
            std::error_code ec;
            const auto start = io::clock::now();
            const auto deadline = start + 100ms;
            auto c = io::tcp_stream::connect(l.local_endpoint(), ec, deadline);
            if (ec == std::errc::timed_out) {
                timed_out = true;
                EXPECT_GE(io::clock::now(), deadline);
                EXPECT_FALSE(c.is_open());
            } else {
                ASSERT_FALSE(ec) << ec.message();
                queued.push_back(std::move(c));
            }
        }
        EXPECT_TRUE(timed_out) << "every connect completed although nobody accepts";
        EXPECT_GE(queued.size(), 1u);
    });
}

TEST_P(socket_test, connect_with_a_deadline_already_passed_times_out) {
    runtime rt(options());
    rt.block_on([] {
        auto l = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
        std::error_code ec;
        auto c = io::tcp_stream::connect(l.local_endpoint(), ec, io::clock::now() - 1ms);
        EXPECT_EQ(ec, std::errc::timed_out);
        EXPECT_FALSE(c.is_open());
        EXPECT_THROW((void)io::tcp_stream::connect(l.local_endpoint(), io::clock::now()), std::system_error);
    });
}

TEST_P(socket_test, connect_to_a_closed_port_is_refused) {
    runtime rt(options());
    rt.block_on([] {
        io::endpoint at;
        {
            auto l = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
            at = l.local_endpoint();
        }
        std::error_code ec;
        auto c = io::tcp_stream::connect(at, ec, io::after(30s));
        EXPECT_EQ(ec, std::errc::connection_refused);
        EXPECT_FALSE(c.is_open());
        try {
            (void)io::tcp_stream::connect(at, io::after(30s));
            ADD_FAILURE() << "no exception";
        } catch (const std::system_error& e) {
            EXPECT_EQ(e.code(), std::errc::connection_refused);
        }
    });
}

TEST_P(socket_test, accept_keeps_up_with_many_concurrent_connectors) {
    runtime rt(options());
    const int n = sanitized ? 64 : 256;
    const std::set<std::uint32_t> ids = rt.block_on([&] {
        auto l = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
        std::vector<join_handle<void>> clients;
        for (int i = 0; i < n; ++i)
            clients.push_back(spawn([i, at = l.local_endpoint()] {
                auto c = io::tcp_stream::connect(at, io::after(30s));
                const auto id = static_cast<std::uint32_t>(i);
                c.write_all(std::as_bytes(std::span(&id, 1)), io::after(30s));
                std::array<std::byte, 1> b{};
                EXPECT_EQ(c.read_some(b, io::after(30s)), 0u);  // the server closed
            }));
        std::set<std::uint32_t> seen;
        for (int i = 0; i < n; ++i) {
            io::endpoint peer;
            auto s = l.accept(io::after(30s), &peer);
            EXPECT_EQ(peer, s.remote_endpoint());
            EXPECT_EQ(s.local_endpoint(), l.local_endpoint());
            std::uint32_t id = 0;
            s.read_exact(std::as_writable_bytes(std::span(&id, 1)), io::after(30s));
            seen.insert(id);
        }
        for (auto& c : clients) c.join();
        return seen;
    });
    ASSERT_EQ(ids.size(), static_cast<std::size_t>(n));
    EXPECT_EQ(*ids.begin(), 0u);
    EXPECT_EQ(*ids.rbegin(), static_cast<std::uint32_t>(n - 1));
}

TEST_P(socket_test, a_peer_reset_fails_a_blocked_read_with_connection_reset) {
    on_connection([](io::listener&, io::stream& c, io::stream& s) {
        auto reader = blocked_read(c);
        const linger lg{1, 0};  // close() sends RST instead of FIN
        ASSERT_EQ(::setsockopt(s.native().native_handle(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
        EXPECT_FALSE(s.close());
        auto [n, ec] = reader.join();
        EXPECT_EQ(n, 0u);
        EXPECT_EQ(ec, std::errc::connection_reset);
    });
}

TEST_P(socket_test, closing_a_stream_from_another_task_wakes_its_reader) {
    on_connection([](io::listener&, io::stream& c, io::stream& s) {
        auto reader = blocked_read(c);
        EXPECT_FALSE(c.close());
        auto [n, ec] = reader.join();
        EXPECT_EQ(n, 0u);
        EXPECT_EQ(ec, std::errc::operation_canceled);
        EXPECT_FALSE(c.is_open());
        // The peer sees the connection end.
        std::array<std::byte, 1> b{};
        EXPECT_EQ(s.read_some(b, io::after(30s)), 0u);
    });
}

TEST_P(socket_test, closing_a_listener_wakes_its_acceptor) {
    runtime rt(options());
    rt.block_on([] {
        auto l = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
        auto acceptor = spawn([&] {
            std::error_code ec;
            auto s = l.accept(ec, io::after(30s));
            return std::pair(s.is_open(), ec);
        });
        while (acceptor.state() != task_state::waiting) this_task::yield();
        EXPECT_FALSE(l.close());
        auto [open, ec] = acceptor.join();
        EXPECT_FALSE(open);
        EXPECT_EQ(ec, std::errc::operation_canceled);
    });
}

TEST_P(socket_test, a_read_deadline_fires_mid_read_and_the_stream_stays_usable) {
    on_connection([](io::listener& l, io::stream& c, io::stream& s) {
        // Half a message arrives, then nothing: read_exact returns what it
        // has with timed_out.
        s.write_all(bytes("half"), io::after(30s));
        std::array<std::byte, 8> buf{};
        std::error_code ec;
        const auto deadline = io::after(30ms);
        EXPECT_EQ(c.read_exact(buf, ec, deadline), 4u);
        EXPECT_EQ(ec, std::errc::timed_out);
        EXPECT_GE(io::clock::now(), deadline);
        EXPECT_EQ(text(std::span(buf).first(4)), "half");
        s.write_all(bytes("rest"), io::after(30s));
        EXPECT_EQ(c.read_exact(std::span(buf).first(4), io::after(30s)), 4u);
        EXPECT_EQ(text(std::span(buf).first(4)), "rest");
        // A deadline on accept too.
        EXPECT_THROW((void)l.accept(io::after(5ms)), std::system_error);
    });
}

TEST_P(socket_test, canceling_a_task_blocked_in_read_unwinds_it) {
    on_connection([](io::listener&, io::stream& c, io::stream& s) {
        EXPECT_TRUE(cancel_unwinds([&] {
            std::array<std::byte, 4> buf{};
            (void)c.read_exact(buf);
        }));
        // The stream still works afterwards.
        s.write_all(bytes("ok"), io::after(30s));
        std::array<std::byte, 2> buf{};
        EXPECT_EQ(c.read_exact(buf, io::after(30s)), 2u);
        EXPECT_EQ(text(buf), "ok");
    });
}

// drain() reads from `from` until `want` bytes came or 30 s passed, and
// checks that byte i is pattern(i): nothing lost, nothing twice, in order.
std::size_t drain(io::stream& from, std::size_t want) {
    std::vector<std::byte> buf(64 * 1024);
    std::size_t got = 0;
    const auto deadline = io::after(30s);
    while (got < want) {
        std::error_code ec;
        const std::size_t n = from.read_some(buf, ec, deadline);
        if (ec || n == 0) break;
        for (std::size_t i = 0; i < n; ++i)
            if (buf[i] != static_cast<std::byte>((got + i) % 251)) {
                ADD_FAILURE() << "byte " << got + i << " is wrong";
                return got;
            }
        got += n;
    }
    return got;
}

std::vector<std::byte> pattern(std::size_t n) {
    std::vector<std::byte> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(i % 251);
    return v;
}

TEST_P(socket_test, a_writer_blocked_on_a_full_socket_ends_by_deadline_close_or_cancel) {
    // With the socket buffers made small, 2 MiB never fit while nobody
    // reads: the writer waits for room (on the io_uring owner ring: an
    // IORING_OP_SEND in flight, handle.cpp IO-R2). Each way out reports what
    // it wrote, and the reader gets exactly those bytes.
    const std::vector<std::byte> big = pattern(2u << 20);
    const auto small_buffers = [](io::stream& c, io::stream& s) {
        const int size = 64 * 1024;
        ASSERT_EQ(::setsockopt(c.native().native_handle(), SOL_SOCKET, SO_SNDBUF, &size, sizeof size), 0);
        ASSERT_EQ(::setsockopt(s.native().native_handle(), SOL_SOCKET, SO_RCVBUF, &size, sizeof size), 0);
    };
    on_connection([&](io::listener&, io::stream& c, io::stream& s) {
        small_buffers(c, s);
        std::error_code ec;
        const auto deadline = io::after(50ms);
        const std::size_t put = c.write_all(big, ec, deadline);
        EXPECT_EQ(ec, std::errc::timed_out);
        EXPECT_GT(put, 0u);
        EXPECT_LT(put, big.size());
        EXPECT_GE(io::clock::now(), deadline);
        EXPECT_EQ(drain(s, put), put);
    });
    on_connection([&](io::listener&, io::stream& c, io::stream& s) {
        small_buffers(c, s);
        auto writer = spawn([&] {
            std::error_code ec;
            const std::size_t put = c.write_all(big, ec, io::after(30s));
            return std::pair(put, ec);
        });
        while (writer.state() != task_state::waiting) this_task::yield();
        EXPECT_FALSE(c.close());
        const auto [put, ec] = writer.join();
        EXPECT_EQ(ec, std::errc::operation_canceled);
        EXPECT_LT(put, big.size());
        EXPECT_EQ(drain(s, big.size()), put);  // then the end of the stream
    });
    on_connection([&](io::listener&, io::stream& c, io::stream& s) {
        small_buffers(c, s);
        std::atomic<std::size_t> put{0};
        EXPECT_TRUE(cancel_unwinds([&] {
            std::span<const std::byte> rest(big);
            while (!rest.empty()) {
                const std::size_t n = c.write_some(rest);
                put += n;
                rest = rest.subspan(n);
            }
        }));
        EXPECT_GT(put.load(), 0u);
        // What a canceled write had sent was counted: the peer gets exactly it.
        EXPECT_FALSE(c.close());
        EXPECT_EQ(drain(s, big.size()), put.load());
    });
}

TEST_P(socket_test, read_exact_reports_eof_with_the_bytes_it_got) {
    on_connection([](io::listener&, io::stream& c, io::stream& s) {
        s.write_all(bytes("abc"), io::after(30s));
        EXPECT_FALSE(s.shutdown(io::shutdown_kind::write));
        std::array<std::byte, 8> buf{};
        std::error_code ec;
        EXPECT_EQ(c.read_exact(buf, ec, io::after(30s)), 3u);
        EXPECT_EQ(ec, io::eof());
        EXPECT_STREQ(ec.category().name(), "weft.io");
        EXPECT_EQ(ec.message(), "end of file");
        // Writing to a peer that has gone reports an error, never SIGPIPE.
        EXPECT_FALSE(s.close());
        std::error_code wec;
        for (int i = 0; i < 100 && !wec; ++i) {
            (void)c.write_some(bytes("x"), wec, io::after(30s));
            if (!wec) this_task::sleep_for(1ms);
        }
        EXPECT_TRUE(wec == std::errc::broken_pipe || wec == std::errc::connection_reset) << wec.message();
    });
}

TEST_P(socket_test, ipv6_loopback_round_trip) {
    runtime rt(options());
    const bool ran = rt.block_on([] {
        std::error_code ec;
        auto l = io::tcp_listener::bind(io::endpoint::loopback_v6(0), ec);
        if (ec == std::errc::address_not_available || ec == std::errc::address_family_not_supported) return false;
        EXPECT_FALSE(ec) << ec.message();
        if (ec) return true;
        const auto at = l.local_endpoint();
        EXPECT_EQ(at.family(), AF_INET6);
        EXPECT_EQ(at.to_string(), "[::1]:" + std::to_string(at.port()));
        echo_round_trip(l, at, "over IPv6");
        auto c = io::tcp_stream::connect(at, io::after(30s));
        auto s = l.accept(io::after(30s));
        EXPECT_EQ(c.remote_endpoint(), at);
        EXPECT_EQ(s.remote_endpoint(), c.local_endpoint());
        return true;
    });
    if (!ran) GTEST_SKIP() << "::1 cannot be bound here";
}

TEST_P(socket_test, unix_streams_in_the_abstract_namespace_and_on_a_path) {
    runtime rt(options());
    rt.block_on([] {
        const auto abstract = io::endpoint::unix_path("@" + unique_name("abstract"));
        {
            auto l = io::unix_listener::bind(abstract);
            EXPECT_EQ(l.local_endpoint(), abstract);
            echo_round_trip(l, abstract, "through an abstract name");
            auto c = io::unix_stream::connect(abstract, io::after(30s));
            auto s = l.accept(io::after(30s));
            EXPECT_EQ(c.remote_endpoint(), abstract);
            EXPECT_EQ(s.remote_endpoint().to_string(), "unix:");  // the client is unnamed
            EXPECT_TRUE(c.set_no_delay(true));                    // no TCP options on a Unix stream
            EXPECT_FALSE(c.set_keep_alive(true));
        }
        const std::string path = "/tmp/" + unique_name("path") + ".sock";
        {
            const auto at = io::endpoint::unix_path(path);
            EXPECT_EQ(at.to_string(), "unix:" + path);
            auto l = io::unix_listener::bind(at);
            echo_round_trip(l, at, "through a path");
        }
        EXPECT_EQ(::unlink(path.c_str()), 0);
    });
}

TEST_P(socket_test, a_unix_connect_to_a_full_queue_retries_until_its_deadline) {
    runtime rt(options());
    rt.block_on([] {
        const auto at = io::endpoint::unix_path("@" + unique_name("full"));
        auto l = io::unix_listener::bind(at, 0);
        std::vector<io::stream> queued;
        std::error_code ec;
        for (int i = 0; i < 16 && !ec; ++i) {
            auto c = io::unix_stream::connect(at, ec, io::after(30ms));
            if (!ec) queued.push_back(std::move(c));
        }
        EXPECT_EQ(ec, std::errc::timed_out);
        ASSERT_GE(queued.size(), 1u);
        // Accepting one makes room: the next connect succeeds, even one
        // that started while the queue was still full.
        auto late = spawn([&] {
            std::error_code e;
            auto c = io::unix_stream::connect(at, e, io::after(30s));
            return std::pair(c.is_open(), e);
        });
        this_task::sleep_for(5ms);
        auto s = l.accept(io::after(30s));
        auto [open, e] = late.join();
        EXPECT_FALSE(e) << e.message();
        EXPECT_TRUE(open);
    });
}

TEST_P(socket_test, udp_datagrams_over_both_families) {
    runtime rt(options());
    rt.block_on([] {
        for (const auto& any : {io::endpoint::loopback_v4(0), io::endpoint::loopback_v6(0)}) {
            std::error_code ec;
            auto a = io::udp_socket::bind(any, ec);
            if (any.family() == AF_INET6 && ec == std::errc::address_not_available) continue;
            ASSERT_FALSE(ec) << ec.message();
            auto b = io::udp_socket::bind(any);
            const auto at_a = a.local_endpoint(), at_b = b.local_endpoint();
            EXPECT_EQ(at_a.family(), any.family());
            EXPECT_NE(at_a.port(), 0);
            std::array<std::byte, 64> buf{};
            io::endpoint from;
            // Nothing sent yet: the deadline ends the receive.
            EXPECT_EQ(b.recv_from(buf, from, ec, io::after(10ms)), 0u);
            EXPECT_EQ(ec, std::errc::timed_out);
            auto receiver = spawn([&] {
                io::endpoint f;
                std::array<std::byte, 64> rb{};
                const std::size_t n = b.recv_from(rb, f, io::after(30s));
                EXPECT_EQ(f, at_a);
                return text(std::span(rb).first(n));
            });
            while (receiver.state() != task_state::waiting) this_task::yield();
            EXPECT_EQ(a.send_to(bytes("datagram one"), at_b, io::after(30s)), 12u);
            EXPECT_EQ(receiver.join(), "datagram one");
            // And back, with a truncating buffer.
            EXPECT_EQ(b.send_to(bytes("reply longer than four"), at_a, io::after(30s)), 22u);
            EXPECT_EQ(a.recv_from(std::span(buf).first(4), from, io::after(30s)), 4u);
            EXPECT_EQ(text(std::span(buf).first(4)), "repl");
            EXPECT_EQ(from, at_b);
        }
    });
}

TEST_P(socket_test, resolve_localhost_gives_loopback_addresses) {
    runtime rt(options());
    rt.block_on([] {
        const auto eps = io::resolve("localhost", "80");
        ASSERT_FALSE(eps.empty());
        for (const auto& ep : eps) {
            EXPECT_EQ(ep.port(), 80);
            if (ep.family() == AF_INET)
                EXPECT_EQ(ntohl(reinterpret_cast<const sockaddr_in*>(ep.data())->sin_addr.s_addr) >> 24, 127u)
                    << ep.to_string();
            else
                EXPECT_EQ(ep, io::endpoint::loopback_v6(80));
        }
        std::error_code ec;
        const auto none = io::resolve("127.0.0.1", "no-such-service-weft", ec);
        EXPECT_TRUE(none.empty());
        EXPECT_STREQ(ec.category().name(), "weft.resolve");
        EXPECT_EQ(ec.value(), EAI_SERVICE);
        EXPECT_EQ(ec.message(), ::gai_strerror(EAI_SERVICE));
        EXPECT_THROW((void)io::resolve("127.0.0.1", "no-such-service-weft"), std::system_error);
    });
}

TEST_P(socket_test, accept_reports_emfile_and_works_again_once_fds_are_free) {
    runtime rt(options());
    rt.block_on([] {
        auto l = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
        // The connection is queued before fds run out; the client's own
        // socket needs one too.
        auto c = io::tcp_stream::connect(l.local_endpoint(), io::after(30s));
        rlimit old{};
        ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
        rlimit low = old;
        low.rlim_cur = static_cast<rlim_t>(open_fds() + 8);
        ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
        std::vector<int> fillers;
        for (int fd; fillers.size() < 4096 && (fd = ::dup(l.native().native_handle())) >= 0;) fillers.push_back(fd);
        const int dup_errno = errno;
        std::error_code ec;
        auto s = l.accept(ec, io::after(30s));
        const std::error_code first = ec;
        // Free one fd: the same connection is accepted now.
        ::close(fillers.back());
        fillers.pop_back();
        auto s2 = l.accept(ec, io::after(30s));
        const std::error_code second = ec;
        for (int fd : fillers) ::close(fd);
        ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);
        EXPECT_EQ(dup_errno, EMFILE);
        EXPECT_EQ(first, std::errc::too_many_files_open);
        EXPECT_FALSE(s.is_open());
        EXPECT_FALSE(second) << second.message();
        ASSERT_TRUE(s2.is_open());
        c.write_all(bytes("still here"), io::after(30s));
        std::array<std::byte, 10> buf{};
        s2.read_exact(buf, io::after(30s));
        EXPECT_EQ(text(buf), "still here");
    });
}

// connect() out of fds: the socket it would open cannot be had, so it
// reports EMFILE (too_many_files_open), as an error code or as a
// std::system_error, opens nothing, and connects again once fds are free.
// Unlike the accept test above it needs no exact fd arithmetic: every filler
// is closed and the limit restored before the connect that must work.
TEST_P(socket_test, connect_reports_emfile_and_works_again_once_fds_are_free) {
    runtime rt(options());
    rt.block_on([] {
        constexpr bool throw_checkable = !weft::test::sanitized || weft::test::under_tsan || WEFT_VALGRIND;
        auto l = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
        // Restores the limit and frees the fds however the block is left.
        struct out_of_fds {
            rlimit old{};
            std::vector<int> fillers;
            bool lowered = false;
            ~out_of_fds() {
                for (int fd : fillers) ::close(fd);
                if (lowered) ::setrlimit(RLIMIT_NOFILE, &old);
            }
        };
        std::error_code first, second;
        bool opened = true;
        int dup_errno = 0;
        {
            out_of_fds out;
            ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &out.old), 0);
            rlimit low = out.old;
            low.rlim_cur = static_cast<rlim_t>(open_fds() + 8);
            ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
            out.lowered = true;
            for (int fd; out.fillers.size() < 4096 && (fd = ::dup(l.native().native_handle())) >= 0;)
                out.fillers.push_back(fd);
            dup_errno = errno;
            auto c = io::tcp_stream::connect(l.local_endpoint(), first, io::after(30s));
            opened = c.is_open();
            // Not under ASan+UBSan: constructing the std::system_error with
            // no fd left trips UBSan's vptr check, which probes memory
            // through a pipe it cannot open, and reports "invalid vptr".
            if (!throw_checkable) {
                second = std::make_error_code(std::errc::too_many_files_open);
            } else {
                try {
                    (void)io::tcp_stream::connect(l.local_endpoint(), io::after(30s));
                } catch (const std::system_error& e) {
                    second = e.code();
                }
            }
        }
        EXPECT_EQ(dup_errno, EMFILE);
        EXPECT_EQ(first, std::errc::too_many_files_open) << first.message();
        EXPECT_FALSE(opened);
        EXPECT_EQ(second, std::errc::too_many_files_open) << second.message();
        // fds free again: connect works and the connection carries data.
        std::error_code ec;
        auto c = io::tcp_stream::connect(l.local_endpoint(), ec, io::after(30s));
        ASSERT_FALSE(ec) << ec.message();
        auto s = l.accept(io::after(30s));
        c.write_all(bytes("again"), io::after(30s));
        std::array<std::byte, 5> buf{};
        s.read_exact(buf, io::after(30s));
        EXPECT_EQ(text(buf), "again");
    });
}

// ---- limited_listener ----

constexpr std::string_view too_many = "-ERR max number of clients reached\r\n";

// echo_limited() is echo_connection() over a limited_stream, which keeps its
// place until the handler ends.
void echo_limited(io::limited_stream& s) {
    std::array<std::byte, 4096> buf{};
    for (;;) {
        const std::size_t n = s.read_some(buf, io::after(30s));
        if (n == 0) return;
        s.write_all(std::span(buf.data(), n), io::after(30s));
    }
}

// read_to_end(c): everything c's peer sends until it closes (bounded).
std::string read_to_end(io::stream& c) {
    std::string all;
    std::array<char, 256> buf{};
    for (int i = 0; i < 100; ++i) {
        std::error_code ec;
        const std::size_t n = c.read_some(buf, ec, io::after(30s));
        if (ec) return all + "<" + ec.message() + ">";
        if (n == 0) return all;
        all.append(buf.data(), n);
    }
    return all + "<no end>";
}

// echo_once(c, msg): c sends msg and gets it back.
bool echo_once(io::stream& c, std::string_view msg) {
    c.write_all(bytes(msg), io::after(30s));
    std::vector<char> back(msg.size());
    std::error_code ec;
    return c.read_exact(back, ec, io::after(30s)) == msg.size() && std::string_view(back.data(), back.size()) == msg;
}

// wait_until(f): f() becomes true within 10 s (false if not).
template <class F>
bool wait_until(F f) {
    for (int i = 0; i < 10000; ++i) {
        if (f()) return true;
        this_task::sleep_for(1ms);
    }
    return f();
}

// At the limit a new client gets the rejection and the end of the stream,
// while the clients being served go on; when one leaves, its place is free.
TEST_P(socket_test, a_limited_listener_turns_away_clients_over_its_limit_and_serves_the_rest) {
    runtime rt(options());
    rt.block_on([] {
        auto l = io::limited_listener::bind(io::endpoint::loopback_v4(0),
                                            {.max_connections = 2, .reject_message = std::string(too_many)});
        const auto at = l.local_endpoint();
        auto server = spawn([&] {
            std::vector<join_handle<void>> conn;
            for (int i = 0; i < 3; ++i) {
                io::limited_stream s = l.accept(io::after(30s));
                EXPECT_TRUE(s.counted());
                conn.push_back(spawn([s = std::move(s)]() mutable { echo_limited(s); }));
            }
            for (auto& h : conn) h.join();
        });
        auto c1 = io::tcp_stream::connect(at, io::after(30s));
        auto c2 = io::tcp_stream::connect(at, io::after(30s));
        EXPECT_TRUE(echo_once(c1, "one"));
        EXPECT_TRUE(echo_once(c2, "two"));
        EXPECT_EQ(l.stats().live, 2u);
        // The third: the message, then the end.
        auto c3 = io::tcp_stream::connect(at, io::after(30s));
        EXPECT_EQ(read_to_end(c3), too_many);
        EXPECT_EQ(l.stats().turned_away, 1u);
        EXPECT_TRUE(echo_once(c1, "one again"));
        EXPECT_TRUE(echo_once(c2, "two again"));
        // c1 leaves: its handler ends and its place comes back.
        EXPECT_FALSE(c1.shutdown());
        EXPECT_EQ(read_to_end(c1), "");
        EXPECT_TRUE(wait_until([&] { return l.stats().live == 1; })) << l.stats().live;
        auto c4 = io::tcp_stream::connect(at, io::after(30s));
        EXPECT_TRUE(echo_once(c4, "four"));
        const auto st = l.stats();
        EXPECT_EQ(st.live, 2u);
        EXPECT_EQ(st.accepted, 3u);
        EXPECT_EQ(st.turned_away, 1u);
        EXPECT_FALSE(c2.shutdown());
        EXPECT_FALSE(c4.shutdown());
        server.join();
        EXPECT_EQ(l.stats().live, 0u);
    });
}

// A limited_stream's close() and move-assignment give its place back once.
TEST_P(socket_test, a_limited_streams_place_comes_back_once_at_close_or_destruction) {
    runtime rt(options());
    rt.block_on([] {
        auto l = io::limited_listener::bind(io::endpoint::loopback_v4(0), {.max_connections = 3});
        auto c1 = io::tcp_stream::connect(l.local_endpoint(), io::after(30s));
        auto c2 = io::tcp_stream::connect(l.local_endpoint(), io::after(30s));
        io::limited_stream a = l.accept(io::after(30s));
        io::limited_stream b = l.accept(io::after(30s));
        EXPECT_EQ(l.stats().live, 2u);
        EXPECT_FALSE(a.close());
        EXPECT_FALSE(a.counted());
        EXPECT_EQ(l.stats().live, 1u);
        (void)a.close();
        EXPECT_EQ(l.stats().live, 1u);
        a = std::move(b);
        EXPECT_TRUE(a.counted());
        EXPECT_EQ(l.stats().live, 1u);
        { io::limited_stream gone = std::move(a); }
        EXPECT_EQ(l.stats().live, 0u);
    });
}

// out_of_fds_guard lowers RLIMIT_NOFILE to the open fds plus `spare` and
// fills it with dups; free() (or the destructor) closes them and restores
// the limit.
struct out_of_fds_guard {
    rlimit old{};
    std::vector<int> fillers;
    bool lowered = false;
    int dup_errno = 0;
    bool exhaust(int fd_to_dup, int spare = 8) {
        if (::getrlimit(RLIMIT_NOFILE, &old) != 0) return false;
        rlimit low = old;
        low.rlim_cur = static_cast<rlim_t>(open_fds() + spare);
        if (::setrlimit(RLIMIT_NOFILE, &low) != 0) return false;
        lowered = true;
        for (int fd; fillers.size() < 4096 && (fd = ::dup(fd_to_dup)) >= 0;) fillers.push_back(fd);
        dup_errno = errno;
        return dup_errno == EMFILE;
    }
    void free() {
        for (int fd : fillers) ::close(fd);
        fillers.clear();
        if (lowered) ::setrlimit(RLIMIT_NOFILE, &old);
        lowered = false;
    }
    ~out_of_fds_guard() { free(); }
};

// Out of fds, the reserve fd lets the listener accept the queued client and
// turn it away with the message; once fds are free it serves again.
TEST_P(socket_test, a_limited_listener_out_of_fds_turns_clients_away_with_its_reserve_fd) {
    runtime rt(options());
    rt.block_on([] {
        auto l = io::limited_listener::bind(io::endpoint::loopback_v4(0), {.reject_message = std::string(too_many)});
        ASSERT_TRUE(l.holds_reserve());
        {  // the runtime's own fds (timers, rings) are made before fds run out
            auto w = io::tcp_stream::connect(l.local_endpoint(), io::after(30s));
            auto s = l.accept(io::after(30s));
            this_task::sleep_for(1ms);
        }
        auto c = io::tcp_stream::connect(l.local_endpoint(), io::after(30s));
        std::error_code ec;
        io::limited_listener::counts st;
        {
            out_of_fds_guard out;
            ASSERT_TRUE(out.exhaust(l.base().native().native_handle())) << out.dup_errno;
            // The queued client is turned away; then nothing is queued and
            // the accept times out.
            auto s = l.accept(ec, io::after(300ms));
            EXPECT_FALSE(s.is_open());
            st = l.stats();
        }
        EXPECT_EQ(ec, std::errc::timed_out) << ec.message();
        EXPECT_GE(st.out_of_fds, 1u);
        EXPECT_EQ(st.turned_away, 1u);
        EXPECT_EQ(read_to_end(c), too_many);
        EXPECT_TRUE(l.holds_reserve());
        // fds free again: served.
        auto c2 = io::tcp_stream::connect(l.local_endpoint(), io::after(30s));
        auto s2 = l.accept(ec, io::after(30s));
        ASSERT_FALSE(ec) << ec.message();
        c2.write_all(bytes("served"), io::after(30s));
        std::array<std::byte, 6> buf{};
        s2.read_exact(buf, io::after(30s));
        EXPECT_EQ(text(buf), "served");
        EXPECT_EQ(l.stats().accepted, 2u);
    });
}

// Out of fds without a reserve, accept() pauses between attempts (no spin)
// and, once another task frees fds, the same call returns the connection.
TEST_P(socket_test, a_limited_listener_out_of_fds_backs_off_and_serves_once_fds_are_free) {
    runtime rt(options());
    rt.block_on([] {
        auto l = io::limited_listener::bind(io::endpoint::loopback_v4(0),
                                            {.reserve_fd = false, .min_backoff = 1ms, .max_backoff = 40ms});
        EXPECT_FALSE(l.holds_reserve());
        {
            auto w = io::tcp_stream::connect(l.local_endpoint(), io::after(30s));
            auto s = l.accept(io::after(30s));
            this_task::sleep_for(1ms);
        }
        auto c = io::tcp_stream::connect(l.local_endpoint(), io::after(30s));
        out_of_fds_guard out;
        ASSERT_TRUE(out.exhaust(l.base().native().native_handle())) << out.dup_errno;
        std::atomic<std::uint64_t> attempts_before_free{0};
        auto freer = spawn([&] {
            this_task::sleep_for(400ms);
            attempts_before_free = l.stats().out_of_fds;
            out.free();
        });
        std::error_code ec;
        const auto start = io::clock::now();
        auto s = l.accept(ec, io::after(30s));
        const auto took = io::clock::now() - start;
        freer.join();
        ASSERT_FALSE(ec) << ec.message();
        const auto st = l.stats();
        // 400 ms of pauses of 1, 2, 4 ... 40 ms: about 15 attempts; a spin
        // makes thousands. Loose: at most 60.
        EXPECT_GE(attempts_before_free.load(), 2u);
        EXPECT_LE(attempts_before_free.load(), 60u);
        EXPECT_GE(st.backoffs, 2u);
        EXPECT_GE(took, 350ms);
        EXPECT_EQ(st.turned_away, 0u);
        c.write_all(bytes("late"), io::after(30s));
        std::array<std::byte, 4> buf{};
        s.read_exact(buf, io::after(30s));
        EXPECT_EQ(text(buf), "late");
    });
}

INSTANTIATE_TEST_SUITE_P(io, socket_test, io_params(), io_param_name);

// ---- endpoints: no runtime needed ----

TEST(endpoint, numeric_forms_round_trip_through_to_string_and_parse) {
    for (const char* s : {"127.0.0.1:80", "10.1.2.3:65535", "[::1]:443", "[fe80::1:2]:0", "unix:/tmp/x.sock",
                          "unix:@abstract-name"}) {
        const auto ep = io::endpoint::parse(s);
        ASSERT_TRUE(ep.has_value()) << s;
        EXPECT_EQ(ep->to_string(), s);
        EXPECT_EQ(io::endpoint::parse(ep->to_string()), ep);
    }
    for (const char* s : {"", "1.2.3.4", "1.2.3.4:", "1.2.3.4:65536", "1.2.3.4:8x", "::1:80", "[::1]", "[::1]80",
                          "host:80", "unix:", "[1.2.3.4]:80"})
        EXPECT_FALSE(io::endpoint::parse(s).has_value()) << s;
}

TEST(endpoint, constructors_say_what_they_hold) {
    const io::endpoint empty;
    EXPECT_EQ(empty.family(), AF_UNSPEC);
    EXPECT_EQ(empty.size(), 0u);
    EXPECT_EQ(empty.port(), 0);
    EXPECT_EQ(io::endpoint::loopback_v4(8080).to_string(), "127.0.0.1:8080");
    EXPECT_EQ(io::endpoint::loopback_v6(8080).to_string(), "[::1]:8080");
    EXPECT_EQ(io::endpoint::ipv4("127.0.0.1", 7), io::endpoint::loopback_v4(7));
    EXPECT_EQ(io::endpoint::ipv6("::1", 7), io::endpoint::loopback_v6(7));
    EXPECT_FALSE(io::endpoint::loopback_v4(7) == io::endpoint::loopback_v4(8));
    EXPECT_FALSE(io::endpoint::loopback_v4(7) == io::endpoint::loopback_v6(7));
    EXPECT_THROW((void)io::endpoint::ipv4("::1", 1), std::system_error);
    EXPECT_THROW((void)io::endpoint::ipv6("127.0.0.1", 1), std::system_error);
    EXPECT_THROW((void)io::endpoint::ipv4("localhost", 1), std::system_error);
    const auto u = io::endpoint::unix_path("/tmp/s");
    EXPECT_EQ(u.family(), AF_UNIX);
    EXPECT_EQ(u.port(), 0);
    const std::string longest(sizeof(sockaddr_un::sun_path) - 1, 'p');
    EXPECT_EQ(io::endpoint::unix_path(longest).to_string(), "unix:" + longest);
    try {
        (void)io::endpoint::unix_path(longest + "p");
        ADD_FAILURE() << "no exception";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code(), std::errc::filename_too_long);
    }
    EXPECT_NE(io::endpoint::unix_path("@a"), io::endpoint::unix_path("@b"));
    sockaddr_storage ss{};
    EXPECT_THROW(io::endpoint(reinterpret_cast<const sockaddr*>(&ss), sizeof ss + 1), std::system_error);
}

TEST(socket_errors, operations_on_closed_sockets_report_bad_file_descriptor) {
    io::stream s;
    std::array<std::byte, 4> buf{};
    std::error_code ec;
    EXPECT_EQ(s.read_some(buf, ec), 0u);
    EXPECT_EQ(ec, std::errc::bad_file_descriptor);
    EXPECT_EQ(s.write_all(bytes("x"), ec), 0u);
    EXPECT_EQ(ec, std::errc::bad_file_descriptor);
    EXPECT_EQ(s.shutdown(), std::errc::bad_file_descriptor);
    EXPECT_EQ(s.set_no_delay(true), std::errc::bad_file_descriptor);
    EXPECT_THROW((void)s.local_endpoint(), std::system_error);
    io::listener l;
    (void)l.accept(ec);
    EXPECT_EQ(ec, std::errc::bad_file_descriptor);
    io::udp_socket u;
    io::endpoint from;
    EXPECT_EQ(u.recv_from(buf, from, ec), 0u);
    EXPECT_EQ(ec, std::errc::bad_file_descriptor);
    // Binding an address this host does not have, or an empty endpoint.
    (void)io::tcp_listener::bind(io::endpoint::ipv4("203.0.113.77", 0), ec);
    EXPECT_TRUE(ec);
    (void)io::tcp_listener::bind(io::endpoint(), ec);
    EXPECT_EQ(ec, std::errc::address_family_not_supported);
    (void)io::udp_socket::bind(io::endpoint::unix_path("@x"), ec);
    EXPECT_EQ(ec, std::errc::address_family_not_supported);
}

TEST(socket_errors, a_plain_thread_can_use_sockets) {
    const int before = settled_open_fds();
    {
        auto l = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
        auto c = io::tcp_stream::connect(l.local_endpoint(), io::after(10s));
        auto s = l.accept(io::after(10s));
        c.write_all(bytes("plain"), io::after(10s));
        std::array<std::byte, 5> buf{};
        s.read_exact(buf, io::after(10s));
        EXPECT_EQ(text(buf), "plain");
        std::error_code ec;
        EXPECT_EQ(s.read_some(buf, ec, io::after(10ms)), 0u);
        EXPECT_EQ(ec, std::errc::timed_out);
        EXPECT_EQ(io::resolve("127.0.0.1", "80").at(0), io::endpoint::loopback_v4(80));
    }
    EXPECT_EQ(settled_open_fds(before), before);
}

}  // namespace
}  // namespace weft::test
