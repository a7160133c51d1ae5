/* test-masked.c: masked_select and masked_scatter against a plain-C reference:
 * every dtype, every broadcast direction, ranks 0 to 4, densities 0 to 100%,
 * sizes around the work-group and chunk sizes, actual sizes below the bound,
 * empty tensors, in place, both kernel styles, with canaries. */
#include "ops-test.h"

static const double densities[] = {0.0, 0.01, 0.5, 1.0};

/* An operand: bounds, dynamic flags and actual sizes. */
typedef struct operand {
  int rank;
  int64_t bound[4];
  uint8_t dyn[4];
  int64_t dims[4];
} operand;

static clb_tensor_t make(clb_context_t ctx, clb_dtype dt, const operand *o) {
  clb_tensor_t t = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, dt, o->rank, o->bound, o->dyn, &t));
  return t;
}

/* The broadcast of two operands' sizes (a or b given by `bounds`). */
static int bcast_dims(const operand *a, const operand *b, int bounds, int64_t *od) {
  int rank = a->rank > b->rank ? a->rank : b->rank;
  for (int d = 0; d < rank; d++) {
    int ia = d - (rank - a->rank), ib = d - (rank - b->rank);
    int64_t da = ia >= 0 ? (bounds ? a->bound[ia] : a->dims[ia]) : 1;
    int64_t db = ib >= 0 ? (bounds ? b->bound[ib] : b->dims[ib]) : 1;
    od[d] = da == 1 ? db : da;
  }
  return rank;
}

static void fill_mask(int64_t n, double density, double *m) {
  for (int64_t i = 0; i < n; i++) m[i] = density >= 1.0 || ops_uniform() < density;
}

static long cases = 0;

/* masked_select(x, mask) into a caller's output (canaries), then into one the
 * op creates, against the reference. */
static void check_select(clb_context_t ctx, clb_dtype dt, const operand *xo, const operand *mo, double density) {
  int64_t od[4], ob[4];
  int rank = bcast_dims(xo, mo, 0, od);
  bcast_dims(xo, mo, 1, ob);
  int64_t n = clb_test_numel(rank, od), nb = clb_test_numel(rank, ob);
  int64_t nx = clb_test_numel(xo->rank, xo->dims), nm = clb_test_numel(mo->rank, mo->dims);
  double *xv = malloc((size_t)(nx + 1) * sizeof(double)), *mv = malloc((size_t)(nm + 1) * sizeof(double));
  double *ref = malloc((size_t)(n + 1) * sizeof(double)), *got = malloc((size_t)(nb + 1) * sizeof(double));
  int64_t *ix = malloc((size_t)(n + 1) * sizeof(int64_t)), *im = malloc((size_t)(n + 1) * sizeof(int64_t));
  REQUIRE_TRUE(xv && mv && ref && got && ix && im);
  ops_gen(dt, nx, 0.7, xv);
  ops_roundtrip(dt, xv, nx);
  fill_mask(nm, density, mv);
  ops_bcast_index(rank, od, xo->rank, xo->dims, ix);
  ops_bcast_index(rank, od, mo->rank, mo->dims, im);
  int64_t cnt = 0;
  for (int64_t i = 0; i < n; i++)
    if (mv[im[i]] != 0) ref[cnt++] = xv[ix[i]];
  clb_tensor_t x = make(ctx, dt, xo), m = make(ctx, CLB_DTYPE_BOOL, mo);
  clb_test_write(ctx, x, xo->dims, xv);
  clb_test_write(ctx, m, mo->dims, mv);
  cases++;

  uint8_t dyn = 1;
  clb_tensor_t out = NULL, out2 = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, dt, 1, &nb, &dyn, &out));
  clb_test_canary_fill(ctx, out);
  CL_OK(ctx, clb_masked_select(ctx, x, m, &out));
  CL_OK(ctx, clb_masked_select(ctx, x, m, &out2));
  for (int pass = 0; pass < 2; pass++) {
    clb_tensor_t o = pass ? out2 : out;
    int64_t gd[1] = {-1}, gb[1];
    int64_t got_n = clb_test_read(ctx, o, gd, got, nb);
    clb_tensor_bounds(o, gb);
    EXPECT_EQ_I(gb[0], nb);
    EXPECT_EQ_I(gd[0], cnt);
    int64_t bad = 0;
    for (int64_t i = 0; i < cnt && got_n == cnt; i++) bad += !ops_same(got[i], ref[i]);
    clb_test_checks++;
    if (bad || got_n != cnt)
      CLB_FAIL_AT("masked_select %s ranks %d/%d n %lld density %g: %lld of %lld wrong", clb_dtype_name(dt), xo->rank,
                  mo->rank, (long long)n, density, (long long)bad, (long long)cnt);
  }
  clb_test_canary_check(ctx, out, (size_t)cnt * clb_dtype_size(dt), "masked_select output");
  clb_tensor_free(out);
  clb_tensor_free(out2);
  clb_tensor_free(x);
  clb_tensor_free(m);
  free(xv);
  free(mv);
  free(ref);
  free(got);
  free(ix);
  free(im);
}

/* masked_scatter(x, mask, source) with a source `extra` elements longer than
 * the count, shaped [2, len/2] when `src2d` and the length is even; into a
 * caller's output (canaries), and in place. */
static void check_scatter(clb_context_t ctx, clb_dtype dt, const operand *xo, const operand *mo, double density,
                          int64_t extra, int src2d) {
  int64_t n = clb_test_numel(xo->rank, xo->dims), nb = clb_test_numel(xo->rank, xo->bound);
  int64_t nm = clb_test_numel(mo->rank, mo->dims);
  double *xv = malloc((size_t)(n + 1) * sizeof(double)), *mv = malloc((size_t)(nm + 1) * sizeof(double));
  double *ref = malloc((size_t)(n + 1) * sizeof(double)), *got = malloc((size_t)(nb + 1) * sizeof(double));
  int64_t *im = malloc((size_t)(n + 1) * sizeof(int64_t));
  REQUIRE_TRUE(xv && mv && ref && got && im);
  ops_gen(dt, n, 0.7, xv);
  ops_roundtrip(dt, xv, n);
  fill_mask(nm, density, mv);
  ops_bcast_index(xo->rank, xo->dims, mo->rank, mo->dims, im);
  int64_t cnt = 0;
  for (int64_t i = 0; i < n; i++) cnt += mv[im[i]] != 0;
  int64_t ns = cnt + extra;
  double *sv = malloc((size_t)(ns + 1) * sizeof(double));
  REQUIRE_TRUE(sv != NULL);
  ops_gen(dt, ns, 1.0, sv);
  ops_roundtrip(dt, sv, ns);
  for (int64_t i = 0, k = 0; i < n; i++) ref[i] = mv[im[i]] != 0 ? sv[k++] : xv[i];
  operand so = {1, {ns + 5}, {1}, {ns}};
  if (src2d && ns % 2 == 0 && ns > 0) {
    so.rank = 2;
    so.bound[0] = 2;
    so.bound[1] = ns / 2 + 3;
    so.dyn[0] = 0;
    so.dyn[1] = 1;
    so.dims[0] = 2;
    so.dims[1] = ns / 2;
  }
  clb_tensor_t x = make(ctx, dt, xo), m = make(ctx, CLB_DTYPE_BOOL, mo), s = make(ctx, dt, &so);
  clb_test_write(ctx, x, xo->dims, xv);
  clb_test_write(ctx, m, mo->dims, mv);
  clb_test_write(ctx, s, so.dims, sv);
  cases++;

  clb_tensor_t out = make(ctx, dt, xo);
  clb_test_canary_fill(ctx, out);
  CL_OK(ctx, clb_masked_scatter(ctx, x, m, s, &out));
  for (int pass = 0; pass < 2; pass++) {
    clb_tensor_t o = pass ? x : out;
    if (pass) CL_OK(ctx, clb_masked_scatter(ctx, x, m, s, &x)); /* in place */
    int64_t gd[4];
    int64_t got_n = clb_test_read(ctx, o, gd, got, nb);
    EXPECT_EQ_I(got_n, n);
    for (int d = 0; d < xo->rank; d++) EXPECT_EQ_I(gd[d], xo->dims[d]);
    int64_t bad = 0;
    for (int64_t i = 0; i < n && got_n == n; i++) bad += !ops_same(got[i], ref[i]);
    clb_test_checks++;
    if (bad)
      CLB_FAIL_AT("masked_scatter %s ranks %d/%d n %lld density %g%s: %lld wrong", clb_dtype_name(dt), xo->rank,
                  mo->rank, (long long)n, density, pass ? " in place" : "", (long long)bad);
  }
  clb_test_canary_check(ctx, out, (size_t)n * clb_dtype_size(dt), "masked_scatter output");
  clb_tensor_free(out);
  clb_tensor_free(x);
  clb_tensor_free(m);
  clb_tensor_free(s);
  free(xv);
  free(mv);
  free(ref);
  free(got);
  free(im);
  free(sv);
}

/* 1-D, same shapes, around the work-group (64) and chunk (1024) sizes, with
 * actual sizes at and below several bounds. */
static void test_flat(clb_context_t ctx, clb_dtype dt, int full) {
  static const int64_t bounds[] = {1, 129, 1025, 4097, 70000};
  static const int64_t sizes[] = {0, 1, 31, 32, 33, 63, 64, 65, 127, 128, 129,
                                  1023, 1024, 1025, 4095, 4096, 4097, 70000};
  for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
    if (clb_test_small()) {
      /* reduced sizes: bound 129 (ops/nonzero runs 70000 and sel_finish's
       * carry over more than LOCAL work-groups, which masked_* share) */
      if (bounds[b] != 129) continue;
    } else if (!full && bounds[b] != 4097) {
      continue;
    }
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      if (sizes[s] > bounds[b] || (clb_test_small() && (!ops_small_size(sizes[s]) || (bounds[b] == 70000 && sizes[s] != 70000)))) continue;
      operand o = {1, {bounds[b]}, {1}, {sizes[s]}};
      for (size_t di = ops_density_first(); di < ops_density_end(); di++) {
        check_select(ctx, dt, &o, &o, densities[di]);
        check_scatter(ctx, dt, &o, &o, densities[di], (int64_t)(s % 3), (int)(s % 2));
      }
    }
  }
}

/* Every broadcast direction, ranks 0 to 4, static and bounded dims, empties. */
static void test_broadcast(clb_context_t ctx, clb_dtype dt) {
  static const operand pairs[][2] = {
      /* same shape, bounded */
      {{2, {100, 65}, {1, 0}, {37, 65}}, {2, {100, 65}, {1, 0}, {37, 65}}},
      /* the mask smaller: a missing leading dim, a static 1 */
      {{3, {3, 4, 5}, {0}, {3, 4, 5}}, {2, {4, 5}, {0}, {4, 5}}},
      {{3, {3, 4, 5}, {0}, {3, 4, 5}}, {3, {3, 1, 5}, {0}, {3, 1, 5}}},
      {{2, {9, 70}, {1, 0}, {7, 70}}, {1, {70}, {0}, {70}}},
      /* a row mask (the mask's last dim broadcast: whole rows kept or dropped), bounded
       * rows as in the wide-mlp batch; and on a middle dim */
      {{2, {40, 70}, {1, 0}, {33, 70}}, {2, {40, 1}, {1, 0}, {33, 1}}},
      {{3, {3, 4, 20}, {0}, {3, 4, 20}}, {3, {3, 4, 1}, {0}, {3, 4, 1}}},
      {{3, {3, 4, 20}, {0}, {3, 4, 20}}, {2, {4, 1}, {0}, {4, 1}}},
      /* x smaller */
      {{1, {5}, {0}, {5}}, {3, {3, 4, 5}, {0}, {3, 4, 5}}},
      {{3, {3, 1, 5}, {0}, {3, 1, 5}}, {3, {3, 4, 5}, {0}, {3, 4, 5}}},
      /* both, on different dims; rank 4 */
      {{3, {3, 1, 5}, {0}, {3, 1, 5}}, {3, {1, 4, 5}, {0}, {1, 4, 5}}},
      {{4, {2, 1, 3, 1}, {0}, {2, 1, 3, 1}}, {4, {1, 4, 1, 5}, {0}, {1, 4, 1, 5}}},
      /* bounded dims under broadcasting, below their bounds */
      {{3, {6, 1, 5}, {1, 0, 0}, {4, 1, 5}}, {3, {6, 4, 5}, {1, 0, 0}, {4, 4, 5}}},
      {{2, {30, 40}, {1, 1}, {29, 33}}, {1, {40}, {1}, {33}}},
      /* 0-d */
      {{0, {0}, {0}, {0}}, {0, {0}, {0}, {0}}},
      {{0, {0}, {0}, {0}}, {1, {7}, {0}, {7}}},
      {{1, {7}, {0}, {7}}, {0, {0}, {0}, {0}}},
      /* empty */
      {{2, {0, 5}, {0}, {0, 5}}, {2, {0, 5}, {0}, {0, 5}}},
      {{2, {8, 5}, {1, 0}, {0, 5}}, {1, {5}, {0}, {5}}},
  };
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
    if (clb_test_small() && p != 2 && p != 4 && p != 8) continue; /* reduced: one each way, and a row mask */
    const operand *x = &pairs[p][0], *m = &pairs[p][1];
    for (size_t di = ops_density_first(); di < ops_density_end(); di++) {
      check_select(ctx, dt, x, m, densities[di]);
      /* masked_scatter: the mask must broadcast to x's shape */
      int fits = m->rank <= x->rank;
      for (int d = 0; d < m->rank && fits; d++) {
        int dx = d + x->rank - m->rank;
        fits = m->bound[d] == 1 || m->bound[d] == x->bound[dx];
      }
      if (fits) check_scatter(ctx, dt, x, m, densities[di], (int64_t)(p % 2), (int)(di % 2));
    }
  }
}

static void test_bad_args(clb_context_t ctx) {
  int64_t b[2] = {4, 3}, b5[1] = {5};
  clb_tensor_t x = NULL, m = NULL, mf = NULL, out = NULL, s = NULL, m5 = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b, NULL, &x));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 2, b, NULL, &m));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b, NULL, &mf));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 1, b5, NULL, &m5));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, b5, NULL, &s));
  EXPECT_STATUS(ctx, clb_masked_select(ctx, x, mf, &out), CLB_ERR_DTYPE, "mask [4, 3] f32 must be bool");
  EXPECT_STATUS(ctx, clb_masked_select(ctx, x, m5, &out), CLB_ERR_SHAPE, "dim 1 has bounds 3 and 5");
  EXPECT_STATUS(ctx, clb_masked_select(ctx, x, NULL, &out), CLB_ERR_NULL, "tensor mask is NULL");
  EXPECT_STATUS(ctx, clb_masked_select(ctx, x, m, NULL), CLB_ERR_NULL, "out is NULL");
  EXPECT_STATUS(ctx, clb_masked_select(ctx, x, m, &x), CLB_ERR_INVALID_ARG, "out may not be an input");
  int64_t ob = 12;
  uint8_t dyn = 1, nodyn = 0;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &ob, &nodyn, &out));
  EXPECT_STATUS(ctx, clb_masked_select(ctx, x, m, &out), CLB_ERR_SHAPE, "must be 1-D and dynamic");
  clb_tensor_free(out);
  out = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, &ob, &dyn, &out));
  EXPECT_STATUS(ctx, clb_masked_select(ctx, x, m, &out), CLB_ERR_DTYPE, "x is f32");
  clb_tensor_free(out);
  out = NULL;
  EXPECT_STATUS(ctx, clb_masked_scatter(ctx, x, m, s, &out), CLB_ERR_DTYPE, "source [5] i32 must have x's dtype f32");
  int64_t b3[3] = {2, 4, 3};
  clb_tensor_t m3 = NULL, sf = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 3, b3, NULL, &m3));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b5, NULL, &sf));
  EXPECT_STATUS(ctx, clb_masked_scatter(ctx, x, m3, sf, &out), CLB_ERR_SHAPE, "more dims than x");
  EXPECT_STATUS(ctx, clb_masked_scatter(ctx, x, m, sf, &sf), CLB_ERR_INVALID_ARG, "not mask or source");
  clb_tensor_free(m3);
  clb_tensor_free(sf);
  clb_tensor_free(x);
  clb_tensor_free(m);
  clb_tensor_free(mf);
  clb_tensor_free(m5);
  clb_tensor_free(s);
}

/* Every dtype: flat sizes (all bounds for f32) and every broadcast. */
static void per_dtype(clb_context_t ctx, clb_dtype dt, int full) {
  test_flat(ctx, dt, full);
  if (full || !clb_test_small()) test_broadcast(ctx, dt);
}

int main(void) { return ops_run_styles("ops/masked", &cases, per_dtype, test_bad_args); }
