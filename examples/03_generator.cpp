// 03_generator.cpp: generators, and yielding from nested function calls.
//
// weft::generator<T> wraps a coroutine that yields T values and makes it an
// input range: you can use it in a range-for loop or with std::ranges
// algorithms. The body runs lazily, one value at a time.
//
// Because every weft coroutine has its own stack, the body can yield from
// inside ordinary (even recursive) helper functions: here a directory-like
// tree is walked recursively and every file name is yielded from whatever
// depth it is found at. A C++20 co_await generator would need every helper
// to be a coroutine too.

#include <weft/generator.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace {

// An infinite generator: the Fibonacci numbers. It never returns; the loop
// that uses it decides when to stop.
weft::generator<long> fibonacci() {
    return weft::generator<long>([](weft::generator<long>::yielder_type& y) {
        long a = 0, b = 1;
        for (;;) {
            y.yield(a);
            const long next = a + b;
            a = b;
            b = next;
        }
    });
}

struct entry {
    std::string name;
    std::vector<entry> children;  // empty: a file
};

// walk() is an ordinary recursive function that yields through the yielder
// it is given: the generator's body can be spread over many frames.
void walk(const entry& e, const std::string& prefix, weft::generator<std::string>::yielder_type& y) {
    const std::string path = prefix + "/" + e.name;
    if (e.children.empty()) {
        y.yield(path);
        return;
    }
    for (const entry& child : e.children) walk(child, path, y);
}

}  // namespace

int main() {
    bool ok = true;

    // 1. Take the first ten Fibonacci numbers from an infinite generator.
    //    Leaving the loop early is fine: when `fib` is destroyed, its
    //    suspended body is unwound (its destructors run) and its stack freed.
    std::printf("fibonacci:");
    long sum = 0;
    {
        weft::generator<long> fib = fibonacci();
        int taken = 0;
        for (long v : fib) {
            std::printf(" %ld", v);
            sum += v;
            if (++taken == 10) break;  // the body stays suspended at its yield
        }
    }
    std::printf("\n");
    ok = ok && sum == 0 + 1 + 1 + 2 + 3 + 5 + 8 + 13 + 21 + 34;

    // 2. Walk a tree with a recursive helper that yields at any depth.
    const entry root{"src",
                     {{"main.cpp", {}},
                      {"net", {{"socket.cpp", {}}, {"tls", {{"handshake.cpp", {}}}}}},
                      {"util", {{"log.cpp", {}}}}}};
    weft::generator<std::string> files([&root](weft::generator<std::string>::yielder_type& y) { walk(root, "", y); });
    std::vector<std::string> found;
    for (const std::string& path : files) {
        std::printf("file: %s\n", path.c_str());
        found.push_back(path);
    }
    ok = ok && found == std::vector<std::string>{"/src/main.cpp", "/src/net/socket.cpp", "/src/net/tls/handshake.cpp",
                                                 "/src/util/log.cpp"};

    return ok ? 0 : 1;
}
