/* launch.c: the launch geometry of a context (CLBOUND_GEOMETRY), kernel
 * launches with fixed geometry, recorded for error messages, and the time of
 * each kernel's first launch at each local size. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/core/core.h"

/* Reads "<preset>,key=value,..." (docs/portability.md): preset gpu or cpu, keys
 * local, per_cu and cu. Unknown text is refused: the caller warns, naming it
 * (a typo never silently tests the device's own geometry). */
static clb_status parse_geometry(const char *env, clb_geometry *g) {
  const char *p = env;
  while (*p) {
    size_t n = strcspn(p, ",");
    char item[64];
    if (n >= sizeof item) n = sizeof item - 1;
    memcpy(item, p, n);
    item[n] = 0;
    char *eq = strchr(item, '=');
    if (strcmp(item, "gpu") == 0 || strcmp(item, "cpu") == 0) {
      int gpu = item[0] == 'g';
      g->style = gpu ? CLB_KERNEL_STYLE_GPU : CLB_KERNEL_STYLE_CPU;
      g->local = gpu ? 256 : 64;
      g->per_cu = gpu ? 16 : 8;
    } else if (eq) {
      *eq = 0;
      char *end = NULL;
      unsigned long long v = strtoull(eq + 1, &end, 10);
      if (!end || *end || end == eq + 1 || v == 0 || v > (1u << 20)) goto bad;
      if (strcmp(item, "local") == 0) g->local = (size_t)v;
      else if (strcmp(item, "per_cu") == 0) g->per_cu = (size_t)v;
      else if (strcmp(item, "cu") == 0) g->cu = (uint32_t)v;
      else goto bad;
    } else if (n) {
      goto bad;
    }
    p += n;
    while (*p == ',') p++;
  }
  return CLB_OK;
bad:
  return CLB_ERR_INVALID_ARG;
}

clb_status clb__geometry_init(clb_context_t ctx, clb_kernel_style style) {
  clb_geometry g = {CLB_KERNEL_STYLE_AUTO, ctx->info.is_cpu ? 64 : 256, ctx->info.is_cpu ? 8 : 16, 0};
  const clb_geometry device_default = g;
  const char *env = clb__env_text(CLB_ENV_GEOMETRY);
  if (env && parse_geometry(env, &g) != CLB_OK) {
    clb__env_warn(CLB_ENV_GEOMETRY, env, "the device's geometry");
    g = device_default;
  }
  if (g.cu) ctx->info.compute_units = g.cu; /* as if the device had that many */
  if (style == CLB_KERNEL_STYLE_AUTO) style = g.style;
  if (style == CLB_KERNEL_STYLE_AUTO) style = ctx->info.is_cpu ? CLB_KERNEL_STYLE_CPU : CLB_KERNEL_STYLE_GPU;
  ctx->style = style;
  size_t local = g.local;
  if (local > ctx->info.max_work_group_size) local = ctx->info.max_work_group_size;
  size_t pow2 = 1; /* reductions use a tree over the work-group: keep it a power of two */
  while (pow2 * 2 <= local) pow2 *= 2;
  ctx->local_size = pow2;
  uint32_t cu = ctx->info.compute_units ? ctx->info.compute_units : 1;
  ctx->max_groups = (size_t)cu * g.per_cu;
  ctx->select_single = (int)clb__env_int(CLB_ENV_SELECT_SINGLE);           /* -1: auto */
  ctx->kernel_wg_limit = (size_t)clb__env_int(CLB_ENV_TEST_KERNEL_WG_LIMIT); /* 0: unset */
  return CLB_OK;
}

size_t clb__groups_for(clb_context_t ctx, int64_t n) {
  return clb__groups_local(ctx, n, ctx->local_size);
}

size_t clb__groups_local(clb_context_t ctx, int64_t n, size_t local) {
  if (n <= 0) return 1;
  if (local == 0) local = 1;
  uint64_t g = ((uint64_t)n + local - 1) / local;
  if (g > ctx->max_groups) g = ctx->max_groups;
  return g ? (size_t)g : 1;
}

/* Appends s to buf[*used..len), truncating; buf stays terminated. */
static void put_str(char *buf, size_t len, size_t *used, const char *s) {
  while (*s && *used + 1 < len) buf[(*used)++] = *s++;
  buf[*used] = 0;
}

/* Every op describes its operands on every call (for its launches' records and
 * its errors), so this is on the hot path of a step: no printf. */
const char *clb__tensor_desc(clb_tensor_t t, char *buf, size_t len) {
  if (!len) return buf;
  size_t used = 0;
  buf[0] = 0;
  put_str(buf, len, &used, "[");
  for (int d = 0; d < t->rank; d++) {
    if (d) put_str(buf, len, &used, ", ");
    if (t->dyn[d]) put_str(buf, len, &used, "<=");
    char num[24], *p = num + sizeof num;
    uint64_t v = t->bound[d] < 0 ? (uint64_t)0 - (uint64_t)t->bound[d] : (uint64_t)t->bound[d];
    *--p = 0;
    do *--p = (char)('0' + v % 10); while ((v /= 10) > 0);
    if (t->bound[d] < 0) *--p = '-';
    put_str(buf, len, &used, p);
  }
  put_str(buf, len, &used, "] ");
  put_str(buf, len, &used, clb_dtype_name(t->dtype));
  return buf;
}

uint32_t clb__launch_record(clb_context_t ctx, const char *op, const char *what) {
  uint32_t id;
  do {
    id = ctx->next_launch_id++;
  } while (id == 0 || ctx->ring_pinned[id % CLB_LAUNCH_RING]);
  clb__launch_register(ctx, id, op, what);
  return id;
}

void clb__launch_register(clb_context_t ctx, uint32_t id, const char *op, const char *what) {
  clb_launch_rec *r = &ctx->ring[id % CLB_LAUNCH_RING];
  r->id = id;
  r->op = op;
  /* the launches of one op invocation share the outputs it noted */
  r->seq = ctx->out_op && op && strcmp(ctx->out_op, op) == 0 ? ctx->op_seq : 0;
  for (int k = 0; k < CLB_LAUNCH_SEQS; k++) r->also[k] = 0;
  ctx->out_launched = 1;
  size_t used = 0;
  r->what[0] = 0;
  put_str(r->what, sizeof r->what, &used, what ? what : "");
}

void clb__launch_add_seq(clb_context_t ctx, uint32_t id, uint64_t seq) {
  clb_launch_rec *r = &ctx->ring[id % CLB_LAUNCH_RING];
  if (r->id != id || seq == 0 || seq == r->seq) return;
  for (int k = 0; k < CLB_LAUNCH_SEQS; k++) {
    if (r->also[k] == seq) return;
    if (r->also[k] == 0) {
      r->also[k] = seq;
      return;
    }
  }
}

void clb__launch_clear_seqs(clb_context_t ctx, uint32_t id) {
  clb_launch_rec *r = &ctx->ring[id % CLB_LAUNCH_RING];
  if (r->id != id) return;
  r->seq = 0;
  for (int k = 0; k < CLB_LAUNCH_SEQS; k++) r->also[k] = 0;
}

void clb__launch_pin(clb_context_t ctx, uint32_t id, int on) {
  if (id) ctx->ring_pinned[id % CLB_LAUNCH_RING] = (uint8_t)(on != 0);
}

clb_status clb__merge_flush(clb_context_t ctx) { return ctx->merge_flush ? ctx->merge_flush(ctx) : CLB_OK; }

clb_status clb__launch_host(clb_context_t ctx, const char *why, cl_mem mem) {
  if (!ctx->fresh_record) {
    clb_status st = clb__merge_flush(ctx);
    if (st != CLB_OK) return st;
  }
  return ctx->launch_hook.host ? ctx->launch_hook.host(ctx->launch_hook.user, why, mem) : CLB_OK;
}

clb_status clb__launch_set_args(clb_context_t ctx, const char *op, cl_kernel k, const clb_arg *args, int nargs,
                                int id_arg, uint32_t id) {
  for (int i = 0; i < nargs; i++) {
    cl_uint idv = id;
    cl_int e = i == id_arg ? clSetKernelArg(k, (cl_uint)i, sizeof idv, &idv)
                           : clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].value);
    if (e != CL_SUCCESS) return clb__cl_error(ctx, e, "%s: setting kernel argument %d", op, i);
  }
  return CLB_OK;
}

clb_status clb__launch_enqueue(clb_context_t ctx, const char *op, const char *what, cl_kernel k, size_t groups,
                               size_t local) {
  size_t global = groups * local;
  clb_status fs = clb__merge_flush(ctx);
  if (fs != CLB_OK) return fs;
  if (ctx->kernel_wg_limit && local > ctx->kernel_wg_limit) /* what a driver with that limit answers */
    return clb__cl_error(ctx, CL_INVALID_WORK_GROUP_SIZE,
                         "%s %s: launching %zu work-groups of %zu (CLBOUND_TEST_KERNEL_WG_LIMIT=%zu)", op,
                         what ? what : "", groups, local, ctx->kernel_wg_limit);
  cl_event first = NULL, *ev = clb__first_launch_slot(ctx, k, local, &first);
  const int is_first = ev != NULL;
  if (!ctx->time_first_launches) ev = NULL; /* counted, not timed: no event at all */
  cl_int e = clEnqueueNDRangeKernel(ctx->queue, k, 1, NULL, &global, &local, 0, NULL, ev);
  if (e != CL_SUCCESS)
    return clb__cl_error(ctx, e, "%s %s: launching %zu work-groups of %zu", op, what ? what : "", groups, local);
  if (is_first) {
    clb__first_launch_watch(ctx, first);
    clb__wg_note(local, global);
  }
  ctx->counters.kernel_launches++;
  return CLB_OK;
}

/* ---- Work-group shapes for the store helper --------------------------------
 * PoCL compiles a work-group function per kernel and shape at the first launch
 * (local size, global offset 0, and "smallgrid" where the grid is at most
 * USHRT_MAX wide: its CPU devices' grid_width_specialization_limit), and stores
 * only a generic one in a program binary unless POCL_BINARY_SPECIALIZE_WG lists
 * shapes. A process whose store helper builds the program again (optimized,
 * CLBOUND_COLD_BUILD=fast) hands it the shapes it launched, so that the next
 * process, loading that binary, compiles none. */
#define WG_SEEN_MAX 16
static struct {
  size_t local;
  int small;
} wg_seen[WG_SEEN_MAX];
static int wg_n;
static pthread_mutex_t wg_lock = PTHREAD_MUTEX_INITIALIZER;

void clb__wg_note(size_t local, size_t global) {
  int small = global <= 65535; /* USHRT_MAX */
  pthread_mutex_lock(&wg_lock);
  int i = 0;
  while (i < wg_n && !(wg_seen[i].local == local && wg_seen[i].small == small)) i++;
  if (i == wg_n && wg_n < WG_SEEN_MAX) {
    wg_seen[wg_n].local = local;
    wg_seen[wg_n].small = small;
    wg_n++;
  }
  pthread_mutex_unlock(&wg_lock);
}

int clb__wg_specializations(char *buf, size_t cap) {
  if (cap) buf[0] = 0;
  size_t len = 0;
  int n = 0;
  pthread_mutex_lock(&wg_lock);
  for (int i = 0; i < wg_n; i++) {
    char one[64];
    int w = snprintf(one, sizeof one, "%s%zu-1-1-goffs0%s", n ? "," : "", wg_seen[i].local,
                     wg_seen[i].small ? "-smallgrid" : "");
    if (w < 0 || len + (size_t)w + 1 > cap) break;
    memcpy(buf + len, one, (size_t)w + 1);
    len += (size_t)w;
    n++;
  }
  pthread_mutex_unlock(&wg_lock);
  return n;
}

/* ---- First launches ------------------------------------------------------------
 * A driver may compile a kernel for its local size at the first launch (PoCL
 * does: about 0.1 s a kernel), which no build counter sees. The first launch of
 * each (kernel, local size) pair in a context gets an event; callbacks take the
 * time it became ready (CL_SUBMITTED: the in-order queue's earlier commands are
 * done) and the time it completed, and add the difference to a timer. The
 * timer is shared by the context and the callbacks still to come and freed by
 * the last of them, so a context freed before a callback runs is never touched
 * by it. Nothing waits: the figure grows as the first launches complete. */

struct clb__first_seen {
  cl_kernel k;
  size_t local;
};

struct clb__first_timer {
  int refs;     /* the context's, plus one per watched event: __atomic */
  uint64_t ns;  /* summed: __atomic */
};

typedef struct first_watch {
  struct clb__first_timer *t;
  uint64_t ready_ns; /* __atomic: 0 until CL_SUBMITTED */
} first_watch;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double clb__now_ms(void) { return (double)now_ns() * 1e-6; }

static void timer_unref(struct clb__first_timer *t) {
  if (t && __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) == 0) free(t);
}

static size_t seen_slot(const struct clb__first_seen *set, size_t cap, cl_kernel k, size_t local) {
  uint64_t h = ((uint64_t)(uintptr_t)k >> 4) * 0x9e3779b97f4a7c15ull ^ (uint64_t)local;
  size_t i = (size_t)(h ^ (h >> 29)) & (cap - 1);
  while (set[i].k && (set[i].k != k || set[i].local != local)) i = (i + 1) & (cap - 1);
  return i;
}

cl_event *clb__first_launch_slot(clb_context_t ctx, cl_kernel k, size_t local, cl_event *slot) {
  if (ctx->cap_first_seen) {
    size_t i = seen_slot(ctx->first_seen, ctx->cap_first_seen, k, local);
    if (ctx->first_seen[i].k) return NULL; /* launched before */
  }
  if (2 * (ctx->n_first_seen + 1) > ctx->cap_first_seen) { /* grow to keep the set at most half full */
    size_t cap = ctx->cap_first_seen ? 2 * ctx->cap_first_seen : 64;
    struct clb__first_seen *set = calloc(cap, sizeof *set);
    if (!set) return NULL; /* not timed: the launch itself goes on */
    for (size_t i = 0; i < ctx->cap_first_seen; i++)
      if (ctx->first_seen[i].k) set[seen_slot(set, cap, ctx->first_seen[i].k, ctx->first_seen[i].local)] = ctx->first_seen[i];
    free(ctx->first_seen);
    ctx->first_seen = set;
    ctx->cap_first_seen = cap;
  }
  if (!ctx->first_timer) {
    if (!(ctx->first_timer = calloc(1, sizeof *ctx->first_timer))) return NULL;
    ctx->first_timer->refs = 1;
  }
  struct clb__first_seen *e = &ctx->first_seen[seen_slot(ctx->first_seen, ctx->cap_first_seen, k, local)];
  e->k = k;
  e->local = local;
  ctx->n_first_seen++;
  return slot;
}

static void CL_CALLBACK on_ready(cl_event ev, cl_int status, void *p) {
  (void)ev, (void)status;
  __atomic_store_n(&((first_watch *)p)->ready_ns, now_ns(), __ATOMIC_RELEASE);
}

static void CL_CALLBACK on_done(cl_event ev, cl_int status, void *p) {
  (void)ev, (void)status;
  first_watch *w = p;
  uint64_t ready = __atomic_load_n(&w->ready_ns, __ATOMIC_ACQUIRE), done = now_ns();
  if (ready && done > ready) __atomic_add_fetch(&w->t->ns, done - ready, __ATOMIC_RELAXED);
  timer_unref(w->t);
  free(w);
}

void clb__first_launch_watch(clb_context_t ctx, cl_event ev) {
  ctx->counters.first_launches++;
  if (!ev) return; /* not timed (CLBOUND_FIRST_LAUNCH_TIMING) */
  first_watch *w = calloc(1, sizeof *w);
  if (w) {
    w->t = ctx->first_timer;
    __atomic_add_fetch(&w->t->refs, 1, __ATOMIC_ACQ_REL);
    /* A callback for a state already reached runs at once, in this thread. A
     * driver that calls back only on CL_COMPLETE (OpenCL 1.x) is timed from
     * the enqueue. */
    if (clSetEventCallback(ev, CL_SUBMITTED, on_ready, w) != CL_SUCCESS) w->ready_ns = now_ns();
    if (clSetEventCallback(ev, CL_COMPLETE, on_done, w) != CL_SUCCESS)
      timer_unref(w->t); /* not timed; w stays (a few bytes): on_ready may still store into it */
  }
  clReleaseEvent(ev);
}

double clb__first_launch_ms(clb_context_t ctx) {
  return ctx->first_timer ? (double)__atomic_load_n(&ctx->first_timer->ns, __ATOMIC_RELAXED) / 1e6 : 0.0;
}

int clb__first_launches_pending(clb_context_t ctx) {
  return ctx->first_timer ? __atomic_load_n(&ctx->first_timer->refs, __ATOMIC_ACQUIRE) - 1 : 0;
}

void clb__first_launch_free(clb_context_t ctx) {
  free(ctx->first_seen);
  ctx->first_seen = NULL;
  ctx->n_first_seen = ctx->cap_first_seen = 0;
  timer_unref(ctx->first_timer);
  ctx->first_timer = NULL;
}

clb_status clb__launch(clb_context_t ctx, const char *op, const char *what, cl_kernel k,
                       const clb_arg *args, int nargs, int id_arg, size_t groups,
                       size_t local) {
  if (ctx->collect) { /* walking a plan to collect its kernels: the shape this launch will
                        * have, for the store helper (a plan warmed without a step) */
    clb__wg_note(local, groups * local);
    return CLB_OK;
  }
  if (ctx->launch_hook.launch) /* a graph step being recorded or replayed */
    return ctx->launch_hook.launch(ctx->launch_hook.user, op, what, k, args, nargs, id_arg, groups, local);
  uint32_t id = clb__launch_record(ctx, op, what);
  clb_status st = clb__launch_set_args(ctx, op, k, args, nargs, id_arg, id);
  return st == CLB_OK ? clb__launch_enqueue(ctx, op, what, k, groups, local) : st;
}
