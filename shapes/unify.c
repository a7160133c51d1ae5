/* unify.c: union-find over symbols (s4 == s6), contradictions in words, deferred checks and broadcasting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shapes-impl.h"

typedef const struct clb_expr node;

/* ---- Deferred checks ------------------------------------------------------------------ */

clb_status clb__check_add(struct clb_shapes *sh, clb_check_kind kind, node *a, node *b, const char *what) {
  for (size_t i = 0; i < sh->nchecks; i++) /* the same assumption once */
    if (sh->checks[i].kind == kind && sh->checks[i].a == a && sh->checks[i].b == b) return CLB_OK;
  if (sh->nchecks == sh->capchecks) {
    size_t cap = sh->capchecks ? 2 * sh->capchecks : 8;
    clb_check *c = realloc(sh->checks, cap * sizeof *c);
    if (!c) return clb__shapes_fail(sh, CLB_ERR_HOST_OOM, "out of host memory");
    sh->checks = c;
    sh->capchecks = cap;
  }
  clb_check *c = &sh->checks[sh->nchecks];
  c->kind = kind;
  c->a = a;
  c->b = b;
  c->what = clb__arena_strdup(sh, what ? what : "");
  c->on_device = clb__has_unbacked(sh, a) || clb__has_unbacked(sh, b);
  if (!c->what) return clb__shapes_fail(sh, CLB_ERR_HOST_OOM, "out of host memory");
  sh->nchecks++;
  return CLB_OK;
}

size_t clb_shapes_check_count(clb_shapes_t sh) { return sh ? sh->nchecks : 0; }

const clb_check *clb_shapes_check_at(clb_shapes_t sh, size_t i) {
  return sh && i < sh->nchecks ? &sh->checks[i] : NULL;
}

/* "g1*g2 = 12", or "4" for a constant. */
static void valued(struct clb_shapes *sh, node *e, int64_t v, char *buf, size_t size) {
  const char *t = clb_expr_str(sh, e);
  if (e->kind == CLB_EXPR_CONST) snprintf(buf, size, "%lld", (long long)v);
  else snprintf(buf, size, "%s = %lld", t ? t : "?", (long long)v);
}

clb_status clb_shapes_check_eval(clb_shapes_t sh, const clb_binding *b, size_t n, size_t *skipped) {
  if (!sh) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_shapes_check_eval: sh is NULL");
  if (!b && n) return clb__shapes_fail(sh, CLB_ERR_NULL, "NULL bindings");
  size_t skip = 0;
  for (size_t i = 0; i < sh->nchecks; i++) {
    const clb_check *c = &sh->checks[i];
    int64_t va, vb;
    clb_status st = clb__eval(sh, c->a, b, n, &va);
    if (st == CLB_OK) st = clb__eval(sh, c->b, b, n, &vb);
    if (st == CLB_ERR_INVALID_ARG) {
      skip++;
      continue;
    }
    if (st != CLB_OK) return st;
    int ok = c->kind == CLB_CHECK_EQ ? va == vb : c->kind == CLB_CHECK_GE ? va >= vb : (va == vb || va == 1 || vb == 1) && !(va + vb == 1);
    if (!ok) {
      char sa[200], sb[200];
      valued(sh, c->a, va, sa, sizeof sa);
      valued(sh, c->b, vb, sb, sizeof sb);
      const char *rel = c->kind == CLB_CHECK_EQ ? "!=" : c->kind == CLB_CHECK_GE ? "<" : "does not broadcast with";
      if (skipped) *skipped = skip;
      return clb__shapes_fail(sh, CLB_ERR_DEVICE_CHECK, "%s: %s %s %s", c->what, sa, rel, sb);
    }
  }
  if (skipped) *skipped = skip;
  return CLB_OK;
}

/* ---- Words ------------------------------------------------------------------------ */

/* "s4 = 3", "3", "10*s0 = 30", or "s4 in [1, 8]". */
static void side(struct clb_shapes *sh, node *x, node *r, char *buf, size_t size) {
  const char *t = clb_expr_str(sh, x);
  if (!t) t = "?";
  if (r->kind == CLB_EXPR_CONST) {
    if (x == r) snprintf(buf, size, "%lld", (long long)r->c);
    else snprintf(buf, size, "%s = %lld", t, (long long)r->c);
  } else {
    snprintf(buf, size, "%s in [%lld, %lld]", t, (long long)r->min, (long long)r->max);
  }
}

static clb_status contradiction(struct clb_shapes *sh, const char *what, node *a, node *ra, node *b, node *rb,
                                const char *why) {
  char sa[200], sb[200];
  side(sh, a, ra, sa, sizeof sa);
  side(sh, b, rb, sb, sizeof sb);
  return clb__shapes_fail(sh, CLB_ERR_CONTRADICTION, "%s: %s vs %s%s%s", what, sa, sb, why ? ": " : "", why ? why : "");
}

/* ---- Union-find --------------------------------------------------------------------- */

static int occurs(node *e, node *sym) {
  if (e == sym) return 1;
  for (int i = 0; i < e->nargs; i++)
    if (occurs(e->args[i], sym)) return 1;
  return 0;
}

static void link_sym(struct clb_shapes *sh, node *sym, node *to) {
  clb__sym_of(sh, sym)->link = to;
  sh->nlinks++;
}

/* x == r1 (mod d1) and x == r2 (mod d2) as one congruence; 1 if impossible. Very
 * large combined divisors keep the first congruence (a weaker, still true fact). */
static int combine_mod(int64_t d1, int64_t r1, int64_t d2, int64_t r2, int64_t *d, int64_t *r) {
  int64_t g = clb__gcd(d1, d2);
  if (clb__fmod(r1 - r2, g) != 0) return 1;
  int64_t l;
  if (clb__ck_mul(d1 / g, d2, &l) || d2 / g > 1000000) {
    *d = d1;
    *r = r1;
    return 0;
  }
  int64_t x = r1;
  for (int64_t k = 0; k < d2 / g; k++, x += d1)
    if (clb__fmod(x, d2) == r2) break;
  *d = l;
  *r = clb__fmod(x, l);
  return 0;
}

/* Narrows [lo, hi] to values == r (mod d); 1 if empty. */
static int tighten(int64_t *lo, int64_t *hi, int64_t d, int64_t r) {
  if (d > 1) {
    int64_t a = *lo + clb__fmod(r - clb__fmod(*lo, d), d);
    int64_t b = *hi - clb__fmod(clb__fmod(*hi, d) - r, d);
    if (a < *lo || b > *hi) return 1;
    *lo = a;
    *hi = b;
  }
  return *lo > *hi;
}

/* Makes the class of representative symbol x be [lo, hi] with x % d == r. */
static clb_status narrow(struct clb_shapes *sh, node *x, int64_t lo, int64_t hi, int64_t d, int64_t r,
                         const char *what, node *a, node *ra, node *b, node *rb) {
  if (tighten(&lo, &hi, d, r)) return contradiction(sh, what, a, ra, b, rb, "no common value");
  clb__sym *s = clb__sym_of(sh, x);
  s->divisor = d;
  s->remainder = r;
  if (lo == hi) {
    node *c;
    clb_status st = clb__intern(sh, CLB_EXPR_CONST, lo, NULL, 0, lo, lo, &c);
    if (st == CLB_OK) link_sym(sh, x, c);
    return st;
  }
  struct clb_expr *m = (struct clb_expr *)x;
  m->min = lo;
  m->max = hi;
  return CLB_OK;
}

/* Symbol x (a representative) equals e (a constant or an expression without x). */
static clb_status bind(struct clb_shapes *sh, node *x, node *e, const char *what, node *a, node *ra, node *b, node *rb) {
  clb__sym *s = clb__sym_of(sh, x);
  if (e->kind == CLB_EXPR_CONST) {
    if (e->c < x->min || e->c > x->max) return contradiction(sh, what, a, ra, b, rb, "ranges do not overlap");
    if (s->divisor > 1 && clb__fmod(e->c, s->divisor) != s->remainder) {
      char why[96];
      snprintf(why, sizeof why, "%lld is not %lld mod %lld", (long long)e->c, (long long)s->remainder,
               (long long)s->divisor);
      return contradiction(sh, what, a, ra, b, rb, why);
    }
    link_sym(sh, x, e);
    return CLB_OK;
  }
  clb_status st = CLB_OK;
  /* e = k*t + c0 with t a symbol: x's range narrows t, exactly. */
  node *t = NULL;
  int64_t k = 0, c0 = 0;
  if (e->kind == CLB_EXPR_SYM) t = e, k = 1;
  else if (e->kind == CLB_EXPR_MUL && e->nargs == 1 && e->args[0]->kind == CLB_EXPR_SYM) t = e->args[0], k = e->c;
  else if (e->kind == CLB_EXPR_ADD && e->nargs == 1) {
    node *u = e->args[0];
    c0 = e->c;
    if (u->kind == CLB_EXPR_SYM) t = u, k = 1;
    else if (u->kind == CLB_EXPR_MUL && u->nargs == 1 && u->args[0]->kind == CLB_EXPR_SYM) t = u->args[0], k = u->c;
  }
  if (e->min < x->min || e->max > x->max) {
    if (t && x->min > INT64_MIN / 2 && x->max < INT64_MAX / 2 && c0 > INT64_MIN / 2 && c0 < INT64_MAX / 2) {
      int64_t lo = x->min - c0, hi = x->max - c0; /* k*t in [lo, hi] */
      int64_t tlo = k > 0 ? -clb__fdiv(-lo, k) : -clb__fdiv(hi, -k);
      int64_t thi = k > 0 ? clb__fdiv(hi, k) : clb__fdiv(-lo, -k);
      if (tlo < t->min) tlo = t->min;
      if (thi > t->max) thi = t->max;
      clb__sym *ts = clb__sym_of(sh, t);
      st = narrow(sh, t, tlo, thi, ts->divisor, ts->remainder, what, a, ra, b, rb);
    } else {
      node *c;
      if (e->min < x->min) {
        st = clb__intern(sh, CLB_EXPR_CONST, x->min, NULL, 0, x->min, x->min, &c);
        if (st == CLB_OK) st = clb__check_add(sh, CLB_CHECK_GE, e, c, what);
      }
      if (st == CLB_OK && e->max > x->max) {
        st = clb__intern(sh, CLB_EXPR_CONST, x->max, NULL, 0, x->max, x->max, &c);
        if (st == CLB_OK) st = clb__check_add(sh, CLB_CHECK_GE, c, e, what);
      }
    }
    if (st != CLB_OK) return st;
  }
  if (s->divisor > 1) { /* e must keep x's congruence */
    node *d, *m, *rem;
    st = clb__intern(sh, CLB_EXPR_CONST, s->divisor, NULL, 0, s->divisor, s->divisor, &d);
    if (st == CLB_OK) st = clb_expr_mod(sh, e, d, &m);
    if (st != CLB_OK) return st;
    if (m->kind == CLB_EXPR_CONST && m->c != s->remainder) {
      char why[96];
      snprintf(why, sizeof why, "the right side is %lld mod %lld, not %lld", (long long)m->c, (long long)s->divisor,
               (long long)s->remainder);
      return contradiction(sh, what, a, ra, b, rb, why);
    }
    if (m->kind != CLB_EXPR_CONST) {
      st = clb__intern(sh, CLB_EXPR_CONST, s->remainder, NULL, 0, s->remainder, s->remainder, &rem);
      if (st == CLB_OK) st = clb__check_add(sh, CLB_CHECK_EQ, m, rem, what);
      if (st != CLB_OK) return st;
    }
  }
  link_sym(sh, x, e);
  return CLB_OK;
}

static clb_status merge_syms(struct clb_shapes *sh, node *x, node *y, const char *what, node *a, node *ra, node *b,
                             node *rb) {
  /* The representative: a backed symbol over a data-dependent one, else the older. */
  if ((x->unbacked && !y->unbacked) || (x->unbacked == y->unbacked && y->c < x->c)) {
    node *t = x;
    x = y;
    y = t;
  }
  clb__sym *sx = clb__sym_of(sh, x), *sy = clb__sym_of(sh, y);
  int64_t d, r;
  if (combine_mod(sx->divisor, sx->remainder, sy->divisor, sy->remainder, &d, &r)) {
    char why[128];
    snprintf(why, sizeof why, "%lld mod %lld vs %lld mod %lld", (long long)sx->remainder, (long long)sx->divisor,
             (long long)sy->remainder, (long long)sy->divisor);
    return contradiction(sh, what, a, ra, b, rb, why);
  }
  int64_t lo = x->min > y->min ? x->min : y->min, hi = x->max < y->max ? x->max : y->max;
  link_sym(sh, y, x);
  return narrow(sh, x, lo, hi, d, r, what, a, ra, b, rb);
}

/* Neither side is a symbol: solve d = ra - rb = 0 for a symbol when that is exact. */
static clb_status solve(struct clb_shapes *sh, const char *what, node *a, node *ra, node *b, node *rb) {
  node *d, *neg;
  clb_status st = clb_expr_sub(sh, ra, rb, &d);
  if (st != CLB_OK) return st;
  if (d->kind == CLB_EXPR_CONST) return d->c == 0 ? CLB_OK : contradiction(sh, what, a, ra, b, rb, NULL);
  if (d->min > 0 || d->max < 0) return contradiction(sh, what, a, ra, b, rb, "never equal");
  int nt = d->kind == CLB_EXPR_ADD ? d->nargs : 1;
  int64_t k0 = d->kind == CLB_EXPR_ADD ? d->c : 0;
  for (int i = 0; i < nt; i++) {
    node *t = d->kind == CLB_EXPR_ADD ? d->args[i] : d;
    node *sym = NULL;
    int64_t coef = 1;
    if (t->kind == CLB_EXPR_SYM) sym = t;
    else if (t->kind == CLB_EXPR_MUL && t->nargs == 1 && t->args[0]->kind == CLB_EXPR_SYM) sym = t->args[0], coef = t->c;
    if (!sym) continue;
    if (coef == 1 || coef == -1) {
      /* sym = -(d - coef*sym) / coef, when sym is not in the rest. */
      node *rest;
      st = clb_expr_sub(sh, d, t, &rest);
      if (st != CLB_OK) return st;
      if (occurs(rest, sym)) continue;
      st = clb__scale(sh, rest, -coef, &neg);
      if (st != CLB_OK) return st;
      if (neg->kind == CLB_EXPR_SYM) return merge_syms(sh, sym, neg, what, a, ra, b, rb);
      return bind(sh, sym, neg, what, a, ra, b, rb);
    }
    if (nt == 1) { /* coef*sym + k0 == 0 */
      if (k0 % coef != 0) return contradiction(sh, what, a, ra, b, rb, "no integer solution");
      node *c;
      st = clb__intern(sh, CLB_EXPR_CONST, -k0 / coef, NULL, 0, -k0 / coef, -k0 / coef, &c);
      if (st != CLB_OK) return st;
      return bind(sh, sym, c, what, a, ra, b, rb);
    }
  }
  return clb__check_add(sh, CLB_CHECK_EQ, ra, rb, what); /* cannot be proved on the host */
}

static clb_status unify_resolved(struct clb_shapes *sh, node *a, node *ra, node *b, node *rb, const char *what) {
  if (ra == rb) return CLB_OK;
  if (ra->kind == CLB_EXPR_CONST && rb->kind == CLB_EXPR_CONST) return contradiction(sh, what, a, ra, b, rb, NULL);
  if (ra->max < rb->min || rb->max < ra->min) return contradiction(sh, what, a, ra, b, rb, "ranges do not overlap");
  int dev = clb__has_unbacked(sh, ra) || clb__has_unbacked(sh, rb);
  clb_status st;
  if (ra->kind == CLB_EXPR_SYM && rb->kind == CLB_EXPR_SYM) st = merge_syms(sh, ra, rb, what, a, ra, b, rb);
  else if (ra->kind == CLB_EXPR_SYM && !occurs(rb, ra)) st = bind(sh, ra, rb, what, a, ra, b, rb);
  else if (rb->kind == CLB_EXPR_SYM && !occurs(ra, rb)) st = bind(sh, rb, ra, what, a, ra, b, rb);
  else return solve(sh, what, a, ra, b, rb);
  /* A data-dependent equality is assumed on the host and verified on the device. */
  if (st == CLB_OK && dev) st = clb__check_add(sh, CLB_CHECK_EQ, ra, rb, what);
  return st;
}

clb_status clb_shapes_unify(clb_shapes_t sh, clb_expr_t a, clb_expr_t b, const char *what) {
  if (!sh) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_shapes_unify: sh is NULL");
  if (!a || !b) return clb__shapes_fail(sh, CLB_ERR_NULL, "NULL expression");
  if (!what) what = "unify";
  node *ra, *rb;
  clb_status st = clb__resolve(sh, a, &ra);
  if (st == CLB_OK) st = clb__resolve(sh, b, &rb);
  if (st != CLB_OK) return st;
  return unify_resolved(sh, a, ra, b, rb, what);
}

/* ---- Broadcasting ------------------------------------------------------------------- */

clb_status clb_shapes_broadcast(clb_shapes_t sh, clb_expr_t a, clb_expr_t b, const char *what, clb_expr_t *out) {
  if (!sh) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_shapes_broadcast: sh is NULL");
  if (!a || !b || !out) return clb__shapes_fail(sh, CLB_ERR_NULL, "NULL expression or out");
  if (!what) what = "broadcast";
  node *ra, *rb;
  clb_status st = clb__resolve(sh, a, &ra);
  if (st == CLB_OK) st = clb__resolve(sh, b, &rb);
  if (st != CLB_OK) return st;
  if (ra == rb || (rb->kind == CLB_EXPR_CONST && rb->c == 1)) {
    *out = ra;
    return CLB_OK;
  }
  if (ra->kind == CLB_EXPR_CONST && ra->c == 1) {
    *out = rb;
    return CLB_OK;
  }
  if ((ra->min > 1 && rb->min > 1) || (ra->kind == CLB_EXPR_CONST && rb->kind == CLB_EXPR_CONST)) {
    st = unify_resolved(sh, a, ra, b, rb, what);
    if (st == CLB_OK) st = clb__resolve(sh, ra, out);
    return st;
  }
  /* One side may be 1: the result is the larger, checked where it is known. */
  st = clb_expr_max(sh, ra, rb, out);
  if (st == CLB_OK) st = clb__check_add(sh, CLB_CHECK_BROADCAST, ra, rb, what);
  return st;
}
