// signal.cpp: weft/io/signal.hpp. Signals become waits through one
// process-wide handler, per-signal counters and one eventfd.
//
//   IO-S1  A delivery of signal s adds one to counts[s] (in the handler,
//          before it writes the eventfd). A signal_set keeps, per signal,
//          seen[s]: the count it has reported up to, first the count when
//          the set was made. s is pending in the set while counts[s] >
//          seen[s]; a take, under the set's lock (IO-S2), sets seen[s] to
//          counts[s] (all the deliveries so far: they are coalesced), so
//          each delivery is reported once per set, by one
//          wait, and to every set independently. The counters are the truth;
//          the eventfd only wakes.
//   IO-S2  The waiters of a set wait in its queue `q`, under its spin lock
//          `mu`; every take() (IO-S1) happens under `mu` too. One process-wide
//          thread, the pump, is the only reader of the eventfd: it waits for
//          the eventfd with poll(2), drains it, and only then looks at every
//          live set under its `mu`: while the set has a pending signal and a
//          waiter that it can claim (WAITER-V1), it takes the signal for that
//          waiter and hands it over in the waiter's `code` (WAITER-V2). A
//          waiter checks its set (take()) under `mu` before it links its node.
//          So a delivery, whose counter is written before the eventfd, is
//          either seen by the waiter's check, or seen by a pump round that
//          begins after the waiter linked: none is left pending while a
//          waiter of its set sleeps. A set's queue is an ordinary wait
//          queue: select() links a node there like any other waiter's
//          (weft/io/select.hpp), and a waiter that does not run (a task of a
//          runtime that nobody drives) delays no other.
//   IO-S3  The pump is started by the first signal_set of the process (and
//          again by the first one in a child after fork(), which has no
//          pump), with every signal blocked, and never ends. The sets it
//          looks at are in a registry (under `sets_mu`, taken before any
//          set's `mu`); a set leaves it in its destructor, so the pump never
//          touches a set that is gone.
//
// A handler running on another thread may write the eventfd at any time, so
// the eventfd is never closed.

#include "weft/io/signal.hpp"

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>

#include <array>
#include <cassert>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <string>

#include "reactor.hpp"
#include "weft/io/select.hpp"

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
pid_t pump_pid = 0;            // the process whose pump runs (IO-S3); under reg_mu

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

}  // namespace

struct signal_set::state {
    std::uint64_t mask = 0;
    std::array<std::uint64_t, NSIG> seen{};           // IO-S1; under mu (set before the state is shared)
    weft::spin_lock mu;                               // IO-S2: q, seen, every take()
    weft::wait_queue q{weft::wait_queue::off_stack};  // IO-S2: the waiters
    state* prev = nullptr;                            // the registry's list (IO-S3)
    state* next = nullptr;

    // pending() is the lowest signal of the set that take() would report,
    // or 0. Under mu.
    [[nodiscard]] int pending() const noexcept {
        for (int sig = 1; sig <= max_signal; ++sig)
            if ((mask >> (sig - 1) & 1) &&
                seen[static_cast<std::size_t>(sig)] < slots[static_cast<std::size_t>(sig)].count.load(std::memory_order_seq_cst))
                return sig;
        return 0;
    }
    // take() is a pending signal, taken (IO-S1: every delivery so far is
    // coalesced into it), or 0. Under mu (IO-S2).
    int take() noexcept {
        const int sig = pending();
        if (sig) seen[static_cast<std::size_t>(sig)] = slots[static_cast<std::size_t>(sig)].count.load(std::memory_order_seq_cst);
        return sig;
    }
};

namespace {

// The live sets (IO-S3); never destroyed: the pump outlives static destruction.
struct set_registry {
    std::mutex mu;  // sets_mu: taken before any set's mu
    signal_set::state* head = nullptr;
};
set_registry& the_sets() {
    static set_registry* r = new set_registry;
    return *r;
}

// deliver() is one pump round after a drain (IO-S2): every set's pending
// signals go to the waiters it can claim, one signal each; they are woken
// after the set's lock is released.
void deliver() noexcept {
    set_registry& reg = the_sets();
    std::lock_guard g(reg.mu);
    for (signal_set::state* st = reg.head; st; st = st->next) {
        weft::detail::intrusive_fifo<weft::wait_node, weft::detail::fifo_link<weft::wait_node, &weft::wait_node::next>>
            claimed;
        {
            std::lock_guard sg(st->mu);
            while (st->pending()) {
                weft::wait_node* n = st->q.pop_claimed();
                if (!n) break;
                n->w->code = st->take();  // WAITER-V2: after the claim, before wake()
                n->w->fired = n->index;
                claimed.push_back(n);
            }
        }
        weft::wake_all(claimed.front());
    }
}

// pump() is the pump thread's body (IO-S2, IO-S3).
void pump(int fd) noexcept {
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, -1) < 0) continue;  // EINTR (every signal is blocked here), ENOMEM: again
        std::uint64_t v = 0;
        while (::read(fd, &v, sizeof v) == static_cast<ssize_t>(sizeof v)) {
        }
        deliver();
    }
}

// start_pump() starts the pump of this process if it has none. Under reg_mu.
// Throws std::system_error if the thread cannot be made.
void start_pump(int fd) {
    if (pump_pid == ::getpid()) return;
    sigset_t all, old;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &old);  // the pump inherits it: no handler runs there
    pthread_t th;
    const int rc = ::pthread_create(
        &th, nullptr,
        [](void* arg) -> void* {
            pump(static_cast<int>(reinterpret_cast<std::intptr_t>(arg)));
            return nullptr;
        },
        reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)));
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (rc != 0)
        throw std::system_error(std::error_code(rc, std::system_category()),
                                "weft::io::signal_set: cannot start the signal thread");
    ::pthread_detach(th);
    pump_pid = ::getpid();
}

}  // namespace

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
            start_pump(wake_fd.load(std::memory_order_relaxed));  // IO-S3
        } catch (...) {
            release(done);
            throw;
        }
        // IO-S1: deliveries from here on are this set's (the handler is in place).
        for (int sig = 1; sig <= max_signal; ++sig)
            if (mask >> (sig - 1) & 1)
                st->seen[static_cast<std::size_t>(sig)] =
                    slots[static_cast<std::size_t>(sig)].count.load(std::memory_order_seq_cst);
    }
    {
        set_registry& reg = the_sets();
        std::lock_guard g(reg.mu);
        st->next = reg.head;
        if (reg.head) reg.head->prev = st.get();
        reg.head = st.get();
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
    {
        set_registry& reg = the_sets();
        std::lock_guard g(reg.mu);  // IO-S3: the pump is not looking at it from here on
        (s_->prev ? s_->prev->next : reg.head) = s_->next;
        if (s_->next) s_->next->prev = s_->prev;
    }
    assert(s_->q.empty() && "weft::io::signal_set destroyed while a task or thread waits on it");
    std::lock_guard g(reg_mu);
    release(s_->mask);
}

bool signal_set::contains(int sig) const noexcept {
    return s_ && sig > 0 && sig <= max_signal && (s_->mask >> (sig - 1) & 1);
}

int signal_set::try_wait() noexcept {
    if (!s_) return 0;
    std::lock_guard g(s_->mu);
    return s_->take();
}

int signal_set::wait(std::error_code& ec, clock::time_point deadline) {
    ec.clear();
    if (!s_) {
        ec = std::make_error_code(std::errc::bad_file_descriptor);
        return 0;
    }
    state& st = *s_;
    weft::detail::stable<weft::one_wait> held;  // WAITER-V4
    weft::waiter& w = held->w;
    {
        std::lock_guard g(st.mu);
        if (const int sig = st.take()) return sig;  // IO-S2: checked before linking
        if (detail::expired(deadline)) {
            ec = detail::deadline_passed();
            return 0;
        }
        w.arm();
        st.q.push_back(&held->n);
    }
    const auto out = w.wait(deadline == no_deadline ? nullptr : &deadline);
    if (out == weft::waiter::outcome::notified) return w.code;  // the pump's hand-over (WAITER-V2)
    {
        std::lock_guard g(st.mu);  // WAITER-V3
        st.q.remove(&held->n);
    }
    if (out == weft::waiter::outcome::canceled) weft::throw_canceled();
    ec = detail::deadline_passed();
    return 0;
}

// The select case (weft/io/select.hpp): its hooks run under the set's mu
// (CHAN-K5); the pump claims its node like any waiter's (IO-S2).
namespace detail {
namespace {
signal_set::state& state_of(void* c) noexcept {
    return *static_cast<signal_set::state*>(static_cast<signal_core*>(c)->set);
}
bool signal_poll(void* c, weft::waiter*& /*wake*/) {
    auto* k = static_cast<signal_core*>(c);
    k->sig = state_of(c).take();
    return k->sig != 0;
}
void signal_link(void* c, weft::wait_node* n) { state_of(c).q.push_back(n); }
void signal_unlink(void* c, weft::wait_node* n) noexcept { state_of(c).q.remove(n); }
constexpr weft::detail::select_hooks signal_hooks{&signal_poll, &signal_link, &signal_unlink};
}  // namespace

signal_core::signal_core(signal_set& s) : set(s.s_.get()) {
    if (!set)
        throw std::system_error(std::make_error_code(std::errc::bad_file_descriptor),
                                "weft::io::on_signal: the signal_set is empty (moved from)");
}

void signal_core::fill(weft::detail::select_entry& e) noexcept {
    e.ch = &static_cast<signal_set::state*>(set)->mu;
    e.c = this;
    e.hooks = &signal_hooks;
}

void signal_core::finish(int code) noexcept {
    if (!sig) sig = code;  // handed over by the pump (WAITER-V2)
}
}  // namespace detail

int signal_set::wait(clock::time_point deadline) {
    return detail::or_throw("weft::io::signal_set::wait", [&](std::error_code& ec) { return wait(ec, deadline); });
}

}  // namespace weft::io
