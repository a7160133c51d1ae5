/* test-device-info.c: clb_device_info's strings hold what the driver returns.
 * PoCL's CL_DEVICE_VERSION is 65 bytes with its NUL ("OpenCL 3.0 PoCL HSTR:
 * pthread-x86_64-pc-linux-gnu-skylake-avx512");
 * before 0.2 the field was char[64] and such a string came back blank. Each
 * string field must equal the driver's string read here at its own size (or,
 * were one ever longer than the field, its start ending in "..."). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "cl-test.h"

/* The driver's own string, of any length; caller frees. */
static char *driver_str(cl_platform_id plat, cl_device_id dev, cl_uint what) {
  size_t n = 0;
  cl_int e = dev ? clGetDeviceInfo(dev, what, 0, NULL, &n) : clGetPlatformInfo(plat, what, 0, NULL, &n);
  char *s = calloc(n + 1, 1);
  if (!s) return NULL;
  if (e == CL_SUCCESS && n) e = dev ? clGetDeviceInfo(dev, what, n, s, NULL) : clGetPlatformInfo(plat, what, n, s, NULL);
  if (e != CL_SUCCESS) s[0] = 0;
  return s;
}

/* The field must be the driver's string, whole when it fits. */
static void check_field(const char *field, const char *got, size_t cap, char *want) {
  CLB_TEST_CASE("%s: driver gives %zu bytes \"%s\"", field, strlen(want), want);
  if (strlen(want) < cap) {
    EXPECT_EQ_S(got, want);
  } else {
    EXPECT_EQ_I(strlen(got), cap - 1);
    EXPECT_TRUE(strncmp(got, want, cap - 4) == 0);
    EXPECT_EQ_S(got + cap - 4, "...");
  }
  free(want);
}

int main(void) {
  int n = 0;
  REQUIRE_TRUE(clb_device_count(&n) == CLB_OK);
  cl_platform_id plats[16];
  cl_uint np = 0;
  REQUIRE_TRUE(clGetPlatformIDs(16, plats, &np) == CL_SUCCESS);
  size_t longest_version = 0;
  int flat = 0;
  for (cl_uint p = 0; p < np && p < 16; p++) {
    cl_device_id devs[64];
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 64, devs, &nd) != CL_SUCCESS) nd = 0;
    for (cl_uint d = 0; d < nd && d < 64; d++, flat++) {
      clb_device_info di;
      memset(&di, 0x5a, sizeof di); /* no byte of an earlier value may survive */
      di.struct_size = sizeof di;
      REQUIRE_TRUE(clb_device_info_get(flat, &di) == CLB_OK);
      const size_t cap = CLB_DEVICE_STRING_MAX;
      check_field("platform_name", di.platform_name, cap, driver_str(plats[p], NULL, CL_PLATFORM_NAME));
      check_field("name", di.name, cap, driver_str(NULL, devs[d], CL_DEVICE_NAME));
      check_field("vendor", di.vendor, cap, driver_str(NULL, devs[d], CL_DEVICE_VENDOR));
      check_field("driver_version", di.driver_version, cap, driver_str(NULL, devs[d], CL_DRIVER_VERSION));
      check_field("device_version", di.device_version, cap, driver_str(NULL, devs[d], CL_DEVICE_VERSION));
      check_field("opencl_c_version", di.opencl_c_version, cap,
                  driver_str(NULL, devs[d], CL_DEVICE_OPENCL_C_VERSION));
      CLB_TEST_CASE("device %d: CL_DEVICE_VERSION \"%s\"", flat, di.device_version);
      EXPECT_TRUE(strncmp(di.device_version, "OpenCL ", 7) == 0); /* never blank */
      if (strlen(di.device_version) > longest_version) longest_version = strlen(di.device_version);
    }
  }
  /* a struct_size too small is refused, nothing written, and the message names
   * the caller's value (it said "out->struct_size 0" for 1: the struct was
   * cleared before the check) */
  CLB_TEST_CASE("struct_size 1");
  clb_device_info small;
  memset(&small, 0x5a, sizeof small);
  small.struct_size = 1;
  EXPECT_EQ_I(clb_device_info_get(0, &small), CLB_ERR_INVALID_ARG);
  EXPECT_EQ_I(small.struct_size, 1);
  EXPECT_TRUE(strstr(clb_last_errmsg(), "out->struct_size 1 is below") != NULL);
  EXPECT_EQ_I((unsigned char)small.name[0], 0x5a);

  /* the case that broke: a version longer than the old 64-byte field */
  printf("longest CL_DEVICE_VERSION: %zu bytes with its NUL%s\n", longest_version + 1,
         longest_version + 1 > 64 ? " (more than the 64-byte field of clbound 0.1 held)" : "");
  return clb_test_finish("core/device-info");
}
