/* sync.c: host syncs and the device status word: a sync finishes the queue, and
 * a sticky bit raised by a kernel becomes a status and a message naming the op. */
#include <sched.h> /* sched_yield */
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>

#include "runtime/core/core.h"

static const cl_int zero_status[CLB_STATUS_INTS] = {0};

static int64_t join64(cl_int lo, cl_int hi) {
  return (int64_t)(((uint64_t)(uint32_t)hi << 32) | (uint32_t)lo);
}

/* Marks the tensors written by the op invocation `seq` failed with st and msg. */
static void mark_failed(clb_context_t ctx, uint64_t seq, clb_status st, const char *msg) {
  if (!seq) return;
  for (clb_tensor_t t = ctx->tensors; t; t = t->next) {
    if (t->written_by != seq || t->failed) continue;
    size_t n = strlen(msg) + 1;
    t->failed_msg = malloc(n);
    if (t->failed_msg) memcpy(t->failed_msg, msg, n);
    t->failed = st;
  }
}

/* Describes one failing launch (a slot of the status buffer) into msg. */
static clb_status describe(clb_context_t ctx, const cl_int *slot, char *msg, size_t cap) {
  uint32_t id = (uint32_t)slot[0], bit = (uint32_t)slot[1];
  int64_t v1 = join64(slot[2], slot[3]), v2 = join64(slot[4], slot[5]);
  const clb_launch_rec *r = &ctx->ring[id % CLB_LAUNCH_RING];
  char who[256];
  if (r->id == id && r->op)
    snprintf(who, sizeof who, "%s %s", r->op, r->what);
  else
    snprintf(who, sizeof who, "launch #%u", id);
  long long a = (long long)v1, b = (long long)v2;
  switch (bit) {
  case CLB_STF_BOUND_EXCEEDED:
    snprintf(msg, cap, "%s: size %lld exceeds its bound %lld; the output holds the first %lld", who, a, b, b);
    return CLB_ERR_BOUND_EXCEEDED;
  case CLB_STF_INDEX_RANGE:
    snprintf(msg, cap, "%s: index %lld is outside [0, %lld); its row adds nothing", who, a, b);
    return CLB_ERR_BOUND_EXCEEDED;
  case CLB_STF_INDEX_OUT: /* kernels/view.cl: the dim in the top byte of v2 */
    snprintf(msg, cap, "%s: index %lld is out of range for dim %lld of actual size %lld", who, a, b >> 56,
             b & (((long long)1 << 56) - 1));
    return CLB_ERR_INDEX;
  case CLB_STF_ASSERT: /* clb_assert: its message is in the launch's description */
    snprintf(msg, cap, "%s: assertion failed on the device: element %lld of %lld is false", who, a, b);
    return CLB_ERR_DEVICE_CHECK;
  case CLB_STF_DEVICE_CHECK:
    snprintf(msg, cap, "%s: deferred check failed on the device: sizes %lld and %lld must be equal", who, a, b);
    return CLB_ERR_DEVICE_CHECK;
  case CLB_STF_SHORT_SOURCE:
    snprintf(msg, cap, "%s: the mask selects %lld elements but the source has only %lld", who, a, b);
    return CLB_ERR_SHORT_SOURCE;
  case CLB_STF_DIV_ZERO:
    snprintf(msg, cap, "%s: integer division by zero", who);
    return CLB_ERR_DIV_ZERO;
  case CLB_STF_EMPTY_REDUCE:
    snprintf(msg, cap, "%s: max of an empty extent has no value", who);
    return CLB_ERR_EMPTY_REDUCE;
  default:
    snprintf(msg, cap, "%s: unknown device status bit 0x%x", who, bit);
    return CLB_ERR_INTERNAL;
  }
}

/* Turns a raised status buffer into a status and a message naming every failing
 * launch (the first one's status is returned), and marks each failing op's
 * outputs failed. */
static clb_status decode_status(clb_context_t ctx, const cl_int *w) {
  uint32_t flags = (uint32_t)w[0], named = 0;
  clb_status first = CLB_OK;
  int n = 0;
  for (int k = 0; k < CLB_STATUS_SLOTS; k++) {
    const cl_int *slot = w + 2 + CLB_STATUS_SLOT_INTS * k;
    if (slot[0] == 0) break;
    char msg[512];
    clb_status st = describe(ctx, slot, msg, sizeof msg);
    const clb_launch_rec *r = &ctx->ring[(uint32_t)slot[0] % CLB_LAUNCH_RING];
    if (r->id == (uint32_t)slot[0]) {
      mark_failed(ctx, r->seq, st, msg);
      for (int j = 0; j < CLB_LAUNCH_SEQS; j++) mark_failed(ctx, r->also[j], st, msg);
    }
    named |= (uint32_t)slot[1];
    if (n++ == 0) {
      first = clb__set_error(ctx, st, "%s", msg);
    } else {
      if (n == 2) clb__append_error(ctx, "; also since the last sync:");
      clb__append_error(ctx, " [%d] %s (%s);", n, msg, clb_status_name(st));
    }
  }
  if (n == 0) first = clb__set_error(ctx, CLB_ERR_INTERNAL, "device status flags 0x%x with no failing launch recorded", flags);
  if (flags & ~named)
    clb__append_error(ctx, " (more device errors since the last sync than recorded: flags 0x%x)", flags & ~named);
  return first;
}

cl_int clb__status_clear(clb_context_t ctx) {
  return clEnqueueWriteBuffer(ctx->queue, ctx->status, CL_TRUE, 0, sizeof zero_status, zero_status, 0, NULL, NULL);
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#else
  atomic_signal_fence(memory_order_seq_cst);
#endif
}

/* Reads the status word into w, waiting for the queue. A thread that blocks in
 * the driver pays for it after it wakes: on the 2-vCPU VM of docs/benchmarks.md
 * the host code after a blocking sync ran 1.51x slower than with no sync, after
 * a polling one 1.36x (docs/design.md, "Host syncs").
 * So the read's event is polled first for up to the context's
 * budget (CLBOUND_SYNC_SPIN_US): a short wait never puts the thread to sleep.
 * By default (auto) only on CPU devices, and only while the recent syncs
 * waited less than the budget, since there the polling takes a core from the
 * device's own threads. Past the budget (or in its place, when it is skipped)
 * the event is checked for up to sync_yield_ns more with sched_yield between
 * checks (CLBOUND_SYNC_YIELD_MS): the thread stays runnable but gives its core
 * to any thread that wants it, such as the device's, and sees the end without
 * being woken. *blocked says whether the thread blocked. On an error nothing
 * is left pending into w. */
static cl_int read_status(clb_context_t ctx, cl_int *w, size_t bytes, int *blocked) {
  int64_t budget = ctx->sync_spin_ns;
  if (ctx->sync_spin_auto && ctx->sync_wait_ns >= budget) budget = 0;
  const int64_t yield = ctx->sync_yield_ns;
  *blocked = 1;
  if (budget <= 0 && yield <= 0) return clEnqueueReadBuffer(ctx->queue, ctx->status, CL_TRUE, 0, bytes, w, 0, NULL, NULL);
  cl_event ev = NULL;
  cl_int e = clEnqueueReadBuffer(ctx->queue, ctx->status, CL_FALSE, 0, bytes, w, 0, NULL, &ev);
  if (e == CL_SUCCESS) e = clFlush(ctx->queue); /* polling alone need not submit the commands */
  const double spin_end = clb__now_ms() + (double)budget * 1e-6, yield_end = spin_end + (double)yield * 1e-6;
  int yielding = budget <= 0;
  cl_int s = CL_QUEUED;
  for (unsigned i = 0; e == CL_SUCCESS; i++) {
    e = clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof s, &s, NULL);
    if (e != CL_SUCCESS || s <= CL_COMPLETE) break; /* done, or failed (a negative status) */
    if (yielding) {
      if (clb__now_ms() >= yield_end) break;
      sched_yield();
      continue;
    }
    for (int k = 0; k < 8; k++) cpu_relax();
    if ((i & 7) == 7 && clb__now_ms() >= spin_end) {
      if (yield <= 0) break;
      yielding = 1;
    }
  }
  if (e == CL_SUCCESS && s == CL_COMPLETE) *blocked = 0;
  else if (e == CL_SUCCESS) e = clWaitForEvents(1, &ev); /* still running (or failed: its error) */
  if (ev) clReleaseEvent(ev);
  if (e != CL_SUCCESS && ev) clFinish(ctx->queue); /* the read may still be pending into w */
  return e;
}

clb_status clb__sync(clb_context_t ctx, const char *why) {
  cl_int w[CLB_STATUS_INTS];
  clb_status hs = clb__fork_check(ctx, why);
  if (hs == CLB_OK) hs = clb__launch_host(ctx, why, NULL);
  if (hs != CLB_OK) return hs;
  ctx->counters.host_syncs++;
  clb__log(ctx, CLB_LOG_SYNCS, "host sync #%llu: %s", (unsigned long long)ctx->counters.host_syncs, why);
  const double t0 = clb__now_ms();
  int blocked = 1;
  cl_int e = read_status(ctx, w, sizeof w, &blocked);
  const int64_t waited = (int64_t)((clb__now_ms() - t0) * 1e6);
  ctx->sync_wait_ns = (3 * ctx->sync_wait_ns + waited) / 4;
  ctx->counters.host_sync_blocks += (uint64_t)blocked;
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
