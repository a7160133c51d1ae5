/* copy.c: the copy-kernel reference of the benchmarks: a plain buffer copy over
 * the same bytes as the op being measured, in the op's kernel family, so that
 * figures are fractions of the device's own copy bandwidth measured in the same
 * run. */
#include <stdio.h>
#include <string.h>

#include "bench/copy.h"

/* copy_chunks for the CPU style, copy_stride for the GPU style (copy.h). */
static const char *COPY_SRC =
    "__kernel void copy_chunks(__global const uint16 *a, __global uint16 *b, long n) {\n"
    "  long g = get_global_id(0), ng = get_global_size(0);\n"
    "  long c = (n + ng - 1) / ng;\n"
    "  long s = min(g * c, n), e = min(s + c, n);\n"
    "  for (long i = s; i < e; i++) b[i] = a[i];\n"
    "}\n"
    "__kernel void copy_stride(__global const uint4 *a, __global uint4 *b, long n) {\n"
    "  for (long i = get_global_id(0); i < n; i += get_global_size(0)) b[i] = a[i];\n"
    "}\n";

clb_status copier_init(clb_context_t ctx, size_t cap, copier *c, char *err, size_t elen) {
  memset(c, 0, sizeof *c);
  cl_context cx = clb_context_cl_context(ctx);
  cl_device_id dev = clb_context_cl_device(ctx);
  c->q = clb_context_cl_queue(ctx);
  c->gpu = clb_context_kernel_style(ctx) == CLB_KERNEL_STYLE_GPU;
  c->cap = (cap + 63) / 64 * 64;
  cl_int e;
  c->prog = clCreateProgramWithSource(cx, 1, &COPY_SRC, NULL, &e);
  if (e == CL_SUCCESS) e = clBuildProgram(c->prog, 1, &dev, "", NULL, NULL);
  if (e == CL_SUCCESS) c->k = clCreateKernel(c->prog, c->gpu ? "copy_stride" : "copy_chunks", &e);
  if (e == CL_SUCCESS) c->a = clCreateBuffer(cx, CL_MEM_READ_WRITE, c->cap, NULL, &e);
  if (e == CL_SUCCESS) c->b = clCreateBuffer(cx, CL_MEM_READ_WRITE, c->cap, NULL, &e);
  if (e != CL_SUCCESS) {
    snprintf(err, elen, "copy kernel: OpenCL error %d", (int)e);
    return CLB_ERR_CL;
  }
  cl_uint cu = 1;
  clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
  if (!cu) cu = 1;
  if (c->gpu) {
    c->local = 256;
    size_t wg = 0;
    clGetKernelWorkGroupInfo(c->k, dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    while (wg && c->local > wg) c->local /= 2;
    c->global = (size_t)cu * 64 * c->local;
  } else {
    c->local = 1;
    c->global = (size_t)cu * 32; /* as the CPU-style ops (runtime/ops/select.h) */
  }
  /* first touch of both buffers, outside any timing */
  cl_uchar z = 0;
  e = clEnqueueFillBuffer(c->q, c->a, &z, 1, 0, c->cap, 0, NULL, NULL);
  if (e == CL_SUCCESS) e = clEnqueueFillBuffer(c->q, c->b, &z, 1, 0, c->cap, 0, NULL, NULL);
  if (e == CL_SUCCESS) e = clFinish(c->q);
  if (e != CL_SUCCESS) {
    snprintf(err, elen, "copy buffers: OpenCL error %d", (int)e);
    return CLB_ERR_CL;
  }
  return CLB_OK;
}

void copier_free(copier *c) {
  if (c->a) clReleaseMemObject(c->a);
  if (c->b) clReleaseMemObject(c->b);
  if (c->k) clReleaseKernel(c->k);
  if (c->prog) clReleaseProgram(c->prog);
}

cl_int copier_run(copier *c, size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  if (bytes > c->cap) bytes = c->cap;
  cl_long n = (cl_long)(bytes / (c->gpu ? 16 : 64));
  cl_int e = clSetKernelArg(c->k, 0, sizeof c->a, &c->a);
  e |= clSetKernelArg(c->k, 1, sizeof c->b, &c->b);
  e |= clSetKernelArg(c->k, 2, sizeof n, &n);
  if (e != CL_SUCCESS) return e;
  return clEnqueueNDRangeKernel(c->q, c->k, 1, NULL, &c->global, &c->local, 0, NULL, NULL);
}
