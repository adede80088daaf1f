// fiber_test.cpp: the fiber core (weft/fiber.hpp): resume, suspend,
// switch_to, unwind, the after-switch hook, the state machine under races,
// per-fiber C++ exception state, and the current fiber across migration.
// Built twice like the rest of the suite (own stacks, copy-stacks).

#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cfenv>
#include <chrono>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/leak_check.hpp"
#include "support/test_stack.hpp"
#include "weft/coroutine.hpp"
#include "weft/fiber.hpp"

namespace {

class fiber_core : public weft::test::leak_checked {};
class exception_state : public weft::test::leak_checked {};

long thread_id() noexcept { return ::syscall(SYS_gettid); }

// what_of() is what a fiber's body let escape, for failure messages.
std::string what_of(const std::exception_ptr& e) {
    if (!e) return "nothing";
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& x) {
        return x.what();
    } catch (...) {
        return "a non-std exception";
    }
}

template <class F>
weft::fiber make_fiber(F&& body, weft::fiber_options opts = {}) {
    return weft::fiber(std::allocator_arg, weft::test::stack(), std::forward<F>(body), opts);
}

template <class F>
weft::coroutine<> make_plain(F&& body, weft::coroutine_options opts = {}) {
    return weft::coroutine<>(std::allocator_arg, weft::test::stack(), std::forward<F>(body), opts);
}

// wait_for() spins until pred() holds or about ten seconds have passed (a
// watchdog: a broken hand-over fails the test instead of hanging it).
template <class P>
bool wait_for(P pred) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!pred()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::yield();
    }
    return true;
}

weft::coroutine_errc error_of(auto&& f) {
    try {
        f();
    } catch (const weft::coroutine_error& e) {
        return e.code();
    }
    return weft::coroutine_errc{};
}

// ------------------------------------------------------------ exception state

// Two coroutines each hold a caught exception across a yield; A leaves its
// catch block first. With one exception state per thread, A's exit would
// free B's exception (B's e.what() reads freed memory, caught by ASan) and
// B's `throw;` would rethrow A's.
TEST_F(exception_state, two_coroutines_yielding_in_catch_blocks_keep_their_own_exceptions) {
    std::string seen_a, rethrown_a, seen_b, rethrown_b;
    auto body = [](std::string name, std::string& seen, std::string& rethrown) {
        return [name, &seen, &rethrown](weft::yielder<>& y) {
            try {
                throw std::runtime_error(name);
            } catch (const std::exception& e) {
                y.yield();
                seen = e.what();
                try {
                    throw;
                } catch (const std::exception& again) {
                    rethrown = again.what();
                }
            }
        };
    };
    auto a = make_plain(body("exception of A", seen_a, rethrown_a), {.name = "A"});
    auto b = make_plain(body("exception of B", seen_b, rethrown_b), {.name = "B"});
    EXPECT_TRUE(a.resume());
    EXPECT_TRUE(b.resume());
    EXPECT_FALSE(a.resume());  // A leaves its catch block first
    EXPECT_FALSE(b.resume());
    EXPECT_EQ(seen_a, "exception of A");
    EXPECT_EQ(rethrown_a, "exception of A");
    EXPECT_EQ(seen_b, "exception of B");
    EXPECT_EQ(rethrown_b, "exception of B");
}

TEST_F(exception_state, a_coroutine_yielding_in_a_catch_block_rethrows_its_exception_on_another_thread) {
    std::string rethrown;
    bool had_current = false;
    auto co = make_plain(
        [&](weft::yielder<>& y) {
            try {
                throw std::runtime_error("travels");
            } catch (const std::exception&) {
                y.yield();
                had_current = std::current_exception() != nullptr;
                try {
                    throw;
                } catch (const std::exception& again) {
                    rethrown = again.what();
                }
            }
        },
        {.name = "traveller"});
    EXPECT_TRUE(co.resume());
    std::thread t([&] { EXPECT_FALSE(co.resume()); });
    t.join();
    EXPECT_TRUE(had_current);
    EXPECT_EQ(rethrown, "travels");
}

TEST_F(exception_state, the_resumer_does_not_see_a_suspended_coroutines_caught_exception) {
    auto co = make_plain([](weft::yielder<>& y) {
        try {
            throw std::runtime_error("inside");
        } catch (...) {
            y.yield();
        }
    });
    EXPECT_TRUE(co.resume());
    EXPECT_EQ(std::current_exception(), nullptr);
    EXPECT_EQ(std::uncaught_exceptions(), 0);
    EXPECT_FALSE(co.resume());
}

TEST_F(exception_state, the_resumer_does_not_see_an_unwinding_coroutines_uncaught_exception) {
    int inside_before = -1, inside_after = -1;
    std::string caught;
    auto co = make_plain([&](weft::yielder<>& y) {
        struct yields_in_destructor {
            weft::yielder<>& y;
            int& before;
            int& after;
            ~yields_in_destructor() {
                before = std::uncaught_exceptions();
                y.yield();
                after = std::uncaught_exceptions();
            }
        };
        try {
            yields_in_destructor d{y, inside_before, inside_after};
            throw std::runtime_error("unwinding");
        } catch (const std::exception& e) {
            caught = e.what();
        }
    });
    EXPECT_TRUE(co.resume());
    EXPECT_EQ(inside_before, 1);
    EXPECT_EQ(std::uncaught_exceptions(), 0);
    EXPECT_EQ(std::current_exception(), nullptr);
    EXPECT_FALSE(co.resume());
    EXPECT_EQ(inside_after, 1);
    EXPECT_EQ(caught, "unwinding");
}

TEST_F(exception_state, a_coroutine_resumed_from_a_catch_block_starts_clean_and_the_resumer_keeps_its_exception) {
    bool clean = false;
    auto co = make_plain([&](weft::yielder<>&) {
        clean = std::current_exception() == nullptr && std::uncaught_exceptions() == 0;
    });
    std::string after;
    try {
        throw std::logic_error("outer");
    } catch (const std::exception&) {
        EXPECT_FALSE(co.resume());
        try {
            throw;
        } catch (const std::exception& e) {
            after = e.what();
        }
    }
    EXPECT_TRUE(clean);
    EXPECT_EQ(after, "outer");
}

// ------------------------------------------------------------ fiber operations

TEST_F(fiber_core, resume_and_suspend_run_the_body_in_steps_and_current_is_right) {
    std::vector<int> log;
    weft::fiber_ref self;
    weft::fiber f = make_fiber(
        [&] {
            log.push_back(1);
            EXPECT_EQ(weft::this_fiber::current(), self);
            weft::this_fiber::suspend();
            log.push_back(2);
        },
        {.name = "steps"});
    self = f.ref();
    EXPECT_EQ(f.state(), weft::fiber_state::created);
    EXPECT_EQ(f.resume(), self);
    EXPECT_EQ(log, (std::vector<int>{1}));
    EXPECT_EQ(f.state(), weft::fiber_state::suspended);
    EXPECT_FALSE(weft::this_fiber::current());
    EXPECT_EQ(f.resume(), self);
    EXPECT_TRUE(f.done());
    EXPECT_EQ(log, (std::vector<int>{1, 2}));
    EXPECT_EQ(error_of([&] { f.resume(); }), weft::coroutine_errc::resume_done);
}

TEST_F(fiber_core, resume_never_rethrows_and_exception_keeps_what_the_body_let_escape) {
    weft::fiber f = make_fiber([] { throw std::runtime_error("kept"); });
    EXPECT_NO_THROW(f.resume());
    EXPECT_TRUE(f.done());
    ASSERT_TRUE(f.exception());
    try {
        std::rethrow_exception(f.exception());
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "kept");
    }
}

TEST_F(fiber_core, switch_to_chains_hand_over_and_the_last_one_goes_back_to_the_resumer) {
    std::vector<std::string> log;
    weft::fiber a, b, c;
    a = make_fiber(
        [&] {
            log.push_back("a1");
            weft::this_fiber::switch_to(b.ref());
            log.push_back("a2");
        },
        {.name = "a"});
    b = make_fiber(
        [&] {
            log.push_back("b1");
            weft::this_fiber::switch_to(c.ref());
            log.push_back("b2");
        },
        {.name = "b"});
    c = make_fiber(
        [&] {
            log.push_back("c1");
            weft::this_fiber::suspend();
            log.push_back("c2");
        },
        {.name = "c"});
    // a hands over to b, b to c; c suspends to a's resumer: here.
    EXPECT_EQ(a.resume(), c.ref());
    EXPECT_EQ(log, (std::vector<std::string>{"a1", "b1", "c1"}));
    EXPECT_EQ(a.state(), weft::fiber_state::suspended);
    EXPECT_EQ(b.state(), weft::fiber_state::suspended);
    EXPECT_EQ(c.state(), weft::fiber_state::suspended);
    // Each continues where it handed over and ends back here.
    EXPECT_EQ(b.resume(), b.ref());
    EXPECT_EQ(c.resume(), c.ref());
    EXPECT_EQ(a.resume(), a.ref());
    EXPECT_TRUE(a.done() && b.done() && c.done());
    EXPECT_EQ(log, (std::vector<std::string>{"a1", "b1", "c1", "b2", "c2", "a2"}));
}

TEST_F(fiber_core, a_fiber_switched_to_ends_at_the_inherited_resumer) {
    weft::fiber b = make_fiber([] {}, {.name = "b"});
    weft::fiber a = make_fiber([&] { weft::this_fiber::switch_to(b.ref()); }, {.name = "a"});
    EXPECT_EQ(a.resume(), b.ref());
    EXPECT_TRUE(b.done());
    EXPECT_EQ(a.state(), weft::fiber_state::suspended);
    EXPECT_EQ(a.resume(), a.ref());
    EXPECT_TRUE(a.done());
}

TEST_F(fiber_core, switch_to_misuse_is_reported) {
    EXPECT_EQ(error_of([] { weft::this_fiber::switch_to(weft::fiber_ref()); }), weft::coroutine_errc::yield_outside);
    weft::fiber done_one = make_fiber([] {});
    done_one.resume();
    std::vector<weft::coroutine_errc> codes;
    weft::fiber f = make_fiber([&] {
        codes.push_back(error_of([] { weft::this_fiber::switch_to(weft::fiber_ref()); }));
        codes.push_back(error_of([] { weft::this_fiber::switch_to(weft::this_fiber::current()); }));
        codes.push_back(error_of([&] { weft::this_fiber::switch_to(done_one.ref()); }));
    });
    f.resume();
    EXPECT_EQ(codes, (std::vector<weft::coroutine_errc>{weft::coroutine_errc::empty_handle,
                                                        weft::coroutine_errc::resume_self,
                                                        weft::coroutine_errc::resume_done}));
}

struct counts_destruction {
    int* count;
    ~counts_destruction() { ++*count; }
};

TEST_F(fiber_core, unwind_runs_destructors_and_keeps_the_fiber) {
    int destroyed = 0;
    bool after = false;
    weft::fiber f = make_fiber(
        [&] {
            counts_destruction guard{&destroyed};
            weft::this_fiber::suspend();
            after = true;
        },
        {.name = "cancelled", .private_data_size = 32, .extension_size = 48, .extension_align = 16});
    f.resume();
    f.extension()[0] = std::byte{42};
    f.unwind();
    EXPECT_EQ(destroyed, 1);
    EXPECT_FALSE(after);
    EXPECT_TRUE(f.done());
    EXPECT_EQ(f.name(), "cancelled");
    EXPECT_EQ(f.extension()[0], std::byte{42});
    EXPECT_EQ(f.exception(), nullptr);
    f.unwind();  // a done fiber is left as it is
    EXPECT_EQ(destroyed, 1);
    f.reset();
    EXPECT_EQ(destroyed, 1);
}

TEST_F(fiber_core, unwind_of_a_created_fiber_never_runs_it) {
    bool ran = false;
    weft::fiber f = make_fiber([&] { ran = true; });
    f.unwind();
    EXPECT_TRUE(f.done());
    EXPECT_FALSE(ran);
}

TEST_F(fiber_core, unwind_of_the_running_fiber_is_reported) {
    weft::coroutine_errc code{};
    weft::fiber f = make_fiber([&] { code = error_of([] { weft::this_fiber::current().unwind(); }); });
    f.resume();
    EXPECT_EQ(code, weft::coroutine_errc::unwind_running);
}

TEST_F(fiber_core, extension_and_private_data_are_where_asked) {
    weft::fiber f = make_fiber([] {}, {.private_data_size = 40, .extension_size = 100, .extension_align = 64});
    ASSERT_EQ(f.extension().size(), 100u);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(f.extension().data()) % 64, 0u);
    ASSERT_EQ(f.private_data().size(), 40u);
    std::memset(f.extension().data(), 0xab, 100);
    for (std::byte b : f.private_data()) EXPECT_EQ(b, std::byte{0});
    f.resume();
    EXPECT_TRUE(f.done());
    EXPECT_THROW(make_fiber([] {}, {.extension_size = 8, .extension_align = 3}), std::invalid_argument);
    // The record keeps both sizes in 32 bits: 4 GiB or more is refused, not
    // truncated (before any stack or heap block is taken).
    EXPECT_THROW(make_fiber([] {}, {.extension_size = std::size_t{1} << 32}), std::invalid_argument);
    EXPECT_THROW(make_fiber([] {}, {.private_data_size = std::size_t{1} << 32}), std::invalid_argument);
}

// ------------------------------------------------------------ the after-switch hook

struct hook_probe {
    weft::fiber_ref fiber;
    weft::fiber_state state_in_hook{};
    bool current_was_resumer = false;
    long fiber_thread = 0;
    long hook_thread = 0;
};

// The hook hands the fiber to another thread, which resumes it at once and
// runs it to its end while this thread is still inside the hook: that is
// only safe once the fiber's context is saved and "suspended" published.
TEST_F(fiber_core, the_after_switch_hook_runs_after_the_context_is_saved) {
    hook_probe p;
    weft::fiber f = make_fiber(
        [&] {
            weft::this_fiber::suspend(
                [](void* arg) noexcept {
                    auto* probe = static_cast<hook_probe*>(arg);
                    probe->state_in_hook = probe->fiber.state();
                    probe->current_was_resumer = !weft::this_fiber::current();
                    probe->hook_thread = thread_id();
                    std::thread t([probe] { probe->fiber.resume(); });
                    t.join();
                },
                &p);
            p.fiber_thread = thread_id();
        },
        {.name = "handed over"});
    p.fiber = f.ref();
    EXPECT_EQ(f.resume(), f.ref());
    EXPECT_EQ(p.state_in_hook, weft::fiber_state::suspended);
    EXPECT_TRUE(p.current_was_resumer);
    EXPECT_TRUE(f.done());
    EXPECT_NE(p.fiber_thread, 0);
    EXPECT_NE(p.fiber_thread, p.hook_thread);
    EXPECT_FALSE(weft::this_fiber::current());
}

TEST_F(fiber_core, switch_to_runs_its_hook_on_the_next_fibers_side) {
    struct seen {
        weft::fiber_ref a, b;
        weft::fiber_state a_state{};
        bool current_is_b = false;
    } s;
    weft::fiber b = make_fiber([] {}, {.name = "b"});
    weft::fiber a = make_fiber(
        [&] {
            weft::this_fiber::switch_to(
                b.ref(),
                [](void* arg) noexcept {
                    auto* x = static_cast<seen*>(arg);
                    x->a_state = x->a.state();
                    x->current_is_b = weft::this_fiber::current() == x->b;
                },
                &s);
        },
        {.name = "a"});
    s.a = a.ref();
    s.b = b.ref();
    a.resume();
    EXPECT_EQ(s.a_state, weft::fiber_state::suspended);
    EXPECT_TRUE(s.current_is_b);
    a.resume();
    EXPECT_TRUE(a.done());
}

// ------------------------------------------------------------ races

// Two threads resume one suspended fiber at once: exactly one runs it, the
// other gets resume_running. The body holds the winner inside until the
// loser has been refused, so the outcome cannot depend on timing. Such a
// race is the caller's data race (FIBER-I2): only builds without NDEBUG
// detect it (their claim is a compare-and-swap), so only they have this
// test; TSan builds report it as a race instead, and release builds claim
// with a plain store.
#if WEFT_DETAIL_CHECKED_CLAIM
TEST_F(fiber_core, two_threads_racing_to_resume_one_fiber_exactly_one_wins) {
    constexpr int rounds = 200;
    for (int round = 0; round < rounds; ++round) {
        std::atomic<int> refused{0}, won{0}, entered{0};
        std::atomic<bool> timed_out{false};
        weft::fiber f = make_fiber([&] {
            weft::this_fiber::suspend();
            entered.fetch_add(1);
            if (!wait_for([&] { return refused.load() == 1; })) timed_out = true;
        });
        f.resume();
        std::atomic<bool> go{false};
        auto racer = [&] {
            while (!go.load()) {
            }
            try {
                f.resume();
                won.fetch_add(1);
            } catch (const weft::coroutine_error& e) {
                if (e.code() == weft::coroutine_errc::resume_running) refused.fetch_add(1);
            }
        };
        std::thread t1(racer), t2(racer);
        go = true;
        t1.join();
        t2.join();
        ASSERT_FALSE(timed_out.load()) << "round " << round;
        ASSERT_EQ(won.load(), 1) << "round " << round;
        ASSERT_EQ(refused.load(), 1) << "round " << round;
        ASSERT_EQ(entered.load(), 1);
        ASSERT_TRUE(f.done());
    }
}
#endif  // WEFT_DETAIL_CHECKED_CLAIM

// A fiber drives a generator whose body has to wait: it suspends the fiber
// (suspend_outer) from the generator's stack, and another thread resumes it.
// weft must write the current fiber of the thread the code arrives on:
// holding the first thread's slot across the switch would leave that
// thread's slot pointing at the fiber and the second thread's stale.
TEST_F(fiber_core, a_fiber_suspended_inside_a_nested_coroutine_resumes_on_another_thread) {
    struct hook_state {
        std::atomic<bool> ran{false};
    } ps;
    weft::fiber_ref outer_ref;
    weft::coroutine_ref gen_ref;
    bool gen_current_after = false, gen_coroutine_after = false, outer_current_after = false;
    long gen_thread_before = 0, gen_thread_after = 0;
    int received = 0;
    // The generator runs on a stack of its own: suspend_outer refuses a
    // chain holding a shared stack (see the test below).
    weft::fiber outer(
        [&] {
            weft::coroutine<int> gen(
                [&](weft::yielder<int>& y) {
                    gen_thread_before = thread_id();
                    weft::this_fiber::suspend_outer(
                        outer_ref, [](void* arg) noexcept { static_cast<hook_state*>(arg)->ran = true; }, &ps);
                    gen_thread_after = thread_id();
                    gen_current_after = weft::this_fiber::current().record() != outer_ref.record() &&
                                        weft::this_fiber::current().name() == "gen";
                    gen_coroutine_after = weft::this_coroutine::get() == gen_ref;
                    y.yield(7);
                },
                {.name = "gen"});
            gen_ref = gen.ref();
            received = *gen.resume();
            outer_current_after = weft::this_fiber::current() == outer_ref;
        },
        {.name = "outer"});
    outer_ref = outer.ref();
    EXPECT_EQ(outer.resume(), outer_ref);
    EXPECT_TRUE(ps.ran.load());
    EXPECT_EQ(outer.state(), weft::fiber_state::suspended);
    EXPECT_FALSE(weft::this_fiber::current());
    bool other_clean_after = false;
    std::thread t([&] {
        outer.resume();
        other_clean_after = !weft::this_fiber::current();
    });
    t.join();
    EXPECT_TRUE(outer.done());
    EXPECT_EQ(outer.exception(), nullptr) << what_of(outer.exception());
    EXPECT_EQ(received, 7);
    EXPECT_NE(gen_thread_before, gen_thread_after);
    EXPECT_TRUE(gen_current_after);
    EXPECT_TRUE(gen_coroutine_after);
    EXPECT_TRUE(outer_current_after);
    EXPECT_TRUE(other_clean_after);
    EXPECT_FALSE(weft::this_fiber::current());
}

TEST_F(fiber_core, suspend_outer_of_a_fiber_not_above_the_caller_is_refused) {
    weft::fiber other = make_fiber([] {});
    EXPECT_EQ(error_of([&] { weft::this_fiber::suspend_outer(other.ref()); }), weft::coroutine_errc::yield_outside);
    weft::coroutine_errc code{};
    weft::fiber f = make_fiber([&] { code = error_of([&] { weft::this_fiber::suspend_outer(other.ref()); }); });
    f.resume();
    EXPECT_EQ(code, weft::coroutine_errc::yield_outside);
}

TEST_F(fiber_core, suspend_outer_through_a_shared_stack_is_refused) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 2});
    weft::fiber_ref outer_ref;
    weft::coroutine_errc code{};
    weft::fiber outer = make_fiber([&] {
        weft::coroutine<> inner(std::allocator_arg, weft::shared_stack(pool),
                                [&](weft::yielder<>&) { code = error_of([&] { weft::this_fiber::suspend_outer(outer_ref); }); });
        inner.resume();
    });
    outer_ref = outer.ref();
    outer.resume();
    EXPECT_TRUE(outer.done());
    EXPECT_EQ(code, weft::coroutine_errc::yield_outside);
}

// A shared stack in use by a fiber on another thread is reported busy, never
// waited for; once it is free the fiber runs.
TEST_F(fiber_core, a_shared_stack_busy_on_another_thread_is_reported_not_waited_for) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 1});
    std::atomic<bool> inside{false}, release{false};
    bool timed_out = false;
    weft::fiber holder(std::allocator_arg, weft::shared_stack(pool), [&] {
        inside = true;
        if (!wait_for([&] { return release.load(); })) timed_out = true;
    });
    bool ran = false;
    weft::fiber waiting(std::allocator_arg, weft::shared_stack(pool), [&] { ran = true; });
    int suspended_destroyed = 0;
    weft::fiber suspended(std::allocator_arg, weft::shared_stack(pool), [&] {
        counts_destruction guard{&suspended_destroyed};
        weft::this_fiber::suspend();
    });
    suspended.resume();  // suspended with its frames saved off the stack once holder runs
    std::thread t([&] { holder.resume(); });
    ASSERT_TRUE(wait_for([&] { return inside.load(); }));
    EXPECT_FALSE(waiting.try_resume());
    EXPECT_EQ(waiting.state(), weft::fiber_state::created);
    try {
        waiting.resume();
        ADD_FAILURE() << "resume of a fiber whose shared stack is busy did not throw";
    } catch (const weft::coroutine_error& e) {
        EXPECT_EQ(e.code(), weft::coroutine_errc::shared_stack_busy);
        EXPECT_NE(std::string(e.what()).find("another thread"), std::string::npos) << e.what();
    }
    // Cancelling is refused the same way, and leaves the fiber as it was.
    EXPECT_EQ(error_of([&] { suspended.unwind(); }), weft::coroutine_errc::shared_stack_busy);
    EXPECT_EQ(suspended.state(), weft::fiber_state::suspended);
    EXPECT_EQ(suspended_destroyed, 0);
    release = true;
    t.join();
    EXPECT_FALSE(timed_out);
    EXPECT_TRUE(waiting.try_resume());
    EXPECT_TRUE(ran);
    EXPECT_TRUE(holder.done());
    suspended.unwind();
    EXPECT_TRUE(suspended.done());
    EXPECT_EQ(suspended_destroyed, 1);
}

// ------------------------------------------------------------ FP control state

// fp_env_mode (weft/fiber.hpp; FIBER-F1 - FIBER-F3 in weft/detail/fiber_record.hpp),
// observed through the rounding mode (MXCSR and the x87 control word on
// x86-64, FPCR on AArch64), the same on both kinds of stack. Each test puts
// the thread's mode back (round_guard).
struct round_guard {
    int saved = std::fegetround();
    ~round_guard() { std::fesetround(saved); }
};

constexpr weft::fiber_options own_fp{.fp_env = weft::fp_env_mode::own};

// The default is shared: a fiber runs in its thread's mode as it is at each
// resume, and what it sets stays with the thread.
TEST_F(fiber_core, a_fiber_shares_its_threads_fp_state_by_default) {
    round_guard g;
    EXPECT_EQ(weft::fiber_options{}.fp_env, weft::fp_env_mode::shared);
    ASSERT_EQ(std::fesetround(FE_UPWARD), 0);
    std::vector<int> seen;
    weft::fiber f = make_fiber([&] {
        seen.push_back(std::fegetround());
        std::fesetround(FE_DOWNWARD);
        weft::this_fiber::suspend();
        seen.push_back(std::fegetround());
        std::fesetround(FE_UPWARD);
    });
    ASSERT_EQ(std::fesetround(FE_TOWARDZERO), 0);
    f.resume();
    EXPECT_EQ(std::fegetround(), FE_DOWNWARD);  // the fiber's change stayed with the thread
    ASSERT_EQ(std::fesetround(FE_TONEAREST), 0);
    f.resume();
    EXPECT_EQ(std::fegetround(), FE_UPWARD);
    EXPECT_EQ(seen, (std::vector<int>{FE_TOWARDZERO, FE_TONEAREST}));  // the thread's, not the creator's
}

// own: the fiber starts in its creator's mode (as a new thread inherits its
// creator's), keeps its own across suspensions whatever the resumer does,
// and the resumer gets its own back at every suspension and at the end.
TEST_F(fiber_core, an_own_fp_fiber_keeps_its_mode_and_its_resumer_keeps_its_own) {
    round_guard g;
    ASSERT_EQ(std::fesetround(FE_UPWARD), 0);
    std::vector<int> seen;
    weft::fiber f = make_fiber(
        [&] {
            seen.push_back(std::fegetround());
            std::fesetround(FE_DOWNWARD);
            weft::this_fiber::suspend();
            seen.push_back(std::fegetround());
            std::fesetround(FE_TONEAREST);
        },
        own_fp);
    ASSERT_EQ(std::fesetround(FE_TOWARDZERO), 0);
    f.resume();
    EXPECT_EQ(std::fegetround(), FE_TOWARDZERO);
    ASSERT_EQ(std::fesetround(FE_UPWARD), 0);
    f.resume();
    EXPECT_TRUE(f.done());
    EXPECT_EQ(std::fegetround(), FE_UPWARD);  // the end gives the resumer its own back too
    EXPECT_EQ(seen, (std::vector<int>{FE_UPWARD, FE_DOWNWARD}));
}

// A fiber destroyed while suspended unwinds in its own mode and leaves the
// destroyer's alone.
TEST_F(fiber_core, an_own_fp_fiber_unwinds_in_its_mode) {
    round_guard g;
    ASSERT_EQ(std::fesetround(FE_DOWNWARD), 0);
    int in_destructor = -1;
    {
        weft::fiber f = make_fiber(
            [&] {
                struct probe {
                    int* out;
                    ~probe() { *out = std::fegetround(); }
                } p{&in_destructor};
                weft::this_fiber::suspend();
            },
            own_fp);
        f.resume();
        ASSERT_EQ(std::fesetround(FE_TOWARDZERO), 0);
    }
    EXPECT_EQ(in_destructor, FE_DOWNWARD);
    EXPECT_EQ(std::fegetround(), FE_TOWARDZERO);
}

// switch_to() between every pair of modes: the fiber handed over to runs in
// its own mode if it has one, else in the resumer's; the one that handed
// over gets its own back when resumed; the resumer gets its own back when
// the chain suspends to it.
TEST_F(fiber_core, switch_to_gives_each_mode_its_fp_state) {
    using weft::fp_env_mode;
    for (const fp_env_mode am : {fp_env_mode::shared, fp_env_mode::own}) {
        for (const fp_env_mode bm : {fp_env_mode::shared, fp_env_mode::own}) {
            SCOPED_TRACE(std::string("a ") + (am == fp_env_mode::own ? "own" : "shared") + ", b " +
                         (bm == fp_env_mode::own ? "own" : "shared"));
            round_guard g;
            ASSERT_EQ(std::fesetround(FE_UPWARD), 0);  // the creator's: a's and b's if own
            int b_saw = -1, a_back = -1;
            weft::fiber a, b;
            b = make_fiber([&] { b_saw = std::fegetround(); }, {.fp_env = bm});
            a = make_fiber(
                [&] {
                    std::fesetround(FE_DOWNWARD);
                    weft::this_fiber::switch_to(b.ref());
                    a_back = std::fegetround();
                },
                {.fp_env = am});
            ASSERT_EQ(std::fesetround(FE_TOWARDZERO), 0);  // the resumer's
            EXPECT_EQ(a.resume(), b.ref());                 // b ended: back here
            // b: its own (the creator's), else the resumer's; the resumer's
            // is what a set if a is shared.
            const int resumers = am == fp_env_mode::own ? FE_TOWARDZERO : FE_DOWNWARD;
            EXPECT_EQ(b_saw, bm == fp_env_mode::own ? FE_UPWARD : resumers);
            EXPECT_EQ(std::fegetround(), resumers);
            ASSERT_EQ(std::fesetround(FE_TONEAREST), 0);
            a.resume();
            EXPECT_EQ(a_back, am == fp_env_mode::own ? FE_DOWNWARD : FE_TONEAREST);
            EXPECT_EQ(std::fegetround(), FE_TONEAREST);
        }
    }
}

// Fibers of both modes nest: a shared fiber resumed from an own one runs in
// the own one's mode.
TEST_F(fiber_core, a_shared_fiber_runs_in_the_mode_of_the_fiber_that_resumed_it) {
    round_guard g;
    ASSERT_EQ(std::fesetround(FE_DOWNWARD), 0);
    int inner_saw = -1, outer_after = -1;
    weft::fiber inner = make_fiber([&] {
        inner_saw = std::fegetround();
        std::fesetround(FE_UPWARD);
    });
    weft::fiber outer = make_fiber(
        [&] {
            inner.resume();
            outer_after = std::fegetround();  // what the shared inner set, in outer's own state
            weft::this_fiber::suspend();
            outer_after = std::fegetround();
        },
        own_fp);
    ASSERT_EQ(std::fesetround(FE_TOWARDZERO), 0);
    outer.resume();
    EXPECT_EQ(inner_saw, FE_DOWNWARD);
    EXPECT_EQ(outer_after, FE_UPWARD);
    EXPECT_EQ(std::fegetround(), FE_TOWARDZERO);
    outer.resume();
    EXPECT_EQ(outer_after, FE_UPWARD);
    EXPECT_EQ(std::fegetround(), FE_TOWARDZERO);
}

// ------------------------------------------------------------ coroutine<bool>

TEST_F(fiber_core, resume_of_a_coroutine_of_bool_says_has_value_apart_from_the_value) {
    weft::coroutine<bool> co(std::allocator_arg, weft::test::stack(), [](weft::yielder<bool>& y) {
        y.yield(false);
        y.yield(true);
    });
    static_assert(!std::is_constructible_v<bool, weft::coroutine<bool>::resume_result> ||
                      !std::is_convertible_v<weft::coroutine<bool>::resume_result, bool>,
                  "resume() of a coroutine<bool> must not convert to bool");
    auto first = co.resume();
    ASSERT_TRUE(first.has_value());
    EXPECT_FALSE(*first);
    auto second = co.resume();
    ASSERT_TRUE(second.has_value());
    EXPECT_TRUE(second.value());
    EXPECT_FALSE(co.resume().has_value());
}

}  // namespace
