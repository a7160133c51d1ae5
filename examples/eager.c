/* eager.c: the smallest clbound program: a bounded tensor, two ops, one read.
 * Build: cc eager.c $(pkg-config --cflags --libs clbound) */
#include <stdio.h>

#include <clbound/clbound.h>

int main(void) {
  clb_context_t ctx = NULL;
  clb_status st = clb_context_new(NULL, &ctx);
  if (st != CLB_OK) {
    fprintf(stderr, "no OpenCL device: %s\n", clb_last_errmsg());
    return st == CLB_ERR_NO_DEVICE ? 77 : 1;
  }
  /* x holds up to 1000 rows of 4; this call has 3 rows. */
  int64_t bounds[2] = {1000, 4}, dims[2] = {3, 4};
  uint8_t dynamic[2] = {1, 0};
  float data[12] = {-1, 2, -3, 4, 5, -6, 7, -8, 9, 10, -11, 12};
  clb_tensor_t x = NULL, y = NULL, m = NULL;
  float mean = 0;
  if ((st = clb_tensor_new(ctx, CLB_DTYPE_F32, 2, bounds, dynamic, &x)) == CLB_OK &&
      (st = clb_tensor_write(ctx, x, dims, data, sizeof data)) == CLB_OK &&
      (st = clb_unary(ctx, CLB_UNARY_RELU, x, &y)) == CLB_OK &&
      (st = clb_reduce_all(ctx, CLB_REDUCE_MEAN, y, &m)) == CLB_OK &&
      (st = clb_tensor_read(ctx, m, NULL, &mean, sizeof mean, NULL)) == CLB_OK) {
    /* relu keeps 2+4+5+7+9+10+12 = 49 over 12 elements */
    printf("mean of relu(x) over 3 actual rows: %.4f (expected %.4f)\n", mean, 49.0 / 12.0);
    st = (mean > 49.0f / 12.0f - 1e-4f && mean < 49.0f / 12.0f + 1e-4f) ? CLB_OK : CLB_ERR_INTERNAL;
  } else {
    fprintf(stderr, "clbound: %s: %s\n", clb_status_str(st), clb_context_errmsg(ctx));
  }
  clb_context_free(ctx);
  return st == CLB_OK ? 0 : 1;
}
