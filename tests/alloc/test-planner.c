/* test-planner.c: the memory planner (alloc/planner.c) without OpenCL: every way
 * two intervals can overlap, zero-size buffers, alignments 1..4096, arenas capped
 * by the device's largest allocation, aliases, the lower bound against a brute
 * force count, and random schedules checked pair by pair for two live buffers
 * sharing a byte. */
#include <stdlib.h>

#include "alloc/planner.h"
#include "test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static clb_plan_buf buf(uint64_t bytes, int64_t first, int64_t last) {
  clb_plan_buf b = {bytes, first, last, -1, 0, -1, 0};
  return b;
}

/* An independent check: offsets aligned, inside the arena, and for every pair
 * of buffers live at the same time (one point in common, inclusive) no shared byte. */
static int valid(const clb_plan_buf *b, size_t n, uint64_t align, const clb_plan_result *r) {
  uint64_t total = 0;
  for (int a = 0; a < r->narenas; a++) total += r->arena_bytes[a];
  if (total != r->total_bytes) return 0;
  for (size_t i = 0; i < n; i++) {
    if (b[i].bytes == 0) continue;
    if (b[i].offset % align != 0 && b[i].alias_of < 0) return 0;
    if (b[i].arena < 0 || b[i].arena >= r->narenas || b[i].offset + b[i].bytes > r->arena_bytes[b[i].arena]) return 0;
    for (size_t j = 0; j < i; j++) {
      if (b[j].bytes == 0 || b[j].arena != b[i].arena) continue;
      if (b[i].alias_of == (int64_t)j || b[j].alias_of == (int64_t)i ||
          (b[i].alias_of >= 0 && b[i].alias_of == b[j].alias_of))
        continue;
      int64_t lo = b[i].first > b[j].first ? b[i].first : b[j].first;
      int64_t hi = b[i].last < b[j].last ? b[i].last : b[j].last;
      if (lo > hi) continue;
      if (b[i].offset < b[j].offset + b[j].bytes && b[j].offset < b[i].offset + b[i].bytes) return 0;
    }
  }
  return 1;
}

static uint64_t up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* The most bytes live at one time (each rounded up to align), by counting at
 * every time in range. */
static uint64_t brute_lower_bound(const clb_plan_buf *b, size_t n, uint64_t align) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (size_t i = 0; i < n; i++) {
    if (b[i].first < lo) lo = b[i].first;
    if (b[i].last > hi) hi = b[i].last;
  }
  uint64_t best = 0;
  for (int64_t t = lo; t <= hi; t++) {
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++)
      if (b[i].alias_of < 0 && b[i].first <= t && t <= b[i].last) s += up(b[i].bytes, align);
    if (s > best) best = s;
  }
  return best;
}

static void test_pairs(void) {
  /* A = [10, 20] x 1000 bytes against B = 600 bytes in every relative position */
  static const struct {
    int64_t f, l;
    int overlap;
    const char *what;
  } cases[] = {
      {0, 9, 0, "B ends just before A"},  {21, 30, 0, "B starts just after A"}, {0, 10, 1, "B ends where A starts"},
      {20, 30, 1, "B starts where A ends"}, {5, 15, 1, "B straddles A's start"}, {15, 25, 1, "B straddles A's end"},
      {12, 18, 1, "B inside A"},           {0, 30, 1, "A inside B"},            {10, 20, 1, "the same interval"},
      {15, 15, 1, "B one point inside A"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (uint64_t align = 1; align <= 4096; align *= 8) {
      clb_plan_buf b[2] = {buf(1000, 10, 20), buf(600, cases[c].f, cases[c].l)};
      clb_plan_result r;
      char err[200];
      EXPECT_EQ_I(clb__plan_memory(b, 2, align, 0, &r, err, sizeof err), CLB_OK);
      if (!valid(b, 2, align, &r)) CLB_FAIL_AT("%s, align %llu: overlapping placement", cases[c].what, (unsigned long long)align);
      uint64_t want = cases[c].overlap ? up(up(1000, align) + 600, align) : up(1000, align);
      if (r.total_bytes != want)
        CLB_FAIL_AT("%s, align %llu: arena %llu, want %llu", cases[c].what, (unsigned long long)align,
                    (unsigned long long)r.total_bytes, (unsigned long long)want);
      EXPECT_EQ_I(r.live_bytes, cases[c].overlap ? 1600 : 1000);
      EXPECT_EQ_I(r.lower_bound, cases[c].overlap ? up(1000, align) + up(600, align) : up(1000, align));
    }
}

static void test_zero_size(void) {
  clb_plan_buf b[4] = {buf(0, 0, 10), buf(512, 0, 5), buf(0, 3, 3), buf(512, 6, 10)};
  clb_plan_result r;
  char err[200];
  EXPECT_EQ_I(clb__plan_memory(b, 4, 256, 0, &r, err, sizeof err), CLB_OK);
  EXPECT_TRUE(valid(b, 4, 256, &r));
  EXPECT_EQ_I(r.total_bytes, 512); /* the two 512-byte buffers take turns; zero-size ones take nothing */
  EXPECT_EQ_I(r.lower_bound, 512);
  EXPECT_EQ_I(b[0].offset, 0);
  EXPECT_EQ_I(b[2].offset, 0);
  /* only zero-size buffers: an empty arena */
  clb_plan_buf z[2] = {buf(0, 0, 1), buf(0, 1, 2)};
  EXPECT_EQ_I(clb__plan_memory(z, 2, 4096, 0, &r, err, sizeof err), CLB_OK);
  EXPECT_EQ_I(r.total_bytes, 0);
  EXPECT_EQ_I(r.narenas, 0);
  EXPECT_EQ_I(clb__plan_memory(NULL, 0, 64, 0, &r, err, sizeof err), CLB_OK);
  EXPECT_EQ_I(r.total_bytes, 0);
}

static void test_alignment(void) {
  for (uint64_t align = 1; align <= 4096; align *= 2) {
    clb_plan_buf b[40];
    for (int i = 0; i < 40; i++) b[i] = buf(1 + next() % 3000, (int64_t)(next() % 30), 0);
    for (int i = 0; i < 40; i++) b[i].last = b[i].first + (int64_t)(next() % 10);
    clb_plan_result r;
    char err[200];
    EXPECT_EQ_I(clb__plan_memory(b, 40, align, 0, &r, err, sizeof err), CLB_OK);
    if (!valid(b, 40, align, &r)) CLB_FAIL_AT("align %llu: invalid placement", (unsigned long long)align);
    EXPECT_TRUE(clb__plan_check(b, 40, align, &r));
    EXPECT_EQ_I(r.total_bytes % align, 0);
  }
  clb_plan_buf b[1] = {buf(10, 0, 1)};
  clb_plan_result r;
  char err[200];
  EXPECT_EQ_I(clb__plan_memory(b, 1, 3, 0, &r, err, sizeof err), CLB_ERR_INVALID_ARG);
  EXPECT_EQ_I(clb__plan_memory(b, 1, 0, 0, &r, err, sizeof err), CLB_ERR_INVALID_ARG);
  EXPECT_TRUE(strstr(err, "power of two") != NULL);
}

static void test_max_alloc(void) {
  /* three 400-byte buffers live together under a 1000-byte cap: two arenas */
  clb_plan_buf b[4] = {buf(400, 0, 5), buf(400, 0, 5), buf(400, 0, 5), buf(400, 6, 7)};
  clb_plan_result r;
  char err[200];
  EXPECT_EQ_I(clb__plan_memory(b, 4, 16, 1000, &r, err, sizeof err), CLB_OK);
  EXPECT_TRUE(valid(b, 4, 16, &r));
  EXPECT_EQ_I(r.narenas, 2);
  for (int a = 0; a < r.narenas; a++) EXPECT_TRUE(r.arena_bytes[a] <= 1000);
  EXPECT_EQ_I(r.total_bytes, 1200);
  /* one buffer over the cap */
  clb_plan_buf big[2] = {buf(400, 0, 1), buf(1001, 0, 1)};
  EXPECT_EQ_I(clb__plan_memory(big, 2, 16, 1000, &r, err, sizeof err), CLB_ERR_OOM);
  EXPECT_TRUE(strstr(err, "buffer 1") && strstr(err, "1001 bytes") && strstr(err, "1000"));
  /* more arenas than the planner keeps */
  clb_plan_buf many[CLB_PLAN_MAX_ARENAS + 1];
  for (int i = 0; i <= CLB_PLAN_MAX_ARENAS; i++) many[i] = buf(800, 0, 1);
  EXPECT_EQ_I(clb__plan_memory(many, CLB_PLAN_MAX_ARENAS + 1, 16, 1000, &r, err, sizeof err), CLB_ERR_OOM);
  EXPECT_EQ_I(clb__plan_memory(many, CLB_PLAN_MAX_ARENAS, 16, 1000, &r, err, sizeof err), CLB_OK);
  EXPECT_EQ_I(r.narenas, CLB_PLAN_MAX_ARENAS);
}

static void test_bad_input(void) {
  clb_plan_result r;
  char err[200];
  clb_plan_buf b[2] = {buf(10, 5, 4), buf(10, 0, 1)};
  EXPECT_EQ_I(clb__plan_memory(b, 2, 1, 0, &r, err, sizeof err), CLB_ERR_INVALID_ARG);
  EXPECT_TRUE(strstr(err, "buffer 0") != NULL);
  clb_plan_buf c[2] = {buf(10, 0, 4), buf(10, 0, 1)};
  c[1].alias_of = 1;
  EXPECT_EQ_I(clb__plan_memory(c, 2, 1, 0, &r, err, sizeof err), CLB_ERR_INVALID_ARG);
  c[1].alias_of = 0;
  c[1].alias_offset = 5; /* 10 bytes at 5 do not fit in 10 */
  EXPECT_EQ_I(clb__plan_memory(c, 2, 1, 0, &r, err, sizeof err), CLB_ERR_INVALID_ARG);
}

static void test_alias(void) {
  /* a view (buffer 1) of buffer 0 lives longer than 0 itself; buffer 2 is live
   * only while the view is, so it must not share the root's bytes */
  clb_plan_buf b[3] = {buf(1024, 0, 2), buf(512, 2, 8), buf(1024, 5, 9)};
  b[1].alias_of = 0;
  b[1].alias_offset = 256;
  clb_plan_result r;
  char err[200];
  EXPECT_EQ_I(clb__plan_memory(b, 3, 64, 0, &r, err, sizeof err), CLB_OK);
  EXPECT_TRUE(valid(b, 3, 64, &r));
  EXPECT_EQ_I(b[1].offset, b[0].offset + 256);
  EXPECT_EQ_I(b[1].arena, b[0].arena);
  EXPECT_EQ_I(r.total_bytes, 2048);
  EXPECT_EQ_I(r.lower_bound, 2048);
  /* an in-place update: the same bytes, a later interval */
  clb_plan_buf c[3] = {buf(1000, 0, 3), buf(1000, 3, 6), buf(1000, 4, 5)};
  c[1].alias_of = 0;
  EXPECT_EQ_I(clb__plan_memory(c, 3, 8, 0, &r, err, sizeof err), CLB_OK);
  EXPECT_TRUE(valid(c, 3, 8, &r));
  EXPECT_EQ_I(c[1].offset, c[0].offset);
  EXPECT_TRUE(c[2].offset >= c[0].offset + 1000 || c[2].offset + 1000 <= c[0].offset);
}

static void test_chain(void) {
  /* a 12-layer chain with free_intermediates: layer i's output lives from its
   * op to the next op; the plan needs two buffers, and a result that stays */
  clb_plan_buf b[13];
  for (int i = 0; i < 12; i++) b[i] = buf(1 << 20, i, i + 1);
  b[12] = buf(4, 12, INT64_MAX);
  clb_plan_result r;
  char err[200];
  EXPECT_EQ_I(clb__plan_memory(b, 13, 512, 0, &r, err, sizeof err), CLB_OK);
  EXPECT_TRUE(valid(b, 13, 512, &r));
  EXPECT_EQ_I(r.lower_bound, 2u << 20);
  EXPECT_EQ_I(r.total_bytes, 2u << 20);
  /* the pool serves the same schedule with size classes and reuse */
  EXPECT_EQ_I(clb__plan_pool_peak(b, 13), 2 * clb__pool_class_bytes(1 << 20) + clb__pool_class_bytes(4));
}

static void test_pool_model(void) {
  EXPECT_EQ_I(clb__pool_class_bytes(0), 256);
  EXPECT_EQ_I(clb__pool_class_bytes(257), 320);
  EXPECT_EQ_I(clb__pool_class_bytes(1000), 1024);
  EXPECT_EQ_I(clb__pool_class_bytes(1025), 1152); /* steps of 128 from 512 */
  /* A then B of the same class: one buffer; C live over both: another class */
  clb_plan_buf b[3] = {buf(1000, 0, 1), buf(900, 2, 3), buf(3000, 0, 3)};
  EXPECT_EQ_I(clb__plan_pool_peak(b, 3), 1024 + 3072);
  /* a get and a put at the same time are both live: no reuse */
  clb_plan_buf c[2] = {buf(1000, 0, 2), buf(1000, 2, 3)};
  EXPECT_EQ_I(clb__plan_pool_peak(c, 2), 2048);
}

static void test_random(void) {
  double worst = 1, sum = 0;
  int nratio = 0;
  int runs = 3000;
  for (int run = 0; run < runs; run++) {
    size_t n = 1 + next() % 60;
    clb_plan_buf b[60];
    int64_t span = 1 + (int64_t)(next() % 80);
    for (size_t i = 0; i < n; i++) {
      uint64_t bytes = next() % 5 == 0 ? next() % 64 : next() % 100000;
      if (next() % 17 == 0) bytes = 0;
      int64_t f = (int64_t)(next() % (uint64_t)span);
      int64_t l = f + (int64_t)(next() % 20);
      if (next() % 13 == 0) l = INT64_MAX; /* lives to the end of the step */
      b[i] = buf(bytes, f, l);
      if (i > 0 && next() % 9 == 0) { /* a view of an earlier root */
        size_t r = next() % i;
        if (b[r].alias_of < 0 && b[r].bytes > 0) {
          b[i].alias_of = (int64_t)r;
          b[i].alias_offset = next() % b[r].bytes;
          b[i].bytes = next() % (b[r].bytes - b[i].alias_offset + 1);
        }
      }
    }
    uint64_t align = 1ull << (next() % 13);
    uint64_t cap = next() % 4 == 0 ? 150000 : 0;
    clb_plan_result r;
    char err[200];
    clb_status st = clb__plan_memory(b, n, align, cap, &r, err, sizeof err);
    if (st == CLB_ERR_OOM && cap) continue; /* more than CLB_PLAN_MAX_ARENAS needed */
    if (st != CLB_OK) {
      CLB_FAIL_AT("run %d: %s", run, err);
      continue;
    }
    clb_test_checks++;
    if (!valid(b, n, align, &r)) CLB_FAIL_AT("run %d: %zu buffers, align %llu: two live buffers share bytes", run, n,
                                             (unsigned long long)align);
    /* the lower bound of the planner against a count at every time (finite intervals only) */
    int finite = 1;
    for (size_t i = 0; i < n; i++)
      if (b[i].last == INT64_MAX) finite = 0;
    if (finite) {
      clb_plan_buf w[60];
      memcpy(w, b, n * sizeof *w);
      for (size_t i = 0; i < n; i++) /* aliases widen their root */
        if (w[i].alias_of >= 0) {
          clb_plan_buf *rt = &w[w[i].alias_of];
          if (w[i].first < rt->first) rt->first = w[i].first;
          if (w[i].last > rt->last) rt->last = w[i].last;
        }
      EXPECT_EQ_I(r.lower_bound, brute_lower_bound(w, n, align));
      EXPECT_EQ_I(r.live_bytes, brute_lower_bound(w, n, 1));
    }
    EXPECT_TRUE(r.total_bytes >= r.lower_bound);
    if (!cap && r.lower_bound > 0) {
      double ratio = (double)r.total_bytes / (double)r.lower_bound;
      if (ratio > worst) worst = ratio;
      sum += ratio;
      nratio++;
    }
  }
  printf("random schedules: arena / aligned lower bound: mean %.3f, worst %.3f over %d\n", sum / nratio, worst, nratio);
  /* best fit on random intervals stays close to the bound; a placement bug that
   * stacks buffers shows up here as the mean drifting */
  EXPECT_TRUE(nratio > 100 && sum / nratio < 1.25);
}

int main(void) {
  test_pairs();
  test_zero_size();
  test_alignment();
  test_max_alloc();
  test_bad_input();
  test_alias();
  test_chain();
  test_pool_model();
  test_random();
  return clb_test_finish("alloc/planner");
}
