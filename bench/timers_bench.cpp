// timers_bench.cpp: the runtime's timer structure (src/runtime/timer_wheel.hpp)
// next to an indexed binary heap (the structure it replaced), one wheel or
// heap as one worker holds it, no locks. docs/timers.md quotes the medians.
//
//   insert_cancel  a node is added and removed before it is due: a wait that
//                  ends before its timeout (the common case);
//   insert_expire  a node is added and later handed out as due: the clock
//                  moves one tick per operation, nodes are due 1..64 ms ahead;
// each with 1,000 and 1,000,000 other nodes pending (spread over 1 ms to
// 10 s), so that the cost of the structure's size shows.
//
//   cmake --preset bench && cmake --build --preset bench --target weft_bench_timers
//   build/bench/bench/weft_bench_timers --benchmark_repetitions=10 --benchmark_report_aggregates_only=true

#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <cstdint>
#include <random>
#include <vector>

#include "timer_wheel.hpp"

namespace {

using weft::detail::timer_node;
using weft::detail::timer_wheel;
using tp = std::chrono::steady_clock::time_point;
using ns = std::chrono::nanoseconds;

const std::int64_t start = std::int64_t{1000} * 1000 * 1000 * 1000;
tp at(std::int64_t n) { return tp(ns(n)); }

// indexed_heap is a binary min-heap of node pointers by deadline; each node
// keeps its index (in `word`, unused here) so that a cancel is O(log n).
class indexed_heap {
public:
    void insert(timer_node* n) {
        v_.push_back(n);
        up(v_.size() - 1);
    }
    void erase(timer_node* n) {
        const std::size_t i = static_cast<std::size_t>(n->word);
        timer_node* last = v_.back();
        v_.pop_back();
        if (last != n) {
            v_[i] = last;
            last->word = i;
            up(i);
            down(static_cast<std::size_t>(last->word));
        }
    }
    std::size_t expire(tp now, timer_node** out, std::size_t max) {
        std::size_t k = 0;
        while (k < max && !v_.empty() && v_[0]->when <= now) {
            out[k++] = v_[0];
            erase(v_[0]);
        }
        return k;
    }

private:
    void up(std::size_t i) {
        timer_node* n = v_[i];
        while (i > 0) {
            const std::size_t p = (i - 1) / 2;
            if (v_[p]->when <= n->when) break;
            v_[i] = v_[p];
            v_[i]->word = i;
            i = p;
        }
        v_[i] = n;
        n->word = i;
    }
    void down(std::size_t i) {
        timer_node* n = v_[i];
        const std::size_t size = v_.size();
        for (;;) {
            std::size_t c = 2 * i + 1;
            if (c >= size) break;
            if (c + 1 < size && v_[c + 1]->when < v_[c]->when) ++c;
            if (n->when <= v_[c]->when) break;
            v_[i] = v_[c];
            v_[i]->word = i;
            i = c;
        }
        v_[i] = n;
        n->word = i;
    }
    std::vector<timer_node*> v_;
};

struct wheel_adapter {
    timer_wheel w{at(start)};
    void insert(timer_node* n) { w.insert(n); }
    void erase(timer_node* n) { w.erase(n); }
    std::size_t expire(tp now, timer_node** out, std::size_t max) { return w.expire(now, out, max); }
};

// background() fills s with `count` nodes due between 1 ms and 10 s from
// start, in random order (log-uniform: most timers are short).
template <class S>
std::vector<timer_node> background(S& s, std::size_t count) {
    std::vector<timer_node> nodes(count);
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> exp10(6.0, 10.0);
    for (auto& n : nodes) {
        n.when = at(start + static_cast<std::int64_t>(std::pow(10.0, exp10(rng))));
        s.insert(&n);
    }
    return nodes;
}

template <class S>
void insert_cancel(benchmark::State& state) {
    auto s = std::make_unique<S>();
    auto nodes = background(*s, static_cast<std::size_t>(state.range(0)));
    std::vector<timer_node> mine(64);
    std::int64_t k = 0;
    for (auto _ : state) {
        timer_node& n = mine[static_cast<std::size_t>(k & 63)];
        n.when = at(start + 1'000'000 + (k & 1023) * 997);  // a timeout 1-2 ms ahead
        s->insert(&n);
        s->erase(&n);
        benchmark::DoNotOptimize(n);
        ++k;
    }
}

template <class S>
void insert_expire(benchmark::State& state) {
    auto s = std::make_unique<S>();
    // The background lies far ahead of the clock: only our nodes come due.
    const std::size_t count = static_cast<std::size_t>(state.range(0));
    std::vector<timer_node> far(count);
    {
        std::mt19937_64 rng(42);
        for (auto& n : far) {
            n.when = at(start + std::int64_t{3600} * 1'000'000'000 + static_cast<std::int64_t>(rng() % 1'000'000'000'000));
            s->insert(&n);
        }
    }
    std::vector<timer_node> mine(1 << 16);
    std::int64_t now = start;
    std::size_t k = 0;
    timer_node* out[64];
    std::size_t fired = 0;
    for (auto _ : state) {
        timer_node& n = mine[k++ & (mine.size() - 1)];
        // Due at most 64 ms (3,906 ticks) ahead: it fired long before the
        // ring of 65,536 nodes comes round to it again.
        n.when = at(now + 1'000'000 + static_cast<std::int64_t>((k * 7919) % 64) * 1'000'000);
        s->insert(&n);
        now += timer_wheel::tick_ns;  // one tick per operation
        fired += s->expire(at(now), out, 64);
    }
    state.counters["fired_per_op"] = benchmark::Counter(static_cast<double>(fired), benchmark::Counter::kAvgIterations);
}

}  // namespace

BENCHMARK(insert_cancel<wheel_adapter>)->Name("insert_cancel/wheel")->Arg(1000)->Arg(1'000'000);
BENCHMARK(insert_cancel<indexed_heap>)->Name("insert_cancel/heap")->Arg(1000)->Arg(1'000'000);
BENCHMARK(insert_expire<wheel_adapter>)->Name("insert_expire/wheel")->Arg(1000)->Arg(1'000'000);
BENCHMARK(insert_expire<indexed_heap>)->Name("insert_expire/heap")->Arg(1000)->Arg(1'000'000);

BENCHMARK_MAIN();
