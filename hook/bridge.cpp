// bridge.cpp: the weft side of the hook (weft_hook.h). Compiled into every
// program that links weft_hook (an INTERFACE source of the target), so that
// it calls the same copy of weft that runs the program's tasks. Its
// constructor registers with libweft_hook.so, found with dlsym so that a
// program built with the bridge still runs without the hook library.
//
// The handle table: fd -> io::handle made over the user's fd on the first
// wait, used only for waiting, and release()d (never closed) when the
// interposed close() calls forget(). One std::mutex for the table, held for
// a hash lookup (and the handle's construction) per wait, never across a
// suspension.
//
// An io::handle registers with the reactor in its first wait, and two
// tasks making that first wait at once (one reading, one writing the same
// socket) would race. So the first registration goes through a
// weft::mutex (it suspends tasks, not workers): the winner waits with a
// deadline already passed, which registers and returns at the next timer
// tick (or at once, ready, when the reactor kept an edge: REACTOR-R3); the others
// then find it registered.

#include <dlfcn.h>
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <mutex>
#include <system_error>
#include <unordered_map>

#include "weft/io/handle.hpp"
#include "weft/runtime.hpp"
#include "weft/sync/mutex.hpp"
#include "weft/task.hpp"
#include "weft_hook.h"

namespace {

const weft_hook_host* host = nullptr;

struct entry {
    weft::io::handle h;
    weft::mutex first;                 // taken for the first registration only
    std::atomic<bool> registered{false};
    explicit entry(int fd) : h(fd) {}
};

struct handle_table {
    std::mutex mu;
    std::unordered_map<int, std::unique_ptr<entry>> handles;
};

handle_table& table() {
    static handle_table* t = new handle_table;  // never destroyed: hooks may run during exit
    return *t;
}

int bridge_inside() { return weft::this_task::inside() ? 1 : 0; }

int bridge_wait(int fd, short events, long long deadline_ns) {
    entry* e = nullptr;
    {
        handle_table& t = table();
        std::lock_guard g(t.mu);
        auto& slot = t.handles[fd];
        if (!slot) {
            // The handle's constructor calls fcntl(); the fd is already
            // non-blocking, so it only reads the flags: through the hook,
            // unchanged (internal), it sees O_NONBLOCK and leaves them.
            if (host) host->internal(+1);
            try {
                slot = std::make_unique<entry>(fd);
            } catch (const std::system_error& e) {
                if (host) host->internal(-1);
                t.handles.erase(fd);
                return e.code().value() ? e.code().value() : EBADF;
            } catch (const std::bad_alloc&) {
                if (host) host->internal(-1);
                t.handles.erase(fd);
                return ENOMEM;
            }
            if (host) host->internal(-1);
        }
        e = slot.get();
    }
    const auto what = events & POLLOUT ? weft::io::interest::writable : weft::io::interest::readable;
    if (!e->registered.load(std::memory_order_acquire)) {
        std::unique_lock lk(e->first);  // a cancellation here unwinds, unlocked
        if (!e->registered.load(std::memory_order_relaxed)) {
            const std::error_code ec = e->h.wait(what, weft::io::clock::now());
            e->registered.store(true, std::memory_order_release);
            // Ready (an edge kept for us) or a real error: report it; timed
            // out: registered, go on waiting below.
            if (!ec) return 0;
            if (ec != std::errc::timed_out) return ec == std::errc::operation_canceled ? EBADF : ec.value();
        }
    }
    const auto deadline = deadline_ns < 0 ? weft::io::no_deadline
                                          : weft::io::clock::time_point(std::chrono::nanoseconds(deadline_ns));
    // No try/catch here: a cancellation (weft::forced_unwind) must unwind
    // the task through the interposed call.
    const std::error_code ec = e->h.wait(what, deadline);
    if (!ec) return 0;
    if (ec == std::errc::timed_out) return ETIMEDOUT;
    if (ec == std::errc::operation_canceled || ec == std::errc::bad_file_descriptor) return EBADF;
    return ec.value();
}

void bridge_forget(int fd) {
    std::unique_ptr<entry> e;
    {
        handle_table& t = table();
        std::lock_guard g(t.mu);
        auto it = t.handles.find(fd);
        if (it == t.handles.end()) return;
        e = std::move(it->second);
        t.handles.erase(it);
    }
    // release(): weft stops watching and never closes the user's fd.
    (void)e->h.release();
}

void bridge_sleep_ns(long long ns) { weft::this_task::sleep_for(std::chrono::nanoseconds(ns)); }

const weft_hook_ops ops = {WEFT_HOOK_ABI_VERSION, bridge_inside, bridge_wait, bridge_forget, bridge_sleep_ns};

__attribute__((constructor)) void register_bridge() {
    using register_fn = const weft_hook_host* (*)(const weft_hook_ops*);
    if (auto reg = reinterpret_cast<register_fn>(::dlsym(RTLD_DEFAULT, "weft_hook_register"))) host = reg(&ops);
}

}  // namespace
