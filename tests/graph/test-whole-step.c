/* test-whole-step.c: the whole-step path of a graph (one program per plan,
 * generated kernels) against the same graphs run op by op (CLBOUND_FUSE=off,
 * CLBOUND_PLAN_PROGRAMS=off): the same losses on both workloads under every
 * policy, and the program, kernel and launch counts of a cold start (counts,
 * not times). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/workloads.h"
#include "clbound/clbound.h"
#include "cl-test.h"

static int run(demo_workload w, clb_policy_kind p, int iters, int whole, demo_result *r) {
  setenv("CLBOUND_FUSE", whole ? "on" : "off", 1);
  setenv("CLBOUND_PLAN_PROGRAMS", whole ? "on" : "off", 1);
  demo_config cfg = {w, p, iters, -1, 0, 0, 0, NULL};
  char err[1024];
  int rc = demo_run(&cfg, r, err, sizeof err);
  if (rc) fprintf(stderr, "%s under %s (%s): %s\n", demo_workload_name(w), demo_policy_name(p), whole ? "whole-step" : "op by op", err);
  return rc;
}

/* Losses of the whole-step path within 1e-6 relative of the op-by-op path;
 * the policies' promises hold on both. */
static void test_same_losses(void) {
  static const clb_policy_kind pols[4] = {CLB_POLICY_DYNAMIC, CLB_POLICY_AUTOMATIC, CLB_POLICY_STATIC, CLB_POLICY_BUCKETED};
  for (int w = 0; w < DEMO_WORKLOAD_COUNT; w++)
    for (int k = 0; k < 4; k++) {
      int iters = w == DEMO_XLA_MLP ? 8 : 2;
      demo_result a, b;
      int ra = run((demo_workload)w, pols[k], iters, 1, &a), rb = run((demo_workload)w, pols[k], iters, 0, &b);
      EXPECT_EQ_I(ra, 0);
      EXPECT_EQ_I(rb, 0);
      if (!ra && !rb) {
        for (int i = 0; i < iters; i++) {
          double rel = fabs((double)a.losses[i] - (double)b.losses[i]) / fmax(fabs((double)b.losses[i]), 1e-6);
          clb_test_checks++;
          if (!(rel <= 1e-6))
            CLB_FAIL_AT("%s %s: loss %d: whole-step %.9g vs op by op %.9g (rel %.3g)", demo_workload_name((demo_workload)w),
                        demo_policy_name(pols[k]), i, a.losses[i], b.losses[i], rel);
        }
        EXPECT_EQ_I(a.plans_compiled, b.plans_compiled);
        EXPECT_EQ_I(a.host_syncs, b.host_syncs);
        if (pols[k] == CLB_POLICY_DYNAMIC) {
          EXPECT_EQ_I(a.plans_compiled, 1);
          EXPECT_EQ_I(a.host_syncs, 0);
          EXPECT_EQ_I(a.builds_after_first, 0);
        }
      }
      if (!ra) demo_result_free(&a);
      if (!rb) demo_result_free(&b);
    }
}

/* A cold start under the dynamic policy with the persistent cache off: every
 * kernel of the plan comes from one program built once; the SGD steps of all
 * parameters are one launch, elementwise chains and the loss with its
 * activation too. Counts against the op-by-op path of the same run. */
static void test_cold_counts(void) {
  /* the device's kernel style (CLBOUND_GEOMETRY forces one): its select and
   * GEMM kernels differ in what fusion saves (below) */
  clb_context_t probe = clb_test_context(NULL); /* skips (77) without a device */
  const int gpu_style = clb_context_kernel_style(probe) == CLB_KERNEL_STYLE_GPU;
  clb_context_free(probe);
  for (int w = 0; w < DEMO_WORKLOAD_COUNT; w++) {
    const int params = w == DEMO_XLA_MLP ? 4 : 6; /* a weight and a bias per layer */
    demo_result a, b;
    int ra = run((demo_workload)w, CLB_POLICY_DYNAMIC, 3, 1, &a), rb = run((demo_workload)w, CLB_POLICY_DYNAMIC, 3, 0, &b);
    EXPECT_EQ_I(ra, 0);
    EXPECT_EQ_I(rb, 0);
    if (!ra && !rb) {
      EXPECT_EQ_I(a.program_builds, 1);
      EXPECT_EQ_I(a.programs_built, 1);
      /* a program per kernel file and options: 7 for wide-mlp where dbias is summed
       * in dW's host-BLAS kernel (no reduction program) and its reshapes launch
       * nothing (no view program), 8 without host BLAS */
      EXPECT_TRUE(b.programs_built >= 7);
      /* xla-mlp: the target's f32 cast and remainder are one group, and the
       * features' cast is written by their nonzero (no cast kernel); wide-mlp
       * has no elementwise chain and no cast */
      const uint64_t groups = w == DEMO_XLA_MLP ? 1 : 0, grouped = w == DEMO_XLA_MLP ? 2 : 0;
      EXPECT_EQ_I(a.fused_groups, groups);
      EXPECT_EQ_I(a.fused_nodes, grouped);
      EXPECT_EQ_I(b.fused_groups, 0);
      /* the sigmoid, the loss's two stages and the sigmoid's gradient: one kernel */
      EXPECT_EQ_I(a.fused_losses, 1);
      EXPECT_EQ_I(b.fused_losses, 0);
      /* each hidden layer's ReLU: the GEMM's epilogue (its elementwise kernel goes) */
      const uint64_t epilogues = w == DEMO_XLA_MLP ? 1 : 2;
      EXPECT_EQ_I(a.fused_epilogues, epilogues);
      /* each hidden layer's ReLU backward: in the backward of the linear layer
       * above it; under host BLAS in its native kernel (the relu_backward
       * kernel goes), else a launch of its own after the product */
      EXPECT_EQ_I(a.fused_backward_relus, epilogues);
      EXPECT_EQ_I(b.fused_backward_relus, 0);
      const int hb = a.gemm_strategy == CLB_GEMM_HOST_BLAS;
      const uint64_t bwd_relus = hb ? epilogues : 0;
      const uint64_t casts = w == DEMO_XLA_MLP ? 1 : 0;
      EXPECT_EQ_I(a.fused_casts, casts);
      EXPECT_EQ_I(b.fused_casts, 0);
      /* under host BLAS the SGD steps, each ReLU's backward and the bias
       * gradients' sums are in the backward's native kernels: no SGD, relu_backward
       * or reduction kernel. In the GPU style every select is one flat kernel
       * (RANK=0), so xla-mlp's two nonzeros share one op by op, and the cast
       * that the features' nonzero writes in the whole step makes it a second:
       * the cast kernel's saving is spent there (counts seen on an NVIDIA H200,
       * and on PoCL with CLBOUND_GEOMETRY=gpu under each GEMM strategy). */
      const uint64_t cast_kernels = gpu_style ? 0 : casts;
      EXPECT_EQ_I(a.kernels_compiled, b.kernels_compiled - 3 - (hb ? 3 : 0) - cast_kernels);
      /* under host BLAS native kernels run up to 4 products: the forward's
       * in one, the backward's (xla-mlp 3 in one, wide-mlp 5 in two), the last
       * with the SGD steps */
      const uint64_t layers = w == DEMO_XLA_MLP ? 2 : 3, bwd_products = 2 * (layers - 1) + 1;
      const uint64_t merged = hb ? (layers - 1) + (layers - (bwd_products + 3) / 4) + 1 : 0;
      EXPECT_EQ_I(a.launches_per_step,
                  b.launches_per_step - (params - 1) - (grouped - groups) - 3 - epilogues - bwd_relus - casts - merged);
      EXPECT_EQ_I(a.steps_replayed, 0);
      /* each kernel compiled is launched, at one local size, and first in the
       * first step (a driver that compiles per local size compiles each once,
       * before the first step ends), under either path */
      EXPECT_EQ_I(a.first_launches, a.kernels_compiled);
      EXPECT_EQ_I(b.first_launches, b.kernels_compiled);
      EXPECT_EQ_I(a.first_launches_after_first, 0);
      EXPECT_EQ_I(b.first_launches_after_first, 0);
      if (clb_test_failures)
        fprintf(stderr, "%s: whole-step: %llu programs, %llu kernels, %llu launches per step; op by op: %llu, %llu, %llu\n",
                demo_workload_name((demo_workload)w), (unsigned long long)a.programs_built,
                (unsigned long long)a.kernels_compiled, (unsigned long long)a.launches_per_step,
                (unsigned long long)b.programs_built, (unsigned long long)b.kernels_compiled,
                (unsigned long long)b.launches_per_step);
    }
    if (!ra) demo_result_free(&a);
    if (!rb) demo_result_free(&b);
  }
}

int main(void) {
  setenv("CLBOUND_CACHE_DIR", "off", 1);
  test_cold_counts();
  test_same_losses();
  return clb_test_finish("graph/whole-step");
}
