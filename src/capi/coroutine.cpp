// The C API's coroutines: a weft::fiber (L2) per weft_coroutine, running a
// C body, with minicoro-style byte storage beside it.
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "capi.hpp"

namespace weft::capi {
namespace {

// What a fiber made by this API keeps in its private data, so that
// weft_coroutine_running() can find its handle. The marker tells it from a
// fiber made by C++ code with private data of its own.
struct fiber_tag {
    std::uint64_t marker;
    std::uint64_t handle;
};
constexpr std::uint64_t tag_marker = 0x57454654434f524full;  // "WEFTCORO"

struct coro final : object {
    static constexpr kind kind_of = kind::coroutine;
    coro() noexcept : object(kind::coroutine) {}

    void (*func)(weft_coroutine) = nullptr;
    void* user_data = nullptr;
    std::string name;
    // busy: a resume or destroy of this coroutine is under way (on some
    // thread). The one claim that keeps two of them apart.
    std::atomic<bool> busy{false};
    weft_result body_result = WEFT_OK;  // written by the body, read after the resume
    std::mutex storage_mu;
    std::unique_ptr<unsigned char[]> storage;
    std::size_t capacity = 0;
    std::size_t used = 0;
    fiber fib;  // last: destroyed first

    // run() is the fiber's body. A forced unwind never passes through the C
    // body: weft_coroutine_yield() stops it and returns WEFT_CANCELED. When
    // the body then returns, the unwind is raised again here, in C++, so
    // that the fiber ends as unwound.
    void run() {
        try {
            func(weft_coroutine{handle});
        } catch (...) {
            if (detail::forced_unwind_in_flight()) throw;
            body_result = WEFT_CALLBACK_FAILED;
        }
        if (this_fiber::current().record()->unwinding) detail::raise_forced_unwind();
    }
};

// in_chain() says whether f runs on this thread: it is the current fiber or
// one that resumed it (directly or further down).
bool in_chain(const detail::fiber_record* f) noexcept {
    for (detail::fiber_record* r = detail::this_thread_state()->current; r; r = r->parent)
        if (r == f) return true;
    return false;
}

// claim() takes c's busy flag for a resume or destroy; the result when it is
// already taken: running here (WEFT_WRONG_STATE) or elsewhere.
weft_result claim(coro* c) noexcept {
    if (!c->busy.exchange(true, std::memory_order_acquire)) return WEFT_OK;
    return in_chain(c->fib.ref().record()) ? WEFT_WRONG_STATE : WEFT_WRONG_THREAD;
}

}  // namespace
}  // namespace weft::capi

using namespace weft;
using namespace weft::capi;

extern "C" {

weft_coroutine_desc weft_coroutine_desc_init(void (*func)(weft_coroutine co), size_t stack_size) noexcept {
    weft_coroutine_desc d;
    d.func = func;
    d.stack_size = stack_size;
    d.storage_size = 1024;
    d.user_data = nullptr;
    d.name = nullptr;
    d.own_fp_env = 0;
    return d;
}

weft_result weft_coroutine_create(const weft_coroutine_desc* desc, weft_coroutine* out) noexcept {
    constexpr const char* call = "weft_coroutine_create";
    if (!desc) return invalid(call, "`desc` is NULL; pass a descriptor from weft_coroutine_desc_init()");
    if (!desc->func) return invalid(call, "`desc->func` is NULL; set the coroutine's body");
    if (!out) return invalid(call, "`out` is NULL; pass the address of a weft_coroutine to store it in");
    return guarded([&] {
        std::unique_ptr<coro> c(new coro);
        c->func = desc->func;
        c->user_data = desc->user_data;
        if (desc->name) c->name = desc->name;
        if (desc->storage_size) c->storage.reset(new unsigned char[desc->storage_size]);
        c->capacity = desc->storage_size;
        coro* raw = c.get();
        fiber_options o;
        o.stack_size = desc->stack_size;
        o.name = c->name;
        o.private_data_size = sizeof(fiber_tag);
        o.fp_env = desc->own_fp_env ? fp_env_mode::own : fp_env_mode::shared;
        c->fib = fiber([raw] { raw->run(); }, o);
        const std::uint64_t h = insert(raw);
        c.release();
        const fiber_tag tag{tag_marker, h};
        std::memcpy(raw->fib.private_data().data(), &tag, sizeof tag);
        out->id = h;
        return WEFT_OK;
    });
}

weft_result weft_coroutine_destroy(weft_coroutine co) noexcept {
    return with<coro>(co.id, [&](coro& c) {
        if (weft_result r = claim(&c); r != WEFT_OK) return r;
        // The body runs to its end here, on this thread, while the handle is
        // still valid (its cleanup may use it); busy stays set: it is gone.
        const weft_result r = guarded([&] {
            c.fib.unwind();
            return WEFT_OK;
        });
        if (r != WEFT_OK) {
            c.busy.store(false, std::memory_order_release);
            return r;
        }
        return forget<coro>(co.id);
    });
}

weft_result weft_coroutine_resume(weft_coroutine co) noexcept {
    return with<coro>(co.id, [](coro& c) {
        if (weft_result r = claim(&c); r != WEFT_OK) return r;
        const weft_result r = guarded([&] {
            if (c.fib.done()) return WEFT_WRONG_STATE;
            c.fib.resume();
            return c.fib.done() ? c.body_result : WEFT_OK;
        });
        c.busy.store(false, std::memory_order_release);
        return r;
    });
}

weft_result weft_coroutine_yield(weft_coroutine co) noexcept {
    weft_result why;
    coro* c;
    {
        ref<coro> r = get<coro>(co.id, &why);
        if (!r) return why;
        c = r.get();
        // c stays alive while its body runs: only a destroy deletes it, and
        // a destroy waits for busy, which the resumer holds.
        if (this_fiber::current() != c->fib.ref()) return WEFT_NOT_IN_COROUTINE;
    }
    if (this_fiber::current().record()->unwinding) return WEFT_CANCELED;
    return guarded([] {
        this_fiber::suspend();
        return WEFT_OK;
    });
}

weft_result weft_coroutine_status(weft_coroutine co, weft_coroutine_state* out) noexcept {
    return fetch<coro>("weft_coroutine_status", co.id, out, [](coro& c) {
        const fiber_ref f = c.fib.ref();
        switch (f.state()) {
        case fiber_state::created:
        case fiber_state::suspended: return WEFT_COROUTINE_SUSPENDED;
        case fiber_state::done: return WEFT_COROUTINE_DEAD;
        case fiber_state::running: break;
        }
        return this_fiber::current() != f && in_chain(f.record()) ? WEFT_COROUTINE_NORMAL : WEFT_COROUTINE_RUNNING;
    });
}

weft_result weft_coroutine_user_data(weft_coroutine co, void** out) noexcept {
    return fetch<coro>("weft_coroutine_user_data", co.id, out, [](coro& c) { return c.user_data; });
}

weft_result weft_coroutine_running(weft_coroutine* out) noexcept {
    if (!out) return invalid("weft_coroutine_running", "`out` is NULL; pass the address of a weft_coroutine");
    const fiber_ref f = this_fiber::current();
    if (!f) return WEFT_NOT_IN_COROUTINE;
    const std::span<std::byte> data = f.private_data();
    if (data.size() < sizeof(fiber_tag)) return WEFT_NOT_IN_COROUTINE;
    fiber_tag tag;
    std::memcpy(&tag, data.data(), sizeof tag);
    if (tag.marker != tag_marker) return WEFT_NOT_IN_COROUTINE;
    weft_result why;
    ref<coro> c = get<coro>(tag.handle, &why);
    if (!c || c->fib.ref() != f) return WEFT_NOT_IN_COROUTINE;
    out->id = tag.handle;
    return WEFT_OK;
}

weft_result weft_coroutine_push(weft_coroutine co, const void* src, size_t len) noexcept {
    if (!src && len) return invalid("weft_coroutine_push", "`src` is NULL but `len` is not 0; pass the bytes to push");
    return with<coro>(co.id, [&](coro& c) {
        std::lock_guard g(c.storage_mu);
        if (len > c.capacity - c.used) return WEFT_NOT_ENOUGH_SPACE;
        if (len) std::memcpy(c.storage.get() + c.used, src, len);
        c.used += len;
        return WEFT_OK;
    });
}

static weft_result take_bytes(weft_coroutine co, void* dest, size_t len, bool pop) noexcept {
    return with<coro>(co.id, [&](coro& c) {
        std::lock_guard g(c.storage_mu);
        if (len > c.used) return WEFT_NOT_ENOUGH_SPACE;
        if (dest && len) std::memcpy(dest, c.storage.get() + c.used - len, len);
        if (pop) c.used -= len;
        return WEFT_OK;
    });
}

weft_result weft_coroutine_pop(weft_coroutine co, void* dest, size_t len) noexcept {
    return take_bytes(co, dest, len, true);
}

weft_result weft_coroutine_peek(weft_coroutine co, void* dest, size_t len) noexcept {
    if (!dest && len)
        return invalid("weft_coroutine_peek", "`dest` is NULL but `len` is not 0; pass a buffer of len bytes");
    return take_bytes(co, dest, len, false);
}

weft_result weft_coroutine_bytes_stored(weft_coroutine co, size_t* out) noexcept {
    return fetch<coro>("weft_coroutine_bytes_stored", co.id, out, [](coro& c) {
        std::lock_guard g(c.storage_mu);
        return c.used;
    });
}

weft_result weft_coroutine_storage_size(weft_coroutine co, size_t* out) noexcept {
    return fetch<coro>("weft_coroutine_storage_size", co.id, out, [](coro& c) { return c.capacity; });
}

}  // extern "C"
