/* whole-step.c: `clbound bench whole-step`: one training step of each demo
 * workload under its one dynamic plan, the whole-step path (fused kernels, one
 * program) against the same plan run op by op, in the same run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/args.h"
#include "bench/bench.h"
#include "bench/workloads.h"

static int usage(FILE *f) {
  fprintf(f, "usage: clbound bench whole-step [--json] [--reps N] [--batch STEPS] [--workload xla-mlp|wide-mlp]\n"
             "  one training step: whole-step (fused), eager (op by op) and replayed, per-step median\n");
  return clb_arg_usage_rc(f);
}

int clb_bench_whole_step(int argc, char **argv) {
  if (clb_arg_help(argc, argv)) return usage(stdout);
  int json = 0, reps = 9, batch = 20, only = -1;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
    else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) batch = atoi(argv[++i]);
    else if (strcmp(argv[i], "--workload") == 0 && i + 1 < argc) {
      const char *name = argv[++i];
      for (int w = 0; w < DEMO_WORKLOAD_COUNT; w++)
        if (strcmp(name, demo_workload_name((demo_workload)w)) == 0) only = w;
      if (only < 0) {
        fprintf(stderr, "clbound bench whole-step: unknown workload '%s' (xla-mlp, wide-mlp)\n", name);
        return 2;
      }
    } else {
      return usage(stderr);
    }
  }
  if (reps < 1) reps = 1;
  if (batch < 1) batch = 1;
  if (!json)
    printf("training step under the dynamic plan (xla-mlp; wide-mlp at 256 rows): %d steps enqueued, one sync,\n"
           "median per step of %d reps; eager = the same plan op by op (CLBOUND_FUSE=off); replay = the\n"
           "whole-step path recorded once and replayed (CLBOUND_RECORD=on, a second context), interleaved\n"
           "%-9s %10s %14s %8s %15s %13s %9s\n",
           batch, reps, "workload", "step_ms", "eager_step_ms", "ratio", "replay_step_ms", "step/replay", "replayed");
  for (int w = 0; w < DEMO_WORKLOAD_COUNT; w++) {
    if (only >= 0 && w != only) continue;
    demo_step_times t;
    char err[1024];
    if (demo_time_whole_step((demo_workload)w, reps, batch, &t, err, sizeof err) != 0) {
      fprintf(stderr, "clbound bench whole-step: %s: %s\n", demo_workload_name((demo_workload)w), err);
      return 1;
    }
    /* a run that could not record (e.g. host-BLAS matmuls) enqueued its steps:
     * its time is not a replay's */
    if (json) {
      printf("{\"bench\":\"whole-step\",\"workload\":\"%s\",\"step_ms\":%.4f,\"eager_step_ms\":%.4f,\"eager_over_step\":%.3f,",
             demo_workload_name((demo_workload)w), t.step_ms, t.eager_step_ms, t.eager_step_ms / t.step_ms);
      if (t.steps_replayed)
        printf("\"replay_step_ms\":%.4f,\"step_over_replay\":%.3f,", t.replay_step_ms, t.step_ms / t.replay_step_ms);
      else
        printf("\"replay_step_ms\":null,\"step_over_replay\":null,");
      printf("\"steps_replayed\":%llu,\"steps_recorded\":%llu,\"reps\":%d,\"batch\":%d}\n",
             (unsigned long long)t.steps_replayed, (unsigned long long)t.steps_recorded, reps, batch);
    } else if (t.steps_replayed) {
      printf("%-9s %10.4f %14.4f %8.3f %15.4f %13.3f %9llu\n", demo_workload_name((demo_workload)w), t.step_ms, t.eager_step_ms,
             t.eager_step_ms / t.step_ms, t.replay_step_ms, t.step_ms / t.replay_step_ms, (unsigned long long)t.steps_replayed);
    } else {
      printf("%-9s %10.4f %14.4f %8.3f %15s %13s %9d  (not recorded: CLBOUND_LOG=record says why)\n",
             demo_workload_name((demo_workload)w), t.step_ms, t.eager_step_ms, t.eager_step_ms / t.step_ms, "-", "-", 0);
    }
    fflush(stdout);
  }
  return 0;
}
