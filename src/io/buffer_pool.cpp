// buffer_pool.cpp: layer L6, the buffers of io::buffered_reader and
// io::buffered_writer (weft/io/buffered.hpp; docs/io.md, "Buffers while
// idle"). A reader or writer holds its buffer only while it has bytes in it,
// so buffers change hands once or twice per request; the pool makes that a
// few loads and stores.
//
//   BUF-P1  Each thread keeps, per pooled size (the powers of two from
//            1 KiB to 64 KiB), a singly linked list of free buffers through
//            their first word, touched only by that thread; a buffer is in at
//            most one list, and a list never holds more than
//            max(4, 256 KiB / size) buffers: a buffer given back to a full
//            list goes to free(). So a thread's pool holds at most
//            7 x 256 KiB, whatever the number of idle connections, and a
//            thread's lists are freed when it exits.
//   BUF-P2  A buffer's bytes are never zeroed (a fresh one's untouched pages
//            cost nothing until written). The word a free buffer keeps its
//            link in is overwritten by whoever takes it. Buffers come from
//            malloc() and go back to free(), not operator new / delete: a
//            program (or a test) that replaces some of the global operator
//            new and delete forms but not the nothrow ones must not get a
//            buffer from one allocator and give it back to another (ASan's
//            alloc-dealloc-mismatch, seen in a local .ci/run).

#include "weft/io/buffered.hpp"

#include <bit>
#include <cstdlib>

namespace weft::io::detail {
namespace {

constexpr unsigned min_shift = 10;  // 1 KiB
constexpr unsigned max_shift = 16;  // 64 KiB
constexpr unsigned classes = max_shift - min_shift + 1;
constexpr std::size_t pool_bytes = 256 * 1024;  // per size, per thread (BUF-P1)

// class_of(n): the list of a pooled size, or -1 for a size not pooled.
int class_of(std::size_t n) noexcept {
    if (!std::has_single_bit(n) || n < (std::size_t{1} << min_shift) || n > (std::size_t{1} << max_shift)) return -1;
    return std::countr_zero(n) - static_cast<int>(min_shift);
}

std::size_t bound_of(int c) noexcept {
    const std::size_t size = std::size_t{1} << (static_cast<unsigned>(c) + min_shift);
    return std::max<std::size_t>(4, pool_bytes / size);
}

struct pool {
    void* head[classes] = {};
    std::size_t count[classes] = {};
    pool() = default;
    pool(const pool&) = delete;
    pool& operator=(const pool&) = delete;
    ~pool() {
        for (unsigned c = 0; c < classes; ++c) {
            while (void* p = head[c]) {
                head[c] = *static_cast<void**>(p);
                std::free(p);
            }
        }
    }
};

pool& this_pool() noexcept {
    thread_local pool p;
    return p;
}

}  // namespace

std::byte* take_buffer(std::size_t n) noexcept {
    const int c = class_of(n);
    if (c >= 0) {
        pool& p = this_pool();
        if (void* b = p.head[c]) {  // BUF-P1
            p.head[c] = *static_cast<void**>(b);
            --p.count[c];
            return static_cast<std::byte*>(b);
        }
    }
    return static_cast<std::byte*>(std::malloc(n));  // BUF-P2: not zeroed
}

void give_buffer(std::byte* b, std::size_t n) noexcept {
    if (!b) return;
    const int c = class_of(n);
    if (c >= 0) {
        pool& p = this_pool();
        if (p.count[c] < bound_of(c)) {  // BUF-P1
            *reinterpret_cast<void**>(b) = p.head[c];
            p.head[c] = b;
            ++p.count[c];
            return;
        }
    }
    std::free(b);
}

}  // namespace weft::io::detail
