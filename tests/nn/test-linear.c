/* test-linear.c: linear forward and backward under every GEMM strategy, at actual
 * batch sizes from 0 to the bound, against a double reference whose gradients are
 * checked by central differences; canaries after outputs; errors. */
#include "nn-test.h"

static int has_fp64;

typedef struct lin {
  int64_t m, in, f;
  double *x, *w, *b, *dy;
} lin;

static void lin_forward(const lin *p, const double *x, const double *w, const double *b, double *y) {
  for (int64_t i = 0; i < p->m; i++)
    for (int64_t j = 0; j < p->f; j++) {
      double s = b ? b[j] : 0;
      for (int64_t q = 0; q < p->in; q++) s += x[i * p->in + q] * w[j * p->in + q];
      y[i * p->f + j] = s;
    }
}

/* sum(dy * linear(x, w, b)) with one of x, w, b replaced by v. */
static double lin_dot(const lin *p, const double *x, const double *w, const double *b) {
  double *y = malloc(sizeof(double) * (size_t)(p->m * p->f + 1)), s = 0;
  lin_forward(p, x, w, b, y);
  for (int64_t i = 0; i < p->m * p->f; i++) s += p->dy[i] * y[i];
  free(y);
  return s;
}
static double f_x(void *u, double *v) { lin *p = u; return lin_dot(p, v, p->w, p->b); }
static double f_w(void *u, double *v) { lin *p = u; return lin_dot(p, p->x, v, p->b); }
static double f_b(void *u, double *v) { lin *p = u; return lin_dot(p, p->x, p->w, v); }

/* The references of linear_backward's gradients and their shapes. */
typedef struct grads {
  const int64_t *xd, *wb, *bb;
  const double *dx, *dw, *db;
  int64_t m, in, f;
} grads;

/* Each gradient given (not NULL) against its reference. */
static void expect_grads(clb_context_t ctx, const char *what, const char *label, const grads *g, clb_tensor_t tdx,
                         clb_tensor_t tdw, clb_tensor_t tdb) {
  char w2[240];
  if (tdx) {
    snprintf(w2, sizeof w2, "%s%s dx", what, label);
    nn_expect(ctx, tdx, g->xd, g->dx, g->m * g->in, w2);
  }
  if (tdw) {
    snprintf(w2, sizeof w2, "%s%s dw", what, label);
    nn_expect(ctx, tdw, g->wb, g->dw, g->f * g->in, w2);
  }
  if (tdb) {
    snprintf(w2, sizeof w2, "%s%s dbias", what, label);
    nn_expect(ctx, tdb, g->bb, g->db, g->f, w2);
  }
}

static void run(clb_context_t ctx, clb_gemm_strategy s, clb_dtype dt, int64_t mb, int64_t in, int64_t f, int64_t m,
                int with_bias, int check_fd) {
  static const char *const SN[] = {"auto", "clblast-bound", "sync-exact", "device", "host-blas"};
  char what[160];
  snprintf(what, sizeof what, "linear %s %s m=%lld/%lld in=%lld f=%lld%s", SN[s], clb_dtype_name(dt), (long long)m,
           (long long)mb, (long long)in, (long long)f, with_bias ? "" : " no bias");
  CL_OK(ctx, clb_context_set_gemm_strategy(ctx, s));
  lin p = {m, in, f, NULL, NULL, NULL, NULL};
  p.x = malloc(sizeof(double) * (size_t)(m * in + 1));
  p.w = malloc(sizeof(double) * (size_t)(f * in));
  p.b = malloc(sizeof(double) * (size_t)f);
  p.dy = malloc(sizeof(double) * (size_t)(m * f + 1));
  double *y = malloc(sizeof(double) * (size_t)(m * f + 1)), *dx = malloc(sizeof(double) * (size_t)(m * in + 1));
  double *dw = malloc(sizeof(double) * (size_t)(f * in)), *db = malloc(sizeof(double) * (size_t)f);
  REQUIRE_TRUE(p.x && p.w && p.b && p.dy && y && dx && dw && db);
  for (int64_t i = 0; i < m * in; i++) p.x[i] = nn_rnd(-1, 1);
  for (int64_t i = 0; i < f * in; i++) p.w[i] = nn_rnd(-1, 1);
  for (int64_t i = 0; i < f; i++) p.b[i] = nn_rnd(-1, 1);
  for (int64_t i = 0; i < m * f; i++) p.dy[i] = nn_rnd(-1, 1);
  /* the reference and its gradients */
  lin_forward(&p, p.x, p.w, with_bias ? p.b : NULL, y);
  for (int64_t i = 0; i < m; i++)
    for (int64_t q = 0; q < in; q++) {
      double s2 = 0;
      for (int64_t j = 0; j < f; j++) s2 += p.dy[i * f + j] * p.w[j * in + q];
      dx[i * in + q] = s2;
    }
  for (int64_t j = 0; j < f; j++) {
    double sb = 0;
    for (int64_t i = 0; i < m; i++) sb += p.dy[i * f + j];
    db[j] = sb;
    for (int64_t q = 0; q < in; q++) {
      double s2 = 0;
      for (int64_t i = 0; i < m; i++) s2 += p.dy[i * f + j] * p.x[i * in + q];
      dw[j * in + q] = s2;
    }
  }
  if (check_fd) {
    nn_expect_fd(f_x, &p, p.x, m * in, dx, "linear dx reference");
    nn_expect_fd(f_w, &p, p.w, f * in, dw, "linear dw reference");
    nn_expect_fd(f_b, &p, p.b, f, db, "linear dbias reference");
  }
  /* the device */
  int64_t xb[2] = {mb, in}, xd[2] = {m, in}, wb[2] = {f, in}, bb[1] = {f}, yb[2] = {mb, f}, yd[2] = {m, f};
  uint8_t dyn[2] = {1, 0};
  clb_tensor_t tx = nn_tensor(ctx, dt, 2, xb, dyn, xd, p.x);
  clb_tensor_t tw = nn_tensor(ctx, dt, 2, wb, NULL, wb, p.w);
  clb_tensor_t tb = with_bias ? nn_tensor(ctx, dt, 1, bb, NULL, bb, p.b) : NULL;
  clb_tensor_t tdy = nn_tensor(ctx, dt, 2, yb, dyn, yd, p.dy);
  clb_tensor_t ty = NULL, tdx = NULL, tdw = NULL, tdb = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, dt, 2, yb, dyn, &ty));
  CL_OK(ctx, clb_tensor_new(ctx, dt, 2, xb, dyn, &tdx));
  CL_OK(ctx, clb_tensor_new(ctx, dt, 2, wb, NULL, &tdw));
  CL_OK(ctx, clb_tensor_new(ctx, dt, 1, bb, NULL, &tdb));
  clb_tensor_t outs[] = {ty, tdx, tdw, tdb};
  for (int i = 0; i < 4; i++) clb_test_canary_fill(ctx, outs[i]);
  uint64_t syncs = clb_test_counter_syncs(ctx);
  CL_OK(ctx, clb_linear(ctx, tx, tw, tb, &ty));
  clb_counters c0 = {.struct_size = sizeof c0}, c1 = {.struct_size = sizeof c1};
  CL_OK(ctx, clb_context_counters(ctx, &c0));
  CL_OK(ctx, clb_linear_backward(ctx, tx, tw, tdy, &tdx, &tdw, &tdb));
  CL_OK(ctx, clb_context_counters(ctx, &c1));
  if (clb_context_gemm_strategy(ctx) == CLB_GEMM_HOST_BLAS) {
    /* host BLAS: dx, dW and dbias are one native kernel */
    clb_test_checks++;
    if (c1.kernel_launches - c0.kernel_launches != 1)
      CLB_FAIL_AT("%s: backward made %llu launches, want 1 (dx, dW and dbias)", what,
                  (unsigned long long)(c1.kernel_launches - c0.kernel_launches));
  }
  clb_test_checks++;
  uint64_t ds = clb_test_counter_syncs(ctx) - syncs;
  if (ds != (s == CLB_GEMM_SYNC_EXACT ? 3u : 0u)) CLB_FAIL_AT("%s: %llu host syncs", what, (unsigned long long)ds);
  char w2[200];
  snprintf(w2, sizeof w2, "%s y", what);
  nn_expect(ctx, ty, yd, y, m * f, w2);
  const grads want = {xd, wb, bb, dx, dw, db, m, in, f};
  expect_grads(ctx, what, "", &want, tdx, tdw, tdb);
  /* CLBlast over the bounds computes whole rows up to the bound */
  int64_t rows = s == CLB_GEMM_CLBLAST_BOUND ? mb : m;
  size_t es = clb_dtype_size(dt);
  clb_test_canary_check(ctx, ty, (size_t)(rows * f) * es, what);
  clb_test_canary_check(ctx, tdx, (size_t)(rows * in) * es, what);
  clb_test_canary_check(ctx, tdw, (size_t)(f * in) * es, what);
  clb_test_canary_check(ctx, tdb, (size_t)f * es, what);
  /* the fused public forms: relu(linear), and dx masked by x > 0 (x also the
   * output of the ReLU below) with dW and dbias unchanged */
  clb_tensor_t tya = NULL, tdxr = NULL, tdwr = NULL, tdbr = NULL;
  CL_OK(ctx, clb_linear_act(ctx, tx, tw, tb, CLB_UNARY_RELU, &tya));
  CL_OK(ctx, clb_linear_backward_relu(ctx, tx, tw, tdy, &tdxr, &tdwr, &tdbr));
  for (int64_t i = 0; i < m * f; i++) y[i] = y[i] > 0 ? y[i] : 0;
  for (int64_t i = 0; i < m * in; i++) dx[i] = p.x[i] > 0 ? dx[i] : 0;
  snprintf(w2, sizeof w2, "%s linear_act relu y", what);
  nn_expect(ctx, tya, yd, y, m * f, w2);
  expect_grads(ctx, what, " linear_backward_relu", &want, tdxr, tdwr, tdbr);
  /* without w: dW and dbias only (the first layer's backward) */
  clb_tensor_t tdw1 = NULL, tdb1 = NULL;
  CL_OK(ctx, clb_linear_backward(ctx, tx, NULL, tdy, NULL, &tdw1, &tdb1));
  expect_grads(ctx, what, " linear_backward without w", &want, NULL, tdw1, tdb1);
  clb_tensor_t all[] = {tx, tw, tb, tdy, ty, tdx, tdw, tdb, tya, tdxr, tdwr, tdbr, tdw1, tdb1};
  for (int i = 0; i < 14; i++) clb_tensor_free(all[i]);
  free(p.x); free(p.w); free(p.b); free(p.dy); free(y); free(dx); free(dw); free(db);
}

static void errors(clb_context_t ctx) {
  int64_t xb[2] = {8, 3}, wb[2] = {4, 3}, wb2[2] = {4, 2}, bb[1] = {4}, yb[2] = {8, 5};
  clb_tensor_t x = NULL, w = NULL, w2 = NULL, b = NULL, dy = NULL, xi = NULL, y = NULL, dx = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, xb, NULL, &x));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, wb, NULL, &w));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, wb2, NULL, &w2));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, bb, NULL, &b));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, yb, NULL, &dy));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 2, xb, NULL, &xi));
  EXPECT_STATUS(ctx, clb_linear(ctx, x, w2, b, &y), CLB_ERR_SHAPE, "op(a) has 3 columns, op(b) has 2 rows");
  EXPECT_STATUS(ctx, clb_linear(ctx, xi, w, b, &y), CLB_ERR_DTYPE, "a is i64");
  EXPECT_STATUS(ctx, clb_linear(ctx, x, NULL, b, &y), CLB_ERR_NULL, "tensor b is NULL");
  EXPECT_STATUS(ctx, clb_linear_backward(ctx, x, w, dy, &dx, NULL, NULL), CLB_ERR_SHAPE,
                "x [8, 3] f32, w [4, 3] f32 and dy [8, 5] f32 do not match");
  EXPECT_STATUS(ctx, clb_linear_backward(ctx, xi, w, dy, &dx, NULL, NULL), CLB_ERR_DTYPE, "x is i64");
  EXPECT_TRUE(clb_linear(NULL, x, w, b, &y) == CLB_ERR_NULL);
  EXPECT_STATUS(ctx, clb_linear_act(ctx, x, w, b, CLB_UNARY_NEG, &y), CLB_ERR_INVALID_ARG, "is not an epilogue");
  EXPECT_STATUS(ctx, clb_linear_backward(ctx, x, NULL, dy, &dx, NULL, NULL), CLB_ERR_NULL, "w is NULL");
  EXPECT_STATUS(ctx, clb_linear_backward_relu(ctx, x, w, dy, &dx, NULL, NULL), CLB_ERR_SHAPE,
                "x [8, 3] f32, w [4, 3] f32 and dy [8, 5] f32 do not match");
  clb_tensor_t all[] = {x, w, w2, b, dy, xi};
  for (int i = 0; i < 6; i++) clb_tensor_free(all[i]);
}

/* Reads t's whole shape record (CLB_MAX_RANK entries) and compares it with
 * want's first rank entries, 1 after them. */
static void expect_record(clb_context_t ctx, clb_tensor_t t, int rank, const int64_t *want, const char *what) {
  int64_t rec[CLB_MAX_RANK];
  REQUIRE_TRUE(clEnqueueReadBuffer(clb_context_cl_queue(ctx), clb_tensor_shape_mem(t), CL_TRUE, 0, sizeof rec, rec, 0,
                                   NULL, NULL) == CL_SUCCESS);
  for (int d = 0; d < CLB_MAX_RANK; d++) {
    clb_test_checks++;
    if (rec[d] != (d < rank ? want[d] : 1)) {
      CLB_FAIL_AT("%s: shape record entry %d is %lld, want %lld", what, d, (long long)rec[d],
                  (long long)(d < rank ? want[d] : 1));
      break;
    }
  }
}

/* Under host BLAS the native kernel writes its outputs' whole shape records, so
 * outputs the op makes get no record write from the host: none is enqueued, and
 * records that the pool hands back holding another tensor's dims (rank 8 here)
 * read exactly as the outputs' dims with 1 after them. */
static void host_records(clb_context_t ctx) {
  if (clb_context_set_gemm_strategy(ctx, CLB_GEMM_HOST_BLAS) != CLB_OK) {
    printf("host records: skipped (%s)\n", clb_context_errmsg(ctx));
    return;
  }
  int64_t big[CLB_MAX_RANK] = {2, 3, 2, 2, 2, 2, 2, 3};
  clb_tensor_t dirty[12];
  for (int i = 0; i < 12; i++) dirty[i] = NULL;
  for (int i = 0; i < 12; i++) CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, CLB_MAX_RANK, big, NULL, &dirty[i]));
  CL_OK(ctx, clb_context_sync(ctx));
  for (int i = 11; i >= 0; i--) clb_tensor_free(dirty[i]);
  const int64_t m = 5, in = 3, f = 4;
  int64_t xb[2] = {16, in}, xd[2] = {m, in}, wb[2] = {f, in}, bb[1] = {f}, yb[2] = {16, f}, yd[2] = {m, f};
  uint8_t dyn[2] = {1, 0};
  double x[16 * 3], w[4 * 3], b[4], dy[16 * 4];
  for (int i = 0; i < 16 * 3; i++) x[i] = nn_rnd(-1, 1);
  for (int i = 0; i < 4 * 3; i++) w[i] = nn_rnd(-1, 1);
  for (int i = 0; i < 4; i++) b[i] = nn_rnd(-1, 1);
  for (int i = 0; i < 16 * 4; i++) dy[i] = nn_rnd(-1, 1);
  clb_tensor_t tx = nn_tensor(ctx, CLB_DTYPE_F32, 2, xb, dyn, xd, x);
  clb_tensor_t tw = nn_tensor(ctx, CLB_DTYPE_F32, 2, wb, NULL, wb, w);
  clb_tensor_t tb = nn_tensor(ctx, CLB_DTYPE_F32, 1, bb, NULL, bb, b);
  clb_tensor_t tdy = nn_tensor(ctx, CLB_DTYPE_F32, 2, yb, dyn, yd, dy);
  CL_OK(ctx, clb_context_sync(ctx));
  clb_counters c0 = {.struct_size = sizeof c0}, c1 = {.struct_size = sizeof c1};
  CL_OK(ctx, clb_context_counters(ctx, &c0));
  clb_tensor_t y = NULL, ya = NULL, dx = NULL, dw = NULL, db = NULL, dxr = NULL, dw1 = NULL, db1 = NULL;
  CL_OK(ctx, clb_linear(ctx, tx, tw, tb, &y));
  CL_OK(ctx, clb_linear_act(ctx, tx, tw, tb, CLB_UNARY_RELU, &ya));
  CL_OK(ctx, clb_linear_backward(ctx, tx, tw, tdy, &dx, &dw, &db));
  CL_OK(ctx, clb_linear_backward_relu(ctx, tx, tw, tdy, &dxr, NULL, NULL));
  CL_OK(ctx, clb_linear_backward(ctx, tx, NULL, tdy, NULL, &dw1, &db1));
  CL_OK(ctx, clb_context_counters(ctx, &c1));
  if (clb_context_gemm_strategy(ctx) == CLB_GEMM_HOST_BLAS) {
    EXPECT_EQ_I(c1.host_writes - c0.host_writes, 0);
    EXPECT_EQ_I(c1.kernel_launches - c0.kernel_launches, 5);
  } else {
    /* a device without native kernels (a GPU) runs clbound's GEMM kernel instead,
     * whose outputs get their records from the host; the records and values below
     * are checked all the same */
    printf("host records: the counts are not checked: host BLAS cannot run on this device\n");
    /* CI runs PoCL with OpenBLAS: there the counts must be checked */
    EXPECT_TRUE(!clb_test_device_required());
  }
  expect_record(ctx, y, 2, yd, "linear y");
  expect_record(ctx, ya, 2, yd, "linear_act y");
  expect_record(ctx, dx, 2, xd, "linear_backward dx");
  expect_record(ctx, dw, 2, wb, "linear_backward dw");
  expect_record(ctx, db, 1, bb, "linear_backward dbias");
  expect_record(ctx, dxr, 2, xd, "linear_backward_relu dx");
  expect_record(ctx, dw1, 2, wb, "linear_backward dw without w");
  expect_record(ctx, db1, 1, bb, "linear_backward dbias without w");
  /* the values, at those dims */
  double yr[16 * 4], dbr[4];
  lin p = {m, in, f, x, w, b, dy};
  lin_forward(&p, x, w, b, yr);
  nn_expect(ctx, y, yd, yr, m * f, "host records: linear y");
  for (int64_t j = 0; j < f; j++) {
    dbr[j] = 0;
    for (int64_t i = 0; i < m; i++) dbr[j] += dy[i * f + j];
  }
  nn_expect(ctx, db, bb, dbr, f, "host records: linear_backward dbias");
  clb_tensor_t all[] = {tx, tw, tb, tdy, y, ya, dx, dw, db, dxr, dw1, db1};
  for (int i = 0; i < 12; i++) clb_tensor_free(all[i]);
  CL_OK(ctx, clb_context_set_gemm_strategy(ctx, CLB_GEMM_AUTO));
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  clb_tensor_t probe = NULL;
  has_fp64 = clb_tensor_new(ctx, CLB_DTYPE_F64, 0, NULL, NULL, &probe) == CLB_OK;
  clb_tensor_free(probe);
  if (clb_test_small()) has_fp64 = 0; /* reduced sizes (the oclgrind label): f32 only */
  static const int64_t M[] = {0, 1, 17, 63, 64};
  for (int s = 0; s < CLB_GEMM_STRATEGY_COUNT; s++)
    for (int i = 0; i < 5; i += clb_test_small() ? 2 : 1) {
      run(ctx, (clb_gemm_strategy)s, CLB_DTYPE_F32, 64, 7, 5, M[i], 1, s == 0);
      if (has_fp64) run(ctx, (clb_gemm_strategy)s, CLB_DTYPE_F64, 64, 7, 5, M[i], 1, 0);
    }
  for (int s = 0; s < CLB_GEMM_STRATEGY_COUNT; s++) {
    run(ctx, (clb_gemm_strategy)s, CLB_DTYPE_F32, 100, 20, 33, 37, 0, 0);
    run(ctx, (clb_gemm_strategy)s, CLB_DTYPE_F32, 100, 20, 33, 100, 1, 0);
  }
  host_records(ctx);
  errors(ctx);
  clb_context_free(ctx);
  return clb_test_finish("nn/linear");
}
