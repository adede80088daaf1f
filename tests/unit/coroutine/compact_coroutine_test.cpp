// compact_coroutine_test.cpp: weft::compact_coroutine (weft/compact_coroutine.hpp):
// values (copied from lvalues, moved from rvalues), interleaving on one shared stack with deep
// locals intact, sharing a pool with weft::coroutine's copy-stack mode, the
// body's exception, destruction by forced unwind (and what a body may catch),
// exception state per coroutine, misuse errors, migration and racing resumes.
// (Its aborts are tested in tests/death/death_test.cpp.)

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/coroutine_checks.hpp"
#include "support/leak_check.hpp"
#include "weft/compact_coroutine.hpp"
#include "weft/coroutine.hpp"
#include "weft/fiber.hpp"
#include "weft/shared_stack.hpp"

namespace {

class compact_test : public weft::test::leak_checked {};

using weft::compact_coroutine;

bool mentions(const std::string& message, const char* part) { return message.find(part) != std::string::npos; }

template <class F>
std::string error_of(F&& f, weft::coroutine_errc expected) {
    try {
        f();
    } catch (const weft::coroutine_error& e) {
        EXPECT_EQ(e.code(), expected) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "no coroutine_error";
    return {};
}

TEST_F(compact_test, yields_values_in_order_then_ends) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 2});
    compact_coroutine<int> co(weft::shared_stack(pool), [](auto& y) {
        for (int i = 0; i < 3; ++i) y.yield(i * 10);
    });
    EXPECT_EQ(co.state(), weft::fiber_state::created);
    std::vector<int> got;
    while (auto v = co.resume()) {
        EXPECT_EQ(co.state(), weft::fiber_state::suspended);
        got.push_back(*v);
    }
    EXPECT_EQ(got, (std::vector<int>{0, 10, 20}));
    EXPECT_TRUE(co.done());
    EXPECT_EQ(pool.live(), 1);
    co.reset();
    EXPECT_EQ(pool.live(), 0);
    EXPECT_FALSE(co);
}

TEST_F(compact_test, void_coroutine_reports_yield_and_end) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 1});
    int steps = 0;
    compact_coroutine<> co(weft::shared_stack(pool), [&](auto& y) {
        ++steps;
        y.yield();
        ++steps;
    });
    EXPECT_EQ(steps, 0);  // nothing runs before the first resume
    EXPECT_TRUE(co.resume());
    EXPECT_EQ(steps, 1);
    EXPECT_FALSE(co.resume());
    EXPECT_EQ(steps, 2);
    EXPECT_TRUE(co.done());
}

TEST_F(compact_test, an_lvalue_is_copied_and_an_rvalue_moved) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 1});
    std::string kept_after;
    compact_coroutine<std::string> co(weft::shared_stack(pool), [&](auto& y) {
        std::string s(100, 'x');
        y.yield(s);  // copied: s stays
        kept_after = s;
        y.yield(std::string(50, 'y'));
        y.yield("literal");  // converted to a std::string temporary
    });
    EXPECT_EQ(*co.resume(), std::string(100, 'x'));
    EXPECT_EQ(*co.resume(), std::string(50, 'y'));
    EXPECT_EQ(kept_after, std::string(100, 'x'));
    EXPECT_EQ(*co.resume(), "literal");
    EXPECT_FALSE(co.resume().has_value());
}

TEST_F(compact_test, move_only_values) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 1});
    compact_coroutine<std::unique_ptr<int>> co(weft::shared_stack(pool), [](auto& y) {
        for (int i = 1; i <= 3; ++i) y.yield(std::make_unique<int>(i));
    });
    int sum = 0;
    while (auto v = co.resume()) sum += **v;
    EXPECT_EQ(sum, 6);
}

// deep() recurses `depth` frames, each with a local array filled with a
// pattern unique to (id, level), yields at the bottom and checks every
// frame's array on the way back up. Returns the number of damaged frames.
template <class Y>
[[gnu::noinline]] int deep(Y& y, int id, int level, int depth) {
    std::array<std::uint32_t, 32> local;
    for (std::size_t i = 0; i < local.size(); ++i)
        local[i] = static_cast<std::uint32_t>(id * 1000003 + level * 1009 + static_cast<int>(i));
    asm volatile("" ::"r"(local.data()) : "memory");
    int damaged = 0;
    if (level + 1 < depth) {
        damaged = deep(y, id, level + 1, depth);
    } else {
        y.yield(id);
        y.yield(id + 1);
    }
    asm volatile("" ::"r"(local.data()) : "memory");
    for (std::size_t i = 0; i < local.size(); ++i)
        if (local[i] != static_cast<std::uint32_t>(id * 1000003 + level * 1009 + static_cast<int>(i))) return damaged + 1;
    return damaged;
}

TEST_F(compact_test, many_coroutines_on_one_stack_interleave_with_deep_locals_intact) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 1});
    constexpr int n = 20;
    std::vector<int> damaged(n, -1);
    std::vector<compact_coroutine<int>> cos;
    for (int i = 0; i < n; ++i)
        cos.emplace_back(weft::shared_stack(pool), [&damaged, i](auto& y) { damaged[i] = deep(y, i, 0, 1 + i % 7); });
    for (int round = 0; round < 2; ++round)
        for (int i = 0; i < n; ++i) EXPECT_EQ(*cos[i].resume(), i + round);
    for (int i = 0; i < n; ++i) {
        EXPECT_FALSE(cos[i].resume().has_value());
        EXPECT_EQ(damaged[i], 0) << "coroutine " << i;
        EXPECT_GT(cos[i].copy_stats().max_saved, 32 * sizeof(std::uint32_t)) << "its locals were saved";
    }
}

TEST_F(compact_test, shares_a_pool_with_copy_stack_coroutines) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 1});
    int damaged_c = -1, damaged_f = -1;
    compact_coroutine<int> c(weft::shared_stack(pool), [&](auto& y) { damaged_c = deep(y, 7, 0, 5); });
    weft::coroutine<int> f(std::allocator_arg, weft::shared_stack(pool),
                           [&](weft::yielder<int>& y) { damaged_f = deep(y, 9, 0, 6); });
    EXPECT_EQ(*c.resume(), 7);
    EXPECT_EQ(*f.resume(), 9);  // evicts c (a compact owner)
    EXPECT_EQ(*c.resume(), 8);  // evicts f (a fiber owner)
    EXPECT_EQ(*f.resume(), 10);
    EXPECT_FALSE(c.resume().has_value());
    EXPECT_FALSE(f.resume().has_value());
    EXPECT_EQ(damaged_c, 0);
    EXPECT_EQ(damaged_f, 0);
}

TEST_F(compact_test, the_body_exception_is_rethrown_by_resume_and_it_is_done) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 1});
    compact_coroutine<int> co(weft::shared_stack(pool), [](auto& y) {
        y.yield(1);
        throw std::runtime_error("boom");
    });
    EXPECT_EQ(*co.resume(), 1);
    EXPECT_EQ(weft::test::what_thrown<std::runtime_error>([&] { (void)co.resume(); }), "boom");
    EXPECT_TRUE(co.done());
    const std::string m = error_of([&] { (void)co.resume(); }, weft::coroutine_errc::resume_done);
    EXPECT_TRUE(mentions(m, "compact coroutine")) << m;
    EXPECT_TRUE(mentions(m, "done")) << m;
    // The stack is free again: another coroutine of the pool runs.
    compact_coroutine<int> next(weft::shared_stack(pool), [](auto& y) { y.yield(5); });
    EXPECT_EQ(*next.resume(), 5);
}

struct counted {
    int* count;
    explicit counted(int* c) : count(c) {}
    counted(counted&& o) noexcept : count(std::exchange(o.count, nullptr)) {}
    ~counted() {
        if (count) ++*count;
    }
};

TEST_F(compact_test, destroying_a_suspended_coroutine_runs_its_destructors) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 1});
    int locals = 0, bodies = 0;
    bool after = false;
    {
        compact_coroutine<int> co(weft::shared_stack(pool), [&, c = counted(&bodies)](auto& y) {
            counted a(&locals);
            {
                counted b(&locals);
                y.yield(1);
                after = true;
            }
        });
        EXPECT_EQ(*co.resume(), 1);
        // Another coroutine takes the stack over, so destruction must restore it first.
        compact_coroutine<int> other(weft::shared_stack(pool), [](auto& y) { y.yield(2); });
        EXPECT_EQ(*other.resume(), 2);
        EXPECT_EQ(locals, 0);
    }
    EXPECT_EQ(locals, 2);
    EXPECT_EQ(bodies, 1);
    EXPECT_FALSE(after);
    EXPECT_EQ(pool.live(), 0);
}

TEST_F(compact_test, destroying_a_coroutine_that_never_ran_runs_nothing) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 1});
    int bodies = 0;
    bool ran = false;
    {
        compact_coroutine<> co(weft::shared_stack(pool), [&, c = counted(&bodies)](auto&) { ran = true; });
    }
    EXPECT_FALSE(ran);
    EXPECT_EQ(bodies, 1);
}

TEST_F(compact_test, a_catch_all_that_rethrows_lets_the_unwind_pass) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 1});
    int caught = 0, locals = 0;
    {
        compact_coroutine<> co(weft::shared_stack(pool), [&](auto& y) {
            counted a(&locals);
            try {
                y.yield();
            } catch (...) {
                ++caught;
                throw;
            }
        });
        EXPECT_TRUE(co.resume());
    }
    EXPECT_EQ(caught, 1);
    EXPECT_EQ(locals, 1);
}

// The glibc-style handler (docs/safety.md, Cancellation; the attribute is
// explained at coroutine_unwind_test.cpp's yield_catching_by_type()).
__attribute__((no_sanitize("undefined"))) void yield_catching_by_type(compact_coroutine<>::yielder& y, bool& caught) {
    try {
        y.yield();
    } catch (const weft::forced_unwind&) {
        caught = true;
        throw;
    }
}

struct uncaught_probe {
    int* seen;
    ~uncaught_probe() { *seen = std::uncaught_exceptions(); }
};

TEST_F(compact_test, destruction_is_a_forced_unwind_that_typed_handlers_do_not_see) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 1});
    bool by_type = false, by_std = false;
    int uncaught = -1;
    {
        compact_coroutine<> co(weft::shared_stack(pool), [&](auto& y) {
            try {
                yield_catching_by_type(y, by_type);
            } catch (const std::exception&) {
                by_std = true;
            }
        });
        EXPECT_TRUE(co.resume());
        // (A probe above a rethrow would count 1: libsupc++'s `throw;`
        // counts the exception again and a foreign one is never uncounted.
        // Its coroutine's exception state dies with it.)
        compact_coroutine<> probed(weft::shared_stack(pool), [&](auto& y) {
            uncaught_probe probe{&uncaught};
            y.yield();
        });
        EXPECT_TRUE(probed.resume());
    }
    EXPECT_TRUE(by_type);
    EXPECT_FALSE(by_std);
    EXPECT_EQ(uncaught, 0);
}

TEST_F(compact_test, each_coroutine_keeps_its_own_exception_state) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 1});
    bool inside_saw_none = false, inside_kept_its_own = false;
    compact_coroutine<> co(weft::shared_stack(pool), [&](auto& y) {
        inside_saw_none = std::current_exception() == nullptr && std::uncaught_exceptions() == 0;
        try {
            throw std::logic_error("inner");
        } catch (...) {
            y.yield();  // suspended inside a handler
            try {
                throw;
            } catch (const std::logic_error& e) {
                inside_kept_its_own = std::string(e.what()) == "inner";
            }
        }
    });
    try {
        throw std::runtime_error("outer");
    } catch (...) {
        EXPECT_TRUE(co.resume());
        // The resumer's handler is its own again.
        try {
            throw;
        } catch (const std::runtime_error& e) {
            EXPECT_STREQ(e.what(), "outer");
        }
    }
    EXPECT_EQ(std::current_exception(), nullptr);
    EXPECT_FALSE(co.resume());
    EXPECT_TRUE(inside_saw_none);
    EXPECT_TRUE(inside_kept_its_own);
    EXPECT_EQ(std::current_exception(), nullptr);
}

// A resume from a destructor that runs while an exception propagates: the
// body runs with none uncaught, and the resumer has its count back after
// each switch (a yield and the end).
struct resume_while_unwinding {
    compact_coroutine<>* co;
    int* seen;  // the resumer's count: before, after the yield, after the end
    ~resume_while_unwinding() {
        seen[0] = std::uncaught_exceptions();
        EXPECT_TRUE(co->resume());
        seen[1] = std::uncaught_exceptions();
        EXPECT_FALSE(co->resume());
        seen[2] = std::uncaught_exceptions();
    }
};

TEST_F(compact_test, the_uncaught_count_is_the_resumers_again_after_each_switch) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 1});
    int inside[2] = {-1, -1};
    int seen[3] = {-1, -1, -1};
    compact_coroutine<> co(weft::shared_stack(pool), [&](auto& y) {
        inside[0] = std::uncaught_exceptions();
        y.yield();
        inside[1] = std::uncaught_exceptions();
    });
    try {
        resume_while_unwinding r{&co, seen};
        throw std::runtime_error("propagating");
    } catch (const std::runtime_error&) {
    }
    EXPECT_EQ(seen[0], 1);
    EXPECT_EQ(seen[1], 1);
    EXPECT_EQ(seen[2], 1);
    EXPECT_EQ(inside[0], 0);
    EXPECT_EQ(inside[1], 0);
    EXPECT_EQ(std::uncaught_exceptions(), 0);
}

TEST_F(compact_test, no_fiber_is_current_inside_and_the_resumer_is_current_after) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 1});
    bool empty_inside = false;
    std::string suspend_inside;
    compact_coroutine<> co(weft::shared_stack(pool), [&](auto& y) {
        empty_inside = !weft::this_fiber::current();
        // The fiber that resumed it cannot be switched out from here.
        suspend_inside = error_of([] { weft::this_fiber::suspend(); }, weft::coroutine_errc::yield_outside);
        y.yield();
    });
    bool current_after = false;
    weft::fiber f([&] {
        EXPECT_TRUE(co.resume());
        current_after = weft::this_fiber::current() && weft::this_fiber::current().record() != nullptr;
        weft::this_fiber::suspend();  // still works: this fiber is current again
    });
    f.resume();
    EXPECT_TRUE(empty_inside);
    EXPECT_FALSE(suspend_inside.empty());
    EXPECT_TRUE(current_after);
    EXPECT_FALSE(f.done());
    f.resume();
    EXPECT_TRUE(f.done());
}

TEST_F(compact_test, misuse_is_reported) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 1});
    compact_coroutine<int> empty;
    error_of([&] { (void)empty.resume(); }, weft::coroutine_errc::empty_handle);

    // Resuming itself from inside.
    compact_coroutine<int>* self = nullptr;
    std::string inner;
    compact_coroutine<int> co(weft::shared_stack(pool), [&](auto& y) {
        inner = error_of([&] { (void)self->resume(); }, weft::coroutine_errc::resume_self);
        y.yield(1);
    });
    self = &co;
    EXPECT_EQ(*co.resume(), 1);
    EXPECT_TRUE(mentions(inner, "from inside itself")) << inner;

    // A coroutine of the same stack resumed from inside a running one.
    compact_coroutine<int> sibling(weft::shared_stack(pool), [](auto& y) { y.yield(2); });
    std::string busy;
    compact_coroutine<int> outer(weft::shared_stack(pool), [&](auto& y) {
        busy = error_of([&] { (void)sibling.resume(); }, weft::coroutine_errc::shared_stack_busy);
        y.yield(3);
    });
    EXPECT_EQ(*outer.resume(), 3);
    EXPECT_TRUE(mentions(busy, "more stacks")) << busy;
    EXPECT_EQ(*sibling.resume(), 2);  // nothing was lost

    // A yielder used from outside its coroutine: from the resumer, and from
    // another coroutine (of another stack).
    weft::shared_stack_pool pool2({.stack_size = 64 * 1024, .stacks = 1});
    compact_coroutine<int>::yielder* leaked = nullptr;
    compact_coroutine<int> holder(weft::shared_stack(pool), [&](auto& y) {
        leaked = &y;
        y.yield(4);
        y.yield(5);
    });
    EXPECT_EQ(*holder.resume(), 4);
    const std::string m = error_of([&] { leaked->yield(0); }, weft::coroutine_errc::yield_outside);
    EXPECT_TRUE(mentions(m, "compact coroutine")) << m;
    std::string from_other;
    compact_coroutine<int> other(weft::shared_stack(pool2), [&](auto& y) {
        from_other = error_of([&] { leaked->yield(0); }, weft::coroutine_errc::yield_outside);
        y.yield(6);
    });
    EXPECT_EQ(*other.resume(), 6);
    EXPECT_FALSE(from_other.empty());
    EXPECT_EQ(*holder.resume(), 5);  // still intact
}

TEST_F(compact_test, nested_coroutines_on_distinct_stacks) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 2});
    compact_coroutine<int> inner(weft::shared_stack(pool), [](auto& y) {
        for (int i = 0; i < 3; ++i) y.yield(i);
    });
    compact_coroutine<int> outer(weft::shared_stack(pool), [&](auto& y) {
        while (auto v = inner.resume()) y.yield(*v * 2);
    });
    std::vector<int> got;
    while (auto v = outer.resume()) got.push_back(*v);
    EXPECT_EQ(got, (std::vector<int>{0, 2, 4}));
}

TEST_F(compact_test, migrates_between_threads) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 2});
    int damaged = -1;
    compact_coroutine<int> co(weft::shared_stack(pool), [&](auto& y) { damaged = deep(y, 3, 0, 4); });
    EXPECT_EQ(*co.resume(), 3);
    std::thread([&] { EXPECT_EQ(*co.resume(), 4); }).join();
    std::thread([&] { EXPECT_FALSE(co.resume().has_value()); }).join();
    EXPECT_EQ(damaged, 0);
}

// Threads race to resume the same coroutines: each resume either runs one
// step or is refused (resume_running: that coroutine runs on another
// thread; shared_stack_busy: another coroutine of its stack does), and no
// step is lost or run twice. Bounded in count; the CTest timeout guards it.
TEST_F(compact_test, racing_resumes_run_each_step_exactly_once) {
    constexpr int threads = 4, coroutines = 8, steps = 5000;
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 3});
    std::vector<std::atomic<int>> ran(coroutines);
    std::vector<compact_coroutine<int>> cos;
    for (int i = 0; i < coroutines; ++i)
        cos.emplace_back(weft::shared_stack(pool), [&ran, i](auto& y) {
            for (int k = 0; k < steps; ++k) {
                ran[i].fetch_add(1, std::memory_order_relaxed);
                y.yield(k);
            }
        });
    std::atomic<long> yields{0}, refused{0}, other{0};
    std::atomic<bool> stop{false};
    std::atomic<int> ready{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
        ts.emplace_back([&, t] {
            unsigned x = 12345u + t;
            // All start together, or the first could finish alone.
            ready.fetch_add(1);
            while (ready.load() < threads) std::this_thread::yield();
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
            while (!stop.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < deadline) {
                x = x * 1103515245u + 12345u;
                auto& co = cos[(x >> 8) % coroutines];
                try {
                    if (co.resume()) yields.fetch_add(1, std::memory_order_relaxed);
                } catch (const weft::coroutine_error& e) {
                    if (e.code() == weft::coroutine_errc::shared_stack_busy ||
                        e.code() == weft::coroutine_errc::resume_running)
                        refused.fetch_add(1, std::memory_order_relaxed);
                    else if (e.code() != weft::coroutine_errc::resume_done)
                        other.fetch_add(1, std::memory_order_relaxed);
                }
                if (yields.load(std::memory_order_relaxed) >= long{coroutines} * steps) stop = true;
            }
        });
    for (auto& t : ts) t.join();
    EXPECT_EQ(yields.load(), long{coroutines} * steps);
    EXPECT_EQ(other.load(), 0);
    // (How often the threads met depends on the machine's load; the test
    // below makes them meet for certain.)
    RecordProperty("refused", std::to_string(refused.load()));
    for (int i = 0; i < coroutines; ++i) EXPECT_EQ(ran[i].load(), steps) << "coroutine " << i;
}

// wait_for() spins until pred() holds, for at most 60 s.
template <class P>
bool wait_for(P pred) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!pred()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::yield();
    }
    return true;
}

TEST_F(compact_test, a_resume_while_it_runs_on_another_thread_is_refused_and_loses_nothing) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 1});
    std::atomic<int> phase{0};
    compact_coroutine<int> a(weft::shared_stack(pool), [&](auto& y) {
        phase.store(1);
        ASSERT_TRUE(wait_for([&] { return phase.load() == 2; }));
        y.yield(1);
        y.yield(2);
    });
    compact_coroutine<int> b(weft::shared_stack(pool), [](auto& y) { y.yield(3); });
    std::optional<int> first;
    std::thread t([&] { first = a.resume(); });
    ASSERT_TRUE(wait_for([&] { return phase.load() == 1; }));
    // a runs on t, on the pool's only stack.
    const std::string running = error_of([&] { (void)a.resume(); }, weft::coroutine_errc::resume_running);
    EXPECT_TRUE(mentions(running, "another thread")) << running;
    const std::string busy = error_of([&] { (void)b.resume(); }, weft::coroutine_errc::shared_stack_busy);
    EXPECT_TRUE(mentions(busy, "another thread")) << busy;
    EXPECT_EQ(b.state(), weft::fiber_state::created);
    phase.store(2);
    t.join();
    EXPECT_EQ(first, 1);
    EXPECT_EQ(*b.resume(), 3);
    EXPECT_EQ(*a.resume(), 2);
}

TEST_F(compact_test, a_save_without_memory_throws_bad_alloc_and_loses_nothing) {
    weft::shared_stack_pool pool({.stack_size = 2 * 1024 * 1024, .stacks = 1});
    bool intact = false;
    compact_coroutine<> big(weft::shared_stack(pool), [&](auto& y) { intact = weft::test::big_frame_survives(y); });
    int other_ran = 0;
    compact_coroutine<> other(weft::shared_stack(pool), [&](auto& y) {
        ++other_ran;
        y.yield();
    });
    weft::test::takeover_without_memory_loses_nothing(big, other, other_ran, intact, /*counts_saves=*/false);
}

TEST_F(compact_test, the_control_block_is_small) {
    // The point of the type: 80 bytes of control (sanitizer builds add their
    // per-coroutine state).
    if (!weft::detail::with_tools) {
        EXPECT_LE(compact_coroutine<int>::control_size, 80u);
    }
}

}  // namespace
