/* errors.c: detail messages per context (the thread's message for calls with no
 * context lives in shapes/errors.c, the lowest layer), and OpenCL error names. */
#include <stdio.h>
#include <string.h>

#include "runtime/core/core.h"

static char *msg_buf(clb_context_t ctx, size_t *len) {
  if (ctx) {
    *len = sizeof ctx->errmsg;
    return ctx->errmsg;
  }
  return clb__last_errmsg_buf(len);
}

clb_status clb__set_error(clb_context_t ctx, clb_status st, const char *fmt, ...) {
  size_t len;
  char *buf = msg_buf(ctx, &len);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, len, fmt, ap);
  va_end(ap);
  return st;
}

void clb__append_error(clb_context_t ctx, const char *fmt, ...) {
  size_t len;
  char *buf = msg_buf(ctx, &len);
  size_t used = strlen(buf);
  if (used + 1 >= len) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + used, len - used, fmt, ap);
  va_end(ap);
}

clb_status clb__cl_error(clb_context_t ctx, cl_int err, const char *fmt, ...) {
  size_t len;
  char *buf = msg_buf(ctx, &len);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, len, fmt, ap);
  va_end(ap);
  clb__append_error(ctx, " (%s, %d)", clb__cl_error_name(err), (int)err);
  if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
      err == CL_OUT_OF_HOST_MEMORY)
    return CLB_ERR_OOM;
  return CLB_ERR_CL;
}

const char *clb__cl_error_name(cl_int err) {
  switch (err) {
#define N(x) \
  case x: return #x;
    N(CL_SUCCESS) N(CL_DEVICE_NOT_FOUND) N(CL_DEVICE_NOT_AVAILABLE)
    N(CL_COMPILER_NOT_AVAILABLE) N(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    N(CL_OUT_OF_RESOURCES) N(CL_OUT_OF_HOST_MEMORY) N(CL_PROFILING_INFO_NOT_AVAILABLE)
    N(CL_MEM_COPY_OVERLAP) N(CL_IMAGE_FORMAT_MISMATCH) N(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    N(CL_BUILD_PROGRAM_FAILURE) N(CL_MAP_FAILURE) N(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    N(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) N(CL_COMPILE_PROGRAM_FAILURE)
    N(CL_LINKER_NOT_AVAILABLE) N(CL_LINK_PROGRAM_FAILURE) N(CL_DEVICE_PARTITION_FAILED)
    N(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) N(CL_INVALID_VALUE) N(CL_INVALID_DEVICE_TYPE)
    N(CL_INVALID_PLATFORM) N(CL_INVALID_DEVICE) N(CL_INVALID_CONTEXT)
    N(CL_INVALID_QUEUE_PROPERTIES) N(CL_INVALID_COMMAND_QUEUE) N(CL_INVALID_HOST_PTR)
    N(CL_INVALID_MEM_OBJECT) N(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) N(CL_INVALID_IMAGE_SIZE)
    N(CL_INVALID_SAMPLER) N(CL_INVALID_BINARY) N(CL_INVALID_BUILD_OPTIONS)
    N(CL_INVALID_PROGRAM) N(CL_INVALID_PROGRAM_EXECUTABLE) N(CL_INVALID_KERNEL_NAME)
    N(CL_INVALID_KERNEL_DEFINITION) N(CL_INVALID_KERNEL) N(CL_INVALID_ARG_INDEX)
    N(CL_INVALID_ARG_VALUE) N(CL_INVALID_ARG_SIZE) N(CL_INVALID_KERNEL_ARGS)
    N(CL_INVALID_WORK_DIMENSION) N(CL_INVALID_WORK_GROUP_SIZE) N(CL_INVALID_WORK_ITEM_SIZE)
    N(CL_INVALID_GLOBAL_OFFSET) N(CL_INVALID_EVENT_WAIT_LIST) N(CL_INVALID_EVENT)
    N(CL_INVALID_OPERATION) N(CL_INVALID_GL_OBJECT) N(CL_INVALID_BUFFER_SIZE)
    N(CL_INVALID_MIP_LEVEL) N(CL_INVALID_GLOBAL_WORK_SIZE) N(CL_INVALID_PROPERTY)
    N(CL_INVALID_IMAGE_DESCRIPTOR) N(CL_INVALID_COMPILER_OPTIONS) N(CL_INVALID_LINKER_OPTIONS)
    N(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef N
  case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
  default: return "unknown OpenCL error";
  }
}
