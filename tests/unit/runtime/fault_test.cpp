// fault_test.cpp: allocation failures injected into the runtime's spawn,
// channel and timer paths (tests/support/leak_check.hpp: fail_new_at()).
//
// Each test fails the 1st, 2nd, ... operator new of one operation in turn,
// until the operation runs without reaching the failure (every allocation
// it makes has then failed once). At each step the operation must either
// succeed or throw std::bad_alloc, and only when the injected failure fired;
// what it touched must be as before (no task, no value, nothing leaked: the
// fixture counts coroutines and stacks, `counted` the callables' copies, and
// the ASan builds' LeakSanitizer the rest), and the runtime must still run a
// fresh task. The failures are injected on the test's thread only: spawn()
// from that thread, or tasks of a runtime without workers that the test's
// thread drives.
//
// Where the injection cannot work (TSan's and valgrind's operator new replace
// the test's) the tests say so and skip.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <new>
#include <optional>
#include <string>

#include "unit/runtime/runtime_fixture.hpp"
#include "weft/runtime.hpp"
#include "weft/sync.hpp"

namespace {

using namespace std::chrono_literals;
using weft::test::counted;
using weft::test::eventually;

// armed fails the n-th operator new of this thread while it lives.
class armed {
public:
    explicit armed(std::uint64_t n) noexcept { weft::test::fail_new_at(n); }
    ~armed() { weft::test::fail_new_at(0); }
    armed(const armed&) = delete;
    armed& operator=(const armed&) = delete;
};

// fail_each_allocation(op, after) runs op() with its 1st, 2nd, ... operator
// new failing, and after(n, threw) once op() has returned or thrown
// bad_alloc (anything else op() throws fails the test). It stops at the
// first n where the failure did not fire, that is when op() made fewer than
// n allocations, and returns how many op() made (n - 1); -1 if op() never
// stopped allocating.
template <class Op, class After>
int fail_each_allocation(Op op, After after, int limit = 200) {
    for (int n = 1; n <= limit; ++n) {
        SCOPED_TRACE(testing::Message() << "operator new call " << n << " fails");
        bool threw = false, fired = false;
        {
            armed a(static_cast<std::uint64_t>(n));
            try {
                op();
            } catch (const std::bad_alloc&) {
                threw = true;
            }
            fired = weft::test::new_failure_fired();
        }
        if (threw) {
            EXPECT_TRUE(fired) << "std::bad_alloc thrown without the injected failure";
        }
        after(n, threw);
        if (::testing::Test::HasFatalFailure()) return -1;
        if (!fired) return n - 1;
        // Fired and op() succeeded: weft handled that failure itself. Fine.
    }
    ADD_FAILURE() << "still allocating after " << limit << " operator new calls";
    return -1;
}

#define WEFT_SKIP_UNLESS_INJECTABLE()                                                                          \
    if (!weft::test::new_failures_can_be_injected())                                                           \
    GTEST_SKIP() << "operator new is not the test's here (TSan's runtime or valgrind's memcheck replaces it), " \
                    "so no allocation failure can be injected"

// runs_a_fresh_task() says whether rt still runs a new task to the end.
bool runs_a_fresh_task(weft::runtime& rt) {
    return rt.block_on([] { return weft::spawn([] { return 41; }).join() + 1; }) == 42;
}

class fault_test : public weft::test::runtime_fixture {};
class alloc_fault_test : public weft::test::leak_checked {
protected:
    weft::test::watchdog dog_;
};

TEST(fault_injection, fail_new_at_fails_exactly_the_armed_call) {
    WEFT_SKIP_UNLESS_INJECTABLE();
    weft::test::fail_new_at(3);
    void* volatile a = ::operator new(8);
    void* volatile b = ::operator new(8);
    EXPECT_FALSE(weft::test::new_failure_fired());
    EXPECT_THROW((void)::operator new(8), std::bad_alloc);
    EXPECT_TRUE(weft::test::new_failure_fired());
    void* volatile c = ::operator new(8);  // one call only
    weft::test::fail_new_at(0);
    ::operator delete(a);
    ::operator delete(b);
    ::operator delete(c);
}

// spawn(): the task's block, the callable's copy (its std::string) and
// whatever submitting the task needs. A failed spawn leaves no task, no copy
// of the callable, and the runtime as it was.
TEST_P(fault_test, spawn_without_memory_throws_bad_alloc_and_leaves_no_task) {
    WEFT_SKIP_UNLESS_INJECTABLE();
    counted::reset();
    {
        weft::runtime rt(options());
        dog_.show(&rt);
        std::atomic<int> ran{0};
        const std::string payload(300, 'p');  // copying it allocates
        counted token;
        auto body = [payload, token, &ran] {
            ran.fetch_add(1);
            return payload.size();
        };
        std::optional<weft::join_handle<std::size_t>> h;
        int expected_runs = 0;
        const int allocations = fail_each_allocation(
            [&] { h.emplace(rt.spawn(body, {.name = "fault injected"})); },  // body is copied
            [&](int, bool threw) {
                if (threw) {
                    EXPECT_FALSE(h.has_value());
                } else {
                    ASSERT_TRUE(h.has_value());
                    // Joined from a task: block_on drives a runtime without workers.
                    EXPECT_EQ(rt.block_on([&] { return h->join(); }), payload.size());
                    h.reset();
                    ++expected_runs;
                }
                EXPECT_TRUE(eventually([&] { return rt.live_tasks() == 0; })) << rt.live_tasks() << " live tasks";
                EXPECT_EQ(ran.load(), expected_runs) << "a task ran that spawn() reported as not made";
                // The copies of the callable: the original `body` holds one
                // token, every other copy must be gone.
                EXPECT_EQ(counted::made.load() - counted::gone.load(), 2) << "a copy of the callable leaked";
                EXPECT_TRUE(runs_a_fresh_task(rt));
            });
        EXPECT_GE(allocations, 2) << "spawn() should allocate the task's block and copy the string";
        std::printf("[ info     ] spawn() made %d allocation(s); each failed once\n", allocations);
        EXPECT_EQ(expected_runs, 1);
        dog_.show(nullptr);
    }
    EXPECT_EQ(counted::made.load(), counted::gone.load());
}

// A send of a value whose copy allocates (send(const T&) copies before it
// takes the channel's lock): a failed copy leaves the channel as it was, and
// its lock free.
TEST_F(alloc_fault_test, a_channel_send_whose_copy_fails_throws_bad_alloc_and_leaves_the_channel_as_it_was) {
    WEFT_SKIP_UNLESS_INJECTABLE();
    weft::runtime rt({.workers = 0});
    rt.block_on([] {
        weft::channel<std::string> ch(4);
        const std::string value(500, 'v');
        ch.send(std::string("first"));
        const int allocations = fail_each_allocation([&] { ch.send(value); },
                                                     [&](int, bool threw) {
                                                         auto r = ch.try_recv();
                                                         ASSERT_EQ(r.status, weft::channel_status::ok);
                                                         EXPECT_EQ(*r.value, "first");
                                                         if (!threw) {
                                                             r = ch.try_recv();
                                                             ASSERT_EQ(r.status, weft::channel_status::ok);
                                                             EXPECT_EQ(*r.value, value);
                                                         }
                                                         EXPECT_EQ(ch.try_recv().status, weft::channel_status::empty);
                                                         ch.send(std::string("first"));
                                                     });
        EXPECT_GE(allocations, 1);
    });
    EXPECT_TRUE(runs_a_fresh_task(rt));
}

// An unbounded channel grows its ring inside send, under the channel's lock:
// a failed growth throws bad_alloc from send, keeps every value already
// queued (in order) and leaves the lock free.
TEST_F(alloc_fault_test, an_unbounded_channel_that_cannot_grow_throws_bad_alloc_and_keeps_its_values) {
    WEFT_SKIP_UNLESS_INJECTABLE();
    weft::runtime rt({.workers = 0});
    rt.block_on([] {
        weft::channel<std::string> ch(weft::channel<std::string>::unbounded);
        // Short strings: moving and storing them allocates nothing, so the
        // only allocation of a send is the ring's growth.
        auto fill = [&] {
            for (int i = 0; i < 16; ++i) ch.send(std::to_string(i));
        };
        fill();
        int grew = 0;
        const int allocations = fail_each_allocation([&] { ch.send(std::string("new")); },
                                                     [&](int, bool threw) {
                                                         for (int i = 0; i < 16; ++i) {
                                                             auto r = ch.try_recv();
                                                             ASSERT_EQ(r.status, weft::channel_status::ok) << i;
                                                             EXPECT_EQ(*r.value, std::to_string(i));
                                                         }
                                                         if (!threw) {
                                                             ++grew;
                                                             auto r = ch.try_recv();
                                                             ASSERT_EQ(r.status, weft::channel_status::ok);
                                                             EXPECT_EQ(*r.value, "new");
                                                         }
                                                         EXPECT_EQ(ch.try_recv().status, weft::channel_status::empty);
                                                         fill();
                                                     });
        EXPECT_GE(allocations, 1) << "the 17th value should grow the ring";
        std::printf("[ info     ] a growing send made %d allocation(s); each failed once\n", allocations);
        EXPECT_EQ(grew, 1);
        // It still works as a channel afterwards.
        ch.send(std::string("after"));
        for (int i = 0; i < 16; ++i) EXPECT_EQ(*ch.try_recv().value, std::to_string(i));
        EXPECT_EQ(*ch.try_recv().value, "after");
    });
    EXPECT_TRUE(runs_a_fresh_task(rt));
}

// Timed waits: sleep_for and a channel's recv_for arm a timer and park the
// task. Whatever they allocate (the test's thread drives the runtime, so
// that includes the scheduler's work while the task sleeps) may fail: the
// wait then throws bad_alloc or completes as usual, and the runtime goes on.
TEST_F(alloc_fault_test, timed_waits_without_memory_complete_or_throw_bad_alloc) {
    WEFT_SKIP_UNLESS_INJECTABLE();
    weft::runtime rt({.workers = 0});
    rt.block_on([] {
        const int sleeps = fail_each_allocation(
            [] {
                const auto t0 = std::chrono::steady_clock::now();
                weft::this_task::sleep_for(2ms);
                EXPECT_GE(std::chrono::steady_clock::now() - t0, 2ms);
            },
            [](int, bool) {});
        EXPECT_GE(sleeps, 0);
        weft::channel<int> ch(1);
        const int recvs = fail_each_allocation(
            [&] { EXPECT_EQ(ch.recv_for(2ms).status, weft::channel_status::timeout); },
            [&](int, bool) {
                ASSERT_EQ(ch.try_send(5), weft::channel_status::ok);
                EXPECT_EQ(*ch.try_recv().value, 5);
            });
        EXPECT_GE(recvs, 0);
        std::printf("[ info     ] allocations: sleep_for %d, recv_for %d\n", sleeps, recvs);
    });
    EXPECT_TRUE(runs_a_fresh_task(rt));
}

INSTANTIATE_TEST_SUITE_P(workers, fault_test, weft::test::worker_counts(), weft::test::worker_param_name);

}  // namespace
