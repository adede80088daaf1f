// The C API's channels, mutexes and condition variables: weft's L5
// primitives behind handles.
#include <cstring>
#include <memory>
#include <new>
#include <system_error>

#include "capi.hpp"
#include "weft/sync/channel.hpp"
#include "weft/sync/condition_variable.hpp"
#include "weft/sync/mutex.hpp"

namespace weft::capi {
namespace {

// blob is one channel value of the channel's element size: in place up to
// inline_size bytes (pointers and small structs travel without allocating),
// on the heap above that.
class blob {
public:
    static constexpr std::size_t inline_size = 32;
    blob(const void* p, std::size_t n) : n_(n) {
        if (n_ <= inline_size) {
            std::memcpy(small_, p, n_);
        } else {
            big_ = new unsigned char[n_];
            std::memcpy(big_, p, n_);
        }
    }
    blob(blob&& o) noexcept : n_(o.n_) {
        if (n_ <= inline_size) {
            std::memcpy(small_, o.small_, n_);
        } else {
            big_ = o.big_;
            o.n_ = 0;
        }
    }
    blob& operator=(blob&&) = delete;
    blob(const blob&) = delete;
    ~blob() {
        if (n_ > inline_size) delete[] big_;
    }
    void copy_to(void* out) const noexcept { std::memcpy(out, n_ <= inline_size ? small_ : big_, n_); }

private:
    std::size_t n_;
    union {
        alignas(16) unsigned char small_[inline_size];
        unsigned char* big_;
    };
};

struct chan final : object {
    static constexpr kind kind_of = kind::channel;
    chan(std::size_t elem, std::size_t capacity)
        : object(kind::channel),
          elem_size(elem),
          ch(capacity == SIZE_MAX ? channel<blob>::unbounded : capacity) {}
    std::size_t elem_size;
    channel<blob> ch;
};

struct mtx final : object {
    static constexpr kind kind_of = kind::mutex;
    mtx() noexcept : object(kind::mutex) {}
    weft::mutex m;
};

struct cnd final : object {
    static constexpr kind kind_of = kind::cond;
    cnd() noexcept : object(kind::cond) {}
    condition_variable cv;
};

// lock_of is the Lock a condition_variable waits with: the C mutex.
struct lock_of {
    weft::mutex* m;
    void lock() { m->lock(); }
    void unlock() { m->unlock(); }
};

template <class T>
weft_result create(std::uint64_t* out) noexcept {
    if (!out) return WEFT_INVALID_ARGUMENT;
    return guarded([&] {
        std::unique_ptr<T> o(new T);
        *out = insert(o.get());
        o.release();
        return WEFT_OK;
    });
}

weft_result status_result(channel_status s) noexcept {
    switch (s) {
    case channel_status::ok: return WEFT_OK;
    case channel_status::closed: return WEFT_CLOSED;
    case channel_status::timeout: return WEFT_TIMED_OUT;
    case channel_status::full:
    case channel_status::empty: return WEFT_WOULD_BLOCK;
    }
    return WEFT_UNKNOWN_ERROR;
}

}  // namespace
}  // namespace weft::capi

using namespace weft;
using namespace weft::capi;

extern "C" {

// ---- channels ----------------------------------------------------------------

weft_result weft_channel_create(size_t elem_size, size_t capacity, weft_channel* out) noexcept {
    if (!elem_size || !out) return WEFT_INVALID_ARGUMENT;
    return guarded([&] {
        std::unique_ptr<chan> c(new chan(elem_size, capacity));
        out->id = insert(c.get());
        c.release();
        return WEFT_OK;
    });
}

weft_result weft_channel_destroy(weft_channel h) noexcept {
    weft_result why;
    ref<chan> c = take<chan>(h.id, &why);
    if (!c) return why;
    // Calls under way keep the channel alive; closing it ends their waits.
    c->ch.close();
    return WEFT_OK;
}

weft_result weft_channel_send(weft_channel h, const void* elem, int64_t deadline_ns) noexcept {
    std::chrono::steady_clock::time_point tp;
    bool none;
    if (!elem || !capi::deadline(deadline_ns, tp, none)) return WEFT_INVALID_ARGUMENT;
    weft_result why;
    ref<chan> c = get<chan>(h.id, &why);
    if (!c) return why;
    return guarded([&] {
        blob b(elem, c->elem_size);
        if (none) {
            c->ch.send(std::move(b));
            return WEFT_OK;
        }
        return status_result(c->ch.send_until(std::move(b), tp));
    });
}

weft_result weft_channel_recv(weft_channel h, void* out, int64_t deadline_ns) noexcept {
    std::chrono::steady_clock::time_point tp;
    bool none;
    if (!out || !capi::deadline(deadline_ns, tp, none)) return WEFT_INVALID_ARGUMENT;
    weft_result why;
    ref<chan> c = get<chan>(h.id, &why);
    if (!c) return why;
    return guarded([&] {
        if (none) {
            std::optional<blob> v = c->ch.recv();
            if (!v) return WEFT_CLOSED;
            v->copy_to(out);
            return WEFT_OK;
        }
        recv_result<blob> r = c->ch.recv_until(tp);
        if (r.status == channel_status::ok) r.value->copy_to(out);
        return status_result(r.status);
    });
}

weft_result weft_channel_try_send(weft_channel h, const void* elem) noexcept {
    if (!elem) return WEFT_INVALID_ARGUMENT;
    weft_result why;
    ref<chan> c = get<chan>(h.id, &why);
    if (!c) return why;
    return guarded([&] { return status_result(c->ch.try_send(blob(elem, c->elem_size))); });
}

weft_result weft_channel_try_recv(weft_channel h, void* out) noexcept {
    if (!out) return WEFT_INVALID_ARGUMENT;
    weft_result why;
    ref<chan> c = get<chan>(h.id, &why);
    if (!c) return why;
    return guarded([&] {
        recv_result<blob> r = c->ch.try_recv();
        if (r.status == channel_status::ok) r.value->copy_to(out);
        return status_result(r.status);
    });
}

weft_result weft_channel_close(weft_channel h) noexcept {
    weft_result why;
    ref<chan> c = get<chan>(h.id, &why);
    if (!c) return why;
    c->ch.close();
    return WEFT_OK;
}

weft_result weft_channel_size(weft_channel h, size_t* out) noexcept {
    if (!out) return WEFT_INVALID_ARGUMENT;
    weft_result why;
    ref<chan> c = get<chan>(h.id, &why);
    if (!c) return why;
    *out = c->ch.size();
    return WEFT_OK;
}

// ---- mutex -------------------------------------------------------------------

weft_result weft_mutex_create(weft_mutex* out) noexcept { return out ? create<mtx>(&out->id) : WEFT_INVALID_ARGUMENT; }

weft_result weft_mutex_destroy(weft_mutex h) noexcept {
    weft_result why;
    ref<mtx> m = get<mtx>(h.id, &why);
    if (!m) return why;
    // Holding it while the handle goes: nobody can take it meanwhile, and a
    // locked mutex is refused without a change.
    if (!m->m.try_lock()) return WEFT_WRONG_STATE;
    ref<mtx> table_ref = take<mtx>(h.id, &why);
    m->m.unlock();
    return table_ref ? WEFT_OK : why;
}

weft_result weft_mutex_lock(weft_mutex h) noexcept {
    weft_result why;
    ref<mtx> m = get<mtx>(h.id, &why);
    if (!m) return why;
    return guarded([&] {
        m->m.lock();
        return WEFT_OK;
    });
}

weft_result weft_mutex_lock_until(weft_mutex h, int64_t deadline_ns) noexcept {
    std::chrono::steady_clock::time_point tp;
    bool none;
    if (!capi::deadline(deadline_ns, tp, none)) return WEFT_INVALID_ARGUMENT;
    if (none) return weft_mutex_lock(h);
    weft_result why;
    ref<mtx> m = get<mtx>(h.id, &why);
    if (!m) return why;
    return guarded([&] { return m->m.try_lock_until(tp) ? WEFT_OK : WEFT_TIMED_OUT; });
}

weft_result weft_mutex_try_lock(weft_mutex h) noexcept {
    weft_result why;
    ref<mtx> m = get<mtx>(h.id, &why);
    if (!m) return why;
    return m->m.try_lock() ? WEFT_OK : WEFT_WOULD_BLOCK;
}

weft_result weft_mutex_unlock(weft_mutex h) noexcept {
    weft_result why;
    ref<mtx> m = get<mtx>(h.id, &why);
    if (!m) return why;
    return guarded([&] {
        m->m.unlock();
        return WEFT_OK;
    });
}

// ---- condition variable ------------------------------------------------------

weft_result weft_cond_create(weft_cond* out) noexcept { return out ? create<cnd>(&out->id) : WEFT_INVALID_ARGUMENT; }

weft_result weft_cond_destroy(weft_cond h) noexcept {
    weft_result why;
    ref<cnd> c = take<cnd>(h.id, &why);
    if (!c) return why;
    // Waiters keep the variable alive; waking them lets them leave.
    c->cv.notify_all();
    return WEFT_OK;
}

static weft_result cond_wait(weft_cond ch, weft_mutex mh, int64_t deadline_ns) noexcept {
    std::chrono::steady_clock::time_point tp;
    bool none;
    if (!capi::deadline(deadline_ns, tp, none)) return WEFT_INVALID_ARGUMENT;
    weft_result why;
    ref<cnd> c = get<cnd>(ch.id, &why);
    if (!c) return why;
    ref<mtx> m = get<mtx>(mh.id, &why);
    if (!m) return why;
    return guarded([&] {
        lock_of lk{&m->m};
        if (none) {
            c->cv.wait(lk);
            return WEFT_OK;
        }
        return c->cv.wait_until(lk, tp) == std::cv_status::timeout ? WEFT_TIMED_OUT : WEFT_OK;
    });
}

weft_result weft_cond_wait(weft_cond c, weft_mutex m) noexcept { return cond_wait(c, m, WEFT_NO_DEADLINE); }

weft_result weft_cond_wait_until(weft_cond c, weft_mutex m, int64_t deadline_ns) noexcept {
    return cond_wait(c, m, deadline_ns);
}

weft_result weft_cond_signal(weft_cond h) noexcept {
    weft_result why;
    ref<cnd> c = get<cnd>(h.id, &why);
    if (!c) return why;
    c->cv.notify_one();
    return WEFT_OK;
}

weft_result weft_cond_broadcast(weft_cond h) noexcept {
    weft_result why;
    ref<cnd> c = get<cnd>(h.id, &why);
    if (!c) return why;
    c->cv.notify_all();
    return WEFT_OK;
}

}  // extern "C"
