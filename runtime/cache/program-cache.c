/* program-cache.c: builds each (source, options) program once per context and
 * keeps its kernels, so that a launch never builds; first asks the disk cache,
 * which it opens on the context's first kernel (clb__cache_open). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/cache/cache.h"
#include "clbound/version.h"

#define CLB_MAX_KERNELS_PER_PROGRAM 8

typedef struct clb_prog_entry {
  uint64_t hash;
  char *src;      /* kernel file name */
  char *options;  /* build options as given */
  cl_program program;
  int from_disk; /* loaded from the disk cache: rebuilt when a kernel is missing */
  int nkernels;
  struct {
    char *name;
    cl_kernel kernel;
  } kernels[CLB_MAX_KERNELS_PER_PROGRAM];
} clb_prog_entry;

struct clb_progcache {
  clb_prog_entry *entries;
  size_t n, cap;
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

static void progcache_free(clb_progcache *pc) {
  if (!pc) return;
  for (size_t i = 0; i < pc->n; i++) {
    clb_prog_entry *e = &pc->entries[i];
    for (int k = 0; k < e->nkernels; k++) {
      clReleaseKernel(e->kernels[k].kernel);
      free(e->kernels[k].name);
    }
    if (e->program) clReleaseProgram(e->program);
    free(e->src);
    free(e->options);
  }
  free(pc->entries);
  free(pc);
}

static void release_caches(clb_context_t ctx) {
  progcache_free(ctx->programs);
  ctx->programs = NULL;
}

clb_status clb__cache_open(clb_context_t ctx) {
  if (ctx->programs) return CLB_OK;
  clb_status st = clb__context_on_release(ctx, release_caches);
  if (st != CLB_OK) return st;
  ctx->programs = calloc(1, sizeof *ctx->programs);
  if (!ctx->programs) return clb__set_error(ctx, CLB_ERR_HOST_OOM, "program cache: out of host memory");
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

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* The full key of a program: everything its binary depends on. */
static char *full_key(clb_context_t ctx, const clb_kernel_src *common, const clb_kernel_src *body,
                      const char *options) {
  uint64_t h = clb__fnv1a(0xcbf29ce484222325ull, common->text, common->len);
  h = clb__fnv1a(h, body->text, body->len);
  const clb_device_info *d = &ctx->info;
  size_t cap = 1024 + strlen(options);
  char *key = malloc(cap);
  if (key)
    snprintf(key, cap, "clbound %s\nsource %s.cl %016llx\noptions %s\ndevice %s\nvendor %s\nversion %s\ndriver %s\nplatform %s",
             clb_version(), body->name, (unsigned long long)h, options, d->name, d->vendor, d->device_version,
             d->driver_version, d->platform_name);
  return key;
}

/* Builds (or loads, when use_disk) the program of src + options; *from_disk
 * says which happened. */
static clb_status build(clb_context_t ctx, const char *op, const char *src, const char *options,
                        int use_disk, cl_program *out, int *from_disk) {
  const clb_kernel_src *common = clb__kernel_src_find("common");
  const clb_kernel_src *body = clb__kernel_src_find(src);
  if (!common || !body)
    return clb__set_error(ctx, CLB_ERR_INTERNAL, "%s: kernel source \"%s\" is not embedded", op, src);
  double t0 = now_ms();
  char *key = full_key(ctx, common, body, options);
  if (!key) return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: program cache key", op);
  cl_program cached = NULL;
  *from_disk = 0;
  if (use_disk) clb__disk_cache_load(ctx, key, &cached);
  if (cached) {
    *from_disk = 1;
    ctx->counters.program_cache_hits_disk++;
    clb__log(ctx, CLB_LOG_BUILDS, "%s.cl [%s] for %s: loaded from the disk cache in %.1f ms", src, options, op, now_ms() - t0);
    free(key);
    *out = cached;
    return CLB_OK;
  }
  /* the identity kernel: a program loaded from disk must expose it */
  char id[CLB_PROGRAM_ID_MAX], idsrc[CLB_PROGRAM_ID_MAX + 64];
  clb__program_identity(key, id, sizeof id);
  snprintf(idsrc, sizeof idsrc, "\n__kernel void %s(void) {}\n", id);
  const char *texts[3] = {common->text, body->text, idsrc};
  size_t lens[3] = {common->len, body->len, strlen(idsrc)};
  cl_int e = CL_SUCCESS;
  cl_program p = clCreateProgramWithSource(ctx->cl, 3, texts, lens, &e);
  if (e != CL_SUCCESS) {
    free(key);
    return clb__cl_error(ctx, e, "%s: clCreateProgramWithSource(%s.cl)", op, src);
  }
  /* -w: the compiler's warnings (PoCL prints "N warnings generated" on stderr
   * for vector ABI notes about its own builtins) are not the caller's business;
   * errors still fail the build and come back with the build log. */
  size_t olen = strlen(options);
  char *build_opts = malloc(olen + 4);
  if (!build_opts) {
    clReleaseProgram(p);
    free(key);
    return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: build options of %s.cl", op, src);
  }
  memcpy(build_opts, options, olen);
  memcpy(build_opts + olen, " -w", 4);
  e = clBuildProgram(p, 1, &ctx->device, build_opts, NULL, NULL);
  free(build_opts);
  ctx->counters.program_builds++;
  if (e != CL_SUCCESS) {
    clb__set_error(ctx, CLB_ERR_BUILD, "%s: building kernels/%s.cl with \"%s\" failed (%s, %d); build log:\n",
                   op, src, options, clb__cl_error_name(e), (int)e);
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
           src, options, op, now_ms() - t0);
  clb__disk_cache_store(ctx, key, p);
  free(key);
  *out = p;
  return CLB_OK;
}

clb_status clb__kernel_get(clb_context_t ctx, const char *op, const char *src,
                           const char *base_options, const char *kernel, cl_kernel *out) {
  clb_status st0 = clb__cache_open(ctx);
  if (st0 != CLB_OK) return st0;
  clb_progcache *pc = ctx->programs;
  char options_buf[1024];
  const char *options = base_options;
  if (ctx->build_suffix[0]) {
    snprintf(options_buf, sizeof options_buf, "%s %s", base_options, ctx->build_suffix);
    options = options_buf;
  }
  uint64_t h = fnv1a(fnv1a(0xcbf29ce484222325ull, src), options);
  clb_prog_entry *e = NULL;
  for (size_t i = 0; i < pc->n; i++) {
    clb_prog_entry *c = &pc->entries[i];
    if (c->hash == h && strcmp(c->src, src) == 0 && strcmp(c->options, options) == 0) {
      e = c;
      break;
    }
  }
  if (e) {
    ctx->counters.program_cache_hits_memory++;
  } else {
    if (pc->n == pc->cap) {
      size_t ncap = pc->cap ? pc->cap * 2 : 16;
      clb_prog_entry *ne = realloc(pc->entries, ncap * sizeof *ne);
      if (!ne) return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: program cache", op);
      pc->entries = ne;
      pc->cap = ncap;
    }
    cl_program p = NULL;
    int from_disk = 0;
    clb_status st = build(ctx, op, src, options, 1, &p, &from_disk);
    if (st != CLB_OK) return st;
    e = &pc->entries[pc->n];
    memset(e, 0, sizeof *e);
    e->hash = h;
    e->from_disk = from_disk;
    e->src = dup_str(src);
    e->options = dup_str(options);
    e->program = p;
    if (!e->src || !e->options) {
      free(e->src);
      free(e->options);
      clReleaseProgram(p);
      return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: program cache", op);
    }
    pc->n++;
  }
  for (int k = 0; k < e->nkernels; k++)
    if (strcmp(e->kernels[k].name, kernel) == 0) {
      *out = e->kernels[k].kernel;
      return CLB_OK;
    }
  if (e->nkernels == CLB_MAX_KERNELS_PER_PROGRAM)
    return clb__set_error(ctx, CLB_ERR_INTERNAL, "%s: too many kernels in %s.cl", op, src);
  cl_int err = CL_SUCCESS;
  cl_kernel k = clCreateKernel(e->program, kernel, &err);
  if (err != CL_SUCCESS && e->from_disk) {
    /* a program from disk that lacks a kernel of its source: drop the entry and
     * build from source (kernels made from the old program keep it alive) */
    const clb_kernel_src *common = clb__kernel_src_find("common"), *body = clb__kernel_src_find(src);
    char *key = common && body ? full_key(ctx, common, body, options) : NULL;
    if (key) {
      char why[160];
      snprintf(why, sizeof why, "clCreateKernel(%s) failed (%s)", kernel, clb__cl_error_name(err));
      clb__disk_cache_drop(ctx, key, why);
      free(key);
    }
    cl_program p = NULL;
    int from_disk = 0;
    clb_status st = build(ctx, op, src, options, 0, &p, &from_disk);
    if (st != CLB_OK) return st;
    clReleaseProgram(e->program);
    e->program = p;
    e->from_disk = 0;
    k = clCreateKernel(e->program, kernel, &err);
  }
  if (err != CL_SUCCESS) return clb__cl_error(ctx, err, "%s: clCreateKernel(%s) in %s.cl", op, kernel, src);
  char *name = dup_str(kernel);
  if (!name) {
    clReleaseKernel(k);
    return clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: program cache", op);
  }
  e->kernels[e->nkernels].name = name;
  e->kernels[e->nkernels].kernel = k;
  e->nkernels++;
  *out = k;
  return CLB_OK;
}
