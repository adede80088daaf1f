/* 13_c_api.c: weft from C, through <weft/weft.h>.
 *
 * The C API wraps weft's coroutines, runtime, channels, mutexes and
 * condition variables (docs/c-api.md is the reference). Its rules, which
 * this example shows one by one:
 *   - every call returns a weft_result; weft_result_str() names it;
 *   - objects are named by handles (small structs): a destroyed object's
 *     handle is refused with WEFT_INVALID_HANDLE, never a crash;
 *   - deadlines are absolute nanoseconds of CLOCK_MONOTONIC (weft_now());
 *   - a canceled task is not unwound through C: its blocking calls return
 *     WEFT_CANCELED and the task body returns by itself.
 *
 * The parts:
 *   1. a coroutine that passes bytes back and forth with its resumer;
 *   2. destroying a suspended coroutine: its yield returns WEFT_CANCELED;
 *   3. tasks on two worker threads: producers, one consumer, a channel;
 *   4. cancellation and deadlines;
 *   5. a mutex and a condition variable between a task and the main thread. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <weft/weft.h>

static int failures = 0;
static void check(int ok, const char* what) {
    if (!ok) {
        printf("  FAILED: %s\n", what);
        ++failures;
    }
}

/* ---- 1. a coroutine with storage -----------------------------------------
 * A coroutine's storage is a small byte stack shared by the resumer and the
 * body (minicoro's idea): push before resume, pop inside; push inside, pop
 * after. Here the body squares whatever it is given. */
static void squarer(weft_coroutine co) {
    for (;;) {
        int x;
        if (weft_coroutine_pop(co, &x, sizeof x) != WEFT_OK) return;
        x *= x;
        weft_coroutine_push(co, &x, sizeof x);
        if (weft_coroutine_yield(co) != WEFT_OK) return; /* WEFT_CANCELED: being destroyed */
    }
}

/* ---- 2. what destroy does to a suspended coroutine ------------------------
 * C has no destructors, so weft does not unwind C frames: the pending yield
 * returns WEFT_CANCELED and the body cleans up and returns. */
struct resource {
    int open;
};
static void holder(weft_coroutine co) {
    struct resource* r;
    weft_coroutine_user_data(co, (void**)&r);
    r->open = 1;
    while (weft_coroutine_yield(co) == WEFT_OK) {
    }
    r->open = 0; /* our "destructor" */
}

/* ---- 3. producers and a consumer on worker threads -------------------------- */
enum { producers = 3, per_producer = 1000 };
struct pipeline {
    weft_channel numbers;
    atomic_int next;
    long sum;
};
static void produce(void* arg) {
    struct pipeline* p = arg;
    int base = atomic_fetch_add(&p->next, 1) * per_producer;
    for (int i = 1; i <= per_producer; ++i) {
        int v = base + i;
        weft_channel_send(p->numbers, &v, WEFT_NO_DEADLINE); /* waits while full */
    }
}
static void consume(void* arg) {
    struct pipeline* p = arg;
    int v;
    while (weft_channel_recv(p->numbers, &v, WEFT_NO_DEADLINE) == WEFT_OK) p->sum += v;
    /* WEFT_CLOSED: closed and drained. */
}

/* ---- 4. cancellation ------------------------------------------------------ */
struct waiter_report {
    weft_result recv;
    int cleaned_up;
};
static void wait_forever(void* arg) {
    struct waiter_report* w = arg;
    weft_channel never;
    weft_channel_create(sizeof(int), 0, &never);
    int v;
    w->recv = weft_channel_recv(never, &v, WEFT_NO_DEADLINE); /* WEFT_CANCELED */
    weft_channel_destroy(never);                             /* cleanup runs */
    w->cleaned_up = 1;
}

/* ---- 5. a mutex and a condition variable ------------------------------------ */
struct mailbox {
    weft_mutex m;
    weft_cond c;
    int full;
    int value;
};
static void post(void* arg) {
    struct mailbox* b = arg;
    weft_sleep(1000000); /* 1 ms, so that main is likely waiting */
    weft_mutex_lock(b->m);
    b->value = 42;
    b->full = 1;
    weft_cond_signal(b->c);
    weft_mutex_unlock(b->m);
}

int main(void) {
    /* 1. */
    weft_coroutine_desc d = weft_coroutine_desc_init(squarer, 0); /* default stack */
    weft_coroutine co;
    if (weft_coroutine_create(&d, &co) != WEFT_OK) return 1;
    for (int i = 1; i <= 4; ++i) {
        int x = i;
        weft_coroutine_push(co, &x, sizeof x);
        weft_coroutine_resume(co);
        weft_coroutine_pop(co, &x, sizeof x);
        printf("1. %d squared is %d\n", i, x);
        check(x == i * i, "the coroutine squares");
    }
    weft_coroutine_destroy(co);
    /* The handle is stale now: every call says so. */
    weft_result r = weft_coroutine_resume(co);
    printf("1. resume after destroy: %s\n", weft_result_str(r));
    check(r == WEFT_INVALID_HANDLE, "a destroyed handle is refused");

    /* 2. */
    struct resource res = {0};
    d = weft_coroutine_desc_init(holder, 0);
    d.user_data = &res;
    weft_coroutine_create(&d, &co);
    weft_coroutine_resume(co);
    check(res.open == 1, "the body opened its resource");
    weft_coroutine_destroy(co); /* the body runs to its end, here */
    printf("2. after destroy the body had cleaned up: %s\n", res.open == 0 ? "yes" : "no");
    check(res.open == 0, "destroy let the body clean up");

    /* 3. */
    weft_runtime_options ro = weft_runtime_options_init();
    ro.workers = 2;
    weft_runtime rt;
    if (weft_runtime_create(&ro, &rt) != WEFT_OK) return 1;
    struct pipeline p;
    p.next = 0;
    p.sum = 0;
    weft_channel_create(sizeof(int), 16, &p.numbers);
    weft_task consumer, ps[producers];
    weft_runtime_spawn(rt, consume, &p, NULL, &consumer);
    for (int i = 0; i < producers; ++i) weft_runtime_spawn(rt, produce, &p, NULL, &ps[i]);
    for (int i = 0; i < producers; ++i) weft_task_join(ps[i], WEFT_NO_DEADLINE);
    weft_channel_close(p.numbers); /* the consumer drains, then sees WEFT_CLOSED */
    weft_task_join(consumer, WEFT_NO_DEADLINE);
    const long n = producers * per_producer;
    printf("3. the consumer summed %ld numbers: %ld\n", n, p.sum);
    check(p.sum == n * (n + 1) / 2, "every number arrived once");
    weft_channel_destroy(p.numbers);

    /* 4. A join with a deadline that passes says WEFT_TIMED_OUT and keeps the
     *    handle; cancel makes the task's recv return WEFT_CANCELED; its body
     *    cleans up and returns; the join says WEFT_CANCELED. */
    struct waiter_report w = {WEFT_OK, 0};
    weft_task t;
    weft_runtime_spawn(rt, wait_forever, &w, NULL, &t);
    int64_t now;
    weft_now(&now);
    r = weft_task_join(t, now + 5 * 1000000);
    printf("4. join with a 5 ms deadline: %s\n", weft_result_str(r));
    check(r == WEFT_TIMED_OUT, "the join timed out");
    weft_task_cancel(t);
    r = weft_task_join(t, WEFT_NO_DEADLINE);
    printf("4. after cancel, join: %s; the task's recv: %s\n", weft_result_str(r), weft_result_str(w.recv));
    check(r == WEFT_CANCELED && w.recv == WEFT_CANCELED && w.cleaned_up, "canceled, cleanly");

    /* 5. The main thread (not a task) waits on a condition variable for a
     *    task; a waiting thread blocks, a waiting task would suspend. */
    struct mailbox b = {{0}, {0}, 0, 0};
    weft_mutex_create(&b.m);
    weft_cond_create(&b.c);
    weft_runtime_spawn(rt, post, &b, NULL, NULL); /* NULL: detached */
    weft_mutex_lock(b.m);
    while (!b.full) weft_cond_wait(b.c, b.m);
    weft_mutex_unlock(b.m);
    printf("5. the mailbox holds %d\n", b.value);
    check(b.value == 42, "the task posted");
    weft_cond_destroy(b.c);
    weft_mutex_destroy(b.m);

    weft_runtime_destroy(rt); /* cancels what is left, then stops the workers */
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
