/* clbound/clbound.h: the umbrella header of clbound, a runtime for tensor programs
 * whose shapes change within bounds, on any OpenCL device. */
#ifndef CLB_CLBOUND_H
#define CLB_CLBOUND_H

#include "clbound/export.h"
#include "clbound/version.h"
#include "clbound/status.h"
#include "clbound/runtime.h"
#include "clbound/ops.h"
#include "clbound/dataops.h"
#include "clbound/nn.h"
#include "clbound/shapes.h"
#include "clbound/graph.h"
#include "clbound/interop.h"
#include "clbound/tuning.h"

#endif /* CLB_CLBOUND_H */
