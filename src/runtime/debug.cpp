// debug.cpp: the task half of the debugger interface (docs/debugging.md):
// a fiber that runs a task points to its task_record (fiber_record::owner),
// and weft_debug_task_layout tells a debugger where a task record keeps its
// id, state and last worker. Same rules as weft_debug_layout
// (src/fiber/registry.cpp): extern "C", kept in builds without debug
// info, the index is the interface.

#include "debug.hpp"

#include <cstddef>
#include <cstdint>

#include "weft/task.hpp"

// weft_debug_task_layout[i], every entry 8 bytes:
//   0  magic 0x5745465454534b31 ("WEFTTSK1")
//   1  version (1)             2  number of entries
//   3  task: id (8 bytes)      4  task: state (1 byte, weft::task_state:
//                                 created 0, ready 1, running 2, waiting 3,
//                                 done 4, failed 5, canceled 6, timed_out 7)
//   5  task: worker (4-byte int, -1: none yet)
extern "C" {
[[gnu::used]] WEFT_API extern const std::uint64_t weft_debug_task_layout[] = {
    0x5745465454534b31ull,
    1,
    6,
    offsetof(weft::detail::task_record, id),
    offsetof(weft::detail::task_record, state),
    offsetof(weft::detail::task_record, worker),
};
}

namespace weft::detail {

static_assert(sizeof(task_record::state) == 1 && sizeof(task_record::worker) == 4);
static_assert(static_cast<int>(task_state::timed_out) == 7, "weft_debug_task_layout lists the states");

void note_task_fiber(task_record* t) noexcept { t->fiber->owner = t; }

}  // namespace weft::detail
