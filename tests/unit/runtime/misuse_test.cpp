// misuse_test.cpp: what weft reports when tasks and runtimes are misused
// (task_error and its task_errc), the misuse that aborts (a runtime
// destroyed from inside its own task: death tests), and tasks that cannot
// get a stack (stack_error through join(), in a child process whose address
// space or memory mappings are made to run out). Workers 0, 1, 2, 4.

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "unit/runtime/runtime_fixture.hpp"
#include "weft/runtime.hpp"

namespace {

using namespace std::chrono_literals;
using weft::task_errc;
using weft::task_state;
using weft::test::driver;
using weft::test::errc_of;
using weft::test::eventually;

class misuse_test : public weft::test::runtime_fixture {};
// The death tests fork: no watchdog thread here, so that the parent is
// single-threaded when it forks (ThreadSanitizer refuses to start threads in
// the child of a multi-threaded fork, and the children start workers).
class runtime_DeathTest : public weft::test::leak_checked, public ::testing::WithParamInterface<unsigned> {
protected:
    [[nodiscard]] unsigned workers() const { return GetParam(); }
};

// ------------------------------------------------------------ handles

TEST_P(misuse_test, join_twice) {
    weft::runtime rt(options());
    driver d(rt);
    auto h = rt.spawn([] { return 1; });
    EXPECT_EQ(h.join(), 1);
    EXPECT_FALSE(h.valid());
    EXPECT_EQ(errc_of([&] { (void)h.join(); }), task_errc::join_twice);
    EXPECT_EQ(errc_of([&] { (void)h.wait_for(1ms); }), task_errc::join_twice);
    EXPECT_EQ(errc_of([&] { (void)h.try_join(); }), task_errc::join_twice);
    EXPECT_EQ(errc_of([&] { (void)h.state(); }), task_errc::join_twice);
    // A joined handle moved on stays "joined".
    auto moved = std::move(h);
    EXPECT_EQ(errc_of([&] { (void)moved.join(); }), task_errc::join_twice);
    // try_join that succeeded counts as a join.
    auto t = rt.spawn([] {});
    ASSERT_TRUE(t.wait_for(20s));
    EXPECT_TRUE(t.try_join());
    EXPECT_EQ(errc_of([&] { t.join(); }), task_errc::join_twice);
    // From inside a task too.
    d.stop();
    rt.block_on([] {
        auto c = weft::spawn([] { return 2; });
        EXPECT_EQ(c.join(), 2);
        EXPECT_EQ(errc_of([&] { (void)c.join(); }), task_errc::join_twice);
    });
}

TEST_P(misuse_test, moved_from_default_and_detached_handles_are_empty) {
    weft::runtime rt(options());
    driver d(rt);
    auto h = rt.spawn([] { return 3; });
    auto h2 = std::move(h);
    weft::join_handle<int> none;
    auto detached = rt.spawn([] { return 4; });
    detached.detach();
    for (weft::join_handle<int>* e : {&h, &none, &detached}) {
        EXPECT_FALSE(e->valid());
        EXPECT_FALSE(static_cast<bool>(*e));
        EXPECT_EQ(errc_of([&] { (void)e->join(); }), task_errc::empty_handle);
        EXPECT_EQ(errc_of([&] { (void)e->wait_for(1ms); }), task_errc::empty_handle);
        EXPECT_EQ(errc_of([&] { (void)e->wait_until(std::chrono::steady_clock::now()); }), task_errc::empty_handle);
        EXPECT_EQ(errc_of([&] { (void)e->is_ready(); }), task_errc::empty_handle);
        EXPECT_EQ(errc_of([&] { (void)e->try_join(); }), task_errc::empty_handle);
        EXPECT_EQ(errc_of([&] { e->cancel(); }), task_errc::empty_handle);
        EXPECT_EQ(errc_of([&] { e->detach(); }), task_errc::empty_handle);
        EXPECT_EQ(errc_of([&] { (void)e->id(); }), task_errc::empty_handle);
        EXPECT_EQ(errc_of([&] { (void)e->name(); }), task_errc::empty_handle);
        EXPECT_EQ(errc_of([&] { (void)e->state(); }), task_errc::empty_handle);
    }
    EXPECT_EQ(h2.join(), 3);
    // Move assignment over a live handle detaches the old task (it runs on).
    std::atomic<bool> ran{false};
    auto a = rt.spawn([&] {
        weft::this_task::sleep_for(1ms);
        ran = true;
        return 5;
    });
    a = rt.spawn([] { return 6; });
    EXPECT_EQ(a.join(), 6);
    EXPECT_TRUE(eventually([&] { return ran.load(); }));
    try {
        (void)none.join();
        FAIL() << "no throw";
    } catch (const weft::task_error& e) {
        EXPECT_NE(std::string(e.what()).find("empty join_handle"), std::string::npos) << e.what();
    }
}

TEST_P(misuse_test, join_from_inside_the_same_task) {
    weft::runtime rt(options());
    driver d(rt);
    std::atomic<weft::join_handle<int>*> self{nullptr};
    std::atomic<int> join_code{-1}, wait_code{-1};
    std::string what;
    auto h = rt.spawn(
        [&] {
            while (!self.load()) weft::this_task::yield();
            try {
                (void)self.load()->join();
            } catch (const weft::task_error& e) {
                join_code = static_cast<int>(e.code());
                what = e.what();
            }
            if (auto c = errc_of([&] { (void)self.load()->wait_for(1ms); })) wait_code = static_cast<int>(*c);
            return 5;
        },
        {.name = "narcissus"});
    self = &h;
    ASSERT_TRUE(h.wait_for(20s));
    EXPECT_EQ(join_code.load(), static_cast<int>(task_errc::join_self));
    EXPECT_EQ(wait_code.load(), static_cast<int>(task_errc::join_self));
    EXPECT_NE(what.find("narcissus"), std::string::npos) << what;
    EXPECT_EQ(h.join(), 5) << "the handle is still usable after the misuse";
}

// ------------------------------------------------------------ outside a task

TEST_P(misuse_test, task_operations_outside_a_task_throw_not_in_task) {
    weft::runtime rt(options());
    EXPECT_FALSE(weft::this_task::inside());
    EXPECT_EQ(errc_of([] { weft::this_task::yield(); }), task_errc::not_in_task);
    EXPECT_EQ(errc_of([] { (void)weft::spawn([] {}); }), task_errc::not_in_task);
    EXPECT_EQ(errc_of([] { (void)weft::this_task::id(); }), task_errc::not_in_task);
    EXPECT_EQ(errc_of([] { (void)weft::this_task::name(); }), task_errc::not_in_task);
    EXPECT_EQ(errc_of([] { (void)weft::this_task::worker(); }), task_errc::not_in_task);
    EXPECT_EQ(errc_of([] { (void)weft::this_task::cancellation_requested(); }), task_errc::not_in_task);
    EXPECT_EQ(errc_of([] { weft::this_task::shield s; }), task_errc::not_in_task);
    EXPECT_EQ(errc_of([] { (void)weft::then(weft::join_handle<int>{}, [](int) {}); }), task_errc::not_in_task);
    EXPECT_TRUE(rt.block_on([] { return weft::this_task::inside(); }));
    // On another plain thread likewise.
    std::atomic<int> code{-1};
    std::thread t([&] {
        if (auto c = errc_of([] { weft::this_task::yield(); })) code = static_cast<int>(*c);
    });
    t.join();
    EXPECT_EQ(code.load(), static_cast<int>(task_errc::not_in_task));
}

TEST_P(misuse_test, the_error_names_the_call_made_outside_a_task) {
    auto what_of = [](auto&& f) -> std::string {
        try {
            f();
        } catch (const weft::task_error& e) {
            return e.what();
        }
        return "(nothing thrown)";
    };
    EXPECT_EQ(what_of([] { weft::this_task::yield(); }),
              "weft: weft::this_task::yield() must be called from inside a weft task");
    EXPECT_NE(what_of([] { (void)weft::spawn([] {}); }).find("weft::spawn()"), std::string::npos);
    EXPECT_NE(what_of([] { weft::this_task::shield s; }).find("weft::this_task::shield"), std::string::npos);
}

TEST_P(misuse_test, sleeping_outside_a_task_blocks_the_thread) {
    // As io calls and blocking() do on a plain thread (never less than asked).
    auto t0 = std::chrono::steady_clock::now();
    weft::this_task::sleep_for(3ms);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 3ms);
    t0 = std::chrono::steady_clock::now();
    weft::this_task::sleep_until(t0 + 2ms);
    EXPECT_GE(std::chrono::steady_clock::now(), t0 + 2ms);
}

// ------------------------------------------------------------ driving from inside a task

TEST_P(misuse_test, block_on_from_inside_a_task_throws_inside_task) {
    weft::runtime rt(options());
    const auto code = rt.block_on([&] { return errc_of([&] { (void)rt.block_on([] { return 1; }); }); });
    EXPECT_EQ(code, task_errc::inside_task) << "block_on from inside a task of the same runtime, workers "
                                            << workers();
}

TEST_P(misuse_test, run_once_and_run_for_from_inside_a_task_throw_inside_task) {
    weft::runtime rt(options());
    const auto once = rt.block_on([&] { return errc_of([&] { (void)rt.run_once(); }); });
    EXPECT_EQ(once, task_errc::inside_task) << "run_once from inside a task, workers " << workers();
    const auto run_for = rt.block_on([&] { return errc_of([&] { (void)rt.run_for(1ms); }); });
    EXPECT_EQ(run_for, task_errc::inside_task) << "run_for from inside a task, workers " << workers();
}

TEST_P(misuse_test, stop_from_inside_a_task_throws_inside_task) {
    weft::runtime rt(options());
    std::string what;
    const auto code = rt.block_on(
        [&] {
            try {
                rt.stop();
            } catch (const weft::task_error& e) {
                what = e.what();
                return std::optional<task_errc>(e.code());
            }
            return std::optional<task_errc>();
        },
        {.name = "stopper"});
    EXPECT_EQ(code, task_errc::inside_task);
    EXPECT_NE(what.find("stopper"), std::string::npos) << what;
    EXPECT_EQ(rt.block_on([] { return 1; }), 1) << "the runtime was not stopped";
}

TEST_P(misuse_test, a_second_driver_is_refused_with_driver_busy) {
    if (workers() != 0) GTEST_SKIP() << "only a runtime without workers has a driver";
    weft::runtime rt(options());
    std::atomic<bool> running{false}, release{false};
    std::thread first([&] {
        rt.block_on([&] {
            running = true;
            const auto end = std::chrono::steady_clock::now() + 20s;
            while (!release.load() && std::chrono::steady_clock::now() < end) std::this_thread::yield();
        });
    });
    ASSERT_TRUE(eventually([&] { return running.load(); }));
    EXPECT_EQ(errc_of([&] { (void)rt.run_once(); }), task_errc::driver_busy);
    EXPECT_EQ(errc_of([&] { (void)rt.run_for(1ms); }), task_errc::driver_busy);
    EXPECT_EQ(errc_of([&] { (void)rt.block_on([] { return 0; }); }), task_errc::driver_busy);
    release = true;
    first.join();
    EXPECT_EQ(rt.block_on([] { return 2; }), 2);
}

TEST_P(misuse_test, bad_options_throw_bad_option) {
    EXPECT_EQ(errc_of([&] { weft::runtime rt({.workers = 5000}); }), task_errc::bad_option);
    auto o = options();
    o.blocking_threads = 0;
    EXPECT_EQ(errc_of([&] { weft::runtime rt(o); }), task_errc::bad_option);
}

// ------------------------------------------------------------ death tests

TEST_P(runtime_DeathTest, destroying_a_runtime_from_inside_its_own_task_aborts) {
    if (weft::test::under_user_mode_emulator())
        GTEST_SKIP() << "qemu-user: a forked child of a process that had threads cannot start threads, and RLIMIT_AS "
                        "is not applied to the guest";
    const unsigned n = workers();
    EXPECT_DEATH(
        {
            auto* rt = new weft::runtime({.workers = n});
            rt->block_on([rt] { delete rt; });
        },
        "destroyed from inside its own task");
}

// vm_bytes() is this process's address-space size (VmSize).
std::size_t vm_bytes() {
    std::ifstream statm("/proc/self/statm");
    std::size_t pages = 0;
    statm >> pages;
    return pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// huge_stack_child() runs in the death test's child: with the address space
// limited, a task that asks for a 1 GiB stack cannot get one. Stacks are
// taken when a task first runs (docs/runtime.md, "Stacks"), so the spawn
// succeeds, the task ends failed and join() rethrows the stack_error; the
// body never runs, and the runtime goes on working. (stack_fallback cannot
// help: slab stacks have the runtime's stack_size.) Exits 0 on success,
// else a code naming the step.
[[noreturn]] void huge_stack_child(unsigned workers) {
    {
        weft::runtime rt({.workers = workers});
        if (rt.block_on([] { return 1; }) != 1) ::_exit(10);
        rlimit lim{};
        ::getrlimit(RLIMIT_AS, &lim);
        lim.rlim_cur = vm_bytes() + (std::size_t(512) << 20);
        if (::setrlimit(RLIMIT_AS, &lim) != 0) ::_exit(11);
        std::atomic<bool> ran{false};
        weft::join_handle<int> h;
        try {
            h = rt.spawn(
                [&] {
                    ran = true;
                    return 2;
                },
                {.name = "huge", .stack_size = std::size_t(1) << 30});
        } catch (const weft::stack_error& e) {
            std::fprintf(stderr, "stack_error from spawn() (documented: from join()): %s\n", e.what());
            ::_exit(12);
        }
        if (workers == 0) (void)rt.run_for(std::chrono::seconds(5));
        try {
            (void)h.join();
            std::fprintf(stderr, "a task with a 1 GiB stack ran under RLIMIT_AS\n");
            ::_exit(13);
        } catch (const weft::stack_error& e) {
            std::fprintf(stderr, "stack_error: %s\n", e.what());
            if (e.code() != std::errc::not_enough_memory) ::_exit(14);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "unexpected: %s\n", e.what());
            ::_exit(15);
        }
        if (ran.load()) ::_exit(16);
        if (rt.live_tasks() != 0) ::_exit(17);
        // The runtime keeps working: from a task and from this thread.
        if (rt.block_on([] { return weft::spawn([] { return 3; }).join(); }) != 3) ::_exit(18);
    }  // and stops
    ::_exit(0);
}

TEST_P(runtime_DeathTest, a_task_that_cannot_get_a_stack_fails_with_stack_error_and_the_runtime_goes_on) {
    if (weft::test::under_user_mode_emulator())
        GTEST_SKIP() << "qemu-user: a forked child of a process that had threads cannot start threads, and RLIMIT_AS "
                        "is not applied to the guest";
    if (WEFT_VALGRIND) GTEST_SKIP() << "valgrind does not apply RLIMIT_AS to the program's mappings";
    EXPECT_EXIT(huge_stack_child(workers()), ::testing::ExitedWithCode(0), "stack_error: ");
}

// map_out_child() runs in the death test's child: with stack_fallback off,
// it uses up the memory mappings (vm.max_map_count) with one-page mappings
// of its own and then spawns sleeping tasks. A task that finds no stack in
// the runtime's pool fails when it first runs, with stack_error (or with
// std::bad_alloc: with no mapping left, malloc fails too, and spawn() itself
// may throw bad_alloc); the rest run. Once mappings are free again the
// runtime goes on working.
[[noreturn]] void map_out_child(unsigned workers) {
    {
        weft::runtime_options o;
        o.workers = workers;
        o.stack_fallback = false;
        weft::runtime rt(o);
        if (rt.block_on([] { return weft::spawn([] { return 1; }).join(); }) != 1) ::_exit(10);
        const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
        std::vector<void*> maps;
        maps.reserve(70000);
        constexpr int n = 200;
        std::vector<weft::join_handle<void>> hs;
        hs.reserve(n);
        for (int i = 0; i < 70000; ++i) {
            // Alternate protections so that neighbours never merge.
            void* p = ::mmap(nullptr, page, (i % 2) ? PROT_READ : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) break;
            maps.push_back(p);
        }
        if (maps.size() == 70000) ::_exit(11);  // could not run out
        std::atomic<int> started{0};
        for (int i = 0; i < n; ++i) {
            try {
                hs.push_back(rt.spawn([&] {
                    started.fetch_add(1);
                    weft::this_task::sleep_for(std::chrono::hours(1));
                }));
            } catch (const std::bad_alloc&) {
                break;  // documented: spawn() allocates the task's block
            }
        }
        const int spawned = static_cast<int>(hs.size());
        if (workers == 0) (void)rt.run_for(std::chrono::seconds(5));
        // Wait until every task has either started or failed.
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        auto settled = [&] {
            int failed = 0;
            for (auto& h : hs) failed += h.state() == weft::task_state::failed;
            return started.load() + failed == spawned;
        };
        while (!settled() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(1ms);
        if (!settled()) ::_exit(12);
        for (auto& h : hs) h.cancel();
        if (workers == 0) (void)rt.run_for(std::chrono::seconds(5));
        // Every outcome is settled now; give the mappings back before
        // joining: join() of a canceled task builds its task_canceled
        // message, and with no mapping left that allocation could fail
        // (bad_alloc from join itself, miscounted as a task's failure).
        for (void* p : maps) ::munmap(p, page);
        int no_stack = 0, no_memory = 0, canceled = 0;
        for (auto& h : hs) {
            try {
                h.join();
                ::_exit(13);
            } catch (const weft::task_canceled&) {
                ++canceled;
            } catch (const weft::stack_error& e) {
                if (no_stack++ == 0) std::fprintf(stderr, "stack_error: %s\n", e.what());
            } catch (const std::bad_alloc&) {
                ++no_memory;
            }
        }
        if (no_stack + no_memory == 0) ::_exit(14);
        if (canceled != started.load()) ::_exit(15);
        if (rt.block_on([] { return weft::spawn([] { return 2; }).join(); }) != 2) ::_exit(16);
        std::fprintf(stderr,
                     "of %d tasks spawned with the mappings used up, %d ran, %d failed with stack_error and %d "
                     "with bad_alloc; the runtime recovered\n",
                     spawned, canceled, no_stack, no_memory);
    }
    ::_exit(0);
}

TEST_P(runtime_DeathTest, out_of_mappings_without_fallback_tasks_fail_and_the_runtime_recovers) {
    if (weft::test::under_user_mode_emulator())
        GTEST_SKIP() << "qemu-user: a forked child of a process that had threads cannot start threads, and RLIMIT_AS "
                        "is not applied to the guest";
    if (weft::test::sanitized) GTEST_SKIP() << "sanitizer runtimes need mappings of their own";
    EXPECT_EXIT(map_out_child(workers()), ::testing::ExitedWithCode(0), "the runtime recovered");
}

INSTANTIATE_TEST_SUITE_P(workers, misuse_test, weft::test::worker_counts(), weft::test::worker_param_name);
INSTANTIATE_TEST_SUITE_P(workers, runtime_DeathTest, weft::test::worker_counts(), weft::test::worker_param_name);

}  // namespace
