/* test-random.c: clb_rand_uniform. A host Philox4x32-10, checked first against
 * Random123's known-answer vectors, gives every value the device must produce
 * bit for bit (f32 and f64, several seeds, actual sizes from 0 to the bound);
 * the values lie in [0, 1) and spread evenly (chi-square over 64 bins); the
 * output takes like's sizes and writes nothing past them; errors. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cl-test.h"

/* Philox4x32-10 as the SC'11 paper defines it, written for this test. */
static void philox(const uint32_t ctr[4], uint64_t seed, uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    if (r) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n1 = (uint32_t)p1, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1,
             n3 = (uint32_t)p0;
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* Random123's kat_vectors for philox4x32 with 10 rounds: counter, key, result. */
static void test_known_answers(void) {
  static const uint32_t kat[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e, 0xa20bc7c6,
       0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb, 0x5001e420,
       0x24126ea1},
  };
  for (int v = 0; v < 3; v++) {
    uint32_t got[4];
    philox(kat[v], (uint64_t)kat[v][5] << 32 | kat[v][4], got);
    for (int w = 0; w < 4; w++) EXPECT_TRUE(got[w] == kat[v][6 + w]);
  }
}

static double want_value(int f64, int64_t i, uint64_t seed) {
  uint32_t ctr[4] = {(uint32_t)i, (uint32_t)((uint64_t)i >> 32), 0, 0}, w[4];
  philox(ctr, seed, w);
  if (!f64) return (double)(float)((float)(w[0] >> 8) * (1.0f / 16777216.0f));
  return ((double)(w[0] >> 5) * 67108864.0 + (double)(w[1] >> 6)) * (1.0 / 9007199254740992.0);
}

enum { BOUND = 4099 };

static void test_values(clb_context_t ctx, int f64) {
  static double got[BOUND];
  const clb_dtype dt = f64 ? CLB_DTYPE_F64 : CLB_DTYPE_F32;
  static const uint64_t seeds[] = {0, 1, 0xffffffffffffffffull, 0x0123456789abcdefull};
  static const int64_t rows[] = {0, 1, 7, 1000, BOUND / 3};
  int64_t b[2] = {BOUND / 3, 3}, d[2];
  uint8_t dyn[2] = {1, 0};
  clb_tensor_t like = NULL; /* i32: like's dtype and data are not used */
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 2, b, dyn, &like));
  for (int s = 0; s < 4; s++)
    for (int r = 0; r < 5; r++) {
      if (clb_test_small() && r == 4) continue;
      d[0] = rows[r], d[1] = 3;
      CL_OK(ctx, clb_tensor_set_sizes(ctx, like, d));
      clb_tensor_t o = NULL;
      CL_OK(ctx, clb_tensor_new(ctx, dt, 2, b, dyn, &o));
      clb_test_canary_fill(ctx, o);
      CL_OK(ctx, clb_rand_uniform(ctx, like, dt, seeds[s], &o));
      int64_t dims[2];
      int64_t n = clb_test_read(ctx, o, dims, got, BOUND);
      EXPECT_EQ_I(n, rows[r] * 3);
      EXPECT_EQ_I(dims[0], rows[r]);
      for (int64_t i = 0; i < n; i++) {
        double want = want_value(f64, i, seeds[s]);
        clb_test_checks++;
        if (!(got[i] == want && got[i] >= 0 && got[i] < 1))
          CLB_FAIL_AT("%s seed %llx rows %lld [%lld]: got %.17g want %.17g", clb_dtype_name(dt),
                      (unsigned long long)seeds[s], (long long)rows[r], (long long)i, got[i], want);
      }
      char what[96];
      snprintf(what, sizeof what, "rand_uniform %s rows %lld", clb_dtype_name(dt), (long long)rows[r]);
      clb_test_canary_check(ctx, o, (size_t)n * clb_dtype_size(dt), what);
      clb_tensor_free(o);
    }
  clb_tensor_free(like);
}

/* 64 bins of 2^15 values (f32, seed 42, a 1-D like made by clb_rand_uniform's
 * own output type): chi-square with 63 degrees of freedom under 110 (p about
 * 2e-4 for a fair generator); the same seed twice gives the same numbers, the
 * next seed others. */
static void test_spread(clb_context_t ctx) {
  enum { N = 1 << 15, BINS = 64 };
  static double a[N], b[N];
  int64_t bn[1] = {N};
  clb_tensor_t like = NULL, o = NULL, o2 = NULL, o3 = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_U8, 1, bn, NULL, &like));
  CL_OK(ctx, clb_rand_uniform(ctx, like, CLB_DTYPE_F32, 42, &o));
  CL_OK(ctx, clb_rand_uniform(ctx, like, CLB_DTYPE_F32, 42, &o2));
  CL_OK(ctx, clb_rand_uniform(ctx, like, CLB_DTYPE_F32, 43, &o3));
  EXPECT_EQ_I(clb_test_read(ctx, o, NULL, a, N), N);
  double hist[BINS] = {0}, mean = 0;
  for (int i = 0; i < N; i++) hist[(int)(a[i] * BINS)] += 1, mean += a[i] / N;
  double chi = 0, e = (double)N / BINS;
  for (int k = 0; k < BINS; k++) chi += (hist[k] - e) * (hist[k] - e) / e;
  EXPECT_TRUE(chi < 110);
  EXPECT_TRUE(fabs(mean - 0.5) < 4 * sqrt(1.0 / 12 / N));
  EXPECT_EQ_I(clb_test_read(ctx, o2, NULL, b, N), N);
  EXPECT_TRUE(memcmp(a, b, sizeof a) == 0);
  EXPECT_EQ_I(clb_test_read(ctx, o3, NULL, b, N), N);
  int same = 0;
  for (int i = 0; i < N; i++) same += a[i] == b[i];
  EXPECT_TRUE(same < 16); /* 2^24 values: a few coincide by chance */
  clb_tensor_free(like);
  clb_tensor_free(o);
  clb_tensor_free(o2);
  clb_tensor_free(o3);
}

static void test_errors(clb_context_t ctx, int f64) {
  int64_t b[1] = {4};
  clb_tensor_t like = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b, NULL, &like));
  EXPECT_STATUS(ctx, clb_rand_uniform(ctx, like, CLB_DTYPE_I32, 1, &o), CLB_ERR_DTYPE,
                "rand_uniform: dtype i32: uniform numbers are f32 or f64");
  EXPECT_STATUS(ctx, clb_rand_uniform(ctx, like, (clb_dtype)99, 1, &o), CLB_ERR_DTYPE, "dtype (unknown)");
  EXPECT_STATUS(ctx, clb_rand_uniform(ctx, NULL, CLB_DTYPE_F32, 1, &o), CLB_ERR_NULL, "rand_uniform");
  EXPECT_STATUS(ctx, clb_rand_uniform(ctx, like, CLB_DTYPE_F32, 1, NULL), CLB_ERR_NULL, "out is NULL");
  if (!f64) EXPECT_STATUS(ctx, clb_rand_uniform(ctx, like, CLB_DTYPE_F64, 1, &o), CLB_ERR_UNSUPPORTED, "cl_khr_fp64");
  EXPECT_TRUE(o == NULL);
  EXPECT_EQ_I(clb_rand_uniform(NULL, like, CLB_DTYPE_F32, 1, &o), CLB_ERR_NULL);
  clb_tensor_free(like);
}

int main(void) {
  test_known_answers();
  clb_context_t ctx = clb_test_context(NULL);
  const int fp64 = clb_test_has_fp64();
  test_values(ctx, 0);
  if (fp64 && !clb_test_small()) test_values(ctx, 1);
  if (!clb_test_small()) test_spread(ctx);
  test_errors(ctx, fp64);
  clb_context_free(ctx);
  return clb_test_finish("ops/random");
}
