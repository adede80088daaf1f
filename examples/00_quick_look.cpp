// 00_quick_look.cpp: the README's snippet, compiled and run by the tests.
#include <weft/coroutine.hpp>

#include <cstdio>

int main() {
    // A coroutine that yields ints and receives ints; its body runs on its
    // own stack, so it could yield from any depth of calls.
    weft::coroutine<int, int> running_total([](weft::yielder<int, int>& y, int first) {
        int total = first;
        for (;;) total += y.yield(total);  // hand out the total, take the next number
    });

    int last = 0;
    for (int n : {5, 10, 20}) {
        last = *running_total.resume(n);  // runs the body until its next yield
        std::printf("added %d, total %d\n", n, last);
    }
    return last == 35 ? 0 : 1;
}  // destroying the suspended coroutine unwinds its stack
