/* policy.c: the specialization policies (static, automatic, dynamic, bucketed) as a state machine that answers "reuse plan k" or "compile, because ...". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shapes-impl.h"

#define DEFAULT_GROWTH_CAP (INT64_C(1) << 31) /* automatic: largest bound the growth rule picks by itself */

/* How a plan treats one dim. */
enum { DIM_STATIC = 0, DIM_BOUNDED = 1, DIM_BUCKET = 2 };

struct clb_policy {
  clb_policy_kind kind;
  clb__sig sig;
  int64_t cap;
  int64_t *user_max;   /* per flat dim; 0: none */
  int64_t **ladder;    /* bucketed: per flat dim, or NULL */
  size_t *nladder;
  int64_t *seen_max;   /* largest size seen per dim */
  int64_t *padded;     /* the last decision's sizes */
  int64_t *want;       /* scratch: the plan this run needs */
  unsigned char *mode; /* scratch: modes of `want` */
  int64_t *pval;       /* plans: nplans * ndims values (static size, bound or bucket) */
  unsigned char *pmode;
  size_t nplans, capplans;
  char reason[512];
  char errmsg[512];
};

/* Appends to the reason. */
static void say(clb_policy_t p, const char *fmt, ...) {
  size_t len = strlen(p->reason);
  if (len + 1 >= sizeof p->reason) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->reason + len, sizeof p->reason - len, fmt, ap);
  va_end(ap);
}

static clb_status pfail(clb_policy_t p, clb_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->errmsg, sizeof p->errmsg, fmt, ap);
  va_end(ap);
  return st;
}

clb_status clb_policy_new(clb_policy_kind kind, size_t ninputs, const char *const *names, const int *ranks,
                          clb_policy_t *out) {
  if (!out) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_policy_new: out is NULL");
  *out = NULL;
  if ((int)kind < CLB_POLICY_STATIC || kind > CLB_POLICY_BUCKETED) return clb__shapes_fail_last(CLB_ERR_INVALID_ARG, "clb_policy_new: policy kind %d is not a clb_policy_kind", (int)kind);
  clb_policy_t p = calloc(1, sizeof *p);
  if (!p) return clb__shapes_fail_last(CLB_ERR_HOST_OOM, "clb_policy_new: out of host memory");
  clb_status st = clb__sig_init(&p->sig, ninputs, names, ranks, p->errmsg, sizeof p->errmsg);
  if (st != CLB_OK) {
    free(p);
    return st;
  }
  size_t n = p->sig.ndims + 1;
  p->kind = kind;
  p->cap = DEFAULT_GROWTH_CAP;
  p->user_max = calloc(n, sizeof *p->user_max);
  p->ladder = calloc(n, sizeof *p->ladder);
  p->nladder = calloc(n, sizeof *p->nladder);
  p->seen_max = calloc(n, sizeof *p->seen_max);
  p->padded = calloc(n, sizeof *p->padded);
  p->want = calloc(n, sizeof *p->want);
  p->mode = calloc(n, 1);
  if (!p->user_max || !p->ladder || !p->nladder || !p->seen_max || !p->padded || !p->want || !p->mode) {
    clb_policy_free(p);
    return clb__shapes_fail_last(CLB_ERR_HOST_OOM, "clb_policy_new: out of host memory");
  }
  *out = p;
  return CLB_OK;
}

void clb_policy_free(clb_policy_t p) {
  if (!p) return;
  for (size_t i = 0; p->ladder && i < p->sig.ndims; i++) free(p->ladder[i]);
  clb__sig_free(&p->sig);
  free(p->user_max);
  free(p->ladder);
  free(p->nladder);
  free(p->seen_max);
  free(p->padded);
  free(p->want);
  free(p->mode);
  free(p->pval);
  free(p->pmode);
  free(p);
}

const char *clb_policy_errmsg(clb_policy_t p) { return p ? p->errmsg : "NULL policy"; }

size_t clb_policy_plan_count(clb_policy_t p) { return p ? p->nplans : 0; }

static clb_status flat_of(clb_policy_t p, size_t input, int dim, size_t *flat) {
  if (clb__sig_flat(&p->sig, input, dim, flat))
    return pfail(p, CLB_ERR_INVALID_ARG, "no dim %d of input %zu", dim, input);
  if (p->nplans) return pfail(p, CLB_ERR_INVALID_ARG, "configure the policy before its first decision");
  return CLB_OK;
}

clb_status clb_policy_set_max(clb_policy_t p, size_t input, int dim, int64_t max) {
  if (!p) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_policy_set_max: p is NULL");
  size_t f;
  clb_status st = flat_of(p, input, dim, &f);
  if (st != CLB_OK) return st;
  if (max < 1) return pfail(p, CLB_ERR_INVALID_ARG, "max %lld < 1", (long long)max);
  p->user_max[f] = max;
  return CLB_OK;
}

clb_status clb_policy_set_buckets(clb_policy_t p, size_t input, int dim, const int64_t *ladder, size_t n) {
  if (!p) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_policy_set_buckets: p is NULL");
  size_t f;
  clb_status st = flat_of(p, input, dim, &f);
  if (st != CLB_OK) return st;
  if (!ladder || n == 0) return pfail(p, CLB_ERR_INVALID_ARG, "empty ladder");
  for (size_t i = 0; i < n; i++)
    if (ladder[i] < 0 || (i && ladder[i] <= ladder[i - 1]))
      return pfail(p, CLB_ERR_INVALID_ARG, "the ladder must be ascending and >= 0 (entry %zu)", i);
  int64_t *l = malloc(n * sizeof *l);
  if (!l) return pfail(p, CLB_ERR_HOST_OOM, "out of host memory");
  memcpy(l, ladder, n * sizeof *l);
  free(p->ladder[f]);
  p->ladder[f] = l;
  p->nladder[f] = n;
  return CLB_OK;
}

clb_status clb_policy_set_growth_cap(clb_policy_t p, int64_t cap) {
  if (!p) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_policy_set_growth_cap: p is NULL");
  if (cap < 1) return pfail(p, CLB_ERR_INVALID_ARG, "cap %lld < 1", (long long)cap);
  p->cap = cap;
  return CLB_OK;
}

clb_status clb_policy_plan_bound(clb_policy_t p, size_t plan, size_t input, int dim, int64_t *bound, int *is_static) {
  if (!p) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_policy_plan_bound: p is NULL");
  size_t f;
  if (!bound) return pfail(p, CLB_ERR_NULL, "NULL bound");
  if (plan >= p->nplans || clb__sig_flat(&p->sig, input, dim, &f))
    return pfail(p, CLB_ERR_INVALID_ARG, "no plan %zu or no dim %d of input %zu", plan, dim, input);
  *bound = p->pval[plan * p->sig.ndims + f];
  if (is_static) *is_static = p->pmode[plan * p->sig.ndims + f] != DIM_BOUNDED;
  return CLB_OK;
}

/* ---- Deciding -------------------------------------------------------------------------- */

/* The growth rule: twice the next power of two of v, at most the cap. */
static int64_t grow(clb_policy_t p, int64_t v) {
  int64_t b = 1;
  while (b < v && b <= INT64_MAX / 2) b *= 2;
  b = b <= INT64_MAX / 2 ? 2 * b : b;
  return b < p->cap ? b : p->cap;
}

static int plan_serves(clb_policy_t p, size_t k, const int64_t *v) {
  const int64_t *pv = p->pval + k * p->sig.ndims;
  const unsigned char *pm = p->pmode + k * p->sig.ndims;
  for (size_t i = 0; i < p->sig.ndims; i++) {
    if (pm[i] == DIM_BOUNDED ? v[i] > pv[i] : v[i] != pv[i]) return 0;
  }
  return 1;
}

static int plan_is(clb_policy_t p, size_t k, const int64_t *want, const unsigned char *mode) {
  return memcmp(p->pval + k * p->sig.ndims, want, p->sig.ndims * sizeof *want) == 0 &&
         memcmp(p->pmode + k * p->sig.ndims, mode, p->sig.ndims) == 0;
}

static clb_status add_plan(clb_policy_t p, const int64_t *want, const unsigned char *mode) {
  size_t nd = p->sig.ndims ? p->sig.ndims : 1;
  if (p->nplans == p->capplans) {
    size_t cap = p->capplans ? 2 * p->capplans : 8;
    int64_t *v = realloc(p->pval, cap * nd * sizeof *v);
    if (v) p->pval = v;
    unsigned char *m = v ? realloc(p->pmode, cap * nd) : NULL;
    if (!v || !m) return pfail(p, CLB_ERR_HOST_OOM, "out of host memory");
    p->pmode = m;
    p->capplans = cap;
  }
  memcpy(p->pval + p->nplans * p->sig.ndims, want, p->sig.ndims * sizeof *want);
  memcpy(p->pmode + p->nplans * p->sig.ndims, mode, p->sig.ndims);
  p->nplans++;
  return CLB_OK;
}

static void words(clb_policy_t p, size_t flat, char *buf, size_t size) { clb__sig_words(&p->sig, flat, buf, size); }

static void describe_sizes(clb_policy_t p, const int64_t *v) {
  for (size_t i = 0; i < p->sig.ninputs; i++) {
    say(p, "%s%s=[", i ? " " : "", p->sig.names[i]);
    for (int d = 0; d < p->sig.ranks[i]; d++) say(p, "%s%lld", d ? "," : "", (long long)v[p->sig.offset[i] + (size_t)d]);
    say(p, "]");
  }
}

/* A run the policy cannot serve: the reason is the error. */
static clb_status refuse(clb_policy_t p, clb_decision *out) {
  snprintf(p->errmsg, sizeof p->errmsg, "%s", p->reason);
  out->action = CLB_ACTION_REUSE;
  out->plan = 0;
  return CLB_ERR_GUARD;
}

/* static: a plan per distinct shape. */
static clb_status decide_static(clb_policy_t p, const int64_t *v, clb_decision *out) {
  size_t nd = p->sig.ndims;
  for (size_t k = p->nplans; k-- > 0;)
    if (plan_serves(p, k, v)) {
      out->action = CLB_ACTION_REUSE;
      out->plan = k;
      say(p, "plan %zu was compiled for these sizes", k);
      return CLB_OK;
    }
  memset(p->mode, DIM_STATIC, nd);
  if (p->nplans == 0) {
    say(p, "first run: sizes compiled in (");
    describe_sizes(p, v);
    say(p, ")");
  } else {
    const int64_t *last = p->pval + (p->nplans - 1) * nd;
    for (size_t i = 0, n = 0; i < nd; i++)
      if (last[i] != v[i]) {
        char w[96];
        words(p, i, w, sizeof w);
        say(p, "%s%s changed %lld -> %lld", n++ ? ", " : "", w, (long long)last[i], (long long)v[i]);
      }
    say(p, ": the static policy compiles a plan per shape");
  }
  out->action = CLB_ACTION_COMPILE;
  out->plan = p->nplans;
  return add_plan(p, v, p->mode);
}

/* automatic: static until a dim changes, then that dim is bounded. */
static clb_status decide_automatic(clb_policy_t p, const int64_t *v, clb_decision *out) {
  size_t nd = p->sig.ndims;
  if (p->nplans == 0) return decide_static(p, v, out);
  for (size_t k = p->nplans; k-- > 0;)
    if (plan_serves(p, k, v)) {
      out->action = CLB_ACTION_REUSE;
      out->plan = k;
      say(p, "plan %zu serves these sizes", k);
      return CLB_OK;
    }
  const int64_t *lv = p->pval + (p->nplans - 1) * nd;
  const unsigned char *lm = p->pmode + (p->nplans - 1) * nd;
  memcpy(p->want, lv, nd * sizeof *lv);
  memcpy(p->mode, lm, nd);
  for (size_t i = 0, n = 0; i < nd; i++) {
    char w[96];
    words(p, i, w, sizeof w);
    if (lm[i] == DIM_STATIC && v[i] == lv[i]) continue;
    if (lm[i] == DIM_BOUNDED && v[i] <= lv[i]) continue;
    int64_t m = p->user_max[i];
    if (m && v[i] > m) {
      say(p, "%s: %lld > bound %lld (its given max)", w, (long long)v[i], (long long)m);
      return refuse(p, out);
    }
    if (!m && v[i] > p->cap) {
      say(p, "%s: %lld > the growth cap %lld", w, (long long)v[i], (long long)p->cap);
      return refuse(p, out);
    }
    int64_t b = m ? m : grow(p, p->seen_max[i]);
    if (lm[i] == DIM_STATIC) {
      say(p, "%s%s changed %lld -> %lld: marked dynamic, bound %lld", n++ ? "; " : "", w, (long long)lv[i],
          (long long)v[i], (long long)b);
      if (!m) say(p, " (twice the next power of two of %lld)", (long long)p->seen_max[i]);
    } else {
      say(p, "%s%s: %lld > bound %lld: bound grows to %lld", n++ ? "; " : "", w, (long long)v[i], (long long)lv[i],
          (long long)b);
    }
    p->want[i] = b;
    p->mode[i] = DIM_BOUNDED;
  }
  out->action = CLB_ACTION_COMPILE;
  out->plan = p->nplans;
  return add_plan(p, p->want, p->mode);
}

/* dynamic: dims with a max are bounded from the start; the others are compiled in. */
static clb_status decide_dynamic(clb_policy_t p, const int64_t *v, clb_decision *out) {
  size_t nd = p->sig.ndims;
  for (size_t i = 0; i < nd; i++)
    if (p->user_max[i] && v[i] > p->user_max[i]) {
      char w[96];
      words(p, i, w, sizeof w);
      say(p, "%s: %lld > bound %lld", w, (long long)v[i], (long long)p->user_max[i]);
      return refuse(p, out);
    }
  for (size_t k = p->nplans; k-- > 0;)
    if (plan_serves(p, k, v)) {
      out->action = CLB_ACTION_REUSE;
      out->plan = k;
      say(p, "plan %zu serves these sizes", k);
      return CLB_OK;
    }
  for (size_t i = 0; i < nd; i++) {
    p->mode[i] = p->user_max[i] ? DIM_BOUNDED : DIM_STATIC;
    p->want[i] = p->user_max[i] ? p->user_max[i] : v[i];
  }
  if (p->nplans == 0) {
    say(p, "first run: ");
    int n = 0;
    for (size_t i = 0; i < nd; i++)
      if (p->mode[i] == DIM_BOUNDED) {
        char w[96];
        words(p, i, w, sizeof w);
        say(p, "%s%s bounded at %lld", n++ ? ", " : "", w, (long long)p->want[i]);
      }
    say(p, n ? ", other dims compiled in" : "no dim is dynamic, sizes compiled in");
  } else {
    const int64_t *lv = p->pval + (p->nplans - 1) * nd;
    for (size_t i = 0, n = 0; i < nd; i++)
      if (p->mode[i] == DIM_STATIC && lv[i] != v[i]) {
        char w[96];
        words(p, i, w, sizeof w);
        say(p, "%s%s changed %lld -> %lld", n++ ? ", " : "", w, (long long)lv[i], (long long)v[i]);
      }
    say(p, ": not a dynamic dim, so compiled in");
  }
  out->action = CLB_ACTION_COMPILE;
  out->plan = p->nplans;
  return add_plan(p, p->want, p->mode);
}

/* bucketed: dims with a ladder pad up to their bucket; a plan per bucket combination. */
static clb_status decide_bucketed(clb_policy_t p, const int64_t *v, clb_decision *out) {
  size_t nd = p->sig.ndims;
  for (size_t i = 0; i < nd; i++) {
    p->mode[i] = DIM_STATIC;
    p->want[i] = v[i];
    if (!p->ladder[i]) continue;
    size_t k = 0;
    while (k < p->nladder[i] && p->ladder[i][k] < v[i]) k++;
    if (k == p->nladder[i]) {
      char w[96];
      words(p, i, w, sizeof w);
      say(p, "%s: %lld > top bucket %lld", w, (long long)v[i], (long long)p->ladder[i][k - 1]);
      return refuse(p, out);
    }
    p->mode[i] = DIM_BUCKET;
    p->want[i] = p->ladder[i][k];
  }
  memcpy(p->padded, p->want, nd * sizeof *p->padded);
  for (size_t i = 0, n = 0; i < nd; i++)
    if (p->mode[i] == DIM_BUCKET) {
      char w[96];
      words(p, i, w, sizeof w);
      say(p, "%s%s: %lld pads to bucket %lld", n++ ? ", " : "", w, (long long)v[i], (long long)p->want[i]);
    }
  for (size_t k = 0; k < p->nplans; k++)
    if (plan_is(p, k, p->want, p->mode)) {
      out->action = CLB_ACTION_REUSE;
      out->plan = k;
      say(p, "%splan %zu", p->reason[0] ? ": " : "", k);
      return CLB_OK;
    }
  say(p, "%sfirst run in this bucket", p->reason[0] ? ": " : "");
  out->action = CLB_ACTION_COMPILE;
  out->plan = p->nplans;
  return add_plan(p, p->want, p->mode);
}

clb_status clb_policy_decide(clb_policy_t p, const int64_t *dims, size_t ndims, clb_decision *out) {
  if (!p) return clb__shapes_fail_last(CLB_ERR_NULL, "clb_policy_decide: p is NULL");
  if (!out || (!dims && ndims)) return pfail(p, CLB_ERR_NULL, "NULL dims or out");
  p->reason[0] = 0;
  out->reason = p->reason;
  out->padded = p->padded;
  out->action = CLB_ACTION_REUSE;
  out->plan = 0;
  if (ndims != p->sig.ndims) return pfail(p, CLB_ERR_INVALID_ARG, "%zu dims given, the inputs have %zu", ndims, p->sig.ndims);
  for (size_t i = 0; i < ndims; i++) {
    if (dims[i] < 0) {
      char w[96];
      words(p, i, w, sizeof w);
      return pfail(p, CLB_ERR_INVALID_ARG, "%s: negative size %lld", w, (long long)dims[i]);
    }
    if (dims[i] > p->seen_max[i]) p->seen_max[i] = dims[i];
  }
  memcpy(p->padded, dims, ndims * sizeof *dims);
  switch (p->kind) {
  case CLB_POLICY_STATIC: return decide_static(p, dims, out);
  case CLB_POLICY_AUTOMATIC: return decide_automatic(p, dims, out);
  case CLB_POLICY_DYNAMIC: return decide_dynamic(p, dims, out);
  case CLB_POLICY_BUCKETED: return decide_bucketed(p, dims, out);
  }
  return pfail(p, CLB_ERR_INTERNAL, "unknown policy kind %d", (int)p->kind);
}
