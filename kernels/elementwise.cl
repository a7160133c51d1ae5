/* elementwise.cl: unary, binary (with broadcasting), fill and cast kernels.
 * Built with: TA (input type), TOUT (output type), one OP_<NAME> selecting the
 * operation, TA_FLOAT for floating inputs, and for binary RANK (output rank) and
 * FLAT (no dim broadcasts). */

#ifdef TA_FLOAT
#define CLB_ISNAN(x) isnan(x)
#else
#define CLB_ISNAN(x) 0
#endif

#define CLB_MAXF(x, y) ((CLB_ISNAN(x) || (x) > (y)) ? (x) : (y))
#define CLB_MINF(x, y) ((CLB_ISNAN(x) || (x) < (y)) ? (x) : (y))

#ifdef TA
/* Python's modulo: the result takes the divisor's sign. */
inline TA clb_rem(TA x, TA y, __global int *st, uint launch) {
#ifdef TA_FLOAT
  TA r = fmod(x, y);
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
#else
  if (y == 0) {
    clb_raise(st, launch, CLB_STF_DIV_ZERO, 0, 0);
    return 0;
  }
  TA r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
#endif
}
#endif

/* The operation table: one line per op. */
#if defined(OP_ADD)
#define OPF(x, y) ((x) + (y))
#elif defined(OP_SUB)
#define OPF(x, y) ((x) - (y))
#elif defined(OP_MUL)
#define OPF(x, y) ((x) * (y))
#elif defined(OP_DIV)
#define OPF(x, y) ((x) / (y))
#elif defined(OP_REM)
#define OPF(x, y) clb_rem((x), (y), st, launch)
#elif defined(OP_MAX)
#define OPF(x, y) CLB_MAXF(x, y)
#elif defined(OP_MIN)
#define OPF(x, y) CLB_MINF(x, y)
#elif defined(OP_NEG)
#define OPF(x) ((TOUT)(-(x)))
#elif defined(OP_RELU)
#define OPF(x) ((x) < (TA)0 ? (TA)0 : (x))
#elif defined(OP_SIGMOID)
#define OPF(x) ((TA)1 / ((TA)1 + exp(-(x))))
#elif defined(OP_TANH)
#define OPF(x) tanh(x)
#elif defined(OP_EXP)
#define OPF(x) exp(x)
#elif defined(OP_LOG)
#define OPF(x) log(x)
#elif defined(OP_COPY)
#define OPF(x) (x)
#elif defined(OP_CAST) && defined(TOUT_BOOL)
#define OPF(x) ((TOUT)((x) != (TA)0))
#elif defined(OP_CAST)
#define OPF(x) ((TOUT)(x))
#endif

#ifdef EW_UNARY
__kernel void ew_unary(__global const TA *a, __global const long *sa, int rank,
                       __global TOUT *out, __global long *so,
                       __global int *st, uint launch) {
  long n = clb_numel(sa, rank);
  if (clb_first_item() && CLB_OWN_RECORD(so, sa))
    for (int d = 0; d < rank; d++) so[d] = sa[d];
  CLB_FOR_CHUNK(i, n) {
    TA x = a[i];
    out[i] = OPF(x);
  }
}
#endif

#ifdef EW_FILL
__kernel void ew_fill(__global TOUT *out, __global const long *so, int rank, TOUT v) {
  long n = clb_numel(so, rank);
  CLB_FOR_CHUNK(i, n) out[i] = v;
}
#endif

#ifdef EW_BINARY
#define RANK1 (RANK > 0 ? RANK : 1)
/* bma / bmb: bit d set when a / b broadcasts at output dim d (a static 1 or a
 * missing leading dim). Other dims must agree at run time: a mismatch raises a
 * deferred-check error and the smaller size is used, so nothing goes past a
 * bound. */
__kernel void ew_binary(__global const TA *a, __global const long *sa, int ra,
                        __global const TA *b, __global const long *sb, int rb,
                        __global TOUT *out, __global long *so, uint bma, uint bmb,
                        __global int *st, uint launch) {
  long od[RANK1], stra[RANK1], strb[RANK1];
  long n = 1, acc_a = 1, acc_b = 1;
  for (int d = RANK - 1; d >= 0; d--) {
    long da = d >= RANK - ra ? sa[d - (RANK - ra)] : 1;
    long db = d >= RANK - rb ? sb[d - (RANK - rb)] : 1;
    long o;
    if ((bma >> d) & 1u) o = db;
    else if ((bmb >> d) & 1u) o = da;
    else {
      o = min(da, db);
      if (da != db && clb_first_item()) clb_raise(st, launch, CLB_STF_DEVICE_CHECK, da, db);
    }
    od[d] = o;
    n *= o;
    stra[d] = ((bma >> d) & 1u) ? 0 : acc_a;
    strb[d] = ((bmb >> d) & 1u) ? 0 : acc_b;
    acc_a *= da;
    acc_b *= db;
  }
  /* in place (out is a or b): the record stays as it is; it equals od[] unless a
   * deferred check failed above, which the next sync reports */
  if (clb_first_item() && CLB_OWN_RECORD(so, sa) && CLB_OWN_RECORD(so, sb))
    for (int d = 0; d < RANK; d++) so[d] = od[d];
#ifdef FLAT
  CLB_FOR_CHUNK(i, n) {
    TA x = a[i], y = b[i];
    out[i] = OPF(x, y);
  }
#else
  CLB_FOR_CHUNK(i, n) {
    long r = i, ia = 0, ib = 0;
    for (int d = RANK - 1; d >= 0; d--) {
      long c = r % od[d];
      r /= od[d];
      ia += c * stra[d];
      ib += c * strb[d];
    }
    TA x = a[ia], y = b[ib];
    out[i] = OPF(x, y);
  }
#endif
}
#endif
