// proc_maps.hpp: /proc/self/maps for tests that check what was mapped,
// unmapped or left as a guard.
#pragma once

#include <cstddef>
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

// maps_snapshot is /proc/self/maps as address ranges, read without
// allocating (into room reserved when the snapshot is made), so that a test
// can take one right before and right after the code it checks.
class maps_snapshot {
public:
    struct range {
        std::uintptr_t start = 0;
        std::uintptr_t end = 0;
        bool inaccessible = false;  // "---": PROT_NONE
    };
    // Reserves room for `capacity` mappings; reads nothing yet.
    explicit maps_snapshot(std::size_t capacity = 16384);
    // take() rereads /proc/self/maps; false if it cannot be read or has more
    // mappings than the room reserved. Allocates nothing.
    bool take() noexcept;
    const std::vector<range>& ranges() const noexcept { return ranges_; }

private:
    std::vector<range> ranges_;
};

// new_inaccessible() is the parts of `after`'s PROT_NONE mappings that were
// not mapped at all in `before`: address space that was reserved in
// between. Every stack weft maps starts as a PROT_NONE reservation and keeps
// its guard page(s) PROT_NONE, so a stack mapping left behind (whole, or
// merged into a neighbouring reservation) shows up here, while the
// read-write memory that a tool sharing the address space maps for itself
// meanwhile (valgrind's or a sanitizer's allocator, say, for the exception
// being thrown) does not. Both snapshots must have been taken.
std::vector<maps_snapshot::range> new_inaccessible(const maps_snapshot& before, const maps_snapshot& after);

// address_space_shared_with_a_tool() says whether a tool maps memory of its
// own in this process at run time, in ranges that /proc/self/maps lists:
// valgrind (detected at run time when valgrind/valgrind.h is available, else
// from the build's WEFT_VALGRIND), ASan or TSan (from the build). Under such
// a tool, exact counts of mappings or mapped bytes are not weft's alone.
bool address_space_shared_with_a_tool() noexcept;

}  // namespace weft::test
