/* alias.c: views and device exports of a graph's tensors keep their data
 * (docs/graph.md, "Views of a graph's tensors"): before a run, a phase's
 * update or clb_graph_free lets the graph rewrite or give back its buffers,
 * every tensor outside the graph that shares one of them gets a copy. */
#include <stdlib.h>

#include "runtime/graph/graph.h"

#define GRAPH_NODE_TENSORS 9 /* the clb_tensor_t fields of a gnode */

/* The tensors a node holds. */
static int node_tensors(const gnode *n, clb_tensor_t *out) {
  int k = 0;
  const clb_tensor_t all[] = {n->t, n->raw, n->aux, n->egrad[0], n->egrad[1], n->egrad[2], n->gsum, n->vel, n->grad};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]) out[k++] = all[i];
  return k;
}

static int by_address(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (const clb_tensor_t *)a, y = (uintptr_t) * (const clb_tensor_t *)b;
  return x < y ? -1 : x > y;
}

static int held_by_graph(clb_tensor_t *own, size_t n, clb_tensor_t t) {
  return bsearch(&t, own, n, sizeof *own, by_address) != NULL;
}

clb_status clb__graph_unshare(clb_graph_t g, const char *op) {
  /* the graph's tensors whose data another tensor shares: usually none */
  size_t n = 0;
  clb_tensor_t buf[GRAPH_NODE_TENSORS];
  for (int i = 0; i < g->nnodes; i++) {
    int k = node_tensors(&g->nodes[i], buf);
    for (int j = 0; j < k; j++) n += buf[j]->data_refs != NULL;
  }
  if (n == 0) return CLB_OK;
  clb_tensor_t *own = malloc(n * sizeof *own), *moved = NULL;
  if (!own) return clb__set_error(g->ctx, CLB_ERR_HOST_OOM, "%s: graph %s: out of host memory", op, g->name);
  n = 0;
  for (int i = 0; i < g->nnodes; i++) {
    int k = node_tensors(&g->nodes[i], buf);
    for (int j = 0; j < k; j++)
      if (buf[j]->data_refs) own[n++] = buf[j];
  }
  qsort(own, n, sizeof *own, by_address);
  size_t u = 0; /* a tensor may sit in two fields (a gradient is also borrowed) */
  for (size_t i = 0; i < n; i++)
    if (u == 0 || own[u - 1] != own[i]) own[u++] = own[i];
  n = u;
  clb_status st = CLB_OK;
  for (size_t i = 0; i < n && st == CLB_OK; i++) {
    int *refs = own[i]->data_refs, mine = 0, first = 1;
    for (size_t j = 0; j < n && first; j++)
      if (own[j]->data_refs == refs) {
        mine++;
        first = j >= i; /* each buffer once: at the first of its holders */
      }
    if (!first || mine >= *refs) continue;
    size_t nm = 0, want = (size_t)(*refs - mine);
    if (!moved && !(moved = malloc(want * sizeof *moved))) {
      st = clb__set_error(g->ctx, CLB_ERR_HOST_OOM, "%s: graph %s: out of host memory", op, g->name);
      break;
    }
    for (clb_tensor_t t = g->ctx->tensors; t && nm < want; t = t->next)
      if (t->data_refs == refs && !held_by_graph(own, n, t)) moved[nm++] = t;
    st = clb__tensor_unshare(g->ctx, op, moved, nm);
    free(moved);
    moved = NULL;
  }
  free(own);
  return st;
}
