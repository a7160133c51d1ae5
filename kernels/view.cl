/* view.cl: the shape record of a view (clb_reshape): the dim marked -1 in the
 * spec takes the elements the static sizes leave. */
__kernel void view_shape(__global const long *sx, int rank_x, __global long *so, int rank_o, long8 spec,
                         __global int *st, uint launch) {
  if (get_global_id(0) != 0) return;
  long n = clb_numel(sx, rank_x);
  long sp[8] = {spec.s0, spec.s1, spec.s2, spec.s3, spec.s4, spec.s5, spec.s6, spec.s7};
  long fixed = 1;
  int free_dim = -1;
  for (int d = 0; d < rank_o; d++) {
    if (sp[d] < 0) free_dim = d;
    else fixed *= sp[d];
  }
  for (int d = 0; d < rank_o; d++) so[d] = sp[d];
  if (free_dim >= 0) {
    long rest = fixed > 0 ? n / fixed : 0;
    if (fixed > 0 && rest * fixed != n) clb_raise(st, launch, CLB_STF_DEVICE_CHECK, n, fixed);
    so[free_dim] = rest;
  } else if (fixed != n) {
    clb_raise(st, launch, CLB_STF_DEVICE_CHECK, n, fixed);
  }
}
