/* random.c: uniform numbers at a tensor's actual sizes (clb_rand_uniform), from
 * Philox4x32-10 (kernels/random.cl): dropout's masks and torch.rand_like. */
#include <stdio.h>

#include "runtime/cache/cache.h"

clb_status clb_rand_uniform(clb_context_t ctx, clb_tensor_t like, clb_dtype dtype, uint64_t seed, clb_tensor_t *out) {
  static const char *op = "rand_uniform";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_status st = clb__check_tensor(ctx, op, "like", like);
  if (st != CLB_OK) return st;
  if (dtype != CLB_DTYPE_F32 && dtype != CLB_DTYPE_F64)
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: dtype %s: uniform numbers are f32 or f64", op,
                          (unsigned)dtype < CLB_DTYPE_COUNT ? clb_dtype_name(dtype) : "(unknown)");
  if (dtype == CLB_DTYPE_F64 && !ctx->info.has_fp64)
    return clb__set_error(ctx, CLB_ERR_UNSUPPORTED, "%s: f64 needs cl_khr_fp64, which %s lacks", op, ctx->info.name);
  if ((st = clb__output(ctx, op, dtype, like->rank, like->bound, like->dyn, out)) != CLB_OK) return st;
  clb_tensor_t o = *out;
  char opts[96];
  snprintf(opts, sizeof opts, "-D T=%s%s", clb__dtype_cl(dtype), dtype == CLB_DTYPE_F64 ? " -D CLB_NEED_FP64" : "");
  cl_kernel k;
  size_t local = 0;
  if ((st = clb__kernel_get_local(ctx, op, "random", opts, "rand_uniform", &k, &local)) != CLB_OK) return st;
  cl_int rank = like->rank;
  cl_uint key_lo = (cl_uint)(seed & 0xffffffffu), key_hi = (cl_uint)(seed >> 32);
  clb_arg args[] = {CLB_ARG(like->shape.mem), CLB_ARG(rank), CLB_ARG_DATA(o->data), CLB_ARG(o->shape.mem),
                    CLB_ARG(key_lo), CLB_ARG(key_hi)};
  char what[192];
  clb__tensor_desc(like, what, sizeof what);
  return clb__launch(ctx, op, what, k, args, CLB_NARGS(args), -1, clb__groups_local(ctx, clb_tensor_bound_numel(like), local),
                     local);
}
