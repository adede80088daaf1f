// reactor.cpp: layer L6's reactor (REACTOR-R1 - REACTOR-R5 in reactor.hpp) and its epoll
// backend.

#include "reactor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "weft/detail/sanitizer.hpp"
#include "weft/detail/support.hpp"

namespace weft::io::detail {

namespace {

constexpr std::size_t chunk_size = 64;


// epoll_backend: one epoll instance, edge-triggered registrations, and an
// eventfd (token 0, level-triggered) that interrupt() writes.
class epoll_backend final : public backend {
public:
    epoll_backend() {
        ep_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (ep_ < 0) throw std::system_error(errno_code(), "weft: epoll_create1");
        ev_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (ev_ < 0) {
            const auto ec = errno_code();
            ::close(ep_);
            throw std::system_error(ec, "weft: eventfd");
        }
        epoll_event e{};
        e.events = EPOLLIN;
        e.data.u64 = 0;
        if (::epoll_ctl(ep_, EPOLL_CTL_ADD, ev_, &e) != 0) {
            const auto ec = errno_code();
            ::close(ev_);
            ::close(ep_);
            throw std::system_error(ec, "weft: epoll_ctl (eventfd)");
        }
    }
    ~epoll_backend() override {
        ::close(ev_);
        ::close(ep_);
    }

    std::error_code add(registration* r, std::uint64_t token) noexcept override {
        epoll_event e{};
        e.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
        e.data.u64 = token;
        // The registration (a chunk maybe just constructed) must be seen by
        // the polling thread that gets its first event. The kernel orders
        // epoll_ctl before that event, but TSan only models it for
        // epoll_wait / epoll_pwait (clang 14 has no epoll_pwait2
        // interceptor), so say it in C++: released here, acquired in wait().
        added_.fetch_add(1, std::memory_order_release);
        if (::epoll_ctl(ep_, EPOLL_CTL_ADD, r->fd, &e) != 0) return errno_code();
        return {};
    }
    void remove(registration* r) noexcept override {
        epoll_event e{};
        (void)::epoll_ctl(ep_, EPOLL_CTL_DEL, r->fd, &e);
    }

    std::size_t wait(std::int64_t timeout_ns, reactor& re) noexcept override {
        epoll_event evs[128];
        int n;
        if (timeout_ns <= 0) {
            n = ::epoll_wait(ep_, evs, 128, timeout_ns < 0 ? -1 : 0);
        } else if (pwait2_) {
            timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000), static_cast<long>(timeout_ns % 1'000'000'000)};
            n = ::epoll_pwait2(ep_, evs, 128, &ts, nullptr);
            if (n < 0 && errno == ENOSYS) {
                pwait2_ = false;
                return 0;  // the caller loops and comes back with epoll_wait
            }
        } else {
            // Rounded up: a timer never fires early.
            const std::int64_t ms = (timeout_ns + 999'999) / 1'000'000;
            n = ::epoll_wait(ep_, evs, 128, ms > INT32_MAX ? INT32_MAX : static_cast<int>(ms));
        }
        std::size_t woke = 0;
        if (n > 0) (void)added_.load(std::memory_order_acquire);  // see add()
        for (int i = 0; i < n; ++i) {
            const std::uint64_t token = evs[i].data.u64;
            if (token == 0) {
                std::uint64_t v;
                (void)!::read(ev_, &v, sizeof v);
                continue;
            }
            const std::uint32_t e = evs[i].events;
            unsigned bits = 0;
            if (e & (EPOLLIN | EPOLLRDHUP | EPOLLPRI)) bits |= ev_read;
            if (e & EPOLLOUT) bits |= ev_write;
            if (e & (EPOLLERR | EPOLLHUP)) bits |= ev_error;
            woke += re.dispatch(token, bits);
        }
        return woke;
    }

    void interrupt() noexcept override {
        const std::uint64_t one = 1;
        (void)!::write(ev_, &one, sizeof one);
    }
    [[nodiscard]] const char* name() const noexcept override { return "epoll"; }
    [[nodiscard]] int wait_fd() const noexcept override { return ep_; }

private:
    int ep_ = -1;
    int ev_ = -1;
    bool pwait2_ = true;  // only the polling thread reads or writes it (SCHED-I2)
    std::atomic<std::uint64_t> added_{0};  // registrations added: a release / acquire pair (add())
};

// ignore_sigpipe() makes SIGPIPE ignored if its disposition is the default
// (which kills the process), as Go and Rust's runtime do: a write to a pipe
// whose reader has gone then reports EPIPE. Sockets never need it (weft
// sends with MSG_NOSIGNAL); a program's own handler is left alone.
void ignore_sigpipe() noexcept {
    struct sigaction old {};
    if (::sigaction(SIGPIPE, nullptr, &old) != 0) return;
    if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL) {
        struct sigaction ign {};
        ign.sa_handler = SIG_IGN;
        sigemptyset(&ign.sa_mask);
        (void)::sigaction(SIGPIPE, &ign, nullptr);
    }
}

std::unique_ptr<weft::detail::poller> make_reactor(weft::detail::runtime_core* c, const runtime_options& o) {
    std::unique_ptr<backend> b;
    std::string why;
    // automatic is the owner ring for one worker (a ring only that worker
    // enters, URING-O1), where it was measured level with epoll or better
    // (docs/io.md, "Backends"), and epoll otherwise: with more threads
    // polling, an io_uring completion is task work of the thread that armed
    // it, which interrupts that thread or, with COOP_TASKRUN, waits for it.
    // A failed io_uring setup under automatic falls back like an explicit
    // request, and says why.
    const bool one = o.workers == 1;
    // Under valgrind (a WEFT_VALGRIND build) automatic stays on epoll:
    // memcheck does not see the kernel write a buffer through the ring, so
    // every byte received would read as uninitialised.
    bool valgrind = false;
#if WEFT_VALGRIND
    valgrind = RUNNING_ON_VALGRIND != 0;
#endif
    if (o.io == io_backend::io_uring || (o.io == io_backend::automatic && one && !valgrind))
        b = make_uring_backend(why, c, o.workers, uring_off_from_env());
    if (!b) b = make_epoll_backend();
    ignore_sigpipe();
    return std::make_unique<reactor>(c, std::move(b), std::move(why));
}

}  // namespace

std::unique_ptr<backend> make_epoll_backend() { return std::make_unique<epoll_backend>(); }

#if !WEFT_HAVE_LIBURING
std::unique_ptr<backend> make_uring_backend_with(unsigned, std::string& why) {
    why = "io_uring: weft was built without liburing";
    return nullptr;
}
std::unique_ptr<backend> make_uring_backend(std::string& why, weft::detail::runtime_core*, unsigned, unsigned) {
    return make_uring_backend_with(0, why);
}
#endif

unsigned uring_off_from_env() noexcept {
    const char* v = std::getenv("WEFT_IO_URING_OFF");
    if (!v) return 0;
    static constexpr struct {
        const char* name;
        unsigned bit;
    } names[] = {{"defer_taskrun", off_defer_taskrun},
                 {"coop_taskrun", off_coop_taskrun},
                 {"owner_ring", off_owner_ring},
                 {"recv_op", off_recv_op},
                 {"worker_rings", off_worker_rings},
                 {"provided_buffers", off_provided_buffers}};
    unsigned off = 0;
    const std::string_view all(v);
    std::size_t i = 0;
    while (i <= all.size()) {
        std::size_t j = all.find(',', i);
        if (j == std::string_view::npos) j = all.size();
        const std::string_view one = all.substr(i, j - i);
        for (const auto& n : names)
            if (one == n.name) off |= n.bit;
        i = j + 1;
    }
    return off;
}

reactor::reactor(weft::detail::runtime_core* core, std::unique_ptr<backend> b, std::string fallback)
    : core_(core), backend_(std::move(b)), fallback_(std::move(fallback)), features_(backend_->features()) {}

reactor::~reactor() = default;

registration* reactor::acquire(int fd, std::uint32_t& seq) {
    registration* r;
    {
        std::lock_guard g(free_mu);
        if (!free_) {
            auto chunk = std::make_unique<registration[]>(chunk_size);
            for (std::size_t i = 0; i < chunk_size; ++i) {
                chunk[i].owner = this;
                chunk[i].next_free = i + 1 < chunk_size ? &chunk[i + 1] : nullptr;
            }
            free_ = &chunk[0];
            chunks_.push_back(std::move(chunk));
        }
        r = free_;
        free_ = r->next_free;
        r->next_free = nullptr;
    }
    {
        std::lock_guard g(r->mu);
        r->fd = fd;
        r->closed = false;
        r->always_ready = false;
        r->ready[0] = r->ready[1] = false;
        r->armed = !backend_->lazy();  // REACTOR-R6
        r->ops = nullptr;
        r->full_read.store(false, std::memory_order_relaxed);
        // IO-Q3: unknown; and the count moves on, so that a read of the fd
        // this registration watched before, still out when it was closed,
        // records nothing valid for the new one.
        for (int d = 0; d < 2; ++d) {
            r->empty_at[d].store(0, std::memory_order_relaxed);
            r->events[d].store(r->events[d].load(std::memory_order_relaxed) + 1, std::memory_order_release);
        }
        seq = r->seq;
    }
    if (std::error_code ec = backend_->add(r, token(r, seq))) {
        if (ec == std::errc::operation_not_permitted) {
            // A regular file or directory: epoll cannot watch it, and it is
            // always ready.
            std::lock_guard g(r->mu);
            r->always_ready = true;
        } else {
            {
                std::lock_guard g(r->mu);
                r->closed = true;
                ++r->seq;
            }
            std::lock_guard g(free_mu);
            r->next_free = free_;
            free_ = r;
            throw std::system_error(ec, "weft: registering an fd with the reactor");
        }
    }
    weft::detail::retain_core(core_);
    return r;
}

void reactor::retire(registration* r) noexcept {
    wait_node* woken[2][16];
    std::size_t n[2] = {0, 0};
    bool watched;
    for (;;) {
        bool more = false;
        {
            std::lock_guard g(r->mu);
            r->closed = true;
            // REACTOR-R7: every linked op is canceled; its task unlinks it.
            for (op_state* op = r->ops; op; op = op->next_op) backend_->cancel_op(op);
            for (int d = 0; d < 2; ++d) {
                n[d] = 0;
                while (n[d] < 16) {
                    wait_node* w = r->q[d].pop_claimed();
                    if (!w) break;
                    w->w->code = ECANCELED;  // WAITER-V2: after the claim, before wake()
                    w->w->fired = w->index;   // a select's case (weft/io/select.hpp)
                    woken[d][n[d]++] = w;
                }
                if (!r->q[d].empty()) more = true;
            }
            watched = !r->always_ready && r->armed;  // REACTOR-R6
        }
        for (int d = 0; d < 2; ++d)
            for (std::size_t i = 0; i < n[d]; ++i) woken[d][i]->w->wake();
        if (!more) break;
    }
    if (watched) backend_->remove(r);
    {
        std::lock_guard g(r->mu);
        ++r->seq;  // REACTOR-R2: from here on, events and waits for the old fd are stale
        r->fd = -1;
    }
    {
        std::lock_guard g(free_mu);
        r->next_free = free_;
        free_ = r;
    }
    weft::detail::release_core(core_);
}

std::size_t reactor::dispatch(std::uint64_t token, unsigned events) noexcept {
    constexpr std::uint64_t seq_mask = (1u << seq_bits) - 1;
    auto* r = reinterpret_cast<registration*>(static_cast<std::uintptr_t>(token >> seq_bits) << 6);
    const auto seq = static_cast<std::uint32_t>(token & seq_mask);
    std::size_t woke = 0;
    for (;;) {
        wait_node* woken[32];
        std::size_t n = 0;
        bool more = false;
        {
            std::lock_guard g(r->mu);
            if (r->closed || (r->seq & seq_mask) != seq) return woke;  // REACTOR-R2: stale
            for (int d = 0; d < 2; ++d) {
                if (!(events & (d == 0 ? ev_read : ev_write)) && !(events & ev_error)) continue;
                // IO-Q3: what a read or write saw before this event is old news.
                r->events[d].store(r->events[d].load(std::memory_order_relaxed) + 1, std::memory_order_release);
                bool any = false;
                while (n < 32) {
                    wait_node* w = r->q[d].pop_claimed();
                    if (!w) break;
                    w->w->fired = w->index;  // a select's case (weft/io/select.hpp), WAITER-V2
                    woken[n++] = w;
                    any = true;
                }
                if (!r->q[d].empty()) more = true;
                r->ready[d] = !any;  // REACTOR-R3
            }
        }
        for (std::size_t i = 0; i < n; ++i) woken[i]->w->wake();
        woke += n;
        if (!more) return woke;
    }
}

reactor* reactor_of(weft::detail::runtime_core* c) {
    return static_cast<reactor*>(weft::detail::runtime_poller(c, &make_reactor));
}

std::uint64_t ops_completed(weft::detail::runtime_core* c) { return reactor_of(c)->get_backend().ops_completed(); }
std::uint64_t recv_nobufs(weft::detail::runtime_core* c) { return reactor_of(c)->get_backend().recv_nobufs(); }

int run_op(backend& b, ring_op& r, clock::time_point deadline, registration* reg, std::uint32_t seq) {
    op_state& op = r.op;
    if (reg) {  // REACTOR-R7: linked and submitted under one hold of reg->mu
        std::lock_guard g(reg->mu);
        if (reg->closed || reg->seq != seq) return -ECANCELED;
        if (const int rc = b.start_op(&op); rc < 0) return rc;  // nothing submitted
        op.next_op = reg->ops;
        reg->ops = &op;
    } else if (const int rc = b.start_op(&op); rc < 0) {
        return rc;
    }
    // unlink() ends REACTOR-R7's link, after the completion.
    auto unlink = [&] {
        if (!reg) return;
        std::lock_guard g(reg->mu);
        for (op_state** p = &reg->ops; *p; p = &(*p)->next_op) {
            if (*p == &op) {
                *p = op.next_op;
                break;
            }
        }
    };
    weft::waiter& w1 = r.w1;
    bool done_already;
    {
        std::lock_guard g(op.mu);
        done_already = op.done;
        if (!done_already) {
            w1.arm(true);
            op.w = &w1;
        }
    }
    if (done_already) {  // completed during the submit itself
        unlink();
        return op.res;
    }
    if (reg) weft::detail::note_io_wait();  // a socket's wait, as wait() counts them
    const auto out = w1.wait(deadline == no_deadline ? nullptr : &deadline);
    if (out == weft::waiter::outcome::notified) {  // WAITER-V2: res written before wake()
        unlink();
        return op.res;
    }
    bool pending;
    {
        std::lock_guard g(op.mu);
        op.w = nullptr;  // WAITER-V3: w1 ended itself; the completion will not claim it
        pending = !op.done;
    }
    if (pending) {
        b.cancel_op(&op);
        weft::waiter& w2 = r.w2;
        bool wait2 = false;
        {
            std::lock_guard g(op.mu);
            if (!op.done) {
                w2.arm(false);  // IO-F1: neither a cancellation nor a deadline ends it
                op.w = &w2;
                wait2 = true;
            }
        }
        if (wait2) (void)w2.wait(nullptr);  // notified: only the completion claims w2
    }
    unlink();
    // A receive that completed with data anyway returns it, also to a task
    // being canceled (REACTOR-R7): those bytes left the socket, and the
    // cancellation, still pending, ends the task's next wait instead. A poll
    // took nothing: the task unwinds, the data stays in the socket (IO-R1).
    if (out == weft::waiter::outcome::canceled && !(reg && op.res > 0 && op.op != op_state::poll_in))
        weft::throw_canceled();
    if (out == weft::waiter::outcome::canceled) return op.res;
    // Timed out. Canceled in time (ECANCELED; EINTR from an io-wq worker the
    // cancel interrupted): timed_out. Completed anyway: its result.
    if (op.res == -ECANCELED || op.res == -EINTR) return -ETIMEDOUT;
    return op.res;
}

std::error_code wait(registration* r, std::uint32_t seq, int dir, clock::time_point deadline) {
    weft::detail::stable<weft::one_wait> st;  // WAITER-V4
    weft::waiter& w = st->w;
    wait_node& node = st->n;
    {
        std::lock_guard g(r->mu);
        if (r->closed || r->seq != seq) return std::make_error_code(std::errc::operation_canceled);
        if (r->always_ready) return {};
        if (r->ready[dir]) {  // REACTOR-R3
            r->ready[dir] = false;
            return {};
        }
        if (const std::error_code ec = r->owner->arm_locked(r)) return ec;  // REACTOR-R6
        w.arm();
        r->q[dir].push_back(&node);
    }
    weft::detail::note_io_wait();
    const auto out = w.wait(deadline == no_deadline ? nullptr : &deadline);
    if (out != weft::waiter::outcome::notified) {
        std::lock_guard g(r->mu);
        r->q[dir].remove(&node);
    }
    switch (out) {
    case weft::waiter::outcome::notified:
        if (w.code) return {w.code, std::system_category()};
        return {};
    case weft::waiter::outcome::timed_out: return deadline_passed();  // IO-E1
    default: weft::throw_canceled();
    }
}

}  // namespace weft::io::detail
