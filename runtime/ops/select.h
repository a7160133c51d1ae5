/* select.h: the shared launcher of the data-dependent ops (nonzero,
 * masked_select, masked_scatter): three launches over one plan. */
#ifndef CLB_OPS_SELECT_INTERNAL_H
#define CLB_OPS_SELECT_INTERNAL_H

#include "clbound/dataops.h"
#include "runtime/cache/cache.h"

/* CPU style: one work-item (local size 1) per chunk; at most this many chunks
 * per compute unit, so two cores stay balanced when chunks differ in density. */
#define CLB_SEL_CPU_CHUNKS_PER_CU 32
/* CPU style: no fewer elements per chunk than this (a multiple of SEL_CHUNK_ALIGN in
 * kernels/common.cl), so a small tensor runs as a few chunks. */
#define CLB_SEL_CPU_CHUNK_MIN 1024

typedef enum clb_sel_kind {
  CLB_SEL_NONZERO = 0,
  CLB_SEL_SELECT = 1,
  CLB_SEL_SCATTER = 2
} clb_sel_kind;

/* Everything the three launches need; the ops fill it after validating. */
typedef struct clb_sel_plan {
  const char *op;          /* static name for messages ("nonzero") */
  clb_sel_kind kind;
  clb_tensor_t x;          /* values (nonzero: the tensor whose flags are read) */
  clb_tensor_t mask;       /* flags; x itself for nonzero */
  int rank;                /* rank of the iteration shape */
  uint32_t bmx, bmm;       /* bit d: x / mask broadcasts at iteration dim d */
  int64_t bound_numel;     /* elements of the iteration shape at the bounds */
  clb_tensor_t out;
  int64_t obound;          /* most results the output holds (rows for nonzero) */
  clb_tensor_t source;     /* masked_scatter's source, else NULL */
  clb_tensor_t count;      /* nonzero_static's count tensor, or NULL */
  int nz_static;           /* nonzero_static: pad with fill, count to `count` */
  int64_t fill;
  char what[192];          /* the operands' bounds, for messages */
} clb_sel_plan;

/* Enqueues count, finish and write for a validated plan; no host sync. */
clb_status clb__select_run(clb_context_t ctx, const clb_sel_plan *p);

#endif /* CLB_OPS_SELECT_INTERNAL_H */
