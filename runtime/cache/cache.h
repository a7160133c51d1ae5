/* cache.h: runtime/cache, the program cache of a context (each (source, options)
 * built once) and the persistent cache of program binaries on disk. The ops and
 * the graph get their kernels here. */
#ifndef CLB_CACHE_INTERNAL_H
#define CLB_CACHE_INTERNAL_H

#include "runtime/core/core.h"

/* An embedded kernel source (cmake/embed.cmake output). */
typedef struct clb_kernel_src {
  const char *name; /* file name without .cl */
  const char *text;
  size_t len;
} clb_kernel_src;

/* kernels-embedded.c, generated: common.cl and every other kernel file. */
extern const clb_kernel_src clb__kernel_sources[];
extern const size_t clb__kernel_source_count;
const clb_kernel_src *clb__kernel_src_find(const char *name);

/* ---- program-cache.c ------------------------------------------------------ */

/* The kernel `kernel` of the program made of common.cl + kernels/<src>.cl built
 * with `options`, building it (counted) the first time. Borrowed: the cache owns
 * it. `op` names the caller in error messages. The context's first call makes its
 * program cache and opens its disk cache. */
clb_status clb__kernel_get(clb_context_t ctx, const char *op, const char *src,
                           const char *options, const char *kernel, cl_kernel *out);

/* ---- disk-cache.c --------------------------------------------------------- */

/* Picks and prepares the cache folder: the option, else the environment, else the
 * default. An unusable folder turns the cache off with one logged warning. */
void clb__disk_cache_init(clb_context_t ctx, const char *option);
/* Tries to load a program for `key` from disk; *out NULL on a miss (a bad entry
 * is logged, removed and counts as a miss). */
void clb__disk_cache_load(clb_context_t ctx, const char *key, cl_program *out);
/* Removes the entry of `key` (its program failed after loading), logging why. */
void clb__disk_cache_drop(clb_context_t ctx, const char *key, const char *why);
/* The name of the empty kernel that every program built for `key` carries, so
 * that a program loaded from disk proves which key it was built for. */
#define CLB_PROGRAM_ID_MAX 48
void clb__program_identity(const char *key, char *buf, size_t cap);
/* Stores a built program's binary under `key` (write to a temporary, rename). */
void clb__disk_cache_store(clb_context_t ctx, const char *key, cl_program prog);

/* Makes the context's program cache and opens its disk cache, once; registers
 * their release with the context. */
clb_status clb__cache_open(clb_context_t ctx);

#endif /* CLB_CACHE_INTERNAL_H */
