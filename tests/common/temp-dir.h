/* temp-dir.h: a fresh folder for a test (a program cache folder that starts
 * empty); the including file defines _POSIX_C_SOURCE 200809L (mkdtemp). */
#ifndef CLB_TEMP_DIR_H
#define CLB_TEMP_DIR_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

/* Makes a new folder <TMPDIR or /tmp>/clbound-<what>-XXXXXX, its name in buf;
 * stops the test when it cannot. */
static inline void clb_test_temp_dir(char *buf, size_t cap, const char *what) {
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  snprintf(buf, cap, "%s/clbound-%s-XXXXXX", base, what);
  REQUIRE_TRUE(mkdtemp(buf) != NULL);
}

/* Removes a folder made by clb_test_temp_dir once the test has emptied it:
 * the cache's lock file first (clb_cache_clear leaves <dir>/.store.lock, as
 * another process may hold it; no other process knows this folder), then the
 * folder. A folder that is not empty then is a failed check naming it: the
 * test left files behind, or the cache's clear missed some. */
static inline void clb_test_temp_dir_remove(const char *dir) {
  char lock[1100];
  snprintf(lock, sizeof lock, "%s/.store.lock", dir);
  unlink(lock);
  clb_test_checks++;
  if (rmdir(dir) != 0) CLB_FAIL_AT("could not remove the test folder %s: %s", dir, strerror(errno));
}

#endif /* CLB_TEMP_DIR_H */
