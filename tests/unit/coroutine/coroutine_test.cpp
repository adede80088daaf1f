// coroutine_test.cpp: values in both directions, state transitions, names,
// private data, placement of the control block on the coroutine's own stack,
// freedom from heap allocation, stack allocators, nesting and many live
// coroutines at once.

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "support/leak_check.hpp"
#include "support/test_stack.hpp"
#include "weft/coroutine.hpp"
#include "weft/stack.hpp"

namespace {

class coroutine_values : public weft::test::leak_checked {};
class coroutine_states : public weft::test::leak_checked {};
class coroutine_private : public weft::test::leak_checked {};
class coroutine_memory : public weft::test::leak_checked {};
class coroutine_allocators : public weft::test::leak_checked {};
class coroutine_nesting : public weft::test::leak_checked {};

// ---------------------------------------------------------------- values

TEST_F(coroutine_values, yield_passes_values_out_and_resume_reports_the_end) {
    weft::coroutine<int> co(std::allocator_arg, weft::test::stack(), [](weft::yielder<int>& y) {
        for (int i = 1; i <= 3; ++i) y.yield(i * 10);
    });
    std::vector<int> got;
    while (auto v = co.resume()) got.push_back(*v);
    EXPECT_EQ(got, (std::vector<int>{10, 20, 30}));
    EXPECT_TRUE(co.done());
}

TEST_F(coroutine_values, void_coroutine_resume_returns_true_while_it_yields) {
    int steps = 0;
    weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [&steps](weft::yielder<>& y) {
        ++steps;
        y.yield();
        ++steps;
    });
    EXPECT_EQ(steps, 0) << "the body must not run before the first resume";
    EXPECT_TRUE(co.resume());
    EXPECT_EQ(steps, 1);
    EXPECT_FALSE(co.resume());
    EXPECT_EQ(steps, 2);
    EXPECT_TRUE(co.done());
}

TEST_F(coroutine_values, first_resume_value_is_the_second_argument_later_ones_come_out_of_yield) {
    std::vector<int> seen_by_body;
    weft::coroutine<int, int, int> acc(std::allocator_arg, weft::test::stack(), [&seen_by_body](weft::yielder<int, int>& y, int first) {
        seen_by_body.push_back(first);
        int sum = first;
        for (;;) {
            const int next = y.yield(sum);
            seen_by_body.push_back(next);
            if (next < 0) break;
            sum += next;
        }
        return sum * 2;
    });
    EXPECT_EQ(acc.resume(5), std::optional<int>(5));
    EXPECT_EQ(acc.resume(3), std::optional<int>(8));
    EXPECT_EQ(acc.resume(4), std::optional<int>(12));
    EXPECT_EQ(acc.resume(-1), std::nullopt);
    EXPECT_TRUE(acc.done());
    EXPECT_EQ(acc.result(), 24);
    EXPECT_EQ(seen_by_body, (std::vector<int>{5, 3, 4, -1}));
}

TEST_F(coroutine_values, resume_only_coroutine_receives_strings) {
    std::vector<std::string> received;
    weft::coroutine<void, std::string> sink(std::allocator_arg, weft::test::stack(), [&received](weft::yielder<void, std::string>& y, std::string first) {
        received.push_back(std::move(first));
        while (received.size() < 3) received.push_back(y.yield());
    });
    EXPECT_TRUE(sink.resume("alpha"));
    EXPECT_TRUE(sink.resume("beta"));
    EXPECT_FALSE(sink.resume("gamma"));
    EXPECT_EQ(received, (std::vector<std::string>{"alpha", "beta", "gamma"}));
}

TEST_F(coroutine_values, return_value_is_kept_for_result) {
    weft::coroutine<void, void, std::string> co(std::allocator_arg, weft::test::stack(), [](weft::yielder<>& y) {
        y.yield();
        return std::string("finished with a string long enough to live on the heap");
    });
    EXPECT_TRUE(co.resume());
    EXPECT_FALSE(co.resume());
    EXPECT_EQ(co.result(), "finished with a string long enough to live on the heap");
    // result() is a reference to the kept value: it can be modified and read again.
    co.result() += "!";
    EXPECT_EQ(co.result().back(), '!');
}

TEST_F(coroutine_values, move_only_types_as_yield_resume_and_return) {
    using up = std::unique_ptr<int>;
    weft::coroutine<up, up, up> co(std::allocator_arg, weft::test::stack(), [](weft::yielder<up, up>& y, up first) {
        up got = y.yield(std::make_unique<int>(*first + 1));
        up again = y.yield(std::make_unique<int>(*got + 1));
        return std::make_unique<int>(*again * 2);
    });
    std::optional<up> a = co.resume(std::make_unique<int>(1));
    ASSERT_TRUE(a.has_value());
    ASSERT_TRUE(*a);
    EXPECT_EQ(**a, 2);
    std::optional<up> b = co.resume(std::make_unique<int>(10));
    ASSERT_TRUE(b && *b);
    EXPECT_EQ(**b, 11);
    EXPECT_EQ(co.resume(std::make_unique<int>(7)), std::nullopt);
    up r = std::move(co.result());
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, 14);
    EXPECT_FALSE(co.result()) << "result() must hand out the kept value itself, not a copy";
}

TEST_F(coroutine_values, result_before_the_body_returned_throws_no_result) {
    weft::coroutine<void, void, int> co(std::allocator_arg, weft::test::stack(), 
        [](weft::yielder<>& y) {
            y.yield();
            return 7;
        },
        {.name = "slow"});
    auto expect_no_result = [&co] {
        try {
            (void)co.result();
            ADD_FAILURE() << "result() did not throw";
        } catch (const weft::coroutine_error& e) {
            EXPECT_EQ(e.code(), weft::coroutine_errc::no_result);
            EXPECT_NE(std::string(e.what()).find("'slow'"), std::string::npos) << e.what();
        }
    };
    expect_no_result();  // created
    EXPECT_TRUE(co.resume());
    expect_no_result();  // suspended
    EXPECT_FALSE(co.resume());
    EXPECT_EQ(co.result(), 7);
}

TEST_F(coroutine_values, yielded_value_is_moved_not_copied) {
    struct tally {
        int copies = 0;
        int moves = 0;
    } t;
    struct probe {
        tally* t;
        explicit probe(tally* p) : t(p) {}
        probe(const probe& o) : t(o.t) { ++t->copies; }
        probe(probe&& o) noexcept : t(o.t) { ++t->moves; }
        probe& operator=(const probe&) = delete;
        probe& operator=(probe&&) = delete;
    };
    weft::coroutine<probe> co(std::allocator_arg, weft::test::stack(), [&t](weft::yielder<probe>& y) { y.yield(probe(&t)); });
    auto v = co.resume();
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(t.copies, 0);
    EXPECT_GE(t.moves, 1);
    EXPECT_FALSE(co.resume());
}

// ---------------------------------------------------------------- states

TEST_F(coroutine_states, created_running_suspended_done) {
    std::vector<weft::coroutine_state> inside;
    weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [&inside](weft::yielder<>& y) {
        inside.push_back(weft::this_coroutine::get().state());
        y.yield();
        inside.push_back(weft::this_coroutine::get().state());
    });
    EXPECT_EQ(co.state(), weft::coroutine_state::created);
    EXPECT_FALSE(co.done());
    EXPECT_TRUE(co.resume());
    EXPECT_EQ(co.state(), weft::coroutine_state::suspended);
    EXPECT_FALSE(co.done());
    EXPECT_FALSE(co.resume());
    EXPECT_EQ(co.state(), weft::coroutine_state::done);
    EXPECT_TRUE(co.done());
    EXPECT_EQ(inside, (std::vector<weft::coroutine_state>{weft::coroutine_state::running, weft::coroutine_state::running}));
}

TEST_F(coroutine_states, this_coroutine_is_the_running_one_and_empty_outside) {
    EXPECT_FALSE(weft::this_coroutine::inside());
    EXPECT_FALSE(weft::this_coroutine::get());
    weft::coroutine_ref seen;
    bool was_inside = false;
    weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [&](weft::yielder<>&) {
        seen = weft::this_coroutine::get();
        was_inside = weft::this_coroutine::inside();
    });
    EXPECT_FALSE(co.resume());
    EXPECT_TRUE(was_inside);
    EXPECT_TRUE(seen == co.ref());
    EXPECT_FALSE(weft::this_coroutine::inside()) << "the resumer must be outside again after resume()";
}

TEST_F(coroutine_states, to_string_names_every_state) {
    EXPECT_STREQ(weft::to_string(weft::coroutine_state::created), "created");
    EXPECT_STREQ(weft::to_string(weft::coroutine_state::running), "running");
    EXPECT_STREQ(weft::to_string(weft::coroutine_state::suspended), "suspended");
    EXPECT_STREQ(weft::to_string(weft::coroutine_state::done), "done");
}

TEST_F(coroutine_states, handle_moves_keep_the_coroutine) {
    int steps = 0;
    weft::coroutine<> a(std::allocator_arg, weft::test::stack(), [&steps](weft::yielder<>& y) {
        ++steps;
        y.yield();
        ++steps;
    });
    EXPECT_TRUE(a.resume());
    weft::coroutine<> b(std::move(a));
    EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): checking the moved-from state
    ASSERT_TRUE(b);
    EXPECT_EQ(b.state(), weft::coroutine_state::suspended);
    EXPECT_FALSE(b.resume());
    EXPECT_EQ(steps, 2);
}

// ---------------------------------------------------------------- names

TEST_F(coroutine_states, name_is_copied_onto_the_coroutine_stack) {
    std::string source = "worker-17";
    std::string_view from_yielder, from_inside;
    weft::coroutine<> co(std::allocator_arg, weft::test::stack(), 
        [&](weft::yielder<>& y) {
            from_yielder = y.name();
            from_inside = weft::this_coroutine::get().name();
        },
        {.name = source});
    source.assign(source.size(), 'x');  // the coroutine must not refer to the caller's buffer
    EXPECT_EQ(co.name(), "worker-17");
    // On a stack of its own the name sits at the top of it; in copy-stack
    // mode it is in the control block's heap block, off the shared stack.
    EXPECT_EQ(co.ref().stack().contains(co.name().data()), !weft::test::copy_mode);
    EXPECT_FALSE(co.resume());
    EXPECT_EQ(from_yielder, "worker-17");
    EXPECT_EQ(from_inside, "worker-17");
    EXPECT_EQ(co.ref().name(), "worker-17");
}

TEST_F(coroutine_states, default_name_is_empty) {
    weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [](weft::yielder<>&) {});
    EXPECT_TRUE(co.name().empty());
    EXPECT_TRUE(co.private_data().empty());
}

// ---------------------------------------------------------------- private data

// dirty_stack hands out stacks full of garbage, so that zero-filled private
// data is the coroutine's doing and not the allocator's.
class dirty_stack {
public:
    weft::stack_view allocate(std::size_t n) {
        weft::stack_view s = inner_.allocate(n);
        std::memset(s.base, 0xAB, s.size);
        return s;
    }
    void deallocate(weft::stack_view s) noexcept { inner_.deallocate(s); }

private:
    weft::malloc_stack inner_;
};
static_assert(weft::stack_allocator<dirty_stack>);

TEST_F(coroutine_private, size_alignment_zero_fill_and_placement) {
    for (std::size_t size : {std::size_t{1}, std::size_t{3}, std::size_t{16}, std::size_t{17}, std::size_t{100}, std::size_t{1000}}) {
        for (std::string_view name : {std::string_view{}, std::string_view{"a"}, std::string_view{"abcdefghijklmnopq"}}) {
            SCOPED_TRACE(testing::Message() << "size " << size << ", name '" << name << "'");
            weft::coroutine<> co(std::allocator_arg, dirty_stack{}, [](weft::yielder<>&) {},
                                 {.stack_size = 16 * 1024, .name = name, .private_data_size = size});
            std::span<std::byte> pd = co.private_data();
            ASSERT_EQ(pd.size(), size);
            EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pd.data()) % 16, 0u);
            for (std::byte b : pd) ASSERT_EQ(b, std::byte{0});
            const weft::stack_view stack = co.ref().stack();
            EXPECT_TRUE(stack.contains(pd.data()));
            EXPECT_TRUE(stack.contains(pd.data() + pd.size() - 1));
            // The area must not overlap the name.
            EXPECT_TRUE(pd.data() + pd.size() <= reinterpret_cast<const std::byte*>(co.name().data()) ||
                        reinterpret_cast<const std::byte*>(co.name().data()) + co.name().size() <= pd.data());
        }
    }
}

TEST_F(coroutine_private, reachable_from_inside_and_persists_across_yields) {
    struct session {
        std::uint64_t id;
        std::uint32_t hits;
    };
    bool same_from_get = false, same_from_yielder = false, survived = false;
    weft::coroutine<> co(std::allocator_arg, weft::test::stack(), 
        [&](weft::yielder<>& y) {
            std::span<std::byte> a = weft::this_coroutine::get().private_data();
            std::span<std::byte> b = y.private_data();
            same_from_get = a.size() == sizeof(session);
            same_from_yielder = b.data() == a.data() && b.size() == a.size();
            auto* s = reinterpret_cast<session*>(a.data());
            s->id = 0xC0FFEE;
            s->hits = 1;
            y.yield();
            // The resumer incremented hits while we were suspended.
            survived = s->id == 0xC0FFEE && s->hits == 2;
            s->hits = 3;
            y.yield();
        },
        {.name = "session", .private_data_size = sizeof(session)});
    EXPECT_TRUE(co.resume());
    auto* s = reinterpret_cast<session*>(co.private_data().data());
    EXPECT_EQ(s->id, 0xC0FFEEu);
    EXPECT_EQ(s->hits, 1u);
    s->hits = 2;
    EXPECT_TRUE(co.resume());
    EXPECT_EQ(s->hits, 3u);
    EXPECT_TRUE(same_from_get);
    EXPECT_TRUE(same_from_yielder);
    EXPECT_TRUE(survived);
    EXPECT_EQ(co.ref().private_data().data(), co.private_data().data());
    EXPECT_FALSE(co.resume());
}

// ---------------------------------------------------------------- memory

TEST_F(coroutine_memory, creating_and_destroying_a_never_started_coroutine_allocates_nothing) {
    if constexpr (weft::test::copy_mode)
        GTEST_SKIP() << "copy-stack mode allocates one heap block per coroutine by design "
                        "(shared_stack_test checks that it is exactly one)";
    // The pool's first use on a thread allocates that thread's cache; after
    // that, coroutines come and go without the heap.
    { weft::coroutine<> warm(std::allocator_arg, weft::test::stack(), [](weft::yielder<>&) {}); }
    std::array<int, 32> state{};
    state[5] = 5;
    const std::uint64_t before = weft::test::new_calls();
    {
        weft::coroutine<int> co(std::allocator_arg, weft::test::stack(), 
            [state, bias = 42L](weft::yielder<int>& y) { y.yield(static_cast<int>(state[5] + bias)); },
            {.name = "quiet", .private_data_size = 64});
        (void)co.private_data();
    }
    const std::uint64_t delta = weft::test::new_calls() - before;
    EXPECT_EQ(delta, 0u);
}

TEST_F(coroutine_memory, resume_yield_round_trips_allocate_nothing) {
    weft::coroutine<int, int> co(std::allocator_arg, weft::test::stack(), [](weft::yielder<int, int>& y, int first) {
        int v = first;
        for (;;) v = y.yield(v + 1);
    });
    ASSERT_EQ(co.resume(0), std::optional<int>(1));
    long sum = 0;
    const std::uint64_t before = weft::test::new_calls();
    for (int i = 0; i < 1000; ++i) sum += *co.resume(i);
    const std::uint64_t delta = weft::test::new_calls() - before;
    EXPECT_EQ(delta, 0u);
    EXPECT_EQ(sum, 1000L * 1001 / 2);
}

TEST_F(coroutine_memory, new_calls_counter_can_see_allocations_inside_a_coroutine) {
    // The two tests above would pass vacuously if allocations made on a
    // coroutine's stack were not counted; make sure they are.
    std::unique_ptr<long> kept;  // escapes, so the allocation cannot be elided
    weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [&kept](weft::yielder<>& y) {
        kept = std::make_unique<long>(1);
        y.yield();
    });
    const std::uint64_t before = weft::test::new_calls();
    EXPECT_TRUE(co.resume());
    EXPECT_EQ(weft::test::new_calls() - before, 1u);
    EXPECT_FALSE(co.resume());
    ASSERT_TRUE(kept);
    EXPECT_EQ(*kept, 1);
}

TEST_F(coroutine_memory, callable_and_its_captures_live_on_the_coroutine_stack) {
    bool capture_inside = false, reference_outside = false;
    weft::stack_view seen_stack;
    int local = 0;
    weft::coroutine<> co(std::allocator_arg, weft::test::stack(), [&, marker = 7L](weft::yielder<>&) {
        const weft::stack_view s = weft::this_coroutine::get().stack();
        seen_stack = s;
        capture_inside = s.contains(&marker);
        reference_outside = !s.contains(&local);  // a sanity check that contains() can say no
    });
    EXPECT_FALSE(co.resume());
    // In copy-stack mode the callable lives in the control block's heap
    // block, not on the shared stack the body runs on.
    EXPECT_EQ(capture_inside, !weft::test::copy_mode);
    EXPECT_TRUE(reference_outside);
    EXPECT_EQ(seen_stack.base, co.ref().stack().base);
    EXPECT_GE(seen_stack.size, weft::default_stack_size);
}

// ---------------------------------------------------------------- allocators

struct alloc_counts {
    int allocates = 0;
    int deallocates = 0;
    int moves = 0;
    int moved_from_uses = 0;
    std::size_t requested = 0;
};

// counting_stack is a move-only allocator: the coroutine cannot copy it.
class counting_stack {
public:
    explicit counting_stack(alloc_counts* c) noexcept : c_(c) {}
    counting_stack(counting_stack&& o) noexcept : c_(o.c_), live_(std::exchange(o.live_, false)) { ++c_->moves; }
    counting_stack& operator=(counting_stack&&) = delete;
    counting_stack(const counting_stack&) = delete;
    counting_stack& operator=(const counting_stack&) = delete;

    weft::stack_view allocate(std::size_t n) {
        if (!live_) ++c_->moved_from_uses;
        ++c_->allocates;
        c_->requested = n;
        return inner_.allocate(n);
    }
    void deallocate(weft::stack_view s) noexcept {
        if (!live_) ++c_->moved_from_uses;
        ++c_->deallocates;
        inner_.deallocate(s);
    }

private:
    alloc_counts* c_;
    bool live_ = true;
    weft::malloc_stack inner_;
};
static_assert(weft::stack_allocator<counting_stack>);
static_assert(!std::is_copy_constructible_v<counting_stack>);

TEST_F(coroutine_allocators, custom_move_only_allocator_allocates_and_deallocates_once) {
    alloc_counts c;
    {
        weft::coroutine<int> co(std::allocator_arg, counting_stack(&c),
                                [](weft::yielder<int>& y) {
                                    y.yield(1);
                                    y.yield(2);
                                },
                                {.stack_size = 32 * 1024});
        EXPECT_EQ(c.allocates, 1);
        EXPECT_EQ(c.deallocates, 0);
        EXPECT_EQ(c.requested, 32u * 1024);
        EXPECT_GE(c.moves, 1);
        EXPECT_EQ(co.ref().stack().size, 32u * 1024);
        EXPECT_EQ(co.resume(), std::optional<int>(1));
        EXPECT_EQ(co.resume(), std::optional<int>(2));
        EXPECT_EQ(c.deallocates, 0);
    }  // destroyed while suspended
    EXPECT_EQ(c.allocates, 1);
    EXPECT_EQ(c.deallocates, 1);
    EXPECT_EQ(c.moved_from_uses, 0) << "a moved-from allocator was used";
}

TEST_F(coroutine_allocators, malloc_stack_runs_a_coroutine) {
    weft::coroutine<int> co(std::allocator_arg, weft::malloc_stack{},
                            [](weft::yielder<int>& y) {
                                int buffer[64];
                                for (int i = 0; i < 64; ++i) buffer[i] = i;
                                int sum = 0;
                                for (int v : buffer) sum += v;
                                y.yield(sum);
                            },
                            {.stack_size = 8 * 1024 + 3});
    EXPECT_EQ(co.ref().stack().size, 8u * 1024 + 16) << "malloc_stack rounds up to 16";
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(co.ref().stack().base) % 16, 0u);
    EXPECT_EQ(co.resume(), std::optional<int>(64 * 63 / 2));
    EXPECT_FALSE(co.resume());
}

TEST_F(coroutine_allocators, stack_too_small_throws_and_leaks_nothing) {
    alloc_counts c;
    const std::int64_t stacks = weft::stats::live_stacks();
    try {
        weft::coroutine<> co(std::allocator_arg, counting_stack(&c), [](weft::yielder<>&) {},
                             {.stack_size = 512, .name = "tiny"});
        ADD_FAILURE() << "a 512-byte stack was accepted";
    } catch (const weft::coroutine_error& e) {
        EXPECT_EQ(e.code(), weft::coroutine_errc::stack_too_small);
        EXPECT_NE(std::string(e.what()).find("'tiny'"), std::string::npos) << e.what();
    }
    EXPECT_EQ(c.allocates, 1);
    EXPECT_EQ(c.deallocates, 1);
    EXPECT_EQ(weft::stats::live_stacks(), stacks);

    // The same with malloc_stack itself.
    EXPECT_THROW(weft::coroutine<>(std::allocator_arg, weft::malloc_stack{}, [](weft::yielder<>&) {}, {.stack_size = 512}),
                 weft::coroutine_error);
    // A large private data area makes an otherwise fine stack too small.
    // (On an mmap_stack of exactly that size: a pooled stack has the pool's
    // 128 KiB, and copy-stack mode keeps private data on the heap.)
    EXPECT_THROW(weft::coroutine<>(std::allocator_arg, weft::mmap_stack{}, [](weft::yielder<>&) {},
                                   {.stack_size = 16 * 1024, .private_data_size = 16 * 1024}),
                 weft::coroutine_error);
    EXPECT_EQ(weft::stats::live_stacks(), stacks);
}

struct alloc_failure {};

class failing_stack {
public:
    weft::stack_view allocate(std::size_t) { throw alloc_failure{}; }
    void deallocate(weft::stack_view) noexcept {}
};

TEST_F(coroutine_allocators, allocation_failure_propagates_from_the_constructor) {
    bool body_destroyed_ok = true;
    EXPECT_THROW(weft::coroutine<>(std::allocator_arg, failing_stack{}, [&body_destroyed_ok](weft::yielder<>&) { body_destroyed_ok = false; }),
                 alloc_failure);
    EXPECT_TRUE(body_destroyed_ok);
}

struct copy_failure {};

// throws_on_copy is a callable whose copy constructor throws: the coroutine
// constructor must give the stack back.
struct throws_on_copy {
    throws_on_copy() = default;
    throws_on_copy(const throws_on_copy&) { throw copy_failure{}; }
    void operator()(weft::yielder<>&) const {}
};

TEST_F(coroutine_allocators, throwing_callable_copy_gives_the_stack_back) {
    alloc_counts c;
    throws_on_copy body;
    EXPECT_THROW(weft::coroutine<>(std::allocator_arg, counting_stack(&c), body), copy_failure);
    EXPECT_EQ(c.allocates, 1);
    EXPECT_EQ(c.deallocates, 1);
    EXPECT_EQ(c.moved_from_uses, 0);
}

// ---------------------------------------------------------------- nesting

TEST_F(coroutine_nesting, this_coroutine_is_right_at_each_level_and_restored_after_inner_yields) {
    std::vector<std::string> log;
    auto where = [&log](const char* label) {
        weft::coroutine_ref r = weft::this_coroutine::get();
        log.push_back(std::string(label) + ":" + (r ? std::string(r.name()) : std::string("-")));
    };
    weft::coroutine<int> outer(std::allocator_arg, weft::test::stack(), 
        [&](weft::yielder<int>& y) {
            where("outer-start");
            weft::coroutine<int> middle(std::allocator_arg, weft::test::stack(), 
                [&](weft::yielder<int>& ym) {
                    where("middle-start");
                    weft::coroutine<int> inner(std::allocator_arg, weft::test::stack(), 
                        [&](weft::yielder<int>& yi) {
                            where("inner-1");
                            yi.yield(1);
                            where("inner-2");
                        },
                        {.name = "inner"});
                    const int a = *inner.resume();
                    where("middle-after-inner-yield");
                    ym.yield(a + 10);
                    where("middle-resumed");
                    EXPECT_FALSE(inner.resume());
                    where("middle-after-inner-end");
                },
                {.name = "middle"});
            const int b = *middle.resume();
            where("outer-after-middle-yield");
            y.yield(b + 100);
            where("outer-resumed");
            EXPECT_FALSE(middle.resume());
            where("outer-end");
        },
        {.name = "outer"});
    where("main-1");
    EXPECT_EQ(outer.resume(), std::optional<int>(111));
    where("main-2");
    EXPECT_FALSE(outer.resume());
    where("main-3");
    EXPECT_EQ(log, (std::vector<std::string>{
                       "main-1:-",
                       "outer-start:outer",
                       "middle-start:middle",
                       "inner-1:inner",
                       "middle-after-inner-yield:middle",
                       "outer-after-middle-yield:outer",
                       "main-2:-",
                       "outer-resumed:outer",
                       "middle-resumed:middle",
                       "inner-2:inner",
                       "middle-after-inner-end:middle",
                       "outer-end:outer",
                       "main-3:-",
                   }));
}

TEST_F(coroutine_nesting, coroutine_created_outside_can_be_driven_from_another_coroutine) {
    weft::coroutine<int> counter(std::allocator_arg, weft::test::stack(), [](weft::yielder<int>& y) {
        for (int i = 0; i < 5; ++i) y.yield(i);
    });
    weft::coroutine<int> doubler(std::allocator_arg, weft::test::stack(), [&counter](weft::yielder<int>& y) {
        while (auto v = counter.resume()) y.yield(*v * 2);
    });
    std::vector<int> got;
    // Interleave: main resumes counter directly between doubler's steps.
    got.push_back(*doubler.resume());  // counter 0
    got.push_back(*counter.resume());  // counter 1, directly
    got.push_back(*doubler.resume());  // counter 2
    while (auto v = doubler.resume()) got.push_back(*v);
    EXPECT_EQ(got, (std::vector<int>{0, 1, 4, 6, 8}));
    EXPECT_TRUE(counter.done());
}

// ---------------------------------------------------------------- scale

TEST_F(coroutine_nesting, a_thousand_live_coroutines_resumed_round_robin_keep_their_state) {
    constexpr int count = 1000;
    constexpr int rounds = 8;
    std::vector<weft::coroutine<long>> all;
    all.reserve(count);
    for (int id = 0; id < count; ++id) {
        all.emplace_back(
            std::allocator_arg, weft::test::stack(), [id](weft::yielder<long>& y) {
                // Local state on the coroutine's stack, a pattern unique to id.
                std::array<long, 32> mine;
                for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = id * 1000L + static_cast<long>(i);
                auto* pd = reinterpret_cast<long*>(y.private_data().data());
                *pd = id;
                for (int r = 0; r < rounds; ++r) {
                    bool intact = *pd == id;
                    for (std::size_t i = 0; i < mine.size(); ++i) intact = intact && mine[i] == id * 1000L + static_cast<long>(i);
                    // -1 reports damage; otherwise id * 100 + round.
                    y.yield(intact ? id * 100L + r : -1L);
                }
            },
            weft::coroutine_options{.stack_size = 16 * 1024, .private_data_size = sizeof(long)});
    }
    EXPECT_EQ(weft::stats::live_coroutines() >= count, true);
    int bad = 0;
    for (int r = 0; r < rounds; ++r) {
        for (int id = 0; id < count; ++id) {
            std::optional<long> v = all[static_cast<std::size_t>(id)].resume();
            if (!v || *v != id * 100L + r) ++bad;
        }
    }
    EXPECT_EQ(bad, 0);
    // Finish the even ones, destroy the odd ones while suspended.
    for (int id = 0; id < count; id += 2) EXPECT_FALSE(all[static_cast<std::size_t>(id)].resume());
    for (int id = 0; id < count; id += 2) EXPECT_TRUE(all[static_cast<std::size_t>(id)].done());
    all.clear();
}

}  // namespace
