// leak_check.cpp: the leak-checking fixture and a counting operator new.

#include "support/leak_check.hpp"

#include <cstdlib>
#include <new>

#include "weft/config.hpp"
#if WEFT_TSAN
#include <sanitizer/allocator_interface.h>
#endif

#include "weft/coroutine.hpp"
#include "weft/stack.hpp"

namespace {
thread_local std::uint64_t g_new_calls = 0;
thread_local std::uint64_t g_fail_countdown = 0;  // 0: disarmed
thread_local bool g_fail_fired = false;

// injected_failure() counts one operator new call against an armed failure
// and says whether this is the call that fails.
[[maybe_unused]] bool injected_failure() noexcept {
    if (g_fail_countdown == 0 || --g_fail_countdown != 0) return false;
    g_fail_fired = true;
    return true;
}
}  // namespace

#if WEFT_TSAN
// ThreadSanitizer's runtime defines operator new itself; count every heap
// allocation through its malloc hook instead (stricter: malloc counts too).
namespace {
void count_malloc(const volatile void*, std::size_t) { ++g_new_calls; }
void ignore_free(const volatile void*) {}
const int hooks_installed = __sanitizer_install_malloc_and_free_hooks(&count_malloc, &ignore_free);
}  // namespace
#else
void* operator new(std::size_t n) {
    ++g_new_calls;
    if (injected_failure()) throw std::bad_alloc();
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
    ++g_new_calls;
    if (injected_failure()) throw std::bad_alloc();
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
// The nothrow forms too: std::stable_sort's temporary buffer comes from
// operator new(n, nothrow) and goes back through plain operator delete, so
// without them ASan saw its own new freed by this file's free()
// (alloc-dealloc-mismatch, in the trace writer's stable_sort).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    ++g_new_calls;
    if (injected_failure()) return nullptr;
    return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
    ++g_new_calls;
    if (injected_failure()) return nullptr;
    return std::malloc(n ? n : 1);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace weft::test {

std::uint64_t new_calls() noexcept { return g_new_calls; }

void fail_new_at(std::uint64_t n) noexcept {
    g_fail_countdown = n;
    g_fail_fired = false;
}

bool new_failure_fired() noexcept { return g_fail_fired; }

bool new_failures_can_be_injected() {
    // valgrind's memcheck replaces operator new but not this file's
    // operator delete: the probe below would free valgrind's block with
    // free() ("Mismatched free() / delete"). Its new never fails on demand.
    if (WEFT_VALGRIND) return false;
    fail_new_at(1);
    bool failed = false;
    try {
        // A direct call: a new-expression's allocation may be elided.
        void* volatile p = ::operator new(16);
        ::operator delete(p);
    } catch (const std::bad_alloc&) {
        failed = true;
    }
    fail_new_at(0);
    return failed;
}

void leak_checked::SetUp() {
    coroutines_ = stats::live_coroutines();
    stacks_ = stats::live_stacks();
}

void leak_checked::TearDown() {
    EXPECT_EQ(stats::live_coroutines(), coroutines_) << "coroutines leaked by this test";
    EXPECT_EQ(stats::live_stacks(), stacks_) << "stacks leaked by this test";
}

}  // namespace weft::test
