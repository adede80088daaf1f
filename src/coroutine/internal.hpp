// internal.hpp: what the coroutine layer's sources share with each other and
// not with users (nothing here is installed or exported).
#pragma once

namespace weft::detail {

struct fiber_record;

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

}  // namespace weft::detail
