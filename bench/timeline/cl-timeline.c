/* cl-timeline.c: a device timeline of any OpenCL program, for benchmarks that
 * ask where a step's time goes (bench/torch-compile.py --device-idle).
 *
 * Loaded with LD_PRELOAD before the program's OpenCL library, it turns on
 * profiling for every command queue made after it (CL_QUEUE_PROFILING_ENABLE)
 * and, while recording is on (clt_record(1)), keeps an event for every
 * command enqueued with the common clEnqueue* calls: kernels, native kernels,
 * reads, writes, copies, fills, maps and unmaps. clt_dump writes one line per
 * command, "kind start end" in nanoseconds of the host's CLOCK_MONOTONIC
 * (clt_now's clock): the device's profiling clock is mapped onto it by the
 * median offset between each command's CL_PROFILING_COMMAND_QUEUED and the
 * host time just before its enqueue. The calls are passed to the real ones
 * unchanged, so an error is the driver's. A measuring tool only: events cost
 * the driver a little on every command, for every variant measured alike.
 *
 * Not part of libclbound: nothing in the library or the tests loads it. */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CLT_API __attribute__((visibility("default")))

typedef struct rec {
  cl_event ev;
  const char *kind;
  uint64_t host_ns; /* CLOCK_MONOTONIC just before the enqueue */
} rec;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static rec *recs;
static size_t nrec, caprec, dropped;
static int recording;

static void *real(const char *name) {
  static void *lib;
  if (!lib) lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_GLOBAL);
  return lib ? dlsym(lib, name) : NULL;
}
#define REAL(name) static __typeof__(name) *r_; if (!r_) r_ = (__typeof__(name) *)real(#name)

CLT_API uint64_t clt_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Recording on (1) or off (0); returns the commands kept so far. */
CLT_API size_t clt_record(int on) {
  pthread_mutex_lock(&lock);
  recording = on;
  size_t n = nrec;
  pthread_mutex_unlock(&lock);
  return n;
}

/* The event slot to pass: the caller's, or one of ours while recording. */
static cl_event *slot(cl_event *user, cl_event *mine) { return user ? user : (recording ? mine : NULL); }

static void keep(const char *kind, uint64_t t0, cl_int st, cl_event *user, cl_event mine) {
  if (!recording || st != CL_SUCCESS) {
    if (mine) clReleaseEvent(mine);
    return;
  }
  cl_event ev = user ? *user : mine;
  if (!ev) return;
  if (user) clRetainEvent(ev); /* the caller releases its own reference */
  pthread_mutex_lock(&lock);
  if (nrec == caprec) {
    size_t ncap = caprec ? 2 * caprec : 4096;
    rec *n = ncap <= (size_t)1 << 22 ? realloc(recs, ncap * sizeof *n) : NULL;
    if (n) recs = n, caprec = ncap;
  }
  if (nrec < caprec) {
    recs[nrec++] = (rec){ev, kind, t0};
    ev = NULL;
  } else {
    dropped++;
  }
  pthread_mutex_unlock(&lock);
  if (ev) clReleaseEvent(ev);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Writes the kept commands to path (waiting for each), then forgets them;
 * returns how many were written, -1 if path cannot be written. */
CLT_API long clt_dump(const char *path) {
  pthread_mutex_lock(&lock);
  rec *rs = recs;
  size_t n = nrec, lost = dropped;
  recs = NULL;
  nrec = caprec = dropped = 0;
  pthread_mutex_unlock(&lock);
  FILE *f = fopen(path, "w");
  int64_t *off = n ? malloc(n * sizeof *off) : NULL;
  cl_ulong *t = n ? malloc(3 * n * sizeof *t) : NULL;
  long written = f ? 0 : -1;
  size_t noff = 0;
  for (size_t i = 0; i < n; i++) {
    cl_ulong *q = t ? &t[3 * i] : NULL;
    int ok = q && clWaitForEvents(1, &rs[i].ev) == CL_SUCCESS &&
             clGetEventProfilingInfo(rs[i].ev, CL_PROFILING_COMMAND_QUEUED, sizeof q[0], &q[0], NULL) == CL_SUCCESS &&
             clGetEventProfilingInfo(rs[i].ev, CL_PROFILING_COMMAND_START, sizeof q[1], &q[1], NULL) == CL_SUCCESS &&
             clGetEventProfilingInfo(rs[i].ev, CL_PROFILING_COMMAND_END, sizeof q[2], &q[2], NULL) == CL_SUCCESS;
    if (q && !ok) q[0] = q[1] = q[2] = 0;
    if (ok && off) off[noff++] = (int64_t)q[0] - (int64_t)rs[i].host_ns;
  }
  int64_t shift = 0;
  if (noff) {
    qsort(off, noff, sizeof *off, cmp_i64);
    shift = off[noff / 2];
  }
  for (size_t i = 0; i < n; i++) {
    const cl_ulong *q = t ? &t[3 * i] : NULL;
    if (f && q && q[2]) {
      fprintf(f, "%s %lld %lld\n", rs[i].kind, (long long)((int64_t)q[1] - shift), (long long)((int64_t)q[2] - shift));
      written++;
    }
    clReleaseEvent(rs[i].ev);
  }
  if (f && lost) fprintf(f, "# %zu commands not kept (out of memory)\n", lost);
  if (f) fclose(f);
  free(off);
  free(t);
  free(rs);
  return written;
}

/* ---- the queue: profiling on ---- */

CLT_API cl_command_queue clCreateCommandQueueWithProperties(cl_context c, cl_device_id d,
                                                            const cl_queue_properties *p, cl_int *e) {
  REAL(clCreateCommandQueueWithProperties);
  if (!r_) {
    if (e) *e = CL_INVALID_OPERATION;
    return NULL;
  }
  cl_queue_properties np[64];
  int n = 0, had = 0;
  for (int i = 0; p && p[i] && n < 60; i += 2) {
    np[n++] = p[i];
    np[n++] = p[i] == CL_QUEUE_PROPERTIES ? (had = 1, p[i + 1] | CL_QUEUE_PROFILING_ENABLE) : p[i + 1];
  }
  if (!had) {
    np[n++] = CL_QUEUE_PROPERTIES;
    np[n++] = CL_QUEUE_PROFILING_ENABLE;
  }
  np[n] = 0;
  return r_(c, d, np, e);
}

CLT_API cl_command_queue clCreateCommandQueue(cl_context c, cl_device_id d, cl_command_queue_properties p, cl_int *e) {
  REAL(clCreateCommandQueue);
  if (!r_) {
    if (e) *e = CL_INVALID_OPERATION;
    return NULL;
  }
  return r_(c, d, p | CL_QUEUE_PROFILING_ENABLE, e);
}

/* ---- the commands ---- */

#define ENQUEUE(kind, name, ...)                                  \
  REAL(name);                                                     \
  if (!r_) return CL_INVALID_OPERATION;                           \
  cl_event mine = NULL, *ev = slot(e, &mine);                     \
  uint64_t t0 = clt_now();                                        \
  cl_int st = r_(__VA_ARGS__);                                    \
  keep(kind, t0, st, e, mine);                                    \
  return st

CLT_API cl_int clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dim, const size_t *off,
                                      const size_t *gws, const size_t *lws, cl_uint nw, const cl_event *w,
                                      cl_event *e) {
  ENQUEUE("kernel", clEnqueueNDRangeKernel, q, k, dim, off, gws, lws, nw, w, ev);
}

CLT_API cl_int clEnqueueNativeKernel(cl_command_queue q, void(CL_CALLBACK *fn)(void *), void *args, size_t cb,
                                     cl_uint nm, const cl_mem *ml, const void **al, cl_uint nw, const cl_event *w,
                                     cl_event *e) {
  ENQUEUE("native", clEnqueueNativeKernel, q, fn, args, cb, nm, ml, al, nw, w, ev);
}

CLT_API cl_int clEnqueueWriteBuffer(cl_command_queue q, cl_mem b, cl_bool bl, size_t off, size_t n, const void *p,
                                    cl_uint nw, const cl_event *w, cl_event *e) {
  ENQUEUE("write", clEnqueueWriteBuffer, q, b, bl, off, n, p, nw, w, ev);
}

CLT_API cl_int clEnqueueReadBuffer(cl_command_queue q, cl_mem b, cl_bool bl, size_t off, size_t n, void *p, cl_uint nw,
                                   const cl_event *w, cl_event *e) {
  ENQUEUE("read", clEnqueueReadBuffer, q, b, bl, off, n, p, nw, w, ev);
}

CLT_API cl_int clEnqueueCopyBuffer(cl_command_queue q, cl_mem a, cl_mem b, size_t oa, size_t ob, size_t n, cl_uint nw,
                                   const cl_event *w, cl_event *e) {
  ENQUEUE("copy", clEnqueueCopyBuffer, q, a, b, oa, ob, n, nw, w, ev);
}

CLT_API cl_int clEnqueueFillBuffer(cl_command_queue q, cl_mem b, const void *p, size_t ps, size_t off, size_t n,
                                   cl_uint nw, const cl_event *w, cl_event *e) {
  ENQUEUE("fill", clEnqueueFillBuffer, q, b, p, ps, off, n, nw, w, ev);
}

CLT_API cl_int clEnqueueUnmapMemObject(cl_command_queue q, cl_mem m, void *p, cl_uint nw, const cl_event *w,
                                       cl_event *e) {
  ENQUEUE("unmap", clEnqueueUnmapMemObject, q, m, p, nw, w, ev);
}

CLT_API void *clEnqueueMapBuffer(cl_command_queue q, cl_mem b, cl_bool bl, cl_map_flags fl, size_t off, size_t n,
                                 cl_uint nw, const cl_event *w, cl_event *e, cl_int *err) {
  REAL(clEnqueueMapBuffer);
  if (!r_) {
    if (err) *err = CL_INVALID_OPERATION;
    return NULL;
  }
  cl_event mine = NULL, *ev = slot(e, &mine);
  uint64_t t0 = clt_now();
  cl_int st = CL_SUCCESS;
  void *p = r_(q, b, bl, fl, off, n, nw, w, ev, &st);
  if (err) *err = st;
  keep("map", t0, st, e, mine);
  return p;
}
