/* blas-threads.h: how many OpenBLAS threads one host-BLAS product uses
 * (runtime/ops/blas-threads.c; docs/gemm.md, Threads). Plain C, no OpenCL and
 * no BLAS: the rule is unit-tested on its own (tests/nn/test-blas-threads.c). */
#ifndef CLB_OPS_BLAS_THREADS_H
#define CLB_OPS_BLAS_THREADS_H

/* Products of at least CLB_BLAS_MANY_FLOPS (2 M N K) use OpenBLAS's own count,
 * whatever the load; under CLB_BLAS_ONE_FLOPS, one thread (the PoCL worker that
 * runs the native kernel). Between them, the load decides. */
#define CLB_BLAS_MANY_FLOPS (32.0 * 1024 * 1024)
#define CLB_BLAS_ONE_FLOPS (12.0 * 1024 * 1024)

/* The thread count for a product of `flops`, where `running` tasks are runnable
 * on the machine now, the caller included (/proc/loadavg's fourth field; < 0:
 * unknown), `cores` CPUs may run this process and OpenBLAS's own count is
 * `many`: between the two bounds, one thread plus one per idle core (cores -
 * running), at most `many`; unknown load or cores: one thread. Always in
 * [1, max(many, 1)]. */
int clb__blas_threads_rule(double flops, int running, int cores, int many);

/* The runnable count in the text of /proc/loadavg ("0.50 0.40 0.30 3/120
 * 4567": 3), or -1 when the text is not of that form. */
int clb__loadavg_running(const char *text);

/* The runnable count now, read from /proc/loadavg at most once per
 * CLB_BLAS_LOAD_CACHE_NS (threads share the last reading); -1 where it cannot
 * be read (no /proc): the rule then keeps one thread. */
#define CLB_BLAS_LOAD_CACHE_NS 2000000L
int clb__running_now(void);

/* The CPUs this process may run on (sched_getaffinity; else the online CPUs;
 * at least 1). */
int clb__cpus_for_process(void);

#endif /* CLB_OPS_BLAS_THREADS_H */
