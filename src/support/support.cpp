// support.cpp: the cross-layer helpers of weft/detail/support.hpp.

#include "weft/detail/support.hpp"
#include "weft/detail/intrusive_list.hpp"

#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>

namespace weft::detail {

// ---------------------------------------------------------------- thread_counter

namespace {

// Each thread's slots. Trivially constructible and destructible, so the
// thread_local needs no guard on access (zero-initialised, no dynamic
// initialisation: plain integers, reached through std::atomic_ref, where
// std::atomic's C++20 value-initialising constructor made gcc guard and
// zero it at every access) and never "dies" before the thread: a pthread key
// destructor, which glibc runs after the C++ thread_local destructors (a
// pool's thread cache returning its stacks, for one), folds the slots into
// the registry's totals.
enum slots_mode : unsigned char {
    slots_new = 0,      // not registered yet (the zero of a fresh thread)
    slots_active = 1,   // registered: add() updates value[] (the one fast case)
    slots_retired = 2,  // folded into the totals: later updates go there directly
};
struct thread_slots {
    std::int64_t value[thread_counter::max_counters];  // only through slot()
    thread_slots* next;
    thread_slots* prev;
    unsigned char mode;  // slots_mode
};
static_assert(std::is_trivially_default_constructible_v<thread_slots> &&
              std::is_trivially_destructible_v<thread_slots>);

std::atomic_ref<std::int64_t> slot(thread_slots& s, unsigned id) noexcept { return std::atomic_ref(s.value[id]); }

struct registry {
    std::mutex mutex;
    intrusive_list<thread_slots, list_links<thread_slots, &thread_slots::prev, &thread_slots::next>, false>
        threads;  // registered, not retired; guarded by mutex
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
        r.retired[i].fetch_add(slot(*s, i).load(std::memory_order_relaxed), std::memory_order_relaxed);
    r.threads.remove(s);
    s->mode = slots_retired;
}

[[gnu::noinline]] void register_thread(thread_slots& s) noexcept {
    registry& r = reg();
    std::lock_guard lock(r.mutex);
    s.mode = slots_active;
    r.threads.push_front(&s);
    (void)pthread_setspecific(r.key, &s);
}

}  // namespace

namespace {
[[gnu::noinline]] void add_slow(thread_slots& s, unsigned id, std::int64_t delta) noexcept {
    if (s.mode == slots_new) register_thread(s);
    if (s.mode == slots_retired) {
        reg().retired[id].fetch_add(delta, std::memory_order_relaxed);
        return;
    }
    auto v = slot(s, id);
    v.store(v.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}
}  // namespace

void thread_counter::add(std::int64_t delta) noexcept {
    thread_slots& s = t_slots;
    if (s.mode != slots_active) [[unlikely]]
        return add_slow(s, id_, delta);
    auto v = slot(s, id_);
    v.store(v.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}

std::int64_t thread_counter::read() const noexcept {
    registry& r = reg();
    std::lock_guard lock(r.mutex);
    std::int64_t sum = r.retired[id_].load(std::memory_order_relaxed);
    for (thread_slots* s = r.threads.front(); s; s = s->next) sum += slot(*s, id_).load(std::memory_order_relaxed);
    return sum;
}

// ---------------------------------------------------------------- reporting

void write_stderr(const char* text, std::size_t n) noexcept {
    // A signal handler that changes errno corrupts the interrupted code's.
    const int saved = errno;
    std::size_t done = 0;
    while (done < n) {
        const ssize_t w = ::write(STDERR_FILENO, text + done, n - done);
        if (w > 0)
            done += static_cast<std::size_t>(w);
        else if (w < 0 && errno == EINTR)
            continue;
        else
            break;
    }
    errno = saved;
}

void fatal_message(const char* text) noexcept {
    // strlen and write(2) only: the heap may be what is broken.
    const std::size_t n = text ? std::strlen(text) : 0;
    if (n) write_stderr(text, n);
    if (n == 0 || text[n - 1] != '\n') write_stderr("\n", 1);
    std::abort();
}

text_writer& text_writer::text(std::string_view s) noexcept {
    std::size_t take = s.size();
    if (take > room()) {
        take = room();
        truncated_ = true;
    }
    if (take) {
        std::memcpy(buf_ + len_, s.data(), take);
        len_ += take;
        buf_[len_] = '\0';
    }
    return *this;
}

text_writer& text_writer::dec(std::uintmax_t v) noexcept {
    char d[3 * sizeof v];
    std::size_t i = sizeof d;
    do {
        d[--i] = static_cast<char>('0' + v % 10);
        v /= 10;
    } while (v);
    return text({d + i, sizeof d - i});
}

text_writer& text_writer::hex(std::uintptr_t v) noexcept {
    char d[2 + 2 * sizeof v];
    std::size_t i = sizeof d;
    do {
        d[--i] = "0123456789abcdef"[v & 0xF];
        v >>= 4;
    } while (v);
    d[--i] = 'x';
    d[--i] = '0';
    return text({d + i, sizeof d - i});
}

std::size_t format_named(char* buf, std::size_t n, std::string_view kind, std::string_view name,
                         const void* address) noexcept {
    text_writer w(buf, n);
    w.text(kind);
    if (name.empty()) {
        w.text(" <anonymous ").address(address).text(">");
        return w.size();
    }
    w.text(" '");
    // Keep the closing quote when the name is cut, so the reader sees where
    // the name ends and that it was shortened.
    constexpr std::string_view cut = "...'";
    if (name.size() + 1 <= w.room()) {
        w.text(name).text("'");
    } else if (w.room() > cut.size()) {
        w.text(name.substr(0, w.room() - cut.size())).text(cut);
    } else {
        w.text(name);
    }
    return w.size();
}

std::string describe_named(std::string_view kind, std::string_view name, const void* address) {
    if (name.empty()) {
        // kind, " <anonymous ", at most 18 characters of address, ">".
        std::string out(kind.size() + 32, '\0');
        out.resize(format_named(out.data(), out.size() + 1, kind, name, address));
        return out;
    }
    std::string out;
    out.reserve(kind.size() + name.size() + 3);
    out.append(kind).append(" '").append(name).append("'");
    return out;
}

void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::int64_t rel_timeout_ns) noexcept {
    static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
    timespec ts{};
    timespec* tp = nullptr;
    if (rel_timeout_ns >= 0) {
        ts.tv_sec = static_cast<time_t>(rel_timeout_ns / 1'000'000'000);
        ts.tv_nsec = static_cast<long>(rel_timeout_ns % 1'000'000'000);
        tp = &ts;
    }
    // EAGAIN (the word changed), EINTR and ETIMEDOUT all mean "look again".
    (void)syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, tp, nullptr, 0);
}

void futex_wake(std::atomic<std::uint32_t>* word, int n) noexcept {
    (void)syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}

}  // namespace weft::detail
