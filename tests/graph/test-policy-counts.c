/* test-policy-counts.c: every policy against the same seeded random sequences
 * of input sizes and data-dependent counts, with data-dependent ops feeding each
 * other (nonzero and masked_select of masked_select's result, masked_select of
 * a nonzero's result), every output compared exactly with a host reference.
 * The policies that compile counts in (static, bucketed) must make a new plan
 * when a count or an input size leaves what an earlier plan compiled in, log
 * why, and never report it as the user's error (issue 16, class 7). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl-test.h"
#define XB 64
#define POOL 4
#define NSTEPS 8

/* The graph, one node per output checked. Under static and bucketed every
 * kernel is one program per plan, built cold by PoCL in CI: the graph is kept
 * small. */
typedef struct cgraph {
  clb_graph_t g;
  clb_node x;
  clb_node nz;  /* nonzero(x): [c1, 1] */
  clb_node sel; /* masked_select(x, x != 0): [c1] */
  clb_node pos; /* masked_select(sel, relu(sel) != 0): [c2], of masked_select's result */
  clb_node nz2; /* nonzero(relu(sel)): [c2, 1], of masked_select's result */
  clb_node nzs; /* masked_select(nz, nz != 0): [c1 - (x[0] != 0)], of nonzero's result */
} cgraph;

static void build(clb_context_t ctx, clb_policy_kind p, cgraph *c) {
  clb_graph_options o;
  clb_graph_options_init(&o);
  o.policy = p;
  o.name = "counts";
  CL_OK(ctx, clb_graph_new(ctx, &o, &c->g));
  clb_graph_t g = c->g;
  const int64_t xb[1] = {XB};
  const uint8_t dyn[1] = {1};
  clb_node xm, r, rm, nm;
  CL_OK(ctx, clb_graph_input(g, "x", CLB_DTYPE_F32, 1, xb, dyn, &c->x));
  CL_OK(ctx, clb_graph_nonzero(g, c->x, &c->nz));
  CL_OK(ctx, clb_graph_cast(g, c->x, CLB_DTYPE_BOOL, &xm));
  CL_OK(ctx, clb_graph_masked_select(g, c->x, xm, &c->sel));
  CL_OK(ctx, clb_graph_unary(g, CLB_UNARY_RELU, c->sel, &r));
  CL_OK(ctx, clb_graph_cast(g, r, CLB_DTYPE_BOOL, &rm));
  CL_OK(ctx, clb_graph_masked_select(g, c->sel, rm, &c->pos));
  CL_OK(ctx, clb_graph_nonzero(g, r, &c->nz2));
  CL_OK(ctx, clb_graph_cast(g, c->nz, CLB_DTYPE_BOOL, &nm));
  CL_OK(ctx, clb_graph_masked_select(g, c->nz, nm, &c->nzs));
}

/* One step's input. */
typedef struct step {
  int64_t n;
  float x[XB];
} step;

/* A pool of POOL random inputs (sizes: 0, 1, the bound, or random; nonzeros:
 * none, all, or a random density; small integers of both signs), visited in a
 * random order with repeats, so sizes and counts grow, shrink and come back to
 * values an earlier plan compiled in. Entries 0 and 1 have the same size and
 * different counts, so a count also changes alone. */
static void make_steps(uint64_t seed, step *s) {
  clb_test_rng = seed; /* cl-test.h's generator */
  step pool[POOL];
  static const int64_t edges[] = {0, 1, XB};
  for (int i = 0; i < POOL; i++) {
    step *t = &pool[i];
    uint64_t k = clb_test_next() % 6;
    t->n = k < 3 ? edges[k] : (int64_t)(clb_test_next() % (XB + 1));
    if (i == 1) t->n = pool[0].n;
    int dens = i == 1 ? 1 : (int)(clb_test_next() % 5); /* 0: all zero, 1: all nonzero, else 1 in dens */
    for (int64_t j = 0; j < t->n; j++) {
      int nonzero = dens == 1 || (dens > 1 && clb_test_next() % (uint64_t)dens == 0);
      int v = (int)(clb_test_next() % 7) - 3;
      if (v == 0) v = 1;
      t->x[j] = nonzero ? (float)v : 0.0f;
    }
  }
  if (pool[0].n < 2) { /* entries 0 and 1: 2 or more elements, 0 has a zero, 1 has none */
    pool[0].n = pool[1].n = 2 + (int64_t)(clb_test_next() % (XB - 1));
    for (int64_t j = 0; j < pool[1].n; j++) pool[0].x[j] = pool[1].x[j] = (float)(j % 3) + 1.0f;
  }
  pool[0].x[0] = 0.0f;
  for (int i = 0; i < NSTEPS; i++) s[i] = pool[i < POOL ? i : (int)(clb_test_next() % POOL)];
}

/* Reads node n: its dims and values as doubles. */
static void read_node(clb_context_t ctx, cgraph *c, clb_node n, int64_t *dims, double *vals, int64_t cap) {
  clb_tensor_t t = clb_graph_tensor(c->g, n);
  REQUIRE_TRUE(t != NULL);
  clb_test_read(ctx, t, dims, vals, cap);
}

static void expect_rows(const char *pol, int at, const char *what, int64_t got_rows, const double *got, int64_t want_rows,
                        const double *want) {
  clb_test_checks++;
  if (got_rows != want_rows) {
    CLB_FAIL_AT("%s step %d: %s has %lld rows, want %lld", pol, at, what, (long long)got_rows, (long long)want_rows);
    return;
  }
  for (int64_t i = 0; i < got_rows; i++)
    if (got[i] != want[i]) {
      CLB_FAIL_AT("%s step %d: %s[%lld] = %g, want %g", pol, at, what, (long long)i, got[i], want[i]);
      return;
    }
}

typedef struct log_sink {
  int lines, count_lines;
} log_sink;

static void on_log(void *user, const char *category, const char *line) {
  log_sink *s = user;
  if (strcmp(category, "recompiles") != 0) return;
  s->lines++;
  if (strstr(line, "count of")) s->count_lines++;
}

/* Runs the steps under one policy and checks every output of every step. */
static void run_policy(clb_context_t ctx, clb_policy_kind p, const char *pol, const step *steps) {
  cgraph c;
  build(ctx, p, &c);
  log_sink sink = {0, 0};
  clb_context_set_log(ctx, CLB_LOG_RECOMPILES, on_log, &sink);
  double got[XB];
  int64_t dims[2];
  for (int i = 0; i < NSTEPS; i++) {
    const step *t = &steps[i];
    const int64_t xd[1] = {t->n};
    CL_OK(ctx, clb_graph_feed(c.g, c.x, xd, t->x, sizeof(float) * (size_t)t->n));
    clb_status st = clb_graph_run(c.g);
    clb_test_checks++;
    if (st != CLB_OK) {
      CLB_FAIL_AT("%s step %d (x %lld): %s: %s", pol, i, (long long)t->n, clb_status_name(st), clb_context_errmsg(ctx));
      break;
    }
    /* the host reference */
    double sel[XB], pos[XB], idx[XB], nz2[XB], nzs[XB];
    int64_t c1 = 0, c2 = 0, c3 = 0;
    for (int64_t j = 0; j < t->n; j++)
      if (t->x[j] != 0) {
        if (j != 0) nzs[c3++] = (double)j;
        idx[c1] = (double)j;
        sel[c1++] = t->x[j];
      }
    for (int64_t j = 0; j < c1; j++)
      if (sel[j] > 0) {
        nz2[c2] = (double)j;
        pos[c2++] = sel[j];
      }
    /* the device */
    read_node(ctx, &c, c.nz, dims, got, XB);
    expect_rows(pol, i, "nonzero(x)", dims[0], got, c1, idx);
    read_node(ctx, &c, c.sel, dims, got, XB);
    expect_rows(pol, i, "masked_select(x)", dims[0], got, c1, sel);
    read_node(ctx, &c, c.pos, dims, got, XB);
    expect_rows(pol, i, "masked_select(sel)", dims[0], got, c2, pos);
    read_node(ctx, &c, c.nz2, dims, got, XB);
    expect_rows(pol, i, "nonzero(relu(sel))", dims[0], got, c2, nz2);
    read_node(ctx, &c, c.nzs, dims, got, XB);
    expect_rows(pol, i, "masked_select(nonzero(x))", dims[0], got, c3, nzs);
  }
  clb_context_set_log(ctx, 0, NULL, NULL);
  clb_graph_stats s;
  s.struct_size = sizeof s;
  CL_OK(ctx, clb_graph_stats_get(c.g, &s));
  printf("%-9s %d steps: %llu plans, %llu switches, %llu count syncs\n", pol, NSTEPS, (unsigned long long)s.plans_compiled,
         (unsigned long long)s.plan_switches, (unsigned long long)s.host_syncs);
  EXPECT_EQ_I(s.runs, NSTEPS);
  /* every plan after the first is a recompile with its reason logged */
  EXPECT_EQ_I(sink.lines, s.plans_compiled - 1);
  if (p == CLB_POLICY_STATIC || p == CLB_POLICY_BUCKETED) {
    EXPECT_EQ_I(s.host_syncs, 5 * (uint64_t)NSTEPS); /* each of the 5 counts is read once per run */
    EXPECT_TRUE(s.plans_compiled >= 2 && s.plans_compiled <= POOL);
  } else {
    EXPECT_EQ_I(s.host_syncs, 0);
  }
  if (p == CLB_POLICY_STATIC) EXPECT_TRUE(sink.count_lines > 0); /* entries 0 and 1: a count changed alone */
  if (p == CLB_POLICY_DYNAMIC) EXPECT_EQ_I(s.plans_compiled, 1);
  clb_graph_free(c.g);
}

/* The report's repro: x = [<=64], nz = nonzero(x); 3 ones, then 40 ones. */
static void test_repro(clb_context_t ctx, clb_policy_kind p, const char *pol) {
  clb_graph_t g;
  clb_graph_options o;
  clb_graph_options_init(&o);
  o.policy = p;
  CL_OK(ctx, clb_graph_new(ctx, &o, &g));
  const int64_t b[1] = {64};
  const uint8_t dyn[1] = {1};
  clb_node x, nz;
  CL_OK(ctx, clb_graph_input(g, "x", CLB_DTYPE_F32, 1, b, dyn, &x));
  CL_OK(ctx, clb_graph_nonzero(g, x, &nz));
  float ones[64];
  for (int i = 0; i < 64; i++) ones[i] = 1.0f;
  static const int64_t ns[] = {3, 40, 3, 64, 0, 40};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    const int64_t d[1] = {ns[i]};
    CL_OK(ctx, clb_graph_feed(g, x, d, ones, sizeof(float) * (size_t)ns[i]));
    clb_status st = clb_graph_run(g);
    clb_test_checks++;
    if (st != CLB_OK) {
      CLB_FAIL_AT("%s: run with %lld ones: %s: %s", pol, (long long)ns[i], clb_status_name(st), clb_context_errmsg(ctx));
      continue;
    }
    int64_t dims[2] = {-1, -1}, idx[64];
    size_t bytes = 0;
    st = clb_tensor_read(ctx, clb_graph_tensor(g, nz), dims, idx, sizeof idx, &bytes);
    EXPECT_TRUE(st == CLB_OK);
    EXPECT_EQ_I(dims[0], ns[i]);
    EXPECT_EQ_I(bytes, sizeof(int64_t) * (size_t)ns[i]);
    int bad = 0;
    for (int64_t j = 0; j < ns[i] && j < 64; j++) bad += idx[j] != j;
    EXPECT_EQ_I(bad, 0);
  }
  clb_graph_free(g);
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  static const struct {
    clb_policy_kind p;
    const char *name;
  } pols[] = {{CLB_POLICY_STATIC, "static"},
              {CLB_POLICY_BUCKETED, "bucketed"},
              {CLB_POLICY_DYNAMIC, "dynamic"},
              {CLB_POLICY_AUTOMATIC, "automatic"}};
  for (size_t k = 0; k < 4; k++) test_repro(ctx, pols[k].p, pols[k].name);
  static const uint64_t seeds[] = {0x5EED0001ull, 0x5EED0002ull};
  static step steps[NSTEPS];
  for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
    make_steps(seeds[s], steps);
    for (size_t k = 0; k < 4; k++) run_policy(ctx, pols[k].p, pols[k].name, steps);
  }
  clb_context_free(ctx);
  return clb_test_finish("graph/policy-counts");
}
