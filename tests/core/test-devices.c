/* test-devices.c: one process holding contexts on two devices (ctest runs it
 * with POCL_DEVICES="pthread pthread", two PoCL CPU devices): each context is on
 * its own cl_device_id, runs an op on its own queue with its own data, and the
 * results are exact; freeing one leaves the other working. A machine with one
 * device (a GPU machine: POCL_DEVICES means nothing to its driver) skips it,
 * with the reason, unless CI is set (CI runs PoCL, which must give two). */
#define _POSIX_C_SOURCE 200809L
#include "cl-test.h"

enum { N = 1000 };

int main(void) {
  int n = 0;
  REQUIRE_TRUE(clb_device_count(&n) == CLB_OK);
  if (n < 2) {
    char why[160];
    snprintf(why, sizeof why, "%d OpenCL device(s): this test needs two (on PoCL: POCL_DEVICES=\"pthread pthread\")", n);
    clb_test_skip(why);
  }
  clb_context_t ctx[2];
  clb_tensor_t a[2], b[2], c[2] = {NULL, NULL};
  static float ha[2][N], hb[2][N], got[N];
  const int64_t bound[1] = {N}, dims[1] = {N - 3};
  for (int d = 0; d < 2; d++) {
    CLB_TEST_CASE("a context on device %d", d);
    clb_context_options o;
    clb_context_options_init(&o);
    char idx[8];
    snprintf(idx, sizeof idx, "%d", d);
    o.device = idx;
    ctx[d] = clb_test_context(&o);
    for (int i = 0; i < N; i++) {
      ha[d][i] = (float)(i * (d + 1));
      hb[d][i] = (float)(3 * i - 7 * d);
    }
    CL_OK(ctx[d], clb_tensor_new(ctx[d], CLB_DTYPE_F32, 1, bound, (const uint8_t[]){1}, &a[d]));
    CL_OK(ctx[d], clb_tensor_new(ctx[d], CLB_DTYPE_F32, 1, bound, (const uint8_t[]){1}, &b[d]));
    CL_OK(ctx[d], clb_tensor_write(ctx[d], a[d], dims, ha[d], (size_t)dims[0] * sizeof(float)));
    CL_OK(ctx[d], clb_tensor_write(ctx[d], b[d], dims, hb[d], (size_t)dims[0] * sizeof(float)));
  }
  EXPECT_TRUE(clb_context_cl_device(ctx[0]) != clb_context_cl_device(ctx[1]));
  /* both queues busy at once, then each read back */
  for (int d = 0; d < 2; d++) CL_OK(ctx[d], clb_add(ctx[d], a[d], b[d], &c[d]));
  for (int d = 0; d < 2; d++) {
    int64_t gd[1];
    CL_OK(ctx[d], clb_tensor_read(ctx[d], c[d], gd, got, sizeof got, NULL));
    EXPECT_EQ_I(gd[0], dims[0]);
    int bad = 0;
    for (int i = 0; i < dims[0]; i++) bad += got[i] != ha[d][i] + hb[d][i]; /* small integers: exact */
    EXPECT_EQ_I(bad, 0);
  }
  /* a tensor of one context is refused by the other */
  clb_tensor_t x = NULL;
  EXPECT_TRUE(clb_add(ctx[1], a[0], b[1], &x) != CLB_OK);
  /* freeing the first leaves the second working */
  clb_context_free(ctx[0]);
  clb_tensor_t c2 = NULL;
  CL_OK(ctx[1], clb_add(ctx[1], c[1], a[1], &c2));
  CL_OK(ctx[1], clb_tensor_read(ctx[1], c2, NULL, got, sizeof got, NULL));
  int bad = 0;
  for (int i = 0; i < dims[0]; i++) bad += got[i] != 2 * ha[1][i] + hb[1][i];
  EXPECT_EQ_I(bad, 0);
  clb_context_free(ctx[1]);
  return clb_test_finish("core/devices");
}
