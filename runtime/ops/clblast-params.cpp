// clblast-params.cpp: clb__clblast_params (clblast-params.h), the one C++ file
// of the library, for clblast::RetrieveParameters, which CLBlast's C API lacks.
#include "runtime/ops/clblast-params.h"

#include <clblast.h>
#include <clblast_c.h>

#include <cstring>
#include <string>
#include <unordered_map>

extern "C" int clb__clblast_params(cl_device_id dev, const char *kernel, int precision,
                                   char (*names)[CLB_CLBLAST_PARAM_NAME], long *values, int cap, int *n) {
  *n = 0;
  try {
    std::unordered_map<std::string, size_t> params;
    clblast::StatusCode st = clblast::RetrieveParameters(
        dev, kernel, precision == 64 ? clblast::Precision::kDouble : clblast::Precision::kSingle, params);
    if (st != clblast::StatusCode::kSuccess) return static_cast<int>(st);
    if (params.size() > static_cast<size_t>(cap)) return CLBlastUnexpectedError;
    int k = 0;
    for (const auto &p : params) {
      if (p.first.size() >= CLB_CLBLAST_PARAM_NAME) return CLBlastUnexpectedError;
      std::memcpy(names[k], p.first.c_str(), p.first.size() + 1);
      values[k++] = static_cast<long>(p.second);
    }
    *n = k;
    return CLBlastSuccess;
  } catch (...) {
    return CLBlastUnexpectedError;
  }
}
