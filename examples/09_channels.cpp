// 09_channels.cpp: channels between tasks (and threads).
//
// weft::channel<T> carries values from senders to receivers, each value to
// exactly one receiver, in order per sender. Its capacity is chosen at
// construction:
//   channel<T> ch;                          rendezvous: send waits for a receiver
//   channel<T> ch(64);                      a ring of 64 values: send waits when full
//   channel<T> ch(channel<T>::unbounded);   send never waits
// A waiting task is parked (its worker runs other tasks); a plain thread
// that sends or receives simply blocks. close() ends the stream: receivers
// drain what is buffered, then recv() returns nullopt and a range-for ends;
// send on a closed channel throws weft::channel_closed and leaves the value
// with the caller.
//
// The parts:
//   1. a pipeline: numbers -> squares -> sum, three stages, two channels;
//   2. fan-out / fan-in: four workers share one job channel;
//   3. move-only values, and what a failed send leaves you with;
//   4. timed and try forms, and a plain thread on the other end.

#include <weft/runtime.hpp>
#include <weft/sync/channel.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "example_support.hpp"  // check() and failures

using namespace std::chrono_literals;

int main() {
    weft::runtime rt({.workers = 2});

    // 1. A pipeline. Each stage is a task; closing a channel tells the next
    //    stage that no more values come.
    const long total = rt.block_on([] {
        weft::channel<long> numbers(16), squares(16);
        auto gen = weft::spawn([&] {
            for (long i = 1; i <= 1000; ++i) numbers.send(i);
            numbers.close();
        });
        auto sq = weft::spawn([&] {
            for (long n : numbers) squares.send(n * n);  // ends when numbers is closed and drained
            squares.close();
        });
        long sum = 0;
        for (long s : squares) sum += s;
        gen.join();
        sq.join();
        return sum;
    });
    std::printf("1. sum of the first 1000 squares through a pipeline: %ld\n", total);
    check(total == 1000L * 1001 * 2001 / 6, "pipeline sum");

    // 2. Fan-out / fan-in: jobs go to whichever worker task is free.
    const int handled = rt.block_on([] {
        weft::channel<int> jobs;  // rendezvous: a job is handed to a free worker
        weft::channel<int> done(weft::channel<int>::unbounded);
        std::vector<weft::join_handle<void>> workers;
        for (int w = 0; w < 4; ++w)
            workers.push_back(weft::spawn([&] {
                while (auto job = jobs.recv()) done.send(*job * 2);
            }));
        for (int j = 0; j < 100; ++j) jobs.send(j);
        jobs.close();
        for (auto& w : workers) w.join();
        done.close();
        int count = 0, sum = 0;
        for (int r : done) {
            ++count;
            sum += r;
        }
        return count == 100 && sum == 9900 ? count : -1;
    });
    std::printf("2. four workers handled %d jobs\n", handled);
    check(handled == 100, "fan-out / fan-in");

    // 3. Move-only values. A send that fails (closed, full, timed out)
    //    leaves the value where it was.
    rt.block_on([] {
        weft::channel<std::unique_ptr<std::string>> ch(1);
        ch.send(std::make_unique<std::string>("first"));
        auto second = std::make_unique<std::string>("second");
        const auto s = ch.try_send(std::move(second));
        std::printf("3. try_send into a full channel: %s; the value is still ours: %s\n", weft::to_string(s),
                    second ? second->c_str() : "(lost!)");
        check(s == weft::channel_status::full && second, "try_send keeps the value");
        ch.close();
        try {
            ch.send(std::move(second));
            check(false, "send on a closed channel throws");
        } catch (const weft::channel_closed& e) {
            std::printf("   send after close: %s; still ours: %s\n", e.what(), second ? second->c_str() : "(lost!)");
            check(second != nullptr, "failed send keeps the value");
        }
        auto first = ch.recv();  // buffered values survive close()
        check(first && **first == "first", "drain after close");
        check(!ch.recv(), "closed and drained");
    });

    // 4. Timeouts, and a plain thread on the other end of a channel.
    weft::channel<int> requests, replies;
    auto server = rt.spawn([&] {
        for (;;) {
            auto r = requests.recv_for(2s);
            if (r.status != weft::channel_status::ok) break;  // closed (or idle for 2 s)
            replies.send(*r.value + 1);
        }
    });
    int answer = 0;
    for (int i = 0; i < 10; ++i) {
        requests.send(i);  // this thread blocks until the task takes it
        answer += *replies.recv();
    }
    const auto quiet = replies.recv_for(10ms);
    std::printf("4. a plain thread asked a task 10 times: %d; one more recv_for(10ms): %s\n", answer,
                weft::to_string(quiet.status));
    check(answer == 55 && quiet.status == weft::channel_status::timeout, "thread <-> task");
    requests.close();
    server.join();

    if (failures) std::printf("%d check(s) FAILED\n", failures);
    return failures ? 1 : 0;
}
