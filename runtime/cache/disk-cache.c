/* disk-cache.c: the persistent program cache: binaries on disk under their full
 * key, checked (magic, format, key, length, checksum) before any driver sees them. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "runtime/cache/cache.h"

/* File layout (little-endian host order, all fields fixed size):
 *   magic "CLBCACHE" | u32 format | u32 key length | u64 payload length |
 *   u64 payload FNV-1a | key bytes | payload (the driver's program binary)
 * An entry is used only if every field matches and the key equals ours in full. */
#define CACHE_MAGIC "CLBCACHE"
#define CACHE_FORMAT 1u
#define CACHE_SUFFIX ".clbin"
#define HEADER_BYTES (8 + 4 + 4 + 8 + 8)
#define MAX_ENTRY_BYTES (512u << 20) /* larger files are not ours */

static int is_off(const char *s) {
  return s && (strcmp(s, "off") == 0 || strcmp(s, "0") == 0 || strcmp(s, "none") == 0);
}

clb_status clb_cache_default_dir(char *buf, size_t cap) {
  if (!buf || cap == 0) return CLB_ERR_NULL;
  buf[0] = 0;
  const char *env = getenv("CLBOUND_CACHE_DIR");
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

void clb__disk_cache_init(clb_context_t ctx, const char *option) {
  ctx->cache_dir[0] = 0;
  if (option) {
    if (is_off(option) || !*option) return;
    if (snprintf(ctx->cache_dir, sizeof ctx->cache_dir, "%s", option) >= (int)sizeof ctx->cache_dir) {
      ctx->cache_dir[0] = 0;
      clb__log(ctx, CLB_LOG_CACHE, "cache folder name too long: persistent cache off");
      return;
    }
  } else if (clb_cache_default_dir(ctx->cache_dir, sizeof ctx->cache_dir) != CLB_OK) {
    ctx->cache_dir[0] = 0;
    return;
  }
  if (!ctx->cache_dir[0]) return;
  char probe[1100];
  snprintf(probe, sizeof probe, "%s/.probe.%ld", ctx->cache_dir, (long)getpid());
  int fd = -1;
  if (make_dirs(ctx->cache_dir) == 0) fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    fprintf(stderr, "clbound: warning: program cache folder %s is not writable (%s); the persistent cache is off\n",
            ctx->cache_dir, strerror(errno));
    clb__log(ctx, CLB_LOG_CACHE, "folder %s not writable: persistent cache off", ctx->cache_dir);
    ctx->cache_dir[0] = 0;
    return;
  }
  close(fd);
  unlink(probe);
}

static void entry_path(clb_context_t ctx, const char *key, char *buf, size_t cap) {
  size_t len = strlen(key);
  uint64_t h1 = clb__fnv1a(0xcbf29ce484222325ull, key, len);
  uint64_t h2 = clb__fnv1a(0x84222325cbf29ce4ull ^ len, key, len);
  snprintf(buf, cap, "%s/%016llx%016llx%s", ctx->cache_dir, (unsigned long long)h1, (unsigned long long)h2,
           CACHE_SUFFIX);
}

/* Reads a whole file (at most MAX_ENTRY_BYTES). */
static unsigned char *read_file(const char *path, size_t *len, const char **why) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    *why = NULL; /* simply absent */
    return NULL;
  }
  unsigned char *buf = NULL;
  *why = "unreadable";
  if (fseek(f, 0, SEEK_END) == 0) {
    long n = ftell(f);
    if (n >= 0 && (unsigned long)n <= MAX_ENTRY_BYTES && fseek(f, 0, SEEK_SET) == 0) {
      buf = malloc((size_t)n + 1);
      if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
        *len = (size_t)n;
        *why = NULL;
      } else {
        free(buf);
        buf = NULL;
      }
    } else if (n >= 0) {
      *why = "too large";
    }
  }
  fclose(f);
  return buf;
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
  if (clb__fnv1a(0xcbf29ce484222325ull, payload, (size_t)payload_len) != sum) {
    *why = "checksum mismatch";
    return NULL;
  }
  *plen = (size_t)payload_len;
  return payload;
}

void clb__disk_cache_load(clb_context_t ctx, const char *key, cl_program *out) {
  *out = NULL;
  if (!ctx->cache_dir[0]) return;
  char path[1200];
  entry_path(ctx, key, path, sizeof path);
  size_t len = 0, plen = 0;
  const char *why = NULL;
  unsigned char *buf = read_file(path, &len, &why);
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
  *out = p;
}

void clb__disk_cache_store(clb_context_t ctx, const char *key, cl_program prog) {
  if (!ctx->cache_dir[0]) return;
  size_t blen = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof blen, &blen, NULL) != CL_SUCCESS || blen == 0 ||
      blen > MAX_ENTRY_BYTES)
    return;
  unsigned char *bin = malloc(blen);
  if (!bin) return;
  unsigned char *bins[1] = {bin};
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) != CL_SUCCESS) {
    free(bin);
    return;
  }
  char path[1200], tmp[1300];
  entry_path(ctx, key, path, sizeof path);
  static unsigned counter = 0;
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), counter++);
  unsigned char header[HEADER_BYTES];
  uint32_t fmt = CACHE_FORMAT, klen = (uint32_t)strlen(key);
  uint64_t payload_len = blen, sum = clb__fnv1a(0xcbf29ce484222325ull, bin, blen);
  memcpy(header, CACHE_MAGIC, 8);
  memcpy(header + 8, &fmt, 4);
  memcpy(header + 12, &klen, 4);
  memcpy(header + 16, &payload_len, 8);
  memcpy(header + 24, &sum, 8);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
  int ok = fd >= 0;
  if (ok) {
    ok = write(fd, header, sizeof header) == (ssize_t)sizeof header && write(fd, key, klen) == (ssize_t)klen &&
         write(fd, bin, blen) == (ssize_t)blen;
    ok = fsync(fd) == 0 && ok;
    ok = close(fd) == 0 && ok;
  }
  /* rename is atomic: readers see the old entry or the whole new one */
  if (ok && rename(tmp, path) == 0) {
    clb__log(ctx, CLB_LOG_CACHE, "stored %zu bytes in %s", blen, path);
  } else {
    if (fd >= 0) unlink(tmp);
    clb__log(ctx, CLB_LOG_CACHE, "could not store %s (%s)", path, strerror(errno));
  }
  free(bin);
}

static clb_status walk(const char *dir, int remove_entries, uint64_t *entries, uint64_t *bytes) {
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
    int temp = strstr(e->d_name, CACHE_SUFFIX ".tmp.") != NULL;
    if (!entry && !(remove_entries && temp)) continue;
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (stat(path, &sb) != 0) continue;
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

clb_status clb_cache_info(const char *dir, uint64_t *entries, uint64_t *bytes) {
  if (entries) *entries = 0;
  if (bytes) *bytes = 0;
  return walk(dir, 0, entries, bytes);
}

clb_status clb_cache_clear(const char *dir) { return walk(dir, 1, NULL, NULL); }
