// weft/detail/fiber_record.hpp: the inside of weft::fiber (weft/fiber.hpp),
// which inline code needs: the record every fiber keeps, and the one switch
// funnel that resume, suspend, switch_to, unwind and a fiber's end all go
// through. Nothing here is API.
//
// The funnel. Every transfer of control between fibers (or between a fiber
// and the code that resumed it) is one context::fast_jump() carrying one
// word: the record of the fiber concerned, tagged with the kind of switch.
// All per-thread work is done on the fiber's side, on the thread it runs on
// at that moment, through a this_thread_state() read after its last switch:
//   fiber arrives   remembers the resumer (still this thread's current
//                   code) and the resumer's C++ exception state, makes
//                   itself current with its own exception state;
//   fiber leaves    (suspend, end) saves its exception state, makes the
//                   resumer current again with the resumer's state;
//   resumer gets    the fiber's context and publishes its state (release),
//     control back  gives back its shared stack, runs its after-switch hook.
// Invariants:
//   FIBER-I1  A fiber's ctx is valid only while its state is created or suspended;
//             "suspended" and "done" are published by the arriving side after the
//             departing context is saved, so whoever acquires "suspended" may jump
//             to ctx, and whoever acquires "done" may free the stack.
//   FIBER-I2  created/suspended -> running only by the fiber's one resumer: a
//             fiber is an object like any other, so resuming it from two
//             threads at once without synchronising is the caller's data race,
//             and the runtime never does it (SCHED-O1, src/runtime/worker.cpp).
//             The claim (claim()) is an acquire load and a plain store; builds of
//             the including code without NDEBUG (and without TSan) claim by
//             compare-and-swap instead, so that of two racing threads exactly one
//             wins and the other gets resume_running; TSan builds keep the plain
//             store, where TSan reports the race on the record itself.
//   FIBER-I3  The arriving side reads what the departing fiber left in its record
//             (hook, handoff) before it publishes anything: once published, the
//             departing fiber may run again (on another thread) and change them.
//   FIBER-I4  The thread's exception state (the C++ runtime's __cxa_eh_globals)
//             always belongs to the code running on the thread; a fiber keeps its
//             own in `eh` while away and its resumer's in `resumer_eh` while it runs.
//   FIBER-I5  A running fiber's resumer waits on the thread the fiber runs on (a
//             resume() does not return until the fiber comes back), so the fiber
//             may make the resumer current there before it leaves; and a running
//             fiber's `ts` is the state of the thread it runs on, rewritten at every
//             arrival (and by a nested fiber that returns to it).
// The FP control state (fp_env_mode, weft/fiber.hpp):
//   FIBER-F1  a fiber with own_fp keeps its FP control state in `fp` while it is
//             not running, and its resumer's in `resumer_fp` while it runs; a
//             fiber without it (shared, the default) keeps nothing: it runs with
//             the thread's state, and what it changes stays with the thread;
//   FIBER-F2  the switch itself (fiber_jump()) never touches the state: the
//             departing side sets the state the arriving side must run with
//             before it jumps (fp_enter() in a resume, fp_leave() in a suspend or
//             an end, fp_hand_over() in a switch_to()), so both sides of every
//             switch decide by the same fiber's flag(s) and a shared fiber's
//             switches cost one flag test each;
//   FIBER-F3  TSan builds switch with the out-of-line context::jump(), which does
//             save and restore the state per context (unless WEFT_SHARE_FP_ENV):
//             there the departing side also leaves the state in the record the
//             switch word names (handover_fp) and the arriving side sets it again
//             (first thing after the jump, or in first_arrival()), so the jump is
//             FP-neutral as FIBER-F2 assumes.
// The fast paths:
//   FIBER-F4  a resume claims with one load and one store (FIBER-I2; no locked
//             instruction in release builds), then tests the four
//             rare flags (copy_mode, own_fp, unwinding, keep_stack) with one load
//             (slow_flags()); the resumer settles a plain suspend (no hook, not
//             copy-stack) inline, and only that tells the typed layer there is no
//             exception to rethrow and no shared stack to give back; a suspend
//             tests unwinding (misuse) and own_fp with one load. Every other case
//             takes the general path: the copy-stack and FP steps its flags ask
//             for, and settle_resumer().
// It is included by weft/fiber.hpp after the public vocabulary (fiber_state,
// forced_unwind, coroutine_errc, after_switch_fn) and uses it.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <type_traits>

#include "weft/config.hpp"
#include "weft/context.hpp"
#include "weft/detail/sanitizer.hpp"
#include "weft/shared_stack.hpp"
#include "weft/stack.hpp"

namespace weft {

namespace detail {

struct fiber_record;
struct copy_state;

// eh_state is the C++ runtime's per-thread exception state: the prefix of
// the Itanium C++ ABI's __cxa_eh_globals (section 2.2.2: the stack of caught
// exceptions and the count of uncaught ones), which libstdc++ and libc++abi
// both lay out this way. std::current_exception(), throw; and
// std::uncaught_exceptions() read it; every fiber keeps its own.
struct eh_state {
    void* caught = nullptr;
    unsigned int uncaught = 0;
};

// thread_state is what weft keeps per thread.
struct thread_state {
    fiber_record* current = nullptr;  // the fiber running on this thread, or null
    eh_state* eh = nullptr;           // this thread's __cxa_eh_globals
    const void* token = nullptr;      // thread_token() (weft/shared_stack.hpp), read once
};

// this_thread_state() is the calling thread's state. It is never inlined
// (also not into weft's own sources, where a caller that switches would let
// the compiler compute the thread-local address once for both sides of the
// switch: gcc does on AArch64) and its result goes through an asm barrier,
// so the compiler cannot reuse an address computed before a switch that may
// have moved the caller to another thread. The first call on a thread prepares it (alternate signal
// stack, overflow handler).
[[nodiscard, gnu::noinline]] WEFT_API thread_state* this_thread_state() noexcept;

// fiber_flavour says which typed wrapper a record belongs to.
enum class fiber_flavour : std::uint8_t {
    fiber,          // weft::fiber
    coroutine,      // a coroutine that yields or receives values
    coroutine_plain // coroutine<void, void, R>: this_coroutine::yield() allowed
};

// with_tools says whether this weft build announces switches to a tool.
inline constexpr bool with_tools = WEFT_ASAN || WEFT_TSAN || WEFT_VALGRIND;
struct no_tools {};

// wait_arena is the off-stack room of a runtime task whose stack may be
// shrunk (docs/runtime.md, "Idle tasks give their stack back"): the
// detail::stable<T> objects of its waits (weft/waiter.hpp) and the count of
// what pins its stack. It sits next to the task fiber's record in a heap
// block (create_split(), weft/detail/fiber_create.hpp); only the task's
// own code on its own fiber touches `used` and `pins`, and the shrinker
// reads `pins` under its hold of the switched-out task (SHRINK-S2).
//
//   SHRINK-A1  `used` only grows by a bump and goes back to the mark the
//              matching stable<T> saved when that stable<T> ends: stables are
//              scoped objects of one fiber, so they end in reverse order.
//   SHRINK-A2  While `pins` is not 0 something another party may touch lies in the
//              task's frames (a primitive's wait_queue, a joiner's locals, a
//              blocking() job, an io_uring operation's buffer, a wait inside a
//              nested fiber): the task is not shrunk. (A stable<T> that does
//              not fit the arena goes to the heap and pins nothing.)
//
// The capacity holds the common waits: one_wait (72 bytes: event, latch,
// join, a sleep's or an io wait's state), a mutex's locker (80), a channel
// send or receive of a value up to 32 bytes (a std::string). Larger ones (a
// select of two or more cases: 208 bytes for two) cost a heap block for that
// wait. Every byte of it is paid by every task of a runtime that shrinks,
// idle or not (docs/runtime.md, "Where the bytes go"): 112 keeps a fiber
// room (SCHED-R1) at 464 bytes, in glibc's 480-byte chunk.
struct wait_arena {
    static constexpr std::size_t capacity = 112;
    std::uint32_t used = 0;
    std::uint32_t pins = 0;
    // A shrunk task's live bytes: [ctx, top) of its fiber's stack (its
    // saved stack pointer up to its stack's top, a page boundary), kept in
    // the heap block `saved` (null: not shrunk) as tagged non-zero 8-byte
    // words, most as their low halves (SHRINK-Z1, src/runtime/shrink.cpp).
    // The range is not stored: the fiber's ctx does not change while it is
    // switched out, and the shrinker and the restorer both derive it.
    std::byte* saved = nullptr;
    alignas(16) std::byte bytes[capacity];
};

// fiber_record is the type-erased part of every fiber: at the top of its
// own stack, or at the start of a heap block in copy-stack mode. Typed
// wrappers derive from it (values, the body, the allocator).
struct alignas(16) fiber_record {
    // The fields a resume + suspend round trip touches come first, in the
    // record's first 128 bytes: two cache lines where the record starts on
    // a line (create() puts it so on its own stack), which matters when the
    // switches miss the cache (many coroutines: scenario S3 of
    // bench/README.md). The rest is touched at
    // creation, destruction, by misuse, tools, own_fp or debuggers.
    void* ctx = nullptr;      // own suspended context (FIBER-I1)
    thread_state* ts = nullptr;  // the state of the thread it runs on (valid while it runs, FIBER-I5)
    void* resumer = nullptr;  // where suspend() and the end go: the context of the last resume()
    fiber_record* parent = nullptr;  // the fiber that resumed it (null: code outside any fiber), while it runs
    std::atomic<fiber_state> state{fiber_state::created};
    fiber_flavour flavour = fiber_flavour::fiber;
    bool unwind_raised = false;  // a forced unwind is under way on its stack (raise_forced_unwind())
    bool unwind_caught = false;  // its entry caught that forced unwind
    // The four flags that take a switch off its fast path, in one aligned
    // 4-byte word, so that one test covers them (slow_flags(), FIBER-F4):
    bool copy_mode = false;   // copy-stack mode (`copy` is set); never changes
    bool own_fp = false;      // fp_env_mode::own: it keeps its FP control state (FIBER-F1)
    bool unwinding = false;   // unwind() resumed it to throw forced_unwind
    bool keep_stack = false;  // copy-stack: the resumer gives the shared stack back (a value lies there)
    eh_state eh;              // the fiber's exception state while it is not running
    after_switch_fn hook = nullptr;  // what the side it switches to runs for it (FIBER-I3)
    eh_state resumer_eh;      // its resumer's, while it runs (FIBER-I4)
    void* hook_arg = nullptr;
    fiber_record* handoff = nullptr;  // the fiber it switches to (switch_to)
    copy_state* copy = nullptr;       // copy-stack mode: the saved bytes; null otherwise
    stack_view stack;
    // Cold from here on (the guard word is checked at every switch only in
    // builds without NDEBUG).
    const std::uint64_t* guard_word = nullptr;  // a malloc_stack's guard word, else null
    fiber_record* active = nullptr;  // tool builds: whose code runs where it switched back (null: its own)
    context::fp_control fp;          // own_fp: its FP control state while it is not running (FIBER-F1)
    context::fp_control resumer_fp;  // own_fp: its resumer's, while it runs (FIBER-F1)
#if WEFT_TSAN && !WEFT_SHARE_FP_ENV
    context::fp_control handover_fp;  // what the FP state was when it last switched (FIBER-F3)
#endif
    std::exception_ptr exception;  // what the body let escape
    std::string_view name;
    std::byte* private_data = nullptr;
    std::byte* extension = nullptr;  // the upper layer's area (fiber_options::extension_size)
    // Both at most 4 GiB (check_extension(), weft/detail/fiber_create.hpp):
    // 32 bits each, so that a task's record is 16 bytes smaller.
    std::uint32_t private_size = 0;
    std::uint32_t extension_size = 0;
    std::uint64_t guard_value = 0;
    std::size_t requested_stack = 0;    // fiber_options::stack_size, for the overflow report
    // The registry of live fibers (register_fiber(), src/fiber/registry.cpp):
    // a process-unique id, the links of its shard's list and that shard, and
    // the task it runs for (a task_record of layer L3, set by the runtime;
    // null for a standalone fiber). Written at creation and destruction only,
    // never on a switch; read by debuggers (docs/debugging.md).
    std::uint64_t id = 0;
    fiber_record* reg_prev = nullptr;
    fiber_record* reg_next = nullptr;
    std::uint32_t reg_shard = 0;
    bool painted = false;               // the free stack was painted at creation
    void* owner = nullptr;
    // A runtime task's fiber made by create_split(): its wait arena (SHRINK-A1, SHRINK-A2); else null.
    wait_arena* arena = nullptr;
    // tools() is what ASan, TSan and valgrind need per fiber; in a weft
    // built without them it takes no space.
    [[no_unique_address]] std::conditional_t<with_tools, sanitizer::tool_state, no_tools> tools_;
    sanitizer::tool_state& tools() noexcept { return pick_tools(tools_); }
    template <class S>
    static sanitizer::tool_state& pick_tools(S& s) noexcept {
        if constexpr (std::is_same_v<S, sanitizer::tool_state>) {
            return s;
        } else {
            static constinit sanitizer::tool_state unused;
            return unused;
        }
    }
    context::entry_fn start = nullptr;                  // the first function on its stack
    void (*release)(fiber_record*) noexcept = nullptr;  // destroys the typed block, frees the stack
    // The exception object of a forced unwind raised on this fiber's stack
    // (an _Unwind_Exception, <unwind.h>; raise_forced_unwind()). In the
    // record, not on the heap: a cancellation must work when memory is
    // exhausted (nothing may be lost then), and not on the stack it unwinds.
    alignas(16) unsigned char unwind_object[32];
};

// slow_flags() is the word of f's four rare flags (copy_mode, own_fp,
// unwinding, keep_stack): zero for a fiber whose switches take the fast
// paths (FIBER-F4). slow_bit() is the bit of one of them in that word.
static_assert(std::is_standard_layout_v<fiber_record>, "slow_flags() uses offsetof(fiber_record, ...)");
static_assert(offsetof(fiber_record, copy_mode) % 4 == 0 && offsetof(fiber_record, own_fp) == offsetof(fiber_record, copy_mode) + 1 &&
                  offsetof(fiber_record, unwinding) == offsetof(fiber_record, copy_mode) + 2 &&
                  offsetof(fiber_record, keep_stack) == offsetof(fiber_record, copy_mode) + 3,
              "the four slow flags must be one aligned 4-byte word");
[[gnu::always_inline]] inline std::uint32_t slow_flags(const fiber_record* f) noexcept {
    std::uint32_t word;
    std::memcpy(&word, reinterpret_cast<const unsigned char*>(f) + offsetof(fiber_record, copy_mode), sizeof word);
    return word;
}
// index: 0 copy_mode, 1 own_fp, 2 unwinding, 3 keep_stack.
constexpr std::uint32_t slow_bit(unsigned index) noexcept {
    const unsigned byte = std::endian::native == std::endian::little ? index : 3 - index;
    return std::uint32_t{0xff} << (8 * byte);
}

// copy_state is what a copy-stack fiber keeps besides its record: its
// shared stack and the buffer its stack bytes are saved to. The buffer
// starts as the tail of the record's own heap block and moves to a heap
// block of its own when a save outgrows it.
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

// live_coroutines counts fibers alive, per thread (thread_counter id 1).
WEFT_API extern thread_counter live_coroutines;

// ------------------------------------------------------------ out of line

// misuse() throws coroutine_error with f's name and state.
[[noreturn]] WEFT_API void misuse(const fiber_record* f, coroutine_errc code);
// resume_misuse() throws the error that fits resuming f in state `seen`.
[[noreturn]] WEFT_API void resume_misuse(const fiber_record* f, fiber_state seen);
// suspend_misuse() throws yield_outside, or aborts when f yields while it
// is being unwound.
[[noreturn]] WEFT_API void suspend_misuse(const fiber_record* f);
// switch_misuse() throws the error that fits switch_to(next) from `self`.
[[noreturn]] WEFT_API void switch_misuse(const fiber_record* self, const fiber_record* next, fiber_state seen);
// set_fault_hook() installs a function that weft's SIGSEGV/SIGBUS handler
// (src/fiber/safety.cpp) asks about a fault that is not a fiber's stack
// overflow: it returns true when it resolved the fault (the address is
// accessible now, and the faulting access is made again when the handler
// returns). Async-signal-safe code only. The runtime's restores shrunk
// stacks (SHRINK-P2, src/runtime/shrink.cpp).
using fault_hook_fn = bool (*)(const void* addr) noexcept;
WEFT_API void set_fault_hook(fault_hook_fn hook) noexcept;
// guard_broken() aborts, naming f, when its malloc_stack guard word changed.
[[noreturn]] WEFT_API void guard_broken(const fiber_record* f) noexcept;
// entry_caught() keeps what the body let escape (called in a catch (...)).
WEFT_API void entry_caught(fiber_record* f) noexcept;
// finish() ends the fiber: switches to its resumer for the last time.
// `unwound`: forced_unwind reached the entry.
[[noreturn]] WEFT_API void finish(fiber_record* f, bool unwound) noexcept;
// unwind() forces f, suspended, to unwind (a resume that throws
// forced_unwind at its suspension point); created: marks it done. Returns
// false (nothing changed) when its shared stack is busy.
[[nodiscard]] WEFT_API bool unwind(fiber_record* f);
// destroy() unwinds f if it is suspended and releases it.
WEFT_API void destroy(fiber_record* f) noexcept;
// raise_forced_unwind() unwinds the stack of the code running on this thread
// (a fiber, or a task's fiber) up to its entry with _Unwind_ForcedUnwind
// (forced_unwind's rules, weft/fiber.hpp). The entry catches it
// (entry_for()). A handler that swallows it aborts naming the fiber; raised
// outside any fiber, it aborts when it reaches the end of the thread's
// stack. Never returns.
[[noreturn]] WEFT_API void raise_forced_unwind();
// forced_unwind_in_flight() says whether the exception being handled by the
// calling catch (...) is a forced unwind: true when one was raised on the
// stack of the code running on this thread (it ends at that code's entry, so
// it is the one in flight; a destructor that throws during it terminates).
// weft's own handlers use it instead of catch (const forced_unwind&), which
// binds a reference to the null object libsupc++ hands out for a foreign
// exception (UBSan reports it).
[[nodiscard]] WEFT_API bool forced_unwind_in_flight() noexcept;
// rethrow() rethrows and clears the exception the body let escape.
[[noreturn]] WEFT_API void rethrow(fiber_record* f);
// describe() is "coroutine 'name'" or "coroutine <anonymous 0x...>".
[[nodiscard]] WEFT_API std::string describe(const fiber_record* f);

// try_enter_copy() makes f's shared stack hold f's bytes (saving those of
// the fiber whose frames are there) and marks it in use by this thread, for
// a resume that claimed f from state `seen`. When the stack is in use (by a
// fiber of this thread or another) it puts f back in `seen` and returns
// false; when the save cannot get memory, the same, and throws
// std::bad_alloc.
[[nodiscard]] WEFT_API bool try_enter_copy(fiber_record* f, fiber_state seen);
// enter_copy() is try_enter_copy() that throws coroutine_error
// (shared_stack_busy) when the stack is busy.
WEFT_API void enter_copy(fiber_record* f, fiber_state seen);
// shared_busy() throws coroutine_error (shared_stack_busy) for f.
[[noreturn]] WEFT_API void shared_busy(const fiber_record* f);
// leave_shared() gives f's shared stack back once f has switched out;
// `finished`: f has ended, its bytes need no saving.
WEFT_API void leave_shared(fiber_record* f, bool finished) noexcept;

// ------------------------------------------------------------ the funnel

// switch_kind is what a switch does. Every switch passes one word, the
// record of the fiber it concerns with the kind in its low bits (records are
// 16-byte aligned); what else the arriving side needs (the hook, the fiber
// switched to) is in that record, written by the departing side while it
// still owns it.
enum class switch_kind : std::uintptr_t {
    resume = 0,     // a resumer enters the fiber
    suspend = 1,    // the fiber goes back to its resumer
    switch_to = 2,  // the fiber hands over to its handoff, which inherits its resumer
    finish = 3      // the fiber has ended and goes back to its resumer
};
// hooked is or'ed into the word when the fiber left an after-switch hook.
inline constexpr std::uintptr_t hooked = 4;

template <class Record> inline void* tag(Record* f, switch_kind k) noexcept {
    return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(f) | static_cast<std::uintptr_t>(k));
}
// tag_hook() is tag() that also leaves `hook` for the arriving side.
[[gnu::always_inline]] inline void* tag_hook(fiber_record* f, switch_kind k, after_switch_fn hook, void* arg) noexcept {
    if (!hook) return tag(f, k);
    f->hook = hook;
    f->hook_arg = arg;
    return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(tag(f, k)) | hooked);
}
template <class Record = fiber_record> inline Record* record_of(void* word) noexcept {
    return reinterpret_cast<Record*>(reinterpret_cast<std::uintptr_t>(word) & ~std::uintptr_t{15});
}
inline switch_kind kind_of(void* word) noexcept {
    return static_cast<switch_kind>(reinterpret_cast<std::uintptr_t>(word) & 3);
}

// jump() is the one raw switch: the inline context::fiber_jump() (every
// context it meets is fresh from make() or suspended by it). TSan builds
// use the out-of-line context::jump(): with the inline switch, clang 14's
// TSan runtime corrupts its shadow call stack in nested coroutines, for a
// reason not known (docs/safety.md, "TSan builds switch out of line").
template <class Record = fiber_record> [[gnu::always_inline]] inline context::transfer jump(void* to, void* word) noexcept {
#if WEFT_TSAN && !WEFT_SHARE_FP_ENV
    context::fp_control_save(record_of<Record>(word)->handover_fp);  // FIBER-F3
    const context::transfer t = context::jump(to, word);
    context::fp_control_load(record_of<Record>(t.data)->handover_fp);
    return t;
#elif WEFT_TSAN
    return context::jump(to, word);
#else
    return context::fiber_jump(to, word);
#endif
}

// switch_gap is what jump() leaves between a suspended context's frame and
// the suspended function's data (see context::fast_jump_gap).
inline constexpr std::size_t switch_gap = WEFT_TSAN ? 0 : context::fast_jump_gap;

// stack_pointer() is the caller's stack pointer. Read with asm rather than
// __builtin_frame_address(0), which would force a frame pointer and take a
// register the switch preserves away from the caller's live values.
[[gnu::always_inline]] inline const void* stack_pointer() noexcept {
    const void* sp;
#if defined(__x86_64__)
    asm("movq %%rsp, %0" : "=r"(sp));
#else
    asm("mov %0, sp" : "=r"(sp));
#endif
    return sp;
}

// check_guard() aborts when f's malloc_stack guard word was overwritten; in
// builds of the including code without NDEBUG, at every switch.
[[gnu::always_inline]] inline void check_guard([[maybe_unused]] const fiber_record* f) noexcept {
#ifndef NDEBUG
    if (f->guard_word && *f->guard_word != f->guard_value) [[unlikely]]
        guard_broken(f);
#endif
}

// copy_eh() copies an exception state: the 16 bytes of __cxa_eh_globals on
// LP64 targets, its two fields and the padding after them, in one load and
// one store.
[[gnu::always_inline]] inline void copy_eh(eh_state& to, const eh_state& from) noexcept {
    static_assert(sizeof(eh_state) == 16 && alignof(eh_state) == 8);
    std::memcpy(static_cast<void*>(&to), static_cast<const void*>(&from), sizeof(eh_state));
}

// save_eh() keeps this thread's exception state in `to`.
[[gnu::always_inline]] inline void save_eh(eh_state& to, const thread_state* ts) noexcept { copy_eh(to, *ts->eh); }

// install() makes `code` (null: code that is not a fiber) this thread's
// current code, with exception state `eh`.
[[gnu::always_inline]] inline void install(thread_state* ts, fiber_record* code, const eh_state& eh) noexcept {
    eh_state* to = ts->eh;
    copy_eh(*to, eh);
    ts->current = code;
}

// fp_created() gives a new fiber its FP mode (FIBER-F1): an own_fp fiber starts
// with its creator's state. create() and create_copy() call it.
inline void fp_created(fiber_record* f, fp_env_mode mode) noexcept {
    f->own_fp = mode == fp_env_mode::own;
    if (f->own_fp) context::fp_control_save(f->fp);
}

// fp_enter() is a resumer's FP half of entering f (FIBER-F1, FIBER-F2): an own_fp
// fiber gets its state, and keeps the resumer's.
[[gnu::always_inline]] inline void fp_enter(fiber_record* f) noexcept {
    if (f->own_fp) [[unlikely]] {
        context::fp_control_save(f->resumer_fp);
        context::fp_control_load(f->fp);
    }
}

// fp_leave() is f's FP half of switching back to its resumer (FIBER-F1, FIBER-F2):
// an own_fp fiber keeps its state (unless it has ended, Keep = false) and
// gives the resumer its own back.
template <bool Keep = true>
[[gnu::always_inline]] inline void fp_leave(fiber_record* f) noexcept {
    if (f->own_fp) [[unlikely]] {
        if constexpr (Keep) context::fp_control_save(f->fp);
        context::fp_control_load(f->resumer_fp);
    }
}

// fp_hand_over() is f's FP half of switch_to(next) (FIBER-F1, FIBER-F2): next inherits
// f's resumer, so it inherits the resumer's FP state too: an own_fp f
// keeps its state and has the resumer's in resumer_fp; a shared f runs
// with the resumer's (as the thread has it now).
[[gnu::always_inline]] inline void fp_hand_over(fiber_record* f, fiber_record* next) noexcept {
    if (!(f->own_fp | next->own_fp)) [[likely]]
        return;
    if (f->own_fp) {
        context::fp_control_save(f->fp);
        if (next->own_fp) {
            next->resumer_fp = f->resumer_fp;
            context::fp_control_load(next->fp);
        } else {
            context::fp_control_load(f->resumer_fp);
        }
    } else {
        context::fp_control_save(next->resumer_fp);
        context::fp_control_load(next->fp);
    }
}

// leave_to_resumer() is what a fiber does just before it switches back to
// its resumer, which waits on this very thread (FIBER-I5): it keeps its own
// exception state (unless it has ended) and makes the resumer current again,
// with the resumer's.
// Fp = false: the caller has done fp_leave() already (switch_back()).
template <bool Keep = true, bool Fp = true>
[[gnu::always_inline]] inline void leave_to_resumer(fiber_record* f, thread_state* ts) noexcept {
    if constexpr (Fp) fp_leave<Keep>(f);
    eh_state* eh = ts->eh;
    if constexpr (Keep) copy_eh(f->eh, *eh);
    copy_eh(*eh, f->resumer_eh);
    fiber_record* parent = f->parent;
    ts->current = parent;
    if (parent) parent->ts = ts;
}

// publish_read() ends the arriving side's half when fiber r switched out
// without ending, once r's context is recorded and what r left (hook, arg)
// is read (FIBER-I3): give back r's shared stack if `leave`, publish r (FIBER-I1), run
// its hook.
[[gnu::always_inline]] inline void publish_read(fiber_record* r, bool leave, after_switch_fn hook, void* arg) noexcept {
    if (leave) [[unlikely]]
        leave_shared(r, false);
    r->state.store(fiber_state::suspended, std::memory_order_release);  // FIBER-I1
    if (hook) hook(arg);
}

// settle_fiber() is the arriving side's half in fiber f, which arrives
// where it switched back or handed over (or at its entry); the code running
// there is `self`'s (f itself, or a fiber it resumed when it was suspended
// from inside that one: suspend_chain()). f was resumed (the word names f) or
// switched to (the word names the fiber that handed over).
[[gnu::always_inline]] inline void settle_fiber(fiber_record* self, fiber_record* f, context::transfer t) noexcept {
    fiber_record* r = record_of(t.data);
    if (kind_of(t.data) == switch_kind::resume) [[likely]] {
        f->resumer = t.from;
        thread_state* ts = this_thread_state();
        // The resumer is still this thread's current code: remember it,
        // and its exception state, until f goes back to it.
        f->parent = ts->current;
        eh_state* eh = ts->eh;
        copy_eh(f->resumer_eh, *eh);
        copy_eh(*eh, f->eh);
        ts->current = self;
        self->ts = ts;
        return;
    }
    // r handed over to f, which inherited r's resumer. What r left is read
    // before the call (one value less to keep across it), and only then is
    // f made current: the hook must see f current.
    r->ctx = t.from;
    const bool has_hook = reinterpret_cast<std::uintptr_t>(t.data) & hooked;
    const after_switch_fn hook = has_hook ? r->hook : nullptr;
    void* const arg = has_hook ? r->hook_arg : nullptr;
    thread_state* ts = this_thread_state();
    install(ts, self, f->eh);
    self->ts = ts;
    publish_read(r, r->copy_mode, hook, arg);
}

// settle_resumer() is the arriving side's half in a resumer that gets
// control back from the fiber the word names, which suspended or ended (it
// made the resumer current again before it left: leave_to_resumer()).
[[gnu::always_inline]] inline void settle_resumer(context::transfer t) noexcept {
    fiber_record* r = record_of(t.data);
    if (kind_of(t.data) == switch_kind::finish) [[unlikely]] {
        if (r->copy_mode) leave_shared(r, true);
        r->state.store(fiber_state::done, std::memory_order_release);
        return;
    }
    // Read what r left before publishing it (FIBER-I3). A value r yielded lies
    // on its shared stack: the resumer gives the stack back once it has
    // moved the value out (keep_stack).
    const bool has_hook = reinterpret_cast<std::uintptr_t>(t.data) & hooked;
    const after_switch_fn hook = has_hook ? r->hook : nullptr;
    void* const arg = has_hook ? r->hook_arg : nullptr;
    r->ctx = t.from;
    publish_read(r, r->copy_mode && !r->keep_stack, hook, arg);
}

// running_in() is the fiber whose code runs where f is suspended: f, or
// the fiber f resumed from inside which it was suspended (suspend_chain()).
// Only the tools need to know (ASan's stack bounds, TSan's fibers).
[[gnu::always_inline]] inline fiber_record* running_in(fiber_record* f) noexcept {
    if constexpr (with_tools) return f->active ? f->active : f;
    return f;
}

// claim() moves f from created or suspended to running (FIBER-I2, FIBER-F4):
// an acquire load (it pairs with the release that published "suspended",
// FIBER-I1), a test, and a plain store. It detects every misuse on one
// thread (a resume of a running, a done or the calling fiber). Two threads
// racing to resume one fiber are a data race of the caller's; builds without
// NDEBUG catch it by claiming with a compare-and-swap from what the load saw
// (WEFT_DETAIL_CHECKED_CLAIM), TSan builds by seeing two threads write the
// record. Returns whether it claimed; `seen` is the state it left or, when it
// failed, the state it saw.
#if !defined(NDEBUG) && !WEFT_TSAN
#define WEFT_DETAIL_CHECKED_CLAIM 1
#else
#define WEFT_DETAIL_CHECKED_CLAIM 0
#endif
[[gnu::always_inline]] inline bool claim(fiber_record* f, fiber_state& seen) noexcept {
    seen = f->state.load(std::memory_order_acquire);
    if (seen != fiber_state::suspended && seen != fiber_state::created) [[unlikely]]
        return false;
#if WEFT_DETAIL_CHECKED_CLAIM
    return f->state.compare_exchange_strong(seen, fiber_state::running, std::memory_order_acquire,
                                            std::memory_order_relaxed);
#else
    f->state.store(fiber_state::running, std::memory_order_relaxed);
    return true;
#endif
}

// enter_set() switches from the caller into f, which it has claimed (and
// whose shared stack holds its bytes, and whose FP state is set: fp_enter()).
// Returns the fiber that came back: f, or the last fiber of a chain of
// switch_to()s that began in f. `plain` says whether that fiber came back
// the common way, which settle_resumer() takes inline (FIBER-F4): a suspend with no
// hook, not copy-stack; then it left nothing else for the resumer to look
// at (no exception: that comes with a finish; no stack to give back).
[[gnu::always_inline]] inline fiber_record* enter_set(fiber_record* f, bool& plain) noexcept {
    void* resumer_fake = nullptr;
    fiber_record* a = running_in(f);
    sanitizer::enter(f->tools(), a->tools(), &resumer_fake, a->stack.base, a->stack.size);
    context::transfer t = jump(f->ctx, tag(f, switch_kind::resume));
    sanitizer::returned(resumer_fake);
    fiber_record* back = record_of(t.data);
    plain = (reinterpret_cast<std::uintptr_t>(t.data) & 7) == static_cast<std::uintptr_t>(switch_kind::suspend) &&
            !back->copy_mode;
    if (plain) [[likely]] {
        // settle_resumer() of a plain suspend: record, publish (FIBER-I1).
        back->ctx = t.from;
        back->state.store(fiber_state::suspended, std::memory_order_release);
    } else {
        settle_resumer(t);
    }
    return back;
}

// enter() is enter_set() that sets f's FP state first.
inline fiber_record* enter(fiber_record* f) noexcept {
    fp_enter(f);
    bool plain;
    return enter_set(f, plain);
}

// resume() claims f and enters it. Returns the fiber that came back, and
// in `plain` how (enter_set()). When f is a copy-stack fiber whose shared
// stack is busy, f is left as it was and resume() throws coroutine_error
// (shared_stack_busy), or with ThrowIfBusy = false returns null. Throws:
// coroutine_error on misuse; std::bad_alloc (copy-stack save).
// The fast path (FIBER-F4): claim() (its load lets the first resume of a created
// fiber succeed at its one compare-and-swap instead of failing a locked
// instruction first: docs/measurements.md, "Claiming a fiber"); then
// one test of the slow flags, which only copy-stack and own_fp fibers have
// set here (unwinding is never set on a fiber that can be resumed,
// keep_stack only on a copy-stack one). The flags are read after the claim:
// until then the fiber may run on another thread and write them.
template <bool ThrowIfBusy = true>
[[gnu::always_inline]] inline fiber_record* resume(fiber_record* f, bool& plain) {
    fiber_state seen;
    if (!claim(f, seen)) [[unlikely]]
        resume_misuse(f, seen);
    if (slow_flags(f)) [[unlikely]] {
        if (f->copy_mode) {
            if constexpr (ThrowIfBusy)
                enter_copy(f, seen);
            else if (!try_enter_copy(f, seen))
                return nullptr;
        }
        fp_enter(f);
    }
    return enter_set(f, plain);
}
template <bool ThrowIfBusy = true>
[[gnu::always_inline]] inline fiber_record* resume(fiber_record* f) {
    bool plain;
    return resume<ThrowIfBusy>(f, plain);
}

// switch_back() switches fiber f, running on this thread, back to its resumer.
// The code calling it runs in `cur`, f itself or a fiber f resumed
// (directly or further down), which stays running inside f and is current
// again when f is resumed. Throws: forced_unwind when f is resumed to be
// unwound.
[[gnu::always_inline]] inline void switch_back(fiber_record* f, fiber_record* cur, thread_state* ts,
                                               after_switch_fn hook, void* arg) {
    check_guard(f);
    // One test for the two rare cases (FIBER-F4): a suspend while being unwound
    // (a misuse: suspend() leaves it to this test, suspend_chain() tests
    // each fiber of the chain itself) and own_fp.
    if (slow_flags(f) & (slow_bit(1) | slow_bit(2))) [[unlikely]] {
        if (f->unwinding) suspend_misuse(f);
        fp_leave(f);
    }
    void* word = tag_hook(f, switch_kind::suspend, hook, arg);
    leave_to_resumer<true, false>(f, ts);
    if constexpr (with_tools) f->active = cur == f ? nullptr : cur;
    sanitizer::leave(f->tools(), cur->tools(), false);
    context::transfer t = jump(f->resumer, word);
    sanitizer::arrived(f->tools(), cur->tools(), false, kind_of(t.data) == switch_kind::resume);
    settle_fiber(cur, f, t);
    if (f->unwinding) [[unlikely]]
        raise_forced_unwind();
}

// suspend() switches the running fiber f back to its resumer; the hook, if
// any, runs there. Requires: called from f's own code. Throws:
// coroutine_error (yield_outside); forced_unwind when f is resumed to be
// unwound.
// check_leaving() throws unless the caller is f's own code about to switch
// f out: f is running and this code is on its stack (then this thread runs
// it, and f->ts is this thread's state, written when f last arrived), and f
// is not being unwound.
// (The unwinding test is switch_back()'s, folded into its FP test, FIBER-F4.)
[[gnu::always_inline]] inline void check_leaving(const fiber_record* f) {
    if (f->state.load(std::memory_order_relaxed) != fiber_state::running || !f->stack.contains(stack_pointer()))
        [[unlikely]]
        suspend_misuse(f);
}

[[gnu::always_inline]] inline void suspend(fiber_record* f, after_switch_fn hook = nullptr, void* arg = nullptr) {
    check_leaving(f);
    switch_back(f, f, f->ts, hook, arg);
}

// suspend_chain() is suspend() of f from code running in a fiber that f
// resumed (directly or further down the chain); see this_fiber::suspend_outer().
WEFT_API void suspend_chain(fiber_record* f, after_switch_fn hook, void* arg);

// switch_to() hands the running fiber f over to next (symmetric transfer):
// next inherits f's resumer, f stays suspended until somebody resumes it.
// Throws: coroutine_error on misuse or when next's shared stack is busy;
// forced_unwind when f is later resumed to be unwound.
[[gnu::always_inline]] inline void switch_to(fiber_record* f, fiber_record* next, after_switch_fn hook = nullptr,
                                             void* arg = nullptr) {
    check_leaving(f);
    if (f->unwinding) [[unlikely]]
        suspend_misuse(f);
    // next == f fails the claim (f runs).
    fiber_state seen;
    if (!claim(next, seen)) [[unlikely]]
        switch_misuse(f, next, next->state.load(std::memory_order_relaxed));
    if (next->copy_mode) [[unlikely]]
        enter_copy(next, seen);
    check_guard(f);
    next->resumer = f->resumer;
    next->parent = f->parent;
    next->resumer_eh = f->resumer_eh;
    sanitizer::inherit(next->tools(), f->tools());
    void* word = tag_hook(f, switch_kind::switch_to, hook, arg);
    f->handoff = next;
    save_eh(f->eh, f->ts);
    fp_hand_over(f, next);
    if constexpr (with_tools) f->active = nullptr;
    fiber_record* a = running_in(next);
    sanitizer::hand_over(f->tools(), a->tools(), a->stack.base, a->stack.size);
    context::transfer t = jump(next->ctx, word);
    sanitizer::arrived(f->tools(), f->tools(), false, kind_of(t.data) == switch_kind::resume);
    settle_fiber(f, f, t);
    if (f->unwinding) [[unlikely]]
        raise_forced_unwind();
}

// first_arrival() is the start of a fiber's entry function.
[[gnu::always_inline]] inline fiber_record* first_arrival(context::transfer t) noexcept {
    fiber_record* r = record_of(t.data);
#if WEFT_TSAN && !WEFT_SHARE_FP_ENV
    context::fp_control_load(r->handover_fp);  // FIBER-F3: the trampoline came through context::jump()
#endif
    const bool resumed = kind_of(t.data) == switch_kind::resume;
    fiber_record* f = resumed ? r : r->handoff;
    sanitizer::arrived(f->tools(), f->tools(), true, resumed);
    settle_fiber(f, f, t);
    return f;
}

// entry_for() is the first function of a fiber whose typed block is Block:
// one per block type, so the body is called from it directly (one frame
// less to unwind and, in copy-stack mode, to save).
template <class Block>
void entry_for(context::transfer t) noexcept {
    fiber_record* f = first_arrival(t);
    bool unwound = false;
    try {
        Block::run(f);
    } catch (...) {
        if (f->unwind_raised) {
            // The forced unwind raised on this stack ends here: leaving this
            // handler deletes it, which is then no swallowing (FIBER-U2).
            f->unwind_caught = true;
            unwound = true;
        } else {
            entry_caught(f);
        }
    }
    finish(f, unwound);
}

}  // namespace detail
}  // namespace weft
