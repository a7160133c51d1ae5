/* hostptr.c: host pointers of buffers kept for native kernels (core.h).
 *
 * On PoCL's CPU device a map of a buffer returns the buffer's own memory, the
 * same pointer every time, so a native kernel can use that pointer directly
 * instead of a map and an unmap around every call (about 50 us of commands per
 * native kernel; docs/gemm.md). That is relied on only where it is checked:
 * the device is a CPU with unified host memory, and two maps of a probe buffer
 * (on a queue of their own, so the context's queue does not wait) return the
 * same pointer, through which a write made with clEnqueueWriteBuffer is seen.
 * A tensor of a graph's arena is a region of the arena's buffer (runtime/graph/
 * memory.c): its memory is the buffer's at its offset, plain pointer
 * arithmetic within one buffer, so no sub-buffer is made or probed. */
#include <stdlib.h>
#include <string.h>

#include "runtime/core/core.h"

static int probe(clb_context_t ctx) {
  if (!clb__env_int(CLB_ENV_HOST_PTRS)) return -1;
  cl_device_type type = 0;
  cl_bool unified = CL_FALSE;
  if (clGetDeviceInfo(ctx->device, CL_DEVICE_TYPE, sizeof type, &type, NULL) != CL_SUCCESS || !(type & CL_DEVICE_TYPE_CPU))
    return -1;
  if (clGetDeviceInfo(ctx->device, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL) != CL_SUCCESS || !unified)
    return -1;
  cl_int e = CL_SUCCESS;
  cl_command_queue q = clCreateCommandQueue(ctx->cl, ctx->device, 0, &e);
  if (e != CL_SUCCESS || !q) return -1;
  int ok = 0;
  cl_mem m = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, 256, NULL, &e);
  if (e == CL_SUCCESS && m) {
    unsigned char pat[256];
    for (int i = 0; i < 256; i++) pat[i] = (unsigned char)(i * 7 + 3);
    void *p1 = clEnqueueMapBuffer(q, m, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, 256, 0, NULL, NULL, &e);
    if (e == CL_SUCCESS && p1) {
      memset(p1, 0, 256);
      clEnqueueUnmapMemObject(q, m, p1, 0, NULL, NULL);
      if (clEnqueueWriteBuffer(q, m, CL_TRUE, 0, 256, pat, 0, NULL, NULL) == CL_SUCCESS && clFinish(q) == CL_SUCCESS) {
        int seen = memcmp(p1, pat, 256) == 0; /* the write, through the first map's pointer */
        void *p2 = clEnqueueMapBuffer(q, m, CL_TRUE, CL_MAP_READ, 0, 256, 0, NULL, NULL, &e);
        if (e == CL_SUCCESS && p2) {
          ok = seen && p2 == p1;
          clEnqueueUnmapMemObject(q, m, p2, 0, NULL, NULL);
        }
      }
    }
    clFinish(q);
    clReleaseMemObject(m);
  }
  clReleaseCommandQueue(q);
  return ok ? 1 : -1;
}

int clb__host_ptrs_ok(clb_context_t ctx) {
  if (ctx->host_ptrs == 0) {
    ctx->host_ptrs = probe(ctx);
    clb__log(ctx, CLB_LOG_GEMM, "native kernels: %s", ctx->host_ptrs > 0
             ? "buffers are host memory (one map's pointer kept per buffer)"
             : "buffers are mapped around every native kernel");
  }
  return ctx->host_ptrs > 0;
}

void *clb__buf_host_ptr(clb_context_t ctx, const clb_buf *buf) { return clb__host_ptrs_ok(ctx) ? buf->host : NULL; }

void *clb__status_host_ptr(clb_context_t ctx) { return clb__host_ptrs_ok(ctx) ? ctx->status_host : NULL; }

void clb__buf_host_learn(clb_context_t ctx, clb_buf *buf, void *ptr) {
  if (!clb__host_ptrs_ok(ctx)) return;
  if (buf) buf->host = ptr;
  else ctx->status_host = ptr;
}

void clb__buf_host_map_learn(clb_context_t ctx, clb_buf *buf) {
  if (!buf->mem || buf->host || !clb__host_ptrs_ok(ctx)) return;
  cl_int e = CL_SUCCESS;
  void *p = clEnqueueMapBuffer(ctx->queue, buf->mem, CL_FALSE, CL_MAP_READ, (size_t)buf->offset, buf->bytes ? buf->bytes : 1, 0,
                               NULL, NULL, &e);
  if (e != CL_SUCCESS || !p) return; /* native kernels map it instead */
  /* host is the buffer's start (the region's is host + offset) */
  if (clEnqueueUnmapMemObject(ctx->queue, buf->mem, p, 0, NULL, NULL) == CL_SUCCESS) buf->host = (char *)p - buf->offset;
}
