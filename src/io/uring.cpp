// uring.cpp: layer L6's io_uring backend (liburing), the same readiness
// contract as the epoll backend (reactor.hpp) so the reactor above is one
// piece.
//
//   URING-U1  every registration is one multishot IORING_OP_POLL_ADD (io_uring
//             poll is edge-triggered unless IORING_POLL_ADD_LEVEL is given), with
//             user_data = the reactor's token. Tokens never have bit 63 set (a
//             user-space address shifted by 6 then 22 bits), so internal requests
//             use user_data with bit 63 set: 1 (interrupt()'s NOPs), 2
//             (remove()'s ASYNC_CANCEL), 3 (cancel_op()'s ASYNC_CANCEL) are ignored, and any other value
//             with bit 63 set is an operation (URING-U7): bit 63 | the address of its
//             op_state, which is 8-aligned and not null, so never 1, 2 or 3;
//   URING-U2  the SQ is single-producer: every SQE is acquired and submitted under
//             mu_, at once (so remove()'s cancel has found its poll before
//             retire() returns and the fd is closed). The CQ
//             is consumed only under mu_ as well: by the polling thread (one at a
//             time, runtime SCHED-I2) and by a submitter that gets -EBUSY (CQ overflow on
//             old kernels), which moves the CQEs to backlog_ and interrupts the
//             poller; the poller hands the backlog out first;
//   URING-U3  a multishot poll that ends (a CQE without IORING_CQE_F_MORE) is
//             re-armed under mu_ only if its registration is still open with the
//             same sequence number (checked under the registration's lock, lock
//             order mu_ then r->mu); remove() comes after retire() has marked the
//             registration closed, so a re-arm either precedes remove()'s cancel
//             (which then cancels it) or does not happen;
//   URING-U4  remove() cancels the poll with IORING_OP_ASYNC_CANCEL on its
//             user_data, never IORING_OP_POLL_REMOVE: a poll holds a reference to
//             its file, so until it ends close() does not close the socket (no
//             FIN). POLL_REMOVE must take the poll's ownership, and while an event
//             for it is being delivered (the arming thread's task work owns it) it
//             answers -EALREADY and leaves a multishot poll armed for good: the
//             peer never saw EOF (1 connection in ~120 on 4 workers; kernel 6.18,
//             io_uring/poll.c io_poll_disarm()). ASYNC_CANCEL marks the poll
//             canceled instead, which its current owner sees, so it always ends,
//             at the latest when the arming thread next runs its task work;
//   URING-U5  files without poll support (regular files, directories, /dev/null)
//             are refused with EPERM as epoll refuses them: io_uring would complete
//             their poll at once, forever. Sockets and pipes skip the probe;
//   URING-U6  interrupt() submits an IORING_OP_NOP (internal user_data) under mu_.
//             Not an eventfd watched by a poll: a poll's completion is posted by
//             task work of the thread that armed it, and once that thread has
//             exited (a worker, a plain thread) the kernel ends the poll with
//             -ECANCELED from its fallback worker instead of posting the wake-up;
//             a NOP completes inside the submitting thread's io_uring_enter().
//             Polls of registrations that end that way are re-armed (URING-U3) by the
//             polling thread.
//   URING-U7  operations (start_op(): IORING_OP_READ / WRITE at an offset, for
//             io::file) are submitted under mu_ like every SQE; their CQE becomes
//             an event in the same place as the polls' (collect(), or the backlog
//             on -EBUSY) and is completed (op_state::complete(): result, claim,
//             wake) by the polling thread after mu_ is released: a wake may
//             interrupt() the poller, which takes mu_. cancel_op() submits an
//             IORING_OP_ASYNC_CANCEL for the op's user_data; the op's own CQE
//             still comes (-ECANCELED, or its result if it won the race) and its
//             submitter waits for it (IO-F1 in file.cpp): the kernel may write the
//             buffer until then. A submit that fails at the ring level turns the
//             op's SQE, still unconsumed, into a NOP, so it never runs later;
//   URING-U8  remove() returns only once the poll it cancels is over (its last
//             CQE, which the kernel posts in the same step as it frees the
//             request and drops the file), so that the close(2) after retire()
//             closes the file at once: a pipe's writer gets EPIPE, a socket's
//             peer its FIN (issue 43; epoll holds no reference to the file). The
//             poll's end is task work of the thread that armed it: remove()
//             returns at once when its cancel found no poll (its CQE, posted
//             within the submit under mu_, says -ENOENT); else it looks for the
//             poll's last CQE in the CQ, or for the poller's note that it reaped
//             it (ended_, under mu_), entering the ring with GETEVENTS in between
//             (which runs this thread's own task work, when it armed the poll)
//             and giving up after settle_limit (a thread that does not run its
//             task work that long: the file stays open until it does).

//
// The worker rings (worker_rings, for a runtime with two or more workers):
//
//   URING-W1  each worker has an owner ring of its own (URING-O1 - O7 hold for
//             each, its worker the owner): the worker polls it between tasks
//             (poll_now()) and sleeps in it (runtime SCHED-I3), and only it reaps
//             its completions. Readiness (accept, connect, pipes, select) stays
//             on one epoll instance, polled as before (SCHED-I1, SCHED-I2). If
//             any ring's setup fails the shared ring is tried, then epoll, and
//             features() says why;
//   URING-W2  an operation goes to the ring of the worker whose thread starts it
//             (a task's worker; any other thread: ring 0, by its mailbox) and
//             op_state::ring records which; cancel_op() goes to that ring, from any
//             thread by its FIFO mailbox (URING-O2), so REACTOR-R7 and IO-F1 hold as
//             on the owner ring. The task may run on another worker once its op
//             has completed; its next op goes to that worker's ring;
//   URING-W3  the watcher's ring waits for the epoll fd too: watch() arms a one-shot
//             poll on it before the wait (once: watch_armed_ until its completion
//             is reaped), and the watcher polls epoll without a timeout after
//             every wait, so readiness and epoll's interrupt() end the wait;
//   URING-W4  wake_worker(i) is ring i's interrupt() (URING-O4): the runtime's
//             kick() calls it after storing the worker's futex word (SCHED-I3).
//             A completion of ring i waits while worker i runs a task: a long task
//             delays the IO of the tasks that were started on its worker (the
//             thread-per-core trade; docs/io.md, "Backends").
//
// Provided buffers (provided_buffers, one per owner ring: the owner ring's, and
// each worker ring's):
//
//   URING-P1  a socket read (IO-R2 in handle.cpp) is an IORING_OP_RECV with
//             IOSQE_BUFFER_SELECT from the ring's buffer group 0, never into the
//             caller's buffer: the kernel writes nothing of the waiting task's,
//             so its stack is not pinned (SHRINK-A2) and an idle connection's
//             task can be shrunk. Each buffer is at every moment either in the
//             buffer ring (the kernel may take it when data arrives) or owned by
//             exactly one completion, the CQE whose IORING_CQE_F_BUFFER names it.
//             The owner gives a buffer back at once when its completion brought
//             no bytes (res <= 0: the end of the stream, an error), so a task
//             that unwinds holds none; otherwise the op's task, after run_op()
//             returned res > 0 (which it does whatever ended its wait: IO-F1,
//             REACTOR-R7), copies the res bytes into the caller's buffer and then
//             gives the buffer back, once, to the ring its op went to (URING-W2),
//             from whatever worker it runs on: give_back() appends at the buffer
//             ring's tail under the pool's spin lock (the producers are one at a
//             time; the kernel only reads the tail) and publishes it with a
//             release store. A buffer is in the ring at most once, so the tail
//             never passes the head by more than the ring's size. A receive that
//             finds the ring empty ends with -ENOBUFS and takes nothing: its task
//             reads with recv(2) and, if that finds nothing, waits by a one-shot
//             IORING_OP_POLL_ADD (as without provided buffers: turned off by
//             WEFT_IO_URING_OFF=provided_buffers, or refused by a kernel before
//             5.19). The buffers are registered before the ring is enabled
//             (URING-O1: SINGLE_ISSUER restricts io_uring_register() to the owner
//             afterwards) and unmapped after the ring is gone.
//
// The owner ring (owner_backend, for a runtime whose only poller is one thread):
//
//   URING-O1  one thread, the owner, makes every io_uring_enter() of the ring and
//             is the only one to touch its SQ and CQ: the first thread that polls.
//             The reactor makes this backend only for workers = 1, whose one
//             worker is then the only poller (runtime SCHED-I2). With
//             SINGLE_ISSUER the ring is created disabled (R_DISABLED) and the
//             owner enables it, which makes the owner the kernel's single issuer;
//   URING-O2  another thread (and the owner before its first poll) hands its
//             request (arm a poll, cancel, start an op) to the mailbox under
//             mbox_mu_ and interrupts the owner; the owner moves the mailbox to the
//             SQ in order at the start of each poll and before each SQE of its
//             own. So a request made after another, on whatever thread, reaches
//             the SQ after it (REACTOR-R7 relies on it for a cancel after its op,
//             made under one registration lock; and a stale cancel, handed over
//             by a close on another thread after its op completed, reaches the
//             SQ before the task's next op, which may have the same address and
//             so the same user_data; models/uring_owner.pml);
//   URING-O3  submissions are batched: an SQE written by the owner is submitted by
//             its next poll, in the io_uring_enter() that also reaps and, when the
//             worker has nothing to run, waits (the runtime polls between tasks
//             every io_interval tasks and before it sleeps, SCHED-I1/I2). A poll
//             with a zero timeout enters the kernel only if an SQE is queued or the
//             kernel flags deferred work or a CQ overflow (IORING_SQ_TASKRUN,
//             IORING_SQ_CQ_OVERFLOW; with TASKRUN_FLAG, else every time);
//   URING-O4  interrupt() from another thread stores kicked_ then loads waiting_
//             (seq_cst); the owner, before it blocks, stores waiting_ then
//             exchanges kicked_ (seq_cst). Either the owner sees the kick and does
//             not block, or the interrupter sees it waiting and writes the
//             eventfd, on which the ring always has a read pending (re-queued
//             after each completion): that completion ends the wait;
//   URING-O5  polls are armed lazily (REACTOR-R6): add() only checks the fd
//             (URING-U5); the first wait that has to sleep arms the multishot poll,
//             so a socket that is only read by IORING_OP_RECV has no poll;
//   URING-O6  setup asks for SINGLE_ISSUER + DEFER_TASKRUN (+ TASKRUN_FLAG), then
//             COOP_TASKRUN + TASKRUN_FLAG, then no flags; each refusal, and each
//             level turned off by WEFT_IO_URING_OFF, is named in features() (io::
//             backend_info); if no level works, the shared ring is tried, and then
//             the reactor falls back to epoll with the reason;
//   URING-O7  remove() returns only once the registration's poll is over
//             (URING-U8's reason): its cancel (cmd::remove) ends the poll by
//             task work that only the owner runs, inside an io_uring_enter()
//             with GETEVENTS (with DEFER_TASKRUN only there). On the owner (the
//             task closing runs on it), remove() puts the cancel and settle()s
//             at once: it enters the ring until the poll's last CQE is in the
//             CQ (at most 16 times). Another thread pushes the cancel into the
//             mailbox (URING-O2, so it reaches the SQ after the poll's arm),
//             takes a ticket (settle_asked_, under mbox_mu_, with the push),
//             interrupts the owner (URING-O4) and waits on the futex word
//             settle_done_ until it reaches the ticket; the owner's wait()
//             settle()s after its own enter when a drain_mailbox() took
//             tickets, then stores the last ticket taken and wakes the
//             waiters. That wait also ends when the owner thread has exited
//             (the kernel cancels a thread's requests as it exits) or after
//             settle_limit (an owner stuck in a long task: the file stays open
//             until its next poll); before the first poll there is no owner
//             and nothing in the kernel, and the closer does not wait (the
//             first poll submits the arm and the cancel together and ends the
//             poll in that same enter).

#if WEFT_HAVE_LIBURING

#include <fcntl.h>
#include <linux/futex.h>
#include <liburing.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "reactor.hpp"

namespace weft::io::detail {

static_assert(cqe_f_buffer == IORING_CQE_F_BUFFER && cqe_f_sock_nonempty == IORING_CQE_F_SOCK_NONEMPTY);

namespace {

constexpr std::uint64_t internal_bit = std::uint64_t{1} << 63;
constexpr std::uint64_t ud_wake = internal_bit | 1;    // interrupt()'s NOPs
constexpr std::uint64_t ud_remove = internal_bit | 2;  // remove()'s cancel results (URING-U4)
constexpr std::uint64_t ud_cancel = internal_bit | 3;  // ASYNC_CANCEL results (URING-U1)

std::uint64_t op_data(const op_state* op) noexcept { return internal_bit | reinterpret_cast<std::uintptr_t>(op); }
constexpr unsigned poll_mask = POLLIN | POLLOUT | POLLRDHUP | POLLERR | POLLHUP | POLLPRI;
constexpr unsigned default_entries = 256;
constexpr unsigned cq_entries_min = 4096;

// event is a poll's readiness (op null) or an operation's completion (URING-U7).
struct event {
    std::uint64_t token;
    unsigned bits;
    op_state* op;
    int res;
    std::uint32_t cflags;  // an operation's CQE flags (URING-P1)
};

// refuse_unpollable() is URING-U5 for fd: EPERM (from epoll, via the probe
// epoll instance) for a file without poll support; sockets and pipes skip
// the probe.
std::error_code refuse_unpollable(int probe, int fd) noexcept {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return {errno, std::system_category()};
    if (!S_ISSOCK(st.st_mode) && !S_ISFIFO(st.st_mode)) {
        epoll_event e{};
        e.events = EPOLLIN;
        if (::epoll_ctl(probe, EPOLL_CTL_ADD, fd, &e) != 0) return {errno, std::system_category()};
        (void)::epoll_ctl(probe, EPOLL_CTL_DEL, fd, &e);
    }
    return {};
}

// poll_event() turns a poll's CQE (user_data = a token, URING-U1) into an
// event for dispatch(); false when there is nothing to hand out. `rearm`
// says whether the multishot poll ended and may be armed again (URING-U3).
bool poll_event(std::uint64_t ud, int res, bool more, event& e, bool& rearm) noexcept {
    e.op = nullptr;
    e.res = 0;
    e.cflags = 0;
    e.token = ud;
    e.bits = 0;
    rearm = !more && (res >= 0 || res == -ECANCELED || res == -ENOMEM || res == -EAGAIN);
    if (res < 0) {
        if (res == -ECANCELED || res == -ENOMEM || res == -EAGAIN) return false;
        e.bits = ev_read | ev_write | ev_error;  // EBADF and the like: the waiters retry and see it
        return true;
    }
    const auto m = static_cast<unsigned>(res);
    if (m & (POLLIN | POLLRDHUP | POLLPRI)) e.bits |= ev_read;
    if (m & POLLOUT) e.bits |= ev_write;
    if (m & (POLLERR | POLLHUP)) e.bits |= ev_error;
    return e.bits != 0;
}

// poll_ended_in_cq() is whether ring's CQ holds, not yet reaped, the last
// CQE (no IORING_CQE_F_MORE) of the poll whose user_data is `token`
// (URING-U8, URING-O7). The kernel posts a request's last CQE and then frees
// the request, dropping its file, in one step before the io_uring_enter()
// that ran it returns. Reads the CQ without consuming it: only a thread that
// may consume it (under mu_, or the owner) calls it.
bool poll_ended_in_cq(io_uring& ring, std::uint64_t token) noexcept {
    unsigned head;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(&ring, head, cqe) {
        if (cqe->user_data == token && !(cqe->flags & IORING_CQE_F_MORE)) return true;
    }
    return false;
}

// settle_limit bounds how long a close waits for another thread to end the
// fd's poll (URING-U8, URING-O7): that thread may be busy in a long task,
// or blocked; the wait must end all the same.
constexpr auto settle_limit = std::chrono::seconds(1);

// hand_out() gives n events out, outside every lock of the backend:
// operations complete (URING-U7), polls' events go to dispatch(). Returns
// how many waiters were woken.
std::size_t hand_out(const event* evs, std::size_t n, reactor& re, std::atomic<std::uint64_t>& completed) noexcept {
    std::size_t woke = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (op_state* op = evs[i].op) {
            completed.fetch_add(1, std::memory_order_relaxed);
            op->complete(evs[i].res, evs[i].cflags);
            ++woke;
            continue;
        }
        woke += re.dispatch(evs[i].token, evs[i].bits);
    }
    return woke;
}

// open_fd() is the fd of the registration that `token` names if it is still
// open with the token's sequence number (URING-U3: only then is its poll
// armed again), else -1. Takes the registration's lock.
int open_fd(std::uint64_t token) noexcept {
    constexpr std::uint64_t seq_mask = (1u << reactor::seq_bits) - 1;
    auto* r = reinterpret_cast<registration*>(static_cast<std::uintptr_t>(token >> reactor::seq_bits) << 6);
    std::lock_guard g(r->mu);
    if (r->closed || (r->seq & seq_mask) != (token & seq_mask)) return -1;
    return r->fd;
}

class uring_backend final : public backend {
public:
    uring_backend() = default;
    uring_backend(const uring_backend&) = delete;
    uring_backend& operator=(const uring_backend&) = delete;

    // init() sets the ring up; false with `why` set when it cannot be used.
    bool init(unsigned entries, std::string& why) {
        io_uring_params p{};
        p.flags = IORING_SETUP_CQSIZE;
        // A CQ four times the SQ (at least cq_entries_min): every registration
        // may have a completion in it. No overflow for absurd `entries`: the
        // kernel refuses those with EINVAL.
        p.cq_entries = entries > (1u << 28) ? entries : std::max(cq_entries_min, entries * 4);
        if (const int rc = ::io_uring_queue_init_params(entries, &ring_, &p); rc < 0) {
            why = std::string("io_uring_setup: ") + std::strerror(-rc);
            return false;
        }
        ring_ok_ = true;
        // EXT_ARG (5.11): a wait with a timeout that takes no SQE (URING-U2).
        // RSRC_TAGS (5.13) is the first feature bit of the kernel that has
        // multishot poll.
        if (!(p.features & IORING_FEAT_EXT_ARG) || !(p.features & IORING_FEAT_NODROP) ||
            !(p.features & IORING_FEAT_RSRC_TAGS)) {
            why = "io_uring: the kernel lacks multishot poll or timed waits (needs Linux 5.13)";
            return false;
        }
        probe_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (probe_ < 0) {
            why = std::string("io_uring: epoll_create1: ") + std::strerror(errno);
            return false;
        }
        return true;
    }

    ~uring_backend() override {
        if (ring_ok_) ::io_uring_queue_exit(&ring_);  // cancels every poll
        if (probe_ >= 0) ::close(probe_);
    }

    std::error_code add(registration* r, std::uint64_t token) noexcept override {
        const int fd = r->fd;
        if (const std::error_code ec = refuse_unpollable(probe_, fd)) return ec;  // URING-U5
        std::lock_guard g(mu_);
        if (const int rc = arm_locked(fd, token); rc < 0) return {-rc, std::system_category()};
        return {};
    }

    void remove(registration* r) noexcept override {
        // The token is the one the registration was added with: retire()
        // calls remove() before it bumps the sequence number. URING-U4: a cancel,
        // not a POLL_REMOVE.
        std::uint64_t token;
        {
            std::lock_guard g(r->mu);
            token = reactor::token(r, r->seq);
        }
        std::unique_lock g(mu_);
        io_uring_sqe* sqe = sqe_locked();
        ::io_uring_prep_cancel64(sqe, token, 0);
        ::io_uring_sqe_set_data64(sqe, ud_remove);
        (void)submit_locked();
        // URING-U8: return only once the poll is over. Its end is task work
        // of the thread that armed it: this one (then it has run on the way
        // out of the submit, or runs in the enter below), or another, which
        // the kernel interrupts to run it. The cancel itself completes within
        // the submit (under mu_, so the last ud_remove CQE is this one's):
        // anything but 0 or -EALREADY means there was no poll left to end.
        if (const int rc = last_remove_result_locked(); rc != 0 && rc != -EALREADY) return;
        try {
            ended_.push_back({token, false});
        } catch (...) {  // out of memory: not waited for
            return;
        }
        const auto until = std::chrono::steady_clock::now() + settle_limit;
        for (;;) {
            auto it = std::find_if(ended_.begin(), ended_.end(), [&](const ending& e) { return e.token == token; });
            if (it->ended || poll_ended_in_cq(ring_, token) || std::chrono::steady_clock::now() >= until) {
                ended_.erase(it);
                return;
            }
            g.unlock();
            // Runs this thread's task work (GETEVENTS, no minimum: no wait).
            (void)::syscall(__NR_io_uring_enter, ring_.ring_fd, 0, 0, IORING_ENTER_GETEVENTS, nullptr, 0);
            std::this_thread::yield();
            g.lock();
        }
    }

    std::size_t wait(std::int64_t timeout_ns, reactor& re) noexcept override {
        event evs[batch];
        bool seen = false;
        std::size_t n = collect(evs, seen);
        // Block only if nothing at all was there: an interrupt()'s NOP that
        // the first collect() took must end this wait.
        if (!seen && timeout_ns != 0) {
            __kernel_timespec ts{timeout_ns / 1'000'000'000, timeout_ns % 1'000'000'000};
            io_uring_getevents_arg arg{};
            arg.sigmask_sz = _NSIG / 8;
            arg.ts = timeout_ns > 0 ? reinterpret_cast<std::uint64_t>(&ts) : 0;
            // Waits without taking mu_ and without touching the SQ (URING-U2);
            // ETIME, EINTR and the like all mean "look again later".
            (void)::syscall(__NR_io_uring_enter, ring_.ring_fd, 0, 1, IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG, &arg,
                            sizeof arg);
            n = collect(evs, seen);
        }
        return hand_out(evs, n, re, ops_completed_);  // URING-U7, outside mu_
    }

    void interrupt() noexcept override {  // URING-U6
        std::lock_guard g(mu_);
        interrupt_locked();
    }
    [[nodiscard]] const char* name() const noexcept override { return "io_uring"; }
    [[nodiscard]] std::string features() const override { return features_; }
    void set_features(std::string f) { features_ = std::move(f); }

    [[nodiscard]] bool supports_ops() const noexcept override { return true; }

    int start_op(op_state* op) noexcept override {  // URING-U7
        std::lock_guard g(mu_);
        io_uring_sqe* sqe = sqe_locked();
        const unsigned pos = ring_.sq.sqe_tail - 1;  // sqe's place in the SQ
        if (op->op == op_state::read)
            ::io_uring_prep_read(sqe, op->fd, op->buf, op->len, op->offset);
        else
            ::io_uring_prep_write(sqe, op->fd, op->buf, op->len, op->offset);
        ::io_uring_sqe_set_data64(sqe, op_data(op));
        const int rc = submit_locked();
        if (rc >= 0) return 0;
        // Not submitted: if the kernel has not consumed the SQE, a later
        // submit would, after the caller has gone. Make it a NOP.
        const unsigned head = io_uring_smp_load_acquire(ring_.sq.khead);
        if (static_cast<int>(pos - head) >= 0) {
            ::io_uring_prep_nop(sqe);
            ::io_uring_sqe_set_data64(sqe, ud_wake);
            return rc;
        }
        return 0;  // consumed after all: its completion comes
    }

    void cancel_op(op_state* op) noexcept override {  // URING-U7
        std::lock_guard g(mu_);
        io_uring_sqe* sqe = sqe_locked();
        ::io_uring_prep_cancel64(sqe, op_data(op), 0);
        ::io_uring_sqe_set_data64(sqe, ud_cancel);
        (void)submit_locked();
    }

    [[nodiscard]] std::uint64_t ops_completed() const noexcept override {
        return ops_completed_.load(std::memory_order_relaxed);
    }

private:
    static constexpr std::size_t batch = 128;

    // sqe_locked() is a free SQE, submitting to make room if the SQ is full.
    io_uring_sqe* sqe_locked() noexcept {
        for (;;) {
            if (io_uring_sqe* sqe = ::io_uring_get_sqe(&ring_)) return sqe;
            (void)submit_locked();
        }
    }

    // last_remove_result_locked() is the res of the newest unreaped CQE of a
    // remove()'s cancel, or 0 if there is none (not posted yet, or in the
    // kernel's overflow list).
    int last_remove_result_locked() noexcept {
        int res = 0;
        unsigned head;
        io_uring_cqe* cqe;
        io_uring_for_each_cqe(&ring_, head, cqe) {
            if (cqe->user_data == ud_remove) res = cqe->res;
        }
        return res;
    }

    // submit_locked() submits what is queued; on -EBUSY (a CQ overflow the
    // kernel could not flush) it moves the CQ to backlog_, wakes the poller
    // and tries again (URING-U2). Returns a negative errno for other failures.
    int submit_locked() noexcept {
        in_submit_ = true;
        for (;;) {
            const int rc = ::io_uring_submit(&ring_);
            if (rc == -EINTR || rc == -EAGAIN) continue;
            if (rc != -EBUSY) {
                in_submit_ = false;
                return rc;
            }
            drain_to_backlog_locked();
            interrupt_locked();  // queued; this loop submits it
        }
    }

    // interrupt_locked() queues a NOP; the submit that follows (the
    // caller's, or this one's) posts its completion.
    void interrupt_locked() noexcept {
        io_uring_sqe* sqe = ::io_uring_get_sqe(&ring_);
        if (!sqe) return;  // the SQ is full: its submission will wake the poller anyway
        ::io_uring_prep_nop(sqe);
        ::io_uring_sqe_set_data64(sqe, ud_wake);
        if (!in_submit_) (void)submit_locked();
    }

    // arm_locked() starts a multishot poll on fd carrying user_data.
    int arm_locked(int fd, std::uint64_t user_data) noexcept {
        io_uring_sqe* sqe = sqe_locked();
        ::io_uring_prep_poll_multishot(sqe, fd, poll_mask);
        ::io_uring_sqe_set_data64(sqe, user_data);
        const int rc = submit_locked();
        return rc < 0 ? rc : 0;
    }

    // pop_locked() takes one CQE off the CQ (a copy: the CQ's head moves
    // before the CQE is handled, since handling it may submit, and a submit
    // that gets -EBUSY drains the CQ itself).
    bool pop_locked(io_uring_cqe& out) noexcept {
        io_uring_cqe* cqe = nullptr;
        if (::io_uring_peek_cqe(&ring_, &cqe) != 0 || !cqe) return false;
        out = *cqe;
        ::io_uring_cqe_seen(&ring_, cqe);
        return true;
    }

    void drain_to_backlog_locked() noexcept {
        io_uring_cqe cqe;
        while (pop_locked(cqe)) {
            event e;
            if (translate_locked(&cqe, e)) {
                try {
                    backlog_.push_back(e);
                } catch (...) {  // out of memory: the event is dropped; its waiters time out
                }
            }
        }
    }

    // collect() takes the backlog and the CQ's events (up to `batch`) under
    // mu_, re-arming ended polls (URING-U3).
    // `seen` is set when anything was taken, internal CQEs included.
    std::size_t collect(event (&out)[batch], bool& seen) noexcept {
        std::lock_guard g(mu_);
        std::size_t n = 0;
        seen = !backlog_.empty();
        while (n < batch && !backlog_.empty()) {
            out[n++] = backlog_.back();
            backlog_.pop_back();
        }
        io_uring_cqe cqe;
        while (n < batch && pop_locked(cqe)) {
            seen = true;
            if (translate_locked(&cqe, out[n])) ++n;
        }
        return n;
    }

    // translate_locked() turns a CQE into an event for dispatch(), or false
    // for an internal one; re-arms a poll that ended (URING-U3).
    bool translate_locked(const io_uring_cqe* cqe, event& e) noexcept {
        const std::uint64_t ud = ::io_uring_cqe_get_data64(cqe);
        const bool more = cqe->flags & IORING_CQE_F_MORE;
        const int res = cqe->res;
        if (ud & internal_bit) {
            if (ud == ud_wake || ud == ud_remove || ud == ud_cancel) return false;  // URING-U1
            e.token = 0;
            e.bits = 0;
            e.op = reinterpret_cast<op_state*>(static_cast<std::uintptr_t>(ud & ~internal_bit));  // URING-U7
            e.res = res;
            e.cflags = 0;  // the shared ring takes no recv_select (URING-P1)
            return true;
        }
        bool rearm = false;
        const bool out = poll_event(ud, res, more, e, rearm);
        if (rearm) rearm_locked(ud);
        if (!more)  // URING-U8: a remove() may be waiting for this poll's end
            for (ending& w : ended_)
                if (w.token == ud) w.ended = true;
        return out;
    }

    void rearm_locked(std::uint64_t token) noexcept {
        if (const int fd = open_fd(token); fd >= 0) (void)arm_locked(fd, token);
    }

    io_uring ring_{};
    bool ring_ok_ = false;
    bool in_submit_ = false;  // guarded by mu_: interrupt_locked() inside submit_locked()
    int probe_ = -1;  // URING-U5
    std::mutex mu_;   // URING-U2
    std::vector<event> backlog_;
    // URING-U8: the polls whose end a remove() waits for, and whether the
    // poller has reaped that end meanwhile (guarded by mu_).
    struct ending {
        std::uint64_t token;
        bool ended;
    };
    std::vector<ending> ended_;
    std::atomic<std::uint64_t> ops_completed_{0};
    std::string features_ = "io_uring shared ring";
};


// ---- provided buffers (URING-P1) --------------------------------------------

// provided_buffers is one owner ring's provided-buffer ring (IORING_REGISTER_
// PBUF_RING, Linux 5.19; buffer group 0): count() buffers of `size` bytes in
// one anonymous mapping, whose pages are touched only as the kernel first
// fills them. The kernel takes the buffer at the ring's head when a
// recv_select op's data arrives; give_back() puts a buffer back at the tail.
// The tail is written by whoever gives back (the owner, or the task that
// copied the bytes out, on any worker: the spin lock makes them one
// producer at a time); the kernel only reads it.
class provided_buffers {
public:
    static constexpr unsigned default_count = 256;  // a power of two, at most 32,768
    static constexpr unsigned size = 16 * 1024;     // the largest receive into one (a read_some's usual buffer)
    static constexpr std::uint16_t group = 0;

    provided_buffers() = default;
    provided_buffers(const provided_buffers&) = delete;
    provided_buffers& operator=(const provided_buffers&) = delete;
    // The ring must be gone first (io_uring_queue_exit() unregisters).
    ~provided_buffers() { unmap(); }

    // init() maps `count` buffers (a power of two, 1 .. 32,768), registers
    // them with `ring` and offers every one; the errno when that fails
    // (EINVAL before Linux 5.19).
    int init(io_uring& ring, unsigned count) noexcept {
        count_ = count;
        ring_bytes_ = std::max<std::size_t>(std::size_t{count} * sizeof(io_uring_buf), 4096);
        void* br = ::mmap(nullptr, ring_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (br == MAP_FAILED) return errno;
        br_ = static_cast<io_uring_buf_ring*>(br);
        void* base = ::mmap(nullptr, std::size_t{count_} * size, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (base == MAP_FAILED) {
            const int e = errno;
            unmap();
            return e;
        }
        base_ = static_cast<std::byte*>(base);
        io_uring_buf_reg reg{};
        reg.ring_addr = reinterpret_cast<std::uintptr_t>(br_);
        reg.ring_entries = count_;
        reg.bgid = group;
        if (const int rc = ::io_uring_register_buf_ring(&ring, &reg, 0); rc < 0) {
            unmap();
            return -rc;
        }
        ::io_uring_buf_ring_init(br_);
        for (unsigned i = 0; i < count_; ++i)
            ::io_uring_buf_ring_add(br_, base_ + std::size_t{i} * size, size, static_cast<unsigned short>(i),
                                    ::io_uring_buf_ring_mask(count_), static_cast<int>(i));
        ::io_uring_buf_ring_advance(br_, static_cast<int>(count_));
        return 0;
    }

    [[nodiscard]] const std::byte* at(std::uint32_t cflags) const noexcept {
        return base_ + std::size_t{cflags >> IORING_CQE_BUFFER_SHIFT} * size;
    }
    void give_back(std::uint32_t cflags) noexcept {
        const auto bid = static_cast<unsigned short>(cflags >> IORING_CQE_BUFFER_SHIFT);
        std::lock_guard g(mu_);
        ::io_uring_buf_ring_add(br_, base_ + std::size_t{bid} * size, size, bid, ::io_uring_buf_ring_mask(count_), 0);
        ::io_uring_buf_ring_advance(br_, 1);
    }

    [[nodiscard]] unsigned count() const noexcept { return count_; }

    // count_from_env() is WEFT_IO_URING_BUFFERS (read when a ring is made):
    // a power of two from 1 to 32,768, else default_count. Tests run the
    // buffers out with a few.
    static unsigned count_from_env() noexcept {
        const char* v = std::getenv("WEFT_IO_URING_BUFFERS");
        if (!v) return default_count;
        char* end = nullptr;
        const unsigned long n = std::strtoul(v, &end, 10);
        if (end == v || *end != '\0' || n == 0 || n > 32768 || (n & (n - 1)) != 0) return default_count;
        return static_cast<unsigned>(n);
    }

private:
    void unmap() noexcept {
        if (base_) ::munmap(base_, std::size_t{count_} * size);
        if (br_) ::munmap(br_, ring_bytes_);
        base_ = nullptr;
        br_ = nullptr;
    }

    unsigned count_ = 0;
    std::size_t ring_bytes_ = 0;
    io_uring_buf_ring* br_ = nullptr;
    std::byte* base_ = nullptr;
    weft::spin_lock mu_;
};

// ---- the owner ring (URING-O1 - URING-O7) ------------------------------------

// owner_backend is one ring that only its owner thread enters: the runtime's
// only worker. Its readiness contract is the shared ring's (URING-U1, U3, U4,
// U5 hold as written there, with "under mu_" read as "on the owner thread").
class owner_backend final : public backend {
public:
    owner_backend() = default;
    owner_backend(const owner_backend&) = delete;
    owner_backend& operator=(const owner_backend&) = delete;

    // init() sets the ring up with the best setup the kernel takes
    // (URING-O6); false with `why` set when none works.
    bool init(unsigned entries, unsigned off, std::string& why, const char* title = "io_uring owner ring (one worker)") {
        struct level {
            unsigned flags;
            unsigned off_bit;
            const char* name;
        };
        static constexpr level levels[] = {
            {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG |
                 IORING_SETUP_R_DISABLED,
             off_defer_taskrun, "SINGLE_ISSUER+DEFER_TASKRUN"},
            {IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG, off_coop_taskrun, "COOP_TASKRUN"},
            {0, 0, "no task-run flags"},
        };
        features_ = title;
        for (const level& l : levels) {
            if (l.off_bit & off) {
                features_ += std::string("; ") + l.name + " turned off (WEFT_IO_URING_OFF)";
                continue;
            }
            io_uring_params p{};
            p.flags = IORING_SETUP_CQSIZE | l.flags;
            p.cq_entries = std::max(cq_entries_min, entries * 4);
            const int rc = ::io_uring_queue_init_params(entries, &ring_, &p);
            if (rc < 0) {
                features_ += std::string("; ") + l.name + " refused: " + std::strerror(-rc);
                continue;
            }
            ring_ok_ = true;
            disabled_ = l.flags & IORING_SETUP_R_DISABLED;
            taskrun_flag_ = l.flags & IORING_SETUP_TASKRUN_FLAG;
            features_ += std::string("; ") + l.name;
            if (!(p.features & IORING_FEAT_EXT_ARG) || !(p.features & IORING_FEAT_NODROP) ||
                !(p.features & IORING_FEAT_RSRC_TAGS)) {
                why = "io_uring: the kernel lacks multishot poll or timed waits (needs Linux 5.13)";
                return false;
            }
            break;
        }
        if (!ring_ok_) {
            why = "io_uring: " + features_;
            return false;
        }
        recv_ = !(off & off_recv_op);
        if (!recv_) {
            features_ += "; sockets by readiness (recv_op turned off)";
        } else if (off & off_provided_buffers) {
            features_ += "; sockets: IORING_OP_POLL_ADD then recv(2) (provided_buffers turned off (WEFT_IO_URING_OFF)), "
                         "send(2) then IORING_OP_SEND";
        } else if (const int e = pool_.init(ring_, provided_buffers::count_from_env()); e != 0) {  // URING-P1
            features_ += std::string("; sockets: IORING_OP_POLL_ADD then recv(2) (provided buffers refused: ") +
                         std::strerror(e) + "), send(2) then IORING_OP_SEND";
        } else {
            select_ = true;
            features_ += "; sockets: IORING_OP_RECV into provided buffers (" + std::to_string(pool_.count()) +
                         " x " + std::to_string(provided_buffers::size / 1024) +
                         " KiB), send(2) then IORING_OP_SEND";
        }
        features_ += "; batched submission";
        probe_ = ::epoll_create1(EPOLL_CLOEXEC);
        efd_ = ::eventfd(0, EFD_CLOEXEC);  // blocking: the ring's read of it waits (URING-O4)
        if (probe_ < 0 || efd_ < 0) {
            why = std::string("io_uring: epoll_create1 / eventfd: ") + std::strerror(errno);
            return false;
        }
        return true;
    }

    ~owner_backend() override {
        if (ring_ok_) ::io_uring_queue_exit(&ring_);
        if (probe_ >= 0) ::close(probe_);
        if (efd_ >= 0) ::close(efd_);
    }

    std::error_code add(registration* r, std::uint64_t token) noexcept override {
        (void)token;                                // URING-O5: armed by the first wait
        return refuse_unpollable(probe_, r->fd);  // URING-U5
    }
    [[nodiscard]] bool lazy() const noexcept override { return true; }
    int arm(registration* r, std::uint64_t token) noexcept override {
        return submit({cmd::arm, r->fd, token, nullptr}) ? 0 : -ENOMEM;
    }

    // remove() is URING-U4's cancel, and returns only once the poll is over
    // (URING-O7).
    void remove(registration* r) noexcept override {
        std::uint64_t token;
        {
            std::lock_guard g(r->mu);
            token = reactor::token(r, r->seq);
        }
        if (is_owner()) {
            (void)submit({cmd::remove, -1, token, nullptr});
            settle();
            return;
        }
        std::uint32_t ticket;
        {
            std::lock_guard g(mbox_mu_);
            try {
                mbox_.push_back({cmd::remove, -1, token, nullptr});
            } catch (...) {  // out of memory: the poll stays until the ring is gone
                return;
            }
            ticket = ++settle_asked_;
            mbox_full_.store(true, std::memory_order_seq_cst);
        }
        interrupt();
        await_settled(ticket);
    }

    std::size_t wait(std::int64_t timeout_ns, reactor& re) noexcept override {
        own();
        drain_mailbox();
        bool block = timeout_ns != 0 && ::io_uring_cq_ready(&ring_) == 0;
        if (block) {  // URING-O4
            waiting_.store(true, std::memory_order_seq_cst);
            if (kicked_.exchange(false, std::memory_order_seq_cst) || mbox_full_.load(std::memory_order_seq_cst)) {
                block = false;
                waiting_.store(false, std::memory_order_relaxed);  // interrupts need not write the eventfd
                drain_mailbox();
            }
        }
        if (block) {
            __kernel_timespec ts{timeout_ns / 1'000'000'000, timeout_ns % 1'000'000'000};
            io_uring_cqe* cqe = nullptr;
            (void)::io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, timeout_ns > 0 ? &ts : nullptr, nullptr);
            waiting_.store(false, std::memory_order_relaxed);
        } else if (::io_uring_sq_ready(&ring_) != 0 || !taskrun_flag_ ||
                   (IO_URING_READ_ONCE(*ring_.sq.kflags) & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW))) {
            (void)::io_uring_submit_and_get_events(&ring_);  // URING-O3
        }
        if (!settling_.empty() || settle_seen_ != settle_done_.load(std::memory_order_relaxed)) settle();  // URING-O7
        // At most one batch per poll, as epoll_wait() takes at most 128
        // events: the rest stay in the CQ for the next poll (which then does
        // not block), so the tasks woken by one poll run before more are
        // woken.
        io_uring_cqe* cqes[batch];
        const unsigned n = ::io_uring_peek_batch_cqe(&ring_, cqes, batch);
        event evs[batch];
        std::size_t m = 0;
        for (unsigned i = 0; i < n; ++i)
            if (translate(cqes[i], evs[m])) ++m;
        ::io_uring_cq_advance(&ring_, n);
        return hand_out(evs, m, re, ops_completed_);
    }

    void interrupt() noexcept override {  // URING-O4
        if (is_owner()) return;  // the owner is not waiting: it is here
        kicked_.store(true, std::memory_order_seq_cst);
        if (waiting_.load(std::memory_order_seq_cst)) {
            const std::uint64_t one = 1;
            (void)!::write(efd_, &one, sizeof one);
        }
    }
    [[nodiscard]] const char* name() const noexcept override { return "io_uring"; }
    [[nodiscard]] std::string features() const override { return features_; }
    [[nodiscard]] bool supports_ops() const noexcept override { return true; }
    [[nodiscard]] bool supports_recv() const noexcept override { return recv_; }
    [[nodiscard]] std::uint32_t recv_select_max() const noexcept override {
        return select_ ? provided_buffers::size : 0;
    }
    [[nodiscard]] const std::byte* selected(const op_state& op) const noexcept override { return pool_.at(op.cflags); }
    void give_back(const op_state& op) noexcept override { pool_.give_back(op.cflags); }  // URING-P1
    [[nodiscard]] std::uint64_t recv_nobufs() const noexcept override {
        return nobufs_.load(std::memory_order_relaxed);
    }

    int start_op(op_state* op) noexcept override { return submit({cmd::op, -1, 0, op}) ? 0 : -ENOMEM; }
    void cancel_op(op_state* op) noexcept override { submit({cmd::cancel, -1, op_data(op), nullptr}); }
    [[nodiscard]] std::uint64_t ops_completed() const noexcept override {
        return ops_completed_.load(std::memory_order_relaxed);
    }

    // watch() makes the ring's next wait also end when fd becomes readable
    // (a one-shot poll, armed again after it fires); owner only (URING-W3).
    void watch(int fd) noexcept {
        own();
        if (watch_armed_) return;
        watch_armed_ = true;
        drain_mailbox();
        io_uring_sqe* e = sqe();
        ::io_uring_prep_poll_add(e, fd, POLLIN);
        ::io_uring_sqe_set_data64(e, ud_watch);
    }

private:
    static constexpr unsigned batch = 128;
    static constexpr std::uint64_t ud_read_wake = internal_bit | 4;  // the eventfd's read (URING-O4)
    static constexpr std::uint64_t ud_watch = internal_bit | 5;      // watch()'s poll (URING-W3)

    // own() is URING-O1: the first thread that polls owns the ring.
    void own() noexcept {
        if (owned_) return;
        owned_ = true;
        // liburing 2.3 declares io_uring_enable_rings() but its library
        // lacks it: the register call itself.
        if (disabled_) (void)::syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0);
        owner_.store(std::this_thread::get_id(), std::memory_order_seq_cst);
        owner_tid_.store(static_cast<pid_t>(::syscall(SYS_gettid)), std::memory_order_seq_cst);
        queue_read_wake();
    }

    // cmd is one request for the SQ (URING-O2).
    struct cmd {
        enum kind : std::uint8_t { arm, cancel, op, remove } k;
        int fd;
        std::uint64_t data;  // arm, remove: the token; cancel: the user_data to cancel
        op_state* o;
    };

    [[nodiscard]] bool is_owner() const noexcept {
        return owner_.load(std::memory_order_relaxed) == std::this_thread::get_id();
    }

    // submit() is URING-O2: the owner writes the SQE (sent by its next poll,
    // URING-O3); another thread hands the request over and interrupts it.
    bool submit(const cmd& c) noexcept {
        if (is_owner()) {
            // URING-O2: what another thread handed over earlier goes first. A
            // cancel that retire() made on another thread for an op that has
            // completed since must not reach the SQ after a new op that has
            // the same address (the next op of the same task frame).
            drain_mailbox();
            put(c);
            return true;
        }
        {
            std::lock_guard g(mbox_mu_);
            try {
                mbox_.push_back(c);
            } catch (...) {  // out of memory: not handed over (start_op() says so)
                return false;
            }
            mbox_full_.store(true, std::memory_order_seq_cst);
        }
        interrupt();
        return true;
    }

    void drain_mailbox() noexcept {
        if (!mbox_full_.load(std::memory_order_seq_cst)) return;
        std::vector<cmd> took;
        std::uint32_t asked;
        {
            std::lock_guard g(mbox_mu_);
            took.swap(mbox_);
            asked = settle_asked_;
            mbox_full_.store(false, std::memory_order_relaxed);
        }
        for (const cmd& c : took) put(c);
        settle_seen_ = asked;  // URING-O7: the next wait() settles these and says so
    }

    // settle() is URING-O7 on the owner: it submits what is queued and
    // enters the ring (which runs the deferred task work that ends a
    // canceled poll) until the last CQE of every poll in settling_ is in
    // the CQ, at most settle_rounds times; then it tells the threads that
    // wait in await_settled() for what the mailbox had brought so far.
    void settle() noexcept {
        static constexpr int settle_rounds = 16;
        for (int i = 0; i < settle_rounds; ++i) {
            (void)::io_uring_submit_and_get_events(&ring_);
            std::erase_if(settling_, [this](std::uint64_t t) { return poll_ended_in_cq(ring_, t); });
            if (settling_.empty() && ::io_uring_sq_ready(&ring_) == 0) break;
        }
        settling_.clear();  // given up on (a CQ overflow hides the CQE): bounded all the same
        if (settle_seen_ != settle_done_.load(std::memory_order_relaxed)) {
            settle_done_.store(settle_seen_, std::memory_order_seq_cst);
            (void)::syscall(SYS_futex, &settle_done_, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
        }
    }

    // await_settled() waits until the owner has settled `ticket` (URING-O7),
    // the owner thread has exited (the kernel cancels a thread's requests
    // when it exits), or settle_limit has passed. No owner yet: nothing of
    // this ring is in the kernel (the owner's first poll submits the poll
    // and its cancel together, and ends it in that io_uring_enter()).
    void await_settled(std::uint32_t ticket) noexcept {
        const pid_t tid = owner_tid_.load(std::memory_order_seq_cst);
        if (tid == 0) return;
        const auto until = std::chrono::steady_clock::now() + settle_limit;
        for (;;) {
            const std::uint32_t done = settle_done_.load(std::memory_order_seq_cst);
            if (static_cast<std::int32_t>(done - ticket) >= 0) return;
            if (::syscall(SYS_tgkill, ::getpid(), tid, 0) != 0 && errno == ESRCH) return;
            const auto now = std::chrono::steady_clock::now();
            if (now >= until) return;
            timespec slice{0, 1'000'000};  // looks at the owner again every millisecond
            (void)::syscall(SYS_futex, &settle_done_, FUTEX_WAIT_PRIVATE, done, &slice, nullptr, 0);
        }
    }

    // sqe() is a free SQE, submitting what is queued to make room.
    io_uring_sqe* sqe() noexcept {
        for (;;) {
            if (io_uring_sqe* e = ::io_uring_get_sqe(&ring_)) return e;
            (void)::io_uring_submit(&ring_);
        }
    }

    // put() writes c's SQE (owner only).
    void put(const cmd& c) noexcept {
        io_uring_sqe* e = sqe();
        switch (c.k) {
        case cmd::arm: ::io_uring_prep_poll_multishot(e, c.fd, poll_mask); break;
        case cmd::cancel: ::io_uring_prep_cancel64(e, c.data, 0); break;
        case cmd::remove:  // URING-U4's cancel; settle() waits for the poll's end (URING-O7)
            ::io_uring_prep_cancel64(e, c.data, 0);
            try {
                settling_.push_back(c.data);
            } catch (...) {  // out of memory: not waited for
            }
            break;
        case cmd::op: {
            op_state* op = c.o;
            if (op->op == op_state::read)
                ::io_uring_prep_read(e, op->fd, op->buf, op->len, op->offset);
            else if (op->op == op_state::write)
                ::io_uring_prep_write(e, op->fd, op->buf, op->len, op->offset);
            else if (op->op == op_state::recv_select) {  // URING-P1: into a buffer of the ring's
                ::io_uring_prep_recv(e, op->fd, nullptr, op->len, 0);
                e->flags |= IOSQE_BUFFER_SELECT;
                e->buf_group = provided_buffers::group;
            } else if (op->op == op_state::poll_in)
                ::io_uring_prep_poll_add(e, op->fd, POLLIN | POLLRDHUP);
            else
                ::io_uring_prep_send(e, op->fd, op->buf, op->len, MSG_NOSIGNAL);
            ::io_uring_sqe_set_data64(e, op_data(op));
            return;
        }
        }
        ::io_uring_sqe_set_data64(e, c.k == cmd::arm ? c.data : ud_cancel);
    }

    void queue_read_wake() noexcept {
        io_uring_sqe* e = sqe();
        ::io_uring_prep_read(e, efd_, &efd_buf_, sizeof efd_buf_, 0);
        ::io_uring_sqe_set_data64(e, ud_read_wake);
    }

    // translate() is translate_locked() of the shared ring, on the owner.
    bool translate(const io_uring_cqe* cqe, event& e) noexcept {
        const std::uint64_t ud = ::io_uring_cqe_get_data64(cqe);
        const bool more = cqe->flags & IORING_CQE_F_MORE;
        const int res = cqe->res;
        if (ud & internal_bit) {
            if (ud == ud_read_wake) {
                queue_read_wake();
                return false;
            }
            if (ud == ud_watch) {
                watch_armed_ = false;
                return false;
            }
            if (ud == ud_wake || ud == ud_remove || ud == ud_cancel) return false;
            e.token = 0;
            e.bits = 0;
            e.op = reinterpret_cast<op_state*>(static_cast<std::uintptr_t>(ud & ~internal_bit));
            e.res = res;
            e.cflags = cqe->flags;
            if ((e.cflags & IORING_CQE_F_BUFFER) && res <= 0) {
                // URING-P1: no bytes to copy out; the buffer goes back now,
                // so that a task that unwinds holds none.
                pool_.give_back(e.cflags);
                e.cflags &= ~IORING_CQE_F_BUFFER;
            }
            if (res == -ENOBUFS) nobufs_.fetch_add(1, std::memory_order_relaxed);
            return true;
        }
        bool again = false;
        const bool out = poll_event(ud, res, more, e, again);
        if (again) {
            if (const int fd = open_fd(ud); fd >= 0) put({cmd::arm, fd, ud, nullptr});  // URING-U3
        }
        return out;
    }

    io_uring ring_{};
    bool ring_ok_ = false;
    bool disabled_ = false;      // R_DISABLED: the owner enables it (URING-O1)
    bool taskrun_flag_ = false;  // the kernel flags deferred work (URING-O3)
    bool recv_ = true;
    bool select_ = false;       // recv_select ops, into pool_ (URING-P1)
    bool owned_ = false;        // owner only
    bool watch_armed_ = false;  // owner only: watch()'s poll is out (URING-W3)
    std::atomic<std::thread::id> owner_{};
    std::atomic<pid_t> owner_tid_{0};  // URING-O7: the owner's thread, 0 before the first poll
    std::atomic<bool> waiting_{false}, kicked_{false};  // URING-O4
    int probe_ = -1;  // URING-U5
    int efd_ = -1;    // URING-O4
    std::uint64_t efd_buf_ = 0;
    weft::spin_lock mbox_mu_;  // URING-O2
    std::vector<cmd> mbox_;
    std::atomic<bool> mbox_full_{false};
    // URING-O7: the removes handed over so far (guarded by mbox_mu_), the
    // count the owner took with its last drain_mailbox() (owner only), the
    // count it has settled (written by the owner; a futex word), and the
    // tokens whose poll's end settle() still looks for (owner only).
    std::uint32_t settle_asked_ = 0;
    std::uint32_t settle_seen_ = 0;
    std::atomic<std::uint32_t> settle_done_{0};
    std::vector<std::uint64_t> settling_;
    std::string features_;
    std::atomic<std::uint64_t> ops_completed_{0};
    std::atomic<std::uint64_t> nobufs_{0};
    // Unmapped after the destructor's io_uring_queue_exit(), which
    // unregisters it (URING-P1).
    provided_buffers pool_;
};


// ---- the worker rings (URING-W1 - URING-W4) ---------------------------------

// worker_rings is, for a runtime with two or more workers, one owner ring
// per worker for the operations (socket receives and sends, file reads and
// writes) of the tasks that run on it, and one epoll instance for readiness
// (accept, connect, pipes, select), which every worker polls as before
// (runtime SCHED-I2).
class worker_rings final : public backend {
public:
    worker_rings(weft::detail::runtime_core* core, std::unique_ptr<backend> ready)
        : core_(core), ready_(std::move(ready)) {}

    ~worker_rings() override {
        if (probe_ >= 0) ::close(probe_);
    }

    bool init(unsigned workers, unsigned off, std::string& why) {
        probe_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (probe_ < 0) {
            why = std::string("io_uring: epoll_create1: ") + std::strerror(errno);
            return false;
        }
        for (unsigned i = 0; i < workers; ++i) {
            auto r = std::make_unique<owner_backend>();
            if (!r->init(default_entries, off, why, "io_uring worker rings (one per worker)")) return false;
            rings_.push_back(std::move(r));
        }
        features_ = rings_[0]->features() + "; readiness by epoll (accept, connect, pipes, select)";
        recv_ = rings_[0]->supports_recv();
        // URING-P1: recv_select only if every ring has its provided buffers.
        select_max_ = rings_[0]->recv_select_max();
        for (const auto& r : rings_) select_max_ = std::min(select_max_, r->recv_select_max());
        if (select_max_ == 0 && rings_[0]->recv_select_max() != 0)
            features_ += "; provided buffers refused on a ring: IORING_OP_POLL_ADD then recv(2) on all";
        return true;
    }

    // URING-W1: readiness is lazy, as on the owner ring (URING-O5, REACTOR-R6):
    // a socket that is only read and written by ring operations is not in
    // epoll, so its data does not also wake the watcher through the epoll fd.
    // add() only checks the fd (URING-U5); arm() adds it to epoll, which
    // reports the fd's current state when it is added.
    std::error_code add(registration* r, std::uint64_t token) noexcept override {
        (void)token;
        return refuse_unpollable(probe_, r->fd);
    }
    [[nodiscard]] bool lazy() const noexcept override { return true; }
    int arm(registration* r, std::uint64_t token) noexcept override {
        const std::error_code ec = ready_->add(r, token);
        return ec ? -ec.value() : 0;
    }
    void remove(registration* r) noexcept override { ready_->remove(r); }
    std::size_t wait(std::int64_t timeout_ns, reactor& re) noexcept override { return ready_->wait(timeout_ns, re); }
    void interrupt() noexcept override { ready_->interrupt(); }
    [[nodiscard]] const char* name() const noexcept override { return "io_uring"; }
    [[nodiscard]] std::string features() const override { return features_; }
    [[nodiscard]] bool supports_ops() const noexcept override { return true; }
    [[nodiscard]] bool supports_recv() const noexcept override { return recv_; }

    int start_op(op_state* op) noexcept override {  // URING-W2
        const int i = weft::detail::worker_index(core_);
        op->ring = i < 0 ? 0 : static_cast<std::uint32_t>(i);
        return rings_[op->ring]->start_op(op);
    }
    void cancel_op(op_state* op) noexcept override { rings_[op->ring]->cancel_op(op); }  // URING-W2
    [[nodiscard]] std::uint32_t recv_select_max() const noexcept override { return select_max_; }
    // URING-P1: the buffer belongs to the ring the op went to (URING-W2).
    [[nodiscard]] const std::byte* selected(const op_state& op) const noexcept override {
        return rings_[op.ring]->selected(op);
    }
    void give_back(const op_state& op) noexcept override { rings_[op.ring]->give_back(op); }
    [[nodiscard]] std::uint64_t recv_nobufs() const noexcept override {
        std::uint64_t n = 0;
        for (const auto& r : rings_) n += r->recv_nobufs();
        return n;
    }
    [[nodiscard]] std::uint64_t ops_completed() const noexcept override {
        std::uint64_t n = 0;
        for (const auto& r : rings_) n += r->ops_completed();
        return n;
    }

    [[nodiscard]] bool per_worker() const noexcept override { return true; }
    std::size_t poll_worker(unsigned i, std::int64_t timeout_ns, bool watch, reactor& re) noexcept override {
        owner_backend& r = *rings_[i];
        if (!watch) return r.wait(timeout_ns, re);
        r.watch(ready_->wait_fd());  // URING-W3
        std::size_t n = r.wait(timeout_ns, re);
        return n + ready_->wait(0, re);
    }
    void wake_worker(unsigned i) noexcept override { rings_[i]->interrupt(); }  // URING-W4

private:
    weft::detail::runtime_core* core_;
    std::unique_ptr<backend> ready_;
    std::vector<std::unique_ptr<owner_backend>> rings_;
    std::string features_;
    bool recv_ = true;
    std::uint32_t select_max_ = 0;  // URING-P1
    int probe_ = -1;  // URING-U5
};

}  // namespace

std::unique_ptr<backend> make_uring_backend_with(unsigned entries, std::string& why) {
    auto b = std::make_unique<uring_backend>();
    if (!b->init(entries, why)) return nullptr;
    return b;
}

std::unique_ptr<backend> make_uring_backend(std::string& why, weft::detail::runtime_core* core, unsigned workers,
                                            unsigned off) {
    const bool owner = workers == 1;
    std::string note = "; the runtime is driven by its caller's thread (workers = 0)";
    if (owner && (off & off_owner_ring)) note = "; owner_ring turned off (WEFT_IO_URING_OFF)";
    if (workers >= 2 && (off & off_worker_rings)) note = "; worker_rings turned off (WEFT_IO_URING_OFF)";
    if (workers >= 2 && !(off & off_worker_rings)) {
        std::string rings_why;
        try {
            auto b = std::make_unique<worker_rings>(core, make_epoll_backend());
            if (b->init(workers, off, rings_why)) return b;
        } catch (const std::exception& e) {
            rings_why = e.what();
        }
        note = "; worker rings refused (" + rings_why + ")";  // URING-W1: the shared ring next
    }
    if (owner && !(off & off_owner_ring)) {
        auto b = std::make_unique<owner_backend>();
        std::string owner_why;
        if (b->init(default_entries, off, owner_why)) return b;
        note = "; owner ring refused (" + owner_why + ")";  // URING-O6: the shared ring next
    }
    auto b = std::make_unique<uring_backend>();
    if (!b->init(default_entries, why)) return nullptr;
    b->set_features("io_uring shared ring" + note + "; readiness by multishot poll, operations for files");
    return b;
}

}  // namespace weft::io::detail

#endif  // WEFT_HAVE_LIBURING
