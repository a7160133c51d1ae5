/* temp-dir.h: a fresh folder for a test (a program cache folder that starts
 * empty); the including file defines _POSIX_C_SOURCE 200809L (mkdtemp). */
#ifndef CLB_TEMP_DIR_H
#define CLB_TEMP_DIR_H

#include <stdio.h>
#include <stdlib.h>

#include "test.h"

/* Makes a new folder <TMPDIR or /tmp>/clbound-<what>-XXXXXX, its name in buf;
 * stops the test when it cannot. */
static inline void clb_test_temp_dir(char *buf, size_t cap, const char *what) {
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  snprintf(buf, cap, "%s/clbound-%s-XXXXXX", base, what);
  REQUIRE_TRUE(mkdtemp(buf) != NULL);
}

#endif /* CLB_TEMP_DIR_H */
