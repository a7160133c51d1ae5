/* test-cache-limit.c: the program cache's size limit (CLBOUND_CACHE_MAX_SIZE).
 * After a store the least recently used entries are removed until the rest fit;
 * an entry loaded counts as used, so it outlives entries written after it but
 * not loaded since. Each unary op is a program (an entry) of its own. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>
#include <unistd.h>

#include "cache-test.h"
#include "temp-dir.h"

static char dir[1024];

/* File times move in steps of a few milliseconds: keep the uses apart. */
static void pause_a_little(void) {
  struct timespec t = {0, 30 * 1000 * 1000};
  nanosleep(&t, NULL);
}

/* Runs `op` on [0.5, 1, 1.5, 2] in a new context on dir, checks the result
 * against a double reference, frees the context and waits for its store.
 * Returns 1 when the program came from the disk cache, 0 when it was built. */
static int run_op(clb_unary_op op) {
  pause_a_little();
  clb_context_t ctx = cached_context(dir);
  int64_t dims[1] = {4};
  double v[4] = {0.5, 1.0, 1.5, 2.0}, got[4];
  clb_tensor_t x = NULL, y = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, dims, NULL, &x));
  clb_test_write(ctx, x, dims, v);
  CL_OK(ctx, clb_unary(ctx, op, x, &y));
  clb_test_read(ctx, y, NULL, got, 4);
  for (int i = 0; i < 4; i++) {
    double a = v[i], want = op == CLB_UNARY_NEG ? -a : op == CLB_UNARY_SIGMOID ? 1.0 / (1.0 + exp(-a))
                          : op == CLB_UNARY_TANH ? tanh(a) : op == CLB_UNARY_EXP ? exp(a)
                          : op == CLB_UNARY_LOG ? log(a) : a; /* relu and copy of positives */
    EXPECT_NEAR(got[i], want);
  }
  clb_counters c;
  c.struct_size = sizeof c;
  clb_context_counters(ctx, &c);
  clb_tensor_free(y);
  clb_tensor_free(x);
  clb_context_free(ctx);
  clb_cache_wait();
  return c.program_cache_hits_disk > 0 && c.program_builds == 0;
}

static uint64_t folder_bytes(uint64_t *entries) {
  uint64_t n = 0, bytes = 0;
  REQUIRE_TRUE(clb_cache_info(dir, &n, &bytes) == CLB_OK);
  if (entries) *entries = n;
  return bytes;
}

/* The variable's values: bytes, K/M/G, 0 for none; anything else the default. */
static void test_parse(void) {
  static const struct {
    const char *value;
    uint64_t want;
  } rows[] = {{"2048", 2048}, {"2K", 2048}, {"3M", 3u << 20}, {"1G", 1u << 30}, {"0", 0},
              {"abc", 256u << 20}, {"5X", 256u << 20}, {"-1", 256u << 20}, {"", 256u << 20}};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    setenv("CLBOUND_CACHE_MAX_SIZE", rows[i].value, 1);
    EXPECT_EQ_I(clb_cache_limit_bytes(), rows[i].want);
  }
  unsetenv("CLBOUND_CACHE_MAX_SIZE");
  EXPECT_EQ_I(clb_cache_limit_bytes(), 256u << 20);
}

int main(void) {
  test_parse();
  clb_test_temp_dir(dir, sizeof dir, "cache-limit");
  /* six entries, no limit; then neg is used again (loaded: now the most recent) */
  setenv("CLBOUND_CACHE_MAX_SIZE", "0", 1);
  const clb_unary_op first[] = {CLB_UNARY_NEG, CLB_UNARY_RELU, CLB_UNARY_SIGMOID,
                                CLB_UNARY_TANH, CLB_UNARY_EXP, CLB_UNARY_LOG};
  for (int i = 0; i < 6; i++) EXPECT_EQ_I(run_op(first[i]), 0);
  uint64_t n6 = 0, six = folder_bytes(&n6);
  EXPECT_EQ_I(n6, 6);
  EXPECT_EQ_I(run_op(CLB_UNARY_NEG), 1);
  /* a limit of two thirds of that, and a seventh entry: relu, sigmoid, ... go
   * (written first, never loaded) until the rest fit; neg stays */
  char limit[32];
  uint64_t lim = six * 2 / 3;
  snprintf(limit, sizeof limit, "%llu", (unsigned long long)lim);
  setenv("CLBOUND_CACHE_MAX_SIZE", limit, 1);
  EXPECT_EQ_I(run_op(CLB_UNARY_COPY), 0);
  uint64_t n = 0, bytes = folder_bytes(&n);
  clb_test_checks++;
  if (bytes > lim) CLB_FAIL_AT("the entries hold %llu bytes, over the limit of %llu", (unsigned long long)bytes,
                               (unsigned long long)lim);
  EXPECT_TRUE(n >= 2 && n < 7);
  EXPECT_EQ_I(run_op(CLB_UNARY_NEG), 1);  /* used after the others: kept */
  EXPECT_EQ_I(run_op(CLB_UNARY_COPY), 1); /* just written: kept */
  setenv("CLBOUND_CACHE_STORE", "release", 1); /* stored by the context: its log has the removals */
  EXPECT_EQ_I(run_op(CLB_UNARY_RELU), 0);       /* the least recently used: removed, built again */
  clb_test_checks++;
  if (!strstr(log_lines, "the least recently used"))
    CLB_FAIL_AT("the relu context's store logged no removal:\n%s", log_lines);
  clb_cache_clear(dir);
  clb_test_temp_dir_remove(dir);
  return clb_test_finish("cache/cache-limit");
}
