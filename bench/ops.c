/* ops.c: `clbound bench ops`: the data-dependent ops (nonzero,
 * masked_select, masked_scatter) against a copy kernel over the same bytes and
 * against a plain host loop, all measured in the same run. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clbound/clbound.h"
#include "bench/args.h"
#include "bench/bench.h"
#include "bench/copy.h"
#include "bench/progress.h"
#include "bench/timing.h"

#define CMD "clbound bench ops"

static clb_counters counters_of(clb_context_t ctx) {
  clb_counters c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  clb_context_counters(ctx, &c);
  return c;
}

/* ---- the ops, the host peers, the data ---------------------------------------- */

typedef enum bop { OP_NONZERO_BOOL, OP_NONZERO_F32, OP_SELECT, OP_SCATTER, OP_COUNT } bop;
static const char *const OP_NAME[OP_COUNT] = {"nonzero", "nonzero", "masked_select", "masked_scatter"};
static const char *const OP_DTYPE[OP_COUNT] = {"bool", "f32", "f32", "f32"};

/* One size: device tensors and host arrays of n elements shaped [rows, cols]. */
typedef struct bset {
  int64_t n, rows, cols;
  int rank;
  uint8_t *mask;      /* host mask at the current density */
  float *x, *xnz;     /* values; values where the mask is true, else 0 */
  float *src;         /* masked_scatter's source, n + 1 elements */
  float *hout;        /* host output: select / scatter */
  int64_t *hidx;      /* host output: nonzero, 2 (n + 1) */
  float *dout;        /* device output read back */
  int64_t *didx;
  clb_tensor_t tx, tm, txnz, ts, onz, onzf, osel, osc;
} bset;

static uint32_t rng_state = 12345u;
static uint32_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return rng_state;
}

/* Host peers: plain single-thread loops, branchless compaction. Each returns
 * the count. */
static int64_t host_nonzero_bool(const bset *s, int64_t *o) {
  int64_t k = 0;
  const uint8_t *m = s->mask;
  if (s->rank == 2) {
    for (int64_t i = 0; i < s->rows; i++)
      for (int64_t j = 0; j < s->cols; j++) {
        o[2 * k] = i;
        o[2 * k + 1] = j;
        k += m[i * s->cols + j] != 0;
      }
  } else {
    for (int64_t i = 0; i < s->n; i++) {
      o[k] = i;
      k += m[i] != 0;
    }
  }
  return k;
}

static int64_t host_nonzero_f32(const bset *s, int64_t *o) {
  int64_t k = 0;
  const uint32_t *v = (const uint32_t *)s->xnz;
  if (s->rank == 2) {
    for (int64_t i = 0; i < s->rows; i++)
      for (int64_t j = 0; j < s->cols; j++) {
        o[2 * k] = i;
        o[2 * k + 1] = j;
        k += (v[i * s->cols + j] & 0x7fffffffu) != 0;
      }
  } else {
    for (int64_t i = 0; i < s->n; i++) {
      o[k] = i;
      k += (v[i] & 0x7fffffffu) != 0;
    }
  }
  return k;
}

static int64_t host_select(const bset *s, float *o) {
  int64_t k = 0;
  for (int64_t i = 0; i < s->n; i++) {
    o[k] = s->x[i];
    k += s->mask[i] != 0;
  }
  return k;
}

static int64_t host_scatter(const bset *s, float *o) {
  int64_t k = 0;
  for (int64_t i = 0; i < s->n; i++) {
    o[i] = s->mask[i] ? s->src[k] : s->x[i];
    k += s->mask[i] != 0;
  }
  return k;
}

static int64_t host_run(bop op, const bset *s) {
  switch (op) {
  case OP_NONZERO_BOOL: return host_nonzero_bool(s, s->hidx);
  case OP_NONZERO_F32: return host_nonzero_f32(s, s->hidx);
  case OP_SELECT: return host_select(s, s->hout);
  default: return host_scatter(s, s->hout);
  }
}

static clb_status dev_run(clb_context_t ctx, bop op, bset *s) {
  switch (op) {
  case OP_NONZERO_BOOL: return clb_nonzero(ctx, s->tm, &s->onz);
  case OP_NONZERO_F32: return clb_nonzero(ctx, s->txnz, &s->onzf);
  case OP_SELECT: return clb_masked_select(ctx, s->tx, s->tm, &s->osel);
  default: return clb_masked_scatter(ctx, s->tx, s->tm, s->ts, &s->osc);
  }
}

/* Effective bytes: every input byte read once plus every output byte written
 * once (masked_scatter reads only the `count` source elements it uses). */
static double op_bytes(bop op, int64_t n, int64_t count, int rank) {
  switch (op) {
  case OP_NONZERO_BOOL: return (double)n + 8.0 * (double)rank * (double)count;
  case OP_NONZERO_F32: return 4.0 * (double)n + 8.0 * (double)rank * (double)count;
  case OP_SELECT: return 5.0 * (double)n + 4.0 * (double)count;
  default: return 9.0 * (double)n + 4.0 * (double)count;
  }
}

static void set_free(bset *s) {
  clb_tensor_t ts[] = {s->tx, s->tm, s->txnz, s->ts, s->onz, s->onzf, s->osel, s->osc};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clb_tensor_free(ts[i]);
  free(s->mask);
  free(s->x);
  free(s->xnz);
  free(s->src);
  free(s->hout);
  free(s->hidx);
  free(s->dout);
  free(s->didx);
  memset(s, 0, sizeof *s);
}

/* Tensors (dim 0 bounded, at its bound) and host arrays for n elements:
 * [64, 64] for 4096, [n / 4096, 4096] for other multiples of 4096, else [n]. */
static clb_status set_init(clb_context_t ctx, int64_t n, bset *s) {
  memset(s, 0, sizeof *s);
  s->n = n;
  if (n == 4096) {
    s->rank = 2, s->rows = 64, s->cols = 64;
  } else if (n % 4096 == 0) {
    s->rank = 2, s->rows = n / 4096, s->cols = 4096;
  } else {
    s->rank = 1, s->rows = 1, s->cols = n;
  }
  size_t un = (size_t)n + 1;
  s->mask = malloc(un);
  s->x = malloc(un * sizeof(float));
  s->xnz = malloc(un * sizeof(float));
  s->src = malloc(un * sizeof(float));
  s->hout = malloc(un * sizeof(float));
  s->dout = malloc(un * sizeof(float));
  s->hidx = malloc(2 * un * sizeof(int64_t));
  s->didx = malloc(2 * un * sizeof(int64_t));
  if (!s->mask || !s->x || !s->xnz || !s->src || !s->hout || !s->dout || !s->hidx || !s->didx) return CLB_ERR_HOST_OOM;
  /* touch every host page now, not inside a timed loop */
  memset(s->hout, 0, un * sizeof(float));
  memset(s->dout, 0, un * sizeof(float));
  memset(s->hidx, 0, 2 * un * sizeof(int64_t));
  memset(s->didx, 0, 2 * un * sizeof(int64_t));
  for (int64_t i = 0; i < n; i++) {
    s->x[i] = (float)(rng() % 2001) * 0.25f - 250.0f;
    s->src[i] = 1000.0f + (float)(i % 4096);
  }
  s->src[n] = 0;
  int64_t dims[2] = {s->rank == 2 ? s->rows : n, s->cols};
  uint8_t dyn[2] = {1, 0};
  clb_status st;
  if ((st = clb_tensor_new(ctx, CLB_DTYPE_F32, s->rank, dims, dyn, &s->tx)) != CLB_OK) return st;
  if ((st = clb_tensor_new(ctx, CLB_DTYPE_BOOL, s->rank, dims, dyn, &s->tm)) != CLB_OK) return st;
  if ((st = clb_tensor_new(ctx, CLB_DTYPE_F32, s->rank, dims, dyn, &s->txnz)) != CLB_OK) return st;
  if ((st = clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &n, NULL, &s->ts)) != CLB_OK) return st;
  if ((st = clb_tensor_write(ctx, s->tx, dims, s->x, (size_t)n * sizeof(float))) != CLB_OK) return st;
  return clb_tensor_write(ctx, s->ts, &n, s->src, (size_t)n * sizeof(float));
}

/* A new mask at `density` (exact fraction of a uniform draw), and the values
 * of nonzero's f32 input under it. */
static clb_status set_density(clb_context_t ctx, bset *s, double density) {
  uint32_t thr = (uint32_t)(density * 4294967295.0);
  for (int64_t i = 0; i < s->n; i++) {
    uint8_t m = density >= 1.0 || rng() < thr;
    s->mask[i] = m;
    s->xnz[i] = m ? 1.0f + (float)(i % 7) : (i & 1 ? -0.0f : 0.0f);
  }
  int64_t dims[2] = {s->rank == 2 ? s->rows : s->n, s->cols};
  clb_status st = clb_tensor_write(ctx, s->tm, dims, s->mask, (size_t)s->n);
  if (st == CLB_OK) st = clb_tensor_write(ctx, s->txnz, dims, s->xnz, (size_t)s->n * sizeof(float));
  return st;
}

/* Reads the device result and compares it with the host peer's. */
static clb_status check_result(clb_context_t ctx, bop op, bset *s, int64_t hcount, int *ok) {
  clb_status st;
  size_t got = 0;
  *ok = 0;
  if (op == OP_NONZERO_BOOL || op == OP_NONZERO_F32) {
    int64_t d[2];
    size_t cap = 2 * ((size_t)s->n + 1) * sizeof(int64_t);
    st = clb_tensor_read(ctx, op == OP_NONZERO_BOOL ? s->onz : s->onzf, d, s->didx, cap, &got);
    if (st != CLB_OK) return st;
    *ok = d[0] == hcount && got == (size_t)hcount * (size_t)s->rank * sizeof(int64_t) &&
          memcmp(s->didx, s->hidx, got) == 0;
  } else {
    int64_t d[2];
    size_t cap = ((size_t)s->n + 1) * sizeof(float);
    st = clb_tensor_read(ctx, op == OP_SELECT ? s->osel : s->osc, d, s->dout, cap, &got);
    if (st != CLB_OK) return st;
    size_t want = op == OP_SELECT ? (size_t)hcount : (size_t)s->n;
    *ok = got == want * sizeof(float) && memcmp(s->dout, s->hout, got) == 0;
  }
  return CLB_OK;
}

typedef struct result {
  double ms, copy_ms, host_ms, bytes, syncs, launches;
  int64_t count;
  int ok;
} result;

/* Times one op at one density: `reps` pairs of (op + clFinish, copy of the same
 * bytes + clFinish), interleaved so both see the same machine; then the host
 * peer; then checks the device result against it. */
static clb_status bench_one(clb_context_t ctx, copier *cp, bop op, bset *s, int reps, result *r, char *err,
                            size_t elen) {
  cl_command_queue q = clb_context_cl_queue(ctx);
  clb_status st;
  memset(r, 0, sizeof *r);
  r->count = host_run(op, s);
  r->bytes = op_bytes(op, s->n, r->count, s->rank);
  for (int w = 0; w < 2; w++) { /* warm-up: program builds, first touch of outputs */
    if ((st = dev_run(ctx, op, s)) != CLB_OK) return st;
    if (copier_run(cp, (size_t)(r->bytes / 2)) != CL_SUCCESS) goto cl_fail;
    clFinish(q);
  }
  double *t = malloc(3 * (size_t)reps * sizeof(double));
  if (!t) return CLB_ERR_HOST_OOM;
  double *tc = t + reps, *th = t + 2 * reps;
  clb_counters c0 = counters_of(ctx);
  for (int i = 0; i < reps; i++) {
    double t0 = clb_tool_now_ms();
    if ((st = dev_run(ctx, op, s)) != CLB_OK) {
      free(t);
      return st;
    }
    clFinish(q);
    double t1 = clb_tool_now_ms();
    if (copier_run(cp, (size_t)(r->bytes / 2)) != CL_SUCCESS) {
      free(t);
      goto cl_fail;
    }
    clFinish(q);
    t[i] = t1 - t0;
    tc[i] = clb_tool_now_ms() - t1;
  }
  clb_counters c1 = counters_of(ctx);
  r->syncs = (double)(c1.host_syncs - c0.host_syncs) / reps;
  r->launches = (double)(c1.kernel_launches - c0.kernel_launches) / reps;
  for (int i = 0; i < reps; i++) {
    double t0 = clb_tool_now_ms();
    volatile int64_t k = host_run(op, s);
    (void)k;
    th[i] = clb_tool_now_ms() - t0;
  }
  r->ms = clb_tool_median(t, reps);
  r->copy_ms = clb_tool_median(tc, reps);
  r->host_ms = clb_tool_median(th, reps);
  free(t);
  /* a deferred device error would make the figures meaningless */
  if ((st = clb_context_sync(ctx)) != CLB_OK) return st;
  return check_result(ctx, op, s, r->count, &r->ok);
cl_fail:
  snprintf(err, elen, "copy kernel launch failed");
  return CLB_ERR_CL;
}

static double gbps(double bytes, double ms) { return ms > 0 ? bytes / (ms * 1e6) : 0; }

static void report(int json, const char *style, bop op, const bset *s, double density, int reps, const result *r) {
  double g = gbps(r->bytes, r->ms), cg = gbps(r->bytes, r->copy_ms), hg = gbps(r->bytes, r->host_ms);
  char shape[48];
  if (s->rank == 2)
    snprintf(shape, sizeof shape, "%lldx%lld", (long long)s->rows, (long long)s->cols);
  else
    snprintf(shape, sizeof shape, "%lld", (long long)s->n);
  if (json)
    printf("{\"bench\":\"ops\",\"op\":\"%s\",\"n\":%lld,\"shape\":\"%s\",\"density\":%.2f,\"dtype\":\"%s\","
           "\"style\":\"%s\",\"count\":%lld,\"bytes\":%.0f,\"reps\":%d,\"ms\":%.4f,\"gbps\":%.3f,"
           "\"copy_ms\":%.4f,\"copy_gbps\":%.3f,\"fraction_of_copy\":%.4f,\"host_ms\":%.4f,\"host_gbps\":%.3f,"
           "\"speed_vs_host\":%.3f,\"host_syncs\":%.2f,\"launches\":%.2f,\"ok\":%s}\n",
           OP_NAME[op], (long long)s->n, shape, density, OP_DTYPE[op], style, (long long)r->count, r->bytes, reps,
           r->ms, g, r->copy_ms, cg, cg > 0 ? g / cg : 0, r->host_ms, hg, r->ms > 0 ? r->host_ms / r->ms : 0,
           r->syncs, r->launches, r->ok ? "true" : "false");
  else
    printf("%-14s %-4s %9lld %-9s %5.0f%% %9.3f %7.2f %7.2f %6.2f %9.3f %7.2f %5.2f %3s\n", OP_NAME[op], OP_DTYPE[op],
           (long long)s->n, shape, density * 100, r->ms, g, cg, cg > 0 ? g / cg : 0, r->host_ms, hg, r->syncs,
           r->ok ? "ok" : "BAD");
  fflush(stdout);
}

static int usage(FILE *f) {
  fprintf(f,
          "usage: clbound bench ops [--json] [--quick] [--quiet] [--n 1..2147483648] [--reps 1..10000]\n"
          "                         [--style auto|cpu|gpu] [--op nonzero|masked_select|masked_scatter]\n"
          "                         [--density 0..1]\n"
          "  nonzero (bool and f32 input), masked_select and masked_scatter (f32 values, bool mask)\n"
          "  at N elements (default 16777216 = 4096x4096) and at 4096 (64x64), densities 1%%, 50%%, 99%%;\n"
          "  each against a copy kernel over the same bytes and a plain host loop, in the same run\n");
  return clb_arg_usage_rc(f);
}

int clb_bench_ops(int argc, char **argv) {
  if (argc < 1 || strcmp(argv[0], "ops") != 0) {
    fprintf(stderr, "clbound bench: unknown suite %s (ops, gemm, steps, whole-step)\n", argc > 0 ? argv[0] : "(none)");
    return 2;
  }
  if (clb_arg_help(argc, argv)) return usage(stdout);
  int json = 0, quick = 0, reps = 0, quiet = 0;
  const char *only_op = NULL;
  double only_density = -1;
  int64_t big = 4096 * 4096;
  clb_kernel_style style = CLB_KERNEL_STYLE_AUTO;
  for (int i = 1; i < argc; i++) {
    const char *v;
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--quick") == 0) quick = 1;
    else if (strcmp(argv[i], "--quiet") == 0) quiet = 1;
    else if (strcmp(argv[i], "--n") == 0) {
      if (!(v = clb_arg_value(CMD, argc, argv, &i)) || clb_arg_i64(CMD, "--n", v, 1, (int64_t)1 << 31, &big)) return 2;
    } else if (strcmp(argv[i], "--reps") == 0) {
      if (!(v = clb_arg_value(CMD, argc, argv, &i)) || clb_arg_int(CMD, "--reps", v, 1, 10000, &reps)) return 2;
    } else if (strcmp(argv[i], "--op") == 0 && i + 1 < argc) only_op = argv[++i];
    else if (strcmp(argv[i], "--density") == 0) {
      if (!(v = clb_arg_value(CMD, argc, argv, &i)) || clb_arg_f64(CMD, "--density", v, 0, 1, &only_density)) return 2;
    } else if (strcmp(argv[i], "--style") == 0 && i + 1 < argc) {
      const char *s = argv[++i];
      if (strcmp(s, "cpu") == 0) style = CLB_KERNEL_STYLE_CPU;
      else if (strcmp(s, "gpu") == 0) style = CLB_KERNEL_STYLE_GPU;
      else if (strcmp(s, "auto") == 0) style = CLB_KERNEL_STYLE_AUTO;
      else return usage(stderr);
    } else {
      return usage(stderr);
    }
  }

  if (only_op && strcmp(only_op, "nonzero") != 0 && strcmp(only_op, "masked_select") != 0 &&
      strcmp(only_op, "masked_scatter") != 0)
    return usage(stderr);
  if (reps <= 0) reps = quick ? 3 : 11;
  clb_progress_mode pm = clb_progress_mode_for(quiet);
  clb_context_options o;
  clb_context_options_init(&o);
  o.kernel_style = style;
  clb_context_t ctx = NULL;
  clb_status st = clb_context_new(&o, &ctx);
  if (st != CLB_OK) {
    fprintf(stderr, "clbound bench ops: %s: %s\n", clb_status_str(st), clb_last_errmsg());
    return 1;
  }
  const char *sname = clb_context_kernel_style(ctx) == CLB_KERNEL_STYLE_GPU ? "gpu" : "cpu";
  char name[128] = "";
  clGetDeviceInfo(clb_context_cl_device(ctx), CL_DEVICE_NAME, sizeof name, name, NULL);
  double densities[3] = {0.01, 0.5, 0.99};
  size_t ndens = 3;
  if (only_density >= 0) {
    densities[0] = only_density;
    ndens = 1;
  }
  int64_t sizes[2] = {big, 4096};
  int nsizes = big == 4096 ? 1 : 2;
  char err[160] = "";
  copier cp;
  /* the largest copy: nonzero of f32 at 99%, (4 + 16) n bytes moved */
  if ((st = copier_init(ctx, (size_t)(10 * big + 64), &cp, err, sizeof err)) != CLB_OK) {
    fprintf(stderr, "clbound bench ops: %s\n", err);
    copier_free(&cp);
    clb_context_free(ctx);
    return 1;
  }
  if (!json) {
    printf("clbound bench ops on %s (%s kernel style), median of %d runs, %s copy kernel as reference\n", name,
           sname, reps, cp.gpu ? "grid-stride" : "chunked");
    printf("GB/s = (input bytes + output bytes) / time; copy: the same bytes moved by a copy kernel, same run;\n"
           "host: a plain single-thread C loop\n");
    printf("%-14s %-4s %9s %-9s %6s %9s %7s %7s %6s %9s %7s %5s\n", "op", "in", "n", "shape", "dens", "ms", "GB/s",
           "copy", "frac", "host ms", "host", "syncs");
  }
  int rc = 0;
  for (int si = 0; si < nsizes && rc == 0; si++) {
    bset s;
    int r = si == 0 ? reps : reps * 5; /* small sizes are cheap and noisier */
    if ((st = set_init(ctx, sizes[si], &s)) != CLB_OK) {
      fprintf(stderr, "clbound bench ops: %s: %s\n", clb_status_str(st), clb_context_errmsg(ctx));
      rc = 1;
    }
    for (size_t di = 0; di < ndens && rc == 0; di++) {
      if ((st = set_density(ctx, &s, densities[di])) != CLB_OK) {
        fprintf(stderr, "clbound bench ops: %s: %s\n", clb_status_str(st), clb_context_errmsg(ctx));
        rc = 1;
        break;
      }
      char label[80];
      snprintf(label, sizeof label, "bench ops n=%lld density %.2f", (long long)sizes[si], densities[di]);
      clb_progress *pr = clb_progress_begin(pm, label, OP_COUNT);
      for (int op = 0; op < OP_COUNT && rc == 0; op++) {
        clb_progress_update(pr, op, -1);
        if (only_op && strcmp(only_op, OP_NAME[op]) != 0) continue;
        result res;
        st = bench_one(ctx, &cp, (bop)op, &s, r, &res, err, sizeof err);
        if (st != CLB_OK) {
          fprintf(stderr, "clbound bench ops: %s %s: %s: %s\n", OP_NAME[op], OP_DTYPE[op], clb_status_str(st),
                  st == CLB_ERR_CL && err[0] ? err : clb_context_errmsg(ctx));
          rc = 1;
          break;
        }
        clb_progress_hold(pr);
        report(json, sname, (bop)op, &s, densities[di], r, &res);
        clb_progress_release(pr);
        if (!res.ok) {
          fprintf(stderr, "clbound bench ops: %s %s at density %.2f: the device result differs from the host's\n",
                  OP_NAME[op], OP_DTYPE[op], densities[di]);
          rc = 1;
        }
      }
      clb_progress_end(pr);
    }
    set_free(&s);
  }
  copier_free(&cp);
  clb_context_free(ctx);
  return rc;
}
