/* cat.c: clb_cat, torch.cat / numpy.concatenate of two tensors at the actual
 * sizes (kernels/cat.cl). */
#include <stdio.h>

#include "runtime/cache/cache.h"

clb_status clb_cat(clb_context_t ctx, clb_tensor_t a, clb_tensor_t b, int dim, clb_tensor_t *out) {
  static const char *op = "cat";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_status st = clb__check_tensor(ctx, op, "a", a);
  if (st == CLB_OK) st = clb__check_tensor(ctx, op, "b", b);
  if (st != CLB_OK) return st;
  char da[96], db[96], what[256];
  clb__tensor_desc(a, da, sizeof da);
  clb__tensor_desc(b, db, sizeof db);
  snprintf(what, sizeof what, "a %s, b %s, dim %d", da, db, dim);
  if (a->dtype != b->dtype)
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s of %s: the dtypes differ (cast one first)", op, what);
  if (a->rank < 1 || b->rank != a->rank)
    return clb__set_error(ctx, CLB_ERR_SHAPE, "%s of %s: a and b need one rank, at least 1", op, what);
  if (dim < -a->rank || dim >= a->rank)
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s of %s: dim %d is outside the rank %d", op, what, dim, a->rank);
  const int d0 = dim < 0 ? dim + a->rank : dim;
  int64_t bounds[CLB_MAX_RANK];
  uint8_t dyn[CLB_MAX_RANK];
  for (int d = 0; d < a->rank; d++) {
    if (d != d0 && a->bound[d] != b->bound[d])
      return clb__set_error(ctx, CLB_ERR_SHAPE, "%s of %s: the bounds differ at dim %d, which is not the cat's", op,
                            what, d);
    bounds[d] = d == d0 ? a->bound[d] + b->bound[d] : a->bound[d];
    dyn[d] = (uint8_t)(a->dyn[d] || b->dyn[d]);
  }
  if (out && *out && (*out == a || *out == b))
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s of %s: out must be a new tensor, not a or b", op, what);
  if ((st = clb__output(ctx, op, a->dtype, a->rank, bounds, dyn, out)) != CLB_OK) return st;
  clb_tensor_t o = *out;
  char opts[128];
  snprintf(opts, sizeof opts, "-D T=%s -D RANK=%d%s", clb__dtype_cl(a->dtype), a->rank,
           a->dtype == CLB_DTYPE_F64 ? " -D CLB_NEED_FP64" : "");
  cl_kernel k;
  size_t local = 0;
  if ((st = clb__kernel_get_local(ctx, op, "cat", opts, "cat2", &k, &local)) != CLB_OK) return st;
  cl_int cdim = d0;
  cl_uint zero = 0;
  clb_arg args[] = {CLB_ARG_DATA(a->data), CLB_ARG(a->shape.mem), CLB_ARG_DATA(b->data), CLB_ARG(b->shape.mem),
                    CLB_ARG_DATA(o->data), CLB_ARG(o->shape.mem), CLB_ARG(cdim), CLB_ARG(ctx->status), CLB_ARG(zero)};
  return clb__launch(ctx, op, what, k, args, CLB_NARGS(args), CLB_NARGS(args) - 1,
                     clb__groups_local(ctx, clb_tensor_bound_numel(o), local), local);
}
