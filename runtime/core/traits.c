/* traits.c: the device traits a context decides once (forward progress across
 * work-groups), and the switches that force the select ops' one-pass path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/core.h"

/* Reads CLBOUND_TEST_SELECT_LOOKBACK (docs/portability.md): comma-separated
 * reverse | interleave | agg-only | unstaged | spin=N | epochs=N, turned into the
 * look-back kernel's test defines in ctx->select_lb_test (window=1|2|32: the
 * status words a look-back reads at once); items=4|8|16, the
 * elements per work-item of a tile (ctx->select_lb_items); and progress, which
 * gives the device the trait forward progress (the path NVIDIA takes, on any
 * device). */
static int parse_lb_test(clb_context_t ctx, const char *env) {
  char *out = ctx->select_lb_test;
  size_t cap = sizeof ctx->select_lb_test, used = 0;
  out[0] = 0;
  const char *p = env;
  while (*p) {
    size_t n = strcspn(p, ",");
    char item[32];
    if (n >= sizeof item) goto bad;
    memcpy(item, p, n);
    item[n] = 0;
    char def[48] = "";
    if (strcmp(item, "reverse") == 0) snprintf(def, sizeof def, " -D SEL_LB_REVERSE");
    else if (strcmp(item, "interleave") == 0) snprintf(def, sizeof def, " -D SEL_LB_INTERLEAVE");
    else if (strcmp(item, "agg-only") == 0) snprintf(def, sizeof def, " -D SEL_LB_AGG_ONLY");
    else if (strcmp(item, "unstaged") == 0) snprintf(def, sizeof def, " -D SEL_LB_UNSTAGED");
    else if (strcmp(item, "items=4") == 0 || strcmp(item, "items=8") == 0 || strcmp(item, "items=16") == 0)
      ctx->select_lb_items = atoi(item + 6);
    else if (strcmp(item, "progress") == 0) {
      ctx->traits.forward_progress = 1;
      ctx->traits.forward_progress_why = "CLBOUND_TEST_SELECT_LOOKBACK=progress (testing)";
    } else if (strcmp(item, "window=1") == 0 || strcmp(item, "window=2") == 0 || strcmp(item, "window=32") == 0)
      snprintf(def, sizeof def, " -D SEL_LB_WINDOW=%s", item + 7);
    else if (strncmp(item, "spin=", 5) == 0 || strncmp(item, "epochs=", 7) == 0) {
      int spin = item[0] == 's';
      const char *v = item + (spin ? 5 : 7);
      char *end = NULL;
      unsigned long long x = strtoull(v, &end, 10);
      if (!end || *end || end == v || x > (spin ? 1000000ull : 4194303ull) || (!spin && x == 0)) goto bad;
      snprintf(def, sizeof def, spin ? " -D SEL_LB_SPIN=%llu" : " -D SEL_LB_EPOCHS=%lluL", x);
    } else if (n) {
      goto bad;
    }
    size_t dl = strlen(def);
    if (used + dl + 1 > cap) goto bad;
    memcpy(out + used, def, dl + 1);
    used += dl;
    p += n;
    while (*p == ',') p++;
  }
  return 1;
bad:
  out[0] = 0;
  return 0;
}

clb_status clb__traits_init(clb_context_t ctx) {
  const clb_device_info *d = &ctx->info;
  /* Forward progress: OpenCL promises none between work-groups. NVIDIA's
   * driver runs OpenCL on CUDA, where a thread block that has started stays
   * resident until it ends (CUB's and PyTorch's single-pass scans rely on it).
   * Elsewhere it is not known: PoCL, Oclgrind and other CPU drivers run groups
   * as tasks (in order, or on a thread pool), other GPUs are untested. */
  int nvidia = d->is_gpu && (clb__contains_ci(d->vendor, "nvidia") || clb__contains_ci(d->platform_name, "nvidia"));
  ctx->traits.forward_progress = nvidia;
  ctx->traits.forward_progress_why =
      nvidia ? "guessed from the vendor: NVIDIA runs OpenCL on CUDA, where a started thread block stays resident"
             : "not known for this device: OpenCL does not promise it";
  ctx->select_lookback = (int)clb__env_int(CLB_ENV_SELECT_LOOKBACK); /* -1: auto */
  ctx->select_lb_items = 0; /* runtime/ops/select.c's default */
  const char *test = clb__env_text(CLB_ENV_TEST_SELECT_LOOKBACK);
  if (test && !parse_lb_test(ctx, test)) clb__env_warn(CLB_ENV_TEST_SELECT_LOOKBACK, test, "ticket order");
  const char *path;
  if (ctx->style == CLB_KERNEL_STYLE_CPU)
    path = "the CPU kernel style has no one-pass select: one launch below the crossover, three above";
  else if (!d->has_int64_atomics)
    path = "no cl_khr_int64_base_atomics: the select ops keep one launch below the crossover, three above";
  else if (ctx->select_lookback == 1)
    path = "CLBOUND_SELECT_LOOKBACK=on: the select ops run in one pass with decoupled look-back";
  else if (ctx->select_lookback == 0)
    path = "CLBOUND_SELECT_LOOKBACK=off: the select ops keep one launch below the crossover, three above";
  else if (ctx->select_single >= 0)
    path = "CLBOUND_SELECT_SINGLE is set: the select ops take the path it forces";
  else if (ctx->traits.forward_progress)
    path = "the select ops run in one pass with decoupled look-back above one tile, in one launch of sel_single "
           "within one";
  else
    path = "the select ops keep one launch below the crossover, three above (CLBOUND_SELECT_LOOKBACK=on forces "
           "the one pass)";
  clb__log(ctx, CLB_LOG_DEVICE, "%s: forward progress across work-groups: %s (%s); %s", d->name,
           ctx->traits.forward_progress ? "yes" : "no", ctx->traits.forward_progress_why, path);
  return CLB_OK;
}
