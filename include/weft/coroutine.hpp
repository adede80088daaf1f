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
// destroyed. By default each coroutine has a stack of its own from the
// process-wide stack_pool (pooled_stack), and nothing is allocated on the
// heap: the control block, the body and the private data area live at the
// top of that stack. With a shared_stack instead (weft/shared_stack.hpp),
// coroutines take turns on a few shared stacks and keep their control block
// and saved stack bytes in one small heap block (copy-stack mode).
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
#include "weft/pooled_stack.hpp"
#include "weft/shared_stack.hpp"
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
    shared_stack_busy,  // resume() of a copy-stack coroutine whose shared stack runs a coroutine of this thread
    shared_stack_pointer,  // a pointer into a shared stack that is not live for the coroutine that would use it
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
    // touches, and so commits, the whole stack. Ignored in copy-stack mode
    // (the shared stack holds other coroutines' frames).
    bool paint_stack = false;
    // cache_colouring places the name, control block and private data a
    // varying multiple of 64 bytes (0 to cache_colours - 1 cache lines)
    // below the top of the stack, so that the control blocks of many
    // coroutines on equally aligned stacks do not all map to the same cache
    // sets. It costs up to 960 bytes of the stack, and never more than a
    // sixteenth of it. Without effect in copy-stack mode (the control block
    // is on the heap).
    bool cache_colouring = true;
};

// cache_colours is how many different cache-line offsets cache colouring
// uses: 16, so at most 15 lines (960 bytes). The L1 data cache of current
// x86-64 and AArch64 cores is indexed by the address bits within a page, so
// 16 offsets give 16 sets times the cache's ways (128 control blocks with 8
// ways) before two of them evict each other. A wider range bought nothing
// more and cost a page: with offsets up to 63 lines the control block and
// the first frames of a small coroutine often reached into a second page of
// its stack, and S3 (30,000 coroutines on pooled 64 KiB stacks) took twice
// the page faults of colouring off, a second resident page per stack
// (bench/README.md, "Cache colouring", which also has what colouring costs
// and gains now).
inline constexpr unsigned cache_colours = 16;

// forced_unwind is thrown inside a suspended coroutine that is being
// destroyed, so that its stack unwinds and destructors run. It does not
// derive from std::exception. A body that catches it with catch (...) must
// rethrow it; one that swallows it aborts the process with a message naming
// the coroutine.
class forced_unwind final {};

namespace detail {

// nothing stands in for a void parameter type.
struct nothing {};

// with_tools says whether this weft build announces switches to a tool.
inline constexpr bool with_tools = WEFT_ASAN || WEFT_TSAN || WEFT_VALGRIND;
struct no_tools {};

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
    // fiber() is what ASan, TSan and valgrind need per coroutine; in a weft
    // built without them it takes no space (the accessor hands out one
    // shared object that the then empty hooks never touch).
    [[no_unique_address]] std::conditional_t<with_tools, sanitizer::fiber_state, no_tools> fiber_;
    sanitizer::fiber_state& fiber() noexcept { return pick_fiber(fiber_); }
    template <class S>
    static sanitizer::fiber_state& pick_fiber(S& s) noexcept {
        if constexpr (std::is_same_v<S, sanitizer::fiber_state>) {
            return s;
        } else {
            static constinit sanitizer::fiber_state unused;
            return unused;
        }
    }
    context::entry_fn start = nullptr;                  // entry_for<...Block>: the first function on its stack
    void (*release)(control_block*) noexcept = nullptr;  // destroys the block, frees the stack
    struct copy_state* copy = nullptr;  // copy-stack mode: the saved bytes; null otherwise
};

// copy_state is what a copy-stack coroutine keeps besides its control block:
// its shared stack and the buffer its stack bytes are saved to. The buffer
// starts as the tail of the control block's own heap block and moves to a
// separate heap block of exactly the needed size when a save outgrows it.
struct copy_state {
    shared_stack_slot* slot = nullptr;
    std::byte* buffer = nullptr;
    std::uint32_t saved = 0;     // bytes in buffer: those of the last save
    std::uint32_t capacity = 0;  // bytes buffer can hold
    std::uint32_t max_saved = 0;
    bool external = false;       // buffer is a heap block of its own
    std::uint64_t saves = 0;
    std::uint64_t restores = 0;
};

// live_coroutines counts coroutines alive, per thread (detail::thread_counter id 1).
WEFT_API extern thread_counter live_coroutines;

// current_slot() returns this thread's "current coroutine" slot. It is out
// of line and its result goes through an asm barrier, so the compiler
// cannot reuse a thread-local address computed before a stack switch that
// may have moved the caller to another thread.
[[nodiscard]] WEFT_API control_block** current_slot() noexcept;

// A coroutine's first function is entry_for<...Block>() (below): one
// context::entry_fn per block type, so the body is called from it directly
// and the coroutine's stack carries one frame less (which is what destroying
// a suspended coroutine unwinds, and what a copy-stack coroutine saves).
// entry_begin() is its start: tool hand-over, the resumer's context.
[[nodiscard]] WEFT_API control_block* entry_begin(context::transfer t) noexcept;
// entry_caught() keeps what the body let escape (called in a catch (...)).
WEFT_API void entry_caught(control_block* cb) noexcept;
// entry_end() finishes the coroutine: marks it done and switches back to
// its resumer for the last time. `unwound`: forced_unwind reached the entry
// (it aborts, naming the coroutine, if destruction found it swallowed).
[[noreturn]] WEFT_API void entry_end(control_block* cb, bool unwound) noexcept;

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

// enter_shared() makes cb's shared stack hold cb's bytes and marks it in
// use by this thread: it saves the bytes of the coroutine whose frames are
// there (growing its buffer) and copies cb's back, on the resumer's stack.
// Throws: coroutine_error (shared_stack_busy) when a coroutine of this
// thread runs on that stack; std::bad_alloc when the evicted coroutine's
// buffer cannot grow (nothing has changed then). Waits while a coroutine of
// another thread runs there.
WEFT_API void enter_shared(control_block* cb);
// leave_shared() gives cb's shared stack back once cb has switched out and
// its yielded value has been taken.
WEFT_API void leave_shared(control_block* cb) noexcept;

// switch_to() is the switch every coroutine transfer goes through: the
// inline context::fast_jump(). TSan builds use the out-of-line
// context::jump() instead: with the inline switch, clang 14's TSan runtime
// ended up on a corrupted shadow call stack in nested and many-coroutine
// tests (every other build, ASan included, passes them with it). Not
// understood yet; docs/safety.md records it.
[[gnu::always_inline]] inline context::transfer switch_to(void* to, void* data) noexcept {
#if WEFT_TSAN
    return context::jump(to, data);
#else
    return context::fast_jump(to, data);
#endif
}

// switch_gap is what switch_to() leaves between a suspended context's frame
// and the suspended function's data (see context::fast_jump_gap).
inline constexpr std::size_t switch_gap = WEFT_TSAN ? 0 : context::fast_jump_gap;

// switch_in() is the one place where a resumer switches into a coroutine
// (resume() and destruction both come through here). Requires: cb is
// created or suspended, and its stack holds its frames.
inline void switch_in(control_block* cb) {
    // The resumer stays on this thread for the whole call (the coroutine
    // returns to it here), so the slot address is valid after the jump.
    control_block** slot = current_slot();
    control_block* prev = *slot;
    *slot = cb;
    cb->state.store(coroutine_state::running, std::memory_order_relaxed);
    void* resumer_fake = nullptr;
    sanitizer::enter(cb->fiber(), &resumer_fake, cb->stack.base, cb->stack.size);
    context::transfer t = switch_to(cb->ctx, cb);
    sanitizer::returned(resumer_fake);
    *slot = prev;
    cb->ctx = t.from;
}

// shared_hold gives a copy-stack coroutine's shared stack back at the end
// of a resume, after the value it yielded (which lies on that stack) has been
// moved out.
struct shared_hold {
    control_block* cb;
    ~shared_hold() { leave_shared(cb); }
};

// resume() runs cb until it yields, returns or throws, then returns take()
// (which reads what the coroutine yielded).
template <class Take>
inline auto resume(control_block* cb, Take take) -> decltype(take()) {
    auto st = cb->state.load(std::memory_order_relaxed);
    if (st != coroutine_state::suspended && st != coroutine_state::created) [[unlikely]]
        resume_misuse(cb);
    if (!cb->copy) [[likely]] {
        switch_in(cb);
        if (cb->exception) [[unlikely]]
            rethrow(cb);
        return take();
    }
    enter_shared(cb);
    shared_hold hold{cb};
    switch_in(cb);
    if (cb->exception) [[unlikely]]
        rethrow(cb);
    return take();
}

// suspend() switches from the running coroutine cb back to its resumer.
// Throws: forced_unwind when the coroutine is resumed to be destroyed.
inline void suspend(control_block* cb) {
    if (cb->state.load(std::memory_order_relaxed) != coroutine_state::running ||
        !cb->stack.contains(__builtin_frame_address(0)) || cb->unwinding) [[unlikely]]
        suspend_misuse(cb);
    cb->state.store(coroutine_state::suspended, std::memory_order_relaxed);
    sanitizer::leave(cb->fiber(), false);
    context::transfer t = switch_to(cb->caller, nullptr);
    sanitizer::arrived(cb->fiber(), false);
    cb->caller = t.from;
    // Thrown right here rather than from an out-of-line helper: each frame
    // between the throw and entry_for() is walked twice by the unwinder
    // (search, then cleanup), about a fifth of the cost of destroying a
    // suspended coroutine.
    if (cb->unwinding) [[unlikely]]
        throw forced_unwind{};
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
template <class Yield, class Resume, class Return, class F>
struct copy_block;

// next_colour() steps through 0 .. cache_colours - 1 on each thread: the
// cache line offset of the next coroutine's control block (see create()).
[[nodiscard]] WEFT_API unsigned next_colour() noexcept;

inline std::byte* align_down(std::byte* p, std::size_t a) noexcept {
    return reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(p) & ~(std::uintptr_t(a) - 1));
}

// create() allocates a stack and places, from its top (less the colour)
// down: the name, the control block (which holds the body and the
// allocator), the private data area; the first context frame goes below
// them.
//
// Colouring: stacks from mmap and from pools all start on a page boundary,
// so without an offset every control block would sit at the same offset in
// its page and compete for the same few cache sets. The offset is a
// per-thread counter stepping through the cache_colours lines rather than a hash
// of the stack's address: consecutive coroutines, which are the ones used
// together, get distinct lines for certain, and a pooled stack reused LIFO
// does not carry its colour over to its next coroutine.
template <class Block, class Alloc, class F>
Block* create(Alloc alloc, F&& fn, const coroutine_options& opts) {
    // Everything placed above the first frame must leave room for a frame.
    constexpr std::size_t min_room = 1024;
    stack_view s = alloc.allocate(opts.stack_size);
    auto* top = static_cast<std::byte*>(s.top());
    auto* base = static_cast<std::byte*>(s.base);
    std::size_t fixed = opts.name.size() + 1 + sizeof(Block) + alignof(Block) + 16;
    if (__builtin_add_overflow(fixed, opts.private_data_size, &fixed) || fixed > s.size || s.size - fixed < min_room) {
        alloc.deallocate(s);
        stack_too_small(opts.name, opts.stack_size, fixed + min_room);
    }
    if (opts.cache_colouring) {
        std::size_t colour = std::size_t{next_colour()} * 64;
        // At most a sixteenth of the room left for frames, so that colouring
        // never makes a tight stack overflow (a 16 KiB stack without private
        // data already gets every colour).
        const std::size_t spare = ((s.size - fixed) / 16) & ~std::size_t{63};
        top -= colour < spare ? colour : spare;
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
    sanitizer::on_create(b->fiber(), s.base, s.size);
    b->ctx = context::make(pd, static_cast<std::size_t>(pd - base), b->start);
    live_coroutines.add(1);
    return b;
}

// copy_allocate() returns a heap block of at least `bytes` bytes aligned to
// `align`, and in *usable how many bytes it really has. Throws: bad_alloc.
[[nodiscard]] WEFT_API void* copy_allocate(std::size_t bytes, std::size_t align, std::size_t* usable);
// copy_created() finishes a copy-stack coroutine's creation: stack
// assignment, tool registration, counting.
WEFT_API void copy_created(control_block* cb, copy_state* cs, shared_stack_pool& pool, std::byte* buffer,
                           std::size_t capacity) noexcept;
// copy_released() undoes copy_created() and frees an external buffer; the
// caller then destroys the block and frees its memory.
WEFT_API void copy_released(control_block* cb) noexcept;

// create_copy() makes a copy-stack coroutine: one heap block holds the
// control block (with the body), the name, the private data and the first
// save buffer, sized by the pool's save_hint() and rounded up to what the
// allocator really handed out. Nothing touches the shared stack until the
// first resume.
template <class Block, class F>
Block* create_copy(shared_stack where, F&& fn, const coroutine_options& opts) {
    std::size_t size = sizeof(Block) + opts.name.size() + 1;
    size = (size + 15) & ~std::size_t{15};
    const std::size_t pd_offset = size;
    const std::size_t hint = where.pool().save_hint();
    if (__builtin_add_overflow(size, opts.private_data_size, &size) || __builtin_add_overflow(size, hint, &size))
        throw std::bad_alloc();
    const std::size_t buffer_offset = size - hint;
    std::size_t usable = 0;
    auto* mem = static_cast<std::byte*>(copy_allocate(size, alignof(Block), &usable));
    Block* b;
    try {
        b = ::new (static_cast<void*>(mem)) Block(std::forward<F>(fn));
    } catch (...) {
        std::free(mem);
        throw;
    }
    char* name = reinterpret_cast<char*>(mem + sizeof(Block));
    if (!opts.name.empty()) std::memcpy(name, opts.name.data(), opts.name.size());
    name[opts.name.size()] = '\0';
    b->name = std::string_view(name, opts.name.size());
    b->private_data = mem + pd_offset;
    b->private_size = opts.private_data_size;
    if (opts.private_data_size) std::memset(b->private_data, 0, opts.private_data_size);
    copy_created(b, &b->cs, where.pool(), mem + buffer_offset, usable - buffer_offset);
    return b;
}

}  // namespace detail

namespace detail {
struct yielder_access;
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
    friend struct detail::yielder_access;
    explicit yielder(detail::control_block* cb) noexcept : cb_(cb) {}

    Resume take() {
        if constexpr (!std::is_void_v<Resume>) return std::move(*static_cast<Resume*>(cb_->in));
    }

    detail::control_block* cb_;
};

namespace detail {

struct yielder_access {
    template <class Yield, class Resume>
    static yielder<Yield, Resume> make(control_block* cb) noexcept {
        return yielder<Yield, Resume>(cb);
    }
};

// run_body() calls the body of a Block (body_block or copy_block) with its
// yielder and keeps the result.
template <class Yield, class Resume, class Return, class Block>
inline void run_body(control_block* b) {
    auto* self = static_cast<Block*>(b);
    yielder<Yield, Resume> y = yielder_access::make<Yield, Resume>(b);
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

// entry_for() is the first function of a coroutine whose block is Block.
template <class Yield, class Resume, class Return, class Block>
void entry_for(context::transfer t) noexcept {
    control_block* cb = entry_begin(t);
    bool unwound = false;
    try {
        run_body<Yield, Resume, Return, Block>(cb);
    } catch (const forced_unwind&) {
        unwound = true;
    } catch (...) {
        entry_caught(cb);
    }
    entry_end(cb, unwound);
}

// body_block is the control block of a coroutine with a stack of its own.
template <class Yield, class Resume, class Return, class F, class Alloc>
struct body_block final : result_block<Return> {
    F fn;
    Alloc alloc;

    template <class G>
    body_block(G&& g, Alloc&& a) : fn(std::forward<G>(g)), alloc(std::move(a)) {
        this->start = &entry_for<Yield, Resume, Return, body_block>;
        this->release = &release_block;
        this->plain = std::is_void_v<Yield> && std::is_void_v<Resume>;
    }

    static void release_block(control_block* b) noexcept {
        auto* self = static_cast<body_block*>(b);
        Alloc a(std::move(self->alloc));
        stack_view s = self->stack;
        self->~body_block();
        a.deallocate(s);
    }
};

// copy_block is the control block of a copy-stack coroutine, at the start
// of its heap block.
template <class Yield, class Resume, class Return, class F>
struct copy_block final : result_block<Return> {
    copy_state cs;
    F fn;

    template <class G>
    explicit copy_block(G&& g) : fn(std::forward<G>(g)) {
        this->start = &entry_for<Yield, Resume, Return, copy_block>;
        this->release = &release_block;
        this->plain = std::is_void_v<Yield> && std::is_void_v<Resume>;
    }

    static void release_block(control_block* b) noexcept {
        auto* self = static_cast<copy_block*>(b);
        copy_released(b);
        self->~copy_block();
        std::free(static_cast<void*>(self));
    }
};

// make_block() creates the coroutine's control block for its kind of stack.
template <class Yield, class Resume, class Return, class Alloc, class F>
control_block* make_block(Alloc&& alloc, F&& fn, const coroutine_options& opts) {
    using A = std::remove_cvref_t<Alloc>;
    if constexpr (std::same_as<A, shared_stack>)
        return create_copy<copy_block<Yield, Resume, Return, std::decay_t<F>>>(alloc, std::forward<F>(fn), opts);
    else
        return create<body_block<Yield, Resume, Return, std::decay_t<F>, A>>(std::move(alloc), std::forward<F>(fn), opts);
}

// copy_stats() reads cb's copy statistics (zeros outside copy-stack mode).
[[nodiscard]] inline copy_stack_stats copy_stats(const control_block* cb) noexcept {
    if (!cb->copy) return {};
    return {cb->copy->saved, cb->copy->max_saved, cb->copy->saves, cb->copy->restores};
}

// check_pointer_for() throws coroutine_error (shared_stack_pointer) when p
// lies in a shared stack and will not be part of a live frame once `target`
// runs (null: code outside any coroutine). `direction` is "passed to" or
// "yielded to", for the message.
WEFT_API void check_pointer_for(const void* p, const control_block* target, const char* direction);

// check_value() runs check_pointer_for() on a value handed through resume()
// or yield() when it is a raw pointer, in builds of the including code
// without NDEBUG, and only while shared stacks exist.
template <class T>
inline void check_value([[maybe_unused]] const T& v, [[maybe_unused]] const control_block* target,
                        [[maybe_unused]] const char* direction) {
#ifndef NDEBUG
    if constexpr (std::is_pointer_v<T> && std::is_object_v<std::remove_pointer_t<T>>) {
        if (shared_pools_exist()) check_pointer_for(const_cast<const void*>(static_cast<const volatile void*>(v)), target, direction);
    }
#endif
}

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
    // stack() is the whole stack the coroutine runs on (its shared stack in
    // copy-stack mode). Requires: *this.
    [[nodiscard]] stack_view stack() const noexcept { return cb_->stack; }
    // copy_stats() see coroutine::copy_stats(). Requires: *this.
    [[nodiscard]] copy_stack_stats copy_stats() const noexcept { return detail::copy_stats(cb_); }
    [[nodiscard]] explicit operator bool() const noexcept { return cb_ != nullptr; }
    friend bool operator==(coroutine_ref, coroutine_ref) noexcept = default;

private:
    detail::control_block* cb_ = nullptr;
};

// coroutine_stack is what a coroutine can run on: a stack_allocator (a
// stack of its own) or a shared_stack (copy-stack mode).
template <class A>
concept coroutine_stack = stack_allocator<A> || std::same_as<A, shared_stack>;

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
    using resume_result = std::conditional_t<std::is_void_v<Yield>, bool, std::optional<detail::arg_t<Yield>>>;

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
    // of that pool (weft/shared_stack.hpp): its control block, body, name,
    // private data and saved stack bytes share one heap block, and
    // options.stack_size and paint_stack are ignored (the pool fixes the
    // size). Throws: as above; std::bad_alloc in copy-stack mode.
    template <coroutine_stack Alloc, class F>
    coroutine(std::allocator_arg_t, Alloc alloc, F&& body, const coroutine_options& options = {})
        : cb_(detail::make_block<Yield, Resume, Return>(std::move(alloc), std::forward<F>(body), options)) {}

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
    resume_result resume()
        requires std::is_void_v<Resume>
    {
        check();
        return detail::resume(cb_, [this] { return yielded(); });
    }
    // resume(value) passes value to the body: as its second argument on the
    // first resume, as the result of yield() afterwards.
    resume_result resume(detail::arg_t<Resume> value)
        requires(!std::is_void_v<Resume>)
    {
        check();
        detail::check_value(value, cb_, "passed to");
        cb_->in = std::addressof(value);
        return detail::resume(cb_, [this] { return yielded(); });
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
            detail::check_value(*static_cast<Yield*>(cb_->out), *detail::current_slot(), "yielded to");
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
