/* test-parse.c: parse errors with their status, position and words; symbol creation while parsing; shape text. */
#include "clbound/shapes.h"
#include "test.h"

typedef struct bad_row {
  const char *text;
  clb_status st;
  size_t pos;
  const char *msg;
} bad_row;

static const bad_row bad_rows[] = {
    {"max(s1", CLB_ERR_PARSE, 6, "at 6: expected ',' or ')' in the arguments in \"max(s1\""},
    {"s9 + 1", CLB_ERR_PARSE, 0, "at 0: unknown symbol s9 in \"s9 + 1\""},
    {"3 + * 4", CLB_ERR_PARSE, 4, "at 4: expected an expression, found '*' in \"3 + * 4\""},
    {"s0 / 2", CLB_ERR_PARSE, 3, "at 3: '/' is not an operator: use // (floor division) in \"s0 / 2\""},
    {"(s0", CLB_ERR_PARSE, 3, "at 3: expected ')' in \"(s0\""},
    {"", CLB_ERR_PARSE, 0, "at 0: expected an expression, found the end in \"\""},
    {"s0 s1", CLB_ERR_PARSE, 3, "at 3: unexpected 's' after the expression in \"s0 s1\""},
    {"foo(1)", CLB_ERR_PARSE, 0, "at 0: unknown function (only min and max) in \"foo(1)\""},
    {"max 1", CLB_ERR_PARSE, 4, "at 4: expected '(' after max in \"max 1\""},
    {"99999999999999999999", CLB_ERR_PARSE, 0, "at 0: integer literal too large in \"99999999999999999999\""},
    {"s0 // 0", CLB_ERR_DIV_ZERO, 3, "at 3: floor division by zero"},
    {"s0 % s2", CLB_ERR_DIV_ZERO, 3, "at 3: modulo by an expression in [0, 50]: the divisor must be >= 1"},
    {"9223372036854775807 + 1", CLB_ERR_OUT_OF_BOUNDS, 20,
     "at 20: integer overflow in a sum: a constant or coefficient passed the int64 limits"},
    {"s0 + \x01", CLB_ERR_PARSE, 5, "at 5: expected an expression, found byte 0x01 in \"s0 + \x01\""},
};

int main(void) {
  clb_shapes_t sh;
  REQUIRE_TRUE(clb_shapes_new(&sh) == CLB_OK);
  clb_expr_t s0, s1, s2, e;
  REQUIRE_TRUE(clb_sym_new(sh, "s0", 1, 100, 1, 0, &s0) == CLB_OK);
  REQUIRE_TRUE(clb_sym_new(sh, "s1", 1, 8, 1, 0, &s1) == CLB_OK);
  REQUIRE_TRUE(clb_sym_new(sh, "s2", 0, 50, 1, 0, &s2) == CLB_OK);

  for (size_t i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++) {
    const bad_row *r = &bad_rows[i];
    EXPECT_EQ_I(clb_expr_parse(sh, r->text, 0, &e), r->st);
    EXPECT_EQ_I(clb_shapes_errpos(sh), r->pos);
    EXPECT_EQ_S(clb_shapes_errmsg(sh), r->msg);
  }

  /* Nesting is limited, so hostile input cannot exhaust the stack. */
  char deep[1200];
  size_t n = 0;
  for (int i = 0; i < 500; i++) deep[n++] = '(';
  deep[n++] = '1';
  for (int i = 0; i < 500; i++) deep[n++] = ')';
  deep[n] = 0;
  EXPECT_EQ_I(clb_expr_parse(sh, deep, 0, &e), CLB_ERR_PARSE);
  EXPECT_TRUE(strstr(clb_shapes_errmsg(sh), "nesting deeper than 200") != NULL);
  n = 0;
  for (int i = 0; i < 50; i++) deep[n++] = '(';
  deep[n++] = 's';
  deep[n++] = '0';
  for (int i = 0; i < 50; i++) deep[n++] = ')';
  deep[n] = 0;
  EXPECT_EQ_I(clb_expr_parse(sh, deep, 0, &e), CLB_OK);
  EXPECT_TRUE(e == s0);

  /* Whitespace, unary minus, n-ary min/max. */
  EXPECT_EQ_I(clb_expr_parse(sh, " \t- -s0 ", 0, &e), CLB_OK);
  EXPECT_TRUE(e == s0);
  EXPECT_EQ_I(clb_expr_parse(sh, "max(s0, max(s1, s2), 3)", 0, &e), CLB_OK);
  EXPECT_EQ_S(clb_expr_str(sh, e), "max(s0,s1,s2,3)");
  EXPECT_EQ_I(clb_expr_parse(sh, "max(s1, 9, s2)", 0, &e), CLB_OK);
  EXPECT_EQ_S(clb_expr_str(sh, e), "max(s2,9)"); /* s1 <= 8 never beats 9 */

  /* Unknown symbols are created on request, with the default range. */
  EXPECT_EQ_I(clb_expr_parse(sh, "z + 1", 0, &e), CLB_ERR_PARSE);
  EXPECT_EQ_I(clb_expr_parse(sh, "z + 1", CLB_PARSE_CREATE, &e), CLB_OK);
  clb_expr_t z = clb_sym_find(sh, "z");
  REQUIRE_TRUE(z != NULL);
  EXPECT_EQ_I(clb_expr_min_of(z), 0);
  EXPECT_EQ_I(clb_expr_max_of(z), 2147483647);
  EXPECT_EQ_I(clb_shapes_set_default_range(sh, 1, 64), CLB_OK);
  EXPECT_EQ_I(clb_shapes_set_default_range(sh, 2, 1), CLB_ERR_INVALID_ARG);
  EXPECT_EQ_I(clb_expr_parse(sh, "w2 * 2", CLB_PARSE_CREATE, &e), CLB_OK);
  EXPECT_EQ_I(clb_expr_max_of(e), 128);

  /* Buffer printing. */
  char buf[8];
  size_t len = 0;
  REQUIRE_TRUE(clb_expr_parse(sh, "max(s1,s2) + 1", 0, &e) == CLB_OK);
  EXPECT_EQ_I(clb_expr_print(sh, e, buf, sizeof buf, &len), CLB_ERR_BUFFER_SMALL);
  EXPECT_EQ_I(len, 14);
  char big[32];
  EXPECT_EQ_I(clb_expr_print(sh, e, big, sizeof big, &len), CLB_OK);
  EXPECT_EQ_S(big, "max(s1,s2) + 1");

  /* Shapes as text. */
  clb_shape s;
  EXPECT_EQ_I(clb_shape_parse(sh, "[s0, 10*s1, 4]", 0, &s), CLB_OK);
  EXPECT_EQ_I(s.rank, 3);
  EXPECT_EQ_I(clb_shape_print(sh, &s, big, sizeof big), CLB_OK);
  EXPECT_EQ_S(big, "[s0, 10*s1, 4]");
  EXPECT_EQ_I(clb_shape_parse(sh, "s0,3", 0, &s), CLB_OK);
  EXPECT_EQ_I(s.rank, 2);
  EXPECT_EQ_I(clb_shape_parse(sh, "[]", 0, &s), CLB_OK);
  EXPECT_EQ_I(s.rank, 0);
  EXPECT_EQ_I(clb_shape_print(sh, &s, big, sizeof big), CLB_OK);
  EXPECT_EQ_S(big, "[]");
  EXPECT_EQ_I(clb_shape_parse(sh, "[1,2,3,4,5,6,7,8,9]", 0, &s), CLB_ERR_RANK);
  EXPECT_EQ_I(clb_shape_parse(sh, "[s0, 3", 0, &s), CLB_ERR_PARSE);
  EXPECT_EQ_S(clb_shapes_errmsg(sh), "at 6: expected ',' or ']' in \"[s0, 3\"");
  clb_shape st4;
  int64_t d4[3] = {2, 3, 4};
  EXPECT_EQ_I(clb_shape_static(sh, 3, d4, &st4), CLB_OK);
  EXPECT_EQ_I(clb_shape_print(sh, &st4, big, sizeof big), CLB_OK);
  EXPECT_EQ_S(big, "[2, 3, 4]");
  clb_expr_t numel;
  EXPECT_EQ_I(clb_shape_numel(sh, &st4, &numel), CLB_OK);
  EXPECT_EQ_I(clb_expr_value(numel), 24);

  /* A constant reduced modulo a huge divisor must not trust a saturated range:
   * (s0 - 1) % INT64_MAX once simplified to 0 (found by fuzz/shapes-parse). */
  static const struct {
    const char *text;
    int64_t at1, at64;
  } huge[] = {{"(s0 - 1) % 9223372036854775807", 0, 63},
              {"(s0 - 1) // 9223372036854775807", 0, 0},
              {"(2 - s0) % 9223372036854775807", 1, 9223372036854775807LL - 62},
              {"(s0 + 9223372036854775000) % 9223372036854775807", 9223372036854775001LL, 9223372036854775064LL}};
  for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
    REQUIRE_TRUE(clb_expr_parse(sh, huge[i].text, 0, &e) == CLB_OK);
    int64_t got = -1;
    clb_binding b1 = {s0, 1}, b64 = {s0, 64};
    EXPECT_EQ_I(clb_expr_eval(sh, e, &b1, 1, &got), CLB_OK);
    EXPECT_EQ_I(got, huge[i].at1);
    EXPECT_EQ_I(clb_expr_eval(sh, e, &b64, 1, &got), CLB_OK);
    EXPECT_EQ_I(got, huge[i].at64);
  }

  clb_shapes_free(sh);
  return clb_test_finish("shapes/parse");
}
