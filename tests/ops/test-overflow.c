/* test-overflow.c: counts above a caller's output bound, short masked_scatter
 * sources and failed size checks: exact statuses and messages at the next sync,
 * clamped results, canaries, both kernel styles. `--small` runs a shorter list
 * for valgrind (ops/overflow-valgrind). */
#include "ops-test.h"

static int small = 0;

/* Expects the next sync to return `want` with exactly the message `msg`, and
 * the one after it to succeed (the sticky word is cleared). */
static void expect_sync(clb_context_t ctx, clb_status want, const char *msg) {
  clb_status st = clb_context_sync(ctx);
  EXPECT_EQ_I(st, want);
  EXPECT_EQ_S(clb_context_errmsg(ctx), msg);
  EXPECT_EQ_I(clb_context_sync(ctx), CLB_OK);
}

/* The output of an op whose count overflowed stays marked: reading it returns
 * the error (until it is written again). The clamped values are still checked:
 * read here straight from the buffers, as a driver-level consumer would. */
static void read_marked(clb_context_t ctx, clb_tensor_t t, clb_status want, int64_t *dims, void *host, size_t elem, int64_t cap) {
  int64_t d[8];
  EXPECT_STATUS(ctx, clb_tensor_read(ctx, t, d, host, (size_t)cap * elem, NULL), want,
                "holds the output of an op that failed");
  cl_command_queue q = clb_context_cl_queue(ctx);
  REQUIRE_TRUE(clEnqueueReadBuffer(q, clb_tensor_shape_mem(t), CL_TRUE, 0, sizeof d, d, 0, NULL, NULL) == CL_SUCCESS);
  int64_t n = 1;
  for (int k = 0; k < clb_tensor_rank(t); k++) n *= d[k];
  REQUIRE_TRUE(n <= cap);
  if (n) REQUIRE_TRUE(clEnqueueReadBuffer(q, clb_tensor_data_mem(t), CL_TRUE, 0, (size_t)n * elem, host, 0, NULL, NULL) == CL_SUCCESS);
  memcpy(dims, d, (size_t)clb_tensor_rank(t) * sizeof *dims);
}

/* nonzero of a 1-D f32 [<=bound] holding n values at `density` into a caller's
 * output [<=obound, 1]: the first min(count, obound) indices, the exact error
 * when the count is larger, nothing written past the output's bound. */
static void nonzero_overflow(clb_context_t ctx, int64_t bound, int64_t n, double density, int64_t obound) {
  uint8_t dyn[2] = {1, 0};
  int64_t ob[2] = {obound, 1};
  clb_tensor_t x = NULL, out = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &bound, dyn, &x));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 2, ob, dyn, &out));
  double *v = malloc((size_t)(n + 1) * sizeof *v);
  int64_t *got = malloc((size_t)(obound + 1) * sizeof *got), *ref = malloc((size_t)(n + 1) * sizeof *ref);
  REQUIRE_TRUE(v && got && ref);
  ops_gen(CLB_DTYPE_F32, n, density, v);
  int64_t cnt = 0;
  for (int64_t i = 0; i < n; i++)
    if (ops_nz(v[i])) ref[cnt++] = i;
  clb_test_write(ctx, x, &n, v);
  clb_test_canary_fill(ctx, out);
  uint64_t syncs = clb_test_counter_syncs(ctx);
  CL_OK(ctx, clb_nonzero(ctx, x, &out));
  EXPECT_EQ_I(clb_test_counter_syncs(ctx), syncs);
  if (cnt > obound) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "nonzero x [<=%lld] f32, out [<=%lld, 1] i64: size %lld exceeds its bound %lld; the output holds the first %lld",
             (long long)bound, (long long)obound, (long long)cnt, (long long)obound, (long long)obound);
    const char *want = msg;
    int64_t d[2];
    EXPECT_STATUS(ctx, clb_tensor_read(ctx, out, d, got, (size_t)obound * sizeof *got, NULL), CLB_ERR_BOUND_EXCEEDED,
                  want);
    EXPECT_EQ_S(clb_context_errmsg(ctx), msg);
  }
  int64_t d[2];
  if (cnt > obound) read_marked(ctx, out, CLB_ERR_BOUND_EXCEEDED, d, got, sizeof *got, obound);
  else CL_OK(ctx, clb_tensor_read(ctx, out, d, got, (size_t)obound * sizeof *got, NULL));
  int64_t keep = cnt < obound ? cnt : obound;
  EXPECT_EQ_I(d[0], keep);
  int64_t bad = 0;
  for (int64_t i = 0; i < keep; i++) bad += got[i] != ref[i];
  EXPECT_EQ_I(bad, 0);
  clb_test_canary_check(ctx, out, (size_t)obound * sizeof(int64_t), "nonzero output at its bound");
  clb_test_canary_check(ctx, out, (size_t)keep * sizeof(int64_t), "nonzero output past the count");
  clb_tensor_free(x);
  clb_tensor_free(out);
  free(v);
  free(got);
  free(ref);
}

/* masked_select of n i32 values into a caller's output [<=obound]. */
static void select_overflow(clb_context_t ctx, int64_t n, double density, int64_t obound) {
  uint8_t dyn = 1;
  clb_tensor_t x = NULL, m = NULL, out = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, &n, NULL, &x));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 1, &n, NULL, &m));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, &obound, &dyn, &out));
  double *xv = malloc((size_t)(n + 1) * sizeof *xv), *mv = malloc((size_t)(n + 1) * sizeof *mv);
  double *ref = malloc((size_t)(n + 1) * sizeof *ref), *got = malloc((size_t)(obound + 1) * sizeof *got);
  REQUIRE_TRUE(xv && mv && ref && got);
  int64_t cnt = 0;
  for (int64_t i = 0; i < n; i++) {
    xv[i] = (double)(i * 7 % 1000);
    mv[i] = density >= 1.0 || ops_uniform() < density;
    if (mv[i] != 0) ref[cnt++] = xv[i];
  }
  clb_test_write(ctx, x, &n, xv);
  clb_test_write(ctx, m, &n, mv);
  clb_test_canary_fill(ctx, out);
  CL_OK(ctx, clb_masked_select(ctx, x, m, &out));
  if (cnt > obound) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "masked_select x [%lld] i32, mask [%lld] bool: size %lld exceeds its bound %lld; the output holds the first %lld",
             (long long)n, (long long)n, (long long)cnt, (long long)obound, (long long)obound);
    expect_sync(ctx, CLB_ERR_BOUND_EXCEEDED, msg);
  }
  int64_t d[1];
  int64_t got_n;
  if (cnt > obound) {
    int32_t *raw = malloc((size_t)(obound + 1) * sizeof *raw);
    REQUIRE_TRUE(raw != NULL);
    read_marked(ctx, out, CLB_ERR_BOUND_EXCEEDED, d, raw, sizeof *raw, obound);
    got_n = d[0];
    for (int64_t i = 0; i < got_n; i++) got[i] = raw[i];
    free(raw);
  } else {
    got_n = clb_test_read(ctx, out, d, got, obound);
  }
  int64_t keep = cnt < obound ? cnt : obound;
  EXPECT_EQ_I(got_n, keep);
  int64_t bad = 0;
  for (int64_t i = 0; i < keep && got_n == keep; i++) bad += got[i] != ref[i];
  EXPECT_EQ_I(bad, 0);
  clb_test_canary_check(ctx, out, (size_t)keep * sizeof(int32_t), "masked_select output");
  clb_tensor_free(x);
  clb_tensor_free(m);
  clb_tensor_free(out);
  free(xv);
  free(mv);
  free(ref);
  free(got);
}

/* masked_scatter of n f32 with a source of ns elements, fewer than the count:
 * the first ns true positions take the source, the rest keep x's values. The
 * source is exactly ns long (bound ns), so valgrind sees any read past it. */
static void scatter_short(clb_context_t ctx, int64_t n, double density, int64_t ns) {
  clb_tensor_t x = NULL, m = NULL, s = NULL, out = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &n, NULL, &x));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 1, &n, NULL, &m));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &ns, NULL, &s));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &n, NULL, &out));
  double *xv = malloc((size_t)(n + 1) * sizeof *xv), *mv = malloc((size_t)(n + 1) * sizeof *mv);
  double *sv = malloc((size_t)(ns + 1) * sizeof *sv), *ref = malloc((size_t)(n + 1) * sizeof *ref);
  double *got = malloc((size_t)(n + 1) * sizeof *got);
  REQUIRE_TRUE(xv && mv && sv && ref && got);
  for (int64_t i = 0; i < ns; i++) sv[i] = 1000.0 + (double)i;
  int64_t cnt = 0;
  for (int64_t i = 0; i < n; i++) {
    xv[i] = -(double)i;
    mv[i] = density >= 1.0 || ops_uniform() < density;
    ref[i] = mv[i] != 0 && cnt < ns ? sv[cnt] : xv[i];
    cnt += mv[i] != 0;
  }
  clb_test_write(ctx, x, &n, xv);
  clb_test_write(ctx, m, &n, mv);
  clb_test_write(ctx, s, &ns, sv);
  clb_test_canary_fill(ctx, out);
  CL_OK(ctx, clb_masked_scatter(ctx, x, m, s, &out));
  if (cnt > ns) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "masked_scatter x [%lld] f32, mask [%lld] bool, source [%lld] f32: the mask selects %lld elements but the source has only %lld",
             (long long)n, (long long)n, (long long)ns, (long long)cnt, (long long)ns);
    expect_sync(ctx, CLB_ERR_SHORT_SOURCE, msg);
  } else {
    EXPECT_EQ_I(clb_context_sync(ctx), CLB_OK);
  }
  if (cnt > ns) {
    float *raw = malloc((size_t)(n + 1) * sizeof *raw);
    int64_t d[1] = {0};
    REQUIRE_TRUE(raw != NULL);
    read_marked(ctx, out, CLB_ERR_SHORT_SOURCE, d, raw, sizeof *raw, n);
    EXPECT_EQ_I(d[0], n);
    for (int64_t i = 0; i < n; i++) got[i] = raw[i];
    free(raw);
  } else {
    EXPECT_EQ_I(clb_test_read(ctx, out, NULL, got, n), n);
  }
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) bad += got[i] != ref[i];
  EXPECT_EQ_I(bad, 0);
  clb_test_canary_check(ctx, out, (size_t)n * sizeof(float), "masked_scatter output");
  clb_tensor_free(x);
  clb_tensor_free(m);
  clb_tensor_free(s);
  clb_tensor_free(out);
  free(xv);
  free(mv);
  free(sv);
  free(ref);
  free(got);
}

/* Bounded dims of x and mask that must match but do not at run time. */
static void size_mismatch(clb_context_t ctx) {
  int64_t b[2] = {8, 5}, dx[2] = {6, 5}, dm[2] = {7, 5};
  uint8_t dyn[2] = {1, 0};
  clb_tensor_t x = NULL, m = NULL, out = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b, dyn, &x));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 2, b, dyn, &m));
  double v[40];
  for (int i = 0; i < 40; i++) v[i] = 1;
  clb_test_write(ctx, x, dx, v);
  clb_test_write(ctx, m, dm, v);
  CL_OK(ctx, clb_masked_select(ctx, x, m, &out));
  expect_sync(ctx, CLB_ERR_DEVICE_CHECK,
              "masked_select x [<=8, 5] f32, mask [<=8, 5] bool: deferred check failed on the device: sizes 6 and 7 "
              "must be equal");
  /* the smaller size was used: 30 elements, nothing past a bound */
  int64_t d[1];
  float vals[40];
  read_marked(ctx, out, CLB_ERR_DEVICE_CHECK, d, vals, sizeof *vals, 40);
  EXPECT_EQ_I(d[0], 30);
  clb_tensor_free(out);
  out = NULL;
  clb_tensor_t src = NULL;
  int64_t ns = 40;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &ns, NULL, &src));
  CL_OK(ctx, clb_masked_scatter(ctx, x, m, src, &out));
  expect_sync(ctx, CLB_ERR_DEVICE_CHECK,
              "masked_scatter x [<=8, 5] f32, mask [<=8, 5] bool, source [40] f32: deferred check failed on the "
              "device: sizes 6 and 7 must be equal");
  clb_tensor_free(out);
  clb_tensor_free(src);
  clb_tensor_free(x);
  clb_tensor_free(m);
}

/* nonzero_static truncates without an error; its count tensor holds the truth. */
static void static_truncates(clb_context_t ctx) {
  int64_t n = 300;
  clb_tensor_t x = NULL, out = NULL, c = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &n, NULL, &x));
  double v[300];
  for (int i = 0; i < 300; i++) v[i] = i % 3 ? 1.5 : 0;
  clb_test_write(ctx, x, &n, v);
  CL_OK(ctx, clb_nonzero_static(ctx, x, 50, -1, &out, &c));
  EXPECT_EQ_I(clb_context_sync(ctx), CLB_OK);
  int64_t got[50], cnt = 0;
  CL_OK(ctx, clb_tensor_read(ctx, out, NULL, got, sizeof got, NULL));
  CL_OK(ctx, clb_tensor_read(ctx, c, NULL, &cnt, sizeof cnt, NULL));
  EXPECT_EQ_I(cnt, 200);
  EXPECT_EQ_I(got[0], 1);
  EXPECT_EQ_I(got[49], 74);
  clb_tensor_free(x);
  clb_tensor_free(out);
  clb_tensor_free(c);
}

int main(int argc, char **argv) {
  small = argc > 1 && strcmp(argv[1], "--small") == 0;
  for (int style = CLB_KERNEL_STYLE_CPU; style <= CLB_KERNEL_STYLE_GPU; style++) {
    if (!ops_style_runs((clb_kernel_style)style, "ops/overflow")) continue;
    clb_context_t ctx = ops_context((clb_kernel_style)style);
    /* counts above the bound, at it, below it; tiny bounds; the whole chunk range */
    nonzero_overflow(ctx, 200, 150, 0.5, 10);
    nonzero_overflow(ctx, 200, 150, 1.0, 150);
    nonzero_overflow(ctx, 200, 150, 1.0, 149);
    nonzero_overflow(ctx, 200, 0, 1.0, 0);
    nonzero_overflow(ctx, 200, 7, 1.0, 0);
    select_overflow(ctx, 100, 1.0, 99);
    select_overflow(ctx, 100, 0.5, 100);
    select_overflow(ctx, 65, 1.0, 1);
    scatter_short(ctx, 100, 0.5, 10);
    scatter_short(ctx, 100, 1.0, 0);
    scatter_short(ctx, 64, 1.0, 64);
    if (!small) {
      nonzero_overflow(ctx, 70000, 70000, 0.5, 1000);
      nonzero_overflow(ctx, 70000, 66000, 0.99, 65000);
      select_overflow(ctx, 70000, 0.5, 4097);
      select_overflow(ctx, 70000, 1.0, 69999);
      scatter_short(ctx, 70000, 0.5, 30000);
      scatter_short(ctx, 70000, 1.0, 69999);
    }
    size_mismatch(ctx);
    static_truncates(ctx);
    clb_context_free(ctx);
  }
  return clb_test_finish("ops/overflow");
}
