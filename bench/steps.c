/* steps.c: `clbound bench steps`: one wide-mlp training step per policy against
 * actual batch size. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/args.h"
#include "bench/bench.h"
#include "bench/blas-ref.h"
#include "bench/progress.h"
#include "bench/workloads.h"

#define CMD "clbound bench steps"

/* `clbound bench steps`: the time of one wide-mlp training step (forward,
 * backward, SGD) at actual batch size n, under a plan that bounds n (dynamic),
 * a plan built for exactly n (static) and a plan for n's power-of-two bucket. */
static int usage(FILE *f) {
  fprintf(f, "usage: clbound bench steps [--json] [--quiet] [--reps 1..1000] [--sizes n1,n2,... (1..4096, up to 16)]\n");
  return clb_arg_usage_rc(f);
}

int clb_bench_steps(int argc, char **argv) {
  if (clb_arg_help(argc, argv)) return usage(stdout);
  int json = 0, reps = 7, quiet = 0;
  int64_t sizes[16] = {256, 1024, 4096};
  int nsizes = 3;
  for (int i = 0; i < argc; i++) {
    const char *v;
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--quiet") == 0) quiet = 1;
    else if (strcmp(argv[i], "--reps") == 0) {
      if (!(v = clb_arg_value(CMD, argc, argv, &i)) || clb_arg_int(CMD, "--reps", v, 1, 1000, &reps)) return 2;
    } else if (strcmp(argv[i], "--sizes") == 0) {
      if (!(v = clb_arg_value(CMD, argc, argv, &i)) || clb_arg_i64_list(CMD, "--sizes", v, 1, 4096, sizes, 16, &nsizes))
        return 2;
    } else {
      return usage(stderr);
    }
  }
  clb_progress_mode pm = clb_progress_mode_for(quiet);
  if (!json)
    printf("wide-mlp training step (256-512-256-1, forward + backward + SGD), median of %d steps, ms\n"
           "static: a plan built for exactly n (the device's GEMM strategy, AUTO; static-dev: the same\n"
           "with clbound's GEMM kernel); dynamic: the one plan bounded by 4096; bucketed: the plan of\n"
           "n's power-of-two bucket; floor: the sum of the step's GEMMs as direct CBLAS calls on host\n"
           "memory, same run (0: no OpenBLAS in this build)\n"
           "%6s %10s %11s %10s %10s %16s %20s %17s %9s %14s\n", reps, "n", "static", "static-dev", "dynamic", "bucketed",
           "dynamic/static", "dynamic/static-dev", "bucketed/static", "floor", "dynamic/floor");
  static const clb_policy_kind pols[4] = {CLB_POLICY_STATIC, CLB_POLICY_STATIC, CLB_POLICY_DYNAMIC, CLB_POLICY_BUCKETED};
  static const clb_gemm_strategy gemms[4] = {CLB_GEMM_AUTO, CLB_GEMM_DEVICE, CLB_GEMM_AUTO, CLB_GEMM_AUTO};
  for (int s = 0; s < nsizes; s++) {
    double ms[4];
    char label[64];
    snprintf(label, sizeof label, "bench steps n=%lld, 4 plans", (long long)sizes[s]);
    clb_progress *pr = clb_progress_begin(pm, label, 4);
    for (int p = 0; p < 4; p++) {
      char err[1024];
      if (demo_time_step(pols[p], gemms[p], sizes[s], reps, &ms[p], err, sizeof err) != 0) {
        clb_progress_end(pr);
        fprintf(stderr, "clbound bench steps: n = %lld under %s: %s\n", (long long)sizes[s], demo_policy_name(pols[p]), err);
        return 1;
      }
      clb_progress_update(pr, p + 1, -1);
    }
    clb_progress_end(pr);
    double floor_ms = bench_mlp_gemm_floor_ms(sizes[s], reps), over = floor_ms > 0 ? ms[2] / floor_ms : 0;
    if (floor_ms < 0) floor_ms = 0;
    if (json)
      printf("{\"bench\":\"steps\",\"workload\":\"wide-mlp\",\"n\":%lld,\"static_ms\":%.4f,\"static_device_gemm_ms\":%.4f,"
             "\"dynamic_ms\":%.4f,\"bucketed_ms\":%.4f,\"dynamic_over_static\":%.4f,\"dynamic_over_static_device_gemm\":%.4f,"
             "\"bucketed_over_static\":%.4f,\"gemm_floor_ms\":%.4f,\"dynamic_over_floor\":%.4f,\"reps\":%d}\n",
             (long long)sizes[s], ms[0], ms[1], ms[2], ms[3], ms[2] / ms[0], ms[2] / ms[1], ms[3] / ms[0], floor_ms, over,
             reps);
    else
      printf("%6lld %10.3f %11.3f %10.3f %10.3f %16.3f %20.3f %17.3f %9.3f %14.3f\n", (long long)sizes[s], ms[0], ms[1],
             ms[2], ms[3], ms[2] / ms[0], ms[2] / ms[1], ms[3] / ms[0], floor_ms, over);
    fflush(stdout);
  }
  return 0;
}
