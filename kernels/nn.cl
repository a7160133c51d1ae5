/* nn.cl: activation gradients, softmax over the last dim and its gradient, and the
 * SGD step, at the actual sizes read from the shape records.
 * Built with T (float or double) and one of: NN_UNARY_BWD with one OP_<NAME>;
 * NN_SOFTMAX or NN_SOFTMAX_BWD, with LOG for log-softmax; NN_SGD, with HAS_VEL
 * for momentum. */

#ifdef NN_UNARY_BWD
/* The gradient of op given g = dy and v = the tensor the op's derivative reads
 * (x for relu, log, erf, abs, log1p, sin, cos, log2 and log10, y for sigmoid,
 * tanh, exp, sqrt, rsqrt, expm1 and exp2; neither for the rounding ops). */
#if defined(OP_NEG)
#define GRAD(v, g) CLB_GRAD_NEG(T, v, v, g)
#elif defined(OP_RELU)
#define GRAD(v, g) CLB_GRAD_RELU(T, v, v, g)
#elif defined(OP_SIGMOID)
#define GRAD(v, g) CLB_GRAD_SIGMOID(T, v, v, g)
#elif defined(OP_TANH)
#define GRAD(v, g) CLB_GRAD_TANH(T, v, v, g)
#elif defined(OP_EXP)
#define GRAD(v, g) CLB_GRAD_EXP(T, v, v, g)
#elif defined(OP_LOG)
#define GRAD(v, g) CLB_GRAD_LOG(T, v, v, g)
#elif defined(OP_ERF)
#define GRAD(v, g) CLB_GRAD_ERF(T, v, v, g)
#elif defined(OP_ABS)
#define GRAD(v, g) CLB_GRAD_ABS(T, v, v, g)
#elif defined(OP_SQRT)
#define GRAD(v, g) CLB_GRAD_SQRT(T, v, v, g)
#elif defined(OP_RSQRT)
#define GRAD(v, g) CLB_GRAD_RSQRT(T, v, v, g)
#elif defined(OP_LOG1P)
#define GRAD(v, g) CLB_GRAD_LOG1P(T, v, v, g)
#elif defined(OP_EXPM1)
#define GRAD(v, g) CLB_GRAD_EXPM1(T, v, v, g)
#elif defined(OP_FLOOR)
#define GRAD(v, g) CLB_GRAD_FLOOR(T, v, v, g)
#elif defined(OP_CEIL)
#define GRAD(v, g) CLB_GRAD_CEIL(T, v, v, g)
#elif defined(OP_ROUND)
#define GRAD(v, g) CLB_GRAD_ROUND(T, v, v, g)
#elif defined(OP_TRUNC)
#define GRAD(v, g) CLB_GRAD_TRUNC(T, v, v, g)
#elif defined(OP_SIN)
#define GRAD(v, g) CLB_GRAD_SIN(T, v, v, g)
#elif defined(OP_COS)
#define GRAD(v, g) CLB_GRAD_COS(T, v, v, g)
#elif defined(OP_LOG2)
#define GRAD(v, g) CLB_GRAD_LOG2(T, v, v, g)
#elif defined(OP_LOG10)
#define GRAD(v, g) CLB_GRAD_LOG10(T, v, v, g)
#elif defined(OP_EXP2)
#define GRAD(v, g) CLB_GRAD_EXP2(T, v, v, g)
#else
#define GRAD(v, g) CLB_GRAD_COPY(T, v, v, g)
#endif

/* dx = GRAD(v, dy) elementwise; dx takes dy's sizes. v and dy must have the same
 * element count (a deferred check; the smaller count is used). */
__kernel void nn_unary_bwd(CLB_DATA(const T, v), __global const long *sv, CLB_DATA(const T, dy),
                           __global const long *sd, int rank, CLB_DATA(T, dx), __global long *sx,
                           __global int *st, uint launch) {
  CLB_DATA_AT(const T, v);
  CLB_DATA_AT(const T, dy);
  CLB_DATA_AT(T, dx);
  long n = clb_numel(sd, rank), nv = clb_numel(sv, rank);
  if (clb_first_item()) {
    if (CLB_OWN_RECORD(sx, sd) && CLB_OWN_RECORD(sx, sv))
      for (int d = 0; d < rank; d++) sx[d] = sd[d];
    if (nv != n) clb_raise(st, launch, CLB_STF_DEVICE_CHECK, n, nv);
  }
  n = min(n, nv);
  CLB_FOR_CHUNK(i, n) {
    T g = dy[i], w = v[i];
    dx[i] = GRAD(w, g);
  }
}
#endif

#if defined(NN_SOFTMAX) || defined(NN_SOFTMAX_BWD)
/* Rows of the last dim: count and length from a shape record. */
#define ROWS(s, rank, rows, c)                                              \
  long c = (rank) > 0 ? (s)[(rank) - 1] : 1;                                \
  long rows = c > 0 ? clb_numel((s), (rank)) / c : 0;
#endif

#ifdef NN_SOFTMAX
/* One work-item per row: y = softmax(x) or log_softmax(x), shifted by the row's
 * maximum. */
__kernel void nn_softmax(CLB_DATA(const T, x), __global const long *sx, int rank, CLB_DATA(T, y),
                         __global long *sy) {
  CLB_DATA_AT(const T, x);
  CLB_DATA_AT(T, y);
  ROWS(sx, rank, rows, c)
  if (clb_first_item() && CLB_OWN_RECORD(sy, sx))
    for (int d = 0; d < rank; d++) sy[d] = sx[d];
  CLB_FOR_CHUNK(r, rows) {
    __global const T *p = x + r * c;
    __global T *q = y + r * c;
    T mx = -INFINITY;
    for (long j = 0; j < c; j++) mx = fmax(mx, p[j]);
    T s = 0;
    for (long j = 0; j < c; j++) s += exp(p[j] - mx);
#ifdef LOG
    T ls = mx + log(s);
    for (long j = 0; j < c; j++) q[j] = p[j] - ls;
#else
    T inv = (T)1 / s;
    for (long j = 0; j < c; j++) q[j] = exp(p[j] - mx) * inv;
#endif
  }
}
#endif

#ifdef NN_SOFTMAX_BWD
/* softmax: dx = y * (dy - sum(dy * y)); log_softmax: dx = dy - exp(y) * sum(dy),
 * per row. y and dy must have the same sizes (a deferred check on the counts). */
__kernel void nn_softmax_bwd(CLB_DATA(const T, y), __global const long *sy, CLB_DATA(const T, dy),
                             __global const long *sd, int rank, CLB_DATA(T, dx), __global long *sx,
                             __global int *st, uint launch) {
  CLB_DATA_AT(const T, y);
  CLB_DATA_AT(const T, dy);
  CLB_DATA_AT(T, dx);
  ROWS(sd, rank, rows, c)
  long ny = clb_numel(sy, rank);
  if (clb_first_item()) {
    if (CLB_OWN_RECORD(sx, sd) && CLB_OWN_RECORD(sx, sy))
      for (int d = 0; d < rank; d++) sx[d] = sd[d];
    if (ny != rows * c) clb_raise(st, launch, CLB_STF_DEVICE_CHECK, rows * c, ny);
  }
  if (ny < rows * c) rows = c > 0 ? ny / c : 0;
  CLB_FOR_CHUNK(r, rows) {
    __global const T *py = y + r * c, *pd = dy + r * c;
    __global T *q = dx + r * c;
    T s = 0;
#ifdef LOG
    for (long j = 0; j < c; j++) s += pd[j];
    for (long j = 0; j < c; j++) q[j] = pd[j] - exp(py[j]) * s;
#else
    for (long j = 0; j < c; j++) s += pd[j] * py[j];
    for (long j = 0; j < c; j++) q[j] = py[j] * (pd[j] - s);
#endif
  }
}
#endif

#ifdef NN_SGD
/* v = momentum * v + g (with HAS_VEL); p -= lr * (v or g), over p's actual
 * elements; g must have as many (a deferred check). */
__kernel void nn_sgd(CLB_DATA(T, p), __global const long *sp, CLB_DATA(const T, g), __global const long *sg,
                     int rank, CLB_DATA(T, v), T lr, T momentum, __global int *st, uint launch) {
  CLB_DATA_AT(T, p);
  CLB_DATA_AT(const T, g);
  CLB_DATA_AT(T, v);
  long n = clb_numel(sp, rank), ng = clb_numel(sg, rank);
  if (clb_first_item() && n != ng) clb_raise(st, launch, CLB_STF_DEVICE_CHECK, n, ng);
  n = min(n, ng);
  CLB_FOR_CHUNK(i, n) {
    T d = g[i];
#ifdef HAS_VEL
    d = momentum * v[i] + d;
    v[i] = d;
#endif
    p[i] -= lr * d;
  }
}
#endif
