/* sync.c: host syncs and the device status word: a sync finishes the queue, and
 * a sticky bit raised by a kernel becomes a status and a message naming the op. */
#include <stdio.h>

#include "runtime/core/core.h"

static const cl_int zero_status[CLB_STATUS_INTS] = {0};

static int64_t join64(cl_int lo, cl_int hi) {
  return (int64_t)(((uint64_t)(uint32_t)hi << 32) | (uint32_t)lo);
}

/* Turns a raised status word into a status and a message, and clears it. */
static clb_status decode_status(clb_context_t ctx, const cl_int *w) {
  uint32_t flags = (uint32_t)w[0], id = (uint32_t)w[1], bit = (uint32_t)w[2];
  int64_t v1 = join64(w[3], w[4]), v2 = join64(w[5], w[6]);
  const clb_launch_rec *r = &ctx->ring[id % CLB_LAUNCH_RING];
  char who[256];
  if (r->id == id && r->op)
    snprintf(who, sizeof who, "%s %s", r->op, r->what);
  else
    snprintf(who, sizeof who, "launch #%u", id);
  clb_status st;
  switch (bit) {
  case CLB_STF_BOUND_EXCEEDED:
    st = clb__set_error(ctx, CLB_ERR_BOUND_EXCEEDED, "%s: size %lld exceeds its bound %lld; the output holds the first %lld",
                        who, (long long)v1, (long long)v2, (long long)v2);
    break;
  case CLB_STF_INDEX_RANGE:
    st = clb__set_error(ctx, CLB_ERR_BOUND_EXCEEDED, "%s: index %lld is outside [0, %lld); its row adds nothing", who,
                        (long long)v1, (long long)v2);
    break;
  case CLB_STF_DEVICE_CHECK:
    st = clb__set_error(ctx, CLB_ERR_DEVICE_CHECK, "%s: deferred check failed on the device: sizes %lld and %lld must be equal",
                        who, (long long)v1, (long long)v2);
    break;
  case CLB_STF_SHORT_SOURCE:
    st = clb__set_error(ctx, CLB_ERR_SHORT_SOURCE, "%s: the mask selects %lld elements but the source has only %lld",
                        who, (long long)v1, (long long)v2);
    break;
  case CLB_STF_DIV_ZERO:
    st = clb__set_error(ctx, CLB_ERR_DIV_ZERO, "%s: integer division by zero", who);
    break;
  case CLB_STF_EMPTY_REDUCE:
    st = clb__set_error(ctx, CLB_ERR_EMPTY_REDUCE, "%s: max of an empty extent has no value", who);
    break;
  default:
    st = clb__set_error(ctx, CLB_ERR_INTERNAL, "%s: unknown device status bit 0x%x", who, bit);
  }
  if (flags & ~bit) clb__append_error(ctx, " (other device errors since the last sync: flags 0x%x)", flags & ~bit);
  return st;
}

cl_int clb__status_clear(clb_context_t ctx) {
  return clEnqueueWriteBuffer(ctx->queue, ctx->status, CL_TRUE, 0, sizeof zero_status, zero_status, 0, NULL, NULL);
}

clb_status clb__sync(clb_context_t ctx, const char *why) {
  cl_int w[CLB_STATUS_INTS];
  ctx->counters.host_syncs++;
  clb__log(ctx, CLB_LOG_SYNCS, "host sync #%llu: %s", (unsigned long long)ctx->counters.host_syncs, why);
  cl_int e = clEnqueueReadBuffer(ctx->queue, ctx->status, CL_TRUE, 0, sizeof w, w, 0, NULL, NULL);
  if (e != CL_SUCCESS) return clb__cl_error(ctx, e, "%s: waiting for the device", why);
  clb__staging_reap(ctx, 1); /* the in-order queue is done with every earlier write */
  if (w[0] == 0) return CLB_OK;
  e = clb__status_clear(ctx);
  if (e != CL_SUCCESS) return clb__cl_error(ctx, e, "%s: clearing the status word", why);
  return decode_status(ctx, w);
}

clb_status clb_context_sync(clb_context_t ctx) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "clb_context_sync: ctx is NULL");
  return clb__sync(ctx, "clb_context_sync");
}
