/* blas-threads.h: how many threads run the blocks of one host-BLAS product
 * (runtime/ops/blas-threads.c; docs/gemm.md, Threads). Plain C, no OpenCL and
 * no BLAS: the rule is unit-tested on its own (tests/nn/test-blas-threads.c). */
#ifndef CLB_OPS_BLAS_THREADS_H
#define CLB_OPS_BLAS_THREADS_H

/* Products of at least CLB_BLAS_MANY_FLOPS (2 M N K) use OpenBLAS's own count
 * (one per core), whatever the load; under CLB_BLAS_ONE_FLOPS, one thread (the PoCL worker that
 * runs the native kernel). Between them, the load decides. */
#define CLB_BLAS_MANY_FLOPS (32.0 * 1024 * 1024)
#define CLB_BLAS_ONE_FLOPS (12.0 * 1024 * 1024)

/* The thread count for a product of `flops`, where `running` tasks are runnable
 * now, the caller included (clb__running_now; < 0: unknown), `cores` CPUs may
 * run this process and OpenBLAS's own count is `many`: between the two bounds,
 * one thread plus one per idle core (cores - running), at most `many`; unknown
 * load or cores: one thread. Always in [1, max(many, 1)]. */
int clb__blas_threads_rule(double flops, int running, int cores, int many);

/* The busy time of the whole machine in the text of /proc/stat (its first
 * line, "cpu  user nice system idle iowait irq softirq steal ..."): *busy =
 * user + nice + system + irq + softirq + steal, in clock ticks; -1 when the
 * text is not of that form. */
int clb__proc_stat_busy(const char *text, long long *busy);

/* How many cores other processes kept busy over a window of elapsed_ns: the
 * machine's busy ticks (at ticks_per_s) less this process's CPU time (own_ns),
 * per elapsed time; a core counts from CLB_BLAS_BUSY_SHARE of it on (0.1:
 * none, 0.6: one, 1.5: one, 1.6: two); -1 for an empty window or no tick rate. */
#define CLB_BLAS_BUSY_SHARE 0.5
int clb__others_busy(long long busy_ticks, long ticks_per_s, long long own_ns, long long elapsed_ns);

/* The runnable count for the rule: 1 (the caller) plus the cores other
 * processes kept busy since the last sample (clb__others_busy over /proc/stat
 * and this process's CPU time, CLOCK_PROCESS_CPUTIME_ID), sampled at most once
 * per CLB_BLAS_LOAD_WINDOW_NS; this process's own threads (its host thread,
 * PoCL's workers, the blocks' helper threads) never count. -1 before the second sample
 * or where /proc/stat cannot be read: the rule then keeps one thread. */
#define CLB_BLAS_LOAD_WINDOW_NS 100000000LL
int clb__running_now(void);

/* The CPUs this process may run on (sched_getaffinity; else the online CPUs;
 * at least 1). */
int clb__cpus_for_process(void);

#endif /* CLB_OPS_BLAS_THREADS_H */
