/* test-tier-up.c: tiered builds (CLBOUND_COLD_BUILD=fast, program-cache.c,
 * "Tiered builds"). A cold process builds its programs without LLVM's
 * optimizations; one that is still launching kernels 0.3 s later hands them to
 * the store helper while it runs, and replaces each by the helper's optimized
 * build once that is written, with no wrong result on either side of the swap.
 * The process then hands nothing more over at its end, and the next process
 * loads the optimized entries and builds nothing.
 * Skips (77) on a device that is not a CPU: fast builds are for CPU devices. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>
#include <unistd.h>

#include "cache-test.h"
#include "temp-dir.h"

#define N 1000
#define WAIT_SECONDS 240.0 /* the helper compiles beside this test: allow for a loaded machine */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double xs[N], ms[N];

/* masked_select (exact: a copy) and sigmoid (double reference) on fixed inputs. */
static void run_ops(clb_context_t ctx, clb_tensor_t x, clb_tensor_t m) {
  static double got[N];
  clb_tensor_t sel = NULL, sig = NULL;
  CL_OK(ctx, clb_masked_select(ctx, x, m, &sel));
  int64_t dims[1] = {0};
  int64_t n = clb_test_read(ctx, sel, dims, got, N);
  int64_t k = 0, bad = 0;
  for (int i = 0; i < N; i++)
    if (ms[i] != 0.0) {
      if (k >= n || got[k] != (double)(float)xs[i]) bad++;
      k++;
    }
  clb_test_checks++;
  if (n != k || bad) CLB_FAIL_AT("masked_select: %lld elements (want %lld), %lld wrong", (long long)n, (long long)k,
                                 (long long)bad);
  CL_OK(ctx, clb_unary(ctx, CLB_UNARY_SIGMOID, x, &sig));
  clb_test_read(ctx, sig, NULL, got, N);
  for (int i = 0; i < N; i += 97) EXPECT_NEAR(got[i], 1.0 / (1.0 + exp(-(double)(float)xs[i])));
  clb_tensor_free(sig);
  clb_tensor_free(sel);
}

static clb_counters counters(clb_context_t ctx) {
  clb_counters c;
  c.struct_size = sizeof c;
  CL_OK(ctx, clb_context_counters(ctx, &c));
  return c;
}

static uint64_t entries(const char *dir) {
  uint64_t n = 0, bytes = 0;
  REQUIRE_TRUE(clb_cache_info(dir, &n, &bytes) == CLB_OK);
  return n;
}

int main(void) {
  char dir[1024];
  clb_test_temp_dir(dir, sizeof dir, "tier-up");
  setenv("CLBOUND_COLD_BUILD", "fast", 1);
  setenv("CLBOUND_CACHE_STORE", "process", 1);
  unsetenv("CLBOUND_STORE_HELPER");
  for (int i = 0; i < N; i++) {
    xs[i] = 0.01 * (double)((i * 37) % 401) - 2.0;
    ms[i] = (i % 3) ? 1.0 : 0.0;
  }
  clb_context_t ctx = cached_context(dir);
  cl_device_type type = 0;
  clGetDeviceInfo(clb_context_cl_device(ctx), CL_DEVICE_TYPE, sizeof type, &type, NULL);
  if (!(type & CL_DEVICE_TYPE_CPU)) {
    printf("cache/tier-up: skipped: the device is not a CPU (fast builds are for CPU devices)\n");
    clb_context_free(ctx);
    clb_test_temp_dir_remove(dir);
    return 77;
  }
  int64_t dims[1] = {N};
  clb_tensor_t x = NULL, m = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, dims, NULL, &x));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 1, dims, NULL, &m));
  clb_test_write(ctx, x, dims, xs);
  clb_test_write(ctx, m, dims, ms);

  run_ops(ctx, x, m);
  clb_counters c = counters(ctx);
  EXPECT_EQ_I(c.program_builds, 2);
  EXPECT_EQ_I(c.store_handoffs, 0); /* nothing handed over before the process has run a while */
  clb_test_checks++;
  if (!strstr(log_lines, "CLBOUND_COLD_BUILD=fast: -cl-opt-disable"))
    CLB_FAIL_AT("the cold builds were not unoptimized:\n%s", log_lines);
  uint64_t kernels_fast = c.kernels_compiled;

  /* keep launching until both programs are replaced */
  double t0 = now_s(), handed_at = -1;
  long rounds = 0;
  while (c.programs_upgraded < 2 && now_s() - t0 < WAIT_SECONDS) {
    run_ops(ctx, x, m);
    rounds++;
    c = counters(ctx);
    if (handed_at < 0 && c.store_handoffs) handed_at = now_s() - t0;
    if (clb_test_failures) break;
  }
  printf("cache/tier-up: handed over after %.2f s, both programs replaced after %.2f s (%ld rounds)\n", handed_at,
         now_s() - t0, rounds);
  EXPECT_EQ_I(c.store_handoffs, 2);
  EXPECT_EQ_I(c.programs_upgraded, 2);
  EXPECT_EQ_I(c.program_builds, 2); /* the optimized programs were loaded, not built here */
  EXPECT_TRUE(c.kernels_compiled > kernels_fast); /* the kernels now come from the loaded programs */
  clb_test_checks++;
  if (!strstr(log_lines, "handed to the store helper after") ||
      !strstr(log_lines, "replaced by the store helper's optimized build"))
    CLB_FAIL_AT("the hand-over and the replacement were not logged:\n%s", log_lines);
  for (int i = 0; i < 3; i++) run_ops(ctx, x, m); /* right after the swap too */

  clb_tensor_free(m);
  clb_tensor_free(x);
  clb_context_free(ctx);
  clb_cache_wait();
  EXPECT_EQ_I(entries(dir), 2); /* one optimized entry per program, nothing handed over twice */

  /* the next process: loads both, builds nothing */
  ctx = cached_context(dir);
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, dims, NULL, &x));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 1, dims, NULL, &m));
  clb_test_write(ctx, x, dims, xs);
  clb_test_write(ctx, m, dims, ms);
  run_ops(ctx, x, m);
  c = counters(ctx);
  EXPECT_EQ_I(c.program_builds, 0);
  EXPECT_EQ_I(c.program_cache_hits_disk, 2);
  EXPECT_EQ_I(c.store_handoffs, 0);
  clb_tensor_free(m);
  clb_tensor_free(x);
  clb_context_free(ctx);
  clb_cache_wait();
  clb_cache_clear(dir);
  clb_test_temp_dir_remove(dir);
  return clb_test_finish("cache/tier-up");
}
