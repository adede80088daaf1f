// debug.hpp: what the runtime tells debuggers about its tasks (debug.cpp,
// docs/debugging.md). Internal to the runtime layer.
#pragma once

namespace weft::detail {

struct task_record;

// note_task_fiber() marks t's fiber, just made, as t's (the fiber registry's
// owner field), so a debugger listing fibers can show the task's id, state
// and worker. Defined next to the task layout table it goes with, so that a
// static link that runs tasks always keeps that table.
void note_task_fiber(task_record* t) noexcept;

}  // namespace weft::detail
