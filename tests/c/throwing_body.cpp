// C++ callbacks for the C tests: extern "C" functions whose bodies throw a
// C++ exception, passed to the C API as task and coroutine bodies. The C API
// must turn the escaping exception into WEFT_CALLBACK_FAILED.
#include <stdexcept>

#include <weft/weft.h>

extern "C" void weft_test_throwing_task(void*) { throw std::runtime_error("thrown by a C++ task body"); }

extern "C" void weft_test_throwing_coroutine(weft_coroutine co) {
    (void)weft_coroutine_yield(co);
    throw std::logic_error("thrown by a C++ coroutine body after one yield");
}
