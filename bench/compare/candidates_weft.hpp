// candidates_weft.hpp: weft's candidates for the peer report, one per stack
// mode, plus the raw L0 context switch (the level of Boost.Context's
// jump_fcontext). Every candidate has the same shape (see report_main.cpp):
//   explicit C(const bench::config&)   untimed setup (pools, handle arrays)
//   create(i)   allocate stack and control block, construct; body not run
//   enter(i)    the first resume: runs the body to its first yield
//   resume(i)   one resume + yield round trip (two switches)
//   destroy(i)  destroy the suspended coroutine (weft unwinds its stack)
//   end_round() untimed cleanup after a round of destroy()s
#pragma once

#include <memory>
#include <vector>

#include "harness.hpp"
#include "weft/context.hpp"
#include "weft/coroutine.hpp"
#include "weft/pooled_stack.hpp"
#include "weft/stack.hpp"

#if __has_include("weft/shared_stack.hpp")
#include "weft/shared_stack.hpp"
#define WEFT_BENCH_HAVE_COPY_STACK 1
#else
#define WEFT_BENCH_HAVE_COPY_STACK 0
#endif

namespace bench::weft_side {

// body is every weft coroutine's body: own state, Live bytes kept live
// across each yield.
template <std::size_t Live>
struct body {
    void operator()(weft::yielder<>& y) const {
        work_loop<Live>([&y] { y.yield(); });
    }
};

// coroutines is the common part: a vector of weft::coroutine<> handles and
// the operations that do not depend on the stack allocator.
class coroutines {
public:
    explicit coroutines(const config& c) : stack_size_(c.stack_size) { cos_.reserve(c.count); }
    void enter(std::size_t i) { (void)cos_[i].resume(); }
    void resume(std::size_t i) { (void)cos_[i].resume(); }
    void destroy(std::size_t i) { cos_[i].reset(); }
    void end_round() { cos_.clear(); }

protected:
    std::size_t stack_size_;
    std::vector<weft::coroutine<>> cos_;
};

// weft::coroutine on a fresh weft::mmap_stack each (the default allocator).
template <std::size_t Live>
class mmap : public coroutines {
public:
    using coroutines::coroutines;
    void create(std::size_t) {
        cos_.emplace_back(std::allocator_arg, weft::mmap_stack{}, body<Live>{},
                          weft::coroutine_options{.stack_size = stack_size_});
    }
};

// weft::coroutine on weft::pooled_stack: the first round maps new stacks,
// later rounds reuse them from the calling thread's cache. Colour: the
// control block's cache colouring (coroutine_options::cache_colouring).
template <std::size_t Live, bool Colour>
class pooled_impl : public coroutines {
public:
    explicit pooled_impl(const config& c)
        : coroutines(c),
          pool_(std::make_unique<weft::stack_pool>(weft::stack_pool_options{
              .stack_size = c.stack_size,
              .max_cached_per_thread = std::min<std::size_t>(c.count, 65536)})) {}
    ~pooled_impl() { cos_.clear(); }  // before the pool goes
    void create(std::size_t) {
        cos_.emplace_back(std::allocator_arg, weft::pooled_stack(*pool_), body<Live>{},
                          weft::coroutine_options{.stack_size = stack_size_, .cache_colouring = Colour});
    }

private:
    std::unique_ptr<weft::stack_pool> pool_;
};
template <std::size_t Live>
using pooled = pooled_impl<Live, true>;
template <std::size_t Live>
using pooled_nocolour = pooled_impl<Live, false>;

#if WEFT_BENCH_HAVE_COPY_STACK
// copy-stack mode: coroutines share shared_stack_pool's stacks and save
// their live bytes to a private buffer when another coroutine takes their
// stack over.
inline constexpr std::size_t copy_stacks = 4;

template <std::size_t Live>
class copy : public coroutines {
public:
    explicit copy(const config& c)
        : coroutines(c), pool_({.stack_size = c.stack_size, .stacks = copy_stacks}) {}
    ~copy() { cos_.clear(); }  // before the pool goes
    void create(std::size_t) {
        cos_.emplace_back(std::allocator_arg, weft::shared_stack(pool_), body<Live>{},
                          weft::coroutine_options{.stack_size = stack_size_});
    }
    // max_saved() is the most bytes any coroutine saved at a switch.
    std::size_t max_saved() const {
        std::size_t m = 0;
        for (auto& co : cos_)
            if (co) m = std::max<std::size_t>(m, co.copy_stats().max_saved);
        return m;
    }

private:
    weft::shared_stack_pool pool_;
};
#endif

// The raw L0 switch: weft::context::make/jump on a weft::mmap_stack, the
// same level as jump_fcontext. destroy() frees the stack without unwinding.
// Fast: both sides switch with the inline context::fast_jump instead of the
// out-of-line assembly jump.
template <std::size_t Live, bool Fast>
class context_impl {
public:
    explicit context_impl(const config& c) : stack_size_(c.stack_size) { slots_.reserve(c.count); }
    void create(std::size_t) {
        weft::stack_view s = alloc_.allocate(stack_size_);
        slots_.push_back({weft::context::make(s.top(), s.size, &entry), s});
    }
    void enter(std::size_t i) { resume(i); }
    void resume(std::size_t i) { slots_[i].ctx = jump(slots_[i].ctx); }
    void destroy(std::size_t i) { alloc_.deallocate(slots_[i].stack); }
    void end_round() { slots_.clear(); }
    ~context_impl() {
        // Rounds end with destroy(); nothing is left unless a round failed.
    }

private:
    static void* jump(void* to) {
        if constexpr (Fast)
            return weft::context::fast_jump(to, nullptr).from;
        else
            return weft::context::jump(to, nullptr).from;
    }
    static void entry(weft::context::transfer t) noexcept {
        work_loop<Live>([&t] { t.from = jump(t.from); });
    }
    struct slot {
        void* ctx;
        weft::stack_view stack;
    };
    std::size_t stack_size_;
    weft::mmap_stack alloc_;
    std::vector<slot> slots_;
};

template <std::size_t Live>
using context = context_impl<Live, false>;
template <std::size_t Live>
using fast_context = context_impl<Live, true>;

}  // namespace bench::weft_side
