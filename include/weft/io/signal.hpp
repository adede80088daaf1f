// weft/io/signal.hpp: layer L6, POSIX signals as waits. A signal_set
// registers interest in some signals for the whole process; wait() parks
// the calling task (or blocks a plain thread) until one of them arrives.
//
//   weft::io::signal_set stop({SIGINT, SIGTERM});
//   weft::spawn([&] { int sig = stop.wait(); shut_down(sig); }).detach();
//
// No thread needs the signals blocked (no pthread_sigmask before the
// runtime starts): while a signal_set for a signal exists, weft's own
// handler is that signal's disposition (sigaction, SA_RESTART | SA_SIGINFO
// | SA_ONSTACK), whichever thread the kernel picks. The handler does only
// async-signal-safe work: it adds one to the signal's process-wide counter
// (a lock-free atomic) and writes to one process-wide non-blocking eventfd.
// One thread of weft's, started by the first signal_set of the process
// (every signal blocked there), reads that eventfd and hands each pending
// signal to one waiter of each set that has it; a waiting task parks and
// its worker runs other tasks. A set is also a select() case
// (io::on_signal, weft/io/select.hpp). src/io/signal.cpp (IO-S1 - IO-S3) and
// docs/io.md ("Signals") have the design.
//
// Delivery, per signal_set:
//   - every delivery of one of its signals after the set was made is seen by
//     this set exactly once, and independently by every other set that has
//     the signal (a broadcast, like Tokio's signal() streams); a delivery
//     that arrives while nobody waits stays pending in the set, and the next
//     wait() returns it at once;
//   - deliveries of one signal that are pending together are reported by
//     ONE wait() (coalesced; the kernel coalesces standard signals anyway);
//   - when several signals are pending, wait() returns the lowest number;
//   - several tasks or threads may wait on one set at once: each pending
//     signal goes to one of them.
//
// The disposition a signal had before its first signal_set (SIG_DFL,
// SIG_IGN or the program's own handler) is saved and restored when the last
// signal_set with that signal is destroyed. A handler the program had
// installed keeps being called meanwhile: weft's handler records the
// signal, then calls it (with the siginfo if it was an SA_SIGINFO handler;
// its sa_mask and flags such as SA_RESETHAND are not reproduced).
// The handler runs on the stack of whatever the kernel interrupted, a task's
// included (or on the thread's sigaltstack if it has one: SA_ONSTACK); a
// chained handler of the program's must fit there too.
// Changing a signal's disposition with sigaction() while a signal_set has
// it is the caller's race (weft restores what it saved).
//
// The eventfd, once made by the first signal_set, stays open for the rest
// of the process (a handler running on another thread may still write it).
#pragma once

#include <csignal>  // SIGINT, SIGTERM... for the callers
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <system_error>

#include "weft/config.hpp"
#include "weft/io/handle.hpp"

namespace weft::io {

namespace detail {
struct signal_core;
}

// signal_set is a set of signals to wait for. Move-only; a moved-from set
// is empty (its waits report bad_file_descriptor).
class WEFT_API signal_set {
public:
    // signal_set(signals) installs weft's handler for each signal that has
    // no signal_set yet (duplicates are allowed), and starts weft's signal
    // thread if the process has none. Throws std::system_error:
    // invalid_argument for an empty list, a number outside 1 .. NSIG - 1,
    // or a signal that cannot or must not be caught (SIGKILL, SIGSTOP, and
    // the faults SIGSEGV, SIGBUS, SIGILL, SIGFPE, which return to the
    // faulting instruction); what sigaction() reports otherwise (EINVAL for
    // glibc's internal real-time signals 32 and 33); what pthread_create()
    // reported if the signal thread cannot be started. Nothing is installed
    // when it throws.
    explicit signal_set(std::initializer_list<int> signals);
    explicit signal_set(std::span<const int> signals);
    signal_set(signal_set&& o) noexcept;
    signal_set& operator=(signal_set&& o) noexcept;
    signal_set(const signal_set&) = delete;
    signal_set& operator=(const signal_set&) = delete;
    // ~signal_set() restores the saved disposition of each of its signals
    // that no other signal_set has. Requires: nobody waits on this set.
    ~signal_set();

    // wait() returns the number of a signal of this set that arrived (see
    // "Delivery" above), at once if one is pending; else it waits, a
    // suspension point inside a task. On error returns 0 and sets ec:
    //   std::errc::timed_out            the deadline passed first;
    //   std::errc::bad_file_descriptor  the set is empty (moved from);
    //   what a failed dup() or wait reported.
    // A task's cancellation unwinds it (weft::forced_unwind).
    int wait(std::error_code& ec, clock::time_point deadline = no_deadline);
    // wait() throwing std::system_error instead.
    int wait(clock::time_point deadline = no_deadline);
    // try_wait() is wait() that never waits: a pending signal, or 0.
    [[nodiscard]] int try_wait() noexcept;
    // contains(sig) says whether sig is one of this set's signals.
    [[nodiscard]] bool contains(int sig) const noexcept;

    // state is the set's shared part (internal: src/io/signal.cpp).
    struct state;

private:
    friend struct detail::signal_core;  // select's signal case (weft/io/select.hpp)
    std::unique_ptr<state> s_;
};

}  // namespace weft::io
