// stack.cpp: mmap_stack and malloc_stack.

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>

#include "weft/detail/sanitizer.hpp"
#include "weft/stack.hpp"

namespace weft {

namespace detail {

namespace {

// Each thread's slots. Trivially constructible and destructible, so the
// thread_local needs no guard on access and never "dies" before the thread:
// a pthread key destructor, which glibc runs after the C++ thread_local
// destructors (a pool's thread cache returning its stacks, for one), folds
// the slots into the registry's totals.
struct thread_slots {
    std::atomic<std::int64_t> value[thread_counter::max_counters];
    thread_slots* next;
    thread_slots* prev;
    bool registered;
    bool retired;  // folded into the totals: later updates go there directly
};

struct registry {
    std::mutex mutex;
    thread_slots* head = nullptr;  // guarded by mutex
    std::atomic<std::int64_t> retired[thread_counter::max_counters] = {};
    pthread_key_t key{};

    static void on_thread_exit(void* p) noexcept;
    registry() { (void)pthread_key_create(&key, &on_thread_exit); }
};

// Never destroyed: threads may exit while static destructors run.
registry& reg() noexcept {
    static registry* r = new registry();
    return *r;
}

thread_local thread_slots t_slots;

void registry::on_thread_exit(void* p) noexcept {
    auto* s = static_cast<thread_slots*>(p);
    registry& r = reg();
    std::lock_guard lock(r.mutex);
    for (unsigned i = 0; i < thread_counter::max_counters; ++i)
        r.retired[i].fetch_add(s->value[i].load(std::memory_order_relaxed), std::memory_order_relaxed);
    if (s->prev) s->prev->next = s->next; else r.head = s->next;
    if (s->next) s->next->prev = s->prev;
    s->retired = true;
}

[[gnu::noinline]] void register_thread(thread_slots& s) noexcept {
    registry& r = reg();
    std::lock_guard lock(r.mutex);
    s.registered = true;
    s.prev = nullptr;
    s.next = r.head;
    if (r.head) r.head->prev = &s;
    r.head = &s;
    (void)pthread_setspecific(r.key, &s);
}

}  // namespace

void thread_counter::add(std::int64_t delta) noexcept {
    thread_slots& s = t_slots;
    if (!s.registered) [[unlikely]]
        register_thread(s);
    if (s.retired) [[unlikely]] {
        reg().retired[id_].fetch_add(delta, std::memory_order_relaxed);
        return;
    }
    auto& v = s.value[id_];
    v.store(v.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}

std::int64_t thread_counter::read() const noexcept {
    registry& r = reg();
    std::lock_guard lock(r.mutex);
    std::int64_t sum = r.retired[id_].load(std::memory_order_relaxed);
    for (thread_slots* s = r.head; s; s = s->next) sum += s->value[id_].load(std::memory_order_relaxed);
    return sum;
}

thread_counter live_stacks{0};

}  // namespace detail

namespace stats {
std::int64_t live_stacks() noexcept { return detail::live_stacks.read(); }
}  // namespace stats

namespace {

std::string stack_error_message(std::size_t requested, const char* operation) {
    return std::string("weft: cannot allocate a stack of ") + std::to_string(requested) + " bytes (" + operation + ")";
}

// round_up() rounds n up to a multiple of the power of two `to`, reporting
// overflow instead of wrapping.
bool round_up(std::size_t n, std::size_t to, std::size_t& out) noexcept {
    std::size_t sum;
    if (__builtin_add_overflow(n, to - 1, &sum)) return false;
    out = sum & ~(to - 1);
    return true;
}

}  // namespace

stack_error::stack_error(int err, std::size_t requested, const char* operation)
    : std::system_error(err, std::generic_category(), stack_error_message(requested, operation)),
      requested_(requested) {}

std::size_t page_size() noexcept {
    static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    return size;
}

mmap_stack::mmap_stack(std::size_t guard_pages) : guard_pages_(guard_pages) {
    if (guard_pages == 0) throw std::invalid_argument("weft::mmap_stack: guard_pages must be at least 1");
    if (guard_pages > std::numeric_limits<std::size_t>::max() / page_size())
        throw std::invalid_argument("weft::mmap_stack: guard_pages * page size overflows");
}

stack_view mmap_stack::allocate(std::size_t size) {
    if (size == 0) throw std::invalid_argument("weft::mmap_stack::allocate: size must not be zero");
    const std::size_t page = page_size();
    std::size_t usable, total;
    if (!round_up(size, page, usable) || __builtin_add_overflow(usable, guard_size(), &total))
        throw stack_error(EOVERFLOW, size, "size overflows");
    // Reserve the whole range inaccessible, then open everything above the
    // guard: the guard is never backed, the rest is backed on first touch.
    void* p = ::mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw stack_error(errno, size, "mmap");
    auto* base = static_cast<std::byte*>(p) + guard_size();
    if (::mprotect(base, usable, PROT_READ | PROT_WRITE) != 0) {
        // Typically ENOMEM from vm.max_map_count: the split into two
        // mappings is refused. Give the reservation back so nothing leaks.
        const int err = errno;
        ::munmap(p, total);
        throw stack_error(err, size, "mprotect");
    }
    detail::live_stacks.add(1);
    return {base, usable, guard_size()};
}

void mmap_stack::deallocate(stack_view stack) noexcept {
    if (!stack.base) return;
    detail::sanitizer::release_stack(stack.base, stack.size);
    ::munmap(static_cast<std::byte*>(stack.base) - guard_size(), stack.size + guard_size());
    detail::live_stacks.add(-1);
}

stack_view malloc_stack::allocate(std::size_t size) {
    if (size == 0) throw std::invalid_argument("weft::malloc_stack::allocate: size must not be zero");
    std::size_t rounded;
    if (!round_up(size, 16, rounded)) throw stack_error(EOVERFLOW, size, "size overflows");
    void* p = std::aligned_alloc(16, rounded);
    if (!p) throw stack_error(ENOMEM, size, "aligned_alloc");
    detail::live_stacks.add(1);
    return {p, rounded};
}

void malloc_stack::deallocate(stack_view stack) noexcept {
    if (!stack.base) return;
    detail::sanitizer::release_stack(stack.base, stack.size);
    std::free(stack.base);
    detail::live_stacks.add(-1);
}

}  // namespace weft
