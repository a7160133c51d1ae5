/* graph.c: a minimal graph program: a linear model trained on batches whose
 * size changes every step, one plan and no recompiles.
 * Build: cc graph.c $(pkg-config --cflags --libs clbound) */
#include <stdio.h>

#include <clbound/clbound.h>

#define TRY(call)                                                                  \
  do {                                                                             \
    clb_status st_ = (call);                                                       \
    if (st_ != CLB_OK) {                                                           \
      fprintf(stderr, "%s: %s: %s\n", #call, clb_status_str(st_), clb_context_errmsg(ctx)); \
      clb_graph_free(g);                                                           \
      clb_context_free(ctx);                                                       \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

int main(void) {
  clb_context_t ctx = NULL;
  clb_graph_t g = NULL;
  clb_status st = clb_context_new(NULL, &ctx);
  if (st != CLB_OK) {
    fprintf(stderr, "no OpenCL device: %s\n", clb_last_errmsg());
    return st == CLB_ERR_NO_DEVICE ? 77 : 1;
  }
  /* y = x W^T + b, MSE against t; x has up to 256 rows of 3 */
  clb_graph_options opts;
  clb_graph_options_init(&opts);
  opts.policy = CLB_POLICY_DYNAMIC;
  opts.name = "regression";
  TRY(clb_graph_new(ctx, &opts, &g));
  const int64_t xb[2] = {256, 3}, tb[2] = {256, 1}, wd[2] = {1, 3}, bd[1] = {1};
  const uint8_t dyn[2] = {1, 0};
  clb_node x, t, w, b, y, loss;
  TRY(clb_graph_input(g, "x", CLB_DTYPE_F32, 2, xb, dyn, &x));
  TRY(clb_graph_input(g, "t", CLB_DTYPE_F32, 2, tb, dyn, &t));
  TRY(clb_graph_param(g, "w", CLB_DTYPE_F32, 2, wd, NULL, 0, 1, &w));
  TRY(clb_graph_param(g, "b", CLB_DTYPE_F32, 1, bd, NULL, 0, 1, &b));
  TRY(clb_graph_linear(g, x, w, b, &y));
  TRY(clb_graph_loss(g, CLB_LOSS_MSE, y, t, &loss));
  TRY(clb_graph_train(g, loss, 0.1, 0.5));
  /* the target function: t = 2 x0 - x1 + 0.5 x2 + 1 */
  static float xs[256 * 3], ts[256];
  float first = 0, last = 0;
  for (int step = 0; step < 200; step++) {
    int64_t n = 1 + (step * 37) % 256;
    for (int64_t i = 0; i < n; i++) {
      for (int k = 0; k < 3; k++) xs[i * 3 + k] = (float)(((i + step) * (k + 3)) % 17) / 8.0f - 1.0f;
      ts[i] = 2 * xs[i * 3] - xs[i * 3 + 1] + 0.5f * xs[i * 3 + 2] + 1;
    }
    const int64_t xd[2] = {n, 3}, td[2] = {n, 1};
    TRY(clb_graph_feed(g, x, xd, xs, sizeof(float) * (size_t)(n * 3)));
    TRY(clb_graph_feed(g, t, td, ts, sizeof(float) * (size_t)n));
    TRY(clb_graph_run(g));
    if (step == 0 || step == 199)
      TRY(clb_tensor_read(ctx, clb_graph_tensor(g, loss), NULL, step ? &last : &first, sizeof(float), NULL));
  }
  float wv[3], bv[1];
  TRY(clb_tensor_read(ctx, clb_graph_tensor(g, w), NULL, wv, sizeof wv, NULL));
  TRY(clb_tensor_read(ctx, clb_graph_tensor(g, b), NULL, bv, sizeof bv, NULL));
  clb_graph_stats s;
  s.struct_size = sizeof s;
  TRY(clb_graph_stats_get(g, &s));
  printf("loss %.5f -> %.6f; w = [%.3f, %.3f, %.3f], b = %.3f (want 2, -1, 0.5 and 1)\n", first, last, wv[0], wv[1], wv[2], bv[0]);
  printf("200 steps, 200 batch sizes: %llu plan, %llu host syncs by the graph\n", (unsigned long long)s.plans_compiled,
         (unsigned long long)s.host_syncs);
  int ok = last < 1e-3f && s.plans_compiled == 1 && wv[0] > 1.95f && wv[0] < 2.05f && bv[0] > 0.95f && bv[0] < 1.05f;
  clb_graph_free(g);
  clb_context_free(ctx);
  return ok ? 0 : 1;
}
