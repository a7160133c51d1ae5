/* expr-print.c: renders expressions the way people write them ("s0//4 + 1", "10*s1", "max(s1,s2)"). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "shapes-impl.h"

typedef const struct clb_expr node;

/* Precedence a position needs: a node of lower precedence gets parentheses. */
enum { P_ADD = 0, P_MUL = 1, P_ATOM = 2 };

typedef struct writer {
  char *buf;
  size_t size, len; /* len counts what was needed, even past size */
} writer;

static void put(writer *w, const char *s) {
  size_t n = strlen(s);
  if (w->len < w->size) {
    size_t room = w->size - w->len - 1;
    memcpy(w->buf + w->len, s, n < room ? n : room);
    w->buf[w->len + (n < room ? n : room)] = 0;
  }
  w->len += n;
}

static void put_i64(writer *w, int64_t v) {
  char tmp[32];
  snprintf(tmp, sizeof tmp, "%" PRId64, v);
  put(w, tmp);
}

static void print_node(writer *w, node *e, int need);

/* c * f[0] * ... ; a factor that is not an atom is parenthesized. */
static void print_mul(writer *w, int64_t c, node *const *f, int n) {
  if (c == 1 && n == 1) {
    print_node(w, f[0], P_MUL);
    return;
  }
  if (c == -1) put(w, "-");
  else if (c != 1) {
    put_i64(w, c);
    put(w, "*");
  }
  for (int i = 0; i < n; i++) {
    if (i) put(w, "*");
    print_node(w, f[i], P_ATOM);
  }
}

static void print_node(writer *w, node *e, int need) {
  switch (e->kind) {
  case CLB_EXPR_CONST:
    if (e->c < 0 && need > P_ADD) put(w, "(");
    put_i64(w, e->c);
    if (e->c < 0 && need > P_ADD) put(w, ")");
    return;
  case CLB_EXPR_SYM:
    put(w, e->name);
    return;
  case CLB_EXPR_ADD:
    if (need > P_ADD) put(w, "(");
    for (int i = 0; i < e->nargs; i++) {
      node *t = e->args[i];
      int neg = t->kind == CLB_EXPR_MUL && t->c < 0;
      if (i == 0) { /* a leading minus stays with its product: "-(s0//2) + 1" */
        print_node(w, t, P_MUL);
        continue;
      }
      put(w, neg ? " - " : " + ");
      if (neg) print_mul(w, -t->c, t->args, t->nargs);
      else print_node(w, t, P_MUL);
    }
    if (e->c) {
      put(w, e->c < 0 ? " - " : " + ");
      put_i64(w, e->c < 0 ? -e->c : e->c);
    }
    if (need > P_ADD) put(w, ")");
    return;
  case CLB_EXPR_MUL:
    if (need > P_MUL) put(w, "(");
    print_mul(w, e->c, e->args, e->nargs);
    if (need > P_MUL) put(w, ")");
    return;
  case CLB_EXPR_FLOORDIV:
  case CLB_EXPR_MOD:
    if (need > P_MUL) put(w, "(");
    print_node(w, e->args[0], P_MUL);
    put(w, e->kind == CLB_EXPR_FLOORDIV ? "//" : "%");
    print_node(w, e->args[1], P_ATOM);
    if (need > P_MUL) put(w, ")");
    return;
  case CLB_EXPR_MIN:
  case CLB_EXPR_MAX:
    put(w, e->kind == CLB_EXPR_MIN ? "min(" : "max(");
    for (int i = 0; i < e->nargs; i++) {
      if (i) put(w, ",");
      print_node(w, e->args[i], P_ADD);
    }
    put(w, ")");
    return;
  }
}

size_t clb__expr_format(node *e, char *buf, size_t size) {
  writer w = {buf, size, 0};
  if (buf && size) buf[0] = 0;
  print_node(&w, e, P_ADD);
  return w.len;
}

clb_status clb_expr_print(clb_shapes_t sh, clb_expr_t e, char *buf, size_t size, size_t *len) {
  if (!sh) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_expr_print: sh is NULL");
  if (!e || (!buf && size)) return clb__shapes_fail(sh, CLB_ERR_NULL, "NULL expression or buffer");
  size_t n = clb__expr_format(e, buf, size);
  if (len) *len = n;
  if (n >= size) return clb__shapes_fail(sh, CLB_ERR_BUFFER_SMALL, "the text needs %zu bytes", n + 1);
  return CLB_OK;
}

const char *clb_expr_str(clb_shapes_t sh, clb_expr_t e) {
  if (!sh || !e) return NULL;
  if (e->text) return e->text;
  size_t n = clb__expr_format(e, NULL, 0);
  char *t = clb__arena_alloc(sh, n + 1);
  if (!t) return NULL;
  clb__expr_format(e, t, n + 1);
  ((struct clb_expr *)e)->text = t;
  return t;
}

clb_status clb_shape_print(clb_shapes_t sh, const clb_shape *s, char *buf, size_t size) {
  if (!sh) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_shape_print: sh is NULL");
  if (!s || !buf) return clb__shapes_fail(sh, CLB_ERR_NULL, "NULL shape or buffer");
  if (s->rank < 0 || s->rank > CLB_SHAPE_MAX_RANK) return clb__shapes_fail(sh, CLB_ERR_RANK, "rank %d", s->rank);
  writer w = {buf, size, 0};
  if (size) buf[0] = 0;
  put(&w, "[");
  for (int i = 0; i < s->rank; i++) {
    if (i) put(&w, ", ");
    if (!s->dims[i]) return clb__shapes_fail(sh, CLB_ERR_NULL, "dim %d is NULL", i);
    print_node(&w, s->dims[i], P_ADD);
  }
  put(&w, "]");
  if (w.len >= size) return clb__shapes_fail(sh, CLB_ERR_BUFFER_SMALL, "the text needs %zu bytes", w.len + 1);
  return CLB_OK;
}
