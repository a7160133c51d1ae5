/* expr-intern.c: hash-consing of expression nodes (equal means same pointer) and their canonical order. */
#include <stdlib.h>
#include <string.h>

#include "shapes-impl.h"

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

static uint64_t node_hash(clb_expr_kind kind, int64_t c, const struct clb_expr *const *args, int nargs) {
  uint64_t h = mix(0x12345u, (uint64_t)kind);
  h = mix(h, (uint64_t)c);
  for (int i = 0; i < nargs; i++) h = mix(h, args[i]->id);
  return h;
}

static int grow_table(struct clb_shapes *sh) {
  size_t nb = sh->nbuckets * 2;
  struct clb_expr **t = calloc(nb, sizeof *t);
  if (!t) return 1;
  for (size_t i = 0; i < sh->nbuckets; i++) {
    struct clb_expr *e = sh->table[i];
    while (e) {
      struct clb_expr *next = e->next;
      size_t b = (size_t)(e->hash & (nb - 1));
      e->next = t[b];
      t[b] = e;
      e = next;
    }
  }
  free(sh->table);
  sh->table = t;
  sh->nbuckets = nb;
  return 0;
}

clb_status clb__intern(struct clb_shapes *sh, clb_expr_kind kind, int64_t c, const struct clb_expr *const *args,
                       int nargs, int64_t min, int64_t max, const struct clb_expr **out) {
  /* A saturated range of one value is not a proof of that value. */
  if (kind != CLB_EXPR_CONST && kind != CLB_EXPR_SYM && min == max && min != INT64_MAX && min != INT64_MIN) {
    kind = CLB_EXPR_CONST;
    c = min;
    nargs = 0;
  }
  if (kind == CLB_EXPR_CONST && c == INT64_MIN)
    return clb__shapes_fail(sh, CLB_ERR_OUT_OF_BOUNDS, "integer overflow: a constant reached the int64 limit");
  uint64_t h = node_hash(kind, c, args, nargs);
  for (struct clb_expr *e = sh->table[h & (sh->nbuckets - 1)]; e; e = e->next) {
    if (e->hash != h || e->kind != kind || e->c != c || e->nargs != nargs) continue;
    int same = 1;
    for (int i = 0; i < nargs && same; i++) same = e->args[i] == args[i];
    if (same) {
      *out = e;
      return CLB_OK;
    }
  }
  if (sh->nnodes >= sh->nbuckets && grow_table(sh))
    return clb__shapes_fail(sh, CLB_ERR_HOST_OOM, "out of host memory");
  struct clb_expr *e = clb__arena_alloc(sh, sizeof *e + (size_t)nargs * sizeof e->args[0]);
  if (!e) return clb__shapes_fail(sh, CLB_ERR_HOST_OOM, "out of host memory");
  e->kind = kind;
  e->nargs = nargs;
  e->c = c;
  e->min = kind == CLB_EXPR_CONST ? c : min;
  e->max = kind == CLB_EXPR_CONST ? c : max;
  e->hash = h;
  e->id = sh->next_id++;
  for (int i = 0; i < nargs; i++) e->args[i] = args[i];
  size_t b = (size_t)(h & (sh->nbuckets - 1));
  e->next = sh->table[b];
  sh->table[b] = e;
  sh->nnodes++;
  *out = e;
  return CLB_OK;
}

/* Kinds in the order terms are printed: symbols first, sums last. */
static int kind_rank(clb_expr_kind k) {
  switch (k) {
  case CLB_EXPR_SYM: return 0;
  case CLB_EXPR_MUL: return 1;
  case CLB_EXPR_FLOORDIV: return 2;
  case CLB_EXPR_MOD: return 3;
  case CLB_EXPR_MIN: return 4;
  case CLB_EXPR_MAX: return 5;
  case CLB_EXPR_ADD: return 6;
  case CLB_EXPR_CONST: return 7;
  }
  return 8;
}

int clb__expr_cmp(const struct clb_expr *a, const struct clb_expr *b) {
  if (a == b) return 0;
  if (a->kind != b->kind) return kind_rank(a->kind) - kind_rank(b->kind);
  if (a->kind == CLB_EXPR_CONST || a->kind == CLB_EXPR_SYM) return a->c < b->c ? -1 : a->c > b->c;
  if (a->nargs != b->nargs) return a->nargs - b->nargs;
  for (int i = 0; i < a->nargs; i++) {
    int r = clb__expr_cmp(a->args[i], b->args[i]);
    if (r) return r;
  }
  return a->c < b->c ? -1 : a->c > b->c;
}

/* ---- Accessors ------------------------------------------------------------------ */

clb_expr_kind clb_expr_kind_of(clb_expr_t e) { return e ? e->kind : CLB_EXPR_CONST; }
int64_t clb_expr_min_of(clb_expr_t e) { return e ? e->min : 0; }
int64_t clb_expr_max_of(clb_expr_t e) { return e ? e->max : 0; }
int clb_expr_is_const(clb_expr_t e) { return e && e->kind == CLB_EXPR_CONST; }
size_t clb_expr_nargs(clb_expr_t e) { return e ? (size_t)e->nargs : 0; }
clb_expr_t clb_expr_arg(clb_expr_t e, size_t i) { return e && i < (size_t)e->nargs ? e->args[i] : NULL; }

int64_t clb_expr_value(clb_expr_t e) {
  if (!e) return 0;
  switch (e->kind) {
  case CLB_EXPR_CONST:
  case CLB_EXPR_ADD:
  case CLB_EXPR_MUL: return e->c;
  default: return 0;
  }
}
