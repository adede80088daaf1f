// registry.cpp: the registry of live fibers, for debuggers (docs/debugging.md).
//
// Why sharded lists: creation and destruction must stay O(1) and scale with
// threads, and no switch may pay anything. Each thread picks one of
// `shard_count` shards the first time it creates a fiber (round robin) and
// links its fibers there under that shard's spinlock; the record remembers
// its shard, so the unlink (perhaps on another thread, after the fiber
// migrated) takes the right lock. With up to shard_count creating threads
// the locks are never contended.
//
// Why a fixed layout behind C symbols: gdb reads the registry without
// calling into the process (a core file has no process) and without weft's
// DWARF types (a program built without debug info). weft_debug_registry is
// the shard array; weft_debug_layout tells a debugger every offset it needs.
// Both are extern "C" and kept by [[gnu::used]], so they exist in -g0 and
// stripped-of-debug-info builds (not in a fully stripped one: the symbol
// table is what the debugger looks them up in).

#include "weft/fiber.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "weft/detail/context_frame.hpp"
#include "weft/detail/intrusive_list.hpp"

#include "internal.hpp"

namespace weft::detail {

inline constexpr std::uint32_t shard_count = 64;

// shard is one list of live fibers. Layout read by debuggers: see
// weft_debug_layout (the head at shard_head: a list's head is at its
// address; the stride sizeof(shard)).
struct alignas(64) shard {
    std::atomic<std::uint32_t> lock{0};
    std::uint32_t pad = 0;
    intrusive_list<fiber_record, list_links<fiber_record, &fiber_record::reg_prev, &fiber_record::reg_next>, false>
        fibers;
    std::uint64_t count = 0;
};

namespace {

static_assert(std::is_standard_layout_v<shard>);
static_assert(std::is_standard_layout_v<fiber_record>, "the layout table uses offsetof(fiber_record, ...)");

// The ids: each thread takes a block of `id_block` ids from the global
// counter at a time, so creating a fiber does not touch a shared cache line.
constexpr std::uint64_t id_block = 1024;
std::atomic<std::uint64_t> next_id_block{1};
std::atomic<std::uint32_t> next_shard{0};

// Per thread: the shard (plus one; 0: not chosen yet) and the id block. No
// switch happens inside register_fiber(), so the thread-local addresses are
// not held across one (docs/platform-facts.md, thread-local addresses).
thread_local std::uint32_t my_shard = 0;
thread_local std::uint64_t my_next_id = 0;
thread_local std::uint64_t my_id_end = 0;

inline void relax() noexcept {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#else
    asm volatile("yield");
#endif
}

void lock(shard& s) noexcept {
    while (s.lock.exchange(1, std::memory_order_acquire)) {
        while (s.lock.load(std::memory_order_relaxed)) relax();
    }
}
void unlock(shard& s) noexcept { s.lock.store(0, std::memory_order_release); }

}  // namespace

}  // namespace weft::detail

// The shard array and the layout table. Names and layout are an interface
// to tools/gdb/weft_gdb.py (and any other debugger script): change them only
// together with it, and bump the version in weft_debug_layout.
extern "C" {
[[gnu::used]] WEFT_API weft::detail::shard weft_debug_registry[weft::detail::shard_count];
}

namespace weft::detail {
namespace {
// string_view's two members: the data pointer's offset inside it.
#if defined(_LIBCPP_VERSION)
constexpr std::uint64_t sv_data = 0, sv_size = 8;
#else
constexpr std::uint64_t sv_data = 8, sv_size = 0;  // libstdc++: {_M_len, _M_str}
#endif
constexpr std::uint64_t arch_code =
#if defined(__x86_64__)
    1;
#else
    2;
#endif
}  // namespace
}  // namespace weft::detail

// weft_debug_layout[i], every entry 8 bytes (the index is the interface):
//    0  magic 0x5745465444424731 ("WEFTDBG1" read as a big-endian number)
//    1  version of this table (2)
//    2  number of entries in this table
//    3  shard count           4  shard stride (bytes)   5  shard: head offset
//    6  fiber: id             7  fiber: reg_next        8  fiber: name data pointer
//    9  fiber: name length   10  fiber: state (1 byte: created 0, running 1,
//                                suspended 2, done 3)
//   11  fiber: flavour (1 byte: fiber 0, coroutine 1, coroutine_plain 2)
//   12  fiber: ctx (the saved stack pointer of a suspended fiber)
//   13  fiber: stack base    14  fiber: stack size     15  fiber: painted (1 byte)
//   16  fiber: copy (copy_state*, null unless copy-stack)
//   17  fiber: owner (task_record*, null unless a task's fiber)
//   18  architecture (1 x86-64, 2 AArch64)
//   19  switch frame size (context + this = sp at the resume point)
//   20  switch gap (bytes between that and the suspended function's sp)
//   21  frame: saved frame pointer offset (rbp / x29)
//   22  frame: resume address offset (return address / x30)
//   23  paint byte of painted stacks
//   24  fiber: requested stack size
//   25  fiber: arena (wait_arena*, null unless a runtime task's fiber that
//       may be shrunk)      26  arena: saved (the heap block of a shrunk
//       task, null when not shrunk; it holds the range [ctx, stack top)
//       as tagged 8-byte words, zeros left out and most kept as a low half
//       with one of two bases: SHRINK-Z1, src/runtime/shrink.cpp, which
//       describes the format)
// Version 2: entries 27 and 28 (the saved range) are gone; it is derived.
extern "C" {
[[gnu::used]] WEFT_API extern const std::uint64_t weft_debug_layout[] = {
    0x5745465444424731ull,
    2,
    27,
    weft::detail::shard_count,
    sizeof(weft::detail::shard),
    offsetof(weft::detail::shard, fibers),
    offsetof(weft::detail::fiber_record, id),
    offsetof(weft::detail::fiber_record, reg_next),
    offsetof(weft::detail::fiber_record, name) + weft::detail::sv_data,
    offsetof(weft::detail::fiber_record, name) + weft::detail::sv_size,
    offsetof(weft::detail::fiber_record, state),
    offsetof(weft::detail::fiber_record, flavour),
    offsetof(weft::detail::fiber_record, ctx),
    offsetof(weft::detail::fiber_record, stack) + offsetof(weft::stack_view, base),
    offsetof(weft::detail::fiber_record, stack) + offsetof(weft::stack_view, size),
    offsetof(weft::detail::fiber_record, painted),
    offsetof(weft::detail::fiber_record, copy),
    offsetof(weft::detail::fiber_record, owner),
    weft::detail::arch_code,
    weft::context::frame::size,
    weft::detail::switch_gap,
    weft::context::frame::frame_pointer,
    weft::context::frame::resume_address,
    weft::detail::paint_byte,
    offsetof(weft::detail::fiber_record, requested_stack),
    offsetof(weft::detail::fiber_record, arena),
    offsetof(weft::detail::wait_arena, saved),
};
}

namespace weft::detail {

static_assert(sizeof(std::string_view) == 16 && sizeof(std::atomic<fiber_state>) == 1 && sizeof(fiber_flavour) == 1);
static_assert(sizeof(weft_debug_layout) / sizeof(weft_debug_layout[0]) == 27);

void register_fiber(fiber_record* f) noexcept {
    std::uint32_t sh = my_shard;
    if (!sh) [[unlikely]] {
        sh = next_shard.fetch_add(1, std::memory_order_relaxed) % shard_count + 1;
        my_shard = sh;
    }
    if (my_next_id == my_id_end) [[unlikely]] {
        my_next_id = next_id_block.fetch_add(id_block, std::memory_order_relaxed);
        my_id_end = my_next_id + id_block;
    }
    f->id = my_next_id++;
    f->reg_shard = sh - 1;
    shard& s = weft_debug_registry[sh - 1];
    lock(s);
    s.fibers.push_front(f);
    ++s.count;
    unlock(s);
}

void unregister_fiber(fiber_record* f) noexcept {
    shard& s = weft_debug_registry[f->reg_shard];
    lock(s);
    s.fibers.remove(f);
    --s.count;
    unlock(s);
}

}  // namespace weft::detail
