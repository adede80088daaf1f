/* coroutine_test.c: the C API's coroutines, storage and result names, every
 * call and its misuses, built as C11. */
#define _POSIX_C_SOURCE 200809L
#include <fenv.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "c_test.h"

void weft_test_throwing_coroutine(weft_coroutine co); /* throwing_body.cpp */

static void empty_body(weft_coroutine co) { (void)co; }

/* ---- result names ---------------------------------------------------------- */

static void result_str_names_every_code_and_unknown_values(void) {
    for (int r = WEFT_OK; r <= WEFT_UNKNOWN_ERROR; ++r) {
        const char* s = weft_result_str((weft_result)r);
        CHECK(s != NULL);
        CHECK(strncmp(s, "WEFT_", 5) == 0);
    }
    CHECK(strncmp(weft_result_str(WEFT_CANCELED), "WEFT_CANCELED:", 14) == 0);
    CHECK(strcmp(weft_result_str((weft_result)999), "unknown result") == 0);
    CHECK(strcmp(weft_result_str((weft_result)-1), "unknown result") == 0);
}

static void now_is_monotonic_and_checks_its_argument(void) {
    CHECK_RESULT(weft_now(NULL), WEFT_INVALID_ARGUMENT);
    int64_t a = now_ns();
    int64_t b = now_ns();
    CHECK(a > 0 && b >= a);
}

/* ---- create, resume, yield, status --------------------------------------- */

static void desc_init_fills_defaults(void) {
    weft_coroutine_desc d = weft_coroutine_desc_init(empty_body, 12345);
    CHECK(d.func == empty_body);
    CHECK(d.stack_size == 12345);
    CHECK(d.storage_size == 1024);
    CHECK(d.user_data == NULL);
    CHECK(d.name == NULL);
    CHECK(d.own_fp_env == 0);
}

/* ---- the FP control state (own_fp_env), seen through the rounding mode ---- */

static void rounding_body(weft_coroutine co) {
    int* seen = NULL;
    CHECK_OK(weft_coroutine_user_data(co, (void**)&seen));
    seen[0] = fegetround();
    CHECK(fesetround(FE_DOWNWARD) == 0);
    CHECK_OK(weft_coroutine_yield(co));
    seen[1] = fegetround();
}

static void own_fp_env_keeps_the_coroutines_rounding_mode_and_shared_does_not(void) {
    const int before = fegetround();
    for (int own = 0; own <= 1; ++own) {
        int seen[2] = {-1, -1};
        CHECK(fesetround(FE_UPWARD) == 0); /* the creator's */
        weft_coroutine_desc d = weft_coroutine_desc_init(rounding_body, 0);
        d.user_data = seen;
        d.own_fp_env = own;
        weft_coroutine co = {0};
        CHECK_OK(weft_coroutine_create(&d, &co));
        CHECK(fesetround(FE_TOWARDZERO) == 0); /* the resumer's */
        CHECK_OK(weft_coroutine_resume(co));
        /* own: the resumer keeps its mode; shared: the coroutine's change stays */
        CHECK(fegetround() == (own ? FE_TOWARDZERO : FE_DOWNWARD));
        CHECK(fesetround(FE_TONEAREST) == 0);
        CHECK_OK(weft_coroutine_resume(co));
        CHECK(seen[0] == (own ? FE_UPWARD : FE_TOWARDZERO));
        CHECK(seen[1] == (own ? FE_DOWNWARD : FE_TONEAREST));
        CHECK(fegetround() == FE_TONEAREST);
        CHECK_OK(weft_coroutine_destroy(co));
    }
    fesetround(before);
}

static void create_rejects_null_arguments(void) {
    weft_coroutine co = {0};
    weft_coroutine_desc d = weft_coroutine_desc_init(empty_body, 0);
    CHECK_RESULT(weft_coroutine_create(NULL, &co), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_coroutine_create(&d, NULL), WEFT_INVALID_ARGUMENT);
    d.func = NULL;
    CHECK_RESULT(weft_coroutine_create(&d, &co), WEFT_INVALID_ARGUMENT);
    CHECK(co.id == 0);
}

static void counting_body(weft_coroutine co) {
    int* n = NULL;
    CHECK_OK(weft_coroutine_user_data(co, (void**)&n));
    for (int i = 0; i < 3; ++i) {
        ++*n;
        CHECK_OK(weft_coroutine_yield(co));
    }
    *n += 100;
}

static void resume_runs_the_body_between_yields_until_it_is_dead(void) {
    int n = 0;
    weft_coroutine_desc d = weft_coroutine_desc_init(counting_body, 0);
    d.user_data = &n;
    d.name = "counter";
    weft_coroutine co;
    CHECK_OK(weft_coroutine_create(&d, &co));
    CHECK(co.id != 0);
    weft_coroutine_state st;
    CHECK_OK(weft_coroutine_status(co, &st));
    CHECK(st == WEFT_COROUTINE_SUSPENDED);
    CHECK(n == 0); /* not run before the first resume */
    for (int i = 1; i <= 3; ++i) {
        CHECK_OK(weft_coroutine_resume(co));
        CHECK(n == i);
        CHECK_OK(weft_coroutine_status(co, &st));
        CHECK(st == WEFT_COROUTINE_SUSPENDED);
    }
    CHECK_OK(weft_coroutine_resume(co));
    CHECK(n == 103);
    CHECK_OK(weft_coroutine_status(co, &st));
    CHECK(st == WEFT_COROUTINE_DEAD);
    CHECK_RESULT(weft_coroutine_resume(co), WEFT_WRONG_STATE);
    CHECK_RESULT(weft_coroutine_status(co, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_coroutine_user_data(co, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_OK(weft_coroutine_destroy(co));
}

/* Two coroutines: A resumes B; B looks at both. */
static weft_coroutine co_a, co_b;
static int nested_checks;

static void inner_body(weft_coroutine co) {
    weft_coroutine_state st;
    CHECK_OK(weft_coroutine_status(co, &st));
    CHECK(st == WEFT_COROUTINE_RUNNING);
    CHECK_OK(weft_coroutine_status(co_a, &st));
    CHECK(st == WEFT_COROUTINE_NORMAL);
    weft_coroutine me;
    CHECK_OK(weft_coroutine_running(&me));
    CHECK(me.id == co.id);
    CHECK_RESULT(weft_coroutine_resume(co_a), WEFT_WRONG_STATE);  /* it resumed us */
    CHECK_RESULT(weft_coroutine_resume(co), WEFT_WRONG_STATE);    /* ourselves */
    CHECK_RESULT(weft_coroutine_destroy(co), WEFT_WRONG_STATE);   /* ourselves, running */
    CHECK_RESULT(weft_coroutine_destroy(co_a), WEFT_WRONG_STATE); /* normal */
    CHECK_RESULT(weft_coroutine_yield(co_a), WEFT_NOT_IN_COROUTINE); /* not ours to yield */
    ++nested_checks;
    CHECK_RESULT(weft_coroutine_yield(co), WEFT_CANCELED); /* only ever destroyed from here */
}

static void outer_body(weft_coroutine co) {
    weft_coroutine me;
    CHECK_OK(weft_coroutine_running(&me));
    CHECK(me.id == co.id);
    CHECK_OK(weft_coroutine_resume(co_b));
    weft_coroutine_state st;
    CHECK_OK(weft_coroutine_status(co_b, &st));
    CHECK(st == WEFT_COROUTINE_SUSPENDED);
    ++nested_checks;
}

static void status_tells_running_from_normal_and_misuse_inside_is_refused(void) {
    weft_coroutine_desc d = weft_coroutine_desc_init(outer_body, 0);
    CHECK_OK(weft_coroutine_create(&d, &co_a));
    d.func = inner_body;
    CHECK_OK(weft_coroutine_create(&d, &co_b));
    nested_checks = 0;
    CHECK_OK(weft_coroutine_resume(co_a));
    CHECK(nested_checks == 2);
    CHECK_OK(weft_coroutine_destroy(co_a));
    CHECK_OK(weft_coroutine_destroy(co_b)); /* suspended in its yield */
}

static void yield_and_running_outside_a_coroutine_are_refused(void) {
    weft_coroutine_desc d = weft_coroutine_desc_init(empty_body, 0);
    weft_coroutine co;
    CHECK_OK(weft_coroutine_create(&d, &co));
    CHECK_RESULT(weft_coroutine_yield(co), WEFT_NOT_IN_COROUTINE);
    weft_coroutine me = {0};
    CHECK_RESULT(weft_coroutine_running(&me), WEFT_NOT_IN_COROUTINE);
    CHECK_RESULT(weft_coroutine_running(NULL), WEFT_INVALID_ARGUMENT);
    CHECK_OK(weft_coroutine_destroy(co));
}

/* ---- storage ------------------------------------------------------------- */

static void doubling_body(weft_coroutine co) {
    for (;;) {
        int v;
        CHECK_OK(weft_coroutine_pop(co, &v, sizeof v));
        v *= 2;
        CHECK_OK(weft_coroutine_push(co, &v, sizeof v));
        if (weft_coroutine_yield(co) != WEFT_OK) return;
    }
}

static void push_and_pop_pass_bytes_both_ways(void) {
    weft_coroutine_desc d = weft_coroutine_desc_init(doubling_body, 0);
    weft_coroutine co;
    CHECK_OK(weft_coroutine_create(&d, &co));
    for (int i = 1; i <= 5; ++i) {
        CHECK_OK(weft_coroutine_push(co, &i, sizeof i));
        CHECK_OK(weft_coroutine_resume(co));
        size_t stored = 0;
        CHECK_OK(weft_coroutine_bytes_stored(co, &stored));
        CHECK(stored == sizeof(int));
        int v = 0;
        CHECK_OK(weft_coroutine_peek(co, &v, sizeof v));
        CHECK(v == 2 * i);
        v = 0;
        CHECK_OK(weft_coroutine_pop(co, &v, sizeof v));
        CHECK(v == 2 * i);
    }
    CHECK_OK(weft_coroutine_destroy(co));
}

static void storage_limits_are_checked(void) {
    weft_coroutine_desc d = weft_coroutine_desc_init(empty_body, 0);
    d.storage_size = 16;
    weft_coroutine co;
    CHECK_OK(weft_coroutine_create(&d, &co));
    size_t n = 0;
    CHECK_OK(weft_coroutine_storage_size(co, &n));
    CHECK(n == 16);
    unsigned char bytes[17] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
    CHECK_RESULT(weft_coroutine_push(co, bytes, 17), WEFT_NOT_ENOUGH_SPACE);
    CHECK_OK(weft_coroutine_bytes_stored(co, &n));
    CHECK(n == 0); /* nothing copied */
    CHECK_OK(weft_coroutine_push(co, bytes, 10));
    CHECK_RESULT(weft_coroutine_push(co, bytes, 7), WEFT_NOT_ENOUGH_SPACE);
    CHECK_OK(weft_coroutine_push(co, bytes, 6));
    CHECK_OK(weft_coroutine_push(co, bytes, 0)); /* nothing, always fits */
    CHECK_OK(weft_coroutine_push(co, NULL, 0));
    CHECK_RESULT(weft_coroutine_push(co, NULL, 1), WEFT_INVALID_ARGUMENT);
    unsigned char out[17];
    CHECK_RESULT(weft_coroutine_pop(co, out, 17), WEFT_NOT_ENOUGH_SPACE);
    CHECK_RESULT(weft_coroutine_peek(co, out, 17), WEFT_NOT_ENOUGH_SPACE);
    CHECK_RESULT(weft_coroutine_peek(co, NULL, 1), WEFT_INVALID_ARGUMENT);
    CHECK_OK(weft_coroutine_pop(co, out, 6)); /* the top: bytes 1..6 of the second push */
    CHECK(memcmp(out, bytes, 6) == 0);
    CHECK_OK(weft_coroutine_pop(co, NULL, 4)); /* discarded */
    CHECK_OK(weft_coroutine_bytes_stored(co, &n));
    CHECK(n == 6);
    CHECK_OK(weft_coroutine_pop(co, out, 6));
    CHECK(memcmp(out, bytes, 6) == 0);
    CHECK_RESULT(weft_coroutine_pop(co, out, 1), WEFT_NOT_ENOUGH_SPACE);
    CHECK_RESULT(weft_coroutine_bytes_stored(co, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_coroutine_storage_size(co, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_OK(weft_coroutine_destroy(co));

    d.storage_size = 0;
    CHECK_OK(weft_coroutine_create(&d, &co));
    CHECK_RESULT(weft_coroutine_push(co, bytes, 1), WEFT_NOT_ENOUGH_SPACE);
    CHECK_OK(weft_coroutine_destroy(co));
}

/* ---- destroy --------------------------------------------------------------- */

struct cleanup_record {
    int yields_ok;
    weft_result ended_with;
    weft_result yield_after_cancel;
    int saw_user_data;
    int cleaned_up;
};

static void cleaning_body(weft_coroutine co) {
    struct cleanup_record* rec = NULL;
    CHECK_OK(weft_coroutine_user_data(co, (void**)&rec));
    weft_result r;
    while ((r = weft_coroutine_yield(co)) == WEFT_OK) ++rec->yields_ok;
    rec->ended_with = r;
    /* Still a valid handle while it is being destroyed: */
    void* p = NULL;
    rec->saw_user_data = weft_coroutine_user_data(co, &p) == WEFT_OK && p == rec;
    rec->yield_after_cancel = weft_coroutine_yield(co); /* returns at once */
    int v = 7;
    CHECK_OK(weft_coroutine_push(co, &v, sizeof v));
    rec->cleaned_up = 1;
}

static void destroying_a_suspended_coroutine_ends_its_yield_with_canceled(void) {
    struct cleanup_record rec = {0, WEFT_OK, WEFT_OK, 0, 0};
    weft_coroutine_desc d = weft_coroutine_desc_init(cleaning_body, 0);
    d.user_data = &rec;
    weft_coroutine co;
    CHECK_OK(weft_coroutine_create(&d, &co));
    CHECK_OK(weft_coroutine_resume(co));
    CHECK_OK(weft_coroutine_resume(co));
    CHECK_OK(weft_coroutine_resume(co));
    CHECK(rec.yields_ok == 2);
    CHECK_OK(weft_coroutine_destroy(co));
    CHECK(rec.ended_with == WEFT_CANCELED);
    CHECK(rec.yield_after_cancel == WEFT_CANCELED);
    CHECK(rec.saw_user_data);
    CHECK(rec.cleaned_up);
    CHECK_RESULT(weft_coroutine_destroy(co), WEFT_INVALID_HANDLE);
}

static int created_body_ran;
static void flagging_body(weft_coroutine co) {
    (void)co;
    created_body_ran = 1;
}

static void destroying_a_created_coroutine_never_runs_its_body(void) {
    created_body_ran = 0;
    weft_coroutine_desc d = weft_coroutine_desc_init(flagging_body, 0);
    weft_coroutine co;
    CHECK_OK(weft_coroutine_create(&d, &co));
    CHECK_OK(weft_coroutine_destroy(co));
    CHECK(created_body_ran == 0);
}

static void stale_zero_and_foreign_handles_are_refused(void) {
    weft_coroutine_desc d = weft_coroutine_desc_init(empty_body, 0);
    weft_coroutine co;
    CHECK_OK(weft_coroutine_create(&d, &co));
    CHECK_OK(weft_coroutine_destroy(co));
    weft_coroutine_state st;
    void* p;
    size_t n;
    int v = 1;
    CHECK_RESULT(weft_coroutine_resume(co), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_coroutine_yield(co), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_coroutine_status(co, &st), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_coroutine_user_data(co, &p), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_coroutine_push(co, &v, sizeof v), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_coroutine_pop(co, &v, sizeof v), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_coroutine_peek(co, &v, sizeof v), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_coroutine_bytes_stored(co, &n), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_coroutine_storage_size(co, &n), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_coroutine_destroy(co), WEFT_INVALID_HANDLE);
    /* The slot's next tenant has another handle; the old one stays stale. */
    weft_coroutine co2;
    CHECK_OK(weft_coroutine_create(&d, &co2));
    CHECK(co2.id != co.id);
    CHECK_RESULT(weft_coroutine_resume(co), WEFT_INVALID_HANDLE);
    /* A zero handle; a handle of another kind; a made-up one. */
    weft_coroutine zero = {0};
    CHECK_RESULT(weft_coroutine_resume(zero), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_coroutine_destroy(zero), WEFT_INVALID_ARGUMENT);
    weft_mutex m;
    CHECK_OK(weft_mutex_create(&m));
    weft_coroutine foreign = {m.id};
    CHECK_RESULT(weft_coroutine_resume(foreign), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_coroutine_destroy(foreign), WEFT_INVALID_HANDLE);
    CHECK_OK(weft_mutex_destroy(m));
    weft_coroutine made_up = {0x1234567800000fffull};
    CHECK_RESULT(weft_coroutine_status(made_up, &st), WEFT_INVALID_HANDLE);
    CHECK_OK(weft_coroutine_destroy(co2));
}

/* ---- errors from C++ bodies and stacks ----------------------------------- */

static void a_cpp_exception_escaping_the_body_is_callback_failed(void) {
    weft_coroutine_desc d = weft_coroutine_desc_init(weft_test_throwing_coroutine, 0);
    weft_coroutine co;
    CHECK_OK(weft_coroutine_create(&d, &co));
    CHECK_OK(weft_coroutine_resume(co));                         /* to its yield */
    CHECK_RESULT(weft_coroutine_resume(co), WEFT_CALLBACK_FAILED); /* it throws */
    weft_coroutine_state st;
    CHECK_OK(weft_coroutine_status(co, &st));
    CHECK(st == WEFT_COROUTINE_DEAD);
    CHECK_RESULT(weft_coroutine_resume(co), WEFT_WRONG_STATE);
    CHECK_OK(weft_coroutine_destroy(co));
}

static void an_impossible_stack_is_a_stack_error(void) {
    weft_coroutine_desc d = weft_coroutine_desc_init(empty_body, SIZE_MAX - 100); /* overflows the size arithmetic: nothing is mapped */
    weft_coroutine co = {0};
    weft_result r = weft_coroutine_create(&d, &co);
    CHECK_RESULT(r, WEFT_STACK_ERROR);
    CHECK(co.id == 0);
}

/* ---- threads --------------------------------------------------------------- */

static atomic_int spin_phase;

static void spinning_body(weft_coroutine co) {
    atomic_store(&spin_phase, 1);
    while (atomic_load(&spin_phase) != 2) sched_yield(); /* valgrind runs one thread at a time */
    CHECK_OK(weft_coroutine_yield(co));
}

static void* resume_on_thread(void* arg) {
    weft_coroutine co = *(weft_coroutine*)arg;
    CHECK_OK(weft_coroutine_resume(co));
    return NULL;
}

static void a_coroutine_running_on_another_thread_is_wrong_thread(void) {
    atomic_store(&spin_phase, 0);
    weft_coroutine_desc d = weft_coroutine_desc_init(spinning_body, 0);
    weft_coroutine co;
    CHECK_OK(weft_coroutine_create(&d, &co));
    pthread_t th;
    CHECK(pthread_create(&th, NULL, resume_on_thread, &co) == 0);
    while (atomic_load(&spin_phase) != 1) sched_yield(); /* valgrind runs one thread at a time */
    CHECK_RESULT(weft_coroutine_resume(co), WEFT_WRONG_THREAD);
    CHECK_RESULT(weft_coroutine_destroy(co), WEFT_WRONG_THREAD);
    CHECK_RESULT(weft_coroutine_yield(co), WEFT_NOT_IN_COROUTINE);
    weft_coroutine_state st;
    CHECK_OK(weft_coroutine_status(co, &st));
    CHECK(st == WEFT_COROUTINE_RUNNING);
    atomic_store(&spin_phase, 2);
    CHECK(pthread_join(th, NULL) == 0);
    /* Suspended now: it may be resumed here, on another thread. */
    CHECK_OK(weft_coroutine_resume(co));
    CHECK_OK(weft_coroutine_status(co, &st));
    CHECK(st == WEFT_COROUTINE_DEAD);
    CHECK_OK(weft_coroutine_destroy(co));
}

int main(void) {
    RUN(result_str_names_every_code_and_unknown_values);
    RUN(now_is_monotonic_and_checks_its_argument);
    RUN(desc_init_fills_defaults);
    RUN(create_rejects_null_arguments);
    RUN(own_fp_env_keeps_the_coroutines_rounding_mode_and_shared_does_not);
    RUN(resume_runs_the_body_between_yields_until_it_is_dead);
    RUN(status_tells_running_from_normal_and_misuse_inside_is_refused);
    RUN(yield_and_running_outside_a_coroutine_are_refused);
    RUN(push_and_pop_pass_bytes_both_ways);
    RUN(storage_limits_are_checked);
    RUN(destroying_a_suspended_coroutine_ends_its_yield_with_canceled);
    RUN(destroying_a_created_coroutine_never_runs_its_body);
    RUN(stale_zero_and_foreign_handles_are_refused);
    RUN(a_cpp_exception_escaping_the_body_is_callback_failed);
    RUN(an_impossible_stack_is_a_stack_error);
    RUN(a_coroutine_running_on_another_thread_is_wrong_thread);
    printf("coroutine_test: %d tests passed\n", c_tests_passed);
    return 0;
}
