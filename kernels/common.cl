/* common.cl: prepended to every kernel file: the status word, shape records and
 * the chunked loop every kernel uses. Launch geometry never depends on actual
 * sizes: a kernel reads them from shape records and walks its own chunk.
 *
 * THE DATA CONVENTION (every kernel follows it; docs/graph.md, "Memory plan").
 * A tensor's data reaches a kernel as two arguments: the buffer that holds it
 * and the tensor's byte offset in that buffer. A graph plan's tensors all live
 * in one arena buffer at planned offsets (no sub-buffers: drivers differ in how
 * they treat them); eager tensors and the pool's buffers have offset 0. In the
 * parameter list a kernel writes CLB_DATA(T, x) for a tensor's data (T with its
 * qualifiers, e.g. `const float`), and first thing in its body CLB_DATA_AT(T, x),
 * which declares the pointer x to the tensor's first element; x_base and x_off
 * are the arguments, used nowhere else. The host pushes the pair with
 * CLB_ARG_DATA(buf) (runtime/core/core.h). Shape records, the status word and
 * ops' scratch buffers are always whole buffers: plain `__global T *`. An
 * argument that is a tensor's data in some launches and scratch in others is
 * CLB_DATA (scratch then passes offset 0). Offsets are multiples of 128 bytes
 * (the size of the largest built-in type, long16), so any pointer cast a kernel
 * makes stays naturally aligned. */
#define CLB_DATA(T, x) __global T *x##_base, ulong x##_off
#define CLB_DATA_AT(T, x) __global T *x = (__global T *)((__global char *)x##_base + x##_off)

#ifdef CLB_NEED_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

/* Sticky status bits (runtime/core/core.h has the same values). */
#define CLB_STF_BOUND_EXCEEDED 1u
#define CLB_STF_DEVICE_CHECK 2u
#define CLB_STF_SHORT_SOURCE 4u
#define CLB_STF_DIV_ZERO 8u
#define CLB_STF_EMPTY_REDUCE 16u
#define CLB_STF_INDEX_RANGE 32u
#define CLB_STF_INDEX_OUT 64u
#define CLB_STF_ASSERT 128u

/* Raises a sticky bit. Each failing launch claims one slot of the status
 * buffer (the first of its work-items to get there) and records its id, the bit
 * and two values that describe what went wrong; with every slot taken, only the
 * flag remains. Layout and CLB_STATUS_SLOTS: runtime/core/core.h. */
#define CLB_STATUS_SLOTS 8
inline void clb_raise(__global int *st, uint launch, uint bit, long v1, long v2) {
  atomic_or((volatile __global int *)&st[0], (int)bit);
  for (int k = 0; k < CLB_STATUS_SLOTS; k++) {
    __global int *s = st + 2 + 6 * k;
    int old = atomic_cmpxchg((volatile __global int *)&s[0], 0, (int)launch);
    if (old == (int)launch) return; /* this launch has its slot */
    if (old != 0) continue;
    s[1] = (int)bit;
    s[2] = (int)(v1 & 0xffffffffL);
    s[3] = (int)(v1 >> 32);
    s[4] = (int)(v2 & 0xffffffffL);
    s[5] = (int)(v2 >> 32);
    return;
  }
}

inline long clb_numel(__global const long *shape, int rank) {
  long n = 1;
  for (int d = 0; d < rank; d++) n *= shape[d];
  return n;
}

/* The shape record `so` (rank rank_o) of a view of a tensor of n elements
 * (clb_reshape): spec's sizes, the dim marked -1 taking the elements the others
 * leave. A count that does not split raises CLB_STF_DEVICE_CHECK. Run by one
 * work-item: view.cl's kernel, or the producer of the viewed tensor
 * (select-*.cl), which writes its output's view in the same launch. */
inline void clb_view_record(long n, __global long *so, int rank_o, long8 spec, __global int *st, uint launch) {
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

/* The part of [0, n) that this work-group owns: a contiguous chunk (a multiple of
 * the local size), walked by its work-items with the local size as stride, so a
 * CPU core streams through memory and a GPU work-group reads coalesced. */
#define CLB_CHUNK_BEGIN(n, start, end)                                      \
  long start, end;                                                          \
  {                                                                         \
    long g_ = (long)get_num_groups(0), l_ = (long)get_local_size(0);        \
    long c_ = ((n) + g_ - 1) / g_;                                          \
    c_ = (c_ + l_ - 1) / l_ * l_;                                           \
    start = (long)get_group_id(0) * c_;                                     \
    end = min(start + c_, (long)(n));                                       \
  }

#define CLB_FOR_CHUNK(i, n)                                                 \
  CLB_CHUNK_BEGIN(n, clb_s_, clb_e_)                                        \
  for (long i = clb_s_ + (long)get_local_id(0); i < clb_e_; i += (long)get_local_size(0))

/* The elementwise operation table, shared by kernels/elementwise.cl and the
 * fused kernels runtime/graph/fuse.c generates (so both compute the same
 * thing): T / TOUT are the operand / result types, ISNAN is isnan for floating
 * operands and CLB_NO_NAN otherwise. */
#define CLB_NO_NAN(x) 0
#define CLB_OP_ADD(x, y) ((x) + (y))
#define CLB_OP_SUB(x, y) ((x) - (y))
#define CLB_OP_MUL(x, y) ((x) * (y))
#define CLB_OP_DIV(x, y) ((x) / (y))
#define CLB_OP_POW(x, y) pow(x, y)
#define CLB_OP_MAX(ISNAN, x, y) ((ISNAN(x) || (x) > (y)) ? (x) : (y))
#define CLB_OP_MIN(ISNAN, x, y) ((ISNAN(x) || (x) < (y)) ? (x) : (y))
#define CLB_OP_NEG(TOUT, x) ((TOUT)(-(x)))
#define CLB_OP_RELU(T, x) ((x) < (T)0 ? (T)0 : (x))
#define CLB_OP_SIGMOID(T, x) ((T)1 / ((T)1 + exp(-(x))))
#define CLB_OP_TANH(x) tanh(x)
#define CLB_OP_EXP(x) exp(x)
#define CLB_OP_LOG(x) log(x)
#define CLB_OP_COPY(x) (x)
#define CLB_OP_ERF(x) erf(x)
#define CLB_OP_ABS(x) fabs(x)
#define CLB_OP_SQRT(x) sqrt(x)
#define CLB_OP_RSQRT(x) rsqrt(x)
#define CLB_OP_LOG1P(x) log1p(x)
#define CLB_OP_EXPM1(x) expm1(x)
#define CLB_OP_FLOOR(x) floor(x)
#define CLB_OP_CEIL(x) ceil(x)
#define CLB_OP_ROUND(x) rint(x)
#define CLB_OP_TRUNC(x) trunc(x)
#define CLB_OP_SIN(x) sin(x)
#define CLB_OP_COS(x) cos(x)
#define CLB_OP_LOG2(x) log2(x)
#define CLB_OP_LOG10(x) log10(x)
#define CLB_OP_EXP2(x) exp2(x)
#define CLB_OP_CAST_BOOL(T, TOUT, x) ((TOUT)((x) != (T)0))
#define CLB_OP_CAST(TOUT, x) ((TOUT)(x))
/* The unary ops' gradients: dy = g, x the op's input, y its output. */
#define CLB_GRAD_NEG(T, x, y, g) (-(g))
#define CLB_GRAD_RELU(T, x, y, g) ((x) > (T)0 ? (g) : (T)0)
#define CLB_GRAD_SIGMOID(T, x, y, g) ((g) * (y) * ((T)1 - (y)))
#define CLB_GRAD_TANH(T, x, y, g) ((g) * ((T)1 - (y) * (y)))
#define CLB_GRAD_EXP(T, x, y, g) ((g) * (y))
#define CLB_GRAD_LOG(T, x, y, g) ((g) / (x))
#define CLB_GRAD_COPY(T, x, y, g) (g)
/* d erf(x) / dx = 2 / sqrt(pi) * exp(-x^2) */
#define CLB_GRAD_ERF(T, x, y, g) ((g) * (T)1.1283791670955126 * exp(-(x) * (x)))
/* PyTorch's: g * sgn(x) (0 at 0 and at NaN); g / (2 sqrt(x)); -g * y^3 / 2;
 * g / (1 + x); g * (y + 1) */
#define CLB_GRAD_ABS(T, x, y, g) ((x) > (T)0 ? (g) : (x) < (T)0 ? -(g) : (T)0)
#define CLB_GRAD_SQRT(T, x, y, g) ((g) / ((T)2 * (y)))
#define CLB_GRAD_RSQRT(T, x, y, g) ((T)-0.5 * (g) * (y) * (y) * (y))
#define CLB_GRAD_LOG1P(T, x, y, g) ((g) / ((x) + (T)1))
#define CLB_GRAD_EXPM1(T, x, y, g) ((g) * ((y) + (T)1))
/* 0 for the rounding ops (PyTorch's); g cos(x); -g sin(x); g / (x ln 2);
 * g / (x ln 10); g * y * ln 2 */
#define CLB_GRAD_FLOOR(T, x, y, g) ((T)0)
#define CLB_GRAD_CEIL(T, x, y, g) ((T)0)
#define CLB_GRAD_ROUND(T, x, y, g) ((T)0)
#define CLB_GRAD_TRUNC(T, x, y, g) ((T)0)
#define CLB_GRAD_SIN(T, x, y, g) ((g) * cos(x))
#define CLB_GRAD_COS(T, x, y, g) (-(g) * sin(x))
#define CLB_GRAD_LOG2(T, x, y, g) ((g) / ((x) * (T)0.6931471805599453))
#define CLB_GRAD_LOG10(T, x, y, g) ((g) / ((x) * (T)2.302585092994046))
#define CLB_GRAD_EXP2(T, x, y, g) ((g) * (y) * (T)0.6931471805599453)

/* The body of Python's modulo (the result takes the divisor's sign) of x and y
 * of type T, in a function that has st and launch; an integer division by zero
 * raises CLB_STF_DIV_ZERO and gives 0. (Functions are written out where they
 * are defined: runtime/cache/plan-program.c renames them per section.) */
#define CLB_REM_BODY_FLOAT(T)                                               \
  T r = fmod(x, y);                                                         \
  if (r != 0 && ((r < 0) != (y < 0))) r += y;                               \
  return r;
#define CLB_INT_DIV_ZERO_RETURNS                                            \
  if (y == 0) {                                                             \
    clb_raise(st, launch, CLB_STF_DIV_ZERO, 0, 0);                          \
    return 0;                                                               \
  }
#define CLB_REM_BODY_INT(T)                                                 \
  CLB_INT_DIV_ZERO_RETURNS                                                  \
  T r = x % y;                                                              \
  if (r != 0 && ((r < 0) != (y < 0))) r += y;                               \
  return r;

/* The body of Python's floor division of x and y of type T, the same way
 * (CLB_REM_BODY_*'s setting): floating, the quotient of x - fmod(x, y) rounded
 * as Python rounds it, x / y for y == 0; integer, the C quotient moved toward
 * -inf, CLB_STF_DIV_ZERO and 0 for y == 0, and x * -1 (wrapping) for y == -1
 * of a signed type, which C's division would overflow for the type's minimum. */
#define CLB_FLOORDIV_BODY_FLOAT(T)                                          \
  if (y == 0) return x / y;                                                 \
  T m = fmod(x, y);                                                         \
  T d = (x - m) / y;                                                        \
  if (m != 0 && ((y < 0) != (m < 0))) d -= (T)1;                            \
  if (d == 0) return copysign((T)0, x / y);                                 \
  T f = floor(d);                                                           \
  if (d - f > (T)0.5) f += (T)1;                                            \
  return f;
#define CLB_FLOORDIV_BODY_INT(T)                                            \
  CLB_INT_DIV_ZERO_RETURNS                                                  \
  if ((T)-1 < (T)0 && y == (T)-1) return (T)((T)0 - x);                     \
  T q = x / y;                                                              \
  if (x % y != 0 && ((x < 0) != (y < 0))) q -= (T)1;                        \
  return q;

inline int clb_first_item(void) { return get_global_id(0) == 0; }

/* A kernel's required work-group size, so that a GPU compiler fits its
 * register use to it. CPU devices build every program with -D CLB_NO_REQD_WG
 * (runtime/cache/program-cache.c) and get no attribute: a CPU compiler gains
 * nothing from it (PoCL specializes each work-group function for the local size
 * launched anyway), and PoCL before 7.0 aborts a process that takes the binary
 * of a program with such a kernel while another thread runs it
 * (docs/failure-behaviour.md, "PoCL's cache of loaded kernels"). */
#ifdef CLB_NO_REQD_WG
#define CLB_REQD_WG(x, y, z)
#else
#define CLB_REQD_WG(x, y, z) __attribute__((reqd_work_group_size(x, y, z)))
#endif

/* Kernels built for one work-group size (-D LOCAL=N: __local arrays and tree
 * reductions of that size) declare it (CLB_REQD_WG); the runtime lowers N when
 * the kernel still allows fewer (CL_KERNEL_WORK_GROUP_SIZE,
 * runtime/cache/program-cache.c). Written between `__kernel` and `void`,
 * without parentheses, for plan-program.c's scanner. */
#ifdef LOCAL
#define CLB_FIXED_LOCAL CLB_REQD_WG(LOCAL, 1, 1)
#endif

/* Whether an op's first work-item may store its output's shape record `so`: not
 * when `so` is the record of an input `si` that the launch reads (an in-place op,
 * out == input). In every legal call the stored sizes would equal the record's,
 * and the store would race with every other work-item's reads of it. */
#define CLB_OWN_RECORD(so, si) ((__global const long *)(so) != (__global const long *)(si))

#if defined(SEL_NONZERO) || defined(SEL_SELECT) || defined(SEL_SCATTER)
/* Shared by kernels/select-cpu.cl and kernels/select-gpu.cl. */
#define SEL_CAT_(a, b) a##b
#define SEL_CAT(a, b) SEL_CAT_(a, b)

/* ---- the data-dependent ops' iteration shape and chunks ---------------------- */

/* The iteration shape's actual sizes od[] and each operand's element strides
 * (0 where it broadcasts) from the shape records; returns the element count.
 * bmx / bmm: bit d set when x / mask broadcasts at dim d. A dim where neither
 * broadcasts must have equal sizes: *bad_x / *bad_m get a mismatching pair
 * (else -1), and the smaller size is used (x's size for masked_scatter, whose
 * output has x's shape) so every index stays inside both bounds. */
inline long sel_shape(__global const long *sx, int rx, __global const long *sm, int rm, int rank,
                      uint bmx, uint bmm, long *od, long *stx, long *stm, long *bad_x, long *bad_m) {
  long n = 1, ax = 1, am = 1;
  *bad_x = -1;
  *bad_m = -1;
  for (int d = rank - 1; d >= 0; d--) {
    long dx = d >= rank - rx ? sx[d - (rank - rx)] : 1;
    long dm = d >= rank - rm ? sm[d - (rank - rm)] : 1;
    long o;
    if ((bmx >> d) & 1u) {
      o = dm;
    } else if ((bmm >> d) & 1u) {
      o = dx;
    } else {
#ifdef SEL_SCATTER
      o = dx;
#else
      o = min(dx, dm);
#endif
      if (dx != dm) {
        *bad_x = dx;
        *bad_m = dm;
      }
    }
    od[d] = o;
    n *= o;
    stx[d] = ((bmx >> d) & 1u) ? 0 : ax;
    stm[d] = ((bmm >> d) & 1u) ? 0 : am;
    ax *= dx;
    am *= dm;
  }
  return n;
}

/* Element offsets in x and in the mask of iteration index i (broadcasting). */
inline void sel_split(long i, int rank, const long *od, const long *stx, const long *stm, long *ix, long *im) {
  long a = 0, b = 0;
  for (int d = rank - 1; d >= 0; d--) {
    long c = i % od[d];
    i /= od[d];
    a += c * stx[d];
    b += c * stm[d];
  }
  *ix = a;
  *im = b;
}

#define SEL_SHAPE_ARGS                                                                   \
  __global const long *sx, int rx, __global const long *sm, int rm, int rank, uint bmx, uint bmm
#define SEL_SHAPE_LOCALS                                                                 \
  long od[8], stx[8], stm[8], bad_x, bad_m;                                              \
  long n = sel_shape(sx, rx, sm, rm, rank, bmx, bmm, od, stx, stm, &bad_x, &bad_m)

/* The bookkeeping once the total of true flags is known, by one work-item
 * (sel_finish, or the last group of sel_single): the output's shape record (or
 * nonzero_static's count tensor, when it has one: nz_static 2), the record of the output's view when the op
 * writes one (rv >= 0: sv, spec spv), and the sticky size-check, bound and
 * short-source bits. masked_scatter's record is x's sizes; it is not stored
 * over x's own record (in place), which other work-items read. */
inline void sel_finish_total(long total, long n, int rank, long bad_x, long bad_m, __global const long *sx,
                             __global long *so, long obound, __global const long *ssrc, int rsrc,
                             __global long *count_out, int nz_static, __global long *sv, int rv, long8 spv,
                             __global int *st, uint launch) {
  if (bad_x >= 0) clb_raise(st, launch, CLB_STF_DEVICE_CHECK, bad_x, bad_m);
  long nout = 0;
#if defined(SEL_NONZERO) || defined(SEL_SELECT)
  if (nz_static) {
    if (nz_static > 1) count_out[0] = total;
  } else {
    so[0] = min(total, obound);
    if (total > obound) clb_raise(st, launch, CLB_STF_BOUND_EXCEEDED, total, obound);
  }
#ifdef SEL_NONZERO
  nout = min(total, obound) * rank;
#else
  nout = min(total, obound);
#endif
#elif defined(SEL_SCATTER)
  if (CLB_OWN_RECORD(so, sx))
    for (int d = 0; d < rank; d++) so[d] = sx[d];
  long nsrc = clb_numel(ssrc, rsrc);
  if (total > nsrc) clb_raise(st, launch, CLB_STF_SHORT_SOURCE, total, nsrc);
  nout = n;
#endif
  if (rv >= 0) clb_view_record(nout, sv, rv, spv, st, launch);
}

/* Chunk [*s, *e) of group g of ng over n elements, a multiple of LOCAL elements
 * for the GPU-style kernels (built with -D LOCAL) and of 64 for the CPU style. */
#ifdef LOCAL
#define SEL_CHUNK_ALIGN LOCAL
#else
#define SEL_CHUNK_ALIGN 64
#endif
inline void sel_chunk(long n, long g, long ng, long *s, long *e) {
  long c = (n + ng - 1) / ng;
  c = (c + SEL_CHUNK_ALIGN - 1) / SEL_CHUNK_ALIGN * SEL_CHUNK_ALIGN;
  *s = min(g * c, n);
  *e = min(*s + c, n);
}
#endif
