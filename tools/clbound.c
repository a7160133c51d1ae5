/* clbound.c: the clbound command: info, usage, and dispatch to the subcommands
 * (tools/cmd-*.c) and the benchmarks (bench/). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clbound/clbound.h"
#include "bench/bench.h"
#include "commands.h"

static int usage(FILE *f) {
  fprintf(f,
          "usage: clbound <command> [options]   (clbound <command> --help: its options)\n"
          "       clbound -h|--help|--version\n"
          "commands:\n"
          "  info             list OpenCL platforms and devices\n"
          "  demo [--full] [--workload xla-mlp|wide-mlp|all|chain] [--policy P|all]\n"
          "       [--iterations N] [--lr X] [--cache cold|warm|user] [--json] [--no-check] [--quiet]\n"
          "                   MLP training on batches sized on the device: dynamic against\n"
          "                   static in about a minute, from the same program cache (--cache,\n"
          "                   default cold); --full: every policy, 100 steps\n"
          "  demo --data-parallel [--workload W] [--iterations N] [--rows R]\n"
          "                   under mpirun: both workloads trained data-parallel over MPI\n"
          "                   (docs/scale-out.md; runs clbound-dist, built only with MPI)\n"
          "  bench ops [--json] [--quick] [--quiet]\n"
          "                   data-dependent ops against a copy kernel over the same bytes\n"
          "  bench gemm [--json] [--quick] [--quiet] [--sweep]\n"
          "                   an MLP's matmuls with a bounded batch: host BLAS, clbound's kernel\n"
          "                   and CLBlast against a direct BLAS call (--sweep: every strategy\n"
          "                   against CLBlast at M = 64..4096)\n"
          "  bench steps [--json] [--quiet] [--reps N] [--sizes n1,n2]\n"
          "                   a wide-mlp training step per policy against batch size\n"
          "  bench whole-step [--json] [--reps N] [--batch STEPS] [--workload W]\n"
          "                   one training step fused (whole step), op by op and replayed\n"
          "  shapes FILE [--buckets N]\n"
          "                   dynamicity report of a CLBOUND_SHAPE_LOG or a CSV of shapes\n"
          "  cache info|clear [DIR]\n"
          "                   the persistent program cache (CLBOUND_CACHE_DIR): what it holds; empty it\n"
          "  cache warm [--workload W] [--policy P]\n"
          "                   build and store the demo plans' programs in it ahead of a run\n"
          "  tune [--platform P] [--device D] [--budget SECONDS] [--size N] [--no-f64] [--quiet]\n"
          "                   run CLBlast's GEMM tuners (clblast-utils) on one device within\n"
          "                   SECONDS (default 300); contexts apply the stored parameters\n"
          "  version          print the library version (also: clbound --version)\n"
          "long commands show progress on stderr (a live line on a terminal); --quiet: none\n"
          "environment: CLBOUND_PLATFORM, CLBOUND_DEVICE (index or name substring),\n"
          "  CLBOUND_CACHE_DIR, CLBOUND_LOG=recompiles,syncs,builds,cache,gemm,record, CLBOUND_METRICS_FILE,\n"
          "  CLBOUND_SHAPE_LOG, CLBOUND_GEMM=auto|host-blas|kernel|clblast-bound|sync-exact,\n"
          "  CLBOUND_BLAS_THREADS (OpenBLAS threads of host BLAS in the queue),\n"
          "  CLBOUND_CLBLAST_TUNING=off (CLBlast's own parameters, not the tuning file),\n"
          "  CLBOUND_RECORD=on|off|auto (graph steps recorded into a command buffer and replayed)\n");
  return f == stderr ? 2 : 0;
}

static void mib(char *buf, size_t len, uint64_t bytes) {
  snprintf(buf, len, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
}

/* Whether the device has a tuning file for CLBlast (`clbound tune`), and where. */
static void print_tuning(int index) {
  cl_device_id dev = clb_tool_device_id(index, NULL, NULL);
  char path[1200], why[400];
  if (!dev || clb_tuning_path(dev, NULL, path, sizeof path) != CLB_OK) {
    printf("    CLBlast tuning   unknown: the program cache is off (CLBOUND_CACHE_DIR), the file lives next to it\n");
    return;
  }
  clb_tuning_entry e[CLB_TUNING_MAX_ENTRIES];
  int n = 0;
  switch (clb_tuning_load(dev, path, e, CLB_TUNING_MAX_ENTRIES, &n, why, sizeof why)) {
  case CLB_TUNING_OK:
    printf("    CLBlast tuning   tuned: %d kernel(s) in %s\n", n, path);
    break;
  case CLB_TUNING_ABSENT:
    printf("    CLBlast tuning   not tuned (`clbound tune` writes %s)\n", path);
    break;
  case CLB_TUNING_OTHER_DEVICE:
    printf("    CLBlast tuning   not tuned: %s is ignored: %s\n", path, why);
    break;
  default:
    printf("    CLBlast tuning   not tuned: %s is damaged and ignored: %s\n", path, why);
  }
}

static int cmd_info(void) {
  int n = 0;
  clb_status st = clb_device_count(&n);
  if (st != CLB_OK) {
    fprintf(stderr, "clbound info: %s: %s\n", clb_status_str(st), clb_last_errmsg());
    return 1;
  }
  printf("clbound %s: %d OpenCL device%s\n", clb_version(), n, n == 1 ? "" : "s");
  for (int i = 0; i < n; i++) {
    clb_device_info di;
    di.struct_size = sizeof di;
    if (clb_device_info_get(i, &di) != CLB_OK) continue;
    char lm[32], gm[32], ma[32];
    mib(lm, sizeof lm, di.local_mem_bytes);
    mib(gm, sizeof gm, di.global_mem_bytes);
    mib(ma, sizeof ma, di.max_alloc_bytes);
    printf("[%d] %s (platform %d: %s)\n", i, di.name, di.platform_index, di.platform_name);
    printf("    type             %s\n", di.is_gpu ? "GPU" : di.is_cpu ? "CPU" : "other");
    printf("    vendor           %s\n", di.vendor);
    printf("    versions         %s; %s; driver %s\n", di.device_version, di.opencl_c_version, di.driver_version);
    printf("    compute units    %u\n", di.compute_units);
    printf("    max work-group   %zu\n", di.max_work_group_size);
    printf("    local memory     %s%s\n", lm, di.local_mem_emulated ? " (emulated in global memory)" : "");
    printf("    global memory    %s, largest buffer %s\n", gm, ma);
    printf("    fp64             %s\n", di.has_fp64 ? "yes" : "no");
    printf("    64-bit atomics   %s\n", di.has_int64_atomics ? "yes" : "no");
    printf("    kernel style     %s\n", di.is_cpu ? "cpu (contiguous chunks)" : "gpu (work-group scans)");
    print_tuning(i);
  }
  char blas[1024];
  clb_host_blas_describe(blas, sizeof blas, NULL);
  printf("host BLAS (matmuls on CPU devices with native kernels): %s\n", blas);
  return 0;
}

/* `clbound demo --data-parallel`: the MPI part is a program of its own,
 * clbound-dist, next to this one, so that nothing else here needs MPI. */
static int run_dist(int argc, char **argv) {
  char self[4096], path[4200];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash) *slash = 0;
    snprintf(path, sizeof path, "%s/clbound-dist", self);
    if (access(path, X_OK) == 0) {
      argv[0] = path;
      execv(path, argv);
      fprintf(stderr, "clbound demo --data-parallel: could not run %s: %s\n", path, strerror(errno));
      return 1;
    }
  }
  fprintf(stderr, "clbound demo --data-parallel: clbound-dist is not installed next to clbound: this clbound was built "
                  "without MPI (install Open MPI: scripts/setup.sh, then configure again)\n");
  return 2;
}

static int print_version(void) {
  printf("clbound %s\n", clb_version());
  return 0;
}

static int is_help(const char *a) { return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 || strcmp(a, "help") == 0; }

int main(int argc, char **argv) {
  if (argc < 2) return usage(stderr);
  if (is_help(argv[1])) return usage(stdout);
  if (strcmp(argv[1], "--version") == 0) return print_version();
  if (strcmp(argv[1], "info") == 0) {
    if (argc > 2 && is_help(argv[2])) {
      printf("usage: clbound info\n  the OpenCL platforms and devices, what clbound reads of each, and its CLBlast tuning\n");
      return 0;
    }
    return cmd_info();
  }
  if (strcmp(argv[1], "demo") == 0) {
    for (int i = 2; i < argc; i++)
      if (strcmp(argv[i], "--data-parallel") == 0) return run_dist(argc - 1, argv + 1);
    return clb_cmd_demo(argc - 2, argv + 2);
  }
  if (strcmp(argv[1], "bench") == 0) return clb_bench_main(argc - 2, argv + 2);
  if (strcmp(argv[1], "tune") == 0) return clb_cmd_tune(argc - 2, argv + 2);
  if (strcmp(argv[1], "cache") == 0) return clb_cmd_cache(argc - 2, argv + 2);
  if (strcmp(argv[1], "shapes") == 0) return clb_cmd_shapes(argc - 2, argv + 2);
  if (strcmp(argv[1], "version") == 0) {
    if (argc > 2 && is_help(argv[2])) {
      printf("usage: clbound version (or clbound --version)\n  the version of the clbound library it runs with\n");
      return 0;
    }
    return print_version();
  }
  fprintf(stderr, "clbound: unknown command \"%s\"\n", argv[1]);
  return usage(stderr);
}
