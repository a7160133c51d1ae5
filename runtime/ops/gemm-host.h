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

/* One product of a host-BLAS native kernel: out = op(a) op(b) (+ bias, a row
 * per output feature, or NULL), then ReLU when relu != 0 (clb__linear_act), then
 * out *= (mask > 0) elementwise when mask is not NULL (the backward of a ReLU
 * whose input or output is mask, [out's rows, out's columns]: CLB_GRAD_RELU).
 * M, N, K and the leading dimensions come from the shape records; out's record
 * is written [M, N]. A size past its bound is clamped and raises
 * CLB_STF_BOUND_EXCEEDED; K's that differ (or a mask whose count differs from
 * out's) raise CLB_STF_DEVICE_CHECK and the smaller is used, as the device
 * kernels do. colsum (or NULL), of a's dtype, [<= a's dim-1 bound]: also gets
 * the sums of a's actual rows, one per column, and its record [a's dim 1]
 * (dbias of linear_backward, a = dy). The operands are already validated
 * (gemm.c's gemm_setup). batched: the same over a batch of matrices (dim 0 of
 * a, b and out; clb_bmm), out's record [batch, M, N], batch counts that differ
 * a CLB_STF_DEVICE_CHECK as K's. */
typedef struct clb_host_gemm {
  clb_tensor_t a, b, bias, out, colsum, mask;
  int ta, tb, relu;
  int batched; /* clb_bmm: a, b and out of rank 3, dim 0 the batch (no bias, colsum, mask or ReLU) */
  uint32_t launch; /* set by clb__gemm_host_run: the launch record its status bits name */
} clb_host_gemm;

/* The most products one native kernel runs. */
#define CLB_HOST_MAX_GEMM 4

/* jobs[0..n) (n <= CLB_HOST_MAX_GEMM) in order in ONE native kernel in the queue: no host sync,
 * one set of maps at most (none for buffers whose host pointer is known,
 * runtime/core/hostptr.c). While a merge is open (below) they join it instead. */
clb_status clb__gemm_host_run(clb_context_t ctx, const char *op, const char *what, const clb_host_gemm *jobs, int n);

/* Consecutive calls in one native kernel (a graph's backward: one linear
 * layer's after the layer above's): between clb__gemm_host_merge_begin and
 * clb__gemm_host_merge_end, clb__gemm_host_run keeps its products (a merge that
 * would pass CLB_HOST_MAX_GEMM is enqueued first and a new one started), and
 * end enqueues what is kept, in call order. The caller keeps the products'
 * tensors alive until end and enqueues nothing in between that touches their
 * buffers, other than the shape records of new tensors (which no kept product
 * reads: nothing is freed in between). End returns the enqueue's status. */
void clb__gemm_host_merge_begin(clb_context_t ctx);
clb_status clb__gemm_host_merge_end(clb_context_t ctx);

/* The most SGD steps one native kernel takes. */
#define CLB_HOST_MAX_SGD 16

/* The SGD steps of n parameters (p -= lr d, d = g, or d = momentum v + g kept
 * in v, over the actual counts; the arithmetic of kernels/nn.cl's nn_sgd) at the
 * end of the open merge's native kernel, after its products: 1 when kept
 * (nothing joins the merge after them), 0 when there is no open merge or it
 * cannot take them (too many, a dtype other than f32 or f64, a gradient or
 * velocity unlike its parameter): then the caller launches its own kernel,
 * after closing the merge. The caller marks p and v as outputs. */
int clb__gemm_host_sgd_join(clb_context_t ctx, const char *what, int n, const clb_tensor_t *p, const clb_tensor_t *g,
                            const clb_tensor_t *v, double lr, double momentum);

/* runtime/ops/gemm-tune.c: before the context's first CLBlast call, sets the
 * device's tuned parameters from its tuning file (clbound/tuning.h) with
 * CLBlastOverrideParameters; a missing, damaged or foreign file is logged
 * (CLBOUND_LOG=gemm) and nothing is set. Once per context. */
void clb__tuning_apply(clb_context_t ctx);

/* runtime/ops/gemm-tune.c: after a CLBlast GEMM at `precision` (32 or 64) on
 * ctx's device failed with `rc` (named rc_name): when rc is a failure that
 * kernel parameters can cause (CL_BUILD_PROGRAM_FAILURE, a work-group or local
 * memory too large) and tuning-file entries of that precision are in force on
 * the device, puts CLBlast's own parameters back for each (one program holds
 * all of GEMM's kernels, so the failure cannot be pinned on one), drops them
 * from their files (rewritten) and from this process, logs each (CLBOUND_LOG=gemm
 * and a warning on stderr naming the file and the kernel), writes "Xgemm, Copy
 * of tuning file F" into what[cap], and returns how many: the caller retries
 * once. 0 (nothing done) otherwise. */
int clb__tuning_revert(clb_context_t ctx, int precision, int rc, const char *rc_name, char *what, size_t cap);

#endif /* CLB_OPS_GEMM_HOST_H */
