// live_trace_test.cpp: seeing inside a runtime that keeps running
// (docs/debugging.md, "Live tracing and metrics"): runtime::write_trace()
// on a running runtime, the trace rings keeping the last events
// (OBSERVE-O4), the trace signal (OBSERVE-O5), and runtime::metrics_text()
// with its scheduling-delay histogram. Over workers {0, 1, 2, 4}.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest-spi.h>

#include "observe.hpp"
#include "runtime_fixture.hpp"
#include "trace_files.hpp"
#include "weft/sync.hpp"

namespace weft::test {
namespace {

using namespace std::chrono_literals;

class live_trace_test : public runtime_fixture {};


// The structure every trace file has (the stop-time one's, tests in
// observe_test.cpp): the header, the workers' metadata, the trailer.
void expect_trace_shape(const std::string& j, unsigned nworkers) {
    EXPECT_EQ(j.rfind("{\"traceEvents\":[", 0), 0u) << j.substr(0, 200);
    EXPECT_NE(j.find("\"name\":\"worker 0\""), std::string::npos);
    EXPECT_NE(j.find("\"name\":\"other threads\""), std::string::npos);
    EXPECT_NE(j.find("\"otherData\":{\"workers\":" + std::to_string(nworkers) + ",\"dropped\":"), std::string::npos);
    EXPECT_EQ(j.substr(j.size() - 3), "}}\n");
}

// open_spans_of() counts the run spans of tasks named `name` that were
// still open (running) when the trace was taken.
std::size_t open_spans_of(const std::string& j, const std::string& name) {
    std::size_t n = 0;
    for (std::size_t p = j.find(",\"open\":true}"); p != std::string::npos; p = j.find(",\"open\":true}", p + 1)) {
        const std::size_t line = j.rfind('\n', p);
        if (j.substr(line, p - line).find("\"cat\":\"task\",\"name\":\"" + name + "\"") != std::string::npos) ++n;
    }
    return n;
}

// loopers are `n` named tasks that yield and nap until `stop`, counting
// their rounds: tasks that are still running when a trace is taken.
struct loopers {
    std::atomic<bool> stop{false};
    std::vector<std::atomic<int>> rounds;
    std::vector<weft::join_handle<void>> hs;
    explicit loopers(int n) : rounds(n) {}
    void spawn_all() {
        for (std::size_t i = 0; i < rounds.size(); ++i)
            hs.push_back(weft::spawn(
                [this, i] {
                    while (!stop.load()) {
                        rounds[i].fetch_add(1);
                        weft::this_task::yield();
                        weft::this_task::sleep_for(200us);
                    }
                },
                {.name = "looper " + std::to_string(i)}));
    }
    // wait_rounds() waits (in a task) until every looper ran `r` rounds.
    void wait_rounds(int r) {
        for (auto& x : rounds)
            while (x.load() < r) weft::this_task::sleep_for(100us);
    }
    void finish() {
        stop.store(true);
        weft::when_all(hs);
    }
};

// ---- a trace taken from a running runtime -------------------------------------------

TEST_P(live_trace_test, a_trace_taken_from_a_running_runtime_shows_its_running_tasks) {
    const std::string inside = temp_path("weft-live-in-" + std::to_string(workers()));
    const std::string outside = temp_path("weft-live-out-" + std::to_string(workers()));
    std::remove(inside.c_str());
    std::remove(outside.c_str());
    weft::runtime_options o = options();
    o.trace_live = true;
    weft::runtime rt(o);
    std::atomic<bool> hog_go{true}, hog_running{false};
    std::atomic<std::size_t> live_at_write{0};
    std::atomic<bool> wrote_outside{false};
    rt.block_on(
        [&] {
            loopers l(3);
            l.spawn_all();
            l.wait_rounds(3);
            // From inside a task: this one (the root) runs as it writes.
            live_at_write = rt.live_tasks();
            EXPECT_TRUE(rt.write_trace(inside));
            if (workers() >= 2) {
                // A task that keeps its worker busy, and a trace taken from
                // another thread meanwhile: its open span is there.
                auto hog = weft::spawn(
                    [&] {
                        hog_running = true;
                        while (hog_go.load()) {
                        }
                    },
                    {.name = "hog"});
                while (!hog_running.load()) weft::this_task::sleep_for(100us);
                std::thread t([&] { wrote_outside = rt.write_trace(outside); });
                t.join();  // blocks this worker; the hog holds the other one
                hog_go = false;
                hog.join();
            }
            l.finish();
        },
        {.name = "root"});
    EXPECT_GE(live_at_write.load(), 4u);  // the root and the three loopers were live

    const std::string j = slurp(inside);
    std::remove(inside.c_str());
    ASSERT_FALSE(j.empty()) << inside;
    expect_trace_shape(j, std::max(1u, workers()));
    for (int i = 0; i < 3; ++i) {
        const std::string name = "\"looper " + std::to_string(i) + "\"";
        // Each looper was spawned and ran at least three times: spans of
        // tasks that had not ended when the trace was taken.
        EXPECT_EQ(count_of(j, "\"task\":" + name + "}}"), 1u) << name;  // its spawn
        EXPECT_GE(count_of(j, "\"cat\":\"task\",\"name\":" + name), 3u) << name;
    }
    // The root was running as it wrote: its span is open, up to the write.
    EXPECT_EQ(open_spans_of(j, "root"), 1u);
    // Nothing was written as a temporary beside it.
    EXPECT_FALSE(std::filesystem::exists(inside + ".tmp"));

    if (workers() >= 2) {
        EXPECT_TRUE(wrote_outside.load());
        const std::string k = slurp(outside);
        std::remove(outside.c_str());
        expect_trace_shape(k, workers());
        EXPECT_EQ(open_spans_of(k, "hog"), 1u) << "the hog's span is open in a trace taken while it runs";
        EXPECT_EQ(open_spans_of(k, "root"), 1u) << "the root blocks its worker in std::thread::join(): running";
    }
    // The runtime goes on after being traced.
    EXPECT_EQ(rt.block_on([] { return 7; }), 7);
}

TEST_P(live_trace_test, traces_taken_while_every_worker_writes_are_whole) {
    // Small rings that wrap many times while another thread reads them over
    // and over (OBSERVE-O4: a slot rewritten as it is read is left out, and
    // counted; under TSan, no race).
    weft::runtime_options o = options();
    o.trace_live = true;
    o.trace_events = 32;
    weft::runtime rt(o);
    std::atomic<bool> stop{false};
    std::atomic<int> started{0};
    const unsigned nworkers = std::max(1u, workers());
    std::vector<weft::join_handle<void>> hs;
    for (unsigned i = 0; i < 2 * nworkers; ++i)
        hs.push_back(rt.spawn(
            [&] {
                started.fetch_add(1);
                while (!stop.load()) weft::this_task::yield();
            },
            {.name = "churner"}));
    std::string last;
    const std::string path = temp_path("weft-live-churn-" + std::to_string(workers()));
    // valgrind runs one thread at a time, and a spinning churner holds it
    // for whole time slices: a few reads there (each took seconds).
    const int reads = WEFT_VALGRIND ? 2 : 20;
    if (workers() == 0) {
        // The caller drives: the rings are written by this thread's tasks,
        // and read by another thread while this one runs them.
        std::thread reader([&] {
            while (started.load() < 2) std::this_thread::yield();
            for (int i = 0; i < reads; ++i) EXPECT_TRUE(rt.write_trace(path));
            stop = true;
        });
        while (!stop.load()) rt.run_once();
        reader.join();
        while (rt.live_tasks() > 0) rt.run_once();  // the churners see `stop` and end
    } else {
        while (started.load() < static_cast<int>(2 * nworkers)) std::this_thread::yield();
        for (int i = 0; i < reads; ++i) EXPECT_TRUE(rt.write_trace(path));
        stop = true;
    }
    for (auto& h : hs) h.join();
    last = slurp(path);
    std::remove(path.c_str());
    expect_trace_shape(last, nworkers);
    EXPECT_GE(count_of(last, "\"cat\":\"task\",\"name\":\"churner\""), 1u);
    for (unsigned w = 0; w <= nworkers; ++w)
        EXPECT_LE(count_of(last, "{\"pid\":1,\"tid\":" + std::to_string(w) + ",\"ts\":"), 33u) << "worker " << w;
}

TEST_P(live_trace_test, write_trace_without_a_trace_is_refused) {
    weft::runtime rt(options());
    testing::internal::CaptureStderr();
    EXPECT_FALSE(rt.write_trace(temp_path("weft-live-none")));
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("records no trace"), std::string::npos) << err;
}

// ---- the ring keeps the last events ---------------------------------------------------

TEST_P(live_trace_test, the_ring_keeps_only_the_last_n_events) {
    constexpr std::size_t n = 64;
    const std::string live = temp_path("weft-ring-live-" + std::to_string(workers()));
    const std::string at_stop = temp_path("weft-ring-stop-" + std::to_string(workers()));
    std::remove(at_stop.c_str());
    const unsigned nworkers = std::max(1u, workers());
    {
        weft::runtime_options o = options();
        o.trace_path = at_stop;
        o.trace_events = n;
        weft::runtime rt(o);
        rt.block_on(
            [] {
                weft::spawn([] {}, {.name = "first", .pinned = true}).join();
                for (int i = 0; i < 2000; ++i) weft::this_task::yield();
                weft::spawn([] {}, {.name = "last", .pinned = true}).join();
            },
            {.name = "root", .pinned = true});
        ASSERT_TRUE(rt.write_trace(live));
    }
    for (const std::string& path : {live, at_stop}) {
        const std::string j = slurp(path);
        std::remove(path.c_str());
        ASSERT_FALSE(j.empty()) << path;
        expect_trace_shape(j, nworkers);
        // At most n events per worker (and the shared buffer), plus one open
        // span each.
        for (unsigned w = 0; w <= nworkers; ++w)
            EXPECT_LE(count_of(j, "{\"pid\":1,\"tid\":" + std::to_string(w) + ",\"ts\":"), n + 1) << "worker " << w;
        // The last events are there, the first are not: the pinned root's
        // worker recorded 2000 yields (each a span) after "first".
        EXPECT_EQ(count_of(j, "\"task\":\"last\"}}"), 1u) << path;  // its spawn
        EXPECT_GE(count_of(j, "\"cat\":\"task\",\"name\":\"last\""), 1u) << path;  // its run
        EXPECT_EQ(count_of(j, "\"task\":\"first\"}}"), 0u) << path;
        EXPECT_EQ(count_of(j, "\"cat\":\"task\",\"name\":\"first\""), 0u) << path;
        EXPECT_EQ(j.find("\"dropped\":0}"), std::string::npos) << path;
    }
}

// ---- the trace signal ------------------------------------------------------------------

std::size_t open_fds() {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
}

TEST_P(live_trace_test, the_trace_signal_writes_a_trace_of_the_running_process) {
    const std::string path = temp_path("weft-signal-" + std::to_string(workers()));
    std::remove(path.c_str());
    const std::size_t fds_before = open_fds();
    {
        weft::runtime_options o = options();
        o.trace_signal = SIGUSR2;
        o.trace_signal_path = path;
        weft::runtime rt(o);
        bool appeared = false;
        rt.block_on(
            [&] {
                loopers l(2);
                l.spawn_all();
                l.wait_rounds(2);
                // raise(): delivered to this thread (under TSan, too: its
                // handler runs when this thread next enters an intercepted call).
                ::raise(SIGUSR2);
                // The runtime keeps running while the file is written.
                const auto limit = std::chrono::steady_clock::now() + 20s;
                while (!(appeared = std::filesystem::exists(path)) && std::chrono::steady_clock::now() < limit)
                    weft::this_task::sleep_for(1ms);
                l.finish();
            },
            {.name = "root"});
        ASSERT_TRUE(appeared) << path;
        const std::string j = slurp(path);  // renamed into place: whole
        std::remove(path.c_str());
        expect_trace_shape(j, std::max(1u, workers()));
        EXPECT_GE(count_of(j, "\"cat\":\"task\",\"name\":\"looper 0\""), 2u);
        EXPECT_GE(count_of(j, "\"cat\":\"task\",\"name\":\"looper 1\""), 2u);
        // Stopped, the runtime writes no more: the signal does nothing (the
        // handler stays installed, process-wide).
        rt.stop();
        ::raise(SIGUSR2);
        std::this_thread::sleep_for(50ms);
        EXPECT_FALSE(std::filesystem::exists(path));
    }
    // The last runtime with a trace signal closed the pipe (and joined the
    // thread): nothing of it is left open.
    EXPECT_EQ(open_fds(), fds_before);
}

TEST_P(live_trace_test, a_bad_trace_signal_is_a_bad_option) {
    for (int sig : {-1, SIGKILL, SIGSTOP, NSIG}) {
        weft::runtime_options o = options();
        o.trace_signal = sig;
        EXPECT_EQ(errc_of([&] { weft::runtime rt(o); }), weft::task_errc::bad_option) << sig;
    }
    // One signal cannot both sample a stalled worker and ask for a trace.
    weft::runtime_options o = options();
    o.watchdog.enabled = true;
    o.trace_signal = o.watchdog.sample_signal;
    EXPECT_EQ(errc_of([&] { weft::runtime rt(o); }), weft::task_errc::bad_option);
}

// ---- metrics ---------------------------------------------------------------------------

// check_exposition() checks text as the Prometheus text format (0.0.4)
// and returns its samples, name{labels} -> value; failures are
// reported through gtest.
std::map<std::string, double> check_exposition(const std::string& text) {
    std::map<std::string, double> samples;
    std::map<std::string, std::string> type;  // family -> type
    std::set<std::string> help;
    static const std::regex sample_re(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*")*)?\})? ([-+0-9.eE]+|\+Inf|-Inf|NaN)$)");
    static const std::regex help_re(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) \S.*$)");
    static const std::regex type_re(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$)");
    EXPECT_FALSE(text.empty());
    EXPECT_EQ(text.back(), '\n');
    std::istringstream in(text);
    std::string line;
    // Histogram series: family + labels without le -> (le, cumulative) in order.
    std::map<std::string, std::vector<std::pair<std::string, double>>> buckets;
    while (std::getline(in, line)) {
        std::smatch m;
        if (line.rfind("# HELP ", 0) == 0) {
            EXPECT_TRUE(std::regex_match(line, m, help_re)) << line;
            EXPECT_TRUE(help.insert(m[1]).second) << "two HELP lines: " << line;
            continue;
        }
        if (line.rfind("# TYPE ", 0) == 0) {
            EXPECT_TRUE(std::regex_match(line, m, type_re)) << line;
            EXPECT_TRUE(type.emplace(m[1], m[2]).second) << "two TYPE lines: " << line;
            EXPECT_TRUE(help.count(m[1])) << "TYPE before HELP: " << line;
            continue;
        }
        EXPECT_NE(line.rfind('#', 0), 0u) << "unknown comment: " << line;
        if (!std::regex_match(line, m, sample_re)) {
            ADD_FAILURE() << "not `name{labels} value`: " << line;
            continue;
        }
        const std::string name = m[1];
        const std::string labels = m[3];
        const double v = m[5] == "+Inf" ? INFINITY : std::stod(m[5]);
        EXPECT_TRUE(samples.emplace(name + "{" + labels + "}", v).second) << "duplicate sample: " << line;
        std::string family = name;
        if (!type.count(family)) {
            for (const char* suffix : {"_bucket", "_sum", "_count"}) {
                const std::string s = suffix;
                if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0 &&
                    type.count(name.substr(0, name.size() - s.size())))
                    family = name.substr(0, name.size() - s.size());
            }
        }
        if (!type.count(family)) {
            ADD_FAILURE() << "no TYPE for " << line;
            continue;
        }
        EXPECT_TRUE(help.count(family)) << "no HELP for " << line;
        const std::string& t = type[family];
        if (t == "counter") {
            EXPECT_TRUE(name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0) << line;
            EXPECT_GE(v, 0) << line;
        }
        if (t == "histogram" && name == family + "_bucket") {
            static const std::regex le_re(R"re((^|,)le="([^"]*)")re");
            std::smatch lm;
            if (!std::regex_search(labels, lm, le_re)) {
                ADD_FAILURE() << "a bucket without le: " << line;
                continue;
            }
            std::string rest = std::regex_replace(labels, le_re, "");
            if (!rest.empty() && rest[0] == ',') rest.erase(0, 1);
            buckets[family + "{" + rest + "}"].emplace_back(lm[2], v);
        }
    }
    for (const auto& [series, bs] : buckets) {
        EXPECT_EQ(bs.back().first, "+Inf") << series;
        double prev_le = -1, prev_v = 0;
        for (const auto& [le, v] : bs) {
            const double l = le == "+Inf" ? INFINITY : std::stod(le);
            EXPECT_GT(l, prev_le) << series << " le=" << le;
            EXPECT_GE(v, prev_v) << series << " le=" << le << ": buckets are cumulative";
            prev_le = l;
            prev_v = v;
        }
        const std::string fam = series.substr(0, series.find('{'));
        const std::string labels = series.substr(series.find('{'));
        if (!samples.count(fam + "_count" + labels)) {
            ADD_FAILURE() << "no _count for " << series;
            continue;
        }
        EXPECT_EQ(samples[fam + "_count" + labels], bs.back().second) << series;
        EXPECT_TRUE(samples.count(fam + "_sum" + labels)) << series;
    }
    return samples;
}

TEST(metrics_text_checker, refuses_what_is_not_the_format) {
    // The checker itself: non-cumulative buckets and a missing TYPE fail.
    testing::TestPartResultArray failures;
    {
        testing::ScopedFakeTestPartResultReporter r(testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD,
                                                    &failures);
        (void)check_exposition("# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 2\n"
                               "h_sum 1\nh_count 2\n");
        (void)check_exposition("x_total 1\n");
        (void)check_exposition("# HELP c x\n# TYPE c counter\nc 1\n");
    }
    EXPECT_GE(failures.size(), 3);
}

TEST_P(live_trace_test, metrics_text_is_the_prometheus_text_format) {
    weft::runtime rt(options());
    rt.block_on([] {
        for (int i = 0; i < 10; ++i) weft::spawn([] { weft::this_task::yield(); }).join();
    });
    const std::string text = rt.metrics_text();
    const auto samples = check_exposition(text);
    const unsigned nworkers = std::max(1u, workers());
    EXPECT_EQ(samples.at("weft_workers{}"), nworkers);
    for (unsigned w = 0; w < nworkers; ++w) {
        const std::string l = "{worker=\"" + std::to_string(w) + "\"}";
        EXPECT_TRUE(samples.count("weft_worker_switches_total" + l)) << l;
        EXPECT_TRUE(samples.count("weft_schedule_delay_seconds_count" + l)) << l;
        EXPECT_TRUE(samples.count("weft_schedule_delay_seconds_bucket{worker=\"" + std::to_string(w) + "\",le=\"+Inf\"}"));
    }
    // The same text as the free function over stats() gives (the counters
    // do not move once the runtime is idle, but its workers may still be
    // settling into sleep: compare what cannot move).
    EXPECT_NE(weft::metrics_text(rt.stats()).find("# TYPE weft_schedule_delay_seconds histogram\n"), std::string::npos);
    EXPECT_NE(text.find("weft_schedule_delay_seconds_bucket{worker=\"0\",le=\"0.001048576\"} "), std::string::npos);
}

TEST_P(live_trace_test, metrics_counts_move_after_spawning_n_tasks) {
    constexpr int n = 50;
    weft::runtime rt(options());
    const auto before = check_exposition(rt.metrics_text());
    rt.block_on([] {
        std::vector<weft::join_handle<void>> hs;
        for (int i = 0; i < n; ++i) hs.push_back(weft::spawn([] { weft::this_task::yield(); }));
        weft::when_all(hs);
    });
    const auto after = check_exposition(rt.metrics_text());
    auto sum = [](const std::map<std::string, double>& m, const std::string& name) {
        double s = 0;
        for (const auto& [k, v] : m)
            if (k.rfind(name + "{", 0) == 0) s += v;
        return s;
    };
    EXPECT_EQ(sum(after, "weft_worker_spawned_total") - sum(before, "weft_worker_spawned_total"), n);
    EXPECT_EQ(sum(after, "weft_spawned_outside_total") - sum(before, "weft_spawned_outside_total"), 1);  // the root
    EXPECT_EQ(sum(after, "weft_worker_finished_total") - sum(before, "weft_worker_finished_total"), n + 1);
    EXPECT_GE(sum(after, "weft_worker_switches_total") - sum(before, "weft_worker_switches_total"), 2 * n + 1);
    // Every start of a task is one scheduling delay.
    EXPECT_GE(sum(after, "weft_schedule_delay_seconds_count") - sum(before, "weft_schedule_delay_seconds_count"),
              2 * n + 1);
}

TEST_P(live_trace_test, scheduling_delays_are_recorded) {
    weft::runtime rt(options());
    rt.block_on([] {
        // A pinned child is ready on this worker while the root keeps it
        // busy for 30 ms: the child's start waits that long.
        auto child = weft::spawn([] {}, {.pinned = true});
        const auto end = std::chrono::steady_clock::now() + 30ms;
        while (std::chrono::steady_clock::now() < end) {
        }
        child.join();
    });
    // Every start was recorded once (the runtime is idle: the counters are
    // still); one of them waited about 30 ms (on the coarse clock).
    const weft::runtime_stats s = rt.stats();
    const weft::worker_stats t = s.total();
    std::uint64_t count = 0;
    for (auto b : t.sched_delay) count += b;
    EXPECT_EQ(count, t.switches);
    EXPECT_GE(t.sched_delay_sum_ns, 20'000'000u);
    std::uint64_t slow = 0;
    for (unsigned i = 0; i < runtime_delay_buckets; ++i)
        if (sched_delay_bound_ns(i) >= 16'000'000u) slow += t.sched_delay[i];
    EXPECT_GE(slow, 1u);
    // In the text: a cumulative bucket up to 8.4 ms has fewer than the count.
    const auto m = check_exposition(weft::metrics_text(s));
    double below = 0, all = 0;
    for (const weft::worker_stats& w : s.workers) {
        const std::string l = "{worker=\"" + std::to_string(w.worker) + "\"";
        below += m.at("weft_schedule_delay_seconds_bucket" + l + ",le=\"0.008388608\"}");
        all += m.at("weft_schedule_delay_seconds_count" + l + "}");
    }
    EXPECT_LT(below, all);
    EXPECT_EQ(all, static_cast<double>(count));
}

TEST(sched_delay_bounds, are_powers_of_two_of_about_a_millisecond) {
    EXPECT_EQ(sched_delay_bound_ns(0), 1u << 20);
    EXPECT_EQ(sched_delay_bound_ns(1), 1u << 21);
    EXPECT_EQ(sched_delay_bound_ns(runtime_delay_buckets - 1), UINT64_MAX);
    // The recording side agrees with the bounds (detail::delay_histogram).
    // Bucket 0 is what `switches` counts beyond the others.
    detail::delay_histogram h;
    detail::counter switches;
    h.record(1);
    h.record(1 << 20);
    h.record((1 << 20) + 1);
    h.record((1 << 21) + 1);
    h.record(std::int64_t{1} << 40);
    switches.bump(7);  // two starts within the clock's tick (delay 0)
    std::array<std::uint64_t, runtime_delay_buckets> out{};
    std::uint64_t sum = 0;
    h.read(out, sum, switches);
    EXPECT_EQ(out[0], 4u);
    EXPECT_EQ(out[1], 1u);
    EXPECT_EQ(out[2], 1u);
    EXPECT_EQ(out[runtime_delay_buckets - 1], 1u);
    EXPECT_EQ(sum, 1u + (1u << 20) + (1u << 20) + 1u + (1u << 21) + 1u + (std::uint64_t{1} << 40));
}

INSTANTIATE_TEST_SUITE_P(w, live_trace_test, worker_counts(), worker_param_name);

}  // namespace
}  // namespace weft::test
