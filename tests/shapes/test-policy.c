/* test-policy.c: the specialization policies on a simulated stream of 100 batch sizes, their reasons and bounds. */
#include "clbound/shapes.h"
#include "test.h"

#define RUNS 100

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static int64_t draw(int64_t lo, int64_t hi) { /* xorshift64*, seeded: the same stream every run */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return lo + (int64_t)((rng * 0x2545F4914F6CDD1Dull >> 11) % (uint64_t)(hi - lo + 1));
}

static const char *names[1] = {"x"};
static const int ranks[1] = {2};

/* Feeds every batch size as x = [b, 256]; returns the plan count, checks each decision. */
static size_t simulate(clb_policy_t p, const int64_t *sizes, size_t n) {
  size_t compiles = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t dims[2] = {sizes[i], 256};
    clb_decision d;
    clb_status st = clb_policy_decide(p, dims, 2, &d);
    if (st != CLB_OK) {
      CLB_FAIL_AT("run %zu (b = %lld): %s", i, (long long)sizes[i], d.reason);
      continue;
    }
    compiles += d.action == CLB_ACTION_COMPILE;
    EXPECT_TRUE(d.plan < clb_policy_plan_count(p));
    EXPECT_TRUE(d.padded[0] >= sizes[i]);
    int64_t bound;
    int is_static;
    EXPECT_EQ_I(clb_policy_plan_bound(p, d.plan, 0, 0, &bound, &is_static), CLB_OK);
    EXPECT_TRUE(is_static ? bound == d.padded[0] : bound >= sizes[i]);
  }
  EXPECT_EQ_I(compiles, clb_policy_plan_count(p));
  return clb_policy_plan_count(p);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

int main(void) {
  int64_t sizes[RUNS], sorted[RUNS];
  for (int i = 0; i < RUNS; i++) sizes[i] = sorted[i] = draw(1, 4096);
  qsort(sorted, RUNS, sizeof *sorted, cmp_i64);
  size_t distinct = 1;
  for (int i = 1; i < RUNS; i++) distinct += sorted[i] != sorted[i - 1];
  clb_policy_t p;
  clb_decision d;
  int64_t bound;
  int is_static;

  /* static: a plan per distinct shape. */
  REQUIRE_TRUE(clb_policy_new(CLB_POLICY_STATIC, 1, names, ranks, &p) == CLB_OK);
  EXPECT_EQ_I(simulate(p, sizes, RUNS), distinct);
  int64_t again[2] = {sizes[0], 256};
  EXPECT_EQ_I(clb_policy_decide(p, again, 2, &d), CLB_OK);
  EXPECT_EQ_I(d.action, CLB_ACTION_REUSE);
  EXPECT_EQ_I(d.plan, 0);
  EXPECT_EQ_S(d.reason, "plan 0 was compiled for these sizes");
  clb_policy_free(p);
  printf("static: %zu plans for %zu distinct sizes\n", distinct, distinct);

  /* automatic with the user's max: at most 2 plans (static, then bounded at 4096). */
  REQUIRE_TRUE(clb_policy_new(CLB_POLICY_AUTOMATIC, 1, names, ranks, &p) == CLB_OK);
  EXPECT_EQ_I(clb_policy_set_max(p, 0, 0, 4096), CLB_OK);
  size_t n_auto = simulate(p, sizes, RUNS);
  EXPECT_TRUE(n_auto <= 2);
  EXPECT_EQ_I(n_auto, distinct > 1 ? 2 : 1);
  EXPECT_EQ_I(clb_policy_plan_bound(p, 1, 0, 0, &bound, &is_static), CLB_OK);
  EXPECT_EQ_I(bound, 4096);
  EXPECT_EQ_I(is_static, 0);
  EXPECT_EQ_I(clb_policy_plan_bound(p, 1, 0, 1, &bound, &is_static), CLB_OK);
  EXPECT_EQ_I(bound, 256);
  EXPECT_EQ_I(is_static, 1);
  int64_t over[2] = {5000, 256};
  EXPECT_EQ_I(clb_policy_decide(p, over, 2, &d), CLB_ERR_GUARD);
  EXPECT_EQ_S(d.reason, "dim 0 of x: 5000 > bound 4096 (its given max)");
  EXPECT_EQ_S(clb_policy_errmsg(p), "dim 0 of x: 5000 > bound 4096 (its given max)");
  clb_policy_free(p);
  printf("automatic (max 4096): %zu plans\n", n_auto);

  /* automatic without a max: the growth rule; a few regrowths at most. */
  REQUIRE_TRUE(clb_policy_new(CLB_POLICY_AUTOMATIC, 1, names, ranks, &p) == CLB_OK);
  size_t n_grow = simulate(p, sizes, RUNS);
  EXPECT_TRUE(n_grow >= 2 && n_grow <= 4);
  clb_policy_free(p);
  printf("automatic (growth rule): %zu plans\n", n_grow);

  /* The reasons, step by step. */
  REQUIRE_TRUE(clb_policy_new(CLB_POLICY_AUTOMATIC, 1, names, ranks, &p) == CLB_OK);
  int64_t r1[2] = {32, 256}, r2[2] = {48, 256}, r3[2] = {40, 256}, r4[2] = {300, 256}, r5[2] = {40, 512};
  EXPECT_EQ_I(clb_policy_decide(p, r1, 2, &d), CLB_OK);
  EXPECT_EQ_S(d.reason, "first run: sizes compiled in (x=[32,256])");
  EXPECT_EQ_I(clb_policy_decide(p, r2, 2, &d), CLB_OK);
  EXPECT_EQ_I(d.action, CLB_ACTION_COMPILE);
  EXPECT_EQ_S(d.reason, "dim 0 of x changed 32 -> 48: marked dynamic, bound 128 (twice the next power of two of 48)");
  EXPECT_EQ_I(clb_policy_decide(p, r3, 2, &d), CLB_OK);
  EXPECT_EQ_I(d.action, CLB_ACTION_REUSE);
  EXPECT_EQ_I(d.plan, 1);
  EXPECT_EQ_I(clb_policy_decide(p, r1, 2, &d), CLB_OK);
  EXPECT_EQ_I(d.plan, 1); /* the newest plan that serves the run */
  EXPECT_EQ_I(clb_policy_decide(p, r4, 2, &d), CLB_OK);
  EXPECT_EQ_S(d.reason, "dim 0 of x: 300 > bound 128: bound grows to 1024");
  EXPECT_EQ_I(clb_policy_decide(p, r5, 2, &d), CLB_OK);
  EXPECT_EQ_S(d.reason, "dim 1 of x changed 256 -> 512: marked dynamic, bound 1024 (twice the next power of two of 512)");
  EXPECT_EQ_I(clb_policy_plan_count(p), 4);
  clb_policy_free(p);
  REQUIRE_TRUE(clb_policy_new(CLB_POLICY_AUTOMATIC, 1, names, ranks, &p) == CLB_OK);
  EXPECT_EQ_I(clb_policy_set_max(p, 0, 0, 4096), CLB_OK);
  EXPECT_EQ_I(clb_policy_decide(p, r1, 2, &d), CLB_OK);
  EXPECT_EQ_I(clb_policy_set_max(p, 0, 0, 4096), CLB_ERR_INVALID_ARG); /* configure first */
  EXPECT_EQ_I(clb_policy_decide(p, r2, 2, &d), CLB_OK);
  EXPECT_EQ_S(d.reason, "dim 0 of x changed 32 -> 48: marked dynamic, bound 4096");
  clb_policy_free(p);

  /* dynamic: bounded from the start, one plan ever. */
  REQUIRE_TRUE(clb_policy_new(CLB_POLICY_DYNAMIC, 1, names, ranks, &p) == CLB_OK);
  EXPECT_EQ_I(clb_policy_set_max(p, 0, 0, 4096), CLB_OK);
  EXPECT_EQ_I(simulate(p, sizes, RUNS), 1);
  EXPECT_EQ_I(clb_policy_decide(p, over, 2, &d), CLB_ERR_GUARD);
  EXPECT_EQ_S(d.reason, "dim 0 of x: 5000 > bound 4096");
  EXPECT_EQ_I(clb_policy_decide(p, r5, 2, &d), CLB_OK);
  EXPECT_EQ_I(d.action, CLB_ACTION_COMPILE);
  EXPECT_EQ_S(d.reason, "dim 1 of x changed 256 -> 512: not a dynamic dim, so compiled in");
  clb_policy_free(p);
  REQUIRE_TRUE(clb_policy_new(CLB_POLICY_DYNAMIC, 1, names, ranks, &p) == CLB_OK);
  EXPECT_EQ_I(clb_policy_set_max(p, 0, 0, 4096), CLB_OK);
  EXPECT_EQ_I(clb_policy_decide(p, r1, 2, &d), CLB_OK);
  EXPECT_EQ_S(d.reason, "first run: dim 0 of x bounded at 4096, other dims compiled in");
  clb_policy_free(p);

  /* bucketed, percentile ladder of 8 from the observed sizes: one plan per bucket. */
  int64_t ladder[64];
  size_t nl = 0;
  EXPECT_EQ_I(clb_buckets_percentile(sizes, RUNS, 8, ladder, 64, &nl), CLB_OK);
  EXPECT_EQ_I(nl, 8);
  EXPECT_EQ_I(ladder[nl - 1], sorted[RUNS - 1]);
  EXPECT_EQ_I(ladder[0], sorted[12]); /* ceil(100/8) = 13th smallest */
  REQUIRE_TRUE(clb_policy_new(CLB_POLICY_BUCKETED, 1, names, ranks, &p) == CLB_OK);
  EXPECT_EQ_I(clb_policy_set_buckets(p, 0, 0, ladder, nl), CLB_OK);
  size_t n_pct = simulate(p, sizes, RUNS);
  EXPECT_EQ_I(n_pct, 8);
  clb_policy_free(p);
  printf("bucketed (percentile ladder of 8): %zu plans\n", n_pct);

  /* bucketed, powers of two up to 4096. */
  EXPECT_EQ_I(clb_buckets_pow2(1, 4096, ladder, 64, &nl), CLB_OK);
  EXPECT_EQ_I(nl, 13);
  EXPECT_EQ_I(ladder[12], 4096);
  size_t used = 0;
  for (int k = 0; k < 13; k++) {
    int hit = 0;
    for (int i = 0; i < RUNS; i++) hit |= sizes[i] <= ladder[k] && (k == 0 || sizes[i] > ladder[k - 1]);
    used += (size_t)hit;
  }
  REQUIRE_TRUE(clb_policy_new(CLB_POLICY_BUCKETED, 1, names, ranks, &p) == CLB_OK);
  EXPECT_EQ_I(clb_policy_set_buckets(p, 0, 0, ladder, nl), CLB_OK);
  size_t n_pow2 = simulate(p, sizes, RUNS);
  EXPECT_EQ_I(n_pow2, used);
  int64_t r50[2] = {50, 256};
  EXPECT_EQ_I(clb_policy_decide(p, r50, 2, &d), CLB_OK);
  EXPECT_EQ_I(d.padded[0], 64);
  EXPECT_EQ_I(d.padded[1], 256);
  EXPECT_TRUE(strncmp(d.reason, "dim 0 of x: 50 pads to bucket 64", 32) == 0);
  EXPECT_EQ_I(clb_policy_decide(p, over, 2, &d), CLB_ERR_GUARD);
  EXPECT_EQ_S(d.reason, "dim 0 of x: 5000 > top bucket 4096");
  clb_policy_free(p);
  printf("bucketed (powers of two): %zu plans\n", n_pow2);
  REQUIRE_TRUE(clb_policy_new(CLB_POLICY_BUCKETED, 1, names, ranks, &p) == CLB_OK);
  EXPECT_EQ_I(clb_policy_set_buckets(p, 0, 0, ladder, nl), CLB_OK);
  EXPECT_EQ_I(clb_policy_decide(p, r50, 2, &d), CLB_OK);
  EXPECT_EQ_S(d.reason, "dim 0 of x: 50 pads to bucket 64: first run in this bucket");
  int64_t r60[2] = {60, 256};
  EXPECT_EQ_I(clb_policy_decide(p, r60, 2, &d), CLB_OK);
  EXPECT_EQ_S(d.reason, "dim 0 of x: 60 pads to bucket 64: plan 0");
  clb_policy_free(p);

  /* Ladders. */
  EXPECT_EQ_I(clb_buckets_pow2(3, 100, ladder, 64, &nl), CLB_OK);
  EXPECT_EQ_I(nl, 6); /* 4 8 16 32 64 100 */
  EXPECT_EQ_I(ladder[0], 4);
  EXPECT_EQ_I(ladder[5], 100);
  EXPECT_EQ_I(clb_buckets_pow2(1, 4096, ladder, 4, &nl), CLB_ERR_BUFFER_SMALL);
  EXPECT_EQ_I(clb_buckets_pow2(0, 10, ladder, 64, &nl), CLB_ERR_INVALID_ARG);
  /* sizes near 2^63: no overflow, the bound closes the ladder */
  EXPECT_EQ_I(clb_buckets_pow2((INT64_C(1) << 62) + 1, INT64_MAX, ladder, 64, &nl), CLB_OK);
  EXPECT_EQ_I(nl, 1);
  EXPECT_EQ_I(ladder[0], INT64_MAX);
  EXPECT_EQ_I(clb_buckets_pow2(3, INT64_MAX, ladder, 64, &nl), CLB_OK);
  EXPECT_EQ_I(nl, 62); /* 4, 8, ..., 2^62 (61 of them), then the bound */
  EXPECT_EQ_I(ladder[0], 4);
  EXPECT_EQ_I(ladder[60], INT64_C(1) << 62);
  EXPECT_EQ_I(ladder[61], INT64_MAX);
  int64_t obs[5] = {5, 5, 5, 9, 1};
  EXPECT_EQ_I(clb_buckets_percentile(obs, 5, 4, ladder, 64, &nl), CLB_OK);
  EXPECT_EQ_I(nl, 2); /* 2nd, 3rd, 4th, 5th smallest of 1 5 5 5 9: 5 5 5 9 */
  EXPECT_EQ_I(ladder[0], 5);
  EXPECT_EQ_I(ladder[1], 9);

  /* Argument errors. */
  REQUIRE_TRUE(clb_policy_new(CLB_POLICY_STATIC, 1, names, ranks, &p) == CLB_OK);
  int64_t neg[2] = {-1, 2};
  EXPECT_EQ_I(clb_policy_decide(p, neg, 2, &d), CLB_ERR_INVALID_ARG);
  EXPECT_EQ_S(clb_policy_errmsg(p), "dim 0 of x: negative size -1");
  EXPECT_EQ_I(clb_policy_decide(p, neg, 1, &d), CLB_ERR_INVALID_ARG);
  EXPECT_EQ_I(clb_policy_set_buckets(p, 0, 0, obs, 5), CLB_ERR_INVALID_ARG);
  EXPECT_EQ_I(clb_policy_plan_bound(p, 0, 0, 0, &bound, NULL), CLB_ERR_INVALID_ARG);
  clb_policy_free(p);
  clb_policy_free(NULL);
  int bad_rank[1] = {9};
  EXPECT_EQ_I(clb_policy_new(CLB_POLICY_STATIC, 1, names, bad_rank, &p), CLB_ERR_RANK);
  return clb_test_finish("shapes/policy");
}
