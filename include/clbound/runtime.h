/* clbound/runtime.h: devices, contexts, bounded tensors with on-device sizes, counters. */
#ifndef CLB_RUNTIME_H
#define CLB_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "clbound/export.h"
#include "clbound/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest rank a tensor may have. */
#define CLB_MAX_RANK 8

typedef struct clb_context *clb_context_t;
typedef struct clb_tensor *clb_tensor_t;

/* ---- Element types ------------------------------------------------------ */

typedef enum clb_dtype {
  CLB_DTYPE_F32 = 0,
  CLB_DTYPE_F64 = 1, /* only where the device has fp64 */
  CLB_DTYPE_I32 = 2,
  CLB_DTYPE_I64 = 3,
  CLB_DTYPE_U8 = 4,
  CLB_DTYPE_BOOL = 5, /* one byte per element, 0 or 1 */
  CLB_DTYPE_COUNT = 6
} clb_dtype;

/* Bytes per element; 0 for an unknown dtype. */
CLB_API size_t clb_dtype_size(clb_dtype dt);
/* Lowercase name ("f32", "bool"); "?" for an unknown dtype. */
CLB_API const char *clb_dtype_name(clb_dtype dt);

/* ---- Errors without a context --------------------------------------------- */

/* The detail of the last failure on this thread that had no context to hold it
 * (context creation, device listing). Thread-local; valid until the next such call. */
CLB_API const char *clb_last_errmsg(void);

/* ---- Devices ---------------------------------------------------------------- */

/* The size of each string field of clb_device_info (0.2: 256, before: 64 or 128). */
#define CLB_DEVICE_STRING_MAX 256

/* What matters about a device for the kernels here. */
typedef struct clb_device_info {
  size_t struct_size;          /* set to sizeof(clb_device_info) before the call */
  int platform_index;          /* index in clGetPlatformIDs order */
  int device_index;            /* index within its platform */
  /* The strings the driver returns, NUL-terminated. Each holds up to
   * CLB_DEVICE_STRING_MAX - 1 bytes; a longer one (no driver seen so far) keeps
   * its start and ends in "..." (never blank). */
  char platform_name[CLB_DEVICE_STRING_MAX];
  char name[CLB_DEVICE_STRING_MAX];
  char vendor[CLB_DEVICE_STRING_MAX];
  char driver_version[CLB_DEVICE_STRING_MAX];   /* CL_DRIVER_VERSION */
  char device_version[CLB_DEVICE_STRING_MAX];   /* CL_DEVICE_VERSION (PoCL's is 65 bytes) */
  char opencl_c_version[CLB_DEVICE_STRING_MAX]; /* CL_DEVICE_OPENCL_C_VERSION */
  int is_cpu;                  /* CL_DEVICE_TYPE_CPU */
  int is_gpu;                  /* CL_DEVICE_TYPE_GPU */
  uint32_t compute_units;
  size_t max_work_group_size;
  uint64_t local_mem_bytes;
  int local_mem_emulated;      /* CL_GLOBAL: local memory is ordinary RAM */
  uint64_t global_mem_bytes;
  uint64_t max_alloc_bytes;
  int has_fp64;
  int has_int64_atomics;       /* cl_khr_int64_base_atomics */
  uint32_t mem_base_addr_align_bits; /* CL_DEVICE_MEM_BASE_ADDR_ALIGN (the alignment of sub-buffer origins; clbound makes no sub-buffers) */
} clb_device_info;

/* Number of devices over all platforms. Returns CLB_ERR_NO_DEVICE (with a message
 * from clb_last_errmsg) when no platform or device can be found. */
CLB_API clb_status clb_device_count(int *out);

/* Fills *out for the device at the flat index `index` (platforms in order, then
 * devices). out->struct_size must be set by the caller. */
CLB_API clb_status clb_device_info_get(int index, clb_device_info *out);

/* ---- Contexts ------------------------------------------------------------- */

typedef enum clb_kernel_style {
  CLB_KERNEL_STYLE_AUTO = 0, /* CPU style on CPU devices, GPU style elsewhere */
  CLB_KERNEL_STYLE_CPU = 1,  /* each work-item walks a contiguous chunk */
  CLB_KERNEL_STYLE_GPU = 2   /* work-group scans in local memory */
} clb_kernel_style;

/* Options for creating a context. Start with clb_context_options_init(): the
 * struct begins with its own size so that it can grow without breaking the ABI. */
typedef struct clb_context_options {
  size_t struct_size;
  /* Platform and device: NULL means the environment (CLBOUND_PLATFORM,
   * CLBOUND_DEVICE), then the first device. Each is a decimal index or a
   * case-insensitive substring of the name. The device index is within the
   * chosen platform, or flat over all platforms when no platform is named. */
  const char *platform;
  const char *device;
  clb_kernel_style kernel_style; /* another value: CLB_ERR_INVALID_ARG */
  /* Caps the device bytes the context's pool may hold; 0 means the device's
   * global memory. Asking for more gives CLB_ERR_OOM. */
  uint64_t device_memory_limit;
  /* Folder of the persistent program cache: NULL means CLBOUND_CACHE_DIR, then
   * $XDG_CACHE_HOME/clbound, then $HOME/.cache/clbound; "off" disables it.
   * At most 1023 characters (longer: CLB_ERR_INVALID_ARG). */
  const char *cache_dir;
} clb_context_options;

CLB_API void clb_context_options_init(clb_context_options *opts);

/* Creates a context, its own cl_context and in-order queue on the chosen device.
 * opts may be NULL (defaults). On success *out owns a new context; release it with
 * clb_context_free(). On failure *out is NULL and clb_last_errmsg() says why,
 * listing the devices there are when none matched. */
CLB_API clb_status clb_context_new(const clb_context_options *opts, clb_context_t *out);

/* Wraps a caller's cl_context and in-order queue (and the queue's device). Both are
 * retained and released by clb_context_free(); the caller keeps its own references. */
CLB_API clb_status clb_context_wrap(cl_context cl_ctx, cl_command_queue queue,
                                    const clb_context_options *opts, clb_context_t *out);

/* Waits for the queue, then releases every tensor still owned and the context.
 * NULL is a no-op. On PoCL the driver itself stays loaded until the process
 * exits (an empty context of clbound's own per platform, made with the first
 * context: CLBOUND_KEEP_DRIVER), so a later context builds without PoCL parsing
 * its kernel library again. */
CLB_API void clb_context_free(clb_context_t ctx);

/* The detail of the last failure on this context (op, sizes, OpenCL error name,
 * build log). Owned by the context; valid until the next call on it. Contexts are
 * not thread-safe: use one per thread, or serialize calls. */
CLB_API const char *clb_context_errmsg(clb_context_t ctx);

/* Borrowed OpenCL handles of the context; valid while it lives. */
CLB_API cl_context clb_context_cl_context(clb_context_t ctx);
CLB_API cl_command_queue clb_context_cl_queue(clb_context_t ctx);
CLB_API cl_device_id clb_context_cl_device(clb_context_t ctx);
/* The style the context's kernels use after AUTO was resolved. */
CLB_API clb_kernel_style clb_context_kernel_style(clb_context_t ctx);

/* A host sync: waits for all queued work, then reads the device status word. A
 * sticky error raised by a kernel since the last sync (a size over its bound, a
 * failed deferred check, short masked_scatter source, integer division by zero)
 * is returned here with a message naming the op and the sizes, and cleared. */
CLB_API clb_status clb_context_sync(clb_context_t ctx);

/* ---- Logging and metrics ------------------------------------------------- */

/* Event categories; CLBOUND_LOG=recompiles,syncs,builds,cache (or all) turns them
 * on for every new context. */
typedef enum clb_log_category {
  CLB_LOG_RECOMPILES = 1u << 0, /* a plan rebuilt, with the failing guard */
  CLB_LOG_SYNCS = 1u << 1,      /* a host sync, with the op that forced it */
  CLB_LOG_BUILDS = 1u << 2,     /* a program built from source or loaded from disk, and why */
  CLB_LOG_CACHE = 1u << 3,      /* persistent cache entries rejected, written, disabled */
  CLB_LOG_GEMM = 1u << 4,       /* the GEMM strategy a context uses, and why a faster one cannot run */
  CLB_LOG_RECORD = 1u << 5,     /* graph steps recorded, and why a step is not recorded or replayed */
  CLB_LOG_DEVICE = 1u << 6,     /* device traits the runtime guessed (forward progress), and what they choose */
  CLB_LOG_ALL = 0x7fu
} clb_log_category;

/* Receives one line per event (no trailing newline). `category` is the lowercase
 * name ("builds"). Called on the thread that made the call. */
typedef void (*clb_log_fn)(void *user, const char *category, const char *line);

/* Sets which categories are logged and where: fn NULL means stderr, as
 * "clbound[category]: line". categories 0 turns logging off. */
CLB_API void clb_context_set_log(clb_context_t ctx, unsigned categories, clb_log_fn fn, void *user);

/* Writes the context's counters as one JSON object (the keys of the
 * CLBOUND_METRICS_FILE, which sums every context the process frees and adds
 * "scope" and "contexts"; docs/observability.md)
 * into buf[cap]. *len (may be NULL) gets the full length; a cap too small gives
 * CLB_ERR_BUFFER_SMALL with buf holding a truncated, NUL-terminated prefix. */
CLB_API clb_status clb_context_metrics_json(clb_context_t ctx, char *buf, size_t cap, size_t *len);

/* ---- Environment --------------------------------------------------------------
 *
 * The CLBOUND_* variables the library reads, each parsed one way (docs/api.md,
 * "Environment"): booleans as on/off, 1/0, true/false, yes/no in any case;
 * numbers as the whole string within their range; choices by name. Anything
 * else warns once per process on stderr, naming the variable, the value and
 * what it accepts, and the default is used. */

typedef struct clb_env_var {
  const char *name;          /* "CLBOUND_LOG" */
  const char *kind;          /* "boolean", "integer", "choice", "list" or "text" */
  const char *values;        /* what it accepts, in words */
  const char *default_value; /* in words */
  const char *meaning;
} clb_env_var;

/* The i-th variable (i from 0), NULL past the last. Static storage; thread-safe. */
CLB_API const clb_env_var *clb_env_var_at(size_t i);
/* *value = variable `name`'s value as the library reads it now: a boolean 1 or
 * 0 (-1 for auto where it has one), a number, a choice's position among its
 * values, a list's bit mask by position, 1 for text; its default when unset,
 * empty or refused (with the warning). CLB_ERR_INVALID_ARG for a name the
 * library does not read or value NULL. */
CLB_API clb_status clb_env_get(const char *name, int64_t *value);
/* Variable `name`'s text when it is one the library reads and is set and not
 * empty, else NULL (getenv's storage). */
CLB_API const char *clb_env_text(const char *name);

/* ---- Persistent program cache --------------------------------------------- */

/* The folder the context's cache uses, or NULL when the cache is off (disabled
 * by option, or because the folder could not be written). */
CLB_API const char *clb_context_cache_dir(clb_context_t ctx);

/* Counts the entries (*.clbin files) and their bytes in a cache folder (NULL:
 * the default folder), after the stores still under way (clb_cache_wait, and
 * the folder's pending store manifests: clb_cache_store_pending). A missing
 * folder counts as empty. */
CLB_API clb_status clb_cache_info(const char *dir, uint64_t *entries, uint64_t *bytes);

/* The most bytes the entries of a cache folder may hold: after each store, the
 * least recently used entries (the oldest written or loaded) are removed until
 * they fit, never the entry just written. CLBOUND_CACHE_MAX_SIZE sets it in
 * bytes, or with a suffix K, M or G (powers of 1024); 0 is no limit; unset or
 * unreadable: 256 MiB. Read at each store. */
CLB_API uint64_t clb_cache_limit_bytes(void);

/* Stores now, in the calling thread, every program this context built from
 * source and has not stored yet (it happens anyway when the context is freed;
 * never on the path of a launch). Failures to write are logged, not returned. */
CLB_API clb_status clb_context_store_programs(clb_context_t ctx);

/* When a context is freed, the programs it built and has not stored go to one
 * background thread per process, which writes their entries while the other
 * contexts go on. Freeing the process's last context hands them, with its own,
 * to the store helper process, which writes them after this process is gone
 * (CLBOUND_CACHE_STORE=process, the default; `background` waits for them
 * instead, `release` stores them in clb_context_free). A context that needs an
 * entry still queued or handed over waits for it (or writes it itself); a
 * process that exits with a context alive drops what is still queued.
 * clb_cache_pending: the programs queued or being written, plus the store
 * manifests pending in the folders this process handed to; clb_cache_wait:
 * returns when there are none (writing what no helper took). */
CLB_API uint64_t clb_cache_pending(void);
CLB_API clb_status clb_cache_wait(void);

/* Writes the entries of every store manifest pending in the cache folder dir
 * (what `clbound cache store-pending DIR`, the store helper, runs): under the
 * folder's lock (<dir>/.store.lock, waited for up to 10 minutes), each
 * manifest's program is built from source on the device its key names, its
 * entry written (temporary file, renamed) and the manifest removed. *stored
 * (may be NULL): the entries written. CLB_ERR_IO when the lock was not had. */
CLB_API clb_status clb_cache_store_pending(const char *dir, uint64_t *stored);

/* Small files kept in a folder that others may write (the cache folder), read
 * and written the way the cache's entries are. clb_file_read reads the whole of
 * a regular file into buf[cap] (NUL-terminated; *len, may be NULL, gets its
 * length): it never follows a symbolic link, never blocks on a FIFO or device
 * and refuses a folder, link, FIFO, socket or device (CLB_ERR_IO, the message
 * says which; nothing is removed) and a file of cap bytes or more
 * (CLB_ERR_BUFFER_SMALL); a missing file is CLB_ERR_IO "no such file".
 * clb_file_write writes len bytes to a temporary file (mode 0600) in the same
 * folder, syncs it and renames it over path (whatever path was: a FIFO there
 * is replaced, never opened), so a reader sees the old file or the whole new
 * one; CLB_ERR_IO names the step that failed. Both set clb_last_errmsg(). */
CLB_API clb_status clb_file_read(const char *path, char *buf, size_t cap, size_t *len);
CLB_API clb_status clb_file_write(const char *path, const void *data, size_t len);

/* Removes every entry and pending store manifest of a cache folder (NULL: the
 * default folder), after the stores still under way (a store helper at work in
 * the folder finishes first). The folder and its lock file (.store.lock) stay:
 * another process may hold the lock. */
CLB_API clb_status clb_cache_clear(const char *dir);

/* The default cache folder into buf[cap] (empty when it is off). */
CLB_API clb_status clb_cache_default_dir(char *buf, size_t cap);

/* ---- Counters -------------------------------------------------------------- */

typedef struct clb_counters {
  size_t struct_size;             /* set to sizeof(clb_counters) before the call */
  uint64_t program_builds;        /* programs built from source */
  uint64_t program_cache_hits_memory;
  uint64_t program_cache_hits_disk;
  uint64_t kernel_launches;
  uint64_t host_syncs;            /* each time the host waited on the device */
  uint64_t bytes_to_device;
  uint64_t bytes_to_host;
  uint64_t plans_compiled;
  uint64_t recompiles;
  uint64_t device_bytes_live;     /* pool bytes handed out now */
  uint64_t device_bytes_held;     /* pool bytes held, live or free for reuse */
  uint64_t peak_device_bytes;     /* the most held at once */
  uint64_t buffers_fresh;         /* cl_mem created */
  uint64_t buffers_reused;        /* requests served from the pool */
  /* Graph plans' memory (docs/graph.md, "Memory plan"), summed over every plan
   * whose arena was laid out: */
  uint64_t arena_bytes;            /* the planned arenas */
  uint64_t live_lower_bound_bytes; /* the most bytes live at once in each plan's step */
  uint64_t pool_peak_bytes;        /* what the pool would hold for the same steps */
  uint64_t arena_allocations;      /* cl_mem created for arenas */
  uint64_t arena_max_bytes;        /* the largest single plan's arenas */
  uint64_t kernels_compiled;      /* distinct kernels created from built or loaded programs */
  uint64_t build_ms;              /* milliseconds in program builds from source (clBuildProgram) */
  uint64_t store_ms;              /* milliseconds storing programs in the persistent cache */
  uint64_t plan_programs;         /* merged programs made for graph plans (one per plan) */
  uint64_t kernels_fused;         /* generated kernels that replace several ops of a plan */
  uint64_t steps_replayed;        /* graph steps replayed from a recorded command buffer */
  uint64_t first_launches;        /* launches that were a kernel's first at its local size */
  uint64_t first_launch_ms;       /* milliseconds those took from ready to done (PoCL: the
                                     kernel's compile for that size); grows as they complete */
  uint64_t steps_recorded;        /* graph steps recorded into a command buffer (docs/design.md, "Recorded steps") */
  uint64_t host_writes;           /* writes the host enqueued into device buffers (inputs, shape records) */
  uint64_t context_new_ms;        /* milliseconds clb_context_new took: device selection, the OpenCL
                                     context and queue, clbound's set-up; a process's first context
                                     also pays the ICD loader's and the driver's start-up */
  uint64_t context_free_ms;       /* milliseconds clb_context_free took before its metrics file was
                                     written (the queue drained, programs handed to the store: PoCL
                                     compiles their binaries then); 0 while the context lives */
  uint64_t store_local;           /* programs this context stored, or queued for the store thread,
                                     in this process (PoCL compiles their binaries in this process) */
  uint64_t store_handoffs;        /* programs this context handed to the store helper process
                                     (CLBOUND_CACHE_STORE=process: store manifests written) */
  uint64_t programs_upgraded;     /* programs built unoptimized (CLBOUND_COLD_BUILD=fast) that this
                                     context replaced by the store helper's optimized build while it ran */
  uint64_t host_sync_blocks;      /* host syncs in which the calling thread blocked in the driver: every
                                     one that did not poll the device to its end (CLBOUND_SYNC_SPIN_US,
                                     CLBOUND_SYNC_YIELD_MS) */
} clb_counters;

CLB_API clb_status clb_context_counters(clb_context_t ctx, clb_counters *out);

/* ---- Bounded tensors -------------------------------------------------------
 *
 * A tensor has a rank (0..8), a dtype and per dim a bound. A static dim always
 * has its bound as actual size; a dynamic dim has an actual size in [0, bound]
 * that lives on the device, in the tensor's shape record, and that producing
 * kernels write. The data buffer is sized at the bounds; the live part is dense
 * row-major at the actual sizes, starting at offset 0. A new tensor's actual
 * sizes are its bounds. */

/* Creates a tensor. `bounds` has `rank` entries (NULL for rank 0); `dynamic` has
 * `rank` flags, or is NULL for all static. A static dim of size 0 is allowed.
 * On success *out is owned by the caller; release it with clb_tensor_free()
 * (or it is released with the context). */
CLB_API clb_status clb_tensor_new(clb_context_t ctx, clb_dtype dtype, int rank,
                                  const int64_t *bounds, const uint8_t *dynamic,
                                  clb_tensor_t *out);

/* Returns the tensor's buffers to the context's pool. NULL is a no-op. */
CLB_API void clb_tensor_free(clb_tensor_t t);

/* The host-side facts of a tensor, no device work. These accessors return no
 * status: on a NULL tensor dtype is CLB_DTYPE_COUNT (not a dtype), rank -1,
 * bound_numel 0, is_dynamic 0 and the cl_mem getters NULL; bounds writes nothing. */
CLB_API clb_dtype clb_tensor_dtype(clb_tensor_t t);
CLB_API int clb_tensor_rank(clb_tensor_t t);
/* Copies the bounds into dims[rank]. No device work. */
CLB_API void clb_tensor_bounds(clb_tensor_t t, int64_t *dims);
/* Whether dim d is dynamic (1) or static (0). No device work. */
CLB_API int clb_tensor_is_dynamic(clb_tensor_t t, int d);
/* Number of elements at the bounds. */
CLB_API int64_t clb_tensor_bound_numel(clb_tensor_t t);
/* Borrowed cl_mem of the data and of the shape record (CLB_MAX_RANK int64
 * values; dims past the rank hold 1). The data starts clb_tensor_data_offset
 * bytes into its cl_mem and takes the bytes of the bounds from there: a graph's
 * tensors share one arena buffer at planned offsets (docs/graph.md, "Memory
 * plan"); other tensors start at 0. The shape record always starts at 0. Read
 * or write the data with that offset, or pass both to a kernel. */
CLB_API cl_mem clb_tensor_data_mem(clb_tensor_t t);
CLB_API size_t clb_tensor_data_offset(clb_tensor_t t);
CLB_API cl_mem clb_tensor_shape_mem(clb_tensor_t t);

/* A static tensor of `rank` dims `dims` over host memory, without a copy:
 * `host` (`bytes`, exactly the dense size) becomes the tensor's data, which the
 * device reads and writes in place. Only where the device's buffers are host
 * memory (a CPU device with unified memory whose maps return the buffer's own
 * memory, checked for this buffer too: PoCL's CPU device), else
 * CLB_ERR_UNSUPPORTED and the caller copies (clb_tensor_write). The caller keeps
 * `host` alive until the tensor is freed and writes it only while no queued op
 * uses the tensor (after a host sync); clb_tensor_free of it waits for the
 * queue, so the memory is the caller's again when it returns. */
CLB_API clb_status clb_tensor_from_host(clb_context_t ctx, clb_dtype dtype, int rank, const int64_t *dims,
                                        void *host, size_t bytes, clb_tensor_t *out);

/* Copies host data in, with actual sizes `dims` (NULL for rank 0). `bytes` must be
 * the dense size at those dims. A dim over its bound, or a static dim that differs
 * from its bound, is CLB_ERR_OUT_OF_BOUNDS and nothing is written. Blocking for
 * the host buffer only: returns once `host` may be reused. */
CLB_API clb_status clb_tensor_write(clb_context_t ctx, clb_tensor_t t, const int64_t *dims,
                                    const void *host, size_t bytes);
/* clb_tensor_write without the copy on the calling thread: the device reads
 * `host` when the write runs, after this returns. `host` must stay valid and
 * unchanged until release(release_arg) runs, once the write is done: found at a
 * later write or host sync of ctx, or when ctx is freed (before returning where
 * nothing is written or the call fails). release may be NULL: then `host` is the
 * caller's to keep until the next host sync of ctx (clb_context_sync, any read)
 * or its free. */
CLB_API clb_status clb_tensor_write_borrowed(clb_context_t ctx, clb_tensor_t t, const int64_t *dims, const void *host,
                                             size_t bytes, void (*release)(void *), void *release_arg);
/* clb_tensor_new followed by clb_tensor_write_borrowed, in one call: a tensor
 * at `bounds` (dynamic flags as clb_tensor_new) holding `host` at the actual
 * dims `dims`, written without a copy on the calling thread, with one write of
 * its shape record instead of two. `host` and `release` as in
 * clb_tensor_write_borrowed; release also runs, before returning, when the
 * call fails, and then *out is NULL. A framework's input to one call is the
 * use. */
CLB_API clb_status clb_tensor_new_write_borrowed(clb_context_t ctx, clb_dtype dtype, int rank, const int64_t *bounds,
                                                 const uint8_t *dynamic, const int64_t *dims, const void *host,
                                                 size_t bytes, void (*release)(void *), void *release_arg,
                                                 clb_tensor_t *out);

/* Sets the actual sizes without touching data (new elements are unspecified). */
CLB_API clb_status clb_tensor_set_sizes(clb_context_t ctx, clb_tensor_t t, const int64_t *dims);

/* A host sync: reads the actual sizes into dims[rank]. Checks the status word
 * first, so a pending device error is returned here. */
CLB_API clb_status clb_tensor_sizes(clb_context_t ctx, clb_tensor_t t, int64_t *dims);

/* A host sync: reads the actual sizes into dims[rank] (may be NULL) and the live
 * data into host (capacity `cap` bytes); *bytes_out (may be NULL) gets the dense
 * size. A capacity too small is CLB_ERR_BUFFER_SMALL and nothing is read. One
 * round trip to the device where its buffers are host memory (PoCL's CPU
 * device: the sizes and data are copied from the buffers after the wait,
 * unless CLBOUND_HOST_PTRS=off), else two (the sizes, then the data). */
CLB_API clb_status clb_tensor_read(clb_context_t ctx, clb_tensor_t t, int64_t *dims,
                                   void *host, size_t cap, size_t *bytes_out);

/* clb_tensor_read of n tensors with one host sync: ts[i]'s actual sizes go to
 * dims[i * CLB_MAX_RANK ...] (dims may be NULL), its live data to hosts[i]
 * (capacity caps[i] bytes), bytes_out[i] (may be NULL) gets its dense size. The
 * shape records are read in one wait, then every live part in one more: two
 * round trips to the device where n reads make 2n; one where the device's
 * buffers are host memory (as clb_tensor_read). A tensor whose live part
 * does not fit its buffer is CLB_ERR_BUFFER_SMALL and nothing is read (the
 * sizes are filled in: a caller that sizes its buffers at the bounds never gets
 * it). On an error, buffers before the failing tensor may hold data. */
CLB_API clb_status clb_tensors_read(clb_context_t ctx, int n, const clb_tensor_t *ts, int64_t *dims,
                                    void *const *hosts, const size_t *caps, size_t *bytes_out);

#ifdef __cplusplus
}
#endif
#endif /* CLB_RUNTIME_H */
