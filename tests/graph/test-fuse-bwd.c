/* test-fuse-bwd.c: a linear layer's backward with the backward of the ReLU
 * below it (runtime/graph/fuse.c's fuse_bwd; under host BLAS dx with the ReLU's
 * mask, dW and dbias in one native kernel), fused and op by op
 * (CLBOUND_FUSE=off), against a double-precision reference: f32 and f64, every
 * GEMM strategy that runs a graph (host BLAS, clbound's kernel, CLBlast over the
 * bounds), batch sizes 0, 1, 6 and the bound, pre-activations exactly 0
 * (CLB_GRAD_RELU passes no gradient there), NaN never produced; the launches a
 * step saves; and status bits raised from the one native kernel of
 * clb_linear_backward (a bound exceeded, K's that differ). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl-test.h"
#include "clbound/clbound.h"
#include "test.h"

enum { B = 16, IN = 3, H = 4 };

/* z1 = x W1^T + b1, h = relu(z1), z2 = h W2^T + b2 [n, 1], loss = mse(z2, t);
 * SGD at lr 0.5. Every value is a multiple of 1/8 with few bits; the second row
 * of x is zeros, so z1 = b1 there, exactly 0 in two units at the first step (the
 * ReLU's gradient there is 0). */
static const double W1[H * IN] = {0.5, -0.25, 1.0, -0.75, 0.25, 0.5, 0.125, -0.5, 0.375, 1.0, -0.125, 0.25};
static const double B1[H] = {0.0, -0.25, 0.125, 0.0};
static const double W2[H] = {0.5, -1.0, 0.75, 0.25};
static const double B2[1] = {0.125};

typedef struct net {
  clb_graph_t g;
  clb_node x, t, w1, b1, w2, b2, loss;
} net;

static void put(clb_dtype dt, void *dst, const double *src, int n) {
  for (int i = 0; i < n; i++) {
    if (dt == CLB_DTYPE_F64) ((double *)dst)[i] = src[i];
    else ((float *)dst)[i] = (float)src[i];
  }
}

static void build(clb_context_t ctx, clb_dtype dt, net *m) {
  m->g = clb_test_dynamic_graph(ctx, "fuse-bwd", 0);
  const int64_t xd[2] = {B, IN}, td[1] = {B}, w1d[2] = {H, IN}, b1d[1] = {H}, w2d[2] = {1, H}, b2d[1] = {1};
  const uint8_t dyn[2] = {1, 0};
  double buf[H * IN];
  size_t es = dt == CLB_DTYPE_F64 ? 8 : 4;
  clb_node z1, h, z2;
  CL_OK(ctx, clb_graph_input(m->g, "x", dt, 2, xd, dyn, &m->x));
  CL_OK(ctx, clb_graph_input(m->g, "t", dt, 1, td, dyn, &m->t));
  put(dt, buf, W1, H * IN);
  CL_OK(ctx, clb_graph_param(m->g, "w1", dt, 2, w1d, buf, es * H * IN, 1, &m->w1));
  put(dt, buf, B1, H);
  CL_OK(ctx, clb_graph_param(m->g, "b1", dt, 1, b1d, buf, es * H, 1, &m->b1));
  put(dt, buf, W2, H);
  CL_OK(ctx, clb_graph_param(m->g, "w2", dt, 2, w2d, buf, es * H, 1, &m->w2));
  put(dt, buf, B2, 1);
  CL_OK(ctx, clb_graph_param(m->g, "b2", dt, 1, b2d, buf, es, 1, &m->b2));
  CL_OK(ctx, clb_graph_linear(m->g, m->x, m->w1, m->b1, &z1));
  CL_OK(ctx, clb_graph_unary(m->g, CLB_UNARY_RELU, z1, &h));
  CL_OK(ctx, clb_graph_linear(m->g, h, m->w2, m->b2, &z2));
  CL_OK(ctx, clb_graph_loss(m->g, CLB_LOSS_MSE, z2, m->t, &m->loss));
  CL_OK(ctx, clb_graph_train(m->g, m->loss, 0.5, 0.0));
}

/* The reference state: parameters in double, updated step by step. */
typedef struct ref {
  double w1[H * IN], b1[H], w2[H], b2;
  int zeros; /* pre-activations exactly 0 met so far */
} ref;

static double ref_step(ref *r, const double *x, const double *t, int n) {
  double gw1[H * IN] = {0}, gb1[H] = {0}, gw2[H] = {0}, gb2 = 0, loss = 0;
  for (int i = 0; i < n; i++) {
    double z1[H], h[H], z2 = r->b2;
    for (int j = 0; j < H; j++) {
      z1[j] = r->b1[j];
      for (int k = 0; k < IN; k++) z1[j] += x[i * IN + k] * r->w1[j * IN + k];
      h[j] = z1[j] > 0 ? z1[j] : 0;
      r->zeros += z1[j] == 0;
      z2 += h[j] * r->w2[j];
    }
    loss += (z2 - t[i]) * (z2 - t[i]);
    double dz2 = 2 * (z2 - t[i]) / n;
    gb2 += dz2;
    for (int j = 0; j < H; j++) {
      gw2[j] += dz2 * h[j];
      double dz1 = z1[j] > 0 ? dz2 * r->w2[j] : 0; /* CLB_GRAD_RELU: nothing at exactly 0 */
      gb1[j] += dz1;
      for (int k = 0; k < IN; k++) gw1[j * IN + k] += dz1 * x[i * IN + k];
    }
  }
  for (int j = 0; j < H * IN; j++) r->w1[j] -= 0.5 * gw1[j];
  for (int j = 0; j < H; j++) {
    r->b1[j] -= 0.5 * gb1[j];
    r->w2[j] -= 0.5 * gw2[j];
  }
  r->b2 -= 0.5 * gb2;
  return n ? loss / n : NAN;
}

static void read_vals(clb_context_t ctx, clb_dtype dt, clb_tensor_t t, double *out, int n) {
  double raw[H * IN];
  int64_t dims[CLB_MAX_RANK];
  CL_OK(ctx, clb_tensor_read(ctx, t, dims, raw, (size_t)n * (dt == CLB_DTYPE_F64 ? 8 : 4), NULL));
  for (int i = n - 1; i >= 0; i--) out[i] = dt == CLB_DTYPE_F64 ? raw[i] : (double)((float *)raw)[i];
}

static int close_to(clb_dtype dt, double got, double want) {
  if (isnan(want)) return isnan(got);
  return dt == CLB_DTYPE_F64 ? fabs(got - want) <= 1e-12 * fabs(want) + 1e-13 : fabs(got - want) <= 1e-5 * fabs(want) + 1e-6;
}

static void expect_close(clb_dtype dt, const char *what, const char *name, const double *got, const double *want, int n) {
  for (int i = 0; i < n; i++) {
    clb_test_checks++;
    if (!close_to(dt, got[i], want[i])) {
      CLB_FAIL_AT("%s: %s[%d] %.17g, want %.17g", what, name, i, got[i], want[i]);
      return;
    }
  }
}

static uint64_t launches(clb_context_t ctx) {
  clb_counters c = {.struct_size = sizeof c};
  CL_OK(ctx, clb_context_counters(ctx, &c));
  return c.kernel_launches;
}

static void test_training(int has_fp64) {
  static const clb_gemm_strategy strat[3] = {CLB_GEMM_HOST_BLAS, CLB_GEMM_DEVICE, CLB_GEMM_CLBLAST_BOUND};
  static const char *const sname[3] = {"host-blas", "kernel", "clblast-bound"};
  static const int sizes[] = {6, 0, 1, B, 6};
  for (int d = 0; d < 2; d++) {
    clb_dtype dt = d ? CLB_DTYPE_F64 : CLB_DTYPE_F32;
    if (d && !has_fp64) {
      printf("graph/fuse-bwd: f64 skipped: the device has no cl_khr_fp64\n");
      continue;
    }
    /* one context for every strategy, as a user switching strategies has: a
     * like plan under the next strategy finds the (file, options) pairs of the
     * last plan's program, which holds only the kernels that plan launched */
    clb_context_t ctx = clb_test_context(NULL);
    for (int s = 0; s < 3; s++) {
      CL_OK(ctx, clb_context_set_gemm_strategy(ctx, strat[s]));
      /* what runs: host-blas asked for where it cannot run is the kernel */
      const int eff = clb_context_gemm_strategy(ctx), host_blas = eff == CLB_GEMM_HOST_BLAS;
      net m[2];
      for (int fuse = 0; fuse < 2; fuse++) {
        setenv("CLBOUND_FUSE", fuse ? "on" : "off", 1);
        build(ctx, dt, &m[fuse]);
      }
      ref r;
      memcpy(r.w1, W1, sizeof W1);
      memcpy(r.b1, B1, sizeof B1);
      memcpy(r.w2, W2, sizeof W2);
      r.b2 = B2[0];
      r.zeros = 0;
      uint64_t per_step[2] = {0, 0};
      for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int n = sizes[k];
        double x[B * IN], t[B];
        for (int i = 0; i < n * IN; i++) x[i] = i / IN == 1 ? 0.0 : 0.25 * (double)((i * 5) % 9) - 1.0; /* -1 .. 1 by 1/4 */
        for (int i = 0; i < n; i++) t[i] = 0.125 * (double)(i % 5) - 0.25;
        const double want_loss = ref_step(&r, x, t, n);
        char xb[B * IN * 8], tb[B * 8];
        put(dt, xb, x, n * IN);
        put(dt, tb, t, n);
        const int64_t xd[2] = {n, IN}, td[1] = {n};
        size_t es = dt == CLB_DTYPE_F64 ? 8 : 4;
        for (int fuse = 0; fuse < 2; fuse++) {
          setenv("CLBOUND_FUSE", fuse ? "on" : "off", 1);
          net *q = &m[fuse];
          char what[160];
          snprintf(what, sizeof what, "%s %s %s, %d rows", clb_dtype_name(dt), sname[s], fuse ? "fused" : "op by op", n);
          CL_OK(ctx, clb_graph_feed(q->g, q->x, xd, xb, es * (size_t)(n * IN)));
          CL_OK(ctx, clb_graph_feed(q->g, q->t, td, tb, es * (size_t)n));
          uint64_t l0 = launches(ctx);
          CL_OK(ctx, clb_graph_run(q->g));
          if (k == 3) per_step[fuse] = launches(ctx) - l0; /* a warm step at the bound */
          double lv, w1[H * IN], b1[H], w2[H], b2;
          read_vals(ctx, dt, clb_graph_tensor(q->g, q->loss), &lv, 1);
          read_vals(ctx, dt, clb_graph_tensor(q->g, q->w1), w1, H * IN);
          read_vals(ctx, dt, clb_graph_tensor(q->g, q->b1), b1, H);
          read_vals(ctx, dt, clb_graph_tensor(q->g, q->w2), w2, H);
          read_vals(ctx, dt, clb_graph_tensor(q->g, q->b2), &b2, 1);
          expect_close(dt, what, "loss", &lv, &want_loss, 1);
          expect_close(dt, what, "w1", w1, r.w1, H * IN);
          expect_close(dt, what, "b1", b1, r.b1, H);
          expect_close(dt, what, "w2", w2, r.w2, H);
          expect_close(dt, what, "b2", &b2, &r.b2, 1);
        }
      }
      /* the data reaches the ReLU's kink: the case the mask must get right */
      EXPECT_TRUE(r.zeros > 0);
      clb_graph_stats st = {.struct_size = sizeof st};
      setenv("CLBOUND_FUSE", "on", 1);
      CL_OK(ctx, clb_graph_stats_get(m[1].g, &st));
      EXPECT_EQ_I(st.fused_backward_relus, 1);
      /* op by op, a step is: linear + relu, linear, the loss, its gradient,
       * linear_backward (dx, dW, dbias), relu_backward, linear_backward (dW,
       * dbias), SGD per parameter. Fused, the ReLU is the first GEMM's epilogue,
       * the four SGD steps one kernel, and under host BLAS relu_backward is in
       * the second layer's native kernel, both layers' backwards and the SGD
       * steps are that one native kernel (3 products, 4 SGD steps), and both
       * forward products one: 1 + 3 + 1 + 1 + 1 + 1 launches fewer. Under the
       * other strategies relu_backward stays a launch after the product, and
       * CLBlast has no epilogue (the ReLU stays a launch after it too). */
      clb_test_checks++;
      const uint64_t saved = per_step[0] - per_step[1], want = host_blas ? 8 : eff == CLB_GEMM_DEVICE ? 4 : 3;
      if (saved != want)
        CLB_FAIL_AT("%s %s: a fused step makes %llu launches, op by op %llu: %llu fewer, want %llu", clb_dtype_name(dt),
                    sname[s], (unsigned long long)per_step[1], (unsigned long long)per_step[0], (unsigned long long)saved,
                    (unsigned long long)want);
      clb_graph_free(m[0].g);
      clb_graph_free(m[1].g);
    }
    clb_context_free(ctx);
  }
  setenv("CLBOUND_FUSE", "on", 1);
}

/* clb_linear_backward under host BLAS is one native kernel for dx, dW and
 * dbias: a record past its bound, and K's that differ, raised there reach the
 * next sync naming the op. */
static void test_status(clb_context_t ctx) {
  CL_OK(ctx, clb_context_set_gemm_strategy(ctx, CLB_GEMM_HOST_BLAS));
  if (clb_context_gemm_strategy(ctx) != CLB_GEMM_HOST_BLAS) {
    printf("graph/fuse-bwd: status bits of the host-BLAS native kernel skipped: host BLAS cannot run here\n");
    CL_OK(ctx, clb_context_set_gemm_strategy(ctx, CLB_GEMM_AUTO));
    return;
  }
  const int64_t xb[2] = {B, IN}, wb[2] = {H, IN}, yb[2] = {B, H};
  const uint8_t dyn[2] = {1, 0};
  for (int c = 0; c < 2; c++) {
    clb_tensor_t x = NULL, w = NULL, dy = NULL, dx = NULL, dw = NULL, db = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, xb, dyn, &x));
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, wb, NULL, &w));
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, yb, dyn, &dy));
    /* case 0: dy has 40 rows of a bound of 16; case 1: x has 5 rows, dy 7 */
    int64_t xr[2] = {c ? 5 : 4, IN}, yr[2] = {c ? 7 : 40, H};
    cl_command_queue q = clb_context_cl_queue(ctx);
    REQUIRE_TRUE(clEnqueueWriteBuffer(q, clb_tensor_shape_mem(x), CL_TRUE, 0, sizeof xr, xr, 0, NULL, NULL) == CL_SUCCESS);
    REQUIRE_TRUE(clEnqueueWriteBuffer(q, clb_tensor_shape_mem(dy), CL_TRUE, 0, sizeof yr, yr, 0, NULL, NULL) == CL_SUCCESS);
    uint64_t l0 = launches(ctx);
    CL_OK(ctx, clb_linear_backward(ctx, x, w, dy, &dx, &dw, &db));
    EXPECT_EQ_I(launches(ctx) - l0, 1);
    if (c == 0)
      EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_BOUND_EXCEEDED, "linear_backward");
    else
      EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DEVICE_CHECK, "linear_backward");
    clb_tensor_t all[] = {x, w, dy, dx, dw, db};
    for (int i = 0; i < 6; i++) clb_tensor_free(all[i]);
  }
  CL_OK(ctx, clb_context_set_gemm_strategy(ctx, CLB_GEMM_AUTO));
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  clb_tensor_t probe = NULL;
  int has_fp64 = clb_tensor_new(ctx, CLB_DTYPE_F64, 0, NULL, NULL, &probe) == CLB_OK;
  clb_tensor_free(probe);
  test_training(has_fp64);
  test_status(ctx);
  clb_context_free(ctx);
  return clb_test_finish("graph/fuse-bwd");
}
