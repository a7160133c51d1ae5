/* clbound/version.h: the library's version, as macros and at run time. */
#ifndef CLB_VERSION_H
#define CLB_VERSION_H

#include "clbound/export.h"

#define CLBOUND_VERSION_MAJOR 0
#define CLBOUND_VERSION_MINOR 2
#define CLBOUND_VERSION_PATCH 0
#define CLBOUND_VERSION_STRING "0.2.0"

#ifdef __cplusplus
extern "C" {
#endif

/* Returns the version string of the library actually linked, e.g. "0.2.0". */
CLB_API const char *clb_version(void);

#ifdef __cplusplus
}
#endif
#endif /* CLB_VERSION_H */
