/* cmd-demo.c: `clbound demo`: MLP training on dynamically sized batches under
 * each specialization policy, in a table like PyTorch/XLA's metrics report (the
 * workloads live in bench/workloads.c, shared with the benchmarks). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/workloads.h"
#include "commands.h"

#define LOSS_TOLERANCE 1e-4

static int parse_policy(const char *s, clb_policy_kind *out) {
  for (int p = CLB_POLICY_STATIC; p <= CLB_POLICY_BUCKETED; p++)
    if (strcmp(s, demo_policy_name((clb_policy_kind)p)) == 0) {
      *out = (clb_policy_kind)p;
      return 0;
    }
  return 1;
}

static int demo_usage(void) {
  fprintf(stderr, "usage: clbound demo [--workload xla-mlp|wide-mlp|all|chain] [--policy static|automatic|dynamic|bucketed|all]\n"
                  "                    [--iterations N] [--lr X] [--json] [--no-check]\n");
  return 2;
}

/* The first-iteration time of a run that built its programs from source, kept in
 * the cache folder so that a warm run can say how much sooner it started. */
static void cold_file(char *buf, size_t len, const char *workload, const char *policy) {
  char dir[1024];
  buf[0] = 0;
  if (clb_cache_default_dir(dir, sizeof dir) != CLB_OK || !dir[0]) return;
  snprintf(buf, len, "%s/demo-first-iteration-%s-%s.txt", dir, workload, policy);
}

static void first_iteration_note(const demo_result *r, const char *workload, const char *policy, int json, char *note,
                                 size_t len) {
  char path[1200];
  note[0] = 0;
  cold_file(path, sizeof path, workload, policy);
  if (!path[0] || r->first_iteration_s < 0) return;
  if (r->program_builds > 0) {
    FILE *f = fopen(path, "w");
    if (f) {
      fprintf(f, "%.6f\n", r->first_iteration_s);
      fclose(f);
    }
    snprintf(note, len, "first step done %.3f s after start (%llu programs built from source)", r->first_iteration_s,
             (unsigned long long)r->program_builds);
    return;
  }
  double cold = -1;
  FILE *f = fopen(path, "r");
  if (f) {
    if (fscanf(f, "%lf", &cold) != 1) cold = -1;
    fclose(f);
  }
  if (cold > 0)
    snprintf(note, len, "first step done %.3f s after start, %.3f s sooner than the cold run (%.3f s): all %llu programs from the disk cache",
             r->first_iteration_s, cold - r->first_iteration_s, cold, (unsigned long long)r->cache_hits_disk);
  else
    snprintf(note, len, "first step done %.3f s after start: all programs from the disk cache", r->first_iteration_s);
  (void)json;
}

static void print_json(const demo_config *c, const demo_result *r, double lr, const char *note) {
  printf("{\"workload\":\"%s\",\"policy\":\"%s\",\"iterations\":%d,\"lr\":%g,\"seconds\":%.4f,\"first_iteration_s\":%.4f,"
         "\"program_builds\":%llu,\"cache_hits\":%llu,\"cache_hits_memory\":%llu,\"cache_hits_disk\":%llu,"
         "\"plans_compiled\":%llu,\"recompiles\":%llu,\"host_syncs\":%llu,\"builds_after_first\":%llu,"
         "\"kernel_launches\":%llu,\"kernels_compiled\":%llu,\"programs_built\":%llu,\"launches_per_step\":%llu,"
         "\"steps_replayed\":%llu,\"peak_device_bytes\":%llu,\"arena_bytes\":%llu,\"live_lower_bound_bytes\":%llu,"
         "\"pool_peak_bytes\":%llu,\"arena_max_bytes\":%llu,\"arena_allocations\":%llu,\"final_loss\":%.9g,\"max_loss_error\":%.3g,\"note\":\"%s\",\"losses\":[",
         demo_workload_name(c->workload), demo_policy_name(c->policy), c->iterations, lr, r->seconds, r->first_iteration_s,
         (unsigned long long)r->program_builds, (unsigned long long)(r->cache_hits_memory + r->cache_hits_disk),
         (unsigned long long)r->cache_hits_memory, (unsigned long long)r->cache_hits_disk,
         (unsigned long long)r->plans_compiled, (unsigned long long)r->recompiles, (unsigned long long)r->host_syncs,
         (unsigned long long)r->builds_after_first, (unsigned long long)r->kernel_launches,
         (unsigned long long)r->kernels_compiled, (unsigned long long)r->programs_built,
         (unsigned long long)r->launches_per_step, (unsigned long long)r->steps_replayed,
         (unsigned long long)r->peak_device_bytes, (unsigned long long)r->arena_bytes,
         (unsigned long long)r->live_lower_bound_bytes, (unsigned long long)r->pool_peak_bytes,
         (unsigned long long)r->arena_max_bytes, (unsigned long long)r->arena_allocations, r->final_loss,
         r->max_loss_error, note);
  for (int i = 0; i < c->iterations; i++) printf("%s%.9g", i ? "," : "", r->losses[i]);
  printf("]}\n");
  fflush(stdout);
}

int clb_cmd_demo(int argc, char **argv) {
  int iterations = 100, json = 0, check = 1, wl_all = 1, pol_all = 1;
  double lr = -1;
  demo_workload wl = DEMO_XLA_MLP;
  clb_policy_kind pol = CLB_POLICY_DYNAMIC;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--workload") == 0 && i + 1 < argc) {
      const char *v = argv[++i];
      if (strcmp(v, "chain") == 0) return clb_cmd_demo_chain(argc - i - 1, argv + i + 1);
      if (strcmp(v, "all") == 0) wl_all = 1;
      else if (strcmp(v, "xla-mlp") == 0) wl = DEMO_XLA_MLP, wl_all = 0;
      else if (strcmp(v, "wide-mlp") == 0) wl = DEMO_WIDE_MLP, wl_all = 0;
      else return demo_usage();
    } else if (strcmp(a, "--policy") == 0 && i + 1 < argc) {
      const char *v = argv[++i];
      if (strcmp(v, "all") == 0) pol_all = 1;
      else if (parse_policy(v, &pol) == 0) pol_all = 0;
      else return demo_usage();
    } else if (strcmp(a, "--iterations") == 0 && i + 1 < argc) {
      iterations = atoi(argv[++i]);
    } else if (strcmp(a, "--lr") == 0 && i + 1 < argc) {
      lr = atof(argv[++i]);
      if (!(lr >= 0)) return demo_usage();
    } else if (strcmp(a, "--json") == 0) {
      json = 1;
    } else if (strcmp(a, "--no-check") == 0) {
      check = 0;
    } else {
      fprintf(stderr, "clbound demo: unknown option %s\n", a);
      return demo_usage();
    }
  }
  if (iterations < 1 || iterations > 1000000) return demo_usage();
  /* dynamic first: in-process runs share the disk cache, and the baseline
   * (static) should not be the one that pays for everyone's programs */
  static const clb_policy_kind order[] = {CLB_POLICY_DYNAMIC, CLB_POLICY_AUTOMATIC, CLB_POLICY_BUCKETED, CLB_POLICY_STATIC};
  int progress = !json && isatty(2);
  int rc = 0;
  for (int w = 0; w < DEMO_WORKLOAD_COUNT; w++) {
    if (!wl_all && w != (int)wl) continue;
    double wlr = lr >= 0 ? lr : demo_default_lr((demo_workload)w);
    double *ref = NULL;
    if (check) {
      ref = malloc(sizeof(double) * (size_t)iterations);
      if (progress) fprintf(stderr, "  %s: double-precision host reference...", demo_workload_name((demo_workload)w));
      if (!ref || demo_reference((demo_workload)w, iterations, wlr, ref) != 0) {
        fprintf(stderr, "clbound demo: the host reference ran out of memory\n");
        free(ref);
        return 1;
      }
      if (progress) fprintf(stderr, "\r%60s\r", "");
    }
    if (!json) {
      printf("%s: %s; %d iterations, lr %g, batch size known only on the device\n", demo_workload_name((demo_workload)w),
             w == DEMO_XLA_MLP ? "Linear(2,10) ReLU Linear(10,1) Sigmoid, BCE, SGD; X = nonzero(x), labels = nonzero(y) mod 2, k in 1..10"
                               : "MLP 256-512-256-1 (ReLU, sigmoid), BCE, SGD; rows = masked_select of a 4096x256 table, n in 64..4096",
             iterations, wlr);
      printf("  %-9s %8s %7s %10s %6s %10s %10s %12s %13s\n", "policy", "seconds", "builds", "cache hits", "plans", "recompiles",
             "host syncs", "final loss", "max loss err");
    }
    double secs[4] = {-1, -1, -1, -1};
    char notes[4][400];
    for (int k = 0; k < 4; k++) {
      clb_policy_kind p = order[k];
      notes[p][0] = 0;
      if (!pol_all && p != pol) continue;
      demo_config cfg = {(demo_workload)w, p, iterations, wlr, progress, check};
      demo_result r;
      char err[1024];
      if (demo_run(&cfg, &r, err, sizeof err) != 0) {
        fprintf(stderr, "clbound demo: %s under %s: %s\n", demo_workload_name((demo_workload)w), demo_policy_name(p), err);
        demo_result_free(&r);
        rc = 1;
        continue;
      }
      if (ref) {
        double worst = 0;
        for (int i = 0; i < iterations; i++) {
          double d = fabs((double)r.losses[i] - ref[i]) / fmax(fabs(ref[i]), 1e-6);
          if (!(d <= worst)) worst = d; /* NaN counts as the worst */
        }
        r.max_loss_error = worst;
      }
      secs[p] = r.seconds;
      first_iteration_note(&r, demo_workload_name((demo_workload)w), demo_policy_name(p), json, notes[p], sizeof notes[p]);
      if (json) {
        print_json(&cfg, &r, wlr, notes[p]);
      } else {
        char err_s[32];
        if (r.max_loss_error >= 0) snprintf(err_s, sizeof err_s, "%.2e", r.max_loss_error);
        else snprintf(err_s, sizeof err_s, "-");
        printf("  %-9s %8.2f %7llu %10llu %6llu %10llu %10llu %12.6f %13s\n", demo_policy_name(p), r.seconds,
               (unsigned long long)r.program_builds, (unsigned long long)(r.cache_hits_memory + r.cache_hits_disk),
               (unsigned long long)r.plans_compiled, (unsigned long long)r.recompiles, (unsigned long long)r.host_syncs,
               r.final_loss, err_s);
        fflush(stdout);
      }
      /* the promises of the policies */
      const char *broken = NULL;
      if (r.max_loss_error > LOSS_TOLERANCE || r.max_loss_error != r.max_loss_error) broken = "the losses differ from the reference by more than 1e-4 relative";
      else if (p == CLB_POLICY_DYNAMIC && (r.plans_compiled != 1 || r.host_syncs != 0 || r.builds_after_first != 0))
        broken = "dynamic must compile one plan and build nothing and sync nothing after the first iteration";
      else if (p == CLB_POLICY_AUTOMATIC && r.plans_compiled > 2) broken = "automatic compiled more than two plans";
      if (broken) {
        fprintf(stderr, "clbound demo: %s under %s: %s\n", demo_workload_name((demo_workload)w), demo_policy_name(p), broken);
        rc = 1;
      }
      demo_result_free(&r);
    }
    if (!json) {
      for (int k = 0; k < 4; k++)
        if (notes[order[k]][0]) printf("  %-9s %s\n", demo_policy_name(order[k]), notes[order[k]]);
      if (secs[CLB_POLICY_DYNAMIC] > 0 && secs[CLB_POLICY_STATIC] > 0)
        printf("  dynamic is %.1fx faster end to end than static (a plan and programs per batch size)\n",
               secs[CLB_POLICY_STATIC] / secs[CLB_POLICY_DYNAMIC]);
      printf("\n");
    }
    free(ref);
  }
  return rc;
}
