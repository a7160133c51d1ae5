/* planner.c: offsets for a plan's buffers from their liveness at the bounds.
 *
 * Greedy best fit (TFLite's "greedy by size", XLA's heap simulator): buffers are
 * placed one by one, each into the smallest aligned gap left between the buffers
 * already placed that are live at the same time, or above them. The order
 * matters, so a few orders are tried (largest first, largest x longest first,
 * earliest first) and the smallest arena kept; tests/alloc compares the result
 * with the lower bound. */
#include "alloc/planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLB_POOL_MIN_BYTES 256u

size_t clb__pool_class_bytes(size_t bytes) {
  if (bytes <= CLB_POOL_MIN_BYTES) return CLB_POOL_MIN_BYTES;
  size_t p = CLB_POOL_MIN_BYTES;
  while (p < bytes / 2 && p <= SIZE_MAX / 4) p *= 2; /* p <= bytes/2 < 2p */
  size_t step = p / 4;
  size_t c = p;
  while (c < bytes && c <= SIZE_MAX - step) c += step;
  return c < bytes ? bytes : c;
}

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

static int overlaps(const clb_plan_buf *a, const clb_plan_buf *b) { return a->first <= b->last && b->first <= a->last; }

/* ---- the lower bound ------------------------------------------------------------ */

typedef struct ev {
  int64_t t;
  int kind; /* 0: a buffer ends before t (processed first), 1: starts at t */
  uint64_t bytes;
} ev;

static int ev_cmp(const void *pa, const void *pb) {
  const ev *a = pa, *b = pb;
  if (a->t != b->t) return a->t < b->t ? -1 : 1;
  return a->kind - b->kind;
}

static int is_root(const clb_plan_buf *b) { return b->alias_of < 0; }

uint64_t clb__plan_lower_bound(const clb_plan_buf *bufs, size_t n, uint64_t align) {
  if (align == 0) align = 1;
  ev *e = malloc((2 * n + 1) * sizeof *e);
  if (!e) return 0;
  size_t ne = 0;
  for (size_t i = 0; i < n; i++) {
    if (!is_root(&bufs[i]) || bufs[i].bytes == 0) continue;
    /* the interval of a root covers its aliases' (clb__plan_memory widens it) */
    int64_t f = bufs[i].first, l = bufs[i].last;
    for (size_t j = 0; j < n; j++)
      if (bufs[j].alias_of == (int64_t)i) {
        if (bufs[j].first < f) f = bufs[j].first;
        if (bufs[j].last > l) l = bufs[j].last;
      }
    uint64_t b = align_up(bufs[i].bytes, align);
    e[ne++] = (ev){f, 1, b};
    if (l < INT64_MAX) e[ne++] = (ev){l + 1, 0, b};
  }
  qsort(e, ne, sizeof *e, ev_cmp);
  uint64_t live = 0, peak = 0;
  for (size_t i = 0; i < ne; i++) {
    if (e[i].kind) live += e[i].bytes;
    else live -= e[i].bytes;
    if (live > peak) peak = live;
  }
  free(e);
  return peak;
}

/* ---- what the pool would hold --------------------------------------------------- */

uint64_t clb__plan_pool_peak(const clb_plan_buf *bufs, size_t n) {
  ev *e = malloc((2 * n + 1) * sizeof *e);
  size_t *freel = malloc((n + 1) * sizeof *freel);
  if (!e || !freel) {
    free(e);
    free(freel);
    return 0;
  }
  size_t ne = 0, nfree = 0;
  for (size_t i = 0; i < n; i++) {
    if (!is_root(&bufs[i])) continue;
    uint64_t cap = clb__pool_class_bytes((size_t)bufs[i].bytes);
    /* a get at `first` comes before any put at the same time: both are live then */
    e[ne++] = (ev){bufs[i].first, 0, cap};
    if (bufs[i].last < INT64_MAX) e[ne++] = (ev){bufs[i].last, 1, cap};
  }
  qsort(e, ne, sizeof *e, ev_cmp);
  uint64_t held = 0, peak = 0;
  for (size_t i = 0; i < ne; i++) {
    if (e[i].kind == 1) {
      freel[nfree++] = (size_t)e[i].bytes;
      continue;
    }
    size_t k;
    for (k = 0; k < nfree && freel[k] != e[i].bytes; k++) {}
    if (k < nfree) {
      freel[k] = freel[--nfree];
    } else {
      held += e[i].bytes;
      if (held > peak) peak = held;
    }
  }
  free(e);
  free(freel);
  return peak;
}

/* ---- placement -------------------------------------------------------------------- */

typedef struct place_ctx {
  clb_plan_buf *b; /* roots with their widened intervals and sizes */
  size_t n;
  uint64_t align, max_arena;
} place_ctx;

static const clb_plan_buf *g_sort_bufs; /* qsort has no context argument in C11 */
static int g_sort_order;

static int order_cmp(const void *pa, const void *pb) {
  const clb_plan_buf *a = &g_sort_bufs[*(const size_t *)pa], *b = &g_sort_bufs[*(const size_t *)pb];
  double ka, kb;
  switch (g_sort_order) {
  case 0: ka = (double)a->bytes; kb = (double)b->bytes; break;
  case 1:
    ka = (double)a->bytes * ((double)a->last - (double)a->first + 1); /* last may be INT64_MAX */
    kb = (double)b->bytes * ((double)b->last - (double)b->first + 1);
    break;
  default: ka = -(double)a->first; kb = -(double)b->first; break;
  }
  if (ka != kb) return ka > kb ? -1 : 1;
  if (a->first != b->first) return a->first < b->first ? -1 : 1;
  size_t ia = *(const size_t *)pa, ib = *(const size_t *)pb;
  return ia < ib ? -1 : ia > ib;
}

static int off_cmp(const void *pa, const void *pb) {
  const clb_plan_buf *a = &g_sort_bufs[*(const size_t *)pa], *b = &g_sort_bufs[*(const size_t *)pb];
  if (a->offset != b->offset) return a->offset < b->offset ? -1 : 1;
  return 0;
}

/* One greedy pass in the given order; writes arena/offset into pc->b and returns
 * the number of arenas used, or -1 when more than CLB_PLAN_MAX_ARENAS are needed. */
static int place_pass(place_ctx *pc, const size_t *order, size_t norder, size_t *placed, uint64_t *ends) {
  int narenas = 0;
  size_t nplaced = 0;
  for (size_t oi = 0; oi < norder; oi++) {
    clb_plan_buf *b = &pc->b[order[oi]];
    int done = 0;
    for (int a = 0; !done && a < CLB_PLAN_MAX_ARENAS; a++) {
      /* the placed buffers of arena a live at the same time as b, by offset */
      size_t m = 0;
      for (size_t k = 0; k < nplaced; k++) {
        clb_plan_buf *p = &pc->b[placed[k]];
        if (p->arena == a && overlaps(p, b)) placed[nplaced + m++] = placed[k];
      }
      g_sort_bufs = pc->b;
      qsort(placed + nplaced, m, sizeof *placed, off_cmp);
      uint64_t prev_end = 0, best = UINT64_MAX, best_gap = UINT64_MAX;
      for (size_t k = 0; k < m; k++) {
        clb_plan_buf *p = &pc->b[placed[nplaced + k]];
        uint64_t start = align_up(prev_end, pc->align);
        if (p->offset >= start && p->offset - start >= b->bytes && p->offset - start < best_gap) {
          best = start;
          best_gap = p->offset - start;
        }
        if (p->offset + p->bytes > prev_end) prev_end = p->offset + p->bytes;
      }
      if (best == UINT64_MAX) best = align_up(prev_end, pc->align);
      if (pc->max_arena && best + b->bytes > pc->max_arena) continue;
      b->arena = a;
      b->offset = best;
      if (a + 1 > narenas) {
        for (int k = narenas; k <= a; k++) ends[k] = 0;
        narenas = a + 1;
      }
      if (best + b->bytes > ends[a]) ends[a] = best + b->bytes;
      done = 1;
    }
    if (!done) return -1;
    placed[nplaced++] = order[oi];
  }
  return narenas;
}

clb_status clb__plan_memory(clb_plan_buf *bufs, size_t n, uint64_t align, uint64_t max_arena, clb_plan_result *out,
                            char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (align == 0 || (align & (align - 1))) {
    snprintf(err, errlen, "alignment %llu is not a power of two", (unsigned long long)align);
    return CLB_ERR_INVALID_ARG;
  }
  for (size_t i = 0; i < n; i++) {
    clb_plan_buf *b = &bufs[i];
    b->arena = 0;
    b->offset = 0;
    if (b->first > b->last) {
      snprintf(err, errlen, "buffer %zu: interval [%lld, %lld] ends before it starts", i, (long long)b->first, (long long)b->last);
      return CLB_ERR_INVALID_ARG;
    }
    if (b->alias_of >= (int64_t)n || b->alias_of == (int64_t)i || b->alias_of < -1) {
      snprintf(err, errlen, "buffer %zu: alias of %lld is not another buffer", i, (long long)b->alias_of);
      return CLB_ERR_INVALID_ARG;
    }
    if (b->alias_of >= 0) {
      const clb_plan_buf *r = &bufs[b->alias_of];
      if (r->alias_of >= 0) {
        snprintf(err, errlen, "buffer %zu: alias of %lld, itself an alias (give the root)", i, (long long)b->alias_of);
        return CLB_ERR_INVALID_ARG;
      }
      if (b->alias_offset > r->bytes || b->bytes > r->bytes - b->alias_offset) {
        snprintf(err, errlen, "buffer %zu: %llu bytes at %llu do not fit in buffer %lld of %llu bytes", i,
                 (unsigned long long)b->bytes, (unsigned long long)b->alias_offset, (long long)b->alias_of,
                 (unsigned long long)r->bytes);
        return CLB_ERR_INVALID_ARG;
      }
    } else if (max_arena && b->bytes > max_arena) {
      snprintf(err, errlen, "buffer %zu: %llu bytes exceed the device's largest allocation of %llu bytes", i,
               (unsigned long long)b->bytes, (unsigned long long)max_arena);
      return CLB_ERR_OOM;
    }
  }
  out->lower_bound = clb__plan_lower_bound(bufs, n, align);
  out->live_bytes = clb__plan_lower_bound(bufs, n, 1);
  /* roots with their intervals widened over their aliases */
  clb_plan_buf *w = malloc((n + 1) * sizeof *w);
  size_t *order = malloc((n + 1) * sizeof *order);
  size_t *placed = malloc((2 * n + 1) * sizeof *placed);
  int *best_arena = malloc((n + 1) * sizeof *best_arena);
  uint64_t *best_off = malloc((n + 1) * sizeof *best_off);
  if (!w || !order || !placed || !best_arena || !best_off) {
    free(w), free(order), free(placed), free(best_arena), free(best_off);
    snprintf(err, errlen, "out of host memory planning %zu buffers", n);
    return CLB_ERR_HOST_OOM;
  }
  if (n) memcpy(w, bufs, n * sizeof *w);
  for (size_t i = 0; i < n; i++)
    if (bufs[i].alias_of >= 0) {
      clb_plan_buf *r = &w[bufs[i].alias_of];
      if (bufs[i].first < r->first) r->first = bufs[i].first;
      if (bufs[i].last > r->last) r->last = bufs[i].last;
    }
  size_t norder = 0;
  for (size_t i = 0; i < n; i++)
    if (is_root(&w[i]) && w[i].bytes > 0) order[norder++] = i;
  place_ctx pc = {w, n, align, max_arena};
  uint64_t best_total = UINT64_MAX;
  int best_n = 0;
  uint64_t best_ends[CLB_PLAN_MAX_ARENAS] = {0};
  /* three orders, then random perturbations of the largest-first order (a fixed
   * seed: the same buffers always get the same offsets), while the work stays
   * small and the best is above the lower bound */
  size_t tries = 3 + (norder > 1 ? (size_t)(4000000 / ((uint64_t)norder * norder + 1)) : 0);
  if (tries > 3 + 256) tries = 3 + 256;
  uint64_t seed = 0x2545F4914F6CDD1Dull;
  for (size_t o = 0; o < tries && best_total > out->lower_bound; o++) {
    g_sort_bufs = w;
    g_sort_order = o < 3 ? (int)o : 0;
    qsort(order, norder, sizeof *order, order_cmp);
    if (o >= 3)
      for (size_t k = 0; k + 1 < norder; k++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        if (seed % 3 == 0) {
          size_t j = k + 1 + (size_t)((seed >> 8) % (uint64_t)(norder - k - 1 < 4 ? norder - k - 1 : 4));
          size_t t = order[k];
          order[k] = order[j];
          order[j] = t;
        }
      }
    uint64_t ends[CLB_PLAN_MAX_ARENAS];
    int na = place_pass(&pc, order, norder, placed, ends);
    if (na < 0) continue;
    uint64_t total = 0;
    for (int a = 0; a < na; a++) total += align_up(ends[a], align);
    if (total < best_total) {
      best_total = total;
      best_n = na;
      memcpy(best_ends, ends, sizeof ends);
      for (size_t i = 0; i < n; i++) {
        best_arena[i] = w[i].arena;
        best_off[i] = w[i].offset;
      }
    }
  }
  if (best_total == UINT64_MAX) {
    free(w), free(order), free(placed), free(best_arena), free(best_off);
    snprintf(err, errlen, "%zu buffers need more than %d arenas of at most %llu bytes", n, CLB_PLAN_MAX_ARENAS,
             (unsigned long long)max_arena);
    return CLB_ERR_OOM;
  }
  for (size_t i = 0; i < n; i++) {
    if (!is_root(&bufs[i]) || bufs[i].bytes == 0) continue;
    bufs[i].arena = best_arena[i];
    bufs[i].offset = best_off[i];
  }
  for (size_t i = 0; i < n; i++)
    if (bufs[i].alias_of >= 0) {
      bufs[i].arena = bufs[bufs[i].alias_of].arena;
      bufs[i].offset = bufs[bufs[i].alias_of].offset + bufs[i].alias_offset;
    }
  out->narenas = best_n;
  out->total_bytes = 0;
  for (int a = 0; a < best_n; a++) {
    out->arena_bytes[a] = align_up(best_ends[a], align);
    out->total_bytes += out->arena_bytes[a];
  }
  free(w), free(order), free(placed), free(best_arena), free(best_off);
  return CLB_OK;
}

int clb__plan_check(const clb_plan_buf *bufs, size_t n, uint64_t align, const clb_plan_result *r) {
  for (size_t i = 0; i < n; i++) {
    const clb_plan_buf *a = &bufs[i];
    if (a->bytes == 0) continue;
    if (a->arena < 0 || a->arena >= r->narenas) return 0;
    if (a->alias_of < 0 && a->offset % align) return 0;
    if (a->offset + a->bytes > r->arena_bytes[a->arena]) return 0;
    for (size_t j = i + 1; j < n; j++) {
      const clb_plan_buf *b = &bufs[j];
      if (b->bytes == 0 || b->arena != a->arena) continue;
      /* a buffer and its aliases share memory by design */
      if (a->alias_of == (int64_t)j || b->alias_of == (int64_t)i || (a->alias_of >= 0 && a->alias_of == b->alias_of)) continue;
      int64_t af = a->first, al = a->last, bf = b->first, bl = b->last;
      if (!(af <= bl && bf <= al)) continue;
      if (a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes) return 0;
    }
  }
  return 1;
}
