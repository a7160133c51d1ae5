/* dlpack.c: the capability query and DLPack import / export
 * (clbound/interop.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clbound/interop.h"
#include "runtime/core/core.h"

/* ---- capabilities ------------------------------------------------------------ */

typedef enum takes { TAKES_ALL = 0, TAKES_NUMERIC = 1, TAKES_FLOAT = 2 } takes;

static const struct op_caps {
  const char *name;
  takes takes;
} OPS[] = {
    {"add", TAKES_NUMERIC},     {"sub", TAKES_NUMERIC},          {"mul", TAKES_NUMERIC},
    {"div", TAKES_FLOAT},       {"remainder", TAKES_NUMERIC},    {"maximum", TAKES_NUMERIC},
    {"minimum", TAKES_NUMERIC}, {"neg", TAKES_NUMERIC},          {"relu", TAKES_NUMERIC},
    {"sigmoid", TAKES_FLOAT},   {"tanh", TAKES_FLOAT},           {"exp", TAKES_FLOAT},
    {"log", TAKES_FLOAT},       {"copy", TAKES_ALL},             {"cast", TAKES_ALL},
    {"fill", TAKES_ALL},        {"reshape", TAKES_ALL},          {"sum", TAKES_ALL},
    {"mean", TAKES_FLOAT},      {"max", TAKES_ALL},              {"matmul", TAKES_FLOAT},
    {"linear", TAKES_FLOAT},    {"linear_backward", TAKES_FLOAT}, {"unary_backward", TAKES_FLOAT},
    {"softmax", TAKES_FLOAT},   {"log_softmax", TAKES_FLOAT},    {"softmax_backward", TAKES_FLOAT},
    {"loss", TAKES_FLOAT},      {"sgd_step", TAKES_FLOAT},       {"nonzero", TAKES_ALL},
    {"nonzero_static", TAKES_ALL}, {"masked_select", TAKES_ALL}, {"masked_scatter", TAKES_ALL},
    {"eq", TAKES_ALL},          {"ne", TAKES_ALL},               {"lt", TAKES_ALL},
    {"le", TAKES_ALL},          {"gt", TAKES_ALL},               {"ge", TAKES_ALL},
    {"slice", TAKES_ALL},       {"index", TAKES_ALL},            {"permute", TAKES_ALL},
    {"transpose", TAKES_ALL},   {"where", TAKES_ALL},            {"index_put", TAKES_ALL},
    {"pow", TAKES_FLOAT},       {"floor_divide", TAKES_NUMERIC}, {"erf", TAKES_FLOAT},
    {"abs", TAKES_FLOAT},       {"sqrt", TAKES_FLOAT},           {"rsqrt", TAKES_FLOAT},
    {"log1p", TAKES_FLOAT},     {"expm1", TAKES_FLOAT},           {"assert", TAKES_ALL},
    {"cumsum", TAKES_ALL},      {"bmm", TAKES_FLOAT},            {"reshape_bounded", TAKES_ALL},
    {"floor", TAKES_FLOAT},     {"ceil", TAKES_FLOAT},           {"round", TAKES_FLOAT},
    {"trunc", TAKES_FLOAT},     {"sin", TAKES_FLOAT},            {"cos", TAKES_FLOAT},
    {"log2", TAKES_FLOAT},      {"log10", TAKES_FLOAT},          {"exp2", TAKES_FLOAT},
    {"rand_uniform", TAKES_FLOAT}, {"gather", TAKES_ALL},        {"cat", TAKES_ALL},
};
#define N_OPS (sizeof OPS / sizeof OPS[0])

const char *const *clb_op_names(size_t *count) {
  static const char *names[N_OPS + 1];
  if (!names[0])
    for (size_t i = 0; i < N_OPS; i++) names[i] = OPS[i].name;
  if (count) *count = N_OPS;
  return names;
}

clb_status clb_op_supported(clb_context_t ctx, const char *op, clb_dtype dtype) {
  static const char *fn = "clb_op_supported";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", fn);
  if (!op) return clb__set_error(ctx, CLB_ERR_NULL, "%s: op is NULL", fn);
  if ((unsigned)dtype >= CLB_DTYPE_COUNT) return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: unknown dtype %d", fn, (int)dtype);
  const struct op_caps *c = NULL;
  for (size_t i = 0; i < N_OPS && !c; i++)
    if (strcmp(OPS[i].name, op) == 0) c = &OPS[i];
  if (!c) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: unknown op \"%s\" (clb_op_names lists them)", fn, op);
  const char *dn = clb_dtype_name(dtype);
  if (c->takes == TAKES_FLOAT && !clb__dtype_is_float(dtype))
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: %s takes f32 or f64, not %s", fn, op, dn);
  if (c->takes == TAKES_NUMERIC && dtype == CLB_DTYPE_BOOL)
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: %s takes no bool (cast to u8 or i32 first)", fn, op);
  if (dtype == CLB_DTYPE_F64 && !ctx->info.has_fp64)
    return clb__set_error(ctx, CLB_ERR_UNSUPPORTED, "%s: %s on f64 needs cl_khr_fp64, which %s lacks", fn, op,
                          ctx->info.name);
  return CLB_OK;
}

/* ---- dtypes ------------------------------------------------------------------ */

static const struct {
  clb_dtype dt;
  uint8_t code, bits;
} DTYPES[] = {
    {CLB_DTYPE_F32, kDLFloat, 32}, {CLB_DTYPE_F64, kDLFloat, 64}, {CLB_DTYPE_I32, kDLInt, 32},
    {CLB_DTYPE_I64, kDLInt, 64},   {CLB_DTYPE_U8, kDLUInt, 8},    {CLB_DTYPE_BOOL, kDLBool, 8},
};
#define N_DTYPES (sizeof DTYPES / sizeof DTYPES[0])

clb_status clb_dlpack_dtype(clb_dtype dtype, DLDataType *out) {
  if (!out) return clb__set_error(NULL, CLB_ERR_NULL, "clb_dlpack_dtype: out is NULL");
  for (size_t i = 0; i < N_DTYPES; i++)
    if (DTYPES[i].dt == dtype) {
      out->code = DTYPES[i].code;
      out->bits = DTYPES[i].bits;
      out->lanes = 1;
      return CLB_OK;
    }
  return clb__set_error(NULL, CLB_ERR_DTYPE, "clb_dlpack_dtype: unknown dtype %d", (int)dtype);
}

clb_status clb_dtype_from_dlpack(DLDataType dt, clb_dtype *out) {
  if (!out) return clb__set_error(NULL, CLB_ERR_NULL, "clb_dtype_from_dlpack: out is NULL");
  for (size_t i = 0; i < N_DTYPES; i++)
    if (DTYPES[i].code == dt.code && DTYPES[i].bits == dt.bits && dt.lanes == 1) {
      *out = DTYPES[i].dt;
      return CLB_OK;
    }
  return clb__set_error(NULL, CLB_ERR_DTYPE,
                        "DLPack dtype (code %u, bits %u, lanes %u) has no clbound dtype (f32, f64, i32, i64, u8, bool)",
                        (unsigned)dt.code, (unsigned)dt.bits, (unsigned)dt.lanes);
}

/* Fills a DLTensor's dtype, rank, shape and row-major strides (in elements). */
static void fill_dl(DLTensor *dl, clb_tensor_t t, const int64_t *dims, int64_t *shape, int64_t *strides) {
  clb_dlpack_dtype(t->dtype, &dl->dtype);
  dl->ndim = t->rank;
  int64_t s = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    shape[d] = dims[d];
    strides[d] = s;
    s *= dims[d];
  }
  dl->shape = shape;
  dl->strides = strides;
  dl->byte_offset = 0;
}

/* ---- host export ---------------------------------------------------------------- */

typedef struct host_export {
  struct DLManagedTensorVersioned v;
  DLManagedTensor l;
  int64_t shape[CLB_MAX_RANK], strides[CLB_MAX_RANK];
  void *data;
} host_export;

static void host_export_free(host_export *h) {
  if (!h) return;
  free(h->data);
  free(h);
}
static void host_deleter(struct DLManagedTensorVersioned *self) {
  if (self) host_export_free((host_export *)self->manager_ctx);
}
static void host_deleter_legacy(DLManagedTensor *self) {
  if (self) host_export_free((host_export *)self->manager_ctx);
}

/* What every export starts with: t checked, its actual sizes read (a counted
 * sync) and its bounds described for messages. */
static clb_status export_prelude(clb_context_t ctx, const char *op, clb_tensor_t t, int64_t *dims, char *desc,
                                 size_t dlen) {
  clb_status st = clb__check_tensor(ctx, op, "t", t);
  if (st == CLB_OK) st = clb__sync_sizes(ctx, t, op, dims);
  if (st == CLB_OK) clb__tensor_desc(t, desc, dlen);
  return st;
}

/* Reads t's actual sizes (one counted sync), then its data into 256-byte
 * aligned memory of exactly that size (a blocking read of an idle queue). */
static clb_status host_export_new(clb_context_t ctx, const char *op, clb_tensor_t t, host_export **out) {
  *out = NULL;
  int64_t dims[CLB_MAX_RANK];
  char desc[128];
  clb_status st = export_prelude(ctx, op, t, dims, desc, sizeof desc);
  if (st != CLB_OK) return st;
  host_export *h = calloc(1, sizeof *h);
  if (!h) return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s of %s: out of host memory", op, desc);
  size_t bytes = (size_t)clb__numel(t->rank, dims) * clb_dtype_size(t->dtype);
  if (bytes) {
    h->data = aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!h->data) {
      free(h);
      return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s of %s: %zu bytes of host memory", op, desc, bytes);
    }
    st = clb__read_data(ctx, op, t, h->data, bytes);
    if (st != CLB_OK) {
      host_export_free(h);
      return st;
    }
  }
  DLTensor *dl = &h->v.dl_tensor;
  fill_dl(dl, t, dims, h->shape, h->strides);
  dl->data = h->data;
  dl->device.device_type = kDLCPU;
  dl->device.device_id = 0;
  h->l.dl_tensor = *dl;
  h->v.version.major = DLPACK_MAJOR_VERSION;
  h->v.version.minor = DLPACK_MINOR_VERSION;
  h->v.manager_ctx = h;
  h->l.manager_ctx = h;
  h->v.deleter = host_deleter;
  h->l.deleter = host_deleter_legacy;
  h->v.flags = DLPACK_FLAG_BITMASK_IS_COPIED;
  *out = h;
  return CLB_OK;
}

/* The host export as either struct, into *outp (cleared first). */
static clb_status host_export_api(clb_context_t ctx, const char *op, clb_tensor_t t, void **outp, int legacy) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  if (!outp) return clb__set_error(ctx, CLB_ERR_NULL, "%s: out is NULL", op);
  *outp = NULL;
  host_export *h;
  clb_status st = host_export_new(ctx, op, t, &h);
  if (st == CLB_OK) *outp = legacy ? (void *)&h->l : (void *)&h->v;
  return st;
}

clb_status clb_tensor_to_dlpack(clb_context_t ctx, clb_tensor_t t, struct DLManagedTensorVersioned **out) {
  return host_export_api(ctx, "clb_tensor_to_dlpack", t, (void **)out, 0);
}

clb_status clb_tensor_to_dlpack_legacy(clb_context_t ctx, clb_tensor_t t, DLManagedTensor **out) {
  return host_export_api(ctx, "clb_tensor_to_dlpack_legacy", t, (void **)out, 1);
}

/* ---- device export --------------------------------------------------------------- */

struct clb__dl_export {
  struct DLManagedTensorVersioned v;
  clb_context_t ctx;    /* NULL once the context is freed */
  clb_tensor_t holder;  /* shares t's data buffer: keeps it out of the pool */
  cl_mem mem;           /* our own reference */
  int64_t shape[CLB_MAX_RANK], strides[CLB_MAX_RANK];
  struct clb__dl_export *prev, *next;
};

static void device_deleter(struct DLManagedTensorVersioned *self) {
  if (!self) return;
  struct clb__dl_export *e = (struct clb__dl_export *)self->manager_ctx;
  if (clb__forked_child()) return; /* inherited by a forked child: left to its exit */
  if (e->ctx) {
    if (e->prev) e->prev->next = e->next;
    else e->ctx->exports = e->next;
    if (e->next) e->next->prev = e->prev;
    clb_tensor_free(e->holder);
  }
  clReleaseMemObject(e->mem);
  free(e);
}

/* The context's release hook: cuts its outstanding device exports loose (their
 * deleters then only release their own cl_mem reference). */
static void detach_all(clb_context_t ctx) {
  for (struct clb__dl_export *e = ctx->exports; e; e = e->next) {
    e->ctx = NULL;
    e->holder = NULL; /* freed with the context's tensors; mem stays ours */
  }
  ctx->exports = NULL;
}

/* Finishes export e (no copy, flags 0, the deleter above) and links it into
 * ctx's outstanding exports. */
static void export_link(clb_context_t ctx, struct clb__dl_export *e) {
  e->v.version.major = DLPACK_MAJOR_VERSION;
  e->v.version.minor = DLPACK_MINOR_VERSION;
  e->v.manager_ctx = e;
  e->v.deleter = device_deleter;
  e->v.flags = 0;
  e->ctx = ctx;
  e->next = ctx->exports;
  if (ctx->exports) ctx->exports->prev = e;
  ctx->exports = e;
}

clb_status clb_tensor_to_dlpack_device(clb_context_t ctx, clb_tensor_t t, struct DLManagedTensorVersioned **out) {
  static const char *op = "clb_tensor_to_dlpack_device";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  if (!out) return clb__set_error(ctx, CLB_ERR_NULL, "%s: out is NULL", op);
  *out = NULL;
  int64_t dims[CLB_MAX_RANK];
  char desc[128];
  clb_status st = export_prelude(ctx, op, t, dims, desc, sizeof desc);
  if (st != CLB_OK) return st;
  if ((st = clb__context_on_release(ctx, detach_all)) != CLB_OK) return st;
  struct clb__dl_export *e = calloc(1, sizeof *e);
  if (!e) return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s of %s: out of host memory", op, desc);
  if ((st = clb__tensor_share(ctx, op, t, t->rank, t->bound, t->dyn, &e->holder)) != CLB_OK) {
    free(e);
    return st;
  }
  /* a graph rewrites its tensors' buffers at its next run: the export gets a
   * copy of its own (enqueued, no host sync) */
  if (t->graph_held && (st = clb__tensor_unshare(ctx, op, &e->holder, 1)) != CLB_OK) {
    clb_tensor_free(e->holder);
    free(e);
    return st;
  }
  cl_int err = clRetainMemObject(e->holder->data.mem);
  if (err != CL_SUCCESS) {
    clb_tensor_free(e->holder);
    free(e);
    return clb__cl_error(ctx, err, "%s of %s: clRetainMemObject", op, desc);
  }
  e->mem = e->holder->data.mem;
  DLTensor *dl = &e->v.dl_tensor;
  fill_dl(dl, t, dims, e->shape, e->strides);
  dl->data = clb__numel(t->rank, dims) ? (void *)e->mem : NULL;
  dl->byte_offset = dl->data ? (uint64_t)e->holder->data.offset : 0; /* the data's place in e->mem (0 for a copy) */
  dl->device.device_type = kDLOpenCL;
  dl->device.device_id = 0;
  export_link(ctx, e);
  *out = &e->v;
  return CLB_OK;
}

/* ---- host export without a copy ----------------------------------------------------- */

/* Frees what an unfinished shared export made: holders and structs. */
static void shared_undo(struct clb__dl_export **es, int n) {
  for (int i = 0; i < n; i++) {
    if (!es[i]) continue;
    clb_tensor_free(es[i]->holder);
    free(es[i]);
  }
}

/* clb_tensors_to_dlpack_host's work; sync 0: clb_tensors_to_dlpack_host_unsynced. */
static clb_status host_exports(clb_context_t ctx, const char *op, int n, const clb_tensor_t *ts,
                               struct DLManagedTensorVersioned **outs, int sync) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  if (n < 0) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: n is %d", op, n);
  if (n == 0) return CLB_OK;
  if (!ts || !outs) return clb__set_error(ctx, CLB_ERR_NULL, "%s: ts or outs is NULL (n %d)", op, n);
  char name[32], desc[128];
  for (int i = 0; i < n; i++) outs[i] = NULL;
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "ts[%d]", i);
    clb_status st = clb__check_tensor(ctx, op, name, ts[i]);
    if (st != CLB_OK) return st;
    for (int d = 0; !sync && d < ts[i]->rank; d++)
      if (ts[i]->dyn[d])
        return clb__set_error(ctx, CLB_ERR_SHAPE,
                              "%s: %s %s has a dynamic dim %d, whose size only a host sync gives: export it with "
                              "clb_tensors_to_dlpack_host",
                              op, name, clb__tensor_desc(ts[i], desc, sizeof desc), d);
  }
  if (!clb__host_ptrs_ok(ctx))
    return clb__set_error(ctx, CLB_ERR_UNSUPPORTED,
                          "%s: the device's buffers are not host memory (as PoCL's CPU device's are); read with "
                          "clb_tensors_read or clb_tensor_to_dlpack, which copy",
                          op);
  clb_status st = clb__context_on_release(ctx, detach_all);
  if (st != CLB_OK) return st;
  struct clb__dl_export **es = calloc((size_t)n, sizeof *es);
  clb_tensor_t *holders = calloc((size_t)n, sizeof *holders);
  int64_t *dims = malloc((size_t)n * CLB_MAX_RANK * sizeof *dims);
  if (!es || !holders || !dims) {
    free(es);
    free(holders);
    free(dims);
    return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: %d exports", op, n);
  }
  for (int i = 0; i < n && st == CLB_OK; i++) {
    clb_tensor_t t = ts[i];
    if (!(es[i] = calloc(1, sizeof *es[i]))) {
      st = clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: export %d of %d", op, i, n);
      break;
    }
    st = clb__tensor_share(ctx, op, t, t->rank, t->bound, t->dyn, &es[i]->holder);
    /* a graph rewrites its tensors' buffers at its next run: a copy of its own */
    if (st == CLB_OK && t->graph_held) st = clb__tensor_unshare(ctx, op, &es[i]->holder, 1);
    holders[i] = es[i]->holder;
  }
  if (st == CLB_OK) st = clb__tensors_direct(ctx, op, n, ts, holders, dims, sync);
  for (int i = 0; i < n && st == CLB_OK; i++) {
    cl_int err = clRetainMemObject(es[i]->holder->data.mem);
    if (err != CL_SUCCESS) {
      for (int j = 0; j < i; j++) clReleaseMemObject(es[j]->mem);
      st = clb__cl_error(ctx, err, "%s: clRetainMemObject of ts[%d]", op, i);
    } else {
      es[i]->mem = es[i]->holder->data.mem;
    }
  }
  if (st != CLB_OK) {
    shared_undo(es, n);
    free(es);
    free(holders);
    free(dims);
    return st;
  }
  for (int i = 0; i < n; i++) {
    struct clb__dl_export *e = es[i];
    clb_tensor_t t = ts[i];
    const int64_t *d = dims + (size_t)i * CLB_MAX_RANK;
    DLTensor *dl = &e->v.dl_tensor;
    fill_dl(dl, t, d, e->shape, e->strides);
    dl->data = clb__numel(t->rank, d) ? (char *)e->holder->data.host + e->holder->data.offset : NULL;
    dl->device.device_type = kDLCPU;
    dl->device.device_id = 0;
    export_link(ctx, e);
    outs[i] = &e->v;
  }
  free(es);
  free(holders);
  free(dims);
  return CLB_OK;
}

clb_status clb_tensors_to_dlpack_host(clb_context_t ctx, int n, const clb_tensor_t *ts,
                                      struct DLManagedTensorVersioned **outs) {
  return host_exports(ctx, "clb_tensors_to_dlpack_host", n, ts, outs, 1);
}

clb_status clb_tensors_to_dlpack_host_unsynced(clb_context_t ctx, int n, const clb_tensor_t *ts,
                                               struct DLManagedTensorVersioned **outs) {
  return host_exports(ctx, "clb_tensors_to_dlpack_host_unsynced", n, ts, outs, 0);
}

/* ---- import ------------------------------------------------------------------------ */

/* A borrowed import's release: the producer's deleter, once the write is done. */
static void borrowed_release(void *arg) {
  struct DLManagedTensorVersioned *m = arg;
  m->deleter(m);
}

/* Copies element `src` (esize bytes) to `dst`, turning a bool into 0 or 1. */
static void put_elem(unsigned char *dst, const unsigned char *src, size_t esize, int is_bool) {
  if (is_bool) *dst = *src != 0;
  else memcpy(dst, src, esize);
}

/* managed: the tensor to borrow (clb_tensor_from_dlpack_borrowed), or NULL
 * to copy. *borrowed is set when the write took it over: its deleter then runs
 * once the write is done (clb__write_borrowed), and the caller must not call it. */
static clb_status import_dl(clb_context_t ctx, const char *op, const DLTensor *dl, const int64_t *bounds,
                            const uint8_t *dynamic, struct DLManagedTensorVersioned *managed, int *borrowed,
                            clb_tensor_t *out) {
  if (dl->device.device_type != kDLCPU && dl->device.device_type != kDLCUDAHost)
    return clb__set_error(ctx, CLB_ERR_UNSUPPORTED,
                          "%s: device type %d: clbound imports host memory (kDLCPU, kDLCUDAHost); copy device "
                          "tensors to the host first",
                          op, (int)dl->device.device_type);
  if (dl->ndim < 0 || dl->ndim > CLB_MAX_RANK)
    return clb__set_error(ctx, CLB_ERR_RANK, "%s: ndim %d is outside 0..%d", op, (int)dl->ndim, CLB_MAX_RANK);
  int rank = dl->ndim;
  clb_dtype dt;
  if (clb_dtype_from_dlpack(dl->dtype, &dt) != CLB_OK)
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: %s", op, clb_last_errmsg());
  if (rank > 0 && !dl->shape) return clb__set_error(ctx, CLB_ERR_NULL, "%s: shape is NULL for ndim %d", op, rank);
  char shape_desc[160] = "[";
  int64_t n = 1;
  for (int d = 0; d < rank; d++) {
    size_t l = strlen(shape_desc);
    snprintf(shape_desc + l, sizeof shape_desc - l, "%s%lld", d ? ", " : "", (long long)dl->shape[d]);
    if (dl->shape[d] < 0)
      return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: dim %d has size %lld", op, d, (long long)dl->shape[d]);
    n *= dl->shape[d];
  }
  strncat(shape_desc, "]", sizeof shape_desc - strlen(shape_desc) - 1);
  for (int d = 0; d < rank && bounds; d++)
    if (bounds[d] < dl->shape[d])
      return clb__set_error(ctx, CLB_ERR_OUT_OF_BOUNDS, "%s: %s tensor %s: dim %d: %lld > bound %lld", op,
                            clb_dtype_name(dt), shape_desc, d, (long long)dl->shape[d], (long long)bounds[d]);
  if (n > 0 && !dl->data)
    return clb__set_error(ctx, CLB_ERR_NULL, "%s: data is NULL for %s tensor %s", op, clb_dtype_name(dt), shape_desc);
  size_t esize = clb_dtype_size(dt);
  const unsigned char *base = n > 0 ? (const unsigned char *)dl->data + dl->byte_offset : NULL;
  int dense = 1;
  if (dl->strides) {
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
      if (dl->shape[d] != 1 && dl->strides[d] != s) dense = 0;
      s *= dl->shape[d];
    }
  }
  const void *data = base;
  unsigned char *tmp = NULL;
  if (n > 0 && (!dense || dt == CLB_DTYPE_BOOL)) {
    tmp = malloc((size_t)n * esize);
    if (!tmp)
      return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: %s tensor %s: out of host memory", op, clb_dtype_name(dt),
                            shape_desc);
    /* an odometer over the index, stepping by the strides (in elements) */
    int64_t idx[CLB_MAX_RANK] = {0};
    int64_t off = 0;
    for (int64_t i = 0; i < n; i++) {
      put_elem(tmp + (size_t)i * esize, dense ? base + (size_t)i * esize : base + off * (int64_t)esize, esize,
               dt == CLB_DTYPE_BOOL);
      if (dense) continue;
      for (int d = rank - 1; d >= 0; d--) {
        off += dl->strides[d];
        if (++idx[d] < dl->shape[d]) break;
        off -= dl->strides[d] * dl->shape[d];
        idx[d] = 0;
      }
    }
    data = tmp;
  }
  clb_tensor_t t = NULL;
  clb_status st = clb_tensor_new(ctx, dt, rank, bounds ? bounds : dl->shape, dynamic, &t);
  if (st == CLB_OK && managed && !tmp && managed->deleter) {
    *borrowed = 1; /* from here on the write owns the deleter, failures included */
    st = clb__tensor_write_borrowed(ctx, op, t, dl->shape, data, (size_t)n * esize, borrowed_release, managed);
  } else if (st == CLB_OK) {
    st = clb_tensor_write(ctx, t, dl->shape, data, (size_t)n * esize);
  }
  free(tmp);
  if (st != CLB_OK) {
    clb_tensor_free(t);
    return st;
  }
  *out = t;
  return CLB_OK;
}

/* Checks the arguments, then imports dl; the caller calls the deleter after.
 * version: the versioned struct's, or NULL for the legacy struct. */
static clb_status import_api(clb_context_t ctx, const char *op, const DLTensor *dl, const DLPackVersion *version,
                             const int64_t *bounds, const uint8_t *dynamic, struct DLManagedTensorVersioned *managed,
                             int *borrowed, clb_tensor_t *out) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  if (!dl) return clb__set_error(ctx, CLB_ERR_NULL, "%s: src is NULL", op);
  if (!out) return clb__set_error(ctx, CLB_ERR_NULL, "%s: out is NULL", op);
  *out = NULL;
  if (version && version->major != DLPACK_MAJOR_VERSION)
    return clb__set_error(ctx, CLB_ERR_UNSUPPORTED, "%s: DLPack version %u.%u; clbound speaks %d.x", op,
                          (unsigned)version->major, (unsigned)version->minor, DLPACK_MAJOR_VERSION);
  return import_dl(ctx, op, dl, bounds, dynamic, managed, borrowed, out);
}

/* Either versioned import: a copy, or borrowing src when `borrow`. */
static clb_status import_versioned(clb_context_t ctx, const char *op, struct DLManagedTensorVersioned *src,
                                   const int64_t *bounds, const uint8_t *dynamic, int borrow, clb_tensor_t *out) {
  int borrowed = 0;
  clb_status st = import_api(ctx, op, src ? &src->dl_tensor : NULL, src ? &src->version : NULL, bounds, dynamic,
                             borrow ? src : NULL, &borrowed, out);
  if (src && src->deleter && !borrowed) src->deleter(src);
  return st;
}

clb_status clb_tensor_from_dlpack(clb_context_t ctx, struct DLManagedTensorVersioned *src, const int64_t *bounds,
                                  const uint8_t *dynamic, clb_tensor_t *out) {
  return import_versioned(ctx, "clb_tensor_from_dlpack", src, bounds, dynamic, 0, out);
}

clb_status clb_tensor_from_dlpack_borrowed(clb_context_t ctx, struct DLManagedTensorVersioned *src,
                                           const int64_t *bounds, const uint8_t *dynamic, clb_tensor_t *out) {
  return import_versioned(ctx, "clb_tensor_from_dlpack_borrowed", src, bounds, dynamic, 1, out);
}

clb_status clb_tensor_from_dlpack_legacy(clb_context_t ctx, DLManagedTensor *src, const int64_t *bounds,
                                         const uint8_t *dynamic, clb_tensor_t *out) {
  int borrowed = 0;
  clb_status st = import_api(ctx, "clb_tensor_from_dlpack_legacy", src ? &src->dl_tensor : NULL, NULL, bounds,
                             dynamic, NULL, &borrowed, out);
  if (src && src->deleter) src->deleter(src);
  return st;
}
