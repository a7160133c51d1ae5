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
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clbound/nn.h"
#include "runtime/ops/blas-pool.h"
#include "runtime/ops/blas-threads.h"
#include "runtime/ops/gemm-host.h"

#include "runtime/ops/blas-load.h"

#ifdef CLBOUND_HAVE_OPENBLAS
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
  if (!clb__blas_get()) {
    *why = clb__blas_why();
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
  const char *env = clb__env_text(CLB_ENV_GEMM);
  if (env) {
    /* env.h lists the names in gemm_names' order; a bad one warned and gave auto */
    int found = gemm_names[clb__env_int(CLB_ENV_GEMM)].s;
    if (found != CLB_GEMM_AUTO) {
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

clb_status clb_host_blas_describe(char *buf, size_t cap, size_t *len) {
  if (!buf && cap > 0) return clb__set_error(NULL, CLB_ERR_NULL, "clb_host_blas_describe: buf is NULL, cap %zu", cap);
  char line[1024];
  clb__blas_describe(line, sizeof line);
  if (len) *len = strlen(line);
  if (cap > 0) snprintf(buf, cap, "%s", line);
  return CLB_OK;
}

int clb_context_gemm_strategy(clb_context_t ctx) {
  if (!ctx) return -1;
  int forced;
  return clb__gemm_resolve(ctx, &forced);
}

/* ---- The native kernel ------------------------------------------------------- */

#ifdef CLBOUND_HAVE_OPENBLAS

/* One product of a native kernel (the driver runs the function on a copy of
 * host_call). */
typedef struct host_gemm {
  void *a, *sa, *b, *sb, *c, *sc, *bias, *cs, *scs, *h, *sh; /* host pointers of the buffers */
  int ta, tb, f64, has_bias, has_colsum, relu, has_mask, batched;
  uint32_t launch; /* the launch record of the op it belongs to */
  int64_t abound[3], bbound[3], hbound[2];
} host_gemm;

/* One parameter's SGD step after the products (clb__gemm_host_sgd_join). */
typedef struct host_sgd {
  void *p, *sp, *g, *sg, *v; /* host pointers; v NULL without momentum */
  int rank, f64;
} host_sgd;

/* A native kernel: up to HOST_MAX_GEMM products, in order, then up to
 * HOST_MAX_SGD SGD steps, one status word. */
#define HOST_MAX_GEMM CLB_HOST_MAX_GEMM
#define HOST_MAX_SGD CLB_HOST_MAX_SGD
#define HOST_NBUF (HOST_MAX_GEMM * 11 + HOST_MAX_SGD * 5 + 1)
typedef struct host_call {
  host_gemm g[HOST_MAX_GEMM];
  int n;
  host_sgd s[HOST_MAX_SGD];
  int ns;
  double lr, momentum;
  void *st;
  uint32_t sgd_launch; /* the SGD steps' launch record */
  void *slots[HOST_NBUF]; /* where the driver writes mem_list's pointers: unread (see below) */
} host_call;

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
static int64_t host_dim(const host_call *c, uint32_t launch, int64_t v, int64_t bound) {
  if (v >= 0 && v <= bound) return v;
  host_raise(c->st, launch, CLB_STF_BOUND_EXCEEDED, v, bound);
  return v < 0 ? 0 : bound;
}

/* Threads (docs/gemm.md, Threads). A product of 12 MFLOP or more is cut into
 * blocks of rows (or of columns, where C has few rows and more columns), as
 * many as OpenBLAS's thread count (every core), each a single-threaded BLAS
 * call; the PoCL worker that runs the native kernel and clbound's helper
 * threads take them in turn (runtime/ops/blas-pool.c says why OpenBLAS's own
 * threads are not used). The blocks depend only on the sizes and the machine's
 * core count, so the result does not depend on how many threads ran them.
 *
 * The threads: for a product of 32 MFLOP or more, one per block; between 12
 * and 32, one plus one per core that other processes left idle over the last
 * 0.1 s (/proc/stat less this process's CPU time; one thread where it cannot
 * be read, and until the first window since the process's first host-BLAS
 * product has passed): on a busy machine a second thread makes such a product
 * wait for the helper's time slice, on an idle core it saves about a third
 * (runtime/ops/blas-threads.c). A product under 12 MFLOP is one block on the
 * PoCL worker. CLBOUND_BLAS_THREADS=n cuts every product into n blocks for n
 * threads. OpenBLAS is set to one thread while a native kernel runs (the first
 * of those running at once sets it, the last puts back the count it had). */
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static const clb_blas_lib *blas; /* loaded by clb__gemm_host_available, before any native kernel */
static int blas_fixed, blas_many, blas_cores; /* CLBOUND_BLAS_THREADS, else 0; OpenBLAS's own count; CPUs */

static void blas_fork_handlers(void);

static void blas_init(void) {
  blas = clb__blas_get(); /* OpenBLAS registered its fork handlers when loaded, before ours */
  blas_fork_handlers();
  blas_fixed = (int)clb__env_int(CLB_ENV_BLAS_THREADS); /* 1 to CLB_POOL_MAX_HELPERS + 1, else 0 */
  blas_many = blas->get_num_threads();
  blas_cores = clb__cpus_for_process();
  if (blas_many > blas_cores) blas_many = blas_cores;
  if (blas_many > CLB_POOL_MAX_HELPERS + 1) blas_many = CLB_POOL_MAX_HELPERS + 1;
  clb__running_now(); /* the load window starts now */
}

/* OpenBLAS single-threaded while any native kernel runs (blas_enter/_leave). */
static pthread_mutex_t blas_count_lock = PTHREAD_MUTEX_INITIALIZER;
static int blas_active, blas_saved;
static void blas_enter(void) {
  pthread_mutex_lock(&blas_count_lock);
  if (blas_active++ == 0) {
    blas_saved = blas->get_num_threads();
    if (blas_saved != 1) blas->set_num_threads(1);
  }
  pthread_mutex_unlock(&blas_count_lock);
}
static void blas_leave(void) {
  pthread_mutex_lock(&blas_count_lock);
  if (--blas_active == 0 && blas_saved != 1) blas->set_num_threads(blas_saved);
  pthread_mutex_unlock(&blas_count_lock);
}

/* fork: no thread of ours changes OpenBLAS's thread count while the process
 * forks. OpenBLAS's own prepare handler (registered when it was loaded, so run
 * after ours) stops its thread pool; a count set by another thread between
 * that and the fork started threads the child does not have, and the child's
 * exit handler then waited for them forever (issue 30, item 3). The child, which has
 * none of the native kernels that were running, gets back the count they had
 * put aside: OpenBLAS as it was before clbound touched it. That count never
 * exceeds the threads OpenBLAS has made, so the call starts none. */
static void blas_before_fork(void) { pthread_mutex_lock(&blas_count_lock); }
static void blas_after_fork_parent(void) { pthread_mutex_unlock(&blas_count_lock); }
static void blas_after_fork_child(void) {
  pthread_mutex_init(&blas_count_lock, NULL); /* held by us in the parent: made anew */
  if (blas_active > 0 && blas_saved != 1) blas->set_num_threads(blas_saved);
  blas_active = 0;
}
static void blas_fork_handlers(void) { pthread_atfork(blas_before_fork, blas_after_fork_parent, blas_after_fork_child); }

/* cs[j] = the sum of a's actual rows' column j (dbias of linear_backward, where
 * a is dy), in double (f32) or compensated (f64), a block of columns at a time. */
#define COLSUM_BLOCK 512
static void host_colsum(const host_gemm *g, int64_t rows, int64_t cols) {
  for (int64_t j0 = 0; j0 < cols; j0 += COLSUM_BLOCK) {
    int64_t w = cols - j0 < COLSUM_BLOCK ? cols - j0 : COLSUM_BLOCK;
    double acc[COLSUM_BLOCK], comp[COLSUM_BLOCK], plain[COLSUM_BLOCK];
    for (int64_t j = 0; j < w; j++) acc[j] = comp[j] = plain[j] = 0.0;
    if (g->f64) {
      for (int64_t i = 0; i < rows; i++) {
        const double *r = (const double *)g->a + i * cols + j0;
        for (int64_t j = 0; j < w; j++) { /* Kahan, and the plain sum for where it is not finite */
          double y = r[j] - comp[j], t = acc[j] + y;
          comp[j] = (t - acc[j]) - y;
          acc[j] = t;
          plain[j] += r[j];
        }
      }
      /* past an inf the compensation is inf - inf: the plain sum keeps IEEE's inf */
      for (int64_t j = 0; j < w; j++) ((double *)g->cs)[j0 + j] = isfinite(acc[j]) ? acc[j] : plain[j];
    } else {
      for (int64_t i = 0; i < rows; i++) {
        const float *r = (const float *)g->a + i * cols + j0;
        for (int64_t j = 0; j < w; j++) acc[j] += r[j];
      }
      for (int64_t j = 0; j < w; j++) ((float *)g->cs)[j0 + j] = (float)acc[j];
    }
  }
}

/* The ReLU backward epilogue: c[i] = h[i] > 0 ? c[i] : 0 (kernels/common.cl's
 * CLB_GRAD_RELU with h the ReLU's input or output: y > 0 exactly where x > 0),
 * over the actual elements of both; counts that differ raise the deferred check
 * as nn_unary_bwd does, and the smaller is used. */
static void relu_bwd_epilogue(const host_call *call, const host_gemm *g, int64_t count) {
  if (!g->has_mask) return;
  const int64_t *sh = g->sh;
  int64_t nh = host_dim(call, g->launch, sh[0], g->hbound[0]) * host_dim(call, g->launch, sh[1], g->hbound[1]);
  if (nh != count) host_raise(call->st, g->launch, CLB_STF_DEVICE_CHECK, count, nh);
  if (nh < count) count = nh;
  if (g->f64) {
    const double *h = g->h;
    double *c = g->c;
    for (int64_t i = 0; i < count; i++) c[i] = h[i] > 0.0 ? c[i] : 0.0;
  } else {
    const float *h = g->h;
    float *c = g->c;
    for (int64_t i = 0; i < count; i++) c[i] = h[i] > 0.0f ? c[i] : 0.0f;
  }
}

/* One product at its actual sizes, cut into blocks (host_gemm_one). */
typedef struct gemm_split {
  const host_gemm *g;
  int64_t m, n, k, lda, ldb;
  int by_cols; /* the blocks are of columns of C (else of rows) */
} gemm_split;

/* Blocks start at multiples of SPLIT_ALIGN rows or columns (whole tiles of the
 * BLAS kernel). */
#define SPLIT_ALIGN 8
#define SPLIT_ROWS_MIN 128
static int64_t split_at(int64_t dim, int block, int blocks) {
  if (block >= blocks) return dim;
  return (dim * block / blocks + SPLIT_ALIGN / 2) / SPLIT_ALIGN * SPLIT_ALIGN;
}

/* Block `block` of C: a bias row in each of its rows (zeros when K is 0), then
 * C += op(A) op(B) on it, then the ReLU epilogue (clb__linear_act, as
 * kernels/common.cl's CLB_OP_RELU). A single-threaded BLAS call. */
static void gemm_block(void *arg, int block, int blocks) {
  const gemm_split *s = arg;
  const host_gemm *g = s->g;
  int64_t dim = s->by_cols ? s->n : s->m;
  int64_t lo = split_at(dim, block, blocks), hi = split_at(dim, block + 1, blocks);
  if (hi <= lo) return;
  int64_t r0 = s->by_cols ? 0 : lo, rows = s->by_cols ? s->m : hi - lo;
  int64_t c0 = s->by_cols ? lo : 0, cols = s->by_cols ? hi - lo : s->n;
  size_t es = g->f64 ? sizeof(double) : sizeof(float);
  char *c = (char *)g->c + ((size_t)r0 * (size_t)s->n + (size_t)c0) * es;
  size_t ldc = (size_t)s->n * es, width = (size_t)cols * es;
  for (int64_t i = 0; i < rows && (g->has_bias || s->k == 0); i++) {
    if (g->has_bias) memcpy(c + (size_t)i * ldc, (const char *)g->bias + (size_t)c0 * es, width);
    else memset(c + (size_t)i * ldc, 0, width);
  }
  if (s->k > 0) {
    /* one thread per call: the native kernel set OpenBLAS so (blas_enter); an
     * OpenMP OpenBLAS keeps the count per thread, so a helper sets its own */
    if (blas->get_num_threads() != 1) blas->set_num_threads(1);
    /* op(A)'s rows r0.. are A's rows (or columns, transposed); op(B)'s columns c0.. */
    size_t aoff = g->ta ? (size_t)r0 : (size_t)r0 * (size_t)s->lda, boff = g->tb ? (size_t)c0 * (size_t)s->ldb : (size_t)c0;
    enum CBLAS_TRANSPOSE TA = g->ta ? CblasTrans : CblasNoTrans, TB = g->tb ? CblasTrans : CblasNoTrans;
    blasint M = (blasint)rows, N = (blasint)cols, K = (blasint)s->k, lda = (blasint)s->lda, ldb = (blasint)s->ldb;
    blasint ldcn = (blasint)s->n;
    if (g->f64)
      blas->dgemm(CblasRowMajor, TA, TB, M, N, K, 1.0, (const double *)g->a + aoff, lda, (const double *)g->b + boff,
                  ldb, g->has_bias ? 1.0 : 0.0, (double *)c, ldcn);
    else
      blas->sgemm(CblasRowMajor, TA, TB, M, N, K, 1.0f, (const float *)g->a + aoff, lda, (const float *)g->b + boff,
                  ldb, g->has_bias ? 1.0f : 0.0f, (float *)c, ldcn);
  }
  if (!g->relu) return;
  for (int64_t i = 0; i < rows; i++) {
    if (g->f64) {
      double *r = (double *)(c + (size_t)i * ldc);
      for (int64_t j = 0; j < cols; j++) r[j] = r[j] < 0.0 ? 0.0 : r[j];
    } else {
      float *r = (float *)(c + (size_t)i * ldc);
      for (int64_t j = 0; j < cols; j++) r[j] = r[j] < 0.0f ? 0.0f : r[j];
    }
  }
}

/* The blocks a product of `flops` is cut into and the threads that run them
 * (the rule above). */
static void split_rule(double flops, int *blocks, int *threads) {
  *blocks = *threads = 1;
  if (blas_fixed > 0) *blocks = *threads = blas_fixed;
  else if (flops >= CLB_BLAS_ONE_FLOPS) {
    *blocks = blas_many;
    int running = flops < CLB_BLAS_MANY_FLOPS ? clb__running_now() : -1;
    *threads = clb__blas_threads_rule(flops, running, blas_cores, blas_many);
  }
}

/* clb_bmm's product: the batch's matrices one after another at the actual
 * sizes, blocks of whole matrices (each a single-threaded BLAS call) over the
 * threads. */
typedef struct bmm_split {
  const host_gemm *g;
  int64_t nb, m, n, k, lda, ldb, astr, bstr;
} bmm_split;

static void bmm_block(void *arg, int block, int blocks) {
  const bmm_split *s = arg;
  const host_gemm *g = s->g;
  int64_t lo = s->nb * block / blocks, hi = s->nb * (block + 1) / blocks;
  size_t es = g->f64 ? sizeof(double) : sizeof(float);
  if (hi > lo && s->k > 0 && blas->get_num_threads() != 1) blas->set_num_threads(1);
  enum CBLAS_TRANSPOSE TA = g->ta ? CblasTrans : CblasNoTrans, TB = g->tb ? CblasTrans : CblasNoTrans;
  blasint M = (blasint)s->m, N = (blasint)s->n, K = (blasint)s->k, lda = (blasint)s->lda, ldb = (blasint)s->ldb;
  for (int64_t p = lo; p < hi; p++) {
    char *c = (char *)g->c + (size_t)(p * s->m * s->n) * es;
    if (s->k == 0) {
      memset(c, 0, (size_t)(s->m * s->n) * es);
      continue;
    }
    const char *a = (const char *)g->a + (size_t)(p * s->astr) * es, *b = (const char *)g->b + (size_t)(p * s->bstr) * es;
    if (g->f64)
      blas->dgemm(CblasRowMajor, TA, TB, M, N, K, 1.0, (const double *)a, lda, (const double *)b, ldb, 0.0, (double *)c, N);
    else
      blas->sgemm(CblasRowMajor, TA, TB, M, N, K, 1.0f, (const float *)a, lda, (const float *)b, ldb, 0.0f, (float *)c, N);
  }
}

static void host_bmm_one(const host_call *call, const host_gemm *g) {
  const int64_t *sa = g->sa, *sb = g->sb;
  int64_t na = host_dim(call, g->launch, sa[0], g->abound[0]), nbb = host_dim(call, g->launch, sb[0], g->bbound[0]);
  int64_t a0 = host_dim(call, g->launch, sa[1], g->abound[1]), a1 = host_dim(call, g->launch, sa[2], g->abound[2]);
  int64_t b0 = host_dim(call, g->launch, sb[1], g->bbound[1]), b1 = host_dim(call, g->launch, sb[2], g->bbound[2]);
  int64_t m = g->ta ? a1 : a0, ka = g->ta ? a0 : a1;
  int64_t kb = g->tb ? b1 : b0, n = g->tb ? b0 : b1;
  int64_t k = ka < kb ? ka : kb, nb = na < nbb ? na : nbb;
  int64_t *sc = g->sc;
  sc[0] = nb;
  sc[1] = m;
  sc[2] = n;
  for (int d = 3; d < CLB_MAX_RANK; d++) sc[d] = 1;
  if (ka != kb) host_raise(call->st, g->launch, CLB_STF_DEVICE_CHECK, ka, kb);
  if (na != nbb) host_raise(call->st, g->launch, CLB_STF_DEVICE_CHECK, na, nbb);
  if (nb == 0 || m == 0 || n == 0) return;
  bmm_split s = {g, nb, m, n, k, a1 > 0 ? a1 : 1, b1 > 0 ? b1 : 1, a0 * a1, b0 * b1};
  int blocks, threads;
  split_rule(2.0 * (double)nb * (double)m * (double)n * (double)k, &blocks, &threads);
  if (blocks > nb) blocks = (int)nb;
  if (threads > blocks) threads = blocks;
  clb__pool_run(bmm_block, &s, blocks, threads, NULL);
}

static void host_gemm_one(const host_call *call, const host_gemm *g) {
  if (g->batched) {
    host_bmm_one(call, g);
    return;
  }
  const int64_t *sa = g->sa, *sb = g->sb;
  int64_t a0 = host_dim(call, g->launch, sa[0], g->abound[0]), a1 = host_dim(call, g->launch, sa[1], g->abound[1]);
  int64_t b0 = host_dim(call, g->launch, sb[0], g->bbound[0]), b1 = host_dim(call, g->launch, sb[1], g->bbound[1]);
  int64_t m = g->ta ? a1 : a0, ka = g->ta ? a0 : a1;
  int64_t kb = g->tb ? b1 : b0, n = g->tb ? b0 : b1;
  int64_t k = ka < kb ? ka : kb;
  /* the whole records: an output may have none written before (clb__output_unrecorded) */
  int64_t *sc = g->sc;
  sc[0] = m;
  sc[1] = n;
  for (int d = 2; d < CLB_MAX_RANK; d++) sc[d] = 1;
  if (g->has_colsum) {
    int64_t *scs = g->scs;
    scs[0] = a1;
    for (int d = 1; d < CLB_MAX_RANK; d++) scs[d] = 1;
    host_colsum(g, a0, a1);
  }
  if (ka != kb) host_raise(call->st, g->launch, CLB_STF_DEVICE_CHECK, ka, kb);
  if (m == 0 || n == 0) return;
  /* The leading dimensions are the actual widths (dense at the actual sizes). */
  /* blocks of rows, unless C has few rows and more columns (a single-threaded
   * half of 512x256x512 took 0.94 ms by rows, 0.99 by columns; of 64x512x256,
   * 0.135 and 0.118) */
  gemm_split s = {g, m, n, k, a1 > 0 ? a1 : 1, b1 > 0 ? b1 : 1, m < SPLIT_ROWS_MIN && n > m};
  int blocks, threads;
  split_rule(2.0 * (double)m * (double)n * (double)k, &blocks, &threads);
  int64_t most = ((s.by_cols ? n : m) + SPLIT_ALIGN - 1) / SPLIT_ALIGN; /* blocks of at least SPLIT_ALIGN */
  if (blocks > most) blocks = (int)most;
  clb__pool_run(gemm_block, &s, blocks, threads, NULL);
  relu_bwd_epilogue(call, g, m * n);
}

/* The SGD step of kernels/nn.cl's nn_sgd (and the fused one), in T: d = g
 * (d = momentum v + g, kept in v), p -= lr d. */
#define SGD_FN(name, T)                                                                         \
  static void name(T *restrict p, const T *restrict g, T *restrict v, int64_t n, T lr, T mom) { \
    if (v)                                                                                      \
      for (int64_t i = 0; i < n; i++) {                                                         \
        T d = mom * v[i] + g[i];                                                                \
        v[i] = d;                                                                               \
        p[i] -= lr * d;                                                                         \
      }                                                                                         \
    else                                                                                        \
      for (int64_t i = 0; i < n; i++) p[i] -= lr * g[i];                                       \
  }
SGD_FN(sgd_f32, float)
SGD_FN(sgd_f64, double)
#undef SGD_FN

static int64_t rec_numel(const int64_t *rec, int rank) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++) n *= rec[d];
  return n;
}

/* Counts of the parameter and its gradient that differ raise
 * CLB_STF_DEVICE_CHECK and the smaller is used, as the kernels do. */
static void host_sgd_one(const host_call *call, const host_sgd *s) {
  int64_t n = rec_numel(s->sp, s->rank), ng = rec_numel(s->sg, s->rank);
  if (n != ng) host_raise(call->st, call->sgd_launch, CLB_STF_DEVICE_CHECK, n, ng);
  if (ng < n) n = ng;
  if (n <= 0) return;
  if (s->f64) sgd_f64(s->p, s->g, s->v, n, call->lr, call->momentum);
  else sgd_f32(s->p, s->g, s->v, n, (float)call->lr, (float)call->momentum);
}

static void CL_CALLBACK host_gemm_fn(void *p) {
  const host_call *call = p;
  blas_enter(); /* each block is a single-threaded call */
  for (int i = 0; i < call->n; i++) host_gemm_one(call, &call->g[i]);
  blas_leave();
  for (int i = 0; i < call->ns; i++) host_sgd_one(call, &call->s[i]);
}

/* The buffers reach the native kernel as host pointers in its argument block,
 * not through the pointers clEnqueueNativeKernel writes at args_mem_loc: PoCL 3.1
 * sorts mem_list by object id but fills args_mem_loc in the caller's order, so
 * with more than one buffer those pointers land in the wrong places (found
 * here: memory corruption in the next kernel). Two ways (docs/gemm.md):
 * - where every buffer's host pointer is known (clb__buf_host_ptr: a device
 *   whose buffers are host memory, checked once per context), the pointers are
 *   written into the block directly and the buffers still go in mem_list, with
 *   args_mem_loc pointing at slots nothing reads: the command holds a reference
 *   to each buffer until it has run (a tensor freed right after the enqueue
 *   gives its cl_mem back to the driver) and the driver sees what it touches;
 * - otherwise each buffer is mapped (non-blocking) just before the native kernel
 *   and unmapped just after it; a mapped region may be used by the host between
 *   the map and the unmap, which is where the native kernel runs (the queue is
 *   in order). The maps' pointers are learnt for next time where allowed. */
typedef struct host_ref {
  clb_buf *buf; /* NULL: the status word */
  void **ptr;
  cl_map_flags flags;
} host_ref;

static void ref_add(host_ref *r, int *nr, clb_buf *buf, void **ptr, cl_map_flags flags) {
  r[*nr] = (host_ref){buf, ptr, flags};
  (*nr)++;
}

/* SGD steps kept for the end of a native kernel. */
typedef struct sgd_req {
  int n;
  uint32_t launch; /* recorded when the steps joined */
  clb_tensor_t p[HOST_MAX_SGD], g[HOST_MAX_SGD], v[HOST_MAX_SGD];
  double lr, momentum;
} sgd_req;

/* jobs[0..n) (validated), then sgd's steps (or NULL), as one native kernel in
 * the queue. */
static clb_status enqueue_call(clb_context_t ctx, const char *op, const char *what, const clb_host_gemm *jobs, int n,
                               const sgd_req *sgd) {
  pthread_once(&blas_once, blas_init);
  if (!blas) /* never: host BLAS resolves only where OpenBLAS loaded */
    return clb__set_error(ctx, CLB_ERR_UNSUPPORTED, "%s %s: host BLAS without OpenBLAS: %s", op, what, clb__blas_why());
  host_call call;
  memset(&call, 0, sizeof call);
  call.n = n;
  host_ref refs[HOST_NBUF];
  int nr = 0;
  for (int j = 0; sgd && j < sgd->n; j++) {
    host_sgd *s = &call.s[j];
    s->rank = sgd->p[j]->rank;
    s->f64 = sgd->p[j]->dtype == CLB_DTYPE_F64;
    ref_add(refs, &nr, &sgd->p[j]->data, &s->p, CL_MAP_READ | CL_MAP_WRITE);
    ref_add(refs, &nr, &sgd->p[j]->shape, &s->sp, CL_MAP_READ);
    ref_add(refs, &nr, &sgd->g[j]->data, &s->g, CL_MAP_READ);
    ref_add(refs, &nr, &sgd->g[j]->shape, &s->sg, CL_MAP_READ);
    if (sgd->v[j]) ref_add(refs, &nr, &sgd->v[j]->data, &s->v, CL_MAP_READ | CL_MAP_WRITE);
  }
  if (sgd) {
    call.sgd_launch = sgd->launch;
    for (int j = 0; j < sgd->n; j++) { /* noted after the steps joined */
      clb__launch_add_seq(ctx, sgd->launch, sgd->p[j]->written_by);
      if (sgd->v[j]) clb__launch_add_seq(ctx, sgd->launch, sgd->v[j]->written_by);
    }
    call.ns = sgd->n;
    call.lr = sgd->lr;
    call.momentum = sgd->momentum;
  }
  for (int j = 0; j < n; j++) {
    const clb_host_gemm *q = &jobs[j];
    host_gemm *g = &call.g[j];
    g->launch = q->launch;
    g->ta = q->ta;
    g->tb = q->tb;
    g->f64 = q->a->dtype == CLB_DTYPE_F64;
    g->has_bias = q->bias != NULL;
    g->has_colsum = q->colsum != NULL;
    g->relu = q->relu;
    g->has_mask = q->mask != NULL;
    g->batched = q->batched;
    for (int d = 0; d < 2; d++) g->hbound[d] = q->mask ? q->mask->bound[d] : 0;
    for (int d = 0; d < (q->batched ? 3 : 2); d++) {
      g->abound[d] = q->a->bound[d];
      g->bbound[d] = q->b->bound[d];
    }
    ref_add(refs, &nr, &q->a->data, &g->a, CL_MAP_READ);
    ref_add(refs, &nr, &q->a->shape, &g->sa, CL_MAP_READ);
    ref_add(refs, &nr, &q->b->data, &g->b, CL_MAP_READ);
    ref_add(refs, &nr, &q->b->shape, &g->sb, CL_MAP_READ);
    ref_add(refs, &nr, &q->out->data, &g->c, CL_MAP_WRITE);
    ref_add(refs, &nr, &q->out->shape, &g->sc, CL_MAP_WRITE);
    if (q->bias) ref_add(refs, &nr, &q->bias->data, &g->bias, CL_MAP_READ);
    if (q->colsum) {
      ref_add(refs, &nr, &q->colsum->data, &g->cs, CL_MAP_WRITE);
      ref_add(refs, &nr, &q->colsum->shape, &g->scs, CL_MAP_WRITE);
    }
    if (q->mask) {
      ref_add(refs, &nr, &q->mask->data, &g->h, CL_MAP_READ);
      ref_add(refs, &nr, &q->mask->shape, &g->sh, CL_MAP_READ);
    }
  }
  ref_add(refs, &nr, NULL, &call.st, CL_MAP_READ | CL_MAP_WRITE);
  /* the distinct buffers, with the flags of every use and the extent [lo, hi)
   * of the regions used (tensors of a graph's arena share its cl_mem, each at
   * its offset) */
  cl_mem mems[HOST_NBUF];
  void *mapped[HOST_NBUF];
  clb_buf *owner[HOST_NBUF];
  cl_map_flags mflags[HOST_NBUF];
  size_t lo[HOST_NBUF], hi[HOST_NBUF];
  int nm = 0, nmapped = 0, all_known = 1;
  for (int i = 0; i < nr; i++) {
    const clb_buf *b = refs[i].buf;
    char *known = b ? clb__buf_host_ptr(ctx, b) : clb__status_host_ptr(ctx);
    all_known &= known != NULL;
    *refs[i].ptr = known && b ? known + b->offset : known;
    cl_mem m = b ? b->mem : ctx->status;
    size_t from = b ? (size_t)b->offset : 0, bytes = b ? b->bytes : CLB_STATUS_INTS * sizeof(cl_int);
    int u = 0;
    while (u < nm && mems[u] != m) u++;
    if (u == nm) {
      mems[nm] = m;
      owner[nm] = refs[i].buf;
      lo[nm] = from;
      hi[nm] = from;
      mflags[nm++] = 0;
    }
    mflags[u] |= refs[i].flags;
    if (from < lo[u]) lo[u] = from;
    if (from + (bytes ? bytes : 1) > hi[u]) hi[u] = from + (bytes ? bytes : 1);
  }
  cl_int e = CL_SUCCESS;
  if (!all_known) {
    for (int i = 0; i < nr; i++) *refs[i].ptr = NULL;
    for (int u = 0; u < nm; u++) {
      mapped[u] = clEnqueueMapBuffer(ctx->queue, mems[u], CL_FALSE, mflags[u], lo[u], hi[u] - lo[u], 0, NULL, NULL, &e);
      if (e != CL_SUCCESS) break;
      nmapped++;
      /* the start of the buffer, where a map's pointer is the buffer's own memory */
      clb__buf_host_learn(ctx, owner[u], (char *)mapped[u] - lo[u]);
    }
    for (int i = 0; i < nr && e == CL_SUCCESS; i++) {
      const clb_buf *b = refs[i].buf;
      cl_mem m = b ? b->mem : ctx->status;
      for (int u = 0; u < nm; u++)
        if (mems[u] == m) *refs[i].ptr = (char *)mapped[u] + ((b ? (size_t)b->offset : 0) - lo[u]);
    }
  }
  if (e == CL_SUCCESS) {
    const void *locs[HOST_NBUF];
    for (int u = 0; u < nm; u++) locs[u] = &call.slots[u];
    e = all_known ? clEnqueueNativeKernel(ctx->queue, host_gemm_fn, &call, sizeof call, (cl_uint)nm, mems, locs, 0, NULL, NULL)
                  : clEnqueueNativeKernel(ctx->queue, host_gemm_fn, &call, sizeof call, 0, NULL, NULL, 0, NULL, NULL);
    if (e == CL_SUCCESS) ctx->counters.kernel_launches++;
  }
  cl_int eu = CL_SUCCESS;
  for (int u = 0; u < nmapped; u++) {
    cl_int ei = clEnqueueUnmapMemObject(ctx->queue, mems[u], mapped[u], 0, NULL, NULL);
    if (ei != CL_SUCCESS && eu == CL_SUCCESS) eu = ei;
  }
  if (e != CL_SUCCESS)
    return clb__cl_error(ctx, e, "%s %s: enqueueing host BLAS (map %d of %d, or the native kernel)", op, what,
                         nmapped + 1, nm);
  if (eu != CL_SUCCESS) return clb__cl_error(ctx, eu, "%s %s: unmapping after host BLAS", op, what);
  return CLB_OK;
}

/* The products and SGD steps kept while a merge is open (ctx->host_batch). */
typedef struct host_merge {
  int open, n;
  clb_host_gemm jobs[HOST_MAX_GEMM];
  sgd_req sgd; /* sgd.n > 0: nothing more joins before the flush */
  const char *op;
  char what[384];
} host_merge;

/* Enqueues what the merge keeps, as one native kernel. */
static clb_status merge_flush(clb_context_t ctx, host_merge *m) {
  if (m->n == 0 && m->sgd.n == 0) return CLB_OK;
  int n = m->n;
  m->n = 0;
  clb_status st = enqueue_call(ctx, m->op, m->what, m->jobs, n, m->sgd.n ? &m->sgd : NULL);
  m->sgd.n = 0;
  return st;
}

/* Adds `what` to the merge's description. */
static void merge_describe(host_merge *m, const char *op, const char *what) {
  if (m->n == 0 && m->sgd.n == 0) {
    m->op = op;
    snprintf(m->what, sizeof m->what, "%s", what);
  } else {
    size_t used = strlen(m->what);
    snprintf(m->what + used, sizeof m->what - used, "; %s", what);
  }
}

clb_status clb__gemm_host_run(clb_context_t ctx, const char *op, const char *what, const clb_host_gemm *jobs, int n) {
  if (n < 1 || n > HOST_MAX_GEMM)
    return clb__set_error(ctx, CLB_ERR_INTERNAL, "%s %s: %d products in one native kernel (1 to %d)", op, what, n,
                          HOST_MAX_GEMM);
  for (int j = 0; j < n; j++)
    for (int d = jobs[j].batched; d < 2 + jobs[j].batched; d++) /* the matrix dims (a batch's count is int64) */
      if (jobs[j].a->bound[d] > INT_MAX || jobs[j].b->bound[d] > INT_MAX)
        return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s %s: a dim over %d is more than CBLAS takes; use the kernel "
                              "strategy (CLB_GEMM_DEVICE)", op, what, INT_MAX);
  if (ctx->collect) return CLB_OK; /* a plan walked to collect its kernels launches nothing */
  host_merge *m = ctx->host_batch;
  clb_status st;
  if (m && m->open && (m->n + n > HOST_MAX_GEMM || m->sgd.n) && (st = merge_flush(ctx, m)) != CLB_OK) return st;
  /* the op's own launch record, whatever it is merged with: a status bit its
   * products raise names it and marks its outputs (their invocations may be
   * noted under other names, "linear_backward dx", "... dbias") */
  clb_host_gemm js[HOST_MAX_GEMM];
  uint32_t id = clb__launch_record(ctx, op, what);
  clb__launch_clear_seqs(ctx, id); /* exactly the products' outputs, below */
  for (int j = 0; j < n; j++) {
    js[j] = jobs[j];
    js[j].launch = id;
    clb__launch_add_seq(ctx, id, jobs[j].out->written_by);
    if (jobs[j].colsum) clb__launch_add_seq(ctx, id, jobs[j].colsum->written_by);
  }
  if (!m || !m->open) return enqueue_call(ctx, op, what, js, n, NULL);
  merge_describe(m, op, what);
  memcpy(m->jobs + m->n, js, (size_t)n * sizeof *js);
  m->n += n;
  return CLB_OK;
}

int clb__gemm_host_sgd_join(clb_context_t ctx, const char *what, int n, const clb_tensor_t *p, const clb_tensor_t *g,
                            const clb_tensor_t *v, double lr, double momentum) {
  host_merge *m = ctx->host_batch;
  if (!m || !m->open || m->sgd.n || n < 1 || n > HOST_MAX_SGD) return 0;
  for (int k = 0; k < n; k++) {
    const clb_dtype dt = p[k]->dtype;
    if ((dt != CLB_DTYPE_F32 && dt != CLB_DTYPE_F64) || g[k]->dtype != dt || g[k]->rank != p[k]->rank ||
        (v[k] && (v[k]->dtype != dt || clb_tensor_bound_numel(v[k]) < clb_tensor_bound_numel(p[k]))))
      return 0;
  }
  if (ctx->collect) return 1; /* a plan walked to collect its kernels launches nothing */
  merge_describe(m, "sgd_step (fused)", what);
  m->sgd.launch = clb__launch_record(ctx, "sgd_step (fused)", what);
  clb__launch_clear_seqs(ctx, m->sgd.launch); /* the parameters' steps are noted after this; added at the flush */
  m->sgd.n = n;
  for (int k = 0; k < n; k++) {
    m->sgd.p[k] = p[k];
    m->sgd.g[k] = g[k];
    m->sgd.v[k] = v[k];
  }
  m->sgd.lr = lr;
  m->sgd.momentum = momentum;
  return 1;
}

/* clb_context.merge_flush: what is kept goes before another command; the merge
 * stays open for later products. */
static clb_status merge_flush_cb(clb_context_t ctx) {
  host_merge *m = ctx->host_batch;
  return m ? merge_flush(ctx, m) : CLB_OK;
}

void clb__gemm_host_merge_begin(clb_context_t ctx) {
  if (!ctx->host_batch) ctx->host_batch = calloc(1, sizeof(host_merge));
  host_merge *m = ctx->host_batch;
  if (!m) return; /* out of host memory: nothing is merged, each call enqueues */
  m->open = 1;
  ctx->merge_flush = merge_flush_cb;
}

clb_status clb__gemm_host_merge_end(clb_context_t ctx) {
  host_merge *m = ctx->host_batch;
  if (!m || !m->open) return CLB_OK;
  m->open = 0;
  ctx->merge_flush = NULL;
  return merge_flush(ctx, m);
}

#else /* no OpenBLAS */

int clb__gemm_host_sgd_join(clb_context_t ctx, const char *what, int n, const clb_tensor_t *p, const clb_tensor_t *g,
                            const clb_tensor_t *v, double lr, double momentum) {
  (void)ctx, (void)what, (void)n, (void)p, (void)g, (void)v, (void)lr, (void)momentum;
  return 0;
}

void clb__gemm_host_merge_begin(clb_context_t ctx) { (void)ctx; }
clb_status clb__gemm_host_merge_end(clb_context_t ctx) {
  (void)ctx;
  return CLB_OK;
}

clb_status clb__gemm_host_run(clb_context_t ctx, const char *op, const char *what, const clb_host_gemm *jobs, int n) {
  (void)jobs, (void)n;
  return clb__set_error(ctx, CLB_ERR_INTERNAL, "%s %s: host BLAS was chosen in a clbound built without OpenBLAS", op, what);
}

#endif
