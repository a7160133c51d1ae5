/* gemm-host.c: host BLAS inside the queue on CPU devices, and which GEMM
 * strategy a context uses (AUTO resolved per device, CLBOUND_GEMM).
 *
 * On a device that runs native kernels (PoCL's CPU device), a matmul is one
 * clEnqueueNativeKernel: the driver hands the function host pointers to the
 * operands' data, their shape records, the output and the status word, in queue
 * order, so the function reads the actual M, N and K itself and calls CBLAS. No
 * host sync, the same overflow protocol as the OpenCL kernels (docs/gemm.md).
 * Built without OpenBLAS (CLBOUND_HAVE_OPENBLAS undefined), host BLAS is
 * unavailable and AUTO resolves to clbound's kernel. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clbound/nn.h"
#include "runtime/ops/gemm-host.h"

#ifdef CLBOUND_HAVE_OPENBLAS
#include <cblas.h>
#include <pthread.h>
#endif

/* ---- Which strategy ---------------------------------------------------------- */

static const struct {
  const char *name;
  int s;
} gemm_names[] = {{"auto", CLB_GEMM_AUTO},           {"host-blas", CLB_GEMM_HOST_BLAS},
                  {"kernel", CLB_GEMM_DEVICE},        {"device", CLB_GEMM_DEVICE},
                  {"clblast-bound", CLB_GEMM_CLBLAST_BOUND}, {"clblast", CLB_GEMM_CLBLAST_BOUND},
                  {"sync-exact", CLB_GEMM_SYNC_EXACT}};

static const char *strategy_name(int s) {
  for (size_t i = 0; i < sizeof gemm_names / sizeof gemm_names[0]; i++)
    if (gemm_names[i].s == s) return gemm_names[i].name;
  return "?";
}

int clb__gemm_host_available(clb_context_t ctx, const char **why) {
#ifndef CLBOUND_HAVE_OPENBLAS
  (void)ctx;
  *why = "this clbound was built without OpenBLAS";
  return 0;
#else
  cl_device_exec_capabilities caps = 0;
  cl_int e = clGetDeviceInfo(ctx->device, CL_DEVICE_EXECUTION_CAPABILITIES, sizeof caps, &caps, NULL);
  if (e != CL_SUCCESS) {
    *why = "the device's execution capabilities cannot be read";
    return 0;
  }
  if (!(caps & CL_EXEC_NATIVE_KERNEL)) {
    *why = "the device does not run native kernels (CL_EXEC_NATIVE_KERNEL)";
    return 0;
  }
  *why = "";
  return 1;
#endif
}

/* ctx->gemm_resolved: RESOLVED_SET | (AUTO's resolution) | FORCED_ENV * (1 +
 * strategy named by CLBOUND_GEMM) | WARNED when a forced HOST_BLAS fell back. */
#define RESOLVED_SET 0x1000
#define RESOLVED_MASK 0xf
#define FORCED_SHIFT 4
#define WARNED 0x2000

static int resolve_once(clb_context_t ctx) {
  if (ctx->gemm_resolved & RESOLVED_SET) return ctx->gemm_resolved;
  int r = RESOLVED_SET;
  const char *env = getenv("CLBOUND_GEMM");
  if (env && *env) {
    int found = -1;
    for (size_t i = 0; i < sizeof gemm_names / sizeof gemm_names[0]; i++)
      if (strcmp(env, gemm_names[i].name) == 0) found = gemm_names[i].s;
    if (found < 0)
      clb__log(ctx, CLB_LOG_GEMM, "CLBOUND_GEMM=%s is not a strategy (auto, host-blas, kernel, clblast-bound, "
               "sync-exact): ignored", env);
    else if (found != CLB_GEMM_AUTO) {
      r |= (found + 1) << FORCED_SHIFT;
      clb__log(ctx, CLB_LOG_GEMM, "CLBOUND_GEMM=%s: matmuls use %s unless the context sets a strategy", env,
               strategy_name(found));
    }
  }
  const char *why;
  if (clb__gemm_host_available(ctx, &why)) {
    r |= CLB_GEMM_HOST_BLAS;
    clb__log(ctx, CLB_LOG_GEMM, "auto: host-blas (the device runs native kernels: CBLAS in the queue)");
  } else {
    r |= CLB_GEMM_DEVICE;
    clb__log(ctx, CLB_LOG_GEMM, "auto: kernel (clbound's GEMM kernel): host-blas cannot run: %s", why);
  }
  ctx->gemm_resolved = r;
  return r;
}

int clb__gemm_resolve(clb_context_t ctx, int *forced) {
  int r = resolve_once(ctx);
  int s = ctx->gemm_strategy;
  if (s == CLB_GEMM_AUTO && ((r >> FORCED_SHIFT) & 0xff)) s = ((r >> FORCED_SHIFT) & 0xff) - 1;
  *forced = s != CLB_GEMM_AUTO;
  if (s == CLB_GEMM_AUTO) return r & RESOLVED_MASK;
  if (s == CLB_GEMM_HOST_BLAS && (r & RESOLVED_MASK) != CLB_GEMM_HOST_BLAS) {
    if (!(r & WARNED)) {
      const char *why;
      clb__gemm_host_available(ctx, &why);
      clb__log(ctx, CLB_LOG_GEMM, "host-blas was asked for but cannot run (%s): kernel runs instead", why);
      ctx->gemm_resolved |= WARNED;
    }
    return CLB_GEMM_DEVICE;
  }
  return s;
}

int clb_context_gemm_strategy(clb_context_t ctx) {
  if (!ctx) return -1;
  int forced;
  return clb__gemm_resolve(ctx, &forced);
}

/* ---- The native kernel ------------------------------------------------------- */

#ifdef CLBOUND_HAVE_OPENBLAS

/* The native kernel's argument block (the driver runs the function on a copy). */
typedef struct host_gemm_args {
  void *a, *sa, *b, *sb, *c, *sc, *st, *bias, *cs, *scs; /* host pointers of the mapped buffers */
  int ta, tb, f64, has_bias, has_colsum, relu;
  int64_t abound[2], bbound[2];
  uint32_t launch;
} host_gemm_args;

/* Raises `bit` and records the launch and values in the first free slot of the
 * status word (or finds this launch's slot), as clb_raise in kernels/common.cl
 * does: layout in runtime/core/core.h. */
static void host_raise(int32_t *st, uint32_t launch, uint32_t bit, int64_t v1, int64_t v2) {
  __atomic_fetch_or(&st[0], (int32_t)bit, __ATOMIC_RELAXED);
  for (int k = 0; k < CLB_STATUS_SLOTS; k++) {
    int32_t *s = st + 2 + CLB_STATUS_SLOT_INTS * k;
    int32_t expected = 0;
    if (!__atomic_compare_exchange_n(&s[0], &expected, (int32_t)launch, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
      if (expected == (int32_t)launch) return; /* this launch has its slot */
      continue;
    }
    s[1] = (int32_t)bit;
    s[2] = (int32_t)(uint32_t)((uint64_t)v1 & 0xffffffffu);
    s[3] = (int32_t)(v1 >> 32);
    s[4] = (int32_t)(uint32_t)((uint64_t)v2 & 0xffffffffu);
    s[5] = (int32_t)(v2 >> 32);
    return;
  }
}

/* A size from a shape record, clamped into [0, bound] (raising the bound bit). */
static int64_t host_dim(const host_gemm_args *g, int64_t v, int64_t bound) {
  if (v >= 0 && v <= bound) return v;
  host_raise(g->st, g->launch, CLB_STF_BOUND_EXCEEDED, v, bound);
  return v < 0 ? 0 : bound;
}

/* OpenBLAS's threads against PoCL's (docs/gemm.md, Threads): a product under
 * SMALL_FLOPS runs on one thread, the PoCL worker that runs the native kernel
 * (measured: with two threads such a product waits for the second thread to be
 * scheduled, 10-100x slower on a busy 2-core machine); a larger one on
 * OpenBLAS's own count (every core). CLBOUND_BLAS_THREADS=n fixes the count for
 * every product. The count is OpenBLAS's global setting, set only when it must
 * change; the in-order queue runs one native kernel at a time. */
#define SMALL_FLOPS (32.0 * 1024 * 1024)
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static int blas_fixed, blas_many; /* CLBOUND_BLAS_THREADS, else 0; OpenBLAS's own count */
static void blas_init(void) {
  const char *env = getenv("CLBOUND_BLAS_THREADS");
  blas_fixed = env && *env ? atoi(env) : 0;
  blas_many = openblas_get_num_threads();
  if (blas_fixed > 0) openblas_set_num_threads(blas_fixed);
}

static void blas_threads_for(double flops) {
  if (blas_fixed > 0) return;
  int want = flops < SMALL_FLOPS ? 1 : blas_many;
  if (openblas_get_num_threads() != want) openblas_set_num_threads(want);
}

/* cs[j] = the sum of a's actual rows' column j (dbias of linear_backward, where
 * a is dy), in double (f32) or compensated (f64), a block of columns at a time. */
#define COLSUM_BLOCK 512
static void host_colsum(const host_gemm_args *g, int64_t rows, int64_t cols) {
  for (int64_t j0 = 0; j0 < cols; j0 += COLSUM_BLOCK) {
    int64_t w = cols - j0 < COLSUM_BLOCK ? cols - j0 : COLSUM_BLOCK;
    double acc[COLSUM_BLOCK], comp[COLSUM_BLOCK];
    for (int64_t j = 0; j < w; j++) acc[j] = comp[j] = 0.0;
    if (g->f64) {
      for (int64_t i = 0; i < rows; i++) {
        const double *r = (const double *)g->a + i * cols + j0;
        for (int64_t j = 0; j < w; j++) { /* Kahan */
          double y = r[j] - comp[j], t = acc[j] + y;
          comp[j] = (t - acc[j]) - y;
          acc[j] = t;
        }
      }
      for (int64_t j = 0; j < w; j++) ((double *)g->cs)[j0 + j] = acc[j];
    } else {
      for (int64_t i = 0; i < rows; i++) {
        const float *r = (const float *)g->a + i * cols + j0;
        for (int64_t j = 0; j < w; j++) acc[j] += r[j];
      }
      for (int64_t j = 0; j < w; j++) ((float *)g->cs)[j0 + j] = (float)acc[j];
    }
  }
}

/* The ReLU epilogue (clb__linear_act), as kernels/common.cl's CLB_OP_RELU. */
static void relu_epilogue(const host_gemm_args *g, int64_t count) {
  if (!g->relu) return;
  if (g->f64)
    for (double *c = g->c, *e = c + count; c < e; c++) *c = *c < 0.0 ? 0.0 : *c;
  else
    for (float *c = g->c, *e = c + count; c < e; c++) *c = *c < 0.0f ? 0.0f : *c;
}

static void CL_CALLBACK host_gemm_fn(void *p) {
  const host_gemm_args *g = p;
  const int64_t *sa = g->sa, *sb = g->sb;
  int64_t a0 = host_dim(g, sa[0], g->abound[0]), a1 = host_dim(g, sa[1], g->abound[1]);
  int64_t b0 = host_dim(g, sb[0], g->bbound[0]), b1 = host_dim(g, sb[1], g->bbound[1]);
  int64_t m = g->ta ? a1 : a0, ka = g->ta ? a0 : a1;
  int64_t kb = g->tb ? b1 : b0, n = g->tb ? b0 : b1;
  int64_t k = ka < kb ? ka : kb;
  int64_t *sc = g->sc;
  sc[0] = m;
  sc[1] = n;
  if (g->has_colsum) {
    ((int64_t *)g->scs)[0] = a1;
    host_colsum(g, a0, a1);
  }
  if (ka != kb) host_raise(g->st, g->launch, CLB_STF_DEVICE_CHECK, ka, kb);
  if (m == 0 || n == 0) return;
  /* The leading dimensions are the actual widths (dense at the actual sizes). */
  blasint M = (blasint)m, N = (blasint)n, K = (blasint)k;
  blasint lda = (blasint)(a1 > 0 ? a1 : 1), ldb = (blasint)(b1 > 0 ? b1 : 1);
  enum CBLAS_TRANSPOSE TA = g->ta ? CblasTrans : CblasNoTrans, TB = g->tb ? CblasTrans : CblasNoTrans;
  /* a bias row in every row of C, then C += op(A) op(B); zeros when K is 0 */
  size_t es = g->f64 ? sizeof(double) : sizeof(float), row = (size_t)n * es;
  if (g->has_bias)
    for (int64_t i = 0; i < m; i++) memcpy((char *)g->c + (size_t)i * row, g->bias, row);
  else if (k == 0)
    memset(g->c, 0, (size_t)m * row);
  if (k == 0) {
    relu_epilogue(g, m * n);
    return;
  }
  blas_threads_for(2.0 * (double)m * (double)n * (double)k);
  if (g->f64)
    cblas_dgemm(CblasRowMajor, TA, TB, M, N, K, 1.0, g->a, lda, g->b, ldb, g->has_bias ? 1.0 : 0.0, g->c, N);
  else
    cblas_sgemm(CblasRowMajor, TA, TB, M, N, K, 1.0f, g->a, lda, g->b, ldb, g->has_bias ? 1.0f : 0.0f, g->c, N);
  relu_epilogue(g, m * n);
}

/* The native kernel gets its buffers as host pointers of non-blocking maps
 * enqueued just before it and unmapped just after it, not through
 * clEnqueueNativeKernel's mem_list: PoCL 3.1 sorts that list by object id but
 * fills args_mem_loc in the caller's order, so with more than one buffer the
 * pointers land in the wrong places. A mapped region may be used by the host
 * between the map and the unmap, which is where the native kernel runs (the
 * queue is in order); on a CPU device a map is zero-copy. */
#define HOST_NBUF 10

clb_status clb__gemm_host_act(clb_context_t ctx, const char *op, const char *what, clb_tensor_t a, int ta,
                              clb_tensor_t b, int tb, clb_tensor_t bias, int relu, clb_tensor_t out,
                              clb_tensor_t colsum) {
  for (int d = 0; d < 2; d++)
    if (a->bound[d] > INT_MAX || b->bound[d] > INT_MAX)
      return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s %s: a dim over %d is more than CBLAS takes; use the kernel "
                            "strategy (CLB_GEMM_DEVICE)", op, what, INT_MAX);
  if (ctx->collect) return CLB_OK; /* a plan walked to collect its kernels launches nothing */
  pthread_once(&blas_once, blas_init);
  host_gemm_args g;
  memset(&g, 0, sizeof g);
  g.ta = ta;
  g.tb = tb;
  g.f64 = a->dtype == CLB_DTYPE_F64;
  g.has_bias = bias != NULL;
  g.has_colsum = colsum != NULL;
  g.relu = relu;
  for (int d = 0; d < 2; d++) {
    g.abound[d] = a->bound[d];
    g.bbound[d] = b->bound[d];
  }
  const clb_buf *bufs[HOST_NBUF] = {&a->data, &a->shape, &b->data, &b->shape, &out->data, &out->shape, NULL,
                                    bias ? &bias->data : NULL, colsum ? &colsum->data : NULL,
                                    colsum ? &colsum->shape : NULL};
  void **ptrs[HOST_NBUF] = {&g.a, &g.sa, &g.b, &g.sb, &g.c, &g.sc, &g.st, &g.bias, &g.cs, &g.scs};
  static const cl_map_flags flags[HOST_NBUF] = {CL_MAP_READ,  CL_MAP_READ,  CL_MAP_READ, CL_MAP_READ,
                                                CL_MAP_WRITE, CL_MAP_WRITE, CL_MAP_READ | CL_MAP_WRITE,
                                                CL_MAP_READ,  CL_MAP_WRITE, CL_MAP_WRITE};
  cl_mem mems[HOST_NBUF];
  void *mapped[HOST_NBUF];
  int nmapped = 0, nbuf = HOST_NBUF;
  cl_int e = CL_SUCCESS;
  for (int i = 0; i < nbuf; i++) {
    if (i != 6 && !bufs[i]) continue; /* no bias, no column sums */
    cl_mem m = i == 6 ? ctx->status : bufs[i]->mem;
    size_t bytes = i == 6 ? CLB_STATUS_INTS * sizeof(cl_int) : bufs[i]->bytes;
    if (bytes == 0) bytes = 1;
    *ptrs[i] = clEnqueueMapBuffer(ctx->queue, m, CL_FALSE, flags[i], 0, bytes, 0, NULL, NULL, &e);
    if (e != CL_SUCCESS) break;
    mapped[nmapped] = *ptrs[i];
    mems[nmapped++] = m;
  }
  if (e == CL_SUCCESS) {
    g.launch = clb__launch_record(ctx, op, what);
    e = clEnqueueNativeKernel(ctx->queue, host_gemm_fn, &g, sizeof g, 0, NULL, NULL, 0, NULL, NULL);
    if (e == CL_SUCCESS) ctx->counters.kernel_launches++;
  }
  cl_int eu = CL_SUCCESS;
  for (int i = 0; i < nmapped; i++) {
    cl_int ei = clEnqueueUnmapMemObject(ctx->queue, mems[i], mapped[i], 0, NULL, NULL);
    if (ei != CL_SUCCESS && eu == CL_SUCCESS) eu = ei;
  }
  if (e != CL_SUCCESS)
    return clb__cl_error(ctx, e, "%s %s: enqueueing host BLAS (map %d, or the native kernel)", op, what,
                         nmapped + 1);
  if (eu != CL_SUCCESS) return clb__cl_error(ctx, eu, "%s %s: unmapping after host BLAS", op, what);
  return CLB_OK;
}

#else /* no OpenBLAS */

clb_status clb__gemm_host_act(clb_context_t ctx, const char *op, const char *what, clb_tensor_t a, int ta,
                              clb_tensor_t b, int tb, clb_tensor_t bias, int relu, clb_tensor_t out,
                              clb_tensor_t colsum) {
  (void)a, (void)ta, (void)b, (void)tb, (void)bias, (void)relu, (void)out, (void)colsum;
  return clb__set_error(ctx, CLB_ERR_INTERNAL, "%s %s: host BLAS was chosen in a clbound built without OpenBLAS", op, what);
}

#endif

clb_status clb__gemm_host(clb_context_t ctx, const char *op, const char *what, clb_tensor_t a, int ta,
                          clb_tensor_t b, int tb, clb_tensor_t bias, clb_tensor_t out, clb_tensor_t colsum) {
  return clb__gemm_host_act(ctx, op, what, a, ta, b, tb, bias, 0, out, colsum);
}
