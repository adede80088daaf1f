// 10_select.cpp: waiting on several channels at once, with a timeout.
//
// weft::select(case, case, ...) waits until one case can complete, runs
// that case's action and returns its index:
//   on_recv(ch, [](std::optional<T> v) {...})   v is nullopt if ch is closed
//   on_send(ch, value, [] {...})                 the value moves only if chosen
//   on_timeout(duration, [] {...})               or on_deadline(time_point, ...)
//   on_default([] {...})                         nothing ready: do not wait
// When several cases are ready, one is chosen uniformly at random (so no
// channel starves another); when none is, the task waits on all of them and
// is woken exactly once: by the first case to complete, or the timeout.
//
// The parts:
//   1. a server loop serving two request channels until a quit signal;
//   2. a timeout: no reply within 20 ms;
//   3. a non-blocking poll with on_default;
//   4. fairness: two always-ready channels are chosen about equally.

#include <weft/runtime.hpp>
#include <weft/sync/channel.hpp>
#include <weft/sync/select.hpp>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "example_support.hpp"  // check() and failures

using namespace std::chrono_literals;

int main() {
    weft::runtime rt({.workers = 2});

    // 1. A loop over select: two request kinds and a quit channel.
    rt.block_on([] {
        weft::channel<int> adds, muls;
        weft::channel<int> quit;
        long value = 1;
        int served = 0;
        auto client = weft::spawn([&] {
            for (int i = 0; i < 5; ++i) {
                adds.send(3);
                muls.send(2);
            }
            quit.close();  // a closed channel is always ready: the server sees it
        });
        for (bool running = true; running;) {
            weft::select(weft::on_recv(adds, [&](std::optional<int> v) { value += *v, ++served; }),
                         weft::on_recv(muls, [&](std::optional<int> v) { value *= *v, ++served; }),
                         weft::on_recv(quit, [&](std::optional<int>) { running = false; }));
        }
        client.join();
        std::printf("1. served %d requests; value %ld\n", served, value);
        check(served == 10 && value == ((((((((((1 + 3) * 2) + 3) * 2) + 3) * 2) + 3) * 2) + 3) * 2), "server loop");
    });

    // 2. A timeout case: nobody answers, so the select returns after 20 ms.
    rt.block_on([] {
        weft::channel<int> reply;
        const auto t0 = std::chrono::steady_clock::now();
        std::string outcome;
        const std::size_t i = weft::select(weft::on_recv(reply, [&](std::optional<int> v) { outcome = "reply " + std::to_string(v.value_or(-1)); }),
                                           weft::on_timeout(20ms, [&] { outcome = "timed out"; }));
        const auto waited = std::chrono::steady_clock::now() - t0;
        std::printf("2. case %zu: %s after %lld ms\n", i, outcome.c_str(),
                    static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()));
        check(i == 1 && outcome == "timed out" && waited >= 20ms, "timeout never early");
        // Nothing is left behind: a sender now finds no receiver.
        check(reply.try_send(7) == weft::channel_status::full, "no node left behind");
    });

    // 3. on_default: poll without waiting.
    rt.block_on([] {
        weft::channel<int> inbox(4);
        int polls = 0, got = 0;
        for (int round = 0; round < 6; ++round) {
            if (round == 3) inbox.send(42);
            weft::select(weft::on_recv(inbox, [&](std::optional<int> v) { got = *v; }),
                         weft::on_default([&] { ++polls; }));
        }
        std::printf("3. polled empty %d times, then got %d\n", polls, got);
        check(polls == 5 && got == 42, "default case");
    });

    // 4. Fairness.
    rt.block_on([] {
        weft::channel<int> a(1), b(1);
        int picks[2] = {0, 0};
        for (int i = 0; i < 10'000; ++i) {
            if (a.size() == 0) a.send(0);
            if (b.size() == 0) b.send(1);
            ++picks[weft::select(weft::on_recv(a), weft::on_recv(b))];
        }
        std::printf("4. two always-ready channels: %d / %d\n", picks[0], picks[1]);
        check(picks[0] > 4000 && picks[1] > 4000, "uniform choice");
    });

    if (failures) std::printf("%d check(s) FAILED\n", failures);
    return failures ? 1 : 0;
}
