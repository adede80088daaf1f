// The C API's channels, mutexes and condition variables: weft's L5
// primitives behind handles.
#include <cstring>
#include <memory>
#include <new>
#include <string>
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
    if (!elem_size)
        return invalid("weft_channel_create",
                       "`elem_size` is 0; pass the size of one value (sizeof(void*) for pointers)");
    if (!out) return invalid("weft_channel_create", "`out` is NULL; pass the address of a weft_channel to store it in");
    return make<chan>(&out->id, elem_size, capacity);
}

weft_result weft_channel_destroy(weft_channel h) noexcept {
    // Calls under way keep the channel alive; closing it ends their waits.
    return removing<chan>(h.id, [](chan& c) {
        c.ch.close();
        return WEFT_OK;
    });
}

weft_result weft_channel_send(weft_channel h, const void* elem, int64_t deadline_ns) noexcept {
    const c_deadline d(deadline_ns);
    if (!elem) return invalid("weft_channel_send", "`elem` is NULL; pass the address of the value to send");
    if (!d.valid) return invalid("weft_channel_send", "`deadline_ns`", bad_deadline);
    return with<chan>(h.id, [&](chan& c) {
        return guarded([&] {
            blob b(elem, c.elem_size);
            if (d.none) {
                c.ch.send(std::move(b));
                return WEFT_OK;
            }
            return status_result(c.ch.send_until(std::move(b), d.at));
        });
    });
}

weft_result weft_channel_recv(weft_channel h, void* out, int64_t deadline_ns) noexcept {
    const c_deadline d(deadline_ns);
    if (!out) return invalid("weft_channel_recv", "`out` is NULL; pass the address of an elem_size-byte buffer");
    if (!d.valid) return invalid("weft_channel_recv", "`deadline_ns`", bad_deadline);
    return with<chan>(h.id, [&](chan& c) {
        return guarded([&] {
            if (d.none) {
                std::optional<blob> v = c.ch.recv();
                if (!v) return WEFT_CLOSED;
                v->copy_to(out);
                return WEFT_OK;
            }
            recv_result<blob> r = c.ch.recv_until(d.at);
            if (r.status == channel_status::ok) r.value->copy_to(out);
            return status_result(r.status);
        });
    });
}

weft_result weft_channel_try_send(weft_channel h, const void* elem) noexcept {
    if (!elem) return invalid("weft_channel_try_send", "`elem` is NULL; pass the address of the value to send");
    return with<chan>(h.id, [&](chan& c) {
        return guarded([&] { return status_result(c.ch.try_send(blob(elem, c.elem_size))); });
    });
}

weft_result weft_channel_try_recv(weft_channel h, void* out) noexcept {
    if (!out) return invalid("weft_channel_try_recv", "`out` is NULL; pass the address of an elem_size-byte buffer");
    return with<chan>(h.id, [&](chan& c) {
        return guarded([&] {
            recv_result<blob> r = c.ch.try_recv();
            if (r.status == channel_status::ok) r.value->copy_to(out);
            return status_result(r.status);
        });
    });
}

weft_result weft_channel_close(weft_channel h) noexcept {
    return with<chan>(h.id, [](chan& c) {
        c.ch.close();
        return WEFT_OK;
    });
}

weft_result weft_channel_size(weft_channel h, size_t* out) noexcept {
    return fetch<chan>("weft_channel_size", h.id, out, [](chan& c) { return c.ch.size(); });
}

// ---- mutex -------------------------------------------------------------------

weft_result weft_mutex_create(weft_mutex* out) noexcept {
    return out ? make<mtx>(&out->id)
               : invalid("weft_mutex_create", "`out` is NULL; pass the address of a weft_mutex to store it in");
}

weft_result weft_mutex_destroy(weft_mutex h) noexcept {
    return with<mtx>(h.id, [&](mtx& m) {
        // Holding it while the handle goes: nobody can take it meanwhile, and
        // a locked mutex is refused without a change.
        if (!m.m.try_lock()) return WEFT_WRONG_STATE;
        const weft_result r = forget<mtx>(h.id);
        m.m.unlock();
        return r;
    });
}

weft_result weft_mutex_lock(weft_mutex h) noexcept {
    return with<mtx>(h.id, [](mtx& m) {
        return guarded([&] {
            m.m.lock();
            return WEFT_OK;
        });
    });
}

weft_result weft_mutex_lock_until(weft_mutex h, int64_t deadline_ns) noexcept {
    const c_deadline d(deadline_ns);
    if (!d.valid) return invalid("weft_mutex_lock_until", "`deadline_ns`", bad_deadline);
    if (d.none) return weft_mutex_lock(h);
    return with<mtx>(h.id, [&](mtx& m) {
        return guarded([&] { return m.m.try_lock_until(d.at) ? WEFT_OK : WEFT_TIMED_OUT; });
    });
}

weft_result weft_mutex_try_lock(weft_mutex h) noexcept {
    return with<mtx>(h.id, [](mtx& m) { return m.m.try_lock() ? WEFT_OK : WEFT_WOULD_BLOCK; });
}

weft_result weft_mutex_unlock(weft_mutex h) noexcept {
    return with<mtx>(h.id, [](mtx& m) {
        return guarded([&] {
            m.m.unlock();
            return WEFT_OK;
        });
    });
}

// ---- condition variable ------------------------------------------------------

weft_result weft_cond_create(weft_cond* out) noexcept {
    return out ? make<cnd>(&out->id)
               : invalid("weft_cond_create", "`out` is NULL; pass the address of a weft_cond to store it in");
}

weft_result weft_cond_destroy(weft_cond h) noexcept {
    // Waiters keep the variable alive; waking them lets them leave.
    return removing<cnd>(h.id, [](cnd& c) {
        c.cv.notify_all();
        return WEFT_OK;
    });
}

static weft_result cond_wait(weft_cond ch, weft_mutex mh, int64_t deadline_ns) noexcept {
    const c_deadline d(deadline_ns);
    if (!d.valid) return invalid("weft_cond_wait_until", "`deadline_ns`", bad_deadline);
    return with<cnd>(ch.id, [&](cnd& c) {
        return with<mtx>(mh.id, [&](mtx& m) {
            return guarded([&] {
                lock_of lk{&m.m};
                if (d.none) {
                    c.cv.wait(lk);
                    return WEFT_OK;
                }
                return c.cv.wait_until(lk, d.at) == std::cv_status::timeout ? WEFT_TIMED_OUT : WEFT_OK;
            });
        });
    });
}

weft_result weft_cond_wait(weft_cond c, weft_mutex m) noexcept { return cond_wait(c, m, WEFT_NO_DEADLINE); }

weft_result weft_cond_wait_until(weft_cond c, weft_mutex m, int64_t deadline_ns) noexcept {
    return cond_wait(c, m, deadline_ns);
}

weft_result weft_cond_signal(weft_cond h) noexcept {
    return with<cnd>(h.id, [](cnd& c) {
        c.cv.notify_one();
        return WEFT_OK;
    });
}

weft_result weft_cond_broadcast(weft_cond h) noexcept {
    return with<cnd>(h.id, [](cnd& c) {
        c.cv.notify_all();
        return WEFT_OK;
    });
}

}  // extern "C"
