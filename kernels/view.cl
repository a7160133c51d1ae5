/* view.cl: the shape record of a view (clb_reshape): the dim marked -1 in the
 * spec takes the elements the static sizes leave (clb_view_record, common.cl). */
__kernel void view_shape(__global const long *sx, int rank_x, __global long *so, int rank_o, long8 spec,
                         __global int *st, uint launch) {
  if (get_global_id(0) != 0) return;
  clb_view_record(clb_numel(sx, rank_x), so, rank_o, spec, st, launch);
}
