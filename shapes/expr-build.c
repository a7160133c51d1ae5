/* expr-build.c: canonical constructors of expressions (sums, products, floor division, modulo, min, max) with their ranges. */
#include <stdlib.h>
#include <string.h>

#include "shapes-impl.h"

typedef const struct clb_expr node;

/* A term of a sum: coef * base, base neither a constant, a sum, nor a product
 * with a coefficient other than 1. */
typedef struct term {
  int64_t coef;
  node *base;
} term;

static clb_status overflow(struct clb_shapes *sh, const char *op) {
  return clb__shapes_fail(sh, CLB_ERR_OUT_OF_BOUNDS, "integer overflow in %s: a constant or coefficient passed the int64 limits", op);
}

static clb_status oom(struct clb_shapes *sh) { return clb__shapes_fail(sh, CLB_ERR_HOST_OOM, "out of host memory"); }

static clb_status mk_const(struct clb_shapes *sh, int64_t v, node **out) {
  return clb__intern(sh, CLB_EXPR_CONST, v, NULL, 0, v, v, out);
}

/* [lo, hi] * [a, b], saturated. */
static void range_mul(int64_t lo, int64_t hi, int64_t a, int64_t b, int64_t *rlo, int64_t *rhi) {
  int64_t p[4] = {clb__sat_mul(lo, a), clb__sat_mul(lo, b), clb__sat_mul(hi, a), clb__sat_mul(hi, b)};
  *rlo = *rhi = p[0];
  for (int i = 1; i < 4; i++) {
    if (p[i] < *rlo) *rlo = p[i];
    if (p[i] > *rhi) *rhi = p[i];
  }
}

static int cmp_nodes(const void *x, const void *y) { return clb__expr_cmp(*(node *const *)x, *(node *const *)y); }

static int cmp_terms(const void *x, const void *y) {
  return clb__expr_cmp(((const term *)x)->base, ((const term *)y)->base);
}

/* Interns coef * f[0] * ... * f[n-1] for sorted non-constant, non-product factors. */
static clb_status mk_mul(struct clb_shapes *sh, int64_t coef, node *const *f, int n, node **out) {
  if (coef == 0 || n == 0) return mk_const(sh, n == 0 ? coef : 0, out);
  if (coef == 1 && n == 1) {
    *out = f[0];
    return CLB_OK;
  }
  int64_t lo = coef, hi = coef;
  for (int i = 0; i < n; i++) range_mul(lo, hi, f[i]->min, f[i]->max, &lo, &hi);
  return clb__intern(sh, CLB_EXPR_MUL, coef, f, n, lo, hi, out);
}

static clb_status mul_factors(struct clb_shapes *sh, int64_t coef, node *const *f, int n, node **out);

static clb_status linear(struct clb_shapes *sh, node *x, term **terms, int *n, int64_t *k);
static clb_status build_sum(struct clb_shapes *sh, term *t, int n, int64_t k, node **out);

/* The content of a sum: s == *c * *prim, where *prim's coefficients and constant
 * have no common divisor and its first term is positive. A product of sums is
 * canonical when every sum in it is primitive except the first (in sorted order),
 * which carries the product's coefficient: so c*x*S == x*(c*S) has one form, and
 * x*(2a + 2b) + x*(a + b) groups into x*(3a + 3b). */
static clb_status primitive(struct clb_shapes *sh, node *s, int64_t *c, node **prim) {
  term *t;
  int n;
  int64_t k;
  clb_status st = linear(sh, s, &t, &n, &k);
  if (st != CLB_OK) {
    free(t);
    return st;
  }
  int64_t g = k < 0 ? -k : k;
  for (int i = 0; i < n; i++) g = clb__gcd(g, t[i].coef < 0 ? -t[i].coef : t[i].coef);
  if (g == 0) g = 1;
  if (n > 0 && t[0].coef < 0) g = -g;
  *c = g;
  if (g == 1) {
    *prim = s;
    free(t);
    return CLB_OK;
  }
  for (int i = 0; i < n; i++) t[i].coef /= g;
  st = build_sum(sh, t, n, k / g, prim);
  free(t);
  return st;
}

/* f[0..n) with every sum made primitive, its content multiplied into *coef;
 * sorted. g has room for n. Returns whether a sum was found. */
static clb_status primitive_factors(struct clb_shapes *sh, node *const *f, int n, node **g, int64_t *coef, int *any_sum) {
  *any_sum = 0;
  for (int i = 0; i < n; i++) {
    g[i] = f[i];
    if (f[i]->kind != CLB_EXPR_ADD) continue;
    int64_t c;
    clb_status st = primitive(sh, f[i], &c, &g[i]);
    if (st != CLB_OK) return st;
    if (clb__ck_mul(*coef, c, coef)) return overflow(sh, "a product");
    *any_sum = 1;
  }
  qsort(g, (size_t)n, sizeof *g, cmp_nodes);
  return CLB_OK;
}

/* Splits x into coef * base; a product's base has only primitive sums. */
static clb_status split(struct clb_shapes *sh, node *x, term *t) {
  if (x->kind == CLB_EXPR_MUL) {
    node **g = malloc((size_t)x->nargs * sizeof *g);
    if (!g) return oom(sh);
    int64_t coef = x->c;
    int any_sum;
    clb_status st = primitive_factors(sh, x->args, x->nargs, g, &coef, &any_sum);
    if (st == CLB_OK) {
      t->coef = coef;
      if (coef == 1) t->base = x;
      else if (x->nargs == 1) t->base = g[0];
      else st = mk_mul(sh, 1, g, x->nargs, &t->base);
    }
    free(g);
    return st;
  }
  t->coef = 1;
  t->base = x;
  return CLB_OK;
}

/* coef * base for a term base. */
static clb_status term_node(struct clb_shapes *sh, const term *t, node **out) {
  if (t->coef == 1) {
    *out = t->base;
    return CLB_OK;
  }
  if (t->base->kind == CLB_EXPR_MUL) return mul_factors(sh, t->coef, t->base->args, t->base->nargs, out);
  return mk_mul(sh, t->coef, &t->base, 1, out);
}

/* The terms and constant of x seen as a sum; *terms is malloc'ed (caller frees). */
static clb_status linear(struct clb_shapes *sh, node *x, term **terms, int *n, int64_t *k) {
  int cap = x->kind == CLB_EXPR_ADD ? x->nargs : 1;
  *terms = malloc((size_t)cap * sizeof **terms);
  *n = 0;
  *k = 0;
  if (!*terms) return oom(sh);
  if (x->kind == CLB_EXPR_CONST) {
    *k = x->c;
    return CLB_OK;
  }
  if (x->kind == CLB_EXPR_ADD) {
    *k = x->c;
    for (int i = 0; i < x->nargs; i++) {
      clb_status st = split(sh, x->args[i], &(*terms)[(*n)++]);
      if (st != CLB_OK) return st;
    }
    return CLB_OK;
  }
  return split(sh, x, &(*terms)[(*n)++]);
}

/* Builds sum(terms) + k canonically (terms may repeat bases, any order). */
static clb_status build_sum(struct clb_shapes *sh, term *t, int n, int64_t k, node **out) {
  qsort(t, (size_t)n, sizeof *t, cmp_terms);
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (m > 0 && t[m - 1].base == t[i].base) {
      if (clb__ck_add(t[m - 1].coef, t[i].coef, &t[m - 1].coef)) return overflow(sh, "a sum");
    } else {
      t[m++] = t[i];
    }
    if (t[m - 1].coef == 0) m--;
  }
  if (m == 0) return mk_const(sh, k, out);
  if (m == 1 && k == 0) return term_node(sh, &t[0], out);
  node **args = malloc((size_t)m * sizeof *args);
  if (!args) return oom(sh);
  int64_t lo = k, hi = k;
  clb_status st = CLB_OK;
  for (int i = 0; i < m && st == CLB_OK; i++) {
    st = term_node(sh, &t[i], &args[i]);
    if (st == CLB_OK) {
      lo = clb__sat_add(lo, args[i]->min);
      hi = clb__sat_add(hi, args[i]->max);
    }
  }
  if (st == CLB_OK) st = clb__intern(sh, CLB_EXPR_ADD, k, args, m, lo, hi, out);
  free(args);
  return st;
}

clb_status clb__add_n(struct clb_shapes *sh, node *const *xs, int n, node **out) {
  int cap = 0;
  for (int i = 0; i < n; i++) cap += xs[i]->kind == CLB_EXPR_ADD ? xs[i]->nargs : 1;
  term *t = malloc((size_t)(cap ? cap : 1) * sizeof *t);
  if (!t) return oom(sh);
  int nt = 0;
  int64_t k = 0;
  clb_status st = CLB_OK;
  for (int i = 0; i < n && st == CLB_OK; i++) {
    node *x = xs[i];
    if (x->kind == CLB_EXPR_CONST || x->kind == CLB_EXPR_ADD) {
      if (clb__ck_add(k, x->c, &k)) st = overflow(sh, "a sum");
      for (int j = 0; x->kind == CLB_EXPR_ADD && j < x->nargs && st == CLB_OK; j++)
        st = split(sh, x->args[j], &t[nt++]);
    } else {
      st = split(sh, x, &t[nt++]);
    }
  }
  if (st == CLB_OK) st = build_sum(sh, t, nt, k, out);
  free(t);
  return st;
}

clb_status clb__scale(struct clb_shapes *sh, node *x, int64_t k, node **out) {
  if (k == 0) return mk_const(sh, 0, out);
  if (k == 1) {
    *out = x;
    return CLB_OK;
  }
  int64_t v;
  switch (x->kind) {
  case CLB_EXPR_CONST:
    if (clb__ck_mul(x->c, k, &v)) return overflow(sh, "a product");
    return mk_const(sh, v, out);
  case CLB_EXPR_MUL:
    if (clb__ck_mul(x->c, k, &v)) return overflow(sh, "a product");
    return mul_factors(sh, v, x->args, x->nargs, out);
  case CLB_EXPR_ADD: {
    term *t;
    int n;
    int64_t c;
    clb_status st = linear(sh, x, &t, &n, &c);
    for (int i = 0; i < n && st == CLB_OK; i++)
      if (clb__ck_mul(t[i].coef, k, &t[i].coef)) st = overflow(sh, "a product");
    if (st == CLB_OK && clb__ck_mul(c, k, &c)) st = overflow(sh, "a product");
    if (st == CLB_OK) st = build_sum(sh, t, n, c, out);
    free(t);
    return st;
  }
  default:
    return mk_mul(sh, k, &x, 1, out);
  }
}

/* coef * f[0] * ... for non-constant, non-product factors. A coefficient never
 * stands before a sum factor: every sum is made primitive and the coefficient
 * goes into the first sum, so that the printed "5*(a + b)*c" is never needed
 * ("(5*a + 5*b)*c" parses back the same) and equal products are one node. */
static clb_status mul_factors(struct clb_shapes *sh, int64_t coef, node *const *f, int n, node **out) {
  if (n == 1 || coef == 0) return n == 1 ? clb__scale(sh, f[0], coef, out) : mk_const(sh, 0, out);
  node **g = malloc((size_t)n * sizeof *g);
  if (!g) return oom(sh);
  int any_sum;
  clb_status st = primitive_factors(sh, f, n, g, &coef, &any_sum);
  if (st == CLB_OK && (!any_sum || coef == 1)) {
    st = mk_mul(sh, coef, g, n, out);
  } else if (st == CLB_OK) {
    int first = 0;
    while (g[first]->kind != CLB_EXPR_ADD) first++;
    st = clb__scale(sh, g[first], coef, &g[first]);
    if (st == CLB_OK) {
      qsort(g, (size_t)n, sizeof *g, cmp_nodes);
      st = mk_mul(sh, 1, g, n, out);
    }
  }
  free(g);
  return st;
}

clb_status clb__mul_n(struct clb_shapes *sh, node *const *xs, int n, node **out) {
  for (int i = 0; i < n; i++)
    if (xs[i]->kind == CLB_EXPR_CONST && xs[i]->c == 0) return mk_const(sh, 0, out);
  int cap = 0;
  for (int i = 0; i < n; i++) cap += xs[i]->kind == CLB_EXPR_MUL ? xs[i]->nargs : 1;
  node **f = malloc((size_t)(cap ? cap : 1) * sizeof *f);
  if (!f) return oom(sh);
  int nf = 0;
  int64_t c = 1;
  clb_status st = CLB_OK;
  for (int i = 0; i < n && st == CLB_OK; i++) {
    node *x = xs[i];
    if (x->kind == CLB_EXPR_CONST || x->kind == CLB_EXPR_MUL) {
      if (clb__ck_mul(c, x->c, &c)) st = overflow(sh, "a product");
      for (int j = 0; x->kind == CLB_EXPR_MUL && j < x->nargs; j++) f[nf++] = x->args[j];
    } else {
      f[nf++] = x;
    }
  }
  if (st == CLB_OK) {
    if (nf == 0) st = mk_const(sh, c, out);
    else if (nf == 1) st = clb__scale(sh, f[0], c, out); /* distributes a constant over a sum */
    else {
      qsort(f, (size_t)nf, sizeof *f, cmp_nodes);
      st = mul_factors(sh, c, f, nf, out);
    }
  }
  free(f);
  return st;
}

/* ---- Floor division and modulo ---------------------------------------------------- */

/* If term t is an exact multiple of divisor b (a constant, or a monomial whose
 * factors t contains), *q is t / b and the result 1; else 0. */
static int divide_term(struct clb_shapes *sh, const term *t, node *b, node **q, clb_status *st) {
  int64_t bc = 1;
  node *const *bf = &b;
  int nb = 1;
  if (b->kind == CLB_EXPR_CONST) {
    bc = b->c;
    nb = 0;
  } else if (b->kind == CLB_EXPR_MUL) {
    term bt;
    if ((*st = split(sh, b, &bt)) != CLB_OK) return 1;
    bc = bt.coef;
    b = bt.base;
    bf = b->kind == CLB_EXPR_MUL ? b->args : &b;
    nb = b->kind == CLB_EXPR_MUL ? b->nargs : 1;
  }
  if (t->coef % bc != 0) return 0;
  node *const *tf = &t->base;
  int nt = 1;
  if (t->base->kind == CLB_EXPR_MUL) {
    tf = t->base->args;
    nt = t->base->nargs;
  }
  if (nb > nt) return 0;
  node *rest[64];
  int nr = 0, j = 0;
  if (nt > 64) return 0;
  for (int i = 0; i < nt; i++) {
    if (j < nb && tf[i] == bf[j]) j++;
    else rest[nr++] = tf[i];
  }
  if (j < nb) return 0;
  term qt = {t->coef / bc, NULL};
  if (nr == 0) *st = mk_const(sh, qt.coef, q);
  else if (nr == 1) *st = clb__scale(sh, rest[0], qt.coef, q);
  else {
    *st = mk_mul(sh, 1, rest, nr, &qt.base);
    if (*st == CLB_OK) *st = term_node(sh, &qt, q);
  }
  return 1;
}

static clb_status div_check(struct clb_shapes *sh, node *b, const char *op) {
  if (b->min >= 1) return CLB_OK;
  if (b->kind == CLB_EXPR_CONST && b->c == 0) return clb__shapes_fail(sh, CLB_ERR_DIV_ZERO, "%s by zero", op);
  if (b->kind == CLB_EXPR_CONST)
    return clb__shapes_fail(sh, CLB_ERR_DIV_ZERO, "%s by %lld: the divisor must be >= 1", op, (long long)b->c);
  return clb__shapes_fail(sh, CLB_ERR_DIV_ZERO, "%s by an expression in [%lld, %lld]: the divisor must be >= 1", op,
                          (long long)b->min, (long long)b->max);
}

static clb_status floordiv(struct clb_shapes *sh, node *a, node *b, node **out);
static clb_status mod(struct clb_shapes *sh, node *a, node *b, node **out);

/* (sum(t)/g + k/g) for a common divisor g. */
static clb_status divide_all(struct clb_shapes *sh, term *t, int n, int64_t k, int64_t g, node **out) {
  for (int i = 0; i < n; i++) t[i].coef /= g;
  return build_sum(sh, t, n, k / g, out);
}

/* Whether n's range is saturated at an end where a's is not: a rewrite of a into
 * n could overflow int64 on values where a evaluates fine (reducing a negative
 * constant modulo a huge divisor, say), so the rewrite is not made. */
static int overflows_where(const node *n, const node *a) {
  int sat_n = n->min == INT64_MIN || n->max == INT64_MAX;
  int sat_a = a->min == INT64_MIN || a->max == INT64_MAX;
  return sat_n && !sat_a;
}

static clb_status floordiv(struct clb_shapes *sh, node *a, node *b, node **out) {
  clb_status st = div_check(sh, b, "floor division");
  if (st != CLB_OK) return st;
  if (a == b) return mk_const(sh, 1, out);
  if (b->kind == CLB_EXPR_CONST && b->c == 1) {
    *out = a;
    return CLB_OK;
  }
  if (a->kind == CLB_EXPR_CONST && b->kind == CLB_EXPR_CONST) return mk_const(sh, clb__fdiv(a->c, b->c), out);
  term *t;
  int n;
  int64_t k;
  st = linear(sh, a, &t, &n, &k);
  node **q = malloc((size_t)(n + 2) * sizeof *q);
  if (!q) st = oom(sh);
  int nq = 0, nr = 0;
  /* (b*Q + R) // b == Q + R // b for any integer Q. */
  for (int i = 0; i < n && st == CLB_OK; i++) {
    if (!divide_term(sh, &t[i], b, &q[nq], &st)) t[nr++] = t[i];
    else nq++;
  }
  int64_t kq = 0, kr = k;
  if (b->kind == CLB_EXPR_CONST) {
    kq = clb__fdiv(k, b->c);
    kr = clb__fmod(k, b->c);
  }
  int plain = 0; /* a // b as it is, no rewrite */
  if (st == CLB_OK && (nq > 0 || kq != 0)) {
    node *r;
    st = build_sum(sh, t, nr, kr, &r);
    if (st == CLB_OK && overflows_where(r, a)) {
      plain = 1;
      goto generic;
    }
    if (st == CLB_OK) st = floordiv(sh, r, b, &q[nq++]);
    if (st == CLB_OK) st = mk_const(sh, kq, &q[nq++]);
    if (st == CLB_OK) st = clb__add_n(sh, q, nq, out);
    goto done;
  }
  if (st != CLB_OK) goto done;
generic:;
  int64_t lo, hi;
  if (b->kind == CLB_EXPR_CONST) {
    int64_t d = b->c, g = d;
    for (int i = 0; i < n && !plain; i++) g = clb__gcd(g, t[i].coef);
    g = clb__gcd(g, k);
    if (g > 1 && !plain) { /* (g*x) // (g*d) == x // d */
      node *a2, *b2;
      st = divide_all(sh, t, n, k, g, &a2);
      if (st == CLB_OK) st = mk_const(sh, d / g, &b2);
      if (st == CLB_OK) st = floordiv(sh, a2, b2, out);
      goto done;
    }
    int64_t dd;
    if (!plain && a->kind == CLB_EXPR_FLOORDIV && a->args[1]->kind == CLB_EXPR_CONST &&
        !clb__ck_mul(a->args[1]->c, d, &dd)) {
      node *b2; /* (x // d1) // d2 == x // (d1*d2) */
      st = mk_const(sh, dd, &b2);
      if (st == CLB_OK) st = floordiv(sh, a->args[0], b2, out);
      goto done;
    }
    lo = clb__fdiv(a->min, d);
    hi = clb__fdiv(a->max, d);
  } else {
    if (a->min >= 0 && a->max < b->min) {
      st = mk_const(sh, 0, out);
      goto done;
    }
    int64_t c4[4] = {clb__fdiv(a->min, b->min), clb__fdiv(a->min, b->max), clb__fdiv(a->max, b->min),
                     clb__fdiv(a->max, b->max)};
    lo = hi = c4[0];
    for (int i = 1; i < 4; i++) {
      if (c4[i] < lo) lo = c4[i];
      if (c4[i] > hi) hi = c4[i];
    }
  }
  if (a->max == INT64_MAX) hi = INT64_MAX; /* saturated: a's values may lie past int64 */
  if (a->min == INT64_MIN) lo = INT64_MIN;
  {
    node *args[2] = {a, b};
    st = clb__intern(sh, CLB_EXPR_FLOORDIV, 0, args, 2, lo, hi, out);
  }
done:
  free(t);
  free(q);
  return st;
}

static clb_status mod(struct clb_shapes *sh, node *a, node *b, node **out) {
  clb_status st = div_check(sh, b, "modulo");
  if (st != CLB_OK) return st;
  if (a == b || (b->kind == CLB_EXPR_CONST && b->c == 1)) return mk_const(sh, 0, out);
  if (a->kind == CLB_EXPR_CONST && b->kind == CLB_EXPR_CONST) return mk_const(sh, clb__fmod(a->c, b->c), out);
  term *t;
  int n;
  int64_t k;
  st = linear(sh, a, &t, &n, &k);
  int nr = 0;
  int changed = 0;
  if (b->kind == CLB_EXPR_CONST) {
    /* Coefficients and the constant reduce modulo d; a symbol whose divisor makes
     * coef*s a multiple of d contributes coef*remainder. */
    int64_t d = b->c;
    for (int i = 0; i < n && st == CLB_OK; i++) {
      int64_t c = clb__fmod(t[i].coef, d), p, kr;
      if (c != t[i].coef) changed = 1;
      if (c != 0 && t[i].base->kind == CLB_EXPR_SYM) {
        clb__sym *s = clb__sym_of(sh, t[i].base);
        if (s->divisor > 1 && !clb__ck_mul(c, s->divisor, &p) && p % d == 0 && !clb__ck_mul(c, s->remainder, &kr) &&
            !clb__ck_add(k, kr, &kr)) {
          k = kr;
          c = 0;
          changed = 1;
        }
      }
      if (c != 0) {
        t[nr].coef = c;
        t[nr++].base = t[i].base;
      }
    }
    int64_t k2 = clb__fmod(k, d);
    if (k2 != k) changed = 1;
    k = k2;
  } else {
    node *q;
    for (int i = 0; i < n && st == CLB_OK; i++) {
      if (divide_term(sh, &t[i], b, &q, &st)) changed = 1; /* (b*Q + R) % b == R % b */
      else t[nr++] = t[i];
    }
  }
  if (st != CLB_OK) goto done;
  int plain = 0; /* a % b as it is, no rewrite */
  if (changed) {
    node *r;
    st = build_sum(sh, t, nr, k, &r);
    if (st == CLB_OK && overflows_where(r, a)) {
      plain = 1;
    } else {
      if (st == CLB_OK) st = mod(sh, r, b, out);
      goto done;
    }
  }
  if (a->min >= 0 && a->max < b->min) {
    *out = a;
    goto done;
  }
  int64_t lo, hi;
  if (b->kind == CLB_EXPR_CONST) {
    int64_t d = b->c, g = d;
    for (int i = 0; i < n && !plain; i++) g = clb__gcd(g, t[i].coef);
    g = clb__gcd(g, k);
    if (g > 1 && !plain) { /* (g*x) % (g*d) == g * (x % d) */
      node *a2, *b2, *m;
      st = divide_all(sh, t, n, k, g, &a2);
      if (st == CLB_OK) st = mk_const(sh, d / g, &b2);
      if (st == CLB_OK) st = mod(sh, a2, b2, &m);
      if (st == CLB_OK) st = clb__scale(sh, m, g, out);
      goto done;
    }
    if (!plain && a->kind == CLB_EXPR_MOD && a->args[1]->kind == CLB_EXPR_CONST && a->args[1]->c % d == 0) {
      st = mod(sh, a->args[0], b, out); /* (x % (m*d)) % d == x % d */
      goto done;
    }
    /* a range saturated at an end is not exact (its values may lie past
     * int64), so it says nothing about where in a period of d they fall */
    if (a->min != INT64_MIN && a->max != INT64_MAX && clb__fdiv(a->min, d) == clb__fdiv(a->max, d)) {
      lo = clb__fmod(a->min, d);
      hi = clb__fmod(a->max, d);
    } else {
      lo = 0;
      hi = d - 1;
    }
  } else {
    lo = 0;
    hi = b->max - 1;
    if (a->min >= 0 && a->max < hi) hi = a->max;
  }
  {
    node *args[2] = {a, b};
    st = clb__intern(sh, CLB_EXPR_MOD, 0, args, 2, lo, hi, out);
  }
done:
  free(t);
  return st;
}

/* ---- min and max ------------------------------------------------------------------- */

/* 1 if x - y is a constant (x = t + k1, y = t + k2), written to *d. */
static int offset_of(node *x, node *y, int64_t *d) {
  int64_t kx = 0, ky = 0;
  node *const *ax = &x, *const *ay = &y;
  int nx = 1, ny = 1;
  if (x->kind == CLB_EXPR_ADD) ax = x->args, nx = x->nargs, kx = x->c;
  if (y->kind == CLB_EXPR_ADD) ay = y->args, ny = y->nargs, ky = y->c;
  if (nx != ny) return 0;
  for (int i = 0; i < nx; i++)
    if (ax[i] != ay[i]) return 0;
  return !clb__ck_add(kx, -ky, d);
}

clb_status clb__minmax_n(struct clb_shapes *sh, clb_expr_kind kind, node *const *xs, int n, node **out) {
  int is_min = kind == CLB_EXPR_MIN;
  int cap = 0;
  for (int i = 0; i < n; i++) cap += xs[i]->kind == kind ? xs[i]->nargs : 1;
  node **v = malloc((size_t)(cap + 1) * sizeof *v);
  char *dead = calloc((size_t)cap + 1, 1);
  if (!v || !dead) {
    free(v);
    free(dead);
    return oom(sh);
  }
  int nv = 0, have_c = 0;
  int64_t c = 0;
  clb_status st = CLB_OK;
  for (int i = 0; i < n; i++) {
    int m = xs[i]->kind == kind ? xs[i]->nargs : 1;
    for (int j = 0; j < m; j++) {
      node *x = xs[i]->kind == kind ? xs[i]->args[j] : xs[i];
      if (x->kind == CLB_EXPR_CONST) {
        if (!have_c || (is_min ? x->c < c : x->c > c)) c = x->c;
        have_c = 1;
      } else {
        v[nv++] = x;
      }
    }
  }
  if (have_c) st = mk_const(sh, c, &v[nv++]);
  if (st == CLB_OK) {
    qsort(v, (size_t)nv, sizeof *v, cmp_nodes);
    int m = 0;
    for (int i = 0; i < nv; i++)
      if (m == 0 || v[m - 1] != v[i]) v[m++] = v[i];
    nv = m;
    /* x never decides min(x, y) when y <= x always (and max likewise). */
    for (int i = 0; i < nv; i++)
      for (int j = 0; j < nv && !dead[i]; j++)
        if (j != i && !dead[j]) {
          int64_t d;
          if (is_min ? v[j]->max <= v[i]->min : v[j]->min >= v[i]->max) dead[i] = 1;
          else if (offset_of(v[i], v[j], &d) && (is_min ? d >= 0 : d <= 0)) dead[i] = 1;
        }
    m = 0;
    for (int i = 0; i < nv; i++)
      if (!dead[i]) v[m++] = v[i];
    nv = m;
    if (nv == 1) {
      *out = v[0];
    } else {
      int64_t lo = v[0]->min, hi = v[0]->max;
      for (int i = 1; i < nv; i++) {
        if (is_min) {
          if (v[i]->min < lo) lo = v[i]->min;
          if (v[i]->max < hi) hi = v[i]->max;
        } else {
          if (v[i]->min > lo) lo = v[i]->min;
          if (v[i]->max > hi) hi = v[i]->max;
        }
      }
      st = clb__intern(sh, kind, 0, v, nv, lo, hi, out);
    }
  }
  free(v);
  free(dead);
  return st;
}

/* ---- Public constructors ------------------------------------------------------------ */

static clb_status check_args(struct clb_shapes *sh, node *a, node *b, node **out) {
  if (!sh) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_expr_min/clb_expr_max: sh is NULL");
  if (!a || !b || !out) return clb__shapes_fail(sh, CLB_ERR_NULL, "NULL expression or out");
  return CLB_OK;
}

clb_status clb_expr_const(clb_shapes_t sh, int64_t value, clb_expr_t *out) {
  if (!sh) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_expr_const: sh is NULL");
  if (!out) return clb__shapes_fail(sh, CLB_ERR_NULL, "out is NULL");
  return mk_const(sh, value, out);
}

clb_status clb_expr_add(clb_shapes_t sh, clb_expr_t a, clb_expr_t b, clb_expr_t *out) {
  clb_status st = check_args(sh, a, b, out);
  node *xs[2] = {a, b};
  return st != CLB_OK ? st : clb__add_n(sh, xs, 2, out);
}

clb_status clb_expr_sub(clb_shapes_t sh, clb_expr_t a, clb_expr_t b, clb_expr_t *out) {
  clb_status st = check_args(sh, a, b, out);
  node *xs[2] = {a, NULL};
  if (st == CLB_OK) st = clb__scale(sh, b, -1, &xs[1]);
  return st != CLB_OK ? st : clb__add_n(sh, xs, 2, out);
}

clb_status clb_expr_mul(clb_shapes_t sh, clb_expr_t a, clb_expr_t b, clb_expr_t *out) {
  clb_status st = check_args(sh, a, b, out);
  node *xs[2] = {a, b};
  return st != CLB_OK ? st : clb__mul_n(sh, xs, 2, out);
}

clb_status clb_expr_floordiv(clb_shapes_t sh, clb_expr_t a, clb_expr_t b, clb_expr_t *out) {
  clb_status st = check_args(sh, a, b, out);
  return st != CLB_OK ? st : floordiv(sh, a, b, out);
}

clb_status clb_expr_mod(clb_shapes_t sh, clb_expr_t a, clb_expr_t b, clb_expr_t *out) {
  clb_status st = check_args(sh, a, b, out);
  return st != CLB_OK ? st : mod(sh, a, b, out);
}

clb_status clb_expr_min(clb_shapes_t sh, clb_expr_t a, clb_expr_t b, clb_expr_t *out) {
  clb_status st = check_args(sh, a, b, out);
  node *xs[2] = {a, b};
  return st != CLB_OK ? st : clb__minmax_n(sh, CLB_EXPR_MIN, xs, 2, out);
}

clb_status clb_expr_max(clb_shapes_t sh, clb_expr_t a, clb_expr_t b, clb_expr_t *out) {
  clb_status st = check_args(sh, a, b, out);
  node *xs[2] = {a, b};
  return st != CLB_OK ? st : clb__minmax_n(sh, CLB_EXPR_MAX, xs, 2, out);
}
