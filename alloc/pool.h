/* pool.h: the device memory pool (internal; its statistics reach users as counters).
 *
 * Fresh OpenCL buffers are expensive to touch the first time (about 1.5 ms per MiB
 * on PoCL), so freed buffers are kept and handed out again for requests of a
 * similar size. A limit caps what the pool may hold; past it, free buffers are
 * released first and only then is CLB_ERR_OOM returned. */
#ifndef CLB_ALLOC_POOL_H
#define CLB_ALLOC_POOL_H

#include <stddef.h>
#include <stdint.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "clbound/status.h"

typedef struct clb_pool clb_pool;

/* A buffer handed out by the pool, or a region of a graph's arena: the bytes
 * from `offset` in `mem`, at least `bytes` of them. Every user of the data
 * honours the offset (kernels take the pair: kernels/common.cl, CLB_DATA). */
typedef struct clb_buf {
  cl_mem mem;
  cl_ulong offset; /* bytes from the start of mem: 0 for the pool's buffers; a
                    * kernel argument as it is (CLB_ARG_DATA), hence cl_ulong */
  size_t bytes;    /* what was asked for */
  size_t capacity; /* what the region holds from offset */
  uint8_t exact;   /* made by clb__pool_get_exact: released when put, never kept */
  uint8_t borrowed; /* a region of a buffer owned elsewhere (a graph's arena or
                    * shape record, runtime/graph/memory.c), with one reference
                    * retained for it: put releases that reference; the bytes are
                    * not the pool's */
  int *held;       /* with borrowed: a flag of the buffer's owner, cleared when put */
  int *rec_ok;     /* a shape record of a graph's arena steps: set to 1 once its tensor's
                    * record is written (runtime/core/core.h, clb_mem_hook) */
  void *host;      /* the start of mem (not of the region: add offset) as the host
                    * sees it, where the device's buffers are host memory
                    * (runtime/core/hostptr.c), else NULL; kept while the cl_mem
                    * lives (the pool's free list keeps it) */
} clb_buf;

typedef struct clb_pool_stats {
  uint64_t live_bytes;   /* capacity handed out now */
  uint64_t held_bytes;   /* capacity held: live plus free for reuse */
  uint64_t peak_bytes;   /* the most held at once */
  uint64_t fresh;        /* cl_mem created */
  uint64_t reused;       /* requests served from the free list */
  uint64_t exact;        /* cl_mem created by clb__pool_get_exact (arenas) */
} clb_pool_stats;

/* Creates a pool over `cl` (retained). `limit` caps held bytes (0: no cap);
 * `max_alloc` is the device's largest single buffer. */
clb_status clb__pool_new(cl_context cl, uint64_t limit, uint64_t max_alloc, clb_pool **out);
/* Releases every buffer, live or free. NULL is a no-op. */
void clb__pool_free(clb_pool *p);

/* Hands out a buffer of at least `bytes` (0 is allowed and still gives a valid
 * cl_mem). On failure returns CLB_ERR_OOM or CLB_ERR_CL and writes the reason
 * into err[errlen]; the pool stays usable. */
clb_status clb__pool_get(clb_pool *p, size_t bytes, clb_buf *out, char *err, size_t errlen);
/* One cl_mem of exactly `bytes` (an arena), counted in the statistics and the
 * limit like any other, never kept for reuse: clb__pool_put or
 * clb__pool_release frees it at once. Errors as clb__pool_get. */
clb_status clb__pool_get_exact(clb_pool *p, size_t bytes, clb_buf *out, char *err, size_t errlen);
/* Frees a buffer now instead of keeping it. A zeroed clb_buf is a no-op. */
void clb__pool_release(clb_pool *p, clb_buf *b);
/* Returns a buffer to the free list (an exact buffer is released, a
 * borrowed region's reference released). A zeroed clb_buf is a no-op. */
void clb__pool_put(clb_pool *p, clb_buf *b);
/* Releases the free (not live) buffers. */
void clb__pool_trim(clb_pool *p);
void clb__pool_stats(const clb_pool *p, clb_pool_stats *out);

#endif /* CLB_ALLOC_POOL_H */
