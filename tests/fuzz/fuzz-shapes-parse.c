/* fuzz-shapes-parse.c: libFuzzer target for the expression parser and canonicalizer: print/parse round trips and canonical vs. naive evaluation.
 *
 * Input: expression text, then (after a NUL byte, optional) bytes that seed the
 * symbol values. For every text that parses: printing and parsing again gives the
 * same interned node; the canonical node, evaluated with values inside the
 * symbols' ranges, equals a naive evaluation of the text as written (Python
 * semantics, its own parser below) and lies inside the node's range. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clbound/shapes.h"

#define MAX_TEXT 1024
#define MAX_SYMS 32

static void fail(const char *what, const char *text, const char *detail) {
  fprintf(stderr, "fuzz-shapes-parse: %s\n  text: %s\n  %s\n", what, text, detail ? detail : "");
  abort(); /* a fuzz target reports by crashing; this is test code, not the library */
}

/* ---- Symbol values: one per name, drawn from the seed inside the symbol's range. */

typedef struct value_table {
  clb_shapes_t sh;
  const uint8_t *seed;
  size_t nseed, used;
  uint64_t round; /* each round draws other values from the same seed */
  char names[MAX_SYMS][64];
  clb_binding b[MAX_SYMS];
  size_t n;
  int full;
} value_table;

static uint64_t seed_bits(value_table *t) {
  uint64_t v = 0x9e3779b97f4a7c15ull * (t->n + 1 + 977 * t->round);
  for (int i = 0; i < 8; i++) v = v * 131 + (t->nseed ? t->seed[(t->used++) % t->nseed] : 0);
  return v;
}

static int value_of(value_table *t, const char *name, int64_t *out) {
  for (size_t i = 0; i < t->n; i++)
    if (strcmp(t->names[i], name) == 0) {
      *out = t->b[i].value;
      return 0;
    }
  clb_expr_t s = clb_sym_find(t->sh, name);
  if (!s || t->n == MAX_SYMS) {
    t->full = 1;
    return 1;
  }
  int64_t lo = clb_expr_min_of(s), hi = clb_expr_max_of(s), v = lo;
  if (!clb_expr_is_const(s)) {
    uint64_t span = (uint64_t)(hi - lo);
    uint64_t r = seed_bits(t);
    int pick = (int)(r & 3); /* ends of the range are likely */
    if (pick == 0) v = lo;
    else if (pick == 1) v = hi;
    else v = lo + (int64_t)((r >> 2) % (span + 1));
    /* symbols with a divisor: step down to a valid value (s3 below: 0 mod 4) */
    if (strcmp(name, "s3") == 0) v -= ((v % 4) + 4) % 4;
    if (v < lo) v += 4;
  }
  snprintf(t->names[t->n], sizeof t->names[0], "%s", name);
  t->b[t->n].sym = s;
  t->b[t->n].value = v;
  t->n++;
  *out = v;
  return 0;
}

/* ---- The naive evaluator: parses the text again and computes as it goes. */

typedef struct naive {
  const char *s;
  size_t pos;
  value_table *vals;
  int bad; /* overflow, or something the engine's parser would have refused */
} naive;

static void sp(naive *p) {
  while (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' || p->s[p->pos] == '\r') p->pos++;
}

static int64_t add(naive *p, int64_t a, int64_t b) {
  if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) p->bad = 1;
  return p->bad ? 0 : a + b;
}

static int64_t mul(naive *p, int64_t a, int64_t b) {
  if (a && b) {
    if ((a == -1 && b == INT64_MIN) || (b == -1 && a == INT64_MIN)) p->bad = 1;
    else if (a != -1 && b != -1 && (a * 1.0 * b > 9.2e18 || a * 1.0 * b < -9.2e18)) p->bad = 1;
  }
  return p->bad ? 0 : a * b;
}

static int64_t nexpr(naive *p);

static int64_t natom(naive *p) {
  sp(p);
  char c = p->s[p->pos];
  if (c >= '0' && c <= '9') {
    int64_t v = 0;
    while (p->s[p->pos] >= '0' && p->s[p->pos] <= '9') v = v * 10 + (p->s[p->pos++] - '0');
    return v;
  }
  if (c == '(') {
    p->pos++;
    int64_t v = nexpr(p);
    sp(p);
    p->pos++; /* ')' */
    return v;
  }
  char name[64];
  size_t n = 0;
  while ((p->s[p->pos] >= 'a' && p->s[p->pos] <= 'z') || (p->s[p->pos] >= 'A' && p->s[p->pos] <= 'Z') ||
         (p->s[p->pos] >= '0' && p->s[p->pos] <= '9') || p->s[p->pos] == '_')
    if (n < sizeof name - 1) name[n++] = p->s[p->pos++];
    else p->pos++;
  name[n] = 0;
  if (strcmp(name, "min") == 0 || strcmp(name, "max") == 0) {
    int is_min = name[1] == 'i';
    sp(p);
    p->pos++; /* '(' */
    int64_t v = nexpr(p);
    for (;;) {
      sp(p);
      if (p->s[p->pos] != ',') break;
      p->pos++;
      int64_t w = nexpr(p);
      v = is_min ? (w < v ? w : v) : (w > v ? w : v);
    }
    p->pos++; /* ')' */
    return v;
  }
  int64_t v = 0;
  if (value_of(p->vals, name, &v)) p->bad = 1;
  return v;
}

static int64_t nunary(naive *p) {
  sp(p);
  if (p->s[p->pos] == '-') {
    p->pos++;
    int64_t v = nunary(p);
    return mul(p, v, -1);
  }
  return natom(p);
}

static int64_t nterm(naive *p) {
  int64_t v = nunary(p);
  for (;;) {
    sp(p);
    const char *s = p->s + p->pos;
    int op = s[0] == '*' ? 0 : (s[0] == '/' && s[1] == '/') ? 1 : s[0] == '%' ? 2 : -1;
    if (op < 0) return v;
    p->pos += op == 1 ? 2 : 1;
    int64_t w = nunary(p);
    if (op == 0) v = mul(p, v, w);
    else if (w < 1) p->bad = 1; /* the engine refuses divisors that may be < 1 */
    else {
      int64_t q = v / w, r = v % w;
      if (r != 0 && v < 0) q--, r += w;
      v = op == 1 ? q : r;
    }
  }
}

static int64_t nexpr(naive *p) {
  int64_t v = nterm(p);
  for (;;) {
    sp(p);
    char c = p->s[p->pos];
    if (c != '+' && c != '-') return v;
    p->pos++;
    int64_t w = nterm(p);
    v = c == '+' ? add(p, v, w) : (w == INT64_MIN ? (p->bad = 1, 0) : add(p, v, -w));
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char text[MAX_TEXT + 1];
  size_t n = 0;
  while (n < size && n < MAX_TEXT && data[n]) {
    text[n] = (char)data[n];
    n++;
  }
  text[n] = 0;
  const uint8_t *seed = n < size ? data + n + 1 : NULL;
  size_t nseed = n < size ? size - n - 1 : 0;

  clb_shapes_t sh;
  if (clb_shapes_new(&sh) != CLB_OK) return 0;
  clb_expr_t e, again;
  clb_sym_new(sh, "s0", 1, 64, 1, 0, &e);
  clb_sym_new(sh, "s1", 0, 100, 1, 0, &e);
  clb_sym_new(sh, "s2", -10, 10, 1, 0, &e);
  clb_sym_new(sh, "s3", 4, 64, 4, 0, &e);
  clb_sym_new_unbacked(sh, 0, 500, "fuzz", &e); /* u0 */
  clb_shapes_set_default_range(sh, 0, 1000);

  clb_status st = clb_expr_parse(sh, text, CLB_PARSE_CREATE, &e);
  if (st != CLB_OK) {
    if (!clb_shapes_errmsg(sh)[0]) fail("an error without a message", text, clb_status_name(st));
    clb_shape shape;
    (void)clb_shape_parse(sh, text, CLB_PARSE_CREATE, &shape);
    clb_shapes_free(sh);
    return 0;
  }
  const char *printed = clb_expr_str(sh, e);
  if (!printed) fail("no printed form", text, NULL);
  st = clb_expr_parse(sh, printed, 0, &again);
  if (st != CLB_OK) fail("the printed form does not parse", text, printed);
  if (again != e) fail("the printed form parses to another node", text, printed);
  char small[8];
  size_t len = 0;
  st = clb_expr_print(sh, e, small, sizeof small, &len);
  if (len != strlen(printed) || (st == CLB_OK) != (len < sizeof small)) fail("clb_expr_print length", text, printed);

  /* Canonical vs. naive, for a few value sets drawn from the seed. */
  for (int round = 0; round < 4; round++) {
    value_table vt;
    memset(&vt, 0, sizeof vt);
    vt.sh = sh;
    vt.seed = seed;
    vt.nseed = nseed;
    vt.used = (size_t)round * 8;
    vt.round = (uint64_t)round;
    naive p = {text, 0, &vt, 0};
    int64_t want = nexpr(&p);
    if (p.bad || vt.full) continue;
    /* Bind every symbol the printed form mentions too (canonical forms never add symbols). */
    int64_t got = 0;
    st = clb_expr_eval(sh, e, vt.b, vt.n, &got);
    if (st == CLB_ERR_OUT_OF_BOUNDS && strstr(clb_shapes_errmsg(sh), "overflow")) continue;
    if (st != CLB_OK) fail("evaluation failed", text, clb_shapes_errmsg(sh));
    if (got != want) {
      char d[200];
      snprintf(d, sizeof d, "canonical %s = %lld, naive %lld", printed, (long long)got, (long long)want);
      fail("canonical and naive values differ", text, d);
    }
    if (got < clb_expr_min_of(e) || got > clb_expr_max_of(e)) {
      char d[200];
      snprintf(d, sizeof d, "%s = %lld outside [%lld, %lld]", printed, (long long)got, (long long)clb_expr_min_of(e),
               (long long)clb_expr_max_of(e));
      fail("value outside the computed range", text, d);
    }
  }
  clb_shapes_free(sh);
  return 0;
}
