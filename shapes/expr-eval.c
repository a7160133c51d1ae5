/* expr-eval.c: evaluation of expressions under checked symbol bindings, and rewriting them through unification classes. */
#include <stdlib.h>

#include "shapes-impl.h"

typedef const struct clb_expr node;

node *clb__sym_find(struct clb_shapes *sh, node *sym) {
  node *cur = sym;
  while (cur->kind == CLB_EXPR_SYM && clb__sym_of(sh, cur)->link) cur = clb__sym_of(sh, cur)->link;
  /* Path compression: every symbol on the way now links to the end. */
  node *x = sym;
  while (x != cur && x->kind == CLB_EXPR_SYM && clb__sym_of(sh, x)->link) {
    clb__sym *s = clb__sym_of(sh, x);
    x = s->link;
    s->link = cur;
  }
  return cur;
}

static node *find(struct clb_shapes *sh, node *e) {
  return (e->kind == CLB_EXPR_SYM && sh->nlinks) ? clb__sym_find(sh, e) : e;
}

int clb__has_unbacked(struct clb_shapes *sh, node *e) {
  if (e->kind == CLB_EXPR_SYM) {
    node *f = find(sh, e);
    return e->unbacked || (f != e && clb__has_unbacked(sh, f));
  }
  for (int i = 0; i < e->nargs; i++)
    if (clb__has_unbacked(sh, e->args[i])) return 1;
  return 0;
}

/* ---- Resolution ------------------------------------------------------------------- */

static clb_status rebuild(struct clb_shapes *sh, node *e, node **args, node **out) {
  switch (e->kind) {
  case CLB_EXPR_ADD:
  case CLB_EXPR_MUL: {
    node *c;
    clb_status st = clb__intern(sh, CLB_EXPR_CONST, e->c, NULL, 0, e->c, e->c, &c);
    if (st != CLB_OK) return st;
    args[e->nargs] = c;
    return e->kind == CLB_EXPR_ADD ? clb__add_n(sh, args, e->nargs + 1, out) : clb__mul_n(sh, args, e->nargs + 1, out);
  }
  case CLB_EXPR_FLOORDIV: return clb_expr_floordiv(sh, args[0], args[1], out);
  case CLB_EXPR_MOD: return clb_expr_mod(sh, args[0], args[1], out);
  default: return clb__minmax_n(sh, e->kind, args, e->nargs, out);
  }
}

clb_status clb__resolve(struct clb_shapes *sh, node *e, node **out) {
  if (!sh->nlinks || e->kind == CLB_EXPR_CONST) {
    *out = e;
    return CLB_OK;
  }
  if (e->kind == CLB_EXPR_SYM) {
    node *f = clb__sym_find(sh, e);
    if (f->kind == CLB_EXPR_SYM || f->kind == CLB_EXPR_CONST) {
      *out = f;
      return CLB_OK;
    }
    return clb__resolve(sh, f, out);
  }
  node **args = malloc((size_t)(e->nargs + 1) * sizeof *args);
  if (!args) return clb__shapes_fail(sh, CLB_ERR_HOST_OOM, "out of host memory");
  int changed = 0;
  clb_status st = CLB_OK;
  for (int i = 0; i < e->nargs && st == CLB_OK; i++) {
    st = clb__resolve(sh, e->args[i], &args[i]);
    changed |= args[i] != e->args[i];
  }
  if (st == CLB_OK) {
    if (changed) st = rebuild(sh, e, args, out);
    else *out = e;
  }
  free(args);
  return st;
}

clb_status clb_shapes_resolve(clb_shapes_t sh, clb_expr_t e, clb_expr_t *out) {
  if (!sh) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_shapes_resolve: sh is NULL");
  if (!e || !out) return clb__shapes_fail(sh, CLB_ERR_NULL, "NULL expression or out");
  return clb__resolve(sh, e, out);
}

/* ---- Evaluation --------------------------------------------------------------------- */

typedef struct env {
  const clb_binding *b;
  size_t n;
  int missing; /* set when a symbol had no binding */
} env;

static clb_status eval(struct clb_shapes *sh, node *e, env *v, int64_t *out);

static clb_status eval_sym(struct clb_shapes *sh, node *e, env *v, int64_t *out) {
  for (size_t i = 0; i < v->n; i++)
    if (v->b[i].sym == e) {
      *out = v->b[i].value;
      return CLB_OK;
    }
  node *f = find(sh, e);
  for (size_t i = 0; i < v->n && sh->nlinks; i++)
    if (v->b[i].sym->kind == CLB_EXPR_SYM && find(sh, v->b[i].sym) == f) {
      *out = v->b[i].value;
      return CLB_OK;
    }
  if (f->kind == CLB_EXPR_CONST) {
    *out = f->c;
    return CLB_OK;
  }
  if (f->kind != CLB_EXPR_SYM) return eval(sh, f, v, out);
  v->missing = 1;
  if (f != e) return clb__shapes_fail(sh, CLB_ERR_INVALID_ARG, "no binding for %s (or %s)", e->name, f->name);
  return clb__shapes_fail(sh, CLB_ERR_INVALID_ARG, "no binding for %s", e->name);
}

static clb_status eval(struct clb_shapes *sh, node *e, env *v, int64_t *out) {
  int64_t x = 0, y = 0; /* min/max nodes have at least one argument; gcc's -Wmaybe-uninitialized cannot tell */
  clb_status st;
  switch (e->kind) {
  case CLB_EXPR_CONST:
    *out = e->c;
    return CLB_OK;
  case CLB_EXPR_SYM: return eval_sym(sh, e, v, out);
  case CLB_EXPR_ADD:
  case CLB_EXPR_MUL:
    x = e->c;
    for (int i = 0; i < e->nargs; i++) {
      if ((st = eval(sh, e->args[i], v, &y)) != CLB_OK) return st;
      if (e->kind == CLB_EXPR_ADD ? clb__ck_add(x, y, &x) : clb__ck_mul(x, y, &x))
        return clb__shapes_fail(sh, CLB_ERR_OUT_OF_BOUNDS, "integer overflow evaluating %s",
                                e->kind == CLB_EXPR_ADD ? "a sum" : "a product");
    }
    *out = x;
    return CLB_OK;
  case CLB_EXPR_FLOORDIV:
  case CLB_EXPR_MOD:
    if ((st = eval(sh, e->args[0], v, &x)) != CLB_OK || (st = eval(sh, e->args[1], v, &y)) != CLB_OK) return st;
    if (y < 1) return clb__shapes_fail(sh, CLB_ERR_DIV_ZERO, "divisor evaluated to %lld", (long long)y);
    *out = e->kind == CLB_EXPR_FLOORDIV ? clb__fdiv(x, y) : clb__fmod(x, y);
    return CLB_OK;
  case CLB_EXPR_MIN:
  case CLB_EXPR_MAX:
    for (int i = 0; i < e->nargs; i++) {
      if ((st = eval(sh, e->args[i], v, &y)) != CLB_OK) return st;
      if (i == 0 || (e->kind == CLB_EXPR_MIN ? y < x : y > x)) x = y;
    }
    *out = x;
    return CLB_OK;
  }
  return clb__shapes_fail(sh, CLB_ERR_INTERNAL, "unknown node kind %d", (int)e->kind);
}

static clb_status bad(struct clb_shapes *sh, const char *fmt, const char *name, int64_t v, int64_t a, int64_t b) {
  return clb__shapes_fail(sh, CLB_ERR_OUT_OF_BOUNDS, fmt, name, (long long)v, (long long)a, (long long)b);
}

/* Checks every binding against its symbol and its class. */
static clb_status validate(struct clb_shapes *sh, env *v) {
  for (size_t i = 0; i < v->n; i++) {
    node *x = v->b[i].sym;
    int64_t val = v->b[i].value;
    if (!x) return clb__shapes_fail(sh, CLB_ERR_NULL, "binding %zu has no symbol", i);
    if (x->kind == CLB_EXPR_CONST) {
      if (val != x->c)
        return clb__shapes_fail(sh, CLB_ERR_OUT_OF_BOUNDS, "binding %zu: %lld for a symbol fixed at %lld", i,
                                (long long)val, (long long)x->c);
      continue;
    }
    if (x->kind != CLB_EXPR_SYM) return clb__shapes_fail(sh, CLB_ERR_SHAPE, "binding %zu is not a symbol", i);
    clb__sym *s = clb__sym_of(sh, x);
    if (val < x->min || val > x->max) return bad(sh, "%s = %lld outside [%lld, %lld]", x->name, val, x->min, x->max);
    if (s->divisor > 1 && clb__fmod(val, s->divisor) != s->remainder)
      return bad(sh, "%s = %lld is not %lld mod %lld", x->name, val, s->remainder, s->divisor);
    node *f = find(sh, x);
    if (f->kind == CLB_EXPR_CONST && f->c != val)
      return clb__shapes_fail(sh, CLB_ERR_OUT_OF_BOUNDS, "%s = %lld but unification fixed it at %lld", x->name,
                              (long long)val, (long long)f->c);
    if (f->kind == CLB_EXPR_SYM && f != x) {
      clb__sym *r = clb__sym_of(sh, f);
      if (val < f->min || val > f->max)
        return bad(sh, "%s = %lld outside [%lld, %lld], the range of its unified class", x->name, val, f->min, f->max);
      if (r->divisor > 1 && clb__fmod(val, r->divisor) != r->remainder)
        return bad(sh, "%s = %lld is not %lld mod %lld, as its unified class requires", x->name, val, r->remainder,
                   r->divisor);
    }
    for (size_t j = 0; j < i; j++)
      if (v->b[j].sym && v->b[j].sym->kind == CLB_EXPR_SYM && find(sh, v->b[j].sym) == f && v->b[j].value != val)
        return clb__shapes_fail(sh, CLB_ERR_OUT_OF_BOUNDS, "%s = %lld vs %s = %lld: unified, so they must be equal",
                                v->b[j].sym->name, (long long)v->b[j].value, x->name, (long long)val);
  }
  /* A symbol bound to an expression must agree with it where it can be computed. */
  for (size_t i = 0; i < v->n; i++) {
    node *x = v->b[i].sym;
    if (x->kind != CLB_EXPR_SYM) continue;
    node *f = find(sh, x);
    if (f->kind == CLB_EXPR_SYM || f->kind == CLB_EXPR_CONST) continue;
    env w = {v->b, v->n, 0};
    int64_t got;
    /* Evaluate the expression's structure, not the binding of the class. */
    clb_status st = eval(sh, f, &w, &got);
    if (st != CLB_OK && w.missing) continue;
    if (st != CLB_OK) return st;
    if (got != v->b[i].value) {
      const char *t = clb_expr_str(sh, f);
      return clb__shapes_fail(sh, CLB_ERR_OUT_OF_BOUNDS, "%s = %lld but unification made it %s = %lld", x->name,
                              (long long)v->b[i].value, t ? t : "?", (long long)got);
    }
  }
  return CLB_OK;
}

clb_status clb__eval(struct clb_shapes *sh, node *e, const clb_binding *b, size_t n, int64_t *out) {
  env v = {b, n, 0};
  clb_status st = validate(sh, &v);
  if (st != CLB_OK) return st;
  return eval(sh, e, &v, out);
}

clb_status clb_expr_eval(clb_shapes_t sh, clb_expr_t e, const clb_binding *b, size_t n, int64_t *out) {
  if (!sh) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_expr_eval: sh is NULL");
  if (!e || !out || (!b && n)) return clb__shapes_fail(sh, CLB_ERR_NULL, "NULL expression, bindings or out");
  return clb__eval(sh, e, b, n, out);
}
