/* context.c: contexts (own or wrapped), the device status word, host syncs, counters. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime-impl.h"

static const cl_int zero_status[CLB_STATUS_INTS] = {0};

void clb_context_options_init(clb_context_options *opts) {
  if (!opts) return;
  memset(opts, 0, sizeof *opts);
  opts->struct_size = sizeof *opts;
}

const char *clb__dtype_cl(clb_dtype dt) {
  switch (dt) {
  case CLB_DTYPE_F32: return "float";
  case CLB_DTYPE_F64: return "double";
  case CLB_DTYPE_I32: return "int";
  case CLB_DTYPE_I64: return "long";
  case CLB_DTYPE_U8: return "uchar";
  case CLB_DTYPE_BOOL: return "uchar";
  default: return NULL;
  }
}

int clb__dtype_is_float(clb_dtype dt) { return dt == CLB_DTYPE_F32 || dt == CLB_DTYPE_F64; }

size_t clb_dtype_size(clb_dtype dt) {
  static const size_t sz[CLB_DTYPE_COUNT] = {4, 8, 4, 8, 1, 1};
  return (unsigned)dt < CLB_DTYPE_COUNT ? sz[dt] : 0;
}

const char *clb_dtype_name(clb_dtype dt) {
  static const char *nm[CLB_DTYPE_COUNT] = {"f32", "f64", "i32", "i64", "u8", "bool"};
  return (unsigned)dt < CLB_DTYPE_COUNT ? nm[dt] : "?";
}

/* Finishes creation once cl, queue, device and platform are set. */
static clb_status init_common(clb_context_t ctx, const clb_context_options *opts) {
  ctx->info.struct_size = sizeof ctx->info;
  clb_status st = clb__device_describe(ctx->platform, ctx->device, &ctx->info);
  if (st != CLB_OK) return clb__set_error(NULL, st, "context: cannot describe the device");
  clb_kernel_style style = opts ? opts->kernel_style : CLB_KERNEL_STYLE_AUTO;
  if (style == CLB_KERNEL_STYLE_AUTO) style = ctx->info.is_cpu ? CLB_KERNEL_STYLE_CPU : CLB_KERNEL_STYLE_GPU;
  ctx->style = style;
  size_t local = ctx->info.is_cpu ? 64 : 256;
  if (local > ctx->info.max_work_group_size) local = ctx->info.max_work_group_size;
  size_t pow2 = 1; /* reductions use a tree over the work-group: keep it a power of two */
  while (pow2 * 2 <= local) pow2 *= 2;
  ctx->local_size = pow2;
  uint32_t cu = ctx->info.compute_units ? ctx->info.compute_units : 1;
  ctx->max_groups = (size_t)cu * (ctx->info.is_cpu ? 8 : 16);
  uint64_t limit = opts && opts->device_memory_limit ? opts->device_memory_limit : ctx->info.global_mem_bytes;
  st = clb__pool_new(ctx->cl, limit, ctx->info.max_alloc_bytes, &ctx->pool);
  if (st != CLB_OK) return clb__set_error(NULL, st, "context: out of host memory");
  st = clb__progcache_new(&ctx->programs);
  if (st != CLB_OK) return clb__set_error(NULL, st, "context: out of host memory");
  cl_int e;
  ctx->status = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, sizeof zero_status, NULL, &e);
  if (e != CL_SUCCESS) return clb__cl_error(NULL, e, "context: status word buffer");
  e = clEnqueueWriteBuffer(ctx->queue, ctx->status, CL_TRUE, 0, sizeof zero_status, zero_status, 0, NULL, NULL);
  if (e != CL_SUCCESS) return clb__cl_error(NULL, e, "context: clearing the status word");
  ctx->scratch = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, ctx->max_groups * 16, NULL, &e);
  if (e != CL_SUCCESS) return clb__cl_error(NULL, e, "context: scratch buffer");
  ctx->next_launch_id = 1;
  ctx->log_mask = clb__log_env_mask();
  clb__disk_cache_init(ctx, opts && opts->struct_size >= offsetof(clb_context_options, cache_dir) + sizeof(char *)
                                ? opts->cache_dir : NULL);
  return CLB_OK;
}

clb_status clb_context_new(const clb_context_options *opts, clb_context_t *out) {
  if (!out) return clb__set_error(NULL, CLB_ERR_NULL, "clb_context_new: out is NULL");
  *out = NULL;
  if (opts && opts->struct_size < sizeof(size_t))
    return clb__set_error(NULL, CLB_ERR_INVALID_ARG, "clb_context_new: options.struct_size not set (use clb_context_options_init)");
  clb_context_t ctx = calloc(1, sizeof *ctx);
  if (!ctx) return clb__set_error(NULL, CLB_ERR_HOST_OOM, "clb_context_new: out of host memory");
  clb_status st = clb__device_select(opts ? opts->platform : NULL, opts ? opts->device : NULL,
                                     &ctx->platform, &ctx->device);
  if (st != CLB_OK) {
    free(ctx);
    return st;
  }
  cl_int e = CL_SUCCESS;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)ctx->platform, 0};
  ctx->cl = clCreateContext(props, 1, &ctx->device, NULL, NULL, &e);
  if (e == CL_SUCCESS) ctx->queue = clCreateCommandQueue(ctx->cl, ctx->device, 0, &e);
  if (e != CL_SUCCESS) {
    st = clb__cl_error(NULL, e, "clb_context_new: creating the OpenCL context and queue");
    clb_context_free(ctx);
    return st;
  }
  st = init_common(ctx, opts);
  if (st != CLB_OK) {
    clb_context_free(ctx);
    return st;
  }
  *out = ctx;
  return CLB_OK;
}

clb_status clb_context_wrap(cl_context cl_ctx, cl_command_queue queue,
                            const clb_context_options *opts, clb_context_t *out) {
  if (!out) return clb__set_error(NULL, CLB_ERR_NULL, "clb_context_wrap: out is NULL");
  *out = NULL;
  if (!cl_ctx || !queue) return clb__set_error(NULL, CLB_ERR_NULL, "clb_context_wrap: NULL cl_context or queue");
  clb_context_t ctx = calloc(1, sizeof *ctx);
  if (!ctx) return clb__set_error(NULL, CLB_ERR_HOST_OOM, "clb_context_wrap: out of host memory");
  cl_command_queue_properties qp = 0;
  cl_context qctx = NULL;
  cl_int e = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof qctx, &qctx, NULL);
  if (e == CL_SUCCESS) e = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof ctx->device, &ctx->device, NULL);
  if (e == CL_SUCCESS) e = clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof qp, &qp, NULL);
  if (e == CL_SUCCESS) e = clGetDeviceInfo(ctx->device, CL_DEVICE_PLATFORM, sizeof ctx->platform, &ctx->platform, NULL);
  if (e != CL_SUCCESS) {
    free(ctx);
    return clb__cl_error(NULL, e, "clb_context_wrap: querying the queue");
  }
  if (qctx != cl_ctx) {
    free(ctx);
    return clb__set_error(NULL, CLB_ERR_INVALID_ARG, "clb_context_wrap: the queue belongs to another cl_context");
  }
  if (qp & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) {
    free(ctx);
    return clb__set_error(NULL, CLB_ERR_INVALID_ARG, "clb_context_wrap: the queue must be in-order");
  }
  clRetainContext(cl_ctx);
  clRetainCommandQueue(queue);
  ctx->cl = cl_ctx;
  ctx->queue = queue;
  clb_status st = init_common(ctx, opts);
  if (st != CLB_OK) {
    clb_context_free(ctx);
    return st;
  }
  *out = ctx;
  return CLB_OK;
}

void clb_context_free(clb_context_t ctx) {
  if (!ctx) return;
  if (ctx->queue) clFinish(ctx->queue);
  if (ctx->pool) clb__metrics_write_env(ctx);
  for (size_t i = 0; i < ctx->n_recompiles; i++) free(ctx->recompile_reasons[i]);
  free(ctx->recompile_reasons);
  clb__dlpack_detach_all(ctx);
  while (ctx->tensors) clb_tensor_free(ctx->tensors);
  clb__progcache_free(ctx->programs);
  clb__pool_free(ctx->pool);
  if (ctx->status) clReleaseMemObject(ctx->status);
  if (ctx->scratch) clReleaseMemObject(ctx->scratch);
  if (ctx->queue) clReleaseCommandQueue(ctx->queue);
  if (ctx->cl) clReleaseContext(ctx->cl);
  free(ctx);
}

const char *clb_context_errmsg(clb_context_t ctx) { return ctx ? ctx->errmsg : clb_last_errmsg(); }
cl_context clb_context_cl_context(clb_context_t ctx) { return ctx ? ctx->cl : NULL; }
cl_command_queue clb_context_cl_queue(clb_context_t ctx) { return ctx ? ctx->queue : NULL; }
cl_device_id clb_context_cl_device(clb_context_t ctx) { return ctx ? ctx->device : NULL; }
clb_kernel_style clb_context_kernel_style(clb_context_t ctx) { return ctx ? ctx->style : CLB_KERNEL_STYLE_AUTO; }

static int64_t join64(cl_int lo, cl_int hi) {
  return (int64_t)(((uint64_t)(uint32_t)hi << 32) | (uint32_t)lo);
}

/* Turns a raised status word into a status and a message, and clears it. */
static clb_status decode_status(clb_context_t ctx, const cl_int *w) {
  uint32_t flags = (uint32_t)w[0], id = (uint32_t)w[1], bit = (uint32_t)w[2];
  int64_t v1 = join64(w[3], w[4]), v2 = join64(w[5], w[6]);
  const clb_launch_rec *r = &ctx->ring[id % CLB_LAUNCH_RING];
  char who[256];
  if (r->id == id && r->op)
    snprintf(who, sizeof who, "%s %s", r->op, r->what);
  else
    snprintf(who, sizeof who, "launch #%u", id);
  clb_status st;
  switch (bit) {
  case CLB_STF_BOUND_EXCEEDED:
    st = clb__set_error(ctx, CLB_ERR_BOUND_EXCEEDED, "%s: size %lld exceeds its bound %lld; the output holds the first %lld",
                        who, (long long)v1, (long long)v2, (long long)v2);
    break;
  case CLB_STF_INDEX_RANGE:
    st = clb__set_error(ctx, CLB_ERR_BOUND_EXCEEDED, "%s: index %lld is outside [0, %lld); its row adds nothing", who,
                        (long long)v1, (long long)v2);
    break;
  case CLB_STF_DEVICE_CHECK:
    st = clb__set_error(ctx, CLB_ERR_DEVICE_CHECK, "%s: deferred check failed on the device: sizes %lld and %lld must be equal",
                        who, (long long)v1, (long long)v2);
    break;
  case CLB_STF_SHORT_SOURCE:
    st = clb__set_error(ctx, CLB_ERR_SHORT_SOURCE, "%s: the mask selects %lld elements but the source has only %lld",
                        who, (long long)v1, (long long)v2);
    break;
  case CLB_STF_DIV_ZERO:
    st = clb__set_error(ctx, CLB_ERR_DIV_ZERO, "%s: integer division by zero", who);
    break;
  case CLB_STF_EMPTY_REDUCE:
    st = clb__set_error(ctx, CLB_ERR_EMPTY_REDUCE, "%s: max of an empty extent has no value", who);
    break;
  default:
    st = clb__set_error(ctx, CLB_ERR_INTERNAL, "%s: unknown device status bit 0x%x", who, bit);
  }
  if (flags & ~bit) clb__append_error(ctx, " (other device errors since the last sync: flags 0x%x)", flags & ~bit);
  return st;
}

clb_status clb__sync(clb_context_t ctx, const char *why) {
  cl_int w[CLB_STATUS_INTS];
  ctx->counters.host_syncs++;
  clb__log(ctx, CLB_LOG_SYNCS, "host sync #%llu: %s", (unsigned long long)ctx->counters.host_syncs, why);
  cl_int e = clEnqueueReadBuffer(ctx->queue, ctx->status, CL_TRUE, 0, sizeof w, w, 0, NULL, NULL);
  if (e != CL_SUCCESS) return clb__cl_error(ctx, e, "%s: waiting for the device", why);
  if (w[0] == 0) return CLB_OK;
  e = clEnqueueWriteBuffer(ctx->queue, ctx->status, CL_TRUE, 0, sizeof zero_status, zero_status, 0, NULL, NULL);
  if (e != CL_SUCCESS) return clb__cl_error(ctx, e, "%s: clearing the status word", why);
  return decode_status(ctx, w);
}

clb_status clb_context_sync(clb_context_t ctx) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "clb_context_sync: ctx is NULL");
  return clb__sync(ctx, "clb_context_sync");
}

clb_status clb_context_counters(clb_context_t ctx, clb_counters *out) {
  if (!ctx || !out) return clb__set_error(ctx, CLB_ERR_NULL, "clb_context_counters: NULL argument");
  size_t keep = out->struct_size;
  if (keep < sizeof(size_t) || keep > sizeof *out)
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "clb_context_counters: struct_size %zu not set", keep);
  clb_counters c = ctx->counters;
  clb_pool_stats ps;
  clb__pool_stats(ctx->pool, &ps);
  c.device_bytes_live = ps.live_bytes;
  c.device_bytes_held = ps.held_bytes;
  c.peak_device_bytes = ps.peak_bytes;
  c.buffers_fresh = ps.fresh;
  c.buffers_reused = ps.reused;
  c.struct_size = keep;
  memcpy(out, &c, keep);
  return CLB_OK;
}
