// trace_files.hpp: what the trace tests (observe_test, live_trace_test)
// share: a per-process file name in the temporary directory, a file's whole
// text, and how often a string occurs in another.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace weft::test {

inline std::string temp_path(const std::string& stem) {
    return (std::filesystem::temp_directory_path() / (stem + "-" + std::to_string(::getpid()) + ".json")).string();
}

inline std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

inline std::size_t count_of(const std::string& hay, const std::string& needle) {
    std::size_t n = 0;
    for (std::size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
    return n;
}

}  // namespace weft::test
