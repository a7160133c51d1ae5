/* test-sync.c: how a host sync waits (CLBOUND_SYNC_SPIN_US, docs/design.md,
 * "Host syncs"): polling the device keeps the calling thread from blocking
 * (host_sync_blocks) and gives the same values and the same device errors as a
 * blocking wait; by default a CPU device's context polls only while its recent
 * syncs waited less than the budget. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "cl-test.h"

static uint64_t blocks(clb_context_t ctx) {
  clb_counters c;
  c.struct_size = sizeof c;
  CL_OK(ctx, clb_context_counters(ctx, &c));
  return c.host_sync_blocks;
}

/* A context made with CLBOUND_SYNC_SPIN_US=value (NULL: unset); the variable
 * is unset again after (the context read it when made). */
static clb_context_t context_with(const char *value) {
  if (value) setenv("CLBOUND_SYNC_SPIN_US", value, 1);
  else unsetenv("CLBOUND_SYNC_SPIN_US");
  clb_context_t ctx = clb_test_context(NULL);
  unsetenv("CLBOUND_SYNC_SPIN_US");
  return ctx;
}

/* n rounds of relu of a small dynamic tensor and a read of it (one host sync
 * each), every value checked; the syncs that blocked */
static uint64_t small_reads(clb_context_t ctx, int n) {
  const int64_t bound[1] = {64}, dims[1] = {37};
  const uint8_t dyn[1] = {1};
  clb_tensor_t x = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, bound, dyn, &x));
  double v[64], back[64];
  for (int i = 0; i < 37; i++) v[i] = i % 3 == 0 ? -1.5 * i : 0.5 * i;
  clb_test_write(ctx, x, dims, v);
  const uint64_t b0 = blocks(ctx), s0 = clb_test_counter_syncs(ctx);
  for (int r = 0; r < n; r++) {
    clb_tensor_t y = NULL;
    CL_OK(ctx, clb_unary(ctx, CLB_UNARY_RELU, x, &y));
    int64_t got[1];
    EXPECT_EQ_I(clb_test_read(ctx, y, got, back, 64), 37);
    EXPECT_EQ_I(got[0], 37);
    for (int i = 0; i < 37; i++) EXPECT_TRUE(back[i] == (v[i] > 0 ? v[i] : 0.0));
    clb_tensor_free(y);
  }
  EXPECT_EQ_I(clb_test_counter_syncs(ctx) - s0, (uint64_t)n);
  clb_tensor_free(x);
  return blocks(ctx) - b0;
}

/* An integer remainder by zero raised on the device: the sync reports it by
 * name, once, whether it polled or blocked. */
static void device_error(clb_context_t ctx) {
  const int64_t b3[1] = {3};
  double zeros[3] = {0, 0, 0}, ones[3] = {1, 2, 3};
  clb_tensor_t a = NULL, z = NULL, r = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, b3, NULL, &a));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, b3, NULL, &z));
  clb_test_write(ctx, a, b3, ones);
  clb_test_write(ctx, z, b3, zeros);
  CL_OK(ctx, clb_remainder(ctx, a, z, &r));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DIV_ZERO, "remainder");
  EXPECT_EQ_I(clb_context_sync(ctx), CLB_OK);
  clb_tensor_free(a);
  clb_tensor_free(z);
  clb_tensor_free(r);
}

/* A wait far longer than the default budget: relu over 16M floats (64 MB). */
static void long_wait(clb_context_t ctx) {
  const int64_t big[1] = {(int64_t)1 << 24};
  clb_tensor_t x = NULL, y = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, big, NULL, &x));
  CL_OK(ctx, clb_unary(ctx, CLB_UNARY_RELU, x, &y));
  CL_OK(ctx, clb_unary(ctx, CLB_UNARY_RELU, y, &x));
  CL_OK(ctx, clb_context_sync(ctx));
  clb_tensor_free(x);
  clb_tensor_free(y);
}

int main(void) {
  /* a budget of a second: a small op's sync never blocks, values and errors as ever */
  clb_context_t ctx = context_with("1000000");
  EXPECT_EQ_I(small_reads(ctx, 20), 0);
  device_error(ctx);
  clb_context_free(ctx);

  /* 0: every sync blocks */
  ctx = context_with("0");
  EXPECT_EQ_I(small_reads(ctx, 20), 20);
  device_error(ctx);
  clb_context_free(ctx);

  /* unset: a GPU's syncs block; a CPU device's poll while the recent waits were
   * short, so the one right after a long wait blocks at once */
  ctx = context_with(NULL);
  cl_device_type type = 0;
  REQUIRE_TRUE(clGetDeviceInfo(clb_context_cl_device(ctx), CL_DEVICE_TYPE, sizeof type, &type, NULL) == CL_SUCCESS);
  if (!(type & CL_DEVICE_TYPE_CPU)) {
    EXPECT_EQ_I(small_reads(ctx, 5), 5);
  } else {
    long_wait(ctx);
    EXPECT_EQ_I(small_reads(ctx, 1), 1);
  }
  clb_context_free(ctx);
  return clb_test_finish("core/sync");
}
