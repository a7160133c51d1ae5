/* random.cl: uniform numbers at a tensor's actual sizes (clb_rand_uniform).
 * Built with T (float or double). The generator is Philox4x32-10 (Salmon,
 * Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11),
 * counter-based: element i is a pure function of (i, seed), so any device, any
 * work-group size and any split of the work give the same numbers. */

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

/* One round: the counter's words 0 and 2 multiplied (their high and low
 * halves), crossed with words 1 and 3 and the key. */
inline uint4 philox_round(uint4 c, uint2 k) {
  uint hi0 = mul_hi(PHILOX_M0, c.s0), lo0 = PHILOX_M0 * c.s0;
  uint hi1 = mul_hi(PHILOX_M1, c.s2), lo1 = PHILOX_M1 * c.s2;
  return (uint4)(hi1 ^ c.s1 ^ k.s0, lo1, hi0 ^ c.s3 ^ k.s1, lo0);
}

/* Ten rounds, the key bumped by the Weyl constants between them. */
inline uint4 philox4x32_10(uint4 c, uint2 k) {
  for (int r = 0; r < 10; r++) {
    if (r) k += (uint2)(PHILOX_W0, PHILOX_W1);
    c = philox_round(c, k);
  }
  return c;
}

/* out[i] for i below like's actual count: the counter {i, 0} (64-bit halves),
 * the key {seed lo, seed hi}; float takes the first word's top 24 bits over
 * 2^24, double 27 + 26 bits of the first two words over 2^53 (numpy's
 * random_double), so every value is in [0, 1). out takes like's sizes. */
__kernel void rand_uniform(__global const long *sl, int rank, CLB_DATA(T, out), __global long *so, uint key_lo,
                           uint key_hi) {
  CLB_DATA_AT(T, out);
  long n = clb_numel(sl, rank);
  if (clb_first_item() && CLB_OWN_RECORD(so, sl))
    for (int d = 0; d < rank; d++) so[d] = sl[d];
  uint2 key = (uint2)(key_lo, key_hi);
  CLB_FOR_CHUNK(i, n) {
    uint4 w = philox4x32_10((uint4)((uint)i, (uint)((ulong)i >> 32), 0u, 0u), key);
#ifdef CLB_NEED_FP64
    out[i] = ((double)(w.s0 >> 5) * 67108864.0 + (double)(w.s1 >> 6)) * (1.0 / 9007199254740992.0);
#else
    out[i] = (float)(w.s0 >> 8) * (1.0f / 16777216.0f);
#endif
  }
}
