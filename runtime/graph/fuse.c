/* fuse.c: kernels generated for a plan that do the work of several ops in one
 * launch. Each reads actual sizes from the shape records and raises the same
 * device status bits as the ops it replaces; its source depends only on the
 * pattern (count, dtype, flags), so its program cache key is stable.
 *
 * - the SGD step of every trainable parameter of a graph in one kernel
 *   (kernels/nn.cl's nn_sgd, once per parameter, before). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cache/cache.h"
#include "runtime/graph/graph.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/fused.h"

int clb__graph_fusion_on(void) {
  return clb__env_int(CLB_ENV_FUSE) != 0;
}

/* ---- SGD of several parameters ------------------------------------------------ */

#define SGD_MAX 16

static void sgd_source(char *buf, size_t cap, const char *kname, const char *T, int n, unsigned velmask) {
  size_t u = 0;
#define PUT(...) u += (size_t)snprintf(buf + u, u < cap ? cap - u : 0, __VA_ARGS__)
  PUT("__kernel void %s(", kname);
  for (int k = 0; k < n; k++) {
    PUT("CLB_DATA(%s, p%d), __global const long *sp%d, CLB_DATA(const %s, g%d), __global const long *sg%d, int r%d, ", T, k, k,
        T, k, k, k);
    if (velmask >> k & 1) PUT("CLB_DATA(%s, v%d), ", T, k);
  }
  PUT("%s lr, %s momentum, __global int *st, uint launch) {\n", T, T);
  for (int k = 0; k < n; k++) {
    PUT("  {\n    CLB_DATA_AT(%s, p%d);\n    CLB_DATA_AT(const %s, g%d);\n", T, k, T, k);
    if (velmask >> k & 1) PUT("    CLB_DATA_AT(%s, v%d);\n", T, k);
    PUT("    long n = clb_numel(sp%d, r%d), ng = clb_numel(sg%d, r%d);\n", k, k, k, k);
    PUT("    if (clb_first_item() && n != ng) clb_raise(st, launch, CLB_STF_DEVICE_CHECK, n, ng);\n");
    PUT("    n = min(n, ng);\n    CLB_FOR_CHUNK(i, n) {\n      %s d = g%d[i];\n", T, k);
    if (velmask >> k & 1) PUT("      d = momentum * v%d[i] + d;\n      v%d[i] = d;\n", k, k);
    PUT("      p%d[i] -= lr * d;\n    }\n  }\n", k);
  }
  PUT("}\n");
#undef PUT
}

static clb_status sgd_group(clb_graph_t g, int n, clb_tensor_t *p, clb_tensor_t *gr, clb_tensor_t *v, double lr,
                            double momentum) {
  static const char *op = "sgd_step (fused)";
  clb_context_t ctx = g->ctx;
  clb_dtype dt = p[0]->dtype;
  unsigned velmask = 0;
  for (int k = 0; k < n; k++)
    if (v[k]) velmask |= 1u << k;
  char name[64], kname[64];
  snprintf(name, sizeof name, "fused-sgd-%d-%s-%x", n, clb_dtype_name(dt), velmask);
  snprintf(kname, sizeof kname, "fused_sgd");
  cl_kernel k = NULL;
  size_t local = 0;
  clb_status st = CLB_OK;
  if (!clb__kernel_src_get(ctx, name)) {
    char text[16384];
    sgd_source(text, sizeof text, kname, clb__dtype_cl(dt), n, velmask);
    if ((st = clb__kernel_source_add(ctx, name, text)) != CLB_OK) return st;
    ctx->counters.kernels_fused++;
  }
  const char *opts = dt == CLB_DTYPE_F64 ? "-D CLB_NEED_FP64" : "";
  if ((st = clb__kernel_get_local(ctx, op, name, opts, kname, &k, &local)) != CLB_OK) return st;
  clb_arg args[SGD_MAX * 9 + 4];
  cl_int ranks[SGD_MAX];
  union {
    float f;
    double d;
  } vlr, vmom;
  size_t vs = clb_dtype_size(dt);
  if (dt == CLB_DTYPE_F64) {
    vlr.d = lr;
    vmom.d = momentum;
  } else {
    vlr.f = (float)lr;
    vmom.f = (float)momentum;
  }
  int na = 0;
  int64_t most = 0;
  for (int i = 0; i < n; i++) {
    ranks[i] = p[i]->rank;
    CLB_PUSH_DATA(args, na, p[i]->data);
    args[na++] = CLB_ARG(p[i]->shape.mem);
    CLB_PUSH_DATA(args, na, gr[i]->data);
    args[na++] = CLB_ARG(gr[i]->shape.mem);
    args[na++] = CLB_ARG(ranks[i]);
    if (v[i]) CLB_PUSH_DATA(args, na, v[i]->data);
    int64_t b = clb_tensor_bound_numel(p[i]);
    if (b > most) most = b;
  }
  cl_uint zero = 0;
  args[na++] = (clb_arg){vs, &vlr};
  args[na++] = (clb_arg){vs, &vmom};
  args[na++] = CLB_ARG(ctx->status);
  args[na++] = CLB_ARG(zero);
  char what[192];
  snprintf(what, sizeof what, "%d parameters of graph %s", n, g->name);
  for (int i = 0; i < n; i++) { /* a failed step marks what it wrote (docs/failure-behaviour.md) */
    clb__note_output(ctx, op, p[i]);
    if (v[i]) clb__note_output(ctx, op, v[i]);
  }
  return clb__launch(ctx, op, what, k, args, na, na - 1, clb__groups_local(ctx, most, local), local);
}

clb_status clb__graph_fused_sgd(clb_graph_t g, int n, clb_tensor_t *p, clb_tensor_t *gr, clb_tensor_t *v) {
  clb_status st = CLB_OK;
  for (int k = 0; k < n; k++)
    if (!clb__dtype_is_float(p[k]->dtype) || gr[k]->dtype != p[k]->dtype || gr[k]->rank != p[k]->rank ||
        (v[k] && (v[k]->dtype != p[k]->dtype || clb_tensor_bound_numel(v[k]) < clb_tensor_bound_numel(p[k]))))
      return clb__set_error(g->ctx, CLB_ERR_INTERNAL, "graph %s: sgd_step (fused): parameter %d: gradient or velocity unlike it",
                            g->name, k);
  /* one kernel per run of parameters of one dtype, at most SGD_MAX each */
  for (int a = 0; a < n && st == CLB_OK;) {
    int b = a + 1;
    while (b < n && b - a < SGD_MAX && p[b]->dtype == p[a]->dtype) b++;
    st = sgd_group(g, b - a, p + a, gr + a, v + a, g->lr, g->momentum);
    a = b;
  }
  return st;
}

/* ---- elementwise groups ---------------------------------------------------------- */

#define GROUP_MAX 16 /* members of one group */
#define OPND_MAX 32  /* operands read from memory by one group */

static int is_elementwise(const gnode *n) { return n->kind == GN_UNARY || n->kind == GN_BINARY || n->kind == GN_CAST; }

/* Whether the symbol engine proves dims a and b equal. */
static int proven_equal(clb_graph_t g, clb_expr_t a, clb_expr_t b) {
  clb_expr_t ra, rb;
  if (clb_shapes_resolve(g->shapes, a, &ra) != CLB_OK || clb_shapes_resolve(g->shapes, b, &rb) != CLB_OK) return 0;
  return ra == rb;
}

static int is_one(clb_graph_t g, clb_expr_t e) {
  clb_expr_t r;
  return clb_shapes_resolve(g->shapes, e, &r) == CLB_OK && clb_expr_is_const(r) && clb_expr_value(r) == 1;
}

/* Whether operand `e` fits node n's output dim by dim: each of its dims is proven
 * equal to n's, or a static 1 (or missing) that broadcasts. */
static int operand_fits(clb_graph_t g, const gnode *n, const gnode *e) {
  if (e->rank > n->rank) return 0;
  for (int d = 0; d < n->rank; d++) {
    int ie = d - (n->rank - e->rank);
    if (ie < 0) continue;
    if (!proven_equal(g, e->shape.dims[ie], n->shape.dims[d]) && !is_one(g, e->shape.dims[ie])) return 0;
  }
  return 1;
}

/* Whether the chained operand t has c's output shape exactly (no broadcast). */
static int same_shape(clb_graph_t g, const gnode *t, const gnode *c) {
  if (t->rank != c->rank) return 0;
  for (int d = 0; d < c->rank; d++)
    if (!proven_equal(g, t->shape.dims[d], c->shape.dims[d])) return 0;
  return 1;
}

clb_status clb__graph_fuse_find(clb_graph_t g) {
  if (!clb__graph_fusion_on()) {
    g->stats.fused_groups = g->stats.fused_nodes = g->stats.fused_losses = g->stats.fused_epilogues = 0;
    g->stats.fused_backward_relus = g->stats.fused_casts = 0;
    g->fuse_nnodes = -1;
    g->fuse_loss_pred = -1;
    return CLB_OK;
  }
  if (g->fuse_nnodes == g->nnodes) return CLB_OK;
  int n = g->nnodes, last_run = g->loss >= 0 ? g->loss : n - 1;
  int *readers = calloc((size_t)n, sizeof *readers), *reader = calloc((size_t)n, sizeof *reader);
  if (!readers || !reader) {
    free(readers);
    free(reader);
    return clb__set_error(g->ctx, CLB_ERR_HOST_OOM, "graph %s: fusion: out of host memory", g->name);
  }
  for (int i = 0; i <= last_run; i++)
    for (int k = 0; k < g->nodes[i].nin; k++) {
      readers[g->nodes[i].in[k]]++;
      reader[g->nodes[i].in[k]] = i;
    }
  for (int i = 0; i < n; i++) {
    g->nodes[i].fuse_last = g->nodes[i].fuse_next = -1;
    g->nodes[i].fuse_drop = 0;
    g->nodes[i].fuse_epi = -1;
    g->nodes[i].fuse_bwd = -1;
    g->nodes[i].fuse_cast = -1;
  }
  /* an intermediate is not materialised when its tensor would be released after
   * the step anyway and no gradient reads it */
  const int releasable = g->loss >= 0 ? clb__graph_mem_enabled(g) : g->free_intermediates;
  g->stats.fused_groups = g->stats.fused_nodes = 0;
  for (int a = 0; a <= last_run; a++) {
    gnode *head = &g->nodes[a];
    if (!is_elementwise(head) || head->fuse_last >= 0) continue;
    int ok = 1;
    for (int k = 0; k < head->nin && ok; k++) ok = operand_fits(g, head, &g->nodes[head->in[k]]);
    if (!ok) continue;
    int members[GROUP_MAX], nm = 1, nopnd = head->nin;
    members[0] = a;
    for (int t = a; nm < GROUP_MAX;) {
      if (readers[t] != 1 || t == g->loss) break;
      int c = reader[t];
      gnode *cn = &g->nodes[c];
      if (!is_elementwise(cn) || cn->fuse_last >= 0 || !same_shape(g, &g->nodes[t], cn)) break;
      int fits = 1;
      for (int k = 0; k < cn->nin && fits; k++)
        if (cn->in[k] != t) fits = operand_fits(g, cn, &g->nodes[cn->in[k]]);
      if (!fits || nopnd + cn->nin - 1 > OPND_MAX) break;
      nopnd += cn->nin - 1;
      members[nm++] = c;
      t = c;
    }
    if (nm < 2) continue;
    for (int m = 0; m < nm; m++) {
      gnode *mn = &g->nodes[members[m]];
      mn->fuse_last = members[nm - 1];
      mn->fuse_next = m + 1 < nm ? members[m + 1] : -1;
      const gnode *next = m + 1 < nm ? &g->nodes[members[m + 1]] : NULL;
      mn->fuse_drop = next && releasable && !mn->keep && !mn->requires_grad && !next->requires_grad;
    }
    g->stats.fused_groups++;
    g->stats.fused_nodes += (uint64_t)nm;
  }
  /* a training graph's loss of an activation read by the loss alone: the
   * activation, the loss, its gradient and the activation's gradient in one */
  g->fuse_loss_pred = -1;
  g->stats.fused_losses = 0;
  if (g->loss >= 0) {
    const gnode *l = &g->nodes[g->loss];
    const gnode *p = &g->nodes[l->in[0]];
    if (l->kind == GN_LOSS && l->op != CLB_LOSS_CROSS_ENTROPY && l->requires_grad && p->kind == GN_UNARY &&
        p->requires_grad && readers[l->in[0]] == 1 && p->fuse_last < 0 && clb__dtype_is_float(p->dtype)) {
      g->fuse_loss_pred = l->in[0];
      g->stats.fused_losses = 1;
    }
  }
  /* a linear node read by an activation alone, whose output would be released
   * after the step: the activation is the GEMM's epilogue, and its gradient
   * reads its output (relu: y > 0 exactly where x > 0) */
  g->stats.fused_epilogues = 0;
  for (int i = 0; i <= last_run; i++) {
    gnode *l = &g->nodes[i], *a = &g->nodes[reader[i]];
    if (l->kind != GN_LINEAR || readers[i] != 1 || l->keep || !releasable || a->kind != GN_UNARY || a->fuse_last >= 0 ||
        reader[i] == g->fuse_loss_pred || !clb__dtype_is_float(l->dtype))
      continue;
    if (a->op != CLB_UNARY_RELU && a->op != CLB_UNARY_SIGMOID && a->op != CLB_UNARY_TANH && a->op != CLB_UNARY_EXP) continue;
    l->fuse_epi = reader[i];
    a->fuse_epi = i;
    g->stats.fused_epilogues++;
  }
  /* a linear node of a training graph whose input x is a ReLU's output read by
   * it alone: its backward computes the ReLU's input gradient, dx = dy W where
   * x > 0 (runtime/ops' clb__linear_backward_relu: one native kernel with dW and
   * dbias under host BLAS), and the ReLU's own backward launch goes */
  g->stats.fused_backward_relus = 0;
  for (int i = 0; g->loss >= 0 && i < g->loss; i++) {
    gnode *l = &g->nodes[i];
    if (l->kind != GN_LINEAR || !l->requires_grad || !clb__dtype_is_float(l->dtype)) continue;
    int r = l->in[0];
    gnode *rn = &g->nodes[r];
    if (rn->kind != GN_UNARY || rn->op != CLB_UNARY_RELU || !rn->requires_grad || readers[r] != 1 || rn->fuse_last >= 0 ||
        r == g->fuse_loss_pred)
      continue;
    l->fuse_bwd = r;
    rn->fuse_bwd = i;
    g->stats.fused_backward_relus++;
  }
  /* a nonzero node read by one cast alone, whose output would be released after
   * the step: nonzero writes the cast's dtype (indices below 2^24 are exact in
   * f32, as the cast makes them) and the cast's launch goes. Not where the
   * policy reads nonzero's count back to compile it in (static, bucketed). */
  g->stats.fused_casts = 0;
  const int counts_on_device = g->policy_kind != CLB_POLICY_STATIC && g->policy_kind != CLB_POLICY_BUCKETED;
  for (int i = 0; counts_on_device && i <= last_run; i++) {
    gnode *z = &g->nodes[i], *c = &g->nodes[reader[i]];
    if (z->kind != GN_NONZERO || readers[i] != 1 || z->keep || !releasable || c->kind != GN_CAST || c->fuse_last >= 0 ||
        c->requires_grad || (c->dtype != CLB_DTYPE_I32 && !clb__dtype_is_float(c->dtype)))
      continue;
    z->fuse_cast = reader[i];
    c->fuse_cast = i;
    g->stats.fused_casts++;
  }
  free(readers);
  free(reader);
  g->fuse_nnodes = n;
  return CLB_OK;
}

/* One member's output as the unfused op makes it. */
typedef struct member {
  gnode *n;
  int rank;
  int64_t bound[CLB_MAX_RANK];
  uint8_t dyn[CLB_MAX_RANK];
  int src[2]; /* per input: the operand index, or -(member index + 1) when chained */
} member;

/* kernels/common.cl's table; the first three take the type first */
static const char *const ew_unary_macro[CLB_UNARY_COUNT] = {"CLB_OP_NEG", "CLB_OP_RELU", "CLB_OP_SIGMOID", "CLB_OP_TANH",
                                                            "CLB_OP_EXP", "CLB_OP_LOG", "CLB_OP_COPY",
                                                            "CLB_OP_ERF", "CLB_OP_ABS", "CLB_OP_SQRT", "CLB_OP_RSQRT",
                                                            "CLB_OP_LOG1P", "CLB_OP_EXPM1", "CLB_OP_FLOOR",
                                                            "CLB_OP_CEIL", "CLB_OP_ROUND", "CLB_OP_TRUNC",
                                                            "CLB_OP_SIN", "CLB_OP_COS", "CLB_OP_LOG2",
                                                            "CLB_OP_LOG10", "CLB_OP_EXP2"};
/* NULL: a function of its own (fz_rem_*, fz_floordiv_*) */
static const char *const ew_binary_macro[CLB_BINARY_COUNT] = {"CLB_OP_ADD", "CLB_OP_SUB", "CLB_OP_MUL", "CLB_OP_DIV",
                                                              NULL,         "CLB_OP_MAX", "CLB_OP_MIN", "CLB_OP_POW",
                                                              NULL};

static void operand_ref(char *buf, size_t cap, int src) {
  if (src >= 0) snprintf(buf, cap, "a%d", src);
  else snprintf(buf, cap, "v%d", -src - 1);
}

/* The group's kernel: operand j is x<j> with record s<j> (rank rk[j], broadcast
 * mask bm[j] over the rank-R iteration space); member m writes o<m> / so<m> when
 * materialised. */
static void group_source(char *buf, size_t cap, const member *mb, int nm, const clb_tensor_t *opnd, const unsigned *bm,
                         int nopnd) {
  size_t u = 0;
#define PUT(...) u += (size_t)snprintf(buf + u, u < cap ? cap - u : 0, __VA_ARGS__)
  const int R = mb[nm - 1].rank;
  int flat = 1;
  for (int j = 0; j < nopnd; j++) flat &= bm[j] == 0 && opnd[j]->rank == R;
  PUT("#pragma OPENCL FP_CONTRACT OFF\n"); /* as the unfused ops: one rounding per op */
  unsigned done[2] = {0, 0}; /* per function (remainder, floor division): the dtypes written out */
  for (int m = 0; m < nm; m++) {
    const gnode *n = mb[m].n;
    int f = n->kind != GN_BINARY ? -1 : n->op == CLB_BINARY_REM ? 0 : n->op == CLB_BINARY_FLOORDIV ? 1 : -1;
    if (f < 0 || (done[f] >> n->dtype & 1)) continue;
    done[f] |= 1u << n->dtype;
    const char *T = clb__dtype_cl(n->dtype);
    PUT("inline %s fz_%s_%s(%s x, %s y, __global int *st, uint launch) {\n  CLB_%s_BODY_%s(%s)\n}\n", T,
        f ? "floordiv" : "rem", clb_dtype_name(n->dtype), T, T, f ? "FLOORDIV" : "REM",
        clb__dtype_is_float(n->dtype) ? "FLOAT" : "INT", T);
  }
  PUT("__kernel void fused_ew(");
  for (int j = 0; j < nopnd; j++) PUT("CLB_DATA(const %s, x%d), __global const long *s%d, ", clb__dtype_cl(opnd[j]->dtype), j, j);
  for (int m = 0; m < nm; m++)
    if (!mb[m].n->fuse_drop) PUT("CLB_DATA(%s, o%d), __global long *so%d, ", clb__dtype_cl(mb[m].n->dtype), m, m);
  PUT("__global int *st, uint launch) {\n");
  for (int j = 0; j < nopnd; j++) PUT("  CLB_DATA_AT(const %s, x%d);\n", clb__dtype_cl(opnd[j]->dtype), j);
  for (int m = 0; m < nm; m++)
    if (!mb[m].n->fuse_drop) PUT("  CLB_DATA_AT(%s, o%d);\n", clb__dtype_cl(mb[m].n->dtype), m);
  PUT("  long od[%d];\n", R > 0 ? R : 1);
  /* the actual size of each dim: the operands that do not broadcast there must
   * agree (a deferred check, as the unfused ops raise); the smallest is used */
  for (int d = 0; d < R; d++) {
    int first = -1;
    for (int j = 0; j < nopnd; j++) {
      int ij = d - (R - opnd[j]->rank);
      if (ij < 0 || (bm[j] >> d & 1)) continue;
      if (first < 0) {
        PUT("  od[%d] = s%d[%d];\n", d, j, ij);
        first = j;
      } else {
        PUT("  if (s%d[%d] != od[%d]) {\n    if (clb_first_item()) clb_raise(st, launch, CLB_STF_DEVICE_CHECK, od[%d], s%d[%d]);\n"
            "    od[%d] = min(od[%d], s%d[%d]);\n  }\n", j, ij, d, d, j, ij, d, d, j, ij);
      }
    }
    if (first < 0) PUT("  od[%d] = 1;\n", d);
  }
  PUT("  long n = 1;\n  for (int d = 0; d < %d; d++) n *= od[d];\n", R);
  PUT("  if (clb_first_item()) {\n");
  for (int m = 0; m < nm; m++) {
    if (mb[m].n->fuse_drop) continue;
    PUT("    if (1");
    for (int j = 0; j < nopnd; j++) PUT(" && CLB_OWN_RECORD(so%d, s%d)", m, j);
    PUT(")\n      for (int d = 0; d < %d; d++) so%d[d] = od[d];\n", R, m);
  }
  PUT("  }\n");
  if (!flat) {
    for (int j = 0; j < nopnd; j++) {
      PUT("  long str%d[%d];\n  {\n    long acc = 1;\n", j, R > 0 ? R : 1);
      PUT("    for (int d = %d; d >= 0; d--) {\n      int ij = d - %d;\n      long sz = ij >= 0 ? s%d[ij] : 1;\n", R - 1,
          R - opnd[j]->rank, j);
      PUT("      str%d[d] = (ij < 0 || (%uu >> d & 1u)) ? 0 : acc;\n      acc *= sz;\n    }\n  }\n", j, bm[j]);
    }
  }
  PUT("  CLB_FOR_CHUNK(i, n) {\n");
  if (!flat) {
    PUT("    long r = i");
    for (int j = 0; j < nopnd; j++) PUT(", i%d = 0", j);
    PUT(";\n    for (int d = %d; d >= 0; d--) {\n      long c = r %% od[d];\n      r /= od[d];\n", R - 1);
    for (int j = 0; j < nopnd; j++) PUT("      i%d += c * str%d[d];\n", j, j);
    PUT("    }\n");
  }
  for (int j = 0; j < nopnd; j++) {
    if (flat) PUT("    %s a%d = x%d[i];\n", clb__dtype_cl(opnd[j]->dtype), j, j);
    else PUT("    %s a%d = x%d[i%d];\n", clb__dtype_cl(opnd[j]->dtype), j, j, j);
  }
  for (int m = 0; m < nm; m++) {
    const gnode *n = mb[m].n;
    char x[16], y[16];
    operand_ref(x, sizeof x, mb[m].src[0]);
    const char *T = clb__dtype_cl(n->dtype);
    PUT("    %s v%d = ", T, m);
    if (n->kind == GN_CAST) {
      const clb_dtype from = mb[m].src[0] >= 0 ? opnd[mb[m].src[0]]->dtype : mb[-mb[m].src[0] - 1].n->dtype;
      if (n->dtype == CLB_DTYPE_BOOL) PUT("CLB_OP_CAST_BOOL(%s, %s, %s);\n", clb__dtype_cl(from), T, x);
      else PUT("CLB_OP_CAST(%s, %s);\n", T, x);
    } else if (n->kind == GN_UNARY) {
      if (n->op == CLB_UNARY_NEG || n->op == CLB_UNARY_RELU || n->op == CLB_UNARY_SIGMOID)
        PUT("%s(%s, %s);\n", ew_unary_macro[n->op], T, x);
      else PUT("%s(%s);\n", ew_unary_macro[n->op], x);
    } else {
      operand_ref(y, sizeof y, mb[m].src[1]);
      if (n->op == CLB_BINARY_REM || n->op == CLB_BINARY_FLOORDIV)
        PUT("fz_%s_%s(%s, %s, st, launch);\n", n->op == CLB_BINARY_REM ? "rem" : "floordiv", clb_dtype_name(n->dtype), x, y);
      else if (n->op == CLB_BINARY_MAX || n->op == CLB_BINARY_MIN)
        PUT("%s(%s, %s, %s);\n", ew_binary_macro[n->op], clb__dtype_is_float(n->dtype) ? "isnan" : "CLB_NO_NAN", x, y);
      else PUT("%s(%s, %s);\n", ew_binary_macro[n->op], x, y);
    }
    if (!n->fuse_drop) PUT("    o%d[i] = v%d;\n", m, m);
  }
  PUT("  }\n}\n#pragma OPENCL FP_CONTRACT DEFAULT\n"); /* for the sections after it in a plan's program */
#undef PUT
}

clb_status clb__graph_fused_run(clb_graph_t g, int last) {
  static const char *op = "fused_elementwise";
  clb_context_t ctx = g->ctx;
  member mb[GROUP_MAX];
  clb_tensor_t opnd[OPND_MAX];
  unsigned bm[OPND_MAX];
  int nm = 0, nopnd = 0, head = -1;
  for (int i = 0; i <= last && head < 0; i++)
    if (g->nodes[i].fuse_last == last) head = i;
  clb_status st = CLB_OK;
  clb__graph_set_suffix(g, g->nodes[last].deps);
  char what[256];
  size_t wu = (size_t)snprintf(what, sizeof what, "group of");
  for (int i = head; i >= 0 && nm < GROUP_MAX; i = g->nodes[i].fuse_next) {
    member *m = &mb[nm];
    m->n = &g->nodes[i];
    clb__graph_ensure_key(g, m->n);
    const int64_t *ib[2];
    const uint8_t *iy[2];
    int ir[2];
    for (int k = 0; k < m->n->nin; k++) {
      int src = m->n->in[k];
      if (nm > 0 && src == mb[nm - 1].n - g->nodes) {
        m->src[k] = -nm; /* member nm - 1 */
        ib[k] = mb[nm - 1].bound;
        iy[k] = mb[nm - 1].dyn;
        ir[k] = mb[nm - 1].rank;
        continue;
      }
      clb_tensor_t t = g->nodes[src].t;
      if ((st = clb__check_tensor(ctx, op, g->nodes[src].name, t)) != CLB_OK) return st;
      m->src[k] = nopnd;
      opnd[nopnd++] = t;
      ib[k] = t->bound;
      iy[k] = t->dyn;
      ir[k] = t->rank;
    }
    if (m->n->kind == GN_BINARY) {
      unsigned ba, bb;
      int bad = 0;
      m->rank = clb__broadcast_bounds(ir[0], ib[0], iy[0], ir[1], ib[1], iy[1], m->bound, m->dyn, &ba, &bb, &bad);
      if (m->rank < 0)
        return clb__set_error(ctx, CLB_ERR_SHAPE, "graph %s: %s %s: the operands do not broadcast at dim %d", g->name, op,
                              m->n->name, bad);
    } else {
      m->rank = ir[0];
      memcpy(m->bound, ib[0], sizeof(int64_t) * (size_t)ir[0]);
      memcpy(m->dyn, iy[0], (size_t)ir[0]);
    }
    if (!m->n->fuse_drop &&
        (st = clb__output(ctx, op, m->n->dtype, m->rank, m->bound, m->dyn, &m->n->t)) != CLB_OK)
      return st;
    if (wu < sizeof what) wu += (size_t)snprintf(what + wu, sizeof what - wu, " %s", m->n->name);
    nm++;
  }
  const member *out = &mb[nm - 1];
  int fp64 = 0;
  for (int j = 0; j < nopnd; j++) {
    /* operand j's broadcast dims over the group's iteration space (the last
     * member's shape, which every member has) */
    bm[j] = 0;
    for (int d = 0; d < out->rank; d++) {
      int ij = d - (out->rank - opnd[j]->rank);
      if (ij < 0 || (opnd[j]->bound[ij] == 1 && !opnd[j]->dyn[ij] && !(out->bound[d] == 1 && !out->dyn[d]))) bm[j] |= 1u << d;
    }
    fp64 |= opnd[j]->dtype == CLB_DTYPE_F64;
  }
  for (int m = 0; m < nm; m++) fp64 |= mb[m].n->dtype == CLB_DTYPE_F64;
  if (fp64 && !ctx->info.has_fp64) /* as clb_cast says it */
    return clb__set_error(ctx, CLB_ERR_UNSUPPORTED, "graph %s: %s %s: f64 needs cl_khr_fp64, which %s lacks", g->name, op, what,
                          ctx->info.name);
  /* the source depends on these alone (group_source): generated again only
   * when they differ from the last step's */
  uint64_t key = 1469598103934665603ull;
  int lay[8 + OPND_MAX * 3 + GROUP_MAX * 6], nl = 0;
  lay[nl++] = nm;
  lay[nl++] = nopnd;
  lay[nl++] = out->rank;
  for (int j = 0; j < nopnd; j++) {
    lay[nl++] = (int)opnd[j]->dtype;
    lay[nl++] = opnd[j]->rank;
    lay[nl++] = (int)bm[j];
  }
  for (int m = 0; m < nm; m++) {
    lay[nl++] = (int)mb[m].n->kind;
    lay[nl++] = mb[m].n->op;
    lay[nl++] = (int)mb[m].n->dtype;
    lay[nl++] = mb[m].n->fuse_drop;
    lay[nl++] = mb[m].src[0];
    lay[nl++] = mb[m].n->nin > 1 ? mb[m].src[1] : 0;
  }
  key = clb__fnv1a(key, lay, sizeof(int) * (size_t)nl);
  gnode *ln = &g->nodes[last];
  if (!ln->fuse_src_name[0] || ln->fuse_src_key != key || !clb__kernel_src_get(ctx, ln->fuse_src_name)) {
    char *text = malloc(65536);
    if (!text) return clb__set_error(ctx, CLB_ERR_HOST_OOM, "graph %s: %s: out of host memory", g->name, op);
    group_source(text, 65536, mb, nm, opnd, bm, nopnd);
    char name[sizeof ln->fuse_src_name];
    snprintf(name, sizeof name, "fused-ew-%016llx", (unsigned long long)clb__fnv1a(1469598103934665603ull, text, strlen(text)));
    if (!clb__kernel_src_get(ctx, name)) {
      if ((st = clb__kernel_source_add(ctx, name, text)) == CLB_OK) ctx->counters.kernels_fused++;
    }
    free(text);
    if (st != CLB_OK) return st;
    memcpy(ln->fuse_src_name, name, sizeof name);
    ln->fuse_src_key = key;
  }
  const char *name = ln->fuse_src_name;
  cl_kernel k;
  if ((st = clb__kernel_get(ctx, op, name, fp64 ? "-D CLB_NEED_FP64" : "", "fused_ew", &k)) != CLB_OK) return st;
  clb_arg args[OPND_MAX * 3 + GROUP_MAX * 3 + 2];
  int na = 0;
  for (int j = 0; j < nopnd; j++) {
    CLB_PUSH_DATA(args, na, opnd[j]->data);
    args[na++] = CLB_ARG(opnd[j]->shape.mem);
  }
  for (int m = 0; m < nm; m++)
    if (!mb[m].n->fuse_drop) {
      clb__note_output(ctx, op, mb[m].n->t);
      CLB_PUSH_DATA(args, na, mb[m].n->t->data);
      args[na++] = CLB_ARG(mb[m].n->t->shape.mem);
    }
  cl_uint zero = 0;
  args[na++] = CLB_ARG(ctx->status);
  args[na++] = CLB_ARG(zero);
  return clb__launch(ctx, op, what, k, args, na, na - 1, clb__groups_for(ctx, clb__numel(out->rank, out->bound)),
                     ctx->local_size);
}

/* ---- the loss with its activation ------------------------------------------------ */

int clb__graph_loss_fuses_now(clb_graph_t g, int p) {
  const gnode *z = &g->nodes[g->nodes[p].in[0]];
  g->loss_fused_now = z->t && clb_tensor_bound_numel(z->t) <= CLB_LOSS_FUSED_MAX;
  return g->loss_fused_now;
}

clb_status clb__graph_fused_loss(clb_graph_t g) {
  gnode *l = &g->nodes[g->loss], *p = &g->nodes[g->fuse_loss_pred];
  const gnode *z = &g->nodes[p->in[0]], *t = &g->nodes[l->in[1]];
  clb__graph_set_suffix(g, l->deps);
  clb__graph_ensure_key(g, p);
  clb__graph_ensure_key(g, l);
  /* the activation's output is kept only where the step would keep it */
  const int keep_y = p->keep || !clb__graph_mem_enabled(g);
  return clb__loss_fused(g->ctx, (clb_loss_kind)l->op, (clb_unary_op)p->op, z->t, t->t, keep_y ? &p->t : NULL, &p->egrad[0],
                         &l->t);
}

/* ---- the linear layer with its activation ---------------------------------------- */

clb_status clb__graph_fused_linear(clb_graph_t g, int a) {
  gnode *an = &g->nodes[a], *l = &g->nodes[an->fuse_epi];
  clb__graph_set_suffix(g, an->deps);
  clb__graph_ensure_key(g, l);
  clb__graph_ensure_key(g, an);
  clb_tensor_t bias = l->nin > 2 ? g->nodes[l->in[2]].t : NULL;
  return clb__linear_act(g->ctx, g->nodes[l->in[0]].t, g->nodes[l->in[1]].t, bias, (clb_unary_op)an->op, &an->t);
}

clb_status clb__graph_fused_cast(clb_graph_t g, int c) {
  gnode *cn = &g->nodes[c], *z = &g->nodes[cn->fuse_cast];
  clb__graph_set_suffix(g, cn->deps);
  clb__graph_ensure_key(g, z);
  clb__graph_ensure_key(g, cn);
  return clb__nonzero_as(g->ctx, g->nodes[z->in[0]].t, cn->dtype, &cn->t);
}
