/* clblast-params.h: the parameters CLBlast uses for one of its kernels, read
 * through its C++ API (clblast-params.cpp): its C API can set parameters
 * (CLBlastOverrideParameters) but not read them back. */
#ifndef CLB_OPS_CLBLAST_PARAMS_H
#define CLB_OPS_CLBLAST_PARAMS_H

#include <CL/cl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest parameter name, with its NUL, that clb__clblast_params hands back. */
#define CLB_CLBLAST_PARAM_NAME 16

/* The parameters in force for CLBlast's `kernel` at `precision` (32 or 64) on
 * `dev`: an override set earlier in the process, else CLBlast's database for
 * the device (clblast::RetrieveParameters). Up to cap names and values into
 * names[] and values[], *n of them, in no set order. Returns CLBlast's status:
 * 0 on success, else its error, or CLBlastUnexpectedError (-2039) when its C++
 * code threw or the parameters do not fit (more than cap, or a name of
 * CLB_CLBLAST_PARAM_NAME characters or more). Never throws. Thread-safe as
 * CLBlast is (its caches take locks). */
int clb__clblast_params(cl_device_id dev, const char *kernel, int precision, char (*names)[CLB_CLBLAST_PARAM_NAME],
                        long *values, int cap, int *n);

#ifdef __cplusplus
}
#endif
#endif /* CLB_OPS_CLBLAST_PARAMS_H */
