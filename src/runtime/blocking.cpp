// blocking.cpp: layer L4, the blocking pool: threads, started on demand
// up to runtime_options::blocking_threads, that run weft::blocking()'s
// calls while their tasks wait.

#include "runtime_core.hpp"

#include <mutex>
#include <thread>

namespace weft::detail {

// ---- blocking() ----------------------------------------------------------------------

void runtime_core::blocking(blocking_job& job) {
    {
        std::lock_guard g(bl_mu);
        bl_jobs.push_back(&job);
        if (bl_idle == 0 && bl_threads < opts.blocking_threads) {
            bl_pool.emplace_back([this] { blocking_main(); });
            ++bl_threads;
        }
    }
    bl_cv.notify_one();
}

void runtime_core::blocking_main() {
    std::unique_lock lk(bl_mu);
    for (;;) {
        ++bl_idle;
        bl_cv.wait(lk, [this] { return !bl_jobs.empty() || bl_stop; });
        --bl_idle;
        blocking_job* job = bl_jobs.pop_front();
        if (!job) return;  // stopping, nothing left
        lk.unlock();
        // The job lives on the waiting task's stack: read it before the
        // task can go on.
        task_record* t = job->task;
        const std::uint64_t word = job->word;
        job->run(job->ctx);
        if (try_end(t, word, wait_status::notified)) arrive(t);
        lk.lock();
    }
}

}  // namespace weft::detail
