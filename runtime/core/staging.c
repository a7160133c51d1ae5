/* staging.c: host writes from staging copies, freed once written: found at the
 * next write (by polling the write's event) or host sync, with no event
 * callbacks (their delivery is the least uniform part of vendor drivers).
 * A borrowed write (clb__write_borrowed) has no copy: the device reads the
 * caller's memory, and the caller's release function runs where a copy would
 * be freed. */
#include <stdlib.h>
#include <string.h>

#include "runtime/core/core.h"

/* A staging copy (or a borrowed region and its release) and the event of its write. */
struct clb__staging {
  void *copy; /* the staging copy; a borrowed write's memory (the caller's) */
  size_t bytes;
  cl_event ev;
  void (*release)(void *); /* a borrowed write's: called instead of free(copy) */
  void *release_arg;
};

/* Makes room for one more entry. */
static clb_status staging_slot(clb_context_t ctx, const char *op) {
  if (ctx->n_staging < ctx->cap_staging) return CLB_OK;
  size_t ncap = ctx->cap_staging ? 2 * ctx->cap_staging : 16;
  struct clb__staging *n = realloc(ctx->staging, ncap * sizeof *n);
  if (!n) return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: staging list of %zu writes", op, ncap);
  ctx->staging = n;
  ctx->cap_staging = ncap;
  return CLB_OK;
}

void clb__staging_reap(clb_context_t ctx, int all) {
  size_t done = 0;
  for (; done < ctx->n_staging; done++) {
    struct clb__staging *s = &ctx->staging[done];
    cl_int state = CL_QUEUED;
    if (!all && clGetEventInfo(s->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, NULL) != CL_SUCCESS)
      clWaitForEvents(1, &s->ev); /* cannot tell: wait for it */
    else if (!all && state > CL_COMPLETE) /* queued, submitted or running (an error is < 0: done) */
      break; /* the queue is in order: the later ones are not done either */
    clReleaseEvent(s->ev);
    if (s->release) {
      s->release(s->release_arg);
    } else {
      free(s->copy);
      ctx->staging_bytes -= s->bytes;
    }
  }
  ctx->n_staging -= done;
  memmove(ctx->staging, ctx->staging + done, ctx->n_staging * sizeof *ctx->staging);
  if (all && !ctx->n_staging) {
    free(ctx->staging);
    ctx->staging = NULL;
    ctx->cap_staging = 0;
  }
}

void clb__staging_wait(clb_context_t ctx, void (*release)(void *), void *release_arg) {
  size_t last = ctx->n_staging;
  for (size_t i = 0; i < ctx->n_staging; i++)
    if (ctx->staging[i].release == release && ctx->staging[i].release_arg == release_arg) last = i;
  if (last == ctx->n_staging) return;
  if (clWaitForEvents(1, &ctx->staging[last].ev) == CL_SUCCESS) { /* in order: the earlier ones are done too */
    clb__staging_reap(ctx, 0);
    return;
  }
  clFinish(ctx->queue); /* the event cannot say: the queue's end does */
  clb__staging_reap(ctx, 1);
}

/* Enqueues the non-blocking write of s.bytes from s.copy (the staging copy, or
 * the borrowed memory) into mem at offset, and keeps s, with its event, for
 * clb__staging_reap; a slot must be free (staging_slot). */
static clb_status enqueue(clb_context_t ctx, const char *op, cl_mem mem, size_t offset, struct clb__staging s) {
  cl_int e = clEnqueueWriteBuffer(ctx->queue, mem, CL_FALSE, offset, s.bytes, s.copy, 0, NULL, &s.ev);
  if (e != CL_SUCCESS) return clb__cl_error(ctx, e, "%s: writing %zu bytes to the device", op, s.bytes);
  ctx->staging[ctx->n_staging++] = s;
  ctx->counters.bytes_to_device += s.bytes;
  ctx->counters.host_writes++;
  return CLB_OK;
}

clb_status clb__write_async(clb_context_t ctx, const char *op, cl_mem mem, size_t offset,
                            const void *host, size_t bytes) {
  if (bytes == 0) return CLB_OK;
  clb_status hs = clb__launch_host(ctx, op, mem);
  if (hs != CLB_OK) return hs;
  clb__staging_reap(ctx, 0);
  while (ctx->n_staging && ctx->staging_bytes + bytes > CLB_STAGING_MAX_BYTES) {
    clWaitForEvents(1, &ctx->staging[0].ev); /* bounded: wait for the oldest write */
    clb__staging_reap(ctx, 0);
  }
  clb_status st = staging_slot(ctx, op);
  if (st != CLB_OK) return st;
  void *copy = malloc(bytes);
  if (!copy) return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: staging %zu bytes", op, bytes);
  memcpy(copy, host, bytes);
  st = enqueue(ctx, op, mem, offset, (struct clb__staging){copy, bytes, NULL, NULL, NULL});
  if (st != CLB_OK) {
    free(copy);
    return st;
  }
  ctx->staging_bytes += bytes;
  return CLB_OK;
}

clb_status clb__write_borrowed(clb_context_t ctx, const char *op, cl_mem mem, size_t offset, const void *host,
                               size_t bytes, void (*release)(void *), void *release_arg) {
  clb_status st = bytes ? clb__launch_host(ctx, op, mem) : CLB_OK;
  if (st == CLB_OK && bytes) {
    clb__staging_reap(ctx, 0);
    st = staging_slot(ctx, op);
  }
  if (st != CLB_OK || !bytes) {
    release(release_arg);
    return st;
  }
  st = enqueue(ctx, op, mem, offset, (struct clb__staging){(void *)host, bytes, NULL, release, release_arg});
  if (st != CLB_OK) release(release_arg);
  return st;
}
