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
