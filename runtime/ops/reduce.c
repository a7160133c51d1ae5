/* reduce.c: sum, mean and max over one dim or all, and the running sum along a
 * dim (clb_cumsum), over the actual sizes. */
#include <stdio.h>
#include <string.h>

#include "runtime/cache/cache.h"

static const char *const reduce_names[CLB_REDUCE_COUNT] = {"sum", "mean", "max"};
static const char *const reduce_macros[CLB_REDUCE_COUNT] = {"RED_SUM", "RED_MEAN", "RED_MAX"};

/* Output dtype and accumulator type; fails for mean of a non-floating input. */
static clb_status reduce_types(clb_context_t ctx, const char *op, clb_reduce_op rop, clb_dtype in,
                               clb_dtype *out, const char **acc, const char **lowest) {
  int fl = in == CLB_DTYPE_F32 || in == CLB_DTYPE_F64;
  if (rop == CLB_REDUCE_MEAN && !fl)
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: mean of %s: cast to f32 or f64 first", op, clb_dtype_name(in));
  if (rop == CLB_REDUCE_MAX) {
    *out = in;
    static const char *const low[CLB_DTYPE_COUNT] = {"(-INFINITY)", "(-INFINITY)", "INT_MIN", "LONG_MIN", "0", "0"};
    *lowest = low[in];
  } else {
    *out = fl ? in : CLB_DTYPE_I64;
    *lowest = "0";
  }
  *acc = clb__dtype_cl(*out);
  return CLB_OK;
}

static void reduce_options(char *buf, size_t len, const char *kind, clb_reduce_op rop,
                           clb_dtype in, clb_dtype out, const char *acc, const char *lowest, int rank) {
  snprintf(buf, len, "-D %s -D %s -D TA=%s -D TOUT=%s -D TACC=%s -D TACC_LOWEST=%s -D RANK=%d%s%s",
           kind, reduce_macros[rop], clb__dtype_cl(in), clb__dtype_cl(out), acc, lowest, rank,
           clb__dtype_is_float(in) ? " -D TA_FLOAT" : "",
           (in == CLB_DTYPE_F64 || out == CLB_DTYPE_F64) ? " -D CLB_NEED_FP64" : "");
}

static clb_status check_args(clb_context_t ctx, const char **op, clb_reduce_op rop, clb_tensor_t a) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "reduce: ctx is NULL");
  if ((unsigned)rop >= CLB_REDUCE_COUNT) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "reduce: unknown op %d", (int)rop);
  *op = reduce_names[rop];
  return clb__check_tensor(ctx, *op, "a", a);
}

clb_status clb_reduce_all(clb_context_t ctx, clb_reduce_op rop, clb_tensor_t a, clb_tensor_t *out) {
  const char *op = "reduce";
  clb_status st = check_args(ctx, &op, rop, a);
  if (st != CLB_OK) return st;
  clb_dtype odt = CLB_DTYPE_F32; /* reduce_types sets all three; initialized for -Wmaybe-uninitialized */
  const char *acc = "", *lowest = "";
  if ((st = reduce_types(ctx, op, rop, a->dtype, &odt, &acc, &lowest)) != CLB_OK) return st;
  if ((st = clb__output(ctx, op, odt, 0, NULL, NULL, out)) != CLB_OK) return st;
  clb_tensor_t o = *out;
  char opts[320];
  reduce_options(opts, sizeof opts, "RED_ALL", rop, a->dtype, odt, acc, lowest, a->rank);
  static const char *const names[] = {"red_all_part", "red_all_final"};
  cl_kernel k[2];
  size_t local;
  if ((st = clb__kernels_get_fixed(ctx, op, "reduce", opts, 2, names, k, &local)) != CLB_OK) return st;
  size_t groups = clb__groups_local(ctx, clb_tensor_bound_numel(a), local);
  char what[192];
  clb__tensor_desc(a, what, sizeof what);
  clb_arg a1[] = {CLB_ARG_DATA(a->data), CLB_ARG(a->shape.mem), CLB_ARG(ctx->scratch)};
  if ((st = clb__launch(ctx, op, what, k[0], a1, CLB_NARGS(a1), -1, groups, local)) != CLB_OK) return st;
  cl_int nparts = (cl_int)groups;
  cl_uint zero = 0;
  clb_arg a2[] = {CLB_ARG(ctx->scratch), CLB_ARG(nparts), CLB_ARG(a->shape.mem), CLB_ARG_DATA(o->data),
                  CLB_ARG(ctx->status), CLB_ARG(zero)};
  return clb__launch(ctx, op, what, k[1], a2, CLB_NARGS(a2), CLB_NARGS(a2) - 1, 1, local);
}

/* dim of a, negative counting from the end, as 0..rank-1; an error for a 0-d a. */
static clb_status check_dim(clb_context_t ctx, const char *op, clb_tensor_t a, int *dim) {
  if (*dim < -a->rank || *dim >= a->rank || a->rank == 0) {
    char desc[128];
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: dim %d is outside a %s of rank %d", op, *dim,
                          clb__tensor_desc(a, desc, sizeof desc), a->rank);
  }
  if (*dim < 0) *dim += a->rank;
  return CLB_OK;
}

clb_status clb_reduce_dim(clb_context_t ctx, clb_reduce_op rop, clb_tensor_t a, int dim, int keepdim,
                          clb_tensor_t *out) {
  const char *op = "reduce";
  clb_status st = check_args(ctx, &op, rop, a);
  if (st != CLB_OK) return st;
  if ((st = check_dim(ctx, op, a, &dim)) != CLB_OK) return st;
  clb_dtype odt = CLB_DTYPE_F32; /* reduce_types sets all three; initialized for -Wmaybe-uninitialized */
  const char *acc = "", *lowest = "";
  if ((st = reduce_types(ctx, op, rop, a->dtype, &odt, &acc, &lowest)) != CLB_OK) return st;
  int64_t ob[CLB_MAX_RANK];
  uint8_t od[CLB_MAX_RANK];
  int orank = 0;
  for (int d = 0; d < a->rank; d++) {
    if (d == dim) {
      if (keepdim) {
        ob[orank] = 1;
        od[orank++] = 0;
      }
    } else {
      ob[orank] = a->bound[d];
      od[orank++] = a->dyn[d];
    }
  }
  if ((st = clb__output(ctx, op, odt, orank, ob, od, out)) != CLB_OK) return st;
  clb_tensor_t o = *out;
  char opts[320];
  reduce_options(opts, sizeof opts, "RED_DIM", rop, a->dtype, odt, acc, lowest, a->rank);
  cl_kernel k;
  size_t local;
  if ((st = clb__kernel_get_local(ctx, op, "reduce", opts, "red_dim", &k, &local)) != CLB_OK) return st;
  cl_int cdim = dim, ckeep = keepdim != 0;
  cl_uint zero = 0;
  clb_arg args[] = {CLB_ARG_DATA(a->data), CLB_ARG(a->shape.mem), CLB_ARG_DATA(o->data), CLB_ARG(o->shape.mem),
                    CLB_ARG(cdim), CLB_ARG(ckeep), CLB_ARG(ctx->status), CLB_ARG(zero)};
  char what[192];
  clb__tensor_desc(a, what, sizeof what);
  snprintf(what + strlen(what), sizeof what - strlen(what), " dim %d", dim);
  return clb__launch(ctx, op, what, k, args, CLB_NARGS(args), CLB_NARGS(args) - 1, clb__groups_local(ctx, clb__numel(orank, ob), local), local);
}

clb_status clb_cumsum(clb_context_t ctx, clb_tensor_t a, int dim, clb_tensor_t *out) {
  const char *op = "cumsum";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "cumsum: ctx is NULL");
  clb_status st = clb__check_tensor(ctx, op, "a", a);
  if (st != CLB_OK) return st;
  if ((st = check_dim(ctx, op, a, &dim)) != CLB_OK) return st;
  clb_dtype odt = CLB_DTYPE_F32; /* reduce_types sets all three; initialized for -Wmaybe-uninitialized */
  const char *acc = "", *lowest = "";
  if ((st = reduce_types(ctx, op, CLB_REDUCE_SUM, a->dtype, &odt, &acc, &lowest)) != CLB_OK) return st;
  if ((st = clb__output(ctx, op, odt, a->rank, a->bound, a->dyn, out)) != CLB_OK) return st;
  clb_tensor_t o = *out;
  char opts[320];
  reduce_options(opts, sizeof opts, "RED_SCAN", CLB_REDUCE_SUM, a->dtype, odt, acc, lowest, a->rank);
  cl_kernel k;
  size_t local;
  if ((st = clb__kernel_get_local(ctx, op, "reduce", opts, "red_scan", &k, &local)) != CLB_OK) return st;
  cl_int cdim = dim;
  clb_arg args[] = {CLB_ARG_DATA(a->data), CLB_ARG(a->shape.mem), CLB_ARG_DATA(o->data), CLB_ARG(o->shape.mem),
                    CLB_ARG(cdim)};
  int64_t lines = clb_tensor_bound_numel(a) / (a->bound[dim] > 0 ? a->bound[dim] : 1);
  char what[192];
  clb__tensor_desc(a, what, sizeof what);
  snprintf(what + strlen(what), sizeof what - strlen(what), " dim %d", dim);
  return clb__launch(ctx, op, what, k, args, CLB_NARGS(args), -1, clb__groups_local(ctx, lines, local), local);
}
