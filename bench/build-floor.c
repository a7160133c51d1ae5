/* build-floor.c: `clbound bench build-floor`: what the OpenCL driver alone costs a
 * process before its first kernel has run: start-up (platform, device, context,
 * queue), building a one-line kernel from source, and its first launch (where
 * PoCL compiles the work-group function). No clbound op runs. Run in a process
 * of its own with the driver's kernel cache empty (POCL_CACHE_DIR=$(mktemp -d)),
 * it is the floor under a cold clbound process on that driver: whatever clbound
 * builds, the driver's first program costs at least this (bench/cold-process.py
 * prints it beside the cold demo). The context is left to the process's exit,
 * as clbound leaves PoCL's (CLBOUND_KEEP_DRIVER). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/timing.h"
#include "clbound/clbound.h"

static const char *SRC = "kernel void floor_probe(global float *a) { a[get_global_id(0)] = 1.0f; }\n";

static int fail(const char *what, cl_int e) {
  fprintf(stderr, "clbound bench build-floor: %s failed (OpenCL error %d)\n", what, (int)e);
  return 1;
}

int clb_bench_build_floor(int argc, char **argv) {
  int json = 0;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else {
      int help = strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0;
      fprintf(help ? stdout : stderr,
              "usage: clbound bench build-floor [--json]\n"
              "  the OpenCL driver alone on the first device of the first platform that has one: start-up,\n"
              "  a one-line kernel built from source, its first launch (ms); run it with the driver's cache\n"
              "  empty (POCL_CACHE_DIR=$(mktemp -d)) for the floor under a cold process\n");
      return help ? 0 : 2;
    }
  }
  double t0 = clb_tool_now_ms();
  cl_platform_id plats[16];
  cl_uint np = 0;
  cl_int e = clGetPlatformIDs(16, plats, &np);
  if (e != CL_SUCCESS || np == 0) return fail("clGetPlatformIDs", e);
  cl_device_id dev = NULL;
  for (cl_uint i = 0; i < np && i < 16 && !dev; i++)
    if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS) dev = NULL;
  if (!dev) return fail("finding a device (clGetDeviceIDs)", CL_DEVICE_NOT_FOUND);
  cl_context c = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
  if (!c) return fail("clCreateContext", e);
  int rc = 1;
  cl_command_queue q = clCreateCommandQueue(c, dev, 0, &e); /* OpenCL 1.2, as the library */
  cl_program prog = NULL;
  cl_kernel k = NULL;
  cl_mem m = NULL;
  if (!q) {
    rc = fail("clCreateCommandQueue", e);
    goto done;
  }
  double t1 = clb_tool_now_ms();
  const char *texts[1] = {SRC};
  prog = clCreateProgramWithSource(c, 1, texts, NULL, &e);
  if (!prog) {
    rc = fail("clCreateProgramWithSource", e);
    goto done;
  }
  if ((e = clBuildProgram(prog, 1, &dev, "", NULL, NULL)) != CL_SUCCESS) {
    rc = fail("clBuildProgram", e);
    goto done;
  }
  double t2 = clb_tool_now_ms();
  k = clCreateKernel(prog, "floor_probe", &e);
  if (!k) {
    rc = fail("clCreateKernel", e);
    goto done;
  }
  m = clCreateBuffer(c, CL_MEM_READ_WRITE, 256 * sizeof(float), NULL, &e);
  if (!m) {
    rc = fail("clCreateBuffer", e);
    goto done;
  }
  size_t global = 256;
  if ((e = clSetKernelArg(k, 0, sizeof m, &m)) != CL_SUCCESS ||
      (e = clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL)) != CL_SUCCESS ||
      (e = clFinish(q)) != CL_SUCCESS) {
    rc = fail("the first launch", e);
    goto done;
  }
  double t3 = clb_tool_now_ms();
  char name[256] = "";
  clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
  for (char *p = name; *p; p++)
    if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) *p = ' ';
  if (json)
    printf("{\"bench\":\"build-floor\",\"device\":\"%s\",\"startup_ms\":%.3f,\"build_ms\":%.3f,\"first_launch_ms\":%.3f}\n",
           name, t1 - t0, t2 - t1, t3 - t2);
  else
    printf("%s: start-up %.1f ms, one-line kernel built from source %.1f ms, its first launch %.1f ms\n", name,
           t1 - t0, t2 - t1, t3 - t2);
  rc = 0;
done:
  if (m) clReleaseMemObject(m);
  if (k) clReleaseKernel(k);
  if (prog) clReleaseProgram(prog);
  if (q) clReleaseCommandQueue(q);
  /* Not released: PoCL frees its compiler with a process's last context (about
   * 0.1 s), which is no part of the floor; clbound keeps the driver loaded
   * until the process exits too (CLBOUND_KEEP_DRIVER). */
  (void)c;
  return rc;
}
