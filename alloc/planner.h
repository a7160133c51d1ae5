/* planner.h: the memory planner of graph plans (internal; pure C, no OpenCL).
 *
 * A plan's step is a schedule of events (times). Each buffer is live from the
 * event that creates it (`first`) to the event after which nothing reads it
 * (`last`), both inclusive, and holds `bytes` at the plan's bounds. The planner
 * gives every buffer an `offset` in one of a few arenas (one, unless the total
 * exceeds the device's largest allocation) such that no two buffers whose
 * intervals overlap share a byte, every offset is a multiple of the alignment,
 * and the arenas stay close to the lower bound: the most bytes live at once. */
#ifndef CLB_ALLOC_PLANNER_H
#define CLB_ALLOC_PLANNER_H

#include <stddef.h>
#include <stdint.h>

#include "clbound/status.h"

typedef struct clb_plan_buf {
  /* in */
  uint64_t bytes;       /* 0: needs no memory (offset 0 of arena 0, overlapping anything) */
  int64_t first, last;  /* live interval, inclusive: first <= last */
  int64_t alias_of;     /* -1, or the index of a buffer this one lives inside (a view,
                         * an in-place update): it gets that buffer's arena and
                         * offset + alias_offset, and extends its interval */
  uint64_t alias_offset;
  /* out */
  int arena;
  uint64_t offset;
} clb_plan_buf;

typedef struct clb_plan_result {
  int narenas;
  uint64_t arena_bytes[8];  /* per arena: the end of its last buffer, aligned */
  uint64_t total_bytes;     /* the sum over the arenas */
  uint64_t lower_bound;     /* the most bytes live at any event, each buffer rounded up to
                             * the alignment: no placement can use less */
  uint64_t live_bytes;      /* the same without rounding: what the step really has live */
} clb_plan_result;

#define CLB_PLAN_MAX_ARENAS 8

/* Places n buffers. `align` is in bytes (a power of two, >= 1); `max_arena` caps
 * one arena (0: no cap). Errors: CLB_ERR_INVALID_ARG (a bad interval, alias or
 * alignment), CLB_ERR_OOM (a buffer larger than max_arena, or more than
 * CLB_PLAN_MAX_ARENAS arenas needed), CLB_ERR_HOST_OOM; err[errlen] says which. */
clb_status clb__plan_memory(clb_plan_buf *bufs, size_t n, uint64_t align, uint64_t max_arena, clb_plan_result *out,
                            char *err, size_t errlen);

/* The most bytes live at once over the schedule (aliases count once), each
 * buffer rounded up to `align` (1: exact). Buffers live together start at
 * distinct multiples of the alignment, so each takes at least its rounded size:
 * no placement's arena (rounded up itself) can be smaller. */
uint64_t clb__plan_lower_bound(const clb_plan_buf *bufs, size_t n, uint64_t align);

/* 1 when the placement is valid: offsets aligned, every buffer inside its
 * arena, no two buffers live at the same time sharing a byte. */
int clb__plan_check(const clb_plan_buf *bufs, size_t n, uint64_t align, const clb_plan_result *r);

/* The capacity the device pool gives a request of `bytes` (its size classes). */
size_t clb__pool_class_bytes(size_t bytes);

/* The most bytes the pool would hold serving these buffers in schedule order
 * from empty: a freed buffer serves a later request of its size class. */
uint64_t clb__plan_pool_peak(const clb_plan_buf *bufs, size_t n);

#endif /* CLB_ALLOC_PLANNER_H */
