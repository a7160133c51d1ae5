/* test-sync.c: how a host sync waits (CLBOUND_SYNC_SPIN_US and
 * CLBOUND_SYNC_YIELD_MS, docs/design.md, "Host syncs"): polling the device,
 * spinning or yielding the CPU, keeps the calling thread from blocking
 * (host_sync_blocks) and gives the same values and the same device errors as a
 * blocking wait; by default a CPU device's context spins only while its recent
 * syncs waited less than the budget, and yields past it. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "cl-test.h"

static uint64_t blocks(clb_context_t ctx) {
  clb_counters c;
  c.struct_size = sizeof c;
  CL_OK(ctx, clb_context_counters(ctx, &c));
  return c.host_sync_blocks;
}

static void set_or_unset(const char *name, const char *value) {
  if (value) setenv(name, value, 1);
  else unsetenv(name);
}

/* A context made with CLBOUND_SYNC_SPIN_US=spin and CLBOUND_SYNC_YIELD_MS=yield
 * (NULL: unset); the variables are unset again after (the context read them
 * when made). */
static clb_context_t context_with(const char *spin, const char *yield) {
  set_or_unset("CLBOUND_SYNC_SPIN_US", spin);
  set_or_unset("CLBOUND_SYNC_YIELD_MS", yield);
  clb_context_t ctx = clb_test_context(NULL);
  unsetenv("CLBOUND_SYNC_SPIN_US");
  unsetenv("CLBOUND_SYNC_YIELD_MS");
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

/* A wait far longer than the default budget: relu over 16M floats (64 MB),
 * twice; the syncs that blocked (0 or 1). */
static uint64_t long_wait(clb_context_t ctx) {
  const int64_t big[1] = {(int64_t)1 << 24};
  clb_tensor_t x = NULL, y = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, big, NULL, &x));
  CL_OK(ctx, clb_unary(ctx, CLB_UNARY_RELU, x, &y));
  CL_OK(ctx, clb_unary(ctx, CLB_UNARY_RELU, y, &x));
  const uint64_t b0 = blocks(ctx);
  CL_OK(ctx, clb_context_sync(ctx));
  clb_tensor_free(x);
  clb_tensor_free(y);
  return blocks(ctx) - b0;
}

int main(void) {
  /* a budget of a second: a small op's sync never blocks, values and errors as ever */
  clb_context_t ctx = context_with("1000000", NULL);
  EXPECT_EQ_I(small_reads(ctx, 20), 0);
  device_error(ctx);
  clb_context_free(ctx);

  /* 0 (and no yielding, which a set CLBOUND_SYNC_SPIN_US leaves off): every sync blocks */
  ctx = context_with("0", NULL);
  EXPECT_EQ_I(small_reads(ctx, 20), 20);
  device_error(ctx);
  clb_context_free(ctx);

  /* no spinning, a minute of yielding: no sync blocks, a long one neither;
   * values and errors as ever */
  ctx = context_with("0", "60000");
  EXPECT_EQ_I(small_reads(ctx, 20), 0);
  EXPECT_EQ_I(long_wait(ctx), 0);
  device_error(ctx);
  EXPECT_EQ_I(small_reads(ctx, 3), 0);
  clb_context_free(ctx);

  /* unset: a GPU's syncs block; a CPU device's spin while the recent waits were
   * short and yield past that, so the one right after a long wait does not block
   * either, unless yielding is off (then it blocks at once) */
  ctx = context_with(NULL, NULL);
  cl_device_type type = 0;
  REQUIRE_TRUE(clGetDeviceInfo(clb_context_cl_device(ctx), CL_DEVICE_TYPE, sizeof type, &type, NULL) == CL_SUCCESS);
  const int cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
  if (!cpu) {
    EXPECT_EQ_I(small_reads(ctx, 5), 5);
  } else {
    long_wait(ctx);
    EXPECT_EQ_I(small_reads(ctx, 1), 0);
  }
  clb_context_free(ctx);
  if (cpu) {
    ctx = context_with(NULL, "0");
    long_wait(ctx);
    EXPECT_EQ_I(small_reads(ctx, 1), 1);
    clb_context_free(ctx);
  }
  return clb_test_finish("core/sync");
}
