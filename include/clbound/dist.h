/* clbound/dist.h: data-parallel training over MPI (library clbound_dist, built
 * only where MPI is found; libclbound itself has no MPI dependency).
 *
 * Every rank builds the same training graph (clbound/graph.h) on its own
 * context and feeds its own batch, whose size may differ from rank to rank and
 * is known only on the device. clb_dist_step is one training step for all
 * ranks: forward and backward on the local batch (CLB_PHASE_GRADS), then the
 * gradients all-reduced weighted by the ranks' actual counts,
 *     grad = (sum_r n_r * grad_r) / (sum_r n_r),
 * so that the update (CLB_PHASE_UPDATE) equals one process training on the
 * union of the batches (the mean over the global count, not the mean of the
 * per-rank means). A rank whose batch is empty takes part with zeros; when
 * the global count is 0 no parameter changes.
 *
 * Overlap: each parameter's gradient is read back as soon as its layer's
 * backward is enqueued, and its MPI_Iallreduce starts as soon as that read is
 * done, while the device runs the backward of the layers below.
 *
 * Errors: a rank that fails in the step (an op's error, a device error found at
 * the step's sync such as CLB_ERR_BOUND_EXCEEDED, or a failure the caller
 * reports with clb_dist_step_failed) makes every rank return an error at that
 * step, never a hang: every rank always makes the same collective calls, and a
 * small all-reduce of the ranks' statuses ends each step. The failing rank
 * returns its own status and message; the others return the same status with
 * "rank R failed: ..." and the failing rank's message. No parameter changes on
 * any rank in a failed step.
 *
 * Host syncs: one per step per rank (counted in the context's host_syncs), which
 * is inherent: the gradients must reach the host (or at least the network) and
 * the statuses be known before the update. */
#ifndef CLB_DIST_H
#define CLB_DIST_H

#include <mpi.h>

#include "clbound/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clb_dist *clb_dist_t;

/* A data-parallel trainer of graph g (trained, clb_graph_train; float32
 * parameters) over the ranks of comm (duplicated: the caller's communicator is
 * free for other use). Collective: every rank of comm calls it with the same
 * graph structure; a rank whose graph differs in its parameters makes every
 * rank fail with CLB_ERR_INVALID_ARG. ctx is g's context. Installs g's grad
 * hook. On failure *out is NULL and clb_last_errmsg() says why. */
CLB_API clb_status clb_dist_new(clb_context_t ctx, clb_graph_t g, MPI_Comm comm, clb_dist_t *out);
/* Frees the trainer and removes its grad hook from the graph, so free it before
 * the graph (and the graph before its context). Not collective. NULL: no-op. */
CLB_API void clb_dist_free(clb_dist_t d);

/* One training step on the inputs last fed (collective). */
CLB_API clb_status clb_dist_step(clb_dist_t d);
/* Takes part in a step as a rank that failed before it could run (e.g. a feed
 * that was refused with `local`): every rank's clb_dist_step of this step
 * returns an error. Returns `local`. */
CLB_API clb_status clb_dist_step_failed(clb_dist_t d, clb_status local);

/* The message of the last failed call on d (the failing rank and its message
 * when another rank failed); "" after a success. */
CLB_API const char *clb_dist_errmsg(clb_dist_t d);

typedef struct clb_dist_stats {
  size_t struct_size;        /* set to sizeof(clb_dist_stats) before the call */
  int rank, size;
  uint64_t steps;            /* steps ended (failed ones included) */
  int64_t local_count;       /* the last step: this rank's actual count */
  int64_t global_count;      /* ... the sum over the ranks */
  double step_s;             /* ... wall time of clb_dist_step on this rank */
  double allreduce_s;        /* ... time in MPI calls (issuing, polling, waiting) */
  double exposed_s;          /* ... of which the ranks waited after their own gradients were read */
  uint64_t grad_bytes;       /* bytes all-reduced per step (float64 gradients) */
  uint64_t host_syncs;       /* counted host syncs of the last step */
} clb_dist_stats;

CLB_API clb_status clb_dist_stats_get(clb_dist_t d, clb_dist_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* CLB_DIST_H */
