/* gather.c: clb_gather, torch.gather / numpy.take_along_axis at the actual
 * sizes (kernels/gather.cl). */
#include <stdio.h>

#include "runtime/cache/cache.h"

clb_status clb_gather(clb_context_t ctx, clb_tensor_t x, int dim, clb_tensor_t index, clb_tensor_t *out) {
  static const char *op = "gather";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_status st = clb__check_tensor(ctx, op, "x", x);
  if (st == CLB_OK) st = clb__check_tensor(ctx, op, "index", index);
  if (st != CLB_OK) return st;
  char dx[96], di[96], what[256];
  clb__tensor_desc(x, dx, sizeof dx);
  clb__tensor_desc(index, di, sizeof di);
  snprintf(what, sizeof what, "x %s, dim %d, index %s", dx, dim, di);
  if (index->dtype != CLB_DTYPE_I64 && index->dtype != CLB_DTYPE_I32)
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s of %s: index is %s; it must be i64 or i32", op, what,
                          clb_dtype_name(index->dtype));
  if (x->rank < 1 || index->rank != x->rank)
    return clb__set_error(ctx, CLB_ERR_SHAPE, "%s of %s: index must have x's rank (at least 1), not %d", op, what,
                          index->rank);
  if (dim < -x->rank || dim >= x->rank)
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s of %s: dim %d is outside x's rank %d", op, what, dim, x->rank);
  int d0 = dim < 0 ? dim + x->rank : dim;
  for (int d = 0; d < x->rank; d++) /* a position past x's actual size fails on the device; past its bound, now */
    if (d != d0 && index->bound[d] > x->bound[d])
      return clb__set_error(ctx, CLB_ERR_SHAPE, "%s of %s: index's bound %lld at dim %d is over x's %lld", op, what,
                            (long long)index->bound[d], d, (long long)x->bound[d]);
  if (out && *out && (*out == x || *out == index)) /* gathered elements would be overwritten before others read them */
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s of %s: out must be a new tensor, not x or index", op, what);
  if ((st = clb__output(ctx, op, x->dtype, index->rank, index->bound, index->dyn, out)) != CLB_OK) return st;
  clb_tensor_t o = *out;
  char opts[160];
  snprintf(opts, sizeof opts, "-D T=%s -D TI=%s -D RANK=%d%s", clb__dtype_cl(x->dtype), clb__dtype_cl(index->dtype),
           x->rank, x->dtype == CLB_DTYPE_F64 ? " -D CLB_NEED_FP64" : "");
  cl_kernel k;
  size_t local = 0;
  if ((st = clb__kernel_get_local(ctx, op, "gather", opts, "gather", &k, &local)) != CLB_OK) return st;
  cl_int cdim = d0;
  cl_uint zero = 0;
  clb_arg args[] = {CLB_ARG_DATA(x->data), CLB_ARG(x->shape.mem), CLB_ARG_DATA(index->data), CLB_ARG(index->shape.mem),
                    CLB_ARG_DATA(o->data), CLB_ARG(o->shape.mem),   CLB_ARG(cdim), CLB_ARG(ctx->status), CLB_ARG(zero)};
  return clb__launch(ctx, op, what, k, args, CLB_NARGS(args), CLB_NARGS(args) - 1,
                     clb__groups_local(ctx, clb_tensor_bound_numel(index), local), local);
}
