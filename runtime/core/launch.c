/* launch.c: the launch geometry of a context (CLBOUND_GEOMETRY), and kernel
 * launches with fixed geometry, recorded for error messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/core.h"

/* Reads "<preset>,key=value,..." (docs/portability.md): preset gpu or cpu, keys
 * local, per_cu and cu. Unknown text is an error, so a typo never
 * silently tests the device's own geometry. */
static clb_status parse_geometry(const char *env, clb_geometry *g) {
  const char *p = env;
  while (*p) {
    size_t n = strcspn(p, ",");
    char item[64];
    if (n >= sizeof item) n = sizeof item - 1;
    memcpy(item, p, n);
    item[n] = 0;
    char *eq = strchr(item, '=');
    if (strcmp(item, "gpu") == 0 || strcmp(item, "cpu") == 0) {
      int gpu = item[0] == 'g';
      g->style = gpu ? CLB_KERNEL_STYLE_GPU : CLB_KERNEL_STYLE_CPU;
      g->local = gpu ? 256 : 64;
      g->per_cu = gpu ? 16 : 8;
    } else if (eq) {
      *eq = 0;
      char *end = NULL;
      unsigned long long v = strtoull(eq + 1, &end, 10);
      if (!end || *end || end == eq + 1 || v == 0 || v > (1u << 20)) goto bad;
      if (strcmp(item, "local") == 0) g->local = (size_t)v;
      else if (strcmp(item, "per_cu") == 0) g->per_cu = (size_t)v;
      else if (strcmp(item, "cu") == 0) g->cu = (uint32_t)v;
      else goto bad;
    } else if (n) {
      goto bad;
    }
    p += n;
    while (*p == ',') p++;
  }
  return CLB_OK;
bad:
  return clb__set_error(NULL, CLB_ERR_INVALID_ARG,
                        "CLBOUND_GEOMETRY=\"%s\": expected gpu or cpu, then local=N, per_cu=N, cu=N "
                        "(comma-separated, N > 0)", env);
}

clb_status clb__geometry_init(clb_context_t ctx, clb_kernel_style style) {
  clb_geometry g = {CLB_KERNEL_STYLE_AUTO, ctx->info.is_cpu ? 64 : 256, ctx->info.is_cpu ? 8 : 16, 0};
  const char *env = getenv("CLBOUND_GEOMETRY");
  if (env && *env) {
    clb_status st = parse_geometry(env, &g);
    if (st != CLB_OK) return st;
  }
  if (g.cu) ctx->info.compute_units = g.cu; /* as if the device had that many */
  if (style == CLB_KERNEL_STYLE_AUTO) style = g.style;
  if (style == CLB_KERNEL_STYLE_AUTO) style = ctx->info.is_cpu ? CLB_KERNEL_STYLE_CPU : CLB_KERNEL_STYLE_GPU;
  ctx->style = style;
  size_t local = g.local;
  if (local > ctx->info.max_work_group_size) local = ctx->info.max_work_group_size;
  size_t pow2 = 1; /* reductions use a tree over the work-group: keep it a power of two */
  while (pow2 * 2 <= local) pow2 *= 2;
  ctx->local_size = pow2;
  uint32_t cu = ctx->info.compute_units ? ctx->info.compute_units : 1;
  ctx->max_groups = (size_t)cu * g.per_cu;
  ctx->kernel_wg_limit = 0;
  ctx->select_single = -1;
  const char *single = getenv("CLBOUND_SELECT_SINGLE");
  if (single && *single) {
    if (strcmp(single, "on") == 0) ctx->select_single = 1;
    else if (strcmp(single, "off") == 0) ctx->select_single = 0;
    else if (strcmp(single, "auto") != 0)
      return clb__set_error(NULL, CLB_ERR_INVALID_ARG, "CLBOUND_SELECT_SINGLE=\"%s\": expected auto, on or off", single);
  }
  const char *lim = getenv("CLBOUND_TEST_KERNEL_WG_LIMIT");
  if (lim && *lim) {
    char *end = NULL;
    unsigned long long v = strtoull(lim, &end, 10);
    if (!end || *end || v == 0 || v > (1u << 20))
      return clb__set_error(NULL, CLB_ERR_INVALID_ARG,
                            "CLBOUND_TEST_KERNEL_WG_LIMIT=\"%s\": expected a number of work-items, 1 to %u", lim,
                            1u << 20);
    ctx->kernel_wg_limit = (size_t)v;
  }
  return CLB_OK;
}

size_t clb__groups_for(clb_context_t ctx, int64_t n) {
  return clb__groups_local(ctx, n, ctx->local_size);
}

size_t clb__groups_local(clb_context_t ctx, int64_t n, size_t local) {
  if (n <= 0) return 1;
  if (local == 0) local = 1;
  uint64_t g = ((uint64_t)n + local - 1) / local;
  if (g > ctx->max_groups) g = ctx->max_groups;
  return g ? (size_t)g : 1;
}

const char *clb__tensor_desc(clb_tensor_t t, char *buf, size_t len) {
  size_t used = 0;
  used += (size_t)snprintf(buf + used, len - used, "[");
  for (int d = 0; d < t->rank && used < len; d++)
    used += (size_t)snprintf(buf + used, len - used, "%s%s%lld", d ? ", " : "", t->dyn[d] ? "<=" : "",
                             (long long)t->bound[d]);
  if (used < len) snprintf(buf + used, len - used, "] %s", clb_dtype_name(t->dtype));
  return buf;
}

uint32_t clb__launch_record(clb_context_t ctx, const char *op, const char *what) {
  uint32_t id = ctx->next_launch_id++;
  if (id == 0) id = ctx->next_launch_id++;
  clb_launch_rec *r = &ctx->ring[id % CLB_LAUNCH_RING];
  r->id = id;
  r->op = op;
  /* the launches of one op invocation share the outputs it noted */
  r->seq = ctx->out_op && op && strcmp(ctx->out_op, op) == 0 ? ctx->op_seq : 0;
  ctx->out_launched = 1;
  snprintf(r->what, sizeof r->what, "%s", what ? what : "");
  return id;
}

clb_status clb__launch(clb_context_t ctx, const char *op, const char *what, cl_kernel k,
                       const clb_arg *args, int nargs, int id_arg, size_t groups,
                       size_t local) {
  if (ctx->collect) return CLB_OK; /* walking a plan to collect its kernels */
  uint32_t id = clb__launch_record(ctx, op, what);
  for (int i = 0; i < nargs; i++) {
    cl_uint idv = id;
    cl_int e = i == id_arg ? clSetKernelArg(k, (cl_uint)i, sizeof idv, &idv)
                           : clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].value);
    if (e != CL_SUCCESS) return clb__cl_error(ctx, e, "%s: setting kernel argument %d", op, i);
  }
  size_t global = groups * local;
  if (ctx->kernel_wg_limit && local > ctx->kernel_wg_limit) /* what a driver with that limit answers */
    return clb__cl_error(ctx, CL_INVALID_WORK_GROUP_SIZE,
                         "%s %s: launching %zu work-groups of %zu (CLBOUND_TEST_KERNEL_WG_LIMIT=%zu)", op,
                         what ? what : "", groups, local, ctx->kernel_wg_limit);
  cl_int e = clEnqueueNDRangeKernel(ctx->queue, k, 1, NULL, &global, &local, 0, NULL, NULL);
  if (e != CL_SUCCESS)
    return clb__cl_error(ctx, e, "%s %s: launching %zu work-groups of %zu", op, what ? what : "", groups, local);
  ctx->counters.kernel_launches++;
  return CLB_OK;
}
