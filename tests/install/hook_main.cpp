// tests/install/hook_main.cpp: an installed weft::hook (libweft_hook.so and
// its bridge). Eight tasks on one worker each call plain usleep(20 ms): with
// the hook they sleep at the same time (well under 8 x 20 ms); without it
// the worker would sleep them one after another. scripts/test runs it and
// expects "OK".
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include <weft/weft.hpp>

int main() {
    weft::runtime rt({.workers = 1});
    const auto t0 = std::chrono::steady_clock::now();
    rt.block_on([] {
        std::vector<weft::join_handle<void>> hs;
        for (int i = 0; i < 8; ++i) hs.push_back(weft::spawn([] { ::usleep(20'000); }));
        for (auto& h : hs) h.join();
    });
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    if (ms >= std::chrono::milliseconds(150)) {
        std::printf("FAIL: 8 hooked sleeps of 20 ms took %lld ms: the hook is not active\n",
                    static_cast<long long>(ms.count()));
        return 1;
    }
    std::printf("8 hooked sleeps of 20 ms in %lld ms\nOK\n", static_cast<long long>(ms.count()));
    return 0;
}
