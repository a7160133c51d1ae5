/* test-fuse.c: elementwise groups (runtime/graph/fuse.c) against the same
 * graphs run op by op (CLBOUND_FUSE=off) and a double-precision host reference:
 * broadcasting (a row vector and 0-d scalars), casts between i32, f32 and f64,
 * a node read twice (it ends a group and is materialised), intermediates not
 * materialised, a kept one that is, batch sizes 0, 1, 7 and the bound; a dim the
 * symbol engine cannot prove equal stops fusion (group count 0); a status bit
 * raised inside a fused kernel gives the same error as op by op; a training
 * graph's loss fused with its activation (sigmoid + BCE, tanh + MSE) trains as
 * op by op and as a double reference, at batch sizes 0, 1, 5 and the bound; a
 * linear layer's activation as its GEMM's epilogue (host BLAS and clbound's
 * kernel). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl-test.h"
#include "clbound/clbound.h"
#include "test.h"

enum { BOUND = 64, COLS = 5 };
static const float BROW[COLS] = {0.25f, 0.75f, -1.25f, 2.0f, 0.5f};

typedef struct graph_a {
  clb_graph_t g;
  clb_node x, t1, t2, t3, o1, o2;
} graph_a;

/* A graph under the dynamic policy; free_intermediates releases what no later
 * node reads after each run (what lets fusion drop intermediates). */

/* x i32 [<=64, 5]; t1 = f32(x); t2 = t1 * b (b [5] broadcast over rows);
 * t3 = t2 - 0.5 (scalar); o1 = rem(f64(relu(t3)), 1.5); o2 = sigmoid(t3) * b.
 * t3 is read twice: groups {t1, t2, t3}, {relu, cast, rem}, {sigmoid, mul}. */
static void build_a(clb_context_t ctx, graph_a *a, int keep_t2) {
  a->g = clb_test_dynamic_graph(ctx, "fuse-a", 1);
  clb_graph_t g = a->g;
  int64_t xd[2] = {BOUND, COLS}, bd[1] = {COLS};
  uint8_t dyn[2] = {1, 0};
  clb_node b, half, s15, r, c64, sg;
  CL_OK(ctx, clb_graph_input(g, "x", CLB_DTYPE_I32, 2, xd, dyn, &a->x));
  CL_OK(ctx, clb_graph_param(g, "b", CLB_DTYPE_F32, 1, bd, BROW, sizeof BROW, 0, &b));
  CL_OK(ctx, clb_graph_scalar(g, CLB_DTYPE_F32, 0.5, &half));
  CL_OK(ctx, clb_graph_scalar(g, CLB_DTYPE_F64, 1.5, &s15));
  CL_OK(ctx, clb_graph_cast(g, a->x, CLB_DTYPE_F32, &a->t1));
  CL_OK(ctx, clb_graph_binary(g, CLB_BINARY_MUL, a->t1, b, &a->t2));
  CL_OK(ctx, clb_graph_binary(g, CLB_BINARY_SUB, a->t2, half, &a->t3));
  CL_OK(ctx, clb_graph_unary(g, CLB_UNARY_RELU, a->t3, &r));
  CL_OK(ctx, clb_graph_cast(g, r, CLB_DTYPE_F64, &c64));
  CL_OK(ctx, clb_graph_binary(g, CLB_BINARY_REM, c64, s15, &a->o1));
  CL_OK(ctx, clb_graph_unary(g, CLB_UNARY_SIGMOID, a->t3, &sg));
  CL_OK(ctx, clb_graph_binary(g, CLB_BINARY_MUL, sg, b, &a->o2));
  if (keep_t2) CL_OK(ctx, clb_graph_keep(g, a->t2));
}

static void read_all(clb_context_t ctx, clb_tensor_t t, void *host, size_t bytes) {
  int64_t dims[CLB_MAX_RANK];
  CL_OK(ctx, clb_tensor_read(ctx, t, dims, host, bytes, NULL));
}

/* One run of graph A at `rows`: o1 exactly (every value is a multiple of 1/4, so
 * float and double agree), o2 within 2e-6 relative + 1e-7 absolute of the
 * double reference; o1 and o2 returned for the comparison with op by op. */
static void run_a(clb_context_t ctx, graph_a *a, int rows, int keep_t2, double *o1, float *o2) {
  int32_t x[BOUND * COLS];
  for (int i = 0; i < rows * COLS; i++) x[i] = (int32_t)((i * 7919) % 41) - 20;
  int64_t dims[2] = {rows, COLS};
  CL_OK(ctx, clb_graph_feed(a->g, a->x, dims, x, sizeof(int32_t) * (size_t)(rows * COLS)));
  CL_OK(ctx, clb_graph_run(a->g));
  int64_t got[CLB_MAX_RANK];
  CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(a->g, a->o1), got, o1, sizeof(double) * BOUND * COLS, NULL));
  EXPECT_EQ_I(got[0], rows);
  EXPECT_EQ_I(got[1], COLS);
  CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(a->g, a->o2), got, o2, sizeof(float) * BOUND * COLS, NULL));
  EXPECT_EQ_I(got[0], rows);
  float t2[BOUND * COLS];
  if (keep_t2) read_all(ctx, clb_graph_tensor(a->g, a->t2), t2, sizeof t2);
  for (int i = 0; i < rows * COLS; i++) {
    double b = BROW[i % COLS], v2 = (double)x[i] * b, v3 = v2 - 0.5;
    double w1 = fmod(v3 > 0 ? v3 : 0, 1.5); /* Python's modulo: both operands are >= 0 here */
    double w2 = 1.0 / (1.0 + exp(-v3)) * b;
    clb_test_checks += 2;
    if (o1[i] != w1) CLB_FAIL_AT("rows %d: o1[%d] = %.17g, want %.17g", rows, i, o1[i], w1);
    if (!(fabs(o2[i] - w2) <= 2e-6 * fabs(w2) + 1e-7)) CLB_FAIL_AT("rows %d: o2[%d] = %.9g, want %.9g", rows, i, o2[i], w2);
    if (keep_t2) {
      clb_test_checks++;
      if (t2[i] != (float)v2) CLB_FAIL_AT("rows %d: kept t2[%d] = %.9g, want %.9g", rows, i, t2[i], v2);
    }
  }
}

static clb_graph_stats stats_of(clb_graph_t g) {
  clb_graph_stats s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  clb_graph_stats_get(g, &s);
  return s;
}

/* Graph A fused and op by op at 0, 1, 7 and the bound: the same bits, and the
 * reference; the groups found; t1 (an intermediate nothing else reads) not
 * materialised, t2 materialised when kept. */
static void test_groups(clb_context_t ctx) {
  static const int sizes[] = {0, 1, 7, BOUND, 3};
  for (int keep = 0; keep < 2; keep++) {
    graph_a fa, ua;
    setenv("CLBOUND_FUSE", "on", 1);
    build_a(ctx, &fa, keep);
    setenv("CLBOUND_FUSE", "off", 1);
    build_a(ctx, &ua, keep);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      static double fo1[BOUND * COLS], uo1[BOUND * COLS];
      static float fo2[BOUND * COLS], uo2[BOUND * COLS];
      setenv("CLBOUND_FUSE", "on", 1);
      run_a(ctx, &fa, sizes[k], keep, fo1, fo2);
      EXPECT_TRUE(keep || clb_graph_tensor(fa.g, fa.t1) == NULL); /* never materialised */
      setenv("CLBOUND_FUSE", "off", 1);
      run_a(ctx, &ua, sizes[k], keep, uo1, uo2);
      clb_test_checks++;
      if (memcmp(fo1, uo1, sizeof(double) * (size_t)(sizes[k] * COLS)) || memcmp(fo2, uo2, sizeof(float) * (size_t)(sizes[k] * COLS)))
        CLB_FAIL_AT("rows %d: fused and op-by-op results differ in their bits", sizes[k]);
    }
    setenv("CLBOUND_FUSE", "on", 1);
    clb_graph_stats fs = stats_of(fa.g);
    EXPECT_EQ_I(fs.fused_groups, 3);
    EXPECT_EQ_I(fs.fused_nodes, 8);
    EXPECT_EQ_I(fs.plans_compiled, 1);
    setenv("CLBOUND_FUSE", "off", 1);
    clb_graph_stats us = stats_of(ua.g);
    EXPECT_EQ_I(us.fused_groups, 0);
    clb_graph_free(fa.g);
    clb_graph_free(ua.g);
  }
  setenv("CLBOUND_FUSE", "on", 1);
}

/* x i32 [<=64, 5] and c f32 [<=64, 1] are fed separately: their dim 0 are two
 * symbols the engine cannot prove equal (the sum's dim 0 is max(s0, s1)), so
 * f32(x) + c and its relu are not fused (0 groups); results still right. */
static void test_unproven(clb_context_t ctx) {
  setenv("CLBOUND_FUSE", "on", 1);
  clb_graph_t g = clb_test_dynamic_graph(ctx, "fuse-unproven", 0);
  int64_t xd[2] = {BOUND, COLS}, cd[2] = {BOUND, 1};
  uint8_t dyn[2] = {1, 0};
  clb_node x, c, t1, t2, t3;
  CL_OK(ctx, clb_graph_input(g, "x", CLB_DTYPE_I32, 2, xd, dyn, &x));
  CL_OK(ctx, clb_graph_input(g, "c", CLB_DTYPE_F32, 2, cd, dyn, &c));
  CL_OK(ctx, clb_graph_cast(g, x, CLB_DTYPE_F32, &t1));
  CL_OK(ctx, clb_graph_binary(g, CLB_BINARY_ADD, t1, c, &t2));
  CL_OK(ctx, clb_graph_unary(g, CLB_UNARY_RELU, t2, &t3));
  const int rows = 9;
  int32_t xv[BOUND * COLS];
  float cv[BOUND], out[BOUND * COLS];
  for (int i = 0; i < rows * COLS; i++) xv[i] = i % 7 - 3;
  for (int r = 0; r < rows; r++) cv[r] = 0.5f * (float)r - 2.0f;
  int64_t d1[2] = {rows, COLS}, d2[2] = {rows, 1};
  CL_OK(ctx, clb_graph_feed(g, x, d1, xv, sizeof(int32_t) * rows * COLS));
  CL_OK(ctx, clb_graph_feed(g, c, d2, cv, sizeof(float) * rows));
  CL_OK(ctx, clb_graph_run(g));
  read_all(ctx, clb_graph_tensor(g, t3), out, sizeof out);
  for (int i = 0; i < rows * COLS; i++) {
    double w = (double)xv[i] + cv[i / COLS];
    w = w > 0 ? w : 0;
    clb_test_checks++;
    if (out[i] != (float)w) CLB_FAIL_AT("unproven: out[%d] = %.9g, want %.9g", i, out[i], w);
  }
  clb_graph_stats s = stats_of(g);
  EXPECT_EQ_I(s.fused_groups, 0);
  clb_graph_free(g);
}

/* An i32 remainder or floor division by a 0-d zero inside a fused group
 * raises the division-by-zero bit: the run reports CLB_ERR_DIV_ZERO as op by
 * op does, and the group ran fused. */
static void test_status_bits(clb_context_t ctx) {
  static const clb_binary_op ops[2] = {CLB_BINARY_REM, CLB_BINARY_FLOORDIV};
  for (int run = 0; run < 4; run++) { /* each op, op by op then fused */
    int k = run / 2, fuse = run % 2;
    setenv("CLBOUND_FUSE", fuse ? "on" : "off", 1);
    clb_graph_t g = clb_test_dynamic_graph(ctx, "fuse-status", 0);
    int64_t xd[2] = {BOUND, COLS};
    uint8_t dyn[2] = {1, 0};
    clb_node x, two, zero, t1, t2;
    CL_OK(ctx, clb_graph_input(g, "x", CLB_DTYPE_I32, 2, xd, dyn, &x));
    CL_OK(ctx, clb_graph_scalar(g, CLB_DTYPE_I32, 2, &two));
    CL_OK(ctx, clb_graph_scalar(g, CLB_DTYPE_I32, 0, &zero));
    CL_OK(ctx, clb_graph_binary(g, CLB_BINARY_MUL, x, two, &t1));
    CL_OK(ctx, clb_graph_binary(g, ops[k], t1, zero, &t2));
    int32_t xv[3 * COLS] = {0};
    int64_t d[2] = {3, COLS};
    CL_OK(ctx, clb_graph_feed(g, x, d, xv, sizeof xv));
    clb_status st = clb_graph_run(g);
    int32_t out[BOUND * COLS];
    int64_t dims[CLB_MAX_RANK];
    if (st == CLB_OK) st = clb_tensor_read(ctx, clb_graph_tensor(g, t2), dims, out, sizeof out, NULL);
    EXPECT_EQ_I(st, CLB_ERR_DIV_ZERO);
    if (fuse) EXPECT_EQ_I(stats_of(g).fused_groups, 1);
    clb_graph_free(g);
  }
  setenv("CLBOUND_FUSE", "on", 1);
}

/* Floor division and pow inside fused groups: x i32 [<=64, 5]; q = x // -3
 * (i32, in the group's own function); f = f32(x); p = pow(relu(f) + 1, b) (b
 * [5] broadcast over rows); r = f // 0.7 (f32). Fused and op by op give the
 * same bits, and Python's values; pow of i32 is refused when the graph is
 * built (division by zero: test_status_bits). */
static void test_floordiv_pow(clb_context_t ctx) {
  static int32_t q[2][BOUND * COLS];
  static float p[2][BOUND * COLS], r[2][BOUND * COLS];
  const int rows = 37;
  int32_t xv[BOUND * COLS];
  for (int i = 0; i < rows * COLS; i++) xv[i] = (int32_t)((i * 7919) % 41) - 20;
  for (int fuse = 0; fuse < 2; fuse++) {
    setenv("CLBOUND_FUSE", fuse ? "on" : "off", 1);
    clb_graph_t g = clb_test_dynamic_graph(ctx, "fuse-floordiv", 0);
    int64_t xd[2] = {BOUND, COLS}, bd[1] = {COLS};
    uint8_t dyn[2] = {1, 0};
    clb_node x, m3, b, one, s07, qn, f, rl, rp, pn, rn;
    CL_OK(ctx, clb_graph_input(g, "x", CLB_DTYPE_I32, 2, xd, dyn, &x));
    CL_OK(ctx, clb_graph_param(g, "b", CLB_DTYPE_F32, 1, bd, BROW, sizeof BROW, 0, &b));
    CL_OK(ctx, clb_graph_scalar(g, CLB_DTYPE_I32, -3, &m3));
    CL_OK(ctx, clb_graph_scalar(g, CLB_DTYPE_F32, 1, &one));
    CL_OK(ctx, clb_graph_scalar(g, CLB_DTYPE_F32, 0.7, &s07));
    CL_OK(ctx, clb_graph_binary(g, CLB_BINARY_FLOORDIV, x, m3, &qn));
    CL_OK(ctx, clb_graph_cast(g, x, CLB_DTYPE_F32, &f));
    CL_OK(ctx, clb_graph_unary(g, CLB_UNARY_RELU, f, &rl));
    CL_OK(ctx, clb_graph_binary(g, CLB_BINARY_ADD, rl, one, &rp));
    CL_OK(ctx, clb_graph_binary(g, CLB_BINARY_POW, rp, b, &pn));
    CL_OK(ctx, clb_graph_binary(g, CLB_BINARY_FLOORDIV, f, s07, &rn));
    EXPECT_STATUS(ctx, clb_graph_binary(g, CLB_BINARY_POW, x, x, &rn), CLB_ERR_DTYPE, "pow of x (i32) is not floating");
    int64_t d[2] = {rows, COLS};
    CL_OK(ctx, clb_graph_feed(g, x, d, xv, sizeof(int32_t) * rows * COLS));
    CL_OK(ctx, clb_graph_run(g));
    read_all(ctx, clb_graph_tensor(g, qn), q[fuse], sizeof q[fuse]);
    read_all(ctx, clb_graph_tensor(g, pn), p[fuse], sizeof p[fuse]);
    read_all(ctx, clb_graph_tensor(g, rn), r[fuse], sizeof r[fuse]);
    if (fuse) EXPECT_TRUE(stats_of(g).fused_groups >= 1);
    clb_graph_free(g);
  }
  for (int i = 0; i < rows * COLS; i++) {
    int32_t v = xv[i];
    int32_t wq = v / -3 - (v % -3 != 0 && ((v < 0) != 1));
    float fv = (float)v, f07 = 0.7f;
    double m = fmod((double)fv, (double)f07), dq = ((double)fv - m) / (double)f07;
    if (m != 0 && ((f07 < 0) != (m < 0))) dq -= 1;
    double wr = floor(dq) + (dq - floor(dq) > 0.5), wp = pow(v > 0 ? v + 1.0 : 1.0, (double)BROW[i % COLS]);
    clb_test_checks += 5;
    if (q[1][i] != wq || q[0][i] != wq) CLB_FAIL_AT("%d // -3: fused %d, op by op %d, want %d", v, q[1][i], q[0][i], wq);
    if (r[1][i] != r[0][i] || r[1][i] != (float)wr) CLB_FAIL_AT("%d // 0.7f: fused %g, op by op %g, want %g", v, r[1][i], r[0][i], wr);
    if (p[1][i] != p[0][i] || !(fabs(p[1][i] - wp) <= 1e-6 * wp)) CLB_FAIL_AT("pow [%d]: fused %.9g, op by op %.9g, want %.9g", i, p[1][i], p[0][i], wp);
  }
  setenv("CLBOUND_FUSE", "on", 1);
}

/* z = x w^T + b (x [<=16, 3], one output), pred = act(z), loss(pred, t); SGD at
 * lr 0.5. Each step's loss and the parameters after it, fused and op by op,
 * against the same training in double (1e-5 relative + 1e-6 absolute); an empty
 * batch gives a NaN loss and leaves the parameters as they were. */
enum { LB = 16, LIN = 3 };
typedef struct loss_graph {
  clb_graph_t g;
  clb_node x, t, w, b, loss;
} loss_graph;

static void build_loss(clb_context_t ctx, loss_graph *l, clb_unary_op act, clb_loss_kind kind) {
  static const float w0[LIN] = {0.3f, -0.2f, 0.1f}, b0[1] = {0.05f};
  l->g = clb_test_dynamic_graph(ctx, "fuse-loss", 0);
  int64_t xd[2] = {LB, LIN}, td[1] = {LB}, wd[2] = {1, LIN}, bd[1] = {1};
  uint8_t dyn[2] = {1, 0};
  clb_node z, p;
  CL_OK(ctx, clb_graph_input(l->g, "x", CLB_DTYPE_F32, 2, xd, dyn, &l->x));
  CL_OK(ctx, clb_graph_input(l->g, "t", CLB_DTYPE_F32, 1, td, dyn, &l->t));
  CL_OK(ctx, clb_graph_param(l->g, "w", CLB_DTYPE_F32, 2, wd, w0, sizeof w0, 1, &l->w));
  CL_OK(ctx, clb_graph_param(l->g, "b", CLB_DTYPE_F32, 1, bd, b0, sizeof b0, 1, &l->b));
  CL_OK(ctx, clb_graph_linear(l->g, l->x, l->w, l->b, &z));
  CL_OK(ctx, clb_graph_unary(l->g, act, z, &p));
  CL_OK(ctx, clb_graph_loss(l->g, kind, p, l->t, &l->loss));
  CL_OK(ctx, clb_graph_train(l->g, l->loss, 0.5, 0.0));
}

static int close_to(double got, double want) {
  if (isnan(want)) return isnan(got);
  return fabs(got - want) <= 1e-5 * fabs(want) + 1e-6;
}

static void test_fused_loss(clb_context_t ctx) {
  static const int sizes[] = {5, 1, 0, LB, 7};
  static const struct {
    clb_unary_op act;
    clb_loss_kind kind;
  } cases[] = {{CLB_UNARY_SIGMOID, CLB_LOSS_BCE}, {CLB_UNARY_TANH, CLB_LOSS_MSE}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    loss_graph lg[2];
    for (int fuse = 0; fuse < 2; fuse++) {
      setenv("CLBOUND_FUSE", fuse ? "on" : "off", 1);
      build_loss(ctx, &lg[fuse], cases[c].act, cases[c].kind);
    }
    double W[LIN] = {0.3f, -0.2f, 0.1f}, B = 0.05f;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      const int n = sizes[k];
      float x[LB * LIN], t[LB];
      for (int i = 0; i < n * LIN; i++) x[i] = (float)((i * 37) % 19) / 19.0f - 0.5f;
      for (int i = 0; i < n; i++) t[i] = cases[c].kind == CLB_LOSS_BCE ? (float)(i % 2) : 0.25f * (float)(i % 3) - 0.25f;
      /* the double reference of this step */
      double loss = 0, gW[LIN] = {0}, gB = 0;
      for (int i = 0; i < n; i++) {
        double zz = B;
        for (int j = 0; j < LIN; j++) zz += W[j] * x[i * LIN + j];
        double p, dp, dz;
        if (cases[c].act == CLB_UNARY_SIGMOID) {
          p = 1 / (1 + exp(-zz));
          loss += -(t[i] * log(p) + (1 - t[i]) * log(1 - p));
          dp = (p - t[i]) / (p * (1 - p));
          dz = dp * p * (1 - p);
        } else {
          p = tanh(zz);
          loss += (p - t[i]) * (p - t[i]);
          dp = 2 * (p - t[i]);
          dz = dp * (1 - p * p);
        }
        dz /= n;
        for (int j = 0; j < LIN; j++) gW[j] += dz * x[i * LIN + j];
        gB += dz;
      }
      loss = n ? loss / n : NAN;
      for (int j = 0; j < LIN; j++) W[j] -= 0.5 * gW[j];
      B -= 0.5 * gB;
      int64_t xd[2] = {n, LIN}, td[1] = {n};
      for (int fuse = 0; fuse < 2; fuse++) {
        setenv("CLBOUND_FUSE", fuse ? "on" : "off", 1);
        loss_graph *l = &lg[fuse];
        CL_OK(ctx, clb_graph_feed(l->g, l->x, xd, x, sizeof(float) * (size_t)(n * LIN)));
        CL_OK(ctx, clb_graph_feed(l->g, l->t, td, t, sizeof(float) * (size_t)n));
        CL_OK(ctx, clb_graph_run(l->g));
        float lv, wv[LIN], bv;
        read_all(ctx, clb_graph_tensor(l->g, l->loss), &lv, sizeof lv);
        read_all(ctx, clb_graph_tensor(l->g, l->w), wv, sizeof wv);
        read_all(ctx, clb_graph_tensor(l->g, l->b), &bv, sizeof bv);
        clb_test_checks += 2 + LIN;
        if (!close_to(lv, loss)) CLB_FAIL_AT("case %zu %s, %d rows: loss %.9g, want %.9g", c, fuse ? "fused" : "op by op", n, lv, loss);
        for (int j = 0; j < LIN; j++)
          if (!close_to(wv[j], W[j])) CLB_FAIL_AT("case %zu %s, %d rows: w[%d] %.9g, want %.9g", c, fuse ? "fused" : "op by op", n, j, wv[j], W[j]);
        if (!close_to(bv, B)) CLB_FAIL_AT("case %zu %s, %d rows: b %.9g, want %.9g", c, fuse ? "fused" : "op by op", n, bv, B);
      }
    }
    setenv("CLBOUND_FUSE", "on", 1);
    EXPECT_EQ_I(stats_of(lg[1].g).fused_losses, 1);
    setenv("CLBOUND_FUSE", "off", 1);
    EXPECT_EQ_I(stats_of(lg[0].g).fused_losses, 0);
    clb_graph_free(lg[0].g);
    clb_graph_free(lg[1].g);
  }
  setenv("CLBOUND_FUSE", "on", 1);
}

/* act(x w^T + b) as the GEMM's epilogue (relu and tanh; x [<=16, 3], w [4, 3])
 * under host BLAS and clbound's kernel: fused and op by op against a double
 * reference (1e-5 relative + 1e-6 absolute) at 0, 1, 9 and the bound rows; relu
 * fused and op by op bit for bit. */
static void test_epilogue(clb_context_t ctx) {
  static const float W[4 * LIN] = {0.5f, -0.25f, 1.0f, -0.75f, 0.3f, 0.2f, 0.1f, -0.6f, 0.4f, 0.9f, -0.1f, 0.05f};
  static const float Bv[4] = {0.1f, -0.2f, 0.0f, 0.3f};
  static const clb_gemm_strategy strat[2] = {CLB_GEMM_AUTO, CLB_GEMM_DEVICE};
  static const clb_unary_op acts[2] = {CLB_UNARY_RELU, CLB_UNARY_TANH};
  static const int sizes[] = {9, 0, 1, LB};
  for (int s = 0; s < 2; s++)
    for (int a = 0; a < 2; a++) {
      CL_OK(ctx, clb_context_set_gemm_strategy(ctx, strat[s]));
      float got[2][LB * 4];
      clb_graph_t g[2];
      clb_node x[2], y[2];
      for (int fuse = 0; fuse < 2; fuse++) {
        setenv("CLBOUND_FUSE", fuse ? "on" : "off", 1);
        g[fuse] = clb_test_dynamic_graph(ctx, "fuse-epilogue", 1);
        int64_t xd[2] = {LB, LIN}, wd[2] = {4, LIN}, bd[1] = {4};
        uint8_t dyn[2] = {1, 0};
        clb_node w, b, z;
        CL_OK(ctx, clb_graph_input(g[fuse], "x", CLB_DTYPE_F32, 2, xd, dyn, &x[fuse]));
        CL_OK(ctx, clb_graph_param(g[fuse], "w", CLB_DTYPE_F32, 2, wd, W, sizeof W, 0, &w));
        CL_OK(ctx, clb_graph_param(g[fuse], "b", CLB_DTYPE_F32, 1, bd, Bv, sizeof Bv, 0, &b));
        CL_OK(ctx, clb_graph_linear(g[fuse], x[fuse], w, b, &z));
        CL_OK(ctx, clb_graph_unary(g[fuse], acts[a], z, &y[fuse]));
      }
      for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int n = sizes[k];
        float xv[LB * LIN];
        for (int i = 0; i < n * LIN; i++) xv[i] = (float)((i * 29) % 23) / 23.0f - 0.4f;
        int64_t xd[2] = {n, LIN};
        for (int fuse = 0; fuse < 2; fuse++) {
          setenv("CLBOUND_FUSE", fuse ? "on" : "off", 1);
          CL_OK(ctx, clb_graph_feed(g[fuse], x[fuse], xd, xv, sizeof(float) * (size_t)(n * LIN)));
          CL_OK(ctx, clb_graph_run(g[fuse]));
          int64_t dims[CLB_MAX_RANK];
          CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(g[fuse], y[fuse]), dims, got[fuse], sizeof got[fuse], NULL));
          EXPECT_EQ_I(dims[0], n);
          for (int i = 0; i < n; i++)
            for (int j = 0; j < 4; j++) {
              double zz = Bv[j];
              for (int q = 0; q < LIN; q++) zz += (double)xv[i * LIN + q] * W[j * LIN + q];
              double want = acts[a] == CLB_UNARY_RELU ? (zz > 0 ? zz : 0) : tanh(zz);
              clb_test_checks++;
              if (!close_to(got[fuse][i * 4 + j], want))
                CLB_FAIL_AT("strategy %d act %d %s, %d rows: y[%d][%d] = %.9g, want %.9g", (int)strat[s], (int)acts[a],
                            fuse ? "fused" : "op by op", n, i, j, got[fuse][i * 4 + j], want);
            }
        }
        clb_test_checks++;
        if (acts[a] == CLB_UNARY_RELU && memcmp(got[0], got[1], sizeof(float) * (size_t)(n * 4)))
          CLB_FAIL_AT("strategy %d relu, %d rows: fused and op-by-op bits differ", (int)strat[s], n);
      }
      setenv("CLBOUND_FUSE", "on", 1);
      EXPECT_EQ_I(stats_of(g[1]).fused_epilogues, 1);
      for (int fuse = 0; fuse < 2; fuse++) clb_graph_free(g[fuse]);
    }
  CL_OK(ctx, clb_context_set_gemm_strategy(ctx, CLB_GEMM_AUTO));
  setenv("CLBOUND_FUSE", "on", 1);
}

/* nonzero read by one cast alone: nonzero writes the cast's dtype in its own
 * launch (the cast launches nothing); the same values as op by op and as the
 * host's indices, exactly, at 0, 1, a few and the bound rows, one launch fewer
 * a step; a kept nonzero output is not fused. */
static void test_nonzero_cast(clb_context_t ctx) {
  static const clb_dtype dts[3] = {CLB_DTYPE_F32, CLB_DTYPE_F64, CLB_DTYPE_I32};
  static const int sizes[] = {5, 0, 1, LB, 3};
  enum { NC = 3 };
  for (int d = 0; d < 3; d++)
    for (int keep = 0; keep < 2; keep++) {
      clb_graph_t g[2];
      clb_node x[2], z[2], c[2];
      for (int fuse = 0; fuse < 2; fuse++) {
        setenv("CLBOUND_FUSE", fuse ? "on" : "off", 1);
        g[fuse] = clb_test_dynamic_graph(ctx, "fuse-nonzero-cast", 1);
        int64_t xd[2] = {LB, NC};
        uint8_t dyn[2] = {1, 0};
        CL_OK(ctx, clb_graph_input(g[fuse], "x", CLB_DTYPE_F32, 2, xd, dyn, &x[fuse]));
        CL_OK(ctx, clb_graph_nonzero(g[fuse], x[fuse], &z[fuse]));
        CL_OK(ctx, clb_graph_cast(g[fuse], z[fuse], dts[d], &c[fuse]));
        if (keep) CL_OK(ctx, clb_graph_keep(g[fuse], z[fuse]));
      }
      uint64_t launches[2] = {0, 0};
      for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int n = sizes[k];
        float xv[LB * NC];
        int64_t want[LB * NC * 2];
        int cnt = 0;
        for (int i = 0; i < n * NC; i++) {
          xv[i] = (i * 7 + (int)k) % 3 == 0 ? 0.0f : (i % 2 ? -0.0f : 1.5f); /* -0.0 counts as zero */
          if (xv[i] != 0.0f) {
            want[2 * cnt] = i / NC;
            want[2 * cnt + 1] = i % NC;
            cnt++;
          }
        }
        int64_t xd[2] = {n, NC};
        for (int fuse = 0; fuse < 2; fuse++) {
          setenv("CLBOUND_FUSE", fuse ? "on" : "off", 1);
          CL_OK(ctx, clb_graph_feed(g[fuse], x[fuse], xd, xv, sizeof(float) * (size_t)(n * NC)));
          clb_counters c0 = {.struct_size = sizeof c0}, c1 = {.struct_size = sizeof c1};
          CL_OK(ctx, clb_context_counters(ctx, &c0));
          CL_OK(ctx, clb_graph_run(g[fuse]));
          CL_OK(ctx, clb_context_counters(ctx, &c1));
          if (k > 0) launches[fuse] = c1.kernel_launches - c0.kernel_launches; /* a warm step */
          double got[LB * NC * 2];
          int64_t dims[CLB_MAX_RANK];
          CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(g[fuse], c[fuse]), dims, got, sizeof got, NULL));
          EXPECT_EQ_I(dims[0], cnt);
          EXPECT_EQ_I(dims[1], 2);
          for (int i = 0; i < 2 * cnt; i++) {
            double v = dts[d] == CLB_DTYPE_F64 ? got[i]
                       : dts[d] == CLB_DTYPE_F32 ? (double)((float *)got)[i]
                                                 : (double)((int32_t *)got)[i];
            clb_test_checks++;
            if (v != (double)want[i])
              CLB_FAIL_AT("%s keep %d %s, %d rows: index %d = %g, want %lld", clb_dtype_name(dts[d]), keep,
                          fuse ? "fused" : "op by op", n, i, v, (long long)want[i]);
          }
        }
      }
      setenv("CLBOUND_FUSE", "on", 1);
      EXPECT_EQ_I(stats_of(g[1]).fused_casts, keep ? 0 : 1);
      EXPECT_EQ_I(stats_of(g[0]).fused_casts, 0);
      EXPECT_EQ_I(launches[1], launches[0] - (keep ? 0 : 1));
      for (int fuse = 0; fuse < 2; fuse++) clb_graph_free(g[fuse]);
    }
  setenv("CLBOUND_FUSE", "on", 1);
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  test_groups(ctx);
  test_unproven(ctx);
  test_status_bits(ctx);
  test_floordiv_pow(ctx);
  test_fused_loss(ctx);
  test_epilogue(ctx);
  test_nonzero_cast(ctx);
  clb_context_free(ctx);
  return clb_test_finish("graph/fuse");
}
