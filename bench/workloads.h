/* workloads.h: the training workloads of `clbound demo` (also used by the tests):
 * the graphs, their data schedules and a double-precision host reference of
 * the same training. */
#ifndef CLB_BENCH_WORKLOADS_H
#define CLB_BENCH_WORKLOADS_H

#include <stdint.h>

#include "clbound/clbound.h"

typedef enum demo_workload { DEMO_XLA_MLP = 0, DEMO_WIDE_MLP = 1, DEMO_WORKLOAD_COUNT = 2 } demo_workload;

typedef struct demo_config {
  demo_workload workload;
  clb_policy_kind policy;
  int iterations;
  double lr;        /* < 0: the workload's default */
  int progress;     /* a clb_progress_mode (bench/progress.h): progress on stderr */
  int check;        /* compute the double reference and compare */
  int sizes;        /* 1..DEMO_MAX_SHORT_SIZES: the batch sizes cycle through that many
                       sizes of the demo's short run; 0: the workload's whole schedule */
  const char *cache_dir; /* the run's program cache folder (clb_context_options.cache_dir):
                            NULL: the configured one; "off": none */
} demo_config;

typedef struct demo_result {
  double seconds;            /* end to end: graph build, training, reading the losses */
  double step_s;             /* one step with its plan and kernels ready: the mean of the
                                first min(iterations, DEMO_REPLAY_STEPS) steps run again
                                after the run, each to completion; -1 when not measured
                                (CLBOUND_SHAPE_LOG set: the log would hold them) */
  double first_iteration_s;  /* from context creation to the first step's completion */
  uint64_t program_builds, cache_hits_memory, cache_hits_disk, plans_compiled, recompiles;
  uint64_t host_syncs;       /* during training, before the losses are read */
  uint64_t builds_after_first; /* program builds after the first iteration */
  uint64_t programs_after_first; /* programs built or loaded from disk after it */
  uint64_t kernel_launches;
  uint64_t kernels_compiled;   /* distinct kernels created from built or loaded programs */
  uint64_t programs_built;     /* programs made in the run: built from source or loaded from disk */
  uint64_t launches_per_step;  /* kernel launches of the second training step */
  uint64_t writes_per_step;    /* host writes of the third step's run (its inputs' included) */
  uint64_t steps_replayed;     /* steps replayed from a recorded command buffer */
  /* where a cold start's time goes: ms in builds from source, kernels' first
   * launches at each local size (count and ms from ready to done), and first
   * launches after the first iteration (0 under one plan) */
  uint64_t build_ms, first_launches, first_launch_ms, first_launches_after_first;
  /* the rest of a process's phases: ms in clb_context_new (OpenCL start-up, the
   * first context of a process pays the driver's), seconds freeing the graph and
   * the context after the run, and seconds the demo then waited for the program
   * store (tools/cmd-demo.c sets it; -1: not waited for, no store in this mode) */
  uint64_t context_new_ms;
  double free_s, store_wait_s;
  uint64_t steps_recorded;     /* steps recorded into a command buffer */
  uint64_t fused_groups, fused_nodes; /* elementwise groups of the graph, one kernel each (clb_graph_stats) */
  uint64_t fused_losses;       /* 1: the loss, its activation and their gradients are one kernel */
  uint64_t fused_epilogues;    /* linear layers with their activation as the GEMM's epilogue */
  uint64_t fused_backward_relus; /* linear layers whose backward does the ReLU below's too */
  uint64_t fused_casts;        /* nonzero nodes writing their one cast's dtype (no cast launch) */
  int gemm_strategy;           /* what the context's matmuls ran with (clb_context_gemm_strategy) */
  uint64_t peak_device_bytes;
  /* the memory plan (docs/graph.md), summed over the run's plans: their arenas,
   * the most bytes each step had live at once, what the pool would hold; the
   * largest plan's arenas; cl_mem created for arenas */
  uint64_t arena_bytes, live_lower_bound_bytes, pool_peak_bytes, arena_max_bytes, arena_allocations;
  double final_loss, max_loss_error; /* max |loss - ref| / max(|ref|, 1e-2) (tools/cmd-demo.c
                                        says why); -1 without check */
  float *losses;             /* iterations entries; malloc'd */
  double *ref_losses;        /* iterations entries or NULL; malloc'd */
  char last_reason[512];
} demo_result;

const char *demo_workload_name(demo_workload w);
const char *demo_policy_name(clb_policy_kind p);
double demo_default_lr(demo_workload w);

#define DEMO_REPLAY_STEPS 50
/* Runs one (workload, policy) training on a fresh context. Returns 0, or 1 with
 * a message in err. */
int demo_run(const demo_config *cfg, demo_result *res, char *err, size_t errlen);
void demo_result_free(demo_result *res);

/* The double reference alone: losses[iterations]. Returns 0 on success. */
int demo_reference(demo_workload w, int iterations, double lr, double *losses);
/* The same for a run's configuration (its schedule, lr and progress). */
int demo_reference_cfg(const demo_config *cfg, double *losses);

/* The batch size of iteration i (the host's own schedule, for the reference);
 * with sizes > 0, of the short run's cycle of that many sizes. */
#define DEMO_MAX_SHORT_SIZES 4
int64_t demo_batch_size(demo_workload w, int i);
int64_t demo_batch_size_in(demo_workload w, int i, int sizes);

/* wide-mlp: time one training step of a graph under `policy` at batch size n
 * (median of reps steps after warm-up) with the context's GEMM strategy `gemm`,
 * for the dynamic-vs-static comparison.
 * Returns 0 with *ms set. */
int demo_time_step(clb_policy_kind policy, clb_gemm_strategy gemm, int64_t n, int reps, double *ms, char *err,
                   size_t errlen);

/* One training step of workload w under the dynamic plan (wide-mlp at 256 rows),
 * whole-step (fused kernels), eager (the same plan op by op, CLBOUND_FUSE=off)
 * and replayed (the whole-step path in a second context with
 * CLBOUND_RECORD=on), interleaved rep by rep: `batch` steps enqueued, one sync,
 * per-step median of reps. Returns 0 with *out set. */
typedef struct demo_step_times {
  double step_ms;        /* the whole-step path, enqueued */
  double eager_step_ms;  /* the same plan op by op */
  double replay_step_ms; /* the whole-step path recorded once and replayed (CLBOUND_RECORD=on) */
  uint64_t steps_replayed, steps_recorded; /* of the replayed run: 0 replayed where it cannot record */
} demo_step_times;
int demo_time_whole_step(demo_workload w, int reps, int batch, demo_step_times *out, char *err, size_t errlen);

/* `clbound cache warm`: builds (or finds on disk) and stores the program of
 * workload w's first plan under `policy`, running nothing (clb_graph_warm).
 * *built: programs built from source, *loaded: found in the disk cache; dir
 * gets the cache folder they were stored in ("" when the cache was off). */
int demo_warm(demo_workload w, clb_policy_kind policy, uint64_t *built, uint64_t *loaded, char *dir, size_t dirlen,
              char *err, size_t errlen);


/* ---- per-rank batches (data parallelism: clbound demo --data-parallel, tests/dist) ----
 * A workload's training graph fed from a mask over its rows (xla-mlp: the 10
 * entries of its nonzero patterns; wide-mlp: the 4096 rows of its table). */
typedef struct demo_model demo_model;
int64_t demo_mask_len(demo_workload w);
/* lr < 0: the workload's default. Returns 0, or 1 with a message in err. */
int demo_model_new(clb_context_t ctx, demo_workload w, clb_policy_kind policy, double lr, demo_model **out, char *err,
                   size_t errlen);
clb_graph_t demo_model_graph(const demo_model *m);
clb_status demo_model_feed_mask(demo_model *m, const uint8_t *mask);
void demo_model_free(demo_model *m); /* NULL is a no-op */
/* Step i's masks of nranks ranks (masks: nranks * demo_mask_len bytes), drawn
 * from a seeded shuffle so that they are disjoint: their union is one batch of
 * sum(counts) rows. With rows > 0 every rank gets that many; else wide-mlp's
 * counts follow its schedule, xla-mlp's are 1..10 / nranks. Either way at most
 * demo_mask_len / nranks. */
void demo_rank_masks(demo_workload w, int i, int nranks, int64_t rows, uint8_t *masks, int64_t *counts);

#endif /* CLB_BENCH_WORKLOADS_H */
