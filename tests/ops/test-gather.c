/* test-gather.c: clb_gather (torch.gather) against a host reference at actual
 * sizes below the bounds: ranks 1 to 3, every dim (negative ones too), f32,
 * f64, i32 and i64 data, i64 and i32 indices, an index smaller than x at the
 * other dims; canaries past the output; an index outside x's size at dim, or a
 * position past x's actual size elsewhere, raises CLB_ERR_INDEX at the sync
 * naming the value, the dim and the size, and gives 0; argument errors. */
#include <stdlib.h>
#include <string.h>

#include "cl-test.h"

enum { CAP = 4096 };

static int has_fp64;

/* The reference: out at index's dims; -1 marks a position that must raise. */
static void reference(int rank, const int64_t *xd, const double *x, int dim, const int64_t *id, const double *ix,
                      double *out, int *raises) {
  int64_t n = clb_test_numel(rank, id);
  *raises = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i, off = 0, stride = 1;
    int bad = 0;
    for (int d = rank - 1; d >= 0; d--) {
      int64_t p = rest % id[d];
      rest /= id[d];
      int64_t q = d == dim ? (int64_t)ix[i] : p;
      if (q < 0 || q >= xd[d]) bad = 1;
      off += q * stride;
      stride *= xd[d];
    }
    out[i] = bad ? 0 : x[off];
    *raises |= bad;
  }
}

typedef struct gcase {
  int rank, dim;
  int64_t xb[3], ib[3]; /* bounds */
  uint8_t xy[3], iy[3]; /* dynamic flags */
  int64_t xd[3], id[3]; /* actual sizes */
} gcase;

static void run_case(clb_context_t ctx, const gcase *c, clb_dtype dt, clb_dtype it, int bad_value) {
  static double x[CAP], ix[CAP], want[CAP], got[CAP];
  int64_t nx = clb_test_numel(c->rank, c->xd), ni = clb_test_numel(c->rank, c->id);
  int d0 = c->dim < 0 ? c->dim + c->rank : c->dim;
  for (int64_t i = 0; i < nx; i++) x[i] = dt == CLB_DTYPE_F32 || dt == CLB_DTYPE_F64 ? i * 0.5 - 7.25 : (double)(i * 3 - 11);
  for (int64_t i = 0; i < ni; i++) ix[i] = (double)((i * 7 + 3) % c->xd[d0]);
  if (bad_value && ni > 0) ix[ni / 2] = bad_value > 0 ? (double)c->xd[d0] : -1.0;
  int raises;
  reference(c->rank, c->xd, x, d0, c->id, ix, want, &raises);
  clb_tensor_t tx = NULL, ti = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, dt, c->rank, c->xb, c->xy, &tx));
  CL_OK(ctx, clb_tensor_new(ctx, it, c->rank, c->ib, c->iy, &ti));
  CL_OK(ctx, clb_tensor_new(ctx, dt, c->rank, c->ib, c->iy, &o));
  clb_test_write(ctx, tx, c->xd, x);
  clb_test_write(ctx, ti, c->id, ix);
  clb_test_canary_fill(ctx, o);
  CL_OK(ctx, clb_gather(ctx, tx, c->dim, ti, &o));
  char what[128];
  snprintf(what, sizeof what, "gather rank %d dim %d %s by %s, bad %d", c->rank, c->dim, clb_dtype_name(dt),
           clb_dtype_name(it), bad_value);
  if (raises) {
    EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_INDEX, "is out of range for dim");
    EXPECT_EQ_I(clb_context_sync(ctx), CLB_OK);
  } else {
    int64_t dims[3];
    EXPECT_EQ_I(clb_test_read(ctx, o, dims, got, CAP), ni);
    for (int d = 0; d < c->rank; d++) EXPECT_EQ_I(dims[d], c->id[d]);
    for (int64_t i = 0; i < ni; i++) {
      clb_test_checks++;
      if (got[i] != want[i]) CLB_FAIL_AT("%s [%lld]: got %.9g want %.9g", what, (long long)i, got[i], want[i]);
    }
    clb_test_canary_check(ctx, o, (size_t)ni * clb_dtype_size(dt), what);
  }
  clb_tensor_free(tx);
  clb_tensor_free(ti);
  clb_tensor_free(o);
}

static const gcase CASES[] = {
    /* nll's pick: [<=64, 10] by [<=64, 1] along dim 1 */
    {2, 1, {64, 10}, {64, 1}, {1, 0}, {1, 0}, {37, 10}, {37, 1}},
    {2, -1, {64, 10}, {64, 3}, {1, 0}, {1, 0}, {5, 10}, {5, 3}},
    /* along the dynamic dim; index wider than x there, narrower elsewhere */
    {2, 0, {16, 6}, {40, 4}, {1, 0}, {1, 0}, {11, 6}, {29, 4}},
    {1, 0, {50}, {70}, {1}, {1}, {0 + 13}, {70}},
    {3, 1, {4, 9, 5}, {4, 12, 3}, {0, 1, 0}, {0, 1, 0}, {4, 7, 5}, {4, 12, 3}},
    {3, -3, {8, 2, 3}, {5, 2, 3}, {1, 0, 0}, {1, 0, 0}, {6, 2, 3}, {5, 2, 2 + 1}},
    /* empty: no rows */
    {2, 1, {64, 10}, {64, 1}, {1, 0}, {1, 0}, {0, 10}, {0, 1}},
};

static void test_values(clb_context_t ctx) {
  static const clb_dtype dts[] = {CLB_DTYPE_F32, CLB_DTYPE_I64, CLB_DTYPE_I32, CLB_DTYPE_F64};
  for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++)
    for (int t = 0; t < 4; t++) {
      if (dts[t] == CLB_DTYPE_F64 && !has_fp64) continue;
      if (clb_test_small() && t > 1) continue;
      run_case(ctx, &CASES[k], dts[t], t % 2 ? CLB_DTYPE_I32 : CLB_DTYPE_I64, 0);
    }
  /* an index one past x's size at dim, and a negative one */
  run_case(ctx, &CASES[0], CLB_DTYPE_F32, CLB_DTYPE_I64, 1);
  run_case(ctx, &CASES[2], CLB_DTYPE_I64, CLB_DTYPE_I32, -1);
}

/* index rows past x's actual rows at a dim other than `dim`: both dynamic,
 * index's bound within x's; the message names the dim and x's actual size */
static void test_rows_past_x(clb_context_t ctx) {
  int64_t b[2] = {8, 4}, bi[2] = {8, 1}, xd[2] = {3, 4}, id[2] = {4, 1}; /* one row past x's 3 */
  uint8_t y[2] = {1, 0};
  double x[12] = {0}, ix[4] = {0, 1, 2, 3};
  clb_tensor_t tx = NULL, ti = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b, y, &tx));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 2, bi, y, &ti));
  clb_test_write(ctx, tx, xd, x);
  clb_test_write(ctx, ti, id, ix);
  CL_OK(ctx, clb_gather(ctx, tx, 1, ti, &o));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_INDEX, "index 3 is out of range for dim 0 of actual size 3");
  clb_tensor_free(tx);
  clb_tensor_free(ti);
  clb_tensor_free(o);
}

static void test_errors(clb_context_t ctx) {
  int64_t b2[2] = {4, 3}, b2w[2] = {5, 3}, b1[1] = {4};
  clb_tensor_t x = NULL, fi = NULL, i1 = NULL, iw = NULL, ii = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b2, NULL, &x));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b2, NULL, &fi));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 1, b1, NULL, &i1));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 2, b2w, NULL, &iw));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 2, b2, NULL, &ii));
  EXPECT_STATUS(ctx, clb_gather(ctx, x, 1, fi, &o), CLB_ERR_DTYPE, "index is f32; it must be i64 or i32");
  EXPECT_STATUS(ctx, clb_gather(ctx, x, 0, i1, &o), CLB_ERR_SHAPE, "index must have x's rank");
  EXPECT_STATUS(ctx, clb_gather(ctx, x, 2, ii, &o), CLB_ERR_INVALID_ARG, "dim 2 is outside x's rank 2");
  EXPECT_STATUS(ctx, clb_gather(ctx, x, 1, iw, &o), CLB_ERR_SHAPE, "index's bound 5 at dim 0 is over x's 4");
  EXPECT_STATUS(ctx, clb_gather(ctx, x, 1, NULL, &o), CLB_ERR_NULL, "gather");
  EXPECT_TRUE(o == NULL);
  clb_tensor_t self = x;
  EXPECT_STATUS(ctx, clb_gather(ctx, x, 1, ii, &self), CLB_ERR_INVALID_ARG, "out must be a new tensor");
  double zeros[12] = {0};
  clb_test_write(ctx, x, b2, zeros);
  clb_test_write(ctx, ii, b2, zeros);
  CL_OK(ctx, clb_gather(ctx, x, 0, ii, &o)); /* [4, 3] by [4, 3] along 0: fine */
  CL_OK(ctx, clb_context_sync(ctx));
  clb_tensor_t all[] = {x, fi, i1, iw, ii, o};
  for (int k = 0; k < 6; k++) clb_tensor_free(all[k]);
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  has_fp64 = clb_test_has_fp64();
  test_values(ctx);
  test_rows_past_x(ctx);
  test_errors(ctx);
  clb_context_free(ctx);
  return clb_test_finish("ops/gather");
}
