// reactor.hpp: layer L6's reactor, internal. One per runtime (made on the
// first wait by runtime_poller()), it is the runtime's poller: the watcher
// worker waits in poll() (src/runtime/sleeping.cpp, SCHED-I1/I2).
//
// Invariants (docs/io.md):
//   REACTOR-R1  a registration's memory is never freed while its reactor lives:
//               registrations come from chunks that are only freed with the
//               reactor, so a late event or a late waiter never touches freed
//               memory;
//   REACTOR-R2  every event carries a token: the registration's address and its
//               sequence number at the time it was added. release() bumps the
//               sequence number (under the registration's lock) before the
//               registration is reused, and dispatch() drops an event whose
//               sequence number differs: a stale event for a closed and reused fd
//               never wakes the new owner (Go's netpoller does the same, fdseq);
//   REACTOR-R3  a readiness edge that finds no waiter is kept (`ready`), and a
//               waiter that finds it consumes it instead of sleeping: edge-triggered
//               events are not lost between an EAGAIN and the wait;
//   REACTOR-R4  an event wakes every waiter of its direction (they retry their
//               operation; the ones that find nothing wait again), error and hang-up
//               events both directions;
//   REACTOR-R5  close (retire()) marks the registration closed and wakes every
//               waiter with ECANCELED under its lock; a wait that starts later finds
//               it closed, or a different sequence number, and returns ECANCELED;
//   REACTOR-R6  a registration is `armed` (its backend watches the fd) before any
//               waiter of it sleeps: add() arms at once, except on a lazy backend
//               (the owner ring, URING-O5; the worker rings' epoll, URING-W1), where
//               arm_locked() arms under r->mu by the first wait that finds no kept
//               edge (a refusal is that wait's error: it does not sleep); the
//               backend's watch reports the fd's current state when it starts, so an
//               edge between the waiter's EAGAIN and the arming is not lost.
//               retire() removes only an armed registration;
//   REACTOR-R7  a ring operation on the fd (a receive, a poll, a send) is linked to
//               `ops` under r->mu only while the registration is open with the op's
//               sequence number, and submitted under the same hold; retire() marks it closed and
//               cancels every linked op under r->mu, so an op either sees it closed
//               and is never submitted, or is submitted before the cancel (same
//               thread, or the owner ring's FIFO mailbox, URING-O2) and ends with
//               -ECANCELED or its result. The op's task unlinks it under r->mu after
//               its completion, before its frame ends.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "weft/io/handle.hpp"
#include "weft/runtime.hpp"
#include "weft/waiter.hpp"

// The runtime's internal poller interface (L4, below this layer).
#include "../runtime/poller.hpp"

namespace weft::io::detail {

class reactor;
struct op_state;

// errno_code() is errno as a std::error_code (system category).
inline std::error_code errno_code() noexcept { return {errno, std::system_category()}; }

// expired() is true once `deadline` (not no_deadline) has passed.
inline bool expired(clock::time_point deadline) noexcept {
    return deadline != no_deadline && clock::now() >= deadline;
}

// The codes of category "weft.io" (io_category(), socket.cpp), besides
// io::eof(): errors weft itself decides, whose message says what happened
// and what to do where the system's text would only say "Connection timed
// out" or "Invalid argument".
//
//   IO-E1  deadline_passed() and foreign_runtime() keep the errno value
//          (ETIMEDOUT, EINVAL) and compare equal to std::errc::timed_out and
//          std::errc::invalid_argument (the category's
//          default_error_condition()), so every `ec == std::errc::...`
//          test, and every caller that hands ec.value() on as an errno
//          (the hook's bridge, the C API's weft_last_errno()), sees what it
//          saw before. Only deadline expiry is deadline_passed(): an
//          ETIMEDOUT of the kernel's own (a TCP connect or keep-alive that
//          gave up before the call's deadline) stays in the system category.
const std::error_category& io_category() noexcept;
// deadline_passed() is the error of a wait that reached its deadline.
inline std::error_code deadline_passed() noexcept { return {ETIMEDOUT, io_category()}; }
// foreign_runtime() is the error of a socket used by a task of a runtime
// other than the one whose reactor watches it.
inline std::error_code foreign_runtime() noexcept { return {EINVAL, io_category()}; }
// op_error() is a ring op's negative result as an error: -ETIMEDOUT once
// the deadline has passed is deadline_passed() (IO-E1).
inline std::error_code op_error(int res, clock::time_point deadline) noexcept {
    if (res == -ETIMEDOUT && expired(deadline)) return deadline_passed();
    return {-res, std::system_category()};
}

// or_throw(what, f) is the throwing form of an operation made from its
// error_code form: it calls f(ec) and throws std::system_error(ec, what)
// if that set ec, else returns what f returned.
template <class F>
auto or_throw(const char* what, F&& f) {
    std::error_code ec;
    auto r = f(ec);
    check(ec, what);
    return r;
}

// registration is one watched fd (REACTOR-R1 - REACTOR-R7). Guarded by mu except where noted.
struct alignas(64) registration {
    weft::spin_lock mu;
    int fd = -1;
    std::uint32_t seq = 0;   // REACTOR-R2; only the low seq_bits go into a token
    bool ready[2] = {false, false};  // REACTOR-R3: [0] readable, [1] writable
    bool closed = true;
    bool always_ready = false;  // a regular file: epoll cannot watch it, it never blocks
    bool armed = false;         // REACTOR-R6: the backend watches fd (a lazy backend arms on the first wait)
    op_state* ops = nullptr;    // REACTOR-R7: ring operations in flight on fd, linked through op_state::next_op
    // A hint for IO-R2 (handle.cpp), no invariant: the last receive filled
    // its buffer, so more is probably waiting and recv(2) goes first.
    std::atomic<bool> full_read{false};
    // IO-Q3 (handle.cpp), the readiness cache: events[d] counts the events
    // dispatch() took for direction d (written under mu); empty_at[d] is
    // 1 + the count a read (d = 0) or write (d = 1) read before an attempt
    // that found the fd empty (full), or 0: unknown.
    std::atomic<std::uint32_t> events[2] = {0, 0};
    std::atomic<std::uint32_t> empty_at[2] = {0, 0};
    weft::wait_queue q[2];
    reactor* owner = nullptr;   // set once, when the chunk is made
    registration* next_free = nullptr;  // guarded by the reactor's free_mu
};

// The CQE flags an operation's completion may carry (the kernel's ABI,
// IORING_CQE_F_BUFFER and IORING_CQE_F_SOCK_NONEMPTY; uring.cpp checks them
// against liburing's).
inline constexpr std::uint32_t cqe_f_buffer = 1u << 0;         // the upper 16 bits name a provided buffer
inline constexpr std::uint32_t cqe_f_sock_nonempty = 1u << 2;  // a receive left more data in the socket

// op_state is one read or write at an offset that a backend carries out
// itself (io_uring: IORING_OP_READ / IORING_OP_WRITE), for io::file, or one
// socket operation of handle::read_some / write_some on the owner ring or
// the worker rings (IO-R2): a send (IORING_OP_SEND from `buf`), a receive
// into a provided buffer (recv_select: IORING_OP_RECV with
// IOSQE_BUFFER_SELECT, at most `len` bytes into a buffer of the ring's own,
// URING-P1; `buf` unused), or a wait for readability (poll_in: a one-shot
// IORING_OP_POLL_ADD, `buf` unused). It lives where the submitting task's
// detail::stable puts it (WAITER-V4) and must stay there until `done`
// (IO-F1 in file.cpp): the kernel writes `buf` (a read) until the completion
// arrives, also after a cancel. Fields above `mu` are written before
// start_op() and only read by the backend; `w`, `done`, `res` and `cflags`
// are guarded by `mu`.
struct alignas(8) op_state {
    enum kind : std::uint8_t { read, write, send, recv_select, poll_in };
    kind op = read;
    int fd = -1;
    void* buf = nullptr;
    std::uint32_t len = 0;
    std::uint64_t offset = 0;

    weft::spin_lock mu;
    weft::waiter* w = nullptr;  // the armed waiter to claim on completion, or null
    bool done = false;          // the completion has arrived; the op is over
    int res = 0;                // the CQE's res: a count or -errno
    std::uint32_t cflags = 0;   // the CQE's flags (recv_select: the buffer it took, URING-P1)
    op_state* next_op = nullptr;  // REACTOR-R7: guarded by the registration's mu while linked
    std::uint32_t ring = 0;       // the worker ring it was submitted to (URING-W2), set by start_op()

    // complete() is the completion (once per op, from the polling thread,
    // outside the backend's locks): writes res and done, then claims the
    // armed waiter and wakes it (WAITER-V1, WAITER-V2). Touches nothing of *this after
    // releasing mu: the task may return (and end *this) from then on.
    void complete(int r, std::uint32_t flags = 0) noexcept {
        weft::waiter* claimed = nullptr;
        {
            std::lock_guard g(mu);
            res = r;
            cflags = flags;
            done = true;
            if (w && w->claim()) claimed = w;
            w = nullptr;
        }
        if (claimed) claimed->wake();  // the waiter's frame lives until wake() (waiter.hpp)
    }
};

// Event bits a backend hands to dispatch().
enum : unsigned { ev_read = 1, ev_write = 2, ev_error = 4 };

// backend is what a reactor waits with: epoll or io_uring.
class backend {
public:
    virtual ~backend() = default;
    // add() starts watching r->fd for both directions, edge-triggered,
    // events carrying `token`. EPERM (a regular file) is reported as is.
    virtual std::error_code add(registration* r, std::uint64_t token) noexcept = 0;
    // remove() stops watching r->fd (still open). Events already fetched
    // may still arrive (REACTOR-R2 drops them). When it returns, nothing of
    // the watch holds the fd's file any more (epoll never does; io_uring's
    // poll does until it is over: URING-U8, URING-O7), so that the close(2)
    // after retire() closes the file at once. It may wait (bounded) for the
    // thread that ends the poll; it is called without r->mu.
    virtual void remove(registration* r) noexcept = 0;
    // wait() waits up to timeout_ns (-1: no limit; 0: not at all) and hands
    // each event to re.dispatch(); returns how many waiters were woken.
    virtual std::size_t wait(std::int64_t timeout_ns, reactor& re) noexcept = 0;
    // interrupt() ends a wait() in progress, or the next one.
    virtual void interrupt() noexcept = 0;
    [[nodiscard]] virtual const char* name() const noexcept = 0;

    // Operations (optional; io_uring has them, epoll does not).
    // supports_ops() says whether start_op() can succeed at all.
    [[nodiscard]] virtual bool supports_ops() const noexcept { return false; }
    // start_op() submits *op; 0, or a negative errno when it was not
    // submitted (then no completion comes). Once submitted, op->complete()
    // is called exactly once, from wait(), with the operation's result
    // (-ECANCELED and the like after cancel_op()).
    virtual int start_op(op_state* op) noexcept {
        (void)op;
        return -EOPNOTSUPP;
    }
    // cancel_op() asks the kernel to end a submitted op early; its
    // completion still comes (and must be waited for).
    virtual void cancel_op(op_state* op) noexcept { (void)op; }
    // ops_completed() counts the completions handed to op_state::complete()
    // (tests observe that file IO really went through the ring).
    [[nodiscard]] virtual std::uint64_t ops_completed() const noexcept { return 0; }

    // A lazy backend (REACTOR-R6) only checks the fd in add() and starts
    // watching it in arm(), which the reactor calls under r->mu before the
    // first waiter of r sleeps. arm() must not block or take r->mu.
    [[nodiscard]] virtual bool lazy() const noexcept { return false; }
    // Returns 0, or a negative errno when the fd cannot be watched.
    virtual int arm(registration* r, std::uint64_t token) noexcept {
        (void)r;
        (void)token;
        return 0;
    }
    // supports_recv() says whether start_op() takes op_state::send and
    // poll_in (the owner ring and the worker rings, IO-R2). cancel_op() of
    // such an op may be called under the registration's mu (REACTOR-R7).
    [[nodiscard]] virtual bool supports_recv() const noexcept { return false; }
    // recv_select_max() is the size of the ring's provided buffers when
    // start_op() takes op_state::recv_select (URING-P1), else 0.
    [[nodiscard]] virtual std::uint32_t recv_select_max() const noexcept { return 0; }
    // selected() is the provided buffer that a recv_select op's completion
    // filled (res > 0, IORING_CQE_F_BUFFER in op.cflags); give_back() returns
    // it to its ring, once, from any thread, after its bytes are copied out
    // (URING-P1).
    [[nodiscard]] virtual const std::byte* selected(const op_state& op) const noexcept {
        (void)op;
        return nullptr;
    }
    virtual void give_back(const op_state& op) noexcept { (void)op; }
    // recv_nobufs() counts the recv_select ops that ended with -ENOBUFS (the
    // ring had no free buffer), for tests.
    [[nodiscard]] virtual std::uint64_t recv_nobufs() const noexcept { return 0; }
    // features() says what the backend uses and what the kernel refused,
    // for io::backend_info.
    [[nodiscard]] virtual std::string features() const { return name(); }

    // A per-worker backend (the worker rings, URING-W1) has IO of each
    // worker's own: the runtime's poller::per_worker(), poll_worker() and
    // wake_worker() (runtime SCHED-I3) come here.
    [[nodiscard]] virtual bool per_worker() const noexcept { return false; }
    virtual std::size_t poll_worker(unsigned i, std::int64_t timeout_ns, bool watch, reactor& re) noexcept {
        (void)i;
        (void)watch;
        return wait(timeout_ns, re);
    }
    virtual void wake_worker(unsigned i) noexcept { (void)i; }
    // wait_fd() is an fd that is readable while wait(0) would find events
    // (epoll's own fd), or -1.
    [[nodiscard]] virtual int wait_fd() const noexcept { return -1; }
};

// Parts of the io_uring backend that can be turned off (WEFT_IO_URING_OFF,
// a comma-separated list of these names; tests force each fallback):
enum uring_off : unsigned {
    off_defer_taskrun = 1,  // "defer_taskrun": IORING_SETUP_SINGLE_ISSUER + DEFER_TASKRUN
    off_coop_taskrun = 2,   // "coop_taskrun": IORING_SETUP_COOP_TASKRUN
    off_owner_ring = 4,     // "owner_ring": the shared ring even for one worker
    off_recv_op = 8,        // "recv_op": sockets by readiness, not IORING_OP_RECV / SEND
    off_worker_rings = 16,  // "worker_rings": the shared ring for two or more workers
    off_provided_buffers = 32,  // "provided_buffers": a socket read waits by a one-shot poll, then
                                // recv(2), not IORING_OP_RECV into a provided buffer (URING-P1)
};
// uring_off_from_env() parses WEFT_IO_URING_OFF; unknown names are ignored.
unsigned uring_off_from_env() noexcept;

// make_epoll_backend() is the epoll backend; throws std::system_error.
std::unique_ptr<backend> make_epoll_backend();
// make_uring_backend() is the io_uring backend, or null with `why` set when
// io_uring cannot be used here (not built in, or io_uring_setup failed).
// `workers`: the runtime's worker threads. One: the owner ring (URING-O1);
// two or more: a ring per worker (URING-W1); 0: the shared ring. `off`:
// uring_off bits. `core` is the runtime (the worker rings ask it which
// worker the calling thread is).
std::unique_ptr<backend> make_uring_backend(std::string& why, weft::detail::runtime_core* core = nullptr,
                                            unsigned workers = 0, unsigned off = 0);
// make_uring_backend_with() is make_uring_backend() with `entries` SQ
// entries; tests force a setup failure with it (entries = 1 << 30: EINVAL),
// hence exported from a shared libweft (internal all the same).
WEFT_API std::unique_ptr<backend> make_uring_backend_with(unsigned entries, std::string& why);

class reactor final : public weft::detail::poller {
public:
    static constexpr unsigned seq_bits = 22;

    reactor(weft::detail::runtime_core* core, std::unique_ptr<backend> b, std::string fallback);
    ~reactor() override;

    // poller
    std::size_t poll(std::int64_t timeout_ns) noexcept override { return backend_->wait(timeout_ns, *this); }
    void interrupt() noexcept override { backend_->interrupt(); }
    [[nodiscard]] bool per_worker() const noexcept override { return backend_->per_worker(); }
    std::size_t poll_worker(unsigned i, std::int64_t timeout_ns, bool watch) noexcept override {
        return backend_->poll_worker(i, timeout_ns, watch, *this);
    }
    void wake_worker(unsigned i) noexcept override { backend_->wake_worker(i); }

    // acquire() is a registration watching fd, open, with its sequence
    // number in `seq`. Throws std::system_error.
    registration* acquire(int fd, std::uint32_t& seq);
    // retire() closes r (REACTOR-R5), stops watching its fd (remove(): no
    // watch holds the fd's file once it returns) and returns r to the free
    // list. The fd stays open.
    void retire(registration* r) noexcept;
    // dispatch() is a backend's event for `token` (REACTOR-R2 - REACTOR-R4); returns how many
    // waiters it woke.
    std::size_t dispatch(std::uint64_t token, unsigned events) noexcept;

    [[nodiscard]] static std::uint64_t token(const registration* r, std::uint32_t seq) noexcept {
        return (reinterpret_cast<std::uintptr_t>(r) >> 6) << seq_bits | (seq & ((1u << seq_bits) - 1));
    }
    [[nodiscard]] weft::detail::runtime_core* core() const noexcept { return core_; }
    [[nodiscard]] const char* backend_name() const noexcept { return backend_->name(); }
    [[nodiscard]] backend& get_backend() const noexcept { return *backend_; }
    [[nodiscard]] const std::string& fallback_reason() const noexcept { return fallback_; }
    [[nodiscard]] const std::string& features() const noexcept { return features_; }
    // arm_locked() is REACTOR-R6: called under r->mu before a waiter of r
    // sleeps. An error (epoll refusing the fd: ENOMEM, ENOSPC) leaves r
    // unarmed, and the waiter must not sleep: it reports the error instead.
    std::error_code arm_locked(registration* r) noexcept {
        if (r->armed) return {};
        if (const int rc = backend_->arm(r, token(r, r->seq)); rc < 0) return {-rc, std::system_category()};
        r->armed = true;
        return {};
    }

private:
    weft::detail::runtime_core* core_;
    std::unique_ptr<backend> backend_;
    std::string fallback_;
    std::string features_;  // backend_->features(), kept for backend_info's pointer
    std::mutex free_mu;
    registration* free_ = nullptr;
    std::vector<std::unique_ptr<registration[]>> chunks_;  // REACTOR-R1
};

// reactor_of() is the reactor of runtime c, made on first use.
reactor* reactor_of(weft::detail::runtime_core* c);

// ops_completed() is reactor_of(c)->get_backend().ops_completed(), for tests.
WEFT_API std::uint64_t ops_completed(weft::detail::runtime_core* c);
// recv_nobufs() is reactor_of(c)->get_backend().recv_nobufs(), for tests.
WEFT_API std::uint64_t recv_nobufs(weft::detail::runtime_core* c);

// ring_op is a submitted operation and the two waiters of IO-F1 (file.cpp),
// together off a shared stack (WAITER-V4 in weft/waiter.hpp): the completion
// writes them while the task is suspended.
struct ring_op {
    op_state op;
    weft::waiter w1, w2;
    void prepare(op_state::kind k, int fd, void* buf, std::uint32_t len, std::uint64_t offset) noexcept {
        op.op = k;
        op.fd = fd;
        op.buf = buf;
        op.len = len;
        op.offset = offset;
        op.done = false;
        op.res = 0;
        op.cflags = 0;
        op.next_op = nullptr;
    }
};

// run_op() submits r's operation to b and waits for its completion (IO-F1 in
// file.cpp); returns its result (a count or -errno), -ETIMEDOUT if the
// deadline passed and the op was canceled. Unwinds (after the completion) if
// the task is canceled. With `reg`, the op is linked to that registration
// (acquired with `seq`) while in flight and retire() cancels it (REACTOR-R7):
// -ECANCELED if the registration is closed, before or during the op.
int run_op(backend& b, ring_op& r, clock::time_point deadline, registration* reg = nullptr, std::uint32_t seq = 0);

// wait() waits on r (acquired with `seq`) for one direction
// (0 readable, 1 writable) from inside a task; see handle::wait().
std::error_code wait(registration* r, std::uint32_t seq, int dir, clock::time_point deadline);

}  // namespace weft::io::detail
