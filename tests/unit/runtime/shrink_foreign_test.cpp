// shrink_foreign_test.cpp: other code reaching into a shrunk task's frames
// (docs/runtime.md, "Idle tasks give their stack back"). A task parks with
// a plain local (a std::string, a std::vector<int>, a long, a char buffer)
// whose address it has handed out, waiting on a primitive that is not in
// its frame (so nothing pins it); the runtime shrinks it (its live bytes to
// the heap, its stack pages released); then a helper (another task, a
// plain thread, a C++20 task) reads or writes the local through the
// pointer. The helper must see the real value, and what it writes must be
// there when the task runs again. A system call handed a pointer into the
// shrunk stack (read(2) into the buffer) may work or fail with EFAULT, but
// must never write where the restore then writes the old bytes back.
//
// Every test checks that the access really happened while the task was
// shrunk (so that it cannot pass vacuously): the runtime's shrinks counter
// had counted the task's shrink, the task had not run since, and the page
// holding the local was not resident (mincore) just before the access;
// where the runtime's stats count faults on shrunk stacks
// (runtime_stats::shrink_faults), that they counted the access.
//
// Over workers {0, 1, 2, 4}, with shrink_idle_after = 1 ms and
// runtime::shrink_idle() to make the shrinks happen now. Every loop is
// bounded by a count; the fixture's watchdog ends a hang.
//
// Under ASan with detect_stack_use_after_return (as CI runs it), an
// instrumented function's address-taken locals live on ASan's fake stack
// (on the heap), not on the task's stack: the tasks whose locals are
// reached into are therefore not instrumented by ASan
// (WEFT_TEST_OWNER_FRAME). Should a local still be off its task's stack,
// nothing reaches into a shrunk stack, and a test that passes says so by
// ending skipped.

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/stack_canary.hpp"
#include "runtime_fixture.hpp"
#include "weft/async.hpp"
#include "weft/sync.hpp"

namespace weft::test {
namespace {

using namespace std::chrono_literals;


// shrink_faults() is runtime_stats::shrink_faults (process-wide: the
// shrunk stacks other code touched) where the runtime counts them; empty
// where it does not.
template <class Stats>
std::optional<std::uint64_t> shrink_faults_of(const Stats& s) {
    if constexpr (requires { s.shrink_faults; })
        return static_cast<std::uint64_t>(s.shrink_faults);
    else
        return std::nullopt;
}
std::optional<std::uint64_t> shrink_faults(const weft::runtime& rt) { return shrink_faults_of(rt.stats()); }

// shrunk_to() asks the runtime to shrink its idle tasks until its stats
// count at least n shrinks; false after `rounds` rounds of `pause`.
bool shrunk_to(weft::runtime& rt, std::uint64_t n, int rounds = 10'000,
               std::chrono::microseconds pause = 1000us) {
    for (int i = 0; i < rounds; ++i) {
        rt.shrink_idle();
        if (shrinks(rt) >= n) return true;
        std::this_thread::sleep_for(pause);
    }
    return false;
}

// page_released() says whether the page holding p is not resident now: a
// shrunk task's stack pages are released (MADV_DONTNEED) until it is
// restored. mincore() does not touch the page (no fault, no restore).
// Under qemu-user the guest's madvise(MADV_DONTNEED) leaves the page in
// place (mincore shows it resident): there the check says yes, and the
// shrink counts, the fault counts and the values are what is checked.
bool page_released(const void* p) {
    if (under_user_mode_emulator()) return true;
    static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    void* at = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) & ~(page - 1));
    unsigned char resident = 0xff;
    if (::mincore(at, page, &resident) != 0) return false;
    return (resident & 1) == 0;
}

// WEFT_TEST_OWNER_FRAME goes on the lambda of a task whose locals others reach into:
// no ASan instrumentation, so that its locals are on its own stack, not on
// ASan's fake stack.
#define WEFT_TEST_OWNER_FRAME __attribute__((no_sanitize_address))

// on_this_stack() says whether p is on the calling task's stack (within 64
// KiB of this frame): not so for a local that ASan moved to its fake stack.
[[gnu::noinline]] bool on_this_stack(const void* p) {
    const auto d = reinterpret_cast<std::intptr_t>(p) - reinterpret_cast<std::intptr_t>(__builtin_frame_address(0));
    return d > -65536 && d < 65536;
}

// canary fills more than a page of the task's frames with a pattern that
// depends on its own address: a stack that a fault on one of its pages
// brings back only in part, or at other addresses, is seen.
using canary = stack_canary<700>;

// scope_exit runs its function when it goes: it lets parked tasks go when
// an ASSERT leaves a test early, before what they wait on is destroyed.
template <class F>
struct scope_exit {
    F f;
    ~scope_exit() { f(); }
};
template <class F>
scope_exit(F) -> scope_exit<F>;

// The helpers that reach into a parked task's frame.
enum class helper_kind { task, thread, cxx20_task };

const char* name_of(helper_kind k) {
    switch (k) {
    case helper_kind::task: return "a stackful task";
    case helper_kind::thread: return "a std::thread";
    case helper_kind::cxx20_task: return "a C++20 task";
    }
    return "?";
}

// cxx20_body runs *body in a C++20 task of the runtime, after a suspension
// (co::yield), so that the access is made by a coroutine resumed by the
// scheduler, on a worker's stack (a C++20 task has no stack of its own).
template <class F>
weft::async<void> cxx20_body(F* body) {
    co_await weft::co::yield();
    (*body)();
}

// run_helper() runs body once in a helper of kind k and waits for it.
template <class F>
void run_helper(weft::runtime& rt, helper_kind k, F& body) {
    switch (k) {
    case helper_kind::task: rt.spawn([&body] { body(); }).join(); return;
    case helper_kind::thread: {
        std::thread t([&body] { body(); });
        t.join();
        return;
    }
    case helper_kind::cxx20_task: rt.spawn(cxx20_body(&body)).join(); return;
    }
}

class shrink_foreign_test : public runtime_fixture {
protected:
    struct rt_with_driver {
        weft::runtime rt;
        driver d;
        explicit rt_with_driver(unsigned w) : rt(shrinking(w)), d(rt) {}
    };

    // reach_into_shrunk() runs a task that makes a local `T local = make()`
    // (its canary beside it), hands out its address and waits on an event
    // on the heap; once the task is shrunk, a helper of kind `kind` runs
    // access(*p) through that address and then sets the event; the task,
    // resumed, runs check(local). Both must return true. `what` names the
    // case in failures. by_syscall: access() hands the pointer to a system
    // call, which meets a shrunk stack without a fault.
    template <class T, class Make, class Access, class Check>
    void reach_into_shrunk(weft::runtime& rt, helper_kind kind, const std::string& what, Make make, Access access,
                           Check check, bool by_syscall = false) {
        SCOPED_TRACE(what + ", reached by " + name_of(kind));
        auto go = std::make_unique<weft::event>();
        std::atomic<T*> where{nullptr};
        std::atomic<bool> on_stack{false}, resumed{false};
        std::atomic<int> result{0};
        const std::uint64_t before = shrinks(rt);
        auto owner = rt.spawn([&]() WEFT_TEST_OWNER_FRAME {
            canary c;
            T local = make();
            on_stack.store(on_this_stack(&local));
            where.store(&local, std::memory_order_release);
            go->wait();  // not in this frame: nothing pins the task
            resumed.store(true);
            const bool ok = check(local);
            result.store(ok && c.intact() ? 1 : 2);
        });
        bool joined = false;
        scope_exit let_go{[&] {
            if (joined) return;
            go->set();
            try {
                owner.join();
            } catch (...) {
            }
        }};
        ASSERT_TRUE(eventually([&] { return where.load(std::memory_order_acquire) != nullptr; }));
        T* const p = where.load(std::memory_order_acquire);
        ASSERT_TRUE(shrunk_to(rt, before + 1)) << "the parked task was not shrunk";
        const std::optional<std::uint64_t> faults_before = shrink_faults(rt);

        // What the helper saw just before its access: the task parked (it
        // has not run since it was shrunk), its shrink counted, the page
        // that holds the local released.
        bool ran = false, parked = false, shrunk = false, released = false, access_ok = false;
        auto body = [&] {
            parked = !resumed.load();
            shrunk = shrinks(rt) >= before + 1;
            released = page_released(p);
            access_ok = access(*p);
            parked = parked && !resumed.load();
            ran = true;
            go->set();
        };
        run_helper(rt, kind, body);
        owner.join();
        joined = true;
        const std::optional<std::uint64_t> faults_after = shrink_faults(rt);

        ASSERT_TRUE(ran) << "the helper did not run";
        EXPECT_TRUE(parked && shrunk) << "the task was not shrunk and parked while the helper reached in: "
                                      << "the test proved nothing (parked " << parked << ", shrunk " << shrunk << ")";
        if (on_stack.load()) {
            EXPECT_TRUE(released) << "the page of the local was resident when the helper reached in: "
                                     "the task's stack was not released";
            if (faults_before && faults_after && !by_syscall) {
                EXPECT_GT(*faults_after, *faults_before)
                    << "runtime_stats::shrink_faults did not count the access to the shrunk stack";
            }
        } else {
            off_stack_ = true;
        }
        EXPECT_TRUE(access_ok) << "the helper did not see the parked task's " << what
                               << " as the task left it (a released page reads as zeros)";
        EXPECT_EQ(result.load(), 1) << "the task, resumed, did not find its " << what
                                    << " as the helper left it (or its frames were not restored whole): "
                                       "the helper's write went to a page the restore overwrote";
    }

    // string_case: the helper reads a 100-char std::string.
    void string_case(weft::runtime& rt, helper_kind kind) {
        const auto expected = [] {
            std::string s(100, ' ');
            for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>('a' + i % 26);
            return s;
        };
        reach_into_shrunk<std::string>(
            rt, kind, "std::string of 100 chars", expected,
            [&](std::string& s) { return s.size() == 100 && s == expected(); },
            [&](std::string& s) { return s == expected(); });
    }

    // vector_case: the helper push_back()s into a std::vector<int> that
    // holds `initial` (empty: its words are all zero).
    void vector_case(weft::runtime& rt, helper_kind kind, std::vector<int> initial) {
        std::vector<int> after = initial;
        after.push_back(42);
        reach_into_shrunk<std::vector<int>>(
            rt, kind, "std::vector<int> of " + std::to_string(initial.size()) + " elements",
            [&] { return initial; },
            [&](std::vector<int>& v) {
                const bool same = v == initial;
                v.push_back(42);
                return same;
            },
            [&](std::vector<int>& v) { return v == after; });
    }

    // long_case: the helper checks that a plain long holds `from` and
    // writes `to` there.
    void long_case(weft::runtime& rt, helper_kind kind, long from, long to) {
        reach_into_shrunk<long>(
            rt, kind, "long (" + std::to_string(from) + " -> " + std::to_string(to) + ")", [from] { return from; },
            [from, to](long& x) {
                const bool same = x == from;
                x = to;
                return same;
            },
            [to](long& x) { return x == to; });
    }

    // every_case: the three kinds of local, reached by `kind`.
    void every_case(weft::runtime& rt, helper_kind kind) {
        string_case(rt, kind);
        vector_case(rt, kind, {1, 2, 3});
        long_case(rt, kind, 0x1234'5678'9abcL, 0x7edc'ba98'7654L);
    }

    // A test that found a local off its task's stack (on ASan's fake stack)
    // ends skipped: that access reached no shrunk stack.
    void skip_if_off_stack() {
        if (off_stack_) GTEST_SKIP() << "locals off their task's stack (ASan's fake stack?): "
                                        "no access reached a shrunk stack";
    }

    bool off_stack_ = false;
};

// A helper task reads a std::string local of a shrunk task.
TEST_P(shrink_foreign_test, a_task_reads_a_string_local_of_a_shrunk_task) {
    rt_with_driver r(workers());
    string_case(r.rt, helper_kind::task);
    skip_if_off_stack();
}

// A helper task push_back()s into a std::vector<int> local of a shrunk
// task: one that holds elements (its words are not zero), one that is
// empty (all its words zero: a restore that writes only the non-zero words
// must still not lose the helper's write).
TEST_P(shrink_foreign_test, a_task_pushes_back_into_a_vector_local_of_a_shrunk_task) {
    rt_with_driver r(workers());
    vector_case(r.rt, helper_kind::task, {1, 2, 3});
    vector_case(r.rt, helper_kind::task, {});
    skip_if_off_stack();
}

// A helper task writes a plain long local of a shrunk task: a non-zero
// value over another, a small one over another, and one over a zero.
TEST_P(shrink_foreign_test, a_task_writes_a_long_local_of_a_shrunk_task) {
    rt_with_driver r(workers());
    long_case(r.rt, helper_kind::task, 0x1234'5678'9abcL, 0x7edc'ba98'7654L);
    long_case(r.rt, helper_kind::task, 5, 6);
    long_case(r.rt, helper_kind::task, 0, 0x5151'5151L);
    skip_if_off_stack();
}

// The same accesses from a plain std::thread.
TEST_P(shrink_foreign_test, a_thread_reads_and_writes_locals_of_a_shrunk_task) {
    rt_with_driver r(workers());
    every_case(r.rt, helper_kind::thread);
    skip_if_off_stack();
}

// The same accesses from a C++20 task (weft::async, no stack of its own).
TEST_P(shrink_foreign_test, a_cxx20_task_reads_and_writes_locals_of_a_shrunk_task) {
    rt_with_driver r(workers());
    every_case(r.rt, helper_kind::cxx20_task);
    skip_if_off_stack();
}

// A thread read()s from a pipe into a char buffer local of a shrunk
// task (a system call, not a user-mode access: no fault). Either the read
// works and the task finds the bytes in its buffer, or it fails with
// EFAULT and the buffer is as the task left it. Never: a read that worked
// and a buffer that shows the old pattern (or zeros) after the restore.
TEST_P(shrink_foreign_test, a_read_into_a_buffer_of_a_shrunk_task_lands_or_fails_with_efault) {
    rt_with_driver r(workers());
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
    scope_exit close_pipe{[&] {
        ::close(fds[0]);
        ::close(fds[1]);
    }};
    constexpr std::size_t size = 256, at = 64, len = 64;
    using buffer = std::array<unsigned char, size>;
    const auto pattern = [](std::size_t i) { return static_cast<unsigned char>(0xa0 ^ (i % 64)); };  // never 0
    const auto data = [](std::size_t i) { return static_cast<unsigned char>('A' + i % 26); };
    ssize_t got = -2;
    int err = 0;
    std::string seen;  // the task's account of its buffer, after it resumed
    reach_into_shrunk<buffer>(
        r.rt, helper_kind::thread, "char buffer read() into",
        [&] {
            buffer b;
            for (std::size_t i = 0; i < size; ++i) b[i] = pattern(i);
            return b;
        },
        [&](buffer& b) {
            unsigned char out[len];
            for (std::size_t i = 0; i < len; ++i) out[i] = data(i);
            if (::write(fds[1], out, len) != static_cast<ssize_t>(len)) return false;
            errno = 0;
            got = ::read(fds[0], b.data() + at, len);
            err = errno;
            return (got >= 0 && got <= static_cast<ssize_t>(len)) || (got == -1 && err == EFAULT);
        },
        [&](buffer& b) {
            // got bytes of data at `at` (none after EFAULT), the pattern
            // everywhere else.
            const std::size_t landed = got > 0 ? static_cast<std::size_t>(got) : 0;
            std::size_t as_data = 0, as_pattern = 0, zeros = 0, wrong = 0;
            for (std::size_t i = 0; i < size; ++i) {
                const bool read_here = i >= at && i < at + landed;
                const unsigned char want = read_here ? data(i - at) : pattern(i);
                if (b[i] != want) ++wrong;
                if (i >= at && i < at + len) {
                    as_data += b[i] == data(i - at);
                    as_pattern += b[i] == pattern(i);
                    zeros += b[i] == 0;
                }
            }
            seen = "read() returned " + std::to_string(got) +
                   (got < 0 ? std::string(" errno ") + std::strerror(err) : std::string()) + "; of the " +
                   std::to_string(len) + " bytes read into: " + std::to_string(as_data) +
                   " hold the data, " + std::to_string(as_pattern) + " the old pattern, " + std::to_string(zeros) +
                   " zero; " + std::to_string(wrong) + " bytes of the buffer are not what they should be";
            return wrong == 0;
        },
        true);
    EXPECT_TRUE(got >= 0 || err == EFAULT) << "read() failed with " << std::strerror(err) << ", not EFAULT";
    if (got >= 0) {
        EXPECT_EQ(got, static_cast<ssize_t>(len)) << "a short read from a pipe holding the bytes";
    }
    if (HasFailure()) ADD_FAILURE() << "what the task found: " << seen;
    RecordProperty("read_outcome", seen);
    skip_if_off_stack();
}

// More shrunk tasks than the old shrink guard could protect (its budget was
// 4,096): each shrunk stack is a protected range of its own. Every task is
// shrunk, then a thread increments a local of each through a pointer, and
// each task, resumed, finds its increment.
TEST_P(shrink_foreign_test, thousands_of_shrunk_tasks_each_find_the_increment_a_thread_made) {
    // More than the old shrink guard's 4,096. Under qemu-user each fault is
    // a guest signal that costs about 30 ms: 5,000 took 130-160 s per
    // instance there, so the emulated run reaches into 300 (the fault path
    // is the same for each).
    const long n = under_user_mode_emulator() ? 300 : 5000;
    auto ev = std::make_unique<weft::event>();
    std::vector<std::atomic<long*>> where(static_cast<std::size_t>(n));
    std::atomic<long> on_stack{0}, resumed{0}, found{0};
    rt_with_driver r(workers());
    const std::uint64_t before = shrinks(r.rt);
    std::vector<weft::join_handle<void>> hs;
    hs.reserve(static_cast<std::size_t>(n));
    scope_exit let_go{[&] {
        ev->set();
        for (auto& h : hs) try {
                h.join();
            } catch (...) {
            }
    }};
    for (long i = 0; i < n; ++i)
        hs.push_back(r.rt.spawn([&, i]() WEFT_TEST_OWNER_FRAME {
            long local = 1000 + i;
            on_stack.fetch_add(on_this_stack(&local) ? 1 : 0);
            where[static_cast<std::size_t>(i)].store(&local, std::memory_order_release);
            ev->wait();
            resumed.fetch_add(1);
            if (local == 1001 + i) found.fetch_add(1);
        }));
    ASSERT_TRUE(eventually([&] {
        for (auto& w : where)
            if (!w.load(std::memory_order_acquire)) return false;
        return true;
    }));
    ASSERT_TRUE(shrunk_to(r.rt, before + static_cast<std::uint64_t>(n)))
        << "only " << shrinks(r.rt) - before << " of " << n << " parked tasks were shrunk";
    const std::optional<std::uint64_t> faults_before = shrink_faults(r.rt);
    long released = 0, saw = 0, early = 0;
    std::thread helper([&] {
        for (long i = 0; i < n; ++i) {
            long* p = where[static_cast<std::size_t>(i)].load(std::memory_order_acquire);
            released += page_released(p) ? 1 : 0;
            saw += *p == 1000 + i ? 1 : 0;
            ++*p;
        }
        early = resumed.load();
    });
    helper.join();
    ev->set();
    for (auto& h : hs) h.join();
    hs.clear();
    const std::optional<std::uint64_t> faults_after = shrink_faults(r.rt);
    EXPECT_EQ(early, 0) << "tasks ran before the helper was done: not all accesses were to shrunk tasks";
    EXPECT_EQ(saw, n) << "the helper did not see the parked tasks' values (a released page reads as zeros)";
    EXPECT_EQ(found.load(), n) << "tasks did not find the helper's increment after they resumed";
    EXPECT_EQ(released, on_stack.load()) << "pages of locals on their task's stack were resident at the access";
    if (on_stack.load() != 0 && faults_before && faults_after) {
        EXPECT_GE(*faults_after - *faults_before, static_cast<std::uint64_t>(on_stack.load()))
            << "runtime_stats::shrink_faults did not count every shrunk stack touched";
    }
    if (on_stack.load() == 0) off_stack_ = true;
    skip_if_off_stack();
}

// Threads write a task's local counter through a pointer while the
// runtime shrinks the task and wakes it, round after round. Each round the
// task is shrunk in its wait, then the writers are granted a burst of
// writes: in even rounds the wake waits until they are made (the first
// meets the shrunk stack), in odd rounds it races them; and one more thread
// asks for shrinks all along, so that shrinks race the writes and the
// wakes too. The counter never goes back, and ends equal to the number of
// writes made.
TEST_P(shrink_foreign_test, writes_racing_shrinks_and_wakes_all_land) {
    const int rounds = static_cast<int>(env_count("WEFT_SHRINK_FOREIGN_ROUNDS", under_user_mode_emulator() ? 60 : 200, 60));
    constexpr int writers = 2;
    constexpr long burst = 16;                // writes granted per round
    constexpr long max_polls = 10'000'000;    // per thread: a bound, not a goal (they stop with the rounds)
    const long granted_in_all = rounds * burst;
    auto sem = std::make_unique<weft::counting_semaphore>(0);
    auto done = std::make_unique<weft::event>();
    std::atomic<std::atomic<long>*> where{nullptr};
    std::atomic<bool> on_stack{false}, stop{false};
    std::atomic<long> budget{0}, made{0}, final_value{-1}, released_seen{0};
    std::atomic<int> result{0}, backwards{0}, round{-1};
    // The shrinks counted when the task began its latest wait: it is the
    // only stackful task of the runtime, so a count above that is a shrink
    // of that wait (a shrink of an earlier wait was counted before the task
    // woke from it).
    std::atomic<std::uint64_t> shrinks_at_wait{0};
    rt_with_driver r(workers());
    auto owner = r.rt.spawn([&]() WEFT_TEST_OWNER_FRAME {
        canary c;
        std::atomic<long> counter{0};  // a plain local to weft (not a primitive: no pin)
        on_stack.store(on_this_stack(&counter));
        where.store(&counter, std::memory_order_release);
        long last = 0;
        int broken = 0;
        for (int k = 0; k < rounds; ++k) {
            shrinks_at_wait.store(shrinks(r.rt));
            round.store(k);
            sem->acquire();
            const long v = counter.load();
            if (v < last) backwards.fetch_add(1);
            last = v;
            if (!c.intact()) ++broken;
        }
        done->wait();
        final_value.store(counter.load());
        result.store(broken == 0 ? 1 : 2);
    });
    std::vector<std::thread> ts;
    bool joined = false;
    scope_exit let_go{[&] {
        stop.store(true);
        for (auto& t : ts) t.join();
        if (joined) return;
        sem->release(rounds);
        done->set();
        try {
            owner.join();
        } catch (...) {
        }
    }};
    ASSERT_TRUE(eventually([&] { return where.load(std::memory_order_acquire) != nullptr; }));
    std::atomic<long>* const p = where.load(std::memory_order_acquire);
    const std::uint64_t before = shrinks(r.rt);
    const std::optional<std::uint64_t> faults_before = shrink_faults(r.rt);
    for (int w = 0; w < writers; ++w)
        ts.emplace_back([&] {
            for (long i = 0; i < max_polls && !stop.load(std::memory_order_relaxed); ++i) {
                long b = budget.load();
                if (b <= 0) {
                    std::this_thread::sleep_for(20us);
                    continue;
                }
                if (!budget.compare_exchange_weak(b, b - 1)) continue;
                if (page_released(p)) released_seen.fetch_add(1);
                p->fetch_add(1, std::memory_order_relaxed);
                made.fetch_add(1);
            }
        });
    ts.emplace_back([&] {
        for (long i = 0; i < max_polls && !stop.load(std::memory_order_relaxed); ++i) {
            r.rt.shrink_idle();
            std::this_thread::sleep_for(100us);
        }
    });
    for (int k = 0; k < rounds; ++k) {
        ASSERT_TRUE(eventually([&] { return round.load() == k; })) << "round " << k << ": the task did not wait";
        // Under qemu, with CTest's other shards on the same two cores, a
        // round's shrink took longer than 2 s once (a local .ci/run): 20 s there.
        ASSERT_TRUE(shrunk_to(r.rt, shrinks_at_wait.load() + 1, under_user_mode_emulator() ? 400'000 : 40'000, 50us))
            << "round " << k << ": the task was not shrunk";
        budget.fetch_add(burst);
        if (k % 2 == 0) {
            const long granted = (k + 1) * burst;
            ASSERT_TRUE(eventually([&] { return made.load() == granted; }))
                << "round " << k << ": the writers made " << made.load() << " of " << granted << " writes";
        }
        sem->release();
    }
    ASSERT_TRUE(eventually([&] { return made.load() == granted_in_all; }))
        << "the writers made " << made.load() << " of " << granted_in_all << " writes";
    stop.store(true);
    for (auto& t : ts) t.join();
    ts.clear();
    done->set();
    owner.join();
    joined = true;
    const std::optional<std::uint64_t> faults_after = shrink_faults(r.rt);
    EXPECT_EQ(result.load(), 1) << "the task's frames did not come back whole";
    EXPECT_EQ(backwards.load(), 0) << "the counter went back between two rounds: writes were lost to a restore";
    EXPECT_EQ(final_value.load(), granted_in_all)
        << "of " << granted_in_all << " writes through the pointer, " << granted_in_all - final_value.load()
        << " were lost";
    EXPECT_GE(shrinks(r.rt) - before, static_cast<std::uint64_t>(rounds));
    RecordProperty("writes_that_met_a_released_page", static_cast<int>(released_seen.load()));
    if (on_stack.load()) {
        EXPECT_GT(released_seen.load(), 0) << "no write met the shrunk stack: the race was not run";
        if (faults_before && faults_after) {
            EXPECT_GT(*faults_after, *faults_before) << "runtime_stats::shrink_faults counted no write";
        }
    } else {
        off_stack_ = true;
    }
    skip_if_off_stack();
}

INSTANTIATE_TEST_SUITE_P(workers, shrink_foreign_test, worker_counts(), worker_param_name);

}  // namespace
}  // namespace weft::test
