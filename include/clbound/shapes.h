/* clbound/shapes.h: the symbol engine: symbolic dims with ranges, canonical interned
 * expressions, unification, op shape rules, guards and specialization policies.
 *
 * Pure C, no OpenCL. docs/shapes.md describes the canonical forms, the printed
 * syntax, the growth rule and the bucket ladders with examples.
 *
 * Thread-safety: a clb_shapes_t, clb_guards_t or clb_policy_t may be used by one
 * thread at a time; distinct objects are independent. */
#ifndef CLB_SHAPES_H
#define CLB_SHAPES_H

#include <stddef.h>
#include <stdint.h>

#include "clbound/export.h"
#include "clbound/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest rank of a shape. */
#define CLB_SHAPE_MAX_RANK 8

typedef struct clb_shapes *clb_shapes_t;    /* a symbol context: owns every expression */
typedef const struct clb_expr *clb_expr_t;  /* an interned expression; borrowed from its context */
typedef struct clb_guards *clb_guards_t;    /* the guards of one plan */
typedef struct clb_policy *clb_policy_t;    /* a specialization policy of one graph */

/* ---- Context ---------------------------------------------------------------- */

/* Creates an empty symbol context. On success *out owns it; release it with
 * clb_shapes_free(). Errors: CLB_ERR_NULL, CLB_ERR_HOST_OOM. */
CLB_API clb_status clb_shapes_new(clb_shapes_t *out);

/* Frees the context and every expression, symbol and check it owns. NULL is a no-op. */
CLB_API void clb_shapes_free(clb_shapes_t sh);

/* The detail message of the last failed call on `sh` ("dim 1 of w: s4 = 3 vs s6 = 5").
 * Owned by the context; valid until the next failing call. Never NULL. */
CLB_API const char *clb_shapes_errmsg(clb_shapes_t sh);

/* A call given a NULL handle or out pointer, or a creation that fails, has no
 * handle to hold its message: it goes to the thread's message, the one
 * clb_last_errmsg() returns (also declared in clbound/runtime.h). */
CLB_API const char *clb_last_errmsg(void);

/* Byte offset in the text of the last parse error (0-based). */
CLB_API size_t clb_shapes_errpos(clb_shapes_t sh);

/* Sets the range given to symbols that clb_expr_parse() creates with
 * CLB_PARSE_CREATE (default [0, 2147483647]). Errors: CLB_ERR_INVALID_ARG if min > max. */
CLB_API clb_status clb_shapes_set_default_range(clb_shapes_t sh, int64_t min, int64_t max);

/* ---- Symbols ------------------------------------------------------------------ */

/* Creates a symbol `name` (letters, digits and '_', not starting with a digit, not
 * "min"/"max"; NULL names it s0, s1, ...) with values in [min, max] and, when
 * divisor > 1, value % divisor == remainder. The range is tightened to the divisor.
 * *out is its expression: a SYM node, or a CONST when only one value is possible.
 * Errors: CLB_ERR_INVALID_ARG (bad name, taken name, divisor < 1, remainder not in
 * [0, divisor)), CLB_ERR_OUT_OF_BOUNDS (no value satisfies the range and divisor). */
CLB_API clb_status clb_sym_new(clb_shapes_t sh, const char *name, int64_t min, int64_t max,
                               int64_t divisor, int64_t remainder, clb_expr_t *out);

/* Creates a data-dependent (unbacked) symbol u0, u1, ... in [min, max]: a size
 * only a kernel knows (a nonzero count). `origin` says where it comes from
 * ("nonzero of x"); copied. Equalities involving it become deferred checks. */
CLB_API clb_status clb_sym_new_unbacked(clb_shapes_t sh, int64_t min, int64_t max,
                                        const char *origin, clb_expr_t *out);

/* The symbol named `name`, or NULL. */
CLB_API clb_expr_t clb_sym_find(clb_shapes_t sh, const char *name);

/* 1 if `sym` is a data-dependent symbol, else 0 (also for non-symbols). */
CLB_API int clb_sym_is_unbacked(clb_expr_t sym);

/* The origin text of an unbacked symbol ("nonzero of x"), or "" for others. */
CLB_API const char *clb_sym_origin(clb_shapes_t sh, clb_expr_t sym);

/* ---- Expressions ---------------------------------------------------------------
 *
 * Every constructor returns the canonical, interned node: equal expressions are
 * the same pointer. Values are int64; a constant or coefficient that overflows
 * (or equals INT64_MIN) gives CLB_ERR_OUT_OF_BOUNDS; ranges saturate at the int64
 * limits instead. floordiv and mod are floor division (Python's // and %) and need
 * a divisor whose range is >= 1 (else CLB_ERR_DIV_ZERO). */

typedef enum clb_expr_kind {
  CLB_EXPR_CONST = 0,
  CLB_EXPR_SYM = 1,
  CLB_EXPR_ADD = 2,      /* constant + args[0] + ... */
  CLB_EXPR_MUL = 3,      /* coefficient * args[0] * ... */
  CLB_EXPR_FLOORDIV = 4, /* args[0] // args[1] */
  CLB_EXPR_MOD = 5,      /* args[0] % args[1] */
  CLB_EXPR_MIN = 6,      /* min(args...) */
  CLB_EXPR_MAX = 7       /* max(args...) */
} clb_expr_kind;

CLB_API clb_status clb_expr_const(clb_shapes_t sh, int64_t value, clb_expr_t *out);
CLB_API clb_status clb_expr_add(clb_shapes_t sh, clb_expr_t a, clb_expr_t b, clb_expr_t *out);
CLB_API clb_status clb_expr_sub(clb_shapes_t sh, clb_expr_t a, clb_expr_t b, clb_expr_t *out);
CLB_API clb_status clb_expr_mul(clb_shapes_t sh, clb_expr_t a, clb_expr_t b, clb_expr_t *out);
CLB_API clb_status clb_expr_floordiv(clb_shapes_t sh, clb_expr_t a, clb_expr_t b, clb_expr_t *out);
CLB_API clb_status clb_expr_mod(clb_shapes_t sh, clb_expr_t a, clb_expr_t b, clb_expr_t *out);
CLB_API clb_status clb_expr_min(clb_shapes_t sh, clb_expr_t a, clb_expr_t b, clb_expr_t *out);
CLB_API clb_status clb_expr_max(clb_shapes_t sh, clb_expr_t a, clb_expr_t b, clb_expr_t *out);

/* Accessors. clb_expr_value is the value of a CONST, the constant term of an ADD
 * and the coefficient of a MUL (0 otherwise). clb_expr_arg returns NULL past the end. */
CLB_API clb_expr_kind clb_expr_kind_of(clb_expr_t e);
CLB_API int64_t clb_expr_min_of(clb_expr_t e);     /* smallest possible value */
CLB_API int64_t clb_expr_max_of(clb_expr_t e);     /* largest possible value: the capacity */
CLB_API int64_t clb_expr_value(clb_expr_t e);
CLB_API int clb_expr_is_const(clb_expr_t e);
CLB_API size_t clb_expr_nargs(clb_expr_t e);
CLB_API clb_expr_t clb_expr_arg(clb_expr_t e, size_t i);

/* The printed form ("s0//4 + 1", "max(s1,s2)"); owned by the context, valid until
 * clb_shapes_free(). NULL only when out of host memory. */
CLB_API const char *clb_expr_str(clb_shapes_t sh, clb_expr_t e);

/* Writes the printed form into buf (NUL-terminated) and its length to *len
 * (optional). Errors: CLB_ERR_BUFFER_SMALL (*len still says what is needed). */
CLB_API clb_status clb_expr_print(clb_shapes_t sh, clb_expr_t e, char *buf, size_t size, size_t *len);

/* Parse flags. */
#define CLB_PARSE_CREATE 1u /* create unknown symbols with the default range */

/* Parses `text` (integers, symbol names, + - * // % with Python precedence, unary
 * minus, parentheses, min(a,b,...), max(a,b,...)) into a canonical expression.
 * Symbols must exist unless CLB_PARSE_CREATE is given. Errors: CLB_ERR_PARSE with
 * "at N: ..." in the message and clb_shapes_errpos(); the construction errors of
 * the constructors above. */
CLB_API clb_status clb_expr_parse(clb_shapes_t sh, const char *text, unsigned flags, clb_expr_t *out);

/* ---- Evaluation -------------------------------------------------------------- */

/* A value for one symbol. */
typedef struct clb_binding {
  clb_expr_t sym; /* a SYM expression of the context */
  int64_t value;
} clb_binding;

/* Evaluates e with the given bindings. Each binding is checked against its
 * symbol's range and divisor (after unification: its class's) and errors with
 * CLB_ERR_OUT_OF_BOUNDS ("s0 = 9 outside [1, 8]"). A symbol of e with no binding
 * (directly or through a unified symbol) gives CLB_ERR_INVALID_ARG; an int64
 * overflow gives CLB_ERR_OUT_OF_BOUNDS. */
CLB_API clb_status clb_expr_eval(clb_shapes_t sh, clb_expr_t e, const clb_binding *b, size_t n,
                                 int64_t *out);

/* ---- Unification ---------------------------------------------------------------- */

/* Kinds of checks the host could not prove. */
typedef enum clb_check_kind {
  CLB_CHECK_EQ = 0,       /* a == b */
  CLB_CHECK_GE = 1,       /* a >= b */
  CLB_CHECK_BROADCAST = 2 /* a == b, or min(a, b) == 1 */
} clb_check_kind;

/* A deferred check: recorded when an assumption cannot be proved on the host. */
typedef struct clb_check {
  clb_check_kind kind;
  clb_expr_t a, b;
  const char *what; /* "matmul: dim 0 of b" ; owned by the context */
  int on_device;    /* 1 if it involves a data-dependent symbol: only a kernel can check it */
} clb_check;

/* Declares a == b. Merges their classes (union-find): ranges intersect, a symbol
 * equal to a constant is bound to it, a symbol equal to an expression is bound to
 * that expression. `what` names the place ("dim 1 of w") for messages; copied.
 * An equality involving a data-dependent symbol is also recorded as a deferred
 * check (on_device = 1); one that cannot be solved symbolically is recorded as a
 * check instead of merged. Errors: CLB_ERR_CONTRADICTION ("dim 1 of w: s4 = 3 vs
 * s6 = 5", or ranges that do not overlap). */
CLB_API clb_status clb_shapes_unify(clb_shapes_t sh, clb_expr_t a, clb_expr_t b, const char *what);

/* Rewrites e with every symbol replaced by its class representative (a symbol, a
 * constant or an expression): the tightest canonical form after unification. */
CLB_API clb_status clb_shapes_resolve(clb_shapes_t sh, clb_expr_t e, clb_expr_t *out);

/* The deferred checks recorded so far, in order; NULL past the end. Owned by the context. */
CLB_API size_t clb_shapes_check_count(clb_shapes_t sh);
CLB_API const clb_check *clb_shapes_check_at(clb_shapes_t sh, size_t i);

/* Evaluates every deferred check whose symbols all have bindings; the first that
 * fails gives CLB_ERR_DEVICE_CHECK with its words. Checks with unbound symbols are
 * skipped; *skipped (optional) counts them. */
CLB_API clb_status clb_shapes_check_eval(clb_shapes_t sh, const clb_binding *b, size_t n,
                                         size_t *skipped);

/* Broadcasts two dims: equal dims give that dim, a static 1 gives the other, two
 * dims both known > 1 unify, and otherwise the result is max(a,b) with a deferred
 * CLB_CHECK_BROADCAST. Errors: CLB_ERR_CONTRADICTION. */
CLB_API clb_status clb_shapes_broadcast(clb_shapes_t sh, clb_expr_t a, clb_expr_t b, const char *what,
                                        clb_expr_t *out);

/* ---- Shapes and op rules ---------------------------------------------------------- */

/* A symbolic shape: `rank` dims, each an expression of one context. */
typedef struct clb_shape {
  int rank;
  clb_expr_t dims[CLB_SHAPE_MAX_RANK];
} clb_shape;

/* Builds a shape from integers (a static shape) or from text ("[s0, 10]" or "s0,10");
 * clb_shape_parse takes the parse flags above. */
CLB_API clb_status clb_shape_static(clb_shapes_t sh, int rank, const int64_t *dims, clb_shape *out);
CLB_API clb_status clb_shape_parse(clb_shapes_t sh, const char *text, unsigned flags, clb_shape *out);

/* The number of elements: the product of the dims (1 for rank 0). */
CLB_API clb_status clb_shape_numel(clb_shapes_t sh, const clb_shape *s, clb_expr_t *out);

/* Writes "[s0, 10]" into buf. Errors: CLB_ERR_BUFFER_SMALL. */
CLB_API clb_status clb_shape_print(clb_shapes_t sh, const clb_shape *s, char *buf, size_t size);

/* Every op whose output shape the engine infers. Inputs are listed per op. */
typedef enum clb_op {
  CLB_OP_UNARY = 0,          /* (x): x's shape; also casts, softmax, activations */
  CLB_OP_BINARY = 1,         /* (a, b): broadcast of a and b */
  CLB_OP_WHERE = 2,          /* (cond, a, b): broadcast of the three */
  CLB_OP_SUM = 3,            /* (x): over `dim` or all; keepdim */
  CLB_OP_MEAN = 4,           /* (x): same as sum */
  CLB_OP_MAX = 5,            /* (x): same as sum */
  CLB_OP_MATMUL = 6,         /* (a, b): torch.matmul with trans_a/trans_b on the last two dims */
  CLB_OP_LINEAR = 7,         /* (x, w[, bias]): x [..., k], w [n, k], bias [n] -> [..., n] */
  CLB_OP_RESHAPE = 8,        /* (x): to params.target (a NULL entry is -1) */
  CLB_OP_VIEW = 9,           /* (x): same as reshape */
  CLB_OP_FLATTEN = 10,       /* (x): dims [dim, dim2] into one (defaults 0, -1) */
  CLB_OP_SQUEEZE = 11,       /* (x): removes `dim` (or all static 1s with `all`) */
  CLB_OP_UNSQUEEZE = 12,     /* (x): inserts a 1 at `dim` */
  CLB_OP_TRANSPOSE = 13,     /* (x): swaps `dim` and `dim2` */
  CLB_OP_CONCAT = 14,        /* (x0, x1, ...): along `dim`, others unify */
  CLB_OP_NONZERO = 15,       /* (x): [u, rank] with u data-dependent */
  CLB_OP_MASKED_SELECT = 16, /* (x, mask): [count] */
  CLB_OP_MASKED_SCATTER = 17,/* (x, mask, source): x's shape, deferred source check */
  CLB_OP_COUNT = 18
} clb_op;

/* Parameters of an op; set them after clb_op_params_init(). */
typedef struct clb_op_params {
  int dim;                  /* reductions, squeeze, unsqueeze, concat; flatten start; transpose first */
  int dim2;                 /* transpose second dim; flatten end dim */
  int keepdim;              /* reductions: keep the reduced dim(s) as a static 1 */
  int all;                  /* reductions: over every dim; squeeze: every static 1 */
  int trans_a, trans_b;     /* matmul: transpose the last two dims of a / b */
  int target_rank;          /* reshape/view: rank of target */
  const clb_expr_t *target; /* reshape/view: dims; one NULL entry is inferred (-1) */
  const char *label;        /* the op's name in messages and symbol origins (default: the op's) */
} clb_op_params;

/* Sets the defaults: dim 0, dim2 -1, everything else 0/NULL. */
CLB_API void clb_op_params_init(clb_op_params *p);

/* The op's name ("masked_select"), or "unknown". */
CLB_API const char *clb_op_name(clb_op op);

/* Infers the output shape of `op` from the input shapes (names[i] names input i in
 * messages; NULL names them "input 0", ...). Inner dims and the like unify; new
 * data-dependent symbols are created for nonzero and masked ops; checks that need
 * the device are recorded (clb_shapes_check_at). p may be NULL for the defaults.
 * Errors: CLB_ERR_INVALID_ARG (wrong input count or params), CLB_ERR_RANK,
 * CLB_ERR_SHAPE, CLB_ERR_CONTRADICTION, with the words in clb_shapes_errmsg(). */
CLB_API clb_status clb_op_infer(clb_shapes_t sh, clb_op op, const clb_op_params *p,
                                const clb_shape *inputs, const char *const *names, size_t ninputs,
                                clb_shape *out);

/* ---- Guards --------------------------------------------------------------------
 *
 * A plan's guards are over its inputs' concrete dims, passed as one flat array:
 * input 0's dims, then input 1's, and so on. */

/* Creates an empty guard set for `ninputs` inputs with the given names (copied)
 * and ranks. On success *out is owned by the caller (clb_guards_free). */
CLB_API clb_status clb_guards_new(size_t ninputs, const char *const *names, const int *ranks,
                                  clb_guards_t *out);
CLB_API void clb_guards_free(clb_guards_t g); /* NULL is a no-op */

CLB_API clb_status clb_guards_add_eq(clb_guards_t g, size_t input, int dim, int64_t value);
CLB_API clb_status clb_guards_add_range(clb_guards_t g, size_t input, int dim, int64_t min, int64_t max);
CLB_API clb_status clb_guards_add_divisible(clb_guards_t g, size_t input, int dim, int64_t divisor);
CLB_API clb_status clb_guards_add_same(clb_guards_t g, size_t input, int dim, size_t input2, int dim2);

/* Adds the guards that input `input` of symbolic shape s assumes: a constant dim
 * gives eq, a symbol gives its range (and divisor), and a symbol seen before (in
 * this guard set) gives same. Other expressions give a range over their bounds. */
CLB_API clb_status clb_guards_add_shape(clb_guards_t g, clb_shapes_t sh, size_t input, const clb_shape *s);

CLB_API size_t clb_guards_count(clb_guards_t g);

/* Checks concrete dims (ndims must be the sum of the ranks). The first failing
 * guard gives CLB_ERR_GUARD and its words in clb_guards_errmsg ("dim 0 of x: 5000 >
 * bound 4096"). */
CLB_API clb_status clb_guards_check(clb_guards_t g, const int64_t *dims, size_t ndims);

/* The words of guard i ("dim 0 of x in [1, 4096]"); owned by g, valid until the next call. */
CLB_API const char *clb_guards_describe(clb_guards_t g, size_t i);
CLB_API const char *clb_guards_errmsg(clb_guards_t g);

/* ---- Bucket ladders ---------------------------------------------------------------- */

/* Powers of two from the smallest >= lo up to the first >= hi, the last one
 * replaced by hi (the bound): {1, 2, 4, ..., hi}. Writes at most cap entries.
 * Errors: CLB_ERR_INVALID_ARG (lo < 1, hi < lo), CLB_ERR_BUFFER_SMALL. */
CLB_API clb_status clb_buckets_pow2(int64_t lo, int64_t hi, int64_t *ladder, size_t cap, size_t *n);

/* A percentile ladder (Intel Gaudi's recipe): bucket k of N is the ceil(k*n/N)-th
 * smallest observed size, duplicates removed, so the last is the largest observed.
 * Errors: CLB_ERR_INVALID_ARG (no observations, N < 1), CLB_ERR_BUFFER_SMALL,
 * CLB_ERR_HOST_OOM. */
CLB_API clb_status clb_buckets_percentile(const int64_t *observed, size_t nobserved, size_t nbuckets,
                                          int64_t *ladder, size_t cap, size_t *n);

/* ---- Specialization policies ------------------------------------------------------- */

typedef enum clb_policy_kind {
  CLB_POLICY_STATIC = 0,    /* a plan per distinct shape, sizes compiled in */
  CLB_POLICY_AUTOMATIC = 1, /* static until a dim changes, then bounded (one rebuild) */
  CLB_POLICY_DYNAMIC = 2,   /* the named dims bounded from the start: one plan */
  CLB_POLICY_BUCKETED = 3   /* sizes padded up to buckets: a plan per bucket */
} clb_policy_kind;

/* What the executor does on this run. */
typedef enum clb_action {
  CLB_ACTION_REUSE = 0,  /* run plan `plan` */
  CLB_ACTION_COMPILE = 1 /* compile plan `plan` (a new index), then run it */
} clb_action;

typedef struct clb_decision {
  clb_action action;
  size_t plan;           /* index of the plan to run */
  const char *reason;    /* in words; owned by the policy, valid until the next decide */
  const int64_t *padded; /* per flat dim: the size the run is padded to (bucketed), else
                            the actual size; owned by the policy, valid until the next decide */
} clb_decision;

/* Creates a policy for a graph with `ninputs` inputs (names copied, ranks). The
 * growth cap (automatic without a user max) defaults to 2^31. Owned by the caller. */
CLB_API clb_status clb_policy_new(clb_policy_kind kind, size_t ninputs, const char *const *names,
                                  const int *ranks, clb_policy_t *out);
CLB_API void clb_policy_free(clb_policy_t p); /* NULL is a no-op */

/* The user's max for a dim: automatic uses it as the bound when the dim turns
 * dynamic; dynamic marks the dim bounded from the start with this bound. */
CLB_API clb_status clb_policy_set_max(clb_policy_t p, size_t input, int dim, int64_t max);

/* Bucketed: the ladder of a dim (ascending, copied). Dims without one are static. */
CLB_API clb_status clb_policy_set_buckets(clb_policy_t p, size_t input, int dim, const int64_t *ladder,
                                          size_t n);

/* Automatic: the largest bound the growth rule may choose. */
CLB_API clb_status clb_policy_set_growth_cap(clb_policy_t p, int64_t cap);

/* Decides what to run for these concrete dims (flat, ndims = sum of ranks). A size
 * the policy cannot serve (over a dynamic dim's bound or the top bucket) gives
 * CLB_ERR_GUARD with the reason in out->reason and clb_policy_errmsg. */
CLB_API clb_status clb_policy_decide(clb_policy_t p, const int64_t *dims, size_t ndims, clb_decision *out);

CLB_API size_t clb_policy_plan_count(clb_policy_t p);

/* The size plan `plan` allocates dim `dim` of input `input` at; *is_static is 1 when
 * the size is compiled in (static dims, bucket sizes) and 0 for a bounded dim. */
CLB_API clb_status clb_policy_plan_bound(clb_policy_t p, size_t plan, size_t input, int dim, int64_t *bound,
                                         int *is_static);

CLB_API const char *clb_policy_errmsg(clb_policy_t p);

#ifdef __cplusplus
}
#endif
#endif /* CLB_SHAPES_H */
