// sync_test_support.hpp: what the tests of the L5 primitives share, on top
// of the runtime's fixture (runtime_fixture.hpp), the chrono literals
// included.
#pragma once

#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "runtime_fixture.hpp"
#include "weft/runtime.hpp"

namespace weft::test {

using namespace std::chrono_literals;
using sync_clock = std::chrono::steady_clock;

// sync_fixture is the leak-checked fixture of the primitives' tests.
class sync_fixture : public runtime_fixture {};

// parked() waits (bounded) until the task behind h is suspended in a wait.
template <class T>
bool parked(const join_handle<T>& h) {
    return eventually([&] { return h.state() == task_state::waiting; });
}

// canceled_by_join() joins h and says whether the task ended canceled.
template <class T>
bool canceled_by_join(join_handle<T>& h) {
    try {
        (void)h.join();
    } catch (const task_canceled& e) {
        return e.state() == task_state::canceled;
    }
    return false;
}

// unlocked() says whether nobody holds m (a mutex or a shared_mutex): it
// takes the lock and gives it back if it can.
template <class M>
bool unlocked(M& m) {
    if (!m.try_lock()) return false;
    m.unlock();
    return true;
}

// reps() scales a repetition count down under sanitizers and qemu-user.
inline int reps(const char* env, int normal, int slow) {
    if (under_user_mode_emulator()) return static_cast<int>(env_count(env, static_cast<std::size_t>(slow), static_cast<std::size_t>(slow)));
    return static_cast<int>(env_count(env, static_cast<std::size_t>(normal), static_cast<std::size_t>(slow)));
}

}  // namespace weft::test
