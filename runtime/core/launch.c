/* launch.c: kernel launches with fixed geometry, recorded for error messages. */
#include <stdio.h>
#include <string.h>

#include "runtime/core/core.h"

size_t clb__groups_for(clb_context_t ctx, int64_t n) {
  if (n <= 0) return 1;
  uint64_t g = ((uint64_t)n + ctx->local_size - 1) / ctx->local_size;
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

clb_status clb__launch(clb_context_t ctx, const char *op, const char *what, cl_kernel k,
                       const clb_arg *args, int nargs, int id_arg, size_t groups,
                       size_t local) {
  if (ctx->collect) return CLB_OK; /* walking a plan to collect its kernels */
  uint32_t id = ctx->next_launch_id++;
  if (id == 0) id = ctx->next_launch_id++;
  clb_launch_rec *r = &ctx->ring[id % CLB_LAUNCH_RING];
  r->id = id;
  r->op = op;
  /* the launches of one op invocation share the outputs it noted */
  r->seq = ctx->out_op && op && strcmp(ctx->out_op, op) == 0 ? ctx->op_seq : 0;
  ctx->out_launched = 1;
  snprintf(r->what, sizeof r->what, "%s", what ? what : "");
  for (int i = 0; i < nargs; i++) {
    cl_uint idv = id;
    cl_int e = i == id_arg ? clSetKernelArg(k, (cl_uint)i, sizeof idv, &idv)
                           : clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].value);
    if (e != CL_SUCCESS) return clb__cl_error(ctx, e, "%s: setting kernel argument %d", op, i);
  }
  size_t global = groups * local;
  cl_int e = clEnqueueNDRangeKernel(ctx->queue, k, 1, NULL, &global, &local, 0, NULL, NULL);
  if (e != CL_SUCCESS)
    return clb__cl_error(ctx, e, "%s %s: launching %zu work-groups of %zu", op, what ? what : "", groups, local);
  ctx->counters.kernel_launches++;
  return CLB_OK;
}
