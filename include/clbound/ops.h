/* clbound/ops.h: eager ops on bounded tensors (elementwise, comparisons, casts,
 * views, indexing, reductions).
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
  CLB_BINARY_POW = 7,      /* C's pow(x, y); floating dtypes only */
  CLB_BINARY_FLOORDIV = 8, /* Python's floor division (numpy's floor_divide): the
                              quotient rounded toward -inf; an integer division by
                              zero raises CLB_ERR_DIV_ZERO at sync, a floating one
                              gives x / y (inf or nan), as numpy does */
  CLB_BINARY_COUNT = 9
} clb_binary_op;

typedef enum clb_unary_op {
  CLB_UNARY_NEG = 0,
  CLB_UNARY_RELU = 1,
  CLB_UNARY_SIGMOID = 2, /* floating dtypes only, as are tanh, exp, log and 7-21 */
  CLB_UNARY_TANH = 3,
  CLB_UNARY_EXP = 4,
  CLB_UNARY_LOG = 5,
  CLB_UNARY_COPY = 6,
  CLB_UNARY_ERF = 7, /* the error function (C's erf): GELU's building block */
  CLB_UNARY_ABS = 8, /* |x| (fabs: -0 gives +0) */
  CLB_UNARY_SQRT = 9,
  /* erf, abs, sqrt, rsqrt (1 / sqrt(x)), log1p and expm1: floating only */
  CLB_UNARY_RSQRT = 10,
  CLB_UNARY_LOG1P = 11, /* log(1 + x), exact for small x */
  CLB_UNARY_EXPM1 = 12, /* exp(x) - 1, exact for small x */
  /* rounding to an integral value, in the input's dtype: floor, ceil, round
   * (to nearest, ties to even: torch.round and numpy.round, C's rint), trunc
   * (toward zero); their gradient is 0 */
  CLB_UNARY_FLOOR = 13,
  CLB_UNARY_CEIL = 14,
  CLB_UNARY_ROUND = 15,
  CLB_UNARY_TRUNC = 16,
  CLB_UNARY_SIN = 17, /* radians */
  CLB_UNARY_COS = 18,
  CLB_UNARY_LOG2 = 19,
  CLB_UNARY_LOG10 = 20,
  CLB_UNARY_EXP2 = 21, /* 2^x */
  CLB_UNARY_COUNT = 22
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
CLB_API clb_status clb_pow(clb_context_t ctx, clb_tensor_t a, clb_tensor_t b, clb_tensor_t *out);
CLB_API clb_status clb_floor_divide(clb_context_t ctx, clb_tensor_t a, clb_tensor_t b, clb_tensor_t *out);

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

/* out = cond ? a : b elementwise (numpy.where, torch.where): cond bool, a and b
 * of one dtype (any, bool included), the three broadcast as clb_binary's two
 * (a mismatch of actual sizes is a deferred check on the device). out has a's
 * dtype. One launch, no host sync. */
CLB_API clb_status clb_where(clb_context_t ctx, clb_tensor_t cond, clb_tensor_t a, clb_tensor_t b,
                             clb_tensor_t *out);

/* out = op(a), same dtype and shape. */
CLB_API clb_status clb_unary(clb_context_t ctx, clb_unary_op op, clb_tensor_t a,
                             clb_tensor_t *out);

/* A new tensor of dtype f32 or f64 shaped like `like` (its bounds, dynamic
 * flags and actual sizes; like's data and dtype are not used) holding uniform
 * numbers in [0, 1). Element i (row-major over the actual sizes) comes from
 * Philox4x32-10 (Salmon et al., SC'11; cuRAND's and Random123's generator) of
 * the counter {i mod 2^32, i / 2^32, 0, 0} under the key {seed mod 2^32, seed
 * / 2^32}: the first word's top 24 bits over 2^24 for f32, 27 bits of the
 * first word and 26 of the second over 2^53 for f64. The numbers are a function
 * of (i, seed) alone: the same on every device and work-group size. A new
 * seed per call gives new numbers (dropout's masks, torch.rand_like). */
CLB_API clb_status clb_rand_uniform(clb_context_t ctx, clb_tensor_t like, clb_dtype dtype, uint64_t seed,
                                    clb_tensor_t *out);

/* Sets every live element of t (at its actual sizes) to `value`, converted to
 * t's dtype as a C cast would (bool: value != 0). */
CLB_API clb_status clb_fill(clb_context_t ctx, clb_tensor_t t, double value);

/* A check that stays on the device (torch._assert_async): when a live element
 * of cond (any dtype and rank, 0-d included) is zero (false; NaN counts as
 * true), the next host sync returns CLB_ERR_DEVICE_CHECK, naming msg (copied;
 * NULL: none; the first 120 bytes kept), the element and the count. An empty
 * cond passes. No host sync. */
CLB_API clb_status clb_assert(clb_context_t ctx, clb_tensor_t cond, const char *msg);

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

/* A view of x's data with the bounds and dynamic flags given and the actual
 * sizes dims, which the caller knows (a compiler's symbolic sizes, bound per
 * call): for a shape with more than one dynamic dim, which clb_reshape's one -1
 * cannot infer. dims[d] <= bounds[d], equal where the dim is static; the
 * bounds' element count must fit x's. One launch writes the record and raises a
 * deferred CLB_ERR_DEVICE_CHECK when dims do not hold x's actual element count.
 * *out: NULL, or a view made by an earlier call with the same bounds. */
CLB_API clb_status clb_reshape_bounded(clb_context_t ctx, clb_tensor_t x, int rank, const int64_t *bounds,
                                       const uint8_t *dynamic, const int64_t *dims, clb_tensor_t *out);

/* ---- Indexing -----------------------------------------------------------------
 *
 * numpy's basic indexing (x[2], x[1:-1], x[::-2], x[:, None]) as a dense copy:
 * the output holds x[keys] row-major at its actual sizes, like every tensor, and
 * shares nothing with x. Slices follow Python exactly (slice.indices): a
 * negative start or stop counts from the end of the dim's ACTUAL size, read on
 * the device, and a start or stop past either end clamps as Python clamps it, so
 * INT64_MIN and INT64_MAX stand for an omitted one (x[:3] is start INT64_MIN,
 * x[::-1] is start INT64_MAX and stop INT64_MIN). The kernel computes the
 * output's actual sizes from x's shape record; the host computes its bounds
 * from x's bounds: a static dim of x gives a static dim of its exact length; a
 * dynamic dim gives a dynamic dim whose bound is the longest the slice can be
 * for any actual size up to x's bound. An integer index drops its dim; negative
 * counts from the end. An index outside a static dim, or outside [-bound,
 * bound) of a dynamic one, fails at once with CLB_ERR_INDEX; one outside a
 * dynamic dim's actual size raises CLB_ERR_INDEX at the next host sync (the
 * message names the op, the index, the dim and the size; the output is zeros
 * and stays marked failed): never a silent value. No host sync, and a new
 * actual size builds nothing. *out, when given, must not share x's data. */

typedef enum clb_key_kind {
  CLB_KEY_SLICE = 0,   /* start:stop:step over one dim of x (step != 0) */
  CLB_KEY_INDEX = 1,   /* the integer `start`: one element of one dim, dropped */
  CLB_KEY_NEWAXIS = 2, /* a new static dim of 1 (numpy's None); takes no dim of x */
  CLB_KEY_COUNT = 3
} clb_key_kind;

/* One entry of an index expression (clb_basic_index). */
typedef struct clb_index_key {
  int32_t kind;  /* clb_key_kind */
  int64_t start; /* SLICE: the first index (INT64_MIN / INT64_MAX: omitted); INDEX: the index */
  int64_t stop;  /* SLICE: the end, excluded (INT64_MAX / INT64_MIN: omitted) */
  int64_t step;  /* SLICE: the stride, negative walks backwards; not 0 */
} clb_index_key;

/* out = x[keys[0], ..., keys[nkeys - 1]]: SLICE and INDEX keys take x's dims
 * in order, NEWAXIS keys add dims of 1, and x's dims past the last key are
 * taken whole (numpy's implicit trailing `...`). The keys may take at most
 * x's rank dims and the output has at most 8. One launch. */
CLB_API clb_status clb_basic_index(clb_context_t ctx, clb_tensor_t x, int nkeys, const clb_index_key *keys,
                                   clb_tensor_t *out);

/* x[keys] = src, in place (numpy's basic-index assignment): the elements
 * clb_basic_index(x, keys) would copy out take src's, in the same order. src
 * has x's dtype and the selection's rank, with the same actual sizes (checked
 * on the device: CLB_ERR_DEVICE_CHECK at the next sync), or is 0-d: its one
 * value goes to every selected element. An index past a dynamic dim's actual
 * size raises CLB_ERR_INDEX at the next sync. Either way nothing is written,
 * and x is marked failed, as any op's output, until it is written again. src
 * must not share x's data. One launch, no host sync; x's actual sizes do not
 * change. */
CLB_API clb_status clb_basic_index_put(clb_context_t ctx, clb_tensor_t x, int nkeys, const clb_index_key *keys,
                                       clb_tensor_t src);

/* out = x[..., start:stop:step, ...] at dim `dim` (negative counts from the end
 * of x's rank); the other dims whole. */
CLB_API clb_status clb_slice(clb_context_t ctx, clb_tensor_t x, int dim, int64_t start, int64_t stop,
                             int64_t step, clb_tensor_t *out);

/* out = x[..., index, ...] at dim `dim`, which the output drops (torch.select);
 * x of rank 1 gives a 0-d tensor. */
CLB_API clb_status clb_index(clb_context_t ctx, clb_tensor_t x, int dim, int64_t index, clb_tensor_t *out);

/* out = torch.gather(x, dim, index), numpy.take_along_axis(x, index, dim): out
 * has index's shape (its bounds, dynamic flags and actual sizes) and x's dtype;
 * out[p] = x[p with dim `dim` replaced by index[p]]. index is i64 or i32 of x's
 * rank; at every other dim its bound must not pass x's. An index outside [0,
 * x's actual size at dim), or a position past x's actual size at another dim,
 * raises CLB_ERR_INDEX at the next sync, naming the value, the dim and the
 * size, and gives 0 there. dim may be negative (from the end). out must not be
 * x or index. One launch, no host sync. */
CLB_API clb_status clb_gather(clb_context_t ctx, clb_tensor_t x, int dim, clb_tensor_t index, clb_tensor_t *out);

/* out = torch.cat((a, b), dim), numpy.concatenate: a and b of one dtype and
 * rank, with the same bounds at every other dim; out's bound at dim is the sum
 * of theirs, a dim dynamic where either is. Out's actual size at dim is the sum
 * of a's and b's, read on the device; at the other dims a's and b's actual
 * sizes must agree (a deferred CLB_ERR_DEVICE_CHECK at the next sync; the
 * smaller is used). dim may be negative. out must not be a or b. One launch,
 * no host sync; more tensors: cat them two at a time. */
CLB_API clb_status clb_cat(clb_context_t ctx, clb_tensor_t a, clb_tensor_t b, int dim, clb_tensor_t *out);

/* out = x with its dims reordered, a dense copy (numpy.transpose(x, dims),
 * torch.permute): output dim j is x's dim dims[j] (negative counts from the
 * end), with its bound, its dynamic flag and, on the device, its actual size.
 * ndims must be x's rank and dims a permutation of its dims. One launch, no
 * host sync. *out, when given, must not share x's data. */
CLB_API clb_status clb_permute(clb_context_t ctx, clb_tensor_t x, int ndims, const int *dims, clb_tensor_t *out);

/* out = x with dims dim0 and dim1 swapped (torch.transpose; negative counts
 * from the end): clb_permute's copy. */
CLB_API clb_status clb_transpose(clb_context_t ctx, clb_tensor_t x, int dim0, int dim1, clb_tensor_t *out);

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

/* The running sum along dim `dim` (torch.cumsum, numpy.cumsum with an axis):
 * out has a's bounds and actual sizes; integer and bool inputs give i64,
 * floating ones keep their dtype and sum with compensation (Kahan). Each line
 * along dim is one work-item's sequential walk, so a long dim over few lines
 * is slow on a GPU. No host sync. */
CLB_API clb_status clb_cumsum(clb_context_t ctx, clb_tensor_t a, int dim, clb_tensor_t *out);

#ifdef __cplusplus
}
#endif
#endif /* CLB_OPS_H */
