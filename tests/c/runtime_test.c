/* runtime_test.c: the C API's runtimes and tasks (spawn, join, detach,
 * cancel, deadlines, yield, sleep), every call and its misuses, with 0 and
 * with 2 workers, built as C11. */
#define _POSIX_C_SOURCE 200809L
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "c_test.h"

void weft_test_throwing_task(void* arg); /* throwing_body.cpp */

/* drive_until_done() runs a 0-worker runtime on this thread until t ends. */
static void drive_until_done(weft_runtime rt, weft_task t) {
    int done = 0;
    for (long i = 0; i < 100000000L && !done; ++i) {
        CHECK_OK(weft_runtime_run_once(rt, NULL));
        CHECK_OK(weft_task_is_done(t, &done));
    }
    CHECK(done);
}

static void set_flag(void* arg) { atomic_store((atomic_int*)arg, 1); }

/* ---- create, destroy ------------------------------------------------------- */

static void options_init_fills_defaults(void) {
    weft_runtime_options o = weft_runtime_options_init();
    CHECK(o.workers == 0);
    CHECK(o.stack_size == 64 * 1024);
    weft_spawn_options s = weft_spawn_options_init();
    CHECK(s.name == NULL && s.stack_size == 0 && s.pinned == 0 && s.deadline_ns == WEFT_NO_DEADLINE);
}

static void create_and_destroy_check_their_arguments(void) {
    weft_runtime rt;
    CHECK_RESULT(weft_runtime_create(NULL, NULL), WEFT_INVALID_ARGUMENT);
    weft_runtime_options bad = weft_runtime_options_init();
    bad.stack_size = 0;
    CHECK_RESULT(weft_runtime_create(&bad, &rt), WEFT_INVALID_ARGUMENT);
    CHECK_OK(weft_runtime_create(NULL, &rt)); /* defaults */
    CHECK_OK(weft_runtime_destroy(rt));
    CHECK_RESULT(weft_runtime_destroy(rt), WEFT_INVALID_HANDLE);
    weft_runtime zero = {0};
    CHECK_RESULT(weft_runtime_destroy(zero), WEFT_INVALID_ARGUMENT);
    atomic_int flag = 0;
    CHECK_RESULT(weft_runtime_spawn(rt, set_flag, &flag, NULL, NULL), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_runtime_block_on(rt, set_flag, &flag, NULL), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_runtime_run_once(rt, NULL), WEFT_INVALID_HANDLE);
    CHECK(atomic_load(&flag) == 0);
}

/* ---- block_on, spawn, join ------------------------------------------------- */

struct id_check {
    uint64_t seen;
};
static void record_id(void* arg) { CHECK_OK(weft_current_task_id(&((struct id_check*)arg)->seen)); }

static void block_on_spawn_and_join_with(unsigned workers) {
    weft_runtime rt = make_runtime(workers);
    atomic_int flag = 0;
    CHECK_OK(weft_runtime_block_on(rt, set_flag, &flag, NULL));
    CHECK(atomic_load(&flag) == 1);
    CHECK_RESULT(weft_runtime_block_on(rt, NULL, NULL, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_runtime_spawn(rt, NULL, NULL, NULL, NULL), WEFT_INVALID_ARGUMENT);

    struct id_check ic = {0};
    weft_spawn_options so = weft_spawn_options_init();
    so.name = "recorder";
    so.stack_size = 128 * 1024;
    so.pinned = 1;
    weft_task t;
    CHECK_OK(weft_runtime_spawn(rt, record_id, &ic, &so, &t));
    uint64_t id = 0;
    CHECK_OK(weft_task_id(t, &id));
    CHECK(id != 0);
    CHECK_RESULT(weft_task_id(t, NULL), WEFT_INVALID_ARGUMENT);
    if (workers == 0) {
        int done = 1;
        CHECK_OK(weft_task_is_done(t, &done));
        CHECK(done == 0); /* nobody drives the runtime yet */
        size_t ran = 0;
        CHECK_OK(weft_runtime_run_once(rt, &ran));
        CHECK(ran == 1);
    }
    CHECK_OK(weft_task_join(t, WEFT_NO_DEADLINE));
    CHECK(ic.seen == id);
    /* The handle is gone once joined. */
    CHECK_RESULT(weft_task_join(t, WEFT_NO_DEADLINE), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_task_detach(t), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_task_cancel(t), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_task_id(t, &id), WEFT_INVALID_HANDLE);
    int done;
    CHECK_RESULT(weft_task_is_done(t, &done), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_task_is_done(t, NULL), WEFT_INVALID_ARGUMENT);
    weft_task zero = {0};
    CHECK_RESULT(weft_task_join(zero, WEFT_NO_DEADLINE), WEFT_INVALID_ARGUMENT);
    CHECK_OK(weft_runtime_destroy(rt));
}
static void block_on_spawn_and_join_0_workers(void) { block_on_spawn_and_join_with(0); }
static void block_on_spawn_and_join_2_workers(void) { block_on_spawn_and_join_with(2); }

static void task_calls_outside_a_task_are_refused(void) {
    CHECK_RESULT(weft_yield(), WEFT_NOT_IN_TASK);
    uint64_t id;
    CHECK_RESULT(weft_current_task_id(&id), WEFT_NOT_IN_TASK);
    CHECK_RESULT(weft_current_task_id(NULL), WEFT_INVALID_ARGUMENT);
    atomic_int flag = 0;
    CHECK_RESULT(weft_spawn(set_flag, &flag, NULL, NULL), WEFT_NOT_IN_TASK);
    CHECK_RESULT(weft_sleep(-1), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_sleep_until(-5), WEFT_INVALID_ARGUMENT);
}

/* Outside a task the sleeps block the thread (as io does), never less. */
static void sleep_outside_a_task_blocks_the_thread(void) {
    int64_t t0 = now_ns();
    CHECK_OK(weft_sleep(3 * 1000000));
    CHECK(now_ns() - t0 >= 3 * 1000000);
    t0 = now_ns();
    CHECK_OK(weft_sleep_until(t0 + 2 * 1000000));
    CHECK(now_ns() >= t0 + 2 * 1000000);
    CHECK_OK(weft_sleep_until(0)); /* passed: returns at once */
}

/* ---- yield, sleep, spawn from a task --------------------------------------- */

struct sleeper {
    int64_t slept;
    weft_result past;
    int yields;
    atomic_int child_ran;
};

static void sleeping_body(void* arg) {
    struct sleeper* s = arg;
    int64_t t0 = now_ns();
    CHECK_OK(weft_sleep(2 * MS));
    s->slept = now_ns() - t0;
    s->past = weft_sleep_until(t0); /* already passed: returns at once */
    for (int i = 0; i < 3; ++i) {
        CHECK_OK(weft_yield());
        ++s->yields;
    }
    weft_task child;
    CHECK_OK(weft_spawn(set_flag, &s->child_ran, NULL, &child));
    CHECK_OK(weft_task_join(child, WEFT_NO_DEADLINE));
    CHECK_OK(weft_spawn(set_flag, &s->child_ran, NULL, NULL)); /* detached */
    CHECK_RESULT(weft_spawn(NULL, NULL, NULL, NULL), WEFT_INVALID_ARGUMENT);
}

static void sleep_yield_and_spawn_inside_tasks_with(unsigned workers) {
    weft_runtime rt = make_runtime(workers);
    struct sleeper s = {0, WEFT_UNKNOWN_ERROR, 0, 0};
    CHECK_OK(weft_runtime_block_on(rt, sleeping_body, &s, NULL));
    CHECK(s.slept >= 2 * MS);
    CHECK(s.past == WEFT_OK);
    CHECK(s.yields == 3);
    CHECK(atomic_load(&s.child_ran) == 1);
    CHECK_OK(weft_runtime_destroy(rt));
}
static void sleep_yield_and_spawn_inside_tasks_0_workers(void) { sleep_yield_and_spawn_inside_tasks_with(0); }
static void sleep_yield_and_spawn_inside_tasks_2_workers(void) { sleep_yield_and_spawn_inside_tasks_with(2); }

static void run_once_drives_a_0_worker_runtime(void) {
    weft_runtime rt = make_runtime(0);
    atomic_int flags[3] = {0, 0, 0};
    weft_task ts[3];
    for (int i = 0; i < 3; ++i) CHECK_OK(weft_runtime_spawn(rt, set_flag, &flags[i], NULL, &ts[i]));
    size_t ran = 0;
    CHECK_OK(weft_runtime_run_once(rt, &ran));
    CHECK(ran == 3);
    CHECK_OK(weft_runtime_run_once(rt, NULL));
    for (int i = 0; i < 3; ++i) {
        CHECK(atomic_load(&flags[i]) == 1);
        int done = 0;
        CHECK_OK(weft_task_is_done(ts[i], &done));
        CHECK(done == 1);
        CHECK_OK(weft_task_detach(ts[i]));
        CHECK_RESULT(weft_task_detach(ts[i]), WEFT_INVALID_HANDLE);
    }
    CHECK_OK(weft_runtime_destroy(rt));
}

/* ---- cancellation and deadlines -------------------------------------------- */

struct blocked {
    weft_channel ch;
    weft_result first;
    weft_result second;
    weft_result yield_after;
    weft_result spawn_after;
    atomic_int started;
    int returned;
};

static void blocked_body(void* arg) {
    struct blocked* b = arg;
    int v;
    atomic_store(&b->started, 1);
    b->first = weft_channel_recv(b->ch, &v, WEFT_NO_DEADLINE);
    b->second = weft_channel_recv(b->ch, &v, WEFT_NO_DEADLINE); /* canceled: at once */
    b->yield_after = weft_yield();
    b->spawn_after = weft_spawn(set_flag, &b->started, NULL, NULL);
    b->returned = 1; /* C code after the cancellation runs: no unwinding through it */
}

static void init_blocked(struct blocked* b) {
    memset(b, 0, sizeof *b);
    CHECK_OK(weft_channel_create(sizeof(int), 0, &b->ch));
}

/* start_blocked() spawns blocked_body on rt (with `workers` workers) and
 * returns its task once the body has started: with 0 workers it is run here
 * into its recv. */
static weft_task start_blocked(weft_runtime rt, unsigned workers, struct blocked* b) {
    init_blocked(b);
    weft_task t;
    CHECK_OK(weft_runtime_spawn(rt, blocked_body, b, NULL, &t));
    if (workers == 0) {
        CHECK_OK(weft_runtime_run_once(rt, NULL)); /* runs it into its recv */
    } else {
        while (!atomic_load(&b->started)) sched_yield(); /* valgrind runs one thread at a time */
    }
    return t;
}

static void cancel_of_a_task_blocked_in_recv_with(unsigned workers) {
    weft_runtime rt = make_runtime(workers);
    struct blocked b;
    weft_task t = start_blocked(rt, workers, &b);
    /* The join times out while it is blocked; the handle stays. */
    CHECK_RESULT(weft_task_join(t, now_ns() + 2 * MS), WEFT_TIMED_OUT);
    int done = 1;
    CHECK_OK(weft_task_is_done(t, &done));
    CHECK(done == 0);
    CHECK_OK(weft_task_cancel(t));
    CHECK_OK(weft_task_cancel(t)); /* twice: no change */
    if (workers == 0) drive_until_done(rt, t);
    CHECK_RESULT(weft_task_join(t, WEFT_NO_DEADLINE), WEFT_CANCELED);
    CHECK(b.first == WEFT_CANCELED);
    CHECK(b.second == WEFT_CANCELED);
    CHECK(b.yield_after == WEFT_CANCELED);
    CHECK(b.spawn_after == WEFT_OK); /* spawning is not a wait */
    CHECK(b.returned == 1);
    CHECK_OK(weft_runtime_destroy(rt));
    CHECK_OK(weft_channel_destroy(b.ch));
}
static void cancel_of_a_task_blocked_in_recv_0_workers(void) { cancel_of_a_task_blocked_in_recv_with(0); }
static void cancel_of_a_task_blocked_in_recv_2_workers(void) { cancel_of_a_task_blocked_in_recv_with(2); }

/* A task canceled while it joins another: its join returns WEFT_CANCELED
 * and leaves the other task's handle valid. */
struct joiner {
    weft_task target;
    weft_result joined;
    weft_result detach_after;
    atomic_int started;
};

static void joining_body(void* arg) {
    struct joiner* j = arg;
    atomic_store(&j->started, 1);
    j->joined = weft_task_join(j->target, WEFT_NO_DEADLINE);
}

static void a_join_interrupted_by_cancellation_keeps_the_joined_handle(void) {
    weft_runtime rt = make_runtime(2);
    struct blocked b;
    init_blocked(&b);
    struct joiner j;
    j.joined = WEFT_UNKNOWN_ERROR;
    j.started = 0;
    CHECK_OK(weft_runtime_spawn(rt, blocked_body, &b, NULL, &j.target));
    weft_task jt;
    CHECK_OK(weft_runtime_spawn(rt, joining_body, &j, NULL, &jt));
    /* Both must have started: a task canceled before its first run never
     * runs (b.first would stay unset; seen under qemu-user). */
    while (!atomic_load(&j.started) || !atomic_load(&b.started)) sched_yield(); /* valgrind runs one thread at a time */
    CHECK_OK(weft_task_cancel(jt));
    CHECK_RESULT(weft_task_join(jt, WEFT_NO_DEADLINE), WEFT_CANCELED);
    CHECK(j.joined == WEFT_CANCELED);
    /* The target runs on, and its handle is still ours. */
    int done = 1;
    CHECK_OK(weft_task_is_done(j.target, &done));
    CHECK(done == 0);
    CHECK_OK(weft_task_cancel(j.target));
    CHECK_RESULT(weft_task_join(j.target, WEFT_NO_DEADLINE), WEFT_CANCELED);
    CHECK(b.first == WEFT_CANCELED);
    CHECK_OK(weft_channel_destroy(b.ch));
    CHECK_OK(weft_runtime_destroy(rt));
}

static void long_sleeper(void* arg) { *(weft_result*)arg = weft_sleep(60000 * MS); }

static void a_spawn_deadline_cancels_the_task_which_ends_timed_out(void) {
    /* 0 workers: the body surely starts (at the first run_once) before its
     * deadline, and is in its sleep when the deadline comes. */
    weft_runtime rt = make_runtime(0);
    weft_result slept = WEFT_UNKNOWN_ERROR;
    weft_spawn_options so = weft_spawn_options_init();
    int64_t t0 = now_ns();
    so.deadline_ns = t0 + 20 * MS;
    weft_task t;
    CHECK_OK(weft_runtime_spawn(rt, long_sleeper, &slept, &so, &t));
    CHECK_OK(weft_runtime_run_once(rt, NULL));
    drive_until_done(rt, t);
    CHECK_RESULT(weft_task_join(t, WEFT_NO_DEADLINE), WEFT_TIMED_OUT);
    CHECK(now_ns() - t0 >= 20 * MS);
    CHECK(slept == WEFT_CANCELED);
    so.deadline_ns = -7;
    CHECK_RESULT(weft_runtime_spawn(rt, long_sleeper, &slept, &so, &t), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_task_join(t, -7), WEFT_INVALID_ARGUMENT);
    CHECK_OK(weft_runtime_destroy(rt));
}

static void destroying_a_runtime_cancels_its_tasks_with(unsigned workers) {
    weft_runtime rt = make_runtime(workers);
    struct blocked b;
    weft_task t = start_blocked(rt, workers, &b);
    CHECK_OK(weft_runtime_destroy(rt));
    CHECK(b.returned == 1);
    CHECK(b.first == WEFT_CANCELED);
    CHECK(b.spawn_after == WEFT_STOPPING); /* the runtime refuses spawns while it stops */
    /* The task handle outlives its runtime. */
    CHECK_RESULT(weft_task_join(t, WEFT_NO_DEADLINE), WEFT_CANCELED);
    CHECK_OK(weft_channel_destroy(b.ch));
}
static void destroying_a_runtime_cancels_its_tasks_0_workers(void) { destroying_a_runtime_cancels_its_tasks_with(0); }
static void destroying_a_runtime_cancels_its_tasks_2_workers(void) { destroying_a_runtime_cancels_its_tasks_with(2); }

/* ---- misuse from inside tasks ---------------------------------------------- */

struct inside {
    weft_runtime rt;
    weft_task self;
    weft_result join_self, destroy_rt, block_on, run_once;
};

static void misusing_body(void* arg) {
    struct inside* in = arg;
    in->join_self = weft_task_join(in->self, WEFT_NO_DEADLINE);
    in->destroy_rt = weft_runtime_destroy(in->rt);
    in->block_on = weft_runtime_block_on(in->rt, misusing_body, arg, NULL);
    in->run_once = weft_runtime_run_once(in->rt, NULL);
}

static void calls_that_would_wait_for_themselves_are_refused_inside_tasks(void) {
    struct inside in;
    in.rt = make_runtime(0);
    CHECK_OK(weft_runtime_spawn(in.rt, misusing_body, &in, NULL, &in.self));
    CHECK_OK(weft_runtime_run_once(in.rt, NULL)); /* the handle is set before it runs */
    CHECK(in.join_self == WEFT_WRONG_STATE);
    CHECK(in.destroy_rt == WEFT_WRONG_THREAD);
    CHECK(in.block_on == WEFT_WRONG_THREAD);
    CHECK(in.run_once == WEFT_WRONG_THREAD);
    CHECK_OK(weft_task_join(in.self, WEFT_NO_DEADLINE));
    CHECK_OK(weft_runtime_destroy(in.rt));
}

/* ---- C++ bodies that throw ------------------------------------------------ */

static void a_cpp_exception_escaping_a_task_is_callback_failed(void) {
    weft_runtime rt = make_runtime(2);
    weft_task t;
    CHECK_OK(weft_runtime_spawn(rt, weft_test_throwing_task, NULL, NULL, &t));
    CHECK_RESULT(weft_task_join(t, WEFT_NO_DEADLINE), WEFT_CALLBACK_FAILED);
    CHECK_RESULT(weft_runtime_block_on(rt, weft_test_throwing_task, NULL, NULL), WEFT_CALLBACK_FAILED);
    CHECK_OK(weft_runtime_spawn(rt, weft_test_throwing_task, NULL, NULL, NULL)); /* detached: no terminate */
    CHECK_OK(weft_runtime_destroy(rt));
}

/* ---- many tasks ------------------------------------------------------------ */

static void increment(void* arg) {
    CHECK_OK(weft_yield());
    atomic_fetch_add((atomic_int*)arg, 1);
}

static void many_tasks_run_on_2_workers(void) {
    weft_runtime rt = make_runtime(2);
    atomic_int n = 0;
    enum { count = 1000 };
    static weft_task ts[count];
    for (int i = 0; i < count; ++i) CHECK_OK(weft_runtime_spawn(rt, increment, &n, NULL, &ts[i]));
    for (int i = 0; i < count; ++i) CHECK_OK(weft_task_join(ts[i], WEFT_NO_DEADLINE));
    CHECK(atomic_load(&n) == count);
    CHECK_OK(weft_runtime_destroy(rt));
}

/* ---- graceful shutdown --------------------------------------------------- */

/* drain_state is what the shutdown tests' tasks share. */
typedef struct drain_state {
    weft_channel never; /* nobody sends: a receive waits until canceled */
    atomic_int finished;    /* the short task returned */
    atomic_int stuck_saw;   /* the result the stuck task's receive returned, + 1 */
    atomic_int late_spawn;  /* the result of a spawn from a task, during the drain, + 1 */
} drain_state;

static void short_task(void* arg) {
    drain_state* d = arg;
    CHECK_OK(weft_sleep(20 * MS));
    /* A task of the runtime may still spawn children while it drains. */
    atomic_store(&d->late_spawn, (int)weft_spawn(set_flag, &d->finished, NULL, NULL) + 1);
}

static void stuck_task(void* arg) {
    drain_state* d = arg;
    int v;
    atomic_store(&d->stuck_saw, (int)weft_channel_recv(d->never, &v, WEFT_NO_DEADLINE) + 1);
}

static void shutdown_inside(void* arg) {
    weft_runtime rt = *(weft_runtime*)arg;
    size_t left = 99;
    CHECK_EXPLAINED(weft_runtime_shutdown(rt, WEFT_NO_DEADLINE, &left), WEFT_WRONG_THREAD, "weft_runtime_shutdown",
                    "inside a task", "weft_task_cancel()");
    CHECK(left == 99);
}

/* weft_runtime_shutdown() lets the tasks that end by themselves finish,
 * cancels the one still waiting at the deadline, counts it, and refuses
 * spawns from outside afterwards. */
static void shutdown_drains_then_cancels_with(unsigned workers) {
    weft_runtime rt = make_runtime(workers);
    drain_state d;
    CHECK_OK(weft_channel_create(sizeof(int), 0, &d.never));
    atomic_init(&d.finished, 0);
    atomic_init(&d.stuck_saw, 0);
    atomic_init(&d.late_spawn, 0);
    CHECK_OK(weft_runtime_block_on(rt, shutdown_inside, &rt, NULL));
    CHECK_OK(weft_runtime_spawn(rt, short_task, &d, NULL, NULL));
    CHECK_OK(weft_runtime_spawn(rt, stuck_task, &d, NULL, NULL));
    const int64_t start = now_ns();
    size_t left = 99;
    CHECK_OK(weft_runtime_shutdown(rt, start + 300 * MS, &left));
    CHECK(now_ns() - start >= 300 * MS); /* the stuck task held it to the deadline */
    CHECK(left == 1);
    CHECK(atomic_load(&d.late_spawn) == WEFT_OK + 1);
    CHECK(atomic_load(&d.finished) == 1);
    CHECK(atomic_load(&d.stuck_saw) == WEFT_CANCELED + 1);
    CHECK_RESULT(weft_runtime_spawn(rt, set_flag, &d.finished, NULL, NULL), WEFT_STOPPING);
    CHECK_OK(weft_runtime_shutdown(rt, WEFT_NO_DEADLINE, &left)); /* stopped already */
    CHECK(left == 0);
    CHECK_OK(weft_runtime_destroy(rt));
    CHECK_OK(weft_channel_destroy(d.never));
}

static void shutdown_drains_then_cancels_0_workers(void) { shutdown_drains_then_cancels_with(0); }
static void shutdown_drains_then_cancels_2_workers(void) { shutdown_drains_then_cancels_with(2); }

/* With nothing stuck, shutdown returns as soon as the tasks have ended,
 * long before its deadline, and a NULL `left` is allowed. */
static void shutdown_returns_when_all_tasks_have_ended(void) {
    weft_runtime rt = make_runtime(2);
    drain_state d;
    atomic_init(&d.finished, 0);
    atomic_init(&d.late_spawn, 0);
    CHECK_OK(weft_runtime_spawn(rt, short_task, &d, NULL, NULL));
    const int64_t start = now_ns();
    CHECK_OK(weft_runtime_shutdown(rt, start + 10 * 1000 * MS, NULL));
    CHECK(now_ns() - start < 5 * 1000 * MS);
    CHECK(atomic_load(&d.finished) == 1);
    CHECK_OK(weft_runtime_destroy(rt));
}

static void shutdown_checks_its_arguments(void) {
    weft_runtime rt = make_runtime(0);
    size_t left;
    CHECK_EXPLAINED(weft_runtime_shutdown(rt, -2, &left), WEFT_INVALID_ARGUMENT, "weft_runtime_shutdown",
                    "`deadline_ns` is negative", "WEFT_NO_DEADLINE");
    weft_runtime zero = {0};
    CHECK_EXPLAINED(weft_runtime_shutdown(zero, WEFT_NO_DEADLINE, &left), WEFT_INVALID_ARGUMENT,
                    "handle argument is zero");
    CHECK_OK(weft_runtime_destroy(rt));
    CHECK_RESULT(weft_runtime_shutdown(rt, WEFT_NO_DEADLINE, &left), WEFT_INVALID_HANDLE);
}

int main(void) {
    RUN(options_init_fills_defaults);
    RUN(create_and_destroy_check_their_arguments);
    RUN(block_on_spawn_and_join_0_workers);
    RUN(block_on_spawn_and_join_2_workers);
    RUN(task_calls_outside_a_task_are_refused);
    RUN(sleep_outside_a_task_blocks_the_thread);
    RUN(sleep_yield_and_spawn_inside_tasks_0_workers);
    RUN(sleep_yield_and_spawn_inside_tasks_2_workers);
    RUN(run_once_drives_a_0_worker_runtime);
    RUN(cancel_of_a_task_blocked_in_recv_0_workers);
    RUN(cancel_of_a_task_blocked_in_recv_2_workers);
    RUN(a_join_interrupted_by_cancellation_keeps_the_joined_handle);
    RUN(a_spawn_deadline_cancels_the_task_which_ends_timed_out);
    RUN(destroying_a_runtime_cancels_its_tasks_0_workers);
    RUN(destroying_a_runtime_cancels_its_tasks_2_workers);
    RUN(calls_that_would_wait_for_themselves_are_refused_inside_tasks);
    RUN(a_cpp_exception_escaping_a_task_is_callback_failed);
    RUN(many_tasks_run_on_2_workers);
    RUN(shutdown_drains_then_cancels_0_workers);
    RUN(shutdown_drains_then_cancels_2_workers);
    RUN(shutdown_returns_when_all_tasks_have_ended);
    RUN(shutdown_checks_its_arguments);
    printf("runtime_test: %d tests passed\n", c_tests_passed);
    return 0;
}
