/* test-api-edges.c: argument edges of the C API. Every NULL or out-of-range
 * argument returns an error status AND replaces the message (thread-local, or
 * the context's) with one naming the call; kernel_style outside its enum is
 * refused; the bound-overflow check gives the same answer in any dim order. */
#include "cl-test.h"

static const char *sentinel = "sentinel: a message from an earlier call";

/* Sets both messages to the sentinel through calls that fail on purpose. */
static void plant(clb_context_t ctx) {
  clb_tensor_t t = NULL;
  (void)clb_tensor_new(NULL, CLB_DTYPE_F32, 0, NULL, NULL, &t); /* thread-local: "ctx is NULL" */
  EXPECT_TRUE(strstr(clb_last_errmsg(), "clb_tensor_new") != NULL);
  (void)ctx;
}

/* A context-free call: status `want` and a thread-local message with `needle`. */
#define EXPECT_TL(call, want, needle)                                                        \
  do {                                                                                       \
    plant(NULL);                                                                             \
    clb_status st_ = (call);                                                                 \
    clb_test_checks++;                                                                       \
    if (st_ != (want)) CLB_FAIL_AT("%s: got %s, want %s", #call, clb_status_name(st_), clb_status_name(want)); \
    else if (!strstr(clb_last_errmsg(), needle))                                             \
      CLB_FAIL_AT("%s: message \"%s\" lacks \"%s\"", #call, clb_last_errmsg(), needle);     \
  } while (0)

static void null_arguments(clb_context_t ctx) {
  (void)sentinel;
  EXPECT_TL(clb_device_count(NULL), CLB_ERR_NULL, "clb_device_count");
  EXPECT_TL(clb_device_info_get(0, NULL), CLB_ERR_NULL, "clb_device_info_get");
  clb_device_info info;
  info.struct_size = 3;
  EXPECT_TL(clb_device_info_get(0, &info), CLB_ERR_INVALID_ARG, "struct_size");
  info.struct_size = sizeof info;
  EXPECT_TL(clb_device_info_get(100000, &info), CLB_ERR_NO_DEVICE, "device index 100000");
  EXPECT_TL(clb_cache_default_dir(NULL, 10), CLB_ERR_NULL, "clb_cache_default_dir");
  char buf[8];
  EXPECT_TL(clb_cache_default_dir(buf, 0), CLB_ERR_NULL, "clb_cache_default_dir");
  EXPECT_TL(clb_context_new(NULL, NULL), CLB_ERR_NULL, "clb_context_new");
  EXPECT_TL(clb_context_sync(NULL), CLB_ERR_NULL, "clb_context_sync");
  EXPECT_TL(clb_context_counters(NULL, NULL), CLB_ERR_NULL, "clb_context_counters");
  EXPECT_TL(clb_context_metrics_json(NULL, NULL, 0, NULL), CLB_ERR_NULL, "clb_context_metrics_json");
  EXPECT_TL(clb_tensor_write(NULL, NULL, NULL, NULL, 0), CLB_ERR_NULL, "clb_tensor_write");
  EXPECT_TL(clb_tensor_read(NULL, NULL, NULL, NULL, 0, NULL), CLB_ERR_NULL, "clb_tensor_read");
  EXPECT_TL(clb_tensor_sizes(NULL, NULL, NULL), CLB_ERR_NULL, "clb_tensor_sizes");
  EXPECT_TL(clb_unary(NULL, CLB_UNARY_RELU, NULL, NULL), CLB_ERR_NULL, "relu: ctx is NULL");
  EXPECT_TL(clb_graph_new(NULL, NULL, NULL), CLB_ERR_NULL, "clb_graph_new");
  EXPECT_TL(clb_graph_describe(NULL, NULL, 0, NULL), CLB_ERR_NULL, "clb_graph_describe");
  EXPECT_TL(clb_graph_stats_get(NULL, NULL), CLB_ERR_NULL, "clb_graph_stats_get");

  /* with a context: its own message is replaced */
  clb_tensor_t t = NULL;
  EXPECT_STATUS(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, NULL, NULL, &t), CLB_ERR_NULL, "bounds is NULL");
  EXPECT_STATUS(ctx, clb_tensor_write(ctx, NULL, NULL, NULL, 0), CLB_ERR_NULL, "clb_tensor_write: tensor t is NULL");
  EXPECT_STATUS(ctx, clb_unary(ctx, CLB_UNARY_RELU, NULL, &t), CLB_ERR_NULL, "relu: tensor a is NULL");
  EXPECT_STATUS(ctx, clb_context_counters(ctx, NULL), CLB_ERR_NULL, "clb_context_counters");
  EXPECT_STATUS(ctx, clb_op_supported(ctx, NULL, CLB_DTYPE_F32), CLB_ERR_NULL, "clb_op_supported: op is NULL");
}

static void kernel_style(void) {
  int bad[] = {3, -1, 1000, 0x7fffffff};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    clb_context_options o;
    clb_context_options_init(&o);
    o.kernel_style = (clb_kernel_style)bad[i];
    clb_context_t c = NULL;
    EXPECT_TL(clb_context_new(&o, &c), CLB_ERR_INVALID_ARG, "kernel_style");
    EXPECT_TRUE(c == NULL);
  }
  for (int s = CLB_KERNEL_STYLE_AUTO; s <= CLB_KERNEL_STYLE_GPU; s++) {
    clb_context_options o;
    clb_context_options_init(&o);
    o.kernel_style = (clb_kernel_style)s;
    clb_context_t c = clb_test_context(&o);
    EXPECT_TRUE(clb_context_kernel_style(c) != CLB_KERNEL_STYLE_AUTO);
    clb_context_free(c);
  }
}

/* Bounds whose nonzero product overflows are refused in every order of the
 * dims, a 0 among them or not; products that fit are accepted in every order. */
static void overflow_order(clb_context_t ctx) {
  const int64_t big = (int64_t)1 << 32;
  int64_t over[][3] = {{big, big, 0}, {0, big, big}, {big, 0, big}, {big, big, 1}, {1, big, big}};
  for (size_t i = 0; i < sizeof over / sizeof over[0]; i++) {
    clb_tensor_t t = NULL;
    EXPECT_STATUS(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 3, over[i], NULL, &t), CLB_ERR_OOM, "overflows 64-bit");
    EXPECT_TRUE(t == NULL);
  }
  /* empty tensors whose other bounds fit: fine in any order, and usable */
  int64_t empty[][3] = {{0, 1 << 20, 1 << 20}, {1 << 20, 1 << 20, 0}, {1 << 20, 0, 1 << 20}};
  for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
    clb_tensor_t t = NULL, y = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 3, empty[i], NULL, &t));
    EXPECT_EQ_I(clb_tensor_bound_numel(t), 0);
    CL_OK(ctx, clb_unary(ctx, CLB_UNARY_NEG, t, &y));
    int64_t d[3];
    size_t bytes = 1;
    CL_OK(ctx, clb_tensor_read(ctx, y, d, NULL, 0, &bytes));
    EXPECT_EQ_I(bytes, 0);
    for (int k = 0; k < 3; k++) EXPECT_EQ_I(d[k], empty[i][k]);
    clb_tensor_free(t);
    clb_tensor_free(y);
  }
  /* the context is still usable */
  CL_OK(ctx, clb_context_sync(ctx));
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  null_arguments(ctx);
  kernel_style();
  overflow_order(ctx);
  clb_context_free(ctx);
  return clb_test_finish("adversarial/api-edges");
}
