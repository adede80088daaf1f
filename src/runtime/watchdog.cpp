// watchdog.cpp: the starvation watchdog (observe.hpp; docs/debugging.md).
//
// A monitor thread per runtime looks at every worker each threshold / 4: a
// worker whose `switches` counter has not moved while a task runs on it
// (`current` set) for the threshold is running one task that has not
// suspended (Go's sysmon looks at its schedtick the same way). The
// backtrace can only be taken on the stalled thread itself, so the monitor
// sends it a signal and its handler samples (Seastar's stall detector takes
// its backtrace in a signal handler too).
//
//   WATCHDOG-D1  A stall is reported once: the worker's counter value is its
//                identity, and `reported` stays set until the counter moves.
//   WATCHDOG-D2  The worker pays nothing for this beyond the one store of OBSERVE-O2.
//   WATCHDOG-D3  One sample at a time in the process (sample_mu), through one static
//                request slot that is never freed, so a handler running late never
//                touches freed memory. The slot's word is [generation | phase]: the
//                monitor arms it, the handler claims it with a compare-and-swap of
//                the whole word from armed to sampling (so a handler for an old,
//                abandoned request cannot claim a new one), the monitor abandons an
//                unclaimed request with the same compare-and-swap from armed to
//                idle, and waits for a claimed one to finish (the handler is running
//                then, and takes microseconds).
//   WATCHDOG-D4  The handler checks on its own thread that the stalled task is still
//                the one running (its counter unchanged): the task cannot end while
//                its own thread is in the handler, so reading its id and name there
//                is safe. The monitor never dereferences a task. The worker's
//                running-task slot names a task only while the worker holds a
//                reference to it, or the task cannot run anywhere else:
//                finish_task() clears the slot before it drops its reference
//                (TSan caught a sample, delivered late, reading a task freed by
//                its joiner), and the after-switch hooks that publish a task
//                that parked or yielded (after_park(), after_yield()) clear it
//                before the task can be woken or stolen, run and end on another
//                worker (TSan caught that too, in a CI run of 2026-11-29:
//                observe_test.stalls_ending_while_sampled_..., 2 workers).

#include "observe.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

#include "weft/detail/task_record.hpp"

namespace weft::detail {

namespace {

constexpr int max_frames = 64;
constexpr std::uint64_t phase_mask = 7;
enum phase : std::uint64_t { idle = 0, armed = 1, sampling = 2, done = 3, moved_on = 4 };

// sample_slot is the one request (WATCHDOG-D3).
struct sample_slot {
    std::atomic<std::uint64_t> word{0};
    // Written by the monitor before arming; atomics because a handler late
    // for an abandoned request may read them while the next is prepared
    // (its claim then fails).
    std::atomic<int> sig{0};
    std::atomic<pthread_t> thread{};
    std::atomic<worker_view*> w{nullptr};
    std::atomic<std::uint64_t> seq{0};
    // Written by the handler before done:
    std::uint64_t id = 0;
    char name[64] = {};
    std::size_t name_len = 0;
    std::int64_t started = 0;
    std::int64_t now = 0;
    void* pc = nullptr;
    void* frames[max_frames] = {};
    int nframes = 0;
};

sample_slot slot;
std::mutex sample_mu;
std::uint64_t generation = 0;  // guarded by sample_mu

// The actions that were installed before ours, per signal (chained to).
std::mutex install_mu;
struct sigaction previous[NSIG];
bool installed[NSIG];

void* interrupted_pc(void* uc) noexcept {
    auto* u = static_cast<ucontext_t*>(uc);
#if defined(__x86_64__)
    return reinterpret_cast<void*>(u->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
    return reinterpret_cast<void*>(u->uc_mcontext.pc);
#else
    (void)u;
    return nullptr;
#endif
}

void chain(int sig, siginfo_t* si, void* uc) noexcept {
    const struct sigaction& p = previous[sig];
    if (p.sa_flags & SA_SIGINFO) {
        if (p.sa_sigaction) p.sa_sigaction(sig, si, uc);
    } else if (p.sa_handler != SIG_DFL && p.sa_handler != SIG_IGN && p.sa_handler) {
        p.sa_handler(sig);
    }
}

void on_sample(int sig, siginfo_t* si, void* uc) noexcept {
    const int saved_errno = errno;
    std::uint64_t w0 = slot.word.load(std::memory_order_acquire);
    const std::uint64_t gen = w0 & ~phase_mask;
    if ((w0 & phase_mask) != armed || slot.sig.load(std::memory_order_relaxed) != sig ||
        !pthread_equal(slot.thread.load(std::memory_order_relaxed), pthread_self()) ||
        !slot.word.compare_exchange_strong(w0, gen | sampling, std::memory_order_acq_rel)) {
        chain(sig, si, uc);
        errno = saved_errno;
        return;
    }
    worker_view* w = slot.w.load(std::memory_order_relaxed);
    task_record* t = w->current.load(std::memory_order_relaxed);
    if (!t || w->switches.get() != slot.seq.load(std::memory_order_relaxed)) {  // WATCHDOG-D4: it has moved on
        slot.word.store(gen | moved_on, std::memory_order_release);
        errno = saved_errno;
        return;
    }
    slot.id = t->id;
    slot.name_len = std::min(t->name.size(), sizeof slot.name);
    std::memcpy(slot.name, t->name.data(), slot.name_len);
    slot.started = t->state_since.load(std::memory_order_relaxed);
    slot.now = coarse_now_ns();
    slot.pc = interrupted_pc(uc);
    slot.nframes = ::backtrace(slot.frames, max_frames);
    slot.word.store(gen | done, std::memory_order_release);
    errno = saved_errno;
}

// install() makes on_sample the handler of sig, chaining to the one there
// now; again if the program has replaced it since.
void install(int sig) {
    std::lock_guard g(install_mu);
    struct sigaction now {};
    if (::sigaction(sig, nullptr, &now) != 0)
        throw std::system_error(errno, std::generic_category(), "weft: watchdog: sigaction");
    if (installed[sig] && (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == &on_sample) return;
    struct sigaction sa {};
    sa.sa_sigaction = &on_sample;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (::sigaction(sig, &sa, &previous[sig]) != 0)
        throw std::system_error(errno, std::generic_category(), "weft: watchdog: sigaction");
    installed[sig] = true;
}

// thread_cpu_ns() is the CPU time of w's thread, or -1. Called under
// w->thread_mu (the thread cannot end meanwhile).
std::int64_t thread_cpu_ns(const worker_view* w) noexcept {
    if (!w->has_thread) return -1;
    clockid_t id;
    timespec ts{};
    if (::pthread_getcpuclockid(w->thread, &id) != 0 || ::clock_gettime(id, &ts) != 0) return -1;
    return std::int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// describe_frame() is one backtrace line: the symbol (demangled) and the
// module offset, which addr2line takes when the symbol is only the nearest
// exported one.
std::string describe_frame(int i, void* pc) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "  #%-2d %p", i, pc);
    std::string line = buf;
    Dl_info info{};
    if (::dladdr(pc, &info) != 0) {
        if (info.dli_sname) {
            int status = -1;
            char* dem = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
            line += " in ";
            line += status == 0 && dem ? dem : info.dli_sname;
            std::free(dem);
            std::snprintf(buf, sizeof buf, "+0x%zx",
                          static_cast<std::size_t>(static_cast<char*>(pc) - static_cast<char*>(info.dli_saddr)));
            line += buf;
        }
        if (info.dli_fname) {
            std::snprintf(buf, sizeof buf, "+0x%zx)",
                          static_cast<std::size_t>(static_cast<char*>(pc) - static_cast<char*>(info.dli_fbase)));
            line += " (";
            line += info.dli_fname;
            line += buf;
        }
    }
    return line;
}

}  // namespace

struct watchdog::state {
    watchdog_options o;
    std::vector<worker_view*> ws;
    struct look {
        std::uint64_t seq = 0;
        std::int64_t since = 0;      // when the monitor first saw this counter value
        std::int64_t cpu_since = -1;  // the thread's CPU time then (-1: unknown)
        bool reported = false;
    };
    std::vector<look> looks;
    std::mutex mu;
    std::condition_variable cv;
    bool stopping = false;
    std::atomic<std::uint64_t> stalls{0};
    std::atomic<std::uint64_t> suppressed{0};
    std::uint64_t unreported = 0;  // suppressed since the last report
    double tokens = 0;
    std::int64_t refilled = 0;
    std::thread th;

    void run();
    void check(std::int64_t now);
    void report(unsigned i, std::uint64_t seq, std::int64_t seen_for, std::int64_t cpu);
};

void watchdog::state::run() {
    const auto period = std::max<std::chrono::nanoseconds>(std::chrono::milliseconds(1), o.threshold / 4);
    std::unique_lock l(mu);
    while (!stopping) {
        cv.wait_for(l, period);
        if (stopping) break;
        l.unlock();
        check(steady_now_ns());
        l.lock();
    }
}

void watchdog::state::check(std::int64_t now) {
    const std::int64_t threshold = std::chrono::nanoseconds(o.threshold).count();
    for (unsigned i = 0; i < ws.size(); ++i) {
        look& k = looks[i];
        const std::uint64_t seq = ws[i]->switches.get();
        if (ws[i]->current.load(std::memory_order_relaxed) == nullptr || seq != k.seq) {
            std::int64_t cpu;
            {
                std::lock_guard g(ws[i]->thread_mu);
                cpu = thread_cpu_ns(ws[i]);
            }
            k = {seq, now, cpu, false};
            continue;
        }
        if (k.reported || now - k.since < threshold) continue;
        k.reported = true;  // WATCHDOG-D1
        stalls.fetch_add(1, std::memory_order_relaxed);
        // Rate limit: a token bucket of `burst`, one token per refill_every.
        const std::int64_t every = std::chrono::nanoseconds(o.refill_every).count();
        if (every > 0) {
            tokens = std::min<double>(o.burst, tokens + double(now - refilled) / double(every));
        }
        refilled = now;
        if (tokens < 1) {
            ++unreported;
            suppressed.fetch_add(1, std::memory_order_relaxed);
            continue;
        }
        tokens -= 1;
        report(i, seq, now - k.since, k.cpu_since);
    }
}

void watchdog::state::report(unsigned i, std::uint64_t seq, std::int64_t seen_for, std::int64_t cpu_since) {
    worker_view* w = ws[i];
    bool sampled = false;
    std::uint64_t id = 0;
    std::string name;
    std::int64_t ran_for = seen_for;
    std::int64_t cpu = 0;
    std::vector<void*> frames;
    // Held while the thread is used: a driver cannot leave (and its thread
    // end) meanwhile.
    std::unique_lock tl(w->thread_mu);
    if (const std::int64_t c = thread_cpu_ns(w); c >= 0 && cpu_since >= 0 && c > cpu_since) cpu = c - cpu_since;
    const pthread_t th = w->thread;
    if (o.sample_signal > 0 && w->has_thread) {
        std::lock_guard g(sample_mu);  // WATCHDOG-D3
        const std::uint64_t gen = ++generation << 3;
        slot.sig.store(o.sample_signal, std::memory_order_relaxed);
        slot.thread.store(th, std::memory_order_relaxed);
        slot.w.store(w, std::memory_order_relaxed);
        slot.seq.store(seq, std::memory_order_relaxed);
        slot.nframes = 0;
        slot.word.store(gen | armed, std::memory_order_release);
        std::uint64_t end = gen | armed;
        if (::pthread_kill(th, o.sample_signal) == 0) {
            const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
            for (;;) {
                end = slot.word.load(std::memory_order_acquire);
                const std::uint64_t ph = end & phase_mask;
                if (ph == done || ph == moved_on) break;
                if (ph == armed && std::chrono::steady_clock::now() >= give_up) {
                    if (slot.word.compare_exchange_strong(end, gen | idle, std::memory_order_acq_rel)) break;
                    continue;  // claimed meanwhile: it finishes soon
                }
                std::this_thread::sleep_for(std::chrono::microseconds(200));
            }
        } else {
            slot.word.store(gen | idle, std::memory_order_release);
            end = gen | idle;
        }
        if ((end & phase_mask) == moved_on) {
            // WATCHDOG-D4: the task suspended after all; not a stall after all.
            slot.word.store(gen | idle, std::memory_order_release);
            stalls.fetch_sub(1, std::memory_order_relaxed);
            tokens += 1;
            return;
        }
        if ((end & phase_mask) == done) {
            sampled = true;
            id = slot.id;
            name.assign(slot.name, slot.name_len);
            ran_for = std::max(ran_for, slot.now - slot.started);
            // Frames from the interrupted one on: the handler's own and the
            // signal trampoline's come first.
            int first = 0;
            for (int k = 0; k < slot.nframes; ++k)
                if (slot.frames[k] == slot.pc) {
                    first = k;
                    break;
                }
            frames.assign(slot.frames + first, slot.frames + slot.nframes);
        }
        slot.word.store(gen | idle, std::memory_order_release);
    }
    tl.unlock();

    std::string text = "weft watchdog: ";
    char buf[256];
    if (sampled) {
        std::snprintf(buf, sizeof buf, "task %llu", static_cast<unsigned long long>(id));
        text += buf;
        if (!name.empty()) text += " '" + name + "'";
    } else {
        text += "a task";
    }
    std::snprintf(buf, sizeof buf,
                  " has run on worker %u for %lld ms without suspending (threshold %lld ms; its thread used %lld ms "
                  "of CPU meanwhile)\n",
                  i, static_cast<long long>(ran_for / 1'000'000), static_cast<long long>(o.threshold.count()),
                  static_cast<long long>(cpu / 1'000'000));
    text += buf;
    if (sampled) {
        for (std::size_t k = 0; k < frames.size(); ++k) text += describe_frame(static_cast<int>(k), frames[k]) + "\n";
    } else {
        text += "  (no backtrace: the worker was not sampled)\n";
    }
    if (unreported) {
        std::snprintf(buf, sizeof buf, "  (%llu stall(s) not reported before this one: rate limit)\n",
                      static_cast<unsigned long long>(unreported));
        text += buf;
    }
    stall_report r;
    r.task_id = id;
    r.task_name = name;
    r.worker = i;
    r.ran_for = std::chrono::nanoseconds(ran_for);
    r.cpu_time = std::chrono::nanoseconds(cpu);
    r.backtrace = std::span<void* const>(frames.data(), frames.size());
    r.suppressed = std::exchange(unreported, 0);
    r.text = text;
    if (o.on_stall)
        o.on_stall(r, o.user);
    else
        std::fputs(text.c_str(), stderr);
}

watchdog::watchdog(const watchdog_options& o, std::vector<worker_view*> workers) : s_(std::make_unique<state>()) {
    s_->o = o;
    s_->ws = std::move(workers);
    s_->looks.resize(s_->ws.size());
    s_->tokens = o.burst;
    s_->refilled = steady_now_ns();
    if (o.sample_signal > 0) {
        if (o.sample_signal >= NSIG) throw std::invalid_argument("weft: watchdog.sample_signal is not a signal");
        // The first backtrace() loads libgcc_s (not async-signal-safe): do
        // it here, not in the handler.
        void* warm[2];
        (void)::backtrace(warm, 2);
        install(o.sample_signal);
    }
    s_->th = std::thread([s = s_.get()] { s->run(); });
}

watchdog::~watchdog() { halt(); }

void watchdog::halt() noexcept {
    {
        std::lock_guard g(s_->mu);
        s_->stopping = true;
    }
    s_->cv.notify_all();
    if (s_->th.joinable()) s_->th.join();
}

std::uint64_t watchdog::stalls() const noexcept { return s_->stalls.load(std::memory_order_relaxed); }
std::uint64_t watchdog::suppressed() const noexcept { return s_->suppressed.load(std::memory_order_relaxed); }

void watchdog_from_env(watchdog_options& o) {
    const char* env = std::getenv("WEFT_WATCHDOG");
    if (!env || !*env) return;
    char* end = nullptr;
    const long ms = std::strtol(env, &end, 10);
    if (*end != '\0' || ms < 0) {
        std::fprintf(stderr, "weft: WEFT_WATCHDOG=%s is not a number of milliseconds; ignored\n", env);
        return;
    }
    if (ms == 0) return;
    o.enabled = true;
    o.threshold = std::chrono::milliseconds(ms);
}

}  // namespace weft::detail
