// migration_test.cpp: what moves with a task between workers and what does
// not (docs/runtime.md, "What migrates, and the thread-local hazard").

#include <weft/runtime.hpp>

#include <gtest/gtest.h>

#include <atomic>
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

struct observation {
    int worker_before = -1;
    int worker_after = -1;
    bool kept_is_current = false;
    std::thread::id thread_before, thread_after;
};

// A task keeps the address of a thread_local, yields until its worker
// changed (or a bound is reached), and compares the kept address with this
// thread's. The hazard: after a migration the kept address is another
// thread's variable.
observation observe_once(bool pinned, weft::runtime& rt) {
    return rt
        .spawn(
            [] {
                observation o;
                int* kept = fresh_address();
                o.worker_before = weft::this_task::worker();
                o.thread_before = std::this_thread::get_id();
                for (int i = 0; i < 20'000 && weft::this_task::worker() == o.worker_before; ++i)
                    weft::this_task::yield();
                o.worker_after = weft::this_task::worker();
                o.thread_after = std::this_thread::get_id();
                o.kept_is_current = kept == fresh_address();
                return o;
            },
            {.pinned = pinned})
        .join();
}

class migration : public weft::test::leak_checked {};

TEST_F(migration, a_kept_thread_local_address_belongs_to_the_old_thread_after_a_move) {
    weft::runtime rt({.workers = 2});
    // Busy tasks keep both workers stealing from each other.
    std::atomic<bool> stop{false};
    std::vector<weft::join_handle<void>> busy;
    for (int i = 0; i < 8; ++i)
        busy.push_back(rt.spawn([&] {
            while (!stop.load(std::memory_order_relaxed)) weft::this_task::yield();
        }));
    int moved = 0;
    for (int round = 0; round < 16; ++round) {
        const observation o = observe_once(false, rt);
        // Whatever happened, the kept address is this thread's exactly when
        // the task did not change threads.
        EXPECT_EQ(o.kept_is_current, o.thread_before == o.thread_after);
        EXPECT_EQ(o.worker_before == o.worker_after, o.thread_before == o.thread_after);
        moved += o.worker_before != o.worker_after;
    }
    stop = true;
    for (auto& h : busy) h.join();
    RecordProperty("migrated_rounds", moved);
    std::printf("[          ] %d of 16 rounds migrated\n", moved);
}

TEST_F(migration, a_pinned_task_never_moves) {
    weft::runtime rt({.workers = 2});
    std::atomic<bool> stop{false};
    std::vector<weft::join_handle<void>> busy;
    for (int i = 0; i < 8; ++i)
        busy.push_back(rt.spawn([&] {
            while (!stop.load(std::memory_order_relaxed)) weft::this_task::yield();
        }));
    for (int round = 0; round < 4; ++round) {
        const observation o = observe_once(true, rt);
        EXPECT_EQ(o.worker_before, o.worker_after);
        EXPECT_EQ(o.thread_before, o.thread_after);
        EXPECT_TRUE(o.kept_is_current);
    }
    stop = true;
    for (auto& h : busy) h.join();
}

}  // namespace
