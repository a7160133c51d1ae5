/* memory.c: the memory plan of a graph's plans (docs/graph.md, "Memory plan").
 *
 * The first step of each plan records, through the context's memory hook,
 * every data buffer its tensors take (each an exact-size buffer from the pool,
 * freed as soon as its tensor is, so the recording step holds only what is
 * live): its bytes at the
 * plan's bounds and the events (creations and releases, in step order) that
 * bound its life. alloc/planner.c turns the record into offsets in one arena
 * (a few if one would exceed the device's largest allocation). Every later step
 * of the plan gets its tensors as regions of the arena: the arena's cl_mem and
 * the tensor's byte offset in it, which every kernel and transfer honours
 * (kernels/common.cl, CLB_DATA). No sub-buffers: drivers differ in how they
 * treat them (the first NVIDIA run crashed inside clReleaseMemObject of one),
 * and one buffer plus offsets is what CUDA-style allocators do. The step's
 * tensors are released at the start of the next run, so each step creates the
 * same buffers in the same order. The arena's device buffer is shared by the
 * graph's plans and grows to the largest one: one allocation per growth.
 * Parameters, momentum, shape records and op scratch stay in the pool. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/planner.h"
#include "runtime/graph/graph.h"

enum { STEP_POOL, STEP_RECORD, STEP_ARENA };

/* The alignment of tensors' offsets in an arena, in bytes: the size of the
 * largest OpenCL built-in type (long16, double16), so every pointer a kernel
 * forms into a tensor, vector types included, is naturally aligned; a multiple
 * of the 64-byte cache line of CPUs and of the 128-byte line of NVIDIA GPUs, so
 * a tensor's first row starts on one; and of every element size, so CLBlast's
 * offsets (in elements) are exact. CLBOUND_MEM_BASE_ALIGN_BITS raises it. */
#define CLB_ARENA_ALIGN 128

typedef struct plan_mem {
  int laid_out;
  /* the plan's key when it was laid out: a walk lays out a new plan before
   * clb_graph_run records it (run.c), so the next step finds it by key */
  size_t input_plan;
  slot_val vals[CLB_GRAPH_MAX_SLOTS];
  size_t n;
  clb_plan_buf *bufs;
  clb_plan_result res;
  uint64_t pool_peak;
} plan_mem;

/* A shape record kept by the graph for its arena steps: the step's i-th new
 * tensor gets the i-th one, the same cl_mem every step, unless a tensor of an
 * earlier step still holds it (held: cleared by the pool when that tensor
 * puts it back). Allocated one by one, so `held` never moves. */
typedef struct shape_rec {
  clb_buf buf;
  int held;
  /* ok: the record holds a valid record of a tensor laid out as below (written
   * for the tensor that last held it, and kept within its bounds since) */
  int ok, rank;
  int64_t bound[CLB_MAX_RANK];
  uint8_t dyn[CLB_MAX_RANK];
} shape_rec;

/* Whether r holds a valid record for a tensor laid out as t. */
static int same_layout(const shape_rec *r, const struct clb_tensor *t) {
  if (!r->ok || r->rank != t->rank) return 0;
  for (int d = 0; d < t->rank; d++)
    if (r->bound[d] != t->bound[d] || r->dyn[d] != t->dyn[d]) return 0;
  return 1;
}

struct clb__graph_mem {
  int enabled;
  uint64_t align; /* bytes */
  plan_mem *plans;
  size_t cap_plans;
  clb_buf arena[CLB_PLAN_MAX_ARENAS]; /* shared by the plans, as large as the largest */
  /* the step */
  size_t input_plan;
  int mode, pending;
  int64_t clock;
  size_t seq;
  plan_mem *cur;
  clb_plan_buf *rec; /* recording: one per buffer taken, in order */
  cl_mem *rec_mem;
  size_t nrec, cap_rec;
  uint8_t *live; /* arena steps: 1 for each planned buffer while its tensor lives */
  size_t cap_live;
  uint64_t fallbacks; /* buffers a step asked for that its plan did not have (served by the pool) */
  shape_rec **shapes; /* arena steps' shape records, in the order the step takes them */
  size_t nshapes, cap_shapes, shape_seq;
};


clb_status clb__graph_mem_new(clb_graph_t g, int enabled) {
  g->mem = calloc(1, sizeof *g->mem);
  if (!g->mem) return clb__set_error(g->ctx, CLB_ERR_HOST_OOM, "clb_graph_new: out of host memory");
  if (!clb__env_int(CLB_ENV_MEMORY_PLAN)) enabled = 0;
  g->mem->enabled = enabled;
  /* tensors are offsets into one buffer, not sub-buffers, so the device's
   * CL_DEVICE_MEM_BASE_ADDR_ALIGN does not apply; CLB_ARENA_ALIGN keeps every
   * type's natural alignment (docs/graph.md, "Memory plan") */
  uint64_t align = CLB_ARENA_ALIGN;
  uint64_t forced = (uint64_t)clb__env_int(CLB_ENV_MEM_BASE_ALIGN_BITS) / 8; /* 0: unset */
  if (forced > align) align = forced;
  g->mem->align = align;
  return CLB_OK;
}

void clb__graph_mem_free(clb_graph_t g) {
  struct clb__graph_mem *m = g->mem;
  if (!m) return;
  g->ctx->mem_hook = (clb_mem_hook){0};
  for (int a = 0; a < CLB_PLAN_MAX_ARENAS; a++) clb__pool_release(g->ctx->pool, &m->arena[a]);
  for (size_t p = 0; p < m->cap_plans; p++) free(m->plans[p].bufs);
  for (size_t i = 0; i < m->nshapes; i++) {
    clb__pool_release(g->ctx->pool, &m->shapes[i]->buf);
    /* a tensor that outlives its graph still holds a reference and will clear
     * `held` when it is freed: that record stays allocated */
    if (!m->shapes[i]->held) free(m->shapes[i]);
  }
  free(m->shapes);
  free(m->plans);
  free(m->rec);
  free(m->rec_mem);
  free(m->live);
  free(m);
  g->mem = NULL;
}

int clb__graph_mem_enabled(clb_graph_t g) { return g->mem && g->mem->enabled; }

/* ---- the hook --------------------------------------------------------------------- */

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 1;
  size_t ncap = *cap ? *cap * 2 : 64;
  while (ncap < need) ncap *= 2;
  void *np = realloc(*p, ncap * elem);
  if (!np) return 0;
  *p = np;
  *cap = ncap;
  return 1;
}

static clb_status hook_get(void *user, size_t bytes, clb_buf *out, char *err, size_t errlen) {
  clb_graph_t g = user;
  struct clb__graph_mem *m = g->mem;
  uint64_t want = bytes ? bytes : 1;
  if (m->mode == STEP_RECORD) {
    size_t cap = m->cap_rec;
    if (!grow((void **)&m->rec, &cap, m->nrec + 1, sizeof *m->rec) ||
        !grow((void **)&m->rec_mem, &m->cap_rec, m->nrec + 1, sizeof *m->rec_mem)) {
      snprintf(err, errlen, "graph %s: out of host memory recording the plan's buffers", g->name);
      return CLB_ERR_HOST_OOM;
    }
    /* an exact buffer, released when its tensor is: the recording step holds
     * what it has live, no more (the pool would keep size-classed leftovers) */
    clb_status st = clb__pool_get_exact(g->ctx->pool, bytes, out, err, errlen);
    if (st != CLB_OK) return st;
    m->rec[m->nrec] = (clb_plan_buf){want, m->clock++, INT64_MAX, -1, 0, 0, 0};
    m->rec_mem[m->nrec++] = out->mem;
    return CLB_OK;
  }
  if (m->mode != STEP_ARENA) return CLB_OK; /* the pool serves it */
  plan_mem *pm = m->cur;
  size_t i = m->seq;
  int ok = i < pm->n && want <= pm->bufs[i].bytes;
  /* never hand out bytes that a tensor still alive holds: if the step ever
   * departs from the recorded one, the rest of it runs on the pool */
  for (size_t k = 0; ok && k < pm->n; k++) {
    if (!m->live[k]) continue;
    const clb_plan_buf *a = &pm->bufs[k], *b = &pm->bufs[i];
    if (a->arena == b->arena && a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes) ok = 0;
  }
  if (!ok) {
    m->fallbacks++;
    m->mode = STEP_POOL;
    return CLB_OK;
  }
  const clb_buf *arena = &m->arena[pm->bufs[i].arena];
  cl_int e = clRetainMemObject(arena->mem); /* the tensor's reference, released when it puts the buffer */
  if (e != CL_SUCCESS) {
    snprintf(err, errlen, "graph %s: clRetainMemObject of arena %d failed (%s)", g->name, pm->bufs[i].arena,
             clb__cl_error_name(e));
    return CLB_ERR_CL;
  }
  *out = (clb_buf){.mem = arena->mem,
                   .offset = (cl_ulong)pm->bufs[i].offset,
                   .bytes = bytes,
                   .capacity = (size_t)pm->bufs[i].bytes,
                   .borrowed = 1,
                   .host = arena->host};
  m->live[i] = 1;
  m->seq++;
  m->clock++;
  return CLB_OK;
}

/* Arena steps: the step's next shape record from the graph's list. */
static clb_status hook_get_shape(void *user, size_t bytes, const struct clb_tensor *of, int *valid, clb_buf *out, char *err,
                                 size_t errlen) {
  clb_graph_t g = user;
  struct clb__graph_mem *m = g->mem;
  if (m->mode != STEP_ARENA) return CLB_OK; /* the pool serves it */
  size_t i = m->shape_seq++;
  if (i == m->nshapes) {
    shape_rec *r = calloc(1, sizeof *r);
    if (!r || !grow((void **)&m->shapes, &m->cap_shapes, m->nshapes + 1, sizeof *m->shapes)) {
      free(r);
      snprintf(err, errlen, "graph %s: out of host memory", g->name);
      return CLB_ERR_HOST_OOM;
    }
    clb_status st = clb__pool_get_exact(g->ctx->pool, bytes, &r->buf, err, errlen);
    if (st != CLB_OK) {
      free(r);
      return st;
    }
    /* host BLAS's native kernels read records without maps where the device
     * allows it: learnt once, kept with the record */
    if (clb_context_gemm_strategy(g->ctx) == CLB_GEMM_HOST_BLAS) clb__buf_host_map_learn(g->ctx, &r->buf);
    m->shapes[m->nshapes++] = r;
  }
  shape_rec *r = m->shapes[i];
  if (r->held || r->buf.capacity < bytes) return CLB_OK; /* still held: the pool serves it */
  clRetainMemObject(r->buf.mem);
  r->held = 1;
  /* the same tensor of the plan's last step held it: no initial write; else
   * the layout is noted, and `ok` set once its record is written */
  *valid = of && same_layout(r, of);
  if (!*valid) {
    r->ok = 0;
    if (of) {
      r->rank = of->rank;
      memcpy(r->bound, of->bound, sizeof r->bound);
      memcpy(r->dyn, of->dyn, sizeof r->dyn);
    }
  }
  *out = (clb_buf){.mem = r->buf.mem,
                   .bytes = bytes,
                   .capacity = r->buf.capacity,
                   .borrowed = 1,
                   .held = &r->held,
                   .rec_ok = of ? &r->ok : NULL,
                   .host = r->buf.host};
  return CLB_OK;
}

int clb__graph_mem_step_shape(clb_graph_t g, cl_mem mem) {
  struct clb__graph_mem *m = g->mem;
  if (!m || !mem) return 0;
  for (size_t i = 0; i < m->shape_seq && i < m->nshapes; i++)
    if (m->shapes[i]->buf.mem == mem) return m->shapes[i]->held;
  return 0;
}

int clb__graph_mem_arena_step(clb_graph_t g) { return g->mem && g->mem->enabled && g->mem->mode == STEP_ARENA; }

static void hook_put(void *user, const clb_buf *b) {
  clb_graph_t g = user;
  struct clb__graph_mem *m = g->mem;
  if (m->mode == STEP_RECORD) {
    for (size_t k = m->nrec; k-- > 0;)
      if (m->rec_mem[k] == b->mem && m->rec[k].last == INT64_MAX) {
        m->rec[k].last = m->clock++;
        return;
      }
    return;
  }
  if (!b->borrowed || !m->cur) return;
  /* the live region at b's place: two live regions never overlap (hook_get) */
  for (size_t k = 0; k < m->cur->n; k++) {
    const clb_plan_buf *pb = &m->cur->bufs[k];
    if (m->live[k] && m->arena[pb->arena].mem == b->mem && (cl_ulong)pb->offset == b->offset) {
      m->live[k] = 0;
      m->clock++;
      return;
    }
  }
}

/* ---- the step ---------------------------------------------------------------------- */

static int compiled_in(clb_graph_t g, const gnode *n) {
  return (n->kind == GN_NONZERO || n->kind == GN_MASKED_SELECT) &&
         (g->policy_kind == CLB_POLICY_STATIC || g->policy_kind == CLB_POLICY_BUCKETED);
}

/* The plan of this run's sizes, once every compiled-in count is known; -1 for a
 * plan not seen before. */
static int64_t find_plan(clb_graph_t g) {
  for (size_t p = 0; p < g->nplans; p++) {
    if (g->plans[p].input_plan != g->mem->input_plan) continue;
    int same = 1;
    for (int s = 0; same && s < g->nslots; s++)
      same = g->plans[p].vals[s].value == g->cur[s].value && g->plans[p].vals[s].kind == g->cur[s].kind;
    if (same) return (int64_t)p;
  }
  return -1;
}

/* Makes the shared arenas at least as large as plan p's. */
static clb_status fit_arenas(clb_graph_t g, size_t p) {
  struct clb__graph_mem *m = g->mem;
  plan_mem *pm = &m->plans[p];
  for (int a = 0; a < pm->res.narenas; a++) {
    if (m->arena[a].mem && m->arena[a].capacity >= pm->res.arena_bytes[a]) continue;
    /* a tensor still holding a region of the old arena keeps its own reference */
    clb__pool_release(g->ctx->pool, &m->arena[a]);
    clb__pool_trim(g->ctx->pool); /* the recording step's buffers, now idle */
    char err[256];
    clb_status st = clb__pool_get_exact(g->ctx->pool, (size_t)pm->res.arena_bytes[a], &m->arena[a], err, sizeof err);
    if (st != CLB_OK)
      return clb__set_error(g->ctx, st, "graph %s: plan %zu: arena %d of %llu bytes (%llu bytes live at most): %s", g->name, p, a,
                            (unsigned long long)pm->res.arena_bytes[a], (unsigned long long)pm->res.lower_bound, err);
    g->ctx->counters.arena_allocations++;
    /* host BLAS's native kernels use the tensors' memory without maps where
     * the device allows it: the arena's pointer plus each tensor's offset */
    if (clb_context_gemm_strategy(g->ctx) == CLB_GEMM_HOST_BLAS) clb__buf_host_map_learn(g->ctx, &m->arena[a]);
  }
  if (!grow((void **)&m->live, &m->cap_live, pm->n + 1, sizeof *m->live))
    return clb__set_error(g->ctx, CLB_ERR_HOST_OOM, "graph %s: out of host memory", g->name);
  memset(m->live, 0, (pm->n + 1) * sizeof *m->live);
  return CLB_OK;
}

/* 1 when plan slot p was laid out for this step's key. */
static int key_matches(clb_graph_t g, size_t p) {
  struct clb__graph_mem *m = g->mem;
  return p < m->cap_plans && m->plans[p].laid_out && m->plans[p].input_plan == m->input_plan &&
         memcmp(m->plans[p].vals, g->cur, sizeof g->cur) == 0;
}

static clb_status select_plan(clb_graph_t g) {
  struct clb__graph_mem *m = g->mem;
  int64_t p = find_plan(g);
  /* a new plan laid out by the walk that built its program takes the next index */
  if (p < 0 && key_matches(g, g->nplans)) p = (int64_t)g->nplans;
  m->clock = 0;
  m->seq = 0;
  m->shape_seq = 0;
  m->nrec = 0;
  m->cur = NULL;
  if (p >= 0 && (size_t)p < m->cap_plans && m->plans[p].laid_out) {
    clb_status st = fit_arenas(g, (size_t)p);
    if (st != CLB_OK) {
      m->mode = STEP_POOL;
      return st;
    }
    m->cur = &m->plans[p];
    m->mode = STEP_ARENA;
  } else {
    m->mode = STEP_RECORD;
  }
  return CLB_OK;
}

clb_status clb__graph_mem_begin(clb_graph_t g, size_t input_plan) {
  struct clb__graph_mem *m = g->mem;
  if (!m || !m->enabled) return CLB_OK;
  /* the last step's tensors: valid until this run, now released so that this
   * step creates its buffers in the recorded order */
  for (int i = 0; i < g->nnodes; i++) clb__graph_release_tensors(&g->nodes[i]);
  m->input_plan = input_plan;
  m->mode = STEP_POOL;
  m->pending = 0;
  int last = g->loss >= 0 ? g->loss : g->nnodes - 1;
  for (int i = 0; i <= last; i++)
    if (compiled_in(g, &g->nodes[i])) m->pending++;
  g->ctx->mem_hook = (clb_mem_hook){hook_get, hook_get_shape, hook_put, g};
  if (m->pending == 0) {
    clb_status st = select_plan(g);
    if (st != CLB_OK) g->ctx->mem_hook = (clb_mem_hook){0};
    return st;
  }
  return CLB_OK;
}

clb_status clb__graph_mem_resolved(clb_graph_t g) {
  struct clb__graph_mem *m = g->mem;
  if (!m || !m->enabled || m->pending <= 0) return CLB_OK;
  if (--m->pending == 0) return select_plan(g);
  return CLB_OK;
}

void clb__graph_mem_end(clb_graph_t g, clb_status st) { clb__graph_mem_end_as(g, st, g->current_plan); }

void clb__graph_mem_end_as(clb_graph_t g, clb_status st, int64_t plan) {
  struct clb__graph_mem *m = g->mem;
  if (!m || !m->enabled) return;
  g->ctx->mem_hook = (clb_mem_hook){0};
  int mode = m->mode;
  m->mode = STEP_POOL;
  if (mode == STEP_ARENA && m->seq != m->cur->n) m->fallbacks++;
  if (mode != STEP_RECORD || st != CLB_OK || plan < 0) return;
  size_t p = (size_t)plan, old = m->cap_plans;
  if (!grow((void **)&m->plans, &m->cap_plans, p + 1, sizeof *m->plans)) return;
  if (m->cap_plans > old) memset(m->plans + old, 0, (m->cap_plans - old) * sizeof *m->plans);
  plan_mem *pm = &m->plans[p];
  if (pm->laid_out && key_matches(g, p)) return;
  if (pm->laid_out) { /* laid out by a walk whose run never recorded the plan */
    free(pm->bufs);
    memset(pm, 0, sizeof *pm);
  }
  clb_plan_buf *bufs = malloc((m->nrec + 1) * sizeof *bufs);
  if (!bufs) return;
  memcpy(bufs, m->rec, m->nrec * sizeof *bufs);
  char err[256];
  uint64_t max_arena = g->ctx->info.max_alloc_bytes;
  clb_status ps = clb__plan_memory(bufs, m->nrec, m->align, max_arena, &pm->res, err, sizeof err);
  if (ps != CLB_OK) { /* the plan stays on the pool */
    clb__log(g->ctx, CLB_LOG_RECOMPILES, "graph %s: plan %zu keeps the pool: %s", g->name, p, err);
    free(bufs);
    return;
  }
  pm->bufs = bufs;
  pm->n = m->nrec;
  pm->pool_peak = clb__plan_pool_peak(bufs, m->nrec);
  pm->laid_out = 1;
  pm->input_plan = m->input_plan;
  memcpy(pm->vals, g->cur, sizeof g->cur);
  g->ctx->counters.arena_bytes += pm->res.total_bytes;
  g->ctx->counters.live_lower_bound_bytes += pm->res.lower_bound;
  g->ctx->counters.pool_peak_bytes += pm->pool_peak;
  if (pm->res.total_bytes > g->ctx->counters.arena_max_bytes) g->ctx->counters.arena_max_bytes = pm->res.total_bytes;
}

/* Training: node i's output is read by no backward op after node i's own. */
void clb__graph_mem_backward_done(clb_graph_t g, int i) {
  if (!clb__graph_mem_enabled(g)) return;
  gnode *n = &g->nodes[i];
  if (n->keep || i == g->loss || n->kind == GN_PARAM || n->kind == GN_SCALAR) return;
  clb_tensor_free(n->t);
  clb_tensor_free(n->raw);
  n->t = n->raw = NULL;
  n->have_key = 0;
}

/* ---- reporting ------------------------------------------------------------------------ */

void clb__graph_mem_fill_stats(clb_graph_t g, clb_graph_stats *s) {
  struct clb__graph_mem *m = g->mem;
  if (!m) return;
  s->memory_plan = (uint64_t)m->enabled;
  s->arena_align_bytes = m->align;
  s->arena_fallbacks = m->fallbacks;
  for (int a = 0; a < CLB_PLAN_MAX_ARENAS; a++) s->arena_held_bytes += m->arena[a].capacity;
  for (size_t p = 0; p < g->nplans && p < m->cap_plans; p++) {
    plan_mem *pm = &m->plans[p];
    if (!pm->laid_out) continue;
    s->arena_bytes_all_plans += pm->res.total_bytes;
    if ((int64_t)p == g->current_plan) {
      s->arena_buffers = pm->n;
      s->arena_bytes = pm->res.total_bytes;
      s->live_lower_bound_bytes = pm->res.lower_bound;
      s->pool_peak_bytes = pm->pool_peak;
    }
  }
}

int clb__graph_mem_map_line(clb_graph_t g, size_t i, char *line, size_t cap) {
  struct clb__graph_mem *m = g->mem;
  if (!m || g->current_plan < 0 || (size_t)g->current_plan >= m->cap_plans) return 0;
  plan_mem *pm = &m->plans[g->current_plan];
  if (!pm->laid_out) return 0;
  if (i == 0) {
    snprintf(line, cap,
             "memory plan %lld: %zu buffers in %d arena(s) of %llu bytes; lower bound %llu (%.3fx; %llu live unaligned); pool %llu; "
             "align %llu\n",
             (long long)g->current_plan, pm->n, pm->res.narenas, (unsigned long long)pm->res.total_bytes,
             (unsigned long long)pm->res.lower_bound,
             pm->res.lower_bound ? (double)pm->res.total_bytes / (double)pm->res.lower_bound : 1.0,
             (unsigned long long)pm->res.live_bytes, (unsigned long long)pm->pool_peak, (unsigned long long)m->align);
    return 1;
  }
  if (i > pm->n) return 0;
  const clb_plan_buf *b = &pm->bufs[i - 1];
  char end[24];
  if (b->last == INT64_MAX) snprintf(end, sizeof end, "end");
  else snprintf(end, sizeof end, "%lld", (long long)b->last);
  snprintf(line, cap, "  buf %zu: arena %d offset %llu size %llu live [%lld, %s]\n", i - 1, b->arena, (unsigned long long)b->offset,
           (unsigned long long)b->bytes, (long long)b->first, end);
  return 1;
}
