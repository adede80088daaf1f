/* legacy_echo.h: the "unmodified program" of tests/hook (legacy_echo.c). */
#ifndef WEFT_TEST_LEGACY_ECHO_H
#define WEFT_TEST_LEGACY_ECHO_H
#include <sys/types.h>
#ifdef __cplusplus
extern "C" {
#endif
/* legacy_listen() is a blocking TCP socket listening on 127.0.0.1 (port in *port), or -1. */
int legacy_listen(int* port);
/* legacy_accept_one() accepts one connection (blocking), or -1. */
int legacy_accept_one(int listen_fd);
/* legacy_echo_conn() echoes fd until EOF, closes it; bytes echoed or -1. */
long legacy_echo_conn(int fd);
/* legacy_serve_one() is accept + echo. */
long legacy_serve_one(int listen_fd);
/* legacy_client() connects, sends `rounds` messages and checks each echo,
 * usleep(1 ms) between; 0 if every echo matched, a negative step otherwise. */
int legacy_client(int port, int id, int rounds);
int legacy_usleep(unsigned us);
ssize_t legacy_read(int fd, void* buf, size_t n);
#ifdef __cplusplus
}
#endif
#endif
