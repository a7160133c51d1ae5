/* test-bmm.c: batched matmul (clb_bmm) with dynamic batch, M, N and K under both
 * transposes, host BLAS and both kernel styles, f32/f64, against a double-precision
 * reference; canaries after the output, garbage in the operands' slack, the
 * deferred batch and K checks, and the errors. */
#define _POSIX_C_SOURCE 200809L
#include "nn-test.h"

static int has_fp64;

/* Bounds and dynamic flags of the batch, M, N and K. */
typedef struct bcase {
  int64_t bb, mb, nb, kb;
  int db, dm, dn, dk;
} bcase;

/* out = op(a) @ op(b) over actual (batch, m, n, k): values, sizes, canaries. */
static void check_one(clb_context_t ctx, const char *label, clb_dtype dt, int ta, int tb, const bcase *c, int64_t nb,
                      int64_t m, int64_t n, int64_t k) {
  int64_t ab[3] = {c->bb}, bb[3] = {c->bb}, ad[3] = {nb}, bd[3] = {nb};
  uint8_t ay[3] = {(uint8_t)c->db}, by[3] = {(uint8_t)c->db};
  /* a's matrices: [M, K], or [K, M] when transposed; b's: [K, N], or [N, K] */
  ab[1 + ta] = c->mb; ab[2 - ta] = c->kb;
  ay[1 + ta] = (uint8_t)c->dm; ay[2 - ta] = (uint8_t)c->dk;
  ad[1 + ta] = m; ad[2 - ta] = k;
  bb[1 + tb] = c->kb; bb[2 - tb] = c->nb;
  by[1 + tb] = (uint8_t)c->dk; by[2 - tb] = (uint8_t)c->dn;
  bd[1 + tb] = k; bd[2 - tb] = n;
  clb_tensor_t a = NULL, b = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, dt, 3, ab, ay, &a));
  CL_OK(ctx, clb_tensor_new(ctx, dt, 3, bb, by, &b));
  int64_t ob[3] = {c->bb, c->mb, c->nb};
  uint8_t oy[3] = {(uint8_t)c->db, (uint8_t)c->dm, (uint8_t)c->dn};
  CL_OK(ctx, clb_tensor_new(ctx, dt, 3, ob, oy, &o));
  nn_garbage_fill(ctx, a);
  nn_garbage_fill(ctx, b);
  double *va = malloc(sizeof(double) * (size_t)(nb * m * k + 1)), *vb = malloc(sizeof(double) * (size_t)(nb * k * n + 1));
  double *got = malloc(sizeof(double) * (size_t)(c->bb * c->mb * c->nb + 1));
  REQUIRE_TRUE(va && vb && got);
  for (int64_t i = 0; i < nb * m * k; i++) va[i] = nn_rnd(-1.0, 1.0);
  for (int64_t i = 0; i < nb * k * n; i++) vb[i] = nn_rnd(-1.0, 1.0);
  clb_test_write(ctx, a, ad, va);
  clb_test_write(ctx, b, bd, vb);
  clb_test_canary_fill(ctx, o);
  CL_OK(ctx, clb_bmm(ctx, a, ta, b, tb, &o));
  int64_t dims[3] = {-1, -1, -1};
  int64_t got_n = clb_test_read(ctx, o, dims, got, c->bb * c->mb * c->nb);
  char what[256];
  snprintf(what, sizeof what, "%s %s a%s b%s bounds [%lld,%lld,%lld,%lld] actual batch=%lld m=%lld n=%lld k=%lld",
           label, clb_dtype_name(dt), ta ? "^T" : "", tb ? "^T" : "", (long long)c->bb, (long long)c->mb,
           (long long)c->nb, (long long)c->kb, (long long)nb, (long long)m, (long long)n, (long long)k);
  clb_test_checks++;
  if (dims[0] != nb || dims[1] != m || dims[2] != n || got_n != nb * m * n)
    CLB_FAIL_AT("%s: sizes [%lld, %lld, %lld]", what, (long long)dims[0], (long long)dims[1], (long long)dims[2]);
  int bad = 0;
  for (int64_t p = 0; p < nb && !bad; p++) {
    const double *pa = va + p * m * k, *pb = vb + p * k * n;
    for (int64_t i = 0; i < m && !bad; i++)
      for (int64_t j = 0; j < n && !bad; j++) {
        double ref = 0;
        for (int64_t q = 0; q < k; q++) ref += (ta ? pa[q * m + i] : pa[i * k + q]) * (tb ? pb[j * k + q] : pb[q * n + j]);
        double g = got[(p * m + i) * n + j], d = fabs(g - ref);
        /* f32 sums of up to 64 products of values in [-1, 1] */
        if (!(d <= 1e-4 || d <= 1e-5 * fabs(ref) * (double)k)) {
          CLB_FAIL_AT("%s: [%lld, %lld, %lld] got %.9g want %.9g", what, (long long)p, (long long)i, (long long)j, g, ref);
          bad = 1;
        }
      }
  }
  clb_test_checks++;
  clb_test_canary_check(ctx, o, (size_t)(nb * m * n) * clb_dtype_size(dt), what);
  free(va);
  free(vb);
  free(got);
  clb_tensor_free(a);
  clb_tensor_free(b);
  clb_tensor_free(o);
}

static const bcase CASES[] = {
    {6, 20, 18, 33, 1, 0, 0, 0}, /* dynamic batch (a model's batch) */
    {4, 37, 9, 16, 1, 1, 1, 0},  /* dynamic batch and sequence-like M and N (attention scores) */
    {3, 17, 35, 40, 0, 0, 0, 1}, /* dynamic K */
    {5, 8, 8, 8, 0, 0, 0, 0},    /* static */
    {0, 8, 3, 5, 0, 0, 0, 0},    /* a static batch of none: no matrix, nothing written */
};

static void sweep(clb_context_t ctx, const char *label, clb_gemm_strategy s, clb_dtype dt) {
  const int small = clb_test_small();
  CL_OK(ctx, clb_context_set_gemm_strategy(ctx, s));
  for (size_t ci = 0; ci < sizeof CASES / sizeof CASES[0]; ci++) {
    const bcase *c = &CASES[ci];
    if (small && ci > 1 && ci < 4) continue;
    for (int t = 0; t < 4; t++) {
      int ta = t & 1, tb = t >> 1;
      /* the bounds, then smaller actual sizes where a dim is dynamic, zero-sized ones included */
      int64_t acts[][4] = {{c->bb, c->mb, c->nb, c->kb},
                           {c->db ? 2 : c->bb, c->dm ? 5 : c->mb, c->dn ? 3 : c->nb, c->dk ? 7 : c->kb},
                           {c->db ? 0 : c->bb, c->mb, c->nb, c->kb},
                           {c->bb, c->dm ? 0 : c->mb, c->nb, c->dk ? 0 : c->kb}};
      for (size_t ai = 0; ai < sizeof acts / sizeof acts[0]; ai++) {
        if (small && ai > 1) continue;
        check_one(ctx, label, dt, ta, tb, c, acts[ai][0], acts[ai][1], acts[ai][2], acts[ai][3]);
      }
    }
  }
}

/* Operands whose actual batch counts, or K, differ, either way round: a
 * deferred device check naming both sizes; the smaller is used, so garbage in
 * the operands' slack reaches nothing and nothing is written past the
 * smaller count's output. */
static void mismatch(clb_context_t ctx, clb_gemm_strategy s) {
  CL_OK(ctx, clb_context_set_gemm_strategy(ctx, s));
  int64_t ab[3] = {4, 8, 16}, bb[3] = {4, 16, 4};
  uint8_t dy[3] = {1, 1, 1};
  /* (a's batch, M, K), (b's batch, K, N), the message's two sizes */
  const int64_t cases[4][6] = {{2, 3, 5, 3, 5, 4}, {3, 3, 5, 2, 5, 4}, {2, 3, 5, 2, 6, 4}, {2, 3, 6, 2, 5, 4}};
  const char *const want[4] = {"sizes 2 and 3 must be equal", "sizes 3 and 2 must be equal",
                               "sizes 5 and 6 must be equal", "sizes 6 and 5 must be equal"};
  double v[512];
  for (int i = 0; i < 512; i++) v[i] = 1.0;
  for (int c = 0; c < 4; c++) {
    clb_tensor_t a = NULL, b = NULL, o = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 3, ab, dy, &a));
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 3, bb, dy, &b));
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 3, (const int64_t[]){4, 8, 4}, dy, &o));
    nn_garbage_fill(ctx, a);
    nn_garbage_fill(ctx, b);
    clb_test_canary_fill(ctx, o);
    clb_test_write(ctx, a, cases[c], v);
    clb_test_write(ctx, b, cases[c] + 3, v);
    CL_OK(ctx, clb_bmm(ctx, a, 0, b, 0, &o));
    EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DEVICE_CHECK, want[c]);
    /* the smaller batch and K: batch x 3 x 4 values, each the sum of K ones */
    int64_t nb = cases[c][0] < cases[c][3] ? cases[c][0] : cases[c][3], k = cases[c][2] < cases[c][4] ? cases[c][2] : cases[c][4];
    float got[4 * 3 * 4];
    REQUIRE_TRUE(clEnqueueReadBuffer(clb_context_cl_queue(ctx), clb_tensor_data_mem(o), CL_TRUE, 0,
                                     sizeof(float) * (size_t)(nb * 12), got, 0, NULL, NULL) == CL_SUCCESS);
    int bad = 0;
    for (int64_t i = 0; i < nb * 12; i++) bad += got[i] != (float)k;
    clb_test_checks++;
    if (bad) CLB_FAIL_AT("bmm mismatch case %d: %d of %lld values are not %lld", c, bad, (long long)(nb * 12), (long long)k);
    clb_test_canary_check(ctx, o, sizeof(float) * (size_t)(nb * 12), want[c]);
    CL_OK(ctx, clb_context_sync(ctx));
    clb_tensor_free(a);
    clb_tensor_free(b);
    clb_tensor_free(o);
  }
}

static void errors(clb_context_t ctx) {
  int64_t s3[3] = {2, 4, 3}, s3b[3] = {2, 3, 5}, s3c[3] = {3, 3, 5}, s2[2] = {4, 3};
  clb_tensor_t a = NULL, b = NULL, c = NULL, m2 = NULL, i = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 3, s3, NULL, &a));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 3, s3b, NULL, &b));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 3, s3c, NULL, &c));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, s2, NULL, &m2));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 3, s3b, NULL, &i));
  EXPECT_STATUS(ctx, clb_bmm(ctx, a, 0, i, 0, &o), CLB_ERR_DTYPE, "bmm: b is i32; bmm takes f32 or f64");
  EXPECT_STATUS(ctx, clb_bmm(ctx, m2, 0, b, 0, &o), CLB_ERR_SHAPE, "bmm: a [4, 3] f32 has rank 2; a batch of matrices needs rank 3");
  EXPECT_STATUS(ctx, clb_bmm(ctx, a, 0, c, 0, &o), CLB_ERR_SHAPE, "the batch dims differ: a has 2 matrices, b 3");
  EXPECT_STATUS(ctx, clb_bmm(ctx, a, 1, b, 0, &o), CLB_ERR_SHAPE, "op(a) has 4 columns, op(b) has 3 rows");
  EXPECT_STATUS(ctx, clb_bmm(ctx, a, 0, b, 1, &o), CLB_ERR_SHAPE, "op(a) has 3 columns, op(b) has 5 rows");
  EXPECT_STATUS(ctx, clb_bmm(ctx, NULL, 0, b, 0, &o), CLB_ERR_NULL, "tensor a is NULL");
  EXPECT_STATUS(ctx, clb_bmm(ctx, a, 0, b, 0, NULL), CLB_ERR_NULL, "out is NULL");
  EXPECT_STATUS(ctx, clb_bmm(ctx, a, 0, b, 0, &a), CLB_ERR_INVALID_ARG, "bmm: out must not be an input");
  EXPECT_TRUE(clb_bmm(NULL, a, 0, b, 0, &o) == CLB_ERR_NULL);
  if (has_fp64) {
    clb_tensor_t d = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F64, 3, s3b, NULL, &d));
    EXPECT_STATUS(ctx, clb_bmm(ctx, a, 0, d, 0, &o), CLB_ERR_DTYPE, "dtypes differ: a [2, 4, 3] f32, b [2, 3, 5] f64");
    clb_tensor_free(d);
  }
  /* a given output of the wrong size */
  clb_tensor_t small = NULL;
  int64_t so[3] = {2, 4, 4};
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 3, so, NULL, &small));
  EXPECT_STATUS(ctx, clb_bmm(ctx, a, 0, b, 0, &small), CLB_ERR_OUT_OF_BOUNDS, "dim 2 of out [2, 4, 4] f32: bound 4 < 5");
  clb_tensor_t all[] = {a, b, c, m2, i, small, o};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) clb_tensor_free(all[k]);
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  has_fp64 = clb_tensor_new(ctx, CLB_DTYPE_F64, 0, NULL, NULL, &(clb_tensor_t){NULL}) == CLB_OK;
  /* AUTO: host BLAS's native kernel where the build has OpenBLAS; DEVICE: clbound's kernel */
  const clb_gemm_strategy ss[2] = {CLB_GEMM_AUTO, CLB_GEMM_DEVICE};
  const char *const names[2] = {"cpu-style auto", "cpu-style device"};
  for (int i = 0; i < 2; i++) {
    sweep(ctx, names[i], ss[i], CLB_DTYPE_F32);
    if (has_fp64 && !clb_test_small()) sweep(ctx, names[i], ss[i], CLB_DTYPE_F64);
    mismatch(ctx, ss[i]);
  }
  errors(ctx);
  clb_context_free(ctx);

  /* The GPU-style kernel (local-memory tiles, b read transposed in place) runs on PoCL too. */
  clb_context_options opts;
  clb_context_options_init(&opts);
  opts.kernel_style = CLB_KERNEL_STYLE_GPU;
  ctx = clb_test_context(&opts);
  sweep(ctx, "gpu-style", CLB_GEMM_DEVICE, CLB_DTYPE_F32);
  if (has_fp64 && !clb_test_small()) sweep(ctx, "gpu-style", CLB_GEMM_DEVICE, CLB_DTYPE_F64);
  mismatch(ctx, CLB_GEMM_DEVICE);
  clb_context_free(ctx);
  return clb_test_finish("nn/bmm");
}
