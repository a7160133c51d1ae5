/* cmd-shapes.c: `clbound shapes FILE`: a dynamicity report of the input shapes a
 * graph saw (CLBOUND_SHAPE_LOG) or of a plain CSV of shapes: unique shapes, how
 * much of each bound is used, and suggested bounds and buckets with their waste. */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

#define MAX_INPUTS 16
#define MAX_DIMS 8
#define MAX_NAME 48

/* One observed run: the dims of each input (names from the first line). */
typedef struct shape_row {
  int64_t dims[MAX_INPUTS][MAX_DIMS];
} shape_row;

typedef struct shape_log {
  int ninputs;
  char names[MAX_INPUTS][MAX_NAME];
  int rank[MAX_INPUTS];
  shape_row *rows;
  size_t n, cap;
  char data_dependent[512];
} shape_log;

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Parses "5x2" or "5,2" or "5 2" into dims; returns the rank or -1. */
static int parse_dims(const char *s, int64_t *dims) {
  int r = 0;
  while (*s) {
    while (*s == ' ' || *s == '\t') s++;
    if (!*s || *s == '\n' || *s == '\r') break;
    if (!isdigit((unsigned char)*s)) return -1;
    if (r == MAX_DIMS) return -1;
    dims[r++] = strtoll(s, (char **)&s, 10);
    while (*s == ' ') s++;
    if (*s == 'x' || *s == ',' || *s == '*') s++;
  }
  return r;
}

/* Adds one line: "name=5x2;name2=10" (a shape log) or "5,2" (a CSV of one input). */
static int add_line(shape_log *lg, char *line, int lineno) {
  line[strcspn(line, "\r\n")] = 0;
  if (!*line) return 1;
  if (line[0] == '#') {
    const char *tag = "# data-dependent:";
    if (strncmp(line, tag, strlen(tag)) == 0)
      snprintf(lg->data_dependent, sizeof lg->data_dependent, "%.500s", line + strlen(tag));
    return 1;
  }
  if (lg->n == lg->cap) {
    size_t ncap = lg->cap ? lg->cap * 2 : 256;
    shape_row *p = realloc(lg->rows, ncap * sizeof *p);
    if (!p) return 0;
    lg->rows = p;
    lg->cap = ncap;
  }
  shape_row *row = &lg->rows[lg->n];
  int idx = 0;
  for (char *part = strtok(line, ";"); part; part = strtok(NULL, ";"), idx++) {
    char *eq = strchr(part, '=');
    const char *dims = eq ? eq + 1 : part;
    char name[MAX_NAME];
    if (eq) snprintf(name, sizeof name, "%.*s", (int)(eq - part), part);
    else snprintf(name, sizeof name, "input%d", idx);
    if (idx >= MAX_INPUTS) {
      fprintf(stderr, "clbound shapes: line %d: more than %d inputs\n", lineno, MAX_INPUTS);
      return 0;
    }
    int64_t d[MAX_DIMS];
    int r = parse_dims(dims, d);
    if (r < 0) {
      fprintf(stderr, "clbound shapes: line %d: cannot read \"%s\" as a shape (e.g. 32x256 or 32,256)\n", lineno, dims);
      return 0;
    }
    if (lg->n == 0) {
      if (idx >= lg->ninputs) lg->ninputs = idx + 1;
      snprintf(lg->names[idx], MAX_NAME, "%s", name);
      lg->rank[idx] = r;
    } else if (idx >= lg->ninputs || r != lg->rank[idx]) {
      fprintf(stderr, "clbound shapes: line %d: input %s has rank %d, earlier lines rank %d\n", lineno, name, r,
              idx < lg->ninputs ? lg->rank[idx] : -1);
      return 0;
    }
    memcpy(row->dims[idx], d, sizeof d);
  }
  if (idx != lg->ninputs) {
    fprintf(stderr, "clbound shapes: line %d: %d inputs, earlier lines %d\n", lineno, idx, lg->ninputs);
    return 0;
  }
  lg->n++;
  return 1;
}

static int same_row(const shape_log *lg, const shape_row *a, const shape_row *b) {
  for (int i = 0; i < lg->ninputs; i++)
    for (int d = 0; d < lg->rank[i]; d++)
      if (a->dims[i][d] != b->dims[i][d]) return 0;
  return 1;
}

static void print_row(const shape_log *lg, const shape_row *r) {
  for (int i = 0; i < lg->ninputs; i++) {
    printf("%s%s=[", i ? " " : "", lg->names[i]);
    for (int d = 0; d < lg->rank[i]; d++) printf("%s%lld", d ? ", " : "", (long long)r->dims[i][d]);
    printf("]");
  }
}

static int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

/* Padding wasted by a ladder: sum(bucket(s) - s) / sum(s). */
static double ladder_waste(const int64_t *sorted, size_t n, const int64_t *ladder, int nl) {
  double pad = 0, used = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t b = ladder[nl - 1];
    for (int k = 0; k < nl; k++)
      if (sorted[i] <= ladder[k]) {
        b = ladder[k];
        break;
      }
    pad += (double)(b - sorted[i]);
    used += (double)sorted[i];
  }
  return used > 0 ? pad / used : 0;
}

int clb_cmd_shapes(int argc, char **argv) {
  const char *path = NULL;
  int nbuckets = 4;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--buckets") == 0 && i + 1 < argc) nbuckets = atoi(argv[++i]);
    else if (!path) path = argv[i];
    else path = NULL, i = argc;
  }
  if (!path || nbuckets < 1 || nbuckets > 64) {
    fprintf(stderr, "usage: clbound shapes FILE [--buckets N]\n"
                    "  FILE: a CLBOUND_SHAPE_LOG (name=5x2;name2=10 per run) or a CSV with one shape a line (5,2)\n");
    return 2;
  }
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "clbound shapes: cannot open %s\n", path);
    return 1;
  }
  shape_log lg;
  memset(&lg, 0, sizeof lg);
  char line[4096];
  int lineno = 0, ok = 1;
  while (ok && fgets(line, sizeof line, f)) ok = add_line(&lg, line, ++lineno);
  fclose(f);
  if (!ok || lg.n == 0) {
    if (ok) fprintf(stderr, "clbound shapes: %s holds no shapes\n", path);
    free(lg.rows);
    return 1;
  }
  /* Unique shapes and their counts, most frequent first. */
  size_t *count = calloc(lg.n, sizeof *count), *first = calloc(lg.n, sizeof *first), nu = 0;
  int64_t *vals = malloc(lg.n * sizeof *vals);
  if (!count || !first || !vals) {
    free(count), free(first), free(vals), free(lg.rows);
    return 1;
  }
  for (size_t r = 0; r < lg.n; r++) {
    size_t u = 0;
    while (u < nu && !same_row(&lg, &lg.rows[first[u]], &lg.rows[r])) u++;
    if (u == nu) first[nu++] = r;
    count[u]++;
  }
  const char *verdict = nu > 20 ? "a lot of dynamicity" : nu > 5 ? "some dynamicity" : nu > 1 ? "a little dynamicity" : "static";
  printf("%zu runs, %zu unique shapes: %s\n", lg.n, nu, verdict);
  if (lg.data_dependent[0]) printf("ops whose output sizes depend on data:%s\n", lg.data_dependent);
  printf("\nmost frequent shapes:\n");
  for (int shown = 0; shown < 10 && shown < (int)nu; shown++) {
    size_t best = 0;
    for (size_t u = 1; u < nu; u++)
      if (count[u] > count[best]) best = u;
    printf("  %6zu x  ", count[best]);
    print_row(&lg, &lg.rows[first[best]]);
    printf("\n");
    count[best] = 0;
  }
  printf("\nper dim (bound = the largest size seen):\n");
  printf("  %-24s %8s %8s %8s %8s %10s %9s\n", "dim", "min", "median", "max", "unique", "bound use", "verdict");
  for (int i = 0; i < lg.ninputs; i++) {
    for (int d = 0; d < lg.rank[i]; d++) {
      for (size_t r = 0; r < lg.n; r++) vals[r] = lg.rows[r].dims[i][d];
      qsort(vals, lg.n, sizeof *vals, cmp_i64);
      size_t uniq = 1;
      double sum = (double)vals[0];
      for (size_t r = 1; r < lg.n; r++) {
        uniq += vals[r] != vals[r - 1];
        sum += (double)vals[r];
      }
      int64_t mx = vals[lg.n - 1];
      char name[96];
      snprintf(name, sizeof name, "dim %d of %s", d, lg.names[i]);
      printf("  %-24s %8lld %8lld %8lld %8zu %9.0f%% %9s\n", name, (long long)vals[0], (long long)vals[lg.n / 2],
             (long long)mx, uniq, mx ? 100.0 * sum / ((double)mx * (double)lg.n) : 100.0, uniq > 1 ? "dynamic" : "static");
      if (uniq == 1) continue;
      /* Suggestions: one bound; a percentile ladder; powers of two. */
      int64_t ladder[64];
      int nl = 0;
      for (int k = 1; k <= nbuckets; k++) {
        size_t at = (size_t)ceil((double)k * (double)lg.n / nbuckets) - 1;
        int64_t v = vals[at < lg.n ? at : lg.n - 1];
        if (nl == 0 || v > ladder[nl - 1]) ladder[nl++] = v;
      }
      int64_t pw[64];
      int np = 0;
      for (int64_t p = pow2_ceil(vals[0] ? vals[0] : 1); np < 64; p *= 2) {
        pw[np++] = p < mx ? p : mx; /* the last bucket is the bound */
        if (p >= mx) break;
      }
      int64_t one[1] = {mx};
      printf("      one bound %lld: %.0f%% padding, 1 plan\n", (long long)mx, 100.0 * ladder_waste(vals, lg.n, one, 1));
      printf("      percentile ladder {");
      for (int k = 0; k < nl; k++) printf("%s%lld", k ? ", " : "", (long long)ladder[k]);
      printf("}: %.0f%% padding, %d plans\n", 100.0 * ladder_waste(vals, lg.n, ladder, nl), nl);
      printf("      powers of two {");
      for (int k = 0; k < np; k++) printf("%s%lld", k ? ", " : "", (long long)pw[k]);
      printf("}: %.0f%% padding, %d plans\n", 100.0 * ladder_waste(vals, lg.n, pw, np), np);
    }
  }
  free(count);
  free(first);
  free(vals);
  free(lg.rows);
  return 0;
}
