// signal.cpp: weft/io/signal.hpp. Signals become waits through one
// process-wide handler, per-signal counters and one eventfd.
//
//   IO-S1  A delivery of signal s adds one to counts[s] (in the handler,
//          before it writes the eventfd). A signal_set keeps, per signal,
//          seen[s]: the count it has reported up to, first the count when
//          the set was made. s is pending in the set while counts[s] >
//          seen[s]; a wait takes it by a compare-exchange of seen[s] from
//          the value it read to counts[s] (all the deliveries so far: they
//          are coalesced), so each delivery is reported once per set, by one
//          wait, and to every set independently. The counters are the truth;
//          the eventfd only wakes.
//   IO-S2  One waiter at a time is the reader (`reading`, under mu): it
//          drains the eventfd and, while it drained nothing, waits for it to
//          become readable (io::handle's readable wait on a dup of the fd:
//          a task parks, a plain thread polls). Its turn ends when it
//          drained something, its wait ended, or it unwinds; the end of a
//          turn clears `reading` and notifies every other waiter under mu.
//          The others check their set under mu before they wait on cv, so a
//          delivery's counter (written before the eventfd) is either seen by
//          that check or followed by a turn's end that wakes them: no
//          delivery is left pending while every waiter sleeps.
//
//   IO-S3  A waiter that is not the reader waits on cv for at most
//          reader_lag (100 ms) at a time and then checks its set again. The
//          reader may be a task of a runtime that is not running now (one
//          without workers outside block_on / run_for); since the counters
//          are the truth, such a reader delays the other waiters by at most
//          reader_lag, never forever. (Only while two or more wait at once.)
//
// A handler running on another thread may write the eventfd at any time, so
// the eventfd is never closed; the dup each reader turn waits on is its own
// (a handle belongs to the runtime of its first waiter, and each turn may be
// a different runtime's task or a plain thread).

#include "weft/io/signal.hpp"

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <fcntl.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <string>

#include "reactor.hpp"
#include "weft/sync/condition_variable.hpp"

namespace weft::io {

namespace {

using detail::errno_code;

// Signals 1 .. 64 (NSIG is 65 on Linux); bit s - 1 of a mask is signal s.
constexpr int max_signal = NSIG - 1;
static_assert(max_signal <= 64, "a signal mask is one 64-bit word");

using info_handler = void (*)(int, siginfo_t*, void*);
using plain_handler = void (*)(int);

// One per signal. count is the handler's; chain_* say which handler the
// program had installed before (null: SIG_DFL, SIG_IGN or none), read by the
// handler; users and saved are guarded by reg_mu.
struct slot {
    std::atomic<std::uint64_t> count{0};
    std::atomic<info_handler> chain_info{nullptr};
    std::atomic<plain_handler> chain_plain{nullptr};
    int users = 0;
    struct sigaction saved {};
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "the handler needs lock-free counters");
static_assert(std::atomic<int>::is_always_lock_free);
static_assert(std::atomic<info_handler>::is_always_lock_free);

std::array<slot, NSIG> slots;  // constant-initialised: usable from any handler
std::atomic<int> wake_fd{-1};  // the eventfd; made once, never closed
std::mutex reg_mu;             // installs and restores dispositions
constexpr auto reader_lag = std::chrono::milliseconds(100);  // IO-S3

// The waiters' meeting place (IO-S2); never destroyed, as a waiter may
// outlive static destruction's order.
struct waiters {
    std::mutex mu;
    weft::condition_variable cv;
    bool reading = false;
};
waiters& the_waiters() {
    static waiters* w = new waiters;
    return *w;
}

extern "C" void on_signal(int sig, siginfo_t* info, void* uctx) {
    const int saved_errno = errno;
    if (sig > 0 && sig <= max_signal) {
        slot& s = slots[static_cast<std::size_t>(sig)];
        s.count.fetch_add(1, std::memory_order_seq_cst);  // IO-S1: before the eventfd
        const int fd = wake_fd.load(std::memory_order_acquire);
        if (fd >= 0) {
            const std::uint64_t one = 1;
            const ssize_t r = ::write(fd, &one, sizeof one);  // EAGAIN only at 2^64 - 2: then it is readable anyway
            (void)r;
        }
        if (info_handler f = s.chain_info.load(std::memory_order_acquire)) {
            f(sig, info, uctx);
        } else if (plain_handler g = s.chain_plain.load(std::memory_order_acquire)) {
            g(sig);
        }
    }
    errno = saved_errno;
}

[[noreturn]] void bad_signal(int sig, const char* why) {
    throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                            "weft::io::signal_set: signal " + std::to_string(sig) + " " + why);
}

void check_signal(int sig) {
    if (sig <= 0 || sig > max_signal) bad_signal(sig, "is not a signal number (1 .. NSIG - 1)");
    switch (sig) {
    case SIGKILL:
    case SIGSTOP:
        bad_signal(sig, "cannot be caught (SIGKILL, SIGSTOP)");
    case SIGSEGV:
    case SIGBUS:
    case SIGILL:
    case SIGFPE:
        bad_signal(sig, "is a fault (SIGSEGV, SIGBUS, SIGILL, SIGFPE): waiting for it is not supported");
    default:
        break;
    }
}

// release() gives up one use of each signal in mask, restoring the saved
// disposition of those that have no user left. Under reg_mu.
void release(std::uint64_t mask) noexcept {
    for (int sig = 1; sig <= max_signal; ++sig) {
        if (!(mask >> (sig - 1) & 1)) continue;
        slot& s = slots[static_cast<std::size_t>(sig)];
        if (--s.users != 0) continue;
        (void)::sigaction(sig, &s.saved, nullptr);
        s.chain_info.store(nullptr, std::memory_order_release);
        s.chain_plain.store(nullptr, std::memory_order_release);
    }
}

// acquire() takes one use of sig, installing the handler if it is the first.
// Under reg_mu. Throws std::system_error with what sigaction() said.
void acquire(int sig) {
    slot& s = slots[static_cast<std::size_t>(sig)];
    if (s.users == 0) {
        struct sigaction old {};
        if (::sigaction(sig, nullptr, &old) != 0)
            throw std::system_error(errno_code(), "weft::io::signal_set: sigaction " + std::to_string(sig));
        // The program's own handler is called after ours records the signal
        // (never ours: a disposition saved and restored by someone else).
        if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction == &on_signal) {
            old.sa_handler = SIG_DFL;
            old.sa_flags = 0;
        } else if (old.sa_flags & SA_SIGINFO) {
            s.chain_info.store(old.sa_sigaction, std::memory_order_release);
        } else if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
            s.chain_plain.store(old.sa_handler, std::memory_order_release);
        }
        struct sigaction ours {};
        ours.sa_sigaction = &on_signal;
        ours.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
        sigemptyset(&ours.sa_mask);
        if (::sigaction(sig, &ours, nullptr) != 0) {
            const std::error_code ec = errno_code();
            s.chain_info.store(nullptr, std::memory_order_release);
            s.chain_plain.store(nullptr, std::memory_order_release);
            throw std::system_error(ec, "weft::io::signal_set: sigaction " + std::to_string(sig));
        }
        s.saved = old;
    }
    ++s.users;
}

// drain() reads the eventfd until it is empty: true if it held something.
bool drain(int fd) noexcept {
    bool any = false;
    std::uint64_t v = 0;
    for (;;) {
        const ssize_t r = ::read(fd, &v, sizeof v);
        if (r == static_cast<ssize_t>(sizeof v)) {
            any = true;
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        return any;
    }
}

}  // namespace

struct signal_set::state {
    std::uint64_t mask = 0;
    std::array<std::atomic<std::uint64_t>, NSIG> seen{};  // IO-S1

    // take() is a pending signal, taken (IO-S1), or 0.
    int take() noexcept {
        for (int sig = 1; sig <= max_signal; ++sig) {
            if (!(mask >> (sig - 1) & 1)) continue;
            const std::uint64_t c = slots[static_cast<std::size_t>(sig)].count.load(std::memory_order_seq_cst);
            auto& s = seen[static_cast<std::size_t>(sig)];
            std::uint64_t was = s.load(std::memory_order_relaxed);
            while (was < c)
                if (s.compare_exchange_weak(was, c, std::memory_order_acq_rel)) return sig;
        }
        return 0;
    }
};

signal_set::signal_set(std::initializer_list<int> signals) : signal_set(std::span<const int>(signals.begin(), signals.size())) {}

signal_set::signal_set(std::span<const int> signals) {
    if (signals.empty())
        throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                                "weft::io::signal_set: no signals given");
    std::uint64_t mask = 0;
    for (int sig : signals) {
        check_signal(sig);
        mask |= std::uint64_t{1} << (sig - 1);
    }
    auto st = std::make_unique<state>();
    st->mask = mask;
    {
        std::lock_guard g(reg_mu);
        if (wake_fd.load(std::memory_order_relaxed) < 0) {
            const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
            if (fd < 0) throw std::system_error(errno_code(), "weft::io::signal_set: eventfd");
            wake_fd.store(fd, std::memory_order_release);
        }
        std::uint64_t done = 0;
        try {
            for (int sig = 1; sig <= max_signal; ++sig) {
                if (!(mask >> (sig - 1) & 1)) continue;
                acquire(sig);
                done |= std::uint64_t{1} << (sig - 1);
            }
        } catch (...) {
            release(done);
            throw;
        }
        // IO-S1: deliveries from here on are this set's (the handler is in place).
        for (int sig = 1; sig <= max_signal; ++sig)
            if (mask >> (sig - 1) & 1)
                st->seen[static_cast<std::size_t>(sig)].store(
                    slots[static_cast<std::size_t>(sig)].count.load(std::memory_order_seq_cst),
                    std::memory_order_relaxed);
    }
    s_ = std::move(st);
}

signal_set::signal_set(signal_set&& o) noexcept = default;

signal_set& signal_set::operator=(signal_set&& o) noexcept {
    if (this != &o) {
        signal_set gone(std::move(*this));
        s_ = std::move(o.s_);
    }
    return *this;
}

signal_set::~signal_set() {
    if (!s_) return;
    std::lock_guard g(reg_mu);
    release(s_->mask);
}

bool signal_set::contains(int sig) const noexcept {
    return s_ && sig > 0 && sig <= max_signal && (s_->mask >> (sig - 1) & 1);
}

int signal_set::try_wait() noexcept { return s_ ? s_->take() : 0; }

int signal_set::wait(std::error_code& ec, clock::time_point deadline) {
    ec.clear();
    if (!s_) {
        ec = std::make_error_code(std::errc::bad_file_descriptor);
        return 0;
    }
    waiters& w = the_waiters();
    for (;;) {
        if (const int sig = s_->take()) return sig;
        std::unique_lock lk(w.mu);
        if (const int sig = s_->take()) return sig;  // IO-S2: checked under mu
        if (detail::expired(deadline)) {
            ec = std::make_error_code(std::errc::timed_out);
            return 0;
        }
        if (w.reading) {
            // IO-S3: at most reader_lag, then check again without the reader.
            const auto slice = clock::now() + reader_lag;
            const bool last = deadline <= slice;
            if (w.cv.wait_until(lk, last ? deadline : slice) == std::cv_status::timeout && last) {
                lk.unlock();
                if (const int sig = s_->take()) return sig;
                ec = std::make_error_code(std::errc::timed_out);
                return 0;
            }
            continue;
        }
        // This waiter's turn as the reader (IO-S2).
        w.reading = true;
        lk.unlock();
        struct end_turn {
            waiters& w;
            ~end_turn() {
                {
                    std::lock_guard g(w.mu);
                    w.reading = false;
                }
                w.cv.notify_all();
            }
        } turn{w};
        const int fd = wake_fd.load(std::memory_order_acquire);
        std::error_code e;
        if (!drain(fd)) {
            const int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
            if (dup < 0) {
                ec = errno_code();
                return 0;
            }
            handle h(dup);
            // Edge-triggered in a task: the drain above saw it empty, and a
            // write since then is an edge (or found by the first poll).
            while (!(e = h.wait(interest::readable, deadline)) && !drain(fd)) {
            }
        }
        if (const int sig = s_->take()) return sig;
        if (e) {
            ec = e;
            return 0;
        }
    }
}

int signal_set::wait(clock::time_point deadline) {
    return detail::or_throw("weft::io::signal_set::wait", [&](std::error_code& ec) { return wait(ec, deadline); });
}

}  // namespace weft::io
