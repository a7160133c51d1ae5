/* expr-parse.c: a recursive-descent parser from text ("s0 // 4 + 1", "max(s1,s2)") to canonical expressions. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "shapes-impl.h"

typedef const struct clb_expr node;

#define MAX_DEPTH 200 /* nesting limit: keeps the recursion far from the stack's end */

typedef struct parser {
  struct clb_shapes *sh;
  const char *s;
  size_t pos;
  unsigned flags;
  int depth;
} parser;

static clb_status perr(parser *p, size_t at, const char *msg) {
  p->sh->errpos = at;
  return clb__shapes_fail(p->sh, CLB_ERR_PARSE, "at %zu: %s in \"%.200s\"", at, msg, p->s);
}

/* A constructor failed at `at`: keep its status, say where. */
static clb_status cerr(parser *p, size_t at, clb_status st) {
  char tmp[sizeof p->sh->errmsg];
  snprintf(tmp, sizeof tmp, "%s", p->sh->errmsg);
  p->sh->errpos = at;
  return clb__shapes_fail(p->sh, st, "at %zu: %s", at, tmp);
}

static void skip(parser *p) {
  while (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' || p->s[p->pos] == '\r') p->pos++;
}

static clb_status expr(parser *p, node **out);

static clb_status atom(parser *p, node **out) {
  skip(p);
  size_t at = p->pos;
  char c = p->s[at];
  if (isdigit((unsigned char)c)) {
    int64_t v = 0;
    while (isdigit((unsigned char)p->s[p->pos])) {
      int d = p->s[p->pos] - '0';
      if (v > (INT64_MAX - d) / 10) return perr(p, at, "integer literal too large");
      v = v * 10 + d;
      p->pos++;
    }
    clb_status st = clb_expr_const(p->sh, v, out);
    return st == CLB_OK ? st : cerr(p, at, st);
  }
  if (c == '(') {
    p->pos++;
    clb_status st = expr(p, out);
    if (st != CLB_OK) return st;
    skip(p);
    if (p->s[p->pos] != ')') return perr(p, p->pos, "expected ')'");
    p->pos++;
    return CLB_OK;
  }
  if (isalpha((unsigned char)c) || c == '_') {
    char name[64];
    size_t n = 0;
    while (isalnum((unsigned char)p->s[p->pos]) || p->s[p->pos] == '_') {
      if (n + 1 >= sizeof name) return perr(p, at, "name longer than 63 characters");
      name[n++] = p->s[p->pos++];
    }
    name[n] = 0;
    int is_min = strcmp(name, "min") == 0, is_max = strcmp(name, "max") == 0;
    skip(p);
    if (is_min || is_max) {
      if (p->s[p->pos] != '(') return perr(p, p->pos, is_min ? "expected '(' after min" : "expected '(' after max");
      p->pos++;
      node *args[64];
      int nargs = 0;
      for (;;) {
        if (nargs == 64) return perr(p, p->pos, "more than 64 arguments");
        clb_status st = expr(p, &args[nargs++]);
        if (st != CLB_OK) return st;
        skip(p);
        if (p->s[p->pos] == ',') {
          p->pos++;
          continue;
        }
        if (p->s[p->pos] == ')') break;
        return perr(p, p->pos, "expected ',' or ')' in the arguments");
      }
      p->pos++;
      clb_status st = clb__minmax_n(p->sh, is_min ? CLB_EXPR_MIN : CLB_EXPR_MAX, args, nargs, out);
      return st == CLB_OK ? st : cerr(p, at, st);
    }
    if (p->s[p->pos] == '(') return perr(p, at, "unknown function (only min and max)");
    node *e = clb_sym_find(p->sh, name);
    if (!e) {
      if (!(p->flags & CLB_PARSE_CREATE)) {
        char msg[128];
        snprintf(msg, sizeof msg, "unknown symbol %s", name);
        return perr(p, at, msg);
      }
      clb_status st = clb_sym_new(p->sh, name, p->sh->default_min, p->sh->default_max, 1, 0, &e);
      if (st != CLB_OK) return cerr(p, at, st);
    }
    *out = e;
    return CLB_OK;
  }
  if (c == 0) return perr(p, at, "expected an expression, found the end");
  char msg[64];
  if (isprint((unsigned char)c)) snprintf(msg, sizeof msg, "expected an expression, found '%c'", c);
  else snprintf(msg, sizeof msg, "expected an expression, found byte 0x%02x", (unsigned)(unsigned char)c);
  return perr(p, at, msg);
}

static clb_status unary(parser *p, node **out) {
  skip(p);
  if (++p->depth > MAX_DEPTH) return perr(p, p->pos, "nesting deeper than 200");
  clb_status st;
  if (p->s[p->pos] == '-') {
    size_t at = p->pos++;
    node *x;
    st = unary(p, &x);
    if (st == CLB_OK) {
      st = clb__scale(p->sh, x, -1, out);
      if (st != CLB_OK) st = cerr(p, at, st);
    }
  } else {
    st = atom(p, out);
  }
  p->depth--;
  return st;
}

static clb_status term(parser *p, node **out) {
  node *x;
  clb_status st = unary(p, &x);
  while (st == CLB_OK) {
    skip(p);
    size_t at = p->pos;
    int op;
    if (p->s[at] == '*') op = 0;
    else if (p->s[at] == '/' && p->s[at + 1] == '/') op = 1;
    else if (p->s[at] == '%') op = 2;
    else if (p->s[at] == '/') return perr(p, at, "'/' is not an operator: use // (floor division)");
    else break;
    p->pos += op == 1 ? 2 : 1;
    node *y;
    st = unary(p, &y);
    if (st != CLB_OK) break;
    if (op == 0) st = clb_expr_mul(p->sh, x, y, &x);
    else if (op == 1) st = clb_expr_floordiv(p->sh, x, y, &x);
    else st = clb_expr_mod(p->sh, x, y, &x);
    if (st != CLB_OK) st = cerr(p, at, st);
  }
  if (st == CLB_OK) *out = x;
  return st;
}

static clb_status expr(parser *p, node **out) {
  if (++p->depth > MAX_DEPTH) return perr(p, p->pos, "nesting deeper than 200");
  node *x;
  clb_status st = term(p, &x);
  while (st == CLB_OK) {
    skip(p);
    size_t at = p->pos;
    char c = p->s[at];
    if (c != '+' && c != '-') break;
    p->pos++;
    node *y;
    st = term(p, &y);
    if (st != CLB_OK) break;
    st = c == '+' ? clb_expr_add(p->sh, x, y, &x) : clb_expr_sub(p->sh, x, y, &x);
    if (st != CLB_OK) st = cerr(p, at, st);
  }
  if (st == CLB_OK) *out = x;
  p->depth--;
  return st;
}

clb_status clb_expr_parse(clb_shapes_t sh, const char *text, unsigned flags, clb_expr_t *out) {
  if (!sh) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_expr_parse: sh is NULL");
  if (!text || !out) return clb__shapes_fail(sh, CLB_ERR_NULL, "NULL text or out");
  parser p = {sh, text, 0, flags, 0};
  node *e;
  clb_status st = expr(&p, &e);
  if (st != CLB_OK) return st;
  skip(&p);
  if (p.s[p.pos]) {
    char msg[64];
    char c = p.s[p.pos];
    if (isprint((unsigned char)c)) snprintf(msg, sizeof msg, "unexpected '%c' after the expression", c);
    else snprintf(msg, sizeof msg, "unexpected byte 0x%02x after the expression", (unsigned)(unsigned char)c);
    return perr(&p, p.pos, msg);
  }
  *out = e;
  return CLB_OK;
}

clb_status clb_shape_parse(clb_shapes_t sh, const char *text, unsigned flags, clb_shape *out) {
  if (!sh) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_shape_parse: sh is NULL");
  if (!text || !out) return clb__shapes_fail(sh, CLB_ERR_NULL, "NULL text or out");
  parser p = {sh, text, 0, flags, 0};
  clb_shape s;
  s.rank = 0;
  skip(&p);
  int bracket = p.s[p.pos] == '[';
  if (bracket) p.pos++;
  skip(&p);
  if (p.s[p.pos] != (bracket ? ']' : 0)) {
    for (;;) {
      if (s.rank == CLB_SHAPE_MAX_RANK) {
        p.sh->errpos = p.pos;
        return clb__shapes_fail(sh, CLB_ERR_RANK, "at %zu: more than %d dims in \"%.200s\"", p.pos,
                                CLB_SHAPE_MAX_RANK, text);
      }
      clb_status st = expr(&p, &s.dims[s.rank]);
      if (st != CLB_OK) return st;
      s.rank++;
      skip(&p);
      if (p.s[p.pos] != ',') break;
      p.pos++;
    }
  }
  if (bracket) {
    if (p.s[p.pos] != ']') return perr(&p, p.pos, "expected ',' or ']'");
    p.pos++;
    skip(&p);
  }
  if (p.s[p.pos]) return perr(&p, p.pos, "unexpected text after the shape");
  *out = s;
  return CLB_OK;
}
