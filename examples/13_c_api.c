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
 *   5. a mutex and a condition variable between a task and the main thread;
 *   6. a server that drains on SIGTERM: a task waits for the signal and
 *      closes the listener, then weft_runtime_shutdown() lets the requests
 *      in flight finish (with a deadline); and weft_last_error(), which says
 *      why a call refused its arguments. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* ---- 6. a draining server --------------------------------------------------- */
struct server {
    weft_listener l;
    atomic_int served;
};
static void serve_one(void* arg) { /* one connection: echo a byte back */
    weft_stream* s = arg;
    char c;
    size_t got;
    if (weft_stream_read_exact(*s, &c, 1, WEFT_NO_DEADLINE, &got) == WEFT_OK)
        weft_stream_write_all(*s, &c, 1, WEFT_NO_DEADLINE, NULL);
    weft_stream_destroy(*s);
    free(s);
}
static void accept_loop(void* arg) {
    struct server* sv = arg;
    weft_stream* s = malloc(sizeof *s);
    while (s && weft_listener_accept(sv->l, WEFT_NO_DEADLINE, s) == WEFT_OK) { /* WEFT_CLOSED ends it */
        atomic_fetch_add(&sv->served, 1);
        weft_spawn(serve_one, s, NULL, NULL);
        s = malloc(sizeof *s);
    }
    free(s);
}
static void close_on_sigterm(void* arg) {
    weft_signal_set* set = arg;
    int sig;
    if (weft_signal_set_wait(*set, WEFT_NO_DEADLINE, &sig) == WEFT_OK) printf("6. got signal %d: draining\n", sig);
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

    /* 6. */
    weft_runtime_create(&ro, &rt);
    const int term[] = {SIGTERM};
    weft_signal_set sigs;
    weft_signal_set_create(term, 1, &sigs);
    struct server sv;
    atomic_init(&sv.served, 0);
    weft_tcp_listen("127.0.0.1", 0, 0, &sv.l);
    uint16_t port;
    weft_listener_port(sv.l, &port);
    weft_task watcher;
    weft_runtime_spawn(rt, close_on_sigterm, &sigs, NULL, &watcher);
    weft_runtime_spawn(rt, accept_loop, &sv, NULL, NULL);
    weft_stream c;
    r = weft_tcp_connect("localhost", port, WEFT_NO_DEADLINE, &c); /* a name: refused, and why */
    printf("6. %s\n   weft_last_error(): %s\n", weft_result_str(r), weft_last_error());
    weft_address a[4];
    size_t found = 0;
    weft_resolve("localhost", NULL, a, 4, &found); /* "127.0.0.1", perhaps "::1" too */
    char byte = 'x';
    weft_now(&now);
    size_t i = 0;
    while (i < found && weft_tcp_connect(a[i].ip, port, now + 1000 * 1000000LL, &c) != WEFT_OK) ++i;
    check(i < found, "connected to a resolved address");
    weft_stream_write_all(c, &byte, 1, now + 1000 * 1000000LL, NULL);
    weft_stream_read_exact(c, &byte, 1, now + 1000 * 1000000LL, NULL);
    weft_stream_destroy(c);
    kill(getpid(), SIGTERM);                  /* as `kill <pid>` would */
    weft_task_join(watcher, WEFT_NO_DEADLINE); /* the signal came */
    weft_listener_close(sv.l);                 /* the accept loop ends */
    weft_now(&now);
    size_t left = 99;
    weft_runtime_shutdown(rt, now + 1000 * 1000000LL, &left); /* drain, 1 s at most */
    printf("6. served %d, echoed '%c', %zu task(s) left at the deadline\n", atomic_load(&sv.served), byte, left);
    check(atomic_load(&sv.served) == 1 && byte == 'x' && left == 0, "the server drained");
    weft_runtime_destroy(rt);
    weft_listener_destroy(sv.l);
    check(weft_signal_set_destroy(sigs) == WEFT_OK, "the signal set is destroyed");

    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
