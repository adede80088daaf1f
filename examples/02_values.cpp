// 02_values.cpp: passing values into and out of a coroutine.
//
// weft::coroutine has three type parameters:
//
//   weft::coroutine<Yield, Resume, Return>
//     Yield   what the body hands out with y.yield(v); resume() returns it
//     Resume  what main hands in with resume(v); y.yield() returns it
//     Return  what the body returns at the end; read it with result()
//
// Any of them may be void (the default). Here a running average: main
// sends numbers in, the coroutine sends back the average so far, and when
// main sends a negative number the coroutine returns a summary string.
//
// The first value sent with resume() has no yield() to come out of (the body
// has not started yet), so it arrives as the body's second argument.

#include <weft/coroutine.hpp>

#include <cstdio>
#include <optional>
#include <string>

int main() {
    using averager = weft::coroutine<double, double, std::string>;

    averager avg(
        // The yielder's types mirror the coroutine's: yields double, receives double.
        [](weft::yielder<double, double>& y, double first) {
            double sum = 0;
            int count = 0;
            double next = first;
            while (next >= 0) {
                sum += next;
                ++count;
                // Hand the average out; wait here for the next number.
                next = y.yield(sum / count);
            }
            return "averaged " + std::to_string(count) + " numbers";
        },
        {.name = "averager"});

    bool ok = true;
    const double inputs[] = {4.0, 8.0, 6.0};
    const double expected[] = {4.0, 6.0, 6.0};
    for (int i = 0; i < 3; ++i) {
        // resume(v) returns std::optional<double>: engaged while the body
        // yields, empty once it has returned.
        std::optional<double> average = avg.resume(inputs[i]);
        if (!average) return 1;
        std::printf("sent %.1f, average so far %.1f\n", inputs[i], *average);
        ok = ok && *average == expected[i];
    }

    // A negative number ends the loop; resume() reports the end with an
    // empty optional, and the return value is kept for result().
    std::optional<double> last = avg.resume(-1.0);
    ok = ok && !last && avg.done();
    std::printf("result: %s\n", avg.result().c_str());
    ok = ok && avg.result() == "averaged 3 numbers";

    // Values can also be move-only types such as std::unique_ptr: they are
    // moved through, never copied (see the unit tests).

    return ok ? 0 : 1;
}
