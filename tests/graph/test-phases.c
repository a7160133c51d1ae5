/* test-phases.c: a training step split in phases (clb_graph_run_phase): GRADS
 * then UPDATE equals clb_graph_run bit for bit, with fusion on and off (the
 * caller sets CLBOUND_FUSE); the gradients between the phases equal a host
 * computation; a gradient rewritten between them is what the update uses;
 * DISCARD changes nothing; the grad hook's order; phases out of order are refused. */
#define _POSIX_C_SOURCE 200809L
#include "cl-test.h"

/* y = x W^T + b, MSE against t: x [<=6, 3] dynamic rows, W [2, 3], b [2]. */
typedef struct model {
  clb_graph_t g;
  clb_node x, t, w, b, loss;
} model;

static const float W0[6] = {0.2f, -0.1f, 0.4f, 0.3f, 0.25f, -0.35f}, B0[2] = {0.05f, -0.02f};
static const float XS[12] = {1, 2, -1, 0.5f, -0.5f, 2, 3, 1, 0, -2, 1, 1}, TS[8] = {1, 0, 0, 1, 2, -1, 0.5f, 0.5f};

static model build(clb_context_t ctx) {
  model m;
  const int64_t xb[2] = {6, 3}, tb[2] = {6, 2}, wd[2] = {2, 3}, bd[1] = {2};
  const uint8_t dyn[2] = {1, 0};
  clb_node y;
  CL_OK(ctx, clb_graph_new(ctx, NULL, &m.g));
  CL_OK(ctx, clb_graph_input(m.g, "x", CLB_DTYPE_F32, 2, xb, dyn, &m.x));
  CL_OK(ctx, clb_graph_input(m.g, "t", CLB_DTYPE_F32, 2, tb, dyn, &m.t));
  CL_OK(ctx, clb_graph_param(m.g, "w", CLB_DTYPE_F32, 2, wd, W0, sizeof W0, 1, &m.w));
  CL_OK(ctx, clb_graph_param(m.g, "b", CLB_DTYPE_F32, 1, bd, B0, sizeof B0, 1, &m.b));
  CL_OK(ctx, clb_graph_linear(m.g, m.x, m.w, m.b, &y));
  CL_OK(ctx, clb_graph_loss(m.g, CLB_LOSS_MSE, y, m.t, &m.loss));
  CL_OK(ctx, clb_graph_train(m.g, m.loss, 0.1, 0.0));
  CL_OK(ctx, clb_graph_keep(m.g, m.t)); /* for clb_graph_loss_count under the memory plan */
  return m;
}

static void feed(clb_context_t ctx, model *m, int64_t n) {
  const int64_t xd[2] = {n, 3}, td[2] = {n, 2};
  CL_OK(ctx, clb_graph_feed(m->g, m->x, xd, XS, (size_t)n * 3 * sizeof(float)));
  CL_OK(ctx, clb_graph_feed(m->g, m->t, td, TS, (size_t)n * 2 * sizeof(float)));
}

static void read(clb_context_t ctx, clb_tensor_t t, float *out, size_t n) {
  CL_OK(ctx, clb_tensor_read(ctx, t, NULL, out, n * sizeof(float), NULL));
}

typedef struct hook_log {
  int n;
  clb_node nodes[8];
  int64_t target_numel;
  clb_context_t ctx;
} hook_log;

static clb_status on_grad(void *user, clb_node node, clb_tensor_t t) {
  hook_log *h = user;
  if (h->n < 8) h->nodes[h->n] = node;
  h->n++;
  if (h->n == 1) h->target_numel = clb_tensor_bound_numel(t);
  return CLB_OK;
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  model a = build(ctx), b = build(ctx);
  const int64_t sizes[4] = {4, 1, 3, 4};
  for (int s = 0; s < 4; s++) {
    CLB_TEST_CASE("step %d (%lld rows): GRADS + UPDATE against clb_graph_run", s, (long long)sizes[s]);
    feed(ctx, &a, sizes[s]);
    feed(ctx, &b, sizes[s]);
    CL_OK(ctx, clb_graph_run(a.g));
    float w_before[6], b_before[2];
    read(ctx, clb_graph_tensor(b.g, b.w), w_before, 6);
    read(ctx, clb_graph_tensor(b.g, b.b), b_before, 2);
    CL_OK(ctx, clb_graph_run_phase(b.g, CLB_PHASE_GRADS));
    /* the gradients between the phases, against the host in double */
    const int64_t n = sizes[s];
    double gw[6] = {0}, gb[2] = {0};
    for (int64_t r = 0; r < n; r++)
      for (int j = 0; j < 2; j++) {
        double y = b_before[j];
        for (int k = 0; k < 3; k++) y += (double)XS[r * 3 + k] * w_before[j * 3 + k];
        double dy = 2.0 * (y - TS[r * 2 + j]) / (double)(n * 2);
        gb[j] += dy;
        for (int k = 0; k < 3; k++) gw[j * 3 + k] += dy * XS[r * 3 + k];
      }
    clb_tensor_t tw, tb;
    CL_OK(ctx, clb_graph_grad(b.g, b.w, &tw));
    CL_OK(ctx, clb_graph_grad(b.g, b.b, &tb));
    float fw[6], fb[2];
    read(ctx, tw, fw, 6);
    read(ctx, tb, fb, 2);
    for (int i = 0; i < 6; i++) EXPECT_TRUE(fabs(fw[i] - gw[i]) <= 1e-5 * (1 + fabs(gw[i])));
    for (int i = 0; i < 2; i++) EXPECT_TRUE(fabs(fb[i] - gb[i]) <= 1e-5 * (1 + fabs(gb[i])));
    int64_t count = -1;
    CL_OK(ctx, clb_graph_loss_count(b.g, &count));
    EXPECT_EQ_I(count, n * 2);
    /* a second GRADS before the update is refused */
    EXPECT_STATUS(ctx, clb_graph_run_phase(b.g, CLB_PHASE_GRADS), CLB_ERR_INVALID_ARG, "CLB_PHASE_UPDATE");
    CL_OK(ctx, clb_graph_run_phase(b.g, CLB_PHASE_UPDATE));
    float wa[6], wb[6], ba[2], bb[2];
    read(ctx, clb_graph_tensor(a.g, a.w), wa, 6);
    read(ctx, clb_graph_tensor(b.g, b.w), wb, 6);
    read(ctx, clb_graph_tensor(a.g, a.b), ba, 2);
    read(ctx, clb_graph_tensor(b.g, b.b), bb, 2);
    EXPECT_TRUE(memcmp(wa, wb, sizeof wa) == 0);
    EXPECT_TRUE(memcmp(ba, bb, sizeof ba) == 0);
    EXPECT_TRUE(memcmp(wb, w_before, sizeof wb) != 0);
  }

  CLB_TEST_CASE("a gradient rewritten between the phases is the one applied");
  {
    float w0[6], w1[6], ones[6] = {1, 1, 1, 1, 1, 1};
    const int64_t wd[2] = {2, 3};
    read(ctx, clb_graph_tensor(b.g, b.w), w0, 6);
    CL_OK(ctx, clb_graph_run_phase(b.g, CLB_PHASE_GRADS));
    clb_tensor_t tw;
    CL_OK(ctx, clb_graph_grad(b.g, b.w, &tw));
    CL_OK(ctx, clb_tensor_write(ctx, tw, wd, ones, sizeof ones));
    CL_OK(ctx, clb_graph_run_phase(b.g, CLB_PHASE_UPDATE));
    read(ctx, clb_graph_tensor(b.g, b.w), w1, 6);
    for (int i = 0; i < 6; i++) EXPECT_TRUE(fabsf(w1[i] - (w0[i] - 0.1f)) <= 1e-6f);
  }

  CLB_TEST_CASE("DISCARD ends the step without an update");
  {
    float w0[6], w1[6];
    read(ctx, clb_graph_tensor(b.g, b.w), w0, 6);
    CL_OK(ctx, clb_graph_run_phase(b.g, CLB_PHASE_GRADS));
    CL_OK(ctx, clb_graph_run_phase(b.g, CLB_PHASE_DISCARD));
    read(ctx, clb_graph_tensor(b.g, b.w), w1, 6);
    EXPECT_TRUE(memcmp(w0, w1, sizeof w0) == 0);
    clb_tensor_t tw;
    EXPECT_STATUS(ctx, clb_graph_grad(b.g, b.w, &tw), CLB_ERR_INVALID_ARG, "CLB_PHASE_GRADS");
    EXPECT_STATUS(ctx, clb_graph_run_phase(b.g, CLB_PHASE_UPDATE), CLB_ERR_INVALID_ARG, "no step");
    EXPECT_STATUS(ctx, clb_graph_run_phase(b.g, CLB_PHASE_DISCARD), CLB_ERR_INVALID_ARG, "no step");
    CL_OK(ctx, clb_graph_run(b.g)); /* and a whole step runs again */
    int64_t count = -1;
    CL_OK(ctx, clb_graph_loss_count(b.g, &count)); /* after a whole step too */
    EXPECT_EQ_I(count, 8);
  }

  CLB_TEST_CASE("params in backward order; the hook sees the target, then each gradient");
  {
    clb_node p[4];
    int np = 0;
    CL_OK(ctx, clb_graph_params(b.g, p, 4, &np));
    EXPECT_EQ_I(np, 2);
    EXPECT_EQ_I(p[0], b.b); /* declared after w: its gradient is complete first */
    EXPECT_EQ_I(p[1], b.w);
    hook_log h = {0};
    CL_OK(ctx, clb_graph_set_grad_hook(b.g, on_grad, &h));
    CL_OK(ctx, clb_graph_run(b.g)); /* not called by a whole step */
    EXPECT_EQ_I(h.n, 0);
    CL_OK(ctx, clb_graph_run_phase(b.g, CLB_PHASE_GRADS));
    CL_OK(ctx, clb_graph_run_phase(b.g, CLB_PHASE_UPDATE));
    EXPECT_EQ_I(h.n, 3);
    EXPECT_EQ_I(h.nodes[0], b.loss);
    EXPECT_EQ_I(h.target_numel, 12); /* t's bound [6, 2] */
    EXPECT_EQ_I(h.nodes[1], b.b);
    EXPECT_EQ_I(h.nodes[2], b.w);
    CL_OK(ctx, clb_graph_set_grad_hook(b.g, NULL, NULL));
  }

  CLB_TEST_CASE("a graph that does not train has no phases");
  {
    clb_graph_t g = NULL;
    const int64_t d[1] = {4};
    clb_node x, y;
    CL_OK(ctx, clb_graph_new(ctx, NULL, &g));
    CL_OK(ctx, clb_graph_input(g, "x", CLB_DTYPE_F32, 1, d, NULL, &x));
    CL_OK(ctx, clb_graph_unary(g, CLB_UNARY_RELU, x, &y));
    EXPECT_STATUS(ctx, clb_graph_run_phase(g, CLB_PHASE_GRADS), CLB_ERR_INVALID_ARG, "does not train");
    int np = 0;
    EXPECT_STATUS(ctx, clb_graph_params(g, NULL, 0, &np), CLB_ERR_INVALID_ARG, "does not train");
    clb_graph_free(g);
  }
  clb_graph_free(a.g);
  clb_graph_free(b.g);
  clb_context_free(ctx);
  return clb_test_finish("graph/phases");
}
