/* test-select-launch.c: the launches of the data ops. nonzero, masked_select
 * and masked_scatter in one launch (sel_single) against the three-launch path
 * (CLBOUND_SELECT_SINGLE=on / off) and a host reference, at sizes 0, 1, the
 * bound and in between, random masks, both kernel styles, canaries after the
 * outputs; the status bits raised from the one launch; and reshapes that
 * launch nothing: static ones, and dynamic ones whose record the select op that
 * wrote their input wrote too (eager, and a graph's nonzero -> reshape). Counts,
 * not times. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "clbound/graph.h"
#include "ops-test.h"

static uint64_t launches_of(clb_context_t ctx) {
  clb_counters c;
  c.struct_size = sizeof c;
  clb_context_counters(ctx, &c);
  return c.kernel_launches;
}

/* A context of `style` whose select ops take the path `single` (on, off, auto). */
/* One launch or three: the one-pass select with look-back, which a device with
 * forward progress across work-groups runs by default (NVIDIA GPUs), is off
 * here; ops/select-lookback tests it. */
static clb_context_t context_with(clb_kernel_style style, const char *single) {
  setenv("CLBOUND_SELECT_SINGLE", single, 1);
  setenv("CLBOUND_SELECT_LOOKBACK", "off", 1);
  clb_context_t ctx = ops_context(style);
  unsetenv("CLBOUND_SELECT_SINGLE");
  unsetenv("CLBOUND_SELECT_LOOKBACK");
  return ctx;
}

#define B 3000     /* the bound of the 1-D cases */
#define R 160      /* rows of the row-mask case */
#define C 19       /* their length */

/* One path's results for one input: nonzero, masked_select (element mask),
 * masked_select (row mask), masked_scatter, each read back as doubles. */
typedef struct results {
  int64_t n_nz, n_sel, n_rows, n_sc;
  double nz[B], sel[B], rows[R * C], sc[B];
  uint64_t launches[4];
} results;

static void run_path(clb_context_t ctx, int64_t n, int64_t nr, const double *xv, const double *mv,
                     const double *tv, const double *rm, const double *src, results *r) {
  int64_t b1 = B, dims[2];
  uint8_t y1 = 1;
  ops_sel_inputs in;
  ops_sel_inputs_new(ctx, CLB_DTYPE_F32, B, n, xv, mv, R, C, nr, tv, rm, B, src, &in);
  clb_tensor_t x = in.x, m = in.m, t = in.x2, rmask = in.rmask, s = in.s;
  int64_t ob[2] = {B, 1};
  uint8_t oy[2] = {1, 0};
  clb_tensor_t onz = NULL, osel = NULL, orows = NULL, osc = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 2, ob, oy, &onz));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &b1, &y1, &osel));
  int64_t rb = R * C;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &rb, &y1, &orows));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &b1, &y1, &osc));
  clb_tensor_t outs[4] = {onz, osel, orows, osc};
  for (int k = 0; k < 4; k++) clb_test_canary_fill(ctx, outs[k]);
  uint64_t l0 = launches_of(ctx);
  CL_OK(ctx, clb_nonzero(ctx, x, &onz));
  r->launches[0] = launches_of(ctx) - l0;
  l0 = launches_of(ctx);
  CL_OK(ctx, clb_masked_select(ctx, x, m, &osel));
  r->launches[1] = launches_of(ctx) - l0;
  l0 = launches_of(ctx);
  CL_OK(ctx, clb_masked_select(ctx, t, rmask, &orows));
  r->launches[2] = launches_of(ctx) - l0;
  l0 = launches_of(ctx);
  CL_OK(ctx, clb_masked_scatter(ctx, x, m, s, &osc));
  r->launches[3] = launches_of(ctx) - l0;
  r->n_nz = clb_test_read(ctx, onz, dims, r->nz, B);
  r->n_sel = clb_test_read(ctx, osel, dims, r->sel, B);
  r->n_rows = clb_test_read(ctx, orows, dims, r->rows, R * C);
  r->n_sc = clb_test_read(ctx, osc, dims, r->sc, B);
  clb_test_canary_check(ctx, onz, (size_t)r->n_nz * 8, "nonzero output");
  clb_test_canary_check(ctx, osel, (size_t)r->n_sel * 4, "masked_select output");
  clb_test_canary_check(ctx, orows, (size_t)r->n_rows * 4, "masked_select (row mask) output");
  clb_test_canary_check(ctx, osc, (size_t)r->n_sc * 4, "masked_scatter output");
  for (int k = 0; k < 4; k++) clb_tensor_free(outs[k]);
  ops_sel_inputs_free(&in);
}

static void expect_same(const char *what, int64_t ng, const double *got, int64_t nw, const double *want, int64_t n,
                        const char *path) {
  clb_test_checks++;
  int64_t bad = ng != nw;
  for (int64_t i = 0; i < nw && !bad; i++) bad += !(got[i] == want[i] || (isnan(got[i]) && isnan(want[i])));
  if (bad) CLB_FAIL_AT("%s, n %lld, %s path: %lld results, want %lld (or wrong values)", what, (long long)n, path,
                       (long long)ng, (long long)nw);
}

static results ra, rb, ref;

/* Both paths against the host reference at actual size n (nr rows). */
static void test_case(clb_context_t on, clb_context_t off, int64_t n, int64_t nr, double density) {
  static double xv[B], mv[B], tv[R * C], rm[R], src[B];
  ops_gen(CLB_DTYPE_F32, n, density, xv);
  ops_roundtrip(CLB_DTYPE_F32, xv, n);
  ops_gen(CLB_DTYPE_BOOL, n, density, mv);
  ops_gen(CLB_DTYPE_F32, nr * C, 1.0, tv);
  ops_roundtrip(CLB_DTYPE_F32, tv, nr * C);
  ops_gen(CLB_DTYPE_BOOL, nr, density, rm);
  ops_gen(CLB_DTYPE_F32, B, 1.0, src);
  ops_roundtrip(CLB_DTYPE_F32, src, B);
  ref.n_nz = ref.n_sel = ref.n_rows = ref.n_sc = 0;
  for (int64_t i = 0, k = 0; i < n; i++) {
    if (ops_nz(xv[i])) ref.nz[ref.n_nz++] = (double)i;
    if (mv[i] != 0) ref.sel[ref.n_sel++] = xv[i];
    ref.sc[ref.n_sc++] = mv[i] != 0 ? src[k++] : xv[i];
  }
  for (int64_t q = 0; q < nr; q++)
    if (rm[q] != 0)
      for (int j = 0; j < C; j++) ref.rows[ref.n_rows++] = tv[q * C + j];
  run_path(on, n, nr, xv, mv, tv, rm, src, &ra);
  run_path(off, n, nr, xv, mv, tv, rm, src, &rb);
  const results *rs[2] = {&ra, &rb};
  const char *names[2] = {"one-launch", "three-launch"};
  for (int p = 0; p < 2; p++) {
    const results *r = rs[p];
    expect_same("nonzero", r->n_nz, r->nz, ref.n_nz, ref.nz, n, names[p]);
    expect_same("masked_select", r->n_sel, r->sel, ref.n_sel, ref.sel, n, names[p]);
    expect_same("masked_select (row mask)", r->n_rows, r->rows, ref.n_rows, ref.rows, nr, names[p]);
    expect_same("masked_scatter", r->n_sc, r->sc, ref.n_sc, ref.sc, n, names[p]);
    for (int k = 0; k < 4; k++) EXPECT_EQ_I(r->launches[k], p == 0 ? 1 : 3);
  }
}

/* nonzero_static without a count tensor, over several chunks: the rows and the
 * output's static record are right (the total is written nowhere). */
static void test_static_no_count(clb_context_t ctx, const char *path) {
  int64_t b = B, size = 700, dims[2];
  static double v[B], got[700 * 1];
  ops_gen(CLB_DTYPE_F32, B, 0.15, v);
  ops_roundtrip(CLB_DTYPE_F32, v, B);
  clb_tensor_t x = NULL, out = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &b, NULL, &x));
  clb_test_write(ctx, x, &b, v);
  CL_OK(ctx, clb_nonzero_static(ctx, x, size, -3, &out, NULL));
  int64_t n = clb_test_read(ctx, out, dims, got, size);
  EXPECT_EQ_I(dims[0], size);
  EXPECT_EQ_I(dims[1], 1);
  EXPECT_EQ_I(n, size);
  int64_t bad = 0, k = 0;
  for (int64_t i = 0; i < B && k < size; i++)
    if (ops_nz(v[i])) bad += got[k++] != (double)i;
  for (; k < size; k++) bad += got[k] != -3;
  clb_test_checks++;
  if (bad) CLB_FAIL_AT("nonzero_static without a count, %s path: %lld wrong rows", path, (long long)bad);
  clb_tensor_free(x);
  clb_tensor_free(out);
}

/* The sticky bits, raised from the one launch: a count over the output's bound,
 * a short source, and sizes that differ. */
static void test_status_bits(clb_context_t ctx) {
  int64_t b = 16, d = 16, ob[2] = {3, 1}, db = 8, d5 = 5, d6 = 6;
  uint8_t y = 1, oy[2] = {1, 0};
  double v[16];
  for (int i = 0; i < 16; i++) v[i] = 1;
  clb_tensor_t x = NULL, out = NULL, m = NULL, s = NULL, sc = NULL, a = NULL, am = NULL, sel = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &b, NULL, &x));
  clb_test_write(ctx, x, &d, v);
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 2, ob, oy, &out));
  clb_test_canary_fill(ctx, out);
  uint64_t l0 = launches_of(ctx);
  CL_OK(ctx, clb_nonzero(ctx, x, &out));
  EXPECT_EQ_I(launches_of(ctx) - l0, 1);
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_BOUND_EXCEEDED, "nonzero");
  clb_test_canary_check(ctx, out, 3 * 8, "clamped nonzero output");

  int64_t two = 2;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 1, &b, NULL, &m));
  clb_test_write(ctx, m, &d, v);
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &two, NULL, &s));
  clb_test_write(ctx, s, &two, v);
  l0 = launches_of(ctx);
  CL_OK(ctx, clb_masked_scatter(ctx, x, m, s, &sc));
  EXPECT_EQ_I(launches_of(ctx) - l0, 1);
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_SHORT_SOURCE, "masked_scatter");

  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &db, &y, &a));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 1, &db, &y, &am));
  clb_test_write(ctx, a, &d5, v);
  clb_test_write(ctx, am, &d6, v);
  CL_OK(ctx, clb_masked_select(ctx, a, am, &sel));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DEVICE_CHECK, "sizes 5 and 6");
  clb_tensor_t all[] = {x, out, m, s, sc, a, am, sel};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) clb_tensor_free(all[i]);
}

/* Eager reshapes: a static one launches nothing, ever; a dynamic one launches
 * once, then follows the select op that writes its input (sizes 0, 1, the bound). */
static void test_eager_views(clb_context_t ctx) {
  int64_t sb[2] = {4, 6}, s2[1] = {-1}, b = 12, flat[1] = {-1}, pairs[2] = {-1, 2}, dims[2];
  uint8_t y = 1;
  clb_tensor_t s = NULL, sv = NULL, x = NULL, m = NULL, sel = NULL, v = NULL, p = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, sb, NULL, &s));
  uint64_t l0 = launches_of(ctx);
  for (int i = 0; i < 3; i++) CL_OK(ctx, clb_reshape(ctx, s, 1, s2, &sv));
  EXPECT_EQ_I(launches_of(ctx) - l0, 0);
  CL_OK(ctx, clb_tensor_sizes(ctx, sv, dims));
  EXPECT_EQ_I(dims[0], 24);

  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &b, &y, &x));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 1, &b, &y, &m));
  static const int64_t trues[] = {4, 0, 1, 12, 6};
  for (size_t it = 0; it < sizeof trues / sizeof trues[0]; it++) {
    double xv[12], mv[12], got[12];
    for (int i = 0; i < 12; i++) {
      xv[i] = i + 0.5;
      mv[i] = i < trues[it];
    }
    clb_test_write(ctx, x, &b, xv);
    clb_test_write(ctx, m, &b, mv);
    l0 = launches_of(ctx);
    CL_OK(ctx, clb_masked_select(ctx, x, m, &sel));
    CL_OK(ctx, clb_reshape(ctx, sel, 1, flat, &v));
    /* the first reshape launches and links; later ones launch nothing */
    EXPECT_EQ_I(launches_of(ctx) - l0, it == 0 ? 2 : 1);
    int64_t n = clb_test_read(ctx, v, dims, got, 12);
    EXPECT_EQ_I(n, trues[it]);
    EXPECT_EQ_I(dims[0], trues[it]);
    for (int64_t i = 0; i < n; i++) EXPECT_TRUE(got[i] == xv[i]);
  }
  /* a second view of the same tensor is not the follower: it launches each time */
  l0 = launches_of(ctx);
  CL_OK(ctx, clb_masked_select(ctx, x, m, &sel));
  CL_OK(ctx, clb_reshape(ctx, sel, 2, pairs, &p));
  CL_OK(ctx, clb_reshape(ctx, sel, 2, pairs, &p));
  EXPECT_EQ_I(launches_of(ctx) - l0, 3);
  CL_OK(ctx, clb_tensor_sizes(ctx, p, dims));
  EXPECT_EQ_I(dims[0], 3);
  EXPECT_EQ_I(dims[1], 2);
  /* a host write of the input's sizes: the follower is stale, so it launches */
  int64_t d3 = 3;
  double xv[3] = {1, 2, 3};
  clb_test_write(ctx, sel, &d3, xv);
  l0 = launches_of(ctx);
  CL_OK(ctx, clb_reshape(ctx, sel, 1, flat, &v));
  EXPECT_EQ_I(launches_of(ctx) - l0, 1);
  CL_OK(ctx, clb_tensor_sizes(ctx, v, dims));
  EXPECT_EQ_I(dims[0], 3);
  clb_tensor_free(sel); /* the follower outlives its input */
  CL_OK(ctx, clb_tensor_sizes(ctx, v, dims));
  EXPECT_EQ_I(dims[0], 3);
  clb_tensor_t all[] = {s, sv, x, m, v, p};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) clb_tensor_free(all[i]);
}

/* A graph's data part: nonzero -> reshape, masked_select (row mask) -> reshape,
 * a static reshape of the mask and a masked_select by it. After the first step,
 * three launches per run (one per select op); the reshapes launch nothing. */
static void test_graph(clb_context_t ctx) {
  clb_graph_t g = clb_test_dynamic_graph(ctx, NULL, 0);
  const int64_t ab[1] = {40}, tb[2] = {R, C}, mb[2] = {R, 1}, lb[1] = {R}, flat[1] = {-1}, rows[2] = {-1, C};
  const uint8_t ay[1] = {1};
  clb_node a, t, mk, lab, nz, fnz, sel, sel2, m1, lsel;
  CL_OK(ctx, clb_graph_input(g, "a", CLB_DTYPE_F32, 1, ab, ay, &a));
  CL_OK(ctx, clb_graph_input(g, "t", CLB_DTYPE_F32, 2, tb, NULL, &t));
  CL_OK(ctx, clb_graph_input(g, "mask", CLB_DTYPE_BOOL, 2, mb, NULL, &mk));
  CL_OK(ctx, clb_graph_input(g, "labels", CLB_DTYPE_F32, 1, lb, NULL, &lab));
  CL_OK(ctx, clb_graph_nonzero(g, a, &nz));
  CL_OK(ctx, clb_graph_reshape(g, nz, 1, flat, &fnz));
  CL_OK(ctx, clb_graph_masked_select(g, t, mk, &sel));
  CL_OK(ctx, clb_graph_reshape(g, sel, 2, rows, &sel2));
  CL_OK(ctx, clb_graph_reshape(g, mk, 1, flat, &m1));
  CL_OK(ctx, clb_graph_masked_select(g, lab, m1, &lsel));
  static float av[40], tv[R * C], lv[R];
  static uint8_t mv[R];
  for (int i = 0; i < R * C; i++) tv[i] = (float)i;
  for (int i = 0; i < R; i++) lv[i] = (float)(1000 + i);
  CL_OK(ctx, clb_graph_feed(g, t, tb, tv, sizeof tv));
  CL_OK(ctx, clb_graph_feed(g, lab, lb, lv, sizeof lv));
  static const int64_t sizes[] = {40, 0, 1, 17, 40, 3};
  for (size_t it = 0; it < sizeof sizes / sizeof sizes[0]; it++) {
    int64_t n = sizes[it], want_nz = 0, want_rows = 0;
    for (int64_t i = 0; i < n; i++) {
      av[i] = (i * 7 + (int64_t)it) % 3 == 0 ? 0.0f : (float)i;
      want_nz += av[i] != 0;
    }
    for (int q = 0; q < R; q++) {
      mv[q] = (uint8_t)((q + (int)it) % (it + 2) == 0 || it == 4);
      want_rows += mv[q];
    }
    if (it == 1) memset(mv, 0, sizeof mv), want_rows = 0;
    CL_OK(ctx, clb_graph_feed(g, a, &n, av, (size_t)n * sizeof(float)));
    CL_OK(ctx, clb_graph_feed(g, mk, mb, mv, sizeof mv));
    uint64_t l0 = launches_of(ctx), s0 = clb_test_counter_syncs(ctx);
    CL_OK(ctx, clb_graph_run(g));
    if (it > 0) EXPECT_EQ_I(launches_of(ctx) - l0, 3);
    EXPECT_EQ_I(clb_test_counter_syncs(ctx) - s0, 0);
    int64_t dims[2];
    static double got[R * C];
    int64_t k = clb_test_read(ctx, clb_graph_tensor(g, fnz), dims, got, 40);
    EXPECT_EQ_I(k, want_nz);
    for (int64_t i = 0, j = 0; i < n && j < k; i++)
      if (av[i] != 0) EXPECT_TRUE(got[j++] == (double)i);
    k = clb_test_read(ctx, clb_graph_tensor(g, sel2), dims, got, R * C);
    EXPECT_EQ_I(dims[0], want_rows);
    EXPECT_EQ_I(dims[1], C);
    EXPECT_EQ_I(k, want_rows * C);
    for (int q = 0, j = 0; q < R && j < k; q++)
      if (mv[q])
        for (int c = 0; c < C; c++) EXPECT_TRUE(got[j++] == (double)tv[q * C + c]);
    k = clb_test_read(ctx, clb_graph_tensor(g, lsel), dims, got, R);
    EXPECT_EQ_I(k, want_rows);
    for (int q = 0, j = 0; q < R && j < k; q++)
      if (mv[q]) EXPECT_TRUE(got[j++] == (double)lv[q]);
  }
  clb_graph_free(g);
}

/* A graph's reshape of a select's output that does not split: the select's
 * launch raises the reshape's deferred check. */
static void test_graph_check(clb_context_t ctx) {
  clb_graph_t g = clb_test_dynamic_graph(ctx, NULL, 0);
  const int64_t xb[1] = {12}, pairs[2] = {-1, 2};
  clb_node x, mk, sel, p;
  CL_OK(ctx, clb_graph_input(g, "x", CLB_DTYPE_F32, 1, xb, NULL, &x));
  CL_OK(ctx, clb_graph_input(g, "m", CLB_DTYPE_BOOL, 1, xb, NULL, &mk));
  CL_OK(ctx, clb_graph_masked_select(g, x, mk, &sel));
  CL_OK(ctx, clb_graph_reshape(g, sel, 2, pairs, &p));
  float xv[12] = {0};
  uint8_t even[12] = {1, 1, 1, 1}, odd[12] = {1, 1, 1};
  CL_OK(ctx, clb_graph_feed(g, x, xb, xv, sizeof xv));
  for (int it = 0; it < 3; it++) {
    CL_OK(ctx, clb_graph_feed(g, mk, xb, even, sizeof even));
    CL_OK(ctx, clb_graph_run(g));
    CL_OK(ctx, clb_context_sync(ctx));
    CL_OK(ctx, clb_graph_feed(g, mk, xb, odd, sizeof odd));
    CL_OK(ctx, clb_graph_run(g));
    EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DEVICE_CHECK, "sizes 3 and 2");
  }
  clb_graph_free(g);
}

int main(void) {
  for (int style = CLB_KERNEL_STYLE_CPU; style <= CLB_KERNEL_STYLE_GPU; style++) {
    if (!ops_style_runs((clb_kernel_style)style, "ops/select-launch")) continue;
    CLB_TEST_CASE("ops/select-launch style %s", ops_style_names[style]);
    clb_context_t on = context_with((clb_kernel_style)style, "on"), off = context_with((clb_kernel_style)style, "off");
    static const int64_t ns[] = {0, 1, B, 2, 63, 64, 65, 1025, 2047};
    const int small = clb_test_small();
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
      if (small && i >= 4) break;
      int64_t nr = ns[i] < R ? ns[i] : R - (int64_t)(i % 3);
      for (int di = 0; di < 3; di++) test_case(on, off, ns[i], nr, di == 0 ? 0.1 : di == 1 ? 0.5 : 1.0);
    }
    for (int i = 0; i < (small ? 2 : 6); i++) test_case(on, off, (int64_t)(clb_test_next() % (B + 1)),
                                                       (int64_t)(clb_test_next() % (R + 1)), ops_uniform());
    test_static_no_count(on, "one-launch");
    test_static_no_count(off, "three-launch");
    test_status_bits(on);
    clb_context_free(on);
    clb_context_free(off);

    /* auto: one launch for a small mask, three past the crossover */
    clb_context_t ctx = context_with((clb_kernel_style)style, "auto");
    int64_t big = 70000, small_b = 4096;
    clb_tensor_t xb = NULL, xs = NULL, o1 = NULL, o2 = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &big, NULL, &xb));
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &small_b, NULL, &xs));
    uint64_t l0 = launches_of(ctx);
    CL_OK(ctx, clb_nonzero(ctx, xs, &o1));
    EXPECT_EQ_I(launches_of(ctx) - l0, 1);
    l0 = launches_of(ctx);
    CL_OK(ctx, clb_nonzero(ctx, xb, &o2));
    EXPECT_EQ_I(launches_of(ctx) - l0, 3);
    clb_tensor_free(xb);
    clb_tensor_free(xs);
    clb_tensor_free(o1);
    clb_tensor_free(o2);
    test_eager_views(ctx);
    test_graph(ctx);
    test_graph_check(ctx);
    clb_context_free(ctx);
  }
  return clb_test_finish("ops/select-launch");
}
