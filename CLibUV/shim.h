#ifndef REACTIVEUV_CLIBUV_SHIM_H
#define REACTIVEUV_CLIBUV_SHIM_H

#include <uv.h>
/* FileWatch reads its own inotify instance: libuv 1.44 drops IN_Q_OVERFLOW and names a
 * directory's own events like a child's. */
#include <sys/inotify.h>

/* ReactiveUV is written against libuv 1.44.2 (Debian 12's libuv1-dev): the
 * handle-size, metrics and error-name APIs it relies on are checked here so an
 * older library fails at compile time with a message rather than at run time. */
#if !defined(UV_VERSION_HEX) || UV_VERSION_HEX < ((1 << 16) | (44 << 8) | 2)
#error "ReactiveUV needs libuv >= 1.44.2: install it with `apt-get install libuv1-dev` (Debian 12 ships 1.44.2)"
#endif

/* glibc declares this only under _GNU_SOURCE, which an imported module cannot set. */
extern int pthread_setname_np(pthread_t thread, const char *name);

/* glibc (2.30 and later) declares this only under _GNU_SOURCE too. Files.removeTree reads a directory
 * through the descriptor it unlinks relative to: no second descriptor for a DIR stream. */
extern ssize_t getdents64(int fd, void *buffer, size_t length);

/* Names the calling thread (at most 15 bytes are kept). */
static inline void ruv_set_current_thread_name(const char *name) {
    (void)pthread_setname_np(pthread_self(), name);
}

/* uv_loop_configure is variadic, which Swift cannot call. */
static inline int ruv_loop_enable_idle_time_metric(uv_loop_t *loop) {
    return uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
}

/* Descriptor passing: what the next read of an IPC pipe will take. libuv 1.44 reads with room
 * for 64 descriptors and never looks at MSG_CTRUNC, so the kernel closes any beyond without a
 * word; a peek with room for Linux's most per message (SCM_MAX_FD, 253) counts them first. */
#include <sys/socket.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#define RUV_MOST_DESCRIPTORS_PER_MESSAGE 253

/* Peeks (MSG_PEEK) at up to `length` bytes of `fd` into `buffer`, as a read of that length would
 * take them. Returns the byte count, or -errno (-EAGAIN: nothing to read). `*descriptors` is how
 * many descriptors come with those bytes; `*truncated` is 1 when even the peek could not take
 * them all (this process is out of descriptors). The peek's own copies are closed at once. */
static inline long ruv_peek_passed_descriptors(int fd, void *buffer, size_t length, int *descriptors, int *truncated) {
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(RUV_MOST_DESCRIPTORS_PER_MESSAGE * sizeof(int))];
    } control;
    struct iovec data = { .iov_base = buffer, .iov_len = length };
    struct msghdr message;
    memset(&message, 0, sizeof(message));
    message.msg_iov = &data;
    message.msg_iovlen = 1;
    message.msg_control = control.space;
    message.msg_controllen = sizeof(control.space);
    *descriptors = 0;
    *truncated = 0;
    long result;
    do {
        /* 0x40000000: MSG_CMSG_CLOEXEC, declared only under _GNU_SOURCE (a child forked meanwhile must not inherit the copies). */
        result = recvmsg(fd, &message, MSG_PEEK | MSG_DONTWAIT | 0x40000000);
    } while (result < 0 && errno == EINTR);
    if (result < 0) return -errno;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header != NULL; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        int count = (int)((header->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int index = 0; index < count; index++) {
            int copy;
            memcpy(&copy, CMSG_DATA(header) + index * sizeof(int), sizeof(int));
            close(copy);
        }
        *descriptors += count;
    }
    if (message.msg_flags & MSG_CTRUNC) *truncated = 1;
    return result;
}

#endif
