/* c_test.h: the C tests' few helpers (no gtest in C). Each test file's main()
 * runs its test functions with RUN(); a failing CHECK prints where and what,
 * and ends the process with status 1 at once (also from a task or thread).
 * now_ns() and make_runtime() make what most tests need. */
#ifndef WEFT_C_TEST_H
#define WEFT_C_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            fflush(stderr);                                                           \
            fflush(stdout);                                                           \
            _Exit(1);                                                                 \
        }                                                                             \
    } while (0)

/* CHECK_RESULT(expr, want): expr returns the weft_result want. */
#define CHECK_RESULT(expr, want)                                                                        \
    do {                                                                                                \
        weft_result got_ = (expr);                                                                      \
        weft_result want_ = (want);                                                                     \
        if (got_ != want_) {                                                                            \
            fprintf(stderr, "%s:%d: %s\n  returned %s\n  expected %s\n", __FILE__, __LINE__, #expr,    \
                    weft_result_str(got_), weft_result_str(want_));                                     \
            fflush(stderr);                                                                             \
            fflush(stdout);                                                                             \
            _Exit(1);                                                                                   \
        }                                                                                               \
    } while (0)

#define CHECK_OK(expr) CHECK_RESULT(expr, WEFT_OK)

/* CHECK_EXPLAINED(expr, want, ...): expr returns the weft_result want and
 * weft_last_error() then holds each of the strings that follow (the call,
 * the argument, the fix). */
#define CHECK_EXPLAINED(expr, want, ...)                                                         \
    do {                                                                                         \
        CHECK_RESULT(expr, want);                                                                \
        const char* text_ = weft_last_error();                                                   \
        const char* parts_[] = {__VA_ARGS__};                                                    \
        for (size_t i_ = 0; i_ < sizeof parts_ / sizeof parts_[0]; ++i_) {                       \
            if (!strstr(text_, parts_[i_])) {                                                    \
                fprintf(stderr, "%s:%d: %s\n  weft_last_error() is \"%s\"\n  expected it to hold \"%s\"\n", \
                        __FILE__, __LINE__, #expr, text_, parts_[i_]);                           \
                fflush(stderr);                                                                  \
                _Exit(1);                                                                        \
            }                                                                                    \
        }                                                                                        \
    } while (0)

#define RUN(fn)                          \
    do {                                 \
        printf("[ RUN  ] %s\n", #fn);    \
        fflush(stdout);                  \
        fn();                            \
        printf("[   OK ] %s\n", #fn);    \
        ++c_tests_passed;                \
    } while (0)

static int c_tests_passed = 0;

/* now_ns() is weft_now() for tests. */
static inline int64_t now_ns(void) {
    int64_t t = 0;
    CHECK_OK(weft_now(&t));
    return t;
}

#define MS ((int64_t)1000000)

/* make_runtime() is a runtime with `workers` worker threads. */
static inline weft_runtime make_runtime(unsigned workers) {
    weft_runtime_options o = weft_runtime_options_init();
    o.workers = workers;
    weft_runtime rt;
    CHECK_OK(weft_runtime_create(&o, &rt));
    return rt;
}

#endif
