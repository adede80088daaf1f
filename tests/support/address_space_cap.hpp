// address_space_cap.hpp: make large allocations fail for a while, to test
// what weft does when memory runs out.
#pragma once

#include <sys/resource.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace weft::test {

// vm_size() is this process's virtual size in bytes (/proc/self/status).
inline std::size_t vm_size() {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    std::size_t kib = 0;
    while (std::fgets(line, sizeof line, f))
        if (!std::strncmp(line, "VmSize:", 7)) kib = std::strtoull(line + 7, nullptr, 10);
    std::fclose(f);
    return kib * 1024;
}

// address_space_cap lowers RLIMIT_AS to a little above what the process
// uses, so that any large allocation fails, until it goes out of scope.
class address_space_cap {
public:
    address_space_cap() {
        getrlimit(RLIMIT_AS, &old_);
        rlimit r = old_;
        r.rlim_cur = vm_size() + 256 * 1024;
        set_ = setrlimit(RLIMIT_AS, &r) == 0;
    }
    ~address_space_cap() {
        if (set_) setrlimit(RLIMIT_AS, &old_);
    }
    address_space_cap(const address_space_cap&) = delete;
    address_space_cap& operator=(const address_space_cap&) = delete;
    // effective() says whether a 1 MiB allocation now fails (qemu-user and
    // valgrind do not enforce RLIMIT_AS).
    bool effective() const {
        void* p = set_ ? std::malloc(std::size_t{1} << 20) : nullptr;
        std::free(p);
        return set_ && !p;
    }

private:
    rlimit old_{};
    bool set_ = false;
};

}  // namespace weft::test
