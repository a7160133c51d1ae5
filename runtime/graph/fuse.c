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

int clb__graph_fusion_on(void) {
  const char *env = getenv("CLBOUND_FUSE");
  return !(env && (strcmp(env, "off") == 0 || strcmp(env, "0") == 0));
}

/* ---- SGD of several parameters ------------------------------------------------ */

#define SGD_MAX 16

static void sgd_source(char *buf, size_t cap, const char *kname, const char *T, int n, unsigned velmask) {
  size_t u = 0;
#define PUT(...) u += (size_t)snprintf(buf + u, u < cap ? cap - u : 0, __VA_ARGS__)
  PUT("__kernel void %s(", kname);
  for (int k = 0; k < n; k++) {
    PUT("__global %s *p%d, __global const long *sp%d, __global const %s *g%d, __global const long *sg%d, int r%d, ", T, k, k,
        T, k, k, k);
    if (velmask >> k & 1) PUT("__global %s *v%d, ", T, k);
  }
  PUT("%s lr, %s momentum, __global int *st, uint launch) {\n", T, T);
  for (int k = 0; k < n; k++) {
    PUT("  {\n    long n = clb_numel(sp%d, r%d), ng = clb_numel(sg%d, r%d);\n", k, k, k, k);
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
  clb_arg args[SGD_MAX * 6 + 4];
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
    args[na++] = CLB_ARG(p[i]->data.mem);
    args[na++] = CLB_ARG(p[i]->shape.mem);
    args[na++] = CLB_ARG(gr[i]->data.mem);
    args[na++] = CLB_ARG(gr[i]->shape.mem);
    args[na++] = CLB_ARG(ranks[i]);
    if (v[i]) args[na++] = CLB_ARG(v[i]->data.mem);
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
