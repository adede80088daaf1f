// gdb_target.cpp: the program the gdb tests look at (tests/gdb/CMakeLists.txt).
//
// It suspends fibers at known call depths, in functions with distinct names
// that are neither inlined nor tail-called, and then calls
// weft_gdb_stop_here(), where gdb stops it (the live test) or writes a core
// file (the core test):
//   coroutine "alpha"      alpha_outer -> alpha_middle -> alpha_inner -> yield
//   fiber "beta"           beta_outer -> beta_inner -> suspend
//   coroutine "delta"      created, never resumed (no frames yet)
//   task "gamma"           gamma_outer -> gamma_inner -> event::wait
//                          (a runtime with 0 workers, driven by run_once())
//   coroutine "painted"    painted_body -> yield, on a painted stack
// It is compiled without debug info (-g0): the gdb script must find
// everything through weft's exported symbols, and the function names come
// from the symbol table.

#include <weft/coroutine.hpp>
#include <weft/fiber.hpp>
#include <weft/runtime.hpp>

#include <chrono>
#include <weft/sync/event.hpp>

#include <cstdio>
#include <cstdlib>

// Keeps a call from being a tail call and a function from being merged with
// another: the caller does something after the callee returns.
static volatile int sink;
#define WEFT_GDB_AFTER_CALL() (sink = sink + 1)

// With WEFT_GDB_ABORT set it aborts instead: under qemu-aarch64 the core
// file comes from qemu (gdb's generate-core-file cannot work through qemu's
// gdb stub).
extern "C" [[gnu::noinline]] void weft_gdb_stop_here() {
    if (std::getenv("WEFT_GDB_ABORT")) std::abort();
    asm volatile("" ::: "memory");
    WEFT_GDB_AFTER_CALL();
}

[[gnu::noinline]] void alpha_inner() {
    weft::this_coroutine::yield();
    WEFT_GDB_AFTER_CALL();
}
[[gnu::noinline]] void alpha_middle() {
    alpha_inner();
    WEFT_GDB_AFTER_CALL();
}
[[gnu::noinline]] void alpha_outer() {
    alpha_middle();
    WEFT_GDB_AFTER_CALL();
}

[[gnu::noinline]] void beta_inner() {
    weft::this_fiber::suspend();
    WEFT_GDB_AFTER_CALL();
}
[[gnu::noinline]] void beta_outer() {
    beta_inner();
    WEFT_GDB_AFTER_CALL();
}

[[gnu::noinline]] void gamma_inner(weft::event& ev) {
    ev.wait();
    WEFT_GDB_AFTER_CALL();
}
[[gnu::noinline]] void gamma_outer(weft::event& ev) {
    gamma_inner(ev);
    WEFT_GDB_AFTER_CALL();
}

// epsilon's task is shrunk while it waits (docs/runtime.md, "Idle tasks
// give their stack back"): its frames are in a heap block, and `weft bt`
// writes them back to unwind them (live), or says why it cannot (a core).
[[gnu::noinline]] void epsilon_inner(weft::event& ev) {
    ev.wait();
    WEFT_GDB_AFTER_CALL();
}
[[gnu::noinline]] void epsilon_outer(weft::event& ev) {
    epsilon_inner(ev);
    WEFT_GDB_AFTER_CALL();
}

[[gnu::noinline]] void painted_body() {
    volatile char deep[3000];
    for (auto& c : deep) c = 1;
    weft::this_coroutine::yield();
    WEFT_GDB_AFTER_CALL();
}

int main() {
    weft::coroutine<void> alpha([](weft::yielder<void>&) { alpha_outer(); }, {.name = "alpha"});
    weft::fiber beta([] { beta_outer(); }, {.name = "beta"});
    weft::coroutine<void> delta([](weft::yielder<void>&) {}, {.name = "delta"});
    weft::coroutine<void> painted([](weft::yielder<void>&) { painted_body(); },
                                  {.name = "painted", .paint_stack = true});
    alpha.resume();
    beta.resume();
    painted.resume();

    weft::runtime rt({.workers = 0});
    weft::event ev;
    auto gamma = rt.spawn([&] { gamma_outer(ev); }, {.name = "gamma"});
    while (rt.run_once() != 0) {
    }

    weft::runtime shrinking({.workers = 0, .shrink_idle_after = std::chrono::milliseconds(1)});
    weft::event ev2;
    auto epsilon = shrinking.spawn([&] { epsilon_outer(ev2); }, {.name = "epsilon"});
    while (shrinking.run_once() != 0) {
    }
    for (int i = 0; i < 1000 && shrinking.stats().total().shrinks == 0; ++i) {
        shrinking.shrink_idle();
        (void)shrinking.run_once();
    }
    if (shrinking.stats().total().shrinks == 0) {
        std::puts("weft_gdb_target: epsilon was not shrunk");
        return 1;
    }

    weft_gdb_stop_here();

    ev.set();
    while (rt.run_once() != 0) {
    }
    gamma.join();
    ev2.set();
    while (shrinking.run_once() != 0) {
    }
    epsilon.join();
    alpha.resume();
    beta.resume();
    painted.resume();
    std::puts("weft_gdb_target: done");
    return 0;
}
