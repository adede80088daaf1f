// channel_stress_test.cpp: values through a channel between 4 producers and
// 4 consumers on 4 workers, with random timeouts on both sides and random
// cancellations of producing and consuming tasks mid-operation. Checks that
// every value whose send reported ok was received exactly once and no other
// value was (so also: the checksum of received values equals that of the
// sent values minus those whose send failed).
//
// WEFT_STRESS_VALUES sets the number of values (1,000,000 by default;
// 50,000 under sanitizers and valgrind, 20,000 under qemu).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "unit/runtime/runtime_fixture.hpp"
#include "weft/runtime.hpp"
#include "weft/sync/channel.hpp"

namespace {

using namespace std::chrono_literals;
using weft::channel_status;

struct lcg {
    std::uint32_t x;
    std::uint32_t next() noexcept { return x = x * 1664525u + 1013904223u; }
};

// exercised is how often a run's operations timed out (sends and receives)
// and how many batch tasks were canceled.
struct exercised {
    std::uint64_t timeouts = 0, canceled = 0;
};

// run_once_through() pushes values [0, n) through one channel of capacity
// cap and checks the books.
exercised run_once_through(std::size_t n, std::size_t cap) {
    weft::runtime_options o;
    o.workers = 4;
    weft::runtime rt(o);
    std::unique_ptr<std::atomic<std::uint8_t>[]> sent(new std::atomic<std::uint8_t>[n]);
    std::unique_ptr<std::atomic<std::uint8_t>[]> seen(new std::atomic<std::uint8_t>[n]);
    for (std::size_t i = 0; i < n; ++i) {
        sent[i].store(0, std::memory_order_relaxed);
        seen[i].store(0, std::memory_order_relaxed);
    }
    std::atomic<std::uint64_t> sent_sum{0}, recv_sum{0}, canceled{0}, timeouts{0};
    rt.block_on([&] {
        weft::channel<std::uint32_t> ch(cap);
        const std::size_t per_producer = n / 4;
        const std::size_t batch = 256;
        std::vector<weft::join_handle<void>> producers, consumers;
        for (std::uint32_t p = 0; p < 4; ++p)
            producers.push_back(weft::spawn([&, p] {
                lcg r{p + 1};
                const std::size_t first = p * per_producer;
                const std::size_t last = p == 3 ? n : first + per_producer;
                for (std::size_t b = first; b < last; b += batch) {
                    auto h = weft::spawn([&, b, seed = r.next()] {
                        lcg q{seed};
                        for (std::size_t v = b; v < std::min(b + batch, last); ++v) {
                            std::uint32_t value = static_cast<std::uint32_t>(v);
                            const bool short_wait = (q.next() >> 29) == 0;  // 1 in 8
                            const channel_status s = short_wait ? ch.send_for(std::move(value), std::chrono::microseconds(q.next() % 40))
                                                                : ch.send_for(std::move(value), 30s);
                            // No suspension between the send's end and this
                            // record, so a cancellation cannot fall between.
                            if (s == channel_status::ok) {
                                sent[v].store(1, std::memory_order_relaxed);
                                sent_sum.fetch_add(v, std::memory_order_relaxed);
                            } else {
                                timeouts.fetch_add(1, std::memory_order_relaxed);
                            }
                        }
                    });
                    if ((r.next() >> 29) == 0) {  // cancel 1 batch in 8, mid-way
                        for (std::uint32_t k = r.next() % 4; k > 0; --k) weft::this_task::yield();
                        h.cancel();
                    }
                    try {
                        h.join();
                    } catch (const weft::task_canceled&) {
                        canceled.fetch_add(1, std::memory_order_relaxed);
                    }
                }
            }));
        for (std::uint32_t c = 0; c < 4; ++c)
            consumers.push_back(weft::spawn([&, c] {
                lcg r{c + 100};
                for (bool closed = false; !closed;) {
                    auto h = weft::spawn([&, seed = r.next()] {
                        lcg q{seed};
                        for (int k = 0; k < 256; ++k) {
                            const bool short_wait = (q.next() >> 29) == 0;
                            auto got = short_wait ? ch.recv_for(std::chrono::microseconds(q.next() % 40))
                                                  : ch.recv_for(30s);
                            if (got.status == channel_status::closed) return true;
                            if (got.status != channel_status::ok) {
                                timeouts.fetch_add(1, std::memory_order_relaxed);
                                continue;
                            }
                            const std::uint32_t v = *got.value;
                            seen[v].fetch_add(1, std::memory_order_relaxed);
                            recv_sum.fetch_add(v, std::memory_order_relaxed);
                        }
                        return false;
                    });
                    if ((r.next() >> 29) == 0) {
                        for (std::uint32_t k = r.next() % 4; k > 0; --k) weft::this_task::yield();
                        h.cancel();
                    }
                    try {
                        closed = h.join();
                    } catch (const weft::task_canceled&) {
                        canceled.fetch_add(1, std::memory_order_relaxed);
                    }
                }
            }));
        for (auto& h : producers) h.join();
        ch.close();
        for (auto& h : consumers) h.join();
        EXPECT_EQ(ch.size(), 0u);
    });
    std::size_t sent_n = 0, lost = 0, extra = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const unsigned s = sent[i].load(), g = seen[i].load();
        sent_n += s;
        if (s == 1 && g == 0) ++lost;
        if (g > s) ++extra;
    }
    EXPECT_EQ(lost, 0u) << "values whose send reported ok but were never received (capacity " << cap << ")";
    EXPECT_EQ(extra, 0u) << "values received twice or without an ok send (capacity " << cap << ")";
    EXPECT_EQ(sent_sum.load(), recv_sum.load()) << "capacity " << cap;
    EXPECT_GT(sent_n, n / 2);
    return {timeouts.load(), canceled.load()};
}

TEST(channel_stress, values_through_4x4_with_timeouts_and_cancels_are_neither_lost_nor_duplicated) {
    weft::test::watchdog dog(std::chrono::seconds(240));
    const std::size_t n = weft::test::env_count("WEFT_STRESS_VALUES",
                                                weft::test::under_user_mode_emulator() ? 20'000 : 1'000'000, 50'000);
    const exercised a = run_once_through(n / 2, 0);
    const exercised b = run_once_through(n / 2, 64);
    // The runs must have exercised what they claim to: some operations timed
    // out (sends or receives; which ones depends on the machine's speed, so
    // the two runs are counted together) and some batches were canceled.
    EXPECT_GT(a.timeouts + b.timeouts, 0u);
    EXPECT_GT(a.canceled + b.canceled, 0u);
}

}  // namespace
