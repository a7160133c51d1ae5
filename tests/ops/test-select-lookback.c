/* test-select-lookback.c: the select ops in one pass with decoupled look-back
 * (sel_lookback, kernels/select-gpu.cl), forced with CLBOUND_SELECT_LOOKBACK=on
 * in the GPU geometry (local size 256: tiles of 2,048 elements). nonzero (rank
 * 1 and 2), nonzero_static, masked_select (element and broadcast row masks) and
 * masked_scatter against a plain-C reference, exactly, at sizes 0, 1, around
 * one, two and three tiles and at the bound, densities 0, 1%, 50% and 100%,
 * every dtype, canaries after every output, clamped outputs and a short source;
 * one launch and no host sync per op.
 *
 * masked_select's cases (element and row masks: each other op is one more
 * program to build per order, and the look-back is the same code) run with the
 * tiles handed out in other orders
 * (CLBOUND_TEST_SELECT_LOOKBACK, docs/portability.md), so the look-back meets
 * every state of a predecessor even where groups run one after another
 * (Oclgrind) or a few at a time (PoCL): reverse (every predecessor not handed
 * out yet: the group counts it itself), interleave with agg-only (tiles 2, 0,
 * 3, 1, 6, 4, ...: some predecessors done, some not handed out, and odd tiles
 * publish only their aggregate, so a walk adds aggregates until an inclusive
 * prefix), and spin=0 with epochs=2 (a word not ready is counted at once, the
 * bounded wait's way out; the status words are cleared every second launch).
 * The look-back reads a window of 32 status words at once: interleave and
 * agg-only again with a window of 2 (windows end inside a run of aggregates)
 * and reverse with a window of 1 (one word at a time, as before windows).
 * Every op runs, f32, with tiles of 4 and 16 elements per work-item and with
 * the element-by-element loads and stores (items=4, items=16, unstaged): they
 * change the staged loads and stores each op has of its own.
 * Last, which path a context takes: the trait (and with it, sel_single for a
 * bound within one tile), CLBOUND_SELECT_LOOKBACK on/off, the CPU style, and
 * bad values. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "ops-test.h"

#define B 8192 /* the bound of every case: four tiles */
#define C 8    /* columns of the rank-2 cases */
#define S 1500 /* nonzero_static's size */

static uint64_t launches_of(clb_context_t ctx) {
  clb_counters c;
  c.struct_size = sizeof c;
  clb_context_counters(ctx, &c);
  return c.kernel_launches;
}

/* A GPU-style context with the look-back forced and the test knobs `knobs`
 * (NULL: none). */
static clb_context_t lb_context(const char *lookback, const char *knobs) {
  setenv("CLBOUND_SELECT_LOOKBACK", lookback, 1);
  if (knobs) setenv("CLBOUND_TEST_SELECT_LOOKBACK", knobs, 1);
  clb_context_t ctx = ops_context(CLB_KERNEL_STYLE_GPU);
  unsetenv("CLBOUND_SELECT_LOOKBACK");
  unsetenv("CLBOUND_TEST_SELECT_LOOKBACK");
  return ctx;
}

static double xv[B], mv[B], src[B], rm[B / C], got[2 * B], want[2 * B];

/* Compares n results with the reference; names the case on a mismatch. */
static void expect_same(const char *op, const char *mode, clb_dtype dt, int64_t n, double density, int64_t ng,
                        const double *g, int64_t nw, const double *w) {
  clb_test_checks++;
  int64_t bad = ng != nw ? 1 : 0, first = -1;
  for (int64_t i = 0; i < nw && i < ng; i++)
    if (!ops_same(g[i], w[i])) {
      if (first < 0) first = i;
      bad++;
    }
  if (bad)
    CLB_FAIL_AT("%s (%s order), %s, n %lld, density %.2f: %lld results, want %lld; %lld differ, first at %lld",
                op, mode, clb_dtype_name(dt), (long long)n, density, (long long)ng, (long long)nw, (long long)bad,
                (long long)first);
}

/* Runs one op (already enqueued by the caller between l0 and now): one launch,
 * no host sync. */
static void expect_one_launch(clb_context_t ctx, uint64_t l0, uint64_t s0, const char *op) {
  EXPECT_EQ_I(launches_of(ctx) - l0, 1);
  EXPECT_EQ_I(clb_test_counter_syncs(ctx) - s0, 0);
  (void)op;
}

/* Every op on one input of n elements of dt at `density` (all_ops 0: masked_select
 * alone, whose element and row masks cover the look-back; each op is a program
 * of its own, and PoCL takes seconds to build one). */
static void run_case(clb_context_t ctx, const char *mode, clb_dtype dt, int64_t n, double density, int all_ops) {
  int64_t dims[2], rows = n / C;
  uint8_t y1 = 1, y2[2] = {1, 0};
  ops_gen(dt, n, density, xv);
  ops_roundtrip(dt, xv, n);
  ops_gen(CLB_DTYPE_BOOL, n, density, mv);
  ops_gen(CLB_DTYPE_BOOL, rows, density, rm);
  ops_gen(dt, B, 1.0, src);
  ops_roundtrip(dt, src, B);
  ops_sel_inputs in;
  ops_sel_inputs_new(ctx, dt, B, n, xv, mv, B / C, C, rows, xv, rm, B, src, &in);
  clb_tensor_t x = in.x, m = in.m, x2 = in.x2, rmask = in.rmask, s = in.s;
  int64_t ob1[2] = {B, 1}, ob2[2] = {B, 2}, sb = B, sz = S;
  clb_tensor_t nz1 = NULL, nz2 = NULL, sel = NULL, rsel = NULL, sc = NULL, st = NULL, cnt = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 2, ob1, y2, &nz1));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 2, ob2, y2, &nz2));
  CL_OK(ctx, clb_tensor_new(ctx, dt, 1, &sb, &y1, &sel));
  CL_OK(ctx, clb_tensor_new(ctx, dt, 1, &sb, &y1, &rsel));
  clb_tensor_t outs[] = {nz1, nz2, sel, rsel};
  for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++) clb_test_canary_fill(ctx, outs[k]);

  uint64_t l0 = launches_of(ctx), s0 = clb_test_counter_syncs(ctx);
  if (!all_ops) {
    CL_OK(ctx, clb_masked_select(ctx, x, m, &sel));
    expect_one_launch(ctx, l0, s0, "masked_select");
    l0 = launches_of(ctx);
    CL_OK(ctx, clb_masked_select(ctx, x2, rmask, &rsel));
    expect_one_launch(ctx, l0, s0, "masked_select, row mask");
    goto check_select;
  }
  CL_OK(ctx, clb_nonzero(ctx, x, &nz1));
  expect_one_launch(ctx, l0, s0, "nonzero");
  l0 = launches_of(ctx);
  CL_OK(ctx, clb_nonzero(ctx, x2, &nz2));
  expect_one_launch(ctx, l0, s0, "nonzero rank 2");
  l0 = launches_of(ctx);
  CL_OK(ctx, clb_nonzero_static(ctx, x, sz, -5, &st, &cnt));
  expect_one_launch(ctx, l0, s0, "nonzero_static");
  l0 = launches_of(ctx);
  CL_OK(ctx, clb_masked_select(ctx, x, m, &sel));
  expect_one_launch(ctx, l0, s0, "masked_select");
  l0 = launches_of(ctx);
  CL_OK(ctx, clb_masked_select(ctx, x2, rmask, &rsel));
  expect_one_launch(ctx, l0, s0, "masked_select, row mask");
  l0 = launches_of(ctx);
  CL_OK(ctx, clb_masked_scatter(ctx, x, m, s, &sc));
  expect_one_launch(ctx, l0, s0, "masked_scatter");

  /* nonzero, rank 1 and 2 */
  int64_t nw = 0;
  for (int64_t i = 0; i < n; i++)
    if (ops_nz(xv[i])) want[nw++] = (double)i;
  int64_t ng = clb_test_read(ctx, nz1, dims, got, B);
  expect_same("nonzero", mode, dt, n, density, ng, got, nw, want);
  clb_test_canary_check(ctx, nz1, (size_t)ng * 8, "nonzero output");
  nw = 0;
  for (int64_t i = 0; i < rows * C; i++)
    if (ops_nz(xv[i])) want[nw++] = (double)(i / C), want[nw++] = (double)(i % C);
  ng = clb_test_read(ctx, nz2, dims, got, 2 * B);
  expect_same("nonzero rank 2", mode, dt, n, density, ng, got, nw, want);
  clb_test_canary_check(ctx, nz2, (size_t)ng * 8, "nonzero rank-2 output");
  /* nonzero_static: the first S indices, then the fill; the whole count */
  nw = 0;
  int64_t total = 0;
  for (int64_t i = 0; i < n; i++)
    if (ops_nz(xv[i]) && total++ < S) want[nw++] = (double)i;
  while (nw < S) want[nw++] = -5;
  ng = clb_test_read(ctx, st, dims, got, S);
  expect_same("nonzero_static", mode, dt, n, density, ng, got, nw, want);
  double c0 = -1;
  clb_test_read(ctx, cnt, NULL, &c0, 1);
  EXPECT_EQ_I((int64_t)c0, total);
  /* masked_select, element mask and row mask */
check_select:
  nw = 0;
  for (int64_t i = 0; i < n; i++)
    if (mv[i] != 0) want[nw++] = xv[i];
  ng = clb_test_read(ctx, sel, dims, got, B);
  expect_same("masked_select", mode, dt, n, density, ng, got, nw, want);
  clb_test_canary_check(ctx, sel, (size_t)ng * clb_dtype_size(dt), "masked_select output");
  nw = 0;
  for (int64_t r = 0; r < rows; r++)
    if (rm[r] != 0)
      for (int c = 0; c < C; c++) want[nw++] = xv[r * C + c];
  ng = clb_test_read(ctx, rsel, dims, got, B);
  expect_same("masked_select, row mask", mode, dt, n, density, ng, got, nw, want);
  clb_test_canary_check(ctx, rsel, (size_t)ng * clb_dtype_size(dt), "masked_select (row mask) output");
  if (!all_ops) goto done;
  /* masked_scatter */
  for (int64_t i = 0, k = 0; i < n; i++) want[i] = mv[i] != 0 ? src[k++] : xv[i];
  ng = clb_test_read(ctx, sc, dims, got, B);
  expect_same("masked_scatter", mode, dt, n, density, ng, got, n, want);
done:;
  ops_sel_inputs_free(&in);
  clb_tensor_t all[] = {nz1, nz2, sel, rsel, sc, st, cnt};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) clb_tensor_free(all[k]);
}

/* Outputs whose bound is below the count get their first `bound` results and
 * nothing past them, and the sync says so; a short source keeps x's values past
 * its end. */
static void run_overflow(clb_context_t ctx) {
  int64_t b = B, n = B, ob[2] = {3000, 1}, sb = 3000, small = 1000;
  uint8_t y = 1, oy[2] = {1, 0};
  for (int64_t i = 0; i < n; i++) xv[i] = (double)(i + 1), mv[i] = 1, src[i] = -(double)i;
  clb_tensor_t x = NULL, m = NULL, nz = NULL, sel = NULL, s = NULL, sc = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &b, &y, &x));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 1, &b, &y, &m));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 2, ob, oy, &nz));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &sb, &y, &sel));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &small, NULL, &s));
  clb_test_write(ctx, x, &n, xv);
  clb_test_write(ctx, m, &n, mv);
  clb_test_write(ctx, s, &small, src);
  clb_test_canary_fill(ctx, nz);
  clb_test_canary_fill(ctx, sel);
  CL_OK(ctx, clb_nonzero(ctx, x, &nz));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_BOUND_EXCEEDED, "8192 exceeds its bound 3000");
  clb_test_canary_check(ctx, nz, 3000 * 8, "clamped nonzero output");
  CL_OK(ctx, clb_masked_select(ctx, x, m, &sel));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_BOUND_EXCEEDED, "masked_select");
  clb_test_canary_check(ctx, sel, 3000 * 4, "clamped masked_select output");
  /* the clamped rows are the first ones (read with OpenCL: the tensor is marked) */
  static float row[3000];
  REQUIRE_TRUE(clEnqueueReadBuffer(clb_context_cl_queue(ctx), clb_tensor_data_mem(sel), CL_TRUE, 0, sizeof row, row, 0,
                                   NULL, NULL) == CL_SUCCESS);
  int64_t bad = 0;
  for (int i = 0; i < 3000; i++) bad += row[i] != (float)(i + 1);
  EXPECT_EQ_I(bad, 0);
  CL_OK(ctx, clb_masked_scatter(ctx, x, m, s, &sc));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_SHORT_SOURCE, "masked_scatter");
  REQUIRE_TRUE(clEnqueueReadBuffer(clb_context_cl_queue(ctx), clb_tensor_data_mem(sc), CL_TRUE, 0, sizeof row, row, 0,
                                   NULL, NULL) == CL_SUCCESS);
  bad = 0;
  for (int i = 0; i < 3000; i++) bad += row[i] != (float)(i < small ? -(double)i : (double)(i + 1));
  EXPECT_EQ_I(bad, 0);
  clb_tensor_t all[] = {x, m, nz, sel, s, sc};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) clb_tensor_free(all[k]);
}

/* Launches of a nonzero over 70,000 elements (past the one-launch crossover of
 * sel_single) in a context of `style` with CLBOUND_SELECT_LOOKBACK=lookback. */
static uint64_t launches_big(clb_kernel_style style, const char *lookback) {
  if (lookback) setenv("CLBOUND_SELECT_LOOKBACK", lookback, 1);
  clb_context_t ctx = ops_context(style);
  unsetenv("CLBOUND_SELECT_LOOKBACK");
  int64_t b = 70000;
  clb_tensor_t x = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &b, NULL, &x));
  uint64_t l0 = launches_of(ctx);
  CL_OK(ctx, clb_nonzero(ctx, x, &o));
  uint64_t l = launches_of(ctx) - l0;
  CL_OK(ctx, clb_context_sync(ctx));
  clb_tensor_free(x);
  clb_tensor_free(o);
  clb_context_free(ctx);
  return l;
}

/* The builds log of a context: whether a select-gpu.cl program with
 * SEL_LOOKBACK was built or loaded. */
static void on_builds(void *user, const char *category, const char *line) {
  (void)category;
  if (strstr(line, "select-gpu.cl") && strstr(line, "SEL_LOOKBACK")) *(int *)user = 1;
}

/* With the trait forward progress (as on NVIDIA; CLBOUND_TEST_SELECT_LOOKBACK=progress)
 * and no switch set: a nonzero over n elements takes one launch, of sel_lookback
 * above one tile (2,048 elements in the GPU geometry), of sel_single within one. */
static void expect_auto_path(int64_t n) {
  setenv("CLBOUND_TEST_SELECT_LOOKBACK", "progress", 1);
  clb_context_t ctx = ops_context(CLB_KERNEL_STYLE_GPU);
  unsetenv("CLBOUND_TEST_SELECT_LOOKBACK");
  int lookback = 0;
  clb_context_set_log(ctx, CLB_LOG_BUILDS, on_builds, &lookback);
  clb_tensor_t x = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &n, NULL, &x));
  CL_OK(ctx, clb_fill(ctx, x, 1.0));
  uint64_t l0 = launches_of(ctx);
  CL_OK(ctx, clb_nonzero(ctx, x, &o));
  EXPECT_EQ_I(launches_of(ctx) - l0, 1);
  int64_t d[2] = {0, 0};
  CL_OK(ctx, clb_tensor_sizes(ctx, o, d));
  EXPECT_EQ_I(d[0], n);
  clb_test_checks++;
  if (lookback != (n > 2048))
    CLB_FAIL_AT("nonzero of %lld elements with forward progress: %s, want %s", (long long)n,
                lookback ? "sel_lookback" : "not sel_lookback", n > 2048 ? "sel_lookback" : "sel_single");
  clb_tensor_free(x);
  clb_tensor_free(o);
  clb_context_free(ctx);
}

/* Which path a context takes, and bad switch values. */
static void test_paths(void) {
  clb_context_options o;
  clb_context_options_init(&o);
  clb_context_t probe = clb_test_context(&o);
  char vendor[128] = "", platform[128] = "";
  cl_device_type type = 0;
  clGetDeviceInfo(clb_context_cl_device(probe), CL_DEVICE_VENDOR, sizeof vendor, vendor, NULL);
  clGetDeviceInfo(clb_context_cl_device(probe), CL_DEVICE_TYPE, sizeof type, &type, NULL);
  cl_platform_id plat = NULL;
  clGetDeviceInfo(clb_context_cl_device(probe), CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL);
  clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof platform, platform, NULL);
  clb_context_free(probe);
  /* the trait: NVIDIA GPUs only (docs/dataops.md) */
  int nvidia = (type & CL_DEVICE_TYPE_GPU) && (strstr(vendor, "NVIDIA") || strstr(platform, "NVIDIA"));
  EXPECT_EQ_I(launches_big(CLB_KERNEL_STYLE_GPU, NULL), nvidia ? 1 : 3);
  EXPECT_EQ_I(launches_big(CLB_KERNEL_STYLE_GPU, "on"), 1);
  EXPECT_EQ_I(launches_big(CLB_KERNEL_STYLE_GPU, "off"), 3);
  expect_auto_path(2048);
  expect_auto_path(2049);
  expect_auto_path(70000);
  if (ops_style_runs(CLB_KERNEL_STYLE_CPU, "ops/select-lookback"))
    EXPECT_EQ_I(launches_big(CLB_KERNEL_STYLE_CPU, "on"), 3); /* the CPU style has no one-pass kernel */
  /* every boolean spelling of the one parser (runtime/core/env.c); a bad value
   * warns and leaves the default path */
  EXPECT_EQ_I(launches_big(CLB_KERNEL_STYLE_GPU, "YES"), 1);
  EXPECT_EQ_I(launches_big(CLB_KERNEL_STYLE_GPU, "false"), 3);
  EXPECT_EQ_I(launches_big(CLB_KERNEL_STYLE_GPU, "sometimes"), nvidia ? 1 : 3);
  static const char *const bad[] = {"sideways", "epochs=0", "spin=x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("CLBOUND_TEST_SELECT_LOOKBACK", bad[i], 1);
    clb_context_t ctx = NULL;
    clb_status st = clb_context_new(&o, &ctx);
    unsetenv("CLBOUND_TEST_SELECT_LOOKBACK");
    EXPECT_EQ_I(st, CLB_OK);
    clb_context_free(ctx);
  }
}

int main(void) {
  /* the GPU geometry (tiles of 256 x 8), unless the caller set one */
  setenv("CLBOUND_GEOMETRY", "gpu,cu=4", 0);
  const int small = clb_test_small();
  /* name, switches, whether every op runs (else masked_select alone) */
  static const struct {
    const char *name, *knobs;
    int all_ops;
  } modes[] = {{"ticket", NULL, 1},
               {"reverse", "reverse", 0},
               {"interleave, agg-only", "interleave,agg-only", 0},
               {"spin=0, epochs=2", "spin=0,epochs=2", 0},
               {"interleave, agg-only, a window of 2", "interleave,agg-only,window=2", 0},
               {"reverse, a window of 1", "reverse,window=1", 0},
               {"tiles of 256 x 4", "items=4", 1},
               {"tiles of 256 x 16", "items=16", 1},
               {"unstaged", "unstaged", 1}};
  static const int64_t sizes[] = {0, 1, 2047, 2048, 2049, 4095, 4096, 4097, 6143, 6145, B};
  static const int64_t small_sizes[] = {0, 1, 2049, 4097, B};
  static const double densities[] = {0.0, 0.01, 0.5, 1.0};
  for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++) {
    clb_context_t ctx = lb_context("on", modes[mi].knobs);
    int fp64 = ops_has_fp64(ctx);
    for (int dt = 0; dt < CLB_DTYPE_COUNT; dt++) {
      if (dt == CLB_DTYPE_F64 && !fp64) continue;
      /* the other orders change only the look-back, not what a dtype changes: f32 */
      if (mi > 0 && dt != CLB_DTYPE_F32) continue;
      if (small && dt != CLB_DTYPE_F32 && (mi > 0 || dt != CLB_DTYPE_BOOL)) continue;
      CLB_TEST_CASE("ops/select-lookback, %s order, %s", modes[mi].name, clb_dtype_name((clb_dtype)dt));
      const int64_t *ns = small ? small_sizes : sizes;
      size_t nn = small ? sizeof small_sizes / sizeof small_sizes[0] : sizeof sizes / sizeof sizes[0];
      for (size_t i = 0; i < nn; i++)
        for (size_t d = small ? 2 : 0; d < (small ? 3 : 4); d++)
          run_case(ctx, modes[mi].name, (clb_dtype)dt, ns[i], densities[d], modes[mi].all_ops);
    }
    if (mi == 0) {
      CLB_TEST_CASE("ops/select-lookback, %s order: clamped outputs and a short source", modes[mi].name);
      run_overflow(ctx);
    }
    clb_context_free(ctx);
  }
  if (!small) {
    CLB_TEST_CASE("ops/select-lookback: which path a context takes");
    test_paths();
  }
  return clb_test_finish("ops/select-lookback");
}
