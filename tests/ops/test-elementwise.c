/* test-elementwise.c: binary ops with broadcasting, unary ops, casts and fill
 * against a double-precision reference, with canaries after every output. */
#include "cl-test.h"

/* Sizes around the work-group (64 on PoCL) and the chunking (16 groups). */
static const int64_t SIZES[] = {0, 1, 63, 64, 65, 127, 128, 129, 1023, 1024, 1025, 1500};
#define NSIZES (int)(sizeof SIZES / sizeof SIZES[0])
/* Reduced sizes (the oclgrind label): empty, within one CPU work-group, and
 * over several GPU ones. */
static int keep_size(int s) { return !clb_test_small() || SIZES[s] == 0 || SIZES[s] == 65 || SIZES[s] == 1025; }
/* Reduced sizes also keep one floating and one integer dtype (plus bool where
 * it is a case of its own): each (dtype, op) is a program of its own, and
 * Oclgrind compiles every program it runs. */
static int keep_dtype(int dt) {
  return !clb_test_small() || dt == CLB_DTYPE_F32 || dt == CLB_DTYPE_I32 || dt == CLB_DTYPE_BOOL;
}
#define BOUND 1500

static int has_fp64;

/* What a value becomes when stored in dtype dt (integer wrap, float rounding). */
static double as_dtype(clb_dtype dt, double v) {
  switch (dt) {
  case CLB_DTYPE_F32: return (double)(float)v;
  case CLB_DTYPE_F64: return v;
  case CLB_DTYPE_I32: return (double)(int32_t)(uint32_t)(int64_t)v;
  case CLB_DTYPE_I64: return (double)(int64_t)v;
  case CLB_DTYPE_U8: return (double)(uint8_t)(int64_t)v;
  default: return v != 0.0;
  }
}

/* Python's float floor division (numpy's floor_divide), written from its
 * definition: floor of the exact quotient; x / y for y == 0. */
static double ref_floordiv(double x, double y) {
  if (y == 0) return x / y;
  double m = fmod(x, y), d = (x - m) / y;
  if (m != 0 && ((y < 0) != (m < 0))) d -= 1;
  if (d == 0) return copysign(0.0, x / y);
  double f = floor(d);
  return d - f > 0.5 ? f + 1 : f;
}

static double ref_binary(clb_binary_op op, clb_dtype dt, double a, double b) {
  int fl = dt == CLB_DTYPE_F32 || dt == CLB_DTYPE_F64;
  double r;
  switch (op) {
  case CLB_BINARY_ADD: r = a + b; break;
  case CLB_BINARY_SUB: r = a - b; break;
  case CLB_BINARY_MUL: r = a * b; break;
  case CLB_BINARY_DIV: r = a / b; break;
  case CLB_BINARY_REM:
    r = fl ? fmod(a, b) : (double)((int64_t)a % (int64_t)b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    break;
  case CLB_BINARY_MAX: r = a > b ? a : b; break;
  case CLB_BINARY_MIN: r = a < b ? a : b; break;
  case CLB_BINARY_POW: r = pow(a, b); break;
  default: r = fl ? ref_floordiv(a, b) : floor(a / b); break; /* small integers: a / b is exact enough */
  }
  return as_dtype(dt, r);
}

/* Test values of a dtype: small integers, or floats away from zero for div. */
static double gen(clb_dtype dt, int nonzero) {
  uint64_t r = clb_test_next();
  if (dt == CLB_DTYPE_F32 || dt == CLB_DTYPE_F64) {
    double v = 0.5 + (double)(r % 1500) / 1000.0;
    return as_dtype(dt, (r >> 20) & 1 ? -v : v);
  }
  if (dt == CLB_DTYPE_U8) return (double)(nonzero ? 1 + r % 40 : r % 41);
  int64_t v = (int64_t)(r % 41) - 20;
  if (nonzero && v == 0) v = 7;
  return (double)v;
}

static void expect_value(clb_dtype dt, double got, double want, const char *what, int64_t i) {
  int fl = dt == CLB_DTYPE_F32 || dt == CLB_DTYPE_F64;
  double d = fabs(got - want);
  clb_test_checks++;
  if (fl ? !(d <= 1e-3 || d <= 5e-3 * fabs(want)) : got != want)
    CLB_FAIL_AT("%s [%lld]: got %.9g want %.9g", what, (long long)i, got, want);
}

/* Broadcast cases: a's and b's bounds and dynamic flags, and the actual dims
 * as a function of n (the varying size). */
typedef struct bcase {
  const char *name;
  int ra, rb;
  int64_t ba[4], bb[4];
  uint8_t ya[4], yb[4];
} bcase;

static const bcase CASES[] = {
    {"same [<=B]", 1, 1, {BOUND}, {BOUND}, {1}, {1}},
    {"rows [<=B,3] + [3]", 2, 1, {BOUND, 3}, {3}, {1, 0}, {0}},
    {"left [3] + [<=B,3]", 1, 2, {3}, {BOUND, 3}, {0}, {1, 0}},
    {"column [<=B,3] + [<=B,1]", 2, 2, {BOUND, 3}, {BOUND, 1}, {1, 0}, {1, 0}},
    {"scalar [] + [<=B]", 0, 1, {0}, {BOUND}, {0}, {1}},
    {"outer [<=B,1] * [1,4]", 2, 2, {BOUND, 1}, {1, 4}, {1, 0}, {0, 0}},
    {"rank4 [2,<=B,1,5] * [<=B,4,1]", 4, 3, {2, BOUND, 1, 5}, {BOUND, 4, 1}, {0, 1, 0, 0}, {1, 0, 0}},
};
#define NCASES (int)(sizeof CASES / sizeof CASES[0])

static void actual_dims(int rank, const int64_t *bounds, const uint8_t *dyn, int64_t n, int64_t *dims) {
  for (int d = 0; d < rank; d++) dims[d] = dyn[d] ? n : bounds[d];
}

/* Reference broadcast: the output dims and, for each output index, the flat
 * input indices. */
static int64_t bcast_index(int ro, const int64_t *od, int64_t i, int r, const int64_t *dims) {
  int64_t idx = 0, stride = 1;
  for (int d = ro - 1; d >= 0; d--) {
    int64_t c = i % od[d];
    i /= od[d];
    int k = d - (ro - r);
    if (k < 0) continue;
    if (dims[k] != 1) idx += c * stride;
    stride *= dims[k];
  }
  return idx;
}

static void run_binary(clb_context_t ctx, clb_binary_op op, clb_dtype dt, const bcase *c) {
  static double va[BOUND * 40], vb[BOUND * 40], out[BOUND * 40];
  clb_tensor_t a = NULL, b = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, dt, c->ra, c->ba, c->ya, &a));
  CL_OK(ctx, clb_tensor_new(ctx, dt, c->rb, c->bb, c->yb, &b));
  int ro = c->ra > c->rb ? c->ra : c->rb;
  for (int s = 0; s < NSIZES; s++) {
    if (!keep_size(s)) continue;
    int64_t n = SIZES[s];
    int64_t da[4], db[4], od[4], got_dims[4];
    actual_dims(c->ra, c->ba, c->ya, n, da);
    actual_dims(c->rb, c->bb, c->yb, n, db);
    int64_t na = clb_test_numel(c->ra, da), nb = clb_test_numel(c->rb, db);
    for (int64_t i = 0; i < na; i++) va[i] = op == CLB_BINARY_POW ? fabs(gen(dt, 0)) : gen(dt, 0); /* real powers */
    for (int64_t i = 0; i < nb; i++)
      vb[i] = gen(dt, op == CLB_BINARY_DIV || op == CLB_BINARY_REM || op == CLB_BINARY_FLOORDIV);
    clb_test_write(ctx, a, da, va);
    clb_test_write(ctx, b, db, vb);
    if (!o) { /* let the op create the output once, then reuse it */
      CL_OK(ctx, clb_binary(ctx, op, a, b, &o));
    }
    clb_test_canary_fill(ctx, o);
    CL_OK(ctx, clb_binary(ctx, op, a, b, &o));
    for (int d = 0; d < ro; d++) {
      int ka = d - (ro - c->ra), kb = d - (ro - c->rb);
      int64_t x = ka >= 0 ? da[ka] : 1, y = kb >= 0 ? db[kb] : 1;
      od[d] = x == 1 ? y : y == 1 ? x : (x < y ? x : y); /* 0 with 1 gives 0 */
    }
    int64_t no = clb_test_numel(ro, od);
    int64_t got = clb_test_read(ctx, o, got_dims, out, BOUND * 40);
    char what[160];
    snprintf(what, sizeof what, "%s %s %s n=%lld", clb_dtype_name(dt), c->name,
             op == CLB_BINARY_ADD ? "add" : op == CLB_BINARY_SUB ? "sub" : op == CLB_BINARY_MUL ? "mul"
             : op == CLB_BINARY_DIV ? "div" : op == CLB_BINARY_REM ? "rem" : op == CLB_BINARY_MAX ? "max"
             : op == CLB_BINARY_MIN ? "min" : op == CLB_BINARY_POW ? "pow" : "floordiv",
             (long long)n);
    EXPECT_EQ_I(got, no);
    for (int d = 0; d < ro; d++) EXPECT_EQ_I(got_dims[d], od[d]);
    for (int64_t i = 0; i < no && i < got; i++) {
      double x = va[bcast_index(ro, od, i, c->ra, da)], y = vb[bcast_index(ro, od, i, c->rb, db)];
      expect_value(dt, out[i], ref_binary(op, dt, x, y), what, i);
    }
    clb_test_canary_check(ctx, o, (size_t)no * clb_dtype_size(dt), what);
  }
  clb_tensor_free(a);
  clb_tensor_free(b);
  clb_tensor_free(o);
}

static void test_binary(clb_context_t ctx) {
  for (int dt = 0; dt < CLB_DTYPE_BOOL; dt++) {
    if (dt == CLB_DTYPE_F64 && !has_fp64) continue;
    if (!keep_dtype(dt)) continue;
    for (int op = 0; op < CLB_BINARY_COUNT; op++) {
      if ((op == CLB_BINARY_DIV || op == CLB_BINARY_POW) && dt != CLB_DTYPE_F32 && dt != CLB_DTYPE_F64) continue;
      /* every broadcast case for f32 and i32; the flat case for the others
       * (reduced sizes: the broadcast cases for add alone) */
      int ncases = (dt == CLB_DTYPE_F32 || dt == CLB_DTYPE_I32) ? NCASES : 2;
      if (clb_test_small() && op != CLB_BINARY_ADD) ncases = 1;
      for (int c = 0; c < ncases; c++) {
        if (getenv("CLB_TEST_PROGRESS")) fprintf(stderr, "binary %s op %d case %d\n", clb_dtype_name((clb_dtype)dt), op, c);
        run_binary(ctx, (clb_binary_op)op, (clb_dtype)dt, &CASES[c]);
      }
    }
  }
}

static double ref_unary(clb_unary_op op, clb_dtype dt, double x) {
  switch (op) {
  case CLB_UNARY_NEG: return as_dtype(dt, -x);
  case CLB_UNARY_RELU: return x < 0 ? 0 : x;
  default: return clb_test_unary_ref(op, x);
  }
}

static void test_unary(clb_context_t ctx) {
  static double v[BOUND], out[BOUND];
  int64_t bound[2] = {BOUND / 3, 3};
  uint8_t dyn[2] = {1, 0};
  for (int dt = 0; dt < CLB_DTYPE_BOOL; dt++) {
    if (dt == CLB_DTYPE_F64 && !has_fp64) continue;
    int fl = dt == CLB_DTYPE_F32 || dt == CLB_DTYPE_F64;
    if (!keep_dtype(dt)) continue;
    for (int op = 0; op < CLB_UNARY_COUNT; op++) {
      if (!fl && ((op >= CLB_UNARY_SIGMOID && op <= CLB_UNARY_LOG) || op >= CLB_UNARY_ERF)) continue;
      if (clb_test_small() && !fl && op != CLB_UNARY_NEG) continue;
      clb_tensor_t a = NULL, o = NULL;
      CL_OK(ctx, clb_tensor_new(ctx, (clb_dtype)dt, 2, bound, dyn, &a));
      CL_OK(ctx, clb_tensor_new(ctx, (clb_dtype)dt, 2, bound, dyn, &o));
      for (int s = 0; s < NSIZES; s++) {
        if (!keep_size(s)) continue;
        int64_t rows = SIZES[s] / 3, dims[2] = {rows, 3}, got_dims[2];
        for (int64_t i = 0; i < rows * 3; i++) {
          double g = gen((clb_dtype)dt, 0);
          int logs = op == CLB_UNARY_LOG || op == CLB_UNARY_LOG2 || op == CLB_UNARY_LOG10;
          int positive = logs || op == CLB_UNARY_SQRT || op == CLB_UNARY_RSQRT || op == CLB_UNARY_LOG1P;
          v[i] = positive ? fabs(g) + (op == CLB_UNARY_RSQRT || logs ? 0.25 : 0) : g;
        }
        clb_test_write(ctx, a, dims, v);
        clb_test_canary_fill(ctx, o);
        CL_OK(ctx, clb_unary(ctx, (clb_unary_op)op, a, &o));
        int64_t got = clb_test_read(ctx, o, got_dims, out, BOUND);
        EXPECT_EQ_I(got, rows * 3);
        EXPECT_EQ_I(got_dims[0], rows);
        char what[96];
        snprintf(what, sizeof what, "%s unary %d rows %lld", clb_dtype_name((clb_dtype)dt), op, (long long)rows);
        for (int64_t i = 0; i < got; i++) expect_value((clb_dtype)dt, out[i], ref_unary((clb_unary_op)op, (clb_dtype)dt, v[i]), what, i);
        clb_test_canary_check(ctx, o, (size_t)got * clb_dtype_size((clb_dtype)dt), what);
      }
      clb_tensor_free(a);
      clb_tensor_free(o);
    }
  }
}

/* Comparisons: a bool output for every dtype (bool included), with NaN among
 * the floating operands and few distinct values, so that every op meets equal,
 * smaller and larger pairs; the broadcast cases "same" and "rows". */
static double ref_compare(clb_compare_op op, double a, double b) {
  switch (op) {
  case CLB_COMPARE_EQ: return a == b;
  case CLB_COMPARE_NE: return a != b;
  case CLB_COMPARE_LT: return a < b;
  case CLB_COMPARE_LE: return a <= b;
  case CLB_COMPARE_GT: return a > b;
  default: return a >= b;
  }
}

static double gen_compare(clb_dtype dt) {
  uint64_t r = clb_test_next() % 6;
  if (dt == CLB_DTYPE_BOOL) return (double)(r & 1);
  if ((dt == CLB_DTYPE_F32 || dt == CLB_DTYPE_F64) && r == 5) return NAN;
  return dt == CLB_DTYPE_U8 ? (double)r : (double)r - 2.0;
}

static void test_compare(clb_context_t ctx) {
  static double va[BOUND * 3], vb[BOUND * 3], out[BOUND * 3];
  for (int dt = 0; dt < CLB_DTYPE_COUNT; dt++) {
    if (dt == CLB_DTYPE_F64 && !has_fp64) continue;
    if (!keep_dtype(dt)) continue;
    for (int op = 0; op < CLB_COMPARE_COUNT; op++) {
      /* each (dtype, op, case) is a program to build: every op and both cases
       * for f32 (NaN) and i32, eq and lt on the flat case for the others */
      int all = dt == CLB_DTYPE_F32 || dt == CLB_DTYPE_I32;
      if (!all && op != CLB_COMPARE_EQ && op != CLB_COMPARE_LT) continue;
      for (int c = 0; c < (all ? 2 : 1); c++) {
        const bcase *bc = &CASES[c];
        clb_tensor_t a = NULL, b = NULL, o = NULL;
        CL_OK(ctx, clb_tensor_new(ctx, (clb_dtype)dt, bc->ra, bc->ba, bc->ya, &a));
        CL_OK(ctx, clb_tensor_new(ctx, (clb_dtype)dt, bc->rb, bc->bb, bc->yb, &b));
        for (int s = 0; s < NSIZES; s++) {
          if (!keep_size(s) || (clb_test_small() && s > 4)) continue;
          int64_t n = SIZES[s], da[2], db[2], od[2], got_dims[2];
          actual_dims(bc->ra, bc->ba, bc->ya, n, da);
          actual_dims(bc->rb, bc->bb, bc->yb, n, db);
          int64_t na = clb_test_numel(bc->ra, da), nb = clb_test_numel(bc->rb, db);
          for (int64_t i = 0; i < na; i++) va[i] = gen_compare((clb_dtype)dt);
          for (int64_t i = 0; i < nb; i++) vb[i] = gen_compare((clb_dtype)dt);
          clb_test_write(ctx, a, da, va);
          clb_test_write(ctx, b, db, vb);
          if (!o) { /* let the op create the output once, then reuse it */
            CL_OK(ctx, clb_compare(ctx, (clb_compare_op)op, a, b, &o));
          }
          clb_test_canary_fill(ctx, o);
          CL_OK(ctx, clb_compare(ctx, (clb_compare_op)op, a, b, &o));
          EXPECT_EQ_I(clb_tensor_dtype(o), CLB_DTYPE_BOOL);
          od[0] = n;
          od[1] = 3;
          int64_t no = bc->ra == 1 && bc->rb == 1 ? n : 3 * n;
          int64_t got = clb_test_read(ctx, o, got_dims, out, BOUND * 3);
          EXPECT_EQ_I(got, no);
          char what[96];
          snprintf(what, sizeof what, "%s compare %d %s n=%lld", clb_dtype_name((clb_dtype)dt), op, bc->name, (long long)n);
          int ro = bc->ra > bc->rb ? bc->ra : bc->rb;
          for (int64_t i = 0; i < no && i < got; i++) {
            double x = va[bcast_index(ro, od, i, bc->ra, da)], y = vb[bcast_index(ro, od, i, bc->rb, db)];
            clb_test_checks++;
            if (out[i] != ref_compare((clb_compare_op)op, x, y))
              CLB_FAIL_AT("%s [%lld]: %g vs %g gave %g", what, (long long)i, x, y, out[i]);
          }
          clb_test_canary_check(ctx, o, (size_t)no, what);
        }
        clb_tensor_free(a);
        clb_tensor_free(b);
        clb_tensor_free(o);
      }
    }
  }
  int64_t b3[1] = {3};
  clb_tensor_t f3 = NULL, i3 = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b3, NULL, &f3));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, b3, NULL, &i3));
  EXPECT_STATUS(ctx, clb_compare(ctx, CLB_COMPARE_LT, f3, i3, &o), CLB_ERR_DTYPE, "lt: dtypes differ: a [3] f32, b [3] i32");
  EXPECT_STATUS(ctx, clb_compare(ctx, (clb_compare_op)6, f3, f3, &o), CLB_ERR_INVALID_ARG, "unknown op 6");
  EXPECT_STATUS(ctx, clb_compare(ctx, CLB_COMPARE_EQ, f3, f3, &f3), CLB_ERR_DTYPE, "out is f32, the op gives bool");
  EXPECT_TRUE(o == NULL);
  clb_tensor_free(f3);
  clb_tensor_free(i3);
}

static double ref_cast(clb_dtype to, double x) {
  if (to == CLB_DTYPE_BOOL) return x != 0;
  if (to == CLB_DTYPE_F32 || to == CLB_DTYPE_F64) return as_dtype(to, x);
  return as_dtype(to, trunc(x));
}

static void test_cast(clb_context_t ctx) {
  /* Values every dtype holds exactly, so each pair has one right answer. */
  static const double vals[] = {0, 1, 2, 7, 100, 3.75, 0.25, 42.5, 9, 0, 255, 1};
  static const double ivals[] = {0, 1, 2, 7, 100, 3, 0, 42, 9, 0, 255, 1};
  int64_t bound[1] = {12}, dims[1] = {12}, got_dims[1];
  uint8_t dyn[1] = {1};
  for (int from = 0; from < CLB_DTYPE_COUNT; from++) {
    if (from == CLB_DTYPE_F64 && !has_fp64) continue;
    if (!keep_dtype(from)) continue;
    int fl = from == CLB_DTYPE_F32 || from == CLB_DTYPE_F64;
    double in[12];
    for (int i = 0; i < 12; i++) in[i] = from == CLB_DTYPE_BOOL ? (vals[i] != 0) : fl ? vals[i] : ivals[i];
    clb_tensor_t a = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, (clb_dtype)from, 1, bound, dyn, &a));
    clb_test_write(ctx, a, dims, in);
    for (int to = 0; to < CLB_DTYPE_COUNT; to++) {
      if (to == CLB_DTYPE_F64 && !has_fp64) continue;
      clb_tensor_t o = NULL;
      CL_OK(ctx, clb_cast(ctx, a, (clb_dtype)to, &o));
      double out[12];
      EXPECT_EQ_I(clb_test_read(ctx, o, got_dims, out, 12), 12);
      EXPECT_EQ_I(clb_tensor_dtype(o), to);
      for (int i = 0; i < 12; i++) {
        double want = ref_cast((clb_dtype)to, in[i]);
        clb_test_checks++;
        if (out[i] != want)
          CLB_FAIL_AT("cast %s -> %s [%d]: %g, want %g", clb_dtype_name((clb_dtype)from), clb_dtype_name((clb_dtype)to), i, out[i], want);
      }
      clb_tensor_free(o);
    }
    clb_tensor_free(a);
  }
}

static void test_fill(clb_context_t ctx) {
  int64_t bound[2] = {100, 7}, dims[2] = {37, 7}, got_dims[2];
  uint8_t dyn[2] = {1, 0};
  for (int dt = 0; dt < CLB_DTYPE_COUNT; dt++) {
    if (dt == CLB_DTYPE_F64 && !has_fp64) continue;
    if (!keep_dtype(dt)) continue;
    clb_tensor_t t = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, (clb_dtype)dt, 2, bound, dyn, &t));
    CL_OK(ctx, clb_tensor_set_sizes(ctx, t, dims));
    clb_test_canary_fill(ctx, t);
    CL_OK(ctx, clb_fill(ctx, t, 3.5));
    double out[700];
    int64_t n = clb_test_read(ctx, t, got_dims, out, 700);
    EXPECT_EQ_I(n, 37 * 7);
    double want = ref_cast((clb_dtype)dt, 3.5);
    for (int64_t i = 0; i < n; i++) EXPECT_TRUE(out[i] == want);
    clb_test_canary_check(ctx, t, (size_t)n * clb_dtype_size((clb_dtype)dt), "fill");
    clb_tensor_free(t);
  }
}

/* Floor division at its edges, against Python's values: quotients that
 * round across an integer (1 // 0.1 is 9), signs, zero divisors (floating:
 * inf, nan; integer: an error at the sync, naming the op), the signed
 * minimum over -1 (wraps, as numpy's does); and pow's. */
static void test_floordiv_pow_edges(clb_context_t ctx) {
  static const double fx[] = {1, -7, 7, -7.5, 0, 5, 0, -1, 3.5, -0.0};
  static const double fy[] = {0.1, 2, -2, 2, 3, 0, 0, 3, -0.5, 1};
  static const double fwant[] = {9, -4, -4, -4, 0, INFINITY, NAN, -1, -7, -0.0};
  int64_t n = 10, nb[1] = {10};
  double got[10];
  int64_t d[1];
  for (int dt = CLB_DTYPE_F32; dt <= CLB_DTYPE_F64; dt++) {
    if (dt == CLB_DTYPE_F64 && !has_fp64) continue;
    clb_tensor_t x = NULL, y = NULL, o = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, (clb_dtype)dt, 1, nb, NULL, &x));
    CL_OK(ctx, clb_tensor_new(ctx, (clb_dtype)dt, 1, nb, NULL, &y));
    clb_test_write(ctx, x, nb, fx);
    clb_test_write(ctx, y, nb, fy);
    CL_OK(ctx, clb_floor_divide(ctx, x, y, &o));
    EXPECT_EQ_I(clb_test_read(ctx, o, d, got, 10), n);
    for (int i = 0; i < n; i++) {
      clb_test_checks++;
      int same = isnan(fwant[i]) ? isnan(got[i]) : got[i] == fwant[i] && signbit(got[i]) == signbit(fwant[i]);
      if (!same) CLB_FAIL_AT("%s floor_divide %g // %g: got %g want %g", clb_dtype_name((clb_dtype)dt), fx[i], fy[i], got[i], fwant[i]);
    }
    /* pow: 0^0 is 1, a negative base to a fraction nan, x^-1 the reciprocal */
    static const double px[] = {0, -8, 2, 4, -2, 1, 9, 0.5, 10, 3};
    static const double py[] = {0, 1.0 / 3, -1, 0.5, 3, 1e30, 2, 2, -2, 0};
    clb_test_write(ctx, x, nb, px);
    clb_test_write(ctx, y, nb, py);
    CL_OK(ctx, clb_pow(ctx, x, y, &o));
    EXPECT_EQ_I(clb_test_read(ctx, o, d, got, 10), n);
    for (int i = 0; i < n; i++) {
      double want = pow(px[i], py[i]);
      clb_test_checks++;
      if (isnan(want) ? !isnan(got[i]) : fabs(got[i] - want) > 1e-6 * fabs(want))
        CLB_FAIL_AT("%s pow(%g, %g): got %g want %g", clb_dtype_name((clb_dtype)dt), px[i], py[i], got[i], want);
    }
    clb_tensor_free(x);
    clb_tensor_free(y);
    clb_tensor_free(o);
  }
  static const double ix[] = {-7, 7, 0, -2147483648.0, 9, -9, 6, -1, 5, 20};
  static const double iy[] = {2, -2, -3, -1, 3, 4, -4, 7, 1, -3};
  static const double iwant[] = {-4, -4, 0, -2147483648.0, 3, -3, -2, -1, 5, -7};
  clb_tensor_t x = NULL, y = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, nb, NULL, &x));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, nb, NULL, &y));
  clb_test_write(ctx, x, nb, ix);
  clb_test_write(ctx, y, nb, iy);
  CL_OK(ctx, clb_floor_divide(ctx, x, y, &o));
  EXPECT_EQ_I(clb_test_read(ctx, o, d, got, 10), n);
  for (int i = 0; i < n; i++) EXPECT_TRUE(got[i] == iwant[i]);
  static const double with_zero[] = {1, 2, 0, 4, 5, 6, 7, 8, 9, 10};
  clb_test_write(ctx, y, nb, with_zero);
  CL_OK(ctx, clb_floor_divide(ctx, x, y, &o));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DIV_ZERO, "floor_divide");
  EXPECT_EQ_I(clb_context_sync(ctx), CLB_OK);
  clb_tensor_free(x);
  clb_tensor_free(y);
  clb_tensor_free(o);
}

/* erf against C's double erf over [-6, 6], its tails and its special values:
 * f32 within 1e-6 + 2e-6 |want| (OpenCL's erf allows 16 ulp), f64 within
 * 1e-13 + 1e-13 |want|; erf(+-inf) = +-1, erf(-0) = -0, erf(nan) = nan. */
static void test_erf(clb_context_t ctx) {
  enum { N = 1207 };
  static double v[N], out[N];
  for (int i = 0; i < 1201; i++) v[i] = -6 + 0.01 * i;
  const double special[] = {1e-30, -1e-7, 3.5e-4, 10, -27};
  for (int i = 0; i < 5; i++) v[1201 + i] = special[i];
  v[1206] = -0.0;
  int64_t b[1] = {N + 3}, d[1] = {N};
  uint8_t dyn[1] = {1};
  for (int f64 = 0; f64 < 1 + has_fp64; f64++) {
    clb_dtype dt = f64 ? CLB_DTYPE_F64 : CLB_DTYPE_F32;
    clb_tensor_t a = NULL, o = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, dt, 1, b, dyn, &a));
    clb_test_write(ctx, a, d, v);
    CL_OK(ctx, clb_unary(ctx, CLB_UNARY_ERF, a, &o));
    EXPECT_EQ_I(clb_test_read(ctx, o, NULL, out, N), N);
    double tol = f64 ? 1e-13 : 2e-6, floor_ = f64 ? 1e-13 : 1e-6;
    for (int i = 0; i < N; i++) {
      double x = f64 ? v[i] : (double)(float)v[i], want = erf(x);
      clb_test_checks++;
      if (!(fabs(out[i] - want) <= floor_ + tol * fabs(want)))
        CLB_FAIL_AT("erf %s x=%.9g: got %.17g want %.17g", clb_dtype_name(dt), x, out[i], want);
    }
    EXPECT_TRUE(signbit(out[1206]) && out[1206] == 0);
    const double inf_nan[] = {INFINITY, -INFINITY, NAN};
    int64_t d3[1] = {3};
    clb_test_write(ctx, a, d3, inf_nan);
    CL_OK(ctx, clb_unary(ctx, CLB_UNARY_ERF, a, &o));
    EXPECT_EQ_I(clb_test_read(ctx, o, NULL, out, N), 3);
    EXPECT_TRUE(out[0] == 1 && out[1] == -1 && isnan(out[2]));
    clb_tensor_free(a);
    clb_tensor_free(o);
  }
}

/* The rounding ops exactly (ties to even for round, the zeros' signs, values
 * past 2^23 that are integers already, inf and NaN), and sin, cos, log2, log10
 * and exp2 at a few ulp, against C's double functions. */
/* clb_assert: true conditions pass, a false element fails the next sync naming
 * the message, the element and the live count (bool, int, float with NaN as
 * true, 0-d); a false element past the actual size is not looked at; an empty
 * condition passes; the error is reported once; argument errors. */
static void test_assert(clb_context_t ctx) {
  int64_t b[1] = {8};
  uint8_t dyn[1] = {1};
  clb_tensor_t c = NULL, f = NULL, z = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 1, b, dyn, &c));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b, dyn, &f));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 0, NULL, NULL, &z));
  double all[8] = {1, 1, 1, 1, 1, 1, 1, 0}, nan[8] = {NAN, -0.5, 2, 1e-30, 1, 1, 1, 1};
  int64_t d8[1] = {8}, d7[1] = {7}, d5[1] = {5}, d0[1] = {0};
  clb_test_write(ctx, c, d8, all);
  CL_OK(ctx, clb_tensor_set_sizes(ctx, c, d7)); /* the 0 at index 7 is past the actual size */
  clb_test_write(ctx, f, d5, nan);
  CL_OK(ctx, clb_assert(ctx, c, "mask in range"));
  CL_OK(ctx, clb_assert(ctx, f, NULL));
  EXPECT_EQ_I(clb_context_sync(ctx), CLB_OK);
  double one_false[8] = {1, 1, 1, 0, 1, 1, 1, 1};
  clb_test_write(ctx, c, d5, one_false);
  CL_OK(ctx, clb_assert(ctx, c, "class values must be smaller than num_classes"));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DEVICE_CHECK,
                "\"class values must be smaller than num_classes\" on");
  if (!strstr(clb_context_errmsg(ctx), "assertion failed on the device: element 3 of 5 is false"))
    CLB_FAIL_AT("clb_assert's message: %s", clb_context_errmsg(ctx));
  EXPECT_EQ_I(clb_context_sync(ctx), CLB_OK); /* reported once, then cleared */
  double zero[1] = {0}, neg[1] = {-3};
  clb_test_write(ctx, z, NULL, zero);
  CL_OK(ctx, clb_assert(ctx, z, "0-d"));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DEVICE_CHECK, "element 0 of 1 is false");
  clb_test_write(ctx, z, NULL, neg);
  CL_OK(ctx, clb_assert(ctx, z, "0-d"));
  clb_test_write(ctx, c, d0, one_false);
  CL_OK(ctx, clb_assert(ctx, c, "empty"));
  EXPECT_EQ_I(clb_context_sync(ctx), CLB_OK);
  EXPECT_STATUS(ctx, clb_assert(ctx, NULL, "x"), CLB_ERR_NULL, "assert: tensor cond is NULL");
  EXPECT_EQ_I(clb_assert(NULL, c, "x"), CLB_ERR_NULL);
  clb_tensor_free(c);
  clb_tensor_free(f);
  clb_tensor_free(z);
}

static void test_rounding_and_trig(clb_context_t ctx) {
  static const double xs[] = {-0.0, 0.0, 0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -1.25, 3.75, 8388609.0, -16777216.0,
                              1e-30, 100.0, 1024.0, 0.125, INFINITY, -INFINITY, NAN};
  enum { N = sizeof xs / sizeof xs[0] };
  static const clb_unary_op ops[] = {CLB_UNARY_FLOOR, CLB_UNARY_CEIL, CLB_UNARY_ROUND, CLB_UNARY_TRUNC, CLB_UNARY_SIN,
                                     CLB_UNARY_COS,   CLB_UNARY_LOG2, CLB_UNARY_LOG10, CLB_UNARY_EXP2};
  static const char *const names[] = {"floor", "ceil", "round", "trunc", "sin", "cos", "log2", "log10", "exp2"};
  int64_t b[1] = {N}, d[1] = {N};
  for (int dt = CLB_DTYPE_F32; dt <= CLB_DTYPE_F64; dt++) {
    if (dt == CLB_DTYPE_F64 && !has_fp64) continue;
    clb_tensor_t a = NULL, o = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, (clb_dtype)dt, 1, b, NULL, &a));
    clb_test_write(ctx, a, d, xs);
    for (int k = 0; k < 9; k++) {
      double out[N];
      CL_OK(ctx, clb_unary(ctx, ops[k], a, &o));
      EXPECT_EQ_I(clb_test_read(ctx, o, NULL, out, N), N);
      for (int i = 0; i < N; i++) {
        double x = dt == CLB_DTYPE_F32 ? (double)(float)xs[i] : xs[i];
        double want = ref_unary(ops[k], (clb_dtype)dt, x);
        if (dt == CLB_DTYPE_F32) want = (double)(float)want;
        double ulp = dt == CLB_DTYPE_F32 ? 1.2e-7 : 2.3e-16; /* machine epsilon */
        int exact = k < 4 || (ops[k] == CLB_UNARY_LOG2 && (x == 1024.0 || x == 0.125)) ||
                    (ops[k] == CLB_UNARY_EXP2 && (x == 100.0 || x == 0.0 || x == -0.0));
        int ok = isnan(want) ? isnan(out[i])
                 : isinf(want) ? out[i] == want
                 : exact ? out[i] == want && signbit(out[i]) == signbit(want)
                 : fabs(out[i] - want) <= 4 * ulp * (fabs(want) > 1e-300 ? fabs(want) : 1) + 1e-300;
        clb_test_checks++;
        if (!ok) CLB_FAIL_AT("%s %s(%.17g): got %.17g want %.17g", clb_dtype_name((clb_dtype)dt), names[k], x, out[i], want);
      }
      clb_tensor_free(o);
      o = NULL;
    }
    clb_tensor_free(a);
  }
}

/* abs, sqrt, rsqrt, log1p and expm1 where a careless formula goes wrong,
 * against C's double functions: f32 within 2e-7 + 4e-7 |want| (a few ulp; the
 * loop above checks 5e-3), the zeros' signs, inf and NaN. */
static void test_math_edges(clb_context_t ctx) {
  static const double xs[] = {-0.0, 0.0, 1e-10, -1e-10, 1e-30, 3.0e-8, -0.75, 2.5, 1e6, 88.5, INFINITY, -INFINITY, NAN};
  enum { N = sizeof xs / sizeof xs[0] };
  static const clb_unary_op ops[] = {CLB_UNARY_ABS, CLB_UNARY_SQRT, CLB_UNARY_RSQRT, CLB_UNARY_LOG1P, CLB_UNARY_EXPM1};
  int64_t b[1] = {N}, d[1] = {N};
  clb_tensor_t a = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b, NULL, &a));
  clb_test_write(ctx, a, d, xs);
  for (int k = 0; k < 5; k++) {
    double out[N];
    CL_OK(ctx, clb_unary(ctx, ops[k], a, &o));
    EXPECT_EQ_I(clb_test_read(ctx, o, NULL, out, N), N);
    for (int i = 0; i < N; i++) {
      double x = (double)(float)xs[i], want = (double)(float)ref_unary(ops[k], CLB_DTYPE_F32, x);
      int ok = isnan(want) ? isnan(out[i])
               : isinf(want) ? out[i] == want
               : fabs(out[i] - want) <= 2e-7 * (fabs(want) < 1e-30 ? 0 : 1) + 4e-7 * fabs(want);
      if (want == 0) ok = out[i] == 0 && signbit(out[i]) == signbit(want);
      clb_test_checks++;
      if (!ok) CLB_FAIL_AT("%s(%.9g): got %.9g want %.9g", ops[k] == CLB_UNARY_ABS ? "abs" : ops[k] == CLB_UNARY_SQRT ? "sqrt"
                           : ops[k] == CLB_UNARY_RSQRT ? "rsqrt" : ops[k] == CLB_UNARY_LOG1P ? "log1p" : "expm1", x, out[i], want);
    }
    clb_tensor_free(o);
    o = NULL;
  }
  clb_tensor_free(a);
}

static void test_errors(clb_context_t ctx) {
  int64_t b3[1] = {3}, b4[1] = {4}, b8[1] = {8};
  uint8_t dyn[1] = {1};
  clb_tensor_t f3 = NULL, f4 = NULL, i3 = NULL, bo = NULL, o = NULL, d1 = NULL, d2 = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b3, NULL, &f3));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b4, NULL, &f4));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, b3, NULL, &i3));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 1, b3, NULL, &bo));
  EXPECT_STATUS(ctx, clb_add(ctx, f3, f4, &o), CLB_ERR_SHAPE, "do not broadcast: dim 0 of the result has bounds 3 and 4");
  EXPECT_STATUS(ctx, clb_add(ctx, f3, i3, &o), CLB_ERR_DTYPE, "dtypes differ: a [3] f32, b [3] i32");
  EXPECT_STATUS(ctx, clb_add(ctx, bo, bo, &o), CLB_ERR_DTYPE, "bool");
  EXPECT_STATUS(ctx, clb_div(ctx, i3, i3, &o), CLB_ERR_DTYPE, "not floating");
  EXPECT_STATUS(ctx, clb_pow(ctx, i3, i3, &o), CLB_ERR_DTYPE, "pow: i32 is not floating");
  EXPECT_STATUS(ctx, clb_floor_divide(ctx, bo, bo, &o), CLB_ERR_DTYPE, "floor_divide: bool tensors take no arithmetic");
  EXPECT_STATUS(ctx, clb_unary(ctx, CLB_UNARY_EXP, i3, &o), CLB_ERR_DTYPE, "not floating");
  EXPECT_STATUS(ctx, clb_unary(ctx, CLB_UNARY_ERF, i3, &o), CLB_ERR_DTYPE, "erf: i32 is not floating");
  EXPECT_STATUS(ctx, clb_unary(ctx, CLB_UNARY_SQRT, i3, &o), CLB_ERR_DTYPE, "sqrt: i32 is not floating");
  EXPECT_STATUS(ctx, clb_unary(ctx, CLB_UNARY_ABS, i3, &o), CLB_ERR_DTYPE, "abs: i32 is not floating");
  EXPECT_STATUS(ctx, clb_unary(ctx, CLB_UNARY_FLOOR, i3, &o), CLB_ERR_DTYPE, "floor: i32 is not floating");
  EXPECT_STATUS(ctx, clb_add(ctx, NULL, f3, &o), CLB_ERR_NULL, "add: tensor a is NULL");
  EXPECT_STATUS(ctx, clb_add(ctx, f3, f3, NULL), CLB_ERR_NULL, "out is NULL");
  EXPECT_STATUS(ctx, clb_binary(ctx, (clb_binary_op)99, f3, f3, &o), CLB_ERR_INVALID_ARG, "unknown op 99");
  EXPECT_TRUE(o == NULL);
  /* A caller's output that is too small, of the wrong dtype, or static where the
   * size varies. */
  EXPECT_STATUS(ctx, clb_add(ctx, f4, f4, &f3), CLB_ERR_OUT_OF_BOUNDS, "bound 3 < 4 needed");
  EXPECT_STATUS(ctx, clb_add(ctx, f3, f3, &i3), CLB_ERR_DTYPE, "out is i32");
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b8, dyn, &d1));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b8, dyn, &d2));
  clb_tensor_t st8 = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b8, NULL, &st8));
  EXPECT_STATUS(ctx, clb_add(ctx, d1, d2, &st8), CLB_ERR_SHAPE, "must be dynamic");
  /* A static output of another static size: the two sizes, not "must be dynamic". */
  EXPECT_STATUS(ctx, clb_add(ctx, f4, f4, &st8), CLB_ERR_SHAPE, "dim 0 of out [8] f32 is static: 8 != 4, the op's size");
  /* Two dynamic dims whose actual sizes differ: a deferred check on the device,
   * returned by the next sync with the op and both sizes; nothing past a bound. */
  double v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t n5[1] = {5}, n7[1] = {7};
  clb_test_write(ctx, d1, n5, v);
  clb_test_write(ctx, d2, n7, v);
  uint64_t syncs = clb_test_counter_syncs(ctx);
  CL_OK(ctx, clb_add(ctx, d1, d2, &o)); /* enqueued: no error yet, no sync */
  EXPECT_EQ_I(clb_test_counter_syncs(ctx), syncs);
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DEVICE_CHECK, "sizes 5 and 7 must be equal");
  EXPECT_TRUE(strstr(clb_context_errmsg(ctx), "add a [<=8] f32, b [<=8] f32") != NULL);
  EXPECT_EQ_I(clb_context_sync(ctx), CLB_OK); /* reported once, then cleared */
  /* Integer remainder by zero: a sticky error too. */
  double zeros[3] = {0, 0, 0}, ones[3] = {1, 2, 3};
  clb_tensor_t i3b = NULL, ro = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, b3, NULL, &i3b));
  clb_test_write(ctx, i3, b3, ones);
  clb_test_write(ctx, i3b, b3, zeros);
  CL_OK(ctx, clb_remainder(ctx, i3, i3b, &ro));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DIV_ZERO, "remainder");
  /* A tensor of another context is refused. */
  clb_context_t other = clb_test_context(NULL);
  clb_tensor_t foreign = NULL;
  CL_OK(other, clb_tensor_new(other, CLB_DTYPE_F32, 1, b3, NULL, &foreign));
  EXPECT_STATUS(ctx, clb_add(ctx, f3, foreign, &o), CLB_ERR_INVALID_ARG, "another context");
  clb_context_free(other);
}

/* where(cond, a, b) over three broadcast shapes at every size, for every
 * dtype: against a host walk, with canaries; then the deferred check of
 * actual sizes and the errors at the call. */
typedef struct wcase {
  const char *name;
  int r[3];
  int64_t b[3][3];
  uint8_t y[3][3];
} wcase;

static const wcase WCASES[] = {
    {"same [<=B]", {1, 1, 1}, {{BOUND}, {BOUND}, {BOUND}}, {{1}, {1}, {1}}},
    {"cond [<=B,3], a [3], b []", {2, 1, 0}, {{BOUND, 3}, {3}, {0}}, {{1, 0}, {0}, {0}}},
    {"cond [<=B,1], a [1,4], b [<=B,4]", {2, 2, 2}, {{BOUND, 1}, {1, 4}, {BOUND, 4}}, {{1, 0}, {0, 0}, {1, 0}}},
    {"cond [2,1,3], a [<=B,1], b [1]", {3, 2, 1}, {{2, 1, 3}, {BOUND, 1}, {1}}, {{0, 0, 0}, {1, 0}, {0}}},
};

static void run_where(clb_context_t ctx, clb_dtype dt, const wcase *c) {
  static double v[3][BOUND * 8], out[BOUND * 8];
  clb_tensor_t t[3] = {NULL, NULL, NULL}, o = NULL;
  for (int k = 0; k < 3; k++)
    CL_OK(ctx, clb_tensor_new(ctx, k == 0 ? CLB_DTYPE_BOOL : dt, c->r[k], c->b[k], c->y[k], &t[k]));
  int ro = 0;
  for (int k = 0; k < 3; k++) ro = c->r[k] > ro ? c->r[k] : ro;
  for (int s = 0; s < NSIZES; s++) {
    if (!keep_size(s)) continue;
    int64_t n = SIZES[s], dims[3][4], od[4], got_dims[4];
    for (int k = 0; k < 3; k++) {
      actual_dims(c->r[k], c->b[k], c->y[k], n, dims[k]);
      int64_t nk = clb_test_numel(c->r[k], dims[k]);
      for (int64_t i = 0; i < nk; i++)
        v[k][i] = k == 0 || dt == CLB_DTYPE_BOOL ? (double)(clb_test_next() & 1) : gen(dt, 0);
      clb_test_write(ctx, t[k], dims[k], v[k]);
    }
    for (int d = 0; d < ro; d++) { /* the one size not 1 among the three (0 with 1 gives 0) */
      od[d] = 1;
      for (int k = 0; k < 3; k++) {
        int i = d - (ro - c->r[k]);
        if (i >= 0 && dims[k][i] != 1) od[d] = dims[k][i];
      }
    }
    if (o) clb_test_canary_fill(ctx, o);
    uint64_t syncs = clb_test_counter_syncs(ctx);
    CL_OK(ctx, clb_where(ctx, t[0], t[1], t[2], &o));
    EXPECT_EQ_I(clb_test_counter_syncs(ctx), syncs);
    int64_t no = clb_test_numel(ro, od), got = clb_test_read(ctx, o, got_dims, out, BOUND * 8);
    char what[160];
    snprintf(what, sizeof what, "where %s %s n=%lld", clb_dtype_name(dt), c->name, (long long)n);
    EXPECT_EQ_I(got, no);
    for (int d = 0; d < ro; d++) EXPECT_EQ_I(got_dims[d], od[d]);
    for (int64_t i = 0; i < no && i < got; i++) {
      int64_t ic = bcast_index(ro, od, i, c->r[0], dims[0]);
      int64_t ia = bcast_index(ro, od, i, c->r[1], dims[1]), ib = bcast_index(ro, od, i, c->r[2], dims[2]);
      expect_value(dt, out[i], v[0][ic] != 0 ? v[1][ia] : v[2][ib], what, i);
    }
    if (s > 0) clb_test_canary_check(ctx, o, (size_t)no * clb_dtype_size(dt), what);
  }
  for (int k = 0; k < 3; k++) clb_tensor_free(t[k]);
  clb_tensor_free(o);
}

static void test_where(clb_context_t ctx) {
  for (int dt = 0; dt < CLB_DTYPE_COUNT; dt++) {
    if (dt == CLB_DTYPE_F64 && !has_fp64) continue;
    if (!keep_dtype(dt) && dt != CLB_DTYPE_BOOL) continue;
    for (size_t c = 0; c < sizeof WCASES / sizeof WCASES[0]; c++) run_where(ctx, (clb_dtype)dt, &WCASES[c]);
  }
  /* actual sizes that do not broadcast: a deferred check, named at the sync */
  int64_t b8 = 8, n3 = 3, n5 = 5;
  uint8_t one = 1;
  double ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  clb_tensor_t c = NULL, a = NULL, b = NULL, o = NULL, i = NULL, s = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 1, &b8, &one, &c));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &b8, &one, &a));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &b8, &one, &b));
  clb_test_write(ctx, c, &n3, ones);
  clb_test_write(ctx, a, &n3, ones);
  clb_test_write(ctx, b, &n5, ones);
  CL_OK(ctx, clb_where(ctx, c, a, b, &o));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DEVICE_CHECK, "where");
  /* refused at once */
  int64_t b4 = 4;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, &b8, &one, &i));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &b4, NULL, &s));
  clb_tensor_t r = NULL;
  EXPECT_STATUS(ctx, clb_where(ctx, a, a, b, &r), CLB_ERR_DTYPE, "cond [<=8] f32 is not bool");
  EXPECT_STATUS(ctx, clb_where(ctx, c, a, i, &r), CLB_ERR_DTYPE, "dtypes differ");
  EXPECT_STATUS(ctx, clb_where(ctx, c, a, s, &r), CLB_ERR_SHAPE, "do not broadcast: dim 0 of the result has bounds 8 and 4");
  EXPECT_STATUS(ctx, clb_where(ctx, c, a, NULL, &r), CLB_ERR_NULL, "b");
  EXPECT_STATUS(ctx, clb_where(ctx, c, a, b, NULL), CLB_ERR_NULL, "out");
  EXPECT_TRUE(clb_where(NULL, c, a, b, &r) == CLB_ERR_NULL);
  EXPECT_TRUE(r == NULL);
  clb_tensor_t ts[] = {c, a, b, o, i, s};
  for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) clb_tensor_free(ts[k]);
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  has_fp64 = clb_test_has_fp64();
  test_binary(ctx);
  test_unary(ctx);
  test_rounding_and_trig(ctx);
  test_assert(ctx);
  test_compare(ctx);
  test_cast(ctx);
  test_fill(ctx);
  test_where(ctx);
  test_floordiv_pow_edges(ctx);
  test_erf(ctx);
  test_math_edges(ctx);
  test_errors(ctx);
  clb_context_free(ctx);
  return clb_test_finish("ops/elementwise");
}
