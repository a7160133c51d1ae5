/* test-keep-driver.c: the driver stays loaded between contexts
 * (CLBOUND_KEEP_DRIVER; runtime/core/context.c, "The driver kept loaded").
 *
 * PoCL frees its compiler with the process's last context and parses its
 * kernel library again at the next context's first build. A child process
 * makes three contexts one after the other, each building a program from
 * source (clbound's cache off, PoCL's kernel cache off) and running a sigmoid
 * checked against a double reference, and frees each before the next. Under
 * POCL_DEBUG=llvm PoCL prints a line naming "the built-in lib" each time it
 * loads that library: the parent counts them in the child's output. With the
 * default (auto, on PoCL) the library is loaded once for the three contexts;
 * with CLBOUND_KEEP_DRIVER=off, once per context, as without clbound. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cl-test.h"
#include "temp-dir.h"

#define ROUNDS 3

/* The child: ROUNDS contexts in turn; exit status 0 when every result was right. */
static int child(void) {
  for (int r = 0; r < ROUNDS; r++) {
    clb_context_t ctx = NULL;
    if (clb_context_new(NULL, &ctx) != CLB_OK) {
      fprintf(stderr, "round %d: clb_context_new: %s\n", r, clb_last_errmsg());
      return 2;
    }
    const int64_t n = 5;
    const float x[5] = {-3.0f, -0.5f, 0.0f, 0.75f, 2.0f + (float)r};
    clb_tensor_t t = NULL, y = NULL;
    float got[5] = {0};
    clb_status st = clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &n, NULL, &t);
    if (st == CLB_OK) st = clb_tensor_write(ctx, t, &n, x, sizeof x);
    if (st == CLB_OK) st = clb_unary(ctx, CLB_UNARY_SIGMOID, t, &y);
    if (st == CLB_OK) st = clb_tensor_read(ctx, y, NULL, got, sizeof got, NULL);
    if (st != CLB_OK) {
      fprintf(stderr, "round %d: %s: %s\n", r, clb_status_name(st), clb_context_errmsg(ctx));
      return 3;
    }
    for (int i = 0; i < 5; i++) {
      double want = 1.0 / (1.0 + exp(-(double)x[i]));
      if (!(fabs((double)got[i] - want) <= 1e-6)) { /* float sigmoid: a few ulps of values below 1 */
        fprintf(stderr, "round %d: sigmoid(%g) = %.9g, want %.9g\n", r, (double)x[i], (double)got[i], want);
        return 4;
      }
    }
    clb_tensor_free(y);
    clb_tensor_free(t);
    clb_context_free(ctx);
  }
  return 0;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Runs the child with CLBOUND_KEEP_DRIVER=mode; its stderr goes to `log`, the
 * child's whole time to *seconds (printed, not checked). Returns how many
 * times PoCL loaded its kernel library, or -1 when the child failed. */
static int library_loads(const char *mode, const char *log, double *seconds) {
  fflush(NULL);
  const double t0 = now_s();
  pid_t pid = fork();
  REQUIRE_TRUE(pid >= 0);
  if (pid == 0) {
    if (!freopen(log, "w", stderr)) _exit(5);
    setenv("POCL_DEBUG", "llvm", 1);
    setenv("POCL_KERNEL_CACHE", "0", 1);
    setenv("CLBOUND_CACHE_DIR", "off", 1);
    setenv("CLBOUND_KEEP_DRIVER", mode, 1);
    execl("/proc/self/exe", "test-core-keep-driver", "--child", (char *)NULL);
    _exit(6);
  }
  int status = 0;
  REQUIRE_TRUE(waitpid(pid, &status, 0) == pid);
  *seconds = now_s() - t0;
  int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  FILE *f = fopen(log, "r");
  REQUIRE_TRUE(f != NULL);
  char line[4096];
  int loads = 0;
  while (fgets(line, sizeof line, f))
    if (strstr(line, "as the built-in lib")) loads++;
  fclose(f);
  if (rc != 0) {
    fprintf(stderr, "CLBOUND_KEEP_DRIVER=%s: the child failed (exit %d); its output is in %s\n", mode, rc, log);
    return -1;
  }
  return loads;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--child") == 0) return child();
  CLB_TEST_CASE("PoCL's compiler loaded once for %d contexts in turn", ROUNDS);
  clb_device_info di;
  di.struct_size = sizeof di;
  if (clb_device_info_get(0, &di) != CLB_OK) clb_test_skip("no OpenCL device (set CI=true to make this a failure)");
  if (!strstr(di.platform_name, "Portable Computing Language")) {
    /* auto keeps PoCL's driver only; elsewhere nothing changes */
    fprintf(stderr, "skipping: the platform is %s, not PoCL\n", di.platform_name);
    return CLB_TEST_SKIP;
  }
  char dir[512], log_auto[600], log_off[600];
  clb_test_temp_dir(dir, sizeof dir, "keep-driver");
  snprintf(log_auto, sizeof log_auto, "%s/auto.log", dir);
  snprintf(log_off, sizeof log_off, "%s/off.log", dir);
  double t_kept = 0, t_unkept = 0;
  int kept = library_loads("auto", log_auto, &t_kept);
  int unkept = library_loads("off", log_off, &t_unkept);
  printf("kernel library loads for %d contexts in turn: %d kept (auto; the child took %.2f s), %d with "
         "CLBOUND_KEEP_DRIVER=off (%.2f s)\n", ROUNDS, kept, t_kept, unkept, t_unkept);
  EXPECT_EQ_I(kept, 1);
  EXPECT_EQ_I(unkept, ROUNDS);
  if (kept == 1 && unkept == ROUNDS) {
    remove(log_auto);
    remove(log_off);
    remove(dir);
  }
  return clb_test_finish("core/keep-driver");
}
