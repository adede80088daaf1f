// weft_bench_hp_callgrind: issue 27's HP8 scheduler figures, counted with
// callgrind by bench/compare/report.py.
//
//   weft_bench_hp_callgrind yield N
//       a runtime with one worker; two tasks each call this_task::yield()
//       N / 2 times, so N yields in all, each one task yielding and the
//       other running (the root task is parked in join() meanwhile).
//   weft_bench_hp_callgrind rendezvous N
//       a runtime with one worker; a producer task sends 0 .. N-1 over an
//       unbuffered weft::channel<long>(0) and closes it, a consumer task
//       receives until it is closed: N messages, each a send + a recv.
//   weft_bench_hp_callgrind spawn N
//       a runtime with one worker; the root task spawns a task and joins it,
//       N times (HP1's R2s shape): the instructions of one spawn + join.
//
// The program checks what it ran (the yields alternated between the two
// tasks; every message arrived, in order) and exits 1 on a mismatch, 0
// otherwise; it prints one line to stdout. Run at two counts under
// `valgrind --tool=callgrind`, the difference of the two instruction totals
// divided by the difference of the counts is the cost of one operation:
// starting and stopping the runtime cancel out.
#include <weft/runtime.hpp>
#include <weft/sync/channel.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace {

[[noreturn]] void die(const char* msg) {
    std::fprintf(stderr, "weft_bench_hp_callgrind: %s\n", msg);
    std::exit(1);
}

// yield: N yields in all, alternating. Before each yield a task writes its
// id to `last`; when its yield returns and `last` names the other task, the
// other task ran in between (a real hand-over, not a yield that returned at
// once). All of it runs on the one worker: plain variables suffice.
int run_yield(weft::runtime& rt, long n) {
    const long each = n / 2;
    int last = -1;
    long handovers = 0, yields = 0;
    rt.block_on([&] {
        auto body = [&](int me) {
            for (long k = 0; k < each; ++k) {
                last = me;
                weft::this_task::yield();
                ++yields;
                if (last != me) ++handovers;
            }
        };
        auto a = weft::spawn([&] { body(0); });
        auto b = weft::spawn([&] { body(1); });
        a.join();
        b.join();
    });
    std::printf("{\"mode\":\"yield\",\"n\":%ld,\"yields\":%ld,\"handovers\":%ld}\n", n, yields, handovers);
    if (yields != 2 * each) die("yield: wrong number of yields");
    // Strict alternation hands over at every yield but the last one or two
    // (the task that finishes first leaves the other alone).
    if (handovers < 2 * each - 2) die("yield: the two tasks did not alternate");
    return 0;
}

// rendezvous: N messages over an unbuffered channel, checked in order.
int run_rendezvous(weft::runtime& rt, long n) {
    weft::channel<long> ch(0);
    long received = 0, out_of_order = 0;
    long long sum = 0;
    rt.block_on([&] {
        auto producer = weft::spawn([&] {
            for (long i = 0; i < n; ++i) ch.send(i);
            ch.close();
        });
        auto consumer = weft::spawn([&] {
            while (const std::optional<long> v = ch.recv()) {
                if (*v != received) ++out_of_order;
                sum += *v;
                ++received;
            }
        });
        producer.join();
        consumer.join();
    });
    std::printf("{\"mode\":\"rendezvous\",\"n\":%ld,\"received\":%ld,\"sum\":%lld}\n", n, received, sum);
    if (received != n || out_of_order != 0 || sum != static_cast<long long>(n) * (n - 1) / 2)
        die("rendezvous: wrong messages");
    return 0;
}

// spawn: N tasks spawned and joined one after the other (R2s's shape), each
// adding its index to a sum that is checked.
int run_spawn(weft::runtime& rt, long n) {
    long long sum = 0;
    rt.block_on([&] {
        for (long i = 0; i < n; ++i) weft::spawn([&sum, i] { sum += i; }).join();
    });
    std::printf("{\"mode\":\"spawn\",\"n\":%ld,\"sum\":%lld}\n", n, sum);
    if (sum != static_cast<long long>(n) * (n - 1) / 2) die("spawn: wrong sum");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const char* usage = "usage: weft_bench_hp_callgrind yield|rendezvous|spawn N";
    if (argc != 3) die(usage);
    char* end = nullptr;
    const long n = std::strtol(argv[2], &end, 10);
    if (!end || *end != '\0' || n < 2) die(usage);
    weft::runtime rt({.workers = 1});
    if (std::strcmp(argv[1], "yield") == 0) {
        if (n % 2 != 0) die("yield: N must be even (N / 2 yields in each of two tasks)");
        return run_yield(rt, n);
    }
    if (std::strcmp(argv[1], "rendezvous") == 0) return run_rendezvous(rt, n);
    if (std::strcmp(argv[1], "spawn") == 0) return run_spawn(rt, n);
    die(usage);
}
