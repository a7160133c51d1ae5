/* test-wg-limit.c: kernels that allow fewer work-items per group than the launch
 * geometry's local size (issue 19, defect 3). A GPU driver's
 * CL_KERNEL_WORK_GROUP_SIZE can be below the device maximum (register
 * pressure), and a launch above it fails with CL_INVALID_WORK_GROUP_SIZE.
 * CLBOUND_TEST_KERNEL_WG_LIMIT=64 makes every kernel allow 64 work-items, and a
 * launch above that fails as it would there; in the GPU geometry (local size
 * 256) the runtime must lower the local size, rebuilding the kernels built for
 * one size (select-gpu, reduce over everything, loss, the GEMM tile), and log
 * it. Every op is checked against a double-precision reference (integers
 * exactly), in both kernel styles. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>

#include "cache-test.h" /* the log capture */
#include "ops-test.h"

static clb_tensor_t tensor1(clb_context_t ctx, clb_dtype dt, int64_t n, const double *v) {
  clb_tensor_t t = NULL;
  uint8_t dyn = 1;
  CL_OK(ctx, clb_tensor_new(ctx, dt, 1, &n, &dyn, &t));
  clb_test_write(ctx, t, &n, v);
  return t;
}

static void expect_near(double got, double want, double tol, const char *what) {
  clb_test_checks++;
  if (!(fabs(got - want) <= tol * (1.0 + fabs(want)))) CLB_FAIL_AT("%s: %.9g, want %.9g", what, got, want);
}

/* nonzero and masked_select over n elements: more work-groups of 64 than 64
 * when n is 70,000 (or 5,000 with 20 compute units, as the oclgrind label runs
 * it), so select-gpu's sel_finish carries across scan blocks. */
static void check_select(clb_context_t ctx, int64_t n) {
  double *v = malloc((size_t)n * sizeof *v), *m = malloc((size_t)n * sizeof *m);
  double *got = malloc((size_t)(n ? n : 1) * sizeof *got);
  REQUIRE_TRUE(v && m && got);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = clb_test_next();
    v[i] = r % 3 == 0 ? 0.0 : (double)((int64_t)(r % 2001) - 1000);
    m[i] = (double)((r >> 20) % 2);
  }
  clb_tensor_t x = tensor1(ctx, CLB_DTYPE_I32, n, v), mask = tensor1(ctx, CLB_DTYPE_BOOL, n, m);
  clb_tensor_t nz = NULL, sel = NULL;
  CL_OK(ctx, clb_nonzero(ctx, x, &nz));
  CL_OK(ctx, clb_masked_select(ctx, x, mask, &sel));
  int64_t dims[2];
  int64_t cnt = clb_test_read(ctx, nz, dims, got, n);
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++)
    if (v[i] != 0.0) {
      if (k < cnt && got[k] != (double)i) CLB_FAIL_AT("nonzero n=%lld: row %lld is %.0f, want %lld", (long long)n,
                                                      (long long)k, got[k], (long long)i);
      k++;
    }
  clb_test_checks++;
  if (cnt != k) CLB_FAIL_AT("nonzero n=%lld: %lld rows, want %lld", (long long)n, (long long)cnt, (long long)k);
  cnt = clb_test_read(ctx, sel, dims, got, n);
  k = 0;
  for (int64_t i = 0; i < n; i++)
    if (m[i] != 0.0) {
      if (k < cnt && got[k] != v[i]) CLB_FAIL_AT("masked_select n=%lld: element %lld is %.0f, want %.0f",
                                                 (long long)n, (long long)k, got[k], v[i]);
      k++;
    }
  clb_test_checks++;
  if (cnt != k) CLB_FAIL_AT("masked_select n=%lld: %lld elements, want %lld", (long long)n, (long long)cnt, (long long)k);
  clb_tensor_free(nz);
  clb_tensor_free(sel);
  clb_tensor_free(x);
  clb_tensor_free(mask);
  free(v);
  free(m);
  free(got);
}

/* Elementwise add, sum over everything (i32 exactly, f32 against doubles), sum
 * over a dim, and the MSE loss and its gradient. */
static void check_reduce_elementwise(clb_context_t ctx, int64_t n) {
  double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b), *got = malloc((size_t)n * sizeof *got);
  REQUIRE_TRUE(a && b && got);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = clb_test_next();
    a[i] = (double)((int64_t)(r % 2001) - 1000);
    b[i] = (double)((int64_t)((r >> 16) % 2001) - 1000);
  }
  clb_tensor_t ta = tensor1(ctx, CLB_DTYPE_I32, n, a), tb = tensor1(ctx, CLB_DTYPE_I32, n, b);
  clb_tensor_t sum = NULL, all = NULL;
  CL_OK(ctx, clb_add(ctx, ta, tb, &sum));
  CL_OK(ctx, clb_reduce_all(ctx, CLB_REDUCE_SUM, sum, &all));
  int64_t dims[2];
  REQUIRE_TRUE(clb_test_read(ctx, sum, dims, got, n) == n);
  double want_all = 0;
  for (int64_t i = 0; i < n; i++) {
    clb_test_checks++;
    if (got[i] != a[i] + b[i]) CLB_FAIL_AT("add n=%lld: element %lld is %.0f, want %.0f", (long long)n, (long long)i,
                                           got[i], a[i] + b[i]);
    want_all += a[i] + b[i];
  }
  double g1;
  REQUIRE_TRUE(clb_test_read(ctx, all, dims, &g1, 1) == 1);
  clb_test_checks++;
  if (g1 != want_all) CLB_FAIL_AT("sum of i32 n=%lld: %.0f, want %.0f", (long long)n, g1, want_all);

  /* f32: a [n/8, 8] matrix summed over dim 1, and the MSE of a against b / 2 */
  int64_t rows = n / 8, mdims[2] = {rows, 8};
  uint8_t mdyn[2] = {1, 0};
  clb_tensor_t tm = NULL, rs = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, mdims, mdyn, &tm));
  for (int64_t i = 0; i < rows * 8; i++) a[i] /= 64.0; /* exact in f32 */
  clb_test_write(ctx, tm, mdims, a);
  CL_OK(ctx, clb_reduce_dim(ctx, CLB_REDUCE_SUM, tm, 1, 0, &rs));
  REQUIRE_TRUE(clb_test_read(ctx, rs, dims, got, n) == rows);
  for (int64_t r = 0; r < rows; r++) {
    double w = 0;
    for (int c = 0; c < 8; c++) w += a[r * 8 + c];
    expect_near(got[r], w, 1e-6, "sum over dim 1 (f32)");
  }
  for (int64_t i = 0; i < n; i++) b[i] /= 128.0;
  clb_tensor_t p = tensor1(ctx, CLB_DTYPE_F32, n, a), t = tensor1(ctx, CLB_DTYPE_F32, n, b);
  clb_tensor_t loss = NULL, grad = NULL;
  CL_OK(ctx, clb_loss(ctx, CLB_LOSS_MSE, p, t, &loss, &grad));
  double mse = 0;
  for (int64_t i = 0; i < n; i++) mse += (a[i] - b[i]) * (a[i] - b[i]);
  mse /= (double)n;
  REQUIRE_TRUE(clb_test_read(ctx, loss, dims, &g1, 1) == 1);
  expect_near(g1, mse, 1e-5, "MSE loss (f32)");
  REQUIRE_TRUE(clb_test_read(ctx, grad, dims, got, n) == n);
  for (int64_t i = 0; i < n; i += 97) expect_near(got[i], 2.0 * (a[i] - b[i]) / (double)n, 1e-5, "MSE gradient (f32)");
  clb_tensor_t *ts[] = {&ta, &tb, &sum, &all, &tm, &rs, &p, &t, &loss, &grad};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clb_tensor_free(*ts[i]);
  free(a);
  free(b);
  free(got);
}

/* A matmul by clbound's own kernel (the GEMM tile of the GPU style is 16 x 16
 * work-items, more than the limit), f32 against doubles. */
static void check_matmul(clb_context_t ctx) {
  const int64_t M = 37, K = 29, N = 45;
  int64_t da[2] = {M, K}, db[2] = {K, N};
  uint8_t dyn[2] = {1, 0};
  double *a = malloc(M * K * sizeof *a), *b = malloc(K * N * sizeof *b), *got = malloc(M * N * sizeof *got);
  REQUIRE_TRUE(a && b && got);
  for (int64_t i = 0; i < M * K; i++) a[i] = (double)((int64_t)(clb_test_next() % 17) - 8) / 4.0;
  for (int64_t i = 0; i < K * N; i++) b[i] = (double)((int64_t)(clb_test_next() % 13) - 6) / 8.0;
  clb_tensor_t ta = NULL, tb = NULL, c = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, da, dyn, &ta));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, db, NULL, &tb));
  clb_test_write(ctx, ta, da, a);
  clb_test_write(ctx, tb, db, b);
  CL_OK(ctx, clb_context_set_gemm_strategy(ctx, CLB_GEMM_DEVICE));
  CL_OK(ctx, clb_matmul(ctx, ta, 0, tb, 0, &c));
  int64_t dims[2];
  REQUIRE_TRUE(clb_test_read(ctx, c, dims, got, M * N) == M * N);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double w = 0;
      for (int64_t k = 0; k < K; k++) w += a[i * K + k] * b[k * N + j];
      expect_near(got[i * N + j], w, 1e-6, "matmul (f32, DEVICE strategy)");
    }
  clb_tensor_free(ta);
  clb_tensor_free(tb);
  clb_tensor_free(c);
  free(a);
  free(b);
  free(got);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* the forced limit, and a GPU geometry (local size 256) unless the caller
   * gives one (the oclgrind label does) */
  setenv("CLBOUND_TEST_KERNEL_WG_LIMIT", "64", 1);
  setenv("CLBOUND_GEOMETRY", "gpu", 0);
  for (int style = CLB_KERNEL_STYLE_GPU; style >= CLB_KERNEL_STYLE_CPU; style--) {
    const char *sname = style == CLB_KERNEL_STYLE_CPU ? "cpu" : "gpu";
    if (!ops_style_runs((clb_kernel_style)style, "ops/wg-limit")) continue;
    clb_context_options o;
    clb_context_options_init(&o);
    o.kernel_style = (clb_kernel_style)style;
    clb_context_t ctx = clb_test_context(&o);
    log_lines[0] = 0;
    clb_context_set_log(ctx, CLB_LOG_BUILDS, capture, NULL);
    /* 70,000 (reduced sizes: 5,000) elements are more work-groups of 64 than 64 */
    const int64_t sizes[] = {65, 1000, clb_test_small() ? 5000 : 70000};
    for (size_t s = 0; s < 3; s++) {
      CLB_TEST_CASE("style %s: nonzero and masked_select, n=%lld", sname, (long long)sizes[s]);
      check_select(ctx, sizes[s]);
    }
    CLB_TEST_CASE("style %s: add, reduce and loss", sname);
    check_reduce_elementwise(ctx, clb_test_small() ? 3000 : 100000);
    CLB_TEST_CASE("style %s: matmul", sname);
    check_matmul(ctx);
    CL_OK(ctx, clb_context_sync(ctx));
    /* the fallback is logged, naming the kernels that were rebuilt */
    /* (the select ops' small masks run in one launch, sel_single: n=65 always
     * does; where the one-pass select with look-back runs, as on NVIDIA GPUs,
     * every mask runs in its one kernel, sel_lookback) */
    const char *want[] = {"sel_single", "red_all_part", "loss_part", "gemm_gpu", "ew_binary"};
    if (style == CLB_KERNEL_STYLE_GPU)
      for (int i = 0; i < 5; i++) {
        clb_test_checks++;
        char needle[64];
        snprintf(needle, sizeof needle, "kernel %s of", want[i]);
        const char *at = strstr(log_lines, needle);
        if (i == 0 && !at) at = strstr(log_lines, "kernel sel_lookback of");
        if (!at || !strstr(at, "CLBOUND_TEST_KERNEL_WG_LIMIT"))
          CLB_FAIL_AT("style gpu: no fallback logged for %s; the log:\n%s", want[i], log_lines);
      }
    clb_context_free(ctx);
  }
  return clb_test_finish("ops/wg-limit");
}
