/* test-blas-pool.c: the helper threads that run blocks of a host-BLAS product
 * (runtime/ops/blas-pool.c; docs/gemm.md, Threads): every block runs exactly
 * once whatever the thread count, helpers never on the caller's CPU, a helper
 * that takes a block delays the caller until it is done and one that comes late
 * takes nothing, two callers at once (the one that finds the pool busy runs its
 * blocks itself), many jobs back to back (no lost wake-up), and a forked child,
 * which has none of the parent's helpers, starts its own. Plain C and pthreads;
 * no OpenCL. */
#define _GNU_SOURCE /* sched_getcpu, CPU_COUNT */
#include <fenv.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/ops/blas-pool.h"
#include "test.h"

#define MAXP 40

typedef struct job {
  atomic_int runs[MAXP];  /* times each block ran */
  pthread_t who[MAXP];    /* the thread that ran it */
  int cpu[MAXP];          /* the CPU it was on at its end */
  int blocks_seen[MAXP];
  long spin;              /* busy work per block */
  atomic_int running;     /* blocks running now */
  int rendezvous;         /* a block waits (up to 5 s) until two run at once */
  int round[MAXP];        /* the rounding mode it ran under */
  atomic_int most;        /* the most blocks seen running at once */
} job;

static double secs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void part_fn(void *arg, int block, int blocks) {
  job *j = arg;
  int now = atomic_fetch_add(&j->running, 1) + 1;
  if (now > atomic_load(&j->most)) atomic_store(&j->most, now);
  for (double t0 = secs(); j->rendezvous && atomic_load(&j->running) < 2 && secs() - t0 < 5;) continue;
  if (atomic_load(&j->running) > atomic_load(&j->most)) atomic_store(&j->most, atomic_load(&j->running));
  volatile long x = 0;
  for (long i = 0; i < j->spin; i++) x += i;
  j->who[block] = pthread_self();
  j->blocks_seen[block] = blocks;
  j->cpu[block] = sched_getcpu();
  j->round[block] = fegetround();
  atomic_fetch_add(&j->runs[block], 1);
  atomic_fetch_sub(&j->running, 1);
}

static int cpus(void) {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

/* Runs one job of `blocks` on up to `threads` and checks what every caller can
 * rely on. */
static clb_pool_report run_checked_r(int blocks, int threads, long spin, int rendezvous, const char *what) {
  job j;
  memset(&j, 0, sizeof j);
  j.spin = spin;
  j.rendezvous = rendezvous;
  clb_pool_report r;
  clb__pool_run(part_fn, &j, blocks, threads, &r);
  CLB_TEST_CASE(what);
  int by_caller = 0, distinct = 0;
  for (int b = 0; b < blocks; b++) {
    int seen_before = 0;
    for (int q = 0; q < b; q++) seen_before |= pthread_equal(j.who[q], j.who[b]);
    distinct += !seen_before;
    EXPECT_EQ_I(j.round[b], fegetround()); /* the caller's floating-point environment */
    EXPECT_EQ_I(atomic_load(&j.runs[b]), 1);
    EXPECT_EQ_I(j.blocks_seen[b], blocks);
    if (pthread_equal(j.who[b], pthread_self())) by_caller++;
    /* a helper is kept off the CPU the caller was on when it woke them */
    else if (r.caller_cpu >= 0 && cpus() > 1) EXPECT_TRUE(j.cpu[b] != r.caller_cpu);
  }
  for (int b = blocks; b < MAXP; b++) EXPECT_EQ_I(atomic_load(&j.runs[b]), 0);
  EXPECT_EQ_I(atomic_load(&j.running), 0); /* nothing runs after the call returned */
  EXPECT_TRUE(distinct <= threads); /* no helper joins a job it was not woken for */
  EXPECT_EQ_I(r.helper_blocks, blocks - by_caller);
  EXPECT_TRUE(r.helpers >= 0 && r.helpers <= threads - 1 && r.helpers <= blocks - 1);
  if (rendezvous) EXPECT_TRUE(atomic_load(&j.most) >= 2);
  return r;
}

static clb_pool_report run_checked(int blocks, int threads, long spin, const char *what) {
  return run_checked_r(blocks, threads, spin, 0, what);
}

typedef struct racer {
  int helpers_total, jobs;
} racer;

static void *race_main(void *p) {
  racer *rc = p;
  for (int i = 0; i < 200; i++) {
    job j;
    memset(&j, 0, sizeof j);
    j.spin = 2000;
    clb_pool_report r;
    clb__pool_run(part_fn, &j, 3, 3, &r);
    int ok = atomic_load(&j.running) == 0;
    for (int q = 0; q < 3; q++) ok &= atomic_load(&j.runs[q]) == 1;
    rc->jobs += ok;
    rc->helpers_total += r.helpers;
  }
  return NULL;
}

int main(void) {
  clb_pool_report r = run_checked(1, 4, 1000, "one block: the caller alone, no helper started");
  EXPECT_EQ_I(r.helpers, 0);
  EXPECT_EQ_I(clb__pool_helpers(), 0);
  r = run_checked(4, 1, 1000, "four blocks on one thread: the caller runs them in turn");
  EXPECT_EQ_I(r.helper_blocks, 0);
  EXPECT_EQ_I(clb__pool_helpers(), 0);
  clb__pool_run(part_fn, NULL, 0, 2, &r); /* no block: nothing runs (fn would crash on NULL) */
  EXPECT_EQ_I(r.helpers, 0);

  r = run_checked_r(2, 2, 1000, 1, "two blocks, two threads: they run at once, the helper takes one");
  EXPECT_EQ_I(r.helpers, 1);
  EXPECT_EQ_I(r.helper_blocks, 1);
  EXPECT_EQ_I(clb__pool_helpers(), 1);
  r = run_checked(5, 5, 50000, "five blocks on five threads on a 2-core machine: each block once");
  EXPECT_EQ_I(r.helpers, 4);
  EXPECT_EQ_I(clb__pool_helpers(), 4);
  r = run_checked(3, 9, 1000, "more threads than blocks: at most one helper per block but the caller's");
  EXPECT_EQ_I(r.helpers, 2);
  r = run_checked(37, 2, 20000, "more blocks than threads");

  CLB_TEST_CASE("jobs back to back, long and short (no lost wake-up, no late helper in a later job)");
  for (int i = 0; i < 3000; i++)
    run_checked(1 + i % 6, 1 + i % 4, i % 7 == 0 ? 100000 : 10 * (i % 5), "back to back");

  CLB_TEST_CASE("helpers run under the caller's rounding mode");
  fesetround(FE_TOWARDZERO);
  for (int i = 0; i < 50; i++) run_checked(4, 4, 20000, "rounding towards zero");
  fesetround(FE_TONEAREST);
  for (int i = 0; i < 50; i++) run_checked(4, 4, 20000, "rounding to nearest again");

  CLB_TEST_CASE("two callers at once: each job complete; the one that finds the pool busy runs its blocks itself");
  racer a = {0, 0}, b = {0, 0};
  pthread_t ta, tb;
  EXPECT_TRUE(pthread_create(&ta, NULL, race_main, &a) == 0);
  EXPECT_TRUE(pthread_create(&tb, NULL, race_main, &b) == 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  EXPECT_EQ_I(a.jobs, 200);
  EXPECT_EQ_I(b.jobs, 200);
  EXPECT_TRUE(a.helpers_total + b.helpers_total > 0);

  CLB_TEST_CASE("a forked child starts its own helpers (the parent's are not in it)");
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    job j;
    memset(&j, 0, sizeof j);
    j.spin = 2000000;
    clb_pool_report rc;
    alarm(20); /* a hang would be the bug: the child dies instead */
    clb__pool_run(part_fn, &j, 2, 2, &rc);
    int ok = atomic_load(&j.runs[0]) == 1 && atomic_load(&j.runs[1]) == 1;
    _exit(ok && rc.helpers == 1 && clb__pool_helpers() == 1 ? 0 : 1);
  }
  EXPECT_TRUE(pid > 0);
  int status = 0;
  EXPECT_TRUE(waitpid(pid, &status, 0) == pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  r = run_checked(3, 3, 1000, "the parent's pool still works after the fork");
  EXPECT_EQ_I(r.helpers, 2);
  return clb_test_finish("nn/blas-pool");
}
