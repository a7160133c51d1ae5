/* elementwise.c: unary, binary and comparison elementwise ops, fill and cast. */
#include <stdio.h>
#include <string.h>

#include "runtime/cache/cache.h"
#include "runtime/ops/elementwise.h"

static const char *const binary_names[CLB_BINARY_COUNT] = {"add", "sub", "mul", "div", "remainder", "maximum", "minimum",
                                                           "pow", "floor_divide"};
static const char *const binary_macros[CLB_BINARY_COUNT] = {"OP_ADD", "OP_SUB", "OP_MUL", "OP_DIV", "OP_REM",
                                                            "OP_MAX", "OP_MIN", "OP_POW", "OP_FLOORDIV"};
static const char *const compare_names[CLB_COMPARE_COUNT] = {"eq", "ne", "lt", "le", "gt", "ge"};
static const char *const compare_macros[CLB_COMPARE_COUNT] = {"OP_EQ", "OP_NE", "OP_LT", "OP_LE", "OP_GT", "OP_GE"};
static const char *const unary_names[CLB_UNARY_COUNT] = {"neg", "relu", "sigmoid", "tanh",  "exp",   "log",  "copy",
                                                         "erf", "abs",  "sqrt",    "rsqrt", "log1p", "expm1",
                                                         "floor", "ceil", "round", "trunc", "sin", "cos",
                                                         "log2", "log10", "exp2"};
static const char *const unary_macros[CLB_UNARY_COUNT] = {"OP_NEG", "OP_RELU", "OP_SIGMOID", "OP_TANH",  "OP_EXP",
                                                          "OP_LOG", "OP_COPY", "OP_ERF",     "OP_ABS",   "OP_SQRT",
                                                          "OP_RSQRT", "OP_LOG1P", "OP_EXPM1", "OP_FLOOR", "OP_CEIL",
                                                          "OP_ROUND", "OP_TRUNC", "OP_SIN", "OP_COS", "OP_LOG2",
                                                          "OP_LOG10", "OP_EXP2"};

/* Build options naming the input and output types. */
static void type_options(char *buf, size_t len, clb_dtype in, clb_dtype out) {
  snprintf(buf, len, "-D TA=%s -D TOUT=%s%s%s%s", clb__dtype_cl(in), clb__dtype_cl(out),
           clb__dtype_is_float(in) ? " -D TA_FLOAT" : "", out == CLB_DTYPE_BOOL ? " -D TOUT_BOOL" : "",
           (in == CLB_DTYPE_F64 || out == CLB_DTYPE_F64) ? " -D CLB_NEED_FP64" : "");
}

int clb__broadcast_bounds(int ra, const int64_t *ba, const uint8_t *ya, int rb, const int64_t *bb, const uint8_t *yb,
                          int64_t *ob, uint8_t *oy, unsigned *bma, unsigned *bmb, int *bad) {
  int rank = ra > rb ? ra : rb;
  *bma = *bmb = 0;
  for (int d = 0; d < rank; d++) {
    int ia = d - (rank - ra), ib = d - (rank - rb);
    int64_t va = ia >= 0 ? ba[ia] : 1, vb = ib >= 0 ? bb[ib] : 1;
    int da = ia >= 0 && ya[ia], db = ib >= 0 && yb[ib];
    int one_a = va == 1 && !da, one_b = vb == 1 && !db;
    if (one_a && !one_b) {
      *bma |= 1u << d;
      ob[d] = vb;
      oy[d] = (uint8_t)db;
    } else if (one_b && !one_a) {
      *bmb |= 1u << d;
      ob[d] = va;
      oy[d] = (uint8_t)da;
    } else {
      if (va != vb) {
        *bad = d;
        return -1;
      }
      ob[d] = va;
      oy[d] = (uint8_t)(da && db);
    }
  }
  return rank;
}

static clb_status check_ctx(clb_context_t ctx, const char *op) {
  return ctx ? CLB_OK : clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
}

/* The shared part of clb_binary and clb_compare, after their own checks: the
 * broadcast bounds, the output (out_dtype) and the launch of ew_binary with the
 * operation `macro`. */
static clb_status binary_launch(clb_context_t ctx, const char *op, const char *macro, clb_tensor_t a,
                                clb_tensor_t b, clb_dtype out_dtype, clb_tensor_t *out) {
  char da[128], db[128];
  clb__tensor_desc(a, da, sizeof da);
  clb__tensor_desc(b, db, sizeof db);
  int64_t obound[CLB_MAX_RANK];
  uint8_t odyn[CLB_MAX_RANK];
  unsigned bma = 0, bmb = 0;
  int bad = 0;
  int rank = clb__broadcast_bounds(a->rank, a->bound, a->dyn, b->rank, b->bound, b->dyn, obound, odyn, &bma, &bmb, &bad);
  if (rank < 0) {
    int r = a->rank > b->rank ? a->rank : b->rank, ia = bad - (r - a->rank), ib = bad - (r - b->rank);
    return clb__set_error(ctx, CLB_ERR_SHAPE, "%s: a %s and b %s do not broadcast: dim %d of the result has bounds %lld and %lld",
                          op, da, db, bad, (long long)(ia >= 0 ? a->bound[ia] : 1), (long long)(ib >= 0 ? b->bound[ib] : 1));
  }
  clb_status st = clb__output(ctx, op, out_dtype, rank, obound, odyn, out);
  if (st != CLB_OK) return st;
  clb_tensor_t o = *out;
  char opts[256], types[160];
  type_options(types, sizeof types, a->dtype, out_dtype);
  int flat = bma == 0 && bmb == 0 && a->rank == b->rank;
  snprintf(opts, sizeof opts, "-D EW_BINARY %s -D %s -D RANK=%d%s", types, macro, rank, flat ? " -D FLAT" : "");
  cl_kernel k;
  size_t local = 0;
  if ((st = clb__kernel_get_local(ctx, op, "elementwise", opts, "ew_binary", &k, &local)) != CLB_OK) return st;
  cl_int ra = a->rank, rb = b->rank;
  cl_uint ma = bma, mb = bmb;
  cl_uint zero = 0;
  clb_arg args[] = {CLB_ARG_DATA(a->data), CLB_ARG(a->shape.mem), CLB_ARG(ra),
                    CLB_ARG_DATA(b->data), CLB_ARG(b->shape.mem), CLB_ARG(rb),
                    CLB_ARG_DATA(o->data), CLB_ARG(o->shape.mem), CLB_ARG(ma), CLB_ARG(mb),
                    CLB_ARG(ctx->status), CLB_ARG(zero)};
  char what[192];
  snprintf(what, sizeof what, "a %.90s, b %.90s", da, db);
  return clb__launch(ctx, op, what, k, args, CLB_NARGS(args), CLB_NARGS(args) - 1, clb__groups_local(ctx, clb__numel(rank, obound), local), local);
}

/* The checks clb_binary and clb_compare both make: a context, a known op
 * (code below count; fn names the function in the message), two live tensors of
 * one dtype. */
static clb_status check_operands(clb_context_t ctx, const char *fn, const char *op, unsigned code, unsigned count,
                                 clb_tensor_t a, clb_tensor_t b) {
  clb_status st = check_ctx(ctx, op);
  if (st != CLB_OK) return st;
  if (code >= count) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: unknown op %d", fn, (int)code);
  if ((st = clb__check_tensor(ctx, op, "a", a)) != CLB_OK) return st;
  if ((st = clb__check_tensor(ctx, op, "b", b)) != CLB_OK) return st;
  if (a->dtype != b->dtype) {
    char da[128], db[128];
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: dtypes differ: a %s, b %s (cast one first)", op,
                          clb__tensor_desc(a, da, sizeof da), clb__tensor_desc(b, db, sizeof db));
  }
  return CLB_OK;
}

clb_status clb_binary(clb_context_t ctx, clb_binary_op bop, clb_tensor_t a, clb_tensor_t b,
                      clb_tensor_t *out) {
  const char *op = (unsigned)bop < CLB_BINARY_COUNT ? binary_names[bop] : "clb_binary";
  clb_status st = check_operands(ctx, "clb_binary", op, (unsigned)bop, CLB_BINARY_COUNT, a, b);
  if (st != CLB_OK) return st;
  if (a->dtype == CLB_DTYPE_BOOL)
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: bool tensors take no arithmetic (cast to u8 or i32 first)", op);
  if ((bop == CLB_BINARY_DIV || bop == CLB_BINARY_POW) && !clb__dtype_is_float(a->dtype))
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: %s is not floating; cast to f32 or f64 first", op,
                          clb_dtype_name(a->dtype));
  return binary_launch(ctx, op, binary_macros[bop], a, b, a->dtype, out);
}

clb_status clb_compare(clb_context_t ctx, clb_compare_op cop, clb_tensor_t a, clb_tensor_t b,
                       clb_tensor_t *out) {
  const char *op = (unsigned)cop < CLB_COMPARE_COUNT ? compare_names[cop] : "clb_compare";
  clb_status st = check_operands(ctx, "clb_compare", op, (unsigned)cop, CLB_COMPARE_COUNT, a, b);
  if (st != CLB_OK) return st;
  return binary_launch(ctx, op, compare_macros[cop], a, b, CLB_DTYPE_BOOL, out);
}

clb_status clb_add(clb_context_t ctx, clb_tensor_t a, clb_tensor_t b, clb_tensor_t *out) {
  return clb_binary(ctx, CLB_BINARY_ADD, a, b, out);
}
clb_status clb_sub(clb_context_t ctx, clb_tensor_t a, clb_tensor_t b, clb_tensor_t *out) {
  return clb_binary(ctx, CLB_BINARY_SUB, a, b, out);
}
clb_status clb_mul(clb_context_t ctx, clb_tensor_t a, clb_tensor_t b, clb_tensor_t *out) {
  return clb_binary(ctx, CLB_BINARY_MUL, a, b, out);
}
clb_status clb_div(clb_context_t ctx, clb_tensor_t a, clb_tensor_t b, clb_tensor_t *out) {
  return clb_binary(ctx, CLB_BINARY_DIV, a, b, out);
}
clb_status clb_remainder(clb_context_t ctx, clb_tensor_t a, clb_tensor_t b, clb_tensor_t *out) {
  return clb_binary(ctx, CLB_BINARY_REM, a, b, out);
}
clb_status clb_pow(clb_context_t ctx, clb_tensor_t a, clb_tensor_t b, clb_tensor_t *out) {
  return clb_binary(ctx, CLB_BINARY_POW, a, b, out);
}
clb_status clb_floor_divide(clb_context_t ctx, clb_tensor_t a, clb_tensor_t b, clb_tensor_t *out) {
  return clb_binary(ctx, CLB_BINARY_FLOORDIV, a, b, out);
}

/* out = cond ? a : b, the three broadcast as clb_binary broadcasts two: at
 * each output dim an operand broadcasts where it lacks the dim or has it as a
 * static 1; the others must have the same bound (at once) and the same actual
 * size (a deferred check on the device). */
clb_status clb_where(clb_context_t ctx, clb_tensor_t cond, clb_tensor_t a, clb_tensor_t b, clb_tensor_t *out) {
  static const char *op = "where";
  clb_status st = check_ctx(ctx, op);
  if (st != CLB_OK) return st;
  if ((st = clb__check_tensor(ctx, op, "cond", cond)) != CLB_OK) return st;
  if ((st = clb__check_tensor(ctx, op, "a", a)) != CLB_OK) return st;
  if ((st = clb__check_tensor(ctx, op, "b", b)) != CLB_OK) return st;
  char dc[128], da[128], db[128];
  clb__tensor_desc(cond, dc, sizeof dc);
  clb__tensor_desc(a, da, sizeof da);
  clb__tensor_desc(b, db, sizeof db);
  if (cond->dtype != CLB_DTYPE_BOOL)
    return clb__set_error(ctx, CLB_ERR_DTYPE, "where: cond %s is not bool (compare first)", dc);
  if (a->dtype != b->dtype)
    return clb__set_error(ctx, CLB_ERR_DTYPE, "where: dtypes differ: a %s, b %s (cast one first)", da, db);
  const clb_tensor_t in[3] = {cond, a, b};
  int rank = 0;
  for (int k = 0; k < 3; k++)
    if (in[k]->rank > rank) rank = in[k]->rank;
  int64_t obound[CLB_MAX_RANK];
  uint8_t odyn[CLB_MAX_RANK];
  cl_uint bm[3] = {0, 0, 0};
  for (int d = 0; d < rank; d++) {
    int64_t bound = 1;
    int have = 0, dyn = 1;
    for (int k = 0; k < 3; k++) {
      int i = d - (rank - in[k]->rank);
      int64_t v = i >= 0 ? in[k]->bound[i] : 1;
      int y = i >= 0 && in[k]->dyn[i];
      if (v == 1 && !y) { /* broadcasts here */
        bm[k] |= 1u << d;
        continue;
      }
      if (have && v != bound)
        return clb__set_error(ctx, CLB_ERR_SHAPE,
                              "where: cond %s, a %s and b %s do not broadcast: dim %d of the result has bounds %lld and %lld",
                              dc, da, db, d, (long long)bound, (long long)v);
      bound = v;
      have = 1;
      dyn = dyn && y;
    }
    obound[d] = bound;
    odyn[d] = (uint8_t)(have && dyn);
  }
  if ((st = clb__output(ctx, op, a->dtype, rank, obound, odyn, out)) != CLB_OK) return st;
  clb_tensor_t o = *out;
  char opts[256], types[160];
  type_options(types, sizeof types, a->dtype, a->dtype);
  snprintf(opts, sizeof opts, "-D EW_WHERE %s -D RANK=%d", types, rank);
  cl_kernel k;
  size_t local = 0;
  if ((st = clb__kernel_get_local(ctx, op, "elementwise", opts, "ew_where", &k, &local)) != CLB_OK) return st;
  cl_int rc = cond->rank, ra = a->rank, rb = b->rank;
  cl_uint zero = 0;
  clb_arg args[] = {CLB_ARG_DATA(cond->data), CLB_ARG(cond->shape.mem), CLB_ARG(rc),
                    CLB_ARG_DATA(a->data),    CLB_ARG(a->shape.mem),    CLB_ARG(ra),
                    CLB_ARG_DATA(b->data),    CLB_ARG(b->shape.mem),    CLB_ARG(rb),
                    CLB_ARG_DATA(o->data),    CLB_ARG(o->shape.mem),    CLB_ARG(bm[0]),
                    CLB_ARG(bm[1]),           CLB_ARG(bm[2]),           CLB_ARG(ctx->status),
                    CLB_ARG(zero)};
  char what[320];
  snprintf(what, sizeof what, "cond %.90s, a %.90s, b %.90s", dc, da, db);
  return clb__launch(ctx, op, what, k, args, CLB_NARGS(args), CLB_NARGS(args) - 1,
                     clb__groups_local(ctx, clb__numel(rank, obound), local), local);
}

/* A unary launch: out = OP(a) with a's shape; shared by clb_unary and clb_cast. */
static clb_status unary_launch(clb_context_t ctx, const char *op, const char *macro, clb_tensor_t a,
                               clb_dtype out_dtype, clb_tensor_t *out) {
  clb_status st = clb__output(ctx, op, out_dtype, a->rank, a->bound, a->dyn, out);
  if (st != CLB_OK) return st;
  clb_tensor_t o = *out;
  char opts[256], types[160];
  type_options(types, sizeof types, a->dtype, out_dtype);
  snprintf(opts, sizeof opts, "-D EW_UNARY %s -D %s", types, macro);
  cl_kernel k;
  size_t local = 0;
  if ((st = clb__kernel_get_local(ctx, op, "elementwise", opts, "ew_unary", &k, &local)) != CLB_OK) return st;
  cl_int rank = a->rank;
  cl_uint zero = 0;
  clb_arg args[] = {CLB_ARG_DATA(a->data), CLB_ARG(a->shape.mem), CLB_ARG(rank),
                    CLB_ARG_DATA(o->data), CLB_ARG(o->shape.mem), CLB_ARG(ctx->status), CLB_ARG(zero)};
  char what[192];
  clb__tensor_desc(a, what, sizeof what);
  return clb__launch(ctx, op, what, k, args, CLB_NARGS(args), CLB_NARGS(args) - 1, clb__groups_local(ctx, clb_tensor_bound_numel(a), local), local);
}

clb_status clb_unary(clb_context_t ctx, clb_unary_op uop, clb_tensor_t a, clb_tensor_t *out) {
  const char *op = (unsigned)uop < CLB_UNARY_COUNT ? unary_names[uop] : "clb_unary";
  clb_status st = check_ctx(ctx, op);
  if (st != CLB_OK) return st;
  if ((unsigned)uop >= CLB_UNARY_COUNT) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "clb_unary: unknown op %d", (int)uop);
  if ((st = clb__check_tensor(ctx, op, "a", a)) != CLB_OK) return st;
  int needs_float = uop == CLB_UNARY_SIGMOID || uop == CLB_UNARY_TANH || uop == CLB_UNARY_EXP || uop == CLB_UNARY_LOG ||
                    uop >= CLB_UNARY_ERF;
  if (needs_float && !clb__dtype_is_float(a->dtype))
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: %s is not floating; cast to f32 or f64 first", op, clb_dtype_name(a->dtype));
  if (a->dtype == CLB_DTYPE_BOOL && uop != CLB_UNARY_COPY)
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s: bool tensors take no arithmetic (cast first)", op);
  return unary_launch(ctx, op, unary_macros[uop], a, a->dtype, out);
}

clb_status clb_cast(clb_context_t ctx, clb_tensor_t a, clb_dtype dtype, clb_tensor_t *out) {
  static const char *op = "cast";
  clb_status st = check_ctx(ctx, op);
  if (st != CLB_OK) return st;
  if ((st = clb__check_tensor(ctx, op, "a", a)) != CLB_OK) return st;
  if ((unsigned)dtype >= CLB_DTYPE_COUNT) return clb__set_error(ctx, CLB_ERR_DTYPE, "cast: unknown dtype %d", (int)dtype);
  if (dtype == CLB_DTYPE_F64 && !ctx->info.has_fp64)
    return clb__set_error(ctx, CLB_ERR_UNSUPPORTED, "cast: f64 needs cl_khr_fp64, which %s lacks", ctx->info.name);
  return unary_launch(ctx, op, "OP_CAST", a, dtype, out);
}

/* An elementwise.cl kernel built for one tensor's type (TA = TOUT = its). */
static clb_status own_type_kernel(clb_context_t ctx, const char *op, clb_dtype dt, const char *macro, const char *name,
                                  cl_kernel *k, size_t *local) {
  char opts[256], types[160];
  type_options(types, sizeof types, dt, dt);
  snprintf(opts, sizeof opts, "-D %s %s", macro, types);
  return clb__kernel_get_local(ctx, op, "elementwise", opts, name, k, local);
}

clb_status clb_assert(clb_context_t ctx, clb_tensor_t cond, const char *msg) {
  static const char *op = "assert";
  clb_status st = check_ctx(ctx, op);
  if (st != CLB_OK) return st;
  if ((st = clb__check_tensor(ctx, op, "cond", cond)) != CLB_OK) return st;
  cl_kernel k;
  size_t local = 0;
  if ((st = own_type_kernel(ctx, op, cond->dtype, "EW_ASSERT", "ew_assert", &k, &local)) != CLB_OK) return st;
  cl_int rank = cond->rank;
  cl_uint zero = 0;
  clb_arg args[] = {CLB_ARG_DATA(cond->data), CLB_ARG(cond->shape.mem), CLB_ARG(rank), CLB_ARG(ctx->status),
                    CLB_ARG(zero)};
  char what[192], desc[64];
  snprintf(what, sizeof what, "\"%.120s\" on %s", msg ? msg : "", clb__tensor_desc(cond, desc, sizeof desc));
  return clb__launch(ctx, op, what, k, args, CLB_NARGS(args), CLB_NARGS(args) - 1,
                     clb__groups_local(ctx, clb_tensor_bound_numel(cond), local), local);
}

clb_status clb_fill(clb_context_t ctx, clb_tensor_t t, double value) {
  static const char *op = "fill";
  clb_status st = check_ctx(ctx, op);
  if (st != CLB_OK) return st;
  if ((st = clb__check_output(ctx, op, "t", t)) != CLB_OK) return st;
  clb__note_output(ctx, op, t);
  union {
    float f;
    double d;
    cl_int i;
    cl_long l;
    cl_uchar u;
  } v;
  size_t vs = clb_dtype_size(t->dtype);
  switch (t->dtype) {
  case CLB_DTYPE_F32: v.f = (float)value; break;
  case CLB_DTYPE_F64: v.d = value; break;
  case CLB_DTYPE_I32: v.i = (cl_int)value; break;
  case CLB_DTYPE_I64: v.l = (cl_long)value; break;
  case CLB_DTYPE_U8: v.u = (cl_uchar)value; break;
  default: v.u = value != 0.0; break;
  }
  cl_kernel k;
  size_t local = 0;
  if ((st = own_type_kernel(ctx, op, t->dtype, "EW_FILL", "ew_fill", &k, &local)) != CLB_OK) return st;
  cl_int rank = t->rank;
  clb_arg args[] = {CLB_ARG_DATA(t->data), CLB_ARG(t->shape.mem), CLB_ARG(rank), {vs, &v}};
  char what[192];
  clb__tensor_desc(t, what, sizeof what);
  return clb__launch(ctx, op, what, k, args, CLB_NARGS(args), -1, clb__groups_local(ctx, clb_tensor_bound_numel(t), local), local);
}
