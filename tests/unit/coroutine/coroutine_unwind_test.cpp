// coroutine_unwind_test.cpp: exceptions leaving a coroutine's body, and
// destruction: unwinding a suspended coroutine, destroying never-started and
// finished ones, move-assignment and reset().

#include <gtest/gtest.h>

#include <cxxabi.h>

#include <exception>
#include <type_traits>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/leak_check.hpp"
#include "support/test_stack.hpp"
#include "weft/coroutine.hpp"

namespace {

class coroutine_exceptions : public weft::test::leak_checked {};
class coroutine_destruction : public weft::test::leak_checked {};

// ---------------------------------------------------------------- exceptions

TEST_F(coroutine_exceptions, body_exception_is_rethrown_by_resume_and_the_coroutine_is_done) {
    weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [](weft::yielder<>&) { throw std::runtime_error("boom from the body"); }, {.name = "thrower"});
    try {
        (void)co.resume();
        ADD_FAILURE() << "resume() did not rethrow";
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "boom from the body");
    }
    EXPECT_TRUE(co.done());
    try {
        (void)co.resume();
        ADD_FAILURE() << "resume() of a done coroutine did not throw";
    } catch (const weft::coroutine_error& e) {
        EXPECT_EQ(e.code(), weft::coroutine_errc::resume_done);
        EXPECT_NE(std::string(e.what()).find("'thrower'"), std::string::npos) << e.what();
    }
}

struct custom_error {
    int code;
    std::string detail;
};

TEST_F(coroutine_exceptions, exception_after_some_yields_keeps_earlier_values) {
    weft::coroutine<int> co(std::allocator_arg, weft::test::stack(), [](weft::yielder<int>& y) {
        y.yield(1);
        y.yield(2);
        throw custom_error{42, "third step failed"};
    });
    EXPECT_EQ(co.resume(), std::optional<int>(1));
    EXPECT_EQ(co.resume(), std::optional<int>(2));
    try {
        (void)co.resume();
        ADD_FAILURE() << "resume() did not rethrow";
    } catch (const custom_error& e) {
        EXPECT_EQ(e.code, 42);
        EXPECT_EQ(e.detail, "third step failed");
    }
    EXPECT_TRUE(co.done());
    EXPECT_THROW((void)co.resume(), weft::coroutine_error);
}

TEST_F(coroutine_exceptions, exceptions_not_derived_from_std_exception) {
    weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [](weft::yielder<>&) { throw 42; });
    try {
        (void)co.resume();
        ADD_FAILURE() << "resume() did not rethrow";
    } catch (int v) {
        EXPECT_EQ(v, 42);
    }
    EXPECT_TRUE(co.done());
}

TEST_F(coroutine_exceptions, exception_thrown_from_deep_helpers_unwinds_them) {
    std::vector<int> log;
    struct guard {
        std::vector<int>* log;
        int id;
        ~guard() { log->push_back(id); }
    };
    struct helpers {
        static void level2(std::vector<int>& l) {
            guard g{&l, 2};
            throw std::logic_error("deep");
        }
        static void level1(std::vector<int>& l) {
            guard g{&l, 1};
            level2(l);
        }
    };
    weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [&log](weft::yielder<>& y) {
        guard g{&log, 0};
        y.yield();
        helpers::level1(log);
    });
    EXPECT_TRUE(co.resume());
    EXPECT_TRUE(log.empty());
    EXPECT_THROW((void)co.resume(), std::logic_error);
    EXPECT_EQ(log, (std::vector<int>{2, 1, 0}));
}

TEST_F(coroutine_exceptions, exception_leaves_no_result) {
    weft::coroutine<void, void, int> co(std::allocator_arg, weft::test::stack(), [](weft::yielder<>&) -> int { throw std::runtime_error("no value"); });
    EXPECT_THROW((void)co.resume(), std::runtime_error);
    try {
        (void)co.result();
        ADD_FAILURE() << "result() of a coroutine that threw did not throw";
    } catch (const weft::coroutine_error& e) {
        EXPECT_EQ(e.code(), weft::coroutine_errc::no_result);
    }
}

TEST_F(coroutine_exceptions, exception_is_delivered_once_and_not_again_on_destruction) {
    int caught = 0;
    {
        weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [](weft::yielder<>&) { throw std::runtime_error("once"); });
        try {
            (void)co.resume();
        } catch (const std::runtime_error&) {
            ++caught;
        }
    }
    EXPECT_EQ(caught, 1);
}

TEST_F(coroutine_exceptions, exception_crosses_nested_coroutines) {
    std::string caught_in_outer;
    weft::coroutine<> outer(std::allocator_arg, weft::test::stack(), [&](weft::yielder<>& y) {
        weft::coroutine<> inner(std::allocator_arg, weft::test::stack(), [](weft::yielder<>&) { throw std::runtime_error("from inner"); });
        try {
            (void)inner.resume();
        } catch (const std::runtime_error& e) {
            caught_in_outer = e.what();
        }
        EXPECT_EQ(weft::this_coroutine::get().name(), "outer") << "an inner exception must restore this_coroutine";
        y.yield();
        weft::coroutine<> inner2([](weft::yielder<>&) { throw std::out_of_range("through both"); });
        (void)inner2.resume();  // not caught: leaves outer too
    }, {.name = "outer"});
    EXPECT_TRUE(outer.resume());
    EXPECT_EQ(caught_in_outer, "from inner");
    EXPECT_THROW((void)outer.resume(), std::out_of_range);
    EXPECT_TRUE(outer.done());
    EXPECT_FALSE(weft::this_coroutine::inside());
}

TEST_F(coroutine_exceptions, exception_caught_inside_the_body_does_not_escape) {
    weft::coroutine<int> co(std::allocator_arg, weft::test::stack(), [](weft::yielder<int>& y) {
        try {
            throw std::runtime_error("handled");
        } catch (const std::exception&) {
            y.yield(1);  // yielding from a catch block is fine
        }
        y.yield(2);
    });
    EXPECT_EQ(co.resume(), std::optional<int>(1));
    EXPECT_EQ(co.resume(), std::optional<int>(2));
    EXPECT_FALSE(co.resume());
}

// ---------------------------------------------------------------- destruction

// tracer appends its id to a log when destroyed.
struct tracer {
    std::vector<int>* log;
    int id;
    tracer(std::vector<int>* l, int i) : log(l), id(i) {}
    tracer(const tracer&) = delete;
    tracer& operator=(const tracer&) = delete;
    ~tracer() { log->push_back(id); }
};

void innermost(weft::yielder<>& y, std::vector<int>& log) {
    tracer t(&log, 3);
    y.yield();
    log.push_back(-3);  // must never run when destroyed while suspended
}
void middle(weft::yielder<>& y, std::vector<int>& log) {
    tracer t(&log, 2);
    innermost(y, log);
    log.push_back(-2);
}

TEST_F(coroutine_destruction, destroying_a_suspended_coroutine_unwinds_all_frames_in_reverse_order) {
    std::vector<int> log;
    {
        weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [&log](weft::yielder<>& y) {
            tracer a(&log, 0);
            tracer b(&log, 1);
            middle(y, log);
            log.push_back(-1);
        });
        EXPECT_TRUE(co.resume());
        EXPECT_TRUE(log.empty());
    }
    EXPECT_EQ(log, (std::vector<int>{3, 2, 1, 0}));
}

TEST_F(coroutine_destruction, destructors_during_unwinding_run_inside_the_coroutine) {
    struct observer {
        weft::coroutine_ref* seen;
        bool* inside;
        ~observer() {
            *seen = weft::this_coroutine::get();
            *inside = weft::this_coroutine::inside();
        }
    };
    weft::coroutine_ref seen, expected;
    bool inside = false;
    {
        weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [&](weft::yielder<>& y) {
            observer o{&seen, &inside};
            y.yield();
        });
        expected = co.ref();
        EXPECT_TRUE(co.resume());
    }
    EXPECT_TRUE(inside);
    EXPECT_TRUE(seen == expected);
    EXPECT_FALSE(weft::this_coroutine::inside());
}

// probe counts destructor calls of its live (not moved-from) instances.
struct probe {
    int* destroyed;
    explicit probe(int* d) : destroyed(d) {}
    probe(probe&& o) noexcept : destroyed(std::exchange(o.destroyed, nullptr)) {}
    probe(const probe&) = delete;
    ~probe() {
        if (destroyed) ++*destroyed;
    }
};

TEST_F(coroutine_destruction, never_started_coroutine_runs_no_body_code_and_destroys_the_callable_once) {
    int destroyed = 0;
    bool ran = false;
    {
        weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [p = probe(&destroyed), &ran](weft::yielder<>&) { ran = true; });
        EXPECT_EQ(destroyed, 0);
        EXPECT_EQ(co.state(), weft::coroutine_state::created);
    }
    EXPECT_FALSE(ran);
    EXPECT_EQ(destroyed, 1);
}

TEST_F(coroutine_destruction, suspended_coroutine_destroys_its_callable_once_after_unwinding) {
    std::vector<int> log;
    int destroyed = 0;
    {
        weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [p = probe(&destroyed), &log](weft::yielder<>& y) {
            tracer t(&log, 1);
            y.yield();
        });
        EXPECT_TRUE(co.resume());
    }
    EXPECT_EQ(log, std::vector<int>{1});
    EXPECT_EQ(destroyed, 1);
}

TEST_F(coroutine_destruction, destroying_a_finished_coroutine_destroys_callable_and_result_once) {
    int callable_destroyed = 0;
    int result_destroyed = 0;
    std::vector<int> log;
    {
        weft::coroutine<void, void, probe> co(std::allocator_arg, weft::test::stack(), [p = probe(&callable_destroyed), &log, &result_destroyed](weft::yielder<>&) {
            tracer t(&log, 7);
            return probe(&result_destroyed);
        });
        EXPECT_FALSE(co.resume());
        EXPECT_TRUE(co.done());
        EXPECT_EQ(log, std::vector<int>{7}) << "the body's locals die when it returns";
        EXPECT_EQ(callable_destroyed, 0) << "the callable lives as long as the coroutine";
        EXPECT_EQ(result_destroyed, 0) << "the result is kept until destruction";
    }
    EXPECT_EQ(log, std::vector<int>{7});
    EXPECT_EQ(callable_destroyed, 1);
    EXPECT_EQ(result_destroyed, 1);
}

TEST_F(coroutine_destruction, move_assignment_over_a_suspended_coroutine_unwinds_the_old_one) {
    std::vector<int> log;
    weft::coroutine<int> co(std::allocator_arg, weft::test::stack(), [&log](weft::yielder<int>& y) {
        tracer t(&log, 1);
        y.yield(1);
        y.yield(-1);
    });
    EXPECT_EQ(co.resume(), std::optional<int>(1));
    co = weft::coroutine<int>(std::allocator_arg, weft::test::stack(), [&log](weft::yielder<int>& y) {
        tracer t(&log, 2);
        y.yield(2);
    });
    EXPECT_EQ(log, std::vector<int>{1}) << "the old coroutine must be unwound by the assignment";
    EXPECT_EQ(co.resume(), std::optional<int>(2));
    EXPECT_FALSE(co.resume());
    EXPECT_EQ(log, (std::vector<int>{1, 2}));
    // Self-move-assignment leaves the coroutine alone.
    auto& alias = co;
    co = std::move(alias);
    EXPECT_TRUE(co);
    EXPECT_TRUE(co.done());
}

TEST_F(coroutine_destruction, reset_unwinds_now_and_empties_the_handle) {
    std::vector<int> log;
    weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [&log](weft::yielder<>& y) {
        tracer t(&log, 5);
        y.yield();
    });
    EXPECT_TRUE(co.resume());
    co.reset();
    EXPECT_EQ(log, std::vector<int>{5});
    EXPECT_FALSE(co);
    co.reset();  // a second reset is harmless
    EXPECT_EQ(log, std::vector<int>{5});
    try {
        (void)co.resume();
        ADD_FAILURE() << "resume() after reset() did not throw";
    } catch (const weft::coroutine_error& e) {
        EXPECT_EQ(e.code(), weft::coroutine_errc::empty_handle);
    }
}

TEST_F(coroutine_destruction, body_that_catches_forced_unwind_with_catch_all_and_rethrows) {
    std::vector<int> log;
    bool caught = false;
    bool after_catch = false;
    {
        weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [&](weft::yielder<>& y) {
            tracer outer(&log, 1);
            try {
                tracer inner(&log, 2);
                y.yield();
            } catch (...) {
                caught = true;
                log.push_back(100);
                throw;
            }
            after_catch = true;
        });
        EXPECT_TRUE(co.resume());
    }
    EXPECT_TRUE(caught);
    EXPECT_FALSE(after_catch);
    EXPECT_EQ(log, (std::vector<int>{2, 100, 1}));
}

// yield_catching_by_type() is the glibc-style handler, catch
// (abi::__forced_unwind&) that rethrows. libsupc++ binds its reference to a
// null object (a forced unwind is a foreign exception), which UBSan's null
// check reports, hence the attribute (docs/safety.md, Cancellation).
__attribute__((no_sanitize("undefined"))) void yield_catching_by_type(weft::yielder<>& y, bool& caught) {
    try {
        y.yield();
    } catch (const weft::forced_unwind&) {
        caught = true;
        throw;
    }
}

TEST_F(coroutine_destruction, body_that_catches_forced_unwind_by_type_and_rethrows) {
    bool caught = false;
    {
        weft::coroutine<> co(std::allocator_arg, weft::test::stack(),
                             [&](weft::yielder<>& y) { yield_catching_by_type(y, caught); });
        EXPECT_TRUE(co.resume());
    }
    EXPECT_TRUE(caught);
    static_assert(!std::is_base_of_v<std::exception, weft::forced_unwind>);
}

// Destruction is a forced unwind (glibc's cancellation, docs/safety.md,
// Cancellation), not a C++ throw: a catch (abi::__forced_unwind&) sees it,
// std::uncaught_exceptions() does not count it, and std::current_exception()
// in a catch (...) is empty. With the two-phase throw of weft::forced_unwind
// that this replaced, each of these differed.
struct uncaught_probe {
    int* seen;
    ~uncaught_probe() { *seen = std::uncaught_exceptions(); }
};

__attribute__((no_sanitize("undefined"))) void yield_catching_abi_type(weft::yielder<>& y, bool& caught) {
    try {
        y.yield();
    } catch (abi::__forced_unwind&) {
        caught = true;
        throw;
    }
}

TEST_F(coroutine_destruction, destruction_is_a_forced_unwind_as_glibc_cancellation) {
    static_assert(std::is_same_v<weft::forced_unwind, abi::__forced_unwind>);
    bool caught_abi = false;
    {
        weft::coroutine<> co(std::allocator_arg, weft::test::stack(),
                             [&](weft::yielder<>& y) { yield_catching_abi_type(y, caught_abi); });
        EXPECT_TRUE(co.resume());
    }
    EXPECT_TRUE(caught_abi);

    int uncaught = -1;
    bool current_empty = false;
    {
        weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [&](weft::yielder<>& y) {
            try {
                uncaught_probe p{&uncaught};
                y.yield();
            } catch (...) {
                current_empty = !std::current_exception();
                throw;
            }
        });
        EXPECT_TRUE(co.resume());
    }
    EXPECT_EQ(uncaught, 0) << "a forced unwind is not an uncaught C++ exception";
    EXPECT_TRUE(current_empty) << "a forced unwind has no C++ exception object";
}

TEST_F(coroutine_destruction, catch_std_exception_does_not_catch_forced_unwind) {
    bool caught = false;
    std::vector<int> log;
    {
        weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [&](weft::yielder<>& y) {
            tracer t(&log, 1);
            try {
                y.yield();
            } catch (const std::exception&) {
                caught = true;
            }
        });
        EXPECT_TRUE(co.resume());
    }
    EXPECT_FALSE(caught);
    EXPECT_EQ(log, std::vector<int>{1});
}

TEST_F(coroutine_destruction, unwinding_a_coroutine_destroys_suspended_coroutines_it_owns) {
    std::vector<int> log;
    {
        weft::coroutine<> outer(std::allocator_arg, weft::test::stack(), [&log](weft::yielder<>& y) {
            tracer a(&log, 1);
            weft::coroutine<> inner(std::allocator_arg, weft::test::stack(), [&log](weft::yielder<>& yi) {
                tracer b(&log, 2);
                yi.yield();
            });
            EXPECT_TRUE(inner.resume());
            tracer c(&log, 3);
            y.yield();
        });
        EXPECT_TRUE(outer.resume());
        EXPECT_TRUE(log.empty());
    }
    // Unwinding outer: c, then inner's destructor unwinds inner (b), then a.
    EXPECT_EQ(log, (std::vector<int>{3, 2, 1}));
    EXPECT_FALSE(weft::this_coroutine::inside());
}

TEST_F(coroutine_destruction, a_coroutine_can_destroy_another_suspended_coroutine) {
    std::vector<int> log;
    weft::coroutine<> victim(std::allocator_arg, weft::test::stack(), [&log](weft::yielder<>& y) {
        tracer t(&log, 9);
        y.yield();
    });
    EXPECT_TRUE(victim.resume());
    weft::coroutine_ref after;
    weft::coroutine<> killer(std::allocator_arg, weft::test::stack(), [&](weft::yielder<>&) {
        victim.reset();
        after = weft::this_coroutine::get();
    });
    EXPECT_FALSE(killer.resume());
    EXPECT_EQ(log, std::vector<int>{9});
    EXPECT_TRUE(after == killer.ref()) << "this_coroutine must be restored after destroying another coroutine";
}

TEST_F(coroutine_destruction, live_coroutine_count_follows_creation_and_destruction) {
    const std::int64_t base = weft::stats::live_coroutines();
    {
        weft::coroutine<> a(std::allocator_arg, weft::test::stack(), [](weft::yielder<>&) {});
        EXPECT_EQ(weft::stats::live_coroutines(), base + 1);
        weft::coroutine<> b(std::allocator_arg, weft::test::stack(), [](weft::yielder<>& y) { y.yield(); });
        EXPECT_EQ(weft::stats::live_coroutines(), base + 2);
        EXPECT_FALSE(a.resume());
        EXPECT_EQ(weft::stats::live_coroutines(), base + 2) << "finished coroutines are alive until destroyed";
        EXPECT_TRUE(b.resume());
        a.reset();
        EXPECT_EQ(weft::stats::live_coroutines(), base + 1);
    }
    EXPECT_EQ(weft::stats::live_coroutines(), base);
}

}  // namespace
