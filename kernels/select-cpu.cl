/* select-cpu.cl: the CPU-style kernels of nonzero, masked_select and masked_scatter:
 * each work-item (local size 1) owns one contiguous chunk and compacts it with
 * branchless stores, skipping or copying whole blocks that are all false or all
 * true.
 *
 * The contract, shared with select-gpu.cl (runtime/ops/select.c launches both):
 *   sel_count  (G groups): scratch[g] = true flags in chunk g;
 *   sel_finish (1 group):  scratch[G + g] = exclusive prefix of the counts,
 *                          scratch[2G] = the total; writes the output's shape
 *                          record (or nonzero_static's count tensor) and raises
 *                          the sticky bound, short-source and size-check bits;
 *   sel_write  (G groups): compacts chunk g to its offset, never past `obound`
 *                          results and never reading past the source.
 * Chunks are computed from the actual element count and the number of groups,
 * with starts at multiples of 64 elements, identically in every kernel (sel_chunk
 * and the iteration shape, sel_shape, live in common.cl, shared with select-gpu.cl).
 *
 * Built with one of SEL_NONZERO, SEL_SELECT, SEL_SCATTER; TX, an unsigned type of
 * x's element size (values are only moved), and TX_BYTES, its size; TM, the flag
 * type (TX for nonzero, uchar for a bool mask); RANK, x's rank for nonzero when
 * it is 1 or 2 (0: the rank argument). A flag is true when (value & fmask) != 0:
 * fmask clears a float's sign bit, so -0.0 is zero and NaN is not. bcast (some
 * operand broadcasts: indices go through strides) and nz_static (nonzero_static)
 * are arguments, so few programs are built. */

#define SEL_BLOCK 32

#define TM16 SEL_CAT(TM, 16)
#define TX16 SEL_CAT(TX, 16)
#define TM8 SEL_CAT(TM, 8)
#define TX8 SEL_CAT(TX, 8)

/* The flag type's size: x's for nonzero, a bool mask's otherwise. */
#ifdef SEL_NONZERO
#define SEL_TM_BYTES TX_BYTES
#else
#define SEL_TM_BYTES 1
#endif

/* The 8 flags at p as the bits of a byte (flag j -> bit j): each flag becomes a
 * 0/1 byte, and one multiply gathers the eight bytes' low bits into the top byte. */
inline uint sel_bits8(__global const TM *p, TM fm) {
  uchar8 one = convert_uchar8((vload8(0, p) & (TM8)fm) != (TM8)0) & (uchar8)1;
  return (uint)((as_ulong(one) * 0x0102040810204080UL) >> 56);
}

/* The SEL_BLOCK (32) flags at p as the bits of a word: one compare and one
 * movemask per vector where the compiler targets AVX2 (clang's builtins), else
 * sel_bits8 four times. */
#if defined(__AVX2__) && defined(__clang__) && SEL_TM_BYTES == 1
#define SEL_MOVMSK 1
inline uint sel_bits32(__global const TM *p, TM fm) {
  uint lo = (uint)__builtin_ia32_pmovmskb128(as_char16((vload16(0, p) & (TM16)fm) != (TM16)0));
  uint hi = (uint)__builtin_ia32_pmovmskb128(as_char16((vload16(1, p) & (TM16)fm) != (TM16)0));
  return lo | hi << 16;
}
#elif defined(__AVX2__) && defined(__clang__) && SEL_TM_BYTES == 4
#define SEL_MOVMSK 1
inline uint sel_bits32(__global const TM *p, TM fm) {
  uint w = 0;
  for (int b = 0; b < 4; b++)
    w |= (uint)__builtin_ia32_movmskps256(as_float8((vload8(b, p) & (TM8)fm) != (TM8)0)) << (8 * b);
  return w;
}
#else
inline uint sel_bits32(__global const TM *p, TM fm) {
  return sel_bits8(p, fm) | sel_bits8(p + 8, fm) << 8 | sel_bits8(p + 16, fm) << 16 | sel_bits8(p + 24, fm) << 24;
}
#endif

/* ---- count ---------------------------------------------------------------- */

/* The true flags of iteration indices [s, e). */
inline long sel_count_range(__global const TM *m, TM fm, int bcast, int rank, const long *od, const long *stx,
                            const long *stm, long s, long e) {
  long c = 0;
  if (bcast && stm[rank - 1] == 0) {
    /* the mask broadcasts along the last dim (a row mask): one flag per run of
     * od[rank - 1] elements, looked up once */
    for (long i = s; i < e;) {
      long ix, im, run = min(e - i, od[rank - 1] - i % od[rank - 1]);
      sel_split(i, rank, od, stx, stm, &ix, &im);
      if ((m[im] & fm) != (TM)0) c += run;
      i += run;
    }
  } else if (bcast) {
    for (long i = s; i < e; i++) {
      long ix, im;
      sel_split(i, rank, od, stx, stm, &ix, &im);
      c += (m[im] & fm) != (TM)0;
    }
  } else {
    long i = s;
#ifdef SEL_MOVMSK
    for (; i + SEL_BLOCK <= e; i += SEL_BLOCK) c += popcount(sel_bits32(m + i, fm));
#endif
    while (e - i >= 16) {
      /* 16-lane counters, flushed before they could overflow */
      long stop = min(e, i + (1L << 24));
      int16 acc = 0;
      for (; i + 16 <= stop; i += 16) acc += convert_int16((vload16(0, m + i) & (TM16)fm) != (TM16)0);
      int8 a8 = acc.lo + acc.hi;
      int4 a4 = a8.lo + a8.hi;
      int2 a2 = a4.lo + a4.hi;
      c -= (long)(a2.x + a2.y);
    }
    for (; i < e; i++) c += (m[i] & fm) != (TM)0;
  }
  return c;
}

__kernel void sel_count(CLB_DATA(const TM, m), SEL_SHAPE_ARGS, ulong fmask, int bcast, __global long *scratch) {
  SEL_SHAPE_LOCALS;
  CLB_DATA_AT(const TM, m);
  long s, e;
  sel_chunk(n, get_group_id(0), get_num_groups(0), &s, &e);
  scratch[get_group_id(0)] = sel_count_range(m, (TM)fmask, bcast, rank, od, stx, stm, s, e);
}

/* ---- finish: scan of the chunk counts and the bookkeeping ------------------- */

__kernel void sel_finish(__global long *scratch, int ngroups, SEL_SHAPE_ARGS, __global long *so, long obound,
                         __global const long *ssrc, int rsrc, CLB_DATA(long, count_out), int nz_static,
                         __global long *sv, int rv, long8 spv, __global int *st, uint launch) {
  SEL_SHAPE_LOCALS;
  CLB_DATA_AT(long, count_out);
  long total = 0;
  for (int g = 0; g < ngroups; g++) {
    long c = scratch[g];
    scratch[ngroups + g] = total;
    total += c;
  }
  scratch[2 * ngroups] = total;
  sel_finish_total(total, n, rank, bad_x, bad_m, sx, so, obound, ssrc, rsrc, count_out, nz_static, sv, rv, spv, st,
                   launch);
}

/* ---- write ---------------------------------------------------------------- */

#if defined(SEL_SELECT) || defined(SEL_SCATTER)
/* 8 lanes of 4 bytes permuted by a variable index vector: one vpermd where the
 * compiler targets AVX2 (PoCL on x86 does, and is clang), which OpenCL's shuffle()
 * does not become there; elsewhere the kernels store lane by lane instead. */
#if TX_BYTES == 4 && defined(__AVX2__) && defined(__clang__)
#define SEL_PERMUTE8(v, idx) as_uint8(__builtin_ia32_permvarsi256(as_int8(v), convert_int8(idx)))
#endif
#endif

/* Left-packing and its inverse by table, 8 lanes at a time: sel_pack8[b] lists
 * the set bits of b in order (the lanes a select keeps, the columns a nonzero
 * writes), sel_expand8[b][j] the number of set bits below j (where lane j lands
 * in a select, the source element it takes in a scatter). A row is read with
 * vload8, which needs only the alignment of a uchar: no cast of the table to
 * uchar8 pointers, which would rely on an alignment attribute a compiler may
 * not honour for __constant data. */
#define SEL_PACK8(b) vload8((b), &sel_pack8[0][0])
#define SEL_EXPAND8(b) vload8((b), &sel_expand8[0][0])
__constant uchar sel_pack8[256][8] = {
    {0,0,0,0,0,0,0,0}, {0,0,0,0,0,0,0,0}, {1,0,0,0,0,0,0,0}, {0,1,0,0,0,0,0,0},
    {2,0,0,0,0,0,0,0}, {0,2,0,0,0,0,0,0}, {1,2,0,0,0,0,0,0}, {0,1,2,0,0,0,0,0},
    {3,0,0,0,0,0,0,0}, {0,3,0,0,0,0,0,0}, {1,3,0,0,0,0,0,0}, {0,1,3,0,0,0,0,0},
    {2,3,0,0,0,0,0,0}, {0,2,3,0,0,0,0,0}, {1,2,3,0,0,0,0,0}, {0,1,2,3,0,0,0,0},
    {4,0,0,0,0,0,0,0}, {0,4,0,0,0,0,0,0}, {1,4,0,0,0,0,0,0}, {0,1,4,0,0,0,0,0},
    {2,4,0,0,0,0,0,0}, {0,2,4,0,0,0,0,0}, {1,2,4,0,0,0,0,0}, {0,1,2,4,0,0,0,0},
    {3,4,0,0,0,0,0,0}, {0,3,4,0,0,0,0,0}, {1,3,4,0,0,0,0,0}, {0,1,3,4,0,0,0,0},
    {2,3,4,0,0,0,0,0}, {0,2,3,4,0,0,0,0}, {1,2,3,4,0,0,0,0}, {0,1,2,3,4,0,0,0},
    {5,0,0,0,0,0,0,0}, {0,5,0,0,0,0,0,0}, {1,5,0,0,0,0,0,0}, {0,1,5,0,0,0,0,0},
    {2,5,0,0,0,0,0,0}, {0,2,5,0,0,0,0,0}, {1,2,5,0,0,0,0,0}, {0,1,2,5,0,0,0,0},
    {3,5,0,0,0,0,0,0}, {0,3,5,0,0,0,0,0}, {1,3,5,0,0,0,0,0}, {0,1,3,5,0,0,0,0},
    {2,3,5,0,0,0,0,0}, {0,2,3,5,0,0,0,0}, {1,2,3,5,0,0,0,0}, {0,1,2,3,5,0,0,0},
    {4,5,0,0,0,0,0,0}, {0,4,5,0,0,0,0,0}, {1,4,5,0,0,0,0,0}, {0,1,4,5,0,0,0,0},
    {2,4,5,0,0,0,0,0}, {0,2,4,5,0,0,0,0}, {1,2,4,5,0,0,0,0}, {0,1,2,4,5,0,0,0},
    {3,4,5,0,0,0,0,0}, {0,3,4,5,0,0,0,0}, {1,3,4,5,0,0,0,0}, {0,1,3,4,5,0,0,0},
    {2,3,4,5,0,0,0,0}, {0,2,3,4,5,0,0,0}, {1,2,3,4,5,0,0,0}, {0,1,2,3,4,5,0,0},
    {6,0,0,0,0,0,0,0}, {0,6,0,0,0,0,0,0}, {1,6,0,0,0,0,0,0}, {0,1,6,0,0,0,0,0},
    {2,6,0,0,0,0,0,0}, {0,2,6,0,0,0,0,0}, {1,2,6,0,0,0,0,0}, {0,1,2,6,0,0,0,0},
    {3,6,0,0,0,0,0,0}, {0,3,6,0,0,0,0,0}, {1,3,6,0,0,0,0,0}, {0,1,3,6,0,0,0,0},
    {2,3,6,0,0,0,0,0}, {0,2,3,6,0,0,0,0}, {1,2,3,6,0,0,0,0}, {0,1,2,3,6,0,0,0},
    {4,6,0,0,0,0,0,0}, {0,4,6,0,0,0,0,0}, {1,4,6,0,0,0,0,0}, {0,1,4,6,0,0,0,0},
    {2,4,6,0,0,0,0,0}, {0,2,4,6,0,0,0,0}, {1,2,4,6,0,0,0,0}, {0,1,2,4,6,0,0,0},
    {3,4,6,0,0,0,0,0}, {0,3,4,6,0,0,0,0}, {1,3,4,6,0,0,0,0}, {0,1,3,4,6,0,0,0},
    {2,3,4,6,0,0,0,0}, {0,2,3,4,6,0,0,0}, {1,2,3,4,6,0,0,0}, {0,1,2,3,4,6,0,0},
    {5,6,0,0,0,0,0,0}, {0,5,6,0,0,0,0,0}, {1,5,6,0,0,0,0,0}, {0,1,5,6,0,0,0,0},
    {2,5,6,0,0,0,0,0}, {0,2,5,6,0,0,0,0}, {1,2,5,6,0,0,0,0}, {0,1,2,5,6,0,0,0},
    {3,5,6,0,0,0,0,0}, {0,3,5,6,0,0,0,0}, {1,3,5,6,0,0,0,0}, {0,1,3,5,6,0,0,0},
    {2,3,5,6,0,0,0,0}, {0,2,3,5,6,0,0,0}, {1,2,3,5,6,0,0,0}, {0,1,2,3,5,6,0,0},
    {4,5,6,0,0,0,0,0}, {0,4,5,6,0,0,0,0}, {1,4,5,6,0,0,0,0}, {0,1,4,5,6,0,0,0},
    {2,4,5,6,0,0,0,0}, {0,2,4,5,6,0,0,0}, {1,2,4,5,6,0,0,0}, {0,1,2,4,5,6,0,0},
    {3,4,5,6,0,0,0,0}, {0,3,4,5,6,0,0,0}, {1,3,4,5,6,0,0,0}, {0,1,3,4,5,6,0,0},
    {2,3,4,5,6,0,0,0}, {0,2,3,4,5,6,0,0}, {1,2,3,4,5,6,0,0}, {0,1,2,3,4,5,6,0},
    {7,0,0,0,0,0,0,0}, {0,7,0,0,0,0,0,0}, {1,7,0,0,0,0,0,0}, {0,1,7,0,0,0,0,0},
    {2,7,0,0,0,0,0,0}, {0,2,7,0,0,0,0,0}, {1,2,7,0,0,0,0,0}, {0,1,2,7,0,0,0,0},
    {3,7,0,0,0,0,0,0}, {0,3,7,0,0,0,0,0}, {1,3,7,0,0,0,0,0}, {0,1,3,7,0,0,0,0},
    {2,3,7,0,0,0,0,0}, {0,2,3,7,0,0,0,0}, {1,2,3,7,0,0,0,0}, {0,1,2,3,7,0,0,0},
    {4,7,0,0,0,0,0,0}, {0,4,7,0,0,0,0,0}, {1,4,7,0,0,0,0,0}, {0,1,4,7,0,0,0,0},
    {2,4,7,0,0,0,0,0}, {0,2,4,7,0,0,0,0}, {1,2,4,7,0,0,0,0}, {0,1,2,4,7,0,0,0},
    {3,4,7,0,0,0,0,0}, {0,3,4,7,0,0,0,0}, {1,3,4,7,0,0,0,0}, {0,1,3,4,7,0,0,0},
    {2,3,4,7,0,0,0,0}, {0,2,3,4,7,0,0,0}, {1,2,3,4,7,0,0,0}, {0,1,2,3,4,7,0,0},
    {5,7,0,0,0,0,0,0}, {0,5,7,0,0,0,0,0}, {1,5,7,0,0,0,0,0}, {0,1,5,7,0,0,0,0},
    {2,5,7,0,0,0,0,0}, {0,2,5,7,0,0,0,0}, {1,2,5,7,0,0,0,0}, {0,1,2,5,7,0,0,0},
    {3,5,7,0,0,0,0,0}, {0,3,5,7,0,0,0,0}, {1,3,5,7,0,0,0,0}, {0,1,3,5,7,0,0,0},
    {2,3,5,7,0,0,0,0}, {0,2,3,5,7,0,0,0}, {1,2,3,5,7,0,0,0}, {0,1,2,3,5,7,0,0},
    {4,5,7,0,0,0,0,0}, {0,4,5,7,0,0,0,0}, {1,4,5,7,0,0,0,0}, {0,1,4,5,7,0,0,0},
    {2,4,5,7,0,0,0,0}, {0,2,4,5,7,0,0,0}, {1,2,4,5,7,0,0,0}, {0,1,2,4,5,7,0,0},
    {3,4,5,7,0,0,0,0}, {0,3,4,5,7,0,0,0}, {1,3,4,5,7,0,0,0}, {0,1,3,4,5,7,0,0},
    {2,3,4,5,7,0,0,0}, {0,2,3,4,5,7,0,0}, {1,2,3,4,5,7,0,0}, {0,1,2,3,4,5,7,0},
    {6,7,0,0,0,0,0,0}, {0,6,7,0,0,0,0,0}, {1,6,7,0,0,0,0,0}, {0,1,6,7,0,0,0,0},
    {2,6,7,0,0,0,0,0}, {0,2,6,7,0,0,0,0}, {1,2,6,7,0,0,0,0}, {0,1,2,6,7,0,0,0},
    {3,6,7,0,0,0,0,0}, {0,3,6,7,0,0,0,0}, {1,3,6,7,0,0,0,0}, {0,1,3,6,7,0,0,0},
    {2,3,6,7,0,0,0,0}, {0,2,3,6,7,0,0,0}, {1,2,3,6,7,0,0,0}, {0,1,2,3,6,7,0,0},
    {4,6,7,0,0,0,0,0}, {0,4,6,7,0,0,0,0}, {1,4,6,7,0,0,0,0}, {0,1,4,6,7,0,0,0},
    {2,4,6,7,0,0,0,0}, {0,2,4,6,7,0,0,0}, {1,2,4,6,7,0,0,0}, {0,1,2,4,6,7,0,0},
    {3,4,6,7,0,0,0,0}, {0,3,4,6,7,0,0,0}, {1,3,4,6,7,0,0,0}, {0,1,3,4,6,7,0,0},
    {2,3,4,6,7,0,0,0}, {0,2,3,4,6,7,0,0}, {1,2,3,4,6,7,0,0}, {0,1,2,3,4,6,7,0},
    {5,6,7,0,0,0,0,0}, {0,5,6,7,0,0,0,0}, {1,5,6,7,0,0,0,0}, {0,1,5,6,7,0,0,0},
    {2,5,6,7,0,0,0,0}, {0,2,5,6,7,0,0,0}, {1,2,5,6,7,0,0,0}, {0,1,2,5,6,7,0,0},
    {3,5,6,7,0,0,0,0}, {0,3,5,6,7,0,0,0}, {1,3,5,6,7,0,0,0}, {0,1,3,5,6,7,0,0},
    {2,3,5,6,7,0,0,0}, {0,2,3,5,6,7,0,0}, {1,2,3,5,6,7,0,0}, {0,1,2,3,5,6,7,0},
    {4,5,6,7,0,0,0,0}, {0,4,5,6,7,0,0,0}, {1,4,5,6,7,0,0,0}, {0,1,4,5,6,7,0,0},
    {2,4,5,6,7,0,0,0}, {0,2,4,5,6,7,0,0}, {1,2,4,5,6,7,0,0}, {0,1,2,4,5,6,7,0},
    {3,4,5,6,7,0,0,0}, {0,3,4,5,6,7,0,0}, {1,3,4,5,6,7,0,0}, {0,1,3,4,5,6,7,0},
    {2,3,4,5,6,7,0,0}, {0,2,3,4,5,6,7,0}, {1,2,3,4,5,6,7,0}, {0,1,2,3,4,5,6,7},
};


#if defined(SEL_SELECT) || defined(SEL_SCATTER)
__constant uchar sel_expand8[256][8] = {
    {0,0,0,0,0,0,0,0}, {0,1,1,1,1,1,1,1}, {0,0,1,1,1,1,1,1}, {0,1,2,2,2,2,2,2},
    {0,0,0,1,1,1,1,1}, {0,1,1,2,2,2,2,2}, {0,0,1,2,2,2,2,2}, {0,1,2,3,3,3,3,3},
    {0,0,0,0,1,1,1,1}, {0,1,1,1,2,2,2,2}, {0,0,1,1,2,2,2,2}, {0,1,2,2,3,3,3,3},
    {0,0,0,1,2,2,2,2}, {0,1,1,2,3,3,3,3}, {0,0,1,2,3,3,3,3}, {0,1,2,3,4,4,4,4},
    {0,0,0,0,0,1,1,1}, {0,1,1,1,1,2,2,2}, {0,0,1,1,1,2,2,2}, {0,1,2,2,2,3,3,3},
    {0,0,0,1,1,2,2,2}, {0,1,1,2,2,3,3,3}, {0,0,1,2,2,3,3,3}, {0,1,2,3,3,4,4,4},
    {0,0,0,0,1,2,2,2}, {0,1,1,1,2,3,3,3}, {0,0,1,1,2,3,3,3}, {0,1,2,2,3,4,4,4},
    {0,0,0,1,2,3,3,3}, {0,1,1,2,3,4,4,4}, {0,0,1,2,3,4,4,4}, {0,1,2,3,4,5,5,5},
    {0,0,0,0,0,0,1,1}, {0,1,1,1,1,1,2,2}, {0,0,1,1,1,1,2,2}, {0,1,2,2,2,2,3,3},
    {0,0,0,1,1,1,2,2}, {0,1,1,2,2,2,3,3}, {0,0,1,2,2,2,3,3}, {0,1,2,3,3,3,4,4},
    {0,0,0,0,1,1,2,2}, {0,1,1,1,2,2,3,3}, {0,0,1,1,2,2,3,3}, {0,1,2,2,3,3,4,4},
    {0,0,0,1,2,2,3,3}, {0,1,1,2,3,3,4,4}, {0,0,1,2,3,3,4,4}, {0,1,2,3,4,4,5,5},
    {0,0,0,0,0,1,2,2}, {0,1,1,1,1,2,3,3}, {0,0,1,1,1,2,3,3}, {0,1,2,2,2,3,4,4},
    {0,0,0,1,1,2,3,3}, {0,1,1,2,2,3,4,4}, {0,0,1,2,2,3,4,4}, {0,1,2,3,3,4,5,5},
    {0,0,0,0,1,2,3,3}, {0,1,1,1,2,3,4,4}, {0,0,1,1,2,3,4,4}, {0,1,2,2,3,4,5,5},
    {0,0,0,1,2,3,4,4}, {0,1,1,2,3,4,5,5}, {0,0,1,2,3,4,5,5}, {0,1,2,3,4,5,6,6},
    {0,0,0,0,0,0,0,1}, {0,1,1,1,1,1,1,2}, {0,0,1,1,1,1,1,2}, {0,1,2,2,2,2,2,3},
    {0,0,0,1,1,1,1,2}, {0,1,1,2,2,2,2,3}, {0,0,1,2,2,2,2,3}, {0,1,2,3,3,3,3,4},
    {0,0,0,0,1,1,1,2}, {0,1,1,1,2,2,2,3}, {0,0,1,1,2,2,2,3}, {0,1,2,2,3,3,3,4},
    {0,0,0,1,2,2,2,3}, {0,1,1,2,3,3,3,4}, {0,0,1,2,3,3,3,4}, {0,1,2,3,4,4,4,5},
    {0,0,0,0,0,1,1,2}, {0,1,1,1,1,2,2,3}, {0,0,1,1,1,2,2,3}, {0,1,2,2,2,3,3,4},
    {0,0,0,1,1,2,2,3}, {0,1,1,2,2,3,3,4}, {0,0,1,2,2,3,3,4}, {0,1,2,3,3,4,4,5},
    {0,0,0,0,1,2,2,3}, {0,1,1,1,2,3,3,4}, {0,0,1,1,2,3,3,4}, {0,1,2,2,3,4,4,5},
    {0,0,0,1,2,3,3,4}, {0,1,1,2,3,4,4,5}, {0,0,1,2,3,4,4,5}, {0,1,2,3,4,5,5,6},
    {0,0,0,0,0,0,1,2}, {0,1,1,1,1,1,2,3}, {0,0,1,1,1,1,2,3}, {0,1,2,2,2,2,3,4},
    {0,0,0,1,1,1,2,3}, {0,1,1,2,2,2,3,4}, {0,0,1,2,2,2,3,4}, {0,1,2,3,3,3,4,5},
    {0,0,0,0,1,1,2,3}, {0,1,1,1,2,2,3,4}, {0,0,1,1,2,2,3,4}, {0,1,2,2,3,3,4,5},
    {0,0,0,1,2,2,3,4}, {0,1,1,2,3,3,4,5}, {0,0,1,2,3,3,4,5}, {0,1,2,3,4,4,5,6},
    {0,0,0,0,0,1,2,3}, {0,1,1,1,1,2,3,4}, {0,0,1,1,1,2,3,4}, {0,1,2,2,2,3,4,5},
    {0,0,0,1,1,2,3,4}, {0,1,1,2,2,3,4,5}, {0,0,1,2,2,3,4,5}, {0,1,2,3,3,4,5,6},
    {0,0,0,0,1,2,3,4}, {0,1,1,1,2,3,4,5}, {0,0,1,1,2,3,4,5}, {0,1,2,2,3,4,5,6},
    {0,0,0,1,2,3,4,5}, {0,1,1,2,3,4,5,6}, {0,0,1,2,3,4,5,6}, {0,1,2,3,4,5,6,7},
    {0,0,0,0,0,0,0,0}, {0,1,1,1,1,1,1,1}, {0,0,1,1,1,1,1,1}, {0,1,2,2,2,2,2,2},
    {0,0,0,1,1,1,1,1}, {0,1,1,2,2,2,2,2}, {0,0,1,2,2,2,2,2}, {0,1,2,3,3,3,3,3},
    {0,0,0,0,1,1,1,1}, {0,1,1,1,2,2,2,2}, {0,0,1,1,2,2,2,2}, {0,1,2,2,3,3,3,3},
    {0,0,0,1,2,2,2,2}, {0,1,1,2,3,3,3,3}, {0,0,1,2,3,3,3,3}, {0,1,2,3,4,4,4,4},
    {0,0,0,0,0,1,1,1}, {0,1,1,1,1,2,2,2}, {0,0,1,1,1,2,2,2}, {0,1,2,2,2,3,3,3},
    {0,0,0,1,1,2,2,2}, {0,1,1,2,2,3,3,3}, {0,0,1,2,2,3,3,3}, {0,1,2,3,3,4,4,4},
    {0,0,0,0,1,2,2,2}, {0,1,1,1,2,3,3,3}, {0,0,1,1,2,3,3,3}, {0,1,2,2,3,4,4,4},
    {0,0,0,1,2,3,3,3}, {0,1,1,2,3,4,4,4}, {0,0,1,2,3,4,4,4}, {0,1,2,3,4,5,5,5},
    {0,0,0,0,0,0,1,1}, {0,1,1,1,1,1,2,2}, {0,0,1,1,1,1,2,2}, {0,1,2,2,2,2,3,3},
    {0,0,0,1,1,1,2,2}, {0,1,1,2,2,2,3,3}, {0,0,1,2,2,2,3,3}, {0,1,2,3,3,3,4,4},
    {0,0,0,0,1,1,2,2}, {0,1,1,1,2,2,3,3}, {0,0,1,1,2,2,3,3}, {0,1,2,2,3,3,4,4},
    {0,0,0,1,2,2,3,3}, {0,1,1,2,3,3,4,4}, {0,0,1,2,3,3,4,4}, {0,1,2,3,4,4,5,5},
    {0,0,0,0,0,1,2,2}, {0,1,1,1,1,2,3,3}, {0,0,1,1,1,2,3,3}, {0,1,2,2,2,3,4,4},
    {0,0,0,1,1,2,3,3}, {0,1,1,2,2,3,4,4}, {0,0,1,2,2,3,4,4}, {0,1,2,3,3,4,5,5},
    {0,0,0,0,1,2,3,3}, {0,1,1,1,2,3,4,4}, {0,0,1,1,2,3,4,4}, {0,1,2,2,3,4,5,5},
    {0,0,0,1,2,3,4,4}, {0,1,1,2,3,4,5,5}, {0,0,1,2,3,4,5,5}, {0,1,2,3,4,5,6,6},
    {0,0,0,0,0,0,0,1}, {0,1,1,1,1,1,1,2}, {0,0,1,1,1,1,1,2}, {0,1,2,2,2,2,2,3},
    {0,0,0,1,1,1,1,2}, {0,1,1,2,2,2,2,3}, {0,0,1,2,2,2,2,3}, {0,1,2,3,3,3,3,4},
    {0,0,0,0,1,1,1,2}, {0,1,1,1,2,2,2,3}, {0,0,1,1,2,2,2,3}, {0,1,2,2,3,3,3,4},
    {0,0,0,1,2,2,2,3}, {0,1,1,2,3,3,3,4}, {0,0,1,2,3,3,3,4}, {0,1,2,3,4,4,4,5},
    {0,0,0,0,0,1,1,2}, {0,1,1,1,1,2,2,3}, {0,0,1,1,1,2,2,3}, {0,1,2,2,2,3,3,4},
    {0,0,0,1,1,2,2,3}, {0,1,1,2,2,3,3,4}, {0,0,1,2,2,3,3,4}, {0,1,2,3,3,4,4,5},
    {0,0,0,0,1,2,2,3}, {0,1,1,1,2,3,3,4}, {0,0,1,1,2,3,3,4}, {0,1,2,2,3,4,4,5},
    {0,0,0,1,2,3,3,4}, {0,1,1,2,3,4,4,5}, {0,0,1,2,3,4,4,5}, {0,1,2,3,4,5,5,6},
    {0,0,0,0,0,0,1,2}, {0,1,1,1,1,1,2,3}, {0,0,1,1,1,1,2,3}, {0,1,2,2,2,2,3,4},
    {0,0,0,1,1,1,2,3}, {0,1,1,2,2,2,3,4}, {0,0,1,2,2,2,3,4}, {0,1,2,3,3,3,4,5},
    {0,0,0,0,1,1,2,3}, {0,1,1,1,2,2,3,4}, {0,0,1,1,2,2,3,4}, {0,1,2,2,3,3,4,5},
    {0,0,0,1,2,2,3,4}, {0,1,1,2,3,3,4,5}, {0,0,1,2,3,3,4,5}, {0,1,2,3,4,4,5,6},
    {0,0,0,0,0,1,2,3}, {0,1,1,1,1,2,3,4}, {0,0,1,1,1,2,3,4}, {0,1,2,2,2,3,4,5},
    {0,0,0,1,1,2,3,4}, {0,1,1,2,2,3,4,5}, {0,0,1,2,2,3,4,5}, {0,1,2,3,3,4,5,6},
    {0,0,0,0,1,2,3,4}, {0,1,1,1,2,3,4,5}, {0,0,1,1,2,3,4,5}, {0,1,2,2,3,4,5,6},
    {0,0,0,1,2,3,4,5}, {0,1,1,2,3,4,5,6}, {0,0,1,2,3,4,5,6}, {0,1,2,3,4,5,6,7},
};
#endif

#ifdef SEL_NONZERO
/* nonzero's indices: long, or NZ_TO (with NZ_TO2, its 2-vector) when a graph
 * fuses the cast of nonzero's output into it (exact below 2^24 for float) */
#ifdef NZ_TO
#define TO NZ_TO
#define NZ_CAT_(a, b) a##b
#define NZ_CAT(a, b) NZ_CAT_(a, b)
#define NZ_V2(v) NZ_CAT(convert_, NZ_TO2)(v)
#else
#define TO long
#define NZ_V2(v) (v)
#endif
#else
#define TO TX
#endif

#define SEL_WRITE_ARGS                                                                   \
  CLB_DATA(const TX, x), CLB_DATA(const TM, m), SEL_SHAPE_ARGS, __global const long *scratch, \
      ulong fmask, int bcast, CLB_DATA(TO, out), long obound, CLB_DATA(const TX, src), __global const long *ssrc, \
      int rsrc, int nz_static, long fill

/* sel_write_range's parameters: the iteration shape (od, strides), chunk [s, e)
 * of group g of ng, its first result k, its true flags cnt, and the total. */
#define SEL_RANGE_PARAMS                                                                 \
  __global const TX *x, __global const TM *m, int rank, const long *od, const long *stx, const long *stm, TM fm, \
      int bcast, __global TO *out, long obound, __global const TX *src, __global const long *ssrc, int rsrc,   \
      int nz_static, long fill, long s, long e, long k, long cnt, long total, long g, long ng
#define SEL_RANGE_CALL(k, cnt, total)                                                     \
  sel_write_range(x, m, rank, od, stx, stm, (TM)fmask, bcast, out, obound, src, ssrc, rsrc, nz_static, fill, s, e, \
                  (k), (cnt), (total), g, ng)

#if defined(SEL_NONZERO)
/* NZR: the rank, a constant when the program is built for rank 1 or 2. */
#if RANK > 0
#define NZR RANK
#else
#define NZR rank
#endif
/* Writes row k of the index output: the outer coordinates c[0..NZR-2], then j. */
#if RANK == 2
#define SEL_PUT(out, k, c, j) vstore2(NZ_V2((long2)((c)[0], (j))), (k), (out))
#elif RANK == 1
#define SEL_PUT(out, k, c, j) ((out)[k] = (TO)(j))
#else
#define SEL_PUT(out, k, c, j)                                                           \
  do {                                                                                  \
    __global TO *o_ = (out) + (k) * NZR;                                                \
    for (int d_ = 0; d_ < NZR - 1; d_++) o_[d_] = (TO)(c)[d_];                          \
    o_[NZR - 1] = (TO)(j);                                                              \
  } while (0)
#endif

/* The chunk is walked in runs along the last dim; inside a run, blocks of 32
 * flags with no nonzero are skipped, sparse or near-end blocks written flag by
 * flag, and the others 8 rows per group (ranks 1 and 2) or branchlessly (every
 * element writes its row at k, and k advances only past nonzero ones). */
inline void sel_write_range(SEL_RANGE_PARAMS) {
  long kend = min(k + cnt, obound);
  /* under one true flag per block on average: mixed blocks go flag by flag */
  const int sparse = cnt * SEL_BLOCK < e - s;
  if (NZR > 0 && k < kend) {
    long c[8];
    long r = s;
    for (int d = NZR - 1; d >= 0; d--) {
      c[d] = r % od[d];
      r /= od[d];
    }
    long inner = od[NZR - 1];
    long i = s;
    while (i < e && k < kend) {
      long j = c[NZR - 1];
      long jend = min(inner, j + (e - i));
      __global const TM *p = m + (i - j);
      i += jend - j;
      while (j < jend && k < kend) {
        if (jend - j >= SEL_BLOCK) {
          uint word = sel_bits32(p + j, fm);
          if (word == 0u) {
            j += SEL_BLOCK;
            continue;
          }
          if (kend - k < SEL_BLOCK || sparse) {
            /* near the chunk's last output, or a sparse chunk: the set flags one by one */
            do {
              SEL_PUT(out, k, c, j + popcount((word & (0u - word)) - 1u));
              k++;
              word &= word - 1u;
            } while (word != 0u && k < kend);
            j += SEL_BLOCK;
            continue;
          }
#if RANK == 2
          /* 8 rows (16 longs) per group of 8 flags: kend - k >= 32 at the block's
           * start and each group takes at most 8, so every store stays inside this
           * chunk's outputs; the rows past the kept ones are rewritten next */
          for (int b = 0; b < SEL_BLOCK; b += 8) {
            uint bits = (word >> b) & 0xffu;
            long8 col = (long8)(j + b) + convert_long8(SEL_PACK8(bits));
            long8 row = (long8)(c[0]);
            vstore16((long16)(row.s0, col.s0, row.s1, col.s1, row.s2, col.s2, row.s3, col.s3, row.s4, col.s4,
                              row.s5, col.s5, row.s6, col.s6, row.s7, col.s7),
                     0, out + 2 * k);
            k += popcount(bits);
          }
          j += SEL_BLOCK;
#elif RANK == 1
          for (int b = 0; b < SEL_BLOCK; b += 8) {
            uint bits = (word >> b) & 0xffu;
            vstore8((long8)(j + b) + convert_long8(SEL_PACK8(bits)), 0, out + k);
            k += popcount(bits);
          }
          j += SEL_BLOCK;
#else
          for (int b = 0; b < SEL_BLOCK; b++, j++) {
            SEL_PUT(out, k, c, j);
            k += (word >> b) & 1u;
          }
#endif
        } else {
          if ((p[j] & fm) != (TM)0) {
            SEL_PUT(out, k, c, j);
            k++;
          }
          j++;
        }
      }
      c[NZR - 1] = 0;
      for (int d = NZR - 2; d >= 0; d--) {
        if (++c[d] < od[d]) break;
        c[d] = 0;
      }
    }
  }
  if (NZR > 0 && nz_static) {
    /* rows [total, obound) take the fill value, spread over the groups */
    if (total < obound) {
      long rows = obound - total, per = (rows + ng - 1) / ng;
      long r0 = min(total + g * per, obound), r1 = min(r0 + per, obound);
      for (long q = r0 * NZR; q < r1 * NZR; q++) out[q] = (TO)fill;
    }
  }
}

#elif defined(SEL_SELECT)

/* Blocks with no true flag are skipped, blocks of all true flags copied as
 * vectors, sparse or near-end blocks written flag by flag, and mixed blocks
 * left-packed 8 lanes at a time. Near the chunk's last output no vector store
 * runs, so no store ever lands past this chunk's outputs. */
inline void sel_write_range(SEL_RANGE_PARAMS) {
  long kend = min(k + cnt, obound);
  /* under one true flag per block on average: mixed blocks go flag by flag */
  const int sparse = cnt * SEL_BLOCK < e - s;
  if (bcast && stm[rank - 1] == 0 && stx[rank - 1] == 1) {
    /* a row mask over rows of x that are contiguous: whole runs copied or skipped */
    for (long i = s; i < e && k < kend;) {
      long ix, im, run = min(e - i, od[rank - 1] - i % od[rank - 1]);
      sel_split(i, rank, od, stx, stm, &ix, &im);
      if ((m[im] & fm) != (TM)0) {
        long cnt = min(run, kend - k);
        for (long j = 0; j < cnt; j++) out[k + j] = x[ix + j];
        k += cnt;
      }
      i += run;
    }
    return;
  }
  if (bcast) {
    for (long i = s; i < e && k < kend; i++) {
      long ix, im;
      sel_split(i, rank, od, stx, stm, &ix, &im);
      if ((m[im] & fm) != (TM)0) out[k++] = x[ix];
    }
    return;
  }
  long i = s;
  while (i < e && k < kend) {
    if (e - i >= SEL_BLOCK) {
      __global const TM *q = m + i;
      __global const TX *v = x + i;
      uint word = sel_bits32(q, fm);
      if (word == 0u) {
      } else if (kend - k < SEL_BLOCK || sparse) {
        /* near the chunk's last output, or a sparse chunk: the set flags one by one */
        do {
          out[k++] = v[popcount((word & (0u - word)) - 1u)];
          word &= word - 1u;
        } while (word != 0u && k < kend);
      } else if (word == 0xffffffffu) {
        vstore16(vload16(0, v), 0, out + k);
        vstore16(vload16(1, v), 1, out + k);
        k += SEL_BLOCK;
      } else {
        /* kend - k >= 32 at the block's start and each group of 8 takes at most
         * 8, so every vstore8 lands inside this chunk's outputs; the lanes past
         * the kept ones are rewritten by the next group */
        for (int b = 0; b < SEL_BLOCK; b += 8) {
          uint bits = (word >> b) & 0xffu;
          TX8 v8 = vload8(0, v + b);
#ifdef SEL_PERMUTE8
          vstore8(SEL_PERMUTE8(v8, SEL_PACK8(bits)), 0, out + k);
#else
          /* lane j stores at its rank among the kept lanes; a dropped lane's store
           * is overwritten by the next kept lane's (or the next group's first) */
          uchar8 e8 = SEL_EXPAND8(bits);
          __global TX *o = out + k;
          o[e8.s0] = v8.s0;
          o[e8.s1] = v8.s1;
          o[e8.s2] = v8.s2;
          o[e8.s3] = v8.s3;
          o[e8.s4] = v8.s4;
          o[e8.s5] = v8.s5;
          o[e8.s6] = v8.s6;
          o[e8.s7] = v8.s7;
#endif
          k += popcount(bits);
        }
      }
      i += SEL_BLOCK;
    } else {
      if ((m[i] & fm) != (TM)0) out[k++] = x[i];
      i++;
    }
  }
}

#elif defined(SEL_SCATTER)

/* Every element of the chunk is written: x's value, or the next source element
 * under a true flag. While the chunk's source range lies inside the source,
 * blocks are copied from x (no true flag), from the source (all true) or
 * blended branchlessly; otherwise every element checks k against the source's
 * length and keeps x's value past it. */
inline void sel_write_range(SEL_RANGE_PARAMS) {
  long nsrc = clb_numel(ssrc, rsrc);
  if (bcast) {
    for (long i = s; i < e; i++) {
      long ix, im;
      sel_split(i, rank, od, stx, stm, &ix, &im);
      int f = (m[im] & fm) != (TM)0;
      out[i] = (f && k < nsrc) ? src[k] : x[i];
      k += f;
    }
    return;
  }
  long i = s;
  if (k + cnt <= nsrc) {
    long klast = k + cnt - 1; /* >= k whenever a block holds a true flag */
    for (; i + SEL_BLOCK <= e; i += SEL_BLOCK) {
      __global const TM *q = m + i;
      __global const TX *v = x + i;
      __global TX *o = out + i;
      uint word = sel_bits32(q, fm);
      if (word == 0u) {
        vstore16(vload16(0, v), 0, o);
        vstore16(vload16(1, v), 1, o);
      } else if (word == 0xffffffffu) {
        vstore16(vload16(0, src + k), 0, o);
        vstore16(vload16(1, src + k), 1, o);
        k += SEL_BLOCK;
      } else if (k + SEL_BLOCK <= nsrc) {
        /* the next 32 source elements exist: expand them 8 lanes at a time */
        for (int b = 0; b < SEL_BLOCK; b += 8) {
          uint bits = (word >> b) & 0xffu;
#ifdef SEL_PERMUTE8
          TX8 s8 = SEL_PERMUTE8(vload8(0, src + k), SEL_EXPAND8(bits));
#else
          /* lane j takes source element k + e8[j] (k + 32 <= nsrc: all exist),
           * read directly: no shuffle() with a run-time mask, which not every
           * compiler handles well */
          uchar8 e8 = SEL_EXPAND8(bits);
          __global const TX *sk = src + k;
          TX8 s8 = (TX8)(sk[e8.s0], sk[e8.s1], sk[e8.s2], sk[e8.s3], sk[e8.s4], sk[e8.s5], sk[e8.s6], sk[e8.s7]);
#endif
          TX8 keep = ((TX8)(TX)bits >> (TX8)(0, 1, 2, 3, 4, 5, 6, 7)) & (TX8)1;
          vstore8(bitselect(vload8(0, v + b), s8, (TX8)0 - keep), 0, o + b);
          k += popcount(bits);
        }
      } else {
        for (int b = 0; b < SEL_BLOCK; b++) {
          int f = (q[b] & fm) != (TM)0;
          TX sv = src[min(k, klast)];
          o[b] = f ? sv : v[b];
          k += f;
        }
      }
    }
  }
  for (; i < e; i++) {
    int f = (m[i] & fm) != (TM)0;
    out[i] = (f && k < nsrc) ? src[k] : x[i];
    k += f;
  }
}
#endif

__kernel void sel_write(SEL_WRITE_ARGS) {
  SEL_SHAPE_LOCALS;
  CLB_DATA_AT(const TX, x);
  CLB_DATA_AT(const TM, m);
  CLB_DATA_AT(TO, out);
  CLB_DATA_AT(const TX, src);
  long g = get_group_id(0), ng = get_num_groups(0);
  long s, e;
  sel_chunk(n, g, ng, &s, &e);
  SEL_RANGE_CALL(scratch[ng + g], scratch[g], scratch[2 * ng]);
}

/* ---- one launch: count, bookkeeping and write ----------------------------------- */

/* For small masks (runtime/ops/select.c decides): every group counts the flags
 * before its chunk itself (a prefix of the mask, cheap when the mask is small or
 * a row mask), so no scratch and no second or third launch; the last group, which
 * sees the total, does sel_finish's bookkeeping. Chunks are sel_write's. */
__kernel void sel_single(CLB_DATA(const TX, x), CLB_DATA(const TM, m), SEL_SHAPE_ARGS, ulong fmask, int bcast,
                         CLB_DATA(TO, out), long obound, CLB_DATA(const TX, src), __global const long *ssrc, int rsrc,
                         int nz_static, long fill, __global long *so, CLB_DATA(long, count_out), __global long *sv,
                         int rv, long8 spv, __global int *st, uint launch) {
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
  long k = sel_count_range(m, fm, bcast, rank, od, stx, stm, 0, s);
  long cnt = sel_count_range(m, fm, bcast, rank, od, stx, stm, s, e);
  long total = k + cnt;
  if (nz_static || g == ng - 1) total += sel_count_range(m, fm, bcast, rank, od, stx, stm, e, n);
  if (g == ng - 1)
    sel_finish_total(total, n, rank, bad_x, bad_m, sx, so, obound, ssrc, rsrc, count_out, nz_static, sv, rv, spv, st,
                     launch);
  SEL_RANGE_CALL(k, cnt, total);
}
