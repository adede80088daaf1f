// trace.cpp: the task trace (observe.hpp, OBSERVE-O3 - OBSERVE-O5;
// docs/debugging.md): events recorded per worker while the runtime runs, in
// a ring of the last trace_events, written as Chrome / Perfetto trace-event
// JSON when it stops, or from the running runtime (runtime::write_trace(),
// the trace signal). Each worker writes its own ring, so recording takes no
// lock; readers on other threads take each slot's seqlock (OBSERVE-O4).

#include "observe.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

#include "weft/detail/task_record.hpp"

namespace weft::detail {

namespace {

using word = std::atomic_ref<std::uint64_t>;

std::uint64_t pack(std::uint32_t arg, trace_event::kind k) noexcept { return std::uint64_t{arg} << 8 | k; }

}  // namespace

trace_buffer::trace_buffer(std::size_t cap) : cap_(cap) {
    // calloc: a large ring comes from mmap, whose pages cost nothing until
    // the writer reaches them (as the old growing buffer did).
    ring_ = static_cast<trace_slot*>(std::calloc(cap_, sizeof(trace_slot)));
    if (!ring_) throw std::bad_alloc();
}

trace_buffer::~trace_buffer() { std::free(ring_); }

// push() is OBSERVE-O4's writer: one writer at a time (its worker's thread,
// or the holder of `mu`).
void trace_buffer::push(const trace_event& e) noexcept {
    const std::uint64_t k = written_;
    trace_slot& s = ring_[at_];
    word(s.seq).store(2 * k + 1, std::memory_order_relaxed);
    // Release stores of the fields: each is ordered after the odd word, so
    // a reader that sees any of them sees the slot as being rewritten.
    word(s.t0).store(static_cast<std::uint64_t>(e.t0), std::memory_order_release);
    word(s.t1).store(static_cast<std::uint64_t>(e.t1), std::memory_order_release);
    word(s.id).store(e.id, std::memory_order_release);
    word(s.ak).store(pack(e.arg, e.what), std::memory_order_release);
    word(s.seq).store(2 * k + 2, std::memory_order_release);
    written_ = k + 1;
    if (++at_ == cap_) at_ = 0;
    head_.store(k + 1, std::memory_order_release);
}

// publish_open() is OBSERVE-O4's writer for the open run span.
void trace_buffer::publish_open(std::int64_t start, std::uint64_t id) noexcept {
    const std::uint64_t q = open_seq_;  // only this thread writes it
    word(open_seq_).store(q + 1, std::memory_order_relaxed);
    std::atomic_ref<std::int64_t>(open_start_).store(start, std::memory_order_release);
    word(open_id_).store(id, std::memory_order_release);
    word(open_seq_).store(q + 2, std::memory_order_release);
}

std::uint64_t trace_buffer::read(std::vector<trace_event>& out, std::int64_t now_ns) const {
    const std::uint64_t h = head_.load(std::memory_order_acquire);
    const std::uint64_t first = h > cap_ ? h - cap_ : 0;
    std::uint64_t lost = first;
    out.reserve(out.size() + (h - first) + 1);
    for (std::uint64_t k = first; k < h; ++k) {
        trace_slot& s = ring_[k % cap_];
        const std::uint64_t q = word(s.seq).load(std::memory_order_acquire);
        // Acquire loads of the fields: the word's second read is ordered
        // after them, and sees at least the odd word of a writer whose field
        // store one of them read.
        trace_event e{};
        e.t0 = static_cast<std::int64_t>(word(s.t0).load(std::memory_order_acquire));
        e.t1 = static_cast<std::int64_t>(word(s.t1).load(std::memory_order_acquire));
        e.id = word(s.id).load(std::memory_order_acquire);
        const std::uint64_t ak = word(s.ak).load(std::memory_order_acquire);
        if (q != 2 * k + 2 || word(s.seq).load(std::memory_order_relaxed) != q) {
            ++lost;  // rewritten under us (OBSERVE-O4)
            continue;
        }
        e.arg = static_cast<std::uint32_t>(ak >> 8);
        e.what = static_cast<trace_event::kind>(ak & 0xff);
        out.push_back(e);
    }
    // The open run span: retried while the writer moves it (a switch is
    // far shorter than a few reads).
    auto& self = const_cast<trace_buffer&>(*this);
    for (int attempt = 0; attempt < 64; ++attempt) {
        const std::uint64_t q = word(self.open_seq_).load(std::memory_order_acquire);
        const std::int64_t start = std::atomic_ref<std::int64_t>(self.open_start_).load(std::memory_order_acquire);
        const std::uint64_t id = word(self.open_id_).load(std::memory_order_acquire);
        if ((q & 1) != 0 || word(self.open_seq_).load(std::memory_order_relaxed) != q) continue;
        if (start >= 0) out.push_back({start, std::max(start, now_ns), id, 1, trace_event::run});
        break;
    }
    return lost;
}

void trace_buffer::read_names(std::vector<std::pair<std::uint64_t, std::string>>& out) const {
    std::lock_guard g(names_mu);
    out.insert(out.end(), names_.begin(), names_.end());
}

void trace_buffer::name(const task_record* t) noexcept {
    // Called once per task, at its spawn (every task is spawned after the
    // trace began); a ring like the events: past cap_ names a new one
    // replaces the oldest, and the writer calls a task whose name is gone
    // "task <id>" (a live task's name comes from the registry then).
    if (t->name.empty()) return;
    try {
        std::string n(t->name);
        std::lock_guard g(names_mu);
        if (names_.size() < cap_) {
            names_.emplace_back(t->id, std::move(n));
        } else {
            names_[names_at_] = {t->id, std::move(n)};
            if (++names_at_ == cap_) names_at_ = 0;
        }
    } catch (...) {
    }
}

void trace_buffer::begin_run(const task_record* t) noexcept {
    const std::int64_t now = steady_now_ns();
    if (run_start_ >= 0) push({run_start_, now, run_id_, 0, trace_event::run});
    run_start_ = now;
    run_id_ = t->id;
    publish_open(now, t->id);
}

void trace_buffer::end_run() noexcept {
    if (run_start_ < 0) return;
    push({run_start_, steady_now_ns(), run_id_, 0, trace_event::run});
    run_start_ = -1;
    publish_open(-1, 0);
}

void trace_buffer::begin_sleep() noexcept { sleep_start_ = steady_now_ns(); }

void trace_buffer::end_sleep() noexcept {
    if (sleep_start_ < 0) return;
    push({sleep_start_, steady_now_ns(), 0, 0, trace_event::sleep});
    sleep_start_ = -1;
}

void trace_buffer::instant(trace_event::kind k, std::uint64_t id, std::uint32_t arg) noexcept {
    push({steady_now_ns(), 0, id, arg, k});
}

namespace {

// json_string() writes s as a JSON string (quotes, escapes, control bytes).
void json_string(std::FILE* f, std::string_view s) {
    std::fputc('"', f);
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            std::fputc('\\', f);
            std::fputc(ch, f);
        } else if (c < 0x20) {
            std::fprintf(f, "\\u%04x", c);
        } else {
            std::fputc(ch, f);
        }
    }
    std::fputc('"', f);
}

// span_dur() is a span's length written 1 ns short: a span that ends where
// the next begins (a hand-off) would otherwise overlap it by a rounding
// error in viewers that add ts and dur in floating point, and speedscope
// then nests every later span inside it.
std::int64_t span_dur(const trace_event& e) noexcept { return e.t1 - e.t0 > 1 ? e.t1 - e.t0 - 1 : 0; }

// Microseconds with three decimals: the trace-event format's unit.
void micros(std::FILE* f, std::int64_t ns) {
    if (ns < 0) ns = 0;
    std::fprintf(f, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
}

struct name_table {
    std::vector<std::pair<std::uint64_t, std::string>> v;
    const std::string* find(std::uint64_t id) const {
        auto it = std::lower_bound(v.begin(), v.end(), id, [](const auto& p, std::uint64_t k) { return p.first < k; });
        return it != v.end() && it->first == id ? &it->second : nullptr;
    }
};

void task_name(std::FILE* f, const name_table& names, std::uint64_t id) {
    if (const std::string* n = names.find(id)) {
        json_string(f, *n);
    } else {
        std::fprintf(f, "\"task %" PRIu64 "\"", id);
    }
}

}  // namespace

bool write_trace(const std::string& path, unsigned workers, const std::vector<const trace_buffer*>& buffers,
                 std::int64_t origin_ns, bool live, std::vector<std::pair<std::uint64_t, std::string>> extra) noexcept {
    try {
        name_table names;
        names.v = std::move(extra);
        std::uint64_t dropped = 0;
        // The events first, then the names: a task spawned while the events
        // are read has its name recorded before its spawn event is pushed.
        const std::int64_t now = steady_now_ns();
        std::vector<std::vector<trace_event>> events(buffers.size());
        for (std::size_t i = 0; i < buffers.size(); ++i) dropped += buffers[i]->read(events[i], now);
        for (const trace_buffer* b : buffers) b->read_names(names.v);
        std::stable_sort(names.v.begin(), names.v.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        names.v.erase(std::unique(names.v.begin(), names.v.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
                      names.v.end());

        const std::string target = live ? path + ".tmp" : path;
        std::FILE* f = std::fopen(target.c_str(), "w");
        if (!f) {
            std::fprintf(stderr, "weft: cannot write the task trace to %s: %s\n", target.c_str(), std::strerror(errno));
            return false;
        }
        std::fputs("{\"traceEvents\":[\n", f);
        std::fputs("{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":\"weft runtime\"}}", f);
        for (unsigned i = 0; i < buffers.size(); ++i) {
            std::fprintf(f, ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"name\":\"thread_name\",\"args\":{\"name\":", i);
            if (i < workers)
                std::fprintf(f, "\"worker %u\"}}", i);
            else
                std::fputs("\"other threads\"}}", f);
            std::fprintf(f, ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%u}}", i, i);
        }
        for (unsigned i = 0; i < buffers.size(); ++i) {
            for (const trace_event& e : events[i]) {
                std::fprintf(f, ",\n{\"pid\":1,\"tid\":%u,\"ts\":", i);
                micros(f, e.t0 - origin_ns);
                switch (e.what) {
                case trace_event::run:
                    std::fputs(",\"ph\":\"X\",\"dur\":", f);
                    micros(f, span_dur(e));
                    std::fputs(",\"cat\":\"task\",\"name\":", f);
                    task_name(f, names, e.id);
                    std::fprintf(f, ",\"args\":{\"id\":%" PRIu64 "%s}}", e.id, e.arg ? ",\"open\":true" : "");
                    break;
                case trace_event::sleep:
                    std::fputs(",\"ph\":\"X\",\"dur\":", f);
                    micros(f, span_dur(e));
                    std::fputs(",\"cat\":\"sleep\",\"name\":\"asleep\"}", f);
                    break;
                case trace_event::spawn:
                    std::fprintf(f, ",\"ph\":\"i\",\"s\":\"t\",\"cat\":\"spawn\",\"name\":\"spawn\",\"args\":{\"id\":%" PRIu64 ",\"task\":", e.id);
                    task_name(f, names, e.id);
                    std::fputs("}}", f);
                    break;
                case trace_event::wake:
                    std::fprintf(f, ",\"ph\":\"i\",\"s\":\"t\",\"cat\":\"wake\",\"name\":\"wake\",\"args\":{\"id\":%" PRIu64 "}}", e.id);
                    break;
                case trace_event::steal:
                    std::fprintf(f, ",\"ph\":\"i\",\"s\":\"t\",\"cat\":\"steal\",\"name\":\"steal\",\"args\":{\"victim\":%" PRIu64 ",\"tasks\":%u}}",
                                 e.id, e.arg);
                    break;
                case trace_event::timers:
                    std::fprintf(f, ",\"ph\":\"i\",\"s\":\"t\",\"cat\":\"timers\",\"name\":\"timers\",\"args\":{\"fired\":%" PRIu64 "}}", e.id);
                    break;
                }
            }
        }
        std::fprintf(f, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"workers\":%u,\"dropped\":%" PRIu64 "}}\n", workers, dropped);
        const bool ok = !std::ferror(f);
        if (std::fclose(f) != 0 || !ok) {
            std::fprintf(stderr, "weft: writing the task trace to %s failed\n", target.c_str());
            return false;
        }
        if (live && std::rename(target.c_str(), path.c_str()) != 0) {
            std::fprintf(stderr, "weft: cannot move the task trace to %s: %s\n", path.c_str(), std::strerror(errno));
            return false;
        }
        return true;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft: cannot write the task trace to %s: %s\n", path.c_str(), e.what());
        return false;
    }
}

// ---- the trace signal (OBSERVE-O5) ------------------------------------------------------
//
// The pipe and the thread exist while some runtime is registered: the last
// to leave closes the pipe's write end (after no handler can still write to
// it: `in_handler`), which ends the thread, and closes the read end once it
// has joined the thread, so a process that used a trace signal and stopped
// its runtimes has no descriptor or thread of it left (valgrind's fd check).

namespace {

struct trace_signals {
    std::mutex mu;  // held while fn runs, and to change the entries
    struct entry {
        int sig;
        void* ctx;
        void (*fn)(void*);
    };
    std::vector<entry> entries;
    bool installed[NSIG] = {};
    int fds[2] = {-1, -1};  // while `thread` runs
    std::thread thread;
};

// Never destroyed: the thread may use it while the process exits.
trace_signals& signals() {
    static trace_signals* s = new trace_signals;
    return *s;
}

// The pipe's write end, for the handler (non-blocking: a flood of signals
// fills the pipe and the rest are dropped; one write is enough), and the
// handlers that may be using it. Both seq_cst: a closer that stored -1 and
// then read in_handler 0 knows every later handler reads -1.
std::atomic<int> signal_pipe{-1};
std::atomic<int> in_handler{0};

extern "C" void on_trace_signal(int sig) {
    // OBSERVE-O5: one write(), errno kept; no lock, no allocation.
    const int saved = errno;
    in_handler.fetch_add(1, std::memory_order_seq_cst);
    const int fd = signal_pipe.load(std::memory_order_seq_cst);
    if (fd >= 0) {
        const auto b = static_cast<unsigned char>(sig);
        [[maybe_unused]] const ssize_t n = ::write(fd, &b, 1);
    }
    in_handler.fetch_sub(1, std::memory_order_seq_cst);
    errno = saved;
}

void signal_thread_main(int fd) {
    for (;;) {
        unsigned char b = 0;
        const ssize_t n = ::read(fd, &b, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // the write end closed: the last runtime left
        trace_signals& s = signals();
        std::lock_guard g(s.mu);
        for (const auto& e : s.entries)
            if (e.sig == b) e.fn(e.ctx);
    }
}

}  // namespace

void trace_signal_register(int sig, void* ctx, void (*fn)(void*)) {
    trace_signals& s = signals();
    std::lock_guard g(s.mu);
    if (!s.thread.joinable()) {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "weft: trace signal: pipe");
        (void)::fcntl(fds[1], F_SETFL, O_NONBLOCK);
        // The thread starts with every signal blocked: it never runs a
        // handler itself (the program's signals are not its business).
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        try {
            s.thread = std::thread(signal_thread_main, fds[0]);
        } catch (...) {
            pthread_sigmask(SIG_SETMASK, &old, nullptr);
            ::close(fds[0]);
            ::close(fds[1]);
            throw;
        }
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
        s.fds[0] = fds[0];
        s.fds[1] = fds[1];
        signal_pipe.store(fds[1], std::memory_order_seq_cst);
    }
    if (!s.installed[sig]) {
        struct sigaction sa {};
        sa.sa_handler = &on_trace_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (::sigaction(sig, &sa, nullptr) != 0)
            throw std::system_error(errno, std::generic_category(), "weft: trace signal: sigaction");
        s.installed[sig] = true;
    }
    s.entries.push_back({sig, ctx, fn});
}

void trace_signal_unregister(void* ctx) noexcept {
    trace_signals& s = signals();
    std::thread last;
    int read_end = -1;
    {
        std::lock_guard g(s.mu);
        std::erase_if(s.entries, [ctx](const auto& e) { return e.ctx == ctx; });
        if (!s.entries.empty() || !s.thread.joinable()) return;
        // The last one: no handler writes to the pipe once this returns.
        signal_pipe.store(-1, std::memory_order_seq_cst);
        while (in_handler.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
        ::close(s.fds[1]);  // the thread reads the end of the pipe
        read_end = s.fds[0];
        s.fds[0] = s.fds[1] = -1;
        last = std::move(s.thread);
    }
    // Joined outside the lock: the thread may be waiting for it, to handle
    // a byte it read before the end.
    last.join();
    ::close(read_end);
}

}  // namespace weft::detail
