/* test-reduce.c: sum, mean and max over all elements and over one dim, and the
 * running sum along a dim (clb_cumsum), at the actual sizes, against a
 * double-precision reference. */
#include "cl-test.h"

static const int64_t SIZES[] = {0, 1, 63, 64, 65, 1023, 1024, 1025, 3000};
#define NSIZES (int)(sizeof SIZES / sizeof SIZES[0])
/* Reduced sizes (the oclgrind label): empty, within one CPU work-group, and
 * over several GPU ones. */
static int keep_size(int s) { return !clb_test_small() || SIZES[s] == 0 || SIZES[s] == 65 || SIZES[s] == 1025; }
/* Reduced sizes: one floating and one integer dtype (each dtype and op is a
 * program of its own, which Oclgrind compiles), and bool for its count. */
static int keep_dtype(int dt) {
  return !clb_test_small() || dt == CLB_DTYPE_F32 || dt == CLB_DTYPE_I32 || dt == CLB_DTYPE_BOOL;
}
#define BOUND 3000

static int has_fp64;

static double gen(clb_dtype dt) {
  uint64_t r = clb_test_next();
  switch (dt) {
  case CLB_DTYPE_F32:
  case CLB_DTYPE_F64: return (double)(float)((double)(r % 4001) / 1000.0 - 1.5);
  case CLB_DTYPE_U8: return (double)(r % 256);
  case CLB_DTYPE_BOOL: return (double)(r % 2);
  default: return (double)((int64_t)(r % 2001) - 1000);
  }
}

static void check(clb_dtype out_dt, double got, double want, const char *what) {
  clb_test_checks++;
  int fl = out_dt == CLB_DTYPE_F32 || out_dt == CLB_DTYPE_F64;
  if (fl) {
    if (isnan(want) && isnan(got)) return;
    double d = fabs(got - want);
    if (!(d <= 1e-3 || d <= 5e-3 * fabs(want))) CLB_FAIL_AT("%s: %.9g, want %.9g", what, got, want);
  } else if (got != want) {
    CLB_FAIL_AT("%s: %.17g, want %.17g", what, got, want);
  }
}

static clb_dtype out_dtype(clb_reduce_op op, clb_dtype in) {
  if (op == CLB_REDUCE_MAX) return in;
  return (in == CLB_DTYPE_F32 || in == CLB_DTYPE_F64) ? in : CLB_DTYPE_I64;
}

static double ref(clb_reduce_op op, const double *v, int64_t n, int64_t stride) {
  double acc = op == CLB_REDUCE_MAX ? -INFINITY : 0;
  for (int64_t i = 0; i < n; i++) {
    double x = v[i * stride];
    if (op == CLB_REDUCE_MAX) acc = x > acc ? x : acc;
    else acc += x;
  }
  if (op == CLB_REDUCE_MEAN) return n ? acc / (double)n : NAN;
  return acc;
}

static void test_all(clb_context_t ctx) {
  static double v[BOUND * 2];
  int64_t bound[2] = {BOUND, 2};
  uint8_t dyn[2] = {1, 0};
  for (int dt = 0; dt < CLB_DTYPE_COUNT; dt++) {
    if (dt == CLB_DTYPE_F64 && !has_fp64) continue;
    if (!keep_dtype(dt)) continue;
    clb_tensor_t a = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, (clb_dtype)dt, 2, bound, dyn, &a));
    for (int op = 0; op < CLB_REDUCE_COUNT; op++) {
      int fl = dt == CLB_DTYPE_F32 || dt == CLB_DTYPE_F64;
      if (op == CLB_REDUCE_MEAN && !fl) continue;
      clb_tensor_t o = NULL;
      for (int s = 0; s < NSIZES; s++) {
        if (!keep_size(s)) continue;
        int64_t dims[2] = {SIZES[s], 2};
        for (int64_t i = 0; i < dims[0] * 2; i++) v[i] = gen((clb_dtype)dt);
        clb_test_write(ctx, a, dims, v);
        CL_OK(ctx, clb_reduce_all(ctx, (clb_reduce_op)op, a, &o));
        EXPECT_EQ_I(clb_tensor_rank(o), 0);
        EXPECT_EQ_I(clb_tensor_dtype(o), out_dtype((clb_reduce_op)op, (clb_dtype)dt));
        double got;
        if (op == CLB_REDUCE_MAX && dims[0] == 0) {
          /* max of nothing: a sticky error at the next sync, as PyTorch raises */
          int32_t raw[2];
          EXPECT_STATUS(ctx, clb_tensor_read(ctx, o, NULL, raw, sizeof raw, NULL), CLB_ERR_EMPTY_REDUCE, "max");
          continue;
        }
        clb_test_read(ctx, o, NULL, &got, 1);
        char what[64];
        snprintf(what, sizeof what, "%s all %s n=%lld", clb_dtype_name((clb_dtype)dt), op == 0 ? "sum" : op == 1 ? "mean" : "max", (long long)dims[0]);
        check(out_dtype((clb_reduce_op)op, (clb_dtype)dt), got, ref((clb_reduce_op)op, v, dims[0] * 2, 1), what);
      }
      clb_tensor_free(o);
    }
    clb_tensor_free(a);
  }
}

/* [<=R, 3, <=C] reduced over each dim, with and without keepdim. */
static void test_dim(clb_context_t ctx) {
  static double v[40 * 3 * 50], out[40 * 3 * 50];
  int64_t bound[3] = {40, 3, 50};
  uint8_t dyn[3] = {1, 0, 1};
  const int64_t shapes[][3] = {{0, 3, 5}, {1, 3, 1}, {7, 3, 49}, {40, 3, 50}, {33, 3, 0}};
  for (int dt = 0; dt < CLB_DTYPE_COUNT; dt++) {
    if (dt == CLB_DTYPE_F64 && !has_fp64) continue;
    if (!keep_dtype(dt)) continue;
    int fl = dt == CLB_DTYPE_F32 || dt == CLB_DTYPE_F64;
    clb_tensor_t a = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, (clb_dtype)dt, 3, bound, dyn, &a));
    for (int op = 0; op < CLB_REDUCE_COUNT; op++) {
      if (op == CLB_REDUCE_MEAN && !fl) continue;
      for (int dim = -1; dim < 3; dim++) {
        for (int keep = 0; keep < 2; keep++) {
          clb_tensor_t o = NULL;
          for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            /* reduced sizes: the empty, the odd and the full shape */
            if (clb_test_small() && s != 0 && s != 2 && s != 3) continue;
            const int64_t *dims = shapes[s];
            int64_t n = clb_test_numel(3, dims);
            for (int64_t i = 0; i < n; i++) v[i] = gen((clb_dtype)dt);
            clb_test_write(ctx, a, dims, v);
            CL_OK(ctx, clb_reduce_dim(ctx, (clb_reduce_op)op, a, dim, keep, &o));
            int rd = dim < 0 ? dim + 3 : dim;
            int64_t k = dims[rd];
            int64_t outer = 1, inner = 1;
            for (int d = 0; d < rd; d++) outer *= dims[d];
            for (int d = rd + 1; d < 3; d++) inner *= dims[d];
            int64_t got_dims[3];
            if (op == CLB_REDUCE_MAX && k == 0 && outer * inner > 0) {
              EXPECT_STATUS(ctx, clb_tensor_read(ctx, o, got_dims, out, sizeof out, NULL), CLB_ERR_EMPTY_REDUCE, "max");
              continue;
            }
            int64_t got = clb_test_read(ctx, o, got_dims, out, 40 * 3 * 50);
            EXPECT_EQ_I(got, outer * inner);
            EXPECT_EQ_I(clb_tensor_rank(o), keep ? 3 : 2);
            for (int d = 0, od = 0; d < 3; d++) {
              if (d == rd) {
                if (keep) EXPECT_EQ_I(got_dims[od++], 1);
              } else {
                EXPECT_EQ_I(got_dims[od++], dims[d]);
              }
            }
            char what[96];
            snprintf(what, sizeof what, "%s op %d dim %d keep %d [%lld,3,%lld]", clb_dtype_name((clb_dtype)dt), op, dim, keep,
                     (long long)dims[0], (long long)dims[2]);
            for (int64_t o_i = 0; o_i < outer && got == outer * inner; o_i++)
              for (int64_t j = 0; j < inner; j++)
                check(out_dtype((clb_reduce_op)op, (clb_dtype)dt), out[o_i * inner + j],
                      ref((clb_reduce_op)op, v + o_i * k * inner + j, k, inner), what);
          }
          clb_tensor_free(o);
        }
      }
    }
    clb_tensor_free(a);
  }
}

/* clb_cumsum over each dim of [<=R, 3, <=C] at several actual sizes (empty
 * ones too), every dtype: integers exactly (in i64), floats against a double
 * running sum; the output keeps the input's sizes; canaries past them. */
static void test_cumsum(clb_context_t ctx) {
  static double v[40 * 3 * 50], out[40 * 3 * 50];
  int64_t bound[3] = {40, 3, 50};
  uint8_t dyn[3] = {1, 0, 1};
  const int64_t shapes[][3] = {{0, 3, 5}, {1, 3, 1}, {7, 3, 49}, {40, 3, 50}, {33, 3, 0}};
  for (int dt = 0; dt < CLB_DTYPE_COUNT; dt++) {
    if (dt == CLB_DTYPE_F64 && !has_fp64) continue;
    if (!keep_dtype(dt)) continue;
    clb_dtype odt = out_dtype(CLB_REDUCE_SUM, (clb_dtype)dt);
    clb_tensor_t a = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, (clb_dtype)dt, 3, bound, dyn, &a));
    for (int dim = -1; dim < 3; dim++) {
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        if (clb_test_small() && s != 0 && s != 2) continue;
        const int64_t *dims = shapes[s];
        int64_t n = clb_test_numel(3, dims);
        for (int64_t i = 0; i < n; i++) v[i] = gen((clb_dtype)dt);
        clb_test_write(ctx, a, dims, v);
        clb_tensor_t o = NULL;
        CL_OK(ctx, clb_cumsum(ctx, a, dim, &o));
        EXPECT_EQ_I(clb_tensor_dtype(o), odt);
        clb_test_canary_fill(ctx, o);
        CL_OK(ctx, clb_cumsum(ctx, a, dim, &o)); /* into the given output */
        int64_t got_dims[3];
        int64_t got = clb_test_read(ctx, o, got_dims, out, 40 * 3 * 50);
        EXPECT_EQ_I(got, n);
        for (int d = 0; d < 3; d++) EXPECT_EQ_I(got_dims[d], dims[d]);
        int rd = dim < 0 ? dim + 3 : dim;
        int64_t k = dims[rd], outer = 1, inner = 1;
        for (int d = 0; d < rd; d++) outer *= dims[d];
        for (int d = rd + 1; d < 3; d++) inner *= dims[d];
        char what[96];
        snprintf(what, sizeof what, "cumsum %s dim %d [%lld,3,%lld]", clb_dtype_name((clb_dtype)dt), dim,
                 (long long)dims[0], (long long)dims[2]);
        for (int64_t oi = 0; oi < outer && got == n; oi++)
          for (int64_t j = 0; j < inner; j++) {
            double acc = 0;
            for (int64_t r = 0; r < k; r++) {
              int64_t at = oi * k * inner + r * inner + j;
              acc += v[at];
              check(odt, out[at], acc, what);
            }
          }
        clb_test_canary_check(ctx, o, (size_t)n * clb_dtype_size(odt), what);
        clb_tensor_free(o);
      }
    }
    clb_tensor_free(a);
  }
  /* a million floats of 0.1 along one dim: compensated, within float's resolution */
  if (!clb_test_small()) {
    enum { N = 1 << 20 };
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    REQUIRE_TRUE(x && y);
    for (int i = 0; i < N; i++) x[i] = 0.1f;
    int64_t b[1] = {N};
    clb_tensor_t a = NULL, o = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b, NULL, &a));
    CL_OK(ctx, clb_tensor_write(ctx, a, b, x, sizeof(float) * N));
    CL_OK(ctx, clb_cumsum(ctx, a, 0, &o));
    CL_OK(ctx, clb_tensor_read(ctx, o, NULL, y, sizeof(float) * N, NULL));
    for (int i = 0; i < N; i += 4099) {
      double want = (double)0.1f * (i + 1);
      clb_test_checks++;
      if (fabs(y[i] - want) > 1e-6 * want + 1e-7) CLB_FAIL_AT("cumsum of 0.1f at %d: %.9g, want %.9g", i, y[i], want);
    }
    clb_tensor_free(a);
    clb_tensor_free(o);
    free(x);
    free(y);
  }
  int64_t b2[2] = {4, 5};
  clb_tensor_t e = NULL, o = NULL, s0 = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b2, NULL, &e));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 0, NULL, NULL, &s0));
  EXPECT_STATUS(ctx, clb_cumsum(ctx, e, 2, &o), CLB_ERR_INVALID_ARG, "cumsum: dim 2 is outside");
  EXPECT_STATUS(ctx, clb_cumsum(ctx, e, -3, &o), CLB_ERR_INVALID_ARG, "dim -3");
  EXPECT_STATUS(ctx, clb_cumsum(ctx, s0, 0, &o), CLB_ERR_INVALID_ARG, "rank 0");
  EXPECT_STATUS(ctx, clb_cumsum(ctx, NULL, 0, &o), CLB_ERR_NULL, "tensor a is NULL");
  clb_tensor_free(e);
  clb_tensor_free(s0);
}

/* A million floats of 0.1: compensated sums stay within float's resolution. */
static void test_accuracy(clb_context_t ctx) {
  if (clb_test_small()) return; /* a million elements: minutes simulated */
  enum { N = 1 << 20 };
  float *v = malloc(sizeof(float) * N);
  REQUIRE_TRUE(v != NULL);
  for (int i = 0; i < N; i++) v[i] = 0.1f;
  int64_t b[1] = {N};
  clb_tensor_t a = NULL, s = NULL, m = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b, NULL, &a));
  CL_OK(ctx, clb_tensor_write(ctx, a, b, v, sizeof(float) * N));
  CL_OK(ctx, clb_reduce_all(ctx, CLB_REDUCE_SUM, a, &s));
  CL_OK(ctx, clb_reduce_all(ctx, CLB_REDUCE_MEAN, a, &m));
  float sum = 0, mean = 0;
  CL_OK(ctx, clb_tensor_read(ctx, s, NULL, &sum, sizeof sum, NULL));
  CL_OK(ctx, clb_tensor_read(ctx, m, NULL, &mean, sizeof mean, NULL));
  double want = (double)0.1f * N;
  clb_test_checks++;
  if (fabs(sum - want) > 1e-5 * want) CLB_FAIL_AT("sum of 2^20 x 0.1f: %.9g, want %.9g", sum, want);
  clb_test_checks++;
  if (fabs(mean - 0.1f) > 1e-6) CLB_FAIL_AT("mean of 2^20 x 0.1f: %.9g", mean);
  free(v);
}

/* IEEE specials in a sum, as PyTorch and numpy give them: an inf stays inf
 * past later terms (a compensated sum once turned it into NaN: (t - v) - y is
 * inf - inf), +inf and -inf give NaN, a NaN stays NaN. Over all elements,
 * over a dim and running (cumsum), f32 and f64. */
static void test_specials(clb_context_t ctx) {
  const double inf = INFINITY;
  const double rows[4][5] = {{1, inf, 2, 3, 4}, {inf, -inf, 1, 2, 3}, {1, 2, NAN, 3, inf}, {-inf, 1, 2, 3, 4}};
  for (int dt = 0; dt < 2; dt++) {
    if (dt == 1 && !has_fp64) continue;
    clb_dtype t = dt ? CLB_DTYPE_F64 : CLB_DTYPE_F32;
    for (int r = 0; r < 4; r++) {
      float xf[5];
      double xd[5];
      for (int i = 0; i < 5; i++) xf[i] = (float)rows[r][i], xd[i] = rows[r][i];
      int64_t b[2] = {1, 5};
      clb_tensor_t a = NULL, all = NULL, dim = NULL, run = NULL;
      CL_OK(ctx, clb_tensor_new(ctx, t, 2, b, NULL, &a));
      CL_OK(ctx, clb_tensor_write(ctx, a, b, dt ? (const void *)xd : (const void *)xf, 5 * clb_dtype_size(t)));
      CL_OK(ctx, clb_reduce_all(ctx, CLB_REDUCE_SUM, a, &all));
      CL_OK(ctx, clb_reduce_dim(ctx, CLB_REDUCE_SUM, a, 1, 0, &dim));
      CL_OK(ctx, clb_cumsum(ctx, a, 1, &run));
      double want[5], acc = 0;
      for (int i = 0; i < 5; i++) want[i] = acc += rows[r][i];
      double got[7];
      float gf[7];
      void *g = dt ? (void *)got : (void *)gf;
      size_t es = clb_dtype_size(t);
      CL_OK(ctx, clb_tensor_read(ctx, all, NULL, g, es, NULL));
      CL_OK(ctx, clb_tensor_read(ctx, dim, NULL, (char *)g + es, es, NULL));
      CL_OK(ctx, clb_tensor_read(ctx, run, NULL, (char *)g + 2 * es, 5 * es, NULL));
      for (int k = 0; k < 7; k++) {
        double v = dt ? got[k] : (double)gf[k], w = k < 2 ? want[4] : want[k - 2];
        clb_test_checks++;
        if (!(isnan(w) ? isnan(v) : v == w))
          CLB_FAIL_AT("%s %s of row %d: %g, want %g", clb_dtype_name(t), k == 0 ? "sum" : k == 1 ? "sum over dim 1" : "cumsum",
                      r, v, w);
      }
      clb_tensor_free(a);
      clb_tensor_free(all);
      clb_tensor_free(dim);
      clb_tensor_free(run);
    }
  }
}

static void test_errors(clb_context_t ctx) {
  int64_t b[2] = {4, 5};
  clb_tensor_t a = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 2, b, NULL, &a));
  EXPECT_STATUS(ctx, clb_reduce_all(ctx, CLB_REDUCE_MEAN, a, &o), CLB_ERR_DTYPE, "mean of i32");
  EXPECT_STATUS(ctx, clb_reduce_dim(ctx, CLB_REDUCE_SUM, a, 2, 0, &o), CLB_ERR_INVALID_ARG, "dim 2 is outside");
  EXPECT_STATUS(ctx, clb_reduce_dim(ctx, CLB_REDUCE_SUM, a, -3, 0, &o), CLB_ERR_INVALID_ARG, "dim -3");
  EXPECT_STATUS(ctx, clb_reduce_all(ctx, (clb_reduce_op)7, a, &o), CLB_ERR_INVALID_ARG, "unknown op 7");
  EXPECT_STATUS(ctx, clb_reduce_all(ctx, CLB_REDUCE_SUM, NULL, &o), CLB_ERR_NULL, "tensor a is NULL");
  clb_tensor_t wrong = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 0, NULL, NULL, &wrong));
  EXPECT_STATUS(ctx, clb_reduce_all(ctx, CLB_REDUCE_SUM, a, &wrong), CLB_ERR_DTYPE, "out is i32, the op gives i64");
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  has_fp64 = clb_test_has_fp64();
  test_all(ctx);
  test_dim(ctx);
  test_cumsum(ctx);
  test_accuracy(ctx);
  test_specials(ctx);
  test_errors(ctx);
  clb_context_free(ctx);
  return clb_test_finish("ops/reduce");
}
