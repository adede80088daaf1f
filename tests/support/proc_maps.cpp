// proc_maps.cpp: the /proc/self/maps parser shared by the stack tests.

#include "support/proc_maps.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

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

}  // namespace weft::test
