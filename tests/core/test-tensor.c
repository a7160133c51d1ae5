/* test-tensor.c: bounded tensors: every dtype and rank, writes over the bound,
 * static dims, reads, out-of-memory, and the pool's reuse. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <malloc.h>

#include "cl-test.h"

static void test_roundtrip(clb_context_t ctx) {
  clb_device_info di;
  di.struct_size = sizeof di;
  clb_device_info_get(0, &di);
  for (int dt = 0; dt < CLB_DTYPE_COUNT; dt++) {
    for (int rank = 0; rank <= CLB_MAX_RANK; rank++) {
      int64_t bounds[CLB_MAX_RANK], dims[CLB_MAX_RANK], got_dims[CLB_MAX_RANK];
      uint8_t dyn[CLB_MAX_RANK];
      for (int d = 0; d < rank; d++) {
        bounds[d] = 2 + (d % 2);
        dyn[d] = (uint8_t)(d % 2);
        dims[d] = dyn[d] ? bounds[d] - 1 : bounds[d];
      }
      clb_tensor_t t = NULL;
      clb_status st = clb_tensor_new(ctx, (clb_dtype)dt, rank, bounds, dyn, &t);
      if (dt == CLB_DTYPE_F64 && !di.has_fp64) {
        EXPECT_EQ_I(st, CLB_ERR_UNSUPPORTED);
        continue;
      }
      REQUIRE_TRUE(st == CLB_OK);
      EXPECT_EQ_I(clb_tensor_rank(t), rank);
      EXPECT_EQ_I(clb_tensor_dtype(t), dt);
      int64_t n = clb_test_numel(rank, dims);
      double vals[512], back[512];
      for (int64_t i = 0; i < n; i++) vals[i] = dt == CLB_DTYPE_BOOL ? (double)(i % 2) : (double)(i % 11) + (dt <= CLB_DTYPE_F64 ? 0.25 : 0);
      /* a new tensor's actual sizes are its bounds */
      if (rank > 0) {
        CL_OK(ctx, clb_tensor_sizes(ctx, t, got_dims));
        for (int d = 0; d < rank; d++) EXPECT_EQ_I(got_dims[d], bounds[d]);
      }
      clb_test_write(ctx, t, dims, vals);
      int64_t m = clb_test_read(ctx, t, got_dims, back, 512);
      EXPECT_EQ_I(m, n);
      for (int d = 0; d < rank; d++) EXPECT_EQ_I(got_dims[d], dims[d]);
      for (int64_t i = 0; i < n; i++) EXPECT_TRUE(back[i] == vals[i]);
      clb_tensor_free(t);
    }
  }
}

static void test_bad_input(clb_context_t ctx) {
  int64_t b9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  clb_tensor_t t = NULL;
  EXPECT_STATUS(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 9, b9, NULL, &t), CLB_ERR_RANK, "rank 9");
  EXPECT_STATUS(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, -1, b9, NULL, &t), CLB_ERR_RANK, "rank -1");
  EXPECT_STATUS(ctx, clb_tensor_new(ctx, (clb_dtype)42, 1, b9, NULL, &t), CLB_ERR_DTYPE, "dtype 42");
  EXPECT_STATUS(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, NULL, NULL, &t), CLB_ERR_NULL, "bounds");
  EXPECT_STATUS(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b9, NULL, NULL), CLB_ERR_NULL, "out");
  int64_t neg[1] = {-3};
  EXPECT_STATUS(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, neg, NULL, &t), CLB_ERR_INVALID_ARG, "negative");
  EXPECT_TRUE(t == NULL);
  EXPECT_STATUS(ctx, clb_tensor_write(ctx, NULL, NULL, NULL, 0), CLB_ERR_NULL, "tensor t is NULL");
  EXPECT_STATUS(ctx, clb_tensor_read(ctx, NULL, NULL, NULL, 0, NULL), CLB_ERR_NULL, "tensor t is NULL");

  /* A write over the bound fails and writes nothing: the old data stays. */
  int64_t bounds[2] = {10, 3};
  uint8_t dyn[2] = {1, 0};
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, bounds, dyn, &t));
  int64_t d4[2] = {4, 3}, d11[2] = {11, 3}, dstat[2] = {4, 2}, dneg[2] = {-1, 3};
  double v[33], back[33];
  for (int i = 0; i < 33; i++) v[i] = i;
  clb_test_write(ctx, t, d4, v);
  float big[33] = {0};
  EXPECT_STATUS(ctx, clb_tensor_write(ctx, t, d11, big, sizeof big), CLB_ERR_OUT_OF_BOUNDS, "11 > bound 10");
  EXPECT_STATUS(ctx, clb_tensor_write(ctx, t, dstat, big, 8 * sizeof(float)), CLB_ERR_OUT_OF_BOUNDS, "static");
  EXPECT_STATUS(ctx, clb_tensor_write(ctx, t, dneg, big, 0), CLB_ERR_OUT_OF_BOUNDS, "negative");
  EXPECT_STATUS(ctx, clb_tensor_write(ctx, t, d4, big, 5), CLB_ERR_INVALID_ARG, "5 bytes given");
  EXPECT_STATUS(ctx, clb_tensor_set_sizes(ctx, t, d11), CLB_ERR_OUT_OF_BOUNDS, "dim 0");
  int64_t got[2];
  int64_t n = clb_test_read(ctx, t, got, back, 33);
  EXPECT_EQ_I(n, 12);
  EXPECT_EQ_I(got[0], 4);
  for (int i = 0; i < 12; i++) EXPECT_TRUE(back[i] == v[i]);
  float small[2];
  EXPECT_STATUS(ctx, clb_tensor_read(ctx, t, NULL, small, sizeof small, NULL), CLB_ERR_BUFFER_SMALL, "48 bytes live");
  /* set_sizes changes the actual size on the device without data */
  int64_t d7[2] = {7, 3};
  CL_OK(ctx, clb_tensor_set_sizes(ctx, t, d7));
  CL_OK(ctx, clb_tensor_sizes(ctx, t, got));
  EXPECT_EQ_I(got[0], 7);
  clb_tensor_free(t);
  clb_tensor_free(NULL);
}

static void test_oom(void) {
  clb_context_t ctx = clb_test_context(NULL);
  /* More than the device can give: out of memory, and the context lives on. */
  int64_t huge[2] = {1 << 20, 1 << 20};
  clb_tensor_t t = NULL;
  EXPECT_STATUS(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, huge, NULL, &t), CLB_ERR_OOM, "bytes");
  EXPECT_TRUE(strstr(clb_context_errmsg(ctx), "[1048576, 1048576] f32") != NULL);
  int64_t over[3] = {INT64_MAX / 4, 8, 8};
  EXPECT_STATUS(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 3, over, NULL, &t), CLB_ERR_OOM, "overflow");
  int64_t ok[1] = {4};
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 1, ok, NULL, &t));
  double v[4] = {1, 2, 3, 4}, back[4];
  clb_test_write(ctx, t, ok, v);
  EXPECT_EQ_I(clb_test_read(ctx, t, NULL, back, 4), 4);
  EXPECT_TRUE(back[3] == 4);
  clb_context_free(ctx);

  /* A context capped at 1 MiB: the cap is honoured, freeing makes room again. */
  clb_context_options o;
  clb_context_options_init(&o);
  o.device_memory_limit = 1 << 20;
  ctx = clb_test_context(&o);
  int64_t half[1] = {(1 << 19) / 4}, most[1] = {(3 << 18) / 4};
  clb_tensor_t a = NULL, b = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, half, NULL, &a));
  EXPECT_STATUS(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, most, NULL, &b), CLB_ERR_OOM, "limit");
  clb_tensor_free(a);
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, most, NULL, &b));
  clb_context_free(ctx);
}

static void test_pool_reuse(clb_context_t ctx) {
  clb_counters c0, c1;
  c0.struct_size = c1.struct_size = sizeof c0;
  int64_t b[2] = {256, 256};
  clb_tensor_t t = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b, NULL, &t));
  clb_tensor_free(t);
  clb_context_counters(ctx, &c0);
  t = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b, NULL, &t));
  clb_context_counters(ctx, &c1);
  EXPECT_EQ_I(c1.buffers_fresh, c0.buffers_fresh);      /* nothing new */
  EXPECT_EQ_I(c1.buffers_reused, c0.buffers_reused + 2); /* data and shape record */
  EXPECT_TRUE(c1.device_bytes_live >= 256 * 256 * 4);
  EXPECT_TRUE(c1.peak_device_bytes >= c1.device_bytes_held);
  clb_tensor_free(t);
}

/* Host writes stage a copy of their data; the copies are freed once written,
 * found at the next write or host sync (no event callbacks). After a sync the
 * heap holds none of them: 32 writes of 4 MiB leave less than 1 MiB more in use
 * than before (mallinfo2: blocks in use plus mmap blocks). */
static void test_staging_freed(clb_context_t ctx) {
  CLB_TEST_CASE("core/tensor: staging copies freed at the next host sync");
  int64_t n = 1 << 20;
  clb_tensor_t t = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &n, NULL, &t));
  float *v = calloc((size_t)n, sizeof *v);
  REQUIRE_TRUE(v != NULL);
  /* a first write and sync, so the driver's own allocation (PoCL allocates a
   * buffer's storage at its first use) is in the baseline */
  CL_OK(ctx, clb_tensor_write(ctx, t, &n, v, (size_t)n * sizeof *v));
  CL_OK(ctx, clb_context_sync(ctx));
  struct mallinfo2 m0 = mallinfo2();
  size_t before = m0.uordblks + m0.hblkhd;
  for (int i = 0; i < 32; i++) {
    v[0] = (float)i;
    CL_OK(ctx, clb_tensor_write(ctx, t, &n, v, (size_t)n * sizeof *v));
  }
  CL_OK(ctx, clb_context_sync(ctx));
  struct mallinfo2 m1 = mallinfo2();
  size_t after = m1.uordblks + m1.hblkhd;
  clb_test_checks++;
  if (after > before + (size_t)n * sizeof *v / 4)
    CLB_FAIL_AT("after 32 writes of 4 MiB and a sync, the heap holds %zu bytes more than before", after - before);
  int64_t dims[1] = {0};
  CL_OK(ctx, clb_tensor_read(ctx, t, dims, v, (size_t)n * sizeof *v, NULL));
  EXPECT_EQ_I(dims[0], n);
  EXPECT_EQ_I((long long)v[0], 31); /* the last write's data */
  free(v);
  clb_tensor_free(t);
}

/* clb_tensors_read: several tensors (a dynamic f32 matrix, a static i64 vector,
 * an empty one, a rank-0 bool) with one counted host sync, each as
 * clb_tensor_read gives it; a small buffer and bad arguments. */
static void test_read_many(clb_context_t ctx) {
  int64_t b0[2] = {6, 3}, d0[2] = {4, 3}, b1[1] = {5}, b2[1] = {7}, d2[1] = {0};
  uint8_t dyn0[2] = {1, 0}, dyn2[1] = {1};
  clb_tensor_t t[4] = {NULL, NULL, NULL, NULL};
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b0, dyn0, &t[0]));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 1, b1, NULL, &t[1]));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b2, dyn2, &t[2]));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 0, NULL, NULL, &t[3]));
  float v0[12];
  int64_t v1[5] = {-7, 0, 9000000000LL, 3, -1};
  uint8_t v3 = 1;
  for (int i = 0; i < 12; i++) v0[i] = 0.5f * (float)i - 2.0f;
  CL_OK(ctx, clb_tensor_write(ctx, t[0], d0, v0, sizeof v0));
  CL_OK(ctx, clb_tensor_write(ctx, t[1], b1, v1, sizeof v1));
  CL_OK(ctx, clb_tensor_write(ctx, t[2], d2, v0, 0));
  CL_OK(ctx, clb_tensor_write(ctx, t[3], NULL, &v3, 1));
  float r0[18];
  int64_t r1[5];
  float r2[7];
  uint8_t r3 = 0;
  void *hosts[4] = {r0, r1, r2, &r3};
  size_t caps[4] = {sizeof r0, sizeof r1, sizeof r2, 1}, got[4] = {0, 0, 0, 0};
  int64_t dims[4 * CLB_MAX_RANK];
  memset(dims, 0xff, sizeof dims);
  uint64_t syncs = clb_test_counter_syncs(ctx);
  CL_OK(ctx, clb_tensors_read(ctx, 4, t, dims, hosts, caps, got));
  EXPECT_EQ_I(clb_test_counter_syncs(ctx) - syncs, 1);
  EXPECT_EQ_I(dims[0], 4);
  EXPECT_EQ_I(dims[1], 3);
  EXPECT_EQ_I(dims[CLB_MAX_RANK], 5);
  EXPECT_EQ_I(dims[2 * CLB_MAX_RANK], 0);
  EXPECT_EQ_I(got[0], 12 * sizeof(float));
  EXPECT_EQ_I(got[1], sizeof v1);
  EXPECT_EQ_I(got[2], 0);
  EXPECT_EQ_I(got[3], 1);
  for (int i = 0; i < 12; i++) EXPECT_TRUE(r0[i] == v0[i]);
  for (int i = 0; i < 5; i++) EXPECT_EQ_I(r1[i], v1[i]);
  EXPECT_EQ_I(r3, 1);
  /* a buffer too small for its live part: nothing read, the sizes given */
  caps[0] = 11 * sizeof(float);
  r1[0] = 42;
  EXPECT_STATUS(ctx, clb_tensors_read(ctx, 4, t, dims, hosts, caps, got), CLB_ERR_BUFFER_SMALL,
                "ts[0] has 48 bytes live, its buffer holds 44");
  EXPECT_EQ_I(got[0], 48);
  EXPECT_EQ_I(r1[0], 42);
  caps[0] = sizeof r0;
  EXPECT_EQ_I(clb_tensors_read(ctx, 0, NULL, NULL, NULL, NULL, NULL), CLB_OK);
  EXPECT_STATUS(ctx, clb_tensors_read(ctx, -1, t, dims, hosts, caps, got), CLB_ERR_INVALID_ARG, "n is -1");
  EXPECT_STATUS(ctx, clb_tensors_read(ctx, 2, t, dims, NULL, caps, got), CLB_ERR_NULL, "hosts");
  clb_tensor_t bad[2] = {t[0], NULL};
  EXPECT_STATUS(ctx, clb_tensors_read(ctx, 2, bad, dims, hosts, caps, got), CLB_ERR_NULL, "ts[1]");
  EXPECT_TRUE(clb_tensors_read(NULL, 1, t, dims, hosts, caps, got) == CLB_ERR_NULL);
  for (int i = 0; i < 4; i++) clb_tensor_free(t[i]);
}

/* clb_tensor_from_host: where the device's buffers are host memory (PoCL's CPU
 * device), the tensor is the host array itself: ops read the host's latest
 * writes and their outputs land in it, with no copy; elsewhere it is refused. */
static void test_from_host(clb_context_t ctx) {
  float host[12], out_host[12];
  for (int i = 0; i < 12; i++) host[i] = (float)i - 5.5f;
  int64_t dims[2] = {4, 3};
  clb_tensor_t t = NULL, o = NULL, n = NULL;
  clb_status st = clb_tensor_from_host(ctx, CLB_DTYPE_F32, 2, dims, host, sizeof host, &t);
  clb_device_info di;
  di.struct_size = sizeof di;
  clb_device_info_get(0, &di);
  if (st == CLB_ERR_UNSUPPORTED) { /* a GPU (or host pointers turned off): refused, with the way out */
    EXPECT_TRUE(!di.is_cpu || getenv("CLBOUND_HOST_PTRS") != NULL);
    EXPECT_TRUE(strstr(clb_context_errmsg(ctx), "clb_tensor_write") != NULL);
    return;
  }
  REQUIRE_TRUE(st == CLB_OK);
  CL_OK(ctx, clb_tensor_from_host(ctx, CLB_DTYPE_F32, 2, dims, out_host, sizeof out_host, &o));
  float back[12];
  int64_t got[2];
  double first[12];
  EXPECT_EQ_I(clb_test_read(ctx, t, got, first, 12), 12);
  for (int i = 0; i < 12; i++) EXPECT_TRUE(first[i] == (double)host[i]);
  /* an op reads the host's values, and writes its output into out_host */
  CL_OK(ctx, clb_unary(ctx, CLB_UNARY_NEG, t, &o));
  CL_OK(ctx, clb_context_sync(ctx));
  for (int i = 0; i < 12; i++) EXPECT_TRUE(out_host[i] == -host[i]);
  /* the host writes between ops (the queue idle): the next op sees them */
  for (int i = 0; i < 12; i++) host[i] = 2.0f * (float)i;
  CL_OK(ctx, clb_unary(ctx, CLB_UNARY_NEG, t, &n));
  CL_OK(ctx, clb_tensor_read(ctx, n, got, back, sizeof back, NULL));
  for (int i = 0; i < 12; i++) EXPECT_TRUE(back[i] == -2.0f * (float)i);
  EXPECT_EQ_I(got[0], 4);
  EXPECT_EQ_I(got[1], 3);
  /* bad input */
  clb_tensor_t bad = NULL;
  EXPECT_STATUS(ctx, clb_tensor_from_host(ctx, CLB_DTYPE_F32, 2, dims, host, 40, &bad), CLB_ERR_INVALID_ARG,
                "40 bytes given, the tensor holds 48");
  EXPECT_STATUS(ctx, clb_tensor_from_host(ctx, CLB_DTYPE_F32, 2, dims, NULL, 48, &bad), CLB_ERR_NULL, "host is NULL");
  EXPECT_TRUE(bad == NULL);
  clb_tensor_free(n);
  clb_tensor_free(o);
  clb_tensor_free(t);
  /* CLBOUND_HOST_PTRS=off: a context that keeps no host pointers refuses */
  REQUIRE_TRUE(setenv("CLBOUND_HOST_PTRS", "off", 1) == 0);
  clb_context_t c2 = clb_test_context(NULL);
  EXPECT_STATUS(c2, clb_tensor_from_host(c2, CLB_DTYPE_F32, 2, dims, host, sizeof host, &bad), CLB_ERR_UNSUPPORTED,
                "copy with clb_tensor_write");
  clb_context_free(c2);
  unsetenv("CLBOUND_HOST_PTRS");
}

/* clb_tensor_write_borrowed: no copy on the calling thread; the caller's
 * release runs once the write is done (or at once where nothing is written). */
static int released;
static void count_release(void *arg) { released += arg == &released; }

static void test_write_borrowed(void) {
  CLB_TEST_CASE("core/tensor: borrowed writes");
  clb_context_t ctx = clb_test_context(NULL);
  int64_t bounds[2] = {10, 4}, dims[2] = {3, 4}, got[2];
  uint8_t dyn[2] = {1, 0};
  clb_tensor_t t = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, bounds, dyn, &t));
  float a[12], back[40];
  for (int i = 0; i < 12; i++) a[i] = 1.5f * (float)i - 4.0f;
  released = 0;
  CL_OK(ctx, clb_tensor_write_borrowed(ctx, t, dims, a, sizeof a, count_release, &released));
  EXPECT_EQ_I(released, 0); /* nothing has reaped the write yet */
  CL_OK(ctx, clb_context_sync(ctx));
  EXPECT_EQ_I(released, 1);
  CL_OK(ctx, clb_tensor_read(ctx, t, got, back, sizeof back, NULL));
  EXPECT_TRUE(got[0] == 3 && got[1] == 4 && memcmp(back, a, sizeof a) == 0);
  /* no release: the caller keeps the memory until the next sync */
  int64_t two[2] = {2, 4};
  CL_OK(ctx, clb_tensor_write_borrowed(ctx, t, two, a + 4, 8 * sizeof *a, NULL, NULL));
  CL_OK(ctx, clb_tensor_read(ctx, t, got, back, sizeof back, NULL));
  EXPECT_TRUE(got[0] == 2 && memcmp(back, a + 4, 8 * sizeof *a) == 0);
  /* bad input and empty writes release at once, and write nothing */
  int64_t over[2] = {11, 4}, empty[2] = {0, 4};
  EXPECT_STATUS(ctx, clb_tensor_write_borrowed(ctx, t, over, a, 44 * sizeof *a, count_release, &released),
                CLB_ERR_OUT_OF_BOUNDS, "clb_tensor_write_borrowed");
  EXPECT_EQ_I(released, 2);
  EXPECT_STATUS(ctx, clb_tensor_write_borrowed(ctx, t, dims, a, 7, count_release, &released), CLB_ERR_INVALID_ARG,
                "7 bytes given");
  EXPECT_EQ_I(released, 3);
  CL_OK(ctx, clb_tensor_read(ctx, t, got, back, sizeof back, NULL));
  EXPECT_TRUE(got[0] == 2 && memcmp(back, a + 4, 8 * sizeof *a) == 0);
  CL_OK(ctx, clb_tensor_write_borrowed(ctx, t, empty, NULL, 0, count_release, &released));
  EXPECT_EQ_I(released, 4);
  CL_OK(ctx, clb_tensor_sizes(ctx, t, got));
  EXPECT_EQ_I(got[0], 0);
  EXPECT_TRUE(clb_tensor_write_borrowed(NULL, t, dims, a, sizeof a, count_release, &released) == CLB_ERR_NULL);
  EXPECT_EQ_I(released, 5);
  /* still borrowed when the context is freed: the free releases it */
  CL_OK(ctx, clb_tensor_write_borrowed(ctx, t, dims, a, sizeof a, count_release, &released));
  clb_tensor_free(t);
  clb_context_free(ctx);
  EXPECT_EQ_I(released, 6);
}

static uint64_t host_writes(clb_context_t ctx) {
  clb_counters c;
  c.struct_size = sizeof c;
  CL_OK(ctx, clb_context_counters(ctx, &c));
  return c.host_writes;
}

/* clb_tensor_new_write_borrowed: a new tensor filled from the caller's memory,
 * with one shape-record write where new + write make two; an op reads its
 * actual sizes; every failure releases and leaves *out NULL. */
static void test_new_write_borrowed(void) {
  CLB_TEST_CASE("core/tensor: new and borrowed write in one call");
  clb_context_t ctx = clb_test_context(NULL);
  int64_t bounds[2] = {10, 4}, dims[2] = {3, 4}, got[2];
  uint8_t dyn[2] = {1, 0};
  float a[12], back[40];
  for (int i = 0; i < 12; i++) a[i] = 1.5f * (float)i - 4.0f;
  released = 0;
  clb_tensor_t t = NULL, two = NULL, r = NULL;
  uint64_t w0 = host_writes(ctx);
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, bounds, dyn, &two));
  CL_OK(ctx, clb_tensor_write_borrowed(ctx, two, dims, a, sizeof a, NULL, NULL));
  uint64_t w1 = host_writes(ctx);
  CL_OK(ctx, clb_tensor_new_write_borrowed(ctx, CLB_DTYPE_F32, 2, bounds, dyn, dims, a, sizeof a, count_release,
                                           &released, &t));
  EXPECT_EQ_I(w1 - w0, 3); /* the bounds' record, the dims' record, the data */
  EXPECT_EQ_I(host_writes(ctx) - w1, 2); /* the dims' record, the data */
  EXPECT_EQ_I(released, 0);
  CL_OK(ctx, clb_unary(ctx, CLB_UNARY_RELU, t, &r));
  CL_OK(ctx, clb_context_sync(ctx));
  EXPECT_EQ_I(released, 1);
  CL_OK(ctx, clb_tensor_read(ctx, t, got, back, sizeof back, NULL));
  EXPECT_TRUE(got[0] == 3 && got[1] == 4 && memcmp(back, a, sizeof a) == 0);
  CL_OK(ctx, clb_tensor_read(ctx, r, got, back, sizeof back, NULL));
  EXPECT_TRUE(got[0] == 3 && got[1] == 4);
  for (int i = 0; i < 12; i++) EXPECT_TRUE(back[i] == (a[i] > 0 ? a[i] : 0.0f));
  EXPECT_TRUE(clb_tensor_is_dynamic(t, 0) && !clb_tensor_is_dynamic(t, 1));
  clb_tensor_free(r);
  clb_tensor_free(t);
  clb_tensor_free(two);
  /* static: its record holds the bounds from its making */
  int64_t sb[2] = {3, 4};
  CL_OK(ctx, clb_tensor_new_write_borrowed(ctx, CLB_DTYPE_F32, 2, sb, NULL, sb, a, sizeof a, NULL, NULL, &t));
  CL_OK(ctx, clb_tensor_read(ctx, t, got, back, sizeof back, NULL));
  EXPECT_TRUE(got[0] == 3 && got[1] == 4 && memcmp(back, a, sizeof a) == 0);
  clb_tensor_free(t);
  /* failures: released at once, nothing made */
  int64_t over[2] = {11, 4};
  t = (clb_tensor_t)&released; /* overwritten with NULL */
  EXPECT_STATUS(ctx, clb_tensor_new_write_borrowed(ctx, CLB_DTYPE_F32, 2, bounds, dyn, over, a, 44 * sizeof *a,
                                                   count_release, &released, &t),
                CLB_ERR_OUT_OF_BOUNDS, "clb_tensor_new_write_borrowed");
  EXPECT_TRUE(t == NULL);
  EXPECT_EQ_I(released, 2);
  EXPECT_STATUS(ctx, clb_tensor_new_write_borrowed(ctx, CLB_DTYPE_F32, 2, bounds, dyn, dims, a, 7, count_release,
                                                   &released, &t),
                CLB_ERR_INVALID_ARG, "7 bytes given");
  EXPECT_EQ_I(released, 3);
  EXPECT_STATUS(ctx, clb_tensor_new_write_borrowed(ctx, CLB_DTYPE_F32, 9, bounds, dyn, dims, a, sizeof a,
                                                   count_release, &released, &t),
                CLB_ERR_RANK, "rank 9");
  EXPECT_EQ_I(released, 4);
  EXPECT_STATUS(ctx, clb_tensor_new_write_borrowed(ctx, CLB_DTYPE_F32, 2, bounds, dyn, dims, a, sizeof a,
                                                   count_release, &released, NULL),
                CLB_ERR_NULL, "out is NULL");
  EXPECT_EQ_I(released, 5);
  EXPECT_TRUE(clb_tensor_new_write_borrowed(NULL, CLB_DTYPE_F32, 2, bounds, dyn, dims, a, sizeof a, count_release,
                                            &released, &t) == CLB_ERR_NULL);
  EXPECT_EQ_I(released, 6);
  clb_context_free(ctx);
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  test_staging_freed(ctx);
  test_roundtrip(ctx);
  test_bad_input(ctx);
  test_pool_reuse(ctx);
  test_read_many(ctx);
  test_from_host(ctx);
  clb_context_free(ctx);
  test_write_borrowed();
  test_new_write_borrowed();
  test_oom();
  return clb_test_finish("core/tensor");
}
