/* test-blas-threads.c: the OpenBLAS thread rule of host BLAS
 * (runtime/ops/blas-threads.c; docs/gemm.md, Threads), its decision only, not
 * its timing: the count at the size bounds, against the load and the cores,
 * the parse of /proc/stat, the busy cores of other processes from a window's
 * ticks and this process's CPU time, and the live reading. Plain C,
 * built with the rule's source; no OpenCL. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>
#include <unistd.h>

#include "runtime/ops/blas-threads.h"
#include "test.h"

/* The bounds as docs/gemm.md states them: 12 and 32 MFLOP (2^20 FLOP). */
#define MFLOP (1024.0 * 1024.0)
#define ONE (12 * MFLOP)
#define MANY (32 * MFLOP)

int main(void) {
  EXPECT_TRUE(CLB_BLAS_ONE_FLOPS == ONE);
  EXPECT_TRUE(CLB_BLAS_MANY_FLOPS == MANY);
  CLB_TEST_CASE("under 12 MFLOP: one thread whatever the load");
  EXPECT_EQ_I(clb__blas_threads_rule(ONE - 1, 1, 2, 2), 1);
  EXPECT_EQ_I(clb__blas_threads_rule(8.4e6, 1, 16, 16), 1);
  EXPECT_EQ_I(clb__blas_threads_rule(0, 1, 2, 2), 1);
  CLB_TEST_CASE("12 to 32 MFLOP on 2 cores: two threads only when the caller runs alone");
  EXPECT_EQ_I(clb__blas_threads_rule(ONE, 1, 2, 2), 2);
  EXPECT_EQ_I(clb__blas_threads_rule(2.0 * 256 * 512 * 64, 1, 2, 2), 2); /* 256x512x64, 16.8 MFLOP */
  EXPECT_EQ_I(clb__blas_threads_rule(MANY - 1, 1, 2, 2), 2);
  EXPECT_EQ_I(clb__blas_threads_rule(ONE, 2, 2, 2), 1);
  EXPECT_EQ_I(clb__blas_threads_rule(MANY - 1, 2, 2, 2), 1);
  EXPECT_EQ_I(clb__blas_threads_rule(MANY - 1, 3, 2, 2), 1);
  EXPECT_EQ_I(clb__blas_threads_rule(MANY - 1, 40, 2, 2), 1);
  CLB_TEST_CASE("12 to 32 MFLOP: the load or the cores unknown keeps one thread");
  EXPECT_EQ_I(clb__blas_threads_rule(ONE, -1, 2, 2), 1);
  EXPECT_EQ_I(clb__blas_threads_rule(ONE, 0, 2, 2), 1);
  EXPECT_EQ_I(clb__blas_threads_rule(ONE, 1, 0, 2), 1);
  CLB_TEST_CASE("12 to 32 MFLOP on more cores: one plus the idle cores, at most OpenBLAS's count");
  EXPECT_EQ_I(clb__blas_threads_rule(ONE, 4, 16, 16), 13);
  EXPECT_EQ_I(clb__blas_threads_rule(ONE, 1, 16, 16), 16);
  EXPECT_EQ_I(clb__blas_threads_rule(ONE, 1, 16, 4), 4);
  EXPECT_EQ_I(clb__blas_threads_rule(ONE, 15, 16, 16), 2);
  EXPECT_EQ_I(clb__blas_threads_rule(ONE, 16, 16, 16), 1);
  EXPECT_EQ_I(clb__blas_threads_rule(ONE, 1, 2, 1), 1);
  CLB_TEST_CASE("32 MFLOP and over: OpenBLAS's count whatever the load");
  EXPECT_EQ_I(clb__blas_threads_rule(MANY, 1, 2, 2), 2);
  EXPECT_EQ_I(clb__blas_threads_rule(MANY, 9, 2, 2), 2);
  EXPECT_EQ_I(clb__blas_threads_rule(MANY, -1, 2, 2), 2);
  EXPECT_EQ_I(clb__blas_threads_rule(2.0 * 1024 * 1024 * 1024, 30, 16, 16), 16);
  EXPECT_EQ_I(clb__blas_threads_rule(MANY, 1, 2, 0), 1); /* a BLAS that reports no count */

  CLB_TEST_CASE("/proc/stat's first line: the machine's busy ticks");
  long long busy = -7;
  EXPECT_EQ_I(clb__proc_stat_busy("cpu  100 20 30 4000 50 6 7 8 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n", &busy), 0);
  EXPECT_EQ_I(busy, 100 + 20 + 30 + 6 + 7 + 8); /* idle 4000 and iowait 50 are not busy */
  EXPECT_EQ_I(clb__proc_stat_busy("cpu  5 6 7 8\n", &busy), 0); /* an old kernel: four fields */
  EXPECT_EQ_I(busy, 18);
  busy = -7;
  EXPECT_EQ_I(clb__proc_stat_busy("cpu0 1 2 3 4 5 6 7 8\n", &busy), -1);
  EXPECT_EQ_I(clb__proc_stat_busy("cpu  1 2 x", &busy), -1);
  EXPECT_EQ_I(clb__proc_stat_busy("", &busy), -1);
  EXPECT_EQ_I(clb__proc_stat_busy(NULL, &busy), -1);
  EXPECT_EQ_I(busy, -7); /* untouched on failure */

  CLB_TEST_CASE("cores other processes kept busy: the machine's busy time less ours, per elapsed time");
  const long long S = 1000000000LL; /* 1 s in ns; 100 ticks a second below */
  EXPECT_EQ_I(clb__others_busy(0, 100, 0, S / 10), 0);               /* idle machine */
  EXPECT_EQ_I(clb__others_busy(10, 100, S / 10, S / 10), 0);         /* only this process, one core */
  EXPECT_EQ_I(clb__others_busy(20, 100, S / 10, S / 10), 1);         /* plus another process's core */
  EXPECT_EQ_I(clb__others_busy(16, 100, S / 10, S / 10), 1);         /* another process on 0.6 of a core */
  EXPECT_EQ_I(clb__others_busy(14, 100, S / 10, S / 10), 0);         /* on 0.4 */
  EXPECT_EQ_I(clb__others_busy(20, 100, 2 * S / 10, S / 10), 0);     /* this process on both cores */
  EXPECT_EQ_I(clb__others_busy(5, 100, 0, S / 10), 0);               /* half a core: not over the share */
  EXPECT_EQ_I(clb__others_busy(6, 100, 0, S / 10), 1);               /* 0.6: counts */
  EXPECT_EQ_I(clb__others_busy(15, 100, 0, S / 10), 1);              /* 1.5 */
  EXPECT_EQ_I(clb__others_busy(16, 100, 0, S / 10), 2);              /* 1.6 */
  EXPECT_EQ_I(clb__others_busy(5, 100, S / 10, S / 10), 0);          /* ours over the ticks' resolution */
  EXPECT_EQ_I(clb__others_busy(5, 100, 0, 0), -1);                   /* empty window */
  EXPECT_EQ_I(clb__others_busy(5, 0, 0, S / 10), -1);                /* no tick rate */

  CLB_TEST_CASE("the live reading and the CPU count");
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int cpus = clb__cpus_for_process();
  EXPECT_TRUE(cpus >= 1);
  if (online > 0) EXPECT_TRUE(cpus <= online);
  int first = clb__running_now(); /* the first sample: no window yet */
  EXPECT_EQ_I(first, -1);
  if (access("/proc/stat", R_OK) == 0) {
    struct timespec pause = {0, CLB_BLAS_LOAD_WINDOW_NS + 10000000L};
    nanosleep(&pause, NULL);
    int r = clb__running_now(); /* 1 (this thread) plus the other processes' busy cores */
    EXPECT_TRUE(r >= 1 && r <= 1 + cpus + 64);
    EXPECT_EQ_I(clb__running_now(), r); /* within the window: the same sample */
  } else {
    EXPECT_EQ_I(clb__running_now(), -1);
  }
  return clb_test_finish("nn/blas-threads");
}
