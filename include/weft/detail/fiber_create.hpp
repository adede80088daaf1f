// weft/detail/fiber_create.hpp: how a fiber record is laid out and created,
// for weft::fiber and the typed coroutine blocks (included by weft/fiber.hpp).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <type_traits>
#include <utility>

namespace weft::detail {

struct plain_fiber;

// is_plain_fiber says whether Block is a weft::fiber's (for messages).
template <class Block>
inline constexpr bool is_plain_fiber = std::is_base_of_v<plain_fiber, Block>;

// next_colour() steps through 0 .. cache_colours - 1 on each thread: the
// cache line offset of the next fiber's record (see create()).
[[nodiscard]] WEFT_API unsigned next_colour() noexcept;
// paint() fills [stack.base, limit) with the high-water pattern.
WEFT_API void paint(fiber_record* f, std::byte* limit) noexcept;
// high_water() is the number of bytes of f's stack ever used (from the
// stack's top), or 0 if the stack was not painted.
[[nodiscard]] WEFT_API std::size_t high_water(const fiber_record* f) noexcept;
// register_fiber() gives f its id and links it into the registry of live
// fibers (a shard of the creating thread; src/fiber/registry.cpp), and
// unregister_fiber() unlinks it (from any thread). O(1), one uncontended
// spinlock each; no switch reads or writes the registry.
WEFT_API void register_fiber(fiber_record* f) noexcept;
WEFT_API void unregister_fiber(fiber_record* f) noexcept;
// stack_too_small() throws coroutine_error (stack_too_small) for a fiber
// named `name` that asked for `requested` bytes of stack, which needed
// `needed` (shared: asked a shared_stack_pool whose stacks have `needed`).
[[noreturn]] WEFT_API void stack_too_small(std::string_view name, std::size_t requested, std::size_t needed,
                                           bool shared = false, bool fiber = false);
// copy_allocate() returns a heap block of at least `bytes` bytes aligned to
// `align`, and in *usable how many bytes it really has. Throws: bad_alloc.
[[nodiscard]] WEFT_API void* copy_allocate(std::size_t bytes, std::size_t align, std::size_t* usable);
// copy_created() finishes a copy-stack fiber's creation: stack assignment,
// the creator's FP control state, tool registration, counting.
WEFT_API void copy_created(fiber_record* f, copy_state* cs, shared_stack_pool& pool, std::byte* buffer,
                           std::size_t capacity) noexcept;
// copy_released() undoes copy_created() and frees an external buffer; the
// caller then destroys the block and frees its memory.
WEFT_API void copy_released(fiber_record* f) noexcept;

inline std::byte* align_down(std::byte* p, std::size_t a) noexcept {
    return reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(p) & ~(std::uintptr_t(a) - 1));
}

// check_extension() rejects an extension alignment weft cannot give.
inline void check_extension(const fiber_options& opts) {
    if (opts.extension_align == 0 || opts.extension_align > 64 || (opts.extension_align & (opts.extension_align - 1)))
        throw std::invalid_argument("weft: fiber_options::extension_align must be a power of two <= 64");
    if (opts.extension_size > UINT32_MAX || opts.private_data_size > UINT32_MAX)
        throw std::invalid_argument("weft: fiber_options::extension_size and private_data_size must be under 4 GiB");
}

// create() allocates a stack and places, from its top (less the colour)
// down: the name, the typed block (record, body, allocator), the extension,
// the private data area; the first context frame goes below them.
//
// Colouring: stacks from mmap and from pools all start on a page boundary,
// so without an offset every record would sit at the same offset in its page
// and compete for the same few cache sets. The offset is a per-thread
// counter rather than a hash of the stack's address: consecutive fibers,
// which are the ones used together, get distinct lines for certain, and a
// pooled stack reused LIFO does not carry its colour over.
template <class Block, class Alloc, class F>
Block* create(Alloc alloc, F&& fn, const fiber_options& opts) {
    // Everything placed above the first frame must leave room for a frame.
    constexpr std::size_t min_room = 1024;
    check_extension(opts);
    const std::size_t wanted = opts.stack_size ? opts.stack_size : default_stack_size;
    stack_view s = alloc.allocate(wanted);
    auto* top = static_cast<std::byte*>(s.top());
    auto* base = static_cast<std::byte*>(s.base);
    // The record starts on a cache line (record_align): its hot fields are
    // its first two lines (fiber_record).
    constexpr std::size_t record_align = alignof(Block) > 64 ? alignof(Block) : 64;
    std::size_t fixed = opts.name.size() + 1 + sizeof(Block) + record_align + 16 + opts.extension_align;
    if (__builtin_add_overflow(fixed, opts.private_data_size, &fixed) ||
        __builtin_add_overflow(fixed, opts.extension_size, &fixed) || fixed > s.size || s.size - fixed < min_room) {
        alloc.deallocate(s);
        stack_too_small(opts.name, wanted, fixed + min_room, false, is_plain_fiber<Block>);
    }
    if (opts.cache_colouring) {
        std::size_t colour = std::size_t{next_colour()} * 64;
        // At most a sixteenth of the room left for frames, so that colouring
        // never makes a tight stack overflow.
        const std::size_t spare = ((s.size - fixed) / 16) & ~std::size_t{63};
        top -= colour < spare ? colour : spare;
    }
    std::byte* p = top - (opts.name.size() + 1);
    char* name = reinterpret_cast<char*>(p);
    if (!opts.name.empty()) std::memcpy(name, opts.name.data(), opts.name.size());
    name[opts.name.size()] = '\0';
    p = align_down(p - sizeof(Block), record_align);
    const stack_view view = s;
    Block* b;
    try {
        b = ::new (static_cast<void*>(p)) Block(std::forward<F>(fn), std::move(alloc));
    } catch (...) {
        alloc.deallocate(s);  // Block's allocator member was not constructed yet
        throw;
    }
    std::byte* ext = align_down(p - opts.extension_size, opts.extension_align);
    std::byte* pd = align_down(ext - opts.private_data_size, 16);
    if (opts.private_data_size) std::memset(pd, 0, opts.private_data_size);
    b->name = std::string_view(name, opts.name.size());
    b->private_data = pd;
    b->private_size = static_cast<std::uint32_t>(opts.private_data_size);
    b->extension = opts.extension_size ? ext : nullptr;
    b->extension_size = static_cast<std::uint32_t>(opts.extension_size);
    b->stack = view;
    b->requested_stack = wanted;
    fp_created(b, opts.fp_env);
    if constexpr (requires { Alloc::guard_word(view); }) {
        b->guard_word = Alloc::guard_word(view);
        b->guard_value = Alloc::guard_value;
    }
    if (opts.paint_stack) paint(b, pd);
    sanitizer::on_create(b->tools(), view.base, view.size);
    b->ctx = context::make(pd, static_cast<std::size_t>(pd - base), b->start);
    live_coroutines.add(1);
    register_fiber(b);
    return b;
}

// create_split() makes a fiber whose typed block and wait arena are in a
// heap block (its task's fiber room), and whose stack holds frames alone: a runtime task
// whose stack may be shrunk (docs/runtime.md, "Idle tasks give their stack
// back"), since other threads touch the record while the task is parked
// (the registry's links, debuggers) and its stack pages may then be gone.
// No extension or private data (a task has none); no colouring (the record
// is not on the stack). Block is a split_block.
//
// `room`: where the block goes, at least sizeof(Block) bytes at malloc's
// alignment, owned by the caller (the task's fiber room, SCHED-R1 in
// src/runtime/runtime.cpp), which outlives the fiber; opts.name lies in the
// task's block and is not copied. The block's release leaves the room to
// its owner.
template <class Block, class Alloc, class F>
Block* create_split(Alloc alloc, F&& fn, const fiber_options& opts, void* room) {
    static_assert(alignof(Block) <= alignof(std::max_align_t), "create_split() places the block at malloc's alignment");
    constexpr std::size_t min_room = 1024;
    const std::size_t wanted = opts.stack_size ? opts.stack_size : default_stack_size;
    stack_view s = alloc.allocate(wanted);
    if (s.size < min_room) {
        alloc.deallocate(s);
        stack_too_small(opts.name, wanted, min_room, false, false);
    }
    auto* top = align_down(static_cast<std::byte*>(s.top()), 16);
    auto* base = static_cast<std::byte*>(s.base);
    Block* b;
    try {
        b = ::new (room) Block(std::forward<F>(fn), std::move(alloc));
    } catch (...) {
        alloc.deallocate(s);
        throw;
    }
    b->name = opts.name;
    b->stack = s;
    b->requested_stack = wanted;
    b->arena = &b->room;
    fp_created(b, opts.fp_env);
    if constexpr (requires { Alloc::guard_word(s); }) {
        b->guard_word = Alloc::guard_word(s);
        b->guard_value = Alloc::guard_value;
    }
    if (opts.paint_stack) paint(b, top);
    sanitizer::on_create(b->tools(), s.base, s.size);
    b->ctx = context::make(top, static_cast<std::size_t>(top - base), b->start);
    live_coroutines.add(1);
    register_fiber(b);
    return b;
}

// create_copy() makes a copy-stack fiber: one heap block holds the typed
// block, the name, the extension, the private data and the first save
// buffer, sized by the pool's save_hint() and rounded up to what the
// allocator really handed out. Nothing touches the shared stack until the
// first resume.
template <class Block, class F>
Block* create_copy(shared_stack where, F&& fn, const fiber_options& opts) {
    check_extension(opts);
    // The pool fixes the stack size; asking for more than it has would
    // silently get less.
    if (opts.stack_size > where.pool().stack_size())
        stack_too_small(opts.name, opts.stack_size, where.pool().stack_size(), true, is_plain_fiber<Block>);
    std::size_t size = sizeof(Block) + opts.name.size() + 1;
    size = (size + 63) & ~std::size_t{63};
    const std::size_t ext_offset = size;
    std::size_t hint = where.pool().save_hint();
    if (__builtin_add_overflow(size, opts.extension_size, &size)) throw std::bad_alloc();
    size = (size + 15) & ~std::size_t{15};
    const std::size_t pd_offset = size;
    if (__builtin_add_overflow(size, opts.private_data_size, &size) || __builtin_add_overflow(size, hint, &size))
        throw std::bad_alloc();
    const std::size_t buffer_offset = size - hint;
    std::size_t usable = 0;
    const std::size_t align = alignof(Block) > 64 ? alignof(Block) : 64;
    auto* mem = static_cast<std::byte*>(copy_allocate(size, opts.extension_size ? align : alignof(Block), &usable));
    Block* b;
    try {
        b = ::new (static_cast<void*>(mem)) Block(std::forward<F>(fn));
    } catch (...) {
        std::free(mem);
        throw;
    }
    char* name = reinterpret_cast<char*>(mem + sizeof(Block));
    if (!opts.name.empty()) std::memcpy(name, opts.name.data(), opts.name.size());
    name[opts.name.size()] = '\0';
    b->name = std::string_view(name, opts.name.size());
    b->extension = opts.extension_size ? mem + ext_offset : nullptr;
    b->extension_size = static_cast<std::uint32_t>(opts.extension_size);
    b->private_data = mem + pd_offset;
    b->private_size = static_cast<std::uint32_t>(opts.private_data_size);
    if (opts.private_data_size) std::memset(b->private_data, 0, opts.private_data_size);
    fp_created(b, opts.fp_env);
    copy_created(b, &b->cs, where.pool(), mem + buffer_offset, usable - buffer_offset);
    return b;
}

// own_block and copy_block add the body (and the allocator) to a record
// type Base: a stack of its own, or copy-stack mode. Base provides
// static run<Self>(fiber_record*), which calls the body.
template <class Base, class F, class Alloc>
struct own_block final : Base {
    F fn;
    Alloc alloc;

    template <class G>
    own_block(G&& g, Alloc&& a) : fn(std::forward<G>(g)), alloc(std::move(a)) {
        this->start = &entry_for<own_block>;
        this->release = &release_block;
    }
    static void run(fiber_record* f) { Base::template run<own_block>(f); }
    static void release_block(fiber_record* f) noexcept {
        auto* self = static_cast<own_block*>(f);
        Alloc a(std::move(self->alloc));
        stack_view s = self->stack;
        self->~own_block();
        a.deallocate(s);
    }
};

// split_block is own_block for create_split(): the block, which also holds
// the wait arena, lies in a fiber room that its task owns and gives back.
template <class Base, class F, class Alloc>
struct split_block final : Base {
    F fn;
    Alloc alloc;
    wait_arena room;

    template <class G>
    split_block(G&& g, Alloc&& a) : fn(std::forward<G>(g)), alloc(std::move(a)) {
        this->start = &entry_for<split_block>;
        this->release = &release_block;
    }
    static void run(fiber_record* f) { Base::template run<split_block>(f); }
    static void release_block(fiber_record* f) noexcept {
        auto* self = static_cast<split_block*>(f);
        Alloc a(std::move(self->alloc));
        stack_view s = self->stack;
        self->~split_block();
        a.deallocate(s);
    }
};

template <class Base, class F>
struct copy_block final : Base {
    copy_state cs;
    F fn;

    template <class G>
    explicit copy_block(G&& g) : fn(std::forward<G>(g)) {
        this->start = &entry_for<copy_block>;
        this->release = &release_block;
    }
    static void run(fiber_record* f) { Base::template run<copy_block>(f); }
    static void release_block(fiber_record* f) noexcept {
        auto* self = static_cast<copy_block*>(f);
        copy_released(f);
        self->~copy_block();
        std::free(static_cast<void*>(self));
    }
};

// make_block() creates the typed block on Base for its kind of stack.
template <class Base, class Alloc, class F>
fiber_record* make_block(Alloc&& alloc, F&& fn, const fiber_options& opts) {
    using A = std::remove_cvref_t<Alloc>;
    using Fn = std::decay_t<F>;
    if constexpr (std::same_as<A, shared_stack>)
        return create_copy<copy_block<Base, Fn>>(alloc, std::forward<F>(fn), opts);
    else
        return create<own_block<Base, Fn, A>>(std::move(alloc), std::forward<F>(fn), opts);
}

// plain_fiber is the record of a weft::fiber: the body takes no arguments.
struct plain_fiber : fiber_record {
    template <class Self>
    static void run(fiber_record* f) {
        std::invoke(static_cast<Self*>(f)->fn);
    }
};

}  // namespace weft::detail
