// work_deque_test.cpp: detail::work_deque, the scheduler's Chase-Lev deque.
// Empty behaviour, LIFO pop and FIFO steal, growth (alone and while thieves
// read the old rings), the race for the last item between pop() and steal()
// and between the owner's own steal() and a thief, the race for the last two
// items between pop() and two thieves, and steal_half(). Every
// concurrent case has a fixed amount of work (no time-based loops), checks
// that each item is taken exactly once, and runs under a watchdog that fails
// and aborts instead of hanging. Counts are scaled down under
// ThreadSanitizer.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "unit/runtime/runtime_fixture.hpp"
#include "work_deque.hpp"

namespace {

using weft::detail::work_deque;

#if defined(__SANITIZE_THREAD__)
constexpr bool under_tsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool under_tsan = true;
#else
constexpr bool under_tsan = false;
#endif
#else
constexpr bool under_tsan = false;
#endif

// scaled(n) is n, or n / 4 under ThreadSanitizer (about ten times slower on
// the concurrent tests; the full counts take about 3 s there on 2 cores), or
// n / 20 under qemu-user (the lock-step races spin-wait on emulated cores:
// a Debug AArch64 run needed more than 60 s for one test at full counts).
std::size_t scaled(std::size_t n) {
    static const bool emulated = weft::test::under_user_mode_emulator();
    return emulated ? n / 20 : under_tsan ? n / 4 : n;
}

// spin_until(ready) busy-waits for ready() to become true, yielding now and
// then so that it also makes progress on an overloaded machine.
template <class Pred>
void spin_until(Pred ready) {
    for (unsigned spins = 0; !ready(); ++spins) {
        if (spins % 64 == 63) std::this_thread::yield();
    }
}

// jitter(seed) busy-waits for a pseudo-random 0..4095 iterations chosen by
// `seed` (a round number), so that racing threads meet at varying offsets:
// without it one side of a race wins nearly always.
void jitter(std::size_t seed) {
    const auto n = static_cast<unsigned>((seed * 2654435761u) >> 7) % 4096u;
    for (unsigned i = 0; i < n; ++i) asm volatile("" ::: "memory");
}

// run_bounded(bodies) runs each body on a thread of its own, all starting
// together (once every thread is up), and waits for all of them. A body
// still running after `limit` fails the test and aborts the process: a lost
// wake-up or livelock in the deque must fail CI, not hang it. Exceptions
// from a body are rethrown.
void run_bounded(std::vector<std::function<void()>> bodies,
                 std::chrono::seconds limit = std::chrono::seconds(60)) {
    if (weft::test::under_user_mode_emulator()) limit *= 5;  // as the runtime tests' watchdog
    std::atomic<std::size_t> arrived{0};
    const std::size_t n = bodies.size();
    std::vector<std::future<void>> running;
    running.reserve(n);
    for (auto& body : bodies) {
        running.push_back(std::async(std::launch::async, [&arrived, n, body = std::move(body)] {
            arrived.fetch_add(1, std::memory_order_acq_rel);
            spin_until([&] { return arrived.load(std::memory_order_acquire) == n; });
            body();
        }));
    }
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (std::size_t i = 0; i < running.size(); ++i) {
        if (running[i].wait_until(deadline) != std::future_status::ready) {
            ADD_FAILURE() << "thread " << i << " did not finish within " << limit.count() << " s";
            std::fprintf(stderr, "work_deque_test: thread %zu did not finish within %lld s; aborting\n", i,
                         static_cast<long long>(limit.count()));
            std::fflush(stderr);
            std::abort();
        }
    }
    for (auto& f : running) f.get();
}

// tally counts how often each of n distinct items was taken. The producer
// writes each item's contents just before pushing it (make()) and take()
// reads them back, so a deque that hands out an item without publishing it
// shows up as a wrong value here and as a data race under ThreadSanitizer.
// take() accepts any pointer and counts those outside the item array as
// strays, so that a garbage pointer from a broken deque fails the test
// instead of corrupting memory.
class tally {
public:
    explicit tally(std::size_t n)
        : items_(std::make_unique<int[]>(n)), taken_(std::make_unique<std::atomic<int>[]>(n)), n_(n) {
        for (std::size_t i = 0; i < n; ++i) items_[i] = -1;
    }

    // make(i) gives item i its contents (the int i) and returns its address,
    // ready to push. Call once per item, on the pushing thread.
    int* make(std::size_t i) {
        items_[i] = static_cast<int>(i);
        return &items_[i];
    }
    // address(i) is item i's address, for comparisons; reads nothing.
    int* address(std::size_t i) { return &items_[i]; }

    // take(p) records that p was handed out once. Any thread.
    void take(int* p) {
        // Compared as integers: < on unrelated pointers is unspecified.
        const auto offset = reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(items_.get());
        if (offset >= n_ * sizeof(int) || offset % sizeof(int) != 0) {
            strays_.fetch_add(1, std::memory_order_relaxed);
            return;
        }
        const std::size_t i = offset / sizeof(int);
        if (*p != static_cast<int>(i)) corrupt_.fetch_add(1, std::memory_order_relaxed);
        taken_[i].fetch_add(1, std::memory_order_relaxed);
        total_.fetch_add(1, std::memory_order_relaxed);
    }

    // expect_each_once() checks that every item was taken exactly once and
    // nothing else was. Call after the threads were joined.
    void expect_each_once() const {
        EXPECT_EQ(strays_.load(), 0u) << "pointers that were never pushed";
        EXPECT_EQ(corrupt_.load(), 0u) << "items whose contents were not visible";
        EXPECT_EQ(total_.load(), n_);
        std::size_t lost = 0;
        std::size_t twice = 0;
        for (std::size_t i = 0; i < n_; ++i) {
            const int c = taken_[i].load();
            if (c == 0) ++lost;
            if (c > 1) ++twice;
            if (c != 1 && lost + twice <= 5) ADD_FAILURE() << "item " << i << " taken " << c << " times";
        }
        EXPECT_EQ(lost, 0u) << "items never taken";
        EXPECT_EQ(twice, 0u) << "items taken more than once";
    }

private:
    std::unique_ptr<int[]> items_;
    std::unique_ptr<std::atomic<int>[]> taken_;
    std::size_t n_;
    std::atomic<std::size_t> total_{0};
    std::atomic<std::size_t> strays_{0};
    std::atomic<std::size_t> corrupt_{0};
};

// -------------------------------------------------------------- one thread

TEST(work_deque, empty_deque_returns_nullptr) {
    work_deque<int> d(4);
    EXPECT_EQ(d.pop(), nullptr);
    EXPECT_EQ(d.steal(), nullptr);
    EXPECT_TRUE(d.empty_estimate());
    EXPECT_EQ(d.size_estimate(), 0);

    // Many pops on an empty deque must not move bottom below top for good
    // (an unsigned index would wrap here).
    for (int i = 0; i < 1000; ++i) EXPECT_EQ(d.pop(), nullptr);
    EXPECT_EQ(d.size_estimate(), 0);
    int x = 7;
    d.push(&x);
    EXPECT_EQ(d.size_estimate(), 1);
    EXPECT_FALSE(d.empty_estimate());
    EXPECT_EQ(d.pop(), &x);
    EXPECT_EQ(d.pop(), nullptr);
    EXPECT_EQ(d.steal(), nullptr);

    d.push(&x);
    EXPECT_EQ(d.steal(), &x);
    EXPECT_EQ(d.steal(), nullptr);
    EXPECT_EQ(d.pop(), nullptr);
    EXPECT_TRUE(d.empty_estimate());
}

TEST(work_deque, capacity_is_rounded_up_to_a_power_of_two) {
    EXPECT_EQ(work_deque<int>(0).capacity(), 1u);
    EXPECT_EQ(work_deque<int>(1).capacity(), 1u);
    EXPECT_EQ(work_deque<int>(3).capacity(), 4u);
    EXPECT_EQ(work_deque<int>(256).capacity(), 256u);
    EXPECT_EQ(work_deque<int>(257).capacity(), 512u);
    EXPECT_EQ(work_deque<int>().capacity(), 256u);

    // A ring of one grows on the second push.
    std::array<int, 3> items{};
    work_deque<int> d(1);
    for (int& x : items) d.push(&x);
    EXPECT_EQ(d.capacity(), 4u);
    EXPECT_EQ(d.steal(), &items[0]);
    EXPECT_EQ(d.pop(), &items[2]);
    EXPECT_EQ(d.pop(), &items[1]);
    EXPECT_EQ(d.pop(), nullptr);
}

TEST(work_deque, pop_is_lifo_and_steal_is_fifo) {
    constexpr int n = 100;
    std::array<int, n> items{};
    work_deque<int> d(8);

    for (int i = 0; i < n; ++i) d.push(&items[i]);
    for (int i = n - 1; i >= 0; --i) ASSERT_EQ(d.pop(), &items[i]);
    EXPECT_EQ(d.pop(), nullptr);

    for (int i = 0; i < n; ++i) d.push(&items[i]);
    for (int i = 0; i < n; ++i) ASSERT_EQ(d.steal(), &items[i]);
    EXPECT_EQ(d.steal(), nullptr);

    // Both ends of one deque: push 0..3, then alternate.
    for (int i = 0; i < 4; ++i) d.push(&items[i]);
    EXPECT_EQ(d.steal(), &items[0]);
    EXPECT_EQ(d.pop(), &items[3]);
    EXPECT_EQ(d.steal(), &items[1]);
    EXPECT_EQ(d.pop(), &items[2]);
    EXPECT_EQ(d.pop(), nullptr);
    EXPECT_EQ(d.steal(), nullptr);
}

// The solo forms (DEQUE-I6) must take exactly what the shared forms take:
// one deque of each, driven by the same random sequence of push, pop and
// owner's steal (growing from a ring of 2 and wrapping around), must give the
// same item at every step, and the same size estimate. A second thread reads
// the solo deque's estimate meanwhile, as the watchdog and has_work() may
// (TSan checks that those reads race with nothing).
TEST(work_deque, solo_forms_take_what_the_shared_forms_take) {
    constexpr std::size_t n = 2'000;
    constexpr int steps = 20'000;
    std::vector<int> items(n);
    work_deque<int> solo(2), shared(2);
    std::atomic<bool> done{false};
    std::atomic<std::int64_t> seen_max{0};
    std::thread reader([&] {
        for (int i = 0; i < 100'000 && !done.load(std::memory_order_relaxed); ++i) {
            const std::int64_t s = solo.size_estimate();
            if (s > seen_max.load(std::memory_order_relaxed)) seen_max.store(s, std::memory_order_relaxed);
        }
    });
    std::uint64_t rng = 0x9e3779b97f4a7c15ull;
    std::size_t next = 0, took = 0;
    std::int64_t most = 0;
    for (int k = 0; k < steps; ++k) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        const unsigned op = static_cast<unsigned>(rng % 5);
        if (op < 3 && next < n) {  // push, 3 in 5 while items last
            solo.push_solo(&items[next]);
            shared.push(&items[next]);
            ++next;
        } else if (op == 3) {
            int* a = solo.pop_solo();
            ASSERT_EQ(a, shared.pop()) << "step " << k;
            if (a) ++took;
        } else {
            int* a = solo.steal_solo();
            ASSERT_EQ(a, shared.steal()) << "step " << k;
            if (a) ++took;
        }
        ASSERT_EQ(solo.size_estimate(), shared.size_estimate()) << "step " << k;
        most = std::max(most, solo.size_estimate());
    }
    done.store(true);
    reader.join();
    while (int* a = solo.pop_solo()) {
        ASSERT_EQ(a, shared.pop());
        ++took;
    }
    EXPECT_EQ(shared.pop(), nullptr);
    EXPECT_EQ(solo.steal_solo(), nullptr);
    EXPECT_EQ(took, next);
    EXPECT_GT(most, 2) << "the sequence never made the ring grow";
    // The estimate reads top and bottom one after the other, so it may
    // exceed every size the deque had, but never the items pushed.
    EXPECT_LE(seen_max.load(), static_cast<std::int64_t>(n));
}

TEST(work_deque, grows_far_past_initial_capacity) {
    constexpr std::size_t n = 10'000;
    tally t(n);
    work_deque<int> d(2);
    for (std::size_t i = 0; i < n; ++i) d.push(t.make(i));
    EXPECT_EQ(d.size_estimate(), static_cast<std::int64_t>(n));
    EXPECT_GE(d.capacity(), n);
    // Half from each end, checking the order at both.
    for (std::size_t i = 0; i < n / 2; ++i) {
        int* p = d.steal();
        ASSERT_EQ(p, t.address(i));
        t.take(p);
    }
    for (std::size_t i = n; i-- > n / 2;) {
        int* p = d.pop();
        ASSERT_EQ(p, t.address(i));
        t.take(p);
    }
    EXPECT_EQ(d.pop(), nullptr);
    EXPECT_EQ(d.steal(), nullptr);
    t.expect_each_once();
}

TEST(work_deque, grows_when_the_items_wrap_around_the_ring) {
    // Move top and bottom to the middle of a ring of 4, then fill it so that
    // the live items wrap past the end when it grows.
    std::array<int, 16> items{};
    work_deque<int> d(4);
    ASSERT_EQ(d.capacity(), 4u);
    for (int i = 0; i < 3; ++i) d.push(&items[i]);
    EXPECT_EQ(d.steal(), &items[0]);
    EXPECT_EQ(d.steal(), &items[1]);
    for (int i = 3; i < 10; ++i) d.push(&items[i]);  // indices 2..9: 8 items
    EXPECT_EQ(d.capacity(), 8u);
    EXPECT_EQ(d.size_estimate(), 8);
    for (int i = 2; i < 6; ++i) EXPECT_EQ(d.steal(), &items[i]);
    for (int i = 9; i >= 6; --i) EXPECT_EQ(d.pop(), &items[i]);
    EXPECT_EQ(d.pop(), nullptr);
}

TEST(work_deque, steal_half_moves_half_rounded_up_oldest_first) {
    std::array<int, 16> items{};
    work_deque<int> from(4);
    work_deque<int> into(2);

    EXPECT_EQ(from.steal_half(into), 0u);  // empty
    EXPECT_TRUE(into.empty_estimate());

    from.push(&items[0]);
    EXPECT_EQ(from.steal_half(into), 1u);  // one item: half rounded up
    EXPECT_EQ(into.pop(), &items[0]);
    EXPECT_TRUE(from.empty_estimate());

    for (int i = 0; i < 10; ++i) from.push(&items[i]);
    EXPECT_EQ(from.steal_half(into), 5u);
    EXPECT_EQ(from.size_estimate(), 5);
    EXPECT_EQ(into.size_estimate(), 5);
    // into got the five oldest, in order (its steal end is its oldest).
    for (int i = 0; i < 5; ++i) EXPECT_EQ(into.steal(), &items[i]);
    for (int i = 9; i >= 5; --i) EXPECT_EQ(from.pop(), &items[i]);

    for (int i = 0; i < 7; ++i) from.push(&items[i]);
    EXPECT_EQ(from.steal_half(into), 4u);  // 7 -> 4 moved, 3 left
    EXPECT_EQ(from.size_estimate(), 3);
    EXPECT_EQ(into.size_estimate(), 4);
}

// ------------------------------------------------------------ concurrency

// The last item, raced for by the owner's pop() and a thief's steal():
// exactly one of them gets it, every round. The thief runs a fixed number of
// rounds in lock step with the owner (two counters, spin-waited).
TEST(work_deque, one_item_race_pop_against_steal) {
    const std::size_t rounds = scaled(50'000);
    work_deque<int> d(2);
    int item = 0;
    bool bad_value = false;  // written by the thief only
    std::atomic<std::size_t> ready{0};     // round the thief waits for
    std::atomic<std::size_t> started{0};   // round the owner has pushed for
    std::atomic<std::size_t> finished{0};  // round the thief is done with
    std::vector<int*> stolen(rounds + 1, nullptr);
    std::vector<int*> popped(rounds + 1, nullptr);

    run_bounded({
        [&] {  // owner
            for (std::size_t r = 1; r <= rounds; ++r) {
                spin_until([&] { return ready.load(std::memory_order_acquire) == r; });
                item = static_cast<int>(r);  // published by push()
                d.push(&item);
                started.store(r, std::memory_order_release);
                jitter(r);
                popped[r] = d.pop();
                spin_until([&] { return finished.load(std::memory_order_acquire) == r; });
            }
        },
        [&] {  // thief
            for (std::size_t r = 1; r <= rounds; ++r) {
                ready.store(r, std::memory_order_release);
                spin_until([&] { return started.load(std::memory_order_acquire) == r; });
                stolen[r] = d.steal();
                if (stolen[r] != nullptr && *stolen[r] != static_cast<int>(r)) bad_value = true;
                finished.store(r, std::memory_order_release);
            }
        },
    });

    std::size_t both = 0, neither = 0, thief_won = 0;
    for (std::size_t r = 1; r <= rounds; ++r) {
        const bool p = popped[r] != nullptr, s = stolen[r] != nullptr;
        if (p && s) ++both;
        if (!p && !s) ++neither;
        if (s) ++thief_won;
        if (p) {
            EXPECT_EQ(popped[r], &item);
        }
        if (s) {
            EXPECT_EQ(stolen[r], &item);
        }
    }
    EXPECT_FALSE(bad_value) << "the thief saw an item's old contents";
    EXPECT_EQ(both, 0u) << "the one item was taken twice";
    EXPECT_EQ(neither, 0u) << "the one item was lost";
    EXPECT_TRUE(d.empty_estimate());
    std::printf("[          ] thief won %zu of %zu rounds\n", thief_won, rounds);
}

// The owner takes its oldest item with steal() on its own deque while a
// thief steals the same item: exactly one gets it (the loser sees nullptr).
TEST(work_deque, one_item_race_owner_steal_against_thief_steal) {
    const std::size_t rounds = scaled(50'000);
    work_deque<int> d(2);
    int item = 0;
    bool bad_value = false;  // written by the thief only
    std::atomic<std::size_t> ready{0};
    std::atomic<std::size_t> started{0};
    std::atomic<std::size_t> finished{0};
    std::vector<int*> by_thief(rounds + 1, nullptr);
    std::vector<int*> by_owner(rounds + 1, nullptr);

    run_bounded({
        [&] {  // owner
            for (std::size_t r = 1; r <= rounds; ++r) {
                spin_until([&] { return ready.load(std::memory_order_acquire) == r; });
                item = static_cast<int>(r);  // published by push()
                d.push(&item);
                started.store(r, std::memory_order_release);
                jitter(r);
                by_owner[r] = d.steal();
                spin_until([&] { return finished.load(std::memory_order_acquire) == r; });
            }
        },
        [&] {  // thief
            for (std::size_t r = 1; r <= rounds; ++r) {
                ready.store(r, std::memory_order_release);
                spin_until([&] { return started.load(std::memory_order_acquire) == r; });
                by_thief[r] = d.steal();
                if (by_thief[r] != nullptr && *by_thief[r] != static_cast<int>(r)) bad_value = true;
                finished.store(r, std::memory_order_release);
            }
        },
    });

    std::size_t wrong = 0;
    for (std::size_t r = 1; r <= rounds; ++r) {
        if ((by_owner[r] != nullptr) == (by_thief[r] != nullptr)) ++wrong;
    }
    EXPECT_FALSE(bad_value) << "the thief saw an item's old contents";
    EXPECT_EQ(wrong, 0u) << "rounds in which the item was taken twice or lost";
    EXPECT_EQ(d.pop(), nullptr);
    std::size_t thief_won = 0;
    for (std::size_t r = 1; r <= rounds; ++r) thief_won += by_thief[r] != nullptr;
    std::printf("[          ] thief won %zu of %zu rounds\n", thief_won, rounds);
}

// The last two items, raced for by the owner's pop() and two thieves: the
// case where a thief that read bottom_ before the owner's pop() lowered it
// must still lose index b (it meets the pop only through the other thief's
// steal of index b - 1). Every round, each item is taken exactly once by
// pop(), a steal() or the owner's drain at the end of the round. This is
// the test that catches steal() loading bottom_ before top_.
TEST(work_deque, last_two_items_pop_against_two_thieves) {
    const std::size_t rounds = scaled(100'000);
    work_deque<int> d(4);
    std::array<int, 2> items{};
    std::atomic<std::size_t> ready{0};     // thieves waiting, 2 per round
    std::atomic<std::size_t> started{0};   // round the owner has pushed for
    std::atomic<std::size_t> finished{0};  // thieves done, 2 per round
    std::atomic<bool> bad_value{false};
    // taken[3 * r + k]: what the owner (k = 0) and thief k (1, 2) got in
    // round r; drained[r]: what the owner popped after the race.
    std::vector<int*> taken(3 * (rounds + 1), nullptr);
    std::vector<std::array<int*, 2>> drained(rounds + 1, {nullptr, nullptr});

    auto thief = [&](std::size_t k) {
        for (std::size_t r = 1; r <= rounds; ++r) {
            ready.fetch_add(1, std::memory_order_acq_rel);
            spin_until([&] { return started.load(std::memory_order_acquire) == r; });
            jitter(r ^ (k * 0x9e37));
            int* p = d.steal();
            if (p != nullptr && *p != static_cast<int>(r)) bad_value.store(true, std::memory_order_relaxed);
            taken[3 * r + k] = p;
            finished.fetch_add(1, std::memory_order_acq_rel);
        }
    };
    run_bounded({
        [&] {  // owner
            for (std::size_t r = 1; r <= rounds; ++r) {
                spin_until([&] { return ready.load(std::memory_order_acquire) == 2 * r; });
                items = {static_cast<int>(r), static_cast<int>(r)};  // published by push()
                d.push(&items[0]);
                d.push(&items[1]);
                started.store(r, std::memory_order_release);
                jitter(r);
                taken[3 * r] = d.pop();
                spin_until([&] { return finished.load(std::memory_order_acquire) == 2 * r; });
                for (int*& slot : drained[r]) slot = d.pop();
            }
        },
        [&] { thief(1); },
        [&] { thief(2); },
    });

    EXPECT_FALSE(bad_value.load()) << "a thief saw an item's old contents";
    std::size_t wrong = 0;
    for (std::size_t r = 1; r <= rounds; ++r) {
        std::array<int, 2> count{};
        std::size_t strays = 0;
        auto note = [&](int* p) {
            if (p == &items[0]) ++count[0];
            else if (p == &items[1]) ++count[1];
            else if (p != nullptr) ++strays;
        };
        for (std::size_t k = 0; k < 3; ++k) note(taken[3 * r + k]);
        for (int* p : drained[r]) note(p);
        if (count[0] != 1 || count[1] != 1 || strays != 0) {
            if (++wrong <= 5) {
                ADD_FAILURE() << "round " << r << ": item 0 taken " << count[0] << " times, item 1 "
                              << count[1] << " times, " << strays << " strays";
            }
        }
    }
    EXPECT_EQ(wrong, 0u) << "rounds in which an item was taken twice or lost";
    EXPECT_TRUE(d.empty_estimate());
}

// Growth while thieves read the old rings. The owner works through a series
// of deques that all start at capacity 2: into each it pushes a burst of
// items (so the ring doubles again and again while three thieves steal from
// it), popping and stealing some itself on the way, then drains it with
// pop() and moves to the next. Retired deques stay alive, so a slow thief
// may still be stealing from one; pop() never fails spuriously, so a drained
// deque is empty for good. Every item must be taken exactly once.
TEST(work_deque, growth_under_concurrent_steals_takes_each_item_once) {
    const std::size_t items = scaled(2'000'000);
    constexpr std::size_t burst = 4096;  // pushes per deque: ~11 doublings from 2
    const std::size_t deques = (items + burst - 1) / burst;
    constexpr int thieves = 3;

    tally t(items);
    std::vector<std::unique_ptr<work_deque<int>>> ds;
    for (std::size_t i = 0; i < deques; ++i) ds.push_back(std::make_unique<work_deque<int>>(2));
    std::atomic<std::size_t> current{0};
    std::atomic<bool> done{false};
    std::atomic<std::size_t> max_capacity{0};
    std::array<std::size_t, thieves> stolen_by{};

    std::vector<std::function<void()>> bodies;
    bodies.push_back([&] {  // owner
        std::size_t next = 0;
        for (std::size_t k = 0; k < deques; ++k) {
            work_deque<int>& d = *ds[k];
            current.store(k, std::memory_order_release);
            for (std::size_t j = 0; j < burst && next < items; ++j) {
                d.push(t.make(next++));
                if (j % 4 == 3) {
                    if (int* p = d.pop()) t.take(p);
                }
                if (j % 7 == 6) {
                    if (int* p = d.steal()) t.take(p);  // the owner's FIFO end
                }
            }
            if (d.capacity() > max_capacity.load(std::memory_order_relaxed)) {
                max_capacity.store(d.capacity(), std::memory_order_relaxed);
            }
            while (int* p = d.pop()) t.take(p);
        }
        done.store(true, std::memory_order_release);
    });
    for (int i = 0; i < thieves; ++i) {
        bodies.push_back([&, i] {
            std::size_t n = 0;
            while (!done.load(std::memory_order_acquire)) {
                work_deque<int>& d = *ds[current.load(std::memory_order_acquire)];
                if (int* p = d.steal()) {
                    t.take(p);
                    ++n;
                }
            }
            stolen_by[static_cast<std::size_t>(i)] = n;
        });
    }
    run_bounded(std::move(bodies));

    t.expect_each_once();
    for (auto& d : ds) EXPECT_TRUE(d->empty_estimate());
    std::size_t stolen = 0;
    for (std::size_t n : stolen_by) stolen += n;
    // Not a correctness condition, but without steals and growth this test
    // would prove nothing; report them.
    EXPECT_GT(max_capacity.load(), 2u);
    std::printf("[          ] %zu items, %zu deques, thieves stole %zu, max capacity %zu\n", items, deques,
                stolen, max_capacity.load());
}

// steal_half() by a thief into its own deque while the owner pushes and
// pops, and a second thief takes half of the first thief's deque while the
// first pops from it: a chain owner -> thief 1 -> thief 2. steal_half()'s
// count must match what arrives, and every item is taken once.
TEST(work_deque, steal_half_concurrent_with_owner_loses_nothing) {
    const std::size_t items = scaled(400'000);
    tally t(items);
    work_deque<int> owner_d(2);
    work_deque<int> thief1_d(2);
    work_deque<int> thief2_d(2);
    std::atomic<bool> owner_done{false};
    std::atomic<bool> thief1_done{false};
    std::atomic<std::size_t> miscounted{0};
    std::atomic<std::size_t> moved_total{0};

    // drain_own(d) pops d empty (the caller owns it), counts what it took
    // and returns how many.
    auto drain_own = [&](work_deque<int>& d) {
        std::size_t n = 0;
        while (int* p = d.pop()) {
            t.take(p);
            ++n;
        }
        return n;
    };

    run_bounded({
        [&] {  // owner: pushes in bursts, pops some back
            for (std::size_t i = 0; i < items; ++i) {
                owner_d.push(t.make(i));
                if (i % 3 == 2) {
                    if (int* p = owner_d.pop()) t.take(p);
                }
            }
            while (int* p = owner_d.pop()) t.take(p);
            owner_done.store(true, std::memory_order_release);
        },
        [&] {  // thief 1: steal_half from the owner, then work its own deque
            while (!owner_done.load(std::memory_order_acquire)) {
                const std::size_t moved = owner_d.steal_half(thief1_d);
                moved_total.fetch_add(moved, std::memory_order_relaxed);
                // Pop about half of what arrived; thief 2 may take the rest.
                for (std::size_t k = 0; k < moved / 2 + 1; ++k) {
                    if (int* p = thief1_d.pop()) t.take(p);
                }
            }
            drain_own(thief1_d);
            thief1_done.store(true, std::memory_order_release);
        },
        [&] {  // thief 2: steal_half from thief 1, check the count arrived
            while (!thief1_done.load(std::memory_order_acquire)) {
                const std::size_t moved = thief1_d.steal_half(thief2_d);
                moved_total.fetch_add(moved, std::memory_order_relaxed);
                // Nobody steals from thief2_d: all `moved` must be there.
                if (drain_own(thief2_d) != moved) miscounted.fetch_add(1, std::memory_order_relaxed);
            }
        },
    });

    t.expect_each_once();
    EXPECT_EQ(miscounted.load(), 0u) << "steal_half() returned a count different from what it moved";
    EXPECT_TRUE(owner_d.empty_estimate());
    EXPECT_TRUE(thief1_d.empty_estimate());
    EXPECT_TRUE(thief2_d.empty_estimate());
    std::printf("[          ] steal_half moved %zu of %zu items\n", moved_total.load(), items);
}

// steal_half() moves half of a deque that nobody else touches, exactly, and
// repeatedly halving drains it: 1000 -> 500 -> 250 -> ...
TEST(work_deque, steal_half_repeated_halves_exactly) {
    constexpr std::size_t n = 1000;
    tally t(n);
    work_deque<int> from(2);
    for (std::size_t i = 0; i < n; ++i) from.push(t.make(i));
    std::size_t left = n;
    std::size_t next_oldest = 0;
    while (left > 0) {
        work_deque<int> into(2);
        const std::size_t moved = from.steal_half(into);
        ASSERT_EQ(moved, left - left / 2);
        left -= moved;
        ASSERT_EQ(from.size_estimate(), static_cast<std::int64_t>(left));
        for (std::size_t k = 0; k < moved; ++k) {
            int* p = into.steal();
            ASSERT_EQ(p, t.address(next_oldest++));
            t.take(p);
        }
        ASSERT_EQ(into.pop(), nullptr);
    }
    t.expect_each_once();
}

}  // namespace
