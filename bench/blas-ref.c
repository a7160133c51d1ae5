/* blas-ref.c: the direct-BLAS reference: CBLAS on host memory (blas-ref.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "bench/blas-ref.h"
#include "bench/timing.h"

#ifdef CLBOUND_HAVE_OPENBLAS
#include <cblas.h>

int bench_blas_available(void) { return 1; }

static float *rand_matrix(int64_t n) {
  float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
  if (!v) return NULL;
  uint32_t s = 12345;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    v[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
  }
  return v;
}

double bench_blas_ms(int ta, int tb, int64_t m, int64_t n, int64_t k, int reps) {
  if (reps < 1) reps = 1;
  if (reps > 64) reps = 64;
  float *a = rand_matrix(m * k), *b = rand_matrix(k * n), *c = rand_matrix(m * n);
  double t[64], ms = -1;
  if (a && b && c) {
    int lda = (int)(ta ? m : k), ldb = (int)(tb ? k : n);
    for (int r = -1; r < reps; r++) {
      double t0 = clb_tool_now_ms();
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n,
                  (int)k, 1.0f, a, lda, b, ldb, 0.0f, c, (int)n);
      if (r >= 0) t[r] = clb_tool_now_ms() - t0;
    }
    ms = clb_tool_median(t, reps);
  }
  free(a);
  free(b);
  free(c);
  return ms;
}

double bench_mlp_gemm_floor_ms(int64_t n, int reps) {
  static const int64_t width[] = {256, 512, 256, 1};
  double sum = 0;
  for (int l = 0; l < 3; l++) {
    int64_t in = width[l], out = width[l + 1];
    sum += bench_blas_ms(0, 1, n, out, in, reps);  /* y = x W^T */
    sum += bench_blas_ms(1, 0, out, in, n, reps);  /* dW = dy^T x */
    if (l > 0) sum += bench_blas_ms(0, 0, n, in, out, reps); /* dx = dy W */
  }
  return sum;
}

#else

int bench_blas_available(void) { return 0; }
double bench_blas_ms(int ta, int tb, int64_t m, int64_t n, int64_t k, int reps) {
  (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)reps;
  return -1;
}
double bench_mlp_gemm_floor_ms(int64_t n, int reps) {
  (void)n, (void)reps;
  return -1;
}

#endif
