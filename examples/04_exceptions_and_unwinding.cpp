// 04_exceptions_and_unwinding.cpp: what happens to exceptions and to
// destructors inside a coroutine.
//
// 1. An exception that leaves the body is caught by weft and rethrown by
//    the resume() that ran it. The coroutine is then done.
// 2. Misuse, such as resuming a finished coroutine, throws
//    weft::coroutine_error with a code() and a message naming the coroutine.
// 3. Destroying a coroutine that is suspended (it yielded and was never
//    resumed to the end) unwinds its stack: every object alive in the body
//    and in the functions it called is destroyed, innermost first, exactly
//    as if an exception had passed through. weft does this with a forced
//    unwind out of the pending yield(): weft::forced_unwind, the C++
//    runtime's abi::__forced_unwind, the same as glibc uses to cancel a
//    thread. Handlers for std::exception and other types never see it.
// 4. catch (...) does see it, so a catch (...) inside a body must rethrow:
//    swallowing forced_unwind would leave the coroutine running while it is
//    being destroyed, and weft aborts the program with a message naming the
//    coroutine where the handler ends.

#include <weft/coroutine.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

std::vector<std::string> events;

// resource stands for anything with a destructor: a lock, a file, a socket.
struct resource {
    std::string name;
    explicit resource(std::string n) : name(std::move(n)) { std::printf("  open  %s\n", name.c_str()); }
    resource(const resource&) = delete;
    resource& operator=(const resource&) = delete;
    ~resource() {
        std::printf("  close %s\n", name.c_str());
        events.push_back("close " + name);
    }
};

void handle_request(weft::yielder<>& y) {
    resource socket("socket");
    y.yield();  // wait for data that never comes
    events.push_back("request handled");
}

}  // namespace

int main() {
    bool ok = true;

    // 1. Exceptions travel from the body to resume().
    std::printf("1. an exception leaves the body\n");
    weft::coroutine<int> parser(
        [](weft::yielder<int>& y) {
            y.yield(1);
            throw std::runtime_error("malformed input");
        },
        {.name = "parser"});
    ok = ok && parser.resume() == 1;
    try {
        (void)parser.resume();
        ok = false;  // not reached
    } catch (const std::runtime_error& e) {
        std::printf("  caught: %s; done() = %s\n", e.what(), parser.done() ? "true" : "false");
        ok = ok && std::string(e.what()) == "malformed input" && parser.done();
    }

    // 2. Resuming it again is a reported misuse.
    std::printf("2. resuming a finished coroutine\n");
    try {
        (void)parser.resume();
        ok = false;  // not reached
    } catch (const weft::coroutine_error& e) {
        std::printf("  misuse: %s\n", e.what());
        ok = ok && e.code() == weft::coroutine_errc::resume_done;
    }

    // 3. Destroying a suspended coroutine runs its destructors.
    std::printf("3. destroying a suspended coroutine\n");
    {
        weft::coroutine<> session(
            [](weft::yielder<>& y) {
                resource log("log file");
                handle_request(y);  // suspends two frames deep
                events.push_back("session finished");
            },
            {.name = "session"});
        (void)session.resume();
        std::printf("  session is suspended; destroying it\n");
    }  // ~coroutine unwinds: "socket" closes first, then "log file"
    ok = ok && events == std::vector<std::string>{"close socket", "close log file"};

    // 4. catch (...) in a body: do your cleanup, then rethrow.
    std::printf("4. catch (...) that rethrows\n");
    events.clear();
    {
        weft::coroutine<> careful([](weft::yielder<>& y) {
            try {
                resource db("database");
                y.yield();
            } catch (...) {
                // Also reached by weft::forced_unwind when the coroutine is
                // destroyed: clean up, then let it continue with `throw;`.
                events.push_back("cleanup");
                throw;
            }
        });
        (void)careful.resume();
    }
    ok = ok && events == std::vector<std::string>{"close database", "cleanup"};

    std::printf(ok ? "all as expected\n" : "UNEXPECTED RESULT\n");
    return ok ? 0 : 1;
}
