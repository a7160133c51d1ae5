/* core.h: the private structures and helpers of runtime/core (context, device,
 * tensor, dtype, launch, host syncs, errors, log and counters). Every layer above
 * includes it; it includes only the public headers and alloc/. */
#ifndef CLB_CORE_INTERNAL_H
#define CLB_CORE_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "clbound/ops.h"
#include "clbound/runtime.h"
#include "alloc/pool.h"
#include "runtime/core/env.h"

#define CLB_ERRMSG_MAX 16384

/* Sticky bits of the device status word (kernels/common.cl has the same values). */
#define CLB_STF_BOUND_EXCEEDED 1u
#define CLB_STF_DEVICE_CHECK 2u
#define CLB_STF_SHORT_SOURCE 4u
#define CLB_STF_DIV_ZERO 8u
#define CLB_STF_EMPTY_REDUCE 16u
#define CLB_STF_INDEX_RANGE 32u
#define CLB_STF_INDEX_OUT 64u
#define CLB_STF_ASSERT 128u
/* Layout of the status buffer, in ints: the flags, a spare int, then
 * CLB_STATUS_SLOTS slots of CLB_STATUS_SLOT_INTS: the id of a failing launch,
 * its bit, and two int64 values (as lo/hi pairs) describing what was wrong. Each
 * failing launch claims its own slot (kernels/common.cl, clb_raise), so a sync
 * names every error up to CLB_STATUS_SLOTS; later ones show in the flags. */
#define CLB_STATUS_SLOTS 8
#define CLB_STATUS_SLOT_INTS 6
#define CLB_STATUS_INTS (2 + CLB_STATUS_SLOTS * CLB_STATUS_SLOT_INTS)

/* CLBOUND_SYNC_SPIN_US unset on a CPU device: a host sync polls for up to this
 * many microseconds while the context's recent syncs waited less
 * (runtime/core/sync.c; docs/design.md, "Host syncs") */
#define CLB_SYNC_SPIN_AUTO_US 200

/* CLBOUND_SYNC_YIELD_MS unset on a CPU device whose CLBOUND_SYNC_SPIN_US is
 * unset too: past its polling budget, a host sync goes on checking the device
 * for up to this many milliseconds, yielding the CPU between checks, before it
 * blocks (runtime/core/sync.c) */
#define CLB_SYNC_YIELD_AUTO_MS 20

/* Each launch gets an id; the ring remembers what the last ones were so that a
 * sticky error raised on the device can name the op and its bounds. */
#define CLB_LAUNCH_RING 1024
#define CLB_LAUNCH_SEQS 4
typedef struct clb_launch_rec {
  uint32_t id;
  uint64_t seq;    /* the op invocation it belongs to (clb__note_output), or 0 */
  /* more invocations whose outputs it writes (clb__launch_add_seq; 0: none) */
  uint64_t also[CLB_LAUNCH_SEQS];
  const char *op;  /* static string */
  char what[192]; /* the tensors' bounds, e.g. "a [<=4096, 16] f32, b [16] f32" */
} clb_launch_rec;

/* Where kernel launches go while a graph step is recorded into a command buffer
 * or replayed from one (runtime/graph/record.c sets it, core calls it: a
 * registered callback, since core may not call up). launch() takes the place of
 * the enqueue in clb__launch: the arguments are not set yet, and the hook sets
 * them (clb__launch_set_args) under an id it chooses. host() is told of work
 * that goes to the queue by another road before it is enqueued: a host write
 * into `mem`, or with mem NULL a host read or sync (`why` names it); an error
 * it returns is the caller's. Zeroed: launches are enqueued. */
struct clb_arg;
typedef struct clb_launch_hook {
  clb_status (*launch)(void *user, const char *op, const char *what, cl_kernel k, const struct clb_arg *args, int nargs,
                       int id_arg, size_t groups, size_t local);
  clb_status (*host)(void *user, const char *why, cl_mem mem);
  void *user;
} clb_launch_hook;

/* Owned by runtime/cache (opaque here): made on the context's first kernel. */
typedef struct clb_progcache clb_progcache;
/* Owned by runtime/cache (opaque here): the kernels a plan's first step asks
 * for while it is walked without launching (runtime/cache/plan-program.c). */
struct clb_plan_collect;

/* Called when a context is freed, before its tensors and buffers go: layers above
 * core that keep per-context state register one (clb__context_on_release). */
typedef void (*clb_release_fn)(clb_context_t ctx);
#define CLB_MAX_RELEASE_HOOKS 8

/* Where a tensor's data buffer comes from while a graph runs a plan's step
 * (runtime/graph/memory.c sets it, core calls it: a registered callback, since
 * core may not call up). get() fills `out` with a buffer it placed (a region
 * of the plan's arena: its cl_mem, retained, at an offset), or leaves out->mem NULL to let the pool serve; put() is
 * told when a data buffer goes back (before the pool or the arena takes it). */
typedef struct clb_mem_hook {
  clb_status (*get)(void *user, size_t bytes, clb_buf *out, char *err, size_t errlen);
  /* the same for a shape record (NULL, or out->mem left NULL: the pool). `of`
   * is the tensor that will hold it (rank, bounds and dynamic dims set), or NULL
   * for a view whose record its op writes; *valid is set to 1 when the record
   * handed out already holds a valid record of a tensor laid out as `of` (the
   * same record the same tensor of the plan's last step held), so that the
   * initial write of its bounds can be left out: its static dims are its bounds,
   * its dynamic dims lie within them and are written by its producer, as every
   * producer does (docs/design.md, "Tensors and the size protocol"). */
  clb_status (*get_shape)(void *user, size_t bytes, const struct clb_tensor *of, int *valid, clb_buf *out, char *err,
                          size_t errlen);
  void (*put)(void *user, const clb_buf *b);
  void *user;
} clb_mem_hook;

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
  /* The op invocation (clb_context.op_seq) that last wrote it; 0: the host. */
  uint64_t written_by;
  /* A device error raised by that op, found at a sync: reading the tensor or
   * using it as an input returns it until the tensor is written again. */
  clb_status failed;
  char *failed_msg;
  /* A dynamic view of this tensor (clb_reshape) that follows it: the select ops
   * (runtime/ops/select.c) write its record in the launch that writes this
   * tensor's, and set view_fresh; any other write of either record clears it,
   * and clb_reshape launches only while it is clear (clb__view_current). */
  struct clb_tensor *view_next;
  struct clb_tensor *view_of; /* on the view: the tensor it follows */
  int view_rank;              /* on the view: its reshape spec */
  int64_t view_spec[CLB_MAX_RANK];
  int view_fresh;
  /* A graph rewrites this tensor's data at its next run (set on the tensors a
   * graph hands out, inherited by views): a device export copies it, and the
   * graph's next run gives every other holder a copy (clb__tensor_unshare). */
  int graph_held;
  /* The data buffer is the caller's host memory (clb_tensor_from_host): freeing
   * the last holder waits for the queue first. */
  int host_backed;
};

/* What differs between devices beyond geometry and kernel style, decided once
 * per context (runtime/core/traits.c, DESIGN.md "GPUs"); a guessed trait is
 * logged under CLBOUND_LOG=device. */
typedef struct clb_device_traits {
  /* 1 when a work-group that has started keeps making progress while others
   * spin-wait on it (no spec guarantees this; from the vendor) */
  int forward_progress;
  const char *forward_progress_why; /* static text: the reason, for the log */
} clb_device_traits;

/* Most look-back state buffers a context keeps (runtime/ops/select.c): each
 * is twice the last, so 40 cover any bound. */
#define CLB_SEL_LB_BUFFERS 40

struct clb_context {
  cl_platform_id platform;
  cl_device_id device;
  cl_context cl;
  cl_command_queue queue;
  clb_device_info info;
  clb_kernel_style style;
  size_t local_size;   /* work-group size of elementwise-style kernels */
  size_t max_groups;   /* work-groups of a grid-stride launch */
  /* CLBOUND_TEST_KERNEL_WG_LIMIT (docs/portability.md): every kernel taken as
   * allowing at most this many work-items per group, as a driver's
   * CL_KERNEL_WORK_GROUP_SIZE can; a launch above it fails as it would there.
   * 0: unset. */
  size_t kernel_wg_limit;
  /* CLBOUND_SELECT_SINGLE (docs/portability.md): the select ops in one launch
   * for small masks (-1, the default), always (1) or never (0). */
  int select_single;
  /* CLBOUND_SELECT_LOOKBACK (docs/portability.md): the select ops in one pass
   * with decoupled look-back (GPU style) by the trait (-1, the default), always
   * (1) or never (0); and the test-only defines CLBOUND_TEST_SELECT_LOOKBACK
   * adds to that kernel's build options ("" unset) */
  int select_lookback;
  char select_lb_test[96];
  int select_lb_items; /* the one-pass select's elements per work-item and tile; 0: CLB_SEL_LB_ITEMS */
  clb_device_traits traits;
  /* the look-back kernel's state (ticket, epoch, a status word per tile): the
   * last buffer is the one in use, for sel_lb_tiles tiles; earlier ones stay
   * until the context is freed, since a recorded step may still launch with
   * them. Zeroed once when made, never written by the host again. */
  cl_mem sel_lb[CLB_SEL_LB_BUFFERS];
  int n_sel_lb;
  int64_t sel_lb_tiles;
  clb_pool *pool;
  clb_mem_hook mem_hook; /* zeroed: every data buffer from the pool */
  clb_progcache *programs; /* NULL until runtime/cache makes it */
  cl_mem status;       /* CLB_STATUS_INTS ints, sticky */
  /* a host sync polls its command's status for up to sync_spin_ns before it
   * blocks (CLBOUND_SYNC_SPIN_US; runtime/core/sync.c); with sync_spin_auto
   * only while sync_wait_ns, an average of the recent syncs' waits, is shorter */
  int64_t sync_spin_ns;
  int sync_spin_auto;
  int64_t sync_wait_ns;
  /* then it checks for up to sync_yield_ns more, yielding the CPU between
   * checks (CLBOUND_SYNC_YIELD_MS), before it blocks */
  int64_t sync_yield_ns;
  /* runtime/core/hostptr.c: 0 until asked, 1 when a buffer's map pointer is its
   * own memory (checked once), -1 when native kernels must map every time */
  int host_ptrs;
  void *status_host;   /* the status word's host pointer, once learnt */
  cl_mem scratch;      /* partial results of reductions: max_groups * 16 bytes */
  clb_counters counters;
  uint32_t next_launch_id;
  clb_launch_rec ring[CLB_LAUNCH_RING];
  /* ring slots held by a recorded step's launches (clb__launch_pin): a new id
   * skips them, so a replay's status bit still finds its op */
  uint8_t ring_pinned[CLB_LAUNCH_RING];
  clb_launch_hook launch_hook;
  /* Outputs of the op being enqueued (clb__note_output): op_seq numbers op
   * invocations; out_op is the op whose outputs were noted last, out_launched
   * whether it has launched since (the next note starts a new invocation). */
  uint64_t op_seq;
  const char *out_op;
  int out_launched;
  struct clb_tensor *tensors;
  /* logging */
  unsigned log_mask;
  clb_log_fn log_fn;
  void *log_user;
  /* persistent program cache: the folder asked for (options.cache_dir copied, or
   * NULL: the environment), and the folder in use, cache_dir[0] == 0 when off;
   * both read by runtime/cache when it first needs them */
  char *cache_dir_option;
  char cache_dir[1024];
  /* appended to every program's build options while a specialized graph plan
   * runs, so that plan builds its own programs; empty otherwise */
  char build_suffix[64];
  /* reasons of recompiles, for the metrics file: a growing array */
  char **recompile_reasons;
  size_t n_recompiles, cap_recompiles;
  char errmsg[CLB_ERRMSG_MAX];
  /* clb_gemm_strategy (clbound/nn.h) of the context's matmuls; 0 (AUTO) from
   * calloc. Set by clb_context_set_gemm_strategy (runtime/ops/gemm.c). */
  int gemm_strategy;
  /* what runtime/ops/gemm-host.c resolved for this context (AUTO, CLBOUND_GEMM,
   * and whether host BLAS can run): 0 until the first matmul */
  int gemm_resolved;
  /* CLBlast kernels set from the device's tuning file, plus 1: 0 until the
   * context's first CLBlast call (runtime/ops/gemm-tune.c) */
  int clblast_tuned;
  /* host-BLAS products kept to be enqueued as one native kernel while a merge
   * is open (a graph's forward, its backward and SGD: runtime/ops/gemm-host.c;
   * NULL until first used, freed with the context) */
  void *host_batch;
  /* set while host-BLAS products are kept (runtime/ops/gemm-host.c's merge):
   * enqueues them. Every other command calls it first (clb__merge_flush), so
   * the queue's order stays the program's; fresh_record marks the write of a
   * new tensor's shape record, which no kept product reads */
  clb_status (*merge_flush)(clb_context_t ctx);
  int fresh_record;
  /* DLPack device exports still held by a consumer (runtime/interop): cut loose
   * from the context by its release hook when the context is freed */
  struct clb__dl_export *exports;
  clb_release_fn release_hooks[CLB_MAX_RELEASE_HOOKS];
  int n_release_hooks;
  /* non-NULL while a graph plan's first step is walked to collect its kernels:
   * clb__launch then launches nothing */
  struct clb_plan_collect *collect;
  /* staging copies of host writes still queued (clb__write_async), oldest
   * first: freed once done, found at the next write or host sync, no callbacks */
  struct clb__staging *staging;
  size_t n_staging, cap_staging;
  uint64_t staging_bytes;
  /* first launches (runtime/core/launch.c): the (kernel, local size) pairs
   * launched so far, an open-addressed set of cap_first_seen slots, and the
   * timer their events report to (shared with callbacks still to come) */
  struct clb__first_seen *first_seen;
  size_t n_first_seen, cap_first_seen;
  struct clb__first_timer *first_timer;
  int time_first_launches; /* event callbacks time them (CLBOUND_FIRST_LAUNCH_TIMING) */
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
/* The thread's message (clb_last_errmsg) for calls with no context: defined in
 * shapes/errors.c, so the symbol engine below writes the same one. */
void clb__set_last_errmsg(const char *fmt, ...);
char *clb__last_errmsg_buf(size_t *len);

/* ---- log.c ---------------------------------------------------------------- */

/* Logs a line in one category if it is on (printf-style). */
void clb__log(clb_context_t ctx, unsigned category, const char *fmt, ...);
/* Where lines go without a context (the background program store): the
 * categories on, and the callback (NULL: time-stamped lines on stderr). */
typedef struct clb__logger {
  unsigned mask;
  clb_log_fn fn;
  void *user;
} clb__logger;
void clb__log_to(const clb__logger *lg, unsigned category, const char *fmt, ...);
/* The context's logger. */
clb__logger clb__context_logger(clb_context_t ctx);
/* Categories named in CLBOUND_LOG. */
unsigned clb__log_env_mask(void);
/* Records a recompile reason (counted, logged, and listed in the metrics). */
void clb__note_recompile(clb_context_t ctx, const char *reason);
/* Writes CLBOUND_METRICS_FILE, when set; called when the context is freed. */
void clb__metrics_write_env(clb_context_t ctx);

/* ---- device.c ------------------------------------------------------------- */

clb_status clb__device_describe(cl_platform_id plat, cl_device_id dev, clb_device_info *out);
/* The platform and device of flat index `index` (as clb_device_info_get counts
 * them); CLB_ERR_NO_DEVICE past the last. */
clb_status clb__device_at(int index, cl_platform_id *plat, cl_device_id *dev);
/* Chooses a platform and device from the option strings (NULL: environment).
 * On failure the thread-local message lists the devices there are. */
clb_status clb__device_select(const char *platform, const char *device, cl_platform_id *plat,
                              cl_device_id *dev);

/* ---- launch.c ------------------------------------------------------------- */

typedef struct clb_arg {
  size_t size;
  const void *value;
} clb_arg;
#define CLB_ARG(v) ((clb_arg){sizeof(v), &(v)})
/* A tensor's data (a clb_buf lvalue) as the two arguments of a kernel's
 * CLB_DATA parameter (kernels/common.cl): the buffer and the byte offset in it. */
#define CLB_ARG_DATA(b) CLB_ARG((b).mem), CLB_ARG((b).offset)
/* Appends a tensor's data (a clb_buf lvalue) to args[na++] as CLB_ARG_DATA does. */
#define CLB_PUSH_DATA(args, na, b) ((args)[(na)++] = CLB_ARG((b).mem), (args)[(na)++] = CLB_ARG((b).offset))
/* The number of arguments in an array of clb_arg. */
#define CLB_NARGS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Takes the next launch id and records op and what under it in the launch ring,
 * for work that is enqueued other than by clb__launch (a native kernel). */
uint32_t clb__launch_record(clb_context_t ctx, const char *op, const char *what);
/* Adds an op invocation (clb_tensor.written_by) whose outputs launch id writes:
 * a failure raised with id marks those outputs failed too (a host-BLAS native
 * kernel writes the outputs of ops noted under other names, and of merged ops).
 * Past CLB_LAUNCH_SEQS the rest are not recorded. */
void clb__launch_add_seq(clb_context_t ctx, uint32_t id, uint64_t seq);
/* Forgets the invocations launch id belongs to (its seq, taken from the op that
 * noted outputs last, and those added), for a caller that adds them itself. */
void clb__launch_clear_seqs(clb_context_t ctx, uint32_t id);
/* For a launch of k at local size `local`: NULL when the context launched that
 * pair before, else an event slot the caller passes to the enqueue and then
 * hands to clb__first_launch_watch, which counts it and, where the context
 * times first launches (CPU devices by default), times it by event callbacks
 * (from ready to done: on PoCL the kernel's compile for that size). Where it
 * does not, the launch passes no event and the watch gets NULL: counted only. */
cl_event *clb__first_launch_slot(clb_context_t ctx, cl_kernel k, size_t local, cl_event *slot);

/* The work-group shapes the process's kernels were first launched with, noted
 * at each first launch of a (kernel, local size) pair: clb__wg_note(local,
 * global); clb__wg_specializations writes them as PoCL names its work-group
 * functions ("64-1-1-goffs0-smallgrid,1-1-1-goffs0-smallgrid", comma-separated,
 * cut to fit cap), so that the store helper can have PoCL put those compiled
 * work-group functions into the program binaries it stores (runtime/cache/
 * store-helper.c); returns how many were written. Thread-safe. */
void clb__wg_note(size_t local, size_t global);
int clb__wg_specializations(char *buf, size_t cap);
void clb__first_launch_watch(clb_context_t ctx, cl_event ev);
double clb__first_launch_ms(clb_context_t ctx);
/* First launches enqueued and not yet complete (their driver compile may be
 * under way). */
int clb__first_launches_pending(clb_context_t ctx);
/* A monotonic clock in milliseconds. */
double clb__now_ms(void);
void clb__first_launch_free(clb_context_t ctx);

/* runtime/core/hostptr.c: host pointers of buffers for native kernels.
 * Where the device's buffers are host memory (a CPU device with
 * CL_DEVICE_HOST_UNIFIED_MEMORY whose two maps of one buffer, checked once per
 * context on a probe buffer, return the same pointer, and CLBOUND_HOST_PTRS is
 * not "off"), a map's pointer stays valid for the buffer's life: the first map
 * of a buffer is learnt (clb__buf_host_learn) and later native kernels use it
 * without maps. clb__buf_host_ptr returns the known pointer of the buffer's
 * start (add buf->offset for its region) or NULL (map it); clb__buf_host_learn
 * takes the buffer's start too; buf NULL names the context's status word. */
int clb__host_ptrs_ok(clb_context_t ctx);
void *clb__buf_host_ptr(clb_context_t ctx, const clb_buf *buf);
void *clb__status_host_ptr(clb_context_t ctx);
void clb__buf_host_learn(clb_context_t ctx, clb_buf *buf, void *ptr);
/* Learns buf's pointer now (a map and an unmap enqueued), where that is allowed. */
void clb__buf_host_map_learn(clb_context_t ctx, clb_buf *buf);
/* Sets the args and enqueues a 1-D launch of `groups` work-groups of `local`
 * work-items, recording it in the launch ring (what: bounds, for messages).
 * Returns the launch id through *id when id is not NULL, before setting args,
 * so a kernel can take its own id as an argument: pass id_arg >= 0 to have the
 * id written into that argument. */
clb_status clb__launch(clb_context_t ctx, const char *op, const char *what, cl_kernel k,
                       const clb_arg *args, int nargs, int id_arg, size_t groups,
                       size_t local);
/* Sets a launch's arguments, the launch id `id` into argument id_arg. */
clb_status clb__launch_set_args(clb_context_t ctx, const char *op, cl_kernel k, const clb_arg *args, int nargs,
                                int id_arg, uint32_t id);
/* Enqueues a 1-D launch whose arguments are set, and counts it. */
clb_status clb__launch_enqueue(clb_context_t ctx, const char *op, const char *what, cl_kernel k, size_t groups,
                               size_t local);
/* Writes the launch ring's entry of an id taken before (a replayed launch):
 * the op, `what`, and the op invocation whose outputs it writes now. */
void clb__launch_register(clb_context_t ctx, uint32_t id, const char *op, const char *what);
/* Pins (on) or unpins the ring slot of id: clb__launch_record skips pinned slots. */
void clb__launch_pin(clb_context_t ctx, uint32_t id, int on);
/* Tells the launch hook, if one is set, of a host write into mem (or, mem
 * NULL, a host read or sync) about to be enqueued. */
clb_status clb__launch_host(clb_context_t ctx, const char *why, cl_mem mem);

/* Enqueues the host-BLAS products an open merge keeps (clb_context.merge_flush),
 * before a command of another kind. */
clb_status clb__merge_flush(clb_context_t ctx);
/* The launch geometry: the device's (local size 64 and 8 work-groups per compute
 * unit on CPUs, 256 and 16 on GPUs) unless CLBOUND_GEOMETRY forces another
 * (docs/portability.md). */
typedef struct clb_geometry {
  clb_kernel_style style; /* the default style of the preset; AUTO: the device's */
  size_t local, per_cu;
  uint32_t cu;            /* compute units to assume; 0: the device's */
} clb_geometry;
/* Sets ctx's style (`style`, or the geometry's when AUTO), local size and group
 * count; ctx->info must be filled. A bad CLBOUND_GEOMETRY is
 * CLB_ERR_INVALID_ARG. */
clb_status clb__geometry_init(clb_context_t ctx, clb_kernel_style style);
/* An on/off/auto switch from the environment: 1, 0, or -1 for auto or unset;
 * another value is CLB_ERR_INVALID_ARG with a message naming the variable. */
/* Whether needle occurs in hay, ignoring ASCII case (an empty needle does). */
int clb__contains_ci(const char *hay, const char *needle);

/* ---- traits.c -------------------------------------------------------------- */

/* Fills ctx->traits from ctx->info and reads CLBOUND_SELECT_LOOKBACK and
 * CLBOUND_TEST_SELECT_LOOKBACK (a bad value is CLB_ERR_INVALID_ARG); logs the
 * guessed traits (CLBOUND_LOG=device). Needs ctx->log_mask set. */
clb_status clb__traits_init(clb_context_t ctx);

/* Work-groups for a grid-stride loop over up to n items. */
size_t clb__groups_for(clb_context_t ctx, int64_t n);
/* The same for work-groups of `local` work-items (a kernel that allows fewer
 * than the context's local size); at most max_groups. */
size_t clb__groups_local(clb_context_t ctx, int64_t n, size_t local);
/* Formats a tensor's bounds as "[<=8, 3]" into buf. */
const char *clb__tensor_desc(clb_tensor_t t, char *buf, size_t len);

/* ---- tensor.c ------------------------------------------------------------- */

/* Validates an input: a NULL or foreign tensor is CLB_ERR_NULL /
 * CLB_ERR_INVALID_ARG with a message naming `op` and `name`; a tensor marked
 * failed (the output of an op whose device check failed) returns that error. */
clb_status clb__check_tensor(clb_context_t ctx, const char *op, const char *name, clb_tensor_t t);
/* Validates an output given by the caller: handle and context only (an op may
 * rewrite a failed tensor; clb__note_output then clears the mark). */
clb_status clb__check_output(clb_context_t ctx, const char *op, const char *name, clb_tensor_t t);
/* Notes that the launches of `op` that follow write t: clears a failed mark and
 * ties t to them, so that a device error they raise marks t failed at the next
 * sync. clb__output calls it; an op that writes a tensor it did not get from
 * clb__output (in place, or the caller's out) calls it before launching. */
void clb__note_output(clb_context_t ctx, const char *op, clb_tensor_t t);
/* Views that follow the tensor they view (struct clb_tensor.view_next):
 * clb__view_link makes v (rank, spec) x's follower unless x has another;
 * clb__view_current says whether x's last writer also wrote v's record from
 * x's present sizes with this spec, and if so marks v written with x. */
void clb__view_link(clb_tensor_t x, clb_tensor_t v, int rank, const int64_t *spec);
int clb__view_current(clb_tensor_t x, clb_tensor_t v, int rank, const int64_t *spec);
/* Gets an output tensor: creates one if *out is NULL, else checks it against the
 * dtype, rank, bounds and dynamic flags needed. */
clb_status clb__output(clb_context_t ctx, const char *op, clb_dtype dtype, int rank,
                       const int64_t *bounds, const uint8_t *dyn, clb_tensor_t *out);
/* As clb__output, but a tensor it makes gets no shape record write: for a
 * producer that writes the whole record (every one of its CLB_MAX_RANK entries)
 * in the first command after, before anything reads it (host BLAS's native
 * kernel). A producer that fails before enqueueing that command writes the
 * bounds instead (clb__record_bounds), so that no record is left unwritten. */
clb_status clb__output_unrecorded(clb_context_t ctx, const char *op, clb_dtype dtype, int rank,
                                  const int64_t *bounds, const uint8_t *dyn, clb_tensor_t *out);
/* Writes t's bounds into its shape record (a host write, enqueued). */
clb_status clb__record_bounds(clb_context_t ctx, const char *op, clb_tensor_t t);
int64_t clb__numel(int rank, const int64_t *dims);
/* One host sync, then the actual sizes of ts[0..n) (into dims[i * CLB_MAX_RANK
 * ...]) read through host pointers, with clb_tensors_read's checks (a failed
 * tensor's error, records within bounds). The host pointers of ts' shape
 * records and of data[i]'s data buffers are learnt first (maps enqueued before
 * the wait); where one cannot be, CLB_ERR_UNSUPPORTED without a sync. sync 0:
 * no wait, for tensors whose dims are all static: their sizes are their bounds
 * (the caller checked), and their data is the device's after the next sync. */
clb_status clb__tensors_direct(clb_context_t ctx, const char *op, int n, const clb_tensor_t *ts,
                               const clb_tensor_t *data, int64_t *dims, int sync);
/* A new tensor sharing x's data buffer (the buffer goes back to the pool when
 * the last holder is freed), with its own shape record, not yet written. */
clb_status clb__tensor_share(clb_context_t ctx, const char *op, clb_tensor_t x, int rank, const int64_t *bounds,
                             const uint8_t *dyn, clb_tensor_t *out);
/* Gives the n tensors `moved`, which share one data buffer with at least one
 * other tensor that keeps it, a buffer of their own from the pool holding a
 * copy of the shared one (enqueued: no host sync). They stop following the
 * tensor they view and lose graph_held. On failure nothing changes. */
clb_status clb__tensor_unshare(clb_context_t ctx, const char *op, clb_tensor_t *moved, size_t n);
/* A counted host sync that reads t's actual sizes; `why` is logged. */
clb_status clb__sync_sizes(clb_context_t ctx, clb_tensor_t t, const char *why, int64_t *dims);
/* The first `bytes` of t's data into host, right after clb__sync_sizes read the
 * sizes (the queue is idle: a blocking read, not another counted sync). */
clb_status clb__read_data(clb_context_t ctx, const char *op, clb_tensor_t t, void *host, size_t bytes);
/* ---- fork.c ----------------------------------------------------------------- */

/* Notes forks from now on (called where the process first touches OpenCL). */
void clb__fork_watch(void);
/* 1 in a child forked (directly or not) after the process had used OpenCL. */
int clb__forked_child(void);
/* CLB_OK, or in such a child CLB_ERR_UNSUPPORTED with a message naming op and
 * the way out (contexts made after fork, or spawn). */
clb_status clb__fork_check(clb_context_t ctx, const char *op);
/* ---- staging.c ------------------------------------------------------------ */

/* Enqueues a non-blocking write from a private copy of `host`, a staging copy
 * freed by clb__staging_reap once the write is done. While more than
 * CLB_STAGING_MAX_BYTES are staged, a write first waits for the oldest. */
clb_status clb__write_async(clb_context_t ctx, const char *op, cl_mem mem, size_t offset,
                            const void *host, size_t bytes);
#define CLB_STAGING_MAX_BYTES (256u << 20)
/* Enqueues a non-blocking write straight from `host`, which the caller keeps
 * valid and unchanged until release(release_arg) runs: once the write is done,
 * found by clb__staging_reap (at a later write or host sync, or when the
 * context is freed). release also runs, before returning, when there is
 * nothing to write or the write cannot be enqueued. */
clb_status clb__write_borrowed(clb_context_t ctx, const char *op, cl_mem mem, size_t offset, const void *host,
                               size_t bytes, void (*release)(void *), void *release_arg);
/* Frees the staging copies whose writes are done (all of them when `all`: the
 * caller has seen the queue finish, e.g. at a host sync). */
void clb__staging_reap(clb_context_t ctx, int all);
/* Waits for the borrowed writes whose release is (release, release_arg), and
 * runs the releases of every write done by then (no host sync is counted). */
void clb__staging_wait(clb_context_t ctx, void (*release)(void *), void *release_arg);

/* A release that does nothing: a borrowed write whose memory the caller keeps
 * until the next host sync. */
void clb__release_nothing(void *arg);

/* clb_tensor_write borrowing `host` (clb__write_borrowed); release runs in
 * every case, before returning where the write fails or is empty. */
clb_status clb__tensor_write_borrowed(clb_context_t ctx, const char *op, clb_tensor_t t, const int64_t *dims,
                                      const void *host, size_t bytes, void (*release)(void *), void *release_arg);

/* ---- context.c ------------------------------------------------------------ */

/* Registers fn to run when ctx is freed (once per fn: a second call with the
 * same fn does nothing). Returns CLB_ERR_INTERNAL when the table is full. */
clb_status clb__context_on_release(clb_context_t ctx, clb_release_fn fn);

/* ---- sync.c --------------------------------------------------------------- */

/* A counted host sync: finishes the queue and returns a pending sticky error. */
clb_status clb__sync(clb_context_t ctx, const char *why);
/* Zeroes the device status word (blocking). */
cl_int clb__status_clear(clb_context_t ctx);

/* ---- dtype.c -------------------------------------------------------------- */

/* OpenCL C type name of a dtype ("float", "long", "uchar"). */
const char *clb__dtype_cl(clb_dtype dt);
int clb__dtype_is_float(clb_dtype dt);

/* ---- hash.c --------------------------------------------------------------- */

/* FNV-1a over len bytes, continuing from h (start with CLB_FNV_SEED). */
#define CLB_FNV_SEED 0xcbf29ce484222325ull
uint64_t clb__fnv1a(uint64_t h, const void *data, size_t len);

#endif /* CLB_CORE_INTERNAL_H */
