// shared_mutex_test.cpp: weft::shared_mutex (weft/sync/mutex.hpp): many
// readers or one writer, from tasks and threads; writer preference; timeouts
// and cancellation that let queued readers in. Workers 0, 1, 2, 4;
// leak-checked.

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "sync_test_support.hpp"
#include "weft/sync/mutex.hpp"

namespace weft::test {
namespace {

class shared_mutex_test : public sync_fixture {};

TEST_P(shared_mutex_test, readers_share_writers_exclude) {
    weft::shared_mutex m;
    EXPECT_TRUE(m.try_lock_shared());
    EXPECT_TRUE(m.try_lock_shared());
    EXPECT_FALSE(m.try_lock());
    m.unlock_shared();
    m.unlock_shared();
    EXPECT_THROW(m.unlock_shared(), std::system_error);
    EXPECT_THROW(m.unlock(), std::system_error);
    {
        std::unique_lock g(m);
        EXPECT_FALSE(m.try_lock_shared());
    }
    std::shared_lock s(m);
    EXPECT_TRUE(s.owns_lock());
}

TEST_P(shared_mutex_test, excludes_under_contention_from_tasks_and_threads) {
    driven_runtime rt(options());
    weft::shared_mutex m;
    long value = 0;
    std::atomic<int> readers{0}, writers{0};
    std::atomic<bool> broken{false};
    const int per = sanitized ? 100 : 500;
    auto writer = [&] {
        for (int i = 0; i < per; ++i) {
            std::unique_lock g(m);
            if (writers.fetch_add(1) != 0 || readers.load() != 0) broken = true;
            ++value;
            writers.fetch_sub(1);
        }
    };
    auto reader = [&] {
        for (int i = 0; i < per; ++i) {
            std::shared_lock g(m);
            readers.fetch_add(1);
            if (writers.load() != 0) broken = true;
            if (i % 16 == 0 && this_task::inside()) this_task::yield();
            readers.fetch_sub(1);
        }
    };
    std::vector<join_handle<void>> hs;
    for (int i = 0; i < 4; ++i) hs.push_back(rt.spawn(writer));
    for (int i = 0; i < 4; ++i) hs.push_back(rt.spawn(reader));
    std::thread tw(writer), tr(reader);
    for (auto& h : hs) h.join();
    tw.join();
    tr.join();
    EXPECT_FALSE(broken);
    EXPECT_EQ(value, 5L * per);
}

TEST_P(shared_mutex_test, a_waiting_writer_blocks_new_readers_until_it_gives_up) {
    driven_runtime rt(options());
    weft::shared_mutex m;
    m.lock_shared();
    auto w = rt.spawn([&] {
        const auto t0 = sync_clock::now();
        const bool ok = m.try_lock_for(30ms);
        EXPECT_GE(sync_clock::now() - t0, 30ms);
        return ok;
    });
    ASSERT_TRUE(parked(w));
    EXPECT_FALSE(m.try_lock_shared());  // writer preference
    auto r = rt.spawn([&] {
        m.lock_shared();  // queued behind the writer
        m.unlock_shared();
    });
    EXPECT_FALSE(w.join());  // timed out: lets the queued reader in
    r.join();
    EXPECT_TRUE(m.try_lock_shared());
    m.unlock_shared();
    // Cancellation of a waiting writer does the same.
    auto c = rt.spawn([&] { std::unique_lock g(m); });
    ASSERT_TRUE(parked(c));
    auto r2 = rt.spawn([&] { std::shared_lock g(m); });
    ASSERT_TRUE(parked(r2));
    c.cancel();
    EXPECT_TRUE(canceled_by_join(c));
    r2.join();
    m.unlock_shared();
    EXPECT_TRUE(unlocked(m));
}

TEST_P(shared_mutex_test, unlock_hands_over_to_readers_then_writers) {
    driven_runtime rt(options());
    weft::shared_mutex m;
    m.lock();
    std::vector<join_handle<void>> hs;
    for (int i = 0; i < 3; ++i) hs.push_back(rt.spawn([&] { std::shared_lock g(m); }));
    for (auto& h : hs) ASSERT_TRUE(parked(h));
    auto w = rt.spawn([&] { std::unique_lock g(m); });
    ASSERT_TRUE(parked(w));
    std::thread t([&] { EXPECT_FALSE(m.try_lock_shared_for(10ms)); });  // writer waiting
    t.join();
    m.unlock();
    for (auto& h : hs) h.join();
    w.join();
    EXPECT_TRUE(unlocked(m));
}

INSTANTIATE_TEST_SUITE_P(workers, shared_mutex_test, worker_counts(), worker_param_name);

}  // namespace
}  // namespace weft::test
