// weft/compact_coroutine.hpp: layer L2, the compact copy-stack coroutine.
//
//   weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 4});
//   weft::compact_coroutine<int> co(weft::shared_stack(pool), [](auto& y) {
//       for (int i = 0; i < 3; ++i) y.yield(i);
//   });
//   while (auto v = co.resume()) std::printf("%d\n", *v);
//
// compact_coroutine<Yield> is a copy-stack coroutine (weft/shared_stack.hpp)
// built for the smallest footprint while suspended: when many coroutines wait
// at once (millions of idle connections, game entities), each costs one heap
// block holding an 80-byte control block, the body and its saved stack bytes,
// and nothing else. weft::coroutine with a shared_stack keeps a full fiber
// record instead (names, private data, the registry, switch_to, per-coroutine
// FP state), about 450 bytes more per coroutine.
//
// What it keeps of weft::coroutine: asymmetric resume / yield with a value,
// the body's exception rethrown by the resume() that ran it, its own C++
// exception state across switches, destruction of a suspended coroutine by a
// forced unwind (forced_unwind's rules: a catch (...) must rethrow; one that
// swallows it aborts naming the coroutine), migration (a suspended coroutine
// may be resumed on any thread), the misuse errors, and the sanitizer and
// valgrind support. What it leaves out, to stay compact:
//   - names, private data, after-switch hooks, switch_to, values passed into
//     resume(), a return value;
//   - the registry: it is not listed by the gdb commands (docs/debugging.md)
//     nor counted by weft::live_coroutines();
//   - fp_env_mode::own: it always shares its thread's FP control state
//     (docs/context-abi.md, the FP environment);
//   - weft's task and sync primitives: while its body runs, no weft fiber is
//     current on the thread (this_fiber::current() is empty), so they treat
//     it as code outside any task: a wait there blocks the whole thread, as
//     on a plain thread, instead of switching a task away from a shared
//     stack, and this_fiber / this_task calls report that they run outside
//     one.
//
// Threads. Of two threads resuming one compact coroutine, one wins; the other
// gets coroutine_error (resume_running). A resume whose shared stack another
// coroutine uses gets shared_stack_busy, on any thread, without waiting.
// Taking the stack is the claim (invariant COMPACT-C1 below).
#pragma once

#include <atomic>
#include <cstdlib>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "weft/config.hpp"
#include "weft/context.hpp"
#include "weft/detail/sanitizer.hpp"
#include "weft/fiber.hpp"
#include "weft/shared_stack.hpp"

namespace weft {

template <class Yield = void>
class compact_coroutine;

namespace detail {

struct compact_record;

// compact_frame is what a compact coroutine needs only while it runs. It
// lives on the stack of the resume() (or destruction) that runs it, which
// waits on the same thread until the coroutine comes back (a resumer never
// moves while it waits), so the record does not carry it.
struct compact_frame {
    // Only the flags are set at construction (one store on a resume); every
    // other field is written before it is read.
    bool unwind = false;            // resumed to be destroyed: its yield() raises the forced unwind
    bool failed = false;            // the body let an exception escape: it is in `error`
    bool unwind_caught;             // the entry caught that forced unwind (FIBER-U2 of fiber.cpp); set with unwind
    bool movable;                   // value may be moved from (it was yielded as an rvalue)
    eh_state resumer_eh;            // the resumer's exception state
    fiber_record* parent;           // the resumer's current fiber (made current again after)
    void* value;                    // the value being yielded (on the shared stack)
    compact_record* record;         // set when the forced unwind is raised (its messages name it)
    // What the body let escape (a std::exception_ptr, constructed only then).
    alignas(std::exception_ptr) unsigned char error[sizeof(std::exception_ptr)];
    // The forced unwind's exception object (an _Unwind_Exception): on the
    // destroyer's stack, which the unwind does not touch, so destruction
    // needs no memory.
    alignas(16) unsigned char unwind_object[32];

    compact_frame() noexcept {}
    compact_frame(const compact_frame&) = delete;
    compact_frame& operator=(const compact_frame&) = delete;
};

// compact_ops is the typed half of a compact coroutine, one per body type.
struct compact_ops {
    context::entry_fn entry;                            // the first function on the shared stack
    void (*destroy_body)(compact_record*) noexcept;     // destroys the body (not the record)
};

// compact_record is the control block at the start of a compact coroutine's
// heap block; the body follows it, then the first save buffer.
// Invariants:
//   COMPACT-C1  the record is running only while its shared stack is held (holder)
//               by the thread that runs it; so taking the stack (a compare-and-swap
//               from null, acquire) is the claim: whoever holds the stack may read
//               and write state, ctx and the saved bytes, and giving it back (a
//               release store) publishes them. `state` is atomic only for done(),
//               which any thread may read.
//   COMPACT-C2  ctx is valid while suspended (null while created: the first resume
//               lays out the first frame on the stack); resumer and frame only
//               while running.
//   COMPACT-C3  the resume() that ran the coroutine does every per-thread step
//               (exception state, current fiber) before and after its one switch,
//               on its own thread; the coroutine's side only switches.
//   COMPACT-C4  a yielded value lies on the shared stack: the resumer moves it out
//               before it gives the stack back.
struct alignas(16) compact_record {
    void* ctx = nullptr;             // COMPACT-C2
    void* resumer = nullptr;         // where yield() and the end go (COMPACT-C2)
    compact_frame* frame = nullptr;  // the running resume()'s frame (COMPACT-C2)
    shared_stack_slot* slot = nullptr;
    const compact_ops* ops = nullptr;
    std::byte* buffer = nullptr;     // the saved bytes: the block's tail, or a block of its own (external)
    std::uint32_t saved = 0;         // bytes in buffer (the last save)
    std::uint32_t capacity = 0;      // bytes buffer can hold
    std::uint32_t max_saved = 0;
    std::atomic<fiber_state> state{fiber_state::created};
    bool external = false;
    eh_state eh;                     // its exception state while it is not running
#if WEFT_TSAN && !WEFT_SHARE_FP_ENV
    context::fp_control handover_fp;  // FIBER-F3 of fiber_record.hpp
#endif
    [[no_unique_address]] std::conditional_t<with_tools, sanitizer::tool_state, no_tools> tools_;
    sanitizer::tool_state& tools() noexcept { return fiber_record::pick_tools(tools_); }
};

// The tag of a compact record in a shared stack's `owner` (bit 0; records
// are 16-byte aligned), so that one pool serves both kinds of copy-stack
// coroutine.
inline void* compact_owner(compact_record* r) noexcept {
    return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(r) | 1);
}

// ---- out of line (src/fiber/compact.cpp)

// compact_created() assigns r a stack of `pool` and finishes its creation;
// `buffer` / `capacity`: the tail of its block for saved bytes.
WEFT_API void compact_created(compact_record* r, shared_stack_pool& pool, std::byte* buffer,
                              std::size_t capacity) noexcept;
// compact_destroy() unwinds r if it is suspended, destroys its body and
// frees it. Aborts, naming r, when r is running or cannot be unwound.
WEFT_API void compact_destroy(compact_record* r) noexcept;
// compact_refused() is the slow half of a resume() that could not take r's
// stack (`holder` holds it) or found r not suspended: gives back what it
// took and throws coroutine_error (shared_stack_busy, resume_self,
// resume_running, resume_done, empty_handle).
[[noreturn]] WEFT_API void compact_refused(compact_record* r, const void* holder, bool took);
// compact_place() puts r's bytes on its stack (saving those of the
// coroutine whose frames are there), or lays out its first frame. Requires:
// the caller holds the stack. Throws: bad_alloc, having given the stack back.
WEFT_API void compact_place(compact_record* r);
// compact_yield_misuse() throws yield_outside, or aborts when r yields while
// being destroyed.
[[noreturn]] WEFT_API void compact_yield_misuse(compact_record* r);
// compact_caught() keeps what escaped the body (called in a catch (...)).
WEFT_API void compact_caught(compact_record* r) noexcept;
// compact_finish() ends r: switches to its resumer for the last time.
[[noreturn]] WEFT_API void compact_finish(compact_record* r) noexcept;
// compact_raise_unwind() raises the forced unwind on r's stack.
[[noreturn]] WEFT_API void compact_raise_unwind(compact_record* r);
// compact_rethrow() rethrows the body's exception held in fr.
[[noreturn]] WEFT_API void compact_rethrow(compact_frame& fr);
// compact_stats() is r's copy statistics (saves and restores are not counted).
[[nodiscard]] WEFT_API copy_stack_stats compact_stats(const compact_record* r) noexcept;

// ---- the switch
//
// A compact coroutine switches with the pieces of the fiber funnel
// (weft/detail/fiber_record.hpp): the switch word is tag(r, switch_kind)
// (resume into the coroutine; suspend for a yield; finish at its end), read
// back with record_of<compact_record>() and kind_of(); it travels through
// jump<compact_record>(), whose TSan builds carry the FP state in the record
// the word names (FIBER-F3, handover_fp); the exception state moves with
// save_eh() and install(); the tools are told with sanitizer::enter(),
// returned(), leave() and arrived() (the pool registers its stacks with
// LeakSanitizer and valgrind, on_create_copy() gives each coroutine its
// TSan fiber); copy_stack.cpp saves and restores the bytes of both kinds;
// the forced unwind starts with forced_unwind_from() and keeps FIBER-U1 - FIBER-U3 of
// src/fiber/fiber.cpp. It differs from a fiber's switch where a fiber
// keeps something in its record that the 80-byte record has no room for,
// or where the record has no fiber_record to offer:
//   COMPACT-D1  The claim is taking the shared stack (COMPACT-C1), not a compare-and-swap
//               of `state` (FIBER-I2): a resume takes the stack anyway, and that one
//               compare-and-swap also stops a second resumer (resume_running, or
//               shared_stack_busy when the stack runs another coroutine), where a
//               copy-stack fiber's resume makes two (claim(), then the stack);
//               `state` is only stored. So the publication is the stack's release
//               (COMPACT-C1), where a fiber's is its state's (FIBER-I1); only `done` is also
//               published with its state, for done() and destruction without the
//               stack.
//   COMPACT-D2  Every per-thread step is the resumer's, before and after its one
//               switch (COMPACT-C3), where a fiber takes them on its own side (settle_fiber(),
//               leave_to_resumer()): the resumer holds its thread_state already and
//               waits on that thread until the coroutine comes back (FIBER-I5 holds here
//               too), so the coroutine's side makes no this_thread_state() call,
//               and what a fiber keeps in its record while it runs is in the
//               resumer's compact_frame (resumer_eh, parent) or its variables (ts),
//               which keeps the record at 80 bytes (compact.cpp asserts it).
//   COMPACT-D3  No fiber is current while the body runs (install() of null): the
//               record is no fiber_record, so this_fiber, tasks and the sync
//               primitives see code outside any fiber (the top of this file). For
//               the same reason it has no registry entry, name, after-switch hook
//               (its word never carries `hooked`), switch_to, or guard word (its
//               stacks have the pool's guard pages), and it is never suspended from
//               inside another coroutine (suspend_outer), so both sides of its
//               switch tell the tools r's own tool_state (no running_in()).
//   COMPACT-D4  No fp_env_mode::own: the record has no room for the two FP states
//               of FIBER-F1, and the switch leaves the thread's FP state alone (FIBER-F2), so
//               the body runs with its thread's and a switch tests no flag.
//   COMPACT-D5  The forced unwind's exception object and what the body lets escape
//               are in the destroyer's or resumer's compact_frame, not in the
//               record, so its unwind has an exception class, cleanup and stop of
//               its own (compact.cpp), which find the coroutine through the frame.
//               The frame outlives the unwind: the body cannot switch out while it
//               unwinds (a yield there aborts), so the destroyer waits in
//               compact_enter() on its thread until the unwind ends; a fiber's
//               unwind may suspend and go on on another thread, so its object must
//               be in its record.

// compact_enter() runs r, which the caller has claimed (it holds r's
// stack, COMPACT-C1) and whose bytes are on the stack, until it yields or ends. ts
// is the calling thread's state.
// Returns true when it yielded: the caller then moves the value out and
// calls compact_release(); false when it ended (the stack is given back).
// Throws what the body let escape.
[[gnu::always_inline]] inline bool compact_enter(compact_record* r, compact_frame& fr, thread_state* ts) {
    shared_stack_slot& s = *r->slot;
    r->state.store(fiber_state::running, std::memory_order_relaxed);
    // COMPACT-C3: the resumer's exception state and current fiber wait in fr; the
    // coroutine runs with its own exception state and no current fiber.
    fr.parent = ts->current;
    save_eh(fr.resumer_eh, ts);
    install(ts, nullptr, r->eh);
    r->frame = &fr;
    void* resumer_fake = nullptr;
    sanitizer::enter(r->tools(), r->tools(), &resumer_fake, s.stack.base, s.stack.size);
    const context::transfer t = jump<compact_record>(r->ctx, tag(r, switch_kind::resume));
    sanitizer::returned(resumer_fake);
    save_eh(r->eh, ts);
    install(ts, fr.parent, fr.resumer_eh);
    if (kind_of(t.data) == switch_kind::suspend) [[likely]] {
        r->ctx = t.from;
        return true;
    }
    // It ended: nothing of it on the stack is worth saving.
    s.owner = nullptr;
    r->ctx = nullptr;
    // Release: a thread that sees it done (state(), acquire) may destroy it
    // without taking the stack, and must see everything it did.
    r->state.store(fiber_state::done, std::memory_order_release);
    s.holder.store(nullptr, std::memory_order_release);  // COMPACT-C1
    if (fr.failed) [[unlikely]]
        compact_rethrow(fr);
    return false;
}

// compact_release() ends a resume() whose coroutine yielded: publishes it
// suspended and gives the stack back (COMPACT-C1, COMPACT-C4).
[[gnu::always_inline]] inline void compact_release(compact_record* r) noexcept {
    r->state.store(fiber_state::suspended, std::memory_order_relaxed);
    r->slot->holder.store(nullptr, std::memory_order_release);
}

// compact_claim() takes r's stack for the thread whose state is ts and puts
// r's bytes there (COMPACT-C1). Throws: coroutine_error when the stack is busy or r
// is not resumable; bad_alloc.
[[gnu::always_inline]] inline void compact_claim(compact_record* r, thread_state* ts) {
    if (!r) [[unlikely]]
        compact_refused(r, nullptr, false);
    shared_stack_slot& s = *r->slot;
    const void* me = ts->token;
    const void* holder = nullptr;
    if (!s.holder.compare_exchange_strong(holder, me, std::memory_order_acquire, std::memory_order_relaxed))
        [[unlikely]]
        compact_refused(r, holder, false);
    const fiber_state st = r->state.load(std::memory_order_relaxed);
    if (st != fiber_state::suspended && st != fiber_state::created) [[unlikely]]
        compact_refused(r, me, true);
    if (s.owner != compact_owner(r)) [[unlikely]]
        compact_place(r);
}

// compact_yield() switches the running r back to its resumer, leaving
// `value` (null for none; `movable`: may be moved from) for it. Throws: coroutine_error (yield_outside)
// unless called from r's own code; the forced unwind when r is resumed to be
// destroyed.
[[gnu::always_inline]] inline void compact_yield(compact_record* r, void* value, bool movable) {
    if (r->state.load(std::memory_order_relaxed) != fiber_state::running || !r->slot->stack.contains(stack_pointer()) ||
        r->frame->unwind) [[unlikely]]
        compact_yield_misuse(r);
    r->frame->value = value;
    r->frame->movable = movable;
    sanitizer::leave(r->tools(), r->tools(), false);
    const context::transfer t = jump<compact_record>(r->resumer, tag(r, switch_kind::suspend));
    sanitizer::arrived(r->tools(), r->tools(), false, true);
    r->resumer = t.from;
    if (r->frame->unwind) [[unlikely]]
        compact_raise_unwind(r);
}

// compact_first() is the start of a compact coroutine's entry function.
[[gnu::always_inline]] inline compact_record* compact_first(context::transfer t) noexcept {
    compact_record* r = record_of<compact_record>(t.data);
#if WEFT_TSAN && !WEFT_SHARE_FP_ENV
    context::fp_control_load(r->handover_fp);  // FIBER-F3: the trampoline came through context::jump()
#endif
    sanitizer::arrived(r->tools(), r->tools(), true, true);
    r->resumer = t.from;
    return r;
}

// compact_arg_t is T, or a placeholder for void (yield()'s parameter).
struct compact_nothing {};
template <class T>
using compact_arg_t = std::conditional_t<std::is_void_v<T>, compact_nothing, T>;

// compact_block is a compact coroutine's heap block: record, then body.
template <class F>
struct compact_block final : compact_record {
    [[no_unique_address]] F fn;  // a body without captures takes no space
    template <class G>
    explicit compact_block(G&& g) : fn(std::forward<G>(g)) {}
};

}  // namespace detail

// compact_coroutine<Yield> is a move-only handle on a compact copy-stack
// coroutine; see the top of this file. Yield is void or an object type.
template <class Yield>
class compact_coroutine {
    static_assert(std::is_void_v<Yield> || (std::is_object_v<Yield> && !std::is_array_v<Yield>),
                  "compact_coroutine<Yield>: Yield must be void or an object type");

public:
    using yield_type = Yield;
    // What resume() returns: whether it yielded (Yield = void), or the value.
    using result_type = std::conditional_t<std::is_void_v<Yield>, bool, std::optional<Yield>>;

    // yielder is the body's handle on its own coroutine.
    class yielder {
    public:
        // yield() suspends the coroutine, handing `value` to the resume()
        // that ran it. Requires: called from inside this coroutine. Throws:
        // coroutine_error (yield_outside); forced_unwind when the coroutine
        // is being destroyed (let it pass).
        // The resumer copies a value passed as an lvalue and moves one
        // passed as an rvalue.
        WEFT_HOT_INLINE void yield(const detail::compact_arg_t<Yield>& value)
            requires(!std::is_void_v<Yield> && std::is_copy_constructible_v<detail::compact_arg_t<Yield>>)
        {
            detail::compact_yield(r_, const_cast<detail::compact_arg_t<Yield>*>(std::addressof(value)), false);
        }
        WEFT_HOT_INLINE void yield(detail::compact_arg_t<Yield>&& value)
            requires(!std::is_void_v<Yield>)
        {
            detail::compact_yield(r_, std::addressof(value), true);
        }
        WEFT_HOT_INLINE void yield()
            requires std::is_void_v<Yield>
        {
            detail::compact_yield(r_, nullptr, false);
        }
        yielder(const yielder&) = delete;
        yielder& operator=(const yielder&) = delete;

    private:
        friend class compact_coroutine;
        explicit yielder(detail::compact_record* r) noexcept : r_(r) {}
        detail::compact_record* r_;
    };

    // compact_coroutine() is an empty handle.
    compact_coroutine() noexcept = default;
    // compact_coroutine(where, body) creates a coroutine that will run
    // body(yielder&) on a stack of where's pool; nothing runs until the
    // first resume(). Allocates one heap block: the record, the body and a
    // save buffer as large as the pool's last first save (save_hint()).
    // Throws: bad_alloc; what copying or moving the body throws.
    template <class F>
        requires std::invocable<std::decay_t<F>&, yielder&>
    compact_coroutine(shared_stack where, F&& body) {
        using Block = detail::compact_block<std::decay_t<F>>;
        static_assert(alignof(Block) <= 16, "compact_coroutine: the body must not need more than 16-byte alignment");
        constexpr std::size_t head = (sizeof(Block) + 15) & ~std::size_t{15};
        std::size_t usable = 0;
        auto* mem = static_cast<std::byte*>(detail::copy_allocate(head + where.pool().save_hint(), alignof(Block), &usable));
        Block* b;
        try {
            b = ::new (static_cast<void*>(mem)) Block(std::forward<F>(body));
        } catch (...) {
            std::free(mem);
            throw;
        }
        b->ops = &ops_for<Block>;
        detail::compact_created(b, where.pool(), mem + head, usable - head);
        r_ = b;
    }
    compact_coroutine(compact_coroutine&& o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
    compact_coroutine& operator=(compact_coroutine&& o) noexcept {
        if (this != &o) {
            reset();
            r_ = std::exchange(o.r_, nullptr);
        }
        return *this;
    }
    // ~compact_coroutine() destroys the coroutine: a suspended one is
    // unwound first (its destructors run; see forced_unwind). Destroying a
    // running one aborts naming it.
    ~compact_coroutine() { reset(); }

    // resume() runs the coroutine until it yields (returns the value, or
    // true) or its body ends (returns nullopt, or false). Throws:
    // coroutine_error (empty_handle, resume_done, resume_running,
    // resume_self, shared_stack_busy); what the body let escape (the
    // coroutine is done then); bad_alloc (saving another coroutine's bytes;
    // nothing changed).
    WEFT_HOT_INLINE result_type resume() {
        // The resumer stays on this thread until the coroutine comes back.
        detail::thread_state* ts = detail::this_thread_state();
        detail::compact_claim(r_, ts);
        detail::compact_frame fr;
        if (!detail::compact_enter(r_, fr, ts)) return result_type{};
        if constexpr (std::is_void_v<Yield>) {
            detail::compact_release(r_);
            return true;
        } else {
            // COMPACT-C4: the value is moved out before the stack is given back.
            struct release_guard {
                detail::compact_record* r;
                ~release_guard() { detail::compact_release(r); }
            } g{r_};
            auto* v = static_cast<Yield*>(fr.value);
            if constexpr (std::is_copy_constructible_v<Yield>)
                if (!fr.movable) return result_type(std::in_place, std::as_const(*v));
            return result_type(std::in_place, std::move(*v));
        }
    }

    // done() says whether the body has ended. Requires: a coroutine.
    [[nodiscard]] bool done() const noexcept { return state() == fiber_state::done; }
    // state() is where the coroutine is in its life (done for an empty handle).
    [[nodiscard]] fiber_state state() const noexcept {
        return r_ ? r_->state.load(std::memory_order_acquire) : fiber_state::done;
    }
    // has_value() / operator bool say whether the handle holds a coroutine.
    explicit operator bool() const noexcept { return r_ != nullptr; }
    // reset() destroys the coroutine (as the destructor) and empties the handle.
    void reset() noexcept {
        if (r_) detail::compact_destroy(std::exchange(r_, nullptr));
    }
    // copy_stats() describes its copying (saves and restores are not
    // counted: the compact record keeps no counters).
    [[nodiscard]] copy_stack_stats copy_stats() const noexcept {
        return r_ ? detail::compact_stats(r_) : copy_stack_stats{};
    }
    // control_size is the bytes of the record (the heap block also holds
    // the body and the saved stack bytes).
    static constexpr std::size_t control_size = sizeof(detail::compact_record);

private:
    template <class Block>
    static void entry(context::transfer t) noexcept {
        detail::compact_record* r = detail::compact_first(t);
        try {
            yielder y(r);
            std::invoke(static_cast<Block*>(r)->fn, y);
        } catch (...) {
            detail::compact_caught(r);
        }
        detail::compact_finish(r);
    }
    template <class Block>
    static void destroy_body(detail::compact_record* r) noexcept {
        static_cast<Block*>(r)->~Block();
    }
    template <class Block>
    static constexpr detail::compact_ops ops_for{&entry<Block>, &destroy_body<Block>};

    detail::compact_record* r_ = nullptr;
};

}  // namespace weft
