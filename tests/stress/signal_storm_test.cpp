// signal_storm_test.cpp: signals delivered in the middle of millions of
// switches must find a valid stack and must not corrupt anything. The switch
// never keeps data below the stack pointer, so a handler that dirties its own
// frame (which the kernel places just below the interrupted sp) is harmless.

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>

#include "abi/abi_probe.hpp"
#include "support/leak_check.hpp"
#include "weft/coroutine.hpp"

namespace {

// Stacks the handler may legitimately run on: the test thread's own stack
// and the coroutine stacks.
constexpr int max_ranges = 8;
std::uintptr_t g_lo[max_ranges], g_hi[max_ranges];
std::atomic<int> g_ranges{0};
std::atomic<std::uint64_t> g_signals{0}, g_bad_stack{0};

void add_range(const void* lo, std::size_t size) {
    int i = g_ranges.load();
    g_lo[i] = reinterpret_cast<std::uintptr_t>(lo);
    g_hi[i] = g_lo[i] + size;
    g_ranges.store(i + 1);
}

void handler(int) {
    volatile unsigned char scratch[512];
    // The frame address, not a local's: under ASan's use-after-return
    // detection locals may live on a heap-allocated fake stack.
    auto here = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
    bool known = false;
    for (int i = 0, n = g_ranges.load(); i < n; ++i) known |= here >= g_lo[i] && here < g_hi[i];
    if (!known) g_bad_stack.fetch_add(1, std::memory_order_relaxed);
    for (auto& b : scratch) b = 0xCC;  // dirty whatever lies below the interrupted sp
    g_signals.fetch_add(1, std::memory_order_relaxed);
}

class signal_storm_test : public weft::test::leak_checked {};

struct storm_state {
    weft::coroutine<>* co = nullptr;
    weft::yielder<>* y = nullptr;
    abi_regs main_in{}, main_out{}, co_in{}, co_out{};
    bool stop = false;
};

TEST_F(signal_storm_test, switches_under_a_signal_storm_keep_every_register_and_value) {
    pthread_attr_t attr;
    ASSERT_EQ(pthread_getattr_np(pthread_self(), &attr), 0);
    void* lo;
    std::size_t size;
    ASSERT_EQ(pthread_attr_getstack(&attr, &lo, &size), 0);
    pthread_attr_destroy(&attr);
    g_ranges = 0;
    add_range(lo, size);

    struct sigaction sa {}, old{};
    sa.sa_handler = &handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);

    storm_state st;
    for (int i = 0; i < 11; ++i) {
        st.main_in.gpr[i] = 0x1000 + static_cast<std::uint64_t>(i);
        st.co_in.gpr[i] = 0x2000 + static_cast<std::uint64_t>(i);
    }
    for (int i = 0; i < 8; ++i) {
        st.main_in.fpr[i] = 0x3000 + static_cast<std::uint64_t>(i);
        st.co_in.fpr[i] = 0x4000 + static_cast<std::uint64_t>(i);
    }
#if defined(__x86_64__)
    st.main_in.fpctl[0] = st.co_in.fpctl[0] = 0x1F80;
    st.main_in.fpctl[1] = st.co_in.fpctl[1] = 0x037F;
    constexpr int gprs = 6, fprs = 0;
#else
    constexpr int gprs = 11, fprs = 8;
#endif

    // Two kinds of traffic: value ping-pong through resume/yield, and ABI
    // probes around the switches.
    std::uint64_t value_errors = 0;
    weft::coroutine<std::uint64_t, std::uint64_t> counter([&](auto& y, std::uint64_t v) {
        add_range(weft::this_coroutine::get().stack().base, weft::this_coroutine::get().stack().size);
        std::uint64_t expect = v;
        for (;;) {
            std::uint64_t got = y.yield(expect * 3);
            if (got != expect + 1) ++value_errors;
            expect = got;
        }
    });
    weft::coroutine<> prober([&st](weft::yielder<>& y) {
        st.y = &y;
        add_range(weft::this_coroutine::get().stack().base, weft::this_coroutine::get().stack().size);
        while (!st.stop)
            weft_abi_probe_call([](void* p) { static_cast<storm_state*>(p)->y->yield(); }, &st, &st.co_in, &st.co_out);
    });
    st.co = &prober;
    (void)prober.resume();  // registers its stack before the storm starts
    ASSERT_EQ(*counter.resume(0), 0u);

    std::atomic<bool> done{false};
    const pthread_t target = pthread_self();
    std::thread storm([&] {
        while (!done.load(std::memory_order_relaxed)) {
            pthread_kill(target, SIGUSR1);
            std::this_thread::yield();
        }
    });

    // At least a million rounds (4 million switches), and on until enough
    // signals have landed: a loaded machine delivers fewer per second.
    constexpr std::uint64_t min_rounds = 1'000'000, max_rounds = 100'000'000, min_signals = 1000;
    std::uint64_t probe_errors = 0, rounds = 0;
    for (std::uint64_t i = 1; i <= max_rounds && (i <= min_rounds || g_signals.load() < min_signals); ++i) {
        rounds = i;
        auto r = counter.resume(i);
        if (!r || *r != i * 3) ++value_errors;
        weft_abi_probe_call([](void* p) { (void)static_cast<storm_state*>(p)->co->resume(); }, &st, &st.main_in,
                            &st.main_out);
        for (int k = 0; k < gprs; ++k) probe_errors += st.main_out.gpr[k] != st.main_in.gpr[k];
        for (int k = 0; k < fprs; ++k) probe_errors += st.main_out.fpr[k] != st.main_in.fpr[k];
        for (int k = 0; k < gprs; ++k) probe_errors += st.co_out.gpr[k] != st.co_in.gpr[k];
        for (int k = 0; k < fprs; ++k) probe_errors += st.co_out.fpr[k] != st.co_in.fpr[k];
    }
    done = true;
    storm.join();
    st.stop = true;
    (void)prober.resume();
    sigaction(SIGUSR1, &old, nullptr);

    EXPECT_EQ(value_errors, 0u);
    EXPECT_EQ(probe_errors, 0u);
    EXPECT_EQ(g_bad_stack.load(), 0u) << "a handler ran on an unknown stack";
    EXPECT_GE(g_signals.load(), min_signals) << "the storm delivered too few signals to mean anything";
    std::printf("signals delivered during %llu switches: %llu\n", static_cast<unsigned long long>(rounds * 4),
                static_cast<unsigned long long>(g_signals.load()));
}

}  // namespace
