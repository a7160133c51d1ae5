/* thread-test.h: what the multi-threaded tests share: a count of failures that
 * any thread adds to, each with a line naming the thread, its step and the cause. */
#ifndef CLB_THREAD_TEST_H
#define CLB_THREAD_TEST_H

#include <stdatomic.h>
#include <stdio.h>

#include "clbound/clbound.h"

static atomic_int failures;
static atomic_int no_device; /* threads that found no device */

/* Counts a failure of thread t at its step `step` number i (e.g. "cycle", 3). */
static inline void thread_fail(int t, const char *step, int i, const char *what, clb_status st, const char *msg) {
  fprintf(stderr, "thread %d %s %d: %s: %s: %s\n", t, step, i, what, clb_status_name(st), msg);
  atomic_fetch_add(&failures, 1);
}

#endif /* CLB_THREAD_TEST_H */
