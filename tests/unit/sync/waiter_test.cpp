// waiter_test.cpp: the one waiter (weft/waiter.hpp) from a task and from a
// plain thread: claim exactly once, hand-over before wake, timeout, cancel.

#include <atomic>
#include <thread>

#include "runtime_fixture.hpp"
#include "weft/waiter.hpp"

namespace weft::test {
namespace {

using namespace std::chrono_literals;

TEST(waiter_test, a_thread_waiter_is_claimed_once_and_sees_the_hand_over) {
    waiter w;
    EXPECT_FALSE(w.in_task());
    w.arm();
    std::thread t([&] {
        ASSERT_TRUE(w.claim());
        EXPECT_FALSE(w.claim());
        w.code = 42;
        w.wake();
    });
    EXPECT_EQ(w.wait(), waiter::outcome::notified);
    EXPECT_EQ(w.code, 42);
    t.join();
}

TEST(waiter_test, a_thread_waiter_times_out_and_then_cannot_be_claimed) {
    waiter w;
    w.arm();
    const auto deadline = std::chrono::steady_clock::now() + 20ms;
    EXPECT_EQ(w.wait(&deadline), waiter::outcome::timed_out);
    EXPECT_GE(std::chrono::steady_clock::now(), deadline);
    EXPECT_FALSE(w.claim());
}

TEST(waiter_test, claim_self_wins_over_later_wakers) {
    waiter w;
    w.arm();
    EXPECT_TRUE(w.claim_self());
    EXPECT_FALSE(w.claim());
}

}  // namespace
}  // namespace weft::test
