/* plan-program.c: one program per graph plan. While a plan's first step is
 * walked without launching anything (clb__plan_collect_begin .. _end), every
 * kernel the ops ask for that the context does not have yet is noted; then the
 * kernel files and options of all of them are merged into one source and built
 * once, and each (file, options) pair of the context's program cache points at
 * its section of the merged program.
 *
 * A section is common.cl + kernels/<file>.cl under its own options, turned into
 * #defines, with every file-scope function, constant and kernel renamed by a
 * macro (`ew_unary` -> `ew_unary__s3`) and every macro undefined after it, so
 * sections built with different defines live side by side. Kernels of the file
 * that the plan never launches lose their `__kernel` qualifier (they become
 * plain functions the compiler drops), so the program holds exactly the kernels
 * launched: PoCL compiles a work-group function for every kernel of a program
 * when its binary is taken for the disk cache. The merged text depends only on
 * the requests in the order the plan makes them, so its cache key is stable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cache/cache.h"


clb_status clb__plan_collect_begin(clb_context_t ctx) {
  clb_status st = clb__cache_open(ctx);
  if (st != CLB_OK) return st;
  clb__plan_collect_free(ctx->collect);
  ctx->collect = calloc(1, sizeof *ctx->collect);
  if (!ctx->collect) return clb__set_error(ctx, CLB_ERR_HOST_OOM, "plan program: out of host memory");
  return CLB_OK;
}

/* ---- the merged source ---------------------------------------------------------- */

typedef struct sbuf {
  char *p;
  size_t len, cap;
  int oom;
} sbuf;

static void put_n(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->len + n + 1 > b->cap) {
    size_t ncap = b->cap ? b->cap : 4096;
    while (b->len + n + 1 > ncap) ncap *= 2;
    char *np = realloc(b->p, ncap);
    if (!np) {
      b->oom = 1;
      return;
    }
    b->p = np;
    b->cap = ncap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
}

static void put(sbuf *b, const char *s) { put_n(b, s, strlen(s)); }

static int is_id(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

/* A list of names, each once. */
typedef struct names {
  char (*v)[64];
  int n, cap;
} names;

static void add_name(names *l, const char *s, size_t n) {
  if (n == 0 || n >= 64) return;
  for (int i = 0; i < l->n; i++)
    if (strlen(l->v[i]) == n && strncmp(l->v[i], s, n) == 0) return;
  if (l->n == l->cap) {
    int ncap = l->cap ? 2 * l->cap : 32;
    char(*nv)[64] = realloc(l->v, (size_t)ncap * sizeof *nv);
    if (!nv) return;
    l->v = nv;
    l->cap = ncap;
  }
  memcpy(l->v[l->n], s, n);
  l->v[l->n][n] = 0;
  l->n++;
}

/* The file-scope names a source defines: functions, kernels and constants (a
 * line at brace depth 0 that starts with a letter: the identifier before its
 * first '(' or '['), and macros (#define NAME). */
static void scan_names(const char *t, size_t len, names *defs, names *macros) {
  int depth = 0;
  const char *end = t + len;
  for (const char *line = t; line < end;) {
    const char *eol = memchr(line, '\n', (size_t)(end - line));
    if (!eol) eol = end;
    const char *p = line;
    while (p < eol && (*p == ' ' || *p == '\t')) p++;
    if (p < eol && *p == '#') {
      p++;
      while (p < eol && *p == ' ') p++;
      if (eol - p > 7 && strncmp(p, "define ", 7) == 0) {
        p += 7;
        while (p < eol && *p == ' ') p++;
        const char *q = p;
        while (q < eol && is_id(*q)) q++;
        add_name(macros, p, (size_t)(q - p));
      }
    } else {
      if (depth == 0 && line < eol && ((*line >= 'a' && *line <= 'z') || (*line >= 'A' && *line <= 'Z') || *line == '_')) {
        const char *q = line;
        while (q < eol && *q != '(' && *q != '[' && *q != '=' && *q != ';') q++;
        if (q < eol && (*q == '(' || *q == '[')) {
          const char *e = q;
          while (e > line && e[-1] == ' ') e--;
          const char *b = e;
          while (b > line && is_id(b[-1])) b--;
          add_name(defs, b, (size_t)(e - b));
        }
      }
      for (const char *c = line; c < eol; c++) {
        if (c + 1 < eol && c[0] == '/' && c[1] == '/') break;
        if (*c == '{') depth++;
        else if (*c == '}') depth--;
      }
    }
    line = eol + 1;
  }
}

static int wanted(const collect_section *s, const char *name, size_t n) {
  for (int k = 0; k < s->nk; k++)
    if (strlen(s->kernels[k]) == n && strncmp(s->kernels[k], name, n) == 0) return 1;
  return 0;
}

/* The body with `__kernel` removed from kernels the plan does not launch (and
 * that declare no __local memory, which only a kernel may). */
static void put_body(sbuf *b, const collect_section *s, const char *t, size_t len) {
  static const char kw[] = "__kernel";
  const size_t kwn = sizeof kw - 1;
  size_t at = 0;
  for (size_t i = 0; i + kwn < len; i++) {
    if (strncmp(t + i, kw, kwn) != 0 || (i > 0 && is_id(t[i - 1])) || is_id(t[i + kwn])) continue;
    size_t j = i + kwn;
    while (j < len && t[j] == ' ') j++;
    if (strncmp(t + j, "void", 4) != 0) continue;
    j += 4;
    while (j < len && t[j] == ' ') j++;
    size_t nb = j;
    while (j < len && is_id(t[j])) j++;
    if (wanted(s, t + nb, j - nb)) continue;
    /* the function's extent: to the brace that closes its first '{' */
    size_t k = j;
    while (k < len && t[k] != '{') k++;
    int depth = 0;
    size_t e = k;
    for (; e < len; e++) {
      if (t[e] == '{') depth++;
      else if (t[e] == '}' && --depth == 0) break;
    }
    int has_local = 0;
    for (size_t q = k; q + 7 < e && !has_local; q++) has_local = strncmp(t + q, "__local", 7) == 0;
    if (has_local) continue;
    put_n(b, t + at, i - at);
    put(b, "        "); /* as wide as the keyword: line and column numbers stay */
    at = i + kwn;
  }
  put_n(b, t + at, len - at);
}

static void put_defines(sbuf *b, const char *options, int undef) {
  const char *p = options;
  while (*p) {
    while (*p == ' ') p++;
    if (!*p) break;
    p += 2; /* -D */
    while (*p == ' ') p++;
    const char *q = p;
    while (*q && *q != ' ' && *q != '=') q++;
    put(b, undef ? "#undef " : "#define ");
    put_n(b, p, (size_t)(q - p));
    if (!undef) {
      put(b, " ");
      if (*q == '=') {
        const char *v = ++q;
        while (*q && *q != ' ') q++;
        put_n(b, v, (size_t)(q - v));
      } else {
        put(b, "1");
      }
    }
    while (*q && *q != ' ') q++;
    put(b, "\n");
    p = q;
  }
}

static void section_suffix(int i, char *buf, size_t cap) { snprintf(buf, cap, "__s%d", i); }

/* Appends section i to the merged source. */
static int put_section(clb_context_t ctx, sbuf *b, int i, const collect_section *s) {
  const clb_kernel_src *common = clb__kernel_src_find("common");
  const clb_kernel_src *body = clb__kernel_src_get(ctx, s->src);
  if (!common || !body) return 0;
  names defs = {0}, macros = {0};
  scan_names(common->text, common->len, &defs, &macros);
  scan_names(body->text, body->len, &defs, &macros);
  char suffix[16], line[160];
  section_suffix(i, suffix, sizeof suffix);
  snprintf(line, sizeof line, "\n/* ---- section %d: %s.cl [", i, s->src);
  put(b, line);
  put(b, s->options);
  put(b, "] ---- */\n");
  put_defines(b, s->options, 0);
  for (int k = 0; k < defs.n; k++) {
    snprintf(line, sizeof line, "#define %s %s%s\n", defs.v[k], defs.v[k], suffix);
    put(b, line);
  }
  put_n(b, common->text, common->len);
  put(b, "\n");
  put_body(b, s, body->text, body->len);
  put(b, "\n");
  for (int k = 0; k < defs.n; k++) {
    snprintf(line, sizeof line, "#undef %s\n", defs.v[k]);
    put(b, line);
  }
  for (int k = 0; k < macros.n; k++) {
    snprintf(line, sizeof line, "#undef %s\n", macros.v[k]);
    put(b, line);
  }
  put_defines(b, s->options, 1);
  free(defs.v);
  free(macros.v);
  return 1;
}

clb_status clb__plan_collect_end(clb_context_t ctx, const char *what, int build) {
  struct clb_plan_collect *c = ctx->collect;
  ctx->collect = NULL;
  if (!c) return CLB_OK;
  clb_status st = CLB_OK;
  if (build && !c->failed && c->n > 0) {
    sbuf b = {0};
    put(&b, "/* clbound: one program for ");
    put(&b, what);
    put(&b, " */\n");
    int ok = 1;
    for (int i = 0; i < c->n && ok; i++) ok = put_section(ctx, &b, i, &c->s[i]);
    if (!ok || b.oom) {
      free(b.p);
      clb__plan_collect_free(c);
      return ok ? clb__set_error(ctx, CLB_ERR_HOST_OOM, "%s: merged program: out of host memory", what)
                : clb__set_error(ctx, CLB_ERR_INTERNAL, "%s: merged program: a kernel source is not embedded", what);
    }
    cl_program p = NULL;
    char *store_key = NULL;
    st = clb__program_from_text(ctx, what, "plan", b.p, b.len, "", &p, &store_key);
    free(b.p);
    if (st == CLB_ERR_BUILD) {
      /* a kernel file this merging does not handle: not the caller's error; the
       * step builds a program per kernel file and options, as without merging */
      clb__log(ctx, CLB_LOG_BUILDS, "%s: the merged program did not build; a program per kernel file instead:\n%s", what,
               ctx->errmsg);
      ctx->errmsg[0] = 0;
      st = CLB_OK;
    } else if (st == CLB_OK) {
      ctx->counters.plan_programs++;
      for (int i = 0; i < c->n && st == CLB_OK; i++) {
        char suffix[16];
        section_suffix(i, suffix, sizeof suffix);
        st = clb__progcache_insert(ctx, what, c->s[i].src, c->s[i].options, p, suffix, i == 0 ? store_key : NULL);
        if (st != CLB_OK && i == 0) free(store_key); /* else the first entry owns it */
      }
      clReleaseProgram(p); /* the entries hold it */
      clb__log(ctx, CLB_LOG_BUILDS, "%s: %d kernel file/option pairs in one program", what, c->n);
    }
  }
  clb__plan_collect_free(c);
  return st;
}
