// weft/fiber.hpp: layer L2's core, the type-erased fiber.
//
//   weft::fiber f([] {
//       std::puts("one");
//       weft::this_fiber::suspend();
//       std::puts("two");
//   }, {.name = "demo"});
//   f.resume();   // prints "one"
//   f.resume();   // prints "two"; f.done()
//
// A fiber is a stackful continuation without values: what a scheduler runs.
// coroutine<> and generator<> (weft/coroutine.hpp) are typed wrappers on it.
// Operations:
//   resume()               run it until it suspends, switches away or ends
//                          (asymmetric; never rethrows the body's exception:
//                          see exception());
//   this_fiber::suspend()  go back to whoever resumed it;
//   this_fiber::switch_to(next)
//                          hand over to another fiber directly (symmetric:
//                          next inherits the resumer, so suspending or ending
//                          next goes back there);
//   unwind()               cancel: throw forced_unwind at its suspension
//                          point so its destructors run; the fiber stays (done).
// suspend() and switch_to() take an after-switch hook, run once the fiber's
// context is saved and it is published as suspended: the place to hand the
// fiber to a waker or to release a lock guarding its wait queue.
//
// Each fiber keeps its own C++ exception state (what std::current_exception(),
// `throw;` and std::uncaught_exceptions() see), across switches and threads.
//
// Threads. A suspended fiber may be resumed on any thread, one resume at a
// time: like any object, a fiber used from two threads needs the caller's
// synchronisation (a queue, a lock, a channel) between one thread's resume
// and another's. A resume detects misuse on one thread (resume_running,
// resume_self, resume_done) with a plain load and store; two threads
// racing to resume one fiber are a data race, which builds of the calling
// code without NDEBUG report as resume_running for the loser (the claim is
// then a compare-and-swap) and TSan builds report as a race (FIBER-I2,
// docs/architecture.md "The claim"). A copy-stack fiber whose shared stack is in use (by any
// thread) is not resumed: resume() throws shared_stack_busy and try_resume()
// returns an empty fiber_ref, so a scheduler can try again later; no thread
// ever waits for a stack. Code inside a fiber that may migrate must not keep
// thread-local addresses across a switch (docs/platform-facts.md says what
// compilers do); weft itself reads its per-thread state afresh after every
// switch.
#pragma once

#include <cxxabi.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "weft/config.hpp"
#include "weft/pooled_stack.hpp"
#include "weft/shared_stack.hpp"
#include "weft/stack.hpp"

namespace weft {

// fiber_state is where a fiber (or a coroutine, its typed wrapper) is in its
// life:  created -> running <-> suspended -> ... -> done.
// running means some thread is executing it now, or is switching it out (a
// fiber is published as suspended only after its context is saved).
enum class fiber_state : std::uint8_t { created, running, suspended, done };
// coroutine_state is the same states, by the coroutine's name.
using coroutine_state = fiber_state;

// to_string() names a state ("created", "running", "suspended", "done").
[[nodiscard]] WEFT_API const char* to_string(fiber_state s) noexcept;

// coroutine_errc lists the misuses that weft reports instead of corrupting
// memory (for fibers and coroutines alike).
enum class coroutine_errc {
    empty_handle = 1,   // operation on a moved-from or default-constructed handle
    resume_done,        // resume() of a fiber whose body has finished
    resume_running,     // resume() of a fiber running on some thread
    resume_self,        // resume() from inside the fiber itself
    yield_outside,      // yield()/suspend()/switch_to() while not running inside that fiber
    yield_type,         // this_coroutine::yield() in a coroutine that yields values
    no_result,          // result() before the body returned a value
    stack_too_small,    // the stack cannot hold the record and a frame
    shared_stack_busy,  // resume() of a copy-stack fiber whose shared stack is in use
    shared_stack_pointer,  // a pointer into a shared stack that is not live for the fiber that would use it
    unwind_running,     // unwind() of a fiber that is running
};

// coroutine_error is thrown on misuse. what() names the fiber and its state,
// e.g. "weft: resume of coroutine 'worker' which is done".
class WEFT_API coroutine_error : public std::logic_error {
public:
    coroutine_error(coroutine_errc code, const std::string& message);
    // code() says which misuse it was.
    [[nodiscard]] coroutine_errc code() const noexcept { return code_; }

private:
    coroutine_errc code_;
};

// forced_unwind is what unwinds a fiber that is being destroyed or unwound
// (unwind(), destroying it) or a task that is canceled, from its suspension
// point up to its entry, so that destructors run. It is the C++ runtime's
// forced-unwind type (abi::__forced_unwind, <cxxabi.h>), the one glibc's
// thread cancellation uses, and it is raised the same way: with
// _Unwind_ForcedUnwind, which walks the frames once (a C++ throw walks them
// twice: a search, then the cleanup; docs/safety.md, Cancellation). The
// rules are glibc's:
//   - catch (const std::exception&) and handlers of other types never see it;
//   - catch (...) and catch (const weft::forced_unwind&) (the same as
//     catch (abi::__forced_unwind&)) do, and must rethrow it (`throw;`);
//   - a handler that ends without rethrowing (swallows it) aborts the
//     process with a message naming the fiber, where the handler ends;
//   - a catch (...) reached while another exception is being handled (a
//     handler nested inside another catch block) ends the process
//     (std::terminate), as in glibc;
//   - std::uncaught_exceptions() does not count it.
// It cannot be constructed or thrown: cancellation is the library's to raise.
using forced_unwind = abi::__forced_unwind;

// after_switch_fn is a hook for this_fiber::suspend() and switch_to(): it
// runs once, on the thread the fiber switched out of, after the fiber's
// context is saved and "suspended" is published (so it may hand the fiber to
// a waker that resumes it on another thread at once). It must not throw,
// switch or touch the departed fiber's stack.
using after_switch_fn = void (*)(void* arg) noexcept;

// fp_env_mode is how a fiber treats the floating-point control state.
//   shared  the fiber runs with whatever its thread has (a thread that set
//           flush-to-zero or a rounding mode has it in its fibers too), and
//           a change the fiber makes stays with the thread: as C++20
//           coroutines, Go, marl and libco behave. No cost on a switch.
//   own     the fiber keeps a state of its own, starting as its creator's
//           at creation (as a new thread inherits its creator's), and its
//           resumer gets its own back when the fiber suspends or ends: the
//           guarantee of the ABIs (the state is callee-saved), which
//           Boost.Context and libaco keep. Costs a read and a write of the
//           state at each switch into or out of the fiber (docs/context-abi.md).
// A switch_to() between a shared and an own fiber gives each the state its
// mode says: the shared one the resumer's (what the thread had when the
// chain was resumed, or what shared fibers of it set since).
enum class fp_env_mode : std::uint8_t { shared, own };

// fiber_options configure a fiber or coroutine at creation.
struct fiber_options {
    // stack_size is the least stack the fiber gets, in bytes; 0 (the
    // default) means default_stack_size on a stack of its own and the pool's
    // size in copy-stack mode. On a stack of its own it is what the allocator
    // is asked for (mmap_stack rounds it up to whole pages, a pooled_stack
    // gives a whole stack of its pool, or a stack of its own when stack_size
    // is larger), and the record, the body, the name, the private data and
    // the extension come out of its top. In copy-stack mode the
    // shared_stack_pool sets the size of every stack and the record lives on
    // the heap: a stack_size larger than the pool's stacks throws
    // coroutine_error (stack_too_small) instead of silently giving less.
    std::size_t stack_size = 0;
    // name appears in error messages and diagnostics; it is copied.
    std::string_view name = {};
    // private_data_size bytes, 16-byte aligned and zero-filled, are reserved
    // for the user (see private_data()).
    std::size_t private_data_size = 0;
    // extension_size bytes aligned to extension_align (at most 64) are
    // reserved beside the record for the layer above (a scheduler's task
    // record): not zero-filled, never touched by weft. Whoever constructs an
    // object there destroys it before the fiber is released.
    std::size_t extension_size = 0;
    std::size_t extension_align = alignof(std::max_align_t);
    // paint_stack fills the free stack with a pattern at creation, so that
    // stack_high_water() can report the deepest use. It commits the whole
    // stack. Ignored in copy-stack mode.
    bool paint_stack = false;
    // cache_colouring places the record a varying multiple of 64 bytes
    // (0 to cache_colours - 1 cache lines) below the top of the stack, so that
    // the records of many fibers on equally aligned stacks do not all map to
    // the same cache sets. It costs up to 960 bytes of the stack, and never
    // more than a sixteenth of it. Without effect in copy-stack mode.
    bool cache_colouring = true;
    // fp_env says whose floating-point control state (rounding mode,
    // flush-to-zero, exception masks: MXCSR and the x87 control word on
    // x86-64, FPCR on AArch64) the fiber's code runs with; see fp_env_mode.
    fp_env_mode fp_env = fp_env_mode::shared;
};

// cache_colours is how many cache-line offsets cache colouring uses: 16, so
// at most 15 lines (960 bytes), all within the stack's top page
// (bench/README.md, "Cache colouring", has the measurements).
inline constexpr unsigned cache_colours = 16;

}  // namespace weft

#include "weft/detail/fiber_record.hpp"
#include "weft/detail/fiber_create.hpp"

namespace weft {

// fiber_ref is a non-owning view of a fiber (or of a coroutine's fiber). It
// is valid while the fiber exists. Copies are cheap; a scheduler keeps them.
class fiber_ref {
public:
    fiber_ref() noexcept = default;
    explicit fiber_ref(detail::fiber_record* f) noexcept : f_(f) {}

    // resume() runs the fiber on this thread until it suspends, switches
    // away or ends. Returns the fiber that came back to the caller: this
    // one, or the last of a chain of switch_to()s that began here. Requires:
    // created or suspended, not called from inside this fiber. Throws:
    // coroutine_error (empty_handle, resume_done, resume_running,
    // resume_self, shared_stack_busy); std::bad_alloc (copy-stack save;
    // nothing changed then). Never rethrows the body's exception.
    WEFT_HOT_INLINE fiber_ref resume() {
        check();
        return fiber_ref(detail::resume(f_));
    }
    // try_resume() is resume() that returns an empty fiber_ref, changing
    // nothing, when the fiber's shared stack is busy.
    [[nodiscard]] WEFT_HOT_INLINE fiber_ref try_resume() {
        check();
        return fiber_ref(detail::resume<false>(f_));
    }
    // unwind() cancels the fiber: a suspended fiber is resumed to throw
    // forced_unwind at its suspension point, so its destructors run; a
    // created one never runs. Afterwards done() is true and the fiber is
    // still there (name, extension, private data). A done fiber is left as
    // it is. Requires: not running. Throws: coroutine_error (empty_handle,
    // unwind_running, shared_stack_busy).
    void unwind() {
        check();
        if (!detail::unwind(f_)) detail::shared_busy(f_);
    }

    // state() is the fiber's state (acquire: "done" means its stack is free).
    [[nodiscard]] fiber_state state() const {
        check();
        return f_->state.load(std::memory_order_acquire);
    }
    [[nodiscard]] bool done() const { return state() == fiber_state::done; }
    // name() is the name given in the options (may be empty).
    [[nodiscard]] std::string_view name() const {
        check();
        return f_->name;
    }
    // private_data() is the zero-filled private data area.
    [[nodiscard]] std::span<std::byte> private_data() const {
        check();
        return {f_->private_data, f_->private_size};
    }
    // extension() is the area reserved for the layer above.
    [[nodiscard]] std::span<std::byte> extension() const {
        check();
        return {f_->extension, f_->extension_size};
    }
    // stack() is the stack the fiber runs on (its shared stack in copy-stack
    // mode).
    [[nodiscard]] stack_view stack() const {
        check();
        return f_->stack;
    }
    // exception() is what the body let escape (null if nothing did).
    // Requires: done() (otherwise racy).
    [[nodiscard]] std::exception_ptr exception() const {
        check();
        return f_->exception;
    }
    // copy_stack() says whether the fiber runs on a shared stack (such a
    // fiber is pinned to no thread, but its stack can be busy; see above).
    [[nodiscard]] bool copy_stack() const {
        check();
        return f_->copy != nullptr;
    }

    [[nodiscard]] explicit operator bool() const noexcept { return f_ != nullptr; }
    friend bool operator==(fiber_ref, fiber_ref) noexcept = default;
    // record() is the record itself, for the layers above.
    [[nodiscard]] detail::fiber_record* record() const noexcept { return f_; }

private:
    void check() const {
        if (!f_) [[unlikely]]
            detail::misuse(nullptr, coroutine_errc::empty_handle);
    }
    detail::fiber_record* f_ = nullptr;
};

// fiber_stack is what a fiber can run on: a stack_allocator (a stack of its
// own) or a shared_stack (copy-stack mode).
template <class A>
concept fiber_stack = stack_allocator<A> || std::same_as<A, shared_stack>;

// fiber is a move-only handle owning a fiber; see the top of this file.
class fiber {
public:
    // fiber() is an empty handle.
    fiber() noexcept = default;

    // fiber(body, options) creates a fiber that runs body() on a stack from
    // the process-wide stack_pool. The body does not run until the first
    // resume(). Throws: stack_error; coroutine_error (stack_too_small); what
    // moving the body throws. Nothing is allocated on the heap.
    template <class F>
        requires(std::invocable<std::decay_t<F>&> && !std::same_as<std::remove_cvref_t<F>, fiber>)
    explicit fiber(F&& body, const fiber_options& options = {})
        : fiber(std::allocator_arg, pooled_stack{}, std::forward<F>(body), options) {}

    // fiber(allocator_arg, alloc, body, options) uses the given stack
    // allocator, or a shared_stack (copy-stack mode: the record lives in a
    // small heap block; throws std::bad_alloc besides).
    template <fiber_stack Alloc, class F>
        requires std::invocable<std::decay_t<F>&>
    fiber(std::allocator_arg_t, Alloc alloc, F&& body, const fiber_options& options = {})
        : f_(detail::make_block<detail::plain_fiber>(std::move(alloc), std::forward<F>(body), options)) {}

    fiber(fiber&& other) noexcept : f_(std::exchange(other.f_, nullptr)) {}
    fiber& operator=(fiber&& other) noexcept {
        if (this != &other) {
            reset();
            f_ = std::exchange(other.f_, nullptr);
        }
        return *this;
    }
    fiber(const fiber&) = delete;
    fiber& operator=(const fiber&) = delete;

    // ~fiber() destroys the fiber: a suspended one is unwound first, then
    // its stack is freed. Requires: not running (aborts, naming it).
    ~fiber() { reset(); }

    // resume(), try_resume(), unwind(), state() ... : see fiber_ref.
    WEFT_HOT_INLINE fiber_ref resume() { return ref().resume(); }
    [[nodiscard]] WEFT_HOT_INLINE fiber_ref try_resume() { return ref().try_resume(); }
    void unwind() { ref().unwind(); }
    [[nodiscard]] fiber_state state() const { return ref().state(); }
    [[nodiscard]] bool done() const { return ref().done(); }
    [[nodiscard]] std::string_view name() const { return ref().name(); }
    [[nodiscard]] std::span<std::byte> private_data() const { return ref().private_data(); }
    [[nodiscard]] std::span<std::byte> extension() const { return ref().extension(); }
    [[nodiscard]] std::exception_ptr exception() const { return ref().exception(); }

    // ref() is a non-owning view of this fiber (empty if the handle is).
    [[nodiscard]] fiber_ref ref() const noexcept { return fiber_ref(f_); }
    [[nodiscard]] explicit operator bool() const noexcept { return f_ != nullptr; }

    // reset() destroys the fiber now (see the destructor).
    void reset() noexcept {
        if (f_) detail::destroy(std::exchange(f_, nullptr));
    }

private:
    detail::fiber_record* f_ = nullptr;
};

namespace this_fiber {

// current() is the fiber running on this thread (a coroutine's fiber too),
// or an empty fiber_ref outside any fiber. Safe across migration.
[[nodiscard]] WEFT_API fiber_ref current() noexcept;

// suspend() switches the running fiber back to whoever resumed it; `hook`
// runs there once this fiber is saved. Returns when the fiber is resumed.
// Throws: coroutine_error (yield_outside); forced_unwind when the fiber is
// being unwound (let it pass).
WEFT_HOT_INLINE inline void suspend(after_switch_fn hook = nullptr, void* arg = nullptr) {
    detail::fiber_record* f = detail::this_thread_state()->current;
    if (!f) [[unlikely]]
        detail::suspend_misuse(f);
    // Always inline, like a coroutine's yield (WEFT_HOT_INLINE, weft/config.hpp).
    detail::suspend(f, hook, arg);
}

// suspend_outer() suspends fiber f, which runs on this thread, from code in
// a fiber that f resumed (directly or further down a chain of resumes): a
// task that drives a generator whose body has to wait parks the task, and
// the generator stays inside it. When f is resumed (on any thread), the
// call returns in the fiber that made it, which is current again. With f
// the current fiber it is suspend(). Throws: coroutine_error (yield_outside:
// f is not running on this thread, or not above the caller; or a fiber of
// the chain runs on a shared stack); forced_unwind when f is being unwound.
WEFT_API void suspend_outer(fiber_ref f, after_switch_fn hook = nullptr, void* arg = nullptr);

// switch_to() hands the running fiber over to `next`, which inherits its
// resumer; this fiber stays suspended until somebody resumes it (or switches
// to it). `hook` runs on next's side once this fiber is saved. Throws:
// coroutine_error (yield_outside: not inside a fiber; resume_self: next is
// this fiber; resume_running, resume_done, empty_handle: next cannot run;
// shared_stack_busy); forced_unwind, as suspend().
WEFT_API void switch_to(fiber_ref next, after_switch_fn hook = nullptr, void* arg = nullptr);

}  // namespace this_fiber

namespace stats {
// live_coroutines() is the number of fibers and coroutines created and not
// yet destroyed, over all threads.
[[nodiscard]] WEFT_API std::int64_t live_coroutines() noexcept;
}  // namespace stats

}  // namespace weft

