/* test-activations.c: activation gradients, softmax and log-softmax forward and
 * backward at actual batch sizes from 0 to the bound, against a double reference
 * whose gradients are checked by central differences; canaries; errors. */
#include "nn-test.h"

#define MB 64
#define C 7

static int has_fp64;

static double act(clb_unary_op op, double x) {
  switch (op) {
  case CLB_UNARY_NEG: return -x;
  case CLB_UNARY_RELU: return x > 0 ? x : 0;
  default: return clb_test_unary_ref(op, x);
  }
}

/* The derivative from x (the reference computes it from x, not from y). */
static double dact(clb_unary_op op, double x) {
  switch (op) {
  case CLB_UNARY_NEG: return -1;
  case CLB_UNARY_RELU: return x > 0 ? 1 : 0;
  case CLB_UNARY_SIGMOID: { double s = 1 / (1 + exp(-x)); return s * (1 - s); }
  case CLB_UNARY_TANH: { double t = tanh(x); return 1 - t * t; }
  case CLB_UNARY_EXP: return exp(x);
  case CLB_UNARY_LOG: return 1 / x;
  case CLB_UNARY_ERF: return 1.1283791670955126 * exp(-x * x); /* 2 / sqrt(pi) */
  case CLB_UNARY_ABS: return x > 0 ? 1 : x < 0 ? -1 : 0;
  case CLB_UNARY_SQRT: return 0.5 / sqrt(x);
  case CLB_UNARY_RSQRT: return -0.5 / (x * sqrt(x));
  case CLB_UNARY_LOG1P: return 1 / (1 + x);
  case CLB_UNARY_EXPM1: return exp(x);
  case CLB_UNARY_FLOOR:
  case CLB_UNARY_CEIL:
  case CLB_UNARY_ROUND:
  case CLB_UNARY_TRUNC: return 0;
  case CLB_UNARY_SIN: return cos(x);
  case CLB_UNARY_COS: return -sin(x);
  case CLB_UNARY_LOG2: return 1 / (x * 0.6931471805599453);
  case CLB_UNARY_LOG10: return 1 / (x * 2.302585092994046);
  case CLB_UNARY_EXP2: return exp2(x) * 0.6931471805599453;
  default: return 1;
  }
}

typedef struct fdu {
  clb_unary_op op;
  int64_t n;
  const double *dy;
  int lg;
  int64_t rows;
} fdu;

static double f_act(void *u, double *x) {
  fdu *p = u;
  double s = 0;
  for (int64_t i = 0; i < p->n; i++) s += p->dy[i] * act(p->op, x[i]);
  return s;
}

static void unary_case(clb_context_t ctx, clb_dtype dt, clb_unary_op op, int64_t m) {
  static const char *const NM[] = {"neg", "relu", "sigmoid", "tanh", "exp", "log", "copy",
                                   "erf", "abs",  "sqrt",    "rsqrt", "log1p", "expm1",
                                   "floor", "ceil", "round", "trunc", "sin", "cos", "log2", "log10", "exp2"};
  char what[128];
  snprintf(what, sizeof what, "%s_backward %s m=%lld", NM[op], clb_dtype_name(dt), (long long)m);
  int64_t n = m * C;
  double *x = malloc(sizeof(double) * (size_t)(n + 1)), *dy = malloc(sizeof(double) * (size_t)(n + 1));
  double *dx = malloc(sizeof(double) * (size_t)(n + 1));
  REQUIRE_TRUE(x && dy && dx);
  for (int64_t i = 0; i < n; i++) {
    int positive = op == CLB_UNARY_LOG || op == CLB_UNARY_SQRT || op == CLB_UNARY_RSQRT || op == CLB_UNARY_LOG1P ||
                   op == CLB_UNARY_LOG2 || op == CLB_UNARY_LOG10;
    double v = positive ? nn_rnd(0.2, 3) : nn_rnd(-2, 2);
    if ((op == CLB_UNARY_RELU || op == CLB_UNARY_ABS) && fabs(v) < 0.05) v = 0.5; /* no kink within the difference step */
    if (op >= CLB_UNARY_FLOOR && op <= CLB_UNARY_TRUNC) { /* no step (at an integer or a half) either */
      double f = v - floor(v);
      if (f < 0.05 || f > 0.95 || fabs(f - 0.5) < 0.05) v += 0.25;
    }
    x[i] = dt == CLB_DTYPE_F32 ? (double)(float)v : v;
    dy[i] = nn_rnd(-1, 1);
    dx[i] = dy[i] * dact(op, x[i]);
  }
  if (dt == CLB_DTYPE_F32 && m == 17) {
    fdu p = {op, n, dy, 0, 0};
    char w2[160];
    snprintf(w2, sizeof w2, "%s reference", what);
    nn_expect_fd(f_act, &p, x, n, dx, w2);
  }
  int64_t b[2] = {MB, C}, d[2] = {m, C};
  uint8_t dyn[2] = {1, 0};
  clb_tensor_t tx = nn_tensor(ctx, dt, 2, b, dyn, d, x), tdy = nn_tensor(ctx, dt, 2, b, dyn, d, dy);
  clb_tensor_t ty = NULL, tdx = NULL;
  CL_OK(ctx, clb_unary(ctx, op, tx, &ty));
  CL_OK(ctx, clb_tensor_new(ctx, dt, 2, b, dyn, &tdx));
  clb_test_canary_fill(ctx, tdx);
  CL_OK(ctx, clb_unary_backward(ctx, op, tx, ty, tdy, &tdx));
  nn_expect(ctx, tdx, d, dx, n, what);
  clb_test_canary_check(ctx, tdx, (size_t)n * clb_dtype_size(dt), what);
  /* in place: dx written over dy */
  CL_OK(ctx, clb_unary_backward(ctx, op, tx, ty, tdy, &tdy));
  nn_expect(ctx, tdy, d, dx, n, what);
  clb_tensor_free(tx);
  clb_tensor_free(ty);
  clb_tensor_free(tdy);
  clb_tensor_free(tdx);
  free(x);
  free(dy);
  free(dx);
}

static void softmax_ref(int lg, int64_t rows, const double *x, double *y) {
  for (int64_t r = 0; r < rows; r++) {
    const double *p = x + r * C;
    double mx = -INFINITY, s = 0;
    for (int j = 0; j < C; j++) mx = p[j] > mx ? p[j] : mx;
    for (int j = 0; j < C; j++) s += exp(p[j] - mx);
    for (int j = 0; j < C; j++) y[r * C + j] = lg ? p[j] - mx - log(s) : exp(p[j] - mx) / s;
  }
}

static double f_soft(void *u, double *x) {
  fdu *p = u;
  double *y = malloc(sizeof(double) * (size_t)(p->rows * C + 1)), s = 0;
  softmax_ref(p->lg, p->rows, x, y);
  for (int64_t i = 0; i < p->rows * C; i++) s += p->dy[i] * y[i];
  free(y);
  return s;
}

static void softmax_case(clb_context_t ctx, clb_dtype dt, int lg, int64_t m) {
  char what[128];
  snprintf(what, sizeof what, "%s %s m=%lld", lg ? "log_softmax" : "softmax", clb_dtype_name(dt), (long long)m);
  int64_t n = m * C;
  double *x = calloc((size_t)(n + 1), sizeof(double)), *y = calloc((size_t)(n + 1), sizeof(double));
  double *dy = malloc(sizeof(double) * (size_t)(n + 1)), *dx = malloc(sizeof(double) * (size_t)(n + 1));
  REQUIRE_TRUE(x && y && dy && dx);
  for (int64_t i = 0; i < n; i++) {
    x[i] = nn_rnd(-4, 4);
    dy[i] = nn_rnd(-1, 1);
  }
  if (m > 0) x[0] = 60; /* a large logit: the shift by the row maximum matters */
  softmax_ref(lg, m, x, y);
  for (int64_t r = 0; r < m; r++) {
    double s = 0;
    for (int j = 0; j < C; j++) s += lg ? dy[r * C + j] : dy[r * C + j] * y[r * C + j];
    for (int j = 0; j < C; j++) {
      int64_t i = r * C + j;
      dx[i] = lg ? dy[i] - exp(y[i]) * s : y[i] * (dy[i] - s);
    }
  }
  if (dt == CLB_DTYPE_F32 && m == 17) {
    fdu p = {CLB_UNARY_COPY, n, dy, lg, m};
    char w2[160];
    snprintf(w2, sizeof w2, "%s reference", what);
    nn_expect_fd(f_soft, &p, x, n, dx, w2);
  }
  int64_t b[2] = {MB, C}, d[2] = {m, C};
  uint8_t dyn[2] = {1, 0};
  clb_tensor_t tx = nn_tensor(ctx, dt, 2, b, dyn, d, x), tdy = nn_tensor(ctx, dt, 2, b, dyn, d, dy);
  clb_tensor_t ty = NULL, tdx = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, dt, 2, b, dyn, &ty));
  CL_OK(ctx, clb_tensor_new(ctx, dt, 2, b, dyn, &tdx));
  clb_test_canary_fill(ctx, ty);
  clb_test_canary_fill(ctx, tdx);
  CL_OK(ctx, clb_softmax(ctx, tx, lg, &ty));
  CL_OK(ctx, clb_softmax_backward(ctx, ty, tdy, lg, &tdx));
  nn_expect(ctx, ty, d, y, n, what);
  char w2[160];
  snprintf(w2, sizeof w2, "%s backward", what);
  nn_expect(ctx, tdx, d, dx, n, w2);
  clb_test_canary_check(ctx, ty, (size_t)n * clb_dtype_size(dt), what);
  clb_test_canary_check(ctx, tdx, (size_t)n * clb_dtype_size(dt), w2);
  clb_tensor_t all[] = {tx, tdy, ty, tdx};
  for (int i = 0; i < 4; i++) clb_tensor_free(all[i]);
  free(x); free(y); free(dy); free(dx);
}

/* Softmax over a rank-3 tensor with a dynamic middle dim. */
static void softmax_rank3(clb_context_t ctx) {
  int64_t b[3] = {2, 9, C}, d[3] = {2, 4, C};
  uint8_t dyn[3] = {0, 1, 0};
  double x[2 * 4 * C], y[2 * 4 * C];
  for (int i = 0; i < 2 * 4 * C; i++) x[i] = nn_rnd(-3, 3);
  softmax_ref(0, 8, x, y);
  clb_tensor_t tx = nn_tensor(ctx, CLB_DTYPE_F32, 3, b, dyn, d, x), ty = NULL;
  CL_OK(ctx, clb_softmax(ctx, tx, 0, &ty));
  nn_expect(ctx, ty, d, y, 2 * 4 * C, "softmax rank 3");
  clb_tensor_free(tx);
  clb_tensor_free(ty);
}

static void errors(clb_context_t ctx) {
  int64_t b[2] = {8, 3}, b2[2] = {8, 4};
  clb_tensor_t x = NULL, y2 = NULL, xi = NULL, s = NULL, out = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b, NULL, &x));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b2, NULL, &y2));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 2, b, NULL, &xi));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 0, NULL, NULL, &s));
  EXPECT_STATUS(ctx, clb_unary_backward(ctx, CLB_UNARY_SIGMOID, x, NULL, x, &out), CLB_ERR_NULL,
                "sigmoid_backward: needs the op's y (the output), which is NULL");
  EXPECT_STATUS(ctx, clb_unary_backward(ctx, CLB_UNARY_RELU, NULL, x, x, &out), CLB_ERR_NULL,
                "relu_backward: needs the op's x (the input)");
  EXPECT_STATUS(ctx, clb_unary_backward(ctx, CLB_UNARY_RELU, y2, NULL, x, &out), CLB_ERR_SHAPE,
                "x [8, 4] f32 and dy [8, 3] f32 must have the same bounds");
  EXPECT_STATUS(ctx, clb_unary_backward(ctx, CLB_UNARY_TANH, NULL, x, xi, &out), CLB_ERR_DTYPE, "dy is i32");
  EXPECT_STATUS(ctx, clb_unary_backward(ctx, (clb_unary_op)42, x, x, x, &out), CLB_ERR_INVALID_ARG, "unknown op 42");
  EXPECT_STATUS(ctx, clb_unary_backward(ctx, CLB_UNARY_NEG, NULL, NULL, NULL, &out), CLB_ERR_NULL, "tensor dy is NULL");
  EXPECT_STATUS(ctx, clb_softmax(ctx, s, 0, &out), CLB_ERR_SHAPE, "softmax: x [] f32 is 0-d");
  EXPECT_STATUS(ctx, clb_softmax(ctx, xi, 1, &out), CLB_ERR_DTYPE, "log_softmax: x is i32");
  EXPECT_STATUS(ctx, clb_softmax_backward(ctx, x, y2, 0, &out), CLB_ERR_SHAPE, "must have the same bounds");
  EXPECT_STATUS(ctx, clb_softmax(ctx, x, 0, NULL), CLB_ERR_NULL, "out is NULL");
  /* a dy with fewer live elements than x: a deferred check */
  clb_tensor_t xd = NULL, dyd = NULL, dx = NULL;
  uint8_t dyn[2] = {1, 0};
  int64_t d1[2] = {5, 3}, d2[2] = {4, 3};
  double v[24] = {0};
  xd = nn_tensor(ctx, CLB_DTYPE_F32, 2, b, dyn, d1, v);
  dyd = nn_tensor(ctx, CLB_DTYPE_F32, 2, b, dyn, d2, v);
  CL_OK(ctx, clb_unary_backward(ctx, CLB_UNARY_RELU, xd, NULL, dyd, &dx));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DEVICE_CHECK, "relu_backward [<=8, 3] f32: deferred check failed on the device: sizes 12 and 15");
  clb_tensor_t all[] = {x, y2, xi, s, xd, dyd, dx};
  for (int i = 0; i < 7; i++) clb_tensor_free(all[i]);
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  clb_tensor_t probe = NULL;
  has_fp64 = clb_tensor_new(ctx, CLB_DTYPE_F64, 0, NULL, NULL, &probe) == CLB_OK;
  clb_tensor_free(probe);
  if (clb_test_small()) has_fp64 = 0; /* reduced sizes (the oclgrind label): f32 only */
  static const int64_t M[] = {0, 1, 17, 63, 64};
  for (int op = 0; op < CLB_UNARY_COUNT; op++)
    for (int i = 0; i < 5; i += clb_test_small() ? 2 : 1) {
      unary_case(ctx, CLB_DTYPE_F32, (clb_unary_op)op, M[i]);
      if (has_fp64 && (i == 2 || i == 4)) unary_case(ctx, CLB_DTYPE_F64, (clb_unary_op)op, M[i]);
    }
  for (int lg = 0; lg < 2; lg++)
    for (int i = 0; i < 5; i += clb_test_small() ? 2 : 1) {
      softmax_case(ctx, CLB_DTYPE_F32, lg, M[i]);
      if (has_fp64 && (i == 2 || i == 4)) softmax_case(ctx, CLB_DTYPE_F64, lg, M[i]);
    }
  softmax_rank3(ctx);
  errors(ctx);
  clb_context_free(ctx);
  return clb_test_finish("nn/activations");
}
