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

/* One launch (sel_single) when the mask has at most this many flags (elements
 * at its bounds; a row mask has one per row) and its flags times the groups,
 * the prefix reads the groups add, stay under CLB_SEL_SINGLE_MAX_READS;
 * CLBOUND_SELECT_SINGLE=on|off forces either path. Measured: docs/benchmarks.md. */
#define CLB_SEL_SINGLE_MAX_FLAGS 16384
#define CLB_SEL_SINGLE_MAX_READS (1 << 20)
/* CPU style, one launch: at most this many chunks per compute unit. */
#define CLB_SEL_SINGLE_CPU_CHUNKS_PER_CU 4

/* GPU style, one pass with decoupled look-back (sel_lookback, docs/dataops.md):
 * flags per work-item and tile (a tile is local size times this many; the
 * test switch CLBOUND_TEST_SELECT_LOOKBACK=items=N sets 4 or 16 instead). */
#define CLB_SEL_LB_ITEMS 8
/* Its state buffer: a header of this many 64-bit words, then a status word per
 * tile (kernels/select-gpu.cl, SEL_LB_HDR). */
#define CLB_SEL_LB_HDR 4
/* The counts its status words carry are 40 bits: larger iteration shapes take
 * the three launches. */
#define CLB_SEL_LB_MAX_NUMEL ((int64_t)1 << 40)

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

/* clb_reshape's checks, and the view *out made (or the one given checked) and,
 * when dynamic, linked to x as its follower (struct clb_tensor.view_next), whose
 * record the next select op writing x writes too; nothing is launched. */
clb_status clb__reshape_follow(clb_context_t ctx, clb_tensor_t x, int rank, const int64_t *spec, clb_tensor_t *out);

/* Enqueues sel_lookback, sel_single, or count, finish and write, for a
 * validated plan; no host sync. */
clb_status clb__select_run(clb_context_t ctx, const clb_sel_plan *p);

#endif /* CLB_OPS_SELECT_INTERNAL_H */
