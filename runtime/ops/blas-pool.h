/* blas-pool.h: the threads that run blocks of a host-BLAS product beside the
 * PoCL worker that runs the native kernel (runtime/ops/blas-pool.c;
 * docs/gemm.md, Threads). Plain C and pthreads, no OpenCL and no BLAS: the pool
 * is unit-tested on its own (tests/nn/test-blas-pool.c). */
#ifndef CLB_OPS_BLAS_POOL_H
#define CLB_OPS_BLAS_POOL_H

/* At most this many helper threads, and this many blocks in a job. */
#define CLB_POOL_MAX_HELPERS 63
#define CLB_POOL_MAX_BLOCKS 1024

/* One block of a job: fn(arg, block, blocks) for block in [0, blocks). */
typedef void (*clb_pool_fn)(void *arg, int block, int blocks);

/* What a clb__pool_run did: the helpers it woke, the blocks they ran, and the
 * CPU the calling thread was on when it woke them, which they were kept off
 * (-1: not known, or no helper woken). */
typedef struct clb_pool_report {
  int helpers, helper_blocks;
  int caller_cpu;
} clb_pool_report;

/* Runs fn(arg, b, blocks) for every b in [0, blocks) and returns when all have
 * returned. The calling thread and up to threads - 1 helper threads take the
 * blocks in turn (a shared counter), so which thread runs a block depends on
 * timing but the blocks do not: a result computed block by block is the same
 * whatever the thread count. Helpers are started on first use and may not run
 * on the CPU the calling thread is on (so the scheduler cannot put one on the
 * caller's core while another core is idle). A helper that wakes after every
 * block is taken does nothing and delays nothing. Where a helper cannot be
 * started, or another thread is using the pool, the calling thread runs the
 * blocks itself: every block runs exactly once, and the call never fails.
 * report may be NULL. */
void clb__pool_run(clb_pool_fn fn, void *arg, int blocks, int threads, clb_pool_report *report);

/* The helper threads running now (for tests). */
int clb__pool_helpers(void);

#endif /* CLB_OPS_BLAS_POOL_H */
