/* device.c: listing OpenCL devices, describing them, and choosing one. */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/core.h"
#include "clbound/version.h"

#define CLB_MAX_PLATFORMS 16
#define CLB_MAX_DEVICES 64

const char *clb_version(void) { return CLBOUND_VERSION_STRING; }

/* The platforms and devices of the process, found once (pthread_once): drivers
 * such as PoCL are not safe when their first clGetPlatformIDs / clGetDeviceInfo
 * calls run in several threads at once, and the documented model (one context
 * per thread) makes exactly that happen. Everything below reads this table;
 * devices that appear after the first look are not seen by this process. */
static struct {
  cl_int error; /* of clGetPlatformIDs; CL_SUCCESS with np == 0: none */
  cl_uint np;
  cl_platform_id plats[CLB_MAX_PLATFORMS];
  char pname[CLB_MAX_PLATFORMS][CLB_DEVICE_STRING_MAX];
  cl_uint nd[CLB_MAX_PLATFORMS];
  cl_device_id devs[CLB_MAX_PLATFORMS][CLB_MAX_DEVICES];
  char dname[CLB_MAX_PLATFORMS][CLB_MAX_DEVICES][CLB_DEVICE_STRING_MAX];
} found;
static pthread_once_t found_once = PTHREAD_ONCE_INIT;

static void info_str(cl_platform_id plat, cl_device_id dev, cl_uint what, char *buf, size_t len);
static void str_info(cl_device_id d, cl_device_info what, char *buf, size_t len);

static void discover(void) {
  cl_uint n = 0;
  found.error = clGetPlatformIDs(CLB_MAX_PLATFORMS, found.plats, &n);
  if (found.error != CL_SUCCESS) n = 0;
  found.np = n > CLB_MAX_PLATFORMS ? CLB_MAX_PLATFORMS : n;
  for (cl_uint i = 0; i < found.np; i++) {
    info_str(found.plats[i], NULL, CL_PLATFORM_NAME, found.pname[i], sizeof found.pname[i]);
    cl_uint nd = 0;
    if (clGetDeviceIDs(found.plats[i], CL_DEVICE_TYPE_ALL, CLB_MAX_DEVICES, found.devs[i], &nd) != CL_SUCCESS) nd = 0;
    found.nd[i] = nd > CLB_MAX_DEVICES ? CLB_MAX_DEVICES : nd;
    for (cl_uint j = 0; j < found.nd[i]; j++) str_info(found.devs[i][j], CL_DEVICE_NAME, found.dname[i][j], sizeof found.dname[i][j]);
  }
}

/* The process's platforms; 0 with the thread-local message set when none. */
static int get_platforms(cl_uint *n) {
  clb__fork_watch(); /* a child forked from here on must not use OpenCL */
  pthread_once(&found_once, discover);
  *n = found.np;
  if (found.np == 0) {
    cl_int e = found.error == CL_SUCCESS ? -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ : found.error;
    clb__set_last_errmsg(
        "no OpenCL platform found (%s, %d): install an OpenCL driver, e.g. Debian's "
        "pocl-opencl-icd, and the ICD loader ocl-icd-libopencl1",
        clb__cl_error_name(e), (int)e);
    return 0;
  }
  return 1;
}

clb_status clb_device_count(int *out) {
  if (!out) return clb__set_error(NULL, CLB_ERR_NULL, "clb_device_count: out is NULL");
  *out = 0;
  cl_uint np = 0;
  if (!get_platforms(&np)) return CLB_ERR_NO_DEVICE;
  for (cl_uint i = 0; i < np; i++) *out += (int)found.nd[i];
  if (*out == 0) {
    clb__set_last_errmsg("OpenCL platforms found, but no device on any of them");
    return CLB_ERR_NO_DEVICE;
  }
  return CLB_OK;
}

/* Copies an info string of `n` bytes (its NUL included) into buf[len]: whole
 * when it fits, else its start ending in "..." (never blank). */
static void put_str(char *buf, size_t len, const char *s, size_t n) {
  if (n <= len) {
    memcpy(buf, s, n);
    buf[n ? n - 1 : 0] = 0;
    return;
  }
  memcpy(buf, s, len - 4);
  memcpy(buf + len - 4, "...", 4);
}

/* An info string of a device (dev) or a platform (plat, when dev is NULL),
 * asked for at its own size; "" when the driver gives none. */
static void info_str(cl_platform_id plat, cl_device_id dev, cl_uint what, char *buf, size_t len) {
  buf[0] = 0;
  size_t n = 0;
  cl_int e = dev ? clGetDeviceInfo(dev, what, 0, NULL, &n) : clGetPlatformInfo(plat, what, 0, NULL, &n);
  if (e != CL_SUCCESS || n == 0) return;
  char *tmp = malloc(n);
  if (!tmp) return;
  e = dev ? clGetDeviceInfo(dev, what, n, tmp, NULL) : clGetPlatformInfo(plat, what, n, tmp, NULL);
  if (e == CL_SUCCESS) put_str(buf, len, tmp, n);
  free(tmp);
}

static void str_info(cl_device_id d, cl_device_info what, char *buf, size_t len) { info_str(NULL, d, what, buf, len); }

clb_status clb__device_describe(cl_platform_id plat, cl_device_id dev, clb_device_info *out) {
  size_t keep = out->struct_size;
  if (keep < sizeof *out) return CLB_ERR_INVALID_ARG; /* nothing written: the caller's message reads struct_size */
  memset(out, 0, sizeof *out);
  out->struct_size = keep;
  info_str(plat, NULL, CL_PLATFORM_NAME, out->platform_name, sizeof out->platform_name);
  str_info(dev, CL_DEVICE_NAME, out->name, sizeof out->name);
  str_info(dev, CL_DEVICE_VENDOR, out->vendor, sizeof out->vendor);
  str_info(dev, CL_DRIVER_VERSION, out->driver_version, sizeof out->driver_version);
  str_info(dev, CL_DEVICE_VERSION, out->device_version, sizeof out->device_version);
  str_info(dev, CL_DEVICE_OPENCL_C_VERSION, out->opencl_c_version, sizeof out->opencl_c_version);
  cl_device_type type = 0;
  clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL);
  out->is_cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
  out->is_gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
  cl_uint cu = 0;
  clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
  out->compute_units = cu;
  clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof out->max_work_group_size,
                  &out->max_work_group_size, NULL);
  cl_ulong u = 0;
  clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof u, &u, NULL);
  out->local_mem_bytes = u;
  cl_device_local_mem_type lt = CL_LOCAL;
  clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_TYPE, sizeof lt, &lt, NULL);
  out->local_mem_emulated = lt == CL_GLOBAL;
  u = 0;
  clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof u, &u, NULL);
  out->global_mem_bytes = u;
  u = 0;
  clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof u, &u, NULL);
  out->max_alloc_bytes = u;
  cl_uint align_bits = 0;
  clGetDeviceInfo(dev, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL);
  out->mem_base_addr_align_bits = align_bits;
  size_t extlen = 0;
  clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, 0, NULL, &extlen);
  char *ext = extlen ? malloc(extlen + 1) : NULL;
  if (ext) {
    ext[0] = 0;
    clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, extlen, ext, NULL);
    ext[extlen] = 0;
    out->has_fp64 = strstr(ext, "cl_khr_fp64") != NULL;
    out->has_int64_atomics = strstr(ext, "cl_khr_int64_base_atomics") != NULL;
    free(ext);
  }
  cl_device_fp_config fp = 0;
  if (clGetDeviceInfo(dev, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp, &fp, NULL) == CL_SUCCESS && fp)
    out->has_fp64 = 1;
  return CLB_OK;
}

clb_status clb_device_info_get(int index, clb_device_info *out) {
  if (!out) return clb__set_error(NULL, CLB_ERR_NULL, "clb_device_info_get: out is NULL");
  cl_uint np = 0;
  if (!get_platforms(&np)) return CLB_ERR_NO_DEVICE;
  int flat = 0;
  for (cl_uint i = 0; i < np; i++) {
    for (cl_uint j = 0; j < found.nd[i]; j++, flat++) {
      if (flat != index) continue;
      clb_status st = clb__device_describe(found.plats[i], found.devs[i][j], out);
      if (st != CLB_OK)
        return clb__set_error(NULL, st, "clb_device_info_get: out->struct_size %zu is below %zu (set it to sizeof(clb_device_info))",
                              out->struct_size, sizeof *out);
      out->platform_index = (int)i;
      out->device_index = (int)j;
      return st;
    }
  }
  return clb__set_error(NULL, CLB_ERR_NO_DEVICE, "clb_device_info_get: device index %d: there are %d devices", index, flat);
}

clb_status clb__device_at(int index, cl_platform_id *plat, cl_device_id *dev) {
  cl_uint np = 0;
  if (!get_platforms(&np)) return CLB_ERR_NO_DEVICE;
  int flat = 0;
  for (cl_uint i = 0; i < np; i++)
    for (cl_uint j = 0; j < found.nd[i]; j++, flat++)
      if (flat == index) {
        *plat = found.plats[i];
        *dev = found.devs[i][j];
        return CLB_OK;
      }
  return CLB_ERR_NO_DEVICE;
}

int clb__contains_ci(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++) {
    size_t i = 0;
    while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
    if (i == n) return 1;
  }
  return n == 0;
}

/* A selector is a decimal index or a case-insensitive substring. */
static int selector_matches(const char *sel, int index, const char *name) {
  if (!sel || !*sel) return 1;
  char *end = NULL;
  long v = strtol(sel, &end, 10);
  if (end && *end == 0 && end != sel) return v == index;
  return clb__contains_ci(name, sel);
}

static void list_devices(void) {
  clb__append_error(NULL, "; devices:");
  int flat = 0;
  for (cl_uint i = 0; i < found.np; i++)
    for (cl_uint j = 0; j < found.nd[i]; j++, flat++)
      clb__append_error(NULL, " [%d] platform %u \"%s\" device %u \"%s\";", flat, i, found.pname[i], j,
                        found.dname[i][j]);
}

clb_status clb__device_select(const char *platform, const char *device, cl_platform_id *plat,
                              cl_device_id *dev) {
  if (!platform) platform = clb__env_text(CLB_ENV_PLATFORM);
  if (!device) device = clb__env_text(CLB_ENV_DEVICE);
  cl_uint np = 0;
  if (!get_platforms(&np)) return CLB_ERR_NO_DEVICE;
  int flat = 0;
  int have_platform = platform && *platform;
  for (cl_uint i = 0; i < np; i++) {
    cl_uint nd = found.nd[i];
    if (have_platform && !selector_matches(platform, (int)i, found.pname[i])) {
      flat += (int)nd;
      continue;
    }
    for (cl_uint j = 0; j < nd; j++, flat++) {
      int idx = have_platform ? (int)j : flat;
      if (selector_matches(device, idx, found.dname[i][j])) {
        *plat = found.plats[i];
        *dev = found.devs[i][j];
        return CLB_OK;
      }
    }
  }
  clb__set_last_errmsg("no OpenCL device matches platform \"%s\" device \"%s\"",
                       have_platform ? platform : "(any)", device && *device ? device : "(any)");
  list_devices();
  return CLB_ERR_NO_DEVICE;
}
