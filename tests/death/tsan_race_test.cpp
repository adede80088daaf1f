// tsan_race_test.cpp: with weft's fiber annotations ThreadSanitizer still
// sees real races between coroutines running on different threads (and the
// migration tests elsewhere show it reports no false ones). Only built into
// a ThreadSanitizer build of weft.

#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "weft/coroutine.hpp"

#if WEFT_TSAN

namespace {

int g_shared = 0;  // deliberately unsynchronised

void race() {
    auto body = [](weft::yielder<>& y) {
        for (int i = 0; i < 1000; ++i) {
            g_shared = g_shared + 1;  // the planted race
            y.yield();
        }
    };
    weft::coroutine<> a(body, {.name = "racer-a"});
    weft::coroutine<> b(body, {.name = "racer-b"});
    std::thread ta([&] {
        while (a.resume()) {
        }
    });
    std::thread tb([&] {
        while (b.resume()) {
        }
    });
    ta.join();
    tb.join();
}

TEST(tsan_race_DeathTest, a_race_between_coroutines_on_two_threads_is_reported) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    // TSan exits with status 66 when it has reported anything.
    EXPECT_EXIT(
        {
            race();
            std::exit(0);
        },
        ::testing::ExitedWithCode(66), "ThreadSanitizer: data race");
}

}  // namespace

#endif
