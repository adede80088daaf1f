// internal.hpp: what the coroutine layer's sources share with each other and
// not with users (nothing here is installed or exported).
#pragma once

#include <unwind.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "weft/context.hpp"

namespace weft::detail {

struct fiber_record;
struct compact_record;
struct shared_stack_slot;

// paint_byte is what a painted stack is filled with (safety.cpp paints it;
// the registry's layout table tells debuggers, registry.cpp).
inline constexpr unsigned char paint_byte = 0xA5;

// current_for_signal() is the fiber running on the calling thread, or
// nullptr. Unlike this_thread_state() it never prepares the thread and does
// nothing but read a thread-local pointer, so a signal handler may call it.
// The value is only meaningful on the thread that was interrupted: the
// handler must not have switched stacks or threads since.
[[nodiscard]] fiber_record* current_for_signal() noexcept;

// prepare_thread() readies the calling thread for running fibers (an
// alternate signal stack and the overflow handler).
void prepare_thread() noexcept;

// fatal_named() writes "weft: <kind> 'name' <what>" (or "weft: <kind>
// <anonymous 0x...> <what>" when name is empty, with `address`) to stderr
// without allocating and aborts: for errors where nothing can be thrown.
// fatal() and compact_fatal() call it with their record's kind, name and
// address.
[[noreturn]] void fatal_named(const char* kind, std::string_view name, const void* address, const char* what) noexcept;

// fatal() writes "weft: coroutine 'name' <what>" to stderr without
// allocating and aborts: for errors where nothing can be thrown.
[[noreturn]] void fatal(const fiber_record* f, const char* what) noexcept;

// enter_shared() makes f's shared stack hold f's bytes and marks it in use
// by this thread (saving the bytes of the fiber whose frames are there).
// Returns false, changing nothing, when the stack is in use (by a fiber
// running on this thread or on another one). Throws: std::bad_alloc when the
// evicted fiber's buffer cannot grow (nothing has changed then).
[[nodiscard]] bool enter_shared(fiber_record* f);

// enter_shared_to_destroy() is enter_shared() for destruction, which cannot
// throw or report: it waits while another thread runs on the stack, and
// aborts with a message when this thread does or a save fails.
void enter_shared_to_destroy(fiber_record* f) noexcept;

// forced_unwind_from() starts a forced unwind (_Unwind_ForcedUnwind) of the
// calling stack with an exception object built in `storage` (32 bytes,
// 16-aligned) of class `exception_class`. It returns only when the unwind
// could not start, with the reason in failure[0, n). fiber.cpp's FIBER-U1 - FIBER-U3 say
// what cleanup and stop must do; compact.cpp uses it too.
void forced_unwind_from(void* storage, _Unwind_Exception_Class exception_class, _Unwind_Exception_Cleanup_Fn cleanup,
                        _Unwind_Stop_Fn stop, char* failure, std::size_t n);

// ---- copy stacks, shared by both kinds of copy-stack coroutine (copy_stack.cpp)

// save_area names the fields of a coroutine's saved bytes.
struct save_area {
    std::byte*& buffer;
    std::uint32_t& saved;
    std::uint32_t& capacity;
    std::uint32_t& max_saved;
    bool& external;
};

// compact_owner_of() is the compact record a shared stack's owner word names
// (tagged in bit 0: compact_owner()), or null when it names a fiber or nothing.
inline compact_record* compact_owner_of(const void* owner) noexcept {
    const auto w = reinterpret_cast<std::uintptr_t>(owner);
    return (w & 1) ? reinterpret_cast<compact_record*>(w & ~std::uintptr_t{1}) : nullptr;
}

// save_any_owner() saves the bytes of the coroutine whose frames are on s
// (either kind), if any. Requires: the caller holds s. Throws: bad_alloc
// (nothing changed).
void save_any_owner(shared_stack_slot& s);
// restore_bytes() copies `saved` bytes from `buffer` back to the top of s
// and returns the context they were saved at. Requires: the caller holds s.
void* restore_bytes(const std::byte* buffer, std::uint32_t saved, shared_stack_slot& s) noexcept;
// first_frame() lays out the first frame of a coroutine that never ran on
// s; returns its context. Requires: the caller holds s.
void* first_frame(shared_stack_slot& s, context::entry_fn entry) noexcept;

// describe_compact() is "compact coroutine 0x...".
[[nodiscard]] std::string describe_compact(const compact_record* r);
// compact_fatal() writes "weft: compact coroutine 0x... <what>" and aborts.
[[noreturn]] void compact_fatal(const compact_record* r, const char* what) noexcept;

}  // namespace weft::detail
