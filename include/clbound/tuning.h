/* clbound/tuning.h: CLBlast's tuned parameters per device (`clbound tune`).
 *
 * CLBlast's tuners (Debian's clblast-utils) measure kernel parameters for one
 * device; clbound keeps the best ones in one JSON file per device next to the
 * program cache, keyed by the device's name and driver version, and a context
 * hands them to CLBlastOverrideParameters before its first CLBlast call. A file
 * that is damaged, or that was written for another device or driver, is
 * ignored with a log line (CLBOUND_LOG=gemm), never applied (docs/gemm.md). */
#ifndef CLB_TUNING_H
#define CLB_TUNING_H

#include "clbound/runtime.h"

#define CLB_TUNING_MAX_PARAMS 24
#define CLB_TUNING_MAX_ENTRIES 16

/* One tuned CLBlast kernel. */
typedef struct clb_tuning_entry {
  char kernel[32];   /* CLBlast's kernel name: Xgemm, XgemmDirect, Copy, Pad, Transpose, Padtranspose */
  int precision;     /* 32 or 64 */
  double time_ms;    /* the tuner's time for the best parameters */
  double gflops;     /* the tuner's figure for them (GB/s for the copy kernels); 0 if it printed none */
  int measured;      /* configurations the tuner measured with results matching its reference */
  int nparams;
  char names[CLB_TUNING_MAX_PARAMS][16];
  long values[CLB_TUNING_MAX_PARAMS];
} clb_tuning_entry;

typedef enum clb_tuning_state {
  CLB_TUNING_ABSENT = 0,       /* no file */
  CLB_TUNING_OK = 1,           /* a whole file for this device and driver */
  CLB_TUNING_DAMAGED = 2,      /* unreadable, cut off, checksum or field wrong: ignored */
  CLB_TUNING_OTHER_DEVICE = 3  /* written for another device name or driver version: ignored */
} clb_tuning_state;

/* Parses a CLBlast tuner's standard output (all of it, or what it printed
 * before it was stopped; colour codes allowed) into the best configuration: the
 * smallest time among rows whose status is "results match". The parameter
 * names come from the last "Parameters explored:" line before the row.
 * `kernel` and `precision` are copied into *best. CLB_ERR_PARSE (message in
 * clb_last_errmsg) when no row matched. */
CLB_API clb_status clb_tuning_parse(const char *text, size_t len, const char *kernel, int precision,
                                    clb_tuning_entry *best);

/* The tuning file of `dev` in `cache_dir` (NULL: the program cache's default
 * folder, clb_cache_default_dir): <dir>/tuning-<hash of name and driver>.json.
 * CLB_ERR_INVALID_ARG when the cache is off; CLB_ERR_BUFFER_SMALL. */
CLB_API clb_status clb_tuning_path(cl_device_id dev, const char *cache_dir, char *buf, size_t cap);

/* Writes n entries for `dev` to `path` atomically (a temporary file, then a
 * rename), with the device's name, driver version and a checksum. */
CLB_API clb_status clb_tuning_save(cl_device_id dev, const char *path, const clb_tuning_entry *entries, int n);

/* Reads `path` for `dev`: up to cap entries into entries[] (*n of them) when
 * the state is CLB_TUNING_OK; why[whycap] says what was wrong otherwise. */
CLB_API clb_tuning_state clb_tuning_load(cl_device_id dev, const char *path, clb_tuning_entry *entries, int cap,
                                         int *n, char *why, size_t whycap);

/* The CLBlast kernels this context's tuning file set (CLBlastOverrideParameters
 * returned success for each), less those this context put back to CLBlast's own
 * parameters after a GEMM failed with them (docs/failure-behaviour.md): -1
 * before the context's first CLBlast call, 0 when no file applied (none,
 * damaged, another device, CLBOUND_CLBLAST_TUNING=off). */
CLB_API int clb_context_clblast_tuned(clb_context_t ctx);

#endif /* CLB_TUNING_H */
