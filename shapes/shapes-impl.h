/* shapes-impl.h: private structures of the symbol engine (nodes, symbols, the context) and checked int64 helpers. */
#ifndef CLB_SHAPES_IMPL_H
#define CLB_SHAPES_IMPL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "clbound/shapes.h"

/* One interned expression node. Nodes never change after construction, except
 * the range of a SYM node, which unification may narrow (never widen): every
 * range computed from the older, wider one stays a sound over-approximation. */
struct clb_expr {
  clb_expr_kind kind;
  int nargs;
  int unbacked;         /* SYM: a data-dependent symbol */
  int64_t c;            /* CONST: value; SYM: symbol index; ADD: constant term; MUL: coefficient */
  int64_t min, max;     /* range of values, saturated at the int64 limits */
  uint64_t hash;
  uint32_t id;          /* creation order in the context */
  const char *name;     /* SYM: the symbol's name */
  char *text;           /* cached printed form (arena), or NULL */
  struct clb_expr *next;/* hash chain */
  const struct clb_expr *args[]; /* nargs operands */
};

/* A symbol and its union-find link. */
typedef struct clb__sym {
  char *name;
  int64_t divisor, remainder; /* value % divisor == remainder (divisor 1: none) */
  int unbacked;               /* a data-dependent size */
  char *origin;               /* unbacked: where it comes from */
  struct clb_expr *node;      /* the SYM node (or the CONST it collapsed to) */
  const struct clb_expr *link;/* union-find: NULL for a class representative, else what it equals */
} clb__sym;

/* Arena chunk: memory for nodes, names and texts, freed with the context. */
typedef struct clb__chunk {
  struct clb__chunk *prev;
  size_t used, size;
  max_align_t data[];
} clb__chunk;

struct clb_shapes {
  clb__chunk *chunk;
  struct clb_expr **table; /* intern hash table (chains) */
  size_t nbuckets, nnodes;
  uint32_t next_id;
  clb__sym *syms;
  size_t nsyms, capsyms;
  size_t nunbacked, nauto;
  size_t nlinks;           /* symbols linked by unification (0: resolving is a no-op) */
  clb_check *checks;
  size_t nchecks, capchecks;
  int64_t default_min, default_max;
  size_t errpos;
  char errmsg[512];
};

/* Records the detail message of a failure (clb_shapes_errmsg) and returns st. */
clb_status clb__shapes_fail(struct clb_shapes *sh, clb_status st, const char *fmt, ...);
/* A failure with no handle to hold its message (a NULL handle or out pointer, a
 * failed creation): writes the thread's message (clb_last_errmsg) and returns st. */
clb_status clb__shapes_fail_last(clb_status st, const char *fmt, ...);
/* The thread's message buffer and its writer (errors.c; the runtime uses them too). */
char *clb__last_errmsg_buf(size_t *len);
void clb__set_last_errmsg(const char *fmt, ...);

/* Arena allocation (zeroed); NULL when out of memory. */
void *clb__arena_alloc(struct clb_shapes *sh, size_t size);
char *clb__arena_strdup(struct clb_shapes *sh, const char *s);

/* Interns a node whose operands are already canonical; a range of one value
 * becomes a CONST. */
clb_status clb__intern(struct clb_shapes *sh, clb_expr_kind kind, int64_t c, const struct clb_expr *const *args,
                       int nargs, int64_t min, int64_t max, const struct clb_expr **out);

/* The canonical order of nodes (for sorting operands). */
int clb__expr_cmp(const struct clb_expr *a, const struct clb_expr *b);

/* n-ary canonical constructors used by the parser and the resolver. */
clb_status clb__add_n(struct clb_shapes *sh, const struct clb_expr *const *xs, int n, const struct clb_expr **out);
clb_status clb__mul_n(struct clb_shapes *sh, const struct clb_expr *const *xs, int n, const struct clb_expr **out);
clb_status clb__minmax_n(struct clb_shapes *sh, clb_expr_kind kind, const struct clb_expr *const *xs, int n,
                         const struct clb_expr **out);
clb_status clb__scale(struct clb_shapes *sh, const struct clb_expr *x, int64_t k, const struct clb_expr **out);

/* The symbol record of a SYM node. */
static inline clb__sym *clb__sym_of(struct clb_shapes *sh, const struct clb_expr *e) {
  return &sh->syms[e->c];
}

/* Follows the union-find links of a SYM node to its class: the representative
 * SYM node, or the CONST / expression the class is bound to (not resolved). */
const struct clb_expr *clb__sym_find(struct clb_shapes *sh, const struct clb_expr *sym);

/* e with every symbol replaced by its class (clb_shapes_resolve without checks). */
clb_status clb__resolve(struct clb_shapes *sh, const struct clb_expr *e, const struct clb_expr **out);

/* Evaluates e; a missing binding gives CLB_ERR_INVALID_ARG (and nothing else does). */
clb_status clb__eval(struct clb_shapes *sh, const struct clb_expr *e, const clb_binding *b, size_t n, int64_t *out);

/* 1 if e contains a data-dependent symbol. */
int clb__has_unbacked(struct clb_shapes *sh, const struct clb_expr *e);

/* Records a deferred check (what is copied). */
clb_status clb__check_add(struct clb_shapes *sh, clb_check_kind kind, const struct clb_expr *a,
                          const struct clb_expr *b, const char *what);

/* Printing into a caller buffer (returns the length it needs, like snprintf). */
size_t clb__expr_format(const struct clb_expr *e, char *buf, size_t size);

/* "dim 1 of w" for messages. */
const char *clb__input_name(const char *const *names, size_t i, char *tmp, size_t size);

/* ---- Input signatures (guards and policies) ------------------------------------------
 * The inputs of a plan: names, ranks, and where each input's dims start in the
 * flat array of concrete dims. */
typedef struct clb__sig {
  size_t ninputs;
  char **names;
  int *ranks;
  size_t *offset; /* flat index of dim 0 of each input */
  size_t ndims;   /* sum of the ranks */
} clb__sig;

/* Copies names and ranks; on error writes why into err. */
clb_status clb__sig_init(clb__sig *s, size_t ninputs, const char *const *names, const int *ranks, char *err,
                         size_t errsize);
void clb__sig_free(clb__sig *s);
/* The flat index of dim `dim` of input `input`; 1 if out of range. */
int clb__sig_flat(const clb__sig *s, size_t input, int dim, size_t *flat);
/* "dim 0 of x" for a flat index. */
void clb__sig_words(const clb__sig *s, size_t flat, char *buf, size_t size);

/* ---- Checked int64 arithmetic --------------------------------------------------
 * ck_*: exact, return 1 on overflow (INT64_MIN counts as overflow, so that every
 * constant can be negated and printed). sat_*: saturate at the int64 limits. */

static inline int clb__ck_add(int64_t a, int64_t b, int64_t *r) {
  if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return 1;
  *r = a + b;
  return *r == INT64_MIN;
}

static inline int clb__mul_overflows(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  if (a > 0) return b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a;
  return b > 0 ? a < INT64_MIN / b : a < INT64_MAX / b;
}

static inline int clb__ck_mul(int64_t a, int64_t b, int64_t *r) {
  if (clb__mul_overflows(a, b)) return 1;
  *r = a * b;
  return *r == INT64_MIN;
}

static inline int64_t clb__sat_add(int64_t a, int64_t b) {
  if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
  if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
  return a + b;
}

static inline int64_t clb__sat_mul(int64_t a, int64_t b) {
  if (clb__mul_overflows(a, b)) return ((a < 0) != (b < 0)) ? INT64_MIN : INT64_MAX;
  return a * b;
}

/* Floor division and modulo for b >= 1. */
static inline int64_t clb__fdiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b) != 0 && a < 0) q--;
  return q;
}

static inline int64_t clb__fmod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return r < 0 ? r + b : r;
}

static inline int64_t clb__gcd(int64_t a, int64_t b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

#endif /* CLB_SHAPES_IMPL_H */
