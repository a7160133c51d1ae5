/* errors.c: the symbol context's error message, written with the status that
 * every failing call of the engine returns, and the thread's message for
 * failures with no handle to hold one (clb_last_errmsg). It lives in this, the
 * lowest layer, so the engine and the runtime above it write the same one. */
#include <stdarg.h>
#include <stdio.h>

#include "shapes-impl.h"

clb_status clb__shapes_fail(struct clb_shapes *sh, clb_status st, const char *fmt, ...) {
  if (sh) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sh->errmsg, sizeof sh->errmsg, fmt, ap);
    va_end(ap);
  }
  return st;
}

#if defined(__STDC_NO_THREADS__) && !defined(__GNUC__)
#define CLB_THREAD_LOCAL
#else
#define CLB_THREAD_LOCAL _Thread_local
#endif

static CLB_THREAD_LOCAL char last_errmsg[4096];

const char *clb_last_errmsg(void) { return last_errmsg; }

char *clb__last_errmsg_buf(size_t *len) {
  *len = sizeof last_errmsg;
  return last_errmsg;
}

static void set_last(const char *fmt, va_list ap) { vsnprintf(last_errmsg, sizeof last_errmsg, fmt, ap); }

void clb__set_last_errmsg(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_last(fmt, ap);
  va_end(ap);
}

clb_status clb__shapes_fail_last(clb_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_last(fmt, ap);
  va_end(ap);
  return st;
}
