// coroutine.cpp: the out-of-line parts of the typed wrappers.

#include "weft/coroutine.hpp"

namespace weft {

namespace this_coroutine {

coroutine_ref get() noexcept { return coroutine_ref(detail::this_thread_state()->current); }

void yield() {
    detail::fiber_record* f = detail::this_thread_state()->current;
    if (!f) throw coroutine_error(coroutine_errc::yield_outside, "weft: this_coroutine::yield() outside any coroutine");
    if (f->flavour == detail::fiber_flavour::coroutine) detail::misuse(f, coroutine_errc::yield_type);
    detail::suspend(f);
}

}  // namespace this_coroutine

}  // namespace weft
