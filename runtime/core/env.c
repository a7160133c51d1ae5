/* env.c: the one parser of the CLBOUND_* environment variables (env.h holds
 * the table): booleans in every usual spelling, numbers as whole strings within
 * their range, choices by name; anything else warns once and gives the default. */
#define _POSIX_C_SOURCE 200809L
#include "runtime/core/env.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "clbound/runtime.h"

typedef enum kind { BOOL, INT, POW2, ENUM, LIST, TEXT } kind;

static const struct var {
  const char *name;
  kind kind;
  const char *values;
  int64_t def;
  const char *deftext, *meaning;
} vars[CLB_ENV_COUNT] = {
#define CLB_ENV_ROW(id, k, values, def, deftext, meaning) {"CLBOUND_" #id, k, values, def, deftext, meaning},
    CLB_ENV_TABLE(CLB_ENV_ROW)
#undef CLB_ENV_ROW
};

static atomic_int warned[CLB_ENV_COUNT];


static const char *const bool_words[][2] = {{"on", "off"}, {"1", "0"}, {"true", "false"}, {"yes", "no"}};

/* The n-th comma-separated item of list into buf (empty past the end). */
static const char *item(const char *list, int n, char *buf, size_t cap) {
  buf[0] = 0;
  for (int i = 0; *list; i++) {
    size_t len = strcspn(list, ",");
    if (i == n) {
      snprintf(buf, cap, "%.*s", (int)len, list);
      return buf;
    }
    list += len + (list[len] == ',');
  }
  return buf;
}

/* A decimal integer, the whole string (an optional minus sign, digits). */
static int whole_int(const char *s, int64_t *out) {
  if (!(isdigit((unsigned char)s[0]) || (s[0] == '-' && isdigit((unsigned char)s[1])))) return 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (*end) return 0;
  *out = v;
  return 1;
}

static void range(const struct var *v, int64_t *lo, int64_t *hi) {
  char *end = NULL;
  *lo = strtoll(v->values, &end, 10);
  *hi = strtoll(end + 2, NULL, 10); /* "min..max" */
}

/* The accepted values in words, and the public rows (static storage, made once). */
static char accepted_text[CLB_ENV_COUNT][256];
static clb_env_var rows[CLB_ENV_COUNT];
static pthread_once_t accepted_once = PTHREAD_ONCE_INIT;

static void make_accepted(void) {
  static const char *const kinds[] = {"boolean", "integer", "integer", "choice", "list", "text"};
  for (int id = 0; id < CLB_ENV_COUNT; id++) {
    rows[id] = (clb_env_var){vars[id].name, kinds[vars[id].kind], accepted_text[id], vars[id].deftext, vars[id].meaning};
    const struct var *v = &vars[id];
    char *b = accepted_text[id], w[64];
    size_t cap = sizeof accepted_text[id], u = 0;
    int64_t lo, hi;
    switch (v->kind) {
    case BOOL:
      u += (size_t)snprintf(b, cap, "on, off (or 1, 0, true, false, yes, no; any case)");
      for (int i = 0; *item(v->values, i, w, sizeof w); i++) {
        w[strcspn(w, "=")] = 0;
        u += (size_t)snprintf(b + u, u < cap ? cap - u : 0, ", %s", w);
      }
      break;
    case INT:
    case POW2:
      range(v, &lo, &hi);
      snprintf(b, cap, "%s from %lld to %lld", v->kind == INT ? "an integer" : "a power of two", (long long)lo, (long long)hi);
      break;
    case ENUM:
    case LIST:
      u += (size_t)snprintf(b, cap, "%s", v->kind == ENUM ? "one of " : "comma-separated names among ");
      for (int i = 0; *item(v->values, i, w, sizeof w); i++)
        u += (size_t)snprintf(b + u, u < cap ? cap - u : 0, "%s%s", i ? ", " : "", w);
      snprintf(b + u, u < cap ? cap - u : 0, v->kind == ENUM ? " (any case)" : ", or all");
      break;
    case TEXT: snprintf(b, cap, "%s", v->values); break;
    }
  }
}

static const char *accepted(clb_env_id id) {
  pthread_once(&accepted_once, make_accepted);
  return accepted_text[id];
}

void clb__env_warn(clb_env_id id, const char *value, const char *fallback) {
  if (atomic_exchange(&warned[id], 1)) return;
  fprintf(stderr, "clbound: warning: %s=\"%s\" is not %s; using the default (%s)\n", vars[id].name, value, accepted(id),
          fallback);
}

const char *clb__env_text(clb_env_id id) {
  const char *s = getenv(vars[id].name);
  return s && *s ? s : NULL;
}

static int parse(const struct var *v, const char *s, int64_t *out) {
  char w[64];
  int64_t lo, hi;
  switch (v->kind) {
  case BOOL:
    for (size_t i = 0; i < sizeof bool_words / sizeof bool_words[0]; i++)
      for (int k = 0; k < 2; k++)
        if (strcasecmp(s, bool_words[i][k]) == 0) {
          *out = k == 0;
          return 1;
        }
    for (int i = 0; *item(v->values, i, w, sizeof w); i++) {
      char *eq = strchr(w, '=');
      *eq = 0;
      if (strcasecmp(s, w) == 0) {
        *out = strtoll(eq + 1, NULL, 10);
        return 1;
      }
    }
    return 0;
  case INT:
  case POW2:
    range(v, &lo, &hi);
    if (!whole_int(s, out) || *out < lo || *out > hi) return 0;
    return v->kind == INT || (*out & (*out - 1)) == 0;
  case ENUM:
    for (int i = 0; *item(v->values, i, w, sizeof w); i++)
      if (strcasecmp(s, w) == 0) {
        *out = i;
        return 1;
      }
    return 0;
  case LIST: {
    int64_t mask = 0;
    int ok = 1;
    for (const char *p = s; *p;) {
      size_t n = strcspn(p, ",; ");
      int found = n == 3 && strncasecmp(p, "all", 3) == 0;
      if (found) mask = -1;
      for (int i = 0; !found && *item(v->values, i, w, sizeof w); i++)
        if (strlen(w) == n && strncasecmp(p, w, n) == 0) {
          mask |= (int64_t)1 << i;
          found = 1;
        }
      ok &= found || n == 0;
      p += n;
      while (*p == ',' || *p == ';' || *p == ' ') p++;
    }
    *out = mask;
    return ok; /* the names it knows are used, with a warning for the rest */
  }
  case TEXT: *out = 1; return 1;
  }
  return 0;
}

int64_t clb__env_int(clb_env_id id) {
  const struct var *v = &vars[id];
  const char *s = clb__env_text(id);
  if (!s) return v->def;
  int64_t value = v->def;
  if (parse(v, s, &value)) return value;
  if (v->kind == LIST) {
    if (!atomic_exchange(&warned[id], 1))
      fprintf(stderr, "clbound: warning: %s=\"%s\": names other than %s are ignored\n", v->name, s, accepted(id));
    return value;
  }
  clb__env_warn(id, s, v->deftext);
  return v->def;
}

/* ---- the public view of the table --------------------------------------------------- */

static int find(const char *name) {
  for (int id = 0; name && id < CLB_ENV_COUNT; id++)
    if (strcmp(vars[id].name, name) == 0) return id;
  return -1;
}

const clb_env_var *clb_env_var_at(size_t i) {
  if (i >= CLB_ENV_COUNT) return NULL;
  pthread_once(&accepted_once, make_accepted);
  return &rows[i];
}

clb_status clb_env_get(const char *name, int64_t *value) {
  int id = find(name);
  if (id < 0 || !value) return CLB_ERR_INVALID_ARG;
  *value = clb__env_int((clb_env_id)id);
  return CLB_OK;
}

const char *clb_env_text(const char *name) {
  int id = find(name);
  return id < 0 ? NULL : clb__env_text((clb_env_id)id);
}
