/* blas-threads.c: OpenBLAS's thread count per host-BLAS product, from the
 * product's size and the machine's load (blas-threads.h; docs/gemm.md, Threads).
 *
 * Why the load: on a 2-core machine a 16 MFLOP product (0.2-0.3 ms) runs about
 * 0.1 ms faster on two threads than on one when the second core is idle, but
 * 1.6-2.5 ms slower when another process keeps it busy: OpenBLAS's master
 * thread waits for its helper's half, and the helper waits for a time slice.
 * The number of runnable tasks at the moment of the product says whether a core
 * is idle; it is one line of /proc/loadavg, read at most every 2 ms. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "runtime/ops/blas-threads.h"

int clb__blas_threads_rule(double flops, int running, int cores, int many) {
  if (many < 1) many = 1;
  if (flops >= CLB_BLAS_MANY_FLOPS) return many;
  if (flops < CLB_BLAS_ONE_FLOPS || running < 1 || cores < 1) return 1;
  int idle = cores - running; /* the caller is one of the running tasks */
  if (idle < 1) return 1;
  return 1 + idle < many ? 1 + idle : many;
}

int clb__loadavg_running(const char *text) {
  double l1, l5, l15;
  int running, total;
  if (!text || sscanf(text, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total) != 5) return -1;
  return running >= 0 && running <= total ? running : -1;
}

static long now_ns(void) {
  struct timespec ts;
#ifdef CLOCK_MONOTONIC_COARSE
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0) return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
#endif
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* The last reading and when it was taken (0: never); a race between two
 * threads at most reads the file twice. */
static long last_ns;
static int last_running = -1;

int clb__running_now(void) {
  long t = now_ns(), seen = __atomic_load_n(&last_ns, __ATOMIC_ACQUIRE);
  if (seen != 0 && t - seen < CLB_BLAS_LOAD_CACHE_NS) return __atomic_load_n(&last_running, __ATOMIC_RELAXED);
  int running = -1;
  int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[128];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n > 0) {
      buf[n] = '\0';
      running = clb__loadavg_running(buf);
    }
  }
  __atomic_store_n(&last_running, running, __ATOMIC_RELAXED);
  __atomic_store_n(&last_ns, t, __ATOMIC_RELEASE);
  return running;
}

int clb__cpus_for_process(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 && n < 1 << 20 ? (int)n : 1;
}
