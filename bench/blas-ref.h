/* blas-ref.h: the direct-BLAS reference of the benchmarks: CBLAS (OpenBLAS) on
 * host memory at the same sizes, timed in the same run (bench/blas-ref.c). */
#ifndef CLB_BENCH_BLAS_REF_H
#define CLB_BENCH_BLAS_REF_H

#include <stdint.h>

/* n values in [-0.5, 0.5) from a fixed seed (the same in every run). */
void bench_rand_fill(float *v, int64_t n);

/* Whether this build has OpenBLAS for the reference. */
int bench_blas_available(void);

/* One problem on host memory, for timing interleaved with other work: NULL
 * without OpenBLAS or memory. bench_blas_once_ms runs one call, all cores;
 * bench_blas_run_ms, `calls` calls back to back (their total ms). */
typedef struct bench_blas bench_blas;
bench_blas *bench_blas_new(int ta, int tb, int64_t m, int64_t n, int64_t k);
double bench_blas_once_ms(bench_blas *p);
double bench_blas_run_ms(bench_blas *p, int calls);
void bench_blas_free(bench_blas *p);

/* Median ms over reps (after one warm-up) of C[m, n] = op(A) op(B) in f32 on
 * host memory, op(X) = X^T when tX; -1 without OpenBLAS. */
double bench_blas_ms(int ta, int tb, int64_t m, int64_t n, int64_t k, int reps);

/* The floor of a wide-mlp training step (256-512-256-1) at n rows: the sum of
 * its GEMMs' direct-BLAS medians (forward x W^T, dW = dy^T x, dx = dy W where
 * the input needs a gradient); -1 without OpenBLAS. */
double bench_mlp_gemm_floor_ms(int64_t n, int reps);

#endif /* CLB_BENCH_BLAS_REF_H */
