/* guards.c: the conditions a plan assumed about its input sizes, checked on every run and reported in words. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shapes-impl.h"

typedef enum guard_kind {
  GUARD_EQ,    /* dim == a */
  GUARD_RANGE, /* a <= dim <= b */
  GUARD_MOD,   /* dim % a == b */
  GUARD_SAME   /* dim == dim2 */
} guard_kind;

typedef struct guard {
  guard_kind kind;
  size_t flat, flat2; /* flat dim indices */
  int64_t a, b;
} guard;

struct clb_guards {
  clb__sig sig;
  guard *g;
  size_t n, cap;
  clb_expr_t *seen; /* symbols met by clb_guards_add_shape, and where */
  size_t *seen_flat;
  size_t nseen, capseen;
  char msg[300];
  char desc[200];
};

static clb_status gfail(clb_guards_t g, clb_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g->msg, sizeof g->msg, fmt, ap);
  va_end(ap);
  return st;
}

clb_status clb_guards_new(size_t ninputs, const char *const *names, const int *ranks, clb_guards_t *out) {
  if (!out) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_guards_new: out is NULL");
  *out = NULL;
  clb_guards_t g = calloc(1, sizeof *g);
  if (!g) return clb__shapes_fail_last(CLB_ERR_HOST_OOM, "clb_guards_new: out of host memory");
  clb_status st = clb__sig_init(&g->sig, ninputs, names, ranks, g->msg, sizeof g->msg);
  if (st != CLB_OK) {
    free(g);
    return st;
  }
  *out = g;
  return CLB_OK;
}

void clb_guards_free(clb_guards_t g) {
  if (!g) return;
  clb__sig_free(&g->sig);
  free(g->g);
  free(g->seen);
  free(g->seen_flat);
  free(g);
}

const char *clb_guards_errmsg(clb_guards_t g) { return g ? g->msg : "NULL guards"; }

size_t clb_guards_count(clb_guards_t g) { return g ? g->n : 0; }

static clb_status push(clb_guards_t g, guard_kind kind, size_t input, int dim, size_t input2, int dim2, int64_t a,
                       int64_t b) {
  if (!g) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_guards_count: g is NULL");
  guard x = {kind, 0, 0, a, b};
  if (clb__sig_flat(&g->sig, input, dim, &x.flat) || (kind == GUARD_SAME && clb__sig_flat(&g->sig, input2, dim2, &x.flat2)))
    return gfail(g, CLB_ERR_INVALID_ARG, "no dim %d of input %zu (or dim %d of input %zu)", dim, input, dim2, input2);
  if (kind == GUARD_RANGE && a > b) return gfail(g, CLB_ERR_INVALID_ARG, "empty range [%lld, %lld]", (long long)a, (long long)b);
  if (kind == GUARD_MOD && (a < 1 || b < 0 || b >= a))
    return gfail(g, CLB_ERR_INVALID_ARG, "divisor %lld with remainder %lld", (long long)a, (long long)b);
  if (g->n == g->cap) {
    size_t cap = g->cap ? 2 * g->cap : 8;
    guard *ng = realloc(g->g, cap * sizeof *ng);
    if (!ng) return gfail(g, CLB_ERR_HOST_OOM, "out of host memory");
    g->g = ng;
    g->cap = cap;
  }
  g->g[g->n++] = x;
  return CLB_OK;
}

clb_status clb_guards_add_eq(clb_guards_t g, size_t input, int dim, int64_t value) {
  return push(g, GUARD_EQ, input, dim, 0, 0, value, 0);
}

clb_status clb_guards_add_range(clb_guards_t g, size_t input, int dim, int64_t min, int64_t max) {
  return push(g, GUARD_RANGE, input, dim, 0, 0, min, max);
}

clb_status clb_guards_add_divisible(clb_guards_t g, size_t input, int dim, int64_t divisor) {
  return push(g, GUARD_MOD, input, dim, 0, 0, divisor, 0);
}

clb_status clb_guards_add_same(clb_guards_t g, size_t input, int dim, size_t input2, int dim2) {
  return push(g, GUARD_SAME, input, dim, input2, dim2, 0, 0);
}

clb_status clb_guards_add_shape(clb_guards_t g, clb_shapes_t sh, size_t input, const clb_shape *s) {
  if (!g) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_guards_add_shape: g is NULL");
  if (!sh || !s) return gfail(g, CLB_ERR_NULL, "NULL context or shape");
  if (input >= g->sig.ninputs || s->rank != g->sig.ranks[input])
    return gfail(g, CLB_ERR_RANK, "input %zu: shape of rank %d for an input of rank %d", input, s->rank,
                 input < g->sig.ninputs ? g->sig.ranks[input] : -1);
  for (int d = 0; d < s->rank; d++) {
    clb_expr_t e;
    clb_status st = s->dims[d] ? clb_shapes_resolve(sh, s->dims[d], &e) : CLB_ERR_NULL;
    if (st != CLB_OK) return gfail(g, st, "dim %d: %s", d, s->dims[d] ? clb_shapes_errmsg(sh) : "NULL");
    if (e->kind == CLB_EXPR_CONST) {
      st = clb_guards_add_eq(g, input, d, e->c);
    } else if (e->kind == CLB_EXPR_SYM) {
      size_t flat, i;
      clb__sig_flat(&g->sig, input, d, &flat);
      for (i = 0; i < g->nseen && g->seen[i] != e; i++) {}
      if (i < g->nseen) {
        guard x = {GUARD_SAME, flat, g->seen_flat[i], 0, 0};
        st = push(g, GUARD_SAME, input, d, 0, 0, 0, 0);
        if (st == CLB_OK) g->g[g->n - 1] = x;
      } else {
        if (g->nseen == g->capseen) {
          size_t cap = g->capseen ? 2 * g->capseen : 8;
          clb_expr_t *ns = realloc(g->seen, cap * sizeof *ns);
          if (ns) g->seen = ns;
          size_t *nf = ns ? realloc(g->seen_flat, cap * sizeof *nf) : NULL;
          if (!ns || !nf) return gfail(g, CLB_ERR_HOST_OOM, "out of host memory");
          g->seen_flat = nf;
          g->capseen = cap;
        }
        g->seen[g->nseen] = e;
        g->seen_flat[g->nseen++] = flat;
        st = clb_guards_add_range(g, input, d, e->min, e->max);
        clb__sym *sym = clb__sym_of(sh, e);
        if (st == CLB_OK && sym->divisor > 1) st = push(g, GUARD_MOD, input, d, 0, 0, sym->divisor, sym->remainder);
      }
    } else {
      st = clb_guards_add_range(g, input, d, e->min, e->max);
    }
    if (st != CLB_OK) return st;
  }
  return CLB_OK;
}

clb_status clb_guards_check(clb_guards_t g, const int64_t *dims, size_t ndims) {
  if (!g) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_guards_check: g is NULL");
  if (!dims && ndims) return gfail(g, CLB_ERR_NULL, "NULL dims");
  if (ndims != g->sig.ndims) return gfail(g, CLB_ERR_INVALID_ARG, "%zu dims given, the inputs have %zu", ndims, g->sig.ndims);
  for (size_t i = 0; i < g->n; i++) {
    const guard *x = &g->g[i];
    int64_t v = dims[x->flat];
    char w[96], w2[96];
    clb__sig_words(&g->sig, x->flat, w, sizeof w);
    switch (x->kind) {
    case GUARD_EQ:
      if (v != x->a) return gfail(g, CLB_ERR_GUARD, "%s: %lld != static %lld", w, (long long)v, (long long)x->a);
      break;
    case GUARD_RANGE:
      if (v > x->b) return gfail(g, CLB_ERR_GUARD, "%s: %lld > bound %lld", w, (long long)v, (long long)x->b);
      if (v < x->a) return gfail(g, CLB_ERR_GUARD, "%s: %lld < min %lld", w, (long long)v, (long long)x->a);
      break;
    case GUARD_MOD:
      if (clb__fmod(v, x->a) != x->b) {
        if (x->b == 0) return gfail(g, CLB_ERR_GUARD, "%s: %lld is not a multiple of %lld", w, (long long)v, (long long)x->a);
        return gfail(g, CLB_ERR_GUARD, "%s: %lld is not %lld mod %lld", w, (long long)v, (long long)x->b, (long long)x->a);
      }
      break;
    case GUARD_SAME:
      if (v != dims[x->flat2]) {
        clb__sig_words(&g->sig, x->flat2, w2, sizeof w2);
        return gfail(g, CLB_ERR_GUARD, "%s: %lld != %s: %lld", w, (long long)v, w2, (long long)dims[x->flat2]);
      }
      break;
    }
  }
  return CLB_OK;
}

const char *clb_guards_describe(clb_guards_t g, size_t i) {
  if (!g || i >= g->n) return NULL;
  const guard *x = &g->g[i];
  char w[96], w2[96];
  clb__sig_words(&g->sig, x->flat, w, sizeof w);
  switch (x->kind) {
  case GUARD_EQ: snprintf(g->desc, sizeof g->desc, "%s == %lld", w, (long long)x->a); break;
  case GUARD_RANGE: snprintf(g->desc, sizeof g->desc, "%s in [%lld, %lld]", w, (long long)x->a, (long long)x->b); break;
  case GUARD_MOD: snprintf(g->desc, sizeof g->desc, "%s %% %lld == %lld", w, (long long)x->a, (long long)x->b); break;
  case GUARD_SAME:
    clb__sig_words(&g->sig, x->flat2, w2, sizeof w2);
    snprintf(g->desc, sizeof g->desc, "%s == %s", w, w2);
    break;
  }
  return g->desc;
}
