// migration_test.cpp: what moves with a task between workers and what does
// not (docs/runtime.md, "What migrates, and the thread-local hazard").

#include <weft/runtime.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "support/leak_check.hpp"

namespace {

thread_local int per_thread_value = 0;

// fresh_address() computes the address of this thread's per_thread_value
// on every call (never inlined, result hidden from the optimiser): what
// weft's own accessors do.
[[gnu::noinline]] int* fresh_address() {
    int* p = &per_thread_value;
    asm volatile("" : "+r"(p));
    return p;
}

// fresh_thread() is std::this_thread::get_id() computed afresh. glibc
// declares pthread_self() __attribute__((const)), so the compiler may merge
// two get_id() calls on both sides of a suspension into one: seen here with
// gcc 12 -O2, another form of the hazard this file shows.
[[gnu::noinline]] std::thread::id fresh_thread() {
    std::thread::id id = std::this_thread::get_id();
    asm volatile("" : : "r"(&id) : "memory");
    return id;
}

struct observation {
    int worker_before = -1;
    int worker_after = -1;
    bool kept_is_current = false;
    std::thread::id thread_before, thread_after;
};

// observe_once() makes a task move (unless it is pinned): the task keeps
// the address of a thread_local, then joins a pinned task that runs on the
// other worker; that task's end wakes it into the other worker's LIFO slot,
// so it resumes there. It then compares the kept address with this thread's.
// The hazard: after the move the kept address is the old thread's variable.
observation observe_once(bool pinned, weft::runtime& rt) {
    using namespace std::chrono_literals;
    // Spawned from this (outside) thread, pinned tasks get their homes
    // round-robin: these two are on different workers.
    auto a = rt.spawn([] { weft::this_task::sleep_for(30ms); }, {.pinned = true});
    auto b = rt.spawn([] { weft::this_task::sleep_for(30ms); }, {.pinned = true});
    weft::join_handle<void>* ab[2] = {&a, &b};
    auto t = rt.spawn(
        [ab] {
            observation o;
            int* kept = fresh_address();
            o.worker_before = weft::this_task::worker();
            o.thread_before = fresh_thread();
            weft::join_handle<void>& other =
                int(ab[0]->record()->home) != o.worker_before ? *ab[0] : *ab[1];
            other.join();
            o.worker_after = weft::this_task::worker();
            o.thread_after = fresh_thread();
            o.kept_is_current = kept == fresh_address();
            return o;
        },
        {.pinned = pinned});
    observation o = t.join();
    if (a.valid()) a.join();
    if (b.valid()) b.join();
    return o;
}

class migration : public weft::test::leak_checked {};

TEST_F(migration, a_kept_thread_local_address_belongs_to_the_old_thread_after_a_move) {
    weft::runtime rt({.workers = 2});
    int moved = 0;
    for (int round = 0; round < 8; ++round) {
        const observation o = observe_once(false, rt);
        // Whatever happened, the kept address is this thread's exactly when
        // the task did not change threads.
        EXPECT_EQ(o.kept_is_current, o.thread_before == o.thread_after);
        EXPECT_EQ(o.worker_before == o.worker_after, o.thread_before == o.thread_after);
        moved += o.worker_before != o.worker_after;
    }
    // The wake lands in the other worker's LIFO slot, so a round moves
    // unless the pinned task ended before the join began (slow machine).
    EXPECT_GE(moved, 1);
}

TEST_F(migration, a_pinned_task_never_moves) {
    weft::runtime rt({.workers = 2});
    for (int round = 0; round < 4; ++round) {
        const observation o = observe_once(true, rt);
        EXPECT_EQ(o.worker_before, o.worker_after);
        EXPECT_EQ(o.thread_before, o.thread_after);
        EXPECT_TRUE(o.kept_is_current);
    }
}

}  // namespace
