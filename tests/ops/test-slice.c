/* test-slice.c: numpy's basic indexing (clb_basic_index, clb_slice, clb_index)
 * and its permuted copies (clb_permute, clb_transpose) against plain-C
 * references of Python's slice semantics and of numpy.transpose: every length and
 * bound for small dims (negative starts, stops and steps, omitted ends as
 * INT64_MIN / INT64_MAX), the data of several dims at sizes that change per
 * call (0, 1, around the work-group, the bound) for every element size, with
 * canaries, no host sync and no new program per size, and the error paths (an
 * index past the actual size raises CLB_ERR_INDEX at the sync, one past a static
 * dim or the bound fails at once). */
#include "ops-test.h"

#define MAXN 4096

/* Python's slice.indices(n) then range(): the indices start:stop:step takes
 * from a dim of n, into idx (when not NULL); returns their count. Written as
 * CPython's PySlice_AdjustIndices and a plain walk, not as the library's
 * closed form. */
static int64_t ref_indices(int64_t n, int64_t start, int64_t stop, int64_t step, int64_t *idx) {
  int64_t lo = step < 0 ? -1 : 0, hi = step < 0 ? n - 1 : n;
  if (start < 0) start = start < -n ? lo : start + n;
  else if (start >= n) start = hi;
  if (stop < 0) stop = stop < -n ? lo : stop + n;
  else if (stop >= n) stop = hi;
  int64_t c = 0;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (idx) idx[c] = i;
    c++;
    if (step > 0 ? stop - i <= step : stop - i >= step) break; /* the next step passes stop */
    i += step;
  }
  return c;
}

/* x[keys] on the host: x's actual dims xd (rank xr) and values xv; the
 * result's dims into od (its rank returned) and values into ov; -1 when an
 * integer index is outside its dim. */
static int ref_index(int xr, const int64_t *xd, const double *xv, int nkeys, const clb_index_key *keys, int64_t *od,
                     double *ov, int64_t *count) {
  static int64_t idx[CLB_MAX_RANK][MAXN];
  int64_t len[CLB_MAX_RANK];
  int d = 0, ro = 0;
  for (int i = 0; i <= nkeys; i++) {
    if (i == nkeys && d < xr) { /* the dims past the keys, whole */
      for (; d < xr; d++) od[ro++] = len[d] = ref_indices(xd[d], 0, xd[d], 1, idx[d]);
      break;
    }
    if (i == nkeys) break;
    const clb_index_key *k = &keys[i];
    if (k->kind == CLB_KEY_NEWAXIS) {
      od[ro++] = 1;
    } else if (k->kind == CLB_KEY_INDEX) {
      int64_t j = k->start < 0 ? k->start + xd[d] : k->start;
      if (j < 0 || j >= xd[d]) return -1;
      idx[d][0] = j;
      len[d++] = 1;
    } else {
      len[d] = ref_indices(xd[d], k->start, k->stop, k->step, idx[d]);
      od[ro++] = len[d];
      d++;
    }
  }
  int64_t n = clb_test_numel(xr, len);
  for (int64_t e = 0; e < n; e++) {
    int64_t r = e, off = 0, stride = 1;
    for (int q = xr - 1; q >= 0; q--) {
      off += idx[q][r % len[q]] * stride;
      r /= len[q];
      stride *= xd[q];
    }
    ov[e] = xv[off];
  }
  *count = n;
  return ro;
}

static long cases;

/* One slice of test_lengths whose record and data are read without a sync. */
typedef struct len_case {
  clb_tensor_t out;
  int64_t want, idx[8], rec, bound;
  int32_t data[8];
} len_case;

/* Enqueues non-blocking reads of t's record (dim 0) and of its first
 * min(bound, 8) elements into c; the caller finishes the queue. */
static void read_async(clb_context_t ctx, clb_tensor_t t, len_case *c) {
  cl_command_queue q = clb_context_cl_queue(ctx);
  REQUIRE_TRUE(clEnqueueReadBuffer(q, clb_tensor_shape_mem(t), CL_FALSE, 0, sizeof c->rec, &c->rec, 0, NULL, NULL) ==
               CL_SUCCESS);
  size_t n = (size_t)(c->bound < 8 ? c->bound : 8);
  if (n)
    REQUIRE_TRUE(clEnqueueReadBuffer(q, clb_tensor_data_mem(t), CL_FALSE, 0, n * sizeof(int32_t), c->data, 0, NULL,
                                     NULL) == CL_SUCCESS);
}

/* Every (start, stop, step) from small lists over i32 dims of bound 0..5: the
 * output's bound and static/dynamic flag against the longest the reference
 * gives at any size up to the bound, and its actual size and data (read
 * without syncs, then checked after one) at every size of a bound-5 dim and at
 * the bound of the others, dynamic and static. */
static void test_lengths(clb_context_t ctx) {
  static const int64_t ends[] = {INT64_MIN, -7, -6, -4, -3, -2, -1, 0, 1, 2, 3, 4, 6, 7, INT64_MAX};
  static const int64_t steps[] = {INT64_MIN, -2, -1, 1, 3, -3, 2, INT64_MAX};
  enum { NE = sizeof ends / sizeof ends[0], NS = sizeof steps / sizeof steps[0] };
  /* reduced sizes (Oclgrind): 5 ends, 5 steps, bounds 0, 1 and 5 */
  const int ne = clb_test_small() ? 5 : NE, ns = clb_test_small() ? 5 : NS;
  static len_case cs[2 * NE * NE * NS];
  static const int64_t bounds[] = {0, 1, 2, 3, 5}, bounds_small[] = {0, 1, 5};
  const int nb = clb_test_small() ? 3 : 5;
  double v[8] = {10, 11, 12, 13, 14, 15, 16, 17};
  for (int bi = 0; bi < nb; bi++) {
    int64_t b = clb_test_small() ? bounds_small[bi] : bounds[bi];
    uint8_t one = 1;
    clb_tensor_t x[2] = {NULL, NULL}; /* dynamic, static */
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, &b, &one, &x[0]));
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, &b, NULL, &x[1]));
    clb_test_write(ctx, x[1], &b, v);
    for (int64_t n = b == 5 ? 0 : b; n <= b; n++) {
      clb_test_write(ctx, x[0], &n, v);
      int nc = 0;
      for (int i = 0; i < ne; i++)
        for (int j = 0; j < ne; j++)
          for (int s = 0; s < ns; s++)
            for (int st = 0; st < (n == b ? 2 : 1); st++) {
              int64_t start = ends[i], stop = ends[j], step = steps[s], longest = 0;
              for (int64_t m = 0; m <= b; m++) {
                int64_t c = ref_indices(m, start, stop, step, NULL);
                if (c > longest) longest = c;
              }
              len_case *c = &cs[nc++];
              memset(c, 0, sizeof *c);
              c->want = ref_indices(n, start, stop, step, c->idx);
              CL_OK(ctx, clb_slice(ctx, x[st], st ? -1 : 0, start, stop, step, &c->out));
              clb_tensor_bounds(c->out, &c->bound);
              /* dynamic: the longest at any size; static: the exact length */
              EXPECT_EQ_I(c->bound, st ? c->want : longest);
              EXPECT_EQ_I(clb_tensor_is_dynamic(c->out, 0), !st);
              read_async(ctx, c->out, c);
            }
      CL_OK(ctx, clb_context_sync(ctx));
      for (int k = 0; k < nc; k++) {
        len_case *c = &cs[k];
        EXPECT_EQ_I(c->rec, c->want);
        for (int64_t e = 0; e < c->want && e < 8; e++) EXPECT_EQ_I(c->data[e], v[c->idx[e]]);
        clb_tensor_free(c->out);
        cases++;
      }
    }
    clb_tensor_free(x[0]);
    clb_tensor_free(x[1]);
  }
  /* x[-2:5] is longest at size 2 (length 2), not at the bound (at 7: 0) */
  int64_t b7 = 7, ob = 0;
  uint8_t one = 1;
  clb_tensor_t x = NULL, o = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, &b7, &one, &x));
  CL_OK(ctx, clb_slice(ctx, x, 0, -2, 5, 1, &o));
  clb_tensor_bounds(o, &ob);
  EXPECT_EQ_I(ob, 2);
  clb_tensor_free(o);
  clb_tensor_free(x);
}

/* Index expressions over a [<=70, <=5, 3] tensor, applied at sizes that
 * change per call. */
#define K_SLICE(...) {CLB_KEY_SLICE, __VA_ARGS__}
#define K_INDEX(i) {CLB_KEY_INDEX, i, 0, 1}
#define K_NEW {CLB_KEY_NEWAXIS, 0, 0, 0}
#define ALL INT64_MIN, INT64_MAX
#define REV INT64_MAX, INT64_MIN
static const clb_index_key e_empty[] = {K_SLICE(ALL, -1)}; /* x[<min>:<max>:-1] is empty */
static const clb_index_key e_mixed[] = {K_SLICE(2, -1, 2), K_INDEX(-1), K_NEW};
static const clb_index_key e_rev[] = {K_NEW, K_SLICE(1, INT64_MAX, 1), K_SLICE(REV, -2), K_INDEX(1)};
static const clb_index_key e_tail[] = {K_SLICE(-64, INT64_MAX, 1), K_SLICE(1, 3, 1)};
static const clb_index_key e_steps[] = {K_SLICE(ALL, 3), K_SLICE(ALL, 1), K_SLICE(REV, -1)};
static const clb_index_key e_point[] = {K_INDEX(0), K_INDEX(-1), K_INDEX(2)};
static const clb_index_key e_back[] = {K_SLICE(60, 5, -7), K_NEW};
#define EXPR(a) {(int)(sizeof a / sizeof a[0]), a}
static const struct {
  int n;
  const clb_index_key *k;
} exprs[] = {EXPR(e_empty), EXPR(e_mixed), EXPR(e_rev), EXPR(e_tail), EXPR(e_steps), EXPR(e_point), EXPR(e_back),
             {0, NULL}};

/* x with its dims in the order p (rank xr, actual dims xd, values xv) on the
 * host: the output's dims into od and values into ov; returns the count.
 * Written as a walk over x, each element put where the permutation sends it. */
static int64_t ref_permute(int xr, const int64_t *xd, const double *xv, const int *p, int64_t *od, double *ov) {
  int64_t n = 1, ostride[CLB_MAX_RANK], acc = 1;
  for (int j = 0; j < xr; j++) od[j] = xd[p[j]];
  for (int j = xr - 1; j >= 0; j--) {
    ostride[j] = acc;
    acc *= od[j];
  }
  for (int d = 0; d < xr; d++) n *= xd[d];
  for (int64_t i = 0; i < n; i++) {
    int64_t r = i, c[CLB_MAX_RANK], o = 0;
    for (int d = xr - 1; d >= 0; d--) {
      c[d] = r % xd[d];
      r /= xd[d];
    }
    for (int j = 0; j < xr; j++) o += c[p[j]] * ostride[j];
    ov[o] = xv[i];
  }
  return n;
}

/* clb_permute (every order of a [<=70, <=5, 3] tensor's dims) and clb_transpose
 * at sizes that change per call, against ref_permute: the output's dims, bounds
 * and dynamic flags follow x's dims; canaries past each output; no host sync and
 * no program built after the first size. */
static void per_dtype_permute(clb_context_t ctx, clb_dtype dt) {
  static double xv[70 * 5 * 3], want[70 * 5 * 3], got[70 * 5 * 3 + 1];
  static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  const int64_t b[3] = {70, 5, 3};
  const uint8_t dyn[3] = {1, 1, 0};
  static const int64_t sizes[][3] = {{65, 4, 3}, {0, 5, 3}, {1, 1, 3}, {70, 5, 3}, {63, 2, 3}};
  const int nsizes = clb_test_small() ? 2 : 5;
  clb_tensor_t x = NULL, outs[7] = {0};
  CL_OK(ctx, clb_tensor_new(ctx, dt, 3, b, dyn, &x));
  ops_gen(dt, 70 * 5 * 3, 0.9, xv);
  ops_roundtrip(dt, xv, 70 * 5 * 3);
  uint64_t builds = 0;
  for (int si = 0; si < nsizes; si++) {
    clb_test_write(ctx, x, sizes[si], xv);
    if (si == 1) builds = clb_test_counter_builds(ctx);
    for (int e = 0; e < 7; e++) { /* the six orders, then transpose(x, -1, 0) */
      static const int swap02[3] = {2, 1, 0};
      const int *p = e < 6 ? perms[e] : swap02;
      int64_t od[3], gd[CLB_MAX_RANK];
      int64_t count = ref_permute(3, sizes[si], xv, p, od, want);
      if (outs[e]) clb_test_canary_fill(ctx, outs[e]);
      uint64_t syncs = clb_test_counter_syncs(ctx);
      if (e < 6) {
        int neg[3] = {p[0] - 3 * (e & 1), p[1], p[2]}; /* a negative dim counts from the end */
        CL_OK(ctx, clb_permute(ctx, x, 3, neg, &outs[e]));
      } else {
        CL_OK(ctx, clb_transpose(ctx, x, -1, 0, &outs[e]));
      }
      EXPECT_EQ_I(clb_test_counter_syncs(ctx), syncs);
      EXPECT_EQ_I(clb_tensor_rank(outs[e]), 3);
      int64_t ob[3];
      clb_tensor_bounds(outs[e], ob);
      for (int j = 0; j < 3; j++) {
        EXPECT_EQ_I(ob[j], b[p[j]]);
        EXPECT_EQ_I(clb_tensor_is_dynamic(outs[e], j), dyn[p[j]]);
      }
      int64_t n = clb_test_read(ctx, outs[e], gd, got, 70 * 5 * 3 + 1);
      EXPECT_EQ_I(n, count);
      for (int d = 0; d < 3; d++) EXPECT_EQ_I(gd[d], od[d]);
      int64_t bad = 0;
      for (int64_t i = 0; i < n && i < count; i++) bad += !ops_same(got[i], want[i]);
      if (bad) CLB_FAIL_AT("%s permute (%d, %d, %d) sizes [%lld, %lld, 3]: %lld of %lld elements differ",
                           clb_dtype_name(dt), p[0], p[1], p[2], (long long)sizes[si][0], (long long)sizes[si][1],
                           (long long)bad, (long long)count);
      if (si > 0) clb_test_canary_check(ctx, outs[e], (size_t)count * clb_dtype_size(dt), "permute output");
      cases++;
    }
  }
  EXPECT_EQ_I(clb_test_counter_builds(ctx), builds);
  for (int e = 0; e < 7; e++) clb_tensor_free(outs[e]);
  clb_tensor_free(x);
}

/* clb_basic_index_put: every expression, at sizes that change per call, for
 * every element size: y (x's data) gets y[keys] = src in place, src of the
 * selection's actual sizes, and once a 0-d src; checked against the host
 * (the selected positions come from ref_index over an array of positions),
 * with canaries past y's live part and no host sync. */
static void per_dtype_put(clb_context_t ctx, clb_dtype dt) {
  static double xv[70 * 5 * 3], pos[70 * 5 * 3], sel[70 * 5 * 3], srcv[70 * 5 * 3], want[70 * 5 * 3],
      got[70 * 5 * 3 + 1];
  const int64_t b[3] = {70, 5, 3};
  const uint8_t dyn[3] = {1, 1, 0};
  static const int64_t sizes[][3] = {{65, 4, 3}, {1, 1, 3}, {70, 5, 3}, {63, 2, 3}};
  const int nsizes = clb_test_small() ? 2 : 4;
  ops_gen(dt, 70 * 5 * 3, 0.9, xv);
  ops_roundtrip(dt, xv, 70 * 5 * 3);
  for (int i = 0; i < 70 * 5 * 3; i++) pos[i] = i;
  clb_tensor_t y = NULL, src = NULL, one = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, dt, 3, b, dyn, &y));
  CL_OK(ctx, clb_tensor_new(ctx, dt, 0, NULL, NULL, &one));
  double v1 = dt == CLB_DTYPE_BOOL ? 1 : 7;
  clb_test_write(ctx, one, NULL, &v1);
  for (int si = 0; si < nsizes; si++) {
    for (int e = 0; exprs[e].k; e++) {
      int64_t od[CLB_MAX_RANK], count = 0, gd[CLB_MAX_RANK];
      int ro = ref_index(3, sizes[si], pos, exprs[e].n, exprs[e].k, od, sel, &count);
      if (ro < 0) continue;
      for (int scalar = 0; scalar < 2; scalar++) {
        int64_t n = clb_test_numel(3, sizes[si]);
        memcpy(want, xv, sizeof(double) * (size_t)n);
        ops_gen(dt, count, 0.5, srcv);
        ops_roundtrip(dt, srcv, count);
        for (int64_t k = 0; k < count; k++) want[(int64_t)sel[k]] = scalar ? v1 : srcv[k];
        clb_test_canary_fill(ctx, y); /* then the live part written over it */
        clb_test_write(ctx, y, sizes[si], xv);
        if (!scalar) {
          int64_t sb[CLB_MAX_RANK];
          uint8_t sy[CLB_MAX_RANK];
          for (int d = 0; d < ro; d++) sb[d] = od[d] > 0 ? od[d] : 1, sy[d] = 1;
          clb_tensor_free(src);
          src = NULL;
          CL_OK(ctx, clb_tensor_new(ctx, dt, ro, sb, sy, &src));
          clb_test_write(ctx, src, od, srcv);
        }
        uint64_t syncs = clb_test_counter_syncs(ctx);
        CL_OK(ctx, clb_basic_index_put(ctx, y, exprs[e].n, exprs[e].k, scalar ? one : src));
        EXPECT_EQ_I(clb_test_counter_syncs(ctx), syncs);
        int64_t got_n = clb_test_read(ctx, y, gd, got, 70 * 5 * 3 + 1);
        EXPECT_EQ_I(got_n, n);
        for (int d = 0; d < 3; d++) EXPECT_EQ_I(gd[d], sizes[si][d]); /* y's sizes stay */
        int64_t bad = 0;
        for (int64_t i = 0; i < n && i < got_n; i++) bad += !ops_same(got[i], want[i]);
        if (bad) CLB_FAIL_AT("%s put expr %d%s sizes [%lld, %lld, 3]: %lld of %lld elements differ", clb_dtype_name(dt),
                             e, scalar ? " (0-d src)" : "", (long long)sizes[si][0], (long long)sizes[si][1],
                             (long long)bad, (long long)n);
        clb_test_canary_check(ctx, y, (size_t)n * clb_dtype_size(dt), "index_put target");
        cases++;
      }
    }
  }
  clb_tensor_free(src);
  clb_tensor_free(one);
  clb_tensor_free(y);
}

/* The expressions for every element size, dynamic sizes changing per call,
 * against the reference; canaries past each output; no host sync in the ops
 * and no program built after the first size. */
static void per_dtype(clb_context_t ctx, clb_dtype dt, int first) {
  (void)first;
  static double xv[70 * 5 * 3], want[70 * 5 * 3], got[70 * 5 * 3 + 1];
  const int64_t b[3] = {70, 5, 3};
  const uint8_t dyn[3] = {1, 1, 0};
  static const int64_t sizes[][3] = {{65, 4, 3}, {0, 5, 3}, {1, 1, 3}, {70, 5, 3}, {63, 2, 3}, {64, 3, 3}};
  const int nsizes = clb_test_small() ? 3 : 6;
  clb_tensor_t x = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, dt, 3, b, dyn, &x));
  ops_gen(dt, 70 * 5 * 3, 0.9, xv);
  ops_roundtrip(dt, xv, 70 * 5 * 3);
  enum { NE = sizeof exprs / sizeof exprs[0] };
  clb_tensor_t outs[NE] = {0};
  uint64_t builds = 0;
  for (int si = 0; si < nsizes; si++) {
    clb_test_write(ctx, x, sizes[si], xv);
    if (si == 1) builds = clb_test_counter_builds(ctx);
    for (int e = 0; e < NE; e++) {
      int64_t od[CLB_MAX_RANK], count = 0, gd[CLB_MAX_RANK];
      int ro = ref_index(3, sizes[si], xv, exprs[e].n, exprs[e].k, od, want, &count);
      if (ro < 0) continue; /* an index outside this size: test_errors */
      if (outs[e]) clb_test_canary_fill(ctx, outs[e]);
      uint64_t syncs = clb_test_counter_syncs(ctx);
      CL_OK(ctx, clb_basic_index(ctx, x, exprs[e].n, exprs[e].k, &outs[e]));
      EXPECT_EQ_I(clb_test_counter_syncs(ctx), syncs);
      EXPECT_EQ_I(clb_tensor_rank(outs[e]), ro);
      int64_t n = clb_test_read(ctx, outs[e], gd, got, 70 * 5 * 3 + 1);
      EXPECT_EQ_I(n, count);
      for (int d = 0; d < ro; d++) EXPECT_EQ_I(gd[d], od[d]);
      int64_t bad = 0;
      for (int64_t i = 0; i < n && i < count; i++) bad += !(got[i] == want[i] || (isnan(got[i]) && isnan(want[i])));
      if (bad) CLB_FAIL_AT("%s expr %d sizes [%lld, %lld, 3]: %lld of %lld elements differ", clb_dtype_name(dt), e,
                           (long long)sizes[si][0], (long long)sizes[si][1], (long long)bad, (long long)count);
      if (si > 0) clb_test_canary_check(ctx, outs[e], (size_t)count * clb_dtype_size(dt), "slice output");
      cases++;
    }
  }
  EXPECT_EQ_I(clb_test_counter_builds(ctx), builds); /* a new size builds nothing */
  for (int e = 0; e < NE; e++) clb_tensor_free(outs[e]);
  clb_tensor_free(x);
  per_dtype_permute(ctx, dt);
  per_dtype_put(ctx, dt);
}

static void test_errors(clb_context_t ctx) {
  int64_t b8 = 8, n3 = 3, got_dims[2];
  uint8_t one = 1;
  double v[8] = {5, 6, 7, 8, 9, 10, 11, 12}, got[16];
  clb_tensor_t x = NULL, o = NULL, o2 = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 1, &b8, &one, &x));
  clb_test_write(ctx, x, &n3, v);

  /* in range of the actual size, negative from its end: a 0-d tensor */
  CL_OK(ctx, clb_index(ctx, x, 0, -3, &o));
  EXPECT_EQ_I(clb_tensor_rank(o), 0);
  EXPECT_EQ_I(clb_test_read(ctx, o, got_dims, got, 1), 1);
  EXPECT_EQ_I(got[0], 5);
  CL_OK(ctx, clb_index(ctx, x, 0, 2, &o));
  EXPECT_EQ_I(clb_test_read(ctx, o, got_dims, got, 1), 1);
  EXPECT_EQ_I(got[0], 7);

  /* past the actual size (3) but inside the bound (8): no error at the call, no
   * sync; the next sync names the op, the index, the dim and the size, and the
   * output stays failed until written again */
  uint64_t syncs = clb_test_counter_syncs(ctx);
  CL_OK(ctx, clb_index(ctx, x, 0, 5, &o));
  EXPECT_EQ_I(clb_test_counter_syncs(ctx), syncs);
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_INDEX, "index 5 is out of range for dim 0 of actual size 3");
  EXPECT_TRUE(strstr(clb_context_errmsg(ctx), "index x [<=8] i64, key [5]") != NULL);
  size_t got_bytes = 0;
  EXPECT_STATUS(ctx, clb_tensor_read(ctx, o, got_dims, got, sizeof got, &got_bytes), CLB_ERR_INDEX, "index 5");
  CL_OK(ctx, clb_index(ctx, x, 0, -4, &o));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_INDEX, "index -4 is out of range for dim 0 of actual size 3");
  CL_OK(ctx, clb_index(ctx, x, 0, 0, &o)); /* written again: readable */
  EXPECT_EQ_I(clb_test_read(ctx, o, got_dims, got, 1), 1);
  EXPECT_EQ_I(got[0], 5);

  /* a 2-D one: the dim is named; the output (a row of zeros) writes nothing past it */
  int64_t b2[2] = {4, 6}, n2[2] = {4, 2};
  uint8_t dyn2[2] = {0, 1};
  clb_tensor_t y = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, b2, dyn2, &y));
  clb_test_write(ctx, y, n2, v);
  CL_OK(ctx, clb_index(ctx, y, 1, 3, &o2));
  EXPECT_EQ_I(clb_tensor_rank(o2), 1);
  clb_test_canary_fill(ctx, o2);
  CL_OK(ctx, clb_index(ctx, y, -1, 3, &o2));
  EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_INDEX, "index 3 is out of range for dim 1 of actual size 2");
  clb_test_canary_check(ctx, o2, 4 * sizeof(float), "index error output");

  /* refused at once: a static dim, or past the bound of a dynamic one */
  clb_tensor_t r = NULL;
  EXPECT_STATUS(ctx, clb_index(ctx, y, 0, 4, &r), CLB_ERR_INDEX, "index 4 is out of range for dim 0 of size 4");
  EXPECT_STATUS(ctx, clb_index(ctx, y, 0, -5, &r), CLB_ERR_INDEX, "index -5 is out of range for dim 0 of size 4");
  EXPECT_STATUS(ctx, clb_index(ctx, x, 0, 8, &r), CLB_ERR_INDEX, "at every size (bound 8)");
  EXPECT_STATUS(ctx, clb_index(ctx, x, 0, -9, &r), CLB_ERR_INDEX, "index -9");
  EXPECT_STATUS(ctx, clb_slice(ctx, x, 0, 0, 3, 0, &r), CLB_ERR_INVALID_ARG, "slice step cannot be zero");
  EXPECT_STATUS(ctx, clb_slice(ctx, x, 1, 0, 3, 1, &r), CLB_ERR_INVALID_ARG, "dim 1 is outside x [<=8] i64 of rank 1");
  EXPECT_STATUS(ctx, clb_slice(ctx, x, -2, 0, 3, 1, &r), CLB_ERR_INVALID_ARG, "dim -2");
  clb_index_key two[2] = {K_INDEX(0), K_INDEX(0)};
  EXPECT_STATUS(ctx, clb_basic_index(ctx, x, 2, two, &r), CLB_ERR_INDEX, "too many indices for x of rank 1");
  clb_index_key odd = {7, 0, 0, 1};
  EXPECT_STATUS(ctx, clb_basic_index(ctx, x, 1, &odd, &r), CLB_ERR_INVALID_ARG, "key 0 has kind 7");
  clb_index_key many[9];
  for (int i = 0; i < 9; i++) many[i] = (clb_index_key)K_NEW;
  EXPECT_STATUS(ctx, clb_basic_index(ctx, x, 8, many, &r), CLB_ERR_RANK, "more than 8 dims");
  EXPECT_STATUS(ctx, clb_basic_index(ctx, x, -1, many, &r), CLB_ERR_INVALID_ARG, "nkeys = -1 is negative");
  EXPECT_STATUS(ctx, clb_basic_index(ctx, x, 1, NULL, &r), CLB_ERR_NULL, "keys is NULL");
  EXPECT_STATUS(ctx, clb_slice(ctx, x, 0, 0, 3, 1, NULL), CLB_ERR_NULL, "out is NULL");
  EXPECT_TRUE(clb_slice(NULL, x, 0, 0, 3, 1, &r) == CLB_ERR_NULL);
  EXPECT_TRUE(r == NULL);
  /* out: not x's data; a given one is checked and reused */
  clb_tensor_t same = x;
  EXPECT_STATUS(ctx, clb_slice(ctx, x, 0, 0, 3, 1, &same), CLB_ERR_INVALID_ARG, "out shares x's data");
  int64_t b2o = 2;
  clb_tensor_t small = NULL, fits = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 1, &b2o, &one, &small));
  EXPECT_STATUS(ctx, clb_slice(ctx, x, 0, 1, 4, 1, &small), CLB_ERR_OUT_OF_BOUNDS, "bound 2 < 3 needed");
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 1, &b8, &one, &fits));
  clb_tensor_t keep = fits;
  CL_OK(ctx, clb_slice(ctx, x, 0, INT64_MAX, INT64_MIN, -1, &fits));
  EXPECT_TRUE(fits == keep);
  EXPECT_EQ_I(clb_test_read(ctx, fits, got_dims, got, 8), 3);
  EXPECT_EQ_I(got[0], 7);
  EXPECT_EQ_I(got[2], 5);

  /* 0-d: no keys copies it, None makes [1] */
  clb_tensor_t z = NULL, z1 = NULL, z0 = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 0, NULL, NULL, &z));
  double pi = 3.5;
  clb_test_write(ctx, z, NULL, &pi);
  clb_index_key nk = K_NEW;
  CL_OK(ctx, clb_basic_index(ctx, z, 1, &nk, &z1));
  EXPECT_EQ_I(clb_test_read(ctx, z1, got_dims, got, 1), 1);
  EXPECT_EQ_I(got_dims[0], 1);
  EXPECT_TRUE(got[0] == 3.5);
  CL_OK(ctx, clb_basic_index(ctx, z, 0, NULL, &z0));
  EXPECT_EQ_I(clb_tensor_rank(z0), 0);
  EXPECT_EQ_I(clb_test_read(ctx, z0, got_dims, got, 1), 1);
  EXPECT_TRUE(got[0] == 3.5);
  EXPECT_STATUS(ctx, clb_index(ctx, z, 0, 0, &r), CLB_ERR_INVALID_ARG, "of rank 0");

  /* permute and transpose: dims that are not a permutation of x's, refused at once */
  const int p10[2] = {1, 0}, p00[2] = {0, 0}, p12[2] = {1, 2}, p0[1] = {0};
  EXPECT_STATUS(ctx, clb_permute(ctx, y, 2, p00, &r), CLB_ERR_INVALID_ARG, "dim 0 appears twice");
  EXPECT_STATUS(ctx, clb_permute(ctx, y, 2, p12, &r), CLB_ERR_INVALID_ARG, "dim 2 is outside x's rank 2");
  EXPECT_STATUS(ctx, clb_permute(ctx, y, 1, p0, &r), CLB_ERR_INVALID_ARG, "1 dims given for x of rank 2");
  EXPECT_STATUS(ctx, clb_permute(ctx, y, 2, NULL, &r), CLB_ERR_NULL, "dims is NULL");
  EXPECT_STATUS(ctx, clb_permute(ctx, y, 2, p10, NULL), CLB_ERR_NULL, "out is NULL");
  EXPECT_STATUS(ctx, clb_transpose(ctx, y, 0, 2, &r), CLB_ERR_INVALID_ARG, "dim1 = 2 is outside x's rank 2");
  EXPECT_STATUS(ctx, clb_transpose(ctx, y, -3, 1, &r), CLB_ERR_INVALID_ARG, "dim0 = -3");
  EXPECT_TRUE(clb_transpose(NULL, y, 0, 1, &r) == CLB_ERR_NULL);
  EXPECT_TRUE(r == NULL);
  same = y;
  EXPECT_STATUS(ctx, clb_transpose(ctx, y, 0, 1, &same), CLB_ERR_INVALID_ARG, "transpose copies into another tensor");
  /* y is [4, <=6] at [4, 2]: its transpose [<=6, 4] at [2, 4]; a dim with itself copies */
  CL_OK(ctx, clb_transpose(ctx, y, 1, 0, &r));
  EXPECT_EQ_I(clb_test_read(ctx, r, got_dims, got, 8), 8);
  EXPECT_EQ_I(got_dims[0], 2);
  EXPECT_EQ_I(got_dims[1], 4);
  const double yt[8] = {5, 7, 9, 11, 6, 8, 10, 12};
  for (int i = 0; i < 8; i++) EXPECT_TRUE(got[i] == yt[i]);
  clb_tensor_free(r);
  r = NULL;
  CL_OK(ctx, clb_transpose(ctx, y, 1, -1, &r));
  EXPECT_EQ_I(clb_test_read(ctx, r, got_dims, got, 8), 8);
  for (int i = 0; i < 8; i++) EXPECT_TRUE(got[i] == v[i]);
  clb_tensor_free(r);
  r = NULL;
  /* index_put: src that does not fit is refused at once, or on the device
   * (a deferred check; nothing written) */
  {
    clb_index_key k1 = K_SLICE(1, 3, 1), kidx = K_INDEX(5);
    int64_t b2s = 2, n1 = 1;
    clb_tensor_t sf = NULL, si = NULL, s2 = NULL, sd = NULL, s0 = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 0, NULL, NULL, &s0));
    clb_test_write(ctx, s0, NULL, (double[]){9});
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &b2s, NULL, &sf));
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 2, b2, NULL, &s2));
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 1, &b8, &one, &sd));
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 1, &b2s, NULL, &si));
    EXPECT_STATUS(ctx, clb_basic_index_put(ctx, x, 1, &k1, sf), CLB_ERR_DTYPE, "src's dtype is not x's");
    EXPECT_STATUS(ctx, clb_basic_index_put(ctx, x, 1, &k1, s2), CLB_ERR_SHAPE, "src has 2 dims, the selection 1");
    EXPECT_STATUS(ctx, clb_basic_index_put(ctx, x, 1, &k1, x), CLB_ERR_INVALID_ARG, "src shares x's data");
    EXPECT_STATUS(ctx, clb_basic_index_put(ctx, x, -1, &k1, si), CLB_ERR_INVALID_ARG, "nkeys = -1");
    EXPECT_STATUS(ctx, clb_basic_index_put(ctx, x, 1, &k1, NULL), CLB_ERR_NULL, "src");
    EXPECT_TRUE(clb_basic_index_put(NULL, x, 1, &k1, si) == CLB_ERR_NULL);
    /* x = [5, 6, 7]; a failed put marks x failed (it does not hold what the
     * program wrote), as every op's output, until x is written again */
    clb_test_write(ctx, x, &n3, v);
    clb_test_write(ctx, sd, &n1, v); /* 1 value for the 2 of x[1:3] */
    CL_OK(ctx, clb_basic_index_put(ctx, x, 1, &k1, sd));
    EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_DEVICE_CHECK, "sizes 2 and 1 must be equal");
    EXPECT_STATUS(ctx, clb_basic_index_put(ctx, x, 1, &k1, si), CLB_ERR_DEVICE_CHECK, "write it or compute it again");
    clb_test_write(ctx, x, &n3, v);
    CL_OK(ctx, clb_basic_index_put(ctx, x, 1, &kidx, s0)); /* index 5 past the actual 3 */
    EXPECT_STATUS(ctx, clb_context_sync(ctx), CLB_ERR_INDEX, "index 5 is out of range");
    clb_test_write(ctx, x, &n3, v);
    clb_test_write(ctx, si, &b2s, (double[]){-1, -2});
    CL_OK(ctx, clb_basic_index_put(ctx, x, 1, &k1, si));
    EXPECT_EQ_I(clb_test_read(ctx, x, got_dims, got, 8), 3);
    EXPECT_TRUE(got[0] == 5 && got[1] == -1 && got[2] == -2);
    EXPECT_STATUS(ctx, clb_basic_index_put(ctx, x, 1, &kidx, sd), CLB_ERR_SHAPE, "src has 1 dims, the selection 0");
    CL_OK(ctx, clb_basic_index_put(ctx, x, 1, (clb_index_key[]){K_INDEX(-1)}, s0)); /* x[-1] = 9 */
    EXPECT_EQ_I(clb_test_read(ctx, x, got_dims, got, 8), 3);
    EXPECT_TRUE(got[0] == 5 && got[1] == -1 && got[2] == 9);
    clb_tensor_t ts[] = {sf, si, s2, sd, s0};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clb_tensor_free(ts[i]);
  }

  /* 0-d: the empty permutation copies it */
  CL_OK(ctx, clb_permute(ctx, z, 0, NULL, &r));
  EXPECT_EQ_I(clb_test_read(ctx, r, got_dims, got, 1), 1);
  EXPECT_TRUE(got[0] == 3.5);
  clb_tensor_free(r);

  clb_tensor_free(z);
  clb_tensor_free(z1);
  clb_tensor_free(z0);
  clb_tensor_free(small);
  clb_tensor_free(fits);
  clb_tensor_free(o);
  clb_tensor_free(o2);
  clb_tensor_free(y);
  clb_tensor_free(x);
}

static void once(clb_context_t ctx) {
  test_errors(ctx);
  test_lengths(ctx);
}

int main(void) {
  return ops_run_styles("ops/slice", &cases, per_dtype, once);
}
