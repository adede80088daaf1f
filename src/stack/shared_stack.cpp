// shared_stack.cpp: the shared stacks of copy-stack coroutines (the copying
// itself is the coroutine layer's, src/fiber/copy_stack.cpp).

#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>

#include "weft/detail/intrusive_list.hpp"
#include "weft/detail/sanitizer.hpp"
#include "weft/shared_stack.hpp"

namespace weft {

namespace detail {
struct shared_pool_links {
    static shared_stack_pool*& prev(shared_stack_pool& p) noexcept { return p.prev_; }
    static shared_stack_pool*& next(shared_stack_pool& p) noexcept { return p.next_pool_; }
};
}  // namespace detail

namespace {

// The registry of live pools, for find_shared_slot(). Constant-initialised
// so that pools created during static initialisation may use it.
constinit std::mutex registry_mutex;
constinit detail::intrusive_list<shared_stack_pool, detail::shared_pool_links, false> registry;  // guarded by registry_mutex
std::atomic<int> live_pools{0};

thread_local char token_anchor;

[[noreturn]] void invalid(const std::string& what) {
    throw std::invalid_argument("weft::shared_stack_pool: " + what);
}

}  // namespace

namespace detail {

[[gnu::noinline]] const void* thread_token() noexcept {
    const void* p = &token_anchor;
    asm volatile("" : "+r"(p));
    return p;
}

shared_stack_slot* find_shared_slot(const void* p) noexcept {
    if (live_pools.load(std::memory_order_acquire) == 0) return nullptr;
    std::lock_guard<std::mutex> lock(registry_mutex);
    for (shared_stack_pool* pool = registry.front(); pool; pool = pool->next_pool_)
        if (shared_stack_slot* s = pool->slot_of(p)) return s;
    return nullptr;
}

bool shared_pools_exist() noexcept { return live_pools.load(std::memory_order_relaxed) != 0; }

}  // namespace detail

shared_stack_pool::shared_stack_pool(const options& o) {
    const std::size_t page = page_size();
    if (o.stack_size == 0) invalid("stack_size must not be zero");
    if (o.stacks == 0) invalid("stacks must not be zero");
    if (o.guard_pages == 0) invalid("guard_pages must not be zero");
    // The layer above keeps a fiber's saved size in 32 bits.
    if (o.stack_size > (std::size_t{1} << 32) - page) invalid("stack_size must be below 4 GiB");
    stack_size_ = (o.stack_size + page - 1) & ~(page - 1);
    if (o.guard_pages > (std::size_t{1} << 32) / page) invalid("guard_pages too large");
    guard_size_ = o.guard_pages * page;
    const std::size_t stride = stack_size_ + guard_size_;
    if (o.stacks > std::numeric_limits<std::size_t>::max() / stride) invalid("stacks * (stack_size + guard) overflows");
    count_ = o.stacks;
    mapping_size_ = stride * count_;
    // One reservation for all stacks; each stack's pages are opened above
    // its guard, backed on first touch.
    slots_ = new detail::shared_stack_slot[count_];
    void* m = ::mmap(nullptr, mapping_size_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        const int err = errno;
        delete[] slots_;
        throw stack_error(err, o.stack_size, "mmap");
    }
    mapping_ = m;
    for (std::size_t i = 0; i < count_; ++i) {
        auto* base = static_cast<std::byte*>(m) + i * stride + guard_size_;
        if (::mprotect(base, stack_size_, PROT_READ | PROT_WRITE) != 0) {
            const int err = errno;
            ::munmap(m, mapping_size_);
            delete[] slots_;
            throw stack_error(err, o.stack_size, "mprotect");
        }
        slots_[i].stack = {base, stack_size_, guard_size_};
        slots_[i].pool = this;
        slots_[i].index = static_cast<std::uint32_t>(i);
    }
    for (std::size_t i = 0; i < count_; ++i)
        slots_[i].valgrind_id = detail::sanitizer::on_shared_stack(slots_[i].stack.base, stack_size_);
    std::lock_guard<std::mutex> lock(registry_mutex);
    registry.push_front(this);
    live_pools.fetch_add(1, std::memory_order_release);
}

shared_stack_pool::~shared_stack_pool() {
    const std::int64_t n = live_.load(std::memory_order_relaxed);
    if (n != 0) {
        std::fprintf(stderr,
                     "weft: shared_stack_pool destroyed while %lld coroutines assigned to it are alive; every "
                     "copy-stack coroutine must be destroyed before its pool\n",
                     static_cast<long long>(n));
        std::abort();
    }
    {
        std::lock_guard<std::mutex> lock(registry_mutex);
        registry.remove(this);
        live_pools.fetch_sub(1, std::memory_order_release);
    }
    for (std::size_t i = 0; i < count_; ++i) {
        detail::sanitizer::off_shared_stack(slots_[i].stack.base, stack_size_, slots_[i].valgrind_id);
        detail::sanitizer::release_stack(slots_[i].stack.base, stack_size_);
    }
    ::munmap(mapping_, mapping_size_);
    delete[] slots_;
}

shared_stack_pool& shared_stack_pool::global() {
    // Never destroyed: coroutines may outlive static destruction.
    static shared_stack_pool* pool = new shared_stack_pool();
    return *pool;
}

detail::shared_stack_slot& shared_stack_pool::assign() noexcept {
    live_.fetch_add(1, std::memory_order_relaxed);
    const std::size_t start = next_.fetch_add(1, std::memory_order_relaxed);
    const void* me = detail::thread_token();
    for (std::size_t k = 0; k < count_; ++k) {
        detail::shared_stack_slot& s = slots_[(start + k) % count_];
        if (s.holder.load(std::memory_order_relaxed) != me) return s;
    }
    return slots_[start % count_];  // every stack is busy on this thread: resume() will say so
}

detail::shared_stack_slot* shared_stack_pool::slot_of(const void* p) noexcept {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    const auto first = reinterpret_cast<std::uintptr_t>(slots_[0].stack.base);
    if (a < first) return nullptr;
    const std::size_t stride = stack_size_ + guard_size_;
    const std::size_t i = (a - first) / stride;
    if (i >= count_ || (a - first) % stride >= stack_size_) return nullptr;
    return &slots_[i];
}

}  // namespace weft
