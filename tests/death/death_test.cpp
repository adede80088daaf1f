// death_test.cpp: misuse that weft cannot report with an exception aborts
// the process with a message naming the coroutine. Each coroutine is created
// inside the death statement, so only the child process ever owns it.
//
// The default ("fast", fork-only) death test style is used on purpose: the
// "threadsafe" style re-executes the test binary, which does not work when
// the binary runs under a user-mode emulator without binfmt registration.

#include <gtest/gtest.h>
#include <pthread.h>

#include "support/leak_check.hpp"
#include "weft/compact_coroutine.hpp"
#include "weft/coroutine.hpp"
#include "weft/shared_stack.hpp"
#include "weft/fiber.hpp"

namespace {

class coroutine_death : public weft::test::leak_checked {};

// swallow_and_return() destroys a suspended coroutine whose body catches
// forced_unwind with catch (...) and returns normally.
void swallow_and_return(const char* name) {
    weft::coroutine<> co(
        [](weft::yielder<>& y) {
            try {
                y.yield();
            } catch (...) {
                // swallowed: no rethrow
            }
        },
        {.name = name});
    (void)co.resume();
}  // ~coroutine aborts here

TEST_F(coroutine_death, swallowing_forced_unwind_aborts_naming_the_coroutine) {
    EXPECT_DEATH(swallow_and_return("swallower"), "coroutine 'swallower' swallowed weft::forced_unwind");
}

TEST_F(coroutine_death, swallowing_forced_unwind_in_an_anonymous_coroutine_aborts) {
    EXPECT_DEATH(swallow_and_return(""), "coroutine <anonymous 0x[0-9a-f]+> swallowed weft::forced_unwind");
}

// A handler that swallows the unwind is caught where it ends (the forced
// unwind's exception object is deleted there), before the body can yield
// again.
TEST_F(coroutine_death, swallowing_forced_unwind_then_yielding_again_aborts) {
    auto statement = [] {
        weft::coroutine<int> co(
            [](weft::yielder<int>& y) {
                for (;;) {
                    try {
                        y.yield(1);
                    } catch (...) {
                        // swallowed; the loop yields again
                    }
                }
            },
            {.name = "stubborn"});
        (void)co.resume();
    };
    EXPECT_DEATH(statement(), "coroutine 'stubborn' swallowed weft::forced_unwind");
}

TEST_F(coroutine_death, swallowing_then_this_coroutine_yield_aborts) {
    auto statement = [] {
        weft::coroutine<> co(
            [](weft::yielder<>&) {
                try {
                    weft::this_coroutine::yield();
                } catch (...) {
                }
                weft::this_coroutine::yield();
            },
            {.name = "plain"});
        (void)co.resume();
    };
    EXPECT_DEATH(statement(), "coroutine 'plain' swallowed weft::forced_unwind");
}

// Yielding from inside the handler, before it ends, is refused as before.
TEST_F(coroutine_death, yielding_inside_a_handler_of_the_unwind_aborts) {
    auto statement = [] {
        weft::coroutine<int> co(
            [](weft::yielder<int>& y) {
                try {
                    y.yield(1);
                } catch (...) {
                    y.yield(2);
                    throw;
                }
            },
            {.name = "restless"});
        (void)co.resume();
    };
    EXPECT_DEATH(statement(), "coroutine 'restless' tried to yield while being destroyed");
}

// A switch_to() from inside the handler is refused the same way (the test
// is switch_to()'s own since the fast path, FIBER-F4 in fiber_record.hpp).
TEST_F(coroutine_death, switching_to_another_fiber_inside_a_handler_of_the_unwind_aborts) {
    auto statement = [] {
        weft::fiber other([] {}, {.name = "other"});
        weft::fiber f(
            [&] {
                try {
                    weft::this_fiber::suspend();
                } catch (...) {
                    weft::this_fiber::switch_to(other.ref());
                    throw;
                }
            },
            {.name = "restless"});
        (void)f.resume();
        f.unwind();
    };
    EXPECT_DEATH(statement(), "fiber 'restless' tried to yield while being destroyed");
}

// A cancellation unwind raised outside any coroutine has no entry to stop
// at. Raised on a thread of its own: the death test's statement runs inside
// gtest's catch (...), which would take it for an exception.
void* raise_on_a_plain_thread(void*) { weft::detail::raise_forced_unwind(); }

TEST_F(coroutine_death, a_forced_unwind_outside_any_coroutine_aborts) {
    auto statement = [] {
        pthread_t t;
        if (pthread_create(&t, nullptr, raise_on_a_plain_thread, nullptr) == 0) pthread_join(t, nullptr);
    };
    EXPECT_DEATH(statement(), "forced_unwind raised outside any coroutine");
}

TEST_F(coroutine_death, destroying_a_running_coroutine_from_inside_aborts) {
    auto statement = [] {
        weft::coroutine<>* self = nullptr;
        weft::coroutine<> co([&self](weft::yielder<>&) { self->reset(); }, {.name = "suicidal"});
        self = &co;
        (void)co.resume();
    };
    EXPECT_DEATH(statement(), "coroutine 'suicidal' was destroyed while running");
}

TEST_F(coroutine_death, move_assigning_over_a_running_coroutine_from_inside_aborts) {
    auto statement = [] {
        weft::coroutine<>* self = nullptr;
        weft::coroutine<> co([&self](weft::yielder<>&) { *self = weft::coroutine<>(); }, {.name = "replaced"});
        self = &co;
        (void)co.resume();
    };
    EXPECT_DEATH(statement(), "coroutine 'replaced' was destroyed while running");
}

// weft::compact_coroutine aborts the same way, naming it by address.
using compact_death = coroutine_death;

// destroyed_at_first_yield() runs body as a compact coroutine on a pool of
// one shared stack up to its first yield, then destroys it: the forced
// unwind meets body's handler.
template <class Body>
void destroyed_at_first_yield(Body body) {
    weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 1});
    weft::compact_coroutine<> co(weft::shared_stack(pool), body);
    (void)co.resume();
    co.reset();
}

TEST_F(compact_death, swallowing_the_forced_unwind_aborts_naming_the_coroutine) {
    EXPECT_DEATH(destroyed_at_first_yield([](auto& y) {
                     try {
                         y.yield();
                     } catch (...) {
                     }
                 }),
                 "compact coroutine .* swallowed weft::forced_unwind");
}

TEST_F(compact_death, yielding_while_being_destroyed_aborts) {
    EXPECT_DEATH(destroyed_at_first_yield([](auto& y) {
                     try {
                         y.yield();
                     } catch (...) {
                         y.yield();
                         throw;
                     }
                 }),
                 "compact coroutine .* yielded while being destroyed");
}

TEST_F(compact_death, destroying_a_running_coroutine_aborts) {
    EXPECT_DEATH(
        {
            weft::shared_stack_pool pool({.stack_size = 64 * 1024, .stacks = 1});
            weft::compact_coroutine<> co;
            co = weft::compact_coroutine<>(weft::shared_stack(pool), [&](auto&) { co.reset(); });
            (void)co.resume();
        },
        "compact coroutine .* destroyed while running");
}

}  // namespace
