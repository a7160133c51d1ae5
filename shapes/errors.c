/* errors.c: the symbol context's error message, written with the status that
 * every failing call of the engine returns. */
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
