/* whole-step.c: `clbound bench whole-step`: one training step of each demo
 * workload under its one dynamic plan, the whole-step path (fused kernels, one
 * program) against the same plan run op by op, in the same run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/workloads.h"

int clb_bench_whole_step(int argc, char **argv) {
  int json = 0, reps = 9, batch = 20;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
    else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) batch = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: clbound bench whole-step [--json] [--reps N] [--batch STEPS]\n");
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  if (batch < 1) batch = 1;
  if (!json)
    printf("training step under the dynamic plan (xla-mlp; wide-mlp at 256 rows): %d steps enqueued, one sync,\n"
           "median per step of %d reps; eager = the same plan op by op (CLBOUND_FUSE=off), interleaved\n"
           "%-9s %10s %14s %8s\n", batch, reps, "workload", "step_ms", "eager_step_ms", "ratio");
  for (int w = 0; w < DEMO_WORKLOAD_COUNT; w++) {
    double step = 0, eager = 0;
    char err[1024];
    if (demo_time_whole_step((demo_workload)w, reps, batch, &step, &eager, err, sizeof err) != 0) {
      fprintf(stderr, "clbound bench whole-step: %s: %s\n", demo_workload_name((demo_workload)w), err);
      return 1;
    }
    if (json)
      printf("{\"bench\":\"whole-step\",\"workload\":\"%s\",\"step_ms\":%.4f,\"eager_step_ms\":%.4f,\"eager_over_step\":%.3f,"
             "\"reps\":%d,\"batch\":%d}\n",
             demo_workload_name((demo_workload)w), step, eager, eager / step, reps, batch);
    else
      printf("%-9s %10.4f %14.4f %8.3f\n", demo_workload_name((demo_workload)w), step, eager, eager / step);
    fflush(stdout);
  }
  return 0;
}
