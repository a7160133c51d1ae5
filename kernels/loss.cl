/* loss.cl: losses averaged over the actual count read on the device, with their
 * gradients already divided by it, in two stages (per-group partial sums, then one
 * group that adds them and divides).
 * Built with T (float or double), LOCAL (the fixed work-group size), HAS_GRAD, and
 * one of LOSS_MSE, LOSS_BCE, LOSS_BCE_LOGITS (elementwise: pred and target hold
 * the same number of elements) or LOSS_CE (pred [M, C] logits, target [M] long).
 * With LOSS_FUSED and one ACT_<NAME> (an elementwise kind): loss_fused, the
 * loss of pred = ACT(z) and d loss / d z in one work-group (runtime/graph/fuse.c
 * uses it for a training graph's last activation and its loss). */

/* Kahan-compensated accumulation of one work-item's terms into v
 * (compensation c), beside their plain sum s; KAHAN_VALUE is v where it is
 * finite, else s: past an inf term the compensation is inf - inf, NaN, where
 * the plain sum keeps IEEE's inf (reduce.cl's ACC_ADD does the same). */
#define KAHAN_ADD(v, c, s, x)                                               \
  {                                                                         \
    T x_ = (T)(x);                                                          \
    T y_ = x_ - (c);                                                        \
    T t_ = (v) + y_;                                                        \
    (c) = (t_ - (v)) - y_;                                                  \
    (v) = t_;                                                               \
    (s) += x_;                                                              \
  }
#define KAHAN_VALUE(v, s) (isfinite(v) ? (v) : (s))

#if defined(LOSS_MSE)
#define LOSS(p, t) (((p) - (t)) * ((p) - (t)))
#define DLOSS(p, t) ((T)2 * ((p) - (t)))
#elif defined(LOSS_BCE)
/* PyTorch clamps each log at -100, and divides the gradient by at least 1e-12. */
#define LOSS(p, t) (-((t) * fmax(log(p), (T)-100) + ((T)1 - (t)) * fmax(log((T)1 - (p)), (T)-100)))
#define DLOSS(p, t) (((p) - (t)) / fmax(((T)1 - (p)) * (p), (T)1e-12))
#elif defined(LOSS_BCE_LOGITS)
#define LOSS(p, t) (fmax((p), (T)0) - (p) * (t) + log1p(exp(-fabs(p))))
#define DLOSS(p, t) ((T)1 / ((T)1 + exp(-(p))) - (t))
#endif

/* The work-group's partial sum into partials[group]. */
inline void loss_group_sum(T v, __local T *buf, __global T *partials) {
  int lid = (int)get_local_id(0);
  buf[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = LOCAL / 2; s > 0; s >>= 1) {
    if (lid < s) buf[lid] += buf[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) partials[get_group_id(0)] = buf[0];
}

#ifndef LOSS_CE
/* Stage 1, elementwise losses: n = pred's actual count (target must match). */
__kernel CLB_FIXED_LOCAL void loss_part(CLB_DATA(const T, p), __global const long *sp, int rp, CLB_DATA(const T, t),
                        __global const long *stt, int rt, CLB_DATA(T, grad), __global long *sg,
                        __global T *partials, __global int *st, uint launch) {
  __local T buf[LOCAL];
  CLB_DATA_AT(const T, p);
  CLB_DATA_AT(const T, t);
  CLB_DATA_AT(T, grad);
  long n = clb_numel(sp, rp), nt = clb_numel(stt, rt);
  if (clb_first_item()) {
#ifdef HAS_GRAD
    if (CLB_OWN_RECORD(sg, sp) && CLB_OWN_RECORD(sg, stt))
      for (int d = 0; d < rp; d++) sg[d] = sp[d];
#endif
    if (n != nt) clb_raise(st, launch, CLB_STF_DEVICE_CHECK, n, nt);
  }
  long m = min(n, nt);
#ifdef HAS_GRAD
  T inv = (T)1 / (T)n;
#endif
  T v = 0, c = 0, s = 0;
  CLB_FOR_CHUNK(i, m) {
    T x = p[i], y = t[i];
    KAHAN_ADD(v, c, s, LOSS(x, y));
#ifdef HAS_GRAD
    grad[i] = DLOSS(x, y) * inv;
#endif
  }
  loss_group_sum(KAHAN_VALUE(v, s), buf, partials);
}
#define LOSS_COUNT(sp, rp) clb_numel((sp), (rp))
#else
/* Stage 1, cross-entropy: one work-item per row of logits. A target outside
 * [0, C) raises CLB_STF_BOUND_EXCEEDED (the class and C) and its row adds
 * nothing (its gradient row is softmax alone). */
__kernel CLB_FIXED_LOCAL void loss_part(CLB_DATA(const T, p), __global const long *sp, int rp, CLB_DATA(const long, t),
                        __global const long *stt, int rt, CLB_DATA(T, grad), __global long *sg,
                        __global T *partials, __global int *st, uint launch) {
  __local T buf[LOCAL];
  CLB_DATA_AT(const T, p);
  CLB_DATA_AT(const long, t);
  CLB_DATA_AT(T, grad);
  long rows = sp[0], c = sp[1], nt = stt[0];
  if (clb_first_item()) {
#ifdef HAS_GRAD
    if (CLB_OWN_RECORD(sg, sp) && CLB_OWN_RECORD(sg, stt)) {
      sg[0] = sp[0];
      sg[1] = sp[1];
    }
#endif
    if (rows != nt) clb_raise(st, launch, CLB_STF_DEVICE_CHECK, rows, nt);
  }
  long m = min(rows, nt);
#ifdef HAS_GRAD
  T inv = (T)1 / (T)rows;
#endif
  T v = 0, comp = 0, plain = 0;
  CLB_FOR_CHUNK(r, m) {
    __global const T *x = p + r * c;
    T mx = -INFINITY;
    for (long j = 0; j < c; j++) mx = fmax(mx, x[j]);
    T s = 0;
    for (long j = 0; j < c; j++) s += exp(x[j] - mx);
    T lse = mx + log(s);
    long cls = t[r];
    if (cls < 0 || cls >= c) {
      clb_raise(st, launch, CLB_STF_INDEX_RANGE, cls, c);
    } else {
      KAHAN_ADD(v, comp, plain, lse - x[cls]);
    }
#ifdef HAS_GRAD
    __global T *g = grad + r * c;
    for (long j = 0; j < c; j++) g[j] = (exp(x[j] - lse) - (j == cls ? (T)1 : (T)0)) * inv;
#endif
  }
  loss_group_sum(KAHAN_VALUE(v, plain), buf, partials);
}
#define LOSS_COUNT(sp, rp) ((sp)[0])
#endif

/* Stage 2: one work-group adds the partials and divides by the count; an empty
 * count gives NaN, as PyTorch's mean of nothing. */
__kernel CLB_FIXED_LOCAL void loss_final(__global const T *partials, int nparts, __global const long *sp, int rp,
                         CLB_DATA(T, out)) {
  __local T buf[LOCAL];
  CLB_DATA_AT(T, out);
  int lid = (int)get_local_id(0);
  T v = 0;
  for (int i = lid; i < nparts; i += LOCAL) v += partials[i];
  buf[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = LOCAL / 2; s > 0; s >>= 1) {
    if (lid < s) buf[lid] += buf[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) {
    long n = LOSS_COUNT(sp, rp);
    out[0] = n > 0 ? buf[0] / (T)n : (T)NAN;
  }
}

#if defined(LOSS_FUSED) && !defined(LOSS_CE)
#if defined(ACT_NEG)
#define ACT(x) CLB_OP_NEG(T, x)
#define ACT_GRAD(x, y, g) CLB_GRAD_NEG(T, x, y, g)
#elif defined(ACT_RELU)
#define ACT(x) CLB_OP_RELU(T, x)
#define ACT_GRAD(x, y, g) CLB_GRAD_RELU(T, x, y, g)
#elif defined(ACT_SIGMOID)
#define ACT(x) CLB_OP_SIGMOID(T, x)
#define ACT_GRAD(x, y, g) CLB_GRAD_SIGMOID(T, x, y, g)
#elif defined(ACT_TANH)
#define ACT(x) CLB_OP_TANH(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_TANH(T, x, y, g)
#elif defined(ACT_EXP)
#define ACT(x) CLB_OP_EXP(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_EXP(T, x, y, g)
#elif defined(ACT_LOG)
#define ACT(x) CLB_OP_LOG(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_LOG(T, x, y, g)
#elif defined(ACT_ERF)
#define ACT(x) CLB_OP_ERF(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_ERF(T, x, y, g)
#elif defined(ACT_ABS)
#define ACT(x) CLB_OP_ABS(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_ABS(T, x, y, g)
#elif defined(ACT_SQRT)
#define ACT(x) CLB_OP_SQRT(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_SQRT(T, x, y, g)
#elif defined(ACT_RSQRT)
#define ACT(x) CLB_OP_RSQRT(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_RSQRT(T, x, y, g)
#elif defined(ACT_LOG1P)
#define ACT(x) CLB_OP_LOG1P(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_LOG1P(T, x, y, g)
#elif defined(ACT_EXPM1)
#define ACT(x) CLB_OP_EXPM1(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_EXPM1(T, x, y, g)
#elif defined(ACT_FLOOR)
#define ACT(x) CLB_OP_FLOOR(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_FLOOR(T, x, y, g)
#elif defined(ACT_CEIL)
#define ACT(x) CLB_OP_CEIL(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_CEIL(T, x, y, g)
#elif defined(ACT_ROUND)
#define ACT(x) CLB_OP_ROUND(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_ROUND(T, x, y, g)
#elif defined(ACT_TRUNC)
#define ACT(x) CLB_OP_TRUNC(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_TRUNC(T, x, y, g)
#elif defined(ACT_SIN)
#define ACT(x) CLB_OP_SIN(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_SIN(T, x, y, g)
#elif defined(ACT_COS)
#define ACT(x) CLB_OP_COS(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_COS(T, x, y, g)
#elif defined(ACT_LOG2)
#define ACT(x) CLB_OP_LOG2(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_LOG2(T, x, y, g)
#elif defined(ACT_LOG10)
#define ACT(x) CLB_OP_LOG10(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_LOG10(T, x, y, g)
#elif defined(ACT_EXP2)
#define ACT(x) CLB_OP_EXP2(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_EXP2(T, x, y, g)
#else
#define ACT(x) CLB_OP_COPY(x)
#define ACT_GRAD(x, y, g) CLB_GRAD_COPY(T, x, y, g)
#endif
/* One work-group of LOCAL items: y = ACT(z) (stored with HAS_Y), the loss of y
 * against t averaged over z's actual count (NaN for none) into out[0], and dz =
 * d loss / d z; the same terms and device check as loss_part and
 * nn_unary_bwd, summed in one group instead of two stages. */
__kernel void loss_fused(CLB_DATA(const T, z), __global const long *sz, int rz, CLB_DATA(const T, t),
                         __global const long *stt, int rt, CLB_DATA(T, y), __global long *sy, CLB_DATA(T, dz),
                         __global long *sdz, CLB_DATA(T, out), __global int *st, uint launch) {
  __local T buf[LOCAL];
  CLB_DATA_AT(const T, z);
  CLB_DATA_AT(const T, t);
  CLB_DATA_AT(T, y);
  CLB_DATA_AT(T, dz);
  CLB_DATA_AT(T, out);
  int lid = (int)get_local_id(0);
  long n = clb_numel(sz, rz), nt = clb_numel(stt, rt);
  if (clb_first_item()) {
#ifdef HAS_Y
    if (CLB_OWN_RECORD(sy, sz) && CLB_OWN_RECORD(sy, stt))
      for (int d = 0; d < rz; d++) sy[d] = sz[d];
#endif
    if (CLB_OWN_RECORD(sdz, sz) && CLB_OWN_RECORD(sdz, stt))
      for (int d = 0; d < rz; d++) sdz[d] = sz[d];
    if (n != nt) clb_raise(st, launch, CLB_STF_DEVICE_CHECK, n, nt);
  }
  long m = min(n, nt);
  T inv = (T)1 / (T)n;
  T v = 0, c = 0, s = 0;
  for (long i = lid; i < m; i += LOCAL) {
    T x = z[i], p = ACT(x), q = t[i];
#ifdef HAS_Y
    y[i] = p;
#endif
    KAHAN_ADD(v, c, s, LOSS(p, q));
    T g = DLOSS(p, q) * inv;
    dz[i] = ACT_GRAD(x, p, g);
  }
  loss_group_sum(KAHAN_VALUE(v, s), buf, out); /* one group: out[0] = the sum (work-item 0 wrote it) */
  if (lid == 0) out[0] = n > 0 ? out[0] / (T)n : (T)NAN;
}
#endif
