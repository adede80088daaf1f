// weft/detail/sanitizer.hpp: the one place where stack switches are
// announced to AddressSanitizer, ThreadSanitizer and valgrind. Which tools
// are announced to is a property of the weft build (WEFT_ASAN, WEFT_TSAN,
// WEFT_VALGRIND in weft/version.hpp, set by the CMake options WEFT_SANITIZE
// and WEFT_VALGRIND), not of the including translation unit, so that the
// inline switch code in headers and the compiled library always agree. With
// all three off every function here is empty and inlines to nothing.
#pragma once

#include <cstddef>

#include "weft/config.hpp"

#if WEFT_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#endif
#if WEFT_TSAN
#include <sanitizer/tsan_interface.h>
#endif
#if WEFT_VALGRIND
#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>
#endif

// WEFT_SWITCH_INLINE marks the functions that switch TSan's current fiber
// (enter(), hand_over(), leave()). TSan keeps a shadow call stack per fiber,
// pushed by every instrumented function's prologue and popped by its
// epilogue on whichever fiber is current then. A function that switches
// fibers and is not inlined (a Debug build does not inline plain `inline`)
// pushes on the fiber it leaves and pops on the one it switches to. For a
// fiber that has been resumed before, that pop takes off the entry its own
// leave() or hand_over() pushed when it left, so the stacks balance. For a
// fiber that has never run (first entry), the pop leaves its empty shadow
// stack one entry below the start. The next prologue on it (the out-of-line
// context::jump()) then writes 8 bytes below TSan's shadow-stack mapping
// (SEGV in __tsan_func_entry). Always inlined, the switch runs in the
// caller's frame: every weft function's prologue and epilogue run on the
// same TSan fiber, and only context::jump() itself enters on one side of
// the physical switch and returns on the other. It enters with the
// destination's fiber current, which is the fiber it returns on. Other
// builds keep plain `inline`.
#if WEFT_TSAN
#define WEFT_SWITCH_INLINE [[gnu::always_inline]]
#else
#define WEFT_SWITCH_INLINE
#endif

namespace weft::detail::sanitizer {

// tool_state is what the tools need per coroutine. Its layout does not
// depend on the build's options.
struct tool_state {
    void* asan_fake_stack = nullptr;      // the coroutine's fake stack while it is switched out
    const void* caller_bottom = nullptr;  // the resumer's stack, as ASan reported it
    std::size_t caller_size = 0;
    void* tsan_fiber = nullptr;           // the coroutine's TSan fiber
    void* tsan_caller = nullptr;          // the resumer's TSan fiber
    unsigned valgrind_id = 0;             // valgrind's stack id
};

// on_create() registers a new coroutine's stack [base, base + size).
inline void on_create([[maybe_unused]] tool_state& f, [[maybe_unused]] void* base,
                      [[maybe_unused]] std::size_t size) noexcept {
#if WEFT_ASAN
    // A suspended coroutine may hold the only pointer to a heap block.
    __lsan_register_root_region(base, size);
#endif
#if WEFT_TSAN
    f.tsan_fiber = __tsan_create_fiber(0);
#endif
#if WEFT_VALGRIND
    f.valgrind_id = VALGRIND_STACK_REGISTER(base, static_cast<char*>(base) + size);
#endif
}

// on_destroy() undoes on_create(). Requires: the coroutine is not running.
inline void on_destroy([[maybe_unused]] tool_state& f, [[maybe_unused]] void* base,
                       [[maybe_unused]] std::size_t size) noexcept {
#if WEFT_ASAN
    __lsan_unregister_root_region(base, size);
#endif
#if WEFT_TSAN
    __tsan_destroy_fiber(f.tsan_fiber);
    f.tsan_fiber = nullptr;
#endif
#if WEFT_VALGRIND
    VALGRIND_STACK_DEREGISTER(f.valgrind_id);
#endif
}

// on_create_copy() registers a copy-stack fiber: its shared stack is
// registered with LeakSanitizer and valgrind once, by its pool; only TSan
// needs a fiber per copy-stack fiber.
inline void on_create_copy([[maybe_unused]] tool_state& f) noexcept {
#if WEFT_TSAN
    f.tsan_fiber = __tsan_create_fiber(0);
#endif
}

// on_destroy_copy() undoes on_create_copy().
inline void on_destroy_copy([[maybe_unused]] tool_state& f) noexcept {
#if WEFT_TSAN
    __tsan_destroy_fiber(f.tsan_fiber);
    f.tsan_fiber = nullptr;
#endif
}

// reading_suspended_frames() runs before weft copies a suspended fiber's
// frames off a shared stack: ASan keeps their red zones poisoned.
inline void reading_suspended_frames([[maybe_unused]] void* p, [[maybe_unused]] std::size_t n) noexcept {
#if WEFT_ASAN
    __asan_unpoison_memory_region(p, n);
#endif
}

// on_shared_stack() registers a shared stack [base, base + size) once, for
// every fiber that will run on it: LeakSanitizer scans it as a root (the
// fiber whose frames are there may hold the only pointer to a heap block;
// evicted ones keep theirs in save buffers, which are scanned like any
// reachable block), valgrind knows it as a stack. Returns valgrind's id.
inline unsigned on_shared_stack([[maybe_unused]] void* base, [[maybe_unused]] std::size_t size) noexcept {
#if WEFT_ASAN
    __lsan_register_root_region(base, size);
#endif
#if WEFT_VALGRIND
    return VALGRIND_STACK_REGISTER(base, static_cast<char*>(base) + size);
#else
    return 0;
#endif
}

// off_shared_stack() undoes on_shared_stack().
inline void off_shared_stack([[maybe_unused]] void* base, [[maybe_unused]] std::size_t size,
                             [[maybe_unused]] unsigned valgrind_id) noexcept {
#if WEFT_ASAN
    __lsan_unregister_root_region(base, size);
#endif
#if WEFT_VALGRIND
    VALGRIND_STACK_DEREGISTER(valgrind_id);
#endif
}

// enter() runs on the resumer just before it switches into fiber `f`,
// whose code runs on the stack [base, base + size) of fiber `running` (f
// itself, or a fiber f resumed when f was suspended from inside it);
// *resumer_fake receives the resumer's ASan fake stack, to be handed back to
// returned().
WEFT_SWITCH_INLINE inline void enter([[maybe_unused]] tool_state& f, [[maybe_unused]] tool_state& running,
                                     [[maybe_unused]] void** resumer_fake, [[maybe_unused]] const void* base,
                                     [[maybe_unused]] std::size_t size) noexcept {
#if WEFT_ASAN
    __sanitizer_start_switch_fiber(resumer_fake, base, size);
#endif
#if WEFT_TSAN
    f.tsan_caller = __tsan_get_current_fiber();
    __tsan_switch_to_fiber(running.tsan_fiber, 0);
#endif
}

// returned() runs on the resumer once the coroutine has switched back.
inline void returned([[maybe_unused]] void* resumer_fake) noexcept {
#if WEFT_ASAN
    __sanitizer_finish_switch_fiber(resumer_fake, nullptr, nullptr);
#endif
}

// arrived() runs right after fiber `f` was switched to (first entry: first
// = true), in the code of fiber `running` (see enter()). record_caller: f
// was resumed, so the resumer's stack is the one it goes back to (false: it
// was switched to and has inherited where to go back, see inherit()).
inline void arrived([[maybe_unused]] tool_state& f, [[maybe_unused]] tool_state& running,
                    [[maybe_unused]] bool first, [[maybe_unused]] bool record_caller) noexcept {
#if WEFT_ASAN
    if (record_caller)
        __sanitizer_finish_switch_fiber(first ? nullptr : running.asan_fake_stack, &f.caller_bottom, &f.caller_size);
    else
        __sanitizer_finish_switch_fiber(first ? nullptr : running.asan_fake_stack, nullptr, nullptr);
#endif
}

// inherit() gives `next` the resumer of `from`, which hands over to it.
inline void inherit([[maybe_unused]] tool_state& next, [[maybe_unused]] const tool_state& from) noexcept {
#if WEFT_ASAN
    next.caller_bottom = from.caller_bottom;
    next.caller_size = from.caller_size;
#endif
#if WEFT_TSAN
    next.tsan_caller = from.tsan_caller;
#endif
}

// hand_over() runs on fiber `from` just before it switches to fiber `next`,
// whose stack is [base, base + size).
WEFT_SWITCH_INLINE inline void hand_over([[maybe_unused]] tool_state& from, [[maybe_unused]] tool_state& next,
                                         [[maybe_unused]] const void* base, [[maybe_unused]] std::size_t size) noexcept {
#if WEFT_ASAN
    __sanitizer_start_switch_fiber(&from.asan_fake_stack, base, size);
#endif
#if WEFT_TSAN
    __tsan_switch_to_fiber(next.tsan_fiber, 0);
#endif
}

// leave() runs just before fiber `f` switches back to its resumer, in the
// code of fiber `running` (f, or a fiber it resumed: see enter()); last =
// true when f will never run again (its fake stack can go).
WEFT_SWITCH_INLINE inline void leave([[maybe_unused]] tool_state& f, [[maybe_unused]] tool_state& running,
                                     [[maybe_unused]] bool last) noexcept {
#if WEFT_ASAN
    __sanitizer_start_switch_fiber(last ? nullptr : &running.asan_fake_stack, f.caller_bottom, f.caller_size);
#endif
#if WEFT_TSAN
    __tsan_switch_to_fiber(f.tsan_caller, 0);
#endif
}

// release_stack() runs before stack memory goes back to the system or the
// heap: a stack abandoned mid-frame keeps ASan's poisoning, which would
// show up as false reports when the memory is reused.
// A pool also calls it before handing a cached stack out again: memcheck
// still considers the old stack's memory below its last stack pointer
// inaccessible, and the new coroutine must be free to write it.
inline void release_stack([[maybe_unused]] void* base, [[maybe_unused]] std::size_t size) noexcept {
#if WEFT_ASAN
    __asan_unpoison_memory_region(base, size);
#endif
#if WEFT_VALGRIND
    VALGRIND_MAKE_MEM_UNDEFINED(base, size);
#endif
}

// reading_dead_stack() runs before weft reads stack memory that lies
// below a coroutine's stack pointer (the high-water scan): valgrind treats
// it as unaddressable, which is right for the program but not for the scan.
inline void reading_dead_stack([[maybe_unused]] const void* p, [[maybe_unused]] std::size_t n) noexcept {
#if WEFT_VALGRIND
    VALGRIND_MAKE_MEM_DEFINED(p, n);
#endif
}

}  // namespace weft::detail::sanitizer

#undef WEFT_SWITCH_INLINE
