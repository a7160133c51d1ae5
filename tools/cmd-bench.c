/* cmd-bench.c: `clbound bench`: benchmarks with ratios measured in the same run. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

int clb_cmd_bench(int argc, char **argv) {
  fprintf(stderr, "clbound bench: no benchmark suites are built yet (%s)\n", argc > 0 ? argv[0] : "none given");
  return 2;
}
