/* legacy_echo.c: an "unmodified program" for the hook's tests: plain C,
 * plain blocking sockets, no weft header and no weft symbol. Built as is,
 * it blocks its thread in accept, read, write, connect and usleep; with
 * libweft_hook linked or preloaded, inside weft tasks, those calls park the
 * task instead. */
#include "legacy_echo.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int legacy_listen(int* port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr*)&a, sizeof a) != 0 || listen(fd, 1024) != 0 ||
        getsockname(fd, (struct sockaddr*)&a, &len) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

int legacy_accept_one(int listen_fd) {
    for (;;) {
        int c = accept(listen_fd, NULL, NULL);
        if (c >= 0 || errno != EINTR) return c;
    }
}

long legacy_echo_conn(int fd) {
    char buf[512];
    long total = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n == 0) break;
        if (n < 0) {
            if (errno == EINTR) continue;
            total = -1;
            break;
        }
        if (write(fd, buf, (size_t)n) != n) {
            total = -1;
            break;
        }
        total += n;
    }
    close(fd);
    return total;
}

long legacy_serve_one(int listen_fd) {
    int c = legacy_accept_one(listen_fd);
    if (c < 0) return -1;
    return legacy_echo_conn(c);
}

static int read_full(int fd, char* p, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r <= 0) {
            if (r < 0 && errno == EINTR) continue;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

int legacy_client(int port, int id, int rounds) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((unsigned short)port);
    if (connect(fd, (struct sockaddr*)&a, sizeof a) != 0) {
        close(fd);
        return -2;
    }
    int ok = 0;
    for (int i = 0; i < rounds && ok == 0; ++i) {
        char msg[64], back[64];
        int n = snprintf(msg, sizeof msg, "client %d round %d", id, i);
        if (write(fd, msg, (size_t)n) != n) ok = -3;
        else if (read_full(fd, back, (size_t)n) != 0) ok = -4;
        else if (memcmp(msg, back, (size_t)n) != 0) ok = -5;
        usleep(1000);
    }
    close(fd);
    return ok;
}

int legacy_usleep(unsigned us) { return usleep(us); }

ssize_t legacy_read(int fd, void* buf, size_t n) { return read(fd, buf, n); }
