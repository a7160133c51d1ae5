/* cmd-shapes.c: `clbound shapes FILE`: a dynamicity report of the input shapes a
 * graph saw (CLBOUND_SHAPE_LOG) or of a plain CSV of shapes: unique shapes, how
 * much of each bound is used, and suggested bounds and buckets with their waste.
 *
 * The file is read as a stream, one byte at a time through a small buffer, so a
 * line may have any length and nothing is kept per run: each run's shape goes
 * into a hash table of the unique shapes with a count, and the per-dim figures
 * are computed from that table. Time is linear in the file's size; memory grows
 * with the number of unique shapes only. Every size is checked while it is read
 * (a whole number from 0 to INT64_MAX); anything else stops the report with the
 * line and column, and all arithmetic on sizes stays in range. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/args.h"
#include "clbound/shapes.h"
#include "commands.h"

#define MAX_INPUTS 16
#define MAX_DIMS 8
#define MAX_NAME 48 /* names up to 47 characters */
#define MAX_COLS (MAX_INPUTS * MAX_DIMS)

/* ---- the unique shapes: a hash table of fixed-width int64 keys ------------------ */

typedef struct shape_table {
  int width;       /* int64 per key: the dims of every input, in order */
  size_t n;        /* entries, in the order first seen */
  size_t ecap;     /* room in keys and count */
  size_t nslots;   /* a power of two, at most half full */
  size_t *slots;   /* entry index + 1; 0 is empty */
  int64_t *keys;   /* n * width */
  uint64_t *count; /* runs with each shape */
} shape_table;

static uint64_t mix64(uint64_t h) {
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

static uint64_t key_hash(const int64_t *k, int width) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < width; i++) h = mix64(h ^ (uint64_t)k[i]);
  return h;
}

/* Counts one run of shape `key`; 0 when out of memory. */
static int table_add(shape_table *t, const int64_t *key) {
  if (2 * (t->n + 1) > t->nslots) {
    size_t ns = t->nslots ? 2 * t->nslots : 1024;
    size_t *s = calloc(ns, sizeof *s);
    if (!s) return 0;
    for (size_t e = 0; e < t->n; e++) {
      size_t at = (size_t)key_hash(t->keys + e * (size_t)t->width, t->width) & (ns - 1);
      while (s[at]) at = (at + 1) & (ns - 1);
      s[at] = e + 1;
    }
    free(t->slots);
    t->slots = s;
    t->nslots = ns;
  }
  const size_t kb = (size_t)t->width * sizeof *key;
  size_t at = (size_t)key_hash(key, t->width) & (t->nslots - 1);
  for (; t->slots[at]; at = (at + 1) & (t->nslots - 1)) {
    size_t e = t->slots[at] - 1;
    if (memcmp(t->keys + e * (size_t)t->width, key, kb) == 0) {
      t->count[e]++;
      return 1;
    }
  }
  if (t->n == t->ecap) {
    size_t nc = t->ecap ? 2 * t->ecap : 256;
    int64_t *k = realloc(t->keys, nc * (kb ? kb : 1));
    if (!k) return 0;
    t->keys = k;
    uint64_t *c = realloc(t->count, nc * sizeof *c);
    if (!c) return 0;
    t->count = c;
    t->ecap = nc;
  }
  if (kb) memcpy(t->keys + t->n * (size_t)t->width, key, kb);
  t->count[t->n] = 1;
  t->slots[at] = ++t->n;
  return 1;
}

static void table_free(shape_table *t) {
  free(t->slots);
  free(t->keys);
  free(t->count);
}

/* ---- the streaming parser ----------------------------------------------------------- */

/* The dims of one part ("5x2"): where the reader is inside it. */
enum { DIMS_EXPECT, DIMS_NUMBER, DIMS_AFTER };

typedef struct shape_log {
  const char *path;
  /* what the first run fixes */
  int ninputs;
  char names[MAX_INPUTS][MAX_NAME];
  int rank[MAX_INPUTS];
  int offset[MAX_INPUTS + 1]; /* of each input's dims in a key */
  char data_dependent[512];
  uint64_t runs;
  shape_table shapes;
  /* position */
  uint64_t line, col;
  /* the current line */
  int comment;          /* inside a '#' line: COMMENT_* */
  size_t tag_pos;       /* bytes of the data-dependent tag matched so far */
  size_t comment_len;
  int64_t row[MAX_COLS];
  int nparts, row_dims;
  int row_rank[MAX_INPUTS];
  char row_names[MAX_INPUTS][MAX_NAME];
  /* the current part */
  uint64_t part_col;
  int part_blank;       /* nothing but blanks so far */
  int named;            /* an '=' was seen: head is the name */
  char head[MAX_NAME];  /* the text so far while it may still be a name */
  size_t head_len;      /* its length, counted on past MAX_NAME - 1 */
  uint64_t head_bad;    /* the column of a control byte in it, else 0 */
  int dstate, prank;   /* the dims state, and the dims read so far */
  int64_t dims[MAX_DIMS];
  uint64_t num, num_col;
  int num_over;         /* the number being read is over INT64_MAX */
  char num_text[32];    /* its first digits, for the message */
  size_t num_len;
  char err[200];        /* the part's first error, reported unless an '=' makes the text a name */
  uint64_t err_col;
} shape_log;

enum { COMMENT_NONE, COMMENT_TAG, COMMENT_COPY, COMMENT_PLAIN };
static const char data_dependent_tag[] = "# data-dependent:";

/* Reports an error at line/col; always returns 0. */
static int fail_at(const shape_log *lg, uint64_t col, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "clbound shapes: %s: line %" PRIu64 ", column %" PRIu64 ": ", lg->path, lg->line, col);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return 0;
}

/* Records the part's first error at column col (reported at the end of the part
 * unless an '=' makes its text a name). */
static void part_error(shape_log *lg, uint64_t col, const char *fmt, ...) {
  if (lg->err[0]) return;
  lg->err_col = col;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(lg->err, sizeof lg->err, fmt, ap);
  va_end(ap);
}

static void describe_byte(int c, char *buf, size_t len) {
  if (c > 32 && c < 127) snprintf(buf, len, "'%c'", c);
  else snprintf(buf, len, "byte 0x%02x", (unsigned)c);
}

static void part_start(shape_log *lg) {
  lg->part_col = lg->col + 1;
  lg->part_blank = 1;
  lg->named = 0;
  lg->head_len = 0;
  lg->head_bad = 0;
  lg->dstate = DIMS_EXPECT;
  lg->prank = 0;
  lg->err[0] = 0;
}

static void number_end(shape_log *lg) {
  lg->dstate = DIMS_AFTER;
  if (lg->num_over) {
    part_error(lg, lg->num_col, "size %s%s is over %" PRId64 ", the largest a dim can be", lg->num_text,
               lg->num_len >= sizeof lg->num_text - 1 ? "..." : "", INT64_MAX);
    return;
  }
  lg->dims[lg->prank++] = (int64_t)lg->num;
}

/* One byte of a part's dims. Sizes are whole numbers in [0, INT64_MAX]; dims
 * are separated by x, ',' or '*' and optional blanks, or by blanks alone. */
static void dims_byte(shape_log *lg, int c) {
  if (lg->err[0]) return;
  const uint64_t col = lg->col;
  if (c >= '0' && c <= '9') {
    const uint64_t d = (uint64_t)(c - '0');
    if (lg->dstate == DIMS_NUMBER) {
      if (lg->num_len < sizeof lg->num_text - 1) {
        lg->num_text[lg->num_len++] = (char)c;
        lg->num_text[lg->num_len] = 0;
      }
      if (lg->num > ((uint64_t)INT64_MAX - d) / 10) lg->num_over = 1;
      else lg->num = lg->num * 10 + d;
      return;
    }
    if (lg->prank == MAX_DIMS) {
      part_error(lg, col, "more than %d dims", MAX_DIMS);
      return;
    }
    lg->num = d;
    lg->num_col = col;
    lg->num_over = 0;
    lg->num_text[0] = (char)c;
    lg->num_text[1] = 0;
    lg->num_len = 1;
    lg->dstate = DIMS_NUMBER;
    return;
  }
  if (c == ' ' || c == '\t' || c == '\r') {
    if (lg->dstate == DIMS_NUMBER) number_end(lg);
    return;
  }
  if (c == 'x' || c == ',' || c == '*') {
    if (lg->dstate == DIMS_NUMBER) number_end(lg);
    if (lg->dstate == DIMS_AFTER) {
      lg->dstate = DIMS_EXPECT;
      return;
    }
  }
  char what[32];
  describe_byte(c, what, sizeof what);
  if (c == '-' || c == '+')
    part_error(lg, col, "%s: a size is a whole number from 0 to %" PRId64 ", with no sign", what, INT64_MAX);
  else
    part_error(lg, col, "%s where a size was expected (a shape reads 32x256, 32,256 or 32 256)", what);
}

/* The end of a part (';' or the end of its line): checks it, adds its dims to the row. */
static int part_end(shape_log *lg) {
  if (lg->part_blank && !lg->named) return 1; /* an empty part, e.g. a trailing ';' */
  if (lg->dstate == DIMS_NUMBER) number_end(lg);
  if (lg->err[0]) return fail_at(lg, lg->err_col, "%s", lg->err);
  int idx = lg->nparts;
  if (idx == MAX_INPUTS) return fail_at(lg, lg->part_col, "more than %d inputs", MAX_INPUTS);
  if (lg->named) snprintf(lg->row_names[idx], MAX_NAME, "%s", lg->head);
  else snprintf(lg->row_names[idx], MAX_NAME, "input%d", idx);
  if (lg->runs > 0) {
    if (idx >= lg->ninputs) return fail_at(lg, lg->part_col, "%d inputs or more, earlier lines %d", idx + 1, lg->ninputs);
    if (lg->prank != lg->rank[idx])
      return fail_at(lg, lg->part_col, "input %s has rank %d, earlier lines rank %d", lg->row_names[idx], lg->prank, lg->rank[idx]);
  }
  lg->row_rank[idx] = lg->prank;
  memcpy(lg->row + lg->row_dims, lg->dims, (size_t)lg->prank * sizeof lg->dims[0]);
  lg->row_dims += lg->prank;
  lg->nparts++;
  return 1;
}

/* The end of a line: one run, unless the line was blank or a comment. */
static int line_end(shape_log *lg) {
  if (lg->comment) {
    lg->comment = 0;
    return 1;
  }
  if (!part_end(lg)) return 0;
  if (lg->nparts == 0) return 1;
  if (lg->runs == 0) {
    lg->ninputs = lg->nparts;
    lg->offset[0] = 0;
    for (int i = 0; i < lg->ninputs; i++) {
      memcpy(lg->names[i], lg->row_names[i], MAX_NAME);
      lg->rank[i] = lg->row_rank[i];
      lg->offset[i + 1] = lg->offset[i] + lg->rank[i];
    }
    lg->shapes.width = lg->row_dims;
  } else if (lg->nparts != lg->ninputs) {
    return fail_at(lg, lg->col, "%d inputs, earlier lines %d", lg->nparts, lg->ninputs);
  }
  if (!table_add(&lg->shapes, lg->row)) return fail_at(lg, 1, "out of memory after %zu unique shapes", lg->shapes.n);
  lg->runs++;
  return 1;
}

static void line_start(shape_log *lg) {
  lg->line++;
  lg->col = 0;
  lg->nparts = 0;
  lg->row_dims = 0;
  lg->comment = 0;
  part_start(lg);
}

/* One byte of the file; 0 when the file is not a shape log. */
static int take(shape_log *lg, int c) {
  if (c == '\n') {
    int ok = line_end(lg);
    line_start(lg);
    return ok;
  }
  lg->col++;
  if (lg->comment == COMMENT_TAG) {
    /* "# data-dependent: ..." names the ops whose sizes depend on data */
    if (c != data_dependent_tag[lg->tag_pos]) lg->comment = COMMENT_PLAIN;
    else if (++lg->tag_pos == sizeof data_dependent_tag - 1) {
      lg->comment = COMMENT_COPY;
      lg->comment_len = 0;
      lg->data_dependent[0] = 0;
    }
    return 1;
  }
  if (lg->comment == COMMENT_COPY) {
    if (lg->comment_len + 1 < sizeof lg->data_dependent && c >= ' ' && c != 127) {
      lg->data_dependent[lg->comment_len++] = (char)c;
      lg->data_dependent[lg->comment_len] = 0;
    }
    return 1;
  }
  if (lg->comment) return 1;
  if (c == '#' && lg->col == 1) {
    lg->comment = COMMENT_TAG;
    lg->tag_pos = 1;
    return 1;
  }
  if (c == ';') {
    if (!part_end(lg)) return 0;
    part_start(lg);
    return 1;
  }
  if (c != ' ' && c != '\t' && c != '\r') lg->part_blank = 0;
  if (c == '=' && !lg->named) {
    if (lg->head_len >= MAX_NAME) return fail_at(lg, lg->part_col, "an input name longer than %d characters", MAX_NAME - 1);
    if (lg->head_bad) return fail_at(lg, lg->head_bad, "a control byte in an input name");
    lg->head[lg->head_len] = 0;
    lg->named = 1;
    lg->dstate = DIMS_EXPECT;
    lg->prank = 0;
    lg->err[0] = 0;
    return 1;
  }
  if (!lg->named) {
    if ((c < ' ' && c != '\t') || c == 127) lg->head_bad = lg->head_bad ? lg->head_bad : lg->col;
    if (lg->head_len < MAX_NAME - 1) lg->head[lg->head_len] = (char)c;
    if (lg->head_len < MAX_NAME) lg->head_len++;
  }
  dims_byte(lg, c);
  return 1;
}

/* Reads the whole stream; 1 when every line was a shape, a comment or blank. */
static int read_log(shape_log *lg, FILE *f) {
  static char buf[1 << 16];
  line_start(lg);
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
    for (size_t i = 0; i < got; i++)
      if (!take(lg, (unsigned char)buf[i])) return 0;
  }
  if (ferror(f)) {
    fprintf(stderr, "clbound shapes: cannot read %s: %s\n", lg->path, strerror(errno));
    return 0;
  }
  return line_end(lg);
}

/* ---- the report ----------------------------------------------------------------------- */

typedef struct value_count {
  int64_t v;
  uint64_t c;
} value_count;

static int cmp_vc(const void *a, const void *b) {
  int64_t x = ((const value_count *)a)->v, y = ((const value_count *)b)->v;
  return x < y ? -1 : x > y;
}

/* The value at 0-based rank `at` of the sorted distribution. */
static int64_t value_at(const value_count *vc, size_t nv, uint64_t at) {
  uint64_t seen = 0;
  for (size_t i = 0; i < nv; i++) {
    seen += vc[i].c;
    if (at < seen) return vc[i].v;
  }
  return vc[nv - 1].v;
}

/* Padding wasted by a ladder: sum(bucket(s) - s) / sum(s), as a fraction. */
static double ladder_waste(const value_count *vc, size_t nv, const int64_t *ladder, size_t nl) {
  double pad = 0, used = 0;
  size_t k = 0;
  for (size_t i = 0; i < nv; i++) {
    while (k + 1 < nl && ladder[k] < vc[i].v) k++;
    int64_t b = ladder[k] >= vc[i].v ? ladder[k] : vc[i].v; /* sizes over the top bucket pad nothing */
    pad += (double)(uint64_t)(b - vc[i].v) * (double)vc[i].c;
    used += (double)vc[i].v * (double)vc[i].c;
  }
  return used > 0 ? pad / used : 0;
}

static void print_shape(const shape_log *lg, const int64_t *key) {
  for (int i = 0; i < lg->ninputs; i++) {
    printf("%s%s=[", i ? " " : "", lg->names[i]);
    for (int d = 0; d < lg->rank[i]; d++) printf("%s%" PRId64, d ? ", " : "", key[lg->offset[i] + d]);
    printf("]");
  }
}

static void print_ladder(const char *what, const int64_t *ladder, size_t nl, double waste) {
  printf("      %s {", what);
  for (size_t k = 0; k < nl; k++) printf("%s%" PRId64, k ? ", " : "", ladder[k]);
  printf("}: %.0f%% padding, %zu plans\n", 100.0 * waste, nl);
}

/* One dim's line and, when it changes, the suggested bounds. vc: room for every unique shape. */
static void report_dim(const shape_log *lg, int col, const char *name, value_count *vc, int nbuckets) {
  const shape_table *t = &lg->shapes;
  for (size_t e = 0; e < t->n; e++) {
    vc[e].v = t->keys[e * (size_t)t->width + (size_t)col];
    vc[e].c = t->count[e];
  }
  qsort(vc, t->n, sizeof *vc, cmp_vc);
  size_t nv = 0;
  double sum = 0;
  for (size_t e = 0; e < t->n; e++) {
    sum += (double)vc[e].v * (double)vc[e].c;
    if (nv > 0 && vc[nv - 1].v == vc[e].v) vc[nv - 1].c += vc[e].c;
    else vc[nv++] = vc[e];
  }
  const uint64_t n = lg->runs;
  const int64_t mn = vc[0].v, mx = vc[nv - 1].v;
  printf("  %-24s %8" PRId64 " %8" PRId64 " %8" PRId64 " %8zu %9.0f%% %9s\n", name, mn, value_at(vc, nv, n / 2), mx, nv,
         mx ? 100.0 * sum / ((double)mx * (double)n) : 100.0, nv > 1 ? "dynamic" : "static");
  if (nv == 1) return;
  /* one bound; a percentile ladder (the ceil(k n / N)-th smallest); powers of two */
  int64_t ladder[64];
  size_t nl = 0;
  for (int k = 1; k <= nbuckets; k++) {
    uint64_t at = ((uint64_t)k * n + (uint64_t)nbuckets - 1) / (uint64_t)nbuckets - 1;
    int64_t v = value_at(vc, nv, at);
    if (nl == 0 || v > ladder[nl - 1]) ladder[nl++] = v;
  }
  int64_t pw[70];
  size_t np = 0;
  if (clb_buckets_pow2(mn > 0 ? mn : 1, mx, pw, sizeof pw / sizeof pw[0], &np) != CLB_OK) np = 0;
  const int64_t one[1] = {mx};
  printf("      one bound %" PRId64 ": %.0f%% padding, 1 plan\n", mx, 100.0 * ladder_waste(vc, nv, one, 1));
  print_ladder("percentile ladder", ladder, nl, ladder_waste(vc, nv, ladder, nl));
  if (np) print_ladder("powers of two", pw, np, ladder_waste(vc, nv, pw, np));
}

static void report(const shape_log *lg, int nbuckets, value_count *vc) {
  const shape_table *t = &lg->shapes;
  const size_t nu = t->n;
  const char *verdict = nu > 20 ? "a lot of dynamicity" : nu > 5 ? "some dynamicity" : nu > 1 ? "a little dynamicity" : "static";
  printf("%" PRIu64 " runs, %zu unique shapes: %s\n", lg->runs, nu, verdict);
  if (lg->data_dependent[0]) printf("ops whose output sizes depend on data:%s\n", lg->data_dependent);
  printf("\nmost frequent shapes:\n");
  /* the ten largest counts; ties go to the shape seen first */
  size_t shown[10];
  size_t ns = 0;
  while (ns < 10 && ns < nu) {
    size_t best = SIZE_MAX;
    for (size_t e = 0; e < nu; e++) {
      int taken = 0;
      for (size_t k = 0; k < ns && !taken; k++) taken = shown[k] == e;
      if (!taken && (best == SIZE_MAX || t->count[e] > t->count[best])) best = e;
    }
    shown[ns++] = best;
    printf("  %6" PRIu64 " x  ", t->count[best]);
    print_shape(lg, t->keys + best * (size_t)t->width);
    printf("\n");
  }
  printf("\nper dim (bound = the largest size seen):\n");
  printf("  %-24s %8s %8s %8s %8s %10s %9s\n", "dim", "min", "median", "max", "unique", "bound use", "verdict");
  for (int i = 0; i < lg->ninputs; i++)
    for (int d = 0; d < lg->rank[i]; d++) {
      char name[96];
      snprintf(name, sizeof name, "dim %d of %s", d, lg->names[i]);
      report_dim(lg, lg->offset[i] + d, name, vc, nbuckets);
    }
}

/* ---- the command ------------------------------------------------------------------------ */

static int usage(FILE *f) {
  fprintf(f, "usage: clbound shapes FILE [--buckets N]\n"
                  "  FILE: a CLBOUND_SHAPE_LOG (name=5x2;name2=10 per run) or a CSV with one shape a line (5,2)\n"
                  "  --buckets N: rungs of the suggested percentile ladder, 1 to 64 (default 4)\n");
  return clb_arg_usage_rc(f);
}

/* A whole decimal number in [lo, hi], or -1 after a message naming the option. */
static int parse_count(const char *opt, const char *s, int lo, int hi) {
  long v = 0;
  const char *p = s;
  int ok = *p != 0;
  for (; ok && *p; p++) {
    ok = *p >= '0' && *p <= '9';
    if (ok) v = v * 10 + (*p - '0');
    if (v > hi) ok = 0;
  }
  if (!ok || v < lo) {
    fprintf(stderr, "clbound shapes: %s takes a whole number from %d to %d, not \"%s\"\n", opt, lo, hi, s);
    return -1;
  }
  return (int)v;
}

int clb_cmd_shapes(int argc, char **argv) {
  const char *path = NULL;
  int nbuckets = 4;
  if (clb_arg_help(argc, argv)) return usage(stdout);
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--buckets") == 0) {
      if (i + 1 == argc) {
        fprintf(stderr, "clbound shapes: --buckets needs a value (a whole number from 1 to 64)\n");
        return 2;
      }
      if ((nbuckets = parse_count("--buckets", argv[++i], 1, 64)) < 0) return 2;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "clbound shapes: unknown option %s\n", argv[i]);
      return usage(stderr);
    } else if (path) {
      fprintf(stderr, "clbound shapes: one FILE only (got %s and %s)\n", path, argv[i]);
      return usage(stderr);
    } else {
      path = argv[i];
    }
  }
  if (!path) return usage(stderr);
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "clbound shapes: cannot open %s: %s\n", path, strerror(errno));
    return 1;
  }
  shape_log *lg = calloc(1, sizeof *lg);
  if (!lg) {
    fclose(f);
    fprintf(stderr, "clbound shapes: out of memory\n");
    return 1;
  }
  lg->path = path;
  int ok = read_log(lg, f);
  fclose(f);
  int rc = 1;
  if (ok && lg->runs == 0) {
    fprintf(stderr, "clbound shapes: %s holds no shapes\n", path);
  } else if (ok) {
    value_count *vc = malloc((lg->shapes.n ? lg->shapes.n : 1) * sizeof *vc);
    if (!vc) {
      fprintf(stderr, "clbound shapes: out of memory for the report of %zu unique shapes\n", lg->shapes.n);
    } else {
      report(lg, nbuckets, vc);
      rc = 0;
    }
    free(vc);
  }
  table_free(&lg->shapes);
  free(lg);
  return rc;
}
