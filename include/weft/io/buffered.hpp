// weft/io/buffered.hpp: layer L6, buffered reading and writing over any
// weft stream: lines and delimiters, exact reads, coalesced writes, copy.
//
//   auto s = weft::io::tcp_stream::connect(at, weft::io::after(5s));
//   weft::io::buffered_reader r(s);
//   weft::io::buffered_writer w(s);
//   std::string line;
//   std::error_code ec;
//   while (r.read_line(line, ec, weft::io::after(30s)) > 0) {  // "\n" or "\r\n" stripped
//       w.write(line);
//       w.write("\n");
//       line.clear();
//   }
//   w.flush(weft::io::after(5s));  // the destructor does no IO
//
// Both classes hold a REFERENCE to their stream (a pointer; stream()
// returns it): the stream must outlive them, and they may be made over a
// stream that other code also uses (a reader and a writer over one socket,
// as above). They are not thread safe: one task uses a reader (or a writer)
// at a time; one reader and one writer over one stream may be used by two
// tasks at once when the stream allows that (io::stream does).
//
// Every call that can wait takes a deadline (io::no_deadline by default)
// and comes in two forms, as in socket.hpp: one sets a std::error_code, one
// throws std::system_error with it. The errors are the stream's
// (timed_out, operation_canceled, connection_reset...), plus io::eof() and
// std::errc::message_size below. A task's cancellation unwinds it from the
// stream's wait, as for the stream's own calls; what had been read into the
// reader's buffer stays there, and what the writer had accepted stays in
// its buffer.
//
// The Stream type is anything with the calls used: buffered_reader needs
//   std::size_t read_some(std::span<std::byte>, std::error_code&, io::clock::time_point)
// (0 without error: end of stream), buffered_writer needs
//   std::size_t write_some(std::span<const std::byte>, std::error_code&, io::clock::time_point)
// (at least one byte unless it fails). io::stream and io::handle have both.
//
// buffered_stream is a reader and a writer over one stream whose reads
// flush the writer before they wait for the peer (a request/response
// server's replies leave when it has no more requests in hand), and
// reader.flush_before_read(writer) makes that of any pair.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "weft/io/handle.hpp"
#include "weft/io/socket.hpp"

namespace weft::io {

// readable_stream: has read_some(span<byte>, error_code&, deadline).
template <class S>
concept readable_stream = requires(S& s, std::span<std::byte> b, std::error_code& ec, clock::time_point d) {
    { s.read_some(b, ec, d) } -> std::convertible_to<std::size_t>;
};
// writable_stream: has write_some(span<const byte>, error_code&, deadline).
template <class S>
concept writable_stream = requires(S& s, std::span<const std::byte> b, std::error_code& ec, clock::time_point d) {
    { s.write_some(b, ec, d) } -> std::convertible_to<std::size_t>;
};

namespace detail {
// The buffers of buffered_reader and buffered_writer (src/io/buffer_pool.cpp;
// docs/io.md, "Buffers while idle"). take_buffer(n) gives n bytes, not
// zeroed, from the calling thread's pool when it holds one of that size,
// else from malloc(); null when none can be had. give_buffer(p, n)
// takes back a buffer take_buffer(n) gave (on any thread): into the calling
// thread's pool while that holds fewer than its bound of that size, else
// to free(). Sizes that are powers of two from 1 KiB to 64 KiB are
// pooled, others are not.
WEFT_API std::byte* take_buffer(std::size_t n) noexcept;
WEFT_API void give_buffer(std::byte* p, std::size_t n) noexcept;
// lazy_readable: a stream that reads into a read_target (io::handle,
// io::stream), so that a reader holds no buffer while it waits.
template <class S>
concept lazy_readable = requires(S& s, read_target& t, std::error_code& ec, clock::time_point d) {
    { s.read_some(t, ec, d) } -> std::convertible_to<std::size_t>;
};
}  // namespace detail

// buffered_options: the sizes of a buffered_reader / buffered_writer.
struct buffered_options {
    // capacity: the buffer's size (at least 1; 0 is taken as 1).
    std::size_t capacity = 8 * 1024;
    // max_delimited: buffered_reader only. The longest "line" read_until
    // and read_line accept, delimiter included; the buffer grows up to
    // max(capacity, max_delimited) to hold one, and no further.
    std::size_t max_delimited = 64 * 1024;
};

// line_end says how the piece read_until() / read_line() returned ended:
//   delimiter  with its delimiter (read_line strips "\n" or "\r\n");
//   eof        without it: the stream ended first, and this is what came
//              before the end (a command cut short, or a last line whose
//              writer never ended it: the caller decides which);
//   none       no piece: the call returned 0 (an error, io::eof()).
enum class line_end { none, delimiter, eof };

template <writable_stream Stream>
class buffered_writer;

// buffered_reader reads from a stream through a buffer of its own.
//
// read_until(delim, out) appends to `out` everything up to and including
// the next `delim` and returns how many bytes it appended; the bytes after
// the delimiter stay buffered for the next call. Then:
//   - the stream ends (read_some gives 0) with bytes buffered but no
//     delimiter: those bytes are appended and returned as the last piece
//     (ec clear; the piece does not end with delim, which is how a caller
//     tells), and the next call reads the stream again, which for a socket
//     gives 0 once more: 0 and io::eof();
//   - the stream ends with nothing buffered: 0 and io::eof();
//   - max_delimited bytes are buffered without a delimiter among them (or
//     the delimiter comes after them): 0 and std::errc::message_size; the
//     buffer does not grow further and keeps those bytes (buffered()
//     shows them; consume() or read_some() skips them);
//   - an error of the stream (timed_out at the deadline, a reset...) or a
//     cancellation: 0 (or the unwind), `out` unchanged, and every byte read
//     so far stays buffered: a later call finds the whole line.
// So nothing read from the stream is lost on any path except the reader's
// own destruction, which discards what is still buffered. The forms with a
// line_end& say which of the first two outcomes a piece is (line_end
// above): "SET k v" then the end of the stream gives 7 bytes either way,
// with line_end::eof instead of line_end::delimiter.
//
// flush_before_read(w) ties a buffered_writer to the reader (buffered_stream
// does it for its pair): from then on a read of the stream that would wait
// flushes w first, when w has bytes pending (IO-B1 at from_stream() below).
// Bytes already buffered, or already in the stream, are read without a
// flush, so the replies to requests that arrived together leave together.
//
// Memory (docs/io.md, "Buffers while idle"): the buffer is taken at the
// first read of the stream, not at construction, and it is not zeroed. Over
// a stream that reads into a read_target (io::stream, io::handle) a reader
// with nothing buffered gives its buffer back before it waits for the
// stream and takes one again when bytes are there: a connection idle
// between requests holds no buffer. (Over other streams it keeps the
// buffer it took.) A call that needs a buffer and cannot have one fails with
// std::errc::not_enough_memory, having read nothing.
template <readable_stream Stream>
class buffered_reader {
public:
    explicit buffered_reader(Stream& s, buffered_options o = {})
        : s_(&s), cap_(std::max<std::size_t>(o.capacity, 1)), max_(std::max<std::size_t>(o.max_delimited, 1)) {}
    buffered_reader(const buffered_reader&) = delete;
    buffered_reader& operator=(const buffered_reader&) = delete;
    buffered_reader(buffered_reader&& o) noexcept
        : s_(o.s_),
          cap_(o.cap_),
          max_(o.max_),
          buf_(std::exchange(o.buf_, nullptr)),
          size_(std::exchange(o.size_, 0)),
          begin_(std::exchange(o.begin_, 0)),
          end_(std::exchange(o.end_, 0)),
          fl_(o.fl_) {}
    buffered_reader& operator=(buffered_reader&& o) noexcept {
        if (this != &o) {
            drop();
            s_ = o.s_;
            cap_ = o.cap_;
            max_ = o.max_;
            fl_ = o.fl_;
            buf_ = std::exchange(o.buf_, nullptr);
            size_ = std::exchange(o.size_, 0);
            begin_ = std::exchange(o.begin_, 0);
            end_ = std::exchange(o.end_, 0);
        }
        return *this;
    }
    ~buffered_reader() { drop(); }

    [[nodiscard]] Stream& stream() const noexcept { return *s_; }
    [[nodiscard]] std::size_t capacity() const noexcept { return cap_; }
    [[nodiscard]] std::size_t max_delimited() const noexcept { return max_; }
    // holds_buffer(): the reader holds a buffer now (above: not while it
    // waits with nothing buffered, over a stream that allows that).
    [[nodiscard]] bool holds_buffer() const noexcept { return buf_ != nullptr; }

    // flush_before_read(w): above. The writer must outlive the tie (or be
    // untied first by flush_before_read(nullptr)); a moved reader keeps it.
    // The flush is w.flush(ec, deadline) with the read's deadline, on the
    // reading task: its error is the read's (the read then returns 0 with
    // it, nothing read lost), and w must not be used by another task
    // meanwhile (the reader and the writer are then one task's).
    template <writable_stream W>
    void flush_before_read(buffered_writer<W>& w) noexcept {
        fl_.w = &w;
        fl_.pending = [](void* p) noexcept { return static_cast<buffered_writer<W>*>(p)->pending() > 0; };
        fl_.flush = [](void* p, std::error_code& ec, clock::time_point d) {
            static_cast<buffered_writer<W>*>(p)->flush(ec, d);
        };
    }
    void flush_before_read(std::nullptr_t) noexcept { fl_ = {}; }
    [[nodiscard]] bool flushes_before_read() const noexcept { return fl_.w != nullptr; }

    // buffered() is what is buffered, without IO; valid until the next
    // call other than buffered().
    [[nodiscard]] std::span<const std::byte> buffered() const noexcept {
        return std::span<const std::byte>(buf_ + begin_, end_ - begin_);
    }
    // peek() is buffered(), first reading the stream once if nothing is
    // buffered; empty at the end of the stream or with ec set.
    std::span<const std::byte> peek(std::error_code& ec, clock::time_point deadline = no_deadline) {
        ec.clear();
        if (begin_ == end_) (void)fill(ec, deadline);
        return buffered();
    }
    std::span<const std::byte> peek(clock::time_point deadline = no_deadline) {
        std::error_code ec;
        auto r = peek(ec, deadline);
        check(ec, "weft::io::buffered_reader::peek");
        return r;
    }
    // consume(n) drops the first n buffered bytes (all of them if fewer).
    void consume(std::size_t n) noexcept {
        begin_ += std::min(n, end_ - begin_);
        if (begin_ == end_) begin_ = end_ = 0;
    }

    // read_until(): above.
    std::size_t read_until(char delim, std::string& out, std::error_code& ec, clock::time_point deadline = no_deadline) {
        line_end end;
        return read_until(delim, out, end, ec, deadline);
    }
    std::size_t read_until(char delim, std::string& out, line_end& end, std::error_code& ec,
                           clock::time_point deadline = no_deadline) {
        ec.clear();
        end = line_end::none;
        std::size_t scanned = 0;
        for (;;) {
            const auto view = buffered();
            const char* data = reinterpret_cast<const char*>(view.data());
            if (const void* p = scanned < view.size() ? std::memchr(data + scanned, delim, view.size() - scanned)
                                                      : nullptr) {
                const std::size_t n = static_cast<std::size_t>(static_cast<const char*>(p) - data) + 1;
                if (n > max_) {
                    ec = std::make_error_code(std::errc::message_size);
                    return 0;
                }
                out.append(data, n);
                consume(n);
                end = line_end::delimiter;
                return n;
            }
            scanned = view.size();
            if (scanned >= max_) {
                ec = std::make_error_code(std::errc::message_size);
                return 0;
            }
            const std::size_t got = fill(ec, deadline);
            if (ec) return 0;
            if (got == 0) {  // the end of the stream
                if (scanned == 0) {
                    ec = eof();
                    return 0;
                }
                out.append(reinterpret_cast<const char*>(buffered().data()), scanned);
                consume(scanned);
                end = line_end::eof;
                return scanned;
            }
        }
    }
    std::size_t read_until(char delim, std::string& out, clock::time_point deadline = no_deadline) {
        std::error_code ec;
        const std::size_t n = read_until(delim, out, ec, deadline);
        check(ec, "weft::io::buffered_reader::read_until");
        return n;
    }
    std::size_t read_until(char delim, std::string& out, line_end& end, clock::time_point deadline = no_deadline) {
        std::error_code ec;
        const std::size_t n = read_until(delim, out, end, ec, deadline);
        check(ec, "weft::io::buffered_reader::read_until");
        return n;
    }

    // read_line() is read_until('\n') that appends the line without its
    // terminator: a final "\n" or "\r\n" is stripped (a '\r' elsewhere is
    // kept, and so is a lone '\r' at the end of a last line without "\n").
    // Returns the bytes taken from the stream, terminator included: an
    // empty line gives 1 or 2, the end of the stream 0 with io::eof(); the
    // other outcomes are read_until's.
    // The line_end& forms say whether the line ended with "\n" or was cut
    // by the end of the stream (line_end above).
    std::size_t read_line(std::string& out, std::error_code& ec, clock::time_point deadline = no_deadline) {
        line_end end;
        return read_line(out, end, ec, deadline);
    }
    std::size_t read_line(std::string& out, line_end& end, std::error_code& ec,
                          clock::time_point deadline = no_deadline) {
        const std::size_t old = out.size();
        const std::size_t n = read_until('\n', out, end, ec, deadline);
        if (end == line_end::delimiter) {
            out.pop_back();
            if (out.size() > old && out.back() == '\r') out.pop_back();
        }
        return n;
    }
    std::size_t read_line(std::string& out, clock::time_point deadline = no_deadline) {
        std::error_code ec;
        const std::size_t n = read_line(out, ec, deadline);
        check(ec, "weft::io::buffered_reader::read_line");
        return n;
    }
    std::size_t read_line(std::string& out, line_end& end, clock::time_point deadline = no_deadline) {
        std::error_code ec;
        const std::size_t n = read_line(out, end, ec, deadline);
        check(ec, "weft::io::buffered_reader::read_line");
        return n;
    }

    // read_some() gives buffered bytes first; with nothing buffered it
    // reads the stream once (straight into buf when buf is at least the
    // capacity). 0 without error: the end of the stream (or an empty buf).
    std::size_t read_some(std::span<std::byte> buf, std::error_code& ec, clock::time_point deadline = no_deadline) {
        ec.clear();
        if (buf.empty()) return 0;
        if (begin_ == end_) {
            if (buf.size() >= cap_) {
                drop();  // empty: nothing is lost, and nothing is held while it waits
                return from_stream(ec, deadline, [&](clock::time_point d, std::error_code& e) {
                    return s_->read_some(buf, e, d);
                });
            }
            if (fill(ec, deadline) == 0) return 0;
        }
        const std::size_t n = std::min(buf.size(), end_ - begin_);
        std::memcpy(buf.data(), buf_ + begin_, n);
        consume(n);
        return n;
    }
    std::size_t read_some(std::span<std::byte> buf, clock::time_point deadline = no_deadline) {
        std::error_code ec;
        const std::size_t n = read_some(buf, ec, deadline);
        check(ec, "weft::io::buffered_reader::read_some");
        return n;
    }
    std::size_t read_some(std::span<char> buf, std::error_code& ec, clock::time_point deadline = no_deadline) {
        return read_some(std::as_writable_bytes(buf), ec, deadline);
    }
    std::size_t read_some(std::span<char> buf, clock::time_point deadline = no_deadline) {
        return read_some(std::as_writable_bytes(buf), deadline);
    }

    // read_exact() fills buf, buffered bytes first; io::eof() if the
    // stream ends first. Returns the bytes stored (buf.size(), or fewer
    // with ec set; those are taken from the reader).
    std::size_t read_exact(std::span<std::byte> buf, std::error_code& ec, clock::time_point deadline = no_deadline) {
        return detail::read_exact_with(
            buf, ec, [&](std::span<std::byte> b, std::error_code& e) { return read_some(b, e, deadline); });
    }
    std::size_t read_exact(std::span<std::byte> buf, clock::time_point deadline = no_deadline) {
        std::error_code ec;
        const std::size_t n = read_exact(buf, ec, deadline);
        check(ec, "weft::io::buffered_reader::read_exact");
        return n;
    }
    std::size_t read_exact(std::span<char> buf, std::error_code& ec, clock::time_point deadline = no_deadline) {
        return read_exact(std::as_writable_bytes(buf), ec, deadline);
    }
    std::size_t read_exact(std::span<char> buf, clock::time_point deadline = no_deadline) {
        return read_exact(std::as_writable_bytes(buf), deadline);
    }

private:
    // lazy: the read_target of a fill with nothing buffered (read_target in
    // weft/io/handle.hpp): the buffer is taken when bytes are there and
    // given back before the read waits. Only ever given back empty.
    struct lazy final : read_target {
        buffered_reader* r;
        explicit lazy(buffered_reader* rd) noexcept : r(rd) {}
        std::span<std::byte> get() noexcept override {
            if (!r->buf_ && !r->take(r->cap_)) return {};
            return {r->buf_, r->size_};
        }
        void idle() noexcept override { r->drop(); }
    };

    // take(n) takes a buffer of n bytes (none held); false if it cannot.
    bool take(std::size_t n) noexcept {
        buf_ = detail::take_buffer(n);
        size_ = buf_ ? n : 0;
        return buf_ != nullptr;
    }
    // drop() gives the buffer back, and with it what it holds.
    void drop() noexcept {
        if (buf_) detail::give_buffer(std::exchange(buf_, nullptr), std::exchange(size_, 0));
        begin_ = end_ = 0;
    }

    // fill() reads the stream once into the free space after the buffered
    // bytes (moving them to the front, or growing the buffer up to
    // max(capacity, max_delimited), when there is none); returns the count.
    // With nothing buffered over a lazy_readable stream, by a read_target.
    std::size_t fill(std::error_code& ec, clock::time_point deadline) {
        if constexpr (detail::lazy_readable<Stream>) {
            if (begin_ == end_) {
                begin_ = end_ = 0;
                lazy t(this);
                const std::size_t n = from_stream(ec, deadline, [&](clock::time_point d, std::error_code& e) {
                    return s_->read_some(static_cast<read_target&>(t), e, d);
                });
                if (ec) return 0;
                end_ = n;  // into the buffer get() gave (none if n == 0 and it waited)
                return n;
            }
        }
        if (!buf_ && !take(cap_)) {
            ec = std::make_error_code(std::errc::not_enough_memory);
            return 0;
        }
        if (end_ == size_) {
            if (begin_ > 0) {
                std::memmove(buf_, buf_ + begin_, end_ - begin_);
                end_ -= begin_;
                begin_ = 0;
            } else {
                const std::size_t grown = std::max(size_, std::min(size_ * 2, std::max(cap_, max_)));
                if (grown > size_) {
                    std::byte* p = detail::take_buffer(grown);
                    if (!p) {
                        ec = std::make_error_code(std::errc::not_enough_memory);
                        return 0;
                    }
                    std::memcpy(p, buf_, end_);
                    detail::give_buffer(buf_, size_);
                    buf_ = p;
                    size_ = grown;
                }
            }
        }
        const std::size_t room = size_ - end_;
        if (room == 0) return 0;  // not reached: read_until stops at max_ first
        const std::size_t n = from_stream(ec, deadline, [&](clock::time_point d, std::error_code& e) {
            return s_->read_some(std::span<std::byte>(buf_ + end_, room), e, d);
        });
        if (ec) return 0;
        end_ += n;
        return n;
    }

    // from_stream(ec, deadline, read) is one read of the stream, read(d, ec)
    // being s_->read_some(..., ec, d):
    //
    //   IO-B1  With a writer tied (flush_before_read) that has bytes
    //          pending, the writer is flushed before the read waits, and
    //          only then: the read is first made with a deadline already
    //          passed, which takes what the stream has without waiting
    //          (the stream's read tries before it waits, IO-R1); only its
    //          timed_out (nothing there) leads to w.flush(ec, deadline) and
    //          the read with the caller's deadline. A piece, the end of the
    //          stream or another error is the outcome as it is, the writer
    //          untouched; so is a flush's error (the read made none, and a
    //          timed_out read takes nothing: nothing read is lost).
    //          Without a writer, or with nothing pending, it is read(deadline).
    template <class Read>
    std::size_t from_stream(std::error_code& ec, clock::time_point deadline, Read&& read) {
        if (fl_.w && fl_.pending(fl_.w)) {
            const std::size_t n = read(clock::now(), ec);
            if (ec != std::errc::timed_out) return n;
            fl_.flush(fl_.w, ec, deadline);
            if (ec) return 0;
        }
        return read(deadline, ec);
    }

    // flusher: the writer tied by flush_before_read(), type-erased.
    struct flusher {
        void* w = nullptr;
        bool (*pending)(void*) noexcept = nullptr;
        void (*flush)(void*, std::error_code&, clock::time_point) = nullptr;
    };

    Stream* s_;
    std::size_t cap_, max_;
    std::byte* buf_ = nullptr;  // null: none held (size_ 0)
    std::size_t size_ = 0;
    std::size_t begin_ = 0, end_ = 0;
    flusher fl_;  // flush_before_read()
};

// buffered_writer writes to a stream through a buffer of its own.
//
// write(data) takes all of data: what fits goes into the buffer; when it
// does not fit the buffer is flushed first, and data as large as the
// buffer or larger is then written to the stream directly (write_all
// semantics: the call returns once all of it is in the buffer or the
// stream). Returns the bytes of data taken; fewer only with ec set, and
// then the rest is still the caller's (not buffered, not written), while
// whatever the buffer held and could not write stays buffered for the next
// flush().
//
// THE DESTRUCTOR DOES NO IO. Call flush() before a writer goes; bytes it
// still holds then (pending() of them) are discarded, as Tokio's BufWriter
// drops its buffer when the flush on drop fails and Go's bufio.Writer when
// Flush is never called. (A flush in a destructor would wait with no
// deadline and could not report its error, and a writer is often destroyed
// by an unwind, where waiting is not allowed.)
//
// Memory (docs/io.md, "Buffers while idle"): the buffer is taken by the
// first write() that buffers, not at construction, is not zeroed, and goes
// back as soon as a flush() has written everything: a connection idle
// between replies holds no buffer. A write() that needs a buffer and cannot
// have one fails with std::errc::not_enough_memory, having taken nothing.
template <writable_stream Stream>
class buffered_writer {
public:
    explicit buffered_writer(Stream& s, buffered_options o = {})
        : s_(&s), cap_(std::max<std::size_t>(o.capacity, 1)) {}
    buffered_writer(const buffered_writer&) = delete;
    buffered_writer& operator=(const buffered_writer&) = delete;
    buffered_writer(buffered_writer&& o) noexcept
        : s_(o.s_), cap_(o.cap_), buf_(std::exchange(o.buf_, nullptr)), used_(std::exchange(o.used_, 0)) {}
    buffered_writer& operator=(buffered_writer&& o) noexcept {
        if (this != &o) {
            drop();
            s_ = o.s_;
            cap_ = o.cap_;
            buf_ = std::exchange(o.buf_, nullptr);
            used_ = std::exchange(o.used_, 0);
        }
        return *this;
    }
    ~buffered_writer() { drop(); }  // no IO: see above

    [[nodiscard]] Stream& stream() const noexcept { return *s_; }
    [[nodiscard]] std::size_t capacity() const noexcept { return cap_; }
    // pending() is how many bytes are buffered, not yet written.
    [[nodiscard]] std::size_t pending() const noexcept { return used_; }
    // holds_buffer(): the writer holds a buffer now (only while it has
    // pending bytes).
    [[nodiscard]] bool holds_buffer() const noexcept { return buf_ != nullptr; }

    // write(): above.
    std::size_t write(std::span<const std::byte> data, std::error_code& ec, clock::time_point deadline = no_deadline) {
        ec.clear();
        if (data.empty()) return 0;
        if (data.size() > cap_ - used_) {
            flush(ec, deadline);
            if (ec) return 0;
            if (data.size() >= cap_) return write_to_stream(data, ec, deadline);
        }
        if (!buf_) {
            buf_ = detail::take_buffer(cap_);
            if (!buf_) {
                ec = std::make_error_code(std::errc::not_enough_memory);
                return 0;
            }
        }
        std::memcpy(buf_ + used_, data.data(), data.size());
        used_ += data.size();
        return data.size();
    }
    std::size_t write(std::span<const std::byte> data, clock::time_point deadline = no_deadline) {
        std::error_code ec;
        const std::size_t n = write(data, ec, deadline);
        check(ec, "weft::io::buffered_writer::write");
        return n;
    }
    std::size_t write(std::string_view data, std::error_code& ec, clock::time_point deadline = no_deadline) {
        return write(std::as_bytes(std::span(data.data(), data.size())), ec, deadline);
    }
    std::size_t write(std::string_view data, clock::time_point deadline = no_deadline) {
        return write(std::as_bytes(std::span(data.data(), data.size())), deadline);
    }
    // write_all() is write(), under the name io::stream gives it (so that
    // io::copy and other generic code take either).
    std::size_t write_all(std::span<const std::byte> data, std::error_code& ec,
                          clock::time_point deadline = no_deadline) {
        return write(data, ec, deadline);
    }
    std::size_t write_all(std::span<const std::byte> data, clock::time_point deadline = no_deadline) {
        return write(data, deadline);
    }

    // write_vectored() writes the pieces in order, as one write() each
    // (small ones coalesce in the buffer, large ones go straight to the
    // stream after what precedes them). Returns the bytes taken, counting
    // across pieces; on an error it stops there (later pieces untouched).
    std::size_t write_vectored(std::span<const std::span<const std::byte>> pieces, std::error_code& ec,
                               clock::time_point deadline = no_deadline) {
        ec.clear();
        std::size_t total = 0;
        for (const auto& p : pieces) {
            total += write(p, ec, deadline);
            if (ec) break;
        }
        return total;
    }
    std::size_t write_vectored(std::span<const std::span<const std::byte>> pieces,
                               clock::time_point deadline = no_deadline) {
        std::error_code ec;
        const std::size_t n = write_vectored(pieces, ec, deadline);
        check(ec, "weft::io::buffered_writer::write_vectored");
        return n;
    }

    // flush() writes everything buffered to the stream. On an error (or a
    // cancellation) what was written is gone from the buffer and the rest
    // stays at its front, in order, for the next flush().
    void flush(std::error_code& ec, clock::time_point deadline = no_deadline) {
        ec.clear();
        while (used_ > 0) {
            // Each written piece leaves the buffer at once, so a
            // cancellation between two write_some() calls never makes the
            // next flush() write it again.
            const std::size_t n = s_->write_some(std::span<const std::byte>(buf_, used_), ec, deadline);
            if (!ec && n == 0) ec = std::make_error_code(std::errc::io_error);
            if (ec) return;
            std::memmove(buf_, buf_ + n, used_ - n);
            used_ -= n;
        }
        drop();  // everything is written: nothing held until the next write()
    }
    void flush(clock::time_point deadline = no_deadline) {
        std::error_code ec;
        flush(ec, deadline);
        check(ec, "weft::io::buffered_writer::flush");
    }

private:
    // write_to_stream() is write_all over the stream's write_some; a
    // write_some that reports neither progress nor an error gives
    // std::errc::io_error rather than looping.
    std::size_t write_to_stream(std::span<const std::byte> data, std::error_code& ec, clock::time_point deadline) {
        std::size_t put = 0;
        while (put < data.size()) {
            const std::size_t n = s_->write_some(data.subspan(put), ec, deadline);
            if (!ec && n == 0) ec = std::make_error_code(std::errc::io_error);
            if (ec) return put;
            put += n;
        }
        return put;
    }

    // drop() gives the buffer back, and with it what it holds.
    void drop() noexcept {
        if (buf_) detail::give_buffer(std::exchange(buf_, nullptr), cap_);
        used_ = 0;
    }

    Stream* s_;
    std::size_t cap_;
    std::byte* buf_ = nullptr;  // null: none held (used_ 0)
    std::size_t used_ = 0;
};

// buffered_stream is a buffered_reader and a buffered_writer over one
// duplex stream, tied by flush_before_read(): a read that has to wait for
// the peer flushes the pending writes first (IO-B1), so a request/response
// loop
//
//   io::buffered_stream b(conn);
//   std::string cmd;
//   while (b.read_line(cmd, io::after(30s)) > 0) {
//       b.write(reply_to(cmd));  // buffered
//       cmd.clear();
//   }  // each reply leaves before the loop waits for the next request
//
// needs no flush of its own, and replies to requests that came together
// (pipelined) leave together, in one write when they fit the buffer.
// Reads that find their bytes buffered, or already in the stream, do not
// flush. The reads and writes are the reader's and the writer's, with their
// errors, deadlines and memory (buffers taken at first use and given back
// while idle); reader() and writer() are the two parts. It is one task's:
// the flush runs on the reading task, so the reads and the writes are not
// made by two tasks at once. Like the two parts, the destructor does no IO:
// flush() before it goes, or the pending bytes are discarded. The end of
// the stream is no wait either: a loop ended by io::eof() (a client that
// pipelined its requests and shut down its side) flushes its last replies
// itself.
template <class Stream>
    requires readable_stream<Stream> && writable_stream<Stream>
class buffered_stream {
    buffered_reader<Stream> r_;
    buffered_writer<Stream> w_;

public:
    explicit buffered_stream(Stream& s, buffered_options o = {}) : r_(s, o), w_(s, o) { r_.flush_before_read(w_); }
    buffered_stream(const buffered_stream&) = delete;
    buffered_stream& operator=(const buffered_stream&) = delete;
    buffered_stream(buffered_stream&& o) noexcept : r_(std::move(o.r_)), w_(std::move(o.w_)) {
        r_.flush_before_read(w_);
    }
    buffered_stream& operator=(buffered_stream&& o) noexcept {
        r_ = std::move(o.r_);
        w_ = std::move(o.w_);
        r_.flush_before_read(w_);
        return *this;
    }
    ~buffered_stream() = default;  // no IO

    [[nodiscard]] Stream& stream() const noexcept { return r_.stream(); }
    [[nodiscard]] buffered_reader<Stream>& reader() noexcept { return r_; }
    [[nodiscard]] buffered_writer<Stream>& writer() noexcept { return w_; }

    // The reader's calls (buffered_reader above), each flushing the writer
    // before it waits.
    template <class... A>
    decltype(auto) read_until(A&&... a) { return r_.read_until(std::forward<A>(a)...); }
    template <class... A>
    decltype(auto) read_line(A&&... a) { return r_.read_line(std::forward<A>(a)...); }
    template <class... A>
    decltype(auto) read_some(A&&... a) { return r_.read_some(std::forward<A>(a)...); }
    template <class... A>
    decltype(auto) read_exact(A&&... a) { return r_.read_exact(std::forward<A>(a)...); }
    template <class... A>
    decltype(auto) peek(A&&... a) { return r_.peek(std::forward<A>(a)...); }
    [[nodiscard]] std::span<const std::byte> buffered() const noexcept { return r_.buffered(); }
    void consume(std::size_t n) noexcept { r_.consume(n); }

    // The writer's calls (buffered_writer above).
    template <class... A>
    decltype(auto) write(A&&... a) { return w_.write(std::forward<A>(a)...); }
    template <class... A>
    decltype(auto) write_all(A&&... a) { return w_.write_all(std::forward<A>(a)...); }
    template <class... A>
    decltype(auto) write_vectored(A&&... a) { return w_.write_vectored(std::forward<A>(a)...); }
    template <class... A>
    decltype(auto) flush(A&&... a) { return w_.flush(std::forward<A>(a)...); }
    [[nodiscard]] std::size_t pending() const noexcept { return w_.pending(); }
};

// copy() reads `from` until its end and writes everything to `to`, with
// one deadline for the whole copy; if `to` has flush(ec, deadline) (a
// buffered_writer) it is flushed at the end. Returns the bytes written to
// `to` (taken by it, for a buffered writer). Reaching the end of `from` is
// success (ec clear); otherwise ec is the first error of either side.
// Reader: read_some(span<byte>, ec, deadline); Writer: write_all(span<const
// byte>, ec, deadline) (io::stream, buffered_writer).
template <readable_stream Reader, class Writer>
    requires requires(Writer& w, std::span<const std::byte> b, std::error_code& ec, clock::time_point d) {
        { w.write_all(b, ec, d) } -> std::convertible_to<std::size_t>;
    }
std::size_t copy(Reader& from, Writer& to, std::error_code& ec, clock::time_point deadline = no_deadline) {
    ec.clear();
    std::vector<std::byte> buf(64 * 1024);
    std::size_t total = 0;
    for (;;) {
        const std::size_t n = from.read_some(buf, ec, deadline);
        if (ec) return total;
        if (n == 0) break;
        total += to.write_all(std::span<const std::byte>(buf.data(), n), ec, deadline);
        if (ec) return total;
    }
    if constexpr (requires { to.flush(ec, deadline); }) to.flush(ec, deadline);
    return total;
}
template <readable_stream Reader, class Writer>
    requires requires(Writer& w, std::span<const std::byte> b, std::error_code& ec, clock::time_point d) {
        { w.write_all(b, ec, d) } -> std::convertible_to<std::size_t>;
    }
std::size_t copy(Reader& from, Writer& to, clock::time_point deadline = no_deadline) {
    std::error_code ec;
    const std::size_t n = copy(from, to, ec, deadline);
    check(ec, "weft::io::copy");
    return n;
}

}  // namespace weft::io
