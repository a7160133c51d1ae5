/* args.c: strict numeric options (args.h). */
#include "bench/args.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int clb_arg_help(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) return 1;
  return 0;
}

int clb_arg_usage_rc(const void *f) { return f == (const void *)stdout ? CLB_ARG_OK : CLB_ARG_BAD; }

const char *clb_arg_value(const char *cmd, int argc, char **argv, int *i) {
  if (*i + 1 >= argc) {
    fprintf(stderr, "%s: %s needs a value\n", cmd, argv[*i]);
    return NULL;
  }
  return argv[++*i];
}

/* Parses s[0..len) as a decimal integer in [lo, hi]; 0 on success. */
static int parse_i64(const char *s, size_t len, int64_t lo, int64_t hi, int64_t *out) {
  char buf[64];
  if (len == 0 || len >= sizeof buf) return 1;
  memcpy(buf, s, len);
  buf[len] = 0;
  size_t k = buf[0] == '-' || buf[0] == '+';
  if (!buf[k]) return 1;
  for (size_t j = k; buf[j]; j++)
    if (!isdigit((unsigned char)buf[j])) return 1;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(buf, &end, 10);
  if (errno == ERANGE || *end || v < lo || v > hi) return 1;
  *out = (int64_t)v;
  return 0;
}

static int bad_int(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi) {
  fprintf(stderr, "%s: %s must be an integer in %lld..%lld, not \"%s\"\n", cmd, opt, (long long)lo, (long long)hi, s);
  return CLB_ARG_BAD;
}

int clb_arg_i64(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out) {
  if (!s || parse_i64(s, strlen(s), lo, hi, out) != 0) return bad_int(cmd, opt, s ? s : "", lo, hi);
  return CLB_ARG_OK;
}

int clb_arg_int(const char *cmd, const char *opt, const char *s, int lo, int hi, int *out) {
  int64_t v = 0;
  int rc = clb_arg_i64(cmd, opt, s, lo, hi, &v);
  if (rc == CLB_ARG_OK) *out = (int)v;
  return rc;
}

int clb_arg_f64(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out) {
  errno = 0;
  char *end = NULL;
  double v = s && *s && !isspace((unsigned char)*s) ? strtod(s, &end) : NAN;
  /* strtod takes "inf", "nan" and hex; only finite decimal values pass here */
  int ok = end && end != s && !*end && isfinite(v) && errno != ERANGE && v >= lo && v <= hi;
  for (const char *p = s; ok && *p; p++)
    if (!(isdigit((unsigned char)*p) || strchr("+-.eE", *p))) ok = 0;
  if (!ok) {
    fprintf(stderr, "%s: %s must be a finite number in %g..%g, not \"%s\"\n", cmd, opt, lo, hi, s ? s : "");
    return CLB_ARG_BAD;
  }
  *out = v;
  return CLB_ARG_OK;
}

int clb_arg_i64_list(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out, int cap,
                     int *n) {
  *n = 0;
  const char *p = s ? s : "";
  for (;;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (*n == cap || parse_i64(p, len, lo, hi, &out[*n]) != 0) {
      fprintf(stderr, "%s: %s must be a comma-separated list of 1 to %d integers, each in %lld..%lld, not \"%s\"\n", cmd,
              opt, cap, (long long)lo, (long long)hi, s ? s : "");
      *n = 0;
      return CLB_ARG_BAD;
    }
    ++*n;
    if (!comma) return CLB_ARG_OK;
    p = comma + 1;
  }
}
