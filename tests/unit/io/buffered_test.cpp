// buffered_test.cpp: weft/io/buffered.hpp. Over an in-memory fake stream
// (exact control of what each read_some gives and what each write_some
// sees): delimiters split over reads and at the buffer's boundary, the
// maximum line length, the end of the stream with a partial line, CRLF,
// buffered bytes used first, errors that keep buffered bytes, the writer's
// flushes, vectored order, the destructor discarding, char spans, line_end.
// Over loopback TCP on every worker count and backend: one-byte writes, a
// deadline mid-line, a cancellation in read_until, io::copy of 1 MiB, a
// command cut by the peer's close, buffered_stream's flush before a read
// waits and its batching of pipelined replies.

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "io_test_support.hpp"
#include "weft/io/buffered.hpp"

namespace weft::test {
namespace {

using namespace std::chrono_literals;

// fake_stream gives `chunks` to read_some in order (each call at most one
// chunk's rest), then `at_end` (0, or the error fail_at_end); it records
// every write_some's bytes, taking at most max_write of them, or fails
// with write_error when that is set.
struct fake_stream {
    std::vector<std::string> chunks;
    std::size_t next = 0, off = 0;
    int reads = 0;
    std::size_t read_bytes = 0;
    std::error_code fail_at_end;
    std::vector<std::string> writes;
    std::size_t max_write = static_cast<std::size_t>(-1);
    std::error_code write_error;
    int fail_after_writes = -1;  // >= 0: every write_some after that many fails

    std::size_t read_some(std::span<std::byte> b, std::error_code& ec, io::clock::time_point) {
        ec.clear();
        ++reads;
        if (b.empty()) return 0;
        while (next < chunks.size() && off == chunks[next].size()) {
            ++next;
            off = 0;
        }
        if (next == chunks.size()) {
            ec = fail_at_end;
            return 0;
        }
        const std::size_t n = std::min(b.size(), chunks[next].size() - off);
        std::memcpy(b.data(), chunks[next].data() + off, n);
        off += n;
        read_bytes += n;
        return n;
    }
    std::size_t write_some(std::span<const std::byte> b, std::error_code& ec, io::clock::time_point) {
        ec = write_error;
        if (fail_after_writes >= 0 && static_cast<int>(writes.size()) >= fail_after_writes)
            ec = std::make_error_code(std::errc::connection_reset);
        if (ec) return 0;
        const std::size_t n = std::min(b.size(), max_write);
        writes.emplace_back(reinterpret_cast<const char*>(b.data()), n);
        return n;
    }
    [[nodiscard]] std::string written() const {
        std::string all;
        for (const auto& w : writes) all += w;
        return all;
    }
};

std::string text(std::span<const std::byte> b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }

TEST(buffered, read_until_finds_delimiters_split_over_one_byte_reads) {
    fake_stream f;
    for (char c : std::string("ab;cde;;f")) f.chunks.emplace_back(1, c);
    io::buffered_reader r(f);
    std::string out;
    std::error_code ec;
    EXPECT_EQ(r.read_until(';', out, ec), 3u);
    EXPECT_EQ(out, "ab;");
    out.clear();
    EXPECT_EQ(r.read_until(';', out, ec), 4u);
    EXPECT_EQ(out, "cde;");
    out.clear();
    EXPECT_EQ(r.read_until(';', out, ec), 1u);
    EXPECT_EQ(out, ";");
    out.clear();
    EXPECT_EQ(r.read_until(';', out, ec), 1u);  // the last piece, at the end, without delimiter
    EXPECT_FALSE(ec);
    EXPECT_EQ(out, "f");
    EXPECT_EQ(r.read_until(';', out, ec), 0u);
    EXPECT_EQ(ec, io::eof());
    EXPECT_EQ(out, "f");
}

TEST(buffered, a_delimiter_at_the_buffer_boundary) {
    fake_stream f;
    f.chunks = {"abc\ndefg\nxyz\n"};
    io::buffered_reader r(f, {.capacity = 4});
    std::string out;
    EXPECT_EQ(r.read_until('\n', out), 4u);  // fills the buffer exactly
    EXPECT_EQ(out, "abc\n");
    EXPECT_EQ(f.read_bytes, 4u);
    EXPECT_TRUE(r.buffered().empty());
    out.clear();
    EXPECT_EQ(r.read_until('\n', out), 5u);  // the delimiter one past the capacity: the buffer grows
    EXPECT_EQ(out, "defg\n");
    out.clear();
    EXPECT_EQ(r.read_until('\n', out), 4u);
    EXPECT_EQ(out, "xyz\n");
    std::error_code ec;
    EXPECT_EQ(r.read_until('\n', out, ec), 0u);
    EXPECT_EQ(ec, io::eof());
    EXPECT_THROW(r.read_until('\n', out), std::system_error);
}

TEST(buffered, a_line_longer_than_the_maximum_fails_and_the_buffer_stops_growing) {
    fake_stream f;
    f.chunks = {std::string(15, 'x') + "\n" + std::string(16, 'y') + "\n" + std::string(1000, 'z') + "\n"};
    io::buffered_reader r(f, {.capacity = 4, .max_delimited = 16});
    std::string out;
    std::error_code ec;
    EXPECT_EQ(r.read_until('\n', out, ec), 16u);  // exactly the maximum, delimiter included
    EXPECT_FALSE(ec);
    out.clear();
    EXPECT_EQ(r.read_until('\n', out, ec), 0u);  // 17 bytes
    EXPECT_EQ(ec, std::errc::message_size);
    EXPECT_TRUE(out.empty());
    EXPECT_LE(r.buffered().size(), 17u);
    r.consume(16);  // skip the y's
    EXPECT_EQ(r.read_until('\n', out, ec), 1u);
    EXPECT_EQ(out, "\n");
    out.clear();
    EXPECT_EQ(r.read_until('\n', out, ec), 0u);
    EXPECT_EQ(ec, std::errc::message_size);
    EXPECT_EQ(r.buffered().size(), 16u);
    EXPECT_LE(f.read_bytes, 16u + 17u + 16u);  // read no further than the limit
    std::error_code again;
    EXPECT_EQ(r.read_until('\n', out, again), 0u);  // still the same answer, no more reading
    EXPECT_EQ(again, std::errc::message_size);
    EXPECT_LE(f.read_bytes, 16u + 17u + 16u);
}

TEST(buffered, a_buffer_larger_than_the_maximum_still_enforces_it) {
    fake_stream f;
    f.chunks = {"0123456789\nab\n"};
    io::buffered_reader r(f, {.capacity = 64, .max_delimited = 8});
    std::string out;
    std::error_code ec;
    EXPECT_EQ(r.read_until('\n', out, ec), 0u);  // its delimiter is the 11th byte
    EXPECT_EQ(ec, std::errc::message_size);
    EXPECT_TRUE(out.empty());
    r.consume(11);
    EXPECT_EQ(r.read_until('\n', out, ec), 3u);
    EXPECT_EQ(out, "ab\n");
}

TEST(buffered, the_end_of_the_stream_gives_the_partial_line_then_eof) {
    fake_stream f;
    f.chunks = {"one\ntw", "o"};
    io::buffered_reader r(f);
    std::string out;
    std::error_code ec;
    EXPECT_EQ(r.read_line(out, ec), 4u);
    EXPECT_EQ(out, "one");
    out.clear();
    EXPECT_EQ(r.read_line(out, ec), 3u);
    EXPECT_FALSE(ec);
    EXPECT_EQ(out, "two");
    out.clear();
    EXPECT_EQ(r.read_line(out, ec), 0u);
    EXPECT_EQ(ec, io::eof());
    EXPECT_EQ(r.read_line(out, ec), 0u);
    EXPECT_EQ(ec, io::eof());
    EXPECT_TRUE(out.empty());
}

TEST(buffered, read_line_strips_lf_and_crlf_only_at_the_end) {
    fake_stream f;
    f.chunks = {"a\r\nb\n\r", "\nc\rd\n\ne\r"};
    io::buffered_reader r(f, {.capacity = 3});
    std::vector<std::pair<std::size_t, std::string>> got;
    std::error_code ec;
    for (int i = 0; i < 10; ++i) {
        std::string line = "<";
        const std::size_t n = r.read_line(line, ec);
        if (ec) break;
        got.emplace_back(n, line);
    }
    EXPECT_EQ(ec, io::eof());
    const std::vector<std::pair<std::size_t, std::string>> want = {
        {3, "<a"}, {2, "<b"}, {2, "<"}, {4, "<c\rd"}, {1, "<"}, {2, "<e\r"}};
    EXPECT_EQ(got, want);
}

// A piece cut by the end of the stream comes back as the last piece either
// way; the line_end forms say which it is, so a server need not run a
// command whose client closed before ending it.
TEST(buffered, line_end_tells_a_whole_line_from_one_cut_by_the_end_of_the_stream) {
    fake_stream f;
    f.chunks = {"GET a\r\nPI", "NG\n", "SET k v"};
    io::buffered_reader r(f);
    std::string out;
    io::line_end end = io::line_end::eof;
    std::error_code ec;
    EXPECT_EQ(r.read_line(out, end, ec), 7u);
    EXPECT_EQ(end, io::line_end::delimiter);
    EXPECT_EQ(out, "GET a");
    out.clear();
    EXPECT_EQ(r.read_until('\n', out, end, ec), 5u);
    EXPECT_EQ(end, io::line_end::delimiter);
    EXPECT_EQ(out, "PING\n");
    out.clear();
    EXPECT_EQ(r.read_line(out, end, ec), 7u);
    EXPECT_FALSE(ec);
    EXPECT_EQ(end, io::line_end::eof);
    EXPECT_EQ(out, "SET k v");
    out.clear();
    EXPECT_EQ(r.read_line(out, end, ec), 0u);
    EXPECT_EQ(ec, io::eof());
    EXPECT_EQ(end, io::line_end::none);
    // read_until's and the throwing forms say the same.
    fake_stream g;
    g.chunks = {"a;b"};
    io::buffered_reader r2(g);
    EXPECT_EQ(r2.read_until(';', out, end), 2u);
    EXPECT_EQ(end, io::line_end::delimiter);
    EXPECT_EQ(r2.read_until(';', out, end), 1u);
    EXPECT_EQ(end, io::line_end::eof);
    EXPECT_EQ(out, "a;b");
    EXPECT_THROW(r2.read_line(out, end), std::system_error);
    EXPECT_EQ(end, io::line_end::none);
}

TEST(buffered, read_exact_after_read_until_takes_the_buffered_bytes_first) {
    fake_stream f;
    f.chunks = {"hdr\nBODY1234", "tail"};
    io::buffered_reader r(f);
    std::string out;
    EXPECT_EQ(r.read_until('\n', out), 4u);
    EXPECT_EQ(f.reads, 1);
    EXPECT_EQ(text(r.buffered()), "BODY1234");
    std::array<std::byte, 8> body{};
    EXPECT_EQ(r.read_exact(body), 8u);
    EXPECT_EQ(text(body), "BODY1234");
    EXPECT_EQ(f.reads, 1);  // from the buffer, no read
    std::array<std::byte, 6> more{};
    std::error_code ec;
    EXPECT_EQ(r.read_exact(more, ec), 4u);
    EXPECT_EQ(ec, io::eof());
    EXPECT_EQ(text(std::span(more).first(4)), "tail");
}

TEST(buffered, read_some_peek_and_consume) {
    fake_stream f;
    f.chunks = {"hello world", std::string(100, 'L')};
    io::buffered_reader r(f, {.capacity = 16});
    EXPECT_TRUE(r.buffered().empty());
    EXPECT_EQ(text(r.peek()), "hello world");
    r.consume(6);
    EXPECT_EQ(text(r.buffered()), "world");
    std::array<char, 3> small{};
    EXPECT_EQ(r.read_some(std::span<char>(small)), 3u);
    EXPECT_EQ(std::string(small.data(), 3), "wor");
    std::array<char, 64> big{};
    EXPECT_EQ(r.read_some(std::span<char>(big)), 2u);  // the buffered rest only
    const int before = f.reads;
    EXPECT_EQ(r.read_some(std::span<char>(big)), 64u);  // larger than the capacity: straight from the stream
    EXPECT_EQ(f.reads, before + 1);
    EXPECT_TRUE(r.buffered().empty());
    r.consume(1000);  // more than buffered: all of it
    std::array<char, 36> rest{};
    EXPECT_EQ(r.read_exact(std::span<char>(rest)), 36u);
    std::error_code ec;
    EXPECT_TRUE(r.peek(ec).empty());
    EXPECT_FALSE(ec);  // peek at the end: empty, no error
}

TEST(buffered, a_stream_error_mid_line_keeps_the_bytes_for_the_next_call) {
    fake_stream f;
    f.chunks = {"par"};
    f.fail_at_end = std::make_error_code(std::errc::timed_out);
    io::buffered_reader r(f);
    std::string out;
    std::error_code ec;
    EXPECT_EQ(r.read_until('\n', out, ec), 0u);
    EXPECT_EQ(ec, std::errc::timed_out);
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(text(r.buffered()), "par");
    f.chunks.push_back("tial\nnext");
    EXPECT_EQ(r.read_until('\n', out, ec), 8u);
    EXPECT_EQ(out, "partial\n");
}

TEST(buffered, the_writer_flushes_when_full_and_writes_large_data_directly) {
    fake_stream f;
    io::buffered_writer w(f, {.capacity = 8});
    EXPECT_EQ(w.write("abc"), 3u);
    EXPECT_EQ(w.write("defgh"), 5u);  // fills it exactly: still no IO
    EXPECT_TRUE(f.writes.empty());
    EXPECT_EQ(w.pending(), 8u);
    EXPECT_EQ(w.write("i"), 1u);  // does not fit: flush first
    ASSERT_EQ(f.writes.size(), 1u);
    EXPECT_EQ(f.writes[0], "abcdefgh");
    EXPECT_EQ(w.pending(), 1u);
    const std::string big(20, 'B');
    EXPECT_EQ(w.write(big), 20u);  // the buffer, then the large data itself
    ASSERT_EQ(f.writes.size(), 3u);
    EXPECT_EQ(f.writes[1], "i");
    EXPECT_EQ(f.writes[2], big);
    EXPECT_EQ(w.pending(), 0u);
    w.flush();
    EXPECT_EQ(f.writes.size(), 3u);  // nothing to flush: no write
    // Short writes: flush loops until all is out.
    f.max_write = 3;
    EXPECT_EQ(w.write("0123456"), 7u);
    w.flush();
    EXPECT_EQ(w.pending(), 0u);
    EXPECT_EQ(f.written(), "abcdefghi" + big + "0123456");
}

TEST(buffered, a_write_error_keeps_the_buffer_and_reports_what_was_taken) {
    fake_stream f;
    io::buffered_writer w(f, {.capacity = 4});
    EXPECT_EQ(w.write("abc"), 3u);
    f.write_error = std::make_error_code(std::errc::broken_pipe);
    std::error_code ec;
    EXPECT_EQ(w.write("defg", ec), 0u);  // needed a flush, which failed: none of it taken
    EXPECT_EQ(ec, std::errc::broken_pipe);
    EXPECT_EQ(w.pending(), 3u);
    EXPECT_THROW(w.flush(), std::system_error);
    f.write_error.clear();
    w.flush(ec);
    EXPECT_FALSE(ec);
    EXPECT_EQ(f.written(), "abc");
    // A flush that fails after a short write keeps only the unwritten rest.
    f.max_write = 2;
    f.fail_after_writes = 2;
    EXPECT_EQ(w.write("defg"), 4u);
    EXPECT_EQ(w.write(""), 0u);
    w.flush(ec);
    EXPECT_EQ(ec, std::errc::connection_reset);
    EXPECT_EQ(w.pending(), 2u);
    f.fail_after_writes = -1;
    w.flush(ec);
    EXPECT_FALSE(ec);
    EXPECT_EQ(f.written(), "abcdefg");  // nothing written twice, nothing lost
}

TEST(buffered, write_vectored_keeps_the_order_of_the_pieces) {
    fake_stream f;
    io::buffered_writer w(f, {.capacity = 8});
    const std::string a = "a", big = "0123456789", b = "bb", c = "ccccccc";
    const std::array<std::span<const std::byte>, 4> pieces = {bytes(a), bytes(big), bytes(b), bytes(c)};
    EXPECT_EQ(w.write_vectored(pieces), 20u);
    EXPECT_EQ(f.written(), "a0123456789bb");  // "a" flushed before the large piece, "bb" before "c..."
    w.flush();
    EXPECT_EQ(f.written(), a + big + b + c);
}

TEST(buffered, the_destructor_does_no_io_and_discards_what_is_unflushed) {
    fake_stream f;
    {
        io::buffered_writer w(f);
        EXPECT_EQ(w.write("lost"), 4u);
        EXPECT_EQ(w.pending(), 4u);
    }
    EXPECT_TRUE(f.writes.empty());
}

TEST(buffered, copy_moves_everything_and_flushes_a_buffered_writer) {
    fake_stream in, out;
    std::string all;
    for (int i = 0; i < 50; ++i) {
        in.chunks.push_back(std::string(static_cast<std::size_t>(i * 37 % 5000), static_cast<char>('a' + i % 26)));
        all += in.chunks.back();
    }
    io::buffered_reader r(in, {.capacity = 100});
    io::buffered_writer w(out, {.capacity = 1000});
    EXPECT_EQ(io::copy(r, w), all.size());
    EXPECT_EQ(w.pending(), 0u);
    EXPECT_EQ(out.written(), all);
    std::error_code ec;
    in.fail_at_end = std::make_error_code(std::errc::connection_reset);
    EXPECT_EQ(io::copy(r, w, ec), 0u);
    EXPECT_EQ(ec, std::errc::connection_reset);
}

TEST(buffered, buffers_are_taken_at_first_use_and_a_flush_gives_the_writers_back) {
    fake_stream f;
    f.chunks = {"ab\ncd"};
    io::buffered_reader r(f);
    io::buffered_writer w(f, {.capacity = 8});
    EXPECT_FALSE(r.holds_buffer());
    EXPECT_FALSE(w.holds_buffer());
    std::string line;
    EXPECT_EQ(r.read_line(line), 3u);
    EXPECT_EQ(line, "ab");
    EXPECT_TRUE(r.holds_buffer());  // "cd" is buffered (and this stream cannot read lazily)
    EXPECT_EQ(w.write("xyz"), 3u);
    EXPECT_TRUE(w.holds_buffer());
    EXPECT_TRUE(f.writes.empty());
    w.flush();
    EXPECT_FALSE(w.holds_buffer());
    EXPECT_EQ(w.pending(), 0u);
    // Larger than the room left: straight to the stream, no buffer taken.
    EXPECT_EQ(w.write("123456789"), 9u);
    EXPECT_FALSE(w.holds_buffer());
    EXPECT_EQ(f.written(), "xyz123456789");
    // A move takes the buffer and its bytes along.
    io::buffered_reader r2(std::move(r));
    EXPECT_FALSE(r.holds_buffer());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    EXPECT_EQ(text(r2.buffered()), "cd");
    io::buffered_writer w2(std::move(w));
    EXPECT_EQ(w2.write("q"), 1u);
    w = std::move(w2);
    EXPECT_EQ(w.pending(), 1u);
    w.flush();
    EXPECT_EQ(f.written(), "xyz123456789q");
}

// resident_bytes(): the process's resident set (/proc/self/statm).
long resident_bytes() {
    long size = 0, resident = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
        std::fclose(f);
    }
    return resident * ::sysconf(_SC_PAGESIZE);
}

// over_tcp() runs f(client end, accepted end) over one loopback TCP
// connection (io_fixture's on_connection()).
class buffered_test : public io_fixture {
protected:
    template <class F>
    void over_tcp(F f) {
        on_connection([&](io::tcp_listener&, io::stream& c, io::stream& s) { f(c, s); });
    }
};

TEST_P(buffered_test, read_line_over_one_byte_writes) {
    over_tcp([](io::stream& c, io::stream& s) {
        const std::string long_line(200, 'L');
        const std::string msg = "hello\nworld\r\n" + long_line + "\nend";
        auto writer = spawn([&] {
            EXPECT_FALSE(s.set_no_delay(true));
            for (char ch : msg) {
                s.write_all(bytes(std::string_view(&ch, 1)), io::after(30s));
                this_task::yield();
            }
            s.shutdown();
        });
        io::buffered_reader r(c, {.capacity = 16});
        std::vector<std::string> lines;
        std::error_code ec;
        for (int i = 0; i < 10; ++i) {
            std::string line;
            if (r.read_line(line, ec, io::after(30s)) == 0) break;
            lines.push_back(line);
        }
        EXPECT_EQ(ec, io::eof());
        EXPECT_EQ(lines, (std::vector<std::string>{"hello", "world", long_line, "end"}));
        writer.join();
    });
}

TEST_P(buffered_test, a_deadline_mid_line_times_out_and_keeps_the_bytes) {
    over_tcp([](io::stream& c, io::stream& s) {
        io::buffered_reader r(c);
        s.write_all(bytes("half"), io::after(30s));
        std::string out;
        std::error_code ec;
        const auto start = io::clock::now();
        EXPECT_EQ(r.read_until('\n', out, ec, io::after(50ms)), 0u);
        EXPECT_EQ(ec, std::errc::timed_out);
        EXPECT_GE(io::clock::now() - start, 50ms);
        EXPECT_TRUE(out.empty());
        s.write_all(bytes(" a line\n"), io::after(30s));
        EXPECT_EQ(r.read_until('\n', out, ec, io::after(30s)), 12u);
        EXPECT_FALSE(ec);
        EXPECT_EQ(out, "half a line\n");
        EXPECT_THROW(r.read_until('\n', out, io::after(1ms)), std::system_error);
    });
}

TEST_P(buffered_test, canceling_a_task_blocked_in_read_until_unwinds_it) {
    over_tcp([](io::stream& c, io::stream& s) {
        io::buffered_reader r(c);
        s.write_all(bytes("par"), io::after(30s));
        EXPECT_TRUE(cancel_unwinds([&] {
            std::string out;
            (void)r.read_until('\n', out);
            ADD_FAILURE() << "read_until returned " << out;
        }));
        // Nothing read is lost: the bytes are in the reader or the socket.
        s.write_all(bytes("tial\n"), io::after(30s));
        std::string out;
        EXPECT_EQ(r.read_line(out, io::after(30s)), 8u);
        EXPECT_EQ(out, "partial");
    });
}

// A peer that sends a command without its newline and closes: the server
// gets the bytes, and can tell they are not a whole line.
TEST_P(buffered_test, a_command_cut_by_the_peers_close_is_told_from_a_whole_line) {
    over_tcp([](io::stream& c, io::stream& s) {
        c.write_all(bytes("GET k\r\nSET k v"), io::after(30s));
        EXPECT_FALSE(c.shutdown());
        io::buffered_reader r(s);
        std::string line;
        io::line_end end = io::line_end::none;
        std::error_code ec;
        EXPECT_EQ(r.read_line(line, end, ec, io::after(30s)), 7u);
        EXPECT_EQ(end, io::line_end::delimiter);
        EXPECT_EQ(line, "GET k");
        line.clear();
        EXPECT_EQ(r.read_line(line, end, ec, io::after(30s)), 7u);
        EXPECT_FALSE(ec);
        EXPECT_EQ(line, "SET k v");
        EXPECT_EQ(end, io::line_end::eof) << "a piece cut by the end of the stream is flagged";
        line.clear();
        EXPECT_EQ(r.read_line(line, end, ec, io::after(30s)), 0u);
        EXPECT_EQ(ec, io::eof());
        EXPECT_EQ(end, io::line_end::none);
    });
}

// counting_stream is an io::stream that counts the write_some() calls made
// on it (the batches a writer sends) and the reads.
struct counting_stream {
    io::stream* s;
    int writes = 0, reads = 0;
    std::size_t read_some(std::span<std::byte> b, std::error_code& ec, io::clock::time_point d) {
        ++reads;
        return s->read_some(b, ec, d);
    }
    std::size_t read_some(io::read_target& t, std::error_code& ec, io::clock::time_point d) {
        ++reads;
        return s->read_some(t, ec, d);
    }
    std::size_t write_some(std::span<const std::byte> b, std::error_code& ec, io::clock::time_point d) {
        ++writes;
        return s->write_some(b, ec, d);
    }
};

// readable_bytes(s): what the kernel holds for s to read (FIONREAD).
int readable_bytes(io::stream& s) {
    int n = 0;
    return ::ioctl(s.native().native_handle(), FIONREAD, &n) == 0 ? n : -1;
}

// A request/response server that writes its reply into the buffer and reads
// the next request: the read waits for the client, which waits for the
// reply. A buffered_stream flushes the reply before that wait; the client
// gets it (without the flush it never would, and its bounded read fails).
TEST_P(buffered_test, a_buffered_stream_flushes_the_reply_before_it_waits_for_the_next_request) {
    over_tcp([](io::stream& c, io::stream& s) {
        auto server = spawn([&] {
            io::buffered_stream b(s);
            EXPECT_TRUE(b.reader().flushes_before_read());
            std::string cmd;
            int served = 0;
            std::error_code ec;
            while (b.read_line(cmd, ec, io::after(30s)) > 0 && served < 10) {
                b.write(cmd == "PING" ? "+PONG\r\n" : "-ERR\r\n");
                ++served;
                cmd.clear();
            }
            EXPECT_EQ(ec, io::eof());
            return served;
        });
        std::array<char, 7> reply{};
        for (int i = 0; i < 3; ++i) {
            c.write_all(bytes("PING\r\n"), io::after(30s));
            std::error_code ec;
            EXPECT_EQ(c.read_exact(reply, ec, io::after(3s)), reply.size());
            if (ec) {  // (the server is joined below either way)
                ADD_FAILURE() << "round " << i << ": the reply stayed in the server's writer: " << ec.message();
                break;
            }
            EXPECT_EQ(std::string(reply.data(), reply.size()), "+PONG\r\n");
        }
        EXPECT_FALSE(c.shutdown());
        EXPECT_EQ(server.join(), 3);
    });
}

// Pipelined requests: the replies to the requests that are already there
// are not flushed one by one, also when each request needs its own read of
// the socket (a 16-byte buffer): the flush comes only when a read would
// wait, and the four replies leave in one write.
TEST_P(buffered_test, a_buffered_stream_batches_the_replies_to_pipelined_requests) {
    over_tcp([](io::stream& c, io::stream& s) {
        const std::string reqs = "GET 1\r\nGET 2\r\nGET 3\r\nGET 4\r\n";
        c.write_all(bytes(reqs), io::after(30s));
        // All of it in the server's socket before the server reads (bounded).
        for (int i = 0; i < 5000 && readable_bytes(s) < static_cast<int>(reqs.size()); ++i) this_task::sleep_for(1ms);
        ASSERT_EQ(readable_bytes(s), static_cast<int>(reqs.size()));
        counting_stream cs{&s};
        auto server = spawn([&] {
            io::buffered_stream b(cs, {.capacity = 16});
            std::string cmd;
            std::error_code ec;
            int served = 0;
            while (b.read_line(cmd, ec, io::after(30s)) > 0 && served < 10) {
                b.write("R" + cmd.substr(4) + "\r\n");
                ++served;
                cmd.clear();
            }
            EXPECT_EQ(ec, io::eof());
            return served;
        });
        std::array<char, 16> replies{};
        std::error_code ec;
        EXPECT_EQ(c.read_exact(replies, ec, io::after(3s)), replies.size());
        EXPECT_FALSE(ec) << "the replies stayed in the server's writer: " << ec.message();
        EXPECT_EQ(std::string(replies.data(), replies.size()), "R1\r\nR2\r\nR3\r\nR4\r\n");
        EXPECT_FALSE(c.shutdown());
        EXPECT_EQ(server.join(), 4);
        EXPECT_EQ(cs.writes, 1) << "the replies to requests already there went out one batch at a time";
        EXPECT_GE(cs.reads, 3) << "the requests were read in several reads of the socket";
    });
}

std::uint64_t fnv(std::uint64_t h, std::span<const std::byte> b) {
    for (std::byte x : b) h = (h ^ static_cast<std::uint64_t>(x)) * 0x100000001b3ull;
    return h;
}

TEST_P(buffered_test, copy_moves_1_mib_between_two_connections) {
    runtime rt(options());
    constexpr std::size_t total = 1 << 20;
    const auto [sent, received, count, copied] = rt.block_on([&] {
        auto l = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
        auto c1 = io::tcp_stream::connect(l.local_endpoint(), io::after(30s));
        auto s1 = l.accept(io::after(30s));
        auto c2 = io::tcp_stream::connect(l.local_endpoint(), io::after(30s));
        auto s2 = l.accept(io::after(30s));
        // Producer: pieces of 1 .. 3000 bytes through a buffered writer.
        auto producer = spawn([&] {
            io::buffered_writer w(c1);
            std::vector<std::byte> piece;
            std::uint64_t h = 14695981039346656037ull, x = 88172645463325252ull;
            std::size_t done = 0;
            for (std::size_t i = 0; done < total; ++i) {
                piece.resize(std::min<std::size_t>(1 + i * 977 % 3000, total - done));
                for (auto& b : piece) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    b = std::byte(static_cast<unsigned char>(x));
                }
                h = fnv(h, piece);
                w.write(piece, io::after(30s));
                done += piece.size();
            }
            w.flush(io::after(30s));
            c1.shutdown();
            return h;
        });
        auto copier = spawn([&] {
            io::buffered_reader r(s1);
            io::buffered_writer w(c2);
            const std::size_t n = io::copy(r, w, io::after(30s));
            c2.shutdown();
            return n;
        });
        io::buffered_reader r(s2, {.capacity = 4096});
        std::uint64_t h = 14695981039346656037ull;
        std::size_t n = 0;
        std::array<char, 1500> buf{};
        for (std::size_t i = 0; i < total; ++i) {  // bounded: at least a byte a read
            const std::size_t got = r.read_some(std::span<char>(buf), io::after(30s));
            if (got == 0) break;
            h = fnv(h, std::as_bytes(std::span(buf.data(), got)));
            n += got;
        }
        const std::size_t k = copier.join();
        return std::tuple(producer.join(), h, n, k);
    });
    EXPECT_EQ(count, total);
    EXPECT_EQ(copied, total);
    EXPECT_EQ(sent, received);
}

TEST_P(buffered_test, stream_char_overloads_move_text_without_casts) {
    over_tcp([](io::stream& c, io::stream& s) {
        std::error_code ec;
        EXPECT_EQ(s.write_all(std::string_view("hello, "), ec, io::after(30s)), 7u);
        EXPECT_FALSE(ec);
        EXPECT_EQ(s.write_all(std::string("world"), io::after(30s)), 5u);
        EXPECT_GE(s.write_some("!", io::after(30s)), 1u);
        EXPECT_EQ(s.write_some(std::string_view("?"), ec, io::after(30s)), 1u);
        std::array<char, 5> five{};
        EXPECT_EQ(c.read_exact(std::span<char>(five), io::after(30s)), 5u);
        EXPECT_EQ(std::string(five.data(), 5), "hello");
        EXPECT_EQ(c.read_exact(std::span<char>(five).first(2), ec, io::after(30s)), 2u);
        EXPECT_EQ(std::string(five.data(), 2), ", ");
        std::string rest;
        std::array<char, 16> buf{};
        for (int i = 0; i < 100 && rest.size() < 7; ++i) {
            const std::size_t n = (i % 2) ? c.read_some(std::span<char>(buf), io::after(30s))
                                          : c.read_some(std::span<char>(buf), ec, io::after(30s));
            rest.append(buf.data(), n);
        }
        EXPECT_EQ(rest, "world!?");
    });
}

// waiting_stream is an io::stream whose lazy reads record, each time they
// are about to wait (read_target::idle()), whether the reader still held a
// buffer then (held_at_wait, asked of `holds` on the reader's own thread)
// and how many requests the server had served by then (waited_after; the
// server counts `served` after each reply's flush). A waiting read may wake
// without bytes and wait again (a kept readiness edge), so the test asks the
// reading task itself rather than reading the reader from another thread.
struct waiting_stream {
    explicit waiting_stream(io::stream& st) : s(st) {}
    io::stream& s;
    std::function<bool()> holds;
    int served = 0;  // the server task's own
    std::atomic<int> waited_after{-1};
    std::atomic<bool> held_at_wait{false};

    struct seen final : io::read_target {
        io::read_target& in;
        waiting_stream& ws;
        seen(io::read_target& t, waiting_stream& w) : in(t), ws(w) {}
        std::span<std::byte> get() noexcept override { return in.get(); }
        void idle() noexcept override {
            in.idle();
            if (ws.holds()) ws.held_at_wait.store(true, std::memory_order_relaxed);
            ws.waited_after.store(ws.served, std::memory_order_release);
        }
    };
    std::size_t read_some(std::span<std::byte> b, std::error_code& ec, io::clock::time_point d) {
        return s.read_some(b, ec, d);
    }
    std::size_t read_some(io::read_target& t, std::error_code& ec, io::clock::time_point d) {
        seen w(t, *this);
        return s.read_some(w, ec, d);
    }
};

// A server's connections idle between requests, each with a 64 KiB reader
// and writer: none holds a buffer while it waits, and the process's resident
// memory grows by far less than the 128 KiB a connection whose buffers were
// allocated up front (zero-filled) would cost.
TEST_P(buffered_test, connections_idle_between_requests_hold_no_buffers) {
    constexpr int n = 256;
    constexpr std::size_t cap = 64 * 1024;
    runtime rt(options());
    rt.block_on([&] {
        struct conn {
            io::stream client, server;
            waiting_stream in{server};
            io::buffered_reader<waiting_stream> r{in, {.capacity = cap}};
            io::buffered_writer<io::stream> w{server, {.capacity = cap}};
            conn(io::stream c, io::stream s) : client(std::move(c)), server(std::move(s)) {
                in.holds = [this] { return r.holds_buffer(); };
            }
        };
        auto l = io::tcp_listener::bind(io::endpoint::loopback_v4(0));
        std::vector<std::unique_ptr<conn>> conns;
        conns.reserve(n);
        const long before = resident_bytes();
        for (int i = 0; i < n; ++i) {
            auto c = io::tcp_stream::connect(l.local_endpoint(), io::after(30s));
            conns.push_back(std::make_unique<conn>(std::move(c), l.accept(io::after(30s))));
        }
        std::vector<join_handle<int>> servers;
        for (auto& c : conns) {
            servers.push_back(spawn([&c = *c] {
                int served = 0;
                std::string line;
                std::error_code ec;
                while (c.r.read_line(line, ec, io::after(60s)) > 0) {
                    c.w.write(line + "\n", io::after(30s));
                    c.w.flush(io::after(30s));
                    line.clear();
                    ++served;
                    ++c.in.served;
                }
                return served;
            }));
        }
        // One request on each connection, in turn.
        for (auto& c : conns) {
            c->client.write_all(bytes("ping\n"), io::after(30s));
            std::array<char, 5> reply{};
            ASSERT_EQ(c->client.read_exact(std::span<char>(reply), io::after(30s)), 5u);
            ASSERT_EQ(std::string_view(reply.data(), 5), "ping\n");
        }
        // Each server is back in its read, waiting for the next request
        // (bounded: 30 s).
        int waiting = 0;
        for (int k = 0; k < 30000; ++k) {
            waiting = 0;
            for (auto& c : conns) waiting += c->in.waited_after.load(std::memory_order_acquire) == 1 ? 1 : 0;
            if (waiting == n) break;
            this_task::sleep_for(1ms);
        }
        ASSERT_EQ(waiting, n);
        int held = 0;
        // The writer is touched only while a request is served, which ended
        // before the server's read stored waited_after (release, acquired above).
        for (auto& c : conns)
            held += (c->in.held_at_wait.load(std::memory_order_relaxed) ? 1 : 0) + (c->w.holds_buffer() ? 1 : 0);
        EXPECT_EQ(held, 0) << "buffers held by idle connections";
        if constexpr (!sanitized) {  // under the sanitizers and valgrind the resident set is theirs
            const long grown = resident_bytes() - before;
            EXPECT_LT(grown, static_cast<long>(n * cap / 4))
                << "resident memory grew by " << grown << " bytes for " << n << " idle connections";
        }
        for (auto& c : conns) c->client.shutdown();
        for (auto& s : servers) EXPECT_EQ(s.join(), 1);
    });
}

INSTANTIATE_TEST_SUITE_P(io, buffered_test, io_params(), io_param_name);

}  // namespace
}  // namespace weft::test
