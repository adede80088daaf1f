// context_fixture.hpp: the fixture of the L0 context tests: a leak-checked
// test with one 64 KiB mmap_stack to make contexts on.
#pragma once

#include "support/leak_check.hpp"
#include "weft/context.hpp"
#include "weft/stack.hpp"

namespace weft::test {

class context_fixture : public leak_checked {
protected:
    void SetUp() override {
        leak_checked::SetUp();
        stack_ = alloc_.allocate(64 * 1024);
    }
    void TearDown() override {
        alloc_.deallocate(stack_);
        leak_checked::TearDown();
    }
    // make() makes a context at the top of the stack that starts in fn.
    void* make(weft::context::entry_fn fn) { return weft::context::make(stack_.top(), stack_.size, fn); }

    weft::mmap_stack alloc_;
    weft::stack_view stack_;
};

}  // namespace weft::test
