/* test-context.c: device listing and selection, wrapping a caller's context,
 * status strings, counters and syncs. */
#define _POSIX_C_SOURCE 200809L
#include "cl-test.h"

static void test_status_table(void) {
  EXPECT_EQ_S(clb_status_str(CLB_OK), "success");
  EXPECT_EQ_S(clb_status_str(CLB_ERR_OOM), "out of device memory");
  EXPECT_EQ_S(clb_status_name(CLB_ERR_BOUND_EXCEEDED), "ERR_BOUND_EXCEEDED");
  EXPECT_EQ_S(clb_status_str((clb_status)-999), "unknown status");
  for (int s = 0; s >= CLB_ERR_INTERNAL; s--) EXPECT_TRUE(strlen(clb_status_str((clb_status)s)) > 0);
}

static void test_devices(void) {
  int n = 0;
  EXPECT_EQ_I(clb_device_count(&n), CLB_OK);
  EXPECT_TRUE(n >= 1);
  clb_device_info di;
  di.struct_size = sizeof di;
  EXPECT_EQ_I(clb_device_info_get(0, &di), CLB_OK);
  EXPECT_TRUE(strlen(di.name) > 0);
  EXPECT_TRUE(di.compute_units >= 1);
  EXPECT_TRUE(di.max_alloc_bytes > 0);
  EXPECT_EQ_I(clb_device_info_get(n + 5, &di), CLB_ERR_NO_DEVICE);
  EXPECT_TRUE(strstr(clb_last_errmsg(), "device index") != NULL);
  di.struct_size = 4; /* too small: refused, nothing overrun */
  EXPECT_EQ_I(clb_device_info_get(0, &di), CLB_ERR_INVALID_ARG);
}

static void test_selection(void) {
  clb_device_info di;
  di.struct_size = sizeof di;
  REQUIRE_TRUE(clb_device_info_get(0, &di) == CLB_OK);
  clb_context_options o;
  clb_context_options_init(&o);
  clb_context_t ctx = NULL;

  o.device = "no-such-device-name";
  EXPECT_EQ_I(clb_context_new(&o, &ctx), CLB_ERR_NO_DEVICE);
  EXPECT_TRUE(ctx == NULL);
  EXPECT_TRUE(strstr(clb_last_errmsg(), "no-such-device-name") != NULL);
  EXPECT_TRUE(strstr(clb_last_errmsg(), di.name) != NULL); /* lists what there is */

  /* A substring of the name, in another case, selects it. */
  char sub[8] = {0};
  for (int i = 0; i < 4 && di.name[i]; i++) sub[i] = (char)(di.name[i] ^ ((di.name[i] >= 'a' && di.name[i] <= 'z') ? 0x20 : 0));
  o.device = sub;
  EXPECT_EQ_I(clb_context_new(&o, &ctx), CLB_OK);
  clb_context_free(ctx);
  ctx = NULL;

  /* The environment is read when the API argument is NULL; the argument wins. */
  setenv("CLBOUND_DEVICE", "no-such-device-name", 1);
  EXPECT_EQ_I(clb_context_new(NULL, &ctx), CLB_ERR_NO_DEVICE);
  o.device = "0";
  EXPECT_EQ_I(clb_context_new(&o, &ctx), CLB_OK);
  clb_context_free(ctx);
  ctx = NULL;
  unsetenv("CLBOUND_DEVICE");

  setenv("CLBOUND_PLATFORM", "no-such-platform", 1);
  EXPECT_EQ_I(clb_context_new(NULL, &ctx), CLB_ERR_NO_DEVICE);
  unsetenv("CLBOUND_PLATFORM");
  o.device = NULL;
  o.platform = "0";
  EXPECT_EQ_I(clb_context_new(&o, &ctx), CLB_OK);
  clb_context_free(ctx);
  ctx = NULL;

  /* A forced kernel style is kept. */
  clb_context_options_init(&o);
  o.kernel_style = CLB_KERNEL_STYLE_GPU;
  EXPECT_EQ_I(clb_context_new(&o, &ctx), CLB_OK);
  EXPECT_EQ_I(clb_context_kernel_style(ctx), CLB_KERNEL_STYLE_GPU);
  clb_context_free(ctx);

  /* An options struct whose size was never set is refused. */
  clb_context_options bad;
  memset(&bad, 0, sizeof bad);
  ctx = NULL;
  EXPECT_EQ_I(clb_context_new(&bad, &ctx), CLB_ERR_INVALID_ARG);
  EXPECT_EQ_I(clb_context_new(NULL, NULL), CLB_ERR_NULL);
}

static void test_wrap(void) {
  cl_platform_id plat;
  cl_device_id dev;
  REQUIRE_TRUE(clGetPlatformIDs(1, &plat, NULL) == CL_SUCCESS);
  REQUIRE_TRUE(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL) == CL_SUCCESS);
  cl_int e;
  cl_context cl = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
  REQUIRE_TRUE(e == CL_SUCCESS);
  cl_command_queue q = clCreateCommandQueue(cl, dev, 0, &e);
  REQUIRE_TRUE(e == CL_SUCCESS);
  clb_context_t ctx = NULL;
  EXPECT_EQ_I(clb_context_wrap(NULL, q, NULL, &ctx), CLB_ERR_NULL);
  EXPECT_EQ_I(clb_context_wrap(cl, q, NULL, &ctx), CLB_OK);
  REQUIRE_TRUE(ctx != NULL);
  EXPECT_TRUE(clb_context_cl_context(ctx) == cl);
  EXPECT_TRUE(clb_context_cl_queue(ctx) == q);
  /* The wrapped queue runs clbound's work. */
  int64_t b[1] = {5};
  clb_tensor_t t = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, b, NULL, &t));
  CL_OK(ctx, clb_fill(ctx, t, 7));
  int32_t out[5] = {0};
  CL_OK(ctx, clb_tensor_read(ctx, t, NULL, out, sizeof out, NULL));
  for (int i = 0; i < 5; i++) EXPECT_EQ_I(out[i], 7);
  clb_context_free(ctx);
  /* The caller's context and queue still work after clbound lets go. */
  cl_mem m = clCreateBuffer(cl, CL_MEM_READ_WRITE, 16, NULL, &e);
  EXPECT_EQ_I(e, CL_SUCCESS);
  int32_t in[4] = {1, 2, 3, 4}, back[4] = {0};
  EXPECT_EQ_I(clEnqueueWriteBuffer(q, m, CL_TRUE, 0, 16, in, 0, NULL, NULL), CL_SUCCESS);
  EXPECT_EQ_I(clEnqueueReadBuffer(q, m, CL_TRUE, 0, 16, back, 0, NULL, NULL), CL_SUCCESS);
  EXPECT_EQ_I(back[3], 4);
  clReleaseMemObject(m);
  clReleaseCommandQueue(q);
  clReleaseContext(cl);
}

static void test_counters_and_sync(void) {
  clb_context_t ctx = clb_test_context(NULL);
  clb_counters c;
  c.struct_size = 0;
  EXPECT_EQ_I(clb_context_counters(ctx, &c), CLB_ERR_INVALID_ARG);
  c.struct_size = sizeof c;
  EXPECT_EQ_I(clb_context_counters(ctx, &c), CLB_OK);
  EXPECT_EQ_I(c.host_syncs, 0);
  EXPECT_EQ_I(clb_context_sync(ctx), CLB_OK);
  EXPECT_EQ_I(clb_test_counter_syncs(ctx), 1);
  EXPECT_EQ_I(clb_context_sync(NULL), CLB_ERR_NULL);
  clb_context_free(ctx);
  clb_context_free(NULL); /* a no-op */
}

int main(void) {
  test_status_table();
  /* A context first: with no device this skips (or fails under CI). */
  clb_context_free(clb_test_context(NULL));
  test_devices();
  test_selection();
  test_wrap();
  test_counters_and_sync();
  return clb_test_finish("core/context");
}
