/* cmd-bench-gemm.c: `clbound bench gemm`: matmul with a bounded M, each strategy
 * against CLBlast at the exact size, measured in the same run. */
#include <stdio.h>

#include "commands.h"

int clb_cmd_bench_gemm(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "clbound bench gemm: not built yet\n");
  return 2;
}
