/* record.c: recorded steps (docs/design.md, "Recorded steps"). Under the
 * dynamic and automatic policies a plan's step launches the same kernels with
 * the same arguments on the same buffers whatever the sizes, since the sizes
 * live on the device. Where the device has cl_khr_command_buffer, the plan's
 * second step is recorded into a command buffer as it launches (through the
 * context's launch hook, core.h) and every later step replays it: the host
 * still walks the step (tensors, the memory plan, the launch ring), but each
 * launch is only compared with the recorded one, and at the end of the step
 * the command buffer is enqueued once. A launch that differs (an lr change, a
 * buffer the plan did not place, another kernel) ends the replay: the launches
 * compared so far are enqueued one by one from their recorded arguments, the
 * rest of the step is enqueued as usual, and the next step records again.
 * Host writes go to the queue outside the recording, so they must come before
 * the step's first launch (the inputs' data) or into a shape record this step
 * handed to a new tensor (no other command of the step touches it); any other
 * write, or a host read or sync, ends the recording or the replay the same way.
 *
 * The entry points are those of the cl_khr_command_buffer revision the device
 * reports, taken with clGetExtensionFunctionAddressForPlatform and declared
 * here as that revision has them; a revision this file does not know is not
 * used. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/graph/graph.h"

/* ---- cl_khr_command_buffer 0.9.0, declared as that revision has it ------------- */

typedef struct clb__cmdbuf *cmdbuf_t; /* cl_command_buffer_khr */
typedef cl_uint sync_point_t;        /* cl_sync_point_khr */
typedef cl_ulong cmd_props_t;        /* cl_properties */
#define CMDBUF_FLAGS 0x1293          /* CL_COMMAND_BUFFER_FLAGS_KHR */
#define CMDBUF_SIMULTANEOUS_USE 1u   /* CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR */
#define DEV_CMDBUF_CAPS 0x12A9       /* CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR */
#define DEV_CMDBUF_QUEUE_PROPS 0x12AA /* CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR */
#define CAP_SIMULTANEOUS_USE (1u << 2) /* CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR */
#define DEV_EXTENSIONS_WITH_VERSION 0x1060 /* CL_DEVICE_EXTENSIONS_WITH_VERSION (OpenCL 3.0) */

typedef cmdbuf_t(CL_API_CALL *create_fn)(cl_uint, const cl_command_queue *, const cmd_props_t *, cl_int *);
typedef cl_int(CL_API_CALL *finalize_fn)(cmdbuf_t);
typedef cl_int(CL_API_CALL *release_fn)(cmdbuf_t);
typedef cl_int(CL_API_CALL *enqueue_fn)(cl_uint, cl_command_queue *, cmdbuf_t, cl_uint, const cl_event *, cl_event *);
typedef cl_int(CL_API_CALL *ndrange_fn)(cmdbuf_t, cl_command_queue, const cmd_props_t *, cl_kernel, cl_uint, const size_t *,
                                        const size_t *, const size_t *, cl_uint, const sync_point_t *, sync_point_t *,
                                        void **);

typedef struct cmdbuf_api {
  create_fn create;
  finalize_fn finalize;
  release_fn release;
  enqueue_fn enqueue;
  ndrange_fn ndrange;
} cmdbuf_api;

/* ---- the recorder -------------------------------------------------------------- */

typedef struct rec_launch {
  cl_kernel k;
  cl_kernel own; /* the recorded command's own kernel object (record()) */
  const char *op;
  uint32_t id;
  int nargs, id_arg;
  size_t groups, local;
  size_t arg_off; /* into the recorder's argument bytes: per argument its size, then its bytes */
  size_t arg_len;
} rec_launch;

enum { R_PLAIN, R_RECORD, R_REPLAY };

struct clb__graph_rec {
  int probed, usable;   /* the device's extension, probed once */
  int want;             /* CLBOUND_RECORD: 0 off, 1 on, -1 the device's default */
  int gave_up;          /* recording failed for a reason that stays (logged once) */
  int failures;         /* recordings dropped in a row */
  char why_not[256];    /* why steps are not recorded, once logged */
  cmdbuf_api api;
  /* the recording */
  cmdbuf_t cb;          /* finalized: replayable */
  int64_t plan;         /* the plan it belongs to */
  rec_launch *l;
  size_t n, cap;
  unsigned char *args;
  size_t args_len, args_cap;
  /* the step */
  int mode;
  size_t pos;           /* replay: launches compared so far */
  sync_point_t last_sp; /* recording: the last command's sync point */
};

static void log_once(clb_graph_t g, const char *why) {
  struct clb__graph_rec *r = g->rec;
  if (strcmp(r->why_not, why) == 0) return;
  snprintf(r->why_not, sizeof r->why_not, "%s", why);
  clb__log(g->ctx, CLB_LOG_RECORD, "graph %s: steps are not recorded: %s", g->name, why);
}

/* Whether the device's extension is one this file can drive, and its entry points. */
static int probe(clb_graph_t g, char *why, size_t cap) {
  clb_context_t ctx = g->ctx;
  struct clb__graph_rec *r = g->rec;
  size_t sz = 0;
  if (clGetDeviceInfo(ctx->device, CL_DEVICE_EXTENSIONS, 0, NULL, &sz) != CL_SUCCESS || !sz) {
    snprintf(why, cap, "the device's extensions cannot be read");
    return 0;
  }
  char *ext = malloc(sz + 1);
  if (!ext) {
    snprintf(why, cap, "out of host memory");
    return 0;
  }
  int ok = clGetDeviceInfo(ctx->device, CL_DEVICE_EXTENSIONS, sz, ext, NULL) == CL_SUCCESS;
  ext[sz] = 0;
  size_t len = ok ? strlen(ext) : 0; /* names are separated by spaces: the name alone, not a longer one */
  int has = ok && (strstr(ext, "cl_khr_command_buffer ") || (len >= 21 && strcmp(ext + len - 21, "cl_khr_command_buffer") == 0));
  free(ext);
  if (!has) {
    snprintf(why, cap, "%.160s has no cl_khr_command_buffer", ctx->info.name);
    return 0;
  }
  /* the revision: the entry points' signatures changed between revisions */
  struct {
    cl_uint version;
    char name[64];
  } nv[256];
  size_t got = 0;
  cl_uint version = 0;
  if (clGetDeviceInfo(ctx->device, DEV_EXTENSIONS_WITH_VERSION, sizeof nv, nv, &got) == CL_SUCCESS)
    for (size_t i = 0; i < got / sizeof nv[0]; i++)
      if (strcmp(nv[i].name, "cl_khr_command_buffer") == 0) version = nv[i].version;
  unsigned major = version >> 22, minor = (version >> 12) & 0x3ffu, patch = version & 0xfffu;
  if (!(major == 0 && minor == 9 && patch == 0)) {
    snprintf(why, cap, "cl_khr_command_buffer %u.%u.%u is a revision clbound does not drive (it knows 0.9.0)", major, minor, patch);
    return 0;
  }
  cl_bitfield caps = 0, need = 0;
  cl_command_queue_properties have = 0;
  if (clGetDeviceInfo(ctx->device, DEV_CMDBUF_CAPS, sizeof caps, &caps, NULL) != CL_SUCCESS || !(caps & CAP_SIMULTANEOUS_USE)) {
    snprintf(why, cap, "the device's command buffers cannot be pending twice (no simultaneous use)");
    return 0;
  }
  if (clGetDeviceInfo(ctx->device, DEV_CMDBUF_QUEUE_PROPS, sizeof need, &need, NULL) != CL_SUCCESS ||
      clGetCommandQueueInfo(ctx->queue, CL_QUEUE_PROPERTIES, sizeof have, &have, NULL) != CL_SUCCESS || (need & ~have)) {
    snprintf(why, cap, "the device's command buffers need queue properties 0x%llx", (unsigned long long)need);
    return 0;
  }
  r->api.create = (create_fn)clGetExtensionFunctionAddressForPlatform(ctx->platform, "clCreateCommandBufferKHR");
  r->api.finalize = (finalize_fn)clGetExtensionFunctionAddressForPlatform(ctx->platform, "clFinalizeCommandBufferKHR");
  r->api.release = (release_fn)clGetExtensionFunctionAddressForPlatform(ctx->platform, "clReleaseCommandBufferKHR");
  r->api.enqueue = (enqueue_fn)clGetExtensionFunctionAddressForPlatform(ctx->platform, "clEnqueueCommandBufferKHR");
  r->api.ndrange = (ndrange_fn)clGetExtensionFunctionAddressForPlatform(ctx->platform, "clCommandNDRangeKernelKHR");
  if (!r->api.create || !r->api.finalize || !r->api.release || !r->api.enqueue || !r->api.ndrange) {
    snprintf(why, cap, "the platform does not give cl_khr_command_buffer's entry points");
    return 0;
  }
  return 1;
}

/* CLBOUND_RECORD: off, on, or unset/auto (the device's default). */
static int env_want(void) {
  return (int)clb__env_int(CLB_ENV_RECORD);
}

/* The default where CLBOUND_RECORD is unset: replay only where it is measured
 * correct and not slower. On PoCL (CPU) a replay costs about what the launches
 * it replaces cost (docs/benchmarks.md, "Recorded steps"); no GPU has been
 * measured. So it is off on every device until a measurement says otherwise. */
static int default_on(clb_context_t ctx) {
  (void)ctx;
  return 0;
}

static void drop(clb_graph_t g) {
  struct clb__graph_rec *r = g->rec;
  if (r->cb) r->api.release(r->cb);
  r->cb = NULL;
  for (size_t i = 0; i < r->n; i++) {
    clb__launch_pin(g->ctx, r->l[i].id, 0);
    if (r->l[i].own) clReleaseKernel(r->l[i].own);
  }
  r->n = 0;
  r->args_len = 0;
  r->plan = -1;
}

void clb__graph_record_free(clb_graph_t g) {
  if (!g->rec) return;
  if (g->ctx->launch_hook.user == g) g->ctx->launch_hook = (clb_launch_hook){0};
  drop(g);
  free(g->rec->l);
  free(g->rec->args);
  free(g->rec);
  g->rec = NULL;
}

/* Stores a launch: kernel, geometry, id and arguments (the id argument's bytes
 * are those of `id`). */
static clb_status keep(clb_graph_t g, const char *op, cl_kernel k, const clb_arg *args, int nargs, int id_arg, size_t groups,
                       size_t local, uint32_t id) {
  struct clb__graph_rec *r = g->rec;
  size_t need = 0;
  for (int i = 0; i < nargs; i++) {
    if (i != id_arg && !args[i].value) return CLB_ERR_UNSUPPORTED; /* a __local size: nothing to compare */
    need += sizeof(size_t) + (i == id_arg ? sizeof(cl_uint) : args[i].size);
  }
  if (r->n == r->cap) {
    size_t ncap = r->cap ? 2 * r->cap : 64;
    rec_launch *nl = realloc(r->l, ncap * sizeof *nl);
    if (!nl) return CLB_ERR_HOST_OOM;
    r->l = nl;
    r->cap = ncap;
  }
  if (r->args_len + need > r->args_cap) {
    size_t ncap = r->args_cap ? 2 * r->args_cap : 4096;
    while (ncap < r->args_len + need) ncap *= 2;
    unsigned char *na = realloc(r->args, ncap);
    if (!na) return CLB_ERR_HOST_OOM;
    r->args = na;
    r->args_cap = ncap;
  }
  unsigned char *p = r->args + r->args_len;
  for (int i = 0; i < nargs; i++) {
    size_t s = i == id_arg ? sizeof(cl_uint) : args[i].size;
    cl_uint idv = id;
    memcpy(p, &s, sizeof s);
    memcpy(p + sizeof s, i == id_arg ? (const void *)&idv : args[i].value, s);
    p += sizeof s + s;
  }
  r->l[r->n++] = (rec_launch){k, NULL, op, id, nargs, id_arg, groups, local, r->args_len, need};
  r->args_len += need;
  return CLB_OK;
}

/* Whether a launch is the recorded launch e: the same kernel, geometry and
 * arguments (the id argument aside: a replay keeps the recorded id). */
static int same(const struct clb__graph_rec *r, const rec_launch *e, cl_kernel k, const clb_arg *args, int nargs, int id_arg,
                size_t groups, size_t local) {
  if (e->k != k || e->nargs != nargs || e->id_arg != id_arg || e->groups != groups || e->local != local) return 0;
  const unsigned char *p = r->args + e->arg_off;
  for (int i = 0; i < nargs; i++) {
    size_t s;
    memcpy(&s, p, sizeof s);
    if (i != id_arg && (s != args[i].size || !args[i].value || memcmp(p + sizeof s, args[i].value, s) != 0)) return 0;
    p += sizeof s + s;
  }
  return 1;
}

/* Sets kernel k's arguments from launch e's recorded bytes. */
static cl_int set_recorded_args(const struct clb__graph_rec *r, const rec_launch *e, cl_kernel k, int *bad) {
  const unsigned char *p = r->args + e->arg_off;
  for (int i = 0; i < e->nargs; i++) {
    size_t s;
    memcpy(&s, p, sizeof s);
    cl_int err = clSetKernelArg(k, (cl_uint)i, s, p + sizeof s);
    if (err != CL_SUCCESS) {
      *bad = i;
      return err;
    }
    p += sizeof s + s;
  }
  return CL_SUCCESS;
}

/* Enqueues recorded launches [0, upto) one by one, from their recorded
 * arguments, under their recorded ids: what the step would have enqueued. */
static clb_status flush(clb_graph_t g, size_t upto) {
  struct clb__graph_rec *r = g->rec;
  clb_context_t ctx = g->ctx;
  for (size_t j = 0; j < upto; j++) {
    const rec_launch *e = &r->l[j];
    int bad = 0;
    cl_int err = set_recorded_args(r, e, e->k, &bad);
    if (err != CL_SUCCESS) return clb__cl_error(ctx, err, "%s: setting kernel argument %d", e->op, bad);
    /* counted as launched when compared or recorded */
    size_t global = e->groups * e->local;
    err = clEnqueueNDRangeKernel(ctx->queue, e->k, 1, NULL, &global, &e->local, 0, NULL, NULL);
    if (err != CL_SUCCESS)
      return clb__cl_error(ctx, err, "%s: launching %zu work-groups of %zu", e->op, e->groups, e->local);
  }
  return CLB_OK;
}

/* Leaves record or replay for the rest of the step: what was held back is
 * enqueued, the recording is dropped, and the launches go to the queue. A
 * step that departs from its recording `counts` towards giving up (a step
 * that failed does not). */
static clb_status leave(clb_graph_t g, const char *why, int counts) {
  struct clb__graph_rec *r = g->rec;
  size_t upto = r->mode == R_RECORD ? r->n : r->pos;
  int was = r->mode;
  r->mode = R_PLAIN;
  clb_status st = flush(g, upto);
  drop(g);
  if (counts && ++r->failures >= 3) {
    r->gave_up = 1;
    char line[256];
    snprintf(line, sizeof line, "%s (3 steps in a row)", why);
    log_once(g, line);
  } else {
    clb__log(g->ctx, CLB_LOG_RECORD, "graph %s: %s ended: %s", g->name, was == R_RECORD ? "recording" : "replay", why);
  }
  return st;
}

/* Records launch e into the command buffer, after the command before it (a
 * sync point on the one before: the order the extension guarantees; PoCL 3.1
 * runs them in order without). The command gets a kernel object of its own,
 * with e's arguments: with the step's own kernel objects, a kernel launched
 * more than once in a step replayed wrongly on PoCL 3.1 (a deferred check
 * failed in xla-mlp's backward), as if its arguments were read when the
 * buffer runs rather than when it was recorded. */
static cl_int record(clb_graph_t g, rec_launch *e) {
  struct clb__graph_rec *r = g->rec;
  char name[256];
  cl_program prog = NULL;
  cl_int err = clGetKernelInfo(e->k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
  if (err == CL_SUCCESS) err = clGetKernelInfo(e->k, CL_KERNEL_PROGRAM, sizeof prog, &prog, NULL);
  cl_kernel own = err == CL_SUCCESS ? clCreateKernel(prog, name, &err) : NULL;
  if (err != CL_SUCCESS) return err;
  int bad = 0;
  if ((err = set_recorded_args(r, e, own, &bad)) != CL_SUCCESS) {
    clReleaseKernel(own);
    return err;
  }
  size_t global = e->groups * e->local;
  sync_point_t sp = 0;
  int chain = r->n > 1;
  err = r->api.ndrange(r->cb, NULL, NULL, own, 1, NULL, &global, &e->local, chain ? 1 : 0, chain ? &r->last_sp : NULL,
                       &sp, NULL);
  if (err != CL_SUCCESS) {
    clReleaseKernel(own);
    return err;
  }
  r->last_sp = sp;
  e->own = own;
  return CL_SUCCESS;
}

static clb_status hook_launch(void *user, const char *op, const char *what, cl_kernel k, const clb_arg *args, int nargs,
                              int id_arg, size_t groups, size_t local) {
  clb_graph_t g = user;
  struct clb__graph_rec *r = g->rec;
  clb_context_t ctx = g->ctx;
  clb_status st;
  if (r->mode == R_REPLAY) {
    if (r->pos < r->n && same(r, &r->l[r->pos], k, args, nargs, id_arg, groups, local)) {
      /* the recorded launch runs under its recorded id: name it anew */
      clb__launch_register(ctx, r->l[r->pos].id, op, what);
      r->pos++;
      ctx->counters.kernel_launches++;
      return CLB_OK;
    }
    char why[160];
    snprintf(why, sizeof why, "launch %zu (%s) differs from the recorded one", r->pos, op);
    if ((st = leave(g, why, 1)) != CLB_OK) return st;
  }
  uint32_t id = clb__launch_record(ctx, op, what);
  if ((st = clb__launch_set_args(ctx, op, k, args, nargs, id_arg, id)) != CLB_OK) return st;
  if (r->mode == R_RECORD) {
    cl_int e = CL_SUCCESS;
    if ((st = keep(g, op, k, args, nargs, id_arg, groups, local, id)) == CLB_OK && (e = record(g, &r->l[r->n - 1])) == CL_SUCCESS) {
      clb__launch_pin(ctx, id, 1);
      ctx->counters.kernel_launches++;
      return CLB_OK;
    }
    if (st == CLB_OK) r->n--; /* kept but not recorded */
    char why[160];
    snprintf(why, sizeof why, "%s: recording launch %zu: %s", op, r->n, st == CLB_OK                ? clb__cl_error_name(e)
             : st == CLB_ERR_UNSUPPORTED ? "an argument without a value (a __local size)"
                                         : "out of host memory");
    if ((st = leave(g, why, 1)) != CLB_OK) return st;
    /* leave() enqueued other kernels' launches: set this one's arguments again */
    if ((st = clb__launch_set_args(ctx, op, k, args, nargs, id_arg, id)) != CLB_OK) return st;
  }
  return clb__launch_enqueue(ctx, op, what, k, groups, local);
}

static clb_status hook_host(void *user, const char *why, cl_mem mem) {
  clb_graph_t g = user;
  struct clb__graph_rec *r = g->rec;
  if (r->mode == R_PLAIN) return CLB_OK;
  size_t done = r->mode == R_RECORD ? r->n : r->pos;
  /* a write before the step's first launch, or into a shape record this step
   * handed to a new tensor, comes before every command that reads it */
  if (mem && (done == 0 || clb__graph_mem_step_shape(g, mem))) return CLB_OK;
  char line[200];
  snprintf(line, sizeof line, "%s: a host %s during the step", why, mem ? "write" : "read or sync");
  return leave(g, line, 1);
}

clb_status clb__graph_record_init(clb_graph_t g) {
  if (!(g->rec = calloc(1, sizeof *g->rec))) return clb__set_error(g->ctx, CLB_ERR_HOST_OOM, "clb_graph_new: out of host memory");
  g->rec->plan = -1;
  g->rec->want = env_want();
  return CLB_OK;
}

clb_status clb__graph_record_begin(clb_graph_t g, int same_plan) {
  clb_context_t ctx = g->ctx;
  struct clb__graph_rec *r = g->rec;
  if (!r) return CLB_OK;
  r->mode = R_PLAIN;
  r->pos = 0;
  int want = r->want < 0 ? default_on(ctx) : r->want;
  if (!want || r->gave_up) return CLB_OK;
  char why[256];
  if (!r->probed) {
    r->probed = 1;
    r->usable = probe(g, why, sizeof why);
    if (!r->usable) log_once(g, why);
  }
  if (!r->usable) return CLB_OK;
  /* what a step must be for its commands to be the same every step */
  const char *no = NULL;
  int gemm = clb_context_gemm_strategy(ctx);
  int has_linear = 0;
  for (int i = 0; i < g->nnodes; i++) has_linear |= g->nodes[i].kind == GN_LINEAR;
  if (g->policy_kind != CLB_POLICY_DYNAMIC && g->policy_kind != CLB_POLICY_AUTOMATIC)
    no = "the static and bucketed policies read counts back during the step";
  else if (has_linear && gemm != CLB_GEMM_DEVICE)
    no = gemm == CLB_GEMM_HOST_BLAS ? "its matmuls run as host-BLAS native kernels (CLBOUND_GEMM=kernel records them)"
                                    : "its matmuls call CLBlast, which enqueues outside the recording";
  else if (ctx->kernel_wg_limit)
    no = "CLBOUND_TEST_KERNEL_WG_LIMIT is set";
  else if (!clb__graph_mem_enabled(g))
    no = "the graph has no memory plan (its buffers change every step)";
  if (no) {
    log_once(g, no);
    drop(g);
    return CLB_OK;
  }
  /* the first step of a plan, or one that left the plan's arena, runs as usual */
  if (!same_plan || !clb__graph_mem_arena_step(g)) {
    drop(g);
    return CLB_OK;
  }
  if (r->cb && r->plan == g->current_plan) {
    r->mode = R_REPLAY;
  } else {
    drop(g);
    cmd_props_t props[] = {CMDBUF_FLAGS, CMDBUF_SIMULTANEOUS_USE, 0};
    cl_int e = CL_SUCCESS;
    r->cb = r->api.create(1, &ctx->queue, props, &e);
    if (e != CL_SUCCESS || !r->cb) {
      r->cb = NULL;
      snprintf(why, sizeof why, "clCreateCommandBufferKHR failed (%s)", clb__cl_error_name(e));
      log_once(g, why);
      r->gave_up = 1;
      return CLB_OK;
    }
    r->plan = g->current_plan;
    r->mode = R_RECORD;
  }
  ctx->launch_hook = (clb_launch_hook){hook_launch, hook_host, g};
  return CLB_OK;
}

clb_status clb__graph_record_end(clb_graph_t g, clb_status st) {
  struct clb__graph_rec *r = g->rec;
  if (!r) return st;
  clb_context_t ctx = g->ctx;
  if (ctx->launch_hook.user == g) ctx->launch_hook = (clb_launch_hook){0};
  int mode = r->mode;
  r->mode = R_PLAIN;
  if (mode == R_PLAIN) return st;
  if (st != CLB_OK) { /* what was held back still runs, as it would have */
    r->mode = mode;
    clb_status fs = leave(g, "the step failed", 0);
    return st != CLB_OK ? st : fs;
  }
  if (mode == R_REPLAY && r->pos != r->n) {
    r->mode = mode;
    return leave(g, "the step launched fewer kernels than the recording", 1);
  }
  cl_int e = mode == R_RECORD ? r->api.finalize(r->cb) : CL_SUCCESS;
  if (e == CL_SUCCESS) e = r->api.enqueue(0, NULL, r->cb, 0, NULL, NULL);
  if (e != CL_SUCCESS) {
    r->mode = mode;
    char why[160];
    snprintf(why, sizeof why, "%s the command buffer failed (%s)", mode == R_RECORD ? "finalizing or enqueueing" : "enqueueing",
             clb__cl_error_name(e));
    return leave(g, why, 1);
  }
  if (mode == R_REPLAY) r->failures = 0; /* a recording that replays */
  if (mode == R_RECORD) {
    ctx->counters.steps_recorded++;
    clb__log(ctx, CLB_LOG_RECORD, "graph %s: plan %lld recorded: %zu launches", g->name, (long long)r->plan, r->n);
  } else {
    ctx->counters.steps_replayed++;
  }
  return CLB_OK;
}
