// shrink.hpp: layer L4's idle-stack shrinking, the component's interface
// inside the runtime (docs/runtime.md, "Idle tasks give their stack back";
// the source is shrink.cpp, its invariants SHRINK-P1 - SHRINK-P5, SHRINK-Z1
// and SHRINK-R1 there). What else belongs to it, kept where its protocol
// lives:
//   - a task's part of the record, task_shrink (include/weft/detail/task_record.hpp);
//   - the hold on a switched-out task, SHRINK-S1 - SHRINK-S4, in the arrival
//     word (task_record.hpp, src/task/task.cpp), which the wake shares;
//   - the wait arena and its pins, SHRINK-A1 - SHRINK-A2
//     (include/weft/detail/fiber_record.hpp), which every wait uses;
//   - the fiber rooms (SCHED-R1, runtime.cpp) and the calls from the
//     scheduler's loop (worker.cpp: restore before a run, sweep when idle).
// models/shrink.pml checks the hold with the wake and the foreign access.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "weft/detail/intrusive_list.hpp"
#include "weft/detail/task_record.hpp"

namespace weft::detail {

// install_shrink_fault() makes weft's fault handler restore a shrunk stack
// that other code touches (SHRINK-P2); false when this process cannot (then
// nothing is shrunk). shrink_faults() counts those restores, process-wide.
bool install_shrink_fault() noexcept;
std::uint64_t shrink_faults() noexcept;

// idle_link: a worker's FIFO of idle candidates runs through task_shrink::next.
struct idle_link {
    static task_record*& next(task_record& t) noexcept { return t.shrink.next; }
};

// worker_shrink is a worker's part (owner-only but sweep_asked):
//   fifo, count   its idle candidates (docs/runtime.md, "Finding idle
//                 tasks"); each entry holds a reference to its task
//   tick          loop iterations, to sweep every 64th (worker.cpp)
//   sweep_asked   runtime::shrink_idle() asked for a full sweep (any thread)
//   rooms, room_count  fiber rooms given back here (SCHED-R1, runtime.cpp):
//                 a singly linked list through each room's first word
struct worker_shrink {
    intrusive_fifo<task_record, idle_link> fifo;
    std::size_t count = 0;
    unsigned tick = 0;
    std::atomic<bool> sweep_asked{false};
    void* rooms = nullptr;
    std::size_t room_count = 0;
};

}  // namespace weft::detail
