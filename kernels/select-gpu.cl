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

#ifdef SEL_NONZERO
/* Row o of nonzero's output: the indices of iteration index i in dims od, by
 * 32-bit division where both sides fit (a GPU emulates 64-bit division in
 * dozens of instructions). */
inline void sel_put_index(__global TO *out, long o, long i, int rank, const long *od) {
  for (int d = rank - 1; d >= 0; d--) {
    long q, c;
    if ((ulong)i <= 0xffffffffUL && (ulong)od[d] <= 0xffffffffUL) {
      uint ui = (uint)i, ud = (uint)od[d];
      q = (long)(ui / ud);
      c = (long)(ui - (uint)q * ud);
    } else {
      q = i / od[d];
      c = i - q * od[d];
    }
    out[o * rank + d] = (TO)c;
    i = q;
  }
}
#endif

/* The result of iteration index i (x's element ix, flag f) whose exclusive
 * prefix among the true flags is pos: masked_scatter writes every element,
 * the others only a true flag's, never at or past obound. */
inline void sel_put(__global const TX *x, __global TO *out, __global const TX *src, long nsrc, long obound, int rank,
                    const long *od, int f, long pos, long i, long ix) {
#if defined(SEL_SCATTER)
  out[i] = (f && pos < nsrc) ? src[pos] : x[ix];
#elif defined(SEL_SELECT)
  if (f && pos < obound) out[pos] = x[ix];
#else
  if (f && pos < obound) sel_put_index(out, pos, i, rank, od);
#endif
}

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
#else
  long nsrc = 0;
#endif
  for (long t = s; t < e; t += LOCAL) {
#ifndef SEL_SCATTER
    if (base >= obound) break; /* uniform over the work-group */
#endif
    long i = t + lid, ix = 0;
    int f = i < e ? sel_flag(m, fm, bcast, i, rank, od, stx, stm, &ix) : 0;
    long tot;
    long pos = base + sel_scan(buf, f, &tot) - f;
    if (i < e) sel_put(x, out, src, nsrc, obound, rank, od, f, pos, i, ix);
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

#ifdef SEL_LOOKBACK
/* ---- one launch at any size: a single pass with decoupled look-back -----------
 *
 * sel_lookback (docs/dataops.md, "One pass with decoupled look-back"), as CUB's
 * DeviceSelect: the work-groups take tiles of SEL_TILE elements in the order of
 * a ticket counter, so the tile a group holds was handed out after every tile
 * before it; each tile publishes its flag count (AGGREGATE) as soon as it has
 * it, then walks back over its predecessors' status words adding aggregates
 * until it finds an INCLUSIVE prefix, publishes its own inclusive prefix and
 * writes its results at that offset. The last tile does sel_finish's
 * bookkeeping; the last group to finish resets the state for the next launch.
 *
 * State, `lb` (runtime/ops/select.c keeps one zeroed buffer per context and
 * never writes it from the host again): lb[0] the ticket counter, lb[1] the
 * groups done, lb[2] the epoch e, then one status word per tile of the
 * bound. A status word is (tag << 42) | (flag << 40) | count: a word counts
 * only when its tag is this launch's e + 1, so status words need no reset
 * between launches; after SEL_LB_EPOCHS launches the last group clears all of
 * them and e starts again at 0.
 *
 * Termination: a tile waits only on tiles with lower tickets, handed out
 * earlier to groups that are running (they took a ticket), and none of those
 * waits on a later tile, so waits end where started work-groups make progress
 * (the device trait "forward progress", runtime/core/traits.c). Every wait is
 * also bounded: after SEL_LB_SPIN reads of a word that is not ready, the
 * waiting group counts that tile's flags itself and goes on, so the kernel
 * ends on any device, only slower. Test builds (CLBOUND_TEST_SELECT_LOOKBACK,
 * docs/portability.md) hand tiles out in another order (SEL_LB_REVERSE,
 * SEL_LB_INTERLEAVE: a tile may then precede tiles not handed out yet, which
 * its group counts itself instead of waiting), publish only aggregates from
 * odd tiles (SEL_LB_AGG_ONLY), and lower SEL_LB_SPIN and SEL_LB_EPOCHS. */
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable

#ifndef SEL_ITEMS
#define SEL_ITEMS 8 /* flags per work-item and tile (at most 32: one bit each) */
#endif
#define SEL_TILE ((long)LOCAL * SEL_ITEMS)
/* Staged tiles: a work-item's SEL_ITEMS elements are contiguous, so it reads
 * them as one vector (a warp's loads cover one span) where the tile is full
 * and nothing broadcasts; masked_select and nonzero compact the tile's results
 * in local memory and write them out from consecutive work-items (coalesced
 * stores, as CUB's two-phase scatter), masked_scatter writes its SEL_ITEMS
 * outputs as one vector. SEL_LB_UNSTAGED (CLBOUND_TEST_SELECT_LOOKBACK=unstaged)
 * keeps the element-by-element loads and stores, for comparison. */
#if (SEL_ITEMS == 8 || SEL_ITEMS == 16) && !defined(SEL_LB_UNSTAGED)
#define SEL_LB_STAGED
#define SEL_VLOAD_(n) vload##n
#define SEL_VLOAD(n) SEL_VLOAD_(n)
#define SEL_VSTORE_(n) vstore##n
#define SEL_VSTORE(n) SEL_VSTORE_(n)
/* a work-item's SEL_ITEMS elements at p, to or from a private array */
#define SEL_LB_GET(p, a) SEL_VSTORE(SEL_ITEMS)(SEL_VLOAD(SEL_ITEMS)(0, p), 0, a)
#endif
#ifndef SEL_LB_SPIN
#define SEL_LB_SPIN 4096
#endif
#ifndef SEL_LB_WINDOW
#define SEL_LB_WINDOW 32 /* status words a look-back reads at once (a warp's worth) */
#endif
#ifndef SEL_LB_EPOCHS
#define SEL_LB_EPOCHS 4194303L /* tags 1 .. 2^22 - 1 */
#endif
#define SEL_LB_HDR 4
#define SEL_LB_AGG 1UL
#define SEL_LB_INC 2UL
#define SEL_LB_VALUE ((1UL << 40) - 1)

inline ulong lb_load(volatile __global ulong *p) { return atom_add(p, 0UL); }
inline void lb_store(volatile __global ulong *p, ulong v) { (void)atom_xchg(p, v); }
inline ulong lb_word(ulong tag, ulong flag, long v) { return (tag << 42) | (flag << 40) | ((ulong)v & SEL_LB_VALUE); }

/* The tile of ticket k of T, and the ticket of tile j: the identity, except in
 * the test orders. */
inline long lb_tile_of(long k, long T) {
#if defined(SEL_LB_REVERSE)
  return k < T ? T - 1 - k : k;
#elif defined(SEL_LB_INTERLEAVE)
  const long p[4] = {2, 0, 3, 1}; /* tiles 2, 0, 3, 1, then 6, 4, 7, 5, ... */
  long b = k & ~3L;
  return b + 4 <= T ? b + p[k & 3] : k;
#else
  return k;
#endif
}

/* Whether tile j (before the caller's tile) was handed out: always in ticket
 * order; in the test orders, its ticket is below the counter. */
inline int lb_started(volatile __global ulong *hdr, long j, long T) {
#if defined(SEL_LB_REVERSE)
  return T - 1 - j < (long)lb_load(&hdr[0]);
#elif defined(SEL_LB_INTERLEAVE)
  const long q[4] = {1, 3, 0, 2}; /* the inverse of lb_tile_of's p */
  long b = j & ~3L;
  return (b + 4 <= T ? b + q[j & 3] : j) < (long)lb_load(&hdr[0]);
#else
  return 1;
#endif
}

/* Whether tile t publishes its inclusive prefix (test: odd tiles never do). */
inline int lb_publishes_inclusive(long t) {
#ifdef SEL_LB_AGG_ONLY
  return (t & 1) == 0;
#else
  return 1;
#endif
}

/* Walks back from tile sh[2] adding to sh[1] until an inclusive prefix is
 * found or tile 0 passed (returns 1), or a tile's word is not ready after
 * SEL_LB_SPIN reads or the tile was not handed out (returns 2, sh[2] that
 * tile); every work-item gets the result. A window of SEL_LB_WINDOW words
 * (tiles j, j-1, ...) is read at once, one per work-item, and work-item 0
 * walks it in local memory (CUB's warp-wide look-back): one round of global
 * reads, not one per predecessor, where many tiles are in flight. */
inline int lb_walk(__local long *sh, __local ulong *win, volatile __global ulong *hdr, volatile __global ulong *stw,
                   ulong tag, long T) {
  const int lid = (int)get_local_id(0), W = LOCAL < SEL_LB_WINDOW ? LOCAL : SEL_LB_WINDOW;
  int spins = 0, done; /* spins: work-item 0's reads of the word it waits on */
  do { /* the exit test at the latch, after a barrier: PoCL hung on a break at the top */
    barrier(CLK_LOCAL_MEM_FENCE);
    const long j = sh[2];
    if (lid < W) win[lid] = j - lid >= 0 ? lb_load(&stw[j - lid]) : 0UL;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
      long run = sh[1];
      int state = 0, k = 0;
      for (; k < W; k++) {
        if (j - k < 0) {
          state = 1;
          break;
        }
        ulong w = win[k];
        if ((w >> 42) != tag) { /* not ready: read it again, or count the tile */
          if (!lb_started(hdr, j - k, T) || ++spins > SEL_LB_SPIN) state = 2;
          break;
        }
        run += (long)(w & SEL_LB_VALUE);
        spins = 0;
        if (((w >> 40) & 3UL) == SEL_LB_INC) {
          state = 1;
          break;
        }
      }
      sh[1] = run;
      sh[2] = j - k;
      sh[3] = state;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    done = sh[3] != 0; /* uniform: every work-item reads it after the barrier */
  } while (!done);
  return (int)sh[3];
}

/* The flags of tile t before it (its exclusive prefix), from its predecessors'
 * status words; publishes t's aggregate agg first and its inclusive prefix
 * last. Every work-item must call it and gets the prefix; work-item 0 reads
 * and writes the words (lb_walk), the group counts a tile's flags itself
 * (sel_count_wg) when its word is not ready after SEL_LB_SPIN reads or it was
 * not handed out. */
inline long lb_prefix(__local long *buf, __local long *sh, __local ulong *win, volatile __global ulong *hdr,
                      volatile __global ulong *stw,
                      ulong tag, long t, long T, long agg, __global const TM *m, TM fm, int bcast, int rank,
                      const long *od, const long *stx, const long *stm, long n) {
  int lid = (int)get_local_id(0);
  if (lid == 0) {
    lb_store(&stw[t], lb_word(tag, t == 0 ? SEL_LB_INC : SEL_LB_AGG, agg));
    sh[1] = 0;     /* the flags found so far */
    sh[2] = t - 1; /* the next tile to look at */
  }
  int state = lb_walk(sh, win, hdr, stw, tag, T);
  while (state == 2) {
    long j = sh[2];
    long c = sel_count_wg(buf, m, fm, bcast, rank, od, stx, stm, j * SEL_TILE, min((j + 1) * SEL_TILE, n));
    if (lid == 0) {
      sh[1] += c;
      sh[2] = j - 1;
    }
    state = lb_walk(sh, win, hdr, stw, tag, T);
  }
  long prefix = sh[1];
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid == 0 && t > 0 && lb_publishes_inclusive(t)) lb_store(&stw[t], lb_word(tag, SEL_LB_INC, prefix + agg));
  return prefix;
}

/* A work-item's results element by element: iteration indices [i0, te) up to
 * SEL_ITEMS of them, flags `bits`, the first true one's result at pos. */
inline void lb_put_items(__global const TX *x, __global TO *out, __global const TX *src, long nsrc, long obound,
                         int rank, const long *od, const long *stx, const long *stm, int bcast, uint bits, long i0,
                         long te, long pos) {
  for (int q = 0; q < SEL_ITEMS && i0 + q < te; q++) {
    long i = i0 + q, ix = i, im;
    int f = (bits >> q) & 1u;
    if (bcast) sel_split(i, rank, od, stx, stm, &ix, &im);
    sel_put(x, out, src, nsrc, obound, rank, od, f, pos, i, ix);
    pos += f;
  }
}

/* The next ticket, to every work-item of the group. */
inline long lb_draw(__local long *sh, volatile __global ulong *hdr) {
  barrier(CLK_LOCAL_MEM_FENCE);
  if (get_local_id(0) == 0) sh[0] = (long)atom_inc(&hdr[0]);
  barrier(CLK_LOCAL_MEM_FENCE);
  return sh[0];
}

__kernel CLB_FIXED_LOCAL void sel_lookback(CLB_DATA(const TX, x), CLB_DATA(const TM, m), SEL_SHAPE_ARGS, ulong fmask,
                                           int bcast, CLB_DATA(TO, out), long obound, CLB_DATA(const TX, src),
                                           __global const long *ssrc, int rsrc, int nz_static, long fill,
                                           __global long *so, CLB_DATA(long, count_out), __global long *sv, int rv,
                                           long8 spv, __global ulong *lb, long lb_cap, __global int *st,
                                           uint launch) {
  CLB_DATA_AT(const TX, x);
  CLB_DATA_AT(const TM, m);
  CLB_DATA_AT(TO, out);
  CLB_DATA_AT(const TX, src);
  CLB_DATA_AT(long, count_out);
  __local long buf[LOCAL];
  __local long sh[4];
  __local ulong win[SEL_LB_WINDOW]; /* lb_walk's window of status words */
#if defined(SEL_LB_STAGED) && defined(SEL_SELECT)
  __local TX stage[SEL_TILE]; /* the tile's selected values, compacted */
#elif defined(SEL_LB_STAGED) && defined(SEL_NONZERO)
  __local long stage[SEL_TILE]; /* the tile's true flags' iteration indices, compacted */
#endif
  SEL_SHAPE_LOCALS;
  const TM fm = (TM)fmask;
  const int lid = (int)get_local_id(0);
  volatile __global ulong *hdr = (volatile __global ulong *)lb;
  volatile __global ulong *stw = hdr + SEL_LB_HDR;
  /* at least one tile, so an empty input still gets its bookkeeping */
  const long T = n > 0 ? (n + SEL_TILE - 1) / SEL_TILE : 1;
#ifdef SEL_SCATTER
  const long nsrc = clb_numel(ssrc, rsrc);
#else
  const long nsrc = 0;
#endif
  if (lid == 0) sh[0] = (long)lb_load(&hdr[2]) + 1;
  barrier(CLK_LOCAL_MEM_FENCE);
  const ulong tag = (ulong)sh[0];
  for (long k = lb_draw(sh, hdr); k < T; k = lb_draw(sh, hdr)) {
    const long t = lb_tile_of(k, T);
    const long ts = t * SEL_TILE, te = min(ts + SEL_TILE, n), i0 = ts + (long)lid * SEL_ITEMS;
    uint bits = 0;
#ifdef SEL_LB_STAGED
    const int vec = !bcast && i0 + SEL_ITEMS <= te; /* a full run, no broadcast: vectors */
    if (vec) {
      TM mq[SEL_ITEMS];
      SEL_LB_GET(m + i0, mq);
      for (int q = 0; q < SEL_ITEMS; q++) bits |= (uint)((mq[q] & fm) != (TM)0) << q;
    } else
#endif
      for (int q = 0; q < SEL_ITEMS; q++) {
        long ix;
        if (i0 + q < te && sel_flag(m, fm, bcast, i0 + q, rank, od, stx, stm, &ix)) bits |= 1u << q;
      }
    long c = (long)popcount(bits), agg;
    long excl = sel_scan(buf, c, &agg) - c;
    long prefix = lb_prefix(buf, sh, win, hdr, stw, tag, t, T, agg, m, fm, bcast, rank, od, stx, stm, n);
#if defined(SEL_LB_STAGED) && (defined(SEL_SELECT) || defined(SEL_NONZERO))
    /* compact into stage at the tile's own offsets, then out from consecutive
     * work-items, never at or past obound */
    {
      long p = excl;
#ifdef SEL_SELECT
      TX xq[SEL_ITEMS];
      if (vec) SEL_LB_GET(x + i0, xq);
#endif
      for (int q = 0; q < SEL_ITEMS && i0 + q < te; q++) {
        if (!((bits >> q) & 1u)) continue;
        long i = i0 + q;
#ifdef SEL_SELECT
        long ix = i, im;
        if (bcast) sel_split(i, rank, od, stx, stm, &ix, &im);
        stage[p++] = vec ? xq[q] : x[ix];
#else
        stage[p++] = i;
#endif
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      const long room = obound - prefix; /* results the bound still takes */
      for (long j = lid; j < agg && j < room; j += LOCAL) {
#ifdef SEL_SELECT
        out[prefix + j] = stage[j];
#else
        sel_put_index(out, prefix + j, stage[j], rank, od);
#endif
      }
      barrier(CLK_LOCAL_MEM_FENCE); /* stage is the next tile's */
    }
#elif defined(SEL_LB_STAGED) && defined(SEL_SCATTER)
    if (vec) {
      TX xq[SEL_ITEMS];
      SEL_LB_GET(x + i0, xq);
      long p = prefix + excl;
      for (int q = 0; q < SEL_ITEMS; q++) {
        int f = (bits >> q) & 1u;
        if (f && p < nsrc) xq[q] = src[p];
        p += f;
      }
      SEL_LB_GET(xq, out + i0);
    } else {
      lb_put_items(x, out, src, nsrc, obound, rank, od, stx, stm, bcast, bits, i0, te, prefix + excl);
    }
#else
    lb_put_items(x, out, src, nsrc, obound, rank, od, stx, stm, bcast, bits, i0, te, prefix + excl);
#endif
    if (t == T - 1) { /* uniform: the last tile knows the total */
      const long total = prefix + agg;
      if (lid == 0)
        sel_finish_total(total, n, rank, bad_x, bad_m, sx, so, obound, ssrc, rsrc, count_out, nz_static, sv, rv,
                         spv, st, launch);
#ifdef SEL_NONZERO
      if (nz_static && total < obound && rank > 0)
        for (long q = total * rank + lid; q < obound * rank; q += LOCAL) out[q] = (TO)fill;
#endif
    }
  }
  /* the last group to finish (every other group is past its last access to the
   * state) resets the counters and moves to the next epoch */
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid == 0) {
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    sh[0] = atom_inc(&hdr[1]) == (ulong)get_num_groups(0) - 1;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (sh[0]) {
    long e = (long)lb_load(&hdr[2]) + 1;
    if (e >= SEL_LB_EPOCHS) {
      /* atomic like every other access to the words (a plain store here is a
       * race to Oclgrind, which does not follow the done counter's order) */
      for (long q = lid; q < lb_cap; q += LOCAL) lb_store(&stw[q], 0);
      e = 0;
    }
    if (lid == 0) {
      lb_store(&hdr[0], 0);
      lb_store(&hdr[1], 0);
      lb_store(&hdr[2], (ulong)e);
    }
  }
}
#endif
