/* test-views.c: views and device exports of a graph's tensors keep their data
 * (docs/graph.md, "Views of a graph's tensors"). Under every policy, with the
 * memory plan on and off, on the whole-step path, op by op and with recorded
 * steps: a reshape view (and a view of that view) of a graph output made after
 * one run still reads that run's values and sizes after the next runs (a
 * larger input, then one of the first run's shape), a device DLPack export
 * holds them too, the graph's own output holds the new values, and a view
 * outlives clb_graph_free. In a training graph in phases, a view of a
 * parameter taken between CLB_PHASE_GRADS and the update keeps the value
 * from before the update. Before the fix the views read the next run's data
 * with their old sizes (issue 30, item 1). */
#define _POSIX_C_SOURCE 200809L
#include <CL/cl.h>
#include <stdio.h>

#include "cl-test.h"
#include "clbound/interop.h"

/* Feeds n elements v as [n] or, for a 2-d input, [n, 1]. */
static void feed(clb_context_t ctx, clb_graph_t g, clb_node x, int64_t n, float v) {
  float h[8];
  for (int i = 0; i < 8; i++) h[i] = v;
  const int64_t dims[2] = {n, 1};
  CL_OK(ctx, clb_graph_feed(g, x, dims, h, (size_t)n * sizeof(float)));
}

/* t holds n elements, each v. */
static void expect_all(clb_context_t ctx, clb_tensor_t t, int64_t n, float v, const char *what) {
  float h[8] = {0};
  int64_t dims[1] = {-1};
  clb_status st = clb_tensor_read(ctx, t, dims, h, sizeof h, NULL);
  clb_test_checks++;
  if (st != CLB_OK) {
    CLB_FAIL_AT("%s: clb_tensor_read: %s: %s", what, clb_status_name(st), clb_context_errmsg(ctx));
    return;
  }
  if (dims[0] != n) CLB_FAIL_AT("%s: %lld elements, want %lld", what, (long long)dims[0], (long long)n);
  for (int64_t i = 0; i < n && i < dims[0]; i++)
    if (h[i] != v) {
      CLB_FAIL_AT("%s: element %lld is %g, want %g", what, (long long)i, h[i], v);
      break;
    }
}

/* The export's cl_mem holds n elements v (read directly, as a consumer would). */
static void expect_export(clb_context_t ctx, struct DLManagedTensorVersioned *e, int64_t n, float v, const char *what) {
  float h[8] = {0};
  clb_test_checks++;
  if (e->dl_tensor.shape[0] != n) CLB_FAIL_AT("%s: export shape %lld, want %lld", what, (long long)e->dl_tensor.shape[0], (long long)n);
  cl_int err = clEnqueueReadBuffer(clb_context_cl_queue(ctx), (cl_mem)e->dl_tensor.data, CL_TRUE, 0, (size_t)n * sizeof(float), h, 0,
                                   NULL, NULL);
  if (err != CL_SUCCESS) {
    CLB_FAIL_AT("%s: clEnqueueReadBuffer: %d", what, err);
    return;
  }
  for (int64_t i = 0; i < n; i++)
    if (h[i] != v) {
      CLB_FAIL_AT("%s: export element %lld is %g, want %g", what, (long long)i, h[i], v);
      break;
    }
}

static clb_graph_t new_graph(clb_context_t ctx, clb_policy_kind pol, int plan) {
  clb_graph_options o;
  clb_graph_options_init(&o);
  o.policy = pol;
  o.memory_plan = plan;
  clb_graph_t g = NULL;
  CL_OK(ctx, clb_graph_new(ctx, &o, &g));
  return g;
}

static const char *const policy_names[] = {"static", "automatic", "dynamic", "bucketed"};

static void inference(clb_context_t ctx, clb_policy_kind pol, int plan, const char *mode) {
  CLB_TEST_CASE("%s policy, memory plan %s, %s", policy_names[pol], plan ? "on" : "off", mode);
  char what[128];
  snprintf(what, sizeof what, "%s/%s/%s", policy_names[pol], plan ? "plan" : "pool", mode);
  clb_graph_t g = new_graph(ctx, pol, plan);
  const int64_t b = 8, spec = -1, spec2[2] = {-1, 1};
  const uint8_t dyn = 1;
  clb_node x, y;
  CL_OK(ctx, clb_graph_input(g, "x", CLB_DTYPE_F32, 1, &b, &dyn, &x));
  CL_OK(ctx, clb_graph_unary(g, CLB_UNARY_RELU, x, &y));
  /* run 1: 4 ones; a view, a view of the view, an export */
  feed(ctx, g, x, 4, 1.0f);
  CL_OK(ctx, clb_graph_run(g));
  clb_tensor_t v = NULL, vv = NULL;
  CL_OK(ctx, clb_reshape(ctx, clb_graph_tensor(g, y), 1, &spec, &v));
  CL_OK(ctx, clb_reshape(ctx, v, 2, spec2, &vv));
  struct DLManagedTensorVersioned *e = NULL;
  CL_OK(ctx, clb_tensor_to_dlpack_device(ctx, clb_graph_tensor(g, y), &e));
  /* run 2: 6 twos (another plan under static and automatic) */
  feed(ctx, g, x, 6, 2.0f);
  CL_OK(ctx, clb_graph_run(g));
  expect_all(ctx, clb_graph_tensor(g, y), 6, 2.0f, what);
  expect_all(ctx, v, 4, 1.0f, what);
  expect_all(ctx, vv, 4, 1.0f, what);
  expect_export(ctx, e, 4, 1.0f, what);
  /* run 3: 4 threes, the first run's shape (its plan and buffers again) */
  feed(ctx, g, x, 4, 3.0f);
  CL_OK(ctx, clb_graph_run(g));
  expect_all(ctx, clb_graph_tensor(g, y), 4, 3.0f, what);
  expect_all(ctx, v, 4, 1.0f, what);
  expect_all(ctx, vv, 4, 1.0f, what);
  expect_export(ctx, e, 4, 1.0f, what);
  /* a view outlives the graph */
  clb_tensor_t w = NULL;
  CL_OK(ctx, clb_reshape(ctx, clb_graph_tensor(g, y), 1, &spec, &w));
  clb_graph_free(g);
  clb_tensor_t other = NULL; /* takes whatever the graph gave back */
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &b, NULL, &other));
  CL_OK(ctx, clb_fill(ctx, other, 9.0));
  expect_all(ctx, w, 4, 3.0f, what);
  expect_all(ctx, v, 4, 1.0f, what);
  clb_tensor_free(other);
  clb_tensor_free(w);
  clb_tensor_free(vv);
  clb_tensor_free(v);
  e->deleter(e);
}

/* A view of a parameter taken between the phases keeps the value from before
 * the update; the graph's parameter moves on. */
static void training(clb_context_t ctx, int plan) {
  CLB_TEST_CASE("training in phases, memory plan %s", plan ? "on" : "off");
  clb_graph_t g = new_graph(ctx, CLB_POLICY_DYNAMIC, plan);
  const int64_t xb[2] = {8, 1}, wd[2] = {1, 1}, bd[1] = {1}, spec = -1;
  const uint8_t dyn[2] = {1, 0};
  const float w0 = 0.5f, b0 = 0.0f;
  clb_node x, t, w, bias, yy, loss;
  CL_OK(ctx, clb_graph_input(g, "x", CLB_DTYPE_F32, 2, xb, dyn, &x));
  CL_OK(ctx, clb_graph_input(g, "t", CLB_DTYPE_F32, 2, xb, dyn, &t));
  CL_OK(ctx, clb_graph_param(g, "w", CLB_DTYPE_F32, 2, wd, &w0, sizeof w0, 1, &w));
  CL_OK(ctx, clb_graph_param(g, "b", CLB_DTYPE_F32, 1, bd, &b0, sizeof b0, 1, &bias));
  CL_OK(ctx, clb_graph_linear(g, x, w, bias, &yy));
  CL_OK(ctx, clb_graph_loss(g, CLB_LOSS_MSE, yy, t, &loss));
  CL_OK(ctx, clb_graph_train(g, loss, 0.1, 0.0));
  feed(ctx, g, x, 4, 1.0f);
  feed(ctx, g, t, 4, 3.0f);
  CL_OK(ctx, clb_graph_run_phase(g, CLB_PHASE_GRADS));
  clb_tensor_t v = NULL;
  CL_OK(ctx, clb_reshape(ctx, clb_graph_tensor(g, w), 1, &spec, &v));
  CL_OK(ctx, clb_graph_run_phase(g, CLB_PHASE_UPDATE));
  /* d/dw mean((w x + b - t)^2) = 2 (0.5 - 3) = -5: w = 0.5 + 0.1 * 5 = 1 */
  expect_all(ctx, v, 1, 0.5f, "view of w");
  clb_tensor_t now = NULL;
  CL_OK(ctx, clb_reshape(ctx, clb_graph_tensor(g, w), 1, &spec, &now));
  expect_all(ctx, now, 1, 1.0f, "w after the update");
  clb_tensor_free(now);
  clb_graph_free(g);
  expect_all(ctx, v, 1, 0.5f, "view of w after clb_graph_free");
  clb_tensor_free(v);
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  clb_context_free(ctx);
  static const char *const modes[3] = {"whole-step", "op by op", "recorded"};
  for (int m = 0; m < 3; m++) {
    setenv("CLBOUND_FUSE", m == 1 ? "off" : "on", 1);
    setenv("CLBOUND_PLAN_PROGRAMS", m == 1 ? "off" : "on", 1);
    setenv("CLBOUND_RECORD", m == 2 ? "on" : "off", 1);
    ctx = clb_test_context(NULL);
    for (int p = 0; p < 4; p++)
      for (int plan = 0; plan < 2; plan++) inference(ctx, (clb_policy_kind)p, plan, modes[m]);
    if (m == 0)
      for (int plan = 0; plan < 2; plan++) training(ctx, plan);
    clb_context_free(ctx);
  }
  return clb_test_finish("graph/views");
}
