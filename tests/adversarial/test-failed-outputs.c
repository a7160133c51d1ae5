/* test-failed-outputs.c: the output of an op whose device check failed stays
 * marked until it is written again: reading it, or using it as an input,
 * returns the op's error, not its half-made values. Two device errors pending at
 * one sync are both named, each on its own op's output. */
#include "cl-test.h"

static clb_context_t ctx;

static clb_tensor_t vec(clb_dtype dt, int64_t bound, int64_t n, const double *v) {
  int64_t b[1] = {bound}, d[1] = {n};
  uint8_t dyn[1] = {1};
  clb_tensor_t t = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, dt, 1, b, dyn, &t));
  clb_test_write(ctx, t, d, v);
  return t;
}

static const double xs[6] = {0, 1, 2, 3, 4, 5}, ones[6] = {1, 1, 1, 1, 1, 1}, src2[2] = {10, 20};

/* y = masked_scatter(x[6], all-true mask, src[2]): the source is short. */
static clb_tensor_t short_scatter(clb_tensor_t x, clb_tensor_t mask, clb_tensor_t *out) {
  clb_tensor_t src = vec(CLB_DTYPE_F32, 6, 2, src2);
  CL_OK(ctx, clb_masked_scatter(ctx, x, mask, src, out));
  clb_tensor_free(src);
  return *out;
}

static void expect_read_fails(clb_tensor_t t, clb_status want, const char *needle) {
  float buf[64];
  size_t bytes = 0;
  int64_t dims[2];
  EXPECT_STATUS(ctx, clb_tensor_read(ctx, t, dims, buf, sizeof buf, &bytes), want, needle);
  EXPECT_STATUS(ctx, clb_tensor_sizes(ctx, t, dims), want, needle);
}

static void test_marked_until_rewritten(void) {
  clb_tensor_t x = vec(CLB_DTYPE_F32, 6, 6, xs), mask = vec(CLB_DTYPE_BOOL, 6, 6, ones), y = NULL, other = NULL;
  short_scatter(x, mask, &y);
  CL_OK(ctx, clb_unary(ctx, CLB_UNARY_NEG, x, &other)); /* independent of y */
  double got[6];
  /* the next read raises the error (documented) ... */
  float buf[6];
  EXPECT_STATUS(ctx, clb_tensor_read(ctx, x, NULL, buf, sizeof buf, NULL), CLB_ERR_SHORT_SOURCE, "masked_scatter");
  /* ... and y keeps it: every read, sizes too, and as an input */
  expect_read_fails(y, CLB_ERR_SHORT_SOURCE, "the mask selects 6 elements but the source has only 2");
  expect_read_fails(y, CLB_ERR_SHORT_SOURCE, "holds the output of an op that failed");
  clb_tensor_t z = NULL;
  EXPECT_STATUS(ctx, clb_unary(ctx, CLB_UNARY_RELU, y, &z), CLB_ERR_SHORT_SOURCE, "relu: tensor a holds the output");
  EXPECT_TRUE(z == NULL);
  /* an op that did not fail reads as usual */
  EXPECT_EQ_I(clb_test_read(ctx, other, NULL, got, 6), 6);
  for (int i = 0; i < 6; i++) EXPECT_EQ_I(got[i], -xs[i]);
  /* written by the host: the mark is gone */
  int64_t d[1] = {3};
  double w[3] = {7, 8, 9};
  clb_test_write(ctx, y, d, w);
  EXPECT_EQ_I(clb_test_read(ctx, y, NULL, got, 6), 3);
  for (int i = 0; i < 3; i++) EXPECT_EQ_I(got[i], w[i]);
  /* failed again, then rewritten by an op that succeeds */
  short_scatter(x, mask, &y);
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_SHORT_SOURCE, "masked_scatter");
  expect_read_fails(y, CLB_ERR_SHORT_SOURCE, "masked_scatter");
  clb_tensor_t src6 = vec(CLB_DTYPE_F32, 6, 6, xs);
  CL_OK(ctx, clb_masked_scatter(ctx, x, mask, src6, &y));
  EXPECT_EQ_I(clb_test_read(ctx, y, NULL, got, 6), 6);
  for (int i = 0; i < 6; i++) EXPECT_EQ_I(got[i], xs[i]);
  /* a failed op whose output the host rewrites before the sync: not marked */
  short_scatter(x, mask, &y);
  clb_test_write(ctx, y, d, w);
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_SHORT_SOURCE, "masked_scatter");
  EXPECT_EQ_I(clb_test_read(ctx, y, NULL, got, 6), 3);
  for (int i = 0; i < 3; i++) EXPECT_EQ_I(got[i], w[i]);
  clb_tensor_free(src6);
  clb_tensor_free(x);
  clb_tensor_free(mask);
  clb_tensor_free(y);
  clb_tensor_free(other);
}

/* Two failing ops before one sync: both named; each output has its own error. */
static void test_two_errors(void) {
  clb_tensor_t x = vec(CLB_DTYPE_F32, 6, 6, xs), mask = vec(CLB_DTYPE_BOOL, 6, 6, ones), y = NULL;
  short_scatter(x, mask, &y);
  /* nonzero of 5 nonzeros into a caller's out of at most 2 rows */
  int64_t ob[2] = {2, 1};
  uint8_t odyn[2] = {1, 0};
  clb_tensor_t nz = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 2, ob, odyn, &nz));
  CL_OK(ctx, clb_nonzero(ctx, x, &nz));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_SHORT_SOURCE, "the source has only 2");
  EXPECT_TRUE(strstr(clb_context_errmsg(ctx), "nonzero") != NULL);
  EXPECT_TRUE(strstr(clb_context_errmsg(ctx), "size 5 exceeds its bound 2") != NULL);
  EXPECT_TRUE(strstr(clb_context_errmsg(ctx), "ERR_BOUND_EXCEEDED") != NULL);
  expect_read_fails(y, CLB_ERR_SHORT_SOURCE, "masked_scatter");
  expect_read_fails(nz, CLB_ERR_BOUND_EXCEEDED, "size 5 exceeds its bound 2");
  /* the status word was cleared: the next sync is clean */
  CL_OK(ctx, clb_context_sync(ctx));
  clb_tensor_free(x);
  clb_tensor_free(mask);
  clb_tensor_free(y);
  clb_tensor_free(nz);
}

int main(void) {
  ctx = clb_test_context(NULL);
  test_marked_until_rewritten();
  test_two_errors();
  clb_context_free(ctx);
  return clb_test_finish("adversarial/failed-outputs");
}
