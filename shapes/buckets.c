/* buckets.c: bucket ladders for the bucketed policy: powers of two, or percentiles of observed sizes (Intel Gaudi's recipe). */
#include <stdlib.h>
#include <string.h>

#include "shapes-impl.h"

clb_status clb_buckets_pow2(int64_t lo, int64_t hi, int64_t *ladder, size_t cap, size_t *n) {
  if (!n || (!ladder && cap)) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_buckets_pow2: NULL argument (n, ladder must not be NULL)");
  *n = 0;
  if (lo < 1 || hi < lo) return clb__shapes_fail_last(CLB_ERR_INVALID_ARG, "clb_buckets_pow2: the sizes must satisfy 1 <= lo <= hi, not lo %lld, hi %lld", (long long)lo, (long long)hi);
  int64_t p = 1;
  while (p < lo && p <= INT64_MAX / 2) p *= 2;
  if (p < lo) p = hi; /* lo > 2^62: no power of two above it fits, the bound is the one bucket */
  for (;;) {
    if (*n == cap) return CLB_ERR_BUFFER_SMALL;
    ladder[(*n)++] = p < hi ? p : hi; /* the last bucket is the bound */
    if (p >= hi || p > INT64_MAX / 2) break;
    p *= 2;
  }
  if (ladder[*n - 1] < hi) {
    if (*n == cap) return CLB_ERR_BUFFER_SMALL;
    ladder[(*n)++] = hi;
  }
  return CLB_OK;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

clb_status clb_buckets_percentile(const int64_t *observed, size_t nobserved, size_t nbuckets, int64_t *ladder,
                                  size_t cap, size_t *n) {
  if (!n || !observed || (!ladder && cap)) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_buckets_percentile: NULL argument (n, observed, ladder must not be NULL)");
  *n = 0;
  if (nobserved == 0 || nbuckets < 1) return clb__shapes_fail_last(CLB_ERR_INVALID_ARG, "clb_buckets_percentile: needs observed sizes and at least one bucket, not %zu sizes and %d buckets", (size_t)nobserved, (int)nbuckets);
  int64_t *v = malloc(nobserved * sizeof *v);
  if (!v) return clb__shapes_fail_last(CLB_ERR_HOST_OOM, "clb_buckets_percentile: out of host memory");
  memcpy(v, observed, nobserved * sizeof *v);
  qsort(v, nobserved, sizeof *v, cmp_i64);
  clb_status st = CLB_OK;
  for (size_t k = 1; k <= nbuckets; k++) {
    /* the ceil(k*n/N)-th smallest, 1-based; computed without overflow for sane n */
    size_t at = (size_t)(((unsigned long long)k * nobserved + nbuckets - 1) / nbuckets) - 1;
    int64_t b = v[at];
    if (*n > 0 && b <= ladder[*n - 1]) continue;
    if (*n == cap) {
      st = CLB_ERR_BUFFER_SMALL;
      break;
    }
    ladder[(*n)++] = b;
  }
  free(v);
  return st;
}
