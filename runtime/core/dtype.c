/* dtype.c: element types: sizes, names, OpenCL C type names. */
#include "runtime/core/core.h"

const char *clb__dtype_cl(clb_dtype dt) {
  switch (dt) {
  case CLB_DTYPE_F32: return "float";
  case CLB_DTYPE_F64: return "double";
  case CLB_DTYPE_I32: return "int";
  case CLB_DTYPE_I64: return "long";
  case CLB_DTYPE_U8: return "uchar";
  case CLB_DTYPE_BOOL: return "uchar";
  default: return NULL;
  }
}

int clb__dtype_is_float(clb_dtype dt) { return dt == CLB_DTYPE_F32 || dt == CLB_DTYPE_F64; }

size_t clb_dtype_size(clb_dtype dt) {
  static const size_t sz[CLB_DTYPE_COUNT] = {4, 8, 4, 8, 1, 1};
  return (unsigned)dt < CLB_DTYPE_COUNT ? sz[dt] : 0;
}

const char *clb_dtype_name(clb_dtype dt) {
  static const char *nm[CLB_DTYPE_COUNT] = {"f32", "f64", "i32", "i64", "u8", "bool"};
  return (unsigned)dt < CLB_DTYPE_COUNT ? nm[dt] : "?";
}
