/* test-record.c: recorded steps (docs/design.md, "Recorded steps"). The same
 * training graph in two contexts, one with CLBOUND_RECORD=off (every step
 * enqueued) and one with CLBOUND_RECORD=on (the second step recorded into a
 * command buffer, every later one replayed): over 50 random batch sizes,
 * among them 0, 1 and the bound, with new random data every step, both give
 * the same losses and parameters bit for bit (the same kernels on the same
 * data), and each step's loss equals a double-precision host computation from
 * the parameters before it (1e-5 relative). An lr change mid-training
 * re-records. A deferred device check raised inside a replayed step names its
 * op and sizes even after more launches than the launch ring holds. Where the
 * device has no cl_khr_command_buffer (or CLBOUND_TEST_RECORD=off) the
 * enqueue path runs the same checks and the replay part says why it is
 * skipped. */
#define _POSIX_C_SOURCE 200809L
#include <CL/cl.h>
#include <math.h>
#include <stdio.h>

#include "cl-test.h"

#define B 64 /* the batch bound */
#define F 5
#define H 8
#define O 2
#define STEPS 50

typedef struct model {
  clb_context_t ctx;
  clb_graph_t g;
  clb_node x, t, w1, b1, w2, b2, loss;
} model;

static float W1[H * F], B1[H], W2[O * H], B2[O];

static double urand(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return ((*s >> 8) & 0xffff) / 65536.0;
}

/* y = relu(x W1^T + b1) W2^T + b2, MSE against t. */
static model build(const char *record) {
  model m;
  setenv("CLBOUND_RECORD", record, 1);
  m.ctx = clb_test_context(NULL);
  CL_OK(m.ctx, clb_context_set_gemm_strategy(m.ctx, CLB_GEMM_DEVICE)); /* every command a kernel */
  const int64_t xb[2] = {B, F}, tb[2] = {B, O}, w1d[2] = {H, F}, b1d[1] = {H}, w2d[2] = {O, H}, b2d[1] = {O};
  const uint8_t dyn[2] = {1, 0};
  clb_node h, a, y;
  m.g = clb_test_dynamic_graph(m.ctx, NULL, 0);
  CL_OK(m.ctx, clb_graph_input(m.g, "x", CLB_DTYPE_F32, 2, xb, dyn, &m.x));
  CL_OK(m.ctx, clb_graph_input(m.g, "t", CLB_DTYPE_F32, 2, tb, dyn, &m.t));
  CL_OK(m.ctx, clb_graph_param(m.g, "w1", CLB_DTYPE_F32, 2, w1d, W1, sizeof W1, 1, &m.w1));
  CL_OK(m.ctx, clb_graph_param(m.g, "b1", CLB_DTYPE_F32, 1, b1d, B1, sizeof B1, 1, &m.b1));
  CL_OK(m.ctx, clb_graph_param(m.g, "w2", CLB_DTYPE_F32, 2, w2d, W2, sizeof W2, 1, &m.w2));
  CL_OK(m.ctx, clb_graph_param(m.g, "b2", CLB_DTYPE_F32, 1, b2d, B2, sizeof B2, 1, &m.b2));
  CL_OK(m.ctx, clb_graph_linear(m.g, m.x, m.w1, m.b1, &h));
  CL_OK(m.ctx, clb_graph_unary(m.g, CLB_UNARY_RELU, h, &a));
  CL_OK(m.ctx, clb_graph_linear(m.g, a, m.w2, m.b2, &y));
  CL_OK(m.ctx, clb_graph_loss(m.g, CLB_LOSS_MSE, y, m.t, &m.loss));
  CL_OK(m.ctx, clb_graph_train(m.g, m.loss, 0.05, 0.0));
  return m;
}

typedef struct params {
  float w1[H * F], b1[H], w2[O * H], b2[O];
} params;

static void read_f32(clb_context_t ctx, clb_tensor_t t, float *out, size_t n) {
  CL_OK(ctx, clb_tensor_read(ctx, t, NULL, out, n * sizeof(float), NULL));
}

static void read_params(model *m, params *p) {
  read_f32(m->ctx, clb_graph_tensor(m->g, m->w1), p->w1, H * F);
  read_f32(m->ctx, clb_graph_tensor(m->g, m->b1), p->b1, H);
  read_f32(m->ctx, clb_graph_tensor(m->g, m->w2), p->w2, O * H);
  read_f32(m->ctx, clb_graph_tensor(m->g, m->b2), p->b2, O);
}

/* The loss of the step in double from the parameters before it. */
static double host_loss(const params *p, const float *x, const float *t, int64_t n) {
  if (n == 0) return NAN; /* the mean of nothing, as on the device */
  double sum = 0;
  for (int64_t r = 0; r < n; r++) {
    double a[H];
    for (int j = 0; j < H; j++) {
      double s = p->b1[j];
      for (int k = 0; k < F; k++) s += (double)x[r * F + k] * p->w1[j * F + k];
      a[j] = s > 0 ? s : 0;
    }
    for (int o = 0; o < O; o++) {
      double y = p->b2[o];
      for (int j = 0; j < H; j++) y += a[j] * p->w2[o * H + j];
      double d = y - t[r * O + o];
      sum += d * d;
    }
  }
  return sum / (double)(n * O);
}

static void check_loss(const char *path, int step, float got, double want) {
  clb_test_checks++;
  if (isnan(want) ? !isnan(got) : !(fabs(got - want) <= 1e-5 * fmax(fabs(want), 1e-3)))
    CLB_FAIL_AT("%s: step %d: loss %.9g, host %.9g", path, step, got, want);
}

static uint64_t counter(clb_context_t ctx, int recorded) {
  clb_counters c = {.struct_size = sizeof c};
  CL_OK(ctx, clb_context_counters(ctx, &c));
  return recorded ? c.steps_recorded : c.steps_replayed;
}

/* Why replay cannot be tested here, or NULL. */
static const char *no_replay_reason(void) {
  int64_t on = 1;
  clb_env_get("CLBOUND_TEST_RECORD", &on); /* the library's parser: off, 0, false, no */
  if (!on) return "CLBOUND_TEST_RECORD=off";
  cl_platform_id plat;
  cl_device_id dev;
  char ext[8192] = "";
  if (clGetPlatformIDs(1, &plat, NULL) != CL_SUCCESS || clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS ||
      clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, sizeof ext - 1, ext, NULL) != CL_SUCCESS)
    return "the device's extensions cannot be read";
  if (!strstr(ext, "cl_khr_command_buffer")) return "the device has no cl_khr_command_buffer";
  return NULL;
}

static void test_training(int replay) {
  unsigned seed = 12345;
  for (int i = 0; i < H * F; i++) W1[i] = (float)(urand(&seed) - 0.5);
  for (int i = 0; i < H; i++) B1[i] = (float)(urand(&seed) * 0.2 - 0.1);
  for (int i = 0; i < O * H; i++) W2[i] = (float)(urand(&seed) - 0.5);
  for (int i = 0; i < O; i++) B2[i] = (float)(urand(&seed) * 0.2 - 0.1);
  model e = build("off"), r = build(replay ? "on" : "off");
  static float x[B * F], t[B * O];
  for (int s = 0; s < STEPS; s++) {
    /* sizes 0, 1 and the bound among random ones, the bound first and at a replay */
    int64_t n = s == 0 ? B : s == 5 ? 0 : s == 9 ? 1 : s == 14 ? B : (int64_t)(urand(&seed) * (B + 1));
    if (n > B) n = B;
    CLB_TEST_CASE("step %d: %lld rows", s, (long long)n);
    for (int64_t i = 0; i < n * F; i++) x[i] = (float)(urand(&seed) * 4 - 2);
    for (int64_t i = 0; i < n * O; i++) t[i] = (float)(urand(&seed) * 2 - 1);
    if (s == 25) { /* an lr change: the recorded SGD step is stale */
      CL_OK(e.ctx, clb_graph_set_lr(e.g, 0.02));
      CL_OK(r.ctx, clb_graph_set_lr(r.g, 0.02));
    }
    params pe, pr;
    read_params(&e, &pe);
    read_params(&r, &pr);
    const int64_t xd[2] = {n, F}, td[2] = {n, O};
    model *ms[2] = {&e, &r};
    float loss[2];
    for (int k = 0; k < 2; k++) {
      CL_OK(ms[k]->ctx, clb_graph_feed(ms[k]->g, ms[k]->x, xd, x, (size_t)(n * F) * sizeof(float)));
      CL_OK(ms[k]->ctx, clb_graph_feed(ms[k]->g, ms[k]->t, td, t, (size_t)(n * O) * sizeof(float)));
      CL_OK(ms[k]->ctx, clb_graph_run(ms[k]->g));
      read_f32(ms[k]->ctx, clb_graph_tensor(ms[k]->g, ms[k]->loss), &loss[k], 1);
    }
    check_loss("enqueued", s, loss[0], host_loss(&pe, x, t, n));
    check_loss(replay ? "replayed" : "enqueued (second context)", s, loss[1], host_loss(&pr, x, t, n));
    EXPECT_TRUE(memcmp(&loss[0], &loss[1], sizeof loss[0]) == 0);
    EXPECT_TRUE(memcmp(&pe, &pr, sizeof pe) == 0);
  }
  /* back-to-back steps, no read between them: the replays are pending together */
  CLB_TEST_CASE("10 steps without a host read between them");
  for (int s = 0; s < 10; s++) {
    int64_t n = 1 + (int64_t)(urand(&seed) * B);
    if (n > B) n = B;
    for (int64_t i = 0; i < n * F; i++) x[i] = (float)(urand(&seed) * 4 - 2);
    for (int64_t i = 0; i < n * O; i++) t[i] = (float)(urand(&seed) * 2 - 1);
    const int64_t xd[2] = {n, F}, td[2] = {n, O};
    model *ms[2] = {&e, &r};
    for (int k = 0; k < 2; k++) {
      CL_OK(ms[k]->ctx, clb_graph_feed(ms[k]->g, ms[k]->x, xd, x, (size_t)(n * F) * sizeof(float)));
      CL_OK(ms[k]->ctx, clb_graph_feed(ms[k]->g, ms[k]->t, td, t, (size_t)(n * O) * sizeof(float)));
      CL_OK(ms[k]->ctx, clb_graph_run(ms[k]->g));
    }
  }
  params pe, pr;
  read_params(&e, &pe);
  read_params(&r, &pr);
  EXPECT_TRUE(memcmp(&pe, &pr, sizeof pe) == 0);
  CLB_TEST_CASE("counters");
  EXPECT_EQ_I(counter(e.ctx, 0), 0);
  EXPECT_EQ_I(counter(e.ctx, 1), 0);
  if (replay) {
    /* step 0 runs the new plan, step 1 records, 2..24 replay; step 25 (lr
     * changed) leaves the replay at the SGD kernel, 26 records, the rest replay */
    EXPECT_EQ_I(counter(r.ctx, 1), 2);
    EXPECT_EQ_I(counter(r.ctx, 0), STEPS + 10 - 4);
  }
  clb_graph_free(e.g);
  clb_graph_free(r.g);
  clb_context_free(e.ctx);
  clb_context_free(r.ctx);
}

/* out = a + b on two dynamic dims: a deferred check the device makes. */
static void test_status_in_replay(int replay) {
  CLB_TEST_CASE("a deferred check raised inside a %s step names its op", replay ? "replayed" : "enqueued");
  setenv("CLBOUND_RECORD", replay ? "on" : "off", 1);
  clb_context_t ctx = clb_test_context(NULL);
  const int64_t bd[1] = {37};
  const uint8_t dyn[1] = {1};
  clb_graph_t g;
  clb_node a, b, sum, out;
  g = clb_test_dynamic_graph(ctx, NULL, 0);
  CL_OK(ctx, clb_graph_input(g, "a", CLB_DTYPE_F32, 1, bd, dyn, &a));
  CL_OK(ctx, clb_graph_input(g, "b", CLB_DTYPE_F32, 1, bd, dyn, &b));
  CL_OK(ctx, clb_graph_binary(g, CLB_BINARY_MUL, a, b, &sum));
  CL_OK(ctx, clb_graph_unary(g, CLB_UNARY_NEG, sum, &out));
  float va[37], vb[37], got[37];
  for (int i = 0; i < 37; i++) {
    va[i] = (float)i;
    vb[i] = (float)(2 * i + 1);
  }
  for (int s = 0; s < 3; s++) { /* a new plan, a recorded step, a replay */
    const int64_t d[1] = {5 + s};
    CL_OK(ctx, clb_graph_feed(g, a, d, va, (size_t)d[0] * sizeof(float)));
    CL_OK(ctx, clb_graph_feed(g, b, d, vb, (size_t)d[0] * sizeof(float)));
    CL_OK(ctx, clb_graph_run(g));
    int64_t dims[1];
    CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(g, out), dims, got, sizeof got, NULL));
    EXPECT_EQ_I(dims[0], d[0]);
    for (int i = 0; i < d[0]; i++) EXPECT_TRUE(got[i] == -(va[i] * vb[i]));
  }
  /* more launches than the ring holds, then a replay whose sizes differ */
  const int64_t one[1] = {1};
  clb_tensor_t x = NULL, y = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, one, NULL, &x));
  CL_OK(ctx, clb_tensor_write(ctx, x, one, va, sizeof(float)));
  for (int i = 0; i < 1100; i++) CL_OK(ctx, clb_unary(ctx, CLB_UNARY_NEG, x, &y));
  CL_OK(ctx, clb_tensor_read(ctx, y, NULL, got, sizeof got, NULL));
  uint64_t before = counter(ctx, 0);
  const int64_t d5[1] = {5}, d7[1] = {7};
  CL_OK(ctx, clb_graph_feed(g, a, d5, va, 5 * sizeof(float)));
  CL_OK(ctx, clb_graph_feed(g, b, d7, vb, 7 * sizeof(float)));
  CL_OK(ctx, clb_graph_run(g));
  EXPECT_EQ_I(counter(ctx, 0), before + (replay ? 1 : 0));
  EXPECT_STATUS(ctx, clb_tensor_read(ctx, clb_graph_tensor(g, out), NULL, got, sizeof got, NULL), CLB_ERR_DEVICE_CHECK,
                "sizes 5 and 7 must be equal");
  const char *msg = clb_context_errmsg(ctx);
  clb_test_checks++;
  if (!strstr(msg, "mul") || !strstr(msg, "[<=37] f32"))
    CLB_FAIL_AT("the message does not name the op and its bounds: %s", msg);
  /* and the next step is right again */
  CL_OK(ctx, clb_graph_feed(g, b, d5, vb, 5 * sizeof(float)));
  CL_OK(ctx, clb_graph_run(g));
  CL_OK(ctx, clb_tensor_read(ctx, clb_graph_tensor(g, out), NULL, got, sizeof got, NULL));
  for (int i = 0; i < 5; i++) EXPECT_TRUE(got[i] == -(va[i] * vb[i]));
  clb_tensor_free(x);
  clb_tensor_free(y);
  clb_graph_free(g);
  clb_context_free(ctx);
}

int main(void) {
  setenv("CLBOUND_CACHE_DIR", "off", 1);
  const char *why = no_replay_reason();
  if (why) fprintf(stderr, "test-record: the replay part is skipped (%s): both contexts enqueue, the same checks run\n", why);
  test_training(!why);
  test_status_in_replay(0);
  if (!why) test_status_in_replay(1);
  return clb_test_finish("graph/record");
}
