// weft/detail/coroutine_block.hpp: what coroutine<> adds to a fiber record
// (the value slots, the result) and its resume / yield, for weft/coroutine.hpp.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "weft/fiber.hpp"

namespace weft {
template <class Yield, class Resume>
class yielder;
}  // namespace weft

namespace weft::detail {

// nothing stands in for a void parameter type.
struct nothing {};
template <class T>
using arg_t = std::conditional_t<std::is_void_v<T>, nothing, T>;

// coroutine_record adds the value slots to a fiber record.
struct coroutine_record : fiber_record {
    void* in = nullptr;   // the value passed by resume(), if any
    void* out = nullptr;  // the value passed by yield(), if any
};

template <class Return>
struct result_record : coroutine_record {
    std::optional<Return> result;
};
template <>
struct result_record<void> : coroutine_record {};

struct yielder_access {
    template <class Yield, class Resume>
    static yielder<Yield, Resume> make(coroutine_record* cb) noexcept {
        return yielder<Yield, Resume>(cb);
    }
};

// coroutine_base is the record of a coroutine<Yield, Resume, Return>; run()
// calls the body with its yielder and keeps the result.
template <class Yield, class Resume, class Return>
struct coroutine_base : result_record<Return> {
    coroutine_base() noexcept {
        this->flavour = std::is_void_v<Yield> && std::is_void_v<Resume> ? fiber_flavour::coroutine_plain
                                                                        : fiber_flavour::coroutine;
    }
    template <class Self>
    static void run(fiber_record* f) {
        auto* self = static_cast<Self*>(f);
        yielder<Yield, Resume> y = yielder_access::make<Yield, Resume>(self);
        if constexpr (std::is_void_v<Resume>) {
            if constexpr (std::is_void_v<Return>)
                std::invoke(self->fn, y);
            else
                self->result.emplace(std::invoke(self->fn, y));
        } else {
            Resume first = std::move(*static_cast<Resume*>(self->in));
            if constexpr (std::is_void_v<Return>)
                std::invoke(self->fn, y, std::move(first));
            else
                self->result.emplace(std::invoke(self->fn, y, std::move(first)));
        }
    }
};

// shared_hold gives a copy-stack coroutine's shared stack back at the end
// of a resume, after the value it yielded (which lies on that stack) has
// been moved out.
struct shared_hold {
    fiber_record* f;
    ~shared_hold() {
        f->keep_stack = false;
        leave_shared(f, false);
    }
};

// resume_typed() resumes cb, rethrows what its body let escape, and returns
// take() (which reads what it yielded). Throws: coroutine_error on misuse
// (shared_stack_busy included); whatever the body threw.
// take(plain) is called with plain = true when cb came back by a plain
// suspend (enter_set()): then it is suspended, and there is nothing to
// rethrow and no shared stack to give back.
template <class Take>
WEFT_HOT_INLINE inline auto resume_typed(coroutine_record* cb, Take take) -> decltype(take(true)) {
    bool plain;
    resume(cb, plain);
    if (plain) [[likely]]
        return take(true);
    if (cb->exception) [[unlikely]]
        rethrow(cb);
    if (cb->keep_stack) [[unlikely]] {
        shared_hold hold{cb};
        return take(false);
    }
    return take(false);
}

// copy_stats() reads f's copy statistics (zeros outside copy-stack mode).
[[nodiscard]] inline copy_stack_stats copy_stats(const fiber_record* f) noexcept {
    if (!f->copy) return {};
    return {f->copy->saved, f->copy->max_saved, f->copy->saves, f->copy->restores};
}

// check_pointer_for() throws coroutine_error (shared_stack_pointer) when p
// lies in a shared stack and will not be part of a live frame once `target`
// runs (null: code outside any fiber). `direction` is "passed to" or
// "yielded to", for the message.
WEFT_API void check_pointer_for(const void* p, const fiber_record* target, const char* direction);

// check_value() runs check_pointer_for() on a value handed through resume()
// or yield() when it is a raw pointer, in builds of the including code
// without NDEBUG, and only while shared stacks exist.
template <class T>
inline void check_value([[maybe_unused]] const T& v, [[maybe_unused]] const fiber_record* target,
                        [[maybe_unused]] const char* direction) {
#ifndef NDEBUG
    if constexpr (std::is_pointer_v<T> && std::is_object_v<std::remove_pointer_t<T>>) {
        if (shared_pools_exist())
            check_pointer_for(const_cast<const void*>(static_cast<const volatile void*>(v)), target, direction);
    }
#endif
}

}  // namespace weft::detail
