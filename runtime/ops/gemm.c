/* gemm.c: matmul (CLBlast where every size is on the host, else one of three
 * strategies for sizes only the device knows), linear and its gradients. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <clblast_c.h>

#include "clbound/nn.h"
#include "runtime/cache/cache.h"
#include "runtime/ops/fused.h"
#include "runtime/ops/gemm-host.h"

/* CPU-style blocks: RM rows x RN columns per work-item, RN a vector width along
 * N; work-groups of CPU_LOCAL work-items (measured on PoCL, docs/gemm.md). */
#define CPU_RM 4
#define CPU_RN 16
#define CPU_LOCAL 16
/* GPU-style tiles: TS x TS work-items per work-group. */
#define GPU_TS 16

clb_status clb_context_set_gemm_strategy(clb_context_t ctx, clb_gemm_strategy s) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "clb_context_set_gemm_strategy: ctx is NULL");
  if ((unsigned)s >= CLB_GEMM_STRATEGY_COUNT)
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "clb_context_set_gemm_strategy: unknown strategy %d", (int)s);
  ctx->gemm_strategy = (int)s;
  return CLB_OK;
}

/* ---- CLBlast ---------------------------------------------------------------- */

static const char *clblast_name(CLBlastStatusCode c) {
  switch (c) {
  case CLBlastNotImplemented: return "CLBlastNotImplemented";
  case CLBlastInvalidMatrixA: return "CLBlastInvalidMatrixA";
  case CLBlastInvalidMatrixB: return "CLBlastInvalidMatrixB";
  case CLBlastInvalidMatrixC: return "CLBlastInvalidMatrixC";
  case CLBlastInvalidDimension: return "CLBlastInvalidDimension";
  case CLBlastInvalidLeadDimA: return "CLBlastInvalidLeadDimA";
  case CLBlastInvalidLeadDimB: return "CLBlastInvalidLeadDimB";
  case CLBlastInvalidLeadDimC: return "CLBlastInvalidLeadDimC";
  case CLBlastInsufficientMemoryA: return "CLBlastInsufficientMemoryA";
  case CLBlastInsufficientMemoryB: return "CLBlastInsufficientMemoryB";
  case CLBlastInsufficientMemoryC: return "CLBlastInsufficientMemoryC";
  case CLBlastInsufficientMemoryTemp: return "CLBlastInsufficientMemoryTemp";
  case CLBlastInvalidLocalMemUsage: return "CLBlastInvalidLocalMemUsage";
  case CLBlastNoDoublePrecision: return "CLBlastNoDoublePrecision";
  case CLBlastDatabaseError: return "CLBlastDatabaseError";
  case CLBlastUnknownError: return "CLBlastUnknownError";
  case CLBlastUnexpectedError: return "CLBlastUnexpectedError";
  default: return c > -1000 ? clb__cl_error_name((cl_int)c) : "CLBlast error";
  }
}

/* CLBlast keeps its compiled programs in a process-wide cache that retains
 * their OpenCL contexts, and its static destructors release them after the
 * OpenCL runtime may have gone at exit. So the cache is cleared when the last
 * context that used CLBlast is freed: each such context registers a release
 * hook and is counted here, under a lock (contexts may live on other threads). */
static pthread_mutex_t clblast_lock = PTHREAD_MUTEX_INITIALIZER;
static int clblast_contexts;

static void clblast_release(clb_context_t ctx) {
  (void)ctx;
  pthread_mutex_lock(&clblast_lock);
  if (--clblast_contexts == 0) CLBlastClearCache();
  pthread_mutex_unlock(&clblast_lock);
}

/* Counts ctx once, before its first CLBlast call. */
static clb_status clblast_use(clb_context_t ctx) {
  for (int i = 0; i < ctx->n_release_hooks; i++)
    if (ctx->release_hooks[i] == clblast_release) return CLB_OK;
  pthread_mutex_lock(&clblast_lock);
  clb_status st = clb__context_on_release(ctx, clblast_release);
  if (st == CLB_OK) clblast_contexts++;
  pthread_mutex_unlock(&clblast_lock);
  if (st == CLB_OK) clb__tuning_apply(ctx);
  return st;
}

/* One CLBlast GEMM: C[m, n] (ld ldc) = op(A) op(B), row-major. Each matrix
 * starts at its buffer's offset (a graph's arena: CLBlast takes offsets in
 * elements; they are multiples of the arena's alignment, so whole elements). */
static CLBlastStatusCode clblast_call(clb_context_t ctx, clb_dtype dt, int ta, int tb, size_t m, size_t n, size_t k,
                                      const clb_buf *a, size_t lda, const clb_buf *b, size_t ldb, const clb_buf *c,
                                      size_t ldc) {
  CLBlastTranspose cta = ta ? CLBlastTransposeYes : CLBlastTransposeNo;
  CLBlastTranspose ctb = tb ? CLBlastTransposeYes : CLBlastTransposeNo;
  size_t es = clb_dtype_size(dt);
  size_t oa = (size_t)a->offset / es, ob = (size_t)b->offset / es, oc = (size_t)c->offset / es;
  if (dt == CLB_DTYPE_F64)
    return CLBlastDgemm(CLBlastLayoutRowMajor, cta, ctb, m, n, k, 1.0, a->mem, oa, lda, b->mem, ob, ldb, 0.0, c->mem, oc,
                        ldc, &ctx->queue, NULL);
  return CLBlastSgemm(CLBlastLayoutRowMajor, cta, ctb, m, n, k, 1.0f, a->mem, oa, lda, b->mem, ob, ldb, 0.0f, c->mem, oc,
                      ldc, &ctx->queue, NULL);
}

/* C[m, n] (ld ldc) = op(A) op(B) in row-major storage; every size > 0. A
 * failure that the tuning file's parameters can cause puts CLBlast's own back
 * (the file's entries dropped, gemm-tune.c) and the product is tried once more. */
static clb_status clblast_gemm(clb_context_t ctx, const char *what, clb_dtype dt, int ta, int tb, size_t m,
                               size_t n, size_t k, const clb_buf *a, size_t lda, const clb_buf *b, size_t ldb,
                               const clb_buf *c, size_t ldc) {
  if (ctx->collect) return CLB_OK; /* a plan walked to collect its kernels launches nothing */
  clb_status st = clblast_use(ctx);
  if (st == CLB_OK) st = clb__merge_flush(ctx); /* CLBlast enqueues on the same queue */
  if (st != CLB_OK) return st;
  char dg = dt == CLB_DTYPE_F64 ? 'D' : 'S', dropped[1024];
  size_t es = clb_dtype_size(dt);
  size_t oa = (size_t)a->offset / es, ob = (size_t)b->offset / es, oc = (size_t)c->offset / es;
  CLBlastStatusCode rc = clblast_call(ctx, dt, ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
  if (rc != CLBlastSuccess &&
      clb__tuning_revert(ctx, dt == CLB_DTYPE_F64 ? 64 : 32, (int)rc, clblast_name(rc), dropped, sizeof dropped) > 0) {
    CLBlastStatusCode again = clblast_call(ctx, dt, ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
    if (again != CLBlastSuccess)
      return clb__set_error(ctx, CLB_ERR_CL, "matmul %s: CLBlast%cgemm(m=%zu, n=%zu, k=%zu, lda=%zu, ldb=%zu, ldc=%zu, "
                            "offsets %zu, %zu, %zu) failed (%s, %d) with the tuning file's parameters in force, then "
                            "again (%s, %d) with CLBlast's own put back (dropped: %s)", what, dg, m, n, k, lda, ldb, ldc,
                            oa, ob, oc, clblast_name(rc), (int)rc, clblast_name(again), (int)again, dropped);
    rc = again;
  }
  if (rc != CLBlastSuccess)
    return clb__set_error(ctx, CLB_ERR_CL, "matmul %s: CLBlast%cgemm(m=%zu, n=%zu, k=%zu, lda=%zu, ldb=%zu, ldc=%zu, "
                          "offsets %zu, %zu, %zu) failed (%s, %d)",
                          what, dg, m, n, k, lda, ldb, ldc, oa, ob, oc, clblast_name(rc), (int)rc);
  ctx->counters.kernel_launches++;
  return CLB_OK;
}

/* ---- The problem ------------------------------------------------------------- */

typedef struct gemm_job {
  const char *op;
  clb_tensor_t a, b, bias, out;
  int ta, tb;
  int act;            /* an activation epilogue (clb_unary_op), or -1 */
  clb_dtype dt;
  int64_t mb, nb, kb; /* bounds of M, N, K */
  int dm, dn, dk;     /* M, N dynamic; K dynamic in either operand */
  char what[192];     /* the operands, for messages */
  /* linear_backward's dbias: under HOST_BLAS the dW native kernel also sums dy's
   * rows into it (colsum_done set); otherwise the caller reduces */
  clb_tensor_t *colsum_out;
  int colsum_done;
  /* host BLAS's native kernel writes the output's (and dbias's) whole shape
   * record: an output made here gets no record write of its own */
  int unrecorded;
  int made, colsum_made; /* out (dbias) made by this call, unrecorded */
  int batched;            /* clb_bmm: every operand has a leading batch dim */
  int64_t batch;          /* ... and this is its bound (0 allowed) */
} gemm_job;

static clb_status check_operand(clb_context_t ctx, const char *op, const char *name, clb_tensor_t t) {
  clb_status st = clb__check_tensor(ctx, op, name, t);
  if (st != CLB_OK) return st;
  char d[128];
  if (t->rank != 2)
    return clb__set_error(ctx, CLB_ERR_SHAPE, "%s: %s %s has rank %d, a matrix needs rank 2", op, name,
                          clb__tensor_desc(t, d, sizeof d), t->rank);
  if (!clb__dtype_is_float(t->dtype))
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: %s is %s; matmul takes f32 or f64", op, name, clb_dtype_name(t->dtype));
  return CLB_OK;
}

/* Validates a matmul and gets its output. */
static clb_status gemm_setup(clb_context_t ctx, gemm_job *g, clb_tensor_t *out) {
  const char *op = g->op;
  clb_status st;
  if ((st = check_operand(ctx, op, "a", g->a)) != CLB_OK) return st;
  if ((st = check_operand(ctx, op, "b", g->b)) != CLB_OK) return st;
  clb_tensor_t a = g->a, b = g->b;
  char da[128], db[128];
  clb__tensor_desc(a, da, sizeof da);
  clb__tensor_desc(b, db, sizeof db);
  snprintf(g->what, sizeof g->what, "a %.60s%s, b %.60s%s", da, g->ta ? "^T" : "", db, g->tb ? "^T" : "");
  if (a->dtype != b->dtype)
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: dtypes differ: a %s, b %s", op, da, db);
  g->dt = a->dtype;
  int am = g->ta ? 1 : 0, bn = g->tb ? 0 : 1;
  g->mb = a->bound[am];
  g->dm = a->dyn[am];
  g->nb = b->bound[bn];
  g->dn = b->dyn[bn];
  int64_t ka = a->bound[1 - am], kb = b->bound[1 - bn];
  if (ka != kb)
    return clb__set_error(ctx, CLB_ERR_SHAPE, "%s: %s: the inner dims differ: op(a) has %lld columns, op(b) has %lld rows",
                          op, g->what, (long long)ka, (long long)kb);
  g->kb = ka;
  g->dk = a->dyn[1 - am] || b->dyn[1 - bn];
  if (g->bias) {
    if ((st = clb__check_tensor(ctx, op, "bias", g->bias)) != CLB_OK) return st;
    char dbias[128];
    clb__tensor_desc(g->bias, dbias, sizeof dbias);
    if (g->bias->dtype != g->dt)
      return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: bias %s, the product is %s", op, dbias, clb_dtype_name(g->dt));
    if (g->bias->rank != 1 || g->bias->bound[0] != g->nb || g->bias->dyn[0] != g->dn)
      return clb__set_error(ctx, CLB_ERR_SHAPE, "%s: bias %s must be [%s%lld], one per output feature", op, dbias,
                            g->dn ? "<=" : "", (long long)g->nb);
  }
  if (out && *out && (*out == a || *out == b || *out == g->bias))
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: out must not be an input", op);
  int64_t ob[2] = {g->mb, g->nb};
  uint8_t od[2] = {(uint8_t)g->dm, (uint8_t)g->dn};
  g->made = g->unrecorded && out && !*out;
  if ((st = (g->unrecorded ? clb__output_unrecorded : clb__output)(ctx, op, g->dt, 2, ob, od, out)) != CLB_OK) {
    g->made = 0;
    return st;
  }
  g->out = *out;
  return CLB_OK;
}

/* The bias, then the activation epilogue, in place after a library product. */
static clb_status add_bias(clb_context_t ctx, gemm_job *g) {
  clb_tensor_t o = g->out;
  clb_status st = CLB_OK;
  if (g->bias && (st = clb_binary(ctx, CLB_BINARY_ADD, o, g->bias, &o)) != CLB_OK) clb__append_error(ctx, " (bias of %s)", g->op);
  if (st == CLB_OK && g->act >= 0 && (st = clb_unary(ctx, (clb_unary_op)g->act, o, &o)) != CLB_OK)
    clb__append_error(ctx, " (activation of %s)", g->op);
  return st;
}

/* Sizes known on the host: CLBlast exactly (skipping zero-sized dims). */
static clb_status run_exact(clb_context_t ctx, gemm_job *g, int64_t m, int64_t n, int64_t k, int64_t lda,
                            int64_t ldb) {
  clb_tensor_t o = g->out;
  clb_status st;
  if (o->dyn[0] || o->dyn[1]) {
    int64_t rec[CLB_MAX_RANK] = {m, n, 1, 1, 1, 1, 1, 1};
    if ((st = clb__write_async(ctx, g->op, o->shape.mem, 0, rec, sizeof rec)) != CLB_OK) return st;
  }
  if (m == 0 || n == 0) return CLB_OK;
  if (k == 0) {
    if ((st = clb_fill(ctx, o, 0.0)) != CLB_OK) return st;
  } else {
    st = clblast_gemm(ctx, g->what, g->dt, g->ta, g->tb, (size_t)m, (size_t)n, (size_t)k, &g->a->data,
                      (size_t)lda, &g->b->data, (size_t)ldb, &o->data, (size_t)n);
    if (st != CLB_OK) return st;
  }
  return add_bias(ctx, g);
}

/* Strategy SYNC_EXACT: one counted host sync reads both shape records. */
static clb_status run_sync_exact(clb_context_t ctx, gemm_job *g) {
  int64_t ra[CLB_MAX_RANK], rb[CLB_MAX_RANK];
  size_t bytes = sizeof ra;
  clb_status fs = clb__merge_flush(ctx);
  if (fs != CLB_OK) return fs;
  cl_int e = clEnqueueReadBuffer(ctx->queue, g->a->shape.mem, CL_FALSE, 0, bytes, ra, 0, NULL, NULL);
  if (e == CL_SUCCESS) e = clEnqueueReadBuffer(ctx->queue, g->b->shape.mem, CL_FALSE, 0, bytes, rb, 0, NULL, NULL);
  if (e != CL_SUCCESS) {
    clFinish(ctx->queue); /* the reads may still target the stack arrays */
    return clb__cl_error(ctx, e, "%s %s: reading the sizes", g->op, g->what);
  }
  ctx->counters.bytes_to_host += 2 * bytes;
  clb_status st = clb__sync(ctx, "matmul: reading M, N and K (gemm strategy sync-exact)");
  if (st != CLB_OK) {
    clFinish(ctx->queue); /* a failed wait may leave the reads pending into ra and rb */
    return st;
  }
  for (int d = 0; d < 2; d++)
    if (ra[d] < 0 || ra[d] > g->a->bound[d] || rb[d] < 0 || rb[d] > g->b->bound[d])
      return clb__set_error(ctx, CLB_ERR_INTERNAL, "%s %s: shape records hold [%lld, %lld] and [%lld, %lld]", g->op,
                            g->what, (long long)ra[0], (long long)ra[1], (long long)rb[0], (long long)rb[1]);
  int64_t m = g->ta ? ra[1] : ra[0], ka = g->ta ? ra[0] : ra[1];
  int64_t kb = g->tb ? rb[1] : rb[0], n = g->tb ? rb[0] : rb[1];
  if (ka != kb)
    return clb__set_error(ctx, CLB_ERR_DEVICE_CHECK, "%s %s: the inner dims differ: op(a) has %lld columns, op(b) has %lld rows",
                          g->op, g->what, (long long)ka, (long long)kb);
  return run_exact(ctx, g, m, n, ka, ra[1], rb[1]);
}

static void helper_options(char *buf, size_t len, clb_dtype dt) {
  snprintf(buf, len, "-D GEMM_HELPERS -D T=%s%s", clb__dtype_cl(dt), dt == CLB_DTYPE_F64 ? " -D CLB_NEED_FP64" : "");
}

/* Readies one operand for CLBlast over its bounds: a dynamic dim 1 is padded into
 * a scratch buffer (*scratch, returned to the pool by the caller); otherwise a
 * dynamic K in dim 0 has its slack rows zeroed in place. */
static clb_status bound_operand(clb_context_t ctx, gemm_job *g, clb_tensor_t t, int k_is_dim0, clb_buf *scratch,
                                const clb_buf **mem) {
  char opts[128];
  helper_options(opts, sizeof opts, g->dt);
  cl_kernel kz;
  size_t local = 0;
  clb_status st;
  *mem = &t->data;
  if (t->dyn[1]) {
    char err[256];
    int64_t R = t->bound[0], C = t->bound[1];
    size_t bytes = (size_t)(R * C) * clb_dtype_size(g->dt);
    if ((st = clb__pool_get(ctx->pool, bytes, scratch, err, sizeof err)) != CLB_OK)
      return clb__set_error(ctx, st, "%s %s: scratch of %zu bytes: %s", g->op, g->what, bytes, err);
    if ((st = clb__kernel_get_local(ctx, g->op, "gemm", opts, "gemm_pad", &kz, &local)) != CLB_OK) return st;
    clb_arg args[] = {CLB_ARG_DATA(t->data), CLB_ARG(t->shape.mem), CLB_ARG(scratch->mem), CLB_ARG(R), CLB_ARG(C)};
    *mem = scratch;
    return clb__launch(ctx, g->op, g->what, kz, args, CLB_NARGS(args), -1, clb__groups_local(ctx, R * C, local), local);
  }
  if (t->dyn[0] && k_is_dim0) {
    if ((st = clb__kernel_get_local(ctx, g->op, "gemm", opts, "gemm_zero_slack", &kz, &local)) != CLB_OK) return st;
    cl_int rank = 2;
    cl_long bn = (cl_long)clb_tensor_bound_numel(t);
    clb_arg args[] = {CLB_ARG_DATA(t->data), CLB_ARG(t->shape.mem), CLB_ARG(rank), CLB_ARG(bn)};
    return clb__launch(ctx, g->op, g->what, kz, args, CLB_NARGS(args), -1, clb__groups_local(ctx, bn, local), local);
  }
  return CLB_OK;
}

/* Strategy CLBLAST_BOUND: CLBlast over the bounds with the K slack zeroed; the
 * output's shape record is written by a one-item kernel. Writes out's rows up to
 * the bound M (never past its bound), or goes through a scratch buffer when N is
 * dynamic. */
static clb_status run_clblast_bound(clb_context_t ctx, gemm_job *g) {
  clb_buf sa = {0}, sb = {0}, sc = {0};
  const clb_buf *ma, *mb;
  char opts[128];
  helper_options(opts, sizeof opts, g->dt);
  clb_tensor_t o = g->out;
  cl_kernel ks;
  clb_status st = clb__kernel_get(ctx, g->op, "gemm", opts, "gemm_shape", &ks);
  if (st != CLB_OK) return st;
  cl_int ta = g->ta, tb = g->tb, zero = 0;
  clb_arg sargs[] = {CLB_ARG(g->a->shape.mem), CLB_ARG(g->b->shape.mem), CLB_ARG(o->shape.mem), CLB_ARG(ta),
                     CLB_ARG(tb), CLB_ARG(ctx->status), CLB_ARG(zero)};
  if ((st = clb__launch(ctx, g->op, g->what, ks, sargs, 7, 6, 1, 1)) != CLB_OK) return st;
  if (g->mb == 0 || g->nb == 0) return CLB_OK;
  if (g->kb == 0) {
    if ((st = clb_fill(ctx, o, 0.0)) != CLB_OK) return st;
    return add_bias(ctx, g);
  }
  if ((st = bound_operand(ctx, g, g->a, g->ta, &sa, &ma)) != CLB_OK) goto done;
  if ((st = bound_operand(ctx, g, g->b, !g->tb, &sb, &mb)) != CLB_OK) goto done;
  const clb_buf *mc = &o->data;
  if (g->dn) {
    char err[256];
    size_t bytes = (size_t)(g->mb * g->nb) * clb_dtype_size(g->dt);
    if ((st = clb__pool_get(ctx->pool, bytes, &sc, err, sizeof err)) != CLB_OK) {
      st = clb__set_error(ctx, st, "%s %s: scratch of %zu bytes: %s", g->op, g->what, bytes, err);
      goto done;
    }
    mc = &sc;
  }
  st = clblast_gemm(ctx, g->what, g->dt, g->ta, g->tb, (size_t)g->mb, (size_t)g->nb, (size_t)g->kb, ma,
                    (size_t)g->a->bound[1], mb, (size_t)g->b->bound[1], mc, (size_t)g->nb);
  if (st != CLB_OK) goto done;
  if (g->dn) {
    cl_kernel ku;
    size_t local = 0;
    if ((st = clb__kernel_get_local(ctx, g->op, "gemm", opts, "gemm_unpad", &ku, &local)) != CLB_OK) goto done;
    cl_long C = g->nb;
    clb_arg uargs[] = {CLB_ARG(sc.mem), CLB_ARG(C), CLB_ARG_DATA(o->data), CLB_ARG(o->shape.mem)};
    st = clb__launch(ctx, g->op, g->what, ku, uargs, CLB_NARGS(uargs), -1, clb__groups_local(ctx, g->mb * g->nb, local), local);
    if (st != CLB_OK) goto done;
  }
  st = add_bias(ctx, g);
done:
  /* The queue is in order: a later owner of these buffers runs after this work. */
  clb__pool_put(ctx->pool, &sa);
  clb__pool_put(ctx->pool, &sb);
  clb__pool_put(ctx->pool, &sc);
  return st;
}

/* Whether the device kernel is the GPU-style one (tiles in local memory). */
static int gpu_style(clb_context_t ctx) {
  return ctx->style == CLB_KERNEL_STYLE_GPU && ctx->info.max_work_group_size >= GPU_TS * GPU_TS;
}

/* The build option of the kernel's activation epilogue. */
static const char *act_opt(const gemm_job *g) {
  switch (g->act) {
  case CLB_UNARY_RELU: return " -D ACT_RELU";
  case CLB_UNARY_SIGMOID: return " -D ACT_SIGMOID";
  case CLB_UNARY_TANH: return " -D ACT_TANH";
  case CLB_UNARY_EXP: return " -D ACT_EXP";
  default: return "";
  }
}

/* Strategy DEVICE: clbound's kernel reads M, N, K from the shape records. The
 * GPU-style kernel's work-group is a TS x TS tile (reqd_work_group_size): when
 * the kernel allows fewer work-items, it is rebuilt with a smaller tile
 * (logged); the CPU-style kernel takes any local size up to CPU_LOCAL. */
static clb_status run_device(clb_context_t ctx, gemm_job *g) {
  char opts[256];
  const char *fp64 = g->dt == CLB_DTYPE_F64 ? " -D CLB_NEED_FP64" : "";
  int f64 = g->dt == CLB_DTYPE_F64;
  size_t groups, local, wg = 0;
  cl_kernel k;
  clb_status st;
  if (gpu_style(ctx)) {
    int ts = GPU_TS;
    for (;;) {
      snprintf(opts, sizeof opts, "-D GEMM_GPU -D T=%s -D TRANS_A=%d -D TRANS_B=%d -D TS=%d%s%s%s%s",
               clb__dtype_cl(g->dt), g->ta, g->tb, ts, g->bias ? " -D HAS_BIAS" : "", act_opt(g), fp64,
               g->batched ? " -D BATCHED=1" : "");
      local = (size_t)ts * (size_t)ts;
      if ((st = clb__kernel_get_wg(ctx, g->op, "gemm", opts, "gemm_gpu", local, &k, &wg)) != CLB_OK) return st;
      if (wg >= local || ts == 1) break;
      while (ts > 1 && (size_t)ts * (size_t)ts > wg) ts /= 2;
    }
    int64_t tiles = ((g->mb + ts - 1) / ts) * ((g->nb + ts - 1) / ts) * (g->batched ? g->batch : 1);
    groups = tiles < 1 ? 1 : (size_t)tiles;
    if (groups > ctx->max_groups * 4) groups = ctx->max_groups * 4;
  } else {
    int rm = CPU_RM, rn = f64 ? CPU_RN / 2 : CPU_RN;
    snprintf(opts, sizeof opts, "-D GEMM_CPU -D T=%s -D TRANS_A=%d -D TRANS_B=0 -D RM=%d -D RN=%d%s%s%s%s",
             clb__dtype_cl(g->dt), g->ta, rm, rn, g->bias ? " -D HAS_BIAS" : "", act_opt(g), fp64,
             g->batched ? " -D BATCHED=1" : "");
    if ((st = clb__kernel_get_wg(ctx, g->op, "gemm", opts, "gemm_cpu", CPU_LOCAL, &k, &wg)) != CLB_OK) return st;
    local = CPU_LOCAL;
    while (local > 1 && local > wg) local /= 2;
    int64_t blocks = ((g->mb + rm - 1) / rm) * ((g->nb + rn - 1) / rn) * (g->batched ? g->batch : 1);
    int64_t gr = (blocks + (int64_t)local - 1) / (int64_t)local;
    groups = gr < 1 ? 1 : gr > (int64_t)ctx->max_groups ? ctx->max_groups : (size_t)gr;
  }
  clb_tensor_t o = g->out;
  const clb_buf *bias = g->bias ? &g->bias->data : &o->data;
  cl_uint zero = 0;
  clb_arg args[] = {CLB_ARG_DATA(g->a->data), CLB_ARG(g->a->shape.mem), CLB_ARG_DATA(g->b->data),
                    CLB_ARG(g->b->shape.mem), CLB_ARG_DATA(o->data),      CLB_ARG(o->shape.mem),
                    CLB_ARG_DATA(*bias),     CLB_ARG(ctx->status),       CLB_ARG(zero)};
  return clb__launch(ctx, g->op, g->what, k, args, CLB_NARGS(args), CLB_NARGS(args) - 1, groups, local);
}

/* Strategy DEVICE with B transposed on a CPU-style device: B^T is first written
 * dense into a temporary (a pass over K x N, small next to the product), so the
 * product streams rows of B along N. */
static clb_status run_device_bt(clb_context_t ctx, gemm_job *g) {
  clb_tensor_t b = g->b, bt = NULL;
  int64_t tb[2] = {b->bound[1], b->bound[0]};
  uint8_t ty[2] = {b->dyn[1], b->dyn[0]};
  clb_status st = clb_tensor_new(ctx, g->dt, 2, tb, ty, &bt);
  if (st != CLB_OK) {
    clb__append_error(ctx, " (transposed copy of b in %s)", g->op);
    return st;
  }
  char opts[128];
  helper_options(opts, sizeof opts, g->dt);
  cl_kernel k;
  size_t local = 0;
  if ((st = clb__kernel_get_local(ctx, g->op, "gemm", opts, "gemm_transpose", &k, &local)) == CLB_OK) {
    clb_arg args[] = {CLB_ARG_DATA(b->data), CLB_ARG(b->shape.mem), CLB_ARG_DATA(bt->data), CLB_ARG(bt->shape.mem)};
    int64_t blocks = ((b->bound[0] + 31) / 32) * ((b->bound[1] + 31) / 32);
    st = clb__launch(ctx, g->op, g->what, k, args, CLB_NARGS(args), -1, clb__groups_local(ctx, blocks, local), local);
  }
  if (st == CLB_OK) {
    gemm_job h = *g;
    h.b = bt;
    h.tb = 0;
    st = run_device(ctx, &h);
  }
  clb_tensor_free(bt); /* the queue is in order: the buffer is reused only after this work */
  return st;
}

/* A set-up job as one product of a host-BLAS native kernel; linear_backward's
 * dbias (colsum_out) is made here and summed there. */
static clb_status host_job(clb_context_t ctx, gemm_job *g, clb_host_gemm *j) {
  *j = (clb_host_gemm){.a = g->a, .b = g->b, .bias = g->bias, .out = g->out, .ta = g->ta, .tb = g->tb,
                       .relu = g->act == CLB_UNARY_RELU};
  if (g->colsum_out) {
    int64_t cb = g->a->bound[1];
    uint8_t cd = g->a->dyn[1];
    g->colsum_made = g->unrecorded && !*g->colsum_out; /* colsum_out is never NULL here */
    clb_status st = (g->unrecorded ? clb__output_unrecorded : clb__output)(ctx, "linear_backward dbias", g->dt, 1, &cb,
                                                                           &cd, g->colsum_out);
    if (st != CLB_OK) {
      g->colsum_made = 0;
      return st;
    }
    j->colsum = *g->colsum_out;
    g->colsum_done = 1;
  }
  return CLB_OK;
}

/* Host BLAS writes its outputs' records in the native kernel, unless a plan is
 * being walked to collect its kernels (nothing is enqueued then). */
static int host_records(clb_context_t ctx) { return !ctx->collect; }

/* The native kernel of jobs[0..n) was not enqueued (st): the outputs they made
 * unrecorded get their bounds' record, so that no record is left unwritten. */
static clb_status host_unrecorded_failed(clb_context_t ctx, clb_status st, gemm_job *const *jobs, int n) {
  for (int i = 0; i < n; i++) {
    if (jobs[i]->made) clb__record_bounds(ctx, jobs[i]->op, jobs[i]->out);
    if (jobs[i]->colsum_made) clb__record_bounds(ctx, jobs[i]->op, *jobs[i]->colsum_out);
    jobs[i]->made = jobs[i]->colsum_made = 0;
  }
  return st;
}

static clb_status gemm_run(clb_context_t ctx, gemm_job *g, clb_tensor_t *out) {
  /* AUTO and CLBOUND_GEMM resolved per device (gemm-host.c, docs/gemm.md) */
  int forced, s = clb__gemm_resolve(ctx, &forced);
  g->unrecorded = s == CLB_GEMM_HOST_BLAS && host_records(ctx);
  clb_status st = gemm_setup(ctx, g, out);
  if (st != CLB_OK) return st;
  if (s == CLB_GEMM_HOST_BLAS) {
    clb_host_gemm j;
    /* ReLU in the native kernel; another activation right after it */
    if ((st = host_job(ctx, g, &j)) == CLB_OK) st = clb__gemm_host_run(ctx, g->op, g->what, &j, 1);
    if (st != CLB_OK) return host_unrecorded_failed(ctx, st, &g, 1);
    if (g->act < 0 || g->act == CLB_UNARY_RELU) return st;
    gemm_job h = *g;
    h.bias = NULL;
    return add_bias(ctx, &h);
  }
  /* host-known sizes go to CLBlast, unless the caller chose clbound's kernel */
  if (!g->dm && !g->dn && !g->dk && !(forced && s == CLB_GEMM_DEVICE))
    return run_exact(ctx, g, g->mb, g->nb, g->kb, g->a->bound[1], g->b->bound[1]);
  switch (s) {
  case CLB_GEMM_CLBLAST_BOUND: return run_clblast_bound(ctx, g);
  case CLB_GEMM_SYNC_EXACT: return run_sync_exact(ctx, g);
  default: return g->tb && !gpu_style(ctx) ? run_device_bt(ctx, g) : run_device(ctx, g);
  }
}

clb_status clb_matmul(clb_context_t ctx, clb_tensor_t a, int trans_a, clb_tensor_t b, int trans_b,
                      clb_tensor_t *out) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "matmul: ctx is NULL");
  gemm_job g = {.op = "matmul", .a = a, .b = b, .ta = trans_a != 0, .tb = trans_b != 0, .act = -1};
  return gemm_run(ctx, &g, out);
}

/* ---- Batched products ----------------------------------------------------------- */

/* clb_bmm: under HOST_BLAS (CPU devices) one native kernel looping over the
 * batch; otherwise clbound's kernel, built with BATCHED (docs/gemm.md,
 * "Batched products"), where on a CPU-style device a transposed b is first
 * copied dense (clb_transpose of its matrix dims), as run_device_bt does. */
clb_status clb_bmm(clb_context_t ctx, clb_tensor_t a, int trans_a, clb_tensor_t b, int trans_b, clb_tensor_t *out) {
  static const char *op = "bmm";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_tensor_t ops[2] = {a, b};
  const char *names[2] = {"a", "b"};
  char d[2][128];
  clb_status st;
  for (int i = 0; i < 2; i++) {
    if ((st = clb__check_tensor(ctx, op, names[i], ops[i])) != CLB_OK) return st;
    clb__tensor_desc(ops[i], d[i], sizeof d[i]);
    if (ops[i]->rank != 3)
      return clb__set_error(ctx, CLB_ERR_SHAPE, "%s: %s %s has rank %d; a batch of matrices needs rank 3", op, names[i],
                            d[i], ops[i]->rank);
    if (!clb__dtype_is_float(ops[i]->dtype))
      return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: %s is %s; bmm takes f32 or f64", op, names[i],
                            clb_dtype_name(ops[i]->dtype));
  }
  gemm_job g = {.op = op, .a = a, .b = b, .ta = trans_a != 0, .tb = trans_b != 0, .act = -1, .batched = 1,
               .batch = a->bound[0]};
  snprintf(g.what, sizeof g.what, "a %.60s%s, b %.60s%s", d[0], g.ta ? "^T" : "", d[1], g.tb ? "^T" : "");
  if (a->dtype != b->dtype) return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: dtypes differ: a %s, b %s", op, d[0], d[1]);
  g.dt = a->dtype;
  if (a->bound[0] != b->bound[0])
    return clb__set_error(ctx, CLB_ERR_SHAPE, "%s: %s: the batch dims differ: a has %lld matrices, b %lld", op, g.what,
                          (long long)a->bound[0], (long long)b->bound[0]);
  int am = g.ta ? 2 : 1, bn = g.tb ? 1 : 2;
  int64_t ka = a->bound[3 - am], kb = b->bound[3 - bn];
  if (ka != kb)
    return clb__set_error(ctx, CLB_ERR_SHAPE, "%s: %s: the inner dims differ: op(a) has %lld columns, op(b) has %lld rows",
                          op, g.what, (long long)ka, (long long)kb);
  g.mb = a->bound[am];
  g.nb = b->bound[bn];
  g.kb = ka;
  if (out && *out && (*out == a || *out == b)) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: out must not be an input", op);
  int64_t ob[3] = {g.batch, g.mb, g.nb};
  uint8_t od[3] = {(uint8_t)(a->dyn[0] || b->dyn[0]), a->dyn[am], b->dyn[bn]};
  int forced, host = clb__gemm_resolve(ctx, &forced) == CLB_GEMM_HOST_BLAS;
  /* host BLAS writes out's whole record in its native kernel */
  g.unrecorded = host && host_records(ctx);
  g.made = g.unrecorded && out && !*out;
  if ((st = (g.unrecorded ? clb__output_unrecorded : clb__output)(ctx, op, g.dt, 3, ob, od, out)) != CLB_OK) return st;
  g.out = *out;
  if (host) {
    clb_host_gemm j = {.a = a, .b = b, .out = g.out, .ta = g.ta, .tb = g.tb, .batched = 1};
    gemm_job *jobs[1] = {&g};
    if ((st = clb__gemm_host_run(ctx, op, g.what, &j, 1)) != CLB_OK) return host_unrecorded_failed(ctx, st, jobs, 1);
    return CLB_OK;
  }
  if (!g.tb || gpu_style(ctx)) return run_device(ctx, &g);
  clb_tensor_t bt = NULL;
  if ((st = clb_transpose(ctx, b, 1, 2, &bt)) != CLB_OK) {
    clb_tensor_free(bt); /* made before a failed launch, or NULL */
    clb__append_error(ctx, " (transposed copy of b in %s)", op);
    return st;
  }
  g.b = bt;
  g.tb = 0;
  st = run_device(ctx, &g);
  clb_tensor_free(bt); /* the queue is in order: the buffer is reused only after this work */
  return st;
}

/* ---- Linear ------------------------------------------------------------------- */

clb_status clb_linear(clb_context_t ctx, clb_tensor_t x, clb_tensor_t w, clb_tensor_t bias, clb_tensor_t *out) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "linear: ctx is NULL");
  gemm_job g = {.op = "linear", .a = x, .b = w, .bias = bias, .ta = 0, .tb = 1, .act = -1};
  return gemm_run(ctx, &g, out);
}

clb_status clb__linear_act(clb_context_t ctx, clb_tensor_t x, clb_tensor_t w, clb_tensor_t bias, clb_unary_op act,
                           clb_tensor_t *out) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "linear: ctx is NULL");
  if (act != CLB_UNARY_RELU && act != CLB_UNARY_SIGMOID && act != CLB_UNARY_TANH && act != CLB_UNARY_EXP)
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "linear: activation %d is not an epilogue", (int)act);
  gemm_job g = {.op = "linear", .a = x, .b = w, .bias = bias, .ta = 0, .tb = 1, .act = (int)act};
  return gemm_run(ctx, &g, out);
}

/* linear_backward, and with relu_x the backward of the ReLU whose output is x
 * (the layer below's activation) applied to dx: dx = (x > 0) ? dy W : 0. */
static clb_status linear_backward(clb_context_t ctx, clb_tensor_t x, clb_tensor_t w, clb_tensor_t dy, int relu_x,
                                  clb_tensor_t *dx, clb_tensor_t *dw, clb_tensor_t *dbias) {
  static const char *op = "linear_backward";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_status st;
  if ((st = check_operand(ctx, op, "x", x)) != CLB_OK) return st;
  /* w only enters dx: it may be NULL when dx is not asked for */
  if ((w || dx) && (st = check_operand(ctx, op, "w", w)) != CLB_OK) return st;
  if ((st = check_operand(ctx, op, "dy", dy)) != CLB_OK) return st;
  char dxs[128], dws[128] = "NULL", dys[128];
  clb__tensor_desc(x, dxs, sizeof dxs);
  if (w) clb__tensor_desc(w, dws, sizeof dws);
  clb__tensor_desc(dy, dys, sizeof dys);
  if (dy->dtype != x->dtype || (w && x->dtype != w->dtype))
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: dtypes differ: x %s, w %s, dy %s", op, dxs, dws, dys);
  if (dy->bound[0] != x->bound[0] || (w && (x->bound[1] != w->bound[1] || dy->bound[1] != w->bound[0])))
    return clb__set_error(ctx, CLB_ERR_SHAPE, "%s: x %s, w %s and dy %s do not match: x [M, in], w [features, in], dy [M, features]",
                          op, dxs, dws, dys);
  gemm_job gx = {.op = relu_x ? "linear_backward dx (with relu_backward)" : "linear_backward dx", .a = dy, .b = w, .ta = 0,
                 .tb = 0, .act = -1};
  gemm_job gw = {.op = "linear_backward dw", .a = dy, .b = x, .ta = 1, .tb = 0, .colsum_out = dbias, .act = -1};
  int forced;
  if (clb__gemm_resolve(ctx, &forced) == CLB_GEMM_HOST_BLAS) {
    /* dx (with the ReLU's backward), dW and dbias in one native kernel */
    clb_host_gemm jobs[2];
    gemm_job *made[2] = {&gx, &gw};
    int n = 0;
    gx.unrecorded = gw.unrecorded = host_records(ctx);
    if (dx) {
      if ((st = gemm_setup(ctx, &gx, dx)) != CLB_OK || (st = host_job(ctx, &gx, &jobs[n])) != CLB_OK)
        return host_unrecorded_failed(ctx, st, made, 2);
      if (relu_x) jobs[n].mask = x;
      n++;
    }
    if (dw) {
      if ((st = gemm_setup(ctx, &gw, dw)) != CLB_OK || (st = host_job(ctx, &gw, &jobs[n])) != CLB_OK)
        return host_unrecorded_failed(ctx, st, made, 2);
      n++;
    }
    if (n > 0) {
      char what[256];
      snprintf(what, sizeof what, "%s%s%s of x %.60s, w %.60s, dy %.60s", dx ? (relu_x ? "dx (relu_backward)" : "dx") : "",
               dx && dw ? ", " : "", dw ? (dbias ? "dW, dbias" : "dW") : "", dxs, dws, dys);
      if ((st = clb__gemm_host_run(ctx, op, what, jobs, n)) != CLB_OK) return host_unrecorded_failed(ctx, st, made, 2);
    }
  } else {
    if (dx && !relu_x && (st = gemm_run(ctx, &gx, dx)) != CLB_OK) return st;
    if (dx && relu_x) { /* the product, then the ReLU's backward kernel */
      clb_tensor_t p = NULL;
      if ((st = gemm_run(ctx, &gx, &p)) == CLB_OK) st = clb_unary_backward(ctx, CLB_UNARY_RELU, x, x, p, dx);
      clb_tensor_free(p); /* the queue is in order: the buffer is reused only after this work */
      if (st != CLB_OK) return st;
    }
    if (dw && (st = gemm_run(ctx, &gw, dw)) != CLB_OK) return st;
  }
  if (dbias && !gw.colsum_done) {
    if ((st = clb_reduce_dim(ctx, CLB_REDUCE_SUM, dy, 0, 0, dbias)) != CLB_OK) {
      clb__append_error(ctx, " (dbias of %s)", op);
      return st;
    }
  }
  return CLB_OK;
}

clb_status clb_linear_backward(clb_context_t ctx, clb_tensor_t x, clb_tensor_t w, clb_tensor_t dy,
                               clb_tensor_t *dx, clb_tensor_t *dw, clb_tensor_t *dbias) {
  return linear_backward(ctx, x, w, dy, 0, dx, dw, dbias);
}

clb_status clb__linear_backward_relu(clb_context_t ctx, clb_tensor_t x, clb_tensor_t w, clb_tensor_t dy, clb_tensor_t *dx,
                                     clb_tensor_t *dw, clb_tensor_t *dbias) {
  return linear_backward(ctx, x, w, dy, 1, dx, dw, dbias);
}

clb_status clb_linear_act(clb_context_t ctx, clb_tensor_t x, clb_tensor_t w, clb_tensor_t bias, clb_unary_op act,
                          clb_tensor_t *out) {
  return clb__linear_act(ctx, x, w, bias, act, out);
}

clb_status clb_linear_backward_relu(clb_context_t ctx, clb_tensor_t x, clb_tensor_t w, clb_tensor_t dy,
                                    clb_tensor_t *dx, clb_tensor_t *dw, clb_tensor_t *dbias) {
  return linear_backward(ctx, x, w, dy, 1, dx, dw, dbias);
}
