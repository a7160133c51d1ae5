/* gather.cl: out = torch.gather(x, dim, index) (clb_gather) at the actual
 * sizes. Built with T (x's and out's type), TI (index's type, long or int) and
 * RANK (x's, index's and out's rank, 1 to 8). */

/* out takes index's sizes; element i at position (p0, ..., p{R-1}) of index
 * reads x at the same position with dim `dim` replaced by v = index[i]. A
 * position past x's actual size at another dim, or a v outside [0, x's size at
 * dim), raises CLB_STF_INDEX_OUT (the value, and the dim in the top byte with
 * the size) and gives 0. */
__kernel void gather(CLB_DATA(const T, x), __global const long *sx, CLB_DATA(const TI, index),
                     __global const long *si, CLB_DATA(T, out), __global long *so, int dim, __global int *st,
                     uint launch) {
  CLB_DATA_AT(const T, x);
  CLB_DATA_AT(const TI, index);
  CLB_DATA_AT(T, out);
  long xs[RANK], is[RANK];
  for (int d = 0; d < RANK; d++) xs[d] = sx[d], is[d] = si[d];
  long n = clb_numel(si, RANK);
  if (clb_first_item() && CLB_OWN_RECORD(so, si))
    for (int d = 0; d < RANK; d++) so[d] = is[d];
  CLB_FOR_CHUNK(i, n) {
    long rest = i, off = 0, stride = 1;
    int bad = 0;
    long v = (long)index[i];
    for (int d = RANK - 1; d >= 0; d--) {
      long p = rest % is[d];
      rest /= is[d];
      long q = d == dim ? v : p;
      if (q < 0 || q >= xs[d]) {
        if (!bad) clb_raise(st, launch, CLB_STF_INDEX_OUT, q, ((long)d << 56) | xs[d]);
        bad = 1;
      }
      off += q * stride;
      stride *= xs[d];
    }
    out[i] = bad ? (T)0 : x[off];
  }
}
