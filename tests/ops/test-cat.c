/* test-cat.c: clb_cat (torch.cat of two tensors) against a host reference at
 * actual sizes below the bounds: along a static dim and along the dynamic one
 * (empty sides too), ranks 1 to 3, negative dims, five dtypes; canaries past the
 * output; sizes that disagree at another dim raise CLB_ERR_DEVICE_CHECK at the
 * sync and the smaller is used; argument errors. */
#include "cl-test.h"

enum { CAP = 4096 };

static int has_fp64;

typedef struct ccase {
  int rank, dim;
  int64_t ab[3], bb[3]; /* bounds */
  uint8_t ay[3], by[3]; /* dynamic flags */
  int64_t ad[3], bd[3]; /* actual sizes */
} ccase;

static const ccase CASES[] = {
    {2, 1, {16, 3}, {16, 5}, {1, 0}, {1, 0}, {11, 3}, {11, 5}},  /* features side by side */
    {2, -1, {16, 3}, {16, 5}, {1, 0}, {1, 0}, {0, 3}, {0, 5}},   /* no rows */
    {2, 0, {10, 4}, {6, 4}, {1, 0}, {1, 0}, {7, 4}, {5, 4}},     /* along the dynamic dim */
    {2, 0, {10, 4}, {6, 4}, {1, 0}, {1, 0}, {0, 4}, {6, 4}},     /* an empty first side */
    {2, 0, {10, 4}, {6, 4}, {0, 0}, {1, 0}, {10, 4}, {0, 4}},    /* static first, empty second */
    {1, 0, {9}, {12}, {1}, {0}, {4}, {12}},
    {3, 1, {3, 4, 5}, {3, 2, 5}, {0, 1, 0}, {0, 0, 0}, {3, 3, 5}, {3, 2, 5}},
    {3, -3, {6, 2, 2}, {4, 2, 2}, {1, 0, 0}, {1, 0, 0}, {5, 2, 2}, {4, 2, 2}},
};

static void reference(const ccase *c, int d0, const double *a, const double *b, double *out, int64_t *od) {
  for (int d = 0; d < c->rank; d++) od[d] = d == d0 ? c->ad[d] + c->bd[d] : c->ad[d];
  int64_t n = clb_test_numel(c->rank, od);
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i, pos[3] = {0, 0, 0};
    for (int d = c->rank - 1; d >= 0; d--) pos[d] = rest % od[d], rest /= od[d];
    int from_b = pos[d0] >= c->ad[d0];
    if (from_b) pos[d0] -= c->ad[d0];
    int64_t off = 0;
    for (int d = 0; d < c->rank; d++) off = off * (from_b ? c->bd[d] : c->ad[d]) + pos[d];
    out[i] = from_b ? b[off] : a[off];
  }
}

static void run_case(clb_context_t ctx, const ccase *c, clb_dtype dt) {
  static double a[CAP], b[CAP], want[CAP], got[CAP];
  int d0 = c->dim < 0 ? c->dim + c->rank : c->dim;
  int64_t na = clb_test_numel(c->rank, c->ad), nb = clb_test_numel(c->rank, c->bd), od[3];
  int boolean = dt == CLB_DTYPE_BOOL;
  for (int64_t i = 0; i < na; i++) a[i] = boolean ? (double)(i % 3 == 0) : (double)(i + 1);
  for (int64_t i = 0; i < nb; i++) b[i] = boolean ? (double)(i % 2 == 0) : -(double)(i + 1);
  reference(c, d0, a, b, want, od);
  int64_t n = clb_test_numel(c->rank, od);
  clb_tensor_t ta = NULL, tb = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, dt, c->rank, c->ab, c->ay, &ta));
  CL_OK(ctx, clb_tensor_new(ctx, dt, c->rank, c->bb, c->by, &tb));
  clb_test_write(ctx, ta, c->ad, a);
  clb_test_write(ctx, tb, c->bd, b);
  CL_OK(ctx, clb_cat(ctx, ta, tb, c->dim, &o));
  clb_test_canary_fill(ctx, o); /* o as the first call made it; canaries; then the op again into it */
  CL_OK(ctx, clb_cat(ctx, ta, tb, c->dim, &o));
  int64_t ob[3];
  clb_tensor_bounds(o, ob);
  for (int d = 0; d < c->rank; d++) EXPECT_EQ_I(ob[d], d == d0 ? c->ab[d] + c->bb[d] : c->ab[d]);
  int64_t dims[3];
  EXPECT_EQ_I(clb_test_read(ctx, o, dims, got, CAP), n);
  char what[96];
  snprintf(what, sizeof what, "cat rank %d dim %d %s", c->rank, c->dim, clb_dtype_name(dt));
  for (int d = 0; d < c->rank; d++) EXPECT_EQ_I(dims[d], od[d]);
  for (int64_t i = 0; i < n; i++) {
    clb_test_checks++;
    if (got[i] != want[i]) CLB_FAIL_AT("%s [%lld]: got %.9g want %.9g", what, (long long)i, got[i], want[i]);
  }
  clb_test_canary_check(ctx, o, (size_t)n * clb_dtype_size(dt), what);
  clb_tensor_free(ta);
  clb_tensor_free(tb);
  clb_tensor_free(o);
}

static void test_values(clb_context_t ctx) {
  static const clb_dtype dts[] = {CLB_DTYPE_F32, CLB_DTYPE_I64, CLB_DTYPE_BOOL, CLB_DTYPE_I32, CLB_DTYPE_F64};
  for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++)
    for (int t = 0; t < 5; t++) {
      if (dts[t] == CLB_DTYPE_F64 && !has_fp64) continue;
      if (clb_test_small() && t > 1) continue;
      run_case(ctx, &CASES[k], dts[t]);
    }
}

/* rows that disagree beside the cat's dim: the check, and the smaller count */
static void test_rows_disagree(clb_context_t ctx) {
  int64_t ab[2] = {8, 2}, bb[2] = {8, 3}, ad[2] = {5, 2}, bd[2] = {7, 3};
  uint8_t y[2] = {1, 0};
  double a[10] = {0}, b[21] = {0}, got[64];
  clb_tensor_t ta = NULL, tb = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, ab, y, &ta));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, bb, y, &tb));
  clb_test_write(ctx, ta, ad, a);
  clb_test_write(ctx, tb, bd, b);
  CL_OK(ctx, clb_cat(ctx, ta, tb, 1, &o));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DEVICE_CHECK, "sizes 5 and 7 must be equal");
  int64_t dims[2];
  float raw[64];
  EXPECT_STATUS(ctx, clb_tensor_read(ctx, o, dims, raw, sizeof raw, NULL), CLB_ERR_DEVICE_CHECK, "must be equal"); /* marked failed */
  clb_tensor_t o2 = NULL;
  CL_OK(ctx, clb_cat(ctx, ta, ta, 1, &o2)); /* agreeing sizes: no error */
  EXPECT_EQ_I(clb_test_read(ctx, o2, dims, got, 64), 20);
  EXPECT_EQ_I(dims[1], 4);
  clb_tensor_free(ta);
  clb_tensor_free(tb);
  clb_tensor_free(o);
  clb_tensor_free(o2);
}

static void test_errors(clb_context_t ctx) {
  int64_t b2[2] = {4, 3}, b2w[2] = {5, 3}, b1[1] = {4};
  clb_tensor_t f = NULL, i = NULL, r1 = NULL, w = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b2, NULL, &f));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 2, b2, NULL, &i));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b1, NULL, &r1));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b2w, NULL, &w));
  EXPECT_STATUS(ctx, clb_cat(ctx, f, i, 0, &o), CLB_ERR_DTYPE, "the dtypes differ");
  EXPECT_STATUS(ctx, clb_cat(ctx, f, r1, 0, &o), CLB_ERR_SHAPE, "need one rank");
  EXPECT_STATUS(ctx, clb_cat(ctx, f, f, 2, &o), CLB_ERR_INVALID_ARG, "dim 2 is outside the rank 2");
  EXPECT_STATUS(ctx, clb_cat(ctx, f, w, 1, &o), CLB_ERR_SHAPE, "the bounds differ at dim 0");
  EXPECT_STATUS(ctx, clb_cat(ctx, f, NULL, 0, &o), CLB_ERR_NULL, "cat");
  EXPECT_TRUE(o == NULL);
  clb_tensor_t self = f;
  EXPECT_STATUS(ctx, clb_cat(ctx, f, f, 0, &self), CLB_ERR_INVALID_ARG, "out must be a new tensor");
  clb_tensor_free(f);
  clb_tensor_free(i);
  clb_tensor_free(r1);
  clb_tensor_free(w);
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  has_fp64 = clb_test_has_fp64();
  test_values(ctx);
  test_rows_disagree(ctx);
  test_errors(ctx);
  clb_context_free(ctx);
  return clb_test_finish("ops/cat");
}
