// internal.hpp: what the coroutine layer's sources share with each other and
// not with users (nothing here is installed or exported).
#pragma once

namespace weft::detail {

struct control_block;

// current_for_signal() is the coroutine running on the calling thread, or
// nullptr. Unlike current_slot() it never prepares the thread and does
// nothing but read a thread-local pointer, so a signal handler may call it.
// The value is only meaningful on the thread that was interrupted: the
// handler must not have switched stacks or threads since.
[[nodiscard]] control_block* current_for_signal() noexcept;

// fatal() writes "weft: coroutine 'name' <what>" to stderr without
// allocating and aborts: for errors where nothing can be thrown.
[[noreturn]] void fatal(const control_block* cb, const char* what) noexcept;

// enter_shared_to_destroy() is enter_shared() for destruction, which cannot
// throw: a busy stack or a failed save aborts with a message instead.
void enter_shared_to_destroy(control_block* cb) noexcept;

}  // namespace weft::detail
