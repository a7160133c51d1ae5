/* log.c: the counters, event logging by category (CLBOUND_LOG), recompile
 * reasons, and the metrics JSON (CLBOUND_METRICS_FILE). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/core/core.h"
#include "clbound/version.h"

static const struct {
  unsigned bit;
  const char *name;
} categories[] = {{CLB_LOG_RECOMPILES, "recompiles"}, {CLB_LOG_SYNCS, "syncs"}, {CLB_LOG_BUILDS, "builds"}, {CLB_LOG_CACHE, "cache"}, {CLB_LOG_GEMM, "gemm"}, {CLB_LOG_RECORD, "record"}, {CLB_LOG_DEVICE, "device"}};
#define NCATEGORIES (sizeof categories / sizeof categories[0])

unsigned clb__log_env_mask(void) {
  /* env.h lists the categories in the order of their bits */
  return (unsigned)clb__env_int(CLB_ENV_LOG) & CLB_LOG_ALL;
}

void clb_context_set_log(clb_context_t ctx, unsigned mask, clb_log_fn fn, void *user) {
  if (!ctx) return;
  ctx->log_mask = mask & CLB_LOG_ALL;
  ctx->log_fn = fn;
  ctx->log_user = user;
}

static double monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The time of the process's first line (lines come from the background store's
 * thread too). */
static pthread_once_t log_start_once = PTHREAD_ONCE_INIT;
static double log_t0;
static void log_start(void) { log_t0 = monotonic_s(); }

static void log_line(const clb__logger *lg, unsigned category, const char *fmt, va_list ap) {
  if (!(lg->mask & category)) return;
  const char *name = "log";
  for (size_t i = 0; i < NCATEGORIES; i++)
    if (categories[i].bit == category) name = categories[i].name;
  char line[2048];
  vsnprintf(line, sizeof line, fmt, ap);
  if (lg->fn) {
    lg->fn(lg->user, name, line);
  } else {
    /* time-stamped (seconds since the process's first line): when a run stalls,
     * the last line says what it was doing and since when */
    pthread_once(&log_start_once, log_start);
    fprintf(stderr, "clbound[%s]: %9.3f s: %s\n", name, monotonic_s() - log_t0, line);
  }
}

clb__logger clb__context_logger(clb_context_t ctx) {
  clb__logger lg = {ctx->log_mask, ctx->log_fn, ctx->log_user};
  return lg;
}

void clb__log(clb_context_t ctx, unsigned category, const char *fmt, ...) {
  if (!(ctx->log_mask & category)) return;
  clb__logger lg = clb__context_logger(ctx);
  va_list ap;
  va_start(ap, fmt);
  log_line(&lg, category, fmt, ap);
  va_end(ap);
}

void clb__log_to(const clb__logger *lg, unsigned category, const char *fmt, ...) {
  if (!(lg->mask & category)) return;
  va_list ap;
  va_start(ap, fmt);
  log_line(lg, category, fmt, ap);
  va_end(ap);
}

void clb__note_recompile(clb_context_t ctx, const char *reason) {
  ctx->counters.recompiles++;
  clb__log(ctx, CLB_LOG_RECOMPILES, "%s", reason);
  if (ctx->n_recompiles == ctx->cap_recompiles) {
    size_t ncap = ctx->cap_recompiles ? ctx->cap_recompiles * 2 : 16;
    char **n = realloc(ctx->recompile_reasons, ncap * sizeof *n);
    if (!n) return; /* counted and logged; only the list entry is lost */
    ctx->recompile_reasons = n;
    ctx->cap_recompiles = ncap;
  }
  size_t len = strlen(reason) + 1;
  char *copy = malloc(len);
  if (!copy) return;
  memcpy(copy, reason, len);
  ctx->recompile_reasons[ctx->n_recompiles++] = copy;
}

/* A growing string that counts what it could not hold. */
typedef struct sbuf {
  char *buf;
  size_t cap, len;
} sbuf;

static void put(sbuf *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = s->len < s->cap ? s->cap - s->len : 0;
  int n = vsnprintf(room ? s->buf + s->len : NULL, room, fmt, ap);
  va_end(ap);
  if (n > 0) s->len += (size_t)n;
}

static void put_json_string(sbuf *s, const char *str) {
  put(s, "\"");
  for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
    if (*p == '"' || *p == '\\') put(s, "\\%c", *p);
    else if (*p < 0x20) put(s, "\\u%04x", *p);
    else put(s, "%c", *p);
  }
  put(s, "\"");
}

/* What a metrics JSON describes: one context, or (contexts > 0) every context
 * the process has freed so far. */
typedef struct metrics_src {
  const clb_counters *c;
  const char *device;
  char *const *reasons;
  size_t n_reasons;
  uint64_t contexts; /* 0: one context's */
} metrics_src;

static void metrics_format(sbuf *s, const metrics_src *m) {
  const clb_counters *c = m->c;
  put(s, "{\"clbound_version\":\"%s\",", clb_version());
  if (m->contexts) put(s, "\"scope\":\"process\",\"contexts\":%llu,", (unsigned long long)m->contexts);
  put(s, "\"device\":");
  put_json_string(s, m->device);
  put(s,
      ",\"program_builds\":%llu,\"program_cache_hits_memory\":%llu,\"program_cache_hits_disk\":%llu,"
      "\"kernel_launches\":%llu,\"host_syncs\":%llu,\"bytes_to_device\":%llu,\"bytes_to_host\":%llu,"
      "\"plans_compiled\":%llu,\"recompiles\":[",
      (unsigned long long)c->program_builds, (unsigned long long)c->program_cache_hits_memory,
      (unsigned long long)c->program_cache_hits_disk, (unsigned long long)c->kernel_launches,
      (unsigned long long)c->host_syncs, (unsigned long long)c->bytes_to_device, (unsigned long long)c->bytes_to_host,
      (unsigned long long)c->plans_compiled);
  for (size_t i = 0; i < m->n_reasons; i++) {
    if (i) put(s, ",");
    put_json_string(s, m->reasons[i]);
  }
  put(s, "],\"recompile_count\":%llu,\"peak_device_bytes\":%llu,\"device_bytes_held\":%llu,"
          "\"buffers_fresh\":%llu,\"buffers_reused\":%llu,\"arena_bytes\":%llu,\"live_lower_bound_bytes\":%llu,"
          "\"pool_peak_bytes\":%llu,\"arena_allocations\":%llu,\"arena_max_bytes\":%llu,\"kernels_compiled\":%llu,"
          "\"build_ms\":%llu,\"store_ms\":%llu,\"plan_programs\":%llu,\"kernels_fused\":%llu,\"steps_replayed\":%llu,"
          "\"first_launches\":%llu,\"first_launch_ms\":%llu,\"steps_recorded\":%llu,\"host_writes\":%llu,"
          "\"context_new_ms\":%llu,\"context_free_ms\":%llu,\"store_local\":%llu,\"store_handoffs\":%llu,"
          "\"programs_upgraded\":%llu,\"host_sync_blocks\":%llu}",
      (unsigned long long)c->recompiles, (unsigned long long)c->peak_device_bytes,
      (unsigned long long)c->device_bytes_held, (unsigned long long)c->buffers_fresh,
      (unsigned long long)c->buffers_reused, (unsigned long long)c->arena_bytes,
      (unsigned long long)c->live_lower_bound_bytes, (unsigned long long)c->pool_peak_bytes,
      (unsigned long long)c->arena_allocations, (unsigned long long)c->arena_max_bytes,
      (unsigned long long)c->kernels_compiled, (unsigned long long)c->build_ms, (unsigned long long)c->store_ms,
      (unsigned long long)c->plan_programs, (unsigned long long)c->kernels_fused, (unsigned long long)c->steps_replayed,
      (unsigned long long)c->first_launches, (unsigned long long)c->first_launch_ms,
      (unsigned long long)c->steps_recorded, (unsigned long long)c->host_writes,
      (unsigned long long)c->context_new_ms, (unsigned long long)c->context_free_ms,
      (unsigned long long)c->store_local, (unsigned long long)c->store_handoffs,
      (unsigned long long)c->programs_upgraded, (unsigned long long)c->host_sync_blocks);
}

clb_status clb_context_metrics_json(clb_context_t ctx, char *buf, size_t cap, size_t *len) {
  if (!ctx) return clb__set_error(NULL, CLB_ERR_NULL, "clb_context_metrics_json: ctx is NULL");
  clb_counters c;
  c.struct_size = sizeof c;
  clb_context_counters(ctx, &c);
  sbuf s = {buf, buf ? cap : 0, 0};
  metrics_src m = {&c, ctx->info.name, ctx->recompile_reasons, ctx->n_recompiles, 0};
  metrics_format(&s, &m);
  if (len) *len = s.len;
  if (s.len >= cap) {
    if (buf && cap) buf[cap - 1] = 0;
    return clb__set_error(ctx, CLB_ERR_BUFFER_SMALL, "clb_context_metrics_json: %zu bytes needed, %zu given", s.len + 1, cap);
  }
  return CLB_OK;
}

/* ---- CLBOUND_METRICS_FILE: every context of the process ------------------
 * Each freed context's counters are added to the process's; the file is
 * rewritten at each free, so after the last one it describes the whole run.
 * Counts and times are summed; the levels (peak and held device bytes, bytes
 * live, the largest plan's arena) are the largest of any one context. */
#define METRICS_MAX_REASONS 4096 /* listed; recompile_count counts them all */
#define METRICS_MAX_DEVICES 8    /* distinct device names listed */
static pthread_mutex_t metrics_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  clb_counters sum;
  uint64_t contexts;
  char *reasons[METRICS_MAX_REASONS];
  size_t n_reasons;
  char devices[METRICS_MAX_DEVICES * CLB_DEVICE_STRING_MAX];
  int n_devices;
} proc;

static void metrics_add(const clb_counters *c) {
  const clb_counters before = proc.sum;
  const size_t first = offsetof(clb_counters, program_builds);
  const size_t n = (sizeof *c - first) / sizeof(uint64_t);
  uint64_t *t = (uint64_t *)((char *)&proc.sum + first);
  const uint64_t *v = (const uint64_t *)((const char *)c + first);
  for (size_t i = 0; i < n; i++) t[i] += v[i];
  /* levels, not counts: the largest of any one context */
#define LEVEL(f) proc.sum.f = c->f > before.f ? c->f : before.f
  LEVEL(device_bytes_live);
  LEVEL(device_bytes_held);
  LEVEL(peak_device_bytes);
  LEVEL(arena_max_bytes);
#undef LEVEL
  proc.contexts++;
}

static void metrics_add_device(const char *name) {
  size_t len = strlen(proc.devices);
  for (const char *p = proc.devices; *p;) { /* "a; b; c" */
    size_t n = strcspn(p, ";");
    if (n == strlen(name) && strncmp(p, name, n) == 0) return;
    p += n;
    while (*p == ';' || *p == ' ') p++;
  }
  if (proc.n_devices == METRICS_MAX_DEVICES) return;
  snprintf(proc.devices + len, sizeof proc.devices - len, "%s%s", len ? "; " : "", name);
  proc.n_devices++;
}

void clb__metrics_write_env(clb_context_t ctx) {
  const char *path = clb__env_text(CLB_ENV_METRICS_FILE);
  if (!path) return;
  clb_counters c;
  c.struct_size = sizeof c;
  clb_context_counters(ctx, &c);
  pthread_mutex_lock(&metrics_lock);
  metrics_add(&c);
  metrics_add_device(ctx->info.name);
  for (size_t i = 0; i < ctx->n_recompiles && proc.n_reasons < METRICS_MAX_REASONS; i++) {
    size_t n = strlen(ctx->recompile_reasons[i]) + 1;
    char *copy = malloc(n);
    if (!copy) break;
    memcpy(copy, ctx->recompile_reasons[i], n);
    proc.reasons[proc.n_reasons++] = copy;
  }
  metrics_src m = {&proc.sum, proc.devices, proc.reasons, proc.n_reasons, proc.contexts};
  sbuf s = {NULL, 0, 0};
  metrics_format(&s, &m);
  s.buf = malloc(s.len + 1);
  if (s.buf) {
    s.cap = s.len + 1;
    s.len = 0;
    metrics_format(&s, &m);
    FILE *f = fopen(path, "w");
    if (f) {
      fprintf(f, "%s\n", s.buf);
      if (fclose(f) != 0) fprintf(stderr, "clbound: warning: could not write the metrics file %s\n", path);
    } else {
      fprintf(stderr, "clbound: warning: could not open the metrics file %s\n", path);
    }
    free(s.buf);
  }
  pthread_mutex_unlock(&metrics_lock);
}

clb_status clb_context_counters(clb_context_t ctx, clb_counters *out) {
  if (!ctx || !out) return clb__set_error(ctx, CLB_ERR_NULL, "clb_context_counters: NULL argument");
  size_t keep = out->struct_size;
  if (keep < sizeof(size_t) || keep > sizeof *out)
    return clb__set_error(ctx, CLB_ERR_INVALID_ARG, "clb_context_counters: struct_size %zu not set", keep);
  clb_counters c = ctx->counters;
  c.first_launch_ms = (uint64_t)(clb__first_launch_ms(ctx) + 0.5);
  clb_pool_stats ps;
  clb__pool_stats(ctx->pool, &ps);
  c.device_bytes_live = ps.live_bytes;
  c.device_bytes_held = ps.held_bytes;
  c.peak_device_bytes = ps.peak_bytes;
  c.buffers_fresh = ps.fresh;
  c.buffers_reused = ps.reused;
  c.struct_size = keep;
  memcpy(out, &c, keep);
  return CLB_OK;
}
