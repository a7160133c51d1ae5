/* view.c: clb_reshape, views that share data and compute their actual
 * sizes on the device: a static view's record is written once; a dynamic
 * view's by view.cl, unless the op that wrote its input wrote it too (a view
 * that follows the select ops' outputs: runtime/ops/select.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cache/cache.h"

static const char *const op = "reshape";

/* Checks a reshape and makes the view *out (or checks the one given); says
 * whether it made it and whether any of its dims is dynamic. */
static clb_status reshape_view(clb_context_t ctx, clb_tensor_t x, int rank, const int64_t *spec, clb_tensor_t *out,
                               int *created, int *dynamic_out) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_status st = clb__check_tensor(ctx, op, "x", x);
  if (st != CLB_OK) return st;
  if (!out) return clb__set_error(ctx, CLB_ERR_NULL, "%s: out is NULL", op);
  if (rank < 0 || rank > CLB_MAX_RANK) return clb__set_error(ctx, CLB_ERR_RANK, "%s: rank %d is outside 0..%d", op, rank, CLB_MAX_RANK);
  if (rank > 0 && !spec) return clb__set_error(ctx, CLB_ERR_NULL, "%s: spec is NULL", op);
  char desc[128];
  clb__tensor_desc(x, desc, sizeof desc);
  int64_t xn = clb__numel(x->rank, x->bound), fixed = 1;
  int free_dim = -1, x_dynamic = 0;
  for (int d = 0; d < x->rank; d++) x_dynamic |= x->dyn[d];
  for (int d = 0; d < rank; d++) {
    if (spec[d] == -1 && free_dim < 0) free_dim = d;
    else if (spec[d] < 0) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s of %s: spec[%d] = %lld (one -1 at most, else sizes >= 0)", op, desc, d, (long long)spec[d]);
    else fixed *= spec[d];
  }
  int64_t bounds[CLB_MAX_RANK];
  uint8_t dyn[CLB_MAX_RANK] = {0};
  for (int d = 0; d < rank; d++) bounds[d] = spec[d];
  if (free_dim >= 0) {
    if (fixed == 0 || xn % fixed != 0)
      return clb__set_error(ctx, CLB_ERR_SHAPE, "%s of %s: %lld elements at the bounds do not split into rows of %lld", op, desc, (long long)xn, (long long)fixed);
    bounds[free_dim] = xn / fixed;
    dyn[free_dim] = (uint8_t)x_dynamic;
  } else if (x_dynamic || fixed != xn) {
    if (fixed != xn || x_dynamic)
      return clb__set_error(ctx, CLB_ERR_SHAPE, "%s of %s: a static shape of %lld elements needs -1 for a dynamic input or %lld elements", op, desc, (long long)fixed, (long long)xn);
  }
  *created = !*out;
  *dynamic_out = 0;
  for (int d = 0; d < rank; d++) *dynamic_out |= dyn[d];
  if (*created) {
    if ((st = clb__tensor_share(ctx, op, x, rank, bounds, dyn, out)) != CLB_OK) return st;
  } else {
    clb_tensor_t v = *out;
    if ((st = clb__check_output(ctx, op, "out", v)) != CLB_OK) return st;
    if (v->data.mem != x->data.mem || v->data.offset != x->data.offset || v->rank != rank || memcmp(v->bound, bounds, (size_t)rank * sizeof *bounds) != 0)
      return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s of %s: out must be a view of x made by clb_reshape with this spec", op, desc);
  }
  return CLB_OK;
}

/* A static view's record: its bounds, written once (not a host sync). */
static clb_status static_record(clb_context_t ctx, clb_tensor_t v) {
  int64_t rec[CLB_MAX_RANK];
  for (int d = 0; d < CLB_MAX_RANK; d++) rec[d] = d < v->rank ? v->bound[d] : 1;
  return clb__write_async(ctx, op, v->shape.mem, 0, rec, sizeof rec);
}

/* One work-item of view.cl writes v's record from x's and spec (a -1 dim takes
 * the rest), raising a deferred check where the counts do not fit. */
static clb_status view_record(clb_context_t ctx, const char *opname, clb_tensor_t x, clb_tensor_t v, int rank,
                              const int64_t *spec) {
  char desc[128];
  clb__tensor_desc(x, desc, sizeof desc);
  cl_kernel k;
  clb_status st = clb__kernel_get(ctx, opname, "view", "", "view_shape", &k);
  if (st != CLB_OK) return st;
  cl_long8 sp;
  memset(&sp, 0, sizeof sp);
  for (int d = 0; d < rank; d++) sp.s[d] = spec[d];
  cl_int rx = x->rank, ro = rank;
  cl_uint zero = 0;
  clb_arg args[] = {CLB_ARG(x->shape.mem), CLB_ARG(rx), CLB_ARG(v->shape.mem), CLB_ARG(ro), CLB_ARG(sp),
                    CLB_ARG(ctx->status), CLB_ARG(zero)};
  return clb__launch(ctx, opname, desc, k, args, 7, 6, 1, 1);
}

clb_status clb__reshape_follow(clb_context_t ctx, clb_tensor_t x, int rank, const int64_t *spec, clb_tensor_t *out) {
  int created, dynamic_out;
  clb_status st = reshape_view(ctx, x, rank, spec, out, &created, &dynamic_out);
  if (st != CLB_OK) return st;
  if (dynamic_out) clb__view_link(x, *out, rank, spec);
  else if (created) st = static_record(ctx, *out);
  return st;
}

clb_status clb_reshape(clb_context_t ctx, clb_tensor_t x, int rank, const int64_t *spec, clb_tensor_t *out) {
  int created, dynamic_out;
  clb_status st = reshape_view(ctx, x, rank, spec, out, &created, &dynamic_out);
  if (st != CLB_OK) return st;
  clb_tensor_t v = *out;
  if (!dynamic_out) {
    /* a static view (of a static input: checked above): its record is its
     * bounds, written once when the view is made; whoever writes a static
     * tensor later writes the same sizes, so no launch ever */
    clb__note_output(ctx, op, v);
    return created ? static_record(ctx, v) : CLB_OK;
  }
  /* a view that follows x: x's producer wrote this record already */
  if (clb__view_current(x, v, rank, spec)) return CLB_OK;
  clb__note_output(ctx, op, v);
  clb__view_link(x, v, rank, spec);
  return view_record(ctx, op, x, v, rank, spec);
}

clb_status clb_reshape_bounded(clb_context_t ctx, clb_tensor_t x, int rank, const int64_t *bounds,
                               const uint8_t *dynamic, const int64_t *dims, clb_tensor_t *out) {
  static const char *opb = "reshape_bounded";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", opb);
  clb_status st = clb__check_tensor(ctx, opb, "x", x);
  if (st != CLB_OK) return st;
  if (!out) return clb__set_error(ctx, CLB_ERR_NULL, "%s: out is NULL", opb);
  if (rank < 0 || rank > CLB_MAX_RANK) return clb__set_error(ctx, CLB_ERR_RANK, "%s: rank %d is outside 0..%d", opb, rank, CLB_MAX_RANK);
  if (rank > 0 && (!bounds || !dims)) return clb__set_error(ctx, CLB_ERR_NULL, "%s: bounds or dims is NULL", opb);
  char desc[128];
  clb__tensor_desc(x, desc, sizeof desc);
  uint8_t dyn[CLB_MAX_RANK] = {0};
  int64_t n = 1;
  for (int d = 0; d < rank; d++) {
    dyn[d] = (uint8_t)(dynamic && dynamic[d]);
    if (bounds[d] < 0 || dims[d] < 0 || dims[d] > bounds[d] || (!dyn[d] && dims[d] != bounds[d]))
      return clb__set_error(ctx, CLB_ERR_SHAPE, "%s of %s: dim %d: size %lld with bound %lld%s", opb, desc, d,
                            (long long)dims[d], (long long)bounds[d], dyn[d] ? "" : " (static: they must be equal)");
    if (n > 0 && bounds[d] > 0 && n > INT64_MAX / bounds[d])
      return clb__set_error(ctx, CLB_ERR_SHAPE, "%s of %s: the bounds' element count overflows", opb, desc);
    n *= bounds[d];
  }
  int64_t xn = clb__numel(x->rank, x->bound);
  if (n > xn)
    return clb__set_error(ctx, CLB_ERR_SHAPE, "%s of %s: %lld elements at the bounds do not fit its %lld", opb, desc,
                          (long long)n, (long long)xn);
  if (!*out) {
    if ((st = clb__tensor_share(ctx, opb, x, rank, bounds, dyn, out)) != CLB_OK) return st;
  } else {
    clb_tensor_t v = *out;
    if ((st = clb__check_output(ctx, opb, "out", v)) != CLB_OK) return st;
    /* a view that follows x (clb_reshape's) would have its record rewritten by x's producers */
    if (v->data.mem != x->data.mem || v->data.offset != x->data.offset || v->dtype != x->dtype || v->rank != rank ||
        v->view_of || memcmp(v->bound, bounds, (size_t)rank * sizeof *bounds) != 0 ||
        memcmp(v->dyn, dyn, (size_t)rank) != 0)
      return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s of %s: out must be a view of x made by clb_reshape_bounded with these bounds",
                            opb, desc);
  }
  clb__note_output(ctx, opb, *out);
  /* the record: dims (a spec with no -1), with a deferred check that they hold x's actual count */
  return view_record(ctx, opb, x, *out, rank, dims);
}
