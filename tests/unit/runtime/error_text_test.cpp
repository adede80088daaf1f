// error_text_test.cpp: a misused runtime call's task_error names the call,
// what was wrong and what to do instead: shutdown() and stop() from inside a
// task name themselves (not "block_on / run_once / run_for / stop") and the
// way out; a spawn outside a task says where to call it from.

#include <gtest/gtest.h>

#include <string>

#include "weft/runtime.hpp"

namespace {

using namespace std::chrono_literals;

// thrown() runs f and returns the what() of the task_error it throws, or "".
template <class F>
std::string thrown(F&& f, weft::task_errc* code) {
    try {
        f();
    } catch (const weft::task_error& e) {
        *code = e.code();
        return e.what();
    }
    return "";
}

bool holds(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

TEST(runtime_error_text, shutdown_inside_a_task_names_shutdown_and_the_way_out) {
    for (unsigned workers : {0u, 2u}) {
        weft::runtime rt({.workers = workers});
        const std::string what = rt.block_on([&] {
            weft::task_errc code{};
            std::string w = thrown([&] { (void)rt.shutdown(1s); }, &code);
            EXPECT_EQ(code, weft::task_errc::inside_task);
            return w;
        });
        EXPECT_TRUE(holds(what, "weft::runtime::shutdown() called from inside task")) << what;
        EXPECT_FALSE(holds(what, "block_on / run_once")) << what;
        EXPECT_TRUE(holds(what, "from the thread that owns the runtime")) << what;
        EXPECT_TRUE(holds(what, "close the listener")) << what;
        const std::string stop_what = rt.block_on([&] {
            weft::task_errc code{};
            return thrown([&] { rt.stop(); }, &code);
        });
        EXPECT_TRUE(holds(stop_what, "weft::runtime::stop() called from inside")) << stop_what;
    }
}

TEST(runtime_error_text, block_on_inside_a_task_says_to_spawn_and_join) {
    weft::runtime rt({.workers = 0});
    const std::string what = rt.block_on([&] {
        weft::task_errc code{};
        return thrown([&] { rt.block_on([] {}); }, &code);
    });
    EXPECT_TRUE(holds(what, "weft::runtime::block_on() called from inside")) << what;
    EXPECT_TRUE(holds(what, "weft::spawn() and join()")) << what;
}

TEST(runtime_error_text, spawn_outside_a_task_names_the_call_and_where_to_call_it) {
    weft::task_errc code{};
    const std::string what = thrown([] { (void)weft::spawn([] {}); }, &code);
    EXPECT_EQ(code, weft::task_errc::not_in_task);
    EXPECT_TRUE(holds(what, "weft::spawn() must be called from inside a weft task")) << what;
    EXPECT_TRUE(holds(what, "from a plain thread, use runtime::spawn()")) << what;
}

}  // namespace
