// proc_maps.cpp: the /proc/self/maps parser shared by the stack tests.

#include "support/proc_maps.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>

#include "weft/version.hpp"
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define WEFT_TEST_HAVE_VALGRIND_H 1
#endif

namespace weft::test {

std::vector<mapping> read_maps() {
    std::ifstream in("/proc/self/maps");
    std::vector<mapping> maps;
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::string range;
        mapping m;
        ls >> range >> m.perms;
        const auto dash = range.find('-');
        if (dash == std::string::npos) continue;
        m.start = std::stoull(range.substr(0, dash), nullptr, 16);
        m.end = std::stoull(range.substr(dash + 1), nullptr, 16);
        maps.push_back(m);
    }
    return maps;
}

const mapping* find_ending_at(const std::vector<mapping>& maps, std::uintptr_t end) {
    for (const mapping& m : maps)
        if (m.end == end) return &m;
    return nullptr;
}

bool overlaps(const std::vector<mapping>& maps, std::uintptr_t lo, std::uintptr_t hi) {
    for (const mapping& m : maps)
        if (m.start < hi && lo < m.end) return true;
    return false;
}

bool any_page_mapped(std::uintptr_t lo, std::uintptr_t hi) {
    const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    for (std::uintptr_t p = lo & ~(page - 1); p < hi; p += page) {
        unsigned char resident = 0;
        // mincore fails with ENOMEM exactly when the page is not mapped.
        if (::mincore(reinterpret_cast<void*>(p), page, &resident) == 0 || errno != ENOMEM) return true;
    }
    return false;
}

maps_snapshot::maps_snapshot(std::size_t capacity) { ranges_.reserve(capacity); }

bool maps_snapshot::take() noexcept {
    ranges_.clear();
    const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[16384];
    // Each line starts "start-end perms ", start and end in hex.
    range r;
    int field = 0;  // 0: start, 1: end, 2: perms, 3: the rest of the line
    int perm = 0;   // characters of perms seen
    bool ok = true;
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) ok = false;
        if (n <= 0) break;
        for (ssize_t i = 0; i < n; ++i) {
            const char c = buf[i];
            if (c == '\n') {
                if (ranges_.size() == ranges_.capacity()) ok = false;  // would allocate
                else if (field >= 2) ranges_.push_back(r);
                r = range{};
                field = 0;
                perm = 0;
            } else if (field < 2) {
                if (c == (field == 0 ? '-' : ' ')) {
                    ++field;
                    if (field == 2) r.inaccessible = true;  // until a perms character says otherwise
                } else {
                    const unsigned digit = c <= '9' ? unsigned(c - '0') : unsigned((c | 0x20) - 'a' + 10);
                    std::uintptr_t& v = field == 0 ? r.start : r.end;
                    v = v * 16 + digit;
                }
            } else if (field == 2) {
                if (c == ' ') {
                    field = 3;
                } else {
                    // rwx, then p or s: only the first three say access.
                    if (perm < 3 && c != '-') r.inaccessible = false;
                    ++perm;
                }
            }
        }
    }
    ::close(fd);
    return ok;
}

std::vector<maps_snapshot::range> new_inaccessible(const maps_snapshot& before, const maps_snapshot& after) {
    std::vector<maps_snapshot::range> old = before.ranges();
    std::sort(old.begin(), old.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
    std::vector<maps_snapshot::range> out;
    for (const maps_snapshot::range& m : after.ranges()) {
        if (!m.inaccessible) continue;
        // The parts of [m.start, m.end) that no earlier mapping covered.
        std::uintptr_t at = m.start;
        for (const maps_snapshot::range& o : old) {
            if (o.end <= at) continue;
            if (o.start >= m.end) break;
            if (o.start > at) out.push_back({at, o.start, true});
            at = std::max(at, o.end);
            if (at >= m.end) break;
        }
        if (at < m.end) out.push_back({at, m.end, true});
    }
    return out;
}

bool address_space_shared_with_a_tool() noexcept {
    if (WEFT_ASAN || WEFT_TSAN) return true;
#if defined(WEFT_TEST_HAVE_VALGRIND_H)
    return RUNNING_ON_VALGRIND != 0;
#else
    return WEFT_VALGRIND != 0;
#endif
}

}  // namespace weft::test
