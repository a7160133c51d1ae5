/* cache-test.h: what the program-cache tests share: a context on a given cache
 * folder whose build and cache log lines are captured into log_lines. */
#ifndef CLB_CACHE_TEST_H
#define CLB_CACHE_TEST_H

#include <stdio.h>
#include <string.h>

#include "cl-test.h"

static char log_lines[65536];

static void capture(void *user, const char *category, const char *line) {
  (void)user;
  size_t used = strlen(log_lines);
  snprintf(log_lines + used, sizeof log_lines - used, "[%s] %s\n", category, line);
}

/* A context on `folder` (CLB_LOG_BUILDS and CLB_LOG_CACHE captured, log_lines
 * emptied). */
static inline clb_context_t cached_context(const char *folder) {
  clb_context_options o;
  clb_context_options_init(&o);
  o.cache_dir = folder;
  clb_context_t ctx = clb_test_context(&o);
  log_lines[0] = 0;
  clb_context_set_log(ctx, CLB_LOG_BUILDS | CLB_LOG_CACHE, capture, NULL);
  return ctx;
}

#endif /* CLB_CACHE_TEST_H */
