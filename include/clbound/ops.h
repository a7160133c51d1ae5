/* clbound/ops.h: eager ops on bounded tensors (elementwise, comparisons, casts,
 * reductions).
 *
 * Every op reads the actual sizes of its inputs from their shape records on the
 * device and writes its output's actual sizes there too: no op waits for the host
 * or makes the host wait. Launch geometry depends only on bounds, so a new actual
 * size never builds a program.
 *
 * Outputs: `out` points to a tensor handle. If *out is NULL the op creates the
 * output (owned by the caller); otherwise *out must have the op's dtype and rank
 * and, per dim, a bound at least the one the op needs; a dim whose actual size can
 * vary must be dynamic in *out. The output may be one of the inputs when the shapes
 * allow it (in place). */
#ifndef CLB_OPS_H
#define CLB_OPS_H

#include "clbound/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Elementwise ------------------------------------------------------------
 *
 * Binary ops broadcast like PyTorch, decided from the bounds: a static dim of 1
 * (or a missing leading dim) broadcasts; otherwise the two dims must have equal
 * bounds, and their actual sizes are checked on the device. A mismatch there is
 * a deferred check: it raises a sticky error returned by the next host sync, and
 * the op uses the smaller size so nothing is read or written past a bound. */

typedef enum clb_binary_op {
  CLB_BINARY_ADD = 0,
  CLB_BINARY_SUB = 1,
  CLB_BINARY_MUL = 2,
  CLB_BINARY_DIV = 3, /* floating dtypes only */
  CLB_BINARY_REM = 4, /* Python's modulo: the result has the divisor's sign; an
                         integer division by zero raises CLB_ERR_DIV_ZERO at sync */
  CLB_BINARY_MAX = 5,
  CLB_BINARY_MIN = 6,
  CLB_BINARY_COUNT = 7
} clb_binary_op;

typedef enum clb_unary_op {
  CLB_UNARY_NEG = 0,
  CLB_UNARY_RELU = 1,
  CLB_UNARY_SIGMOID = 2, /* floating dtypes only, as are tanh, exp and log */
  CLB_UNARY_TANH = 3,
  CLB_UNARY_EXP = 4,
  CLB_UNARY_LOG = 5,
  CLB_UNARY_COPY = 6,
  CLB_UNARY_COUNT = 7
} clb_unary_op;

/* out = a <op> b. a and b must have the same dtype; bool takes none of these. */
CLB_API clb_status clb_binary(clb_context_t ctx, clb_binary_op op, clb_tensor_t a,
                              clb_tensor_t b, clb_tensor_t *out);
CLB_API clb_status clb_add(clb_context_t ctx, clb_tensor_t a, clb_tensor_t b, clb_tensor_t *out);
CLB_API clb_status clb_sub(clb_context_t ctx, clb_tensor_t a, clb_tensor_t b, clb_tensor_t *out);
CLB_API clb_status clb_mul(clb_context_t ctx, clb_tensor_t a, clb_tensor_t b, clb_tensor_t *out);
CLB_API clb_status clb_div(clb_context_t ctx, clb_tensor_t a, clb_tensor_t b, clb_tensor_t *out);
CLB_API clb_status clb_remainder(clb_context_t ctx, clb_tensor_t a, clb_tensor_t b,
                                 clb_tensor_t *out);

/* Comparisons: out = a <op> b as a bool tensor, broadcast as clb_binary does
 * (the same deferred check on actual sizes). a and b must have the same dtype;
 * every dtype takes them, bool included (false < true). A NaN compares false
 * with everything except by CLB_COMPARE_NE, which gives true, as in IEEE 754,
 * numpy and PyTorch. */
typedef enum clb_compare_op {
  CLB_COMPARE_EQ = 0,
  CLB_COMPARE_NE = 1,
  CLB_COMPARE_LT = 2,
  CLB_COMPARE_LE = 3,
  CLB_COMPARE_GT = 4,
  CLB_COMPARE_GE = 5,
  CLB_COMPARE_COUNT = 6
} clb_compare_op;

CLB_API clb_status clb_compare(clb_context_t ctx, clb_compare_op op, clb_tensor_t a,
                               clb_tensor_t b, clb_tensor_t *out);

/* out = op(a), same dtype and shape. */
CLB_API clb_status clb_unary(clb_context_t ctx, clb_unary_op op, clb_tensor_t a,
                             clb_tensor_t *out);

/* Sets every live element of t (at its actual sizes) to `value`, converted to
 * t's dtype as a C cast would (bool: value != 0). */
CLB_API clb_status clb_fill(clb_context_t ctx, clb_tensor_t t, double value);

/* out = a converted to `dtype` (any pair of dtypes; to bool: x != 0; float to
 * integer truncates toward zero). */
CLB_API clb_status clb_cast(clb_context_t ctx, clb_tensor_t a, clb_dtype dtype,
                            clb_tensor_t *out);

/* ---- Views --------------------------------------------------------------------
 *
 * A view of x's data with another shape, without a copy. `spec` has `rank`
 * entries: a static size >= 0, or -1 (at most one) for the dim that takes the
 * remaining elements. That dim is dynamic when x has a dynamic dim; its bound is
 * x's element bound divided by the product of the static sizes. The actual sizes
 * are computed on the device from x's; an actual element count that the static
 * sizes do not divide raises a deferred device check. The view keeps x's data
 * alive: either may be freed first. A view of a graph's tensor
 * (clb_graph_tensor) keeps that run's data: the graph's next run gives it a
 * copy of its own before rewriting the buffer. *out must be NULL, or a view of x made by
 * an earlier clb_reshape with the same spec (a graph re-running the op). */
CLB_API clb_status clb_reshape(clb_context_t ctx, clb_tensor_t x, int rank, const int64_t *spec,
                               clb_tensor_t *out);

/* ---- Reductions -------------------------------------------------------------
 *
 * sum: integer and bool inputs give i64, floating inputs keep their dtype.
 * mean: floating dtypes only; divides by the actual count read on the device (an
 * empty extent gives NaN, as in PyTorch). max: keeps the dtype; an empty extent
 * raises CLB_ERR_EMPTY_REDUCE at the next sync. Floating sums use compensated
 * (Kahan) accumulation. */

typedef enum clb_reduce_op {
  CLB_REDUCE_SUM = 0,
  CLB_REDUCE_MEAN = 1,
  CLB_REDUCE_MAX = 2,
  CLB_REDUCE_COUNT = 3
} clb_reduce_op;

/* Reduces over every element: out is 0-d. */
CLB_API clb_status clb_reduce_all(clb_context_t ctx, clb_reduce_op op, clb_tensor_t a,
                                  clb_tensor_t *out);

/* Reduces over dim `dim` (negative counts from the end). keepdim keeps it as a
 * static 1. */
CLB_API clb_status clb_reduce_dim(clb_context_t ctx, clb_reduce_op op, clb_tensor_t a,
                                  int dim, int keepdim, clb_tensor_t *out);

#ifdef __cplusplus
}
#endif
#endif /* CLB_OPS_H */
