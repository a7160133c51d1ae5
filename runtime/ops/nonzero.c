/* nonzero.c: nonzero and nonzero_static, whose counts stay on the device. */
#include <stdio.h>
#include <string.h>

#include "runtime/ops/fused.h"
#include "runtime/ops/select.h"

/* Checks ctx and x, and starts the plan shared by both ops. */
static clb_status nonzero_begin(clb_context_t ctx, const char *op, clb_tensor_t x, clb_sel_plan *p) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_status st = clb__check_tensor(ctx, op, "x", x);
  if (st != CLB_OK) return st;
  memset(p, 0, sizeof *p);
  p->op = op;
  p->kind = CLB_SEL_NONZERO;
  p->x = x;
  p->mask = x;
  p->rank = x->rank;
  p->bound_numel = clb_tensor_bound_numel(x);
  return CLB_OK;
}

static void nonzero_what(clb_sel_plan *p) {
  char dx[96], dout[96];
  snprintf(p->what, sizeof p->what, "x %s, out %s", clb__tensor_desc(p->x, dx, sizeof dx),
           clb__tensor_desc(p->out, dout, sizeof dout));
}

/* clb_nonzero, with its indices as odt (clb__nonzero_as: i64 is the op's own),
 * and with view, clb_reshape(*out, vrank, vspec) in the same launch
 * (clb__nonzero_view). */
static clb_status nonzero_into(clb_context_t ctx, clb_tensor_t x, clb_dtype odt, clb_tensor_t *out, int vrank,
                               const int64_t *vspec, clb_tensor_t *view) {
  static const char *op = "nonzero";
  clb_sel_plan p;
  clb_status st = nonzero_begin(ctx, op, x, &p);
  if (st != CLB_OK) return st;
  if (!out) return clb__set_error(ctx, CLB_ERR_NULL, "%s: out is NULL", op);
  char desc[128];
  if (*out) {
    /* a caller's output may have any row bound: a count above it is clamped and
     * reported at the next sync */
    clb_tensor_t t = *out;
    if ((st = clb__check_output(ctx, op, "out", t)) != CLB_OK) return st;
    clb__tensor_desc(t, desc, sizeof desc);
    if (t == x) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: out may not be x", op);
    if (t->dtype != odt || t->rank != 2 || !t->dyn[0] || t->dyn[1] || t->bound[1] != x->rank)
      return clb__set_error(ctx, t->dtype != odt ? CLB_ERR_DTYPE : CLB_ERR_SHAPE,
                            "%s: out is %s; it must be %s [<=N, %d] with a dynamic dim 0 and a static dim 1",
                            op, desc, clb_dtype_name(odt), x->rank);
  } else {
    int64_t b[2] = {p.bound_numel, x->rank};
    uint8_t dyn[2] = {1, 0};
    if ((st = clb__output(ctx, op, odt, 2, b, dyn, out)) != CLB_OK) return st;
  }
  p.out = *out;
  clb__note_output(ctx, op, p.out);
  p.obound = p.out->bound[0];
  if (view && (st = clb__reshape_follow(ctx, p.out, vrank, vspec, view)) != CLB_OK) return st;
  nonzero_what(&p);
  return clb__select_run(ctx, &p);
}

clb_status clb_nonzero(clb_context_t ctx, clb_tensor_t x, clb_tensor_t *out) {
  return nonzero_into(ctx, x, CLB_DTYPE_I64, out, 0, NULL, NULL);
}

clb_status clb__nonzero_view(clb_context_t ctx, clb_tensor_t x, clb_tensor_t *out, int vrank, const int64_t *vspec,
                             clb_tensor_t *view) {
  return nonzero_into(ctx, x, CLB_DTYPE_I64, out, vrank, vspec, view);
}

clb_status clb__nonzero_as(clb_context_t ctx, clb_tensor_t x, clb_dtype dtype, clb_tensor_t *out) {
  if (dtype != CLB_DTYPE_I64 && dtype != CLB_DTYPE_I32 && !clb__dtype_is_float(dtype))
    return clb__set_error(ctx, CLB_ERR_DTYPE, "nonzero: indices as %s: only i64, i32, f32 and f64", clb_dtype_name(dtype));
  return nonzero_into(ctx, x, dtype, out, 0, NULL, NULL);
}

clb_status clb_nonzero_static(clb_context_t ctx, clb_tensor_t x, int64_t size, int64_t fill_value,
                              clb_tensor_t *out, clb_tensor_t *count) {
  static const char *op = "nonzero_static";
  clb_sel_plan p;
  clb_status st = nonzero_begin(ctx, op, x, &p);
  if (st != CLB_OK) return st;
  if (size < 0) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: size %lld is negative", op, (long long)size);
  if (count && *count) {
    clb_tensor_t c = *count;
    char desc[128];
    if ((st = clb__check_output(ctx, op, "count", c)) != CLB_OK) return st;
    if (c->dtype != CLB_DTYPE_I64 || c->rank != 0)
      return clb__set_error(ctx, c->dtype != CLB_DTYPE_I64 ? CLB_ERR_DTYPE : CLB_ERR_SHAPE,
                            "%s: count is %s; it must be a 0-d i64 tensor", op, clb__tensor_desc(c, desc, sizeof desc));
    if (c == x) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: count may not be x", op);
  }
  if (!out) return clb__set_error(ctx, CLB_ERR_NULL, "%s: out is NULL", op);
  if (*out) {
    clb_tensor_t t = *out;
    char desc[128];
    if ((st = clb__check_output(ctx, op, "out", t)) != CLB_OK) return st;
    if (t == x) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: out may not be x", op);
    if (t->dtype != CLB_DTYPE_I64 || t->rank != 2 || t->bound[0] != size || t->bound[1] != x->rank || t->dyn[0] ||
        t->dyn[1])
      return clb__set_error(ctx, t->dtype != CLB_DTYPE_I64 ? CLB_ERR_DTYPE : CLB_ERR_SHAPE,
                            "%s: out is %s; it must be i64 [%lld, %d], static", op,
                            clb__tensor_desc(t, desc, sizeof desc), (long long)size, x->rank);
  } else {
    int64_t b[2] = {size, x->rank};
    uint8_t dyn[2] = {0, 0};
    if ((st = clb__output(ctx, op, CLB_DTYPE_I64, 2, b, dyn, out)) != CLB_OK) return st;
  }
  int created = 0;
  if (count && !*count) {
    if ((st = clb__output(ctx, op, CLB_DTYPE_I64, 0, NULL, NULL, count)) != CLB_OK) return st;
    created = 1;
  }
  p.out = *out;
  p.obound = size;
  p.nz_static = 1;
  p.fill = fill_value;
  p.count = count ? *count : NULL;
  clb__note_output(ctx, op, p.out);
  if (p.count) clb__note_output(ctx, op, p.count);
  nonzero_what(&p);
  st = clb__select_run(ctx, &p);
  if (st != CLB_OK && created) {
    clb_tensor_free(*count);
    *count = NULL;
  }
  return st;
}
