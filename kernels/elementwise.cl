/* elementwise.cl: unary, binary and comparison (with broadcasting), where
 * (cond ? a : b, broadcast), fill and cast kernels.
 * Built with: TA (input type), TOUT (output type), one OP_<NAME> selecting the
 * operation, TA_FLOAT for floating inputs, and for binary RANK (output rank) and
 * FLAT (no dim broadcasts). Comparisons are binary kernels whose TOUT is bool. */

#ifdef TA_FLOAT
#define CLB_ISNAN(x) isnan(x)
#else
#define CLB_ISNAN CLB_NO_NAN
#endif

#ifdef TA
inline TA clb_rem(TA x, TA y, __global int *st, uint launch) {
#ifdef TA_FLOAT
  CLB_REM_BODY_FLOAT(TA)
#else
  CLB_REM_BODY_INT(TA)
#endif
}
inline TA clb_floordiv(TA x, TA y, __global int *st, uint launch) {
#ifdef TA_FLOAT
  CLB_FLOORDIV_BODY_FLOAT(TA)
#else
  CLB_FLOORDIV_BODY_INT(TA)
#endif
}
#endif

/* The operation (kernels/common.cl has the table). */
#if defined(OP_ADD)
#define OPF(x, y) CLB_OP_ADD(x, y)
#elif defined(OP_SUB)
#define OPF(x, y) CLB_OP_SUB(x, y)
#elif defined(OP_MUL)
#define OPF(x, y) CLB_OP_MUL(x, y)
#elif defined(OP_DIV)
#define OPF(x, y) CLB_OP_DIV(x, y)
#elif defined(OP_REM)
#define OPF(x, y) clb_rem((x), (y), st, launch)
#elif defined(OP_POW)
#define OPF(x, y) CLB_OP_POW(x, y)
#elif defined(OP_FLOORDIV)
#define OPF(x, y) clb_floordiv((x), (y), st, launch)
#elif defined(OP_MAX)
#define OPF(x, y) CLB_OP_MAX(CLB_ISNAN, x, y)
#elif defined(OP_MIN)
#define OPF(x, y) CLB_OP_MIN(CLB_ISNAN, x, y)
#elif defined(OP_EQ)
#define OPF(x, y) ((TOUT)((x) == (y)))
#elif defined(OP_NE)
#define OPF(x, y) ((TOUT)((x) != (y)))
#elif defined(OP_LT)
#define OPF(x, y) ((TOUT)((x) < (y)))
#elif defined(OP_LE)
#define OPF(x, y) ((TOUT)((x) <= (y)))
#elif defined(OP_GT)
#define OPF(x, y) ((TOUT)((x) > (y)))
#elif defined(OP_GE)
#define OPF(x, y) ((TOUT)((x) >= (y)))
#elif defined(OP_NEG)
#define OPF(x) CLB_OP_NEG(TOUT, x)
#elif defined(OP_RELU)
#define OPF(x) CLB_OP_RELU(TA, x)
#elif defined(OP_SIGMOID)
#define OPF(x) CLB_OP_SIGMOID(TA, x)
#elif defined(OP_TANH)
#define OPF(x) CLB_OP_TANH(x)
#elif defined(OP_EXP)
#define OPF(x) CLB_OP_EXP(x)
#elif defined(OP_LOG)
#define OPF(x) CLB_OP_LOG(x)
#elif defined(OP_COPY)
#define OPF(x) CLB_OP_COPY(x)
#elif defined(OP_ERF)
#define OPF(x) CLB_OP_ERF(x)
#elif defined(OP_ABS)
#define OPF(x) CLB_OP_ABS(x)
#elif defined(OP_SQRT)
#define OPF(x) CLB_OP_SQRT(x)
#elif defined(OP_RSQRT)
#define OPF(x) CLB_OP_RSQRT(x)
#elif defined(OP_LOG1P)
#define OPF(x) CLB_OP_LOG1P(x)
#elif defined(OP_EXPM1)
#define OPF(x) CLB_OP_EXPM1(x)
#elif defined(OP_FLOOR)
#define OPF(x) CLB_OP_FLOOR(x)
#elif defined(OP_CEIL)
#define OPF(x) CLB_OP_CEIL(x)
#elif defined(OP_ROUND)
#define OPF(x) CLB_OP_ROUND(x)
#elif defined(OP_TRUNC)
#define OPF(x) CLB_OP_TRUNC(x)
#elif defined(OP_SIN)
#define OPF(x) CLB_OP_SIN(x)
#elif defined(OP_COS)
#define OPF(x) CLB_OP_COS(x)
#elif defined(OP_LOG2)
#define OPF(x) CLB_OP_LOG2(x)
#elif defined(OP_LOG10)
#define OPF(x) CLB_OP_LOG10(x)
#elif defined(OP_EXP2)
#define OPF(x) CLB_OP_EXP2(x)
#elif defined(OP_CAST) && defined(TOUT_BOOL)
#define OPF(x) CLB_OP_CAST_BOOL(TA, TOUT, x)
#elif defined(OP_CAST)
#define OPF(x) CLB_OP_CAST(TOUT, x)
#endif

#ifdef EW_UNARY
__kernel void ew_unary(CLB_DATA(const TA, a), __global const long *sa, int rank,
                       CLB_DATA(TOUT, out), __global long *so,
                       __global int *st, uint launch) {
  CLB_DATA_AT(const TA, a);
  CLB_DATA_AT(TOUT, out);
  long n = clb_numel(sa, rank);
  if (clb_first_item() && CLB_OWN_RECORD(so, sa))
    for (int d = 0; d < rank; d++) so[d] = sa[d];
  CLB_FOR_CHUNK(i, n) {
    TA x = a[i];
    out[i] = OPF(x);
  }
}
#endif

#ifdef EW_ASSERT
/* clb_assert: an element that is zero raises CLB_STF_ASSERT with its flat index
 * and the count (the launch keeps the first element raised); NaN is not zero. */
__kernel void ew_assert(CLB_DATA(const TA, c), __global const long *sc, int rank, __global int *st, uint launch) {
  CLB_DATA_AT(const TA, c);
  long n = clb_numel(sc, rank);
  CLB_FOR_CHUNK(i, n) {
    if (c[i] == (TA)0) {
      clb_raise(st, launch, CLB_STF_ASSERT, i, n);
      break;
    }
  }
}
#endif

#ifdef EW_FILL
__kernel void ew_fill(CLB_DATA(TOUT, out), __global const long *so, int rank, TOUT v) {
  CLB_DATA_AT(TOUT, out);
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
__kernel void ew_binary(CLB_DATA(const TA, a), __global const long *sa, int ra,
                        CLB_DATA(const TA, b), __global const long *sb, int rb,
                        CLB_DATA(TOUT, out), __global long *so, uint bma, uint bmb,
                        __global int *st, uint launch) {
  CLB_DATA_AT(const TA, a);
  CLB_DATA_AT(const TA, b);
  CLB_DATA_AT(TOUT, out);
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

#ifdef EW_WHERE
#ifndef RANK1
#define RANK1 (RANK > 0 ? RANK : 1)
#endif
/* out = cond ? a : b, broadcast. bm*: bit d set where that operand broadcasts
 * at output dim d (a static 1 or a missing leading dim). The others must agree
 * at run time: a mismatch raises a deferred-check error and the smallest size
 * is used, so nothing goes past a bound. */
__kernel void ew_where(CLB_DATA(const uchar, c), __global const long *sc, int rc,
                       CLB_DATA(const TA, a), __global const long *sa, int ra,
                       CLB_DATA(const TA, b), __global const long *sb, int rb,
                       CLB_DATA(TA, out), __global long *so, uint bmc, uint bma, uint bmb,
                       __global int *st, uint launch) {
  CLB_DATA_AT(const uchar, c);
  CLB_DATA_AT(const TA, a);
  CLB_DATA_AT(const TA, b);
  CLB_DATA_AT(TA, out);
  long od[RANK1], strc[RANK1], stra[RANK1], strb[RANK1];
  long n = 1, acc_c = 1, acc_a = 1, acc_b = 1;
  for (int d = RANK - 1; d >= 0; d--) {
    long dc = d >= RANK - rc ? sc[d - (RANK - rc)] : 1;
    long da = d >= RANK - ra ? sa[d - (RANK - ra)] : 1;
    long db = d >= RANK - rb ? sb[d - (RANK - rb)] : 1;
    long o = -1;
    if (!((bmc >> d) & 1u)) o = dc;
    if (!((bma >> d) & 1u)) {
      if (o >= 0 && da != o && clb_first_item()) clb_raise(st, launch, CLB_STF_DEVICE_CHECK, o, da);
      o = o < 0 ? da : min(o, da);
    }
    if (!((bmb >> d) & 1u)) {
      if (o >= 0 && db != o && clb_first_item()) clb_raise(st, launch, CLB_STF_DEVICE_CHECK, o, db);
      o = o < 0 ? db : min(o, db);
    }
    if (o < 0) o = 1;
    od[d] = o;
    n *= o;
    strc[d] = ((bmc >> d) & 1u) ? 0 : acc_c;
    stra[d] = ((bma >> d) & 1u) ? 0 : acc_a;
    strb[d] = ((bmb >> d) & 1u) ? 0 : acc_b;
    acc_c *= dc;
    acc_a *= da;
    acc_b *= db;
  }
  /* in place (out is a or b): the record stays as it is */
  if (clb_first_item() && CLB_OWN_RECORD(so, sa) && CLB_OWN_RECORD(so, sb))
    for (int d = 0; d < RANK; d++) so[d] = od[d];
  CLB_FOR_CHUNK(i, n) {
    long r = i, ic = 0, ia = 0, ib = 0;
    for (int d = RANK - 1; d >= 0; d--) {
      long k = r % od[d];
      r /= od[d];
      ic += k * strc[d];
      ia += k * stra[d];
      ib += k * strb[d];
    }
    out[i] = c[ic] ? a[ia] : b[ib];
  }
}
#endif
