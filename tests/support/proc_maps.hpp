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

}  // namespace weft::test
