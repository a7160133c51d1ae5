/* files.c: reading and writing files in folders that others than this process
 * may write to (the program cache folder: its entries, the CLBlast tuning file,
 * the demo's note of its cold run). A read never follows a symbolic link, never
 * blocks on a FIFO or device, refuses folders and bounds the size; a write goes
 * to a temporary file (mode 0600, never through a link) that is synced and
 * renamed over the name, so a reader sees the old file or the whole new one.
 * docs/failure-behaviour.md lists the files read this way. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "runtime/cache/cache.h"

unsigned char *clb__cache_read_file(const char *path, size_t max_bytes, int remove_odd, size_t *len, const char **why) {
  *why = NULL;
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NULL;
    if (errno == ELOOP) {
      *why = remove_odd && unlink(path) == 0 ? "a symbolic link, not a file (removed)" : "a symbolic link, not a file";
    } else {
      *why = "unreadable";
    }
    return NULL;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    close(fd);
    *why = "unreadable";
    return NULL;
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    if (S_ISDIR(sb.st_mode))
      *why = !remove_odd ? "a folder, not a file"
             : rmdir(path) == 0 ? "a folder, not a file (removed)" : "a folder, not a file (not empty: remove it by hand)";
    else
      *why = remove_odd && unlink(path) == 0 ? "not a regular file (a FIFO, socket or device; removed)"
                                             : "not a regular file (a FIFO, socket or device)";
    return NULL;
  }
  if ((uint64_t)sb.st_size > max_bytes) {
    close(fd);
    *why = "too large";
    return NULL;
  }
  size_t n = (size_t)sb.st_size, got = 0;
  unsigned char *buf = malloc(n + 1);
  while (buf && got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (!buf || got != n) {
    free(buf);
    *why = buf ? "shorter than its size (changed while read)" : "out of host memory";
    return NULL;
  }
  buf[n] = 0;
  *len = n;
  return buf;
}

/* Writes all of buf; 0, or the errno of the failure (ENOSPC for a write that
 * stops short without one: a full disk). */
static int write_all(int fd, const void *buf, size_t n) {
  const unsigned char *p = buf;
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno ? errno : EIO;
    if (w == 0) return ENOSPC;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int clb__cache_write_atomic(const char *path, const void *const *parts, const size_t *lens, int nparts,
                            const char **step) {
  char tmp[1300];
  static atomic_uint counter;
  if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&counter, 1)) >= (int)sizeof tmp) {
    *step = "naming the temporary";
    return ENAMETOOLONG;
  }
  /* err: the first failure's errno, kept before any other call can change it */
  int err = 0;
  *step = "creating the temporary";
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  *step = "writing the temporary";
  for (int i = 0; i < nparts && !err; i++) err = write_all(fd, parts[i], lens[i]);
  if (!err && fsync(fd) != 0) err = errno;
  if (close(fd) != 0 && !err) err = errno;
  /* rename is atomic: readers see the old file or the whole new one */
  if (!err) {
    *step = "renaming the temporary";
    if (rename(tmp, path) != 0) err = errno;
  }
  if (err) unlink(tmp);
  return err;
}

clb_status clb_file_read(const char *path, char *buf, size_t cap, size_t *len) {
  if (len) *len = 0;
  if (!path || !buf || cap == 0)
    return clb__set_error(NULL, CLB_ERR_NULL, "clb_file_read: %s", !path ? "path is NULL" : !buf ? "buf is NULL" : "cap is 0");
  buf[0] = 0;
  size_t n = 0;
  const char *why = NULL;
  unsigned char *data = clb__cache_read_file(path, cap - 1, 0, &n, &why);
  if (!data) {
    if (!why) return clb__set_error(NULL, CLB_ERR_IO, "clb_file_read %s: no such file", path);
    if (strcmp(why, "too large") == 0)
      return clb__set_error(NULL, CLB_ERR_BUFFER_SMALL, "clb_file_read %s: larger than %zu bytes", path, cap - 1);
    return clb__set_error(NULL, CLB_ERR_IO, "clb_file_read %s: %s", path, why);
  }
  memcpy(buf, data, n + 1);
  free(data);
  if (len) *len = n;
  return CLB_OK;
}

clb_status clb_file_write(const char *path, const void *data, size_t len) {
  if (!path || (!data && len))
    return clb__set_error(NULL, CLB_ERR_NULL, "clb_file_write: %s is NULL", !path ? "path" : "data");
  const void *parts[1] = {data ? data : ""};
  const char *step = "";
  int err = clb__cache_write_atomic(path, parts, &len, 1, &step);
  if (err) return clb__set_error(NULL, CLB_ERR_IO, "clb_file_write %s: %s: %s", path, step, strerror(err));
  return CLB_OK;
}
