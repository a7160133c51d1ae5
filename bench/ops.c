/* ops.c: `clbound bench ops`: the data-dependent ops (nonzero,
 * masked_select, masked_scatter) against a copy kernel over the same bytes and
 * against a plain host loop, all measured in the same run. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* One size: the host arrays the peers read, made once and written to every
 * path's context (shaped [rows, cols], dim 0 bounded, at its bound). Outputs
 * exist only while their op is measured, so the resident memory is the inputs
 * plus one op's output on each side. */
typedef struct bset {
  int64_t n, rows, cols;
  int rank;
  uint8_t *mask; /* host mask at the current density */
  float *x;      /* values */
  float *xnz;    /* values where the mask is true, else +-0 (NULL unless nonzero f32 runs) */
} bset;

/* One select path's context: its copy kernel and its copy of the inputs. */
typedef struct bpath {
  const struct sel_path *sel;
  clb_context_t ctx;
  copier cp; /* zeroed until made: copier_free frees what it holds */
  clb_tensor_t tx, tm, txnz, ts;
} bpath;

/* The inputs' random draws: element i of stream `stream` is a hash of both
 * (splitmix64's finalizer), so any thread makes any range and the data do not
 * depend on how many threads made them. */
static inline uint64_t draw(uint64_t stream, int64_t i) {
  uint64_t z = stream * 0xd1b54a32d192ed03ull + (uint64_t)i * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Runs fn over [0, n) in ranges of whole 4096-element blocks, one per host
 * thread (up to 32; at large n the inputs' loops and their first touch of
 * gigabytes are most of a run's host time). A thread that cannot start
 * leaves its range to the calling thread. */
typedef void (*range_fn)(int64_t lo, int64_t hi, void *arg);
typedef struct range_job {
  range_fn fn;
  void *arg;
  int64_t lo, hi;
} range_job;

static void *range_thread(void *p) {
  const range_job *j = p;
  j->fn(j->lo, j->hi, j->arg);
  return NULL;
}

static void par_ranges(int64_t n, range_fn fn, void *arg) {
  enum { MAX_THREADS = 32, BLOCK = 4096 };
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int64_t blocks = (n + BLOCK - 1) / BLOCK;
  int nt = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (int)cpus;
  if (blocks < nt) nt = blocks < 1 ? 1 : (int)blocks;
  if (n < (int64_t)1 << 20) nt = 1; /* small sizes: not worth a thread */
  range_job jobs[MAX_THREADS];
  pthread_t th[MAX_THREADS];
  int started[MAX_THREADS] = {0};
  for (int t = 0; t < nt; t++) {
    int64_t lo = blocks * t / nt * BLOCK, hi = blocks * (t + 1) / nt * BLOCK;
    jobs[t] = (range_job){fn, arg, lo, hi < n ? hi : n};
    if (t > 0) started[t] = pthread_create(&th[t], NULL, range_thread, &jobs[t]) == 0;
  }
  fn(jobs[0].lo, jobs[0].hi, arg);
  for (int t = 1; t < nt; t++) {
    if (started[t]) pthread_join(th[t], NULL);
    else fn(jobs[t].lo, jobs[t].hi, arg);
  }
}

/* masked_scatter's source element i (not kept on the host: the peer computes it) */
static inline float src_at(int64_t i) { return 1000.0f + (float)(i % 4096); }

/* Host peers: plain single-thread loops, branchless compaction, into o (sized
 * for the op's output plus one element). Each returns the count. */
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
  const uint32_t *x = (const uint32_t *)s->x;
  uint32_t *out = (uint32_t *)o;
  for (int64_t i = 0; i < s->n; i++) {
    /* a blend of bits, not a branch: a random mask would mispredict half the time */
    float v = src_at(k);
    uint32_t vb, keep = 0u - (uint32_t)(s->mask[i] != 0);
    memcpy(&vb, &v, sizeof vb);
    out[i] = (vb & keep) | (x[i] & ~keep);
    k += s->mask[i] != 0;
  }
  return k;
}

static int64_t host_run(bop op, const bset *s, void *o) {
  switch (op) {
  case OP_NONZERO_BOOL: return host_nonzero_bool(s, o);
  case OP_NONZERO_F32: return host_nonzero_f32(s, o);
  case OP_SELECT: return host_select(s, o);
  default: return host_scatter(s, o);
  }
}

/* Bytes of one element of op's output (nonzero: a row of rank indices). */
static size_t out_elem_bytes(bop op, int rank) {
  return op == OP_NONZERO_BOOL || op == OP_NONZERO_F32 ? 8 * (size_t)rank : sizeof(float);
}

static clb_status dev_run(bpath *d, bop op, clb_tensor_t *out) {
  switch (op) {
  case OP_NONZERO_BOOL: return clb_nonzero(d->ctx, d->tm, out);
  case OP_NONZERO_F32: return clb_nonzero(d->ctx, d->txnz, out);
  case OP_SELECT: return clb_masked_select(d->ctx, d->tx, d->tm, out);
  default: return clb_masked_scatter(d->ctx, d->tx, d->tm, d->ts, out);
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

static void path_inputs_free(bpath *d) {
  clb_tensor_t ts[] = {d->tx, d->tm, d->txnz, d->ts};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clb_tensor_free(ts[i]);
  d->tx = d->tm = d->txnz = d->ts = NULL;
}

static void set_free(bset *s) {
  free(s->mask);
  free(s->x);
  free(s->xnz);
  memset(s, 0, sizeof *s);
}

/* [64, 64] for 4096, [n / 4096, 4096] for other multiples of 4096, else [n]. */
static int shape_of(int64_t n, int64_t *rows, int64_t *cols) {
  if (n == 4096) *rows = 64, *cols = 64;
  else if (n % 4096 == 0) *rows = n / 4096, *cols = 4096;
  else *rows = 1, *cols = n;
  return *rows > 1 ? 2 : 1;
}

/* Writes `bytes` of host data into t's buffer and sets its sizes: straight from
 * the caller's array (clb_tensor_write would stage a private copy first). */
static clb_status write_direct(clb_context_t ctx, clb_tensor_t t, const int64_t *dims, const void *host, size_t bytes) {
  clb_status st = clb_tensor_set_sizes(ctx, t, dims);
  if (st != CLB_OK) return st;
  cl_int e = clEnqueueWriteBuffer(clb_context_cl_queue(ctx), clb_tensor_data_mem(t), CL_TRUE, 0, bytes, host, 0, NULL,
                                  NULL);
  return e == CL_SUCCESS ? CLB_OK : CLB_ERR_CL;
}

/* Zeroes bytes [lo, hi) of the buffer arg: its pages' first touch. */
static void touch_range(int64_t lo, int64_t hi, void *arg) {
  memset((unsigned char *)arg + lo, 0, (size_t)(hi - lo));
}

/* The values: multiples of 0.25 in [-250, 250]. */
static void values_range(int64_t lo, int64_t hi, void *arg) {
  const bset *s = arg;
  for (int64_t i = lo; i < hi; i++) s->x[i] = (float)(draw(0, i) % 2001) * 0.25f - 250.0f;
}

/* Host inputs for n elements; the f32 input of nonzero only when it runs (f32nz). */
static clb_status set_init(int64_t n, int f32nz, bset *s) {
  memset(s, 0, sizeof *s);
  s->n = n;
  s->rank = shape_of(n, &s->rows, &s->cols);
  size_t un = (size_t)n + 1;
  s->mask = malloc(un);
  s->x = malloc(un * sizeof(float));
  if (f32nz) s->xnz = malloc(un * sizeof(float));
  if (!s->mask || !s->x || (f32nz && !s->xnz)) return CLB_ERR_HOST_OOM;
  par_ranges(n, values_range, s);
  return CLB_OK;
}

/* A path's device inputs for s: the values written, the mask (and nonzero's
 * f32 input) made for set_density to write, masked_scatter's source. */
static clb_status path_inputs(bpath *d, const bset *s, int scatter) {
  clb_context_t ctx = d->ctx;
  int64_t n = s->n, dims[2] = {s->rank == 2 ? s->rows : n, s->cols};
  uint8_t dyn[2] = {1, 0};
  clb_status st;
  if ((st = clb_tensor_new(ctx, CLB_DTYPE_F32, s->rank, dims, dyn, &d->tx)) != CLB_OK) return st;
  if ((st = clb_tensor_new(ctx, CLB_DTYPE_BOOL, s->rank, dims, dyn, &d->tm)) != CLB_OK) return st;
  if (s->xnz && (st = clb_tensor_new(ctx, CLB_DTYPE_F32, s->rank, dims, dyn, &d->txnz)) != CLB_OK) return st;
  if ((st = write_direct(ctx, d->tx, dims, s->x, (size_t)n * sizeof(float))) != CLB_OK) return st;
  if (!scatter) return CLB_OK;
  if ((st = clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &n, NULL, &d->ts)) != CLB_OK) return st;
  /* the source through the host peer's formula, a chunk at a time */
  enum { CHUNK = 1 << 20 };
  float *buf = malloc(CHUNK * sizeof(float));
  if (!buf) return CLB_ERR_HOST_OOM;
  if ((st = clb_tensor_set_sizes(ctx, d->ts, &n)) != CLB_OK) {
    free(buf);
    return st;
  }
  cl_int e = CL_SUCCESS;
  for (int64_t i0 = 0; i0 < n && e == CL_SUCCESS; i0 += CHUNK) {
    int64_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
    for (int64_t i = 0; i < m; i++) buf[i] = src_at(i0 + i);
    e = clEnqueueWriteBuffer(clb_context_cl_queue(ctx), clb_tensor_data_mem(d->ts), CL_TRUE,
                             (size_t)i0 * sizeof(float), (size_t)m * sizeof(float), buf, 0, NULL, NULL);
  }
  free(buf);
  return e == CL_SUCCESS ? CLB_OK : CLB_ERR_CL;
}

typedef struct density_job {
  const bset *s;
  uint64_t stream; /* a stream of draws per call: each density a draw of its own */
  uint32_t thr;
  int all;
} density_job;

static void density_range(int64_t lo, int64_t hi, void *arg) {
  const density_job *j = arg;
  const bset *s = j->s;
  int r7 = (int)(lo % 7); /* i % 7, without a division per element */
  for (int64_t i = lo; i < hi; i++) {
    uint8_t m = j->all || (uint32_t)(draw(j->stream, i) >> 32) < j->thr;
    s->mask[i] = m;
    if (s->xnz) s->xnz[i] = m ? 1.0f + (float)r7 : (i & 1 ? -0.0f : 0.0f);
    r7 = r7 == 6 ? 0 : r7 + 1;
  }
}

/* A new mask at `density` (exact fraction of a uniform draw), and the values
 * of nonzero's f32 input under it, on the host. */
static void set_density(bset *s, double density) {
  static uint64_t calls = 0;
  density_job j = {s, ++calls, (uint32_t)(density * 4294967295.0), density >= 1.0};
  par_ranges(s->n, density_range, &j);
}

/* The mask and nonzero's f32 input of set_density, into a path's tensors. */
static clb_status path_density(bpath *d, const bset *s) {
  int64_t dims[2] = {s->rank == 2 ? s->rows : s->n, s->cols};
  clb_status st = write_direct(d->ctx, d->tm, dims, s->mask, (size_t)s->n);
  if (st == CLB_OK && s->xnz) st = write_direct(d->ctx, d->txnz, dims, s->xnz, (size_t)s->n * sizeof(float));
  return st;
}

/* Compares the device result with the host peer's output `want`, reading it a
 * chunk at a time. */
static clb_status check_result(clb_context_t ctx, bop op, const bset *s, clb_tensor_t out, const void *want,
                               int64_t hcount, int *ok) {
  *ok = 0;
  int64_t d[2] = {0, 0};
  clb_status st = clb_context_sync(ctx);
  if (st == CLB_OK) st = clb_tensor_sizes(ctx, out, d);
  if (st != CLB_OK) return st;
  int64_t elems = op == OP_SCATTER ? s->n : hcount;
  if (op != OP_SCATTER && d[0] != hcount) return CLB_OK;
  size_t total = (size_t)elems * out_elem_bytes(op, s->rank), chunk = (size_t)16 << 20;
  unsigned char *buf = malloc(chunk);
  if (!buf) return CLB_ERR_HOST_OOM;
  cl_int e = CL_SUCCESS;
  int same = 1;
  for (size_t off = 0; off < total && same && e == CL_SUCCESS; off += chunk) {
    size_t len = total - off < chunk ? total - off : chunk;
    e = clEnqueueReadBuffer(clb_context_cl_queue(ctx), clb_tensor_data_mem(out), CL_TRUE, off, len, buf, 0, NULL,
                            NULL);
    same = e == CL_SUCCESS && memcmp(buf, (const unsigned char *)want + off, len) == 0;
  }
  free(buf);
  if (e != CL_SUCCESS) return CLB_ERR_CL;
  *ok = same;
  return CLB_OK;
}

typedef struct result {
  double ms, copy_ms, host_ms, bytes, syncs, launches;
  int64_t count;
  int ok, reps;
} result;

/* Device time per op and density that a default run (no --reps) aims at. */
#define CLB_OPS_BUDGET_MS 3000.0

/* Where the time of a run goes besides the device (printed at the end). */
static double t_inputs_ms, t_peers_ms, t_checks_ms, t_device_ms;

/* The host peer of op on s into hout (sized for the output plus one element,
 * its pages touched already):
 * its first run is the reference the device results are checked against; up
 * to `most` runs are timed (3 at most), one when a run takes over an eighth of
 * CLB_OPS_BUDGET_MS (it is the slow part at large n). Returns the count. */
static int64_t host_peer(bop op, const bset *s, void *hout, int most, double *host_ms) {
  double p0 = clb_tool_now_ms(), th[3];
  int64_t count = 0;
  int h = 0;
  if (most > 3) most = 3;
  while (h < most) {
    double t0 = clb_tool_now_ms();
    volatile int64_t k = host_run(op, s, hout);
    th[h] = clb_tool_now_ms() - t0;
    if (h++ == 0) count = k;
    if (th[0] > CLB_OPS_BUDGET_MS / 8) break;
  }
  *host_ms = clb_tool_median(th, h);
  t_peers_ms += clb_tool_now_ms() - p0;
  return count;
}

/* Times one op at one density on one path: `reps` pairs of (op + clFinish,
 * copy of the same bytes + clFinish), interleaved so both see the same
 * machine; then checks the device result against the host peer's `want`
 * (count elements). r->host_ms, the host peer's time, is kept. */
static clb_status bench_one(bpath *d, bop op, const bset *s, int reps, int fixed_reps, const void *want,
                            int64_t count, result *r, char *err, size_t elen) {
  cl_command_queue q = clb_context_cl_queue(d->ctx);
  clb_status st = CLB_OK;
  double host_ms = r->host_ms;
  memset(r, 0, sizeof *r);
  r->host_ms = host_ms;
  r->count = count;
  r->bytes = op_bytes(op, s->n, count, s->rank);
  double *t = malloc(2 * (size_t)reps * sizeof(double));
  clb_tensor_t out = NULL;
  if (!t) return CLB_ERR_HOST_OOM;
  double *tc = t + reps;
  double d0 = clb_tool_now_ms();
  double pair_ms = 0;
  for (int w = 0; w < 2; w++) { /* warm-up: program builds, first touch of outputs */
    double w0 = clb_tool_now_ms();
    if ((st = dev_run(d, op, &out)) != CLB_OK) goto done;
    if (copier_run(&d->cp, (size_t)(r->bytes / 2)) != CL_SUCCESS) goto cl_fail;
    clFinish(q);
    pair_ms = clb_tool_now_ms() - w0;
  }
  /* without --reps, a large size takes fewer runs: about CLB_OPS_BUDGET_MS of
   * them per op and density, at least 3 */
  if (!fixed_reps && pair_ms * reps > CLB_OPS_BUDGET_MS) {
    int fit = (int)(CLB_OPS_BUDGET_MS / pair_ms);
    reps = fit < 3 ? 3 : fit;
  }
  r->reps = reps;
  clb_counters c0 = counters_of(d->ctx);
  for (int i = 0; i < reps; i++) {
    double t0 = clb_tool_now_ms();
    if ((st = dev_run(d, op, &out)) != CLB_OK) goto done;
    clFinish(q);
    double t1 = clb_tool_now_ms();
    if (copier_run(&d->cp, (size_t)(r->bytes / 2)) != CL_SUCCESS) goto cl_fail;
    clFinish(q);
    t[i] = t1 - t0;
    tc[i] = clb_tool_now_ms() - t1;
  }
  clb_counters c1 = counters_of(d->ctx);
  t_device_ms += clb_tool_now_ms() - d0;
  r->syncs = (double)(c1.host_syncs - c0.host_syncs) / reps;
  r->launches = (double)(c1.kernel_launches - c0.kernel_launches) / reps;
  r->ms = clb_tool_median(t, reps);
  r->copy_ms = clb_tool_median(tc, reps);
  /* a deferred device error would make the figures meaningless */
  double p0 = clb_tool_now_ms();
  st = check_result(d->ctx, op, s, out, want, count, &r->ok);
  t_checks_ms += clb_tool_now_ms() - p0;
  goto done;
cl_fail:
  snprintf(err, elen, "copy kernel launch failed");
  st = CLB_ERR_CL;
done:
  clb_tensor_free(out);
  free(t);
  return st;
}

static double gbps(double bytes, double ms) { return ms > 0 ? bytes / (ms * 1e6) : 0; }

static void report(int json, const char *style, const char *path, bop op, const bset *s, double density,
                   const result *r) {
  double g = gbps(r->bytes, r->ms), cg = gbps(r->bytes, r->copy_ms), hg = gbps(r->bytes, r->host_ms);
  char shape[48];
  if (s->rank == 2)
    snprintf(shape, sizeof shape, "%lldx%lld", (long long)s->rows, (long long)s->cols);
  else
    snprintf(shape, sizeof shape, "%lld", (long long)s->n);
  if (json)
    printf("{\"bench\":\"ops\",\"op\":\"%s\",\"n\":%lld,\"shape\":\"%s\",\"density\":%.2f,\"dtype\":\"%s\","
           "\"style\":\"%s\",\"path\":\"%s\",\"count\":%lld,\"bytes\":%.0f,\"reps\":%d,\"ms\":%.4f,\"gbps\":%.3f,"
           "\"copy_ms\":%.4f,\"copy_gbps\":%.3f,\"fraction_of_copy\":%.4f,\"host_ms\":%.4f,\"host_gbps\":%.3f,"
           "\"speed_vs_host\":%.3f,\"host_syncs\":%.2f,\"launches\":%.2f,\"ok\":%s}\n",
           OP_NAME[op], (long long)s->n, shape, density, OP_DTYPE[op], style, path, (long long)r->count, r->bytes,
           r->reps, r->ms, g, r->copy_ms, cg, cg > 0 ? g / cg : 0, r->host_ms, hg, r->ms > 0 ? r->host_ms / r->ms : 0,
           r->syncs, r->launches, r->ok ? "true" : "false");
  else
    printf("%-14s %-4s %-8s %9lld %-9s %5.0f%% %9.3f %7.2f %7.2f %6.2f %9.3f %7.2f %5.2f %3.0f %3s\n", OP_NAME[op],
           OP_DTYPE[op], path, (long long)s->n, shape, density * 100, r->ms, g, cg, cg > 0 ? g / cg : 0, r->host_ms,
           hg, r->syncs, r->launches, r->ok ? "ok" : "BAD");
  fflush(stdout);
}

static int usage(FILE *f) {
  fprintf(f,
          "usage: clbound bench ops [--json] [--quick] [--quiet] [--n 1..2147483648] [--reps 1..10000]\n"
          "                         [--style auto|cpu|gpu] [--op nonzero|masked_select|masked_scatter]\n"
          "                         [--density 0..1] [--path auto|lookback|three|single|both]\n"
          "  nonzero (bool and f32 input), masked_select and masked_scatter (f32 values, bool mask)\n"
          "  at N elements (default 16777216 = 4096x4096) and at 4096 (64x64), densities 1%%, 50%%, 99%%;\n"
          "  each against a copy kernel over the same bytes and a plain host loop, in the same run.\n"
          "  --path: the select ops' path (docs/dataops.md): the context's own (auto), one pass with\n"
          "  decoupled look-back (lookback), three launches (three), one launch with prefix counts\n"
          "  (single), or lookback then three (both: the default in the GPU kernel style)\n");
  return clb_arg_usage_rc(f);
}

/* The select paths --path names, as the switches each sets when its context is
 * made (docs/portability.md); NULL leaves a switch as the caller has it. */
typedef struct sel_path {
  const char *name, *lookback, *single;
} sel_path;
static const sel_path PATHS[] = {
    {"auto", NULL, NULL}, {"lookback", "on", NULL}, {"three", "off", "off"}, {"single", "off", "on"}};

/* A context of `style` on the path p: the switches set for its creation only. */
static clb_status path_context(clb_kernel_style style, const sel_path *p, clb_context_t *ctx) {
  const char *names[2] = {"CLBOUND_SELECT_LOOKBACK", "CLBOUND_SELECT_SINGLE"}, *vals[2] = {p->lookback, p->single};
  char *saved[2] = {NULL, NULL};
  for (int i = 0; i < 2; i++) {
    if (!vals[i]) continue;
    const char *old = getenv(names[i]);
    saved[i] = old ? strdup(old) : NULL;
    setenv(names[i], vals[i], 1);
  }
  clb_context_options o;
  clb_context_options_init(&o);
  o.kernel_style = style;
  clb_status st = clb_context_new(&o, ctx);
  for (int i = 0; i < 2; i++) {
    if (!vals[i]) continue;
    if (saved[i]) setenv(names[i], saved[i], 1);
    else unsetenv(names[i]);
    free(saved[i]);
  }
  return st;
}

/* "8 GiB", "1.5 GiB", "512 MiB" */
static const char *fmt_bytes(double b, char *buf, size_t len) {
  double gib = b / (1024.0 * 1024.0 * 1024.0);
  if (gib >= 1) snprintf(buf, len, gib == (double)(int64_t)gib ? "%.0f GiB" : "%.1f GiB", gib);
  else snprintf(buf, len, "%.0f MiB", b / (1024.0 * 1024.0));
  return buf;
}

/* Whether the device can hold a run at n: each buffer the run makes, in the
 * order it makes them, against CL_DEVICE_MAX_MEM_ALLOC_SIZE, and the most it
 * holds at once against CL_DEVICE_GLOBAL_MEM_SIZE: every path's inputs and
 * copy buffers (its contexts are all alive) and one output. Says which does
 * not fit. */
static int fits_device(clb_context_t ctx, int64_t n, const int *run, size_t copy_cap, int npaths) {
  cl_ulong max_alloc = 0, global = 0;
  clGetDeviceInfo(clb_context_cl_device(ctx), CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL);
  clGetDeviceInfo(clb_context_cl_device(ctx), CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global, &global, NULL);
  int64_t rows, cols;
  int rank = shape_of(n, &rows, &cols);
  double dn = (double)n;
  struct {
    const char *what;
    double bytes;
    int input;
  } bufs[] = {{"the f32 input", 4 * dn, 1},
              {"the bool mask", dn, 1},
              {"nonzero's f32 input", run[OP_NONZERO_F32] ? 4 * dn : 0, 1},
              {"masked_scatter's source", run[OP_SCATTER] ? 4 * dn : 0, 1},
              {"nonzero's output (i64 indices)", run[OP_NONZERO_BOOL] || run[OP_NONZERO_F32] ? 8.0 * rank * dn : 0, 0},
              {"masked_select's output", run[OP_SELECT] ? 4 * dn : 0, 0},
              {"masked_scatter's output", run[OP_SCATTER] ? 4 * dn : 0, 0},
              {"each of the copy kernel's two buffers", (double)copy_cap, 0}};
  double inputs = 0, most_out = 0;
  char b1[32], b2[32];
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
    if (max_alloc && bufs[i].bytes > (double)max_alloc) {
      fprintf(stderr, "%s: --n %lld needs a %s buffer; the device's largest is %s (%s); use a smaller --n\n", CMD,
              (long long)n, fmt_bytes(bufs[i].bytes, b1, sizeof b1), fmt_bytes((double)max_alloc, b2, sizeof b2),
              bufs[i].what);
      return 0;
    }
    if (bufs[i].input) inputs += bufs[i].bytes;
    else if (i + 1 < sizeof bufs / sizeof bufs[0] && bufs[i].bytes > most_out) most_out = bufs[i].bytes;
  }
  double need = npaths * (inputs + 2.0 * (double)copy_cap) + most_out;
  if (global && need > (double)global) {
    fprintf(stderr, "%s: --n %lld needs %s of device memory at once (inputs, one output, the copy kernel's buffers%s); "
            "the device has %s; use a smaller --n%s\n", CMD, (long long)n, fmt_bytes(need, b1, sizeof b1),
            npaths > 1 ? ", for each of the 2 paths" : "", fmt_bytes((double)global, b2, sizeof b2),
            npaths > 1 ? " or one --path" : "");
    return 0;
  }
  return 1;
}

int clb_bench_ops(int argc, char **argv) {
  if (argc < 1 || strcmp(argv[0], "ops") != 0) {
    fprintf(stderr, "clbound bench: unknown suite %s (ops, gemm, steps, whole-step, build-floor)\n", argc > 0 ? argv[0] : "(none)");
    return 2;
  }
  if (clb_arg_help(argc, argv)) return usage(stdout);
  int json = 0, quick = 0, reps = 0, quiet = 0;
  const char *only_op = NULL, *path_arg = NULL;
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
    else if (strcmp(argv[i], "--path") == 0 && i + 1 < argc) path_arg = argv[++i];
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
  if (path_arg && strcmp(path_arg, "both") != 0 && strcmp(path_arg, "auto") != 0 &&
      strcmp(path_arg, "lookback") != 0 && strcmp(path_arg, "three") != 0 && strcmp(path_arg, "single") != 0)
    return usage(stderr);
  const int fixed_reps = reps > 0;
  if (reps <= 0) reps = quick ? 3 : 11;
  int run[OP_COUNT];
  for (int op = 0; op < OP_COUNT; op++) run[op] = !only_op || strcmp(only_op, OP_NAME[op]) == 0;
  clb_progress_mode pm = clb_progress_mode_for(quiet);
  clb_context_t ctx = NULL;
  clb_status st = path_context(style, &PATHS[0], &ctx);
  if (st != CLB_OK) {
    fprintf(stderr, "%s: %s: %s\n", CMD, clb_status_str(st), clb_last_errmsg());
    return 1;
  }
  const int gpu = clb_context_kernel_style(ctx) == CLB_KERNEL_STYLE_GPU;
  const char *sname = gpu ? "gpu" : "cpu";
  /* the paths to run: the GPU style's two one-launch-or-three choices by default */
  const sel_path *paths[2] = {&PATHS[0], NULL};
  int npaths = 1;
  if ((!path_arg && gpu) || (path_arg && strcmp(path_arg, "both") == 0)) {
    paths[0] = &PATHS[1], paths[1] = &PATHS[2], npaths = 2;
  } else if (path_arg) {
    for (size_t i = 0; i < sizeof PATHS / sizeof PATHS[0]; i++)
      if (strcmp(path_arg, PATHS[i].name) == 0) paths[0] = &PATHS[i];
  }
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
  /* the copy kernel's buffers: half the bytes of the largest op run, all true */
  double most = 0;
  for (int op = 0; op < OP_COUNT; op++) {
    int64_t r_, c_;
    double b = run[op] ? op_bytes((bop)op, big, big, shape_of(big, &r_, &c_)) : 0;
    if (b > most) most = b;
  }
  size_t copy_cap = (size_t)(most / 2) + 64;
  if (!fits_device(ctx, big, run, copy_cap, npaths)) {
    clb_context_free(ctx);
    return 1;
  }
  if (!json) {
    printf("clbound bench ops on %s (%s kernel style), median of %d runs%s, copy kernel as reference\n", name,
           sname, reps, fixed_reps ? "" : " (fewer, at least 3, where that takes over 3 s)");
    printf("GB/s = (input bytes + output bytes) / time; copy: the same bytes moved by a copy kernel, same run;\n"
           "host: a plain single-thread C loop (median of up to 3 runs); path: the select ops' path\n");
    printf("%-14s %-4s %-8s %9s %-9s %6s %9s %7s %7s %6s %9s %7s %5s %3s\n", "op", "in", "path", "n", "shape", "dens",
           "ms", "GB/s", "copy", "frac", "host ms", "host", "syncs", "lch");
  }
  char err[160] = "";
  int rc = 0;
  double t_start = clb_tool_now_ms();
  /* one context per path, all alive, so that each input, mask and host peer is
   * made once and measured on every path */
  bpath dp[2];
  memset(dp, 0, sizeof dp);
  for (int pi = 0; pi < npaths && rc == 0; pi++) {
    dp[pi].sel = paths[pi];
    if (pi == 0 && paths[0] == &PATHS[0]) {
      dp[0].ctx = ctx;
    } else if ((st = path_context(style, paths[pi], &dp[pi].ctx)) != CLB_OK) {
      fprintf(stderr, "%s: %s: %s\n", CMD, clb_status_str(st), clb_last_errmsg());
      rc = 1;
      break;
    }
    if ((st = copier_init(dp[pi].ctx, copy_cap, &dp[pi].cp, err, sizeof err)) != CLB_OK) {
      fprintf(stderr, "%s: %s\n", CMD, err);
      rc = 1;
      break;
    }
  }
  if (paths[0] != &PATHS[0]) clb_context_free(ctx); /* the probe's context: no path uses it */
  ctx = NULL;
  for (int si = 0; si < nsizes && rc == 0; si++) {
    bset s;
    int r = si == 0 ? reps : reps * 5; /* small sizes are cheap and noisier */
    double g0 = clb_tool_now_ms();
    st = set_init(sizes[si], run[OP_NONZERO_F32], &s);
    for (int pi = 0; pi < npaths && st == CLB_OK; pi++) {
      ctx = dp[pi].ctx;
      st = path_inputs(&dp[pi], &s, run[OP_SCATTER]);
    }
    t_inputs_ms += clb_tool_now_ms() - g0;
    if (st != CLB_OK) {
      fprintf(stderr, "%s: inputs of %lld elements: %s: %s\n", CMD, (long long)sizes[si], clb_status_str(st),
              ctx ? clb_context_errmsg(ctx) : "host memory");
      rc = 1;
    }
    /* the host peer's output, sized for the largest op run, plus one element */
    size_t obytes = 0;
    for (int op = 0; op < OP_COUNT; op++) {
      size_t b_ = ((size_t)s.n + 1) * out_elem_bytes((bop)op, s.rank);
      if (run[op] && b_ > obytes) obytes = b_;
    }
    void *hout = rc ? NULL : malloc(obytes);
    if (!rc && !hout) {
      fprintf(stderr, "%s: %lld elements: no host memory for the host peer's output\n", CMD, (long long)s.n);
      rc = 1;
    }
    if (hout) { /* its first touch, outside the peers' timing */
      g0 = clb_tool_now_ms();
      par_ranges((int64_t)obytes, touch_range, hout);
      t_peers_ms += clb_tool_now_ms() - g0;
    }
    for (size_t di = 0; di < ndens && rc == 0; di++) {
      g0 = clb_tool_now_ms();
      set_density(&s, densities[di]);
      for (int pi = 0; pi < npaths && st == CLB_OK; pi++) st = path_density(&dp[pi], &s);
      t_inputs_ms += clb_tool_now_ms() - g0;
      if (st != CLB_OK) {
        fprintf(stderr, "%s: %s: %s\n", CMD, clb_status_str(st), clb_context_errmsg(dp[0].ctx));
        rc = 1;
        break;
      }
      char label[96];
      snprintf(label, sizeof label, "bench ops n=%lld density %.2f", (long long)sizes[si], densities[di]);
      clb_progress *pr = clb_progress_begin(pm, label, OP_COUNT * npaths);
      for (int op = 0; op < OP_COUNT && rc == 0; op++) {
        if (!run[op]) continue;
        result res;
        int64_t count = host_peer((bop)op, &s, hout, r, &res.host_ms);
        for (int pi = 0; pi < npaths && rc == 0; pi++) {
          clb_progress_update(pr, op * npaths + pi, -1);
          st = bench_one(&dp[pi], (bop)op, &s, r, fixed_reps, hout, count, &res, err, sizeof err);
          if (st != CLB_OK) {
            fprintf(stderr, "%s: %s %s (%s path): %s: %s\n", CMD, OP_NAME[op], OP_DTYPE[op], dp[pi].sel->name,
                    clb_status_str(st), st == CLB_ERR_CL && err[0] ? err : clb_context_errmsg(dp[pi].ctx));
            rc = 1;
            break;
          }
          clb_progress_hold(pr);
          report(json, sname, dp[pi].sel->name, (bop)op, &s, densities[di], &res);
          clb_progress_release(pr);
          if (!res.ok) {
            fprintf(stderr, "%s: %s %s at density %.2f (%s path): the device result differs from the host's\n", CMD,
                    OP_NAME[op], OP_DTYPE[op], densities[di], dp[pi].sel->name);
            rc = 1;
          }
        }
      }
      clb_progress_end(pr);
    }
    free(hout);
    for (int pi = 0; pi < npaths; pi++) path_inputs_free(&dp[pi]);
    set_free(&s);
  }
  for (int pi = 0; pi < npaths; pi++) {
    copier_free(&dp[pi].cp);
    clb_context_free(dp[pi].ctx);
  }
  double total = clb_tool_now_ms() - t_start;
  if (!quiet)
    fprintf(stderr,
            "%s: %.1f s: inputs made and written %.1f s, host peers %.1f s, result checks %.1f s, device runs and "
            "copies %.1f s, the rest (contexts, builds) %.1f s\n",
            CMD, total / 1e3, t_inputs_ms / 1e3, t_peers_ms / 1e3, t_checks_ms / 1e3, t_device_ms / 1e3,
            (total - t_inputs_ms - t_peers_ms - t_checks_ms - t_device_ms) / 1e3);
  return rc;
}
