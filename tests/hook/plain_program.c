/* plain_program.c: a small C program that never runs weft tasks, run under
 * LD_PRELOAD=libweft_hook.so by CTest (hook_preload_plain): preloading must
 * change nothing. Blocking pipe IO between two threads, a socketpair, poll,
 * fcntl, sleeps. Exit status 0 when all behaved as without the hook. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int fds[2];

static void* writer(void* arg) {
    (void)arg;
    usleep(20000);
    if (write(fds[1], "hello", 5) != 5) return (void*)1;
    return NULL;
}

#define CHECK(c)                                                   \
    do {                                                           \
        if (!(c)) {                                                \
            fprintf(stderr, "plain_program: failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); \
            return 1;                                              \
        }                                                          \
    } while (0)

int main(int argc, char** argv) {
    /* --expect-preloaded: fail unless the hook library really is loaded
     * (so that the test cannot pass by running without it). */
    if (argc > 1 && strcmp(argv[1], "--expect-preloaded") == 0) CHECK(dlsym(RTLD_DEFAULT, "weft_hook_register") != NULL);
    CHECK(pipe(fds) == 0);
    CHECK((fcntl(fds[0], F_GETFL) & O_NONBLOCK) == 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, writer, NULL) == 0);
    char buf[8] = {0};
    CHECK(read(fds[0], buf, sizeof buf) == 5); /* blocks ~20 ms */
    CHECK(memcmp(buf, "hello", 5) == 0);
    void* r;
    CHECK(pthread_join(t, &r) == 0 && r == NULL);

    struct pollfd p = {fds[0], POLLIN, 0};
    CHECK(poll(&p, 1, 10) == 0); /* times out */
    CHECK(close(fds[0]) == 0 && close(fds[1]) == 0);
    errno = 0;
    CHECK(read(fds[0], buf, 1) == -1 && errno == EBADF);

    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    CHECK(send(sv[0], "x", 1, 0) == 1);
    CHECK(recv(sv[1], buf, 1, 0) == 1 && buf[0] == 'x');
    errno = 0;
    CHECK(recv(sv[1], buf, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN);
    CHECK(close(sv[0]) == 0 && close(sv[1]) == 0);

    struct timespec a, b, d = {0, 5000000};
    clock_gettime(CLOCK_MONOTONIC, &a);
    CHECK(nanosleep(&d, NULL) == 0);
    CHECK(usleep(1000) == 0);
    CHECK(sleep(0) == 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    CHECK((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) >= 6000000L);
    d.tv_nsec = 2000000000L;
    errno = 0;
    CHECK(nanosleep(&d, NULL) == -1 && errno == EINVAL);
    puts("plain_program: ok");
    return 0;
}
