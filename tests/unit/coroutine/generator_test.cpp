// generator_test.cpp: weft::generator<T> as an input range.

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <ranges>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/leak_check.hpp"
#include "support/test_stack.hpp"
#include "weft/generator.hpp"

namespace {

static_assert(std::ranges::input_range<weft::generator<int>>);
static_assert(std::ranges::input_range<weft::generator<std::unique_ptr<int>>>);
static_assert(std::input_iterator<weft::generator<int>::iterator>);
static_assert(std::sentinel_for<std::default_sentinel_t, weft::generator<int>::iterator>);
static_assert(std::is_same_v<std::ranges::range_value_t<weft::generator<std::string>>, std::string>);
static_assert(!std::is_copy_constructible_v<weft::generator<int>>);

class generator_test : public weft::test::leak_checked {};

TEST_F(generator_test, range_for_sums_the_yielded_values) {
    weft::generator<int> g(std::allocator_arg, weft::test::stack(), [](weft::generator<int>::yielder_type& y) {
        for (int i = 1; i <= 10; ++i) y.yield(i);
    });
    int sum = 0, count = 0;
    for (int v : g) {
        sum += v;
        ++count;
    }
    EXPECT_EQ(sum, 55);
    EXPECT_EQ(count, 10);
}

TEST_F(generator_test, body_does_not_run_before_begin) {
    bool started = false;
    weft::generator<int> g(std::allocator_arg, weft::test::stack(), [&started](weft::generator<int>::yielder_type& y) {
        started = true;
        y.yield(1);
    });
    EXPECT_FALSE(started);
    auto it = g.begin();
    EXPECT_TRUE(started);
    ASSERT_FALSE(it == g.end());
    EXPECT_EQ(*it, 1);
    ++it;
    EXPECT_TRUE(it == g.end());
}

TEST_F(generator_test, empty_generator_iterates_zero_times) {
    weft::generator<int> g(std::allocator_arg, weft::test::stack(), [](weft::generator<int>::yielder_type&) {});
    int count = 0;
    for (int v : g) count += v + 1;
    EXPECT_EQ(count, 0);
}

TEST_F(generator_test, early_break_then_destruction_unwinds_the_body) {
    int destroyed = 0;
    struct guard {
        int* n;
        ~guard() { ++*n; }
    };
    std::vector<int> got;
    {
        weft::generator<int> g(std::allocator_arg, weft::test::stack(), [&destroyed](weft::generator<int>::yielder_type& y) {
            guard gd{&destroyed};
            for (int i = 0;; ++i) y.yield(i);  // infinite
        });
        for (int v : g) {
            if (v == 3) break;
            got.push_back(v);
        }
        EXPECT_EQ(destroyed, 0) << "breaking out of the loop does not end the body";
    }
    EXPECT_EQ(destroyed, 1) << "destroying the generator unwinds its body";
    EXPECT_EQ(got, (std::vector<int>{0, 1, 2}));
}

// A binary tree walked in order by recursive helpers that yield from any depth.
struct node {
    int value;
    std::unique_ptr<node> left, right;
};

std::unique_ptr<node> insert(std::unique_ptr<node> n, int v) {
    if (!n) return std::make_unique<node>(node{v, nullptr, nullptr});
    if (v < n->value)
        n->left = insert(std::move(n->left), v);
    else
        n->right = insert(std::move(n->right), v);
    return n;
}

void walk(const node* n, weft::generator<int>::yielder_type& y) {
    if (!n) return;
    walk(n->left.get(), y);
    y.yield(n->value);
    walk(n->right.get(), y);
}

TEST_F(generator_test, yields_from_nested_helper_functions) {
    std::unique_ptr<node> root;
    for (int v : {50, 30, 70, 20, 40, 60, 80, 35, 45, 65}) root = insert(std::move(root), v);
    weft::generator<int> g(std::allocator_arg, weft::test::stack(), [&root](weft::generator<int>::yielder_type& y) { walk(root.get(), y); });
    std::vector<int> got;
    for (int v : g) got.push_back(v);
    EXPECT_EQ(got, (std::vector<int>{20, 30, 35, 40, 45, 50, 60, 65, 70, 80}));
}

TEST_F(generator_test, exception_from_the_body_propagates_out_of_iteration) {
    weft::generator<int> g(std::allocator_arg, weft::test::stack(), [](weft::generator<int>::yielder_type& y) {
        y.yield(1);
        y.yield(2);
        throw std::runtime_error("generator failed");
    });
    std::vector<int> got;
    try {
        for (int v : g) got.push_back(v);
        ADD_FAILURE() << "the loop ended without the exception";
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "generator failed");
    }
    EXPECT_EQ(got, (std::vector<int>{1, 2}));
}

TEST_F(generator_test, exception_before_the_first_value_propagates_out_of_begin) {
    weft::generator<int> g(std::allocator_arg, weft::test::stack(), [](weft::generator<int>::yielder_type&) { throw 7; });
    EXPECT_THROW((void)g.begin(), int);
}

TEST_F(generator_test, move_only_values) {
    weft::generator<std::unique_ptr<std::string>> g([](weft::generator<std::unique_ptr<std::string>>::yielder_type& y) {
        y.yield(std::make_unique<std::string>("one"));
        y.yield(std::make_unique<std::string>("two"));
    });
    std::vector<std::string> got;
    for (auto it = g.begin(); it != g.end(); ++it) {
        std::unique_ptr<std::string> p = std::move(*it);
        ASSERT_TRUE(p);
        got.push_back(*p);
        EXPECT_EQ(it->get(), nullptr) << "operator-> sees the moved-from current value";
    }
    EXPECT_EQ(got, (std::vector<std::string>{"one", "two"}));
}

// (std::views are not used: clang 14 cannot compile libstdc++ 12's views.)
TEST_F(generator_test, works_with_range_algorithms) {
    int produced = 0;
    weft::generator<int> naturals(std::allocator_arg, weft::test::stack(), [&produced](weft::generator<int>::yielder_type& y) {
        for (int i = 0;; ++i) {
            ++produced;
            y.yield(i);
        }
    });
    auto it = std::ranges::find_if(naturals, [](int v) { return v * v > 50; });
    ASSERT_FALSE(it == std::ranges::end(naturals));
    EXPECT_EQ(*it, 8);
    EXPECT_EQ(produced, 9) << "an input range is produced lazily, one value per step";
}

TEST_F(generator_test, custom_stack_allocator_and_options) {
    std::string seen_name;
    weft::generator<int> g(std::allocator_arg, weft::malloc_stack{},
                           [&seen_name](weft::generator<int>::yielder_type& y) {
                               seen_name = y.name();
                               y.yield(1);
                               y.yield(2);
                           },
                           {.stack_size = 16 * 1024, .name = "gen"});
    int sum = 0;
    for (int v : g) sum += v;
    EXPECT_EQ(sum, 3);
    EXPECT_EQ(seen_name, "gen");
}

TEST_F(generator_test, generators_nest) {
    auto range = [](int from, int to) {
        return weft::generator<int>(std::allocator_arg, weft::test::stack(), [from, to](weft::generator<int>::yielder_type& y) {
            for (int i = from; i < to; ++i) y.yield(i);
        });
    };
    weft::generator<int> pairs(std::allocator_arg, weft::test::stack(), [&range](weft::generator<int>::yielder_type& y) {
        for (int a : range(0, 3))
            for (int b : range(0, 3)) y.yield(a * 10 + b);
    });
    std::vector<int> got;
    for (int v : pairs) got.push_back(v);
    EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 10, 11, 12, 20, 21, 22}));
}

TEST_F(generator_test, moved_generator_keeps_iterating) {
    weft::generator<int> a(std::allocator_arg, weft::test::stack(), [](weft::generator<int>::yielder_type& y) {
        y.yield(1);
        y.yield(2);
    });
    weft::generator<int> b(std::move(a));
    int sum = 0;
    for (int v : b) sum += v;
    EXPECT_EQ(sum, 3);
}

}  // namespace
