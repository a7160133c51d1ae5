/* whole-step.c: what makes a plan's step one unit: whether its first step can be
 * walked without launching to build all its kernels as one program
 * (runtime/cache/plan-program.c). */
#include <stdlib.h>
#include <string.h>

#include "runtime/graph/graph.h"

int clb__graph_can_collect(clb_graph_t g) {
  if (!clb__env_int(CLB_ENV_PLAN_PROGRAMS)) return 0;
  /* static and bucketed plans read counts back while the step runs, and the
   * sync-exact matmul reads sizes: a walk without launches would read nothing */
  if (g->policy_kind != CLB_POLICY_DYNAMIC && g->policy_kind != CLB_POLICY_AUTOMATIC) return 0;
  return g->ctx->gemm_strategy != CLB_GEMM_SYNC_EXACT;
}
