// weft/coroutine.hpp: layer L2, asymmetric stackful coroutines.
//
//   weft::coroutine<int> counter([](weft::yielder<int>& y) {
//       for (int i = 0; i < 3; ++i) y.yield(i);
//   });
//   while (auto v = counter.resume()) std::printf("%d\n", *v);
//
// coroutine<Yield, Resume, Return> runs a body on its own stack. The body is
// called as body(yielder<Yield, Resume>&) or, when Resume is not void, as
// body(yielder&, Resume first). yield(v) hands v to the resume() that ran
// the coroutine and suspends; the value passed to the next resume() is what
// yield returns. The body's return value is kept until the coroutine is
// destroyed. Nothing is allocated on the heap: the control block, the body
// and the private data area live at the top of the coroutine's own stack.
//
// A suspended coroutine may be resumed on another thread. Code inside it
// must then not rely on thread-local addresses or thread ids computed before
// a yield: compilers cache them across calls (glibc declares
// __errno_location() and pthread_self() `const`; gcc -O2 and clang, even at
// -O0 or with -fPIC, reuse a thread_local's address). Read them after the
// yield through a function the optimiser cannot see through, as
// tests/unit/coroutine/tls_migration_test.cpp does. this_coroutine::get() is
// always right: weft reads its own thread-local that way.
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <iterator>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "weft/config.hpp"
#include "weft/context.hpp"
#include "weft/detail/sanitizer.hpp"
#include "weft/stack.hpp"

namespace weft {

// coroutine_state is where a coroutine is in its life:
//   created -> running <-> suspended -> ... -> done
// running means some thread is executing its body right now.
enum class coroutine_state : std::uint8_t { created, running, suspended, done };

// to_string() names a state ("created", "running", "suspended", "done").
[[nodiscard]] WEFT_API const char* to_string(coroutine_state s) noexcept;

// coroutine_errc lists the misuses that weft reports instead of corrupting
// memory.
enum class coroutine_errc {
    empty_handle = 1,   // operation on a moved-from or default-constructed handle
    resume_done,        // resume() of a coroutine whose body has finished
    resume_running,     // resume() of a coroutine running on some thread
    resume_self,        // resume() from inside the coroutine itself
    yield_outside,      // yield() while not running inside that coroutine
    yield_type,         // this_coroutine::yield() in a coroutine that yields values
    no_result,          // result() before the body returned a value
    stack_too_small,    // the stack cannot hold the control block and a frame
};

// coroutine_error is thrown on misuse. what() names the coroutine and its
// state, e.g. "weft: resume of coroutine 'worker' which is done".
class WEFT_API coroutine_error : public std::logic_error {
public:
    coroutine_error(coroutine_errc code, const std::string& message);
    // code() says which misuse it was.
    [[nodiscard]] coroutine_errc code() const noexcept { return code_; }

private:
    coroutine_errc code_;
};

// coroutine_options configure a coroutine at creation.
struct coroutine_options {
    // stack_size is the usable stack size asked from the allocator; the
    // control block, the name and the private data come out of it.
    std::size_t stack_size = default_stack_size;
    // name appears in error messages and diagnostics; it is copied onto the
    // coroutine's stack.
    std::string_view name = {};
    // private_data_size bytes, 16-byte aligned and zero-filled, are reserved
    // on the coroutine's stack for the user (see private_data()).
    std::size_t private_data_size = 0;
    // paint_stack fills the free stack with a pattern at creation, so that
    // stack_high_water() can report the deepest use (for sizing stacks). It
    // touches, and so commits, the whole stack.
    bool paint_stack = false;
};

// forced_unwind is thrown inside a suspended coroutine that is being
// destroyed, so that its stack unwinds and destructors run. It does not
// derive from std::exception. A body that catches it with catch (...) must
// rethrow it; one that swallows it aborts the process with a message naming
// the coroutine.
class forced_unwind final {};

namespace detail {

// nothing stands in for a void parameter type.
struct nothing {};

// control_block is the type-erased part of every coroutine; it lives at the
// top of the coroutine's stack.
struct control_block {
    void* ctx = nullptr;     // the coroutine's own suspended context
    void* caller = nullptr;  // the context of whoever resumed it last
    void* in = nullptr;      // the value passed by resume(), if any
    void* out = nullptr;     // the value passed by yield(), if any
    std::atomic<coroutine_state> state{coroutine_state::created};
    bool unwinding = false;  // destruction threw forced_unwind into it
    bool plain = false;      // Yield and Resume are void: this_coroutine::yield() is allowed
    std::string_view name;
    std::byte* private_data = nullptr;
    std::size_t private_size = 0;
    stack_view stack;
    std::exception_ptr exception;
    bool painted = false;    // the free stack was painted at creation
    std::size_t requested_stack = 0;  // coroutine_options::stack_size, for the overflow report
    sanitizer::fiber_state fiber;
    void (*run)(control_block*) = nullptr;              // calls the body, keeps its result
    void (*release)(control_block*) noexcept = nullptr;  // destroys the block, frees the stack
};

WEFT_API extern std::atomic<std::int64_t> live_coroutines;

// current_slot() returns this thread's "current coroutine" slot. It is out
// of line and its result goes through an asm barrier, so the compiler
// cannot reuse a thread-local address computed before a stack switch that
// may have moved the caller to another thread.
[[nodiscard]] WEFT_API control_block** current_slot() noexcept;

// entry() is every coroutine's first function (a context::entry_fn).
WEFT_API void entry(context::transfer t) noexcept;

// misuse() throws coroutine_error with the coroutine's name and state.
[[noreturn]] WEFT_API void misuse(const control_block* cb, coroutine_errc code);
// suspend_misuse() throws yield_outside, or aborts when cb yields while it
// is being destroyed.
[[noreturn]] WEFT_API void suspend_misuse(const control_block* cb);
// resume_misuse() throws the error that fits resuming cb in its state.
[[noreturn]] WEFT_API void resume_misuse(const control_block* cb);
// rethrow() rethrows and clears the exception the body let escape.
[[noreturn]] WEFT_API void rethrow(control_block* cb);
// destroy() unwinds cb if it is suspended and releases it.
WEFT_API void destroy(control_block* cb) noexcept;
// paint() fills [stack.base, limit) with the high-water pattern.
WEFT_API void paint(control_block* cb, std::byte* limit) noexcept;
// high_water() is the number of bytes of cb's stack ever used (measured
// from the stack's top), or 0 if the stack was not painted.
[[nodiscard]] WEFT_API std::size_t high_water(const control_block* cb) noexcept;
// prepare_thread() readies the calling thread for running coroutines (an
// alternate signal stack and the overflow handler) the first time it is
// called on that thread.
WEFT_API void prepare_thread() noexcept;
// describe() is "'name'" or "<anonymous 0x...>" for messages.
[[nodiscard]] WEFT_API std::string describe(const control_block* cb);
// stack_too_small() throws coroutine_error (stack_too_small) for a
// coroutine named `name` that asked for `requested` bytes of stack.
[[noreturn]] WEFT_API void stack_too_small(std::string_view name, std::size_t requested, std::size_t needed);

// resume() runs cb until it yields, returns or throws.
inline void resume(control_block* cb) {
    auto st = cb->state.load(std::memory_order_relaxed);
    if (st != coroutine_state::suspended && st != coroutine_state::created) [[unlikely]]
        resume_misuse(cb);
    // The resumer stays on this thread for the whole call (the coroutine
    // returns to it here), so the slot address is valid after the jump.
    control_block** slot = current_slot();
    control_block* prev = *slot;
    *slot = cb;
    cb->state.store(coroutine_state::running, std::memory_order_relaxed);
    void* resumer_fake = nullptr;
    sanitizer::enter(cb->fiber, &resumer_fake, cb->stack.base, cb->stack.size);
    context::transfer t = context::jump(cb->ctx, cb);
    sanitizer::returned(resumer_fake);
    *slot = prev;
    cb->ctx = t.from;
    if (cb->exception) [[unlikely]]
        rethrow(cb);
}

// suspend() switches from the running coroutine cb back to its resumer.
inline void suspend(control_block* cb) {
    if (cb->state.load(std::memory_order_relaxed) != coroutine_state::running ||
        !cb->stack.contains(__builtin_frame_address(0)) || cb->unwinding) [[unlikely]]
        suspend_misuse(cb);
    cb->state.store(coroutine_state::suspended, std::memory_order_relaxed);
    sanitizer::leave(cb->fiber, false);
    context::transfer t = context::jump(cb->caller, nullptr);
    sanitizer::arrived(cb->fiber, false);
    cb->caller = t.from;
}

template <class T>
using arg_t = std::conditional_t<std::is_void_v<T>, nothing, T>;

template <class Return>
struct result_block : control_block {
    std::optional<Return> result;
};
template <>
struct result_block<void> : control_block {};

template <class Yield, class Resume, class Return, class F, class Alloc>
struct body_block;

inline std::byte* align_down(std::byte* p, std::size_t a) noexcept {
    return reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(p) & ~(std::uintptr_t(a) - 1));
}

// create() allocates a stack and places, from its top down: the name, the
// control block (which holds the body and the allocator), the private data
// area; the first context frame goes below them.
template <class Block, class Alloc, class F>
Block* create(Alloc alloc, F&& fn, const coroutine_options& opts) {
    // Everything placed above the first frame must leave room for a frame.
    constexpr std::size_t min_room = 1024;
    stack_view s = alloc.allocate(opts.stack_size);
    auto* top = static_cast<std::byte*>(s.top());
    auto* base = static_cast<std::byte*>(s.base);
    const std::size_t fixed = opts.name.size() + 1 + sizeof(Block) + alignof(Block) + opts.private_data_size + 16;
    if (fixed > s.size || s.size - fixed < min_room) {
        alloc.deallocate(s);
        stack_too_small(opts.name, opts.stack_size, fixed + min_room);
    }
    std::byte* p = top - (opts.name.size() + 1);
    char* name = reinterpret_cast<char*>(p);
    if (!opts.name.empty()) std::memcpy(name, opts.name.data(), opts.name.size());
    name[opts.name.size()] = '\0';
    p = align_down(p - sizeof(Block), alignof(Block));
    Block* b;
    try {
        b = ::new (static_cast<void*>(p)) Block(std::forward<F>(fn), std::move(alloc));
    } catch (...) {
        alloc.deallocate(s);  // Block's allocator member was not constructed yet
        throw;
    }
    std::byte* pd = align_down(p - opts.private_data_size, 16);
    if (opts.private_data_size) std::memset(pd, 0, opts.private_data_size);
    b->name = std::string_view(name, opts.name.size());
    b->private_data = pd;
    b->private_size = opts.private_data_size;
    b->stack = s;
    b->requested_stack = opts.stack_size;
    if (opts.paint_stack) paint(b, pd);
    sanitizer::on_create(b->fiber, s.base, s.size);
    b->ctx = context::make(pd, static_cast<std::size_t>(pd - base), &entry);
    live_coroutines.fetch_add(1, std::memory_order_relaxed);
    return b;
}

}  // namespace detail

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
    Resume yield(detail::arg_t<Yield> value)
        requires(!std::is_void_v<Yield>)
    {
        cb_->out = std::addressof(value);
        detail::suspend(cb_);
        return take();
    }
    // yield() suspends a coroutine that yields no value.
    Resume yield()
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
    template <class, class, class, class, class>
    friend struct detail::body_block;
    explicit yielder(detail::control_block* cb) noexcept : cb_(cb) {}

    Resume take() {
        if constexpr (!std::is_void_v<Resume>) return std::move(*static_cast<Resume*>(cb_->in));
    }

    detail::control_block* cb_;
};

namespace detail {

template <class Yield, class Resume, class Return, class F, class Alloc>
struct body_block final : result_block<Return> {
    F fn;
    Alloc alloc;

    template <class G>
    body_block(G&& g, Alloc&& a) : fn(std::forward<G>(g)), alloc(std::move(a)) {
        this->run = &run_body;
        this->release = &release_block;
        this->plain = std::is_void_v<Yield> && std::is_void_v<Resume>;
    }

    static void run_body(control_block* b) {
        auto* self = static_cast<body_block*>(b);
        yielder<Yield, Resume> y(b);
        if constexpr (std::is_void_v<Resume>) {
            if constexpr (std::is_void_v<Return>)
                std::invoke(self->fn, y);
            else
                self->result.emplace(std::invoke(self->fn, y));
        } else {
            Resume first = std::move(*static_cast<Resume*>(b->in));
            if constexpr (std::is_void_v<Return>)
                std::invoke(self->fn, y, std::move(first));
            else
                self->result.emplace(std::invoke(self->fn, y, std::move(first)));
        }
    }

    static void release_block(control_block* b) noexcept {
        auto* self = static_cast<body_block*>(b);
        Alloc a(std::move(self->alloc));
        stack_view s = self->stack;
        self->~body_block();
        a.deallocate(s);
    }
};

}  // namespace detail

// coroutine_ref is a non-owning view of a coroutine, as returned by
// this_coroutine::get(). It is valid while the coroutine exists.
class coroutine_ref {
public:
    coroutine_ref() noexcept = default;
    explicit coroutine_ref(detail::control_block* cb) noexcept : cb_(cb) {}

    // name() is the coroutine's name (may be empty). Requires: *this.
    [[nodiscard]] std::string_view name() const noexcept { return cb_->name; }
    // state() is the coroutine's state. Requires: *this.
    [[nodiscard]] coroutine_state state() const noexcept { return cb_->state.load(std::memory_order_relaxed); }
    // private_data() is the coroutine's private data area. Requires: *this.
    [[nodiscard]] std::span<std::byte> private_data() const noexcept { return {cb_->private_data, cb_->private_size}; }
    // stack() is the whole stack the coroutine runs on. Requires: *this.
    [[nodiscard]] stack_view stack() const noexcept { return cb_->stack; }
    [[nodiscard]] explicit operator bool() const noexcept { return cb_ != nullptr; }
    friend bool operator==(coroutine_ref, coroutine_ref) noexcept = default;

private:
    detail::control_block* cb_ = nullptr;
};

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
    using resume_result = std::conditional_t<std::is_void_v<Yield>, bool, std::optional<detail::arg_t<Yield>>>;

    // coroutine() is an empty handle.
    coroutine() noexcept = default;

    // coroutine(body, options) creates a suspended coroutine on an
    // mmap_stack; the body does not run until the first resume(). Throws:
    // stack_error; coroutine_error (stack_too_small); what moving the body
    // throws. Nothing is allocated on the heap.
    template <class F>
        requires(!std::same_as<std::remove_cvref_t<F>, coroutine> && !std::same_as<std::remove_cvref_t<F>, std::allocator_arg_t>)
    explicit coroutine(F&& body, const coroutine_options& options = {})
        : coroutine(std::allocator_arg, mmap_stack{}, std::forward<F>(body), options) {}

    // coroutine(allocator_arg, alloc, body, options) uses the given stack
    // allocator; it is moved onto the coroutine's stack.
    template <stack_allocator Alloc, class F>
    coroutine(std::allocator_arg_t, Alloc alloc, F&& body, const coroutine_options& options = {})
        : cb_(detail::create<detail::body_block<Yield, Resume, Return, std::decay_t<F>, Alloc>>(
              std::move(alloc), std::forward<F>(body), options)) {}

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
    resume_result resume()
        requires std::is_void_v<Resume>
    {
        check();
        detail::resume(cb_);
        return yielded();
    }
    // resume(value) passes value to the body: as its second argument on the
    // first resume, as the result of yield() afterwards.
    resume_result resume(detail::arg_t<Resume> value)
        requires(!std::is_void_v<Resume>)
    {
        check();
        cb_->in = std::addressof(value);
        detail::resume(cb_);
        return yielded();
    }

    // done() says whether the body has finished (returned, thrown, unwound).
    [[nodiscard]] bool done() const { return state() == coroutine_state::done; }
    // state() is the coroutine's state. Throws: coroutine_error (empty_handle).
    [[nodiscard]] coroutine_state state() const {
        check();
        return cb_->state.load(std::memory_order_relaxed);
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
    // ref() is a non-owning view of this coroutine.
    [[nodiscard]] coroutine_ref ref() const noexcept { return coroutine_ref(cb_); }

    // result() is the body's return value. Requires: the body returned.
    // Throws: coroutine_error (no_result, empty_handle).
    template <class R = Return>
        requires(!std::is_void_v<R>)
    [[nodiscard]] R& result() {
        check();
        auto* rb = static_cast<detail::result_block<Return>*>(cb_);
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
    resume_result yielded() {
        const bool suspended = cb_->state.load(std::memory_order_relaxed) == coroutine_state::suspended;
        if constexpr (std::is_void_v<Yield>) {
            return suspended;
        } else {
            if (!suspended) return std::nullopt;
            return std::optional<Yield>(std::move(*static_cast<Yield*>(cb_->out)));
        }
    }

    detail::control_block* cb_ = nullptr;
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

namespace stats {
// live_coroutines() is the number of coroutines created and not yet
// destroyed, over all threads.
[[nodiscard]] WEFT_API std::int64_t live_coroutines() noexcept;
}  // namespace stats

}  // namespace weft
