/* loss.c: MSE, BCE, BCE with logits and cross-entropy, averaged over the
 * actual count read on the device, with their gradients. */
#include <stdio.h>
#include <string.h>

#include "clbound/nn.h"
#include "runtime/cache/cache.h"
#include "runtime/ops/fused.h"

static const char *const loss_names[CLB_LOSS_KIND_COUNT] = {"mse_loss", "bce_loss", "bce_with_logits_loss",
                                                            "cross_entropy_loss"};
static const char *const loss_macros[CLB_LOSS_KIND_COUNT] = {"LOSS_MSE", "LOSS_BCE", "LOSS_BCE_LOGITS", "LOSS_CE"};

/* The shapes a loss takes: elementwise kinds need as many elements at the bounds
 * in pred and target (matched in row-major order); cross-entropy needs pred
 * [M, C] and target [M] i64 with the same bound of M. */
static clb_status check_shapes(clb_context_t ctx, const char *op, clb_loss_kind kind, clb_tensor_t p, clb_tensor_t t) {
  char dp[128], dt[128];
  clb__tensor_desc(p, dp, sizeof dp);
  clb__tensor_desc(t, dt, sizeof dt);
  if (!clb__dtype_is_float(p->dtype))
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: pred %s must be f32 or f64", op, dp);
  if (kind == CLB_LOSS_CROSS_ENTROPY) {
    if (t->dtype != CLB_DTYPE_I64)
      return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: target %s must hold i64 class indices", op, dt);
    if (p->rank != 2 || t->rank != 1 || p->bound[0] != t->bound[0])
      return clb__set_error(ctx, CLB_ERR_SHAPE, "%s: pred %s and target %s must be [M, C] logits and [M] classes", op, dp, dt);
    return CLB_OK;
  }
  if (t->dtype != p->dtype) return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: dtypes differ: pred %s, target %s", op, dp, dt);
  if (clb_tensor_bound_numel(p) != clb_tensor_bound_numel(t))
    return clb__set_error(ctx, CLB_ERR_SHAPE, "%s: pred %s and target %s must hold as many elements at their bounds", op, dp, dt);
  return CLB_OK;
}

clb_status clb_loss(clb_context_t ctx, clb_loss_kind kind, clb_tensor_t pred, clb_tensor_t target,
                    clb_tensor_t *loss, clb_tensor_t *grad) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "loss: ctx is NULL");
  if ((unsigned)kind >= CLB_LOSS_KIND_COUNT) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "loss: unknown kind %d", (int)kind);
  const char *op = loss_names[kind];
  clb_status st = clb__check_tensor(ctx, op, "pred", pred);
  if (st == CLB_OK) st = clb__check_tensor(ctx, op, "target", target);
  if (st == CLB_OK) st = check_shapes(ctx, op, kind, pred, target);
  if (st != CLB_OK) return st;
  if (!loss) return clb__set_error(ctx, CLB_ERR_NULL, "%s: loss is NULL", op);
  if (grad && *grad && (*grad == target || *grad == *loss))
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: grad must not be the target or the loss", op);
  if ((st = clb__output(ctx, op, pred->dtype, 0, NULL, NULL, loss)) != CLB_OK) return st;
  if (grad && (st = clb__output(ctx, op, pred->dtype, pred->rank, pred->bound, pred->dyn, grad)) != CLB_OK) return st;
  clb_tensor_t l = *loss, g = grad ? *grad : NULL;
  char opts[256];
  snprintf(opts, sizeof opts, "-D %s -D T=%s%s%s", loss_macros[kind], clb__dtype_cl(pred->dtype),
           g ? " -D HAS_GRAD" : "", pred->dtype == CLB_DTYPE_F64 ? " -D CLB_NEED_FP64" : "");
  static const char *const names[] = {"loss_part", "loss_final"};
  cl_kernel k[2];
  size_t local;
  if ((st = clb__kernels_get_fixed(ctx, op, "loss", opts, 2, names, k, &local)) != CLB_OK) return st;
  int64_t items = kind == CLB_LOSS_CROSS_ENTROPY ? pred->bound[0] : clb_tensor_bound_numel(pred);
  size_t groups = clb__groups_local(ctx, items, local);
  char what[192], dp[96], dt[96];
  snprintf(what, sizeof what, "pred %s, target %s", clb__tensor_desc(pred, dp, sizeof dp), clb__tensor_desc(target, dt, sizeof dt));
  cl_int rp = pred->rank, rt = target->rank;
  cl_uint zero = 0;
  const clb_buf *gb = g ? &g->data : &l->data;
  cl_mem gs = g ? g->shape.mem : l->shape.mem;
  clb_arg a1[] = {CLB_ARG_DATA(pred->data), CLB_ARG(pred->shape.mem), CLB_ARG(rp), CLB_ARG_DATA(target->data),
                  CLB_ARG(target->shape.mem), CLB_ARG(rt), CLB_ARG_DATA(*gb), CLB_ARG(gs), CLB_ARG(ctx->scratch),
                  CLB_ARG(ctx->status), CLB_ARG(zero)};
  if ((st = clb__launch(ctx, op, what, k[0], a1, CLB_NARGS(a1), CLB_NARGS(a1) - 1, groups, local)) != CLB_OK) return st;
  cl_int nparts = (cl_int)groups;
  clb_arg a2[] = {CLB_ARG(ctx->scratch), CLB_ARG(nparts), CLB_ARG(pred->shape.mem), CLB_ARG(rp), CLB_ARG_DATA(l->data)};
  return clb__launch(ctx, op, what, k[1], a2, CLB_NARGS(a2), -1, 1, local);
}

static const char *const act_macros[CLB_UNARY_COUNT] = {"ACT_NEG", "ACT_RELU", "ACT_SIGMOID", "ACT_TANH",
                                                        "ACT_EXP", "ACT_LOG", "ACT_COPY", "ACT_ERF",
                                                        "ACT_ABS", "ACT_SQRT", "ACT_RSQRT", "ACT_LOG1P",
                                                        "ACT_EXPM1", "ACT_FLOOR", "ACT_CEIL", "ACT_ROUND",
                                                        "ACT_TRUNC", "ACT_SIN", "ACT_COS", "ACT_LOG2",
                                                        "ACT_LOG10", "ACT_EXP2"};

clb_status clb__loss_fused(clb_context_t ctx, clb_loss_kind kind, clb_unary_op act, clb_tensor_t z, clb_tensor_t target,
                           clb_tensor_t *y, clb_tensor_t *dz, clb_tensor_t *loss) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "loss (fused): ctx is NULL");
  if ((unsigned)kind >= CLB_LOSS_KIND_COUNT || kind == CLB_LOSS_CROSS_ENTROPY || (unsigned)act >= CLB_UNARY_COUNT)
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "loss (fused): kind %d with activation %d is not fused", (int)kind, (int)act);
  const char *op = loss_names[kind];
  clb_status st = clb__check_tensor(ctx, op, "z", z);
  if (st == CLB_OK) st = clb__check_tensor(ctx, op, "target", target);
  if (st == CLB_OK) st = check_shapes(ctx, op, kind, z, target);
  if (st != CLB_OK) return st;
  char dz_[128];
  if (clb_tensor_bound_numel(z) > CLB_LOSS_FUSED_MAX)
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s (fused): z %s holds more than %lld elements", op,
                          clb__tensor_desc(z, dz_, sizeof dz_), (long long)CLB_LOSS_FUSED_MAX);
  if ((st = clb__output(ctx, op, z->dtype, 0, NULL, NULL, loss)) != CLB_OK) return st;
  if (y && (st = clb__output(ctx, op, z->dtype, z->rank, z->bound, z->dyn, y)) != CLB_OK) return st;
  if ((st = clb__output(ctx, op, z->dtype, z->rank, z->bound, z->dyn, dz)) != CLB_OK) return st;
  char opts[256];
  snprintf(opts, sizeof opts, "-D %s -D LOSS_FUSED -D %s -D T=%s -D LOCAL=%zu%s%s", loss_macros[kind], act_macros[act],
           clb__dtype_cl(z->dtype), ctx->local_size, y ? " -D HAS_Y" : "", z->dtype == CLB_DTYPE_F64 ? " -D CLB_NEED_FP64" : "");
  cl_kernel k;
  if ((st = clb__kernel_get(ctx, op, "loss", opts, "loss_fused", &k)) != CLB_OK) return st;
  char what[192], dt[96];
  snprintf(what, sizeof what, "z %s, target %s (fused with its activation and gradient)", clb__tensor_desc(z, dz_, sizeof dz_),
           clb__tensor_desc(target, dt, sizeof dt));
  cl_int rz = z->rank, rt = target->rank;
  cl_uint zero = 0;
  clb_tensor_t yo = y ? *y : *dz;
  clb_arg a[] = {CLB_ARG_DATA(z->data),      CLB_ARG(z->shape.mem),     CLB_ARG(rz),
                 CLB_ARG_DATA(target->data), CLB_ARG(target->shape.mem), CLB_ARG(rt),
                 CLB_ARG_DATA(yo->data),     CLB_ARG(yo->shape.mem),    CLB_ARG_DATA((*dz)->data),
                 CLB_ARG((*dz)->shape.mem), CLB_ARG_DATA((*loss)->data), CLB_ARG(ctx->status),
                 CLB_ARG(zero)};
  return clb__launch(ctx, op, what, k, a, CLB_NARGS(a), CLB_NARGS(a) - 1, 1, ctx->local_size);
}
