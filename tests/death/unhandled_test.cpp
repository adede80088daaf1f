// unhandled_test.cpp: a detached task's exception, with no
// runtime_options::unhandled, ends the process with a message that names the
// task, its id and the exception, and says what to do; the terminate that
// follows has the exception active (libstdc++ then names its type and
// what()), never "terminate called without an active exception".

#include <gtest/gtest.h>

#include <stdexcept>

#include "weft/runtime.hpp"

namespace {

// detach_a_failing_task() runs in the death test's child: 0 workers, so the
// child starts no thread.
void detach_a_failing_task() {
    weft::runtime rt({.workers = 0});
    rt.block_on([] {
        weft::spawn([] { throw std::runtime_error("config file missing"); }, {.name = "loader"}).detach();
        for (int i = 0; i < 100; ++i) weft::this_task::yield();
    });
}

TEST(unhandled_death, a_detached_tasks_failure_names_the_task_the_exception_and_the_fix) {
    EXPECT_DEATH(detach_a_failing_task(),
                 "weft: detached task 'loader' \\(id [0-9]+\\) failed: config file missing\n"
                 "weft: nobody joins a detached task.*join\\(\\) the task.*runtime_options::unhandled");
}

TEST(unhandled_death, the_terminate_after_it_has_the_exception_active) {
    EXPECT_DEATH(detach_a_failing_task(),
                 "terminate called after throwing an instance of 'std::runtime_error'.*config file missing");
}

}  // namespace
