/* cmd-dist.c: `clbound demo --data-parallel` (run it under mpirun): both
 * workloads trained data-parallel over MPI (clbound/dist.h), each rank on its
 * own device where there are several, each drawing its own masks; prints the
 * all-reduce's measured latency and bandwidth, per-step and per-rank counts,
 * step times and the time spent in the all-reduce. The program clbound-dist,
 * built only with MPI, so that the clbound command needs no MPI library. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/args.h"
#include "bench/timing.h"
#include "bench/workloads.h"
#include "clbound/dist.h"
#include "commands.h"

#define CMD "clbound demo --data-parallel"

static int dist_usage(FILE *f) {
  fprintf(f, "usage: mpirun -np N clbound demo --data-parallel [--workload xla-mlp|wide-mlp|all]\n"
             "       [--iterations N] [--rows R] [--quiet]\n"
             "  (or mpirun -np N clbound-dist [options]: the program it runs)\n"
             "  --rows R: every rank trains on R rows a step (default: each draws its own count)\n");
  return clb_arg_usage_rc(f);
}

/* The median time of an MPI_Allreduce of n doubles over `reps` repetitions
 * (the slowest rank's, so that every rank prints the same). */
static double allreduce_ms(int64_t n, int reps) {
  double *buf = calloc((size_t)(n > 0 ? n : 1), sizeof *buf), *t = malloc((size_t)reps * sizeof *t);
  if (!buf || !t) {
    free(buf), free(t);
    return -1;
  }
  MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* warm-up */
  for (int r = 0; r < reps; r++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = clb_tool_now_ms();
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    t[r] = clb_tool_now_ms() - t0;
  }
  double m = clb_tool_median(t, reps), worst;
  MPI_Allreduce(&m, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  free(buf), free(t);
  return worst;
}

typedef struct rank_row { double count, step_ms, allreduce_ms, exposed_ms, syncs; } rank_row;

static int train(demo_workload w, int iterations, int64_t rows, int quiet, int rank, int size, clb_context_t ctx) {
  char err[512];
  demo_model *m = NULL;
  if (demo_model_new(ctx, w, CLB_POLICY_DYNAMIC, -1, &m, err, sizeof err) != 0) {
    fprintf(stderr, CMD ": rank %d: %s\n", rank, err);
    return 1;
  }
  clb_dist_t d = NULL;
  clb_status st = clb_dist_new(ctx, demo_model_graph(m), MPI_COMM_WORLD, &d);
  if (st != CLB_OK) {
    fprintf(stderr, CMD ": rank %d: clb_dist_new: %s: %s\n", rank, clb_status_name(st), clb_last_errmsg());
    demo_model_free(m);
    return 1;
  }
  clb_dist_stats s = {.struct_size = sizeof s};
  const int64_t len = demo_mask_len(w);
  uint8_t *masks = malloc((size_t)(len * size));
  int64_t *counts = malloc((size_t)size * sizeof *counts);
  rank_row *all = malloc((size_t)size * sizeof *all);
  double *step = malloc((size_t)iterations * sizeof *step), *ar = malloc((size_t)iterations * sizeof *ar),
         *ex = malloc((size_t)iterations * sizeof *ex), *slow = malloc((size_t)iterations * sizeof *slow);
  int rc = !(masks && counts && all && step && ar && ex && slow);
  if (rc) fprintf(stderr, CMD ": rank %d: out of host memory\n", rank);
  clb_dist_stats_get(d, &s);
  if (!rc && rank == 0)
    printf("%s: %d steps (the first %s), %llu gradient bytes all-reduced per step (float64)\n", demo_workload_name(w),
           iterations, "compiles the plan and is not in the medians", (unsigned long long)s.grad_bytes);
  int64_t mine = 0, global = 0;
  for (int i = 0; !rc && i < iterations; i++) {
    demo_rank_masks(w, i, size, rows, masks, counts); /* every rank draws all, keeps its own */
    st = demo_model_feed_mask(m, masks + (int64_t)rank * len);
    st = st == CLB_OK ? clb_dist_step(d) : clb_dist_step_failed(d, st);
    if (st != CLB_OK) {
      fprintf(stderr, CMD ": rank %d: step %d: %s: %s\n", rank, i, clb_status_name(st), clb_dist_errmsg(d));
      rc = 1;
      break;
    }
    clb_dist_stats_get(d, &s);
    mine += s.local_count;
    global += s.global_count;
    rank_row r = {(double)s.local_count, 1e3 * s.step_s, 1e3 * s.allreduce_s, 1e3 * s.exposed_s, (double)s.host_syncs};
    step[i] = r.step_ms, ar[i] = r.allreduce_ms, ex[i] = r.exposed_ms;
    MPI_Gather(&r, 5, MPI_DOUBLE, all, 5, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      slow[i] = 0;
      for (int k = 0; k < size; k++) slow[i] = all[k].step_ms > slow[i] ? all[k].step_ms : slow[i];
    }
    if (rank == 0 && !quiet && (i < 4 || i == iterations - 1)) {
      printf("  step %3d: counts [", i);
      for (int k = 0; k < size; k++) printf("%s%lld", k ? ", " : "", (long long)all[k].count);
      printf("] global %lld, step %.2f ms, all-reduce %.2f ms (rank 0)\n", (long long)s.global_count, r.step_ms,
             r.allreduce_ms);
    }
  }
  if (!rc && iterations > 1) {
    /* medians without the first step (it builds the plan's program) */
    rank_row r = {(double)mine, clb_tool_median(step + 1, iterations - 1), clb_tool_median(ar + 1, iterations - 1),
                  clb_tool_median(ex + 1, iterations - 1), (double)s.host_syncs};
    MPI_Gather(&r, 5, MPI_DOUBLE, all, 5, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      for (int k = 0; k < size; k++)
        printf("  rank %d: %lld samples, median step %.2f ms, in MPI %.2f ms (%.0f%%), exposed after its last "
               "gradient %.2f ms, %.0f host sync per step\n",
               k, (long long)all[k].count, all[k].step_ms, all[k].allreduce_ms,
               100.0 * all[k].allreduce_ms / all[k].step_ms, all[k].exposed_ms, all[k].syncs);
      double med = clb_tool_median(slow + 1, iterations - 1);
      printf("  global: %lld samples in %d steps; median step (slowest rank) %.2f ms, %.0f samples/s\n",
             (long long)global, iterations, med, (double)global / iterations / (med * 1e-3));
    }
  }
  free(masks), free(counts), free(all), free(step), free(ar), free(ex), free(slow);
  clb_dist_free(d);
  demo_model_free(m);
  return rc;
}

int clb_cmd_dist_demo(int argc, char **argv) {
  int iterations = 50, quiet = 0, rows = 0, wl_all = 1;
  demo_workload wl = DEMO_XLA_MLP;
  if (clb_arg_help(argc, argv)) return dist_usage(stdout);
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v;
    if (strcmp(a, "--data-parallel") == 0) continue;
    if (strcmp(a, "--workload") == 0) {
      if (!(v = clb_arg_value(CMD, argc, argv, &i))) return 2;
      if (strcmp(v, "all") == 0) wl_all = 1;
      else if (strcmp(v, "xla-mlp") == 0) wl = DEMO_XLA_MLP, wl_all = 0;
      else if (strcmp(v, "wide-mlp") == 0) wl = DEMO_WIDE_MLP, wl_all = 0;
      else return dist_usage(stderr);
    } else if (strcmp(a, "--iterations") == 0) {
      if (!(v = clb_arg_value(CMD, argc, argv, &i)) || clb_arg_int(CMD, "--iterations", v, 1, 100000, &iterations)) return 2;
    } else if (strcmp(a, "--rows") == 0) {
      if (!(v = clb_arg_value(CMD, argc, argv, &i)) || clb_arg_int(CMD, "--rows", v, 1, 4096, &rows)) return 2;
    } else if (strcmp(a, "--quiet") == 0) {
      quiet = 1;
    } else {
      fprintf(stderr, CMD ": unknown option \"%s\"\n", a);
      return dist_usage(stderr);
    }
  }
  MPI_Init(NULL, NULL);
  int rank, size, ndev = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* a device per rank where there are several, unless CLBOUND_DEVICE names one */
  clb_context_options o;
  clb_context_options_init(&o);
  char dev[16];
  const char *env = clb_env_text("CLBOUND_DEVICE");
  if (!(env && *env) && clb_device_count(&ndev) == CLB_OK && ndev > 1) {
    snprintf(dev, sizeof dev, "%d", rank % ndev);
    o.device = dev;
  }
  clb_context_t ctx = NULL;
  clb_status st = clb_context_new(&o, &ctx);
  int ok = st == CLB_OK, all_ok;
  if (!ok) fprintf(stderr, CMD ": rank %d: %s: %s\n", rank, clb_status_name(st), clb_last_errmsg());
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  int rc = 1;
  if (all_ok) {
    if (rank == 0) {
      int mpi_len = 0;
      char mpi_ver[MPI_MAX_LIBRARY_VERSION_STRING];
      MPI_Get_library_version(mpi_ver, &mpi_len);
      mpi_ver[strcspn(mpi_ver, ",\n")] = 0; /* "Open MPI v4.1.4" */
      printf(CMD ": %d rank%s (%s), %s\n", size, size == 1 ? "" : "s", mpi_ver,
             ndev > 1 && !(env && *env) ? "rank r on device r mod devices" : "every rank on the default device");
    }
    /* the all-reduce alone: latency (one double) and wide-mlp's gradient bytes */
    const int64_t wide_params = 256 * 512 + 512 + 512 * 256 + 256 + 256 + 1;
    double lat = allreduce_ms(1, 50), big = allreduce_ms(wide_params, 20);
    if (rank == 0 && size == 1)
      printf("all-reduce alone: one rank, nothing to exchange (%.3f ms for wide-mlp's gradients: a local copy)\n", big);
    else if (rank == 0)
      printf("all-reduce alone (median, slowest rank): 8 B in %.3f ms; %lld float64 (wide-mlp's gradients, %.2f MB) in "
             "%.3f ms: %.2f GB/s past the latency\n",
             lat, (long long)wide_params, wide_params * 8e-6, big, wide_params * 8e-6 / (big - lat > 1e-6 ? big - lat : 1e-6));
    rc = 0;
    for (int w = 0; w < DEMO_WORKLOAD_COUNT && !rc; w++)
      if (wl_all || (demo_workload)w == wl) rc = train((demo_workload)w, iterations, rows, quiet, rank, size, ctx);
  }
  clb_context_free(ctx);
  int any;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}

/* clbound-dist: `clbound demo --data-parallel` runs this program with its
 * arguments (tools/clbound.c); it can also be run by itself under mpirun. */
int main(int argc, char **argv) { return clb_cmd_dist_demo(argc - 1, argv + 1); }
