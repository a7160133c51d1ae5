/* cl-test.h: helpers for tests that run on an OpenCL device: a context (a missing
 * device fails under CI, else skips), dtype-generic writes and reads, canaries. */
#ifndef CLB_CL_TEST_H
#define CLB_CL_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clbound/clbound.h"
#include "test.h"

#define CLB_TEST_SKIP 77
#define CLB_CANARY 0xA5

/* Whether a missing device must fail the test: CI or CLBOUND_REQUIRE_DEVICE is
 * set (CI, on PoCL, must never skip). */
static inline int clb_test_device_required(void) {
  return clb_test_env_on("CI") || clb_test_env_on("CLBOUND_REQUIRE_DEVICE");
}

/* Ends a test that needs what the machine lacks (`why`): exit 77 (CTest's skip,
 * SKIP_RETURN_CODE) with the reason printed, or exit 1 where a device is
 * required (clb_test_device_required). */
static inline void clb_test_skip(const char *why) {
  if (clb_test_device_required()) {
    fprintf(stderr, "failing: %s (CI or CLBOUND_REQUIRE_DEVICE is set: this must not skip)\n", why);
    exit(1);
  }
  fprintf(stderr, "skipping: %s\n", why);
  exit(CLB_TEST_SKIP);
}

/* Creates a context on the default device. Without one: exit 1 when CI or
 * CLBOUND_REQUIRE_DEVICE is set (CI must never skip), else exit 77 (skipped). */
static inline clb_context_t clb_test_context(const clb_context_options *opts) {
  clb_context_t ctx = NULL;
  clb_status st = clb_context_new(opts, &ctx);
  if (st == CLB_OK) return ctx;
  fprintf(stderr, "no OpenCL context: %s: %s\n", clb_status_str(st), clb_last_errmsg());
  if (st == CLB_ERR_NO_DEVICE) clb_test_skip("no OpenCL device (set CI=true to make this a failure)");
  exit(1);
}

/* The double reference of the floating unary ops (sigmoid, tanh, exp, log,
 * erf, abs, sqrt, rsqrt, log1p, expm1, floor, ceil, round, trunc, sin, cos,
 * log2, log10, exp2); x itself for the others, which each test writes out for
 * its dtypes. */
static inline double clb_test_unary_ref(clb_unary_op op, double x) {
  switch (op) {
  case CLB_UNARY_SIGMOID: return 1.0 / (1.0 + exp(-x));
  case CLB_UNARY_TANH: return tanh(x);
  case CLB_UNARY_EXP: return exp(x);
  case CLB_UNARY_LOG: return log(x);
  case CLB_UNARY_ERF: return erf(x);
  case CLB_UNARY_ABS: return fabs(x);
  case CLB_UNARY_SQRT: return sqrt(x);
  case CLB_UNARY_RSQRT: return 1 / sqrt(x);
  case CLB_UNARY_LOG1P: return log1p(x);
  case CLB_UNARY_EXPM1: return expm1(x);
  case CLB_UNARY_FLOOR: return floor(x);
  case CLB_UNARY_CEIL: return ceil(x);
  case CLB_UNARY_ROUND: return nearbyint(x); /* ties to even in the default rounding mode */
  case CLB_UNARY_TRUNC: return trunc(x);
  case CLB_UNARY_SIN: return sin(x);
  case CLB_UNARY_COS: return cos(x);
  case CLB_UNARY_LOG2: return log2(x);
  case CLB_UNARY_LOG10: return log10(x);
  case CLB_UNARY_EXP2: return exp2(x);
  default: return x;
  }
}

/* Whether the default device has f64 (cl_khr_fp64). */
static inline int clb_test_has_fp64(void) {
  clb_device_info di;
  di.struct_size = sizeof di;
  return clb_device_info_get(0, &di) == CLB_OK && di.has_fp64;
}

/* Stops the test when an API call fails, printing the context's message. */
#define CL_OK(ctx, call)                                                                \
  do {                                                                                  \
    clb_status st_ = (call);                                                            \
    if (st_ != CLB_OK) {                                                                \
      CLB_FAIL_AT("%s: %s: %s", #call, clb_status_name(st_), clb_context_errmsg(ctx));  \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

/* A graph under the dynamic policy (one plan for every size), named `name`
 * (NULL: the default name), releasing intermediates when free_intermediates. */
static inline clb_graph_t clb_test_dynamic_graph(clb_context_t ctx, const char *name, int free_intermediates) {
  clb_graph_options o;
  clb_graph_options_init(&o);
  o.policy = CLB_POLICY_DYNAMIC;
  o.free_intermediates = free_intermediates;
  o.name = name;
  clb_graph_t g = NULL;
  CL_OK(ctx, clb_graph_new(ctx, &o, &g));
  return g;
}

/* Expects a call to fail with `want` and a message containing `needle`. */
#define EXPECT_STATUS(ctx, call, want, needle)                                          \
  do {                                                                                  \
    clb_status st_ = (call);                                                            \
    clb_test_checks++;                                                                  \
    if (st_ != (want))                                                                  \
      CLB_FAIL_AT("%s: got %s, want %s (%s)", #call, clb_status_name(st_),              \
                  clb_status_name(want), clb_context_errmsg(ctx));                      \
    else if ((needle) && !strstr(clb_context_errmsg(ctx), (needle)))                    \
      CLB_FAIL_AT("%s: message \"%s\" lacks \"%s\"", #call, clb_context_errmsg(ctx), (const char *)(needle)); \
  } while (0)

static inline void clb_test_to_dtype(clb_dtype dt, const double *src, void *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    switch (dt) {
    case CLB_DTYPE_F32: ((float *)dst)[i] = (float)src[i]; break;
    case CLB_DTYPE_F64: ((double *)dst)[i] = src[i]; break;
    case CLB_DTYPE_I32: ((int32_t *)dst)[i] = (int32_t)src[i]; break;
    case CLB_DTYPE_I64: ((int64_t *)dst)[i] = (int64_t)src[i]; break;
    case CLB_DTYPE_U8: ((uint8_t *)dst)[i] = (uint8_t)src[i]; break;
    default: ((uint8_t *)dst)[i] = src[i] != 0.0; break;
    }
  }
}

static inline double clb_test_elem(clb_dtype dt, const void *p, int64_t i) {
  switch (dt) {
  case CLB_DTYPE_F32: return ((const float *)p)[i];
  case CLB_DTYPE_F64: return ((const double *)p)[i];
  case CLB_DTYPE_I32: return ((const int32_t *)p)[i];
  case CLB_DTYPE_I64: return (double)((const int64_t *)p)[i];
  default: return ((const uint8_t *)p)[i];
  }
}

static inline int64_t clb_test_numel(int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++) n *= dims[d];
  return n;
}

/* Writes doubles into t at actual sizes `dims`, converted to t's dtype. */
static inline void clb_test_write(clb_context_t ctx, clb_tensor_t t, const int64_t *dims, const double *vals) {
  clb_dtype dt = clb_tensor_dtype(t);
  int64_t n = clb_test_numel(clb_tensor_rank(t), dims);
  size_t bytes = (size_t)n * clb_dtype_size(dt);
  void *buf = malloc(bytes ? bytes : 1);
  REQUIRE_TRUE(buf != NULL);
  clb_test_to_dtype(dt, vals, buf, n);
  CL_OK(ctx, clb_tensor_write(ctx, t, dims, buf, bytes));
  free(buf);
}

/* Reads t as doubles; returns the element count, dims into dims[rank]. */
static inline int64_t clb_test_read(clb_context_t ctx, clb_tensor_t t, int64_t *dims, double *vals, int64_t cap) {
  clb_dtype dt = clb_tensor_dtype(t);
  size_t cap_bytes = (size_t)cap * clb_dtype_size(dt);
  void *buf = malloc(cap_bytes ? cap_bytes : 1);
  REQUIRE_TRUE(buf != NULL);
  size_t got = 0;
  CL_OK(ctx, clb_tensor_read(ctx, t, dims, buf, cap_bytes, &got));
  int64_t n = (int64_t)(got / clb_dtype_size(dt));
  for (int64_t i = 0; i < n; i++) vals[i] = clb_test_elem(dt, buf, i);
  free(buf);
  return n;
}

/* Fills a tensor's whole data buffer (bound plus pool slack) with the canary. */
static inline void clb_test_canary_fill(clb_context_t ctx, clb_tensor_t t) {
  cl_mem m = clb_tensor_data_mem(t);
  size_t size = 0;
  clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof size, &size, NULL);
  cl_uchar pat = CLB_CANARY;
  REQUIRE_TRUE(clEnqueueFillBuffer(clb_context_cl_queue(ctx), m, &pat, 1, 0, size, 0, NULL, NULL) == CL_SUCCESS);
}

/* Checks that every byte of t's data buffer from `live_bytes` to its end still
 * holds the canary: nothing was written past the live region. */
static inline void clb_test_canary_check(clb_context_t ctx, clb_tensor_t t, size_t live_bytes, const char *what) {
  cl_mem m = clb_tensor_data_mem(t);
  size_t size = 0;
  clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof size, &size, NULL);
  if (live_bytes >= size) return;
  unsigned char *buf = malloc(size - live_bytes);
  REQUIRE_TRUE(buf != NULL);
  REQUIRE_TRUE(clEnqueueReadBuffer(clb_context_cl_queue(ctx), m, CL_TRUE, live_bytes, size - live_bytes, buf, 0,
                                   NULL, NULL) == CL_SUCCESS);
  size_t bad = 0;
  for (size_t i = 0; i < size - live_bytes; i++) bad += buf[i] != CLB_CANARY;
  clb_test_checks++;
  if (bad) CLB_FAIL_AT("%s: %zu bytes past the live %zu were written (buffer %zu)", what, bad, live_bytes, size);
  free(buf);
}

static inline uint64_t clb_test_counter_builds(clb_context_t ctx) {
  clb_counters c;
  c.struct_size = sizeof c;
  clb_context_counters(ctx, &c);
  return c.program_builds;
}

static inline uint64_t clb_test_counter_syncs(clb_context_t ctx) {
  clb_counters c;
  c.struct_size = sizeof c;
  clb_context_counters(ctx, &c);
  return c.host_syncs;
}

/* A deterministic generator for test data. */
static uint64_t clb_test_rng = 0x9E3779B97F4A7C15ull;
static inline uint64_t clb_test_next(void) {
  clb_test_rng ^= clb_test_rng << 13;
  clb_test_rng ^= clb_test_rng >> 7;
  clb_test_rng ^= clb_test_rng << 17;
  return clb_test_rng;
}

#endif /* CLB_CL_TEST_H */
