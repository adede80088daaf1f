// weft/shared_stack.hpp: layer L1, shared stacks for copy-stack coroutines.
//
//   weft::shared_stack_pool pool({.stack_size = 256 * 1024, .stacks = 4});
//   weft::coroutine<int> co(std::allocator_arg, weft::shared_stack(pool), body, {.name = "x"});
//   weft::copy_stack_stats s = co.copy_stats();
//
// A shared_stack_pool owns N stacks (mmap'd, each with a guard page below
// it). A coroutine created with a shared_stack handle is assigned to one of
// them for its whole life and runs there at full speed; its fiber (the
// record the layer above keeps per coroutine: body, name, result, private
// data) lives in one small heap block instead (libaco's copy-stack model
// with libco's pool of stacks). When another coroutine assigned to the same
// stack is resumed, the live bytes of the one whose frames are on the stack
// (from its suspended stack pointer to the top) are copied into its heap
// buffer, and the newcomer's saved bytes are copied back to the same
// addresses. A suspended copy-stack coroutine thus costs its live stack
// bytes plus its fiber record, not a whole stack.
//
// The price: a pointer into a suspended copy-stack coroutine's stack is only
// valid while that coroutine's bytes are on the shared stack, i.e. until
// another coroutine of the same stack runs. docs/safety.md, Copy stacks,
// lists the rules and the debug check (weft::check_shared_stack_pointer).
//
// Threads. A shared stack runs one coroutine at a time. Resuming a
// coroutine whose stack is in use by a coroutine running on the calling
// thread (the resumer itself, or a coroutine further up its chain of
// resumers) throws coroutine_error(shared_stack_busy): its frames would be
// overwritten. When the stack is in use on another thread, resume() throws
// the same error and fiber::try_resume() returns an empty fiber_ref, without
// waiting: a scheduler tries again later (only destruction waits). A
// suspended coroutine may be resumed on any thread (migration).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "weft/config.hpp"
#include "weft/stack.hpp"

namespace weft {

class shared_stack_pool;

// shared_stack_pool_options configure a shared_stack_pool.
struct shared_stack_pool_options {
    // stack_size is the usable size of each shared stack, rounded up to
    // whole pages. Every coroutine of the pool may use all of it.
    std::size_t stack_size = 256 * 1024;
    // stacks is the number of shared stacks (>= 1). Coroutines that run
    // nested (one resumes another) need distinct stacks.
    std::size_t stacks = 4;
    // guard_pages inaccessible pages lie below each stack (>= 1).
    std::size_t guard_pages = 1;
};

// copy_stack_stats describe the copying of one copy-stack coroutine. All
// zero for a coroutine that does not run on a shared stack.
struct copy_stack_stats {
    std::size_t last_saved = 0;  // bytes copied off the shared stack at the last save
    std::size_t max_saved = 0;   // the most bytes saved at once
    std::uint64_t saves = 0;     // times its bytes were copied off the shared stack
    std::uint64_t restores = 0;  // times its bytes were copied back
};

namespace detail {

// shared_stack_slot is one stack of a pool and who uses it.
struct shared_stack_slot {
    stack_view stack;
    // holder is the thread token (see thread_token()) of the thread that
    // runs a coroutine on this stack right now, or null. Taking the stack
    // is a compare-exchange from null (acquire); giving it back a release
    // store, so the stack's bytes and `owner` pass between threads in order.
    std::atomic<const void*> holder{nullptr};
    // owner is the fiber whose frames are on the stack (an opaque pointer
    // owned by the layer above; this layer never dereferences it), or null.
    // Read and written only by the holder.
    void* owner = nullptr;
    shared_stack_pool* pool = nullptr;
    std::uint32_t index = 0;
    unsigned valgrind_id = 0;  // the stack's valgrind registration (WEFT_VALGRIND builds)
};

// thread_token() identifies the calling thread (the address of one of its
// thread-locals). Out of line and behind an asm barrier: a coroutine may
// have migrated since the caller last computed it.
[[nodiscard, gnu::noinline]] WEFT_API const void* thread_token() noexcept;

// find_shared_slot() is the shared stack of any live pool whose usable range
// contains p, or null. Takes a process-wide lock; for diagnostics.
[[nodiscard]] WEFT_API shared_stack_slot* find_shared_slot(const void* p) noexcept;

// shared_pools_exist() says whether any shared_stack_pool is alive.
[[nodiscard]] WEFT_API bool shared_pools_exist() noexcept;

// shared_pool_links names a pool's links in the registry of live pools (an
// intrusive_list, src/stack/shared_stack.cpp).
struct shared_pool_links;

}  // namespace detail

// shared_stack_pool owns the shared stacks; see the top of this file. Every
// member is thread-safe.
class WEFT_API shared_stack_pool {
public:
    using options = shared_stack_pool_options;

    // shared_stack_pool() maps the stacks (one mapping, a guard below each
    // stack). Throws: std::invalid_argument naming a bad option (zero
    // stack_size, stacks or guard_pages, sizes that overflow or exceed
    // 4 GiB per stack); stack_error when the system refuses the mapping.
    shared_stack_pool() : shared_stack_pool(options{}) {}
    explicit shared_stack_pool(const options& opts);
    // ~shared_stack_pool() unmaps the stacks. Requires: no coroutine
    // assigned to the pool is alive (one that is prints their number and
    // aborts).
    ~shared_stack_pool();
    shared_stack_pool(const shared_stack_pool&) = delete;
    shared_stack_pool& operator=(const shared_stack_pool&) = delete;

    // global() is the process-wide pool with default options, used by a
    // default-constructed shared_stack. Created on first use; never destroyed.
    [[nodiscard]] static shared_stack_pool& global();

    // stack_size() is the usable size of each stack (page-rounded).
    [[nodiscard]] std::size_t stack_size() const noexcept { return stack_size_; }
    // stacks() is the number of stacks.
    [[nodiscard]] std::size_t stacks() const noexcept { return count_; }
    // stack(i) is the usable range of stack i. Requires: i < stacks().
    [[nodiscard]] stack_view stack(std::size_t i) const noexcept { return slots_[i].stack; }
    // live() is the number of coroutines assigned to the pool and not yet
    // destroyed.
    [[nodiscard]] std::int64_t live() const noexcept { return live_.load(std::memory_order_relaxed); }

    // assign() picks the stack for a new coroutine: round-robin over the
    // stacks, skipping those on which the calling thread runs a coroutine
    // right now (so a coroutine that creates and drives a child gets the
    // child a different stack), and counts the coroutine as live.
    [[nodiscard]] detail::shared_stack_slot& assign() noexcept;
    // unassign() is called when a coroutine assigned to the pool is gone.
    void unassign() noexcept { live_.fetch_sub(1, std::memory_order_relaxed); }

    // save_hint() is the size of the most recent first save of a coroutine
    // of this pool: new coroutines reserve that much save buffer in their
    // fiber's allocation (made by the layer above), so that coroutines alike
    // need one heap block each and no slack. note_first_save() updates it.
    [[nodiscard]] std::size_t save_hint() const noexcept { return save_hint_.load(std::memory_order_relaxed); }
    void note_first_save(std::size_t bytes) noexcept { save_hint_.store(bytes, std::memory_order_relaxed); }

    // slot_of() is the stack whose usable range contains p, or null.
    [[nodiscard]] detail::shared_stack_slot* slot_of(const void* p) noexcept;

private:
    friend WEFT_API detail::shared_stack_slot* detail::find_shared_slot(const void*) noexcept;
    friend struct detail::shared_pool_links;

    detail::shared_stack_slot* slots_ = nullptr;
    std::size_t count_ = 0;
    std::size_t stack_size_ = 0;
    std::size_t guard_size_ = 0;
    void* mapping_ = nullptr;
    std::size_t mapping_size_ = 0;
    std::atomic<std::size_t> next_{0};
    std::atomic<std::int64_t> live_{0};
    std::atomic<std::size_t> save_hint_{0};
    shared_stack_pool* prev_ = nullptr;  // the registry of live pools (find_shared_slot)
    shared_stack_pool* next_pool_ = nullptr;
};

// shared_stack selects copy-stack mode for a coroutine: pass it where a
// stack allocator goes (coroutine(std::allocator_arg, shared_stack(pool),
// body, options)). It is one pointer; the pool must outlive every coroutine
// created with it. It is not a stack_allocator: the coroutine layer treats
// it specially.
class shared_stack {
public:
    // shared_stack() uses shared_stack_pool::global().
    shared_stack() : pool_(&shared_stack_pool::global()) {}
    explicit shared_stack(shared_stack_pool& pool) noexcept : pool_(&pool) {}
    // pool() is the pool the coroutine's stack comes from.
    [[nodiscard]] shared_stack_pool& pool() const noexcept { return *pool_; }

private:
    shared_stack_pool* pool_;
};

}  // namespace weft
