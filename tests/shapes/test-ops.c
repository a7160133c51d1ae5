/* test-ops.c: the shape rule of every op in the table, with its errors in words. */
#include "clbound/shapes.h"
#include "test.h"

static clb_shapes_t sh;

static clb_shape S(const char *text) {
  clb_shape s;
  s.rank = 0;
  if (clb_shape_parse(sh, text, 0, &s) != CLB_OK) CLB_FAIL_AT("shape \"%s\": %s", text, clb_shapes_errmsg(sh));
  return s;
}

static char outbuf[256];

/* Runs op on inputs; returns the printed output shape, or "error: <message>". */
static const char *run(clb_op op, const clb_op_params *p, const clb_shape *in, const char *const *names, size_t n) {
  clb_shape out;
  clb_status st = clb_op_infer(sh, op, p, in, names, n, &out);
  if (st != CLB_OK) snprintf(outbuf, sizeof outbuf, "error %s: %s", clb_status_name(st), clb_shapes_errmsg(sh));
  else if (clb_shape_print(sh, &out, outbuf, sizeof outbuf) != CLB_OK) snprintf(outbuf, sizeof outbuf, "print error");
  return outbuf;
}

static const char *run1(clb_op op, const clb_op_params *p, const char *x) {
  clb_shape in[1] = {S(x)};
  const char *names[1] = {"x"};
  return run(op, p, in, names, 1);
}

static const char *run2(clb_op op, const clb_op_params *p, const char *a, const char *b, const char *na,
                        const char *nb) {
  clb_shape in[2] = {S(a), S(b)};
  const char *names[2] = {na, nb};
  return run(op, p, in, names, 2);
}

static clb_expr_t E(const char *text) {
  clb_expr_t e = NULL;
  if (clb_expr_parse(sh, text, 0, &e) != CLB_OK) CLB_FAIL_AT("parse \"%s\": %s", text, clb_shapes_errmsg(sh));
  return e;
}

int main(void) {
  REQUIRE_TRUE(clb_shapes_new(&sh) == CLB_OK);
  clb_expr_t e;
  REQUIRE_TRUE(clb_sym_new(sh, "B", 1, 4096, 1, 0, &e) == CLB_OK);
  REQUIRE_TRUE(clb_sym_new(sh, "B0", 1, 100, 1, 0, &e) == CLB_OK);
  REQUIRE_TRUE(clb_sym_new(sh, "s0", 1, 64, 1, 0, &e) == CLB_OK);
  REQUIRE_TRUE(clb_sym_new(sh, "s1", 1, 64, 1, 0, &e) == CLB_OK);
  REQUIRE_TRUE(clb_sym_new(sh, "k", 1, 512, 1, 0, &e) == CLB_OK);
  REQUIRE_TRUE(clb_sym_new(sh, "k2", 1, 512, 1, 0, &e) == CLB_OK);
  REQUIRE_TRUE(clb_sym_new(sh, "s4", 1, 64, 1, 0, &e) == CLB_OK);
  REQUIRE_TRUE(clb_sym_new(sh, "s6", 1, 64, 1, 0, &e) == CLB_OK);
  clb_op_params p;

  /* ---- table metadata ---- */
  EXPECT_EQ_S(clb_op_name(CLB_OP_MASKED_SELECT), "masked_select");
  EXPECT_EQ_S(clb_op_name(CLB_OP_COUNT), "unknown");
  for (int op = 0; op < CLB_OP_COUNT; op++) EXPECT_TRUE(strcmp(clb_op_name((clb_op)op), "unknown") != 0);
  EXPECT_EQ_S(run1(CLB_OP_BINARY, NULL, "[s0]"), "error ERR_INVALID_ARG: binary takes 2 to 2 inputs, got 1");

  /* ---- elementwise ---- */
  EXPECT_EQ_S(run1(CLB_OP_UNARY, NULL, "[B, 10]"), "[B, 10]");
  EXPECT_EQ_S(run2(CLB_OP_BINARY, NULL, "[B, 10]", "[10]", "a", "b"), "[B, 10]");
  EXPECT_EQ_S(run2(CLB_OP_BINARY, NULL, "[B, 1]", "[1, s0]", "a", "b"), "[B, s0]");
  EXPECT_EQ_S(run2(CLB_OP_BINARY, NULL, "[3, 4]", "[5, 4]", "a", "b"), "error ERR_CONTRADICTION: dim 0 of b: 3 vs 5");
  EXPECT_EQ_S(run2(CLB_OP_BINARY, NULL, "[B, 4]", "[s0, 4]", "a", "b"), "[max(B,s0), 4]");
  {
    clb_shape in[3] = {S("[B, 1]"), S("[1, 10]"), S("[]")};
    EXPECT_EQ_S(run(CLB_OP_WHERE, NULL, in, NULL, 3), "[B, 10]");
  }

  /* ---- reductions ---- */
  clb_op_params_init(&p);
  p.dim = 1;
  EXPECT_EQ_S(run1(CLB_OP_SUM, &p, "[B, 10, s0]"), "[B, s0]");
  p.keepdim = 1;
  EXPECT_EQ_S(run1(CLB_OP_MEAN, &p, "[B, 10, s0]"), "[B, 1, s0]");
  p.dim = -1;
  p.keepdim = 0;
  EXPECT_EQ_S(run1(CLB_OP_MAX, &p, "[B, 10, s0]"), "[B, 10]");
  p.all = 1;
  EXPECT_EQ_S(run1(CLB_OP_SUM, &p, "[B, 10]"), "[]");
  p.keepdim = 1;
  EXPECT_EQ_S(run1(CLB_OP_SUM, &p, "[B, 10]"), "[1, 1]");
  clb_op_params_init(&p);
  p.dim = 2;
  EXPECT_EQ_S(run1(CLB_OP_SUM, &p, "[B, 10]"), "error ERR_INVALID_ARG: sum: dim 2 out of range for rank 2");

  /* ---- matmul and linear ---- */
  EXPECT_EQ_S(run2(CLB_OP_MATMUL, NULL, "[B, k]", "[k2, 32]", "a", "b"), "[B, 32]");
  EXPECT_EQ_S(clb_expr_str(sh, clb_sym_find(sh, "k2")), "k2");
  {
    clb_expr_t k2 = clb_sym_find(sh, "k2"), r;
    REQUIRE_TRUE(clb_shapes_resolve(sh, k2, &r) == CLB_OK);
    EXPECT_EQ_S(clb_expr_str(sh, r), "k"); /* inner dims unified */
  }
  EXPECT_EQ_S(run2(CLB_OP_MATMUL, NULL, "[B, 16]", "[8, 32]", "a", "b"), "error ERR_CONTRADICTION: dim 0 of b: 16 vs 8");
  EXPECT_EQ_S(run2(CLB_OP_MATMUL, NULL, "[4, B, 16]", "[16, 8]", "a", "b"), "[4, B, 8]");
  EXPECT_EQ_S(run2(CLB_OP_MATMUL, NULL, "[s0, 1, B, 16]", "[3, 16, 8]", "a", "b"), "[s0, 3, B, 8]");
  EXPECT_EQ_S(run2(CLB_OP_MATMUL, NULL, "[16]", "[16]", "a", "b"), "[]");
  EXPECT_EQ_S(run2(CLB_OP_MATMUL, NULL, "[B, 16]", "[16]", "a", "b"), "[B]");
  EXPECT_EQ_S(run2(CLB_OP_MATMUL, NULL, "[16]", "[16, 8]", "a", "b"), "[8]");
  clb_op_params_init(&p);
  p.trans_b = 1;
  EXPECT_EQ_S(run2(CLB_OP_MATMUL, &p, "[B, 16]", "[32, 16]", "a", "b"), "[B, 32]");
  EXPECT_EQ_S(run2(CLB_OP_MATMUL, &p, "[B, 16]", "[32, 15]", "a", "b"), "error ERR_CONTRADICTION: dim 1 of b: 16 vs 15");
  p.trans_b = 0;
  p.trans_a = 1;
  EXPECT_EQ_S(run2(CLB_OP_MATMUL, &p, "[16, B]", "[16, 32]", "a", "b"), "[B, 32]");
  {
    clb_shape in[3] = {S("[B, 16]"), S("[32, 16]"), S("[32]")};
    const char *names[3] = {"x", "w", "bias"};
    EXPECT_EQ_S(run(CLB_OP_LINEAR, NULL, in, names, 3), "[B, 32]");
    in[2] = S("[31]");
    EXPECT_EQ_S(run(CLB_OP_LINEAR, NULL, in, names, 3), "error ERR_CONTRADICTION: dim 0 of bias: 31 vs 32");
  }
  /* The example: x's inner dim s4 is 3, w's s6 is 5. */
  EXPECT_EQ_I(clb_shapes_unify(sh, E("s4"), E("3"), "x"), CLB_OK);
  EXPECT_EQ_I(clb_shapes_unify(sh, E("s6"), E("5"), "w"), CLB_OK);
  EXPECT_EQ_S(run2(CLB_OP_LINEAR, NULL, "[B, s4]", "[8, s6]", "x", "w"),
              "error ERR_CONTRADICTION: dim 1 of w: s4 = 3 vs s6 = 5");

  /* ---- views ---- */
  clb_expr_t target[3];
  clb_op_params_init(&p);
  p.target = target;
  p.target_rank = 2;
  target[0] = NULL;
  target[1] = E("5");
  EXPECT_EQ_S(run1(CLB_OP_RESHAPE, &p, "[B, 10]"), "[2*B, 5]");
  target[1] = E("4");
  EXPECT_EQ_S(run1(CLB_OP_VIEW, &p, "[6, 5]"), "error ERR_SHAPE: view: 30 elements of x do not split into parts of 4");
  size_t before = clb_shapes_check_count(sh);
  target[1] = E("3");
  EXPECT_EQ_S(run1(CLB_OP_RESHAPE, &p, "[B, 10]"), "[10*B//3, 3]");
  EXPECT_EQ_I(clb_shapes_check_count(sh), before + 1); /* B % 3 == 0 is checked where B is known */
  EXPECT_EQ_S(clb_expr_str(sh, clb_shapes_check_at(sh, before)->a), "B%3");
  p.target_rank = 1;
  target[0] = E("10*B");
  EXPECT_EQ_S(run1(CLB_OP_RESHAPE, &p, "[B, 10]"), "[10*B]");
  target[0] = E("11*B");
  EXPECT_EQ_S(run1(CLB_OP_RESHAPE, &p, "[B, 10]"),
              "error ERR_CONTRADICTION: number of elements of x: 10*B in [10, 40960] vs 11*B in [11, 45056]: never equal");
  p.target_rank = 3;
  target[0] = NULL;
  target[1] = NULL;
  EXPECT_EQ_S(run1(CLB_OP_RESHAPE, &p, "[B, 10]"), "error ERR_INVALID_ARG: reshape: more than one inferred dim (0 and 1)");
  clb_op_params_init(&p);
  p.dim = 1;
  p.dim2 = 2;
  EXPECT_EQ_S(run1(CLB_OP_FLATTEN, &p, "[B, s0, 4, 2]"), "[B, 4*s0, 2]");
  clb_op_params_init(&p);
  EXPECT_EQ_S(run1(CLB_OP_FLATTEN, &p, "[B, s0, 4]"), "[4*B*s0]");
  EXPECT_EQ_S(run1(CLB_OP_FLATTEN, &p, "[]"), "[1]");
  clb_op_params_init(&p);
  p.dim = 1;
  EXPECT_EQ_S(run1(CLB_OP_SQUEEZE, &p, "[B, 1, 4]"), "[B, 4]");
  p.dim = 2;
  EXPECT_EQ_S(run1(CLB_OP_SQUEEZE, &p, "[B, 1, 4]"), "[B, 1, 4]"); /* a dim known > 1 stays */
  p.dim = 0;
  EXPECT_EQ_S(run1(CLB_OP_SQUEEZE, &p, "[B, 1, 4]"), "error ERR_SHAPE: squeeze: dim 0 of x is B, which may or may not be 1");
  p.all = 1;
  EXPECT_EQ_S(run1(CLB_OP_SQUEEZE, &p, "[1, B, 1, 4]"), "[B, 4]");
  clb_op_params_init(&p);
  EXPECT_EQ_S(run1(CLB_OP_UNSQUEEZE, &p, "[B, 4]"), "[1, B, 4]");
  p.dim = -1;
  EXPECT_EQ_S(run1(CLB_OP_UNSQUEEZE, &p, "[B, 4]"), "[B, 4, 1]");
  EXPECT_EQ_S(run1(CLB_OP_UNSQUEEZE, &p, "[1,1,1,1,1,1,1,1]"), "error ERR_RANK: unsqueeze: rank 8 is already 8");
  clb_op_params_init(&p);
  p.dim = 0;
  p.dim2 = 2;
  EXPECT_EQ_S(run1(CLB_OP_TRANSPOSE, &p, "[B, 4, s0]"), "[s0, 4, B]");
  clb_op_params_init(&p);
  EXPECT_EQ_S(run1(CLB_OP_TRANSPOSE, &p, "[B, 4]"), "[4, B]");

  /* ---- concat ---- */
  clb_op_params_init(&p);
  EXPECT_EQ_S(run2(CLB_OP_CONCAT, &p, "[B, 4]", "[s0, 4]", "x", "y"), "[B + s0, 4]");
  EXPECT_EQ_S(run2(CLB_OP_CONCAT, &p, "[B, 4]", "[B, 4]", "x", "y"), "[2*B, 4]");
  EXPECT_EQ_S(run2(CLB_OP_CONCAT, &p, "[B, 4]", "[s0, 5]", "x", "y"), "error ERR_CONTRADICTION: dim 1 of y: 4 vs 5");
  p.dim = 1;
  EXPECT_EQ_S(run2(CLB_OP_CONCAT, &p, "[B, 4]", "[B, 5]", "x", "y"), "[B, 9]");
  EXPECT_EQ_S(run2(CLB_OP_CONCAT, &p, "[B, 4]", "[4]", "x", "y"), "error ERR_RANK: concat: y has rank 1, input 0 rank 2");

  /* ---- data-dependent sizes ---- */
  clb_shape out;
  clb_shape in1[1] = {S("[B0, 5]")};
  const char *xn[1] = {"x"};
  REQUIRE_TRUE(clb_op_infer(sh, CLB_OP_NONZERO, NULL, in1, xn, 1, &out) == CLB_OK);
  EXPECT_EQ_I(out.rank, 2);
  EXPECT_TRUE(clb_sym_is_unbacked(out.dims[0]));
  EXPECT_EQ_I(clb_expr_min_of(out.dims[0]), 0);
  EXPECT_EQ_I(clb_expr_max_of(out.dims[0]), 500); /* 5 * B0's bound */
  EXPECT_EQ_I(clb_expr_value(out.dims[1]), 2);
  EXPECT_EQ_S(clb_sym_origin(sh, out.dims[0]), "nonzero of x");
  clb_expr_t u_first = out.dims[0];

  /* masked_select with a mask broadcast along a static 10: the count is 10*u. */
  {
    clb_shape in[2] = {S("[B0, 10]"), S("[B0, 1]")};
    const char *names[2] = {"x", "mask"};
    REQUIRE_TRUE(clb_op_infer(sh, CLB_OP_MASKED_SELECT, NULL, in, names, 2, &out) == CLB_OK);
    EXPECT_EQ_I(out.rank, 1);
    clb_expr_t cnt = out.dims[0];
    REQUIRE_TRUE(clb_expr_kind_of(cnt) == CLB_EXPR_MUL);
    clb_expr_t u = clb_expr_arg(cnt, 0);
    EXPECT_EQ_I(clb_expr_value(cnt), 10);
    EXPECT_TRUE(clb_sym_is_unbacked(u));
    EXPECT_EQ_I(clb_expr_max_of(u), 100);
    EXPECT_EQ_I(clb_expr_max_of(cnt), 1000);
    EXPECT_EQ_S(clb_sym_origin(sh, u), "true bits of mask");
    /* ... so the result views as [u, 10], with -1 or explicitly. */
    clb_op_params_init(&p);
    clb_expr_t t2[2] = {NULL, E("10")};
    p.target = t2;
    p.target_rank = 2;
    clb_shape v;
    before = clb_shapes_check_count(sh);
    REQUIRE_TRUE(clb_op_infer(sh, CLB_OP_VIEW, &p, &out, names, 1, &v) == CLB_OK);
    EXPECT_TRUE(v.dims[0] == u);
    EXPECT_EQ_I(clb_shapes_check_count(sh), before); /* exact: nothing to check */
    t2[0] = u;
    REQUIRE_TRUE(clb_op_infer(sh, CLB_OP_VIEW, &p, &out, names, 1, &v) == CLB_OK);
    EXPECT_TRUE(v.dims[0] == u);
    EXPECT_EQ_I(clb_expr_value(v.dims[1]), 10);
  }
  /* A mask of x's own shape: a plain count up to numel. */
  {
    clb_shape in[2] = {S("[B0, 10]"), S("[B0, 10]")};
    REQUIRE_TRUE(clb_op_infer(sh, CLB_OP_MASKED_SELECT, NULL, in, NULL, 2, &out) == CLB_OK);
    EXPECT_TRUE(clb_sym_is_unbacked(out.dims[0]));
    EXPECT_EQ_I(clb_expr_max_of(out.dims[0]), 1000);
  }
  /* masked_scatter: x's shape, and a device check that the source is long enough. */
  {
    clb_shape in[3] = {S("[B0, 10]"), S("[B0, 1]"), S("[s0]")};
    const char *names[3] = {"x", "mask", "src"};
    before = clb_shapes_check_count(sh);
    EXPECT_EQ_S(run(CLB_OP_MASKED_SCATTER, NULL, in, names, 3), "[B0, 10]");
    EXPECT_EQ_I(clb_shapes_check_count(sh), before + 1);
    const clb_check *c = clb_shapes_check_at(sh, before);
    REQUIRE_TRUE(c != NULL);
    EXPECT_EQ_I(c->kind, CLB_CHECK_GE);
    EXPECT_EQ_I(c->on_device, 1);
    EXPECT_EQ_S(clb_expr_str(sh, c->a), "s0");
    EXPECT_EQ_S(c->what, "masked_scatter: elements of src >= true bits of mask");
    in[1] = S("[2, B0, 10]");
    EXPECT_EQ_S(run(CLB_OP_MASKED_SCATTER, NULL, in, names, 3),
                "error ERR_SHAPE: masked_scatter: the mask has more dims than x (3 > 2)");
  }
  /* Two counts from two nonzero calls must match for a matmul: a deferred device check. */
  {
    clb_shape in2[1] = {S("[B0, 3]")};
    clb_shape o2;
    REQUIRE_TRUE(clb_op_infer(sh, CLB_OP_NONZERO, NULL, in2, xn, 1, &o2) == CLB_OK);
    clb_op_params_init(&p);
    clb_shape a_t;
    clb_shape nz1 = {2, {u_first, NULL}};
    REQUIRE_TRUE(clb_expr_const(sh, 2, &nz1.dims[1]) == CLB_OK);
    REQUIRE_TRUE(clb_op_infer(sh, CLB_OP_TRANSPOSE, &p, &nz1, NULL, 1, &a_t) == CLB_OK);
    clb_shape mm[2] = {a_t, o2};
    before = clb_shapes_check_count(sh);
    const char *names[2] = {"a", "b"};
    EXPECT_EQ_S(run(CLB_OP_MATMUL, NULL, mm, names, 2), "[2, 2]");
    EXPECT_EQ_I(clb_shapes_check_count(sh), before + 1);
    const clb_check *c = clb_shapes_check_at(sh, before);
    EXPECT_EQ_I(c->on_device, 1);
    EXPECT_EQ_I(c->kind, CLB_CHECK_EQ);
    EXPECT_EQ_S(c->what, "dim 0 of b");
  }

  clb_shapes_free(sh);
  return clb_test_finish("shapes/ops");
}
