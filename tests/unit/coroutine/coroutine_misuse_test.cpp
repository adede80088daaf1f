// coroutine_misuse_test.cpp: misuse is reported with coroutine_error, the
// right code() and a message naming the coroutine and its state.

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "support/leak_check.hpp"
#include "support/test_stack.hpp"
#include "weft/coroutine.hpp"

namespace {

class coroutine_misuse : public weft::test::leak_checked {};

struct caught_error {
    bool thrown = false;
    weft::coroutine_errc code{};
    std::string message;
};

// catch_error() runs f and records the coroutine_error it throws, if any.
template <class F>
caught_error catch_error(F&& f) {
    caught_error c;
    try {
        std::forward<F>(f)();
    } catch (const weft::coroutine_error& e) {
        c.thrown = true;
        c.code = e.code();
        c.message = e.what();
    }
    return c;
}

bool mentions(const std::string& message, const char* part) { return message.find(part) != std::string::npos; }

// reports() checks that c holds a coroutine_error with `code` whose message
// mentions each of `parts`.
::testing::AssertionResult reports(const caught_error& c, weft::coroutine_errc code,
                                   std::initializer_list<const char*> parts = {}) {
    if (!c.thrown) return ::testing::AssertionFailure() << "no coroutine_error was thrown";
    if (c.code != code)
        return ::testing::AssertionFailure() << "code " << static_cast<int>(c.code) << ", expected "
                                             << static_cast<int>(code) << ": " << c.message;
    for (const char* part : parts)
        if (!mentions(c.message, part)) return ::testing::AssertionFailure() << "no " << part << " in: " << c.message;
    return ::testing::AssertionSuccess();
}

TEST_F(coroutine_misuse, coroutine_error_is_a_logic_error) {
    static_assert(std::is_base_of_v<std::logic_error, weft::coroutine_error>);
    weft::coroutine_error e(weft::coroutine_errc::resume_done, "text");
    EXPECT_EQ(e.code(), weft::coroutine_errc::resume_done);
    EXPECT_STREQ(e.what(), "text");
}

TEST_F(coroutine_misuse, resume_of_a_done_coroutine) {
    weft::coroutine<int> co(std::allocator_arg, weft::test::stack(), [](weft::yielder<int>&) {}, {.name = "finished"});
    EXPECT_FALSE(co.resume());
    caught_error c = catch_error([&] { (void)co.resume(); });
    ASSERT_TRUE(reports(c, weft::coroutine_errc::resume_done, {"'finished'", "done"}));
    EXPECT_TRUE(co.done()) << "the failed resume must not change the state";
}

TEST_F(coroutine_misuse, resume_of_itself_from_inside) {
    caught_error c;
    weft::coroutine<>* self = nullptr;
    weft::coroutine<> co(std::allocator_arg, weft::test::stack(), 
        [&](weft::yielder<>& y) {
            c = catch_error([&] { (void)self->resume(); });
            y.yield();  // still usable after the failed resume
        },
        {.name = "selfish"});
    self = &co;
    EXPECT_TRUE(co.resume());
    ASSERT_TRUE(reports(c, weft::coroutine_errc::resume_self, {"'selfish'", "running"}));
    EXPECT_EQ(co.state(), weft::coroutine_state::suspended);
    EXPECT_FALSE(co.resume());
}

TEST_F(coroutine_misuse, resume_of_a_coroutine_that_is_running_further_up) {
    // a resumes b; b tries to resume a, which is running (it is b's resumer).
    caught_error c;
    weft::coroutine<>* a_ptr = nullptr;
    weft::coroutine<> b(std::allocator_arg, weft::test::stack(), [&](weft::yielder<>&) { c = catch_error([&] { (void)a_ptr->resume(); }); }, {.name = "b"});
    weft::coroutine<> a(std::allocator_arg, weft::test::stack(), [&](weft::yielder<>&) { (void)b.resume(); }, {.name = "a"});
    a_ptr = &a;
    EXPECT_FALSE(a.resume());
    ASSERT_TRUE(reports(c, weft::coroutine_errc::resume_running, {"'a'", "running"}));
    EXPECT_TRUE(b.done());
}

TEST_F(coroutine_misuse, operations_on_a_moved_from_handle) {
    weft::coroutine<int, int, int> a(std::allocator_arg, weft::test::stack(), [](weft::yielder<int, int>&, int first) { return first; });
    weft::coroutine<int, int, int> b(std::move(a));
    // NOLINTBEGIN(bugprone-use-after-move): using the moved-from handle is the point
    EXPECT_FALSE(a);
    for (auto op : std::initializer_list<std::function<void()>>{
             [&] { (void)a.resume(1); },
             [&] { (void)a.state(); },
             [&] { (void)a.done(); },
             [&] { (void)a.name(); },
             [&] { (void)a.private_data(); },
             [&] { (void)a.result(); },
         }) {
        caught_error c = catch_error(op);
        ASSERT_TRUE(reports(c, weft::coroutine_errc::empty_handle, {"empty"}));
    }
    EXPECT_FALSE(a.ref());
    a.reset();  // harmless
    // NOLINTEND(bugprone-use-after-move)
    EXPECT_FALSE(b.resume(5));
    EXPECT_EQ(b.result(), 5);
}

TEST_F(coroutine_misuse, operations_on_a_default_constructed_handle) {
    weft::coroutine<> co;
    EXPECT_FALSE(co);
    caught_error c = catch_error([&] { (void)co.resume(); });
    ASSERT_TRUE(reports(c, weft::coroutine_errc::empty_handle));
}

TEST_F(coroutine_misuse, yield_through_a_yielder_leaked_to_the_resumer) {
    weft::yielder<int>* leaked = nullptr;
    weft::coroutine<int> co(std::allocator_arg, weft::test::stack(), 
        [&leaked](weft::yielder<int>& y) {
            leaked = &y;
            y.yield(1);
            y.yield(2);
        },
        {.name = "leaky"});
    EXPECT_EQ(co.resume(), std::optional<int>(1));
    ASSERT_NE(leaked, nullptr);
    caught_error c = catch_error([&] { leaked->yield(99); });
    ASSERT_TRUE(reports(c, weft::coroutine_errc::yield_outside, {"'leaky'", "suspended"}));
    // The coroutine is unharmed.
    EXPECT_EQ(co.state(), weft::coroutine_state::suspended);
    EXPECT_EQ(co.resume(), std::optional<int>(2));
    EXPECT_FALSE(co.resume());
}

TEST_F(coroutine_misuse, yield_through_an_outer_yielder_from_an_inner_coroutine) {
    // The outer coroutine is running (it resumed inner), but the yield comes
    // from inner's stack, so it is not "inside" outer.
    caught_error c;
    weft::coroutine<> outer(std::allocator_arg, weft::test::stack(), 
        [&c](weft::yielder<>& y) {
            weft::coroutine<> inner(std::allocator_arg, weft::test::stack(), [&](weft::yielder<>&) { c = catch_error([&] { y.yield(); }); }, {.name = "inner"});
            EXPECT_FALSE(inner.resume());
            y.yield();
        },
        {.name = "outer"});
    EXPECT_TRUE(outer.resume());
    ASSERT_TRUE(reports(c, weft::coroutine_errc::yield_outside, {"'outer'"}));
    EXPECT_FALSE(outer.resume());
}

TEST_F(coroutine_misuse, this_coroutine_yield_outside_any_coroutine) {
    caught_error c = catch_error([] { weft::this_coroutine::yield(); });
    ASSERT_TRUE(reports(c, weft::coroutine_errc::yield_outside, {"outside"}));
}

TEST_F(coroutine_misuse, this_coroutine_yield_in_a_coroutine_that_yields_values) {
    caught_error c;
    weft::coroutine<int> co(std::allocator_arg, weft::test::stack(), [&c](weft::yielder<int>& y) {
        c = catch_error([] { weft::this_coroutine::yield(); });
        y.yield(5);
    },
                            {.name = "typed"});
    EXPECT_EQ(co.resume(), std::optional<int>(5));
    ASSERT_TRUE(reports(c, weft::coroutine_errc::yield_type, {"'typed'", "running"}));
    EXPECT_FALSE(co.resume());
}

TEST_F(coroutine_misuse, this_coroutine_yield_in_a_coroutine_that_receives_values) {
    caught_error c;
    weft::coroutine<void, int> co(std::allocator_arg, weft::test::stack(), [&c](weft::yielder<void, int>&, int) { c = catch_error([] { weft::this_coroutine::yield(); }); });
    EXPECT_FALSE(co.resume(1));
    ASSERT_TRUE(reports(c, weft::coroutine_errc::yield_type));
}

TEST_F(coroutine_misuse, this_coroutine_yield_works_in_plain_coroutines_from_any_depth) {
    struct deep {
        static void helper(int& steps) {
            ++steps;
            weft::this_coroutine::yield();
            ++steps;
        }
    };
    int steps = 0;
    weft::coroutine<void, void, int> co(std::allocator_arg, weft::test::stack(), [&steps](weft::yielder<>&) {
        deep::helper(steps);
        deep::helper(steps);
        return steps;
    });
    EXPECT_TRUE(co.resume());
    EXPECT_EQ(steps, 1);
    EXPECT_TRUE(co.resume());
    EXPECT_EQ(steps, 3);
    EXPECT_FALSE(co.resume());
    EXPECT_EQ(co.result(), 4);
}

TEST_F(coroutine_misuse, stack_too_small_names_the_coroutine) {
    caught_error c = catch_error([] {
        weft::coroutine<> co(std::allocator_arg, weft::malloc_stack{}, [](weft::yielder<>&) {},
                             {.stack_size = 512, .name = "cramped"});
    });
    ASSERT_TRUE(reports(c, weft::coroutine_errc::stack_too_small, {"'cramped'", "512"}));
}

TEST_F(coroutine_misuse, anonymous_coroutines_are_described_by_address) {
    weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [](weft::yielder<>&) {});
    EXPECT_FALSE(co.resume());
    caught_error c = catch_error([&] { (void)co.resume(); });
    ASSERT_TRUE(c.thrown);
    EXPECT_TRUE(mentions(c.message, "anonymous")) << c.message;
}

}  // namespace
