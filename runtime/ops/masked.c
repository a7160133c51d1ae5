/* masked.c: masked_select and masked_scatter with a broadcasting bool mask. */
#include <stdio.h>
#include <string.h>

#include "runtime/ops/fused.h"
#include "runtime/ops/select.h"

static clb_status masked_begin(clb_context_t ctx, const char *op, clb_tensor_t x, clb_tensor_t mask,
                               clb_sel_plan *p) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_status st = clb__check_tensor(ctx, op, "x", x);
  if (st == CLB_OK) st = clb__check_tensor(ctx, op, "mask", mask);
  if (st != CLB_OK) return st;
  char dm[96];
  if (mask->dtype != CLB_DTYPE_BOOL)
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: mask %s must be bool (cast it first)", op,
                          clb__tensor_desc(mask, dm, sizeof dm));
  memset(p, 0, sizeof *p);
  p->op = op;
  p->x = x;
  p->mask = mask;
  return CLB_OK;
}

/* Broadcasts x and mask like clb_binary: a static 1 or a missing leading dim
 * broadcasts, other dims need equal bounds (actual sizes are checked on the
 * device). With x_fixed, x keeps its shape and only the mask may broadcast.
 * Fills the plan's rank, masks and bound count; bounds into ob. */
static clb_status masked_broadcast(clb_context_t ctx, clb_sel_plan *p, int x_fixed, int64_t *ob, uint8_t *odyn) {
  clb_tensor_t x = p->x, m = p->mask;
  char dx[96], dm[96];
  clb__tensor_desc(x, dx, sizeof dx);
  clb__tensor_desc(m, dm, sizeof dm);
  snprintf(p->what, sizeof p->what, "x %.88s, mask %.88s", dx, dm);
  if (x_fixed && m->rank > x->rank)
    return clb__set_error(ctx, CLB_ERR_SHAPE, "%s: mask %s has more dims than x %s; it must broadcast to x's shape",
                          p->op, dm, dx);
  int rank = x->rank > m->rank ? x->rank : m->rank;
  for (int d = 0; d < rank; d++) {
    int ix = d - (rank - x->rank), im = d - (rank - m->rank);
    int64_t bx = ix >= 0 ? x->bound[ix] : 1, bm = im >= 0 ? m->bound[im] : 1;
    int yx = ix >= 0 && x->dyn[ix], ym = im >= 0 && m->dyn[im];
    int one_x = bx == 1 && !yx, one_m = bm == 1 && !ym;
    if (one_x && !one_m && !x_fixed) {
      p->bmx |= 1u << d;
      ob[d] = bm;
      odyn[d] = (uint8_t)ym;
    } else if (one_m && !one_x) {
      p->bmm |= 1u << d;
      ob[d] = bx;
      odyn[d] = (uint8_t)yx;
    } else {
      if (bx != bm)
        return clb__set_error(ctx, CLB_ERR_SHAPE,
                              "%s: x %s and mask %s do not broadcast: dim %d has bounds %lld and %lld%s", p->op, dx,
                              dm, d, (long long)bx, (long long)bm, x_fixed ? " (the mask must broadcast to x)" : "");
      ob[d] = bx;
      odyn[d] = (uint8_t)(yx && ym);
    }
  }
  p->rank = rank;
  p->bound_numel = clb__numel(rank, ob);
  return CLB_OK;
}

/* clb_masked_select, and with view, clb_reshape(*out, vrank, vspec) in the
 * same launch (clb__masked_select_view). */
static clb_status masked_select_into(clb_context_t ctx, clb_tensor_t x, clb_tensor_t mask, clb_tensor_t *out, int vrank,
                                     const int64_t *vspec, clb_tensor_t *view) {
  static const char *op = "masked_select";
  clb_sel_plan p;
  clb_status st = masked_begin(ctx, op, x, mask, &p);
  if (st != CLB_OK) return st;
  p.kind = CLB_SEL_SELECT;
  int64_t ob[CLB_MAX_RANK];
  uint8_t odyn[CLB_MAX_RANK];
  if ((st = masked_broadcast(ctx, &p, 0, ob, odyn)) != CLB_OK) return st;
  if (!out) return clb__set_error(ctx, CLB_ERR_NULL, "%s: out is NULL", op);
  if (*out) {
    clb_tensor_t t = *out;
    char desc[128];
    if ((st = clb__check_output(ctx, op, "out", t)) != CLB_OK) return st;
    clb__tensor_desc(t, desc, sizeof desc);
    if (t == x || t == mask) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: out may not be an input", op);
    if (t->dtype != x->dtype)
      return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: out is %s, x is %s", op, desc, clb_dtype_name(x->dtype));
    if (t->rank != 1 || !t->dyn[0])
      return clb__set_error(ctx, CLB_ERR_SHAPE, "%s: out is %s; it must be 1-D and dynamic", op, desc);
  } else {
    int64_t b = p.bound_numel;
    uint8_t dyn = 1;
    if ((st = clb__output(ctx, op, x->dtype, 1, &b, &dyn, out)) != CLB_OK) return st;
  }
  p.out = *out;
  clb__note_output(ctx, op, p.out);
  p.obound = p.out->bound[0];
  if (view && (st = clb__reshape_follow(ctx, p.out, vrank, vspec, view)) != CLB_OK) return st;
  return clb__select_run(ctx, &p);
}

clb_status clb_masked_select(clb_context_t ctx, clb_tensor_t x, clb_tensor_t mask, clb_tensor_t *out) {
  return masked_select_into(ctx, x, mask, out, 0, NULL, NULL);
}

clb_status clb__masked_select_view(clb_context_t ctx, clb_tensor_t x, clb_tensor_t mask, clb_tensor_t *out, int vrank,
                                   const int64_t *vspec, clb_tensor_t *view) {
  return masked_select_into(ctx, x, mask, out, vrank, vspec, view);
}

clb_status clb_masked_scatter(clb_context_t ctx, clb_tensor_t x, clb_tensor_t mask, clb_tensor_t source,
                              clb_tensor_t *out) {
  static const char *op = "masked_scatter";
  clb_sel_plan p;
  clb_status st = masked_begin(ctx, op, x, mask, &p);
  if (st == CLB_OK) st = clb__check_tensor(ctx, op, "source", source);
  if (st != CLB_OK) return st;
  p.kind = CLB_SEL_SCATTER;
  int64_t ob[CLB_MAX_RANK];
  uint8_t odyn[CLB_MAX_RANK];
  if ((st = masked_broadcast(ctx, &p, 1, ob, odyn)) != CLB_OK) return st;
  char ds[96];
  clb__tensor_desc(source, ds, sizeof ds);
  if (source->dtype != x->dtype)
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: source %s must have x's dtype %s", op, ds,
                          clb_dtype_name(x->dtype));
  size_t used = strlen(p.what);
  snprintf(p.what + used, sizeof p.what - used, ", source %s", ds);
  if (out && *out && (*out == mask || *out == source))
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: out may be x but not mask or source", op);
  if ((st = clb__output(ctx, op, x->dtype, x->rank, x->bound, x->dyn, out)) != CLB_OK) return st;
  p.out = *out;
  p.obound = p.bound_numel;
  p.source = source;
  return clb__select_run(ctx, &p);
}
