// many_tasks_test.cpp: many tasks alive at once, on 2 workers.
//
//   * WEFT_TEST_MANY_TASKS tasks on the runtime's default (guarded) stacks,
//     all sleeping at once, then half canceled and the rest stopped. The
//     default 40,000 is more than vm.max_map_count (65530 by default) allows
//     guarded stacks (two mappings each, about 32,700): the rest run on
//     runtime_options::stack_fallback's heap stacks.
//   * 5/2 * WEFT_TEST_MANY_TASKS copy-stack tasks (100,000 by default)
//     sleeping at once, then stopped.
//
// WEFT_TEST_MANY_TASKS is an environment variable: 40000 by default, 2000 in
// sanitizer builds; set it lower where mappings or memory are tight (under
// valgrind, say: WEFT_TEST_MANY_TASKS=1000).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <vector>

#include "support/proc_maps.hpp"
#include "unit/runtime/runtime_fixture.hpp"
#include "weft/runtime.hpp"

namespace {

using namespace std::chrono_literals;
using weft::task_state;
using weft::test::counted;
using weft::test::eventually;

class many_tasks_test : public weft::test::leak_checked {
protected:
    weft::test::watchdog dog_;
};

std::size_t many_tasks() { return weft::test::env_count("WEFT_TEST_MANY_TASKS", 40000, 2000); }

TEST_F(many_tasks_test, many_sleeping_tasks_on_default_stacks_then_canceled_and_stopped) {
    const std::size_t n = many_tasks();
    counted::reset();
    std::atomic<std::size_t> sleeping{0};
    std::atomic<int> woke{0};
    std::vector<weft::join_handle<void>> hs;
    hs.reserve(n);
    std::size_t peak_maps = 0;
    {
        weft::runtime rt({.workers = 2});
        dog_.show(&rt);
        for (std::size_t i = 0; i < n; ++i)
            hs.push_back(rt.spawn([&] {
                counted c;
                sleeping.fetch_add(1);
                weft::this_task::sleep_for(1h);
                woke.fetch_add(1);
            }));
        ASSERT_TRUE(eventually([&] { return sleeping.load() == n; }, 50s))
            << sleeping.load() << " of " << n << " tasks started";
        EXPECT_EQ(rt.live_tasks(), n);
        peak_maps = weft::test::read_maps().size();
        for (std::size_t i = 0; i < n; i += 2) hs[i].cancel();
        for (std::size_t i = 0; i < n; i += 2) {
            EXPECT_TRUE(hs[i].wait_for(50s));
            EXPECT_EQ(hs[i].state(), task_state::canceled);
        }
        EXPECT_EQ(rt.live_tasks(), n - (n + 1) / 2);
        dog_.show(nullptr);
    }  // ~runtime cancels the other half
    EXPECT_EQ(woke.load(), 0);
    std::size_t canceled = 0;
    for (auto& h : hs) {
        if (h.state() == task_state::canceled) ++canceled;
        EXPECT_THROW(h.join(), weft::task_canceled);
    }
    EXPECT_EQ(canceled, n);
    hs.clear();
    EXPECT_EQ(counted::made.load(), counted::gone.load());
    std::printf("[ info     ] %zu tasks slept at once; %zu memory mappings at the peak\n", n, peak_maps);
}

TEST_F(many_tasks_test, many_sleeping_copy_stack_tasks_then_stopped) {
    const std::size_t n = many_tasks() * 5 / 2;
    counted::reset();
    std::atomic<std::size_t> sleeping{0};
    std::vector<weft::join_handle<void>> hs;
    hs.reserve(n);
    {
        weft::runtime rt({.workers = 2});
        dog_.show(&rt);
        for (std::size_t i = 0; i < n; ++i)
            hs.push_back(rt.spawn(
                [&] {
                    counted c;
                    sleeping.fetch_add(1);
                    weft::this_task::sleep_for(1h);
                },
                {.copy_stack = true}));
        ASSERT_TRUE(eventually([&] { return sleeping.load() == n; }, 50s))
            << sleeping.load() << " of " << n << " copy-stack tasks started";
        EXPECT_EQ(rt.live_tasks(), n);
        // A few of them woken while the rest sleep still run and end.
        for (std::size_t i = 0; i < n; i += n / 10) hs[i].cancel();
        for (std::size_t i = 0; i < n; i += n / 10) EXPECT_THROW(hs[i].join(), weft::task_canceled);
        dog_.show(nullptr);
    }
    for (auto& h : hs)
        if (h.valid()) {
            EXPECT_EQ(h.state(), task_state::canceled);
            h.detach();
        }
    hs.clear();
    EXPECT_EQ(counted::made.load(), counted::gone.load());
}

}  // namespace
