/* test-threads.c: the documented model, one context per thread, with the first
 * contexts of the process made from 8 threads at once: 8 threads x 20 cycles of
 * create, run two ops, check the result exactly, free. Before device discovery
 * was done once per process this crashed inside the driver or said "no device".
 * The program cache starts empty and stores in its default mode (the first
 * contexts build and store while the others run the same kernels, issue 34). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "cl-test.h"
#include "temp-dir.h"
#include "thread-test.h"

#define THREADS 8
#define CYCLES 20

static pthread_barrier_t start;

/* One cycle: y = relu(x) summed; x = -n/2 .. n/2-1 as i32, so the sum is exact. */
static void cycle(int t, int c) {
  clb_context_t ctx = NULL;
  clb_status st = clb_context_new(NULL, &ctx);
  if (st != CLB_OK) {
    if (st == CLB_ERR_NO_DEVICE) atomic_fetch_add(&no_device, 1);
    thread_fail(t, "cycle", c, "clb_context_new", st, clb_last_errmsg());
    return;
  }
  int n = 17 + t * 5 + c;
  int64_t bound[1] = {256}, dims[1] = {n};
  uint8_t dyn[1] = {1};
  int32_t x[256];
  long long want = 0;
  for (int i = 0; i < n; i++) {
    x[i] = i - n / 2;
    if (x[i] > 0) want += x[i];
  }
  clb_tensor_t tx = NULL, ty = NULL, ts = NULL;
  if ((st = clb_tensor_new(ctx, CLB_DTYPE_I32, 1, bound, dyn, &tx)) != CLB_OK ||
      (st = clb_tensor_write(ctx, tx, dims, x, (size_t)n * sizeof x[0])) != CLB_OK ||
      (st = clb_unary(ctx, CLB_UNARY_RELU, tx, &ty)) != CLB_OK ||
      (st = clb_reduce_all(ctx, CLB_REDUCE_SUM, ty, &ts)) != CLB_OK) {
    thread_fail(t, "cycle", c, "ops", st, clb_context_errmsg(ctx));
    clb_context_free(ctx);
    return;
  }
  int64_t got = 0; /* the sum of an integer tensor is i64, as in PyTorch */
  size_t bytes = 0;
  st = clb_tensor_read(ctx, ts, NULL, &got, sizeof got, &bytes);
  if (st != CLB_OK) thread_fail(t, "cycle", c, "clb_tensor_read", st, clb_context_errmsg(ctx));
  else if (bytes != sizeof got || got != want) {
    fprintf(stderr, "thread %d cycle %d: sum of relu over %d values: got %lld, want %lld\n", t, c, n, (long long)got, want);
    atomic_fetch_add(&failures, 1);
  }
  clb_context_free(ctx);
}

static void *worker(void *arg) {
  int t = (int)(intptr_t)arg;
  pthread_barrier_wait(&start); /* every thread makes its first context at once */
  for (int c = 0; c < CYCLES; c++) cycle(t, c);
  return NULL;
}

int main(void) {
  pthread_t th[THREADS];
  char dir[1024];
  clb_test_temp_dir(dir, sizeof dir, "threads");
  setenv("CLBOUND_CACHE_DIR", dir, 1);
  unsetenv("CLBOUND_CACHE_STORE"); /* the default mode */
  REQUIRE_TRUE(pthread_barrier_init(&start, NULL, THREADS) == 0);
  for (int t = 0; t < THREADS; t++) REQUIRE_TRUE(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  pthread_barrier_destroy(&start);
  clb_test_checks += THREADS * CYCLES;
  uint64_t entries = 0;
  clb_cache_info(dir, &entries, NULL); /* waits for the background store */
  clb_cache_clear(dir);
  clb_test_temp_dir_remove(dir);
  if (atomic_load(&no_device) == THREADS * CYCLES) {
    /* no thread ever found a device: the machine has none (the helper's rule) */
    clb_context_t ctx = clb_test_context(NULL);
    clb_context_free(ctx);
  }
  int f = atomic_load(&failures);
  if (f) CLB_FAIL_AT("%d of %d cycles failed", f, THREADS * CYCLES);
  else if (entries == 0) CLB_FAIL_AT("no program was stored in %s: the cache was not on", dir);
  return clb_test_finish("adversarial/threads");
}
