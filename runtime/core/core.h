/* runtime-impl.h: the private structures and helpers of the runtime layer. */
#ifndef CLB_RUNTIME_IMPL_H
#define CLB_RUNTIME_IMPL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "clbound/ops.h"
#include "clbound/runtime.h"
#include "../alloc/pool.h"

#define CLB_ERRMSG_MAX 16384

/* Sticky bits of the device status word (kernels/common.cl has the same values). */
#define CLB_STF_BOUND_EXCEEDED 1u
#define CLB_STF_DEVICE_CHECK 2u
#define CLB_STF_SHORT_SOURCE 4u
#define CLB_STF_DIV_ZERO 8u
#define CLB_STF_EMPTY_REDUCE 16u
#define CLB_STF_INDEX_RANGE 32u
/* Layout of the status buffer, in ints: flags, id of the first failing launch,
 * its bit, then two int64 values (as lo/hi pairs) describing what was wrong. */
#define CLB_STATUS_INTS 8

/* Each launch gets an id; the ring remembers what the last ones were so that a
 * sticky error raised on the device can name the op and its bounds. */
#define CLB_LAUNCH_RING 1024
typedef struct clb_launch_rec {
  uint32_t id;
  const char *op;  /* static string */
  char what[192]; /* the tensors' bounds, e.g. "a [<=4096, 16] f32, b [16] f32" */
} clb_launch_rec;

/* An embedded kernel source (cmake/embed.cmake output). */
typedef struct clb_kernel_src {
  const char *name; /* file name without .cl */
  const char *text;
  size_t len;
} clb_kernel_src;

/* kernels-embedded.c, generated: common.cl and every other kernel file. */
extern const clb_kernel_src clb__kernel_sources[];
extern const size_t clb__kernel_source_count;
const clb_kernel_src *clb__kernel_src_find(const char *name);

typedef struct clb_progcache clb_progcache;

struct clb_tensor {
  clb_context_t ctx;
  clb_dtype dtype;
  int rank;
  int64_t bound[CLB_MAX_RANK];
  uint8_t dyn[CLB_MAX_RANK];
  clb_buf data;
  clb_buf shape;
  /* Shared by a tensor and its views (clb_reshape): how many hold `data`; NULL
   * while only one does. The last holder returns the buffer to the pool. */
  int *data_refs;
  struct clb_tensor *prev, *next; /* the context's list of live tensors */
};

struct clb_context {
  cl_platform_id platform;
  cl_device_id device;
  cl_context cl;
  cl_command_queue queue;
  clb_device_info info;
  clb_kernel_style style;
  size_t local_size;   /* work-group size of elementwise-style kernels */
  size_t max_groups;   /* work-groups of a grid-stride launch */
  clb_pool *pool;
  clb_progcache *programs;
  cl_mem status;       /* CLB_STATUS_INTS ints, sticky */
  cl_mem scratch;      /* partial results of reductions: max_groups * 16 bytes */
  clb_counters counters;
  uint32_t next_launch_id;
  clb_launch_rec ring[CLB_LAUNCH_RING];
  struct clb_tensor *tensors;
  /* logging */
  unsigned log_mask;
  clb_log_fn log_fn;
  void *log_user;
  /* persistent program cache; cache_dir[0] == 0 when off */
  char cache_dir[1024];
  /* appended to every program's build options while a specialized graph plan
   * runs, so that plan builds its own programs; empty otherwise */
  char build_suffix[64];
  /* reasons of recompiles, for the metrics file: a growing array */
  char **recompile_reasons;
  size_t n_recompiles, cap_recompiles;
  char errmsg[CLB_ERRMSG_MAX];
  /* clb_gemm_strategy (clbound/nn.h) of the context's matmuls; 0 (AUTO) from
   * calloc. Set by clb_context_set_gemm_strategy (ops-gemm.c). */
  int gemm_strategy;
  /* DLPack device exports still held by a consumer (interop.c): cut loose from
   * the context when it is freed */
  struct clb__dl_export *exports;
};

/* ---- errors.c ------------------------------------------------------------- */

/* Writes the context's message (printf-style) and returns st. ctx may be NULL:
 * the thread-local message is written instead. */
clb_status clb__set_error(clb_context_t ctx, clb_status st, const char *fmt, ...);
/* Same, for an OpenCL failure: appends " (CL_NAME, -N)". */
clb_status clb__cl_error(clb_context_t ctx, cl_int err, const char *fmt, ...);
/* Appends to the context's message. */
void clb__append_error(clb_context_t ctx, const char *fmt, ...);
const char *clb__cl_error_name(cl_int err);
void clb__set_last_errmsg(const char *fmt, ...);

/* ---- log.c ---------------------------------------------------------------- */

/* Logs a line in one category if it is on (printf-style). */
void clb__log(clb_context_t ctx, unsigned category, const char *fmt, ...);
/* Categories named in CLBOUND_LOG. */
unsigned clb__log_env_mask(void);
/* Records a recompile reason (counted, logged, and listed in the metrics). */
void clb__note_recompile(clb_context_t ctx, const char *reason);
/* Writes CLBOUND_METRICS_FILE, when set; called when the context is freed. */
void clb__metrics_write_env(clb_context_t ctx);

/* ---- disk-cache.c --------------------------------------------------------- */

/* Picks and prepares the cache folder: the option, else the environment, else the
 * default. An unusable folder turns the cache off with one logged warning. */
void clb__disk_cache_init(clb_context_t ctx, const char *option);
/* Tries to load a program for `key` from disk; *out NULL on a miss (a bad entry
 * is logged, removed and counts as a miss). */
void clb__disk_cache_load(clb_context_t ctx, const char *key, cl_program *out);
/* Stores a built program's binary under `key` (write to a temporary, rename). */
void clb__disk_cache_store(clb_context_t ctx, const char *key, cl_program prog);
uint64_t clb__fnv1a(uint64_t h, const void *data, size_t len);

/* ---- device.c ------------------------------------------------------------- */

clb_status clb__device_describe(cl_platform_id plat, cl_device_id dev, clb_device_info *out);
/* Chooses a platform and device from the option strings (NULL: environment).
 * On failure the thread-local message lists the devices there are. */
clb_status clb__device_select(const char *platform, const char *device, cl_platform_id *plat,
                              cl_device_id *dev);

/* ---- program-cache.c ------------------------------------------------------ */

clb_status clb__progcache_new(clb_progcache **out);
void clb__progcache_free(clb_progcache *pc);
/* The kernel `kernel` of the program made of common.cl + kernels/<src>.cl built
 * with `options`, building it (counted) the first time. Borrowed: the cache owns
 * it. `op` names the caller in error messages. */
clb_status clb__kernel_get(clb_context_t ctx, const char *op, const char *src,
                           const char *options, const char *kernel, cl_kernel *out);

/* ---- launch.c ------------------------------------------------------------- */

typedef struct clb_arg {
  size_t size;
  const void *value;
} clb_arg;
#define CLB_ARG(v) ((clb_arg){sizeof(v), &(v)})

/* Sets the args and enqueues a 1-D launch of `groups` work-groups of `local`
 * work-items, recording it in the launch ring (what: bounds, for messages).
 * Returns the launch id through *id when id is not NULL, before setting args,
 * so a kernel can take its own id as an argument: pass id_arg >= 0 to have the
 * id written into that argument. */
clb_status clb__launch(clb_context_t ctx, const char *op, const char *what, cl_kernel k,
                       const clb_arg *args, int nargs, int id_arg, size_t groups,
                       size_t local);
/* Work-groups for a grid-stride loop over up to n items. */
size_t clb__groups_for(clb_context_t ctx, int64_t n);
/* Formats a tensor's bounds as "[<=8, 3]" into buf. */
const char *clb__tensor_desc(clb_tensor_t t, char *buf, size_t len);

/* ---- tensor.c ------------------------------------------------------------- */

/* Validates handle and context: a NULL or foreign tensor is CLB_ERR_NULL /
 * CLB_ERR_INVALID_ARG with a message naming `op` and `name`. */
clb_status clb__check_tensor(clb_context_t ctx, const char *op, const char *name, clb_tensor_t t);
/* Gets an output tensor: creates one if *out is NULL, else checks it against the
 * dtype, rank, bounds and dynamic flags needed. */
clb_status clb__output(clb_context_t ctx, const char *op, clb_dtype dtype, int rank,
                       const int64_t *bounds, const uint8_t *dyn, clb_tensor_t *out);
int64_t clb__numel(int rank, const int64_t *dims);
/* A new tensor sharing x's data buffer (the buffer goes back to the pool when
 * the last holder is freed), with its own shape record, not yet written. */
clb_status clb__tensor_share(clb_context_t ctx, const char *op, clb_tensor_t x, int rank, const int64_t *bounds,
                             const uint8_t *dyn, clb_tensor_t *out);
/* A counted host sync that reads t's actual sizes; `why` is logged. */
clb_status clb__sync_sizes(clb_context_t ctx, clb_tensor_t t, const char *why, int64_t *dims);
/* Enqueues a non-blocking write from a private copy of `host` (freed when done). */
clb_status clb__write_async(clb_context_t ctx, const char *op, cl_mem mem, size_t offset,
                            const void *host, size_t bytes);

/* ---- interop.c ------------------------------------------------------------ */

/* Cuts the context's outstanding DLPack device exports loose (their deleters then
 * only release their own cl_mem reference); called when the context is freed. */
void clb__dlpack_detach_all(clb_context_t ctx);

/* ---- context.c ------------------------------------------------------------ */

/* A counted host sync: finishes the queue and returns a pending sticky error. */
clb_status clb__sync(clb_context_t ctx, const char *why);

/* OpenCL C type name of a dtype ("float", "long", "uchar"). */
const char *clb__dtype_cl(clb_dtype dt);
int clb__dtype_is_float(clb_dtype dt);

#endif /* CLB_RUNTIME_IMPL_H */
