#ifndef REACTIVEUV_MALLOC_COUNTER_H
#define REACTIVEUV_MALLOC_COUNTER_H

/* Counts allocation calls (malloc, calloc, realloc, aligned variants) made by any
 * thread between mc_start() and mc_stop(). The benchmark executable defines the
 * allocator entry points itself, so every library in the process calls these
 * (no LD_PRELOAD needed); they forward to glibc's __libc_* functions. */
void mc_start(void);
unsigned long mc_stop(void);

#endif
