/* clbound/interop.h: what a framework needs to use clbound as a device backend
 * beyond the ops: a capability query, and DLPack import and export.
 *
 * DLPack (https://dmlc.github.io/dlpack/latest/) is the tensor exchange format of
 * PyTorch, NumPy, JAX, CuPy and TVM. clbound carries the DLPack 1.1 header
 * (clbound/third_party/dlpack.h, pinned and unmodified) and speaks both its
 * versioned struct (struct DLManagedTensorVersioned) and the legacy one (DLManagedTensor).
 *
 * What crosses the boundary is always a dense tensor at its *actual* sizes:
 * DLPack has no bounded dims. Exports fill `shape` and `strides` (row-major, in
 * elements, never NULL, even for rank 0 where both point at zero-length
 * storage). Reading the actual sizes is a counted host sync, as everywhere.
 *
 * dtypes: f32 {kDLFloat, 32, 1}, f64 {kDLFloat, 64, 1}, i32 {kDLInt, 32, 1},
 * i64 {kDLInt, 64, 1}, u8 {kDLUInt, 8, 1}, bool {kDLBool, 8, 1}.
 *
 * Deleters and the context: clbound contexts are not thread-safe; call an
 * exported tensor's deleter from the thread that uses its context, or after the
 * context is freed (then the deleter touches nothing of the context). */
#ifndef CLB_INTEROP_H
#define CLB_INTEROP_H

#include "clbound/runtime.h"
#include "clbound/third_party/dlpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- capabilities ----------------------------------------------------------- */

/* Does this context's device run `op` on tensors of `dtype`? op is a name from
 * clb_op_names(): "add", "sub", "mul", "div", "remainder", "maximum", "minimum",
 * "neg", "relu", "sigmoid", "tanh", "exp", "log", "copy", "cast", "fill",
 * "reshape", "sum", "mean", "max", "matmul", "linear", "linear_backward",
 * "unary_backward", "softmax", "log_softmax", "softmax_backward", "loss",
 * "sgd_step", "nonzero", "nonzero_static", "masked_select", "masked_scatter",
 * "eq", "ne", "lt", "le", "gt", "ge" (clb_compare), "slice", "index"
 * (clb_slice, clb_index and clb_basic_index), "index_put" (clb_basic_index_put),
 * "permute", "transpose", "where", "pow", "floor_divide", "erf", "abs", "sqrt",
 * "rsqrt", "log1p", "expm1", "floor", "ceil", "round", "trunc", "sin", "cos",
 * "log2", "log10", "exp2", "assert", "cumsum", "rand_uniform",
 * "gather", "cat", "bmm", "reshape_bounded".
 * For the data-dependent ops dtype is x's (the mask is always bool); for cast,
 * the source's; for rand_uniform, the one it makes.
 * Returns CLB_OK; CLB_ERR_DTYPE when the op never takes the dtype (the message
 * says what it takes); CLB_ERR_UNSUPPORTED when this device lacks it (f64
 * without cl_khr_fp64); CLB_ERR_INVALID_ARG for an unknown name. No device work. */
CLB_API clb_status clb_op_supported(clb_context_t ctx, const char *op, clb_dtype dtype);

/* The op names clb_op_supported knows, NULL-terminated; *count (may be NULL)
 * gets how many. Static storage. */
CLB_API const char *const *clb_op_names(size_t *count);

/* ---- DLPack ------------------------------------------------------------------ */

/* The DLPack dtype of a clbound dtype; CLB_ERR_DTYPE for an unknown one. */
CLB_API clb_status clb_dlpack_dtype(clb_dtype dtype, DLDataType *out);
/* The clbound dtype of a DLPack dtype (lanes must be 1); CLB_ERR_DTYPE otherwise. */
CLB_API clb_status clb_dtype_from_dlpack(DLDataType dt, clb_dtype *out);

/* Host export: copies t's actual contents to host memory (a counted host sync)
 * and returns them as a kDLCPU tensor that owns its memory: data aligned to 256
 * bytes (NULL when empty), flags DLPACK_FLAG_BITMASK_IS_COPIED. The caller calls
 * (*out)->deleter(*out) when done; the tensor and the context may be freed before. */
CLB_API clb_status clb_tensor_to_dlpack(clb_context_t ctx, clb_tensor_t t, struct DLManagedTensorVersioned **out);
/* The same as a legacy DLManagedTensor. */
CLB_API clb_status clb_tensor_to_dlpack_legacy(clb_context_t ctx, clb_tensor_t t, DLManagedTensor **out);

/* Device export, no copy: a kDLOpenCL tensor (device_id 0: the context's one
 * device) whose `data` is t's cl_mem data buffer, cast to void*, and whose
 * `byte_offset` is where t starts in it (clb_tensor_data_offset: a graph's
 * tensors share its arena buffer; 0 otherwise), at t's actual sizes (one counted host sync reads them). The buffer is retained
 * and kept out of clbound's memory pool until the deleter runs, so freeing t or
 * the context does not hand it to another tensor. The export is a snapshot of
 * the sizes: resizing t later does not change it. Writes through the handle must
 * be ordered with clbound's queue (clb_context_cl_queue) by the caller. A
 * graph's tensor (clb_graph_tensor), or a view of one, is exported as a copy
 * made on the device (enqueued), since the graph rewrites its buffers. */
CLB_API clb_status clb_tensor_to_dlpack_device(clb_context_t ctx, clb_tensor_t t, struct DLManagedTensorVersioned **out);

/* Host export without a copy, of n tensors with one host sync, where the
 * device's buffers are host memory (PoCL's CPU device; elsewhere
 * CLB_ERR_UNSUPPORTED, nothing done: use clb_tensor_to_dlpack, a copy). outs[i]
 * is a kDLCPU tensor (device_id 0, flags 0: not a copy) whose `data` points
 * into ts[i]'s own buffer, at ts[i]'s actual sizes read in that sync (NULL data
 * when empty). As with the device export, the buffer is retained and kept out
 * of clbound's memory pool until the deleter runs, so freeing ts[i] or the
 * context does not hand the memory to another tensor; a graph's tensor is
 * exported as a copy made on the device, since the graph rewrites its buffers.
 * The export and ts[i] are the same memory: while ts[i] lives, write either
 * only while no queued op uses it (after a host sync). A failed tensor, or any
 * error, exports nothing (every outs[i] NULL). */
CLB_API clb_status clb_tensors_to_dlpack_host(clb_context_t ctx, int n, const clb_tensor_t *ts,
                                              struct DLManagedTensorVersioned **outs);
/* clb_tensors_to_dlpack_host without its host sync, for tensors whose dims are
 * all static (each one's sizes are its bounds, known without the device): the
 * exports are made at once, while queued ops may still be writing the tensors,
 * so that a framework can wrap them while the device works. Their data is the
 * device's only after the caller's next host sync of ctx (clb_context_sync, or
 * any read), which also reports a failure of the ops that wrote them: read an
 * export only after that sync succeeds, and drop it (call its deleter) if it
 * fails. A tensor with a dynamic dim is CLB_ERR_SHAPE (its size needs the
 * sync), a failed tensor its error; on any error nothing is exported. */
CLB_API clb_status clb_tensors_to_dlpack_host_unsynced(clb_context_t ctx, int n, const clb_tensor_t *ts,
                                                       struct DLManagedTensorVersioned **outs);

/* Host import: a new clbound tensor holding a copy of src (kDLCPU or
 * kDLCUDAHost memory; any strides, including 0 and negative ones; byte_offset
 * honoured). bounds (may be NULL: src's shape) gives each dim's bound, which must
 * be at least src's size there; dynamic (may be NULL: none) flags the dims that
 * may vary later. src must have version.major == DLPACK_MAJOR_VERSION.
 * Ownership: clbound always consumes src. It calls src->deleter (when not NULL)
 * before returning, on success and on failure alike, as DLPack asks of a consumer. */
CLB_API clb_status clb_tensor_from_dlpack(clb_context_t ctx, struct DLManagedTensorVersioned *src, const int64_t *bounds,
                                          const uint8_t *dynamic, clb_tensor_t *out);
/* clb_tensor_from_dlpack without the host copy: the device copies straight
 * from src's memory when the write runs, after this returns, and src->deleter
 * is called once that write is done: at a later write or host sync of ctx
 * (clb_context_sync, any read), or when ctx is freed. The producer must not
 * change the memory until then; this is for data that stays unchanged until
 * the caller's next sync, such as a framework's input to one call, and saves a
 * copy on the calling thread. Where there is nothing to write (an empty
 * tensor), src is strided or bool (those are copied as by
 * clb_tensor_from_dlpack), or the call fails, the deleter is called before
 * returning. */
CLB_API clb_status clb_tensor_from_dlpack_borrowed(clb_context_t ctx, struct DLManagedTensorVersioned *src,
                                                   const int64_t *bounds, const uint8_t *dynamic, clb_tensor_t *out);
/* clb_tensor_from_dlpack for a legacy DLManagedTensor (always a copy). */
CLB_API clb_status clb_tensor_from_dlpack_legacy(clb_context_t ctx, DLManagedTensor *src, const int64_t *bounds,
                                                 const uint8_t *dynamic, clb_tensor_t *out);

#ifdef __cplusplus
}
#endif
#endif /* CLB_INTEROP_H */
