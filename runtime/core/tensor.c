/* tensor.c: bounded tensors: buffers at the bounds, shape records on the device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/core.h"

#define SHAPE_BYTES (CLB_MAX_RANK * sizeof(int64_t))

int64_t clb__numel(int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++) n *= dims[d];
  return n;
}

clb_status clb__check_output(clb_context_t ctx, const char *op, const char *name, clb_tensor_t t) {
  clb_status fs = clb__fork_check(ctx, op);
  if (fs != CLB_OK) return fs;
  if (!t) return clb__set_error(ctx, CLB_ERR_NULL, "%s: tensor %s is NULL", op, name);
  if (t->ctx != ctx) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: tensor %s belongs to another context", op, name);
  return CLB_OK;
}

/* The error a failed tensor returns, naming who asked. */
static clb_status failed_error(clb_context_t ctx, const char *op, const char *name, clb_tensor_t t) {
  return clb__set_error(ctx, t->failed, "%s: tensor %s holds the output of an op that failed on the device (%s); "
                        "write it or compute it again first", op, name, t->failed_msg ? t->failed_msg : "no detail");
}

clb_status clb__check_tensor(clb_context_t ctx, const char *op, const char *name, clb_tensor_t t) {
  clb_status st = clb__check_output(ctx, op, name, t);
  if (st == CLB_OK && t->failed) st = failed_error(ctx, op, name, t);
  return st;
}

/* t's record is written by someone other than the select op that keeps its
 * follower's: neither the follower of t, nor the one t follows, is current. */
static void records_changed(clb_tensor_t t) {
  t->view_fresh = 0;
  if (t->view_of) t->view_of->view_fresh = 0;
}

static void clear_failed(clb_tensor_t t) {
  t->failed = CLB_OK;
  free(t->failed_msg);
  t->failed_msg = NULL;
}

void clb__note_output(clb_context_t ctx, const char *op, clb_tensor_t t) {
  if (ctx->out_launched || !ctx->out_op || strcmp(ctx->out_op, op) != 0) {
    ctx->op_seq++;
    ctx->out_op = op;
    ctx->out_launched = 0;
  }
  t->written_by = ctx->op_seq;
  clear_failed(t);
  records_changed(t);
}

void clb__view_link(clb_tensor_t x, clb_tensor_t v, int rank, const int64_t *spec) {
  if (x->view_next && x->view_next != v) return;
  if (v->view_of && v->view_of != x) return;
  x->view_next = v;
  v->view_of = x;
  v->view_rank = rank;
  for (int d = 0; d < CLB_MAX_RANK; d++) v->view_spec[d] = d < rank ? spec[d] : 0;
}

int clb__view_current(clb_tensor_t x, clb_tensor_t v, int rank, const int64_t *spec) {
  if (x->view_next != v || !x->view_fresh || v->view_rank != rank) return 0;
  for (int d = 0; d < rank; d++)
    if (v->view_spec[d] != spec[d]) return 0;
  v->written_by = x->written_by;
  clear_failed(v);
  return 1;
}

/* A tensor's data buffer: from the running plan's arena when its hook places
 * it, else from the pool. Shape records always come from the pool. */
static clb_status get_data(clb_context_t ctx, size_t bytes, clb_buf *out, char *err, size_t errlen) {
  if (ctx->mem_hook.get) {
    clb_status st = ctx->mem_hook.get(ctx->mem_hook.user, bytes, out, err, errlen);
    if (st != CLB_OK || out->mem) return st;
  }
  return clb__pool_get(ctx->pool, bytes, out, err, errlen);
}

/* A shape record: the running plan's when its hook places it, else the pool's;
 * *valid as the hook says (clb_mem_hook), else 0. */
static clb_status get_shape(clb_context_t ctx, const struct clb_tensor *of, int *valid, clb_buf *out, char *err,
                            size_t errlen) {
  *valid = 0;
  if (ctx->mem_hook.get_shape) {
    clb_status st = ctx->mem_hook.get_shape(ctx->mem_hook.user, SHAPE_BYTES, of, valid, out, err, errlen);
    if (st != CLB_OK || out->mem) return st;
  }
  return clb__pool_get(ctx->pool, SHAPE_BYTES, out, err, errlen);
}

static void put_data(clb_context_t ctx, clb_buf *b) {
  if (ctx->mem_hook.put && b->mem) ctx->mem_hook.put(ctx->mem_hook.user, b);
  clb__pool_put(ctx->pool, b);
}

static clb_status write_shape(clb_context_t ctx, const char *op, clb_tensor_t t, const int64_t *dims) {
  records_changed(t);
  int64_t rec[CLB_MAX_RANK];
  for (int d = 0; d < CLB_MAX_RANK; d++) rec[d] = d < t->rank ? dims[d] : 1;
  return clb__write_async(ctx, op, t->shape.mem, 0, rec, sizeof rec);
}

/* clb_tensor_new's work; with host (clb_tensor_from_host), the data buffer is
 * made over that memory instead of taken from the pool or an arena. */
static clb_status tensor_make(clb_context_t ctx, const char *op, clb_dtype dtype, int rank, const int64_t *bounds,
                              const uint8_t *dynamic, void *host, size_t host_bytes, int skip_record,
                              clb_tensor_t *out);

clb_status clb_tensor_new(clb_context_t ctx, clb_dtype dtype, int rank, const int64_t *bounds,
                          const uint8_t *dynamic, clb_tensor_t *out) {
  return tensor_make(ctx, "clb_tensor_new", dtype, rank, bounds, dynamic, NULL, 0, 0, out);
}

/* A buffer over host memory, checked to be that memory: a map of it (on a
 * queue of its own, so the context's queue does not wait) returns host. */
static clb_status host_data(clb_context_t ctx, void *host, size_t bytes, clb_buf *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  cl_int e = CL_SUCCESS;
  cl_mem m = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, host, &e);
  if (!m || e != CL_SUCCESS) {
    snprintf(err, errlen, "clCreateBuffer(CL_MEM_USE_HOST_PTR, %zu bytes): %s", bytes, clb__cl_error_name(e));
    return CLB_ERR_CL;
  }
  cl_command_queue q = clCreateCommandQueue(ctx->cl, ctx->device, 0, &e);
  void *p = NULL;
  if (q && e == CL_SUCCESS) {
    p = clEnqueueMapBuffer(q, m, CL_TRUE, CL_MAP_READ, 0, bytes, 0, NULL, NULL, &e);
    if (p && e == CL_SUCCESS) clEnqueueUnmapMemObject(q, m, p, 0, NULL, NULL);
    clFinish(q);
  }
  if (q) clReleaseCommandQueue(q);
  if (p != host) {
    clReleaseMemObject(m);
    snprintf(err, errlen, "the driver keeps a copy of host memory given to a buffer (a map returned %p for %p), so "
             "the device would not see the host's writes; copy with clb_tensor_write", p, host);
    return CLB_ERR_UNSUPPORTED;
  }
  out->mem = m;
  out->bytes = out->capacity = bytes;
  out->borrowed = 1; /* not the pool's: put releases it */
  out->host = host;
  return CLB_OK;
}

clb_status clb_tensor_from_host(clb_context_t ctx, clb_dtype dtype, int rank, const int64_t *dims, void *host,
                                size_t bytes, clb_tensor_t *out) {
  static const char *op = "clb_tensor_from_host";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  if (!host) return clb__set_error(ctx, CLB_ERR_NULL, "%s: host is NULL", op);
  if (!clb__host_ptrs_ok(ctx))
    return clb__set_error(ctx, CLB_ERR_UNSUPPORTED,
                          "%s: %s's buffers are not host memory (a CPU device with unified memory whose maps return "
                          "the buffer's own memory; CLBOUND_HOST_PTRS=off also turns this off): copy with "
                          "clb_tensor_write",
                          op, ctx->info.name);
  return tensor_make(ctx, op, dtype, rank, dims, NULL, host, bytes, 0, out);
}

/* skip_record: the caller writes the shape record itself before anything
 * reads it (a host write of the actual dims, right after). */
static clb_status tensor_make(clb_context_t ctx, const char *op, clb_dtype dtype, int rank, const int64_t *bounds,
                              const uint8_t *dynamic, void *host, size_t host_bytes, int skip_record,
                              clb_tensor_t *out) {
  if (!out) return clb__set_error(ctx, CLB_ERR_NULL, "%s: out is NULL", op);
  *out = NULL;
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_status fs = clb__fork_check(ctx, op);
  if (fs != CLB_OK) return fs;
  if ((unsigned)dtype >= CLB_DTYPE_COUNT) return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: unknown dtype %d", op, (int)dtype);
  if (dtype == CLB_DTYPE_F64 && !ctx->info.has_fp64)
    return clb__set_error(ctx, CLB_ERR_UNSUPPORTED, "%s: f64 needs cl_khr_fp64, which %s lacks", op, ctx->info.name);
  if (rank < 0 || rank > CLB_MAX_RANK)
    return clb__set_error(ctx, CLB_ERR_RANK, "%s: rank %d is outside 0..%d", op, rank, CLB_MAX_RANK);
  if (rank > 0 && !bounds) return clb__set_error(ctx, CLB_ERR_NULL, "%s: bounds is NULL for rank %d", op, rank);
  /* The product of the nonzero bounds must fit whatever the order of the dims:
   * strides are products of bounds, and a dim bounded at 0 does not make the
   * others' strides fit (a bound of 0 makes the tensor always empty). */
  uint64_t numel = 1, nonzero = 1;
  for (int d = 0; d < rank; d++)
    if (bounds[d] < 0) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: bound of dim %d is negative (%lld)", op, d, (long long)bounds[d]);
  for (int d = 0; d < rank; d++) {
    if (bounds[d] == 0) {
      numel = 0;
      continue;
    }
    if (nonzero > (uint64_t)INT64_MAX / 16 / (uint64_t)bounds[d]) {
      char desc[256];
      size_t used = 0;
      for (int k = 0; k < rank && used < sizeof desc; k++)
        used += (size_t)snprintf(desc + used, sizeof desc - used, "%s%lld", k ? ", " : "", (long long)bounds[k]);
      return clb__set_error(ctx, CLB_ERR_OOM, "%s: bounds [%s]: the product of the nonzero bounds overflows 64-bit byte counts",
                            op, desc);
    }
    nonzero *= (uint64_t)bounds[d];
  }
  if (numel) numel = nonzero;
  uint64_t bytes = numel * clb_dtype_size(dtype);
  if (bytes > SIZE_MAX) return clb__set_error(ctx, CLB_ERR_OOM, "%s: %llu bytes do not fit in size_t", op, (unsigned long long)bytes);
  clb_tensor_t t = calloc(1, sizeof *t);
  if (!t) return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: out of host memory", op);
  t->ctx = ctx;
  t->dtype = dtype;
  t->rank = rank;
  for (int d = 0; d < rank; d++) {
    t->bound[d] = bounds[d];
    t->dyn[d] = dynamic ? (dynamic[d] != 0) : 0;
  }
  char err[256];
  char desc[128];
  clb_status st;
  if (host && host_bytes != (size_t)bytes) {
    clb__tensor_desc(t, desc, sizeof desc);
    free(t);
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s %s: %zu bytes given, the tensor holds %llu", op, desc,
                          host_bytes, (unsigned long long)bytes);
  }
  if (host && bytes > 0) {
    st = host_data(ctx, host, (size_t)bytes, &t->data, err, sizeof err);
    t->host_backed = st == CLB_OK;
  } else {
    st = get_data(ctx, (size_t)bytes, &t->data, err, sizeof err); /* an empty tensor has no bytes to share */
  }
  int valid = 0;
  if (st == CLB_OK) st = get_shape(ctx, t, &valid, &t->shape, err, sizeof err);
  if (st != CLB_OK) {
    put_data(ctx, &t->data);
    clb__tensor_desc(t, desc, sizeof desc);
    free(t);
    return clb__set_error(ctx, st, "%s %s: %s", op, desc, err);
  }
  /* the bounds, unless the plan's record already holds a valid record of this
   * layout (its static dims are these, its producer writes the dynamic ones) */
  if (!valid && !skip_record) {
    ctx->fresh_record = 1; /* no host-BLAS product kept by a merge reads it */
    st = write_shape(ctx, op, t, t->bound);
    ctx->fresh_record = 0;
    if (st == CLB_OK && t->shape.rec_ok) *t->shape.rec_ok = 1;
  }
  if (st != CLB_OK) {
    put_data(ctx, &t->data);
    clb__pool_put(ctx->pool, &t->shape);
    free(t);
    return st;
  }
  t->next = ctx->tensors;
  if (ctx->tensors) ctx->tensors->prev = t;
  ctx->tensors = t;
  *out = t;
  return CLB_OK;
}

void clb_tensor_free(clb_tensor_t t) {
  if (!t || clb__forked_child()) return; /* inherited by a forked child: left to its exit */
  clb_context_t ctx = t->ctx;
  /* host memory given to clb_tensor_from_host is the caller's again on return:
   * nothing queued may still use it (the views' holder is the last to free) */
  if (t->host_backed && (!t->data_refs || *t->data_refs == 1)) clFinish(ctx->queue);
  /* Kernels still queued may use the buffers: a later owner only writes after
   * them, since the queue is in order. */
  if (!t->data_refs) {
    put_data(ctx, &t->data);
  } else if (--*t->data_refs == 0) {
    put_data(ctx, &t->data);
    free(t->data_refs);
  }
  clb__pool_put(ctx->pool, &t->shape);
  if (t->view_next) t->view_next->view_of = NULL;
  if (t->view_of) {
    t->view_of->view_next = NULL;
    t->view_of->view_fresh = 0;
  }
  free(t->failed_msg);
  if (t->prev) t->prev->next = t->next;
  else ctx->tensors = t->next;
  if (t->next) t->next->prev = t->prev;
  free(t);
}

clb_status clb__tensor_share(clb_context_t ctx, const char *op, clb_tensor_t x, int rank, const int64_t *bounds,
                             const uint8_t *dyn, clb_tensor_t *out) {
  char desc[128];
  clb__tensor_desc(x, desc, sizeof desc);
  clb_tensor_t v = calloc(1, sizeof *v);
  if (!v) return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s of %s: out of host memory", op, desc);
  char err[256];
  int valid;
  clb_status st = get_shape(ctx, NULL, &valid, &v->shape, err, sizeof err);
  if (st != CLB_OK) {
    free(v);
    return clb__set_error(ctx, st, "%s of %s: shape record: %s", op, desc, err);
  }
  if (!x->data_refs) {
    x->data_refs = malloc(sizeof *x->data_refs);
    if (!x->data_refs) {
      clb__pool_put(ctx->pool, &v->shape);
      free(v);
      return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s of %s: out of host memory", op, desc);
    }
    *x->data_refs = 1;
  }
  (*x->data_refs)++;
  v->ctx = ctx;
  v->dtype = x->dtype;
  v->rank = rank;
  for (int d = 0; d < rank; d++) {
    v->bound[d] = bounds[d];
    v->dyn[d] = dyn ? dyn[d] : 0;
  }
  v->data = x->data;
  v->data_refs = x->data_refs;
  v->graph_held = x->graph_held;
  v->host_backed = x->host_backed;
  v->next = ctx->tensors;
  if (ctx->tensors) ctx->tensors->prev = v;
  ctx->tensors = v;
  *out = v;
  return CLB_OK;
}

clb_status clb__tensor_unshare(clb_context_t ctx, const char *op, clb_tensor_t *moved, size_t n) {
  if (n == 0) return CLB_OK;
  clb_tensor_t x = moved[0];
  char desc[128], err[256];
  clb__tensor_desc(x, desc, sizeof desc);
  int *refs = NULL;
  if (n > 1 && !(refs = malloc(sizeof *refs)))
    return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: a copy of %s for its views: out of host memory", op, desc);
  /* from the pool itself: a graph's open step must not place it in its arena */
  clb_buf nb = {0};
  clb_status st = clb__pool_get(ctx->pool, x->data.bytes, &nb, err, sizeof err);
  if (st != CLB_OK) {
    free(refs);
    return clb__set_error(ctx, st, "%s: a copy of %s (%zu bytes) for its views: %s", op, desc, x->data.bytes, err);
  }
  if (x->data.bytes && (st = clb__merge_flush(ctx)) == CLB_OK) {
    cl_int e = clEnqueueCopyBuffer(ctx->queue, x->data.mem, nb.mem, (size_t)x->data.offset, 0, x->data.bytes, 0, NULL, NULL);
    if (e != CL_SUCCESS) st = clb__cl_error(ctx, e, "%s: copying %zu bytes of %s for its views", op, x->data.bytes, desc);
  }
  if (st != CLB_OK) {
    clb__pool_put(ctx->pool, &nb);
    free(refs);
    return st;
  }
  int *old = x->data_refs;
  *old -= (int)n; /* others keep it: never 0 here */
  if (refs) *refs = (int)n;
  for (size_t i = 0; i < n; i++) {
    clb_tensor_t m = moved[i];
    m->data = nb;
    m->data_refs = refs;
    m->graph_held = 0;
    if (m->view_of && m->view_of->data_refs == old) { /* it no longer views that data */
      m->view_of->view_next = NULL;
      m->view_of->view_fresh = 0;
      m->view_of = NULL;
    }
  }
  return CLB_OK;
}

clb_dtype clb_tensor_dtype(clb_tensor_t t) { return t ? t->dtype : CLB_DTYPE_COUNT; }
int clb_tensor_rank(clb_tensor_t t) { return t ? t->rank : -1; }
void clb_tensor_bounds(clb_tensor_t t, int64_t *dims) {
  if (t && dims) memcpy(dims, t->bound, (size_t)t->rank * sizeof *dims);
}
int clb_tensor_is_dynamic(clb_tensor_t t, int d) { return t && d >= 0 && d < t->rank ? t->dyn[d] : 0; }
int64_t clb_tensor_bound_numel(clb_tensor_t t) { return t ? clb__numel(t->rank, t->bound) : 0; }
cl_mem clb_tensor_data_mem(clb_tensor_t t) { return t ? t->data.mem : NULL; }
size_t clb_tensor_data_offset(clb_tensor_t t) { return t ? (size_t)t->data.offset : 0; }
cl_mem clb_tensor_shape_mem(clb_tensor_t t) { return t ? t->shape.mem : NULL; }

/* Checks actual sizes against the bounds and static dims. */
static clb_status check_dims(clb_context_t ctx, const char *op, clb_tensor_t t, const int64_t *dims) {
  if (t->rank > 0 && !dims) return clb__set_error(ctx, CLB_ERR_NULL, "%s: dims is NULL for rank %d", op, t->rank);
  char desc[128];
  for (int d = 0; d < t->rank; d++) {
    if (dims[d] < 0 || dims[d] > t->bound[d])
      return clb__set_error(ctx, CLB_ERR_OUT_OF_BOUNDS, "%s: dim %d of %s: %lld %s bound %lld", op, d,
                            clb__tensor_desc(t, desc, sizeof desc), (long long)dims[d],
                            dims[d] < 0 ? "is negative," : ">", (long long)t->bound[d]);
    if (!t->dyn[d] && dims[d] != t->bound[d])
      return clb__set_error(ctx, CLB_ERR_OUT_OF_BOUNDS, "%s: dim %d of %s is static: %lld != %lld", op, d,
                            clb__tensor_desc(t, desc, sizeof desc), (long long)dims[d], (long long)t->bound[d]);
  }
  return CLB_OK;
}

/* The record of actual dims `dims` (checked): written where a dim is dynamic; a
 * static tensor's record holds its bounds from its making on, and every kernel
 * writes those same values, so there is nothing to write. */
static clb_status write_sizes(clb_context_t ctx, const char *op, clb_tensor_t t, const int64_t *dims) {
  for (int d = 0; d < t->rank; d++)
    if (t->dyn[d]) return write_shape(ctx, op, t, dims);
  records_changed(t);
  return CLB_OK;
}

/* clb_tensor_write, from a staging copy (release NULL) or borrowing host
 * (clb__write_borrowed: release runs once the write is done, or before
 * returning when there is no write to wait for, failures included). */
static clb_status write_tensor(clb_context_t ctx, const char *op, clb_tensor_t t, const int64_t *dims,
                               const void *host, size_t bytes, void (*release)(void *), void *release_arg) {
  clb_status st = clb__check_output(ctx, op, "t", t); /* writing clears a failed mark */
  if (st == CLB_OK) st = check_dims(ctx, op, t, dims);
  size_t want = st == CLB_OK ? (size_t)clb__numel(t->rank, dims) * clb_dtype_size(t->dtype) : 0;
  if (st == CLB_OK && bytes != want)
    st = clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: %zu bytes given, the dims need %zu", op, bytes, want);
  if (st == CLB_OK && want && !host) st = clb__set_error(ctx, CLB_ERR_NULL, "%s: host is NULL", op);
  if (st == CLB_OK) st = write_sizes(ctx, op, t, dims);
  if (st != CLB_OK) {
    if (release) release(release_arg);
    return st;
  }
  st = release ? clb__write_borrowed(ctx, op, t->data.mem, (size_t)t->data.offset, host, bytes, release, release_arg)
               : clb__write_async(ctx, op, t->data.mem, (size_t)t->data.offset, host, bytes);
  if (st != CLB_OK) return st;
  t->written_by = 0; /* written by the host: whatever failed before is gone */
  clear_failed(t);
  return CLB_OK;
}

clb_status clb_tensor_write(clb_context_t ctx, clb_tensor_t t, const int64_t *dims,
                            const void *host, size_t bytes) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "clb_tensor_write: ctx is NULL");
  return write_tensor(ctx, "clb_tensor_write", t, dims, host, bytes, NULL, NULL);
}

void clb__release_nothing(void *arg) { (void)arg; }

clb_status clb_tensor_write_borrowed(clb_context_t ctx, clb_tensor_t t, const int64_t *dims, const void *host,
                                     size_t bytes, void (*release)(void *), void *release_arg) {
  if (!ctx) {
    if (release) release(release_arg);
    return clb__set_error(NULL, CLB_ERR_NULL, "clb_tensor_write_borrowed: ctx is NULL");
  }
  return write_tensor(ctx, "clb_tensor_write_borrowed", t, dims, host, bytes, release ? release : clb__release_nothing,
                      release_arg);
}

clb_status clb_tensor_new_write_borrowed(clb_context_t ctx, clb_dtype dtype, int rank, const int64_t *bounds,
                                         const uint8_t *dynamic, const int64_t *dims, const void *host, size_t bytes,
                                         void (*release)(void *), void *release_arg, clb_tensor_t *out) {
  static const char *op = "clb_tensor_new_write_borrowed";
  if (!release) release = clb__release_nothing;
  if (out) *out = NULL;
  if (!ctx) {
    release(release_arg);
    return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  }
  if (!out) {
    release(release_arg);
    return clb__set_error(ctx, CLB_ERR_NULL, "%s: out is NULL", op);
  }
  /* a tensor with a dynamic dim gets one record write, the actual dims (the
   * write's); a static one keeps its bounds' record from its making */
  int dyn = 0;
  for (int d = 0; dynamic && rank > 0 && rank <= CLB_MAX_RANK && d < rank; d++) dyn |= dynamic[d] != 0;
  clb_tensor_t t = NULL;
  clb_status st = tensor_make(ctx, op, dtype, rank, bounds, dynamic, NULL, 0, dyn, &t);
  if (st != CLB_OK) {
    release(release_arg);
    return st;
  }
  if ((st = write_tensor(ctx, op, t, dims, host, bytes, release, release_arg)) != CLB_OK) {
    clb_tensor_free(t); /* its record may never have been written: nothing may read it */
    return st;
  }
  *out = t;
  return CLB_OK;
}

clb_status clb__tensor_write_borrowed(clb_context_t ctx, const char *op, clb_tensor_t t, const int64_t *dims,
                                      const void *host, size_t bytes, void (*release)(void *), void *release_arg) {
  return write_tensor(ctx, op, t, dims, host, bytes, release, release_arg);
}

clb_status clb_tensor_set_sizes(clb_context_t ctx, clb_tensor_t t, const int64_t *dims) {
  static const char *op = "clb_tensor_set_sizes";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_status st = clb__check_tensor(ctx, op, "t", t);
  if (st != CLB_OK) return st;
  if ((st = check_dims(ctx, op, t, dims)) != CLB_OK) return st;
  return write_sizes(ctx, op, t, dims);
}

/* Reads the shape record and syncs: one counted host sync. */
static clb_status read_sizes(clb_context_t ctx, const char *op, clb_tensor_t t, int64_t *rec) {
  clb_status hs = clb__launch_host(ctx, op, NULL);
  if (hs != CLB_OK) return hs;
  cl_int e = clEnqueueReadBuffer(ctx->queue, t->shape.mem, CL_FALSE, 0, SHAPE_BYTES, rec, 0, NULL, NULL);
  if (e != CL_SUCCESS) return clb__cl_error(ctx, e, "%s: reading sizes", op);
  ctx->counters.bytes_to_host += SHAPE_BYTES;
  clb_status st = clb__sync(ctx, op); /* the in-order queue has finished the read too */
  if (st != CLB_OK) clFinish(ctx->queue); /* unless the wait failed: rec is the caller's stack */
  return st;
}

/* Reads through host pointers. Where the device's buffers are host memory
 * (runtime/core/hostptr.c), what a sync leaves finished can be copied from
 * the buffers themselves: the sizes and the data of every tensor after one
 * wait, instead of a second wait for the data's reads (each wait is a round
 * trip to PoCL's worker threads, about 0.1 ms on 2 cores). A pointer not yet
 * known is learnt with a map enqueued before the wait. Returns 1 when every
 * tensor can be read so; then the caller syncs and copies. */
static int direct_prepare(clb_context_t ctx, int n, const clb_tensor_t *ts) {
  if (!clb__host_ptrs_ok(ctx)) return 0;
  int ok = 1;
  for (int i = 0; i < n; i++) {
    clb_tensor_t t = ts[i];
    if (t->shape.offset != 0) { /* records are read at the start of their cl_mem */
      ok = 0;
      continue;
    }
    clb__buf_host_map_learn(ctx, &t->shape);
    clb__buf_host_map_learn(ctx, &t->data);
    if (!t->shape.host || !t->data.host) ok = 0;
  }
  return ok;
}

static void direct_sizes(clb_context_t ctx, clb_tensor_t t, int64_t *rec) {
  memcpy(rec, t->shape.host, SHAPE_BYTES);
  ctx->counters.bytes_to_host += SHAPE_BYTES;
}

static void direct_data(clb_context_t ctx, clb_tensor_t t, void *host, size_t bytes) {
  memcpy(host, (const char *)t->data.host + t->data.offset, bytes);
  ctx->counters.bytes_to_host += bytes;
}

clb_status clb__sync_sizes(clb_context_t ctx, clb_tensor_t t, const char *why, int64_t *dims) {
  int64_t rec[CLB_MAX_RANK];
  clb_status st = read_sizes(ctx, why, t, rec);
  if (st == CLB_OK) memcpy(dims, rec, (size_t)t->rank * sizeof *dims);
  return st;
}

clb_status clb_tensor_sizes(clb_context_t ctx, clb_tensor_t t, int64_t *dims) {
  static const char *op = "clb_tensor_sizes";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_status st = clb__check_tensor(ctx, op, "t", t);
  if (st != CLB_OK) return st;
  if (t->rank > 0 && !dims) return clb__set_error(ctx, CLB_ERR_NULL, "%s: dims is NULL", op);
  int64_t rec[CLB_MAX_RANK];
  if ((st = read_sizes(ctx, op, t, rec)) != CLB_OK) return st;
  if (t->failed) return failed_error(ctx, op, "t", t);
  memcpy(dims, rec, (size_t)t->rank * sizeof *dims);
  return CLB_OK;
}

clb_status clb_tensor_read(clb_context_t ctx, clb_tensor_t t, int64_t *dims, void *host,
                           size_t cap, size_t *bytes_out) {
  static const char *op = "clb_tensor_read";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_status st = clb__check_tensor(ctx, op, "t", t);
  if (st != CLB_OK) return st;
  int64_t rec[CLB_MAX_RANK];
  int direct = 0;
  if ((st = clb__launch_host(ctx, op, NULL)) != CLB_OK) return st;
  if ((direct = direct_prepare(ctx, 1, &t))) {
    if ((st = clb__sync(ctx, op)) != CLB_OK) return st;
    direct_sizes(ctx, t, rec);
  } else if ((st = read_sizes(ctx, op, t, rec)) != CLB_OK) {
    return st;
  }
  if (t->failed) return failed_error(ctx, op, "t", t);
  for (int d = 0; d < t->rank; d++)
    if (rec[d] < 0 || rec[d] > t->bound[d])
      return clb__set_error(ctx, CLB_ERR_INTERNAL, "%s: shape record dim %d holds %lld, bound %lld", op, d,
                            (long long)rec[d], (long long)t->bound[d]);
  if (dims) memcpy(dims, rec, (size_t)t->rank * sizeof *dims);
  size_t bytes = (size_t)clb__numel(t->rank, rec) * clb_dtype_size(t->dtype);
  if (bytes_out) *bytes_out = bytes;
  if (bytes > cap)
    return clb__set_error(ctx, CLB_ERR_BUFFER_SMALL, "%s: %zu bytes live, buffer holds %zu", op, bytes, cap);
  if (bytes == 0) return CLB_OK;
  if (!host) return clb__set_error(ctx, CLB_ERR_NULL, "%s: host is NULL", op);
  if (direct) {
    direct_data(ctx, t, host, bytes);
    return CLB_OK;
  }
  return clb__read_data(ctx, op, t, host, bytes);
}

/* A read record's checks: t's failure, if any, then each dim within its bound. */
static clb_status check_record(clb_context_t ctx, const char *op, const char *name, clb_tensor_t t,
                               const int64_t *r) {
  if (t->failed) return failed_error(ctx, op, name, t);
  for (int d = 0; d < t->rank; d++)
    if (r[d] < 0 || r[d] > t->bound[d])
      return clb__set_error(ctx, CLB_ERR_INTERNAL, "%s: %s's shape record dim %d holds %lld, bound %lld", op, name, d,
                            (long long)r[d], (long long)t->bound[d]);
  return CLB_OK;
}

clb_status clb_tensors_read(clb_context_t ctx, int n, const clb_tensor_t *ts, int64_t *dims, void *const *hosts,
                            const size_t *caps, size_t *bytes_out) {
  static const char *op = "clb_tensors_read";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  if (n < 0) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: n is %d", op, n);
  if (n == 0) return CLB_OK;
  if (!ts || !hosts || !caps) return clb__set_error(ctx, CLB_ERR_NULL, "%s: ts, hosts or caps is NULL (n %d)", op, n);
  char name[32];
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "ts[%d]", i);
    clb_status st = clb__check_tensor(ctx, op, name, ts[i]);
    if (st != CLB_OK) return st;
  }
  int64_t *rec = malloc(sizeof *rec * (size_t)n * CLB_MAX_RANK);
  if (!rec) return clb__set_error(ctx, CLB_ERR_OOM, "%s: %d shape records", op, n);
  /* every shape record in the queue (or read through host pointers after it),
   * then one sync (which checks the status word) */
  clb_status st = clb__launch_host(ctx, op, NULL);
  int direct = st == CLB_OK && direct_prepare(ctx, n, ts);
  cl_int e = CL_SUCCESS;
  for (int i = 0; i < n && !direct && st == CLB_OK && e == CL_SUCCESS; i++) {
    e = clEnqueueReadBuffer(ctx->queue, ts[i]->shape.mem, CL_FALSE, 0, SHAPE_BYTES, rec + (size_t)i * CLB_MAX_RANK, 0,
                            NULL, NULL);
    if (e == CL_SUCCESS) ctx->counters.bytes_to_host += SHAPE_BYTES;
  }
  if (st == CLB_OK && e != CL_SUCCESS) st = clb__cl_error(ctx, e, "%s: reading the sizes of %d tensors", op, n);
  if (st == CLB_OK) st = clb__sync(ctx, op);
  else clFinish(ctx->queue); /* rec is ours until the reads queued so far are done */
  for (int i = 0; i < n && direct && st == CLB_OK; i++) direct_sizes(ctx, ts[i], rec + (size_t)i * CLB_MAX_RANK);
  size_t *sizes = bytes_out;
  for (int i = 0; i < n && st == CLB_OK; i++) {
    clb_tensor_t t = ts[i];
    const int64_t *r = rec + (size_t)i * CLB_MAX_RANK;
    snprintf(name, sizeof name, "ts[%d]", i);
    if ((st = check_record(ctx, op, name, t, r)) != CLB_OK) break;
    size_t bytes = (size_t)clb__numel(t->rank, r) * clb_dtype_size(t->dtype);
    if (dims) memcpy(dims + (size_t)i * CLB_MAX_RANK, r, (size_t)t->rank * sizeof *dims);
    if (sizes) sizes[i] = bytes;
    if (st == CLB_OK && bytes > caps[i])
      st = clb__set_error(ctx, CLB_ERR_BUFFER_SMALL, "%s: %s has %zu bytes live, its buffer holds %zu", op, name, bytes,
                          caps[i]);
    if (st == CLB_OK && bytes > 0 && !hosts[i]) st = clb__set_error(ctx, CLB_ERR_NULL, "%s: hosts[%d] is NULL", op, i);
  }
  /* then every live part, one wait for them all */
  for (int i = 0; i < n && st == CLB_OK; i++) {
    clb_tensor_t t = ts[i];
    size_t bytes = (size_t)clb__numel(t->rank, rec + (size_t)i * CLB_MAX_RANK) * clb_dtype_size(t->dtype);
    if (bytes == 0) continue;
    if (direct) {
      direct_data(ctx, t, hosts[i], bytes);
      continue;
    }
    e = clEnqueueReadBuffer(ctx->queue, t->data.mem, CL_FALSE, (size_t)t->data.offset, bytes, hosts[i], 0, NULL, NULL);
    if (e != CL_SUCCESS) st = clb__cl_error(ctx, e, "%s: reading %zu bytes of ts[%d]", op, bytes, i);
    else ctx->counters.bytes_to_host += bytes;
  }
  if (!direct) {
    e = clFinish(ctx->queue);
    if (st == CLB_OK && e != CL_SUCCESS) st = clb__cl_error(ctx, e, "%s: waiting for the reads of %d tensors", op, n);
  }
  free(rec);
  return st;
}

clb_status clb__tensors_direct(clb_context_t ctx, const char *op, int n, const clb_tensor_t *ts,
                               const clb_tensor_t *data, int64_t *dims, int sync) {
  clb_status st = sync ? clb__launch_host(ctx, op, NULL) : CLB_OK;
  if (st != CLB_OK) return st;
  int ok = direct_prepare(ctx, n, ts);
  if (!direct_prepare(ctx, n, data) || !ok)
    return clb__set_error(ctx, CLB_ERR_UNSUPPORTED, "%s: a buffer of the %d tensors has no host pointer", op, n);
  if (sync && (st = clb__sync(ctx, op)) != CLB_OK) return st;
  char name[32];
  for (int i = 0; i < n; i++) {
    clb_tensor_t t = ts[i];
    int64_t rec[CLB_MAX_RANK];
    snprintf(name, sizeof name, "ts[%d]", i);
    if (!sync) memcpy(rec, t->bound, (size_t)t->rank * sizeof *rec); /* every dim static: its bound */
    else if (!t->failed) direct_sizes(ctx, t, rec);
    if ((st = check_record(ctx, op, name, t, rec)) != CLB_OK) return st;
    memcpy(dims + (size_t)i * CLB_MAX_RANK, rec, (size_t)t->rank * sizeof *dims);
  }
  return CLB_OK;
}

clb_status clb__read_data(clb_context_t ctx, const char *op, clb_tensor_t t, void *host, size_t bytes) {
  cl_int e = clEnqueueReadBuffer(ctx->queue, t->data.mem, CL_TRUE, (size_t)t->data.offset, bytes, host, 0, NULL, NULL);
  if (e != CL_SUCCESS) return clb__cl_error(ctx, e, "%s: reading %zu bytes", op, bytes);
  ctx->counters.bytes_to_host += bytes;
  return CLB_OK;
}

/* clb__output's work; a tensor it makes with unrecorded set gets no record
 * write (clb__output_unrecorded). */
static clb_status get_output(clb_context_t ctx, const char *op, clb_dtype dtype, int rank, const int64_t *bounds,
                             const uint8_t *dyn, int unrecorded, clb_tensor_t *out);

clb_status clb__output(clb_context_t ctx, const char *op, clb_dtype dtype, int rank,
                       const int64_t *bounds, const uint8_t *dyn, clb_tensor_t *out) {
  return get_output(ctx, op, dtype, rank, bounds, dyn, 0, out);
}

clb_status clb__output_unrecorded(clb_context_t ctx, const char *op, clb_dtype dtype, int rank,
                                  const int64_t *bounds, const uint8_t *dyn, clb_tensor_t *out) {
  return get_output(ctx, op, dtype, rank, bounds, dyn, 1, out);
}

clb_status clb__record_bounds(clb_context_t ctx, const char *op, clb_tensor_t t) {
  return write_shape(ctx, op, t, t->bound);
}

static clb_status get_output(clb_context_t ctx, const char *op, clb_dtype dtype, int rank, const int64_t *bounds,
                             const uint8_t *dyn, int unrecorded, clb_tensor_t *out) {
  if (!out) return clb__set_error(ctx, CLB_ERR_NULL, "%s: out is NULL", op);
  if (!*out) {
    clb_status st = tensor_make(ctx, "clb_tensor_new", dtype, rank, bounds, dyn, NULL, 0, unrecorded, out);
    if (st != CLB_OK) clb__append_error(ctx, " (output of %s)", op);
    else clb__note_output(ctx, op, *out);
    return st;
  }
  clb_tensor_t t = *out;
  clb_status st = clb__check_output(ctx, op, "out", t);
  if (st != CLB_OK) return st;
  char desc[128];
  if (t->dtype != dtype)
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: out is %s, the op gives %s", op, clb_dtype_name(t->dtype), clb_dtype_name(dtype));
  if (t->rank != rank)
    return clb__set_error(ctx, CLB_ERR_SHAPE, "%s: out %s has rank %d, the op gives rank %d", op,
                          clb__tensor_desc(t, desc, sizeof desc), t->rank, rank);
  for (int d = 0; d < rank; d++) {
    if (t->bound[d] < bounds[d])
      return clb__set_error(ctx, CLB_ERR_OUT_OF_BOUNDS, "%s: dim %d of out %s: bound %lld < %lld needed", op, d,
                            clb__tensor_desc(t, desc, sizeof desc), (long long)t->bound[d], (long long)bounds[d]);
    if (!dyn[d] && !t->dyn[d] && t->bound[d] != bounds[d])
      return clb__set_error(ctx, CLB_ERR_SHAPE, "%s: dim %d of out %s is static: %lld != %lld, the op's size", op, d,
                            clb__tensor_desc(t, desc, sizeof desc), (long long)t->bound[d], (long long)bounds[d]);
    if (dyn[d] && !t->dyn[d])
      return clb__set_error(ctx, CLB_ERR_SHAPE, "%s: dim %d of out %s must be dynamic: its size can be below %lld", op, d,
                            clb__tensor_desc(t, desc, sizeof desc), (long long)t->bound[d]);
  }
  clb__note_output(ctx, op, t);
  return CLB_OK;
}
