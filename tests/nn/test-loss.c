/* test-loss.c: MSE, BCE, BCE with logits and cross-entropy at actual batch sizes
 * from 0 to the bound against a double reference whose gradients are checked by
 * central differences; PyTorch's clamps; the SGD step with and without momentum;
 * no host syncs; errors. */
#include "nn-test.h"

#define MB 64
#define NC 5 /* classes */

static int has_fp64;

typedef struct lref {
  clb_loss_kind kind;
  int64_t m;
  const double *t;
  const int64_t *cls;
} lref;

/* The mean loss of the double reference (NaN when empty) and, when g is not
 * NULL, its gradient. */
static double loss_ref(const lref *r, const double *p, double *g) {
  double s = 0;
  int64_t m = r->m;
  if (r->kind == CLB_LOSS_CROSS_ENTROPY) {
    for (int64_t i = 0; i < m; i++) {
      const double *x = p + i * NC;
      double mx = -INFINITY, se = 0;
      for (int j = 0; j < NC; j++) mx = x[j] > mx ? x[j] : mx;
      for (int j = 0; j < NC; j++) se += exp(x[j] - mx);
      double lse = mx + log(se);
      s += lse - x[r->cls[i]];
      for (int j = 0; g && j < NC; j++) g[i * NC + j] = (exp(x[j] - lse) - (j == r->cls[i])) / (double)m;
    }
    return m ? s / (double)m : NAN;
  }
  for (int64_t i = 0; i < m; i++) {
    double x = p[i], t = r->t[i], l, d;
    switch (r->kind) {
    case CLB_LOSS_MSE:
      l = (x - t) * (x - t);
      d = 2 * (x - t);
      break;
    case CLB_LOSS_BCE: {
      double lp = log(x) < -100 ? -100 : log(x), lq = log(1 - x) < -100 ? -100 : log(1 - x);
      double den = (1 - x) * x < 1e-12 ? 1e-12 : (1 - x) * x;
      l = -(t * lp + (1 - t) * lq);
      d = (x - t) / den;
      break;
    }
    default:
      l = (x > 0 ? x : 0) - x * t + log1p(exp(-fabs(x)));
      d = 1 / (1 + exp(-x)) - t;
    }
    s += l;
    if (g) g[i] = d / (double)m;
  }
  return m ? s / (double)m : NAN;
}

static double f_loss(void *u, double *p) { return loss_ref(u, p, NULL); }

static void loss_case(clb_context_t ctx, clb_dtype dt, clb_loss_kind kind, int64_t m) {
  static const char *const NM[] = {"mse", "bce", "bce_with_logits", "cross_entropy"};
  char what[128];
  snprintf(what, sizeof what, "%s %s m=%lld", NM[kind], clb_dtype_name(dt), (long long)m);
  int ce = kind == CLB_LOSS_CROSS_ENTROPY;
  int64_t np = ce ? m * NC : m;
  double *p = calloc((size_t)(np + 1), sizeof(double)), *t = calloc((size_t)(m + 1), sizeof(double));
  double *g = calloc((size_t)(np + 1), sizeof(double));
  int64_t *cls = calloc((size_t)(m + 1), sizeof(int64_t));
  REQUIRE_TRUE(p && t && g && cls);
  for (int64_t i = 0; i < np; i++) {
    double v = kind == CLB_LOSS_BCE ? nn_rnd(0.02, 0.98) : nn_rnd(-3, 3);
    p[i] = dt == CLB_DTYPE_F32 ? (double)(float)v : v;
  }
  for (int64_t i = 0; i < m; i++) {
    cls[i] = (int64_t)(clb_test_next() % NC);
    t[i] = kind == CLB_LOSS_MSE ? nn_rnd(-2, 2) : (double)(clb_test_next() % 2);
    if (kind == CLB_LOSS_BCE_WITH_LOGITS && i % 3 == 0) t[i] = nn_rnd(0, 1); /* soft labels */
  }
  lref r = {kind, m, t, cls};
  double want = loss_ref(&r, p, g);
  if (dt == CLB_DTYPE_F32 && m == 17) {
    char w2[160];
    snprintf(w2, sizeof w2, "%s reference", what);
    nn_expect_fd(f_loss, &r, p, np, g, w2);
  }
  /* pred [<=MB, 1] against target [<=MB] (elementwise kinds), or [<=MB, NC] logits */
  int64_t pb[2] = {MB, ce ? NC : 1}, pd[2] = {m, ce ? NC : 1}, tb[1] = {MB}, td[1] = {m};
  uint8_t dyn[2] = {1, 0};
  clb_tensor_t tp = nn_tensor(ctx, dt, 2, pb, dyn, pd, p);
  clb_tensor_t tt = NULL;
  if (ce) {
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 1, tb, dyn, &tt));
    nn_garbage_fill(ctx, tt);
    CL_OK(ctx, clb_tensor_write(ctx, tt, td, cls, (size_t)m * sizeof(int64_t)));
  } else {
    tt = nn_tensor(ctx, dt, 1, tb, dyn, td, t);
  }
  clb_tensor_t tl = NULL, tg = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, dt, 2, pb, dyn, &tg));
  clb_test_canary_fill(ctx, tg);
  CL_OK(ctx, clb_context_sync(ctx));
  uint64_t syncs = clb_test_counter_syncs(ctx);
  CL_OK(ctx, clb_loss(ctx, kind, tp, tt, &tl, &tg));
  EXPECT_EQ_I(clb_test_counter_syncs(ctx) - syncs, 0);
  nn_expect(ctx, tl, NULL, &want, 1, what);
  char w2[160];
  snprintf(w2, sizeof w2, "%s grad", what);
  nn_expect(ctx, tg, pd, g, np, w2);
  clb_test_canary_check(ctx, tg, (size_t)np * clb_dtype_size(dt), w2);
  /* the loss alone, without a gradient */
  clb_tensor_t tl2 = NULL;
  CL_OK(ctx, clb_loss(ctx, kind, tp, tt, &tl2, NULL));
  nn_expect(ctx, tl2, NULL, &want, 1, what);
  clb_tensor_t all[] = {tp, tt, tl, tg, tl2};
  for (int i = 0; i < 5; i++) clb_tensor_free(all[i]);
  free(p); free(t); free(g); free(cls);
}

/* BCE at p = 0 and 1: logs clamped at -100 and the gradient's denominator at
 * 1e-12, as in PyTorch. */
static void bce_clamps(clb_context_t ctx) {
  double p[4] = {0, 1, 0, 1}, t[4] = {1, 0, 0, 1};
  int64_t d[1] = {4};
  clb_tensor_t tp = nn_tensor(ctx, CLB_DTYPE_F32, 1, d, NULL, d, p), tt = nn_tensor(ctx, CLB_DTYPE_F32, 1, d, NULL, d, t);
  clb_tensor_t tl = NULL, tg = NULL;
  CL_OK(ctx, clb_loss(ctx, CLB_LOSS_BCE, tp, tt, &tl, &tg));
  double want = 50, g[4] = {-1e12 / 4, 1e12 / 4, 0, 0};
  nn_expect(ctx, tl, NULL, &want, 1, "bce clamp loss");
  nn_expect(ctx, tg, d, g, 4, "bce clamp grad");
  clb_tensor_free(tp); clb_tensor_free(tt); clb_tensor_free(tl); clb_tensor_free(tg);
}

/* An inf term: MSE's mean is inf, as PyTorch's (a compensated sum once made it
 * NaN from the work-item's next term on: (t - v) - y is inf - inf there);
 * enough terms that each work-item adds several, an inf every 97th. */
static void inf_term(clb_context_t ctx) {
  enum { N = 4096 };
  static double p[N], t[N];
  for (int i = 0; i < N; i++) p[i] = i % 97 == 0 ? INFINITY : 0.5, t[i] = 0;
  int64_t d[1] = {N};
  clb_tensor_t tp = nn_tensor(ctx, CLB_DTYPE_F32, 1, d, NULL, d, p), tt = nn_tensor(ctx, CLB_DTYPE_F32, 1, d, NULL, d, t);
  clb_tensor_t tl = NULL;
  CL_OK(ctx, clb_loss(ctx, CLB_LOSS_MSE, tp, tt, &tl, NULL));
  float got = 0;
  CL_OK(ctx, clb_tensor_read(ctx, tl, NULL, &got, sizeof got, NULL));
  clb_test_checks++;
  if (!(isinf(got) && got > 0)) CLB_FAIL_AT("mse of %d terms with infs against 0: %g, want inf", N, got);
  clb_tensor_free(tp); clb_tensor_free(tt); clb_tensor_free(tl);
}

static void sgd_case(clb_context_t ctx, clb_dtype dt, int momentum) {
  char what[64];
  snprintf(what, sizeof what, "sgd %s%s", clb_dtype_name(dt), momentum ? " momentum" : "");
  int64_t b[2] = {5, 3};
  double p[15], v[15] = {0}, gr[15];
  for (int i = 0; i < 15; i++) p[i] = nn_rnd(-1, 1);
  clb_tensor_t tp = nn_tensor(ctx, dt, 2, b, NULL, b, p), tg = NULL, tv = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, dt, 2, b, NULL, &tg));
  if (momentum) {
    CL_OK(ctx, clb_tensor_new(ctx, dt, 2, b, NULL, &tv));
    CL_OK(ctx, clb_fill(ctx, tv, 0));
  }
  const double lr = 0.1, mom = 0.9;
  for (int step = 0; step < 3; step++) {
    for (int i = 0; i < 15; i++) gr[i] = nn_rnd(-1, 1);
    clb_test_write(ctx, tg, b, gr);
    for (int i = 0; i < 15; i++) {
      double d = gr[i];
      if (momentum) d = v[i] = mom * v[i] + d;
      p[i] -= lr * d;
    }
    CL_OK(ctx, clb_sgd_step(ctx, tp, tg, tv, lr, momentum ? mom : 0));
  }
  nn_expect(ctx, tp, b, p, 15, what);
  if (momentum) nn_expect(ctx, tv, b, v, 15, what);
  clb_tensor_free(tp); clb_tensor_free(tg); clb_tensor_free(tv);
}

static void errors(clb_context_t ctx) {
  int64_t b[2] = {8, 1}, b7[1] = {7}, b8[1] = {8}, bc[2] = {8, 3};
  uint8_t dyn[2] = {1, 0};
  clb_tensor_t p = NULL, t7 = NULL, t8 = NULL, ti = NULL, pc = NULL, l = NULL, g = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b, dyn, &p));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b7, NULL, &t7));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b8, dyn, &t8));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 1, b8, dyn, &ti));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, bc, dyn, &pc));
  EXPECT_STATUS(ctx, clb_loss(ctx, CLB_LOSS_MSE, p, t7, &l, &g), CLB_ERR_SHAPE,
                "mse_loss: pred [<=8, 1] f32 and target [7] f32 must hold as many elements");
  EXPECT_STATUS(ctx, clb_loss(ctx, CLB_LOSS_BCE, p, ti, &l, &g), CLB_ERR_DTYPE, "bce_loss: dtypes differ");
  EXPECT_STATUS(ctx, clb_loss(ctx, CLB_LOSS_CROSS_ENTROPY, pc, t8, &l, &g), CLB_ERR_DTYPE, "must hold i64 class indices");
  EXPECT_STATUS(ctx, clb_loss(ctx, CLB_LOSS_CROSS_ENTROPY, t8, ti, &l, &g), CLB_ERR_SHAPE, "must be [M, C] logits and [M] classes");
  EXPECT_STATUS(ctx, clb_loss(ctx, CLB_LOSS_MSE, NULL, t8, &l, &g), CLB_ERR_NULL, "tensor pred is NULL");
  EXPECT_STATUS(ctx, clb_loss(ctx, CLB_LOSS_MSE, p, t8, NULL, &g), CLB_ERR_NULL, "loss is NULL");
  EXPECT_STATUS(ctx, clb_loss(ctx, (clb_loss_kind)9, p, t8, &l, &g), CLB_ERR_INVALID_ARG, "unknown kind 9");
  EXPECT_STATUS(ctx, clb_loss(ctx, CLB_LOSS_MSE, ti, ti, &l, &g), CLB_ERR_DTYPE, "pred [<=8] i64 must be f32 or f64");
  EXPECT_STATUS(ctx, clb_sgd_step(ctx, p, t8, NULL, 0.1, 0), CLB_ERR_SHAPE, "sgd_step: grad [<=8] f32 and param [<=8, 1] f32 must have the same bounds");
  EXPECT_STATUS(ctx, clb_sgd_step(ctx, t8, ti, NULL, 0.1, 0), CLB_ERR_DTYPE, "sgd_step: grad is i64");
  EXPECT_STATUS(ctx, clb_sgd_step(ctx, NULL, t8, NULL, 0.1, 0), CLB_ERR_NULL, "tensor param is NULL");
  /* deferred checks: target with fewer rows; a class outside [0, C) */
  double z[24] = {0};
  int64_t dp[2] = {5, 1}, dt[1] = {4}, dc[2] = {2, 3}, dtc[1] = {2};
  clb_test_write(ctx, p, dp, z);
  clb_test_write(ctx, t8, dt, z);
  CL_OK(ctx, clb_loss(ctx, CLB_LOSS_MSE, p, t8, &l, &g));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DEVICE_CHECK, "mse_loss pred [<=8, 1] f32, target [<=8] f32: deferred check failed on the device: sizes 5 and 4");
  clb_test_write(ctx, pc, dc, z);
  int64_t cls[2] = {1, 3};
  CL_OK(ctx, clb_tensor_write(ctx, ti, dtc, cls, sizeof cls));
  clb_tensor_t g2 = NULL;
  CL_OK(ctx, clb_loss(ctx, CLB_LOSS_CROSS_ENTROPY, pc, ti, &l, &g2));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_BOUND_EXCEEDED, "cross_entropy_loss pred [<=8, 3] f32, target [<=8] i64: index 3 is outside [0, 3)");
  clb_tensor_t all[] = {p, t7, t8, ti, pc, l, g, g2};
  for (int i = 0; i < 8; i++) clb_tensor_free(all[i]);
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  clb_tensor_t probe = NULL;
  has_fp64 = clb_tensor_new(ctx, CLB_DTYPE_F64, 0, NULL, NULL, &probe) == CLB_OK;
  clb_tensor_free(probe);
  if (clb_test_small()) has_fp64 = 0; /* reduced sizes (the oclgrind label): f32 only */
  static const int64_t M[] = {0, 1, 17, 63, 64};
  for (int k = 0; k < CLB_LOSS_KIND_COUNT; k++)
    for (int i = 0; i < 5; i += clb_test_small() ? 2 : 1) {
      loss_case(ctx, CLB_DTYPE_F32, (clb_loss_kind)k, M[i]);
      if (has_fp64) loss_case(ctx, CLB_DTYPE_F64, (clb_loss_kind)k, M[i]);
    }
  bce_clamps(ctx);
  inf_term(ctx);
  for (int mom = 0; mom < 2; mom++) {
    sgd_case(ctx, CLB_DTYPE_F32, mom);
    if (has_fp64) sgd_case(ctx, CLB_DTYPE_F64, mom);
  }
  errors(ctx);
  clb_context_free(ctx);
  return clb_test_finish("nn/loss");
}
