/* test.h: assertion macros for clbound's tests; they survive NDEBUG and print both sides. */
#ifndef CLB_TEST_H
#define CLB_TEST_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int clb_test_failures = 0;
static long clb_test_checks = 0;

#define CLB_FAIL_AT(...)                                                \
  do {                                                                  \
    fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                     \
    fprintf(stderr, __VA_ARGS__);                                       \
    fputc('\n', stderr);                                                \
    clb_test_failures++;                                                \
  } while (0)

/* Records a failure and goes on: one run reports every broken case. */
#define EXPECT_TRUE(c)                                                  \
  do { clb_test_checks++; if (!(c)) CLB_FAIL_AT("expected %s", #c); } while (0)

#define EXPECT_EQ_I(a, b)                                               \
  do {                                                                  \
    long long va_ = (long long)(a), vb_ = (long long)(b);               \
    clb_test_checks++;                                                  \
    if (va_ != vb_) CLB_FAIL_AT("%s == %s: %lld vs %lld", #a, #b, va_, vb_); \
  } while (0)

#define EXPECT_EQ_S(a, b)                                               \
  do {                                                                  \
    const char *sa_ = (a), *sb_ = (b);                                  \
    clb_test_checks++;                                                  \
    if (!sa_ || !sb_ || strcmp(sa_, sb_) != 0)                          \
      CLB_FAIL_AT("%s == %s: \"%s\" vs \"%s\"", #a, #b, sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)"); \
  } while (0)

/* Floats: |got - want| <= 1e-3 absolute or 0.5% relative (CLBlast's margins). */
#define EXPECT_NEAR(got, want)                                          \
  do {                                                                  \
    double g_ = (double)(got), w_ = (double)(want);                     \
    double d_ = fabs(g_ - w_);                                          \
    clb_test_checks++;                                                  \
    if (!(d_ <= 1e-3 || d_ <= 5e-3 * fabs(w_)) && !(isnan(g_) && isnan(w_)) && !(g_ == w_)) \
      CLB_FAIL_AT("%s ~ %s: %.9g vs %.9g", #got, #want, g_, w_);         \
  } while (0)

/* Stops the test at once: for set-up that the rest depends on. */
#define REQUIRE_TRUE(c)                                                 \
  do { if (!(c)) { CLB_FAIL_AT("required %s", #c); exit(1); } } while (0)

/* stdout and stderr line-buffered before main: when a test stalls (a GPU hang),
 * its log ends at the case it was on, even through a pipe. */
__attribute__((constructor)) static void clb_test_line_buffered(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  setvbuf(stderr, NULL, _IOLBF, 0);
}

/* Prints the case a test is starting ("case: ..."), so a stall shows where. */
#define CLB_TEST_CASE(...)                                              \
  do {                                                                  \
    printf("case: ");                                                   \
    printf(__VA_ARGS__);                                                \
    putchar('\n');                                                      \
  } while (0)

/* A boolean variable as the library reads it (docs/api.md, "Environment"),
 * for tests that do not link it: set, not empty and not off/0/false/no. */
static inline int clb_test_env_on(const char *name) {
  static const char *const offs[] = {"off", "0", "false", "no"};
  const char *e = getenv(name);
  if (!e || !*e) return 0;
  for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++)
    if (strcasecmp(e, offs[i]) == 0) return 0;
  return 1;
}

/* Reduced sizes (CLBOUND_TEST_SMALL=1, set by the oclgrind label, whose
 * simulated device runs thousands of times slower): a short list of cases. */
static inline int clb_test_small(void) {
  return clb_test_env_on("CLBOUND_TEST_SMALL");
}

/* Prints how many checks ran and failed; returns the process exit code. A test
 * that ran no check fails: it proved nothing. */
static inline int clb_test_finish(const char *name) {
  printf("%s: %ld checks, %d failed\n", name, clb_test_checks, clb_test_failures);
  return (clb_test_failures || clb_test_checks == 0) ? 1 : 0;
}

#endif /* CLB_TEST_H */
