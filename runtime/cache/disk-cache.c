/* disk-cache.c: the persistent program cache: binaries on disk under their full
 * key, checked (regular file, magic, format, key, length, checksum of key and
 * payload) before any driver sees them, and checked again after loading: the
 * program must expose the identity kernel its key names (program-cache.c). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "runtime/cache/cache.h"

/* File layout (little-endian host order, all fields fixed size):
 *   magic "CLBCACHE" | u32 format | u32 key length | u64 payload length |
 *   u64 FNV-1a of key bytes then payload | key bytes | payload (the driver's
 *   program binary)
 * An entry is used only if every field matches and the key equals ours in full.
 * Format 2: the checksum covers the key too (format 1 entries are misses). */
#define CACHE_MAGIC "CLBCACHE"
#define CACHE_FORMAT 2u
#define CACHE_SUFFIX CLB_ENTRY_SUFFIX
#define HEADER_BYTES (8 + 4 + 4 + 8 + 8)
#define MAX_ENTRY_BYTES (512u << 20) /* larger files are not ours */
/* A temporary file (".clbin.tmp.<pid>.<n>") older than this was left by a process
 * that died between writing and renaming (kill -9, power loss): a store takes
 * well under a second, so the next context that opens the folder removes it. */
#define STALE_TEMP_SECONDS (10 * 60)
/* The entries' size limit unless CLBOUND_CACHE_MAX_SIZE sets one: an hour of
 * the demo and the benchmarks made 541 entries, 70 MB. */
#define CACHE_DEFAULT_LIMIT_MIB 256

static void evict(const char *dir, const char *keep, const clb__logger *lg);

/* One warning on stderr per process for a cache that cannot be written. */
static atomic_int store_warned;

static int is_off(const char *s) {
  return s && (strcmp(s, "off") == 0 || strcmp(s, "0") == 0 || strcmp(s, "none") == 0);
}

clb_status clb_cache_default_dir(char *buf, size_t cap) {
  if (!buf || cap == 0)
    return clb__set_error(NULL, CLB_ERR_NULL, "clb_cache_default_dir: %s", buf ? "cap is 0" : "buf is NULL");
  buf[0] = 0;
  const char *env = clb__env_text(CLB_ENV_CACHE_DIR);
  int n;
  if (env && *env) {
    if (is_off(env)) return CLB_OK;
    n = snprintf(buf, cap, "%s", env);
  } else if (getenv("XDG_CACHE_HOME") && *getenv("XDG_CACHE_HOME")) {
    n = snprintf(buf, cap, "%s/clbound", getenv("XDG_CACHE_HOME"));
  } else if (getenv("HOME") && *getenv("HOME")) {
    n = snprintf(buf, cap, "%s/.cache/clbound", getenv("HOME"));
  } else {
    return CLB_OK; /* nowhere sensible: off */
  }
  if (n < 0 || (size_t)n >= cap) {
    buf[0] = 0;
    return CLB_ERR_BUFFER_SMALL;
  }
  return CLB_OK;
}

/* mkdir -p with mode 0700: the cache holds code the driver will run. */
static int make_dirs(const char *path) {
  char tmp[1024];
  if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return -1;
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0700) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(tmp, 0700) != 0 && errno != EEXIST) return -1;
  return 0;
}

/* Whether name is a temporary file of an entry or of a store manifest. */
static int is_temp(const char *name) {
  return strstr(name, CACHE_SUFFIX ".tmp.") != NULL || strstr(name, CLB_MANIFEST_SUFFIX ".tmp.") != NULL;
}

/* Removes temporary files older than STALE_TEMP_SECONDS from the cache folder. */
static void remove_stale_temps(clb_context_t ctx) {
  DIR *d = opendir(ctx->cache_dir);
  if (!d) return;
  time_t now = time(NULL);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!is_temp(e->d_name)) continue;
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", ctx->cache_dir, e->d_name);
    struct stat sb;
    if (lstat(path, &sb) != 0 || S_ISDIR(sb.st_mode) || now - sb.st_mtime < STALE_TEMP_SECONDS) continue;
    if (unlink(path) == 0) clb__log(ctx, CLB_LOG_CACHE, "removed %s, a temporary file left by a process that died", path);
  }
  closedir(d);
}

/* Prints a warning about the cache folder on stderr once per process for each
 * text (every context opens the folder: the first says it, the others log it). */
static void warn_once(const char *fmt, ...) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static char said[8][1400]; /* the last 8 texts said, a ring */
  static int nsaid, next;
  char text[1400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&lock);
  int seen = 0;
  for (int i = 0; i < nsaid && !seen; i++) seen = strcmp(said[i], text) == 0;
  if (!seen) {
    snprintf(said[next], sizeof said[0], "%s", text);
    next = (next + 1) % 8;
    if (nsaid < 8) nsaid++;
    fputs(text, stderr);
  }
  pthread_mutex_unlock(&lock);
}

void clb__disk_cache_init(clb_context_t ctx, const char *option) {
  ctx->cache_dir[0] = 0;
  if (option) {
    if (is_off(option) || !*option) return;
    /* clb_context_new refuses a longer option; kept as a guard */
    if (snprintf(ctx->cache_dir, sizeof ctx->cache_dir, "%s", option) >= (int)sizeof ctx->cache_dir) {
      ctx->cache_dir[0] = 0;
      return;
    }
  } else if (clb_cache_default_dir(ctx->cache_dir, sizeof ctx->cache_dir) != CLB_OK) {
    ctx->cache_dir[0] = 0;
    warn_once("clbound: warning: the program cache folder's name (CLBOUND_CACHE_DIR, XDG_CACHE_HOME or HOME) "
              "is longer than %zu characters; the persistent cache is off\n", sizeof ctx->cache_dir - 1);
    clb__log(ctx, CLB_LOG_CACHE, "cache folder name longer than %zu characters: persistent cache off",
             sizeof ctx->cache_dir - 1);
    return;
  }
  if (!ctx->cache_dir[0]) return;
  char probe[1100];
  snprintf(probe, sizeof probe, "%s/.probe.%ld", ctx->cache_dir, (long)getpid());
  int fd = -1;
  const char *why = NULL;
  struct stat sb;
  if (make_dirs(ctx->cache_dir) == 0) {
    /* the cache holds code the driver runs: a folder others may write is not used */
    int known = stat(ctx->cache_dir, &sb) == 0;
    if (known && !S_ISDIR(sb.st_mode)) {
      why = "not a folder";
    } else if (known && (sb.st_uid != geteuid() || (sb.st_mode & 022))) {
      why = sb.st_uid != geteuid() ? "owned by another user" : "writable by other users";
    } else {
      fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK, 0600);
    }
  }
  if (why) {
    warn_once("clbound: warning: program cache folder %s is %s; the persistent cache is off\n", ctx->cache_dir, why);
    clb__log(ctx, CLB_LOG_CACHE, "folder %s %s: persistent cache off", ctx->cache_dir, why);
    ctx->cache_dir[0] = 0;
    return;
  }
  if (fd < 0) {
    warn_once("clbound: warning: program cache folder %s is not writable (%s); the persistent cache is off\n",
              ctx->cache_dir, strerror(errno));
    clb__log(ctx, CLB_LOG_CACHE, "folder %s not writable: persistent cache off", ctx->cache_dir);
    ctx->cache_dir[0] = 0;
    return;
  }
  close(fd);
  unlink(probe);
  remove_stale_temps(ctx);
}

void clb__cache_entry_path(const char *dir, const char *key, const char *suffix, char *buf, size_t cap) {
  size_t len = strlen(key);
  uint64_t h1 = clb__fnv1a(0xcbf29ce484222325ull, key, len);
  uint64_t h2 = clb__fnv1a(0x84222325cbf29ce4ull ^ len, key, len);
  snprintf(buf, cap, "%s/%016llx%016llx%s", dir, (unsigned long long)h1, (unsigned long long)h2, suffix);
}

static void entry_path(clb_context_t ctx, const char *key, char *buf, size_t cap) {
  clb__cache_entry_path(ctx->cache_dir, key, CACHE_SUFFIX, buf, cap);
}

/* The entry's checksum: the key, then the payload. */
static uint64_t entry_sum(const char *key, size_t klen, const unsigned char *payload, size_t plen) {
  return clb__fnv1a(clb__fnv1a(CLB_FNV_SEED, key, klen), payload, plen);
}

/* Checks an entry; returns the payload inside buf, or NULL with the reason. */
static const unsigned char *check_entry(const unsigned char *buf, size_t len, const char *key, size_t *plen,
                                        const char **why) {
  uint32_t fmt, klen;
  uint64_t payload_len, sum;
  if (len < HEADER_BYTES) {
    *why = "truncated header";
    return NULL;
  }
  if (memcmp(buf, CACHE_MAGIC, 8) != 0) {
    *why = "bad magic";
    return NULL;
  }
  memcpy(&fmt, buf + 8, 4);
  memcpy(&klen, buf + 12, 4);
  memcpy(&payload_len, buf + 16, 8);
  memcpy(&sum, buf + 24, 8);
  if (fmt != CACHE_FORMAT) {
    *why = "other format version";
    return NULL;
  }
  if (klen != strlen(key) || (uint64_t)HEADER_BYTES + klen > len || memcmp(buf + HEADER_BYTES, key, klen) != 0) {
    *why = "key differs (another device, driver, source or options)";
    return NULL;
  }
  if ((uint64_t)HEADER_BYTES + klen + payload_len != len || payload_len == 0) {
    *why = "truncated or extended payload";
    return NULL;
  }
  const unsigned char *payload = buf + HEADER_BYTES + klen;
  if (entry_sum(key, klen, payload, (size_t)payload_len) != sum) {
    *why = "checksum mismatch";
    return NULL;
  }
  *plen = (size_t)payload_len;
  return payload;
}

/* Whether the program's CL_PROGRAM_KERNEL_NAMES (";"-separated) holds `name`. */
static int exposes_kernel(cl_program p, const char *name) {
  size_t n = 0;
  if (clGetProgramInfo(p, CL_PROGRAM_KERNEL_NAMES, 0, NULL, &n) != CL_SUCCESS || n == 0) return 0;
  char *names = malloc(n + 1);
  if (!names) return 0;
  int found = 0;
  if (clGetProgramInfo(p, CL_PROGRAM_KERNEL_NAMES, n, names, NULL) == CL_SUCCESS) {
    names[n] = 0;
    size_t want = strlen(name);
    for (char *t = names; *t;) {
      size_t k = strcspn(t, ";");
      if (k == want && memcmp(t, name, k) == 0) found = 1;
      t += k;
      if (*t) t++;
    }
  }
  free(names);
  return found;
}

void clb__disk_cache_load(clb_context_t ctx, const char *key, cl_program *out) {
  *out = NULL;
  if (!ctx->cache_dir[0]) return;
  char path[1200];
  entry_path(ctx, key, path, sizeof path);
  size_t len = 0, plen = 0;
  const char *why = NULL;
  unsigned char *buf = clb__cache_read_file(path, MAX_ENTRY_BYTES, 1, &len, &why);
  if (!buf) {
    if (why) clb__log(ctx, CLB_LOG_CACHE, "entry %s rejected: %s; rebuilding", path, why);
    return;
  }
  const unsigned char *payload = check_entry(buf, len, key, &plen, &why);
  if (!payload) {
    clb__log(ctx, CLB_LOG_CACHE, "entry %s rejected: %s; rebuilding", path, why);
    unlink(path);
    free(buf);
    return;
  }
  cl_int e = CL_SUCCESS, bin_status = CL_SUCCESS;
  cl_program p = clCreateProgramWithBinary(ctx->cl, 1, &ctx->device, &plen, &payload, &bin_status, &e);
  if (e == CL_SUCCESS && bin_status == CL_SUCCESS) e = clBuildProgram(p, 1, &ctx->device, NULL, NULL, NULL);
  else if (e == CL_SUCCESS) e = bin_status;
  free(buf);
  if (e != CL_SUCCESS) {
    clb__log(ctx, CLB_LOG_CACHE, "entry %s refused by the driver (%s); rebuilding", path, clb__cl_error_name(e));
    if (p) clReleaseProgram(p);
    unlink(path);
    return;
  }
  /* the program must be the one the key names: it exposes the key's identity
   * kernel (an entry holding another program's binary does not) */
  char id[CLB_PROGRAM_ID_MAX];
  clb__program_identity(key, id, sizeof id);
  if (!exposes_kernel(p, id)) {
    clb__log(ctx, CLB_LOG_CACHE, "entry %s rejected: holds another program (no kernel %s); rebuilding", path, id);
    clReleaseProgram(p);
    unlink(path);
    return;
  }
  /* used now: its mtime orders the least-recently-used eviction (atime is not
   * kept on most mounts) */
  utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW);
  *out = p;
}

void clb__program_identity(const char *key, char *buf, size_t cap) {
  size_t len = strlen(key);
  snprintf(buf, cap, "clb_id_%016llx%016llx", (unsigned long long)clb__fnv1a(CLB_FNV_SEED, key, len),
           (unsigned long long)clb__fnv1a(0x84222325cbf29ce4ull ^ len, key, len));
}

void clb__disk_cache_drop(clb_context_t ctx, const char *key, const char *why) {
  if (!ctx->cache_dir[0]) return;
  char path[1200];
  entry_path(ctx, key, path, sizeof path);
  if (unlink(path) == 0) clb__log(ctx, CLB_LOG_CACHE, "entry %s dropped: %s; rebuilding", path, why);
}

void clb__disk_cache_store(clb_context_t ctx, const char *key, cl_program prog) {
  if (!ctx->cache_dir[0]) return;
  clb__logger lg = clb__context_logger(ctx);
  clb__disk_cache_write(ctx->cache_dir, key, prog, &lg);
}

int clb__disk_cache_write(const char *dir, const char *key, cl_program prog, const clb__logger *lg) {
  size_t blen = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof blen, &blen, NULL) != CL_SUCCESS || blen == 0 ||
      blen > MAX_ENTRY_BYTES)
    return -1;
  unsigned char *bin = malloc(blen);
  if (!bin) return -1;
  unsigned char *bins[1] = {bin};
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) != CL_SUCCESS) {
    free(bin);
    return -1;
  }
  char path[1200];
  clb__cache_entry_path(dir, key, CACHE_SUFFIX, path, sizeof path);
  unsigned char header[HEADER_BYTES];
  uint32_t fmt = CACHE_FORMAT, klen = (uint32_t)strlen(key);
  uint64_t payload_len = blen, sum = entry_sum(key, klen, bin, blen);
  memcpy(header, CACHE_MAGIC, 8);
  memcpy(header + 8, &fmt, 4);
  memcpy(header + 12, &klen, 4);
  memcpy(header + 16, &payload_len, 8);
  memcpy(header + 24, &sum, 8);
  const void *parts[3] = {header, key, bin};
  size_t lens[3] = {sizeof header, klen, blen};
  const char *step = "";
  int err = clb__cache_write_atomic(path, parts, lens, 3, &step);
  if (!err) {
    clb__log_to(lg, CLB_LOG_CACHE, "stored %zu bytes in %s", blen, path);
    evict(dir, path, lg);
  } else {
    clb__log_to(lg, CLB_LOG_CACHE, "could not store %s (%s: %s)", path, step, strerror(err));
    if (atomic_exchange(&store_warned, 1) == 0)
      fprintf(stderr, "clbound: warning: program cache: cannot store %s (%s: %s); programs will be built again next time\n",
              path, step, strerror(err));
  }
  free(bin);
  return err ? -1 : 0;
}

uint64_t clb_cache_limit_bytes(void) {
  const char *s = clb__env_text(CLB_ENV_CACHE_MAX_SIZE);
  if (s && *s >= '0' && *s <= '9') {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    if (shift) end++;
    if (!*end && errno == 0 && v <= (UINT64_MAX >> shift)) return (uint64_t)v << shift;
  }
  if (s) clb__env_warn(CLB_ENV_CACHE_MAX_SIZE, s, "256M");
  return (uint64_t)CACHE_DEFAULT_LIMIT_MIB << 20;
}

typedef struct lru_entry {
  struct timespec used; /* the entry's mtime: written, or last loaded */
  uint64_t bytes;
  char name[256];
} lru_entry;

static int older_first(const void *a, const void *b) {
  const lru_entry *x = a, *y = b;
  if (x->used.tv_sec != y->used.tv_sec) return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
  if (x->used.tv_nsec != y->used.tv_nsec) return x->used.tv_nsec < y->used.tv_nsec ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Removes the least recently used entries of dir (oldest mtime first: written,
 * or touched by a load) until the entries hold at most the limit, never the
 * entry `keep` (the one just written). Runs after each store; other processes
 * may remove the same files (a missing one is skipped). */
static void evict(const char *dir, const char *keep, const clb__logger *lg) {
  uint64_t limit = clb_cache_limit_bytes();
  if (limit == 0) return; /* no limit */
  DIR *d = opendir(dir);
  if (!d) return;
  lru_entry *v = NULL;
  size_t n = 0, cap = 0;
  uint64_t total = 0;
  size_t sl = strlen(CACHE_SUFFIX);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len <= sl || len >= sizeof v->name || strcmp(e->d_name + len - sl, CACHE_SUFFIX) != 0) continue;
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
    if (n == cap) {
      size_t ncap = cap ? 2 * cap : 64;
      lru_entry *nv = realloc(v, ncap * sizeof *nv);
      if (!nv) break; /* out of memory: evict among those seen */
      v = nv;
      cap = ncap;
    }
    v[n].used = sb.st_mtim;
    v[n].bytes = (uint64_t)sb.st_size;
    memcpy(v[n].name, e->d_name, len + 1);
    total += v[n].bytes;
    n++;
  }
  closedir(d);
  if (total > limit) {
    qsort(v, n, sizeof *v, older_first);
    for (size_t i = 0; i < n && total > limit; i++) {
      char path[1400];
      snprintf(path, sizeof path, "%s/%s", dir, v[i].name);
      if (strcmp(path, keep) == 0) continue;
      if (unlink(path) != 0 && errno != ENOENT) continue;
      total -= v[i].bytes;
      clb__log_to(lg, CLB_LOG_CACHE, "removed %s (%llu bytes, the least recently used): the entries held more than "
                  "the limit of %llu bytes (CLBOUND_CACHE_MAX_SIZE)", path, (unsigned long long)v[i].bytes,
                  (unsigned long long)limit);
    }
  }
  free(v);
}

clb_status clb__cache_walk(const char *dir, int remove_entries, uint64_t *entries, uint64_t *bytes) {
  char def[1024];
  if (!dir) {
    clb_cache_default_dir(def, sizeof def);
    if (!def[0]) return CLB_OK;
    dir = def;
  }
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT) return CLB_OK;
    clb__set_last_errmsg("cache folder %s: %s", dir, strerror(errno));
    return CLB_ERR_IO;
  }
  clb_status st = CLB_OK;
  struct dirent *e;
  size_t sl = strlen(CACHE_SUFFIX);
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    int entry = n > sl && strcmp(e->d_name + n - sl, CACHE_SUFFIX) == 0;
    size_t ml = strlen(CLB_MANIFEST_SUFFIX);
    int manifest = n > ml && strcmp(e->d_name + n - ml, CLB_MANIFEST_SUFFIX) == 0;
    if (!entry && !(remove_entries && (manifest || is_temp(e->d_name)))) continue;
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(path, &sb) != 0) continue;
    if (remove_entries) {
      if (unlink(path) != 0) {
        clb__set_last_errmsg("cannot remove %s: %s", path, strerror(errno));
        st = CLB_ERR_IO;
      }
    } else {
      if (entries) (*entries)++;
      if (bytes) *bytes += (uint64_t)sb.st_size;
    }
  }
  closedir(d);
  return st;
}
