/* test-expr.c: table rows of (expression, min, max, printed form) in tinygrad's helper_test_variable style, plus evaluation. */
#include "clbound/shapes.h"
#include "test.h"

typedef struct row {
  const char *text;
  long long min, max;
  const char *printed;
} row;

/* Symbols: s0 in [1, 100], s1 in [1, 8], s2 in [0, 50], s3 in [4, 64] with s3 % 4 == 0,
 * a in [0, 10], b in [5, 20]. */
static const row rows[] = {
    {"10*s1", 10, 80, "10*s1"}, /* the upper bound is the allocation capacity */
    /* products of sums: one form however the coefficient is placed, like products group */
    {"s1*(2*s0 + 2) + s1*(s0 + 1)", 6, 2424, "s1*(3*s0 + 3)"},
    {"s1*(2*s0 + 2) - 2*s1*(s0 + 1)", 0, 0, "0"},
    {"(2*s0 + 2)*(3*s1 + 3)", 24, 5454, "(s1 + 1)*(6*s0 + 6)"},
    {"6*(s0 + 1)*(s1 + 1)", 24, 5454, "(s1 + 1)*(6*s0 + 6)"},
    {"s1*(-s0 - 1)", -808, -2, "s1*(-s0 - 1)"},
    {"max(s1,s2)", 1, 50, "max(s1,s2)"},
    {"max(s1, s2)", 1, 50, "max(s1,s2)"},
    {"max(s2, s1)", 1, 50, "max(s1,s2)"},
    {"s0 // 4 + 1", 1, 26, "s0//4 + 1"},
    {"s0 % 3", 0, 2, "s0%3"},
    {"min(a,b)", 0, 10, "min(a,b)"},
    {"s0 + s0", 2, 200, "2*s0"},
    {"s1 + 3 + s1*2", 6, 27, "3*s1 + 3"},
    {"(4*s0)//4", 1, 100, "s0"},
    {"s0 % 1", 0, 0, "0"},
    {"s1 - s1", 0, 0, "0"},
    {"2*(s0 + 1)", 4, 202, "2*s0 + 2"},
    {"(s0*4 + 3)//4", 1, 100, "s0"},
    {"s3 % 4", 0, 0, "0"},
    {"s3 % 2", 0, 0, "0"},
    {"(s3 + 1) % 4", 1, 1, "1"},
    {"s3 // 4", 1, 16, "s3//4"},
    {"min(s1, 9)", 1, 8, "s1"},
    {"max(s1, 1)", 1, 8, "s1"},
    {"max(a, 20, b)", 20, 20, "20"},
    {"min(a, 11 + b)", 0, 10, "a"},
    {"s0 - 3*s1", -23, 97, "s0 - 3*s1"},
    {"-s0 + 5", -95, 4, "-s0 + 5"},
    {"-(s0//2) + 1", -49, 1, "-(s0//2) + 1"},
    {"s1*(s0 + 1)", 2, 808, "s1*(s0 + 1)"},
    {"(s0*s1)//s1", 1, 100, "s0"},
    {"(s0*s1 + s1) % s1", 0, 0, "0"},
    {"(s0 // 4) // 2", 0, 12, "s0//8"},
    {"(s0 % 12) % 4", 0, 3, "s0%4"},
    {"a // 11", 0, 0, "0"},
    {"a % 11", 0, 10, "a"},
    {"(s1 + 2) * 3 - 6", 3, 24, "3*s1"},
    {"max(s1,s2) + 1", 2, 51, "max(s1,s2) + 1"},
    {"s1*s1", 1, 64, "s1*s1"},
    {"7", 7, 7, "7"},
    {"-7", -7, -7, "-7"},
    {"s0 - 1", 0, 99, "s0 - 1"},
    {"(s0 - 1) % 4", 0, 3, "(s0 + 3)%4"},
    {"2*s1 // 2", 1, 8, "s1"},
    {"(6*s0 + 4*s1) // 4", 2, 158, "s1 + 3*s0//2"},
    {"s1 * 0", 0, 0, "0"},
    {"s0 // s0", 1, 1, "1"},
    {"min(s1, s2) * 2", 0, 16, "2*min(s1,s2)"},
    {"a // b", 0, 2, "a//b"},
    {"a % b", 0, 10, "a%b"},
    {"s2 % 100", 0, 50, "s2"},
    {"(s0 + 100) // 100", 1, 2, "s0//100 + 1"},
    {"max(-3, a - 5)", -3, 5, "max(a - 5,-3)"},
    {"-s0 // 4", -25, -1, "-s0//4"},
    {"(4*s0) % 6", 0, 4, "2*(2*s0%3)"},
    {"s1 * 8 // 4 * 2", 4, 32, "4*s1"},
    {"s0 - (s0 - 2)", 2, 2, "2"},
    {"min(s1, s1 + 1)", 1, 8, "s1"},
    {"max(s0, s1) * 10", 10, 1000, "10*max(s0,s1)"},
};

int main(void) {
  clb_shapes_t sh;
  REQUIRE_TRUE(clb_shapes_new(&sh) == CLB_OK);
  clb_expr_t s0, s1, s2, s3, a, b;
  REQUIRE_TRUE(clb_sym_new(sh, "s0", 1, 100, 1, 0, &s0) == CLB_OK);
  REQUIRE_TRUE(clb_sym_new(sh, "s1", 1, 8, 1, 0, &s1) == CLB_OK);
  REQUIRE_TRUE(clb_sym_new(sh, "s2", 0, 50, 1, 0, &s2) == CLB_OK);
  REQUIRE_TRUE(clb_sym_new(sh, "s3", 3, 66, 4, 0, &s3) == CLB_OK); /* tightened to [4, 64] */
  REQUIRE_TRUE(clb_sym_new(sh, "a", 0, 10, 1, 0, &a) == CLB_OK);
  REQUIRE_TRUE(clb_sym_new(sh, "b", 5, 20, 1, 0, &b) == CLB_OK);
  EXPECT_EQ_I(clb_expr_min_of(s3), 4);
  EXPECT_EQ_I(clb_expr_max_of(s3), 64);

  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const row *r = &rows[i];
    clb_expr_t e, again;
    clb_status st = clb_expr_parse(sh, r->text, 0, &e);
    if (st != CLB_OK) {
      CLB_FAIL_AT("row \"%s\": %s", r->text, clb_shapes_errmsg(sh));
      continue;
    }
    EXPECT_EQ_S(clb_expr_str(sh, e), r->printed);
    EXPECT_EQ_I(clb_expr_min_of(e), r->min);
    EXPECT_EQ_I(clb_expr_max_of(e), r->max);
    /* Printing round-trips to the same interned node. */
    EXPECT_TRUE(clb_expr_parse(sh, clb_expr_str(sh, e), 0, &again) == CLB_OK && again == e);
    if (clb_expr_str(sh, e) && r->printed && strcmp(clb_expr_str(sh, e), r->printed) != 0)
      fprintf(stderr, "  in row \"%s\"\n", r->text);
  }

  /* Interning: equal expressions are the same pointer, built any way. */
  clb_expr_t x, y, ten;
  REQUIRE_TRUE(clb_expr_const(sh, 10, &ten) == CLB_OK);
  REQUIRE_TRUE(clb_expr_mul(sh, ten, s1, &x) == CLB_OK);
  REQUIRE_TRUE(clb_expr_parse(sh, "s1*10", 0, &y) == CLB_OK);
  EXPECT_TRUE(x == y);
  EXPECT_EQ_I(clb_expr_kind_of(x), CLB_EXPR_MUL);
  EXPECT_EQ_I(clb_expr_value(x), 10);
  EXPECT_EQ_I(clb_expr_nargs(x), 1);
  EXPECT_TRUE(clb_expr_arg(x, 0) == s1);
  EXPECT_TRUE(clb_expr_arg(x, 1) == NULL);
  EXPECT_TRUE(clb_sym_find(sh, "s1") == s1);
  EXPECT_TRUE(clb_sym_find(sh, "nope") == NULL);

  /* A symbol with a single value is a constant. */
  clb_expr_t one;
  EXPECT_EQ_I(clb_sym_new(sh, "k", 5, 5, 1, 0, &one), CLB_OK);
  EXPECT_TRUE(clb_expr_is_const(one) && clb_expr_value(one) == 5);
  /* Symbol errors. */
  clb_expr_t bad;
  EXPECT_EQ_I(clb_sym_new(sh, "s0", 1, 2, 1, 0, &bad), CLB_ERR_INVALID_ARG);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "symbol s0 exists already");
  EXPECT_EQ_I(clb_sym_new(sh, "9x", 1, 2, 1, 0, &bad), CLB_ERR_INVALID_ARG);
  EXPECT_EQ_I(clb_sym_new(sh, "max", 1, 2, 1, 0, &bad), CLB_ERR_INVALID_ARG);
  EXPECT_EQ_I(clb_sym_new(sh, "e", 5, 4, 1, 0, &bad), CLB_ERR_OUT_OF_BOUNDS);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "e: empty range [5, 4]");
  EXPECT_EQ_I(clb_sym_new(sh, "e", 5, 7, 4, 0, &bad), CLB_ERR_OUT_OF_BOUNDS);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "e: no value in [5, 7] is 0 mod 4");
  EXPECT_EQ_I(clb_sym_new(sh, "e", 0, 7, 4, 4, &bad), CLB_ERR_INVALID_ARG);
  clb_expr_t anon;
  EXPECT_EQ_I(clb_sym_new(sh, NULL, 0, 7, 1, 0, &anon), CLB_OK);
  EXPECT_EQ_S(clb_expr_str(sh, anon), "s4"); /* s0..s3 are taken by name */

  /* Evaluation with checked bindings. */
  clb_expr_t e;
  int64_t v = 0;
  REQUIRE_TRUE(clb_expr_parse(sh, "10*s1 + s0//4 - max(a, b)", 0, &e) == CLB_OK);
  clb_binding bind[3] = {{s1, 3}, {s0, 17}, {a, 9}};
  clb_binding bind4[4] = {{s1, 3}, {s0, 17}, {a, 9}, {b, 12}};
  EXPECT_EQ_I(clb_expr_eval(sh, e, bind, 3, &v), CLB_ERR_INVALID_ARG);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "no binding for b");
  EXPECT_EQ_I(clb_expr_eval(sh, e, bind4, 4, &v), CLB_OK);
  EXPECT_EQ_I(v, 30 + 4 - 12);
  bind4[0].value = 9;
  EXPECT_EQ_I(clb_expr_eval(sh, e, bind4, 4, &v), CLB_ERR_OUT_OF_BOUNDS);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "s1 = 9 outside [1, 8]");
  clb_binding b3[1] = {{s3, 6}};
  EXPECT_EQ_I(clb_expr_eval(sh, s3, b3, 1, &v), CLB_ERR_OUT_OF_BOUNDS);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "s3 = 6 is not 0 mod 4");
  b3[0].value = 8;
  EXPECT_EQ_I(clb_expr_eval(sh, s3, b3, 1, &v), CLB_OK);
  EXPECT_EQ_I(v, 8);

  /* Overflow: constants error, ranges saturate. */
  clb_expr_t big, sum;
  REQUIRE_TRUE(clb_expr_const(sh, INT64_MAX, &big) == CLB_OK);
  EXPECT_EQ_I(clb_expr_add(sh, big, one, &sum), CLB_ERR_OUT_OF_BOUNDS);
  clb_expr_t huge_sym, prod;
  REQUIRE_TRUE(clb_sym_new(sh, "h", 1, INT64_MAX / 2, 1, 0, &huge_sym) == CLB_OK);
  REQUIRE_TRUE(clb_expr_mul(sh, huge_sym, ten, &prod) == CLB_OK);
  EXPECT_EQ_I(clb_expr_max_of(prod), INT64_MAX);
  EXPECT_EQ_S(clb_expr_str(sh, prod), "10*h");
  clb_binding hb[1] = {{huge_sym, INT64_MAX / 4}};
  EXPECT_EQ_I(clb_expr_eval(sh, prod, hb, 1, &v), CLB_ERR_OUT_OF_BOUNDS);

  /* Division by something that may be 0. */
  clb_expr_t q;
  EXPECT_EQ_I(clb_expr_floordiv(sh, s0, s2, &q), CLB_ERR_DIV_ZERO);

  clb_shapes_free(sh);
  clb_shapes_free(NULL);
  return clb_test_finish("shapes/expr");
}
