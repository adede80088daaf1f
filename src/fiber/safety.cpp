// safety.cpp: stack painting and high-water marks, and the per-thread set-up
// that turns a guard-page hit into a message naming the coroutine: an
// alternate signal stack for every thread that runs coroutines, and one
// process-wide SIGSEGV/SIGBUS handler that chains to whatever was installed
// before it.

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "internal.hpp"
#include "weft/detail/support.hpp"
#include "weft/coroutine.hpp"

namespace weft::detail {

namespace {

// ---------------------------------------------------------------------------
// Alternate signal stack
//
// A guard-page hit leaves the stack pointer in the guard, so the kernel has
// nowhere to put the signal frame unless the handler runs on another stack:
// without one the process dies silently. 64 KiB is far more than the handler
// needs; it leaves room for chained handlers and for the large signal frames
// of AVX-512 or SVE (SIGSTKSZ can be smaller than those on old headers).

constexpr std::size_t alt_stack_min = 64 * 1024;

// alt_stack owns the alternate signal stack weft installed on this thread.
// Its destructor runs when the thread exits.
struct alt_stack {
    void* mapping = nullptr;  // guard page + stack
    std::size_t mapping_size = 0;
    void* sp = nullptr;  // ss_sp as installed

    ~alt_stack() {
        if (!mapping) return;
        stack_t cur{};
        if (::sigaltstack(nullptr, &cur) != 0) return;
        if ((cur.ss_flags & SS_DISABLE) || cur.ss_sp != sp) {
            // Someone replaced ours. They may have saved it to put it back
            // later, and a restored stack that we had unmapped would take the
            // next signal into unmapped memory: keep it mapped (one mapping
            // per such thread, only when something else swapped stacks).
            return;
        }
        stack_t off{};
        off.ss_flags = SS_DISABLE;
        // EPERM means a handler is running on it right now: leave it.
        if (::sigaltstack(&off, nullptr) != 0) return;
        ::munmap(mapping, mapping_size);
    }
};

thread_local alt_stack t_alt;

void install_alt_stack() noexcept {
    stack_t cur{};
    if (::sigaltstack(nullptr, &cur) != 0) return;
    // A thread with its own alternate stack keeps it: the handler runs there.
    if (!(cur.ss_flags & SS_DISABLE)) return;

    const std::size_t page = page_size();
    std::size_t size = std::max({alt_stack_min, static_cast<std::size_t>(SIGSTKSZ), static_cast<std::size_t>(MINSIGSTKSZ)});
    size = (size + page - 1) & ~(page - 1);
    // One inaccessible page below it, so a handler that overflows the
    // alternate stack faults instead of scribbling on a neighbour.
    const std::size_t total = size + page;
    void* m = ::mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return;  // no diagnosis on this thread; nothing else changes
    void* sp = static_cast<std::byte*>(m) + page;
    if (::mprotect(sp, size, PROT_READ | PROT_WRITE) != 0) {
        ::munmap(m, total);
        return;
    }
    stack_t ss{};
    ss.ss_sp = sp;
    ss.ss_size = size;
    ss.ss_flags = 0;
    if (::sigaltstack(&ss, nullptr) != 0) {
        ::munmap(m, total);
        return;
    }
    t_alt.mapping = m;
    t_alt.mapping_size = total;
    t_alt.sp = sp;
}

// ---------------------------------------------------------------------------
// The fault handler
//
// Everything below runs inside a signal handler that may have interrupted
// anything, malloc included: only async-signal-safe calls (write, sigaction,
// pthread_sigmask, raise), no allocation, no locks, no stdio.

struct sigaction g_previous_segv{};
struct sigaction g_previous_bus{};

const struct sigaction& previous(int sig) noexcept { return sig == SIGBUS ? g_previous_bus : g_previous_segv; }

void reset_default(int sig) noexcept {
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(sig, &dfl, nullptr);
}


constexpr std::size_t max_name_in_report = 200;

void report_overflow(const fiber_record* cb, const void* addr) noexcept {
    const auto base = reinterpret_cast<std::uintptr_t>(cb->stack.base);
    // Formatted without libc (snprintf is not async-signal-safe).
    char buf[640];
    text_writer l(buf, sizeof buf);
    l.text(cb->flavour == fiber_flavour::fiber ? "weft: stack overflow in fiber " : "weft: stack overflow in coroutine ");
    if (cb->name.empty()) {
        l.text("<anonymous ");
        l.hex(reinterpret_cast<std::uintptr_t>(cb));
        l.text(">");
    } else {
        // The name lives at the top of the coroutine's stack, far from the
        // guard, so it is intact. A very long one is shortened to keep the
        // report in one write(2).
        l.text("'");
        l.text(cb->name.substr(0, max_name_in_report));
        if (cb->name.size() > max_name_in_report) l.text("...");
        l.text("'");
    }
    l.text(": fault address ");
    l.hex(reinterpret_cast<std::uintptr_t>(addr));
    l.text(", stack [");
    l.hex(base);
    l.text(", ");
    l.hex(base + cb->stack.size);
    l.text(") (");
    l.dec(cb->stack.size);
    l.text(" bytes, guard ");
    l.dec(cb->stack.guard);
    l.text(" bytes), stack size requested ");
    l.dec(cb->requested_stack);
    l.text(" bytes\n");
    write_stderr(l.c_str(), l.size());
}

// in_guard() says whether addr lies in the inaccessible region just below the
// stack. Only that region is diagnosed: an address further down may belong to
// any other mapping, and a frame that jumps over the guard is exactly what
// -fstack-clash-protection prevents (docs/safety.md).
bool in_guard(const stack_view& s, const void* addr) noexcept {
    if (s.guard == 0 || !s.base) return false;
    const auto a = reinterpret_cast<std::uintptr_t>(addr);
    const auto b = reinterpret_cast<std::uintptr_t>(s.base);
    return a < b && b - a <= s.guard;
}

// chain() hands a fault that is not a coroutine's overflow to the handler
// that was installed before weft's, as the kernel would have delivered it.
// `fault` says the kernel raised the signal for a faulting instruction
// (returning re-executes it) rather than someone sending it.
void chain(int sig, siginfo_t* info, void* uctx, bool fault) noexcept {
    const struct sigaction& prev = previous(sig);
    if (prev.sa_flags & SA_SIGINFO) {
        if (!prev.sa_sigaction) {
            reset_default(sig);
            if (!fault) ::raise(sig);
            return;
        }
    } else if (prev.sa_handler == SIG_DFL) {
        // The default action terminates with a core dump. For a fault,
        // returning re-executes the instruction, which faults again under
        // SIG_DFL: the core shows the real faulting state. A sent signal
        // would not recur, so send it again; it stays pending (blocked while
        // this handler runs) and kills the process when the handler returns.
        reset_default(sig);
        if (!fault) ::raise(sig);
        return;
    } else if (prev.sa_handler == SIG_IGN) {
        // The kernel does not let a faulting instruction be ignored (that
        // would re-execute it forever): it resets the action to the default
        // and kills the process. Do the same. A sent signal stays ignored.
        if (fault) reset_default(sig);
        return;
    }
    // A real handler: call it with what the kernel would have set up for
    // it, its sa_mask blocked (sig itself too, unless it asked for
    // SA_NODEFER) and SA_RESETHAND honoured. It runs on the alternate stack
    // whether or not it asked for SA_ONSTACK; the mask is restored when this
    // handler returns.
    if (prev.sa_flags & SA_RESETHAND) reset_default(sig);
    sigset_t block = prev.sa_mask;
    if (prev.sa_flags & SA_NODEFER) {
        sigset_t unblock;
        sigemptyset(&unblock);
        sigaddset(&unblock, sig);
        ::pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
        sigdelset(&block, sig);
    }
    ::pthread_sigmask(SIG_BLOCK, &block, nullptr);
    if (prev.sa_flags & SA_SIGINFO)
        prev.sa_sigaction(sig, info, uctx);
    else
        prev.sa_handler(sig);
}

std::atomic<fault_hook_fn> g_fault_hook{nullptr};

void on_fault(int sig, siginfo_t* info, void* uctx) {
    const int saved_errno = errno;
    // si_code > 0: raised by the kernel for a faulting access (SEGV_MAPERR,
    // SEGV_ACCERR, BUS_ADRERR, SI_KERNEL, ...). SI_USER (0) and the negative
    // codes (SI_QUEUE, SI_TKILL) are signals sent by kill/raise/sigqueue,
    // whose si_addr means nothing.
    const bool fault = info && info->si_code > 0;
    if (fault) {
        // The code that faulted runs on this thread, so if it overflowed a
        // coroutine's stack that coroutine is this thread's current one. A
        // stray access to some other coroutine's guard is not an overflow
        // and is left to the previous handler.
        const fiber_record* cb = current_for_signal();
        if (cb && in_guard(cb->stack, info->si_addr)) {
            report_overflow(cb, info->si_addr);
            // Return rather than raise(): the faulting instruction runs
            // again under SIG_DFL and the process dies by the same signal,
            // with a core dump of the real faulting state (raise() would
            // record this handler's frame on the alternate stack instead, as
            // a signal sent by the process to itself).
            reset_default(sig);
            errno = saved_errno;
            return;
        }
        // Not an overflow: a hook may know the address (a shrunk task's
        // stack, SHRINK-P2) and have made it accessible: the access is made
        // again when this handler returns.
        if (fault_hook_fn hook = g_fault_hook.load(std::memory_order_acquire); hook && hook(info->si_addr)) {
            errno = saved_errno;
            return;
        }
    }
    chain(sig, info, uctx, fault);
    errno = saved_errno;
}

void install_handler(int sig, struct sigaction& previous_out) noexcept {
    // Record the previous action before ours is visible: a fault on another
    // thread may reach on_fault as soon as sigaction() returns.
    ::sigaction(sig, nullptr, &previous_out);
    struct sigaction sa{};
    sa.sa_sigaction = &on_fault;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_ONSTACK | SA_SIGINFO;
    struct sigaction replaced{};
    if (::sigaction(sig, &sa, &replaced) != 0) return;
    // Someone changed it between the two calls: what we replaced is what
    // must be chained to.
    if (replaced.sa_flags != previous_out.sa_flags || replaced.sa_handler != previous_out.sa_handler)
        previous_out = replaced;
}

}  // namespace

void paint(fiber_record* cb, std::byte* limit) noexcept {
    auto* base = static_cast<std::byte*>(cb->stack.base);
    std::memset(base, paint_byte, static_cast<std::size_t>(limit - base));
    cb->painted = true;
}

std::size_t high_water(const fiber_record* cb) noexcept {
    if (!cb->painted) return 0;
    auto* p = static_cast<const unsigned char*>(cb->stack.base);
    auto* top = static_cast<const unsigned char*>(cb->stack.top());
    // Under valgrind the unused part lies below a stack pointer and counts as
    // unaddressable; the scan reads it on purpose. (This marks the whole
    // stack defined: with paint_stack, uninitialised reads on that stack go
    // unreported by memcheck.)
    sanitizer::reading_dead_stack(p, static_cast<std::size_t>(top - p));
    while (p < top && *p == paint_byte) ++p;
    return static_cast<std::size_t>(top - p);
}

namespace {
// install_handlers() installs weft's SIGSEGV and SIGBUS handler, once per
// process (a thread-safe static). Later sigaction() calls by the program
// replace it; docs/safety.md says how to chain.
void install_handlers() noexcept {
    static const bool installed = [] {
        install_handler(SIGSEGV, g_previous_segv);
        install_handler(SIGBUS, g_previous_bus);
        return true;
    }();
    (void)installed;
}
}  // namespace

void prepare_thread() noexcept {
    install_alt_stack();
    install_handlers();
}

void set_fault_hook(fault_hook_fn hook) noexcept {
    g_fault_hook.store(hook, std::memory_order_release);
    install_handlers();  // the hook is asked about faults on every thread
}

}  // namespace weft::detail
