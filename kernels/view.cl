/* view.cl: the shape record of a view (clb_reshape): the dim marked -1 in the
 * spec takes the elements the static sizes leave (clb_view_record, common.cl);
 * and numpy's basic indexing (clb_basic_index, runtime/ops/slice.c): slices and
 * integer indices taken from x's actual sizes, copied dense into the output.
 *
 * clb_slice_len is also host C: runtime/ops/slice.c includes this file with
 * CLB_SLICE_HOST defined (clb_i64 as int64_t), which keeps only that function,
 * so the host's bounds and the kernel's sizes come from one definition. */
#ifndef CLB_SLICE_HOST
#define clb_i64 long
#define CLB_SLICE_FN inline
#endif

/* Python's slice.indices(n) for (start, stop, step), step != 0: the first
 * index into *first, the length returned. The host passes start and stop
 * clamped to [-bound - 1, bound + 1], where Python clamps them the same way
 * for every n <= bound, so nothing here overflows. */
CLB_SLICE_FN clb_i64 clb_slice_len(clb_i64 n, clb_i64 start, clb_i64 stop, clb_i64 step, clb_i64 *first) {
  if (start < 0) {
    start += n;
    if (start < 0) start = step < 0 ? -1 : 0;
  } else if (start >= n) {
    start = step < 0 ? n - 1 : n;
  }
  if (stop < 0) {
    stop += n;
    if (stop < 0) stop = step < 0 ? -1 : 0;
  } else if (stop >= n) {
    stop = step < 0 ? n - 1 : n;
  }
  *first = start;
  if (step > 0) return start < stop ? (stop - start - 1) / step + 1 : 0;
  return stop < start ? (stop - start + 1) / step + 1 : 0;
}

#ifndef CLB_SLICE_HOST
__kernel void view_shape(__global const long *sx, int rank_x, __global long *so, int rank_o, long8 spec,
                         __global int *st, uint launch) {
  if (get_global_id(0) != 0) return;
  clb_view_record(clb_numel(sx, rank_x), so, rank_o, spec, st, launch);
}
#endif

#ifdef SLICE_T
/* The selection x[keys] of slice_copy and slice_put: per dim d of x (rank_x),
 * its first index, length and stride, and the step taken (an integer-indexed
 * dim: its index, length 1); base is those dims' part of every offset and *n
 * the selection's count. Returns 1 when an index is outside x's actual size
 * (CLB_STF_INDEX_OUT raised: the index, and the dim << 56 | the size). */
inline int clb_selection(__global const long *sx, int rank_x, long8 start8, long8 stop8, long8 step8,
                         uint index_mask, long *first, long *len, long *stride, long *step, long *base, long *n,
                         __global int *st, uint launch) {
  long start[8] = {start8.s0, start8.s1, start8.s2, start8.s3, start8.s4, start8.s5, start8.s6, start8.s7};
  long stop[8] = {stop8.s0, stop8.s1, stop8.s2, stop8.s3, stop8.s4, stop8.s5, stop8.s6, stop8.s7};
  long steps[8] = {step8.s0, step8.s1, step8.s2, step8.s3, step8.s4, step8.s5, step8.s6, step8.s7};
  long acc = 1;
  int bad = 0;
  *n = 1;
  *base = 0;
  for (int d = rank_x - 1; d >= 0; d--) {
    long size = sx[d];
    stride[d] = acc;
    acc *= size;
    step[d] = steps[d];
    if ((index_mask >> d) & 1u) {
      long i = start[d] < 0 ? start[d] + size : start[d];
      if (i < 0 || i >= size) {
        bad = 1;
        i = 0;
        if (clb_first_item()) clb_raise(st, launch, CLB_STF_INDEX_OUT, start[d], ((long)d << 56) | size);
      }
      first[d] = i;
      len[d] = 1;
      step[d] = 1;
      *base += i * stride[d];
    } else {
      len[d] = clb_slice_len(size, start[d], stop[d], step[d], &first[d]);
    }
    *n *= len[d];
  }
  return bad;
}

/* The offset in x of element i of the selection, walked in the output's dims'
 * order: output dim j is x's dim omap[j], or a new axis of 1 where omap[j] < 0. */
inline long clb_selection_at(long i, int rank_o, const long *omap, const long *first, const long *len,
                             const long *stride, const long *step, long base) {
  long r = i, off = base;
  for (int j = rank_o - 1; j >= 0; j--) {
    long d = omap[j];
    if (d < 0) continue;
    long c = r % len[d];
    r /= len[d];
    off += (first[d] + c * step[d]) * stride[d];
  }
  return off;
}

/* out = x[keys], dense at its actual sizes. Per dim d of x (rank_x): a slice
 * (start, stop, step) or, where bit d of index_mask is set, the integer index
 * start[d]. Output dim j takes the length of x's dim omap[j], or is a new axis
 * of 1 where omap[j] < 0; integer-indexed dims have none. The output is walked
 * in its own dims' order, so an omap that permutes x's dims transposes
 * (clb_permute). An index outside x's actual size raises CLB_STF_INDEX_OUT
 * and the output is zeros: nothing is read past x's live elements. */
__kernel void slice_copy(CLB_DATA(const SLICE_T, x), __global const long *sx, int rank_x,
                         CLB_DATA(SLICE_T, out), __global long *so, int rank_o,
                         long8 start8, long8 stop8, long8 step8, uint index_mask, long8 omap8,
                         __global int *st, uint launch) {
  CLB_DATA_AT(const SLICE_T, x);
  CLB_DATA_AT(SLICE_T, out);
  long omap[8] = {omap8.s0, omap8.s1, omap8.s2, omap8.s3, omap8.s4, omap8.s5, omap8.s6, omap8.s7};
  long first[8], len[8], stride[8], step[8], base, n;
  int bad = clb_selection(sx, rank_x, start8, stop8, step8, index_mask, first, len, stride, step, &base, &n, st, launch);
  if (clb_first_item())
    for (int j = 0; j < rank_o; j++) so[j] = omap[j] >= 0 ? len[omap[j]] : 1;
  CLB_FOR_CHUNK(i, n) {
    out[i] = bad ? (SLICE_T)0 : x[clb_selection_at(i, rank_o, omap, first, len, stride, step, base)];
  }
}

/* x[keys] = src, in place: the selection slice_copy copies out, written from
 * src instead. src has the selection's rank and, on the device, its actual
 * sizes (rank_s 0: one value for every selected element). An index outside
 * x's actual size raises CLB_STF_INDEX_OUT, and sizes of src that differ from
 * the selection's raise CLB_STF_DEVICE_CHECK (the selection's size, src's):
 * either way nothing is written. x's shape record stays as it is. */
__kernel void slice_put(CLB_DATA(SLICE_T, x), __global const long *sx, int rank_x,
                        CLB_DATA(const SLICE_T, src), __global const long *ss, int rank_s, int rank_o,
                        long8 start8, long8 stop8, long8 step8, uint index_mask, long8 omap8,
                        __global int *st, uint launch) {
  CLB_DATA_AT(SLICE_T, x);
  CLB_DATA_AT(const SLICE_T, src);
  long omap[8] = {omap8.s0, omap8.s1, omap8.s2, omap8.s3, omap8.s4, omap8.s5, omap8.s6, omap8.s7};
  long first[8], len[8], stride[8], step[8], base, n;
  int bad = clb_selection(sx, rank_x, start8, stop8, step8, index_mask, first, len, stride, step, &base, &n, st, launch);
  if (rank_s > 0)
    for (int j = 0; j < rank_o && !bad; j++) {
      long want = omap[j] >= 0 ? len[omap[j]] : 1;
      if (ss[j] != want) {
        bad = 1;
        if (clb_first_item()) clb_raise(st, launch, CLB_STF_DEVICE_CHECK, want, ss[j]);
      }
    }
  if (bad) return;
  CLB_FOR_CHUNK(i, n) {
    x[clb_selection_at(i, rank_o, omap, first, len, stride, step, base)] = src[rank_s > 0 ? i : 0];
  }
}
#endif
