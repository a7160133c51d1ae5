/* cat.cl: out = torch.cat((a, b), dim) (clb_cat) at the actual sizes. Built
 * with T (the dtype) and RANK (1 to 8). */

/* out's sizes are a's with dim `dim` the sum of a's and b's sizes there; at
 * the other dims a and b must agree (a deferred CLB_STF_DEVICE_CHECK, and the
 * smaller is used). Out's element at position p comes from a while p[dim] is
 * below a's size there, else from b at p[dim] less that size. */
__kernel void cat2(CLB_DATA(const T, a), __global const long *sa, CLB_DATA(const T, b), __global const long *sb,
                   CLB_DATA(T, out), __global long *so, int dim, __global int *st, uint launch) {
  CLB_DATA_AT(const T, a);
  CLB_DATA_AT(const T, b);
  CLB_DATA_AT(T, out);
  long da[RANK], db[RANK], dn[RANK];
  long n = 1;
  for (int d = 0; d < RANK; d++) {
    da[d] = sa[d], db[d] = sb[d];
    dn[d] = d == dim ? da[d] + db[d] : min(da[d], db[d]);
    if (d != dim && da[d] != db[d] && clb_first_item()) clb_raise(st, launch, CLB_STF_DEVICE_CHECK, da[d], db[d]);
    n *= dn[d];
  }
  if (clb_first_item())
    for (int d = 0; d < RANK; d++) so[d] = dn[d];
  CLB_FOR_CHUNK(i, n) {
    long rest = i, pos[RANK];
    for (int d = RANK - 1; d >= 0; d--) pos[d] = rest % dn[d], rest /= dn[d];
    int from_b = pos[dim] >= da[dim];
    if (from_b) pos[dim] -= da[dim];
    long off = 0;
    for (int d = 0; d < RANK; d++) off = off * (from_b ? db[d] : da[d]) + pos[d];
    out[i] = from_b ? b[off] : a[off];
  }
}
