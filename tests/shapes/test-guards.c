/* test-guards.c: a plan's guards, written by hand and derived from symbolic shapes, failing in words. */
#include "clbound/shapes.h"
#include "test.h"

int main(void) {
  const char *names[2] = {"x", "w"};
  int ranks[2] = {2, 2};
  clb_guards_t g;
  REQUIRE_TRUE(clb_guards_new(2, names, ranks, &g) == CLB_OK);
  EXPECT_EQ_I(clb_guards_add_range(g, 0, 0, 1, 4096), CLB_OK);
  EXPECT_EQ_I(clb_guards_add_eq(g, 0, 1, 256), CLB_OK);
  EXPECT_EQ_I(clb_guards_add_same(g, 0, 1, 1, 0), CLB_OK);
  EXPECT_EQ_I(clb_guards_add_divisible(g, 1, 1, 8), CLB_OK);
  EXPECT_EQ_I(clb_guards_add_eq(g, 2, 0, 1), CLB_ERR_INVALID_ARG);
  EXPECT_EQ_I(clb_guards_add_eq(g, 0, 2, 1), CLB_ERR_INVALID_ARG);
  EXPECT_EQ_I(clb_guards_add_range(g, 0, 0, 5, 4), CLB_ERR_INVALID_ARG);
  EXPECT_EQ_I(clb_guards_count(g), 4);
  EXPECT_EQ_S(clb_guards_describe(g, 0), "dim 0 of x in [1, 4096]");
  EXPECT_EQ_S(clb_guards_describe(g, 1), "dim 1 of x == 256");
  EXPECT_EQ_S(clb_guards_describe(g, 2), "dim 1 of x == dim 0 of w");
  EXPECT_EQ_S(clb_guards_describe(g, 3), "dim 1 of w % 8 == 0");
  EXPECT_TRUE(clb_guards_describe(g, 4) == NULL);

  int64_t ok[4] = {32, 256, 256, 64};
  EXPECT_EQ_I(clb_guards_check(g, ok, 4), CLB_OK);
  EXPECT_EQ_I(clb_guards_check(g, ok, 3), CLB_ERR_INVALID_ARG);

  int64_t d1[4] = {5000, 256, 256, 64};
  EXPECT_EQ_I(clb_guards_check(g, d1, 4), CLB_ERR_GUARD);
  EXPECT_EQ_S(clb_guards_errmsg(g), "dim 0 of x: 5000 > bound 4096");
  int64_t d2[4] = {0, 256, 256, 64};
  EXPECT_EQ_I(clb_guards_check(g, d2, 4), CLB_ERR_GUARD);
  EXPECT_EQ_S(clb_guards_errmsg(g), "dim 0 of x: 0 < min 1");
  int64_t d3[4] = {32, 255, 255, 64};
  EXPECT_EQ_I(clb_guards_check(g, d3, 4), CLB_ERR_GUARD);
  EXPECT_EQ_S(clb_guards_errmsg(g), "dim 1 of x: 255 != static 256");
  int64_t d4[4] = {32, 256, 255, 64};
  EXPECT_EQ_I(clb_guards_check(g, d4, 4), CLB_ERR_GUARD);
  EXPECT_EQ_S(clb_guards_errmsg(g), "dim 1 of x: 256 != dim 0 of w: 255");
  int64_t d5[4] = {32, 256, 256, 30};
  EXPECT_EQ_I(clb_guards_check(g, d5, 4), CLB_ERR_GUARD);
  EXPECT_EQ_S(clb_guards_errmsg(g), "dim 1 of w: 30 is not a multiple of 8");
  int64_t d6[4] = {5000, 255, 256, 30}; /* the first failing guard is reported */
  EXPECT_EQ_I(clb_guards_check(g, d6, 4), CLB_ERR_GUARD);
  EXPECT_EQ_S(clb_guards_errmsg(g), "dim 0 of x: 5000 > bound 4096");
  clb_guards_free(g);
  clb_guards_free(NULL);

  /* Guards derived from the symbolic input shapes a plan was built for. */
  clb_shapes_t sh;
  REQUIRE_TRUE(clb_shapes_new(&sh) == CLB_OK);
  clb_expr_t e;
  REQUIRE_TRUE(clb_sym_new(sh, "B", 1, 4096, 1, 0, &e) == CLB_OK);
  REQUIRE_TRUE(clb_sym_new(sh, "T", 4, 512, 4, 0, &e) == CLB_OK);
  const char *n3[3] = {"x", "mask", "y"};
  int r3[3] = {2, 2, 1};
  REQUIRE_TRUE(clb_guards_new(3, n3, r3, &g) == CLB_OK);
  clb_shape sx, sm, sy;
  REQUIRE_TRUE(clb_shape_parse(sh, "[B, T]", 0, &sx) == CLB_OK);
  REQUIRE_TRUE(clb_shape_parse(sh, "[B, 1]", 0, &sm) == CLB_OK);
  REQUIRE_TRUE(clb_shape_parse(sh, "[2*B]", 0, &sy) == CLB_OK);
  EXPECT_EQ_I(clb_guards_add_shape(g, sh, 0, &sx), CLB_OK);
  EXPECT_EQ_I(clb_guards_add_shape(g, sh, 1, &sm), CLB_OK);
  EXPECT_EQ_I(clb_guards_add_shape(g, sh, 2, &sy), CLB_OK);
  EXPECT_EQ_I(clb_guards_add_shape(g, sh, 2, &sx), CLB_ERR_RANK);
  EXPECT_EQ_I(clb_guards_count(g), 6);
  EXPECT_EQ_S(clb_guards_describe(g, 0), "dim 0 of x in [1, 4096]");
  EXPECT_EQ_S(clb_guards_describe(g, 1), "dim 1 of x in [4, 512]");
  EXPECT_EQ_S(clb_guards_describe(g, 2), "dim 1 of x % 4 == 0");
  EXPECT_EQ_S(clb_guards_describe(g, 3), "dim 0 of mask == dim 0 of x");
  EXPECT_EQ_S(clb_guards_describe(g, 4), "dim 1 of mask == 1");
  EXPECT_EQ_S(clb_guards_describe(g, 5), "dim 0 of y in [2, 8192]");
  int64_t good[5] = {7, 12, 7, 1, 14};
  EXPECT_EQ_I(clb_guards_check(g, good, 5), CLB_OK);
  int64_t bad1[5] = {7, 13, 7, 1, 14};
  EXPECT_EQ_I(clb_guards_check(g, bad1, 5), CLB_ERR_GUARD);
  EXPECT_EQ_S(clb_guards_errmsg(g), "dim 1 of x: 13 is not a multiple of 4");
  int64_t bad2[5] = {7, 12, 8, 1, 14};
  EXPECT_EQ_I(clb_guards_check(g, bad2, 5), CLB_ERR_GUARD);
  EXPECT_EQ_S(clb_guards_errmsg(g), "dim 0 of mask: 8 != dim 0 of x: 7");
  int64_t bad3[5] = {7, 12, 7, 2, 14};
  EXPECT_EQ_I(clb_guards_check(g, bad3, 5), CLB_ERR_GUARD);
  EXPECT_EQ_S(clb_guards_errmsg(g), "dim 1 of mask: 2 != static 1");
  clb_guards_free(g);
  clb_shapes_free(sh);
  return clb_test_finish("shapes/guards");
}
