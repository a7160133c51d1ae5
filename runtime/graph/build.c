/* build.c: building graphs (nodes, symbolic shapes from the symbol
 * engine, slots), training setup (which nodes need gradients), queries. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/graph/graph.h"

void clb_graph_options_init(clb_graph_options *opts) {
  if (!opts) return;
  memset(opts, 0, sizeof *opts);
  opts->struct_size = sizeof *opts;
  opts->policy = CLB_POLICY_AUTOMATIC;
  opts->name = "graph";
  opts->memory_plan = 1;
}

clb_status clb_graph_new(clb_context_t ctx, const clb_graph_options *opts, clb_graph_t *out) {
  static const char *op = "clb_graph_new";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  if (!out) return clb__set_error(ctx, CLB_ERR_NULL, "%s: out is NULL", op);
  *out = NULL;
  clb_graph_options o;
  clb_graph_options_init(&o);
  if (opts) {
    if (opts->struct_size < sizeof(size_t) || opts->struct_size > sizeof o)
      return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: opts->struct_size %zu is not that of a clb_graph_options (%zu)", op,
                            opts->struct_size, sizeof o);
    memcpy(&o, opts, opts->struct_size);
  }
  if ((int)o.policy < CLB_POLICY_STATIC || o.policy > CLB_POLICY_BUCKETED)
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: policy %d is not a clb_policy_kind", op, (int)o.policy);
  clb_graph_t g = calloc(1, sizeof *g);
  if (!g) return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: out of host memory", op);
  g->ctx = ctx;
  g->policy_kind = o.policy;
  snprintf(g->name, sizeof g->name, "%s", o.name ? o.name : "graph");
  g->loss = -1;
  g->fuse_loss_pred = -1;
  g->free_intermediates = o.free_intermediates != 0;
  g->current_plan = -1;
  if (clb_shapes_new(&g->shapes) != CLB_OK) {
    free(g);
    return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: out of host memory", op);
  }
  g->stats.struct_size = sizeof g->stats;
  g->stats.current_plan = -1;
  if (clb__graph_mem_new(g, o.memory_plan != 0) != CLB_OK) {
    clb_shapes_free(g->shapes);
    free(g);
    return CLB_ERR_HOST_OOM;
  }
  if (clb__graph_record_init(g) != CLB_OK) {
    clb_graph_free(g);
    return CLB_ERR_HOST_OOM;
  }
  *out = g;
  return CLB_OK;
}

void clb_graph_free(clb_graph_t g) {
  if (!g || clb__forked_child()) return; /* inherited by a forked child: left to its exit */
  /* views of its tensors keep their data (on failure they keep the buffers) */
  clb__graph_unshare(g, "clb_graph_free");
  clb__graph_record_free(g);
  for (int i = 0; i < g->nnodes; i++) {
    gnode *n = &g->nodes[i];
    clb__graph_release_tensors(n);
    if (n->kind == GN_PARAM || n->kind == GN_SCALAR) clb_tensor_free(n->t);
    clb_tensor_free(n->vel);
    clb__graph_feed_free(g, n);
  }
  clb__graph_mem_free(g);
  for (int i = 0; i < g->n_in_ladders; i++) free(g->in_ladders[i].ladder);
  free(g->count_ladder);
  free(g->nodes);
  free(g->plans);
  clb_policy_free(g->policy);
  clb_shapes_free(g->shapes);
  free(g);
}

/* Starts a node: checks its inputs, reserves room. Returns NULL with the
 * context's error set. */
static gnode *node_begin(clb_graph_t g, const char *op, gn_kind kind, const char *name, const clb_node *in, int nin,
                         clb_status *st) {
  *st = CLB_OK;
  if (g->nnodes >= CLB_GRAPH_MAX_NODES) {
    *st = clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: graph '%s' has %d nodes, the most a graph may have", op, g->name,
                         CLB_GRAPH_MAX_NODES);
    return NULL;
  }
  if (g->loss >= 0) {
    *st = clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: graph '%s' is already set up for training; add nodes before clb_graph_train",
                         op, g->name);
    return NULL;
  }
  for (int i = 0; i < nin; i++)
    if (in[i] < 0 || in[i] >= g->nnodes) {
      *st = clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: input %d is node %d, not a node of graph '%s' (0..%d)", op, i, in[i],
                           g->name, g->nnodes - 1);
      return NULL;
    }
  if (g->nnodes == g->cap_nodes) {
    int ncap = g->cap_nodes ? g->cap_nodes * 2 : 32;
    gnode *nn = realloc(g->nodes, (size_t)ncap * sizeof *nn);
    if (!nn) {
      *st = clb__set_error(g->ctx, CLB_ERR_HOST_OOM, "%s: out of host memory", op);
      return NULL;
    }
    g->nodes = nn;
    g->cap_nodes = ncap;
  }
  gnode *n = &g->nodes[g->nnodes];
  memset(n, 0, sizeof *n);
  n->kind = kind;
  if (name) snprintf(n->name, sizeof n->name, "%s", name);
  else snprintf(n->name, sizeof n->name, "%s#%d", clb__graph_kind_name(kind), g->nnodes);
  n->nin = nin;
  for (int i = 0; i < nin; i++) {
    n->in[i] = in[i];
    n->deps |= g->nodes[in[i]].deps;
  }
  n->slot = -1;
  n->input_index = -1;
  for (int d = 0; d < CLB_MAX_RANK; d++) n->slot_of_dim[d] = -1;
  return n;
}

/* Infers the node's symbolic shape with the symbol engine; on success the node
 * is committed. */
static clb_status node_commit(clb_graph_t g, const char *op, gnode *n, clb_op sop, const clb_op_params *p, clb_node *out) {
  clb_shape ins[3];
  const char *names[3];
  for (int i = 0; i < n->nin; i++) {
    ins[i] = g->nodes[n->in[i]].shape;
    names[i] = g->nodes[n->in[i]].name;
  }
  clb_status st = clb_op_infer(g->shapes, sop, p, ins, names, (size_t)n->nin, &n->shape);
  if (st != CLB_OK)
    return clb__set_error(g->ctx, st, "%s '%s' in graph '%s': %s", op, n->name, g->name, clb_shapes_errmsg(g->shapes));
  n->rank = n->shape.rank;
  *out = g->nnodes++;
  return CLB_OK;
}

static clb_status check_dtype(clb_graph_t g, const char *op, clb_dtype dt) {
  if ((int)dt < 0 || dt >= CLB_DTYPE_COUNT)
    return clb__set_error(g->ctx, CLB_ERR_DTYPE, "%s: dtype %d is not a clb_dtype", op, (int)dt);
  return CLB_OK;
}

static clb_status check_dims(clb_graph_t g, const char *op, const char *name, int rank, const int64_t *dims) {
  if (rank < 0 || rank > CLB_MAX_RANK)
    return clb__set_error(g->ctx, CLB_ERR_RANK, "%s '%s': rank %d is outside 0..%d", op, name, rank, CLB_MAX_RANK);
  if (rank > 0 && !dims) return clb__set_error(g->ctx, CLB_ERR_NULL, "%s '%s': dims are NULL", op, name);
  for (int d = 0; d < rank; d++)
    if (dims[d] < 0) return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s '%s': dim %d is %lld", op, name, d, (long long)dims[d]);
  return CLB_OK;
}

#define GRAPH_CHECK(g, op, out)                                                      \
  do {                                                                               \
    if (!(g)) return clb__set_error(NULL, CLB_ERR_NULL, "%s: graph is NULL", op);   \
    if (!(out)) return clb__set_error((g)->ctx, CLB_ERR_NULL, "%s: out is NULL", op); \
  } while (0)

clb_status clb_graph_input(clb_graph_t g, const char *name, clb_dtype dtype, int rank, const int64_t *bounds,
                           const uint8_t *dynamic, clb_node *out) {
  static const char *op = "clb_graph_input";
  GRAPH_CHECK(g, op, out);
  clb_status st;
  if (!name || !name[0]) return clb__set_error(g->ctx, CLB_ERR_NULL, "%s: an input needs a name", op);
  if ((st = check_dtype(g, op, dtype)) != CLB_OK || (st = check_dims(g, op, name, rank, bounds)) != CLB_OK) return st;
  int ndyn = 0;
  for (int d = 0; d < rank; d++) ndyn += dynamic && dynamic[d];
  if (g->nslots + ndyn > CLB_GRAPH_MAX_SLOTS)
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s '%s': more than %d dynamic sizes in graph '%s'", op, name,
                          CLB_GRAPH_MAX_SLOTS, g->name);
  for (int i = 0; i < g->ninputs; i++)
    if (strcmp(g->nodes[g->inputs[i]].name, name) == 0)
      return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: graph '%s' already has an input '%s'", op, g->name, name);
  gnode *n = node_begin(g, op, GN_INPUT, name, NULL, 0, &st);
  if (!n) return st;
  n->dtype = dtype;
  n->rank = rank;
  n->shape.rank = rank;
  for (int d = 0; d < rank; d++) {
    n->bound[d] = bounds[d];
    n->dyn[d] = (uint8_t)(dynamic && dynamic[d]);
    if (n->dyn[d]) {
      char sym[64];
      /* symbol names: letters, digits, '_' */
      size_t k = 0;
      for (const char *c = name; *c && k < 40; c++)
        sym[k++] = ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')) ? *c : '_';
      snprintf(sym + k, sizeof sym - k, "_%d", d);
      if (sym[0] >= '0' && sym[0] <= '9') sym[0] = '_';
      st = clb_sym_new(g->shapes, sym, 0, bounds[d], 1, 0, &n->shape.dims[d]);
      if (st != CLB_OK) st = clb_sym_new(g->shapes, NULL, 0, bounds[d], 1, 0, &n->shape.dims[d]);
    } else {
      st = clb_expr_const(g->shapes, bounds[d], &n->shape.dims[d]);
    }
    if (st != CLB_OK) return clb__set_error(g->ctx, st, "%s '%s': %s", op, name, clb_shapes_errmsg(g->shapes));
  }
  for (int d = 0; d < rank; d++)
    if (n->dyn[d]) {
      slot_info *s = &g->slots[g->nslots];
      s->node = g->nnodes;
      s->dim = d;
      s->bound = bounds[d];
      snprintf(s->what, sizeof s->what, "dim %d of %s", d, name);
      n->slot_of_dim[d] = g->nslots;
      n->deps |= 1ull << g->nslots;
      g->nslots++;
    }
  n->input_index = g->ninputs;
  g->inputs[g->ninputs++] = g->nnodes;
  *out = g->nnodes++;
  return CLB_OK;
}

/* A constant fill written from the host: no fill kernel (and no program) for
 * the scalars and small constants a graph holds. 0 when too large. */
static int host_fill(clb_graph_t g, clb_tensor_t t, int rank, const int64_t *dims, clb_dtype dtype, double v,
                     clb_status *st) {
  int64_t n = clb__numel(rank, dims);
  size_t es = clb_dtype_size(dtype);
  if (n > 4096 || es == 0) return 0;
  unsigned char buf[4096 * 8];
  for (int64_t i = 0; i < n; i++) {
    unsigned char *p = buf + (size_t)i * es;
    switch (dtype) {
    case CLB_DTYPE_F32: { float x = (float)v; memcpy(p, &x, 4); break; }
    case CLB_DTYPE_F64: memcpy(p, &v, 8); break;
    case CLB_DTYPE_I32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    case CLB_DTYPE_I64: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    case CLB_DTYPE_BOOL: *p = v != 0; break;
    default: *p = (unsigned char)v; break;
    }
  }
  *st = clb_tensor_write(g->ctx, t, dims, buf, (size_t)n * es);
  return 1;
}

static clb_status add_param(clb_graph_t g, const char *op, gn_kind kind, const char *name, clb_dtype dtype, int rank,
                            const int64_t *dims, const void *init, size_t bytes, double fill, int trainable,
                            clb_node *out) {
  clb_status st;
  if ((st = check_dtype(g, op, dtype)) != CLB_OK || (st = check_dims(g, op, name ? name : "param", rank, dims)) != CLB_OK)
    return st;
  if (trainable && !clb__dtype_is_float(dtype))
    return clb__set_error(g->ctx, CLB_ERR_DTYPE, "%s '%s': a trainable parameter must be floating, not %s", op,
                          name ? name : "param", clb_dtype_name(dtype));
  gnode *n = node_begin(g, op, kind, name, NULL, 0, &st);
  if (!n) return st;
  n->dtype = dtype;
  n->rank = rank;
  n->trainable = trainable;
  for (int d = 0; d < rank; d++) n->bound[d] = dims[d];
  if ((st = clb_shape_static(g->shapes, rank, dims, &n->shape)) != CLB_OK)
    return clb__set_error(g->ctx, st, "%s '%s': %s", op, n->name, clb_shapes_errmsg(g->shapes));
  clb_tensor_t t = NULL;
  if ((st = clb_tensor_new(g->ctx, dtype, rank, dims, NULL, &t)) != CLB_OK) return st;
  if (init) st = clb_tensor_write(g->ctx, t, dims, init, bytes);
  else if (!host_fill(g, t, rank, dims, dtype, fill, &st)) st = clb_fill(g->ctx, t, fill);
  if (st != CLB_OK) {
    clb_tensor_free(t);
    return st;
  }
  n->t = t;
  *out = g->nnodes++;
  return CLB_OK;
}

clb_status clb_graph_param(clb_graph_t g, const char *name, clb_dtype dtype, int rank, const int64_t *dims,
                           const void *init, size_t bytes, int trainable, clb_node *out) {
  static const char *op = "clb_graph_param";
  GRAPH_CHECK(g, op, out);
  return add_param(g, op, GN_PARAM, name, dtype, rank, dims, init, bytes, 0.0, trainable, out);
}

clb_status clb_graph_scalar(clb_graph_t g, clb_dtype dtype, double value, clb_node *out) {
  static const char *op = "clb_graph_scalar";
  GRAPH_CHECK(g, op, out);
  return add_param(g, op, GN_SCALAR, NULL, dtype, 0, NULL, NULL, 0, value, 0, out);
}

clb_status clb_graph_unary(clb_graph_t g, clb_unary_op uop, clb_node x, clb_node *out) {
  static const char *op = "clb_graph_unary";
  GRAPH_CHECK(g, op, out);
  if ((int)uop < 0 || uop >= CLB_UNARY_COUNT)
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: op %d is not a clb_unary_op", op, (int)uop);
  clb_status st;
  gnode *n = node_begin(g, op, GN_UNARY, NULL, &x, 1, &st);
  if (!n) return st;
  n->op = uop;
  n->dtype = g->nodes[x].dtype;
  return node_commit(g, op, n, CLB_OP_UNARY, NULL, out);
}

clb_status clb_graph_binary(clb_graph_t g, clb_binary_op bop, clb_node a, clb_node b, clb_node *out) {
  static const char *op = "clb_graph_binary";
  GRAPH_CHECK(g, op, out);
  if ((int)bop < 0 || bop >= CLB_BINARY_COUNT)
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: op %d is not a clb_binary_op", op, (int)bop);
  clb_node in[2] = {a, b};
  clb_status st;
  gnode *n = node_begin(g, op, GN_BINARY, NULL, in, 2, &st);
  if (!n) return st;
  if (g->nodes[a].dtype != g->nodes[b].dtype)
    return clb__set_error(g->ctx, CLB_ERR_DTYPE, "%s: %s and %s differ in dtype (%s, %s); cast one first", op, g->nodes[a].name,
                          g->nodes[b].name, clb_dtype_name(g->nodes[a].dtype), clb_dtype_name(g->nodes[b].dtype));
  if ((bop == CLB_BINARY_DIV || bop == CLB_BINARY_POW) && !clb__dtype_is_float(g->nodes[a].dtype))
    return clb__set_error(g->ctx, CLB_ERR_DTYPE, "%s: %s of %s (%s) is not floating; cast to f32 or f64 first", op,
                          bop == CLB_BINARY_DIV ? "div" : "pow", g->nodes[a].name, clb_dtype_name(g->nodes[a].dtype));
  n->op = bop;
  n->dtype = g->nodes[a].dtype;
  return node_commit(g, op, n, CLB_OP_BINARY, NULL, out);
}

clb_status clb_graph_cast(clb_graph_t g, clb_node x, clb_dtype dtype, clb_node *out) {
  static const char *op = "clb_graph_cast";
  GRAPH_CHECK(g, op, out);
  clb_status st;
  if ((st = check_dtype(g, op, dtype)) != CLB_OK) return st;
  gnode *n = node_begin(g, op, GN_CAST, NULL, &x, 1, &st);
  if (!n) return st;
  n->dtype = dtype;
  return node_commit(g, op, n, CLB_OP_UNARY, NULL, out);
}

clb_status clb_graph_reshape(clb_graph_t g, clb_node x, int rank, const int64_t *spec, clb_node *out) {
  static const char *op = "clb_graph_reshape";
  GRAPH_CHECK(g, op, out);
  clb_status st;
  if (rank < 0 || rank > CLB_MAX_RANK)
    return clb__set_error(g->ctx, CLB_ERR_RANK, "%s: rank %d is outside 0..%d", op, rank, CLB_MAX_RANK);
  if (rank > 0 && !spec) return clb__set_error(g->ctx, CLB_ERR_NULL, "%s: spec is NULL", op);
  gnode *n = node_begin(g, op, GN_RESHAPE, NULL, &x, 1, &st);
  if (!n) return st;
  n->dtype = g->nodes[x].dtype;
  n->spec_rank = rank;
  clb_expr_t target[CLB_MAX_RANK];
  for (int d = 0; d < rank; d++) {
    n->spec[d] = spec[d];
    target[d] = NULL;
    if (spec[d] >= 0 && (st = clb_expr_const(g->shapes, spec[d], &target[d])) != CLB_OK)
      return clb__set_error(g->ctx, st, "%s: %s", op, clb_shapes_errmsg(g->shapes));
  }
  clb_op_params p;
  clb_op_params_init(&p);
  p.target_rank = rank;
  p.target = target;
  return node_commit(g, op, n, CLB_OP_RESHAPE, &p, out);
}

clb_status clb_graph_reduce(clb_graph_t g, clb_reduce_op rop, clb_node x, clb_node *out) {
  static const char *op = "clb_graph_reduce";
  GRAPH_CHECK(g, op, out);
  if ((int)rop < 0 || rop >= CLB_REDUCE_COUNT)
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: op %d is not a clb_reduce_op", op, (int)rop);
  clb_status st;
  gnode *n = node_begin(g, op, GN_REDUCE, NULL, &x, 1, &st);
  if (!n) return st;
  n->op = rop;
  clb_dtype xt = g->nodes[x].dtype;
  n->dtype = (rop == CLB_REDUCE_SUM && !clb__dtype_is_float(xt)) ? CLB_DTYPE_I64 : xt;
  clb_op_params p;
  clb_op_params_init(&p);
  p.all = 1;
  return node_commit(g, op, n, rop == CLB_REDUCE_SUM ? CLB_OP_SUM : rop == CLB_REDUCE_MEAN ? CLB_OP_MEAN : CLB_OP_MAX, &p, out);
}

clb_status clb_graph_softmax(clb_graph_t g, clb_node x, int log, clb_node *out) {
  static const char *op = "clb_graph_softmax";
  GRAPH_CHECK(g, op, out);
  clb_status st;
  gnode *n = node_begin(g, op, GN_SOFTMAX, NULL, &x, 1, &st);
  if (!n) return st;
  n->op = log != 0;
  n->dtype = g->nodes[x].dtype;
  return node_commit(g, op, n, CLB_OP_UNARY, NULL, out);
}

static clb_status add_data_dependent(clb_graph_t g, const char *op, gn_kind kind, const clb_node *in, int nin,
                                     clb_op sop, clb_node *out) {
  clb_status st;
  if (g->nslots >= CLB_GRAPH_MAX_SLOTS)
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: more than %d dynamic sizes in graph '%s'", op, CLB_GRAPH_MAX_SLOTS,
                          g->name);
  gnode *n = node_begin(g, op, kind, NULL, in, nin, &st);
  if (!n) return st;
  n->dtype = kind == GN_NONZERO ? CLB_DTYPE_I64 : g->nodes[in[0]].dtype;
  int index = g->nnodes;
  if ((st = node_commit(g, op, n, sop, NULL, out)) != CLB_OK) return st;
  n = &g->nodes[index];
  slot_info *s = &g->slots[g->nslots];
  s->node = index;
  s->dim = -1;
  s->bound = clb_expr_max_of(n->shape.dims[0]);
  snprintf(s->what, sizeof s->what, "count of %s", n->name);
  n->slot = g->nslots;
  n->deps |= 1ull << g->nslots;
  g->nslots++;
  return CLB_OK;
}

clb_status clb_graph_nonzero(clb_graph_t g, clb_node x, clb_node *out) {
  static const char *op = "clb_graph_nonzero";
  GRAPH_CHECK(g, op, out);
  return add_data_dependent(g, op, GN_NONZERO, &x, 1, CLB_OP_NONZERO, out);
}

clb_status clb_graph_masked_select(clb_graph_t g, clb_node x, clb_node mask, clb_node *out) {
  static const char *op = "clb_graph_masked_select";
  GRAPH_CHECK(g, op, out);
  clb_node in[2] = {x, mask};
  if (mask >= 0 && mask < g->nnodes && g->nodes[mask].dtype != CLB_DTYPE_BOOL)
    return clb__set_error(g->ctx, CLB_ERR_DTYPE, "%s: mask %s is %s, not bool", op, g->nodes[mask].name,
                          clb_dtype_name(g->nodes[mask].dtype));
  return add_data_dependent(g, op, GN_MASKED_SELECT, in, 2, CLB_OP_MASKED_SELECT, out);
}

clb_status clb_graph_linear(clb_graph_t g, clb_node x, clb_node w, clb_node bias, clb_node *out) {
  static const char *op = "clb_graph_linear";
  GRAPH_CHECK(g, op, out);
  clb_node in[3] = {x, w, bias};
  int nin = bias >= 0 ? 3 : 2;
  clb_status st;
  gnode *n = node_begin(g, op, GN_LINEAR, NULL, in, nin, &st);
  if (!n) return st;
  n->dtype = g->nodes[x].dtype;
  return node_commit(g, op, n, CLB_OP_LINEAR, NULL, out);
}

clb_status clb_graph_loss(clb_graph_t g, clb_loss_kind kind, clb_node pred, clb_node target, clb_node *out) {
  static const char *op = "clb_graph_loss";
  GRAPH_CHECK(g, op, out);
  if ((int)kind < 0 || kind >= CLB_LOSS_KIND_COUNT)
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: kind %d is not a clb_loss_kind", op, (int)kind);
  clb_node in[2] = {pred, target};
  clb_status st;
  gnode *n = node_begin(g, op, GN_LOSS, NULL, in, 2, &st);
  if (!n) return st;
  n->op = kind;
  n->dtype = g->nodes[pred].dtype;
  n->rank = 0;
  n->shape.rank = 0;
  /* the pairing the loss needs: element counts equal (rows for cross-entropy) */
  const clb_shape *ps = &g->nodes[pred].shape, *ts = &g->nodes[target].shape;
  clb_expr_t a, b;
  if (kind == CLB_LOSS_CROSS_ENTROPY) {
    if (ps->rank != 2 || ts->rank != 1)
      return clb__set_error(g->ctx, CLB_ERR_RANK, "%s: cross-entropy takes pred [M, C] and target [M], not ranks %d and %d", op,
                            ps->rank, ts->rank);
    a = ps->dims[0];
    b = ts->dims[0];
  } else if ((st = clb_shape_numel(g->shapes, ps, &a)) != CLB_OK || (st = clb_shape_numel(g->shapes, ts, &b)) != CLB_OK) {
    return clb__set_error(g->ctx, st, "%s: %s", op, clb_shapes_errmsg(g->shapes));
  }
  char what[256];
  snprintf(what, sizeof what, "loss %s: elements of %s and %s", n->name, g->nodes[pred].name, g->nodes[target].name);
  if ((st = clb_shapes_unify(g->shapes, a, b, what)) != CLB_OK)
    return clb__set_error(g->ctx, st, "%s: %s", op, clb_shapes_errmsg(g->shapes));
  *out = g->nnodes++;
  return CLB_OK;
}

/* ---- training --------------------------------------------------------------- */

static int differentiable(const gnode *n, int input) {
  switch (n->kind) {
  case GN_UNARY: case GN_SOFTMAX: case GN_LINEAR: return 1;
  case GN_LOSS: return input == 0;
  case GN_BINARY: return n->op == CLB_BINARY_ADD || n->op == CLB_BINARY_SUB || n->op == CLB_BINARY_MUL;
  default: return 0;
  }
}

clb_status clb_graph_train(clb_graph_t g, clb_node loss, double lr, double momentum) {
  static const char *op = "clb_graph_train";
  if (!g) return clb__set_error(NULL, CLB_ERR_NULL, "%s: graph is NULL", op);
  gnode *l = clb__graph_node(g, loss);
  if (!l || l->kind != GN_LOSS)
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: node %d of graph '%s' is not a loss node", op, loss, g->name);
  if (g->loss >= 0) return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: graph '%s' already trains", op, g->name);
  if (!(lr >= 0) || !(momentum >= 0) || momentum >= 1)
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: lr %g must be >= 0 and momentum %g in [0, 1)", op, lr, momentum);
  /* requires_grad flows forward from trainable params */
  for (int i = 0; i <= loss; i++) {
    gnode *n = &g->nodes[i];
    n->requires_grad = n->kind == GN_PARAM && n->trainable;
    n->nconsumers = 0;
    for (int k = 0; k < n->nin; k++) {
      gnode *in = &g->nodes[n->in[k]];
      if (!in->requires_grad) continue;
      if (!differentiable(n, k)) {
        if (i > loss) continue;
        return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG,
                              "%s: the gradient of %s would pass through %s %s (input %d), which has no gradient in clbound", op,
                              in->name, clb__graph_kind_name(n->kind), n->name, k);
      }
      if (n->kind == GN_BINARY) {
        gnode *a = &g->nodes[n->in[0]], *b = &g->nodes[n->in[1]];
        int same = a->shape.rank == b->shape.rank;
        for (int d = 0; same && d < a->shape.rank; d++) same = a->shape.dims[d] == b->shape.dims[d];
        if (!same)
          return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG,
                                "%s: the gradient of %s would pass through a broadcasting %s (%s), which has no gradient in clbound",
                                op, in->name, clb__graph_kind_name(n->kind), n->name);
      }
      n->requires_grad = 1;
    }
  }
  if (!l->requires_grad)
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: loss %s of graph '%s' depends on no trainable parameter", op, l->name,
                          g->name);
  /* gradient edges: only nodes on a path to the loss count */
  uint8_t on_path[CLB_GRAPH_MAX_NODES] = {0};
  on_path[loss] = 1;
  for (int i = loss; i >= 0; i--) {
    gnode *n = &g->nodes[i];
    if (!on_path[i]) continue;
    for (int k = 0; k < n->nin; k++)
      if (g->nodes[n->in[k]].requires_grad && differentiable(n, k)) {
        on_path[n->in[k]] = 1;
        g->nodes[n->in[k]].nconsumers++;
      }
  }
  for (int i = 0; i < g->nnodes; i++)
    if (!on_path[i]) g->nodes[i].requires_grad = 0;
  g->loss = loss;
  g->fuse_nnodes = -1; /* the groups depend on what backward reads */
  g->lr = lr;
  g->momentum = momentum;
  if (momentum > 0)
    for (int i = 0; i < g->nnodes; i++) {
      gnode *n = &g->nodes[i];
      if (n->kind != GN_PARAM || !n->requires_grad) continue;
      clb_status st = clb_tensor_new(g->ctx, n->dtype, n->rank, n->bound, NULL, &n->vel);
      if (st == CLB_OK) st = clb_fill(g->ctx, n->vel, 0.0);
      if (st != CLB_OK) return st;
    }
  return CLB_OK;
}

clb_status clb_graph_set_lr(clb_graph_t g, double lr) {
  if (!g) return clb__set_error(NULL, CLB_ERR_NULL, "clb_graph_set_lr: graph is NULL");
  if (!(lr >= 0)) return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "clb_graph_set_lr: lr %g must be >= 0", lr);
  g->lr = lr;
  return CLB_OK;
}

clb_status clb_graph_set_buckets(clb_graph_t g, clb_node input, int dim, const int64_t *ladder, size_t n) {
  static const char *op = "clb_graph_set_buckets";
  if (!g) return clb__set_error(NULL, CLB_ERR_NULL, "%s: graph is NULL", op);
  if (!ladder || n == 0) return clb__set_error(g->ctx, CLB_ERR_NULL, "%s: an empty ladder", op);
  if (g->policy) return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: graph '%s' has run already; set buckets before", op, g->name);
  for (size_t i = 0; i < n; i++)
    if (ladder[i] < 0 || (i > 0 && ladder[i] <= ladder[i - 1]))
      return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: the ladder must ascend from >= 0 (entry %zu is %lld)", op, i,
                            (long long)ladder[i]);
  int64_t *copy = malloc(n * sizeof *copy);
  if (!copy) return clb__set_error(g->ctx, CLB_ERR_HOST_OOM, "%s: out of host memory", op);
  memcpy(copy, ladder, n * sizeof *copy);
  if (input == -1 && dim == -1) {
    free(g->count_ladder);
    g->count_ladder = copy;
    g->count_ladder_n = n;
    return CLB_OK;
  }
  gnode *in = clb__graph_node(g, input);
  if (!in || in->kind != GN_INPUT || dim < 0 || dim >= in->rank || !in->dyn[dim] || g->n_in_ladders >= 16) {
    free(copy);
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: node %d dim %d is not a dynamic dim of an input", op, input, dim);
  }
  if (ladder[n - 1] < in->bound[dim]) {
    free(copy);
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: the top bucket %lld is below the bound %lld of dim %d of %s", op,
                          (long long)ladder[n - 1], (long long)in->bound[dim], dim, in->name);
  }
  g->in_ladders[g->n_in_ladders].node = input;
  g->in_ladders[g->n_in_ladders].dim = dim;
  g->in_ladders[g->n_in_ladders].ladder = copy;
  g->in_ladders[g->n_in_ladders].n = n;
  g->n_in_ladders++;
  return CLB_OK;
}

/* ---- queries ------------------------------------------------------------------ */

clb_tensor_t clb_graph_tensor(clb_graph_t g, clb_node n) {
  gnode *node = clb__graph_node(g, n);
  if (!node || !node->t) return NULL;
  node->t->graph_held = 1; /* its views and exports keep their data (alias.c) */
  return node->t;
}

clb_status clb_graph_keep(clb_graph_t g, clb_node n) {
  if (!g) return clb__set_error(NULL, CLB_ERR_NULL, "clb_graph_keep: graph is NULL");
  gnode *node = clb__graph_node(g, n);
  if (!node) return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "clb_graph_keep: graph '%s' has no node %d", g->name, n);
  node->keep = 1;
  g->fuse_nnodes = -1; /* a kept node is materialised */
  return CLB_OK;
}

clb_status clb_graph_stats_get(clb_graph_t g, clb_graph_stats *out) {
  if (!g || !out) return clb__set_error(g ? g->ctx : NULL, CLB_ERR_NULL, "clb_graph_stats_get: NULL argument");
  if (out->struct_size < sizeof(size_t) || out->struct_size > sizeof *out)
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "clb_graph_stats_get: struct_size %zu is not that of a clb_graph_stats",
                          out->struct_size);
  clb_graph_stats s = g->stats;
  s.nodes = (uint64_t)g->nnodes;
  s.deferred_checks = 0;
  for (size_t i = 0; i < clb_shapes_check_count(g->shapes); i++) s.deferred_checks += clb_shapes_check_at(g->shapes, i)->on_device != 0;
  s.current_plan = g->current_plan;
  clb__graph_mem_fill_stats(g, &s);
  size_t size = out->struct_size;
  s.struct_size = size;
  memcpy(out, &s, size);
  return CLB_OK;
}

const char *clb_graph_last_reason(clb_graph_t g) { return g ? g->last_reason : ""; }

typedef struct sbuf {
  char *buf;
  size_t cap, len;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char tmp[512];
  int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (k < 0) return;
  size_t n = (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1;
  if (b->buf && b->len + n < b->cap) memcpy(b->buf + b->len, tmp, n + 1);
  b->len += n;
}

clb_status clb_graph_describe(clb_graph_t g, char *buf, size_t cap, size_t *len) {
  if (!g) return clb__set_error(NULL, CLB_ERR_NULL, "clb_graph_describe: graph is NULL");
  sbuf b = {buf, cap, 0};
  if (buf && cap) buf[0] = 0;
  static const char *const pol[] = {"static", "automatic", "dynamic", "bucketed"};
  sb_printf(&b, "graph %s: %d nodes, policy %s%s\n", g->name, g->nnodes, pol[g->policy_kind], g->loss >= 0 ? ", training" : "");
  for (int i = 0; i < g->nnodes; i++) {
    gnode *n = &g->nodes[i];
    char shape[256];
    if (clb_shape_print(g->shapes, &n->shape, shape, sizeof shape) != CLB_OK) snprintf(shape, sizeof shape, "[...]");
    sb_printf(&b, "  %%%d %-13s %-14s %-4s %s", i, clb__graph_kind_name(n->kind), n->name, clb_dtype_name(n->dtype), shape);
    if (n->nin) {
      sb_printf(&b, " <-");
      for (int k = 0; k < n->nin; k++) sb_printf(&b, " %%%d", n->in[k]);
    }
    if (n->requires_grad) sb_printf(&b, " (grad)");
    sb_printf(&b, "\n");
  }
  int any = 0;
  for (int s = 0; s < g->nslots; s++)
    if (g->slots[s].dim < 0) {
      sb_printf(&b, "%s%s (bound %lld)", any ? ", " : "data-dependent: ", g->slots[s].what, (long long)g->slots[s].bound);
      any = 1;
    }
  if (any) sb_printf(&b, "\n");
  for (size_t i = 0; i < clb_shapes_check_count(g->shapes); i++) {
    const clb_check *c = clb_shapes_check_at(g->shapes, i);
    const char *a = clb_expr_str(g->shapes, c->a), *e = clb_expr_str(g->shapes, c->b);
    sb_printf(&b, "deferred check%s: %s %s %s (%s)\n", c->on_device ? " on the device" : "", a ? a : "?",
              c->kind == CLB_CHECK_GE ? ">=" : "==", e ? e : "?", c->what);
  }
  char line[256];
  for (size_t i = 0; clb__graph_mem_map_line(g, i, line, sizeof line); i++) sb_printf(&b, "%s", line);
  if (len) *len = b.len;
  if (buf && b.len >= cap) return clb__set_error(g->ctx, CLB_ERR_BUFFER_SMALL, "clb_graph_describe: %zu bytes needed", b.len + 1);
  return CLB_OK;
}
