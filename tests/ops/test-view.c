/* test-view.c: clb_reshape: views share data, get their actual sizes on the
 * device, outlive their base, and check divisibility; clb_reshape_bounded:
 * views with two dynamic dims whose sizes the caller gives, checked on the
 * device. */
#include "cl-test.h"

/* [batch * sequence, 3] of bounds [<=24, 3] viewed as [batch, sequence, 3] of
 * bounds [<=4, <=6, 3]: the data as it is, the sizes the caller's, the same
 * view re-used at other sizes, and the device's check of the count. */
static void reshape_bounded(clb_context_t ctx) {
  int64_t b[2] = {24, 3}, vb[3] = {4, 6, 3}, got[3];
  uint8_t dyn[2] = {1, 0}, vdyn[3] = {1, 1, 0};
  clb_tensor_t x = NULL, v = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b, dyn, &x));
  double vals[72], back[72];
  for (int i = 0; i < 72; i++) vals[i] = i * 0.5 - 7;
  const int64_t shapes[][3] = {{2, 5, 3}, {4, 6, 3}, {3, 1, 3}, {0, 6, 3}};
  for (int c = 0; c < 4; c++) {
    int64_t rows[2] = {shapes[c][0] * shapes[c][1], 3};
    clb_test_write(ctx, x, rows, vals);
    CL_OK(ctx, clb_reshape_bounded(ctx, x, 3, vb, vdyn, shapes[c], &v));
    EXPECT_TRUE(clb_tensor_is_dynamic(v, 0) && clb_tensor_is_dynamic(v, 1) && !clb_tensor_is_dynamic(v, 2));
    EXPECT_EQ_I(clb_tensor_bound_numel(v), 72);
    int64_t n = clb_test_read(ctx, v, got, back, 72);
    EXPECT_EQ_I(n, rows[0] * 3);
    EXPECT_TRUE(got[0] == shapes[c][0] && got[1] == shapes[c][1] && got[2] == 3);
    for (int64_t i = 0; i < n; i++) EXPECT_TRUE(back[i] == vals[i]);
  }
  /* sizes that do not hold the input's 15 elements: the sync says so */
  int64_t five[2] = {5, 3}, wrong[3] = {2, 3, 3};
  clb_test_write(ctx, x, five, vals);
  CL_OK(ctx, clb_reshape_bounded(ctx, x, 3, vb, vdyn, wrong, &v));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DEVICE_CHECK, "sizes 15 and 18 must be equal");
  EXPECT_TRUE(strstr(clb_context_errmsg(ctx), "reshape_bounded") != NULL);
  /* refusals */
  clb_tensor_t r = NULL;
  int64_t big[3] = {5, 6, 3}, over[3] = {5, 6, 3}, st3[3] = {2, 6, 3};
  uint8_t stat1[3] = {1, 0, 0};
  EXPECT_STATUS(ctx, clb_reshape_bounded(ctx, x, 3, big, vdyn, st3, &r), CLB_ERR_SHAPE, "90 elements at the bounds do not fit its 72");
  EXPECT_STATUS(ctx, clb_reshape_bounded(ctx, x, 3, vb, vdyn, over, &r), CLB_ERR_SHAPE, "dim 0: size 5 with bound 4");
  EXPECT_STATUS(ctx, clb_reshape_bounded(ctx, x, 3, vb, stat1, (const int64_t[]){2, 5, 3}, &r), CLB_ERR_SHAPE,
                "dim 1: size 5 with bound 6 (static: they must be equal)");
  EXPECT_STATUS(ctx, clb_reshape_bounded(ctx, x, 9, vb, vdyn, st3, &r), CLB_ERR_RANK, "rank 9 is outside 0..8");
  EXPECT_STATUS(ctx, clb_reshape_bounded(ctx, x, 3, NULL, vdyn, st3, &r), CLB_ERR_NULL, "bounds or dims is NULL");
  EXPECT_STATUS(ctx, clb_reshape_bounded(ctx, x, 3, vb, vdyn, st3, NULL), CLB_ERR_NULL, "out is NULL");
  int64_t vb2[3] = {4, 6, 3};
  vb2[0] = 2;
  EXPECT_STATUS(ctx, clb_reshape_bounded(ctx, x, 3, vb2, vdyn, st3, &v), CLB_ERR_INVALID_ARG, "must be a view of x");
  /* clb_reshape's view of x follows x (its producers write its record): not one to re-use */
  clb_tensor_t follower = NULL;
  CL_OK(ctx, clb_reshape(ctx, x, 1, (const int64_t[]){-1}, &follower));
  EXPECT_STATUS(ctx, clb_reshape_bounded(ctx, x, 1, (const int64_t[]){72}, (const uint8_t[]){1}, (const int64_t[]){15},
                                         &follower), CLB_ERR_INVALID_ARG, "must be a view of x");
  clb_tensor_free(follower);
  clb_tensor_free(v);
  clb_tensor_free(x);
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  int64_t b[2] = {10, 3};
  uint8_t dyn[2] = {1, 0};
  clb_tensor_t x = NULL, flat = NULL, rows = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 2, b, dyn, &x));
  int64_t d4[2] = {4, 3}, got[2];
  double v[30], back[30];
  for (int i = 0; i < 30; i++) v[i] = i * 3 + 1;
  clb_test_write(ctx, x, d4, v);
  int64_t spec_flat[1] = {-1};
  CL_OK(ctx, clb_reshape(ctx, x, 1, spec_flat, &flat));
  EXPECT_TRUE(clb_tensor_is_dynamic(flat, 0));
  EXPECT_EQ_I(clb_tensor_bound_numel(flat), 30);
  EXPECT_EQ_I(clb_test_read(ctx, flat, got, back, 30), 12);
  EXPECT_EQ_I(got[0], 12);
  for (int i = 0; i < 12; i++) EXPECT_TRUE(back[i] == v[i]);

  /* [<=30] viewed as [-1, 6]: 12 elements make 2 rows; the view follows a new
   * actual size when it is re-run, without a new view. */
  int64_t spec_rows[2] = {-1, 6};
  CL_OK(ctx, clb_reshape(ctx, flat, 2, spec_rows, &rows));
  EXPECT_EQ_I(clb_test_read(ctx, rows, got, back, 30), 12);
  EXPECT_EQ_I(got[0], 2);
  EXPECT_EQ_I(got[1], 6);
  int64_t d8[2] = {8, 3};
  clb_test_write(ctx, x, d8, v);
  CL_OK(ctx, clb_reshape(ctx, x, 1, spec_flat, &flat));
  CL_OK(ctx, clb_reshape(ctx, flat, 2, spec_rows, &rows));
  EXPECT_EQ_I(clb_test_read(ctx, rows, got, back, 30), 24);
  EXPECT_EQ_I(got[0], 4);
  for (int i = 0; i < 24; i++) EXPECT_TRUE(back[i] == v[i]);

  /* 5 rows of 3 do not split into rows of 6: a deferred check at the sync. */
  int64_t d5[2] = {5, 3};
  clb_test_write(ctx, x, d5, v);
  CL_OK(ctx, clb_reshape(ctx, x, 1, spec_flat, &flat));
  CL_OK(ctx, clb_reshape(ctx, flat, 2, spec_rows, &rows));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DEVICE_CHECK, "sizes 15 and 6");
  EXPECT_TRUE(strstr(clb_context_errmsg(ctx), "reshape") != NULL);

  /* A view keeps the data alive after its base is freed. */
  clb_test_write(ctx, x, d4, v);
  CL_OK(ctx, clb_reshape(ctx, x, 1, spec_flat, &flat));
  clb_tensor_free(x);
  EXPECT_EQ_I(clb_test_read(ctx, flat, got, back, 30), 12);
  EXPECT_TRUE(back[11] == v[11]);
  clb_tensor_free(rows);
  clb_tensor_free(flat);

  /* Static reshapes, and refusals. */
  int64_t sb[2] = {4, 6}, s2[2] = {2, 12}, bad[2] = {5, 5}, two_free[2] = {-1, -1};
  clb_tensor_t s = NULL, sv = NULL, other = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, sb, NULL, &s));
  CL_OK(ctx, clb_reshape(ctx, s, 2, s2, &sv));
  EXPECT_TRUE(!clb_tensor_is_dynamic(sv, 0));
  EXPECT_EQ_I(clb_context_sync(ctx), CLB_OK);
  clb_tensor_t r = NULL;
  EXPECT_STATUS(ctx, clb_reshape(ctx, s, 2, bad, &r), CLB_ERR_SHAPE, "static shape of 25 elements");
  EXPECT_STATUS(ctx, clb_reshape(ctx, s, 2, two_free, &r), CLB_ERR_INVALID_ARG, "spec[1] = -1");
  int64_t seven[2] = {-1, 7};
  EXPECT_STATUS(ctx, clb_reshape(ctx, s, 2, seven, &r), CLB_ERR_SHAPE, "do not split into rows of 7");
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, s2, NULL, &other));
  EXPECT_STATUS(ctx, clb_reshape(ctx, s, 2, s2, &other), CLB_ERR_INVALID_ARG, "must be a view of x");
  clb_tensor_free(s);
  clb_tensor_free(sv);
  clb_tensor_free(other);
  reshape_bounded(ctx);
  clb_context_free(ctx);
  return clb_test_finish("ops/view");
}
