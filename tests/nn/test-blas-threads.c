/* test-blas-threads.c: the OpenBLAS thread rule of host BLAS
 * (runtime/ops/blas-threads.c; docs/gemm.md, Threads), its decision only, not
 * its timing: the count at the size bounds, against the load and the cores,
 * the parse of /proc/loadavg's runnable count, and the live reading. Plain C,
 * built with the rule's source; no OpenCL. */
#define _POSIX_C_SOURCE 200809L
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

  CLB_TEST_CASE("/proc/loadavg's fourth field");
  EXPECT_EQ_I(clb__loadavg_running("0.25 1.24 1.89 1/79 16746\n"), 1);
  EXPECT_EQ_I(clb__loadavg_running("11.02 9.51 7.00 13/1207 99999"), 13);
  EXPECT_EQ_I(clb__loadavg_running("0.00 0.00 0.00 0/5 1"), 0);
  EXPECT_EQ_I(clb__loadavg_running("0.1 0.2 0.3 6/5 1"), -1); /* more running than tasks */
  EXPECT_EQ_I(clb__loadavg_running("0.1 0.2 0.3 x/5 1"), -1);
  EXPECT_EQ_I(clb__loadavg_running("0.1 0.2 0.3"), -1);
  EXPECT_EQ_I(clb__loadavg_running(""), -1);
  EXPECT_EQ_I(clb__loadavg_running(NULL), -1);

  CLB_TEST_CASE("the live reading and the CPU count");
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int cpus = clb__cpus_for_process();
  EXPECT_TRUE(cpus >= 1);
  if (online > 0) EXPECT_TRUE(cpus <= online);
  if (access("/proc/loadavg", R_OK) == 0) {
    int r = clb__running_now(); /* this thread is running while it reads */
    EXPECT_TRUE(r >= 1);
    int again = clb__running_now(); /* cached or read again: a count either way */
    EXPECT_TRUE(again >= 1);
  } else {
    EXPECT_EQ_I(clb__running_now(), -1);
  }
  return clb_test_finish("nn/blas-threads");
}
