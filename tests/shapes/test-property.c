/* test-property.c: random expressions and random bindings inside their ranges: the canonical form evaluates like a naive tree and stays inside its range. */
#include <stdlib.h>

#include "clbound/shapes.h"
#include "test.h"

#define NSYMS 4
#define MAXN 64               /* naive nodes per expression */
#define BINDINGS 20           /* bindings per expression */
#define EXPRS_PER_CONTEXT 2000 /* a fresh context now and then keeps memory flat */

enum { N_CONST, N_SYM, N_ADD, N_SUB, N_MUL, N_DIV, N_MOD, N_MIN, N_MAX, N_NEG };

typedef struct nnode {
  int kind;
  int64_t c; /* constant, or symbol index */
  int a, b;
} nnode;

static nnode nodes[MAXN];
static clb_expr_t canon[MAXN];
static int nn;
static clb_shapes_t sh;
static clb_expr_t syms[NSYMS];
static int64_t sym_div[NSYMS];
static uint64_t rng = 88172645463325252ull;
static long skipped_build, skipped_overflow;

static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static int64_t pick(int64_t lo, int64_t hi) { return lo + (int64_t)(next() % (uint64_t)(hi - lo + 1)); }

/* ---- The naive evaluator: the tree as written, Python semantics, overflow detected. */

static int add_ovf(int64_t a, int64_t b, int64_t *r) {
  if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return 1;
  *r = a + b;
  return 0;
}

static int mul_ovf(int64_t a, int64_t b, int64_t *r) {
  if (a != 0 && b != 0) {
    if (a == -1 || b == -1) {
      if (a == INT64_MIN || b == INT64_MIN) return 1;
    } else if ((a > 0) == (b > 0) ? (a > 0 ? a > INT64_MAX / b : a < INT64_MAX / b)
                                  : (a > 0 ? b < INT64_MIN / a : a < INT64_MIN / b)) {
      return 1;
    }
  }
  *r = a * b;
  return 0;
}

static int naive(int i, const int64_t *vals, int64_t *out) {
  const nnode *n = &nodes[i];
  int64_t x = 0, y = 0;
  if (n->kind == N_CONST) {
    *out = n->c;
    return 0;
  }
  if (n->kind == N_SYM) {
    *out = vals[n->c];
    return 0;
  }
  if (naive(n->a, vals, &x)) return 1;
  if (n->kind != N_NEG && naive(n->b, vals, &y)) return 1;
  switch (n->kind) {
  case N_ADD: return add_ovf(x, y, out);
  case N_SUB: return y == INT64_MIN || add_ovf(x, -y, out);
  case N_MUL: return mul_ovf(x, y, out);
  case N_NEG: return x == INT64_MIN || (*out = -x, 0);
  case N_DIV:
  case N_MOD: {
    if (y < 1) return 1;
    int64_t q = x / y, r = x % y;
    if (r != 0 && x < 0) {
      q--;
      r += y;
    }
    *out = n->kind == N_DIV ? q : r;
    return 0;
  }
  case N_MIN: *out = x < y ? x : y; return 0;
  case N_MAX: *out = x > y ? x : y; return 0;
  }
  return 1;
}

/* ---- Random trees, built naive and canonical side by side. */

static int leaf(void) {
  int i = nn++;
  if (next() % 3 == 0) {
    nodes[i].kind = N_CONST;
    nodes[i].c = pick(-9, 12);
    if (clb_expr_const(sh, nodes[i].c, &canon[i]) != CLB_OK) return -1;
  } else {
    nodes[i].kind = N_SYM;
    nodes[i].c = pick(0, NSYMS - 1);
    canon[i] = syms[nodes[i].c];
  }
  return i;
}

static int gen(int depth) {
  if (depth == 0 || nn + 4 >= MAXN || next() % 5 == 0) return leaf();
  int kind = (int)pick(N_ADD, N_NEG);
  int a = gen(depth - 1);
  if (a < 0) return -1;
  int b = kind == N_NEG ? -1 : gen(depth - 1);
  if (kind != N_NEG && b < 0) return -1;
  if ((kind == N_DIV || kind == N_MOD) && clb_expr_min_of(canon[b]) < 1) {
    /* Shift the divisor to be >= 1, in both trees. */
    int k = nn++, s = nn++;
    nodes[k].kind = N_CONST;
    nodes[k].c = 1 - clb_expr_min_of(canon[b]) + (int64_t)(next() % 3);
    if (clb_expr_const(sh, nodes[k].c, &canon[k]) != CLB_OK) return -1;
    nodes[s].kind = N_ADD;
    nodes[s].a = b;
    nodes[s].b = k;
    if (clb_expr_add(sh, canon[b], canon[k], &canon[s]) != CLB_OK) return -1;
    b = s;
  }
  int i = nn++;
  nodes[i].kind = kind;
  nodes[i].a = a;
  nodes[i].b = b;
  clb_status st;
  clb_expr_t x = canon[a], y = b >= 0 ? canon[b] : NULL, m1;
  switch (kind) {
  case N_ADD: st = clb_expr_add(sh, x, y, &canon[i]); break;
  case N_SUB: st = clb_expr_sub(sh, x, y, &canon[i]); break;
  case N_MUL: st = clb_expr_mul(sh, x, y, &canon[i]); break;
  case N_DIV: st = clb_expr_floordiv(sh, x, y, &canon[i]); break;
  case N_MOD: st = clb_expr_mod(sh, x, y, &canon[i]); break;
  case N_MIN: st = clb_expr_min(sh, x, y, &canon[i]); break;
  case N_MAX: st = clb_expr_max(sh, x, y, &canon[i]); break;
  default:
    st = clb_expr_const(sh, -1, &m1);
    if (st == CLB_OK) st = clb_expr_mul(sh, m1, x, &canon[i]);
  }
  return st == CLB_OK ? i : -1;
}

static void new_context(void) {
  clb_shapes_free(sh);
  REQUIRE_TRUE(clb_shapes_new(&sh) == CLB_OK);
  for (int s = 0; s < NSYMS; s++) {
    char name[8];
    snprintf(name, sizeof name, "s%d", s);
    int64_t lo = pick(-6, 20), hi = lo + pick(0, 40), d = next() % 4 == 0 ? pick(2, 5) : 1, r = pick(0, d - 1);
    if (clb_sym_new(sh, name, lo, hi, d, r, &syms[s]) != CLB_OK) {
      d = 1;
      REQUIRE_TRUE(clb_sym_new(sh, name, lo, hi, 1, 0, &syms[s]) == CLB_OK);
    }
    sym_div[s] = d;
  }
}

int main(int argc, char **argv) {
  long target = 1000000;
  const char *env = getenv("CLB_PROPERTY_CASES");
  if (argc > 1) target = atol(argv[1]);
  else if (env) target = atol(env);
  long cases = 0, subchecks = 0, exprs = 0, roundtrips = 0;
  sh = NULL;
  new_context();
  while (cases < target) {
    if (exprs % EXPRS_PER_CONTEXT == 0 && exprs) new_context();
    exprs++;
    nn = 0;
    int root = gen(4);
    if (root < 0) { /* a constant overflowed while building: allowed, counted */
      skipped_build++;
      continue;
    }
    /* The printed form parses back to the same interned node. */
    clb_expr_t again = NULL;
    const char *text = clb_expr_str(sh, canon[root]);
    if (clb_expr_parse(sh, text, 0, &again) != CLB_OK || again != canon[root])
      CLB_FAIL_AT("round trip of \"%s\": %s", text, clb_shapes_errmsg(sh));
    roundtrips++;
    for (int k = 0; k < BINDINGS && cases < target; k++) {
      int64_t vals[NSYMS];
      clb_binding b[NSYMS];
      for (int s = 0; s < NSYMS; s++) {
        int64_t lo = clb_expr_min_of(syms[s]), hi = clb_expr_max_of(syms[s]);
        vals[s] = lo + sym_div[s] * pick(0, (hi - lo) / sym_div[s]);
        b[s].sym = syms[s];
        b[s].value = vals[s];
      }
      for (int i = 0; i < nn; i++) {
        if (i != root && k % 4) continue; /* sub-expressions on every 4th binding */
        int64_t want, got;
        if (naive(i, vals, &want)) {
          skipped_overflow += i == root;
          continue;
        }
        clb_status st = clb_expr_eval(sh, canon[i], b, NSYMS, &got);
        if (st == CLB_ERR_OUT_OF_BOUNDS && strstr(clb_shapes_errmsg(sh), "overflow")) {
          skipped_overflow += i == root;
          continue;
        }
        clb_test_checks++;
        if (st != CLB_OK || got != want || got < clb_expr_min_of(canon[i]) || got > clb_expr_max_of(canon[i])) {
          clb_test_failures++;
          if (clb_test_failures < 20)
            fprintf(stderr, "case %ld node %d: %s = %lld, naive %lld, range [%lld, %lld], status %s (%s); s = %lld %lld %lld %lld\n",
                    cases, i, clb_expr_str(sh, canon[i]), (long long)got, (long long)want,
                    (long long)clb_expr_min_of(canon[i]), (long long)clb_expr_max_of(canon[i]), clb_status_name(st),
                    clb_shapes_errmsg(sh), (long long)vals[0], (long long)vals[1], (long long)vals[2],
                    (long long)vals[3]);
        }
        if (i == root) cases++;
        else subchecks++;
      }
    }
  }
  clb_shapes_free(sh);
  printf("%ld cases (%ld expressions, %ld round trips, %ld sub-expression checks); skipped: %ld builds and %ld "
         "evaluations that overflowed int64\n",
         cases, exprs, roundtrips, subchecks, skipped_build, skipped_overflow);
  EXPECT_TRUE(cases >= target);
  return clb_test_finish("shapes/property");
}
