/* clbound/dataops.h: ops whose output size depends on data (nonzero,
 * masked_select, masked_scatter); their counts stay on the device.
 *
 * Each op runs as at most three kernel launches (count per chunk, scan of the
 * chunk counts, compaction) and never waits for the host: the count a kernel
 * computes goes straight into the output's shape record, where the next op reads
 * it. Launch geometry depends only on bounds and on the device, so a new actual
 * size never builds a program. The kernel family follows the context's kernel
 * style (clb_context_kernel_style): CPU style (each work-item compacts one
 * contiguous chunk with branchless stores) or GPU style (work-groups scan in
 * local memory); both give identical results. docs/dataops.md has the details.
 *
 * Errors found on the device are sticky and returned by the next host sync
 * (clb_context_sync, clb_tensor_read, clb_tensor_sizes), with a message naming
 * the op, its operands' bounds and the sizes involved:
 * - CLB_ERR_BOUND_EXCEEDED: the count is larger than the bound of a
 *   caller-provided output. Nothing is written past the bound: the output's
 *   buffer holds the first `bound` results and its shape record the bound, but
 *   the output is marked failed, so reading it (clb_tensor_read,
 *   clb_tensor_sizes) or passing it to an op returns CLB_ERR_BOUND_EXCEEDED
 *   again until it is written or computed again. The truncated results can be
 *   read only through its cl_mem (clb_tensor_data_mem).
 * - CLB_ERR_SHORT_SOURCE: masked_scatter's source has fewer elements than the
 *   mask has true bits.
 * - CLB_ERR_DEVICE_CHECK: two dims that must be equal (bounded dims of x and
 *   mask that do not broadcast) differ at run time.
 *
 * Outputs follow clbound/ops.h: if *out is NULL the op creates the output (owned
 * by the caller, release it with clb_tensor_free()); otherwise *out is checked
 * and reused. An output may not be one of the op's inputs, except that
 * masked_scatter may write into x (in place). Contexts are not thread-safe. */
#ifndef CLB_DATAOPS_H
#define CLB_DATAOPS_H

#include "clbound/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- nonzero ------------------------------------------------------------- */

/* The indices of the nonzero elements of x, like torch.nonzero: an i64 tensor
 * [count, rank(x)] whose rows are the indices of x's nonzero elements (at its
 * actual sizes) in row-major order. x may have any dtype and rank; a floating
 * -0.0 counts as zero and NaN as nonzero. A 0-d x gives [count, 0] with count 0
 * or 1; an empty x gives [0, rank].
 *
 * Dim 0 of the output is dynamic: the kernel writes the count into the output's
 * shape record. When *out is NULL the output is created with the bounds
 * [numel bound of x, rank], so the count always fits. A caller-provided *out must
 * be i64 of rank 2 with a dynamic dim 0 (any bound, even a smaller one) and a
 * static dim 1 equal to rank(x). When the count exceeds its dim-0 bound, the
 * next host sync returns CLB_ERR_BOUND_EXCEEDED naming the count and the bound,
 * and the output is marked failed (above): its buffer holds the first `bound`
 * rows, but reading the tensor returns the error, not those rows. */
CLB_API clb_status clb_nonzero(clb_context_t ctx, clb_tensor_t x, clb_tensor_t *out);

/* nonzero with a static number of rows, like torch.nonzero_static: out is an i64
 * tensor [size, rank(x)] with both dims static. Its first min(count, size) rows
 * are the indices of the nonzero elements in row-major order; the remaining rows
 * hold fill_value in every column. A count above `size` is truncated without an
 * error (as in PyTorch).
 *
 * count (may be NULL) receives the true count, untruncated, on the device: if
 * *count is NULL a 0-d i64 tensor is created (owned by the caller), otherwise
 * *count must be a 0-d i64 tensor, which is overwritten. Downstream ops can
 * consume it without a host sync (for instance to compare it with `size`).
 * size must be >= 0. A caller-provided *out must be i64 [size, rank(x)], static. */
CLB_API clb_status clb_nonzero_static(clb_context_t ctx, clb_tensor_t x, int64_t size,
                                      int64_t fill_value, clb_tensor_t *out,
                                      clb_tensor_t *count);

/* ---- masked_select / masked_scatter --------------------------------------- */

/* The elements of x where mask is true, in row-major order of the broadcast
 * shape, like torch.masked_select: a 1-D tensor of x's dtype. mask must be bool.
 * x and mask broadcast against each other like clb_binary (clbound/ops.h): a
 * static dim of 1 or a missing leading dim broadcasts, either operand may be the
 * smaller one; other dims must have equal bounds, and their actual sizes are
 * checked on the device (CLB_ERR_DEVICE_CHECK at the next sync).
 *
 * The output's only dim is dynamic and receives the count. When *out is NULL it
 * is created with the numel bound of the broadcast shape as its bound. A
 * caller-provided *out must be 1-D, of x's dtype and dynamic; its bound may be
 * smaller, with the overflow behaviour of clb_nonzero. */
CLB_API clb_status clb_masked_select(clb_context_t ctx, clb_tensor_t x, clb_tensor_t mask,
                                     clb_tensor_t *out);

/* A copy of x whose positions under mask take consecutive elements of source,
 * like torch.masked_scatter: the k-th true position of the mask (in row-major
 * order, mask broadcast to x's shape) takes source's k-th element. mask must be
 * bool and broadcast to x's shape (mask may be smaller, never larger); source
 * must have x's dtype and any shape: it is read flat, in row-major order, at its
 * actual sizes.
 *
 * If source has fewer elements than the mask has true bits, the positions past
 * the end of source keep x's value, nothing is read past source's live
 * elements, and the next host sync returns CLB_ERR_SHORT_SOURCE naming both
 * counts. The output has x's dtype, bounds and dynamic dims and receives x's
 * actual sizes. *out may be x itself (in place); it may not be mask or source. */
CLB_API clb_status clb_masked_scatter(clb_context_t ctx, clb_tensor_t x, clb_tensor_t mask,
                                      clb_tensor_t source, clb_tensor_t *out);

#ifdef __cplusplus
}
#endif
#endif /* CLB_DATAOPS_H */
