// 00_quick_look_runtime.cpp: the README's runtime snippet, compiled and run by the tests.
#include <weft/runtime.hpp>

#include <cstdio>
#include <vector>

// Straight-line code: spawn children, wait for their results.
long sum_range(long first, long count) {
    if (count <= 1000) {
        long s = 0;
        for (long i = first; i < first + count; ++i) s += i;
        return s;
    }
    std::vector<weft::join_handle<long>> parts;
    for (long i = 0; i < 4; ++i)
        parts.push_back(weft::spawn([=] { return sum_range(first + i * count / 4, count / 4); }));
    long total = 0;
    for (auto& p : parts) total += p.join();  // suspends this task, not the thread
    return total;
}

int main() {
    weft::runtime rt({.workers = 2});  // 0 workers: everything runs on this thread
    long total = rt.block_on([] { return sum_range(0, 1 << 20); });
    std::printf("sum of 0 .. 2^20 - 1 = %ld\n", total);
    return total == (1L << 20) * ((1L << 20) - 1) / 2 ? 0 : 1;
}  // the runtime's destructor cancels what is left and joins its workers
