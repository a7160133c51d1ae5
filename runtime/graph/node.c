/* node.c: what both building and running a graph need of a node: its kind's
 * name, releasing the tensors of its current plan, and the sizes its tensors
 * and programs were made for. */
#include <stdio.h>
#include <string.h>

#include "runtime/graph/graph.h"

static const char *const kind_names[] = {"input", "param", "scalar", "unary", "binary", "cast", "reshape",
                                         "reduce", "softmax", "nonzero", "masked_select", "linear", "loss"};

const char *clb__graph_kind_name(gn_kind k) { return kind_names[k]; }

void clb__graph_release_tensors(gnode *n) {
  if (n->kind != GN_PARAM && n->kind != GN_SCALAR) {
    clb_tensor_free(n->t);
    n->t = NULL;
  }
  clb_tensor_free(n->raw);
  clb_tensor_free(n->aux);
  clb_tensor_free(n->gsum);
  n->raw = n->aux = n->gsum = NULL;
  for (int k = 0; k < 3; k++) {
    clb_tensor_free(n->egrad[k]);
    n->egrad[k] = NULL;
  }
  n->have_key = 0;
}

static uint64_t key_hash(const clb_graph_t g, uint64_t mask) {
  uint64_t h = 1469598103934665603ull;
  for (int s = 0; s < g->nslots; s++)
    if (mask >> s & 1) {
      h = clb__fnv1a(h, &s, sizeof s);
      h = clb__fnv1a(h, &g->cur[s].value, sizeof g->cur[s].value);
      h = clb__fnv1a(h, &g->cur[s].kind, sizeof g->cur[s].kind);
    }
  return h;
}

int clb__graph_key_same(const clb_graph_t g, const gnode *n, uint64_t mask) {
  if (!n->have_key) return 0;
  for (int s = 0; s < g->nslots; s++)
    if ((mask >> s & 1) && (n->key[s].value != g->cur[s].value || n->key[s].kind != g->cur[s].kind)) return 0;
  return 1;
}

void clb__graph_ensure_key(clb_graph_t g, gnode *n) {
  if (clb__graph_key_same(g, n, n->deps)) return;
  clb__graph_release_tensors(n);
  memcpy(n->key, g->cur, sizeof n->key);
  n->have_key = 1;
}

/* Programs of a plan that compiles sizes in are built with those sizes as a
 * define, so each such plan builds its own programs (what a static-shape
 * compiler does); a node whose sizes are all bounded shares programs with
 * every plan. */
void clb__graph_set_suffix(clb_graph_t g, uint64_t mask) {
  int specialized = 0;
  for (int s = 0; s < g->nslots; s++)
    if ((mask >> s & 1) && g->cur[s].kind != SLOT_BOUNDED) specialized = 1;
  if (!specialized) g->ctx->build_suffix[0] = 0;
  else snprintf(g->ctx->build_suffix, sizeof g->ctx->build_suffix, "-D CLB_PLAN_SIZES=0x%016llx",
                (unsigned long long)key_hash(g, mask));
}
