/* env-doc.c: the table of CLBOUND_* variables in docs/api.md and README.md,
 * generated from the library's own table (runtime/core/env.h, through
 * clb_env_var_at). `env-doc` prints it; `env-doc --check FILE...` fails when a
 * file's table (between the markers) differs from it; `env-doc --write FILE...`
 * rewrites them (`make env-doc`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clbound/clbound.h"

#define BEGIN "<!-- env-table: generated from runtime/core/env.h by `make env-doc`; do not edit -->\n"
#define END "<!-- end env-table -->\n"

static size_t table(char *buf, size_t cap) {
  size_t u = (size_t)snprintf(buf, cap, "| variable | values | default | meaning |\n|---|---|---|---|\n");
  for (size_t i = 0; clb_env_var_at(i); i++) {
    const clb_env_var *v = clb_env_var_at(i);
    u += (size_t)snprintf(buf + u, u < cap ? cap - u : 0, "| `%s` | %s | %s | %s |\n", v->name, v->values, v->default_value,
                          v->meaning);
  }
  return u;
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap + 1);
  size_t got;
  while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      char *nb = realloc(b, (cap *= 2) + 1);
      if (!nb) free(b);
      b = nb;
    }
  }
  fclose(f);
  if (b) b[n] = 0;
  *len = n;
  return b;
}

int main(int argc, char **argv) {
  static char want[1 << 16];
  size_t wlen = table(want, sizeof want);
  if (wlen >= sizeof want) return fprintf(stderr, "env-doc: the table exceeds %zu bytes\n", sizeof want), 1;
  if (argc < 3) {
    fputs(want, stdout);
    return argc == 1 ? 0 : 2;
  }
  int write = strcmp(argv[1], "--write") == 0, rc = 0;
  if (!write && strcmp(argv[1], "--check") != 0) return fprintf(stderr, "usage: env-doc [--check|--write FILE...]\n"), 2;
  for (int a = 2; a < argc; a++) {
    size_t len;
    char *doc = slurp(argv[a], &len);
    char *b = doc ? strstr(doc, BEGIN) : NULL, *e = b ? strstr(b, END) : NULL;
    if (!e) {
      fprintf(stderr, "env-doc: %s: no generated table (the lines %s and %s)\n", argv[a], "<!-- env-table: ... -->", END);
      free(doc);
      rc = 1;
      continue;
    }
    b += strlen(BEGIN);
    size_t have = (size_t)(e - b);
    if (have == wlen && memcmp(b, want, wlen) == 0) {
      free(doc);
      continue;
    }
    if (!write) {
      fprintf(stderr, "env-doc: %s: its table of CLBOUND_* variables differs from the library's (runtime/core/env.h): "
              "run `make env-doc`\n", argv[a]);
      rc = 1;
    } else {
      FILE *f = fopen(argv[a], "wb");
      if (!f || fwrite(doc, 1, (size_t)(b - doc), f) != (size_t)(b - doc) || fwrite(want, 1, wlen, f) != wlen ||
          fputs(e, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "env-doc: cannot write %s\n", argv[a]);
        rc = 1;
      } else {
        printf("env-doc: %s updated\n", argv[a]);
      }
    }
    free(doc);
  }
  return rc;
}
