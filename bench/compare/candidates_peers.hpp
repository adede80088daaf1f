// candidates_peers.hpp: the peers of the report, from Debian packages and
// the compiler: Boost.Context (jump_fcontext at the detail level, and
// boost::context::fiber with its protected and pooled stack allocators),
// glibc ucontext, and C++20 stackless coroutines. Same shape as the weft
// candidates (candidates_weft.hpp), same body: own 64-byte state touched
// between yields, Live bytes kept live across each yield; the same
// run-to-completion body (run_once()) for spawn(i) / finish(i).
#pragma once

#include <ucontext.h>

#include <boost/context/detail/fcontext.hpp>
#include <boost/context/fiber.hpp>
#include <boost/context/pooled_fixedsize_stack.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include "harness.hpp"

namespace bench::peers {

namespace bctx = boost::context;

// Boost.Context's lowest level: make_fcontext/jump_fcontext on a
// protected_fixedsize_stack (mmap + guard page, like weft::mmap_stack).
// destroy() frees the stack without unwinding.
template <std::size_t Live>
class fcontext {
public:
    explicit fcontext(const config& c) : alloc_(c.stack_size) { slots_.reserve(c.count); }
    void create(std::size_t) {
        bctx::stack_context sc = alloc_.allocate();
        slots_.push_back({bctx::detail::make_fcontext(sc.sp, sc.size, &entry), sc});
    }
    void enter(std::size_t i) { resume(i); }
    void resume(std::size_t i) { slots_[i].ctx = bctx::detail::jump_fcontext(slots_[i].ctx, nullptr).fctx; }
    void destroy(std::size_t i) { alloc_.deallocate(slots_[i].sc); }
    void end_round() { slots_.clear(); }

private:
    static void entry(bctx::detail::transfer_t t) {
        work_loop<Live>([&] { t = bctx::detail::jump_fcontext(t.fctx, nullptr); });
    }
    struct slot {
        bctx::detail::fcontext_t ctx;
        bctx::stack_context sc;
    };
    bctx::protected_fixedsize_stack alloc_;
    std::vector<slot> slots_;
};

// boost::context::fiber with a given stack allocator. Destroying a
// suspended fiber unwinds its stack, as weft does.
template <class Salloc, std::size_t Live>
class fiber {
public:
    explicit fiber(const config& c) : alloc_(c.stack_size) { fs_.reserve(c.count); }
    ~fiber() { fs_.clear(); }
    void create(std::size_t) {
        fs_.emplace_back(std::allocator_arg, alloc_, [](bctx::fiber&& caller) -> bctx::fiber {
            work_loop<Live>([&] { caller = std::move(caller).resume(); });
        });
    }
    // spawn(): returning the caller ends the fiber; its record and stack
    // are released on the way out (fiber_exit), before resume() returns.
    void spawn(std::size_t) {
        fs_.emplace_back(std::allocator_arg, alloc_, [](bctx::fiber&& caller) -> bctx::fiber {
            run_once<Live>();
            return std::move(caller);
        });
    }
    void enter(std::size_t i) { resume(i); }
    void resume(std::size_t i) { fs_[i] = std::move(fs_[i]).resume(); }
    void destroy(std::size_t i) { fs_[i] = bctx::fiber{}; }
    void finish(std::size_t i) { resume(i); }  // leaves an empty fiber: nothing left to release
    void end_round() { fs_.clear(); }

private:
    Salloc alloc_;
    std::vector<bctx::fiber> fs_;
};

template <std::size_t Live>
using fiber_protected = fiber<bctx::protected_fixedsize_stack, Live>;
template <std::size_t Live>
using fiber_pooled = fiber<bctx::pooled_fixedsize_stack, Live>;

// glibc makecontext/swapcontext on a protected_fixedsize_stack. Every
// swapcontext makes a sigprocmask system call.
template <std::size_t Live>
class ucontext {
public:
    explicit ucontext(const config& c)
        : alloc_(c.stack_size), slots_(std::make_unique<slot[]>(c.count)) {}
    void create(std::size_t i) {
        slot& s = slots_[i];
        s.sc = alloc_.allocate();
        s.ret = &main_;
        getcontext(&s.uc);
        s.uc.uc_stack.ss_sp = static_cast<char*>(s.sc.sp) - s.sc.size;
        s.uc.uc_stack.ss_size = s.sc.size;
        s.uc.uc_link = nullptr;
        const auto p = reinterpret_cast<std::uintptr_t>(&s);
        makecontext(&s.uc, reinterpret_cast<void (*)()>(&entry), 2, static_cast<unsigned>(p >> 32),
                    static_cast<unsigned>(p & 0xffffffffu));
    }
    void enter(std::size_t i) { resume(i); }
    void resume(std::size_t i) { swapcontext(&main_, &slots_[i].uc); }
    void destroy(std::size_t i) { alloc_.deallocate(slots_[i].sc); }
    void end_round() {}

private:
    struct slot {
        ucontext_t uc;
        ucontext_t* ret;
        bctx::stack_context sc;
    };
    static void entry(unsigned hi, unsigned lo) {
        slot* self = reinterpret_cast<slot*>((static_cast<std::uintptr_t>(hi) << 32) | lo);
        work_loop<Live>([self] { swapcontext(&self->uc, self->ret); });
    }
    bctx::protected_fixedsize_stack alloc_;
    std::unique_ptr<slot[]> slots_;  // never moves: a ucontext_t points into itself
    ucontext_t main_{};
};

// C++20 stackless coroutines: a minimal generator, one heap-allocated frame
// per coroutine (operator new), resumed through its handle.
struct generator {
    struct promise_type {
        generator get_return_object() noexcept {
            return generator{std::coroutine_handle<promise_type>::from_promise(*this)};
        }
        std::suspend_always initial_suspend() noexcept { return {}; }
        std::suspend_always final_suspend() noexcept { return {}; }
        std::suspend_always yield_value(int) noexcept { return {}; }
        void return_void() noexcept {}
        void unhandled_exception() noexcept { std::terminate(); }
    };
    std::coroutine_handle<promise_type> h;
};

template <std::size_t Live>
generator cpp20_body() {
    state s{};
    live<Live> pad;
    pad.fill();
    for (;;) {
        step<Live>(s);
        pad.keep();
        co_yield 0;
    }
}

// cpp20_once is the spawn-to-finish body: run_once() spelled out (the
// coroutine itself must hold the locals), no co_yield.
template <std::size_t Live>
generator cpp20_once() {
    state s{};
    live<Live> pad;
    pad.fill();
    step<Live>(s);
    pad.keep();
    co_return;
}

template <std::size_t Live>
class cpp20 {
public:
    explicit cpp20(const config& c) { hs_.reserve(c.count); }
    ~cpp20() {
        for (auto h : hs_)
            if (h) h.destroy();
    }
    void create(std::size_t) { hs_.push_back(cpp20_body<Live>().h); }
    void spawn(std::size_t) { hs_.push_back(cpp20_once<Live>().h); }
    void enter(std::size_t i) { hs_[i].resume(); }
    void resume(std::size_t i) { hs_[i].resume(); }
    void destroy(std::size_t i) {
        hs_[i].destroy();
        hs_[i] = nullptr;
    }
    // finish(): runs to final_suspend, then frees the frame.
    void finish(std::size_t i) {
        hs_[i].resume();
        destroy(i);
    }
    void end_round() { hs_.clear(); }

private:
    std::vector<std::coroutine_handle<generator::promise_type>> hs_;
};

}  // namespace bench::peers
