/* context.c: the symbol context: creation, freeing and symbols. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shapes-impl.h"

clb_status clb_shapes_new(clb_shapes_t *out) {
  if (!out) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_shapes_new: out is NULL");
  *out = NULL;
  struct clb_shapes *sh = calloc(1, sizeof *sh);
  if (!sh) return clb__shapes_fail_last(CLB_ERR_HOST_OOM, "clb_shapes_new: out of host memory");
  sh->nbuckets = 256;
  sh->table = calloc(sh->nbuckets, sizeof *sh->table);
  if (!sh->table) {
    free(sh);
    return clb__shapes_fail_last(CLB_ERR_HOST_OOM, "clb_shapes_new: out of host memory");
  }
  sh->default_min = 0;
  sh->default_max = INT32_MAX;
  *out = sh;
  return CLB_OK;
}

void clb_shapes_free(clb_shapes_t sh) {
  if (!sh) return;
  clb__chunk *c = sh->chunk;
  while (c) {
    clb__chunk *p = c->prev;
    free(c);
    c = p;
  }
  free(sh->table);
  free(sh->syms);
  free(sh->checks);
  free(sh);
}

const char *clb_shapes_errmsg(clb_shapes_t sh) { return sh ? sh->errmsg : "NULL context"; }

size_t clb_shapes_errpos(clb_shapes_t sh) { return sh ? sh->errpos : 0; }

clb_status clb_shapes_set_default_range(clb_shapes_t sh, int64_t min, int64_t max) {
  if (!sh) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_shapes_set_default_range: sh is NULL");
  if (min > max) return clb__shapes_fail(sh, CLB_ERR_INVALID_ARG, "default range [%lld, %lld] is empty",
                                         (long long)min, (long long)max);
  sh->default_min = min;
  sh->default_max = max;
  return CLB_OK;
}

const char *clb__input_name(const char *const *names, size_t i, char *tmp, size_t size) {
  if (names && names[i]) return names[i];
  snprintf(tmp, size, "input %zu", i);
  return tmp;
}

/* ---- Symbols ------------------------------------------------------------------- */

static int valid_name(const char *s) {
  if (!s || !(isalpha((unsigned char)*s) || *s == '_')) return 0;
  for (const char *p = s; *p; p++)
    if (!(isalnum((unsigned char)*p) || *p == '_')) return 0;
  return strcmp(s, "min") != 0 && strcmp(s, "max") != 0 && strlen(s) < 64;
}

clb_expr_t clb_sym_find(clb_shapes_t sh, const char *name) {
  if (!sh || !name) return NULL;
  for (size_t i = 0; i < sh->nsyms; i++)
    if (strcmp(sh->syms[i].name, name) == 0) return sh->syms[i].node;
  return NULL;
}

/* Rounds [min, max] inward to values == remainder mod divisor; 1 if empty. */
static int tighten(int64_t *min, int64_t *max, int64_t divisor, int64_t remainder) {
  if (divisor > 1) {
    int64_t lo = *min + clb__fmod(remainder - clb__fmod(*min, divisor), divisor);
    int64_t hi = *max - clb__fmod(clb__fmod(*max, divisor) - remainder, divisor);
    if (lo < *min || hi > *max) return 1; /* wrapped around the int64 limits */
    *min = lo;
    *max = hi;
  }
  return *min > *max;
}

static clb_status sym_create(struct clb_shapes *sh, const char *name, int64_t min, int64_t max, int64_t divisor,
                             int64_t remainder, int unbacked, const char *origin, clb_expr_t *out) {
  char auto_name[32];
  if (!sh) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_sym_find: sh is NULL");
  if (!out) return clb__shapes_fail(sh, CLB_ERR_NULL, "out is NULL");
  *out = NULL;
  if (!name) {
    do {
      snprintf(auto_name, sizeof auto_name, "%c%zu", unbacked ? 'u' : 's', unbacked ? sh->nunbacked : sh->nauto);
      if (unbacked) sh->nunbacked++;
      else sh->nauto++;
    } while (clb_sym_find(sh, auto_name));
    name = auto_name;
  }
  if (!valid_name(name))
    return clb__shapes_fail(sh, CLB_ERR_INVALID_ARG, "\"%s\" is not a symbol name (letters, digits, _)", name);
  if (clb_sym_find(sh, name)) return clb__shapes_fail(sh, CLB_ERR_INVALID_ARG, "symbol %s exists already", name);
  if (divisor < 1 || remainder < 0 || remainder >= divisor)
    return clb__shapes_fail(sh, CLB_ERR_INVALID_ARG, "%s: divisor %lld with remainder %lld", name,
                            (long long)divisor, (long long)remainder);
  int64_t lo = min, hi = max;
  if (tighten(&lo, &hi, divisor, remainder)) {
    if (divisor > 1)
      return clb__shapes_fail(sh, CLB_ERR_OUT_OF_BOUNDS, "%s: no value in [%lld, %lld] is %lld mod %lld", name,
                              (long long)min, (long long)max, (long long)remainder, (long long)divisor);
    return clb__shapes_fail(sh, CLB_ERR_OUT_OF_BOUNDS, "%s: empty range [%lld, %lld]", name, (long long)min,
                            (long long)max);
  }
  if (sh->nsyms == sh->capsyms) {
    size_t cap = sh->capsyms ? 2 * sh->capsyms : 16;
    clb__sym *s = realloc(sh->syms, cap * sizeof *s);
    if (!s) return clb__shapes_fail(sh, CLB_ERR_HOST_OOM, "out of host memory");
    sh->syms = s;
    sh->capsyms = cap;
  }
  clb__sym *s = &sh->syms[sh->nsyms];
  memset(s, 0, sizeof *s);
  s->name = clb__arena_strdup(sh, name);
  s->origin = clb__arena_strdup(sh, origin ? origin : "");
  if (!s->name || !s->origin) return clb__shapes_fail(sh, CLB_ERR_HOST_OOM, "out of host memory");
  s->divisor = divisor;
  s->remainder = remainder;
  s->unbacked = unbacked;
  const struct clb_expr *node;
  clb_status st;
  if (lo == hi) {
    st = clb__intern(sh, CLB_EXPR_CONST, lo, NULL, 0, lo, lo, &node);
  } else {
    st = clb__intern(sh, CLB_EXPR_SYM, (int64_t)sh->nsyms, NULL, 0, lo, hi, &node);
    if (st == CLB_OK) {
      ((struct clb_expr *)node)->name = s->name;
      ((struct clb_expr *)node)->unbacked = unbacked;
    }
  }
  if (st != CLB_OK) return st;
  s->node = (struct clb_expr *)node;
  sh->nsyms++;
  *out = node;
  return CLB_OK;
}

clb_status clb_sym_new(clb_shapes_t sh, const char *name, int64_t min, int64_t max, int64_t divisor,
                       int64_t remainder, clb_expr_t *out) {
  return sym_create(sh, name, min, max, divisor, remainder, 0, NULL, out);
}

clb_status clb_sym_new_unbacked(clb_shapes_t sh, int64_t min, int64_t max, const char *origin, clb_expr_t *out) {
  return sym_create(sh, NULL, min, max, 1, 0, 1, origin, out);
}

int clb_sym_is_unbacked(clb_expr_t sym) { return sym && sym->kind == CLB_EXPR_SYM && sym->unbacked; }

const char *clb_sym_origin(clb_shapes_t sh, clb_expr_t sym) {
  if (!sh || !sym || sym->kind != CLB_EXPR_SYM) return "";
  return clb__sym_of(sh, sym)->origin;
}
