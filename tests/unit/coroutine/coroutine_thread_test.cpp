// coroutine_thread_test.cpp: a coroutine suspended on one thread and resumed
// on another. Every hand-over is ordered by std::thread's start and join.

#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <optional>
#include <thread>
#include <vector>

#include "support/leak_check.hpp"
#include "support/test_stack.hpp"
#include "weft/coroutine.hpp"

namespace {

class coroutine_threads : public weft::test::leak_checked {};

// thread_id() is the kernel's id of the calling thread. Not
// std::this_thread::get_id(): it calls pthread_self(), which glibc declares
// __attribute__((const)), so an optimiser may reuse one result across a yield
// after which the coroutine runs on another thread.
long thread_id() noexcept { return ::syscall(SYS_gettid); }

// step records what the body saw at one point of its run.
struct step {
    long thread = 0;
    bool right_coroutine = false;
    int received = 0;
};

TEST_F(coroutine_threads, resumed_on_another_thread_values_flow_and_this_coroutine_is_right) {
    std::vector<step> steps;
    weft::coroutine_ref self;
    weft::coroutine<int, int, int> co(std::allocator_arg, weft::test::stack(), 
        [&](weft::yielder<int, int>& y, int first) {
            steps.push_back({thread_id(), weft::this_coroutine::get() == self, first});
            const int second = y.yield(first + 1);
            steps.push_back({thread_id(), weft::this_coroutine::get() == self, second});
            const int third = y.yield(second + 1);
            steps.push_back({thread_id(), weft::this_coroutine::get() == self, third});
            return first + second + third;
        },
        {.name = "traveller"});
    self = co.ref();

    // Step 1 on this thread.
    EXPECT_EQ(co.resume(10), std::optional<int>(11));

    // Step 2 on another thread.
    std::optional<int> from_other;
    bool inside_after = true;
    long other_id = 0;
    std::thread t([&] {
        other_id = thread_id();
        from_other = co.resume(20);
        inside_after = weft::this_coroutine::inside();
    });
    t.join();
    EXPECT_EQ(from_other, std::optional<int>(21));
    EXPECT_FALSE(inside_after) << "the other thread must be outside the coroutine once its resume() returned";

    // Step 3 back on this thread.
    EXPECT_FALSE(co.resume(30));
    EXPECT_FALSE(weft::this_coroutine::inside());
    EXPECT_EQ(co.result(), 60);

    ASSERT_EQ(steps.size(), 3u);
    EXPECT_EQ(steps[0].thread, thread_id());
    EXPECT_EQ(steps[1].thread, other_id);
    EXPECT_NE(steps[1].thread, steps[0].thread);
    EXPECT_EQ(steps[2].thread, thread_id());
    for (const step& s : steps) EXPECT_TRUE(s.right_coroutine);
    EXPECT_EQ(steps[0].received, 10);
    EXPECT_EQ(steps[1].received, 20);
    EXPECT_EQ(steps[2].received, 30);
}

TEST_F(coroutine_threads, handle_moved_to_a_chain_of_threads) {
    constexpr int hops = 4;
    std::vector<long> body_threads, resumer_threads;
    weft::coroutine<int> co(std::allocator_arg, weft::test::stack(), [&body_threads](weft::yielder<int>& y) {
        for (int i = 0; i < hops; ++i) {
            body_threads.push_back(thread_id());
            y.yield(i);
        }
    });
    int sum = 0;
    for (int i = 0; i < hops; ++i) {
        // Each hop owns the handle while it runs, then hands it back.
        std::thread t([&, c = std::move(co)]() mutable {
            resumer_threads.push_back(thread_id());
            sum += *c.resume();
            co = std::move(c);
        });
        t.join();
    }
    EXPECT_EQ(sum, 0 + 1 + 2 + 3);
    EXPECT_FALSE(co.resume());
    EXPECT_EQ(body_threads, resumer_threads);
}

TEST_F(coroutine_threads, created_on_one_thread_destroyed_while_suspended_on_another) {
    int unwound = 0;
    struct guard {
        int* n;
        ~guard() { ++*n; }
    };
    weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [&unwound](weft::yielder<>& y) {
        guard g{&unwound};
        y.yield();
        y.yield();
    });
    EXPECT_TRUE(co.resume());
    bool inside_after = true;
    std::thread t([&] {
        EXPECT_TRUE(co.resume());
        co.reset();  // unwinds on this thread
        inside_after = weft::this_coroutine::inside();
    });
    t.join();
    EXPECT_EQ(unwound, 1);
    EXPECT_FALSE(inside_after);
}

TEST_F(coroutine_threads, coroutines_on_separate_threads_do_not_see_each_other) {
    constexpr int threads = 4;
    std::vector<int> ok(threads, 0);
    std::vector<std::thread> pool;
    for (int k = 0; k < threads; ++k) {
        pool.emplace_back([k, &ok] {
            weft::coroutine<int> co(std::allocator_arg, weft::test::stack(), [k](weft::yielder<int>& y) {
                for (int i = 0; i < 1000; ++i) y.yield(k * 10000 + i);
            });
            const weft::coroutine_ref mine = co.ref();
            int good = 0;
            bool wrong_current = false;
            weft::coroutine<> checker(std::allocator_arg, weft::test::stack(), [&](weft::yielder<>&) {
                for (int i = 0; i < 1000; ++i) {
                    auto v = co.resume();
                    if (v && *v == k * 10000 + i) ++good;
                    // Back in checker after co yielded.
                    if (weft::this_coroutine::get() == mine) wrong_current = true;
                }
            });
            (void)checker.resume();
            ok[static_cast<std::size_t>(k)] = (good == 1000 && !wrong_current) ? 1 : 0;
        });
    }
    for (auto& t : pool) t.join();
    for (int k = 0; k < threads; ++k) EXPECT_EQ(ok[static_cast<std::size_t>(k)], 1) << "thread " << k;
}

}  // namespace
