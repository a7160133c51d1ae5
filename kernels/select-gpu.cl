/* select-gpu.cl: the GPU-style kernels of nonzero, masked_select and masked_scatter:
 * each work-group owns one contiguous chunk and walks it in tiles of LOCAL
 * elements, one per work-item, scanning the tile's flags in local memory.
 *
 * The contract is select-cpu.cl's (kernels sel_count, sel_finish, sel_write over
 * the same scratch layout; runtime/ops/select.c launches either family), with
 * chunks that are multiples of LOCAL instead of 64. Built with the same
 * defines (RANK is unused: nonzero takes the rank argument), plus LOCAL, the
 * fixed work-group size (a power of two). */

/* Inclusive scan of v over the work-group (Hillis-Steele in local memory);
 * *total gets the work-group's sum. Every work-item must call it. */
inline long sel_scan(__local long *buf, long v, long *total) {
  int lid = (int)get_local_id(0);
  buf[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int off = 1; off < LOCAL; off <<= 1) {
    long t = lid >= off ? buf[lid - off] : 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    buf[lid] += t;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  long r = buf[lid];
  *total = buf[LOCAL - 1];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}


/* Flag of iteration index i; x's element offset goes to *ix. */
inline int sel_flag(__global const TM *m, TM fm, int bcast, long i, int rank, const long *od, const long *stx,
                    const long *stm, long *ix) {
  long im = i;
  *ix = i;
  if (bcast) sel_split(i, rank, od, stx, stm, ix, &im);
  return (m[im] & fm) != (TM)0;
}

/* The true flags of iteration indices [s, e), summed over the work-group and
 * returned to every work-item (which must all call it). */
inline long sel_count_wg(__local long *buf, __global const TM *m, TM fm, int bcast, int rank, const long *od,
                         const long *stx, const long *stm, long s, long e) {
  int lid = (int)get_local_id(0);
  long c = 0;
  for (long i = s + lid; i < e; i += LOCAL) {
    long ix;
    c += sel_flag(m, fm, bcast, i, rank, od, stx, stm, &ix);
  }
  buf[lid] = c;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = LOCAL / 2; h > 0; h >>= 1) {
    if (lid < h) buf[lid] += buf[lid + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  long r = buf[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

__kernel CLB_FIXED_LOCAL void sel_count(CLB_DATA(const TM, m), SEL_SHAPE_ARGS, ulong fmask, int bcast, __global long *scratch) {
  __local long buf[LOCAL];
  SEL_SHAPE_LOCALS;
  CLB_DATA_AT(const TM, m);
  long s, e;
  sel_chunk(n, get_group_id(0), get_num_groups(0), &s, &e);
  long c = sel_count_wg(buf, m, (TM)fmask, bcast, rank, od, stx, stm, s, e);
  if (get_local_id(0) == 0) scratch[get_group_id(0)] = c;
}

__kernel CLB_FIXED_LOCAL void sel_finish(__global long *scratch, int ngroups, SEL_SHAPE_ARGS, __global long *so, long obound,
                         __global const long *ssrc, int rsrc, CLB_DATA(long, count_out), int nz_static,
                         __global long *sv, int rv, long8 spv, __global int *st, uint launch) {
  __local long buf[LOCAL];
  CLB_DATA_AT(long, count_out);
  int lid = (int)get_local_id(0);
  long carry = 0;
  for (int base = 0; base < ngroups; base += LOCAL) {
    int gi = base + lid;
    long v = gi < ngroups ? scratch[gi] : 0, tot;
    long incl = sel_scan(buf, v, &tot);
    if (gi < ngroups) scratch[ngroups + gi] = carry + incl - v;
    carry += tot;
  }
  if (lid != 0) return;
  SEL_SHAPE_LOCALS;
  scratch[2 * ngroups] = carry;
  sel_finish_total(carry, n, rank, bad_x, bad_m, sx, so, obound, ssrc, rsrc, count_out, nz_static, sv, rv, spv, st,
                   launch);
}

#ifdef SEL_NONZERO
/* nonzero's indices: long, or NZ_TO when a graph fuses the cast of nonzero's
 * output into it (exact below 2^24 for float) */
#ifdef NZ_TO
#define TO NZ_TO
#else
#define TO long
#endif
#else
#define TO TX
#endif

/* Chunk [s, e) of group g of ng, its first result at base: each tile's flags,
 * their scan, then every true flag's result at base + its exclusive prefix
 * (never at or past obound); base advances by the tile's sum. Every work-item
 * must call it. */
inline void sel_write_wg(__local long *buf, __global const TX *x, __global const TM *m, int rank, const long *od,
                         const long *stx, const long *stm, TM fm, int bcast, __global TO *out, long obound,
                         __global const TX *src, __global const long *ssrc, int rsrc, int nz_static, long fill,
                         long s, long e, long base, long total, long g, long ng) {
  int lid = (int)get_local_id(0);
#ifdef SEL_SCATTER
  long nsrc = clb_numel(ssrc, rsrc);
#endif
  for (long t = s; t < e; t += LOCAL) {
#ifndef SEL_SCATTER
    if (base >= obound) break; /* uniform over the work-group */
#endif
    long i = t + lid, ix = 0;
    int f = i < e ? sel_flag(m, fm, bcast, i, rank, od, stx, stm, &ix) : 0;
    long tot;
    long pos = base + sel_scan(buf, f, &tot) - f;
#if defined(SEL_SCATTER)
    if (i < e) out[i] = (f && pos < nsrc) ? src[pos] : x[ix];
#elif defined(SEL_SELECT)
    if (f && pos < obound) out[pos] = x[ix];
#else
    if (f && pos < obound) {
      long r = i;
      for (int d = rank - 1; d >= 0; d--) {
        out[pos * rank + d] = (TO)(r % od[d]);
        r /= od[d];
      }
    }
#endif
    base += tot;
  }
#ifdef SEL_NONZERO
  if (nz_static && total < obound && rank > 0) {
    long rows = obound - total, per = (rows + ng - 1) / ng;
    long r0 = min(total + g * per, obound), r1 = min(r0 + per, obound);
    for (long q = r0 * rank + lid; q < r1 * rank; q += LOCAL) out[q] = (TO)fill;
  }
#endif
}

__kernel CLB_FIXED_LOCAL void sel_write(CLB_DATA(const TX, x), CLB_DATA(const TM, m), SEL_SHAPE_ARGS,
                        __global const long *scratch, ulong fmask, int bcast, CLB_DATA(TO, out), long obound,
                        CLB_DATA(const TX, src), __global const long *ssrc, int rsrc, int nz_static, long fill) {
  __local long buf[LOCAL];
  SEL_SHAPE_LOCALS;
  CLB_DATA_AT(const TX, x);
  CLB_DATA_AT(const TM, m);
  CLB_DATA_AT(TO, out);
  CLB_DATA_AT(const TX, src);
  long g = get_group_id(0), ng = get_num_groups(0);
  long s, e;
  sel_chunk(n, g, ng, &s, &e);
  sel_write_wg(buf, x, m, rank, od, stx, stm, (TM)fmask, bcast, out, obound, src, ssrc, rsrc, nz_static, fill, s, e,
               scratch[ng + g], scratch[2 * ng], g, ng);
}

/* One launch for small masks (select-cpu.cl's sel_single): each group counts
 * the flags before its chunk, the last one does the bookkeeping. */
__kernel CLB_FIXED_LOCAL void sel_single(CLB_DATA(const TX, x), CLB_DATA(const TM, m), SEL_SHAPE_ARGS, ulong fmask,
                         int bcast, CLB_DATA(TO, out), long obound, CLB_DATA(const TX, src),
                         __global const long *ssrc, int rsrc, int nz_static, long fill, __global long *so,
                         CLB_DATA(long, count_out), __global long *sv, int rv, long8 spv, __global int *st,
                         uint launch) {
  __local long buf[LOCAL];
  SEL_SHAPE_LOCALS;
  CLB_DATA_AT(const TX, x);
  CLB_DATA_AT(const TM, m);
  CLB_DATA_AT(TO, out);
  CLB_DATA_AT(const TX, src);
  CLB_DATA_AT(long, count_out);
  long g = get_group_id(0), ng = get_num_groups(0);
  long s, e;
  sel_chunk(n, g, ng, &s, &e);
  const TM fm = (TM)fmask;
  long k = sel_count_wg(buf, m, fm, bcast, rank, od, stx, stm, 0, s);
  long total = k + sel_count_wg(buf, m, fm, bcast, rank, od, stx, stm, s, n);
  if (g == ng - 1 && get_local_id(0) == 0)
    sel_finish_total(total, n, rank, bad_x, bad_m, sx, so, obound, ssrc, rsrc, count_out, nz_static, sv, rv, spv, st,
                     launch);
  sel_write_wg(buf, x, m, rank, od, stx, stm, fm, bcast, out, obound, src, ssrc, rsrc, nz_static, fill, s, e, k,
               total, g, ng);
}
