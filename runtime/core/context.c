/* context.c: contexts (own or wrapped): creation, accessors, release hooks, free. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/core.h"

void clb_context_options_init(clb_context_options *opts) {
  if (!opts) return;
  memset(opts, 0, sizeof *opts);
  opts->struct_size = sizeof *opts;
}

/* ---- The driver kept loaded -----------------------------------------------------
 * PoCL frees its compiler (LLVM, and the kernel library of about 10 MB of
 * bitcode it parsed) when the process's last context is released, and parses
 * it all again at the next context's first build: about 0.1 s in that last
 * clReleaseContext and 0.45 s more in the next build on the 2-core VM, for any
 * program that frees its context and makes another, and 0.1 s at the end of
 * every process that frees its context before it exits. So the first context
 * on a platform (CLBOUND_KEEP_DRIVER: auto, PoCL only; on, every platform)
 * also makes a context of its own on that device, empty and never released:
 * the driver stays loaded until the process exits, as a GPU runtime keeps its
 * primary context. A platform is decided once; a keeper that cannot be made is
 * logged and nothing else changes. */
#define KEEP_MAX 16
static pthread_mutex_t keep_lock = PTHREAD_MUTEX_INITIALIZER;
static cl_platform_id keep_platform[KEEP_MAX];
static cl_context keep_cl[KEEP_MAX]; /* NULL where none is kept */
static int n_keep;

static int platform_is_pocl(cl_platform_id p) {
  char name[128] = "";
  if (clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof name - 1, name, NULL) != CL_SUCCESS) return 0;
  return strstr(name, "Portable Computing Language") != NULL;
}

static void keep_driver(clb_context_t ctx) {
  const int mode = (int)clb__env_int(CLB_ENV_KEEP_DRIVER); /* -1 auto, 0 off, 1 on */
  if (mode == 0) return;
  pthread_mutex_lock(&keep_lock);
  int i = 0;
  while (i < n_keep && keep_platform[i] != ctx->platform) i++;
  if (i == n_keep && n_keep < KEEP_MAX) {
    keep_platform[n_keep++] = ctx->platform;
    if (mode == 1 || platform_is_pocl(ctx->platform)) {
      cl_int e = CL_SUCCESS;
      cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)ctx->platform, 0};
      keep_cl[i] = clCreateContext(props, 1, &ctx->device, NULL, NULL, &e);
      if (keep_cl[i])
        clb__log(ctx, CLB_LOG_DEVICE, "the driver stays loaded until the process exits (CLBOUND_KEEP_DRIVER=%s): "
                 "an empty context of clbound's own is kept on this platform", mode == 1 ? "on" : "auto, PoCL");
      else
        clb__log(ctx, CLB_LOG_DEVICE, "the driver cannot be kept loaded: clCreateContext failed (OpenCL error %d); "
                 "freeing the last context unloads it as usual", (int)e);
    }
  }
  pthread_mutex_unlock(&keep_lock);
}

/* Finishes creation once cl, queue, device and platform are set. */
static clb_status init_common(clb_context_t ctx, const clb_context_options *opts) {
  ctx->info.struct_size = sizeof ctx->info;
  clb_status st = clb__device_describe(ctx->platform, ctx->device, &ctx->info);
  if (st != CLB_OK) return clb__set_error(NULL, st, "context: cannot describe the device");
  /* Event callbacks time first launches where the driver compiles then (PoCL).
   * Elsewhere they are off: on an NVIDIA H200 (driver 580.159.04) processes
   * that had them hung in a blocking read, the driver's event thread waiting
   * on a lock (docs/portability.md, "A GPU pass"). */
  const int timing = (int)clb__env_int(CLB_ENV_FIRST_LAUNCH_TIMING); /* -1 auto, 0 off, 1 on */
  ctx->time_first_launches = timing < 0 ? ctx->info.is_cpu : timing;
  clb_kernel_style style = opts ? opts->kernel_style : CLB_KERNEL_STYLE_AUTO;
  if (style != CLB_KERNEL_STYLE_AUTO && style != CLB_KERNEL_STYLE_CPU && style != CLB_KERNEL_STYLE_GPU)
    return clb__set_error(NULL, CLB_ERR_INVALID_ARG,
                          "context: options.kernel_style %d is not a clb_kernel_style (AUTO 0, CPU 1, GPU 2)", (int)style);
  st = clb__geometry_init(ctx, style);
  if (st != CLB_OK) return st;
  uint64_t limit = opts && opts->device_memory_limit ? opts->device_memory_limit : ctx->info.global_mem_bytes;
  st = clb__pool_new(ctx->cl, limit, ctx->info.max_alloc_bytes, &ctx->pool);
  if (st != CLB_OK) return clb__set_error(NULL, st, "context: out of host memory");
  cl_int e;
  ctx->status = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, CLB_STATUS_INTS * sizeof(cl_int), NULL, &e);
  if (e != CL_SUCCESS) return clb__cl_error(NULL, e, "context: status word buffer");
  e = clb__status_clear(ctx);
  if (e != CL_SUCCESS) return clb__cl_error(NULL, e, "context: clearing the status word");
  ctx->scratch = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, ctx->max_groups * 16, NULL, &e);
  if (e != CL_SUCCESS) return clb__cl_error(NULL, e, "context: scratch buffer");
  ctx->next_launch_id = 1;
  const int64_t spin_us = clb__env_int(CLB_ENV_SYNC_SPIN_US); /* -1: auto */
  ctx->sync_spin_auto = spin_us < 0;
  ctx->sync_spin_ns = (spin_us < 0 ? (ctx->info.is_cpu ? CLB_SYNC_SPIN_AUTO_US : 0) : spin_us) * 1000;
  const int64_t yield_ms = clb__env_int(CLB_ENV_SYNC_YIELD_MS); /* -1: auto */
  ctx->sync_yield_ns =
      (yield_ms < 0 ? (ctx->info.is_cpu && ctx->sync_spin_auto ? CLB_SYNC_YIELD_AUTO_MS : 0) : yield_ms) * 1000000;
  ctx->log_mask = clb__log_env_mask();
  keep_driver(ctx);
  if ((st = clb__traits_init(ctx)) != CLB_OK) return st;
  /* runtime/cache opens the folder when the context first needs a kernel */
  const char *dir = opts && opts->struct_size >= offsetof(clb_context_options, cache_dir) + sizeof(char *)
                        ? opts->cache_dir : NULL;
  if (dir) {
    size_t n = strlen(dir) + 1;
    if (n > sizeof ctx->cache_dir)
      return clb__set_error(NULL, CLB_ERR_INVALID_ARG, "context: options.cache_dir is %zu characters long; the limit is %zu",
                            n - 1, sizeof ctx->cache_dir - 1);
    ctx->cache_dir_option = malloc(n);
    if (!ctx->cache_dir_option) return clb__set_error(NULL, CLB_ERR_HOST_OOM, "context: out of host memory");
    memcpy(ctx->cache_dir_option, dir, n);
  }
  return CLB_OK;
}

clb_status clb_context_new(const clb_context_options *opts, clb_context_t *out) {
  if (!out) return clb__set_error(NULL, CLB_ERR_NULL, "clb_context_new: out is NULL");
  *out = NULL;
  if (opts && opts->struct_size < sizeof(size_t))
    return clb__set_error(NULL, CLB_ERR_INVALID_ARG, "clb_context_new: options.struct_size not set (use clb_context_options_init)");
  clb_status fs = clb__fork_check(NULL, "clb_context_new");
  if (fs != CLB_OK) return fs;
  const double t0 = clb__now_ms();
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
  ctx->counters.context_new_ms = (uint64_t)(clb__now_ms() - t0 + 0.5);
  *out = ctx;
  return CLB_OK;
}

clb_status clb_context_wrap(cl_context cl_ctx, cl_command_queue queue,
                            const clb_context_options *opts, clb_context_t *out) {
  if (!out) return clb__set_error(NULL, CLB_ERR_NULL, "clb_context_wrap: out is NULL");
  *out = NULL;
  if (!cl_ctx || !queue) return clb__set_error(NULL, CLB_ERR_NULL, "clb_context_wrap: NULL cl_context or queue");
  clb_status fs = clb__fork_check(NULL, "clb_context_wrap");
  if (fs != CLB_OK) return fs;
  clb__fork_watch();
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
  /* inherited by a forked child: any OpenCL call could wait forever */
  if (!ctx || clb__forked_child()) return;
  const double t0 = clb__now_ms();
  if (ctx->queue) clFinish(ctx->queue);
  /* the hooks first: the program cache stores its pending programs there, and
   * the metrics file counts that time */
  for (int i = ctx->n_release_hooks - 1; i >= 0; i--) ctx->release_hooks[i](ctx);
  clb__staging_reap(ctx, 1);
  ctx->counters.context_free_ms = (uint64_t)(clb__now_ms() - t0 + 0.5);
  if (ctx->pool) clb__metrics_write_env(ctx);
  clb__first_launch_free(ctx);
  for (size_t i = 0; i < ctx->n_recompiles; i++) free(ctx->recompile_reasons[i]);
  free(ctx->recompile_reasons);
  while (ctx->tensors) clb_tensor_free(ctx->tensors);
  free(ctx->cache_dir_option);
  free(ctx->host_batch);
  clb__pool_free(ctx->pool);
  if (ctx->status) clReleaseMemObject(ctx->status);
  if (ctx->scratch) clReleaseMemObject(ctx->scratch);
  for (int i = 0; i < ctx->n_sel_lb; i++) clReleaseMemObject(ctx->sel_lb[i]);
  if (ctx->queue) clReleaseCommandQueue(ctx->queue);
  if (ctx->cl) clReleaseContext(ctx->cl);
  free(ctx);
}

const char *clb_context_errmsg(clb_context_t ctx) { return ctx ? ctx->errmsg : clb_last_errmsg(); }
cl_context clb_context_cl_context(clb_context_t ctx) { return ctx ? ctx->cl : NULL; }
cl_command_queue clb_context_cl_queue(clb_context_t ctx) { return ctx ? ctx->queue : NULL; }
cl_device_id clb_context_cl_device(clb_context_t ctx) { return ctx ? ctx->device : NULL; }
clb_kernel_style clb_context_kernel_style(clb_context_t ctx) { return ctx ? ctx->style : CLB_KERNEL_STYLE_AUTO; }

clb_status clb__context_on_release(clb_context_t ctx, clb_release_fn fn) {
  for (int i = 0; i < ctx->n_release_hooks; i++)
    if (ctx->release_hooks[i] == fn) return CLB_OK;
  if (ctx->n_release_hooks == CLB_MAX_RELEASE_HOOKS)
    return clb__set_error(ctx, CLB_ERR_INTERNAL, "context: more than %d release hooks", CLB_MAX_RELEASE_HOOKS);
  ctx->release_hooks[ctx->n_release_hooks++] = fn;
  return CLB_OK;
}
