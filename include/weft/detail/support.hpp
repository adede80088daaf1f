// weft/detail/support.hpp: helpers shared by every layer (docs/design.md,
// Layers; src/support/). Below all layers: it includes nothing of weft but
// config.hpp, and knows no layer's types.
//
//   thread_counter       a statistic updated per thread, summed on read
//   counter_id           the table of the thread_counter ids weft uses
//   round_up             power-of-two rounding that reports overflow
//   write_stderr         one message to stderr, async-signal-safe
//   fatal_message        write a message and abort, async-signal-safe
//   text_writer          bounded, allocation-free message building
//   format_named         "coroutine 'name'" without allocating
//   describe_named       the same as a std::string
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "weft/config.hpp"

namespace weft::detail {

// ---------------------------------------------------------------- counters

// counter_id is the table of thread_counter ids. Each id is one slot in
// every thread's counters, so two counters must never share an id. The
// counters themselves are defined by the layer they count; only their ids
// are kept here, in one place, so that layers that do not know each other
// cannot collide. Ids from first_free up to thread_counter::max_counters - 1
// are unused by weft (tests take them).
enum class counter_id : unsigned {
    // live_stacks: stacks allocated by weft's allocators and not yet
    // deallocated (layer 1, stats::live_stacks()).
    live_stacks = 0,
    // live_coroutines: coroutines created and not yet destroyed (layer 2,
    // stats::live_coroutines()).
    live_coroutines = 1,
    // first_free is the lowest id weft does not use.
    first_free = 2,
};

// thread_counter is a statistic that many threads update on hot paths and
// few read. add() touches only the calling thread's slot: a relaxed load and
// store, no read-modify-write and no shared cache line. read() sums every
// thread's slot (and the totals of exited threads) under a lock, so it is
// exact once the updates it should see have happened-before it. A counter
// decremented on another thread than the one that incremented it is fine:
// slots may go negative, the sum stays right. Ids are fixed (constant
// initialisation: usable from any static initialiser); see counter_id.
class thread_counter {
public:
    // max_counters is the number of ids: each must be below it.
    static constexpr unsigned max_counters = 8;

    // thread_counter(id) names slot `id`. Requires: id < max_counters and no
    // other thread_counter has this id.
    explicit constexpr thread_counter(unsigned id) noexcept : id_(id) {}
    // thread_counter(id) is the counter with weft's id `id` (counter_id).
    explicit constexpr thread_counter(counter_id id) noexcept : id_(static_cast<unsigned>(id)) {}

    // add() adds delta to the calling thread's slot. Lock-free except the
    // first call on a thread, which registers the thread's slots.
    WEFT_API void add(std::int64_t delta) noexcept;
    // read() is the sum over all threads, live and exited. Takes a lock.
    [[nodiscard]] WEFT_API std::int64_t read() const noexcept;

private:
    unsigned id_;
};

// ---------------------------------------------------------------- arithmetic

// round_up() sets out to n rounded up to a multiple of `to` and returns true,
// or returns false (out unchanged) when that would overflow std::size_t.
// Requires: `to` is a power of two.
[[nodiscard]] constexpr bool round_up(std::size_t n, std::size_t to, std::size_t& out) noexcept {
    std::size_t sum;
    if (__builtin_add_overflow(n, to - 1, &sum)) return false;
    out = sum & ~(to - 1);
    return true;
}

// ---------------------------------------------------------------- reporting

// write_stderr() writes the n bytes at text to file descriptor 2, retrying
// on EINTR and partial writes, and gives up silently on any other error.
// Async-signal-safe; errno is preserved. Allocates nothing.
WEFT_API void write_stderr(const char* text, std::size_t n) noexcept;

// fatal_message() writes text (a NUL-terminated string) to stderr, followed
// by a newline unless text ends with one, then calls std::abort(). For
// failures weft cannot report with an exception (noexcept paths, a
// corrupted stack or heap, signal handlers): async-signal-safe and
// allocation-free, so it works when the heap is damaged. A null text writes
// only the newline.
[[noreturn]] WEFT_API void fatal_message(const char* text) noexcept;

// text_writer builds a message in a caller's buffer, for paths that must
// not allocate (fatal_message(), signal handlers). It never writes past the
// buffer: what does not fit is dropped and truncated() turns true. The text
// is always NUL-terminated when the buffer is not empty. Async-signal-safe.
class text_writer {
public:
    // text_writer() writes into buf[0, n). n may be 0 (everything is dropped).
    text_writer(char* buf, std::size_t n) noexcept : buf_(buf), cap_(n) {
        if (cap_) buf_[0] = '\0';
    }

    // text() appends s, as much of it as fits.
    WEFT_API text_writer& text(std::string_view s) noexcept;
    // dec() appends v in decimal.
    WEFT_API text_writer& dec(std::uintmax_t v) noexcept;
    // hex() appends v as "0x" and lowercase hex digits, without leading zeros.
    WEFT_API text_writer& hex(std::uintptr_t v) noexcept;
    // address() appends p as hex() does ("0x0" for null).
    text_writer& address(const void* p) noexcept { return hex(reinterpret_cast<std::uintptr_t>(p)); }

    // c_str() is the text so far, NUL-terminated. Requires: the buffer is
    // not empty.
    [[nodiscard]] const char* c_str() const noexcept { return buf_; }
    // size() is the length of the text so far (without the NUL).
    [[nodiscard]] std::size_t size() const noexcept { return len_; }
    // room() is how many more characters fit.
    [[nodiscard]] std::size_t room() const noexcept { return cap_ ? cap_ - 1 - len_ : 0; }
    // truncated() says whether anything appended was dropped.
    [[nodiscard]] bool truncated() const noexcept { return truncated_; }

private:
    char* buf_;
    std::size_t cap_;
    std::size_t len_ = 0;
    bool truncated_ = false;
};

// format_named() writes into buf[0, n) how messages name a thing of kind
// `kind` (a noun, e.g. "coroutine"): "coroutine 'name'", or "coroutine
// <anonymous 0x...>" with `address` when name is empty. Returns the length
// written, without the NUL that always follows it when n > 0. A name too
// long for the buffer is cut short and ends in "..." inside the quotes
// (when at least 5 characters of room are left for it; else the text is just
// cut). Async-signal-safe; allocates nothing.
WEFT_API std::size_t format_named(char* buf, std::size_t n, std::string_view kind, std::string_view name,
                                  const void* address) noexcept;

// describe_named() is format_named()'s text as a std::string, never cut
// short. Throws: std::bad_alloc.
[[nodiscard]] WEFT_API std::string describe_named(std::string_view kind, std::string_view name,
                                                  const void* address);

// futex_wait() sleeps while *word == expected, until woken by futex_wake(),
// a signal, a spurious wake-up or, with rel_timeout_ns >= 0, the timeout
// (relative, in nanoseconds). Callers re-check their condition in a loop.
WEFT_API void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::int64_t rel_timeout_ns) noexcept;
// futex_wake() wakes up to n threads sleeping on word (private futex).
WEFT_API void futex_wake(std::atomic<std::uint32_t>* word, int n) noexcept;

}  // namespace weft::detail
