/* fused.h: runtime/ops, ops fused with their neighbours for the graph executor
 * (runtime/graph/fuse.c, run.c): a loss with the activation before it, a linear
 * layer with the activation after it, a select op with the reshape after it. */
#ifndef CLB_OPS_FUSED_H
#define CLB_OPS_FUSED_H

#include "clbound/dataops.h"
#include "clbound/nn.h"

/* clb_nonzero / clb_masked_select into *out, and the view clb_reshape(*out,
 * vrank, vspec) into *view, whose record the same launch writes: a later
 * clb_reshape(*out, vrank, vspec, view) then launches nothing (a dynamic
 * view; a static one is written once anyway). runtime/ops/select.c. */
clb_status clb__nonzero_view(clb_context_t ctx, clb_tensor_t x, clb_tensor_t *out, int vrank, const int64_t *vspec,
                             clb_tensor_t *view);
clb_status clb__masked_select_view(clb_context_t ctx, clb_tensor_t x, clb_tensor_t mask, clb_tensor_t *out, int vrank,
                                   const int64_t *vspec, clb_tensor_t *view);
/* clb_nonzero with the indices written as dtype (i64, i32, f32 or f64): what
 * clb_cast(clb_nonzero(x), dtype) gives, in nonzero's launch; a graph whose
 * nonzero is read by one cast alone runs this (runtime/graph/fuse.c). */
clb_status clb__nonzero_as(clb_context_t ctx, clb_tensor_t x, clb_dtype dtype, clb_tensor_t *out);

/* The most elements clb__loss_fused takes: it sums in one work-group. */
#define CLB_LOSS_FUSED_MAX ((int64_t)1 << 16)

/* loss(act(z), target) into *loss (0-d), with act(z) into *y when y is not
 * NULL, and d loss / d z into *dz, in one launch: what clb_unary, clb_loss with
 * its gradient and clb_unary_backward compute. Elementwise loss kinds only (not
 * cross-entropy), z of at most CLB_LOSS_FUSED_MAX elements at its bounds. */
clb_status clb__loss_fused(clb_context_t ctx, clb_loss_kind kind, clb_unary_op act, clb_tensor_t z, clb_tensor_t target,
                           clb_tensor_t *y, clb_tensor_t *dz, clb_tensor_t *loss);

/* act(x w^T + bias) into *out: clb_linear with the activation as its epilogue
 * (RELU, SIGMOID, TANH or EXP): in clbound's GEMM kernel, in the host-BLAS
 * native kernel for RELU, else an in-place activation launch right after the
 * product. The pre-activation is not kept: the activation's gradient reads y. */
clb_status clb__linear_act(clb_context_t ctx, clb_tensor_t x, clb_tensor_t w, clb_tensor_t bias, clb_unary_op act,
                           clb_tensor_t *out);

/* clb_linear_backward where x is the output of a ReLU (the layer below's
 * activation) and *dx is to be the gradient of the ReLU's INPUT: dx = dy w where
 * x > 0, else 0 (CLB_GRAD_RELU: y > 0 exactly where the ReLU's input is > 0).
 * Under host BLAS, dx with that mask, dW and dbias are one native kernel; under
 * the other strategies dx's product is followed by clb_unary_backward. */
clb_status clb__linear_backward_relu(clb_context_t ctx, clb_tensor_t x, clb_tensor_t w, clb_tensor_t dy, clb_tensor_t *dx,
                                     clb_tensor_t *dw, clb_tensor_t *dbias);

#endif /* CLB_OPS_FUSED_H */
