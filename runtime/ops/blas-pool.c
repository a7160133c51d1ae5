/* blas-pool.c: helper threads for the blocks of a host-BLAS product
 * (blas-pool.h; docs/gemm.md, Threads).
 *
 * Why not OpenBLAS's own threads: on a 2-core machine, a product that OpenBLAS
 * splits over two threads took 1.6 ms instead of 0.8 in about one call of
 * three when called from a PoCL worker (perf sched: OpenBLAS's helper was woken
 * on the worker's own core and the two time-sliced it while the other core
 * stayed idle; the kernel's wake-up placement skips the search for an idle
 * core when the cores are busy on average, and the periodic balancing comes
 * too late for a 1 ms product). These helpers run single-threaded BLAS calls on
 * blocks of the product and are kept off the calling thread's CPU with an
 * affinity mask, set again only when the caller is on another CPU than last
 * time.
 *
 * Claiming: one 64-bit word holds the job's generation, its block count and the
 * next block. A thread takes a block with a compare-and-swap that also checks
 * the generation, so a helper that wakes late (after its job ended, the
 * caller's arguments gone) cannot take a block of it; the caller waits only for
 * blocks taken, never for a helper to show up.
 *
 * Waiting: a helper spins for SPIN_NS after its blocks (the next product of a
 * merged native kernel often follows at once), then sleeps on a condition
 * variable; the caller does the same while it waits for the helpers. A flag
 * read after the generation is written (and written before it is read on the
 * other side, all sequentially consistent) says whether the other side sleeps,
 * so a wake-up is never lost and a condition variable is signalled only when
 * someone sleeps on it. */
#define _GNU_SOURCE /* sched_getcpu, pthread_setaffinity_np, pthread_setname_np */
#include <fenv.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/ops/blas-pool.h"

#define SPIN_NS 20000LL /* about the gap between two products of a merged native kernel */
#define WAIT_SPIN_NS 200000LL /* the caller: a helper's block is about as long as its own */

#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

typedef struct helper {
  pthread_t thread;
  atomic_uint gen;     /* the generation of the last job posted to it */
  atomic_int sleeping; /* it waits on cv */
  pthread_mutex_t mu;
  pthread_cond_t cv;
} helper;

/* claim: generation (32 bits) | blocks (16) | next block (16) */
#define CLAIM(gen, blocks, next) (((uint64_t)(gen) << 32) | ((uint64_t)(blocks) << 16) | (uint64_t)(next))
#define CLAIM_GEN(c) ((uint32_t)((c) >> 32))
#define CLAIM_BLOCKS(c) ((int)(((c) >> 16) & 0xffff))
#define CLAIM_NEXT(c) ((int)((c)&0xffff))

static struct {
  pthread_mutex_t lock; /* held by the thread that uses the pool */
  int started, failed;  /* helpers running; 1 once one could not be started */
  int excluded;         /* the CPU the helpers are kept off (-1: none) */
  cpu_set_t allowed;    /* the process's CPUs when the pool started */
  int allowed_ok;
  uint32_t gen;         /* the last job's generation (under lock) */
  /* the job: fn and arg are written before claim, read after a block is taken */
  clb_pool_fn fn;
  void *arg;
  fenv_t env; /* the caller's floating-point environment */
  _Atomic uint64_t claim;
  atomic_uint done;           /* blocks finished */
  atomic_int caller_sleeping; /* the caller waits on cv */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  helper h[CLB_POOL_MAX_HELPERS];
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
          .excluded = -1};

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Spins up to spin_ns until *word != seen, then sleeps on (mu, cv) with
 * *sleeping raised; returns the new value. */
static unsigned wait_change(atomic_uint *word, unsigned seen, long long spin_ns, atomic_int *sleeping,
                            pthread_mutex_t *mu, pthread_cond_t *cv) {
  unsigned v;
  long long t0 = now_ns();
  for (int i = 1; (v = atomic_load(word)) == seen; i++) {
    if ((i & 63) == 0 && now_ns() - t0 >= spin_ns) break;
    CPU_RELAX();
  }
  if (v != seen) return v;
  pthread_mutex_lock(mu);
  atomic_store(sleeping, 1);
  while ((v = atomic_load(word)) == seen) pthread_cond_wait(cv, mu);
  atomic_store(sleeping, 0);
  pthread_mutex_unlock(mu);
  return v;
}

/* Wakes whoever sleeps on (mu, cv) after the word it waits on was changed. */
static void wake(atomic_int *sleeping, pthread_mutex_t *mu, pthread_cond_t *cv) {
  if (!atomic_load(sleeping)) return;
  pthread_mutex_lock(mu);
  pthread_cond_signal(cv);
  pthread_mutex_unlock(mu);
}

/* Takes and runs blocks of the job of generation `gen` until none is left;
 * returns how many it ran. The thread that finishes the last block wakes the
 * caller. */
static int run_blocks(uint32_t gen, fenv_t *helper_env) {
  int ran = 0;
  uint64_t c = atomic_load(&pool.claim);
  for (;;) {
    if (CLAIM_GEN(c) != gen || CLAIM_NEXT(c) >= CLAIM_BLOCKS(c)) return ran;
    if (!atomic_compare_exchange_weak(&pool.claim, &c, c + 1)) continue; /* c reloaded */
    int blocks = CLAIM_BLOCKS(c);
    /* a helper computes as the caller does (rounding, flush-to-zero: PoCL sets
     * them per kernel on its worker), so a block's result does not depend on
     * which thread ran it */
    if (helper_env && memcmp(helper_env, &pool.env, sizeof pool.env) != 0) {
      fesetenv(&pool.env);
      fegetenv(helper_env);
    }
    pool.fn(pool.arg, CLAIM_NEXT(c), blocks);
    ran++;
    if ((int)atomic_fetch_add(&pool.done, 1) + 1 == blocks) wake(&pool.caller_sleeping, &pool.mu, &pool.cv);
    c = atomic_load(&pool.claim);
  }
}

/* A helper runs the blocks of the jobs posted to it, and of no other: h->gen is
 * the generation of the last job posted to it, so a helper that wakes after its
 * job ended finds nothing to take and does not join a later job it was not
 * counted in. */
static void *helper_main(void *p) {
  helper *h = p;
  unsigned seen = 0; /* gen at creation: a job may be posted before this thread runs */
  fenv_t env;
  fegetenv(&env);
  for (;;) {
    seen = wait_change(&h->gen, seen, SPIN_NS, &h->sleeping, &h->mu, &h->cv);
    run_blocks(seen, &env);
  }
  return NULL;
}

/* After fork, the child has none of the helper threads: it starts its own. */
static void after_fork_child(void) {
  /* the mutexes may have been held by a thread the child does not have: made
   * anew (what glibc allows; POSIX leaves it undefined) */
  pool.allowed_ok = sched_getaffinity(getpid(), sizeof pool.allowed, &pool.allowed) == 0;
  pthread_mutex_init(&pool.lock, NULL);
  pthread_mutex_init(&pool.mu, NULL);
  pthread_cond_init(&pool.cv, NULL);
  pool.started = 0;
  pool.failed = 0;
  pool.excluded = -1;
  atomic_store(&pool.caller_sleeping, 0);
}

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static void pool_init(void) {
  /* the process's CPUs: the main thread's mask (the calling thread may be a
   * PoCL worker pinned to one CPU by POCL_AFFINITY) */
  pool.allowed_ok = sched_getaffinity(getpid(), sizeof pool.allowed, &pool.allowed) == 0;
  if (pthread_atfork(NULL, NULL, after_fork_child) != 0) pool.failed = 1; /* no helpers rather than a hang after fork */
}

/* The helpers' mask: the process's CPUs less `cpu`; 0 where that leaves none. */
static int mask_without(int cpu, cpu_set_t *set) {
  if (!pool.allowed_ok || cpu < 0 || cpu >= CPU_SETSIZE) return 0;
  *set = pool.allowed;
  CPU_CLR(cpu, set);
  return CPU_COUNT(set) > 0;
}

/* Starts helpers until `want` run (or one cannot be started). */
static void start_helpers(int want) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* signals go to the program's own threads */
  while (pool.started < want && !pool.failed) {
    helper *h = &pool.h[pool.started];
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    if (pthread_create(&h->thread, NULL, helper_main, h) != 0) {
      pool.failed = 1;
      break;
    }
    pthread_setname_np(h->thread, "clbound-blas");
    cpu_set_t set; /* not the creator's mask, which it would inherit */
    if (mask_without(pool.excluded, &set)) pthread_setaffinity_np(h->thread, sizeof set, &set);
    else if (pool.allowed_ok) pthread_setaffinity_np(h->thread, sizeof pool.allowed, &pool.allowed);
    pool.started++;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void clb__pool_run(clb_pool_fn fn, void *arg, int blocks, int threads, clb_pool_report *report) {
  if (report) report->helpers = report->helper_blocks = 0, report->caller_cpu = -1;
  if (blocks < 1) return;
  if (blocks > CLB_POOL_MAX_BLOCKS) blocks = CLB_POOL_MAX_BLOCKS; /* callers keep under it; never past the claim's field */
  int want = threads - 1 < blocks - 1 ? threads - 1 : blocks - 1;
  if (want > CLB_POOL_MAX_HELPERS) want = CLB_POOL_MAX_HELPERS;
  if (want > 0) pthread_once(&pool_once, pool_init);
  if (want <= 0 || pthread_mutex_trylock(&pool.lock) != 0) { /* alone, or the pool is busy */
    for (int b = 0; b < blocks; b++) fn(arg, b, blocks);
    return;
  }
  int cpu = sched_getcpu();
  if (cpu != pool.excluded) { /* keep the helpers off the caller's CPU */
    cpu_set_t set;
    if (mask_without(cpu, &set))
      for (int i = 0; i < pool.started; i++) pthread_setaffinity_np(pool.h[i].thread, sizeof set, &set);
    pool.excluded = cpu;
  }
  start_helpers(want);
  int helpers = pool.started < want ? pool.started : want;
  uint32_t gen = ++pool.gen;
  if (gen == 0) gen = ++pool.gen; /* 0 is a new helper's "nothing posted" */
  pool.fn = fn;
  pool.arg = arg;
  fegetenv(&pool.env);
  atomic_store(&pool.done, 0);
  atomic_store(&pool.claim, CLAIM(gen, blocks, 0));
  for (int i = 0; i < helpers; i++) {
    atomic_store(&pool.h[i].gen, gen);
    wake(&pool.h[i].sleeping, &pool.h[i].mu, &pool.h[i].cv);
  }
  int mine = run_blocks(gen, NULL);
  unsigned d;
  while ((d = atomic_load(&pool.done)) != (unsigned)blocks) /* blocks a helper took and still runs */
    wait_change(&pool.done, d, WAIT_SPIN_NS, &pool.caller_sleeping, &pool.mu, &pool.cv);
  pthread_mutex_unlock(&pool.lock);
  if (report) report->helpers = helpers, report->helper_blocks = blocks - mine, report->caller_cpu = cpu;
}

int clb__pool_helpers(void) {
  pthread_mutex_lock(&pool.lock);
  int n = pool.started;
  pthread_mutex_unlock(&pool.lock);
  return n;
}
