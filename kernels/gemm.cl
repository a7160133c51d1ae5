/* gemm.cl: clbound's matmul kernels that read M, N and K from the shape records,
 * and the helpers of the CLBlast strategies (slack zeroing, padding, shape records).
 *
 * Built with: T (float or double), TRANS_A and TRANS_B (0 or 1), and for the
 * matmul kernels one of GEMM_CPU (RM x RN blocks per work-item, RN a vector width
 * along N; B not transposed) or GEMM_GPU (TS x TS tiles in local memory, one
 * work-group per tile), HAS_BIAS to add a bias row, and ACT_<NAME> for an
 * activation epilogue. GEMM_HELPERS builds the
 * helper kernels. Storage is dense row-major at the actual sizes:
 * op(a) is [M, K] (a is [K, M] when TRANS_A), op(b) is [K, N] (b is [N, K] when
 * TRANS_B), and the leading dimension of each is its actual dim 1. With
 * BATCHED=1 (clb_bmm) every operand has a leading batch dim: the matrices are
 * dims 1 and 2, one after another at the actual sizes. */

#define CLB_CAT_(x, y) x##y
#define CLB_CAT(x, y) CLB_CAT_(x, y)

#define GEMM_MAD(x, y, acc) mad((x), (y), (acc))

/* op(a)[i, k] and op(b)[k, j]. */
#if TRANS_A
#define A_AT(i, kk) a[(kk) * lda + (i)]
#else
#define A_AT(i, kk) a[(i) * lda + (kk)]
#endif
#if TRANS_B
#define B_AT(kk, j) b[(j) * ldb + (kk)]
#else
#define B_AT(kk, j) b[(kk) * ldb + (j)]
#endif

#ifndef BATCHED
#define BATCHED 0
#endif
/* A matrix dim of a shape record: past the batch dim when BATCHED. */
#define SA(i) sa[(i) + BATCHED]
#define SB(i) sb[(i) + BATCHED]

/* The actual M, N, K, leading dimensions and batch count (1 unless BATCHED)
 * from the shape records. K, and the batch count, is the smaller of the two
 * operands' when they differ (a deferred check, raised by the first
 * work-item), so nothing is read past either live region. */
#define GEMM_SIZES                                                          \
  long m, n, k, ka, kb, lda = SA(1), ldb = SB(1);                           \
  if (TRANS_A) { m = SA(1); ka = SA(0); } else { m = SA(0); ka = SA(1); }   \
  if (TRANS_B) { n = SB(0); kb = SB(1); } else { kb = SB(0); n = SB(1); }   \
  k = min(ka, kb);                                                          \
  long nba = BATCHED ? sa[0] : 1, nbb = BATCHED ? sb[0] : 1;                \
  long nbatch = min(nba, nbb);                                              \
  long astr = SA(0) * SA(1), bstr = SB(0) * SB(1), cstr = m * n;

/* The first work-item writes out's shape record and raises the K and batch
 * checks. */
#define GEMM_HEAD                                                           \
  if (clb_first_item()) {                                                   \
    if (CLB_OWN_RECORD(sc, sa) && CLB_OWN_RECORD(sc, sb)) {                 \
      if (BATCHED) sc[0] = nbatch;                                          \
      sc[BATCHED] = m;                                                      \
      sc[BATCHED + 1] = n;                                                  \
    }                                                                       \
    if (ka != kb) clb_raise(st, launch, CLB_STF_DEVICE_CHECK, ka, kb);      \
    if (nba != nbb) clb_raise(st, launch, CLB_STF_DEVICE_CHECK, nba, nbb);  \
  }

/* The epilogue: an activation of the product plus bias (kernels/common.cl's
 * table), TT the scalar or vector type. */
#if defined(ACT_RELU)
#define EPI(TT, v) CLB_OP_RELU(TT, v)
#elif defined(ACT_SIGMOID)
#define EPI(TT, v) CLB_OP_SIGMOID(TT, v)
#elif defined(ACT_TANH)
#define EPI(TT, v) CLB_OP_TANH(v)
#elif defined(ACT_EXP)
#define EPI(TT, v) CLB_OP_EXP(v)
#else
#define EPI(TT, v) (v)
#endif

#ifdef HAS_BIAS
#define BIAS_AT(j) bias[j]
#else
#define BIAS_AT(j) ((T)0)
#endif

/* A block at the edge of C, element by element. */
inline void gemm_edge(__global const T *a, long lda, __global const T *b, long ldb, __global T *c,
                      __global const T *bias, long m, long n, long k, long i0, long j0, int rm, int rn) {
  for (int r = 0; r < rm; r++) {
    long i = i0 + r;
    if (i >= m) break;
    for (int q = 0; q < rn; q++) {
      long j = j0 + q;
      if (j >= n) break;
      T acc = 0;
      for (long kk = 0; kk < k; kk++) acc = GEMM_MAD(A_AT(i, kk), B_AT(kk, j), acc);
      c[i * n + j] = EPI(T, acc + BIAS_AT(j));
    }
  }
}

#ifdef GEMM_CPU
/* B is row-major along N (the host transposes B first otherwise): each step of K
 * loads one vector of RN columns of B and RM scalars of A, and updates RM x RN
 * accumulators (an outer product). */
#if TRANS_B
#error "gemm_cpu takes B along N: transpose B first (gemm_transpose)"
#endif
#define VT CLB_CAT(T, RN)
#define VLOAD CLB_CAT(vload, RN)
#define VSTORE CLB_CAT(vstore, RN)
inline void gemm_block(__global const T *a, long lda, __global const T *b, long ldb, __global T *c,
                       __global const T *bias, long n, long k, long i0, long j0) {
  VT acc[RM];
  for (int r = 0; r < RM; r++) acc[r] = (VT)0;
  for (long kk = 0; kk < k; kk++) {
    VT bv = VLOAD(0, b + kk * ldb + j0);
    for (int r = 0; r < RM; r++) acc[r] = GEMM_MAD((VT)A_AT(i0 + r, kk), bv, acc[r]);
  }
#ifdef HAS_BIAS
  VT bb = VLOAD(0, bias + j0);
#else
  VT bb = (VT)0;
#endif
  for (int r = 0; r < RM; r++) VSTORE(EPI(VT, acc[r] + bb), 0, c + (i0 + r) * n + j0);
}

/* Each work-item takes blocks of C in a grid-stride loop over the blocks the
 * actual M and N have; consecutive blocks go down M, so a work-group shares the
 * same columns of B. */
__kernel void gemm_cpu(CLB_DATA(const T, a), __global const long *sa, CLB_DATA(const T, b),
                       __global const long *sb, CLB_DATA(T, c), __global long *sc,
                       CLB_DATA(const T, bias), __global int *st, uint launch) {
  CLB_DATA_AT(const T, a);
  CLB_DATA_AT(const T, b);
  CLB_DATA_AT(T, c);
  CLB_DATA_AT(const T, bias);
  GEMM_SIZES
  GEMM_HEAD
  long nbm = (m + RM - 1) / RM, nbn = (n + RN - 1) / RN, per = nbm * nbn, total = nbatch * per;
  for (long blk = get_global_id(0); blk < total; blk += get_global_size(0)) {
    long bt = BATCHED ? blk / per : 0, r = blk - bt * per;
    long bj = r / nbm, bi = r - bj * nbm;
    long i0 = bi * RM, j0 = bj * RN;
    __global const T *ab = a + bt * astr, *bb = b + bt * bstr;
    __global T *cb = c + bt * cstr;
    if (i0 + RM <= m && j0 + RN <= n)
      gemm_block(ab, lda, bb, ldb, cb, bias, n, k, i0, j0);
    else
      gemm_edge(ab, lda, bb, ldb, cb, bias, m, n, k, i0, j0, RM, RN);
  }
}
#endif

#ifdef GEMM_GPU
#define GEMM_GPU_WG CLB_REQD_WG(TS * TS, 1, 1)
/* One work-group of TS * TS work-items per TS x TS tile of C, tiles taken in a
 * grid-stride loop over the tiles the actual M and N have (uniform per group, so
 * the barriers are reached by all its work-items). */
__kernel GEMM_GPU_WG void gemm_gpu(CLB_DATA(const T, a), __global const long *sa, CLB_DATA(const T, b),
                       __global const long *sb, CLB_DATA(T, c), __global long *sc,
                       CLB_DATA(const T, bias), __global int *st, uint launch) {
  __local T as[TS][TS + 1];
  __local T bs[TS][TS + 1];
  CLB_DATA_AT(const T, a);
  CLB_DATA_AT(const T, b);
  CLB_DATA_AT(T, c);
  CLB_DATA_AT(const T, bias);
  GEMM_SIZES
  GEMM_HEAD
  int lid = (int)get_local_id(0), ty = lid / TS, tx = lid - ty * TS;
  long ntm = (m + TS - 1) / TS, ntn = (n + TS - 1) / TS, per = ntm * ntn, total = nbatch * per;
  __global const T *a0 = a, *b0 = b;
  __global T *c0 = c;
  for (long t = get_group_id(0); t < total; t += get_num_groups(0)) {
    long bt = BATCHED ? t / per : 0, r = t - bt * per;
    long ti = r / ntn, tj = r - ti * ntn;
    __global const T *a = a0 + bt * astr, *b = b0 + bt * bstr; /* this tile's matrices */
    __global T *c = c0 + bt * cstr;
    long i = ti * TS + ty, j = tj * TS + tx;
    T acc = 0;
    for (long k0 = 0; k0 < k; k0 += TS) {
      long kr = k0 + ty;
#if TRANS_A
      long ia = ti * TS + tx; /* a is [K, M]: load along M */
      as[ty][tx] = (ia < m && kr < k) ? A_AT(ia, kr) : (T)0; /* as[k][i] */
#else
      long kc = k0 + tx, ir = ti * TS + ty;
      as[tx][ty] = (ir < m && kc < k) ? A_AT(ir, kc) : (T)0; /* as[k][i] */
#endif
#if TRANS_B
      long jb = tj * TS + ty, kb2 = k0 + tx;
      bs[tx][ty] = (jb < n && kb2 < k) ? B_AT(kb2, jb) : (T)0; /* bs[k][j] */
#else
      bs[ty][tx] = (kr < k && j < n) ? B_AT(kr, j) : (T)0; /* bs[k][j] */
#endif
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int q = 0; q < TS; q++) acc = GEMM_MAD(as[q][ty], bs[q][tx], acc);
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i < m && j < n) c[i * n + j] = EPI(T, acc + BIAS_AT(j));
  }
}
#endif

#ifdef GEMM_HELPERS
/* Zeroes x's slack, the elements from its actual count up to `bound_numel`, so
 * CLBlast can reduce over the bound of a dim whose rows past the actual size
 * must count as zero. */
__kernel void gemm_zero_slack(CLB_DATA(T, x), __global const long *sx, int rank, long bound_numel) {
  CLB_DATA_AT(T, x);
  long live = clb_numel(sx, rank);
  long n = bound_numel - live;
  CLB_FOR_CHUNK(i, n) x[live + i] = (T)0;
}

/* dst [R, C] = x's live [r, c] (dense at c) padded with zeros: the bound layout
 * CLBlast needs when dim 1 of x is dynamic. */
__kernel void gemm_pad(CLB_DATA(const T, x), __global const long *sx, __global T *dst, long R, long C) {
  CLB_DATA_AT(const T, x);
  long r = sx[0], c = sx[1];
  CLB_FOR_CHUNK(idx, R * C) {
    long i = idx / C, j = idx - i * C;
    dst[idx] = (i < r && j < c) ? x[i * c + j] : (T)0;
  }
}

/* out's live [m, n] (dense at n) = src [.., C] at ld C: the live part of a result
 * CLBlast computed at the bounds. */
__kernel void gemm_unpad(__global const T *src, long C, CLB_DATA(T, out), __global const long *so) {
  CLB_DATA_AT(T, out);
  long m = so[0], n = so[1];
  CLB_FOR_CHUNK(idx, m * n) {
    long i = idx / n, j = idx - i * n;
    out[idx] = src[i * C + j];
  }
}

/* dst = x^T for the live [r, c] of x (dense at c): dst is dense [c, r], and its
 * shape record gets [c, r]. 32 x 32 blocks keep both sides in cache. */
__kernel void gemm_transpose(CLB_DATA(const T, x), __global const long *sx, CLB_DATA(T, dst), __global long *sd) {
  CLB_DATA_AT(const T, x);
  CLB_DATA_AT(T, dst);
  long r = sx[0], c = sx[1];
  if (clb_first_item() && CLB_OWN_RECORD(sd, sx)) {
    sd[0] = c;
    sd[1] = r;
  }
  long br = (r + 31) / 32, bc = (c + 31) / 32;
  CLB_FOR_CHUNK(blk, br * bc) {
    long i0 = (blk / bc) * 32, j0 = (blk % bc) * 32;
    long i1 = min(i0 + 32, r), j1 = min(j0 + 32, c);
    for (long j = j0; j < j1; j++)
      for (long i = i0; i < i1; i++) dst[j * r + i] = x[i * c + j];
  }
}

/* out's shape record [M, N] from the operands' (ta, tb: the transposes), and the
 * K check. */
__kernel void gemm_shape(__global const long *sa, __global const long *sb, __global long *sc, int ta,
                         int tb, __global int *st, uint launch) {
  if (get_global_id(0) != 0) return;
  long m = ta ? sa[1] : sa[0], ka = ta ? sa[0] : sa[1];
  long kb = tb ? sb[1] : sb[0], n = tb ? sb[0] : sb[1];
  sc[0] = m;
  sc[1] = n;
  if (ka != kb) clb_raise(st, launch, CLB_STF_DEVICE_CHECK, ka, kb);
}
#endif
