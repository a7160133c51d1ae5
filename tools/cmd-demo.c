/* cmd-demo.c: `clbound demo`: MLP training on dynamically sized batches under
 * the specialization policies, in a table like PyTorch/XLA's metrics report,
 * ending with what the run showed (the workloads live in bench/workloads.c,
 * shared with the benchmarks).
 *
 * By default: both workloads, dynamic against static, a few dozen steps whose
 * batch sizes cycle through the first DEMO_SHORT_SIZES sizes of each schedule,
 * so that a first run (every program built from source) stays near a minute on
 * a 2-core CPU. --full: all four policies, 100 steps over every batch size. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/args.h"
#include "bench/progress.h"
#include "bench/timing.h"
#include "bench/workloads.h"
#include "commands.h"

#define CMD "clbound demo"
#define DEMO_SHORT_SIZES 3
#define FULL_ITERATIONS 100
#define MAX_ITERATIONS 1000000

/* The steps and learning rate of the default run: enough for the loss to fall
 * visibly. wide-mlp takes larger steps than its default rate here, which over
 * a few dozen steps keeps to the reference as closely as the default does. */
static int short_iterations(demo_workload w) { return w == DEMO_XLA_MLP ? 32 : 32; }
static double short_lr(demo_workload w) { return w == DEMO_XLA_MLP ? demo_default_lr(w) : 0.5; }

/* How far a float32 training may drift from the float64 reference.
 *
 * The error of a step is |loss - ref| / max(|ref|, LOSS_FLOOR). Relative,
 * because a loss is a mean of per-row terms each rounded to eps_f32 relative;
 * but not below LOSS_FLOOR, because a float32 loss near 0 has an absolute error
 * of its own: -log(p) for p = sigmoid(z) close to 1 comes from a p that float32
 * stores only to within eps_f32 / 2 = 6e-8 of 1, so a loss of 1e-4 cannot be
 * computed to 1e-4 relative by any float32 kernel.
 *
 * The tolerance over n steps is max(1e-4, C eps_f32 sqrt(n)). Each SGD step
 * rounds every weight update by about eps_f32 relative, with no preferred sign,
 * so the float32 weights leave the float64 trajectory like a random walk, by
 * about eps_f32 sqrt(n), times how much the training dynamics amplify a
 * deviation (C). C = 30 is calibrated by measurement, with a factor 2 to spare:
 * the worst run measured (docs/benchmarks.md) is xla-mlp at lr 0.001 over
 * 30,000 steps, 3.1e-4 (= 15 eps_f32 sqrt(30000)), where the escape from the
 * 0.693 plateau magnifies small differences. The bound is 1e-4 up to 784 steps
 * and 6.2e-4 at 30,000. A wrong kernel misses by far more (> 1e-2). Not
 * covered: wide-mlp over thousands of steps, which once it has memorized its
 * table leaves the reference faster than rounding explains (1.5e-3 at 3,000
 * steps): such a run fails the check. */
#define LOSS_FLOOR 1e-2
static double loss_tolerance(int n) {
  const double eps_f32 = 1.1920928955078125e-7, C = 30.0;
  double t = C * eps_f32 * sqrt((double)n);
  return t > 1e-4 ? t : 1e-4;
}

static int parse_policy(const char *s, clb_policy_kind *out) {
  for (int p = CLB_POLICY_STATIC; p <= CLB_POLICY_BUCKETED; p++)
    if (strcmp(s, demo_policy_name((clb_policy_kind)p)) == 0) {
      *out = (clb_policy_kind)p;
      return 0;
    }
  return 1;
}

static int demo_usage(void) {
  fprintf(stderr,
          "usage: clbound demo [--full] [--workload xla-mlp|wide-mlp|all|chain]\n"
          "                    [--policy static|automatic|dynamic|bucketed|all] [--iterations N] [--lr X]\n"
          "                    [--json] [--no-check] [--quiet]\n"
          "  default: both workloads, dynamic against static, a short run over %d batch sizes\n"
          "  --full: every policy, %d steps over the whole batch-size schedule\n"
          "  --iterations N: 1..%d steps; --lr X: a finite learning rate in 0..1000\n"
          "  progress goes to stderr (a live line on a terminal); --quiet turns it off\n",
          DEMO_SHORT_SIZES, FULL_ITERATIONS, MAX_ITERATIONS);
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

static void first_iteration_note(const demo_result *r, const char *workload, const char *policy, char *note,
                                 size_t len) {
  char path[1200];
  note[0] = 0;
  cold_file(path, sizeof path, workload, policy);
  if (!path[0] || r->first_iteration_s < 0) return;
  /* the cache folder may hold anything under that name (a FIFO would block a
   * plain fopen): written by rename, read with the cache's hardened reader */
  if (r->program_builds > 0) {
    char text[64];
    int n = snprintf(text, sizeof text, "%.6f\n", r->first_iteration_s);
    if (n > 0 && (size_t)n < sizeof text) clb_file_write(path, text, (size_t)n);
    snprintf(note, len, "first step done %.3f s after start (%llu programs built from source)", r->first_iteration_s,
             (unsigned long long)r->program_builds);
    return;
  }
  double cold = -1;
  char text[64];
  if (clb_file_read(path, text, sizeof text, NULL) == CLB_OK) {
    char *end = NULL;
    cold = strtod(text, &end);
    if (end == text || !isfinite(cold)) cold = -1;
  }
  if (cold > 0)
    snprintf(note, len, "first step done %.3f s after start, %.3f s sooner than the cold run (%.3f s): all %llu programs from the disk cache",
             r->first_iteration_s, cold - r->first_iteration_s, cold, (unsigned long long)r->cache_hits_disk);
  else
    snprintf(note, len, "first step done %.3f s after start: all programs from the disk cache", r->first_iteration_s);
}

/* ---- JSON: one object per (workload, policy); every number finite or null --- */

static void json_num(const char *name, double v, const char *fmt) {
  printf(",\"%s\":", name);
  if (isfinite(v)) printf(fmt, v);
  else printf("null");
}
static void json_u64(const char *name, uint64_t v) { printf(",\"%s\":%llu", name, (unsigned long long)v); }

/* The mean loss of the first and of the last `window` steps. */
typedef struct loss_trend {
  int window;
  double start, end;
} loss_trend;

static loss_trend trend_of(const float *losses, int n, int sizes) {
  loss_trend t;
  t.window = sizes > 0 ? sizes : 10;
  if (t.window > n / 2) t.window = n / 2 > 0 ? n / 2 : 1;
  t.start = t.end = 0;
  for (int i = 0; i < t.window; i++) {
    t.start += losses[i];
    t.end += losses[n - t.window + i];
  }
  t.start /= t.window;
  t.end /= t.window;
  return t;
}

static void print_json(const demo_config *c, const demo_result *r, double lr, const loss_trend *tr, double tolerance,
                       const char *note) {
  printf("{\"workload\":\"%s\",\"policy\":\"%s\",\"iterations\":%d", demo_workload_name(c->workload),
         demo_policy_name(c->policy), c->iterations);
  json_num("lr", lr, "%g");
  json_num("seconds", r->seconds, "%.4f");
  json_num("first_iteration_s", r->first_iteration_s, "%.4f");
  json_u64("program_builds", r->program_builds);
  json_u64("cache_hits", r->cache_hits_memory + r->cache_hits_disk);
  json_u64("cache_hits_memory", r->cache_hits_memory);
  json_u64("cache_hits_disk", r->cache_hits_disk);
  json_u64("plans_compiled", r->plans_compiled);
  json_u64("recompiles", r->recompiles);
  json_u64("host_syncs", r->host_syncs);
  json_u64("builds_after_first", r->builds_after_first);
  json_u64("kernel_launches", r->kernel_launches);
  json_u64("kernels_compiled", r->kernels_compiled);
  json_u64("programs_built", r->programs_built);
  json_u64("launches_per_step", r->launches_per_step);
  json_u64("writes_per_step", r->writes_per_step);
  json_u64("steps_replayed", r->steps_replayed);
  json_u64("build_ms", r->build_ms);
  json_u64("first_launches", r->first_launches);
  json_u64("first_launch_ms", r->first_launch_ms);
  json_u64("first_launches_after_first", r->first_launches_after_first);
  json_u64("steps_recorded", r->steps_recorded);
  json_u64("peak_device_bytes", r->peak_device_bytes);
  json_u64("arena_bytes", r->arena_bytes);
  json_u64("live_lower_bound_bytes", r->live_lower_bound_bytes);
  json_u64("pool_peak_bytes", r->pool_peak_bytes);
  json_u64("arena_max_bytes", r->arena_max_bytes);
  json_u64("arena_allocations", r->arena_allocations);
  json_num("final_loss", r->final_loss, "%.9g");
  json_num("max_loss_error", r->max_loss_error, "%.3g");
  printf(",\"note\":\"%s\"", note);
  /* added fields */
  printf(",\"batch_sizes\":%d", c->sizes);
  json_num("loss_tolerance", tolerance, "%.3g");
  printf(",\"loss_window\":%d", tr->window);
  json_num("loss_start", tr->start, "%.9g");
  json_num("loss_end", tr->end, "%.9g");
  printf(",\"losses\":[");
  for (int i = 0; i < c->iterations; i++) {
    if (i) putchar(',');
    if (isfinite(r->losses[i])) printf("%.9g", r->losses[i]);
    else printf("null");
  }
  printf("]}\n");
  fflush(stdout);
}

/* ---- the text report ------------------------------------------------------- */

static void print_intro(int full) {
  if (full)
    printf("clbound demo --full: two MLPs train on batches whose size only the device knows, under each\n"
           "specialization policy, %d steps over every batch size of each workload's schedule.\n\n",
           FULL_ITERATIONS);
  else
    printf("clbound demo: two MLPs train on batches whose size only the device knows, under the\n"
           "dynamic policy (one plan, bounded by the largest batch, serves every size) and the static\n"
           "policy (a plan and its programs for each batch size, as a static-shape compiler does).\n"
           "Every loss is checked against a double-precision host reference of the same training.\n\n");
}

static void print_workload_intro(demo_workload w, int iterations, double lr, int sizes) {
  char sz[96] = "";
  if (sizes > 0) {
    int n = snprintf(sz, sizeof sz, "batch sizes ");
    for (int i = 0; i < sizes && n < (int)sizeof sz - 16; i++)
      n += snprintf(sz + n, sizeof sz - (size_t)n, "%s%lld", i ? ", " : "", (long long)demo_batch_size_in(w, i, sizes));
    snprintf(sz + n, sizeof sz - (size_t)n, " in turn");
  } else {
    snprintf(sz, sizeof sz, "%s", w == DEMO_XLA_MLP ? "batch sizes 1..10" : "batch sizes 64..4096");
  }
  if (w == DEMO_XLA_MLP)
    printf("xla-mlp mirrors PyTorch/XLA's dynamic-shape MLP test (test/ds/test_dynamic_shape_models.py,\n"
           "  test_backward_pass_with_dynamic_input): Linear(2,10) ReLU Linear(10,1) Sigmoid, BCE, SGD, weights\n"
           "  0.01, X = nonzero(x) [<=10, 2], labels = nonzero(y) mod 2. That test takes one step at lr 0.001,\n"
           "  where this model's loss stays at 0.693; here %d steps at lr %g, %s,\n"
           "  so that the loss visibly falls (--lr 0.001 for the test's setting).\n",
           iterations, lr, sz);
  else
    printf("wide-mlp: MLP 256-512-256-1 (ReLU, sigmoid), BCE, SGD; each batch is masked_select of a\n"
           "  4096x256 table with a new mask; %d steps at lr %g, %s.\n",
           iterations, lr, sz);
  printf("  %-9s %8s %7s %10s %6s %10s %10s %21s %12s\n", "policy", "seconds", "builds", "cache hits", "plans",
         "recompiles", "host syncs", "mean loss first->last", "max loss err");
  fflush(stdout); /* before the progress lines on stderr */
}

/* What the run measured, per policy, summed over the workloads. */
typedef struct policy_total {
  int ran;
  double seconds;
  uint64_t builds, syncs;
} policy_total;

static void print_summary(const policy_total *tot, int full) {
  const policy_total *d = &tot[CLB_POLICY_DYNAMIC], *s = &tot[CLB_POLICY_STATIC];
  static const clb_policy_kind order[] = {CLB_POLICY_DYNAMIC, CLB_POLICY_AUTOMATIC, CLB_POLICY_BUCKETED,
                                          CLB_POLICY_STATIC};
  char built[256] = "";
  int n = 0, first = 1;
  for (int k = 0; k < 4; k++) {
    const policy_total *t = &tot[order[k]];
    if (!t->ran) continue;
    n += snprintf(built + n, sizeof built - (size_t)n, "%s%s %llu", first ? "" : ", ", demo_policy_name(order[k]),
                  (unsigned long long)t->builds);
    first = 0;
  }
  if (first) return;
  printf("What this run shows:\n");
  printf("  Programs built from source, by policy: %s.\n", built);
  if (d->ran && s->ran && d->seconds > 0)
    printf("  Static took %.1fx as long as dynamic for the same steps (%.1f s against %.1f s): it builds a plan\n"
           "  and its programs for every batch size, dynamic one plan for all.\n",
           s->seconds / d->seconds, s->seconds, d->seconds);
  if (d->ran)
    printf("  Dynamic made %llu host syncs during training%s.\n", (unsigned long long)d->syncs,
           s->ran ? "; static had to read every batch size back to the host to pick its plan" : "");
  printf("Read more: README.md (the idea), docs/graph.md (the policies), docs/benchmarks.md (figures)%s.\n",
         full ? "" : ";\n  `clbound demo --full` runs all four policies for 100 steps over every batch size");
}

/* ---- the command ----------------------------------------------------------- */

int clb_cmd_demo(int argc, char **argv) {
  int iterations = 0, json = 0, check = 1, wl_all = 1, quiet = 0, full = 0;
  int pol_set = 0; /* 0: the default pair; 1: all; 2: one */
  double lr = -1;
  demo_workload wl = DEMO_XLA_MLP;
  clb_policy_kind pol = CLB_POLICY_DYNAMIC;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v;
    if (strcmp(a, "--workload") == 0) {
      if (!(v = clb_arg_value(CMD, argc, argv, &i))) return 2;
      if (strcmp(v, "chain") == 0) return clb_cmd_demo_chain(argc - i - 1, argv + i + 1);
      if (strcmp(v, "all") == 0) wl_all = 1;
      else if (strcmp(v, "xla-mlp") == 0) wl = DEMO_XLA_MLP, wl_all = 0;
      else if (strcmp(v, "wide-mlp") == 0) wl = DEMO_WIDE_MLP, wl_all = 0;
      else {
        fprintf(stderr, CMD ": --workload must be xla-mlp, wide-mlp, all or chain, not \"%s\"\n", v);
        return demo_usage();
      }
    } else if (strcmp(a, "--policy") == 0) {
      if (!(v = clb_arg_value(CMD, argc, argv, &i))) return 2;
      if (strcmp(v, "all") == 0) pol_set = 1;
      else if (parse_policy(v, &pol) == 0) pol_set = 2;
      else {
        fprintf(stderr, CMD ": --policy must be static, automatic, dynamic, bucketed or all, not \"%s\"\n", v);
        return demo_usage();
      }
    } else if (strcmp(a, "--iterations") == 0) {
      if (!(v = clb_arg_value(CMD, argc, argv, &i))) return 2;
      if (clb_arg_int(CMD, "--iterations", v, 1, MAX_ITERATIONS, &iterations)) return 2;
    } else if (strcmp(a, "--lr") == 0) {
      if (!(v = clb_arg_value(CMD, argc, argv, &i))) return 2;
      if (clb_arg_f64(CMD, "--lr", v, 0, 1000, &lr)) return 2;
    } else if (strcmp(a, "--json") == 0) {
      json = 1;
    } else if (strcmp(a, "--no-check") == 0) {
      check = 0;
    } else if (strcmp(a, "--quiet") == 0) {
      quiet = 1;
    } else if (strcmp(a, "--full") == 0) {
      full = 1;
    } else {
      fprintf(stderr, CMD ": unknown option %s\n", a);
      return demo_usage();
    }
  }
  if (full && pol_set == 0) pol_set = 1;
  const int sizes = full ? 0 : DEMO_SHORT_SIZES;
  /* dynamic first: in-process runs share the disk cache, and the baseline
   * (static) should not be the one that pays for everyone's programs */
  static const clb_policy_kind order[] = {CLB_POLICY_DYNAMIC, CLB_POLICY_AUTOMATIC, CLB_POLICY_BUCKETED, CLB_POLICY_STATIC};
  clb_progress_mode pm = clb_progress_mode_for(quiet);
  double t_start = clb_tool_now_ms();
  policy_total tot[4];
  memset(tot, 0, sizeof tot);
  int rc = 0;
  if (!json) {
    print_intro(full);
    fflush(stdout);
  }
  /* Each run has its own context, freed when it ends; its programs are stored
   * by the background store while a context of the process is alive (freeing
   * the last one waits for it). This idle context keeps the store of each run
   * beside the next run instead of in line with it. */
  clb_context_t keep = NULL;
  if (clb_context_new(NULL, &keep) == CLB_OK) (void)clb_context_cache_dir(keep);
  for (int w = 0; w < DEMO_WORKLOAD_COUNT; w++) {
    if (!wl_all && w != (int)wl) continue;
    int iters = iterations ? iterations : full ? FULL_ITERATIONS : short_iterations((demo_workload)w);
    const int story = !full && !iterations; /* the default short run */
    double wlr = lr >= 0 ? lr : story ? short_lr((demo_workload)w) : demo_default_lr((demo_workload)w);
    double tolerance = loss_tolerance(iters);
    double *ref = NULL;
    if (check) {
      demo_config rc_cfg = {(demo_workload)w, CLB_POLICY_DYNAMIC, iters, wlr, (int)pm, 1, sizes};
      ref = malloc(sizeof(double) * (size_t)iters);
      if (!ref || demo_reference_cfg(&rc_cfg, ref) != 0) {
        fprintf(stderr, CMD ": the host reference ran out of memory\n");
        free(ref);
        clb_context_free(keep);
        return 1;
      }
    }
    if (!json) print_workload_intro((demo_workload)w, iters, wlr, sizes);
    double secs[4] = {-1, -1, -1, -1};
    char notes[4][400];
    for (int k = 0; k < 4; k++) {
      clb_policy_kind p = order[k];
      notes[p][0] = 0;
      if (pol_set == 2 && p != pol) continue;
      if (pol_set == 0 && p != CLB_POLICY_DYNAMIC && p != CLB_POLICY_STATIC) continue;
      demo_config cfg = {(demo_workload)w, p, iters, wlr, (int)pm, check, sizes};
      demo_result r;
      char err[1024];
      if (demo_run(&cfg, &r, err, sizeof err) != 0) {
        fprintf(stderr, CMD ": %s under %s: %s\n", demo_workload_name((demo_workload)w), demo_policy_name(p), err);
        demo_result_free(&r);
        rc = 1;
        continue;
      }
      if (ref) {
        double worst = 0;
        for (int i = 0; i < iters; i++) {
          double d = fabs((double)r.losses[i] - ref[i]) / fmax(fabs(ref[i]), LOSS_FLOOR);
          if (!(d <= worst)) worst = d; /* NaN counts as the worst */
        }
        r.max_loss_error = worst;
      }
      loss_trend tr = trend_of(r.losses, iters, sizes);
      secs[p] = r.seconds;
      tot[p].ran = 1;
      tot[p].seconds += r.seconds;
      tot[p].builds += r.program_builds;
      tot[p].syncs += r.host_syncs;
      first_iteration_note(&r, demo_workload_name((demo_workload)w), demo_policy_name(p), notes[p], sizeof notes[p]);
      if (json) {
        print_json(&cfg, &r, wlr, &tr, tolerance, notes[p]);
      } else {
        char err_s[32], trend_s[48];
        if (r.max_loss_error >= 0) snprintf(err_s, sizeof err_s, "%.2e", r.max_loss_error);
        else snprintf(err_s, sizeof err_s, "-");
        snprintf(trend_s, sizeof trend_s, "%.4f -> %.4f", tr.start, tr.end);
        printf("  %-9s %8.2f %7llu %10llu %6llu %10llu %10llu %21s %12s\n", demo_policy_name(p), r.seconds,
               (unsigned long long)r.program_builds, (unsigned long long)(r.cache_hits_memory + r.cache_hits_disk),
               (unsigned long long)r.plans_compiled, (unsigned long long)r.recompiles, (unsigned long long)r.host_syncs,
               trend_s, err_s);
        fflush(stdout);
      }
      /* the promises of the policies */
      char broken[200] = "";
      if (r.max_loss_error > tolerance || r.max_loss_error != r.max_loss_error)
        snprintf(broken, sizeof broken, "the losses differ from the reference by %.3g relative, more than %.3g",
                 r.max_loss_error, tolerance);
      else if (p == CLB_POLICY_DYNAMIC && (r.plans_compiled != 1 || r.host_syncs != 0 || r.builds_after_first != 0))
        snprintf(broken, sizeof broken,
                 "dynamic must compile one plan and build nothing and sync nothing after the first iteration");
      else if (p == CLB_POLICY_AUTOMATIC && r.plans_compiled > 2)
        snprintf(broken, sizeof broken, "automatic compiled more than two plans");
      if (broken[0]) {
        fprintf(stderr, CMD ": %s under %s: %s\n", demo_workload_name((demo_workload)w), demo_policy_name(p), broken);
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
  /* the freed contexts' programs are written by the background store while
   * the demo goes on; what is left is waited for here, inside the run time */
  uint64_t pending = clb_cache_pending();
  if (pending) {
    char label[96];
    snprintf(label, sizeof label, "storing %llu program(s) in the disk cache for the next run",
             (unsigned long long)pending);
    clb_progress *p = clb_progress_begin(pm, label, 0);
    clb_cache_wait();
    clb_progress_end(p);
  }
  clb_context_free(keep);
  if (!json) {
    print_summary(tot, full);
    printf("(demo run time %.1f s)\n", 1e-3 * (clb_tool_now_ms() - t_start));
  }
  return rc;
}
