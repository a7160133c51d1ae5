/* store-worker.c: the background program store. Handing out a program's binary
 * makes PoCL compile a work-group function for every kernel of the program:
 * 0.2-0.4 s a kernel, 20 s of the default demo's 62 s when each context stored
 * its programs as it was freed. A freed context now hands its programs to one
 * thread per process, which writes the entries while the other contexts of the
 * process go on (PoCL compiles under a lock per OpenCL context, so the store of
 * a freed context runs beside the builds of the next one). Nothing is lost: a
 * context that needs a program still being stored waits for that entry and
 * loads it; clb_cache_info and clb_cache_clear wait for every store; and freeing
 * the process's last context with an open program cache waits for the queue.
 *
 * That last rule keeps the store out of process exit: at exit, handlers that the
 * compiler's libraries registered after ours (LLVM's lazily made statics) run
 * first, and a store still compiling then corrupts the heap (seen in ops tests
 * run 4 at a time). A process that exits with a context still alive drops what
 * is queued (rebuilt next time) and waits only for the entry being written.
 * CLBOUND_CACHE_STORE=release stores in the freeing thread instead.
 *
 * CLBOUND_CACHE_STORE=process (the default) keeps all of the above while other
 * contexts live, but the last context's release does not wait: it hands the
 * queue and its own programs to the store helper process (store-helper.c). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cache/cache.h"

typedef struct store_job {
  struct store_job *next;
  char *dir, *key;
  cl_program prog;
} store_job;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER; /* a job was queued, or stop */
static pthread_cond_t done = PTHREAD_COND_INITIALIZER; /* a job was written */
static store_job *head, *tail, *current;               /* queue, and the job being written */
static uint64_t pending;                               /* queued + being written */
static int running, stopping, hooks_set;
static uint64_t open_caches; /* contexts whose program cache is open */
static pthread_t thread;
static clb__logger logger; /* CLBOUND_LOG's categories, to stderr: the contexts are gone */

clb__store_mode clb__store_mode_get(void) {
  int64_t v = clb__env_int(CLB_ENV_CACHE_STORE); /* background, release, sync, process */
  return v == 0 ? CLB_STORE_BACKGROUND : v == 3 ? CLB_STORE_PROCESS : CLB_STORE_RELEASE;
}

static void free_job(store_job *j) {
  free(j->dir);
  free(j->key);
  free(j);
}

static void *worker(void *arg) {
  (void)arg;
  pthread_mutex_lock(&lock);
  for (;;) {
    while (!head && !stopping) pthread_cond_wait(&wake, &lock);
    if (!head) break; /* stopping, and the queue is empty */
    store_job *j = head;
    head = j->next;
    if (!head) tail = NULL;
    current = j;
    pthread_mutex_unlock(&lock);
    clb__disk_cache_write(j->dir, j->key, j->prog, &logger);
    clReleaseProgram(j->prog);
    pthread_mutex_lock(&lock);
    current = NULL;
    pending--;
    free_job(j);
    pthread_cond_broadcast(&done);
  }
  pthread_mutex_unlock(&lock);
  return NULL;
}

/* When the process ends, or the library is unloaded, with a context alive: drop
 * the queue (no compiling at exit: see the top of the file), wait for the entry
 * being written, and stop the thread, so that none runs unmapped code. The
 * dropped jobs' programs are not released: the OpenCL runtime may be going. */
static void stop_at_exit(void) {
  pthread_mutex_lock(&lock);
  if (!running) {
    pthread_mutex_unlock(&lock);
    return;
  }
  while (head) {
    store_job *j = head;
    head = j->next;
    free_job(j);
    pending--;
  }
  tail = NULL;
  stopping = 1;
  pthread_cond_broadcast(&wake);
  pthread_cond_broadcast(&done);
  pthread_mutex_unlock(&lock);
  pthread_join(thread, NULL);
  pthread_mutex_lock(&lock);
  running = stopping = 0;
  pthread_mutex_unlock(&lock);
}

/* fork: the child has no store thread; it starts its own if it needs one. The
 * parent's queue is the parent's to write. */
static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork_parent(void) { pthread_mutex_unlock(&lock); }
static void after_fork_child(void) {
  head = tail = current = NULL;
  pending = 0;
  running = stopping = 0;
  pthread_mutex_unlock(&lock);
}

/* Starts the thread (lock held); 0 when it runs. Signals stay with the
 * application's threads. */
static int start_locked(void) {
  if (running) return 0;
  if (!hooks_set) {
    if (atexit(stop_at_exit) != 0 || pthread_atfork(before_fork, after_fork_parent, after_fork_child) != 0) return -1;
    hooks_set = 1;
  }
  logger.mask = clb__log_env_mask();
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&thread, NULL, worker, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) return -1;
  running = 1;
  return 0;
}

/* Appends j to the queue and wakes the thread (lock held). */
static void queue_locked(store_job *j) {
  if (tail)
    tail->next = j;
  else
    head = j;
  tail = j;
  pending++;
  pthread_cond_signal(&wake);
}

void clb__store_enqueue(clb_context_t ctx, char *key, cl_program prog) {
  store_job *j = calloc(1, sizeof *j);
  size_t dlen = strlen(ctx->cache_dir) + 1;
  char *dir = j ? malloc(dlen) : NULL;
  pthread_mutex_lock(&lock);
  int ok = dir && start_locked() == 0;
  if (ok) {
    memcpy(dir, ctx->cache_dir, dlen);
    clRetainProgram(prog);
    j->dir = dir;
    j->key = key;
    j->prog = prog;
    queue_locked(j);
  }
  pthread_mutex_unlock(&lock);
  if (!ok) { /* no memory or no thread: store now, as before */
    free(j);
    free(dir);
    clb__disk_cache_store(ctx, key, prog);
    free(key);
  }
}

static int job_is(const store_job *j, const char *dir, const char *key) {
  return j && strcmp(j->dir, dir) == 0 && strcmp(j->key, key) == 0;
}

void clb__store_wait_key(const char *dir, const char *key) {
  pthread_mutex_lock(&lock);
  for (;;) {
    int found = job_is(current, dir, key);
    for (store_job *j = head; j && !found; j = j->next) found = job_is(j, dir, key);
    if (!found) break;
    pthread_cond_wait(&done, &lock);
  }
  pthread_mutex_unlock(&lock);
  /* not the store helper's manifests: a context that finds its program handed
   * over and not written yet builds it from source (0.1 s with PoCL's kernel
   * cache warm, where waiting for the helper took 1.3 s) */
}

long clb__store_queue_handoff(const char *dir, const clb__logger *lg) {
  store_job *taken = NULL, **tt = &taken;
  pthread_mutex_lock(&lock);
  for (store_job **pp = &head; *pp;) {
    store_job *j = *pp;
    if (strcmp(j->dir, dir) != 0) {
      pp = &j->next;
      continue;
    }
    *pp = j->next;
    j->next = NULL;
    *tt = j;
    tt = &j->next;
    pending--;
  }
  tail = NULL;
  for (store_job *j = head; j; j = j->next) tail = j;
  pthread_mutex_unlock(&lock);
  long n = 0;
  while (taken) {
    store_job *j = taken;
    taken = j->next;
    j->next = NULL;
    if (clb__store_manifest_write(dir, j->key, lg) == 0) {
      clReleaseProgram(j->prog);
      free_job(j);
      n++;
      continue;
    }
    pthread_mutex_lock(&lock); /* not handed over: back to the thread */
    queue_locked(j);
    pthread_mutex_unlock(&lock);
  }
  pthread_mutex_lock(&lock);
  pthread_cond_broadcast(&done);
  pthread_mutex_unlock(&lock);
  return n;
}

uint64_t clb_cache_pending(void) {
  pthread_mutex_lock(&lock);
  uint64_t n = pending;
  pthread_mutex_unlock(&lock);
  return n + clb__store_handed_pending();
}

/* Returns when the store thread has nothing queued or under way. */
static void wait_queue(void) {
  pthread_mutex_lock(&lock);
  while (pending && !stopping) pthread_cond_wait(&done, &lock);
  pthread_mutex_unlock(&lock);
}

clb_status clb_cache_wait(void) {
  wait_queue();
  clb__store_handed_drain();
  return CLB_OK;
}

void clb__store_cache_opened(void) {
  pthread_mutex_lock(&lock);
  open_caches++;
  pthread_mutex_unlock(&lock);
}

int clb__store_cache_last(void) {
  pthread_mutex_lock(&lock);
  int last = open_caches == 1;
  pthread_mutex_unlock(&lock);
  return last;
}

void clb__store_cache_closed(void) {
  pthread_mutex_lock(&lock);
  int last = --open_caches == 0;
  pthread_mutex_unlock(&lock);
  if (last) wait_queue();
}

/* dir, or the default folder into def; NULL when the cache is off. */
static const char *folder(const char *dir, char def[1024]) {
  if (dir) return dir;
  clb_cache_default_dir(def, 1024);
  return def[0] ? def : NULL;
}

clb_status clb_cache_info(const char *dir, uint64_t *entries, uint64_t *bytes) {
  clb_cache_wait();
  if (entries) *entries = 0;
  if (bytes) *bytes = 0;
  char def[1024];
  const char *d = folder(dir, def);
  if (d) clb__store_drain_pending(d); /* the helpers' work, waited for or done */
  return clb__cache_walk(dir, 0, entries, bytes);
}

clb_status clb_cache_clear(const char *dir) {
  wait_queue();
  char def[1024];
  const char *d = folder(dir, def);
  clb__logger lg = {clb__log_env_mask(), NULL, NULL};
  int fd = d && clb__store_manifests(d) ? clb__store_lock(d, &lg) : -1; /* a helper at work finishes first */
  clb_status st = clb__cache_walk(dir, 1, NULL, NULL);
  clb__store_unlock(fd);
  return st;
}
