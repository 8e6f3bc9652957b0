#include "CTestSupport.h"
#include <malloc.h>
#include <sys/fsuid.h>

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
