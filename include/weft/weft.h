/* weft/weft.h: layer L8, the C API of weft (C11; also valid C++).
 *
 *   static void body(weft_coroutine co) {
 *       int v = 42;
 *       weft_coroutine_push(co, &v, sizeof v);
 *       weft_coroutine_yield(co);
 *   }
 *   weft_coroutine co;
 *   weft_coroutine_desc d = weft_coroutine_desc_init(body, 0);
 *   if (weft_coroutine_create(&d, &co) == WEFT_OK) {
 *       int v;
 *       weft_coroutine_resume(co);             // body runs until its yield
 *       weft_coroutine_pop(co, &v, sizeof v);  // v == 42
 *       weft_coroutine_destroy(co);            // its yield returns WEFT_CANCELED
 *   }
 *
 * It wraps weft's C++ layers (coroutines L2, tasks and the runtime L3-L4,
 * channels, mutexes and condition variables L5, TCP and Unix-domain stream
 * sockets, signals and name resolution L6) and adds no behaviour of its
 * own; docs/c-api.md is the full description. The rules:
 *   - Every function returns a weft_result (except the *_init() functions,
 *     which return a filled descriptor, weft_result_str() and
 *     weft_last_error()).
 *     weft_result_str() names a code; weft_last_error() says what caused
 *     the calling thread's last failure (the call, the argument, the fix).
 *     Out-parameters are written only on
 *     WEFT_OK (one exception: the byte counts of weft_stream_read_exact()
 *     and weft_stream_write_all(), written on every result but
 *     WEFT_INVALID_ARGUMENT, so that a failure says how much moved).
 *   - Bad arguments (NULL, a handle of the wrong state, a destroyed handle,
 *     a call from the wrong thread or outside a task) return a code; they
 *     never abort or corrupt anything.
 *   - Objects are named by handles: a struct holding a 64-bit value (a
 *     table index and a generation). A zero handle is WEFT_INVALID_ARGUMENT;
 *     a handle whose object was destroyed (or joined, or detached) is
 *     WEFT_INVALID_HANDLE, never a dangling pointer. Handles may be copied
 *     and used from any thread.
 *   - No C++ exception ever reaches C: one escaping a callback (a C++
 *     function passed as a body) ends that body with WEFT_CALLBACK_FAILED.
 *   - Deadlines are absolute: int64_t nanoseconds of CLOCK_MONOTONIC (see
 *     weft_now()); WEFT_NO_DEADLINE (-1) waits without limit.
 *   - Cancellation: every blocking call of a task that is canceled returns
 *     WEFT_CANCELED (at once, from then on) and the task body is expected
 *     to return; no unwinding passes through C frames.
 */
#ifndef WEFT_WEFT_H
#define WEFT_WEFT_H

#include <stddef.h>
#include <stdint.h>

/* WEFT_C_API marks the functions exported from a shared libweft. */
#if defined(WEFT_SHARED_BUILD)
#define WEFT_C_API __attribute__((visibility("default")))
#else
#define WEFT_C_API
#endif

/* WEFT_NOEXCEPT: to C++ callers, no function of this API throws. */
#ifdef __cplusplus
#define WEFT_NOEXCEPT noexcept
#else
#define WEFT_NOEXCEPT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* weft_result is what every call returns. Values are stable (ABI). */
typedef enum weft_result {
    WEFT_OK = 0,                /* success */
    WEFT_INVALID_ARGUMENT = 1,  /* a NULL pointer, a zero handle, a size or option out of range */
    WEFT_INVALID_HANDLE = 2,    /* the handle's object was destroyed (joined, detached) or it names another kind */
    WEFT_WRONG_STATE = 3,       /* the object is not in a state that allows the call */
    WEFT_WRONG_THREAD = 4,      /* in use on another thread; or the call would wait for itself or block a worker */
    WEFT_NOT_IN_COROUTINE = 5,  /* a call that needs the calling coroutine was made outside it */
    WEFT_NOT_IN_TASK = 6,       /* a call that needs a task was made outside one */
    WEFT_OUT_OF_MEMORY = 7,     /* an allocation failed */
    WEFT_STACK_ERROR = 8,       /* a stack could not be had (or is too small) */
    WEFT_TIMED_OUT = 9,         /* the deadline passed first (or the task's spawn deadline did) */
    WEFT_CANCELED = 10,         /* the calling task is canceled (or the coroutine is being destroyed) */
    WEFT_CLOSED = 11,           /* the channel is closed (receive: and drained); the stream or listener is closed */
    WEFT_WOULD_BLOCK = 12,      /* a try_ call could not complete without waiting */
    WEFT_NOT_ENOUGH_SPACE = 13, /* a coroutine's storage is too full (push) or too empty (pop, peek) */
    WEFT_CALLBACK_FAILED = 14,  /* a C++ exception escaped a body */
    WEFT_STOPPING = 15,         /* the runtime is stopping or stopped */
    WEFT_SYSTEM_ERROR = 16,     /* the system refused (a thread could not start, ...) */
    WEFT_UNKNOWN_ERROR = 17,    /* an unexpected C++ exception, caught */
    WEFT_IO_ERROR = 18,         /* the system reported an IO error: weft_last_errno() says which */
    WEFT_EOF = 19,              /* the stream ended: the peer shut down its side (or closed) */
    WEFT_NOT_FOUND = 20         /* a name could not be resolved: weft_last_error() gives getaddrinfo's reason */
} weft_result;

/* weft_result_str() names a result ("WEFT_OK: success", ...); an unknown
 * value gives "unknown result". Never NULL. */
WEFT_C_API const char* weft_result_str(weft_result r) WEFT_NOEXCEPT;

/* weft_last_error() explains the calling thread's last error: the call, the
 * argument and the fix, e.g. "weft_tcp_listen: `backlog` -1 is negative;
 * pass the queue length you want, or 0 for the system's (SOMAXCONN)". It
 * is written by every call that returns WEFT_INVALID_ARGUMENT (one text per
 * cause), by WEFT_NOT_IN_TASK, by the WEFT_WRONG_THREAD of a call that would
 * wait for itself, by WEFT_NOT_FOUND, and by every error that came from a
 * C++ exception (its what()); every other result leaves it as it was: read
 * it right after the call that failed, on the same thread (a task: before
 * its next call that can wait). Never NULL; valid until the thread's next
 * call of this API. */
WEFT_C_API const char* weft_last_error(void) WEFT_NOEXCEPT;

/* WEFT_NO_DEADLINE is the deadline that never comes. */
#define WEFT_NO_DEADLINE ((int64_t)-1)

/* weft_now() stores the current CLOCK_MONOTONIC time in nanoseconds, the
 * clock every deadline is measured on. Errors: WEFT_INVALID_ARGUMENT. */
WEFT_C_API weft_result weft_now(int64_t* out_ns) WEFT_NOEXCEPT;

/* ------------------------------------------------------------ coroutines */

/* weft_coroutine names an asymmetric stackful coroutine (weft L2). */
typedef struct weft_coroutine {
    uint64_t id;
} weft_coroutine;

/* weft_coroutine_state is where a coroutine is (minicoro's four states). */
typedef enum weft_coroutine_state {
    WEFT_COROUTINE_SUSPENDED = 0, /* created, or suspended in weft_coroutine_yield() */
    WEFT_COROUTINE_RUNNING = 1,   /* running: it is the caller, or runs on another thread */
    WEFT_COROUTINE_NORMAL = 2,    /* running, but it resumed the coroutine that calls */
    WEFT_COROUTINE_DEAD = 3       /* its body returned (or was ended by destroy) */
} weft_coroutine_state;

/* weft_coroutine_desc describes a coroutine to create; fill it with
 * weft_coroutine_desc_init() and then change what you need. */
typedef struct weft_coroutine_desc {
    void (*func)(weft_coroutine co); /* the body, called on the coroutine's stack */
    size_t stack_size;               /* 0: weft's default (128 KiB), from weft's stack pool */
    size_t storage_size;             /* bytes of push/pop storage (default 1024; 0: none) */
    void* user_data;                 /* weft_coroutine_user_data() returns it */
    const char* name;                /* NULL or a name for error messages; copied */
    int own_fp_env;                  /* 0: the coroutine runs with its thread's floating-point control
                                        state (rounding mode, flush-to-zero) and what it sets stays with
                                        the thread; nonzero: it keeps its own, from its creator's, and
                                        its resumer gets its own back (docs/context-abi.md) */
} weft_coroutine_desc;

/* weft_coroutine_desc_init() is a descriptor for body `func` on a stack of
 * at least `stack_size` bytes (0: the default), with 1024 bytes of storage,
 * no user data, no name, and the thread's FP control state shared. */
WEFT_C_API weft_coroutine_desc weft_coroutine_desc_init(void (*func)(weft_coroutine co), size_t stack_size) WEFT_NOEXCEPT;

/* weft_coroutine_create() creates a suspended coroutine; the body runs at
 * the first resume. Errors: WEFT_INVALID_ARGUMENT (desc, desc->func or out
 * NULL), WEFT_STACK_ERROR, WEFT_OUT_OF_MEMORY. */
WEFT_C_API weft_result weft_coroutine_create(const weft_coroutine_desc* desc, weft_coroutine* out) WEFT_NOEXCEPT;

/* weft_coroutine_destroy() ends a coroutine and frees it; the handle is
 * stale afterwards. A suspended coroutine is first resumed once more on
 * this thread: its pending weft_coroutine_yield() returns WEFT_CANCELED (and
 * every later one, at once), and the body must then return; C++ objects
 * between the body and its yield are destroyed. Errors:
 * WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE, WEFT_WRONG_STATE (it is
 * running or normal, e.g. destroyed from inside itself). */
WEFT_C_API weft_result weft_coroutine_destroy(weft_coroutine co) WEFT_NOEXCEPT;

/* weft_coroutine_resume() runs co on this thread until it yields or its
 * body returns. Returns WEFT_OK, or WEFT_CALLBACK_FAILED when a C++
 * exception escaped the body in this run (it is dead then). A suspended
 * coroutine may be resumed on any thread. Errors: WEFT_INVALID_ARGUMENT,
 * WEFT_INVALID_HANDLE, WEFT_WRONG_STATE (dead, running on this thread,
 * normal, or the caller itself), WEFT_WRONG_THREAD (running on another
 * thread). */
WEFT_C_API weft_result weft_coroutine_resume(weft_coroutine co) WEFT_NOEXCEPT;

/* weft_coroutine_yield() suspends co, the running coroutine, back to its
 * resumer; returns WEFT_OK when resumed again, WEFT_CANCELED when co is
 * being destroyed (the body should return). Errors: WEFT_INVALID_ARGUMENT,
 * WEFT_INVALID_HANDLE, WEFT_NOT_IN_COROUTINE (the caller is not co's own
 * body: outside any coroutine, or inside another). */
WEFT_C_API weft_result weft_coroutine_yield(weft_coroutine co) WEFT_NOEXCEPT;

/* weft_coroutine_status() stores co's status. Errors: WEFT_INVALID_ARGUMENT,
 * WEFT_INVALID_HANDLE. */
WEFT_C_API weft_result weft_coroutine_status(weft_coroutine co, weft_coroutine_state* out) WEFT_NOEXCEPT;

/* weft_coroutine_user_data() stores the descriptor's user_data. Errors:
 * WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE. */
WEFT_C_API weft_result weft_coroutine_user_data(weft_coroutine co, void** out) WEFT_NOEXCEPT;

/* weft_coroutine_running() stores the coroutine (made by this API) whose
 * body the caller runs in. Errors: WEFT_INVALID_ARGUMENT,
 * WEFT_NOT_IN_COROUTINE. */
WEFT_C_API weft_result weft_coroutine_running(weft_coroutine* out) WEFT_NOEXCEPT;

/* weft_coroutine_push() copies len bytes from src onto the top of co's
 * storage (a byte stack shared by the resumer and the body, as minicoro's
 * storage). len 0 does nothing. Errors: WEFT_INVALID_ARGUMENT (src NULL
 * with len > 0), WEFT_INVALID_HANDLE, WEFT_NOT_ENOUGH_SPACE (nothing
 * copied). */
WEFT_C_API weft_result weft_coroutine_push(weft_coroutine co, const void* src, size_t len) WEFT_NOEXCEPT;

/* weft_coroutine_pop() takes the top len bytes off co's storage into dest
 * (dest NULL: discards them). Errors: WEFT_INVALID_ARGUMENT,
 * WEFT_INVALID_HANDLE, WEFT_NOT_ENOUGH_SPACE (fewer than len stored;
 * nothing taken). */
WEFT_C_API weft_result weft_coroutine_pop(weft_coroutine co, void* dest, size_t len) WEFT_NOEXCEPT;

/* weft_coroutine_peek() copies the top len bytes of co's storage into dest
 * without taking them. Errors: as weft_coroutine_pop() (dest must not be
 * NULL when len > 0). */
WEFT_C_API weft_result weft_coroutine_peek(weft_coroutine co, void* dest, size_t len) WEFT_NOEXCEPT;

/* weft_coroutine_bytes_stored() stores how many bytes co's storage holds.
 * Errors: WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE. */
WEFT_C_API weft_result weft_coroutine_bytes_stored(weft_coroutine co, size_t* out) WEFT_NOEXCEPT;

/* weft_coroutine_storage_size() stores the capacity of co's storage.
 * Errors: WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE. */
WEFT_C_API weft_result weft_coroutine_storage_size(weft_coroutine co, size_t* out) WEFT_NOEXCEPT;

/* --------------------------------------------------------- runtime, tasks */

/* weft_runtime names a runtime (weft L4); weft_task a spawned task. */
typedef struct weft_runtime {
    uint64_t id;
} weft_runtime;
typedef struct weft_task {
    uint64_t id;
} weft_task;

/* weft_runtime_options configure a runtime; weft_runtime_options_init()
 * gives the defaults. */
typedef struct weft_runtime_options {
    unsigned workers;  /* worker threads; 0: tasks run on the thread calling block_on / run_once */
    size_t stack_size; /* a task's stack (default 64 KiB) */
} weft_runtime_options;
WEFT_C_API weft_runtime_options weft_runtime_options_init(void) WEFT_NOEXCEPT;

/* weft_spawn_options configure one task; weft_spawn_options_init() gives
 * the defaults. */
typedef struct weft_spawn_options {
    const char* name;    /* NULL or a name for diagnostics; copied */
    size_t stack_size;   /* 0: the runtime's */
    int pinned;          /* non-zero: always runs on one worker */
    int64_t deadline_ns; /* WEFT_NO_DEADLINE, or when the task is canceled (it ends WEFT_TIMED_OUT) */
} weft_spawn_options;
WEFT_C_API weft_spawn_options weft_spawn_options_init(void) WEFT_NOEXCEPT;

/* weft_runtime_create() starts a runtime (options NULL: the defaults).
 * Errors: WEFT_INVALID_ARGUMENT (out NULL, an option out of range),
 * WEFT_SYSTEM_ERROR (a thread could not start), WEFT_OUT_OF_MEMORY. */
WEFT_C_API weft_result weft_runtime_create(const weft_runtime_options* options, weft_runtime* out) WEFT_NOEXCEPT;

/* weft_runtime_destroy() stops the runtime (no new spawns; every task left
 * is canceled and runs until its body returns: with 0 workers, on this
 * thread) and frees it; the handle is stale afterwards. Task handles stay
 * valid (join them or detach them). Errors: WEFT_INVALID_ARGUMENT,
 * WEFT_INVALID_HANDLE, WEFT_WRONG_THREAD (called from inside a task). */
WEFT_C_API weft_result weft_runtime_destroy(weft_runtime rt) WEFT_NOEXCEPT;

/* weft_runtime_shutdown() stops rt gracefully (C++ runtime::shutdown()), to
 * drain a server: from then on a spawn from outside rt's own tasks returns
 * WEFT_STOPPING; the tasks that are left run, and may spawn children, until
 * all have ended or deadline_ns has passed; then every task still live is
 * canceled (its blocking calls return WEFT_CANCELED; its body should
 * return) and waited for, and the workers are joined. With 0 workers this
 * thread runs the tasks meanwhile. *left (may be NULL) gets how many tasks
 * were still live at the deadline (0: all ended on their own). rt is
 * stopped afterwards; weft_runtime_destroy() still frees it. On a stopped
 * runtime: WEFT_OK, *left 0. Nothing here ends a task that waits for more
 * work (an accept loop, an idle connection): close its listener or stream
 * first, e.g. when weft_signal_set_wait() returns SIGTERM. Errors:
 * WEFT_INVALID_ARGUMENT (a deadline below -1), WEFT_INVALID_HANDLE,
 * WEFT_WRONG_THREAD (called from inside a task: it would wait for itself;
 * or another thread drives a 0-worker rt). */
WEFT_C_API weft_result weft_runtime_shutdown(weft_runtime rt, int64_t deadline_ns, size_t* left) WEFT_NOEXCEPT;

/* weft_runtime_spawn() creates a task running fn(arg) in rt (options NULL:
 * the defaults). out NULL detaches it at once; otherwise *out is its
 * handle, which must be joined or detached. From any thread or task.
 * Errors: WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE, WEFT_STOPPING,
 * WEFT_OUT_OF_MEMORY. */
WEFT_C_API weft_result weft_runtime_spawn(weft_runtime rt, void (*fn)(void* arg), void* arg,
                                          const weft_spawn_options* options, weft_task* out) WEFT_NOEXCEPT;

/* weft_spawn() is weft_runtime_spawn() into the runtime of the calling
 * task. Errors: as weft_runtime_spawn(); WEFT_NOT_IN_TASK. */
WEFT_C_API weft_result weft_spawn(void (*fn)(void* arg), void* arg, const weft_spawn_options* options,
                                  weft_task* out) WEFT_NOEXCEPT;

/* weft_runtime_block_on() runs fn(arg) as a task and waits for it: with 0
 * workers this thread runs every ready task until that one has finished.
 * Returns the task's result (see weft_task_join()). Errors: as
 * weft_runtime_spawn(); WEFT_WRONG_THREAD (inside a task, or another thread
 * drives rt). */
WEFT_C_API weft_result weft_runtime_block_on(weft_runtime rt, void (*fn)(void* arg), void* arg,
                                             const weft_spawn_options* options) WEFT_NOEXCEPT;

/* weft_runtime_run_once() runs, on this thread, every task of a 0-worker
 * runtime that is ready now (each until its next suspension point) and due
 * timers; never waits. *ran (may be NULL) gets how many ran. Errors:
 * WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE, WEFT_WRONG_THREAD (inside a
 * task, or another thread drives rt). */
WEFT_C_API weft_result weft_runtime_run_once(weft_runtime rt, size_t* ran) WEFT_NOEXCEPT;

/* weft_task_join() waits until the task has finished (a task suspends, a
 * thread blocks) or deadline_ns passes, and returns the task's result:
 * WEFT_OK (its body returned), WEFT_CALLBACK_FAILED (a C++ exception
 * escaped it), WEFT_CANCELED, WEFT_TIMED_OUT (its spawn deadline passed),
 * WEFT_STACK_ERROR (it got no stack). The handle is then stale. Errors
 * (the handle stays valid): WEFT_TIMED_OUT when deadline_ns passed first
 * (check with weft_task_is_done() if the difference matters);
 * WEFT_CANCELED (the calling task is canceled); WEFT_WRONG_STATE (from
 * inside the task itself, or another join of it is under way);
 * WEFT_INVALID_ARGUMENT; WEFT_INVALID_HANDLE (also: joined before). */
WEFT_C_API weft_result weft_task_join(weft_task t, int64_t deadline_ns) WEFT_NOEXCEPT;

/* weft_task_is_done() stores whether the task has finished. Errors:
 * WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE. */
WEFT_C_API weft_result weft_task_is_done(weft_task t, int* out) WEFT_NOEXCEPT;

/* weft_task_detach() lets the task run on without a handle (stale
 * afterwards). Errors: WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE,
 * WEFT_WRONG_STATE (a join is under way). */
WEFT_C_API weft_result weft_task_detach(weft_task t) WEFT_NOEXCEPT;

/* weft_task_cancel() asks the task to stop: its current or next blocking
 * call returns WEFT_CANCELED (so do all later ones); when its body returns
 * it ends WEFT_CANCELED. A finished task is left as it is. Never waits.
 * Errors: WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE. */
WEFT_C_API weft_result weft_task_cancel(weft_task t) WEFT_NOEXCEPT;

/* weft_task_id() stores the task's process-unique id. Errors:
 * WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE. */
WEFT_C_API weft_result weft_task_id(weft_task t, uint64_t* out) WEFT_NOEXCEPT;

/* weft_current_task_id() stores the calling task's id. Errors:
 * WEFT_INVALID_ARGUMENT, WEFT_NOT_IN_TASK. */
WEFT_C_API weft_result weft_current_task_id(uint64_t* out) WEFT_NOEXCEPT;

/* weft_yield() lets the other ready tasks run. Errors: WEFT_NOT_IN_TASK,
 * WEFT_CANCELED. */
WEFT_C_API weft_result weft_yield(void) WEFT_NOEXCEPT;

/* weft_sleep_until() suspends the calling task until deadline_ns (never
 * earlier); weft_sleep() for ns nanoseconds. Outside a task they block the
 * calling thread. Errors: WEFT_CANCELED, WEFT_INVALID_ARGUMENT (a negative
 * time). */
WEFT_C_API weft_result weft_sleep_until(int64_t deadline_ns) WEFT_NOEXCEPT;
WEFT_C_API weft_result weft_sleep(int64_t ns) WEFT_NOEXCEPT;

/* -------------------------------------------------------------- channels */

/* weft_channel names a channel of fixed-size values (weft L5): each value
 * goes to one receiver, in order per sender; from tasks and plain threads. */
typedef struct weft_channel {
    uint64_t id;
} weft_channel;

/* WEFT_CHANNEL_UNBOUNDED is the capacity of a channel whose send never
 * waits. */
#define WEFT_CHANNEL_UNBOUNDED SIZE_MAX

/* weft_channel_create() makes a channel of values of elem_size bytes
 * (pointers: sizeof(void*)) holding up to capacity of them (0: a rendezvous,
 * WEFT_CHANNEL_UNBOUNDED: no limit). Errors: WEFT_INVALID_ARGUMENT
 * (elem_size 0, out NULL), WEFT_OUT_OF_MEMORY. */
WEFT_C_API weft_result weft_channel_create(size_t elem_size, size_t capacity, weft_channel* out) WEFT_NOEXCEPT;

/* weft_channel_destroy() closes the channel (waiting senders and receivers
 * return WEFT_CLOSED) and frees it; the handle is stale afterwards.
 * Buffered values are dropped. Errors: WEFT_INVALID_ARGUMENT,
 * WEFT_INVALID_HANDLE. */
WEFT_C_API weft_result weft_channel_destroy(weft_channel ch) WEFT_NOEXCEPT;

/* weft_channel_send() copies elem_size bytes from elem into the channel,
 * waiting while it is full until deadline_ns. Errors:
 * WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE, WEFT_CLOSED, WEFT_TIMED_OUT,
 * WEFT_CANCELED (nothing was sent on any error). */
WEFT_C_API weft_result weft_channel_send(weft_channel ch, const void* elem, int64_t deadline_ns) WEFT_NOEXCEPT;

/* weft_channel_recv() takes the next value into out (elem_size bytes),
 * waiting while there is none until deadline_ns. Errors:
 * WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE, WEFT_CLOSED (closed and
 * drained), WEFT_TIMED_OUT, WEFT_CANCELED. */
WEFT_C_API weft_result weft_channel_recv(weft_channel ch, void* out, int64_t deadline_ns) WEFT_NOEXCEPT;

/* weft_channel_try_send() / weft_channel_try_recv() are send / recv that
 * never wait: WEFT_WOULD_BLOCK when they would have to. */
WEFT_C_API weft_result weft_channel_try_send(weft_channel ch, const void* elem) WEFT_NOEXCEPT;
WEFT_C_API weft_result weft_channel_try_recv(weft_channel ch, void* out) WEFT_NOEXCEPT;

/* weft_channel_close() closes the channel: receivers drain what is
 * buffered, then get WEFT_CLOSED; senders get WEFT_CLOSED. Closing twice is
 * WEFT_OK. Errors: WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE. */
WEFT_C_API weft_result weft_channel_close(weft_channel ch) WEFT_NOEXCEPT;

/* weft_channel_size() stores how many values are buffered (a snapshot).
 * Errors: WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE. */
WEFT_C_API weft_result weft_channel_size(weft_channel ch, size_t* out) WEFT_NOEXCEPT;

/* ------------------------------------------- mutex, condition variable */

/* weft_mutex names a task-aware mutex (a waiting task suspends, a waiting
 * thread blocks); weft_cond a condition variable used with one. */
typedef struct weft_mutex {
    uint64_t id;
} weft_mutex;
typedef struct weft_cond {
    uint64_t id;
} weft_cond;

/* weft_mutex_create() makes an unlocked mutex. Errors:
 * WEFT_INVALID_ARGUMENT, WEFT_OUT_OF_MEMORY. */
WEFT_C_API weft_result weft_mutex_create(weft_mutex* out) WEFT_NOEXCEPT;

/* weft_mutex_destroy() frees an unlocked mutex; the handle is stale
 * afterwards. Errors: WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE,
 * WEFT_WRONG_STATE (it is locked; nothing changed). */
WEFT_C_API weft_result weft_mutex_destroy(weft_mutex m) WEFT_NOEXCEPT;

/* weft_mutex_lock() takes the lock, waiting while another holds it (not
 * recursive: locking it twice waits forever). Errors: WEFT_INVALID_ARGUMENT,
 * WEFT_INVALID_HANDLE, WEFT_CANCELED (not locked then). */
WEFT_C_API weft_result weft_mutex_lock(weft_mutex m) WEFT_NOEXCEPT;

/* weft_mutex_lock_until() is weft_mutex_lock() with a deadline: also
 * WEFT_TIMED_OUT (not locked). */
WEFT_C_API weft_result weft_mutex_lock_until(weft_mutex m, int64_t deadline_ns) WEFT_NOEXCEPT;

/* weft_mutex_try_lock() takes the lock if that needs no wait, else
 * WEFT_WOULD_BLOCK. */
WEFT_C_API weft_result weft_mutex_try_lock(weft_mutex m) WEFT_NOEXCEPT;

/* weft_mutex_unlock() releases the lock. Requires: the caller holds it
 * (weft does not record owners). Errors: WEFT_INVALID_ARGUMENT,
 * WEFT_INVALID_HANDLE, WEFT_WRONG_STATE (it is not locked). */
WEFT_C_API weft_result weft_mutex_unlock(weft_mutex m) WEFT_NOEXCEPT;

/* weft_cond_create() makes a condition variable. Errors:
 * WEFT_INVALID_ARGUMENT, WEFT_OUT_OF_MEMORY. */
WEFT_C_API weft_result weft_cond_create(weft_cond* out) WEFT_NOEXCEPT;

/* weft_cond_destroy() wakes every waiter (they return WEFT_OK with their
 * mutex locked) and frees the variable; the handle is stale afterwards.
 * Errors: WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE. */
WEFT_C_API weft_result weft_cond_destroy(weft_cond c) WEFT_NOEXCEPT;

/* weft_cond_wait() releases m (which the caller holds), waits for a notify
 * and locks m again before it returns, on every path that got as far as
 * waiting (WEFT_OK, WEFT_TIMED_OUT, WEFT_CANCELED). Spurious wake-ups are
 * possible: wait in a loop over your condition. Errors:
 * WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE (c or m), WEFT_WRONG_STATE (m
 * is not locked; nothing changed), WEFT_CANCELED. */
WEFT_C_API weft_result weft_cond_wait(weft_cond c, weft_mutex m) WEFT_NOEXCEPT;

/* weft_cond_wait_until() is weft_cond_wait() with a deadline: also
 * WEFT_TIMED_OUT (m locked again). */
WEFT_C_API weft_result weft_cond_wait_until(weft_cond c, weft_mutex m, int64_t deadline_ns) WEFT_NOEXCEPT;

/* weft_cond_signal() wakes the longest-waiting waiter, if any;
 * weft_cond_broadcast() wakes all that wait now. Errors:
 * WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE. */
WEFT_C_API weft_result weft_cond_signal(weft_cond c) WEFT_NOEXCEPT;
WEFT_C_API weft_result weft_cond_broadcast(weft_cond c) WEFT_NOEXCEPT;

/* -------------------------------------------------------------------- IO */

/* weft_listener names a listening stream socket, weft_stream a connected
 * one: TCP (IPv4, IPv6) or Unix-domain (weft L6, io::listener and
 * io::stream). From tasks (a wait suspends the task, its worker runs
 * others) and plain threads (a wait blocks the thread in poll(2)). Several
 * tasks may use one stream at once (one reading while another writes).
 * A closed stream or listener keeps its handle until *_destroy(); every
 * call on it but close, destroy and weft_listener_port() returns
 * WEFT_CLOSED. A task's call that waits for a socket ends WEFT_CLOSED when
 * another task or thread closes (or destroys) it meanwhile; a plain
 * thread's wait is not interrupted by a close (its deadline ends it). */
typedef struct weft_listener {
    uint64_t id;
} weft_listener;
typedef struct weft_stream {
    uint64_t id;
} weft_stream;

/* weft_last_errno() stores the errno of the last IO call (a function of
 * this section other than itself, or weft_resolve()) made on the calling
 * thread if it
 * returned WEFT_IO_ERROR, and 0 if it returned anything else. A task reads
 * it before its next call that can wait (a task may move to another thread
 * there); it is kept per thread, never in C's errno. Errors:
 * WEFT_INVALID_ARGUMENT. */
WEFT_C_API weft_result weft_last_errno(int* out) WEFT_NOEXCEPT;

/* weft_tcp_listen() makes a TCP listener on a numeric IPv4 ("127.0.0.1",
 * "0.0.0.0") or IPv6 ("::1", "::"; no brackets) address and `port` (0: a
 * free port, see weft_listener_port()), SO_REUSEADDR set, with a queue of
 * `backlog` connections (0: SOMAXCONN). Errors: WEFT_INVALID_ARGUMENT
 * (address or out NULL, address not numeric, backlog < 0), WEFT_IO_ERROR
 * (EADDRINUSE, EACCES, ...), WEFT_OUT_OF_MEMORY. */
WEFT_C_API weft_result weft_tcp_listen(const char* address, uint16_t port, int backlog,
                                       weft_listener* out) WEFT_NOEXCEPT;

/* weft_unix_listen() makes a Unix-domain listener at `path`; a path that
 * starts with '@' is in the abstract namespace (no file). A file path must
 * not exist (WEFT_IO_ERROR, EADDRINUSE) and is not removed when the
 * listener closes. backlog as weft_tcp_listen(). Errors:
 * WEFT_INVALID_ARGUMENT (path or out NULL, path empty or too long, backlog
 * < 0), WEFT_IO_ERROR, WEFT_OUT_OF_MEMORY. */
WEFT_C_API weft_result weft_unix_listen(const char* path, int backlog, weft_listener* out) WEFT_NOEXCEPT;

/* weft_listener_port() stores the TCP port the listener is bound to (0
 * for a Unix-domain one); it stays readable after weft_listener_close().
 * Errors: WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE. */
WEFT_C_API weft_result weft_listener_port(weft_listener l, uint16_t* out) WEFT_NOEXCEPT;

/* weft_listener_accept() waits until deadline_ns for the next connection
 * and stores it. Errors: WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE,
 * WEFT_CLOSED (closed before or during the wait), WEFT_TIMED_OUT,
 * WEFT_CANCELED, WEFT_IO_ERROR (EMFILE, ENFILE: the connection stays
 * queued, accept again later), WEFT_OUT_OF_MEMORY. */
WEFT_C_API weft_result weft_listener_accept(weft_listener l, int64_t deadline_ns, weft_stream* out) WEFT_NOEXCEPT;

/* weft_listener_close() closes the socket (accepts waiting in tasks return
 * WEFT_CLOSED); the handle stays valid until weft_listener_destroy().
 * Closing twice is WEFT_OK. Errors: WEFT_INVALID_ARGUMENT,
 * WEFT_INVALID_HANDLE, WEFT_IO_ERROR (close(2) failed; closed anyway). */
WEFT_C_API weft_result weft_listener_close(weft_listener l) WEFT_NOEXCEPT;

/* weft_listener_destroy() closes the listener if it is open and frees it;
 * the handle is stale afterwards. Calls in progress keep the object until
 * they return (WEFT_CLOSED). Errors: WEFT_INVALID_ARGUMENT,
 * WEFT_INVALID_HANDLE. */
WEFT_C_API weft_result weft_listener_destroy(weft_listener l) WEFT_NOEXCEPT;

/* weft_tcp_connect() connects to a numeric IPv4 or IPv6 address (as
 * weft_tcp_listen()) and port, the whole connect bounded by deadline_ns (a
 * deadline already passed is WEFT_TIMED_OUT without trying). Errors:
 * WEFT_INVALID_ARGUMENT (address or out NULL, address not numeric, port
 * 0, a deadline below -1), WEFT_TIMED_OUT, WEFT_CANCELED, WEFT_IO_ERROR
 * (ECONNREFUSED, ENETUNREACH, ...), WEFT_OUT_OF_MEMORY. */
WEFT_C_API weft_result weft_tcp_connect(const char* address, uint16_t port, int64_t deadline_ns,
                                        weft_stream* out) WEFT_NOEXCEPT;

/* weft_unix_connect() connects to a Unix-domain listener at `path` ('@':
 * abstract); a listener whose queue is full is retried until deadline_ns.
 * Errors: as weft_tcp_connect() (WEFT_IO_ERROR: ENOENT, ECONNREFUSED,
 * ...); WEFT_INVALID_ARGUMENT also for an empty or too long path. */
WEFT_C_API weft_result weft_unix_connect(const char* path, int64_t deadline_ns, weft_stream* out) WEFT_NOEXCEPT;

/* weft_stream_read() reads what has arrived, up to len bytes into buf,
 * waiting until deadline_ns while nothing has, and stores the count in
 * *got (at least 1; len 0: 0 at once). The end of the stream is WEFT_EOF
 * (the peer shut down its writing side or closed), also on every later
 * read. Errors: WEFT_INVALID_ARGUMENT (buf NULL with len > 0, len above
 * PTRDIFF_MAX, got NULL, a deadline below -1), WEFT_INVALID_HANDLE,
 * WEFT_CLOSED, WEFT_TIMED_OUT,
 * WEFT_CANCELED, WEFT_IO_ERROR (ECONNRESET, ...). Nothing was read on any
 * of them. */
WEFT_C_API weft_result weft_stream_read(weft_stream s, void* buf, size_t len, int64_t deadline_ns,
                                        size_t* got) WEFT_NOEXCEPT;

/* weft_stream_read_exact() reads exactly len bytes into buf, waiting until
 * deadline_ns. *got (got may be NULL) is the count read, on every result
 * but WEFT_INVALID_ARGUMENT: len on WEFT_OK, what had arrived on an error.
 * Errors: as weft_stream_read(); WEFT_EOF when the stream ends first. */
WEFT_C_API weft_result weft_stream_read_exact(weft_stream s, void* buf, size_t len, int64_t deadline_ns,
                                              size_t* got) WEFT_NOEXCEPT;

/* weft_stream_write_all() writes the len bytes of buf, waiting while the
 * socket is full until deadline_ns. *written (may be NULL) is the count
 * written, on every result but WEFT_INVALID_ARGUMENT. A peer that has gone
 * is WEFT_IO_ERROR (EPIPE or ECONNRESET), never SIGPIPE. Errors:
 * WEFT_INVALID_ARGUMENT (buf NULL with len > 0, len above PTRDIFF_MAX, a
 * deadline below -1), WEFT_INVALID_HANDLE, WEFT_CLOSED, WEFT_TIMED_OUT,
 * WEFT_CANCELED, WEFT_IO_ERROR. */
WEFT_C_API weft_result weft_stream_write_all(weft_stream s, const void* buf, size_t len, int64_t deadline_ns,
                                             size_t* written) WEFT_NOEXCEPT;

/* weft_stream_shutdown_write() ends the writing side (the peer reads
 * WEFT_EOF after what was written); reading goes on. Errors:
 * WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE, WEFT_CLOSED, WEFT_IO_ERROR
 * (ENOTCONN). */
WEFT_C_API weft_result weft_stream_shutdown_write(weft_stream s) WEFT_NOEXCEPT;

/* weft_stream_close() closes the socket (reads and writes waiting in tasks
 * return WEFT_CLOSED); the handle stays valid until weft_stream_destroy().
 * Closing twice is WEFT_OK. Errors: WEFT_INVALID_ARGUMENT,
 * WEFT_INVALID_HANDLE, WEFT_IO_ERROR (close(2) failed; closed anyway). */
WEFT_C_API weft_result weft_stream_close(weft_stream s) WEFT_NOEXCEPT;

/* weft_stream_destroy() closes the stream if it is open and frees it; the
 * handle is stale afterwards. Calls in progress keep the object until they
 * return (WEFT_CLOSED). Errors: WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE. */
WEFT_C_API weft_result weft_stream_destroy(weft_stream s) WEFT_NOEXCEPT;

/* weft_stream_fd() stores the socket's file descriptor (non-blocking), for
 * setsockopt() and getpeername(); it stays the stream's: do not close it,
 * and do not use it after weft_stream_close() (its number may be reused).
 * Errors: WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE, WEFT_CLOSED. */
WEFT_C_API weft_result weft_stream_fd(weft_stream s, int* out) WEFT_NOEXCEPT;

/* --------------------------------------------------- signals, names */

/* weft_signal_set names a set of signals to wait for (weft L6,
 * io::signal_set): a task waits for SIGTERM or SIGINT like for a socket. */
typedef struct weft_signal_set {
    uint64_t id;
} weft_signal_set;

/* weft_signal_set_create() starts catching the `count` signals in
 * `signals` (weft's handler replaces their disposition; weft's signal
 * thread starts if the process has none). A signal delivered to the
 * process is reported once to each set holding it. Errors:
 * WEFT_INVALID_ARGUMENT (signals or out NULL, count 0, a number outside
 * 1 .. NSIG - 1, a signal that cannot or must not be caught: SIGKILL,
 * SIGSTOP, SIGSEGV, SIGBUS, SIGILL, SIGFPE, glibc's 32 and 33; nothing
 * installed), WEFT_SYSTEM_ERROR (the signal thread could not start),
 * WEFT_OUT_OF_MEMORY. */
WEFT_C_API weft_result weft_signal_set_create(const int* signals, size_t count, weft_signal_set* out) WEFT_NOEXCEPT;

/* weft_signal_set_wait() waits until deadline_ns for a signal of the set
 * and stores its number (at once if one is pending). From tasks (the task
 * suspends) and plain threads. Errors: WEFT_INVALID_ARGUMENT (signo NULL, a
 * deadline below -1), WEFT_INVALID_HANDLE, WEFT_TIMED_OUT, WEFT_CANCELED. */
WEFT_C_API weft_result weft_signal_set_wait(weft_signal_set s, int64_t deadline_ns, int* signo) WEFT_NOEXCEPT;

/* weft_signal_set_destroy() stops catching the set's signals that no other
 * set holds (their saved disposition is restored) and frees it; the handle
 * is stale afterwards. A wait in progress keeps the set until it returns.
 * Errors: WEFT_INVALID_ARGUMENT, WEFT_INVALID_HANDLE. */
WEFT_C_API weft_result weft_signal_set_destroy(weft_signal_set s) WEFT_NOEXCEPT;

/* weft_address is one address weft_resolve() found, in the numeric form
 * weft_tcp_connect() and weft_tcp_listen() take. */
typedef struct weft_address {
    char ip[46];   /* "127.0.0.1", "::1": NUL-terminated (INET6_ADDRSTRLEN) */
    uint16_t port; /* the service's port; 0 when service was NULL */
} weft_address;

/* weft_resolve() looks up `host` (a name, or a numeric address) and
 * `service` (NULL, a port number "6379" or a service name "http") with
 * getaddrinfo() (io::resolve()): inside a task on the runtime's blocking
 * pool (the task suspends, its worker runs others), on a plain thread
 * directly. It stores up to `capacity` of the stream addresses found in
 * out, in getaddrinfo's order, and their number in *count. Errors:
 * WEFT_INVALID_ARGUMENT (host NULL or empty, out NULL with capacity > 0,
 * count NULL), WEFT_NOT_FOUND (getaddrinfo failed: weft_last_error() says
 * why, e.g. the name is unknown), WEFT_IO_ERROR (getaddrinfo's EAI_SYSTEM:
 * weft_last_errno()), WEFT_OUT_OF_MEMORY. A cancellation takes effect when
 * the lookup has returned (WEFT_CANCELED). */
WEFT_C_API weft_result weft_resolve(const char* host, const char* service, weft_address* out, size_t capacity,
                                    size_t* count) WEFT_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* WEFT_WEFT_H */
