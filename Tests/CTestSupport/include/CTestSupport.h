#ifndef REACTIVEUV_C_TEST_SUPPORT_H
#define REACTIVEUV_C_TEST_SUPPORT_H

#include <stddef.h>

/// Bytes the process has allocated and not yet freed: the sanitizer allocator's
/// count when a sanitizer is linked in (its quarantine excluded), else glibc's
/// mallinfo2 over every arena plus mmapped blocks.
size_t ruv_test_live_heap_bytes(void);

/// The bytes malloc's block at `pointer` can hold (`malloc_usable_size`): the requested size rounded
/// up to what the allocator's size class gives (glibc: a 16-byte class less its 8-byte header;
/// the sanitizers' allocators: the size asked for).
size_t ruv_test_malloc_usable_size(void *pointer);

/// Sets the calling thread's file-system user ID (Linux `setfsuid`, per thread) and returns the previous one.
/// Moving it from 0 to another user drops the thread's file-system capabilities (`CAP_DAC_OVERRIDE`...),
/// so a test running as root can see the `EACCES` an ordinary user gets; moving it back to 0 restores them.
unsigned ruv_test_set_thread_fsuid(unsigned uid);

/// Opens a pseudo-terminal pair (`posix_openpt`, `grantpt`, `unlockpt`, `ptsname_r`, then the slave
/// with `O_NOCTTY`): 0 and both descriptors and the slave's path, or -1 with errno set.
int ruv_test_open_pty(int *master, int *slave, char *slave_path, size_t path_size);

/// Sends `byte` with `descriptor` attached (`SCM_RIGHTS`) over the Unix stream socket `socket`,
/// as a peer passing a descriptor does. Returns sendmsg's result (1), or -errno.
long ruv_test_send_descriptor(int socket, int descriptor, unsigned char byte);

/// Sends `byte` with `count` descriptors attached in one message (one `SCM_RIGHTS`, at most 253:
/// Linux's limit per message), as a peer that is not libuv may. Returns sendmsg's result (1), or -errno.
long ruv_test_send_descriptors(int socket, const int *descriptors, int count, unsigned char byte);

/// Starts counting the Swift heap objects (class instances, closure contexts, boxes, array storage)
/// made on the calling thread: `swift_allocObject` is interposed by this test executable and forwards
/// to the runtime's. Counting on one thread leaves other threads' work out of the figure.
/// `class_instances_only` leaves closure contexts and boxes out, which an unoptimized build makes
/// where an optimized one keeps them on the stack.
void ruv_test_count_objects_start(int class_instances_only);

/// Stops counting on the calling thread and returns how many objects it made since the start.
unsigned long ruv_test_count_objects_stop(void);

#endif
