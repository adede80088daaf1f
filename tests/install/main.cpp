// tests/install/main.cpp: uses an installed weft. scripts/test builds it
// twice, with find_package(weft) and with pkg-config, and expects "OK".
#include <weft/weft.hpp>

#include <cstdio>

int main() {
    weft::coroutine<int> counter([](weft::yielder<int>& y) {
        for (int i = 1; i <= 3; ++i) y.yield(i * 10);
    });

    int expected = 10;
    while (auto v = counter.resume()) {
        if (*v != expected) {
            std::printf("FAIL: yielded %d, expected %d\n", *v, expected);
            return 1;
        }
        expected += 10;
    }
    if (expected != 40 || !counter.done()) {
        std::printf("FAIL: the coroutine stopped after %d values\n", expected / 10 - 1);
        return 1;
    }
    std::printf("weft %s (WEFT_SHARE_FP_ENV=%d)\n", WEFT_VERSION_STRING, WEFT_SHARE_FP_ENV);
    std::printf("OK\n");
    return 0;
}
