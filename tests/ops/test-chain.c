/* test-chain.c: nonzero -> cast -> elementwise -> sum -> masked_select -> sum with
 * sizes that change every call: zero host syncs and no program builds until
 * the caller reads the results, in both kernel styles. */
#include "ops-test.h"

static uint64_t launches_of(clb_context_t ctx) {
  clb_counters c;
  c.struct_size = sizeof c;
  clb_context_counters(ctx, &c);
  return c.kernel_launches;
}

static void run_chain(clb_kernel_style style) {
  clb_context_t ctx = ops_context(style);
  int64_t xb[2] = {64, 8}, kb[1] = {2};
  uint8_t xd[2] = {1, 0};
  clb_tensor_t x = NULL, k = NULL, idx = NULL, c = NULL, e = NULL, s1 = NULL, mask = NULL, sel = NULL, s2 = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, xb, xd, &x));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, kb, NULL, &k));
  double kv[2] = {10, 3};
  clb_test_write(ctx, k, kb, kv);
  static const int64_t rows[] = {50, 64, 1, 0, 33, 17, 64, 2};
  uint64_t builds_after_first = 0;
  for (size_t it = 0; it < sizeof rows / sizeof rows[0]; it++) {
    int64_t dims[2] = {rows[it], 8};
    double xv[512];
    ops_gen(CLB_DTYPE_F32, rows[it] * 8, 0.4 + 0.05 * (double)it, xv);
    ops_roundtrip(CLB_DTYPE_F32, xv, rows[it] * 8);
    clb_test_write(ctx, x, dims, xv);
    /* reference */
    double r1 = 0, r2 = 0;
    int64_t cnt = 0;
    for (int64_t i = 0; i < rows[it] * 8; i++) {
      if (!ops_nz(xv[i])) continue;
      double rc[2] = {(double)(i / 8), (double)(i % 8)};
      for (int d = 0; d < 2; d++) {
        double ev = rc[d] - kv[d];
        r1 += ev;
        if (ev != 0) r2 += rc[d];
      }
      cnt++;
    }
    uint64_t syncs = clb_test_counter_syncs(ctx), l0 = launches_of(ctx);
    CL_OK(ctx, clb_nonzero(ctx, x, &idx));
    CL_OK(ctx, clb_cast(ctx, idx, CLB_DTYPE_F32, &c));
    CL_OK(ctx, clb_sub(ctx, c, k, &e));
    CL_OK(ctx, clb_reduce_all(ctx, CLB_REDUCE_SUM, e, &s1));
    CL_OK(ctx, clb_cast(ctx, e, CLB_DTYPE_BOOL, &mask));
    CL_OK(ctx, clb_masked_select(ctx, c, mask, &sel));
    CL_OK(ctx, clb_reduce_all(ctx, CLB_REDUCE_SUM, sel, &s2));
    EXPECT_EQ_I(clb_test_counter_syncs(ctx) - syncs, 0);
    /* one launch per data-dependent op on these small masks (three when forced) */
    const uint64_t per_sel = ops_select_launches();
    EXPECT_EQ_I(launches_of(ctx) - l0, per_sel + 1 + 1 + 2 + 1 + per_sel + 2);
    if (it == 0) builds_after_first = clb_test_counter_builds(ctx);
    EXPECT_EQ_I(clb_test_counter_builds(ctx), builds_after_first);
    float g1 = 0, g2 = 0;
    int64_t d[2];
    CL_OK(ctx, clb_tensor_read(ctx, s1, NULL, &g1, sizeof g1, NULL));
    CL_OK(ctx, clb_tensor_read(ctx, s2, NULL, &g2, sizeof g2, NULL));
    CL_OK(ctx, clb_tensor_sizes(ctx, idx, d));
    /* the reads are the syncs: the counter does count them */
    EXPECT_TRUE(clb_test_counter_syncs(ctx) - syncs >= 3);
    EXPECT_EQ_I(d[0], cnt);
    EXPECT_NEAR(g1, r1);
    EXPECT_NEAR(g2, r2);
  }
  clb_context_free(ctx);
}

int main(void) {
  if (ops_style_runs(CLB_KERNEL_STYLE_CPU, "ops/chain")) run_chain(CLB_KERNEL_STYLE_CPU);
  run_chain(CLB_KERNEL_STYLE_GPU);
  return clb_test_finish("ops/chain");
}
