/* slice.c: numpy's basic indexing (clb_basic_index, clb_slice, clb_index):
 * slices and integer indices over x's actual sizes, read on the device by
 * kernels/view.cl's slice_copy, which copies x[keys] dense into the output; the
 * output's bounds come from x's bounds, on the host. clb_permute and
 * clb_transpose are the same copy of x whole with its dims reordered. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "runtime/cache/cache.h"

/* A full slice, `:`. */
static const clb_index_key full_key = {CLB_KEY_SLICE, INT64_MIN, INT64_MAX, 1};

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Python's slice.indices(n): clb_slice_len, the kernel's own definition. */
#define CLB_SLICE_HOST
#define clb_i64 int64_t
#define CLB_SLICE_FN static
#include "kernels/view.cl"

/* The length of start:stop:step over a dim of n (start and stop within
 * [-n - 1, n + 1], or clamped so by the caller). */
static int64_t slice_len(int64_t n, int64_t start, int64_t stop, int64_t step) {
  int64_t first;
  return clb_slice_len(n, start, stop, step, &first);
}

/* The longest start:stop:step can be over a dim of any size in [0, bound]
 * (start, stop in [-bound - 1, bound + 1]). Between the sizes where a clamp of
 * start or stop switches on or off (n = |start|, |stop|), both move with n by 0
 * or 1, so the length is monotone there: the longest is at one of those sizes,
 * their neighbours, 0 or the bound. (x[-2:5] is longest at n = 2, not at the
 * bound.) */
static int64_t slice_bound(int64_t bound, int64_t start, int64_t stop, int64_t step) {
  int64_t best = slice_len(bound, start, stop, step), at[4] = {start, -start, stop, -stop};
  for (int k = 0; k < 4; k++)
    for (int64_t n = at[k] - 1; n <= at[k] + 1; n++)
      if (n >= 0 && n <= bound) {
        int64_t len = slice_len(n, start, stop, step);
        if (len > best) best = len;
      }
  int64_t len0 = slice_len(0, start, stop, step);
  return len0 > best ? len0 : best;
}

/* Appends one bound of a slice ("" when omitted: INT64_MIN or INT64_MAX). */
static void put_end(char *buf, size_t cap, int64_t v) {
  size_t used = strlen(buf);
  if (v != INT64_MIN && v != INT64_MAX && used < cap) snprintf(buf + used, cap - used, "%lld", (long long)v);
}

/* The keys as Python writes them ("2:5, -1, None, ::-1") into buf. */
static void keys_text(int nkeys, const clb_index_key *keys, char *buf, size_t cap) {
  buf[0] = 0;
  for (int i = 0; i < nkeys; i++) {
    size_t used = strlen(buf);
    if (i && used < cap) snprintf(buf + used, cap - used, ", ");
    used = strlen(buf);
    const clb_index_key *k = &keys[i];
    if (k->kind == CLB_KEY_NEWAXIS) {
      snprintf(buf + used, cap - used, "None");
    } else if (k->kind == CLB_KEY_INDEX) {
      snprintf(buf + used, cap - used, "%lld", (long long)k->start);
    } else {
      put_end(buf, cap, k->start);
      used = strlen(buf);
      snprintf(buf + used, cap - used, ":");
      put_end(buf, cap, k->stop);
      used = strlen(buf);
      if (k->step != 1) snprintf(buf + used, cap - used, ":%lld", (long long)k->step);
    }
  }
}

/* What slice_copy takes beside the tensors, and the output's shape. */
typedef struct slice_plan {
  int rank_o;
  int64_t bound[CLB_MAX_RANK];
  uint8_t dyn[CLB_MAX_RANK];
  cl_long8 start, stop, step, omap;
  cl_uint index_mask;
} slice_plan;

/* Adds output dim j (x's dim d, or a new axis for d < 0) of bound b. */
static clb_status plan_out_dim(clb_context_t ctx, const char *op, const char *what, slice_plan *p, int d, int64_t b,
                               int dyn) {
  if (p->rank_o == CLB_MAX_RANK)
    return clb__set_error(ctx, CLB_ERR_RANK, "%s of %s: the result would have more than %d dims", op, what,
                          CLB_MAX_RANK);
  p->omap.s[p->rank_o] = d;
  p->bound[p->rank_o] = b;
  p->dyn[p->rank_o] = (uint8_t)dyn;
  p->rank_o++;
  return CLB_OK;
}

/* Adds the key k over x's dim d. */
static clb_status plan_key(clb_context_t ctx, const char *op, const char *what, clb_tensor_t x, int d,
                           const clb_index_key *k, slice_plan *p) {
  int64_t b = x->bound[d];
  if (k->kind == CLB_KEY_INDEX) {
    if (k->start < -b || k->start >= b) {
      if (x->dyn[d])
        return clb__set_error(ctx, CLB_ERR_INDEX, "%s of %s: index %lld is out of range for dim %d at every size (bound %lld)",
                              op, what, (long long)k->start, d, (long long)b);
      return clb__set_error(ctx, CLB_ERR_INDEX, "%s of %s: index %lld is out of range for dim %d of size %lld", op, what,
                            (long long)k->start, d, (long long)b);
    }
    p->start.s[d] = k->start;
    p->stop.s[d] = 0;
    p->step.s[d] = 1;
    p->index_mask |= 1u << d;
    return CLB_OK;
  }
  if (k->step == 0) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s of %s: slice step cannot be zero (dim %d)", op, what, d);
  /* Python clamps a start or stop past either end the same way for every size
   * up to the bound, so clamping them here changes nothing and keeps the
   * arithmetic far from overflow */
  int64_t s = clamp64(k->start, -b - 1, b + 1), e = clamp64(k->stop, -b - 1, b + 1);
  p->start.s[d] = s;
  p->stop.s[d] = e;
  p->step.s[d] = k->step;
  return plan_out_dim(ctx, op, what, p, d, x->dyn[d] ? slice_bound(b, s, e, k->step) : slice_len(b, s, e, k->step),
                      x->dyn[d]);
}

/* The plan of x[keys]: the kernel's arguments and the output's bounds. */
static clb_status plan_keys(clb_context_t ctx, const char *op, const char *what, clb_tensor_t x, int nkeys,
                            const clb_index_key *keys, slice_plan *p) {
  memset(p, 0, sizeof *p);
  int d = 0;
  clb_status st = CLB_OK;
  for (int i = 0; i < nkeys && st == CLB_OK; i++) {
    const clb_index_key *k = &keys[i];
    if (k->kind < 0 || k->kind >= CLB_KEY_COUNT)
      return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s of %s: key %d has kind %d (SLICE, INDEX or NEWAXIS)", op,
                            what, i, (int)k->kind);
    if (k->kind == CLB_KEY_NEWAXIS) {
      st = plan_out_dim(ctx, op, what, p, -1, 1, 0);
      continue;
    }
    if (d == x->rank)
      return clb__set_error(ctx, CLB_ERR_INDEX, "%s of %s: too many indices for x of rank %d", op, what, x->rank);
    st = plan_key(ctx, op, what, x, d++, k, p);
  }
  for (; d < x->rank && st == CLB_OK; d++) st = plan_key(ctx, op, what, x, d, &full_key, p);
  return st;
}

/* The element type slice_copy moves: an unsigned integer of the dtype's size. */
static const char *copy_type(clb_dtype dt) {
  switch (clb_dtype_size(dt)) {
  case 8: return "ulong";
  case 4: return "uint";
  case 2: return "ushort";
  default: return "uchar";
  }
}

/* The launch of a planned copy of x (basic_index, clb_permute). */
static clb_status copy_planned(clb_context_t ctx, const char *op, const char *what, clb_tensor_t x,
                               const slice_plan *pp, clb_tensor_t *out) {
  slice_plan p = *pp; /* the launch takes its fields by address */
  clb_status st;
  if (*out) {
    if ((st = clb__check_output(ctx, op, "out", *out)) != CLB_OK) return st;
    const clb_buf *a = &(*out)->data, *b = &x->data; /* a graph's tensors share its arena at offsets */
    if (a->mem == b->mem && a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes)
      return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s of %s: out shares x's data; %s copies into another tensor",
                            op, what, op);
  }
  if ((st = clb__output(ctx, op, x->dtype, p.rank_o, p.bound, p.dyn, out)) != CLB_OK) return st;
  clb_tensor_t o = *out;
  char opts[64];
  snprintf(opts, sizeof opts, "-D SLICE_T=%s", copy_type(x->dtype));
  cl_kernel k;
  size_t local = 0;
  if ((st = clb__kernel_get_local(ctx, op, "view", opts, "slice_copy", &k, &local)) != CLB_OK) return st;
  cl_int rx = x->rank, ro = p.rank_o;
  cl_uint zero = 0;
  clb_arg args[] = {CLB_ARG_DATA(x->data), CLB_ARG(x->shape.mem), CLB_ARG(rx),      CLB_ARG_DATA(o->data),
                    CLB_ARG(o->shape.mem), CLB_ARG(ro),          CLB_ARG(p.start), CLB_ARG(p.stop),
                    CLB_ARG(p.step),       CLB_ARG(p.index_mask), CLB_ARG(p.omap), CLB_ARG(ctx->status),
                    CLB_ARG(zero)};
  return clb__launch(ctx, op, what, k, args, CLB_NARGS(args), CLB_NARGS(args) - 1,
                     clb__groups_local(ctx, clb_tensor_bound_numel(o), local), local);
}

/* The checks every copy of x makes first: a context, a live x, an out pointer. */
static clb_status check_copy_args(clb_context_t ctx, const char *op, clb_tensor_t x, clb_tensor_t *out) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_status st = clb__check_tensor(ctx, op, "x", x);
  if (st != CLB_OK) return st;
  return out ? CLB_OK : clb__set_error(ctx, CLB_ERR_NULL, "%s: out is NULL", op);
}

static clb_status basic_index(clb_context_t ctx, const char *op, clb_tensor_t x, int nkeys, const clb_index_key *keys,
                              clb_tensor_t *out) {
  clb_status st = check_copy_args(ctx, op, x, out);
  if (st != CLB_OK) return st;
  if (nkeys < 0) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: nkeys = %d is negative", op, nkeys);
  if (nkeys > 0 && !keys) return clb__set_error(ctx, CLB_ERR_NULL, "%s: keys is NULL (nkeys = %d)", op, nkeys);
  char what[256], desc[96], ktext[96];
  clb__tensor_desc(x, desc, sizeof desc);
  keys_text(nkeys, keys, ktext, sizeof ktext);
  snprintf(what, sizeof what, "x %s, key [%s]", desc, ktext);
  slice_plan p;
  if ((st = plan_keys(ctx, op, what, x, nkeys, keys, &p)) != CLB_OK) return st;
  return copy_planned(ctx, op, what, x, &p, out);
}

/* clb_permute and clb_transpose: x whole, its dims in the order dims gives. */
static clb_status permute(clb_context_t ctx, const char *op, clb_tensor_t x, int ndims, const int *dims,
                          clb_tensor_t *out) {
  clb_status st = check_copy_args(ctx, op, x, out);
  if (st != CLB_OK) return st;
  char what[192], desc[96], dtext[64] = "";
  clb__tensor_desc(x, desc, sizeof desc);
  if (ndims != x->rank)
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s of x %s: %d dims given for x of rank %d", op, desc, ndims,
                          x->rank);
  if (ndims > 0 && !dims) return clb__set_error(ctx, CLB_ERR_NULL, "%s of x %s: dims is NULL", op, desc);
  int order[CLB_MAX_RANK], seen = 0;
  for (int j = 0; j < ndims; j++) {
    size_t used = strlen(dtext);
    snprintf(dtext + used, sizeof dtext - used, "%s%d", j ? ", " : "", dims[j]);
  }
  snprintf(what, sizeof what, "x %s, dims (%s)", desc, dtext);
  for (int j = 0; j < ndims; j++) {
    int d = dims[j];
    if (d < -x->rank || d >= x->rank)
      return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s of %s: dim %d is outside x's rank %d", op, what, d, x->rank);
    if (d < 0) d += x->rank;
    if (seen & (1 << d))
      return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s of %s: dim %d appears twice (dims must be a permutation)", op,
                            what, d);
    seen |= 1 << d;
    order[j] = d;
  }
  slice_plan whole, p;
  if ((st = plan_keys(ctx, op, what, x, 0, NULL, &whole)) != CLB_OK) return st;
  p = whole;
  for (int j = 0; j < ndims; j++) { /* output dim j is x's dim order[j], its bound and flag with it */
    p.omap.s[j] = order[j];
    p.bound[j] = whole.bound[order[j]];
    p.dyn[j] = whole.dyn[order[j]];
  }
  return copy_planned(ctx, op, what, x, &p, out);
}

clb_status clb_permute(clb_context_t ctx, clb_tensor_t x, int ndims, const int *dims, clb_tensor_t *out) {
  return permute(ctx, "permute", x, ndims, dims, out);
}

clb_status clb_transpose(clb_context_t ctx, clb_tensor_t x, int dim0, int dim1, clb_tensor_t *out) {
  static const char *op = "transpose";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_status st = clb__check_tensor(ctx, op, "x", x);
  if (st != CLB_OK) return st;
  char desc[96];
  for (int k = 0; k < 2; k++) {
    int d = k ? dim1 : dim0;
    if (d < -x->rank || d >= x->rank)
      return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s of x %s: dim%d = %d is outside x's rank %d", op,
                            clb__tensor_desc(x, desc, sizeof desc), k, d, x->rank);
  }
  int dims[CLB_MAX_RANK];
  for (int d = 0; d < x->rank; d++) dims[d] = d;
  int a = dim0 < 0 ? dim0 + x->rank : dim0, b = dim1 < 0 ? dim1 + x->rank : dim1;
  dims[a] = b;
  dims[b] = a;
  return permute(ctx, op, x, x->rank, dims, out);
}

clb_status clb_basic_index_put(clb_context_t ctx, clb_tensor_t x, int nkeys, const clb_index_key *keys,
                               clb_tensor_t src) {
  static const char *op = "index_put";
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_status st = clb__check_tensor(ctx, op, "x", x); /* a failed x stays failed: it is written only in part */
  if (st != CLB_OK) return st;
  if ((st = clb__check_tensor(ctx, op, "src", src)) != CLB_OK) return st;
  if (nkeys < 0) return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: nkeys = %d is negative", op, nkeys);
  if (nkeys > 0 && !keys) return clb__set_error(ctx, CLB_ERR_NULL, "%s: keys is NULL (nkeys = %d)", op, nkeys);
  char what[400], desc[96], sdesc[96], ktext[96];
  clb__tensor_desc(x, desc, sizeof desc);
  clb__tensor_desc(src, sdesc, sizeof sdesc);
  keys_text(nkeys, keys, ktext, sizeof ktext);
  snprintf(what, sizeof what, "x %s, key [%s], src %s", desc, ktext, sdesc);
  slice_plan p;
  if ((st = plan_keys(ctx, op, what, x, nkeys, keys, &p)) != CLB_OK) return st;
  if (src->dtype != x->dtype)
    return clb__set_error(ctx, CLB_ERR_DTYPE, "%s of %s: src's dtype is not x's (cast it first)", op, what);
  if (src->rank != 0 && src->rank != p.rank_o)
    return clb__set_error(ctx, CLB_ERR_SHAPE, "%s of %s: src has %d dims, the selection %d (or give a 0-d src)", op,
                          what, src->rank, p.rank_o);
  for (int j = 0; j < src->rank; j++) /* static sizes that differ: at once; the rest on the device */
    if (!src->dyn[j] && !p.dyn[j] && src->bound[j] != p.bound[j])
      return clb__set_error(ctx, CLB_ERR_SHAPE, "%s of %s: dim %d of src is %lld, of the selection %lld", op, what, j,
                            (long long)src->bound[j], (long long)p.bound[j]);
  const clb_buf *a = &x->data, *b = &src->data;
  if (a->mem == b->mem && a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes)
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s of %s: src shares x's data (copy it first)", op, what);
  clb__note_output(ctx, op, x);
  char opts[64];
  snprintf(opts, sizeof opts, "-D SLICE_T=%s", copy_type(x->dtype));
  cl_kernel k;
  size_t local = 0;
  if ((st = clb__kernel_get_local(ctx, op, "view", opts, "slice_put", &k, &local)) != CLB_OK) return st;
  cl_int rx = x->rank, rs = src->rank, ro = p.rank_o;
  cl_uint zero = 0;
  clb_arg args[] = {CLB_ARG_DATA(x->data),   CLB_ARG(x->shape.mem), CLB_ARG(rx),          CLB_ARG_DATA(src->data),
                    CLB_ARG(src->shape.mem), CLB_ARG(rs),           CLB_ARG(ro),          CLB_ARG(p.start),
                    CLB_ARG(p.stop),         CLB_ARG(p.step),       CLB_ARG(p.index_mask), CLB_ARG(p.omap),
                    CLB_ARG(ctx->status),    CLB_ARG(zero)};
  return clb__launch(ctx, op, what, k, args, CLB_NARGS(args), CLB_NARGS(args) - 1,
                     clb__groups_local(ctx, clb__numel(p.rank_o, p.bound), local), local);
}

clb_status clb_basic_index(clb_context_t ctx, clb_tensor_t x, int nkeys, const clb_index_key *keys, clb_tensor_t *out) {
  const char *op = "slice";
  for (int i = 0; keys && i < nkeys; i++)
    if (keys[i].kind == CLB_KEY_INDEX) op = "index";
  return basic_index(ctx, op, x, nkeys, keys, out);
}

/* clb_slice and clb_index: x[:, ..., key] with the key at dim `dim` of x
 * (negative counts from the end), the dims before it whole. */
static clb_status index_one(clb_context_t ctx, const char *op, clb_tensor_t x, int dim, clb_index_key key,
                            clb_tensor_t *out) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "%s: ctx is NULL", op);
  clb_status st = clb__check_tensor(ctx, op, "x", x);
  if (st != CLB_OK) return st;
  if (dim < -x->rank || dim >= x->rank) {
    char desc[96];
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "%s: dim %d is outside x %s of rank %d", op, dim,
                          clb__tensor_desc(x, desc, sizeof desc), x->rank);
  }
  if (dim < 0) dim += x->rank;
  clb_index_key keys[CLB_MAX_RANK];
  for (int d = 0; d < dim; d++) keys[d] = full_key;
  keys[dim] = key;
  return basic_index(ctx, op, x, dim + 1, keys, out);
}

clb_status clb_slice(clb_context_t ctx, clb_tensor_t x, int dim, int64_t start, int64_t stop, int64_t step,
                     clb_tensor_t *out) {
  clb_index_key key = {CLB_KEY_SLICE, start, stop, step};
  return index_one(ctx, "slice", x, dim, key, out);
}

clb_status clb_index(clb_context_t ctx, clb_tensor_t x, int dim, int64_t index, clb_tensor_t *out) {
  clb_index_key key = {CLB_KEY_INDEX, index, 0, 1};
  return index_one(ctx, "index", x, dim, key, out);
}
