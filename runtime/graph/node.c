/* node.c: what both building and running a graph need of a node: its kind's
 * name, and releasing the tensors of its current plan. */
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
