/* test-blas-core.c: which OpenBLAS kernels host BLAS runs (runtime/ops/blas-load.c).
 *
 *   test-nn-blas-core            OPENBLAS_CORETYPE unset: on a CPU with AVX2 and
 *                                FMA (or AVX-512) the core in force has AVX
 *                                kernels, even where OpenBLAS took the CPU for
 *                                one without (an unknown model: it picks Prescott)
 *   OPENBLAS_CORETYPE=X ...      the user's core is kept, and said so
 *   test-nn-blas-core preload    OpenBLAS loaded by someone else first: clbound
 *                                uses that very library and never reloads it
 *
 * Each then runs a host-BLAS matmul against a double reference and forks, so a
 * library loaded twice (the first copy closed) still computes and forks right. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cl-test.h"
#include "clbound/nn.h"

/* Whether the kernel lists `flag` among the CPU's flags (/proc/cpuinfo): an
 * account of the CPU independent of the library's own (cpuid). */
static int has_flag(const char *flags, const char *flag) {
  size_t n = strlen(flag);
  for (const char *p = strstr(flags, flag); p; p = strstr(p + 1, flag))
    if ((p == flags || p[-1] == ' ' || p[-1] == '\t') && (p[n] == ' ' || p[n] == '\n' || p[n] == 0)) return 1;
  return 0;
}

/* The CPU's rank as blas-load.c counts it: 3 AVX-512 (F, CD, BW, DQ, VL),
 * 2 AVX2 and FMA, 1 AVX, 0 none or unknown. */
static int cpu_rank(void) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return 0;
  static char line[8192];
  int rank = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5) != 0) continue;
    const char *v = strchr(line, ':');
    if (!v) break;
    if (has_flag(v, "avx512f") && has_flag(v, "avx512cd") && has_flag(v, "avx512bw") && has_flag(v, "avx512dq") &&
        has_flag(v, "avx512vl"))
      rank = 3;
    else if (has_flag(v, "avx2") && has_flag(v, "fma"))
      rank = 2;
    else if (has_flag(v, "avx"))
      rank = 1;
    break;
  }
  fclose(f);
  return rank;
}

/* OpenBLAS's cores without AVX kernels: what it falls back to for a CPU it does not know. */
static int pre_avx(const char *core) {
  static const char *const old[] = {"katmai", "coppermine", "northwood", "prescott", "banias", "atom", "core2",
                                    "penryn", "dunnington", "nehalem", "opteron", "opteron_sse3", "barcelona",
                                    "bobcat", "unknown", NULL};
  for (int i = 0; old[i]; i++)
    if (strcasecmp(core, old[i]) == 0) return 1;
  return 0;
}

/* The "core NAME" of the description, into core. */
static void core_of(const char *line, char *core, size_t cap) {
  const char *p = strstr(line, "; core ");
  core[0] = 0;
  if (!p) return;
  p += 7;
  size_t n = strcspn(p, ":");
  if (n >= cap) n = cap - 1;
  memcpy(core, p, n);
  core[n] = 0;
}

/* y = x w^T on host BLAS, [m, k] x [n, k], against a double reference. */
static void matmul_checks(void) {
  clb_context_t ctx = clb_test_context(NULL);
  if (clb_context_gemm_strategy(ctx) != CLB_GEMM_HOST_BLAS) {
    clb_context_free(ctx);
    clb_test_skip("the device does not run host BLAS (no native kernels)");
  }
  enum { M = 301, N = 203, K = 97 };
  float *x = malloc(sizeof(float) * M * K), *w = malloc(sizeof(float) * N * K), *y = malloc(sizeof(float) * M * N);
  REQUIRE_TRUE(x && w && y);
  for (int i = 0; i < M * K; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  for (int i = 0; i < N * K; i++) w[i] = (float)((i * 53) % 89) / 44.0f - 1.0f;
  clb_tensor_t tx, tw, ty;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, (int64_t[]){M, K}, NULL, &tx));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, (int64_t[]){N, K}, NULL, &tw));
  CL_OK(ctx, clb_tensor_write(ctx, tx, (int64_t[]){M, K}, x, sizeof(float) * M * K));
  CL_OK(ctx, clb_tensor_write(ctx, tw, (int64_t[]){N, K}, w, sizeof(float) * N * K));
  CL_OK(ctx, clb_matmul(ctx, tx, 0, tw, 1, &ty));
  int64_t dims[2];
  CL_OK(ctx, clb_tensor_read(ctx, ty, dims, y, sizeof(float) * M * N, NULL));
  EXPECT_EQ_I(dims[0], M);
  EXPECT_EQ_I(dims[1], N);
  int bad = 0;
  for (int i = 0; i < M && bad < 5; i++)
    for (int j = 0; j < N && bad < 5; j++) {
      double r = 0;
      for (int k = 0; k < K; k++) r += (double)x[i * K + k] * (double)w[j * K + k];
      /* f32 products over K = 97 terms of magnitude <= 1: 1e-4 absolute */
      if (fabs(y[i * N + j] - r) > 1e-4) {
        CLB_FAIL_AT("y[%d][%d] = %.9g, double reference %.9g", i, j, y[i * N + j], r);
        bad++;
      }
    }
  clb_test_checks++;
  clb_tensor_free(tx);
  clb_tensor_free(tw);
  clb_tensor_free(ty);
  clb_context_free(ctx);
  free(x);
  free(w);
  free(y);
}

/* A fork after the library was loaded (twice, where it was replaced): the
 * closed copy's fork handlers must be gone, the child must exit cleanly. */
static void fork_checks(void) {
  pid_t pid = fork();
  REQUIRE_TRUE(pid >= 0);
  if (pid == 0) _exit(0);
  int status = 0;
  EXPECT_EQ_I(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv) {
  int preload = argc > 1 && strcmp(argv[1], "preload") == 0;
  const char *env = getenv("OPENBLAS_CORETYPE");
  char pre_core[64] = "";
  if (preload) {
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) clb_test_skip("libopenblas.so.0 cannot be opened here");
    char *(*corename)(void) = (char *(*)(void))dlsym(h, "openblas_get_corename");
    REQUIRE_TRUE(corename != NULL);
    snprintf(pre_core, sizeof pre_core, "%s", corename());
  }
  char line[1024], core[64];
  size_t len = 0;
  REQUIRE_TRUE(clb_host_blas_describe(line, sizeof line, &len) == CLB_OK);
  printf("host BLAS: %s\n", line);
  EXPECT_EQ_I(len, strlen(line));
  if (strncmp(line, "none:", 5) == 0) /* built with OpenBLAS (the test is added only then), not installed here */
    clb_test_skip(line);
  core_of(line, core, sizeof core);
  REQUIRE_TRUE(core[0] != 0);
  int rank = cpu_rank();
  if (preload) {
    CLB_TEST_CASE("OpenBLAS loaded before clbound: kept as it is (core %s)", pre_core);
    EXPECT_EQ_S(core, pre_core);
    if (!env && pre_avx(pre_core) && rank >= 2)
      EXPECT_TRUE(strstr(line, "loaded OpenBLAS before clbound") && strstr(line, "OPENBLAS_CORETYPE="));
  } else if (env && *env) {
    CLB_TEST_CASE("OPENBLAS_CORETYPE=%s: kept", env);
    EXPECT_TRUE(strcasecmp(core, env) == 0);
    EXPECT_TRUE(strstr(line, "in the environment") != NULL);
  } else {
    CLB_TEST_CASE("OpenBLAS's core on a CPU of rank %d (3 AVX-512, 2 AVX2): %s", rank, core);
    if (rank >= 2) EXPECT_TRUE(!pre_avx(core) && strcasecmp(core, "sandybridge") != 0);
    if (strstr(line, "clbound chose it")) /* replaced: the core asked for is the one for the CPU's features */
      EXPECT_TRUE(strcasecmp(core, rank == 3 ? "SkylakeX" : rank == 2 ? "Haswell" : "Sandybridge") == 0);
  }
  /* a second description reads the same library */
  char again[1024];
  REQUIRE_TRUE(clb_host_blas_describe(again, sizeof again, NULL) == CLB_OK);
  EXPECT_EQ_S(again, line);
  /* cut to fit, NUL-terminated; a NULL buffer with room is an error */
  char small[8];
  REQUIRE_TRUE(clb_host_blas_describe(small, sizeof small, &len) == CLB_OK);
  EXPECT_EQ_I(strlen(small), sizeof small - 1);
  EXPECT_EQ_I(len, strlen(line));
  EXPECT_EQ_I(clb_host_blas_describe(NULL, 4, NULL), CLB_ERR_NULL);
  matmul_checks();
  fork_checks();
  return clb_test_finish("nn/blas-core");
}
