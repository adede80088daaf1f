// tls_migration_test.cpp: a coroutine suspended on one thread and resumed on
// another sees the new thread's thread-locals and errno, and weft's own
// "current coroutine" bookkeeping lands on the right thread. Compilers may
// reuse a thread-local address after a call (gcc 12 and clang 14 did from
// -O1, clang even at -O0; docs/measurements.md has the measurements), so the test
// reads them through accessors that the optimiser cannot see through, as
// user code that migrates must.

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <thread>

#include "support/leak_check.hpp"
#include "support/test_stack.hpp"
#include "weft/coroutine.hpp"

namespace {

thread_local int tls_marker = 0;

// fresh_*() recompute the address on the thread that calls them.
__attribute__((noinline)) int* fresh_tls() {
    int* p = &tls_marker;
    asm volatile("" : "+r"(p));
    return p;
}
__attribute__((noinline)) int* fresh_errno() {
    int* p = &errno;
    asm volatile("" : "+r"(p));
    return p;
}

struct seen {
    int* tls = nullptr;
    int* err = nullptr;
    int tls_value = 0;
    weft::coroutine_ref current;
    bool inner_ok = false;
};

class tls_migration_test : public weft::test::leak_checked {};

TEST_F(tls_migration_test, resumed_on_another_thread_sees_that_threads_state) {
    seen before, after;
    weft::coroutine<> inner(std::allocator_arg, weft::test::stack(), [](weft::yielder<>& y) {
        for (;;) y.yield();
    }, {.name = "inner"});
    weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [&](weft::yielder<>& y) {
        before = {fresh_tls(), fresh_errno(), *fresh_tls(), weft::this_coroutine::get(), false};
        y.yield();
        after = {fresh_tls(), fresh_errno(), *fresh_tls(), weft::this_coroutine::get(), false};
        // A nested coroutine on the new thread: current is set and restored there.
        (void)inner.resume();
        after.inner_ok = weft::this_coroutine::get() == co.ref();
        *fresh_errno() = 4321;
        y.yield();
    }, {.name = "migrant"});

    // Both threads stay alive until the end, so their thread-locals are
    // distinct: A runs the first leg, then B runs the second.
    std::atomic<int> phase{0};
    auto wait_for = [&](int p) {
        while (phase.load() != p) std::this_thread::yield();
    };
    int* a_tls = nullptr;
    int* a_err = nullptr;
    bool a_inside_after = true;
    std::thread a([&] {
        tls_marker = 1;
        errno = 0;
        a_tls = &tls_marker;
        a_err = &errno;
        (void)co.resume();
        a_inside_after = weft::this_coroutine::inside();
        phase = 1;
        wait_for(2);
    });
    int* b_tls = nullptr;
    int* b_err = nullptr;
    int b_errno_after = 0;
    bool b_inside_after = true;
    std::thread b([&] {
        tls_marker = 2;
        errno = 0;
        b_tls = &tls_marker;
        b_err = &errno;
        wait_for(1);
        (void)co.resume();
        b_inside_after = weft::this_coroutine::inside();
        b_errno_after = errno;
        phase = 2;
    });
    a.join();
    b.join();

    EXPECT_EQ(before.tls, a_tls);
    EXPECT_EQ(before.err, a_err);
    EXPECT_EQ(before.tls_value, 1);
    EXPECT_EQ(after.tls, b_tls);
    EXPECT_EQ(after.err, b_err);
    EXPECT_EQ(after.tls_value, 2);
    EXPECT_NE(a_tls, b_tls);
    EXPECT_TRUE(before.current == co.ref());
    EXPECT_TRUE(after.current == co.ref());
    EXPECT_TRUE(after.inner_ok);
    EXPECT_FALSE(a_inside_after);
    EXPECT_FALSE(b_inside_after);
    EXPECT_EQ(b_errno_after, 4321);  // written inside the coroutine, on thread B
    EXPECT_FALSE(weft::this_coroutine::inside());
    EXPECT_EQ(co.state(), weft::coroutine_state::suspended);
}

TEST_F(tls_migration_test, ping_pong_between_threads_keeps_current_right) {
    // Many legs alternating between two threads; the coroutine checks that
    // weft reports it as current after every migration.
    int wrong = 0;
    weft::coroutine<int, int> co(std::allocator_arg, weft::test::stack(), [&](auto& y, int leg) {
        for (;;) {
            if (!(weft::this_coroutine::get() == co.ref())) ++wrong;
            leg = y.yield(leg);
        }
    });
    for (int leg = 0; leg < 200; ++leg) {
        int got = -1;
        std::thread t([&] { got = *co.resume(leg); });
        t.join();
        ASSERT_EQ(got, leg);
    }
    EXPECT_EQ(wrong, 0);
}

}  // namespace
