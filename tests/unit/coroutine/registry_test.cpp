// registry_test.cpp: the registry of live fibers (src/fiber/registry.cpp)
// read the way a debugger reads it: through weft_debug_layout's offsets
// and the raw memory of weft_debug_registry, never through weft's types.
// Every live fiber is listed once with its id, name, state and stack, and
// leaves the list when destroyed, also on another thread.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/leak_check.hpp"
#include "support/test_stack.hpp"
#include "weft/coroutine.hpp"

// Declared as bytes, as a debugger sees them (the definition's type is
// internal to weft).
extern "C" const std::uint64_t weft_debug_layout[];
extern "C" const unsigned char weft_debug_registry[];

namespace {

class registry : public weft::test::leak_checked {};

enum : unsigned {
    magic, version, count, shards, shard_stride, shard_head, f_id, f_next, f_name_data, f_name_size, f_state,
    f_flavour, f_ctx, f_stack_base, f_stack_size, f_painted, f_copy, f_owner, arch, frame_size, switch_gap,
    frame_fp, frame_ret, paint, f_requested
};

template <class T>
T at(const void* base, std::uint64_t off) {
    T v;
    std::memcpy(&v, static_cast<const unsigned char*>(base) + off, sizeof v);
    return v;
}

struct listed {
    std::uint64_t id;
    std::uint8_t state;
    std::uint64_t stack_base, stack_size;
    bool copy;
    int times = 0;
};

// walk() lists every fiber in the registry by name (the debugger's view).
std::map<std::string, listed> walk() {
    const std::uint64_t* L = weft_debug_layout;
    std::map<std::string, listed> out;
    for (std::uint64_t s = 0; s < L[shards]; ++s) {
        const void* rec = at<const void*>(weft_debug_registry, s * L[shard_stride] + L[shard_head]);
        while (rec) {
            const char* data = at<const char*>(rec, L[f_name_data]);
            const std::string name(data, at<std::size_t>(rec, L[f_name_size]));
            listed& l = out[name];
            l.id = at<std::uint64_t>(rec, L[f_id]);
            l.state = at<std::uint8_t>(rec, L[f_state]);
            l.stack_base = at<std::uint64_t>(rec, L[f_stack_base]);
            l.stack_size = at<std::uint64_t>(rec, L[f_stack_size]);
            l.copy = at<const void*>(rec, L[f_copy]) != nullptr;
            ++l.times;
            rec = at<const void*>(rec, L[f_next]);
        }
    }
    return out;
}

TEST_F(registry, layout_table_has_its_magic_and_entries) {
    EXPECT_EQ(weft_debug_layout[magic], 0x5745465444424731ull);
    EXPECT_EQ(weft_debug_layout[version], 2u);
    EXPECT_EQ(weft_debug_layout[count], 27u);
    EXPECT_GE(weft_debug_layout[shards], 1u);
    EXPECT_EQ(weft_debug_layout[paint], 0xA5u);
}

TEST_F(registry, live_fibers_are_listed_with_id_name_state_and_stack_until_destroyed) {
    auto make = [](const char* name) {
        return weft::coroutine<void>(std::allocator_arg, weft::test::stack(),
                                     [](weft::yielder<void>& y) { y.yield(); }, {.name = name});
    };
    {
        weft::coroutine<void> a = make("registry_test_a");
        weft::coroutine<void> b = make("registry_test_b");
        b.resume();
        auto l = walk();
        ASSERT_EQ(l.count("registry_test_a"), 1u);
        ASSERT_EQ(l.count("registry_test_b"), 1u);
        const listed& la = l["registry_test_a"];
        const listed& lb = l["registry_test_b"];
        EXPECT_EQ(la.times, 1);
        EXPECT_EQ(lb.times, 1);
        EXPECT_NE(la.id, 0u);
        EXPECT_NE(la.id, lb.id);
        EXPECT_EQ(la.state, 0);  // created
        EXPECT_EQ(lb.state, 2);  // suspended
        EXPECT_EQ(la.copy, weft::test::copy_mode);
        EXPECT_NE(la.stack_base, 0u);
        EXPECT_GT(la.stack_size, 0u);
    }
    auto l = walk();
    EXPECT_EQ(l.count("registry_test_a"), 0u);
    EXPECT_EQ(l.count("registry_test_b"), 0u);
}

TEST_F(registry, fibers_made_on_several_threads_and_destroyed_on_another_leave_it) {
    constexpr int per_thread = 50;
    std::vector<weft::coroutine<void>> made[4];
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
        ts.emplace_back([&made, t] {
            for (int i = 0; i < per_thread; ++i) {
                const std::string name = "registry_test_t" + std::to_string(t) + "_" + std::to_string(i);
                // The default pool, in both builds of the suite: the copy
                // build's shared stack pools end with their threads.
                made[t].emplace_back([](weft::yielder<void>&) {}, weft::coroutine_options{.name = name});
            }
        });
    for (auto& th : ts) th.join();
    auto l = walk();
    std::set<std::uint64_t> ids;
    for (int t = 0; t < 4; ++t)
        for (int i = 0; i < per_thread; ++i) {
            const std::string name = "registry_test_t" + std::to_string(t) + "_" + std::to_string(i);
            ASSERT_EQ(l.count(name), 1u) << name;
            EXPECT_EQ(l[name].times, 1);
            ids.insert(l[name].id);
        }
    EXPECT_EQ(ids.size(), 4u * per_thread);  // process-unique
    // Destroyed on yet another thread than the one that made them.
    std::thread([&made] {
        for (auto& v : made) v.clear();
    }).join();
    for (const auto& [name, _] : walk()) EXPECT_EQ(name.rfind("registry_test_t", 0), std::string::npos) << name;
}

}  // namespace
