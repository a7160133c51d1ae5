/* clbound/dataops.h: ops whose output size depends on data (nonzero,
 * masked_select, masked_scatter); their counts stay on the device. */
#ifndef CLB_DATAOPS_H
#define CLB_DATAOPS_H

#include "clbound/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif /* CLB_DATAOPS_H */
