/* clbound/nn.h: the ops an MLP trains with, forward and backward: matmul and
 * linear (CLBlast, or clbound's own kernel where a size is only on the device),
 * activation gradients, softmax, losses that average over the actual count, SGD.
 *
 * Outputs follow clbound/ops.h: *out NULL creates the output, else it is checked.
 * Every reduction over a dynamic dim (a batch of rows) covers the actual rows only
 * and divides by the actual count read on the device: the slack up to the bound
 * never leaks into a result. */
#ifndef CLB_NN_H
#define CLB_NN_H

#include "clbound/runtime.h"
#include "clbound/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- GEMM ------------------------------------------------------------------ */

/* How a matmul runs. CLBOUND_GEMM (auto, host-blas, kernel, clblast-bound,
 * sync-exact) forces one for a context left at AUTO (docs/gemm.md). */
typedef enum clb_gemm_strategy {
  CLB_GEMM_AUTO = 0,          /* measured per device class (docs/gemm.md): HOST_BLAS on a device that
                                 runs native kernels in a library built with OpenBLAS, else DEVICE */
  CLB_GEMM_CLBLAST_BOUND = 1, /* CLBlast over the bounds, the slack zeroed first */
  CLB_GEMM_SYNC_EXACT = 2,    /* one counted host sync reads the sizes, then CLBlast exactly */
  CLB_GEMM_DEVICE = 3,        /* clbound's kernel reads the sizes on the device, skips tiles past them;
                                 set explicitly, it also runs matmuls whose sizes are all host-known
                                 (which otherwise go to CLBlast) */
  CLB_GEMM_HOST_BLAS = 4,     /* CPU devices: a native kernel in the queue reads the sizes from the
                                 shape records and calls CBLAS (OpenBLAS) on the buffers, every
                                 matmul; where that is unavailable, DEVICE runs instead (logged) */
  CLB_GEMM_STRATEGY_COUNT = 5
} clb_gemm_strategy;

/* Sets the strategy of the context's matmuls (AUTO by default). A matmul whose
 * sizes are all static runs CLBlast directly unless the strategy is DEVICE or
 * HOST_BLAS (or AUTO resolves to HOST_BLAS). An unknown value is
 * CLB_ERR_INVALID_ARG. */
CLB_API clb_status clb_context_set_gemm_strategy(clb_context_t ctx, clb_gemm_strategy s);

/* The strategy a context's matmuls run with now: AUTO and a forced HOST_BLAS
 * that cannot run resolved (never CLB_GEMM_AUTO), or -1 when ctx is NULL. */
CLB_API int clb_context_gemm_strategy(clb_context_t ctx);

/* The host BLAS of HOST_BLAS, one line into buf (cap bytes, NUL-terminated,
 * cut to fit; *len, when not NULL, gets the full length): OpenBLAS's version
 * and build, "core NAME" (the kernels in force) and how that core was chosen
 * (OpenBLAS's own choice, OPENBLAS_CORETYPE, or clbound's for a CPU OpenBLAS
 * took for one without AVX; docs/gemm.md, "Which OpenBLAS kernels"), or "none:"
 * and why host BLAS cannot run. Loads OpenBLAS if no context has yet.
 * CLB_ERR_NULL when buf is NULL with cap > 0. */
CLB_API clb_status clb_host_blas_describe(char *buf, size_t cap, size_t *len);

/* out = op(a) @ op(b), op(x) = x^T when trans_x. f32, or f64 where the device has
 * it. op(a) is [M, K], op(b) is [K, N]: any of them may be dynamic; K's bounds
 * must be equal and its actual sizes are checked on the device (a mismatch is a
 * deferred CLB_ERR_DEVICE_CHECK; SYNC_EXACT returns it at once). out is [M, N]
 * and must not be a or b. A zero-sized M or N writes nothing; K = 0 gives zeros.
 * Host syncs: none, except one per call under SYNC_EXACT. CLBLAST_BOUND zeroes
 * the slack rows of a dynamic K in the inputs' buffers (their slack is not live
 * data) and writes out's rows up to the bound of M (never past it). */
CLB_API clb_status clb_matmul(clb_context_t ctx, clb_tensor_t a, int trans_a, clb_tensor_t b,
                              int trans_b, clb_tensor_t *out);

/* out[i] = op(a[i]) @ op(b[i]) for each matrix i of a batch (torch.bmm), op as in
 * clb_matmul on the last two dims. a and b are rank 3 with equal batch bounds;
 * op(a[i]) is [M, K], op(b[i]) is [K, N]; any dim may be dynamic. The actual
 * batch counts and K are checked on the device (a mismatch is a deferred
 * CLB_ERR_DEVICE_CHECK). out is [batch, M, N] (its batch dynamic when either
 * operand's is) and must not be a or b. Host BLAS's native kernel under
 * HOST_BLAS (CPU devices), clbound's kernel otherwise (docs/gemm.md, "Batched
 * products"). Host syncs: none. */
CLB_API clb_status clb_bmm(clb_context_t ctx, clb_tensor_t a, int trans_a, clb_tensor_t b, int trans_b,
                           clb_tensor_t *out);

/* y = x W^T + bias. x [M, in], w [features, in], bias [features] (dynamic exactly
 * when w's features dim is) or NULL. Under the DEVICE strategy the bias is added
 * by the GEMM kernel itself. */
CLB_API clb_status clb_linear(clb_context_t ctx, clb_tensor_t x, clb_tensor_t w, clb_tensor_t bias,
                              clb_tensor_t *out);

/* Gradients of clb_linear given dy [M, features]: dx = dy W, dw = dy^T x (a sum
 * over the actual rows), dbias = the sum of dy's actual rows. Pass NULL for a
 * gradient that is not needed; w may be NULL when dx is (the first layer's
 * backward, whose dx nobody reads). */
CLB_API clb_status clb_linear_backward(clb_context_t ctx, clb_tensor_t x, clb_tensor_t w,
                                       clb_tensor_t dy, clb_tensor_t *dx, clb_tensor_t *dw,
                                       clb_tensor_t *dbias);

/* clb_linear with an activation in the same op: y = act(x W^T + bias), act one
 * of CLB_UNARY_RELU, CLB_UNARY_SIGMOID, CLB_UNARY_TANH, CLB_UNARY_EXP (applied by
 * the GEMM itself where the strategy can: host BLAS's epilogue for ReLU, the
 * DEVICE kernel's for all four; elsewhere a unary op after it). Another act is
 * CLB_ERR_INVALID_ARG. */
CLB_API clb_status clb_linear_act(clb_context_t ctx, clb_tensor_t x, clb_tensor_t w, clb_tensor_t bias,
                                  clb_unary_op act, clb_tensor_t *out);

/* clb_linear_backward where x is also the output of a ReLU (the layer below's
 * activation): dx gets that ReLU's backward too, dx = x > 0 ? dy W : 0 (host
 * BLAS: in the same native kernel; elsewhere a relu_backward after the
 * product). dw and dbias are clb_linear_backward's. */
CLB_API clb_status clb_linear_backward_relu(clb_context_t ctx, clb_tensor_t x, clb_tensor_t w,
                                            clb_tensor_t dy, clb_tensor_t *dx, clb_tensor_t *dw,
                                            clb_tensor_t *dbias);

/* ---- Activations ----------------------------------------------------------- */

/* dx = dy * op'(...), for every clb_unary_op. x is the op's input and y its
 * output: RELU, LOG, ERF, ABS, LOG1P, SIN, COS, LOG2 and LOG10 read x, SIGMOID,
 * TANH, EXP, SQRT, RSQRT, EXPM1 and EXP2 read y; the other may be NULL (both,
 * for the rest). ABS's is PyTorch's, dy * sgn(x): 0 at 0 and at NaN; FLOOR's,
 * CEIL's, ROUND's and TRUNC's is 0, as PyTorch's. */
CLB_API clb_status clb_unary_backward(clb_context_t ctx, clb_unary_op op, clb_tensor_t x,
                                      clb_tensor_t y, clb_tensor_t dy, clb_tensor_t *dx);

/* Softmax (log_softmax when `log`) over the last dim, at the actual sizes. */
CLB_API clb_status clb_softmax(clb_context_t ctx, clb_tensor_t x, int log, clb_tensor_t *out);
/* Its gradient from the forward output y and dy. */
CLB_API clb_status clb_softmax_backward(clb_context_t ctx, clb_tensor_t y, clb_tensor_t dy, int log,
                                        clb_tensor_t *dx);

/* ---- Losses ---------------------------------------------------------------- */

typedef enum clb_loss_kind {
  CLB_LOSS_MSE = 0,               /* (p - t)^2 */
  CLB_LOSS_BCE = 1,               /* -(t log p + (1 - t) log(1 - p)), logs clamped at -100 as in PyTorch */
  CLB_LOSS_BCE_WITH_LOGITS = 2,   /* the same on sigmoid(p), computed stably */
  CLB_LOSS_CROSS_ENTROPY = 3,     /* p [M, C] logits, t [M] i64 class indices */
  CLB_LOSS_KIND_COUNT = 4
} clb_loss_kind;

/* loss (0-d, pred's dtype) = the mean of the per-element loss over the actual
 * elements (actual rows for cross-entropy); an empty batch gives NaN, as
 * PyTorch's mean of nothing. grad (NULL to skip) = d loss / d pred, pred's shape,
 * already divided by that count (BCE's as PyTorch's: divided by at least 1e-12).
 * Elementwise kinds: target has pred's dtype and as many elements at the bounds,
 * matched in row-major order (a [<=B, 1] prediction against [<=B] labels).
 * Cross-entropy: pred [M, C], target [M] i64; a class outside [0, C) raises
 * CLB_ERR_BOUND_EXCEEDED at the next sync ("index 7 is outside [0, 5)") and its row
 * adds nothing to the sum, which is still divided by all the actual rows.
 * Actual counts that differ are a deferred CLB_ERR_DEVICE_CHECK. No host sync. */
CLB_API clb_status clb_loss(clb_context_t ctx, clb_loss_kind kind, clb_tensor_t pred,
                            clb_tensor_t target, clb_tensor_t *loss, clb_tensor_t *grad);

/* ---- Optimizer ------------------------------------------------------------- */

/* In place: v = momentum * v + grad (when velocity is not NULL; the caller
 * zero-fills it once), param -= lr * (velocity ? v : grad). lr and momentum are
 * kernel arguments: changing them builds nothing. */
CLB_API clb_status clb_sgd_step(clb_context_t ctx, clb_tensor_t param, clb_tensor_t grad,
                                clb_tensor_t velocity, double lr, double momentum);

#ifdef __cplusplus
}
#endif
#endif /* CLB_NN_H */
