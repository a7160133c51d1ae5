/* test-gemm.c: matmul under every strategy and transpose with dynamic M, N and K
 * against a double-precision reference, canaries after outputs, zero-sized
 * dims, errors, and the build and host-sync counts. */
#define _POSIX_C_SOURCE 200809L
#include "nn-test.h"

static int has_fp64;
static const char *const SNAME[] = {"auto", "clblast-bound", "sync-exact", "device", "host-blas"};

/* One matmul problem: bounds and dynamic flags of M, N, K. */
typedef struct gcase {
  int64_t mb, nb, kb;
  int dm, dn, dk;
} gcase;

/* Runs op(a) @ op(b) at actual (m, n, k) and checks values, sizes and canaries. */
static void check_one(clb_context_t ctx, const char *label, clb_gemm_strategy s, clb_dtype dt, int ta, int tb,
                      const gcase *c, int64_t m, int64_t n, int64_t k) {
  CL_OK(ctx, clb_context_set_gemm_strategy(ctx, s));
  int64_t ab[2], bb[2], ad[2], bd[2];
  uint8_t ay[2], by[2];
  /* storage of a: [M, K], or [K, M] when transposed */
  ab[ta] = c->mb; ab[1 - ta] = c->kb;
  ay[ta] = (uint8_t)c->dm; ay[1 - ta] = (uint8_t)c->dk;
  ad[ta] = m; ad[1 - ta] = k;
  /* storage of b: [K, N], or [N, K] */
  bb[tb] = c->kb; bb[1 - tb] = c->nb;
  by[tb] = (uint8_t)c->dk; by[1 - tb] = (uint8_t)c->dn;
  bd[tb] = k; bd[1 - tb] = n;
  clb_tensor_t a = NULL, b = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, dt, 2, ab, ay, &a));
  CL_OK(ctx, clb_tensor_new(ctx, dt, 2, bb, by, &b));
  int64_t ob[2] = {c->mb, c->nb};
  uint8_t oy[2] = {(uint8_t)c->dm, (uint8_t)c->dn};
  CL_OK(ctx, clb_tensor_new(ctx, dt, 2, ob, oy, &o));
  /* garbage in the operands' slack: a strategy must not let it reach the result */
  nn_garbage_fill(ctx, a);
  nn_garbage_fill(ctx, b);
  double *va = malloc(sizeof(double) * (size_t)(m * k + 1)), *vb = malloc(sizeof(double) * (size_t)(k * n + 1));
  double *got = malloc(sizeof(double) * (size_t)(c->mb * c->nb + 1));
  REQUIRE_TRUE(va && vb && got);
  for (int64_t i = 0; i < m * k; i++) va[i] = nn_rnd(-1.0, 1.0);
  for (int64_t i = 0; i < k * n; i++) vb[i] = nn_rnd(-1.0, 1.0);
  clb_test_write(ctx, a, ad, va);
  clb_test_write(ctx, b, bd, vb);
  clb_test_canary_fill(ctx, o);
  CL_OK(ctx, clb_matmul(ctx, a, ta, b, tb, &o));
  int64_t dims[2] = {-1, -1};
  int64_t got_n = clb_test_read(ctx, o, dims, got, c->mb * c->nb);
  char what[256];
  snprintf(what, sizeof what, "%s %s %s a%s b%s bounds [%lld,%lld,%lld] actual m=%lld n=%lld k=%lld", label, SNAME[s],
           clb_dtype_name(dt), ta ? "^T" : "", tb ? "^T" : "", (long long)c->mb, (long long)c->nb, (long long)c->kb,
           (long long)m, (long long)n, (long long)k);
  clb_test_checks++;
  if (dims[0] != m || dims[1] != n || got_n != m * n)
    CLB_FAIL_AT("%s: sizes [%lld, %lld]", what, (long long)dims[0], (long long)dims[1]);
  int bad = 0;
  for (int64_t i = 0; i < m && !bad; i++)
    for (int64_t j = 0; j < n && !bad; j++) {
      double ref = 0;
      for (int64_t q = 0; q < k; q++) {
        double x = ta ? va[q * m + i] : va[i * k + q];
        double y = tb ? vb[j * k + q] : vb[q * n + j];
        ref += x * y;
      }
      double g = got[i * n + j], d = fabs(g - ref);
      if (!(d <= 1e-3 || d <= 5e-3 * fabs(ref))) {
        CLB_FAIL_AT("%s: [%lld, %lld] got %.9g want %.9g", what, (long long)i, (long long)j, g, ref);
        bad = 1;
      }
    }
  clb_test_checks++;
  /* CLBlast over the bounds writes whole rows up to the bound of M when N is static. */
  int64_t live_rows = (s == CLB_GEMM_CLBLAST_BOUND && !c->dn && (c->dm || c->dk)) ? c->mb : m;
  clb_test_canary_check(ctx, o, (size_t)(live_rows * n) * clb_dtype_size(dt), what);
  free(va);
  free(vb);
  free(got);
  clb_tensor_free(a);
  clb_tensor_free(b);
  clb_tensor_free(o);
}

static const gcase CASES[] = {
    {64, 33, 20, 1, 0, 0}, /* dynamic M */
    {19, 35, 64, 0, 0, 1}, /* dynamic K */
    {21, 64, 18, 0, 1, 0}, /* dynamic N */
    {40, 48, 36, 1, 1, 1}, /* all dynamic */
    {130, 70, 100, 1, 0, 0},
};
static const int64_t ACTUAL[] = {0, 1, 17, 63, 64};

static void sweep(clb_context_t ctx, const char *label, clb_gemm_strategy s, clb_dtype dt, int full) {
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      for (int ci = 0; ci < 3; ci++) {
        const gcase *c = &CASES[ci];
        for (int ai = 0; ai < 5; ai++) {
          if (!full && ai != 2 && ai != 4) continue;
          int64_t v = ACTUAL[ai];
          check_one(ctx, label, s, dt, ta, tb, c, c->dm ? v : c->mb, c->dn ? v : c->nb, c->dk ? v : c->kb);
        }
      }
      const gcase *all = &CASES[3];
      static const int64_t mnk[][3] = {{0, 5, 5}, {7, 0, 3}, {5, 6, 0}, {40, 48, 36}, {13, 17, 9}};
      for (int i = 0; i < 5; i++) {
        if (!full && i != 3 && i != 4) continue;
        check_one(ctx, label, s, dt, ta, tb, all, mnk[i][0], mnk[i][1], mnk[i][2]);
      }
      if (full) {
        check_one(ctx, label, s, dt, ta, tb, &CASES[4], 65, 70, 100);
        check_one(ctx, label, s, dt, ta, tb, &CASES[4], 129, 70, 100);
      }
    }
}

/* Every size on the host, zero-sized dims included: CLBlast directly (under
 * clblast-bound), host BLAS, clbound's kernel, and what AUTO picks. */
static void static_cases(clb_context_t ctx) {
  static const gcase S[] = {{17, 18, 19, 0, 0, 0}, {0, 5, 3, 0, 0, 0}, {4, 0, 3, 0, 0, 0}, {4, 5, 0, 0, 0, 0}};
  static const clb_gemm_strategy ss[] = {CLB_GEMM_AUTO, CLB_GEMM_CLBLAST_BOUND, CLB_GEMM_HOST_BLAS, CLB_GEMM_DEVICE};
  for (int si = 0; si < 4; si++)
    for (int i = 0; i < 4; i++) {
      /* reduced sizes (the oclgrind label): clbound's kernel and CLBlast's bound
       * path on the non-empty case */
      if (clb_test_small() && (i > 0 || (ss[si] != CLB_GEMM_DEVICE && ss[si] != CLB_GEMM_CLBLAST_BOUND))) continue;
      for (int t = 0; t < 4; t++)
        check_one(ctx, "static", ss[si], CLB_DTYPE_F32, t & 1, t >> 1, &S[i], S[i].mb, S[i].nb, S[i].kb);
    }
}

/* Which strategy runs: AUTO is host BLAS on a device with native kernels in a
 * build with OpenBLAS, else clbound's kernel; a forced host BLAS that cannot run
 * falls back to the kernel; CLBOUND_GEMM forces one for a context left at AUTO
 * and the API overrides it. */
static void resolution(void) {
  clb_context_t ctx = clb_test_context(NULL);
  cl_device_exec_capabilities caps = 0;
  clGetDeviceInfo(clb_context_cl_device(ctx), CL_DEVICE_EXECUTION_CAPABILITIES, sizeof caps, &caps, NULL);
#ifdef CLBOUND_HAVE_OPENBLAS
  int host = (caps & CL_EXEC_NATIVE_KERNEL) != 0;
#else
  int host = 0;
#endif
  int want = host ? CLB_GEMM_HOST_BLAS : CLB_GEMM_DEVICE;
  EXPECT_EQ_I(clb_context_gemm_strategy(ctx), want);
  CL_OK(ctx, clb_context_set_gemm_strategy(ctx, CLB_GEMM_HOST_BLAS));
  EXPECT_EQ_I(clb_context_gemm_strategy(ctx), want);
  CL_OK(ctx, clb_context_set_gemm_strategy(ctx, CLB_GEMM_SYNC_EXACT));
  EXPECT_EQ_I(clb_context_gemm_strategy(ctx), CLB_GEMM_SYNC_EXACT);
  clb_context_free(ctx);
  EXPECT_EQ_I(clb_context_gemm_strategy(NULL), -1);
  static const struct {
    const char *env;
    int want;
  } E[] = {{"kernel", CLB_GEMM_DEVICE}, {"clblast-bound", CLB_GEMM_CLBLAST_BOUND}, {"sync-exact", CLB_GEMM_SYNC_EXACT},
           {"host-blas", -1}, {"no-such-strategy", -1}};
  for (size_t i = 0; i < sizeof E / sizeof E[0]; i++) {
    REQUIRE_TRUE(setenv("CLBOUND_GEMM", E[i].env, 1) == 0);
    ctx = clb_test_context(NULL);
    EXPECT_EQ_I(clb_context_gemm_strategy(ctx), E[i].want < 0 ? want : E[i].want);
    CL_OK(ctx, clb_context_set_gemm_strategy(ctx, CLB_GEMM_SYNC_EXACT)); /* the API wins */
    EXPECT_EQ_I(clb_context_gemm_strategy(ctx), CLB_GEMM_SYNC_EXACT);
    clb_context_free(ctx);
  }
  REQUIRE_TRUE(unsetenv("CLBOUND_GEMM") == 0);
}

/* Host BLAS reads the sizes from the shape records in queue order: a record
 * written behind the library's back (as a device op would) is what it uses; a
 * record past its bound is clamped, raises the sticky bound bit, and nothing
 * is written past the bound. */
static void host_blas_records(clb_context_t ctx) {
  CL_OK(ctx, clb_context_set_gemm_strategy(ctx, CLB_GEMM_HOST_BLAS));
  if (clb_context_gemm_strategy(ctx) != CLB_GEMM_HOST_BLAS) return; /* resolution() checked why */
  int64_t ab[2] = {64, 8}, bb[2] = {8, 5}, full[2] = {64, 8};
  uint8_t ay[2] = {1, 0};
  clb_tensor_t a = NULL, b = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, ab, ay, &a));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, bb, NULL, &b));
  double va[64 * 8], vb[8 * 5], got[64 * 5];
  for (int i = 0; i < 64 * 8; i++) va[i] = nn_rnd(-1.0, 1.0);
  for (int i = 0; i < 8 * 5; i++) vb[i] = nn_rnd(-1.0, 1.0);
  clb_test_write(ctx, a, full, va);
  clb_test_write(ctx, b, bb, vb);
  cl_command_queue q = clb_context_cl_queue(ctx);
  static const cl_long recs[][2] = {{5, 8}, {80, 8}};
  for (int r = 0; r < 2; r++) {
    o = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, (int64_t[2]){64, 5}, ay, &o));
    clb_test_canary_fill(ctx, o);
    REQUIRE_TRUE(clEnqueueWriteBuffer(q, clb_tensor_shape_mem(a), CL_FALSE, 0, sizeof recs[r], recs[r], 0, NULL,
                                      NULL) == CL_SUCCESS);
    CL_OK(ctx, clb_matmul(ctx, a, 0, b, 0, &o));
    int64_t m = r == 0 ? 5 : 64;
    if (r == 1) EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_BOUND_EXCEEDED, "size 80 exceeds its bound 64");
    int64_t dims[2];
    if (r == 0) {
      clb_test_read(ctx, o, dims, got, 64 * 5);
    } else {
      /* the failed op's output stays marked: reading it returns the error; the
       * clamped values are read straight from the buffers */
      EXPECT_STATUS(ctx, clb_tensor_read(ctx, o, dims, got, sizeof got, NULL), CLB_ERR_BOUND_EXCEEDED,
                    "holds the output of an op that failed");
      cl_long rec[8];
      float raw[64 * 5];
      REQUIRE_TRUE(clEnqueueReadBuffer(q, clb_tensor_shape_mem(o), CL_TRUE, 0, sizeof rec, rec, 0, NULL, NULL) == CL_SUCCESS);
      REQUIRE_TRUE(clEnqueueReadBuffer(q, clb_tensor_data_mem(o), CL_TRUE, 0, sizeof raw, raw, 0, NULL, NULL) == CL_SUCCESS);
      dims[0] = rec[0];
      dims[1] = rec[1];
      for (int i = 0; i < 64 * 5; i++) got[i] = raw[i];
    }
    EXPECT_EQ_I(dims[0], m);
    EXPECT_EQ_I(dims[1], 5);
    for (int64_t i = 0; i < m; i++)
      for (int j = 0; j < 5; j++) {
        double ref = 0;
        for (int q2 = 0; q2 < 8; q2++) ref += va[i * 8 + q2] * vb[q2 * 5 + j];
        EXPECT_NEAR(got[i * 5 + j], ref);
      }
    clb_test_canary_check(ctx, o, (size_t)(m * 5) * sizeof(float), "host-blas record");
    clb_tensor_free(o);
  }
  CL_OK(ctx, clb_context_sync(ctx));
  clb_tensor_free(a);
  clb_tensor_free(b);
}

/* A K that differs between the operands: a deferred check under the device
 * strategies, an immediate error under sync-exact. */
static void k_mismatch(clb_context_t ctx) {
  int64_t ab[2] = {8, 16}, bb[2] = {16, 4};
  uint8_t dy[2] = {1, 1};
  clb_tensor_t a = NULL, b = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, ab, dy, &a));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, bb, dy, &b));
  double v[64] = {0};
  int64_t da[2] = {3, 5}, db[2] = {6, 4};
  clb_test_write(ctx, a, da, v);
  clb_test_write(ctx, b, db, v);
  for (int s = 1; s < CLB_GEMM_STRATEGY_COUNT; s++) {
    CL_OK(ctx, clb_context_set_gemm_strategy(ctx, (clb_gemm_strategy)s));
    if (s == CLB_GEMM_SYNC_EXACT) {
      EXPECT_STATUS(ctx, clb_matmul(ctx, a, 0, b, 0, &o), CLB_ERR_DEVICE_CHECK, "op(a) has 5 columns, op(b) has 6 rows");
    } else {
      CL_OK(ctx, clb_matmul(ctx, a, 0, b, 0, &o));
      EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DEVICE_CHECK, "sizes 5 and 6 must be equal");
    }
  }
  CL_OK(ctx, clb_context_sync(ctx));
  clb_tensor_free(a);
  clb_tensor_free(b);
  clb_tensor_free(o);
}

static void errors(clb_context_t ctx) {
  int64_t b2[2] = {4, 3}, b3[2] = {3, 5}, b4[2] = {4, 5}, b1[1] = {3};
  clb_tensor_t a = NULL, b = NULL, c = NULL, d = NULL, v = NULL, i = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b2, NULL, &a));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b3, NULL, &b));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b4, NULL, &c));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 2, b3, NULL, &i));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b1, NULL, &v));
  if (has_fp64) {
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F64, 2, b3, NULL, &d));
    EXPECT_STATUS(ctx, clb_matmul(ctx, a, 0, d, 0, &o), CLB_ERR_DTYPE, "dtypes differ: a [4, 3] f32, b [3, 5] f64");
  }
  EXPECT_STATUS(ctx, clb_matmul(ctx, a, 0, i, 0, &o), CLB_ERR_DTYPE, "b is i32; matmul takes f32 or f64");
  EXPECT_STATUS(ctx, clb_matmul(ctx, a, 0, c, 0, &o), CLB_ERR_SHAPE, "op(a) has 3 columns, op(b) has 4 rows");
  EXPECT_STATUS(ctx, clb_matmul(ctx, a, 1, b, 0, &o), CLB_ERR_SHAPE, "op(a) has 4 columns, op(b) has 3 rows");
  EXPECT_STATUS(ctx, clb_matmul(ctx, v, 0, b, 0, &o), CLB_ERR_SHAPE, "a [3] f32 has rank 1");
  EXPECT_STATUS(ctx, clb_matmul(ctx, NULL, 0, b, 0, &o), CLB_ERR_NULL, "tensor a is NULL");
  EXPECT_STATUS(ctx, clb_matmul(ctx, a, 0, NULL, 0, &o), CLB_ERR_NULL, "tensor b is NULL");
  EXPECT_STATUS(ctx, clb_matmul(ctx, a, 0, b, 0, NULL), CLB_ERR_NULL, "out is NULL");
  EXPECT_TRUE(clb_matmul(NULL, a, 0, b, 0, &o) == CLB_ERR_NULL);
  EXPECT_STATUS(ctx, clb_context_set_gemm_strategy(ctx, (clb_gemm_strategy)9), CLB_ERR_INVALID_ARG, "unknown strategy 9");
  /* a wrong output: too small, or one of the inputs */
  clb_tensor_t small = NULL;
  int64_t sb[2] = {4, 4};
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, sb, NULL, &small));
  EXPECT_STATUS(ctx, clb_matmul(ctx, a, 0, b, 0, &small), CLB_ERR_OUT_OF_BOUNDS, "dim 1 of out [4, 4] f32: bound 4 < 5");
  clb_tensor_t sq = NULL;
  int64_t qb[2] = {3, 3};
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, qb, NULL, &sq));
  clb_tensor_t alias = sq;
  EXPECT_STATUS(ctx, clb_matmul(ctx, sq, 0, sq, 0, &alias), CLB_ERR_INVALID_ARG, "out must not be an input");
  /* linear: bias of the wrong size */
  clb_tensor_t w = NULL, bias = NULL, y = NULL;
  int64_t wb[2] = {5, 3}, bb[1] = {4};
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, wb, NULL, &w));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, bb, NULL, &bias));
  EXPECT_STATUS(ctx, clb_linear(ctx, a, w, bias, &y), CLB_ERR_SHAPE, "bias [4] f32 must be [5]");
  EXPECT_STATUS(ctx, clb_linear(ctx, a, b, NULL, &y), CLB_ERR_SHAPE, "op(a) has 3 columns, op(b) has 5 rows");
  clb_tensor_t dx = NULL;
  EXPECT_STATUS(ctx, clb_linear_backward(ctx, a, w, a, &dx, NULL, NULL), CLB_ERR_SHAPE, "do not match");
  EXPECT_STATUS(ctx, clb_linear_backward(ctx, a, w, NULL, &dx, NULL, NULL), CLB_ERR_NULL, "tensor dy is NULL");
  clb_tensor_t all[] = {a, b, c, d, v, i, small, sq, w, bias};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) clb_tensor_free(all[k]);
}

/* A changing M builds nothing after the first call; the device strategies make
 * no host sync; sync-exact makes exactly one per matmul. */
static void counters(clb_context_t ctx) {
  int64_t ab[2] = {256, 32}, bb[2] = {32, 24};
  uint8_t ay[2] = {1, 0};
  clb_tensor_t a = NULL, b = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, ab, ay, &a));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, bb, NULL, &b));
  double *va = calloc(256 * 32, sizeof(double)), vb[32 * 24] = {0};
  REQUIRE_TRUE(va != NULL);
  clb_test_write(ctx, b, bb, vb);
  for (int s = 0; s < CLB_GEMM_STRATEGY_COUNT; s++) {
    if (clb_test_small() && s != CLB_GEMM_DEVICE && s != CLB_GEMM_SYNC_EXACT) continue;
    for (int t = 0; t < 4; t++) {
      int ta = t & 1, tb = t >> 1;
      clb_tensor_t aa = a, bt = b, o = NULL;
      if (ta) { /* a stored [32, <=256] */
        int64_t tbd[2] = {32, 256};
        uint8_t ty[2] = {0, 1};
        CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, tbd, ty, &aa));
      }
      if (tb) {
        int64_t tbd[2] = {24, 32};
        CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, tbd, NULL, &bt));
        clb_test_write(ctx, bt, tbd, vb);
      }
      CL_OK(ctx, clb_context_set_gemm_strategy(ctx, (clb_gemm_strategy)s));
      int64_t d0[2] = {ta ? 32 : 10, ta ? 10 : 32};
      clb_test_write(ctx, aa, d0, va);
      CL_OK(ctx, clb_matmul(ctx, aa, ta, bt, tb, &o)); /* first call: may build */
      CL_OK(ctx, clb_context_sync(ctx));
      uint64_t builds = clb_test_counter_builds(ctx), syncs = clb_test_counter_syncs(ctx);
      static const int64_t ms[] = {1, 200, 0, 256, 77};
      for (int r = 0; r < 5; r++) {
        int64_t d[2] = {ta ? 32 : ms[r], ta ? ms[r] : 32};
        CL_OK(ctx, clb_tensor_set_sizes(ctx, aa, d));
        CL_OK(ctx, clb_matmul(ctx, aa, ta, bt, tb, &o));
      }
      uint64_t dsyncs = clb_test_counter_syncs(ctx) - syncs;
      EXPECT_EQ_I(clb_test_counter_builds(ctx) - builds, 0);
      EXPECT_EQ_I(dsyncs, s == CLB_GEMM_SYNC_EXACT ? 5 : 0);
      int64_t od[2];
      CL_OK(ctx, clb_tensor_sizes(ctx, o, od));
      EXPECT_EQ_I(od[0], 77);
      EXPECT_EQ_I(od[1], 24);
      clb_tensor_free(o);
      if (aa != a) clb_tensor_free(aa);
      if (bt != b) clb_tensor_free(bt);
    }
  }
  free(va);
  clb_tensor_free(a);
  clb_tensor_free(b);
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  clb_device_info info;
  info.struct_size = sizeof info;
  CL_OK(ctx, clb_device_info_get(0, &info));
  has_fp64 = clb_tensor_new(ctx, CLB_DTYPE_F64, 0, NULL, NULL, &(clb_tensor_t){NULL}) == CLB_OK;
  /* reduced sizes (the oclgrind label, Oclgrind simulating every work-item):
   * the short sweep of clbound's kernel and of CLBlast's bound path, f32 */
  const int small = clb_test_small();
  static_cases(ctx);
  for (int s = 1; s < CLB_GEMM_STRATEGY_COUNT; s++)
    if (!small || s == CLB_GEMM_DEVICE || s == CLB_GEMM_CLBLAST_BOUND)
      sweep(ctx, "cpu-style", (clb_gemm_strategy)s, CLB_DTYPE_F32, !small);
  if (!small) sweep(ctx, "cpu-style", CLB_GEMM_AUTO, CLB_DTYPE_F32, 0);
  if (has_fp64 && !small)
    for (int s = 1; s < CLB_GEMM_STRATEGY_COUNT; s++) sweep(ctx, "cpu-style", (clb_gemm_strategy)s, CLB_DTYPE_F64, 0);
  k_mismatch(ctx);
  host_blas_records(ctx);
  errors(ctx);
  counters(ctx);
  clb_context_free(ctx);

  /* The GPU-style kernel (local-memory tiles) runs on PoCL too. */
  clb_context_options opts;
  clb_context_options_init(&opts);
  opts.kernel_style = CLB_KERNEL_STYLE_GPU;
  ctx = clb_test_context(&opts);
  sweep(ctx, "gpu-style", CLB_GEMM_DEVICE, CLB_DTYPE_F32, !small);
  if (has_fp64 && !small) sweep(ctx, "gpu-style", CLB_GEMM_DEVICE, CLB_DTYPE_F64, 0);
  clb_context_free(ctx);
  resolution();
  return clb_test_finish("nn/gemm");
}
