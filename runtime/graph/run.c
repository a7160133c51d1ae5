/* run.c: running graphs: plan choice per policy, the forward pass with
 * data-dependent counts kept on the device (or read back where the policy must
 * compile them in), reverse-mode gradients, SGD, plan statistics and the shape
 * log. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cache/cache.h"
#include "runtime/graph/graph.h"
#include "runtime/ops/fused.h"
#include "runtime/ops/gemm-host.h"


/* ---- the policy over the inputs ------------------------------------------------ */

static clb_status pow2_ladder(clb_graph_t g, int64_t bound, int64_t **out, size_t *n) {
  int64_t hi = bound < 1 ? 1 : bound;
  int64_t tmp[70];
  clb_status st = clb_buckets_pow2(1, hi, tmp, 70, n);
  if (st != CLB_OK) return clb__set_error(g->ctx, st, "graph %s: bucket ladder up to %lld", g->name, (long long)hi);
  *out = malloc(*n * sizeof **out);
  if (!*out) return clb__set_error(g->ctx, CLB_ERR_HOST_OOM, "graph %s: out of host memory", g->name);
  memcpy(*out, tmp, *n * sizeof **out);
  return CLB_OK;
}

static clb_status policy_setup(clb_graph_t g) {
  const char *names[CLB_GRAPH_MAX_NODES];
  int ranks[CLB_GRAPH_MAX_NODES];
  for (int i = 0; i < g->ninputs; i++) {
    names[i] = g->nodes[g->inputs[i]].name;
    ranks[i] = g->nodes[g->inputs[i]].rank;
  }
  clb_status st = clb_policy_new(g->policy_kind, (size_t)g->ninputs, names, ranks, &g->policy);
  if (st != CLB_OK) return clb__set_error(g->ctx, st, "graph %s: policy: out of host memory", g->name);
  for (int i = 0; i < g->ninputs; i++) {
    gnode *n = &g->nodes[g->inputs[i]];
    for (int d = 0; d < n->rank; d++) {
      if (!n->dyn[d]) continue;
      if (g->policy_kind == CLB_POLICY_DYNAMIC || g->policy_kind == CLB_POLICY_AUTOMATIC) {
        st = clb_policy_set_max(g->policy, (size_t)i, d, n->bound[d]);
      } else if (g->policy_kind == CLB_POLICY_BUCKETED) {
        const int64_t *ladder = NULL;
        size_t len = 0;
        int64_t *own = NULL;
        for (int k = 0; k < g->n_in_ladders; k++)
          if (g->in_ladders[k].node == g->inputs[i] && g->in_ladders[k].dim == d) {
            ladder = g->in_ladders[k].ladder;
            len = g->in_ladders[k].n;
          }
        if (!ladder) {
          if ((st = pow2_ladder(g, n->bound[d], &own, &len)) != CLB_OK) return st;
          ladder = own;
        }
        st = clb_policy_set_buckets(g->policy, (size_t)i, d, ladder, len);
        free(own);
      }
      if (st != CLB_OK)
        return clb__set_error(g->ctx, st, "graph %s: policy for dim %d of %s: %s", g->name, d, n->name, clb_policy_errmsg(g->policy));
    }
  }
  if (g->policy_kind == CLB_POLICY_BUCKETED && !g->count_ladder) {
    int64_t top = 1;
    for (int s = 0; s < g->nslots; s++)
      if (g->slots[s].dim < 0 && g->slots[s].bound > top) top = g->slots[s].bound;
    if ((st = pow2_ladder(g, top, &g->count_ladder, &g->count_ladder_n)) != CLB_OK) return st;
  }
  return CLB_OK;
}

/* ---- the shape log ---------------------------------------------------------------- */

/* A shape log that cannot be opened or written: one warning on stderr per
 * process (the run itself goes on), and a log line each time. */
static void shape_log_failed(clb_graph_t g, const char *path, const char *what, int err) {
  static atomic_int warned;
  if (atomic_exchange(&warned, 1) == 0)
    fprintf(stderr, "clbound: warning: CLBOUND_SHAPE_LOG %s: cannot %s it (%s); shapes are not logged\n", path, what,
            strerror(err));
  clb__log(g->ctx, CLB_LOG_CACHE, "graph %s: cannot %s CLBOUND_SHAPE_LOG %s (%s)", g->name, what, path, strerror(err));
}

static void shape_log(clb_graph_t g) {
  const char *path = clb__env_text(CLB_ENV_SHAPE_LOG);
  if (!path) return;
  FILE *f = fopen(path, "a");
  if (!f) {
    shape_log_failed(g, path, "open", errno);
    return;
  }
  if (!g->shape_log_header_done) {
    int any = 0;
    for (int s = 0; s < g->nslots; s++)
      if (g->slots[s].dim < 0) {
        fprintf(f, "%s%s", any ? ", " : "# data-dependent: ", g->slots[s].what);
        any = 1;
      }
    if (any) fputc('\n', f);
    g->shape_log_header_done = 1;
  }
  int first = 1;
  for (int i = 0; i < g->ninputs; i++) {
    gnode *n = &g->nodes[g->inputs[i]];
    if (n->rank == 0) continue;
    fprintf(f, "%s%s=", first ? "" : ";", n->name);
    for (int d = 0; d < n->rank; d++) fprintf(f, "%s%lld", d ? "x" : "", (long long)n->feed_dims[d]);
    first = 0;
  }
  fputc('\n', f);
  int err = ferror(f) ? (errno ? errno : EIO) : 0;
  if (fclose(f) != 0 && !err) err = errno ? errno : EIO;
  if (err) shape_log_failed(g, path, "write", err);
}

/* ---- feeding ------------------------------------------------------------------------- */

/* A write of an input's copy is done (clb__write_borrowed's release). */
static void copy_written(void *arg) { ((struct clb__feed_copy *)arg)->busy--; }

/* Runs a borrowed feed's release unless a write has taken it over. */
static void drop_borrowed(gnode *n) {
  if (n->feed_release) n->feed_release(n->feed_release_arg);
  n->feed_release = NULL;
  n->feed_release_arg = NULL;
}

void clb__graph_feed_free(clb_graph_t g, gnode *n) {
  drop_borrowed(n);
  if (!n->copy) return;
  if (n->copy->busy) clb__staging_wait(g->ctx, copy_written, n->copy);
  free(n->copy->p);
  free(n->copy);
  n->copy = NULL;
}

/* clb_graph_feed and clb_graph_feed_borrowed: the input's checks (dims within
 * the bounds, bytes for them, data given); *out the input's node. */
static clb_status feed_check(clb_graph_t g, const char *op, clb_node input, const int64_t *dims, const void *host,
                             size_t bytes, gnode **out) {
  if (!g) return clb__set_error(NULL, CLB_ERR_NULL, "%s: graph is NULL", op);
  gnode *n = clb__graph_node(g, input);
  if (!n || n->kind != GN_INPUT)
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: node %d is not an input of graph '%s'", op, input, g->name);
  if (n->rank > 0 && !dims) return clb__set_error(g->ctx, CLB_ERR_NULL, "%s %s: dims are NULL", op, n->name);
  int64_t numel = 1;
  for (int d = 0; d < n->rank; d++) {
    if (dims[d] < 0 || dims[d] > n->bound[d] || (!n->dyn[d] && dims[d] != n->bound[d]))
      return clb__set_error(g->ctx, CLB_ERR_OUT_OF_BOUNDS, "%s %s: dim %d is %lld, %s %lld", op, n->name, d, (long long)dims[d],
                            n->dyn[d] ? "outside its bound" : "but the dim is static at", (long long)n->bound[d]);
    numel *= dims[d];
  }
  size_t need = (size_t)numel * clb_dtype_size(n->dtype);
  if (bytes != need)
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s %s: %zu bytes given, %zu needed for these dims", op, n->name, bytes, need);
  if (need && !host) return clb__set_error(g->ctx, CLB_ERR_NULL, "%s %s: host data is NULL", op, n->name);
  *out = n;
  return CLB_OK;
}

static void feed_set(gnode *n, const void *data, size_t bytes, const int64_t *dims) {
  n->feed = data;
  n->feed_bytes = bytes;
  for (int d = 0; d < n->rank; d++) n->feed_dims[d] = dims[d];
  n->fed = 1;
}

clb_status clb_graph_feed(clb_graph_t g, clb_node input, const int64_t *dims, const void *host, size_t bytes) {
  static const char *op = "clb_graph_feed";
  gnode *n;
  clb_status st = feed_check(g, op, input, dims, host, bytes, &n);
  if (st != CLB_OK) return st;
  struct clb__feed_copy *c = n->copy;
  if (!c && !(c = n->copy = calloc(1, sizeof *c)))
    return clb__set_error(g->ctx, CLB_ERR_HOST_OOM, "%s %s: out of host memory", op, n->name);
  if (c->busy) clb__staging_wait(g->ctx, copy_written, c); /* a run's write still reads the last copy */
  if (bytes > c->cap) {
    void *p = realloc(c->p, bytes);
    if (!p) return clb__set_error(g->ctx, CLB_ERR_HOST_OOM, "%s %s: out of host memory for %zu bytes", op, n->name, bytes);
    c->p = p;
    c->cap = bytes;
  }
  if (bytes) memcpy(c->p, host, bytes);
  drop_borrowed(n);
  n->borrowed = 0;
  feed_set(n, c->p, bytes, dims);
  return CLB_OK;
}

clb_status clb_graph_feed_borrowed(clb_graph_t g, clb_node input, const int64_t *dims, const void *host, size_t bytes,
                                   void (*release)(void *), void *release_arg) {
  static const char *op = "clb_graph_feed_borrowed";
  gnode *n;
  clb_status st = feed_check(g, op, input, dims, host, bytes, &n);
  if (st != CLB_OK) {
    if (release) release(release_arg);
    return st;
  }
  drop_borrowed(n);
  n->borrowed = 1;
  n->feed_release = release;
  n->feed_release_arg = release_arg;
  feed_set(n, host, bytes, dims);
  return CLB_OK;
}

/* ---- forward ----------------------------------------------------------------------- */

static clb_status run_input(clb_graph_t g, gnode *n) {
  clb__graph_ensure_key(g, n);
  clb_status st;
  if (!n->t) {
    int64_t b[CLB_MAX_RANK];
    uint8_t dyn[CLB_MAX_RANK];
    for (int d = 0; d < n->rank; d++) {
      int s = n->slot_of_dim[d];
      b[d] = n->bound[d];
      dyn[d] = 0;
      if (s >= 0) {
        dyn[d] = g->cur[s].kind != SLOT_STATIC;
        if (g->cur[s].kind != SLOT_BOUNDED) b[d] = g->cur[s].value;
      }
    }
    if ((st = clb_tensor_new(g->ctx, n->dtype, n->rank, b, dyn, &n->t)) != CLB_OK) return st;
  }
  /* walking a new plan to collect its kernels launches nothing: the sizes only,
   * the data at the step itself (which a borrowed feed is kept for) */
  if (g->ctx->collect) return clb_tensor_set_sizes(g->ctx, n->t, n->feed_dims);
  if (!n->borrowed) {
    n->copy->busy++;
    return clb__tensor_write_borrowed(g->ctx, "clb_graph_run", n->t, n->feed_dims, n->feed, n->feed_bytes, copy_written,
                                      n->copy);
  }
  if (n->borrowed == 2)
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "clb_graph_run: input %s of graph '%s' was fed borrowed "
                          "(clb_graph_feed_borrowed) and an earlier run read it; feed it again", n->name, g->name);
  void (*release)(void *) = n->feed_release ? n->feed_release : clb__release_nothing;
  void *arg = n->feed_release_arg;
  n->borrowed = 2; /* this run's: its release now goes with the write */
  n->feed_release = NULL;
  n->feed_release_arg = NULL;
  return clb__tensor_write_borrowed(g->ctx, "clb_graph_run", n->t, n->feed_dims, n->feed, n->feed_bytes, release, arg);
}

static int64_t bucket_of(clb_graph_t g, int64_t count) {
  for (size_t i = 0; i < g->count_ladder_n; i++)
    if (g->count_ladder[i] >= count) return g->count_ladder[i];
  return -1;
}

/* A count the plan compiles in: read it back (one counted sync), pick the size,
 * copy the live rows into a tensor of that size. */
static clb_status materialize(clb_graph_t g, gnode *n) {
  slot_info *si = &g->slots[n->slot];
  char why[160];
  snprintf(why, sizeof why, "graph %s: the %s policy compiles in the %s", g->name,
           g->policy_kind == CLB_POLICY_STATIC ? "static" : "bucketed", si->what);
  int64_t dims[CLB_MAX_RANK];
  clb_status st = clb__sync_sizes(g->ctx, n->raw, why, dims);
  if (st != CLB_OK) return st;
  g->stats.host_syncs++;
  int64_t count = dims[0], value = count;
  if (g->policy_kind == CLB_POLICY_BUCKETED) {
    value = bucket_of(g, count);
    if (value < 0)
      return clb__set_error(g->ctx, CLB_ERR_GUARD, "graph %s: %s = %lld is above the top bucket %lld", g->name, si->what,
                            (long long)count, (long long)g->count_ladder[g->count_ladder_n - 1]);
  }
  g->cur[n->slot].value = value;
  g->cur[n->slot].kind = g->policy_kind == CLB_POLICY_BUCKETED ? SLOT_BUCKET : SLOT_STATIC;
  clb_tensor_t raw = n->raw;
  n->raw = NULL; /* ensure_key may release n's tensors; the raw result survives */
  clb__graph_ensure_key(g, n);
  n->raw = raw;
  if (!n->t) {
    int64_t b[CLB_MAX_RANK];
    uint8_t dyn[CLB_MAX_RANK] = {0};
    clb_tensor_bounds(raw, b);
    b[0] = value;
    dyn[0] = g->cur[n->slot].kind == SLOT_BUCKET;
    if ((st = clb_tensor_new(g->ctx, raw->dtype, raw->rank, b, dyn, &n->t)) != CLB_OK) return st;
  }
  size_t row = clb_dtype_size(raw->dtype);
  for (int d = 1; d < raw->rank; d++) row *= (size_t)raw->bound[d];
  size_t bytes = (size_t)count * row;
  if (bytes && (st = clb__merge_flush(g->ctx)) != CLB_OK) return st;
  if (bytes) {
    cl_int err = clEnqueueCopyBuffer(g->ctx->queue, raw->data.mem, n->t->data.mem, (size_t)raw->data.offset,
                                    (size_t)n->t->data.offset, bytes, 0, NULL, NULL);
    if (err != CL_SUCCESS)
      return clb__cl_error(g->ctx, err, "graph %s: copying %zu bytes of the %s", g->name, bytes, si->what);
  }
  if (n->t->dyn[0]) return clb_tensor_set_sizes(g->ctx, n->t, dims);
  return CLB_OK;
}

/* A select node under a bounded count, with the first reshape that reads it:
 * one launch writes the reshape's record too (clb__nonzero_view), so the
 * reshape node, run later, launches nothing. */
static clb_status run_select(clb_graph_t g, gnode *n, clb_tensor_t x, clb_tensor_t y) {
  const int i = (int)(n - g->nodes);
  gnode *r = NULL;
  for (int j = i + 1; j < g->nnodes && !r; j++)
    if (g->nodes[j].kind == GN_RESHAPE && g->nodes[j].in[0] == i) r = &g->nodes[j];
  if (!r)
    return n->kind == GN_NONZERO ? clb_nonzero(g->ctx, x, &n->t) : clb_masked_select(g->ctx, x, y, &n->t);
  clb__graph_ensure_key(g, r); /* the view is made now, for r's sizes */
  return n->kind == GN_NONZERO ? clb__nonzero_view(g->ctx, x, &n->t, r->spec_rank, r->spec, &r->t)
                               : clb__masked_select_view(g->ctx, x, y, &n->t, r->spec_rank, r->spec, &r->t);
}

static clb_status run_node(clb_graph_t g, gnode *n) {
  clb_context_t ctx = g->ctx;
  clb_tensor_t x = n->nin > 0 ? g->nodes[n->in[0]].t : NULL;
  clb_tensor_t y = n->nin > 1 ? g->nodes[n->in[1]].t : NULL;
  clb_tensor_t z = n->nin > 2 ? g->nodes[n->in[2]].t : NULL;
  int compiled_in = (n->kind == GN_NONZERO || n->kind == GN_MASKED_SELECT) &&
                    (g->policy_kind == CLB_POLICY_STATIC || g->policy_kind == CLB_POLICY_BUCKETED);
  if (compiled_in) {
    /* the op itself only depends on its inputs' sizes: its raw output (at the
     * bound those sizes give) is made again when they change, so that a count
     * is never clamped to a bound an earlier plan compiled in */
    const uint64_t in_deps = n->deps & ~(1ull << n->slot);
    if (!clb__graph_key_same(g, n, in_deps)) clb__graph_release_tensors(n);
    clb__graph_set_suffix(g, in_deps);
    g->cur[n->slot].kind = SLOT_UNRESOLVED;
    clb_status st = n->kind == GN_NONZERO ? clb_nonzero(ctx, x, &n->raw) : clb_masked_select(ctx, x, y, &n->raw);
    if (st != CLB_OK) return st;
    if ((st = materialize(g, n)) != CLB_OK) return st;
    return clb__graph_mem_resolved(g); /* the plan's arena, once every compiled-in count is known */
  }
  clb__graph_set_suffix(g, n->deps);
  clb__graph_ensure_key(g, n);
  switch (n->kind) {
  case GN_INPUT: return run_input(g, n);
  case GN_PARAM: case GN_SCALAR: return CLB_OK;
  case GN_UNARY: return clb_unary(ctx, (clb_unary_op)n->op, x, &n->t);
  case GN_BINARY: return clb_binary(ctx, (clb_binary_op)n->op, x, y, &n->t);
  case GN_CAST: return clb_cast(ctx, x, n->dtype, &n->t);
  case GN_RESHAPE: return clb_reshape(ctx, x, n->spec_rank, n->spec, &n->t);
  case GN_REDUCE: return clb_reduce_all(ctx, (clb_reduce_op)n->op, x, &n->t);
  case GN_SOFTMAX: return clb_softmax(ctx, x, n->op, &n->t);
  case GN_NONZERO: case GN_MASKED_SELECT: return run_select(g, n, x, y);
  case GN_LINEAR: return clb_linear(ctx, x, y, z, &n->t);
  case GN_LOSS:
    return clb_loss(ctx, (clb_loss_kind)n->op, x, y, &n->t, (g->loss >= 0 && n->requires_grad) ? &n->aux : NULL);
  }
  return clb__set_error(ctx, CLB_ERR_INTERNAL, "graph %s: node %s has an unknown kind", g->name, n->name);
}

/* ---- backward --------------------------------------------------------------------- */

static int on_grad_edge(const gnode *c, int k) {
  if (!c->requires_grad) return 0;
  switch (c->kind) {
  case GN_UNARY: case GN_SOFTMAX: case GN_LINEAR: return 1;
  case GN_LOSS: return k == 0;
  case GN_BINARY: return c->op == CLB_BINARY_ADD || c->op == CLB_BINARY_SUB || c->op == CLB_BINARY_MUL;
  default: return 0;
  }
}

/* d loss / d node m: the one gradient its consumer computed, or their sum. */
static clb_status grad_of(clb_graph_t g, int m, clb_tensor_t *out) {
  clb_tensor_t parts[CLB_GRAPH_MAX_NODES];
  int np = 0;
  for (int c = m + 1; c <= g->loss; c++) {
    gnode *cn = &g->nodes[c];
    for (int k = 0; k < cn->nin; k++)
      if (cn->in[k] == m && on_grad_edge(cn, k)) parts[np++] = cn->kind == GN_LOSS ? cn->aux : cn->egrad[k];
  }
  if (np == 0 || !parts[0])
    return clb__set_error(g->ctx, CLB_ERR_INTERNAL, "graph %s: no gradient reached %s", g->name, g->nodes[m].name);
  if (np == 1) {
    *out = parts[0];
    return CLB_OK;
  }
  gnode *n = &g->nodes[m];
  clb_status st = clb_add(g->ctx, parts[0], parts[1], &n->gsum);
  for (int i = 2; st == CLB_OK && i < np; i++) {
    /* accumulate through a fresh tensor: an output may not alias an input */
    clb_tensor_t acc = NULL;
    st = clb_add(g->ctx, n->gsum, parts[i], &acc);
    if (st == CLB_OK) {
      clb_tensor_free(n->gsum);
      n->gsum = acc;
    }
  }
  *out = n->gsum;
  return st;
}

/* Whether node i's backward has nothing to do: not a differentiable op, or
 * its gradient was computed by another node's kernel. */
static int backward_done_elsewhere(clb_graph_t g, int i) {
  const gnode *n = &g->nodes[i];
  if (n->kind == GN_LOSS || n->kind == GN_PARAM || !n->requires_grad) return 1;
  /* the loss's kernel computed it (runtime/graph/fuse.c) */
  if (i == g->fuse_loss_pred && g->loss_fused_now && clb__graph_fusion_on()) return 1;
  /* a ReLU whose reader's backward computed its gradient (fuse.c, fuse_bwd) */
  return n->kind == GN_UNARY && n->fuse_bwd >= 0 && clb__graph_fusion_on();
}

static clb_status backward_node(clb_graph_t g, int i) {
  gnode *n = &g->nodes[i];
  clb_context_t ctx = g->ctx;
  if (backward_done_elsewhere(g, i)) return CLB_OK;
  clb_tensor_t dy;
  clb_status st = grad_of(g, i, &dy);
  if (st != CLB_OK) return st;
  clb__graph_set_suffix(g, n->deps);
  gnode *in[3] = {NULL, NULL, NULL};
  for (int k = 0; k < n->nin; k++) in[k] = &g->nodes[n->in[k]];
  switch (n->kind) {
  case GN_LINEAR:
    if (n->fuse_bwd >= 0 && clb__graph_fusion_on()) /* the ReLU below: its input's gradient */
      return clb__linear_backward_relu(ctx, in[0]->t, in[1]->t, dy, &g->nodes[n->fuse_bwd].egrad[0],
                                       in[1]->requires_grad ? &n->egrad[1] : NULL,
                                       (in[2] && in[2]->requires_grad) ? &n->egrad[2] : NULL);
    return clb_linear_backward(ctx, in[0]->t, in[1]->t, dy, in[0]->requires_grad ? &n->egrad[0] : NULL,
                               in[1]->requires_grad ? &n->egrad[1] : NULL,
                               (in[2] && in[2]->requires_grad) ? &n->egrad[2] : NULL);
  case GN_UNARY:
    /* an epilogue of its linear node: the pre-activation is not kept, and the
     * gradients fused there read the output alone (relu: y > 0 where x > 0) */
    return clb_unary_backward(ctx, (clb_unary_op)n->op, n->fuse_epi >= 0 && clb__graph_fusion_on() ? n->t : in[0]->t, n->t, dy,
                              &n->egrad[0]);
  case GN_SOFTMAX: return clb_softmax_backward(ctx, n->t, dy, n->op, &n->egrad[0]);
  case GN_BINARY:
    for (int k = 0; k < 2 && st == CLB_OK; k++) {
      if (!in[k]->requires_grad) continue;
      if (n->op == CLB_BINARY_MUL) st = clb_mul(ctx, dy, in[1 - k]->t, &n->egrad[k]);
      else st = clb_unary(ctx, (n->op == CLB_BINARY_SUB && k == 1) ? CLB_UNARY_NEG : CLB_UNARY_COPY, dy, &n->egrad[k]);
    }
    return st;
  default:
    return clb__set_error(ctx, CLB_ERR_INTERNAL, "graph %s: %s %s has no gradient", g->name, clb__graph_kind_name(n->kind), n->name);
  }
}

/* Liveness: once node m's gradient has been used, the gradients its consumers
 * computed for it are dead for the rest of the step. They go back to the pool at
 * once, so later (earlier-layer) gradients of the same size reuse their buffers;
 * the queue is in order, so a buffer is rewritten only after its last reader ran. */
static void release_grads_of(clb_graph_t g, int m) {
  for (int c = m + 1; c <= g->loss; c++) {
    gnode *cn = &g->nodes[c];
    for (int k = 0; k < cn->nin; k++) {
      if (cn->in[k] != m || !on_grad_edge(cn, k)) continue;
      clb_tensor_t *t = cn->kind == GN_LOSS ? &cn->aux : &cn->egrad[k];
      clb_tensor_free(*t);
      *t = NULL;
    }
  }
  clb_tensor_free(g->nodes[m].gsum);
  g->nodes[m].gsum = NULL;
}

/* A trainable parameter's gradient: the one a CLB_PHASE_GRADS backward kept
 * (a caller may have rewritten it), else from its consumers. */
static clb_status param_grad(clb_graph_t g, int i, clb_tensor_t *out) {
  if (g->nodes[i].grad) {
    *out = g->nodes[i].grad;
    return CLB_OK;
  }
  return grad_of(g, i, out);
}

/* A merge of host-BLAS native kernels open across a training step's backward
 * and update (clb__gemm_host_merge_begin): the nodes whose releases wait for
 * it to be enqueued, and the parameters whose gradients do. */
typedef struct bwd_merge {
  int open, nheld, nparams;
  int held[CLB_GRAPH_MAX_NODES], params[CLB_GRAPH_MAX_NODES];
} bwd_merge;

static void backward_release(clb_graph_t g, int i);

/* Enqueues the merge's native kernel, then releases what waited for it. */
static clb_status merge_close(clb_graph_t g, bwd_merge *mg, clb_status st) {
  if (!mg->open) return st;
  mg->open = 0;
  clb_status se = clb__gemm_host_merge_end(g->ctx); /* even after an error: the kept work is valid */
  if (st == CLB_OK) st = se;
  for (int k = 0; st == CLB_OK && k < mg->nheld; k++) backward_release(g, mg->held[k]);
  for (int k = 0; st == CLB_OK && k < mg->nparams; k++) release_grads_of(g, mg->params[k]);
  mg->nheld = mg->nparams = 0;
  return st;
}

/* Every parameter's SGD step in one generated kernel (runtime/graph/fuse.c), or
 * at the end of the backward's open host-BLAS native kernel. */
static clb_status fused_sgd(clb_graph_t g, clb_status st, bwd_merge *mg) {
  clb_tensor_t p[CLB_GRAPH_MAX_NODES], gr[CLB_GRAPH_MAX_NODES], v[CLB_GRAPH_MAX_NODES];
  int idx[CLB_GRAPH_MAX_NODES], n = 0;
  for (int i = 0; i < g->loss && st == CLB_OK; i++) {
    gnode *nd = &g->nodes[i];
    if (nd->kind != GN_PARAM || !nd->requires_grad) continue;
    if ((st = param_grad(g, i, &gr[n])) != CLB_OK) break;
    p[n] = nd->t;
    v[n] = nd->vel;
    idx[n++] = i;
  }
  if (st == CLB_OK && n > 0) {
    char what[160];
    snprintf(what, sizeof what, "sgd_step of %d parameters of graph %s", n, g->name);
    if (mg->open && clb__gemm_host_sgd_join(g->ctx, what, n, p, gr, v, g->lr, g->momentum)) {
      for (int k = 0; k < n; k++) { /* a failed step marks what it wrote (docs/failure-behaviour.md) */
        clb__note_output(g->ctx, "sgd_step (fused)", p[k]);
        if (v[k]) clb__note_output(g->ctx, "sgd_step (fused)", v[k]);
        mg->params[mg->nparams++] = idx[k];
      }
      return CLB_OK;
    }
    if ((st = merge_close(g, mg, st)) == CLB_OK) st = clb__graph_fused_sgd(g, n, p, gr, v);
  }
  for (int k = 0; st == CLB_OK && k < n; k++) release_grads_of(g, idx[k]);
  return st;
}

/* Whether node i's backward can join the host-BLAS native kernel of the linear
 * layer above (clb__gemm_host_merge_begin): a linear node, in a whole-step run
 * whose matmuls are host BLAS and whose gradients no hook reads in between (a
 * gradient sum's launch enqueues the kept products first, as any command does). */
static int merges_host_bwd(clb_graph_t g, int i) {
  return g->nodes[i].kind == GN_LINEAR && !backward_done_elsewhere(g, i) && !g->phased && clb__graph_fusion_on() &&
         clb_context_gemm_strategy(g->ctx) == CLB_GEMM_HOST_BLAS;
}

/* After node i's backward: its consumers' gradients for it, and its output,
 * are dead. */
static void backward_release(clb_graph_t g, int i) {
  const gnode *n = &g->nodes[i];
  if (n->kind != GN_PARAM && n->requires_grad) release_grads_of(g, i);
  clb__graph_mem_backward_done(g, i);
}

/* The backward pass. Under CLB_PHASE_GRADS each trainable parameter's gradient
 * is kept (and handed to the grad hook) as soon as its last consumer's backward
 * has run: the loop goes down, so that is when it reaches the parameter.
 * Consecutive linear layers' backwards under host BLAS are one native kernel
 * (merges_host_bwd): while one is open, the nodes passed release nothing, so
 * no buffer its products use is handed out again before it is enqueued. */
static clb_status backward_pass(clb_graph_t g, bwd_merge *mg) {
  clb_status st = CLB_OK;
  for (int i = g->loss - 1; i >= 0 && st == CLB_OK; i--) {
    gnode *n = &g->nodes[i];
    const int merge = merges_host_bwd(g, i);
    /* a launch of its own comes */
    if (mg->open && !merge && !backward_done_elsewhere(g, i) && (st = merge_close(g, mg, st)) != CLB_OK) break;
    if (merge && !mg->open) {
      clb__gemm_host_merge_begin(g->ctx);
      mg->open = 1;
    }
    if (n->kind != GN_PARAM && n->requires_grad) st = backward_node(g, i);
    if (st == CLB_OK && g->phased && n->kind == GN_PARAM && n->requires_grad) {
      clb__graph_set_suffix(g, n->deps);
      st = grad_of(g, i, &n->grad);
      if (st == CLB_OK && g->grad_hook) {
        if (n->grad) n->grad->graph_held = 1;
        st = g->grad_hook(g->grad_hook_user, i, n->grad);
      }
    }
    if (st != CLB_OK) break;
    if (mg->open) mg->held[mg->nheld++] = i;
    else backward_release(g, i);
  }
  return st;
}

/* The SGD update from each parameter's gradient. */
static clb_status update_pass(clb_graph_t g, bwd_merge *mg) {
  clb_status st = CLB_OK;
  clb__graph_set_suffix(g, g->nodes[g->loss].deps);
  if (clb__graph_fusion_on()) {
    /* under host BLAS the SGD steps are a native kernel's, the backward's last
     * or their own (one arithmetic whether the step ran whole or in phases) */
    if (!mg->open && clb_context_gemm_strategy(g->ctx) == CLB_GEMM_HOST_BLAS) {
      clb__gemm_host_merge_begin(g->ctx);
      mg->open = 1;
    }
    return fused_sgd(g, st, mg);
  }
  if ((st = merge_close(g, mg, st)) != CLB_OK) return st;
  for (int i = 0; i < g->loss && st == CLB_OK; i++) {
    gnode *n = &g->nodes[i];
    if (n->kind != GN_PARAM || !n->requires_grad) continue;
    clb_tensor_t grad;
    if ((st = param_grad(g, i, &grad)) == CLB_OK) st = clb_sgd_step(g->ctx, n->t, grad, n->vel, g->lr, g->momentum);
    if (st == CLB_OK) release_grads_of(g, i);
  }
  return st;
}

/* The backward and the update; under host BLAS the last layers' backwards
 * and the SGD steps are one native kernel (docs/gemm.md). */
static clb_status train_step(clb_graph_t g, int backward, int update) {
  bwd_merge mg;
  mg.open = mg.nheld = mg.nparams = 0;
  clb_status st = backward ? backward_pass(g, &mg) : CLB_OK;
  if (st == CLB_OK && update) st = update_pass(g, &mg);
  return merge_close(g, &mg, st);
}

/* Forgets the gradients a CLB_PHASE_GRADS step kept (their tensors stay with
 * their consumers, released as every step's are). */
static void end_phased(clb_graph_t g) {
  for (int i = 0; i < g->nnodes; i++) g->nodes[i].grad = NULL;
  g->in_step = 0;
  g->phased = 0;
}

/* ---- plans -------------------------------------------------------------------------- */

static const char *policy_name(clb_policy_kind k) {
  static const char *const names[] = {"static", "automatic", "dynamic", "bucketed"};
  return names[k];
}

static void describe_slot(clb_graph_t g, int s, char *buf, size_t len) {
  const slot_val *v = &g->cur[s];
  if (v->kind == SLOT_BOUNDED) snprintf(buf, len, "%s bounded by %lld", g->slots[s].what, (long long)g->slots[s].bound);
  else if (v->kind == SLOT_BUCKET) snprintf(buf, len, "%s in bucket %lld", g->slots[s].what, (long long)v->value);
  else snprintf(buf, len, "%s = %lld", g->slots[s].what, (long long)v->value);
}

/* The index of the plan of this run's sizes, or g->nplans when it is new. */
static size_t find_plan(clb_graph_t g, const clb_decision *dec) {
  size_t p;
  for (p = 0; p < g->nplans; p++) {
    if (g->plans[p].input_plan != dec->plan) continue;
    int same = 1;
    for (int s = 0; same && s < g->nslots; s++)
      same = g->plans[p].vals[s].value == g->cur[s].value && g->plans[p].vals[s].kind == g->cur[s].kind;
    if (same) break;
  }
  return p;
}

/* Finds or records the plan of this run's sizes; a new plan after the first is a
 * recompile with its reason. */
static clb_status note_plan(clb_graph_t g, const clb_decision *dec) {
  size_t p = find_plan(g, dec);
  if (p == g->nplans) {
    if (g->nplans == g->cap_plans) {
      size_t ncap = g->cap_plans ? g->cap_plans * 2 : 8;
      plan_rec *np = realloc(g->plans, ncap * sizeof *np);
      if (!np) return clb__set_error(g->ctx, CLB_ERR_HOST_OOM, "graph %s: out of host memory", g->name);
      g->plans = np;
      g->cap_plans = ncap;
    }
    g->plans[p].input_plan = dec->plan;
    memcpy(g->plans[p].vals, g->cur, sizeof g->cur);
    g->nplans++;
    g->stats.plans_compiled++;
    g->ctx->counters.plans_compiled++;
    if (p > 0) {
      /* the first slot whose treatment differs from the previous plan's says why */
      const plan_rec *prev = &g->plans[g->current_plan >= 0 ? (size_t)g->current_plan : 0];
      char what[200] = "";
      for (int s = 0; s < g->nslots && !what[0]; s++)
        if (prev->vals[s].value != g->cur[s].value || prev->vals[s].kind != g->cur[s].kind) describe_slot(g, s, what, sizeof what);
      if (dec->action == CLB_ACTION_COMPILE && dec->reason && dec->reason[0])
        snprintf(g->last_reason, sizeof g->last_reason, "graph %s: plan %zu (%s policy): %s", g->name, p, policy_name(g->policy_kind),
                 dec->reason);
      else
        snprintf(g->last_reason, sizeof g->last_reason, "graph %s: plan %zu (%s policy): %s, not in any earlier plan", g->name, p,
                 policy_name(g->policy_kind), what[0] ? what : "new sizes");
      clb__note_recompile(g->ctx, g->last_reason);
    }
  }
  if (g->current_plan >= 0 && (size_t)g->current_plan != p) g->stats.plan_switches++;
  g->current_plan = (int64_t)p;
  return CLB_OK;
}

/* The forward pass: nodes up to `last` (all of an inference graph), releasing
 * inputs whose last reader ran when `release`. */
static clb_status forward_nodes(clb_graph_t g, int last, int release, const int *last_use);

/* The forward pass. Under host BLAS its consecutive matmuls are one native
 * kernel (clb__gemm_host_merge_begin; any other command enqueues what is kept
 * first), unless it releases intermediates as it goes: a released input of a
 * kept product could be handed out before the product runs. */
static clb_status forward(clb_graph_t g, int last, int release, const int *last_use) {
  const int merge = !release && clb__graph_fusion_on() && clb_context_gemm_strategy(g->ctx) == CLB_GEMM_HOST_BLAS;
  if (merge) clb__gemm_host_merge_begin(g->ctx);
  clb_status st = forward_nodes(g, last, release, last_use);
  if (merge) {
    clb_status se = clb__gemm_host_merge_end(g->ctx);
    if (st == CLB_OK) st = se;
  }
  return st;
}

static clb_status forward_nodes(clb_graph_t g, int last, int release, const int *last_use) {
  clb_status st = CLB_OK;
  const int fuse = clb__graph_fusion_on();
  for (int i = 0; i < g->nnodes && st == CLB_OK; i++) {
    if (!(i <= last || g->loss < 0)) continue;
    const gnode *n = &g->nodes[i];
    /* an elementwise group runs as one kernel at its last member (runtime/graph/fuse.c) */
    if (fuse && n->fuse_last >= 0 && n->fuse_last != i) continue;
    /* the loss's activation runs in the loss's kernel */
    if (fuse && i == g->fuse_loss_pred && clb__graph_loss_fuses_now(g, i)) continue;
    /* a linear node runs at its activation, as the GEMM's epilogue */
    if (fuse && n->kind == GN_LINEAR && n->fuse_epi >= 0) continue;
    /* a nonzero node runs at its cast, writing the cast's dtype */
    if (fuse && n->kind == GN_NONZERO && n->fuse_cast >= 0) continue;
    if (fuse && n->fuse_last == i) st = clb__graph_fused_run(g, i);
    else if (fuse && n->kind == GN_UNARY && n->fuse_epi >= 0) st = clb__graph_fused_linear(g, i);
    else if (fuse && n->kind == GN_CAST && n->fuse_cast >= 0) st = clb__graph_fused_cast(g, i);
    else if (fuse && i == g->loss && g->fuse_loss_pred >= 0 && g->loss_fused_now) st = clb__graph_fused_loss(g);
    else st = run_node(g, &g->nodes[i]);
    if (!release || st != CLB_OK) continue;
    /* the nodes that ran: a group's members from its first, a linear node and
     * its epilogue, a nonzero and its cast, or node i */
    const int partner = !fuse ? -1 : n->kind == GN_UNARY ? n->fuse_epi : n->kind == GN_CAST ? n->fuse_cast : -1;
    const int grouped = fuse && n->fuse_last == i, epi = partner >= 0;
    int m = epi ? partner : i;
    if (grouped)
      for (m = 0; g->nodes[m].fuse_last != i;) m++;
    for (; m >= 0; m = grouped ? g->nodes[m].fuse_next : (epi && m != i) ? i : -1)
      for (int k = 0; k < g->nodes[m].nin; k++) {
        gnode *in = &g->nodes[g->nodes[m].in[k]];
        /* the queue is in order: the buffer is rewritten only after node i ran */
        if (last_use[g->nodes[m].in[k]] == m && !in->keep && in->kind != GN_INPUT && in->kind != GN_PARAM &&
            in->kind != GN_SCALAR)
          clb__graph_release_tensors(in);
      }
  }
  return st;
}

/* The end of a step (clb_graph_run, or CLB_PHASE_UPDATE): the memory plan's
 * record, statistics, the shape log. */
static clb_status finish_step(clb_graph_t g, clb_status st) {
  st = clb__graph_record_end(g, st);
  clb__graph_mem_end(g, st);
  g->ctx->build_suffix[0] = 0;
  if (st != CLB_OK) return st;
  g->stats.runs++;
  shape_log(g);
  return CLB_OK;
}

/* A step, or with warm_only the walk that builds the plan's program and nothing else. */
static clb_status run_graph(clb_graph_t g, int warm_only, int grads_only) {
  const char *op = warm_only ? "clb_graph_warm" : grads_only ? "clb_graph_run_phase" : "clb_graph_run";
  if (!g) return clb__set_error(NULL, CLB_ERR_NULL, "%s: graph is NULL", op);
  if (g->in_step)
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: graph '%s' has a step waiting for CLB_PHASE_UPDATE or CLB_PHASE_DISCARD", op, g->name);
  if (g->nnodes == 0) return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: graph '%s' is empty", op, g->name);
  clb_status st = clb__fork_check(g->ctx, op);
  if (st != CLB_OK) return st;
  int64_t dims[CLB_GRAPH_MAX_NODES * 2];
  size_t nd = 0;
  for (int i = 0; i < g->ninputs; i++) {
    gnode *n = &g->nodes[g->inputs[i]];
    if (!n->fed) return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: input %s of graph '%s' was never fed", op, n->name, g->name);
    for (int d = 0; d < n->rank; d++) {
      if (nd == sizeof dims / sizeof dims[0])
        return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: graph '%s' has too many input dims", op, g->name);
      dims[nd++] = n->feed_dims[d];
    }
  }
  if (!g->policy && (st = policy_setup(g)) != CLB_OK) return st;
  /* views and exports of the last run's tensors keep their data */
  if ((st = clb__graph_unshare(g, op)) != CLB_OK) return st;
  if ((st = clb__graph_fuse_find(g)) != CLB_OK) return st;
  g->loss_fused_now = 0;
  clb_decision dec;
  if ((st = clb_policy_decide(g->policy, dims, nd, &dec)) != CLB_OK)
    return clb__set_error(g->ctx, st, "graph %s: %s", g->name, dec.reason ? dec.reason : clb_policy_errmsg(g->policy));
  /* the inputs' dims as this plan treats them */
  for (int i = 0; i < g->ninputs; i++) {
    gnode *n = &g->nodes[g->inputs[i]];
    for (int d = 0; d < n->rank; d++) {
      int s = n->slot_of_dim[d];
      if (s < 0) continue;
      int64_t bound;
      int is_static;
      if ((st = clb_policy_plan_bound(g->policy, dec.plan, (size_t)i, d, &bound, &is_static)) != CLB_OK)
        return clb__set_error(g->ctx, st, "graph %s: %s", g->name, clb_policy_errmsg(g->policy));
      if (!is_static) {
        g->cur[s].kind = SLOT_BOUNDED;
        g->cur[s].value = -1;
      } else {
        g->cur[s].kind = g->policy_kind == CLB_POLICY_BUCKETED ? SLOT_BUCKET : SLOT_STATIC;
        g->cur[s].value = bound;
      }
    }
  }
  for (int s = 0; s < g->nslots; s++)
    if (g->slots[s].dim < 0) {
      g->cur[s].kind = SLOT_BOUNDED;
      g->cur[s].value = -1;
    }
  int last = g->loss >= 0 ? g->loss : g->nnodes - 1;
  /* liveness of an inference graph: the last node that reads each node */
  int last_use[CLB_GRAPH_MAX_NODES];
  const int release = g->free_intermediates && g->loss < 0;
  if (release) {
    for (int i = 0; i < g->nnodes; i++) last_use[i] = -1;
    for (int i = 0; i < g->nnodes; i++)
      for (int k = 0; k < g->nodes[i].nin; k++) last_use[g->nodes[i].in[k]] = i;
  }
  /* a new plan whose counts stay on the device: walk its step once without
   * launching to collect every kernel, and build them as one program */
  if (warm_only && !clb__graph_can_collect(g))
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: graph '%s': only plans whose counts stay on the device "
                          "(dynamic or automatic policy, no sync-exact matmul, CLBOUND_PLAN_PROGRAMS on) are built ahead", op, g->name);
  if (find_plan(g, &dec) == g->nplans && clb__graph_can_collect(g) && clb__plan_collect_begin(g->ctx) == CLB_OK) {
    char what[96];
    snprintf(what, sizeof what, "graph %s plan %zu", g->name, g->nplans);
    /* the walk is also the memory plan's recording step: no launches, the same
     * allocations in the same order, so the first real step runs in the arena */
    clb_status ws = clb__graph_mem_begin(g, dec.plan);
    if (ws == CLB_OK) ws = forward(g, last, release, last_use);
    if (ws == CLB_OK && g->loss >= 0) ws = train_step(g, 1, 1);
    clb__graph_mem_end_as(g, ws, (int64_t)g->nplans);
    st = clb__plan_collect_end(g->ctx, what, ws == CLB_OK);
    if (st == CLB_OK && warm_only) st = ws;
    if (st != CLB_OK || warm_only) {
      g->ctx->build_suffix[0] = 0;
      return st;
    }
  }
  if (warm_only) return CLB_OK; /* the plan was built before */
  /* the memory plan: releases the walk's (or the last step's) tensors, then
   * records this plan's first step or serves its arena */
  if ((st = clb__graph_mem_begin(g, dec.plan)) == CLB_OK) {
    /* a whole step of the plan that ran the last one is recorded or replayed */
    size_t p = find_plan(g, &dec);
    if (!grads_only) st = clb__graph_record_begin(g, p < g->nplans && (int64_t)p == g->current_plan);
    if (st == CLB_OK) st = forward(g, last, release, last_use);
  }
  if (st == CLB_OK) st = note_plan(g, &dec);
  if (grads_only) {
    g->phased = 1;
    const gnode *l = &g->nodes[g->loss];
    if (st == CLB_OK && g->grad_hook) {
      g->nodes[l->in[1]].t->graph_held = 1;
      st = g->grad_hook(g->grad_hook_user, g->loss, g->nodes[l->in[1]].t);
    }
    if (st == CLB_OK) st = train_step(g, 1, 0);
    g->ctx->build_suffix[0] = 0;
    if (st == CLB_OK) {
      g->in_step = 1; /* the memory plan's step stays open until the update */
      return CLB_OK;
    }
    end_phased(g);
    clb__graph_mem_end(g, st);
    return st;
  }
  if (st == CLB_OK && g->loss >= 0) st = train_step(g, 1, 1);
  return finish_step(g, st);
}

clb_status clb_graph_run(clb_graph_t g) { return run_graph(g, 0, 0); }

clb_status clb_graph_run_phase(clb_graph_t g, clb_graph_phase phase) {
  static const char *op = "clb_graph_run_phase";
  if (!g) return clb__set_error(NULL, CLB_ERR_NULL, "%s: graph is NULL", op);
  switch (phase) {
  case CLB_PHASE_ALL: return clb_graph_run(g);
  case CLB_PHASE_GRADS:
    if (g->loss < 0) return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: graph '%s' does not train (clb_graph_train)", op, g->name);
    return run_graph(g, 0, 1);
  case CLB_PHASE_UPDATE:
  case CLB_PHASE_DISCARD: {
    if (!g->in_step)
      return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: graph '%s' has no step begun by CLB_PHASE_GRADS", op, g->name);
    clb_status st = CLB_OK;
    /* views of the parameters or gradients keep the values they had */
    if (phase == CLB_PHASE_UPDATE && (st = clb__graph_unshare(g, op)) == CLB_OK) st = train_step(g, 0, 1);
    end_phased(g);
    if (phase == CLB_PHASE_DISCARD) {
      /* not a step: the memory plan keeps no record of it */
      clb__graph_mem_end(g, CLB_ERR_INVALID_ARG);
      g->ctx->build_suffix[0] = 0;
      return CLB_OK;
    }
    return finish_step(g, st);
  }
  }
  return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: unknown phase %d", op, (int)phase);
}

clb_status clb_graph_params(clb_graph_t g, clb_node *out, int cap, int *n) {
  static const char *op = "clb_graph_params";
  if (!g || !n) return clb__set_error(g ? g->ctx : NULL, CLB_ERR_NULL, "%s: %s is NULL", op, g ? "n" : "graph");
  if (cap > 0 && !out) return clb__set_error(g->ctx, CLB_ERR_NULL, "%s: out is NULL", op);
  if (g->loss < 0) return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: graph '%s' does not train (clb_graph_train)", op, g->name);
  int k = 0;
  for (int i = g->loss - 1; i >= 0; i--)
    if (g->nodes[i].kind == GN_PARAM && g->nodes[i].requires_grad) {
      if (k < cap) out[k] = i;
      k++;
    }
  *n = k;
  return CLB_OK;
}

clb_status clb_graph_grad(clb_graph_t g, clb_node param, clb_tensor_t *grad) {
  static const char *op = "clb_graph_grad";
  if (!g || !grad) return clb__set_error(g ? g->ctx : NULL, CLB_ERR_NULL, "%s: %s is NULL", op, g ? "grad" : "graph");
  gnode *n = clb__graph_node(g, param);
  if (!n || n->kind != GN_PARAM || !n->requires_grad)
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: node %d of graph '%s' is not a trainable parameter", op, param, g->name);
  if (!g->in_step || !n->grad)
    return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: graph '%s' has no step begun by CLB_PHASE_GRADS", op, g->name);
  n->grad->graph_held = 1;
  *grad = n->grad;
  return CLB_OK;
}

clb_status clb_graph_loss_count(clb_graph_t g, int64_t *count) {
  static const char *op = "clb_graph_loss_count";
  if (!g || !count) return clb__set_error(g ? g->ctx : NULL, CLB_ERR_NULL, "%s: %s is NULL", op, g ? "count" : "graph");
  if (g->loss < 0) return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: graph '%s' does not train (clb_graph_train)", op, g->name);
  /* the target's actual elements: the prediction's (rows for cross-entropy),
   * else the loss raised a deferred check */
  clb_tensor_t target = g->nodes[g->nodes[g->loss].in[1]].t;
  if (!target) return clb__set_error(g->ctx, CLB_ERR_INVALID_ARG, "%s: graph '%s' has not run (or its target was released)", op, g->name);
  int64_t dims[CLB_MAX_RANK];
  clb_status st = clb__sync_sizes(g->ctx, target, op, dims);
  if (st != CLB_OK) return st;
  *count = clb__numel(target->rank, dims);
  return CLB_OK;
}

clb_status clb_graph_set_grad_hook(clb_graph_t g, clb_graph_grad_fn fn, void *user) {
  if (!g) return clb__set_error(NULL, CLB_ERR_NULL, "clb_graph_set_grad_hook: graph is NULL");
  g->grad_hook = fn;
  g->grad_hook_user = user;
  return CLB_OK;
}

clb_status clb_graph_warm(clb_graph_t g) {
  clb_status st = run_graph(g, 1, 0);
  if (st == CLB_OK) st = clb_context_store_programs(g->ctx);
  return st;
}
