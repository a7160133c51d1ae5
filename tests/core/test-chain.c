/* test-chain.c: a chain of ops over inputs whose actual sizes change on every one
 * of 1,000 calls (40 with reduced sizes, the oclgrind label): no program is built
 * after the first call, and the host never waits for the device until the final
 * read. */
#include "cl-test.h"

#define CALLS 1000
#define ROWS 512
#define COLS 8

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  int64_t xb[2] = {ROWS, COLS}, wb[1] = {COLS};
  uint8_t dyn[2] = {1, 0};
  clb_tensor_t x = NULL, w = NULL, b = NULL, xw = NULL, y = NULL, r = NULL, m = NULL, acc = NULL, acc2 = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, xb, dyn, &x));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, wb, NULL, &w));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, wb, NULL, &b));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 0, NULL, NULL, &acc));
  CL_OK(ctx, clb_fill(ctx, acc, 0));
  double wv[COLS], bv[COLS];
  for (int j = 0; j < COLS; j++) {
    wv[j] = (double)(float)(0.25 + 0.125 * j);
    bv[j] = (double)(float)(-0.5 + 0.25 * (j % 3));
  }
  clb_test_write(ctx, w, wb, wv);
  clb_test_write(ctx, b, wb, bv);
  static float host[ROWS * COLS];
  double want = 0;
  uint64_t builds_after_first = 0, syncs0 = clb_test_counter_syncs(ctx);
  int64_t seen_min = ROWS, seen_max = 0;
  const int calls = clb_test_small() ? 40 : CALLS;
  for (int call = 0; call < calls; call++) {
    int64_t rows = 1 + (int64_t)(clb_test_next() % ROWS);
    if (call == 1) rows = ROWS;
    if (call == 2) rows = 3; /* a small size for sure */
    if (rows < seen_min) seen_min = rows;
    if (rows > seen_max) seen_max = rows;
    for (int64_t i = 0; i < rows * COLS; i++) host[i] = (float)((int64_t)(clb_test_next() % 2001) - 1000) / 500.0f;
    uint64_t before = clb_test_counter_builds(ctx);
    int64_t dims[2] = {rows, COLS};
    CL_OK(ctx, clb_tensor_write(ctx, x, dims, host, sizeof(float) * (size_t)(rows * COLS)));
    CL_OK(ctx, clb_mul(ctx, x, w, &xw));
    CL_OK(ctx, clb_add(ctx, xw, b, &y));
    CL_OK(ctx, clb_unary(ctx, CLB_UNARY_RELU, y, &y));
    CL_OK(ctx, clb_reduce_dim(ctx, CLB_REDUCE_SUM, y, 1, 0, &r));
    CL_OK(ctx, clb_reduce_all(ctx, CLB_REDUCE_MEAN, r, &m));
    CL_OK(ctx, clb_add(ctx, acc, m, &acc2));
    clb_tensor_t t = acc;
    acc = acc2;
    acc2 = t;
    if (call > 0) builds_after_first += clb_test_counter_builds(ctx) - before;
    double total = 0;
    for (int64_t i = 0; i < rows; i++) {
      double s = 0;
      for (int j = 0; j < COLS; j++) {
        double v = (double)(float)((double)host[i * COLS + j] * wv[j]) + bv[j];
        s += v > 0 ? v : 0;
      }
      total += s;
    }
    want += total / (double)rows;
  }
  EXPECT_EQ_I(builds_after_first, 0);
  EXPECT_EQ_I(clb_test_counter_syncs(ctx) - syncs0, 0);
  EXPECT_TRUE(seen_min < 16 && seen_max == ROWS); /* the sizes really changed */
  float got = 0;
  CL_OK(ctx, clb_tensor_read(ctx, acc, NULL, &got, sizeof got, NULL));
  EXPECT_EQ_I(clb_test_counter_syncs(ctx) - syncs0, 1);
  EXPECT_NEAR(got, want);
  clb_context_free(ctx);
  return clb_test_finish("core/chain");
}
