/* program-cache.c: builds each (source, options) program once per context and
 * keeps its kernels, so that a launch never builds; first asks the disk cache,
 * which it opens on the context's first kernel (clb__cache_open). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/cache/cache.h"
#include "clbound/version.h"

#define CLB_MAX_KERNELS_PER_PROGRAM 8
#define CLB_FAST_BUILD_OPTION " -cl-opt-disable" /* CLBOUND_COLD_BUILD=fast (fast_build) */

typedef struct clb_prog_entry {
  uint64_t hash;
  char *src;      /* kernel file name */
  char *options;  /* build options as given */
  cl_program program;
  char *store_key; /* built from source, not yet stored on disk: its store record
                      (clb__store_record_new: the full key, options and source) */
  char suffix[16]; /* a section of a plan's merged program: its kernels' suffix */
  int from_disk;   /* loaded from the disk cache: rebuilt when a kernel is missing */
  char *upgrade_key; /* built with CLBOUND_COLD_BUILD=fast and handed to the store
                        helper while the context runs: the key of the optimized
                        entry that replaces it when written (tier_up) */
  int nkernels;
  struct {
    char *name;
    cl_kernel kernel;
    size_t wg; /* its CL_KERNEL_WORK_GROUP_SIZE (clb__kernel_wg_limit) */
  } kernels[CLB_MAX_KERNELS_PER_PROGRAM];
} clb_prog_entry;

struct clb_progcache {
  clb_prog_entry *entries;
  size_t n, cap;
  clb_kernel_src *gen; /* generated kernel sources (runtime/graph/fuse.c) */
  size_t ngen, capgen;
  /* tiered builds (tier_up) */
  int fast_pending;      /* programs built unoptimized and not handed to the helper yet */
  double fast_built_ms;  /* when the first of them was built */
  int upgrading;         /* entries waiting for their optimized program */
  double handed_ms;      /* when they were handed to the helper */
  double next_check_ms;  /* the next look at the cache folder */
  int respawn;           /* the helper did not start: start it at release */
  cl_kernel *retired;    /* kernels of replaced programs, kept alive until the cache is freed */
  size_t nretired, capretired;
};

static uint64_t fnv1a(uint64_t h, const char *s) {
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return (h ^ 0xff) * 0x100000001b3ull; /* separator, so ("ab","c") != ("a","bc") */
}

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* ---- kernels noted while a plan is walked (runtime/cache/plan-program.c) ---- */

void clb__plan_collect_free(struct clb_plan_collect *c) {
  if (!c) return;
  for (int i = 0; i < c->n; i++) {
    free(c->s[i].src);
    free(c->s[i].options);
    for (int k = 0; k < c->s[i].nk; k++) free(c->s[i].kernels[k]);
  }
  free(c->s);
  free(c);
}

/* Options made only of -D NAME[=VALUE] can become #defines; anything else keeps
 * its program of its own. */
static int defines_only(const char *options) {
  const char *p = options;
  while (*p) {
    while (*p == ' ') p++;
    if (!*p) break;
    if (strncmp(p, "-D", 2) != 0) return 0;
    p += 2;
    while (*p == ' ') p++;
    while (*p && *p != ' ') p++;
  }
  return 1;
}

void clb__plan_collect_note(clb_context_t ctx, const char *src, const char *options, const char *kernel) {
  struct clb_plan_collect *c = ctx->collect;
  if (!c || c->failed || !defines_only(options)) return;
  collect_section *s = NULL;
  for (int i = 0; i < c->n && !s; i++)
    if (strcmp(c->s[i].src, src) == 0 && strcmp(c->s[i].options, options) == 0) s = &c->s[i];
  if (!s) {
    if (c->n == c->cap) {
      int ncap = c->cap ? 2 * c->cap : 16;
      collect_section *ns = realloc(c->s, (size_t)ncap * sizeof *ns);
      if (!ns) {
        c->failed = 1;
        return;
      }
      c->s = ns;
      c->cap = ncap;
    }
    s = &c->s[c->n];
    memset(s, 0, sizeof *s);
    s->src = dup_str(src);
    s->options = dup_str(options);
    c->n++;
    if (!s->src || !s->options) {
      c->failed = 1;
      return;
    }
  }
  for (int k = 0; k < s->nk; k++)
    if (strcmp(s->kernels[k], kernel) == 0) return;
  if (s->nk == MAX_SECTION_KERNELS || !(s->kernels[s->nk] = dup_str(kernel))) {
    c->failed = 1;
    return;
  }
  s->nk++;
}

static void progcache_free(clb_progcache *pc) {
  if (!pc) return;
  for (size_t i = 0; i < pc->n; i++) {
    clb_prog_entry *e = &pc->entries[i];
    for (int k = 0; k < e->nkernels; k++) {
      clReleaseKernel(e->kernels[k].kernel);
      free(e->kernels[k].name);
    }
    if (e->program) clReleaseProgram(e->program);
    free(e->store_key);
    free(e->upgrade_key);
    free(e->src);
    free(e->options);
  }
  free(pc->entries);
  for (size_t i = 0; i < pc->ngen; i++) {
    free((char *)pc->gen[i].name);
    free((char *)pc->gen[i].text);
  }
  free(pc->gen);
  for (size_t i = 0; i < pc->nretired; i++) clReleaseKernel(pc->retired[i]);
  free(pc->retired);
  free(pc);
}

/* Stores every program built from source in this context and not stored yet,
 * now or (background) through the store thread (store-worker.c). Deferred off
 * the first step's critical path: handing out a binary makes PoCL compile a
 * work-group function for every kernel of the program, which took 4.1-4.7 s of
 * a 10-12 s cold xla-mlp run when each build stored at once. Only programs that
 * were built (so used) are stored, each once. */
static int fast_build(clb_context_t ctx);

static void store_pending(clb_context_t ctx, int background) {
  clb_progcache *pc = ctx->programs;
  if (!pc) return;
  double t0 = now_ms();
  int n = 0;
  int fast = fast_build(ctx);
  for (size_t i = 0; i < pc->n; i++) {
    clb_prog_entry *e = &pc->entries[i];
    if (!e->store_key) continue;
    if (fast) { /* built unoptimized and not handed to the helper: not stored */
      clb__log(ctx, CLB_LOG_CACHE, "%s: built with" CLB_FAST_BUILD_OPTION " and not handed to the store helper: not stored",
               e->src);
      free(e->store_key);
      e->store_key = NULL;
      continue;
    }
    ctx->counters.store_local++;
    if (background) {
      clb__store_enqueue(ctx, e->store_key, e->program); /* takes the key */
    } else {
      clb__disk_cache_store(ctx, e->store_key, e->program);
      free(e->store_key);
    }
    e->store_key = NULL;
    n++;
  }
  if (n) {
    double ms = now_ms() - t0;
    ctx->counters.store_ms += (uint64_t)(ms + 0.5);
    if (background)
      clb__log(ctx, CLB_LOG_CACHE, "%d program(s) built in this context handed to the background store", n);
    else
      clb__log(ctx, CLB_LOG_CACHE, "stored %d program(s) built in this context in %.1f ms", n, ms);
  }
}

static long write_manifests(clb_context_t ctx, const clb__logger *lg);

/* clb_context_store_programs waits for the store helper it started while the
 * helper works (it holds the folder's lock) or has yet to start (at most
 * STORE_HELPER_START_MS), then does what is left itself. */
#define STORE_HELPER_START_MS 3000.0

clb_status clb_context_store_programs(clb_context_t ctx) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "clb_context_store_programs: ctx is NULL");
  if (ctx->programs && fast_build(ctx)) { /* the optimized programs, built from their records */
    clb__logger lg = clb__context_logger(ctx);
    char helper[1200];
    if (write_manifests(ctx, &lg) > 0) {
      /* by the store helper, which is told the work-group shapes launched (or,
       * for a plan warmed without a step, to be launched: clb__launch), so the
       * binary holds them compiled; then whatever is left, here */
      if (clb__store_helper_path(helper, sizeof helper) == 0 && clb__store_spawn(helper, ctx->cache_dir, &lg) == 0) {
        double t0 = now_ms();
        struct timespec pause = {0, 20 * 1000 * 1000};
        while (clb__store_manifests(ctx->cache_dir) > 0 &&
               (clb__store_busy(ctx->cache_dir) || now_ms() - t0 < STORE_HELPER_START_MS))
          nanosleep(&pause, NULL);
      }
      clb_cache_store_pending(ctx->cache_dir, NULL);
    }
  }
  store_pending(ctx, 0);
  return CLB_OK;
}

/* A store manifest for every program built here and not stored yet; returns
 * how many were written (those entries are no longer this context's to store). */
static long write_manifests(clb_context_t ctx, const clb__logger *lg) {
  clb_progcache *pc = ctx->programs;
  long n = 0;
  for (size_t i = 0; i < pc->n; i++) {
    clb_prog_entry *e = &pc->entries[i];
    if (!e->store_key || clb__store_manifest_write(ctx->cache_dir, e->store_key, lg) != 0) continue;
    free(e->store_key);
    e->store_key = NULL;
    n++;
  }
  ctx->counters.store_handoffs += (uint64_t)n;
  return n;
}

/* CLBOUND_CACHE_STORE=process, the process's last context: its programs and
 * the store thread's queue go to the store helper (store-helper.c); nothing is
 * compiled here. What cannot go (no helper, a manifest not written) is left to
 * store_pending; a helper that does not start leaves its work to this process
 * at once. */
static void hand_to_helper(clb_context_t ctx) {
  char helper[1200];
  clb__logger lg = clb__context_logger(ctx);
  if (clb__store_helper_path(helper, sizeof helper) != 0) {
    clb__log(ctx, CLB_LOG_CACHE, "the store helper %s cannot be run: programs are stored in this process", helper);
    return;
  }
  long n = write_manifests(ctx, &lg);
  n += clb__store_queue_handoff(ctx->cache_dir, &lg);
  if (n == 0 && !ctx->programs->respawn) return;
  if (clb__store_spawn(helper, ctx->cache_dir, &lg) != 0) {
    clb__log(ctx, CLB_LOG_CACHE, "the store helper %s did not start: %ld program(s) stored in this process", helper, n);
    clb_cache_store_pending(ctx->cache_dir, NULL);
    return;
  }
  clb__log(ctx, CLB_LOG_CACHE, "%ld program(s) handed to the store helper (%s cache store-pending)", n, helper);
}

/* ---- Tiered builds -------------------------------------------------------------
 * Under CLBOUND_COLD_BUILD=fast a cold program is built without LLVM's
 * optimizations, and the store helper builds the optimized one from its
 * manifest. A short process hands the manifests over when it ends, as before
 * (with every work-group shape it launched). A process that has run
 * TIER_HANDOFF_MS since its first such build, not counting the driver's
 * compiles at its first launches (PoCL's 70 ms or so a kernel, which a short
 * job spends there too), with none of them still under way, hands them over
 * then: a helper started earlier would take a core from the rest of a short
 * run. It then looks
 * every TIER_POLL_MS (when it next asks for a kernel) for the helper's entries:
 * each one written replaces its unoptimized program, every plan section of it,
 * so a long run pays the unoptimized kernels for a few seconds only. Kernels of
 * a replaced program stay alive until the cache is freed: an op may hold one
 * it took before the swap, and a recorded step may still name one (it records
 * again when the kernel changes). */
#define TIER_HANDOFF_MS 300.0
#define TIER_POLL_MS 100.0
#define TIER_GIVE_UP_MS 600000.0 /* a helper that never writes: stop looking */

static int retire_kernels(clb_progcache *pc, clb_prog_entry *e) {
  if (pc->nretired + (size_t)e->nkernels > pc->capretired) {
    size_t ncap = pc->capretired ? 2 * pc->capretired : 16;
    while (ncap < pc->nretired + (size_t)e->nkernels) ncap *= 2;
    cl_kernel *nr = realloc(pc->retired, ncap * sizeof *nr);
    if (!nr) return -1;
    pc->retired = nr;
    pc->capretired = ncap;
  }
  for (int k = 0; k < e->nkernels; k++) {
    pc->retired[pc->nretired++] = e->kernels[k].kernel;
    free(e->kernels[k].name);
  }
  e->nkernels = 0;
  return 0;
}

/* Every entry on `old` (a program and its plan sections) now serves `p`. */
static int replace_program(clb_context_t ctx, cl_program old, cl_program p) {
  clb_progcache *pc = ctx->programs;
  int n = 0;
  for (size_t i = 0; i < pc->n; i++) {
    clb_prog_entry *e = &pc->entries[i];
    if (e->program != old) continue;
    if (retire_kernels(pc, e) != 0) return -1; /* out of memory: this entry and the rest keep theirs */
    clRetainProgram(p);
    clReleaseProgram(e->program);
    e->program = p;
    e->from_disk = 1;
    n++;
  }
  return n;
}

static void tier_handoff(clb_context_t ctx) {
  clb_progcache *pc = ctx->programs;
  clb__logger lg = clb__context_logger(ctx);
  char helper[1200];
  pc->fast_pending = 0;
  if (clb__store_helper_path(helper, sizeof helper) != 0) return; /* stored at release, as before */
  long n = 0;
  for (size_t i = 0; i < pc->n; i++) {
    clb_prog_entry *e = &pc->entries[i];
    if (!e->store_key || clb__store_manifest_write(ctx->cache_dir, e->store_key, &lg) != 0) continue;
    /* the record starts with the key, NUL-terminated: keep that part */
    char *key = realloc(e->store_key, strlen(e->store_key) + 1);
    e->upgrade_key = key ? key : e->store_key;
    e->store_key = NULL;
    n++;
  }
  if (n == 0) return;
  ctx->counters.store_handoffs += (uint64_t)n;
  pc->upgrading += (int)n;
  pc->handed_ms = now_ms();
  if (clb__store_spawn(helper, ctx->cache_dir, &lg) != 0) {
    pc->respawn = 1; /* the manifests wait in the folder: the release starts the helper again */
    clb__log(ctx, CLB_LOG_BUILDS, "%ld unoptimized program(s) handed to the store helper %s, which did not start: "
             "they stay unoptimized in this process", n, helper);
    return;
  }
  clb__log(ctx, CLB_LOG_BUILDS, "%ld unoptimized program(s) handed to the store helper after %.0f ms (%.0f ms of it "
           "the driver's first-launch compiles): each is replaced by its optimized build when the helper has written it",
           n, pc->handed_ms - pc->fast_built_ms, clb__first_launch_ms(ctx));
}

static void tier_check(clb_context_t ctx) {
  clb_progcache *pc = ctx->programs;
  double t = now_ms();
  for (size_t i = 0; i < pc->n && pc->upgrading > 0; i++) {
    clb_prog_entry *e = &pc->entries[i];
    if (!e->upgrade_key) continue;
    char path[1200];
    clb__cache_entry_path(ctx->cache_dir, e->upgrade_key, CLB_ENTRY_SUFFIX, path, sizeof path);
    int give_up = t - pc->handed_ms > TIER_GIVE_UP_MS;
    if (access(path, R_OK) != 0 && !give_up) continue;
    cl_program p = NULL, old = e->program;
    if (!give_up) clb__disk_cache_load(ctx, e->upgrade_key, &p);
    if (p) {
      int n = replace_program(ctx, old, p);
      clReleaseProgram(p);
      if (n > 0) {
        ctx->counters.programs_upgraded++;
        clb__log(ctx, CLB_LOG_BUILDS, "%s.cl: the unoptimized program (%d entr%s) replaced by the store helper's "
                 "optimized build, %.0f ms after the hand-over", e->src, n, n == 1 ? "y" : "ies", t - pc->handed_ms);
      } else {
        clb__log(ctx, CLB_LOG_BUILDS, "%s.cl: out of host memory replacing the unoptimized program: some of its "
                 "entries stay unoptimized", e->src);
      }
    } else {
      clb__log(ctx, CLB_LOG_BUILDS, "%s.cl: %s: the unoptimized program stays", e->src,
               give_up ? "the store helper wrote no optimized build" : "the optimized build could not be loaded");
    }
    free(e->upgrade_key);
    e->upgrade_key = NULL;
    pc->upgrading--;
  }
}

/* Hands the unoptimized programs to the helper once the process has run a
 * while, and replaces each by its optimized build when written. */
static void tier_up(clb_context_t ctx) {
  clb_progcache *pc = ctx->programs;
  if (!pc || (!pc->fast_pending && pc->upgrading <= 0) || ctx->collect) return;
  double t = now_ms();
  if (t < pc->next_check_ms) return;
  pc->next_check_ms = t + TIER_POLL_MS;
  if (pc->fast_pending && t - pc->fast_built_ms - clb__first_launch_ms(ctx) >= TIER_HANDOFF_MS &&
      clb__first_launches_pending(ctx) == 0)
    tier_handoff(ctx);
  if (pc->upgrading > 0) tier_check(ctx);
}

static void release_caches(clb_context_t ctx) {
  int opened = ctx->programs != NULL;
  clb__store_mode mode = clb__store_mode_get();
  /* the last context, or any built unoptimized (whose binaries are never stored) */
  if (opened && mode == CLB_STORE_PROCESS && ctx->cache_dir[0] && (clb__store_cache_last() || fast_build(ctx)))
    hand_to_helper(ctx);
  store_pending(ctx, mode != CLB_STORE_RELEASE);
  progcache_free(ctx->programs);
  ctx->programs = NULL;
  if (opened) clb__store_cache_closed(); /* the last one waits for the background store */
}

clb_status clb__cache_open(clb_context_t ctx) {
  if (ctx->programs) return CLB_OK;
  clb_status st = clb__context_on_release(ctx, release_caches);
  if (st != CLB_OK) return st;
  ctx->programs = calloc(1, sizeof *ctx->programs);
  if (!ctx->programs) return clb__set_error(ctx, CLB_ERR_HOST_OOM, "program cache: out of host memory");
  clb__store_cache_opened();
  clb__disk_cache_init(ctx, ctx->cache_dir_option);
  return CLB_OK;
}

const char *clb_context_cache_dir(clb_context_t ctx) {
  if (ctx && clb__cache_open(ctx) != CLB_OK) return NULL;
  return ctx && ctx->cache_dir[0] ? ctx->cache_dir : NULL;
}

const clb_kernel_src *clb__kernel_src_find(const char *name) {
  for (size_t i = 0; i < clb__kernel_source_count; i++)
    if (strcmp(clb__kernel_sources[i].name, name) == 0) return &clb__kernel_sources[i];
  return NULL;
}

const clb_kernel_src *clb__kernel_src_get(clb_context_t ctx, const char *name) {
  const clb_kernel_src *s = clb__kernel_src_find(name);
  clb_progcache *pc = ctx->programs;
  for (size_t i = 0; !s && pc && i < pc->ngen; i++)
    if (strcmp(pc->gen[i].name, name) == 0) s = &pc->gen[i];
  return s;
}

clb_status clb__kernel_source_add(clb_context_t ctx, const char *name, const char *text) {
  clb_status st = clb__cache_open(ctx);
  if (st != CLB_OK) return st;
  if (clb__kernel_src_get(ctx, name)) return CLB_OK;
  clb_progcache *pc = ctx->programs;
  if (pc->ngen == pc->capgen) {
    size_t ncap = pc->capgen ? 2 * pc->capgen : 8;
    clb_kernel_src *ng = realloc(pc->gen, ncap * sizeof *ng);
    if (!ng) return clb__set_error(ctx, CLB_ERR_HOST_OOM, "generated kernel %s: out of host memory", name);
    pc->gen = ng;
    pc->capgen = ncap;
  }
  char *n = dup_str(name), *t = dup_str(text);
  if (!n || !t) {
    free(n);
    free(t);
    return clb__set_error(ctx, CLB_ERR_HOST_OOM, "generated kernel %s: out of host memory", name);
  }
  pc->gen[pc->ngen++] = (clb_kernel_src){n, t, strlen(t)};
  return CLB_OK;
}

/* Build options every program of the device gets after its own: on CPU
 * devices, no reqd_work_group_size attribute (kernels/common.cl, CLB_REQD_WG;
 * PoCL before 7.0 aborts when the disk cache takes the binary of a program with
 * one while another thread runs its kernels: docs/failure-behaviour.md). */
static const char *device_options(clb_context_t ctx) { return ctx->info.is_cpu ? " -D CLB_NO_REQD_WG" : ""; }

/* CLBOUND_COLD_BUILD=fast: a CPU device whose programs go to the store helper
 * is built without LLVM's optimizations (its compile is most of a cold
 * process); the helper builds the optimized program from the store record,
 * whose options are the optimized ones, and no unoptimized binary is stored. */
static int fast_build(clb_context_t ctx) {
  char helper[1200];
  return clb__env_int(CLB_ENV_COLD_BUILD) == 1 && ctx->info.is_cpu && ctx->cache_dir[0] &&
         clb__store_mode_get() == CLB_STORE_PROCESS && clb__store_helper_path(helper, sizeof helper) == 0;
}


/* The full key of a program: everything its binary depends on. `label` names
 * the source (a kernel file, or "plan" for a merged program). */
static char *full_key(clb_context_t ctx, const char *label, int ntexts, const char *const *texts, const size_t *lens,
                      const char *options) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < ntexts; i++) h = clb__fnv1a(h, texts[i], lens[i]);
  char dev[6 * CLB_DEVICE_STRING_MAX];
  clb__key_device_part(&ctx->info, dev, sizeof dev);
  size_t cap = 256 + strlen(label) + strlen(options) + strlen(dev);
  char *key = malloc(cap);
  if (key)
    snprintf(key, cap, "clbound %s\nsource %s.cl %016llx\noptions %s%s%s", clb_version(), label, (unsigned long long)h,
             options, device_options(ctx), dev);
  return key;
}

/* Loads (disk cache, when use_disk) or builds the program of `texts` with
 * `options`; *from_disk (may be NULL) says which. A program built from source
 * comes back with its store record (clb__store_record_new: key, build options
 * and source) in *store_key (NULL when the disk cache is off), to be
 * stored later. Every program built here also carries its key's identity kernel
 * (clb__program_identity), which the disk cache checks when it loads one. */
static clb_status program_from_texts(clb_context_t ctx, const char *op, const char *label, int ntexts,
                                     const char *const *texts, const size_t *lens, const char *options, int use_disk,
                                     cl_program *out, char **store_key, int *from_disk) {
  *store_key = NULL;
  if (from_disk) *from_disk = 0;
  double t0 = now_ms();
  char *key = full_key(ctx, label, ntexts, texts, lens, options);
  if (!key) return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: program cache key", op);
  cl_program cached = NULL;
  if (use_disk && ctx->cache_dir[0]) {
    clb__store_wait_key(ctx->cache_dir, key); /* a freed context may still be writing it */
    clb__disk_cache_load(ctx, key, &cached);
  }
  if (cached) {
    if (from_disk) *from_disk = 1;
    ctx->counters.program_cache_hits_disk++;
    clb__log(ctx, CLB_LOG_BUILDS, "%s.cl [%s] for %s: loaded from the disk cache in %.1f ms", label, options, op, now_ms() - t0);
    free(key);
    *out = cached;
    return CLB_OK;
  }
  char id[CLB_PROGRAM_ID_MAX], idsrc[CLB_PROGRAM_ID_MAX + 64];
  clb__program_identity(key, id, sizeof id);
  snprintf(idsrc, sizeof idsrc, "\n__kernel void %s(void) {}\n", id);
  const char *all[4];
  size_t all_lens[4];
  if (ntexts > 3) {
    free(key);
    return clb__set_error(ctx, CLB_ERR_INTERNAL, "%s: %d source texts for one program", op, ntexts);
  }
  for (int i = 0; i < ntexts; i++) {
    all[i] = texts[i];
    all_lens[i] = lens[i];
  }
  all[ntexts] = idsrc;
  all_lens[ntexts] = strlen(idsrc);
  cl_int e = CL_SUCCESS;
  cl_program p = clCreateProgramWithSource(ctx->cl, (cl_uint)ntexts + 1, all, all_lens, &e);
  if (e != CL_SUCCESS) {
    free(key);
    return clb__cl_error(ctx, e, "%s: clCreateProgramWithSource(%s.cl)", op, label);
  }
  /* -w: the compiler's warnings (PoCL prints "N warnings generated" on stderr
   * for vector ABI notes about its own builtins) are not the caller's business;
   * errors still fail the build and come back with the build log. */
  size_t olen = strlen(options) + strlen(device_options(ctx)) + strlen(CLB_FAST_BUILD_OPTION);
  char *build_opts = malloc(olen + 4);
  if (!build_opts) {
    clReleaseProgram(p);
    free(key);
    return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: build options of %s.cl", op, label);
  }
  snprintf(build_opts, olen + 4, "%s%s -w", options, device_options(ctx));
  size_t rec_len = strlen(build_opts); /* the store record's options: the optimized build */
  int fast = fast_build(ctx);
  if (fast) strcat(build_opts, CLB_FAST_BUILD_OPTION);
  /* logged before too: a build that never returns is the last line */
  clb__log(ctx, CLB_LOG_BUILDS, "%s.cl [%s] for %s: building from source%s", label, options, op,
           fast ? " (CLBOUND_COLD_BUILD=fast:" CLB_FAST_BUILD_OPTION "; the store helper builds it optimized)" : "");
  double tb = now_ms();
  e = clBuildProgram(p, 1, &ctx->device, build_opts, NULL, NULL);
  build_opts[rec_len] = 0;
  ctx->counters.program_builds++;
  ctx->counters.build_ms += (uint64_t)(now_ms() - tb + 0.5);
  /* stored later (store_pending), when the context is released or asked to:
   * with what the store helper needs to build it again */
  char *rec = e == CL_SUCCESS && ctx->cache_dir[0]
                  ? clb__store_record_new(key, build_opts, ntexts + 1, all, all_lens) : NULL;
  free(build_opts);
  if (e != CL_SUCCESS) {
    clb__set_error(ctx, CLB_ERR_BUILD, "%s: building kernels/%s.cl with \"%s\" failed (%s, %d); build log:\n",
                   op, label, options, clb__cl_error_name(e), (int)e);
    size_t loglen = 0;
    clGetProgramBuildInfo(p, ctx->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &loglen);
    char *log = loglen ? malloc(loglen + 1) : NULL;
    if (log) {
      clGetProgramBuildInfo(p, ctx->device, CL_PROGRAM_BUILD_LOG, loglen, log, NULL);
      log[loglen] = 0;
      clb__append_error(ctx, "%s", log);
      free(log);
    }
    clReleaseProgram(p);
    free(key);
    return CLB_ERR_BUILD;
  }
  clb__log(ctx, CLB_LOG_BUILDS, "%s.cl [%s] for %s: built from source in %.1f ms (first use in this context, no disk entry)",
           label, options, op, now_ms() - t0);
  if (ctx->cache_dir[0] && !rec) clb__log(ctx, CLB_LOG_CACHE, "%s.cl for %s: out of host memory: not stored", label, op);
  *store_key = rec;
  free(key);
  *out = p;
  return CLB_OK;
}

clb_status clb__program_from_text(clb_context_t ctx, const char *op, const char *label, const char *text, size_t len,
                                  const char *options, cl_program *out, char **store_key) {
  return program_from_texts(ctx, op, label, 1, &text, &len, options, 1, out, store_key, NULL);
}

static clb_status build(clb_context_t ctx, const char *op, const char *src, const char *options, int use_disk,
                        cl_program *out, char **store_key, int *from_disk) {
  const clb_kernel_src *common = clb__kernel_src_find("common");
  const clb_kernel_src *body = clb__kernel_src_get(ctx, src);
  if (!common || !body)
    return clb__set_error(ctx, CLB_ERR_INTERNAL, "%s: kernel source \"%s\" is not embedded", op, src);
  const char *texts[2] = {common->text, body->text};
  size_t lens[2] = {common->len, body->len};
  return program_from_texts(ctx, op, src, 2, texts, lens, options, use_disk, out, store_key, from_disk);
}

static uint64_t entry_hash(const char *src, const char *options) {
  return fnv1a(fnv1a(0xcbf29ce484222325ull, src), options);
}

/* A new entry at the end of the cache (not yet counted in pc->n). */
static clb_prog_entry *new_entry(clb_context_t ctx, const char *op) {
  clb_progcache *pc = ctx->programs;
  if (pc->n == pc->cap) {
    size_t ncap = pc->cap ? pc->cap * 2 : 16;
    clb_prog_entry *ne = realloc(pc->entries, ncap * sizeof *ne);
    if (!ne) {
      clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: program cache", op);
      return NULL;
    }
    pc->entries = ne;
    pc->cap = ncap;
  }
  clb_prog_entry *e = &pc->entries[pc->n];
  memset(e, 0, sizeof *e);
  return e;
}

/* Fills entry e (from new_entry) and counts it; takes p and store_key. */
static clb_status add_entry(clb_context_t ctx, const char *op, clb_prog_entry *e, const char *src, const char *options,
                            cl_program p, const char *suffix, char *store_key) {
  e->hash = entry_hash(src, options);
  e->src = dup_str(src);
  e->options = dup_str(options);
  snprintf(e->suffix, sizeof e->suffix, "%s", suffix);
  e->program = p;
  e->store_key = store_key;
  if (store_key && !ctx->programs->fast_pending && fast_build(ctx)) {
    ctx->programs->fast_pending = 1;
    ctx->programs->fast_built_ms = now_ms();
  }
  if (!e->src || !e->options) {
    free(e->store_key);
    free(e->src);
    free(e->options);
    clReleaseProgram(p);
    return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: program cache", op);
  }
  ctx->programs->n++;
  return CLB_OK;
}

clb_status clb__progcache_insert(clb_context_t ctx, const char *op, const char *src, const char *options, cl_program p,
                                 const char *suffix, char *store_key) {
  clb_prog_entry *e = new_entry(ctx, op);
  if (!e) return CLB_ERR_HOST_OOM;
  clRetainProgram(p);
  return add_entry(ctx, op, e, src, options, p, suffix, store_key);
}

clb_status clb__kernel_get(clb_context_t ctx, const char *op, const char *src,
                           const char *base_options, const char *kernel, cl_kernel *out) {
  return clb__kernel_get_wg(ctx, op, src, base_options, kernel, 0, out, NULL);
}

/* The most work-items a group of k may have on ctx's device: the driver's
 * CL_KERNEL_WORK_GROUP_SIZE, lowered to CLBOUND_TEST_KERNEL_WG_LIMIT when set. */
static size_t kernel_wg_query(clb_context_t ctx, cl_kernel k) {
  size_t wg = 0;
  if (clGetKernelWorkGroupInfo(k, ctx->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL) != CL_SUCCESS ||
      wg == 0)
    wg = ctx->info.max_work_group_size; /* unknown: the device's limit, as before */
  if (ctx->kernel_wg_limit && wg > ctx->kernel_wg_limit) wg = ctx->kernel_wg_limit;
  return wg;
}

static size_t pow2_floor(size_t v) {
  size_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

clb_status clb__kernel_get_wg(clb_context_t ctx, const char *op, const char *src, const char *base_options,
                              const char *kernel, size_t want, cl_kernel *out, size_t *wg) {
  if (wg) *wg = want ? want : ctx->local_size; /* a plan's walk that only collects kernels */
  clb_status st0 = clb__cache_open(ctx);
  if (st0 != CLB_OK) return st0;
  clb_progcache *pc = ctx->programs;
  if (pc->fast_pending || pc->upgrading > 0) tier_up(ctx);
  char options_buf[1024];
  const char *options = base_options;
  if (ctx->build_suffix[0]) {
    snprintf(options_buf, sizeof options_buf, "%s %s", base_options, ctx->build_suffix);
    options = options_buf;
  }
  uint64_t h = entry_hash(src, options);
  /* The entries of (src, options), oldest first: a program of the file alone,
   * or a section of a plan's merged program, which holds only the kernels that
   * plan launched. The first that has the kernel (made before, or made now)
   * serves it; a section that lacks it is passed over. */
  clb_prog_entry *e = NULL;
  cl_kernel k = NULL;
  cl_int err = CL_SUCCESS;
  char full[128];
  int matched = 0;
  for (size_t i = 0; i < pc->n; i++) {
    clb_prog_entry *c = &pc->entries[i];
    if (c->hash != h || strcmp(c->src, src) != 0 || strcmp(c->options, options) != 0) continue;
    matched = 1;
    for (int j = 0; j < c->nkernels; j++)
      if (strcmp(c->kernels[j].name, kernel) == 0) {
        ctx->counters.program_cache_hits_memory++;
        *out = c->kernels[j].kernel;
        if (wg) *wg = c->kernels[j].wg;
        return CLB_OK;
      }
    e = c;
    snprintf(full, sizeof full, "%s%s", kernel, e->suffix);
    k = clCreateKernel(e->program, full, &err);
    if (err != CL_INVALID_KERNEL_NAME || !e->suffix[0]) break;
    e = NULL; /* a plan's section without it */
  }
  if (matched && e) {
    ctx->counters.program_cache_hits_memory++;
  } else if (ctx->collect) {
    /* a plan's first step walked without launches: note what it needs */
    clb__plan_collect_note(ctx, src, options, kernel);
    *out = NULL;
    return CLB_OK;
  } else {
    if (matched)
      clb__log(ctx, CLB_LOG_BUILDS, "%s: %s.cl [%s] has programs of graph plans without kernel %s: a program of the file "
               "alone", op, src, options, kernel);
    e = new_entry(ctx, op);
    if (!e) return CLB_ERR_HOST_OOM;
    cl_program p = NULL;
    char *store_key = NULL;
    int from_disk = 0;
    clb_status st = build(ctx, op, src, options, 1, &p, &store_key, &from_disk);
    if (st != CLB_OK) return st;
    e = &pc->entries[pc->n];
    if ((st = add_entry(ctx, op, e, src, options, p, "", store_key)) != CLB_OK) return st;
    e->from_disk = from_disk;
    snprintf(full, sizeof full, "%s", kernel);
    k = clCreateKernel(e->program, full, &err);
  }
  if (e->nkernels == CLB_MAX_KERNELS_PER_PROGRAM) {
    if (k) clReleaseKernel(k);
    return clb__set_error(ctx, CLB_ERR_INTERNAL, "%s: too many kernels in %s.cl", op, src);
  }
  if (err != CL_SUCCESS && e->from_disk) {
    /* a program from disk that lacks a kernel of its source: drop the entry and
     * build from source (kernels made from the old program keep it alive) */
    const clb_kernel_src *common = clb__kernel_src_find("common"), *body = clb__kernel_src_get(ctx, src);
    if (common && body) {
      const char *texts[2] = {common->text, body->text};
      size_t lens[2] = {common->len, body->len};
      char *key = full_key(ctx, src, 2, texts, lens, options);
      if (key) {
        char why[160];
        snprintf(why, sizeof why, "clCreateKernel(%s) failed (%s)", full, clb__cl_error_name(err));
        clb__disk_cache_drop(ctx, key, why);
        free(key);
      }
    }
    cl_program p = NULL;
    char *store_key = NULL;
    clb_status st = build(ctx, op, src, options, 0, &p, &store_key, NULL);
    if (st != CLB_OK) return st;
    clReleaseProgram(e->program);
    free(e->store_key);
    e->program = p;
    e->store_key = store_key;
    e->from_disk = 0;
    k = clCreateKernel(e->program, full, &err);
  }
  if (err != CL_SUCCESS) return clb__cl_error(ctx, err, "%s: clCreateKernel(%s) in %s.cl", op, kernel, src);
  ctx->counters.kernels_compiled++;
  char *name = dup_str(kernel);
  if (!name) {
    clReleaseKernel(k);
    return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: program cache", op);
  }
  e->kernels[e->nkernels].name = name;
  e->kernels[e->nkernels].kernel = k;
  size_t kwg = kernel_wg_query(ctx, k);
  e->kernels[e->nkernels].wg = kwg;
  if (wg) *wg = kwg;
  if (want && kwg < want)
    clb__log(ctx, CLB_LOG_BUILDS, "%s: kernel %s of %s.cl [%s] allows %zu work-items per group (CL_KERNEL_WORK_GROUP_SIZE%s), "
             "fewer than %zu: falling back to %zu", op, kernel, src, options, kwg,
             ctx->kernel_wg_limit ? ", lowered by CLBOUND_TEST_KERNEL_WG_LIMIT" : "", want, pow2_floor(kwg));
  e->nkernels++;
  *out = k;
  return CLB_OK;
}

clb_status clb__kernel_get_local(clb_context_t ctx, const char *op, const char *src, const char *options,
                                 const char *kernel, cl_kernel *out, size_t *local) {
  size_t wg = 0;
  clb_status st = clb__kernel_get_wg(ctx, op, src, options, kernel, ctx->local_size, out, &wg);
  if (st != CLB_OK) return st;
  *local = wg < ctx->local_size ? pow2_floor(wg) : ctx->local_size;
  return CLB_OK;
}

clb_status clb__kernels_get_fixed(clb_context_t ctx, const char *op, const char *src, const char *options, int n,
                                  const char *const names[], cl_kernel out[], size_t *local) {
  size_t want = ctx->local_size;
  for (;;) {
    char opts[1024];
    snprintf(opts, sizeof opts, "%s -D LOCAL=%zu", options, want);
    size_t least = want;
    for (int i = 0; i < n; i++) {
      size_t wg = 0;
      clb_status st = clb__kernel_get_wg(ctx, op, src, opts, names[i], want, &out[i], &wg);
      if (st != CLB_OK) return st;
      if (wg < least) least = wg;
    }
    if (least >= want || want == 1) {
      *local = want;
      return CLB_OK;
    }
    want = pow2_floor(least); /* rebuilt with the size every kernel allows (logged above) */
  }
}
