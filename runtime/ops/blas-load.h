/* blas-load.h: OpenBLAS, loaded at first use (dlopen) rather than linked, so
 * that its kernels suit the CPU before it starts (runtime/ops/blas-load.c;
 * docs/gemm.md, "Which OpenBLAS kernels"). Built into libclbound (host BLAS in
 * the queue) and into the benchmarks (their direct-BLAS reference), each with
 * its own copy; the second to load finds the first's library already loaded. */
#ifndef CLB_OPS_BLAS_LOAD_H
#define CLB_OPS_BLAS_LOAD_H

#include <stddef.h>

#ifdef CLBOUND_HAVE_OPENBLAS
#include <cblas.h>

typedef void (*clb_sgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint,
                             float, const float *, blasint, const float *, blasint, float, float *, blasint);
typedef void (*clb_dgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint,
                             double, const double *, blasint, const double *, blasint, double, double *, blasint);

typedef struct clb_blas_lib {
  clb_sgemm_fn sgemm;
  clb_dgemm_fn dgemm;
  int (*get_num_threads)(void);
  void (*set_num_threads)(int);
  int (*get_num_procs)(void);
  char core[48];    /* openblas_get_corename(): the kernels in force */
  char config[200]; /* openblas_get_config() */
  char how[400];    /* how the core was chosen, one sentence */
} clb_blas_lib;
#endif

/* The loaded OpenBLAS, or NULL (no OpenBLAS in the build, or it cannot be
 * loaded: clb__blas_why says why). Loads it on the first call, once per process
 * (thread-safe). A core OpenBLAS picked for a CPU it does not know (an older
 * OpenBLAS on a newer or virtualised CPU falls back to a core without AVX) is
 * replaced by the best one the CPU's features allow, by loading OpenBLAS again
 * with OPENBLAS_CORETYPE set for that load only; an OPENBLAS_CORETYPE in the
 * environment is kept as it is. */
#ifdef CLBOUND_HAVE_OPENBLAS
const clb_blas_lib *clb__blas_get(void);
#endif
const char *clb__blas_why(void);

/* One line for `clbound info` and clb_host_blas_describe: the library, its
 * core and how it was chosen, or why there is none. Loads OpenBLAS. */
void clb__blas_describe(char *buf, size_t cap);

#endif
