/* test-cache-forgery.c: the program cache must not trust what it opens. Forged
 * entries (another program's payload with a recomputed checksum; a program with
 * the right identity but without the kernel), a FIFO, folders and links named
 * like entries, temporary files left by kill -9, and cache folder names too long or writable by others. Every case must end with the
 * right results, a message naming what was wrong, and no hang. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "cache-test.h"
#include "temp-dir.h"

static char dir[256];
static uint64_t builds(clb_context_t ctx) { return clb_test_counter_builds(ctx); }

/* Runs relu (or sigmoid) over 41 values and checks every result against a
 * double-precision reference. */
static void run_unary(clb_context_t ctx, clb_unary_op op) {
  int64_t b[1] = {64}, d[1] = {41};
  uint8_t dyn[1] = {1};
  double v[41], got[64];
  for (int i = 0; i < 41; i++) v[i] = (i - 20) * 0.25;
  clb_tensor_t x = NULL, y = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b, dyn, &x));
  clb_test_write(ctx, x, d, v);
  CL_OK(ctx, clb_unary(ctx, op, x, &y));
  EXPECT_EQ_I(clb_test_read(ctx, y, NULL, got, 64), 41);
  for (int i = 0; i < 41; i++) EXPECT_NEAR(got[i], op == CLB_UNARY_RELU ? (v[i] > 0 ? v[i] : 0) : 1 / (1 + exp(-v[i])));
  clb_tensor_free(x);
  clb_tensor_free(y);
}

/* ---- reading and writing entries as the format describes them --------------- */

#define HEADER_BYTES 32
typedef struct {
  unsigned char header[HEADER_BYTES];
  char *key;
  unsigned char *payload;
  size_t klen, plen;
} entry;

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ull;
  return h;
}

static int read_entry(const char *path, entry *e) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  uint32_t klen;
  uint64_t plen;
  int ok = fread(e->header, 1, HEADER_BYTES, f) == HEADER_BYTES;
  memcpy(&klen, e->header + 12, 4);
  memcpy(&plen, e->header + 16, 8);
  e->klen = klen;
  e->plen = (size_t)plen;
  e->key = calloc(1, e->klen + 1);
  e->payload = malloc(e->plen + 1);
  ok = ok && e->key && e->payload && fread(e->key, 1, e->klen, f) == e->klen && fread(e->payload, 1, e->plen, f) == e->plen;
  fclose(f);
  return ok;
}

/* Writes key + payload with the checksum recomputed as a forger would: for the
 * entry's own format (1: payload only; 2: key then payload). */
static void write_forged(const char *path, const entry *keyed, const unsigned char *payload, size_t plen) {
  unsigned char h[HEADER_BYTES];
  memcpy(h, keyed->header, HEADER_BYTES);
  uint32_t fmt;
  memcpy(&fmt, h + 8, 4);
  uint64_t n = plen, sum = fmt >= 2 ? fnv(fnv(0xcbf29ce484222325ull, keyed->key, keyed->klen), payload, plen)
                                    : fnv(0xcbf29ce484222325ull, payload, plen);
  memcpy(h + 16, &n, 8);
  memcpy(h + 24, &sum, 8);
  FILE *f = fopen(path, "wb");
  REQUIRE_TRUE(f != NULL);
  REQUIRE_TRUE(fwrite(h, 1, HEADER_BYTES, f) == HEADER_BYTES);
  REQUIRE_TRUE(fwrite(keyed->key, 1, keyed->klen, f) == keyed->klen);
  REQUIRE_TRUE(fwrite(payload, 1, plen, f) == plen);
  fclose(f);
}

/* The entry whose key holds `needle` (e.g. "OP_RELU"); its path into path. */
static int find_entry(const char *needle, char *path, entry *e) {
  DIR *d = opendir(dir);
  struct dirent *de;
  int found = 0;
  while (d && !found && (de = readdir(d)) != NULL) {
    size_t n = strlen(de->d_name);
    if (n < 6 || strcmp(de->d_name + n - 6, ".clbin") != 0) continue;
    snprintf(path, 512, "%s/%s", dir, de->d_name);
    memset(e, 0, sizeof *e);
    if (read_entry(path, e) && strstr(e->key, needle)) found = 1;
    else {
      free(e->key);
      free(e->payload);
    }
  }
  if (d) closedir(d);
  return found;
}

static void free_entry(entry *e) {
  free(e->key);
  free(e->payload);
}

static void expect_log(const char *what, const char *needle) {
  clb_test_checks++;
  if (!strstr(log_lines, needle)) CLB_FAIL_AT("%s: log lacks \"%s\":\n%s", what, needle, log_lines);
}

/* Fresh folder with the relu and sigmoid programs in it. */
static void fill_cache(void) {
  clb_cache_clear(dir);
  clb_context_t ctx = cached_context(dir);
  run_unary(ctx, CLB_UNARY_RELU);
  run_unary(ctx, CLB_UNARY_SIGMOID);
  clb_context_free(ctx);
  clb_cache_wait(); /* the entries are read from the folder below */
}

/* relu's entry holding sigmoid's program, checksum recomputed: relu must still
 * give relu (the program is rejected and rebuilt), never sigmoid. */
static void test_swapped_payload(void) {
  fill_cache();
  char prelu[512], psig[512];
  entry relu, sig;
  REQUIRE_TRUE(find_entry("OP_RELU", prelu, &relu));
  REQUIRE_TRUE(find_entry("OP_SIGMOID", psig, &sig));
  write_forged(prelu, &relu, sig.payload, sig.plen);
  clb_context_t ctx = cached_context(dir);
  run_unary(ctx, CLB_UNARY_RELU);
  EXPECT_EQ_I(builds(ctx), 1);
  expect_log("swapped payload", "holds another program");
  clb_context_free(ctx);
  clb_cache_wait(); /* the store helper's entry (CLBOUND_CACHE_STORE=process) */
  /* rebuilt: the next context loads relu from disk */
  ctx = cached_context(dir);
  run_unary(ctx, CLB_UNARY_RELU);
  EXPECT_EQ_I(builds(ctx), 0);
  clb_context_free(ctx);
  free_entry(&relu);
  free_entry(&sig);
}

/* A program that carries relu's identity kernel but not ew_unary: kernel
 * creation fails, the entry is dropped and relu is built from source. */
static void test_missing_kernel(void) {
  fill_cache();
  char prelu[512];
  entry relu;
  REQUIRE_TRUE(find_entry("OP_RELU", prelu, &relu));
  /* the identity kernel's name, as runtime/cache derives it from the key */
  char src[256];
  snprintf(src, sizeof src, "__kernel void clb_id_%016llx%016llx(void) {}\n",
           (unsigned long long)fnv(0xcbf29ce484222325ull, relu.key, relu.klen),
           (unsigned long long)fnv(0x84222325cbf29ce4ull ^ relu.klen, relu.key, relu.klen));
  clb_context_t ctx = cached_context("off");
  cl_int e = CL_SUCCESS;
  const char *texts[1] = {src};
  cl_program p = clCreateProgramWithSource(clb_context_cl_context(ctx), 1, texts, NULL, &e);
  REQUIRE_TRUE(e == CL_SUCCESS);
  cl_device_id dev = clb_context_cl_device(ctx);
  REQUIRE_TRUE(clBuildProgram(p, 1, &dev, NULL, NULL, NULL) == CL_SUCCESS);
  size_t blen = 0;
  REQUIRE_TRUE(clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof blen, &blen, NULL) == CL_SUCCESS && blen > 0);
  unsigned char *bin = malloc(blen);
  REQUIRE_TRUE(bin != NULL);
  REQUIRE_TRUE(clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS);
  clReleaseProgram(p);
  clb_context_free(ctx);
  write_forged(prelu, &relu, bin, blen);
  free(bin);
  ctx = cached_context(dir);
  run_unary(ctx, CLB_UNARY_RELU);
  EXPECT_EQ_I(builds(ctx), 1);
  expect_log("missing kernel", "clCreateKernel(ew_unary) failed");
  clb_context_free(ctx);
  free_entry(&relu);
}

static volatile sig_atomic_t alarmed;
static void on_alarm(int s) {
  (void)s;
  alarmed = 1;
  static const char msg[] = "adversarial/cache: blocked for 120 s on a cache entry\n";
  if (write(2, msg, sizeof msg - 1)) {}
  _exit(1);
}

/* A FIFO, an empty folder, a folder with a file in it and a dangling link, each
 * named like relu's entry: none blocks or is called "too large"; what can be
 * replaced is replaced by a real entry. */
static void test_not_regular(const char *kind) {
  fill_cache();
  char prelu[512];
  entry relu;
  REQUIRE_TRUE(find_entry("OP_RELU", prelu, &relu));
  free_entry(&relu);
  REQUIRE_TRUE(unlink(prelu) == 0);
  char inner[600];
  snprintf(inner, sizeof inner, "%s/keep", prelu);
  if (strcmp(kind, "fifo") == 0) REQUIRE_TRUE(mkfifo(prelu, 0600) == 0);
  else if (strcmp(kind, "link") == 0) REQUIRE_TRUE(symlink("nowhere", prelu) == 0);
  else REQUIRE_TRUE(mkdir(prelu, 0700) == 0);
  if (strcmp(kind, "full folder") == 0) {
    FILE *f = fopen(inner, "w");
    REQUIRE_TRUE(f != NULL);
    fclose(f);
  }
  alarm(120);
  clb_context_t ctx = cached_context(dir);
  run_unary(ctx, CLB_UNARY_RELU);
  alarm(0);
  EXPECT_EQ_I(builds(ctx), 1);
  /* stored now, in this thread, so that the store's log lines reach this
   * context's log (a freed context's programs are stored in the background) */
  EXPECT_EQ_I(clb_context_store_programs(ctx), CLB_OK);
  clb_context_free(ctx);
  clb_test_checks++;
  if (strstr(log_lines, "too large")) CLB_FAIL_AT("%s: called too large:\n%s", kind, log_lines);
  struct stat sb;
  REQUIRE_TRUE(lstat(prelu, &sb) == 0);
  if (strcmp(kind, "full folder") == 0) {
    expect_log(kind, "a folder, not a file (not empty");
    expect_log(kind, "could not store");
    EXPECT_TRUE(S_ISDIR(sb.st_mode)); /* someone's files: left alone */
    unlink(inner);
    rmdir(prelu);
  } else {
    expect_log(kind, strcmp(kind, "fifo") == 0 ? "not a regular file" : strcmp(kind, "link") == 0 ? "symbolic link" : "a folder");
    EXPECT_TRUE(S_ISREG(sb.st_mode)); /* replaced by the rebuilt entry */
  }
}

static int count_named(const char *needle) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *de;
  while (d && (de = readdir(d)) != NULL) n += strstr(de->d_name, needle) != NULL;
  if (d) closedir(d);
  return n;
}

/* Temporary files of a writer killed before its rename: an old one is removed
 * when a context opens the folder; a fresh one (a writer now) is not. */
static void test_stale_temps(void) {
  fill_cache();
  char old_tmp[512], new_tmp[512];
  snprintf(old_tmp, sizeof old_tmp, "%s/00000000000000000000000000000000.clbin.tmp.999999.0", dir);
  snprintf(new_tmp, sizeof new_tmp, "%s/00000000000000000000000000000000.clbin.tmp.999999.1", dir);
  for (int i = 0; i < 2; i++) {
    FILE *f = fopen(i ? new_tmp : old_tmp, "w");
    REQUIRE_TRUE(f != NULL);
    fputs("half an entry", f);
    fclose(f);
  }
  struct timeval tv[2];
  gettimeofday(&tv[0], NULL);
  tv[0].tv_sec -= 3600;
  tv[1] = tv[0];
  REQUIRE_TRUE(utimes(old_tmp, tv) == 0);
  clb_context_t ctx = cached_context(dir);
  run_unary(ctx, CLB_UNARY_RELU);
  clb_context_free(ctx);
  EXPECT_TRUE(access(old_tmp, F_OK) != 0);
  EXPECT_TRUE(access(new_tmp, F_OK) == 0);
  unlink(new_tmp);
  EXPECT_EQ_I(count_named(".tmp."), 0);
}

/* Folder names over 1023 characters: an option is refused with a message; the
 * environment's turns the cache off with a warning on stderr, never silently. */
static void test_long_names(void) {
  char longname[1200];
  memset(longname, 'a', sizeof longname - 1);
  longname[0] = '/';
  longname[sizeof longname - 1] = 0;
  clb_context_options o;
  clb_context_options_init(&o);
  o.cache_dir = longname;
  clb_context_t ctx = NULL;
  EXPECT_EQ_I(clb_context_new(&o, &ctx), CLB_ERR_INVALID_ARG);
  EXPECT_TRUE(ctx == NULL);
  EXPECT_TRUE(strstr(clb_last_errmsg(), "cache_dir") && strstr(clb_last_errmsg(), "1023"));

  char errfile[300];
  snprintf(errfile, sizeof errfile, "%s-stderr", dir);
  fflush(stderr);
  int saved = dup(2);
  int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE_TRUE(saved >= 0 && fd >= 0);
  dup2(fd, 2);
  close(fd);
  setenv("CLBOUND_CACHE_DIR", longname, 1);
  ctx = cached_context(NULL);
  EXPECT_TRUE(clb_context_cache_dir(ctx) == NULL);
  run_unary(ctx, CLB_UNARY_RELU);
  clb_context_free(ctx);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char text[2048] = "";
  FILE *f = fopen(errfile, "r");
  REQUIRE_TRUE(f != NULL);
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = 0;
  fclose(f);
  unlink(errfile);
  EXPECT_TRUE(strstr(text, "longer than 1023 characters") != NULL);
}

/* A folder others may write is not used (the cache holds code the driver runs). */
static void test_world_writable(void) {
  char shared[300];
  snprintf(shared, sizeof shared, "%s/shared", dir);
  REQUIRE_TRUE(mkdir(shared, 0700) == 0);
  REQUIRE_TRUE(chmod(shared, 0777) == 0);
  clb_context_t ctx = cached_context(shared);
  EXPECT_TRUE(clb_context_cache_dir(ctx) == NULL);
  run_unary(ctx, CLB_UNARY_RELU);
  clb_context_free(ctx);
  rmdir(shared);
}

int main(void) {
  /* the stores checked here are this process's own: optimized builds (a fast cold
   * build, the default, leaves its store to the helper: tests/cache/test-tier-up.c) */
  setenv("CLBOUND_COLD_BUILD", "optimized", 1);
  signal(SIGALRM, on_alarm);
  clb_test_temp_dir(dir, sizeof dir, "adv-cache");
  test_swapped_payload();
  test_missing_kernel();
  test_not_regular("fifo");
  test_not_regular("empty folder");
  test_not_regular("full folder");
  test_not_regular("link");
  test_stale_temps();
  clb_cache_clear(dir);
  test_world_writable();
  test_long_names();
  clb_cache_clear(dir);
  clb_test_temp_dir_remove(dir);
  return clb_test_finish("adversarial/cache");
}
