/* reduce.cl: sum, mean and max over one dim or over everything, and the running
 * sum along a dim (RED_SCAN).
 * Built with: TA (input), TOUT (output), TACC (accumulator), one of RED_SUM,
 * RED_MEAN, RED_MAX, TA_FLOAT for floating inputs, RANK (input rank), LOCAL (the
 * fixed work-group size). Floating sums are compensated (Kahan). */

#ifdef TA_FLOAT
#define CLB_ISNAN(x) isnan(x)
#else
#define CLB_ISNAN(x) 0
#endif

/* ACC_ADD(v, c, s, x): x into the accumulator v (c, s: its helpers, 0 at
 * first); ACC_VALUE(v, s): the accumulated value. */
#if defined(RED_MAX)
#define ACC_INIT(v) (v) = TACC_LOWEST
#define ACC_ADD(v, c, s, x) (v) = ((CLB_ISNAN(x) || (x) > (v)) ? (x) : (v))
#define ACC_MERGE(v, w) ACC_ADD(v, 0, 0, w)
#define ACC_VALUE(v, s) (v)
#elif defined(TA_FLOAT)
#define ACC_INIT(v) (v) = 0
/* Kahan-compensated v (compensation c), beside the plain sum s, which the
 * result is where v is not finite: past an inf term, (t - v) - y is inf - inf,
 * so the compensated sum turns the inf into NaN; the plain sum keeps IEEE's
 * inf (and NaN for inf - inf, or a NaN term). s is off v's dependency chain,
 * so it costs an add, not the chain's latency. */
#define ACC_ADD(v, c, s, x)                                                 \
  {                                                                         \
    TACC x_ = (TACC)(x);                                                    \
    TACC y_ = x_ - (c);                                                     \
    TACC t_ = (v) + y_;                                                     \
    (c) = (t_ - (v)) - y_;                                                  \
    (v) = t_;                                                               \
    (s) += x_;                                                              \
  }
#define ACC_MERGE(v, w) (v) += (w)
#define ACC_VALUE(v, s) (isfinite(v) ? (v) : (s))
#else
#define ACC_INIT(v) (v) = 0
#define ACC_ADD(v, c, s, x) (v) += (TACC)(x)
#define ACC_MERGE(v, w) (v) += (w)
#define ACC_VALUE(v, s) (v)
#endif

#if defined(RED_MEAN)
#define ACC_FINAL(v, count) ((count) > 0 ? (TOUT)((v) / (TACC)(count)) : (TOUT)NAN)
#else
#define ACC_FINAL(v, count) ((TOUT)(v))
#endif

#if defined(RED_DIM) || defined(RED_SCAN)
/* The sizes before dim (outer) and after it (inner), and dim's own (k). */
inline void red_extent(__global const long *sa, int dim, long *outer, long *inner, long *k) {
  *outer = 1;
  *inner = 1;
  for (int d = 0; d < dim; d++) *outer *= sa[d];
  for (int d = dim + 1; d < RANK; d++) *inner *= sa[d];
  *k = sa[dim];
}
#endif

#ifdef RED_DIM
/* One work-item per output element; each walks the reduced dim. */
__kernel void red_dim(CLB_DATA(const TA, a), __global const long *sa, CLB_DATA(TOUT, out),
                      __global long *so, int dim, int keepdim, __global int *st, uint launch) {
  CLB_DATA_AT(const TA, a);
  CLB_DATA_AT(TOUT, out);
  long outer, inner, k;
  red_extent(sa, dim, &outer, &inner, &k);
  long nout = outer * inner;
  if (clb_first_item()) {
    int o = 0;
    if (CLB_OWN_RECORD(so, sa))
      for (int d = 0; d < RANK; d++) {
        if (d == dim) {
          if (keepdim) so[o++] = 1;
        } else {
          so[o++] = sa[d];
        }
      }
#ifdef RED_MAX
    if (k == 0 && nout > 0) clb_raise(st, launch, CLB_STF_EMPTY_REDUCE, 0, 0);
#endif
  }
  CLB_FOR_CHUNK(i, nout) {
    long oi = i / inner, j = i - oi * inner;
    __global const TA *p = a + oi * k * inner + j;
    TACC v, c = 0, s = 0;
    ACC_INIT(v);
    for (long r = 0; r < k; r++) ACC_ADD(v, c, s, p[r * inner]);
    out[i] = ACC_FINAL(ACC_VALUE(v, s), k);
  }
}
#endif

#ifdef RED_SCAN
/* clb_cumsum: one work-item per line along dim (outer x inner lines), walking it
 * in order with the sum's accumulator (compensated for floating inputs). */
__kernel void red_scan(CLB_DATA(const TA, a), __global const long *sa, CLB_DATA(TOUT, out), __global long *so,
                       int dim) {
  CLB_DATA_AT(const TA, a);
  CLB_DATA_AT(TOUT, out);
  long outer, inner, k;
  red_extent(sa, dim, &outer, &inner, &k);
  if (clb_first_item() && CLB_OWN_RECORD(so, sa))
    for (int d = 0; d < RANK; d++) so[d] = sa[d];
  CLB_FOR_CHUNK(i, outer * inner) {
    long oi = i / inner, j = i - oi * inner;
    long base = oi * k * inner + j;
    TACC v, c = 0, s = 0;
    ACC_INIT(v);
    for (long r = 0; r < k; r++) {
      ACC_ADD(v, c, s, a[base + r * inner]);
      out[base + r * inner] = (TOUT)ACC_VALUE(v, s);
    }
  }
}
#endif

#ifdef RED_ALL
/* Stage 1: each work-group reduces its chunk into one partial. */
__kernel CLB_FIXED_LOCAL void red_all_part(CLB_DATA(const TA, a), __global const long *sa,
                           __global TACC *partials) {
  __local TACC buf[LOCAL];
  CLB_DATA_AT(const TA, a);
  long n = clb_numel(sa, RANK);
  TACC v, c = 0, s = 0;
  ACC_INIT(v);
  CLB_FOR_CHUNK(i, n) ACC_ADD(v, c, s, a[i]);
  int lid = (int)get_local_id(0);
  buf[lid] = ACC_VALUE(v, s);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = LOCAL / 2; s > 0; s >>= 1) {
    if (lid < s) ACC_MERGE(buf[lid], buf[lid + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) partials[get_group_id(0)] = buf[0];
}

/* Stage 2: one work-group merges the partials and writes the 0-d output. */
__kernel CLB_FIXED_LOCAL void red_all_final(__global const TACC *partials, int nparts, __global const long *sa,
                            CLB_DATA(TOUT, out), __global int *st, uint launch) {
  __local TACC buf[LOCAL];
  CLB_DATA_AT(TOUT, out);
  int lid = (int)get_local_id(0);
  TACC v;
  ACC_INIT(v);
  for (int i = lid; i < nparts; i += LOCAL) ACC_MERGE(v, partials[i]);
  buf[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = LOCAL / 2; s > 0; s >>= 1) {
    if (lid < s) ACC_MERGE(buf[lid], buf[lid + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) {
    long n = clb_numel(sa, RANK);
#ifdef RED_MAX
    if (n == 0) clb_raise(st, launch, CLB_STF_EMPTY_REDUCE, 0, 0);
#endif
    out[0] = ACC_FINAL(buf[0], n);
  }
}
#endif
