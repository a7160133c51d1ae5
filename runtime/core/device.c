/* device.c: listing OpenCL devices, describing them, and choosing one. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/core.h"
#include "clbound/version.h"

#define CLB_MAX_PLATFORMS 16
#define CLB_MAX_DEVICES 64

const char *clb_version(void) { return CLBOUND_VERSION_STRING; }

static int get_platforms(cl_platform_id *plats, cl_uint *n) {
  cl_int e = clGetPlatformIDs(CLB_MAX_PLATFORMS, plats, n);
  if (e != CL_SUCCESS || *n == 0) {
    clb__set_last_errmsg(
        "no OpenCL platform found (%s, %d): install an OpenCL driver, e.g. Debian's "
        "pocl-opencl-icd, and the ICD loader ocl-icd-libopencl1",
        clb__cl_error_name(e), (int)e);
    *n = 0;
    return 0;
  }
  if (*n > CLB_MAX_PLATFORMS) *n = CLB_MAX_PLATFORMS;
  return 1;
}

static cl_uint get_devices(cl_platform_id p, cl_device_id *devs) {
  cl_uint n = 0;
  if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, CLB_MAX_DEVICES, devs, &n) != CL_SUCCESS) return 0;
  return n > CLB_MAX_DEVICES ? CLB_MAX_DEVICES : n;
}

clb_status clb_device_count(int *out) {
  if (!out) return CLB_ERR_NULL;
  *out = 0;
  cl_platform_id plats[CLB_MAX_PLATFORMS];
  cl_uint np = 0;
  if (!get_platforms(plats, &np)) return CLB_ERR_NO_DEVICE;
  cl_device_id devs[CLB_MAX_DEVICES];
  for (cl_uint i = 0; i < np; i++) *out += (int)get_devices(plats[i], devs);
  if (*out == 0) {
    clb__set_last_errmsg("OpenCL platforms found, but no device on any of them");
    return CLB_ERR_NO_DEVICE;
  }
  return CLB_OK;
}

static void str_info(cl_device_id d, cl_device_info what, char *buf, size_t len) {
  buf[0] = 0;
  if (clGetDeviceInfo(d, what, len, buf, NULL) != CL_SUCCESS) buf[0] = 0;
  buf[len - 1] = 0;
}

clb_status clb__device_describe(cl_platform_id plat, cl_device_id dev, clb_device_info *out) {
  size_t keep = out->struct_size;
  memset(out, 0, keep < sizeof *out ? keep : sizeof *out);
  if (keep < sizeof *out) return CLB_ERR_INVALID_ARG;
  out->struct_size = keep;
  clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof out->platform_name, out->platform_name, NULL);
  out->platform_name[sizeof out->platform_name - 1] = 0;
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
  if (!out) return CLB_ERR_NULL;
  cl_platform_id plats[CLB_MAX_PLATFORMS];
  cl_uint np = 0;
  if (!get_platforms(plats, &np)) return CLB_ERR_NO_DEVICE;
  int flat = 0;
  for (cl_uint i = 0; i < np; i++) {
    cl_device_id devs[CLB_MAX_DEVICES];
    cl_uint nd = get_devices(plats[i], devs);
    for (cl_uint j = 0; j < nd; j++, flat++) {
      if (flat != index) continue;
      clb_status st = clb__device_describe(plats[i], devs[j], out);
      out->platform_index = (int)i;
      out->device_index = (int)j;
      return st;
    }
  }
  clb__set_last_errmsg("device index %d: there are %d devices", index, flat);
  return CLB_ERR_NO_DEVICE;
}

static int ci_contains(const char *hay, const char *needle) {
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
  return ci_contains(name, sel);
}

static void list_devices(cl_platform_id *plats, cl_uint np) {
  clb__append_error(NULL, "; devices:");
  int flat = 0;
  for (cl_uint i = 0; i < np; i++) {
    char pname[128] = "";
    clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof pname, pname, NULL);
    pname[sizeof pname - 1] = 0;
    cl_device_id devs[CLB_MAX_DEVICES];
    cl_uint nd = get_devices(plats[i], devs);
    for (cl_uint j = 0; j < nd; j++, flat++) {
      char dname[128];
      str_info(devs[j], CL_DEVICE_NAME, dname, sizeof dname);
      clb__append_error(NULL, " [%d] platform %u \"%s\" device %u \"%s\";", flat, i, pname, j, dname);
    }
  }
}

clb_status clb__device_select(const char *platform, const char *device, cl_platform_id *plat,
                              cl_device_id *dev) {
  if (!platform) platform = getenv("CLBOUND_PLATFORM");
  if (!device) device = getenv("CLBOUND_DEVICE");
  cl_platform_id plats[CLB_MAX_PLATFORMS];
  cl_uint np = 0;
  if (!get_platforms(plats, &np)) return CLB_ERR_NO_DEVICE;
  int flat = 0;
  int have_platform = platform && *platform;
  for (cl_uint i = 0; i < np; i++) {
    char pname[128] = "";
    clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof pname, pname, NULL);
    pname[sizeof pname - 1] = 0;
    cl_device_id devs[CLB_MAX_DEVICES];
    cl_uint nd = get_devices(plats[i], devs);
    if (have_platform && !selector_matches(platform, (int)i, pname)) {
      flat += (int)nd;
      continue;
    }
    for (cl_uint j = 0; j < nd; j++, flat++) {
      char dname[128];
      str_info(devs[j], CL_DEVICE_NAME, dname, sizeof dname);
      int idx = have_platform ? (int)j : flat;
      if (selector_matches(device, idx, dname)) {
        *plat = plats[i];
        *dev = devs[j];
        return CLB_OK;
      }
    }
  }
  clb__set_last_errmsg("no OpenCL device matches platform \"%s\" device \"%s\"",
                       have_platform ? platform : "(any)", device && *device ? device : "(any)");
  list_devices(plats, np);
  return CLB_ERR_NO_DEVICE;
}
