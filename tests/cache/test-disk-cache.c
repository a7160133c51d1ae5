/* test-disk-cache.c: the persistent program cache: reuse across contexts, and
 * truncated, altered, foreign and unwritable entries, and two writers at once. */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache-test.h"
#include "temp-dir.h"

static char dir[256];

/* A full disk, simulated: while disk_full is set, a write() to a temporary
 * entry of the test's cache folder writes at most 100 bytes and then fails with
 * ENOSPC, as a write does when the file system fills up part-way. The test's
 * definition of write() takes the place of the C library's for libclbound
 * (the executable comes first in symbol lookup); every other write goes to the
 * kernel unchanged. */
static volatile int disk_full;
ssize_t write(int fd, const void *buf, size_t n) {
  if (disk_full) {
    char link[64], target[600];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, target, sizeof target - 1);
    if (len > 0) {
      target[len] = 0;
      if (strncmp(target, dir, strlen(dir)) == 0 && strstr(target, ".tmp.")) {
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_size >= 100) {
          errno = ENOSPC;
          return -1;
        }
        if (n > 100 - (size_t)st.st_size) n = 100 - (size_t)st.st_size;
      }
    }
  }
  return syscall(SYS_write, fd, buf, n);
}
/* Runs two ops (two programs) and checks their result. */
static void run_ops(clb_context_t ctx) {
  int64_t b[1] = {100}, d[1] = {37};
  uint8_t dyn[1] = {1};
  clb_tensor_t x = NULL, y = NULL, s = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b, dyn, &x));
  double v[37];
  for (int i = 0; i < 37; i++) v[i] = i - 10;
  clb_test_write(ctx, x, d, v);
  CL_OK(ctx, clb_unary(ctx, CLB_UNARY_RELU, x, &y));
  CL_OK(ctx, clb_reduce_all(ctx, CLB_REDUCE_SUM, y, &s));
  double got;
  clb_test_read(ctx, s, NULL, &got, 1);
  EXPECT_NEAR(got, 26.0 * 27.0 / 2.0);
}

static clb_counters counters(clb_context_t ctx) {
  clb_counters c;
  c.struct_size = sizeof c;
  clb_context_counters(ctx, &c);
  return c;
}

/* The entry files of the test folder, sorted by name. */
static int entries(char names[][512], int max) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL && n < max) {
    if (strstr(e->d_name, ".clbin") && !strstr(e->d_name, ".tmp.")) snprintf(names[n++], 512, "%s/%s", dir, e->d_name);
  }
  if (d) closedir(d);
  return n;
}

static int count_temp_files(void) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) n += strstr(e->d_name, ".tmp.") != NULL;
  if (d) closedir(d);
  return n;
}

static void damage(const char *path, const char *how) {
  FILE *f = fopen(path, "r+b");
  REQUIRE_TRUE(f != NULL);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  if (strcmp(how, "truncate") == 0) {
    fclose(f);
    REQUIRE_TRUE(truncate(path, size / 2) == 0);
    return;
  }
  long at = strcmp(how, "magic") == 0 ? 0 : strcmp(how, "key") == 0 ? 32 + 10 : size - 100;
  fseek(f, at, SEEK_SET);
  int c = fgetc(f);
  fseek(f, at, SEEK_SET);
  fputc(c ^ 0x5a, f);
  fclose(f);
}

/* Every entry damaged one way: each is rejected with the reason, rebuilt, and the
 * ops still give the right answer. */
static void test_damage(const char *how, const char *reason) {
  char names[8][512];
  int n = entries(names, 8);
  EXPECT_EQ_I(n, 2);
  for (int i = 0; i < n; i++) damage(names[i], how);
  clb_context_t ctx = cached_context(dir);
  run_ops(ctx);
  clb_counters c = counters(ctx);
  EXPECT_EQ_I(c.program_builds, 2);
  EXPECT_EQ_I(c.program_cache_hits_disk, 0);
  clb_test_checks++;
  if (!strstr(log_lines, reason)) CLB_FAIL_AT("%s: log lacks \"%s\":\n%s", how, reason, log_lines);
  clb_context_free(ctx);
  clb_cache_wait(); /* the store helper's entries (CLBOUND_CACHE_STORE=process) */
  /* rebuilt entries are whole again */
  ctx = cached_context(dir);
  run_ops(ctx);
  EXPECT_EQ_I(counters(ctx).program_builds, 0);
  EXPECT_EQ_I(counters(ctx).program_cache_hits_disk, 2);
  clb_context_free(ctx);
}

int main(int argc, char **argv) {
  /* the stores checked here are this process's own: optimized builds (a fast cold
   * build, the default, leaves its store to the helper: tests/cache/test-tier-up.c) */
  setenv("CLBOUND_COLD_BUILD", "optimized", 1);
  if (argc == 3 && strcmp(argv[1], "--child") == 0) {
    clb_context_t c = cached_context(argv[2]);
    run_ops(c);
    clb_context_free(c);
    return clb_test_failures ? 1 : 0;
  }
  if (argc == 3 && strcmp(argv[1], "--exit-live") == 0) {
    /* a context freed while another stays alive: its programs go to the
     * background store, and the process exits with the other still alive */
    clb_context_t keep = cached_context(argv[2]), c = cached_context(argv[2]);
    (void)clb_context_cache_dir(keep);
    run_ops(c);
    clb_context_free(c);
    return clb_test_failures ? 1 : 0;
  }
  clb_test_temp_dir(dir, sizeof dir, "cache-test");

  /* First context builds from source and stores; the second loads from disk.
   * In the background mode (the default, process, hands the last context's
   * programs to a helper process instead: tests/tools/store-helper.sh). */
  setenv("CLBOUND_CACHE_STORE", "background", 1);
  clb_context_t ctx = cached_context(dir);
  EXPECT_EQ_S(clb_context_cache_dir(ctx), dir);
  run_ops(ctx);
  EXPECT_EQ_I(counters(ctx).program_builds, 2);
  EXPECT_TRUE(strstr(log_lines, "built from source") != NULL);
  clb_context_free(ctx);
  /* freeing the process's last context waited for the background store: both
   * entries are in the folder (read directly, not through clb_cache_info,
   * which waits by itself) */
  char names[8][512];
  EXPECT_EQ_I(entries(names, 8), 2);
  EXPECT_EQ_I(count_temp_files(), 0);
  EXPECT_EQ_I(clb_cache_pending(), 0);
  unsetenv("CLBOUND_CACHE_STORE");
  uint64_t n = 0, bytes = 0;
  EXPECT_EQ_I(clb_cache_info(dir, &n, &bytes), CLB_OK);
  EXPECT_EQ_I(n, 2);
  EXPECT_TRUE(bytes > 0);
  ctx = cached_context(dir);
  run_ops(ctx);
  EXPECT_EQ_I(counters(ctx).program_builds, 0);
  EXPECT_EQ_I(counters(ctx).program_cache_hits_disk, 2);
  EXPECT_TRUE(strstr(log_lines, "loaded from the disk cache") != NULL);
  clb_context_free(ctx);

  test_damage("truncate", "truncated");
  test_damage("flip", "checksum mismatch");
  test_damage("key", "key differs");
  test_damage("magic", "bad magic");

  /* A disk that fills up while entries are stored: the store is reported with
   * the file system's error (not a stale errno such as "Success"), no
   * temporary file or partial entry is left, the context keeps working, and the
   * next context builds from source and stores whole entries. */
  EXPECT_EQ_I(clb_cache_clear(dir), CLB_OK);
  ctx = cached_context(dir);
  run_ops(ctx);
  disk_full = 1;
  EXPECT_EQ_I(clb_context_store_programs(ctx), CLB_OK);
  disk_full = 0;
  EXPECT_TRUE(strstr(log_lines, "could not store") != NULL);
  EXPECT_TRUE(strstr(log_lines, "writing") != NULL);
  EXPECT_TRUE(strstr(log_lines, strerror(ENOSPC)) != NULL);
  EXPECT_TRUE(strstr(log_lines, "Success") == NULL);
  EXPECT_EQ_I(count_temp_files(), 0);
  EXPECT_EQ_I(clb_cache_info(dir, &n, NULL), CLB_OK);
  EXPECT_EQ_I(n, 0);
  run_ops(ctx);
  clb_context_free(ctx);
  ctx = cached_context(dir);
  run_ops(ctx);
  EXPECT_EQ_I(counters(ctx).program_builds, 2);
  clb_context_free(ctx);
  EXPECT_EQ_I(clb_cache_info(dir, &n, NULL), CLB_OK);
  EXPECT_EQ_I(n, 2);

  /* An unusable folder turns the cache off; everything still works. */
  char file_as_dir[300];
  snprintf(file_as_dir, sizeof file_as_dir, "%s/not-a-folder", dir);
  FILE *f = fopen(file_as_dir, "w");
  REQUIRE_TRUE(f != NULL);
  fclose(f);
  ctx = cached_context(file_as_dir);
  EXPECT_TRUE(clb_context_cache_dir(ctx) == NULL);
  run_ops(ctx);
  clb_context_free(ctx);
  ctx = cached_context("off");
  EXPECT_TRUE(clb_context_cache_dir(ctx) == NULL);
  clb_context_free(ctx);
  unlink(file_as_dir);

  /* Two processes filling an empty cache at once: both succeed, nothing is left
   * half-written, and a third process loads every entry. The children are fresh
   * processes (fork + exec): an OpenCL driver does not survive a bare fork. */
  EXPECT_EQ_I(clb_cache_clear(dir), CLB_OK);
  EXPECT_EQ_I(clb_cache_info(dir, &n, NULL), CLB_OK);
  EXPECT_EQ_I(n, 0);
  fflush(NULL);
  pid_t kids[2];
  for (int k = 0; k < 2; k++) {
    kids[k] = fork();
    REQUIRE_TRUE(kids[k] >= 0);
    if (kids[k] == 0) {
      execl("/proc/self/exe", "test-cache-disk-cache", "--child", dir, (char *)NULL);
      _exit(127);
    }
  }
  for (int k = 0; k < 2; k++) {
    int status = 0;
    waitpid(kids[k], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  /* their store helpers (CLBOUND_CACHE_STORE=process) may be at work: waited for */
  EXPECT_EQ_I(clb_cache_info(dir, &n, NULL), CLB_OK);
  EXPECT_EQ_I(n, 2);
  EXPECT_EQ_I(count_temp_files(), 0);
  ctx = cached_context(dir);
  run_ops(ctx);
  EXPECT_EQ_I(counters(ctx).program_builds, 0);
  clb_context_free(ctx);

  /* A process that exits with a context alive, just after another context
   * handed its programs to the background store: it exits cleanly (no store
   * compiles during exit), leaving whole entries or none, no temporaries. */
  for (int round = 0; round < 3; round++) {
    EXPECT_EQ_I(clb_cache_clear(dir), CLB_OK);
    fflush(NULL);
    pid_t kid = fork();
    REQUIRE_TRUE(kid >= 0);
    if (kid == 0) {
      execl("/proc/self/exe", "test-cache-disk-cache", "--exit-live", dir, (char *)NULL);
      _exit(127);
    }
    int status = 0;
    waitpid(kid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_EQ_I(count_temp_files(), 0);
    ctx = cached_context(dir);
    run_ops(ctx); /* an entry that is there loads; one that is not is rebuilt */
    EXPECT_EQ_I(counters(ctx).program_builds + counters(ctx).program_cache_hits_disk, 2);
    clb_context_free(ctx);
  }

  EXPECT_EQ_I(clb_cache_clear(dir), CLB_OK);
  clb_test_temp_dir_remove(dir);
  return clb_test_finish("cache/disk-cache");
}
