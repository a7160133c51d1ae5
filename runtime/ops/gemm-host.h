/* gemm-host.h: the GEMM strategy a context resolves to (AUTO, CLBOUND_GEMM), and
 * host BLAS in the queue: a native kernel that reads M, N, K from the shape
 * records and calls CBLAS (runtime/ops/gemm-host.c; docs/gemm.md). */
#ifndef CLB_OPS_GEMM_HOST_H
#define CLB_OPS_GEMM_HOST_H

#include "runtime/core/core.h"

/* The strategy the context's matmuls run with now (never CLB_GEMM_AUTO): the
 * one set on the context, else CLBOUND_GEMM, else the measured choice for the
 * device; a HOST_BLAS that cannot run here becomes DEVICE. The first decision
 * per context is logged (CLBOUND_LOG=gemm) with its reason. *forced is set when
 * the context or CLBOUND_GEMM named the strategy. */
int clb__gemm_resolve(clb_context_t ctx, int *forced);

/* Whether host BLAS can run on the context's device; *why says why not. */
int clb__gemm_host_available(clb_context_t ctx, const char **why);

/* out = op(a) op(b) (+ bias, a row per output feature, or NULL) by a native
 * kernel in the queue: no host sync. M, N, K and the leading dimensions come from
 * the shape records; out's record is written [M, N]. A size past its bound is
 * clamped and raises CLB_STF_BOUND_EXCEEDED; K's that differ raise
 * CLB_STF_DEVICE_CHECK and the smaller is used, as the device kernels do. The
 * operands are already validated (gemm.c's gemm_setup). colsum (or NULL), of
 * a's dtype, [<= a's dim-1 bound]: also gets the sums of a's actual rows, one
 * per column, and its record [a's dim 1] (dbias of linear_backward, a = dy):
 * no separate reduction kernel. */
clb_status clb__gemm_host(clb_context_t ctx, const char *op, const char *what, clb_tensor_t a, int ta,
                          clb_tensor_t b, int tb, clb_tensor_t bias, clb_tensor_t out, clb_tensor_t colsum);
/* The same with relu != 0: a ReLU of the product plus bias (clb__linear_act). */
clb_status clb__gemm_host_act(clb_context_t ctx, const char *op, const char *what, clb_tensor_t a, int ta,
                              clb_tensor_t b, int tb, clb_tensor_t bias, int relu, clb_tensor_t out,
                              clb_tensor_t colsum);

/* runtime/ops/gemm-tune.c: before the context's first CLBlast call, sets the
 * device's tuned parameters from its tuning file (clbound/tuning.h) with
 * CLBlastOverrideParameters; a missing, damaged or foreign file is logged
 * (CLBOUND_LOG=gemm) and nothing is set. Once per context. */
void clb__tuning_apply(clb_context_t ctx);

#endif /* CLB_OPS_GEMM_HOST_H */
