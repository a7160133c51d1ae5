/* status.c: messages and names of clb_status codes, from the table in clbound/status.h.
 *
 * It lives in shapes/, the lowest layer, so that every layer (and the OpenCL-free
 * symbol engine) links the same table. */
#include "clbound/status.h"

const char *clb_status_str(clb_status st) {
  switch (st) {
#define CLB__STATUS_STR(name, value, msg) \
  case CLB_##name: return msg;
    CLB_STATUS_MAP(CLB__STATUS_STR)
#undef CLB__STATUS_STR
  }
  return "unknown status";
}

const char *clb_status_name(clb_status st) {
  switch (st) {
#define CLB__STATUS_NAME(name, value, msg) \
  case CLB_##name: return #name;
    CLB_STATUS_MAP(CLB__STATUS_NAME)
#undef CLB__STATUS_NAME
  }
  return "UNKNOWN";
}
