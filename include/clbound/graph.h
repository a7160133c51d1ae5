/* clbound/graph.h: graphs of ops compiled to plans that run many times with
 * inputs of any actual size inside their bounds.
 *
 * A graph is built once: inputs with bounded dims, parameters, ops. Each node's
 * shape is inferred symbolically by the symbol engine (clbound/shapes.h) as it is
 * added: a dynamic dim of an input is a symbol in [0, bound], the count of a
 * nonzero or masked_select is a data-dependent symbol, and equalities that only
 * the device can check (the rows of two different nonzero results that a loss
 * pairs) are recorded as deferred checks, verified by the kernels at run time and
 * reported at the next host sync (CLB_ERR_DEVICE_CHECK). A contradiction found
 * while building (a linear whose inner dims differ) is an error at once.
 *
 * clb_graph_train() turns the graph into a training step: reverse-mode
 * differentiation from a 0-d loss to every trainable parameter, then an SGD
 * update (optional momentum). One clb_graph_run() is then the whole step:
 * forward, backward and update, with no host sync unless the policy needs one.
 *
 * Plans and policies. A plan fixes, for every size that may change (a dynamic
 * dim of an input, the count of a data-dependent op), whether it is bounded (the
 * kernels read it on the device) or compiled in (the plan's programs are built
 * with it as a constant). The graph's policy (clb_policy_kind) decides:
 *   - CLB_POLICY_DYNAMIC: everything bounded from the start: one plan, ever, and
 *     no host sync in clb_graph_run.
 *   - CLB_POLICY_AUTOMATIC (default): an input dim is compiled in until it first
 *     changes, then bounded (one recompile, logged with its reason); counts of
 *     data-dependent ops are bounded from the start, because reading them would
 *     be a host sync (TorchDynamo treats such "unbacked" sizes the same way).
 *   - CLB_POLICY_STATIC: every distinct size gets its own plan with its own
 *     programs, the way a static-shape compiler works; a data-dependent count is
 *     read back to the host (one counted sync per op per run) to pick the plan.
 *   - CLB_POLICY_BUCKETED: sizes are padded up to a ladder of buckets (powers of
 *     two up to the bound unless clb_graph_set_buckets gives one); a plan per
 *     bucket; counts are read back like static. Padding costs no correctness:
 *     the actual size stays on the device and kernels skip the slack.
 * Every plan after the first is a recompile: its reason (the size that changed
 * and the policy's rule) goes to the context's recompile log (CLBOUND_LOG=
 * recompiles) and metrics. Programs built for a plan stay in the program cache,
 * so returning to an earlier plan rebuilds nothing.
 *
 * Memory: each node's output is allocated once at its plan's bounds from the
 * context's pool and reused by every run of that plan; a plan switch returns the
 * old plan's buffers to the pool (parameters and optimizer state are shared by
 * every plan).
 *
 * CLBOUND_SHAPE_LOG=path appends every fed input shape (one line per run, for
 * `clbound shapes`), after a header line naming the ops whose output sizes depend
 * on data.
 *
 * Errors go through the graph's context (clb_context_errmsg). Contexts and
 * graphs are not thread-safe. */
#ifndef CLB_GRAPH_H
#define CLB_GRAPH_H

#include "clbound/nn.h"
#include "clbound/ops.h"
#include "clbound/runtime.h"
#include "clbound/shapes.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clb_graph *clb_graph_t;
/* A node of a graph: an index >= 0. */
typedef int clb_node;

#define CLB_GRAPH_MAX_NODES 512

typedef struct clb_graph_options {
  size_t struct_size;     /* sizeof(clb_graph_options): set by clb_graph_options_init */
  clb_policy_kind policy; /* default CLB_POLICY_AUTOMATIC */
  const char *name;       /* for messages, the shape log and recompile reasons (copied); default "graph" */
  /* Liveness for graphs that do not train: when set, a node's output goes back
   * to the memory pool as soon as its last consumer has run, so later nodes reuse
   * its buffer within the same run. Outputs nothing reads (the graph's results)
   * and nodes passed to clb_graph_keep stay readable with clb_graph_tensor;
   * a released node's clb_graph_tensor is NULL. Training graphs always release
   * gradients this way; forward outputs are released once backward has read
   * them under the memory plan, kept without it. Default 0. */
  int free_intermediates;
  /* 1 (default): each plan's tensors live in one arena laid out from the
   * liveness of its first run (docs/graph.md, "Memory plan"); training graphs
   * then also release forward outputs once backward has read them (kept nodes
   * and the loss stay). 0: every buffer from the pool, as eager ops.
   * CLBOUND_MEMORY_PLAN=0 in the environment forces 0. */
  int memory_plan;
} clb_graph_options;

CLB_API void clb_graph_options_init(clb_graph_options *opts);

/* Creates an empty graph on ctx. opts may be NULL for the defaults. The graph
 * must be freed before its context. */
CLB_API clb_status clb_graph_new(clb_context_t ctx, const clb_graph_options *opts, clb_graph_t *out);
CLB_API void clb_graph_free(clb_graph_t g); /* NULL is a no-op */

/* ---- Building ----------------------------------------------------------------
 *
 * Each call adds one node and writes its index to *out. Names are copied and
 * used in messages. An error leaves the graph unchanged. */

/* An input fed before each run: `bounds` per dim, `dynamic` flags (NULL: all
 * static). A dynamic dim takes any actual size in [0, bound]. */
CLB_API clb_status clb_graph_input(clb_graph_t g, const char *name, clb_dtype dtype, int rank,
                                   const int64_t *bounds, const uint8_t *dynamic, clb_node *out);
/* A parameter: a static tensor owned by the graph, initialised from `init`
 * (dense, `bytes` long; NULL for zeros). Trainable ones get gradients and SGD
 * updates after clb_graph_train. */
CLB_API clb_status clb_graph_param(clb_graph_t g, const char *name, clb_dtype dtype, int rank,
                                   const int64_t *dims, const void *init, size_t bytes, int trainable,
                                   clb_node *out);
/* A 0-d constant of `dtype`. */
CLB_API clb_status clb_graph_scalar(clb_graph_t g, clb_dtype dtype, double value, clb_node *out);

CLB_API clb_status clb_graph_unary(clb_graph_t g, clb_unary_op op, clb_node x, clb_node *out);
CLB_API clb_status clb_graph_binary(clb_graph_t g, clb_binary_op op, clb_node a, clb_node b,
                                    clb_node *out);
CLB_API clb_status clb_graph_cast(clb_graph_t g, clb_node x, clb_dtype dtype, clb_node *out);
/* clb_reshape: a view; `spec` as there (one -1 at most). */
CLB_API clb_status clb_graph_reshape(clb_graph_t g, clb_node x, int rank, const int64_t *spec,
                                     clb_node *out);
/* Reduction over every element to a 0-d tensor (clb_reduce_all). */
CLB_API clb_status clb_graph_reduce(clb_graph_t g, clb_reduce_op op, clb_node x, clb_node *out);
CLB_API clb_status clb_graph_softmax(clb_graph_t g, clb_node x, int log, clb_node *out);
/* Data-dependent ops (clbound/dataops.h): their counts stay on the device. */
CLB_API clb_status clb_graph_nonzero(clb_graph_t g, clb_node x, clb_node *out);
CLB_API clb_status clb_graph_masked_select(clb_graph_t g, clb_node x, clb_node mask, clb_node *out);
/* y = x W^T + bias; bias may be -1 for none. */
CLB_API clb_status clb_graph_linear(clb_graph_t g, clb_node x, clb_node w, clb_node bias, clb_node *out);
/* A 0-d loss averaged over the actual count (clb_loss). */
CLB_API clb_status clb_graph_loss(clb_graph_t g, clb_loss_kind kind, clb_node pred, clb_node target,
                                  clb_node *out);

/* Makes every run a training step that minimises `loss` (a 0-d node): gradients
 * by reverse-mode differentiation, then param -= lr * grad (with momentum:
 * v = momentum * v + grad, param -= lr * v). Errors: CLB_ERR_INVALID_ARG when a
 * trainable parameter's gradient would pass through an op that has none (nonzero,
 * masked_select, cast, reshape, reductions, or a broadcasting binary op), naming
 * it. lr and momentum may be changed later without building anything. */
CLB_API clb_status clb_graph_train(clb_graph_t g, clb_node loss, double lr, double momentum);
CLB_API clb_status clb_graph_set_lr(clb_graph_t g, double lr);

/* Bucketed policy: the ladder of an input's dynamic dim (ascending, the last at
 * least the bound; copied), or, with input = -1 and dim = -1, of every
 * data-dependent count. Without it, powers of two up to the bound. */
CLB_API clb_status clb_graph_set_buckets(clb_graph_t g, clb_node input, int dim, const int64_t *ladder,
                                         size_t n);

/* ---- Running ---------------------------------------------------------------- */

/* Gives an input its data for the next run: actual sizes `dims` (NULL for rank
 * 0), dense host data of `bytes` bytes (copied now, written at the run). A size
 * over its bound or a static dim that differs is CLB_ERR_OUT_OF_BOUNDS. */
CLB_API clb_status clb_graph_feed(clb_graph_t g, clb_node input, const int64_t *dims, const void *host,
                                  size_t bytes);
/* clb_graph_feed without the copy: the next run writes the input straight from
 * `host`, which the caller keeps valid and unchanged until release(release_arg)
 * runs: once that write is done (found at a later write or host sync, or when
 * the context is freed), or when the feed is replaced or the graph freed before
 * a run took it. With release NULL, the memory is the caller's to keep until
 * the host sync after that run. Only that run reads it: a later run without a
 * new feed is CLB_ERR_INVALID_ARG. release also runs, before returning, when
 * the feed is refused (clb_graph_feed's errors). */
CLB_API clb_status clb_graph_feed_borrowed(clb_graph_t g, clb_node input, const int64_t *dims, const void *host,
                                           size_t bytes, void (*release)(void *), void *release_arg);

/* Runs the graph (a training step after clb_graph_train) on the inputs last fed.
 * Chooses or compiles a plan first. Errors: CLB_ERR_INVALID_ARG (an input never
 * fed), CLB_ERR_GUARD (a size the policy cannot serve, the guard in words), and
 * any op's error. Device-side errors surface at the next host sync. */
CLB_API clb_status clb_graph_run(clb_graph_t g);

/* ---- Run phases (data parallelism, clbound/dist.h) ----------------------------
 *
 * A training step split in two, so that something can happen to the gradients
 * between backward and the update (an all-reduce across processes):
 *   CLB_PHASE_GRADS: plan choice, forward and backward, enqueued as in
 *     clb_graph_run; the parameters' gradients are then complete (on the device)
 *     and stay until the step ends. No host sync.
 *   CLB_PHASE_UPDATE: the SGD update from those gradient tensors (whatever they
 *     hold now: a caller may have overwritten them with clb_tensor_write), and
 *     the end of the step (statistics, shape log). Fused (CLBOUND_FUSE) or not.
 *   CLB_PHASE_DISCARD: ends a step begun by CLB_PHASE_GRADS without updating.
 *   CLB_PHASE_ALL: the whole step, exactly clb_graph_run.
 * GRADS needs a training graph and no step in progress; UPDATE and DISCARD need
 * one in progress (else CLB_ERR_INVALID_ARG). A failed GRADS ends its step. */
typedef enum clb_graph_phase {
  CLB_PHASE_ALL = 0,
  CLB_PHASE_GRADS = 1,
  CLB_PHASE_UPDATE = 2,
  CLB_PHASE_DISCARD = 3
} clb_graph_phase;

CLB_API clb_status clb_graph_run_phase(clb_graph_t g, clb_graph_phase phase);

/* The trainable parameters of a training graph, in the order their gradients
 * complete during backward (the last layer's first): up to cap nodes to out
 * (may be NULL with cap 0), their number to *n. */
CLB_API clb_status clb_graph_params(clb_graph_t g, clb_node *out, int cap, int *n);

/* Between CLB_PHASE_GRADS and the end of the step: the tensor holding d loss /
 * d param (borrowed; the param's static shape). CLB_ERR_INVALID_ARG outside a
 * step or for a node that is not a trainable parameter. */
CLB_API clb_status clb_graph_grad(clb_graph_t g, clb_node param, clb_tensor_t *grad);

/* The actual count the loss of the last step (or of the step in progress) was
 * averaged over: its target's actual elements, which are the prediction's
 * (its rows for cross-entropy; counts that differ fail the step with
 * CLB_ERR_DEVICE_CHECK). A counted host sync. Under the memory plan the target
 * is released during backward with the other forward outputs unless kept
 * (clb_graph_keep on the loss's target node); then this is CLB_ERR_INVALID_ARG.
 * The grad hook below gets the count without a sync of its own. */
CLB_API clb_status clb_graph_loss_count(clb_graph_t g, int64_t *count);

/* Called during CLB_PHASE_GRADS (not clb_graph_run), in queue order: once after
 * the forward pass with node = the loss and t = its target (whose actual
 * elements are the count, as clb_graph_loss_count), then once per trainable
 * parameter as soon as its gradient is complete, with node = the parameter and
 * t = its gradient (the order of clb_graph_params). Whatever the callback
 * enqueues on the context's queue runs after the ops that wrote t and before the
 * backward of the layers below. A status other than CLB_OK fails the step.
 * fn NULL removes it. */
typedef clb_status (*clb_graph_grad_fn)(void *user, clb_node node, clb_tensor_t t);
CLB_API clb_status clb_graph_set_grad_hook(clb_graph_t g, clb_graph_grad_fn fn, void *user);

/* Builds (or loads) the one program of the plan that the fed inputs' sizes
 * select and stores it in the persistent cache, launching nothing: a later
 * process then starts with 0 builds from source. Inputs must be fed; only
 * plans whose counts stay on the device (dynamic or automatic policy) can be
 * built ahead (else CLB_ERR_INVALID_ARG). Parameters are not changed. */
CLB_API clb_status clb_graph_warm(clb_graph_t g);

/* The tensor holding node n's output after the last run (borrowed: valid until
 * the next run or clb_graph_free; under the memory plan its data is a region
 * of the plan's arena, at clb_tensor_data_offset in clb_tensor_data_mem, that
 * the next run reuses). Read it with clb_tensor_read. NULL when the
 * node has not run. For a parameter: its current value. A view (clb_reshape)
 * or device export made from it keeps this run's data: the graph's next run
 * (or CLB_PHASE_UPDATE, or clb_graph_free) first gives each view a copy of its
 * own (one enqueued device copy), and a device export is a copy from the start
 * (docs/graph.md, "Views of a graph's tensors"). */
CLB_API clb_tensor_t clb_graph_tensor(clb_graph_t g, clb_node n);

/* Keeps node n's output readable after runs of a graph made with
 * free_intermediates, or of a training graph under the memory plan (no effect
 * otherwise). */
CLB_API clb_status clb_graph_keep(clb_graph_t g, clb_node n);

typedef struct clb_graph_stats {
  size_t struct_size;       /* set to sizeof(clb_graph_stats) before the call */
  uint64_t runs;
  uint64_t plans_compiled;  /* distinct plans ever compiled */
  uint64_t plan_switches;   /* runs that used another plan than the run before */
  uint64_t host_syncs;      /* syncs the graph made to read data-dependent counts */
  uint64_t nodes;
  uint64_t deferred_checks; /* equalities only the device can check */
  int64_t current_plan;     /* index of the last run's plan, -1 before the first run */
  /* The memory plan (docs/graph.md, "Memory plan"); zeros before a plan is laid
   * out (its first run records its buffers on the pool). */
  uint64_t memory_plan;            /* 1 when the graph's plans use arenas */
  uint64_t arena_bytes;            /* the last run's plan: its arenas */
  uint64_t live_lower_bound_bytes; /* ... the most bytes its step has live at once */
  uint64_t pool_peak_bytes;        /* ... what the pool would hold for the same step */
  uint64_t arena_buffers;          /* ... buffers placed in its arenas */
  uint64_t arena_bytes_all_plans;  /* every plan laid out so far, summed */
  uint64_t arena_held_bytes;       /* the device memory behind the arenas now (the largest plan's) */
  uint64_t arena_align_bytes;      /* the offsets' alignment */
  uint64_t arena_fallbacks;        /* steps that left their plan's arena for the pool (expected 0) */
  /* Fusion (docs/design.md, "Executor"): chains of elementwise nodes run as one
   * generated kernel each; 0 with CLBOUND_FUSE=off. Known after the first run. */
  uint64_t fused_groups; /* groups found */
  uint64_t fused_nodes;  /* nodes in them */
  uint64_t fused_losses; /* 1 when a training graph's loss runs with its activation and both gradients in one kernel */
  uint64_t fused_epilogues; /* linear nodes whose activation (relu, sigmoid, tanh, exp) is their GEMM's epilogue */
  uint64_t fused_backward_relus; /* linear nodes whose backward also does the backward of the ReLU that made their input */
  uint64_t fused_casts;          /* nonzero nodes that write the dtype of the one cast that reads them (no cast launch) */
} clb_graph_stats;

CLB_API clb_status clb_graph_stats_get(clb_graph_t g, clb_graph_stats *out);

/* The reason the last plan was compiled ("" before any recompile). */
CLB_API const char *clb_graph_last_reason(clb_graph_t g);

/* A text description: every node with its symbolic shape, its bounds, the
 * data-dependent ops, the deferred checks and, once the last run's plan has one,
 * its memory map (per buffer: arena, offset, size, live interval). *len (optional) gets the length
 * needed. Errors: CLB_ERR_BUFFER_SMALL. */
CLB_API clb_status clb_graph_describe(clb_graph_t g, char *buf, size_t cap, size_t *len);

#ifdef __cplusplus
}
#endif
#endif /* CLB_GRAPH_H */
