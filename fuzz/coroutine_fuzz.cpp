// coroutine_fuzz.cpp: a libFuzzer target that reads its input as a program
// over four coroutine slots and checks every result against a model.
//
// The outer program creates coroutines of four kinds (coroutine<>,
// coroutine<int, int, int>, coroutine<std::string, void, std::string> and
// generator<int>) on mmap_stack, malloc_stack or pooled_stack (a small
// stack_pool per input, so its limit is reached and its stacks are reused),
// with stack sizes from ample to too small, then resumes, destroys, moves,
// swaps and queries them, also from a second thread, and tries the misuses
// weft promises to report:
// resume of an empty, running or finished coroutine, yield through a leaked
// yielder, this_coroutine::yield() outside a coroutine or in one that yields
// values. Each body reads its own next step from the same input when it
// runs: yield (from a depth of frames, inside catch (...) that rethrows),
// return, throw one of three exception types, resume itself, resume or
// destroy another slot (also from a new thread), yield through another
// coroutine's yielder, run and keep a nested coroutine.
//
// The model predicts each outcome: the value a resume returns, the value a
// body receives, the exception that comes out, the error code and that its
// message names the coroutine, the state afterwards, that destruction
// unwinds every frame of a suspended body, and that each input leaves
// weft::stats::live_coroutines() and live_stacks() where they were. Any
// difference calls __builtin_trap() after printing the line that failed.
//
// Misuses that weft defines as aborts (destroying a running coroutine,
// swallowing forced_unwind) end the process by design; they are covered by
// the death tests, not here.
//
// Built with WEFT_FUZZ_REPLAY_MAIN, the file has its own main() that runs
// the inputs named on the command line (files, or directories of files)
// once each: the corpus as a regression test with any compiler.

#include <weft/coroutine.hpp>
#include <weft/generator.hpp>
#include <weft/pooled_stack.hpp>

#include <algorithm>
#include <array>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#ifdef WEFT_FUZZ_REPLAY_MAIN
#include <filesystem>
#include <fstream>
#include <iostream>
#endif

namespace {

[[noreturn]] void violated(const char* what, int line) {
    std::fprintf(stderr, "coroutine_fuzz: invariant violated (coroutine_fuzz.cpp:%d): %s\n", line, what);
    std::fflush(stderr);
    __builtin_trap();
}

// trace() prints one step of the program when WEFT_FUZZ_TRACE is set in
// the environment: to read what an input does, e.g. one that crashed.
bool tracing() {
    static const bool on = std::getenv("WEFT_FUZZ_TRACE") != nullptr;
    return on;
}

__attribute__((format(printf, 1, 2))) void trace(const char* format, ...) {
    if (!tracing()) return;
    std::va_list args;
    va_start(args, format);
    std::vfprintf(stderr, format, args);
    va_end(args);
    std::fputc('\n', stderr);
}

#define FUZZ_CHECK(cond)                                \
    do {                                                \
        if (!(cond)) [[unlikely]]                       \
            violated(#cond, __LINE__);                  \
    } while (false)

// reader hands out the input's bytes; past the end it yields zeros.
class reader {
public:
    reader(const std::uint8_t* data, std::size_t size) noexcept : p_(data), end_(data + size) {}
    [[nodiscard]] bool empty() const noexcept { return p_ == end_; }
    std::uint8_t byte() noexcept { return p_ == end_ ? 0 : *p_++; }
    unsigned pick(unsigned n) noexcept { return byte() % n; }
    int value() noexcept {
        std::uint32_t v = 0;
        for (int i = 0; i < 4; ++i) v = v << 8 | byte();
        return static_cast<int>(v);
    }

private:
    const std::uint8_t* p_;
    const std::uint8_t* end_;
};

constexpr int slot_count = 4;
constexpr int max_coroutines = 64;  // creations per input
constexpr int max_depth = 4;        // nested resumes from inside bodies
constexpr int max_outer_ops = 512;
constexpr std::size_t min_runnable_room = 60 * 1024;
// Each input has its own stack_pool.
constexpr std::size_t pool_stack_size = 128 * 1024;
constexpr std::size_t pool_max_stacks = 3;  // fewer than the slots: the limit is reachable

weft::stack_pool_options pool_options() {
    weft::stack_pool_options o;
    o.stack_size = pool_stack_size;
    o.max_stacks = pool_max_stacks;
    o.max_cached_per_thread = 2;  // small, so stacks also pass through the shared reserve
    o.on_limit = weft::limit_policy::fail;
    return o;
}

enum class kind : std::uint8_t { none, plain, ints, strs, gen };

using plain_co = weft::coroutine<>;
using ints_co = weft::coroutine<int, int, int>;
using strs_co = weft::coroutine<std::string, void, std::string>;
using gen_t = weft::generator<int>;

// gen_holder keeps a generator with the iterator begin() returned; the
// holder is moved by pointer so the iterator stays valid, or the generator
// is moved into a new holder (and iteration restarts with begin()).
struct gen_holder {
    gen_t g;
    std::optional<gen_t::iterator> it;
    explicit gen_holder(gen_t&& x) noexcept : g(std::move(x)) {}
};

// slot holds at most one coroutine; `k` says which member is in use. A
// moved-from member stays in place with serial -1: an empty handle.
struct slot {
    kind k = kind::none;
    int serial = -1;
    plain_co plain;
    ints_co ints;
    strs_co strs;
    std::unique_ptr<gen_holder> gen;
};

enum class event : std::uint8_t { none, yielded, returned, threw };

// thrown_odd is an exception type not derived from std::exception.
struct thrown_odd {
    int serial;
};

// record is the model of one coroutine.
struct record {
    kind k = kind::none;
    bool runnable = false;  // created with room to run bodies; others are never resumed
    bool exists = false;    // created and not destroyed
    bool pooled = false;    // on one of the pool's stacks (counted against its limit)
    weft::coroutine_state state = weft::coroutine_state::created;
    std::string name;
    std::size_t private_size = 0;
    std::size_t requested = 0;
    bool painted = false;
    bool started = false;
    // What the body did last, as it reports it; the resumer compares.
    event ev = event::none;
    int ev_int = 0;
    std::string ev_str;
    int throw_kind = -1;
    int steps = 0;
    int sent = 0;      // the value the last resume passed in
    int frames = 0;    // body frames alive (each has a guard)
    bool unwound = false;  // forced_unwind went through the body
    int caught_all = 0;    // catch (...) blocks that saw forced_unwind and rethrew
    int inner_alive = 0;   // nested coroutines the body keeps across yields
    void* yielder = nullptr;
    void (*leaked_yield)(void*) = nullptr;
};

struct harness {
    reader in;
    // Declared before the slots, so that it outlives every coroutine.
    weft::stack_pool pool{pool_options()};
    std::size_t pooled_in_use = 0;
    std::array<slot, slot_count> slots;
    std::array<record, max_coroutines> recs;
    int nrec = 0;
    // Serials of the running coroutines, innermost last, on the thread that
    // runs them; -1 marks the start of a new thread.
    std::vector<int> running;
    int depth = 0;

    harness(const std::uint8_t* d, std::size_t n) : in(d, n) { running.reserve(64); }
};

bool mentions(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// names_ok() checks that an error message names the coroutine of `r`.
bool names_ok(const std::string& msg, const record& r) {
    if (r.name.empty()) return mentions(msg, "anonymous");
    return mentions(msg, "'" + r.name + "'");
}

// ---------------------------------------------------------------- outcomes

struct outcome {
    enum what_t : std::uint8_t { value, end, error, exception } what = end;
    int i = 0;
    std::string str;
    weft::coroutine_errc code{};
    std::string msg;
    int throw_kind = -1;
    int throw_serial = -1;
};

// resume_slot() resumes (or advances) the coroutine in s once and reports
// what came out, including any exception.
outcome resume_slot(slot& s, int value) {
    outcome o;
    try {
        switch (s.k) {
        case kind::none: violated("resume of an unused slot", __LINE__);
        case kind::plain: o.what = s.plain.resume() ? outcome::value : outcome::end; break;
        case kind::ints:
            if (auto v = s.ints.resume(value)) {
                o.what = outcome::value;
                o.i = *v;
            } else {
                o.what = outcome::end;
            }
            break;
        case kind::strs:
            if (auto v = s.strs.resume()) {
                o.what = outcome::value;
                o.str = std::move(*v);
            } else {
                o.what = outcome::end;
            }
            break;
        case kind::gen: {
            gen_holder& g = *s.gen;
            if (!g.it)
                g.it = g.g.begin();
            else
                ++*g.it;
            if (*g.it == std::default_sentinel) {
                o.what = outcome::end;
            } else {
                o.what = outcome::value;
                o.i = **g.it;
            }
            break;
        }
        }
    } catch (const weft::coroutine_error& e) {
        o.what = outcome::error;
        o.code = e.code();
        o.msg = e.what();
    } catch (const std::runtime_error& e) {
        o.what = outcome::exception;
        o.throw_kind = 0;
        o.msg = e.what();
    } catch (int serial) {
        o.what = outcome::exception;
        o.throw_kind = 1;
        o.throw_serial = serial;
    } catch (const thrown_odd& t) {
        o.what = outcome::exception;
        o.throw_kind = 2;
        o.throw_serial = t.serial;
    } catch (const weft::forced_unwind&) {
        violated("forced_unwind escaped a resume", __LINE__);
    } catch (...) {
        violated("unexpected exception type escaped a resume", __LINE__);
    }
    return o;
}

// state_of() is the library's idea of the state; generators do not expose
// it, so for them the model's answer is returned.
weft::coroutine_state state_of(const slot& s, const record& r) {
    switch (s.k) {
    case kind::plain: return s.plain.state();
    case kind::ints: return s.ints.state();
    case kind::strs: return s.strs.state();
    default: return r.state;
    }
}

void destroy_slot(harness& h, int si);

// drive() resumes the coroutine in slot si, predicting the outcome.
void drive(harness& h, int si, int value) {
    slot& s = h.slots[si];
    if (s.k == kind::none) return;
    if (s.serial < 0) {
        outcome o = resume_slot(s, value);
        FUZZ_CHECK(o.what == outcome::error);
        FUZZ_CHECK(o.code == weft::coroutine_errc::empty_handle);
        FUZZ_CHECK(mentions(o.msg, "empty"));
        return;
    }
    const int serial = s.serial;
    record& r = h.recs[serial];
    FUZZ_CHECK(r.exists);
    if (!r.runnable) return;

    if (r.state == weft::coroutine_state::done || r.state == weft::coroutine_state::running) {
        weft::coroutine_errc expected = weft::coroutine_errc::resume_done;
        if (r.state == weft::coroutine_state::running)
            expected = !h.running.empty() && h.running.back() == serial ? weft::coroutine_errc::resume_self
                                                                        : weft::coroutine_errc::resume_running;
        const weft::coroutine_state before = r.state;
        outcome o = resume_slot(s, value);
        trace("  resume of %d (%s): %s", serial, weft::to_string(before), o.msg.c_str());
        FUZZ_CHECK(o.what == outcome::error);
        FUZZ_CHECK(o.code == expected);
        FUZZ_CHECK(names_ok(o.msg, r));
        FUZZ_CHECK(mentions(o.msg, weft::to_string(before)));
        FUZZ_CHECK(state_of(s, r) == before);
        FUZZ_CHECK(r.state == before);
        return;
    }

    const weft::coroutine_ref caller = weft::this_coroutine::get();
    r.ev = event::none;
    r.sent = value;
    r.state = weft::coroutine_state::running;
    h.running.push_back(serial);
    ++h.depth;
    outcome o = resume_slot(s, value);
    --h.depth;
    FUZZ_CHECK(!h.running.empty() && h.running.back() == serial);
    h.running.pop_back();
    FUZZ_CHECK(weft::this_coroutine::get() == caller);
    FUZZ_CHECK(s.serial == serial);  // nothing moved or destroyed a running coroutine

    trace("  resume of %d: event %d, outcome %d", serial, static_cast<int>(r.ev), static_cast<int>(o.what));
    switch (r.ev) {
    case event::none: violated("resume came back without the body yielding, returning or throwing", __LINE__);
    case event::yielded:
        FUZZ_CHECK(o.what == outcome::value);
        if (r.k == kind::ints || r.k == kind::gen) FUZZ_CHECK(o.i == r.ev_int);
        if (r.k == kind::strs) FUZZ_CHECK(o.str == r.ev_str);
        r.state = weft::coroutine_state::suspended;
        FUZZ_CHECK(r.frames > 0);
        break;
    case event::returned:
        FUZZ_CHECK(o.what == outcome::end);
        r.state = weft::coroutine_state::done;
        FUZZ_CHECK(r.frames == 0 && r.yielder == nullptr);
        if (r.k == kind::ints) FUZZ_CHECK(s.ints.result() == r.ev_int);
        if (r.k == kind::strs) FUZZ_CHECK(s.strs.result() == r.ev_str);
        break;
    case event::threw:
        FUZZ_CHECK(o.what == outcome::exception);
        FUZZ_CHECK(o.throw_kind == r.throw_kind);
        if (o.throw_kind == 0) FUZZ_CHECK(o.msg == "boom " + std::to_string(serial));
        if (o.throw_kind != 0) FUZZ_CHECK(o.throw_serial == serial);
        r.state = weft::coroutine_state::done;
        FUZZ_CHECK(r.frames == 0 && r.yielder == nullptr);
        if (r.k == kind::ints || r.k == kind::strs) {
            try {
                if (r.k == kind::ints) (void)s.ints.result();
                if (r.k == kind::strs) (void)s.strs.result();
                violated("result() after the body threw did not throw", __LINE__);
            } catch (const weft::coroutine_error& e) {
                FUZZ_CHECK(e.code() == weft::coroutine_errc::no_result);
            }
        }
        break;
    }
    FUZZ_CHECK(state_of(s, r) == r.state);
    if (s.k == kind::plain) FUZZ_CHECK(s.plain.done() == (r.state == weft::coroutine_state::done));
    if (s.k == kind::ints) FUZZ_CHECK(s.ints.done() == (r.state == weft::coroutine_state::done));
    if (s.k == kind::strs) FUZZ_CHECK(s.strs.done() == (r.state == weft::coroutine_state::done));
}

// drive_on_thread() runs drive() on a new thread: migration for a
// suspended coroutine, "running on another thread" for a running one.
void drive_on_thread(harness& h, int si, int value) {
    trace("  on a new thread:");
    std::thread t([&h, si, value] {
        FUZZ_CHECK(!weft::this_coroutine::inside());
        h.running.push_back(-1);
        drive(h, si, value);
        FUZZ_CHECK(!h.running.empty() && h.running.back() == -1);
        h.running.pop_back();
    });
    t.join();
}

// ---------------------------------------------------------------- bodies

template <kind K>
struct traits;
template <>
struct traits<kind::plain> {
    using yielder = weft::yielder<>;
    using ret = void;
};
template <>
struct traits<kind::ints> {
    using yielder = weft::yielder<int, int>;
    using ret = int;
};
template <>
struct traits<kind::strs> {
    using yielder = weft::yielder<std::string, void>;
    using ret = std::string;
};
template <>
struct traits<kind::gen> {
    using yielder = gen_t::yielder_type;
    using ret = void;
};

// frame_guard counts the body's live frames; destruction by forced_unwind
// must bring the count back to zero.
struct frame_guard {
    record& r;
    explicit frame_guard(record& rec) noexcept : r(rec) { ++r.frames; }
    ~frame_guard() { --r.frames; }
    frame_guard(const frame_guard&) = delete;
    frame_guard& operator=(const frame_guard&) = delete;
};

template <kind K>
void leaked_yield(void* y) {
    auto* yp = static_cast<typename traits<K>::yielder*>(y);
    if constexpr (K == kind::plain)
        yp->yield();
    else if constexpr (K == kind::ints)
        (void)yp->yield(0);
    else if constexpr (K == kind::strs)
        yp->yield(std::string("leaked"));
    else
        yp->yield(0);
}

// do_yield() yields the next value; the value the body then receives must
// be the one the resumer sent.
template <kind K>
void do_yield(harness& h, record& r, typename traits<K>::yielder& y) {
    const int serial = static_cast<int>(&r - h.recs.data());
    r.ev = event::yielded;
    ++r.steps;
    if constexpr (K == kind::plain) {
        y.yield();
    } else if constexpr (K == kind::ints) {
        r.ev_int = static_cast<int>(static_cast<unsigned>(r.sent) * 3u + static_cast<unsigned>(r.steps));
        const int got = y.yield(r.ev_int);
        FUZZ_CHECK(got == r.sent);
    } else if constexpr (K == kind::strs) {
        // Long enough to live on the heap: leaks and use-after-free show.
        r.ev_str = std::string(static_cast<std::size_t>(h.in.pick(80)), static_cast<char>('a' + r.steps % 26)) +
                   std::to_string(serial);
        y.yield(std::string(r.ev_str));
    } else {
        r.ev_int = serial * 1000 + r.steps;
        y.yield(r.ev_int);
    }
}

template <kind K>
void deep_yield(harness& h, record& r, typename traits<K>::yielder& y, int depth) {
    frame_guard g(r);
    volatile unsigned char scratch[64];
    for (auto& b : scratch) b = static_cast<unsigned char>(depth);
    if (depth > 0)
        deep_yield<K>(h, r, y, depth - 1);
    else
        do_yield<K>(h, r, y);
    FUZZ_CHECK(scratch[0] == static_cast<unsigned char>(depth) && scratch[63] == static_cast<unsigned char>(depth));
}

template <kind K>
[[noreturn]] void do_throw(record& r, int serial, unsigned which) {
    r.ev = event::threw;
    r.throw_kind = static_cast<int>(which);
    switch (which) {
    case 0: throw std::runtime_error("boom " + std::to_string(serial));
    case 1: throw serial;
    default: throw thrown_odd{serial};
    }
}

template <kind K>
typename traits<K>::ret do_return(record& r, int serial) {
    if constexpr (K == kind::ints) {
        r.ev_int = serial * 7 + r.steps;
        r.ev = event::returned;
        return r.ev_int;
    } else if constexpr (K == kind::strs) {
        r.ev_str = "result " + std::to_string(serial) + std::string(40, 'r');
        r.ev = event::returned;
        return r.ev_str;
    } else {
        r.ev = event::returned;
    }
}

int find_slot(const harness& h, int serial) {
    for (int i = 0; i < slot_count; ++i)
        if (h.slots[i].k != kind::none && h.slots[i].serial == serial) return i;
    return -1;
}

// inner_keeper holds a nested coroutine a body keeps across its yields, so
// destroying the body destroys it too (during forced unwinding).
struct inner_keeper {
    record& r;
    std::optional<weft::coroutine<int>> co;
    explicit inner_keeper(record& rec) noexcept : r(rec) {}
    ~inner_keeper() {
        co.reset();
        r.inner_alive = 0;
    }
    inner_keeper(const inner_keeper&) = delete;
    inner_keeper& operator=(const inner_keeper&) = delete;
};

weft::coroutine<int> make_inner(bool use_malloc) {
    auto body = [](weft::yielder<int>& y) {
        y.yield(1);
        y.yield(2);
    };
    const weft::coroutine_options opts{.stack_size = 64 * 1024, .name = "inner"};
    if (use_malloc) return weft::coroutine<int>(std::allocator_arg, weft::malloc_stack{}, body, opts);
    return weft::coroutine<int>(std::allocator_arg, weft::mmap_stack{}, body, opts);
}

template <kind K>
typename traits<K>::ret body_main(harness& h, int serial, typename traits<K>::yielder& y) {
    record& r = h.recs[static_cast<std::size_t>(serial)];
    FUZZ_CHECK(r.exists && r.state == weft::coroutine_state::running && !r.started);
    r.started = true;
    frame_guard g(r);
    struct yielder_guard {
        record& r;
        ~yielder_guard() {
            r.yielder = nullptr;
            r.leaked_yield = nullptr;
        }
    } yg{r};
    r.yielder = &y;
    r.leaked_yield = &leaked_yield<K>;

    // Who am I: this_coroutine, the name, the private data area.
    const weft::coroutine_ref self = weft::this_coroutine::get();
    FUZZ_CHECK(self && self.state() == weft::coroutine_state::running);
    FUZZ_CHECK(self.name() == r.name && y.name() == r.name);
    FUZZ_CHECK(y.private_data().size() == r.private_size);
    for (std::byte b : y.private_data()) FUZZ_CHECK(b == std::byte{0});
    for (std::size_t i = 0; i < y.private_data().size() && i < 8; ++i)
        y.private_data()[i] = static_cast<std::byte>(serial + static_cast<int>(i));

    inner_keeper keeper(r);
    try {
        for (;;) {
            if (h.in.empty()) return do_return<K>(r, serial);
            const unsigned step = h.in.pick(16);
            static constexpr const char* names[] = {"yield", "yield", "return", "throw", "deep-yield", "resume-self",
                                                    "resume-other", "this_coroutine::yield", "leaked-yield", "destroy-other",
                                                    "yield-in-catch-all", "yield-in-catch-std", "nested", "keep-inner",
                                                    "throw-catch", "generator"};
            trace("  body %d (depth %d): %s", serial, h.depth, names[step]);
            switch (step) {
            case 0:
            case 1: do_yield<K>(h, r, y); break;
            case 2: return do_return<K>(r, serial);
            case 3: do_throw<K>(r, serial, h.in.pick(3));
            case 4: deep_yield<K>(h, r, y, static_cast<int>(h.in.pick(24))); break;
            case 5: {  // resume myself: resume_self
                const int si = find_slot(h, serial);
                FUZZ_CHECK(si >= 0);
                drive(h, si, h.in.value());
                break;
            }
            case 6: {  // resume another slot, here or on a new thread
                const int si = static_cast<int>(h.in.pick(slot_count));
                const bool thread = h.in.pick(4) == 0;
                const int v = h.in.value();
                if (h.depth >= max_depth) break;
                if (thread)
                    drive_on_thread(h, si, v);
                else
                    drive(h, si, v);
                break;
            }
            case 7: {  // this_coroutine::yield(): a yield here, an error where values are yielded
                if constexpr (K == kind::plain) {
                    r.ev = event::yielded;
                    ++r.steps;
                    weft::this_coroutine::yield();
                } else {
                    try {
                        weft::this_coroutine::yield();
                        violated("this_coroutine::yield() in a value-yielding coroutine did not throw", __LINE__);
                    } catch (const weft::coroutine_error& e) {
                        FUZZ_CHECK(e.code() == weft::coroutine_errc::yield_type);
                        FUZZ_CHECK(names_ok(e.what(), r));
                    }
                    FUZZ_CHECK(self.state() == weft::coroutine_state::running);
                }
                break;
            }
            case 8: {  // yield through another coroutine's leaked yielder
                const int si = static_cast<int>(h.in.pick(slot_count));
                const slot& s = h.slots[si];
                if (s.k == kind::none || s.serial < 0 || s.serial == serial) break;
                record& other = h.recs[s.serial];
                if (!other.yielder) break;
                const weft::coroutine_state before = other.state;
                try {
                    other.leaked_yield(other.yielder);
                    violated("yield through a foreign yielder did not throw", __LINE__);
                } catch (const weft::coroutine_error& e) {
                    FUZZ_CHECK(e.code() == weft::coroutine_errc::yield_outside);
                    FUZZ_CHECK(names_ok(e.what(), other));
                }
                FUZZ_CHECK(state_of(s, other) == before);
                break;
            }
            case 9: {  // destroy another slot's coroutine unless it is running
                const int si = static_cast<int>(h.in.pick(slot_count));
                const slot& s = h.slots[si];
                if (s.k == kind::none) break;
                if (s.serial >= 0 && h.recs[s.serial].state == weft::coroutine_state::running) break;
                destroy_slot(h, si);
                break;
            }
            case 10: {  // a catch (...) that rethrows around a yield
                try {
                    do_yield<K>(h, r, y);
                } catch (...) {
                    ++r.caught_all;
                    throw;
                }
                break;
            }
            case 11: {  // catch (const std::exception&) must not see forced_unwind
                try {
                    do_yield<K>(h, r, y);
                } catch (const std::exception&) {
                    violated("forced_unwind caught as std::exception", __LINE__);
                }
                break;
            }
            case 12: {  // a nested coroutine run once and destroyed suspended, maybe misusing my yielder
                weft::coroutine<int> inner = make_inner(h.in.pick(2) == 0);
                const bool misuse = h.in.pick(2) == 0;
                weft::coroutine<int> inner2(
                    [&y, &r, misuse](weft::yielder<int>& iy) {
                        if (misuse) {
                            try {
                                leaked_yield<K>(&y);
                                violated("yield through the outer yielder from an inner coroutine did not throw", __LINE__);
                            } catch (const weft::coroutine_error& e) {
                                FUZZ_CHECK(e.code() == weft::coroutine_errc::yield_outside);
                                FUZZ_CHECK(names_ok(e.what(), r));
                            }
                        }
                        iy.yield(7);
                    },
                    {.stack_size = 64 * 1024});
                FUZZ_CHECK(inner.resume() == std::optional<int>(1));
                FUZZ_CHECK(inner2.resume() == std::optional<int>(7));
                FUZZ_CHECK(weft::this_coroutine::get() == self);
                break;
            }
            case 13: {  // keep a nested coroutine across my yields
                if (!keeper.co) {
                    keeper.co.emplace(make_inner(h.in.pick(2) == 0));
                    r.inner_alive = 1;
                    FUZZ_CHECK(keeper.co->resume() == std::optional<int>(1));
                } else {
                    keeper.co.reset();
                    r.inner_alive = 0;
                }
                break;
            }
            case 14: {  // an exception thrown and caught inside the body
                try {
                    throw std::runtime_error("caught inside");
                } catch (const std::runtime_error& e) {
                    FUZZ_CHECK(std::strcmp(e.what(), "caught inside") == 0);
                }
                break;
            }
            default: {  // a generator run to its end inside the body
                int sum = 0;
                for (int v : gen_t([](gen_t::yielder_type& gy) {
                         for (int i = 1; i <= 3; ++i) gy.yield(i);
                     }, {.stack_size = 64 * 1024}))
                    sum += v;
                FUZZ_CHECK(sum == 6);
                break;
            }
            }
        }
    } catch (...) {
        // Not catch (const weft::forced_unwind&): the forced unwind has no
        // C++ object, and UBSan reports the null reference that would bind
        // (docs/safety.md, Cancellation).
        if (weft::detail::forced_unwind_in_flight()) {
            FUZZ_CHECK(r.state == weft::coroutine_state::suspended);  // the model's view: destroyed while suspended
            r.unwound = true;
        }
        throw;
    }
}

// ---------------------------------------------------------------- outer ops

// forget() records that r's coroutine is gone (and its pooled stack back).
void forget(harness& h, record& r) {
    r.exists = false;
    if (r.pooled) {
        FUZZ_CHECK(h.pooled_in_use > 0);
        --h.pooled_in_use;
    }
}

// destroy_slot() empties slot si, checking that a suspended body unwinds
// completely and that exactly its coroutine (and what it kept) is freed.
void destroy_slot(harness& h, int si) {
    slot& s = h.slots[si];
    if (s.k == kind::none) return;
    const std::int64_t co_before = weft::stats::live_coroutines();
    const std::int64_t st_before = weft::stats::live_stacks();
    std::int64_t freed = 0;
    record* r = nullptr;
    bool expect_unwind = false;
    if (s.serial >= 0) {
        r = &h.recs[s.serial];
        FUZZ_CHECK(r->exists && r->state != weft::coroutine_state::running);
        expect_unwind = r->state == weft::coroutine_state::suspended;
        freed = 1 + r->inner_alive;
    }
    switch (s.k) {
    case kind::plain: s.plain.reset(); break;
    case kind::ints: s.ints.reset(); break;
    case kind::strs: s.strs.reset(); break;
    case kind::gen: s.gen.reset(); break;
    case kind::none: break;
    }
    s.k = kind::none;
    s.serial = -1;
    FUZZ_CHECK(weft::stats::live_coroutines() == co_before - freed);
    FUZZ_CHECK(weft::stats::live_stacks() == st_before - freed);
    if (r) {
        FUZZ_CHECK(r->unwound == expect_unwind);
        FUZZ_CHECK(r->frames == 0 && r->yielder == nullptr && r->inner_alive == 0);
        forget(h, *r);
    }
}

// Requested stack sizes: ample ones that run bodies, small ones that may or
// must be refused, and an overflowing one. 0 asks for the default, like
// leaving the option alone (class 3).
constexpr std::size_t size_classes[] = {
    64 * 1024, 128 * 1024, 256 * 1024, 0 /* left alone */, 2048, 256, 6000, 1, 0 /* explicit 0 */,
    std::numeric_limits<std::size_t>::max() - 8,
};
constexpr std::size_t private_sizes[] = {0, 0, 16, 100, 4096, 70000};

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

template <kind K>
auto make_body(harness& h, int serial) {
    if constexpr (K == kind::ints) {
        return [hp = &h, serial](weft::yielder<int, int>& y, int first) -> int {
            FUZZ_CHECK(first == hp->recs[serial].sent);
            return body_main<K>(*hp, serial, y);
        };
    } else {
        return [hp = &h, serial](typename traits<K>::yielder& y) -> typename traits<K>::ret {
            return body_main<K>(*hp, serial, y);
        };
    }
}

template <kind K, class Alloc>
void construct(slot& s, Alloc alloc, harness& h, int serial, const weft::coroutine_options& opts) {
    if constexpr (K == kind::plain)
        s.plain = plain_co(std::allocator_arg, std::move(alloc), make_body<K>(h, serial), opts);
    else if constexpr (K == kind::ints)
        s.ints = ints_co(std::allocator_arg, std::move(alloc), make_body<K>(h, serial), opts);
    else if constexpr (K == kind::strs)
        s.strs = strs_co(std::allocator_arg, std::move(alloc), make_body<K>(h, serial), opts);
    else
        s.gen = std::make_unique<gen_holder>(gen_t(std::allocator_arg, std::move(alloc), make_body<K>(h, serial), opts));
}

enum class alloc_kind : std::uint8_t { malloc, mmap, pooled };
constexpr const char* alloc_names[] = {"malloc", "mmap", "pooled"};

template <kind K>
void construct_with(slot& s, alloc_kind a, std::size_t guard_pages, harness& h, int serial,
                    const weft::coroutine_options& opts) {
    switch (a) {
    case alloc_kind::malloc: construct<K>(s, weft::malloc_stack{}, h, serial, opts); break;
    case alloc_kind::mmap: construct<K>(s, weft::mmap_stack{guard_pages}, h, serial, opts); break;
    case alloc_kind::pooled: construct<K>(s, weft::pooled_stack{h.pool}, h, serial, opts); break;
    }
}

void create(harness& h, int si) {
    const kind k = static_cast<kind>(1 + h.in.pick(4));
    const auto alloc = static_cast<alloc_kind>(h.in.pick(3));
    const std::size_t guard_pages = 1 + h.in.pick(3);
    const unsigned size_class = h.in.pick(std::size(size_classes));
    const std::size_t private_size = private_sizes[h.in.pick(std::size(private_sizes))];
    const unsigned name_kind = h.in.pick(4);
    const bool paint = h.in.pick(4) == 0;
    if (h.nrec >= max_coroutines) return;

    destroy_slot(h, si);
    slot& s = h.slots[si];
    const int serial = h.nrec++;
    record& r = h.recs[serial];
    r = record{};
    r.k = k;
    r.name = name_kind == 0 ? std::string() : name_kind == 3 ? std::string(300, 'n') + std::to_string(serial)
                                                             : "co" + std::to_string(serial);
    r.private_size = private_size;
    r.painted = paint;

    weft::coroutine_options opts{.name = r.name, .private_data_size = private_size, .paint_stack = paint};
    if (size_class != 3) opts.stack_size = size_classes[size_class];
    // stack_size 0 means weft::default_stack_size.
    const std::size_t wanted = opts.stack_size ? opts.stack_size : weft::default_stack_size;
    r.requested = wanted;

    // The outcome the allocators and the control-block placement promise.
    // A pool hands out its own size for any request up to it (and fails at
    // its limit), and maps larger requests outside the pool.
    const bool overflow = wanted > std::numeric_limits<std::size_t>::max() / 2;
    const bool pooled = alloc == alloc_kind::pooled && wanted <= pool_stack_size;
    const bool at_limit = pooled && h.pooled_in_use >= pool_max_stacks;
    std::size_t usable = 0, overhead = 0;
    if (!overflow) {
        usable = alloc == alloc_kind::malloc ? round_up(wanted, 16)
                 : pooled                    ? pool_stack_size
                                             : round_up(wanted, weft::page_size());
        overhead = r.name.size() + 1 + private_size;
    }
    const bool must_fail = !overflow && !at_limit && usable < overhead + 1024;
    const bool runnable = !overflow && !at_limit && usable >= overhead + min_runnable_room;

    const std::int64_t co_before = weft::stats::live_coroutines();
    const std::int64_t st_before = weft::stats::live_stacks();
    bool created = false;
    try {
        switch (k) {
        case kind::plain: construct_with<kind::plain>(s, alloc, guard_pages, h, serial, opts); break;
        case kind::ints: construct_with<kind::ints>(s, alloc, guard_pages, h, serial, opts); break;
        case kind::strs: construct_with<kind::strs>(s, alloc, guard_pages, h, serial, opts); break;
        case kind::gen: construct_with<kind::gen>(s, alloc, guard_pages, h, serial, opts); break;
        case kind::none: break;
        }
        created = true;
        FUZZ_CHECK(!overflow && !at_limit && !must_fail);
    } catch (const weft::coroutine_error& e) {
        FUZZ_CHECK(e.code() == weft::coroutine_errc::stack_too_small);
        FUZZ_CHECK(!overflow && !at_limit && !runnable);
        FUZZ_CHECK(r.name.empty() ? mentions(e.what(), "a coroutine") : names_ok(e.what(), r));
    } catch (const weft::stack_pool_error& e) {
        FUZZ_CHECK(at_limit);
        FUZZ_CHECK(e.code() == std::error_code(ENOMEM, std::generic_category()));
        FUZZ_CHECK(e.limit() == weft::stack_pool_error::limit_kind::max_stacks);
        FUZZ_CHECK(e.requested_size() == wanted);
    } catch (const weft::stack_error& e) {
        FUZZ_CHECK(overflow);
        FUZZ_CHECK(e.code() == std::error_code(EOVERFLOW, std::generic_category()));
        FUZZ_CHECK(e.requested_size() == wanted);
    }
    trace("  create %d: kind %d, %s stack of %zu, private %zu, name '%s': %s", serial, static_cast<int>(k),
          alloc_names[static_cast<int>(alloc)], opts.stack_size, private_size, r.name.c_str(),
          !created ? "refused" : runnable ? "runnable" : "created, too small to run");
    if (!created) {
        FUZZ_CHECK(weft::stats::live_coroutines() == co_before);
        FUZZ_CHECK(weft::stats::live_stacks() == st_before);
        return;
    }
    FUZZ_CHECK(weft::stats::live_coroutines() == co_before + 1);
    FUZZ_CHECK(weft::stats::live_stacks() == st_before + 1);
    s.k = k;
    s.serial = serial;
    r.exists = true;
    r.runnable = runnable;
    r.pooled = pooled;
    if (pooled) ++h.pooled_in_use;
    r.state = weft::coroutine_state::created;
}

// query() checks the observers of a coroutine against the model.
void query(harness& h, int si) {
    slot& s = h.slots[si];
    if (s.k == kind::none || s.k == kind::gen) return;
    auto check = [&](auto& co) {
        if (s.serial < 0) {
            FUZZ_CHECK(!co && !co.ref());
            for (int op = 0; op < 5; ++op) {
                try {
                    switch (op) {
                    case 0: (void)co.state(); break;
                    case 1: (void)co.done(); break;
                    case 2: (void)co.name(); break;
                    case 3: (void)co.private_data(); break;
                    default: (void)co.stack_high_water(); break;
                    }
                    violated("observer of an empty handle did not throw", __LINE__);
                } catch (const weft::coroutine_error& e) {
                    FUZZ_CHECK(e.code() == weft::coroutine_errc::empty_handle);
                    FUZZ_CHECK(mentions(e.what(), "empty"));
                }
            }
            co.reset();  // harmless on an empty handle
            return;
        }
        const record& r = h.recs[s.serial];
        FUZZ_CHECK(co && co.ref());
        FUZZ_CHECK(co.state() == r.state && co.ref().state() == r.state);
        FUZZ_CHECK(co.done() == (r.state == weft::coroutine_state::done));
        FUZZ_CHECK(co.name() == r.name && co.ref().name() == r.name);
        const weft::stack_view st = co.ref().stack();
        FUZZ_CHECK(st && st.size >= r.requested);
        const auto pd = co.private_data();
        FUZZ_CHECK(pd.size() == r.private_size);
        FUZZ_CHECK(pd.empty() || st.contains(pd.data()));
        for (std::size_t i = 0; i < pd.size(); ++i) {
            const bool marked = r.started && i < 8;
            FUZZ_CHECK(pd[i] == (marked ? static_cast<std::byte>(s.serial + static_cast<int>(i)) : std::byte{0}));
        }
        const std::size_t hw = co.stack_high_water();
        if (!r.painted) FUZZ_CHECK(hw == 0);
        if (r.painted) FUZZ_CHECK(hw > 0 && hw <= st.size);
    };
    auto check_result = [&](auto& co, const auto& expected) {
        if (s.serial < 0) {
            try {
                (void)co.result();
                violated("result() of an empty handle did not throw", __LINE__);
            } catch (const weft::coroutine_error& e) {
                FUZZ_CHECK(e.code() == weft::coroutine_errc::empty_handle);
            }
            return;
        }
        const record& r = h.recs[s.serial];
        try {
            const auto& v = co.result();
            FUZZ_CHECK(r.ev == event::returned && r.state == weft::coroutine_state::done);
            FUZZ_CHECK(v == expected);
        } catch (const weft::coroutine_error& e) {
            FUZZ_CHECK(e.code() == weft::coroutine_errc::no_result);
            FUZZ_CHECK(!(r.ev == event::returned && r.state == weft::coroutine_state::done));
            FUZZ_CHECK(names_ok(e.what(), r));
        }
    };
    switch (s.k) {
    case kind::plain: check(s.plain); break;
    case kind::ints:
        check(s.ints);
        check_result(s.ints, s.serial >= 0 ? h.recs[s.serial].ev_int : 0);
        break;
    case kind::strs:
        check(s.strs);
        check_result(s.strs, s.serial >= 0 ? h.recs[s.serial].ev_str : std::string());
        break;
    default: break;
    }
}

// move_slot() moves slot i's coroutine into slot j: by move assignment over
// j's coroutine when the kinds match, otherwise after destroying j's. The
// source keeps its moved-from (empty) handle.
void move_slot(harness& h, int i, int j, bool by_value) {
    if (i == j) return;
    slot& a = h.slots[i];
    slot& b = h.slots[j];
    if (a.k == kind::none) return;
    if (b.k != a.k) destroy_slot(h, j);
    // A move assignment over a live coroutine destroys it: the same checks.
    const std::int64_t co_before = weft::stats::live_coroutines();
    std::int64_t freed = 0;
    record* old = nullptr;
    bool expect_unwind = false;
    if (b.k != kind::none && b.serial >= 0) {
        old = &h.recs[b.serial];
        freed = 1 + old->inner_alive;
        expect_unwind = old->state == weft::coroutine_state::suspended;
    }
    switch (a.k) {
    case kind::plain: b.plain = std::move(a.plain); break;
    case kind::ints: b.ints = std::move(a.ints); break;
    case kind::strs: b.strs = std::move(a.strs); break;
    case kind::gen:
        if (by_value) {
            b.gen = std::make_unique<gen_holder>(std::move(a.gen->g));
        } else {
            b.gen = std::move(a.gen);
            a.gen = std::make_unique<gen_holder>(gen_t(std::move(b.gen->g)));
            std::swap(a.gen->g, b.gen->g);  // a keeps a moved-from generator; b keeps its iterator
        }
        break;
    case kind::none: break;
    }
    FUZZ_CHECK(weft::stats::live_coroutines() == co_before - freed);
    if (old) {
        FUZZ_CHECK(old->unwound == expect_unwind);
        FUZZ_CHECK(old->frames == 0 && old->yielder == nullptr && old->inner_alive == 0);
        forget(h, *old);
    }
    b.k = a.k;
    b.serial = a.serial;
    a.serial = -1;
}

void swap_slots(harness& h, int i, int j) {
    if (i == j) return;
    slot tmp;
    slot& a = h.slots[i];
    slot& b = h.slots[j];
    tmp.k = a.k;
    tmp.serial = a.serial;
    tmp.plain = std::move(a.plain);
    tmp.ints = std::move(a.ints);
    tmp.strs = std::move(a.strs);
    tmp.gen = std::move(a.gen);
    a.k = b.k;
    a.serial = b.serial;
    a.plain = std::move(b.plain);
    a.ints = std::move(b.ints);
    a.strs = std::move(b.strs);
    a.gen = std::move(b.gen);
    b.k = tmp.k;
    b.serial = tmp.serial;
    b.plain = std::move(tmp.plain);
    b.ints = std::move(tmp.ints);
    b.strs = std::move(tmp.strs);
    b.gen = std::move(tmp.gen);
}

void self_move(harness& h, int i) {
    slot& s = h.slots[i];
    switch (s.k) {
    case kind::plain: {
        plain_co& c = s.plain;
        s.plain = std::move(c);
        FUZZ_CHECK(static_cast<bool>(s.plain) == (s.serial >= 0));
        break;
    }
    case kind::ints: {
        ints_co& c = s.ints;
        s.ints = std::move(c);
        FUZZ_CHECK(static_cast<bool>(s.ints) == (s.serial >= 0));
        break;
    }
    case kind::strs: {
        strs_co& c = s.strs;
        s.strs = std::move(c);
        FUZZ_CHECK(static_cast<bool>(s.strs) == (s.serial >= 0));
        break;
    }
    default: break;
    }
}

// outside_misuse() yields from outside every coroutine: through a leaked
// yielder or this_coroutine::yield().
void outside_misuse(harness& h, int si, bool through_this_coroutine) {
    FUZZ_CHECK(!weft::this_coroutine::inside());
    if (through_this_coroutine) {
        try {
            weft::this_coroutine::yield();
            violated("this_coroutine::yield() outside any coroutine did not throw", __LINE__);
        } catch (const weft::coroutine_error& e) {
            FUZZ_CHECK(e.code() == weft::coroutine_errc::yield_outside);
        }
        return;
    }
    const slot& s = h.slots[si];
    if (s.k == kind::none || s.serial < 0) return;
    record& r = h.recs[s.serial];
    if (!r.yielder) return;
    FUZZ_CHECK(r.state == weft::coroutine_state::suspended);
    try {
        r.leaked_yield(r.yielder);
        violated("yield through a leaked yielder from outside did not throw", __LINE__);
    } catch (const weft::coroutine_error& e) {
        FUZZ_CHECK(e.code() == weft::coroutine_errc::yield_outside);
        FUZZ_CHECK(names_ok(e.what(), r));
        FUZZ_CHECK(mentions(e.what(), "suspended"));
    }
    FUZZ_CHECK(state_of(s, r) == weft::coroutine_state::suspended);
}

void run(harness& h) {
    for (int ops = 0; ops < max_outer_ops && !h.in.empty(); ++ops) {
        FUZZ_CHECK(h.running.empty() && h.depth == 0 && !weft::this_coroutine::inside());
        const unsigned op = h.in.pick(12);
        const int i = static_cast<int>(h.in.pick(slot_count));
        static constexpr const char* names[] = {"create", "resume", "resume", "destroy", "move", "self-move",
                                                "outside-yield", "resume-on-thread", "query", "swap", "resume", "resume"};
        trace("outer: %s slot %d", names[op], i);
        switch (op) {
        case 0: create(h, i); break;
        case 1:
        case 2: drive(h, i, h.in.value()); break;
        case 3: destroy_slot(h, i); break;
        case 4: {
            const int j = static_cast<int>(h.in.pick(slot_count));
            move_slot(h, i, j, h.in.pick(2) == 0);
            break;
        }
        case 5: self_move(h, i); break;
        case 6: outside_misuse(h, i, h.in.pick(2) == 0); break;
        case 7: drive_on_thread(h, i, h.in.value()); break;
        case 8: query(h, i); break;
        case 9: swap_slots(h, i, static_cast<int>(h.in.pick(slot_count))); break;
        default: drive(h, i, h.in.value()); break;
        }
    }
    for (int i = 0; i < slot_count; ++i) destroy_slot(h, i);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::int64_t coroutines = weft::stats::live_coroutines();
    const std::int64_t stacks = weft::stats::live_stacks();
    {
        auto h = std::make_unique<harness>(data, size);
        run(*h);
        for (const record& r : h->recs) FUZZ_CHECK(!r.exists);
        FUZZ_CHECK(h->pooled_in_use == 0);
        const weft::stack_pool::statistics st = h->pool.stats();
        FUZZ_CHECK(st.in_use == 0 && st.unpooled_in_use == 0);
    }
    FUZZ_CHECK(weft::stats::live_coroutines() == coroutines);
    FUZZ_CHECK(weft::stats::live_stacks() == stacks);
    return 0;
}

#ifdef WEFT_FUZZ_REPLAY_MAIN
// main() runs each input file named on the command line (a directory means
// every regular file in it, in name order) once.
int main(int argc, char** argv) {
    std::vector<std::filesystem::path> inputs;
    for (int a = 1; a < argc; ++a) {
        const std::filesystem::path p(argv[a]);
        if (std::filesystem::is_directory(p)) {
            for (const auto& e : std::filesystem::directory_iterator(p))
                if (e.is_regular_file()) inputs.push_back(e.path());
        } else {
            inputs.push_back(p);
        }
    }
    std::sort(inputs.begin(), inputs.end());
    if (inputs.empty()) {
        std::cerr << "usage: " << argv[0] << " FILE|DIR...\n";
        return 2;
    }
    for (const auto& p : inputs) {
        std::ifstream in(p, std::ios::binary);
        const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (!in.good() && !in.eof()) {
            std::cerr << "cannot read " << p << "\n";
            return 2;
        }
        (void)LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    }
    std::cout << "replayed " << inputs.size() << " input(s)\n";
    return 0;
}
#endif
