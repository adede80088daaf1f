// test_stack.hpp: which stack the coroutine unit tests run their coroutines
// on. The suite in tests/unit/coroutine is built twice: weft_unit_coroutine
// gives every coroutine a stack of its own from the process-wide pool (what
// the default constructor does), weft_unit_coroutine_copy (built with
// WEFT_TEST_COPY_STACK=1) runs the same tests in copy-stack mode on shared
// stacks. Tests create coroutines as
//
//   weft::coroutine<int> co(std::allocator_arg, weft::test::stack(), body, options);
//
// and check weft::test::copy_mode where the two modes differ by design
// (where the control block lives, what the stack size means).
#pragma once

#include "weft/coroutine.hpp"
#include "weft/pooled_stack.hpp"
#include "weft/shared_stack.hpp"

#ifndef WEFT_TEST_COPY_STACK
#define WEFT_TEST_COPY_STACK 0
#endif

namespace weft::test {

// copy_mode says whether this build runs the tests on shared stacks.
inline constexpr bool copy_mode = WEFT_TEST_COPY_STACK != 0;

#if WEFT_TEST_COPY_STACK
// copy_pool() is the calling thread's pool of four 256 KiB shared stacks.
// One per thread: a pool's stacks serve one running coroutine at a time, and
// tests that run coroutines on several threads at once would otherwise wait
// for each other (see weft/shared_stack.hpp, Threads). Coroutines created on
// one thread may still be resumed and destroyed on another while the
// creating thread lives.
inline shared_stack_pool& copy_pool() {
    thread_local shared_stack_pool pool({.stack_size = 256 * 1024, .stacks = 4});
    return pool;
}
// stack() is what tests pass as a coroutine's stack allocator.
inline shared_stack stack() { return shared_stack(copy_pool()); }
#else
inline pooled_stack stack() { return pooled_stack{}; }
#endif

}  // namespace weft::test
