// proc_maps.hpp: /proc/self/maps for tests that check what was mapped,
// unmapped or left as a guard.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::test {

// mapping is one line of /proc/self/maps: [start, end) and its permissions.
struct mapping {
    std::uintptr_t start = 0;
    std::uintptr_t end = 0;
    std::string perms;
};

// read_maps() parses /proc/self/maps.
std::vector<mapping> read_maps();

// find_ending_at() is the mapping whose end is exactly `end`, if any.
const mapping* find_ending_at(const std::vector<mapping>& maps, std::uintptr_t end);

// overlaps() says whether any mapping intersects [lo, hi).
bool overlaps(const std::vector<mapping>& maps, std::uintptr_t lo, std::uintptr_t hi);

// any_page_mapped() says whether any page of the page-aligned range [lo, hi)
// is mapped, asking the kernel page by page (mincore) and allocating nothing.
// Checks that something was unmapped must use this, not read_maps(): parsing
// /proc/self/maps allocates, and under a sanitizer a large allocation is an
// mmap that the kernel may place in the hole just left behind.
bool any_page_mapped(std::uintptr_t lo, std::uintptr_t hi);

}  // namespace weft::test
