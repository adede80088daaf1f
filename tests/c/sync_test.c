/* sync_test.c: the C API's channels, mutexes and condition variables, every
 * call and its misuses, between tasks (0 and 2 workers) and plain threads,
 * built as C11. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "c_test.h"

/* ---- channels -------------------------------------------------------------- */

static void channel_create_checks_its_arguments(void) {
    weft_channel ch;
    CHECK_RESULT(weft_channel_create(0, 4, &ch), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_channel_create(4, 4, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_OK(weft_channel_create(sizeof(int), 2, &ch));
    int v = 1;
    CHECK_RESULT(weft_channel_send(ch, NULL, WEFT_NO_DEADLINE), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_channel_recv(ch, NULL, WEFT_NO_DEADLINE), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_channel_send(ch, &v, -2), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_channel_recv(ch, &v, -2), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_channel_try_send(ch, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_channel_try_recv(ch, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_channel_size(ch, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_OK(weft_channel_destroy(ch));
    /* Stale now. */
    size_t n;
    CHECK_RESULT(weft_channel_send(ch, &v, WEFT_NO_DEADLINE), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_channel_recv(ch, &v, WEFT_NO_DEADLINE), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_channel_try_send(ch, &v), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_channel_try_recv(ch, &v), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_channel_close(ch), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_channel_size(ch, &n), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_channel_destroy(ch), WEFT_INVALID_HANDLE);
    weft_channel zero = {0};
    CHECK_RESULT(weft_channel_close(zero), WEFT_INVALID_ARGUMENT);
}

static void try_send_and_try_recv_keep_order_and_never_wait(void) {
    weft_channel ch;
    CHECK_OK(weft_channel_create(sizeof(int), 2, &ch));
    int a = 1, b = 2, c = 3, v = 0;
    CHECK_RESULT(weft_channel_try_recv(ch, &v), WEFT_WOULD_BLOCK);
    CHECK_OK(weft_channel_try_send(ch, &a));
    CHECK_OK(weft_channel_try_send(ch, &b));
    CHECK_RESULT(weft_channel_try_send(ch, &c), WEFT_WOULD_BLOCK);
    size_t n = 0;
    CHECK_OK(weft_channel_size(ch, &n));
    CHECK(n == 2);
    CHECK_OK(weft_channel_try_recv(ch, &v));
    CHECK(v == 1);
    CHECK_OK(weft_channel_try_recv(ch, &v));
    CHECK(v == 2);
    CHECK_RESULT(weft_channel_try_recv(ch, &v), WEFT_WOULD_BLOCK);
    CHECK_OK(weft_channel_destroy(ch));
}

struct big {
    unsigned char bytes[100]; /* above the in-place size: stored on the heap */
};

static void values_of_any_size_and_pointers_travel_intact(void) {
    weft_channel ch;
    CHECK_OK(weft_channel_create(sizeof(struct big), WEFT_CHANNEL_UNBOUNDED, &ch));
    for (int i = 0; i < 50; ++i) {
        struct big b;
        memset(b.bytes, i, sizeof b.bytes);
        CHECK_OK(weft_channel_send(ch, &b, WEFT_NO_DEADLINE)); /* unbounded: never waits */
    }
    for (int i = 0; i < 50; ++i) {
        struct big b;
        CHECK_OK(weft_channel_recv(ch, &b, WEFT_NO_DEADLINE));
        CHECK(b.bytes[0] == i && b.bytes[99] == i);
    }
    CHECK_OK(weft_channel_send(ch, &(struct big){{0}}, WEFT_NO_DEADLINE)); /* dropped at destroy */
    CHECK_OK(weft_channel_destroy(ch));

    CHECK_OK(weft_channel_create(sizeof(void*), 1, &ch));
    int target = 5;
    void* p = &target;
    void* q = NULL;
    CHECK_OK(weft_channel_send(ch, &p, WEFT_NO_DEADLINE));
    CHECK_OK(weft_channel_recv(ch, &q, WEFT_NO_DEADLINE));
    CHECK(q == &target);
    CHECK_OK(weft_channel_destroy(ch));
}

static void a_closed_channel_drains_then_reports_closed(void) {
    weft_channel ch;
    CHECK_OK(weft_channel_create(sizeof(int), 4, &ch));
    int v = 9;
    CHECK_OK(weft_channel_send(ch, &v, WEFT_NO_DEADLINE));
    CHECK_OK(weft_channel_close(ch));
    CHECK_OK(weft_channel_close(ch)); /* twice */
    CHECK_RESULT(weft_channel_send(ch, &v, WEFT_NO_DEADLINE), WEFT_CLOSED);
    CHECK_RESULT(weft_channel_try_send(ch, &v), WEFT_CLOSED);
    v = 0;
    CHECK_OK(weft_channel_recv(ch, &v, WEFT_NO_DEADLINE));
    CHECK(v == 9);
    CHECK_RESULT(weft_channel_recv(ch, &v, WEFT_NO_DEADLINE), WEFT_CLOSED);
    CHECK_RESULT(weft_channel_recv(ch, &v, now_ns() + MS), WEFT_CLOSED);
    CHECK_RESULT(weft_channel_try_recv(ch, &v), WEFT_CLOSED);
    CHECK_OK(weft_channel_destroy(ch));
}

static void deadlines_time_out_never_early_on_a_plain_thread(void) {
    weft_channel ch;
    CHECK_OK(weft_channel_create(sizeof(int), 1, &ch));
    int v = 1;
    int64_t t0 = now_ns();
    CHECK_RESULT(weft_channel_recv(ch, &v, t0 + 2 * MS), WEFT_TIMED_OUT);
    CHECK(now_ns() - t0 >= 2 * MS);
    CHECK_OK(weft_channel_send(ch, &v, t0)); /* room: a passed deadline does not matter */
    t0 = now_ns();
    CHECK_RESULT(weft_channel_send(ch, &v, t0 + 2 * MS), WEFT_TIMED_OUT);
    CHECK(now_ns() - t0 >= 2 * MS);
    CHECK_RESULT(weft_channel_send(ch, &v, 0), WEFT_TIMED_OUT); /* long passed */
    CHECK_OK(weft_channel_recv(ch, &v, 0));
    CHECK_OK(weft_channel_destroy(ch));
}

static atomic_int recv_thread_started;

static void* recv_on_thread(void* arg) {
    int v;
    weft_channel ch = *(weft_channel*)arg;
    atomic_store(&recv_thread_started, 1);
    /* CLOSED when it waited before the destroy (the usual case: it has 20 ms
     * to get there); INVALID_HANDLE if it came after. Never a hang. */
    weft_result r = weft_channel_recv(ch, &v, WEFT_NO_DEADLINE);
    CHECK(r == WEFT_CLOSED || r == WEFT_INVALID_HANDLE);
    return NULL;
}

static void destroying_a_channel_wakes_its_waiters_with_closed(void) {
    weft_channel ch;
    CHECK_OK(weft_channel_create(sizeof(int), 0, &ch));
    pthread_t th;
    CHECK(pthread_create(&th, NULL, recv_on_thread, &ch) == 0);
    while (!atomic_load(&recv_thread_started)) sched_yield(); /* valgrind runs one thread at a time */
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    CHECK_OK(weft_channel_destroy(ch));
    CHECK(pthread_join(th, NULL) == 0);
}

/* Ping-pong: a pointer to a counter goes back and forth on two rendezvous
 * channels; each side increments it. */
struct pingpong {
    weft_channel there, back;
    int rounds;
};

static void ponger(void* arg) {
    struct pingpong* pp = arg;
    for (;;) {
        int* counter = NULL;
        weft_result r = weft_channel_recv(pp->there, &counter, WEFT_NO_DEADLINE);
        if (r == WEFT_CLOSED) return;
        CHECK_OK(r);
        ++*counter;
        CHECK_OK(weft_channel_send(pp->back, &counter, WEFT_NO_DEADLINE));
    }
}

static void pinger(void* arg) {
    struct pingpong* pp = arg;
    int counter = 0;
    int* p = &counter;
    for (int i = 0; i < pp->rounds; ++i) {
        CHECK_OK(weft_channel_send(pp->there, &p, WEFT_NO_DEADLINE));
        int* got = NULL;
        CHECK_OK(weft_channel_recv(pp->back, &got, WEFT_NO_DEADLINE));
        CHECK(got == &counter);
        ++counter;
    }
    CHECK(counter == 2 * pp->rounds);
    CHECK_OK(weft_channel_close(pp->there));
}

static void ping_pong_between_tasks_with(unsigned workers) {
    weft_runtime rt = make_runtime(workers);
    struct pingpong pp;
    pp.rounds = 1000;
    CHECK_OK(weft_channel_create(sizeof(int*), 0, &pp.there));
    CHECK_OK(weft_channel_create(sizeof(int*), 0, &pp.back));
    weft_task pong;
    CHECK_OK(weft_runtime_spawn(rt, ponger, &pp, NULL, &pong));
    CHECK_OK(weft_runtime_block_on(rt, pinger, &pp, NULL));
    if (workers == 0) CHECK_OK(weft_runtime_run_once(rt, NULL));
    CHECK_OK(weft_task_join(pong, WEFT_NO_DEADLINE));
    CHECK_OK(weft_channel_destroy(pp.there));
    CHECK_OK(weft_channel_destroy(pp.back));
    CHECK_OK(weft_runtime_destroy(rt));
}
static void ping_pong_between_tasks_0_workers(void) { ping_pong_between_tasks_with(0); }
static void ping_pong_between_tasks_2_workers(void) { ping_pong_between_tasks_with(2); }

enum { producers = 4, per_producer = 10000 };

struct fan_in {
    weft_channel ch;
    atomic_int next_id;
    int64_t sum;
    int received;
};

static void producer(void* arg) {
    struct fan_in* f = arg;
    int base = atomic_fetch_add(&f->next_id, 1) * per_producer;
    for (int i = 1; i <= per_producer; ++i) {
        int v = base + i;
        CHECK_OK(weft_channel_send(f->ch, &v, WEFT_NO_DEADLINE));
    }
}

static void consumer(void* arg) {
    struct fan_in* f = arg;
    int v;
    weft_result r;
    while ((r = weft_channel_recv(f->ch, &v, WEFT_NO_DEADLINE)) == WEFT_OK) {
        f->sum += v;
        ++f->received;
    }
    CHECK(r == WEFT_CLOSED);
}

static void many_producers_one_consumer_on_2_workers(void) {
    weft_runtime rt = make_runtime(2);
    struct fan_in f;
    f.next_id = 0;
    f.sum = 0;
    f.received = 0;
    CHECK_OK(weft_channel_create(sizeof(int), 64, &f.ch));
    weft_task ps[producers], c;
    CHECK_OK(weft_runtime_spawn(rt, consumer, &f, NULL, &c));
    for (int i = 0; i < producers; ++i) CHECK_OK(weft_runtime_spawn(rt, producer, &f, NULL, &ps[i]));
    for (int i = 0; i < producers; ++i) CHECK_OK(weft_task_join(ps[i], WEFT_NO_DEADLINE));
    CHECK_OK(weft_channel_close(f.ch));
    CHECK_OK(weft_task_join(c, WEFT_NO_DEADLINE));
    const int64_t total = (int64_t)producers * per_producer;
    CHECK(f.received == total);
    CHECK(f.sum == total * (total + 1) / 2);
    CHECK_OK(weft_channel_destroy(f.ch));
    CHECK_OK(weft_runtime_destroy(rt));
}

static void sending_task(void* arg) {
    weft_channel ch = *(weft_channel*)arg;
    for (int i = 0; i < 100; ++i) CHECK_OK(weft_channel_send(ch, &i, WEFT_NO_DEADLINE));
}

static void a_plain_thread_receives_from_a_task(void) {
    weft_runtime rt = make_runtime(2);
    weft_channel ch;
    CHECK_OK(weft_channel_create(sizeof(int), 0, &ch));
    weft_task t;
    CHECK_OK(weft_runtime_spawn(rt, sending_task, &ch, NULL, &t));
    for (int i = 0; i < 100; ++i) {
        int v = -1;
        CHECK_OK(weft_channel_recv(ch, &v, WEFT_NO_DEADLINE));
        CHECK(v == i);
    }
    CHECK_OK(weft_task_join(t, WEFT_NO_DEADLINE));
    CHECK_OK(weft_channel_destroy(ch));
    CHECK_OK(weft_runtime_destroy(rt));
}

/* A cancellation racing a send on a rendezvous channel: the value is either
 * delivered (recv and send both WEFT_OK) or not at all (recv WEFT_CANCELED,
 * send WEFT_TIMED_OUT); never received and reported lost, or the reverse. */
struct race {
    weft_channel ch;
    weft_task t;
    weft_result recv;
    int value;
    atomic_int started;
};

static void racing_receiver(void* arg) {
    struct race* r = arg;
    atomic_store(&r->started, 1);
    r->recv = weft_channel_recv(r->ch, &r->value, WEFT_NO_DEADLINE);
}

static void* cancel_on_thread(void* arg) {
    struct race* r = arg;
    CHECK_OK(weft_task_cancel(r->t));
    return NULL;
}

static void a_cancellation_racing_a_send_loses_or_delivers_the_value_whole(void) {
    weft_runtime rt = make_runtime(2);
    int delivered = 0, canceled = 0;
    for (int i = 0; i < 100; ++i) {
        struct race r;
        memset(&r, 0, sizeof r);
        r.recv = WEFT_UNKNOWN_ERROR;
        CHECK_OK(weft_channel_create(sizeof(int), 0, &r.ch));
        CHECK_OK(weft_runtime_spawn(rt, racing_receiver, &r, NULL, &r.t));
        while (!atomic_load(&r.started)) sched_yield(); /* valgrind runs one thread at a time */
        /* Every third round cancels and lets the task end before sending
         * (the canceled path, surely: no sender was there while it waited);
         * the others cancel from a thread while this one sends. A canceled
         * task may still take a value that needs no wait (a sender already
         * waiting): cancellation acts at waits only. */
        pthread_t th;
        weft_result joined = WEFT_UNKNOWN_ERROR;
        if (i % 3 == 0) {
            CHECK_OK(weft_task_cancel(r.t));
            joined = weft_task_join(r.t, WEFT_NO_DEADLINE);
        } else {
            CHECK(pthread_create(&th, NULL, cancel_on_thread, &r) == 0);
        }
        int v = 1000 + i;
        weft_result sent = weft_channel_send(r.ch, &v, now_ns() + 2 * MS);
        if (i % 3 != 0) {
            CHECK(pthread_join(th, NULL) == 0);
            joined = weft_task_join(r.t, WEFT_NO_DEADLINE);
        }
        if (sent == WEFT_OK) {
            CHECK(r.recv == WEFT_OK && r.value == v);
            ++delivered;
        } else {
            CHECK_RESULT(sent, WEFT_TIMED_OUT);
            CHECK_RESULT(r.recv, WEFT_CANCELED);
            CHECK_RESULT(joined, WEFT_CANCELED);
            ++canceled;
        }
        CHECK(joined == WEFT_OK || joined == WEFT_CANCELED);
        CHECK_OK(weft_channel_destroy(r.ch));
    }
    printf("  delivered %d, canceled %d\n", delivered, canceled);
    CHECK(delivered + canceled == 100);
    CHECK(canceled >= 34); /* the rounds that cancel first */
    CHECK_OK(weft_runtime_destroy(rt));
}

/* ---- mutex ----------------------------------------------------------------- */

static void mutex_calls_and_misuse(void) {
    weft_mutex m;
    CHECK_RESULT(weft_mutex_create(NULL), WEFT_INVALID_ARGUMENT);
    CHECK_OK(weft_mutex_create(&m));
    CHECK_RESULT(weft_mutex_unlock(m), WEFT_WRONG_STATE); /* not locked */
    CHECK_OK(weft_mutex_lock(m));
    CHECK_RESULT(weft_mutex_try_lock(m), WEFT_WOULD_BLOCK);
    int64_t t0 = now_ns();
    CHECK_RESULT(weft_mutex_lock_until(m, t0 + 2 * MS), WEFT_TIMED_OUT);
    CHECK(now_ns() - t0 >= 2 * MS);
    CHECK_RESULT(weft_mutex_lock_until(m, -3), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_mutex_destroy(m), WEFT_WRONG_STATE); /* locked: refused, still there */
    CHECK_OK(weft_mutex_unlock(m));
    CHECK_OK(weft_mutex_try_lock(m));
    CHECK_OK(weft_mutex_unlock(m));
    CHECK_OK(weft_mutex_lock_until(m, now_ns() + MS));
    CHECK_OK(weft_mutex_unlock(m));
    CHECK_OK(weft_mutex_lock_until(m, WEFT_NO_DEADLINE));
    CHECK_OK(weft_mutex_unlock(m));
    CHECK_OK(weft_mutex_destroy(m));
    CHECK_RESULT(weft_mutex_lock(m), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_mutex_try_lock(m), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_mutex_lock_until(m, 0), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_mutex_unlock(m), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_mutex_destroy(m), WEFT_INVALID_HANDLE);
    weft_mutex zero = {0};
    CHECK_RESULT(weft_mutex_lock(zero), WEFT_INVALID_ARGUMENT);
}

struct counted {
    weft_mutex m;
    long counter;
};

static void locked_increments(void* arg) {
    struct counted* c = arg;
    for (int i = 0; i < 1000; ++i) {
        CHECK_OK(weft_mutex_lock(c->m));
        long v = c->counter;
        if (i % 100 == 0) CHECK_OK(weft_yield()); /* hold it across a suspension */
        c->counter = v + 1;
        CHECK_OK(weft_mutex_unlock(c->m));
    }
}

static void a_mutex_excludes_tasks_on_2_workers(void) {
    weft_runtime rt = make_runtime(2);
    struct counted c = {{0}, 0};
    CHECK_OK(weft_mutex_create(&c.m));
    weft_task ts[4];
    for (int i = 0; i < 4; ++i) CHECK_OK(weft_runtime_spawn(rt, locked_increments, &c, NULL, &ts[i]));
    for (int i = 0; i < 4; ++i) CHECK_OK(weft_task_join(ts[i], WEFT_NO_DEADLINE));
    CHECK(c.counter == 4000);
    CHECK_OK(weft_mutex_destroy(c.m));
    CHECK_OK(weft_runtime_destroy(rt));
}

struct lock_waiter {
    weft_mutex m;
    weft_result got;
    atomic_int started;
};

static void waits_for_lock(void* arg) {
    struct lock_waiter* w = arg;
    atomic_store(&w->started, 1);
    w->got = weft_mutex_lock(w->m);
}

static void a_task_canceled_while_locking_gets_canceled_without_the_lock(void) {
    weft_runtime rt = make_runtime(2);
    struct lock_waiter w;
    w.got = WEFT_OK;
    w.started = 0;
    CHECK_OK(weft_mutex_create(&w.m));
    CHECK_OK(weft_mutex_lock(w.m));
    weft_task t;
    CHECK_OK(weft_runtime_spawn(rt, waits_for_lock, &w, NULL, &t));
    while (!atomic_load(&w.started)) sched_yield(); /* valgrind runs one thread at a time */
    CHECK_OK(weft_task_cancel(t));
    CHECK_RESULT(weft_task_join(t, WEFT_NO_DEADLINE), WEFT_CANCELED);
    CHECK(w.got == WEFT_CANCELED);
    CHECK_OK(weft_mutex_unlock(w.m));
    CHECK_OK(weft_mutex_try_lock(w.m)); /* nobody else holds it */
    CHECK_OK(weft_mutex_unlock(w.m));
    CHECK_OK(weft_mutex_destroy(w.m));
    CHECK_OK(weft_runtime_destroy(rt));
}

/* ---- condition variable --------------------------------------------------- */

static void cond_calls_and_misuse(void) {
    weft_cond c;
    weft_mutex m;
    CHECK_RESULT(weft_cond_create(NULL), WEFT_INVALID_ARGUMENT);
    CHECK_OK(weft_cond_create(&c));
    CHECK_OK(weft_mutex_create(&m));
    CHECK_RESULT(weft_cond_wait(c, m), WEFT_WRONG_STATE); /* m not locked */
    CHECK_OK(weft_mutex_try_lock(m));                      /* and left unlocked */
    int64_t t0 = now_ns();
    CHECK_RESULT(weft_cond_wait_until(c, m, t0 + 2 * MS), WEFT_TIMED_OUT);
    CHECK(now_ns() - t0 >= 2 * MS);
    CHECK_RESULT(weft_mutex_try_lock(m), WEFT_WOULD_BLOCK); /* locked again */
    CHECK_RESULT(weft_cond_wait_until(c, m, -2), WEFT_INVALID_ARGUMENT);
    CHECK_OK(weft_cond_signal(c));    /* nobody waits: nothing */
    CHECK_OK(weft_cond_broadcast(c));
    weft_cond zero = {0};
    CHECK_RESULT(weft_cond_wait(zero, m), WEFT_INVALID_ARGUMENT);
    weft_mutex mzero = {0};
    CHECK_RESULT(weft_cond_wait(c, mzero), WEFT_INVALID_ARGUMENT);
    CHECK_OK(weft_mutex_unlock(m));
    CHECK_OK(weft_cond_destroy(c));
    CHECK_RESULT(weft_cond_wait(c, m), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_cond_wait_until(c, m, 0), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_cond_signal(c), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_cond_broadcast(c), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_cond_destroy(c), WEFT_INVALID_HANDLE);
    CHECK_OK(weft_mutex_destroy(m));
}

struct gate {
    weft_mutex m;
    weft_cond c;
    int open;
    int woken;
    weft_result canceled_wait;
    atomic_int waiting;
};

static void waits_for_gate(void* arg) {
    struct gate* g = arg;
    CHECK_OK(weft_mutex_lock(g->m));
    atomic_fetch_add(&g->waiting, 1);
    while (!g->open) CHECK_OK(weft_cond_wait(g->c, g->m));
    ++g->woken;
    CHECK_OK(weft_mutex_unlock(g->m));
}

static void init_gate(struct gate* g) {
    memset(g, 0, sizeof *g);
    CHECK_OK(weft_mutex_create(&g->m));
    CHECK_OK(weft_cond_create(&g->c));
}

static void broadcast_and_signal_wake_waiting_tasks_with(unsigned workers) {
    weft_runtime rt = make_runtime(workers);
    struct gate g;
    init_gate(&g);
    weft_task ts[3];
    for (int i = 0; i < 3; ++i) CHECK_OK(weft_runtime_spawn(rt, waits_for_gate, &g, NULL, &ts[i]));
    if (workers == 0) CHECK_OK(weft_runtime_run_once(rt, NULL));
    while (atomic_load(&g.waiting) != 3) sched_yield(); /* valgrind runs one thread at a time */
    CHECK_OK(weft_mutex_lock(g.m));
    g.open = 1;
    CHECK_OK(weft_cond_signal(g.c));
    CHECK_OK(weft_cond_broadcast(g.c));
    CHECK_OK(weft_mutex_unlock(g.m));
    for (int i = 0; i < 3; ++i) {
        if (workers == 0) {
            int done = 0;
            while (!done) {
                CHECK_OK(weft_runtime_run_once(rt, NULL));
                CHECK_OK(weft_task_is_done(ts[i], &done));
            }
        }
        CHECK_OK(weft_task_join(ts[i], WEFT_NO_DEADLINE));
    }
    CHECK(g.woken == 3);
    CHECK_OK(weft_cond_destroy(g.c));
    CHECK_OK(weft_mutex_destroy(g.m));
    CHECK_OK(weft_runtime_destroy(rt));
}
static void broadcast_and_signal_wake_waiting_tasks_0_workers(void) { broadcast_and_signal_wake_waiting_tasks_with(0); }
static void broadcast_and_signal_wake_waiting_tasks_2_workers(void) { broadcast_and_signal_wake_waiting_tasks_with(2); }

static void waits_until_canceled(void* arg) {
    struct gate* g = arg;
    CHECK_OK(weft_mutex_lock(g->m));
    atomic_store(&g->waiting, 1);
    g->canceled_wait = weft_cond_wait(g->c, g->m);
    /* The mutex is held again, also after a cancellation. */
    g->woken = weft_mutex_try_lock(g->m) == WEFT_WOULD_BLOCK;
    CHECK_OK(weft_mutex_unlock(g->m));
}

static void a_task_canceled_in_a_wait_gets_canceled_with_the_mutex_held(void) {
    weft_runtime rt = make_runtime(2);
    struct gate g;
    init_gate(&g);
    weft_task t;
    CHECK_OK(weft_runtime_spawn(rt, waits_until_canceled, &g, NULL, &t));
    while (!atomic_load(&g.waiting)) sched_yield(); /* valgrind runs one thread at a time */
    CHECK_OK(weft_task_cancel(t));
    CHECK_RESULT(weft_task_join(t, WEFT_NO_DEADLINE), WEFT_CANCELED);
    CHECK(g.canceled_wait == WEFT_CANCELED);
    CHECK(g.woken == 1);
    CHECK_OK(weft_mutex_try_lock(g.m)); /* it unlocked */
    CHECK_OK(weft_mutex_unlock(g.m));
    CHECK_OK(weft_cond_destroy(g.c));
    CHECK_OK(weft_mutex_destroy(g.m));
    CHECK_OK(weft_runtime_destroy(rt));
}

static void* wait_on_thread(void* arg) {
    struct gate* g = arg;
    CHECK_OK(weft_mutex_lock(g->m));
    atomic_store(&g->waiting, 1);
    CHECK_OK(weft_cond_wait(g->c, g->m)); /* ended by the destroy */
    CHECK_OK(weft_mutex_unlock(g->m));
    return NULL;
}

static void destroying_a_cond_wakes_a_waiting_thread(void) {
    struct gate g;
    init_gate(&g);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, wait_on_thread, &g) == 0);
    while (!atomic_load(&g.waiting)) sched_yield(); /* valgrind runs one thread at a time */
    CHECK_OK(weft_mutex_lock(g.m)); /* the waiter has released it: it waits */
    CHECK_OK(weft_mutex_unlock(g.m));
    CHECK_OK(weft_cond_destroy(g.c));
    CHECK(pthread_join(th, NULL) == 0);
    CHECK_OK(weft_mutex_destroy(g.m));
}

int main(void) {
    RUN(channel_create_checks_its_arguments);
    RUN(try_send_and_try_recv_keep_order_and_never_wait);
    RUN(values_of_any_size_and_pointers_travel_intact);
    RUN(a_closed_channel_drains_then_reports_closed);
    RUN(deadlines_time_out_never_early_on_a_plain_thread);
    RUN(destroying_a_channel_wakes_its_waiters_with_closed);
    RUN(ping_pong_between_tasks_0_workers);
    RUN(ping_pong_between_tasks_2_workers);
    RUN(many_producers_one_consumer_on_2_workers);
    RUN(a_plain_thread_receives_from_a_task);
    RUN(a_cancellation_racing_a_send_loses_or_delivers_the_value_whole);
    RUN(mutex_calls_and_misuse);
    RUN(a_mutex_excludes_tasks_on_2_workers);
    RUN(a_task_canceled_while_locking_gets_canceled_without_the_lock);
    RUN(cond_calls_and_misuse);
    RUN(broadcast_and_signal_wake_waiting_tasks_0_workers);
    RUN(broadcast_and_signal_wake_waiting_tasks_2_workers);
    RUN(a_task_canceled_in_a_wait_gets_canceled_with_the_mutex_held);
    RUN(destroying_a_cond_wakes_a_waiting_thread);
    printf("sync_test: %d tests passed\n", c_tests_passed);
    return 0;
}
