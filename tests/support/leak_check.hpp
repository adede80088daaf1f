// leak_check.hpp: the fixture every weft test derives from. It records the
// number of live coroutines and stacks when a test starts and fails the test
// if they differ when it ends; it also counts calls to operator new, so a
// test can assert that some code allocates nothing on the heap.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

namespace weft::test {

// new_calls() is the number of operator new calls made on this thread so far.
std::uint64_t new_calls() noexcept;

// Fault injection through the same operator new (tests only):
//   fail_new_at(n)   arms a failure: the n-th call of operator new (plain or
//                    array, not the aligned forms) made on this thread from
//                    now on throws std::bad_alloc; that call only. n = 0
//                    disarms. Arming again replaces the earlier arming.
//   new_failure_fired()  whether the armed failure has happened since the
//                    last fail_new_at().
//   new_failures_can_be_injected()  whether fail_new_at() works here: not
//                    under TSan, whose runtime defines operator new itself,
//                    nor under valgrind's memcheck, which replaces it.
// Arm around code that stays on this thread (a task of a runtime without
// workers, driven by this thread, qualifies); disarm before anything that
// must not fail. Allocations of other threads are never failed.
void fail_new_at(std::uint64_t n) noexcept;
bool new_failure_fired() noexcept;
bool new_failures_can_be_injected();

// leak_checked is a gtest fixture that fails on leaked coroutines or stacks.
class leak_checked : public ::testing::Test {
protected:
    void SetUp() override;
    void TearDown() override;

private:
    std::int64_t coroutines_ = 0;
    std::int64_t stacks_ = 0;
};

}  // namespace weft::test
