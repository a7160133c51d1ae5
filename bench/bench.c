/* bench.c: `clbound bench <name>`: picks the benchmark. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

int clb_bench_main(int argc, char **argv) {
  /* benchmarks time kernels: a cold cache builds them optimized at once, not
   * unoptimized until the store helper's build replaces them (CLBOUND_COLD_BUILD=fast,
   * the default); a value the user set is kept */
  setenv("CLBOUND_COLD_BUILD", "optimized", 0);
  if (argc > 0 && (strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0)) {
    printf("usage: clbound bench ops|gemm|steps|whole-step|build-floor [options]; clbound bench NAME --help for each\n");
    return 0;
  }
  if (argc > 0 && strcmp(argv[0], "steps") == 0) return clb_bench_steps(argc - 1, argv + 1);
  if (argc > 0 && strcmp(argv[0], "whole-step") == 0) return clb_bench_whole_step(argc - 1, argv + 1);
  if (argc > 0 && strcmp(argv[0], "gemm") == 0) return clb_bench_gemm(argc - 1, argv + 1);
  if (argc > 0 && strcmp(argv[0], "build-floor") == 0) return clb_bench_build_floor(argc - 1, argv + 1);
  return clb_bench_ops(argc, argv);
}
