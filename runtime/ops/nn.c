/* nn.c: activation gradients, softmax and its gradient, and the SGD step. */
#include <stdio.h>
#include <string.h>

#include "clbound/nn.h"
#include "runtime/cache/cache.h"

static const char *const bwd_names[CLB_UNARY_COUNT] = {"neg_backward", "relu_backward", "sigmoid_backward",
                                                       "tanh_backward", "exp_backward", "log_backward",
                                                       "copy_backward", "erf_backward", "abs_backward",
                                                       "sqrt_backward", "rsqrt_backward", "log1p_backward",
                                                       "expm1_backward", "floor_backward", "ceil_backward",
                                                       "round_backward", "trunc_backward", "sin_backward",
                                                       "cos_backward", "log2_backward", "log10_backward",
                                                       "exp2_backward"};
static const char *const bwd_macros[CLB_UNARY_COUNT] = {"OP_NEG", "OP_RELU", "OP_SIGMOID", "OP_TANH",
                                                        "OP_EXP", "OP_LOG", "OP_COPY", "OP_ERF", "OP_ABS",
                                                        "OP_SQRT", "OP_RSQRT", "OP_LOG1P", "OP_EXPM1", "OP_FLOOR",
                                                        "OP_CEIL", "OP_ROUND", "OP_TRUNC", "OP_SIN", "OP_COS",
                                                        "OP_LOG2", "OP_LOG10", "OP_EXP2"};

static const char *fp64_opt(clb_dtype dt) { return dt == CLB_DTYPE_F64 ? " -D CLB_NEED_FP64" : ""; }

/* A floating tensor of this context. */
static clb_status check_float(clb_context_t ctx, const char *op, const char *name, clb_tensor_t t) {
  clb_status st = clb__check_tensor(ctx, op, name, t);
  if (st != CLB_OK) return st;
  if (!clb__dtype_is_float(t->dtype))
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: %s is %s; the op takes f32 or f64", op, name, clb_dtype_name(t->dtype));
  return CLB_OK;
}

/* u must have ref's dtype, rank and bounds. */
static clb_status check_like(clb_context_t ctx, const char *op, const char *un, clb_tensor_t u, const char *rn,
                             clb_tensor_t ref) {
  char du[128], dr[128];
  clb__tensor_desc(u, du, sizeof du);
  clb__tensor_desc(ref, dr, sizeof dr);
  if (u->dtype != ref->dtype)
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: dtypes differ: %s %s, %s %s", op, un, du, rn, dr);
  int same = u->rank == ref->rank;
  for (int d = 0; same && d < u->rank; d++) same = u->bound[d] == ref->bound[d];
  if (!same) return clb__set_error(ctx, CLB_ERR_SHAPE, "%s: %s %s and %s %s must have the same bounds", op, un, du, rn, dr);
  return CLB_OK;
}

clb_status clb_unary_backward(clb_context_t ctx, clb_unary_op uop, clb_tensor_t x, clb_tensor_t y,
                              clb_tensor_t dy, clb_tensor_t *dx) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "unary_backward: ctx is NULL");
  if ((unsigned)uop >= CLB_UNARY_COUNT)
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "unary_backward: unknown op %d", (int)uop);
  const char *op = bwd_names[uop];
  clb_status st = check_float(ctx, op, "dy", dy);
  if (st != CLB_OK) return st;
  int reads_x = uop == CLB_UNARY_RELU || uop == CLB_UNARY_LOG || uop == CLB_UNARY_ERF || uop == CLB_UNARY_ABS ||
                uop == CLB_UNARY_LOG1P || uop == CLB_UNARY_SIN || uop == CLB_UNARY_COS || uop == CLB_UNARY_LOG2 ||
                uop == CLB_UNARY_LOG10;
  int reads_y = uop == CLB_UNARY_SIGMOID || uop == CLB_UNARY_TANH || uop == CLB_UNARY_EXP || uop == CLB_UNARY_SQRT ||
                uop == CLB_UNARY_RSQRT || uop == CLB_UNARY_EXPM1 || uop == CLB_UNARY_EXP2;
  clb_tensor_t v = dy;
  if (reads_x || reads_y) {
    v = reads_x ? x : y;
    const char *vn = reads_x ? "x" : "y";
    if (!v) return clb__set_error(ctx, CLB_ERR_NULL, "%s: needs the op's %s (the %s), which is NULL", op, vn,
                                  reads_x ? "input" : "output");
    if ((st = clb__check_tensor(ctx, op, vn, v)) != CLB_OK) return st;
    if ((st = check_like(ctx, op, vn, v, "dy", dy)) != CLB_OK) return st;
  }
  if ((st = clb__output(ctx, op, dy->dtype, dy->rank, dy->bound, dy->dyn, dx)) != CLB_OK) return st;
  clb_tensor_t o = *dx;
  char opts[160];
  snprintf(opts, sizeof opts, "-D NN_UNARY_BWD -D T=%s -D %s%s", clb__dtype_cl(dy->dtype), bwd_macros[uop],
           fp64_opt(dy->dtype));
  cl_kernel k;
  size_t local = 0;
  if ((st = clb__kernel_get_local(ctx, op, "nn", opts, "nn_unary_bwd", &k, &local)) != CLB_OK) return st;
  cl_int rank = dy->rank;
  cl_uint zero = 0;
  clb_arg args[] = {CLB_ARG_DATA(v->data), CLB_ARG(v->shape.mem), CLB_ARG_DATA(dy->data), CLB_ARG(dy->shape.mem),
                    CLB_ARG(rank),        CLB_ARG_DATA(o->data), CLB_ARG(o->shape.mem),  CLB_ARG(ctx->status),
                    CLB_ARG(zero)};
  char what[192];
  clb__tensor_desc(dy, what, sizeof what);
  return clb__launch(ctx, op, what, k, args, CLB_NARGS(args), CLB_NARGS(args) - 1, clb__groups_local(ctx, clb_tensor_bound_numel(dy), local), local);
}

/* Rows of the last dim at the bounds: how many work-items a row kernel needs. */
static int64_t bound_rows(clb_tensor_t t) {
  int64_t c = t->rank > 0 ? t->bound[t->rank - 1] : 1;
  return c > 0 ? clb_tensor_bound_numel(t) / c : 0;
}

clb_status clb_softmax(clb_context_t ctx, clb_tensor_t x, int log, clb_tensor_t *out) {
  const char *op = log ? "log_softmax" : "softmax";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_status st = check_float(ctx, op, "x", x);
  if (st != CLB_OK) return st;
  char dx[128];
  if (x->rank < 1)
    return clb__set_error(ctx, CLB_ERR_SHAPE, "%s: x %s is 0-d; the op runs over the last dim", op, clb__tensor_desc(x, dx, sizeof dx));
  if ((st = clb__output(ctx, op, x->dtype, x->rank, x->bound, x->dyn, out)) != CLB_OK) return st;
  clb_tensor_t o = *out;
  char opts[160];
  snprintf(opts, sizeof opts, "-D NN_SOFTMAX -D T=%s%s%s", clb__dtype_cl(x->dtype), log ? " -D LOG" : "", fp64_opt(x->dtype));
  cl_kernel k;
  size_t local = 0;
  if ((st = clb__kernel_get_local(ctx, op, "nn", opts, "nn_softmax", &k, &local)) != CLB_OK) return st;
  cl_int rank = x->rank;
  clb_arg args[] = {CLB_ARG_DATA(x->data), CLB_ARG(x->shape.mem), CLB_ARG(rank), CLB_ARG_DATA(o->data), CLB_ARG(o->shape.mem)};
  clb__tensor_desc(x, dx, sizeof dx);
  return clb__launch(ctx, op, dx, k, args, CLB_NARGS(args), -1, clb__groups_local(ctx, bound_rows(x), local), local);
}

clb_status clb_softmax_backward(clb_context_t ctx, clb_tensor_t y, clb_tensor_t dy, int log, clb_tensor_t *dx) {
  const char *op = log ? "log_softmax_backward" : "softmax_backward";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_status st = check_float(ctx, op, "y", y);
  if (st == CLB_OK) st = check_float(ctx, op, "dy", dy);
  if (st == CLB_OK) st = check_like(ctx, op, "y", y, "dy", dy);
  if (st != CLB_OK) return st;
  char dd[128];
  if (dy->rank < 1)
    return clb__set_error(ctx, CLB_ERR_SHAPE, "%s: dy %s is 0-d; the op runs over the last dim", op, clb__tensor_desc(dy, dd, sizeof dd));
  if ((st = clb__output(ctx, op, dy->dtype, dy->rank, dy->bound, dy->dyn, dx)) != CLB_OK) return st;
  clb_tensor_t o = *dx;
  char opts[160];
  snprintf(opts, sizeof opts, "-D NN_SOFTMAX_BWD -D T=%s%s%s", clb__dtype_cl(dy->dtype), log ? " -D LOG" : "",
           fp64_opt(dy->dtype));
  cl_kernel k;
  size_t local = 0;
  if ((st = clb__kernel_get_local(ctx, op, "nn", opts, "nn_softmax_bwd", &k, &local)) != CLB_OK) return st;
  cl_int rank = dy->rank;
  cl_uint zero = 0;
  clb_arg args[] = {CLB_ARG_DATA(y->data), CLB_ARG(y->shape.mem), CLB_ARG_DATA(dy->data), CLB_ARG(dy->shape.mem),
                    CLB_ARG(rank),       CLB_ARG_DATA(o->data), CLB_ARG(o->shape.mem),  CLB_ARG(ctx->status),
                    CLB_ARG(zero)};
  clb__tensor_desc(dy, dd, sizeof dd);
  return clb__launch(ctx, op, dd, k, args, CLB_NARGS(args), CLB_NARGS(args) - 1, clb__groups_local(ctx, bound_rows(dy), local), local);
}

clb_status clb_sgd_step(clb_context_t ctx, clb_tensor_t param, clb_tensor_t grad, clb_tensor_t velocity, double lr,
                        double momentum) {
  static const char *op = "sgd_step";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_status st = check_float(ctx, op, "param", param);
  if (st == CLB_OK) st = check_float(ctx, op, "grad", grad);
  if (st == CLB_OK) st = check_like(ctx, op, "grad", grad, "param", param);
  if (st == CLB_OK && velocity) {
    if ((st = clb__check_tensor(ctx, op, "velocity", velocity)) == CLB_OK)
      st = check_like(ctx, op, "velocity", velocity, "param", param);
  }
  if (st != CLB_OK) return st;
  clb__note_output(ctx, op, param);
  if (velocity) clb__note_output(ctx, op, velocity);
  char opts[160];
  snprintf(opts, sizeof opts, "-D NN_SGD -D T=%s%s%s", clb__dtype_cl(param->dtype), velocity ? " -D HAS_VEL" : "",
           fp64_opt(param->dtype));
  cl_kernel k;
  size_t local = 0;
  if ((st = clb__kernel_get_local(ctx, op, "nn", opts, "nn_sgd", &k, &local)) != CLB_OK) return st;
  cl_int rank = param->rank;
  cl_uint zero = 0;
  const clb_buf *vel = velocity ? &velocity->data : &param->data;
  union {
    float f;
    double d;
  } vlr, vmom;
  size_t vs = clb_dtype_size(param->dtype);
  if (param->dtype == CLB_DTYPE_F64) {
    vlr.d = lr;
    vmom.d = momentum;
  } else {
    vlr.f = (float)lr;
    vmom.f = (float)momentum;
  }
  clb_arg args[] = {CLB_ARG_DATA(param->data), CLB_ARG(param->shape.mem), CLB_ARG_DATA(grad->data),
                    CLB_ARG(grad->shape.mem),  CLB_ARG(rank),              CLB_ARG_DATA(*vel),
                    {vs, &vlr},                {vs, &vmom},                CLB_ARG(ctx->status),
                    CLB_ARG(zero)};
  char what[192];
  clb__tensor_desc(param, what, sizeof what);
  return clb__launch(ctx, op, what, k, args, CLB_NARGS(args), CLB_NARGS(args) - 1, clb__groups_local(ctx, clb_tensor_bound_numel(param), local), local);
}
