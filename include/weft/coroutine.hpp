// weft/coroutine.hpp: layer L2, asymmetric stackful coroutines with values.
//
//   weft::coroutine<int> counter([](weft::yielder<int>& y) {
//       for (int i = 0; i < 3; ++i) y.yield(i);
//   });
//   while (auto v = counter.resume()) std::printf("%d\n", *v);
//
// coroutine<Yield, Resume, Return> is a typed wrapper on weft::fiber
// (weft/fiber.hpp): it runs a body on its own stack, passes values both
// ways and rethrows what the body lets escape. The body is called as
// body(yielder<Yield, Resume>&) or, when Resume is not void, as
// body(yielder&, Resume first). yield(v) hands v to the resume() that ran
// the coroutine and suspends; the value passed to the next resume() is what
// yield returns. The body's return value is kept until the coroutine is
// destroyed. By default each coroutine has a stack of its own from the
// process-wide stack_pool (pooled_stack), and nothing is allocated on the
// heap: the record, the body and the private data live at the top of that
// stack. With a shared_stack instead (weft/shared_stack.hpp), coroutines
// take turns on a few shared stacks and keep their record and saved stack
// bytes in one small heap block (copy-stack mode).
//
// A suspended coroutine may be resumed on another thread; see weft/fiber.hpp
// for what that asks of the code inside it.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>

#include "weft/detail/coroutine_block.hpp"
#include "weft/fiber.hpp"

namespace weft {

// coroutine_options configure a coroutine at creation (see fiber_options).
using coroutine_options = fiber_options;

// yielded_bool is what resume() of a coroutine<bool> returns: the yielded
// bool, or nothing when the body returned. Unlike std::optional<bool> it has
// no conversion to bool, which would test has_value() where a reader expects
// the value (`while (auto v = co.resume())` would loop on `false`).
class yielded_bool {
public:
    yielded_bool() noexcept = default;
    yielded_bool(std::nullopt_t) noexcept {}
    explicit yielded_bool(bool v) noexcept : has_(true), v_(v) {}
    // has_value() says whether the body yielded (false: it returned).
    [[nodiscard]] bool has_value() const noexcept { return has_; }
    // value() is the yielded bool. Throws: std::bad_optional_access if none.
    [[nodiscard]] bool value() const {
        if (!has_) throw std::bad_optional_access();
        return v_;
    }
    // operator*() is the yielded bool. Requires: has_value().
    [[nodiscard]] bool operator*() const noexcept { return v_; }
    explicit operator bool() const = delete;  // say has_value() or *r
    friend bool operator==(const yielded_bool&, const yielded_bool&) noexcept = default;

private:
    bool has_ = false;
    bool v_ = false;
};

// yielder is the body's handle on its own coroutine: yield() suspends it.
// A yielder must only be used from inside its coroutine.
template <class Yield = void, class Resume = void>
class yielder {
public:
    using yield_type = Yield;
    using resume_type = Resume;

    // yield() suspends the coroutine, handing `value` to the resume() that
    // ran it; returns the value passed to the next resume(). Requires:
    // called from inside this coroutine. Throws: coroutine_error
    // (yield_outside); forced_unwind when the coroutine is being destroyed
    // (let it pass).
    WEFT_HOT_INLINE Resume yield(detail::arg_t<Yield> value)
        requires(!std::is_void_v<Yield>)
    {
        cb_->out = std::addressof(value);
        // In copy-stack mode the value lies on the shared stack: the resumer
        // gives the stack back only once it has moved the value out.
        cb_->keep_stack = cb_->copy != nullptr;
        detail::suspend(cb_);
        return take();
    }
    // yield() suspends a coroutine that yields no value.
    WEFT_HOT_INLINE Resume yield()
        requires std::is_void_v<Yield>
    {
        detail::suspend(cb_);
        return take();
    }

    // name() is the coroutine's name (may be empty).
    [[nodiscard]] std::string_view name() const noexcept { return cb_->name; }
    // private_data() is the zero-filled area reserved by
    // coroutine_options::private_data_size.
    [[nodiscard]] std::span<std::byte> private_data() const noexcept { return {cb_->private_data, cb_->private_size}; }

    yielder(const yielder&) = delete;
    yielder& operator=(const yielder&) = delete;

private:
    friend struct detail::yielder_access;
    explicit yielder(detail::coroutine_record* cb) noexcept : cb_(cb) {}

    Resume take() {
        if constexpr (!std::is_void_v<Resume>) return std::move(*static_cast<Resume*>(cb_->in));
    }

    detail::coroutine_record* cb_;
};

// coroutine_ref is a non-owning view of a coroutine, as returned by
// this_coroutine::get(). It is valid while the coroutine exists.
class coroutine_ref {
public:
    coroutine_ref() noexcept = default;
    explicit coroutine_ref(detail::fiber_record* cb) noexcept : cb_(cb) {}

    // name() is the coroutine's name (may be empty). Requires: *this.
    [[nodiscard]] std::string_view name() const noexcept { return cb_->name; }
    // state() is the coroutine's state. Requires: *this.
    [[nodiscard]] coroutine_state state() const noexcept { return cb_->state.load(std::memory_order_relaxed); }
    // private_data() is the coroutine's private data area. Requires: *this.
    [[nodiscard]] std::span<std::byte> private_data() const noexcept { return {cb_->private_data, cb_->private_size}; }
    // stack() is the whole stack the coroutine runs on (its shared stack in
    // copy-stack mode). Requires: *this.
    [[nodiscard]] stack_view stack() const noexcept { return cb_->stack; }
    // copy_stats() see coroutine::copy_stats(). Requires: *this.
    [[nodiscard]] copy_stack_stats copy_stats() const noexcept { return detail::copy_stats(cb_); }
    [[nodiscard]] explicit operator bool() const noexcept { return cb_ != nullptr; }
    friend bool operator==(coroutine_ref, coroutine_ref) noexcept = default;

private:
    detail::fiber_record* cb_ = nullptr;
};

// coroutine_stack is what a coroutine can run on: a stack_allocator (a
// stack of its own) or a shared_stack (copy-stack mode).
template <class A>
concept coroutine_stack = fiber_stack<A>;

// check_shared_stack_pointer() throws coroutine_error (shared_stack_pointer)
// when p points into a shared stack at an address that is not part of a
// live frame for the code calling it: below the running coroutine's stack
// pointer on its own shared stack, or on another shared stack below the
// stack pointer of the coroutine whose bytes are there (or where none is).
// A pointer into a suspended coroutine's live bytes passes: it stays valid
// until another coroutine of that stack runs. Does nothing for other
// addresses. Meant for debug builds; it takes a process-wide lock.
// docs/safety.md, Copy stacks, says what it cannot see.
WEFT_API void check_shared_stack_pointer(const void* p);

// coroutine is a move-only handle owning an asymmetric stackful coroutine.
//   Yield   the type yield() passes out (void: none)
//   Resume  the type resume() passes in (void: none); the first resume's
//           value becomes the body's second argument
//   Return  the body's return type, kept for result()
template <class Yield = void, class Resume = void, class Return = void>
class coroutine {
    static_assert(std::is_void_v<Yield> || (std::is_object_v<Yield> && std::is_move_constructible_v<Yield>),
                  "Yield must be void or a movable object type");
    static_assert(std::is_void_v<Resume> || (std::is_object_v<Resume> && std::is_move_constructible_v<Resume>),
                  "Resume must be void or a movable object type");

public:
    using yielder_type = yielder<Yield, Resume>;
    // resume_result is what resume() returns: the yielded value, or nothing
    // if the body returned (bool for a coroutine that yields no value).
    // (yielded_bool for a coroutine<bool>, which has no conversion to bool).
    using resume_result =
        std::conditional_t<std::is_void_v<Yield>, bool,
                           std::conditional_t<std::is_same_v<Yield, bool>, yielded_bool, std::optional<detail::arg_t<Yield>>>>;

    // coroutine() is an empty handle.
    coroutine() noexcept = default;

    // coroutine(body, options) creates a suspended coroutine on a stack from
    // the process-wide stack_pool (pooled_stack{}: a warm, previously used
    // stack when one is idle, else a fresh guarded mmap stack; sizes above
    // the pool's stack size get a stack of their own, unmapped at the end).
    // The body does not run until the first resume(). Throws: stack_error;
    // coroutine_error (stack_too_small); what moving the body throws.
    // Nothing is allocated on the heap (the pool's first use on a thread
    // allocates that thread's cache).
    template <class F>
        requires(!std::same_as<std::remove_cvref_t<F>, coroutine> && !std::same_as<std::remove_cvref_t<F>, std::allocator_arg_t>)
    explicit coroutine(F&& body, const coroutine_options& options = {})
        : coroutine(std::allocator_arg, pooled_stack{}, std::forward<F>(body), options) {}

    // coroutine(allocator_arg, alloc, body, options) uses the given stack
    // allocator; it is moved onto the coroutine's stack. With a
    // shared_stack instead, the coroutine runs in copy-stack mode on a stack
    // of that pool (weft/shared_stack.hpp): its record, body, name, private
    // data and saved stack bytes share one heap block, and paint_stack is
    // ignored. Throws: as above (stack_too_small also when
    // options.stack_size exceeds the pool's stacks); std::bad_alloc in
    // copy-stack mode.
    template <coroutine_stack Alloc, class F>
    coroutine(std::allocator_arg_t, Alloc alloc, F&& body, const coroutine_options& options = {})
        : cb_(static_cast<detail::coroutine_record*>(detail::make_block<detail::coroutine_base<Yield, Resume, Return>>(
              std::move(alloc), std::forward<F>(body), options))) {}

    coroutine(coroutine&& other) noexcept : cb_(std::exchange(other.cb_, nullptr)) {}
    coroutine& operator=(coroutine&& other) noexcept {
        if (this != &other) {
            reset();
            cb_ = std::exchange(other.cb_, nullptr);
        }
        return *this;
    }
    coroutine(const coroutine&) = delete;
    coroutine& operator=(const coroutine&) = delete;

    // ~coroutine() destroys the coroutine: a suspended one is unwound first
    // (forced_unwind runs its destructors), then its stack is freed.
    // Requires: not running (destroying a running coroutine aborts).
    ~coroutine() { reset(); }

    // resume() runs the coroutine until it yields (returns the value) or its
    // body returns (returns an empty optional / false). Requires: a
    // coroutine that is created or suspended, resumed from outside itself.
    // Throws: coroutine_error (empty_handle, resume_done, resume_running,
    // resume_self); whatever the body threw, after which done() is true.
    //
    // In copy-stack mode resume() first copies the coroutine's saved bytes
    // back onto its shared stack (saving those of the coroutine that was
    // there). Throws besides: coroutine_error (shared_stack_busy) when a
    // coroutine running on this thread uses that stack; std::bad_alloc when
    // the saved bytes of the coroutine that was there cannot be kept (then
    // nothing has changed). In builds without NDEBUG, a raw pointer passed in
    // or yielded out that points into a shared stack where it will not be
    // live throws coroutine_error (shared_stack_pointer); see
    // check_shared_stack_pointer().
    WEFT_HOT_INLINE resume_result resume()
        requires std::is_void_v<Resume>
    {
        check();
        return detail::resume_typed(cb_, [this](bool plain) { return yielded(plain); });
    }
    // resume(value) passes value to the body: as its second argument on the
    // first resume, as the result of yield() afterwards.
    WEFT_HOT_INLINE resume_result resume(detail::arg_t<Resume> value)
        requires(!std::is_void_v<Resume>)
    {
        check();
        detail::check_value(value, cb_, "passed to");
        cb_->in = std::addressof(value);
        return detail::resume_typed(cb_, [this](bool plain) { return yielded(plain); });
    }

    // done() says whether the body has finished (returned, thrown, unwound).
    [[nodiscard]] bool done() const { return state() == coroutine_state::done; }
    // state() is the coroutine's state. Throws: coroutine_error (empty_handle).
    [[nodiscard]] coroutine_state state() const {
        check();
        return cb_->state.load(std::memory_order_acquire);
    }
    // name() is the name given in the options.
    [[nodiscard]] std::string_view name() const {
        check();
        return cb_->name;
    }
    // private_data() is the zero-filled private data area.
    [[nodiscard]] std::span<std::byte> private_data() const {
        check();
        return {cb_->private_data, cb_->private_size};
    }
    // stack_high_water() is how many bytes of its stack the coroutine has
    // used at most so far, counted from the top (control block included);
    // 0 unless created with paint_stack.
    [[nodiscard]] std::size_t stack_high_water() const {
        check();
        return detail::high_water(cb_);
    }
    // copy_stats() is what copy-stack mode copied for this coroutine so far:
    // bytes saved at the last save and at most, number of saves and
    // restores. All zero for a coroutine with a stack of its own. Requires:
    // not running on another thread.
    [[nodiscard]] copy_stack_stats copy_stats() const {
        check();
        return detail::copy_stats(cb_);
    }
    // ref() is a non-owning view of this coroutine.
    [[nodiscard]] coroutine_ref ref() const noexcept { return coroutine_ref(cb_); }

    // result() is the body's return value. Requires: the body returned.
    // Throws: coroutine_error (no_result, empty_handle).
    template <class R = Return>
        requires(!std::is_void_v<R>)
    [[nodiscard]] R& result() {
        check();
        auto* rb = static_cast<detail::result_record<Return>*>(cb_);
        if (!rb->result) detail::misuse(cb_, coroutine_errc::no_result);
        return *rb->result;
    }

    // explicit operator bool says whether the handle owns a coroutine.
    [[nodiscard]] explicit operator bool() const noexcept { return cb_ != nullptr; }

    // reset() destroys the coroutine now (see the destructor).
    void reset() noexcept {
        if (cb_) detail::destroy(std::exchange(cb_, nullptr));
    }

private:
    void check() const {
        if (!cb_) [[unlikely]]
            detail::misuse(nullptr, coroutine_errc::empty_handle);
    }
    // yielded(plain): plain says the coroutine is known to be suspended
    // (resume_typed()), which saves reading its state.
    resume_result yielded(bool plain) {
        const bool suspended = plain || cb_->state.load(std::memory_order_relaxed) == coroutine_state::suspended;
        if constexpr (std::is_void_v<Yield>) {
            return suspended;
        } else {
            if (!suspended) return std::nullopt;
            detail::check_value(*static_cast<Yield*>(cb_->out), detail::this_thread_state()->current, "yielded to");
            return resume_result(std::move(*static_cast<Yield*>(cb_->out)));
        }
    }

    detail::coroutine_record* cb_ = nullptr;
};

namespace this_coroutine {

// get() is the coroutine running on this thread, or an empty view when the
// caller is not inside a coroutine. Safe across migration between threads.
[[nodiscard]] WEFT_API coroutine_ref get() noexcept;

// inside() says whether the caller runs inside a coroutine.
[[nodiscard]] inline bool inside() noexcept { return static_cast<bool>(get()); }

// yield() suspends the current coroutine<void, void, R>. Throws:
// coroutine_error (yield_outside when not inside a coroutine, yield_type when
// the current coroutine yields or receives values); forced_unwind.
WEFT_API void yield();

}  // namespace this_coroutine


}  // namespace weft
