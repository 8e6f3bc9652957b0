#ifndef REACTIVEUV_C_TEST_SUPPORT_H
#define REACTIVEUV_C_TEST_SUPPORT_H

#include <stddef.h>

/// Bytes the process has allocated and not yet freed: the sanitizer allocator's
/// count when a sanitizer is linked in (its quarantine excluded), else glibc's
/// mallinfo2 over every arena plus mmapped blocks.
size_t ruv_test_live_heap_bytes(void);

#endif
