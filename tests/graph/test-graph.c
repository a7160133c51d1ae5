/* test-graph.c: the graph executor: training under each policy against the
 * double reference, plans and recompile reasons per policy, guards, deferred
 * device checks, build-time shape errors, gradients with momentum, a gradient
 * sum inside the backward's host-BLAS merge, copied and borrowed feeds, and
 * the shape log. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cl-test.h"
#include "clbound/clbound.h"
#include "bench/workloads.h"
#include "test.h"

/* xla-mlp under each policy: the same losses as the double reference, and the
 * plans, syncs and builds each policy promises. */
static void test_xla_policies(void) {
  static const struct {
    clb_policy_kind p;
    int iters;
    uint64_t plans, syncs;
  } cases[] = {
      /* k = 1 + 7i mod 10: 1, 8, 5, 2, 9, 6, 3, 10, 7, 4, 1, 8 ... */
      {CLB_POLICY_DYNAMIC, 24, 1, 0},
      {CLB_POLICY_AUTOMATIC, 24, 1, 0}, /* counts are bounded from the start */
      {CLB_POLICY_STATIC, 5, 5, 10},    /* k = 1, 8, 5, 2, 9: a plan each; two counts read per step */
      {CLB_POLICY_BUCKETED, 6, 4, 12},  /* buckets 1, 8, 8, 2, 10, 8 */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    demo_config cfg = {DEMO_XLA_MLP, cases[c].p, cases[c].iters, -1, 0, 1, 0, NULL};
    demo_result r;
    char err[1024];
    int rc = demo_run(&cfg, &r, err, sizeof err);
    EXPECT_EQ_I(rc, 0);
    if (rc) {
      fprintf(stderr, "xla-mlp under %s: %s\n", demo_policy_name(cases[c].p), err);
      demo_result_free(&r);
      continue;
    }
    double ref[64];
    REQUIRE_TRUE(demo_reference(DEMO_XLA_MLP, cfg.iterations, demo_default_lr(DEMO_XLA_MLP), ref) == 0);
    for (int i = 0; i < cfg.iterations; i++) {
      double rel = fabs((double)r.losses[i] - ref[i]) / fmax(fabs(ref[i]), 1e-6);
      clb_test_checks++;
      if (!(rel <= 1e-4))
        CLB_FAIL_AT("%s: loss %d: %.9g vs reference %.9g (rel %.3g)", demo_policy_name(cases[c].p), i, r.losses[i], ref[i], rel);
    }
    EXPECT_EQ_I(r.plans_compiled, cases[c].plans);
    EXPECT_EQ_I(r.recompiles, cases[c].plans - 1);
    EXPECT_EQ_I(r.host_syncs, cases[c].syncs);
    if (cases[c].p == CLB_POLICY_DYNAMIC || cases[c].p == CLB_POLICY_AUTOMATIC) EXPECT_EQ_I(r.builds_after_first, 0);
    if (cases[c].p == CLB_POLICY_STATIC) {
      EXPECT_TRUE(strstr(r.last_reason, "count of nonzero") != NULL);
      EXPECT_TRUE(strstr(r.last_reason, "static policy") != NULL);
      EXPECT_TRUE(r.programs_after_first > 0); /* every new size gets its own programs */
    }
    demo_result_free(&r);
  }
}

/* A graph over a fed input x [<=64, 4]: y = sum(relu(x W^T + b)). */
typedef struct small_graph {
  clb_graph_t g;
  clb_node x, y;
  float w[3 * 4], b[3];
} small_graph;

static void small_build(clb_context_t ctx, clb_policy_kind p, small_graph *s) {
  clb_graph_options o;
  clb_graph_options_init(&o);
  o.policy = p;
  o.name = "small";
  CL_OK(ctx, clb_graph_new(ctx, &o, &s->g));
  const int64_t xb[2] = {64, 4}, wd[2] = {3, 4}, bd[1] = {3};
  const uint8_t dyn[2] = {1, 0};
  for (int i = 0; i < 12; i++) s->w[i] = 0.25f * (float)((i % 5) - 2);
  for (int i = 0; i < 3; i++) s->b[i] = 0.5f - 0.25f * (float)i;
  clb_node w, b, h, a;
  CL_OK(ctx, clb_graph_input(s->g, "x", CLB_DTYPE_F32, 2, xb, dyn, &s->x));
  CL_OK(ctx, clb_graph_param(s->g, "w", CLB_DTYPE_F32, 2, wd, s->w, sizeof s->w, 0, &w));
  CL_OK(ctx, clb_graph_param(s->g, "b", CLB_DTYPE_F32, 1, bd, s->b, sizeof s->b, 0, &b));
  CL_OK(ctx, clb_graph_linear(s->g, s->x, w, b, &h));
  CL_OK(ctx, clb_graph_unary(s->g, CLB_UNARY_RELU, h, &a));
  CL_OK(ctx, clb_graph_reduce(s->g, CLB_REDUCE_SUM, a, &s->y));
}

/* The small graph's y for n rows of x, in double. */
static double small_want(const small_graph *s, const float *x, int64_t n) {
  double want = 0;
  for (int64_t r = 0; r < n; r++)
    for (int j = 0; j < 3; j++) {
      double v = s->b[j];
      for (int k = 0; k < 4; k++) v += (double)x[r * 4 + k] * s->w[j * 4 + k];
      want += v > 0 ? v : 0;
    }
  return want;
}

static double small_run(clb_context_t ctx, small_graph *s, int64_t n) {
  float x[64 * 4];
  for (int64_t i = 0; i < n * 4; i++) x[i] = (float)((i * 37) % 11) / 4.0f - 1.0f;
  double want = small_want(s, x, n);
  const int64_t d[2] = {n, 4};
  CL_OK(ctx, clb_graph_feed(s->g, s->x, d, x, sizeof(float) * (size_t)(n * 4)));
  CL_OK(ctx, clb_graph_run(s->g));
  float got = 0;
  CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(s->g, s->y), NULL, &got, sizeof got, NULL));
  EXPECT_NEAR(got, want);
  return want;
}

typedef struct log_sink {
  int lines;
  char last[512];
} log_sink;

static void on_log(void *user, const char *category, const char *line) {
  log_sink *s = user;
  if (strcmp(category, "recompiles") != 0) return;
  s->lines++;
  snprintf(s->last, sizeof s->last, "%s", line);
}

/* Input dims under each policy: plans, recompile reasons in words (the log
 * callback and the metrics JSON), results. */
static void test_input_policies(clb_context_t ctx) {
  static const int64_t sizes[] = {5, 5, 9, 30, 64, 0, 9, 5};
  static const struct {
    clb_policy_kind p;
    uint64_t plans;
  } cases[] = {
      {CLB_POLICY_DYNAMIC, 1},
      {CLB_POLICY_AUTOMATIC, 2}, /* static at 5, bounded once 9 arrives */
      {CLB_POLICY_STATIC, 5},    /* 5, 9, 30, 64, 0 */
      {CLB_POLICY_BUCKETED, 5},  /* buckets 8, 16, 32, 64, and 1 for the empty batch */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    small_graph s;
    small_build(ctx, cases[c].p, &s);
    clb_counters c0;
    c0.struct_size = sizeof c0;
    CL_OK(ctx, clb_context_counters(ctx, &c0));
    log_sink sink = {0, ""};
    clb_context_set_log(ctx, CLB_LOG_RECOMPILES, on_log, &sink);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) small_run(ctx, &s, sizes[i]);
    clb_context_set_log(ctx, 0, NULL, NULL);
    EXPECT_EQ_I(sink.lines, cases[c].plans - 1);
    clb_graph_stats st;
    st.struct_size = sizeof st;
    CL_OK(ctx, clb_graph_stats_get(s.g, &st));
    EXPECT_EQ_I(st.plans_compiled, cases[c].plans);
    EXPECT_EQ_I(st.runs, sizeof sizes / sizeof sizes[0]);
    EXPECT_EQ_I(st.host_syncs, 0); /* input sizes are known on the host */
    clb_counters c1;
    c1.struct_size = sizeof c1;
    CL_OK(ctx, clb_context_counters(ctx, &c1));
    EXPECT_EQ_I(c1.plans_compiled - c0.plans_compiled, cases[c].plans);
    EXPECT_EQ_I(c1.recompiles - c0.recompiles, cases[c].plans - 1);
    const char *why = clb_graph_last_reason(s.g);
    if (cases[c].plans > 1) {
      EXPECT_TRUE(strstr(why, "dim 0 of x") != NULL && strstr(why, "plan") != NULL);
      EXPECT_TRUE(strstr(sink.last, why) != NULL); /* the last logged line is the last reason */
      static char json[1 << 16];
      size_t len = 0;
      CL_OK(ctx, clb_context_metrics_json(ctx, json, sizeof json, &len));
      EXPECT_TRUE(strstr(json, why) != NULL); /* the metrics list every reason */
    } else {
      EXPECT_EQ_S(why, "");
    }
    /* a size over the bound is refused at the feed and names the dim */
    float big[65 * 4] = {0};
    const int64_t d[2] = {65, 4};
    EXPECT_STATUS(ctx, clb_graph_feed(s.g, s.x, d, big, sizeof big), CLB_ERR_OUT_OF_BOUNDS, "dim 0 is 65");
    clb_graph_free(s.g);
  }
}

static float small_y(clb_context_t ctx, small_graph *s) {
  float got = 0;
  CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(s->g, s->y), NULL, &got, sizeof got, NULL));
  return got;
}

static void count_release(void *arg) { ++*(int *)arg; }

static uint64_t host_syncs(clb_context_t ctx) {
  clb_counters c;
  c.struct_size = sizeof c;
  CL_OK(ctx, clb_context_counters(ctx, &c));
  return c.host_syncs;
}

/* Feeds: clb_graph_feed copies at the call (the caller's memory may change
 * before the run), and a second feed waits for the run that still writes the
 * first copy, with no host sync; clb_graph_feed_borrowed reads the caller's
 * memory at the next run only, and its release runs once: after that run's
 * write, or when the feed is refused, replaced or the graph freed first. */
static void test_feeds(clb_context_t ctx) {
  small_graph s;
  small_build(ctx, CLB_POLICY_DYNAMIC, &s);
  float a[64 * 4], b[64 * 4];
  for (int i = 0; i < 64 * 4; i++) {
    a[i] = (float)((i * 37) % 11) / 4.0f - 1.0f;
    b[i] = (float)((i * 13) % 7) / 2.0f - 1.5f;
  }
  const int64_t d40[2] = {40, 4}, d64[2] = {64, 4}, d65[2] = {65, 4};
  const double want_a40 = small_want(&s, a, 40), want_b64 = small_want(&s, b, 64);
  /* borrowed, on the graph's first run (its plan's kernel-collecting walk first) */
  int released = 0;
  CL_OK(ctx, clb_graph_feed_borrowed(s.g, s.x, d40, a, sizeof(float) * 40 * 4, count_release, &released));
  EXPECT_EQ_I(released, 0);
  CL_OK(ctx, clb_graph_run(s.g));
  EXPECT_NEAR(small_y(ctx, &s), want_a40);
  EXPECT_EQ_I(released, 1); /* the read's sync found the write done */
  /* only that run reads it */
  EXPECT_STATUS(ctx, clb_graph_run(s.g), CLB_ERR_INVALID_ARG, "fed borrowed");
  EXPECT_EQ_I(released, 1);
  /* refused, replaced before a run, dropped with the graph: released each time */
  EXPECT_STATUS(ctx, clb_graph_feed_borrowed(s.g, s.x, d65, a, sizeof(float) * 65 * 4, count_release, &released),
                CLB_ERR_OUT_OF_BOUNDS, "dim 0 is 65");
  EXPECT_EQ_I(released, 2);
  CL_OK(ctx, clb_graph_feed_borrowed(s.g, s.x, d40, a, sizeof(float) * 40 * 4, count_release, &released));
  CL_OK(ctx, clb_graph_feed_borrowed(s.g, s.x, d64, b, sizeof(float) * 64 * 4, count_release, &released));
  EXPECT_EQ_I(released, 3);
  CL_OK(ctx, clb_graph_run(s.g));
  EXPECT_NEAR(small_y(ctx, &s), want_b64);
  EXPECT_EQ_I(released, 4);
  /* copied: the caller's memory changes between feed and run; fed again with no
   * sync since the last run, whose write may still read the copy */
  float c[64 * 4];
  memcpy(c, a, sizeof c);
  CL_OK(ctx, clb_graph_feed(s.g, s.x, d40, c, sizeof(float) * 40 * 4));
  memcpy(c, b, sizeof c);
  uint64_t syncs = host_syncs(ctx);
  CL_OK(ctx, clb_graph_run(s.g));
  CL_OK(ctx, clb_graph_run(s.g)); /* the copy is read again, as often as runs ask */
  CL_OK(ctx, clb_graph_feed(s.g, s.x, d64, c, sizeof(float) * 64 * 4));
  memset(c, 0, sizeof c);
  EXPECT_EQ_I(host_syncs(ctx), syncs); /* the wait for the write is not a host sync */
  CL_OK(ctx, clb_graph_run(s.g));
  EXPECT_NEAR(small_y(ctx, &s), want_b64);
  CL_OK(ctx, clb_graph_feed(s.g, s.x, d40, a, sizeof(float) * 40 * 4));
  CL_OK(ctx, clb_graph_run(s.g));
  EXPECT_NEAR(small_y(ctx, &s), want_a40);
  /* a borrowed feed with no release: the caller's until the sync after its run */
  CL_OK(ctx, clb_graph_feed_borrowed(s.g, s.x, d64, b, sizeof(float) * 64 * 4, NULL, NULL));
  CL_OK(ctx, clb_graph_run(s.g));
  EXPECT_NEAR(small_y(ctx, &s), want_b64);
  /* a pending borrowed feed is released with its graph */
  CL_OK(ctx, clb_graph_feed_borrowed(s.g, s.x, d40, a, sizeof(float) * 40 * 4, count_release, &released));
  clb_graph_free(s.g);
  EXPECT_EQ_I(released, 5);
}

/* Two counts paired by a loss: a deferred check the device makes. */
static void test_deferred_check(clb_context_t ctx) {
  clb_graph_t g = clb_test_dynamic_graph(ctx, NULL, 0);
  const int64_t d[1] = {6}, flat[1] = {-1};
  clb_node a, b, na, nb, fa, fb, ra, rb, loss;
  CL_OK(ctx, clb_graph_input(g, "a", CLB_DTYPE_F32, 1, d, NULL, &a));
  CL_OK(ctx, clb_graph_input(g, "b", CLB_DTYPE_F32, 1, d, NULL, &b));
  CL_OK(ctx, clb_graph_nonzero(g, a, &na));
  CL_OK(ctx, clb_graph_nonzero(g, b, &nb));
  CL_OK(ctx, clb_graph_reshape(g, na, 1, flat, &ra));
  CL_OK(ctx, clb_graph_reshape(g, nb, 1, flat, &rb));
  CL_OK(ctx, clb_graph_cast(g, ra, CLB_DTYPE_F32, &fa));
  CL_OK(ctx, clb_graph_cast(g, rb, CLB_DTYPE_F32, &fb));
  CL_OK(ctx, clb_graph_loss(g, CLB_LOSS_MSE, fa, fb, &loss));
  char desc[4096];
  CL_OK(ctx, clb_graph_describe(g, desc, sizeof desc, NULL));
  EXPECT_TRUE(strstr(desc, "deferred check on the device") != NULL);
  EXPECT_TRUE(strstr(desc, "data-dependent: count of") != NULL);
  clb_graph_stats st;
  st.struct_size = sizeof st;
  CL_OK(ctx, clb_graph_stats_get(g, &st));
  EXPECT_EQ_I(st.deferred_checks, 1);
  /* equal counts: nonzero at 1, 3, 4 in both; the loss is (1-1)^2 ... = 0 */
  const float va[6] = {0, 1, 0, 2, 3, 0}, vb[6] = {0, 5, 0, 1, 1, 0}, vc[6] = {1, 1, 0, 1, 1, 0};
  CL_OK(ctx, clb_graph_feed(g, a, d, va, sizeof va));
  CL_OK(ctx, clb_graph_feed(g, b, d, vb, sizeof vb));
  uint64_t s0 = clb_test_counter_syncs(ctx);
  CL_OK(ctx, clb_graph_run(g));
  EXPECT_EQ_I(clb_test_counter_syncs(ctx) - s0, 0);
  float l = -1;
  CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(g, loss), NULL, &l, sizeof l, NULL));
  EXPECT_NEAR(l, 0.0);
  /* 4 vs 3 nonzeros: the run itself succeeds, the next sync reports it */
  CL_OK(ctx, clb_graph_feed(g, b, d, vc, sizeof vc));
  CL_OK(ctx, clb_graph_run(g));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DEVICE_CHECK, "");
  CL_OK(ctx, clb_context_sync(ctx)); /* reported once, then clear */
  clb_graph_free(g);
}

/* A device error inside a merged host-BLAS native kernel (the forward's two
 * linear layers run as one under host BLAS): the sync names the product that
 * raised it, and the failed-output mark lands on that op's output, not on the
 * other merged op's. The first layer's K comes from two dynamic dims that
 * differ only on the device (nonzero counts, as in test_deferred_check): its
 * product raises the deferred check; the second's operands agree. */
static void test_merged_error(clb_context_t ctx) {
  clb_graph_t g = clb_test_dynamic_graph(ctx, NULL, 0);
  const int64_t md[1] = {8}, row[2] = {1, -1}, w2d[2] = {4, 1}, b2d[1] = {4};
  static const float w2[4] = {1, 2, 3, 4}, b2[4] = {0, 0, 0, 0};
  clb_node ma, mb, na, nb, ra, rb, x, w, z1, p2, q2, z2;
  CL_OK(ctx, clb_graph_input(g, "ma", CLB_DTYPE_F32, 1, md, NULL, &ma));
  CL_OK(ctx, clb_graph_input(g, "mb", CLB_DTYPE_F32, 1, md, NULL, &mb));
  CL_OK(ctx, clb_graph_nonzero(g, ma, &na)); /* [<=8, 1] */
  CL_OK(ctx, clb_graph_nonzero(g, mb, &nb));
  CL_OK(ctx, clb_graph_reshape(g, na, 2, row, &ra)); /* [1, <=8] */
  CL_OK(ctx, clb_graph_reshape(g, nb, 2, row, &rb));
  CL_OK(ctx, clb_graph_cast(g, ra, CLB_DTYPE_F32, &x));
  CL_OK(ctx, clb_graph_cast(g, rb, CLB_DTYPE_F32, &w));
  CL_OK(ctx, clb_graph_param(g, "w2", CLB_DTYPE_F32, 2, w2d, w2, sizeof w2, 0, &p2));
  CL_OK(ctx, clb_graph_param(g, "b2", CLB_DTYPE_F32, 1, b2d, b2, sizeof b2, 0, &q2));
  CL_OK(ctx, clb_graph_linear(g, x, w, -1, &z1)); /* [1, 1]: K is both counts */
  CL_OK(ctx, clb_graph_linear(g, z1, p2, q2, &z2)); /* [1, 4]: K is 1 on both sides */
  CL_OK(ctx, clb_graph_keep(g, z1));
  /* nonzero at 1, 3, 4 in both: x = w = [1, 3, 4], z1 = 26, z2 = 26 w2 */
  const float va[8] = {0, 1, 0, 2, 3, 0, 0, 0}, vb[8] = {0, 5, 0, 1, 1, 0, 0, 0}, vc[8] = {1, 1, 0, 1, 1, 0, 0, 0};
  float out[8] = {0};
  CL_OK(ctx, clb_graph_feed(g, ma, md, va, sizeof va));
  CL_OK(ctx, clb_graph_feed(g, mb, md, vb, sizeof vb));
  CL_OK(ctx, clb_graph_run(g));
  CL_OK(ctx, clb_context_sync(ctx));
  CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(g, z2), NULL, out, sizeof out, NULL));
  for (int i = 0; i < 4; i++) EXPECT_NEAR(out[i], 26.0 * w2[i]);
  /* 3 against 4 nonzeros: the first product raises the deferred check */
  CL_OK(ctx, clb_graph_feed(g, mb, md, vc, sizeof vc));
  CL_OK(ctx, clb_graph_run(g));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DEVICE_CHECK, "sizes 3 and 4 must be equal");
  const char *msg = clb_context_errmsg(ctx);
  EXPECT_TRUE(strstr(msg, "[1, <=8]") != NULL); /* the first product's operands, not the second's */
  EXPECT_STATUS(ctx, clb_tensor_read(ctx, clb_graph_tensor(g, z1), NULL, out, sizeof out, NULL), CLB_ERR_DEVICE_CHECK,
                "holds the output of an op that failed");
  CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(g, z2), NULL, out, sizeof out, NULL));
  clb_graph_free(g);
}

/* Errors found while building, and training through an op without a gradient. */
static void test_build_errors(clb_context_t ctx) {
  clb_graph_t g;
  CL_OK(ctx, clb_graph_new(ctx, NULL, &g));
  const int64_t xb[2] = {8, 3}, wd[2] = {4, 5};
  const uint8_t dyn[2] = {1, 0};
  clb_node x, w, out;
  CL_OK(ctx, clb_graph_input(g, "x", CLB_DTYPE_F32, 2, xb, dyn, &x));
  CL_OK(ctx, clb_graph_param(g, "w", CLB_DTYPE_F32, 2, wd, NULL, 0, 1, &w));
  clb_status st = clb_graph_linear(g, x, w, -1, &out);
  EXPECT_TRUE(st == CLB_ERR_CONTRADICTION || st == CLB_ERR_SHAPE);
  EXPECT_TRUE(strstr(clb_context_errmsg(ctx), "3") && strstr(clb_context_errmsg(ctx), "5"));
  EXPECT_STATUS(ctx, clb_graph_unary(g, CLB_UNARY_RELU, 99, &out), CLB_ERR_INVALID_ARG, "node 99");
  EXPECT_STATUS(ctx, clb_graph_input(g, "x", CLB_DTYPE_F32, 2, xb, dyn, &out), CLB_ERR_INVALID_ARG, "already has an input");
  EXPECT_STATUS(ctx, clb_graph_run(g), CLB_ERR_INVALID_ARG, "never fed");
  /* a trainable parameter whose gradient would cross nonzero */
  clb_node nz, f, loss;
  const int64_t pd[1] = {4};
  clb_node p;
  CL_OK(ctx, clb_graph_param(g, "p", CLB_DTYPE_F32, 1, pd, NULL, 0, 1, &p));
  CL_OK(ctx, clb_graph_nonzero(g, p, &nz));
  CL_OK(ctx, clb_graph_cast(g, nz, CLB_DTYPE_F32, &f));
  CL_OK(ctx, clb_graph_loss(g, CLB_LOSS_MSE, f, f, &loss));
  EXPECT_STATUS(ctx, clb_graph_train(g, loss, 0.1, 0.0), CLB_ERR_INVALID_ARG, "has no gradient");
  EXPECT_STATUS(ctx, clb_graph_train(g, x, 0.1, 0.0), CLB_ERR_INVALID_ARG, "not a loss");
  clb_graph_free(g);
}

/* Linear regression with momentum over a bounded batch: parameters after three
 * steps against a double reference (MSE averaged over the actual rows). */
static void test_momentum(clb_context_t ctx) {
  clb_graph_t g = clb_test_dynamic_graph(ctx, NULL, 0);
  const int64_t xb[2] = {8, 2}, tb[1] = {8}, wd[2] = {1, 2}, bd[1] = {1};
  const uint8_t dyn[2] = {1, 0};
  const float w0[2] = {0.5f, -0.25f}, b0[1] = {0.1f};
  clb_node x, t, w, b, y, loss;
  CL_OK(ctx, clb_graph_input(g, "x", CLB_DTYPE_F32, 2, xb, dyn, &x));
  CL_OK(ctx, clb_graph_input(g, "t", CLB_DTYPE_F32, 1, tb, dyn, &t));
  CL_OK(ctx, clb_graph_param(g, "w", CLB_DTYPE_F32, 2, wd, w0, sizeof w0, 1, &w));
  CL_OK(ctx, clb_graph_param(g, "b", CLB_DTYPE_F32, 1, bd, b0, sizeof b0, 1, &b));
  CL_OK(ctx, clb_graph_linear(g, x, w, b, &y));
  CL_OK(ctx, clb_graph_loss(g, CLB_LOSS_MSE, y, t, &loss));
  const double lr = 0.1, mom = 0.9;
  CL_OK(ctx, clb_graph_train(g, loss, lr, mom));
  double W[2] = {w0[0], w0[1]}, B = b0[0], vW[2] = {0, 0}, vB = 0;
  static const int64_t ns[3] = {3, 8, 1};
  for (int step = 0; step < 3; step++) {
    int64_t n = ns[step];
    float xs[16], ts[8];
    for (int i = 0; i < n; i++) {
      xs[2 * i] = (float)(i + step) / 4.0f;
      xs[2 * i + 1] = 1.0f - (float)i / 8.0f;
      ts[i] = (float)(i % 3) - 0.5f;
    }
    const int64_t xd[2] = {n, 2}, td[1] = {n};
    CL_OK(ctx, clb_graph_feed(g, x, xd, xs, sizeof(float) * (size_t)(2 * n)));
    CL_OK(ctx, clb_graph_feed(g, t, td, ts, sizeof(float) * (size_t)n));
    CL_OK(ctx, clb_graph_run(g));
    double gW[2] = {0, 0}, gB = 0, L = 0;
    for (int i = 0; i < n; i++) {
      double p = W[0] * xs[2 * i] + W[1] * xs[2 * i + 1] + B, d = p - ts[i];
      L += d * d / (double)n;
      gW[0] += 2 * d * xs[2 * i] / (double)n;
      gW[1] += 2 * d * xs[2 * i + 1] / (double)n;
      gB += 2 * d / (double)n;
    }
    float lg = 0;
    CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(g, loss), NULL, &lg, sizeof lg, NULL));
    EXPECT_TRUE(fabs(lg - L) <= 1e-5 * fmax(1.0, fabs(L)));
    for (int k = 0; k < 2; k++) {
      vW[k] = mom * vW[k] + gW[k];
      W[k] -= lr * vW[k];
    }
    vB = mom * vB + gB;
    B -= lr * vB;
  }
  float wg[2], bg[1];
  CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(g, w), NULL, wg, sizeof wg, NULL));
  CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(g, b), NULL, bg, sizeof bg, NULL));
  for (int k = 0; k < 2; k++) EXPECT_TRUE(fabs(wg[k] - W[k]) <= 1e-5 * fmax(1.0, fabs(W[k])));
  EXPECT_TRUE(fabs(bg[0] - B) <= 1e-5 * fmax(1.0, fabs(B)));
  clb_graph_free(g);
}

/* CLBOUND_SHAPE_LOG: one line per run with the fed shapes. */
static void test_shape_log(clb_context_t ctx) {
  char path[] = "/tmp/clbound-shape-log-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE_TRUE(fd >= 0);
  close(fd);
  setenv("CLBOUND_SHAPE_LOG", path, 1);
  small_graph s;
  small_build(ctx, CLB_POLICY_DYNAMIC, &s);
  small_run(ctx, &s, 7);
  small_run(ctx, &s, 12);
  clb_graph_free(s.g);
  unsetenv("CLBOUND_SHAPE_LOG");
  FILE *f = fopen(path, "r");
  REQUIRE_TRUE(f != NULL);
  char buf[256] = {0};
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  remove(path);
  buf[n] = 0;
  EXPECT_EQ_S(buf, "x=7x4\nx=12x4\n");
}

/* free_intermediates: an inference chain x -> relu -> exp -> neg -> tanh -> sum,
 * plus a kept middle node. Same results as without, every run; the peak device
 * memory is lower (each intermediate goes back to the pool after its consumer
 * ran); released nodes read as NULL, kept ones and the result stay readable. */
static uint64_t run_chain(int free_mid, double *sum_out, int64_t *kept_count) {
  clb_context_t ctx = clb_test_context(NULL);
  clb_graph_t g = clb_test_dynamic_graph(ctx, NULL, free_mid);
  int64_t b[2] = {256, 1024};
  uint8_t dyn[2] = {1, 0};
  clb_node x, r, e, n, t, s;
  CL_OK(ctx, clb_graph_input(g, "x", CLB_DTYPE_F32, 2, b, dyn, &x));
  CL_OK(ctx, clb_graph_unary(g, CLB_UNARY_RELU, x, &r));
  CL_OK(ctx, clb_graph_unary(g, CLB_UNARY_EXP, r, &e));
  CL_OK(ctx, clb_graph_unary(g, CLB_UNARY_NEG, e, &n));
  CL_OK(ctx, clb_graph_unary(g, CLB_UNARY_TANH, n, &t));
  CL_OK(ctx, clb_graph_reduce(g, CLB_REDUCE_SUM, t, &s));
  CL_OK(ctx, clb_graph_keep(g, e));
  EXPECT_STATUS(ctx, clb_graph_keep(g, 99), CLB_ERR_INVALID_ARG, "has no node 99");
  static float xs[256 * 1024];
  for (int run = 0; run < 3; run++) {
    int64_t d[2] = {100 + 50 * run, 1024};
    for (int64_t i = 0; i < d[0] * d[1]; i++) xs[i] = (float)((i * 7919 + run) % 200) / 100.0f - 1.0f;
    CL_OK(ctx, clb_graph_feed(g, x, d, xs, (size_t)(d[0] * d[1]) * sizeof(float)));
    CL_OK(ctx, clb_graph_run(g));
    double ref = 0;
    for (int64_t i = 0; i < d[0] * d[1]; i++) ref += tanh(-exp(xs[i] > 0 ? (double)xs[i] : 0.0));
    float got = 0;
    CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(g, s), NULL, &got, sizeof got, NULL));
    EXPECT_TRUE(fabs(got - ref) <= 1e-5 * fabs(ref) + 1e-3);
    *sum_out = got;
    /* the kept node is readable at its actual size; released ones are NULL */
    int64_t kd[2];
    CL_OK(ctx, clb_tensor_sizes(ctx, clb_graph_tensor(g, e), kd));
    *kept_count = kd[0];
    EXPECT_EQ_I(kd[0], d[0]);
    if (free_mid) {
      EXPECT_TRUE(clb_graph_tensor(g, r) == NULL && clb_graph_tensor(g, n) == NULL && clb_graph_tensor(g, t) == NULL);
    } else {
      EXPECT_TRUE(clb_graph_tensor(g, r) != NULL && clb_graph_tensor(g, t) != NULL);
    }
  }
  clb_counters c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  CL_OK(ctx, clb_context_counters(ctx, &c));
  clb_graph_free(g);
  clb_context_free(ctx);
  return c.peak_device_bytes;
}

static void test_free_intermediates(void) {
  double s0, s1;
  int64_t k0, k1;
  uint64_t peak_all = run_chain(0, &s0, &k0), peak_free = run_chain(1, &s1, &k1);
  printf("free_intermediates: peak device bytes %llu, without %llu\n", (unsigned long long)peak_free,
         (unsigned long long)peak_all);
  EXPECT_TRUE(s0 == s1 && k0 == k1);
  /* 5 node outputs of 1 MiB kept vs at most 3 live at once (input, the kept exp,
   * one in flight): at least 1 MiB less */
  if (!(peak_free + (1u << 20) <= peak_all))
    CLB_FAIL_AT("peak with free_intermediates %llu, without %llu", (unsigned long long)peak_free,
                (unsigned long long)peak_all);
}

/* A hidden layer read by two linear layers: its gradient is a sum, launched
 * while the backward's host-BLAS merge keeps the layers above (the sum's launch
 * enqueues them first). The parameters after two steps, the whole-step path
 * against op by op (CLBOUND_FUSE=off), within 1e-5 relative. */
static void test_gradient_sum(clb_context_t ctx) {
  enum { BND = 8, IN = 3, H = 4 };
  static const float W1[H * IN] = {0.5f, -0.25f, 1.0f, -0.75f, 0.3f, 0.2f, 0.1f, -0.6f, 0.4f, 0.9f, -0.1f, 0.05f};
  static const float W2[H] = {0.5f, -1.0f, 0.75f, 0.25f}, W3[H] = {-0.3f, 0.6f, 0.2f, -0.4f};
  float got[2][H * IN + 2 * H];
  for (int fuse = 0; fuse < 2; fuse++) {
    setenv("CLBOUND_FUSE", fuse ? "on" : "off", 1);
    clb_graph_t g = clb_test_dynamic_graph(ctx, "gradient-sum", 0);
    const int64_t xb[2] = {BND, IN}, tb[2] = {BND, 1}, w1d[2] = {H, IN}, wd[2] = {1, H};
    const uint8_t dyn[2] = {1, 0};
    clb_node x, t, w1, w2, w3, h, y2, y3, y, loss;
    CL_OK(ctx, clb_graph_input(g, "x", CLB_DTYPE_F32, 2, xb, dyn, &x));
    CL_OK(ctx, clb_graph_input(g, "t", CLB_DTYPE_F32, 2, tb, dyn, &t));
    CL_OK(ctx, clb_graph_param(g, "w1", CLB_DTYPE_F32, 2, w1d, W1, sizeof W1, 1, &w1));
    CL_OK(ctx, clb_graph_param(g, "w2", CLB_DTYPE_F32, 2, wd, W2, sizeof W2, 1, &w2));
    CL_OK(ctx, clb_graph_param(g, "w3", CLB_DTYPE_F32, 2, wd, W3, sizeof W3, 1, &w3));
    CL_OK(ctx, clb_graph_linear(g, x, w1, -1, &h));
    CL_OK(ctx, clb_graph_linear(g, h, w2, -1, &y2));
    CL_OK(ctx, clb_graph_linear(g, h, w3, -1, &y3));
    CL_OK(ctx, clb_graph_binary(g, CLB_BINARY_ADD, y2, y3, &y));
    CL_OK(ctx, clb_graph_loss(g, CLB_LOSS_MSE, y, t, &loss));
    CL_OK(ctx, clb_graph_train(g, loss, 0.1, 0.0));
    static const int64_t ns[2] = {3, 5};
    for (int step = 0; step < 2; step++) {
      const int64_t n = ns[step];
      float xs[BND * IN], ts[BND];
      for (int i = 0; i < n * IN; i++) xs[i] = (float)((i * 7 + step) % 11) / 11.0f - 0.3f;
      for (int i = 0; i < n; i++) ts[i] = (float)(i % 3) - 0.5f;
      const int64_t xd[2] = {n, IN}, td[2] = {n, 1};
      CL_OK(ctx, clb_graph_feed(g, x, xd, xs, sizeof(float) * (size_t)(n * IN)));
      CL_OK(ctx, clb_graph_feed(g, t, td, ts, sizeof(float) * (size_t)n));
      CL_OK(ctx, clb_graph_run(g));
    }
    CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(g, w1), NULL, got[fuse], sizeof(float) * H * IN, NULL));
    CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(g, w2), NULL, got[fuse] + H * IN, sizeof(float) * H, NULL));
    CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(g, w3), NULL, got[fuse] + H * IN + H, sizeof(float) * H, NULL));
    clb_graph_free(g);
  }
  setenv("CLBOUND_FUSE", "on", 1);
  for (int i = 0; i < H * IN + 2 * H; i++) {
    clb_test_checks++;
    if (!(fabs(got[1][i] - got[0][i]) <= 1e-5 * fmax(1.0, fabs(got[0][i]))))
      CLB_FAIL_AT("parameter %d: whole step %.9g, op by op %.9g", i, got[1][i], got[0][i]);
  }
  /* the step moved every first-layer weight (its gradient arrived) */
  for (int i = 0; i < H * IN; i++) EXPECT_TRUE(got[1][i] != W1[i]);
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  test_gradient_sum(ctx);
  test_input_policies(ctx);
  test_feeds(ctx);
  test_deferred_check(ctx);
  test_merged_error(ctx);
  test_build_errors(ctx);
  test_momentum(ctx);
  test_shape_log(ctx);
  clb_context_free(ctx);
  test_xla_policies();
  test_free_intermediates();
  return clb_test_finish("graph/graph");
}
