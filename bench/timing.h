/* timing.h: the clock and the median every benchmark (and the demo) uses. */
#ifndef CLB_BENCH_TIMING_H
#define CLB_BENCH_TIMING_H

#include <stdlib.h>
#include <time.h>

/* Monotonic wall time in milliseconds. */
static inline double clb_tool_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static inline int clb_tool_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of t[0..n) (n >= 1); sorts t. */
static inline double clb_tool_median(double *t, int n) {
  qsort(t, (size_t)n, sizeof t[0], clb_tool_cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

#endif /* CLB_BENCH_TIMING_H */
