/* select.c: the three launches (count, finish, write) shared by nonzero,
 * masked_select and masked_scatter, in either kernel family. */
#include <stdio.h>
#include <string.h>

#include "runtime/ops/select.h"

static const char *const kind_macros[] = {"SEL_NONZERO", "SEL_SELECT", "SEL_SCATTER"};

/* The unsigned OpenCL type of dt's size: values are only moved or compared
 * with zero (floats through a mask that drops the sign bit). */
static const char *sel_type(clb_dtype dt) {
  switch (clb_dtype_size(dt)) {
  case 8: return "ulong";
  case 4: return "uint";
  default: return "uchar";
  }
}

/* The bits of a value that make it nonzero: all but a float's sign, so -0.0
 * counts as zero and NaN as nonzero, as in PyTorch. */
static cl_ulong sel_fmask(clb_dtype dt) {
  if (dt == CLB_DTYPE_F32) return 0x7fffffffu;
  if (dt == CLB_DTYPE_F64) return 0x7fffffffffffffffull;
  return ~(cl_ulong)0;
}

/* Work-groups and their size: from the bound, the device and (GPU style) the
 * size the kernels were built for, *local on entry. The CPU style's one launch
 * takes fewer chunks, since each counts the flags before it. */
static void sel_geometry(clb_context_t ctx, int64_t bound_numel, int one, size_t *groups, size_t *local) {
  if (ctx->style == CLB_KERNEL_STYLE_CPU) {
    uint64_t cu = ctx->info.compute_units ? ctx->info.compute_units : 1;
    uint64_t most = cu * (one ? CLB_SEL_SINGLE_CPU_CHUNKS_PER_CU : CLB_SEL_CPU_CHUNKS_PER_CU);
    uint64_t g = bound_numel > 0 ? ((uint64_t)bound_numel + CLB_SEL_CPU_CHUNK_MIN - 1) / CLB_SEL_CPU_CHUNK_MIN : 1;
    *groups = (size_t)(g < most ? g : most);
    *local = 1;
  } else {
    *groups = clb__groups_local(ctx, bound_numel, *local);
  }
}

/* Whether one launch (sel_single) of `groups` groups serves the plan: each
 * group counts the flags before its chunk, so the mask's flags (a row mask has
 * one per row) times the groups bounds the extra reads (docs/dataops.md, the
 * crossover). */
static int sel_one_launch(clb_context_t ctx, const clb_sel_plan *p, size_t groups) {
  if (ctx->select_single >= 0) return ctx->select_single;
  int64_t flags = clb_tensor_bound_numel(p->mask);
  return flags <= CLB_SEL_SINGLE_MAX_FLAGS && (uint64_t)flags * groups <= CLB_SEL_SINGLE_MAX_READS;
}

/* The one-pass select's elements per work-item and tile: CLB_SEL_LB_ITEMS, or
 * the test switch's (CLBOUND_TEST_SELECT_LOOKBACK=items=N). */
static int lb_items(clb_context_t ctx) { return ctx->select_lb_items ? ctx->select_lb_items : CLB_SEL_LB_ITEMS; }

/* Whether the plan runs in one pass with decoupled look-back: GPU style with
 * 64-bit atomics, and CLBOUND_SELECT_LOOKBACK=on, or by default where the device
 * has forward progress across work-groups, CLBOUND_SELECT_SINGLE forces no
 * other path and the bound is over one tile (docs/dataops.md, which devices
 * get which path). Within one tile sel_single is the same one launch without
 * the look-back state; NVIDIA's compiler took 2.3-3.1 s for each sel_lookback
 * program and 0.1-0.4 s for the other kernels (docs/benchmarks.md), and a graph
 * whose plans compile sizes in builds its selects once per plan. */
static int sel_lookback(clb_context_t ctx, const clb_sel_plan *p) {
  if (ctx->style == CLB_KERNEL_STYLE_CPU || !ctx->info.has_int64_atomics || p->bound_numel >= CLB_SEL_LB_MAX_NUMEL)
    return 0;
  if (ctx->select_lookback >= 0) return ctx->select_lookback;
  return ctx->select_single < 0 && ctx->traits.forward_progress &&
         p->bound_numel > (int64_t)ctx->local_size * lb_items(ctx);
}

/* The context's look-back state buffer for `tiles` tiles: the one in use if it
 * is large enough, else a new zeroed one at least twice its size (the old one
 * stays until the context is freed: a recorded step may still launch with it). */
static clb_status sel_lb_state(clb_context_t ctx, const clb_sel_plan *p, int64_t tiles, cl_mem *out) {
  if (ctx->n_sel_lb > 0 && ctx->sel_lb_tiles >= tiles) {
    *out = ctx->sel_lb[ctx->n_sel_lb - 1];
    return CLB_OK;
  }
  if (ctx->n_sel_lb == CLB_SEL_LB_BUFFERS)
    return clb__set_error(ctx, CLB_ERR_INTERNAL, "%s %s: look-back state: %d buffers made already", p->op, p->what,
                          CLB_SEL_LB_BUFFERS);
  int64_t cap = ctx->n_sel_lb > 0 && 2 * ctx->sel_lb_tiles > tiles ? 2 * ctx->sel_lb_tiles : tiles;
  size_t bytes = (size_t)(cap + CLB_SEL_LB_HDR) * sizeof(cl_ulong);
  cl_int e;
  cl_mem m = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, bytes, NULL, &e);
  if (e != CL_SUCCESS)
    return clb__cl_error(ctx, e, "%s %s: look-back state of %zu bytes (%lld tiles)", p->op, p->what, bytes,
                         (long long)cap);
  cl_ulong zero = 0;
  e = clEnqueueFillBuffer(ctx->queue, m, &zero, sizeof zero, 0, bytes, 0, NULL, NULL);
  if (e != CL_SUCCESS) {
    clReleaseMemObject(m);
    return clb__cl_error(ctx, e, "%s %s: zeroing the look-back state (%zu bytes)", p->op, p->what, bytes);
  }
  ctx->sel_lb[ctx->n_sel_lb++] = m;
  ctx->sel_lb_tiles = cap;
  *out = m;
  return CLB_OK;
}

clb_status clb__select_run(clb_context_t ctx, const clb_sel_plan *p) {
  const int gpu = ctx->style != CLB_KERNEL_STYLE_CPU;
  const char *src_name = gpu ? "select-gpu" : "select-cpu";
  const clb_tensor_t x = p->x, m = p->mask, o = p->out;
  const int nonzero = p->kind == CLB_SEL_NONZERO;
  const char *tx = sel_type(x->dtype);
  const char *tm = nonzero ? tx : "uchar";
  /* the CPU family's nonzero is specialized for ranks 1 and 2, its common cases */
  int crank = !gpu && nonzero && (x->rank == 1 || x->rank == 2) ? x->rank : 0;
  char opts[320];
  int len = snprintf(opts, sizeof opts, "-D %s -D TX=%s -D TM=%s -D TX_BYTES=%zu -D RANK=%d", kind_macros[p->kind], tx,
                     tm, clb_dtype_size(x->dtype), crank);
  if (nonzero && o->dtype != CLB_DTYPE_I64) /* a graph's cast of the indices, fused (clb__nonzero_as) */
    snprintf(opts + len, sizeof opts - (size_t)len, " -D NZ_TO=%s -D NZ_TO2=%s2", clb__dtype_cl(o->dtype),
             clb__dtype_cl(o->dtype));
  size_t groups, local = gpu ? ctx->local_size : 1;
  sel_geometry(ctx, p->bound_numel, 1, &groups, &local);
  const int lookback = sel_lookback(ctx, p);
  const int one = lookback || sel_one_launch(ctx, p, groups);
  if (lookback) {
    /* the staged tiles' local memory (kernels/select-gpu.cl): the tile's values
     * (masked_select) or indices (nonzero), beside the scan's; where the device
     * has less, element-by-element loads and stores */
    uint64_t stage = p->kind == CLB_SEL_SCATTER ? 0
                                                : (uint64_t)ctx->local_size * (uint64_t)lb_items(ctx) *
                                                      (nonzero ? 8u : (uint64_t)clb_dtype_size(x->dtype));
    uint64_t need = stage + (uint64_t)ctx->local_size * 8u + 64u;
    const int unstaged = ctx->info.local_mem_bytes > 0 && need > ctx->info.local_mem_bytes;
    size_t used = strlen(opts);
    snprintf(opts + used, sizeof opts - used, " -D SEL_LOOKBACK -D SEL_ITEMS=%d%s%s", lb_items(ctx),
             unstaged ? " -D SEL_LB_UNSTAGED" : "", ctx->select_lb_test);
  }
  static const char *const names3[] = {"sel_count", "sel_finish", "sel_write"};
  static const char *const name1[] = {"sel_single"};
  static const char *const name_lb[] = {"sel_lookback"};
  const char *const *names = lookback ? name_lb : one ? name1 : names3;
  const int nk = one ? 1 : 3;
  cl_kernel k[3];
  clb_status st = CLB_OK;
  if (gpu) {
    /* built with -D LOCAL=<local>, lowered when a kernel allows fewer work-items */
    st = clb__kernels_get_fixed(ctx, p->op, src_name, opts, nk, names, k, &local);
  } else {
    for (int i = 0; i < nk && st == CLB_OK; i++) st = clb__kernel_get(ctx, p->op, src_name, opts, names[i], &k[i]);
  }
  if (st != CLB_OK) return st;
  sel_geometry(ctx, p->bound_numel, one, &groups, &local);

  cl_int rx = x->rank, rm = m->rank, rank = p->rank, ngroups = (cl_int)groups;
  /* nonzero_static: 1, or 2 with a count tensor to write (never the scratch,
   * whose counts sel_write still reads, nor the output's record) */
  cl_int bcast = p->bmx || p->bmm || x->rank != m->rank, nz_static = p->nz_static ? 1 + (p->count != NULL) : 0;
  cl_uint bmx = p->bmx, bmm = p->bmm, zero = 0;
  cl_ulong fmask = nonzero ? sel_fmask(x->dtype) : ~(cl_ulong)0;
  cl_long obound = p->obound, fill = p->fill;
  clb_tensor_t s = p->source ? p->source : x;
  cl_int rs = s->rank;
  /* the output's follower view (clb_reshape) gets its record in this launch too */
  clb_tensor_t v = p->nz_static ? NULL : o->view_next;
  cl_int rv = v ? v->view_rank : -1;
  cl_long8 spv;
  memset(&spv, 0, sizeof spv);
  for (int d = 0; v && d < rv; d++) spv.s[d] = v->view_spec[d];
  cl_mem sv = v ? v->shape.mem : o->shape.mem;
  if (lookback) {
    /* tiles of the bound, and a group per tile up to the context's most */
    int64_t tile = (int64_t)local * lb_items(ctx);
    cl_long tiles = p->bound_numel > 0 ? (p->bound_numel + tile - 1) / tile : 1;
    cl_mem state;
    if ((st = sel_lb_state(ctx, p, tiles, &state)) != CLB_OK) return st;
    cl_long cap = ctx->sel_lb_tiles;
    size_t lgroups = (size_t)tiles < ctx->max_groups ? (size_t)tiles : ctx->max_groups;
    const clb_buf *count_out = p->count ? &p->count->data : &o->shape; /* offset 0: a record */
    clb_arg al[] = {CLB_ARG_DATA(x->data), CLB_ARG_DATA(m->data), CLB_ARG(x->shape.mem), CLB_ARG(rx),
                    CLB_ARG(m->shape.mem), CLB_ARG(rm), CLB_ARG(rank), CLB_ARG(bmx), CLB_ARG(bmm), CLB_ARG(fmask),
                    CLB_ARG(bcast), CLB_ARG_DATA(o->data), CLB_ARG(obound), CLB_ARG_DATA(s->data),
                    CLB_ARG(s->shape.mem), CLB_ARG(rs), CLB_ARG(nz_static), CLB_ARG(fill), CLB_ARG(o->shape.mem),
                    CLB_ARG_DATA(*count_out), CLB_ARG(sv), CLB_ARG(rv), CLB_ARG(spv), CLB_ARG(state), CLB_ARG(cap),
                    CLB_ARG(ctx->status), CLB_ARG(zero)};
    st = clb__launch(ctx, p->op, p->what, k[0], al, CLB_NARGS(al), CLB_NARGS(al) - 1, lgroups ? lgroups : 1, local);
    if (st == CLB_OK) o->view_fresh = v != NULL;
    return st;
  }
  if (one) {
    const clb_buf *count_out = p->count ? &p->count->data : &o->shape; /* offset 0: a record */
    clb_arg a1[] = {CLB_ARG_DATA(x->data), CLB_ARG_DATA(m->data), CLB_ARG(x->shape.mem), CLB_ARG(rx),
                    CLB_ARG(m->shape.mem), CLB_ARG(rm), CLB_ARG(rank), CLB_ARG(bmx), CLB_ARG(bmm), CLB_ARG(fmask),
                    CLB_ARG(bcast), CLB_ARG_DATA(o->data), CLB_ARG(obound), CLB_ARG_DATA(s->data),
                    CLB_ARG(s->shape.mem), CLB_ARG(rs), CLB_ARG(nz_static), CLB_ARG(fill), CLB_ARG(o->shape.mem),
                    CLB_ARG_DATA(*count_out), CLB_ARG(sv), CLB_ARG(rv), CLB_ARG(spv), CLB_ARG(ctx->status), CLB_ARG(zero)};
    st = clb__launch(ctx, p->op, p->what, k[0], a1, CLB_NARGS(a1), CLB_NARGS(a1) - 1, groups, local);
    if (st == CLB_OK) o->view_fresh = v != NULL;
    return st;
  }
  cl_kernel kc = k[0], kf = k[1], kw = k[2];
  /* scratch: counts [0, G), offsets [G, 2G), total at 2G */
  clb_buf scratch;
  char err[256];
  size_t sbytes = (2 * groups + 1) * sizeof(cl_long);
  if ((st = clb__pool_get(ctx->pool, sbytes, &scratch, err, sizeof err)) != CLB_OK)
    return clb__set_error(ctx, st, "%s %s: scratch of %zu bytes: %s", p->op, p->what, sbytes, err);
  const clb_buf *count_out = p->count ? &p->count->data : &scratch;
  clb_arg ac[] = {CLB_ARG_DATA(m->data), CLB_ARG(x->shape.mem), CLB_ARG(rx), CLB_ARG(m->shape.mem), CLB_ARG(rm),
                  CLB_ARG(rank), CLB_ARG(bmx), CLB_ARG(bmm), CLB_ARG(fmask), CLB_ARG(bcast), CLB_ARG(scratch.mem)};
  clb_arg af[] = {CLB_ARG(scratch.mem), CLB_ARG(ngroups), CLB_ARG(x->shape.mem), CLB_ARG(rx),
                  CLB_ARG(m->shape.mem), CLB_ARG(rm), CLB_ARG(rank), CLB_ARG(bmx), CLB_ARG(bmm),
                  CLB_ARG(o->shape.mem), CLB_ARG(obound), CLB_ARG(s->shape.mem), CLB_ARG(rs),
                  CLB_ARG_DATA(*count_out), CLB_ARG(nz_static), CLB_ARG(sv), CLB_ARG(rv), CLB_ARG(spv),
                  CLB_ARG(ctx->status), CLB_ARG(zero)};
  clb_arg aw[] = {CLB_ARG_DATA(x->data), CLB_ARG_DATA(m->data), CLB_ARG(x->shape.mem), CLB_ARG(rx),
                  CLB_ARG(m->shape.mem), CLB_ARG(rm), CLB_ARG(rank), CLB_ARG(bmx), CLB_ARG(bmm),
                  CLB_ARG(scratch.mem), CLB_ARG(fmask), CLB_ARG(bcast), CLB_ARG_DATA(o->data), CLB_ARG(obound),
                  CLB_ARG_DATA(s->data), CLB_ARG(s->shape.mem), CLB_ARG(rs), CLB_ARG(nz_static), CLB_ARG(fill)};
  st = clb__launch(ctx, p->op, p->what, kc, ac, CLB_NARGS(ac), -1, groups, local);
  if (st == CLB_OK) st = clb__launch(ctx, p->op, p->what, kf, af, CLB_NARGS(af), CLB_NARGS(af) - 1, 1, local);
  if (st == CLB_OK) st = clb__launch(ctx, p->op, p->what, kw, aw, CLB_NARGS(aw), -1, groups, local);
  if (st == CLB_OK) o->view_fresh = v != NULL;
  /* Queued kernels may still use the scratch: a later owner only writes it
   * after them, since the queue is in order. */
  clb__pool_put(ctx->pool, &scratch);
  return st;
}
