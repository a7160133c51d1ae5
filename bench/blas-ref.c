/* blas-ref.c: the direct-BLAS reference: CBLAS on host memory (blas-ref.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "bench/blas-ref.h"
#include "bench/timing.h"

void bench_rand_fill(float *v, int64_t n) {
  uint32_t s = 12345;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    v[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
  }
}

#ifdef CLBOUND_HAVE_OPENBLAS
#include "runtime/ops/blas-load.h" /* the same OpenBLAS, with the same kernels, as host BLAS's */

int bench_blas_available(void) { return clb__blas_get() != NULL; }

static float *rand_matrix(int64_t n) {
  float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
  if (v) bench_rand_fill(v, n);
  return v;
}

struct bench_blas {
  int ta, tb;
  int64_t m, n, k;
  float *a, *b, *c;
};

bench_blas *bench_blas_new(int ta, int tb, int64_t m, int64_t n, int64_t k) {
  bench_blas *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  *p = (bench_blas){ta, tb, m, n, k, rand_matrix(m * k), rand_matrix(k * n), rand_matrix(m * n)};
  if (!p->a || !p->b || !p->c) {
    bench_blas_free(p);
    return NULL;
  }
  return p;
}

void bench_blas_free(bench_blas *p) {
  if (!p) return;
  free(p->a);
  free(p->b);
  free(p->c);
  free(p);
}

double bench_blas_run_ms(bench_blas *p, int calls) {
  /* the machine's BLAS: every core, whatever host BLAS in the queue was set to */
  const clb_blas_lib *bl = clb__blas_get();
  if (!bl) return -1;
  int prev = bl->get_num_threads();
  bl->set_num_threads(bl->get_num_procs());
  int lda = (int)(p->ta ? p->m : p->k), ldb = (int)(p->tb ? p->k : p->n);
  double t0 = clb_tool_now_ms();
  for (int i = 0; i < calls; i++)
    bl->sgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans, p->tb ? CblasTrans : CblasNoTrans, (int)p->m,
                (int)p->n, (int)p->k, 1.0f, p->a, lda, p->b, ldb, 0.0f, p->c, (int)p->n);
  double ms = clb_tool_now_ms() - t0;
  bl->set_num_threads(prev);
  return ms;
}

double bench_blas_once_ms(bench_blas *p) { return bench_blas_run_ms(p, 1); }

double bench_blas_ms(int ta, int tb, int64_t m, int64_t n, int64_t k, int reps) {
  if (reps < 1) reps = 1;
  if (reps > 64) reps = 64;
  bench_blas *p = bench_blas_new(ta, tb, m, n, k);
  if (!p) return -1;
  double t[64];
  for (int r = -1; r < reps; r++) {
    double ms = bench_blas_once_ms(p);
    if (r >= 0) t[r] = ms;
  }
  bench_blas_free(p);
  return clb_tool_median(t, reps);
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
bench_blas *bench_blas_new(int ta, int tb, int64_t m, int64_t n, int64_t k) {
  (void)ta, (void)tb, (void)m, (void)n, (void)k;
  return NULL;
}
double bench_blas_once_ms(bench_blas *p) {
  (void)p;
  return -1;
}
double bench_blas_run_ms(bench_blas *p, int calls) {
  (void)p, (void)calls;
  return -1;
}
void bench_blas_free(bench_blas *p) { (void)p; }
double bench_blas_ms(int ta, int tb, int64_t m, int64_t n, int64_t k, int reps) {
  (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)reps;
  return -1;
}
double bench_mlp_gemm_floor_ms(int64_t n, int reps) {
  (void)n, (void)reps;
  return -1;
}

#endif
