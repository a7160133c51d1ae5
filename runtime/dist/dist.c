/* dist.c: data-parallel training steps over MPI (clbound/dist.h): gradients
 * read back layer by layer through the graph's grad hook, all-reduced weighted
 * by the ranks' actual counts (MPI_Iallreduce per parameter, started as soon as
 * its read is done), a status exchange that ends every step on every rank, and
 * the update. Uses the public API of libclbound only. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clbound/dist.h"

typedef struct dparam {
  clb_node node;
  int rank;
  int64_t dims[CLB_MAX_RANK];
  int64_t numel;
  float *f;         /* the gradient as read, then as written back */
  double *d;        /* scaled by the local count, then summed over the ranks */
  cl_event ev;      /* the read of this step, NULL before */
  MPI_Request req;
} dparam;

struct clb_dist {
  clb_context_t ctx;
  clb_graph_t g;
  MPI_Comm comm;
  int rank, size;
  int np;
  dparam *p;
  int64_t rec[CLB_MAX_RANK]; /* the loss target's shape record */
  int count_rank;
  cl_event count_ev;
  int next;                  /* the next parameter the hook expects */
  char msg[1024];
  clb_dist_stats stats;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static clb_status fail(clb_dist_t d, clb_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->msg, sizeof d->msg, fmt, ap);
  va_end(ap);
  return st;
}

/* The grad hook: enqueues the non-blocking read of the count (after the
 * forward pass) and of each gradient (as soon as its layer's backward is
 * enqueued); the queue is in order, so each read runs before the backward of
 * the layers below. */
static clb_status on_grad(void *user, clb_node node, clb_tensor_t t) {
  clb_dist_t d = user;
  cl_command_queue q = clb_context_cl_queue(d->ctx);
  cl_int e;
  if (d->count_rank < 0) { /* the first call of a step: the loss's target */
    d->count_rank = clb_tensor_rank(t);
    e = clEnqueueReadBuffer(q, clb_tensor_shape_mem(t), CL_FALSE, 0, sizeof d->rec, d->rec, 0, NULL, &d->count_ev);
    if (e != CL_SUCCESS) return fail(d, CLB_ERR_CL, "clb_dist_step: reading the loss count: OpenCL error %d", (int)e);
    clFlush(q);
    return CLB_OK;
  }
  if (d->next >= d->np || d->p[d->next].node != node)
    return fail(d, CLB_ERR_INTERNAL, "clb_dist_step: gradient of node %d came out of order (expected node %d)", node,
                d->next < d->np ? d->p[d->next].node : -1);
  dparam *p = &d->p[d->next++];
  e = clEnqueueReadBuffer(q, clb_tensor_data_mem(t), CL_FALSE, clb_tensor_data_offset(t), (size_t)p->numel * sizeof(float), p->f,
                          0, NULL, &p->ev);
  if (e != CL_SUCCESS)
    return fail(d, CLB_ERR_CL, "clb_dist_step: reading the gradient of node %d (%lld floats): OpenCL error %d", node,
                (long long)p->numel, (int)e);
  clFlush(q); /* start the device on it while the host enqueues the layers below */
  return CLB_OK;
}

void clb_dist_free(clb_dist_t d) {
  if (!d) return;
  clb_graph_set_grad_hook(d->g, NULL, NULL);
  for (int k = 0; d->p && k < d->np; k++) {
    if (d->p[k].ev) clReleaseEvent(d->p[k].ev);
    free(d->p[k].f);
    free(d->p[k].d);
  }
  if (d->count_ev) clReleaseEvent(d->count_ev);
  free(d->p);
  if (d->comm != MPI_COMM_NULL) MPI_Comm_free(&d->comm);
  free(d);
}

clb_status clb_dist_new(clb_context_t ctx, clb_graph_t g, MPI_Comm comm, clb_dist_t *out) {
  if (!out) return CLB_ERR_NULL;
  *out = NULL;
  if (!ctx || !g) return CLB_ERR_NULL;
  clb_dist_t d = calloc(1, sizeof *d);
  if (!d) return CLB_ERR_HOST_OOM;
  d->ctx = ctx;
  d->g = g;
  d->comm = MPI_COMM_NULL;
  if (MPI_Comm_dup(comm, &d->comm) != MPI_SUCCESS) {
    free(d);
    return CLB_ERR_INVALID_ARG;
  }
  MPI_Comm_rank(d->comm, &d->rank);
  MPI_Comm_size(d->comm, &d->size);
  /* the graph's parameters; a local problem still joins the check below */
  clb_status st = clb_graph_params(g, NULL, 0, &d->np);
  clb_node *nodes = NULL;
  int64_t total = 0;
  if (st == CLB_OK && !(d->p = calloc((size_t)(d->np > 0 ? d->np : 1), sizeof *d->p))) st = CLB_ERR_HOST_OOM;
  if (st == CLB_OK && !(nodes = malloc((size_t)(d->np > 0 ? d->np : 1) * sizeof *nodes))) st = CLB_ERR_HOST_OOM;
  if (st == CLB_OK) st = clb_graph_params(g, nodes, d->np, &d->np);
  for (int k = 0; st == CLB_OK && k < d->np; k++) {
    dparam *p = &d->p[k];
    clb_tensor_t t = clb_graph_tensor(g, nodes[k]);
    p->node = nodes[k];
    if (!t || clb_tensor_dtype(t) != CLB_DTYPE_F32) {
      st = CLB_ERR_DTYPE;
      break;
    }
    p->rank = clb_tensor_rank(t);
    clb_tensor_bounds(t, p->dims);
    p->numel = clb_tensor_bound_numel(t);
    total += p->numel;
    p->f = malloc((size_t)(p->numel > 0 ? p->numel : 1) * sizeof *p->f);
    p->d = malloc((size_t)(p->numel > 0 ? p->numel : 1) * sizeof *p->d);
    if (!p->f || !p->d) st = CLB_ERR_HOST_OOM;
  }
  free(nodes);
  /* every rank must hold the same parameters: compare (count, elements, status) */
  long long mine[3] = {d->np, (long long)total, st == CLB_OK ? 0 : 1}, lo[3], hi[3];
  MPI_Allreduce(mine, lo, 3, MPI_LONG_LONG, MPI_MIN, d->comm);
  MPI_Allreduce(mine, hi, 3, MPI_LONG_LONG, MPI_MAX, d->comm);
  if (st == CLB_OK && (hi[2] != 0 || lo[0] != hi[0] || lo[1] != hi[1])) st = CLB_ERR_INVALID_ARG;
  if (st != CLB_OK) {
    clb_dist_free(d);
    return st;
  }
  d->stats.struct_size = sizeof d->stats;
  d->stats.rank = d->rank;
  d->stats.size = d->size;
  d->stats.grad_bytes = (uint64_t)total * sizeof(double);
  clb_graph_set_grad_hook(g, on_grad, d);
  *out = d;
  return CLB_OK;
}

const char *clb_dist_errmsg(clb_dist_t d) { return d ? d->msg : ""; }

clb_status clb_dist_stats_get(clb_dist_t d, clb_dist_stats *out) {
  if (!d || !out) return CLB_ERR_NULL;
  if (out->struct_size < sizeof *out) return CLB_ERR_INVALID_ARG;
  *out = d->stats;
  return CLB_OK;
}

static int event_done(cl_event ev) {
  cl_int s = CL_QUEUED;
  if (clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof s, &s, NULL) != CL_SUCCESS) return 1;
  return s == CL_COMPLETE || s < 0;
}

/* Waits for a read while MPI progresses the reductions already started (Open
 * MPI moves non-blocking collectives only inside MPI calls). */
static void wait_read(clb_dist_t d, cl_event ev, int started, double *mpi_s) {
  const struct timespec nap = {0, 20000};
  while (!event_done(ev)) {
    if (started > 0) {
      double t0 = now_s();
      int flag;
      for (int k = 0; k < started; k++) MPI_Test(&d->p[k].req, &flag, MPI_STATUS_IGNORE);
      *mpi_s += now_s() - t0;
    }
    nanosleep(&nap, NULL);
  }
}

/* The step, for a rank that ran (ran = 1) or failed before running with `st`. */
static clb_status step(clb_dist_t d, int ran, clb_status st) {
  const double t_start = now_s();
  double mpi_s = 0;
  if (ran) d->msg[0] = 0; /* a rank that failed before keeps its message */
  clb_counters c0 = {.struct_size = sizeof c0}, c1 = {.struct_size = sizeof c1};
  clb_context_counters(d->ctx, &c0);
  d->next = 0;
  d->count_rank = -1;
  if (ran) {
    st = clb_graph_run_phase(d->g, CLB_PHASE_GRADS);
    if (st != CLB_OK && !d->msg[0]) fail(d, st, "%s", clb_context_errmsg(d->ctx));
  }
  const int grads_open = ran && st == CLB_OK;
  int64_t n_local = 0;
  if (st == CLB_OK && d->count_ev) {
    if (clWaitForEvents(1, &d->count_ev) != CL_SUCCESS) st = fail(d, CLB_ERR_CL, "clb_dist_step: waiting for the loss count");
    n_local = 1;
    for (int k = 0; k < d->count_rank; k++) n_local *= d->rec[k];
  } else if (st == CLB_OK) {
    st = fail(d, CLB_ERR_INTERNAL, "clb_dist_step: the graph reported no loss count");
  }
  /* every rank starts the same reductions in the same order, zeros when failed */
  double t_reads_done = 0;
  for (int k = 0; k < d->np; k++) {
    dparam *p = &d->p[k];
    int have = st == CLB_OK && k < d->next && p->ev;
    if (have) wait_read(d, p->ev, k, &mpi_s);
    if (have && n_local > 0)
      for (int64_t i = 0; i < p->numel; i++) p->d[i] = (double)p->f[i] * (double)n_local;
    else
      memset(p->d, 0, (size_t)p->numel * sizeof *p->d);
    if (k == d->np - 1) t_reads_done = now_s();
    double t0 = now_s();
    MPI_Iallreduce(MPI_IN_PLACE, p->d, (int)p->numel, MPI_DOUBLE, MPI_SUM, d->comm, &p->req);
    mpi_s += now_s() - t0;
  }
  if (st == CLB_OK && d->next != d->np)
    st = fail(d, CLB_ERR_INTERNAL, "clb_dist_step: %d of %d gradients came back", d->next, d->np);
  /* the step's one counted host sync: the device's status (and the queue drained
   * before any buffer of a failed step is touched again) */
  clb_status sst = clb_context_sync(d->ctx);
  if (sst != CLB_OK && st == CLB_OK) st = fail(d, sst, "%s", clb_context_errmsg(d->ctx));
  if (!t_reads_done) t_reads_done = now_s();
  double t0 = now_s();
  for (int k = 0; k < d->np; k++) MPI_Wait(&d->p[k].req, MPI_STATUS_IGNORE);
  long long v[2] = {st == CLB_OK ? (long long)n_local : 0, st == CLB_OK ? 0 : 1}, sum[2];
  MPI_Allreduce(v, sum, 2, MPI_LONG_LONG, MPI_SUM, d->comm);
  if (sum[1] > 0) {
    /* the lowest failing rank tells every rank its status and message */
    int who = st == CLB_OK ? d->size : d->rank, root;
    MPI_Allreduce(&who, &root, 1, MPI_INT, MPI_MIN, d->comm);
    struct { int status; char msg[900]; } m;
    memset(&m, 0, sizeof m);
    if (d->rank == root) {
      m.status = (int)st;
      memcpy(m.msg, d->msg, sizeof m.msg - 1); /* m is zeroed: the copy ends in 0 */
    }
    MPI_Bcast(&m, (int)sizeof m, MPI_BYTE, root, d->comm);
    if (st == CLB_OK) {
      st = (clb_status)m.status;
      fail(d, st, "clb_dist_step: rank %d of %d failed (%lld failed): %s", root, d->size, sum[1], m.msg);
    }
  }
  const double t_end_comm = now_s();
  mpi_s += t_end_comm - t0;
  for (int k = 0; k < d->np; k++)
    if (d->p[k].ev) {
      clReleaseEvent(d->p[k].ev);
      d->p[k].ev = NULL;
    }
  if (d->count_ev) {
    clReleaseEvent(d->count_ev);
    d->count_ev = NULL;
  }
  const int64_t n_global = (int64_t)sum[0];
  if (st == CLB_OK && n_global > 0) {
    for (int k = 0; st == CLB_OK && k < d->np; k++) {
      dparam *p = &d->p[k];
      clb_tensor_t grad;
      for (int64_t i = 0; i < p->numel; i++) p->f[i] = (float)(p->d[i] / (double)n_global);
      st = clb_graph_grad(d->g, p->node, &grad);
      if (st == CLB_OK) st = clb_tensor_write(d->ctx, grad, p->dims, p->f, (size_t)p->numel * sizeof(float));
      if (st != CLB_OK) fail(d, st, "%s", clb_context_errmsg(d->ctx));
    }
    if (st == CLB_OK) st = clb_graph_run_phase(d->g, CLB_PHASE_UPDATE);
    else clb_graph_run_phase(d->g, CLB_PHASE_DISCARD);
    if (st != CLB_OK && !d->msg[0]) fail(d, st, "%s", clb_context_errmsg(d->ctx));
  } else if (grads_open) {
    clb_graph_run_phase(d->g, CLB_PHASE_DISCARD); /* failed, or no rank had a sample */
  }
  clb_context_counters(d->ctx, &c1);
  d->stats.steps++;
  d->stats.local_count = n_local;
  d->stats.global_count = n_global;
  d->stats.step_s = now_s() - t_start;
  d->stats.allreduce_s = mpi_s;
  d->stats.exposed_s = t_end_comm - t_reads_done;
  d->stats.host_syncs = c1.host_syncs - c0.host_syncs;
  return st;
}

clb_status clb_dist_step(clb_dist_t d) {
  if (!d) return CLB_ERR_NULL;
  return step(d, 1, CLB_OK);
}

clb_status clb_dist_step_failed(clb_dist_t d, clb_status local) {
  if (!d) return CLB_ERR_NULL;
  if (local == CLB_OK) local = CLB_ERR_INVALID_ARG;
  fail(d, local, "clb_dist_step: this rank failed before the step: %s", clb_status_str(local));
  return step(d, 0, local);
}
