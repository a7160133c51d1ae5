/* clbound/status.h: status codes shared by every layer, generated from one table.
 *
 * This header needs no OpenCL: the symbol engine (shapes/) uses it too. */
#ifndef CLB_STATUS_H
#define CLB_STATUS_H

#include "clbound/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, message). Success is 0; every error is negative. Values are part
 * of the ABI: append new codes, never renumber. */
#define CLB_STATUS_MAP(X)                                                          \
  X(OK, 0, "success")                                                              \
  X(ERR_INVALID_ARG, -1, "invalid argument")                                       \
  X(ERR_NULL, -2, "NULL handle or pointer")                                        \
  X(ERR_OUT_OF_BOUNDS, -3, "size outside its bound")                               \
  X(ERR_SHAPE, -4, "shapes do not match or broadcast")                             \
  X(ERR_DTYPE, -5, "unsupported or mismatched dtype")                              \
  X(ERR_RANK, -6, "rank outside 0..8")                                             \
  X(ERR_OOM, -7, "out of device memory")                                           \
  X(ERR_HOST_OOM, -8, "out of host memory")                                        \
  X(ERR_CL, -9, "OpenCL call failed")                                              \
  X(ERR_BUILD, -10, "kernel program build failed")                                 \
  X(ERR_NO_DEVICE, -11, "no matching OpenCL platform or device")                   \
  X(ERR_BOUND_EXCEEDED, -12, "a size computed on the device exceeded its bound")   \
  X(ERR_SHORT_SOURCE, -13, "masked_scatter source has fewer elements than mask bits") \
  X(ERR_DEVICE_CHECK, -14, "a deferred device check failed")                       \
  X(ERR_UNSUPPORTED, -15, "not supported on this device")                          \
  X(ERR_PARSE, -16, "cannot parse expression")                                     \
  X(ERR_CONTRADICTION, -17, "dims cannot be equal")                                \
  X(ERR_GUARD, -18, "a guard failed")                                              \
  X(ERR_IO, -19, "file input/output failed")                                       \
  X(ERR_EMPTY_REDUCE, -20, "reduction over an empty extent")                       \
  X(ERR_DIV_ZERO, -21, "integer division by zero")                                 \
  X(ERR_BUFFER_SMALL, -22, "caller's buffer too small")                            \
  X(ERR_INTERNAL, -23, "internal error")                                           \
  X(ERR_INDEX, -24, "index out of range")

typedef enum clb_status {
#define CLB__STATUS_ENUM(name, value, msg) CLB_##name = value,
  CLB_STATUS_MAP(CLB__STATUS_ENUM)
#undef CLB__STATUS_ENUM
} clb_status;

/* Returns the fixed message of a status ("out of device memory"); never NULL.
 * An unknown value gives "unknown status". */
CLB_API const char *clb_status_str(clb_status st);

/* Returns the enum name of a status without the prefix ("ERR_OOM"); never NULL. */
CLB_API const char *clb_status_name(clb_status st);

#ifdef __cplusplus
}
#endif
#endif /* CLB_STATUS_H */
