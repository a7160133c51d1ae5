/* test-null-args.c: every call of the symbol engine given a NULL handle or out
 * pointer, or a bad argument with no handle to hold a message, returns its status
 * and says why in clb_last_errmsg(), naming the call (issue 16, C API edges). */
#include "clbound/shapes.h"
#include "test.h"

/* The call returned `want` and the thread's message names `fn`. */
#define EXPECT_LAST(call, want, fn)                                                        \
  do {                                                                                     \
    clear_except(fn);                                                                      \
    clb_status st_ = (call);                                                               \
    EXPECT_EQ_I(st_, want);                                                                \
    clb_test_checks++;                                                                     \
    if (!strstr(clb_last_errmsg(), fn))                                                    \
      CLB_FAIL_AT("%s: the message does not name %s: \"%s\"", #call, fn, clb_last_errmsg()); \
  } while (0)

/* Overwrites the thread's message through a failing call of another function,
 * so a stale message cannot pass the next check. */
static void clear_except(const char *fn) {
  int64_t ladder[2];
  size_t n;
  if (strcmp(fn, "clb_buckets_pow2") != 0) (void)clb_buckets_pow2(9, 4, ladder, 2, &n);
  else (void)clb_policy_set_max(NULL, 0, 0, 8);
}

int main(void) {
  clb_expr_t e = NULL;
  clb_shape s;
  memset(&s, 0, sizeof s);
  int64_t v = 0, dims[2] = {2, 3}, ladder[8];
  size_t n = 0;
  char buf[64];
  const char *names[1] = {"x"};
  int ranks[1] = {1};
  clb_decision d;
  int is_static = 0;
  EXPECT_LAST(clb_shapes_set_default_range(NULL, 0, 8), CLB_ERR_NULL, "clb_shapes_set_default_range");
  EXPECT_LAST(clb_expr_const(NULL, 3, &e), CLB_ERR_NULL, "clb_expr_const");
  EXPECT_LAST(clb_expr_min(NULL, e, e, &e), CLB_ERR_NULL, "clb_expr_min");
  EXPECT_LAST(clb_expr_max(NULL, e, e, &e), CLB_ERR_NULL, "clb_expr_max");
  EXPECT_LAST(clb_expr_print(NULL, e, buf, sizeof buf, &n), CLB_ERR_NULL, "clb_expr_print");
  EXPECT_LAST(clb_expr_parse(NULL, "s0", 0, &e), CLB_ERR_NULL, "clb_expr_parse");
  EXPECT_LAST(clb_expr_eval(NULL, e, NULL, 0, &v), CLB_ERR_NULL, "clb_expr_eval");
  EXPECT_LAST(clb_shapes_unify(NULL, e, e, "w"), CLB_ERR_NULL, "clb_shapes_unify");
  EXPECT_LAST(clb_shapes_resolve(NULL, e, &e), CLB_ERR_NULL, "clb_shapes_resolve");
  EXPECT_LAST(clb_shapes_check_eval(NULL, NULL, 0, &n), CLB_ERR_NULL, "clb_shapes_check_eval");
  EXPECT_LAST(clb_shapes_broadcast(NULL, e, e, "w", &e), CLB_ERR_NULL, "clb_shapes_broadcast");
  EXPECT_LAST(clb_shape_static(NULL, 2, dims, &s), CLB_ERR_NULL, "clb_shape_static");
  EXPECT_LAST(clb_shape_parse(NULL, "[2, 3]", 0, &s), CLB_ERR_NULL, "clb_shape_parse");
  EXPECT_LAST(clb_shape_numel(NULL, &s, &e), CLB_ERR_NULL, "clb_shape_numel");
  EXPECT_LAST(clb_shape_print(NULL, &s, buf, sizeof buf), CLB_ERR_NULL, "clb_shape_print");
  EXPECT_LAST(clb_op_infer(NULL, CLB_OP_UNARY, NULL, &s, names, 1, &s), CLB_ERR_NULL, "clb_op_infer");
  EXPECT_LAST(clb_guards_new(1, names, ranks, NULL), CLB_ERR_NULL, "clb_guards_new");
  EXPECT_LAST(clb_guards_add_shape(NULL, NULL, 0, &s), CLB_ERR_NULL, "clb_guards_add_shape");
  EXPECT_LAST(clb_guards_check(NULL, dims, 2), CLB_ERR_NULL, "clb_guards_check");
  EXPECT_LAST(clb_buckets_pow2(1, 64, ladder, 8, NULL), CLB_ERR_NULL, "clb_buckets_pow2");
  EXPECT_LAST(clb_buckets_pow2(9, 4, ladder, 8, &n), CLB_ERR_INVALID_ARG, "clb_buckets_pow2");
  EXPECT_LAST(clb_buckets_percentile(NULL, 4, 2, ladder, 8, &n), CLB_ERR_NULL, "clb_buckets_percentile");
  EXPECT_LAST(clb_buckets_percentile(dims, 0, 2, ladder, 8, &n), CLB_ERR_INVALID_ARG, "clb_buckets_percentile");
  EXPECT_LAST(clb_policy_new(CLB_POLICY_DYNAMIC, 1, names, ranks, NULL), CLB_ERR_NULL, "clb_policy_new");
  clb_policy_t p = NULL;
  EXPECT_LAST(clb_policy_new((clb_policy_kind)7, 1, names, ranks, &p), CLB_ERR_INVALID_ARG, "clb_policy_new");
  EXPECT_LAST(clb_policy_set_max(NULL, 0, 0, 8), CLB_ERR_NULL, "clb_policy_set_max");
  EXPECT_LAST(clb_policy_set_buckets(NULL, 0, 0, ladder, 2), CLB_ERR_NULL, "clb_policy_set_buckets");
  EXPECT_LAST(clb_policy_set_growth_cap(NULL, 8), CLB_ERR_NULL, "clb_policy_set_growth_cap");
  EXPECT_LAST(clb_policy_decide(NULL, dims, 1, &d), CLB_ERR_NULL, "clb_policy_decide");
  EXPECT_LAST(clb_policy_plan_bound(NULL, 0, 0, 0, &v, &is_static), CLB_ERR_NULL, "clb_policy_plan_bound");
  EXPECT_LAST(clb_shapes_new(NULL), CLB_ERR_NULL, "clb_shapes_new");
  return clb_test_finish("shapes/null-args");
}
