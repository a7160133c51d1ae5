/* gemm.c: `clbound bench gemm`: matmul with a bounded M, each strategy
 * against CLBlast at the exact size, measured in the same run. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clbound/clbound.h"
#include "clbound/nn.h"
#include "bench/args.h"
#include "bench/bench.h"
#include "bench/blas-ref.h"
#include "bench/progress.h"
#include "bench/timing.h"

#define CMD "clbound bench gemm"

#define BOUND_M 4096


static uint64_t syncs_of(clb_context_t ctx) {
  clb_counters c;
  c.struct_size = sizeof c;
  clb_context_counters(ctx, &c);
  return c.host_syncs;
}

static clb_status fill_random(clb_context_t ctx, clb_tensor_t t, const int64_t *dims) {
  int64_t n = dims[0] * dims[1];
  float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
  if (!v) return CLB_ERR_HOST_OOM;
  bench_rand_fill(v, n);
  clb_status st = clb_tensor_write(ctx, t, dims, v, (size_t)n * sizeof(float));
  free(v);
  return st;
}

/* One timed configuration: median wall ms over reps of (enqueue + clFinish), and
 * the library's host syncs per call; queued_ms (0: not measured), the median
 * over reps of QUEUED matmuls enqueued back to back then one clFinish, per
 * matmul, and blas_queued_ms, QUEUED direct calls back to back, per call. */
typedef struct timing {
  double ms;
  double syncs;
  double queued_ms, blas_queued_ms;
} timing;

/* Products back to back, as a training step runs them: the queue's fixed cost
 * per enqueue + clFinish (about 0.03 ms for a native kernel on PoCL) is paid
 * once per QUEUED products (docs/gemm.md, Measurements). */
#define QUEUED 8

#define HOST_WARMUP_MS 150.0

/* With blas non-NULL, a direct BLAS call of the same sizes runs after each timed
 * matmul, and its median goes to *blas_ms: the two are interleaved rep by rep. */
static clb_status time_matmul_t(clb_context_t ctx, clb_gemm_strategy s, clb_tensor_t a, int ta, clb_tensor_t b,
                                int tb, clb_tensor_t *out, int reps, timing *res, bench_blas *blas, double *blas_ms) {
  clb_status st = clb_context_set_gemm_strategy(ctx, s);
  if (st != CLB_OK) return st;
  cl_command_queue q = clb_context_cl_queue(ctx);
  if ((st = clb_matmul(ctx, a, ta, b, tb, out)) != CLB_OK) return st; /* warm-up: first-call compiles */
  clFinish(q);
  /* host BLAS: the thread rule's first load window (0.1 s from the process's
   * first host-BLAS product, one thread for 12-32 MFLOP products until then;
   * docs/gemm.md, Threads) passes before anything is timed */
  static double host_since = 0;
  if (s == CLB_GEMM_HOST_BLAS) {
    if (host_since == 0) host_since = clb_tool_now_ms();
    while (clb_tool_now_ms() - host_since < HOST_WARMUP_MS) {
      if ((st = clb_matmul(ctx, a, ta, b, tb, out)) != CLB_OK) return st;
      clFinish(q);
    }
  }
  double t[64], tb2[64];
  if (reps > 64) reps = 64;
  uint64_t s0 = syncs_of(ctx);
  for (int r = 0; r < reps; r++) {
    double t0 = clb_tool_now_ms();
    if ((st = clb_matmul(ctx, a, ta, b, tb, out)) != CLB_OK) return st;
    clFinish(q);
    t[r] = clb_tool_now_ms() - t0;
    if (blas) tb2[r] = bench_blas_once_ms(blas);
  }
  res->syncs = (double)(syncs_of(ctx) - s0) / reps;
  res->ms = clb_tool_median(t, reps);
  if (blas) *blas_ms = clb_tool_median(tb2, reps);
  res->queued_ms = res->blas_queued_ms = 0;
  if (blas && s == CLB_GEMM_HOST_BLAS) { /* back to back, interleaved with direct calls back to back */
    for (int r = 0; r < reps; r++) {
      double t0 = clb_tool_now_ms();
      for (int i = 0; i < QUEUED; i++)
        if ((st = clb_matmul(ctx, a, ta, b, tb, out)) != CLB_OK) return st;
      clFinish(q);
      t[r] = (clb_tool_now_ms() - t0) / QUEUED;
      tb2[r] = bench_blas_run_ms(blas, QUEUED) / QUEUED;
    }
    res->queued_ms = clb_tool_median(t, reps);
    res->blas_queued_ms = clb_tool_median(tb2, reps);
  }
  return clb_context_sync(ctx); /* a deferred error would make the figures meaningless */
}

static clb_status time_matmul(clb_context_t ctx, clb_gemm_strategy s, clb_tensor_t a, clb_tensor_t b, int tb,
                              clb_tensor_t *out, int reps, timing *res) {
  return time_matmul_t(ctx, s, a, 0, b, tb, out, reps, res, NULL, NULL);
}

static const char *const SNAME[CLB_GEMM_STRATEGY_COUNT] = {"auto", "clblast-bound", "sync-exact", "device",
                                                            "host-blas"};

static void report(int json, const char *trans, int64_t m, int64_t n, int64_t k, const char *strategy, timing t,
                   double ref_ms) {
  double gflops = t.ms > 0 ? 2.0 * (double)m * (double)n * (double)k / (t.ms * 1e6) : 0;
  if (json)
    printf("{\"bench\":\"gemm\",\"trans\":\"%s\",\"m\":%lld,\"bound_m\":%d,\"n\":%lld,\"k\":%lld,\"strategy\":\"%s\","
           "\"ms\":%.4f,\"gflops\":%.3f,\"speed_vs_clblast_exact\":%.4f,\"host_syncs_per_call\":%.2f}\n",
           trans, (long long)m, BOUND_M, (long long)n, (long long)k, strategy, t.ms, gflops, ref_ms / t.ms, t.syncs);
  else
    printf("%-3s %5lld %5lld %5lld  %-18s %10.3f %9.2f %8.2fx %7.2f\n", trans, (long long)m, (long long)n, (long long)k,
           strategy, t.ms, gflops, ref_ms / t.ms, t.syncs);
  fflush(stdout);
}

/* The matmuls of an MLP step, as in issue 15 (M x N x K): the batch dim (M, or K
 * for dW = dy^T x) is bounded by BOUND_M and known only on the device. Each
 * strategy against a direct CBLAS call on host memory of the same sizes, timed
 * in the same run (blas_gflops). */
typedef struct gshape {
  int64_t m, n, k;
  int ta, tb;
} gshape;
static const gshape SHAPES[] = {
    {512, 512, 256, 0, 1}, {512, 256, 512, 0, 0}, {4096, 512, 256, 0, 1}, {512, 256, 4096, 1, 0},
    {1024, 1024, 1024, 0, 0}, {64, 512, 256, 0, 1}, {64, 256, 512, 0, 0}, {1, 512, 256, 0, 1}, {256, 512, 64, 1, 0},
    {32, 512, 256, 0, 1}};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

static const char *trans_name(int ta, int tb) { return ta ? (tb ? "tt" : "tn") : (tb ? "nt" : "nn"); }

static void report_shape(int json, const gshape *g, const char *strategy, timing t, double blas_ms) {
  double fl = 2.0 * (double)g->m * (double)g->n * (double)g->k;
  double gflops = t.ms > 0 ? fl / (t.ms * 1e6) : 0, bg = blas_ms > 0 ? fl / (blas_ms * 1e6) : 0;
  double qof = t.queued_ms > 0 && t.blas_queued_ms > 0 ? t.blas_queued_ms / t.queued_ms : 0;
  if (json) {
    printf("{\"bench\":\"gemm\",\"shape\":\"%lldx%lldx%lld\",\"trans\":\"%s\",\"m\":%lld,\"n\":%lld,\"k\":%lld,"
           "\"bound\":%d,\"strategy\":\"%s\",\"ms\":%.4f,\"gflops\":%.3f,\"blas_ms\":%.4f,\"blas_gflops\":%.3f,"
           "\"of_blas\":%.4f,\"host_syncs_per_call\":%.2f",
           (long long)g->m, (long long)g->n, (long long)g->k, trans_name(g->ta, g->tb), (long long)g->m, (long long)g->n,
           (long long)g->k, BOUND_M, strategy, t.ms, gflops, blas_ms, bg, bg > 0 ? gflops / bg : 0, t.syncs);
    if (t.queued_ms > 0)
      printf(",\"queued_ms\":%.4f,\"blas_queued_ms\":%.4f,\"queued_of_blas\":%.4f", t.queued_ms, t.blas_queued_ms, qof);
    printf("}\n");
  } else {
    printf("%5lld %5lld %5lld %-3s %-14s %9.3f %9.2f %10.2f %8.2f %7.2f", (long long)g->m, (long long)g->n,
           (long long)g->k, trans_name(g->ta, g->tb), strategy, t.ms, gflops, bg, bg > 0 ? gflops / bg : 0, t.syncs);
    if (t.queued_ms > 0) printf(" %9.3f %8.2f", t.queued_ms, qof);
    printf("\n");
  }
  fflush(stdout);
}

/* tuned: 0, the pass of host-blas, kernel and CLBlast with its own parameters;
 * 1, CLBlast with the device's tuning file ("clblast-tuned"), in a context of
 * its own made after every untuned call (CLBlast keeps overridden parameters
 * for the rest of the process). */
/* Whether "MxNxK" is in the comma-separated list `only` (NULL: every shape). */
static int shape_listed(const char *only, const gshape *g) {
  if (!only) return 1;
  char name[64];
  snprintf(name, sizeof name, "%lldx%lldx%lld", (long long)g->m, (long long)g->n, (long long)g->k);
  size_t len = strlen(name);
  for (const char *p = only; (p = strstr(p, name)) != NULL; p += len)
    if ((p == only || p[-1] == ',') && (p[len] == '\0' || p[len] == ',')) return 1;
  return 0;
}

static int bench_shapes(clb_context_t ctx, int json, int quick, int reps, int tuned, const char *only) {
  if (!json && !tuned) {
    printf("M x N x K, the batch dim (M, or K when a is transposed) bounded by %d and known only on the device;\n"
           "blas = CBLAS (OpenBLAS, every core) on host memory at the same sizes, run after each timed\n"
           "call (interleaved)%s\n",
           BOUND_M, bench_blas_available() ? "" : " (no OpenBLAS in this build or on this machine: 0)");
    printf("queued: %d matmuls enqueued back to back, one clFinish, ms per matmul, and its ratio to %d direct\n"
           "calls back to back (host-blas only)\n", QUEUED, QUEUED);
    printf("%5s %5s %5s %-3s %-14s %9s %9s %10s %8s %7s %9s %8s\n", "M", "N", "K", "op", "strategy", "ms", "GFLOP/s",
           "blas GF/s", "of blas", "syncs", "queued ms", "of blas");
  }
  clb_status st = CLB_OK;
  for (size_t i = 0; i < NSHAPES; i++) {
    const gshape *g = &SHAPES[i];
    if ((quick && i != 0 && i != 3 && i != 5) || !shape_listed(only, g)) continue;
    /* a: [M, K] or [K, M]; b: [K, N] or [N, K]; the batch dim is dynamic */
    int64_t ad[2] = {g->ta ? g->k : g->m, g->ta ? g->m : g->k}, bd[2] = {g->tb ? g->n : g->k, g->tb ? g->k : g->n};
    int64_t ab[2] = {ad[0], ad[1]}, bbd[2] = {bd[0], bd[1]};
    uint8_t ay[2] = {0, 0}, by[2] = {0, 0};
    if (g->ta) { /* dW = dy^T x: K is the batch, dim 0 of both */
      ab[0] = BOUND_M;
      ay[0] = 1;
      bbd[0] = BOUND_M;
      by[0] = 1;
    } else {
      ab[0] = BOUND_M;
      ay[0] = 1;
    }
    clb_tensor_t a = NULL, b = NULL, o = NULL, as = NULL, bs = NULL, os = NULL;
    timing t;
    if ((st = clb_tensor_new(ctx, CLB_DTYPE_F32, 2, ab, ay, &a)) != CLB_OK) break;
    if ((st = clb_tensor_new(ctx, CLB_DTYPE_F32, 2, bbd, by, &b)) != CLB_OK) break;
    if ((st = fill_random(ctx, a, ad)) != CLB_OK || (st = fill_random(ctx, b, bd)) != CLB_OK) break;
    bench_blas *ref = bench_blas_new(g->ta, g->tb, g->m, g->n, g->k);
    double blas = 0;
    if (ref) bench_blas_once_ms(ref); /* warm-up: OpenBLAS's threads start */
    static const clb_gemm_strategy strat[] = {CLB_GEMM_HOST_BLAS, CLB_GEMM_DEVICE};
    static const char *const sname[] = {"host-blas", "kernel"};
    for (int s = 0; s < 2 && st == CLB_OK && !tuned; s++) {
      clb_context_set_gemm_strategy(ctx, strat[s]);
      if (clb_context_gemm_strategy(ctx) != (int)strat[s]) continue; /* host BLAS not here */
      if ((st = time_matmul_t(ctx, strat[s], a, g->ta, b, g->tb, &o, reps, &t, ref, &blas)) == CLB_OK)
        report_shape(json, g, sname[s], t, blas);
    }
    /* CLBlast at the exact sizes, every size on the host */
    if (st == CLB_OK && (st = clb_tensor_new(ctx, CLB_DTYPE_F32, 2, ad, NULL, &as)) == CLB_OK &&
        (st = clb_tensor_new(ctx, CLB_DTYPE_F32, 2, bd, NULL, &bs)) == CLB_OK &&
        (st = fill_random(ctx, as, ad)) == CLB_OK && (st = fill_random(ctx, bs, bd)) == CLB_OK &&
        (st = time_matmul_t(ctx, CLB_GEMM_CLBLAST_BOUND, as, g->ta, bs, g->tb, &os, quick ? 1 : reps, &t, ref, &blas)) ==
            CLB_OK)
      report_shape(json, g, tuned ? "clblast-tuned" : "clblast", t, blas);
    clb_tensor_t all[] = {a, b, o, as, bs, os};
    for (int j = 0; j < 6; j++) clb_tensor_free(all[j]);
    bench_blas_free(ref);
    if (st != CLB_OK) break;
  }
  if (st != CLB_OK) {
    fprintf(stderr, "clbound bench gemm: %s: %s\n", clb_status_str(st), clb_context_errmsg(ctx));
    return 1;
  }
  return 0;
}

static int usage(FILE *f) {
  fprintf(f, "usage: clbound bench gemm [--json] [--quick] [--quiet] [--reps N] [--shapes MxNxK,...]\n"
                      "                         [--sweep [--trans nn,nt]]\n"
                      "  default: an MLP's matmuls (M x N x K), the batch dim bounded by %d, each strategy\n"
                      "  (host-blas, kernel, clblast, and clblast-tuned where the device has a tuning file)\n"
                      "  against a direct CBLAS call at the same sizes; --shapes: only those of the list\n"
                      "  --sweep: C[M, N] = A[M, K] B (nn) or A B^T (nt) at M = 64..4096, every strategy\n"
                      "  against CLBlast at the exact M with every size on the host\n", BOUND_M);
  return clb_arg_usage_rc(f);
}

int clb_bench_gemm(int argc, char **argv) {
  if (clb_arg_help(argc, argv)) return usage(stdout);
  int json = 0, quick = 0, reps = 0, do_nn = 1, do_nt = 1, quiet = 0, sweep = 0;
  const char *only = NULL;
  for (int i = 0; i < argc; i++) {
    const char *v;
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--sweep") == 0) sweep = 1;
    else if (strcmp(argv[i], "--quick") == 0) quick = 1;
    else if (strcmp(argv[i], "--quiet") == 0) quiet = 1;
    else if (strcmp(argv[i], "--shapes") == 0) {
      if (!(v = clb_arg_value(CMD, argc, argv, &i))) return 2;
      only = v;
      int found = 0;
      for (size_t j = 0; j < NSHAPES; j++) found += shape_listed(only, &SHAPES[j]);
      if (!found) {
        fprintf(stderr, CMD ": --shapes \"%s\" names none of the shapes (512x512x256, 512x256x512, 4096x512x256,\n"
                        "  512x256x4096, 1024x1024x1024, 64x512x256, 64x256x512, 1x512x256, 256x512x64, 32x512x256)\n", v);
        return 2;
      }
    } else if (strcmp(argv[i], "--reps") == 0) {
      if (!(v = clb_arg_value(CMD, argc, argv, &i)) || clb_arg_int(CMD, "--reps", v, 1, 64, &reps)) return 2;
    } else if (strcmp(argv[i], "--trans") == 0) {
      if (!(v = clb_arg_value(CMD, argc, argv, &i))) return 2;
      do_nn = strcmp(v, "nn") == 0 || strcmp(v, "nn,nt") == 0 || strcmp(v, "nt,nn") == 0;
      do_nt = strcmp(v, "nt") == 0 || strcmp(v, "nn,nt") == 0 || strcmp(v, "nt,nn") == 0;
      if (!do_nn && !do_nt) {
        fprintf(stderr, CMD ": --trans must be nn, nt or nn,nt, not \"%s\"\n", v);
        return 2;
      }
    } else {
      return usage(stderr);
    }
  }
  if (reps <= 0) reps = quick ? 3 : 7;
  clb_progress_mode pm = clb_progress_mode_for(quiet);
  clb_context_t ctx = NULL;
  clb_status st = clb_context_new(NULL, &ctx);
  if (st != CLB_OK) {
    fprintf(stderr, "clbound bench gemm: %s: %s\n", clb_status_str(st), clb_last_errmsg());
    return 1;
  }
  cl_device_id dev = clb_context_cl_device(ctx);
  /* the first pass runs CLBlast with its own parameters; CLBOUND_CLBLAST_TUNING=off
   * given by the caller keeps it so for the whole run (no clblast-tuned rows) */
  int64_t tuning = 1;
  clb_env_get("CLBOUND_CLBLAST_TUNING", &tuning);
  int keep_off = tuning == 0;
  setenv("CLBOUND_CLBLAST_TUNING", "off", 1);
  char name[128] = "";
  clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL);
  if (!sweep) {
    if (!json) printf("clbound bench gemm on %s, f32, median of %d runs\n", name, reps);
    int r = bench_shapes(ctx, json, quick, reps, 0, only);
    clb_context_free(ctx);
    if (r != 0 || keep_off) return r;
    /* CLBlast again with the device's tuning file, if there is one */
    char path[1200], why[400];
    clb_tuning_entry e[CLB_TUNING_MAX_ENTRIES];
    int ne = 0;
    clb_tuning_state ts = clb_tuning_path(dev, NULL, path, sizeof path) == CLB_OK
                              ? clb_tuning_load(dev, path, e, CLB_TUNING_MAX_ENTRIES, &ne, why, sizeof why)
                              : CLB_TUNING_ABSENT;
    unsetenv("CLBOUND_CLBLAST_TUNING");
    if (ts != CLB_TUNING_OK) {
      if (!json) printf("no clblast-tuned rows: %s\n", ts == CLB_TUNING_ABSENT ? "the device has no tuning file (clbound tune)" : why);
      return 0;
    }
    if ((st = clb_context_new(NULL, &ctx)) != CLB_OK) {
      fprintf(stderr, "clbound bench gemm: %s: %s\n", clb_status_str(st), clb_last_errmsg());
      return 1;
    }
    if (!json) printf("clblast-tuned: CLBlast with the %d kernel(s) of %s\n", ne, path);
    r = bench_shapes(ctx, json, quick, reps, 1, only);
    clb_context_free(ctx);
    return r;
  }
  /* (K, N): square, then the MLP's 256 -> 512 -> 256 layers */
  static const int64_t full_kn[][2] = {{256, 256}, {512, 512}, {1024, 1024}, {256, 512}, {512, 256}};
  static const int64_t quick_kn[][2] = {{256, 256}, {256, 512}};
  static const int64_t full_m[] = {64, 256, 1024, 4096}, quick_m[] = {64, 1024};
  const int64_t(*kn)[2] = quick ? quick_kn : full_kn;
  int nkn = quick ? 2 : 5;
  const int64_t *ms = quick ? quick_m : full_m;
  int nm = quick ? 2 : 4;
  if (!json) {
    printf("clbound bench gemm on %s (%s kernel style), f32, M bounded by %d, median of %d runs\n", name,
           clb_context_kernel_style(ctx) == CLB_KERNEL_STYLE_CPU ? "CPU" : "GPU", BOUND_M, reps);
    printf("speed = CLBlast at the exact M (every size on the host) time / strategy time\n");
    printf("%-3s %5s %5s %5s  %-18s %10s %9s %9s %7s\n", "op", "M", "N", "K", "strategy", "ms", "GFLOP/s", "speed",
           "syncs");
  }
  int rc = 0;
  clb_progress *pr = NULL;
  for (int t = 0; t < 2 && rc == 0; t++) {
    int tb = t;
    if ((tb == 0 && !do_nn) || (tb == 1 && !do_nt)) continue;
    const char *trans = tb ? "nt" : "nn";
    for (int c = 0; c < nkn && rc == 0; c++) {
      int64_t k = kn[c][0], n = kn[c][1];
      int64_t ab[2] = {BOUND_M, k}, bb[2] = {tb ? n : k, tb ? k : n};
      uint8_t ady[2] = {1, 0};
      clb_tensor_t a = NULL, b = NULL, o = NULL;
      if ((st = clb_tensor_new(ctx, CLB_DTYPE_F32, 2, ab, ady, &a)) != CLB_OK) goto fail;
      if ((st = clb_tensor_new(ctx, CLB_DTYPE_F32, 2, bb, NULL, &b)) != CLB_OK) goto fail;
      if ((st = fill_random(ctx, a, ab)) != CLB_OK || (st = fill_random(ctx, b, bb)) != CLB_OK) goto fail;
      char label[64];
      snprintf(label, sizeof label, "bench gemm %s K=%lld N=%lld", trans, (long long)k, (long long)n);
      pr = clb_progress_begin(pm, label, nm);
      for (int mi = 0; mi < nm; mi++) {
        int64_t m = ms[mi], sd[2] = {m, k};
        /* the reference: static tensors of the exact size, so CLBlast runs directly */
        clb_tensor_t ax = NULL, ox = NULL;
        if ((st = clb_tensor_new(ctx, CLB_DTYPE_F32, 2, sd, NULL, &ax)) != CLB_OK) goto fail;
        if ((st = fill_random(ctx, ax, sd)) != CLB_OK) goto fail;
        timing ref;
        st = time_matmul(ctx, CLB_GEMM_CLBLAST_BOUND, ax, b, tb, &ox, reps, &ref);
        clb_tensor_free(ax);
        clb_tensor_free(ox);
        if (st != CLB_OK) goto fail;
        clb_progress_hold(pr);
        report(json, trans, m, n, k, "clblast-exact(ref)", ref, ref.ms);
        clb_progress_release(pr);
        if ((st = clb_tensor_set_sizes(ctx, a, sd)) != CLB_OK) goto fail;
        for (int s = 1; s < CLB_GEMM_STRATEGY_COUNT; s++) {
          timing tm;
          if ((st = time_matmul(ctx, (clb_gemm_strategy)s, a, b, tb, &o, reps, &tm)) != CLB_OK) goto fail;
          clb_progress_hold(pr);
          report(json, trans, m, n, k, SNAME[s], tm, ref.ms);
          clb_progress_release(pr);
        }
        clb_progress_update(pr, mi + 1, -1);
      }
      clb_progress_end(pr);
      pr = NULL;
      clb_tensor_free(a);
      clb_tensor_free(b);
      clb_tensor_free(o);
      continue;
    fail:
      clb_progress_end(pr);
      pr = NULL;
      fprintf(stderr, "clbound bench gemm: %s: %s\n", clb_status_str(st), clb_context_errmsg(ctx));
      rc = 1;
    }
  }
  clb_context_free(ctx);
  return rc;
}
