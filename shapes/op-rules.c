/* op-rules.c: the shape rule of every op, one function per op and one table that maps each op to its rule. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "shapes-impl.h"

typedef const struct clb_expr node;

/* What a rule sees: the call's arguments plus the op's label. */
typedef struct rule_call {
  struct clb_shapes *sh;
  const clb_op_params *p;
  const clb_shape *in;
  const char *const *names;
  size_t n;
  const char *label;
  clb_shape *out;
} rule_call;

typedef clb_status (*rule_fn)(rule_call *c);

static const char *in_name(rule_call *c, size_t i, char *tmp, size_t size) {
  return clb__input_name(c->names, i, tmp, size);
}

/* "dim 1 of w" */
static void dim_words(rule_call *c, size_t input, int dim, char *buf, size_t size) {
  char tmp[32];
  snprintf(buf, size, "dim %d of %s", dim, in_name(c, input, tmp, sizeof tmp));
}

static clb_status fail(rule_call *c, clb_status st, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return clb__shapes_fail(c->sh, st, "%s: %s", c->label, msg);
}

/* A dim index with Python's negative counting, for a rank of `rank` (+extra). */
static clb_status wrap(rule_call *c, int dim, int rank, int *out) {
  int d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank) return fail(c, CLB_ERR_INVALID_ARG, "dim %d out of range for rank %d", dim, rank);
  *out = d;
  return CLB_OK;
}

static clb_status konst(rule_call *c, int64_t v, node **out) { return clb_expr_const(c->sh, v, out); }

static clb_status numel_of(struct clb_shapes *sh, const clb_expr_t *dims, int n, node **out) {
  if (n == 0) return clb_expr_const(sh, 1, out);
  return clb__mul_n(sh, dims, n, out);
}

/* Broadcasts shapes a and b (input indices ia, ib) into *out, PyTorch style. */
static clb_status broadcast2(rule_call *c, const clb_shape *a, const clb_shape *b, size_t ib, clb_shape *out) {
  int r = a->rank > b->rank ? a->rank : b->rank;
  clb_shape s;
  s.rank = r;
  for (int i = 0; i < r; i++) {
    int ja = i - (r - a->rank), jb = i - (r - b->rank);
    if (ja < 0) s.dims[i] = b->dims[jb];
    else if (jb < 0) s.dims[i] = a->dims[ja];
    else {
      char what[96];
      dim_words(c, ib, jb, what, sizeof what);
      clb_status st = clb_shapes_broadcast(c->sh, a->dims[ja], b->dims[jb], what, &s.dims[i]);
      if (st != CLB_OK) return st;
    }
  }
  *out = s;
  return CLB_OK;
}

/* ---- Elementwise -------------------------------------------------------------------- */

/* unary: the output has the input's shape. */
static clb_status rule_same(rule_call *c) {
  *c->out = c->in[0];
  return CLB_OK;
}

/* binary, where: every input broadcasts against the others. */
static clb_status rule_broadcast(rule_call *c) {
  clb_shape s = c->in[0];
  for (size_t i = 1; i < c->n; i++) {
    clb_status st = broadcast2(c, &s, &c->in[i], i, &s);
    if (st != CLB_OK) return st;
  }
  *c->out = s;
  return CLB_OK;
}

/* ---- Reductions --------------------------------------------------------------------- */

/* sum, mean, max: over `dim` or over all dims; keepdim leaves a static 1. */
static clb_status rule_reduce(rule_call *c) {
  const clb_shape *x = &c->in[0];
  clb_shape s;
  s.rank = 0;
  int d = -1;
  if (!c->p->all) {
    clb_status st = wrap(c, c->p->dim, x->rank, &d);
    if (st != CLB_OK) return st;
  }
  for (int i = 0; i < x->rank; i++) {
    if (c->p->all || i == d) {
      if (c->p->keepdim) {
        clb_status st = konst(c, 1, &s.dims[s.rank++]);
        if (st != CLB_OK) return st;
      }
    } else {
      s.dims[s.rank++] = x->dims[i];
    }
  }
  *c->out = s;
  return CLB_OK;
}

/* ---- Matrix products ---------------------------------------------------------------- */

/* matmul: torch.matmul semantics (1-D operands promoted then dropped, batch dims
 * broadcast), with the last two dims of a or b transposed on request. */
static clb_status rule_matmul(rule_call *c) {
  clb_shape a = c->in[0], b = c->in[1];
  if (a.rank < 1 || b.rank < 1) return fail(c, CLB_ERR_RANK, "operands need rank >= 1 (got %d and %d)", a.rank, b.rank);
  if (c->p->trans_a && a.rank >= 2) {
    node *t = a.dims[a.rank - 1];
    a.dims[a.rank - 1] = a.dims[a.rank - 2];
    a.dims[a.rank - 2] = t;
  }
  if (c->p->trans_b && b.rank >= 2) {
    node *t = b.dims[b.rank - 1];
    b.dims[b.rank - 1] = b.dims[b.rank - 2];
    b.dims[b.rank - 2] = t;
  }
  int ka = a.rank - 1, kb = b.rank >= 2 ? b.rank - 2 : 0;
  char what[96];
  dim_words(c, 1, c->p->trans_b && b.rank >= 2 ? b.rank - 1 : kb, what, sizeof what);
  clb_status st = clb_shapes_unify(c->sh, a.dims[ka], b.dims[kb], what);
  if (st != CLB_OK) return st;
  clb_shape s;
  s.rank = 0;
  if (a.rank >= 2 && b.rank >= 2) {
    clb_shape ba = a, bb = b;
    ba.rank -= 2;
    bb.rank -= 2;
    st = broadcast2(c, &ba, &bb, 1, &s);
    if (st != CLB_OK) return st;
  } else if (a.rank > 2) {
    for (int i = 0; i < a.rank - 2; i++) s.dims[s.rank++] = a.dims[i];
  } else if (b.rank > 2) {
    for (int i = 0; i < b.rank - 2; i++) s.dims[s.rank++] = b.dims[i];
  }
  if (a.rank >= 2) s.dims[s.rank++] = a.dims[a.rank - 2];
  if (b.rank >= 2) s.dims[s.rank++] = b.dims[b.rank - 1];
  if (s.rank > CLB_SHAPE_MAX_RANK) return fail(c, CLB_ERR_RANK, "result rank %d > %d", s.rank, CLB_SHAPE_MAX_RANK);
  *c->out = s;
  return CLB_OK;
}

/* linear: x [..., k] times w [n, k] transposed, plus bias [n]: [..., n]. */
static clb_status rule_linear(rule_call *c) {
  const clb_shape *x = &c->in[0], *w = &c->in[1];
  if (x->rank < 1 || w->rank != 2)
    return fail(c, CLB_ERR_RANK, "x needs rank >= 1 and w rank 2 (got %d and %d)", x->rank, w->rank);
  char what[96];
  dim_words(c, 1, 1, what, sizeof what);
  clb_status st = clb_shapes_unify(c->sh, x->dims[x->rank - 1], w->dims[1], what);
  if (st != CLB_OK) return st;
  if (c->n == 3) {
    if (c->in[2].rank != 1) return fail(c, CLB_ERR_RANK, "bias needs rank 1 (got %d)", c->in[2].rank);
    dim_words(c, 2, 0, what, sizeof what);
    st = clb_shapes_unify(c->sh, c->in[2].dims[0], w->dims[0], what);
    if (st != CLB_OK) return st;
  }
  clb_shape s = *x;
  s.dims[s.rank - 1] = w->dims[0];
  *c->out = s;
  return CLB_OK;
}

/* ---- Views -------------------------------------------------------------------------- */

/* reshape, view: the number of elements is preserved; one NULL target dim takes
 * numel // (product of the others), with the division checked. */
static clb_status rule_reshape(rule_call *c) {
  const clb_shape *x = &c->in[0];
  int r = c->p->target_rank;
  if (r < 0 || r > CLB_SHAPE_MAX_RANK) return fail(c, CLB_ERR_RANK, "target rank %d outside 0..%d", r, CLB_SHAPE_MAX_RANK);
  if (r > 0 && !c->p->target) return fail(c, CLB_ERR_INVALID_ARG, "no target dims");
  node *numel, *known;
  clb_status st = numel_of(c->sh, x->dims, x->rank, &numel);
  if (st != CLB_OK) return st;
  clb_expr_t dims[CLB_SHAPE_MAX_RANK];
  int nk = 0, infer = -1;
  for (int i = 0; i < r; i++) {
    if (c->p->target[i]) dims[nk++] = c->p->target[i];
    else if (infer >= 0) return fail(c, CLB_ERR_INVALID_ARG, "more than one inferred dim (%d and %d)", infer, i);
    else infer = i;
  }
  st = numel_of(c->sh, dims, nk, &known);
  if (st != CLB_OK) return st;
  clb_shape s;
  s.rank = r;
  char tmp[32], what[96];
  snprintf(what, sizeof what, "number of elements of %s", in_name(c, 0, tmp, sizeof tmp));
  if (infer < 0) {
    st = clb_shapes_unify(c->sh, numel, known, what);
    if (st != CLB_OK) return st;
    for (int i = 0; i < r; i++) s.dims[i] = c->p->target[i];
  } else {
    if (known->min < 1) return fail(c, CLB_ERR_SHAPE, "cannot infer a dim when the others may have 0 elements");
    node *q, *m, *zero;
    st = clb_expr_floordiv(c->sh, numel, known, &q);
    if (st == CLB_OK) st = clb_expr_mod(c->sh, numel, known, &m);
    if (st == CLB_OK) st = konst(c, 0, &zero);
    if (st != CLB_OK) return st;
    if (m->kind == CLB_EXPR_CONST && m->c != 0) {
      const char *tn = clb_expr_str(c->sh, numel), *tk = clb_expr_str(c->sh, known);
      return clb__shapes_fail(c->sh, CLB_ERR_SHAPE, "%s: %s elements of %s do not split into parts of %s", c->label,
                              tn ? tn : "?", in_name(c, 0, tmp, sizeof tmp), tk ? tk : "?");
    }
    if (m != zero) {
      st = clb__check_add(c->sh, CLB_CHECK_EQ, m, zero, what);
      if (st != CLB_OK) return st;
    }
    for (int i = 0, j = 0; i < r; i++) s.dims[i] = i == infer ? q : dims[j++];
  }
  *c->out = s;
  return CLB_OK;
}

/* flatten: dims dim..dim2 become their product. */
static clb_status rule_flatten(rule_call *c) {
  const clb_shape *x = &c->in[0];
  if (x->rank == 0) {
    clb_shape s;
    s.rank = 1;
    *c->out = s;
    return konst(c, 1, &c->out->dims[0]);
  }
  int a = 0, b = 0;
  clb_status st = wrap(c, c->p->dim, x->rank, &a);
  if (st == CLB_OK) st = wrap(c, c->p->dim2, x->rank, &b);
  if (st != CLB_OK) return st;
  if (a > b) return fail(c, CLB_ERR_INVALID_ARG, "start dim %d after end dim %d", a, b);
  clb_shape s;
  s.rank = 0;
  for (int i = 0; i < a; i++) s.dims[s.rank++] = x->dims[i];
  st = numel_of(c->sh, x->dims + a, b - a + 1, &s.dims[s.rank++]);
  if (st != CLB_OK) return st;
  for (int i = b + 1; i < x->rank; i++) s.dims[s.rank++] = x->dims[i];
  *c->out = s;
  return CLB_OK;
}

/* squeeze: removes `dim` when it is a static 1 (a dim known > 1 stays, as in
 * PyTorch); with `all`, every static 1. A dim that may or may not be 1 is an error. */
static clb_status rule_squeeze(rule_call *c) {
  const clb_shape *x = &c->in[0];
  clb_shape s;
  s.rank = 0;
  int d = -1;
  if (!c->p->all) {
    clb_status st = wrap(c, c->p->dim, x->rank, &d);
    if (st != CLB_OK) return st;
  }
  for (int i = 0; i < x->rank; i++) {
    node *e;
    clb_status st = clb__resolve(c->sh, x->dims[i], &e);
    if (st != CLB_OK) return st;
    int one = e->kind == CLB_EXPR_CONST && e->c == 1;
    if (i == d && !one && e->min <= 1 && e->max >= 1) {
      char what[96];
      dim_words(c, 0, i, what, sizeof what);
      const char *t = clb_expr_str(c->sh, e);
      return clb__shapes_fail(c->sh, CLB_ERR_SHAPE, "%s: %s is %s, which may or may not be 1", c->label, what,
                              t ? t : "?");
    }
    if (!((c->p->all || i == d) && one)) s.dims[s.rank++] = x->dims[i];
  }
  *c->out = s;
  return CLB_OK;
}

/* unsqueeze: a static 1 inserted at `dim` (counting from the end when negative). */
static clb_status rule_unsqueeze(rule_call *c) {
  const clb_shape *x = &c->in[0];
  if (x->rank == CLB_SHAPE_MAX_RANK) return fail(c, CLB_ERR_RANK, "rank %d is already %d", x->rank, CLB_SHAPE_MAX_RANK);
  int d = 0;
  clb_status st = wrap(c, c->p->dim, x->rank + 1, &d);
  if (st != CLB_OK) return st;
  clb_shape s;
  s.rank = x->rank + 1;
  for (int i = 0, j = 0; i < s.rank; i++) {
    if (i == d) st = konst(c, 1, &s.dims[i]);
    else s.dims[i] = x->dims[j++];
  }
  *c->out = s;
  return st;
}

/* transpose: swaps `dim` and `dim2`. */
static clb_status rule_transpose(rule_call *c) {
  clb_shape s = c->in[0];
  int a = 0, b = 0;
  clb_status st = wrap(c, c->p->dim, s.rank, &a);
  if (st == CLB_OK) st = wrap(c, c->p->dim2, s.rank, &b);
  if (st != CLB_OK) return st;
  node *t = s.dims[a];
  s.dims[a] = s.dims[b];
  s.dims[b] = t;
  *c->out = s;
  return CLB_OK;
}

/* concat: sizes along `dim` add up; every other dim unifies with input 0's. */
static clb_status rule_concat(rule_call *c) {
  const clb_shape *x = &c->in[0];
  int d = 0;
  clb_status st = wrap(c, c->p->dim, x->rank, &d);
  if (st != CLB_OK) return st;
  clb_shape s = *x;
  clb_expr_t parts[64];
  if (c->n > 64) return fail(c, CLB_ERR_INVALID_ARG, "more than 64 inputs");
  for (size_t i = 0; i < c->n; i++) {
    if (c->in[i].rank != x->rank) {
      char tmp[32];
      return fail(c, CLB_ERR_RANK, "%s has rank %d, input 0 rank %d", in_name(c, i, tmp, sizeof tmp), c->in[i].rank,
                  x->rank);
    }
    parts[i] = c->in[i].dims[d];
    for (int j = 0; j < x->rank && i > 0; j++) {
      if (j == d) continue;
      char what[96];
      dim_words(c, i, j, what, sizeof what);
      st = clb_shapes_unify(c->sh, x->dims[j], c->in[i].dims[j], what);
      if (st != CLB_OK) return st;
    }
  }
  st = clb__add_n(c->sh, parts, (int)c->n, &s.dims[d]);
  if (st != CLB_OK) return st;
  *c->out = s;
  return CLB_OK;
}

/* ---- Data-dependent sizes ----------------------------------------------------------- */

/* A fresh data-dependent count in [0, max of upper], counting `what` of input i. */
static clb_status count_sym(rule_call *c, node *upper, const char *what, size_t i, node **out) {
  char origin[128], tmp[32];
  snprintf(origin, sizeof origin, "%s of %s", what, in_name(c, i, tmp, sizeof tmp));
  return clb_sym_new_unbacked(c->sh, 0, upper->max, origin, out);
}

/* nonzero: [u, rank], u in [0, numel(x)]. */
static clb_status rule_nonzero(rule_call *c) {
  const clb_shape *x = &c->in[0];
  node *numel, *u;
  clb_status st = numel_of(c->sh, x->dims, x->rank, &numel);
  if (st == CLB_OK) st = count_sym(c, numel, c->label, 0, &u);
  if (st != CLB_OK) return st;
  clb_shape s;
  s.rank = 2;
  s.dims[0] = u;
  *c->out = s;
  return konst(c, x->rank, &c->out->dims[1]);
}

/* The number of true bits of mask broadcast to shape b: u * (the dims the mask is
 * broadcast along) with u counting the mask's own bits, or a plain count when a
 * mask dim is neither the broadcast dim nor a static 1. */
static clb_status mask_count(rule_call *c, const clb_shape *mask, const clb_shape *b, const char *what, node **out) {
  clb_expr_t f[CLB_SHAPE_MAX_RANK + 1];
  int nf = 0, exact = 1;
  for (int i = 0; i < b->rank && exact; i++) {
    int j = i - (b->rank - mask->rank);
    node *bd, *md = NULL;
    clb_status st = clb__resolve(c->sh, b->dims[i], &bd);
    if (st == CLB_OK && j >= 0) st = clb__resolve(c->sh, mask->dims[j], &md);
    if (st != CLB_OK) return st;
    if (md == bd) continue;
    if (!md || (md->kind == CLB_EXPR_CONST && md->c == 1)) f[nf++] = bd;
    else exact = 0;
  }
  node *upper, *u;
  clb_status st = exact ? numel_of(c->sh, mask->dims, mask->rank, &upper) : numel_of(c->sh, b->dims, b->rank, &upper);
  if (st == CLB_OK) st = count_sym(c, upper, what, 1, &u);
  if (st != CLB_OK) return st;
  if (!exact) {
    *out = u;
    return CLB_OK;
  }
  f[nf++] = u;
  return clb__mul_n(c->sh, f, nf, out);
}

/* masked_select(x, mask): 1-D, as many elements as the broadcast mask has true bits. */
static clb_status rule_masked_select(rule_call *c) {
  clb_shape b;
  clb_status st = broadcast2(c, &c->in[0], &c->in[1], 1, &b);
  if (st != CLB_OK) return st;
  clb_shape s;
  s.rank = 1;
  st = mask_count(c, &c->in[1], &b, "true bits", &s.dims[0]);
  if (st != CLB_OK) return st;
  *c->out = s;
  return CLB_OK;
}

/* masked_scatter(x, mask, source): x's shape; the source must hold at least as
 * many elements as the mask selects, which only the device knows. */
static clb_status rule_masked_scatter(rule_call *c) {
  clb_shape b;
  clb_status st = broadcast2(c, &c->in[0], &c->in[1], 1, &b);
  if (st != CLB_OK) return st;
  for (int i = 0; i < b.rank; i++) {
    char what[96];
    int j = i - (b.rank - c->in[0].rank);
    if (j < 0) return fail(c, CLB_ERR_SHAPE, "the mask has more dims than x (%d > %d)", c->in[1].rank, c->in[0].rank);
    dim_words(c, 1, i - (b.rank - c->in[1].rank), what, sizeof what);
    st = clb_shapes_unify(c->sh, b.dims[i], c->in[0].dims[j], what);
    if (st != CLB_OK) return st;
  }
  node *bits, *numel;
  st = mask_count(c, &c->in[1], &c->in[0], "true bits", &bits);
  if (st == CLB_OK) st = numel_of(c->sh, c->in[2].dims, c->in[2].rank, &numel);
  if (st != CLB_OK) return st;
  char what[160], t1[32], t2[32];
  snprintf(what, sizeof what, "%s: elements of %s >= true bits of %s", c->label, in_name(c, 2, t1, sizeof t1),
           in_name(c, 1, t2, sizeof t2));
  st = clb__check_add(c->sh, CLB_CHECK_GE, numel, bits, what);
  if (st != CLB_OK) return st;
  *c->out = c->in[0];
  return CLB_OK;
}

/* ---- The table -------------------------------------------------------------------------- */

static const struct op_def {
  const char *name;
  int min_in, max_in; /* number of inputs */
  rule_fn rule;
} op_table[CLB_OP_COUNT] = {
    [CLB_OP_UNARY] = {"unary", 1, 1, rule_same},
    [CLB_OP_BINARY] = {"binary", 2, 2, rule_broadcast},
    [CLB_OP_WHERE] = {"where", 3, 3, rule_broadcast},
    [CLB_OP_SUM] = {"sum", 1, 1, rule_reduce},
    [CLB_OP_MEAN] = {"mean", 1, 1, rule_reduce},
    [CLB_OP_MAX] = {"max", 1, 1, rule_reduce},
    [CLB_OP_MATMUL] = {"matmul", 2, 2, rule_matmul},
    [CLB_OP_LINEAR] = {"linear", 2, 3, rule_linear},
    [CLB_OP_RESHAPE] = {"reshape", 1, 1, rule_reshape},
    [CLB_OP_VIEW] = {"view", 1, 1, rule_reshape},
    [CLB_OP_FLATTEN] = {"flatten", 1, 1, rule_flatten},
    [CLB_OP_SQUEEZE] = {"squeeze", 1, 1, rule_squeeze},
    [CLB_OP_UNSQUEEZE] = {"unsqueeze", 1, 1, rule_unsqueeze},
    [CLB_OP_TRANSPOSE] = {"transpose", 1, 1, rule_transpose},
    [CLB_OP_CONCAT] = {"concat", 1, 64, rule_concat},
    [CLB_OP_NONZERO] = {"nonzero", 1, 1, rule_nonzero},
    [CLB_OP_MASKED_SELECT] = {"masked_select", 2, 2, rule_masked_select},
    [CLB_OP_MASKED_SCATTER] = {"masked_scatter", 3, 3, rule_masked_scatter},
};

void clb_op_params_init(clb_op_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->dim2 = -1;
}

const char *clb_op_name(clb_op op) {
  return (int)op >= 0 && op < CLB_OP_COUNT ? op_table[op].name : "unknown";
}

clb_status clb_op_infer(clb_shapes_t sh, clb_op op, const clb_op_params *p, const clb_shape *inputs,
                        const char *const *names, size_t ninputs, clb_shape *out) {
  if (!sh) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_op_infer: sh is NULL");
  if (!out || (!inputs && ninputs)) return clb__shapes_fail(sh, CLB_ERR_NULL, "NULL inputs or out");
  if ((int)op < 0 || op >= CLB_OP_COUNT) return clb__shapes_fail(sh, CLB_ERR_INVALID_ARG, "unknown op %d", (int)op);
  const struct op_def *def = &op_table[op];
  clb_op_params defaults;
  clb_op_params_init(&defaults);
  if (!p) p = &defaults;
  const char *label = p->label ? p->label : def->name;
  if (ninputs < (size_t)def->min_in || ninputs > (size_t)def->max_in)
    return clb__shapes_fail(sh, CLB_ERR_INVALID_ARG, "%s takes %d to %d inputs, got %zu", label, def->min_in,
                            def->max_in, ninputs);
  for (size_t i = 0; i < ninputs; i++) {
    char tmp[32];
    if (inputs[i].rank < 0 || inputs[i].rank > CLB_SHAPE_MAX_RANK)
      return clb__shapes_fail(sh, CLB_ERR_RANK, "%s: %s has rank %d", label,
                              clb__input_name(names, i, tmp, sizeof tmp), inputs[i].rank);
    for (int j = 0; j < inputs[i].rank; j++)
      if (!inputs[i].dims[j])
        return clb__shapes_fail(sh, CLB_ERR_NULL, "%s: dim %d of %s is NULL", label, j,
                                clb__input_name(names, i, tmp, sizeof tmp));
  }
  rule_call c = {sh, p, inputs, names, ninputs, label, out};
  clb_shape s;
  c.out = &s;
  clb_status st = def->rule(&c);
  if (st != CLB_OK) return st;
  /* Unification may have bound symbols of the result: give it in resolved form. */
  for (int i = 0; i < s.rank; i++) {
    st = clb__resolve(sh, s.dims[i], &s.dims[i]);
    if (st != CLB_OK) return st;
  }
  *out = s;
  return CLB_OK;
}

/* ---- Shapes --------------------------------------------------------------------------- */

clb_status clb_shape_static(clb_shapes_t sh, int rank, const int64_t *dims, clb_shape *out) {
  if (!sh) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_shape_static: sh is NULL");
  if (!out || (!dims && rank > 0)) return clb__shapes_fail(sh, CLB_ERR_NULL, "NULL dims or out");
  if (rank < 0 || rank > CLB_SHAPE_MAX_RANK) return clb__shapes_fail(sh, CLB_ERR_RANK, "rank %d outside 0..8", rank);
  clb_shape s;
  s.rank = rank;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0) return clb__shapes_fail(sh, CLB_ERR_INVALID_ARG, "dim %d is %lld", i, (long long)dims[i]);
    clb_status st = clb_expr_const(sh, dims[i], &s.dims[i]);
    if (st != CLB_OK) return st;
  }
  *out = s;
  return CLB_OK;
}

clb_status clb_shape_numel(clb_shapes_t sh, const clb_shape *s, clb_expr_t *out) {
  if (!sh) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_shape_numel: sh is NULL");
  if (!s || !out) return clb__shapes_fail(sh, CLB_ERR_NULL, "NULL shape or out");
  if (s->rank < 0 || s->rank > CLB_SHAPE_MAX_RANK) return clb__shapes_fail(sh, CLB_ERR_RANK, "rank %d", s->rank);
  for (int i = 0; i < s->rank; i++)
    if (!s->dims[i]) return clb__shapes_fail(sh, CLB_ERR_NULL, "dim %d is NULL", i);
  return numel_of(sh, s->dims, s->rank, out);
}
