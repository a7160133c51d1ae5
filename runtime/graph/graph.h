/* graph.h: runtime/graph, the graph executor's internals (build.c, node.c, run.c). */
#ifndef CLB_GRAPH_INTERNAL_H
#define CLB_GRAPH_INTERNAL_H

#include "clbound/dataops.h"
#include "clbound/graph.h"
#include "runtime/core/core.h"

/* Sizes that a plan may bound or compile in: the dynamic dims of the inputs and
 * the counts of the data-dependent ops. A node depends on a set of them (a bit
 * mask), the union of its inputs' sets plus its own count. */
#define CLB_GRAPH_MAX_SLOTS 64

typedef enum gn_kind {
  GN_INPUT, GN_PARAM, GN_SCALAR, GN_UNARY, GN_BINARY, GN_CAST, GN_RESHAPE, GN_REDUCE,
  GN_SOFTMAX, GN_NONZERO, GN_MASKED_SELECT, GN_LINEAR, GN_LOSS
} gn_kind;

/* How a plan treats one slot (SLOT_UNRESOLVED: a count not yet read back). */
#define SLOT_UNRESOLVED 255
typedef enum slot_kind { SLOT_BOUNDED = 0, SLOT_STATIC = 1, SLOT_BUCKET = 2 } slot_kind;

typedef struct slot_val {
  int64_t value; /* the size compiled in (static), the bucket, or -1 (bounded) */
  uint8_t kind;  /* slot_kind */
} slot_val;

typedef struct slot_info {
  int node;      /* the input node or the data-dependent node */
  int dim;       /* the input's dim, -1 for a count */
  int64_t bound; /* the largest size the slot may take */
  char what[96]; /* "dim 0 of x", "count of nonzero 'X'" */
} slot_info;

/* An input's copy of its fed data, apart from the node array (which moves as
 * nodes are added), so that the writes reading it can find it: `busy` counts
 * those still queued; the copy changes only once they are done. */
struct clb__feed_copy {
  void *p;
  size_t cap;
  int busy;
};

typedef struct gnode {
  gn_kind kind;
  char name[48];
  int in[3];
  int nin;
  int op;          /* unary/binary/reduce op, loss kind, softmax `log` */
  clb_dtype dtype; /* output dtype */
  int rank;        /* output rank */
  clb_shape shape; /* symbolic output shape */
  int spec_rank;
  int64_t spec[CLB_MAX_RANK]; /* reshape */
  int64_t bound[CLB_MAX_RANK]; /* inputs and params: their bounds */
  uint8_t dyn[CLB_MAX_RANK];
  int slot_of_dim[CLB_MAX_RANK]; /* inputs: the slot of each dynamic dim, else -1 */
  int slot;        /* data-dependent ops: the slot of the count, else -1 */
  int input_index; /* inputs: position among the graph's inputs */
  uint64_t deps;   /* slots the output's size depends on */
  int trainable;
  int requires_grad;
  /* feed: the data the next run writes, from the input's copy (clb_graph_feed)
   * or the caller's memory (clb_graph_feed_borrowed), written without a
   * staging copy either way */
  struct clb__feed_copy *copy;
  const void *feed;
  size_t feed_bytes;
  int64_t feed_dims[CLB_MAX_RANK];
  int fed;
  int borrowed;                    /* feed is the caller's: 1 until a run reads it, then 2 */
  void (*feed_release)(void *);    /* the borrowed feed's, until a write takes it over */
  void *feed_release_arg;
  /* run state: tensors of the current plan (key), freed when the key changes */
  int have_key;
  slot_val key[CLB_GRAPH_MAX_SLOTS];
  clb_tensor_t t;        /* output */
  clb_tensor_t raw;      /* data-dependent ops under static/bucketed: the output at the bound */
  clb_tensor_t aux;      /* loss: d loss / d pred */
  clb_tensor_t egrad[3]; /* backward: d loss / d input i */
  clb_tensor_t gsum;     /* backward: sum of the gradients from several consumers */
  clb_tensor_t vel;      /* trainable params with momentum */
  int nconsumers;        /* edges that read this node on the gradient path */
  int keep;              /* clb_graph_keep: never released by free_intermediates */
  clb_tensor_t grad;     /* trainable params, between CLB_PHASE_GRADS and the update: d loss / d param (borrowed) */
  /* fusion (fuse.c): the elementwise group the node belongs to, run as one
   * generated kernel at its last member's place; -1 when none */
  int fuse_last;         /* the group's last member */
  int fuse_next;         /* the next member, -1 for the last */
  int fuse_drop;         /* an intermediate nothing else reads: not materialised */
  /* a group's last member: the kernel its source was last generated into, and
   * the hash of what the source depends on (fuse.c), so that a step whose
   * group is laid out as the last one's does not generate it again */
  uint64_t fuse_src_key;
  char fuse_src_name[40];
  int fuse_epi;          /* a linear node and the activation fused as its epilogue:
                            each the other's index; -1 when none */
  int fuse_bwd;          /* a linear node whose input is a ReLU's output read by it
                            alone, and that ReLU: each the other's index; the
                            linear's backward gives the ReLU's input gradient
                            (clb__linear_backward_relu); -1 when none */
  int fuse_cast;         /* a nonzero node read by one cast alone, and that cast:
                            each the other's index; the cast runs nonzero writing
                            its dtype (clb__nonzero_as); -1 when none */
} gnode;

typedef struct plan_rec {
  size_t input_plan;
  slot_val vals[CLB_GRAPH_MAX_SLOTS];
} plan_rec;

struct clb_graph {
  clb_context_t ctx;
  clb_policy_kind policy_kind;
  char name[48];
  clb_shapes_t shapes;
  gnode *nodes;
  int nnodes, cap_nodes;
  slot_info slots[CLB_GRAPH_MAX_SLOTS];
  int nslots;
  int inputs[CLB_GRAPH_MAX_NODES];
  int ninputs;
  /* training */
  int loss;      /* -1 when not training */
  int free_intermediates; /* clb_graph_options.free_intermediates */
  double lr, momentum;
  /* policy over the inputs' dims (symbol engine), created at the first run */
  clb_policy_t policy;
  int64_t *count_ladder; /* bucketed counts */
  size_t count_ladder_n;
  struct { int node, dim; int64_t *ladder; size_t n; } in_ladders[16];
  int n_in_ladders;
  /* plans */
  plan_rec *plans;
  size_t nplans, cap_plans;
  int64_t current_plan;
  slot_val cur[CLB_GRAPH_MAX_SLOTS];
  clb_graph_stats stats;
  char last_reason[512];
  int shape_log_header_done;
  struct clb__graph_mem *mem; /* memory.c */
  struct clb__graph_rec *rec; /* record.c */
  /* run phases (clb_graph_run_phase) */
  int in_step;                /* a CLB_PHASE_GRADS step waits for its update */
  int phased;                 /* the backward in progress belongs to CLB_PHASE_GRADS */
  clb_graph_grad_fn grad_hook;
  void *grad_hook_user;
  int fuse_nnodes;            /* nodes when the groups were found (fuse.c) */
  int fuse_loss_pred;         /* the activation fused into the loss, or -1 (fuse.c) */
  int loss_fused_now;         /* this step runs it fused (its size allows) */
};

/* The node of a handle, or NULL for a handle the graph does not have. */
static inline gnode *clb__graph_node(clb_graph_t g, clb_node n) {
  return (g && n >= 0 && n < g->nnodes) ? &g->nodes[n] : NULL;
}

/* node.c */
const char *clb__graph_kind_name(gn_kind k);
/* Frees the tensors of the node's current plan (not a param's value). */
void clb__graph_release_tensors(gnode *n);
/* An input's feed at the graph's end: a borrowed feed no run took is released,
 * the copy freed once no write reads it. */
void clb__graph_feed_free(clb_graph_t g, gnode *n);
/* alias.c: gives every tensor outside the graph that shares a buffer of the
 * graph's (a view or device export of a tensor it handed out) a copy of its
 * own, before the graph rewrites or gives back its buffers. */
clb_status clb__graph_unshare(clb_graph_t g, const char *op);
/* Whether the sizes in `mask` are those n's tensors were made for. */
int clb__graph_key_same(const clb_graph_t g, const gnode *n, uint64_t mask);
/* Keeps n's tensors when the sizes it depends on are those of its last run,
 * else releases them so that the ops create them at the new plan's bounds. */
void clb__graph_ensure_key(clb_graph_t g, gnode *n);
/* The build suffix of the sizes in `mask` (what a run does before each op). */
void clb__graph_set_suffix(clb_graph_t g, uint64_t mask);

/* memory.c: the memory plan (docs/graph.md, "Memory plan"). */
clb_status clb__graph_mem_new(clb_graph_t g, int enabled);
void clb__graph_mem_free(clb_graph_t g);
int clb__graph_mem_enabled(clb_graph_t g);
/* Hook points of clb_graph_run: before the first node (the last step's tensors
 * are released, the plan's arena chosen once its sizes are known), after each
 * compiled-in count is known, after the run (a first run's record becomes the
 * plan's layout), and after each node's backward (training releases the node's
 * forward output). */
clb_status clb__graph_mem_begin(clb_graph_t g, size_t input_plan);
clb_status clb__graph_mem_resolved(clb_graph_t g);
void clb__graph_mem_end(clb_graph_t g, clb_status st);
/* The same for the walk of a new plan (run.c), laid out as plan index `plan`. */
void clb__graph_mem_end_as(clb_graph_t g, clb_status st, int64_t plan);
void clb__graph_mem_backward_done(clb_graph_t g, int i);
/* record.c: recorded steps. begin() is called once the step's memory plan is
 * chosen (same_plan: the plan ran the last step), end() when the step ends,
 * with its status: it replays or enqueues what the step held back. */
clb_status clb__graph_record_init(clb_graph_t g); /* clb_graph_new: reads CLBOUND_RECORD */
clb_status clb__graph_record_begin(clb_graph_t g, int same_plan);
clb_status clb__graph_record_end(clb_graph_t g, clb_status st);
void clb__graph_record_free(clb_graph_t g);
/* 1 while the step runs in its plan's arena (its buffers are the plan's). */
int clb__graph_mem_arena_step(clb_graph_t g);
/* 1 when mem is a shape record this step handed to a new tensor (no other
 * tensor of the step writes it). */
int clb__graph_mem_step_shape(clb_graph_t g, cl_mem mem);
void clb__graph_mem_fill_stats(clb_graph_t g, clb_graph_stats *s);
/* Line i of the last run's plan's memory map (0: the summary); 0 past the end. */
int clb__graph_mem_map_line(clb_graph_t g, size_t i, char *line, size_t cap);


/* whole-step.c */
/* 1 when a new plan's first step may be walked without launches to collect its
 * kernels into one program (CLBOUND_PLAN_PROGRAMS=off turns it off). */
int clb__graph_can_collect(clb_graph_t g);

/* fuse.c */
/* 0 when CLBOUND_FUSE=off: every op runs its own kernels. */
int clb__graph_fusion_on(void);
/* The SGD step of n parameters (velocities may be NULL) with the graph's lr and
 * momentum, in one launch per dtype run of at most 16 parameters. */
clb_status clb__graph_fused_sgd(clb_graph_t g, int n, clb_tensor_t *p, clb_tensor_t *grads, clb_tensor_t *vel);
/* Finds the elementwise groups of the graph (once per node count): chains of
 * unary, binary and cast nodes whose dims the symbol engine proves equal (or
 * broadcast), each intermediate read by its successor alone. */
clb_status clb__graph_fuse_find(clb_graph_t g);
/* Runs the group whose last member is node `last` as one kernel. */
clb_status clb__graph_fused_run(clb_graph_t g, int last);
/* Runs the linear node whose epilogue is activation node a, writing a's output. */
clb_status clb__graph_fused_linear(clb_graph_t g, int a);
/* Cast node c with its nonzero (fuse_cast): nonzero writing c's dtype. */
clb_status clb__graph_fused_cast(clb_graph_t g, int c);
/* At the loss's activation node p (g->fuse_loss_pred): 1 when this step runs it
 * inside the loss's kernel (set g->loss_fused_now), else 0. */
int clb__graph_loss_fuses_now(clb_graph_t g, int p);
/* The loss and its activation, with d loss / d (the activation's input), as one
 * kernel (runtime/ops/loss.c, clb__loss_fused). */
clb_status clb__graph_fused_loss(clb_graph_t g);

#endif /* CLB_GRAPH_INTERNAL_H */
