/* weft_hook.h: the C ABI between libweft_hook.so (the interposers, the fd
 * table; no weft inside) and the bridge (hook/bridge.cpp: the weft side,
 * compiled into the program so that it uses the program's own copy of
 * weft; a second copy inside the .so would not see the program's tasks
 * when weft is linked statically, whose symbols are hidden).
 *
 * The bridge's constructor finds weft_hook_register() with
 * dlsym(RTLD_DEFAULT) and hands over its operations; without a bridge (a
 * program that never runs weft tasks) every hook calls straight through. */
#ifndef WEFT_HOOK_H
#define WEFT_HOOK_H

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_HOOK_ABI_VERSION 1

/* weft_hook_ops is what the bridge offers the interposers. */
struct weft_hook_ops {
    int version; /* WEFT_HOOK_ABI_VERSION */
    /* inside() is nonzero inside a weft task. */
    int (*inside)(void);
    /* wait() parks the calling task until fd is ready for `events` (POLLIN
     * or POLLOUT), edge-triggered: call it only after EAGAIN. deadline_ns is
     * a CLOCK_MONOTONIC time in ns, or -1 for none. Returns 0, or an errno
     * value: ETIMEDOUT, EBADF (closed meanwhile), EINVAL (the fd is watched
     * by another runtime). Cancellation unwinds through it. */
    int (*wait)(int fd, short events, long long deadline_ns);
    /* forget() stops watching fd (release(), never close) before close. */
    void (*forget)(int fd);
    /* sleep_ns() suspends the calling task; unwinds when canceled. */
    void (*sleep_ns)(long long ns);
};

/* weft_hook_host is what the interposers offer the bridge. */
struct weft_hook_host {
    /* internal(+1 / -1) brackets the bridge's own fcntl calls (inside
     * io::handle's constructor) so that the fcntl hook passes them through
     * unchanged. Never held across a suspension. */
    void (*internal)(int delta);
};

/* weft_hook_register() installs ops (once; later calls are ignored) and
 * returns the host's side. Defined by libweft_hook.so. */
const struct weft_hook_host* weft_hook_register(const struct weft_hook_ops* ops);

/* weft_hook_bridged() is 1 once a bridge has registered, else 0. libweft
 * looks it up (dlsym) when a runtime starts: a program that runs weft tasks
 * with this library preloaded but without the bridge gets a warning, since
 * every hook would then call the plain blocking function. */
int weft_hook_bridged(void);

#ifdef __cplusplus
}
#endif
#endif
