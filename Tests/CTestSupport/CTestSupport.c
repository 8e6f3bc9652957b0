#define _GNU_SOURCE
#include "CTestSupport.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <malloc.h>
#include <errno.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <dlfcn.h>
#include <stdint.h>

// Defined by the ASan/TSan runtimes; null when no sanitizer is linked in.
extern size_t __sanitizer_get_current_allocated_bytes(void) __attribute__((weak));

size_t ruv_test_live_heap_bytes(void) {
    if (__sanitizer_get_current_allocated_bytes) {
        return __sanitizer_get_current_allocated_bytes();
    }
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
}

unsigned ruv_test_set_thread_fsuid(unsigned uid) {
    return (unsigned)setfsuid((uid_t)uid);
}

int ruv_test_open_pty(int *master, int *slave, char *slave_path, size_t path_size) {
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m < 0) return -1;
    if (grantpt(m) != 0 || unlockpt(m) != 0 || ptsname_r(m, slave_path, path_size) != 0) {
        close(m);
        return -1;
    }
    int s = open(slave_path, O_RDWR | O_NOCTTY);
    if (s < 0) {
        close(m);
        return -1;
    }
    *master = m;
    *slave = s;
    return 0;
}

long ruv_test_send_descriptor(int socket, int descriptor, unsigned char byte) {
    struct iovec data = { .iov_base = &byte, .iov_len = 1 };
    union { struct cmsghdr header; char space[CMSG_SPACE(sizeof(int))]; } control;
    memset(&control, 0, sizeof(control));
    struct msghdr message = { .msg_iov = &data, .msg_iovlen = 1,
                              .msg_control = control.space, .msg_controllen = sizeof(control.space) };
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(header), &descriptor, sizeof(int));
    ssize_t sent = sendmsg(socket, &message, 0);
    return sent < 0 ? -errno : (long)sent;
}

long ruv_test_send_descriptors(int socket, const int *descriptors, int count, unsigned char byte) {
    if (count < 1 || count > 253) return -EINVAL;
    struct iovec data = { .iov_base = &byte, .iov_len = 1 };
    union { struct cmsghdr header; char space[CMSG_SPACE(253 * sizeof(int))]; } control;
    memset(&control, 0, sizeof(control));
    struct msghdr message = { .msg_iov = &data, .msg_iovlen = 1,
                              .msg_control = control.space, .msg_controllen = CMSG_SPACE(count * sizeof(int)) };
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(count * sizeof(int));
    memcpy(CMSG_DATA(header), descriptors, count * sizeof(int));
    ssize_t sent = sendmsg(socket, &message, 0);
    return sent < 0 ? -errno : (long)sent;
}

size_t ruv_test_malloc_usable_size(void *pointer) {
    return malloc_usable_size(pointer);
}

// The Swift runtime's allocator entry (pointer arguments and result: the C and Swift calling
// conventions agree on them). Defined in the test executable, it takes precedence over
// libswiftCore's for every caller that links through the dynamic symbol table.
typedef void *(*ruv_alloc_object_fn)(const void *metadata, size_t size, size_t alignment_mask);
static __thread int ruv_counting_objects;  // 0: off; 1: every object; 2: class instances only
static __thread unsigned long ruv_counted_objects;

void *swift_allocObject(const void *metadata, size_t size, size_t alignment_mask) {
    static ruv_alloc_object_fn runtime;
    ruv_alloc_object_fn forward = __atomic_load_n(&runtime, __ATOMIC_ACQUIRE);
    if (forward == NULL) {
        forward = (ruv_alloc_object_fn)dlsym(RTLD_NEXT, "swift_allocObject");
        if (forward == NULL) abort();
        __atomic_store_n(&runtime, forward, __ATOMIC_RELEASE);
    }
    // A metadata's first word is its kind: 0 for a class, 0x400 and up for a closure context or a box.
    if (ruv_counting_objects == 1 || (ruv_counting_objects == 2 && *(const uintptr_t *)metadata == 0)) {
        ruv_counted_objects += 1;
    }
    return forward(metadata, size, alignment_mask);
}

void ruv_test_count_objects_start(int class_instances_only) {
    ruv_counted_objects = 0;
    ruv_counting_objects = class_instances_only ? 2 : 1;
}

unsigned long ruv_test_count_objects_stop(void) {
    ruv_counting_objects = 0;
    return ruv_counted_objects;
}
