/* test-nonzero.c: nonzero and nonzero_static against a plain-C reference: every
 * dtype, ranks 0 to 4, densities 0 to 100%, sizes around the work-group and chunk
 * sizes, actual sizes below the bound, both kernel styles, with canaries. */
#include "ops-test.h"

static const double densities[] = {0.0, 0.01, 0.5, 1.0};

/* Row-major indices of the nonzero values of v (dims[rank]) into ref; returns the count. */
static int64_t ref_nonzero(int rank, const int64_t *dims, const double *v, int64_t *ref) {
  int64_t n = clb_test_numel(rank, dims), cnt = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!ops_nz(v[i])) continue;
    int64_t rem = i;
    for (int d = rank - 1; d >= 0; d--) {
      ref[cnt * rank + d] = rem % dims[d];
      rem /= dims[d];
    }
    cnt++;
  }
  return cnt;
}

/* Reads an i64 tensor; returns its elements (malloc'd) and dims. */
static int64_t *read_i64(clb_context_t ctx, clb_tensor_t t, int64_t *dims, int64_t cap) {
  int64_t *buf = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *buf);
  REQUIRE_TRUE(buf != NULL);
  CL_OK(ctx, clb_tensor_read(ctx, t, dims, buf, (size_t)cap * sizeof *buf, NULL));
  return buf;
}

static long cases = 0;

/* Writes values at `density` into x at dims, then checks nonzero (into a
 * caller's output with canaries) and nonzero_static (size above and below the
 * count) against the reference. */
static void check_case(clb_context_t ctx, clb_tensor_t x, const int64_t *dims, double density) {
  clb_dtype dt = clb_tensor_dtype(x);
  int rank = clb_tensor_rank(x);
  int64_t n = clb_test_numel(rank, dims), nb = clb_tensor_bound_numel(x);
  double *v = malloc((size_t)(n + 1) * sizeof *v);
  int64_t *ref = malloc((size_t)(n * rank + 1) * sizeof *ref);
  REQUIRE_TRUE(v && ref);
  ops_gen(dt, n, density, v);
  ops_roundtrip(dt, v, n);
  clb_test_write(ctx, x, dims, v);
  int64_t cnt = ref_nonzero(rank, dims, v, ref);
  cases++;

  int64_t ob[2] = {nb, rank}, od[2];
  uint8_t dyn[2] = {1, 0};
  clb_tensor_t out = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 2, ob, dyn, &out));
  clb_test_canary_fill(ctx, out);
  CL_OK(ctx, clb_nonzero(ctx, x, &out));
  int64_t *got = read_i64(ctx, out, od, nb * rank);
  EXPECT_EQ_I(od[0], cnt);
  EXPECT_EQ_I(od[1], rank);
  int64_t bad = 0;
  for (int64_t i = 0; i < cnt * rank && od[0] == cnt; i++) bad += got[i] != ref[i];
  if (bad) CLB_FAIL_AT("nonzero %s rank %d n %lld density %g: %lld wrong indices", clb_dtype_name(dt), rank,
                       (long long)n, density, (long long)bad);
  clb_test_checks++;
  clb_test_canary_check(ctx, out, (size_t)(cnt * rank) * sizeof(int64_t), "nonzero output");
  free(got);
  clb_tensor_free(out);

  /* nonzero_static: padded above the count, truncated below it */
  int64_t sizes[2] = {cnt + 3, cnt / 2};
  for (int si = 0; si < 2; si++) {
    int64_t size = sizes[si], sb[2] = {size, rank}, sd[2];
    clb_tensor_t so = NULL, sc = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 2, sb, NULL, &so));
    clb_test_canary_fill(ctx, so);
    CL_OK(ctx, clb_nonzero_static(ctx, x, size, -7, &so, &sc));
    int64_t *sg = read_i64(ctx, so, sd, size * rank);
    EXPECT_EQ_I(sd[0], size);
    bad = 0;
    for (int64_t r = 0; r < size; r++)
      for (int d = 0; d < rank; d++) bad += sg[r * rank + d] != (r < cnt ? ref[r * rank + d] : -7);
    if (bad) CLB_FAIL_AT("nonzero_static %s rank %d n %lld size %lld: %lld wrong", clb_dtype_name(dt), rank,
                         (long long)n, (long long)size, (long long)bad);
    clb_test_checks++;
    clb_test_canary_check(ctx, so, (size_t)(size * rank) * sizeof(int64_t), "nonzero_static output");
    int64_t c = -1;
    CL_OK(ctx, clb_tensor_read(ctx, sc, NULL, &c, sizeof c, NULL));
    EXPECT_EQ_I(c, cnt);
    free(sg);
    clb_tensor_free(so);
    clb_tensor_free(sc);
  }
  free(v);
  free(ref);
}

/* Rank 1 around the work-group size (64 on PoCL) and the CPU chunk size (1024),
 * with actual sizes up to several bounds. */
static void test_rank1(clb_context_t ctx, clb_dtype dt, int full) {
  static const int64_t bounds[] = {1, 64, 129, 1025, 4097, 70000};
  static const int64_t sizes[] = {0, 1, 2, 63, 64, 65, 127, 128, 129, 1023, 1024, 1025, 4095, 4096, 4097, 70000};
  for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
    if (!full && bounds[b] != 4097 && bounds[b] != 129) continue;
    /* reduced sizes: bound 129, and f32 at 70000 (over LOCAL work-groups in the
     * GPU geometry: sel_finish's carry) */
    if (clb_test_small() && bounds[b] != 129 && !(full && bounds[b] == 70000)) continue;
    uint8_t dyn = 1;
    clb_tensor_t x = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, dt, 1, &bounds[b], &dyn, &x));
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      if (sizes[s] > bounds[b] || (clb_test_small() && (!ops_small_size(sizes[s]) || (bounds[b] == 70000 && sizes[s] != 70000)))) continue;
      for (size_t di = ops_density_first(); di < ops_density_end(); di++) check_case(ctx, x, &sizes[s], densities[di]);
    }
    clb_tensor_free(x);
  }
}

/* Ranks 0, 2, 3, 4: static and bounded dims, zero-sized dims, runs that cross
 * chunk boundaries. */
static void test_ranks(clb_context_t ctx, clb_dtype dt) {
  clb_tensor_t x = NULL;
  /* rank 0: count 0 or 1, output [count, 0] */
  CL_OK(ctx, clb_tensor_new(ctx, dt, 0, NULL, NULL, &x));
  for (size_t di = ops_density_first(); di < ops_density_end(); di++) check_case(ctx, x, NULL, densities[di]);
  clb_tensor_free(x);

  int64_t b2[2] = {100, 65};
  uint8_t d2[2] = {1, 0};
  CL_OK(ctx, clb_tensor_new(ctx, dt, 2, b2, d2, &x));
  int64_t rows[] = {0, 1, 17, 63, 64, 100};
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
    int64_t dims[2] = {rows[r], 65};
    for (size_t di = ops_density_first(); di < ops_density_end(); di++) check_case(ctx, x, dims, densities[di]);
  }
  clb_tensor_free(x);

  int64_t b3[3] = {6, 7, 9};
  uint8_t d3[3] = {0, 1, 1};
  CL_OK(ctx, clb_tensor_new(ctx, dt, 3, b3, d3, &x));
  int64_t dims3[][3] = {{6, 0, 9}, {6, 3, 5}, {6, 7, 9}};
  for (int r = 0; r < 3; r++)
    for (size_t di = ops_density_first(); di < ops_density_end(); di++) check_case(ctx, x, dims3[r], densities[di]);
  clb_tensor_free(x);

  int64_t b4[4] = {2, 5, 3, 7};
  uint8_t d4[4] = {0, 1, 0, 1};
  CL_OK(ctx, clb_tensor_new(ctx, dt, 4, b4, d4, &x));
  int64_t dims4[][4] = {{2, 1, 3, 7}, {2, 5, 3, 4}, {2, 5, 3, 7}};
  for (int r = 0; r < 3; r++)
    for (size_t di = ops_density_first(); di < ops_density_end(); di++) check_case(ctx, x, dims4[r], densities[di]);
  clb_tensor_free(x);
}

/* An output created by the op: [numel bound, rank], dim 0 dynamic. */
static void test_created_output(clb_context_t ctx) {
  int64_t b[2] = {5, 4}, ob[2];
  clb_tensor_t x = NULL, out = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 2, b, NULL, &x));
  double v[20] = {0};
  v[3] = 1;
  v[17] = -2;
  clb_test_write(ctx, x, b, v);
  CL_OK(ctx, clb_nonzero(ctx, x, &out));
  clb_tensor_bounds(out, ob);
  EXPECT_EQ_I(ob[0], 20);
  EXPECT_EQ_I(ob[1], 2);
  EXPECT_TRUE(clb_tensor_is_dynamic(out, 0) && !clb_tensor_is_dynamic(out, 1));
  int64_t od[2], got[4];
  CL_OK(ctx, clb_tensor_read(ctx, out, od, got, sizeof got, NULL));
  EXPECT_EQ_I(od[0], 2);
  EXPECT_EQ_I(got[0], 0);
  EXPECT_EQ_I(got[1], 3);
  EXPECT_EQ_I(got[2], 4);
  EXPECT_EQ_I(got[3], 1);
  /* the same output again: no new program, no sync */
  uint64_t builds = clb_test_counter_builds(ctx), syncs = clb_test_counter_syncs(ctx);
  CL_OK(ctx, clb_nonzero(ctx, x, &out));
  EXPECT_EQ_I(clb_test_counter_builds(ctx), builds);
  EXPECT_EQ_I(clb_test_counter_syncs(ctx), syncs);
  clb_tensor_free(out);
  clb_tensor_free(x);
}

static void test_bad_args(clb_context_t ctx) {
  int64_t b[2] = {4, 3};
  uint8_t dyn[2] = {1, 0};
  clb_tensor_t x = NULL, out = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b, NULL, &x));
  EXPECT_STATUS(ctx, clb_nonzero(ctx, NULL, &out), CLB_ERR_NULL, "nonzero: tensor x is NULL");
  EXPECT_STATUS(ctx, clb_nonzero(ctx, x, NULL), CLB_ERR_NULL, "out is NULL");
  EXPECT_EQ_I(clb_nonzero(NULL, x, &out), CLB_ERR_NULL);
  int64_t wb[2] = {12, 3};
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 2, wb, dyn, &out));
  EXPECT_STATUS(ctx, clb_nonzero(ctx, x, &out), CLB_ERR_SHAPE, "must be i64 [<=N, 2]");
  clb_tensor_free(out);
  out = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b, dyn, &out));
  EXPECT_STATUS(ctx, clb_nonzero(ctx, x, &out), CLB_ERR_DTYPE, "i64");
  clb_tensor_free(out);
  out = NULL;
  EXPECT_STATUS(ctx, clb_nonzero_static(ctx, x, -1, 0, &out, NULL), CLB_ERR_INVALID_ARG, "size -1 is negative");
  int64_t sb[2] = {5, 2};
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 2, sb, NULL, &out));
  EXPECT_STATUS(ctx, clb_nonzero_static(ctx, x, 4, 0, &out, NULL), CLB_ERR_SHAPE, "[4, 2]");
  clb_tensor_t c = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 1, b, NULL, &c));
  EXPECT_STATUS(ctx, clb_nonzero_static(ctx, x, 5, 0, &out, &c), CLB_ERR_SHAPE, "0-d i64");
  clb_tensor_free(c);
  clb_tensor_free(out);
  clb_tensor_free(x);
}

/* Every dtype: rank 1 around the chunk sizes (all bounds for f32), ranks 0-4. */
static void per_dtype(clb_context_t ctx, clb_dtype dt, int full) {
  test_rank1(ctx, dt, full);
  if (!clb_test_small()) test_ranks(ctx, dt);
}

static void once(clb_context_t ctx) {
  test_created_output(ctx);
  test_bad_args(ctx);
}

int main(void) { return ops_run_styles("ops/nonzero", &cases, per_dtype, once); }
