/* common.cl: prepended to every kernel file: the status word, shape records and
 * the chunked loop every kernel uses. Launch geometry never depends on actual
 * sizes: a kernel reads them from shape records and walks its own chunk. */
#ifdef CLB_NEED_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

/* Sticky status bits (runtime/runtime-impl.h has the same values). */
#define CLB_STF_BOUND_EXCEEDED 1u
#define CLB_STF_DEVICE_CHECK 2u
#define CLB_STF_SHORT_SOURCE 4u
#define CLB_STF_DIV_ZERO 8u
#define CLB_STF_EMPTY_REDUCE 16u

/* Raises a sticky bit; the first raiser since the last host sync also records
 * its launch id and two values that describe what went wrong. */
inline void clb_raise(__global int *st, uint launch, uint bit, long v1, long v2) {
  atomic_or((volatile __global int *)&st[0], (int)bit);
  if (atomic_cmpxchg((volatile __global int *)&st[1], 0, (int)launch) == 0) {
    st[2] = (int)bit;
    st[3] = (int)(v1 & 0xffffffffL);
    st[4] = (int)(v1 >> 32);
    st[5] = (int)(v2 & 0xffffffffL);
    st[6] = (int)(v2 >> 32);
  }
}

inline long clb_numel(__global const long *shape, int rank) {
  long n = 1;
  for (int d = 0; d < rank; d++) n *= shape[d];
  return n;
}

/* The part of [0, n) that this work-group owns: a contiguous chunk (a multiple of
 * the local size), walked by its work-items with the local size as stride, so a
 * CPU core streams through memory and a GPU work-group reads coalesced. */
#define CLB_CHUNK_BEGIN(n, start, end)                                      \
  long start, end;                                                          \
  {                                                                         \
    long g_ = (long)get_num_groups(0), l_ = (long)get_local_size(0);        \
    long c_ = ((n) + g_ - 1) / g_;                                          \
    c_ = (c_ + l_ - 1) / l_ * l_;                                           \
    start = (long)get_group_id(0) * c_;                                     \
    end = min(start + c_, (long)(n));                                       \
  }

#define CLB_FOR_CHUNK(i, n)                                                 \
  CLB_CHUNK_BEGIN(n, clb_s_, clb_e_)                                        \
  for (long i = clb_s_ + (long)get_local_id(0); i < clb_e_; i += (long)get_local_size(0))

inline int clb_first_item(void) { return get_global_id(0) == 0; }
