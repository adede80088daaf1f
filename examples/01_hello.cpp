// 01_hello.cpp: your first weft coroutine.
//
// A coroutine is a function that can stop in the middle ("yield") and later
// carry on from exactly where it stopped ("resume"). Unlike a C++20
// co_await coroutine, a weft coroutine has a whole stack of its own, so it
// can yield from any depth of ordinary function calls.
//
// This example runs a coroutine and the main function in turns and prints
// who runs when:
//
//   main:  creating the coroutine
//   main:  resuming
//   coro:  hello
//   main:  the coroutine yielded
//   main:  resuming again
//   coro:  world
//   main:  the coroutine finished
//
// Build and run:  ninja weft_example_01_hello && ./examples/weft_example_01_hello

#include <weft/coroutine.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main() {
    // We record every line we print, so that the example can check itself
    // at the end (the test suite runs it).
    std::vector<std::string> trace;
    auto say = [&trace](const char* who, const char* what) {
        std::printf("%-6s %s\n", who, what);
        trace.push_back(std::string(who) + " " + what);
    };

    say("main:", "creating the coroutine");

    // weft::coroutine<> is a coroutine that passes no values in or out.
    // Its body receives a yielder: the handle it uses to suspend itself.
    // Creating the coroutine allocates its stack but does not run the body.
    weft::coroutine<> co(
        [&say](weft::yielder<>& y) {
            say("coro:", "hello");
            y.yield();  // stop here; resume() in main returns true
            say("coro:", "world");
            // Returning ends the coroutine; resume() in main returns false.
        },
        {.name = "greeter"});  // a name shows up in error messages

    say("main:", "resuming");
    // resume() runs the body until it yields (true) or returns (false).
    if (co.resume()) say("main:", "the coroutine yielded");

    say("main:", "resuming again");
    if (!co.resume()) say("main:", "the coroutine finished");

    // A finished coroutine is "done". Resuming it again would throw
    // weft::coroutine_error, because there is nothing left to run.
    const bool done = co.done();

    // The coroutine's stack is freed when `co` goes out of scope.

    // Self-check: the lines must have come in exactly this order.
    const std::vector<std::string> expected = {
        "main: creating the coroutine", "main: resuming",        "coro: hello",
        "main: the coroutine yielded",  "main: resuming again",  "coro: world",
        "main: the coroutine finished",
    };
    if (trace != expected || !done) {
        std::printf("unexpected order of events\n");
        return 1;
    }
    return 0;
}
