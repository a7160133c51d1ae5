/* fork.c: OpenCL in a forked child. A child has only the thread that called
 * fork; the driver's worker threads (PoCL's) and the locks they held stay in
 * the parent, so the first wait in the child never ends. Once this process has
 * touched OpenCL (a device enumerated, a context made or wrapped), a fork is
 * noted (pthread_atfork) and, in the child and its descendants, making a
 * context or using an inherited one returns CLB_ERR_UNSUPPORTED saying so, and
 * freeing an inherited object calls no OpenCL function (it is left to the
 * process's exit). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>

#include "runtime/core/core.h"

static atomic_int forked; /* a fork after OpenCL was used: this is the child (or below) */
static pthread_once_t watch_once = PTHREAD_ONCE_INIT;

static void child(void) { atomic_store(&forked, 1); }
static void watch(void) { pthread_atfork(NULL, NULL, child); }

void clb__fork_watch(void) { pthread_once(&watch_once, watch); }

int clb__forked_child(void) { return atomic_load_explicit(&forked, memory_order_relaxed); }

clb_status clb__fork_check(clb_context_t ctx, const char *op) {
  if (!clb__forked_child()) return CLB_OK;
  return clb__set_error(ctx, CLB_ERR_UNSUPPORTED,
                        "%s: OpenCL cannot be used in a forked child; create contexts after fork or use spawn "
                        "(this process was forked from one that had used OpenCL; Python: "
                        "multiprocessing.set_start_method(\"spawn\"))", op);
}
