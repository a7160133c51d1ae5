/* copy.h: the copy-kernel reference every bandwidth figure is a fraction of. */
#ifndef CLB_BENCH_COPY_H
#define CLB_BENCH_COPY_H

#include <stddef.h>

#include "clbound/clbound.h"

/* A plain buffer copy over the same bytes as the op, in the op's kernel family:
 * CPU style, one contiguous chunk of 64-byte vectors per work-item (local size 1,
 * as many work-items as the ops use); GPU style, a grid-stride loop of 16-byte
 * vectors. Built from source, outside the library's program cache. */
typedef struct copier {
  cl_command_queue q;
  cl_program prog;
  cl_kernel k;
  cl_mem a, b;
  size_t cap; /* bytes of a and b */
  int gpu;
  size_t global, local;
} copier;

/* Builds the kernel and two buffers of `cap` bytes (rounded up to 64) on ctx's
 * device, touched once. On failure err holds the OpenCL error. */
clb_status copier_init(clb_context_t ctx, size_t cap, copier *c, char *err, size_t elen);
void copier_free(copier *c);
/* Enqueues a copy of `bytes` (rounded up to 64) from a to b; no wait. */
cl_int copier_run(copier *c, size_t bytes);

#endif /* CLB_BENCH_COPY_H */
