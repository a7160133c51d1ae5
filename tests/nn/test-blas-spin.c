/* test-blas-spin.c: OpenBLAS's spin timeout under host BLAS (docs/gemm.md,
 * Threads). Where OPENBLAS_THREAD_TIMEOUT (or GOTO_THREAD_TIMEOUT) is unset,
 * the first host-BLAS matmul of the process makes OpenBLAS's idle helper
 * threads sleep after 2^4 cycles instead of spinning for 2^28, and leaves the
 * environment as it found it; a value the user set is kept. Products before and
 * after the helper threads are restarted are checked against a double reference.
 * ctest runs this twice: nn/blas-spin (unset) and nn/blas-spin-user (=20). */
#include "nn-test.h"

extern int openblas_thread_timeout(void); /* OpenBLAS's cached setting (0: unset) */

/* a (m x k) times b (k x n), m = 256, k = 512, n = 256: 67 MFLOP, so OpenBLAS
 * runs it on every core (CLB_BLAS_MANY_FLOPS, runtime/ops/blas-threads.h). */
static void product(clb_context_t ctx, const char *what) {
  enum { M = 256, K = 512, N = 256 };
  int64_t ab[2] = {M, K}, bb[2] = {K, N};
  uint8_t dyn[2] = {1, 0};
  double *va = malloc(sizeof(double) * M * K), *vb = malloc(sizeof(double) * K * N), *ref = malloc(sizeof(double) * M * N);
  REQUIRE_TRUE(va && vb && ref);
  for (int i = 0; i < M * K; i++) va[i] = nn_rnd(-1, 1);
  for (int i = 0; i < K * N; i++) vb[i] = nn_rnd(-1, 1);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0;
      for (int q = 0; q < K; q++) s += va[i * K + q] * vb[q * N + j];
      ref[i * N + j] = s;
    }
  clb_tensor_t a = nn_tensor(ctx, CLB_DTYPE_F32, 2, ab, dyn, ab, va), b = nn_tensor(ctx, CLB_DTYPE_F32, 2, bb, NULL, bb, vb);
  clb_tensor_t o = NULL;
  CL_OK(ctx, clb_matmul(ctx, a, 0, b, 0, &o));
  nn_expect(ctx, o, (int64_t[2]){M, N}, ref, (int64_t)M * N, what);
  clb_tensor_free(o);
  clb_tensor_free(a);
  clb_tensor_free(b);
  free(va);
  free(vb);
  free(ref);
}

int main(void) {
  const char *env = getenv("OPENBLAS_THREAD_TIMEOUT");
  char before[32] = "";
  if (env) snprintf(before, sizeof before, "%s", env);
  int user = env && *env ? atoi(env) : 0;
  clb_context_t ctx = clb_test_context(NULL);
  CL_OK(ctx, clb_context_set_gemm_strategy(ctx, CLB_GEMM_HOST_BLAS));
  if (clb_context_gemm_strategy(ctx) != CLB_GEMM_HOST_BLAS) {
    fprintf(stderr, "skipping: host BLAS cannot run on this device\n");
    clb_context_free(ctx);
    return CLB_TEST_SKIP;
  }
  EXPECT_EQ_I(openblas_thread_timeout(), user); /* as libopenblas read it at load */
  product(ctx, "first product");
  EXPECT_EQ_I(openblas_thread_timeout(), user ? user : 4);
  const char *after = getenv("OPENBLAS_THREAD_TIMEOUT");
  clb_test_checks++;
  if ((env != NULL) != (after != NULL) || (after && strcmp(after, before) != 0))
    CLB_FAIL_AT("OPENBLAS_THREAD_TIMEOUT was '%s' (%s) and is '%s' (%s) after the first matmul", before,
                env ? "set" : "unset", after ? after : "", after ? "set" : "unset");
  product(ctx, "second product (helper threads restarted)");
  CL_OK(ctx, clb_context_sync(ctx));
  clb_context_free(ctx);
  return clb_test_finish(user ? "nn/blas-spin-user" : "nn/blas-spin");
}
