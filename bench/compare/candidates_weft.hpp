// candidates_weft.hpp: weft's candidates for the peer report, one per stack
// mode, the type-erased weft::fiber (resume + suspend, and a ring handing
// over with switch_to), plus the raw L0 context switch (the level of
// Boost.Context's jump_fcontext). Every candidate has the same shape (see
// report_main.cpp):
//   explicit C(const bench::config&)   untimed setup (pools, handle arrays)
//   create(i)   allocate stack and control block, construct; body not run
//   enter(i)    the first resume: runs the body to its first yield
//   resume(i)   one resume + yield round trip (two switches)
//   destroy(i)  destroy the suspended coroutine (weft unwinds its stack)
//   end_round() untimed cleanup after a round of destroy()s
// and, for the spawn-to-finish lifecycle (optional: the raw context rows
// have none):
//   spawn(i)    create(i) with the run-to-completion body (run_once():
//               touches its state once and returns, no yield)
//   finish(i)   the first resume, which runs that body to completion, and
//               the release of the stack (back to its pool)
// The switch_to ring has ring(k) instead of resume(i): k transfers of
// control around the ring, one switch each (see fiber_ring).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "harness.hpp"
#include "weft/context.hpp"
#include "weft/coroutine.hpp"
#include "weft/fiber.hpp"
#include "weft/pooled_stack.hpp"
#include "weft/stack.hpp"

#if __has_include("weft/shared_stack.hpp")
#include "weft/shared_stack.hpp"
#define WEFT_BENCH_HAVE_COPY_STACK 1
#else
#define WEFT_BENCH_HAVE_COPY_STACK 0
#endif
#if __has_include("weft/compact_coroutine.hpp")
#include "weft/compact_coroutine.hpp"
#define WEFT_BENCH_HAVE_COMPACT 1
#else
#define WEFT_BENCH_HAVE_COMPACT 0
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

// once is the spawn-to-finish body: it returns at once (harness.hpp).
template <std::size_t Live>
struct once {
    void operator()(weft::yielder<>&) const { run_once<Live>(); }
};

// coroutines is the common part: a vector of weft::coroutine<> handles and
// the operations that do not depend on the stack allocator.
class coroutines {
public:
    explicit coroutines(const config& c) : stack_size_(c.stack_size) { cos_.reserve(c.count); }
    void enter(std::size_t i) { (void)cos_[i].resume(); }
    void resume(std::size_t i) { (void)cos_[i].resume(); }
    void destroy(std::size_t i) { cos_[i].reset(); }
    // finish(): the body returns, so resume() returns false and the
    // coroutine is done; reset() then gives its stack back.
    void finish(std::size_t i) {
        (void)cos_[i].resume();
        cos_[i].reset();
    }
    void end_round() { cos_.clear(); }

protected:
    std::size_t stack_size_;
    std::vector<weft::coroutine<>> cos_;
};

// fp_env() is the FP mode of a candidate's coroutines: the default
// (shared), or own when the candidate's name ends in -ownfp.
constexpr weft::fp_env_mode fp_env(bool own) { return own ? weft::fp_env_mode::own : weft::fp_env_mode::shared; }

// weft::coroutine on a fresh weft::mmap_stack each (the default allocator).
template <std::size_t Live, bool OwnFp = false>
class mmap_impl : public coroutines {
public:
    using coroutines::coroutines;
    void create(std::size_t) { make(body<Live>{}); }
    void spawn(std::size_t) { make(once<Live>{}); }

private:
    template <class B>
    void make(B b) {
        cos_.emplace_back(std::allocator_arg, weft::mmap_stack{}, b,
                          weft::coroutine_options{.stack_size = stack_size_, .fp_env = fp_env(OwnFp)});
    }
};
template <std::size_t Live>
using mmap = mmap_impl<Live>;
template <std::size_t Live>
using mmap_ownfp = mmap_impl<Live, true>;

// weft::coroutine as a program that names no allocator writes it
// (coroutine(body, options)): stack_pool::global(), the process-wide pool
// with default options (default_stack_size stacks, a small per-thread
// cache). A larger stack_size than the pool's (S2's 2 MB) gets a stack of
// its own, mapped and unmapped each time. Lifecycle only (report.py).
template <std::size_t Live>
class pooled_default : public coroutines {
public:
    using coroutines::coroutines;
    void create(std::size_t) { cos_.emplace_back(body<Live>{}, weft::coroutine_options{.stack_size = stack_size_}); }
    void spawn(std::size_t) { cos_.emplace_back(once<Live>{}, weft::coroutine_options{.stack_size = stack_size_}); }
};

// weft::coroutine on weft::pooled_stack: the first round maps new stacks,
// later rounds reuse them from the calling thread's cache. Colour: the
// control block's cache colouring (coroutine_options::cache_colouring).
template <std::size_t Live, bool Colour, bool OwnFp = false>
class pooled_impl : public coroutines {
public:
    explicit pooled_impl(const config& c)
        : coroutines(c),
          pool_(std::make_unique<weft::stack_pool>(weft::stack_pool_options{
              .stack_size = c.stack_size,
              .max_cached_per_thread = std::min<std::size_t>(c.count, 65536)})) {}
    ~pooled_impl() { cos_.clear(); }  // before the pool goes
    void create(std::size_t) { make(body<Live>{}); }
    void spawn(std::size_t) { make(once<Live>{}); }

private:
    template <class B>
    void make(B b) {
        cos_.emplace_back(std::allocator_arg, weft::pooled_stack(*pool_), b,
                          weft::coroutine_options{
                              .stack_size = stack_size_, .cache_colouring = Colour, .fp_env = fp_env(OwnFp)});
    }

    std::unique_ptr<weft::stack_pool> pool_;
};
template <std::size_t Live>
using pooled = pooled_impl<Live, true>;
template <std::size_t Live>
using pooled_nocolour = pooled_impl<Live, false>;
template <std::size_t Live>
using pooled_ownfp = pooled_impl<Live, true, true>;

// fiber_pool is a stack_pool sized for a scenario, shared by the fiber
// candidates: the first round maps new stacks, later rounds reuse them.
inline std::unique_ptr<weft::stack_pool> fiber_pool(const config& c, std::size_t count) {
    return std::make_unique<weft::stack_pool>(weft::stack_pool_options{
        .stack_size = c.stack_size, .max_cached_per_thread = std::min<std::size_t>(count, 65536)});
}

// weft::fiber, the type-erased core under coroutine<>, on weft::pooled_stack:
// resume() + this_fiber::suspend() round trips, as weft-pooled does with a
// coroutine (same pool, same cache colouring, same work between switches).
template <std::size_t Live>
struct fiber_body {
    void operator()() const {
        work_loop<Live>([] { weft::this_fiber::suspend(); });
    }
};

template <std::size_t Live>
struct fiber_once {
    void operator()() const { run_once<Live>(); }
};

template <std::size_t Live>
class fiber_resume {
public:
    explicit fiber_resume(const config& c) : stack_size_(c.stack_size), pool_(fiber_pool(c, c.count)) {
        fs_.reserve(c.count);
    }
    ~fiber_resume() { fs_.clear(); }  // before the pool goes
    void create(std::size_t) { make(fiber_body<Live>{}); }
    void spawn(std::size_t) { make(fiber_once<Live>{}); }
    void enter(std::size_t i) { (void)fs_[i].resume(); }
    void resume(std::size_t i) { (void)fs_[i].resume(); }
    void destroy(std::size_t i) { fs_[i].reset(); }
    // finish(): the body returns, the fiber is done (its stack is free);
    // reset() releases the handle.
    void finish(std::size_t i) {
        (void)fs_[i].resume();
        fs_[i].reset();
    }
    void end_round() { fs_.clear(); }

private:
    template <class B>
    void make(B b) {
        fs_.emplace_back(std::allocator_arg, weft::pooled_stack(*pool_), b, weft::fiber_options{.stack_size = stack_size_});
    }

    std::size_t stack_size_;
    std::unique_ptr<weft::stack_pool> pool_;
    std::vector<weft::fiber> fs_;
};

// fiber_ring: N weft::fibers (at least 2) on weft::pooled_stack in a ring,
// each handing over to the next with this_fiber::switch_to(): one switch
// per transfer, no driver in between. ring(k) resumes the fiber that
// stopped last; the ring runs until k transfers have been made (counting
// that resume), and the fiber holding control then suspends back to the
// driver (next inherits the resumer at every switch_to). So ring(k) is k+1
// switches: k - 1 switch_to()s plus the driver's resume and the final
// suspend. Before each hand-over a fiber touches its own state, as every
// candidate does before its yield. enter(i) runs fiber i to its first
// hand-over and suspends it there; destroy(i) unwinds it.
template <std::size_t Live>
class fiber_ring {
public:
    static constexpr std::size_t min_count = 2;  // a ring of one cannot switch_to

    explicit fiber_ring(const config& c)
        : stack_size_(c.stack_size), pool_(fiber_pool(c, std::max(c.count, min_count))) {
        fs_.reserve(std::max(c.count, min_count));
    }
    ~fiber_ring() { fs_.clear(); }  // before the pool goes
    void create(std::size_t i) {
        fs_.emplace_back(std::allocator_arg, weft::pooled_stack(*pool_), member{this, i},
                         weft::fiber_options{.stack_size = stack_size_});
    }
    void enter(std::size_t i) {
        remaining_ = 1;
        (void)fs_[i].resume();
    }
    void ring(std::uint64_t transfers) {
        remaining_ = transfers;
        (void)fs_[stopped_].resume();
    }
    void destroy(std::size_t i) { fs_[i].reset(); }
    void end_round() { fs_.clear(); }

private:
    struct member {
        fiber_ring* ring;
        std::size_t i;
        void operator()() const {
            fiber_ring* r = ring;
            const std::size_t self = i;
            work_loop<Live>([r, self] { r->hand_over(self); });
        }
    };
    void hand_over(std::size_t i) {
        if (--remaining_ == 0) {
            stopped_ = i;
            weft::this_fiber::suspend();
        } else {
            const std::size_t next = i + 1 == fs_.size() ? 0 : i + 1;
            weft::this_fiber::switch_to(fs_[next].ref());
        }
    }
    std::size_t stack_size_;
    std::unique_ptr<weft::stack_pool> pool_;
    std::vector<weft::fiber> fs_;
    std::uint64_t remaining_ = 0;
    std::size_t stopped_ = 0;
};

#if WEFT_BENCH_HAVE_COPY_STACK
// copy-stack mode: coroutines share shared_stack_pool's stacks and save
// their live bytes to a private buffer when another coroutine takes their
// stack over.
inline constexpr std::size_t copy_stacks = 4;

template <std::size_t Live, bool OwnFp = false>
class copy_impl : public coroutines {
public:
    explicit copy_impl(const config& c)
        : coroutines(c), pool_({.stack_size = c.stack_size, .stacks = copy_stacks}) {}
    ~copy_impl() { cos_.clear(); }  // before the pool goes
    void create(std::size_t) { make(body<Live>{}); }
    void spawn(std::size_t) { make(once<Live>{}); }
    // max_saved() is the most bytes any coroutine saved at a switch.
    std::size_t max_saved() const {
        std::size_t m = 0;
        for (auto& co : cos_)
            if (co) m = std::max<std::size_t>(m, co.copy_stats().max_saved);
        return m;
    }

private:
    template <class B>
    void make(B b) {
        cos_.emplace_back(std::allocator_arg, weft::shared_stack(pool_), b,
                          weft::coroutine_options{.stack_size = stack_size_, .fp_env = fp_env(OwnFp)});
    }
    weft::shared_stack_pool pool_;
};
template <std::size_t Live>
using copy = copy_impl<Live>;
template <std::size_t Live>
using copy_ownfp = copy_impl<Live, true>;
#endif

#if WEFT_BENCH_HAVE_COMPACT
// weft::compact_coroutine: copy-stack mode with the compact control block
// (weft/compact_coroutine.hpp), on the same 4 shared stacks as copy.
template <std::size_t Live>
class compact {
public:
    explicit compact(const config& c) : pool_({.stack_size = c.stack_size, .stacks = copy_stacks}) {
        cos_.reserve(c.count);
    }
    ~compact() { cos_.clear(); }  // before the pool goes
    void create(std::size_t) {
        cos_.emplace_back(weft::shared_stack(pool_), [](auto& y) { work_loop<Live>([&y] { y.yield(); }); });
    }
    void spawn(std::size_t) {
        cos_.emplace_back(weft::shared_stack(pool_), [](auto&) { run_once<Live>(); });
    }
    void enter(std::size_t i) { (void)cos_[i].resume(); }
    void resume(std::size_t i) { (void)cos_[i].resume(); }
    void destroy(std::size_t i) { cos_[i].reset(); }
    void finish(std::size_t i) {
        (void)cos_[i].resume();
        cos_[i].reset();
    }
    void end_round() { cos_.clear(); }
    std::size_t max_saved() const {
        std::size_t m = 0;
        for (auto& co : cos_)
            if (co) m = std::max<std::size_t>(m, co.copy_stats().max_saved);
        return m;
    }

private:
    weft::shared_stack_pool pool_;
    std::vector<weft::compact_coroutine<>> cos_;
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
