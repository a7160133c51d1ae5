/* blas-threads.c: the thread count per host-BLAS product, from the
 * product's size and the machine's load (blas-threads.h; docs/gemm.md, Threads).
 *
 * Why the load: on a 2-core machine a 16 MFLOP product (0.2-0.3 ms) runs
 * about a third faster on two threads than on one when the second core is
 * idle, but several times slower (1.6-8 ms) when another process keeps it
 * busy: OpenBLAS's master thread waits for its helper's half, and the helper
 * waits for a time slice. What other processes used of the cores over the last
 * 0.1 s says whether a core is idle: the machine's busy time from /proc/stat
 * less this process's own CPU time (a snapshot of the runnable count in
 * /proc/loadavg was tried first: it counts this process's own host thread,
 * which is often still returning from its enqueue, and reading each thread's
 * state to discount it cost 0.1 ms). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
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

int clb__proc_stat_busy(const char *text, long long *busy) {
  unsigned long long v[8] = {0};
  if (!text || strncmp(text, "cpu ", 4) != 0) return -1;
  int n = sscanf(text + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                 &v[6], &v[7]);
  if (n < 4) return -1;
  /* user nice system [idle iowait] irq softirq steal: steal is time the host
   * machine took, not ours to use either */
  *busy = (long long)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]);
  return 0;
}

int clb__others_busy(long long busy_ticks, long ticks_per_s, long long own_ns, long long elapsed_ns) {
  if (ticks_per_s <= 0 || elapsed_ns <= 0) return -1;
  double others = ((double)busy_ticks / (double)ticks_per_s * 1e9 - (double)own_ns) / (double)elapsed_ns;
  if (others <= CLB_BLAS_BUSY_SHARE) return 0;
  double over = others - CLB_BLAS_BUSY_SHARE;
  int n = (int)over;
  return n < over ? n + 1 : n; /* a core counts once more than the share of it is used */
}

static long long now_ns(clockid_t clock) {
  struct timespec ts;
  if (clock_gettime(clock, &ts) != 0) return -1;
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long read_busy(void) {
  int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[256];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  long long busy;
  return clb__proc_stat_busy(buf, &busy) == 0 ? busy : -1;
}

/* The last sample (the machine's busy ticks, this process's CPU time, when)
 * and the count it gave; one thread at a time refreshes them (the others use
 * the last count meanwhile). */
static pthread_mutex_t sample_lock = PTHREAD_MUTEX_INITIALIZER;
static long long last_busy = -1, last_own, last_at;
static int last_running = -1;

int clb__running_now(void) {
  long long t = now_ns(CLOCK_MONOTONIC);
  if (pthread_mutex_trylock(&sample_lock) != 0) return __atomic_load_n(&last_running, __ATOMIC_RELAXED);
  int running = last_running;
  if (last_busy < 0 || t - last_at >= CLB_BLAS_LOAD_WINDOW_NS) {
    long long busy = read_busy(), own = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    running = -1;
    if (busy >= 0 && own >= 0 && last_busy >= 0) {
      int others = clb__others_busy(busy - last_busy, sysconf(_SC_CLK_TCK), own - last_own, t - last_at);
      if (others >= 0) running = 1 + others;
    }
    last_busy = busy, last_own = own, last_at = t;
    __atomic_store_n(&last_running, running, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&sample_lock);
  return running;
}

int clb__cpus_for_process(void) {
  cpu_set_t set; /* the main thread's mask: the caller may be a PoCL worker pinned by POCL_AFFINITY */
  if (sched_getaffinity(getpid(), sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 && n < 1 << 20 ? (int)n : 1;
}
