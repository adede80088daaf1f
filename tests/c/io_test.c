/* io_test.c: the C API's TCP and Unix-domain streams and listeners, every
 * call and its misuses, from tasks (0 and 2 workers) and a plain thread,
 * built as C11. Network only on 127.0.0.1 and ::1; Unix-domain sockets in
 * the abstract namespace and in a temporary directory the test removes;
 * every wait has a deadline or is ended by the test, also the calls that
 * must fail at once (a wrong implementation fails the check, never
 * hangs). */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "c_test.h"

/* LONG is the deadline of waits that must not hang: far longer than any of
 * them takes, short enough to fail the test instead of the CTest timeout. */
#define LONG (10 * 1000 * MS)

/* last_errno() is weft_last_errno() for tests. */
static int last_errno(void) {
    int e = -1;
    CHECK_OK(weft_last_errno(&e));
    return e;
}

/* run_in_task() runs fn(arg) as a task of a runtime with `workers`
 * workers, and checks that it returned. */
static void run_in_task(unsigned workers, void (*fn)(void*), void* arg) {
    weft_runtime rt = make_runtime(workers);
    CHECK_OK(weft_runtime_block_on(rt, fn, arg, NULL));
    CHECK_OK(weft_runtime_destroy(rt));
}

/* connected_pair() connects two streams over 127.0.0.1 (the connect
 * completes in the listen queue, so one task or thread can make both). */
static void connected_pair(weft_stream* a, weft_stream* b) {
    weft_listener l;
    uint16_t port = 0;
    CHECK_OK(weft_tcp_listen("127.0.0.1", 0, 0, &l));
    CHECK_OK(weft_listener_port(l, &port));
    CHECK(port != 0);
    CHECK_OK(weft_tcp_connect("127.0.0.1", port, now_ns() + LONG, a));
    CHECK_OK(weft_listener_accept(l, now_ns() + LONG, b));
    CHECK_OK(weft_listener_destroy(l));
}

/* read_n() reads exactly n bytes with weft_stream_read(), however they
 * arrive. */
static void read_n(weft_stream s, char* buf, size_t n) {
    size_t have = 0;
    for (int i = 0; i < 1000 && have < n; ++i) {
        size_t got = 0;
        CHECK_OK(weft_stream_read(s, buf + have, n - have, now_ns() + LONG, &got));
        CHECK(got > 0 && got <= n - have);
        have += got;
    }
    CHECK(have == n);
}

/* wait_until_set() waits (in a task) until *flag is set, then 20 ms more so
 * that the task that set it has gone on to block in its next call. */
static void wait_until_set(atomic_int* flag) {
    for (int i = 0; i < 5000 && !atomic_load(flag); ++i) CHECK_OK(weft_sleep(MS));
    CHECK(atomic_load(flag));
    CHECK_OK(weft_sleep(20 * MS));
}

/* ---- names, arguments, handles --------------------------------------------- */

static void result_str_names_the_io_codes(void) {
    CHECK(strncmp(weft_result_str(WEFT_IO_ERROR), "WEFT_IO_ERROR:", 14) == 0);
    CHECK(strncmp(weft_result_str(WEFT_EOF), "WEFT_EOF:", 9) == 0);
    CHECK(strncmp(weft_result_str(WEFT_CLOSED), "WEFT_CLOSED:", 12) == 0);
}

static void every_call_checks_its_arguments(void) {
    weft_listener l;
    weft_stream s;
    char buf[8];
    char long_path[200];
    char long_address[100]; /* longer than any numeric address */
    memset(long_path, 'x', sizeof long_path - 1);
    long_path[sizeof long_path - 1] = '\0';
    memset(long_address, '1', sizeof long_address - 1);
    long_address[sizeof long_address - 1] = '\0';
    CHECK_RESULT(weft_last_errno(NULL), WEFT_INVALID_ARGUMENT);

    l.id = 4242; /* not written on WEFT_INVALID_ARGUMENT */
    CHECK_RESULT(weft_tcp_listen(NULL, 0, 0, &l), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_tcp_listen("127.0.0.1", 0, 0, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_tcp_listen("localhost", 0, 0, &l), WEFT_INVALID_ARGUMENT); /* numeric only */
    CHECK_RESULT(weft_tcp_listen("", 0, 0, &l), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_tcp_listen("127.0.0", 0, 0, &l), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_tcp_listen("256.0.0.1", 0, 0, &l), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_tcp_listen("127.0.0.1:80", 0, 0, &l), WEFT_INVALID_ARGUMENT); /* the port is its own argument */
    CHECK_RESULT(weft_tcp_listen("::zz", 0, 0, &l), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_tcp_listen("[::1]", 0, 0, &l), WEFT_INVALID_ARGUMENT); /* no brackets */
    CHECK_RESULT(weft_tcp_listen(long_address, 0, 0, &l), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_tcp_listen("127.0.0.1", 0, -1, &l), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_tcp_listen("127.0.0.1", 0, INT_MIN, &l), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_unix_listen(NULL, 0, &l), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_unix_listen("@x", 0, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_unix_listen("", 0, &l), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_unix_listen(long_path, 0, &l), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_unix_listen("@x", -1, &l), WEFT_INVALID_ARGUMENT);
    CHECK(l.id == 4242);
    CHECK(last_errno() == 0); /* WEFT_INVALID_ARGUMENT is no system error */

    s.id = 4242;
    CHECK_RESULT(weft_tcp_connect(NULL, 1, WEFT_NO_DEADLINE, &s), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_tcp_connect("127.0.0.1", 1, WEFT_NO_DEADLINE, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_tcp_connect("127.0.0.1", 1, -2, &s), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_tcp_connect("127.0.0.1", 1, INT64_MIN, &s), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_tcp_connect("127.0.0.1", 0, now_ns() + LONG, &s), WEFT_INVALID_ARGUMENT); /* no peer has port 0 */
    CHECK_RESULT(weft_tcp_connect("::1", 0, now_ns() + LONG, &s), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_tcp_connect("nope", 1, WEFT_NO_DEADLINE, &s), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_tcp_connect("", 1, WEFT_NO_DEADLINE, &s), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_tcp_connect("[::1]", 1, WEFT_NO_DEADLINE, &s), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_tcp_connect("127.0.0.1:1", 1, WEFT_NO_DEADLINE, &s), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_tcp_connect(long_address, 1, WEFT_NO_DEADLINE, &s), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_unix_connect(NULL, WEFT_NO_DEADLINE, &s), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_unix_connect("@x", WEFT_NO_DEADLINE, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_unix_connect("@x", -2, &s), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_unix_connect("", WEFT_NO_DEADLINE, &s), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_unix_connect(long_path, WEFT_NO_DEADLINE, &s), WEFT_INVALID_ARGUMENT);
    CHECK(s.id == 4242);
    CHECK(last_errno() == 0);

    /* A live listener and stream: null pointers, bad sizes and bad
     * deadlines. Nothing is queued or readable, so a call that missed its
     * check would wait: each has a deadline that fails the check instead
     * of hanging. A huge backlog is cut to the system's limit. */
    weft_stream a, b;
    uint16_t port = 0;
    int fd = -1;
    size_t got = 77;
    const size_t huge[] = {SIZE_MAX, (size_t)-4, (size_t)PTRDIFF_MAX + 1};
    CHECK_OK(weft_tcp_listen("127.0.0.1", 0, INT_MAX, &l));
    CHECK_OK(weft_listener_port(l, &port));
    CHECK_OK(weft_tcp_connect("127.0.0.1", port, now_ns() + LONG, &a));
    CHECK_OK(weft_listener_accept(l, now_ns() + LONG, &b));
    CHECK_RESULT(weft_listener_port(l, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_listener_accept(l, now_ns() + LONG, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_listener_accept(l, -2, &s), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_stream_read(a, NULL, 4, now_ns() + LONG, &got), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_stream_read(a, buf, 4, now_ns() + LONG, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_stream_read(a, buf, 4, -2, &got), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_stream_read_exact(a, NULL, 4, now_ns() + LONG, &got), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_stream_read_exact(a, buf, 4, -2, &got), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_stream_write_all(a, NULL, 4, now_ns() + LONG, &got), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_stream_write_all(a, "abcd", 4, -2, &got), WEFT_INVALID_ARGUMENT);
    /* A size no object has (a negative count converted, most likely). */
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; ++i) {
        CHECK_RESULT(weft_stream_read(a, buf, huge[i], now_ns() + LONG, &got), WEFT_INVALID_ARGUMENT);
        CHECK_RESULT(weft_stream_read_exact(a, buf, huge[i], now_ns() + LONG, &got), WEFT_INVALID_ARGUMENT);
        CHECK_RESULT(weft_stream_write_all(a, "abcd", huge[i], now_ns() + LONG, &got), WEFT_INVALID_ARGUMENT);
    }
    CHECK(got == 77); /* not written on WEFT_INVALID_ARGUMENT */
    CHECK_RESULT(weft_stream_fd(a, NULL), WEFT_INVALID_ARGUMENT);
    /* None of them sent anything: b has nothing to read. */
    CHECK_RESULT(weft_stream_read(b, buf, sizeof buf, 0, &got), WEFT_TIMED_OUT);
    CHECK(got == 77);
    /* len 0 needs no buffer and does not wait. */
    CHECK_OK(weft_stream_read(a, NULL, 0, now_ns() + LONG, &got));
    CHECK(got == 0);
    got = 77;
    CHECK_OK(weft_stream_read_exact(a, NULL, 0, now_ns() + LONG, &got));
    CHECK(got == 0);
    CHECK_OK(weft_stream_write_all(a, NULL, 0, now_ns() + LONG, NULL));
    CHECK_OK(weft_stream_fd(a, &fd));
    CHECK(fd >= 0);

    /* Zero handles. */
    weft_stream zs = {0};
    weft_listener zl = {0};
    CHECK_RESULT(weft_stream_read(zs, buf, 1, WEFT_NO_DEADLINE, &got), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_stream_read_exact(zs, buf, 1, WEFT_NO_DEADLINE, &got), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_stream_write_all(zs, buf, 1, WEFT_NO_DEADLINE, &got), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_stream_shutdown_write(zs), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_stream_close(zs), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_stream_destroy(zs), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_stream_fd(zs, &fd), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_listener_port(zl, &port), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_listener_accept(zl, WEFT_NO_DEADLINE, &s), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_listener_close(zl), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_listener_destroy(zl), WEFT_INVALID_ARGUMENT);

    /* Handles of another kind: a channel's and a listener's as a stream, a
     * stream's as a listener. Nothing happens to the objects they name. */
    weft_channel ch;
    CHECK_OK(weft_channel_create(sizeof(int), 1, &ch));
    weft_stream foreign[2];
    foreign[0].id = ch.id;
    foreign[1].id = l.id;
    for (int i = 0; i < 2; ++i) {
        weft_stream f = foreign[i];
        got = 77;
        CHECK_RESULT(weft_stream_read(f, buf, 1, WEFT_NO_DEADLINE, &got), WEFT_INVALID_HANDLE);
        CHECK_RESULT(weft_stream_read_exact(f, buf, 1, WEFT_NO_DEADLINE, &got), WEFT_INVALID_HANDLE);
        CHECK(got == 0); /* the count is written on every result but WEFT_INVALID_ARGUMENT */
        CHECK_RESULT(weft_stream_write_all(f, buf, 1, WEFT_NO_DEADLINE, &got), WEFT_INVALID_HANDLE);
        CHECK_RESULT(weft_stream_shutdown_write(f), WEFT_INVALID_HANDLE);
        CHECK_RESULT(weft_stream_close(f), WEFT_INVALID_HANDLE);
        CHECK_RESULT(weft_stream_destroy(f), WEFT_INVALID_HANDLE);
        CHECK_RESULT(weft_stream_fd(f, &fd), WEFT_INVALID_HANDLE);
    }
    weft_listener as_listener;
    as_listener.id = a.id;
    CHECK_RESULT(weft_listener_port(as_listener, &port), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_listener_accept(as_listener, WEFT_NO_DEADLINE, &s), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_listener_close(as_listener), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_listener_destroy(as_listener), WEFT_INVALID_HANDLE);
    int v = 5;
    CHECK_OK(weft_channel_try_send(ch, &v)); /* the channel is untouched */
    CHECK_OK(weft_channel_destroy(ch));
    CHECK_OK(weft_stream_write_all(a, "p", 1, now_ns() + LONG, NULL)); /* and a still works */
    read_n(b, buf, 1);
    CHECK(buf[0] == 'p');

    /* A closed stream: WEFT_CLOSED, except close (twice is fine) and destroy. */
    CHECK_OK(weft_stream_close(a));
    CHECK_OK(weft_stream_close(a));
    got = 77;
    CHECK_RESULT(weft_stream_read(a, buf, 1, now_ns() + LONG, &got), WEFT_CLOSED);
    CHECK_RESULT(weft_stream_read(a, buf, 0, now_ns() + LONG, &got), WEFT_CLOSED);
    CHECK(got == 77);
    CHECK_RESULT(weft_stream_read_exact(a, buf, 1, now_ns() + LONG, &got), WEFT_CLOSED);
    CHECK(got == 0);
    got = 77;
    CHECK_RESULT(weft_stream_write_all(a, buf, 1, now_ns() + LONG, &got), WEFT_CLOSED);
    CHECK(got == 0);
    CHECK_RESULT(weft_stream_shutdown_write(a), WEFT_CLOSED);
    CHECK_RESULT(weft_stream_fd(a, &fd), WEFT_CLOSED);
    CHECK_OK(weft_stream_destroy(a));
    /* Stale now. */
    CHECK_RESULT(weft_stream_read(a, buf, 1, WEFT_NO_DEADLINE, &got), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_stream_read_exact(a, buf, 1, WEFT_NO_DEADLINE, &got), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_stream_write_all(a, buf, 1, WEFT_NO_DEADLINE, &got), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_stream_shutdown_write(a), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_stream_close(a), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_stream_fd(a, &fd), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_stream_destroy(a), WEFT_INVALID_HANDLE);
    /* Arguments are checked before the handle is looked at. */
    CHECK_RESULT(weft_stream_read(a, NULL, 1, WEFT_NO_DEADLINE, &got), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_stream_read(a, buf, 1, WEFT_NO_DEADLINE, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_stream_read_exact(a, buf, SIZE_MAX, WEFT_NO_DEADLINE, &got), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_stream_write_all(a, buf, 1, -2, &got), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_stream_fd(a, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_OK(weft_stream_destroy(b)); /* destroy closes an open stream */

    /* A closed listener keeps its port; accept is WEFT_CLOSED. */
    uint16_t again = 0;
    CHECK_OK(weft_listener_close(l));
    CHECK_OK(weft_listener_close(l));
    CHECK_OK(weft_listener_port(l, &again));
    CHECK(again == port);
    CHECK_RESULT(weft_listener_accept(l, now_ns() + LONG, &s), WEFT_CLOSED);
    CHECK_OK(weft_listener_destroy(l));
    CHECK_RESULT(weft_listener_port(l, &again), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_listener_accept(l, WEFT_NO_DEADLINE, &s), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_listener_close(l), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_listener_destroy(l), WEFT_INVALID_HANDLE);
    CHECK_RESULT(weft_listener_port(l, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_listener_accept(l, WEFT_NO_DEADLINE, NULL), WEFT_INVALID_ARGUMENT);
    CHECK_RESULT(weft_listener_accept(l, -2, &s), WEFT_INVALID_ARGUMENT);
    CHECK(last_errno() == 0); /* the last IO call did not return WEFT_IO_ERROR */
}

/* ---- echo ------------------------------------------------------------------- */

enum { chunk = 4096, chunks = 16 };

struct echo {
    weft_listener l;
    uint16_t port;
    size_t echoed; /* bytes the server sent back */
    weft_result ended; /* how the server's reading ended */
};

/* echo_server accepts one connection and sends back what it reads until
 * the stream ends. */
static void echo_server(void* arg) {
    struct echo* e = arg;
    weft_stream c;
    CHECK_OK(weft_listener_accept(e->l, now_ns() + LONG, &c));
    char buf[1500];
    weft_result r = WEFT_UNKNOWN_ERROR;
    for (int i = 0; i < 100000; ++i) {
        size_t got = 0;
        r = weft_stream_read(c, buf, sizeof buf, now_ns() + LONG, &got);
        if (r != WEFT_OK) break;
        size_t put = 0;
        CHECK_OK(weft_stream_write_all(c, buf, got, now_ns() + LONG, &put));
        CHECK(put == got);
        e->echoed += got;
    }
    e->ended = r;
    CHECK_OK(weft_stream_destroy(c));
}

/* echo_exchange() sends chunks of a pattern on s and reads each back. */
static void echo_exchange(weft_stream s, int n_chunks) {
    static char out[chunk], in[chunk]; /* one exchange at a time */
    for (int i = 0; i < n_chunks; ++i) {
        for (int j = 0; j < chunk; ++j) out[j] = (char)((i * 7 + j) & 0xff);
        memset(in, 0, sizeof in);
        size_t written = 0, got = 0;
        CHECK_OK(weft_stream_write_all(s, out, chunk, now_ns() + LONG, &written));
        CHECK(written == chunk);
        CHECK_OK(weft_stream_read_exact(s, in, chunk, now_ns() + LONG, &got));
        CHECK(got == chunk);
        CHECK(memcmp(in, out, chunk) == 0);
    }
}

/* finish_echo() ends the client's side and checks the server's end: it saw
 * WEFT_EOF after everything, and closed, which the client reads as
 * WEFT_EOF. */
static void finish_echo(weft_stream s, weft_task server, struct echo* e, size_t sent) {
    char c;
    size_t got = 77;
    CHECK_OK(weft_stream_shutdown_write(s));
    CHECK_RESULT(weft_stream_read(s, &c, 1, now_ns() + LONG, &got), WEFT_EOF);
    CHECK(got == 77);
    CHECK_OK(weft_task_join(server, now_ns() + LONG));
    CHECK_RESULT(e->ended, WEFT_EOF);
    CHECK(e->echoed == sent);
    CHECK_OK(weft_stream_destroy(s));
}

/* echo_client talks to an echo server task over TCP at the numeric
 * loopback address arg ("127.0.0.1" or "::1"). */
static void echo_client(void* arg) {
    const char* address = arg;
    const int ipv6 = strchr(address, ':') != NULL;
    struct echo e;
    memset(&e, 0, sizeof e);
    CHECK_OK(weft_tcp_listen(address, 0, 0, &e.l));
    CHECK_OK(weft_listener_port(e.l, &e.port));
    CHECK(e.port != 0);
    weft_listener twice; /* SO_REUSEADDR does not share a listening port */
    CHECK_RESULT(weft_tcp_listen(address, e.port, 0, &twice), WEFT_IO_ERROR);
    CHECK(last_errno() == EADDRINUSE);
    weft_task server;
    CHECK_OK(weft_spawn(echo_server, &e, NULL, &server));
    weft_stream s;
    CHECK_OK(weft_tcp_connect(address, e.port, now_ns() + LONG, &s));
    /* The fd is the socket's: an option set through it reads back, and its
     * peer is the listener's address and port. */
    int fd = -1, on = 1, value = 0;
    socklen_t len = sizeof value;
    CHECK_OK(weft_stream_fd(s, &fd));
    CHECK(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) == 0);
    CHECK(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &value, &len) == 0);
    CHECK(value != 0);
    struct sockaddr_storage peer;
    socklen_t peer_len = sizeof peer;
    CHECK(getpeername(fd, (struct sockaddr*)&peer, &peer_len) == 0);
    if (ipv6) {
        const struct sockaddr_in6* p6 = (const struct sockaddr_in6*)&peer;
        CHECK(p6->sin6_family == AF_INET6 && ntohs(p6->sin6_port) == e.port);
        CHECK(memcmp(&p6->sin6_addr, &in6addr_loopback, sizeof in6addr_loopback) == 0);
    } else {
        const struct sockaddr_in* p4 = (const struct sockaddr_in*)&peer;
        CHECK(p4->sin_family == AF_INET && ntohs(p4->sin_port) == e.port);
        CHECK(ntohl(p4->sin_addr.s_addr) == INADDR_LOOPBACK);
    }
    echo_exchange(s, chunks);
    finish_echo(s, server, &e, (size_t)chunk * chunks);
    CHECK_OK(weft_listener_destroy(e.l));
}

static char loopback_v4[] = "127.0.0.1";
static char loopback_v6[] = "::1";

static void echo_over_loopback_tcp_0_workers(void) { run_in_task(0, echo_client, loopback_v4); }
static void echo_over_loopback_tcp_2_workers(void) { run_in_task(2, echo_client, loopback_v4); }

/* ipv6_loopback() says whether ::1 can be listened on: a host or
 * container without IPv6 gives EADDRNOTAVAIL (no ::1 on lo) or
 * EAFNOSUPPORT (IPv6 off); anything else fails the test. */
static int ipv6_loopback(void) {
    weft_listener l;
    const weft_result r = weft_tcp_listen(loopback_v6, 0, 0, &l);
    if (r == WEFT_OK) {
        CHECK_OK(weft_listener_destroy(l));
        return 1;
    }
    CHECK_RESULT(r, WEFT_IO_ERROR);
    const int e = last_errno();
    CHECK(e == EADDRNOTAVAIL || e == EAFNOSUPPORT);
    printf("  (no IPv6 loopback here: %s; skipped)\n", strerror(e));
    return 0;
}

static void echo_over_ipv6_loopback_0_workers(void) {
    if (ipv6_loopback()) run_in_task(0, echo_client, loopback_v6);
}
static void echo_over_ipv6_loopback_2_workers(void) {
    if (ipv6_loopback()) run_in_task(2, echo_client, loopback_v6);
}

/* The client on the main thread (no task: its waits block in poll), the
 * server a task of a 2-worker runtime. */
static void a_plain_thread_talks_to_a_server_task(void) {
    weft_runtime rt = make_runtime(2);
    struct echo e;
    memset(&e, 0, sizeof e);
    CHECK_OK(weft_tcp_listen("127.0.0.1", 0, 0, &e.l));
    CHECK_OK(weft_listener_port(e.l, &e.port));
    weft_task server;
    CHECK_OK(weft_runtime_spawn(rt, echo_server, &e, NULL, &server));
    weft_stream s;
    CHECK_OK(weft_tcp_connect("127.0.0.1", e.port, now_ns() + LONG, &s));
    echo_exchange(s, 4);
    /* The server waits for more: a deadline ends the thread's read. */
    char c;
    size_t got = 77;
    int64_t t0 = now_ns();
    CHECK_RESULT(weft_stream_read(s, &c, 1, t0 + 5 * MS, &got), WEFT_TIMED_OUT);
    CHECK(now_ns() - t0 >= 5 * MS);
    CHECK(got == 77);
    finish_echo(s, server, &e, (size_t)chunk * 4);
    CHECK_OK(weft_listener_destroy(e.l));
    CHECK_OK(weft_runtime_destroy(rt));
}

static void unix_echo_client(void* arg) {
    const char* path = arg;
    struct echo e;
    memset(&e, 0, sizeof e);
    CHECK_OK(weft_unix_listen(path, 0, &e.l));
    e.port = 77;
    CHECK_OK(weft_listener_port(e.l, &e.port));
    CHECK(e.port == 0);
    weft_listener twice;
    CHECK_RESULT(weft_unix_listen(path, 0, &twice), WEFT_IO_ERROR);
    CHECK(last_errno() == EADDRINUSE);
    weft_task server;
    CHECK_OK(weft_spawn(echo_server, &e, NULL, &server));
    weft_stream s;
    CHECK_OK(weft_unix_connect(path, now_ns() + LONG, &s));
    CHECK(last_errno() == 0);
    echo_exchange(s, 4);
    finish_echo(s, server, &e, (size_t)chunk * 4);
    CHECK_OK(weft_listener_destroy(e.l));
    /* Nobody listens there any more. */
    CHECK_RESULT(weft_unix_connect(path, now_ns() + LONG, &s), WEFT_IO_ERROR);
    CHECK(last_errno() == ECONNREFUSED);
}

static void unix_domain_echo_with(unsigned workers) {
    char path[64];
    snprintf(path, sizeof path, "@weft-c-io-test-%ld-%u", (long)getpid(), workers);
    run_in_task(workers, unix_echo_client, path);
}
static void unix_domain_echo_0_workers(void) { unix_domain_echo_with(0); }
static void unix_domain_echo_2_workers(void) { unix_domain_echo_with(2); }

/* The same at a file path, in a directory of the test's own that it
 * removes: the socket file outlives its listener (the program removes
 * it), and a path with no socket is ENOENT. */
static void unix_file_echo_with(unsigned workers) {
    char dir[] = "/tmp/weft-c-io-test-XXXXXX";
    char path[64];
    struct stat st;
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/echo.sock", dir);
    run_in_task(workers, unix_echo_client, path);
    CHECK(stat(path, &st) == 0 && S_ISSOCK(st.st_mode)); /* not removed by the listener */
    CHECK(unlink(path) == 0);
    weft_stream s;
    CHECK_RESULT(weft_unix_connect(path, now_ns() + LONG, &s), WEFT_IO_ERROR);
    CHECK(last_errno() == ENOENT);
    CHECK(rmdir(dir) == 0);
}
static void unix_domain_echo_at_a_file_path_0_workers(void) { unix_file_echo_with(0); }
static void unix_domain_echo_at_a_file_path_2_workers(void) { unix_file_echo_with(2); }

/* ---- deadlines, end of stream --------------------------------------------- */

static void deadlines(void* arg) {
    (void)arg;
    weft_stream a, b;
    connected_pair(&a, &b);
    char buf[8];
    size_t got = 77;
    int64_t t0 = now_ns();
    CHECK_RESULT(weft_stream_read(a, buf, 1, t0 + 5 * MS, &got), WEFT_TIMED_OUT);
    CHECK(now_ns() - t0 >= 5 * MS);
    CHECK_RESULT(weft_stream_read(a, buf, 1, 0, &got), WEFT_TIMED_OUT); /* long passed */
    CHECK(got == 77);
    /* read_exact: what arrived before the deadline is counted. */
    CHECK_OK(weft_stream_write_all(b, "ab", 2, now_ns() + LONG, NULL));
    t0 = now_ns();
    CHECK_RESULT(weft_stream_read_exact(a, buf, 4, t0 + 20 * MS, &got), WEFT_TIMED_OUT);
    CHECK(now_ns() - t0 >= 20 * MS);
    CHECK(got == 2 && buf[0] == 'a' && buf[1] == 'b');
    /* A passed deadline still lets a call that needs no wait complete. */
    size_t written = 0;
    CHECK_OK(weft_stream_write_all(b, "c", 1, 0, &written));
    CHECK(written == 1);
    CHECK_OK(weft_stream_read(a, buf, sizeof buf, now_ns() + LONG, &got));
    CHECK(got == 1 && buf[0] == 'c');
    /* accept and connect time out too (connect: without trying). */
    weft_listener l;
    uint16_t port;
    weft_stream s;
    CHECK_OK(weft_tcp_listen("127.0.0.1", 0, 0, &l));
    CHECK_OK(weft_listener_port(l, &port));
    t0 = now_ns();
    CHECK_RESULT(weft_listener_accept(l, t0 + 5 * MS, &s), WEFT_TIMED_OUT);
    CHECK(now_ns() - t0 >= 5 * MS);
    CHECK_RESULT(weft_tcp_connect("127.0.0.1", port, 0, &s), WEFT_TIMED_OUT);
    CHECK_RESULT(weft_listener_accept(l, now_ns() + 5 * MS, &s), WEFT_TIMED_OUT); /* nothing queued */
    CHECK(last_errno() == 0);
    CHECK_OK(weft_listener_destroy(l));
    CHECK_OK(weft_stream_destroy(a));
    CHECK_OK(weft_stream_destroy(b));
}

static void deadlines_time_out_never_early_0_workers(void) { run_in_task(0, deadlines, NULL); }
static void deadlines_time_out_never_early_2_workers(void) { run_in_task(2, deadlines, NULL); }

static void end_of_stream(void* arg) {
    (void)arg;
    weft_stream a, b;
    connected_pair(&a, &b);
    char buf[8];
    size_t got = 77;
    CHECK_OK(weft_stream_write_all(b, "abc", 3, now_ns() + LONG, NULL));
    CHECK_OK(weft_stream_shutdown_write(b));
    read_n(a, buf, 3);
    CHECK(memcmp(buf, "abc", 3) == 0);
    CHECK_RESULT(weft_stream_read(a, buf, sizeof buf, now_ns() + LONG, &got), WEFT_EOF);
    CHECK_RESULT(weft_stream_read(a, buf, sizeof buf, now_ns() + LONG, &got), WEFT_EOF); /* and again */
    CHECK(got == 77);
    CHECK(last_errno() == 0);
    /* Half closed: the other direction goes on. */
    CHECK_OK(weft_stream_write_all(a, "x", 1, now_ns() + LONG, NULL));
    read_n(b, buf, 1);
    CHECK(buf[0] == 'x');
    CHECK_OK(weft_stream_destroy(a));
    CHECK_OK(weft_stream_destroy(b));
}

static void end_of_stream_is_weft_eof_0_workers(void) { run_in_task(0, end_of_stream, NULL); }
static void end_of_stream_is_weft_eof_2_workers(void) { run_in_task(2, end_of_stream, NULL); }

static void peer_closes_early(void* arg) {
    (void)arg;
    weft_stream a, b;
    connected_pair(&a, &b);
    char buf[16];
    memset(buf, 0, sizeof buf);
    size_t got = 0;
    CHECK_OK(weft_stream_write_all(b, "hello", 5, now_ns() + LONG, NULL));
    CHECK_OK(weft_stream_destroy(b));
    CHECK_RESULT(weft_stream_read_exact(a, buf, 10, now_ns() + LONG, &got), WEFT_EOF);
    CHECK(got == 5 && memcmp(buf, "hello", 5) == 0);
    /* Writing to the peer that has gone: the first write may still be
     * taken (the peer answers it with a reset); then WEFT_IO_ERROR, not
     * SIGPIPE. */
    weft_result r = WEFT_OK;
    int e = 0;
    for (int i = 0; i < 200 && r == WEFT_OK; ++i) {
        size_t written = 0;
        r = weft_stream_write_all(a, buf, sizeof buf, now_ns() + LONG, &written);
        e = last_errno();
        if (r == WEFT_OK) {
            CHECK(written == sizeof buf && e == 0);
            CHECK_OK(weft_sleep(MS));
        }
    }
    CHECK_RESULT(r, WEFT_IO_ERROR);
    CHECK(e == EPIPE || e == ECONNRESET);
    /* The connection is gone: there is no writing side left to end. */
    CHECK_RESULT(weft_stream_shutdown_write(a), WEFT_IO_ERROR);
    CHECK(last_errno() == ENOTCONN);
    CHECK_OK(weft_stream_destroy(a));
}

static void read_exact_reports_eof_and_the_count_0_workers(void) { run_in_task(0, peer_closes_early, NULL); }
static void read_exact_reports_eof_and_the_count_2_workers(void) { run_in_task(2, peer_closes_early, NULL); }

/* ---- errors ----------------------------------------------------------------- */

static void connect_refused(void* arg) {
    (void)arg;
    /* A port nobody listens on: one that was free a moment ago. */
    weft_listener l;
    uint16_t port = 0;
    CHECK_OK(weft_tcp_listen("127.0.0.1", 0, 0, &l));
    CHECK_OK(weft_listener_port(l, &port));
    CHECK_OK(weft_listener_destroy(l));
    weft_stream s;
    s.id = 12345;
    CHECK_RESULT(weft_tcp_connect("127.0.0.1", port, now_ns() + LONG, &s), WEFT_IO_ERROR);
    CHECK(last_errno() == ECONNREFUSED);
    CHECK(last_errno() == ECONNREFUSED); /* reading it changes nothing */
    CHECK(s.id == 12345);                /* not written */
    /* The next IO call resets it. */
    CHECK_OK(weft_tcp_listen("127.0.0.1", 0, 0, &l));
    CHECK(last_errno() == 0);
    CHECK_OK(weft_listener_destroy(l));
}

static void a_refused_connect_is_io_error_econnrefused_0_workers(void) { run_in_task(0, connect_refused, NULL); }
static void a_refused_connect_is_io_error_econnrefused_2_workers(void) { run_in_task(2, connect_refused, NULL); }
static void a_refused_connect_is_io_error_econnrefused_on_a_thread(void) { connect_refused(NULL); }

/* ---- closing and destroying under a blocked call ------------------------- */

struct blocked {
    weft_listener l;
    weft_stream s;
    atomic_int started;
    weft_result got;
};

static void blocked_accept(void* arg) {
    struct blocked* b = arg;
    weft_stream s;
    atomic_store(&b->started, 1);
    b->got = weft_listener_accept(b->l, WEFT_NO_DEADLINE, &s);
}

static void blocked_read(void* arg) {
    struct blocked* b = arg;
    char c;
    size_t got;
    atomic_store(&b->started, 1);
    b->got = weft_stream_read(b->s, &c, 1, WEFT_NO_DEADLINE, &got);
}

/* block_and_end() spawns fn (which blocks without a deadline), lets it
 * block, runs end(handle) and checks that the call returned WEFT_CLOSED. */
static void block_and_end(struct blocked* b, void (*fn)(void*), weft_result (*end)(struct blocked*)) {
    weft_task t;
    atomic_store(&b->started, 0);
    b->got = WEFT_UNKNOWN_ERROR;
    CHECK_OK(weft_spawn(fn, b, NULL, &t));
    wait_until_set(&b->started);
    CHECK_OK(end(b));
    CHECK_OK(weft_task_join(t, now_ns() + LONG)); /* woken: no hang */
    CHECK_RESULT(b->got, WEFT_CLOSED);
}

static weft_result close_listener(struct blocked* b) { return weft_listener_close(b->l); }
static weft_result destroy_listener(struct blocked* b) { return weft_listener_destroy(b->l); }
static weft_result close_stream(struct blocked* b) { return weft_stream_close(b->s); }
static weft_result destroy_stream(struct blocked* b) { return weft_stream_destroy(b->s); }

static void close_under_blocked_calls(void* arg) {
    (void)arg;
    struct blocked b;
    memset(&b, 0, sizeof b);
    weft_stream s;
    /* close: the handle stays, closed. */
    CHECK_OK(weft_tcp_listen("127.0.0.1", 0, 0, &b.l));
    block_and_end(&b, blocked_accept, close_listener);
    CHECK_RESULT(weft_listener_accept(b.l, now_ns() + LONG, &s), WEFT_CLOSED);
    CHECK_OK(weft_listener_destroy(b.l));
    /* destroy: the call in progress ends WEFT_CLOSED, the handle is stale. */
    CHECK_OK(weft_tcp_listen("127.0.0.1", 0, 0, &b.l));
    block_and_end(&b, blocked_accept, destroy_listener);
    CHECK_RESULT(weft_listener_accept(b.l, now_ns() + LONG, &s), WEFT_INVALID_HANDLE);
    /* The same for a read. */
    weft_stream peer;
    char c;
    size_t got;
    connected_pair(&b.s, &peer);
    block_and_end(&b, blocked_read, close_stream);
    CHECK_RESULT(weft_stream_read(b.s, &c, 1, now_ns() + LONG, &got), WEFT_CLOSED);
    CHECK_OK(weft_stream_destroy(b.s));
    CHECK_RESULT(weft_stream_read(peer, &c, 1, now_ns() + LONG, &got), WEFT_EOF); /* it was closed */
    CHECK_OK(weft_stream_destroy(peer));
    connected_pair(&b.s, &peer);
    block_and_end(&b, blocked_read, destroy_stream);
    CHECK_RESULT(weft_stream_read(b.s, &c, 1, now_ns() + LONG, &got), WEFT_INVALID_HANDLE);
    CHECK_OK(weft_stream_destroy(peer));
}

static void closing_wakes_a_blocked_accept_or_read_0_workers(void) { run_in_task(0, close_under_blocked_calls, NULL); }
static void closing_wakes_a_blocked_accept_or_read_2_workers(void) { run_in_task(2, close_under_blocked_calls, NULL); }

/* ---- cancellation ----------------------------------------------------------- */

struct canceled_reader {
    weft_stream s;
    atomic_int started;
    weft_result first, second, write;
};

static void reads_until_canceled(void* arg) {
    struct canceled_reader* r = arg;
    char c;
    size_t got;
    atomic_store(&r->started, 1);
    r->first = weft_stream_read(r->s, &c, 1, WEFT_NO_DEADLINE, &got);
    /* Canceled: a read that would wait returns at once; a write that needs
     * no wait still completes (cancellation acts where a task waits). */
    r->second = weft_stream_read(r->s, &c, 1, WEFT_NO_DEADLINE, &got);
    r->write = weft_stream_write_all(r->s, "k", 1, WEFT_NO_DEADLINE, NULL);
}

static void cancel_a_blocked_read(void* arg) {
    (void)arg;
    struct canceled_reader r;
    memset(&r, 0, sizeof r);
    r.first = r.second = r.write = WEFT_UNKNOWN_ERROR;
    weft_stream peer;
    connected_pair(&r.s, &peer);
    weft_task t;
    CHECK_OK(weft_spawn(reads_until_canceled, &r, NULL, &t));
    wait_until_set(&r.started);
    CHECK_OK(weft_task_cancel(t));
    CHECK_RESULT(weft_task_join(t, now_ns() + LONG), WEFT_CANCELED);
    CHECK_RESULT(r.first, WEFT_CANCELED);
    CHECK_RESULT(r.second, WEFT_CANCELED);
    CHECK_OK(r.write);
    /* The stream is intact: the write arrived, and what comes next is read
     * here in full. */
    char buf[4];
    read_n(peer, buf, 1);
    CHECK(buf[0] == 'k');
    CHECK_OK(weft_stream_write_all(peer, "zz", 2, now_ns() + LONG, NULL));
    read_n(r.s, buf, 2);
    CHECK(buf[0] == 'z' && buf[1] == 'z');
    CHECK_OK(weft_stream_destroy(r.s));
    CHECK_OK(weft_stream_destroy(peer));
}

static void a_task_canceled_in_a_read_gets_canceled_0_workers(void) { run_in_task(0, cancel_a_blocked_read, NULL); }
static void a_task_canceled_in_a_read_gets_canceled_2_workers(void) { run_in_task(2, cancel_a_blocked_read, NULL); }

/* ---- a stream outlives the runtime it waited in --------------------------- */

static void read_times_out(void* arg) {
    weft_stream* s = arg;
    char c;
    size_t got = 77;
    CHECK_RESULT(weft_stream_read(*s, &c, 1, now_ns() + 5 * MS, &got), WEFT_TIMED_OUT);
    CHECK(got == 77);
}

static void read_in_another_runtime(void* arg) {
    weft_stream* s = arg;
    char c;
    size_t got = 77;
    CHECK_RESULT(weft_stream_read(*s, &c, 1, now_ns() + LONG, &got), WEFT_IO_ERROR);
    CHECK(last_errno() == EINVAL);
    CHECK(got == 77);
}

/* A stream first waited on by a task belongs to that runtime's reactor.
 * Once the runtime is destroyed, a task of another runtime that would wait
 * on it gets WEFT_IO_ERROR with EINVAL, a plain thread still uses it, and
 * destroying it frees what the first runtime kept for it (valgrind's fd
 * and leak checks see that). */
static void a_stream_outlives_the_runtime_it_waited_in(void) {
    weft_stream a, b;
    connected_pair(&a, &b);
    run_in_task(2, read_times_out, &a);
    run_in_task(0, read_in_another_runtime, &a);
    char buf[2];
    CHECK_OK(weft_stream_write_all(b, "ok", 2, now_ns() + LONG, NULL));
    read_n(a, buf, 2);
    CHECK(buf[0] == 'o' && buf[1] == 'k');
    CHECK_OK(weft_stream_destroy(a));
    CHECK_OK(weft_stream_destroy(b));
}

/* Each cause of WEFT_INVALID_ARGUMENT has its own weft_last_error() text,
 * naming the call, the argument and the fix. */
static void each_invalid_argument_is_explained(void) {
    weft_listener l;
    weft_stream s;
    char buf[4];
    size_t got;
    CHECK_EXPLAINED(weft_tcp_connect("localhost", 80, WEFT_NO_DEADLINE, &s), WEFT_INVALID_ARGUMENT,
                    "weft_tcp_connect", "`address` 'localhost'", "not a numeric IP address", "weft_resolve()");
    CHECK_EXPLAINED(weft_tcp_listen("localhost", 0, 0, &l), WEFT_INVALID_ARGUMENT, "weft_tcp_listen",
                    "'localhost'", "weft_resolve()");
    CHECK_EXPLAINED(weft_tcp_listen("127.0.0.1:80", 0, 0, &l), WEFT_INVALID_ARGUMENT, "weft_tcp_listen",
                    "holds a port", "`port` argument");
    CHECK_EXPLAINED(weft_tcp_connect("[::1]", 1, WEFT_NO_DEADLINE, &s), WEFT_INVALID_ARGUMENT, "weft_tcp_connect",
                    "brackets");
    CHECK_EXPLAINED(weft_tcp_listen("256.0.0.1", 0, 0, &l), WEFT_INVALID_ARGUMENT, "weft_tcp_listen",
                    "'256.0.0.1' is not a numeric IPv4");
    CHECK_EXPLAINED(weft_tcp_listen(NULL, 0, 0, &l), WEFT_INVALID_ARGUMENT, "weft_tcp_listen", "`address` is NULL");
    CHECK_EXPLAINED(weft_tcp_listen("127.0.0.1", 0, 0, NULL), WEFT_INVALID_ARGUMENT, "weft_tcp_listen",
                    "`out` is NULL");
    CHECK_EXPLAINED(weft_tcp_listen("127.0.0.1", 0, -1, &l), WEFT_INVALID_ARGUMENT, "weft_tcp_listen",
                    "`backlog` -1 is negative", "0 for the system's");
    CHECK_EXPLAINED(weft_unix_listen("@x", -5, &l), WEFT_INVALID_ARGUMENT, "weft_unix_listen", "`backlog` -5");
    CHECK_EXPLAINED(weft_unix_listen("", 0, &l), WEFT_INVALID_ARGUMENT, "weft_unix_listen", "`path` is empty");
    CHECK_EXPLAINED(weft_tcp_connect("127.0.0.1", 0, WEFT_NO_DEADLINE, &s), WEFT_INVALID_ARGUMENT,
                    "weft_tcp_connect", "`port` is 0");
    CHECK_EXPLAINED(weft_tcp_connect("127.0.0.1", 1, -2, &s), WEFT_INVALID_ARGUMENT, "weft_tcp_connect",
                    "`deadline_ns` is negative", "WEFT_NO_DEADLINE");
    weft_stream zero = {0};
    CHECK_EXPLAINED(weft_stream_read(zero, NULL, 4, WEFT_NO_DEADLINE, &got), WEFT_INVALID_ARGUMENT,
                    "weft_stream_read", "`buf` is NULL but `len` is 4");
    CHECK_EXPLAINED(weft_stream_read(zero, buf, (size_t)-1, WEFT_NO_DEADLINE, &got), WEFT_INVALID_ARGUMENT,
                    "weft_stream_read", "above PTRDIFF_MAX");
    CHECK_EXPLAINED(weft_stream_read(zero, buf, 4, WEFT_NO_DEADLINE, NULL), WEFT_INVALID_ARGUMENT,
                    "weft_stream_read", "`got` is NULL");
    CHECK_EXPLAINED(weft_stream_read(zero, buf, 4, WEFT_NO_DEADLINE, &got), WEFT_INVALID_ARGUMENT,
                    "a handle argument is zero");
    CHECK_EXPLAINED(weft_stream_write_all(zero, NULL, 4, WEFT_NO_DEADLINE, &got), WEFT_INVALID_ARGUMENT,
                    "weft_stream_write_all", "`buf` is NULL");
    weft_channel ch;
    CHECK_EXPLAINED(weft_channel_create(0, 1, &ch), WEFT_INVALID_ARGUMENT, "weft_channel_create",
                    "`elem_size` is 0");
    CHECK_EXPLAINED(weft_sleep(-1), WEFT_INVALID_ARGUMENT, "weft_sleep", "`ns` -1 is negative");
    CHECK_EXPLAINED(weft_spawn(NULL, NULL, NULL, NULL), WEFT_INVALID_ARGUMENT, "weft_spawn", "`fn` is NULL");
    CHECK_EXPLAINED(weft_yield(), WEFT_NOT_IN_TASK, "weft_yield", "inside a weft task");
}

/* ---- signals, names ------------------------------------------------------ */

/* sig_wait is a task that waits for SIGUSR1 or SIGUSR2 in a signal set. */
typedef struct sig_wait {
    weft_signal_set set;
    atomic_int waiting;
    atomic_int got;
} sig_wait;

static void waits_for_a_signal(void* arg) {
    sig_wait* w = arg;
    int signo = 0;
    CHECK_RESULT(weft_signal_set_wait(w->set, now_ns() + 20 * MS, &signo), WEFT_TIMED_OUT);
    atomic_store(&w->waiting, 1);
    CHECK_OK(weft_signal_set_wait(w->set, now_ns() + LONG, &signo));
    atomic_store(&w->got, signo);
}

static void sends_sigusr2_when_the_waiter_waits(void* arg) {
    sig_wait* w = arg;
    while (!atomic_load(&w->waiting)) CHECK_OK(weft_sleep(MS));
    CHECK_OK(weft_sleep(10 * MS));
    CHECK(kill(getpid(), SIGUSR2) == 0);
}

/* A task waits for a signal as a C server waits for SIGTERM to drain. */
static void a_task_waits_for_a_signal_with(unsigned workers) {
    sig_wait w;
    const int signals[] = {SIGUSR1, SIGUSR2};
    CHECK_OK(weft_signal_set_create(signals, 2, &w.set));
    atomic_init(&w.waiting, 0);
    atomic_init(&w.got, 0);
    weft_runtime rt = make_runtime(workers);
    weft_task waiter, sender;
    CHECK_OK(weft_runtime_spawn(rt, waits_for_a_signal, &w, NULL, &waiter));
    CHECK_OK(weft_runtime_spawn(rt, sends_sigusr2_when_the_waiter_waits, &w, NULL, &sender));
    if (workers == 0) {
        int done = 0;
        while (!done) {
            CHECK_OK(weft_runtime_run_once(rt, NULL));
            CHECK_OK(weft_task_is_done(waiter, &done));
        }
    }
    CHECK_OK(weft_task_join(waiter, now_ns() + LONG));
    CHECK_OK(weft_task_join(sender, now_ns() + LONG));
    CHECK(atomic_load(&w.got) == SIGUSR2);
    CHECK_OK(weft_runtime_destroy(rt));
    /* A plain thread waits too; a signal already pending returns at once. */
    CHECK(kill(getpid(), SIGUSR1) == 0);
    int signo = 0;
    CHECK_OK(weft_signal_set_wait(w.set, now_ns() + LONG, &signo));
    CHECK(signo == SIGUSR1);
    CHECK_OK(weft_signal_set_destroy(w.set));
    CHECK_RESULT(weft_signal_set_wait(w.set, WEFT_NO_DEADLINE, &signo), WEFT_INVALID_HANDLE);
}

static void a_task_waits_for_a_signal_0_workers(void) { a_task_waits_for_a_signal_with(0); }
static void a_task_waits_for_a_signal_2_workers(void) { a_task_waits_for_a_signal_with(2); }

static void signal_calls_check_their_arguments(void) {
    weft_signal_set set;
    const int term[] = {SIGTERM};
    const int kill_too[] = {SIGTERM, SIGKILL};
    const int segv[] = {SIGSEGV};
    const int none[] = {0};
    CHECK_EXPLAINED(weft_signal_set_create(NULL, 1, &set), WEFT_INVALID_ARGUMENT, "weft_signal_set_create",
                    "`signals` is NULL");
    CHECK_EXPLAINED(weft_signal_set_create(term, 0, &set), WEFT_INVALID_ARGUMENT, "weft_signal_set_create",
                    "`count` is 0");
    CHECK_EXPLAINED(weft_signal_set_create(term, 1, NULL), WEFT_INVALID_ARGUMENT, "`out` is NULL");
    CHECK_EXPLAINED(weft_signal_set_create(kill_too, 2, &set), WEFT_INVALID_ARGUMENT, "`signals[1]` 9",
                    "cannot be caught", "SIGTERM");
    CHECK_EXPLAINED(weft_signal_set_create(segv, 1, &set), WEFT_INVALID_ARGUMENT, "must not be caught");
    CHECK_EXPLAINED(weft_signal_set_create(none, 1, &set), WEFT_INVALID_ARGUMENT, "`signals[0]` 0",
                    "not a signal number");
    CHECK_OK(weft_signal_set_create(term, 1, &set));
    int signo;
    CHECK_EXPLAINED(weft_signal_set_wait(set, WEFT_NO_DEADLINE, NULL), WEFT_INVALID_ARGUMENT, "weft_signal_set_wait",
                    "`signo` is NULL");
    CHECK_EXPLAINED(weft_signal_set_wait(set, -2, &signo), WEFT_INVALID_ARGUMENT, "`deadline_ns` is negative");
    CHECK_RESULT(weft_signal_set_wait(set, now_ns(), &signo), WEFT_TIMED_OUT);
    CHECK_OK(weft_signal_set_destroy(set));
    CHECK_RESULT(weft_signal_set_destroy(set), WEFT_INVALID_HANDLE);
    weft_signal_set zero = {0};
    CHECK_RESULT(weft_signal_set_destroy(zero), WEFT_INVALID_ARGUMENT);
}

/* resolve_and_connect is a task: resolve "localhost", connect to the
 * listener through the first address found. */
typedef struct resolve_case {
    uint16_t port;
    int connected;
} resolve_case;

static void resolve_and_connect(void* arg) {
    resolve_case* c = arg;
    char service[8];
    snprintf(service, sizeof service, "%u", (unsigned)c->port);
    weft_address found[8];
    size_t n = 0;
    CHECK_OK(weft_resolve("localhost", service, found, 8, &n));
    CHECK(n >= 1);
    for (size_t i = 0; i < n && !c->connected; ++i) {
        CHECK(found[i].port == c->port);
        CHECK(strcmp(found[i].ip, "127.0.0.1") == 0 || strcmp(found[i].ip, "::1") == 0);
        weft_stream s;
        if (weft_tcp_connect(found[i].ip, found[i].port, now_ns() + LONG, &s) == WEFT_OK) {
            c->connected = 1;
            CHECK_OK(weft_stream_destroy(s));
        }
    }
    /* capacity 0 counts nothing; a numeric host resolves to itself. */
    CHECK_OK(weft_resolve("localhost", NULL, NULL, 0, &n));
    CHECK(n == 0);
    CHECK_OK(weft_resolve("127.0.0.1", NULL, found, 8, &n));
    CHECK(n == 1 && strcmp(found[0].ip, "127.0.0.1") == 0 && found[0].port == 0);
}

static void resolve_finds_localhost_in_a_task_and_on_a_thread(void) {
    weft_listener l;
    CHECK_OK(weft_tcp_listen("127.0.0.1", 0, 0, &l));
    resolve_case c = {0, 0};
    CHECK_OK(weft_listener_port(l, &c.port));
    run_in_task(2, resolve_and_connect, &c);
    CHECK(c.connected);
    c.connected = 0;
    resolve_and_connect(&c); /* a plain thread */
    CHECK(c.connected);
    CHECK_OK(weft_listener_destroy(l));
}

static void resolve_checks_its_arguments(void) {
    weft_address a[2];
    size_t n = 77;
    CHECK_EXPLAINED(weft_resolve(NULL, NULL, a, 2, &n), WEFT_INVALID_ARGUMENT, "weft_resolve", "`host` is NULL");
    CHECK_EXPLAINED(weft_resolve("", NULL, a, 2, &n), WEFT_INVALID_ARGUMENT, "`host` is empty");
    CHECK_EXPLAINED(weft_resolve("localhost", NULL, NULL, 2, &n), WEFT_INVALID_ARGUMENT, "`out` is NULL");
    CHECK_EXPLAINED(weft_resolve("localhost", NULL, a, 2, NULL), WEFT_INVALID_ARGUMENT, "`count` is NULL");
    CHECK(n == 77);
    /* An unknown service fails without asking a name server. */
    CHECK_EXPLAINED(weft_resolve("localhost", "no-such-service-weft", a, 2, &n), WEFT_NOT_FOUND, "weft_resolve",
                    "'no-such-service-weft'");
    CHECK(n == 77);
    CHECK(strstr(weft_result_str(WEFT_NOT_FOUND), "WEFT_NOT_FOUND") != NULL);
}

int main(void) {
    RUN(result_str_names_the_io_codes);
    RUN(every_call_checks_its_arguments);
    RUN(each_invalid_argument_is_explained);
#if !WEFT_TEST_VALGRIND
    /* Not under valgrind, like the C++ signal tests (scripts/sanitize): the
       signal eventfd stays open for the life of the process, which the
       valgrind runner's fd check reports, and with 2 workers memcheck
       reported an invalid write in a fiber switch at a worker's exit in 2
       of 4 runs (not explained yet; clean natively, under ASan and TSan). */
    RUN(a_task_waits_for_a_signal_0_workers);
    RUN(a_task_waits_for_a_signal_2_workers);
    RUN(signal_calls_check_their_arguments);
#else
    (void)a_task_waits_for_a_signal_0_workers;
    (void)a_task_waits_for_a_signal_2_workers;
    (void)signal_calls_check_their_arguments;
#endif
    RUN(resolve_finds_localhost_in_a_task_and_on_a_thread);
    RUN(resolve_checks_its_arguments);
    RUN(echo_over_loopback_tcp_0_workers);
    RUN(echo_over_loopback_tcp_2_workers);
    RUN(echo_over_ipv6_loopback_0_workers);
    RUN(echo_over_ipv6_loopback_2_workers);
    RUN(a_plain_thread_talks_to_a_server_task);
    RUN(unix_domain_echo_0_workers);
    RUN(unix_domain_echo_2_workers);
    RUN(unix_domain_echo_at_a_file_path_0_workers);
    RUN(unix_domain_echo_at_a_file_path_2_workers);
    RUN(deadlines_time_out_never_early_0_workers);
    RUN(deadlines_time_out_never_early_2_workers);
    RUN(end_of_stream_is_weft_eof_0_workers);
    RUN(end_of_stream_is_weft_eof_2_workers);
    RUN(read_exact_reports_eof_and_the_count_0_workers);
    RUN(read_exact_reports_eof_and_the_count_2_workers);
    RUN(a_refused_connect_is_io_error_econnrefused_0_workers);
    RUN(a_refused_connect_is_io_error_econnrefused_2_workers);
    RUN(a_refused_connect_is_io_error_econnrefused_on_a_thread);
    RUN(closing_wakes_a_blocked_accept_or_read_0_workers);
    RUN(closing_wakes_a_blocked_accept_or_read_2_workers);
    RUN(a_task_canceled_in_a_read_gets_canceled_0_workers);
    RUN(a_task_canceled_in_a_read_gets_canceled_2_workers);
    RUN(a_stream_outlives_the_runtime_it_waited_in);
    printf("io_test: %d tests passed\n", c_tests_passed);
    return 0;
}
