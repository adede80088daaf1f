// weft/generator.hpp: generator<T>, an input range driven by a stackful
// coroutine.
//
//   weft::generator<int> squares([](weft::generator<int>::yielder_type& y) {
//       for (int i = 1; i <= 4; ++i) y.yield(i * i);
//   });
//   for (int v : squares) std::printf("%d\n", v);
//
// Unlike a C++20 generator, the body may yield from any depth of ordinary
// function calls, since it has a stack of its own.
#pragma once

#include <cstddef>
#include <iterator>
#include <memory>
#include <optional>
#include <utility>

#include "weft/coroutine.hpp"

namespace weft {

// generator<T> owns a coroutine<T> and exposes what it yields as an input
// range. begin() runs the body to its first yield; each increment runs it to
// the next. An exception from the body propagates out of begin() or ++.
template <class T>
class generator {
public:
    using value_type = T;
    using yielder_type = yielder<T, void>;

    // generator(body, options) creates the coroutine; the body does not run
    // until begin(). Throws: as coroutine's constructor.
    template <class F>
        requires(!std::same_as<std::remove_cvref_t<F>, generator> && !std::same_as<std::remove_cvref_t<F>, std::allocator_arg_t>)
    explicit generator(F&& body, const coroutine_options& options = {}) : co_(std::forward<F>(body), options) {}

    // generator(allocator_arg, alloc, body, options) uses a given stack
    // allocator, or a shared_stack (copy-stack mode).
    template <coroutine_stack Alloc, class F>
    generator(std::allocator_arg_t, Alloc alloc, F&& body, const coroutine_options& options = {})
        : co_(std::allocator_arg, std::move(alloc), std::forward<F>(body), options) {}

    generator(generator&&) noexcept = default;
    generator& operator=(generator&&) noexcept = default;

    class iterator {
    public:
        using iterator_concept = std::input_iterator_tag;
        using value_type = T;
        using difference_type = std::ptrdiff_t;

        iterator() noexcept = default;
        // operator*() is the value most recently yielded.
        T& operator*() const noexcept { return *g_->current_; }
        T* operator->() const noexcept { return std::addressof(*g_->current_); }
        // operator++() runs the body to its next yield or its end.
        iterator& operator++() {
            g_->advance();
            return *this;
        }
        void operator++(int) { ++*this; }
        friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept { return it.at_end(); }

    private:
        friend class generator;
        explicit iterator(generator* g) noexcept : g_(g) {}
        bool at_end() const noexcept { return !g_ || !g_->current_; }
        generator* g_ = nullptr;
    };

    // begin() starts the body. Requires: called once per generator.
    // Throws: coroutine_error (resume_done) on a second call after the end.
    iterator begin() {
        advance();
        return iterator(this);
    }
    std::default_sentinel_t end() const noexcept { return {}; }

private:
    friend class iterator;
    void advance() {
        current_.reset();
        current_ = co_.resume();
    }

    coroutine<T, void, void> co_;
    std::optional<T> current_;
};

}  // namespace weft
