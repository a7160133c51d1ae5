/* gemm-tune.c: CLBlast's tuned parameters per device (clbound/tuning.h).
 *
 * `clbound tune` runs CLBlast's tuners and hands their output to
 * clb_tuning_parse; the best parameters go to one file per device next to the
 * program cache, named by a hash of the device name and driver version, which
 * the file also holds in full. The file is plain JSON in one fixed layout,
 * written atomically, ending with an FNV-1a checksum of everything before it:
 *
 *   {"format": "clbound-tuning 1", "device": "...", "driver": "...",
 *    "kernels": [
 *     {"kernel": "Xgemm", "precision": 32, "time_ms": 12.5, "gflops": 21.4, "measured": 40,
 *      "parameters": {"GEMMK": 0, "KWG": 16, ...}},
 *     ...],
 *    "sum": "0123456789abcdef"}
 *
 * A context reads it before its first CLBlast call (clb__tuning_apply) and sets
 * each kernel with CLBlastOverrideParameters; a file that fails any check is
 * ignored with a log line and never applied (docs/failure-behaviour.md). An
 * entry that passes the checks and still fails in CLBlast is undone after the
 * failure (clb__tuning_revert): CLBlast's own parameters, read before the
 * file's were applied, are put back and the GEMM is tried once more. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clblast_c.h>

#include "clbound/tuning.h"
#include "runtime/cache/cache.h"
#include "runtime/ops/clblast-params.h"
#include "runtime/ops/gemm-host.h"

#define TUNING_FORMAT "clbound-tuning 1"
#define TUNING_MAX_BYTES (256u << 10)

/* The kernels CLBlast's GEMM uses, the only names a file may carry. */
static const char *const known_kernels[] = {"Xgemm", "XgemmDirect", "Copy", "Pad", "Transpose", "Padtranspose"};

static int known_kernel(const char *k) {
  for (size_t i = 0; i < sizeof known_kernels / sizeof known_kernels[0]; i++)
    if (strcmp(k, known_kernels[i]) == 0) return 1;
  return 0;
}

static int param_name_ok(const char *s) {
  if (!*s || strlen(s) >= 16) return 0;
  for (; *s; s++)
    if (!isupper((unsigned char)*s) && !isdigit((unsigned char)*s) && *s != '_') return 0;
  return 1;
}

/* ---- Parsing a tuner's output ---------------------------------------------- */

/* Copies a line without ANSI colour codes ("\033[...m"). */
static void strip_line(const char *s, size_t n, char *out, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < n && o + 1 < cap; i++) {
    if (s[i] == '\033') {
      while (i < n && s[i] != 'm') i++;
      continue;
    }
    out[o++] = s[i];
  }
  out[o] = 0;
}

/* Splits a table row "| a | b | ... |" into at most max cells (trimmed, in place). */
static int row_cells(char *line, char **cells, int max) {
  int n = 0;
  char *p = strchr(line, '|');
  while (p && n < max) {
    char *q = strchr(p + 1, '|');
    if (!q) break;
    *q = 0;
    char *c = p + 1;
    while (*c == ' ') c++;
    char *e = c + strlen(c);
    while (e > c && e[-1] == ' ') *--e = 0;
    cells[n++] = c;
    p = q;
  }
  return n;
}

clb_status clb_tuning_parse(const char *text, size_t len, const char *kernel, int precision, clb_tuning_entry *best) {
  if (!text || !kernel || !best) return clb__set_error(NULL, CLB_ERR_NULL, "clb_tuning_parse: a NULL argument");
  if (!known_kernel(kernel) || (precision != 32 && precision != 64))
    return clb__set_error(NULL, CLB_ERR_INVALID_ARG, "clb_tuning_parse: kernel \"%s\" precision %d: not a GEMM kernel "
                          "of CLBlast (Xgemm, XgemmDirect, Copy, Pad, Transpose, Padtranspose) at 32 or 64", kernel, precision);
  memset(best, 0, sizeof *best);
  snprintf(best->kernel, sizeof best->kernel, "%s", kernel);
  best->precision = precision;
  char names[CLB_TUNING_MAX_PARAMS][16];
  int nnames = 0, found = 0;
  char line[1024];
  for (size_t i = 0; i < len;) {
    size_t j = i;
    while (j < len && text[j] != '\n') j++;
    strip_line(text + i, j - i, line, sizeof line);
    i = j + 1;
    const char *pe = strstr(line, "Parameters explored:");
    if (pe) {
      nnames = 0;
      char *save = NULL;
      for (char *t = strtok_r(line + (pe - line) + 20, " \t\r", &save); t && nnames < CLB_TUNING_MAX_PARAMS;
           t = strtok_r(NULL, " \t\r", &save))
        if (param_name_ok(t)) snprintf(names[nnames++], 16, "%s", t);
      continue;
    }
    /* | ID | total | param values | local | global | compiles | time | GFLOPS | status | */
    char *cells[12];
    if (line[0] != '|' || row_cells(line, cells, 12) != 9) continue;
    if (!isdigit((unsigned char)cells[0][0]) || strcmp(cells[8], "results match") != 0 || nnames == 0) continue;
    char *end = NULL;
    double ms = strtod(cells[6], &end);
    if (end == cells[6] || ms <= 0) continue;
    long vals[CLB_TUNING_MAX_PARAMS];
    int nv = 0;
    for (char *p = cells[2]; nv < CLB_TUNING_MAX_PARAMS;) {
      char *e2 = NULL;
      long v = strtol(p, &e2, 10);
      if (e2 == p) break;
      vals[nv++] = v;
      p = e2;
    }
    if (nv != nnames) continue; /* a row of another table */
    best->measured++;
    if (found && ms >= best->time_ms) continue;
    found = 1;
    best->time_ms = ms;
    best->gflops = strtod(cells[7], NULL);
    best->nparams = nnames;
    for (int k = 0; k < nnames; k++) {
      memcpy(best->names[k], names[k], 16);
      best->values[k] = vals[k];
    }
  }
  if (!found)
    return clb__set_error(NULL, CLB_ERR_PARSE, "clb_tuning_parse: %s (%d): no configuration with matching results in "
                          "%zu bytes of tuner output", kernel, precision, len);
  return CLB_OK;
}

/* ---- The file -------------------------------------------------------------- */

static void device_strings(cl_device_id dev, char *name, size_t ncap, char *driver, size_t dcap) {
  name[0] = driver[0] = 0;
  if (clGetDeviceInfo(dev, CL_DEVICE_NAME, ncap, name, NULL) != CL_SUCCESS) name[0] = 0;
  if (clGetDeviceInfo(dev, CL_DRIVER_VERSION, dcap, driver, NULL) != CL_SUCCESS) driver[0] = 0;
  name[ncap - 1] = driver[dcap - 1] = 0;
}

clb_status clb_tuning_path(cl_device_id dev, const char *cache_dir, char *buf, size_t cap) {
  if (!dev || !buf || cap == 0) return clb__set_error(NULL, CLB_ERR_NULL, "clb_tuning_path: a NULL argument");
  buf[0] = 0;
  char def[1024], name[256], driver[256];
  if (!cache_dir) {
    clb_status st = clb_cache_default_dir(def, sizeof def);
    if (st != CLB_OK) return st;
    cache_dir = def;
  }
  if (!cache_dir[0] || strcmp(cache_dir, "off") == 0 || strcmp(cache_dir, "0") == 0 || strcmp(cache_dir, "none") == 0)
    return clb__set_error(NULL, CLB_ERR_INVALID_ARG, "clb_tuning_path: the program cache is off, and the tuning file "
                          "lives next to it (set CLBOUND_CACHE_DIR)");
  device_strings(dev, name, sizeof name, driver, sizeof driver);
  uint64_t h = clb__fnv1a(CLB_FNV_SEED, name, strlen(name) + 1);
  h = clb__fnv1a(h, driver, strlen(driver));
  int n = snprintf(buf, cap, "%s/tuning-%016llx.json", cache_dir, (unsigned long long)h);
  if (n < 0 || (size_t)n >= cap) {
    buf[0] = 0;
    return clb__set_error(NULL, CLB_ERR_BUFFER_SMALL, "clb_tuning_path: %d characters do not fit in %zu", n, cap);
  }
  return CLB_OK;
}

/* A growing text for the file's body. */
typedef struct text {
  char *p;
  size_t n, cap;
  int failed;
} text;

static void put(text *t, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int k = vsnprintf(t->p ? t->p + t->n : NULL, t->p ? t->cap - t->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) {
      t->failed = 1;
      return;
    }
    if (t->p && t->n + (size_t)k < t->cap) {
      t->n += (size_t)k;
      return;
    }
    size_t nc = (t->cap ? t->cap * 2 : 4096) + (size_t)k;
    char *np = realloc(t->p, nc);
    if (!np) {
      t->failed = 1;
      return;
    }
    t->p = np;
    t->cap = nc;
  }
}

/* A JSON string of printable ASCII: quotes and backslashes escaped, any other
 * byte as '?' (device names are ASCII; the comparison uses the same text). */
static void put_string(text *t, const char *s) {
  put(t, "\"");
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') put(t, "\\%c", c);
    else put(t, "%c", c >= 0x20 && c < 0x7f ? c : '?');
  }
  put(t, "\"");
}

static void put_body(text *t, const char *name, const char *driver, const clb_tuning_entry *e, int n) {
  put(t, "{\"format\": \"" TUNING_FORMAT "\", \"device\": ");
  put_string(t, name);
  put(t, ", \"driver\": ");
  put_string(t, driver);
  put(t, ",\n \"kernels\": [");
  for (int i = 0; i < n; i++) {
    put(t, "%s\n  {\"kernel\": \"%s\", \"precision\": %d, \"time_ms\": %.4f, \"gflops\": %.2f, \"measured\": %d,\n"
           "   \"parameters\": {", i ? "," : "", e[i].kernel, e[i].precision, e[i].time_ms, e[i].gflops, e[i].measured);
    for (int k = 0; k < e[i].nparams; k++) put(t, "%s\"%s\": %ld", k ? ", " : "", e[i].names[k], e[i].values[k]);
    put(t, "}}");
  }
  put(t, "],\n \"sum\": ");
}

static clb_status check_entries(const clb_tuning_entry *e, int n, char *why, size_t whycap) {
  if (n < 0 || n > CLB_TUNING_MAX_ENTRIES) {
    snprintf(why, whycap, "%d entries (0..%d)", n, CLB_TUNING_MAX_ENTRIES);
    return CLB_ERR_INVALID_ARG;
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i; j++)
      if (strcmp(e[i].kernel, e[j].kernel) == 0 && e[i].precision == e[j].precision) {
        snprintf(why, whycap, "kernel %.31s (precision %d) appears twice (entries %d and %d)", e[i].kernel, e[i].precision, j,
                 i);
        return CLB_ERR_INVALID_ARG;
      }
  for (int i = 0; i < n; i++) {
    if (!known_kernel(e[i].kernel) || (e[i].precision != 32 && e[i].precision != 64) || e[i].nparams < 1 ||
        e[i].nparams > CLB_TUNING_MAX_PARAMS) {
      snprintf(why, whycap, "entry %d: kernel \"%.31s\" precision %d with %d parameters", i, e[i].kernel,
               e[i].precision, e[i].nparams);
      return CLB_ERR_INVALID_ARG;
    }
    for (int k = 0; k < e[i].nparams; k++)
      if (!param_name_ok(e[i].names[k]) || e[i].values[k] < 0 || e[i].values[k] > 1000000) {
        snprintf(why, whycap, "entry %d (%s): parameter %d \"%.15s\" = %ld", i, e[i].kernel, k, e[i].names[k],
                 e[i].values[k]);
        return CLB_ERR_INVALID_ARG;
      }
  }
  return CLB_OK;
}

clb_status clb_tuning_save(cl_device_id dev, const char *path, const clb_tuning_entry *entries, int n) {
  if (!dev || !path || (n > 0 && !entries)) return clb__set_error(NULL, CLB_ERR_NULL, "clb_tuning_save: a NULL argument");
  char why[160];
  if (check_entries(entries, n, why, sizeof why) != CLB_OK)
    return clb__set_error(NULL, CLB_ERR_INVALID_ARG, "clb_tuning_save %s: %s", path, why);
  char name[256], driver[256];
  device_strings(dev, name, sizeof name, driver, sizeof driver);
  text t = {0};
  put_body(&t, name, driver, entries, n);
  uint64_t sum = clb__fnv1a(CLB_FNV_SEED, t.p ? t.p : "", t.n);
  put(&t, "\"%016llx\"}\n", (unsigned long long)sum);
  if (t.failed) {
    free(t.p);
    return clb__set_error(NULL, CLB_ERR_HOST_OOM, "clb_tuning_save %s: out of host memory", path);
  }
  const void *parts[1] = {t.p};
  size_t lens[1] = {t.n};
  const char *step = "";
  int err = clb__cache_write_atomic(path, parts, lens, 1, &step);
  free(t.p);
  if (err) return clb__set_error(NULL, CLB_ERR_IO, "clb_tuning_save %s: %s: %s", path, step, strerror(err));
  return CLB_OK;
}

/* ---- Reading it back: a strict reader of the one layout we write ---------- */

typedef struct reader {
  const char *p, *end;
  int bad;
} reader;

static void skip_ws(reader *r) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\t' || *r->p == '\r')) r->p++;
}

static void expect(reader *r, char c) {
  skip_ws(r);
  if (r->p < r->end && *r->p == c) r->p++;
  else r->bad = 1;
}

static int peek(reader *r, char c) {
  skip_ws(r);
  return r->p < r->end && *r->p == c;
}

static void read_string(reader *r, char *out, size_t cap) {
  size_t o = 0;
  expect(r, '"');
  while (!r->bad && r->p < r->end && *r->p != '"') {
    char c = *r->p++;
    if (c == '\\') {
      if (r->p >= r->end || (*r->p != '"' && *r->p != '\\')) r->bad = 1;
      else c = *r->p++;
    }
    if (o + 1 >= cap) r->bad = 1;
    else out[o++] = c;
  }
  out[o] = 0;
  expect(r, '"');
}

static double read_number(reader *r) {
  skip_ws(r);
  char buf[40];
  size_t n = 0;
  while (r->p < r->end && n + 1 < sizeof buf && (isdigit((unsigned char)*r->p) || strchr("+-.eE", *r->p)))
    buf[n++] = *r->p++;
  buf[n] = 0;
  char *e = NULL;
  double v = strtod(buf, &e);
  if (n == 0 || *e) r->bad = 1;
  return v;
}

static void read_key(reader *r, const char *key) {
  char k[32];
  read_string(r, k, sizeof k);
  if (strcmp(k, key) != 0) r->bad = 1;
  expect(r, ':');
}

static void read_entry(reader *r, clb_tuning_entry *e) {
  memset(e, 0, sizeof *e);
  expect(r, '{');
  read_key(r, "kernel");
  read_string(r, e->kernel, sizeof e->kernel);
  expect(r, ',');
  read_key(r, "precision");
  e->precision = (int)read_number(r);
  expect(r, ',');
  read_key(r, "time_ms");
  e->time_ms = read_number(r);
  expect(r, ',');
  read_key(r, "gflops");
  e->gflops = read_number(r);
  expect(r, ',');
  read_key(r, "measured");
  e->measured = (int)read_number(r);
  expect(r, ',');
  read_key(r, "parameters");
  expect(r, '{');
  while (!r->bad && !peek(r, '}')) {
    if (e->nparams && (expect(r, ','), r->bad)) break;
    if (e->nparams >= CLB_TUNING_MAX_PARAMS) {
      r->bad = 1;
      break;
    }
    read_string(r, e->names[e->nparams], sizeof e->names[0]);
    expect(r, ':');
    double v = read_number(r);
    if (v != (double)(long)v) r->bad = 1;
    e->values[e->nparams++] = (long)v;
  }
  expect(r, '}');
  expect(r, '}');
}

clb_tuning_state clb_tuning_load(cl_device_id dev, const char *path, clb_tuning_entry *entries, int cap, int *n,
                                 char *why, size_t whycap) {
  char dummy[8];
  if (!why || whycap == 0) why = dummy, whycap = sizeof dummy;
  why[0] = 0;
  if (n) *n = 0;
  if (!dev || !path || !n || (cap > 0 && !entries)) {
    snprintf(why, whycap, "clb_tuning_load: a NULL argument");
    return CLB_TUNING_DAMAGED;
  }
  size_t len = 0;
  const char *rwhy = NULL;
  unsigned char *buf = clb__cache_read_file(path, TUNING_MAX_BYTES, 1, &len, &rwhy);
  if (!buf) {
    if (!rwhy) return CLB_TUNING_ABSENT;
    snprintf(why, whycap, "%s", rwhy);
    return CLB_TUNING_DAMAGED;
  }
  const char *s = (const char *)buf;
  clb_tuning_state state = CLB_TUNING_DAMAGED;
  /* the checksum covers every byte before `"sum": ` */
  const char *sk = NULL;
  for (const char *q = strstr(s, "\"sum\": "); q; q = strstr(q + 1, "\"sum\": ")) sk = q;
  char want[40];
  if (!sk || strlen(s) != len) {
    snprintf(why, whycap, "no checksum (cut off, or not a tuning file)");
    goto out;
  }
  snprintf(want, sizeof want, "\"%016llx\"}\n",
           (unsigned long long)clb__fnv1a(CLB_FNV_SEED, s, (size_t)(sk + 7 - s)));
  if (strcmp(sk + 7, want) != 0) {
    snprintf(why, whycap, "checksum does not match its contents (damaged or edited)");
    goto out;
  }
  reader r = {s, sk, 0};
  char fmt[32], name[256], driver[256], dname[256], ddriver[256];
  expect(&r, '{');
  read_key(&r, "format");
  read_string(&r, fmt, sizeof fmt);
  expect(&r, ',');
  read_key(&r, "device");
  read_string(&r, name, sizeof name);
  expect(&r, ',');
  read_key(&r, "driver");
  read_string(&r, driver, sizeof driver);
  expect(&r, ',');
  read_key(&r, "kernels");
  expect(&r, '[');
  clb_tuning_entry e[CLB_TUNING_MAX_ENTRIES];
  int ne = 0;
  while (!r.bad && !peek(&r, ']')) {
    if (ne && (expect(&r, ','), r.bad)) break;
    if (ne >= CLB_TUNING_MAX_ENTRIES) {
      r.bad = 1;
      break;
    }
    read_entry(&r, &e[ne++]);
  }
  expect(&r, ']');
  expect(&r, ',');
  skip_ws(&r);
  if (r.bad || r.p != r.end || strcmp(fmt, TUNING_FORMAT) != 0) {
    snprintf(why, whycap, "not in the layout \"%s\" (byte %ld)", TUNING_FORMAT, (long)(r.p - s));
    goto out;
  }
  if (check_entries(e, ne, why, whycap) != CLB_OK) goto out;
  /* the same text the writer makes from this device's strings */
  text t = {0};
  device_strings(dev, dname, sizeof dname, ddriver, sizeof ddriver);
  put_string(&t, dname);
  put(&t, "|");
  put_string(&t, ddriver);
  text f = {0};
  put_string(&f, name);
  put(&f, "|");
  put_string(&f, driver);
  int same = !t.failed && !f.failed && t.p && f.p && strcmp(t.p, f.p) == 0;
  free(t.p);
  free(f.p);
  if (!same) {
    snprintf(why, whycap, "written for device \"%.100s\" driver \"%.60s\", this is \"%.100s\" driver \"%.60s\"", name,
             driver, dname, ddriver);
    state = CLB_TUNING_OTHER_DEVICE;
    goto out;
  }
  for (int i = 0; i < ne && i < cap; i++) entries[i] = e[i];
  *n = ne < cap ? ne : cap;
  state = CLB_TUNING_OK;
out:
  free(buf);
  return state;
}

/* ---- CLBlast's constraints ------------------------------------------------------
 *
 * What CLBlast's tuners never try and its kernels cannot build or run with
 * (CLBlast's src/tuning/kernels/<kernel>.hpp, SetConstraints and the parameter lists):
 * every parameter the kernel takes and no other, flags 0 or 1, vector widths
 * powers of two up to 16, other sizes at least 1, the divisibility rules of
 * Xgemm and XgemmDirect, and a work-group no larger than the device allows. */

typedef struct param_rule {
  const char *name;
  char kind; /* 'f' flag 0/1, 'v' vector width, 's' a size >= 1 */
} param_rule;

static const struct kernel_rules {
  const char *kernel;
  param_rule p[16];
} rules[] = {
    {"Xgemm", {{"GEMMK", 'f'}, {"MWG", 's'}, {"NWG", 's'}, {"KWG", 's'}, {"MDIMC", 's'}, {"NDIMC", 's'}, {"MDIMA", 's'},
               {"NDIMB", 's'}, {"KWI", 's'}, {"VWM", 'v'}, {"VWN", 'v'}, {"STRM", 'f'}, {"STRN", 'f'}, {"SA", 'f'}, {"SB", 'f'},
               {"KREG", 's'}}},
    {"XgemmDirect", {{"WGD", 's'}, {"MDIMCD", 's'}, {"NDIMCD", 's'}, {"MDIMAD", 's'}, {"NDIMBD", 's'}, {"KWID", 's'},
                     {"VWMD", 'v'}, {"VWND", 'v'}, {"PADA", 'f'}, {"PADB", 'f'}}},
    {"Copy", {{"COPY_DIMX", 's'}, {"COPY_DIMY", 's'}, {"COPY_WPT", 's'}, {"COPY_VW", 'v'}}},
    {"Pad", {{"PAD_DIMX", 's'}, {"PAD_DIMY", 's'}, {"PAD_WPTX", 's'}, {"PAD_WPTY", 's'}}},
    {"Transpose", {{"TRA_DIM", 's'}, {"TRA_WPT", 's'}, {"TRA_PAD", 'f'}, {"TRA_SHUFFLE", 'f'}}},
    {"Padtranspose", {{"PADTRA_TILE", 's'}, {"PADTRA_WPT", 's'}, {"PADTRA_PAD", 'f'}}},
};

static long pv(const clb_tuning_entry *e, const char *name) {
  for (int k = 0; k < e->nparams; k++)
    if (strcmp(e->names[k], name) == 0) return e->values[k];
  return 0;
}

/* x is a multiple of y (y > 0). */
static int multiple(long x, long y) { return y > 0 && x % y == 0; }

/* 1 when e keeps CLBlast's constraints on a device allowing max_wg work-items
 * per group, else 0 with the first broken rule in why. */
static int entry_valid(const clb_tuning_entry *e, size_t max_wg, char *why, size_t cap) {
  const struct kernel_rules *r = NULL;
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
    if (strcmp(rules[i].kernel, e->kernel) == 0) r = &rules[i];
  if (!r) return snprintf(why, cap, "not a kernel of CLBlast's GEMM"), 0;
  for (int k = 0; k < e->nparams; k++) {
    const param_rule *p = NULL;
    for (int j = 0; j < 16 && r->p[j].name; j++)
      if (strcmp(r->p[j].name, e->names[k]) == 0) p = &r->p[j];
    long v = e->values[k];
    if (!p) return snprintf(why, cap, "%s is not a parameter of %s", e->names[k], e->kernel), 0;
    if ((p->kind == 'f' && v != 0 && v != 1) || (p->kind == 'v' && (v < 1 || v > 16 || (v & (v - 1)))) ||
        (p->kind == 's' && v < 1))
      return snprintf(why, cap, "%s = %ld (%s)", p->name, v,
                      p->kind == 'f' ? "0 or 1" : p->kind == 'v' ? "a power of two up to 16" : "at least 1"), 0;
  }
  for (int j = 0; j < 16 && r->p[j].name; j++) {
    int have = 0;
    for (int k = 0; k < e->nparams; k++) have |= strcmp(e->names[k], r->p[j].name) == 0;
    if (!have) return snprintf(why, cap, "%s is missing", r->p[j].name), 0;
  }
  long wg = 0;
  if (strcmp(e->kernel, "Xgemm") == 0) {
    long kwg = pv(e, "KWG"), mwg = pv(e, "MWG"), nwg = pv(e, "NWG"), mdimc = pv(e, "MDIMC"), ndimc = pv(e, "NDIMC");
    long mdima = pv(e, "MDIMA"), ndimb = pv(e, "NDIMB"), vwm = pv(e, "VWM"), vwn = pv(e, "VWN");
    int ok = multiple(kwg, pv(e, "KWI")) && multiple(mwg, mdimc * vwm) && multiple(nwg, ndimc * vwn) &&
             multiple(mwg, mdima * vwm) && multiple(nwg, ndimb * vwn);
    if (pv(e, "GEMMK") == 0)
      ok = ok && multiple(kwg, mdimc * ndimc / mdima) && multiple(kwg, mdimc * ndimc / ndimb);
    else
      ok = ok && multiple(pv(e, "KREG"), vwn) && mdimc == mdima && ndimc == ndimb;
    if (!ok)
      return snprintf(why, cap, "breaks CLBlast's Xgemm rules (KWG %% KWI, MWG %% MDIMC*VWM, NWG %% NDIMC*VWN, MWG %% MDIMA*VWM, "
                      "NWG %% NDIMB*VWN, KWG %% MDIMC*NDIMC/MDIMA and /NDIMB)"), 0;
    wg = mdimc * ndimc;
  } else if (strcmp(e->kernel, "XgemmDirect") == 0) {
    long wgd = pv(e, "WGD"), mc = pv(e, "MDIMCD"), nc = pv(e, "NDIMCD"), ma = pv(e, "MDIMAD"), nb = pv(e, "NDIMBD");
    long vm = pv(e, "VWMD"), vn = pv(e, "VWND");
    if (!(multiple(wgd, pv(e, "KWID")) && multiple(wgd, mc * vm) && multiple(wgd, nc * vn) && multiple(wgd, ma * vm) &&
          multiple(wgd, nb * vn) && multiple(wgd, mc * nc / ma) && multiple(wgd, mc * nc / nb)))
      return snprintf(why, cap, "breaks CLBlast's XgemmDirect rules (WGD %% KWID, WGD %% MDIMCD*VWMD, WGD %% NDIMCD*VWND, "
                      "WGD %% MDIMAD*VWMD, WGD %% NDIMBD*VWND, WGD %% MDIMCD*NDIMCD/MDIMAD and /NDIMBD)"), 0;
    wg = mc * nc;
  } else if (strcmp(e->kernel, "Copy") == 0) {
    wg = pv(e, "COPY_DIMX") * pv(e, "COPY_DIMY");
  } else if (strcmp(e->kernel, "Pad") == 0) {
    wg = pv(e, "PAD_DIMX") * pv(e, "PAD_DIMY");
  } else if (strcmp(e->kernel, "Transpose") == 0) {
    wg = pv(e, "TRA_DIM") * pv(e, "TRA_DIM");
  } else {
    wg = pv(e, "PADTRA_TILE") * pv(e, "PADTRA_TILE");
  }
  if (max_wg && (size_t)wg > max_wg)
    return snprintf(why, cap, "a work-group of %ld work-items, the device allows %zu", wg, max_wg), 0;
  return 1;
}

/* ---- What is in force, process-wide ----------------------------------------
 *
 * CLBlast keeps overridden parameters per (device, kernel, precision) for the
 * whole process, and its C API cannot remove one. So before a file's entry is
 * first applied, the parameters in force then (CLBlast's own for the device) are
 * read through its C++ API and kept here: a kernel whose file entry fails to
 * build gets them back (clb__tuning_revert), and a file dropping an entry puts
 * them back for any other context's entry of that kernel still in force. */

/* 6 kernels x 2 precisions x 2 devices: beyond it an entry is not applied
 * (logged), as it could not be undone. */
#define MAX_KERNELS 24

typedef struct in_force {
  cl_device_id dev;
  clb_tuning_entry own; /* kernel, precision and CLBlast's parameters before any file's */
  clb_tuning_entry cur; /* the file entry in force (nparams 0: none) */
  clb_tuning_entry bad; /* an entry that failed in this process (nparams 0: none): never applied again */
  char *path;           /* the file of `cur` (owned; NULL when it could not be copied) */
} in_force;

static pthread_mutex_t in_force_lock = PTHREAD_MUTEX_INITIALIZER;
static in_force kernels[MAX_KERNELS];
static int nkernels;

static int same_params(const clb_tuning_entry *a, const clb_tuning_entry *b) {
  if (strcmp(a->kernel, b->kernel) != 0 || a->precision != b->precision || a->nparams != b->nparams) return 0;
  for (int k = 0; k < a->nparams; k++)
    if (strcmp(a->names[k], b->names[k]) != 0 || a->values[k] != b->values[k]) return 0;
  return 1;
}

/* CLBlastOverrideParameters with e's parameters on dev. */
static CLBlastStatusCode override(cl_device_id dev, const clb_tuning_entry *e) {
  const char *names[CLB_TUNING_MAX_PARAMS];
  size_t values[CLB_TUNING_MAX_PARAMS];
  for (int k = 0; k < e->nparams; k++) {
    names[k] = e->names[k];
    values[k] = (size_t)e->values[k];
  }
  return CLBlastOverrideParameters(dev, e->kernel, e->precision == 64 ? CLBlastPrecisionDouble : CLBlastPrecisionSingle,
                                   (size_t)e->nparams, names, values);
}

/* The record of e's kernel on dev, made with CLBlast's parameters in force now
 * when there is none; NULL with the reason in why. Under in_force_lock. */
static in_force *record(cl_device_id dev, const clb_tuning_entry *e, char *why, size_t cap) {
  for (int i = 0; i < nkernels; i++)
    if (kernels[i].dev == dev && kernels[i].own.precision == e->precision && strcmp(kernels[i].own.kernel, e->kernel) == 0)
      return &kernels[i];
  if (nkernels == MAX_KERNELS) return snprintf(why, cap, "%d (device, kernel, precision) already tuned in this process", MAX_KERNELS), NULL;
  in_force *f = &kernels[nkernels];
  memset(f, 0, sizeof *f);
  int rc = clb__clblast_params(dev, e->kernel, e->precision, f->own.names, f->own.values, CLB_TUNING_MAX_PARAMS,
                               &f->own.nparams);
  if (rc != CLBlastSuccess || f->own.nparams < 1)
    return snprintf(why, cap, "CLBlast's own parameters could not be read to undo it (clblast::RetrieveParameters: %d)", rc),
           NULL;
  f->dev = dev;
  memcpy(f->own.kernel, e->kernel, sizeof f->own.kernel);
  f->own.kernel[sizeof f->own.kernel - 1] = 0;
  f->own.precision = e->precision;
  nkernels++;
  return f;
}

/* Puts CLBlast's own parameters back for f's kernel; the file's entry is then
 * no longer in force. Under in_force_lock. */
static CLBlastStatusCode put_back(in_force *f) {
  CLBlastStatusCode rc = override(f->dev, &f->own);
  if (rc == CLBlastSuccess) {
    f->cur.nparams = 0;
    free(f->path);
    f->path = NULL;
  }
  return rc;
}

/* For an entry a file no longer applies: CLBlast's own parameters, where another
 * context put that kernel's entry in force. */
static void put_back_entry(clb_context_t ctx, const char *path, const clb_tuning_entry *e) {
  CLBlastStatusCode rc = CLBlastSuccess;
  pthread_mutex_lock(&in_force_lock);
  for (int i = 0; i < nkernels; i++) {
    in_force *f = &kernels[i];
    if (f->dev == ctx->device && f->cur.nparams && f->own.precision == e->precision && strcmp(f->own.kernel, e->kernel) == 0)
      rc = put_back(f);
  }
  pthread_mutex_unlock(&in_force_lock);
  if (rc != CLBlastSuccess) /* logged outside the lock: the log callback may call clbound */
    clb__log(ctx, CLB_LOG_GEMM, "CLBlast tuning: %s: CLBlastOverrideParameters(%s, %d) with CLBlast's own parameters failed "
             "(%d): the entry applied earlier in this process stays in force", path, e->kernel, e->precision, (int)rc);
}

/* An entry this process saw fail, with these very parameters. */
static int failed_before(cl_device_id dev, const clb_tuning_entry *e) {
  int bad = 0;
  pthread_mutex_lock(&in_force_lock);
  for (int i = 0; i < nkernels; i++)
    if (kernels[i].dev == dev && kernels[i].bad.nparams && same_params(&kernels[i].bad, e)) bad = 1;
  pthread_mutex_unlock(&in_force_lock);
  return bad;
}

/* Sets e (from `path`) in force on the context's device; the parameters CLBlast
 * used before are read first, once per process. */
static int apply_entry(clb_context_t ctx, const char *path, const clb_tuning_entry *e) {
  char why[200];
  pthread_mutex_lock(&in_force_lock);
  in_force *f = record(ctx->device, e, why, sizeof why);
  CLBlastStatusCode rc = f ? override(ctx->device, e) : CLBlastSuccess;
  if (f && rc == CLBlastSuccess) {
    f->cur = *e;
    free(f->path);
    f->path = strdup(path);
  }
  pthread_mutex_unlock(&in_force_lock);
  if (!f)
    clb__log(ctx, CLB_LOG_GEMM, "CLBlast tuning: %s: kernel %s (precision %d) not applied: %s", path, e->kernel,
             e->precision, why);
  else if (rc != CLBlastSuccess)
    clb__log(ctx, CLB_LOG_GEMM, "CLBlast tuning: %s: CLBlastOverrideParameters(%s, %d) failed (%d): that kernel keeps "
             "CLBlast's parameters", path, e->kernel, e->precision, (int)rc);
  return f && rc == CLBlastSuccess;
}

static int same_path(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* Rewrites `path` without its entries equal to a gone[j] whose paths[j] is path. */
static void drop_from_file(clb_context_t ctx, const char *path, const clb_tuning_entry *gone, char *const *paths, int n) {
  clb_tuning_entry e[CLB_TUNING_MAX_ENTRIES];
  char why[400];
  int ne = 0, kept = 0;
  if (clb_tuning_load(ctx->device, path, e, CLB_TUNING_MAX_ENTRIES, &ne, why, sizeof why) != CLB_TUNING_OK) return;
  for (int i = 0; i < ne; i++) {
    int drop = 0;
    for (int j = 0; j < n; j++) drop |= same_path(paths[j], path) && same_params(&e[i], &gone[j]);
    if (!drop) e[kept++] = e[i];
  }
  if (kept < ne && clb_tuning_save(ctx->device, path, e, kept) != CLB_OK)
    clb__log(ctx, CLB_LOG_GEMM, "CLBlast tuning: %s: could not rewrite it without the dropped kernels: %s", path,
             clb_last_errmsg());
}

/* ---- Applying it ----------------------------------------------------------- */

void clb__tuning_apply(clb_context_t ctx) {
  if (ctx->clblast_tuned) return;
  ctx->clblast_tuned = 1;
  if (!clb__env_int(CLB_ENV_CLBLAST_TUNING)) {
    clb__log(ctx, CLB_LOG_GEMM, "CLBlast tuning: CLBOUND_CLBLAST_TUNING=off: CLBlast's own parameters");
    return;
  }
  /* the folder of the persistent cache (it is opened on the first kernel) */
  const char *dir = ctx->cache_dir[0] ? ctx->cache_dir : ctx->cache_dir_option;
  char path[1200], why[400];
  if (clb_tuning_path(ctx->device, dir, path, sizeof path) != CLB_OK) {
    clb__log(ctx, CLB_LOG_GEMM, "CLBlast tuning: none (the program cache is off, and the tuning file lives next to it)");
    return;
  }
  clb_tuning_entry e[CLB_TUNING_MAX_ENTRIES];
  int n = 0;
  clb_tuning_state s = clb_tuning_load(ctx->device, path, e, CLB_TUNING_MAX_ENTRIES, &n, why, sizeof why);
  if (s == CLB_TUNING_ABSENT) {
    clb__log(ctx, CLB_LOG_GEMM, "CLBlast tuning: no file %s (`clbound tune` writes it): CLBlast's own parameters", path);
    return;
  }
  if (s != CLB_TUNING_OK) {
    clb__log(ctx, CLB_LOG_GEMM, "CLBlast tuning: %s ignored, never applied: %s", path, why);
    return;
  }
  /* entries that break CLBlast's constraints, or failed in this process, are
   * never applied, and leave the file (rewritten without them) */
  int kept = 0, unchecked = (int)clb__env_int(CLB_ENV_TEST_TUNING_UNCHECKED);
  for (int i = 0; i < n; i++) {
    if (failed_before(ctx->device, &e[i]))
      snprintf(why, sizeof why, "earlier in this process, CLBlast's GEMM failed with these parameters in force");
    else if (unchecked || entry_valid(&e[i], ctx->info.max_work_group_size, why, sizeof why)) {
      e[kept++] = e[i];
      continue;
    }
    clb__log(ctx, CLB_LOG_GEMM, "CLBlast tuning: %s: kernel %s (precision %d) dropped, CLBlast's own parameters kept: %s", path,
             e[i].kernel, e[i].precision, why);
    fprintf(stderr, "clbound: warning: CLBlast tuning file %s: kernel %s (precision %d) dropped: %s\n", path, e[i].kernel,
            e[i].precision, why);
    put_back_entry(ctx, path, &e[i]);
  }
  if (kept < n && clb_tuning_save(ctx->device, path, e, kept) != CLB_OK)
    clb__log(ctx, CLB_LOG_GEMM, "CLBlast tuning: %s: could not rewrite it without the dropped kernels: %s", path, clb_last_errmsg());
  n = kept;
  int applied = 0;
  for (int i = 0; i < n; i++) applied += apply_entry(ctx, path, &e[i]);
  ctx->clblast_tuned = 1 + applied;
  clb__log(ctx, CLB_LOG_GEMM, "CLBlast tuning: applied %d of %d kernels from %s", applied, n, path);
}

/* ---- An entry that fails in CLBlast ------------------------------------------ */

/* Failures that a kernel's parameters can cause: the program does not build,
 * or its work-group or local memory is larger than the device allows. */
static int parameters_can_cause(int rc) {
  return rc == CLBlastOpenCLBuildProgramFailure || rc == CLBlastInvalidLocalThreadsTotal ||
         rc == CLBlastInvalidLocalThreadsDim || rc == CLBlastInvalidLocalMemUsage;
}

int clb__tuning_revert(clb_context_t ctx, int precision, int rc, const char *rc_name, char *what, size_t cap) {
  if (cap) what[0] = 0;
  if (!parameters_can_cause(rc)) return 0;
  clb_tuning_entry gone[MAX_KERNELS], stuck = {.nparams = 0};
  char *paths[MAX_KERNELS];
  int ng = 0;
  CLBlastStatusCode stuck_rc = CLBlastSuccess;
  pthread_mutex_lock(&in_force_lock);
  for (int i = 0; i < nkernels; i++) {
    in_force *f = &kernels[i];
    if (f->dev != ctx->device || f->own.precision != precision || f->cur.nparams == 0) continue;
    clb_tuning_entry cur = f->cur;
    char *path = f->path;
    f->path = NULL;
    CLBlastStatusCode prc = put_back(f);
    if (prc != CLBlastSuccess) {
      f->path = path;
      stuck = cur;
      stuck_rc = prc;
      continue;
    }
    f->bad = cur;
    gone[ng] = cur;
    paths[ng++] = path;
  }
  pthread_mutex_unlock(&in_force_lock);
  if (stuck.nparams) /* logged outside the lock: the log callback may call clbound */
    clb__log(ctx, CLB_LOG_GEMM, "CLBlast tuning: CLBlastOverrideParameters(%s, %d) with CLBlast's own parameters failed "
             "(%d): the tuning file's entry stays in force", stuck.kernel, precision, (int)stuck_rc);
  /* CLBlast builds all of GEMM's kernels into one program: the failure cannot
   * be pinned on one entry, so each one in force goes */
  size_t u = 0;
  for (int i = 0; i < ng; i++) {
    const char *p = paths[i] ? paths[i] : "(a tuning file)";
    clb__log(ctx, CLB_LOG_GEMM, "CLBlast tuning: %s: kernel %s (precision %d) dropped, CLBlast's own parameters put back: "
             "CLBlast's GEMM failed with the file's parameters in force (%s, %d); retrying once", p, gone[i].kernel,
             precision, rc_name, rc);
    fprintf(stderr, "clbound: warning: CLBlast tuning file %s: kernel %s (precision %d) dropped: CLBlast's GEMM failed "
            "with the file's parameters (%s, %d); CLBlast's own parameters put back\n", p, gone[i].kernel, precision, rc_name,
            rc);
    int first = 1; /* each file once: "Xgemm, Copy of FILE; Pad of FILE2" */
    for (int j = 0; j < i; j++) first &= !same_path(paths[j], paths[i]);
    if (!first) continue;
    for (int j = i; j < ng; j++)
      if (j == i || same_path(paths[j], paths[i]))
        u += (size_t)snprintf(what + (u < cap ? u : cap), u < cap ? cap - u : 0, "%s%s", j == i ? (u ? "; " : "") : ", ",
                              gone[j].kernel);
    u += (size_t)snprintf(what + (u < cap ? u : cap), u < cap ? cap - u : 0, " of tuning file %s", p);
    if (paths[i]) drop_from_file(ctx, paths[i], gone, paths, ng);
  }
  for (int i = 0; i < ng; i++) free(paths[i]);
  if (ng) ctx->clblast_tuned = ctx->clblast_tuned - ng > 1 ? ctx->clblast_tuned - ng : 1;
  return ng;
}

int clb_context_clblast_tuned(clb_context_t ctx) {
  if (!ctx) return -1;
  return ctx->clblast_tuned - 1;
}
