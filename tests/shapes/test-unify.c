/* test-unify.c: unification, contradictions in exact words, deferred checks and broadcasting. */
#include "clbound/shapes.h"
#include "test.h"

static clb_expr_t P(clb_shapes_t sh, const char *text) {
  clb_expr_t e = NULL;
  if (clb_expr_parse(sh, text, 0, &e) != CLB_OK) CLB_FAIL_AT("parse \"%s\": %s", text, clb_shapes_errmsg(sh));
  return e;
}

static const char *R(clb_shapes_t sh, clb_expr_t e) {
  clb_expr_t r = NULL;
  if (clb_shapes_resolve(sh, e, &r) != CLB_OK) return "(error)";
  return clb_expr_str(sh, r);
}

static clb_expr_t sym(clb_shapes_t sh, const char *name, int64_t lo, int64_t hi, int64_t div, int64_t rem) {
  clb_expr_t e = NULL;
  if (clb_sym_new(sh, name, lo, hi, div, rem, &e) != CLB_OK) CLB_FAIL_AT("sym %s: %s", name, clb_shapes_errmsg(sh));
  return e;
}

int main(void) {
  clb_shapes_t sh;
  REQUIRE_TRUE(clb_shapes_new(&sh) == CLB_OK);

  /* The example: two dims bound to different constants. */
  clb_expr_t s4 = sym(sh, "s4", 1, 64, 1, 0), s6 = sym(sh, "s6", 1, 64, 1, 0);
  EXPECT_EQ_I(clb_shapes_unify(sh, s4, P(sh, "3"), "dim 1 of x"), CLB_OK);
  EXPECT_EQ_I(clb_shapes_unify(sh, s6, P(sh, "5"), "dim 1 of w"), CLB_OK);
  EXPECT_EQ_S(R(sh, s4), "3");
  EXPECT_EQ_I(clb_shapes_unify(sh, s4, s6, "dim 1 of w"), CLB_ERR_CONTRADICTION);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "dim 1 of w: s4 = 3 vs s6 = 5");
  EXPECT_EQ_I(clb_shapes_unify(sh, s4, P(sh, "4"), "dim 0 of y"), CLB_ERR_CONTRADICTION);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "dim 0 of y: s4 = 3 vs 4");
  EXPECT_EQ_I(clb_shapes_unify(sh, s4, P(sh, "3"), "dim 0 of y"), CLB_OK); /* already true */

  /* Ranges that do not meet. */
  clb_expr_t p = sym(sh, "p", 1, 4, 1, 0), q = sym(sh, "q", 8, 16, 1, 0);
  EXPECT_EQ_I(clb_shapes_unify(sh, p, q, "dim 0 of b"), CLB_ERR_CONTRADICTION);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "dim 0 of b: p in [1, 4] vs q in [8, 16]: ranges do not overlap");
  EXPECT_EQ_I(clb_shapes_unify(sh, p, P(sh, "9"), "dim 0 of b"), CLB_ERR_CONTRADICTION);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "dim 0 of b: p in [1, 4] vs 9: ranges do not overlap");

  /* Two symbols merge: one class, ranges intersect. */
  clb_expr_t m = sym(sh, "m", 1, 100, 1, 0), n = sym(sh, "n", 50, 200, 1, 0);
  clb_expr_t mn = P(sh, "m + n");
  EXPECT_EQ_I(clb_shapes_unify(sh, m, n, "inner dim"), CLB_OK);
  EXPECT_EQ_S(R(sh, n), "m");
  EXPECT_EQ_I(clb_expr_min_of(m), 50);
  EXPECT_EQ_I(clb_expr_max_of(m), 100);
  EXPECT_EQ_S(R(sh, mn), "2*m");
  EXPECT_EQ_S(clb_expr_str(sh, P(sh, "m - n")), "m - n"); /* built without resolving */
  int64_t v;
  clb_binding bn[1] = {{n, 60}};
  EXPECT_EQ_I(clb_expr_eval(sh, mn, bn, 1, &v), CLB_OK); /* m is found through its class */
  EXPECT_EQ_I(v, 120);
  clb_binding bm[1] = {{m, 40}};
  EXPECT_EQ_I(clb_expr_eval(sh, mn, bm, 1, &v), CLB_ERR_OUT_OF_BOUNDS);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "m = 40 outside [50, 100]");
  clb_binding bmn[2] = {{m, 60}, {n, 61}};
  EXPECT_EQ_I(clb_expr_eval(sh, mn, bmn, 2, &v), CLB_ERR_OUT_OF_BOUNDS);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "m = 60 vs n = 61: unified, so they must be equal");

  /* A merge that leaves one value binds a constant. */
  clb_expr_t t1 = sym(sh, "t1", 1, 10, 1, 0), t2 = sym(sh, "t2", 10, 20, 1, 0);
  EXPECT_EQ_I(clb_shapes_unify(sh, t1, t2, "t"), CLB_OK);
  EXPECT_EQ_S(R(sh, t2), "10");
  EXPECT_EQ_S(R(sh, P(sh, "t1 * t2")), "100");

  /* Divisors combine (4 and 6 make 12), or contradict. */
  clb_expr_t d4 = sym(sh, "d4", 0, 100, 4, 0), d6 = sym(sh, "d6", 0, 100, 6, 0);
  EXPECT_EQ_I(clb_shapes_unify(sh, d4, d6, "d"), CLB_OK);
  EXPECT_EQ_I(clb_expr_max_of(d4), 96);
  EXPECT_EQ_S(R(sh, P(sh, "d6 % 12")), "0");
  clb_binding bd[1] = {{d6, 24}};
  EXPECT_EQ_I(clb_expr_eval(sh, d4, bd, 1, &v), CLB_OK);
  bd[0].value = 30;
  EXPECT_EQ_I(clb_expr_eval(sh, d4, bd, 1, &v), CLB_ERR_OUT_OF_BOUNDS);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "d6 = 30 is not 0 mod 12, as its unified class requires");
  clb_expr_t odd = sym(sh, "odd", 1, 99, 2, 1), even = sym(sh, "even", 0, 98, 2, 0);
  EXPECT_EQ_I(clb_shapes_unify(sh, odd, even, "dim 2 of z"), CLB_ERR_CONTRADICTION);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "dim 2 of z: odd in [1, 99] vs even in [0, 98]: 1 mod 2 vs 0 mod 2");
  EXPECT_EQ_I(clb_shapes_unify(sh, even, P(sh, "7"), "dim 2 of z"), CLB_ERR_CONTRADICTION);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "dim 2 of z: even in [0, 98] vs 7: 7 is not 0 mod 2");

  /* A symbol equal to an expression is bound to it; its range narrows the other symbol. */
  clb_expr_t t = sym(sh, "t", 1, 1000, 1, 0), u = sym(sh, "u", 1, 200, 1, 0);
  EXPECT_EQ_I(clb_shapes_unify(sh, t, P(sh, "10*u"), "numel"), CLB_OK);
  EXPECT_EQ_S(R(sh, t), "10*u");
  EXPECT_EQ_I(clb_expr_max_of(u), 100);
  clb_binding bt[2] = {{t, 300}, {u, 31}};
  EXPECT_EQ_I(clb_expr_eval(sh, t, bt, 2, &v), CLB_ERR_OUT_OF_BOUNDS);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "t = 300 but unification made it 10*u = 310");
  bt[1].value = 30;
  EXPECT_EQ_I(clb_expr_eval(sh, P(sh, "t + u"), bt, 2, &v), CLB_OK);
  EXPECT_EQ_I(v, 330);

  /* Linear equations with one unknown are solved. */
  clb_expr_t x = sym(sh, "x", 0, 100, 1, 0), y = sym(sh, "y", 0, 100, 1, 0), w = sym(sh, "w", 0, 100, 1, 0);
  EXPECT_EQ_I(clb_shapes_unify(sh, P(sh, "2*x + 1"), P(sh, "7"), "lin"), CLB_OK);
  EXPECT_EQ_S(R(sh, x), "3");
  EXPECT_EQ_I(clb_shapes_unify(sh, P(sh, "2*y + 1"), P(sh, "8"), "dim 0 of v"), CLB_ERR_CONTRADICTION);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "dim 0 of v: 2*y + 1 in [1, 201] vs 8: no integer solution");
  EXPECT_EQ_I(clb_shapes_unify(sh, P(sh, "y + w"), P(sh, "10"), "sum"), CLB_OK);
  EXPECT_EQ_S(R(sh, y), "-w + 10");
  EXPECT_EQ_I(clb_expr_max_of(w), 10);

  /* An equality the host cannot solve is recorded, not failed. */
  size_t before = clb_shapes_check_count(sh);
  clb_expr_t g1 = sym(sh, "g1", 1, 9, 1, 0), g2 = sym(sh, "g2", 1, 9, 1, 0);
  clb_expr_t g3 = sym(sh, "g3", 1, 9, 1, 0), g4 = sym(sh, "g4", 1, 9, 1, 0);
  EXPECT_EQ_I(clb_shapes_unify(sh, P(sh, "g1*g2"), P(sh, "g3*g4"), "dim 0 of out"), CLB_OK);
  EXPECT_EQ_I(clb_shapes_check_count(sh), before + 1);
  const clb_check *c = clb_shapes_check_at(sh, before);
  REQUIRE_TRUE(c != NULL);
  EXPECT_EQ_I(c->kind, CLB_CHECK_EQ);
  EXPECT_EQ_I(c->on_device, 0);
  EXPECT_EQ_S(c->what, "dim 0 of out");
  clb_binding bg[4] = {{g1, 2}, {g2, 6}, {g3, 3}, {g4, 4}};
  size_t skipped = 0;
  EXPECT_EQ_I(clb_shapes_check_eval(sh, bg, 4, &skipped), CLB_OK);
  bg[3].value = 5;
  EXPECT_EQ_I(clb_shapes_check_eval(sh, bg, 4, &skipped), CLB_ERR_DEVICE_CHECK);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "dim 0 of out: g1*g2 = 12 != g3*g4 = 15");

  /* Two data-dependent counts: merged for shape inference, checked on the device. */
  clb_expr_t c1, c2;
  REQUIRE_TRUE(clb_sym_new_unbacked(sh, 0, 50, "nonzero of a", &c1) == CLB_OK);
  REQUIRE_TRUE(clb_sym_new_unbacked(sh, 0, 80, "nonzero of b", &c2) == CLB_OK);
  EXPECT_EQ_S(clb_expr_str(sh, c1), "u0");
  EXPECT_TRUE(clb_sym_is_unbacked(c1));
  EXPECT_TRUE(!clb_sym_is_unbacked(x));
  EXPECT_EQ_S(clb_sym_origin(sh, c2), "nonzero of b");
  before = clb_shapes_check_count(sh);
  EXPECT_EQ_I(clb_shapes_unify(sh, c1, c2, "matmul: dim 0 of b"), CLB_OK);
  EXPECT_EQ_I(clb_shapes_check_count(sh), before + 1);
  c = clb_shapes_check_at(sh, before);
  EXPECT_EQ_I(c->on_device, 1);
  EXPECT_EQ_S(clb_expr_str(sh, c->a), "u0");
  EXPECT_EQ_S(clb_expr_str(sh, c->b), "u1");
  EXPECT_EQ_S(R(sh, c2), "u0");
  EXPECT_TRUE(clb_shapes_check_at(sh, 1000) == NULL);

  /* ---- Broadcasting ---- */
  clb_expr_t out, one = P(sh, "1"), four = P(sh, "4");
  clb_expr_t s1 = sym(sh, "s1", 1, 8, 1, 0), b1 = sym(sh, "b1", 2, 64, 1, 0), b2 = sym(sh, "b2", 2, 64, 1, 0);
  EXPECT_EQ_I(clb_shapes_broadcast(sh, s1, one, "bc", &out), CLB_OK);
  EXPECT_TRUE(out == s1);
  EXPECT_EQ_I(clb_shapes_broadcast(sh, one, s1, "bc", &out), CLB_OK);
  EXPECT_TRUE(out == s1);
  EXPECT_EQ_I(clb_shapes_broadcast(sh, s1, s1, "bc", &out), CLB_OK);
  EXPECT_TRUE(out == s1);
  EXPECT_EQ_I(clb_shapes_broadcast(sh, b1, b2, "dim 0 of y", &out), CLB_OK); /* both > 1: unify */
  EXPECT_TRUE(out == b1);
  EXPECT_EQ_S(R(sh, b2), "b1");
  EXPECT_EQ_I(clb_shapes_broadcast(sh, P(sh, "3"), P(sh, "5"), "dim 0 of y", &out), CLB_ERR_CONTRADICTION);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "dim 0 of y: 3 vs 5");
  before = clb_shapes_check_count(sh);
  EXPECT_EQ_I(clb_shapes_broadcast(sh, s1, four, "dim 1 of y", &out), CLB_OK); /* s1 may be 1 */
  EXPECT_EQ_S(clb_expr_str(sh, out), "max(s1,4)");
  EXPECT_EQ_I(clb_shapes_check_count(sh), before + 1);
  c = clb_shapes_check_at(sh, before);
  EXPECT_EQ_I(c->kind, CLB_CHECK_BROADCAST);
  clb_binding bs[1] = {{s1, 1}};
  EXPECT_EQ_I(clb_shapes_check_eval(sh, bs, 1, NULL), CLB_OK);
  bs[0].value = 3;
  EXPECT_EQ_I(clb_shapes_check_eval(sh, bs, 1, NULL), CLB_ERR_DEVICE_CHECK);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "dim 1 of y: s1 = 3 does not broadcast with 4");
  clb_expr_t cc = sym(sh, "cc", 5, 10, 1, 0);
  EXPECT_EQ_I(clb_shapes_broadcast(sh, cc, P(sh, "3"), "dim 0 of y", &out), CLB_ERR_CONTRADICTION);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "dim 0 of y: cc in [5, 10] vs 3: ranges do not overlap");

  clb_shapes_free(sh);
  return clb_test_finish("shapes/unify");
}
