/* workloads.c: the two training workloads of `clbound demo`, their data
 * schedules, and a double-precision host reference of the same training.
 *
 * xla-mlp is PyTorch/XLA's dynamic-shape test model: Linear(2,10), ReLU,
 * Linear(10,1), Sigmoid, BCE, SGD; its batches are nonzero() of fixed patterns,
 * so the batch size is a count only the device knows. wide-mlp is an MLP
 * 256-512-256-1 whose batch rows are picked from a 4096-row table each
 * iteration by masked_select with a mask. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/progress.h"
#include "bench/timing.h"
#include "bench/workloads.h"

enum { XLA_BOUND = 10, WIDE_ROWS = 4096, WIDE_IN = 256, WIDE_H1 = 512, WIDE_H2 = 256, WIDE_MIN = 64 };
#define XLA_DEFAULT_LR 1.0
#define WIDE_DEFAULT_LR 0.05

static double now_s(void) { return 1e-3 * clb_tool_now_ms(); }

const char *demo_workload_name(demo_workload w) { return w == DEMO_XLA_MLP ? "xla-mlp" : "wide-mlp"; }

const char *demo_policy_name(clb_policy_kind p) {
  static const char *const names[] = {"static", "automatic", "dynamic", "bucketed"};
  return (int)p >= 0 && p <= CLB_POLICY_BUCKETED ? names[p] : "?";
}

/* PyTorch/XLA's test takes one step at lr 1e-3, where the loss of this model
 * stays at 0.693 for thousands of steps; at lr 1 it falls within a few dozen
 * (and float32 still follows the float64 reference over 30,000 steps).
 * wide-mlp keeps 0.05: larger rates learn faster but leave the reference
 * sooner (tools/cmd-demo.c, loss_tolerance); the demo's short run passes its
 * own. */
double demo_default_lr(demo_workload w) { return w == DEMO_XLA_MLP ? XLA_DEFAULT_LR : WIDE_DEFAULT_LR; }

/* ---- data ------------------------------------------------------------------- */

/* A small seeded generator (splitmix64), the same on every platform. */
static uint64_t mix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double uniform01(uint64_t *s) { return (double)(mix(s) >> 11) * (1.0 / 9007199254740992.0); }

/* The demo's short run cycles through a few sizes, so that the static policy
 * (a plan and its programs per size) stays within a minute on a first run:
 * xla-mlp the first sizes of its schedule, wide-mlp small and medium batches
 * (the double reference costs in proportion to the rows). */
static const int64_t SHORT_SIZES[DEMO_WORKLOAD_COUNT][DEMO_MAX_SHORT_SIZES] = {{1, 8, 5, 2}, {64, 128, 256, 512}};

int64_t demo_batch_size_in(demo_workload w, int i, int sizes) {
  if (sizes <= 0) return demo_batch_size(w, i);
  if (sizes > DEMO_MAX_SHORT_SIZES) sizes = DEMO_MAX_SHORT_SIZES;
  return SHORT_SIZES[w][i % sizes];
}

int64_t demo_batch_size(demo_workload w, int i) {
  if (w == DEMO_XLA_MLP) return 1 + (7 * (int64_t)i) % 10;
  /* one of 16 sizes spaced evenly in log between 64 and 4096, in a seeded
   * random order: many small batches and some large, as a data loader that
   * groups samples by length produces */
  uint64_t s = 0xC1B0u + (uint64_t)i * 7919u;
  int level = (int)(mix(&s) % 16u);
  int64_t n = (int64_t)llround((double)WIDE_MIN * pow(2.0, 6.0 * level / 15.0));
  return n < WIDE_MIN ? WIDE_MIN : n > WIDE_ROWS ? WIDE_ROWS : n;
}

/* The wide-mlp mask of iteration i: n rows of the table, chosen by a seeded
 * partial shuffle. mask has WIDE_ROWS bytes. */
static void wide_mask(int i, int64_t n, uint8_t *mask) {
  static int idx[WIDE_ROWS];
  for (int r = 0; r < WIDE_ROWS; r++) idx[r] = r;
  uint64_t s = 0xA5A5u + (uint64_t)i * 104729u;
  memset(mask, 0, WIDE_ROWS);
  for (int64_t k = 0; k < n; k++) {
    int64_t j = k + (int64_t)(mix(&s) % (uint64_t)(WIDE_ROWS - k));
    int t = idx[k];
    idx[k] = idx[j];
    idx[j] = t;
    mask[idx[k]] = 1;
  }
}

static void wide_mask_n(int64_t n, uint8_t *mask) { wide_mask(-1, n, mask); }

/* The table and labels: X uniform in [-1, 1); label 1 when the first 8 features
 * sum above 0. */
static void wide_table(float *x, float *y) {
  uint64_t s = 42;
  for (int64_t i = 0; i < (int64_t)WIDE_ROWS * WIDE_IN; i++) x[i] = (float)(2.0 * uniform01(&s) - 1.0);
  for (int r = 0; r < WIDE_ROWS; r++) {
    double sum = 0;
    for (int j = 0; j < 8; j++) sum += x[(int64_t)r * WIDE_IN + j];
    y[r] = sum > 0 ? 1.0f : 0.0f;
  }
}

/* Layer sizes: in -> ... -> 1. PyTorch's default init, seeded, or 0.01 for xla-mlp. */
typedef struct mlp_shape {
  int nlayers;
  int dims[4];
} mlp_shape;

static mlp_shape shape_of(demo_workload w) {
  mlp_shape m;
  if (w == DEMO_XLA_MLP) {
    m.nlayers = 2;
    m.dims[0] = 2, m.dims[1] = 10, m.dims[2] = 1;
  } else {
    m.nlayers = 3;
    m.dims[0] = WIDE_IN, m.dims[1] = WIDE_H1, m.dims[2] = WIDE_H2, m.dims[3] = 1;
  }
  return m;
}

static void init_params(demo_workload w, const mlp_shape *m, float **W, float **B) {
  uint64_t s = 7;
  for (int l = 0; l < m->nlayers; l++) {
    int in = m->dims[l], out = m->dims[l + 1];
    double a = 1.0 / sqrt((double)in);
    for (int i = 0; i < out * in; i++) W[l][i] = w == DEMO_XLA_MLP ? 0.01f : (float)((2 * uniform01(&s) - 1) * a);
    for (int i = 0; i < out; i++) B[l][i] = w == DEMO_XLA_MLP ? 0.01f : (float)((2 * uniform01(&s) - 1) * a);
  }
}

/* The batch of iteration i as the device will see it: rows X [n, in] and
 * targets t [n], in double. Returns n. */
static int64_t batch_of(demo_workload w, int i, int sizes, const float *table, const float *labels, uint8_t *mask,
                        double *X, double *t) {
  int64_t k = demo_batch_size_in(w, i, sizes);
  if (w == DEMO_XLA_MLP) {
    for (int64_t j = 0; j < k; j++) {
      X[2 * j] = (double)(j / 2); /* nonzero of a 5x2 whose first k entries are 1 */
      X[2 * j + 1] = (double)(j % 2);
      t[j] = (double)(j % 2); /* nonzero of a 10-vector, mod 2 */
    }
    return k;
  }
  wide_mask(i, k, mask);
  int64_t n = 0;
  for (int r = 0; r < WIDE_ROWS; r++)
    if (mask[r]) {
      for (int j = 0; j < WIDE_IN; j++) X[n * WIDE_IN + j] = table[(int64_t)r * WIDE_IN + j];
      t[n++] = labels[r];
    }
  return n;
}

/* ---- the double reference ------------------------------------------------------ */

/* One SGD step of the MLP (ReLU hidden layers, sigmoid output, BCE as PyTorch
 * computes it); returns the loss before the update. Loops are axpy-shaped so
 * the compiler vectorizes them without reordering sums. */
static double ref_step(const mlp_shape *m, double **W, double **B, const double *X, const double *t, int64_t n, double lr,
                       double **act, double **grad, double **dW) {
  const double *in = X;
  for (int l = 0; l < m->nlayers; l++) {
    int ni = m->dims[l], no = m->dims[l + 1];
    double *out = act[l];
    double *wt = dW[l]; /* scratch until the backward pass: W transposed, [ni][no] */
    for (int j = 0; j < no; j++)
      for (int k = 0; k < ni; k++) wt[(int64_t)k * no + j] = W[l][(int64_t)j * ni + k];
    for (int64_t r = 0; r < n; r++) {
      double *o = out + r * no;
      const double *xr = in + r * ni;
      for (int j = 0; j < no; j++) o[j] = B[l][j];
      for (int k = 0; k < ni; k++) {
        const double xk = xr[k], *wk = wt + (int64_t)k * no;
        for (int j = 0; j < no; j++) o[j] += xk * wk[j];
      }
      for (int j = 0; j < no; j++) o[j] = l + 1 < m->nlayers ? (o[j] > 0 ? o[j] : 0) : 1.0 / (1.0 + exp(-o[j]));
    }
    in = out;
  }
  double loss = 0;
  const double *p = act[m->nlayers - 1];
  double *dz = grad[m->nlayers - 1];
  for (int64_t r = 0; r < n; r++) {
    double pr = p[r];
    double lp = log(pr) > -100 ? log(pr) : -100, l1p = log(1 - pr) > -100 ? log(1 - pr) : -100;
    loss += -(t[r] * lp + (1 - t[r]) * l1p);
    double d = pr * (1 - pr) > 1e-12 ? pr * (1 - pr) : 1e-12;
    dz[r] = (pr - t[r]) / d / (double)n * pr * (1 - pr); /* through the sigmoid */
  }
  loss = n ? loss / (double)n : NAN;
  for (int l = m->nlayers - 1; l >= 0; l--) {
    int ni = m->dims[l], no = m->dims[l + 1];
    const double *xin = l ? act[l - 1] : X;
    double *g = grad[l];
    memset(dW[l], 0, sizeof(double) * (size_t)ni * (size_t)no);
    double db[WIDE_H1];
    memset(db, 0, sizeof db);
    for (int64_t r = 0; r < n; r++)
      for (int j = 0; j < no; j++) {
        double gj = g[r * no + j];
        db[j] += gj;
        double *dw = dW[l] + (int64_t)j * ni;
        const double *xr = xin + r * ni;
        for (int k = 0; k < ni; k++) dw[k] += gj * xr[k];
      }
    if (l > 0) {
      double *gp = grad[l - 1];
      const double *a = act[l - 1];
      for (int64_t r = 0; r < n; r++) {
        double *o = gp + r * ni;
        for (int k = 0; k < ni; k++) o[k] = 0;
        for (int j = 0; j < no; j++) {
          double gj = g[r * no + j];
          const double *wr = W[l] + (int64_t)j * ni;
          for (int k = 0; k < ni; k++) o[k] += gj * wr[k];
        }
        for (int k = 0; k < ni; k++) o[k] = a[r * ni + k] > 0 ? o[k] : 0;
      }
    }
    for (int64_t i = 0; i < (int64_t)ni * no; i++) W[l][i] -= lr * dW[l][i];
    for (int j = 0; j < no; j++) B[l][j] -= lr * db[j];
  }
  return loss;
}

static int reference(demo_workload w, int iterations, int sizes, double lr, clb_progress_mode pm, double *losses) {
  mlp_shape m = shape_of(w);
  int rows = w == DEMO_XLA_MLP ? XLA_BOUND : WIDE_ROWS, in = m.dims[0];
  float *Wf[3], *Bf[3];
  double *W[3], *B[3], *act[3], *grad[3], *dW[3];
  double *X = malloc(sizeof(double) * (size_t)rows * (size_t)in), *t = malloc(sizeof(double) * (size_t)rows);
  float *table = w == DEMO_WIDE_MLP ? malloc(sizeof(float) * WIDE_ROWS * WIDE_IN) : NULL;
  float *labels = w == DEMO_WIDE_MLP ? malloc(sizeof(float) * WIDE_ROWS) : NULL;
  uint8_t *mask = malloc(WIDE_ROWS);
  int ok = X && t && mask && (w == DEMO_XLA_MLP || (table && labels));
  for (int l = 0; l < m.nlayers; l++) {
    size_t ni = (size_t)m.dims[l], no = (size_t)m.dims[l + 1];
    Wf[l] = malloc(sizeof(float) * ni * no);
    Bf[l] = malloc(sizeof(float) * no);
    W[l] = malloc(sizeof(double) * ni * no);
    B[l] = malloc(sizeof(double) * no);
    dW[l] = malloc(sizeof(double) * ni * no);
    act[l] = malloc(sizeof(double) * (size_t)rows * no);
    grad[l] = malloc(sizeof(double) * (size_t)rows * no);
    ok = ok && Wf[l] && Bf[l] && W[l] && B[l] && dW[l] && act[l] && grad[l];
  }
  if (ok) {
    init_params(w, &m, Wf, Bf);
    for (int l = 0; l < m.nlayers; l++) {
      for (int i = 0; i < m.dims[l] * m.dims[l + 1]; i++) W[l][i] = Wf[l][i];
      for (int i = 0; i < m.dims[l + 1]; i++) B[l][i] = Bf[l][i];
    }
    if (table) wide_table(table, labels);
    char label[64];
    snprintf(label, sizeof label, "%s double-precision reference", demo_workload_name(w));
    clb_progress *pr = clb_progress_begin(w == DEMO_WIDE_MLP ? pm : CLB_PROGRESS_OFF, label, iterations);
    for (int i = 0; i < iterations; i++) {
      int64_t n = batch_of(w, i, sizes, table, labels, mask, X, t);
      losses[i] = ref_step(&m, W, B, X, t, n, lr, act, grad, dW);
      clb_progress_update(pr, i + 1, -1);
    }
    clb_progress_end(pr);
  }
  for (int l = 0; l < m.nlayers; l++) {
    free(Wf[l]), free(Bf[l]), free(W[l]), free(B[l]), free(dW[l]), free(act[l]), free(grad[l]);
  }
  free(X), free(t), free(table), free(labels), free(mask);
  return ok ? 0 : 1;
}

int demo_reference(demo_workload w, int iterations, double lr, double *losses) {
  return reference(w, iterations, 0, lr, CLB_PROGRESS_OFF, losses);
}

int demo_reference_cfg(const demo_config *cfg, double *losses) {
  double lr = cfg->lr >= 0 ? cfg->lr : demo_default_lr(cfg->workload);
  return reference(cfg->workload, cfg->iterations, cfg->sizes, lr, (clb_progress_mode)cfg->progress, losses);
}

/* ---- the graph --------------------------------------------------------------------- */

typedef struct demo_graph {
  clb_graph_t g;
  clb_node x, y, keep, loss;
  float *table, *labels;
  uint8_t *mask;
} demo_graph;

#define TRY(call)                                                                           \
  do {                                                                                      \
    clb_status st_ = (call);                                                                \
    if (st_ != CLB_OK) {                                                                    \
      snprintf(err, errlen, "%s: %s", clb_status_str(st_), clb_context_errmsg(ctx));       \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

/* The nodes of the graph; the initial weights Wf, Bf belong to the caller (the
 * graph copies them), so that every error path frees them in one place. */
static int build_nodes(clb_context_t ctx, demo_workload w, double lr, const mlp_shape *mp, float **Wf, float **Bf,
                       demo_graph *dg, char *err, size_t errlen) {
  clb_graph_t g = dg->g;
  const mlp_shape m = *mp;
  clb_node X, target;
  if (w == DEMO_XLA_MLP) {
    const int64_t xd[2] = {5, 2}, yd[1] = {10}, flat[1] = {-1};
    clb_node nzx, nzy, flaty, fy, two;
    TRY(clb_graph_input(g, "x", CLB_DTYPE_F32, 2, xd, NULL, &dg->x));
    TRY(clb_graph_input(g, "y", CLB_DTYPE_F32, 1, yd, NULL, &dg->y));
    TRY(clb_graph_nonzero(g, dg->x, &nzx));
    TRY(clb_graph_cast(g, nzx, CLB_DTYPE_F32, &X));
    TRY(clb_graph_nonzero(g, dg->y, &nzy));
    TRY(clb_graph_reshape(g, nzy, 1, flat, &flaty));
    TRY(clb_graph_cast(g, flaty, CLB_DTYPE_F32, &fy));
    TRY(clb_graph_scalar(g, CLB_DTYPE_F32, 2.0, &two));
    TRY(clb_graph_binary(g, CLB_BINARY_REM, fy, two, &target));
  } else {
    const int64_t td[2] = {WIDE_ROWS, WIDE_IN}, ld[1] = {WIDE_ROWS}, kd[2] = {WIDE_ROWS, 1};
    const int64_t rows[2] = {-1, WIDE_IN}, flat[1] = {WIDE_ROWS};
    dg->table = malloc(sizeof(float) * WIDE_ROWS * WIDE_IN);
    dg->labels = malloc(sizeof(float) * WIDE_ROWS);
    dg->mask = malloc(WIDE_ROWS);
    if (!dg->table || !dg->labels || !dg->mask) {
      snprintf(err, errlen, "out of host memory");
      return 1;
    }
    wide_table(dg->table, dg->labels);
    clb_node table, labels, keep1, sel, lsel;
    TRY(clb_graph_param(g, "table", CLB_DTYPE_F32, 2, td, dg->table, sizeof(float) * WIDE_ROWS * WIDE_IN, 0, &table));
    TRY(clb_graph_param(g, "labels", CLB_DTYPE_F32, 1, ld, dg->labels, sizeof(float) * WIDE_ROWS, 0, &labels));
    TRY(clb_graph_input(g, "keep", CLB_DTYPE_BOOL, 2, kd, NULL, &dg->keep));
    TRY(clb_graph_masked_select(g, table, dg->keep, &sel));
    TRY(clb_graph_reshape(g, sel, 2, rows, &X));
    TRY(clb_graph_reshape(g, dg->keep, 1, flat, &keep1));
    TRY(clb_graph_masked_select(g, labels, keep1, &lsel));
    target = lsel;
  }
  clb_node h = X;
  for (int l = 0; l < m.nlayers; l++) {
    char wn[16], bn[16];
    snprintf(wn, sizeof wn, "w%d", l + 1);
    snprintf(bn, sizeof bn, "b%d", l + 1);
    const int64_t wd[2] = {m.dims[l + 1], m.dims[l]}, bd[1] = {m.dims[l + 1]};
    clb_node wl, bl, z;
    TRY(clb_graph_param(g, wn, CLB_DTYPE_F32, 2, wd, Wf[l], sizeof(float) * (size_t)(wd[0] * wd[1]), 1, &wl));
    TRY(clb_graph_param(g, bn, CLB_DTYPE_F32, 1, bd, Bf[l], sizeof(float) * (size_t)bd[0], 1, &bl));
    TRY(clb_graph_linear(g, h, wl, bl, &z));
    TRY(clb_graph_unary(g, l + 1 < m.nlayers ? CLB_UNARY_RELU : CLB_UNARY_SIGMOID, z, &h));
  }
  TRY(clb_graph_loss(g, CLB_LOSS_BCE, h, target, &dg->loss));
  TRY(clb_graph_train(g, dg->loss, lr, 0.0));
  return 0;
}

/* The graph of workload w; on failure dg still holds what was made, for
 * free_graph. */
static int build_graph(clb_context_t ctx, demo_workload w, clb_policy_kind policy, double lr, demo_graph *dg, char *err,
                       size_t errlen) {
  memset(dg, 0, sizeof *dg);
  clb_graph_options o;
  clb_graph_options_init(&o);
  o.policy = policy;
  o.name = demo_workload_name(w);
  TRY(clb_graph_new(ctx, &o, &dg->g));
  mlp_shape m = shape_of(w);
  float *Wf[3] = {NULL, NULL, NULL}, *Bf[3] = {NULL, NULL, NULL};
  int ok = 1;
  for (int l = 0; l < m.nlayers; l++) {
    Wf[l] = malloc(sizeof(float) * (size_t)m.dims[l] * (size_t)m.dims[l + 1]);
    Bf[l] = malloc(sizeof(float) * (size_t)m.dims[l + 1]);
    ok = ok && Wf[l] && Bf[l];
  }
  int rc = 1;
  if (!ok) snprintf(err, errlen, "out of host memory");
  else {
    init_params(w, &m, Wf, Bf);
    rc = build_nodes(ctx, w, lr, &m, Wf, Bf, dg, err, errlen);
  }
  for (int l = 0; l < m.nlayers; l++) free(Wf[l]), free(Bf[l]);
  return rc;
}

static void free_graph(demo_graph *dg) {
  clb_graph_free(dg->g);
  free(dg->table);
  free(dg->labels);
  free(dg->mask);
}

/* Feeds iteration i (or, with n >= 0, a wide mask of exactly n rows). */
static int feed(clb_context_t ctx, demo_workload w, demo_graph *dg, int i, int sizes, int64_t n, char *err,
                size_t errlen) {
  if (w == DEMO_XLA_MLP) {
    int64_t k = demo_batch_size_in(w, i, sizes);
    float x[10] = {0}, y[10] = {0};
    for (int64_t j = 0; j < k; j++) x[j] = y[j] = 1.0f;
    const int64_t xd[2] = {5, 2}, yd[1] = {10};
    TRY(clb_graph_feed(dg->g, dg->x, xd, x, sizeof x));
    TRY(clb_graph_feed(dg->g, dg->y, yd, y, sizeof y));
    return 0;
  }
  if (n >= 0) wide_mask_n(n, dg->mask);
  else wide_mask(i, demo_batch_size_in(w, i, sizes), dg->mask);
  const int64_t kd[2] = {WIDE_ROWS, 1};
  TRY(clb_graph_feed(dg->g, dg->keep, kd, dg->mask, WIDE_ROWS));
  return 0;
}

/* ---- per-rank batches (data parallelism, clbound demo --data-parallel) ---------- */

struct demo_model {
  demo_graph dg;
  demo_workload w;
};

int64_t demo_mask_len(demo_workload w) { return w == DEMO_XLA_MLP ? XLA_BOUND : WIDE_ROWS; }

int demo_model_new(clb_context_t ctx, demo_workload w, clb_policy_kind policy, double lr, demo_model **out, char *err,
                   size_t errlen) {
  *out = calloc(1, sizeof **out);
  if (!*out) {
    snprintf(err, errlen, "out of host memory");
    return 1;
  }
  (*out)->w = w;
  if (build_graph(ctx, w, policy, lr >= 0 ? lr : demo_default_lr(w), &(*out)->dg, err, errlen) != 0) {
    demo_model_free(*out);
    *out = NULL;
    return 1;
  }
  return 0;
}

clb_graph_t demo_model_graph(const demo_model *m) { return m->dg.g; }

void demo_model_free(demo_model *m) {
  if (!m) return;
  free_graph(&m->dg);
  free(m);
}

clb_status demo_model_feed_mask(demo_model *m, const uint8_t *mask) {
  if (m->w == DEMO_XLA_MLP) {
    /* x [5, 2] and y [10] both 1 where the mask is: nonzero gives the rows
     * (j / 2, j % 2) and the targets j % 2 of the selected j */
    float x[XLA_BOUND], y[XLA_BOUND];
    for (int j = 0; j < XLA_BOUND; j++) x[j] = y[j] = mask[j] ? 1.0f : 0.0f;
    const int64_t xd[2] = {5, 2}, yd[1] = {XLA_BOUND};
    clb_status st = clb_graph_feed(m->dg.g, m->dg.x, xd, x, sizeof x);
    return st == CLB_OK ? clb_graph_feed(m->dg.g, m->dg.y, yd, y, sizeof y) : st;
  }
  const int64_t kd[2] = {WIDE_ROWS, 1};
  return clb_graph_feed(m->dg.g, m->dg.keep, kd, mask, WIDE_ROWS);
}

void demo_rank_masks(demo_workload w, int i, int nranks, int64_t rows, uint8_t *masks, int64_t *counts) {
  const int64_t len = demo_mask_len(w), share = len / (nranks > 0 ? nranks : 1);
  static int idx[WIDE_ROWS];
  uint64_t s = 0xD157u + (uint64_t)i * 15485863u;
  for (int64_t r = 0; r < len; r++) idx[r] = (int)r;
  for (int64_t r = len - 1; r > 0; r--) { /* a seeded shuffle of the rows */
    int64_t j = (int64_t)(mix(&s) % (uint64_t)(r + 1));
    int t = idx[r];
    idx[r] = idx[j];
    idx[j] = t;
  }
  memset(masks, 0, (size_t)(len * nranks));
  int64_t at = 0;
  for (int k = 0; k < nranks; k++) {
    int64_t n = rows > 0                ? rows
                : w == DEMO_XLA_MLP ? 1 + (int64_t)(mix(&s) % (uint64_t)(share > 0 ? share : 1))
                                    : demo_batch_size(w, i * nranks + k);
    if (n > share) n = share;
    counts[k] = n;
    for (int64_t r = 0; r < n; r++) masks[(int64_t)k * len + idx[at++]] = 1;
  }
}

/* ---- a training run ---------------------------------------------------------------- */

static volatile double first_done_at;
static void CL_CALLBACK on_first_done(cl_event ev, cl_int status, void *user) {
  (void)ev, (void)status, (void)user;
  first_done_at = now_s();
}

static void counters(clb_context_t ctx, clb_counters *c) {
  c->struct_size = sizeof *c;
  clb_context_counters(ctx, c);
}

int demo_run(const demo_config *cfg, demo_result *res, char *err, size_t errlen) {
  memset(res, 0, sizeof *res);
  res->max_loss_error = -1;
  int iters = cfg->iterations;
  double lr = cfg->lr >= 0 ? cfg->lr : demo_default_lr(cfg->workload);
  res->losses = calloc((size_t)iters, sizeof(float));
  if (!res->losses) {
    snprintf(err, errlen, "out of host memory");
    return 1;
  }
  char label[64];
  snprintf(label, sizeof label, "%s %s", demo_workload_name(cfg->workload), demo_policy_name(cfg->policy));
  clb_progress *pr = clb_progress_begin((clb_progress_mode)cfg->progress, label, iters);
  clb_progress_phase(pr, "building the graph and its first programs");
  double t0 = now_s();
  first_done_at = 0;
  clb_context_t ctx = NULL;
  clb_context_options o;
  clb_context_options_init(&o);
  o.cache_dir = cfg->cache_dir;
  clb_status st = clb_context_new(&o, &ctx);
  if (st != CLB_OK) {
    snprintf(err, errlen, "%s: %s", clb_status_str(st), clb_last_errmsg());
    clb_progress_end(pr);
    return 1;
  }
  demo_graph dg;
  clb_tensor_t losses = NULL;
  int rc = build_graph(ctx, cfg->workload, cfg->policy, lr, &dg, err, errlen);
  const int64_t ld[1] = {iters};
  if (!rc && (st = clb_tensor_new(ctx, CLB_DTYPE_F32, 1, ld, NULL, &losses)) != CLB_OK) {
    snprintf(err, errlen, "%s: %s", clb_status_str(st), clb_context_errmsg(ctx));
    rc = 1;
  }
  clb_counters c0, c1, cf, s0, s1, w0, w1;
  counters(ctx, &c0);
  cf = c0;
  s0 = s1 = w0 = w1 = c0;
  for (int i = 0; !rc && i < iters; i++) {
    if ((rc = feed(ctx, cfg->workload, &dg, i, cfg->sizes, -1, err, errlen)) != 0) break;
    if (i == 1) counters(ctx, &s0);
    if (i == 2) counters(ctx, &w0);
    if ((st = clb_graph_run(dg.g)) != CLB_OK) {
      snprintf(err, errlen, "iteration %d: %s: %s", i, clb_status_str(st), clb_context_errmsg(ctx));
      rc = 1;
      break;
    }
    if (i == 1) counters(ctx, &s1);
    if (i == 2) counters(ctx, &w1);
    /* the loss stays on the device: copied into slot i, read once at the end */
    cl_event ev = NULL;
    clb_tensor_t lt = clb_graph_tensor(dg.g, dg.loss);
    cl_int e = clEnqueueCopyBuffer(clb_context_cl_queue(ctx), clb_tensor_data_mem(lt), clb_tensor_data_mem(losses),
                                   clb_tensor_data_offset(lt), clb_tensor_data_offset(losses) + sizeof(float) * (size_t)i,
                                   sizeof(float), 0, NULL, i == 0 ? &ev : NULL);
    if (e != CL_SUCCESS) {
      snprintf(err, errlen, "iteration %d: copying the loss: OpenCL error %d", i, (int)e);
      rc = 1;
      break;
    }
    if (i == 0) {
      clSetEventCallback(ev, CL_COMPLETE, on_first_done, NULL);
      clReleaseEvent(ev);
      clFlush(clb_context_cl_queue(ctx));
      counters(ctx, &cf);
    }
    if (pr) {
      /* counters are host-side: reading them is no sync. Steps are enqueued
       * ahead of the device, so "done" here means enqueued. */
      clb_counters cn;
      counters(ctx, &cn);
      clb_progress_update(pr, i + 1, (long long)cn.program_builds);
      clb_progress_phase(pr, i + 1 == iters ? "waiting for the device to finish" : "");
    }
  }
  counters(ctx, &c1);
  if (!rc) {
    st = clb_tensor_read(ctx, losses, NULL, res->losses, sizeof(float) * (size_t)iters, NULL);
    if (st != CLB_OK) {
      snprintf(err, errlen, "reading the losses: %s: %s", clb_status_str(st), clb_context_errmsg(ctx));
      rc = 1;
    }
  }
  res->seconds = now_s() - t0;
  res->first_iteration_s = first_done_at > 0 ? first_done_at - t0 : -1;
  clb_counters c;
  counters(ctx, &c);
  res->program_builds = c.program_builds;
  res->cache_hits_memory = c.program_cache_hits_memory;
  res->cache_hits_disk = c.program_cache_hits_disk;
  res->plans_compiled = c.plans_compiled;
  res->recompiles = c.recompiles;
  res->kernel_launches = c.kernel_launches;
  res->kernels_compiled = c.kernels_compiled;
  res->programs_built = c.program_builds + c.program_cache_hits_disk;
  res->launches_per_step = s1.kernel_launches - s0.kernel_launches;
  res->writes_per_step = w1.host_writes - w0.host_writes;
  res->steps_replayed = c.steps_replayed;
  res->build_ms = c.build_ms;
  res->context_new_ms = c.context_new_ms;
  res->first_launches = c.first_launches;
  res->first_launch_ms = c.first_launch_ms;
  res->first_launches_after_first = c1.first_launches - cf.first_launches;
  res->steps_recorded = c.steps_recorded;
  clb_graph_stats gs;
  memset(&gs, 0, sizeof gs);
  gs.struct_size = sizeof gs;
  if (clb_graph_stats_get(dg.g, &gs) == CLB_OK) {
    res->fused_groups = gs.fused_groups;
    res->fused_nodes = gs.fused_nodes;
    res->fused_losses = gs.fused_losses;
    res->fused_epilogues = gs.fused_epilogues;
    res->fused_backward_relus = gs.fused_backward_relus;
    res->fused_casts = gs.fused_casts;
  }
  res->gemm_strategy = clb_context_gemm_strategy(ctx);
  res->peak_device_bytes = c.peak_device_bytes;
  res->arena_bytes = c.arena_bytes;
  res->live_lower_bound_bytes = c.live_lower_bound_bytes;
  res->pool_peak_bytes = c.pool_peak_bytes;
  res->arena_max_bytes = c.arena_max_bytes;
  res->arena_allocations = c.arena_allocations;
  res->host_syncs = c1.host_syncs - c0.host_syncs;
  res->builds_after_first = c1.program_builds - cf.program_builds;
  res->programs_after_first = res->builds_after_first + c1.program_cache_hits_disk - cf.program_cache_hits_disk;
  res->final_loss = iters > 0 ? res->losses[iters - 1] : NAN;
  /* The steps' own time, apart from compiling: the first steps again, whose
   * plans and kernels the run made ready, each waited for (after the counters
   * above were read: these launches are in no figure but this one). */
  res->step_s = -1;
  const int replay = iters < DEMO_REPLAY_STEPS ? iters : DEMO_REPLAY_STEPS;
  const char *shape_log = clb_env_text("CLBOUND_SHAPE_LOG"); /* would log the replayed steps too: not measured */
  if (!rc && replay > 0 && !(shape_log && shape_log[0])) {
    int ok = 1;
    double t_replay = now_s();
    for (int i = 0; ok && i < replay; i++) {
      char e2[256];
      ok = feed(ctx, cfg->workload, &dg, i, cfg->sizes, -1, e2, sizeof e2) == 0 && clb_graph_run(dg.g) == CLB_OK &&
           clFinish(clb_context_cl_queue(ctx)) == CL_SUCCESS;
    }
    if (ok) res->step_s = (now_s() - t_replay) / replay;
  }
  snprintf(res->last_reason, sizeof res->last_reason, "%s", clb_graph_last_reason(dg.g));
  /* the context's release hands the programs built from source to the
   * background store (clb_cache_wait waits for it) */
  double t_free = now_s();
  clb_tensor_free(losses);
  free_graph(&dg);
  clb_context_free(ctx);
  res->free_s = now_s() - t_free;
  res->store_wait_s = -1;
  clb_progress_end(pr);
  return rc;
}

void demo_result_free(demo_result *res) {
  free(res->losses);
  free(res->ref_losses);
  res->losses = NULL;
  res->ref_losses = NULL;
}

/* A fresh context with workload w's graph under `policy`; on failure the
 * context is freed and err says why. */
static int open_graph(demo_workload w, clb_policy_kind policy, clb_gemm_strategy gemm, clb_context_t *ctx,
                      demo_graph *dg, char *err, size_t errlen) {
  *ctx = NULL;
  clb_status st = clb_context_new(NULL, ctx);
  if (st != CLB_OK) {
    snprintf(err, errlen, "%s: %s", clb_status_str(st), clb_last_errmsg());
    return 1;
  }
  clb_context_set_gemm_strategy(*ctx, gemm);
  if (build_graph(*ctx, w, policy, demo_default_lr(w), dg, err, errlen) != 0) {
    free_graph(dg);
    clb_context_free(*ctx);
    *ctx = NULL;
    return 1;
  }
  return 0;
}


int demo_time_step(clb_policy_kind policy, clb_gemm_strategy gemm, int64_t n, int reps, double *ms, char *err,
                   size_t errlen) {
  clb_context_t ctx;
  demo_graph dg;
  if (open_graph(DEMO_WIDE_MLP, policy, gemm, &ctx, &dg, err, errlen) != 0) return 1;
  clb_status st;
  int rc = 0;
  double *t = calloc((size_t)reps, sizeof *t);
  if (!t) rc = 1;
  for (int r = -2; !rc && r < reps; r++) {
    if ((rc = feed(ctx, DEMO_WIDE_MLP, &dg, 0, 0, n, err, errlen)) != 0) break;
    double a = now_s();
    if ((st = clb_graph_run(dg.g)) == CLB_OK) st = clb_context_sync(ctx);
    if (st != CLB_OK) {
      snprintf(err, errlen, "%s: %s", clb_status_str(st), clb_context_errmsg(ctx));
      rc = 1;
      break;
    }
    if (r >= 0) t[r] = 1e3 * (now_s() - a);
  }
  if (!rc) {
    *ms = clb_tool_median(t, reps);
  }
  free(t);
  free_graph(&dg);
  clb_context_free(ctx);
  return rc;
}


int demo_time_whole_step(demo_workload w, int reps, int batch, demo_step_times *out, char *err, size_t errlen) {
  /* ctx[0]: the plan enqueued (CLBOUND_RECORD=off), fused and op by op;
   * ctx[1]: the same plan recorded and replayed (CLBOUND_RECORD=on) */
  clb_context_t ctx[2] = {NULL, NULL};
  demo_graph dg[2];
  memset(dg, 0, sizeof dg);
  const char *was = clb_env_text("CLBOUND_RECORD");
  char saved[32] = "";
  if (was) snprintf(saved, sizeof saved, "%s", was);
  int rc = 0;
  for (int k = 0; k < 2 && !rc; k++) {
    setenv("CLBOUND_RECORD", k ? "on" : "off", 1); /* read when the graph is made */
    rc = open_graph(w, CLB_POLICY_DYNAMIC, CLB_GEMM_AUTO, &ctx[k], &dg[k], err, errlen);
  }
  if (was) setenv("CLBOUND_RECORD", saved, 1);
  else unsetenv("CLBOUND_RECORD");
  clb_status st;
  double *t[3];
  for (int m = 0; m < 3; m++)
    if (!(t[m] = rc ? NULL : calloc((size_t)reps, sizeof(double)))) rc = 1;
  /* the same plan, rep by rep: `batch` steps enqueued then one sync; whole-step
   * (fused kernels), eager (CLBOUND_FUSE=off: op by op) and replayed in turn;
   * two warm-up reps of each build, compile and record everything first */
  for (int r = -2; !rc && r < reps; r++)
    for (int mode = 0; !rc && mode < 3; mode++) {
      const int k = mode == 2;
      setenv("CLBOUND_FUSE", mode == 1 ? "off" : "on", 1);
      double a = now_s();
      for (int i = 0; !rc && i < batch; i++) {
        if ((rc = feed(ctx[k], w, &dg[k], i, 0, w == DEMO_WIDE_MLP ? 256 : -1, err, errlen)) != 0) break;
        if ((st = clb_graph_run(dg[k].g)) != CLB_OK) {
          snprintf(err, errlen, "%s: %s", clb_status_str(st), clb_context_errmsg(ctx[k]));
          rc = 1;
        }
      }
      if (!rc && (st = clb_context_sync(ctx[k])) != CLB_OK) {
        snprintf(err, errlen, "%s: %s", clb_status_str(st), clb_context_errmsg(ctx[k]));
        rc = 1;
      }
      if (r >= 0) t[mode][r] = 1e3 * (now_s() - a) / batch;
    }
  unsetenv("CLBOUND_FUSE");
  if (!rc) {
    clb_counters c;
    counters(ctx[1], &c);
    out->step_ms = clb_tool_median(t[0], reps);
    out->eager_step_ms = clb_tool_median(t[1], reps);
    out->replay_step_ms = clb_tool_median(t[2], reps);
    out->steps_replayed = c.steps_replayed;
    out->steps_recorded = c.steps_recorded;
  }
  for (int m = 0; m < 3; m++) free(t[m]);
  for (int k = 0; k < 2; k++) {
    if (ctx[k]) free_graph(&dg[k]);
    clb_context_free(ctx[k]);
  }
  return rc;
}

int demo_warm(demo_workload w, clb_policy_kind policy, uint64_t *built, uint64_t *loaded, char *dir, size_t dirlen,
              char *err, size_t errlen) {
  clb_context_t ctx;
  demo_graph dg;
  clb_status st;
  if (open_graph(w, policy, CLB_GEMM_AUTO, &ctx, &dg, err, errlen) != 0) return 1;
  int rc = feed(ctx, w, &dg, 0, 0, -1, err, errlen);
  if (!rc && (st = clb_graph_warm(dg.g)) != CLB_OK) {
    snprintf(err, errlen, "%s: %s", clb_status_str(st), clb_context_errmsg(ctx));
    rc = 1;
  }
  clb_counters c;
  counters(ctx, &c);
  *built = c.program_builds;
  *loaded = c.program_cache_hits_disk;
  const char *cd = clb_context_cache_dir(ctx);
  snprintf(dir, dirlen, "%s", cd ? cd : "");
  free_graph(&dg);
  clb_context_free(ctx);
  return rc;
}
