/* store-helper.c: the store that outlives the process (CLBOUND_CACHE_STORE=process,
 * the default). Handing out a program's binary makes PoCL compile a work-group
 * function for every kernel of the program again: 1.2 s of a 2.6 s cold xla-mlp
 * demo when the process's last context waited for it. Instead, that context
 * writes a store manifest per program into the cache folder (its key, build
 * options and whole source, written atomically as "<entry>.pending") and starts
 * the store helper, `clbound cache store-pending --detach DIR`, which starts
 * itself again in a session of its own and returns; the user's process exits
 * without compiling anything more. The helper takes the folder's lock
 * (".store.lock", flock), builds each manifest's program from source (PoCL's
 * own cache makes that quick), writes its entry (temporary file, renamed) and
 * removes the manifest, until none is left.
 *
 * Anyone may do a manifest's work under the lock, so nothing waits forever on a
 * helper that died: clb_cache_wait, clb_cache_info and `clbound cache
 * store-pending` drain the folder themselves (waiting for the lock while a
 * helper holds it). A context that needs a program whose manifest is pending
 * does not wait: it builds the program from source (PoCL's kernel cache makes
 * that about 0.1 s for the xla-mlp plan, where waiting took 1.3 s) and hands it
 * over again (the helper skips an entry that is there).
 * No fork without exec happens here (posix_spawn), and the helper never inherits
 * the process's files beyond stdin/stdout/stderr, which it gets as /dev/null
 * (stderr stays the process's under CLBOUND_LOG=cache, for its log lines). */
#define _GNU_SOURCE /* posix_spawn_file_actions_addclosefrom_np, POSIX_SPAWN_SETSID */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/cache/cache.h"

extern char **environ;

/* Manifest layout (host order): magic "CLBSTORE" | u32 format | u32 key length |
 * u32 options length | u32 0 | u64 source length | u64 FNV-1a of key, options
 * and source | key | options | source. */
#define MANIFEST_MAGIC "CLBSTORE"
#define MANIFEST_FORMAT 1u
#define MANIFEST_HEADER (8 + 4 + 4 + 4 + 4 + 8 + 8)
#define MANIFEST_MAX_BYTES (64u << 20)
/* How long a drain waits for the folder's lock (a helper storing programs holds
 * it for about a second per program) before leaving the manifests to later. */
#define LOCK_WAIT_SECONDS 600
/* Folders this process handed manifests to, for clb_cache_wait/pending (more
 * are still stored by their helpers, only not waited for). */
#define MAX_HANDED_DIRS 8

static pthread_mutex_t handed_lock = PTHREAD_MUTEX_INITIALIZER;
static char *handed[MAX_HANDED_DIRS];
static int nhanded;

/* ---- the record a built program carries until it is stored --------------- */

char *clb__store_record_new(const char *key, const char *options, int ntexts, const char *const *texts,
                            const size_t *lens) {
  size_t kl = strlen(key), ol = strlen(options), sl = 0;
  for (int i = 0; i < ntexts; i++) sl += lens[i];
  char *r = malloc(kl + ol + sl + 3);
  if (!r) return NULL;
  char *p = r;
  memcpy(p, key, kl + 1);
  p += kl + 1;
  memcpy(p, options, ol + 1);
  p += ol + 1;
  for (int i = 0; i < ntexts; i++) {
    memcpy(p, texts[i], lens[i]);
    p += lens[i];
  }
  *p = 0;
  return r;
}

void clb__store_record_parts(const char *rec, const char **options, const char **source) {
  *options = rec + strlen(rec) + 1;
  *source = *options + strlen(*options) + 1;
}

void clb__key_device_part(const clb_device_info *d, char *buf, size_t cap) {
  snprintf(buf, cap, "\ndevice %s\nvendor %s\nversion %s\ndriver %s\nplatform %s", d->name, d->vendor, d->device_version,
           d->driver_version, d->platform_name);
}

/* ---- manifests ----------------------------------------------------------- */

static uint64_t manifest_sum(const char *key, const char *options, const char *source) {
  uint64_t h = clb__fnv1a(CLB_FNV_SEED, key, strlen(key) + 1);
  h = clb__fnv1a(h, options, strlen(options) + 1);
  return clb__fnv1a(h, source, strlen(source));
}

int clb__store_manifest_write(const char *dir, const char *rec, const clb__logger *lg) {
  const char *options, *source;
  clb__store_record_parts(rec, &options, &source);
  unsigned char h[MANIFEST_HEADER];
  uint32_t fmt = MANIFEST_FORMAT, kl = (uint32_t)strlen(rec), ol = (uint32_t)strlen(options), zero = 0;
  uint64_t sl = strlen(source), sum = manifest_sum(rec, options, source);
  memcpy(h, MANIFEST_MAGIC, 8);
  memcpy(h + 8, &fmt, 4);
  memcpy(h + 12, &kl, 4);
  memcpy(h + 16, &ol, 4);
  memcpy(h + 20, &zero, 4);
  memcpy(h + 24, &sl, 8);
  memcpy(h + 32, &sum, 8);
  const void *parts[4] = {h, rec, options, source};
  size_t plens[4] = {sizeof h, kl, ol, (size_t)sl};
  char path[1200];
  clb__cache_entry_path(dir, rec, CLB_MANIFEST_SUFFIX, path, sizeof path);
  const char *step = "";
  int err = clb__cache_write_atomic(path, parts, plens, 4, &step);
  if (err) clb__log_to(lg, CLB_LOG_CACHE, "could not write the store manifest %s (%s: %s)", path, step, strerror(err));
  return err ? -1 : 0;
}

/* Parses a manifest in place (NUL-terminating its parts): 0, or -1 with *why. */
static int manifest_parse(unsigned char *buf, size_t len, char **key, char **options, char **source, const char **why) {
  uint32_t fmt, kl, ol;
  uint64_t sl, sum;
  if (len < MANIFEST_HEADER || memcmp(buf, MANIFEST_MAGIC, 8) != 0) {
    *why = "not a store manifest";
    return -1;
  }
  memcpy(&fmt, buf + 8, 4);
  memcpy(&kl, buf + 12, 4);
  memcpy(&ol, buf + 16, 4);
  memcpy(&sl, buf + 24, 8);
  memcpy(&sum, buf + 32, 8);
  if (fmt != MANIFEST_FORMAT) {
    *why = "other format version";
    return -1;
  }
  if ((uint64_t)MANIFEST_HEADER + kl + ol + sl != len || kl == 0 || sl == 0) {
    *why = "truncated or extended";
    return -1;
  }
  /* the parts become strings: each is followed by the next, so copy them out */
  char *k = malloc((size_t)kl + 1), *o = malloc((size_t)ol + 1), *s = malloc((size_t)sl + 1);
  if (!k || !o || !s) {
    free(k);
    free(o);
    free(s);
    *why = "out of host memory";
    return -1;
  }
  memcpy(k, buf + MANIFEST_HEADER, kl);
  k[kl] = 0;
  memcpy(o, buf + MANIFEST_HEADER + kl, ol);
  o[ol] = 0;
  memcpy(s, buf + MANIFEST_HEADER + kl + ol, (size_t)sl);
  s[sl] = 0;
  if (strlen(k) != kl || strlen(o) != ol || strlen(s) != sl || manifest_sum(k, o, s) != sum) {
    free(k);
    free(o);
    free(s);
    *why = "checksum mismatch";
    return -1;
  }
  *key = k;
  *options = o;
  *source = s;
  return 0;
}

/* ---- draining a folder: every manifest built and stored ------------------ */

/* The OpenCL context a drain builds in, made for the first manifest that needs
 * it and kept for the others of the same device. */
typedef struct drain_device {
  cl_device_id dev;
  cl_context cl;
} drain_device;

/* The device the key names: the one whose description ends the key. */
static int device_for_key(const char *key, drain_device *d, const clb__logger *lg) {
  int n = 0;
  if (clb_device_count(&n) != CLB_OK) return -1;
  size_t klen = strlen(key);
  for (int i = 0; i < n; i++) {
    cl_platform_id plat;
    cl_device_id dev;
    clb_device_info info;
    info.struct_size = sizeof info;
    if (clb__device_at(i, &plat, &dev) != CLB_OK || clb__device_describe(plat, dev, &info) != CLB_OK) continue;
    char tail[6 * CLB_DEVICE_STRING_MAX];
    clb__key_device_part(&info, tail, sizeof tail);
    size_t tl = strlen(tail);
    if (tl > klen || strcmp(key + klen - tl, tail) != 0) continue;
    if (d->dev == dev) return 0;
    if (d->cl) clReleaseContext(d->cl);
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plat, 0};
    cl_int e = CL_SUCCESS;
    d->cl = clCreateContext(props, 1, &dev, NULL, NULL, &e);
    d->dev = e == CL_SUCCESS ? dev : NULL;
    if (e != CL_SUCCESS) {
      d->cl = NULL;
      clb__log_to(lg, CLB_LOG_CACHE, "store: clCreateContext for %s failed (%s)", info.name, clb__cl_error_name(e));
      return -1;
    }
    return 0;
  }
  return -1;
}

/* Does one manifest's work: its entry written (unless there already), then the
 * manifest removed. Adds 1 to *stored when an entry was written; returns
 * whether the manifest is gone (so that a drain never loops on one it cannot
 * remove). */
static int drain_one(const char *dir, const char *name, drain_device *d, const clb__logger *lg, long *stored) {
  char path[1400];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  size_t len = 0;
  const char *why = NULL;
  unsigned char *buf = clb__cache_read_file(path, MANIFEST_MAX_BYTES, 1, &len, &why);
  if (!buf) {
    if (!why) return 1; /* another drain took it */
    clb__log_to(lg, CLB_LOG_CACHE, "store manifest %s rejected: %s", path, why);
    return unlink(path) == 0 || errno == ENOENT;
  }
  char *key = NULL, *options = NULL, *source = NULL;
  if (manifest_parse(buf, len, &key, &options, &source, &why) != 0) {
    clb__log_to(lg, CLB_LOG_CACHE, "store manifest %s rejected: %s", path, why);
  } else {
    char entry[1200];
    clb__cache_entry_path(dir, key, CLB_ENTRY_SUFFIX, entry, sizeof entry);
    struct stat sb;
    if (lstat(entry, &sb) == 0) {
      clb__log_to(lg, CLB_LOG_CACHE, "store manifest %s: %s is there already", path, entry);
    } else if (device_for_key(key, d, lg) != 0) {
      clb__log_to(lg, CLB_LOG_CACHE, "store manifest %s dropped: no device of this process matches its key", path);
    } else {
      cl_int e = CL_SUCCESS;
      const char *src = source;
      cl_program p = clCreateProgramWithSource(d->cl, 1, &src, NULL, &e);
      if (e == CL_SUCCESS) e = clBuildProgram(p, 1, &d->dev, options, NULL, NULL);
      if (e != CL_SUCCESS)
        clb__log_to(lg, CLB_LOG_CACHE, "store manifest %s dropped: building its program failed (%s)", path,
                    clb__cl_error_name(e));
      else if (clb__disk_cache_write(dir, key, p, lg) == 0)
        (*stored)++;
      if (p) clReleaseProgram(p);
    }
  }
  free(buf);
  free(key);
  free(options);
  free(source);
  return unlink(path) == 0 || errno == ENOENT; /* done, or never to be done */
}

/* Whether name is a manifest (not its temporary). */
static int is_manifest(const char *name) {
  size_t n = strlen(name), sl = strlen(CLB_MANIFEST_SUFFIX);
  return n > sl && strcmp(name + n - sl, CLB_MANIFEST_SUFFIX) == 0;
}

int clb__store_lock(const char *dir, const clb__logger *lg) {
  char path[1200];
  snprintf(path, sizeof path, "%s/.store.lock", dir);
  int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    clb__log_to(lg, CLB_LOG_CACHE, "store: cannot open the lock %s (%s)", path, strerror(errno));
    return -1;
  }
  struct timespec nap = {0, 20 * 1000 * 1000};
  for (long tries = 0; flock(fd, LOCK_EX | LOCK_NB) != 0; tries++) {
    if ((errno != EWOULDBLOCK && errno != EINTR) || tries >= LOCK_WAIT_SECONDS * 50L) {
      clb__log_to(lg, CLB_LOG_CACHE, "store: the lock %s was not free within %d s (%s); the manifests stay for later",
                  path, LOCK_WAIT_SECONDS, strerror(errno));
      close(fd);
      return -1;
    }
    nanosleep(&nap, NULL);
  }
  return fd;
}

int clb__store_busy(const char *dir) {
  char path[1200];
  snprintf(path, sizeof path, "%s/.store.lock", dir);
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  int busy = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd); /* releases it if it was taken here */
  return busy;
}

void clb__store_unlock(int fd) {
  if (fd < 0) return;
  flock(fd, LOCK_UN);
  close(fd);
}

/* Under the folder's lock: the manifests' entries written, the manifests
 * removed (looking again until none is left: others may hand more over).
 * The number of entries written, or -1 when the lock was not had. */
static long drain(const char *dir, const clb__logger *lg) {
  int fd = clb__store_lock(dir, lg);
  if (fd < 0) return -1;
  drain_device d = {NULL, NULL};
  long stored = 0;
  for (int removed = 1; removed;) { /* until a look finds none it can remove */
    removed = 0;
    DIR *dh = opendir(dir);
    if (!dh) break;
    struct dirent *e;
    while ((e = readdir(dh)) != NULL)
      if (is_manifest(e->d_name)) removed |= drain_one(dir, e->d_name, &d, lg, &stored);
    closedir(dh);
  }
  if (d.cl) clReleaseContext(d.cl);
  clb__store_unlock(fd);
  return stored;
}

clb_status clb_cache_store_pending(const char *dir, uint64_t *stored) {
  if (stored) *stored = 0;
  if (!dir || !*dir) return clb__set_error(NULL, CLB_ERR_NULL, "clb_cache_store_pending: dir is %s", dir ? "empty" : "NULL");
  clb__logger lg = {clb__log_env_mask(), NULL, NULL};
  long n = drain(dir, &lg);
  if (n < 0) {
    clb__set_last_errmsg("clb_cache_store_pending: the lock %s/.store.lock could not be taken", dir);
    return CLB_ERR_IO;
  }
  if (stored) *stored = (uint64_t)n;
  return CLB_OK;
}

/* ---- the folders this process handed manifests to ------------------------ */

static void note_handed(const char *dir) {
  pthread_mutex_lock(&handed_lock);
  int seen = 0;
  for (int i = 0; i < nhanded && !seen; i++) seen = strcmp(handed[i], dir) == 0;
  if (!seen && nhanded < MAX_HANDED_DIRS) {
    size_t n = strlen(dir) + 1;
    handed[nhanded] = malloc(n);
    if (handed[nhanded]) memcpy(handed[nhanded++], dir, n);
  }
  pthread_mutex_unlock(&handed_lock);
}

/* Copies the list out, so that no lock is held while draining. */
static int handed_dirs(char out[MAX_HANDED_DIRS][1024]) {
  pthread_mutex_lock(&handed_lock);
  int n = nhanded;
  for (int i = 0; i < n; i++) snprintf(out[i], 1024, "%s", handed[i]);
  pthread_mutex_unlock(&handed_lock);
  return n;
}

uint64_t clb__store_manifests(const char *dir) {
  uint64_t count = 0;
  DIR *dh = opendir(dir);
  if (!dh) return 0;
  struct dirent *e;
  while ((e = readdir(dh)) != NULL) count += is_manifest(e->d_name);
  closedir(dh);
  return count;
}

uint64_t clb__store_handed_pending(void) {
  char dirs[MAX_HANDED_DIRS][1024];
  int n = handed_dirs(dirs);
  uint64_t count = 0;
  for (int i = 0; i < n; i++) count += clb__store_manifests(dirs[i]);
  return count;
}

void clb__store_drain_pending(const char *dir) {
  if (clb__store_manifests(dir) == 0) return; /* nothing pending, no helper at work */
  clb__logger lg = {clb__log_env_mask(), NULL, NULL};
  drain(dir, &lg);
}

void clb__store_handed_drain(void) {
  char dirs[MAX_HANDED_DIRS][1024];
  int n = handed_dirs(dirs);
  for (int i = 0; i < n; i++) clb__store_drain_pending(dirs[i]);
}

/* ---- starting the helper ------------------------------------------------- */

int clb__store_helper_path(char *buf, size_t cap) {
  const char *env = clb__env_text(CLB_ENV_STORE_HELPER);
  if (env) {
    snprintf(buf, cap, "%s", env);
  } else {
    Dl_info info;
    if (!dladdr((void *)clb_cache_store_pending, &info) || !info.dli_fname || !strchr(info.dli_fname, '/')) {
      snprintf(buf, cap, "(the library's own path is unknown)");
      return -1;
    }
    const char *slash = strrchr(info.dli_fname, '/');
    snprintf(buf, cap, "%.*s/../bin/clbound", (int)(slash - info.dli_fname), info.dli_fname);
  }
  return access(buf, X_OK) == 0 ? 0 : -1;
}

int clb__store_spawn(const char *helper, const char *dir, const clb__logger *lg) {
  note_handed(dir);
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  if (posix_spawn_file_actions_init(&fa) != 0) return -1;
  if (posix_spawnattr_init(&at) != 0) {
    posix_spawn_file_actions_destroy(&fa);
    return -1;
  }
  int quiet_err = !(lg->mask & CLB_LOG_CACHE);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  if (quiet_err) posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  sigset_t none, dflt;
  sigemptyset(&none);
  sigemptyset(&dflt);
  sigaddset(&dflt, SIGPIPE);
  sigaddset(&dflt, SIGCHLD);
  sigaddset(&dflt, SIGINT);
  sigaddset(&dflt, SIGTERM);
  sigaddset(&dflt, SIGHUP);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &dflt);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  char *argv[] = {(char *)helper, "cache", "store-pending", "--detach", (char *)dir, NULL};
  /* the work-group shapes this process launched, for the binaries the helper
   * stores (clb__wg_specializations), unless the environment names its own */
  char spec[sizeof "POCL_BINARY_SPECIALIZE_WG=" + 16 * 48];
  char **envp = environ, **own = NULL;
  if (!getenv("POCL_BINARY_SPECIALIZE_WG")) {
    size_t pre = strlen("POCL_BINARY_SPECIALIZE_WG=");
    memcpy(spec, "POCL_BINARY_SPECIALIZE_WG=", pre);
    size_t n = 0;
    while (environ && environ[n]) n++;
    if (clb__wg_specializations(spec + pre, sizeof spec - pre) > 0 && (own = malloc((n + 2) * sizeof *own))) {
      memcpy(own, environ, n * sizeof *own);
      own[n] = spec;
      own[n + 1] = NULL;
      envp = own;
    }
  }
  pid_t pid = 0;
  int rc = posix_spawn(&pid, helper, &fa, &at, argv, envp);
  free(own);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  if (rc != 0) {
    clb__log_to(lg, CLB_LOG_CACHE, "store: could not start the helper %s (%s)", helper, strerror(rc));
    return -1;
  }
  /* it starts the helper proper in a session of its own and returns at once */
  int status = 0;
  pid_t w;
  while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (w == pid && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    clb__log_to(lg, CLB_LOG_CACHE, "store: the helper %s failed to start (status %d)", helper, status);
    return -1;
  }
  return 0; /* also when the application reaped it first (ECHILD) */
}
