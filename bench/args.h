/* args.h: strict parsing of the numeric options of `clbound` and its
 * benchmarks. Each parser takes the whole string or nothing: no trailing
 * characters, no silent wrap-around, nothing outside the stated range; a
 * floating-point value must be finite. On failure it prints to stderr a message
 * naming the command, the option, the value and the accepted range, and returns
 * CLB_ARG_BAD, the exit code (2) the caller returns. */
#ifndef CLB_BENCH_ARGS_H
#define CLB_BENCH_ARGS_H

#include <stdint.h>

enum { CLB_ARG_OK = 0, CLB_ARG_BAD = 2 };

/* Whether the arguments ask for help (-h or --help anywhere): the command then
 * prints its usage on stdout and exits 0. */
int clb_arg_help(int argc, char **argv);
/* The exit code of a usage message printed on f: 0 on stdout (asked for with
 * --help), CLB_ARG_BAD elsewhere (a wrong command line). */
int clb_arg_usage_rc(const void *f);

/* The value after option argv[*i]: advances *i, or prints "CMD: OPT needs a
 * value" and returns NULL. */
const char *clb_arg_value(const char *cmd, int argc, char **argv, int *i);

/* A decimal integer in [lo, hi] (optional sign, digits only). */
int clb_arg_i64(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out);
int clb_arg_int(const char *cmd, const char *opt, const char *s, int lo, int hi, int *out);

/* A finite decimal number in [lo, hi] (as strtod reads it; no inf, no nan). */
int clb_arg_f64(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out);

/* A comma-separated list of 1..cap integers, each in [lo, hi]; no empty item. */
int clb_arg_i64_list(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out, int cap,
                     int *n);

#endif /* CLB_BENCH_ARGS_H */
