// The handle table, result names and the exception mapping of the C API.

#include <cstring>
#include <mutex>
#include <type_traits>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "capi.hpp"
#include "weft/runtime.hpp"
#include "weft/stack.hpp"
#include "weft/sync/channel.hpp"
#include "weft/task.hpp"

namespace weft::capi {
namespace {

// A handle is (generation << 32) | (index + 1): index + 1 so that no handle
// is 0, a generation per slot so that a slot's next tenant gets a different
// handle than its last (a stale handle is found out unless the same slot was
// reused 2^32 times meanwhile). One lock: every call takes it for a few
// instructions to count a reference, never while it waits.
struct slot {
    object* obj = nullptr;
    std::uint32_t generation = 1;
    std::uint32_t next_free = 0;  // index + 1 of the next free slot, 0: none
};

struct table {
    std::mutex mu;
    std::vector<slot> slots;
    std::uint32_t free_head = 0;  // index + 1
};

table& the_table() {
    // Never destroyed: handles may be used from static destructors and from
    // threads that outlive main().
    static table* t = new table;
    return *t;
}

// find() is the slot of the live object of kind k named by h, with t.mu
// held; null with *why set (WEFT_INVALID_ARGUMENT for 0, WEFT_INVALID_HANDLE
// for a stale or foreign handle).
slot* find(table& t, std::uint64_t h, kind k, weft_result* why) noexcept {
    if (h == 0) {
        set_error_text(nullptr,
                       "a handle argument is zero: no create, spawn, connect or accept call stored it (or it was "
                       "zero-initialized); pass the handle such a call stored");
        *why = WEFT_INVALID_ARGUMENT;
        return nullptr;
    }
    const std::uint64_t index = (h & 0xffffffffu) - 1;
    const std::uint32_t gen = static_cast<std::uint32_t>(h >> 32);
    slot* s = index < t.slots.size() ? &t.slots[index] : nullptr;
    if (!s || s->generation != gen || !s->obj || s->obj->what != k) {
        *why = WEFT_INVALID_HANDLE;
        return nullptr;
    }
    return s;
}

// The calling thread's weft_last_error() text (CAPI-E1), reached through
// error_text_slot(), which the optimiser cannot see through (as
// last_errno_slot() in io.cpp).
thread_local std::string error_text_of_thread;

[[gnu::noinline]] std::string* error_text_slot() noexcept {
    std::string* p = &error_text_of_thread;
    asm volatile("" : "+r"(p));
    return p;
}

// The exception's what() as weft_last_error()'s text, for the exceptions
// that carry one.
void record_exception_text() noexcept {
    try {
        throw;
    } catch (const std::exception& e) {
        set_error_text(nullptr, e.what());
    } catch (...) {
        set_error_text(nullptr, "an exception that is not a std::exception escaped");
    }
}

}  // namespace

void set_error_text(const char* call, std::string_view why, std::string_view more) noexcept {
    std::string* t = error_text_slot();
    try {
        t->clear();
        if (call) {
            t->append(call);
            t->append(": ");
        }
        t->append(why);
        t->append(more);
    } catch (...) {
        *t = std::string();  // no allocation: empty
    }
}

std::uint64_t insert(object* o) {
    table& t = the_table();
    std::lock_guard g(t.mu);
    std::uint32_t index;
    if (t.free_head) {
        index = t.free_head - 1;
        t.free_head = t.slots[index].next_free;
    } else {
        if (t.slots.size() >= 0xfffffffeu) throw std::bad_alloc();
        t.slots.emplace_back();
        index = static_cast<std::uint32_t>(t.slots.size() - 1);
    }
    slot& s = t.slots[index];
    s.obj = o;
    s.next_free = 0;
    o->handle = (std::uint64_t(s.generation) << 32) | (std::uint64_t(index) + 1);
    return o->handle;
}

object* acquire(std::uint64_t h, kind k, weft_result* why) noexcept {
    table& t = the_table();
    std::lock_guard g(t.mu);
    slot* s = find(t, h, k, why);
    if (!s) return nullptr;
    s->obj->refs.fetch_add(1, std::memory_order_relaxed);
    return s->obj;
}

object* remove(std::uint64_t h, kind k, weft_result* why) noexcept {
    table& t = the_table();
    std::lock_guard g(t.mu);
    slot* s = find(t, h, k, why);
    if (!s) return nullptr;
    object* o = s->obj;
    s->obj = nullptr;
    s->generation = s->generation == 0xffffffffu ? 1 : s->generation + 1;
    const std::uint32_t index = static_cast<std::uint32_t>(s - t.slots.data());
    s->next_free = t.free_head;
    t.free_head = index + 1;
    return o;
}

void release(object* o) noexcept {
    if (o->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete o;
}

weft_result current_exception_result() noexcept {
    record_exception_text();  // CAPI-E1
    try {
        throw;
    } catch (const std::bad_alloc&) {
        return WEFT_OUT_OF_MEMORY;
    } catch (const coroutine_error& e) {
        switch (e.code()) {
        case coroutine_errc::empty_handle: return WEFT_INVALID_HANDLE;
        case coroutine_errc::yield_outside:
        case coroutine_errc::yield_type: return WEFT_NOT_IN_COROUTINE;
        case coroutine_errc::stack_too_small: return WEFT_STACK_ERROR;
        case coroutine_errc::resume_running: return WEFT_WRONG_THREAD;
        default: return WEFT_WRONG_STATE;
        }
    } catch (const task_error& e) {
        switch (e.code()) {
        case task_errc::empty_handle: return WEFT_INVALID_HANDLE;
        case task_errc::join_twice:
        case task_errc::join_self: return WEFT_WRONG_STATE;
        case task_errc::runtime_stopping: return WEFT_STOPPING;
        case task_errc::not_in_task: return WEFT_NOT_IN_TASK;
        case task_errc::driver_busy:
        case task_errc::inside_task:
        case task_errc::needs_stack: return WEFT_WRONG_THREAD;
        case task_errc::bad_option: return WEFT_INVALID_ARGUMENT;
        }
        return WEFT_UNKNOWN_ERROR;
    } catch (const task_canceled& e) {
        return e.state() == task_state::timed_out ? WEFT_TIMED_OUT : WEFT_CANCELED;
    } catch (const channel_closed&) {
        return WEFT_CLOSED;
    } catch (const stack_error&) {
        return WEFT_STACK_ERROR;
    } catch (const std::system_error& e) {
        if (e.code() == std::errc::operation_not_permitted) return WEFT_WRONG_STATE;
        if (e.code() == std::errc::not_enough_memory) return WEFT_OUT_OF_MEMORY;
        return WEFT_SYSTEM_ERROR;
    } catch (const std::length_error&) {
        return WEFT_OUT_OF_MEMORY;
    } catch (const std::invalid_argument&) {
        return WEFT_INVALID_ARGUMENT;
    } catch (...) {
        return WEFT_UNKNOWN_ERROR;
    }
}

detail::fiber_record* stop_cancellation() noexcept {
    detail::fiber_record* f = detail::this_thread_state()->current;
    f->unwind_caught = true;
    return f;
}

void finish_cancellation(detail::fiber_record* f) noexcept {
    // The handler has ended and deleted the unwind's object: no forced
    // unwind is in flight on this fiber any more.
    f->unwind_raised = false;
    f->unwind_caught = false;
}

}  // namespace weft::capi

using namespace weft::capi;

extern "C" {

const char* weft_result_str(weft_result r) noexcept {
    // A C caller may pass any int; in C++ loading an enum outside its
    // enumerators' range is undefined (UBSan's -fsanitize=enum says so), so
    // the value is read as its underlying integer.
    std::underlying_type_t<weft_result> v;
    static_assert(sizeof v == sizeof r);
    std::memcpy(&v, &r, sizeof v);
    switch (v) {
    case WEFT_OK: return "WEFT_OK: success";
    case WEFT_INVALID_ARGUMENT:
        return "WEFT_INVALID_ARGUMENT: a NULL pointer, zero handle or value out of range (weft_last_error says which)";
    case WEFT_INVALID_HANDLE: return "WEFT_INVALID_HANDLE: the handle's object was destroyed, or is of another kind";
    case WEFT_WRONG_STATE: return "WEFT_WRONG_STATE: the object's state does not allow the call";
    case WEFT_WRONG_THREAD: return "WEFT_WRONG_THREAD: in use on another thread, or the call would wait for itself";
    case WEFT_NOT_IN_COROUTINE: return "WEFT_NOT_IN_COROUTINE: not called from inside that coroutine";
    case WEFT_NOT_IN_TASK: return "WEFT_NOT_IN_TASK: not called from inside a task";
    case WEFT_OUT_OF_MEMORY: return "WEFT_OUT_OF_MEMORY: an allocation failed";
    case WEFT_STACK_ERROR: return "WEFT_STACK_ERROR: no stack could be had, or it is too small";
    case WEFT_TIMED_OUT: return "WEFT_TIMED_OUT: the deadline passed";
    case WEFT_CANCELED: return "WEFT_CANCELED: canceled (the body should return)";
    case WEFT_CLOSED: return "WEFT_CLOSED: the channel, stream or listener is closed";
    case WEFT_WOULD_BLOCK: return "WEFT_WOULD_BLOCK: the call would have to wait";
    case WEFT_NOT_ENOUGH_SPACE: return "WEFT_NOT_ENOUGH_SPACE: the coroutine's storage is too full or too empty";
    case WEFT_CALLBACK_FAILED: return "WEFT_CALLBACK_FAILED: a C++ exception escaped a body";
    case WEFT_STOPPING: return "WEFT_STOPPING: the runtime is stopping or stopped";
    case WEFT_SYSTEM_ERROR: return "WEFT_SYSTEM_ERROR: the system refused";
    case WEFT_UNKNOWN_ERROR: return "WEFT_UNKNOWN_ERROR: an unexpected C++ exception";
    case WEFT_IO_ERROR: return "WEFT_IO_ERROR: the system reported an IO error (weft_last_errno)";
    case WEFT_EOF: return "WEFT_EOF: the stream ended";
    case WEFT_NOT_FOUND: return "WEFT_NOT_FOUND: the name could not be resolved (weft_last_error)";
    }
    return "unknown result";
}

const char* weft_last_error(void) noexcept {
    const std::string* t = error_text_slot();
    return t->empty() ? "no error recorded on this thread" : t->c_str();
}

weft_result weft_now(int64_t* out_ns) noexcept {
    if (!out_ns) return invalid("weft_now", "`out_ns` is NULL; pass the address of an int64_t");
    *out_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now().time_since_epoch())
                  .count();
    return WEFT_OK;
}

}  // extern "C"
